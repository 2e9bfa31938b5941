//! Webhook delivery end to end: a real receiver gets signed webhooks from the durable
//! outbox, failed attempts are retried on the test clock until the schedule ends, a
//! restart loses nothing, a dead receiver holds up no other account, and resend works by
//! every identifier, with its override, its errors and its rate limit.

use serde_json::{json, Value};

use crate::helpers::{assert_extended, cash_out_body, directory_key, spawn_with, Options, TestApp};
use crate::receiver::{signature_verifies, Answer, Receiver};

/// The retry waits of decisions.md "Webhooks", in seconds.
const RETRY_WAITS: [i64; 7] = [5, 300, 1800, 7200, 18000, 36000, 36000];

pub fn options() -> Options {
    Options {
        test_clock: true,
        env: vec![
            ("PIXGW_SIM_SETTLE_MS".into(), "20".into()),
            ("PIXGW_WEBHOOK_ALLOW_HTTP".into(), "1".into()),
            ("PIXGW_WEBHOOK_ALLOW_PRIVATE".into(), "1".into()),
        ],
        ..Options::default()
    }
}

async fn gateway() -> TestApp {
    spawn_with(options()).await
}

async fn configure(app: &TestApp, token: &str, event_type: &str, url: &str, headers: Value) {
    let body = json!({"url": url, "eventType": event_type, "headers": headers});
    let (s, b) = app.post_raw("/api/webhooks", token, &body.to_string(), &[]).await;
    assert!(s == 201 || s == 200, "{b}");
}

