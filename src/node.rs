//! A node on a shared PostgreSQL database: a standby until it holds the lease, the leader
//! while it renews it, and a fresh process whenever it stops being one.
//!
//! Life of a node (docs/storage.md "PostgreSQL", docs/deploy.md "Two nodes on PostgreSQL"):
//!
//! 1. It binds its address and serves as a **standby**: `/healthz` says so with a 503,
//!    every API route answers 503 with `Retry-After`, so a proxy tries another node.
//!    Meanwhile it migrates the schema (once the database answers) and tries to take the
//!    lease every renewal period.
//! 2. Holding the lease, it opens the storage under its new epoch (replaying what the
//!    journal holds beyond the snapshot), builds the application as a restart after a
//!    kill -9 does (pending settlements, webhook deliveries, on-us credits, charge expiry
//!    and splits resume from the stored state) and serves as the **leader**, renewing the
//!    lease on the database's clock. It stops serving the API the moment its own count of
//!    the lease runs out, before any other node may take it.
//! 3. If it is deposed, or a write fails (the database went away, a group's outcome could
//!    not be learned), its in-memory state may be ahead of the database: it closes the API,
//!    lets in-flight requests answer 503, and **re-executes itself** (same pid, same address,
//!    same node name), so nothing built on a lost write survives. The new image starts at
//!    step 1 and, once the database answers again, takes the lease back if no other node
//!    did. This is the one way a node leaves the leader's role; the committer's rule that a
//!    failure is final stays as it is.
//! 4. On SIGTERM or Ctrl-C the leader writes what is queued, checkpoints and ends its lease
//!    at once, so a standby takes over without waiting the lease out.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpServer};
use anyhow::Context;

use crate::config::Settings;
use crate::http;
use crate::startup::Application;
use crate::store::postgres::lease::LeaseTimes;
use crate::store::postgres::{Pg, PgUrl};
use crate::store::{Repo, Storage};

/// The node's name across its own re-executions (internal: set by the node itself).
pub const NODE_ENV: &str = "PIXGW_NODE_NAME";
/// The address the node bound, kept across its re-executions (internal).
pub const REBIND_ENV: &str = "PIXGW_REBIND_ADDRESS";
/// How often a leader checks whether it must give up serving.
const WATCH_EVERY: Duration = Duration::from_millis(100);
/// How often the leader reads `pg_stat_replication`.
const REPLICATION_WATCH_EVERY: Duration = Duration::from_secs(5);
/// How long a node that gives up waits for the writes it queued to settle (answering 503
/// to everything new meanwhile) before it re-executes.
const GIVE_UP_DRAIN_MAX: Duration = Duration::from_secs(5);
/// After they settled, how long their replies get to reach their sockets before the port is
/// closed at once. Nothing new is taken by then, and a reply cut short is an unknown
/// outcome that the client resolves by its externalId (docs/decisions.md), so this bounds a
/// courtesy, not a rule.
const GIVE_UP_REPLY_GRACE: Duration = Duration::from_millis(200);

/// The leader's own count of its lease: it serves while the last renewal it sent, plus
/// the lease's length, lies ahead (the database's expiry is later still, as the renewal
/// was sent before the database stamped it), and never again once it was deposed.
pub struct Leadership {
    valid_until: Mutex<Instant>,
    deposed: AtomicBool,
}

impl Leadership {
    fn new(valid_until: Instant) -> Leadership {
        Leadership { valid_until: Mutex::new(valid_until), deposed: AtomicBool::new(false) }
    }

    fn renewed(&self, valid_until: Instant) {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner()) = valid_until;
    }

    fn depose(&self) {
        self.deposed.store(true, Ordering::Release);
    }

    fn deposed(&self) -> bool {
        self.deposed.load(Ordering::Acquire)
    }
}

impl http::gate::Gate for Leadership {
    fn refusal(&self) -> Option<String> {
        if self.deposed() {
            return Some("this node no longer holds the lease; another node serves".into());
        }
        let until = *self.valid_until.lock().unwrap_or_else(|p| p.into_inner());
        (Instant::now() >= until).then(|| "this node's lease ran out before it could renew it".into())
    }

    fn role(&self) -> &'static str {
        "leader"
    }
}

