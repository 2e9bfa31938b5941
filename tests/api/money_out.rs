//! Money out, family A: `POST /api/pix/cash-out` and `POST /api/pix/cash-out-qrcode`.

use chrono::{DateTime, Utc};
use futures::future::join_all;
use pixgw::domain::brcode::{generate, BrCodeSpec};
use pixgw::domain::money::Money;
use serde_json::{json, Value};

use crate::helpers::{assert_extended, cash_out_body, directory_key, spawn_with, Options, TestApp};

fn messages(body: &Value) -> Vec<String> {
    body["message"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_owned()).collect()
}

#[actix_rt::test]
async fn amounts_are_read_exactly_as_written() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    for bad in ["0.009", "10.005", "10.500", "0", "-1", "0.001"] {
        let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body(bad, bad), &[]).await;
        assert_eq!(s, 400, "{bad}: {b}");
        assert_extended(&b, 400, "HTTP_ERROR");
        assert_eq!(b["errorCode"], "PIX_INVALID_AMOUNT", "{bad}");
    }
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("ok", "10.50"), &[]).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["status"], "PENDING");
    assert_eq!(b["externalId"], "ok");
    assert!(uuid::Uuid::parse_str(b["transactionId"].as_str().unwrap()).is_ok());
    assert_eq!(app.balance(&token).await.2, "89.50");
}

#[actix_rt::test]
async fn a_cash_out_names_the_key_type_as_the_request_did() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    // Which keys fit which key type is the body reader's rule (unit tests of `http::pix`).
    let cases = [
        ("DOCUMENT", "52998224725", true),
        ("DOCUMENT", "11222333000181", true),
        ("EMAIL", "someone@example.com", true),
        ("PHONE", "11987654321", true),
        ("PHONE", "1133334444", true),
        ("RANDOM", "3f2b8c1e9d4a4e6b8a7c1d2e3f4a5b6c", true),
        ("RANDOM", "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c", true),
        ("EMAIL", "not-an-email", false),
    ];
    for (i, (key_type, key, ok)) in cases.iter().enumerate() {
        let body = json!({"value": 1, "externalId": format!("k{i}"), "details": {"key": key, "keyType": key_type, "name": "N", "document": "52998224725"}});
        let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
        if *ok {
            assert_eq!(s, 201, "{key_type} {key}: {b}");
            // The transaction names the key type as the request did (not the directory's
            // CPF, CNPJ or EVP).
            let (_, t) = app
                .get_with(&format!("/api/transactions/{}", b["transactionId"].as_str().unwrap()), &token)
                .await;
            assert_eq!(t["counterpart"]["keyType"], *key_type, "{t}");
        } else {
            assert_eq!(s, 400, "{key_type} {key}");
            assert_eq!(b["errorCode"], "PIX_INVALID_PIX_KEY", "{key_type} {key}: {b}");
        }
    }
    // Eleven digits whose number does not start with 9: told why, not that it has the
    // wrong length.
    let body = json!({"value": 1, "externalId": "k-mobile", "details": {"key": "11887654321", "keyType": "PHONE", "name": "N", "document": "52998224725"}});
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
    assert_eq!((s, b["errorCode"].as_str()), (400, Some("PIX_INVALID_PIX_KEY")), "{b}");
    let text = b["message"].to_string();
    assert!(
        text.contains("mobile") && text.contains("must start with 9") && !text.contains("10 or 11"),
        "{b}"
    );
}

#[actix_rt::test]
async fn insufficient_balance_counts_the_fee() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let path = format!("/admin/accounts/{}", app.creds.account_id);
    let (s, _) = app
        .admin("PATCH", &path, Some(json!({"fees": {"cashOut": {"fixed": "0.50", "percent": "1"}}})))
        .await;
    assert_eq!(s, 200);
    app.fund(&token, "10.60").await;
    // 10.00 + 0.50 + 1% = 10.60: exactly the balance.
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("a", "10.01"), &[]).await;
    assert_eq!(s, 400);
    assert_extended(&b, 400, "PIX_INSUFFICIENT_BALANCE");
    assert_eq!(b["errorCode"], "PIX_INSUFFICIENT_BALANCE");
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("b", "10.00"), &[]).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(app.balance(&token).await.2, "0.00");
    let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "CONFIRMED");
    assert_eq!(serde_json::to_string(&t["feeAmount"]).unwrap(), "0.60");
    assert_eq!(app.balance(&token).await, ("0.00".into(), "0.00".into(), "0.00".into()));
}

