//! `GET /api/transactions`: every filter alone and combined, paging at its edges, the
//! 31-day rule at its boundary, Sao Paulo days, masked documents, the display values, and
//! another account's transactions never appearing.

use serde_json::{json, Value};

use crate::helpers::{assert_extended, directory_key, TestApp};

async fn list(app: &TestApp, token: &str, query: &str) -> Value {
    let (s, b) = app.get_with(&format!("/api/transactions?{query}"), token).await;
    assert_eq!(s, 200, "{query}: {b}");
    b
}

fn ids(page: &Value) -> Vec<String> {
    page["data"].as_array().unwrap().iter().map(|t| t["transactionId"].as_str().unwrap().to_owned()).collect()
}

async fn pix_in(app: &TestApp, token: &str, body: Value) -> Value {
    let (s, b) = app.post_raw("/sandbox/pix-in", token, &body.to_string(), &[]).await;
    assert_eq!(s, 201, "{b}");
    b
}

async fn cash_out(app: &TestApp, token: &str, ext: &str, scenario: &str, key_type: &str) -> String {
    let (key, doc, _) = directory_key(key_type, 0);
    let kt = if key_type == "CPF" || key_type == "CNPJ" { "DOCUMENT" } else { key_type };
    let body = json!({"value": 2, "externalId": ext, "details": {"key": key, "keyType": kt, "name": "Payee", "document": doc}});
    let (s, b) = app
        .post_raw("/api/pix/cash-out", token, &body.to_string(), &[("X-Sandbox-Scenario", scenario)])
        .await;
    assert_eq!(s, 201, "{b}");
    b["transactionId"].as_str().unwrap().to_owned()
}

