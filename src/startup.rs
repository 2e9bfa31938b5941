//! Start-up: open storage, bootstrap, build the application, bind, serve, and on SIGTERM or
//! Ctrl-C let in-flight requests finish and flush storage before exiting.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::middleware::from_fn;
use actix_web::{web, App, HttpServer};
use anyhow::Context;

use crate::account::{DeliverOnUs, Deps, OnUsCourier, Registry};
use crate::auth::secrets;
use crate::auth::tokens::TokenKeys;
use crate::bootstrap::{self, Boot};
use crate::clock::Clock;
use crate::config::{Settings, REQUEST_BODY_BYTES_MAX};
use crate::domain::delivery::{RESEND_PER_WINDOW_MAX, RESEND_WINDOW_SECONDS};
use crate::domain::rate::RateWindow;
use crate::http::{self, AppState};
use crate::rail::sim::bank::SimulatedBank;
use crate::rail::sim::directory::Directory;
use crate::store::{GroupCommit, JournalOptions, Repo, Storage};
use crate::telemetry;
use crate::webhooks::WebhookSettings;

pub struct Application {
    server: Server,
    address: SocketAddr,
    commit: Arc<GroupCommit>,
    /// The SPI rail's readers, closed (`DELETE` on each stream) at a graceful stop.
    streams: Option<crate::rail::spi::rail::Streams>,
    pub boot: Boot,
}

/// Opens the data dir's storage (sled in `db/`, the journal in `journal/`), replaying the
/// journal before anything is served.
pub fn open_storage(settings: &Settings) -> anyhow::Result<Storage> {
    // The recorder first: recovery sets the storage gauges.
    crate::telemetry::metrics_handle();
    std::fs::create_dir_all(&settings.data_dir)
        .with_context(|| format!("creating the data dir {}", settings.data_dir.display()))?;
    // A data dir an earlier release made readable by others is made the user's own.
    let tightened = crate::private::tighten(&settings.data_dir)
        .with_context(|| format!("making the data dir {} owner-only", settings.data_dir.display()))?;
    if tightened > 0 {
        tracing::warn!(
            entries = tightened,
            "the data dir held files others could read; they are owner-only now"
        );
    }
    let journal =
        JournalOptions { segment_bytes: settings.journal_segment_mb * 1024 * 1024, ..Default::default() };
    let storage = Storage::open(&settings.data_dir, settings.storage_cache_mb, journal, Repo::layout())
        .with_context(|| format!("opening storage in {}", settings.data_dir.display()))?;
    Ok(storage)
}

impl Application {
    /// Builds the server on the storage of the data dir.
    pub fn build(settings: Settings) -> anyhow::Result<Application> {
        settings.log_start();
        let storage = open_storage(&settings)?;
        Application::build_with_storage(settings, storage)
    }

    /// Builds the server on any storage (tests inject failing stores).
    pub fn build_with_storage(settings: Settings, storage: Storage) -> anyhow::Result<Application> {
        let listener =
            TcpListener::bind(settings.listen).with_context(|| format!("binding {}", settings.listen))?;
        Application::build_on(settings, storage, listener, None)
    }