#[actix_rt::test]
async fn a_duplicate_external_id_is_refused_with_details_and_moves_nothing() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (s, first) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("dup", "10"), &[]).await;
    assert_eq!(s, 201);
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("dup", "20"), &[]).await;
    assert_eq!(s, 400);
    assert_extended(&b, 400, "PIX_DUPLICATE_EXTERNAL_ID");
    assert_eq!(b["details"]["externalId"], "dup");
    let t = app.wait_final(&token, first["transactionId"].as_str().unwrap()).await;
    assert_eq!(b["details"]["existingTransactionId"], t["id"]);
    assert_eq!(app.balance(&token).await.2, "90.00");
}

#[actix_rt::test]
async fn one_hundred_concurrent_cash_outs_on_a_balance_for_37_accept_exactly_37() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "370.00").await;
    let requests = (0..100).map(|i| {
        let body = cash_out_body(&format!("c{i}"), "10.00");
        let (app, token) = (&app, &token);
        async move { app.post_raw("/api/pix/cash-out", token, &body, &[]).await }
    });
    let results = join_all(requests).await;
    let accepted: Vec<&Value> = results.iter().filter(|(s, _)| *s == 201).map(|(_, b)| b).collect();
    let refused =
        results.iter().filter(|(s, b)| *s == 400 && b["code"] == "PIX_INSUFFICIENT_BALANCE").count();
    assert_eq!(accepted.len(), 37);
    assert_eq!(refused, 63);
    assert_eq!(app.balance(&token).await.2, "0.00");
    for b in accepted {
        assert_eq!(app.wait_final(&token, b["transactionId"].as_str().unwrap()).await["status"], "CONFIRMED");
    }
    assert_eq!(app.balance(&token).await, ("0.00".into(), "0.00".into(), "0.00".into()));
}

#[actix_rt::test]
async fn fifty_concurrent_requests_with_one_external_id_make_one_transaction() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "1000").await;
    let body = cash_out_body("same", "10.00");
    let results = join_all((0..50).map(|_| app.post_raw("/api/pix/cash-out", &token, &body, &[]))).await;
    let created: Vec<&Value> = results.iter().filter(|(s, _)| *s == 201).map(|(_, b)| b).collect();
    assert_eq!(created.len(), 1);
    let duplicates =
        results.iter().filter(|(s, b)| *s == 400 && b["code"] == "PIX_DUPLICATE_EXTERNAL_ID").count();
    assert_eq!(duplicates, 49);
    app.wait_final(&token, created[0]["transactionId"].as_str().unwrap()).await;
    assert_eq!(app.balance(&token).await.0, "990.00");
}

#[actix_rt::test]
async fn a_document_mismatch_is_an_error_at_once_with_no_debit() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "50").await;
    let (key, _, _) = directory_key("EMAIL", 0);
    let body = json!({"value": 10, "externalId": "m", "details": {"key": key, "keyType": "EMAIL", "name": "N", "document": "52998224725", "checkPixKeyWithDocument": true}});
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["status"], "ERROR");
    let (_, t) =
        app.get_with(&format!("/api/transactions/{}", b["transactionId"].as_str().unwrap()), &token).await;
    assert_eq!(t["errorCode"], "TAX_ID_MISMATCH");
    assert_eq!(app.balance(&token).await, ("50.00".into(), "0.00".into(), "50.00".into()));
    // The right document passes the check.
    let (key, doc, _) = directory_key("EMAIL", 1);
    let body = json!({"value": 10, "externalId": "m2", "details": {"key": key, "keyType": "EMAIL", "name": "N", "document": doc, "checkPixKeyWithDocument": true}});
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
    assert_eq!((s, b["status"].as_str()), (201, Some("PENDING")));
}