#[actix_rt::test]
async fn each_filter_alone_and_combined_with_display_values_and_masking() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let fund =
        pix_in(&app, &token, json!({"amount": 100, "payerName": "Ana", "payerDocument": "52998224725"}))
            .await;
    let ok = cash_out(&app, &token, "ok", "CONFIRM", "CNPJ").await;
    let bad = cash_out(&app, &token, "bad", "BLOCKED_ACCOUNT", "EMAIL").await;
    let stuck = cash_out(&app, &token, "stuck", "STUCK", "EMAIL").await;
    let ok_t = app.wait_final(&token, &ok).await;
    app.wait_final(&token, &bad).await;
    let (s, back) = app
        .post_raw(
            "/sandbox/refund-out",
            &token,
            &format!(r#"{{"endToEndId": "{}", "amount": 1.5}}"#, ok_t["endToEndId"].as_str().unwrap()),
            &[],
        )
        .await;
    assert_eq!(s, 201, "{back}");
    let refund_out = back["transactionId"].as_str().unwrap().to_owned();
    let (s, r) = app
        .post_raw(
            &format!("/api/pix/refund-in/{}", fund["transactionId"].as_str().unwrap()),
            &token,
            &json!({"refundValue": 3, "reason": "r", "externalId": "ref-1"}).to_string(),
            &[],
        )
        .await;
    assert_eq!(s, 201, "{r}");
    let refund_in = r["transactionId"].as_str().unwrap().to_owned();
    app.wait_final(&token, &refund_in).await;
    let fund_id = fund["transactionId"].as_str().unwrap().to_owned();

    let all = list(&app, &token, "").await;
    assert_eq!(
        ids(&all),
        vec![refund_in.clone(), refund_out.clone(), stuck.clone(), bad.clone(), ok.clone(), fund_id.clone()],
        "newest first"
    );
    assert_eq!(
        all["metadata"],
        json!({"page": 1, "size": 20, "total": 6, "totalPages": 1, "hasNext": false, "hasPrevious": false})
    );
    let by_id =
        |id: &str| all["data"].as_array().unwrap().iter().find(|t| t["transactionId"] == id).unwrap().clone();
    let f = by_id(&fund_id);
    assert_eq!(
        (f["status"].as_str(), f["operationType"].as_str(), f["movementType"].as_str()),
        (Some("Confirmado"), Some("Pix in"), Some("CREDIT"))
    );
    assert_eq!(f["counterpart"]["document"], "***.982.247-**", "a CPF is masked");
    assert_eq!(serde_json::to_string(&f["originalAmount"]).unwrap(), "100.00");
    let o = by_id(&ok);
    assert_eq!(
        (o["status"].as_str(), o["operationType"].as_str(), o["movementType"].as_str()),
        (Some("Confirmado"), Some("Pix out"), Some("DEBIT"))
    );
    let (_, cnpj, ispb) = directory_key("CNPJ", 0);
    let masked = format!("{}.{}.{}/****-**", &cnpj[0..2], &cnpj[2..5], &cnpj[5..8]);
    assert_eq!(o["counterpart"]["document"], masked.as_str(), "a CNPJ is masked");
    // The single read shows the same masked documents (it showed them in full) and the
    // same bank, in the same words (it said ispb/name/code/branch).
    for (id, doc) in [(&ok, masked.as_str()), (&fund_id, "***.982.247-**")] {
        let (s, one) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
        assert_eq!((s, one["counterpart"]["document"].as_str()), (200, Some(doc)), "{one}");
        assert_eq!(one["counterpart"]["bank"], by_id(id)["counterpart"]["bank"], "{one}");
    }
    let (_, pending) = app.get_with(&format!("/api/transactions/{stuck}"), &token).await;
    assert_eq!(pending["counterpart"]["bank"], by_id(&stuck)["counterpart"]["bank"], "{pending}");
    assert_eq!(o["counterpart"]["bank"]["bankISPB"], ispb.as_str());
    assert_eq!(o["externalId"], "ok");
    for k in ["feeAmount", "finalAmount", "endToEndId", "createdAt", "processedAt"] {
        assert!(o.get(k).is_some(), "{k}");
    }
    let p = by_id(&stuck);
    assert_eq!(p["status"], "Pendente");
    assert!(
        p["counterpart"]["bank"]["bankISPB"].is_string(),
        "a pending transfer shows the directory's bank"
    );
    assert_eq!(by_id(&bad)["status"], "Error");
    let ri = by_id(&refund_in);
    assert_eq!(
        (ri["operationType"].as_str(), ri["movementType"].as_str()),
        (Some("Refund in"), Some("DEBIT"))
    );
    let ro = by_id(&refund_out);
    assert_eq!(
        (ro["operationType"].as_str(), ro["movementType"].as_str()),
        (Some("Refund out"), Some("CREDIT"))
    );

    let cases: Vec<(&str, Vec<&String>)> = vec![
        ("status=CONFIRMED", vec![&refund_in, &refund_out, &ok, &fund_id]),
        ("status=PENDING", vec![&stuck]),
        ("status=ERROR", vec![&bad]),
        ("type=WITHDRAW", vec![&stuck, &bad, &ok]),
        ("type=PAYMENT", vec![&fund_id]),
        ("type=REFUND_IN", vec![&refund_in]),
        ("type=REFUND_OUT", vec![&refund_out]),
        ("type=WITHDRAW&status=CONFIRMED", vec![&ok]),
        ("type=PAYMENT&status=ERROR", vec![]),
        ("externalId=bad", vec![&bad]),
        ("externalId=bad&status=CONFIRMED", vec![]),
        ("externalId=nope", vec![]),
    ];
    for (q, want) in cases {
        let page = list(&app, &token, q).await;
        let want: Vec<String> = want.into_iter().cloned().collect();
        assert_eq!(ids(&page), want, "{q}");
        assert_eq!(page["metadata"]["total"], want.len(), "{q}");
    }
    let e2e = o["endToEndId"].as_str().unwrap();
    assert_eq!(ids(&list(&app, &token, &format!("endToEndId={e2e}")).await), vec![ok.clone()]);
    assert_eq!(
        ids(&list(&app, &token, &format!("endToEndId={e2e}&externalId=ok&type=WITHDRAW")).await),
        vec![ok.clone()]
    );
    assert!(ids(&list(&app, &token, &format!("endToEndId={e2e}&externalId=bad")).await).is_empty());

    // Another account sees none of it, by any filter.
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let other = t["access_token"].as_str().unwrap();
    for q in ["", "externalId=ok", &format!("endToEndId={e2e}")] {
        let page = list(&app, other, q).await;
        assert_eq!(page["metadata"]["total"], 0, "{q}");
        assert!(ids(&page).is_empty(), "{q}");
    }
}

