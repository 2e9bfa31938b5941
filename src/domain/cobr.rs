//! A recurring charge of Pix Automático (`cobr`): one cycle of an authorised recurrence,
//! which the payer's institution settles on its due date. The record, its attempts, its
//! life cycle and its API Pix view.
//!
//! Life cycle (docs/interface.md "Life cycles", docs/decisions.md "Pix Automático: recurring
//! charges"):
//! - `ATIVA` once made: the payer's institution has it and will settle it on its due date
//!   (moved to the next business day with `ajusteDiaUtil`). Its history shows `CRIADA` and
//!   `ATIVA` at the same instant, as the sandbox's institution takes it at once.
//! - On that day (at 00:00 in São Paulo) the institution tries: `CONCLUIDA` when the money
//!   came (a received PIX of the account, whose end-to-end id the attempt names);
//!   `REJEITADA` when the amount is above the payer's maximum; a failure (no funds, a closed
//!   account) is kept as a failed attempt.
//! - After a failure, under `PERMITE_3R_7D` the receiver may ask for up to three retries, on
//!   dates of their own within 7 days of the due date; it stays `ATIVA` meanwhile. Once
//!   nothing is left to try (`NAO_PERMITE`, the third retry failed, or the window ended
//!   with no retry asked for) it is `EXPIRADA`.
//! - `CANCELADA` by the receiver before it is settled, or with its recurrence.
//!
//! Pure: time comes in as an argument; what an attempt meets (the payer's funds) is the
//! sandbox scenario the charge was made with, or, on us, what the payer's account answered
//! ([`Cobr::failed`], [`Cobr::settled`]). From 00:00 of its day an attempt is under way
//! ([`Cobr::under_way`]): the charge settles or fails, and is no longer cancelled.

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::cobv::{payment_day, start_of_day};
use super::events::iso;
use super::money::Money;
use super::recurrence::{
    check_retry, effective_due_date, RecurrenceRejection, RetryPolicy, RETRY_WINDOW_DAYS,
};

/// Characters of a charge's `infoAdicional`.
pub const INFO_ADICIONAL_LEN_MAX: usize = 140;

/// What the sandbox's payer's institution meets when it tries to settle (`X-Sandbox-Scenario`
/// on `PUT`/`POST /cobr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SettleScenario {
    /// The payer has the money: the first attempt settles (the default).
    Pay,
    /// The first `failures` attempts find no funds, later ones settle.
    NoFunds { failures: u32 },
    /// The payer's account is closed: every attempt fails.
    AccountClosed,
}

/// The scenarios a `cobr` takes, as `X-Sandbox-Scenario` names them.
pub const SETTLE_SCENARIOS: &str = "PAY, NO_FUNDS, NO_FUNDS_<1 to 9>, ACCOUNT_CLOSED";

impl SettleScenario {
    pub fn parse(text: &str) -> Option<SettleScenario> {
        match text {
            "PAY" => Some(SettleScenario::Pay),
            "NO_FUNDS" => Some(SettleScenario::NoFunds { failures: u32::MAX }),
            "ACCOUNT_CLOSED" => Some(SettleScenario::AccountClosed),
            other => {
                let n = other.strip_prefix("NO_FUNDS_")?;
                let n: u32 = n.parse().ok().filter(|n| (1..=9).contains(n) && other.len() == 10)?;
                Some(SettleScenario::NoFunds { failures: n })
            }
        }
    }

    /// Why attempt number `n` (from 0) fails, or `None` when it settles.
    fn failure(self, n: usize) -> Option<Failure> {
        match self {
            SettleScenario::Pay => None,
            SettleScenario::NoFunds { failures } => (n < failures as usize).then_some(Failure::NoFunds),
            SettleScenario::AccountClosed => Some(Failure::AccountClosed),
        }
    }
}

/// Why an attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Failure {
    NoFunds,
    AccountClosed,
}