#[actix_rt::test]
async fn every_sandbox_scenario_reaches_its_final_state() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "1000").await;
    let cases = [
        ("CONFIRM", "CONFIRMED", None),
        ("TAX_ID_MISMATCH", "ERROR", Some("TAX_ID_MISMATCH")),
        ("INVALID_TAX_ID", "ERROR", Some("INVALID_TAX_ID")),
        ("BLOCKED_ACCOUNT", "ERROR", Some("BLOCKED_ACCOUNT")),
        ("ACCOUNT_CLOSED", "ERROR", Some("ACCOUNT_CLOSED")),
        ("ORDER_REJECTED", "ERROR", Some("ORDER_REJECTED")),
        ("PAYMENT_EXPIRED", "ERROR", Some("PAYMENT_EXPIRED")),
        ("SETTLEMENT_TIMEOUT", "ERROR", Some("SETTLEMENT_TIMEOUT")),
        ("DELAY_50", "CONFIRMED", None),
    ];
    let mut confirmed = 0;
    for (scenario, status, code) in cases {
        let (s, b) = app
            .post_raw(
                "/api/pix/cash-out",
                &token,
                &cash_out_body(scenario, "10"),
                &[("X-Sandbox-Scenario", scenario)],
            )
            .await;
        assert_eq!(s, 201, "{scenario}: {b}");
        let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
        assert_eq!(t["status"], status, "{scenario}");
        assert_eq!(t["errorCode"].as_str(), code, "{scenario}");
        if status == "CONFIRMED" {
            confirmed += 1;
        }
    }
    // Errors gave their holds back.
    assert_eq!(app.balance(&token).await.2, format!("{}.00", 1000 - 10 * confirmed));
    // STUCK stays pending, its hold blocked, after a later payment has settled.
    let (_, stuck) = app
        .post_raw(
            "/api/pix/cash-out",
            &token,
            &cash_out_body("stuck", "10"),
            &[("X-Sandbox-Scenario", "STUCK")],
        )
        .await;
    let (_, later) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("later", "10"), &[]).await;
    app.wait_final(&token, later["transactionId"].as_str().unwrap()).await;
    let (_, t) = app
        .get_with(&format!("/api/transactions/{}", stuck["transactionId"].as_str().unwrap()), &token)
        .await;
    assert_eq!(t["status"], "PENDING");
    assert_eq!(app.balance(&token).await.1, "10.00");
}

#[actix_rt::test]
async fn provider_down_records_nothing_and_frees_the_external_id() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (s, b) = app
        .post_raw(
            "/api/pix/cash-out",
            &token,
            &cash_out_body("pd", "10"),
            &[("X-Sandbox-Scenario", "PROVIDER_DOWN")],
        )
        .await;
    assert_eq!(s, 500);
    assert_extended(&b, 500, "HTTP_ERROR");
    assert_eq!(app.balance(&token).await.2, "100.00");
    let (s, _) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("pd", "10"), &[]).await;
    assert_eq!(s, 201);
}

#[actix_rt::test]
async fn scenarios_are_checked_and_refused_on_live_accounts() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (s, b) = app
        .post_raw("/api/pix/cash-out", &token, &cash_out_body("x", "1"), &[("X-Sandbox-Scenario", "EXPLODE")])
        .await;
    assert_eq!(s, 400);
    assert!(messages(&b)[0].contains("SETTLEMENT_TIMEOUT"), "{b}");
    let (_, client_id, secret, pem) = app.new_account("Live").await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let live = t["access_token"].as_str().unwrap();
    let (s, _) = app
        .post_raw("/api/pix/cash-out", live, &cash_out_body("x", "1"), &[("X-Sandbox-Scenario", "CONFIRM")])
        .await;
    assert_eq!(s, 400);
    let (s, b) = app.post_raw("/sandbox/pix-in", live, r#"{"amount": 10}"#, &[]).await;
    assert_eq!(s, 403);
    assert_extended(&b, 403, "FORBIDDEN");
}

#[actix_rt::test]
async fn a_key_unknown_to_the_directory_settles_order_rejected() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let body = json!({"value": 10, "externalId": "u", "details": {"key": "nobody@nowhere.example", "keyType": "EMAIL", "name": "N", "document": "52998224725"}});
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
    assert_eq!(s, 201);
    let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!((t["status"].as_str(), t["errorCode"].as_str()), (Some("ERROR"), Some("ORDER_REJECTED")));
    assert_eq!(app.balance(&token).await.2, "100.00");
}

