//! The simulated SPI's settlement engine: what the central bank's system does with each
//! message a participant sends, without the network or the signatures (the server around it
//! does those).
//!
//! A payment (pacs.008) or a return (pacs.004) from participant P to participant R:
//! 1. is refused at once (an RJCT pacs.002 to P) if it repeats a message or a payment id
//!    already seen, names a participant the SPI does not know, or P's settlement account
//!    cannot cover it (AM04);
//! 2. is forwarded to R, under the SPI's own header (a real participant reads it from its
//!    stream; a virtual one answers at once by its behaviour);
//! 3. R answers with a pacs.002: ACSP settles it (P's settlement account pays R's) and both
//!    are told (ACSC to P, ACCC to R); RJCT is passed to P with R's reason;
//! 4. R does not answer within the time limit: it times out (AB03), and both are told.
//!
//! Money is whole centavos in `i128`; every settlement moves the same amount out of one
//! account and into another, so the sum over all participants never changes
//! ([`Engine::total`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::rail::spi::message::{
    Body, CreditTransfer, Ispb, Message, Priority, Return, StatusReport, TxStatus,
};

/// How a virtual participant (one the simulator plays) answers what it receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Accepts every payment and return (ACSP).
    AcceptAll,
    /// Rejects every payment with this reason (returns are accepted).
    Reject(String),
    /// Never answers: the SPI times the payment out.
    Silent,
}

/// A participant of the simulated SPI.
#[derive(Debug, Clone)]
pub struct Participant {
    pub name: String,
    /// `None`: a real participant, which reads its messages from its stream.
    pub virtual_behaviour: Option<Behaviour>,
    /// Its settlement account at the central bank, in centavos.
    pub balance: i128,
    /// Settled payments and returns it paid and received.
    pub paid: u64,
    pub received: u64,
}

/// Where a payment or return stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Stage {
    /// Forwarded; the receiver has not answered.
    AwaitingReceiver,
    Settled,
    Rejected,
}

/// A payment (pacs.008) or a return (pacs.004) the SPI handled.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Payment {
    /// The end-to-end id of a payment, the return id of a return.
    pub id: String,
    pub original_end_to_end_id: String,
    pub is_return: bool,
    pub payer: String,
    pub receiver: String,
    pub cents: i128,
    pub stage: Stage,
    pub reason: Option<String>,
    /// A payment's `LclInstrm` and `TxId`, as the payer sent them (none for a return).
    pub instrument: Option<String>,
    pub tx_id: Option<String>,
    /// A payment's payer's and receiver's account numbers at their institutions, which the
    /// DICT's tracking graph follows (empty for a return).
    #[serde(skip)]
    pub debtor_account: String,
    #[serde(skip)]
    pub creditor_account: String,
    /// A payment's receiver's CPF or CNPJ and the key it was paid to, as the payer named
    /// them (the DICT marks them when a report of the payment closes agreed).
    #[serde(skip)]
    pub creditor_document: String,
    #[serde(skip)]
    pub creditor_key: Option<String>,
    /// When the SPI settled it.
    #[serde(skip)]
    pub settled_at: Option<DateTime<Utc>>,
    #[serde(skip)]
    pub deadline: Instant,
    /// When it was forwarded to its receiver (its answer's time counts from here).
    #[serde(skip)]
    pub forwarded: Instant,
}

/// How fast real receivers answered, and how often the SPI timed one out.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answers {
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub timeouts: u64,
    /// The answers to payments during whose wait no fault was played and no outage
    /// refused anything (`PUT /sim/faults`, `PUT /sim/icom`): the receiver's own speed.
    pub clean_count: u64,
    pub clean_p99_ms: f64,
    pub clean_max_ms: f64,
}

/// A message the SPI sends to a participant, before it is signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub to: Ispb,
    pub message: Message,
}

/// The engine: participants, what they sent, and what they are owed.
pub struct Engine {
    participants: HashMap<Ispb, Participant>,
    payments: HashMap<String, Payment>,
    deadlines: BTreeSet<(Instant, String)>,
    seen_messages: HashSet<String>,
    timeout: Duration,
    /// How long real receivers took to answer, in microseconds.
    answer_times: hdrhistogram::Histogram<u64>,
    /// The same, of the answers no fault or outage fell within.
    clean_answer_times: hdrhistogram::Histogram<u64>,
    /// When the last fault was played or outage refused something.
    last_fault: Option<Instant>,
    timeouts: u64,
    /// Draws the random tails of the SPI's message ids.
    next_id: u64,
}

