//! On-us payments: an account of this gateway pays another's charge, receiving key or
//! `/dict/pix` key; the payee is credited once, with the payer named, and both sides get
//! their webhooks; a kill -9 while on-us payments stream neither loses nor doubles a credit.

use std::collections::HashSet;

use pixgw::domain::ids::AccountId;
use pixgw::domain::money::Money;
use pixgw::domain::transaction::{TxKind, TxStatus};
use pixgw::store::{JournalOptions, Repo, Storage};
use serde_json::{json, Value};

use crate::helpers::{spawn_with, TestApp};
use crate::receiver::Receiver;

/// A second sandbox account: (token, receiving key).
async fn payee(app: &TestApp) -> (String, String) {
    let (_, client_id, secret, pem) = app.new_account_with("Padaria Payee", true).await;
    let (s, t) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(s, 201, "{t}");
    let token = t["access_token"].as_str().unwrap().to_owned();
    let (_, me) = app.get_with("/api/account", &token).await;
    (token, me["receivingKey"].as_str().unwrap().to_owned())
}

/// Polls one of `token`'s transactions until `done` holds (bounded: 10 s).
async fn wait_for(app: &TestApp, token: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (s, t) = app.get_with(&format!("/api/transactions/{id}"), token).await;
        if s == 200 && done(&t) {
            return t;
        }
        assert!(std::time::Instant::now() < deadline, "{id} never got there: {t}");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[actix_rt::test]
async fn an_account_pays_another_accounts_charge_key_and_dict_key_and_each_side_hears_of_it() {
    let app = spawn_with(crate::deliveries::options()).await;
    let payer = app.demo_token().await;
    app.fund(&payer, "100").await;
    let (payee_token, key) = payee(&app).await;
    let mut rx = Receiver::ok();
    let hook = json!({"url": rx.url, "eventType": "cash_in"});
    assert_eq!(app.post_raw("/api/webhooks", &payee_token, &hook.to_string(), &[]).await.0, 201);

    // 1. The payee's charge, paid with a QR cash-out of its code.
    let charge = json!({"transaction": {"value": 12.5, "description": "bread", "externalId": "order-1"},
        "payer": {"fullName": "Someone Expected", "document": "52998224725"}});
    let (s, c) = app.post_raw("/api/pix/cash-in", &payee_token, &charge.to_string(), &[]).await;
    assert_eq!(s, 201, "{c}");
    let code = c["pixCode"].as_str().unwrap();
    let qr = json!({"value": 12.5, "qrCode": code, "externalId": "pay-order-1"});
    let (s, paid) = app.post_raw("/api/pix/cash-out-qrcode", &payer, &qr.to_string(), &[]).await;
    assert_eq!(s, 201, "{paid}");
    let out = app.wait_final(&payer, paid["transactionId"].as_str().unwrap()).await;
    assert_eq!(out["status"], "CONFIRMED", "{out}");
    let charge_id = c["transactionId"].as_str().unwrap();
    let got = wait_for(&app, &payee_token, charge_id, |t| t["status"] == "CONFIRMED").await;
    assert_eq!(got["endToEndId"], out["endToEndId"], "one end-to-end id on both sides");
    assert_eq!(got["counterpart"]["name"], "Demo");
    let w = rx.next().await.json();
    assert_eq!(w["transactionId"], charge_id, "the payee's webhook: {w}");

    // 2. A cash-out to the payee's receiving key: a received PIX.
    let body = json!({"value": 3, "externalId": "to-key", "details": {"key": key, "keyType": "RANDOM", "name": "Padaria", "document": "52998224725"}});
    let (s, b) = app.post_raw("/api/pix/cash-out", &payer, &body.to_string(), &[]).await;
    assert_eq!(s, 201, "{b}");
    let out = app.wait_final(&payer, b["transactionId"].as_str().unwrap()).await;
    assert_eq!(out["status"], "CONFIRMED");
    assert_eq!(out["counterpart"]["bank"]["bankISPB"], "99999999", "settled at this gateway: {out}");
    let e2e = out["endToEndId"].as_str().unwrap();
    let received = wait_for(&app, &payee_token, e2e, |t| t["status"] == "CONFIRMED").await;
    assert_eq!(
        (received["operation"].as_str(), received["originalAmount"].to_string().as_str()),
        (Some("PIX_IN"), "3.00")
    );
    assert_eq!(rx.next().await.json()["endToEndId"], e2e);

    // 3. /dict/pix to the same key.
    let dict = json!({"pixKey": key, "payment": {"currency": "BRL", "amount": 4.5}});
    let idem = uuid::Uuid::new_v4().to_string();
    let (s, d) = app.post_raw("/dict/pix", &payer, &dict.to_string(), &[("x-idempotency-key", &idem)]).await;
    assert_eq!(s, 201, "{d}");
    let out = app.wait_final(&payer, &d["id"].to_string()).await;
    assert_eq!(out["status"], "CONFIRMED");
    wait_for(&app, &payee_token, out["endToEndId"].as_str().unwrap(), |t| t["status"] == "CONFIRMED").await;
    assert_eq!(rx.next().await.json()["endToEndId"], out["endToEndId"]);

    // 4. The payee's cob, paid with a QR cash-out of its location: its code names it.
    let txid = "onuscob20261123abcdefghijk01";
    let cob = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "2.00"}});
    let req = app.client.put(app.url(&format!("/cob/{txid}"))).bearer_auth(&payee_token);
    let (s, created) = crate::helpers::send(req, Some(cob)).await;
    assert_eq!(s, 201, "{created}");
    let qr = json!({"value": 2, "qrCode": created["location"], "externalId": "pay-cob"});
    let (s, paid) = app.post_raw("/api/pix/cash-out-qrcode", &payer, &qr.to_string(), &[]).await;
    assert_eq!(s, 201, "{paid}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, c) = app.get_with(&format!("/cob/{txid}"), &payee_token).await;
        if c["status"] == "CONCLUIDA" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the cob was not paid: {c}");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let w = rx.next().await.json();
    assert_eq!(
        (w["type"].as_str(), w["data"]["debtorAccount"]["name"].as_str()),
        (Some("RECEIVE"), Some("Demo")),
        "{w}"
    );

    assert_eq!(app.balance(&payee_token).await.0, "22.00");
    assert_eq!(app.balance(&payer).await, ("78.00".into(), "0.00".into(), "78.00".into()));
    // The payee refunds the received PIX by its end-to-end id, like any other; the payer is
    // an account of this gateway, so the money goes back to it (it left the books before).
    let req = app.client.put(app.url(&format!("/pix/{e2e}/devolucao/back1"))).bearer_auth(&payee_token);
    let (s, r) = crate::helpers::send(req, Some(json!({"valor": "1.00"}))).await;
    assert_eq!(s, 201, "{r}");
    let rtr = r["rtrId"].as_str().unwrap().to_owned();
    let back = wait_for(&app, &payer, &rtr, |t| t["status"] == "CONFIRMED").await;
    assert_eq!(
        (back["operation"].as_str(), back["originalAmount"].as_f64(), back["endToEndId"].as_str()),
        (Some("REFUND_OUT"), Some(1.0), Some(rtr.as_str())),
        "{back}"
    );
    assert_eq!(app.balance(&payer).await, ("79.00".into(), "0.00".into(), "79.00".into()));
    assert_eq!(app.balance(&payee_token).await.0, "21.00");
    let (s, d) = app.get_with(&format!("/pix/{e2e}/devolucao/back1"), &payee_token).await;
    assert_eq!((s, d["status"].as_str()), (200, Some("DEVOLVIDO")), "{d}");
}

