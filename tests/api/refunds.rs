//! Refunds: family A refund-in, family B devolução, one namespace and one model; the sum
//! of refunds never above the amount, also under concurrency; the 89-day deadline; restart
//! in the middle of a refund; and the counterparty's return of a payment (refund-out).

use chrono::{DateTime, Duration, Utc};
use futures::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{assert_extended, assert_simple, cash_out_body, directory_key, Options, TestApp};

/// A received PIX of `amount`: (transactionId, endToEndId).
async fn receive(app: &TestApp, token: &str, amount: &str) -> (String, String) {
    let (s, b) = app.post_raw("/sandbox/pix-in", token, &format!(r#"{{"amount": {amount}}}"#), &[]).await;
    assert_eq!(s, 201, "{b}");
    (b["transactionId"].as_str().unwrap().to_owned(), b["endToEndId"].as_str().unwrap().to_owned())
}

async fn refund_in(app: &TestApp, token: &str, id: &str, body: Value) -> (u16, Value) {
    app.post_raw(&format!("/api/pix/refund-in/{id}"), token, &body.to_string(), &[]).await
}

async fn devolucao(app: &TestApp, token: &str, e2e: &str, id: &str, body: Value) -> (u16, Value) {
    let req = app.client.put(app.url(&format!("/pix/{e2e}/devolucao/{id}"))).bearer_auth(token);
    crate::helpers::send(req, Some(body)).await
}

#[actix_rt::test]
async fn a_refund_in_holds_then_returns_the_money() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (id, _) = receive(&app, &token, "100").await;
    let (s, b) =
        refund_in(&app, &token, &id, json!({"refundValue": 30.5, "reason": "broken", "externalId": "r1"}))
            .await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["status"], "PENDING");
    assert_eq!(b["externalId"], "r1");
    assert_eq!(serde_json::to_string(&b["refundValue"]).unwrap(), "30.50");
    let rtr = b["providerTransactionId"].as_str().unwrap();
    assert!(rtr.len() == 32 && rtr.starts_with('D'), "{rtr}");
    assert_eq!(app.balance(&token).await.2, "69.50");
    let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!((t["status"].as_str(), t["operation"].as_str()), (Some("CONFIRMED"), Some("REFUND_IN")));
    assert_eq!(app.balance(&token).await, ("69.50".into(), "0.00".into(), "69.50".into()));
    // The same externalId again answers the same refund and moves nothing.
    let (s, again) = refund_in(&app, &token, &id, json!({"refundValue": 30.5, "externalId": "r1"})).await;
    assert_eq!(s, 200);
    assert_eq!(again["transactionId"], b["transactionId"]);
    let (s, other) = refund_in(&app, &token, &id, json!({"refundValue": 1, "externalId": "r1"})).await;
    assert_eq!(s, 400);
    assert_extended(&other, 400, "PIX_DUPLICATE_EXTERNAL_ID");
    assert_eq!(app.balance(&token).await.0, "69.50");
}

#[actix_rt::test]
async fn refunds_never_exceed_the_amount_even_concurrently() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "1000").await;
    let (id, _) = receive(&app, &token, "100").await;
    let results =
        join_all((0..20).map(|i| {
            refund_in(&app, &token, &id, json!({"refundValue": 10, "externalId": format!("c{i}")}))
        }))
        .await;
    let accepted: Vec<&Value> = results.iter().filter(|(s, _)| *s == 201).map(|(_, b)| b).collect();
    let refused: Vec<&Value> = results.iter().filter(|(s, _)| *s == 400).map(|(_, b)| b).collect();
    assert_eq!(accepted.len(), 10);
    assert_eq!(refused.len(), 10);
    for b in refused {
        assert_extended(b, 400, "REFUND_AMOUNT_EXCEEDS_REFUNDABLE");
        assert_eq!(b["details"]["refundable"], "0.00");
    }
    assert_eq!(app.balance(&token).await.2, "1000.00");
    for b in accepted {
        assert_eq!(app.wait_final(&token, b["transactionId"].as_str().unwrap()).await["status"], "CONFIRMED");
    }
    assert_eq!(app.balance(&token).await, ("1000.00".into(), "0.00".into(), "1000.00".into()));
}