/// A pix-in of `amount`; answers its transactionId.
async fn pix_in(app: &TestApp, token: &str, amount: &str) -> String {
    let (s, b) = app.post_raw("/sandbox/pix-in", token, &format!(r#"{{"amount": {amount}}}"#), &[]).await;
    assert_eq!(s, 201, "{b}");
    b["transactionId"].as_str().unwrap().to_owned()
}

/// The delivery log, newest first.
async fn logs(app: &TestApp, token: &str, transaction: &str) -> Vec<Value> {
    let (s, b) = app.get_with(&format!("/api/webhooks/logs?transactionId={transaction}"), token).await;
    assert_eq!(s, 200, "{b}");
    b["logs"].as_array().unwrap().clone()
}

/// Polls the log until its newest entry has `outcome` (bounded: 10 s).
async fn wait_outcome(app: &TestApp, token: &str, transaction: &str, outcome: &str) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let l = logs(app, token, transaction).await;
        if l.first().is_some_and(|e| e["outcome"] == outcome) {
            return l;
        }
        assert!(std::time::Instant::now() < deadline, "no {outcome} entry: {l:?}");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

async fn token_of(app: &TestApp, pem: &str, client_id: &str, secret: &str) -> String {
    let (s, t) = app.token_with(pem, client_id, secret).await;
    assert_eq!(s, 201, "{t}");
    t["access_token"].as_str().unwrap().to_owned()
}

#[actix_rt::test]
async fn confirmed_and_errored_cash_outs_arrive_signed_with_every_field() {
    let app = gateway().await;
    let token = app.demo_token().await;
    let mut rx = Receiver::ok();
    configure(&app, &token, "cash_out", &rx.url, json!([{"key": "X-Tenant", "value": "acme"}])).await;
    app.fund(&token, "100").await;
    let (s, ok) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("wh-ok", "10.50"), &[]).await;
    assert_eq!(s, 201, "{ok}");
    let (s, bad) = app
        .post_raw(
            "/api/pix/cash-out",
            &token,
            &cash_out_body("wh-bad", "7"),
            &[("X-Sandbox-Scenario", "BLOCKED_ACCOUNT")],
        )
        .await;
    assert_eq!(s, 201, "{bad}");
    let (key, document, ispb) = directory_key("EMAIL", 0);
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(rx.next().await);
    }
    seen.sort_by_key(|r| r.json()["externalId"].as_str().unwrap().to_owned());
    let (bad_rx, ok_rx) = (&seen[0], &seen[1]);
    for r in [ok_rx, bad_rx] {
        assert!(signature_verifies(&app.creds.webhook_secret, r), "{:?}", r.headers);
        assert!(r.header("webhook-id").starts_with("msg_"));
        let ts: i64 = r.header("webhook-timestamp").parse().unwrap();
        assert!((ts - chrono::Utc::now().timestamp()).abs() < 60);
        assert_eq!(r.header("x-tenant"), "acme", "custom headers are sent");
        assert_eq!(r.header("content-type"), "application/json");
        assert_eq!(r.path, "/hook");
        let w = r.json();
        let fields = [
            "event",
            "status",
            "transactionType",
            "movementType",
            "transactionId",
            "externalId",
            "endToEndId",
            "pixKey",
            "feeAmount",
            "originalAmount",
            "finalAmount",
            "processingDate",
            "errorCode",
            "errorMessage",
            "counterpart",
            "metadata",
        ];
        for f in fields {
            assert!(w.get(f).is_some(), "{f} missing in {w}");
        }
        for f in ["name", "document", "bank"] {
            assert!(w["counterpart"].get(f).is_some(), "counterpart.{f} missing in {w}");
        }
        for f in ["bankISPB", "bankName", "bankCode", "accountBranch", "accountNumber"] {
            assert!(w["counterpart"]["bank"].get(f).is_some(), "counterpart.bank.{f} missing in {w}");
        }
        assert_eq!((w["event"].as_str(), w["transactionType"].as_str()), (Some("CashOut"), Some("PIX")));
        assert_eq!(w["movementType"], "DEBIT");
        assert_eq!(w["pixKey"], key.as_str());
        // Masked, as in the list (docs/interface.md "Documents"); it was sent in full.
        let masked = pixgw::domain::document::masked_document(Some(document.as_str())).unwrap();
        assert_eq!(w["counterpart"]["document"], masked.as_str());
        assert!(!w.to_string().contains(document.as_str()), "the document in full: {w}");
        assert!(w["metadata"].is_object());
    }
    let w = ok_rx.json();
    assert_eq!(w["transactionId"], ok["transactionId"]);
    assert_eq!((w["status"].as_str(), w["errorCode"].as_str()), (Some("CONFIRMED"), None));
    assert!(w["errorMessage"].is_null());
    assert_eq!(serde_json::to_string(&w["originalAmount"]).unwrap(), "10.50");
    let fee: rust_decimal::Decimal = serde_json::to_string(&w["feeAmount"]).unwrap().parse().unwrap();
    let final_amount: rust_decimal::Decimal =
        serde_json::to_string(&w["finalAmount"]).unwrap().parse().unwrap();
    assert_eq!(final_amount, rust_decimal::Decimal::new(1050, 2) + fee, "final = original + fee");
    assert_eq!(w["counterpart"]["bank"]["bankISPB"], ispb.as_str());
    let w = bad_rx.json();
    assert_eq!(w["transactionId"], bad["transactionId"]);
    assert_eq!((w["status"].as_str(), w["errorCode"].as_str()), (Some("ERROR"), Some("BLOCKED_ACCOUNT")));
    assert!(w["errorMessage"].is_string());
    // Every attempt is in the log.
    let l = wait_outcome(&app, &token, ok["transactionId"].as_str().unwrap(), "DELIVERED").await;
    assert_eq!(l.len(), 1);
    assert_eq!(l[0]["statusCode"], 200);
    assert_eq!(l[0]["url"], rx.url.as_str());
    assert_eq!(l[0]["webhookId"], ok_rx.header("webhook-id"));
    assert_eq!(l[0]["eventType"], "cash_out");
    assert!(l[0]["durationMs"].is_u64() && l[0]["sentAt"].is_string() && l[0]["webhookLogId"].is_u64());
}