/// "An account may pay itself": then its payment and its receipt carry one end-to-end id,
/// and every route that looks a received PIX up by that id finds the receipt (they found
/// the payment, and answered 404).
#[actix_rt::test]
async fn an_account_that_pays_itself_reads_refunds_and_disputes_what_it_received() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (_, me) = app.get_with("/api/account", &token).await;
    let key = me["receivingKey"].as_str().unwrap();
    let body = json!({"value": 5, "externalId": "to-myself", "details": {"key": key, "keyType": "RANDOM", "name": "Demo", "document": "52998224725"}});
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body.to_string(), &[]).await;
    assert_eq!(s, 201, "{b}");
    let out = app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert_eq!(out["status"], "CONFIRMED", "{out}");
    let e2e = out["endToEndId"].as_str().unwrap().to_owned();

    // Both sides are listed under the id, once the credit (which follows the payer's
    // confirmation) has landed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let both = loop {
        let (s, both) = app.get_with(&format!("/api/transactions?endToEndId={e2e}"), &token).await;
        assert_eq!(s, 200, "{both}");
        if both["metadata"]["total"] == 2 || std::time::Instant::now() >= deadline {
            break both;
        }
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let mut ops: Vec<&str> =
        both["data"].as_array().unwrap().iter().map(|t| t["operationType"].as_str().unwrap()).collect();
    ops.sort();
    assert_eq!((ops, both["metadata"]["total"].as_u64()), (vec!["Pix in", "Pix out"], Some(2)), "{both}");

    // The API Pix reads the receipt and refunds it.
    let (s, pix) = app.get_with(&format!("/pix/{e2e}"), &token).await;
    assert_eq!((s, pix["valor"].as_str()), (200, Some("5.00")), "{pix}");
    let req = app.client.put(app.url(&format!("/pix/{e2e}/devolucao/self1"))).bearer_auth(&token);
    let (s, r) = crate::helpers::send(req, Some(json!({"valor": "1.00"}))).await;
    assert_eq!(s, 201, "{r}");
    // So does family A's refund-in, by the same id.
    let (s, r) =
        app.post_raw(&format!("/api/pix/refund-in/{e2e}"), &token, r#"{"refundValue": 1}"#, &[]).await;
    assert_eq!(s, 201, "{r}");
    // And a MED on the id is reconciled with the receipt, not the payment.
    let (s, med) =
        app.post_raw("/sandbox/med", &token, &json!({"endToEnd": e2e, "amount": 1}).to_string(), &[]).await;
    assert_eq!((s, med["isReconciled"].as_bool()), (201, Some(true)), "{med}");
    let (_, receipt) =
        app.get_with(&format!("/api/transactions/{}", med["originalTransactionId"]), &token).await;
    assert_eq!(receipt["operation"], "PIX_IN", "{receipt}");
}