#[actix_rt::test]
async fn only_a_received_pix_of_the_account_can_be_refunded() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (_, out) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("out", "10"), &[]).await;
    let cash_out = out["transactionId"].as_str().unwrap();
    app.wait_final(&token, cash_out).await;
    for id in [cash_out, "00000000-0000-4000-8000-000000000000", "999999"] {
        let (s, b) = refund_in(&app, &token, id, json!({"refundValue": 1})).await;
        assert_eq!(s, 404, "{id}: {b}");
        assert_extended(&b, 404, "NOT_FOUND");
    }
    let (id, e2e) = receive(&app, &token, "5").await;
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let other = t["access_token"].as_str().unwrap();
    assert_eq!(refund_in(&app, other, &id, json!({"refundValue": 1})).await.0, 404);
    assert_eq!(devolucao(&app, other, &e2e, "x1", json!({"valor": "1.00"})).await.0, 404);
    let (s, b) = refund_in(&app, &token, &id, json!({"refundValue": 0.001})).await;
    assert_eq!((s, b["errorCode"].as_str()), (400, Some("PIX_INVALID_AMOUNT")));
}

#[actix_rt::test]
async fn the_89_day_deadline_at_its_boundary() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (id, e2e) = receive(&app, &token, "10").await;
    let (_, t) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
    let receipt =
        DateTime::parse_from_rfc3339(t["processedAt"].as_str().unwrap()).unwrap().with_timezone(&Utc);
    let deadline = receipt + Duration::days(89);
    let set = |at: DateTime<Utc>| {
        let app = &app;
        async move {
            assert_eq!(app.admin("POST", "/admin/clock", Some(json!({"set": at.to_rfc3339()}))).await.0, 200)
        }
    };
    set(deadline - Duration::seconds(2)).await;
    let token = app.demo_token().await;
    let (s, b) = refund_in(&app, &token, &id, json!({"refundValue": 1})).await;
    assert_eq!(s, 201, "{b}");
    set(deadline).await;
    let token = app.demo_token().await;
    let (s, b) = refund_in(&app, &token, &id, json!({"refundValue": 1})).await;
    assert_eq!(s, 400);
    assert_extended(&b, 400, "REFUND_DEADLINE_EXCEEDED");
    let (s, b) = devolucao(&app, &token, &e2e, "late", json!({"valor": "1.00"})).await;
    assert_eq!(s, 422);
    assert_simple(&b, 422);
}