    /// Builds the server on `storage`, serving on `listener`, the API only while `gate`
    /// allows (a node on a shared database).
    pub fn build_on(
        settings: Settings,
        storage: Storage,
        listener: TcpListener,
        gate: crate::http::gate::SharedGate,
    ) -> anyhow::Result<Application> {
        let gated = gate.is_some();
        if !gated {
            // A single node serves from its start; a node on a shared database says so once
            // it holds the lease (node.rs).
            metrics::gauge!("pixgw_serving").set(1.0);
        }
        let repo = Repo::new(&storage).with_sealing(settings.sealing.clone());
        let commit = Arc::clone(&storage.commit);
        if let Some(spi) = &settings.spi {
            // Every id this gateway makes from now on carries its ISPB.
            crate::domain::transaction::set_gateway_ispb(spi.ispb.as_str()).map_err(anyhow::Error::msg)?;
        }
        let start_clock = Clock::system();
        let boot = bootstrap::load_or_init(
            &repo,
            &settings.data_dir,
            start_clock.now(),
            settings.admin_token.as_deref(),
            settings.production,
        )?;
        let clock =
            Arc::new(if settings.test_clock { Clock::test(boot.clock_offset_ms) } else { Clock::system() });
        let tokens = TokenKeys::with_previous(&boot.jwt_key, boot.jwt_key_previous.as_deref());
        tokens.self_test(clock.now()).map_err(|e| anyhow::anyhow!("token signing self-test failed: {e}"))?;
        use crate::auth::admin_tokens::AdminTokens;
        let admin_tokens =
            match (&settings.admin_tokens, &settings.admin_token, &boot.stored_admin_token_hash) {
                (Some(named), _, _) => named.clone(),
                (None, Some(t), _) => AdminTokens::single_hash(secrets::hash_secret("", t)),
                (None, None, Some(h)) => AdminTokens::single_hash(h.clone()),
                (None, None, None) => anyhow::bail!("no admin token: set PIXGW_ADMIN_TOKEN"),
            };
        let admin_tokens = Arc::new(std::sync::RwLock::new(admin_tokens));
        if let Some(path) = settings.admin_token_file.clone() {
            reload_admin_tokens_on_sighup(path, Arc::clone(&admin_tokens))?;
        }
        let directory = Arc::new(match &settings.dict_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading the key directory {}", path.display()))?;
                Directory::from_json(&text)?
            }
            None => Directory::embedded()?,
        });
        let rewritten = crate::store::migrate::records(&repo, &commit)?;
        if rewritten > 0 {
            tracing::info!(
                records = rewritten,
                "rewrote the records of the release before in the binary format"
            );
        }
        let indexed = repo.backfill_transaction_index(&commit)?;
        if indexed > 0 {
            tracing::info!(transactions = indexed, "built the transactions list index");
        }
        let bank_directory = Arc::clone(&directory);
        let settle_delay = std::time::Duration::from_millis(settings.sim_settle_ms);
        let indexed = repo.backfill_receiving_keys(&commit)?;
        if indexed > 0 {
            tracing::info!(accounts = indexed, "indexed the receiving keys of the accounts");
        }
        let indexed = repo.backfill_received_index(&commit)?;
        if indexed > 0 {
            tracing::info!(received = indexed, "indexed the received PIX by when they arrived");
        }
        // A payment to any key an account of this gateway holds (its receiving EVP, or an
        // e-mail, phone, CPF or CNPJ an operator registered for it) settles on us: a book
        // transfer reaches neither the directory nor the settlement (decisions.md).
        let keys = repo.clone();
        let on_us: crate::rail::sim::bank::OnUsResolver =
            Arc::new(move |k| keys.account_by_receiving_key(&k.key).ok().flatten());
        let (rails, keys, spi) =
            start_rails(&settings, bank_directory, settle_delay, on_us, &repo, Arc::clone(&clock))?;
        let deps = Arc::new(Deps {
            repo: repo.clone(),
            commit: Arc::clone(&commit),
            clock: Arc::clone(&clock),
            rails,
            directory: Arc::clone(&directory),
            on_us: std::sync::OnceLock::new(),
            collect: std::sync::OnceLock::new(),
            // Always made, so a payer of this gateway can be led from a QR code's location
            // to its recurrence (on us); served at the payload host when there is one.
            rec_locations: Some(crate::domain::location::RecLocations::new(
                match settings.payload.as_ref() {
                    Some(p) => p.host.clone(),
                    None => {
                        crate::domain::location::LocationHost::parse(crate::domain::decide::LOCATION_HOST)
                            .map_err(|e| anyhow::anyhow!("the default location host: {e}"))?
                    }
                },
                boot.location_key.clone(),
            )),
        });
        // Before anything can write to the outbox (see webhooks::start).
        let webhooks = crate::webhooks::start(
            repo.clone(),
            &commit,
            Arc::clone(&clock),
            &WebhookSettings {
                allow_http: settings.webhook_allow_http,
                allow_private: settings.webhook_allow_private,
                ca_file: settings.webhook_ca_file.clone(),
                senders: settings.webhook_senders,
            },
        )
        .context("starting webhook delivery")?;
        let registry = Arc::new(Registry::new(deps, settings.workers));
        let spi_streams = spi.as_ref().map(|s| s.streams());
        if let Some(spi) = &spi {
            // The streams start once there are accounts to carry what they read to.
            spi.read(Arc::new(crate::account::Accounts { registry: Arc::clone(&registry) }));
        }
        // Operators' approved resolutions of aged payouts a crash kept from taking effect.
        let resolved = Arc::clone(&registry);
        actix_web::rt::spawn(async move {
            if let Err(e) = crate::account::apply_resolutions_again(&resolved).await {
                tracing::error!(error = %e, "approved rail resolutions could not be applied again; they are at the next start");
            }
        });
        let swept = Arc::clone(&registry);
        actix_web::rt::spawn(async move {
            let mut every = tokio::time::interval(crate::account::IDLE_SWEEP_EVERY);
            loop {
                every.tick().await;
                swept.sweep();
            }
        });
        // On-us credits: the courier carries them to their payees; those a crash left
        // written are delivered again now (the payee answers a credit it already has).
        let courier = actix::Actor::start(OnUsCourier::new(Arc::clone(&registry)));
        let _ = registry.deps().on_us.set(courier.clone().recipient());
        let _ = registry.deps().collect.set(courier.clone().recipient());
        let owed = repo.on_us_credits()?;
        if !owed.is_empty() {
            tracing::info!(credits = owed.len(), "delivering on-us credits left from before");
        }
        for credit in owed {
            courier.do_send(DeliverOnUs(credit));
        }
        // Recovery: wake every account with pending debits so they go to the bank again
        // now, not when the account is next used.
        let resumed = repo.accounts_with_pending()?;
        for id in &resumed {
            registry.get(*id).with_context(|| format!("resuming account {id}"))?;
        }
        if !resumed.is_empty() {
            tracing::info!(accounts = resumed.len(), "resumed accounts with pending payments");
        }
        let webhook_policy = crate::webhooks::sender::Policy {
            allow_http: settings.webhook_allow_http,
            allow_private: settings.webhook_allow_private,
        };
        let locations = match &settings.payload {
            Some(p) => Some(Arc::new(
                http::payload::Locations::new(
                    p.host.clone(),
                    Arc::clone(&p.signer),
                    p.chain.clone(),
                    boot.location_key.clone(),
                )
                .map_err(|e| anyhow::anyhow!("payload locations: {e}"))?,
            )),
            None => None,
        };
        let state = web::Data::new(AppState {
            repo,
            clock,
            tokens,
            admin_tokens,
            registry,
            directory,
            keys,
            webhook_policy,
            require_client_cert: settings.require_client_cert,
            production: settings.production,
            access_log: settings.access_log,
            body_timeout: std::time::Duration::from_millis(settings.body_timeout_ms),
            idempotency: Default::default(),
            webhooks,
            resend_rate: std::sync::Mutex::new(RateWindow::new(
                RESEND_PER_WINDOW_MAX,
                chrono::Duration::seconds(RESEND_WINDOW_SECONDS),
            )),
            token_throttle: std::sync::Mutex::new(Default::default()),
            med_list_rate: std::sync::Mutex::new(RateWindow::new(
                crate::http::med::MED_LIST_PER_WINDOW_MAX,
                chrono::Duration::seconds(crate::http::med::MED_LIST_WINDOW_SECONDS),
            )),
            gate,
            locations,
            payloads: settings.spi.as_ref().map(|s| Arc::clone(&s.payloads)),
            rail_hold: spi.as_ref().map(|s| s.hold()),
            rail_backlog: spi.as_ref().map(|s| s.backlog()),
            account_rate_limit: settings.account_rate_limit,
            operator_credit_single_max: settings.operator_credit_single_max,
            account_rate: std::sync::Mutex::default(),
        });
        telemetry::metrics_handle();

        let address = listener.local_addr()?;
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .app_data(web::PayloadConfig::new(REQUEST_BODY_BYTES_MAX))
                // The last wrapped runs first: the access line and the error envelope see
                // everything; the gate and then the caller's access are decided before
                // anything else of the request is read (its sandbox header, its body).
                .wrap(from_fn(http::body::read_within_deadline))
                .wrap(from_fn(http::payments::scenario_only_where_taken))
                .wrap(from_fn(http::authorize::authorize))
                .wrap(actix_web::middleware::Condition::new(gated, from_fn(http::gate::while_open)))
                .wrap(from_fn(http::error::envelope))
                .wrap(from_fn(http::access::access))
                .configure(|cfg| {
                    http::routes(cfg);
                })
                .service(http::docs_service())
                .default_service(web::to(http::not_found))
        })
        .workers(settings.workers)
        .shutdown_timeout(settings.shutdown_timeout_seconds)
        .disable_signals()
        .listen(listener)?
        .run();
        stop_on_signals(server.handle())?;
        let streams = spi_streams;
        Ok(Application { server, address, boot, commit, streams })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops the server from outside (a node that must give up serving).
    pub fn server_handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// The group committer (a node watches it for failure).
    pub fn commit(&self) -> &Arc<GroupCommit> {
        &self.commit
    }

    /// Serves until a stop signal; then writes what is queued and checkpoints, so the next
    /// start has nothing to replay.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let served = self.server.await;
        if let Some(streams) = &self.streams {
            // Before the committer drains: a reader carrying out a batch writes it first.
            if !streams.close(crate::rail::spi::rail::STREAMS_CLOSE_WITHIN).await {
                tracing::warn!("not every ICOM stream was closed in time; ICOM expires the rest");
            }
        }
        tracing::info!("server stopped; writing what is queued and checkpointing storage");
        if let Err(e) = self.commit.drain().await {
            tracing::error!(error = %e, "queued writes were not all written");
        }
        telemetry::flush_payment_lines();
        let commit = Arc::clone(&self.commit);
        let checkpointed = actix_web::rt::task::spawn_blocking(move || {
            let done = commit.checkpoint_now();
            commit.stop_checkpoints();
            done
        })
        .await
        .context("checkpointing at shutdown")?;
        checkpointed.context("checkpointing at shutdown")?;
        served.context("serving")?;
        Ok(())
    }
}

