//! `pixgw load --report FILE.html`: one self-contained HTML page of a run, for people to
//! look at. No script and nothing fetched: the charts are inline SVG drawn here, the style
//! is inline, so the file opens the same anywhere, offline, and can be attached to a ticket.
//!
//! It shows the run's summary, throughput and latency (p50, p99) second by second, the HDR
//! percentile plot of the latency as the client saw it and of the server's share, the
//! latency-against-rate curve when `--rates` was given, and the consistency checks.
//! Everything comes from the summary JSON the run prints with `--json`, so the report and
//! the JSON never disagree. Every text from the run is HTML-escaped.

use std::fmt::Write as _;

use serde_json::Value;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 280.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 44.0;
/// The percentile plot's x axis ends at this many nines (99.9999 %).
const NINES_MAX: f64 = 6.0;

/// Escapes text for HTML (element content and attribute values alike).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One line of a chart.
struct Series<'a> {
    name: &'a str,
    color: &'a str,
    points: Vec<(f64, f64)>,
}

/// How an axis maps values.
#[derive(Clone, Copy, PartialEq)]
enum Scale {
    Linear,
    /// Base 10; values at or below zero are drawn at the axis' lowest decade.
    Log,
}

fn number(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// An SVG line chart; `x_ticks` labels the x axis where given (else five even ticks);
/// `over_time`, for a chart of seconds, gives dashed vertical lines with a label (where
/// each rate step begins), and draws a series as one line per run of points at most
/// [`GAP_MAX`] apart, so a stretch with no points shows as a gap, not as a line across it.
#[allow(clippy::too_many_arguments)]
fn chart(
    id: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x_ticks: Option<&[(f64, &str)]>,
    y_scale: Scale,
    over_time: Option<&[(f64, String)]>,
) -> String {
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.points.iter().copied()).collect();
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart" data-chart="{id}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{t}">"#,
        t = escape(title)
    );
    let _ = write!(svg, r#"<text x="{LEFT}" y="20" class="title">{}</text>"#, escape(title));
    if all.is_empty() {
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" class="none">no data</text></svg>"#,
            WIDTH / 2.0 - 30.0,
            HEIGHT / 2.0
        );
        return svg;
    }
    let (mut x0, mut x1) =
        all.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
    // The axis spans the ticks and the step marks too, so none falls outside the plot.
    let marks =
        x_ticks.into_iter().flatten().map(|t| t.0).chain(over_time.into_iter().flatten().map(|m| m.0));
    for x in marks {
        (x0, x1) = (x0.min(x), x1.max(x));
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let ys = all.iter().map(|p| p.1);
    let (y0, y1) = match y_scale {
        Scale::Linear => (0.0, ys.fold(0.0, f64::max).max(1e-9) * 1.1),
        Scale::Log => {
            let positive: Vec<f64> = all.iter().map(|p| p.1).filter(|v| *v > 0.0).collect();
            let lo = positive.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = positive.iter().copied().fold(0.0, f64::max);
            if positive.is_empty() {
                (0.0, 1.0)
            } else {
                (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0))
            }
        }
    };
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * w;
    let py = |y: f64| {
        let v = match y_scale {
            Scale::Linear => y,
            Scale::Log => {
                if y > 0.0 {
                    y.log10()
                } else {
                    y0
                }
            }
        };
        TOP + h - (v - y0) / (y1 - y0) * h
    };
    let _ = write!(svg, r#"<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" class="plot"/>"#);
    // y ticks: five even ones, or each decade.
    let y_ticks: Vec<(f64, String)> = match y_scale {
        Scale::Linear => {
            (0..=4).map(|i| y0 + (y1 - y0) * f64::from(i) / 4.0).map(|v| (py(v), number(v))).collect()
        }
        Scale::Log => {
            let mut t = Vec::new();
            let mut d = y0;
            while d <= y1 + 1e-9 {
                t.push((TOP + h - (d - y0) / (y1 - y0) * h, number(10f64.powf(d))));
                d += 1.0;
            }
            t
        }
    };
    for (y, label) in &y_ticks {
        let _ = write!(
            svg,
            r#"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
            LEFT + w,
            LEFT - 6.0,
            y + 4.0,
            escape(label)
        );
    }
    let x_marks: Vec<(f64, String)> = match x_ticks {
        Some(t) => t.iter().map(|(x, l)| (*x, (*l).to_owned())).collect(),
        None => (0..=4).map(|i| x0 + (x1 - x0) * f64::from(i) / 4.0).map(|v| (v, number(v))).collect(),
    };
    for (x, label) in &x_marks {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
            px(*x),
            TOP + h + 16.0,
            escape(label)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text><text x="14" y="{:.1}" class="axis" transform="rotate(-90 14 {:.1})" text-anchor="middle">{}</text>"#,
        LEFT + w / 2.0,
        HEIGHT - 6.0,
        escape(x_label),
        TOP + h / 2.0,
        TOP + h / 2.0,
        escape(y_label)
    );
    for (seconds, label) in over_time.unwrap_or_default() {
        // The line and its label at the same place on the chart, in pixels.
        let x = px(*seconds);
        let _ = write!(
            svg,
            r##"<line class="mark" x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#8a8fa3" stroke-dasharray="4 3"/><text class="tick mark-label" x="{:.1}" y="{:.1}">{}</text>"##,
            TOP + h,
            x + 3.0,
            TOP + 12.0,
            escape(label),
        );
    }
    for (i, s) in series.iter().enumerate() {
        let mut runs: Vec<Vec<String>> = Vec::new();
        let mut last: Option<f64> = None;
        for (x, y) in &s.points {
            if last.is_none_or(|l| over_time.is_some() && x - l > GAP_MAX) {
                runs.push(Vec::new());
            }
            if let Some(run) = runs.last_mut() {
                run.push(format!("{:.1},{:.1}", px(*x), py(*y)));
            }
            last = Some(*x);
        }
        for run in runs {
            let _ = write!(
                svg,
                r#"<polyline class="series" data-series="{}" points="{}" fill="none" stroke="{}" stroke-width="2"/>"#,
                escape(s.name),
                run.join(" "),
                s.color
            );
        }
        for (x, y) in &s.points {
            let _ =
                write!(svg, r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{}"/>"#, px(*x), py(*y), s.color);
        }
        let ly = TOP + 14.0 + 16.0 * i as f64;
        let _ = write!(
            svg,
            r#"<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{:.1}" class="legend">{}</text>"#,
            LEFT + w - 140.0,
            ly - 9.0,
            s.color,
            LEFT + w - 124.0,
            ly,
            escape(s.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// The columns of a row of the latency curve, as the text table and the report print them.
pub const CURVE_COLUMNS: [&str; 10] = [
    "rate/s",
    "achieved/s",
    "p50",
    "p99",
    "p99.9",
    "max",
    "errors",
    "client late p99",
    "server clock p99",
    "server <= 2 ms",
];

/// A row of the latency curve formatted for [`CURVE_COLUMNS`].
pub fn curve_cells(r: &Value) -> [String; 10] {
    [
        format!("{:.0}", f(&r["rate"])),
        format!("{:.0}", f(&r["achievedPerSecond"])),
        format!("{:.2}", f(&r["serverMs"]["p50"])),
        format!("{:.2}", f(&r["serverMs"]["p99"])),
        format!("{:.2}", f(&r["serverMs"]["p999"])),
        format!("{:.2}", f(&r["serverMs"]["max"])),
        r["errors"].as_u64().unwrap_or(0).to_string(),
        format!("{:.2}", f(&r["lateMs"]["p99"])),
        super::server_clock::at_most_cell(&r["serverClock"], "p99AtMostMs"),
        super::server_clock::share_cell(&r["serverClock"], "2"),
    ]
}

/// The points `(x, key)` of the timeline.
fn timeline(summary: &Value, key: &str) -> Vec<(f64, f64)> {
    summary["timeline"].as_array().into_iter().flatten().map(|p| (f(&p["t"]), f(&p[key]))).collect()
}

/// The points `(x, key)` of the timeline's seconds that answered something: a second with
/// no answer has no latency, and drawn at the chart's floor it would look as if latency fell.
fn answered_timeline(summary: &Value, key: &str) -> Vec<(f64, f64)> {
    summary["timeline"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| f(&p["requests"]) > 0.0)
        .map(|p| (f(&p["t"]), f(&p[key])))
        .collect()
}

/// Where each step of the latency curve begins on the timeline, labelled by its rate.
fn step_marks(summary: &Value) -> Vec<(f64, String)> {
    let rows = summary["curve"]["rates"].as_array().into_iter().flatten();
    let search = summary["curve"]["slo"]["search"].as_array().into_iter().flatten();
    rows.chain(search)
        .filter_map(|r| Some((r["startSeconds"].as_f64()?, format!("{:.0}/s", f(&r["rate"])))))
        .collect()
}

/// Timeline points further apart than this (s) are not joined by a line.
const GAP_MAX: f64 = 1.5;

/// `[q, ms]` pairs as points of the percentile plot: x is the number of nines of q.
fn percentile_series(points: &Value) -> Vec<(f64, f64)> {
    points
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let q = f(&p[0]);
            let nines = if q >= 1.0 { NINES_MAX } else { (-(1.0 - q).log10()).min(NINES_MAX) };
            (nines, f(&p[1]))
        })
        .collect()
}

/// The report of a run, from its summary (`pixgw load --json`'s).
pub fn render(summary: &Value) -> String {
    let mut html = String::new();
    html.push_str(
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>pixgw load report</title><style>
body{font-family:system-ui,sans-serif;margin:24px;color:#1d2430;max-width:780px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccd;padding:3px 8px;text-align:right}
th{background:#eef}table.checks th{text-align:left}td.text{text-align:left}.ok{color:#176b2c;font-weight:600}.fail{color:#b3261e;font-weight:600}
svg.chart{display:block;margin:8px 0}svg .plot{fill:#fafbff;stroke:#ccd}svg .grid{stroke:#e4e6ef}
svg .title{font-size:14px;font-weight:600}svg .tick,svg .legend{font-size:11px}svg .axis{font-size:12px}
svg .none{font-size:13px;fill:#888}
</style></head><body>"#,
    );
    let checks_ok = summary["consistency"]["ok"].as_bool() == Some(true);
    let mode = match summary["mode"].as_str().unwrap_or("") {
        "curve" => "a latency curve".to_owned(),
        other => format!("{other} loop"),
    };
    let _ = write!(
        html,
        r#"<h1>pixgw load: {} ({})</h1><p>{} requests in {:.1} s: {:.0} requests/s. Consistency: <span class="{}">{}</span>.</p>"#,
        escape(summary["scenario"].as_str().unwrap_or("")),
        escape(&mode),
        summary["requests"].as_u64().unwrap_or(0),
        f(&summary["seconds"]),
        f(&summary["requestsPerSecond"]),
        if checks_ok { "ok" } else { "fail" },
        if checks_ok { "every check passed" } else { "a check FAILED" },
    );
    if let Some(warm) = summary["warmupRequests"].as_u64().filter(|n| *n > 0) {
        let _ = write!(
            html,
            "<p>Before them, a warm-up of {warm} requests, not timed; the consistency checks count them too.</p>"
        );
    }
    html.push_str(
        r#"<table><tr><th></th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>"#,
    );
    for (name, key) in [
        ("latency (ms, from the intended send)", "latencyMs"),
        ("server's share (ms, from the actual send)", "serviceMs"),
    ] {
        let q = &summary[key];
        let _ = write!(
            html,
            r#"<tr><td class="text">{name}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>"#,
            f(&q["p50"]),
            f(&q["p90"]),
            f(&q["p99"]),
            f(&q["p999"]),
            f(&q["max"])
        );
    }
    html.push_str("</table>");

    html.push_str("<h2>Over time</h2>");
    html.push_str(&chart(
        "throughput",
        "Requests answered per second",
        "seconds into the run",
        "requests/s",
        &[Series { name: "requests/s", color: "#2f5fb3", points: timeline(summary, "requests") }],
        None,
        Scale::Linear,
        Some(&step_marks(summary)),
    ));
    html.push_str(&chart(
        "latency",
        "Latency each second (from the intended send)",
        "seconds into the run",
        "ms",
        &[
            Series { name: "p50", color: "#2f8f4e", points: answered_timeline(summary, "p50") },
            Series { name: "p99", color: "#c2410c", points: answered_timeline(summary, "p99") },
        ],
        None,
        Scale::Log,
        Some(&step_marks(summary)),
    ));
    html.push_str("<p>Seconds in which nothing was answered have no latency and are left out (a gap in the lines); the dashed lines mark where each rate step began.</p>");

    html.push_str("<h2>Percentiles</h2>");
    let nines: Vec<(f64, &str)> = vec![
        (0.0, "0%"),
        (1.0, "90%"),
        (2.0, "99%"),
        (3.0, "99.9%"),
        (4.0, "99.99%"),
        (5.0, "99.999%"),
        (6.0, "max"),
    ];
    html.push_str(&chart(
        "percentiles",
        "Latency by percentile (HDR)",
        "percentile",
        "ms",
        &[
            Series {
                name: "latency",
                color: "#2f5fb3",
                points: percentile_series(&summary["percentiles"]["latency"]),
            },
            Series {
                name: "server's share",
                color: "#c2410c",
                points: percentile_series(&summary["percentiles"]["server"]),
            },
        ],
        Some(&nines),
        Scale::Log,
        None,
    ));

    if let Some(rows) = summary["curve"]["rates"].as_array() {
        let mut all: Vec<&Value> = rows.iter().collect();
        all.extend(summary["curve"]["slo"]["search"].as_array().into_iter().flatten());
        all.sort_by(|a, b| f(&a["rate"]).total_cmp(&f(&b["rate"])));
        let pts = |key: &str| all.iter().map(|r| (f(&r["rate"]), f(&r["serverMs"][key]))).collect::<Vec<_>>();
        html.push_str("<h2>Latency against rate</h2>");
        html.push_str(&chart(
            "curve",
            "The server's share of latency by offered rate",
            "requests/s offered",
            "ms",
            &[
                Series { name: "p50", color: "#2f8f4e", points: pts("p50") },
                Series { name: "p99", color: "#c2410c", points: pts("p99") },
                Series { name: "p99.9", color: "#7c3aed", points: pts("p999") },
            ],
            None,
            Scale::Log,
            None,
        ));
        html.push_str("<table><tr>");
        for c in CURVE_COLUMNS {
            let _ = write!(html, "<th>{c}</th>");
        }
        html.push_str("</tr>");
        for r in &all {
            html.push_str("<tr>");
            for cell in curve_cells(r) {
                let _ = write!(html, "<td>{}</td>", escape(&cell));
            }
            html.push_str("</tr>");
        }
        html.push_str("</table>");
        html.push_str("<p>The server clock is the server's own histogram, from taking a request to the response; the share runs from the tool's send to its reading the answer.</p>");
        for r in &all {
            let share = f(&r["serverMs"]["p99"]);
            if let Some(note) = super::server_clock::queued_note(f(&r["rate"]), share, &r["serverClock"]) {
                let _ = write!(html, "<p>{}</p>", escape(&note));
            }
        }
        if let Some(bound) = summary["curve"]["slo"]["boundMs"].as_f64() {
            let found = summary["curve"]["slo"]["highestRate"].as_f64();
            let _ = write!(
                html,
                "<p>Highest rate with the server's p99 within {bound} ms and no error: <b>{}</b>.</p>",
                found.map_or("none of those tried".to_owned(), |r| format!("{r:.0}/s"))
            );
        }
    }

    html.push_str(r#"<h2>Consistency checks</h2><table class="checks"><tr><th>check</th><th>result</th><th>detail</th></tr>"#);
    for c in summary["consistency"]["checks"].as_array().into_iter().flatten() {
        let ok = c["ok"].as_bool() == Some(true);
        let _ = write!(
            html,
            r#"<tr><td class="text">{}</td><td class="{}">{}</td><td class="text">{}</td></tr>"#,
            escape(c["check"].as_str().unwrap_or("")),
            if ok { "ok" } else { "fail" },
            if ok { "ok" } else { "FAIL" },
            escape(c["detail"].as_str().unwrap_or(""))
        );
    }
    html.push_str("</table>");
    let errors = summary["errors"].as_array().cloned().unwrap_or_default();
    if !errors.is_empty() {
        html.push_str(r#"<h2>Errors</h2><table><tr><th>status</th><th>code</th><th>count</th></tr>"#);
        for e in &errors {
            let _ = write!(
                html,
                r#"<tr><td>{}</td><td class="text">{}</td><td>{}</td></tr>"#,
                e["status"],
                escape(e["code"].as_str().unwrap_or("")),
                e["count"]
            );
        }
        html.push_str("</table>");
    }
    html.push_str("</body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary() -> Value {
        json!({
            "scenario": "CashOut", "mode": "curve", "requests": 3000, "seconds": 3.0, "requestsPerSecond": 1000.0,
            "latencyMs": {"p50": 0.5, "p90": 0.9, "p99": 3.0, "p999": 8.0, "max": 12.0},
            "serviceMs": {"p50": 0.4, "p90": 0.8, "p99": 2.5, "p999": 7.0, "max": 11.0},
            "timeline": [{"t": 1.0, "requests": 1000, "p50": 0.5, "p99": 3.0}, {"t": 2.0, "requests": 1000, "p50": 0.6, "p99": 2.0}],
            "percentiles": {"latency": [[0.0, 0.1], [0.5, 0.5], [0.99, 3.0], [1.0, 12.0]], "server": [[0.5, 0.4], [1.0, 11.0]]},
            "curve": {"rates": [
                {"rate": 1000.0, "achievedPerSecond": 1000.0, "requests": 1000, "errors": 0,
                 "serverMs": {"p50": 0.4, "p99": 2.0, "p999": 5.0, "max": 6.0}, "lateMs": {"p99": 1.0, "max": 2.0}},
                {"rate": 3000.0, "achievedPerSecond": 2990.0, "requests": 2990, "errors": 2,
                 "serverMs": {"p50": 0.9, "p99": 9.0, "p999": 30.0, "max": 40.0}, "lateMs": {"p99": 3.0, "max": 4.0}}],
                "slo": {"boundMs": 5.0, "highestRate": 1000.0, "search": []}},
            "errors": [{"status": 503, "code": "SERVICE_UNAVAILABLE", "count": 2}],
            "consistency": {"ok": false, "checks": [
                {"check": "balance", "ok": true, "detail": "available 1.00 after"},
                {"check": "no externalId accepted twice", "ok": false, "detail": "2 accepted twice: [\"<script>x</script>\"]"}]},
        })
    }

    #[test]
    fn the_report_has_every_chart_and_the_checks_and_fetches_nothing() {
        let html = render(&summary());
        for id in ["throughput", "latency", "percentiles", "curve"] {
            assert!(html.contains(&format!(r#"data-chart="{id}""#)), "{id}");
        }
        assert_eq!(html.matches("<polyline").count(), 1 + 2 + 2 + 3, "one line per series");
        assert!(html.contains("Highest rate with the server's p99 within 5 ms and no error: <b>1000/s</b>"));
        assert!(html.contains(r#"<td class="fail">FAIL</td>"#) && html.contains("a check FAILED"));
        // Self-contained: nothing to fetch, nothing to run.
        for outside in ["<script", "src=", "href=", "http://", "https://", "@import", "url("] {
            assert!(!html.contains(outside), "{outside}");
        }
        // Text from the run is escaped.
        assert!(html.contains("&lt;script&gt;x&lt;/script&gt;"));
    }

    #[test]
    fn a_run_without_a_curve_or_a_timeline_still_renders() {
        let mut s = summary();
        s["curve"] = Value::Null;
        s["timeline"] = json!([]);
        let html = render(&s);
        assert!(!html.contains(r#"data-chart="curve""#));
        assert!(html.contains("no data"), "an empty chart says so");
        assert!(html.contains(r#"data-chart="percentiles""#));
    }

    #[test]
    fn a_second_without_answers_is_a_gap_steps_are_marked_and_queueing_is_explained() {
        let mut s = summary();
        s["timeline"] = json!([
            {"t": 1.0, "requests": 1000, "p50": 0.5, "p99": 3.0},
            {"t": 2.0, "requests": 0, "p50": 0.0, "p99": 0.0},
            {"t": 3.0, "requests": 900, "p50": 4.0, "p99": 900.0},
        ]);
        s["curve"]["rates"][0]["startSeconds"] = json!(0.0);
        s["curve"]["rates"][1]["startSeconds"] = json!(2.0);
        s["curve"]["rates"][1]["serverMs"]["p99"] = json!(11000.0);
        s["curve"]["rates"][1]["serverClock"] = json!({"requests": 2990, "p99AtMostMs": 50.0, "within": {}});
        let html = render(&s);
        let latency = &html[html.find(r#"data-chart="latency""#).unwrap()..];
        let latency = &latency[..latency.find("</svg>").unwrap()];
        // Two runs per series around the silent second, and no point at its floor.
        assert_eq!(latency.matches(r#"data-series="p99""#).count(), 2, "{latency}");
        assert_eq!(latency.matches("<circle").count(), 4, "only the answered seconds");
        // A dashed line where each step begins, on both charts over time.
        assert_eq!(html.matches(r#"class="mark""#).count(), 4);
        assert!(latency.contains(">3000/s<"), "{latency}");
        // Each label stands beside its line, in the chart's pixels (not at the step's second).
        let attr = |tag: &str, name: &str| -> f64 {
            let at = tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            tag[at..at + tag[at..].find('"').unwrap()].parse().unwrap()
        };
        let mut marks = 0;
        for piece in html.split(r#"<line class="mark""#).skip(1) {
            let label = &piece[piece.find("<text").unwrap()..];
            let (line_x, label_x) = (attr(piece, "x1"), attr(label, "x"));
            assert!((label_x - line_x - 3.0).abs() < 0.11, "line at {line_x}, label at {label_x}");
            assert!(line_x >= LEFT, "inside the plot: {line_x}");
            marks += 1;
        }
        assert_eq!(marks, 4);
        assert!(
            html.contains("the server was saturated at that rate")
                || html.contains("so the server was saturated"),
            "{html}"
        );
    }

    #[test]
    fn percentiles_are_placed_by_their_nines() {
        let pts = percentile_series(&json!([[0.9, 1.0], [0.999, 2.0], [1.0, 3.0]]));
        assert!((pts[0].0 - 1.0).abs() < 1e-9 && (pts[1].0 - 3.0).abs() < 1e-9);
        assert_eq!(pts[2].0, NINES_MAX, "the max at the end of the axis");
    }
}
