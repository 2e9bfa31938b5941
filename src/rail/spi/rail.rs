//! The SPI rail: live accounts' payouts leave as signed ISO 20022 messages through ICOM, and
//! what the SPI sends pixgw is read from its streams and carried to the accounts.
//!
//! It runs on two threads of its own (the ICOM client is not `Send`). The *inbound* thread
//! holds what has a deadline or a client waiting: the DICT client (a cash-out waits for its
//! lookup), the `streams` readers, and [`SENDERS`] tasks posting the answers to what they
//! read (the SPI times out an arrival answered late). The *payout* thread holds the actor
//! that takes [`Payout`]s, makes and signs their messages, and [`SENDERS`] tasks posting
//! them. It runs only on CPU time nothing else wants ([`run_this_thread_when_idle`]): a
//! payout's debit is already durable and acknowledged, so when clients and the rail want
//! the same cores the acknowledgements go first and the payouts follow in the time left,
//! instead of every acknowledgement waiting behind an RSA signature (docs/decisions.md
//! "The SPI rail").
//!
//! **Sending, exactly once.** A payout reaches the rail only once its pending debit is
//! durable; at every start each pending debit is handed over again (and posted again only
//! if ICOM is not known to have taken it). Its message is built,
//! signed and kept ([`super::sent`]) before it is first posted, and every later posting
//! sends those bytes, so the SPI takes it once by its `BizMsgIdr`; a payout that cannot
//! leave within `leave_within` of its debit fails unsent. A message is posted until ICOM
//! answers 201: 429 and 408 wait as `Retry-After` says (a 408 without it, a moment), 5xx
//! and network failures back off
//! (the next posting counted as a repeat); a 4xx refusal fails the payout only at its first
//! counted posting. A refusal (admi.002, DUPL) ends a payout only when it can be the answer
//! to the original posting.
//!
//! **Reading, exactly once.** A read is confirmed (the next read, which asks ICOM for more)
//! only after everything it delivered has its effect on disk: an arrival's acceptance or
//! refusal, and the answer to it posted with 201; a settlement's credit or debit. If the
//! accounts cannot answer, the stream is left unconfirmed and ICOM delivers the batch again;
//! since every effect is idempotent by end-to-end or return id, doing it again changes
//! nothing.
//!
//! **Bad input.** A message that is not XML, does not verify against the configured SPI
//! certificates (unless unsigned messages are accepted), breaks the catalogue's rules, or
//! is not addressed to this participant is logged, counted, and credits nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_web::web::Bytes;
use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot};

use super::directory::{DictClient, DictError, EntryCache, Lookup};
use super::dsig::{self, Profile};
use super::icom::{IcomClient, IcomError, Pulled, MESSAGES_PER_REQUEST_MAX};
use super::message::{Body, CreditTransfer, Ispb, Message, Return, StatusReport, TxStatus};
use super::outgoing;
use super::sent::{self as kept_log, Leave, RefusedCopy, SentLog, SentMessage};
use super::settings::SpiSettings;
use super::xml::Document;
use crate::domain::decide::IncomingRefusal;
use crate::domain::pix_key::DirectoryKey;
use crate::domain::transaction::{gateway_ispb, ErrorCode, RailDetails, RailOutcome};
use crate::rail::sim::bank::OnUsResolver;
use crate::rail::{Arrival, ArrivalTo, Inbound, Payout, PayoutEnded, Refuse, Settled};

/// When ICOM last answered a request of this node (ms since the epoch, the system clock):
/// the gauge `pixgw_icom_last_exchange_age_seconds` is read from it. Set when the rail
/// starts, so a rail that never reached ICOM ages from its start.
static LAST_EXCHANGE_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
/// Messages queued for posting and not yet taken by a sender.
static SEND_QUEUE: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

fn exchanged() {
    LAST_EXCHANGE_MS.store(Utc::now().timestamp_millis(), std::sync::atomic::Ordering::Relaxed);
}

/// Sets the rail's gauges that live in this module (read at each scrape).
pub fn record_rail_gauges() {
    let last = LAST_EXCHANGE_MS.load(std::sync::atomic::Ordering::Relaxed);
    let age_ms = (Utc::now().timestamp_millis() - last).max(0);
    metrics::gauge!("pixgw_icom_last_exchange_age_seconds").set(age_ms as f64 / 1000.0);
    metrics::gauge!("pixgw_spi_send_queue").set(SEND_QUEUE.load(std::sync::atomic::Ordering::Relaxed) as f64);
}

/// The payout backlog's gauge.
pub fn record_backlog(backlog: &Backlog) {
    metrics::gauge!("pixgw_spi_payout_backlog").set(backlog.waiting() as f64);
}

/// Tasks posting messages at once, on each of the two threads.
pub const SENDERS: usize = 2;
/// The longest a transient failure makes a sender or reader wait before trying again.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// How long a payout whose payee could not be looked up waits before it tries again.
pub const LOOKUP_RETRY_AFTER: Duration = Duration::from_secs(5);

/// The interface's error code for a rejection reason of the SPI or the receiver (the table
/// of docs/interface.md). A reason about this participant's own standing (its settlement
/// account, its signature, its messages) is not the payee's doing: `PAYMENT_EXPIRED`, which
/// a client may send again, and an operator alert.
pub fn reject_code(reason: &str) -> ErrorCode {
    match reason {
        "AB03" => ErrorCode::SettlementTimeout,
        "AC06" => ErrorCode::BlockedAccount,
        "AC07" => ErrorCode::AccountClosed,
        "BE01" | "CH11" => ErrorCode::TaxIdMismatch,
        "AB11" | "AM04" | "DS0G" | "DS27" | "AGNT" | "BE05" | "CH16" | "DT02" | "AM12" | "AM18" | "FF07"
        | "DUPL" | "AM01" | "ED05" => ErrorCode::PaymentExpired,
        _ => ErrorCode::OrderRejected,
    }
}

/// Whether a reason is about this participant itself: worth an operator's attention.
pub fn is_operator_reason(reason: &str) -> bool {
    reject_code(reason) == ErrorCode::PaymentExpired
}

/// The catalogue's reason for an arrival this participant refuses.
pub fn refusal_reason(r: &Refuse) -> &'static str {
    match r {
        // The catalogue has no code of its own for a key that is not the account's (nor
        // ours): the account data do not name a valid account of ours, AC03.
        Refuse::UnknownAccount | Refuse::KeyNotOurs | Refuse::KeyOfAnotherAccount => "AC03",
        Refuse::AccountType => "AC14",
        Refuse::NotAccepted => "AG03",
        Refuse::Account(IncomingRefusal::DocumentMismatch) => "BE01",
        Refuse::Account(IncomingRefusal::UnknownCharge) => "BE17",
        Refuse::Account(IncomingRefusal::ChargePaid) => "DUPL",
        Refuse::Account(IncomingRefusal::ChargeClosed) => "BE17",
        Refuse::Account(IncomingRefusal::WrongAmount) => "AM09",
        Refuse::Account(IncomingRefusal::OriginalNotFound) => "DS04",
        Refuse::Account(IncomingRefusal::ReturnTooLarge) => "AM09",
    }
}

/// One message waiting to be posted, and who waits for its 201.
struct Outbound {
    body: Bytes,
    /// The payout it carries (its end-to-end or return id) and the posting this is, as
    /// counted in its [`SentMessage`]; `None` for an answer, which is kept nowhere.
    payout: Option<(String, u32)>,
    done: Option<oneshot::Sender<Result<(), Refusal>>>,
}

/// ICOM refused a message for good (a 4xx but 408 and 429), at posting `attempt`.
#[derive(Debug, Clone)]
struct Refusal {
    error: IcomError,
    attempt: u32,
}

/// Postings of payouts whose resource ids are not recorded yet. A refusal naming a resource
/// id the store does not know waits until none is left, so an admi.002 read in the instant
/// between ICOM's 201 and its record is matched, not kept as unmatched.
#[derive(Default)]
pub struct InFlight {
    count: std::sync::atomic::AtomicUsize,
    settled: tokio::sync::Notify,
}

impl InFlight {
    fn enter(&self) {
        self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn leave(&self) {
        if self.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            self.settled.notify_waiters();
        }
    }

