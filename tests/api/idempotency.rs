//! The `Idempotency-Key` header on the client POST routes: a repeat answers the first
//! response and moves nothing, another request under the same key is 422, a request still
//! running is 409, an interrupted one resolves itself where its outcome can be known (409
//! where not), a refusal leaves the key free, and all of it survives a restart.

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
    // The same request written another way (spacing, member order, a trailing zero, the
    // path spelled with an escape) is the same request: the first response, nothing moved.
    let rewritten: Value = serde_json::from_str(&cash_out_body("k1", "10")).unwrap();
    let mut members: Vec<(String, Value)> = rewritten.as_object().unwrap().clone().into_iter().collect();
    members.reverse();
    let reordered = format!(
        "{{\n  {}\n}}",
        members.iter().map(|(k, v)| format!("{k:?} :  {v}")).collect::<Vec<_>>().join(",\n  ")
    )
    .replace(" 10,", " 10.00,")
    .replace(" 10\n", " 10.00\n");
    assert_ne!(reordered.as_bytes(), cash_out_body("k1", "10").as_bytes());
    for path in ["/api/pix/cash-out", "/api/pix/cash%2Dout"] {
        let (s, replayed, again) = post(&app, &token, path, &reordered, "key-1").await;
        assert_eq!((s, replayed, &again), (201, true, &first), "{path} {reordered}");
    }
    let (s, replayed, again) = post(&app, &token, "/sandbox/pix-in", "{ \"amount\" : 5.0 }", "key-2").await;
    assert_eq!((s, replayed, &again), (201, true, &credit));
    assert_eq!(app.balance(&token).await.2, "95.00", "nothing moved again");
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

/// What a crash or a failover between a request's record and its response leaves: the
/// record of a started request under `key`, for `body` sent to `path`.
async fn interrupted(storage: &Storage, app: &TestApp, path: &str, body: &str, key: &str) {
    let started = RequestRecord {
        fingerprint: pixgw::http::idempotency::fingerprint("POST", path, body.as_bytes()),
        at: chrono::Utc::now(),
        response: None,
    };
    let demo = AccountId::new(app.creds.account_id).unwrap();
    Repo::new(storage).put_request_record(demo, key, &started).await.unwrap();
}

/// An interrupted first request resolves itself where its outcome can be known: a payment
/// stored under its externalId is answered (201, replayed) and one that is not runs now,
/// once; anything else, or a payment whose externalId another request took, is 409 with no
/// `Retry-After` (it never changes). Nothing runs twice.
#[actix_rt::test]
async fn an_interrupted_first_request_is_answered_when_its_outcome_is_known_and_409_when_not() {
    let storage = Storage::memory().unwrap();
    let app = spawn_in_process(storage.clone()).await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let keyed = |key: &'static str| [("Idempotency-Key", key)];

    // It never happened: it runs now, and from then on the key replays it.
    let lost = cash_out_body("lost", "10");
    interrupted(&storage, &app, "/api/pix/cash-out", &lost, "key-lost").await;
    let (s, first) = app.post_raw("/api/pix/cash-out", &token, &lost, &keyed("key-lost")).await;
    assert_eq!(s, 201, "{first}");
    let (s, replayed, again) = post(&app, &token, "/api/pix/cash-out", &lost, "key-lost").await;
    assert_eq!((s, replayed, &again["transactionId"]), (201, true, &first["transactionId"]));
    assert_eq!(app.balance(&token).await.2, "90.00", "debited once");

    // It happened (its payment is stored): the key answers that payment.
    let landed = cash_out_body("landed", "5");
    let (s, made) = app.post_raw("/api/pix/cash-out", &token, &landed, &[]).await;
    assert_eq!(s, 201, "{made}");
    interrupted(&storage, &app, "/api/pix/cash-out", &landed, "key-landed").await;
    let (s, replayed, answer) = post(&app, &token, "/api/pix/cash-out", &landed, "key-landed").await;
    assert_eq!((s, replayed), (201, true), "{answer}");
    assert_eq!(
        (&answer["transactionId"], answer["externalId"].as_str()),
        (&made["transactionId"], Some("landed"))
    );
    assert_eq!(app.balance(&token).await.2, "85.00", "not debited again");

    // Its externalId was taken by another request (another value): not this one's outcome.
    interrupted(&storage, &app, "/api/pix/cash-out", &cash_out_body("landed", "7"), "key-other").await;
    let (s, _, b) = post(&app, &token, "/api/pix/cash-out", &cash_out_body("landed", "7"), "key-other").await;
    assert_eq!(s, 409, "{b}");
    // Not a payment: its outcome is unknown here, for good.
    let cob = r#"{"calendario": {"expiracao": 3600}, "valor": {"original": "1.00"}}"#;
    interrupted(&storage, &app, "/cob", cob, "key-cob").await;
    let res = app
        .client
        .post(app.url("/cob"))
        .bearer_auth(&token)
        .insert_header(("Idempotency-Key", "key-cob"))
        .content_type("application/json")
        .send_body(cob)
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 409);
    assert!(res.headers().get("retry-after").is_none(), "it never changes: {:?}", res.headers());
    assert_eq!(app.balance(&token).await.2, "85.00");
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

