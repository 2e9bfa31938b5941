//! The server's life: restart keeps everything, a second server on the same data dir is
//! refused, SIGTERM stops it cleanly, the test clock survives a restart.

use std::process::Command;

use serde_json::json;

use crate::helpers::{bin, read_credentials, serve_to_completion, spawn_app, Options, TestApp};

#[actix_rt::test]
async fn a_restart_keeps_accounts_certificates_credentials_and_the_signing_key() {
    let mut app = spawn_app().await;
    let token = app.demo_token().await;
    let (id, client_id, secret, pem) = app.new_account("Durable").await;
    app.restart(&Options::default());
    // Credentials file untouched, same Demo account.
    let again = read_credentials(&app.data_dir());
    assert_eq!(again.client_id, app.creds.client_id);
    assert_eq!(again.client_secret, app.creds.client_secret);
    // A token issued before the restart still verifies (same key).
    assert_eq!(app.get_with("/api/account", &token).await.0, 200);
    let (s, body) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(s, 201, "{body}");
    let (s, view) = app.admin("GET", &format!("/admin/accounts/{id}"), None).await;
    assert_eq!(s, 200);
    assert_eq!(view["name"], "Durable");
    assert_eq!(view["certificates"].as_array().unwrap().len(), 1);
}

#[actix_rt::test]
async fn a_second_server_on_the_same_data_dir_fails_cleanly() {
    let app = spawn_app().await;
    let out = serve_to_completion(&app.data_dir());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("in use by another pixgw process"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
    // The first server is unaffected.
    assert_eq!(crate::helpers::send(app.client.get(app.url("/healthz")), None).await.0, 200);
}

#[actix_rt::test]
async fn sigterm_stops_the_server_with_success() {
    let mut app = spawn_app().await;
    assert!(app.stop().success());
}

#[actix_rt::test]
async fn the_test_clock_offset_survives_a_restart() {
    let mut app = spawn_app().await;
    let (s, _) = app.admin("POST", "/admin/clock", Some(json!({"set": "2045-06-01T12:00:00Z"}))).await;
    assert_eq!(s, 200);
    app.restart(&Options::default());
    let (s, body) = app.admin("POST", "/admin/clock", Some(json!({"advanceSeconds": 0}))).await;
    assert_eq!(s, 200);
    assert!(body["now"].as_str().unwrap().starts_with("2045-06-01T12:0"), "{body}");
}

#[actix_rt::test]
async fn a_bad_config_file_stops_the_start_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("pixgw.toml");
    std::fs::write(&cfg, "listen = 5\n").unwrap();
    let out = Command::new(bin())
        .args(["serve", "--config"])
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pixgw.toml"));
}

/// The live account actors, as /metrics reports them.
async fn live_actors(app: &TestApp) -> u64 {
    let mut res = app.client.get(app.url("/metrics")).send().await.unwrap();
    let text = String::from_utf8(res.body().limit(1 << 22).await.unwrap().to_vec()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("pixgw_account_actors "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .unwrap_or_else(|| panic!("no pixgw_account_actors in {text}"))
}

#[actix_rt::test]
async fn an_idle_account_actor_stops_and_comes_back_from_storage() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "10").await;
    assert_eq!(live_actors(&app).await, 1);
    // Not idle long enough yet.
    app.advance(pixgw::account::ACCOUNT_IDLE_STOP_SECONDS - 10).await;
    assert_eq!(live_actors(&app).await, 1);
    app.advance(20).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while live_actors(&app).await > 0 {
        assert!(std::time::Instant::now() < deadline, "the idle actor did not stop");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // The next request starts it again, from what storage holds.
    let token = app.demo_token().await;
    assert_eq!(app.balance(&token).await, ("10.00".into(), "0.00".into(), "10.00".into()));
    app.fund(&token, "5").await;
    assert_eq!(app.balance(&token).await.2, "15.00");
    assert_eq!(live_actors(&app).await, 1);
}

#[test]
fn human_logs_written_to_a_file_carry_no_terminal_colours() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let mut child = Command::new(crate::helpers::bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "human", "--data-dir"])
        .arg(dir.path().join("run"))
        .env("RUST_LOG", "info")
        .env_remove("PIXGW_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut banner).unwrap();
    assert!(banner.starts_with("pixgw listening on"), "{banner}");
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("INFO"), "the start-up was logged: {text}");
    assert!(!text.contains('\x1b'), "no ANSI escapes in a file: {text:?}");
}