#[actix_rt::test]
async fn a_devolucao_shares_the_namespace_and_answers_replays() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (id, e2e) = receive(&app, &token, "50").await;
    let (s, b) = devolucao(&app, &token, &e2e, "dev1", json!({"valor": "12.30", "descricao": "troco"})).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["id"], "dev1");
    assert_eq!(b["valor"], "12.30");
    assert_eq!(b["natureza"], "ORIGINAL");
    assert_eq!(b["status"], "EM_PROCESSAMENTO");
    assert_eq!(b["rtrId"].as_str().unwrap().len(), 32);
    assert!(b["horario"]["solicitacao"].is_string());
    let (s, again) =
        devolucao(&app, &token, &e2e, "dev1", json!({"valor": "12.30", "descricao": "troco"})).await;
    assert_eq!((s, &again), (200, &b));
    let (s, c) = devolucao(&app, &token, &e2e, "dev1", json!({"valor": "12.31"})).await;
    assert_eq!(s, 409);
    assert_simple(&c, 409);
    // A refund-in externalId is the same namespace as the devolução id.
    let (s, same) = refund_in(&app, &token, &id, json!({"refundValue": 12.30, "externalId": "dev1"})).await;
    assert_eq!(s, 200, "{same}");
    assert_eq!(same["providerTransactionId"], b["rtrId"]);
    let (s, _) = devolucao(&app, &token, &e2e, "dev2", json!({"valor": "40.00"})).await;
    assert_eq!(s, 400, "only 37.70 is left to refund");
    for (e, i, body) in [
        (e2e.as_str(), "dev3", json!({"valor": "10.5"})),
        (e2e.as_str(), "dev3", json!({"valor": 10.50})),
        (e2e.as_str(), "dev3", json!({"valor": "1.00", "natureza": "MED_FRAUDE"})),
        (e2e.as_str(), "dev-3", json!({"valor": "1.00"})),
        ("short", "dev3", json!({"valor": "1.00"})),
    ] {
        let (s, b) = devolucao(&app, &token, e, i, body.clone()).await;
        assert_eq!(s, 400, "{body} {i} {e}: {b}");
        assert_simple(&b, 400);
    }
    let done = app.wait_final(&token, b["rtrId"].as_str().unwrap()).await;
    assert_eq!(done["status"], "CONFIRMED");
    let (s, fin) = devolucao(&app, &token, &e2e, "dev1", json!({"valor": "12.30"})).await;
    assert_eq!((s, fin["status"].as_str()), (200, Some("DEVOLVIDO")));
    // Settled, it says when, as the API Pix does.
    let settled = fin["horario"]["liquidacao"].as_str().unwrap_or_else(|| panic!("no liquidacao: {fin}"));
    assert!(settled >= fin["horario"]["solicitacao"].as_str().unwrap(), "{fin}");
    assert!(b["horario"].get("liquidacao").is_none(), "not while it is processed: {b}");
    // GET reads it back, as the API Pix does; only under the PIX it refunds.
    let (s, got) = app.get_with(&format!("/pix/{e2e}/devolucao/dev1"), &token).await;
    assert_eq!((s, &got), (200, &fin));
    let (_, other_e2e) = receive(&app, &token, "5").await;
    let (s, b) = app.get_with(&format!("/pix/{other_e2e}/devolucao/dev1"), &token).await;
    assert_eq!(s, 404, "{b}");
    assert_simple(&b, 404);
    assert_eq!(app.get_with(&format!("/pix/{e2e}/devolucao/nope"), &token).await.0, 404);
    let (s, b) = app.get_with(&format!("/pix/{e2e}/devolucao/dev-1"), &token).await;
    assert_eq!(s, 400, "{b}");
    assert_simple(&b, 400);
}

/// A family A refund-in without an externalId shows in the PIX's `devolucoes` under its
/// return id, and is read by it (it was shown with `"id": ""`, which no route addresses).
#[actix_rt::test]
async fn a_refund_without_an_external_id_is_shown_and_read_by_its_return_id() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (id, e2e) = receive(&app, &token, "20").await;
    let (s, b) = refund_in(&app, &token, &id, json!({"refundValue": 5})).await;
    assert_eq!(s, 201, "{b}");
    let rtr = b["providerTransactionId"].as_str().unwrap().to_owned();
    app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    let (s, pix) = app.get_with(&format!("/pix/{e2e}"), &token).await;
    assert_eq!(s, 200, "{pix}");
    let shown = &pix["devolucoes"][0];
    assert_eq!((shown["id"].as_str(), shown["rtrId"].as_str()), (Some(rtr.as_str()), Some(rtr.as_str())));
    let (s, got) = app.get_with(&format!("/pix/{e2e}/devolucao/{rtr}"), &token).await;
    assert_eq!((s, &got), (200, shown));
    assert_eq!(got["status"], "DEVOLVIDO");
    assert!(got["horario"]["liquidacao"].is_string(), "{got}");
    // Only under the PIX it refunds.
    let (_, other) = receive(&app, &token, "1").await;
    assert_eq!(app.get_with(&format!("/pix/{other}/devolucao/{rtr}"), &token).await.0, 404);
}

