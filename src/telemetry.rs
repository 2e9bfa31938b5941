//! Logs (tracing, human or JSON lines) and the Prometheus metrics recorder.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;
use crate::domain::transaction::{Transaction, TxKind, TxStatus};

/// Buckets of the request latency histogram, in seconds: fine below 10 ms, where the
/// gateway's goals are.
const LATENCY_BUCKETS_SECONDS: &[f64] =
    &[0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// How many lines may wait for the log thread before new ones are dropped (and counted in
/// `pixgw_log_lines_dropped_total`).
pub const LOG_LINES_BUFFERED_MAX: usize = 128_000;

/// The log thread's write buffer.
const LOG_WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// The log thread's count of lines it had to drop, once logs are installed.
static DROPPED_LINES: OnceLock<tracing_appender::non_blocking::ErrorCounter> = OnceLock::new();

/// Installs the log subscriber; `RUST_LOG` overrides the default `info` filter.
///
/// Lines are formatted on the thread that logs them and written to stderr by a thread of
/// their own: a slow log sink (a pipe to a collector that stalls) must never hold a payment
/// up. When more than [`LOG_LINES_BUFFERED_MAX`] lines wait, new ones are dropped and
/// counted rather than blocking. Keep the guard until the process ends: dropping it writes
/// what is still queued.
pub fn init_logs(format: LogFormat) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal: in a file or a log collector they are noise.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_LINES_BUFFERED_MAX)
        .lossy(true)
        .thread_name("pixgw-log")
        // Buffered: the log thread writes whatever lines are queued, then flushes once the
        // queue is empty, so under load many lines go out in one write.
        .finish(std::io::BufWriter::with_capacity(LOG_WRITE_BUFFER_BYTES, std::io::stderr()));
    let dropped = writer.error_counter();
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(colour);
    let installed = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    // A second init (another subscriber is already installed) keeps the first.
    installed.ok()?;
    let _ = DROPPED_LINES.set(dropped);
    Some(guard)
}

/// A budget of log lines per window for an event that can repeat at the rate of requests
/// (a webhook receiver that is down, say): the first lines of each window are written, the
/// rest counted and reported with the next written line.
#[derive(Debug)]
pub struct LineBudget {
    per_window: u32,
    window: std::time::Duration,
    started: Option<std::time::Instant>,
    used: u32,
    suppressed: u64,
}

/// What [`LineBudget::admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Write the line, saying how many like it were left out since the last one written.
    Write { suppressed: u64 },
    /// Leave it out; it is counted.
    Skip,
}

impl LineBudget {
    pub const fn new(per_window: u32, window: std::time::Duration) -> Self {
        LineBudget { per_window, window, started: None, used: 0, suppressed: 0 }
    }

    /// Whether a line may be written at `now`.
    pub fn admit(&mut self, now: std::time::Instant) -> Admit {
        let fresh = self.started.is_none_or(|s| now.saturating_duration_since(s) >= self.window);
        if fresh {
            self.started = Some(now);
            self.used = 0;
        }
        if self.used < self.per_window {
            self.used += 1;
            Admit::Write { suppressed: std::mem::take(&mut self.suppressed) }
        } else {
            self.suppressed += 1;
            Admit::Skip
        }
    }
}

/// The process-wide metrics recorder, installed once.
pub fn metrics_handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        // Histograms, not summaries: a summary's quantiles over a whole run read the same
        // when most values are, and cannot be added up across scrapes or nodes.
        let buckets = [
            ("http_request_duration_seconds", LATENCY_BUCKETS_SECONDS),
            ("pixgw_commit_seconds", LATENCY_BUCKETS_SECONDS),
            ("pixgw_commit_apply_seconds", LATENCY_BUCKETS_SECONDS),
            ("pixgw_db_pool_wait_seconds", LATENCY_BUCKETS_SECONDS),
            ("pixgw_checkpoint_seconds", CHECKPOINT_BUCKETS_SECONDS),
            ("pixgw_checkpoint_paused_seconds", CHECKPOINT_BUCKETS_SECONDS),
            ("pixgw_commit_backpressure_seconds", CHECKPOINT_BUCKETS_SECONDS),
            ("pixgw_icom_send_seconds", RAIL_BUCKETS_SECONDS),
            ("pixgw_icom_read_seconds", RAIL_BUCKETS_SECONDS),
            ("pixgw_spi_answer_seconds", RAIL_BUCKETS_SECONDS),
            ("pixgw_spi_stream_lag_seconds", RAIL_BUCKETS_SECONDS),
            ("pixgw_dict_lookup_seconds", RAIL_BUCKETS_SECONDS),
        ];
        let recorder = buckets
            .iter()
            .try_fold(PrometheusBuilder::new(), |b, (name, edges)| {
                b.set_buckets_for_metric(Matcher::Full((*name).into()), edges)
            })
            .map(|b| b.build_recorder())
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        let handle = recorder.handle();
        // Fails only if another recorder is installed, in which case ours renders nothing
        // new; the server still runs.
        let _ = metrics::set_global_recorder(recorder);
        describe_and_zero();
        handle
    })
}

