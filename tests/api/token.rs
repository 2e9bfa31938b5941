//! `POST /api/auth/token` and bearer authentication: one test per error code, the `+`
//! encoding rule, validity windows on the test clock, revocation, enumeration resistance,
//! expiry, tampering.

use std::sync::Arc;

use base64::Engine;
use chrono::{Duration, Utc};
use pixgw::auth::certs;
use pixgw::store::{Batch, MemoryStore, Storage};
use serde_json::{json, Value};

use crate::helpers::{assert_extended, cert, send, spawn_app, spawn_in_process};

fn assert_token_error(body: &Value, status: u16, code: &str) {
    assert_extended(body, status, code);
    assert_eq!(body["errorCode"], code);
    assert!(body["details"]["hint"].is_string(), "{body}");
    assert_eq!(body["path"], "/api/auth/token");
    assert_eq!(body["method"], "POST");
}

#[actix_rt::test]
async fn the_demo_credentials_get_a_token_that_opens_the_api() {
    let app = spawn_app().await;
    let (status, body) =
        app.token_with(&app.creds.cert_pem, &app.creds.client_id, &app.creds.client_secret).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 1800);
    let token = body["access_token"].as_str().unwrap();
    let (s, me) = app.get_with("/api/account", token).await;
    assert_eq!(s, 200, "{me}");
    assert_eq!(me["accountId"], app.creds.account_id);
    assert_eq!(me["name"], "Demo");
    assert_eq!(me["sandbox"], true);
    assert_eq!(me["document"], "11.222.333/****-**");
    assert_eq!(me["settings"]["limits"]["nightly"], "10000.00");
}

#[actix_rt::test]
async fn a_missing_certificate_header_is_pub_cert_header_missing() {
    let app = spawn_app().await;
    let req = app.client.post(app.url("/api/auth/token"));
    let body = json!({"clientId": app.creds.client_id, "clientSecret": app.creds.client_secret});
    let (status, body) = send(req, Some(body)).await;
    assert_eq!(status, 400);
    assert_token_error(&body, 400, "PUB_CERT_HEADER_MISSING");
}

#[actix_rt::test]
async fn a_header_that_is_not_a_certificate_is_pub_cert_malformed_pem() {
    let app = spawn_app().await;
    for garbage in ["hello", "-----BEGIN%20CERTIFICATE-----%0AAAAA%0A-----END%20CERTIFICATE-----"] {
        let req = app.client.post(app.url("/api/auth/token")).insert_header(("X-SSL-Client-Cert", garbage));
        let (status, body) =
            send(req, Some(json!({"clientId": app.creds.client_id, "clientSecret": "x"}))).await;
        assert_eq!(status, 400);
        assert_token_error(&body, 400, "PUB_CERT_MALFORMED_PEM");
    }
}

#[actix_rt::test]
async fn a_plus_sent_as_percent_20_is_a_malformed_pem() {
    let app = spawn_app().await;
    // The Demo certificate is random; use one that has a '+' in its base64.
    let pem = (0..100)
        .map(|_| cert(Utc::now() - Duration::hours(1), Utc::now() + Duration::days(1)))
        .find(|p| p.contains('+'))
        .expect("a certificate with a '+'");
    let wrong = certs::url_encode_pem(&pem).replace("%2B", "%20");
    let req = app.client.post(app.url("/api/auth/token")).insert_header(("X-SSL-Client-Cert", wrong));
    let body = json!({"clientId": app.creds.client_id, "clientSecret": app.creds.client_secret});
    let (status, body) = send(req, Some(body)).await;
    assert_eq!(status, 400);
    assert_token_error(&body, 400, "PUB_CERT_MALFORMED_PEM");
    assert!(body["details"]["hint"].as_str().unwrap().contains("%2B"));
}

