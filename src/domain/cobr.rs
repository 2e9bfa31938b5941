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
    check_retry, effective_due_date, AutoRetry, RecurrenceRejection, RetryPolicy, RETRY_WINDOW_DAYS,
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
    /// The day ended without the money (no funds, or a limit): the attempt is `EXPIRADA`
    /// and a retry may follow.
    NoFunds,
    /// The payer's account is closed: the attempt, and with it the charge, is `REJEITADA`.
    AccountClosed,
    /// The value is above the payer's maximum: refused by the payer's institution, so the
    /// attempt and the charge are `REJEITADA`.
    AboveMaximum,
}

impl Failure {
    /// The message catalogue's rejection code, for a failure that is a rejection (`None`:
    /// the attempt expired).
    pub fn rejection_code(self) -> Option<&'static str> {
        match self {
            Failure::NoFunds => None,
            Failure::AccountClosed => Some("AC05"),
            Failure::AboveMaximum => Some("AM02"),
        }
    }

    fn description(self) -> &'static str {
        match self {
            Failure::NoFunds => "the payer's account had not the funds on the day",
            Failure::AccountClosed => "the payer's account is closed",
            Failure::AboveMaximum => "the value is above the maximum the payer set",
        }
    }

    /// Whether it ends the charge (the codes the API Pix says reject the recurring charge).
    fn ends_charge(self) -> bool {
        self.rejection_code().is_some()
    }
}

/// Who asked for a cancellation (the API Pix's `solicitante`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Canceller {
    /// The receiver cancelled the charge or its recurrence (`USUARIO_RECEBEDOR`, `SLCR`).
    Receiver,
    /// The payer cancelled the recurrence or this payment (`USUARIO_PAGADOR`, `SLBD`).
    Payer,
}

impl Canceller {
    fn party(self) -> &'static str {
        match self {
            Canceller::Receiver => "receiver",
            Canceller::Payer => "payer",
        }
    }

    fn solicitante(self) -> &'static str {
        match self {
            Canceller::Receiver => "USUARIO_RECEBEDOR",
            Canceller::Payer => "USUARIO_PAGADOR",
        }
    }

    fn code(self) -> &'static str {
        match self {
            Canceller::Receiver => "SLCR",
            Canceller::Payer => "SLBD",
        }
    }
}

/// How a charge ended without being paid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Closing {
    Cancelled {
        by: Canceller,
        description: String,
    },
    Rejected {
        failure: Failure,
    },
    /// Nothing left to try: no retry allowed, the last one failed, or the window ended.
    Expired {
        description: String,
    },
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
    /// The end-to-end id the payment of this attempt will carry, made when the attempt was
    /// scheduled (records written before it have none until they settle).
    #[serde(default)]
    pub end_to_end_id: Option<String>,
    /// When it was scheduled (asked of the payer's institution).
    #[serde(default)]
    pub scheduled_at: Option<DateTime<Utc>>,
    /// The same day's second try of the payer's institution, in the evening, after the
    /// morning's failed (`tipo` `RIFL`); not one of the receiver's retries.
    #[serde(default)]
    pub evening: bool,
}

/// The hour (São Paulo) of a day's second try, after its first failed at 00:00: the
/// arrangement has the payer's institution try again between 18:00 and 21:00 the same day.
pub const EVENING_ATTEMPT_HOUR: i64 = 18;
/// The end of the evening's window: a first failure seen after it gets no second try.
pub const EVENING_WINDOW_END_HOUR: i64 = 21;

impl Attempt {
    /// When the payer's institution makes it: 00:00 of its day, or the evening's hour.
    pub fn at(&self) -> DateTime<Utc> {
        let hours = if self.evening { EVENING_ATTEMPT_HOUR } else { 0 };
        start_of_day(self.date) + chrono::Duration::hours(hours)
    }
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
    /// The charge was cancelled before the attempt's day.
    Cancelled {
        at: DateTime<Utc>,
    },
}

