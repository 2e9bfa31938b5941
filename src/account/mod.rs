//! The account actors: one actix actor per account owns its ledger (balance, limit
//! counters, idempotency indexes, pending debits) and serializes every change to it
//! without locks. A registry starts them on first use, spread over one arbiter per core.
//!
//! Each command runs to completion inside the actor: gather what it needs, decide it with
//! the pure rules of [`crate::domain::decide`], execute the plan (queue its writes with group
//! commit, apply the ledger's change), then reply once the writes are on disk (their
//! journal record synced). While one reply waits for its sync the actor already serves the
//! next command, so one fdatasync acknowledges many.

mod actor;
mod claims;
mod commands;
mod inbound;
mod messages;
mod on_us;
mod recovery;
mod recs;
mod registry;
mod sync;
#[cfg(test)]
mod tests;

pub use actor::{AccountActor, Deps, ACCOUNT_IDLE_STOP_SECONDS};
pub use claims::ObserveClaim;
pub use inbound::{apply_resolution, apply_resolutions_again, AcceptIncoming, Accounts, EndIncoming};
pub use messages::{acknowledged, Early};
pub use messages::{
    AddEvidence, Adjust, CancelCharge, ChargeRequest, CloseMed, CommandError, CreateCharge, DictRequest,
    GetBalance, OpenMed, Pay, PayCharge, PayOutcome, PayRequest, PixIn, ReceiveOnUs, Refund, RefundRequest,
    Refusal, ReleaseCase, ReturnMed, ReturnPayment, ReviseCharge, SettingsChanged, Tick, Traced,
};
pub use on_us::{DeliverOnUs, OnUsCourier, ON_US_RETRY_AFTER};
pub use recovery::{AmendContest, Contest, ObserveRecovery};
pub use recs::{ChangeCobr, ChangeRec, CreateCobr, CreateLocRec, CreateRec, RecRef, UnlinkLocRec};
pub use registry::{Registry, RegistryError, IDLE_SWEEP_EVERY};