/// The rails: the simulator on a thread of its own (every sandbox account's, and live
/// accounts' unless `--rail` says otherwise), the live accounts' rail, and the key
/// directories routes ask. The SPI rail is answered started but not yet reading.
fn start_rails(
    settings: &Settings,
    directory: Arc<Directory>,
    settle_delay: std::time::Duration,
    on_us: crate::rail::sim::bank::OnUsResolver,
    repo: &Repo,
    clock: Arc<Clock>,
) -> anyhow::Result<(crate::rail::Rails, crate::rail::keys::Keys, Option<crate::rail::spi::rail::Started>)> {
    use crate::rail::keys::{Keys, Live};
    use crate::rail::RailKind;
    let arbiter = actix::Arbiter::new().handle();
    let (sim_directory, sim_on_us) = (Arc::clone(&directory), Arc::clone(&on_us));
    let sim = actix::Actor::start_in_arbiter(&arbiter, move |_| {
        SimulatedBank::new(sim_directory, settle_delay).with_on_us(sim_on_us)
    });
    let keys = |live| Keys { sim: Arc::clone(&directory), live };
    let (live, keys, spi) = match (settings.rail, &settings.spi) {
        (RailKind::Sim, _) => (sim.clone().recipient(), keys(Live::Sim), None),
        (RailKind::None, _) => {
            let closed_directory = Arc::clone(&directory);
            let closed = actix::Actor::start_in_arbiter(&arbiter, move |_| {
                SimulatedBank::new(closed_directory, settle_delay).with_on_us(on_us).closed()
            });
            (closed.recipient(), keys(Live::Closed), None)
        }
        (RailKind::Spi, Some(spi)) => {
            let kept = crate::rail::spi::rail::Kept {
                log: Arc::new(repo.clone()),
                in_flight: Arc::default(),
                since: kept_since(repo, &clock)?,
                clock,
                hold: crate::rail::spi::rail::Hold::new(repo.meta(crate::store::keys::RAIL_HELD)?.is_some()),
                backlog: Arc::new(crate::rail::spi::rail::Backlog::new(spi.payout_backlog_max)),
            };
            let started = crate::rail::spi::rail::start(spi.clone(), on_us, kept);
            let documents = repo.clone();
            let payer_document: Arc<dyn Fn(crate::domain::ids::AccountId) -> Option<String> + Send + Sync> =
                Arc::new(move |id| {
                    documents.account(id).ok().flatten().map(|a| a.profile.document.to_string())
                });
            let live = Live::Dict {
                client: started.dict.clone(),
                cache: started.dict_cache.clone(),
                payer_document,
                tax: spi.tax_registry.clone().map(crate::rail::spi::tax_registry::TaxRegistry::new),
            };
            (started.door.clone().recipient(), keys(live), Some(started))
        }
        (RailKind::Spi, None) => anyhow::bail!("--rail spi needs the [spi] settings"),
    };
    Ok((crate::rail::Rails { sandbox: sim.recipient(), live }, keys, spi))
}