#[actix_rt::test]
async fn a_500_is_retried_when_the_clock_reaches_the_retry_then_delivered() {
    let app = gateway().await;
    let token = app.demo_token().await;
    let mut rx = Receiver::start(vec![Answer::Status(500)], Answer::Status(204));
    configure(&app, &token, "cash_in", &rx.url, json!([])).await;
    let id = pix_in(&app, &token, "12.34").await;
    let first = rx.next().await;
    assert_eq!(first.json()["event"], "CashIn");
    assert_eq!(first.json()["transactionId"], id.as_str());
    // The payer's document (the sandbox payer's CPF, 11144477735) arrives masked.
    assert_eq!(first.json()["counterpart"]["document"], "***.444.777-**");
    let l = wait_outcome(&app, &token, &id, "RETRYING").await;
    assert_eq!((l[0]["statusCode"].as_u64(), l[0]["attempt"].as_u64()), (Some(500), Some(1)));
    let next_at = chrono::DateTime::parse_from_rfc3339(l[0]["nextAttemptAt"].as_str().unwrap()).unwrap();
    let sent_at = chrono::DateTime::parse_from_rfc3339(l[0]["sentAt"].as_str().unwrap()).unwrap();
    let wait = (next_at - sent_at).num_milliseconds();
    assert!((5_000..=5_800).contains(&wait), "the first retry waits 5 s plus jitter, not {wait} ms");
    // Nothing more until the clock gets there; then the same message again.
    app.advance(6).await;
    let second = rx.next().await;
    assert_eq!(second.header("webhook-id"), first.header("webhook-id"));
    assert_eq!(second.body, first.body);
    assert!(signature_verifies(&app.creds.webhook_secret, &second));
    let l = wait_outcome(&app, &token, &id, "DELIVERED").await;
    assert_eq!((l[0]["statusCode"].as_u64(), l[0]["attempt"].as_u64()), (Some(204), Some(2)));
    assert!(rx.drain().is_empty());
}

#[actix_rt::test]
async fn after_the_last_retry_the_delivery_fails_and_nothing_more_is_sent() {
    let app = gateway().await;
    let token = app.demo_token().await;
    let mut rx = Receiver::start(vec![], Answer::Status(503));
    configure(&app, &token, "cash_in", &rx.url, json!([])).await;
    let id = pix_in(&app, &token, "1").await;
    let first = rx.next().await;
    for (i, wait) in RETRY_WAITS.iter().enumerate() {
        // Wait for the attempt to be recorded, then move past its retry time (+10% jitter).
        // Tokens expire as the clock moves: a fresh one each time.
        wait_until_attempts(&app, &app.demo_token().await, &id, i + 1).await;
        app.advance(wait + wait / 10 + 1).await;
        let again = rx.next().await;
        assert_eq!(again.header("webhook-id"), first.header("webhook-id"), "retry {}", i + 1);
    }
    let token = app.demo_token().await;
    let l = wait_outcome(&app, &token, &id, "FAILED").await;
    assert_eq!(l.len(), 8, "eight attempts in all: {l:?}");
    assert_eq!(l[0]["attempt"], 8);
    assert!(l[0]["nextAttemptAt"].is_null());
    // A day later, still nothing; a new event goes out, and it is the next thing received.
    app.advance(86_400).await;
    let later = pix_in(&app, &app.demo_token().await, "2").await;
    let next = rx.next().await;
    assert_eq!(next.json()["transactionId"], later.as_str(), "no ninth attempt came first");
}