    /// Waits until no posting is unrecorded, or `bound` passed.
    async fn drained(&self, bound: Duration) {
        let wait = async {
            loop {
                let notified = self.settled.notified();
                if self.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(bound, wait).await;
    }
}

/// Whether the rail is held: a store made by `pixgw restore` or `pixgw migrate` may be a copy
/// of one another node still serves, and two readers of one ISPB's streams split what
/// arrives between them. A held rail reads nothing and sends nothing (payouts wait) until
/// an operator releases it; on-us payments go on.
#[derive(Clone)]
pub struct Hold {
    held: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Hold {
    pub fn new(held: bool) -> Hold {
        Hold { held: Arc::new(tokio::sync::watch::Sender::new(held)) }
    }

    pub fn is_held(&self) -> bool {
        *self.held.borrow()
    }

    /// Lets the rail run (once: a rail is never held again while it runs).
    pub fn release(&self) {
        self.held.send_replace(false);
    }

    /// Waits until the rail is not held.
    pub async fn released(&self) {
        let mut rx = self.held.subscribe();
        let _ = rx.wait_for(|held| !held).await;
    }
}

/// What the rail keeps of what it sent, shared by its senders and readers.
#[derive(Clone)]
pub struct Kept {
    pub log: Arc<dyn SentLog>,
    pub in_flight: Arc<InFlight>,
    /// The server clock: a payout's message is stamped with it and its bound kept by it.
    pub clock: Arc<crate::clock::Clock>,
    /// Since when every payout's message is kept before it leaves: a payout debited before
    /// (by a release that did not keep them) may have left without a record, so it is
    /// built again rather than failed as late.
    pub since: DateTime<Utc>,
    pub hold: Hold,
    pub backlog: Arc<Backlog>,
}

/// The rail's actor: takes payouts.
pub struct SpiRail {
    settings: SpiSettings,
    outbox: mpsc::UnboundedSender<Outbound>,
    dict: Addr<DictClient>,
    /// Which account of this gateway a key is the receiving key of: a payment to it is
    /// settled on us, never sent (the SPI refuses a transfer within one participant).
    on_us: OnUsResolver,
    kept: Kept,
    /// Payouts handed over while the rail was held, sent once it is released; with whether
    /// each is still counted in the backlog (it came through the door).
    waiting: Vec<(Payout, bool)>,
}

/// The hold on the rail was released: what waited goes.
#[derive(actix::Message)]
#[rtype(result = "()")]
struct Released;

impl Handler<Released> for SpiRail {
    type Result = ();

    fn handle(&mut self, _: Released, ctx: &mut Context<Self>) {
        let waiting = std::mem::take(&mut self.waiting);
        tracing::info!(payouts = waiting.len(), "the SPI rail was released: its payouts go out");
        let me = ctx.address();
        for (p, counted) in waiting {
            if counted {
                self.kept.backlog.taken_up();
            }
            me.do_send(p);
        }
    }
}

/// Payouts handed to the rail and not yet taken up by it (made, signed, or ended): the
/// rail's queue. Beyond `max`, new payments are refused at the door (503 with
/// `Retry-After`) rather than acknowledged and failed `NOT_SENT_IN_TIME` once the bound
/// passes (docs/decisions.md "A message is built once; only the answer to the original ends a payout").
pub struct Backlog {
    waiting: std::sync::atomic::AtomicI64,
    max: i64,
}

impl Backlog {
    pub fn new(max: usize) -> Backlog {
        Backlog { waiting: std::sync::atomic::AtomicI64::new(0), max: i64::try_from(max).unwrap_or(i64::MAX) }
    }

    /// Payouts waiting to be taken up.
    pub fn waiting(&self) -> i64 {
        self.waiting.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// One payout taken up by the rail (never below zero).
    fn taken_up(&self) {
        let _ = self.waiting.fetch_update(
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
            |w| Some((w - 1).max(0)),
        );
    }

    /// Whether a new payment should be refused: the rail could not send it in time.
    pub fn is_full(&self) -> bool {
        self.waiting() >= self.max
    }
}

/// The rail's door: counts each payout into the backlog as it is handed over (at normal
/// priority, on the caller's thread of work) and passes it to the rail, which counts it out
/// when it takes it up.
pub struct Door {
    rail: Addr<SpiRail>,
    backlog: Arc<Backlog>,
}

impl Actor for Door {
    type Context = Context<Self>;
}

impl Handler<Payout> for Door {
    type Result = ();

    fn handle(&mut self, payout: Payout, _: &mut Context<Self>) {
        self.backlog.waiting.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.rail.do_send(Admitted(payout));
    }
}

/// A payout through the door: counted out of the backlog as the rail takes it up.
#[derive(actix::Message)]
#[rtype(result = "()")]
struct Admitted(Payout);

impl Handler<Admitted> for SpiRail {
    type Result = ();

    fn handle(&mut self, Admitted(payout): Admitted, ctx: &mut Context<Self>) {
        self.take_up(payout, true, ctx);
    }
}

/// The SPI rail, started but not reading yet (see [`Started::read`]).
pub struct Started {
    pub rail: Addr<SpiRail>,
    /// Where payouts are handed over (counted into the backlog).
    pub door: Addr<Door>,
    pub dict: Addr<DictClient>,
    /// The DICT's fresh answers, which request handlers read before asking `dict`.
    pub dict_cache: EntryCache,
    handle: ArbiterHandle,
    settings: SpiSettings,
    outbox: mpsc::UnboundedSender<Outbound>,
    kept: Kept,
    streams: Streams,
}

/// Starts the rail on its two threads: the payout actor and its senders, the DICT client
/// and the answers' senders. It reads nothing until [`Started::read`] gives it the accounts
/// to carry what it reads to.
pub fn start(settings: SpiSettings, on_us: OnUsResolver, kept: Kept) -> Started {
    crate::telemetry::zero_spi_counters();
    exchanged();
    // Both arbiters live as long as the process.
    let inbound = Arbiter::new();
    let in_handle = inbound.handle();
    std::mem::forget(inbound);
    let payouts = Arbiter::new();
    let out_handle = payouts.handle();
    std::mem::forget(payouts);
    out_handle.spawn(async { run_this_thread_when_idle() });

    let dict_settings = settings.clone();
    let dict_cache = EntryCache::default();
    let client_cache = dict_cache.clone();
    let dict =
        DictClient::start_in_arbiter(&in_handle, move |_| DictClient::new(dict_settings, client_cache));
    let (payouts_tx, payouts_rx) = mpsc::unbounded_channel::<Outbound>();
    let rail_settings = settings.clone();
    let rail_dict = dict.clone();
    let rail_kept = kept.clone();
    tracing::info!(
        ispb = %settings.ispb, icom = %settings.icom_url, dict = %settings.dict_url, streams = settings.streams,
        held = kept.hold.is_held(), "the SPI rail starts"
    );
    if kept.hold.is_held() {
        tracing::error!(ispb = %settings.ispb,
            "the SPI rail is held: this store was restored or migrated, and another node may still read this ISPB's streams. Nothing is read or sent until an operator releases it (pixgw rail release, or POST /admin/rail/release)");
    }
    let rail = SpiRail::start_in_arbiter(&out_handle, move |ctx| {
        let hold = rail_kept.hold.clone();
        let me = ctx.address();
        actix_web::rt::spawn(async move {
            hold.released().await;
            me.do_send(Released);
        });
        SpiRail {
            settings: rail_settings,
            outbox: payouts_tx,
            dict: rail_dict,
            on_us,
            kept: rail_kept,
            waiting: Vec::new(),
        }
    });
    spawn_senders(&out_handle, &settings, payouts_rx, Some(kept.clone()));
    let (answers_tx, answers_rx) = mpsc::unbounded_channel::<Outbound>();
    spawn_senders(&in_handle, &settings, answers_rx, None);
    let (door_rail, door_backlog) = (rail.clone(), Arc::clone(&kept.backlog));
    let door = Door::start_in_arbiter(&in_handle, move |_| Door { rail: door_rail, backlog: door_backlog });
    Started {
        rail,
        door,
        dict,
        dict_cache,
        handle: in_handle,
        settings,
        outbox: answers_tx,
        kept,
        streams: Streams::new(),
    }
}

/// [`SENDERS`] tasks on `thread` posting what `rx` receives.
fn spawn_senders(
    thread: &ArbiterHandle,
    settings: &SpiSettings,
    rx: mpsc::UnboundedReceiver<Outbound>,
    kept: Option<Kept>,
) {
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let settings = settings.clone();
    thread.spawn(async move {
        match icom_client(&settings) {
            Some(icom) => {
                for _ in 0..SENDERS {
                    actix_web::rt::spawn(sender(icom.clone(), Arc::clone(&rx), kept.clone()));
                }
            }
            None => tracing::error!("the SPI rail cannot send: no ICOM client"),
        }
    });
}

/// Puts the calling thread under the idle scheduling policy (Linux's `SCHED_IDLE`; elsewhere
/// this does nothing): it runs on whatever CPU time no other thread wants, and any thread
/// of normal policy that wakes takes the core from it at once. A failure is logged: the
/// rail works without it.
pub fn run_this_thread_when_idle() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::unix::{
            set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
            ThreadSchedulePolicy,
        };
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        if let Err(e) =
            set_thread_priority_and_policy(thread_native_id(), thread_priority::ThreadPriority::Min, idle)
        {
            tracing::warn!(error = ?e, "the payout thread keeps its scheduling policy");
        }
    }
}

fn icom_client(settings: &SpiSettings) -> Option<IcomClient> {
    IcomClient::new(Arc::clone(&settings.tls), &settings.icom_url, settings.ispb.clone())
        .map_err(|e| tracing::error!(error = %e, "no ICOM client"))
        .ok()
}

impl Started {
    /// The payout backlog, which payment routes read before they debit.
    pub fn backlog(&self) -> Arc<Backlog> {
        Arc::clone(&self.kept.backlog)
    }

    /// The readers' stop, which a graceful stop raises.
    pub fn streams(&self) -> Streams {
        self.streams.clone()
    }

    /// The rail's hold, which an operator's route releases.
    pub fn hold(&self) -> Hold {
        self.kept.hold.clone()
    }

    /// Starts the streams, which carry what they read to `inbound`.
    pub fn read(&self, inbound: Arc<dyn Inbound>) {
        let settings = self.settings.clone();
        let outbox = self.outbox.clone();
        let kept = self.kept.clone();
        let (dict, med_inbound) = (self.dict.clone(), Arc::clone(&inbound));
        let streams = self.streams.clone();
        self.handle.spawn(async move {
            // Nothing is read while the rail is held.
            kept.hold.released().await;
            actix_web::rt::spawn(med_refunds(dict.clone(), Arc::clone(&med_inbound), settings.med_poll));
            actix_web::rt::spawn(med_recoveries(
                dict.clone(),
                Arc::clone(&med_inbound),
                settings.med_poll,
                settings.ispb.to_string(),
            ));
            let entries = EntriesLock::default();
            actix_web::rt::spawn(dict_claims(
                dict.clone(),
                Arc::clone(&med_inbound),
                settings.claims_poll,
                settings.ispb.to_string(),
                entries.clone(),
            ));
            if let Some(tax) = settings.tax_registry.clone() {
                let tax = super::tax_registry::TaxRegistry::new(tax);
                let checks = tax_checks(
                    dict.clone(),
                    Arc::clone(&med_inbound),
                    tax,
                    settings.tax_check,
                    entries.clone(),
                );
                actix_web::rt::spawn(checks);
            }
            actix_web::rt::spawn(dict_sync(dict, med_inbound, settings.sync_every, entries));
            let Some(icom) = icom_client(&settings) else { return };
            close_left_streams(&icom, &kept.log).await;
            for n in 0..settings.streams {
                // None: the process is stopping already.
                let Some((stop, alive)) = streams.reader() else { return };
                actix_web::rt::spawn(reader(
                    n,
                    icom.clone(),
                    settings.clone(),
                    Arc::clone(&inbound),
                    outbox.clone(),
                    kept.clone(),
                    stop,
                    alive,
                ));
            }
        });
    }
}

impl Actor for SpiRail {
    type Context = Context<Self>;
}

/// The MED on the SPI rail: asks the DICT, every `every`, for the refund requests open
/// against this participant's payments; each opens its account's MED once, and once the MED
/// has ended (its analysis, and for an approval the return settled by the SPI) the request
/// is closed with its result. The DICT holds the state: an open request is asked about again
/// until it is closed, so a crash or a failed close loses nothing.
async fn med_refunds(dict: Addr<DictClient>, inbound: Arc<dyn Inbound>, every: Duration) {
    use super::directory::{CloseRefund, OpenRefunds};
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A 404 here is the DICT (or what answers at its address) not serving the list: said
    // once as an error, not every turn, until the list is read again.
    let mut missing = false;
    loop {
        tick.tick().await;
        let refunds = match dict.send(OpenRefunds).await {
            Ok(Ok(r)) => {
                if std::mem::take(&mut missing) {
                    tracing::info!("the DICT's refund requests are read again");
                }
                r
            }
            Ok(Err(DictError::NotFound)) => {
                if !std::mem::replace(&mut missing, true) {
                    tracing::error!("the DICT answered 404 to the list of refund requests: the DICT address (dict_url) serves no MED route, so no refund request is read until it does");
                }
                continue;
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the DICT's refund requests could not be read; asking again later");
                continue;
            }
            Err(_) => return,
        };
        for r in refunds {
            let asked = crate::rail::RefundAsked {
                id: r.id.clone(),
                end_to_end_id: r.transaction_id,
                amount: r.amount,
                fraud: r.reason == "FRAUD",
                details: r.details,
                funds_recovery_id: r.funds_recovery_id,
                created: r.created,
            };
            let close = match inbound.refund_asked(asked).await {
                Ok(crate::rail::RefundAnswer::Close { result, details, refund_transaction_id }) => {
                    CloseRefund { id: r.id.clone(), result, details, refund_transaction_id }
                }
                Ok(crate::rail::RefundAnswer::Waiting) => continue,
                Err(e) => {
                    tracing::warn!(refund = r.id, error = %e, "a refund request waits: the accounts did not answer");
                    continue;
                }
            };
            let result = close.result;
            match dict.send(close).await {
                Ok(Ok(())) => {
                    tracing::info!(refund = r.id, result, "a MED refund request was closed in the DICT")
                }
                Ok(Err(e)) => {
                    tracing::warn!(refund = r.id, error = %e, "closing a refund request failed; it is tried again")
                }
                Err(_) => return,
            }
        }
    }
}

/// MED 2.0 on the SPI rail, every `every` (docs/decisions.md "MED 2.0"):
/// - as a receiving institution, it lists the infraction reports still to answer; each opens
///   its case once (the money blocked) and is acknowledged, and once the case is analysed
///   (or its deadline decided it) the report is closed with the analysis;
/// - as the payer's institution, it opens in the DICT the contests it has not yet, asks for
///   the refund of those the DICT analysed, and reads the DICT's event notifications from a
///   durable cursor, recording each recovery they name as the DICT now has it.
///
/// The DICT holds the reports' and recoveries' state, and each step is idempotent there and
/// here, so a crash or a lost answer repeats a step and changes nothing twice. The cursor is
/// moved only once every event before it is recorded.
async fn med_recoveries(dict: Addr<DictClient>, inbound: Arc<dyn Inbound>, every: Duration, ours: String) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !answer_reports(&dict, &*inbound).await || !follow_recoveries(&dict, &*inbound, &ours).await {
            return;
        }
    }
}

