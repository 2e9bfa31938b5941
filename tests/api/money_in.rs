//! Money in: charges (`POST /api/pix/cash-in`), their BR Code and QR image, payment through
//! `POST /sandbox/pay`, expiry on the server clock, and the cash-in scenarios.

use base64::Engine;
use chrono::{DateTime, Duration, Utc};
use pixgw::domain::brcode;
use serde_json::{json, Value};

use crate::helpers::{assert_extended, cash_out_body, TestApp};

fn charge(ext: &str, value: &str, extra: &str) -> String {
    format!(
        r#"{{"transaction": {{"value": {value}, "description": "order", "externalId": "{ext}"{extra}}}, "payer": {{"fullName": "Ana Payer", "document": "52998224725"}}}}"#
    )
}

async fn create(app: &TestApp, token: &str, body: &str, headers: &[(&str, &str)]) -> Value {
    let (s, b) = app.post_raw("/api/pix/cash-in", token, body, headers).await;
    assert_eq!(s, 201, "{b}");
    b
}

async fn pay(app: &TestApp, token: &str, by: Value) -> (u16, Value) {
    app.post_raw("/sandbox/pay", token, &by.to_string(), &[]).await
}

fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap().with_timezone(&Utc)
}

#[actix_rt::test]
async fn a_charge_carries_a_br_code_of_the_account_and_a_qr_image_on_request() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (_, me) = app.get_with("/api/account", &token).await;
    let b = create(&app, &token, &charge("c1", "25.10", ""), &[]).await;
    assert_eq!(b["status"], "PENDING");
    assert_eq!(b["externalId"], "c1");
    assert!(uuid::Uuid::parse_str(b["correlationId"].as_str().unwrap()).is_ok());
    assert!(b.get("qrCodeImage").is_none());
    assert_eq!(time(&b["expirationDate"]) - time(&b["generateTime"]), Duration::seconds(86_400));
    let code = brcode::parse(b["pixCode"].as_str().unwrap()).unwrap();
    assert_eq!(code.key.as_deref(), me["receivingKey"].as_str());
    assert_eq!(code.amount.map(|a| a.to_cents_string()), Some("25.10".into()));
    assert_eq!(code.point_of_initiation.as_deref(), Some("12"));
    assert_eq!(code.merchant_name, "Demo");
    assert!(code
        .txid
        .as_ref()
        .is_some_and(|t| t.len() <= 25 && t.chars().all(|c| c.is_ascii_alphanumeric())));

    let b =
        create(&app, &token, &charge("c2", "1", r#", "generateQrCode": true, "expirationTime": 30"#), &[])
            .await;
    assert_eq!(time(&b["expirationDate"]) - time(&b["generateTime"]), Duration::seconds(30));
    let png = base64::engine::general_purpose::STANDARD.decode(b["qrCodeImage"].as_str().unwrap()).unwrap();
    let img = image::load_from_memory(&png).unwrap().to_luma8();
    let mut prepared = rqrr::PreparedImage::prepare(img);
    let grids = prepared.detect_grids();
    assert_eq!(grids.len(), 1);
    assert_eq!(grids[0].decode().unwrap().1, b["pixCode"].as_str().unwrap());
}

#[actix_rt::test]
async fn the_external_id_is_shared_with_cash_outs() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "10").await;
    let (s, _) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("shared", "1"), &[]).await;
    assert_eq!(s, 201);
    let (s, b) = app.post_raw("/api/pix/cash-in", &token, &charge("shared", "1", ""), &[]).await;
    assert_eq!(s, 400);
    assert_extended(&b, 400, "PIX_DUPLICATE_EXTERNAL_ID");
}

