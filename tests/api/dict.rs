//! Family B: `POST /dict/pix`.

use serde_json::{json, Value};

use crate::helpers::{assert_simple, directory_key, TestApp};

fn key() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn transfer(pix_key: &str, amount: &str) -> String {
    format!(
        r#"{{"pixKey": "{pix_key}", "payment": {{"currency": "BRL", "amount": {amount}}}, "description": "rent"}}"#
    )
}

async fn setup() -> (TestApp, String) {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    (app, token)
}

#[actix_rt::test]
async fn the_idempotency_key_is_required_and_must_be_a_uuid_v4() {
    let (app, token) = setup().await;
    let (phone, _, _) = directory_key("PHONE", 0);
    for headers in [vec![], vec![("x-idempotency-key", "abc")]] {
        let (s, b) = app.post_raw("/dict/pix", &token, &transfer(&phone, "1"), &headers).await;
        assert_eq!(s, 400);
        assert_simple(&b, 400);
        assert!(b["message"].as_str().unwrap().contains("x-idempotency-key"), "{b}");
    }
}

#[actix_rt::test]
async fn a_replay_answers_the_first_transfer_and_moves_nothing() {
    let (app, token) = setup().await;
    let (phone, _, _) = directory_key("PHONE", 0);
    let k = key();
    let (s, first) =
        app.post_raw("/dict/pix", &token, &transfer(&phone, "10.5"), &[("x-idempotency-key", &k)]).await;
    assert_eq!(s, 201, "{first}");
    assert_eq!(first["type"], "PENDING");
    assert_eq!(first["endToEndId"].as_str().unwrap().len(), 32);
    assert_eq!(serde_json::to_string(&first["payment"]["amount"]).unwrap(), "10.50");
    // The same request, even spelled 10.50, is the same transfer.
    let (s, again) =
        app.post_raw("/dict/pix", &token, &transfer(&phone, "10.50"), &[("x-idempotency-key", &k)]).await;
    assert_eq!(s, 200);
    assert_eq!(again, first);
    let (s, b) =
        app.post_raw("/dict/pix", &token, &transfer(&phone, "11"), &[("x-idempotency-key", &k)]).await;
    assert_eq!(s, 422);
    assert_simple(&b, 422);
    // Only the first moved money (gross may already show its settlement).
    assert_eq!(app.balance(&token).await.2, "89.50");
    let t = app.wait_final(&token, &first["id"].to_string()).await;
    assert_eq!(t["status"], "CONFIRMED");
    assert_eq!(t["counterpart"]["keyType"], "PHONE", "the directory's words");
    assert_eq!(app.balance(&token).await, ("89.50".into(), "0.00".into(), "89.50".into()));
    // The settled end-to-end id replaces the provisional one.
    assert_ne!(t["endToEndId"], first["endToEndId"]);
}

