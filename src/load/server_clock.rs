//! The server's own clock on a step of the latency curve: its request-duration histogram
//! for one route, read from `/metrics` before and after the step.
//!
//! The load tool's "server's share" runs from the moment the tool sent a request to the
//! moment it read the answer, so it also holds the tool's own waits for a core (on one
//! machine they share two). The server's histogram (`http_request_duration_seconds`) runs
//! from its middleware taking the request to the response being built: the server alone,
//! without the socket queues. Beside each other the two say whose the tail is.
//!
//! The histogram has fixed buckets, so a percentile is known only as "at most this edge",
//! and the share of requests within an edge is exact. Pure: it takes the scraped text.

use serde_json::{json, Value};

/// The metric whose buckets are read.
pub const METRIC: &str = "http_request_duration_seconds";
/// The edges (ms) whose exact shares the row gives.
pub const WITHIN_MS: [f64; 4] = [1.0, 2.0, 5.0, 10.0];

/// Cumulative bucket counts of one route: `(upper edge in seconds, requests at or under
/// it)`, in order of edge, `+Inf` last.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Buckets(Vec<(f64, u64)>);

impl Buckets {
    /// The buckets of `route` in a Prometheus text exposition (empty if it has none yet).
    pub fn parse(text: &str, route: &str) -> Buckets {
        let head = format!("{METRIC}_bucket{{");
        let label = format!("route=\"{route}\"");
        let mut out: Vec<(f64, u64)> = text
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix(&head)?;
                let (labels, value) = rest.split_once("} ")?;
                if !labels.split(',').any(|l| l == label) {
                    return None;
                }
                let le = labels.split(',').find_map(|l| l.strip_prefix("le=\""))?.trim_end_matches('"');
                let edge = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
                Some((edge, value.trim().parse::<f64>().ok()? as u64))
            })
            .collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        Buckets(out)
    }

    /// What was recorded between `earlier` and this (a bucket missing before counts 0).
    pub fn since(&self, earlier: &Buckets) -> Buckets {
        Buckets(
            self.0
                .iter()
                .map(|&(edge, n)| {
                    let before = earlier.0.iter().find(|(e, _)| *e == edge).map_or(0, |(_, n)| *n);
                    (edge, n.saturating_sub(before))
                })
                .collect(),
        )
    }

    /// Requests counted (the `+Inf` bucket's count; none without it).
    pub fn count(&self) -> u64 {
        self.0.iter().find(|(edge, _)| edge.is_infinite()).map_or(0, |(_, n)| *n)
    }

    /// The smallest edge (ms) that at least `q` of the requests are within; infinite past
    /// the last finite edge, `None` with no request.
    pub fn quantile_at_most_ms(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let needed = (q * total as f64).ceil() as u64;
        self.0.iter().find(|(_, n)| *n >= needed).map(|(edge, _)| edge * 1000.0)
    }

    /// The share of requests within `ms` (exact when `ms` is an edge; else the edge below).
    pub fn share_within_ms(&self, ms: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let under = self.0.iter().filter(|(edge, _)| edge * 1000.0 <= ms + 1e-9).map(|(_, n)| *n).max();
        Some(under.unwrap_or(0) as f64 / total as f64)
    }

    /// The step's figures for the curve's row: `{requests, p50AtMostMs, p99AtMostMs,
    /// p999AtMostMs, within: {"1": share, ...}}` (an infinite bound is `null`).
    pub fn row(&self) -> Value {
        let at_most = |q: f64| self.quantile_at_most_ms(q).filter(|v| v.is_finite());
        let within: serde_json::Map<String, Value> =
            WITHIN_MS.iter().map(|ms| (format!("{ms}"), json!(self.share_within_ms(*ms)))).collect();
        json!({
            "requests": self.count(),
            "p50AtMostMs": at_most(0.5),
            "p99AtMostMs": at_most(0.99),
            "p999AtMostMs": at_most(0.999),
            "within": within,
        })
    }
}