impl Failure {
    pub fn code(self) -> &'static str {
        match self {
            Failure::NoFunds => "SALDO_INSUFICIENTE",
            Failure::AccountClosed => "CONTA_ENCERRADA",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Failure::NoFunds => "the payer's account had not the funds",
            Failure::AccountClosed => "the payer's account is closed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CobrStatus {
    Criada,
    Ativa,
    Concluida,
    Expirada,
    Rejeitada,
    Cancelada,
}

impl CobrStatus {
    pub const ALL: [CobrStatus; 6] = [
        CobrStatus::Criada,
        CobrStatus::Ativa,
        CobrStatus::Concluida,
        CobrStatus::Expirada,
        CobrStatus::Rejeitada,
        CobrStatus::Cancelada,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CobrStatus::Criada => "CRIADA",
            CobrStatus::Ativa => "ATIVA",
            CobrStatus::Concluida => "CONCLUIDA",
            CobrStatus::Expirada => "EXPIRADA",
            CobrStatus::Rejeitada => "REJEITADA",
            CobrStatus::Cancelada => "CANCELADA",
        }
    }

    pub fn parse(text: &str) -> Option<CobrStatus> {
        CobrStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn is_final(self) -> bool {
        !matches!(self, CobrStatus::Criada | CobrStatus::Ativa)
    }
}

/// One try of the payer's institution to settle the charge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The São Paulo date it is (or was) made on.
    pub date: NaiveDate,
    /// A retry the receiver asked for, rather than the due date's own attempt.
    pub retry: bool,
    /// `None` while it is still to be made.
    pub outcome: Option<Outcome>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The money came: the received PIX's end-to-end id.
    Settled {
        end_to_end_id: String,
        at: DateTime<Utc>,
    },
    Failed {
        failure: Failure,
        at: DateTime<Utc>,
    },
}