/// A devolução honours the sandbox's refund outcomes (it ignored the header before): a
/// refused return ends NAO_REALIZADO with its reason and gives the money back; one that
/// never settles stays EM_PROCESSAMENTO; PROVIDER_DOWN is 500 and records nothing.
#[actix_rt::test]
async fn a_devolucao_plays_the_sandbox_scenario_it_is_sent() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (_, e2e) = receive(&app, &token, "10").await;
    let put = |id: &str, scenario: &str| {
        let req = app
            .client
            .put(app.url(&format!("/pix/{e2e}/devolucao/{id}")))
            .bearer_auth(&token)
            .insert_header(("X-Sandbox-Scenario", scenario.to_owned()));
        crate::helpers::send(req, Some(json!({"valor": "4.00"})))
    };
    let (s, b) = put("refused1", "ORDER_REJECTED").await;
    assert_eq!((s, b["status"].as_str()), (201, Some("EM_PROCESSAMENTO")), "{b}");
    let t = app.wait_final(&token, b["rtrId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "ERROR");
    let (_, read) = app.get_with(&format!("/pix/{e2e}/devolucao/refused1"), &token).await;
    assert_eq!(read["status"], "NAO_REALIZADO", "{read}");
    assert!(read["motivo"].is_string(), "{read}");
    assert!(read["horario"].get("liquidacao").is_none(), "{read}");
    assert_eq!(app.balance(&token).await.2, "10.00");
    let (s, b) = put("stuck1", "STUCK").await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = put("down1", "PROVIDER_DOWN").await;
    assert_eq!(s, 500, "{b}");
    assert_simple(&b, 500);
    assert_eq!(app.get_with(&format!("/pix/{e2e}/devolucao/down1"), &token).await.0, 404);
    let (_, read) = app.get_with(&format!("/pix/{e2e}/devolucao/stuck1"), &token).await;
    assert_eq!(read["status"], "EM_PROCESSAMENTO");
    assert_eq!(app.balance(&token).await, ("10.00".into(), "4.00".into(), "6.00".into()));
    let (s, b) = put("bad1", "PAY_NOW").await;
    assert_eq!(s, 400, "a charge's scenario is not a refund's: {b}");
}

/// A route that takes no scenario refuses the header, in its own error shape, rather than
/// ignore it.
#[actix_rt::test]
async fn a_route_that_takes_no_scenario_refuses_the_header() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (_, e2e) = receive(&app, &token, "1").await;
    let with =
        |req: awc::ClientRequest| req.bearer_auth(&token).insert_header(("X-Sandbox-Scenario", "CONFIRM"));
    let (s, b) = crate::helpers::send(with(app.client.get(app.url(&format!("/pix/{e2e}")))), None).await;
    assert_eq!(s, 400, "{b}");
    assert_simple(&b, 400);
    assert!(b.to_string().contains("X-Sandbox-Scenario"), "{b}");
    let (s, b) = crate::helpers::send(with(app.client.get(app.url("/api/balance"))), None).await;
    assert_eq!(s, 400, "{b}");
    assert_extended(&b, 400, "HTTP_ERROR");
    let body = json!({"calendario": {}, "valor": {"original": "1.00"}});
    let (s, b) = crate::helpers::send(with(app.client.post(app.url("/cob"))), Some(body)).await;
    assert_eq!(s, 400, "{b}");
    // Routes that take one still do; unknown paths stay 404.
    let (s, _) = crate::helpers::send(with(app.client.get(app.url("/no/such/route"))), None).await;
    assert_eq!(s, 404);
}

