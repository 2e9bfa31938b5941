//! # pixgw: a PIX instant-payment gateway
//!
//! One process: actix-web handlers in front, one actix actor per account, a group-commit
//! thread that makes each group of writes durable in the journal with one fdatasync, and sled
//! underneath as the snapshot store that checkpoints bring up to date (docs/storage.md).
//!
//! # Layout
//! - [`domain`]: PURE values and rules (money, documents, ids, PIX keys, BR Code, fees,
//!   limits, the ledger, transactions and their events, charges' splits, refunds, webhook
//!   signing and delivery rules, rate windows, the transactions list, MED cases, Brazil's
//!   banking calendar, the price of a charge with a due date, and Pix Automático's
//!   recurrences and recurring charges with their rules of cycles), and
//!   `decide`: every account command as a pure function into a plan (or a `Refusal`). No
//!   I/O, no clock, no randomness.
//! - [`account`]: the account actors (gather, decide, execute, reply), their messages and
//!   `CommandError`, and their registry.
//! - [`sim`]: the simulated PIX network: the settling bank (`SimulatedBank`) and the key
//!   directory.
//! - [`webhooks`]: delivery from the durable outbox (the dispatcher, a pool of sender
//!   actors) and `pixgw webhooks listen`.
//! - [`load`]: `pixgw load`, the load generator with its consistency check.
//! - [`auth`]: secrets and their hashes, certificate parsing and generation, access tokens.
//! - [`admin`]: account administration (accounts, certificates, settings, secrets) over
//!   the repository.
//! - [`store`]: the storage trait, sled, PostgreSQL (`postgres`: the journal table, the
//!   key-value snapshot, the lease, the schema's migrations) and in-memory implementations,
//!   the journal, group commit and checkpoints, the overlay readers see, the pages under it, the record formats
//!   (`codec`), the start-up migrations; `keys` (the key layout, the only place a key is
//!   spelled), `records` and the typed repository (`Repo`, one module per entity).
//! - [`http`]: DTOs and handlers (family B's API Pix routes among them: `cob`, `received`,
//!   `cobv`, `refunds`, `rec` and `cobr` (Pix Automático), and `api_pix`, what their lists share), authentication extractors, `ask` (a
//!   message to the caller's account actor), the route table (each route with its error family), the
//!   access middleware (request id, span, access line), the OpenAPI document with its
//!   request schemas, `gate` (503 from a node that may not serve now, and a standby's
//!   answers), and `error`: the one mapping of errors (the rejection table, token
//!   failures, violations, the body envelope).
//! - [`cause`]: an error's cause kept with its chain, cheap to clone across actors.
//! - [`clock`]: the server clock (system, or the adjustable test clock).
//! - [`bootstrap`]: first start (Demo account, credentials file, keys).
//! - [`config`], [`telemetry`], [`startup`]: settings, logs and metrics, wiring.
//! - [`node`]: a node on a shared PostgreSQL database: standby, leader under the lease,
//!   and a fresh start whenever it stops being the leader.
//!
//! Dependency direction: `http` -> `account` / `admin` / `webhooks` -> `store` / `sim` ->
//! `domain`; nothing imports `http` but `startup` and `node`. `load` is a client of the public API only.

/// `println!` that never panics: when stdout is closed (`pixgw account create ... | head -1`)
/// the line is dropped. A command that did its work must not then crash, or a script that
/// retries on failure runs it twice (and makes a second account).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

pub mod account;
pub mod admin;
pub mod auth;
pub mod bootstrap;
pub mod cause;
pub mod clock;
pub mod config;
pub mod domain;
pub mod homologation;
pub mod http;
pub mod load;
pub mod maintenance;
pub mod node;
pub mod private;
pub mod provision;
pub mod rail;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod trust;
pub mod webhooks;