#[actix_rt::test]
async fn paying_a_charge_credits_value_minus_fee_once() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let path = format!("/admin/accounts/{}", app.creds.account_id);
    let fees = json!({"fees": {"cashIn": {"fixed": "0.10", "percent": "1"}}});
    assert_eq!(app.admin("PATCH", &path, Some(fees)).await.0, 200);
    let a = create(&app, &token, &charge("a", "50.00", ""), &[]).await;
    let b = create(&app, &token, &charge("b", "20.00", ""), &[]).await;
    let c = create(&app, &token, &charge("c", "10.00", ""), &[]).await;
    assert_eq!(app.balance(&token).await.0, "0.00");
    let (s, paid) = pay(&app, &token, json!({"pixCode": a["pixCode"]})).await;
    assert_eq!(s, 200, "{paid}");
    assert_eq!(paid["status"], "CONFIRMED");
    assert_eq!(paid["endToEndId"].as_str().unwrap().len(), 32);
    let (s, _) = pay(&app, &token, json!({"transactionId": b["transactionId"]})).await;
    assert_eq!(s, 200);
    let txid = brcode::parse(c["pixCode"].as_str().unwrap()).unwrap().txid.unwrap();
    let (s, _) = pay(&app, &token, json!({"txid": txid})).await;
    assert_eq!(s, 200);
    // 50 - 0.60 + 20 - 0.30 + 10 - 0.20
    assert_eq!(app.balance(&token).await, ("78.90".into(), "0.00".into(), "78.90".into()));
    let (s, again) = pay(&app, &token, json!({"pixCode": a["pixCode"]})).await;
    assert_eq!(s, 422);
    assert_extended(&again, 422, "UNPROCESSABLE");
    let (_, t) =
        app.get_with(&format!("/api/transactions/{}", a["transactionId"].as_str().unwrap()), &token).await;
    assert_eq!((t["status"].as_str(), t["operation"].as_str()), (Some("CONFIRMED"), Some("CASH_IN")));
    assert_eq!(serde_json::to_string(&t["feeAmount"]).unwrap(), "0.60");
    assert_eq!(app.balance(&token).await.0, "78.90");
    let (s, b) = pay(&app, &token, json!({"txid": "nope", "pixCode": a["pixCode"]})).await;
    assert_eq!(s, 400, "{b}");
}

