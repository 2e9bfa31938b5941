//! The settling bank: takes a payment, waits the settle delay, and tells the account actor
//! how it ended, as a message. The outcome is a function of the scenario, the directory and
//! this gateway's own receiving keys, so a payment resubmitted after a restart ends the same
//! way. A payment to a receiving key of an account of this gateway (on us) settles like one
//! to a known key, and its answer names the payee, whom the payer's settlement then owes
//! the credit (`domain::decide::on_us`).
//!
//! Answers wait in one queue ordered by when they are due, behind one timer for the
//! earliest: an actix context polls every timer it holds whenever it wakes, so a timer per
//! payment (thousands in flight under load) cost time that grew with their number.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::{Actor, AsyncContext, Context, Handler, Recipient};

use super::directory::Directory;
use crate::domain::ids::AccountId;
use crate::domain::pix_key::{parse_directory_key, DirectoryKey};
use crate::domain::scenario::PayoutScenario;
use crate::domain::transaction::{gateway_ispb, BankInfo, ErrorCode, Priority, RailOutcome, TxKind};
use crate::rail::{Payout, Settled};

/// What the bank answers of a payment: the payee's institution, or why it failed.
pub type BankAnswer = Result<Option<BankInfo>, ErrorCode>;

/// Which account of this gateway a key is the receiving key of, if any.
pub type OnUsResolver = Arc<dyn Fn(&DirectoryKey) -> Option<AccountId> + Send + Sync>;

/// The institution an on-us payment settles at: this gateway.
pub fn gateway_bank() -> BankInfo {
    BankInfo {
        ispb: gateway_ispb().into(),
        name: "pixgw".into(),
        code: GATEWAY_BANK_CODE.into(),
        branch: None,
        account_number: None,
    }
}

/// The bank code this gateway shows for itself (simulated).
pub const GATEWAY_BANK_CODE: &str = "999";

/// The reason a closed wallet (`--rail none`) gives for a payment out of it.
pub const CLOSED_WALLET_REASON: &str = "NO_RAIL";

pub struct SimulatedBank {
    directory: Arc<Directory>,
    settle_delay: Duration,
    /// Answers not yet due, by (due, arrival order).
    due: BTreeMap<(Instant, u64), (Recipient<Settled>, Settled)>,
    arrivals: u64,
    /// When the timer that is set will fire, if one is.
    wake_at: Option<Instant>,
    on_us: Option<OnUsResolver>,
    /// A closed wallet: only payments on us settle; every other is refused.
    closed: bool,
}

impl SimulatedBank {
    pub fn new(directory: Arc<Directory>, settle_delay: Duration) -> SimulatedBank {
        SimulatedBank {
            directory,
            settle_delay,
            due: BTreeMap::new(),
            arrivals: 0,
            wake_at: None,
            on_us: None,
            closed: false,
        }
    }

    /// A closed wallet (`--rail none`): payments between accounts of this gateway settle
    /// on us; a payment out of it is refused with [`CLOSED_WALLET_REASON`].
    pub fn closed(mut self) -> SimulatedBank {
        self.closed = true;
        self
    }

    /// Settles payments to these receiving keys on us.
    pub fn with_on_us(mut self, resolver: OnUsResolver) -> SimulatedBank {
        self.on_us = Some(resolver);
        self
    }

    /// The outcome of a payment, after how long (None: it never settles), and the payee
    /// when it confirms on us. A refund goes back to the payer's bank: the handler settles
    /// it on us when the payout says the payer is an account of this gateway.
    pub fn decide(
        &self,
        key: Option<&DirectoryKey>,
        scenario: Option<PayoutScenario>,
        immediate: bool,
        refund: bool,
    ) -> Option<(Duration, BankAnswer, Option<AccountId>)> {
        let payee = match (&self.on_us, key) {
            (Some(resolve), Some(k)) if !refund => resolve(k),
            _ => None,
        };
        let base = if immediate { Duration::ZERO } else { self.settle_delay };
        match (payee, scenario) {
            (Some(p), None | Some(PayoutScenario::Confirm | PayoutScenario::ProviderDown)) => {
                Some((base, Ok(Some(gateway_bank())), Some(p)))
            }
            (Some(p), Some(PayoutScenario::Delay(ms))) => {
                Some((Duration::from_millis(ms), Ok(Some(gateway_bank())), Some(p)))
            }
            _ => self.outcome(key, scenario, immediate, refund).map(|(d, r)| (d, r, None)),
        }
    }

