//! MED cases: each path (approved, rejected, cancelled) with the balance at every step, a
//! MED on more than is available, an unreconciled MED, the webhooks, and `GET /api/med`
//! with its filters, its 400 cases and its 429.

use serde_json::{json, Value};

use crate::helpers::{assert_extended, spawn_with, Options, TestApp};
use crate::receiver::{signature_verifies, Receiver};

/// A received PIX of `amount`: (transactionId, endToEndId).
async fn receive(app: &TestApp, token: &str, amount: &str) -> (String, String) {
    let body = format!(r#"{{"amount": {amount}, "payerName": "Ana", "payerDocument": "52998224725"}}"#);
    let (s, b) = app.post_raw("/sandbox/pix-in", token, &body, &[]).await;
    assert_eq!(s, 201, "{b}");
    (b["transactionId"].as_str().unwrap().to_owned(), b["endToEndId"].as_str().unwrap().to_owned())
}

async fn open(app: &TestApp, token: &str, body: Value) -> (u16, Value) {
    app.post_raw("/sandbox/med", token, &body.to_string(), &[]).await
}

async fn close(app: &TestApp, token: &str, id: &Value, action: &str, body: Value) -> (u16, Value) {
    app.post_raw(&format!("/sandbox/med/{id}/{action}"), token, &body.to_string(), &[]).await
}

async fn balance(app: &TestApp, token: &str) -> (String, String, String) {
    app.balance(token).await
}

fn b3(gross: &str, blocked: &str, net: &str) -> (String, String, String) {
    (gross.into(), blocked.into(), net.into())
}

#[actix_rt::test]
async fn an_approved_med_blocks_then_debits_as_a_refund_in() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (tid, e2e) = receive(&app, &token, "100").await;
    let (s, m) = open(
        &app,
        &token,
        json!({"endToEnd": e2e, "amount": 30, "cause": "SOCIAL_ENGINEERING", "description": "scam call"}),
    )
    .await;
    assert_eq!(s, 201, "{m}");
    assert_eq!((m["status"].as_str(), m["reason"].as_str()), (Some("RECEIVED"), Some("REFUND_REQUEST")));
    assert_eq!(m["isReconciled"], true);
    let (_, t) = app.get_with(&format!("/api/transactions/{tid}"), &token).await;
    assert_eq!(m["originalTransactionId"], t["id"]);
    assert_eq!(m["endToEnd"], e2e.as_str());
    assert_eq!(m["originalTransaction"]["document"], "***.982.247-**");
    assert_eq!(serde_json::to_string(&m["originalTransaction"]["amount"]).unwrap(), "100.00");
    assert_eq!(m["contestedBank"]["ispb"], "99999999");
    assert!(m["requestingBank"]["ispb"].is_string() && m["requestingBank"]["name"].is_string());
    assert_eq!(balance(&app, &token).await, b3("100.00", "30.00", "70.00"), "the disputed amount is blocked");
    let (s, done) =
        close(&app, &token, &m["id"], "analyze", json!({"result": "APPROVED", "details": "confirmed fraud"}))
            .await;
    assert_eq!(s, 200, "{done}");
    assert_eq!(
        (done["status"].as_str(), done["analysisResult"].as_str()),
        (Some("ANALYZED"), Some("APPROVED"))
    );
    assert_eq!(done["analysisDetails"], "confirmed fraud");
    assert_eq!(balance(&app, &token).await, b3("70.00", "0.00", "70.00"), "debited");
    let (_, refunds) = app.get_with("/api/transactions?type=REFUND_IN", &token).await;
    assert_eq!(refunds["metadata"]["total"], 1, "{refunds}");
    let r = &refunds["data"][0];
    assert_eq!((r["status"].as_str(), r["movementType"].as_str()), (Some("Confirmado"), Some("DEBIT")));
    assert_eq!(serde_json::to_string(&r["originalAmount"]).unwrap(), "30.00");
    assert_eq!(done["refundTransactionId"], r["id"]);
    // What the MED took no longer counts as refundable (with money enough to refund).
    app.fund(&token, "100").await;
    let (s, b) = app
        .post_raw(
            &format!("/api/pix/refund-in/{tid}"),
            &token,
            r#"{"refundValue": 70.01, "reason": "x", "externalId": "after-med"}"#,
            &[],
        )
        .await;
    assert_eq!((s, b["code"].as_str()), (400, Some("REFUND_AMOUNT_EXCEEDS_REFUNDABLE")), "{b}");
    // It is final.
    let (s, b) = close(&app, &token, &m["id"], "cancel", json!({})).await;
    assert_eq!(s, 409, "{b}");
    assert_extended(&b, 409, "CONFLICT");
}