/// Runs `pixgw serve --store postgres://...` until a stop signal.
pub async fn serve(settings: Settings, url: PgUrl) -> anyhow::Result<()> {
    let name = std::env::var(NODE_ENV).ok().filter(|n| !n.is_empty()).unwrap_or_else(|| {
        format!("pixgw-{}-{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..8])
    });
    let listen = match std::env::var(REBIND_ENV).ok().and_then(|a| a.parse::<SocketAddr>().ok()) {
        Some(again) => again,
        None => settings.listen,
    };
    let listener = TcpListener::bind(listen).with_context(|| format!("binding {listen}"))?;
    let address = listener.local_addr()?;
    crate::say!("pixgw listening on http://{address}");
    crate::say!("store: {url} (node {name}; the node holding the lease serves)");
    let pg = Pg::new(url, name.clone()).map_err(anyhow::Error::msg)?;
    let times = settings.lease;

    let standby = HttpServer::new(|| {
        // Health and metrics answer as themselves; everything else is a 503 in its
        // route's error shape.
        App::new()
            .app_data(http::route_families())
            .route("/healthz", web::get().to(http::gate::standby_health))
            .route("/metrics", web::get().to(http::gate::standby_metrics))
            .service(
                web::scope("")
                    .wrap(from_fn(http::error::envelope))
                    .wrap(from_fn(http::access::access))
                    .default_service(web::to(http::gate::standby_refusal)),
            )
    })
    .workers(1)
    .disable_signals()
    .listen(listener.try_clone()?)?
    .run();
    let standby_handle = standby.handle();
    actix_web::rt::spawn(standby);

    let stop = stop_signal()?;
    let epoch = tokio::select! {
        epoch = take_lease(&pg, times) => epoch,
        () = stop => {
            standby_handle.stop(true).await;
            announce(&pg, "stopped").await;
            return Ok(());
        }
    };
    standby_handle.stop(true).await;
    tracing::info!(node = %name, epoch, "took the lease; serving as the leader");

    let leadership = Arc::new(Leadership::new(Instant::now() + times.lease()));
    let renewer = actix_web::rt::spawn(renew(Arc::clone(&pg), times, Arc::clone(&leadership)));
    // A task of its own, so a slow answer never delays the lease's renewal.
    let replication = actix_web::rt::spawn(watch_replication(Arc::clone(&pg)));
    let opened = Arc::clone(&pg);
    // The recorder first: recovery sets the storage gauges.
    crate::telemetry::metrics_handle();
    let gate: Arc<dyn http::gate::Gate> = leadership.clone();
    let built = async {
        let storage =
            actix_web::rt::task::spawn_blocking(move || Storage::open_postgres(&opened, Repo::layout()))
                .await
                .context("opening storage")?
                .context("opening storage in PostgreSQL")?;
        Application::build_on(settings, storage, listener, Some(gate))
    };
    let app = match built.await {
        Ok(app) => app,
        Err(e) => {
            // This node cannot serve (a store it may not open, a missing key file): it ends
            // its lease at once, so the other node need not wait it out, and exits.
            renewer.abort();
            replication.abort();
            if let Err(released) = pg.release().await {
                tracing::warn!(error = %released, "could not end the lease; it runs out by itself");
            }
            announce(&pg, "stopped").await;
            return Err(e);
        }
    };
    if app.boot.created_demo {
        crate::say!(
            "first start: created the Demo sandbox account; credentials in {}",
            app.boot.demo_dir.display()
        );
    }
    crate::say!("role: leader (epoch {epoch})");
    announce(&pg, "leader").await;
    metrics::gauge!("pixgw_serving").set(1.0);
    metrics::gauge!("pixgw_lease_epoch").set(epoch as f64);
    // The lease was just taken from the database (the recorder exists only from here on).
    metrics::gauge!("pixgw_database_up").set(1.0);

    let gave_up: Arc<Mutex<Option<String>>> = Arc::default();
    let watcher = {
        let (commit, handle, leadership, gave_up) =
            (Arc::clone(app.commit()), app.server_handle(), Arc::clone(&leadership), Arc::clone(&gave_up));
        actix_web::rt::spawn(async move {
            let why = loop {
                if leadership.deposed() {
                    break "deposed: another node holds the lease".to_owned();
                }
                if let Some(why) = commit.failure() {
                    break format!("a write failed: {why}");
                }
                if let Some(why) = commit.checkpoint_failure() {
                    break format!("a checkpoint failed: {why}");
                }
                tokio::time::sleep(WATCH_EVERY).await;
            };
            // Deposed first: from now on every new request answers 503 at once (a client
            // or a proxy retries it elsewhere). The writes already queued are left to settle
            // (the committer may be reading a lost group back) while the socket still
            // answers; only then does the server stop, so the port is closed for the
            // moment of the re-execution alone.
            leadership.depose();
            *gave_up.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
            let settle_until = Instant::now() + GIVE_UP_DRAIN_MAX;
            while commit.queue_depth() > 0 && commit.failure().is_none() && Instant::now() < settle_until {
                tokio::time::sleep(WATCH_EVERY).await;
            }
            tokio::time::sleep(GIVE_UP_REPLY_GRACE).await;
            // Not a graceful stop: that would wait on every idle keep-alive connection, with
            // the port closed, for up to the shutdown timeout.
            handle.stop(false).await;
        })
    };
    let served = app.run_until_stopped().await;
    replication.abort();
    let why = gave_up.lock().unwrap_or_else(|p| p.into_inner()).take();
    match why {
        Some(why) => {
            renewer.abort();
            tracing::warn!(reason = %why, "giving up the leader's role: starting again as a standby");
            metrics::gauge!("pixgw_serving").set(0.0);
            Err(reexec(&name, address))
        }
        None => {
            watcher.abort();
            renewer.abort();
            if let Err(e) = pg.release().await {
                tracing::warn!(error = %e, "could not end the lease; a standby takes over once it expires");
            }
            announce(&pg, "stopped").await;
            served
        }
    }
}

/// Says in `pixgw_nodes` which release this node runs and in which role; a failure is
/// logged and changes nothing else (the table is for operators).
async fn announce(pg: &Arc<Pg>, role: &'static str) {
    if let Err(e) = pg.announce(role).await {
        tracing::warn!(error = %e, role, "could not record this node in pixgw_nodes");
    }
}

/// Resolves once SIGTERM or SIGINT arrives.
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// Migrates the schema and takes the lease, trying every renewal period until both work.
async fn take_lease(pg: &Arc<Pg>, times: LeaseTimes) -> u64 {
    let mut migrated = false;
    let mut last_error = String::new();
    loop {
        let attempt = async {
            if !migrated {
                let p = Arc::clone(pg);
                let found = actix_web::rt::task::spawn_blocking(move || p.migrate())
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                tracing::info!(
                    found,
                    now = crate::store::postgres::schema::latest(),
                    "database schema ready"
                );
                migrated = true;
                announce(pg, "standby").await;
            }
            pg.try_acquire(times).await.map_err(|e| e.to_string())
        };
        let answered = attempt.await;
        metrics::gauge!("pixgw_database_up").set(if answered.is_ok() { 1.0 } else { 0.0 });
        match answered {
            Ok(Some(epoch)) => return epoch,
            Ok(None) => {}
            Err(e) if e != last_error => {
                tracing::warn!(error = %e, "the database does not answer; serving as a standby meanwhile");
                last_error = e;
            }
            Err(_) => {}
        }
        tokio::time::sleep(times.renew_every()).await;
    }
}

/// Publishes what the database says of its standbys every [`REPLICATION_WATCH_EVERY`], for
/// as long as this node leads: `pixgw_db_standbys{state}` and
/// `pixgw_db_standby_replay_lag_seconds` (the alert rules watch both). A failed read leaves
/// the last figures; `pixgw_database_up` says the database is not answering.
async fn watch_replication(pg: Arc<Pg>) {
    loop {
        match pg.replication().await {
            Ok(r) => {
                metrics::gauge!("pixgw_db_standbys", "state" => "synchronous").set(r.synchronous as f64);
                metrics::gauge!("pixgw_db_standbys", "state" => "attached").set(r.attached as f64);
                metrics::gauge!("pixgw_db_standby_replay_lag_seconds").set(r.replay_lag_seconds);
            }
            Err(e) => tracing::debug!(error = %e, "reading pg_stat_replication failed"),
        }
        tokio::time::sleep(REPLICATION_WATCH_EVERY).await;
    }
}

/// Renews the lease every period; tells the leadership when it was deposed.
async fn renew(pg: Arc<Pg>, times: LeaseTimes, leadership: Arc<Leadership>) {
    loop {
        tokio::time::sleep(times.renew_every()).await;
        let sent = Instant::now();
        let renewed = pg.renew(times).await;
        metrics::gauge!("pixgw_database_up").set(if renewed.is_ok() { 1.0 } else { 0.0 });
        match renewed {
            Ok(true) => leadership.renewed(sent + times.lease()),
            Ok(false) => {
                tracing::warn!("the lease was taken by another node");
                leadership.depose();
                return;
            }
            Err(e) => tracing::warn!(error = %e, "renewing the lease failed; trying again"),
        }
    }
}

/// Replaces this process with a fresh run of the same command (same pid), keeping the node
/// name and the address. Answers only if that failed.
fn reexec(name: &str, address: SocketAddr) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    crate::telemetry::flush_payment_lines();
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return anyhow::anyhow!("finding this program to start it again: {e}"),
    };
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(NODE_ENV, name)
        .env(REBIND_ENV, address.to_string())
        .exec();
    anyhow::anyhow!("starting again as a standby: {err}")
}