    /// Sends every answer that is due, and sets the timer for the next.
    fn fire(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        while let Some(entry) = self.due.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (to, settled) = entry.remove();
            to.do_send(settled);
        }
        self.wake_at = None;
        self.arm(ctx);
    }

    /// Sets the timer for the earliest answer unless one is set for it already.
    fn arm(&mut self, ctx: &mut Context<Self>) {
        let Some(&(next, _)) = self.due.keys().next() else { return };
        if self.wake_at.is_some_and(|at| at <= next) {
            return;
        }
        self.wake_at = Some(next);
        ctx.run_later(next.saturating_duration_since(Instant::now()), |act, ctx| act.fire(ctx));
    }

    /// The outcome of a payment, and after how long (None: it never settles).
    pub fn outcome(
        &self,
        key: Option<&DirectoryKey>,
        scenario: Option<PayoutScenario>,
        immediate: bool,
        refund: bool,
    ) -> Option<(Duration, Result<Option<BankInfo>, ErrorCode>)> {
        let base = if immediate { Duration::ZERO } else { self.settle_delay };
        let entry = key.and_then(|k| self.directory.lookup(k));
        let bank = entry.and_then(|e| self.directory.bank_of(e));
        match scenario {
            Some(PayoutScenario::Stuck) => None,
            Some(PayoutScenario::Reject(code)) => Some((base, Err(code))),
            Some(PayoutScenario::Delay(ms)) => Some((Duration::from_millis(ms), Ok(bank))),
            // PROVIDER_DOWN never reaches the bank; treat it as the default if it does.
            Some(PayoutScenario::Confirm | PayoutScenario::ProviderDown) | None if refund => {
                Some((base, Ok(bank)))
            }
            Some(PayoutScenario::Confirm | PayoutScenario::ProviderDown) | None => {
                Some((base, entry.map(|_| bank).ok_or(ErrorCode::OrderRejected)))
            }
        }
    }
}

impl Actor for SimulatedBank {
    type Context = Context<Self>;
}

impl Handler<Payout> for SimulatedBank {
    type Result = ();