#[actix_rt::test]
async fn a_rejected_or_cancelled_med_releases_the_amount() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (_, e2e) = receive(&app, &token, "50").await;
    let (_, a) = open(&app, &token, json!({"endToEnd": e2e, "amount": 20})).await;
    let (_, b) =
        open(&app, &token, json!({"endToEnd": e2e, "amount": 10, "cause": "OPERATIONAL_FLAW"})).await;
    assert_eq!(balance(&app, &token).await, b3("50.00", "30.00", "20.00"));
    let (s, r) = close(&app, &token, &a["id"], "analyze", json!({"result": "REJECTED"})).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["analysisResult"], "REJECTED");
    assert_eq!(balance(&app, &token).await, b3("50.00", "10.00", "40.00"));
    let (s, c) = close(&app, &token, &b["id"], "cancel", json!({})).await;
    assert_eq!(s, 200, "{c}");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("CANCELLED"), Some("REFUND_CANCELLATION"))
    );
    assert!(c["analysisResult"].is_null());
    assert_eq!(balance(&app, &token).await, b3("50.00", "0.00", "50.00"));
    let (s, _) = close(&app, &token, &b["id"], "analyze", json!({"result": "APPROVED"})).await;
    assert_eq!(s, 409);
    let (_, refunds) = app.get_with("/api/transactions?type=REFUND_IN", &token).await;
    assert_eq!(refunds["metadata"]["total"], 0);
    // Unknown, malformed and another account's MED ids are 404.
    for id in [json!(999_999), json!("x")] {
        assert_eq!(close(&app, &token, &id, "cancel", json!({})).await.0, 404);
    }
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let other = t["access_token"].as_str().unwrap();
    assert_eq!(close(&app, other, &a["id"], "cancel", json!({})).await.0, 404);
}

#[actix_rt::test]
async fn a_med_on_more_than_is_available_blocks_what_there_is() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (_, e2e) = receive(&app, &token, "100").await;
    let (key, doc, _) = crate::helpers::directory_key("EMAIL", 0);
    let body = json!({"value": 80, "externalId": "stuck", "details": {"key": key, "keyType": "EMAIL", "name": "P", "document": doc}});
    let (s, b) = app
        .post_raw("/api/pix/cash-out", &token, &body.to_string(), &[("X-Sandbox-Scenario", "STUCK")])
        .await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(balance(&app, &token).await, b3("100.00", "80.00", "20.00"));
    let (s, m) = open(&app, &token, json!({"endToEnd": e2e, "amount": 50})).await;
    assert_eq!(s, 201, "{m}");
    assert_eq!(serde_json::to_string(&m["amount"]).unwrap(), "50.00");
    assert_eq!(serde_json::to_string(&m["blockedAmount"]).unwrap(), "20.00");
    assert_eq!(balance(&app, &token).await, b3("100.00", "100.00", "0.00"), "never negative");
    close(&app, &token, &m["id"], "analyze", json!({"result": "APPROVED"})).await;
    assert_eq!(balance(&app, &token).await, b3("80.00", "80.00", "0.00"), "only what was blocked left");
    // Nothing available at all: the MED is recorded with nothing blocked.
    let (s, m) = open(&app, &token, json!({"endToEnd": e2e, "amount": 10})).await;
    assert_eq!(s, 201, "{m}");
    assert_eq!(serde_json::to_string(&m["blockedAmount"]).unwrap(), "0.00");
    assert_eq!(close(&app, &token, &m["id"], "analyze", json!({"result": "APPROVED"})).await.0, 200);
    assert_eq!(balance(&app, &token).await, b3("80.00", "80.00", "0.00"));
}

