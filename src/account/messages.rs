//! The messages an account actor answers, and [`CommandError`], why a command did not
//! happen.

use actix::Message;

use crate::cause::Cause;

use crate::domain::account::AccountSettings;
pub use crate::domain::decide::Refusal;
pub use crate::domain::decide::{ChargeRequest, DictRequest, PayRequest, RefundRequest};
use crate::domain::ledger::Balance;
use crate::domain::money::Money;
use crate::domain::transaction::Transaction;

#[derive(Debug, Clone)]
pub struct PayOutcome {
    pub tx: Transaction,
    /// The same `/dict/pix` request was seen before; nothing moved.
    pub replayed: bool,
}

/// Why an account command did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CommandError {
    /// The rules refused it (see [`Refusal`]); a bug among them is answered as internal.
    #[error(transparent)]
    Refused(Refusal),
    /// The command did not happen and may be retried (a full disk, a restarting actor).
    #[error("unavailable")]
    Unavailable(#[source] Cause),
    /// Something failed that no request can cause; the actor halts (see `actor::halt`).
    #[error("internal")]
    Internal(#[source] Cause),
}

impl From<Refusal> for CommandError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Bug(why) => CommandError::Internal(Cause::msg(why)),
            other => CommandError::Refused(other),
        }
    }
}

#[derive(Message, Clone)]
#[rtype(result = "Result<PayOutcome, CommandError>")]
pub struct Pay(pub PayRequest);

/// A received PIX that funds the account (sandbox).
#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, CommandError>")]
pub struct PixIn {
    pub value: Money,
    pub payer_name: String,
    pub payer_document: Option<String>,
}

/// The balance, once everything the actor applied so far is durable.
#[derive(Message, Clone)]
#[rtype(result = "Result<Balance, CommandError>")]
pub struct GetBalance;

/// Time moved: expire what is due (sent after the test clock moves; actors also check
/// every second on their own). Answers once the expirations are durable.
#[derive(Message)]
#[rtype(result = "Result<(), CommandError>")]
pub struct Tick;

/// The operator changed the account's settings.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SettingsChanged(pub AccountSettings);

#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, CommandError>")]
pub struct CreateCharge(pub ChargeRequest);

/// Carry out a credit this account is owed by an on-us payment (see `on_us.rs`); success
/// also when it was carried out before.
#[derive(Message, Clone)]
#[rtype(result = "Result<(), CommandError>")]
pub struct ReceiveOnUs(pub crate::domain::decide::OnUsCredit);

/// A payer pays an open charge (sandbox).
#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, CommandError>")]
pub struct PayCharge {
    pub local_id: u64,
    /// Who pays, when the request names them (else the charge's debtor or the sandbox payer).
    pub payer: Option<crate::domain::decide::Payer>,
    /// The amount paid, when the request names one (else the amount due).
    pub amount: Option<Money>,
}

/// The receiver revises an open cobv into `request` (its whole new request), read from the
/// revision `based_on` (`PATCH /cobv/{txid}`).
#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, CommandError>")]
pub struct ReviseCharge {
    pub local_id: u64,
    pub request: ChargeRequest,
    pub based_on: u32,
}

/// Answers the refund and whether it is a replay of an earlier one with the same id.
#[derive(Message, Clone)]
#[rtype(result = "Result<(Transaction, bool), CommandError>")]
pub struct Refund(pub RefundRequest);

/// The counterparty of one of our payments returns `value` of it (sandbox).
#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, CommandError>")]
pub struct ReturnPayment {
    pub original_local_id: u64,
    pub value: Money,
}

/// The receiver cancels an open charge (`PATCH /cob/{txid}`).
#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, CommandError>")]
pub struct CancelCharge {
    pub local_id: u64,
}

/// Opens a MED against a received PIX (sandbox: the requesting bank's side).
#[derive(Message, Clone)]
#[rtype(result = "Result<crate::domain::med::Med, CommandError>")]
pub struct OpenMed {
    pub end_to_end: String,
    pub cause: String,
    pub amount: Option<Money>,
    pub description: Option<String>,
}

/// Ends a MED: its analysis, or its withdrawal by the requesting bank (`result: None`).
#[derive(Message, Clone)]
#[rtype(result = "Result<crate::domain::med::Med, CommandError>")]
pub struct CloseMed {
    pub id: u64,
    pub result: Option<crate::domain::med::AnalysisResult>,
    pub details: Option<String>,
}

/// A message sent on behalf of a request. While the actor handles it, the request's id is
/// at hand, so the payment lines it logs name the request (see `telemetry::log_payment`).
#[derive(Clone)]
pub struct Traced<M> {
    pub msg: M,
    pub request_id: Option<std::sync::Arc<str>>,
}

impl<M: Message> Message for Traced<M> {
    type Result = M::Result;
}

/// `Traced<M>` for each message a request sends (a blanket impl would recurse through
/// `Traced<Traced<M>>` in the trait solver).
macro_rules! traced {
    ($($m:ty),* $(,)?) => {$(
        impl actix::Handler<Traced<$m>> for super::AccountActor {
            type Result = <super::AccountActor as actix::Handler<$m>>::Result;

            fn handle(&mut self, traced: Traced<$m>, ctx: &mut Self::Context) -> Self::Result {
                self.request_id = traced.request_id;
                let result = <Self as actix::Handler<$m>>::handle(self, traced.msg, ctx);
                self.request_id = None;
                result
            }
        }
    )*};
}

traced!(
    Pay,
    PixIn,
    GetBalance,
    CreateCharge,
    PayCharge,
    ReviseCharge,
    CancelCharge,
    Refund,
    ReturnPayment,
    OpenMed,
    CloseMed
);