/// One turn of the receiving side; `false` once the DICT client is gone.
async fn answer_reports(dict: &Addr<DictClient>, inbound: &dyn Inbound) -> bool {
    use super::directory::{AnswerReport, OpenReports, ReportAnswer};
    let reports = match dict.send(OpenReports).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the DICT's infraction reports could not be read; asking again later");
            return true;
        }
        Err(_) => return false,
    };
    let listed: std::collections::HashSet<String> = reports.iter().map(|r| r.id.clone()).collect();
    for r in reports {
        let seen = crate::rail::ReportSeen {
            id: r.id.clone(),
            end_to_end_id: r.transaction_id,
            situation: r.situation_type,
            details: r.details,
            recovery_id: r.recovery_id,
            acknowledged: r.status == "ACKNOWLEDGED",
            amount: r.amount,
            created: r.created,
        };
        let answer = match inbound.report_seen(seen).await {
            Ok(crate::rail::ReportAction::Acknowledge) => ReportAnswer::Acknowledge,
            Ok(crate::rail::ReportAction::Close { agreed, fraud_type, details }) => {
                ReportAnswer::Close { agreed, fraud_type, details }
            }
            Ok(crate::rail::ReportAction::Wait) => continue,
            Err(e) => {
                tracing::warn!(report = r.id, error = %e, "an infraction report waits: the accounts did not answer");
                continue;
            }
        };
        let step = match &answer {
            ReportAnswer::Acknowledge => "acknowledge",
            ReportAnswer::Close { agreed: true, .. } => "agree",
            ReportAnswer::Close { agreed: false, .. } => "disagree",
        };
        match dict.send(AnswerReport { id: r.id.clone(), answer }).await {
            Ok(Ok(_)) => {
                metrics::counter!("pixgw_dict_report_answers_total", "step" => step).increment(1);
                tracing::info!(report = r.id, step, "an infraction report was answered in the DICT");
            }
            Ok(Err(e)) => {
                tracing::warn!(report = r.id, step, error = %e, "answering an infraction report failed; it is tried again")
            }
            Err(_) => return false,
        }
    }
    withdrawn_cases(dict, inbound, &listed).await
}

/// The live cases whose report the list no longer holds: those the DICT withdrew (the
/// report cancelled with its recovery, or an approved case's recovery cancelled before its
/// refund) are released; the others wait for their refund request. `false` once the DICT
/// client is gone.
async fn withdrawn_cases(
    dict: &Addr<DictClient>,
    inbound: &dyn Inbound,
    listed: &std::collections::HashSet<String>,
) -> bool {
    use super::directory::{GetRecovery, GetReport};
    let cases = match inbound.live_cases() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "the live MED 2.0 cases could not be read; trying again next turn");
            return true;
        }
    };
    for case in cases {
        let Some(i) = case.infraction.clone() else { continue };
        if listed.contains(&i.report_id) {
            continue;
        }
        let report = match dict.send(GetReport { id: i.report_id.clone() }).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                tracing::warn!(report = i.report_id, error = %e, "an infraction report could not be read; asked again next turn");
                continue;
            }
            Err(_) => return false,
        };
        let mut withdrawn = report.status == "CANCELLED";
        if !withdrawn && case.awaiting_return() {
            if let Some(rid) = &i.recovery_id {
                match dict.send(GetRecovery { id: rid.clone() }).await {
                    Ok(Ok(r)) => withdrawn = r.status == "CANCELLED",
                    Ok(Err(e)) => {
                        tracing::warn!(recovery = rid, error = %e, "a funds recovery could not be read; asked again next turn")
                    }
                    Err(_) => return false,
                }
            }
        }
        if !withdrawn {
            continue;
        }
        let (id, account) = (case.id, case.account_id);
        match inbound.release_case(case).await {
            Ok(()) => {
                metrics::counter!("pixgw_dict_cases_withdrawn_total").increment(1);
                tracing::info!(
                    med = id,
                    account,
                    report = i.report_id,
                    "the DICT withdrew a MED 2.0 case: its block is released"
                );
            }
            Err(e) => {
                tracing::warn!(med = id, error = %e, "a withdrawn case waits: its account did not answer")
            }
        }
    }
    true
}

/// What the DICT's recovery says, for its contest here.
fn recovery_seen_of(
    r: &super::recovery::FundsRecovery,
    graph: Option<&super::recovery::TrackingGraph>,
) -> Option<crate::domain::recovery::Seen> {
    Some(crate::domain::recovery::Seen {
        dict_id: Some(r.id.clone()),
        status: crate::domain::recovery::RecoveryStatus::parse(&r.status)?,
        traced: graph.map(|g| u32::try_from(g.transactions.len()).unwrap_or(u32::MAX)),
    })
}

/// Pages of the DICT's event notifications one turn reads at most (200 events each).
pub const EVENT_PAGES_PER_TURN_MAX: usize = 10;

/// One turn of the payer's side; `false` once the DICT client is gone.
async fn follow_recoveries(dict: &Addr<DictClient>, inbound: &dyn Inbound, ours: &str) -> bool {
    use super::directory::{CreateRecovery, GetRecovery, RecoveryEvents, RecoveryStep, StepRecovery};
    use crate::domain::recovery::{RecoveryStatus, Seen};
    let open = match inbound.open_recoveries() {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(error = %e, "the open contests could not be read; trying again next turn");
            return true;
        }
    };
    for c in open {
        let seen = match (&c.dict_id, c.owes_refund()) {
            // Not in the DICT yet: open it there.
            (None, _) => {
                let asked = super::recovery::FundsRecovery {
                    id: String::new(),
                    root_transaction_id: c.end_to_end_id.clone(),
                    situation_type: c.situation.clone(),
                    details: c.details.clone(),
                    email: c.email.clone(),
                    phone: c.phone.clone(),
                    status: String::new(),
                    reporter: String::new(),
                    created: chrono::DateTime::UNIX_EPOCH,
                    modified: chrono::DateTime::UNIX_EPOCH,
                };
                match dict.send(CreateRecovery { recovery: asked }).await {
                    Ok(Ok((r, graph))) => recovery_seen_of(&r, graph.as_ref()),
                    // Opened before, its answer lost: the DICT's events name it, and the
                    // contest is matched by its payment then.
                    Ok(Err(DictError::Refused(why)))
                        if why.starts_with("FundsRecoveryForTransactionAlreadyExists") =>
                    {
                        tracing::warn!(
                            contest = c.id,
                            "the DICT has a recovery of this payment already; its events will name it"
                        );
                        None
                    }
                    Ok(Err(DictError::Refused(why))) => {
                        tracing::error!(
                            contest = c.id,
                            why,
                            "the DICT refused to open a funds recovery: the contest is cancelled"
                        );
                        metrics::counter!("pixgw_dict_recoveries_refused_total").increment(1);
                        Some(Seen { dict_id: None, status: RecoveryStatus::Cancelled, traced: None })
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(contest = c.id, error = %e, "opening a funds recovery failed; it is tried again");
                        None
                    }
                    Err(_) => return false,
                }
            }
            (Some(id), true) => {
                match dict.send(StepRecovery { id: id.clone(), step: RecoveryStep::Refund }).await {
                    Ok(Ok(r)) => recovery_seen_of(&r, None),
                    Ok(Err(e)) => {
                        tracing::warn!(contest = c.id, error = %e, "asking for a recovery's refund failed; it is tried again");
                        None
                    }
                    Err(_) => return false,
                }
            }
            (Some(_), false) => None,
        };
        if let Some(seen) = seen {
            let id = c.id;
            match inbound.recovery_seen(c, seen).await {
                Ok(r) => tracing::info!(contest = id, status = r.status.as_str(), "a contest moved"),
                Err(e) => {
                    tracing::warn!(contest = id, error = %e, "a contest's step waits: its account did not answer")
                }
            }
        }
    }
    let mut cursor = match inbound.events_cursor() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "the DICT events' cursor could not be read; trying again next turn");
            return true;
        }
    };
    for _ in 0..EVENT_PAGES_PER_TURN_MAX {
        let (events, next, more) = match dict.send(RecoveryEvents { cursor: cursor.clone() }).await {
            Ok(Ok(page)) => page,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the DICT's event notifications could not be read; asking again later");
                return true;
            }
            Err(_) => return false,
        };
        for e in &events {
            if !crate::rail::spi::recovery::EVENT_TYPES.contains(&e.event.as_str()) {
                tracing::warn!(
                    event = e.event,
                    id = e.id,
                    "an event notification of a type this version does not know"
                );
            }
            let got = match dict.send(GetRecovery { id: e.entity_id.clone() }).await {
                Ok(Ok(r)) => r,
                Ok(Err(err)) => {
                    tracing::warn!(recovery = e.entity_id, error = %err, "a recovery named by an event could not be read; the events are read again later");
                    return true;
                }
                Err(_) => return false,
            };
            let contest = if got.reporter == ours {
                inbound.recovery_of(&got.id, Some(&got.root_transaction_id))
            } else {
                Ok(None)
            };
            let contest = match contest {
                Ok(Some(c)) => c,
                Ok(None) => {
                    tracing::warn!(recovery = got.id, "an event names a recovery that is no contest of ours");
                    continue;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "the contests could not be read; the events are read again later");
                    return true;
                }
            };
            let Some(seen) = recovery_seen_of(&got, None) else { continue };
            if let Err(err) = inbound.recovery_seen(contest, seen).await {
                tracing::warn!(recovery = got.id, error = %err, "an event's contest did not record it; the events are read again later");
                return true;
            }
        }
        if let Some(n) = next.filter(|n| Some(n) != cursor.as_ref()) {
            if let Err(e) = inbound.set_events_cursor(&n) {
                tracing::warn!(error = %e, "the DICT events' cursor could not be written; the events are read again later");
                return true;
            }
            cursor = Some(n);
        }
        if !more {
            break;
        }
    }
    true
}

/// Pages of the DICT's claim list one turn reads at most (200 claims each); the rest wait
/// for the next turn.
pub const CLAIM_PAGES_PER_TURN_MAX: usize = 10;