/// The end-to-end id of attempt `n` (from 0) of the charge with local id `local_id`, made
/// when it is scheduled: `E`, our ISPB, the minute, `C`, the local id in 9 base-62 digits
/// and the attempt's number in one. The letter keeps it apart from a transaction's own ids,
/// so storage indexes the payment that carries it.
pub fn attempt_end_to_end_id(local_id: u64, n: usize, at: DateTime<Utc>) -> String {
    use super::transaction::BASE62;
    let mut tail = [b'0'; 10];
    tail[9] = BASE62[n % 62];
    let mut rest = local_id;
    for d in tail[..9].iter_mut().rev() {
        *d = BASE62[(rest % 62) as usize];
        rest /= 62;
    }
    let tail: String = tail.iter().map(|b| char::from(*b)).collect();
    format!("E{}{}C{tail}", super::transaction::gateway_ispb(), at.format("%Y%m%d%H%M"))
}

/// The hour (São Paulo) of the day before an attempt until which its receiver may cancel it;
/// its payer may until that day ends (docs/decisions.md "Until when a charge is cancelled").
pub const RECEIVER_CANCEL_HOUR: i64 = 22;

/// The moment from which `by` may no longer cancel the attempt of `date`: 22:00 of the day
/// before for the receiver, the start of the day for the payer.
pub fn cancel_deadline(date: NaiveDate, by: Canceller) -> DateTime<Utc> {
    let start = start_of_day(date);
    match by {
        Canceller::Receiver => start - chrono::Duration::hours(24 - RECEIVER_CANCEL_HOUR),
        Canceller::Payer => start,
    }
}

fn cancel_closed_text(date: NaiveDate, by: Canceller) -> String {
    let until = match by {
        Canceller::Receiver => "until 22:00 (São Paulo) of the day before",
        Canceller::Payer => "until the end of the day before",
    };
    format!("its attempt of {date} may be cancelled by the {} only {until}", by.party())
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
    #[error("{}", cancel_closed_text(*.0, *.1))]
    CancelClosed(NaiveDate, Canceller),
    #[error("a retry is the receiver's: the payer cancels only a payment on its due date")]
    RetryNotPayers,
    #[error(transparent)]
    Rule(#[from] RecurrenceRejection),
}

/// Characters of `recebedor.conta`.
pub const RECEIVER_ACCOUNT_LEN_MAX: usize = 20;
/// Characters of `recebedor.agencia`.
pub const RECEIVER_BRANCH_LEN_MAX: usize = 4;
/// Characters of the debtor's `logradouro` and `cidade`, and of its `email`.
pub const DEBTOR_ADDRESS_LEN_MAX: usize = 200;
/// Characters of the debtor's `uf`.
pub const DEBTOR_UF_LEN_MAX: usize = 2;
/// Characters of the debtor's `cep`: 8 digits, or 9 with the hyphen the API Pix's own
/// example writes.
pub const DEBTOR_CEP_LEN_MAX: usize = 9;

/// The kinds of account a receiver names (`recebedor.tipoConta`).
pub const RECEIVER_ACCOUNT_TYPES: [&str; 3] = ["CORRENTE", "POUPANCA", "PAGAMENTO"];

/// The receiver's account a charge names (`recebedor`), as the receiver wrote it. The money
/// goes to the account of this gateway that made the charge; this is what the payer's
/// institution is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiverAccount {
    pub account: String,
    pub account_type: String,
    pub branch: Option<String>,
}

impl ReceiverAccount {
    fn to_json(&self) -> Value {
        let mut r = json!({"conta": self.account, "tipoConta": self.account_type});
        if let Some(b) = &self.branch {
            r["agencia"] = json!(b);
        }
        r
    }
}

/// What the receiver tells of the debtor beyond the recurrence (`devedor`): every member is
/// optional text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DebtorDetails {
    pub email: Option<String>,
    pub street: Option<String>,
    pub city: Option<String>,
    pub uf: Option<String>,
    pub cep: Option<String>,
}