#[actix_rt::test]
async fn pages_at_their_edges() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let mut made = Vec::new();
    for i in 1..=5 {
        made.push(
            pix_in(&app, &token, json!({"amount": i})).await["transactionId"].as_str().unwrap().to_owned(),
        );
    }
    made.reverse();
    let p1 = list(&app, &token, "size=2").await;
    assert_eq!(ids(&p1), made[0..2].to_vec());
    assert_eq!(
        p1["metadata"],
        json!({"page": 1, "size": 2, "total": 5, "totalPages": 3, "hasNext": true, "hasPrevious": false})
    );
    let p2 = list(&app, &token, "size=2&page=2").await;
    assert_eq!(ids(&p2), made[2..4].to_vec());
    assert_eq!(
        (p2["metadata"]["hasNext"].as_bool(), p2["metadata"]["hasPrevious"].as_bool()),
        (Some(true), Some(true))
    );
    let p3 = list(&app, &token, "size=2&page=3").await;
    assert_eq!(ids(&p3), made[4..5].to_vec());
    assert_eq!(
        (p3["metadata"]["hasNext"].as_bool(), p3["metadata"]["hasPrevious"].as_bool()),
        (Some(false), Some(true))
    );
    let p4 = list(&app, &token, "size=2&page=4").await;
    assert!(ids(&p4).is_empty(), "past the last page");
    assert_eq!(
        (p4["metadata"]["total"].as_u64(), p4["metadata"]["hasNext"].as_bool()),
        (Some(5), Some(false))
    );
    let all = list(&app, &token, "size=100").await;
    assert_eq!(ids(&all), made);
    let empty = list(&app, &token, "status=ERROR").await;
    assert_eq!(
        empty["metadata"],
        json!({"page": 1, "size": 20, "total": 0, "totalPages": 0, "hasNext": false, "hasPrevious": false})
    );
}

#[actix_rt::test]
async fn whole_sao_paulo_days_and_the_31_day_rule_at_its_boundary() {
    let app = TestApp::spawn_fast().await;
    // 02:30 UTC is 23:30 of the day before in Sao Paulo.
    let (s, b) = app.admin("POST", "/admin/clock", Some(json!({"set": "2030-03-10T02:30:00Z"}))).await;
    assert_eq!(s, 200, "{b}");
    let token = app.demo_token().await;
    let late = pix_in(&app, &token, json!({"amount": 1})).await["transactionId"].as_str().unwrap().to_owned();
    app.advance(3600).await; // 03:30 UTC: the 10th in Sao Paulo
    let token = app.demo_token().await;
    let next = pix_in(&app, &token, json!({"amount": 2})).await["transactionId"].as_str().unwrap().to_owned();
    assert_eq!(ids(&list(&app, &token, "startDate=2030-03-09&endDate=2030-03-09").await), vec![late.clone()]);
    assert_eq!(ids(&list(&app, &token, "startDate=2030-03-10&endDate=2030-03-10").await), vec![next.clone()]);
    assert_eq!(
        ids(&list(&app, &token, "").await),
        vec![next.clone(), late.clone()],
        "default: the last 31 days"
    );
    assert_eq!(ids(&list(&app, &token, "endDate=2030-03-09").await), vec![late.clone()]);
    // Exactly 31 days is allowed, 32 is not.
    assert_eq!(ids(&list(&app, &token, "startDate=2030-02-07&endDate=2030-03-10").await).len(), 2);
    let bad = [
        "startDate=2030-02-06&endDate=2030-03-10",
        "startDate=2030-02-06",
        "startDate=2030-03-11&endDate=2030-03-10",
        "startDate=10/03/2030",
        "endDate=2030-13-01",
        "size=101",
        "size=0",
        "page=0",
        "page=x",
        "status=DONE",
        "type=PIX",
        "pageSize=10",
    ];
    for q in bad {
        let (s, b) = app.get_with(&format!("/api/transactions?{q}"), &token).await;
        assert_eq!(s, 400, "{q}: {b}");
        assert_extended(&b, 400, "HTTP_ERROR");
    }
    assert_eq!(list(&app, &token, "size=100").await["metadata"]["size"], 100);
}

#[actix_rt::test]
async fn the_single_read_and_the_list_say_the_same_of_a_transaction() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    pix_in(&app, &token, json!({"amount": 50})).await;
    let out = cash_out(&app, &token, "same-words", "CONFIRM", "EMAIL").await;
    app.wait_final(&token, &out).await;
    let page = list(&app, &token, "size=10").await;
    for listed in page["data"].as_array().unwrap() {
        let id = listed["transactionId"].as_str().unwrap();
        let (s, one) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
        assert_eq!(s, 200, "{one}");
        for field in [
            "operationType",
            "movementType",
            "finalAmount",
            "originalAmount",
            "feeAmount",
            "endToEndId",
            "id",
        ] {
            assert_eq!(one[field], listed[field], "{field} of {id}: {one} against {listed}");
        }
    }
}
