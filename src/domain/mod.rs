//! The pure domain: values with invariants and the rules over them.
//!
//! Nothing here does I/O, reads a clock or draws a random number: time and ids come in
//! as arguments, so every rule is unit tested exhaustively and behaves the same in the
//! server, in tests and in benchmarks.

pub mod account;
pub mod brcode;
pub mod calendar;
pub mod certificate;
pub mod cid;
pub mod claim;
pub mod cobr;
pub mod cobv;
pub mod decide;
pub mod delivery;
pub mod document;
pub mod events;
pub mod fees;
pub mod ids;
pub mod ledger;
pub mod limits;
pub mod listing;
pub mod location;
pub mod med;
pub mod money;
pub mod payload;
pub mod pix_key;
pub mod qr_image;
pub mod rate;
pub mod rec;
pub mod reconcile;
pub mod recovery;
pub mod recurrence;
pub mod refunds;
pub mod resolution;
pub mod risk;
pub mod scenario;
pub mod scope;
pub mod splits;
pub mod tax_record;
pub mod throttle;
pub mod transaction;
pub mod webhooks;