/// A bound of [`Buckets::row`] for people: "<= 2", "> 10000" past the last edge, "-" unknown.
pub fn at_most_cell(row: &Value, key: &str) -> String {
    match (row.get("requests").and_then(Value::as_u64), row[key].as_f64()) {
        (Some(n), Some(ms)) if n > 0 => format!("<= {ms}"),
        (Some(n), None) if n > 0 => format!("> {}", LAST_EDGE_MS),
        _ => "-".to_owned(),
    }
}

/// A share of [`Buckets::row`] for people: "99.31 %", "-" unknown.
pub fn share_cell(row: &Value, ms: &str) -> String {
    row["within"][ms].as_f64().map_or_else(|| "-".to_owned(), |s| format!("{:.2} %", s * 100.0))
}

/// The line the summary prints for a row of [`Buckets::row`].
pub fn describe(row: &Value) -> String {
    let shares: Vec<String> =
        WITHIN_MS.iter().map(|ms| format!("{ms} ms {}", share_cell(row, &format!("{ms}")))).collect();
    format!(
        "p50 {}  p99 {}  p99.9 {} ms; within {}",
        at_most_cell(row, "p50AtMostMs"),
        at_most_cell(row, "p99AtMostMs"),
        at_most_cell(row, "p999AtMostMs"),
        shares.join(", ")
    )
}

/// How many times the server's own p99 bound the share from the send must exceed before a
/// row is said to have waited before the server took its requests.
pub const QUEUED_RATIO_MIN: f64 = 10.0;

/// Why a row's two figures differ, when they do by [`QUEUED_RATIO_MIN`] or more: the
/// server's own clock runs from its middleware taking a request to the response being built,
/// the share from the tool's send to its reading the answer, so what lies between is time
/// before the server took the request (the socket's queue, and the cores the tool shares
/// with it). `None` when they agree, or when the server's clock is unknown.
pub fn queued_note(rate: f64, share_p99_ms: f64, clock: &Value) -> Option<String> {
    let bound = clock["p99AtMostMs"].as_f64()?;
    if clock["requests"].as_u64().unwrap_or(0) == 0 || share_p99_ms < bound * QUEUED_RATIO_MIN {
        return None;
    }
    Some(format!(
        "at {rate:.0}/s the server's own clock kept p99 within {bound} ms while the share from the send \
         reached {share_p99_ms:.0} ms: the difference waited before the server took the requests (its \
         socket queue, and cores shared with this tool), so the server was saturated at that rate"
    ))
}