#[actix_rt::test]
async fn kill_9_while_on_us_payments_stream_neither_loses_nor_doubles_a_credit() {
    let mut app = spawn_with(crate::recovery::fast()).await;
    let payer = app.demo_token().await;
    app.fund(&payer, "100000").await;
    let (payee_token, key) = payee(&app).await;
    let payee_id = AccountId::new(2).unwrap();
    let body_of = |ext: &str| {
        json!({"value": 1, "externalId": ext, "details": {"key": key, "keyType": "RANDOM", "name": "P", "document": "52998224725"}}).to_string()
    };
    for round in 0..2 {
        let token = app.demo_token().await;
        let kill_after = 80 + round * 97;
        let (acked, _) =
            crate::recovery::stream_then_kill(&mut app, &token, 8, kill_after, round, &body_of).await;
        assert!(acked.len() >= kill_after);
        app.start_again(&crate::recovery::fast());
    }
    // Every payment settles and every credit lands: the payer's debits equal the payee's
    // credits (no fees by default).
    let token = app.demo_token().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (gross, blocked, _) = app.balance(&token).await;
        let debited = Money::parse("100000").unwrap().checked_sub(Money::parse(&gross).unwrap()).unwrap();
        let credited = Money::parse(&app.balance(&payee_token).await.0).unwrap();
        if blocked == "0.00" && credited == debited {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "debited {debited}, credited {credited} after 60 s");
        actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(app.stop().success());
    let storage = Storage::open(&app.data_dir(), 16, JournalOptions::default(), Repo::layout()).unwrap();
    let repo = Repo::new(&storage);
    let owed = repo.on_us_credits().unwrap();
    let paid: Vec<_> = repo
        .transactions_of(AccountId::new(app.creds.account_id).unwrap())
        .unwrap()
        .into_iter()
        .filter(|t| t.kind == TxKind::CashOut && t.status == TxStatus::Confirmed)
        .collect();
    let credited: Vec<_> =
        repo.transactions_of(payee_id).unwrap().into_iter().filter(|t| t.kind == TxKind::PixIn).collect();
    let paid_e2e: HashSet<&str> = paid.iter().map(|t| t.end_to_end_id.as_str()).collect();
    let mut credited_e2e = HashSet::new();
    for t in &credited {
        assert!(credited_e2e.insert(t.end_to_end_id.as_str()), "{} credited twice", t.end_to_end_id);
        assert!(paid_e2e.contains(t.end_to_end_id.as_str()), "{} credited but never paid", t.end_to_end_id);
    }
    assert_eq!(credited_e2e, paid_e2e, "every payment credited, once");
    assert!(owed.is_empty(), "credits left owed: {owed:?}");
    assert!(paid.len() >= 80 + 177, "{} paid", paid.len());
}

