//! # pixgw: a PIX instant-payment gateway
//!
//! One process: actix-web handlers in front, one actix actor per account, a group-commit
//! thread that makes each group of writes durable in the journal with one fdatasync, and sled
//! underneath as the snapshot store that checkpoints bring up to date (docs/storage.md).
//!
//! # Layout
//! - [`domain`]: PURE values and rules (money, documents, ids, PIX keys, BR Code, fees,
//!   limits, the ledger, transactions and their events, charges' splits, refunds, webhook
//!   signing and delivery rules, the transactions list, MED cases), and `decide`: every
//!   account command as a pure function into a plan. No I/O, no clock, no randomness.
//! - [`account`]: the account actors (gather, decide, execute, reply) and their registry.
//! - [`sim`]: the simulated PIX network: the settling bank and the key directory.
//! - [`webhooks`]: delivery from the durable outbox (the dispatcher, a pool of sender
//!   actors) and `pixgw webhooks listen`.
//! - [`load`]: `pixgw load`, the load generator with its consistency check.
//! - [`auth`]: secrets and their hashes, certificate parsing and generation, access tokens.
//! - [`accounts`]: account administration over the repository.
//! - [`store`]: the storage trait, sled and in-memory implementations, the journal, group
//!   commit and checkpoints, the overlay readers see, the pages under it, the record formats
//!   (`codec`), the start-up migrations, the typed repository and the key layout.
//! - [`http`]: DTOs, handlers, authentication extractors, the one error mapping, the route
//!   table, the access middleware (request id, span, access line) and the OpenAPI document
//!   with its request schemas.
//! - [`clock`]: the server clock (system, or the adjustable test clock).
//! - [`bootstrap`]: first start (Demo account, credentials file, keys).
//! - [`config`], [`telemetry`], [`startup`]: settings, logs and metrics, wiring.
//!
//! Dependency direction: `http` -> `account` / `accounts` / `webhooks` -> `store` / `sim` ->
//! `domain`; nothing imports `http`. `load` is a client of the public API only.

pub mod account;
pub mod admin;
pub mod auth;
pub mod bootstrap;
pub mod cause;
pub mod clock;
pub mod config;
pub mod domain;
pub mod http;
pub mod load;
pub mod sim;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod webhooks;