fn cents(m: crate::domain::money::Money) -> i128 {
    i128::from(m.cents())
}

impl Engine {
    pub fn new(timeout: Duration) -> Engine {
        Engine {
            participants: HashMap::new(),
            payments: HashMap::new(),
            deadlines: BTreeSet::new(),
            seen_messages: HashSet::new(),
            timeout,
            answer_times: hdrhistogram::Histogram::new(3)
                .unwrap_or_else(|_| unreachable!("3 significant digits")),
            clean_answer_times: hdrhistogram::Histogram::new(3)
                .unwrap_or_else(|_| unreachable!("3 significant digits")),
            last_fault: None,
            timeouts: 0,
            next_id: 0,
        }
    }

    pub fn add_participant(&mut self, ispb: Ispb, p: Participant) {
        self.participants.insert(ispb, p);
    }

    pub fn participant(&self, ispb: &Ispb) -> Option<&Participant> {
        self.participants.get(ispb)
    }

    pub fn participants(&self) -> impl Iterator<Item = (&Ispb, &Participant)> {
        self.participants.iter()
    }

    pub fn set_behaviour(&mut self, ispb: &Ispb, b: Behaviour) -> bool {
        match self.participants.get_mut(ispb) {
            Some(p) if p.virtual_behaviour.is_some() => {
                p.virtual_behaviour = Some(b);
                true
            }
            _ => false,
        }
    }

    pub fn payment(&self, id: &str) -> Option<&Payment> {
        self.payments.get(id)
    }

    /// Every payment and return the SPI handled.
    pub fn payments(&self) -> impl Iterator<Item = &Payment> {
        self.payments.values()
    }

    /// Real receivers' answer times and the timeouts so far.
    pub fn answers(&self) -> Answers {
        let h = &self.answer_times;
        let ms = |us: u64| us as f64 / 1000.0;
        Answers {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
            timeouts: self.timeouts,
            clean_count: self.clean_answer_times.len(),
            clean_p99_ms: ms(self.clean_answer_times.value_at_quantile(0.99)),
            clean_max_ms: ms(self.clean_answer_times.max()),
        }
    }

    /// A fault was played, or an outage refused something, at `at`: answers to payments
    /// waiting then are not counted as clean.
    pub fn disturbed(&mut self, at: Instant) {
        self.last_fault = Some(at);
    }

    /// The sum of every settlement account: the same before and after any settlement.
    pub fn total(&self) -> i128 {
        self.participants.values().map(|p| p.balance).sum()
    }

    /// A fresh message id of the SPI.
    pub fn spi_msg_id(&mut self) -> String {
        self.next_id += 1;
        let mut random = [0u8; 16];
        let _ = getrandom::fill(&mut random);
        random[..8].copy_from_slice(&self.next_id.to_le_bytes());
        crate::rail::spi::message::msg_id(&Ispb::spi(), &random)
    }

    fn to(&mut self, to: &Ispb, now: DateTime<Utc>, body: Body) -> Outgoing {
        let id = self.spi_msg_id();
        Outgoing { to: to.clone(), message: Message::new(Ispb::spi(), to.clone(), id, now, body) }
    }

    fn status(
        &mut self,
        to: &Ispb,
        p: &Payment,
        status: TxStatus,
        reason: Option<&str>,
        now: DateTime<Utc>,
    ) -> Outgoing {
        let report = StatusReport {
            original_instruction_id: p.id.clone(),
            original_end_to_end_id: p.original_end_to_end_id.clone(),
            status,
            reason: reason.map(str::to_owned),
            additional_info: None,
            settled_at: matches!(status, TxStatus::SettledForPayer | TxStatus::SettledForReceiver)
                .then_some(now),
        };
        self.to(to, now, Body::Statuses(vec![report]))
    }

