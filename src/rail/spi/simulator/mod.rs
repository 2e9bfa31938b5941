//! `pixgw spi-sim`: the central bank's rails in one local process, for tests and for trying
//! the SPI rail. It serves ICOM (send, streams) and the DICT over mutual TLS with a local
//! PKI it writes itself ([`pki`]), checks every message as the SPI does (its signature
//! against the sender's certificate, every field against the catalogue's rules), settles
//! between the participants' settlement accounts ([`core`]), times out what its receiver
//! does not answer, and plays virtual participants:
//!
//! | ISPB | name | what it does |
//! |---|---|---|
//! | `99999A03` | virtual payer | sends PIX on request (the control route `POST /sim/pix`) |
//! | `99999A04` | virtual receiver | accepts every payment |
//! | `99999A05` | rejecting receiver | rejects every payment with a chosen reason (AC06 unless set) |
//! | `99999A06` | silent receiver | never answers: the SPI times the payment out (AB03) |
//! | the institutions of `data/dict.json` | banks of the simulated directory | accept every payment |
//!
//! A plain-HTTP control listener on loopback ([`control`]) lets a test or a person make the
//! virtual payer pay, make a receiver return money, read the settlement accounts and a
//! payment's state, and change a virtual receiver's behaviour.
//!
//! State lives in memory: a restart of the simulator starts its books again (the PKI stays).

pub mod claims;
pub mod control;
pub mod core;
pub mod dict;
pub mod fraud;
pub mod icom;
pub mod pki;
pub mod recovery;
pub mod sync;
pub mod tax;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::web::Bytes;
use anyhow::Context;

use self::core::{Behaviour, Engine, Outgoing, Participant};
use super::message::Ispb;
use super::pki::{Certificate, Signer};

/// The virtual participants' ISPBs.
pub const VIRTUAL_PAYER: &str = "99999A03";
pub const VIRTUAL_RECEIVER: &str = "99999A04";
pub const REJECTING_RECEIVER: &str = "99999A05";
pub const SILENT_RECEIVER: &str = "99999A06";
/// What the rejecting receiver rejects with unless told otherwise (a blocked account).
pub const DEFAULT_REJECT_REASON: &str = "AC06";
/// Every participant's settlement account at start, unless set: 1,000,000,000.00.
pub const SETTLEMENT_BALANCE_CENTS_DEFAULT: i128 = 100_000_000_000;
/// How long a receiver has to answer before the SPI times a payment out, unless set.
pub const RECEIVER_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// A stream not read again for this long is closed and what it last delivered (unconfirmed)
/// is delivered again: a participant that crashed gets it on its next stream.
pub const STREAM_IDLE_DEFAULT: Duration = Duration::from_secs(15);

/// `pixgw spi-sim`'s options.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Where the local PKI and `pixgw-spi.toml` are written (kept across starts).
    #[arg(long)]
    pub dir: PathBuf,
    /// ICOM and the DICT, over mutual TLS.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// The control routes, plain HTTP (keep it on loopback).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub control: String,
    /// A real participant's ISPB (repeat for several, such as two pixgw paying each other):
    /// each gets its settings file, `pixgw-spi-{ISPB}.toml`, and the first is also
    /// `pixgw-spi.toml`.
    #[arg(long = "participant", default_value = "1234ABCD")]
    pub participants: Vec<String>,
    /// Milliseconds a receiver has to answer a payment before it times out (AB03).
    #[arg(long, default_value_t = RECEIVER_TIMEOUT_DEFAULT.as_millis() as u64)]
    pub timeout_ms: u64,
    /// Milliseconds a read waits for a message before answering 204.
    #[arg(long, default_value_t = super::icom::LONG_POLL.as_millis() as u64)]
    pub long_poll_ms: u64,
    /// Milliseconds a stream may go unread before it is closed and its last delivery given again.
    #[arg(long, default_value_t = STREAM_IDLE_DEFAULT.as_millis() as u64)]
    pub stream_idle_ms: u64,
    /// Accept messages that carry no signature (what many homologation tools send).
    #[arg(long)]
    pub accept_unsigned: bool,
    /// Write every message the simulator receives and sends into this directory (for a
    /// schema check of a whole run with xmllint afterwards).
    #[arg(long)]
    pub spool: Option<PathBuf>,
    /// HTTP worker threads.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
}

