//! Logs (tracing, human or JSON lines) and the Prometheus metrics recorder.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

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
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full("http_request_duration_seconds".into()),
                LATENCY_BUCKETS_SECONDS,
            )
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("pixgw_commit_seconds".into()),
                    LATENCY_BUCKETS_SECONDS,
                )
            })
            .map(|b| b.build_recorder())
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        let handle = recorder.handle();
        // Fails only if another recorder is installed, in which case ours renders nothing
        // new; the server still runs.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}