/// Any method with an Idempotency-Key (or none); answers (status, replayed?, body).
async fn with_key(
    app: &TestApp,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&str>,
    key: Option<&str>,
) -> (u16, bool, Value) {
    let method = awc::http::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = app.client.request(method, app.url(path)).bearer_auth(token);
    if let Some(k) = key {
        req = req.insert_header(("Idempotency-Key", k));
    }
    let mut res = match body {
        Some(b) => req.content_type("application/json").send_body(b.to_owned()).await.unwrap(),
        None => req.send().await.unwrap(),
    };
    let replayed = res.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
    let json = res.json().await.unwrap_or(Value::Null);
    (res.status().as_u16(), replayed, json)
}

#[actix_rt::test]
async fn every_client_write_honours_the_key_and_the_routes_that_take_none_refuse_it() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (phone, _, _) = crate::helpers::directory_key("PHONE", 0);
    let dict = format!(
        r#"{{"pixKey": "{phone}", "payment": {{"currency": "BRL", "amount": 10}}, "description": "rent"}}"#
    );
    let cob = r#"{"calendario": {"expiracao": 3600}, "valor": {"original": "7.50"}}"#;
    // Each of these made a second record (or moved money twice) with the same key before.
    let mut firsts = Vec::new();
    for (method, path, body) in [
        ("POST", "/dict/pix", Some(dict.as_str())),
        ("POST", "/cob", Some(cob)),
        ("POST", "/locrec", Some("{}")),
        ("PUT", "/cob/aaaabbbbccccddddeeeeffff0000111122", Some(cob)),
    ] {
        let key = format!("once-{path}");
        // /dict/pix asks for its own key too; a fresh one each time, as a careless client
        // would send: the Idempotency-Key is what says the request is the same.
        let headers_of = || (path == "/dict/pix").then(|| uuid::Uuid::new_v4().to_string());
        let send = |x: Option<String>| {
            let app = &app;
            let token = token.clone();
            let key = key.clone();
            async move {
                let method = awc::http::Method::from_bytes(method.as_bytes()).unwrap();
                let mut req = app
                    .client
                    .request(method, app.url(path))
                    .bearer_auth(&token)
                    .insert_header(("Idempotency-Key", key.as_str()))
                    .content_type("application/json");
                if let Some(x) = x {
                    req = req.insert_header(("x-idempotency-key", x));
                }
                let mut res = req.send_body(body.unwrap().to_owned()).await.unwrap();
                let replayed = res.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
                let json: Value = res.json().await.unwrap_or(Value::Null);
                (res.status().as_u16(), replayed, json)
            }
        };
        let (s, replayed, first) = send(headers_of()).await;
        assert_eq!((s, replayed), (201, false), "{method} {path}: {first}");
        let (s, replayed, again) = send(headers_of()).await;
        assert_eq!((s, replayed, &again), (201, true, &first), "{method} {path}: the first answer again");
        firsts.push(first);
    }
    assert_eq!(app.balance(&token).await.2, "90.00", "the /dict/pix transfer moved money once");
    // One cob made by POST and one by PUT: the list shows two, not four.
    let made: chrono::DateTime<chrono::Utc> =
        firsts[1]["calendario"]["criacao"].as_str().unwrap().parse().unwrap();
    let range = format!(
        "inicio={}&fim={}",
        (made - chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ"),
        (made + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ")
    );
    let (s, list) = app.get_with(&format!("/cob?{range}"), &token).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["cobs"].as_array().unwrap().len(), 2, "{list}");
    let (s, locs) = app.get_with(&format!("/locrec?{range}"), &token).await;
    assert_eq!(s, 200, "{locs}");
    assert_eq!(locs["loc"].as_array().unwrap().len(), 1, "{locs}");

    // A PATCH too: the second answers what the first did, not 409 "no longer ATIVA".
    let txid = "aaaabbbbccccddddeeeeffff0000111122";
    let patch = r#"{"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"}"#;
    let (s, r1, first) =
        with_key(&app, "PATCH", &format!("/cob/{txid}"), &token, Some(patch), Some("p")).await;
    assert_eq!((s, r1), (200, false), "{first}");
    let (s, r2, again) =
        with_key(&app, "PATCH", &format!("/cob/{txid}"), &token, Some(patch), Some("p")).await;
    assert_eq!((s, r2, &again), (200, true, &first), "not 409 'no longer ATIVA'");

    // The token route and the operators' routes take no key: 400 naming it, and nothing runs.
    let (s, _, b) = with_key(&app, "POST", "/api/auth/token", "", Some("{}"), Some("t")).await;
    assert_eq!(s, 400, "{b}");
    assert_extended(&b, 400, "HTTP_ERROR");
    assert!(b.to_string().contains("Idempotency-Key"), "{b}");
    let (s, _, b) =
        with_key(&app, "POST", "/admin/accounts", &app.creds.admin_token, Some("{}"), Some("t")).await;
    assert_eq!(s, 400, "{b}");
    assert!(b.to_string().contains("Idempotency-Key"), "{b}");
    // A read ignores it.
    let (s, replayed, b) = with_key(&app, "GET", "/api/balance", &token, None, Some("r")).await;
    assert_eq!((s, replayed), (200, false), "{b}");
}