/// Since when this store keeps every SPI payout's message before it leaves: written at the
/// first start of a release that does, read ever after.
fn kept_since(repo: &Repo, clock: &Clock) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    use crate::store::keys::SPI_KEPT_SINCE;
    let ms = match repo.meta(SPI_KEPT_SINCE)? {
        Some(v) => i64::from_be_bytes(v.as_slice().try_into().context("meta/spi_kept_since is not 8 bytes")?),
        None => {
            let now = clock.now().timestamp_millis();
            repo.put_meta(SPI_KEPT_SINCE, &now.to_be_bytes())?;
            now
        }
    };
    chrono::DateTime::from_timestamp_millis(ms).context("meta/spi_kept_since is out of range")
}

/// Stops the server gracefully on SIGTERM or SIGINT (Ctrl-C).
///
/// actix would install its own handlers only when the server future is first polled, after
/// the banner has told the world the server is ready; a SIGTERM in between would kill the
/// process without a flush. These handlers exist before `build` returns.
/// Reads the admin token file again on each SIGHUP: tokens added work, tokens removed stop
/// working, without a restart. A file that no longer reads (or breaks a rule) changes
/// nothing, and says why.
fn reload_admin_tokens_on_sighup(
    path: std::path::PathBuf,
    tokens: Arc<std::sync::RwLock<crate::auth::admin_tokens::AdminTokens>>,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    actix_web::rt::spawn(async move {
        while hup.recv().await.is_some() {
            match crate::config::read_admin_tokens(&path) {
                Ok((_, fresh)) => {
                    let names = fresh.names().join(", ");
                    *tokens.write().unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
                    tracing::info!(file = %path.display(), tokens = %names, "SIGHUP: the admin tokens were read again");
                }
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: the admin token file was not read; the tokens stay as they were")
                }
            }
        }
    });
    Ok(())
}

fn stop_on_signals(handle: actix_web::dev::ServerHandle) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    actix_web::rt::spawn(async move {
        let which = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(signal = which, "stopping: letting in-flight requests finish");
        handle.stop(true).await;
    });
    Ok(())
}