/// Moves the test clock to `at` and answers a fresh token (the old one may have expired).
async fn at(app: &TestApp, at: &str) -> String {
    let (s, b) = app.admin("POST", "/admin/clock", Some(json!({"set": at}))).await;
    assert_eq!(s, 200, "{b}");
    app.demo_token().await
}

#[actix_rt::test]
async fn limits_hold_at_their_boundaries_by_day_and_by_night() {
    let app = spawn_with(Options {
        test_clock: true,
        env: vec![("PIXGW_SIM_SETTLE_MS".into(), "5".into())],
        ..Default::default()
    })
    .await;
    let path = format!("/admin/accounts/{}", app.creds.account_id);
    let limits = json!({"limits": {"perTransaction": "100.00", "daily": "250.00", "nightly": "50.00"}});
    assert_eq!(app.admin("PATCH", &path, Some(limits)).await.0, 200);
    // 12:00 in Sao Paulo (15:00 UTC), two years ahead.
    let year = Utc::now().format("%Y").to_string().parse::<i32>().unwrap() + 2;
    let token = at(&app, &format!("{year}-01-15T15:00:00Z")).await;
    app.fund(&token, "10000").await;
    let post = |ext: &str, v: &str, token: &str| {
        let (body, token) = (cash_out_body(ext, v), token.to_owned());
        let app = &app;
        async move { app.post_raw("/api/pix/cash-out", &token, &body, &[]).await }
    };
    let (s, b) = post("p1", "100.01", &token).await;
    assert_eq!((s, b["code"].as_str()), (400, Some("PIX_TRANSACTION_LIMIT_EXCEEDED")));
    assert_eq!(post("p2", "100.00", &token).await.0, 201);
    assert_eq!(post("p3", "100.00", &token).await.0, 201);
    assert_eq!(post("p4", "50.00", &token).await.0, 201); // exactly 250 today
    let (s, b) = post("p5", "0.01", &token).await;
    assert_eq!((s, b["code"].as_str()), (400, Some("PIX_DAILY_LIMIT_EXCEEDED")));
    // 20:00 the same local day: the night window opens, and the daily limit still binds.
    let token = at(&app, &format!("{year}-01-15T23:00:00Z")).await;
    let (s, b) = post("n1", "0.01", &token).await;
    assert_eq!((s, b["code"].as_str()), (400, Some("PIX_DAILY_LIMIT_EXCEEDED")));
    // Past local midnight (00:30, still night): a new day, the same night window.
    let token = at(&app, &format!("{year}-01-16T03:30:00Z")).await;
    assert_eq!(post("n2", "30.00", &token).await.0, 201);
    assert_eq!(post("n3", "20.00", &token).await.0, 201); // exactly 50 tonight
    let (s, b) = post("n4", "0.01", &token).await;
    assert_eq!((s, b["code"].as_str()), (400, Some("PIX_NIGHT_LIMIT_EXCEEDED")));
    // 06:00: day time again; the night limit no longer applies.
    let token = at(&app, &format!("{year}-01-16T09:00:00Z")).await;
    assert_eq!(post("d1", "100.00", &token).await.0, 201);
}

fn qr(amount: Option<&str>, key: &str) -> String {
    generate(&BrCodeSpec {
        single_use: false,
        key: key.into(),
        info: None,
        amount: amount.map(|a| Money::parse(a).unwrap()),
        merchant_name: "Loja Exemplo".into(),
        merchant_city: "Sao Paulo".into(),
        txid: Some("pedido42".into()),
    })
}