#[actix_rt::test]
async fn a_failed_refund_gives_back_money_and_refundable_amount() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (id, _) = receive(&app, &token, "10").await;
    let (s, b) = app
        .post_raw(
            &format!("/api/pix/refund-in/{id}"),
            &token,
            r#"{"refundValue": 10}"#,
            &[("X-Sandbox-Scenario", "ORDER_REJECTED")],
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "ERROR");
    assert_eq!(app.balance(&token).await, ("10.00".into(), "0.00".into(), "10.00".into()));
    let (s, _) = refund_in(&app, &token, &id, json!({"refundValue": 10})).await;
    assert_eq!(s, 201, "the whole amount is refundable again");
}

#[actix_rt::test]
async fn a_restart_in_the_middle_of_a_refund_keeps_it() {
    let mut app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (id, _) = receive(&app, &token, "20").await;
    let (s, b) = app
        .post_raw(
            &format!("/api/pix/refund-in/{id}"),
            &token,
            r#"{"refundValue": 8, "externalId": "slow"}"#,
            &[("X-Sandbox-Scenario", "DELAY_1500")],
        )
        .await;
    assert_eq!(s, 201);
    app.restart(&Options {
        test_clock: true,
        env: vec![("PIXGW_SIM_SETTLE_MS".into(), "20".into())],
        ..Default::default()
    });
    let token = app.demo_token().await;
    assert_eq!(app.balance(&token).await, ("20.00".into(), "8.00".into(), "12.00".into()));
    let t = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "CONFIRMED");
    assert_eq!(app.balance(&token).await.0, "12.00");
    let (s, _) = refund_in(&app, &token, &id, json!({"refundValue": 12.01})).await;
    assert_eq!(s, 400, "8 of 20 were refunded before the restart");
}

#[actix_rt::test]
async fn a_paid_charge_can_be_refunded() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let body = r#"{"transaction": {"value": 15, "description": "d", "externalId": "ch"}, "payer": {"fullName": "P", "document": "52998224725"}}"#;
    let (_, c) = app.post_raw("/api/pix/cash-in", &token, body, &[]).await;
    let id = c["transactionId"].as_str().unwrap();
    assert_eq!(refund_in(&app, &token, id, json!({"refundValue": 1})).await.0, 404, "unpaid");
    let (s, _) = app.post_raw("/sandbox/pay", &token, &json!({"transactionId": id}).to_string(), &[]).await;
    assert_eq!(s, 200);
    assert_eq!(refund_in(&app, &token, id, json!({"refundValue": 15})).await.0, 201);
}

#[actix_rt::test]
async fn the_counterparty_returns_part_of_a_payment() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (key, doc, _) = directory_key("CPF", 0);
    let body = json!({"value": 10, "externalId": "paid", "details": {"key": key, "keyType": "DOCUMENT", "name": "N", "document": doc}});
    let (_, out) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
    let t = app.wait_final(&token, out["transactionId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "CONFIRMED");
    let e2e = t["endToEndId"].as_str().unwrap();
    let back = |amount: &str| {
        let (app, token, body) =
            (&app, token.clone(), format!(r#"{{"endToEndId": "{e2e}", "amount": {amount}}}"#));
        async move { app.post_raw("/sandbox/refund-out", &token, &body, &[]).await }
    };
    let (s, b) = back("4").await;
    assert_eq!(s, 201, "{b}");
    let (_, r) =
        app.get_with(&format!("/api/transactions/{}", b["transactionId"].as_str().unwrap()), &token).await;
    assert_eq!((r["status"].as_str(), r["operation"].as_str()), (Some("CONFIRMED"), Some("REFUND_OUT")));
    assert_eq!(app.balance(&token).await.0, "94.00");
    let (s, b) = back("6.01").await;
    assert_eq!((s, b["code"].as_str()), (400, Some("REFUND_AMOUNT_EXCEEDS_REFUNDABLE")));
    assert_eq!(back("6").await.0, 201);
    let (s, _) = app
        .post_raw(
            "/sandbox/refund-out",
            &token,
            r#"{"endToEndId": "E00000000000000000000000000nope", "amount": 1}"#,
            &[],
        )
        .await;
    assert_eq!(s, 404);
}