    fn handle(&mut self, msg: Payout, ctx: &mut Context<Self>) {
        let tx = &msg.tx;
        let key = match (&tx.counterpart.key, tx.counterpart.key_type) {
            (Some(k), Some(_)) => parse_directory_key(k).ok(),
            _ => None,
        };
        let immediate = tx.dict.as_ref().is_some_and(|d| d.priority == Priority::High);
        let refund = tx.kind == TxKind::RefundIn;
        let Some((delay, mut result, mut on_us)) = self.decide(key.as_ref(), tx.scenario, immediate, refund)
        else {
            return;
        };
        // A refund of an on-us payment settles on us, back to the account that paid.
        if let (Some(payer), Ok(_)) = (msg.returns_on_us, &result) {
            (result, on_us) = (Ok(Some(gateway_bank())), Some(payer));
        }
        let outcome = match result {
            // A closed wallet lets nothing out: only a payment on us settles.
            Ok(_) if self.closed && on_us.is_none() => RailOutcome {
                result: Err(ErrorCode::OrderRejected),
                reason: Some(CLOSED_WALLET_REASON.into()),
            },
            result => RailOutcome { result, reason: None },
        };
        let settled = Settled { local_id: tx.local_id, outcome, on_us };
        if delay.is_zero() {
            msg.reply_to.do_send(settled);
            return;
        }
        self.arrivals += 1;
        self.due.insert((Instant::now() + delay, self.arrivals), (msg.reply_to, settled));
        self.arm(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::pix_key::DirectoryKeyType;

    fn bank() -> SimulatedBank {
        SimulatedBank::new(Arc::new(Directory::embedded().unwrap()), Duration::from_millis(200))
    }

    /// A payout of 1.00 to no key; `immediate`: a `/dict/pix` transfer of priority HIGH.
    fn payout(
        local_id: u64,
        scenario: Option<PayoutScenario>,
        immediate: bool,
        to: Recipient<Settled>,
    ) -> Payout {
        use crate::domain::money::Money;
        use crate::domain::transaction::{DictDetails, Transaction};
        let mut tx = Transaction::new(
            local_id,
            uuid::Uuid::nil(),
            AccountId::new(1).unwrap(),
            TxKind::CashOut,
            Money::parse("1").unwrap(),
            chrono::Utc::now(),
        );
        tx.scenario = scenario;
        if immediate {
            tx.kind = TxKind::DictPix;
            tx.dict = Some(DictDetails {
                idempotency_key: "k".into(),
                request_hash: "h".into(),
                priority: Priority::High,
                expiration_seconds: 600,
                currency: "BRL".into(),
                provisional_end_to_end_id: String::new(),
            });
        }
        let payer = crate::rail::Payer {
            account: tx.account_id,
            name: "Acme".into(),
            document: "52998224725".into(),
        };
        Payout { tx: Box::new(tx), payer, reply_to: to, returns_on_us: None }
    }

    /// Collects the outcomes it is sent.
    struct Outcomes(Arc<std::sync::Mutex<Vec<Settled>>>, Option<tokio::sync::oneshot::Sender<()>>);

    impl Actor for Outcomes {
        type Context = Context<Self>;
    }

    impl Handler<Settled> for Outcomes {
        type Result = ();

        fn handle(&mut self, msg: Settled, _: &mut Context<Self>) {
            self.0.lock().unwrap().push(msg);
            if let Some(done) = self.1.take() {
                let _ = done.send(());
            }
        }
    }

    #[actix_rt::test]
    async fn a_closed_wallet_settles_on_us_and_refuses_every_payment_out_of_it() {
        let ours = "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c";
        let target = parse_directory_key(ours).unwrap();
        let payee = AccountId::new(7).unwrap();
        let d = Directory::embedded().unwrap();
        let known = d.keys_of_type(DirectoryKeyType::Email)[0].clone();
        for (key, key_type, expected) in [
            (ours.to_owned(), DirectoryKeyType::Evp, RailOutcome::settled(Some(gateway_bank()))),
            (
                known,
                DirectoryKeyType::Email,
                RailOutcome {
                    result: Err(ErrorCode::OrderRejected),
                    reason: Some(CLOSED_WALLET_REASON.into()),
                },
            ),
        ] {
            let got = Arc::new(std::sync::Mutex::new(Vec::new()));
            let (done, finished) = tokio::sync::oneshot::channel();
            let to = Outcomes(Arc::clone(&got), Some(done)).start().recipient();
            let t = target.clone();
            let b = SimulatedBank::new(Arc::new(Directory::embedded().unwrap()), Duration::ZERO)
                .with_on_us(Arc::new(move |k: &DirectoryKey| (*k == t).then_some(payee)))
                .closed()
                .start();
            let mut p = payout(1, None, false, to);
            p.tx.counterpart.key = Some(key);
            p.tx.counterpart.key_type = Some(key_type);
            b.send(p).await.unwrap();
            finished.await.unwrap();
            assert_eq!(got.lock().unwrap()[0].outcome, expected);
        }
    }

    /// Collects the answers it is sent, in order.
    struct Collect(Arc<std::sync::Mutex<Vec<u64>>>, usize, Option<tokio::sync::oneshot::Sender<()>>);

    impl Actor for Collect {
        type Context = Context<Self>;
    }

    impl Handler<Settled> for Collect {
        type Result = ();

        fn handle(&mut self, msg: Settled, _: &mut Context<Self>) {
            let mut got = self.0.lock().unwrap();
            got.push(msg.local_id);
            if got.len() == self.1 {
                if let Some(done) = self.2.take() {
                    let _ = done.send(());
                }
            }
        }
    }

    #[actix_rt::test]
    async fn answers_go_out_in_the_order_they_are_due_whatever_order_they_came_in() {
        let got = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (done, finished) = tokio::sync::oneshot::channel();
        let to = Collect(Arc::clone(&got), 5, Some(done)).start().recipient();
        let b =
            SimulatedBank::new(Arc::new(Directory::embedded().unwrap()), Duration::from_millis(300)).start();
        let submit = |local_id, scenario, immediate| payout(local_id, scenario, immediate, to.clone());
        // Due at 300 ms, 900, 30, 300 (after 1), and at once: wide apart, so a slow machine
        // between two sends cannot reorder them.
        b.send(submit(1, None, false)).await.unwrap();
        b.send(submit(2, Some(PayoutScenario::Delay(900)), false)).await.unwrap();
        b.send(submit(3, Some(PayoutScenario::Delay(30)), false)).await.unwrap();
        b.send(submit(4, None, false)).await.unwrap();
        b.send(submit(5, None, true)).await.unwrap();
        finished.await.unwrap();
        assert_eq!(*got.lock().unwrap(), vec![5, 3, 1, 4, 2]);
    }

    #[test]
    fn outcomes_by_scenario_and_directory() {
        let b = bank();
        let d = Directory::embedded().unwrap();
        let known = d.keys_of_type(DirectoryKeyType::Email)[0].clone();
        let known = parse_directory_key(&known).ok();
        let unknown = parse_directory_key("nobody@nowhere.example").ok();
        let (known, unknown) = (known.as_ref(), unknown.as_ref());
        let ms = Duration::from_millis;
        assert!(matches!(b.outcome(known, None, false, false), Some((d, Ok(Some(_)))) if d == ms(200)));
        assert!(matches!(b.outcome(known, None, true, false), Some((d, Ok(Some(_)))) if d.is_zero()));
        assert_eq!(b.outcome(unknown, None, false, false), Some((ms(200), Err(ErrorCode::OrderRejected))));
        assert_eq!(
            b.outcome(known, Some(PayoutScenario::Reject(ErrorCode::BlockedAccount)), false, false),
            Some((ms(200), Err(ErrorCode::BlockedAccount)))
        );
        assert!(
            matches!(b.outcome(unknown, Some(PayoutScenario::Delay(5)), false, false), Some((d, Ok(None))) if d == ms(5))
        );
        assert_eq!(b.outcome(known, Some(PayoutScenario::Stuck), false, false), None);
        // A refund goes back to the payer, who needs no key in the directory.
        assert_eq!(b.outcome(None, None, false, true), Some((ms(200), Ok(None))));
    }

    #[test]
    fn a_payment_to_a_receiving_key_of_this_gateway_confirms_on_us_unless_a_scenario_says_otherwise() {
        let ours = parse_directory_key("3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c").unwrap();
        let theirs = parse_directory_key("nobody@nowhere.example").unwrap();
        let target = ours.clone();
        let payee = AccountId::new(7).unwrap();
        let b = bank().with_on_us(Arc::new(move |k: &DirectoryKey| (*k == target).then_some(payee)));
        let ms = Duration::from_millis;
        let ok = Some((ms(200), Ok(Some(gateway_bank())), Some(payee)));
        assert_eq!(b.decide(Some(&ours), None, false, false), ok);
        assert_eq!(b.decide(Some(&ours), Some(PayoutScenario::Confirm), false, false), ok);
        assert_eq!(
            b.decide(Some(&ours), Some(PayoutScenario::Delay(5)), false, false),
            Some((ms(5), Ok(Some(gateway_bank())), Some(payee)))
        );
        assert_eq!(
            b.decide(Some(&ours), Some(PayoutScenario::Reject(ErrorCode::BlockedAccount)), false, false),
            Some((ms(200), Err(ErrorCode::BlockedAccount), None)),
            "a rejection owes nothing"
        );
        assert_eq!(b.decide(Some(&ours), Some(PayoutScenario::Stuck), false, false), None);
        assert_eq!(
            b.decide(Some(&ours), None, false, true).map(|o| o.2),
            Some(None),
            "refunds are never on us"
        );
        assert_eq!(
            b.decide(Some(&theirs), None, false, false),
            Some((ms(200), Err(ErrorCode::OrderRejected), None))
        );
    }
}