async fn wait_until_attempts(app: &TestApp, token: &str, id: &str, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while logs(app, token, id).await.len() < n {
        assert!(std::time::Instant::now() < deadline, "attempt {n} not recorded");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[actix_rt::test]
async fn an_undelivered_event_survives_a_kill_and_goes_out_with_the_same_id() {
    let mut app = gateway().await;
    let token = app.demo_token().await;
    let mut rx = Receiver::start(vec![Answer::Status(500)], Answer::Status(200));
    configure(&app, &token, "cash_in", &rx.url, json!([])).await;
    let id = pix_in(&app, &token, "5").await;
    let first = rx.next().await;
    wait_outcome(&app, &token, &id, "RETRYING").await;
    // The log is read from storage before its flush may have finished; a configuration
    // change flushes, so the retry state is surely on disk before the kill.
    configure(&app, &token, "refund_in", "http://127.0.0.1:1/unused", json!([])).await;
    let mut child = app.take_child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    app.start_again(&options());
    let token = app.demo_token().await;
    app.advance(6).await;
    let again = rx.next().await;
    assert_eq!(again.header("webhook-id"), first.header("webhook-id"));
    assert_eq!(again.body, first.body);
    let l = wait_outcome(&app, &token, &id, "DELIVERED").await;
    assert_eq!(l[0]["attempt"], 2, "the attempt count survived the restart");
}

#[actix_rt::test]
async fn events_not_yet_sent_at_shutdown_are_sent_after_the_restart() {
    let mut app = gateway().await;
    let token = app.demo_token().await;
    // A receiver that never answers: the delivery is in flight when the server stops.
    let mut dead = Receiver::start(vec![], Answer::Hang);
    configure(&app, &token, "cash_in", &dead.url, json!([])).await;
    let id = pix_in(&app, &token, "3").await;
    let first = dead.next().await;
    let mut rx = Receiver::ok();
    configure(&app, &token, "cash_in", &rx.url, json!([])).await;
    app.restart(&options());
    let token = app.demo_token().await;
    let again = rx.next().await;
    assert_eq!(again.header("webhook-id"), first.header("webhook-id"));
    assert_eq!(again.json()["transactionId"], id.as_str());
    wait_outcome(&app, &token, &id, "DELIVERED").await;
}

#[actix_rt::test]
async fn a_receiver_that_never_answers_does_not_hold_up_another_account() {
    let app = gateway().await;
    let token = app.demo_token().await;
    let mut dead = Receiver::start(vec![], Answer::Hang);
    configure(&app, &token, "cash_in", &dead.url, json!([])).await;
    let cap = pixgw::webhooks::dispatcher::ACCOUNT_DELIVERIES_IN_FLIGHT_MAX;
    let mut stuck = Vec::new();
    for i in 0..cap + 4 {
        stuck.push(pix_in(&app, &token, &format!("{}", i + 1)).await);
    }
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let other = token_of(&app, &pem, &client_id, &secret).await;
    let mut rx = Receiver::ok();
    configure(&app, &other, "cash_in", &rx.url, json!([])).await;
    let id = pix_in(&app, &other, "9.99").await;
    assert_eq!(rx.next().await.json()["transactionId"], id.as_str());
    wait_outcome(&app, &other, &id, "DELIVERED").await;
    // Delivered while every attempt to the dead receiver was still waiting for an answer.
    for s in &stuck {
        assert!(logs(&app, &token, s).await.is_empty(), "an attempt of {s} already ended");
    }
    // And the dead receiver holds only its account's slots.
    let hung = dead.drain().len();
    assert!((1..=cap).contains(&hung), "{hung} requests in flight to one account's receiver");
}

/// Runs one resend; answers status and body.
async fn resend(app: &TestApp, token: &str, id: &str, body: Option<Value>) -> (u16, Value) {
    let text = body.map(|b| b.to_string()).unwrap_or_default();
    app.post_raw(&format!("/api/resend-webhook/{id}"), token, &text, &[]).await
}

#[actix_rt::test]
async fn resend_by_every_identifier_kind_and_to_an_override_url() {
    let app = gateway().await;
    let token = app.demo_token().await;
    let mut rx = Receiver::ok();
    configure(&app, &token, "cash_out", &rx.url, json!([{"key": "X-Tenant", "value": "acme"}])).await;
    app.fund(&token, "50").await;
    let (_, out) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("resend-me", "4"), &[]).await;
    let tid = out["transactionId"].as_str().unwrap().to_owned();
    let original = rx.next().await;
    let t = app.wait_final(&token, &tid).await;
    let ids = [
        t["id"].to_string(),
        tid.clone(),
        "resend-me".to_owned(),
        t["endToEndId"].as_str().unwrap().to_owned(),
    ];
    let mut log_ids = Vec::new();
    for id in &ids {
        let (s, b) = resend(&app, &token, id, None).await;
        assert_eq!(s, 200, "{id}: {b}");
        assert_eq!(b["statusCode"], 200);
        assert!(b["message"].is_string() && b["sentAt"].is_string());
        log_ids.push(b["webhookLogId"].as_u64().unwrap());
        let r = rx.next().await;
        assert_eq!(r.json(), original.json(), "the same webhook, by {id}");
        assert!(signature_verifies(&app.creds.webhook_secret, &r));
        assert_eq!(r.header("x-tenant"), "acme");
    }
    log_ids.dedup();
    assert_eq!(log_ids.len(), 4, "each resend is logged on its own");
    let l = logs(&app, &token, &tid).await;
    assert_eq!(l.iter().filter(|e| e["outcome"] == "RESENT").count(), 4);
    // The override goes to its URL this once, and the configuration keeps its own.
    let mut elsewhere = Receiver::start(vec![], Answer::Status(202));
    let (s, b) = resend(&app, &token, &tid, Some(json!({"url": elsewhere.url}))).await;
    assert_eq!((s, b["statusCode"].as_u64()), (200, Some(202)), "{b}");
    assert_eq!(elsewhere.next().await.json()["transactionId"], tid.as_str());
    let (_, list) = app.get_with("/api/webhooks", &token).await;
    assert_eq!(list["webhooks"][0]["url"], rx.url.as_str());
    assert!(rx.drain().is_empty());
    // A receiver that cannot be reached is status 0, logged.
    let (s, b) = resend(&app, &token, &tid, Some(json!({"url": "http://127.0.0.1:1/nothing"}))).await;
    assert_eq!((s, b["statusCode"].as_u64()), (200, Some(0)), "{b}");
    assert!(b["error"].is_string());
}

#[actix_rt::test]
async fn resend_answers_400_without_a_url_and_404_for_unknown_or_foreign_transactions() {
    let app = gateway().await;
    let token = app.demo_token().await;
    let id = pix_in(&app, &token, "1").await;
    let (s, b) = resend(&app, &token, &id, None).await;
    assert_eq!(s, 400, "no cash_in endpoint and no url: {b}");
    assert_extended(&b, 400, "HTTP_ERROR");
    let (s, b) = resend(&app, &token, &id, Some(json!({"url": "ftp://x"}))).await;
    assert_eq!(s, 400, "{b}");
    assert_eq!(b["details"]["violations"][0]["field"], "url");
    let (s, b) = resend(&app, &token, "no-such-transaction", None).await;
    assert_eq!(s, 404, "{b}");
    assert_extended(&b, 404, "NOT_FOUND");
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let other = token_of(&app, &pem, &client_id, &secret).await;
    let mut rx = Receiver::ok();
    for theirs in [id.clone(), "1".to_owned()] {
        let (s, b) = resend(&app, &other, &theirs, Some(json!({"url": rx.url}))).await;
        assert_eq!(s, 404, "{theirs}: {b}");
    }
    assert!(rx.drain().is_empty(), "nothing was sent for another account");
}

#[actix_rt::test]
async fn the_61st_resend_in_a_minute_is_refused_with_retry_after() {
    let app = gateway().await;
    let token = app.demo_token().await;
    for i in 0..60 {
        let (s, b) = resend(&app, &token, "unknown", None).await;
        assert_eq!(s, 404, "call {}: {b}", i + 1);
    }
    let mut res =
        app.client.post(app.url("/api/resend-webhook/unknown")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 429);
    let retry: u64 = res.headers().get("retry-after").unwrap().to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    let b: Value = serde_json::from_slice(&res.body().await.unwrap()).unwrap();
    assert_extended(&b, 429, "TOO_MANY_REQUESTS");
    // Another account has its own allowance; this one gets its back after the window.
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let other = token_of(&app, &pem, &client_id, &secret).await;
    assert_eq!(resend(&app, &other, "unknown", None).await.0, 404);
    app.advance(60).await;
    assert_eq!(resend(&app, &token, "unknown", None).await.0, 404);
}

/// A URL whose host can only be local (an IP literal of a loopback, private or link-local
/// address, `localhost`) is refused when it is configured, unless private addresses are
/// allowed; one that was configured while they were is refused at delivery when they no
/// longer are, the check a name that resolves to a local address also meets.
#[actix_rt::test]
async fn private_addresses_are_refused_at_configuration_and_at_delivery_unless_allowed() {
    let http_only = Options {
        test_clock: true,
        env: vec![
            ("PIXGW_SIM_SETTLE_MS".into(), "20".into()),
            ("PIXGW_WEBHOOK_ALLOW_HTTP".into(), "1".into()),
        ],
        ..Options::default()
    };
    let mut app = spawn_with(http_only.clone()).await;
    let token = app.demo_token().await;
    let mut rx = Receiver::ok();
    for url in [
        "https://169.254.169.254/latest/meta-data",
        rx.url.as_str(),
        "http://localhost:9/hook",
        "https://api.LOCALHOST./hook",
        "https://[::1]/hook",
        "https://[fe80::1]/hook",
        "https://10.1.2.3/hook",
        "https://[::ffff:192.168.0.1]/hook",
    ] {
        let body = json!({"url": url, "eventType": "cash_in"});
        let (s, b) = app.post_raw("/api/webhooks", &token, &body.to_string(), &[]).await;
        assert_eq!(s, 400, "{url}: {b}");
        assert_extended(&b, 400, "HTTP_ERROR");
        assert_eq!(b["details"]["violations"][0]["field"], "url", "{b}");
        assert!(b.to_string().contains("PIXGW_WEBHOOK_ALLOW_PRIVATE"), "{b}");
    }
    let (_, list) = app.get_with("/api/webhooks", &token).await;
    assert_eq!(list["total"], 0, "nothing was saved");
    let id = pix_in(&app, &token, "1").await;
    let (s, b) = resend(&app, &token, &id, Some(json!({"url": rx.url}))).await;
    assert_eq!(s, 400, "a resend's URL follows the same rule: {b}");

    // Configured while private addresses were allowed, then refused at delivery.
    let mut allowed = http_only.clone();
    allowed.env.push(("PIXGW_WEBHOOK_ALLOW_PRIVATE".into(), "1".into()));
    app.restart(&allowed);
    let token = app.demo_token().await;
    configure(&app, &token, "cash_in", &rx.url, json!([])).await;
    app.restart(&http_only);
    let token = app.demo_token().await;
    let id = pix_in(&app, &token, "1").await;
    let l = wait_outcome(&app, &token, &id, "RETRYING").await;
    assert!(l[0]["statusCode"].is_null());
    assert!(l[0]["error"].as_str().unwrap().contains("private or local"), "{l:?}");
    assert!(rx.drain().is_empty(), "nothing reached the private address");
}

/// `pixgw webhooks listen --forward-to` sends each delivery on to the developer's endpoint
/// with its body and signature unchanged, at the same path under the URL, and answers the
/// gateway with that endpoint's status: a 500 there is a retry here, a 204 a delivery.
#[actix_rt::test]
async fn the_developer_receiver_forwards_each_delivery_with_its_signature_intact() {
    use std::io::{BufRead, BufReader};
    let app = gateway().await;
    let token = app.demo_token().await;
    let mut endpoint = Receiver::start(vec![Answer::Status(500)], Answer::Status(204));
    let mut child = std::process::Command::new(crate::helpers::bin())
        .args(["webhooks", "listen", "--port", "0", "--secret", &app.creds.webhook_secret])
        .args(["--forward-to", &format!("{}/app", endpoint.url)])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first.strip_prefix("listening on ").unwrap_or_else(|| panic!("{first}")).to_owned();
    std::thread::spawn(move || for _ in lines {});
    configure(&app, &token, "cash_in", &format!("{url}/in"), json!([{"key": "X-Tenant", "value": "acme"}]))
        .await;
    let id = pix_in(&app, &token, "8").await;
    let first = endpoint.next().await;
    assert_eq!(first.path, "/hook/app/in", "the delivery's path under the URL");
    assert!(signature_verifies(&app.creds.webhook_secret, &first), "{:?}", first.headers);
    assert_eq!(first.header("x-tenant"), "acme");
    assert_eq!(first.json()["transactionId"], id.as_str());
    let l = wait_outcome(&app, &token, &id, "RETRYING").await;
    assert_eq!(l[0]["statusCode"], 500, "the endpoint's answer is the gateway's: {l:?}");
    // Past the first retry's time, its jitter (at most 10 %) included.
    app.advance(RETRY_WAITS[0] + 1).await;
    let again = endpoint.next().await;
    assert_eq!((again.header("webhook-id"), &again.body), (first.header("webhook-id"), &first.body));
    assert!(signature_verifies(&app.creds.webhook_secret, &again));
    let l = wait_outcome(&app, &token, &id, "DELIVERED").await;
    assert_eq!(l[0]["statusCode"], 204, "{l:?}");
    let _ = child.kill();
    let _ = child.wait();
}

#[actix_rt::test]
async fn the_developer_receiver_prints_and_verifies_deliveries() {
    use std::io::{BufRead, BufReader};
    let app = gateway().await;
    let token = app.demo_token().await;
    let mut child = std::process::Command::new(crate::helpers::bin())
        .args(["webhooks", "listen", "--port", "0", "--secret", &app.creds.webhook_secret])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let next =
        || lines.recv_timeout(std::time::Duration::from_secs(20)).expect("the listener printed nothing");
    let first = next();
    let url = first.strip_prefix("listening on ").unwrap_or_else(|| panic!("{first}"));
    configure(&app, &token, "cash_in", &format!("{url}/pix"), json!([])).await;
    let id = pix_in(&app, &token, "8").await;
    let mut printed = Vec::new();
    while !printed.iter().any(|l: &String| l.contains(&id)) {
        printed.push(next());
    }
    assert!(printed.iter().any(|l| l == "signature: verified"), "{printed:?}");
    assert!(printed.iter().any(|l| l.starts_with("--- POST /pix webhook-id=msg_")), "{printed:?}");
    wait_outcome(&app, &token, &id, "DELIVERED").await;
    let _ = child.kill();
    let _ = child.wait();
}

#[actix_rt::test]
async fn https_receivers_are_trusted_through_the_ca_file_and_others_refused() {
    let now = chrono::Utc::now();
    let trusted = pixgw::auth::certs::generate(
        "localhost",
        now - chrono::Duration::hours(1),
        now + chrono::Duration::days(1),
    )
    .unwrap();
    let stranger = pixgw::auth::certs::generate(
        "localhost",
        now - chrono::Duration::hours(1),
        now + chrono::Duration::days(1),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &trusted.cert_pem).unwrap();
    let app = spawn_with(Options {
        test_clock: true,
        env: vec![
            ("PIXGW_SIM_SETTLE_MS".into(), "20".into()),
            ("PIXGW_WEBHOOK_ALLOW_PRIVATE".into(), "1".into()),
            ("PIXGW_WEBHOOK_CA_FILE".into(), ca.display().to_string()),
        ],
        ..Options::default()
    })
    .await;
    let token = app.demo_token().await;
    let mut rx = Receiver::start_tls(&trusted.cert_pem, &trusted.key_pem);
    assert!(rx.url.starts_with("https://localhost:"));
    configure(&app, &token, "cash_in", &rx.url, json!([])).await;
    let id = pix_in(&app, &token, "4.20").await;
    let r = rx.next().await;
    assert_eq!(r.json()["transactionId"], id.as_str());
    assert!(signature_verifies(&app.creds.webhook_secret, &r));
    wait_outcome(&app, &token, &id, "DELIVERED").await;
    // A certificate the gateway does not trust: no delivery.
    let mut other = Receiver::start_tls(&stranger.cert_pem, &stranger.key_pem);
    let (s, b) = resend(&app, &token, &id, Some(json!({"url": other.url}))).await;
    assert_eq!((s, b["statusCode"].as_u64()), (200, Some(0)), "{b}");
    assert!(b["error"].as_str().unwrap().contains("certificate"), "{b}");
    assert!(other.drain().is_empty());
}

#[actix_rt::test]
async fn a_dict_transfer_is_delivered_as_a_v2_transfer_envelope() {
    let app = gateway().await;
    let token = app.demo_token().await;
    let mut rx = Receiver::ok();
    configure(&app, &token, "cash_out", &rx.url, json!([])).await;
    app.fund(&token, "20").await;
    let (phone, _, ispb) = directory_key("PHONE", 0);
    let key = uuid::Uuid::new_v4().to_string();
    let body = format!(
        r#"{{"pixKey": "{phone}", "payment": {{"currency": "BRL", "amount": 3.10}}, "description": "rent"}}"#
    );
    let (s, b) = app.post_raw("/dict/pix", &token, &body, &[("x-idempotency-key", &key)]).await;
    assert_eq!(s, 201, "{b}");
    let r = rx.next().await;
    assert!(signature_verifies(&app.creds.webhook_secret, &r));
    let v = r.json();
    assert_eq!(v["type"], "TRANSFER", "{v}");
    let d = &v["data"];
    assert_eq!(d["id"], b["id"]);
    assert_eq!((d["status"].as_str(), d["creditDebitType"].as_str()), (Some("LIQUIDATED"), Some("DEBIT")));
    assert_eq!(d["payment"], json!({"amount": "3.10", "currency": "BRL"}));
    assert_eq!(d["idempotencyKey"], key.as_str());
    assert_eq!(d["pixKey"], phone.as_str());
    assert_eq!(d["creditorAccount"]["ispb"], ispb.as_str());
    assert_eq!(d["remittanceInformation"], "rent");
    assert_ne!(d["endToEndId"], b["endToEndId"], "the real end-to-end id replaces the provisional one");
}

#[actix_rt::test]
async fn a_redirect_is_a_failed_attempt_and_is_not_followed() {
    let app = gateway().await;
    let token = app.demo_token().await;
    let mut rx = Receiver::start(vec![Answer::Status(302)], Answer::Status(200));
    configure(&app, &token, "cash_in", &rx.url, json!([])).await;
    let id = pix_in(&app, &token, "1").await;
    rx.next().await;
    let l = wait_outcome(&app, &token, &id, "RETRYING").await;
    assert_eq!((l[0]["statusCode"].as_u64(), l[0]["attempt"].as_u64()), (Some(302), Some(1)));
    assert!(rx.drain().is_empty(), "nothing followed the redirect");
}

#[actix_rt::test]
async fn a_paid_cob_names_its_payer_the_one_given_else_the_sandbox_payer() {
    let app = gateway().await;
    let token = app.demo_token().await;
    let mut rx = Receiver::ok();
    configure(&app, &token, "cash_in", &rx.url, json!([])).await;
    let cob = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "1.00"}});
    for txid in ["semdevedor20261123abcdefghij1", "semdevedor20261123abcdefghij2"] {
        let req = app.client.put(app.url(&format!("/cob/{txid}"))).bearer_auth(&token);
        assert_eq!(crate::helpers::send(req, Some(cob.clone())).await.0, 201);
    }
    let pay = |body: Value| {
        let (app, token) = (&app, token.clone());
        async move { app.post_raw("/sandbox/pay", &token, &body.to_string(), &[]).await }
    };
    // No payer named and no devedor: the simulated payer, with a CPF.
    let (s, b) = pay(json!({"txid": "semdevedor20261123abcdefghij1"})).await;
    assert_eq!(s, 200, "{b}");
    let w = rx.next().await.json();
    assert_eq!(w["type"], "RECEIVE", "{w}");
    assert_eq!(w["data"]["debtorAccount"], json!({"name": "Sandbox Payer", "document": "***.444.777-**"}));
    // A payer in the request, here with an alphanumeric CNPJ.
    let payer = json!({"name": "Aurora Tecnologia", "document": "12ABC34501DE35"});
    let (s, b) = pay(json!({"txid": "semdevedor20261123abcdefghij2", "payer": payer})).await;
    assert_eq!(s, 200, "{b}");
    let w = rx.next().await.json();
    assert_eq!(
        w["data"]["debtorAccount"],
        json!({"name": "Aurora Tecnologia", "document": "12.ABC.345/****-**"})
    );
    let (_, list) = app.get_with("/api/transactions", &token).await;
    let docs: Vec<&Value> =
        list["data"].as_array().unwrap().iter().map(|t| &t["counterpart"]["document"]).collect();
    assert_eq!(docs, vec!["12.ABC.345/****-**", "***.444.777-**"]);
    // A malformed payer is refused before the charge is looked up.
    for bad in [
        json!({"name": "X"}),
        json!({"name": "X", "document": "123"}),
        json!({"name": "", "document": "52998224725"}),
    ] {
        let (s, b) = pay(json!({"txid": "semdevedor20261123abcdefghij1", "payer": bad})).await;
        assert_eq!(s, 400, "{bad}: {b}");
    }
}