/// Buckets of the rails' exchanges, in seconds: answers are due within a second or two, a
/// long poll lasts some seconds, and the SPI's limits are tens of seconds.
const RAIL_BUCKETS_SECONDS: &[f64] =
    &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.3, 5.0, 10.0, 30.0, 60.0];

/// Buckets of checkpoints and backpressure waits, in seconds.
const CHECKPOINT_BUCKETS_SECONDS: &[f64] =
    &[0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// The final statuses a payment is counted under (by operation: every [`TxKind`]).
const PAYMENT_FINAL_STATUSES: [TxStatus; 2] = [TxStatus::Confirmed, TxStatus::Error];

/// The codes a token request can fail with.
pub const TOKEN_FAILURE_CODES: [&str; 11] = [
    "PUB_CERT_HEADER_MISSING",
    "PUB_CERT_MALFORMED_PEM",
    "PUB_REQUEST_BODY_INVALID",
    "PUB_CERT_NOT_YET_VALID",
    "PUB_CERT_EXPIRED",
    "PUB_CERT_NOT_REGISTERED",
    "PUB_INVALID_CREDENTIALS",
    "PUB_CERT_NOT_AUTHORIZED_FOR_ACCOUNT",
    "PUB_TOO_MANY_ATTEMPTS",
    "PUB_AUTH_UPSTREAM_ERROR",
    "PUB_AUTH_UPSTREAM_UNAVAILABLE",
];

/// The SPI rail's metrics (docs/deploy.md "Operating the SPI rail").
fn describe_rails() {
    use metrics::{describe_counter, describe_histogram, Unit};
    describe_counter!(
        "pixgw_spi_messages_sent_total",
        "Messages sent to the SPI, by kind (pacs.008, pacs.004, pacs.002)"
    );
    describe_counter!(
        "pixgw_spi_messages_received_total",
        "Messages read from the SPI that verified and followed the catalogue, by kind"
    );
    describe_counter!(
        "pixgw_spi_messages_refused_total",
        "Messages read from the SPI and refused, crediting nothing, by why: xml, signature, catalogue, address"
    );
    describe_counter!("pixgw_spi_admi002_total", "Messages of ours the SPI refused (admi.002), by reason");
    describe_counter!(
        "pixgw_spi_unmatched_total",
        "Messages read from the SPI that could not be applied, kept as unmatched rail items for an operator, by kind: pacs.002, admi.002, unreadable"
    );
    describe_counter!("pixgw_spi_rejections_total", "Rejections (RJCT) the SPI reported, by reason");
    describe_counter!("pixgw_spi_timeouts_total", "Payments the SPI timed out (AB03)");
    describe_counter!(
        "pixgw_spi_arrivals_refused_total",
        "Payments in this gateway refused, by the reason it answered"
    );
    describe_histogram!(
        "pixgw_spi_answer_seconds",
        Unit::Seconds,
        "Time from reading a payment or return in to ICOM taking the answer (pacs.002), by what it answers"
    );
    describe_histogram!(
        "pixgw_spi_stream_lag_seconds",
        Unit::Seconds,
        "Time from the SPI's creation of a message (its CreDt) to this gateway reading it"
    );
    describe_histogram!("pixgw_icom_send_seconds", Unit::Seconds, "Time ICOM took to answer a send");
    describe_histogram!(
        "pixgw_icom_read_seconds",
        Unit::Seconds,
        "Time ICOM took to answer a read that delivered messages (reads that waited out the long poll are not counted)"
    );
    metrics::describe_gauge!(
        "pixgw_spi_payouts_pending",
        "Payouts sent to the SPI without a final status, by age: within_limit, or aged (no answer a minute after the debit)"
    );
    metrics::describe_gauge!("pixgw_spi_unmatched_open", "Unmatched rail items no operator has resolved yet");
    metrics::describe_gauge!(
        "pixgw_spi_rail_held",
        "1 while the SPI rail of a restored or migrated store waits for an operator's release (nothing read or sent)"
    );
    metrics::describe_gauge!(
        "pixgw_spi_payout_backlog",
        "Payouts handed to the SPI rail and not yet taken up (made and signed); at [spi] payout_backlog_max new payments are refused"
    );
    describe_counter!(
        "pixgw_spi_payments_refused_backlog_total",
        "Payments refused with 503 because the SPI rail had more payouts waiting than it can send in time"
    );
    metrics::describe_gauge!("pixgw_spi_send_queue", "Messages waiting for a sender to post them to ICOM");
    metrics::describe_gauge!(
        "pixgw_icom_last_exchange_age_seconds",
        "Seconds since ICOM last answered a send or a read of this node (a 204 long poll counts)"
    );
    describe_counter!(
        "pixgw_spi_payouts_too_late_total",
        "Payouts that could not leave within leave_within_ms of their debit: failed unsent, amount released"
    );
    describe_counter!(
        "pixgw_spi_postings_recorded_total",
        "ICOM requests carrying payouts whose 201 (the resource ids, and that ICOM took them) is recorded"
    );
    describe_counter!(
        "pixgw_spi_payouts_awaiting_total",
        "Payouts handed to the rail again (a start) whose message ICOM had taken: not posted again, the SPI's answer awaited"
    );
    describe_counter!(
        "pixgw_dict_claims_seen_total",
        "DICT key claims listed and recorded by the accounts they concern"
    );
    describe_counter!(
        "pixgw_dict_claim_steps_total",
        "Steps of DICT key claims taken, by step and by whom: the gateway's own, a client's, an operator's"
    );
    describe_counter!(
        "pixgw_dict_claims_opened_total",
        "DICT key claims opened for accounts of this gateway"
    );
    describe_counter!(
        "pixgw_dict_claims_unattributed_total",
        "DICT key claims naming this participant but no account of it (a sync difference), not recorded"
    );
    describe_counter!(
        "pixgw_dict_sync_checks_total",
        "Sync verifications with the DICT, by key type and result: ok, repaired, failed"
    );
    describe_counter!(
        "pixgw_dict_sync_repairs_total",
        "Differences with the DICT repaired (added, adopted, removed) or left to an operator (kept, unattributed)"
    );
    describe_counter!(
        "pixgw_dict_risk_verdicts_total",
        "Payments to keys of other institutions by the risk rule's verdict on the DICT's anti-fraud counters"
    );
    describe_counter!(
        "pixgw_icom_streams_closed_total",
        "ICOM streams closed with DELETE, by when: stop, start (left by a killed run), error"
    );
    describe_counter!(
        "pixgw_spi_repeat_refusals_total",
        "admi.002 refusing a repeated posting of a message the SPI may already hold (nothing changes)"
    );
    describe_counter!("pixgw_icom_throttled_total", "ICOM answers 429 (tokens or streams), by direction");
    describe_counter!(
        "pixgw_icom_unavailable_total",
        "ICOM failures that are tried again (5xx, network), by direction"
    );
    describe_counter!("pixgw_icom_refused_total", "Sends ICOM refused with a 4xx (the payout fails)");
    describe_counter!(
        "pixgw_dict_lookups_total",
        "DICT lookups, by result: found, not_found, rate_limited, limited_here, cached, error"
    );
    describe_histogram!("pixgw_dict_lookup_seconds", Unit::Seconds, "Time the DICT took to answer a lookup");
}

/// The SPI rail's counters at zero, called when that rail starts: a rate, and the first
/// `increase` an alert takes, then count the first event too. Counters labelled by a reason
/// the SPI names are not known in advance; their alerts also fire on a series that is new.
pub fn zero_spi_counters() {
    for name in [
        "pixgw_spi_timeouts_total",
        "pixgw_icom_refused_total",
        "pixgw_spi_payouts_too_late_total",
        "pixgw_spi_repeat_refusals_total",
        "pixgw_spi_payments_refused_backlog_total",
    ] {
        metrics::counter!(name).absolute(0);
    }
    for why in ["xml", "signature", "catalogue", "address"] {
        metrics::counter!("pixgw_spi_messages_refused_total", "why" => why).absolute(0);
    }
    for kind in ["pacs.002", "admi.002", "unreadable"] {
        metrics::counter!("pixgw_spi_unmatched_total", "kind" => kind).absolute(0);
    }
    for direction in ["send", "read"] {
        metrics::counter!("pixgw_icom_throttled_total", "direction" => direction).absolute(0);
        metrics::counter!("pixgw_icom_unavailable_total", "direction" => direction).absolute(0);
    }
    for result in ["found", "not_found", "rate_limited", "limited_here", "cached", "error"] {
        metrics::counter!("pixgw_dict_lookups_total", "result" => result).absolute(0);
    }
}

/// `# HELP` for every family, and every counter present at zero from the start (so a rate
/// works before the first event), with the label sets that are known in advance.
fn describe_and_zero() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!("http_requests_total", "HTTP requests answered, by route pattern, method and status");
    describe_histogram!(
        "http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer a request, by route pattern"
    );
    describe_counter!(
        "pixgw_payments_total",
        "Payments that reached a final status, by operation and status"
    );
    describe_counter!(
        "pixgw_payment_amount_cents_total",
        "Amounts of the payments that reached a final status, in centavos, by operation and status"
    );
    describe_counter!("pixgw_token_failures_total", "Failed token requests, by error code");
    describe_rails();
    describe_histogram!(
        "pixgw_commit_seconds",
        Unit::Seconds,
        "Time to make one group durable (journal write and fdatasync)"
    );
    describe_histogram!(
        "pixgw_commit_apply_seconds",
        Unit::Seconds,
        "Time to write one group to the journal"
    );
    describe_counter!("pixgw_committed_batches_total", "Batches made durable by group commit");
    describe_histogram!(
        "pixgw_commit_backpressure_seconds",
        Unit::Seconds,
        "Time the committer waited for a checkpoint because too much was waiting to be checkpointed"
    );
    describe_gauge!("pixgw_commit_queue_depth", "Batches submitted and not yet durable");
    describe_counter!(
        "pixgw_storage_write_refusals_total",
        "Writes storage refused, by reason: full (the disk has too little room; they resume by themselves) or failed (a write failed; the process must be restarted)"
    );
    describe_gauge!(
        "pixgw_serving",
        "1 while this node serves the API (a single node, or the leader on a shared database), 0 on a standby"
    );
    metrics::gauge!("pixgw_serving").set(0.0);
    describe_gauge!(
        "pixgw_database_up",
        "On the PostgreSQL store: 1 while the database answered this node's last lease request, 0 while it does not (absent on the embedded store)"
    );
    describe_gauge!(
        "pixgw_lease_epoch",
        "On the PostgreSQL store: the lease's epoch this node leads under; it grows by one at each takeover"
    );
    describe_histogram!(
        "pixgw_db_pool_wait_seconds",
        Unit::Seconds,
        "On the PostgreSQL store: time a read waited for a connection of the pool"
    );
    describe_gauge!(
        "pixgw_db_pool_waiting",
        "On the PostgreSQL store: reads waiting for a connection of the pool, when the last one got one"
    );
    describe_gauge!(
        "pixgw_db_standbys",
        "On the PostgreSQL store, from the leader: the database's standbys (pg_stat_replication), by state: attached (all), synchronous (sync or quorum: those a commit waits for)"
    );
    describe_gauge!(
        "pixgw_db_standby_replay_lag_seconds",
        "On the PostgreSQL store, from the leader: the largest replay lag among the database's standbys (0 when none lags)"
    );
    describe_gauge!(
        "pixgw_storage_failed",
        "1 once a write has failed: every later write is refused until the process restarts"
    );
    metrics::gauge!("pixgw_storage_failed").set(0.0);
    for reason in ["full", "failed"] {
        metrics::counter!("pixgw_storage_write_refusals_total", "reason" => reason).absolute(0);
    }
    describe_histogram!("pixgw_checkpoint_seconds", Unit::Seconds, "Time to write one checkpoint into sled");
    describe_histogram!(
        "pixgw_checkpoint_paused_seconds",
        Unit::Seconds,
        "Of a checkpoint's time, its pauses between slices of work"
    );
    describe_counter!("pixgw_checkpoints_total", "Checkpoints written");
    describe_counter!("pixgw_checkpoint_bytes_total", Unit::Bytes, "Bytes written into sled by checkpoints");
    describe_gauge!("pixgw_checkpoint_applied_seq", "The last journal record sled holds");
    describe_gauge!("pixgw_journal_disk_bytes", Unit::Bytes, "Bytes the journal's segments take on disk");
    describe_gauge!(
        "pixgw_journal_last_seq",
        "The last journal record written; minus pixgw_checkpoint_applied_seq, the records not yet in sled"
    );
    describe_gauge!("pixgw_account_actors", "Account actors live now");
    describe_gauge!(
        "pixgw_webhook_backlog",
        "Webhook events waiting to be delivered (first attempts and retries)"
    );
    describe_counter!("pixgw_webhooks_delivered_total", "Webhook deliveries answered 2xx");
    describe_counter!(
        "pixgw_webhooks_retried_total",
        "Webhook attempts that failed and were scheduled again"
    );
    describe_counter!("pixgw_webhooks_failed_total", "Webhook events given up after the last retry");
    describe_counter!(
        "pixgw_log_lines_dropped_total",
        "Log lines dropped because the log thread was too far behind"
    );
    metrics::counter!("pixgw_log_lines_dropped_total").absolute(0);
    describe_gauge!("process_resident_memory_bytes", Unit::Bytes, "Resident memory of the process");
    describe_gauge!("process_open_fds", "File descriptors the process has open");
    describe_gauge!(
        "process_cpu_seconds_total",
        Unit::Seconds,
        "CPU time the process has used, user and system"
    );
    describe_gauge!("pixgw_build_info", "Always 1; the labels say which build this is");
    for name in [
        "pixgw_committed_batches_total",
        "pixgw_checkpoints_total",
        "pixgw_checkpoint_bytes_total",
        "pixgw_webhooks_delivered_total",
        "pixgw_webhooks_retried_total",
        "pixgw_webhooks_failed_total",
    ] {
        metrics::counter!(name).absolute(0);
    }
    for op in TxKind::ALL {
        for status in PAYMENT_FINAL_STATUSES {
            let labels = [("operation", op.as_str()), ("status", status.as_str())];
            metrics::counter!("pixgw_payments_total", &labels).absolute(0);
            metrics::counter!("pixgw_payment_amount_cents_total", &labels).absolute(0);
        }
    }
    for code in TOKEN_FAILURE_CODES {
        metrics::counter!("pixgw_token_failures_total", "code" => code).absolute(0);
    }
    // A histogram of something that may never happen (a backpressure wait) is present from
    // the start too, so that a rule or a dashboard over it reads zero, not "no data".
    for name in [
        "pixgw_commit_backpressure_seconds",
        "pixgw_checkpoint_seconds",
        "pixgw_checkpoint_paused_seconds",
        "pixgw_commit_seconds",
        "pixgw_commit_apply_seconds",
    ] {
        let _ = metrics::histogram!(name);
    }
    metrics::gauge!("pixgw_webhook_backlog").set(0.0);
    metrics::gauge!("pixgw_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}

/// Payment lines waiting for their thread before new ones are dropped (and counted).
pub const PAYMENT_LINES_QUEUED_MAX: usize = 65_536;

/// A step of a payment, as the account actor hands it to the payment log thread.
struct PaymentLine {
    account: u64,
    operation: &'static str,
    status: &'static str,
    step: &'static str,
    transaction_id: uuid::Uuid,
    end_to_end_id: String,
    value: crate::domain::money::Money,
    error_code: Option<&'static str>,
    request_id: Option<std::sync::Arc<str>>,
}

enum PaymentLog {
    Line(Box<PaymentLine>),
    /// Answered once every line sent before it is logged.
    Flush(std::sync::mpsc::SyncSender<()>),
}

/// How long the payment log thread sleeps between taking its lines while they keep coming.
pub const PAYMENT_LOG_TICK: std::time::Duration = std::time::Duration::from_millis(5);

/// Formats one payment line (or answers a flush) on the payment log thread.
fn write_payment_line(msg: PaymentLog) {
    match msg {
        PaymentLog::Line(l) => tracing::info!(
            target: "pixgw::payments",
            account = l.account,
            operation = l.operation,
            status = l.status,
            transaction_id = %l.transaction_id,
            end_to_end_id = %l.end_to_end_id,
            value = %l.value,
            error_code = l.error_code,
            request_id = l.request_id.as_deref(),
            "payment {}", l.step
        ),
        PaymentLog::Flush(done) => {
            let _ = done.send(());
        }
    }
}

/// Payment lines dropped because their queue was full.
static DROPPED_PAYMENT_LINES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The payment log thread's queue, started at the first payment line.
fn payment_log() -> &'static std::sync::mpsc::SyncSender<PaymentLog> {
    static QUEUE: OnceLock<std::sync::mpsc::SyncSender<PaymentLog>> = OnceLock::new();
    QUEUE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<PaymentLog>(PAYMENT_LINES_QUEUED_MAX);
        let spawned = std::thread::Builder::new().name("pixgw-paylog".into()).spawn(move || {
            // Lines are taken a tick's worth at a time: while this thread sleeps, sending a
            // line wakes nobody, so a busy account does not pay a thread wake per line (the
            // profile of issue 25 counted them among a cash-out's costs). A line waits at most
            // a tick; an idle server sleeps in `recv`.
            while let Ok(first) = rx.recv() {
                let mut next = Some(first);
                while let Some(msg) = next.take() {
                    write_payment_line(msg);
                    next = rx.try_recv().ok();
                }
                std::thread::sleep(PAYMENT_LOG_TICK);
                while let Ok(msg) = rx.try_recv() {
                    write_payment_line(msg);
                }
            }
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the payment log thread; payment lines are dropped");
        }
        tx
    })
}

