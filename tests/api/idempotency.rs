//! The `Idempotency-Key` header on the client POST routes: a repeat answers the first
//! response and moves nothing, another request under the same key is 422, a request still
//! running or interrupted is 409, a refusal leaves the key free, and all of it survives a
//! restart.

use futures::future::join_all;
use pixgw::domain::ids::AccountId;
use pixgw::store::{Repo, RequestRecord, Storage};
use serde_json::Value;

use crate::helpers::{assert_extended, cash_out_body, spawn_in_process, Options, TestApp};

/// POST with an Idempotency-Key; answers (status, replayed?, body).
async fn post(app: &TestApp, token: &str, path: &str, body: &str, key: &str) -> (u16, bool, Value) {
    let req = app
        .client
        .post(app.url(path))
        .bearer_auth(token)
        .insert_header(("Idempotency-Key", key))
        .content_type("application/json");
    let mut res = req.send_body(body.to_owned()).await.unwrap();
    let replayed = res.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
    let json = res.json().await.unwrap_or(Value::Null);
    (res.status().as_u16(), replayed, json)
}

#[actix_rt::test]
async fn a_repeat_answers_the_first_response_and_another_request_under_the_key_is_422() {
    let mut app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (s, replayed, first) =
        post(&app, &token, "/api/pix/cash-out", &cash_out_body("k1", "10"), "key-1").await;
    assert_eq!((s, replayed), (201, false), "{first}");
    let (s, replayed, again) =
        post(&app, &token, "/api/pix/cash-out", &cash_out_body("k1", "10"), "key-1").await;
    assert_eq!((s, replayed, &again), (201, true, &first), "the first response, not a duplicate externalId");
    for (path, body) in [
        ("/api/pix/cash-out", cash_out_body("k2", "10")),
        ("/api/pix/cash-out", cash_out_body("k1", "11")),
        ("/sandbox/pix-in", r#"{"amount": 10}"#.to_owned()),
    ] {
        let (s, _, b) = post(&app, &token, path, &body, "key-1").await;
        assert_eq!(s, 422, "{path} {body}: {b}");
        assert_extended(&b, 422, "UNPROCESSABLE");
    }
    assert_eq!(app.balance(&token).await.2, "90.00", "moved once");
    // A route with no externalId of its own: the key is what keeps it from running twice.
    let (s, _, credit) = post(&app, &token, "/sandbox/pix-in", r#"{"amount": 5}"#, "key-2").await;
    assert_eq!(s, 201);
    let (s, replayed, again) = post(&app, &token, "/sandbox/pix-in", r#"{"amount": 5}"#, "key-2").await;
    assert_eq!((s, replayed, &again), (201, true, &credit));
    assert_eq!(app.balance(&token).await.2, "95.00");
    // Keys are the account's own: another account's identical key is another request.
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let other = t["access_token"].as_str().unwrap().to_owned();
    let (s, replayed, _) = post(&app, &other, "/sandbox/pix-in", r#"{"amount": 5}"#, "key-2").await;
    assert_eq!((s, replayed), (201, false));
    // The record is durable: a restart still answers the first response.
    app.restart(&Options::default());
    let token = app.demo_token().await;
    let (s, replayed, after) =
        post(&app, &token, "/api/pix/cash-out", &cash_out_body("k1", "10"), "key-1").await;
    assert_eq!((s, replayed, &after), (201, true, &first));
    assert_eq!(app.balance(&token).await.2, "95.00");
}

#[actix_rt::test]
async fn concurrent_repeats_run_once_and_a_refusal_leaves_the_key_free() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "5").await;
    // Refused (insufficient balance): nothing happened, so the key may be used again.
    let (s, _, b) = post(&app, &token, "/api/pix/cash-out", &cash_out_body("c1", "20"), "key-c").await;
    assert_eq!(s, 400, "{b}");
    app.fund(&token, "95").await;
    let body = cash_out_body("c1", "20");
    let sends = (0..12).map(|_| post(&app, &token, "/api/pix/cash-out", &body, "key-c"));
    let answers = join_all(sends).await;
    let ran: Vec<_> = answers.iter().filter(|(s, replayed, _)| *s == 201 && !replayed).collect();
    assert_eq!(ran.len(), 1, "{answers:?}");
    for (s, replayed, b) in &answers {
        assert!(*s == 201 || *s == 409, "{s} {b}");
        if *s == 201 {
            assert_eq!(b, &ran[0].2, "replayed {replayed}");
        }
    }
    assert_eq!(app.balance(&token).await.2, "80.00");
    // A malformed key is refused and runs nothing.
    let (s, _, b) = post(&app, &token, "/api/pix/cash-out", &cash_out_body("c2", "1"), "has space").await;
    assert_eq!(s, 400, "{b}");
    assert_eq!(app.balance(&token).await.2, "80.00");
}

#[actix_rt::test]
async fn a_first_request_interrupted_before_its_response_was_recorded_is_409_never_run_again() {
    let storage = Storage::memory().unwrap();
    let app = spawn_in_process(storage.clone()).await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    // What a crash between the record and the response leaves: a started request.
    let body = cash_out_body("lost", "10");
    let started = RequestRecord {
        fingerprint: pixgw::http::idempotency::fingerprint("POST", "/api/pix/cash-out", body.as_bytes()),
        at: chrono::Utc::now(),
        response: None,
    };
    let repo = Repo::new(&storage);
    let demo = AccountId::new(app.creds.account_id).unwrap();
    repo.put_request_record(demo, "key-lost", &started).await.unwrap();
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body, &[("Idempotency-Key", "key-lost")]).await;
    assert_eq!(s, 409, "{b}");
    assert!(b["message"].as_str().unwrap().contains("outcome is unknown"), "{b}");
    assert_eq!(app.balance(&token).await.2, "100.00");
    // It never changes, so it says nothing of when to retry (a client obeying would loop).
    let res = app
        .client
        .post(app.url("/api/pix/cash-out"))
        .bearer_auth(&token)
        .insert_header(("Idempotency-Key", "key-lost"))
        .content_type("application/json")
        .send_body(body.clone())
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 409);
    assert!(res.headers().get("retry-after").is_none(), "{:?}", res.headers());
}

/// A 500 whose body says nothing was recorded and to retry (`PROVIDER_DOWN`) frees its key:
/// the retry runs. Before, it was 409 "interrupted" with `Retry-After: 1` for 24 hours.
#[actix_rt::test]
async fn a_500_that_recorded_nothing_lets_the_retry_with_the_same_key_run() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let body = cash_out_body("down-then-up", "10");
    let key = ("Idempotency-Key", "key-down");
    let (s, b) = app
        .post_raw("/api/pix/cash-out", &token, &body, &[key, ("X-Sandbox-Scenario", "PROVIDER_DOWN")])
        .await;
    assert_eq!(s, 500, "{b}");
    assert!(b["message"].as_str().unwrap().contains("nothing was recorded"), "{b}");
    assert_eq!(app.balance(&token).await.2, "100.00");
    let (s, first) = app.post_raw("/api/pix/cash-out", &token, &body, &[key]).await;
    assert_eq!(s, 201, "{first}");
    let (s, replay) = app.post_raw("/api/pix/cash-out", &token, &body, &[key]).await;
    assert_eq!((s, &replay), (201, &first));
    let (_, blocked, available) = app.balance(&token).await;
    assert_eq!(available, "90.00", "blocked {blocked}: one cash-out, not two");
}