#[actix_rt::test]
async fn business_rejections_are_422_and_field_errors_400() {
    let (app, token) = setup().await;
    let (email, doc, ispb) = directory_key("EMAIL", 2);
    let post = |body: String| {
        let (app, token) = (&app, token.clone());
        async move { app.post_raw("/dict/pix", &token, &body, &[("x-idempotency-key", &key())]).await }
    };
    let cases_422 = [
        transfer("nobody@nowhere.example", "1"),
        transfer(&email, "1000"),
        format!(
            r#"{{"pixKey": "{email}", "payment": {{"currency": "BRL", "amount": 1}}, "ispbDeny": ["{ispb}"]}}"#
        ),
        format!(
            r#"{{"pixKey": "{email}", "priority": "HIGH", "creditorDocument": "52998224725", "payment": {{"currency": "BRL", "amount": 1}}}}"#
        ),
    ];
    for body in cases_422 {
        let (s, b) = post(body.clone()).await;
        assert_eq!(s, 422, "{body}: {b}");
        assert_simple(&b, 422);
    }
    let cases_400 = [
        transfer("11987654321", "1"), // a phone without +55 is not a directory key
        transfer(&email, "1.005"),
        transfer(&email, "0"),
        format!(
            r#"{{"pixKey": "{email}", "priority": "HIGH", "payment": {{"currency": "BRL", "amount": 1}}}}"#
        ),
        format!(r#"{{"pixKey": "{email}", "expiration": 0, "payment": {{"currency": "BRL", "amount": 1}}}}"#),
        format!(
            r#"{{"pixKey": "{email}", "expiration": 10801, "payment": {{"currency": "BRL", "amount": 1}}}}"#
        ),
        format!(r#"{{"pixKey": "{email}", "payment": {{"currency": "USD", "amount": 1}}}}"#),
        format!(r#"{{"pixKey": "{email}"}}"#),
        format!(
            r#"{{"pixKey": "{email}", "payment": {{"currency": "BRL", "amount": 1}}, "ispbDeny": ["1"]}}"#
        ),
    ];
    for body in cases_400 {
        let (s, b) = post(body.clone()).await;
        assert_eq!(s, 400, "{body}: {b}");
        assert_simple(&b, 400);
    }
    // The interface fixes payment.amount as a number here (docs/interface.md "Money"): a
    // string is refused, and the answer says what to send instead.
    let (s, b) = post(transfer(&email, r#""2.00""#)).await;
    assert_eq!(s, 400, "{b}");
    assert!(b.to_string().contains("must be a JSON number such as 10.50"), "{b}");
    assert_eq!(app.balance(&token).await.0, "100.00");
    // HIGH with the right creditor document settles at once.
    let body = format!(
        r#"{{"pixKey": "{email}", "priority": "HIGH", "creditorDocument": "{doc}", "payment": {{"currency": "BRL", "amount": 1}}}}"#
    );
    let (s, b) = post(body).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(app.wait_final(&token, &b["id"].to_string()).await["status"], "CONFIRMED");
}

#[actix_rt::test]
async fn a_transfer_queued_past_its_expiration_fails_and_returns_the_hold() {
    let (app, token) = setup().await;
    let (evp, _, _) = directory_key("EVP", 3);
    let body =
        format!(r#"{{"pixKey": "{evp}", "expiration": 60, "payment": {{"currency": "BRL", "amount": 25}}}}"#);
    let (s, b) = app
        .post_raw(
            "/dict/pix",
            &token,
            &body,
            &[("x-idempotency-key", &key()), ("X-Sandbox-Scenario", "STUCK")],
        )
        .await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(app.balance(&token).await, ("100.00".into(), "25.00".into(), "75.00".into()));
    app.advance(59).await;
    let id = b["id"].to_string();
    let (_, t) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
    assert_eq!(t["status"], "PENDING");
    app.advance(1).await;
    let (_, t): (u16, Value) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
    assert_eq!((t["status"].as_str(), t["errorCode"].as_str()), (Some("ERROR"), Some("EXPIRED")), "{t}");
    assert_eq!(app.balance(&token).await, ("100.00".into(), "0.00".into(), "100.00".into()));
    let _ = json!(null);
}

#[actix_rt::test]
async fn provider_down_is_a_500_that_records_nothing() {
    let (app, token) = setup().await;
    let (phone, _, _) = directory_key("PHONE", 1);
    let k = key();
    let (s, b) = app
        .post_raw(
            "/dict/pix",
            &token,
            &transfer(&phone, "5"),
            &[("x-idempotency-key", &k), ("X-Sandbox-Scenario", "PROVIDER_DOWN")],
        )
        .await;
    assert_eq!(s, 500);
    assert_simple(&b, 500);
    assert_eq!(app.balance(&token).await.0, "100.00");
    // The key was not used: the same key with the same body is a new transfer.
    let (s, _) =
        app.post_raw("/dict/pix", &token, &transfer(&phone, "5"), &[("x-idempotency-key", &k)]).await;
    assert_eq!(s, 201);
}

#[actix_rt::test]
async fn concurrent_replays_all_answer_the_one_transfer() {
    let (app, token) = setup().await;
    let (phone, _, _) = directory_key("PHONE", 2);
    let k = key();
    let body = transfer(&phone, "7");
    let headers = [("x-idempotency-key", k.as_str())];
    let results =
        futures::future::join_all((0..20).map(|_| app.post_raw("/dict/pix", &token, &body, &headers))).await;
    let created: Vec<&Value> = results.iter().filter(|(s, _)| *s == 201).map(|(_, b)| b).collect();
    assert_eq!(created.len(), 1, "{results:?}");
    for (s, b) in &results {
        assert!(*s == 201 || *s == 200, "{s} {b}");
        assert_eq!(b, created[0]);
    }
    app.wait_final(&token, &created[0]["id"].to_string()).await;
    assert_eq!(app.balance(&token).await, ("93.00".into(), "0.00".into(), "93.00".into()));
}