/// The server's last finite bucket edge (ms): a bound past it reads "more than this".
const LAST_EDGE_MS: f64 = 10_000.0;

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "\
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{route=\"/api/pix/cash-out\",le=\"0.001\"} 10
http_request_duration_seconds_bucket{route=\"/api/pix/cash-out\",le=\"0.002\"} 10
http_request_duration_seconds_bucket{route=\"/api/pix/cash-out\",le=\"0.005\"} 10
http_request_duration_seconds_bucket{route=\"/api/pix/cash-out\",le=\"+Inf\"} 10
http_request_duration_seconds_bucket{route=\"/api/balance\",le=\"0.001\"} 7
http_request_duration_seconds_bucket{route=\"/api/balance\",le=\"+Inf\"} 7
";
    const AFTER: &str = "\
http_request_duration_seconds_bucket{route=\"/api/balance\",le=\"0.001\"} 9
http_request_duration_seconds_bucket{route=\"/api/pix/cash-out\",le=\"+Inf\"} 1010
http_request_duration_seconds_bucket{route=\"/api/pix/cash-out\",le=\"0.001\"} 910
http_request_duration_seconds_bucket{route=\"/api/pix/cash-out\",le=\"0.002\"} 1000
http_request_duration_seconds_bucket{route=\"/api/pix/cash-out\",le=\"0.005\"} 1009
http_request_duration_seconds_count{route=\"/api/pix/cash-out\"} 1010
";

    #[test]
    fn a_step_reads_only_its_route_and_only_what_it_added() {
        let step =
            Buckets::parse(AFTER, "/api/pix/cash-out").since(&Buckets::parse(BEFORE, "/api/pix/cash-out"));
        assert_eq!(step.count(), 1000);
        assert_eq!(step.share_within_ms(1.0), Some(0.9));
        assert_eq!(step.share_within_ms(2.0), Some(0.99));
        assert_eq!(step.share_within_ms(5.0), Some(0.999));
        // 3 ms is no edge: the share is the one within the edge below.
        assert_eq!(step.share_within_ms(3.0), Some(0.99));
        assert_eq!(step.share_within_ms(0.5), Some(0.0));
    }

    #[test]
    fn percentiles_are_the_smallest_edge_that_holds_them() {
        let step =
            Buckets::parse(AFTER, "/api/pix/cash-out").since(&Buckets::parse(BEFORE, "/api/pix/cash-out"));
        assert_eq!(step.quantile_at_most_ms(0.5), Some(1.0));
        assert_eq!(step.quantile_at_most_ms(0.9), Some(1.0));
        assert_eq!(step.quantile_at_most_ms(0.99), Some(2.0));
        assert_eq!(step.quantile_at_most_ms(0.999), Some(5.0));
        // The last request is past every finite edge.
        assert_eq!(step.quantile_at_most_ms(1.0), Some(f64::INFINITY));
        let row = step.row();
        assert_eq!(row["p99AtMostMs"], json!(2.0));
        assert_eq!(row["within"]["2"], json!(0.99));
        assert!(row["within"].get("10").is_some());
        assert_eq!(at_most_cell(&row, "p99AtMostMs"), "<= 2");
        assert_eq!(share_cell(&row, "2"), "99.00 %");
        assert_eq!(
            describe(&row),
            "p50 <= 1  p99 <= 2  p99.9 <= 5 ms; within 1 ms 90.00 %, 2 ms 99.00 %, 5 ms 99.90 %, 10 ms 99.90 %"
        );
    }

    #[test]
    fn nothing_recorded_says_nothing() {
        let none = Buckets::parse("", "/api/pix/cash-out");
        assert_eq!(none.count(), 0);
        assert_eq!(none.quantile_at_most_ms(0.99), None);
        assert_eq!(none.share_within_ms(2.0), None);
        // A route first seen after the step started counts from zero.
        let step = Buckets::parse(AFTER, "/api/pix/cash-out").since(&none);
        assert_eq!(step.count(), 1010);
        assert_eq!(Buckets::parse(AFTER, "/api/balance").count(), 0, "no +Inf line: nothing counted");
        assert_eq!(describe(&none.row()), "p50 -  p99 -  p99.9 - ms; within 1 ms -, 2 ms -, 5 ms -, 10 ms -");
    }

    #[test]
    fn a_share_far_above_the_servers_own_clock_is_explained_as_queueing() {
        let clock = json!({"requests": 100, "p99AtMostMs": 50.0});
        let note = queued_note(6000.0, 11_000.0, &clock).unwrap();
        assert!(
            note.contains("6000/s") && note.contains("within 50 ms") && note.contains("11000 ms"),
            "{note}"
        );
        assert!(note.contains("saturated"), "{note}");
        assert_eq!(queued_note(1000.0, 499.0, &clock), None, "under ten times: nothing to explain");
        assert!(queued_note(1000.0, 500.0, &clock).is_some(), "ten times: said");
        assert_eq!(queued_note(1000.0, 9_999.0, &json!({"requests": 0, "p99AtMostMs": 1.0})), None);
        assert_eq!(queued_note(1000.0, 9_999.0, &json!({"requests": 10, "p99AtMostMs": null})), None);
    }
}