#[actix_rt::test]
async fn a_qr_cash_out_pays_the_code_and_checks_it() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "30").await;
    let (key, _, _) = directory_key("EVP", 0);
    let code = qr(Some("12.34"), &key);
    let post = |body: Value| {
        let (app, token) = (&app, token.clone());
        async move { app.post_raw("/api/pix/cash-out-qrcode", &token, &body.to_string(), &[]).await }
    };
    let (s, b) = post(json!({"value": 12.35, "qrCode": code, "externalId": "q0"})).await;
    assert_eq!(s, 400);
    assert!(messages(&b)[0].contains("must equal the amount in the QR code (12.34)"), "{b}");
    let mut bad_crc = code.clone();
    bad_crc.replace_range(code.len() - 4.., "0000");
    let (s, b) = post(json!({"value": 12.34, "qrCode": bad_crc, "externalId": "q0"})).await;
    assert_eq!(s, 400);
    assert!(messages(&b)[0].contains("CRC"), "{b}");
    let (s, b) = post(json!({"value": 12.34, "qrCode": "000201short", "externalId": "q0"})).await;
    assert_eq!(s, 400, "{b}");
    let (s, b) = post(json!({"value": 12.34, "qrCode": code, "externalId": "q1"})).await;
    assert_eq!(s, 201, "{b}");
    let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "CONFIRMED");
    assert_eq!(t["counterpart"]["key"], key.as_str());
    let (s, b) = post(json!({"value": 1, "qrCode": qr(None, &key), "externalId": "q1"})).await;
    assert_eq!(s, 409);
    assert_extended(&b, 409, "PIX_DUPLICATE_EXTERNAL_ID");
    let (s, b) = post(json!({"value": 20, "qrCode": qr(None, &key), "externalId": "q2"})).await;
    assert_eq!(s, 400);
    assert_eq!(b["code"], "PIX_INSUFFICIENT_BALANCE");
    assert_eq!(app.balance(&token).await.2, "17.66");
}

#[actix_rt::test]
async fn a_dynamic_qr_code_is_resolved_by_the_simulator() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "30").await;
    let f = |id: u8, v: &str| format!("{id:02}{:02}{v}", v.len());
    let account = f(0, "br.gov.bcb.pix") + &f(25, "qr.example.com/v2/cobv/abc123");
    let body = f(0, "01")
        + &f(1, "12")
        + &f(26, &account)
        + &f(52, "0000")
        + &f(53, "986")
        + &f(54, "5.00")
        + &f(58, "BR")
        + &f(59, "Loja")
        + &f(60, "Recife")
        + "6304";
    let code = format!("{body}{:04X}", pixgw::domain::brcode::crc16(body.as_bytes()));
    let (s, b) = app
        .post_raw(
            "/api/pix/cash-out-qrcode",
            &token,
            &json!({"value": 5, "qrCode": code, "externalId": "dyn"}).to_string(),
            &[],
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "CONFIRMED", "{t}");
    assert!(t["counterpart"]["bank"]["bankISPB"].is_string(), "{t}");
}

#[actix_rt::test]
async fn the_three_balance_routes_agree() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (_, b) = app
        .post_raw("/api/pix/cash-out", &token, &cash_out_body("s", "10"), &[("X-Sandbox-Scenario", "STUCK")])
        .await;
    assert_eq!(b["status"], "PENDING");
    let (s, family_b) = app.get_with("/accounts/balances", &token).await;
    assert_eq!(s, 200);
    let item = &family_b["data"][0];
    assert_eq!(
        serde_json::to_string(&item["balanceAmount"]).unwrap(),
        r#"{"available":90.00,"blocked":10.00,"overdraft":0.00}"#
    );
    assert!(DateTime::parse_from_rfc3339(item["eventDate"].as_str().unwrap()).is_ok());
    let (s, plain) = app.get_with("/balance", &token).await;
    assert_eq!(s, 200);
    assert_eq!(serde_json::to_string(&plain["grossBalance"]).unwrap(), "100.00");
    assert_eq!(app.balance(&token).await, ("100.00".into(), "10.00".into(), "90.00".into()));
    // Without a token: 401 in each family's shape.
    let (s, b) = crate::helpers::send(app.client.get(app.url("/accounts/balances")), None).await;
    assert_eq!(s, 401);
    crate::helpers::assert_simple(&b, 401);
    let (s, b) = crate::helpers::send(app.client.get(app.url("/api/balance")), None).await;
    assert_eq!(s, 401);
    assert_extended(&b, 401, "HTTP_ERROR");
}

#[actix_rt::test]
async fn another_accounts_transaction_is_not_found() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (_, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("mine", "10"), &[]).await;
    let id = b["transactionId"].as_str().unwrap();
    let (_, client_id, secret, pem) = app.new_account("Other").await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let (s, body) =
        app.get_with(&format!("/api/transactions/{id}"), t["access_token"].as_str().unwrap()).await;
    assert_eq!(s, 404);
    assert_extended(&body, 404, "NOT_FOUND");
}