#[actix_rt::test]
async fn a_body_that_breaks_the_schema_is_pub_request_body_invalid_with_violations() {
    let app = spawn_app().await;
    let header = ("X-SSL-Client-Cert", certs::url_encode_pem(&app.creds.cert_pem));
    let cases = [
        (json!({"clientSecret": "x"}), vec!["clientId"]),
        (json!({"clientId": 42, "clientSecret": true}), vec!["clientId", "clientSecret"]),
        // a UUID of version 1 is not a UUID v4
        (json!({"clientId": "3f2b8c1e-9d4a-1e6b-8a7c-1d2e3f4a5b6c", "clientSecret": "x"}), vec!["clientId"]),
        (json!({"clientId": app.creds.client_id, "clientSecret": ""}), vec!["clientSecret"]),
        (json!([1, 2]), vec!["body"]),
    ];
    for (payload, fields) in cases {
        let req = app.client.post(app.url("/api/auth/token")).insert_header(header.clone());
        let (status, body) = send(req, Some(payload.clone())).await;
        assert_eq!(status, 400, "{payload}");
        assert_token_error(&body, 400, "PUB_REQUEST_BODY_INVALID");
        let got: Vec<&str> = body["details"]["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["field"].as_str().unwrap())
            .collect();
        assert_eq!(got, fields, "{payload}");
    }
    // Not JSON at all.
    let req = app.client.post(app.url("/api/auth/token")).insert_header(header.clone());
    let (status, body) = send(req.content_type("application/json"), None).await;
    assert_eq!(status, 400);
    assert_token_error(&body, 400, "PUB_REQUEST_BODY_INVALID");
}

#[actix_rt::test]
async fn a_certificate_before_its_not_before_is_refused_until_the_clock_reaches_it() {
    let app = spawn_app().await;
    let (id, client_id, secret, _) = app.new_account("Future").await;
    let now = Utc::now();
    let pem = cert(now + Duration::hours(1), now + Duration::days(2));
    let (s, _) =
        app.admin("POST", &format!("/admin/accounts/{id}/certificates"), Some(json!({"pem": pem}))).await;
    assert_eq!(s, 201);
    let (status, body) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(status, 401);
    assert_token_error(&body, 401, "PUB_CERT_NOT_YET_VALID");
    app.advance(2 * 3600).await;
    let (status, body) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(status, 201, "{body}");
}

#[actix_rt::test]
async fn a_certificate_past_its_not_after_is_pub_cert_expired() {
    let app = spawn_app().await;
    let (_, client_id, secret, pem) = app.new_account("Expiring").await;
    let (status, _) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(status, 201);
    app.advance(31 * 24 * 3600).await;
    let (status, body) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(status, 401);
    assert_token_error(&body, 401, "PUB_CERT_EXPIRED");
}

#[actix_rt::test]
async fn an_unregistered_certificate_is_pub_cert_not_registered() {
    let app = spawn_app().await;
    let pem = cert(Utc::now() - Duration::hours(1), Utc::now() + Duration::days(1));
    let (status, body) = app.token_with(&pem, &app.creds.client_id, &app.creds.client_secret).await;
    assert_eq!(status, 401);
    assert_token_error(&body, 401, "PUB_CERT_NOT_REGISTERED");
}

#[actix_rt::test]
async fn a_revoked_certificate_is_not_registered_and_its_tokens_stop_working() {
    let app = spawn_app().await;
    let (id, client_id, secret, pem) = app.new_account("Revoked").await;
    let (status, body) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(status, 201);
    let token = body["access_token"].as_str().unwrap().to_owned();
    let fp = certs::parse_pem(&pem).unwrap().fingerprint;
    let (s, b) = app.admin("DELETE", &format!("/admin/accounts/{id}/certificates/{fp}"), None).await;
    assert_eq!(s, 204, "{b}");
    let (status, body) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(status, 401);
    assert_token_error(&body, 401, "PUB_CERT_NOT_REGISTERED");
    let (s, b) = app.get_with("/api/account", &token).await;
    assert_eq!(s, 401);
    assert_extended(&b, 401, "HTTP_ERROR");
}

#[actix_rt::test]
async fn unknown_client_and_wrong_secret_answer_the_same() {
    let app = spawn_app().await;
    let (s1, wrong_secret) =
        app.token_with(&app.creds.cert_pem, &app.creds.client_id, "not-the-secret").await;
    let unknown = uuid::Uuid::new_v4().to_string();
    let (s2, unknown_client) = app.token_with(&app.creds.cert_pem, &unknown, &app.creds.client_secret).await;
    assert_eq!((s1, s2), (401, 401));
    assert_token_error(&wrong_secret, 401, "PUB_INVALID_CREDENTIALS");
    assert_token_error(&unknown_client, 401, "PUB_INVALID_CREDENTIALS");
    // Same body but for the per-request fields.
    let strip = |mut v: Value| {
        for k in ["errorId", "timestamp"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v
    };
    assert_eq!(strip(wrong_secret), strip(unknown_client));
}

#[actix_rt::test]
async fn a_certificate_of_another_account_is_forbidden() {
    let app = spawn_app().await;
    let (_, _, _, other_pem) = app.new_account("Other").await;
    let (status, body) = app.token_with(&other_pem, &app.creds.client_id, &app.creds.client_secret).await;
    assert_eq!(status, 403);
    assert_token_error(&body, 403, "PUB_CERT_NOT_AUTHORIZED_FOR_ACCOUNT");
}

#[actix_rt::test]
async fn storage_that_does_not_answer_is_pub_auth_upstream_unavailable() {
    let store = Arc::new(MemoryStore::new());
    let storage = Storage::without_journal(store.clone()).unwrap();
    let app = spawn_in_process(storage.clone()).await;
    // Everything written so far into the store, so every read reaches it.
    storage.commit.checkpoint_now().unwrap();
    store.set_failing(true);
    let (status, body) =
        app.token_with(&app.creds.cert_pem, &app.creds.client_id, &app.creds.client_secret).await;
    assert_eq!(status, 503);
    assert_token_error(&body, 503, "PUB_AUTH_UPSTREAM_UNAVAILABLE");
    store.set_failing(false);
    let (status, _) =
        app.token_with(&app.creds.cert_pem, &app.creds.client_id, &app.creds.client_secret).await;
    assert_eq!(status, 201);
}

#[actix_rt::test]
async fn a_credential_record_that_does_not_decode_is_pub_auth_upstream_error() {
    let storage = Storage::memory().unwrap();
    let app = spawn_in_process(storage.clone()).await;
    let mut b = Batch::default();
    b.put(format!("client/{}", app.creds.client_id), b"not json".to_vec());
    storage.commit.commit_blocking(b).unwrap();
    let (status, body) =
        app.token_with(&app.creds.cert_pem, &app.creds.client_id, &app.creds.client_secret).await;
    assert_eq!(status, 502);
    assert_token_error(&body, 502, "PUB_AUTH_UPSTREAM_ERROR");
}

#[actix_rt::test]
async fn a_token_expires_after_1800_seconds_on_the_server_clock() {
    let app = spawn_app().await;
    let token = app.demo_token().await;
    app.advance(1790).await;
    assert_eq!(app.get_with("/api/account", &token).await.0, 200);
    app.advance(10).await;
    let (s, body) = app.get_with("/api/account", &token).await;
    assert_eq!(s, 401);
    assert_extended(&body, 401, "HTTP_ERROR");
    assert!(body["message"].as_str().unwrap().contains("expired"), "{body}");
}

#[actix_rt::test]
async fn tampered_alg_none_foreign_and_missing_tokens_are_401() {
    let app = spawn_app().await;
    let token = app.demo_token().await;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
    claims["exp"] = json!(claims["exp"].as_i64().unwrap() + 100_000);
    let tampered = format!("{}.{}.{}", parts[0], b64.encode(claims.to_string()), parts[2]);
    let none = format!("{}.{}.", b64.encode(r#"{"alg":"none","typ":"JWT"}"#), parts[1]);
    // A token signed by another server (another key) for the same ids.
    let other = spawn_app().await;
    let foreign = other.demo_token().await;
    for bad in [tampered.as_str(), none.as_str(), foreign.as_str(), "garbage"] {
        let (s, body) = app.get_with("/api/account", bad).await;
        assert_eq!(s, 401, "{bad}");
        assert_extended(&body, 401, "HTTP_ERROR");
    }
    let (s, body) = send(app.client.get(app.url("/api/account")), None).await;
    assert_eq!(s, 401);
    assert_extended(&body, 401, "HTTP_ERROR");
}

#[actix_rt::test]
async fn rotating_the_secret_retires_the_old_secret_and_its_tokens() {
    let app = spawn_app().await;
    let old_token = app.demo_token().await;
    // Tokens carry whole seconds; make the rotation fall in a later second.
    app.advance(1).await;
    let (s, body) =
        app.admin("POST", &format!("/admin/accounts/{}/secret", app.creds.account_id), None).await;
    assert_eq!(s, 200, "{body}");
    let new_secret = body["clientSecret"].as_str().unwrap();
    let (s, body) = app.token_with(&app.creds.cert_pem, &app.creds.client_id, &app.creds.client_secret).await;
    assert_eq!(s, 401);
    assert_token_error(&body, 401, "PUB_INVALID_CREDENTIALS");
    let (s, body) = app.token_with(&app.creds.cert_pem, &app.creds.client_id, new_secret).await;
    assert_eq!(s, 201, "{body}");
    assert_eq!(app.get_with("/api/account", &old_token).await.0, 401);
    let fresh = body["access_token"].as_str().unwrap();
    assert_eq!(app.get_with("/api/account", fresh).await.0, 200);
}

/// A GET with a bearer token and, when given, an `X-SSL-Client-Cert` header.
async fn get_presenting(
    app: &crate::helpers::TestApp,
    path: &str,
    token: &str,
    cert: Option<&str>,
) -> (u16, Value) {
    let mut req = app.client.get(app.url(path)).bearer_auth(token);
    if let Some(c) = cert {
        req = req.insert_header(("X-SSL-Client-Cert", c.to_owned()));
    }
    send(req, None).await
}

#[actix_rt::test]
async fn a_request_that_presents_a_certificate_must_present_the_tokens() {
    let app = spawn_app().await;
    let token = app.demo_token().await;
    let own = certs::url_encode_pem(&app.creds.cert_pem);
    let now = Utc::now();
    let other = certs::url_encode_pem(&cert(now - Duration::hours(1), now + Duration::days(1)));
    assert_eq!(get_presenting(&app, "/api/balance", &token, None).await.0, 200, "no header: served");
    assert_eq!(get_presenting(&app, "/api/balance", &token, Some(&own)).await.0, 200);
    assert_eq!(get_presenting(&app, "/api/balance", &token, Some("")).await.0, 200, "empty: none sent");
    for (presented, why) in [(other.as_str(), "another certificate"), ("not-a-pem", "a malformed header")] {
        let (s, b) = get_presenting(&app, "/api/balance", &token, Some(presented)).await;
        assert_eq!(s, 401, "{why}: {b}");
        assert_extended(&b, 401, "HTTP_ERROR");
        // Family B answers in its own shape.
        let (s, b) = get_presenting(&app, "/accounts/balances", &token, Some(presented)).await;
        assert_eq!(s, 401, "{why}: {b}");
        crate::helpers::assert_simple(&b, 401);
    }
}

#[actix_rt::test]
async fn require_client_cert_makes_the_tokens_certificate_mandatory_on_every_request() {
    let opts = crate::helpers::Options {
        env: vec![("PIXGW_REQUIRE_CLIENT_CERT".into(), "1".into())],
        ..Default::default()
    };
    let app = crate::helpers::spawn_with(opts).await;
    let token = app.demo_token().await;
    let own = certs::url_encode_pem(&app.creds.cert_pem);
    for missing in [None, Some("")] {
        let (s, b) = get_presenting(&app, "/api/balance", &token, missing).await;
        assert_eq!(s, 401, "{missing:?}: {b}");
        assert!(b["message"].as_str().is_some_and(|m| m.contains("X-SSL-Client-Cert")), "{b}");
    }
    assert_eq!(get_presenting(&app, "/api/balance", &token, Some(&own)).await.0, 200);
    // Routes without a client token are not affected.
    assert_eq!(get_presenting(&app, "/healthz", &token, None).await.0, 200);
}

#[actix_rt::test]
async fn failed_attempts_are_throttled_per_certificate_and_never_lock_a_client_out_from_other_accounts() {
    use pixgw::domain::throttle::{TOKEN_FAILURES_PER_CERT_MAX, TOKEN_FAILURE_WINDOW_SECONDS};
    let app = spawn_app().await;
    let (demo_pem, demo_id) = (app.creds.cert_pem.clone(), app.creds.client_id.clone());
    for _ in 0..TOKEN_FAILURES_PER_CERT_MAX {
        let (s, b) = app.token_with(&demo_pem, &demo_id, "wrong").await;
        assert_token_error(&b, s, "PUB_INVALID_CREDENTIALS");
    }
    // The certificate is throttled, before its credentials are even read.
    let req = app
        .client
        .post(app.url("/api/auth/token"))
        .insert_header(("X-SSL-Client-Cert", certs::url_encode_pem(&demo_pem)));
    let mut res =
        req.send_json(&json!({"clientId": demo_id, "clientSecret": app.creds.client_secret})).await.unwrap();
    assert_eq!(res.status().as_u16(), 429);
    let wait: i64 = res.headers().get("retry-after").unwrap().to_str().unwrap().parse().unwrap();
    assert!((1..=TOKEN_FAILURE_WINDOW_SECONDS).contains(&wait), "{wait}");
    let body: Value = res.json().await.unwrap();
    assert_token_error(&body, 429, "PUB_TOO_MANY_ATTEMPTS");
    app.advance(TOKEN_FAILURE_WINDOW_SECONDS).await;
    let (s, b) = app.token_with(&demo_pem, &demo_id, &app.creds.client_secret).await;
    assert_eq!(s, 201, "the window ended: {b}");

    // Guesses on the Demo clientId with certificates of another account: throttled per
    // clientId across certificates, while the Demo's own certificate still gets its token.
    let (other, _, _, first) = app.new_account("Other").await;
    let mut pems = vec![first];
    let now = Utc::now();
    for _ in 0..2 {
        let pem = cert(now - Duration::hours(1), now + Duration::days(1));
        let (s, b) = app
            .admin("POST", &format!("/admin/accounts/{other}/certificates"), Some(json!({"pem": pem})))
            .await;
        assert_eq!(s, 201, "{b}");
        pems.push(pem);
    }
    let per_client = pixgw::domain::throttle::TOKEN_FAILURES_PER_CLIENT_MAX;
    let mut statuses = vec![];
    for i in 0..per_client + 1 {
        let pem = &pems[i / TOKEN_FAILURES_PER_CERT_MAX];
        statuses.push(app.token_with(pem, &demo_id, "guess").await.0);
    }
    assert!(statuses[..per_client].iter().all(|s| *s == 401), "{statuses:?}");
    assert_eq!(statuses[per_client], 429, "the clientId is throttled for other accounts' certificates");
    let (s, b) = app.token_with(&demo_pem, &demo_id, &app.creds.client_secret).await;
    assert_eq!(s, 201, "the client's own certificate is not locked out: {b}");
}

#[actix_rt::test]
async fn a_rotated_signing_key_keeps_earlier_tokens_until_a_second_rotation_and_survives_a_restart() {
    let mut app = crate::helpers::TestApp::spawn_fast().await;
    let before = app.demo_token().await;
    let (s, r) = app.admin("POST", "/admin/token-key/rotation", None).await;
    assert_eq!(s, 200, "{r}");
    assert!(r["rotatedAt"].is_string() && r["previousTokensValidUntil"].is_string(), "{r}");
    let after = app.demo_token().await;
    assert_ne!(before, after);
    for t in [&before, &after] {
        assert_eq!(app.get_with("/api/balance", t).await.0, 200, "both verify after one rotation");
    }
    // The rotation is stored: a restart verifies both the same way.
    app.restart(&crate::helpers::Options::default());
    for t in [&before, &after] {
        assert_eq!(app.get_with("/api/balance", t).await.0, 200, "both verify after a restart");
    }
    // A second rotation drops the tokens of two keys ago.
    let (s, _) = app.admin("POST", "/admin/token-key/rotation", None).await;
    assert_eq!(s, 200);
    let (s, b) = app.get_with("/api/balance", &before).await;
    assert_eq!(s, 401, "{b}");
    assert_eq!(app.get_with("/api/balance", &after).await.0, 200);
    // Only an operator rotates.
    let res = app.client.post(app.url("/admin/token-key/rotation")).bearer_auth(&after).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 401);
}

#[actix_rt::test]
async fn an_account_over_its_request_rate_is_told_when_to_come_back_and_others_are_not_slowed() {
    let opts = crate::helpers::Options {
        env: vec![("PIXGW_ACCOUNT_RATE_LIMIT".into(), "1".into())],
        ..Default::default()
    };
    let app = crate::helpers::spawn_with(opts).await;
    let token = app.demo_token().await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..10 {
        let res = app.client.get(app.url("/api/balance")).bearer_auth(&token).send().await.unwrap();
        if res.status().as_u16() == 429 {
            retry_after = res.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
        }
        statuses.push(res.status().as_u16());
    }
    assert!(statuses.contains(&200) && statuses.contains(&429), "{statuses:?}");
    assert_eq!(retry_after.as_deref(), Some("1"), "one request a second: back within a second");
    // Another account has a bucket of its own, and a request is counted once, also when the
    // Idempotency-Key layer identifies its caller first (its one token is enough).
    let (_, client_id, secret, pem) = app.new_account("Other").await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let body = r#"{"url": "https://hooks.example.com/pix", "eventType": "cash_in"}"#;
    let (s, b) = app
        .post_raw("/api/webhooks", t["access_token"].as_str().unwrap(), body, &[("Idempotency-Key", "once")])
        .await;
    assert_eq!(s, 201, "{b}");
}

/// Statuses of `n` balance reads in a row with `token`.
async fn balance_statuses(app: &crate::helpers::TestApp, token: &str, n: usize) -> Vec<u16> {
    let mut statuses = Vec::new();
    for _ in 0..n {
        statuses.push(app.get_with("/api/balance", token).await.0);
    }
    statuses
}

#[actix_rt::test]
async fn an_operator_sets_one_accounts_request_rate_and_gives_it_back_the_servers() {
    let app = crate::helpers::spawn_app().await;
    let token = app.demo_token().await;
    let path = format!("/admin/accounts/{}", app.creds.account_id);
    for bad in
        [serde_json::json!(0), serde_json::json!(1_000_001), serde_json::json!("5"), serde_json::json!(1.5)]
    {
        let (s, b) = app.admin("PATCH", &path, Some(serde_json::json!({"rateLimit": bad}))).await;
        assert_eq!(s, 400, "{bad}: {b}");
    }
    assert!(balance_statuses(&app, &token, 10).await.iter().all(|s| *s == 200), "no limit on this server");

    let (s, b) = app.admin("PATCH", &path, Some(serde_json::json!({"rateLimit": 1}))).await;
    assert_eq!((s, &b["rateLimit"]), (200, &serde_json::json!(1)), "{b}");
    assert_eq!(app.admin("GET", &path, None).await.1["settings"]["rateLimit"], 1);
    let limited = balance_statuses(&app, &token, 10).await;
    assert!(limited.contains(&200) && limited.contains(&429), "{limited:?}");
    // Another account keeps the server's (none).
    let (_, client_id, secret, pem) = app.new_account("Unlimited").await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let other = balance_statuses(&app, t["access_token"].as_str().unwrap(), 10).await;
    assert!(other.iter().all(|s| *s == 200), "{other:?}");

    let (s, b) = app.admin("PATCH", &path, Some(serde_json::json!({"rateLimit": null}))).await;
    assert_eq!(s, 200, "{b}");
    assert!(b.get("rateLimit").is_none(), "{b}");
    assert!(balance_statuses(&app, &token, 10).await.iter().all(|s| *s == 200), "the limit was given back");
}