#[actix_rt::test]
async fn a_charge_is_payable_until_its_expiration_and_not_at_it() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let first = create(&app, &token, &charge("e1", "5", r#", "expirationTime": 600"#), &[]).await;
    let second = create(&app, &token, &charge("e2", "7", r#", "expirationTime": 600"#), &[]).await;
    // One second before the end: still payable.
    let last_second = time(&first["expirationDate"]) - Duration::seconds(1);
    let (s, _) = app.admin("POST", "/admin/clock", Some(json!({"set": last_second.to_rfc3339()}))).await;
    assert_eq!(s, 200);
    let (s, b) = pay(&app, &token, json!({"transactionId": first["transactionId"]})).await;
    assert_eq!(s, 200, "{b}");
    // At its expiration: the charge has expired (the clock route runs what came due).
    let end = time(&second["expirationDate"]);
    let (s, _) = app.admin("POST", "/admin/clock", Some(json!({"set": end.to_rfc3339()}))).await;
    assert_eq!(s, 200);
    let token = app.demo_token().await;
    let (_, t) = app
        .get_with(&format!("/api/transactions/{}", second["transactionId"].as_str().unwrap()), &token)
        .await;
    assert_eq!((t["status"].as_str(), t["errorCode"].as_str()), (Some("ERROR"), Some("EXPIRED")), "{t}");
    let (s, _) = pay(&app, &token, json!({"transactionId": second["transactionId"]})).await;
    assert_eq!(s, 422);
    assert_eq!(app.balance(&token).await.0, "5.00");
}

#[actix_rt::test]
async fn cash_in_scenarios() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let now = create(&app, &token, &charge("pn", "3", ""), &[("X-Sandbox-Scenario", "PAY_NOW")]).await;
    let (_, t) =
        app.get_with(&format!("/api/transactions/{}", now["transactionId"].as_str().unwrap()), &token).await;
    assert_eq!(t["status"], "CONFIRMED");
    let gone = create(&app, &token, &charge("en", "3", ""), &[("X-Sandbox-Scenario", "EXPIRE_NOW")]).await;
    let (_, t) =
        app.get_with(&format!("/api/transactions/{}", gone["transactionId"].as_str().unwrap()), &token).await;
    assert_eq!((t["status"].as_str(), t["errorCode"].as_str()), (Some("ERROR"), Some("EXPIRED")));
    assert_eq!(app.balance(&token).await.0, "3.00");
    let headers = [("X-Sandbox-Scenario", "PROVIDER_EXPIRATION_MIN_3600")];
    let (s, b) = app
        .post_raw("/api/pix/cash-in", &token, &charge("pm", "3", r#", "expirationTime": 3599"#), &headers)
        .await;
    assert_eq!(s, 400);
    assert_extended(&b, 400, "PROVIDER_EXPIRATION_BELOW_MINIMUM");
    assert_eq!(b["errorCode"], "PROVIDER_EXPIRATION_BELOW_MINIMUM");
    create(&app, &token, &charge("pm", "3", r#", "expirationTime": 3600"#), &headers).await;
    // The account's own provider minimum.
    let path = format!("/admin/accounts/{}", app.creds.account_id);
    assert_eq!(app.admin("PATCH", &path, Some(json!({"providerMinExpirationSeconds": 120}))).await.0, 200);
    let (s, b) =
        app.post_raw("/api/pix/cash-in", &token, &charge("pa", "3", r#", "expirationTime": 119"#), &[]).await;
    assert_eq!((s, b["code"].as_str()), (400, Some("PROVIDER_EXPIRATION_BELOW_MINIMUM")));
    // A cash-out scenario is not a cash-in one.
    let (s, _) = app
        .post_raw("/api/pix/cash-in", &token, &charge("x", "3", ""), &[("X-Sandbox-Scenario", "STUCK")])
        .await;
    assert_eq!(s, 400);
}

#[actix_rt::test]
async fn another_account_cannot_pay_my_charge_and_a_restart_keeps_it_open() {
    let mut app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let mine = create(&app, &token, &charge("mine", "9", r#", "expirationTime": 60"#), &[]).await;
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let other = t["access_token"].as_str().unwrap();
    for by in [json!({"transactionId": mine["transactionId"]}), json!({"pixCode": mine["pixCode"]})] {
        let (s, b) = pay(&app, other, by).await;
        assert_eq!(s, 404, "another account's charge: {b}");
    }
    let (_, live_client, live_secret, live_pem) = app.new_account("Live").await;
    let (_, t) = app.token_with(&live_pem, &live_client, &live_secret).await;
    let (s, _) = pay(&app, t["access_token"].as_str().unwrap(), json!({"txid": "x"})).await;
    assert_eq!(s, 403, "a live account has no sandbox");
    app.restart(&crate::helpers::Options {
        test_clock: true,
        env: vec![("PIXGW_SIM_SETTLE_MS".into(), "20".into())],
        ..Default::default()
    });
    let token = app.demo_token().await;
    let (s, b) = pay(&app, &token, json!({"pixCode": mine["pixCode"]})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(app.balance(&token).await.0, "9.00");
    // And one left open expires after a restart.
    let open = create(&app, &token, &charge("open", "1", r#", "expirationTime": 30"#), &[]).await;
    app.restart(&crate::helpers::Options { test_clock: true, env: vec![], ..Default::default() });
    app.advance(30).await;
    let token = app.demo_token().await;
    let (_, t) =
        app.get_with(&format!("/api/transactions/{}", open["transactionId"].as_str().unwrap()), &token).await;
    assert_eq!(t["errorCode"], "EXPIRED", "{t}");
}

fn split(key: &str, key_type: &str, kind: &str, value: &str, immediate: bool) -> Value {
    let value: Value = serde_json::from_str(value).unwrap();
    json!({"pixKey": key, "pixKeyType": key_type, "name": "Partner", "document": "11222333000181", "type": kind, "value": value, "immediate": immediate})
}

fn with_splits(ext: &str, value: &str, splits: Value) -> String {
    let value: Value = serde_json::from_str(value).unwrap();
    json!({
        "transaction": {"value": value, "description": "split order", "externalId": ext},
        "payer": {"fullName": "Ana Payer", "document": "52998224725"},
        "splits": splits
    })
    .to_string()
}

#[actix_rt::test]
async fn split_rules_and_their_sum_at_the_boundary() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (email, _, _) = crate::helpers::directory_key("EMAIL", 3);
    let ok = json!([
        split(&email, "EMAIL", "FIXED", "60", false),
        split(&email, "EMAIL", "PERCENTAGE", "40", false)
    ]);
    create(&app, &token, &with_splits("s1", "100", ok), &[]).await;
    let over = json!([
        split(&email, "EMAIL", "FIXED", "60.01", false),
        split(&email, "EMAIL", "PERCENTAGE", "40", false)
    ]);
    let (s, b) = app.post_raw("/api/pix/cash-in", &token, &with_splits("s2", "100", over), &[]).await;
    assert_eq!(s, 400);
    assert_eq!(b["details"]["violations"][0]["field"], "splits", "{b}");
    let eleven = Value::Array((0..11).map(|_| split(&email, "EMAIL", "FIXED", "1", false)).collect());
    let (s, _) = app.post_raw("/api/pix/cash-in", &token, &with_splits("s3", "100", eleven), &[]).await;
    assert_eq!(s, 400);
    let bad = json!([
        split("1133334444", "PHONE", "PERCENTAGE", "100.01", false),
        split("52998224725", "CNPJ", "FIXED", "1", false),
        split("x", "PIX", "FIXED", "0.001", false),
        {"pixKey": "a@b.co", "pixKeyType": "EMAIL", "name": "", "document": "1", "type": "SHARE", "value": 1}
    ]);
    let (s, b) = app.post_raw("/api/pix/cash-in", &token, &with_splits("s4", "100", bad), &[]).await;
    assert_eq!(s, 400);
    let fields: Vec<&str> =
        b["details"]["violations"].as_array().unwrap().iter().map(|v| v["field"].as_str().unwrap()).collect();
    assert_eq!(
        fields,
        vec![
            "splits[0].value",
            "splits[1].pixKey",
            "splits[2].pixKeyType",
            "splits[2].value",
            "splits[3].name",
            "splits[3].document",
            "splits[3].type"
        ]
    );
}

#[actix_rt::test]
async fn immediate_splits_run_right_after_payment_and_never_fail_for_limits() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let path = format!("/admin/accounts/{}", app.creds.account_id);
    let tiny = json!({"limits": {"perTransaction": "1.00", "daily": "1.00", "nightly": "1.00"}});
    assert_eq!(app.admin("PATCH", &path, Some(tiny)).await.0, 200);
    let (email, _, _) = crate::helpers::directory_key("EMAIL", 4);
    let (evp, _, _) = crate::helpers::directory_key("EVP", 4);
    let splits =
        json!([split(&email, "EMAIL", "FIXED", "30", true), split(&evp, "RANDOM", "PERCENTAGE", "10", true)]);
    let c = create(&app, &token, &with_splits("imm", "100", splits), &[]).await;
    let (s, _) = pay(&app, &token, json!({"transactionId": c["transactionId"]})).await;
    assert_eq!(s, 200);
    let (_, charge) =
        app.get_with(&format!("/api/transactions/{}", c["transactionId"].as_str().unwrap()), &token).await;
    let ids = charge["splitTransactions"].as_array().unwrap().clone();
    assert_eq!(ids.len(), 2, "{charge}");
    for (id, amount) in ids.iter().zip(["30.00", "10.00"]) {
        let t = app.wait_final(&token, &id.to_string()).await;
        assert_eq!(t["status"], "CONFIRMED", "{t}");
        assert_eq!(t["operation"], "CASH_OUT");
        assert_eq!(serde_json::to_string(&t["originalAmount"]).unwrap(), amount);
        assert_eq!(t["splitOf"], charge["id"]);
    }
    assert_eq!(app.balance(&token).await, ("60.00".into(), "0.00".into(), "60.00".into()));
}

#[actix_rt::test]
async fn scheduled_splits_wait_for_the_split_frequency_on_the_server_clock() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (email, _, _) = crate::helpers::directory_key("EMAIL", 5);
    let c = create(
        &app,
        &token,
        &with_splits("day", "50", json!([split(&email, "EMAIL", "FIXED", "20", false)])),
        &[],
    )
    .await;
    pay(&app, &token, json!({"transactionId": c["transactionId"]})).await;
    let (_, charge) =
        app.get_with(&format!("/api/transactions/{}", c["transactionId"].as_str().unwrap()), &token).await;
    let id = charge["splitTransactions"][0].to_string();
    let (_, t) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
    assert_eq!(t["status"], "PENDING");
    let at = time(&t["scheduledFor"]);
    // Daily: the next midnight in Sao Paulo (03:00 UTC).
    assert_eq!(at.format("%H:%M:%S").to_string(), "03:00:00", "{t}");
    assert_eq!(app.balance(&token).await, ("50.00".into(), "20.00".into(), "30.00".into()));
    // A second before, it still waits.
    let (s, _) = app
        .admin("POST", "/admin/clock", Some(json!({"set": (at - Duration::seconds(1)).to_rfc3339()})))
        .await;
    assert_eq!(s, 200);
    // The clock route returns after every account acted on the new time.
    let token = app.demo_token().await;
    let (_, t) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
    assert_eq!(t["status"], "PENDING");
    let (s, _) = app.admin("POST", "/admin/clock", Some(json!({"set": at.to_rfc3339()}))).await;
    assert_eq!(s, 200);
    let token = app.demo_token().await;
    assert_eq!(app.wait_final(&token, &id).await["status"], "CONFIRMED");
    assert_eq!(app.balance(&token).await, ("30.00".into(), "0.00".into(), "30.00".into()));
    // Hourly: the top of the next hour.
    let path = format!("/admin/accounts/{}", app.creds.account_id);
    assert_eq!(app.admin("PATCH", &path, Some(json!({"splitFrequency": "HOURLY"}))).await.0, 200);
    let c = create(
        &app,
        &token,
        &with_splits("hour", "10", json!([split(&email, "EMAIL", "FIXED", "5", false)])),
        &[],
    )
    .await;
    pay(&app, &token, json!({"transactionId": c["transactionId"]})).await;
    let (_, charge) =
        app.get_with(&format!("/api/transactions/{}", c["transactionId"].as_str().unwrap()), &token).await;
    let (_, t) = app.get_with(&format!("/api/transactions/{}", charge["splitTransactions"][0]), &token).await;
    assert_eq!(time(&t["scheduledFor"]).format("%M:%S").to_string(), "00:00", "{t}");
}