/// Key claims on the DICT, every `every`: lists the claims this participant is donor or
/// claimer of that changed since the last turn (oldest first) and has each account of ours
/// record them; then takes the steps owed on the claims not yet final
/// ([`crate::domain::claim::duty`], on the server clock): acknowledging a claim against
/// one of our keys, the default outcome at the end of a resolution period, the completion
/// of a confirmed claim of ours. Each step's answer is recorded as the list's are. Where the
/// next list starts is written only once everything before it is recorded, so a crash, a
/// refused write or an unreachable DICT loses nothing: the same changes are listed again,
/// and recording one twice changes nothing. Each turn then sends the key updates a rename
/// left pending ([`key_updates`]).
async fn dict_claims(
    dict: Addr<DictClient>,
    inbound: Arc<dyn Inbound>,
    every: Duration,
    ours: String,
    entries: EntriesLock,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !claims_listed(&dict, &*inbound, &ours).await {
            return;
        }
        let (open, now) = match inbound.open_claims() {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(error = %e, "the open claims could not be read; trying again next turn");
                continue;
            }
        };
        for claim in open {
            let Some(step) = crate::domain::claim::duty(&claim, now) else { continue };
            match crate::rail::keys::take_claim_step(&dict, &claim.id, step).await {
                Ok(seen) => {
                    metrics::counter!("pixgw_dict_claim_steps_total", "step" => step.name(), "by" => "gateway")
                        .increment(1);
                    tracing::info!(
                        claim = claim.id,
                        step = step.name(),
                        reason = step.reason().map(|r| r.as_str()),
                        "a claim step owed by the gateway was taken"
                    );
                    if let Err(e) = inbound.claim_seen(seen, ours.clone()).await {
                        tracing::warn!(claim = claim.id, error = %e, "a claim's answer waits to be recorded; the list brings it again");
                    }
                }
                Err(e) => {
                    tracing::warn!(claim = claim.id, step = step.name(), error = %e, "a claim step owed by the gateway failed; it is tried again next turn")
                }
            }
        }
        if !key_updates(&dict, &*inbound, &ours, &entries).await {
            return;
        }
    }
}

/// Held while the gateway changes one of its entries at the DICT and records the change
/// (a rename's update, a removal for the holder's CPF), and while the sync verification
/// checks and repairs: the verification never sees the DICT changed and our copy not yet,
/// a difference it would "repair" by dropping a key the DICT still holds for us.
#[derive(Clone, Default)]
pub struct EntriesLock(Arc<tokio::sync::Mutex<()>>);

impl EntriesLock {
    pub async fn hold(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.0.lock().await
    }
}

/// The reason a rename's update gives the DICT: the holder's name follows the tax
/// authority's record (docs/decisions.md "Key updates when an account changes"), a reason
/// every key type takes.
pub const RENAME_REASON: &str = "RFB_VALIDATION";

/// One turn of the DICT entries' updates a rename asked for (`updateEntry`): each is sent
/// with the account as it is and the name asked; one the DICT takes ends with the key's new
/// CID, one it refuses for good (or no longer holds) ends logged and counted, one it cannot
/// take now (a claim locks the entry, the DICT is away) waits for the next turn. `false`
/// once the DICT's client is gone.
async fn key_updates(
    dict: &Addr<DictClient>,
    inbound: &dyn Inbound,
    ours: &str,
    entries: &EntriesLock,
) -> bool {
    use super::directory::UpdateEntry;
    let Some(ispb) = super::message::Ispb::parse(ours) else { return true };
    let pending = match inbound.pending_key_updates() {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "the pending key updates could not be read; trying again next turn");
            return true;
        }
    };
    for u in pending {
        let entry = super::directory::account_entry(
            &ispb,
            &u.key,
            &u.key_type,
            u.account.get(),
            &u.document,
            &u.name,
            u.opened,
        );
        let _held = entries.hold().await;
        let Ok(answer) = dict.send(UpdateEntry { entry, reason: RENAME_REASON }).await else { return false };
        let (ended, outcome) = match answer {
            Ok(e) => (Some(u.request_id.map(|r| super::sync::cid_of(&e, &r))), "updated"),
            Err(DictError::Refused(why)) if super::dict::update_waits(&why) => {
                tracing::info!(key = u.key, why, "a key's update waits: the DICT cannot take it now");
                continue;
            }
            Err(DictError::Refused(why)) => {
                tracing::error!(target: "pixgw::audit", account = u.account.get(), key = u.key, why, "the DICT refused a key's update for good: its entry keeps the old name");
                (None, "refused")
            }
            Err(DictError::NotFound) => {
                tracing::warn!(
                    account = u.account.get(),
                    key = u.key,
                    "the DICT no longer holds a key to update"
                );
                (None, "gone")
            }
            Err(e) => {
                tracing::warn!(key = u.key, error = %e, "a key's update could not be sent; it is tried again next turn");
                continue;
            }
        };
        match inbound.key_update_ended(&u, ended) {
            Ok(_) => metrics::counter!("pixgw_dict_key_updates_total", "outcome" => outcome).increment(1),
            Err(e) => {
                tracing::warn!(key = u.key, error = %e, "a key's update waits to be recorded; it is sent again")
            }
        }
    }
    true
}

/// The reason a key is removed from the DICT for its holder's CPF situation.
pub const TAX_REMOVAL_REASON: &str = "RFB_VALIDATION";

/// The holders' check against the tax authority's register, every `every`
/// (domain::tax_record): a holder whose name is not the record's is renamed to it (its keys'
/// entries follow, [`key_updates`]); one whose CPF may not hold keys has them removed from
/// the DICT (reason `RFB_VALIDATION`) and from the account; one the register does not hold
/// is an error for an operator, and keeps its keys. Every outcome is logged (target
/// `pixgw::audit`) and counted (`pixgw_dict_tax_checks_total{outcome}`); a holder the
/// register or the DICT could not answer for is checked again at the next turn.
async fn tax_checks(
    dict: Addr<DictClient>,
    inbound: Arc<dyn Inbound>,
    tax: super::tax_registry::TaxRegistry,
    every: Duration,
    entries: EntriesLock,
) {
    use crate::domain::tax_record::{check, Check};
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is at once: the first check waits a whole period.
    tick.tick().await;
    loop {
        tick.tick().await;
        let holders = match inbound.tax_holders() {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(error = %e, "the holders to check could not be read; trying again next turn");
                continue;
            }
        };
        for h in holders {
            let record = match tax.record(&h.cpf).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(account = h.account.get(), error = %e, "the tax register did not answer for a holder; checked again next turn");
                    continue;
                }
            };
            let outcome = match record.map(|r| check(&h.name, &r)) {
                Some(Check::Matches) => "matches",
                None => {
                    tracing::error!(target: "pixgw::audit", account = h.account.get(), "the tax register does not hold the holder's CPF: an operator must look at it (its keys stay)");
                    "not_in_register"
                }
                Some(Check::Rename(name)) => match inbound.holder_renamed(h.account, &name) {
                    Ok(updates) => {
                        tracing::warn!(target: "pixgw::audit", account = h.account.get(), updates, "the holder was renamed to the tax register's name; the DICT's entries follow");
                        "renamed"
                    }
                    Err(e) => {
                        tracing::warn!(account = h.account.get(), error = %e, "a holder's rename to the register's name failed; tried again next turn");
                        continue;
                    }
                },
                Some(Check::Irregular(situation)) => {
                    let mut all = true;
                    for key in &h.keys {
                        let _held = entries.hold().await;
                        let asked =
                            super::directory::Remove { key: key.clone(), reason: TAX_REMOVAL_REASON.into() };
                        let Ok(answer) = dict.send(asked).await else { return };
                        let removed = match answer {
                            Ok(()) | Err(DictError::NotFound) => inbound.key_removed(h.account, key).is_ok(),
                            Err(e) => {
                                tracing::warn!(key, error = %e, "a key of an irregular CPF could not be removed; tried again next turn");
                                false
                            }
                        };
                        all &= removed;
                    }
                    tracing::error!(target: "pixgw::audit", account = h.account.get(), situation = situation.name(), keys = h.keys.len(), all, "the holder's CPF may not hold keys: they were removed from the DICT");
                    "keys_removed"
                }
            };
            metrics::counter!("pixgw_dict_tax_checks_total", "outcome" => outcome).increment(1);
        }
    }
}

/// How many times a check asks for a CID file that is not ready yet, and how long it waits
/// between (the DICT makes the file asynchronously).
pub const CID_FILE_ASKS_MAX: usize = 30;
pub const CID_FILE_ASK_EVERY: Duration = Duration::from_millis(500);

/// The keys' sync with the DICT, every `every` (API 2.12.1, "Reconciliação"): for each key
/// type, the VSync of the CIDs our accounts' keys have is sent to the DICT; an `NOK` asks
/// for the file of the DICT's CIDs of that type, and the difference is repaired, the DICT
/// winning: an entry it holds for us that we lack (read by its CID) is taken in, a key we
/// hold that it lacks is dropped (`account::sync`). Every check and repair is counted; a
/// check that fails is tried again at the next turn.
async fn dict_sync(dict: Addr<DictClient>, inbound: Arc<dyn Inbound>, every: Duration, entries: EntriesLock) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is at once: the first check waits a whole period.
    tick.tick().await;
    loop {
        tick.tick().await;
        for key_type in super::dict::KEY_TYPES {
            let held = entries.hold().await;
            let checked = sync_key_type(&dict, &*inbound, key_type).await;
            drop(held);
            match checked {
                Ok(None) => return,
                Ok(Some(ok)) => {
                    let result = if ok { "ok" } else { "repaired" };
                    metrics::counter!("pixgw_dict_sync_checks_total", "key_type" => key_type, "result" => result)
                        .increment(1);
                }
                Err(e) => {
                    metrics::counter!("pixgw_dict_sync_checks_total", "key_type" => key_type, "result" => "failed")
                        .increment(1);
                    tracing::warn!(key_type, error = %e, "the keys' sync with the DICT could not be checked; trying again next turn");
                }
            }
        }
    }
}