/// One delivery waiting in a participant's stream.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub resource_id: String,
    pub body: Bytes,
}

/// A participant's side of ICOM: what waits to be read, and its open streams.
#[derive(Default)]
pub struct Queue {
    pub pending: VecDeque<Delivery>,
    /// Open streams: the token of the next read, what the last read delivered (not yet
    /// confirmed), and when it was last read.
    pub streams: HashMap<String, (Vec<Delivery>, Instant)>,
    pub notify: Arc<tokio::sync::Notify>,
}

/// Every posting of one message id a participant made: the resource id each got, and the
/// SHA-256 of each distinct body (a resend of the same bytes adds none).
#[derive(Debug, Default, Clone)]
pub struct Postings {
    pub resource_ids: Vec<String>,
    pub bodies: std::collections::HashSet<[u8; 32]>,
}

/// Counters the control routes show.
#[derive(Debug, Default, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub messages_received: u64,
    pub messages_sent: u64,
    pub unsigned_or_bad_signature: u64,
    pub malformed: u64,
    pub rejections_sent: u64,
    pub streams_refused: u64,
    /// Streams a participant closed with `DELETE`.
    pub streams_closed: u64,
    /// Streams given up after going unread for the idle time (their last delivery given
    /// again).
    pub streams_expired: u64,
    /// Reads answered 503 during an outage of reading.
    pub reads_refused: u64,
    /// Faults played at a steady rate ([`Every`]), by kind.
    pub faults_played: std::collections::BTreeMap<String, u64>,
}

/// Which of ICOM's halves answer 503 (an outage the control routes switch on and off).
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outage {
    /// Sending (`POST .../msgs`) answers 503: nothing is stored.
    #[serde(default)]
    pub sends: bool,
    /// Reading (the streams) answers 503: nothing is delivered or confirmed.
    #[serde(default)]
    pub reads: bool,
    /// The DICT's key lookups answer 503 with `Retry-After`.
    #[serde(default)]
    pub dict: bool,
}

/// Faults ICOM's sending half plays on the next posts (each count goes down by one per
/// post it answers): what a real network and ICOM do to a participant.
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Faults {
    /// Answer 408 without storing anything.
    #[serde(default)]
    pub answer_408: u32,
    /// Answer 429 with `Retry-After` as an HTTP date a second ahead, storing nothing.
    #[serde(default)]
    pub answer_429_http_date: u32,
    /// Store (and carry out) what was posted, then answer 502, as a proxy whose upstream
    /// answered too late: the participant cannot know it was stored.
    #[serde(default)]
    pub answer_502_after_storing: u32,
    /// Faults at a steady rate, until replaced.
    #[serde(default)]
    pub every: Every,
}

/// Faults played at a steady rate, each one in so many of its events (0: never), for a run
/// under every fault at once (benches/spi/homologation.sh `FAULTS=1`). Each is counted in
/// `/sim/stats` (`faultsPlayed`).
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Every {
    /// Posts answered 408, storing nothing.
    #[serde(default)]
    pub post408: u32,
    /// Posts answered 429 with `Retry-After` an HTTP date a second ahead, storing nothing.
    #[serde(default)]
    pub post429: u32,
    /// Posts answered 500, storing nothing.
    #[serde(default)]
    pub post500: u32,
    /// Posts stored and carried out, then the connection dropped in the middle of the
    /// answer (the participant cannot know they were stored).
    #[serde(default)]
    pub post_reset: u32,
    /// Reads answered 408, 429 (`Retry-After: 1`) or 500, delivering nothing.
    #[serde(default)]
    pub read408: u32,
    #[serde(default)]
    pub read429: u32,
    #[serde(default)]
    pub read500: u32,
    /// Reads whose batch is delivered (the stream moves on) and whose answer is lost: the
    /// batch comes again once that stream expires.
    #[serde(default)]
    pub read_dropped: u32,
    /// Messages to a real participant queued twice (two resource ids, one message).
    #[serde(default)]
    pub duplicate: u32,
    /// Statuses (pacs.002) to a real participant held back `late_ms` before they are
    /// queued: an answer past the SPI's 40 s.
    #[serde(default)]
    pub late_status: u32,
    #[serde(default)]
    pub late_ms: u64,
}