#[actix_rt::test]
async fn opening_rules() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (_, e2e) = receive(&app, &token, "10").await;
    let unknown = "E00000000202601010000ABCDEFGHIJK";
    let cases = [
        (json!({}), "endToEnd"),
        (json!({"endToEnd": e2e, "amount": 10.01}), "amount"),
        (json!({"endToEnd": e2e, "amount": 0}), "amount"),
        (json!({"endToEnd": e2e, "cause": "BORED"}), "cause"),
        (json!({"endToEnd": unknown}), "amount"),
        (json!({"endToEnd": e2e, "endToEndId": e2e}), "endToEndId"),
    ];
    for (body, field) in cases {
        let (s, b) = open(&app, &token, body.clone()).await;
        assert_eq!(s, 400, "{body}: {b}");
        assert_eq!(b["details"]["violations"][0]["field"], field, "{body}: {b}");
    }
    // A PIX the account sent is not disputable by this route.
    app.fund(&token, "10").await;
    let (key, doc, _) = crate::helpers::directory_key("EMAIL", 0);
    let body = json!({"value": 1, "externalId": "out", "details": {"key": key, "keyType": "EMAIL", "name": "P", "document": doc}});
    let (_, out) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
    let t = app.wait_final(&token, out["transactionId"].as_str().unwrap()).await;
    let (s, b) = open(&app, &token, json!({"endToEnd": t["endToEndId"]})).await;
    assert_eq!((s, b["details"]["violations"][0]["field"].as_str()), (400, Some("endToEnd")), "{b}");
    // No local match, with an amount: an unreconciled MED. The request's older name of the
    // id is still taken, and the record names it as the request now does.
    let (s, m) = open(&app, &token, json!({"endToEndId": unknown, "amount": 2})).await;
    assert_eq!((s, m["endToEnd"].as_str()), (201, Some(unknown)), "{m}");
    assert_eq!((m["isReconciled"].as_bool(), m["originalTransaction"].is_null()), (Some(false), true));
    assert!(m["originalTransactionId"].is_null());
    // The whole original by default.
    let (_, m) = open(&app, &token, json!({"endToEnd": e2e})).await;
    assert_eq!(serde_json::to_string(&m["amount"]).unwrap(), "10.00");
}

#[actix_rt::test]
async fn the_med_list_filters_pages_and_refuses_bad_queries() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (_, e2e) = receive(&app, &token, "100").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (_, m) = open(&app, &token, json!({"endToEnd": e2e, "amount": 1})).await;
        ids.push(m["id"].clone());
    }
    let (_, loose) =
        open(&app, &token, json!({"endToEndId": "E00000000202601010000ABCDEFGHIJK", "amount": 1})).await;
    close(&app, &token, &ids[0], "analyze", json!({"result": "REJECTED"})).await;
    let get = |q: &str| {
        let (app, token, q) = (&app, token.clone(), q.to_owned());
        async move { app.get_with(&format!("/api/med?{q}"), &token).await }
    };
    let (s, all) = get("").await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(
        all["metadata"],
        json!({"total": 4, "page": 1, "pageSize": 20, "totalPages": 1, "hasNext": false, "hasPrevious": false})
    );
    assert_eq!(all["data"][0]["id"], loose["id"], "newest first");
    let (_, analyzed) = get("status=ANALYZED").await;
    assert_eq!(
        analyzed["data"].as_array().unwrap().iter().map(|m| m["id"].clone()).collect::<Vec<_>>(),
        vec![ids[0].clone()]
    );
    let (_, received) = get("status=RECEIVED&isReconciled=true").await;
    assert_eq!(received["metadata"]["total"], 2);
    let (_, unreconciled) = get("isReconciled=false").await;
    assert_eq!(unreconciled["data"][0]["id"], loose["id"]);
    let (_, p2) = get("pageSize=3&page=2").await;
    assert_eq!((p2["metadata"]["totalPages"].as_u64(), p2["data"].as_array().unwrap().len()), (Some(2), 1));
    assert_eq!(
        (p2["metadata"]["hasNext"].as_bool(), p2["metadata"]["hasPrevious"].as_bool()),
        (Some(false), Some(true))
    );
    let (_, p1) = get("pageSize=3&page=1").await;
    assert_eq!(
        (p1["metadata"]["hasNext"].as_bool(), p1["metadata"]["hasPrevious"].as_bool()),
        (Some(true), Some(false))
    );
    let (_, none) = get("startDate=2099-01-01T00:00:00Z").await;
    assert_eq!(none["metadata"]["total"], 0);
    let (_, some) = get("startDate=2000-01-01T00:00:00Z&endDate=2099-01-01T00:00:00Z").await;
    assert_eq!(some["metadata"]["total"], 4);
    for q in [
        "status=DONE",
        "page=0",
        "pageSize=0",
        "pageSize=101",
        "startDate=yesterday",
        "endDate=2026-13-01T00:00:00Z",
        "isReconciled=maybe",
        "size=5",
    ] {
        let (s, b) = get(q).await;
        assert_eq!(s, 400, "{q}: {b}");
        assert_extended(&b, 400, "HTTP_ERROR");
    }
    // Another account lists none of them.
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let (_, theirs) = app.get_with("/api/med", t["access_token"].as_str().unwrap()).await;
    assert_eq!(theirs["metadata"]["total"], 0);
}