    /// Handles a message participant `from` sent (already checked as a message and as
    /// signed by `from`): answers what the SPI sends because of it.
    pub fn receive(&mut self, from: &Ispb, m: Message, at: Instant, now: DateTime<Utc>) -> Vec<Outgoing> {
        if !self.seen_messages.insert(m.msg_id.clone()) {
            // The same message again (a participant resending what got no 201): done once.
            return Vec::new();
        }
        match m.body {
            Body::CreditTransfers { priority, txs } => {
                let mut out = Vec::new();
                for tx in txs {
                    out.extend(self.payment_in(from, priority, tx, at, now));
                }
                out
            }
            Body::Returns(returns) => {
                let mut out = Vec::new();
                for r in returns {
                    out.extend(self.return_in(from, r, at, now));
                }
                out
            }
            Body::Statuses(reports) => {
                let mut out = Vec::new();
                for r in reports {
                    out.extend(self.answer(from, r, now));
                }
                out
            }
            // Participants do not send admi.002.
            Body::Reject(_) => Vec::new(),
        }
    }

    fn refuse(&mut self, to: &Ispb, id: &str, original: &str, reason: &str, now: DateTime<Utc>) -> Outgoing {
        let report = StatusReport {
            original_instruction_id: id.to_owned(),
            original_end_to_end_id: original.to_owned(),
            status: TxStatus::Rejected,
            reason: Some(reason.to_owned()),
            additional_info: None,
            settled_at: None,
        };
        self.to(to, now, Body::Statuses(vec![report]))
    }

    fn payment_in(
        &mut self,
        from: &Ispb,
        priority: Priority,
        tx: CreditTransfer,
        at: Instant,
        now: DateTime<Utc>,
    ) -> Vec<Outgoing> {
        let id = tx.end_to_end_id.clone();
        if tx.debtor_account.ispb != *from {
            return vec![self.refuse(from, &id, &id, "AGNT", now)];
        }
        let receiver = tx.creditor_account.ispb.clone();
        let p = Payment {
            id: id.clone(),
            original_end_to_end_id: id.clone(),
            is_return: false,
            payer: from.to_string(),
            receiver: receiver.to_string(),
            cents: cents(tx.amount),
            stage: Stage::AwaitingReceiver,
            reason: None,
            instrument: Some(tx.instrument.code().to_owned()),
            tx_id: tx.tx_id.clone(),
            debtor_account: tx.debtor_account.number.clone(),
            creditor_account: tx.creditor_account.number.clone(),
            creditor_document: tx.creditor_document.clone(),
            creditor_key: tx.proxy.clone(),
            settled_at: None,
            deadline: at + self.timeout,
            forwarded: at,
        };
        let proxy = tx.proxy.clone();
        let body = Body::CreditTransfers { priority, txs: vec![tx] };
        self.start(from, &receiver, p, body, proxy.as_deref(), now)
    }

    fn return_in(&mut self, from: &Ispb, r: Return, at: Instant, now: DateTime<Utc>) -> Vec<Outgoing> {
        let id = r.return_id.clone();
        if r.original_creditor_agent != *from {
            return vec![self.refuse(from, &id, &r.original_end_to_end_id, "AGNT", now)];
        }
        // A return goes back along the original payment, which must have settled and been
        // paid to `from`. Whether it exceeds what is left of it is the receiver's to say
        // (AM09 is a receiver's reason in the catalogue).
        let original = self.payments.get(&r.original_end_to_end_id).cloned();
        let receiver = r.original_debtor_agent.clone();
        let refusal = match &original {
            // A payment this simulator never saw (another run's) is taken on trust.
            None => None,
            Some(o) if o.is_return => Some("AG13"),
            Some(o)
                if o.stage != Stage::Settled
                    || o.receiver != from.as_str()
                    || o.payer != receiver.as_str() =>
            {
                Some("CH16")
            }
            Some(_) => None,
        };
        if let Some(reason) = refusal {
            return vec![self.refuse(from, &id, &r.original_end_to_end_id, reason, now)];
        }
        let p = Payment {
            id: id.clone(),
            original_end_to_end_id: r.original_end_to_end_id.clone(),
            is_return: true,
            payer: from.to_string(),
            receiver: receiver.to_string(),
            cents: cents(r.amount),
            stage: Stage::AwaitingReceiver,
            reason: None,
            instrument: None,
            tx_id: None,
            debtor_account: String::new(),
            creditor_account: String::new(),
            creditor_document: String::new(),
            creditor_key: None,
            settled_at: None,
            deadline: at + self.timeout,
            forwarded: at,
        };
        self.start(from, &receiver, p, Body::Returns(vec![r]), None, now)
    }