impl Sim {
    /// Whether this event of `kind` plays its fault (one in `every`), counting it.
    pub fn plays(&self, kind: &'static str, every: u32) -> bool {
        if every == 0 {
            return false;
        }
        let mut seen = self.fault_events.lock().unwrap_or_else(|p| p.into_inner());
        let n = seen.entry(kind).or_default();
        *n += 1;
        if *n % u64::from(every) != 0 {
            return false;
        }
        drop(seen);
        *self
            .stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .faults_played
            .entry(kind.to_owned())
            .or_default() += 1;
        self.disturbed();
        true
    }

    /// Notes that a fault or an outage fell now (the engine's clean answer times leave out
    /// the payments waiting meanwhile). Never called with the engine or a queue locked.
    pub fn disturbed(&self) {
        self.engine.lock().unwrap_or_else(|p| p.into_inner()).disturbed(Instant::now());
    }

    /// The faults played at a steady rate.
    pub fn every(&self) -> Every {
        self.faults.lock().unwrap_or_else(|p| p.into_inner()).every
    }
}

/// Everything the simulator's servers share.
pub struct Sim {
    pub engine: Mutex<Engine>,
    pub queues: Mutex<HashMap<Ispb, Queue>>,
    pub spi_signer: Signer,
    pub dict_signer: Signer,
    /// Each real participant's signing certificates (what its messages are verified with).
    pub signing_certs: HashMap<Ispb, Vec<Certificate>>,
    /// Each real participant's TLS certificate, by the SHA-256 of its DER.
    pub tls_certs: HashMap<[u8; 32], Ispb>,
    pub directory: Mutex<dict::Directory>,
    /// The MED's refund requests, by id, in the order they were made.
    pub refunds: Mutex<Vec<crate::rail::spi::dict::Refund>>,
    /// How many lists of refund requests the DICT has answered.
    pub refund_lists: std::sync::atomic::AtomicU64,
    /// Every message id participants posted, with its postings.
    pub postings: Mutex<HashMap<String, Postings>>,
    pub stats: Mutex<Stats>,
    pub outage: Mutex<Outage>,
    pub faults: Mutex<Faults>,
    /// Events seen of each kind a steady fault counts ([`Sim::plays`]).
    pub fault_events: Mutex<HashMap<&'static str, u64>>,
    /// Deliveries held back (a late status), with when each is queued.
    pub held_back: Mutex<Vec<(Instant, Ispb, Delivery)>>,
    pub accept_unsigned: bool,
    pub spool: Option<PathBuf>,
    pub long_poll: Duration,
    pub stream_idle: Duration,
    spooled: std::sync::atomic::AtomicU64,
    /// The DICT's key claims.
    pub claims: Mutex<claims::Book>,
    /// The DICT's reconciliation: CID files and verifications.
    pub sync: Mutex<sync::Files>,
    /// The DICT's fraud marks.
    pub fraud: Mutex<fraud::Marks>,
    /// The DICT's funds recoveries (MED 2.0), their reports and events.
    pub recovery: Mutex<recovery::Book>,
    /// The tax authority's CPF register (served on the control port).
    pub tax: Mutex<tax::Register>,
    /// How far the control routes moved the simulator's clock, in ms (claims' periods).
    pub clock_offset_ms: Arc<std::sync::atomic::AtomicI64>,
}