impl DebtorDetails {
    fn to_json(&self) -> Value {
        let mut d = json!({});
        for (name, v) in [
            ("email", &self.email),
            ("logradouro", &self.street),
            ("cidade", &self.city),
            ("uf", &self.uf),
            ("cep", &self.cep),
        ] {
            if let Some(v) = v {
                d[name] = json!(v);
            }
        }
        d
    }
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
    /// Why it ended, when it did not settle.
    #[serde(default, deserialize_with = "closing_of_any_release")]
    pub closing: Option<Closing>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// `recebedor`, when the receiver named its account.
    #[serde(default)]
    pub receiver_account: Option<ReceiverAccount>,
    /// `devedor`, when the receiver wrote it.
    #[serde(default)]
    pub debtor_details: Option<DebtorDetails>,
    /// The receiver as its recurrence names it (name, CPF or CNPJ), which `recebedor` shows
    /// (records written before it have none).
    #[serde(default)]
    pub receiver: Option<(String, String)>,
    /// The debtor's CPF or CNPJ and the receiver's `convenio`, as its recurrence has them:
    /// what `GET /cobr` filters on.
    #[serde(default)]
    pub debtor_document: Option<String>,
    #[serde(default)]
    pub agreement: Option<String>,
    /// The retries the gateway asks for by itself, as its recurrence had them when it was made.
    #[serde(default)]
    pub auto_retry: AutoRetry,
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
        self.attempts = Vec::new();
        self.schedule(self.settles_on(), false, false, now);
    }

    /// Adds an attempt to make on `date` (a receiver's retry, or the day's evening try), with
    /// the end-to-end id its payment will carry.
    fn schedule(&mut self, date: NaiveDate, retry: bool, evening: bool, now: DateTime<Utc>) {
        let e2e = attempt_end_to_end_id(self.local_id, self.attempts.len(), now);
        self.attempts.push(Attempt {
            date,
            retry,
            outcome: None,
            end_to_end_id: Some(e2e),
            scheduled_at: Some(now),
            evening,
        });
    }

    /// The end-to-end id of the PIX that paid it, once paid.
    pub fn paid_end_to_end_id(&self) -> Option<&str> {
        self.attempts.iter().find_map(|a| match &a.outcome {
            Some(Outcome::Settled { end_to_end_id, .. }) => Some(end_to_end_id.as_str()),
            _ => None,
        })
    }

    /// The end-to-end id the scheduled attempt's payment carries, when it has one.
    pub fn due_end_to_end_id(&self) -> Option<&str> {
        self.attempts.last().filter(|a| a.outcome.is_none()).and_then(|a| a.end_to_end_id.as_deref())
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
            Some(a) if a.outcome.is_none() => Some(a.at()),
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
        self.schedule(date, true, false, now);
        self.updated_at = now;
        Ok(())
    }

    /// The date of the scheduled attempt when its day has begun at `now`: from then on the
    /// payer's institution is at it, so it settles or fails and is not cancelled.
    pub fn under_way(&self, now: DateTime<Utc>) -> Option<NaiveDate> {
        match self.attempts.last() {
            Some(a) if a.outcome.is_none() && self.status == CobrStatus::Ativa && a.at() <= now => {
                Some(a.date)
            }
            _ => None,
        }
    }

    /// `by` cancels it (the receiver, or either side with its recurrence), before it
    /// settled and before `by`'s deadline for its scheduled attempt ([`cancel_deadline`]).
    /// The scheduled attempt is kept, `CANCELADA`.
    pub fn cancel(&mut self, by: Canceller, description: &str, now: DateTime<Utc>) -> Result<(), CobrError> {
        if self.status.is_final() {
            return Err(CobrError::Final(self.status.as_str()));
        }
        if let Some(date) = self.under_way(now) {
            return Err(CobrError::UnderWay(date));
        }
        if let Some(a) =
            self.attempts.last().filter(|a| a.outcome.is_none() && now >= cancel_deadline(a.date, by))
        {
            return Err(CobrError::CancelClosed(a.date, by));
        }
        if let Some(a) = self.attempts.last_mut().filter(|a| a.outcome.is_none()) {
            a.outcome = Some(Outcome::Cancelled { at: now });
        }
        self.closing = Some(Closing::Cancelled { by, description: description.into() });
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
                self.closing = Some(Closing::Expired { description: "the retry window ended".into() });
                self.step(CobrStatus::Expirada, now);
                Some(Attempted::Failed)
            }
            Due::AboveMaximum => {
                // Refused by the payer's institution, not tried.
                self.failed(Failure::AboveMaximum, now);
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
        let mut first_of_day = None;
        if let Some(last) = self.attempts.last_mut() {
            last.outcome = Some(Outcome::Failed { failure, at: now });
            first_of_day = (!last.evening).then_some(last.date);
        }
        // The day's first try failed for want of money: the payer's institution tries again
        // that evening, when the evening's window is still ahead.
        let evening_end = |d: NaiveDate| start_of_day(d) + chrono::Duration::hours(EVENING_WINDOW_END_HOUR);
        if let Some(date) = first_of_day.filter(|d| failure == Failure::NoFunds && now < evening_end(*d)) {
            self.schedule(date, false, true, now);
            self.updated_at = now;
            return;
        }
        let retries_left = self.retry == RetryPolicy::ThreeWithinSevenDays
            && self.retries().len() < super::recurrence::RETRIES_MAX
            && payment_day(now) < self.last_retry_day();
        if failure.ends_charge() {
            self.closing = Some(Closing::Rejected { failure });
            self.step(CobrStatus::Rejeitada, now);
        } else if retries_left {
            self.updated_at = now;
            // The gateway's own retry policy asks for the next retry at once.
            let failed_on = self.attempts.last().map_or(payment_day(now), |a| a.date);
            let next = self.auto_retry.next(
                self.retry,
                self.settles_on(),
                &self.retries(),
                failed_on,
                payment_day(now),
            );
            if let Some(date) = next {
                self.schedule(date, true, false, now);
            }
        } else {
            self.closing = Some(Closing::Expired { description: failure.description().into() });
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

    /// The API Pix view of the charge (`CobRCompleta`). `pix` is the received PIX that paid
    /// it, as the API Pix's `pix` array shows it, when the caller has it.
    pub fn to_json(&self) -> Value {
        let tentativas: Vec<Value> = self.attempts.iter().map(attempt_json).collect();
        let mut out = json!({
            "txid": self.txid,
            "idRec": self.id_rec,
            "calendario": {
                "criacao": super::cobv::payment_day(self.created_at).to_string(),
                "dataDeVencimento": self.due.to_string(),
            },
            "valor": {"original": self.value.to_cents_string()},
            "ajusteDiaUtil": self.adjust,
            "politicaRetentativa": self.retry.as_str(),
            "status": self.status.as_str(),
            "atualizacao": self.history.iter().map(|(s, at)| json!({"status": s.as_str(), "data": iso(*at)})).collect::<Vec<_>>(),
            "tentativas": tentativas,
        });
        // The API Pix requires it in every answer: absent from the request, it is the
        // account of this gateway the money goes to.
        out["recebedor"] = match &self.receiver_account {
            Some(r) => r.to_json(),
            None => json!({"conta": self.account_id.to_string(), "tipoConta": "PAGAMENTO"}),
        };
        if let Some((name, document)) = &self.receiver {
            out["recebedor"][super::rec::document_field(document)] = json!(document);
            out["recebedor"]["nome"] = json!(name);
        }
        if let Some(a) = &self.agreement {
            out["recebedor"]["convenio"] = json!(a);
        }
        if let Some(d) = &self.debtor_details {
            out["devedor"] = d.to_json();
        }
        if let Some(i) = &self.info {
            out["infoAdicional"] = json!(i);
        }
        match &self.closing {
            Some(Closing::Cancelled { by, description }) => {
                out["encerramento"] = json!({"cancelamento": {
                    "solicitante": by.solicitante(), "codigo": by.code(), "descricao": description}});
            }
            Some(Closing::Rejected { failure }) => {
                out["encerramento"] = json!({"rejeicao": {
                    "codigo": failure.rejection_code(), "descricao": failure.description()}});
            }
            Some(Closing::Expired { .. }) | None => {}
        }
        out
    }
}

/// One attempt as `CobRTentativas` shows it: `tipo` `AGND` for the due date's own attempt
/// and `NTAG` for a retry the receiver asked for; its status with its history.
fn attempt_json(a: &Attempt) -> Value {
    let mut history: Vec<Value> = Vec::new();
    if let Some(at) = a.scheduled_at {
        history.push(json!({"status": "SOLICITADA", "data": iso(at)}));
        history.push(json!({"status": "AGENDADA", "data": iso(at)}));
    }
    let (status, e2e) = match &a.outcome {
        None => ("AGENDADA", a.end_to_end_id.clone()),
        Some(Outcome::Settled { end_to_end_id, .. }) => ("PAGA", Some(end_to_end_id.clone())),
        Some(Outcome::Failed { failure, .. }) if failure.ends_charge() => {
            ("REJEITADA", a.end_to_end_id.clone())
        }
        Some(Outcome::Failed { .. }) => ("EXPIRADA", a.end_to_end_id.clone()),
        Some(Outcome::Cancelled { .. }) => ("CANCELADA", a.end_to_end_id.clone()),
    };
    let ended = match &a.outcome {
        Some(Outcome::Settled { at, .. } | Outcome::Failed { at, .. } | Outcome::Cancelled { at }) => {
            Some(*at)
        }
        None => None,
    };
    if let Some(at) = ended {
        history.push(json!({"status": status, "data": iso(at)}));
    }
    let mut t = json!({
        "dataLiquidacao": a.date.to_string(),
        "tipo": match (a.evening, a.retry) {
            (true, _) => "RIFL",
            (false, true) => "NTAG",
            (false, false) => "AGND",
        },
        "status": status,
        "atualizacao": history,
    });
    if let Some(e2e) = e2e {
        t["endToEndId"] = json!(e2e);
    }
    if let Some(Outcome::Failed { failure, .. }) = &a.outcome {
        if let Some(code) = failure.rejection_code() {
            t["rejeicao"] = json!({"codigo": code, "descricao": failure.description()});
        }
    }
    t
}

/// Reads the closing of a charge written by any release: the first releases wrote a
/// (code, description) pair.
fn closing_of_any_release<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Closing>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Any {
        Now(Closing),
        Pair(String, String),
    }
    Ok(Option::<Any>::deserialize(d)?.map(|any| match any {
        Any::Now(c) => c,
        Any::Pair(code, description) => match code.as_str() {
            "CANCELADA" => Closing::Cancelled { by: Canceller::Receiver, description },
            "ACIMA_DO_MAXIMO" => Closing::Rejected { failure: Failure::AboveMaximum },
            "CONTA_ENCERRADA" => Closing::Rejected { failure: Failure::AccountClosed },
            _ => Closing::Expired { description },
        },
    }))
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
            receiver_account: None,
            debtor_details: None,
            receiver: None,
            debtor_document: None,
            agreement: None,
            auto_retry: AutoRetry::default(),
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
    fn without_retries_a_failure_expires_it_after_the_days_evening_try() {
        let mut c = cobr(RetryPolicy::NotAllowed, SettleScenario::NoFunds { failures: 2 });
        let at = start_of_day(d(2026, 12, 14));
        assert_eq!(c.attempt(at), Some(Attempted::Failed));
        assert_eq!(c.status, CobrStatus::Ativa, "the evening's try is still to come");
        let evening = at + chrono::Duration::hours(EVENING_ATTEMPT_HOUR);
        assert_eq!(
            (c.deadline(), c.under_way(evening - chrono::Duration::seconds(1))),
            (Some(evening), None)
        );
        assert_eq!(c.attempt(evening - chrono::Duration::seconds(1)), None);
        assert_eq!(c.attempt(evening), Some(Attempted::Failed));
        assert_eq!(c.status, CobrStatus::Expirada);
        let v = c.to_json();
        assert_eq!(v["tentativas"][1]["tipo"], "RIFL", "{v}");
        // A morning's failure known only after the evening's window (the actor was down):
        // no second try that day.
        let mut late = cobr(RetryPolicy::NotAllowed, SettleScenario::NoFunds { failures: 2 });
        late.failed(Failure::NoFunds, at + chrono::Duration::hours(EVENING_WINDOW_END_HOUR));
        assert_eq!((late.status, late.attempts.len()), (CobrStatus::Expirada, 1));
        assert_eq!(v["tentativas"][1]["dataLiquidacao"], "2026-12-14");
        assert_eq!(v["tentativas"][0]["status"], "EXPIRADA", "the day ended without the money");
        assert_eq!((v.get("encerramento"), v["tentativas"][0].get("rejeicao")), (None, None), "{v}");
        assert_eq!(c.ask_retry(d(2026, 12, 15), at), Err(CobrError::Final("EXPIRADA")));
    }

    #[test]
    fn a_failure_takes_up_to_three_retries_in_the_window_and_then_expires() {
        let mut c = cobr(RetryPolicy::ThreeWithinSevenDays, SettleScenario::NoFunds { failures: u32::MAX });
        let day = |n: u32| start_of_day(d(2026, 12, n));
        assert_eq!(
            c.ask_retry(d(2026, 12, 15), day(13)),
            Err(CobrError::NothingToRetry),
            "before any failure"
        );
        let evening = |n: u32| day(n) + chrono::Duration::hours(EVENING_ATTEMPT_HOUR);
        assert_eq!(c.attempt(day(14)), Some(Attempted::Failed));
        assert_eq!(
            c.ask_retry(d(2026, 12, 15), day(14)),
            Err(CobrError::NothingToRetry),
            "the evening's try first"
        );
        assert_eq!(c.attempt(evening(14)), Some(Attempted::Failed));
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
            assert_eq!(c.attempt(evening(n)), Some(Attempted::Failed), "a retry's day has its evening too");
            assert_eq!(c.status, CobrStatus::Ativa);
        }
        c.ask_retry(d(2026, 12, 21), day(17)).unwrap();
        assert_eq!(c.attempt(day(21)), Some(Attempted::Failed));
        assert_eq!(c.attempt(evening(21)), Some(Attempted::Failed));
        assert_eq!(c.status, CobrStatus::Expirada, "the third retry was the last");
        assert_eq!(c.attempts.len(), 8, "four days, two tries each");
        let e2e: std::collections::HashSet<_> =
            c.attempts.iter().map(|a| a.end_to_end_id.clone().unwrap()).collect();
        assert_eq!(e2e.len(), 8, "an end-to-end id per attempt");
    }

    #[test]
    fn a_closed_account_rejects_the_attempt_and_the_charge_with_the_catalogues_code() {
        let mut c = cobr(RetryPolicy::ThreeWithinSevenDays, SettleScenario::AccountClosed);
        assert_eq!(c.attempt(start_of_day(d(2026, 12, 14))), Some(Attempted::Failed));
        assert_eq!(c.status, CobrStatus::Rejeitada, "no retry: the account is closed");
        let v = c.to_json();
        assert_eq!(v["encerramento"]["rejeicao"]["codigo"], "AC05", "{v}");
        assert_eq!(v["tentativas"][0]["status"], "REJEITADA");
        assert_eq!(v["tentativas"][0]["rejeicao"]["codigo"], "AC05");
        assert_eq!(
            c.ask_retry(d(2026, 12, 15), start_of_day(d(2026, 12, 14))),
            Err(CobrError::Final("REJEITADA"))
        );
    }

    #[test]
    fn an_attempt_shows_the_api_pixs_shape_with_its_end_to_end_id_from_the_start() {
        let c = cobr(RetryPolicy::NotAllowed, SettleScenario::Pay);
        let v = c.to_json();
        let t = &v["tentativas"][0];
        assert_eq!((t["tipo"].as_str(), t["status"].as_str()), (Some("AGND"), Some("AGENDADA")));
        let e2e = t["endToEndId"].as_str().unwrap();
        assert_eq!(e2e.len(), 32);
        assert_eq!(Some(e2e), c.due_end_to_end_id());
        assert_eq!(
            super::super::transaction::local_id_in_end_to_end(e2e),
            None,
            "not a transaction's own id"
        );
        let steps: Vec<&str> =
            t["atualizacao"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
        assert_eq!(steps, ["SOLICITADA", "AGENDADA"]);
        assert_eq!(v["calendario"]["criacao"], "2026-12-03", "a date");
        assert_eq!(v["recebedor"], json!({"conta": "1", "tipoConta": "PAGAMENTO"}));
        assert_ne!(attempt_end_to_end_id(5, 0, c.created_at), attempt_end_to_end_id(5, 1, c.created_at));
        assert_ne!(attempt_end_to_end_id(5, 0, c.created_at), attempt_end_to_end_id(6, 0, c.created_at));
    }

    #[test]
    fn a_closing_written_by_the_first_releases_reads_back() {
        let mut v = serde_json::to_value(cobr(RetryPolicy::NotAllowed, SettleScenario::Pay)).unwrap();
        for (pair, closing) in [
            (("CANCELADA", "x"), Closing::Cancelled { by: Canceller::Receiver, description: "x".into() }),
            (("ACIMA_DO_MAXIMO", "x"), Closing::Rejected { failure: Failure::AboveMaximum }),
            (("SEM_RETENTATIVA", "x"), Closing::Expired { description: "x".into() }),
        ] {
            v["closing"] = json!([pair.0, pair.1]);
            let back: Cobr = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(back.closing, Some(closing));
        }
        v["closing"] = Value::Null;
        assert_eq!(serde_json::from_value::<Cobr>(v).unwrap().closing, None);
    }

    #[test]
    fn a_window_with_no_retry_asked_for_ends_it_and_a_retry_can_settle() {
        let mut c = cobr(RetryPolicy::ThreeWithinSevenDays, SettleScenario::NoFunds { failures: 2 });
        let day = |n: u32| start_of_day(d(2026, 12, n));
        c.attempt(day(14));
        c.attempt(day(14) + chrono::Duration::hours(EVENING_ATTEMPT_HOUR));
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
        assert_eq!(kinds, [("AGND", "EXPIRADA"), ("RIFL", "EXPIRADA"), ("NTAG", "PAGA")]);
    }

    #[test]
    fn above_the_payers_maximum_it_is_refused_and_a_cancelled_one_is_never_tried() {
        let mut c = cobr(RetryPolicy::ThreeWithinSevenDays, SettleScenario::Pay);
        c.payer_maximum = Some(m("29.99"));
        let at = start_of_day(d(2026, 12, 14));
        assert_eq!(c.attempt(at), Some(Attempted::Refused));
        assert_eq!((c.status, c.attempts.len()), (CobrStatus::Rejeitada, 1));
        let v = c.to_json();
        assert_eq!(v["encerramento"]["rejeicao"]["codigo"], "AM02", "{v}");
        assert_eq!(
            (v["tentativas"][0]["status"].as_str(), v["tentativas"][0]["rejeicao"]["codigo"].as_str()),
            (Some("REJEITADA"), Some("AM02"))
        );
        let mut c = cobr(RetryPolicy::NotAllowed, SettleScenario::Pay);
        c.payer_maximum = Some(m("30"));
        // From the first instant of its day the attempt is under way: no longer cancelled.
        assert_eq!(
            c.clone().cancel(Canceller::Payer, "too late", at),
            Err(CobrError::UnderWay(d(2026, 12, 14)))
        );
        // The payer may until its day begins; the receiver until 22:00 the day before.
        let second = chrono::Duration::seconds(1);
        assert!(c.clone().cancel(Canceller::Payer, "just in time", at - second).is_ok());
        let receivers = at - chrono::Duration::hours(2);
        assert_eq!(receivers, cancel_deadline(d(2026, 12, 14), Canceller::Receiver));
        assert_eq!(
            c.clone().cancel(Canceller::Receiver, "too late", receivers),
            Err(CobrError::CancelClosed(d(2026, 12, 14), Canceller::Receiver))
        );
        assert_eq!(
            CobrError::CancelClosed(d(2026, 12, 14), Canceller::Receiver).to_string(),
            "its attempt of 2026-12-14 may be cancelled by the receiver only until 22:00 (São Paulo) of the day before"
        );
        let before = receivers - second;
        c.cancel(Canceller::Receiver, "cancelled by the receiver", before).unwrap();
        assert_eq!((c.status, c.deadline(), c.attempt(at)), (CobrStatus::Cancelada, None, None));
        let v = c.to_json();
        assert_eq!(v["tentativas"][0]["status"], "CANCELADA", "the scheduled attempt is kept");
        assert_eq!(
            v["encerramento"]["cancelamento"],
            json!({"solicitante": "USUARIO_RECEBEDOR", "codigo": "SLCR", "descricao": "cancelled by the receiver"})
        );
        assert_eq!(c.cancel(Canceller::Receiver, "again", at), Err(CobrError::Final("CANCELADA")));
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
        // The evening's try asks the payer's account again, with its own externalId.
        let evening = at + chrono::Duration::hours(EVENING_ATTEMPT_HOUR);
        assert_eq!(c.step_due(evening), Due::Attempt(1));
        c.failed(Failure::NoFunds, evening);
        let retry = d(2026, 12, 16);
        c.ask_retry(retry, evening).unwrap();
        assert_eq!(c.step_due(start_of_day(retry)), Due::Attempt(2));
        assert_ne!(c.debit_external_id(2), c.debit_external_id(1));
        c.settled("E1".into(), start_of_day(retry));
        assert_eq!((c.status, c.step_due(start_of_day(retry))), (CobrStatus::Concluida, Due::Nothing));
        // Above the payer's maximum it is refused before anyone is asked for money.
        let mut c = cobr(RetryPolicy::NotAllowed, SettleScenario::Pay);
        (c.on_us_payer, c.payer_maximum) = (Some(9), Some(m("29.99")));
        assert_eq!(c.step_due(at), Due::AboveMaximum);
    }
}