    /// Registers a payment or return and forwards it to its receiver. A rejecting receiver
    /// rejects with the reason its key names (`ac07@...`: AC07), else its own.
    fn start(
        &mut self,
        from: &Ispb,
        receiver: &Ispb,
        p: Payment,
        body: Body,
        proxy: Option<&str>,
        now: DateTime<Utc>,
    ) -> Vec<Outgoing> {
        let id = p.id.clone();
        if self.payments.contains_key(&id) {
            return vec![self.refuse(from, &id, &p.original_end_to_end_id, "DUPL", now)];
        }
        let Some(r) = self.participants.get(receiver) else {
            return vec![self.refuse(from, &id, &p.original_end_to_end_id, "AGNT", now)];
        };
        if self.participants.get(from).is_none_or(|payer| payer.balance < p.cents) {
            return vec![self.refuse(from, &id, &p.original_end_to_end_id, "AM04", now)];
        }
        let behaviour = r.virtual_behaviour.clone();
        self.deadlines.insert((p.deadline, id.clone()));
        self.payments.insert(id.clone(), p.clone());
        match behaviour {
            None => vec![self.to(receiver, now, body)],
            Some(Behaviour::AcceptAll) => self.settle(&id, now),
            Some(Behaviour::Reject(_)) if p.is_return => self.settle(&id, now),
            Some(Behaviour::Reject(reason)) => {
                let named = proxy
                    .and_then(|k| k.split_once("@rejeita."))
                    .map(|(code, _)| code.to_ascii_uppercase())
                    .filter(|c| c.len() == 4 && c.bytes().all(|b| b.is_ascii_alphanumeric()));
                self.reject(&id, &named.unwrap_or(reason), now)
            }
            Some(Behaviour::Silent) => Vec::new(),
        }
    }

    /// A receiver's answer to a payment or return it was sent.
    fn answer(&mut self, from: &Ispb, r: StatusReport, now: DateTime<Utc>) -> Vec<Outgoing> {
        let id = if r.original_instruction_id.starts_with('D') {
            &r.original_instruction_id
        } else {
            &r.original_end_to_end_id
        };
        let Some(p) = self.payments.get(id) else { return Vec::new() };
        if p.receiver != from.as_str() || p.stage != Stage::AwaitingReceiver {
            return Vec::new();
        }
        let took = u64::try_from(p.forwarded.elapsed().as_micros()).unwrap_or(u64::MAX).max(1);
        let _ = self.answer_times.record(took);
        if self.last_fault.is_none_or(|f| f < p.forwarded) {
            let _ = self.clean_answer_times.record(took);
        }
        let id = id.clone();
        match r.status {
            TxStatus::Accepted => self.settle(&id, now),
            TxStatus::Rejected => {
                let reason = r.reason.unwrap_or_else(|| "DS04".into());
                self.reject(&id, &reason, now)
            }
            // Only the SPI says settled.
            TxStatus::SettledForPayer | TxStatus::SettledForReceiver => Vec::new(),
        }
    }

    fn settle(&mut self, id: &str, now: DateTime<Utc>) -> Vec<Outgoing> {
        let Some(p) = self.payments.get(id).cloned() else { return Vec::new() };
        let (payer, receiver) = (Ispb::parse(&p.payer), Ispb::parse(&p.receiver));
        let (Some(payer), Some(receiver)) = (payer, receiver) else { return Vec::new() };
        if self.participants.get(&payer).is_none_or(|a| a.balance < p.cents) {
            return self.reject(id, "AM04", now);
        }
        if let Some(a) = self.participants.get_mut(&payer) {
            a.balance -= p.cents;
            a.paid += 1;
        }
        if let Some(a) = self.participants.get_mut(&receiver) {
            a.balance += p.cents;
            a.received += 1;
        }
        self.deadlines.remove(&(p.deadline, p.id.clone()));
        if let Some(stored) = self.payments.get_mut(id) {
            stored.stage = Stage::Settled;
            stored.settled_at = Some(now);
        }
        let mut out = Vec::new();
        if self.is_real(&payer) {
            out.push(self.status(&payer, &p, TxStatus::SettledForPayer, None, now));
        }
        if self.is_real(&receiver) {
            out.push(self.status(&receiver, &p, TxStatus::SettledForReceiver, None, now));
        }
        out
    }

