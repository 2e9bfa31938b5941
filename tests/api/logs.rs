//! The log an operator reads: a run through the routes that carry secrets, at debug level in
//! JSON, then the whole log is read back. Every line is JSON; each request has one access
//! line with its id, route template, status, latency, account and bytes; a payment can be
//! followed from the request that made it to its settlement; a failing webhook receiver is
//! logged with the retry; and no secret, token, certificate or document appears anywhere.

use serde_json::{json, Value};

use crate::helpers::{cash_out_body, directory_key, spawn_with, Options};
use crate::receiver::{Answer, Receiver};

/// Every line of the log that is about `f`.
fn lines(log: &[Value], f: impl Fn(&Value) -> bool) -> Vec<&Value> {
    log.iter().filter(|l| f(l)).collect()
}

fn message(l: &Value) -> &str {
    l["fields"]["message"].as_str().unwrap_or("")
}

#[actix_rt::test]
async fn a_run_logs_each_request_and_payment_and_never_a_secret() {
    let logs = tempfile::tempdir().unwrap();
    let log_path = logs.path().join("server.log");
    let mut app = spawn_with(Options {
        env: vec![
            ("RUST_LOG".into(), "debug".into()),
            ("PIXGW_LOG_FORMAT".into(), "json".into()),
            ("PIXGW_ACCESS_LOG".into(), "all".into()),
            ("PIXGW_SIM_SETTLE_MS".into(), "20".into()),
            ("PIXGW_WEBHOOK_ALLOW_HTTP".into(), "1".into()),
            ("PIXGW_WEBHOOK_ALLOW_PRIVATE".into(), "1".into()),
        ],
        stderr: Some(log_path.clone()),
        ..Options::default()
    })
    .await;
    let demo = app.creds.account_id;
    let token = app.demo_token().await;

    // A guessed secret, a webhook with a credential in a custom header (the receiver fails).
    let guess = "guessed-secret-7f3a9c2e";
    let (s, _) = app.token_with(&app.creds.cert_pem, &app.creds.client_id, guess).await;
    assert_eq!(s, 401);
    let rx = Receiver::start(vec![], Answer::Status(500));
    let header_secret = "hdr-credential-51e0b7d4";
    let body = json!({"url": rx.url, "eventType": "cash_out",
        "headers": [{"key": "X-Receiver-Key", "value": header_secret}]});
    let (s, b) = app.post_raw("/api/webhooks", &token, &body.to_string(), &[]).await;
    assert!(s == 201 || s == 200, "{b}");

    // Money in, then a cash-out whose request id is kept.
    app.fund(&token, "100").await;
    let (_, payee_document, _) = directory_key("EMAIL", 0);
    let mut res = app
        .client
        .post(app.url("/api/pix/cash-out"))
        .bearer_auth(&token)
        .content_type("application/json")
        .send_body(cash_out_body("log-1", "10.50"))
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let request_id = res.headers().get("x-request-id").unwrap().to_str().unwrap().to_owned();
    let created: Value = serde_json::from_slice(&res.body().await.unwrap()).unwrap();
    let tx_id = created["transactionId"].as_str().unwrap().to_owned();
    let settled = app.wait_final(&token, &tx_id).await;
    assert_eq!(settled["status"], "CONFIRMED");
    let e2e = settled["endToEndId"].as_str().unwrap().to_owned();

    // The webhook's first attempt fails: wait until it is recorded as retrying.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, b) = app.get_with(&format!("/api/webhooks/logs?transactionId={tx_id}"), &token).await;
        if b["logs"].as_array().is_some_and(|l| l.iter().any(|e| e["outcome"] == "RETRYING")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no retrying attempt: {b}");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    // Operator routes that answer or take secrets.
    let (id, _client, new_secret, pem) = app.new_account("Logged Ltda").await;
    let (s, rotated) = app.admin("POST", &format!("/admin/accounts/{id}/secret"), None).await;
    assert_eq!(s, 200, "{rotated}");
    let rotated_secret = rotated["clientSecret"].as_str().unwrap().to_owned();

    assert!(app.stop().success());
    let text = std::fs::read_to_string(&log_path).unwrap();
    let log: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();

    // No secret, token, certificate or document, at debug level, anywhere.
    let pem_body = pem.lines().nth(1).unwrap().to_owned();
    let demo_pem_body = app.creds.cert_pem.lines().nth(1).unwrap().to_owned();
    let secrets = [
        ("the Demo client secret", app.creds.client_secret.as_str()),
        ("the Demo webhook secret", app.creds.webhook_secret.as_str()),
        ("the admin token", app.creds.admin_token.as_str()),
        ("an access token", token.as_str()),
        ("a guessed secret", guess),
        ("a webhook header value", header_secret),
        ("a new account's secret", new_secret.as_str()),
        ("a rotated secret", rotated_secret.as_str()),
        ("a registered certificate", pem_body.as_str()),
        ("the Demo certificate", demo_pem_body.as_str()),
        ("a payee's document", payee_document.as_str()),
    ];
    for (what, secret) in secrets {
        assert!(!text.contains(secret), "{what} is in the log");
    }
    // The token's signature alone is not there either.
    let signature = token.rsplit('.').next().unwrap();
    assert!(!text.contains(signature), "a token signature is in the log");

    // The start-up line says what the server runs with.
    let start = lines(&log, |l| message(l) == "starting");
    assert_eq!(start.len(), 1, "{text}");
    assert_eq!(start[0]["fields"]["test_clock"], true);
    assert_eq!(start[0]["fields"]["admin_token"], "stored");

    // One access line for the cash-out, with everything an operator needs.
    let access = lines(&log, |l| l["target"] == "pixgw::access" && l["fields"]["request_id"] == request_id);
    assert_eq!(access.len(), 1, "{access:?}");
    let a = &access[0]["fields"];
    assert_eq!(a["method"], "POST");
    assert_eq!(a["route"], "/api/pix/cash-out");
    assert_eq!(a["status"], 201);
    assert_eq!(a["account"], demo);
    assert!(a["latency_us"].as_u64().is_some(), "{a}");
    assert!(a["bytes"].as_u64().is_some_and(|b| b > 0), "{a}");
    // Routes are templates: the polled transaction's id is not in its access lines.
    let polls =
        lines(&log, |l| l["target"] == "pixgw::access" && l["fields"]["route"] == "/api/transactions/{id}");
    assert!(!polls.is_empty());
    assert!(polls.iter().all(|l| !l.to_string().contains(&tx_id)));
    // The refused token request is there, with its status and no account.
    let refused = lines(&log, |l| {
        l["target"] == "pixgw::access"
            && l["fields"]["route"] == "/api/auth/token"
            && l["fields"]["status"] == 401
    });
    assert_eq!(refused.len(), 1);
    assert!(refused[0]["fields"].get("account").is_none());

    // The payment from the request that made it to its settlement.
    let payment = |step: &str| {
        let want = format!("payment {step}");
        lines(&log, |l| message(l) == want && l["fields"]["transaction_id"] == tx_id)
    };
    let accepted = payment("accepted");
    assert_eq!(accepted.len(), 1, "{text}");
    assert_eq!(accepted[0]["fields"]["request_id"], request_id, "the request that made it");
    assert_eq!(accepted[0]["fields"]["account"], demo);
    assert_eq!(accepted[0]["fields"]["end_to_end_id"], e2e);
    assert_eq!(accepted[0]["fields"]["operation"], "CASH_OUT");
    assert_eq!(accepted[0]["fields"]["value"], "10.50");
    let done = payment("settled");
    assert_eq!(done.len(), 1, "{text}");
    assert_eq!(done[0]["fields"]["end_to_end_id"], e2e);
    assert_eq!(done[0]["fields"]["account"], demo);
    assert_eq!(lines(&log, |l| message(l) == "payment received").len(), 1);

    // The failing receiver: the retry is logged once per attempt, with what it answered.
    let failed = lines(&log, |l| message(l) == "webhook not delivered; it will be retried");
    assert!(!failed.is_empty(), "{text}");
    assert_eq!(failed[0]["fields"]["status"], 500);
    assert_eq!(failed[0]["fields"]["event"], "cash_out");
    assert_eq!(failed[0]["fields"]["account"], demo);
    assert!(failed[0]["fields"]["next_attempt_at"].is_string());

    // What operators did, inside their requests' spans.
    let created_line = lines(&log, |l| message(l) == "account created" && l["fields"]["account"] == id);
    assert_eq!(created_line.len(), 1);
    assert!(created_line[0]["span"]["request_id"].is_string());
    assert_eq!(lines(&log, |l| message(l) == "client secret rotated").len(), 1);
}

/// By default (`--access-log errors`) a successful request writes no access line, a refused
/// one does, and every step of every payment is still logged: the audit trail does not
/// depend on the access log.
#[actix_rt::test]
async fn by_default_only_refused_requests_get_an_access_line_and_payments_are_all_logged() {
    let logs = tempfile::tempdir().unwrap();
    let log_path = logs.path().join("server.log");
    let mut app = spawn_with(Options {
        env: vec![
            ("RUST_LOG".into(), "info".into()),
            ("PIXGW_LOG_FORMAT".into(), "json".into()),
            ("PIXGW_SIM_SETTLE_MS".into(), "20".into()),
        ],
        stderr: Some(log_path.clone()),
        ..Options::default()
    })
    .await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let mut ids = Vec::new();
    for n in 0..5 {
        let (s, b) =
            app.post_raw("/api/pix/cash-out", &token, &cash_out_body(&format!("d{n}"), "1"), &[]).await;
        assert_eq!(s, 201, "{b}");
        ids.push(b["transactionId"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        assert_eq!(app.wait_final(&token, id).await["status"], "CONFIRMED");
    }
    let (s, _) = app.token_with(&app.creds.cert_pem, &app.creds.client_id, "wrong").await;
    assert_eq!(s, 401);
    assert!(app.stop().success());
    let text = std::fs::read_to_string(&log_path).unwrap();
    let log: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let access = lines(&log, |l| l["target"] == "pixgw::access");
    assert_eq!(access.len(), 1, "only the refused token request: {access:?}");
    assert_eq!(access[0]["fields"]["status"], 401);
    for id in &ids {
        let steps: Vec<&str> =
            lines(&log, |l| l["fields"]["transaction_id"] == id.as_str()).into_iter().map(message).collect();
        assert_eq!(steps, ["payment accepted", "payment settled"], "{id}");
    }
}