impl Sim {
    /// The simulator's clock: the system's, moved by the control route `PUT /sim/clock`.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now()
            + chrono::Duration::milliseconds(self.clock_offset_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Whether `ispb` is a real participant (one with certificates), not a virtual one.
    pub fn is_real(&self, ispb: &Ispb) -> bool {
        self.signing_certs.contains_key(ispb)
    }

    /// Signs and queues what the engine sends; virtual participants need nothing sent.
    pub fn dispatch(&self, out: Vec<Outgoing>) {
        if out.is_empty() {
            return;
        }
        let every = self.every();
        let mut signed = Vec::with_capacity(out.len());
        for o in out {
            let status = matches!(o.message.body, super::message::Body::Statuses(_));
            let text = o.message.write();
            match super::dsig::sign_spi(&text, &self.spi_signer) {
                Ok(s) => signed.push((o.to, Bytes::from(s), status)),
                Err(e) => tracing::error!(error = %e, "the simulator could not sign its own message"),
            }
        }
        for (_, body, _) in &signed {
            self.spool("out", body);
        }
        let mut queued = Vec::with_capacity(signed.len());
        for (to, body, status) in signed {
            if status && self.plays("lateStatus", every.late_status) {
                let at = Instant::now() + Duration::from_millis(every.late_ms);
                let d = Delivery { resource_id: resource_id(), body };
                self.held_back.lock().unwrap_or_else(|p| p.into_inner()).push((at, to, d));
                continue;
            }
            if self.plays("duplicate", every.duplicate) {
                queued.push((to.clone(), body.clone()));
            }
            queued.push((to, body));
        }
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        for (to, body) in queued {
            let q = queues.entry(to).or_default();
            q.pending.push_back(Delivery { resource_id: resource_id(), body });
            q.notify.notify_waiters();
            stats.messages_sent += 1;
        }
    }

    /// Queues the held-back deliveries whose time has come.
    fn release_held_back(&self) {
        let now = Instant::now();
        let due: Vec<(Instant, Ispb, Delivery)> = {
            let mut held = self.held_back.lock().unwrap_or_else(|p| p.into_inner());
            let (due, wait): (Vec<_>, Vec<_>) = held.drain(..).partition(|(at, _, _)| *at <= now);
            *held = wait;
            due
        };
        if due.is_empty() {
            return;
        }
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        for (_, to, d) in due {
            let q = queues.entry(to).or_default();
            q.pending.push_back(d);
            q.notify.notify_waiters();
            stats.messages_sent += 1;
        }
    }

    /// Keeps a copy of a message when spooling.
    pub fn spool(&self, direction: &str, body: &[u8]) {
        let Some(dir) = &self.spool else { return };
        let n = self.spooled.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = std::fs::write(dir.join(format!("{n:08}-{direction}.xml")), body);
    }

    /// Runs the engine's clock: payments past their deadline, and streams left unread.
    pub fn tick(&self) {
        let out = {
            let mut e = self.engine.lock().unwrap_or_else(|p| p.into_inner());
            e.expire(Instant::now(), chrono::Utc::now())
        };
        self.dispatch(out);
        self.release_held_back();
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let mut expired = 0;
        for q in queues.values_mut() {
            let idle: Vec<String> = q
                .streams
                .iter()
                .filter(|(_, (_, at))| at.elapsed() >= self.stream_idle)
                .map(|(t, _)| t.clone())
                .collect();
            for token in idle {
                if let Some((unconfirmed, _)) = q.streams.remove(&token) {
                    expired += 1;
                    // Delivered again first, with the same resource ids.
                    for d in unconfirmed.into_iter().rev() {
                        q.pending.push_front(d);
                    }
                    q.notify.notify_waiters();
                }
            }
        }
        drop(queues);
        if expired > 0 {
            self.stats.lock().unwrap_or_else(|p| p.into_inner()).streams_expired += expired;
        }
    }
}

/// A resource id as ICOM gives them: 32 characters of base64.
pub fn resource_id() -> String {
    use base64::Engine as _;
    let mut b = [0u8; 24];
    let _ = getrandom::fill(&mut b);
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// What the running simulator tells its caller.
pub struct Running {
    pub icom_url: String,
    pub control_url: String,
    /// The first participant's settings file (`pixgw-spi.toml`).
    pub config_file: PathBuf,
    /// Every participant's settings file, in the order they were named.
    pub participant_files: Vec<(Ispb, PathBuf)>,
    pub sim: Arc<Sim>,
}

fn load_signer(dir: &Path, what: &str) -> anyhow::Result<Signer> {
    Signer::from_files(&dir.join(format!("{what}/sign.key")), &dir.join(format!("{what}/sign.pem")))
        .with_context(|| format!("loading the {what} signing key"))
}

/// Writes the PKI if needed, builds the state, binds both listeners and starts serving.
pub async fn start(args: SimArgs) -> anyhow::Result<Running> {
    crate::trust::install_provider();
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let participants: Vec<Ispb> = args
        .participants
        .iter()
        .map(|p| Ispb::parse(p).ok_or_else(|| anyhow::anyhow!("{p:?} is not an ISPB")))
        .collect::<anyhow::Result<_>>()?;
    let dir = args.dir.clone();
    let ps = participants.clone();
    actix_web::rt::task::spawn_blocking(move || pki::ensure(&dir, &ps)).await??;
    let mut engine = Engine::new(Duration::from_millis(args.timeout_ms));
    let mut signing_certs = HashMap::new();
    let mut tls_certs = HashMap::new();
    for ispb in &participants {
        let f = pki::ParticipantFiles::of(&args.dir, ispb);
        signing_certs.insert(ispb.clone(), Certificate::from_pem_file(&f.sign_cert)?);
        for c in Certificate::from_pem_file(&f.tls_cert)? {
            use sha2::Digest;
            tls_certs.insert(sha2::Sha256::digest(&c.der).into(), ispb.clone());
        }
        engine.add_participant(
            ispb.clone(),
            Participant {
                name: format!("participant {ispb}"),
                virtual_behaviour: None,
                balance: SETTLEMENT_BALANCE_CENTS_DEFAULT,
                paid: 0,
                received: 0,
            },
        );
    }
    let directory = dict::Directory::seeded()?;
    let clock = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let virtuals = [
        (VIRTUAL_PAYER, "Virtual payer", Behaviour::AcceptAll),
        (VIRTUAL_RECEIVER, "Virtual receiver", Behaviour::AcceptAll),
        (REJECTING_RECEIVER, "Rejecting receiver", Behaviour::Reject(DEFAULT_REJECT_REASON.into())),
        (SILENT_RECEIVER, "Silent receiver", Behaviour::Silent),
    ];
    for (ispb, name, b) in virtuals {
        let p = Participant {
            name: name.into(),
            virtual_behaviour: Some(b),
            balance: SETTLEMENT_BALANCE_CENTS_DEFAULT,
            paid: 0,
            received: 0,
        };
        engine.add_participant(Ispb::parse(ispb).ok_or_else(|| anyhow::anyhow!("bad virtual ISPB"))?, p);
    }
    for (ispb, name) in directory.institutions() {
        if engine.participant(&ispb).is_none() {
            let p = Participant {
                name,
                virtual_behaviour: Some(Behaviour::AcceptAll),
                balance: SETTLEMENT_BALANCE_CENTS_DEFAULT,
                paid: 0,
                received: 0,
            };
            engine.add_participant(ispb, p);
        }
    }
    if let Some(spool) = &args.spool {
        std::fs::create_dir_all(spool).with_context(|| format!("creating {}", spool.display()))?;
    }
    let sim = Arc::new(Sim {
        engine: Mutex::new(engine),
        queues: Mutex::new(participants.iter().map(|p| (p.clone(), Queue::default())).collect()),
        spi_signer: load_signer(&args.dir, "spi")?,
        dict_signer: load_signer(&args.dir, "dict")?,
        signing_certs,
        tls_certs,
        directory: Mutex::new(directory.with_clock(Arc::clone(&clock))),
        refunds: Mutex::new(Vec::new()),
        refund_lists: std::sync::atomic::AtomicU64::new(0),
        postings: Mutex::new(HashMap::new()),
        stats: Mutex::new(Stats::default()),
        outage: Mutex::new(Outage::default()),
        faults: Mutex::new(Faults::default()),
        fault_events: Mutex::new(HashMap::new()),
        held_back: Mutex::new(Vec::new()),
        accept_unsigned: args.accept_unsigned,
        spool: args.spool.clone(),
        long_poll: Duration::from_millis(args.long_poll_ms),
        stream_idle: Duration::from_millis(args.stream_idle_ms),
        spooled: std::sync::atomic::AtomicU64::new(0),
        claims: Mutex::new(claims::Book::default()),
        sync: Mutex::new(sync::Files::default()),
        fraud: Mutex::new(fraud::Marks::default()),
        recovery: Mutex::new(recovery::Book::default()),
        tax: Mutex::new(tax::Register::default()),
        clock_offset_ms: clock,
    });
    let tls = icom::server_tls(&args.dir)?;
    let listener =
        std::net::TcpListener::bind(&args.listen).with_context(|| format!("binding {}", args.listen))?;
    let icom_addr = listener.local_addr()?;
    let state = actix_web::web::Data::from(Arc::clone(&sim));
    let icom_server = actix_web::HttpServer::new({
        let state = state.clone();
        move || actix_web::App::new().app_data(state.clone()).configure(icom::routes).configure(dict::routes)
    })
    .on_connect(icom::peer_certificate)
    .workers(args.workers)
    .disable_signals()
    .listen_rustls_0_23(listener, tls)?
    .run();
    let control_listener =
        std::net::TcpListener::bind(&args.control).with_context(|| format!("binding {}", args.control))?;
    let control_addr = control_listener.local_addr()?;
    let control_server = actix_web::HttpServer::new(move || {
        actix_web::App::new().app_data(state.clone()).configure(control::routes)
    })
    .workers(1)
    .disable_signals()
    .listen(control_listener)?
    .run();
    actix_web::rt::spawn(icom_server);
    actix_web::rt::spawn(control_server);
    let ticking = Arc::clone(&sim);
    actix_web::rt::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_millis(100));
        loop {
            every.tick().await;
            ticking.tick();
        }
    });
    let icom_url = format!("https://{icom_addr}");
    let config_file = args.dir.join("pixgw-spi.toml");
    write_pixgw_config(&args.dir, &config_file, &participants[0], &icom_url)?;
    let mut participant_files = Vec::new();
    for ispb in &participants {
        let file = args.dir.join(format!("pixgw-spi-{ispb}.toml"));
        write_pixgw_config(&args.dir, &file, ispb, &icom_url)?;
        participant_files.push((ispb.clone(), file));
    }
    Ok(Running {
        icom_url,
        control_url: format!("http://{control_addr}"),
        config_file,
        participant_files,
        sim,
    })
}