    fn reject(&mut self, id: &str, reason: &str, now: DateTime<Utc>) -> Vec<Outgoing> {
        let Some(p) = self.payments.get_mut(id) else { return Vec::new() };
        p.stage = Stage::Rejected;
        p.reason = Some(reason.to_owned());
        let p = p.clone();
        self.deadlines.remove(&(p.deadline, p.id.clone()));
        match Ispb::parse(&p.payer) {
            Some(payer) if self.is_real(&payer) => {
                vec![self.status(&payer, &p, TxStatus::Rejected, Some(reason), now)]
            }
            _ => Vec::new(),
        }
    }

    fn is_real(&self, ispb: &Ispb) -> bool {
        self.participants.get(ispb).is_some_and(|p| p.virtual_behaviour.is_none())
    }

    /// Times out what waited past its deadline (AB03): the payer and a real receiver are
    /// both told, so the receiver drops what it accepted.
    pub fn expire(&mut self, at: Instant, now: DateTime<Utc>) -> Vec<Outgoing> {
        let due: Vec<(Instant, String)> =
            self.deadlines.iter().take_while(|(d, _)| *d <= at).cloned().collect();
        let mut out = Vec::new();
        for key in due {
            self.deadlines.remove(&key);
            let Some(p) = self.payments.get(&key.1).cloned() else { continue };
            if p.stage != Stage::AwaitingReceiver {
                continue;
            }
            self.timeouts += 1;
            out.extend(self.reject(&p.id, "AB03", now));
            if let Some(receiver) = Ispb::parse(&p.receiver).filter(|r| self.is_real(r)) {
                out.push(self.status(&receiver, &p, TxStatus::Rejected, Some("AB03"), now));
            }
        }
        out
    }

    /// When the next deadline falls, if any payment waits.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(d, _)| *d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::money::Money;
    use crate::rail::spi::message::{
        end_to_end_id, msg_id, AccountType, Instrument, Purpose, ReturnReason, UserAccount,
    };

    fn ispb(s: &str) -> Ispb {
        Ispb::parse(s).unwrap()
    }

    fn engine() -> Engine {
        let mut e = Engine::new(Duration::from_secs(10));
        let p = |b: Option<Behaviour>| Participant {
            name: "x".into(),
            virtual_behaviour: b,
            balance: 100_000,
            paid: 0,
            received: 0,
        };
        e.add_participant(ispb("1234ABCD"), p(None));
        e.add_participant(ispb("99999A04"), p(Some(Behaviour::AcceptAll)));
        e.add_participant(ispb("99999A05"), p(Some(Behaviour::Reject("AC06".into()))));
        e.add_participant(ispb("99999A06"), p(Some(Behaviour::Silent)));
        e.add_participant(ispb("5555AAAA"), p(None));
        e
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-26T12:00:00Z").unwrap().with_timezone(&Utc)
    }

    fn pay(from: &str, to: &str, amount: &str, tail: &[u8]) -> Message {
        let from = ispb(from);
        let tx = CreditTransfer {
            end_to_end_id: end_to_end_id('E', &from, now(), tail),
            tx_id: None,
            amount: Money::parse(amount).unwrap(),
            accepted_at: now(),
            instrument: Instrument::Manual,
            initiator: None,
            debtor_name: "A".into(),
            debtor_document: "52998224725".into(),
            debtor_account: UserAccount {
                ispb: from.clone(),
                branch: None,
                number: "1".into(),
                kind: AccountType::Payment,
            },
            creditor_document: "52998224725".into(),
            creditor_account: UserAccount {
                ispb: ispb(to),
                branch: None,
                number: "2".into(),
                kind: AccountType::Current,
            },
            proxy: None,
            purpose: Purpose::Payment,
            remittance: None,
        };
        Message::new(
            from.clone(),
            Ispb::spi(),
            msg_id(&from, tail),
            now(),
            Body::CreditTransfers { priority: Priority::Immediate, txs: vec![tx] },
        )
    }