#[actix_rt::test]
async fn an_alphanumeric_cnpj_is_a_key_a_payer_and_a_holder_and_is_masked_like_a_cnpj() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    // The Receita's own example, which the shipped directory holds as a CNPJ key.
    let cnpj = "12ABC34501DE35";
    let (s, fund) = app
        .post_raw(
            "/sandbox/pix-in",
            &token,
            &json!({"amount": 50, "payerName": "Aurora", "payerDocument": cnpj}).to_string(),
            &[],
        )
        .await;
    assert_eq!(s, 201, "{fund}");
    let body = json!({"value": 2, "externalId": "alnum", "details": {"key": cnpj, "keyType": "DOCUMENT", "name": "Aurora", "document": cnpj}});
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
    assert_eq!(s, 201, "{b}");
    let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "CONFIRMED", "the directory knows the key: {t}");
    assert_eq!(t["counterpart"]["keyType"], "DOCUMENT", "in the words of the request");
    let (s, list) = app.get_with("/api/transactions", &token).await;
    assert_eq!(s, 200);
    for row in list["data"].as_array().unwrap() {
        assert_eq!(row["counterpart"]["document"], "12.ABC.345/****-**", "{row}");
    }
    // Wrong check digits and lower case are refused like any invalid document.
    for (i, bad) in ["12ABC34501DE36", "12abc34501de35"].iter().enumerate() {
        let body = json!({"value": 1, "externalId": format!("bad{i}"), "details": {"key": bad, "keyType": "DOCUMENT", "name": "A", "document": cnpj}});
        let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
        assert_eq!(s, 400, "{bad}");
        assert_eq!(b["errorCode"], "PIX_INVALID_PIX_KEY", "{bad}: {b}");
        let body = json!({"value": 1, "externalId": format!("doc{i}"), "details": {"key": cnpj, "keyType": "DOCUMENT", "name": "A", "document": bad}});
        let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
        assert_eq!(s, 400, "{bad}: {b}");
    }
    // An account may be held by a company with an alphanumeric CNPJ.
    let (s, acct) =
        app.admin("POST", "/admin/accounts", Some(json!({"name": "Aurora", "document": cnpj}))).await;
    assert_eq!(s, 201, "{acct}");
    assert_eq!(app.balance(&token).await.2, "48.00");
}

#[actix_rt::test]
async fn a_qr_code_with_accents_counted_in_characters_is_paid() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "10").await;
    let (key, _, _) = directory_key("EVP", 0);
    // As many apps write it: lengths in characters, the CRC over the UTF-8 bytes.
    let f = |id: u8, v: &str| format!("{id:02}{:02}{v}", v.chars().count());
    let account = f(0, "br.gov.bcb.pix") + &f(1, &key);
    let body = f(0, "01")
        + &f(26, &account)
        + &f(52, "0000")
        + &f(53, "986")
        + &f(54, "1.50")
        + &f(58, "BR")
        + &f(59, "Padaria São João")
        + &f(60, "Ribeirão Preto")
        + &f(62, &f(5, "***"))
        + "6304";
    let code = format!("{body}{:04X}", pixgw::domain::brcode::crc16(body.as_bytes()));
    let req = json!({"value": 1.50, "qrCode": code, "externalId": "accents"});
    let (s, b) = app.post_raw("/api/pix/cash-out-qrcode", &token, &req.to_string(), &[]).await;
    assert_eq!(s, 201, "{b}");
    let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "CONFIRMED", "{t}");
    assert_eq!(t["counterpart"]["key"], key.as_str());
}

/// README's first cash-out, sent as README writes it, settles CONFIRMED: its key is one of
/// the simulated directory's, in the words a cash-out uses. (It named a phone the directory
/// does not hold, and ended ORDER_REJECTED.)
#[actix_rt::test]
async fn the_readme_cash_out_example_settles_confirmed() {
    let readme = crate::helpers::readme();
    let at = readme.find("/api/pix/cash-out -H").expect("README shows a cash-out");
    let body = readme[at..].split("-d '").nth(1).unwrap().split('\'').next().unwrap();
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, body, &[]).await;
    assert_eq!(s, 201, "{body}: {b}");
    let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "CONFIRMED", "{t}");
}