/// One key type's check: `Some(true)` when the DICT found the sets equal, `Some(false)`
/// when a difference was repaired, `None` once the DICT's client is gone.
async fn sync_key_type(
    dict: &Addr<DictClient>,
    inbound: &dyn Inbound,
    key_type: &str,
) -> Result<Option<bool>, String> {
    use super::directory::{EntryByCid, FetchCidFile, GetCidFile, RequestCidFile, VerifySync};
    let here = inbound.dict_cids(key_type).map_err(|e| e.to_string())?;
    let vsync =
        crate::domain::cid::vsync(here.iter().map(String::as_str)).ok_or("a recorded CID is not one")?;
    let Ok(ok) = dict.send(VerifySync { key_type: key_type.to_owned(), vsync }).await else {
        return Ok(None);
    };
    if ok.map_err(|e| e.to_string())? {
        return Ok(Some(true));
    }
    // The DICT's events since the last repair first: a few changes, not the whole set.
    if let Some(after) = inbound.cid_events_after(key_type).map_err(|e| e.to_string())? {
        match cid_events_repair(dict, inbound, key_type, after).await? {
            None => return Ok(None),
            Some(true) => {
                metrics::counter!("pixgw_dict_sync_repaired_total", "via" => "events").increment(1);
                return Ok(Some(false));
            }
            Some(false) => {}
        }
    }
    tracing::warn!(key_type, "the DICT's sync verification found a difference; reading its CIDs");
    let Ok(file) = dict.send(RequestCidFile { key_type: key_type.to_owned() }).await else { return Ok(None) };
    let mut file = file.map_err(|e| e.to_string())?;
    for _ in 0..CID_FILE_ASKS_MAX {
        if file.status != "REQUESTED" && file.status != "PROCESSING" {
            break;
        }
        tokio::time::sleep(CID_FILE_ASK_EVERY).await;
        let Ok(now) = dict.send(GetCidFile { id: file.id }).await else { return Ok(None) };
        file = now.map_err(|e| e.to_string())?;
    }
    if file.status != "AVAILABLE" {
        return Err(format!("the CID file {} is {}", file.id, file.status));
    }
    let file_asked = file.requested;
    let Ok(theirs) = dict.send(FetchCidFile { file }).await else { return Ok(None) };
    let theirs = theirs.map_err(|e| e.to_string())?;
    let diff =
        crate::domain::cid::difference(here.iter().map(String::as_str), theirs.iter().map(String::as_str));
    for cid in diff.only_at_dict {
        let Ok(found) = dict.send(EntryByCid { cid: cid.clone() }).await else { return Ok(None) };
        let (entry, request_id) = found.map_err(|e| e.to_string())?;
        let found = crate::rail::SyncEntry {
            key: entry.key,
            key_type: entry.key_type,
            participant: entry.participant.to_string(),
            account_number: entry.account_number,
            created: entry.creation_date,
            cid,
            request_id,
        };
        inbound.sync_take_in(found).map_err(|e| e.to_string())?;
    }
    for cid in diff.only_here {
        inbound.sync_drop(&cid).map_err(|e| e.to_string())?;
    }
    // The file holds the set as the DICT had it when it was asked for: later changes are its
    // events from then on.
    inbound.set_cid_events_after(key_type, file_asked).map_err(|e| e.to_string())?;
    metrics::counter!("pixgw_dict_sync_repaired_total", "via" => "file").increment(1);
    Ok(Some(false))
}

/// Pages of CID events one repair reads at most before it falls back to the CID file.
pub const CID_EVENT_PAGES_MAX: usize = 10;

/// Applies the DICT's CID events of `key_type` from `after` on to our keys (an added CID we
/// lack is taken in, a removed one we hold is dropped, in the DICT's order), moves the
/// cursor, and verifies again: `Some(true)` when the sets now agree, `Some(false)` when the
/// events did not explain the difference (the caller reads the whole file), `None` once the
/// DICT's client is gone.
async fn cid_events_repair(
    dict: &Addr<DictClient>,
    inbound: &dyn Inbound,
    key_type: &str,
    mut after: chrono::DateTime<chrono::Utc>,
) -> Result<Option<bool>, String> {
    use super::directory::{EntryByCid, ListCidEvents, VerifySync};
    let mut ours: std::collections::HashSet<String> =
        inbound.dict_cids(key_type).map_err(|e| e.to_string())?.into_iter().collect();
    for _ in 0..CID_EVENT_PAGES_MAX {
        let Ok(page) = dict.send(ListCidEvents { key_type: key_type.to_owned(), start: after }).await else {
            return Ok(None);
        };
        let (events, more) = page.map_err(|e| e.to_string())?;
        let newest = events.last().map(|e| e.at);
        for e in events {
            match e.kind.as_str() {
                "ADDED" if !ours.contains(&e.cid) => {
                    let Ok(found) = dict.send(EntryByCid { cid: e.cid.clone() }).await else {
                        return Ok(None);
                    };
                    let (entry, request_id) = match found {
                        Ok(f) => f,
                        // Removed again since: a later event says so.
                        Err(DictError::NotFound) => continue,
                        Err(err) => return Err(err.to_string()),
                    };
                    let found = crate::rail::SyncEntry {
                        key: entry.key,
                        key_type: entry.key_type,
                        participant: entry.participant.to_string(),
                        account_number: entry.account_number,
                        created: entry.creation_date,
                        cid: e.cid.clone(),
                        request_id,
                    };
                    inbound.sync_take_in(found).map_err(|err| err.to_string())?;
                    ours.insert(e.cid);
                }
                "REMOVED" if ours.contains(&e.cid) => {
                    inbound.sync_drop(&e.cid).map_err(|err| err.to_string())?;
                    ours.remove(&e.cid);
                }
                _ => {}
            }
        }
        match newest {
            // A page of one instant cannot move the start on: the file settles it.
            Some(at) if at > after => after = at,
            _ if more => return Ok(Some(false)),
            _ => {}
        }
        inbound.set_cid_events_after(key_type, after).map_err(|e| e.to_string())?;
        if !more {
            break;
        }
    }
    let here = inbound.dict_cids(key_type).map_err(|e| e.to_string())?;
    let vsync =
        crate::domain::cid::vsync(here.iter().map(String::as_str)).ok_or("a recorded CID is not one")?;
    let Ok(ok) = dict.send(VerifySync { key_type: key_type.to_owned(), vsync }).await else {
        return Ok(None);
    };
    Ok(Some(ok.map_err(|e| e.to_string())?))
}

/// One turn's lists of changed claims; `false` once the DICT's client is gone.
async fn claims_listed(dict: &Addr<DictClient>, inbound: &dyn Inbound, ours: &str) -> bool {
    use super::directory::ListClaims;
    let mut after = match inbound.claims_after() {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, "where the claims list starts could not be read");
            return true;
        }
    };
    for _ in 0..CLAIM_PAGES_PER_TURN_MAX {
        let (claims, more) = match dict.send(ListClaims { modified_after: after }).await {
            Ok(Ok(page)) => page,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the DICT's claims could not be listed; asking again next turn");
                return true;
            }
            Err(_) => return false,
        };
        let mut newest = after;
        for c in claims {
            let modified = c.modified;
            if let Err(e) = inbound.claim_seen(c.seen(), ours.to_owned()).await {
                tracing::warn!(claim = c.id, error = %e, "a claim could not be recorded; the list asks from it again next turn");
                break;
            }
            metrics::counter!("pixgw_dict_claims_seen_total").increment(1);
            newest = Some(newest.map_or(modified, |n| n.max(modified)));
        }
        if newest != after {
            if let Some(at) = newest {
                if let Err(e) = inbound.set_claims_after(at) {
                    tracing::warn!(error = %e, "where the claims list starts could not be written");
                    return true;
                }
            }
        }
        // A page whose changes all share one instant cannot move the start on: the rest
        // waits for later changes (the list is ordered by that instant, and asks from it).
        if !more || newest == after {
            return true;
        }
        after = newest;
    }
    true
}

/// How long a payout waits before it is handed over again when its message could not be
/// kept (the store did not answer).
const KEEP_RETRY_AFTER: Duration = Duration::from_secs(1);

impl SpiRail {
    /// Sends a payout's message: the one kept by an earlier hand-over, posted again as it
    /// is; else, unless it is already too late to leave, a new one, built, signed and kept
    /// before its first posting. A payout that cannot be sent fails.
    fn send(&self, payout: Payout, ctx: &mut Context<Self>) {
        let local_id = payout.tx.local_id;
        let id = payout_id(&payout.tx);
        let fail = |payout: &Payout, code: ErrorCode, reason: &str| {
            let outcome = RailOutcome { result: Err(code), reason: Some(reason.into()) };
            payout.reply_to.do_send(Settled { local_id, outcome, on_us: None });
        };
        let stored = match self.kept.log.sent(&id).and_then(|s| match &s {
            Some(_) => self.kept.log.taken(&id).map(|t| (s, t)),
            None => Ok((s, None)),
        }) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(local_id, error = %e, "a payout's kept message could not be read; handing it over again");
                let me = ctx.address();
                ctx.run_later(KEEP_RETRY_AFTER, move |_, _| me.do_send(payout));
                return;
            }
        };
        let now = self.kept.clock.now();
        // A payout debited before messages were kept may have left without a record: it is
        // built again (the SPI takes its id once), never failed as late.
        let (stored, taken) = stored;
        let bound = if stored.is_none() && payout.tx.created_at < self.kept.since {
            Duration::MAX
        } else {
            self.settings.leave_within
        };
        let message = match kept_log::leave(stored, taken, payout.tx.created_at, now, bound) {
            Leave::Await => {
                // A start hands every pending payout over again; one ICOM took waits for
                // the SPI's answer (or ages), and posting it again would only add load.
                metrics::counter!("pixgw_spi_payouts_awaiting_total").increment(1);
                tracing::debug!(
                    local_id,
                    id,
                    "a payout's message is at the SPI already; its answer is awaited"
                );
                return;
            }
            Leave::TooLate { waited } => {
                metrics::counter!("pixgw_spi_payouts_too_late_total").increment(1);
                tracing::warn!(
                    local_id,
                    id,
                    waited_ms = waited.as_millis() as u64,
                    bound_ms = bound.as_millis() as u64,
                    "a payout could not leave in time: it fails unsent and its amount is released"
                );
                return fail(&payout, ErrorCode::PaymentExpired, "NOT_SENT_IN_TIME");
            }
            Leave::Resend(mut m) => {
                // The earlier posting may have reached the SPI: this one is a repeat.
                m.attempts += 1;
                m
            }
            Leave::Build => {
                let made =
                    outgoing::payout(&self.settings.ispb, &payout.tx, &payout.payer, now).and_then(|m| {
                        let msg_id = m.msg_id.clone();
                        dsig::sign_spi(&m.write(), &self.settings.signer)
                            .map(|body| (msg_id, body))
                            .map_err(|e| e.to_string())
                    });
                match made {
                    Ok((msg_id, body)) => {
                        SentMessage { id: id.clone(), msg_id, built_at: now, body, attempts: 1 }
                    }
                    Err(e) => {
                        tracing::error!(local_id, error = %e, "a payout cannot be sent on the SPI");
                        return fail(&payout, ErrorCode::OrderRejected, "NOT_SENDABLE");
                    }
                }
            }
        };
        let log = Arc::clone(&self.kept.log);
        let outbox = self.outbox.clone();
        let dict = self.dict.clone();
        let me = ctx.address();
        actix_web::rt::spawn(async move {
            // Kept before it leaves: every later posting sends these bytes.
            if let Err(e) = log.keep(message.clone()).await {
                tracing::warn!(local_id, error = %e, "a payout's message could not be kept; handing it over again");
                actix_web::rt::time::sleep(KEEP_RETRY_AFTER).await;
                me.do_send(payout);
                return;
            }
            let attempt = message.attempts;
            let (done, answered) = oneshot::channel();
            let queued = Outbound {
                body: Bytes::from(message.body),
                payout: Some((message.id, attempt)),
                done: Some(done),
            };
            if outbox.send(queued).is_err() {
                return;
            }
            SEND_QUEUE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            // A payment to a key looked up gives the payer's lookup token back.
            if attempt == 1 && payout.tx.refund.is_none() && payout.tx.counterpart.key.is_some() {
                if let Some(key) = payout.tx.counterpart.key.clone() {
                    dict.do_send(super::directory::Paid {
                        payer_document: payout.payer.document.clone(),
                        key,
                    });
                }
            }
            metrics::counter!("pixgw_spi_messages_sent_total", "kind" => if payout.tx.refund.is_some() { "pacs.004" } else { "pacs.008" }).increment(1);
            if let Ok(Err(Refusal { error: IcomError::Refused(status, text), attempt })) = answered.await {
                if attempt <= 1 {
                    // Refused at its only posting: the SPI holds nothing of it.
                    tracing::error!(local_id, status, text, "ICOM refused a payout's message");
                    let outcome = RailOutcome {
                        result: Err(ErrorCode::PaymentExpired),
                        reason: Some(format!("ICOM_{status}")),
                    };
                    payout.reply_to.do_send(Settled { local_id, outcome, on_us: None });
                } else {
                    // An earlier posting may have reached the SPI: its answer decides.
                    tracing::error!(local_id, status, text, attempt,
                        "ICOM refused a repeat of a payout's message; the payout waits for the SPI's answer to an earlier posting");
                }
            }
        });
    }
}

