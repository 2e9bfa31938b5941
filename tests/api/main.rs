//! The integration tests: one binary, the real server over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin;
mod cob;
mod cobv;
mod contract;
mod deliveries;
mod dict;
mod errors;
mod helpers;
mod idempotency;
mod journal;
mod lifecycle;
mod listing;
mod load;
mod logs;
mod med;
mod money_in;
mod money_out;
mod on_us;
mod receiver;
mod recovery;
mod references;
mod refunds;
mod token;
mod webhooks;
