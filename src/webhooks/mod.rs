//! Webhook delivery at run time: the [`dispatcher::Dispatcher`] that schedules deliveries
//! from the durable outbox, the pool of [`sender::Sender`] actors that make the requests,
//! and `pixgw webhooks listen`, a receiver for developers ([`listen`]).
//!
//! The rules (schedule, address checks, ordering) live in [`crate::domain::delivery`] and
//! the signature in [`crate::domain::webhooks`]; this module is I/O around them.

pub mod dispatcher;
pub mod listen;
pub mod sender;

use std::path::PathBuf;
use std::sync::Arc;

use actix::{Actor, Addr, Arbiter};

use crate::clock::Clock;
use crate::store::{GroupCommit, Repo};
use dispatcher::{Dispatcher, Durable, Load};
use sender::{Policy, Sender};

/// How deliveries may reach receivers (decisions.md "Webhooks").
#[derive(Debug, Clone, Default)]
pub struct WebhookSettings {
    /// Plain http URLs are accepted (`PIXGW_WEBHOOK_ALLOW_HTTP`).
    pub allow_http: bool,
    /// Loopback and private addresses are reachable (`PIXGW_WEBHOOK_ALLOW_PRIVATE`).
    pub allow_private: bool,
    /// A CA to trust besides the public roots (`PIXGW_WEBHOOK_CA_FILE`).
    pub ca_file: Option<PathBuf>,
    /// Sender actors, each on its own thread.
    pub senders: usize,
}

/// The running webhook machinery.
#[derive(Clone)]
pub struct Webhooks {
    pub dispatcher: Addr<Dispatcher>,
}

/// Starts the senders and the dispatcher, and registers the dispatcher with the committer.
/// Call before anything writes to the outbox: the dispatcher scans it once, and learns of
/// every later event from the committer.
pub fn start(
    repo: Repo,
    commit: &Arc<GroupCommit>,
    clock: Arc<Clock>,
    settings: &WebhookSettings,
) -> anyhow::Result<Webhooks> {
    let tls = sender::tls_config(settings.ca_file.as_deref())?;
    let policy = Policy { allow_http: settings.allow_http, allow_private: settings.allow_private };
    let senders: Vec<Addr<Sender>> = (0..settings.senders.max(1))
        .map(|_| {
            let tls = Arc::clone(&tls);
            Sender::start_in_arbiter(&Arbiter::new().handle(), move |_| Sender::new(tls, policy))
        })
        .collect();
    let dispatcher = Dispatcher::new(repo, Arc::clone(commit), clock, senders);
    let addr = Dispatcher::start_in_arbiter(&Arbiter::new().handle(), move |_| dispatcher);
    let observer = addr.clone();
    let registered = commit.observe(
        crate::store::keys::OUTBOX,
        Box::new(move |ops| {
            let new: Vec<(u64, Vec<u8>)> = ops
                .iter()
                .filter_map(|op| Some((crate::store::keys::outbox_seq(op.key())?, op.value()?.to_vec())))
                .collect();
            if !new.is_empty() {
                observer.do_send(Durable(new));
            }
        }),
    );
    anyhow::ensure!(registered, "the committer already has an observer");
    addr.do_send(Load);
    Ok(Webhooks { dispatcher: addr })
}