/// The id a payout's message is kept and answered under: a refund's return id, else its
/// end-to-end id.
fn payout_id(tx: &crate::domain::transaction::Transaction) -> String {
    match &tx.refund {
        Some(r) => r.rtr_id.clone(),
        None => tx.end_to_end_id.clone(),
    }
}

impl Handler<Payout> for SpiRail {
    type Result = ();

    /// A payout handed over again by the rail itself (a lookup tried again, a release): not
    /// in the backlog's count.
    fn handle(&mut self, payout: Payout, ctx: &mut Context<Self>) {
        self.take_up(payout, false, ctx);
    }
}

impl SpiRail {
    /// Takes a payout up: settles it on us, keeps it while the rail is held, or sends it.
    /// `counted`: it came through the door and is counted out of the backlog here.
    fn take_up(&mut self, payout: Payout, counted: bool, ctx: &mut Context<Self>) {
        let tx = &payout.tx;
        let ours = tx.counterpart.bank.as_ref().is_some_and(|b| b.ispb == gateway_ispb());
        let payee = match (&tx.counterpart.key, tx.counterpart.key_type, ours, tx.refund.is_some()) {
            (Some(k), Some(t), true, false) => (self.on_us)(&DirectoryKey { key: k.clone(), key_type: t }),
            _ => None,
        };
        // A refund of an on-us payment goes back to the account that paid, on us too.
        let payee = payee.or(payout.returns_on_us);
        if let Some(payee) = payee {
            if counted {
                self.kept.backlog.taken_up();
            }
            let outcome = RailOutcome::settled(Some(crate::rail::sim::bank::gateway_bank()));
            payout.reply_to.do_send(Settled { local_id: tx.local_id, outcome, on_us: Some(payee) });
            return;
        }
        if self.kept.hold.is_held() {
            // Sent once released (still in the backlog): the other node may be the one
            // serving this ISPB.
            self.waiting.push((payout, counted));
            return;
        }
        if counted {
            self.kept.backlog.taken_up();
        }
        let complete =
            payout.tx.rail.as_ref().is_some_and(|r| r.creditor_document.is_some() && r.instrument.is_some())
                || payout.tx.refund.is_some();
        if complete {
            return self.send(payout, ctx);
        }
        // A payout made without a lookup (a charge's split): the payee's key is looked up
        // now, for the same end-to-end id.
        let Some(key) = payout.tx.counterpart.key.clone() else {
            let outcome =
                RailOutcome { result: Err(ErrorCode::OrderRejected), reason: Some("NO_PAYEE_KEY".into()) };
            payout.reply_to.do_send(Settled { local_id: payout.tx.local_id, outcome, on_us: None });
            return;
        };
        let lookup = Lookup {
            key,
            payer_document: payout.payer.document.clone(),
            end_to_end_id: payout.tx.end_to_end_id.clone(),
        };
        ctx.spawn(self.dict.send(lookup).into_actor(self).map(move |found, act, ctx| match found {
            Ok(Ok(found)) => {
                // The risk rule holds for a split as for a payment a client asks for: a payee
                // marked as a mule or scammer's account gets nothing (the amount comes back).
                let verdict = crate::domain::risk::assess(&found.signals);
                metrics::counter!("pixgw_dict_risk_verdicts_total", "verdict" => verdict.name()).increment(1);
                if let crate::domain::risk::Verdict::Refuse(why) = verdict {
                    tracing::warn!(target: "pixgw::risk", local_id = payout.tx.local_id, why, "a payout to a key marked for fraud was refused");
                    let outcome = RailOutcome {
                        result: Err(ErrorCode::OrderRejected),
                        reason: Some("PAYEE_FRAUD_MARKED".into()),
                    };
                    payout.reply_to.do_send(Settled { local_id: payout.tx.local_id, outcome, on_us: None });
                    return;
                }
                let mut payout = payout;
                apply_entry(&mut payout.tx, &found.entry);
                act.send(payout, ctx);
            }
            Ok(Err(DictError::NotFound)) => {
                let outcome = RailOutcome {
                    result: Err(ErrorCode::OrderRejected),
                    reason: Some("DICT_NOT_FOUND".into()),
                };
                payout.reply_to.do_send(Settled { local_id: payout.tx.local_id, outcome, on_us: None });
            }
            Ok(Err(e)) => {
                tracing::warn!(local_id = payout.tx.local_id, error = %e, "a payout waits for the DICT");
                let me = ctx.address();
                ctx.run_later(LOOKUP_RETRY_AFTER, move |_, _| me.do_send(payout));
            }
            Err(_) => {}
        }));
    }
}

/// What the DICT said of a payee, written into the payout (its message needs it).
pub fn apply_entry(tx: &mut crate::domain::transaction::Transaction, entry: &super::dict::Entry) {
    let rail = tx.rail.get_or_insert_with(RailDetails::default);
    rail.instrument.get_or_insert_with(|| "DICT".into());
    rail.creditor_document = Some(entry.tax_id.clone());
    rail.creditor_account_type = Some(entry.account_type.clone());
    let bank = tx.counterpart.bank.get_or_insert_with(|| crate::domain::transaction::BankInfo {
        ispb: entry.participant.to_string(),
        name: format!("ISPB {}", entry.participant),
        code: String::new(),
        branch: None,
        account_number: None,
    });
    bank.ispb = entry.participant.to_string();
    bank.branch = entry.branch.clone();
    bank.account_number = Some(entry.account_number.clone());
}

