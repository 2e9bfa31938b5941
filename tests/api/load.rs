//! `pixgw load` against a real server: a scenario runs, the summary is JSON, and the
//! consistency check passes (a duplicate storm accepts each externalId once).

use serde_json::Value;

use crate::helpers::{bin, TestApp};

fn load(app: &TestApp, args: &[&str]) -> (bool, Value) {
    let dir = app.data_dir();
    let out = std::process::Command::new(bin())
        .args(["load", "--url", &app.base, "--data-dir"])
        .arg(&dir)
        .args(["--warmup", "0s", "--json", "--fund", "100"])
        .args(args)
        .output()
        .unwrap();
    let summary = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!("not JSON: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    (out.status.success(), summary)
}

#[actix_rt::test]
async fn a_duplicate_storm_accepts_each_external_id_once_and_the_check_passes() {
    let app = TestApp::spawn_fast().await;
    let (ok, s) = load(
        &app,
        &["--scenario", "duplicate-storm", "--requests", "160", "--connections", "16", "--storm-group", "8"],
    );
    assert!(ok, "{s:#}");
    assert_eq!(s["requests"], 160);
    assert_eq!(s["consistency"]["ok"], true, "{s:#}");
    let accepted = s["byStatus"]["201"].as_u64().unwrap();
    assert_eq!(accepted, s["consistency"]["acceptedCashOuts"].as_u64().unwrap());
    assert_eq!(accepted, 20, "one of each group of 8: {s:#}");
    assert_eq!(s["errors"][0]["code"], "PIX_DUPLICATE_EXTERNAL_ID");
    for q in ["p50", "p90", "p99", "p999", "max"] {
        assert!(s["latencyMs"][q].as_f64().unwrap() > 0.0, "{q}");
    }
}

#[actix_rt::test]
async fn an_open_loop_mixed_run_keeps_its_rate_and_its_books() {
    let app = TestApp::spawn_fast().await;
    let (ok, s) = load(&app, &["--scenario", "mixed", "--rate", "200", "--requests", "100"]);
    assert!(ok, "{s:#}");
    assert_eq!((s["mode"].as_str(), s["requests"].as_u64()), (Some("open"), Some(100)));
    assert!(s["errors"].as_array().unwrap().is_empty(), "{s:#}");
    // 100 requests due every 5 ms take about half a second, not less.
    assert!(s["seconds"].as_f64().unwrap() >= 0.49, "{s:#}");
    assert_eq!(s["consistency"]["ok"], true, "{s:#}");
}