/// Logs a step of a payment's life (created, or a final status reached), with the request
/// that caused it when there is one.
///
/// The account actor serializes its account's payments, so it only hands the line over; a
/// thread of its own formats it (formatting a line costs more than the rest of a cash-out's
/// work in the actor). Called when the change is handed to the journal; a write that then
/// fails stops every write, and that is logged as an error of its own. Neither the
/// counterpart's name nor its document is logged.
pub fn log_payment(tx: &Transaction, request_id: Option<&std::sync::Arc<str>>) {
    if !tracing::enabled!(target: "pixgw::payments", tracing::Level::INFO) {
        return;
    }
    let line = PaymentLine {
        account: tx.account_id.get(),
        operation: tx.kind.as_str(),
        status: tx.status.as_str(),
        step: payment_step(tx),
        transaction_id: tx.transaction_id,
        end_to_end_id: tx.end_to_end_id.clone(),
        value: tx.value,
        error_code: tx.error_code.map(|c| c.as_str()),
        request_id: request_id.cloned(),
    };
    if payment_log().try_send(PaymentLog::Line(Box::new(line))).is_err() {
        DROPPED_PAYMENT_LINES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Waits (at most a second) until the payment lines sent so far are logged: at shutdown.
pub fn flush_payment_lines() {
    let (done, wait) = std::sync::mpsc::sync_channel(1);
    if payment_log().try_send(PaymentLog::Flush(done)).is_ok() {
        let _ = wait.recv_timeout(std::time::Duration::from_secs(1));
    }
}

/// Counts a payment that reached a final status.
pub fn count_payment(tx: &Transaction) {
    if !PAYMENT_FINAL_STATUSES.contains(&tx.status) {
        return;
    }
    let labels = [("operation", tx.kind.as_str()), ("status", tx.status.as_str())];
    metrics::counter!("pixgw_payments_total", &labels).increment(1);
    metrics::counter!("pixgw_payment_amount_cents_total", &labels).increment(tx.value.cents());
}

/// The step of a payment's life a change of status is, in the log's words.
fn payment_step(tx: &Transaction) -> &'static str {
    match (tx.kind, tx.status) {
        (TxKind::CashIn, TxStatus::Pending) => "charge created",
        (TxKind::CashIn, TxStatus::Confirmed) => "charge paid",
        (TxKind::CashIn, TxStatus::Error) => "charge ended unpaid",
        (TxKind::PixIn, _) => "received",
        (TxKind::RefundOut, _) => "refund received",
        (TxKind::OperatorCredit, _) => "operator credit",
        (TxKind::OperatorDebit, _) => "operator debit",
        (TxKind::RefundIn, TxStatus::Pending) => "refund accepted",
        (TxKind::RefundIn, TxStatus::Confirmed) => "refunded",
        (_, TxStatus::Pending) => "accepted",
        (_, TxStatus::Confirmed) => "settled",
        (_, TxStatus::Error) => "failed",
    }
}

/// Reads the process's own figures from /proc (Linux); absent elsewhere.
pub fn record_process_metrics() {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let rss_kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
        if let Some(kb) = rss_kb {
            metrics::gauge!("process_resident_memory_bytes").set(kb * 1024.0);
        }
    }
    let payments = DROPPED_PAYMENT_LINES.load(std::sync::atomic::Ordering::Relaxed);
    let lines = DROPPED_LINES.get().map_or(0, |d| d.dropped_lines() as u64);
    metrics::counter!("pixgw_log_lines_dropped_total").absolute(lines + payments);
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        metrics::gauge!("process_open_fds").set(fds.count() as f64);
    }
    // utime and stime are the 14th and 15th fields, in clock ticks (100 a second on Linux).
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        // Counting from the field after the name (the 3rd overall): utime is 14th overall.
        let seconds = (ticks(11) + ticks(12)) as f64 / CLOCK_TICKS_PER_SECOND;
        metrics::gauge!("process_cpu_seconds_total").set(seconds);
    }
}