/// Keys an operator registers for an account (an e-mail, a phone, its CNPJ) are held by
/// this gateway: a payment to any of them, by cash-out or `/dict/pix`, settles on us and
/// credits that account, as one to its receiving EVP does.
#[actix_rt::test]
async fn keys_an_operator_registers_for_an_account_settle_on_us_whatever_their_type() {
    let app = TestApp::spawn_fast().await;
    let payer = app.demo_token().await;
    app.fund(&payer, "100").await;
    let (s, b) = app
        .admin("POST", "/admin/accounts", Some(json!({"name": "Acme Payee", "document": "11222333000181"})))
        .await;
    assert_eq!(s, 201, "{b}");
    let id = b["accountId"].as_u64().unwrap();
    let now = chrono::Utc::now();
    let pem = crate::helpers::cert(now - chrono::Duration::hours(1), now + chrono::Duration::days(1));
    let (s, c) =
        app.admin("POST", &format!("/admin/accounts/{id}/certificates"), Some(json!({"pem": pem}))).await;
    assert_eq!(s, 201, "{c}");
    let (s, t) =
        app.token_with(&pem, b["clientId"].as_str().unwrap(), b["clientSecret"].as_str().unwrap()).await;
    assert_eq!(s, 201, "{t}");
    let payee = t["access_token"].as_str().unwrap().to_owned();
    for key in ["acme.payee@example.org", "+5511912345678", "11222333000181"] {
        let (s, k) =
            app.admin("POST", &format!("/admin/accounts/{id}/keys"), Some(json!({"key": key}))).await;
        assert_eq!(s, 201, "{k}");
        assert_eq!(k["directory"], "SIMULATOR", "a live account on --rail sim: {k}");
    }
    let pays = [
        ("EMAIL", "acme.payee@example.org", "1.25"),
        ("PHONE", "11912345678", "2.50"),
        ("DOCUMENT", "11222333000181", "3.00"),
    ];
    for (i, (key_type, key, value)) in pays.iter().enumerate() {
        let body = format!(
            r#"{{"value": {value}, "externalId": "registered-{i}", "details": {{"key": "{key}", "keyType": "{key_type}", "name": "Acme", "document": "11222333000181"}}}}"#
        );
        let (s, b) = app.post_raw("/api/pix/cash-out", &payer, &body, &[]).await;
        assert_eq!(s, 201, "{b}");
        let out = app.wait_final(&payer, b["transactionId"].as_str().unwrap()).await;
        assert_eq!(out["status"], "CONFIRMED", "{key_type} {key}: {out}");
        assert_eq!(out["counterpart"]["bank"]["bankISPB"], "99999999", "settled at this gateway: {out}");
    }
    let dict = json!({"pixKey": "+5511912345678", "payment": {"currency": "BRL", "amount": 4.25}});
    let idem = uuid::Uuid::new_v4().to_string();
    let (s, d) = app.post_raw("/dict/pix", &payer, &dict.to_string(), &[("x-idempotency-key", &idem)]).await;
    assert_eq!(s, 201, "{d}");
    let out = app.wait_final(&payer, &d["id"].to_string()).await;
    assert_eq!(out["status"], "CONFIRMED", "{out}");
    // The payee holds every payment: 1.25 + 2.50 + 3.00 + 4.25.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while app.balance(&payee).await.0 != "11.00" {
        assert!(
            std::time::Instant::now() < deadline,
            "the payee was not credited: {:?}",
            app.balance(&payee).await
        );
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(app.balance(&payer).await.0, "89.00");
}