#[actix_rt::test]
async fn the_med_list_answers_429_above_its_rate() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let limit = pixgw::http::med::MED_LIST_PER_WINDOW_MAX;
    for i in 0..limit {
        let (s, _) = app.get_with("/api/med", &token).await;
        assert_eq!(s, 200, "call {}", i + 1);
    }
    let mut res = app.client.get(app.url("/api/med")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 429);
    let retry: u64 = res.headers().get("retry-after").unwrap().to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry));
    let b: Value = serde_json::from_slice(&res.body().await.unwrap()).unwrap();
    assert_extended(&b, 429, "TOO_MANY_REQUESTS");
    app.advance(60).await;
    let token = app.demo_token().await;
    assert_eq!(app.get_with("/api/med", &token).await.0, 200);
}

#[actix_rt::test]
async fn med_events_are_delivered_in_order() {
    let app = spawn_with(Options {
        test_clock: true,
        env: vec![
            ("PIXGW_SIM_SETTLE_MS".into(), "20".into()),
            ("PIXGW_WEBHOOK_ALLOW_HTTP".into(), "1".into()),
            ("PIXGW_WEBHOOK_ALLOW_PRIVATE".into(), "1".into()),
        ],
        ..Default::default()
    })
    .await;
    let token = app.demo_token().await;
    let mut rx = Receiver::ok();
    for t in ["med_created", "med_accepted", "med_rejected"] {
        let body = json!({"url": rx.url, "eventType": t});
        assert_eq!(app.post_raw("/api/webhooks", &token, &body.to_string(), &[]).await.0, 201);
    }
    let (_, e2e) = receive(&app, &token, "40").await;
    let (_, m) = open(&app, &token, json!({"endToEnd": e2e, "amount": 5})).await;
    close(&app, &token, &m["id"], "analyze", json!({"result": "APPROVED"})).await;
    let (_, n) = open(&app, &token, json!({"endToEnd": e2e, "amount": 6})).await;
    close(&app, &token, &n["id"], "analyze", json!({"result": "REJECTED"})).await;
    let mut got = Vec::new();
    for _ in 0..4 {
        let r = rx.next().await;
        assert!(signature_verifies(&app.creds.webhook_secret, &r));
        let v = r.json();
        got.push((
            v["med"]["id"].clone(),
            v["event"].as_str().unwrap().to_owned(),
            v["med"]["status"].as_str().unwrap().to_owned(),
        ));
    }
    let of = |id: &Value| {
        got.iter().filter(|g| &g.0 == id).map(|g| (g.1.clone(), g.2.clone())).collect::<Vec<_>>()
    };
    assert_eq!(
        of(&m["id"]),
        vec![("MedCreated".into(), "OPEN".into()), ("MedAccepted".into(), "ANALYZED".into())]
    );
    assert_eq!(
        of(&n["id"]),
        vec![("MedCreated".into(), "OPEN".into()), ("MedRejected".into(), "ANALYZED".into())]
    );
}

#[actix_rt::test]
async fn an_open_med_survives_a_restart_with_its_hold() {
    let opts = Options {
        test_clock: true,
        env: vec![("PIXGW_SIM_SETTLE_MS".into(), "20".into())],
        ..Default::default()
    };
    let mut app = spawn_with(opts.clone()).await;
    let token = app.demo_token().await;
    let (_, e2e) = receive(&app, &token, "60").await;
    let (_, m) = open(&app, &token, json!({"endToEnd": e2e, "amount": 25})).await;
    app.restart(&opts);
    let token = app.demo_token().await;
    assert_eq!(balance(&app, &token).await, b3("60.00", "25.00", "35.00"), "the hold is still there");
    let (s, done) = close(&app, &token, &m["id"], "analyze", json!({"result": "APPROVED"})).await;
    assert_eq!(s, 200, "{done}");
    assert_eq!(balance(&app, &token).await, b3("35.00", "0.00", "35.00"));
}