/// Posts what waits, up to ten messages a request, until ICOM takes them.
async fn sender(
    icom: IcomClient,
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Outbound>>>,
    kept: Option<Kept>,
) {
    loop {
        let mut batch = Vec::with_capacity(MESSAGES_PER_REQUEST_MAX);
        {
            let mut rx = rx.lock().await;
            match rx.recv().await {
                Some(first) => batch.push(first),
                None => return,
            }
            while batch.len() < MESSAGES_PER_REQUEST_MAX {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
        }
        SEND_QUEUE.fetch_sub(batch.len() as i64, std::sync::atomic::Ordering::Relaxed);
        post(&icom, kept.as_ref(), batch).await;
    }
}

/// Counts one more posting of each payout in `batch`, durably, before it leaves: the
/// posting before it may have reached the SPI.
async fn count_repeat(kept: Option<&Kept>, batch: &mut [Outbound]) -> Result<(), String> {
    let Some(kept) = kept else { return Ok(()) };
    for o in batch.iter_mut() {
        let Some((id, attempt)) = &mut o.payout else { continue };
        let mut m = kept.log.sent(id).map_err(|e| e.to_string())?.ok_or("its kept message is gone")?;
        m.attempts = m.attempts.max(*attempt) + 1;
        let n = m.attempts;
        kept.log.keep(m).await.map_err(|e| e.to_string())?;
        *attempt = n;
    }
    Ok(())
}

/// Records the resource ids ICOM answered for the payouts of `batch`, in one write (best
/// effort: a refusal naming one not recorded is matched by message id instead).
async fn record_postings(kept: Option<&Kept>, batch: &[Outbound], resource_ids: &[String]) {
    let Some(kept) = kept else { return };
    let postings: Vec<(String, u32, String)> = batch
        .iter()
        .zip(resource_ids)
        .filter_map(|(o, rid)| o.payout.as_ref().map(|(id, attempt)| (id.clone(), *attempt, rid.clone())))
        .collect();
    if postings.is_empty() {
        return;
    }
    match kept.log.posted(postings).await {
        Ok(()) => metrics::counter!("pixgw_spi_postings_recorded_total").increment(1),
        Err(e) => tracing::warn!(error = %e, "a request's resource ids were not recorded"),
    }
}

/// Posts one batch until it is taken; a refused batch of several is posted one by one, so
/// one bad message does not fail the others. A posting whose outcome is unknown (no
/// answer, a 5xx) may have reached the SPI, so the next is counted as a repeat first.
async fn post(icom: &IcomClient, kept: Option<&Kept>, mut batch: Vec<Outbound>) {
    let bodies: Vec<Bytes> = batch.iter().map(|o| o.body.clone()).collect();
    let mut backoff = BACKOFF_MIN;
    let mut unknown = false;
    let in_flight = kept.map(|k| Arc::clone(&k.in_flight));
    loop {
        if std::mem::take(&mut unknown) {
            if let Err(e) = count_repeat(kept, &mut batch).await {
                tracing::warn!(error = %e, "a repeat posting could not be counted; waiting");
                unknown = true;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        }
        let started = Instant::now();
        if let Some(f) = &in_flight {
            f.enter();
        }
        let sent = icom.send(&bodies).await;
        metrics::histogram!("pixgw_icom_send_seconds").record(started.elapsed().as_secs_f64());
        if let Ok(ids) = &sent {
            exchanged();
            record_postings(kept, &batch, ids).await;
        }
        if let Some(f) = &in_flight {
            f.leave();
        }
        match sent {
            Ok(_) => {
                for o in batch {
                    if let Some(d) = o.done {
                        let _ = d.send(Ok(()));
                    }
                }
                return;
            }
            Err(IcomError::Throttled(wait)) => {
                metrics::counter!("pixgw_icom_throttled_total", "direction" => "send").increment(1);
                tokio::time::sleep(wait).await;
            }
            Err(IcomError::Unavailable(e)) => {
                metrics::counter!("pixgw_icom_unavailable_total", "direction" => "send").increment(1);
                tracing::warn!(error = %e, wait_ms = backoff.as_millis() as u64, "ICOM did not take a batch; sending it again");
                unknown = true;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
            Err(e) if batch.len() > 1 => {
                tracing::warn!(error = %e, "ICOM refused a batch; sending its messages one by one");
                for o in batch {
                    Box::pin(post(icom, kept, vec![o])).await;
                }
                return;
            }
            Err(e) => {
                metrics::counter!("pixgw_icom_refused_total").increment(1);
                for o in batch {
                    let attempt = o.payout.as_ref().map_or(1, |p| p.1);
                    if let Some(d) = o.done {
                        let _ = d.send(Err(Refusal { error: e.clone(), attempt }));
                    }
                }
                return;
            }
        }
    }
}

/// An answer queued for posting, not yet known taken.
struct QueuedAnswer {
    taken: oneshot::Receiver<Result<(), Refusal>>,
    read_at: Instant,
    to: &'static str,
}

impl QueuedAnswer {
    /// Waits until ICOM took it.
    async fn taken(self) -> Result<(), String> {
        match self.taken.await {
            Ok(Ok(())) => {}
            Ok(Err(r)) => return Err(r.error.to_string()),
            Err(_) => return Err("the senders stopped".into()),
        }
        metrics::histogram!("pixgw_spi_answer_seconds", "to" => self.to)
            .record(self.read_at.elapsed().as_secs_f64());
        metrics::counter!("pixgw_spi_messages_sent_total", "kind" => "pacs.002").increment(1);
        Ok(())
    }
}

/// The readers' stop: a graceful stop raises it, and each reader, once its read under way
/// is answered and carried out, closes its stream with `DELETE` (which confirms that read)
/// and ends.
#[derive(Clone)]
pub struct Streams {
    stop: Arc<tokio::sync::watch::Sender<bool>>,
    /// Each reader holds a sender; once every one is dropped, every reader has ended.
    alive: Arc<std::sync::Mutex<Option<mpsc::Sender<()>>>>,
    ended: Arc<tokio::sync::Mutex<mpsc::Receiver<()>>>,
}

impl Streams {
    fn new() -> Streams {
        let (alive, ended) = mpsc::channel(1);
        Streams {
            stop: Arc::new(tokio::sync::watch::channel(false).0),
            alive: Arc::new(std::sync::Mutex::new(Some(alive))),
            ended: Arc::new(tokio::sync::Mutex::new(ended)),
        }
    }

    /// What a reader holds: the stop to watch, and its share of `alive`.
    fn reader(&self) -> Option<(tokio::sync::watch::Receiver<bool>, mpsc::Sender<()>)> {
        let alive = self.alive.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()?;
        Some((self.stop.subscribe(), alive))
    }

    /// Stops every reader and waits, at most `within`, until each has closed its stream.
    /// Answers whether they all did.
    pub async fn close(&self, within: Duration) -> bool {
        self.stop.send_replace(true);
        // Readers not started yet never will be.
        self.alive.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let mut ended = self.ended.lock().await;
        tokio::time::timeout(within, ended.recv()).await.is_ok()
    }
}

/// How long a graceful stop waits for the readers to close their streams: a read under way
/// is let finish first (at most its long poll, bounded by the client's deadline).
pub const STREAMS_CLOSE_WITHIN: Duration =
    Duration::from_secs(super::icom::LONG_POLL.as_secs() + super::icom::REQUEST_TIMEOUT.as_secs() + 5);

/// Closes the streams a previous run left open (a kill, a crash, a lost lease), where each
/// was written down: at that point everything read before it is on disk, so the `DELETE`
/// confirms nothing unrecorded. A stream that moved on since (it delivered a batch the
/// previous run never recorded) answers 410 and changes nothing: ICOM gives that batch
/// again once the stream expires. Answers how many ICOM closed.
async fn close_left_streams(icom: &IcomClient, log: &Arc<dyn SentLog>) -> usize {
    let left = match log.streams() {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e.0, "the streams a previous run left could not be read; ICOM expires them");
            return 0;
        }
    };
    let closes = left.into_iter().map(|(reader, next)| close_stream(reader, icom, log, Some(next), "start"));
    let closed = futures_util::future::join_all(closes).await.into_iter().filter(|c| *c).count();
    if closed > 0 {
        tracing::info!(closed, "closed the ICOM streams a previous run left open");
    }
    closed
}

/// Waits `d`, or less if the stop is raised: answers whether it was.
async fn pause(stop: &mut tokio::sync::watch::Receiver<bool>, d: Duration) -> bool {
    let raised = tokio::select! {
        _ = stop.wait_for(|s| *s) => true,
        _ = tokio::time::sleep(d) => false,
    };
    raised || *stop.borrow()
}

/// Closes reader `n`'s stream at `next` (which confirms the read before it, already carried
/// out) and writes down that it has none. Answers whether ICOM closed it (false: it had no
/// stream there any more, or did not answer, and expires it).
async fn close_stream(
    n: u64,
    icom: &IcomClient,
    log: &Arc<dyn SentLog>,
    next: Option<String>,
    why: &'static str,
) -> bool {
    let Some(next) = next else { return false };
    let closed = match icom.close(&next).await {
        Ok(closed) => closed,
        Err(e) => {
            tracing::warn!(stream = n, error = %e, why, "an ICOM stream could not be closed; ICOM expires it");
            false
        }
    };
    if closed {
        tracing::info!(stream = n, why, "an ICOM stream is closed");
        metrics::counter!("pixgw_icom_streams_closed_total", "when" => why).increment(1);
    }
    if let Err(e) = log.stream_at(n, None).await {
        tracing::warn!(stream = n, error = %e.0, "a closed stream could not be written down as closed");
    }
    closed
}

/// Reads one stream until the stop: each batch's effects on disk before it is confirmed.
/// Where the stream stands is written down after each batch is carried out, so a start
/// after a crash can close it ([`close_left_streams`]).
#[allow(clippy::too_many_arguments)]
async fn reader(
    n: usize,
    icom: IcomClient,
    settings: SpiSettings,
    inbound: Arc<dyn Inbound>,
    outbox: mpsc::UnboundedSender<Outbound>,
    kept: Kept,
    mut stop: tokio::sync::watch::Receiver<bool>,
    _alive: mpsc::Sender<()>,
) {
    let mut next: Option<String> = None;
    let mut backoff = BACKOFF_MIN;
    loop {
        // The stop is looked at between reads only: a read under way is let finish (at
        // most its long poll) and carried out, so the close confirms it and nothing read
        // is left to be given again, and a stream whose first read is under way (its URL
        // not known yet) is closed too.
        if *stop.borrow() {
            close_stream(n as u64, &icom, &kept.log, next.take(), "stop").await;
            return;
        }
        let started = Instant::now();
        let read = match &next {
            None => icom.start().await,
            Some(url) => icom.pull(url).await,
        };
        match read {
            Ok(Pulled { messages, next: following }) => {
                exchanged();
                // A read that waited out the long poll measures the poll, not ICOM.
                if !messages.is_empty() {
                    metrics::histogram!("pixgw_icom_read_seconds").record(started.elapsed().as_secs_f64());
                }
                backoff = BACKOFF_MIN;
                match handle_batch(&settings, &inbound, &outbox, &kept, messages).await {
                    Ok(()) => {
                        next = following;
                        // Written down before the next read, so a start after a crash
                        // closes the stream where it stands; a failed write only leaves an
                        // older position, which answers 410 and closes nothing.
                        if let Err(e) = kept.log.stream_at(n as u64, next.clone()).await {
                            tracing::warn!(stream = n, error = %e.0, "where the stream stands could not be written down");
                        }
                    }
                    Err(e) => {
                        // Not confirmed, and not closed (a DELETE would confirm it): ICOM
                        // expires the stream and delivers the batch again on a new one.
                        tracing::warn!(stream = n, error = %e, "a read could not be carried out; it will be read again");
                        next = None;
                        if pause(&mut stop, BACKOFF_MAX).await {
                            return;
                        }
                    }
                }
            }
            Err(IcomError::Throttled(wait)) => {
                metrics::counter!("pixgw_icom_throttled_total", "direction" => "read").increment(1);
                if pause(&mut stop, wait).await {
                    close_stream(n as u64, &icom, &kept.log, next.take(), "stop").await;
                    return;
                }
            }
            Err(IcomError::Gone) => next = None,
            Err(e) => {
                metrics::counter!("pixgw_icom_unavailable_total", "direction" => "read").increment(1);
                tracing::warn!(stream = n, error = %e, "ICOM read failed; trying again");
                if !e.is_transient() {
                    // Given up: closed where it stands (the read before is carried out), so
                    // it does not hold one of the participant's streams until it expires.
                    close_stream(n as u64, &icom, &kept.log, next.take(), "error").await;
                }
                if pause(&mut stop, backoff).await {
                    close_stream(n as u64, &icom, &kept.log, next.take(), "stop").await;
                    return;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// Carries out one read's messages: `Err` when any could not be (the read stays
/// unconfirmed).
async fn handle_batch(
    settings: &SpiSettings,
    inbound: &Arc<dyn Inbound>,
    outbox: &mpsc::UnboundedSender<Outbound>,
    kept: &Kept,
    messages: Vec<super::icom::Part>,
) -> Result<(), String> {
    // The answers are queued as their arrivals are recorded and waited for together at
    // the end: the senders take what is queued at once in one request, instead of one
    // round trip (and, under a fault, one wait) per message of the read.
    let mut answers = Vec::new();
    for part in messages {
        let read_at = Instant::now();
        let resource = part.resource_id.as_deref();
        // What cannot be applied is kept, durably, before the read is confirmed: the
        // stream goes on, and an operator sees it (`Inbound::unmatched`).
        let keep = |kind: &str, reference: &str, why: String| {
            let item = crate::rail::Unmatched::of(&part.body, kind, reference, why, resource, Utc::now());
            inbound.unmatched(item)
        };
        let message = match check(settings, &part.body, resource) {
            Ok(m) => m,
            Err(why) => {
                keep("unreadable", resource.unwrap_or("-"), why).await.map_err(|e| e.0)?;
                continue;
            }
        };
        let kind = message.kind().name();
        metrics::counter!("pixgw_spi_messages_received_total", "kind" => message.kind().name()).increment(1);
        let lag = (Utc::now() - message.created).to_std().unwrap_or_default();
        metrics::histogram!("pixgw_spi_stream_lag_seconds").record(lag.as_secs_f64());
        match message.body {
            Body::CreditTransfers { txs, .. } => {
                let mut reports = Vec::with_capacity(txs.len());
                for tx in txs {
                    reports.push(arrival_answer(settings, inbound, tx).await?);
                }
                answers.push(answer(settings, outbox, reports, read_at, "pacs.008")?);
            }
            Body::Returns(returns) => {
                let mut reports = Vec::with_capacity(returns.len());
                for r in returns {
                    reports.push(return_answer(settings, inbound, r).await?);
                }
                answers.push(answer(settings, outbox, reports, read_at, "pacs.004")?);
            }
            Body::Statuses(reports) => {
                for r in reports {
                    if let Some(why) = status(inbound, kept, &r).await? {
                        keep(kind, &status_id(&r), why).await.map_err(|e| e.0)?;
                    }
                }
            }
            Body::Reject(r) => {
                metrics::counter!("pixgw_spi_admi002_total", "reason" => r.reason.clone()).increment(1);
                tracing::error!(reference = %r.reference, reason = %r.reason, location = ?r.location, description = ?r.description, "the SPI refused a message of ours (admi.002)");
                if let Some(why) = refusal(settings, inbound, kept, &r).await? {
                    keep(kind, &r.reference, why).await.map_err(|e| e.0)?;
                }
            }
        }
    }
    // Confirmed only once ICOM took every answer.
    for a in answers {
        a.taken().await?;
    }
    Ok(())
}

/// Applies an admi.002: the payout whose original posting it refuses fails. It is matched
/// by the resource id ICOM answered a posting (which says which posting) or by our message
/// id. Answers why it changed nothing, when an operator must see it.
async fn refusal(
    settings: &SpiSettings,
    inbound: &Arc<dyn Inbound>,
    kept: &Kept,
    r: &super::message::Reject,
) -> Result<Option<String>, String> {
    let log = &kept.log;
    let mut posting = log.posting_of(&r.reference).map_err(|e| e.0)?;
    let by_msg_id = outgoing::ids_of_msg_id(&settings.ispb, &r.reference);
    if posting.is_none() && by_msg_id.is_none() {
        // Perhaps a resource id whose 201 is being recorded this instant.
        kept.in_flight.drained(super::icom::REQUEST_TIMEOUT).await;
        posting = log.posting_of(&r.reference).map_err(|e| e.0)?;
    }
    let (ids, attempt) = match posting {
        Some((id, attempt)) => (vec![id], Some(attempt)),
        None => (by_msg_id.map(Vec::from).unwrap_or_default(), None),
    };
    let outcome = RailOutcome {
        result: Err(ErrorCode::PaymentExpired),
        reason: Some(format!("admi.002 {}", r.reason)),
    };
    let mut why = Some(format!("an admi.002 ({}) whose reference names no payout of ours", r.reason));
    for id in ids {
        let copy = match log.sent(&id).map_err(|e| e.0)? {
            Some(m) => kept_log::refused_copy(&m, attempt),
            // A payout sent before messages were kept, or none of ours.
            None => RefusedCopy::Original,
        };
        match copy {
            RefusedCopy::Repeat => {
                metrics::counter!("pixgw_spi_repeat_refusals_total").increment(1);
                tracing::warn!(id, reference = %r.reference, reason = %r.reason,
                    "the SPI refused a repeated posting of a payout's message; the payout waits for the answer to its original");
                return Ok(None);
            }
            RefusedCopy::Unknown => {
                return Ok(Some(format!(
                    "an admi.002 ({}) names the message of payout {id}, which was posted more than once: which posting it refuses cannot be known, so the payout waits for the SPI's answer to its original",
                    r.reason
                )));
            }
            RefusedCopy::Original => {
                match inbound.payout_ended(id, outcome.clone()).await.map_err(|e| e.0)? {
                    PayoutEnded::Applied => return Ok(None),
                    PayoutEnded::Contradicts(w) => why = Some(format!("an admi.002 ({}): {w}", r.reason)),
                    PayoutEnded::NotOurs => {}
                }
            }
        }
    }
    Ok(why)
}

/// A received message, once it verifies and follows the catalogue; else why not.
fn check(settings: &SpiSettings, body: &[u8], resource: Option<&str>) -> Result<Message, String> {
    let bad = |what: &'static str, e: String| {
        metrics::counter!("pixgw_spi_messages_refused_total", "why" => what).increment(1);
        tracing::error!(resource, why = what, error = %e, "a message from the SPI is refused; it credits nothing");
        Err(format!("{what}: {e}"))
    };
    let doc = match Document::parse(body) {
        Ok(d) => d,
        Err(e) => return bad("xml", e.to_string()),
    };
    if !(settings.accept_unsigned && dsig::signature_of(&doc, Profile::Spi).is_none()) {
        if let Err(e) = dsig::verify(&doc, Profile::Spi, &settings.trusted) {
            return bad("signature", e.to_string());
        }
    }
    let m = match Message::read(&doc) {
        Ok(m) => m,
        Err(e) => return bad("catalogue", e.to_string()),
    };
    if m.to != settings.ispb || m.from != Ispb::spi() {
        return bad("address", format!("from {} to {}", m.from, m.to));
    }
    Ok(m)
}

fn report(id: &str, original: &str, refused: Option<&str>) -> StatusReport {
    StatusReport {
        original_instruction_id: id.to_owned(),
        original_end_to_end_id: original.to_owned(),
        status: if refused.is_some() { TxStatus::Rejected } else { TxStatus::Accepted },
        reason: refused.map(str::to_owned),
        additional_info: None,
        settled_at: None,
    }
}

async fn arrival_answer(
    settings: &SpiSettings,
    inbound: &Arc<dyn Inbound>,
    t: CreditTransfer,
) -> Result<StatusReport, String> {
    let id = t.end_to_end_id.clone();
    if t.creditor_account.ispb != settings.ispb {
        return Ok(report(&id, &id, Some("AGNT")));
    }
    let arrival = Arrival {
        id: id.clone(),
        value: t.amount,
        payer_name: t.debtor_name,
        payer_document: t.debtor_document,
        payer_ispb: t.debtor_account.ispb.to_string(),
        paid_at: t.accepted_at,
        creditor_document: t.creditor_document,
        to: ArrivalTo::Payment {
            key: t.proxy,
            account: t.creditor_account.number,
            account_type: Some(t.creditor_account.kind.code().to_owned()),
            reference: t.tx_id,
        },
    };
    let answered = inbound.accept(arrival).await.map_err(|e| e.0)?;
    let refused = answered.err().map(|r| refusal_reason(&r));
    if let Some(reason) = refused {
        metrics::counter!("pixgw_spi_arrivals_refused_total", "reason" => reason).increment(1);
    }
    Ok(report(&id, &id, refused))
}

async fn return_answer(
    settings: &SpiSettings,
    inbound: &Arc<dyn Inbound>,
    r: Return,
) -> Result<StatusReport, String> {
    if r.original_debtor_agent != settings.ispb {
        return Ok(report(&r.return_id, &r.original_end_to_end_id, Some("AGNT")));
    }
    let arrival = Arrival {
        id: r.return_id.clone(),
        value: r.amount,
        payer_name: String::new(),
        payer_document: String::new(),
        payer_ispb: r.original_creditor_agent.to_string(),
        paid_at: Utc::now(),
        creditor_document: String::new(),
        to: ArrivalTo::Return { original_end_to_end_id: r.original_end_to_end_id.clone() },
    };
    let answered = inbound.accept(arrival).await.map_err(|e| e.0)?;
    let refused = answered.err().map(|r| refusal_reason(&r));
    Ok(report(&r.return_id, &r.original_end_to_end_id, refused))
}

/// Signs the answer to what was read and queues it for posting; the read waits for it
/// ([`QueuedAnswer::taken`]) before it is confirmed.
fn answer(
    settings: &SpiSettings,
    outbox: &mpsc::UnboundedSender<Outbound>,
    reports: Vec<StatusReport>,
    read_at: Instant,
    to: &'static str,
) -> Result<QueuedAnswer, String> {
    let m = outgoing::answer(&settings.ispb, reports, Utc::now());
    let signed = dsig::sign_spi(&m.write(), &settings.signer).map_err(|e| e.to_string())?;
    let (done, taken) = oneshot::channel();
    outbox
        .send(Outbound { body: Bytes::from(signed), payout: None, done: Some(done) })
        .map_err(|_| "the senders stopped".to_owned())?;
    SEND_QUEUE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(QueuedAnswer { taken, read_at, to })
}

/// A status the SPI reports: the end of one of our payouts, or of something we accepted.
/// The id a status report is about: a return's id, else the payment's end-to-end id.
fn status_id(r: &StatusReport) -> String {
    if r.original_instruction_id.starts_with('D') {
        r.original_instruction_id.clone()
    } else {
        r.original_end_to_end_id.clone()
    }
}

/// Applies a status report; answers why it could not be, when nothing of ours waits under
/// its id (the caller keeps it as unmatched).
async fn status(inbound: &Arc<dyn Inbound>, kept: &Kept, r: &StatusReport) -> Result<Option<String>, String> {
    let id = status_id(r);
    let contradicted = |why: String| Ok(Some(format!("an {}: {why}", r.status.code())));
    let found = match r.status {
        TxStatus::SettledForPayer => {
            match inbound.payout_ended(id, RailOutcome::settled(None)).await.map_err(|e| e.0)? {
                PayoutEnded::Applied => true,
                PayoutEnded::NotOurs => false,
                PayoutEnded::Contradicts(why) => return contradicted(why),
            }
        }
        TxStatus::SettledForReceiver => inbound.incoming_ended(id, true).await.map_err(|e| e.0)?,
        TxStatus::Rejected => {
            let reason = r.reason.clone().unwrap_or_else(|| "ED05".into());
            if kept_log::may_answer_a_copy(&reason) {
                let sent = kept.log.sent(&id).map_err(|e| e.0)?;
                if sent.is_some_and(|m| kept_log::refused_copy(&m, None) == RefusedCopy::Unknown) {
                    return Ok(Some(format!(
                        "a RJCT {reason} of payout {id}, whose message was posted more than once: it may answer a repeat, so the payout waits for the SPI's answer to its original"
                    )));
                }
            }
            metrics::counter!("pixgw_spi_rejections_total", "reason" => reason.clone()).increment(1);
            if reason == "AB03" {
                metrics::counter!("pixgw_spi_timeouts_total").increment(1);
            }
            if is_operator_reason(&reason) {
                tracing::error!(id, reason, "the SPI rejected a payment for a reason about this participant");
            }
            let outcome = RailOutcome { result: Err(reject_code(&reason)), reason: Some(reason) };
            match inbound.payout_ended(id.clone(), outcome).await.map_err(|e| e.0)? {
                PayoutEnded::Applied => true,
                PayoutEnded::NotOurs => inbound.incoming_ended(id, false).await.map_err(|e| e.0)?,
                PayoutEnded::Contradicts(why) => return contradicted(why),
            }
        }
        // The SPI does not send ACSP: one is read and needs nothing.
        TxStatus::Accepted => true,
    };
    Ok((!found).then(|| {
        format!("a {} status of a payment or return that is not ours or not known", r.status.code())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_maps_to_the_interfaces_code_and_ours_alert_the_operator() {
        for (reason, code) in [
            ("AB03", ErrorCode::SettlementTimeout),
            ("AC06", ErrorCode::BlockedAccount),
            ("AC07", ErrorCode::AccountClosed),
            ("BE01", ErrorCode::TaxIdMismatch),
            ("DS04", ErrorCode::OrderRejected),
            ("AC03", ErrorCode::OrderRejected),
            ("AB09", ErrorCode::OrderRejected),
            ("AM04", ErrorCode::PaymentExpired),
            ("DS0G", ErrorCode::PaymentExpired),
        ] {
            assert_eq!(reject_code(reason), code, "{reason}");
        }
        assert!(is_operator_reason("AM04"));
        assert!(!is_operator_reason("AC06"));
    }

    /// The scheduling policy of the calling thread, from /proc (field 41 of its stat line).
    #[cfg(target_os = "linux")]
    fn policy_of_this_thread() -> u32 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The command name (field 2) may hold spaces; the fields after its ')' do not.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        rest.split(' ').nth(38).unwrap().parse().unwrap()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_payout_thread_runs_when_idle_and_no_other_thread_does() {
        const SCHED_OTHER: u32 = 0;
        const SCHED_IDLE: u32 = 5;
        let before = policy_of_this_thread();
        let idle = std::thread::spawn(|| {
            run_this_thread_when_idle();
            policy_of_this_thread()
        })
        .join()
        .unwrap();
        assert_eq!((before, idle), (SCHED_OTHER, SCHED_IDLE));
        assert_eq!(policy_of_this_thread(), SCHED_OTHER, "the caller's thread is untouched");
    }

    #[test]
    fn every_refusal_of_an_arrival_has_a_catalogue_reason() {
        use IncomingRefusal::*;
        let all = [
            (Refuse::UnknownAccount, "AC03"),
            (Refuse::KeyNotOurs, "AC03"),
            (Refuse::KeyOfAnotherAccount, "AC03"),
            (Refuse::AccountType, "AC14"),
            (Refuse::NotAccepted, "AG03"),
            (Refuse::Account(DocumentMismatch), "BE01"),
            (Refuse::Account(UnknownCharge), "BE17"),
            (Refuse::Account(ChargePaid), "DUPL"),
            (Refuse::Account(ChargeClosed), "BE17"),
            (Refuse::Account(WrongAmount), "AM09"),
            (Refuse::Account(OriginalNotFound), "DS04"),
            (Refuse::Account(ReturnTooLarge), "AM09"),
        ];
        for (r, code) in all {
            assert_eq!(refusal_reason(&r), code, "{r:?}");
        }
    }
}
