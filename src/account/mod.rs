//! The account actors: one actix actor per account owns its ledger (balance, limit
//! counters, idempotency indexes, pending debits) and serializes every change to it
//! without locks. A registry starts them on first use, spread over one arbiter per core.
//!
//! Each command runs to completion inside the actor: decide on the pure ledger, write the
//! resulting batch (transaction, ledger, indexes, outbox) through group commit, apply to
//! the ledger, then reply once the batch is on disk (its journal record synced). While one
//! reply waits for its sync the actor already serves the next command, so one fdatasync
//! acknowledges many.

mod actor;
mod charges;
mod med;
mod messages;
mod refunds;
mod registry;

pub use actor::{AccountActor, Deps, ACCOUNT_IDLE_STOP_SECONDS};
pub use messages::{
    CancelCharge, ChargeRequest, CloseMed, CreateCharge, DictRequest, GetBalance, OpenMed, Pay, PayCharge,
    PayError, PayOutcome, PayRequest, PixIn, Refund, RefundRequest, ReturnPayment, SettingsChanged, Tick,
};
pub use registry::{Registry, RegistryError};
