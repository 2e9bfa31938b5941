//! The homologation harness against `pixgw spi-sim`: `pixgw homologation dict-functional`
//! replays the DICT functional test (a short preload) against a node on the SPI rail, and
//! every step passes with its evidence in the report.

use std::process::Command;

use serde_json::Value;

use crate::helpers::*;
use crate::spi::Sim;

#[actix_rt::test]
async fn the_dict_functional_test_replayed_against_the_simulator_passes_every_step() {
    let sim = Sim::start(&[]);
    let app = spawn_with(Options {
        env: vec![
            ("PIXGW_CONFIG".into(), sim.config.display().to_string()),
            ("PIXGW_SPI_MED_POLL_MS".into(), "100".into()),
            ("PIXGW_SPI_CLAIMS_POLL_MS".into(), "100".into()),
            ("PIXGW_SPI_SYNC_EVERY_MS".into(), "1000".into()),
        ],
        ..Options::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("functional.json");
    let (config, server, token, control) =
        (sim.config.clone(), app.url(""), app.creds.admin_token.clone(), sim.control.clone());
    let report_path = report.clone();
    let out = actix_web::rt::task::spawn_blocking(move || {
        Command::new(bin())
            .args(["homologation", "dict-functional", "--config"])
            .arg(&config)
            .args(["--server", &server, "--sim-control", &control, "--preload-keys", "20", "--report"])
            .arg(&report_path)
            .env("PIXGW_ADMIN_TOKEN", token)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    let r: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let steps = r["steps"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = steps.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "preload",
            "key-types",
            "sync",
            "claim-answered",
            "claim-as-donor",
            "claim-as-claimer",
            "infraction",
            "refund-fraud",
            "refund-operational"
        ],
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for s in &steps {
        assert_eq!(s["passed"], true, "{s}");
    }
    assert!(out.status.success() && r["passed"] == true, "{text}");
    assert_eq!(steps[0]["evidence"]["keysRegistered"], 20);
    assert_eq!(steps[1]["evidence"]["registeredAndLookedUp"].as_array().map(Vec::len), Some(5));
    assert!(steps[3]["evidence"]["acknowledgedInSeconds"].as_f64().unwrap() < 60.0);
}