/// Linux's USER_HZ, which /proc reports times in.
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::domain::ids::AccountId;
    use crate::domain::money::Money;

    #[test]
    fn a_line_budget_writes_its_lines_then_counts_the_rest_until_the_window_turns() {
        let mut budget = LineBudget::new(2, Duration::from_secs(60));
        let t0 = Instant::now();
        assert_eq!(budget.admit(t0), Admit::Write { suppressed: 0 });
        assert_eq!(budget.admit(t0 + Duration::from_secs(1)), Admit::Write { suppressed: 0 });
        for s in 2..5 {
            assert_eq!(budget.admit(t0 + Duration::from_secs(s)), Admit::Skip);
        }
        // One tick before the window turns, still skipped; at the turn, written with the count.
        assert_eq!(budget.admit(t0 + Duration::from_millis(59_999)), Admit::Skip);
        assert_eq!(budget.admit(t0 + Duration::from_secs(60)), Admit::Write { suppressed: 4 });
        assert_eq!(budget.admit(t0 + Duration::from_secs(61)), Admit::Write { suppressed: 0 });
        assert_eq!(budget.admit(t0 + Duration::from_secs(62)), Admit::Skip);
    }

    #[test]
    fn a_payment_step_names_what_happened_to_it() {
        let step = |kind, status| {
            let new = Transaction::new(
                1,
                uuid::Uuid::nil(),
                AccountId::new(1).unwrap(),
                kind,
                Money::ZERO,
                chrono::DateTime::UNIX_EPOCH,
            );
            payment_step(&Transaction { status, ..new })
        };
        for kind in [TxKind::CashOut, TxKind::QrCashOut, TxKind::DictPix] {
            assert_eq!(step(kind, TxStatus::Pending), "accepted");
            assert_eq!(step(kind, TxStatus::Confirmed), "settled");
            assert_eq!(step(kind, TxStatus::Error), "failed");
        }
        assert_eq!(step(TxKind::CashIn, TxStatus::Pending), "charge created");
        assert_eq!(step(TxKind::CashIn, TxStatus::Confirmed), "charge paid");
        assert_eq!(step(TxKind::CashIn, TxStatus::Error), "charge ended unpaid");
        assert_eq!(step(TxKind::PixIn, TxStatus::Confirmed), "received");
        assert_eq!(step(TxKind::RefundIn, TxStatus::Pending), "refund accepted");
        assert_eq!(step(TxKind::RefundIn, TxStatus::Confirmed), "refunded");
        assert_eq!(step(TxKind::RefundIn, TxStatus::Error), "failed");
        assert_eq!(step(TxKind::RefundOut, TxStatus::Confirmed), "refund received");
    }
}
