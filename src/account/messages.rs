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

/// The receiver's actor of an on-us recurring charge asks the payer's for the money of one
/// attempt, on the day the payer's institution (this gateway) settles it. The payer's
/// authorisation is the receiver's recurrence's to hold: only an actor holding a recurrence
/// that this payer's account approved sends this.
#[derive(Message, Clone, Debug)]
#[rtype(result = "Result<Collected, CommandError>")]
pub struct CollectCobr {
    /// One per attempt (`Cobr::debit_external_id`): asked again, the debit is found.
    pub external_id: String,
    pub value: Money,
    pub id_rec: String,
    /// What the debit's credit carries to the receiver (`Cobr::reference`).
    pub reference: String,
    pub receiver_name: String,
    pub receiver_document: String,
    /// The receiver's receiving key, which the debit is paid to (on us).
    pub receiving_key: String,
}

/// The payer's account's answer to [`CollectCobr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collected {
    /// Debited (now, or when asked before): the credit follows through the on-us courier.
    Debited,
    /// Refused: the attempt fails for this reason.
    Refused(crate::domain::cobr::Failure),
}

/// The operator moves money into or out of the account; answers the transaction and
/// whether the same reference was asked before.
#[derive(Message, Clone)]
#[rtype(result = "Result<PayOutcome, CommandError>")]
pub struct Adjust(pub crate::domain::decide::Adjustment);

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

/// The account's holder is now named so (an operator's rename).
#[derive(Message)]
#[rtype(result = "()")]
pub struct NameChanged(pub String);

/// The account's receiving key (the one its new charges carry) is now this one.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReceivingKeyChanged(pub String);

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

/// Opens a MED against a received PIX (sandbox: the requesting bank's side; on the SPI
/// rail, a refund request the DICT reported).
#[derive(Message, Clone)]
#[rtype(result = "Result<crate::domain::med::Med, CommandError>")]
pub struct OpenMed {
    pub end_to_end: String,
    pub cause: String,
    pub amount: Option<Money>,
    pub description: Option<String>,
    /// The DICT's refund request, for a MED of the SPI rail.
    pub dict_refund_id: Option<String>,
    /// The DICT's infraction report, for a MED 2.0 case (the same report again answers
    /// the case it opened).
    pub infraction: Option<crate::domain::med::Infraction>,
}

/// Ends a MED: its analysis, or its withdrawal by the requesting bank (`result: None`).
#[derive(Message, Clone)]
#[rtype(result = "Result<crate::domain::med::Med, CommandError>")]
pub struct CloseMed {
    pub id: u64,
    pub result: Option<crate::domain::med::AnalysisResult>,
    pub details: Option<String>,
    /// The fraud type an approval of a MED 2.0 case names to the DICT.
    pub fraud_type: Option<String>,
}

/// The DICT asks for the money of an approved MED 2.0 case, up to `requested`.
#[derive(Message, Clone)]
#[rtype(result = "Result<crate::domain::med::Med, CommandError>")]
pub struct ReturnMed {
    pub id: u64,
    pub requested: Money,
}

/// The DICT withdrew a MED 2.0 case: its block is released.
#[derive(Message, Clone)]
#[rtype(result = "Result<crate::domain::med::Med, CommandError>")]
pub struct ReleaseCase {
    pub id: u64,
}

/// The client's statement for a MED 2.0 case against it.
#[derive(Message, Clone)]
#[rtype(result = "Result<crate::domain::med::Med, CommandError>")]
pub struct AddEvidence {
    pub id: u64,
    pub text: String,
}

/// A message sent on behalf of a request. While the actor handles it, the request's id is
/// at hand, so the payment lines it logs name the request (see `telemetry::log_payment`).
///
/// Its reply is [`Early`]: the actor answers as soon as it has decided and queued the
/// writes, and the request's own task waits for their durability ([`acknowledged`]). The
/// reply then leaves from the thread that the committer wakes, not by way of the actor's
/// thread: one thread crossing fewer on every request's path (issue 25's profile counted
/// four). A message sent bare (tests, the actor's own work) waits inside the actor as before.
#[derive(Clone)]
pub struct Traced<M> {
    pub msg: M,
    pub request_id: Option<std::sync::Arc<str>>,
}

/// An account actor's reply to a [`Traced`] message, before its writes are durable: what it
/// will answer, and the group-commit ticket that must be durable first (its own writes,
/// and every earlier write of the account that its answer rests on).
#[derive(Debug)]
pub struct Early<R> {
    pub reply: R,
    pub ticket: u64,
}

/// The reply of a [`Traced`] message once the writes it rests on are durable. A write that
/// did not become durable answers "unavailable", as the actor does (which halts on it).
pub async fn acknowledged<T>(
    commit: &crate::store::GroupCommit,
    early: Early<Result<T, CommandError>>,
) -> Result<T, CommandError> {
    match commit.durable(early.ticket).await {
        Ok(()) => early.reply,
        Err(e) => Err(CommandError::Unavailable(Cause::new(e))),
    }
}

impl<M: Message> Message for Traced<M> {
    type Result = Early<M::Result>;
}

/// `Traced<M>` for each message a request sends (a blanket impl would recurse through
/// `Traced<Traced<M>>` in the trait solver). Each of these answers through
/// [`super::AccountActor::reply_when_durable`], which answers at once while `early` is set.
macro_rules! traced {
    ($($m:ty),* $(,)?) => {$(
        impl actix::Handler<Traced<$m>> for super::AccountActor {
            type Result = actix::ResponseActFuture<Self, Early<<$m as Message>::Result>>;

            fn handle(&mut self, traced: Traced<$m>, ctx: &mut Self::Context) -> Self::Result {
                use actix::ActorFutureExt;
                self.request_id = traced.request_id;
                self.early = true;
                let result = <Self as actix::Handler<$m>>::handle(self, traced.msg, ctx);
                self.early = false;
                self.request_id = None;
                let ticket = self.last_ticket;
                self.forget_when_durable(ctx);
                Box::pin(result.map(move |reply, _, _| Early { reply, ticket }))
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
    CloseMed,
    super::recs::CreateRec,
    super::recs::ChangeRec,
    super::recs::CreateCobr,
    super::recs::ChangeCobr,
    super::recs::CreateLocRec,
    super::recs::UnlinkLocRec,
    super::claims::ObserveClaim,
    AddEvidence,
    super::recovery::Contest,
    super::recovery::ObserveRecovery,
    super::recovery::AmendContest,
);