    fn statuses(out: &[Outgoing], to: &str) -> Vec<(TxStatus, Option<String>)> {
        out.iter()
            .filter(|o| o.to.as_str() == to)
            .flat_map(|o| match &o.message.body {
                Body::Statuses(r) => r.iter().map(|r| (r.status, r.reason.clone())).collect(),
                _ => vec![],
            })
            .collect()
    }

    fn answer(from: &str, e2e: &str, status: TxStatus, reason: Option<&str>) -> Message {
        let report = StatusReport {
            original_instruction_id: e2e.into(),
            original_end_to_end_id: e2e.into(),
            status,
            reason: reason.map(str::to_owned),
            additional_info: None,
            settled_at: None,
        };
        Message::new(
            ispb(from),
            Ispb::spi(),
            msg_id(&ispb(from), e2e.as_bytes()),
            now(),
            Body::Statuses(vec![report]),
        )
    }

    #[test]
    fn a_payment_to_a_virtual_participant_that_accepts_settles_at_once_and_conserves_money() {
        let mut e = engine();
        let total = e.total();
        let out =
            e.receive(&ispb("1234ABCD"), pay("1234ABCD", "99999A04", "10.50", b"a"), Instant::now(), now());
        assert_eq!(statuses(&out, "1234ABCD"), vec![(TxStatus::SettledForPayer, None)]);
        assert_eq!(e.participant(&ispb("1234ABCD")).unwrap().balance, 100_000 - 1_050);
        assert_eq!(e.total(), total);
    }