/// Why a change of a recurring charge is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CobrError {
    #[error("no recurring charge with this txid")]
    NotFound,
    #[error("a recurring charge with this txid exists")]
    TxidTaken,
    #[error("the recurrence is {0}: charges are made only for an APROVADA one")]
    RecurrenceNotApproved(&'static str),
    #[error("cycle {0} of the recurrence already has a charge")]
    CycleCharged(u32),
    #[error("the charge is {0}, so it can no longer change")]
    Final(&'static str),
    #[error("a retry is asked for only after a failed attempt, while none is scheduled")]
    NothingToRetry,
    #[error("its attempt of {0} is under way: the charge settles or fails, and is no longer cancelled")]
    UnderWay(NaiveDate),
    #[error(transparent)]
    Rule(#[from] RecurrenceRejection),
}

/// A recurring charge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cobr {
    pub account_id: u64,
    pub local_id: u64,
    pub txid: String,
    /// The recurrence it charges: its local id and `idRec`.
    pub rec_local: u64,
    pub id_rec: String,
    pub cycle: u32,
    /// The due date as the receiver wrote it, and whether it moves to a business day.
    pub due: NaiveDate,
    pub adjust: bool,
    pub value: Money,
    pub info: Option<String>,
    pub retry: RetryPolicy,
    /// The payer's maximum when the recurrence was authorised with one.
    pub payer_maximum: Option<Money>,
    /// The payer's account, when the payer is an account of this gateway (on us): its
    /// actor is asked for the money on the day, instead of the sandbox's scenario.
    #[serde(default)]
    pub on_us_payer: Option<u64>,
    pub scenario: SettleScenario,
    pub status: CobrStatus,
    pub history: Vec<(CobrStatus, DateTime<Utc>)>,
    pub attempts: Vec<Attempt>,
    /// Why it ended, when it did not settle: (code, description).
    pub closing: Option<(String, String)>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What is due of a charge at an instant (see [`Cobr::step_due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Nothing yet (or it is final).
    Nothing,
    /// The retry window ended after a failure with no retry asked for.
    WindowEnded,
    /// The value is above the payer's maximum: refused, not tried.
    AboveMaximum,
    /// The scheduled attempt, number `n` (from 0).
    Attempt(usize),
}

/// The prefix of the externalId of an on-us charge's debit in the payer's account
/// ([`Cobr::debit_external_id`]). Clients may not begin an externalId with it, so no
/// request of theirs can take the id of a debit before it is made.
pub const DEBIT_EXTERNAL_ID_PREFIX: &str = "pixauto:";

/// The reference an on-us charge's debit carries to the receiver (the credit's `reference`):
/// the charge's local id and txid behind a prefix no txid or cob reference has (`/` is not a
/// txid's), so the receiver finds the charge by its local id, without an index.
const COBR_REFERENCE_PREFIX: &str = "COBR/";

/// The local id and txid of the recurring charge a credit's reference names, if it names one.
pub fn cobr_of_reference(reference: &str) -> Option<(u64, &str)> {
    let (local, txid) = reference.strip_prefix(COBR_REFERENCE_PREFIX)?.split_once('/')?;
    Some((local.parse().ok()?, txid))
}

/// What a due attempt leads to (see [`Cobr::attempt`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempted {
    /// The money comes: the caller credits it as a received PIX with this end-to-end id.
    Settles,
    /// It failed; the charge stays `ATIVA` (a retry may follow) or ends `EXPIRADA`.
    Failed,
    /// Refused by the payer's institution: above the payer's maximum.
    Refused,
}

impl Cobr {
    /// The day the payer's institution settles it (its due date, moved to a business day
    /// when `ajusteDiaUtil`).
    pub fn settles_on(&self) -> NaiveDate {
        effective_due_date(self.due, self.adjust)
    }

    fn step(&mut self, status: CobrStatus, now: DateTime<Utc>) {
        self.status = status;
        self.history.push((status, now));
        self.updated_at = now;
    }

    /// A new charge, `ATIVA` at once (the sandbox's institution takes it when it is made),
    /// with its first attempt scheduled on [`Cobr::settles_on`].
    pub fn activate(&mut self, now: DateTime<Utc>) {
        self.history = vec![(CobrStatus::Criada, now)];
        self.step(CobrStatus::Ativa, now);
        self.attempts = vec![Attempt { date: self.settles_on(), retry: false, outcome: None }];
    }

    fn retries(&self) -> Vec<NaiveDate> {
        self.attempts.iter().filter(|a| a.retry).map(|a| a.date).collect()
    }

    /// The last day a retry may be made on.
    fn last_retry_day(&self) -> NaiveDate {
        self.settles_on() + chrono::Duration::days(RETRY_WINDOW_DAYS)
    }

    /// When the actor must act next: the scheduled attempt's day (00:00 São Paulo), or the
    /// end of the retry window after a failure; `None` once final.
    pub fn deadline(&self) -> Option<DateTime<Utc>> {
        if self.status != CobrStatus::Ativa {
            return None;
        }
        match self.attempts.last() {
            Some(Attempt { outcome: None, date, .. }) => Some(start_of_day(*date)),
            _ => Some(start_of_day(self.last_retry_day() + chrono::Duration::days(1))),
        }
    }

    /// The receiver asks for a retry on `date`, decided on `now`.
    pub fn ask_retry(&mut self, date: NaiveDate, now: DateTime<Utc>) -> Result<(), CobrError> {
        if self.status.is_final() {
            return Err(CobrError::Final(self.status.as_str()));
        }
        if !matches!(self.attempts.last(), Some(Attempt { outcome: Some(Outcome::Failed { .. }), .. })) {
            return Err(CobrError::NothingToRetry);
        }
        check_retry(self.retry, self.settles_on(), &self.retries(), date, payment_day(now))?;
        self.attempts.push(Attempt { date, retry: true, outcome: None });
        self.updated_at = now;
        Ok(())
    }

    /// The date of the scheduled attempt when its day has begun at `now`: from then on the
    /// payer's institution is at it, so it settles or fails and is not cancelled.
    pub fn under_way(&self, now: DateTime<Utc>) -> Option<NaiveDate> {
        match self.attempts.last() {
            Some(Attempt { outcome: None, date, .. })
                if self.status == CobrStatus::Ativa && start_of_day(*date) <= now =>
            {
                Some(*date)
            }
            _ => None,
        }
    }

    /// The receiver cancels it (or its recurrence ended), before it settled and before the
    /// day of its scheduled attempt began.
    pub fn cancel(&mut self, description: &str, now: DateTime<Utc>) -> Result<(), CobrError> {
        if self.status.is_final() {
            return Err(CobrError::Final(self.status.as_str()));
        }
        if let Some(date) = self.under_way(now) {
            return Err(CobrError::UnderWay(date));
        }
        if let Some(a) = self.attempts.last() {
            if a.outcome.is_none() {
                self.attempts.pop();
            }
        }
        self.closing = Some(("CANCELADA".into(), description.into()));
        self.step(CobrStatus::Cancelada, now);
        Ok(())
    }

    /// What is due at `now`, without changing anything.
    pub fn step_due(&self, now: DateTime<Utc>) -> Due {
        let Some(deadline) = self.deadline() else { return Due::Nothing };
        if now < deadline {
            return Due::Nothing;
        }
        match self.attempts.last() {
            None => Due::Nothing,
            Some(a) if a.outcome.is_some() => Due::WindowEnded,
            Some(_) if self.payer_maximum.is_some_and(|max| self.value > max) => Due::AboveMaximum,
            Some(_) => Due::Attempt(self.attempts.iter().filter(|a| a.outcome.is_some()).count()),
        }
    }

    /// What is due at `now`: the scheduled attempt (whose outcome the caller records with
    /// [`Cobr::settled`] or which this records as failed or refused, as the sandbox's
    /// scenario says), or the end of the retry window. `None` when nothing is due.
    pub fn attempt(&mut self, now: DateTime<Utc>) -> Option<Attempted> {
        match self.step_due(now) {
            Due::Nothing => None,
            Due::WindowEnded => {
                self.closing = Some(("SEM_RETENTATIVA".into(), "the retry window ended".into()));
                self.step(CobrStatus::Expirada, now);
                Some(Attempted::Failed)
            }
            Due::AboveMaximum => {
                // Refused, not tried: the attempt never happened.
                self.attempts.pop();
                self.closing =
                    Some(("ACIMA_DO_MAXIMO".into(), "the value is above the payer's maximum".into()));
                self.step(CobrStatus::Rejeitada, now);
                Some(Attempted::Refused)
            }
            Due::Attempt(n) => match self.scenario.failure(n) {
                None => Some(Attempted::Settles),
                Some(failure) => {
                    self.failed(failure, now);
                    Some(Attempted::Failed)
                }
            },
        }
    }

    /// Records the scheduled attempt as failed: the charge stays `ATIVA` while a retry may
    /// still be asked for, else it expires.
    pub fn failed(&mut self, failure: Failure, now: DateTime<Utc>) {
        if let Some(last) = self.attempts.last_mut() {
            last.outcome = Some(Outcome::Failed { failure, at: now });
        }
        let retries_left = self.retry == RetryPolicy::ThreeWithinSevenDays
            && self.retries().len() < super::recurrence::RETRIES_MAX
            && payment_day(now) < self.last_retry_day();
        if retries_left {
            self.updated_at = now;
        } else {
            self.closing = Some((failure.code().into(), failure.description().into()));
            self.step(CobrStatus::Expirada, now);
        }
    }

    /// The externalId of the payer's debit for attempt `n` of an on-us charge: one per
    /// attempt, so asking the payer's account again for the same attempt (after a crash)
    /// finds the debit made, and a retry makes a new one.
    pub fn debit_external_id(&self, n: usize) -> String {
        format!("{DEBIT_EXTERNAL_ID_PREFIX}{}:{}:{}", self.id_rec, self.txid, n + 1)
    }

    /// The reference the payer's debit carries, which names this charge to the receiver.
    pub fn reference(&self) -> String {
        format!("{COBR_REFERENCE_PREFIX}{}/{}", self.local_id, self.txid)
    }

    /// Records the scheduled attempt as settled by the received PIX `end_to_end_id`.
    pub fn settled(&mut self, end_to_end_id: String, now: DateTime<Utc>) {
        if let Some(last) = self.attempts.last_mut() {
            last.outcome = Some(Outcome::Settled { end_to_end_id, at: now });
        }
        self.step(CobrStatus::Concluida, now);
    }

    /// The API Pix view of the charge.
    pub fn to_json(&self) -> Value {
        let tentativas: Vec<Value> = self
            .attempts
            .iter()
            .map(|a| {
                let mut t = json!({
                    "dataLiquidacao": a.date.to_string(),
                    "tipo": if a.retry { "RETENTATIVA" } else { "AGENDADA" },
                });
                match &a.outcome {
                    None => t["status"] = json!("AGENDADA"),
                    Some(Outcome::Settled { end_to_end_id, at }) => {
                        t["status"] = json!("LIQUIDADA");
                        t["endToEndId"] = json!(end_to_end_id);
                        t["data"] = json!(iso(*at));
                    }
                    Some(Outcome::Failed { failure, at }) => {
                        t["status"] = json!("FALHOU");
                        t["motivo"] = json!({"codigo": failure.code(), "descricao": failure.description()});
                        t["data"] = json!(iso(*at));
                    }
                }
                t
            })
            .collect();
        let mut out = json!({
            "txid": self.txid,
            "idRec": self.id_rec,
            "calendario": {
                "criacao": iso(self.created_at),
                "dataDeVencimento": self.due.to_string(),
                "dataLiquidacao": self.settles_on().to_string(),
            },
            "valor": {"original": self.value.to_cents_string()},
            "ajusteDiaUtil": self.adjust,
            "politicaRetentativa": self.retry.as_str(),
            "status": self.status.as_str(),
            "atualizacao": self.history.iter().map(|(s, at)| json!({"status": s.as_str(), "data": iso(*at)})).collect::<Vec<_>>(),
            "tentativas": tentativas,
        });
        if let Some(i) = &self.info {
            out["infoAdicional"] = json!(i);
        }
        if let Some((code, description)) = &self.closing {
            out["encerramento"] = json!({"codigo": code, "descricao": description});
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap()
    }

    fn m(s: &str) -> Money {
        Money::parse(s).unwrap()
    }

    /// A charge due Saturday 12 December 2026 (settled Monday the 14th with the adjustment).
    fn cobr(retry: RetryPolicy, scenario: SettleScenario) -> Cobr {
        let now = start_of_day(d(2026, 12, 3));
        let mut c = Cobr {
            account_id: 1,
            local_id: 5,
            txid: "t".repeat(26),
            rec_local: 4,
            id_rec: "RR".into(),
            cycle: 0,
            due: d(2026, 12, 12),
            adjust: true,
            value: m("30"),
            info: None,
            retry,
            payer_maximum: None,
            on_us_payer: None,
            scenario,
            status: CobrStatus::Criada,
            history: vec![],
            attempts: vec![],
            closing: None,
            created_at: now,
            updated_at: now,
        };
        c.activate(now);
        c
    }

    #[test]
    fn scenarios_parse_as_the_header_names_them() {
        assert_eq!(SettleScenario::parse("PAY"), Some(SettleScenario::Pay));
        assert_eq!(SettleScenario::parse("NO_FUNDS_2"), Some(SettleScenario::NoFunds { failures: 2 }));
        assert_eq!(SettleScenario::parse("NO_FUNDS"), Some(SettleScenario::NoFunds { failures: u32::MAX }));
        for bad in ["NO_FUNDS_0", "NO_FUNDS_10", "NO_FUNDS_", "NO_FUNDS_+1", "pay"] {
            assert_eq!(SettleScenario::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn it_is_attempted_at_the_start_of_its_business_day_not_before() {
        let mut c = cobr(RetryPolicy::NotAllowed, SettleScenario::Pay);
        assert_eq!(c.settles_on(), d(2026, 12, 14));
        let at = start_of_day(d(2026, 12, 14));
        assert_eq!(c.deadline(), Some(at));
        assert_eq!(c.attempt(at - chrono::Duration::seconds(1)), None);
        assert_eq!(c.attempt(at), Some(Attempted::Settles));
        c.settled("E1".into(), at);
        assert_eq!((c.status, c.deadline()), (CobrStatus::Concluida, None));
        assert_eq!(c.to_json()["tentativas"][0]["endToEndId"], "E1");
        assert_eq!(c.attempt(at + chrono::Duration::days(9)), None, "a settled charge is never tried again");
    }

    #[test]
    fn without_retries_a_failure_expires_it() {
        let mut c = cobr(RetryPolicy::NotAllowed, SettleScenario::NoFunds { failures: 1 });
        let at = start_of_day(d(2026, 12, 14));
        assert_eq!(c.attempt(at), Some(Attempted::Failed));
        assert_eq!(c.status, CobrStatus::Expirada);
        assert_eq!(c.to_json()["encerramento"]["codigo"], "SALDO_INSUFICIENTE");
        assert_eq!(c.ask_retry(d(2026, 12, 15), at), Err(CobrError::Final("EXPIRADA")));
    }

    #[test]
    fn a_failure_takes_up_to_three_retries_in_the_window_and_then_expires() {
        let mut c = cobr(RetryPolicy::ThreeWithinSevenDays, SettleScenario::AccountClosed);
        let day = |n: u32| start_of_day(d(2026, 12, n));
        assert_eq!(
            c.ask_retry(d(2026, 12, 15), day(13)),
            Err(CobrError::NothingToRetry),
            "before any failure"
        );
        assert_eq!(c.attempt(day(14)), Some(Attempted::Failed));
        assert_eq!(c.status, CobrStatus::Ativa, "a retry may follow");
        assert_eq!(c.deadline(), Some(day(22)), "the window ends with the 21st, 7 days after the 14th");
        assert_eq!(
            c.ask_retry(d(2026, 12, 22), day(14)),
            Err(CobrError::Rule(RecurrenceRejection::RetryOutsideWindow))
        );
        for n in [15, 17] {
            c.ask_retry(d(2026, 12, n), day(14)).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(
                c.ask_retry(d(2026, 12, 20), day(14)),
                Err(CobrError::NothingToRetry),
                "one at a time"
            );
            assert_eq!(c.attempt(day(n)), Some(Attempted::Failed));
            assert_eq!(c.status, CobrStatus::Ativa);
        }
        c.ask_retry(d(2026, 12, 21), day(17)).unwrap();
        assert_eq!(c.attempt(day(21)), Some(Attempted::Failed));
        assert_eq!(c.status, CobrStatus::Expirada, "the third retry was the last");
        assert_eq!(c.attempts.len(), 4);
    }

    #[test]
    fn a_window_with_no_retry_asked_for_ends_it_and_a_retry_can_settle() {
        let mut c = cobr(RetryPolicy::ThreeWithinSevenDays, SettleScenario::NoFunds { failures: 1 });
        let day = |n: u32| start_of_day(d(2026, 12, n));
        c.attempt(day(14));
        let mut waited = c.clone();
        assert_eq!(waited.attempt(day(22) - chrono::Duration::seconds(1)), None);
        assert_eq!(waited.attempt(day(22)), Some(Attempted::Failed));
        assert_eq!(waited.status, CobrStatus::Expirada);
        c.ask_retry(d(2026, 12, 16), day(15)).unwrap();
        assert_eq!(c.attempt(day(16)), Some(Attempted::Settles));
        c.settled("E2".into(), day(16));
        let v = c.to_json();
        let kinds: Vec<(&str, &str)> = v["tentativas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["tipo"].as_str().unwrap(), t["status"].as_str().unwrap()))
            .collect();
        assert_eq!(kinds, [("AGENDADA", "FALHOU"), ("RETENTATIVA", "LIQUIDADA")]);
    }

    #[test]
    fn above_the_payers_maximum_it_is_refused_and_a_cancelled_one_is_never_tried() {
        let mut c = cobr(RetryPolicy::ThreeWithinSevenDays, SettleScenario::Pay);
        c.payer_maximum = Some(m("29.99"));
        let at = start_of_day(d(2026, 12, 14));
        assert_eq!(c.attempt(at), Some(Attempted::Refused));
        assert_eq!((c.status, c.attempts.len()), (CobrStatus::Rejeitada, 0));
        let mut c = cobr(RetryPolicy::NotAllowed, SettleScenario::Pay);
        c.payer_maximum = Some(m("30"));
        // From the first instant of its day the attempt is under way: no longer cancelled.
        assert_eq!(c.clone().cancel("too late", at), Err(CobrError::UnderWay(d(2026, 12, 14))));
        let before = at - chrono::Duration::seconds(1);
        c.cancel("cancelled by the receiver", before).unwrap();
        assert_eq!((c.status, c.deadline(), c.attempt(at)), (CobrStatus::Cancelada, None, None));
        assert_eq!(c.cancel("again", at), Err(CobrError::Final("CANCELADA")));
    }

    #[test]
    fn an_on_us_attempt_is_due_then_fails_or_settles_as_the_payers_account_answers() {
        let mut c = cobr(RetryPolicy::ThreeWithinSevenDays, SettleScenario::Pay);
        c.on_us_payer = Some(9);
        let at = start_of_day(d(2026, 12, 14));
        assert_eq!(c.step_due(at - chrono::Duration::seconds(1)), Due::Nothing);
        assert_eq!(c.step_due(at), Due::Attempt(0));
        assert_eq!(c.under_way(at), Some(d(2026, 12, 14)));
        // One externalId per attempt, and a reference that names the charge and no cob.
        assert_eq!(c.debit_external_id(0), format!("pixauto:RR:{}:1", c.txid));
        assert_eq!(cobr_of_reference(&c.reference()), Some((5, c.txid.as_str())));
        assert_eq!(cobr_of_reference(&c.txid), None);
        assert_eq!(cobr_of_reference("COBR/x/t"), None);
        c.failed(Failure::NoFunds, at);
        assert_eq!((c.status, c.step_due(at), c.under_way(at)), (CobrStatus::Ativa, Due::Nothing, None));
        let retry = d(2026, 12, 16);
        c.ask_retry(retry, at).unwrap();
        assert_eq!(c.step_due(start_of_day(retry)), Due::Attempt(1));
        assert_ne!(c.debit_external_id(1), c.debit_external_id(0));
        c.settled("E1".into(), start_of_day(retry));
        assert_eq!((c.status, c.step_due(start_of_day(retry))), (CobrStatus::Concluida, Due::Nothing));
        // Above the payer's maximum it is refused before anyone is asked for money.
        let mut c = cobr(RetryPolicy::NotAllowed, SettleScenario::Pay);
        (c.on_us_payer, c.payer_maximum) = (Some(9), Some(m("29.99")));
        assert_eq!(c.step_due(at), Due::AboveMaximum);
    }
}