/// The `[spi]` settings a pixgw of participant `ispb` runs against this simulator with.
fn write_pixgw_config(dir: &Path, file: &Path, ispb: &Ispb, icom_url: &str) -> anyhow::Result<()> {
    let f = pki::ParticipantFiles::of(dir, ispb);
    let p = |p: &Path| p.display().to_string().replace('\\', "\\\\").replace('"', "\\\"");
    let text = format!(
        "# Written by pixgw spi-sim: a pixgw of participant {ispb} on this simulator.\n# pixgw serve --config {}\nrail = \"spi\"\n\n[spi]\nispb = \"{ispb}\"\nicom_url = \"{icom_url}\"\ndict_url = \"{icom_url}/api/v2\"\nca_file = \"{}\"\ntls_cert = \"{}\"\ntls_key = \"{}\"\nsign_cert = \"{}\"\nsign_key = \"{}\"\ntrusted_signers = \"{}\"\n",
        p(file),
        p(&dir.join("ca.pem")),
        p(&f.tls_cert),
        p(&f.tls_key),
        p(&f.sign_cert),
        p(&f.sign_key),
        p(&dir.join("signers.pem")),
    );
    std::fs::write(file, text).with_context(|| format!("writing {}", file.display()))?;
    Ok(())
}

/// `pixgw spi-sim`: starts, prints where it listens, and serves until stopped.
pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    let running = start(args).await?;
    crate::say!("pixgw spi-sim listening on {} control {}", running.icom_url, running.control_url);
    crate::say!("pixgw settings for it: {}", running.config_file.display());
    if running.participant_files.len() > 1 {
        for (ispb, file) in &running.participant_files {
            crate::say!("pixgw settings of participant {ispb}: {}", file.display());
        }
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")?;
    Ok(())
}