    #[test]
    fn a_real_receiver_is_sent_the_payment_and_its_answer_settles_or_rejects_it() {
        let mut e = engine();
        let m = pay("1234ABCD", "5555AAAA", "1", b"b");
        let Body::CreditTransfers { txs, .. } = &m.body else { unreachable!() };
        let e2e = txs[0].end_to_end_id.clone();
        let out = e.receive(&ispb("1234ABCD"), m.clone(), Instant::now(), now());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].to.as_str(), "5555AAAA");
        assert_eq!(out[0].message.from, Ispb::spi(), "forwarded under the SPI's header");
        // The same message again does nothing.
        assert!(e.receive(&ispb("1234ABCD"), m, Instant::now(), now()).is_empty());
        // Only the receiver's answer counts.
        assert!(e
            .receive(
                &ispb("1234ABCD"),
                answer("1234ABCD", &e2e, TxStatus::Accepted, None),
                Instant::now(),
                now()
            )
            .is_empty());
        let out = e.receive(
            &ispb("5555AAAA"),
            answer("5555AAAA", &e2e, TxStatus::Accepted, None),
            Instant::now(),
            now(),
        );
        assert_eq!(statuses(&out, "1234ABCD"), vec![(TxStatus::SettledForPayer, None)]);
        assert_eq!(statuses(&out, "5555AAAA"), vec![(TxStatus::SettledForReceiver, None)]);
        assert_eq!(e.participant(&ispb("5555AAAA")).unwrap().balance, 100_100);
        // A second payment the receiver rejects moves nothing.
        let m = pay("1234ABCD", "5555AAAA", "1", b"c");
        let Body::CreditTransfers { txs, .. } = &m.body else { unreachable!() };
        let e2e = txs[0].end_to_end_id.clone();
        e.receive(&ispb("1234ABCD"), m, Instant::now(), now());
        let out = e.receive(
            &ispb("5555AAAA"),
            answer("5555AAAA", &e2e, TxStatus::Rejected, Some("AC03")),
            Instant::now(),
            now(),
        );
        assert_eq!(statuses(&out, "1234ABCD"), vec![(TxStatus::Rejected, Some("AC03".into()))]);
        assert_eq!(e.participant(&ispb("5555AAAA")).unwrap().balance, 100_100);
    }

    #[test]
    fn refusals_rejections_and_timeouts_move_nothing() {
        let mut e = engine();
        let total = e.total();
        let t0 = Instant::now();
        let out = e.receive(&ispb("1234ABCD"), pay("1234ABCD", "99999A05", "1", b"d"), t0, now());
        assert_eq!(statuses(&out, "1234ABCD"), vec![(TxStatus::Rejected, Some("AC06".into()))]);
        let out = e.receive(&ispb("1234ABCD"), pay("1234ABCD", "99999A04", "1000.01", b"e"), t0, now());
        assert_eq!(statuses(&out, "1234ABCD"), vec![(TxStatus::Rejected, Some("AM04".into()))]);
        let out = e.receive(&ispb("1234ABCD"), pay("1234ABCD", "0000ZZZZ", "1", b"f"), t0, now());
        assert_eq!(statuses(&out, "1234ABCD"), vec![(TxStatus::Rejected, Some("AGNT".into()))]);
        // A payment claiming another payer is refused.
        let out = e.receive(&ispb("5555AAAA"), pay("1234ABCD", "99999A04", "1", b"g"), t0, now());
        assert_eq!(statuses(&out, "5555AAAA"), vec![(TxStatus::Rejected, Some("AGNT".into()))]);
        assert!(e.receive(&ispb("1234ABCD"), pay("1234ABCD", "99999A06", "1", b"h"), t0, now()).is_empty());
        assert_eq!(e.next_deadline(), Some(t0 + Duration::from_secs(10)));
        assert!(e.expire(t0 + Duration::from_secs(9), now()).is_empty());
        let out = e.expire(t0 + Duration::from_secs(10), now());
        assert_eq!(statuses(&out, "1234ABCD"), vec![(TxStatus::Rejected, Some("AB03".into()))]);
        assert_eq!(e.next_deadline(), None);
        assert_eq!(e.participant(&ispb("1234ABCD")).unwrap().balance, 100_000);
        assert_eq!(e.total(), total);
    }

    #[test]
    fn a_return_goes_back_along_a_settled_payment_and_its_receiver_answers_it() {
        let mut e = engine();
        let m = pay("1234ABCD", "5555AAAA", "10", b"i");
        let Body::CreditTransfers { txs, .. } = &m.body else { unreachable!() };
        let e2e = txs[0].end_to_end_id.clone();
        e.receive(&ispb("1234ABCD"), m, Instant::now(), now());
        e.receive(
            &ispb("5555AAAA"),
            answer("5555AAAA", &e2e, TxStatus::Accepted, None),
            Instant::now(),
            now(),
        );
        let ret = |amount: &str, tail: &[u8]| {
            let r = Return {
                return_id: end_to_end_id('D', &ispb("5555AAAA"), now(), tail),
                original_end_to_end_id: e2e.clone(),
                amount: Money::parse(amount).unwrap(),
                priority_immediate: true,
                reason: ReturnReason::Requested,
                additional_info: None,
                remittance: None,
                original_debtor_agent: ispb("1234ABCD"),
                original_creditor_agent: ispb("5555AAAA"),
            };
            Message::new(
                ispb("5555AAAA"),
                Ispb::spi(),
                msg_id(&ispb("5555AAAA"), tail),
                now(),
                Body::Returns(vec![r]),
            )
        };
        // Only along a payment the returner received.
        let out = e.receive(&ispb("99999A04"), ret("1", b"r0"), Instant::now(), now());
        assert_eq!(statuses(&out, "99999A04"), vec![(TxStatus::Rejected, Some("AGNT".into()))]);
        let out = e.receive(&ispb("5555AAAA"), ret("4", b"r2"), Instant::now(), now());
        assert_eq!(out.len(), 1, "forwarded to the original payer");
        assert_eq!(out[0].to.as_str(), "1234ABCD");
        let rtr = match &out[0].message.body {
            Body::Returns(r) => r[0].return_id.clone(),
            _ => unreachable!(),
        };
        let out = e.receive(
            &ispb("1234ABCD"),
            answer("1234ABCD", &rtr, TxStatus::Accepted, None),
            Instant::now(),
            now(),
        );
        assert_eq!(statuses(&out, "5555AAAA"), vec![(TxStatus::SettledForPayer, None)]);
        assert_eq!(e.participant(&ispb("1234ABCD")).unwrap().balance, 100_000 - 1_000 + 400);
    }
}
