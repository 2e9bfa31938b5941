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

/// Installs the log subscriber; `RUST_LOG` overrides the default `info` filter.
pub fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal: in a file or a log collector they are noise.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colour);
    // A second init (tests start several servers in one process) is harmless.
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
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
            ("pixgw_checkpoint_seconds", CHECKPOINT_BUCKETS_SECONDS),
            ("pixgw_commit_backpressure_seconds", CHECKPOINT_BUCKETS_SECONDS),
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
    describe_histogram!("pixgw_checkpoint_seconds", Unit::Seconds, "Time to write one checkpoint into sled");
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
    metrics::gauge!("pixgw_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
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
