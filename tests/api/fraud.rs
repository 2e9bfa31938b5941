//! Fraud marks and the risk rule, end to end: the operator marks a person in the DICT
//! (`pixgw spi-sim`), another participant marks one too, and a cash-out to a key whose
//! owner is marked as a mule account is refused before any debit, while one to a key with a
//! lesser mark goes, flagged.

use serde_json::json;

use crate::helpers::*;
use crate::spi::{cash_out, funded_account, metrics_text, spawn_on, Sim};

#[actix_rt::test]
async fn a_payment_to_a_key_marked_as_a_mule_account_is_refused_and_one_with_a_lesser_mark_goes_flagged() {
    let sim = Sim::start(&[]);
    let app = spawn_on(&sim).await;
    let (_, token) = funded_account(&app, &sim, "100.00").await;
    let (mule_key, mule_doc, _) = directory_key("EMAIL", 0);
    let (odd_key, odd_doc, _) = directory_key("EMAIL", 1);
    assert_ne!(mule_doc, odd_doc, "two owners");

    // The operator marks one owner's key as a mule account; asked again under the same
    // reference, it is the same mark.
    let body =
        json!({"taxId": mule_doc, "key": mule_key, "fraudType": "MULE_ACCOUNT", "reference": "case-17"});
    let (s, m) = app.admin("POST", "/admin/fraud-markers", Some(body.clone())).await;
    assert_eq!((s, m["status"].as_str()), (201, Some("REGISTERED")), "{m}");
    let (_, again) = app.admin("POST", "/admin/fraud-markers", Some(body)).await;
    assert_eq!(again["id"], m["id"]);
    let (s, list) = app.admin("GET", &format!("/admin/fraud-markers?taxId={mule_doc}"), None).await;
    assert_eq!((s, list["data"].as_array().map(Vec::len)), (200, Some(1)), "{list}");
    let (s, b) =
        app.admin("POST", "/admin/fraud-markers", Some(json!({"taxId": "123", "fraudType": "WHIM"}))).await;
    assert_eq!(s, 400, "{b}");
    // Another participant marks the other owner for something lesser.
    let (s, _) = sim.post("/sim/fraud-markers", json!({"taxId": odd_doc, "fraudType": "OTHER"})).await;
    assert_eq!(s, 201);

    // The mule's key: refused, with its reason, nothing debited.
    let (s, b) = app
        .post_raw(
            "/api/pix/cash-out",
            &token,
            &cash_out(&mule_key, "EMAIL", &mule_doc, "risk-1", "10.00"),
            &[],
        )
        .await;
    assert_extended(&b, 400, "PIX_PAYEE_FRAUD_MARKED");
    assert_eq!(s, 400);
    assert!(b["message"].as_str().unwrap().contains("mule"), "{b}");
    assert_eq!(app.balance(&token).await.0, "100.00");
    // The other key: the payment goes, and the flag is counted.
    let (s, b) = app
        .post_raw("/api/pix/cash-out", &token, &cash_out(&odd_key, "EMAIL", &odd_doc, "risk-2", "10.00"), &[])
        .await;
    assert_eq!(s, 201, "{b}");
    // The client reads why the payment was flagged, in the answer and on the transaction.
    let why = "the payee's key or its owner carries a fraud mark of the last 12 months";
    assert_eq!(b["risk"], json!({"verdict": "FLAG", "reason": why}), "{b}");
    let id = b["transactionId"].as_str().unwrap();
    let (s, t) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
    assert_eq!((s, &t["risk"]), (200, &json!({"verdict": "FLAG", "reason": why})), "{t}");
    let m_text = metrics_text(&app).await;
    assert!(m_text.contains("pixgw_dict_risk_verdicts_total{verdict=\"refuse\"} 1"), "{m_text}");
    assert!(m_text.contains("pixgw_dict_risk_verdicts_total{verdict=\"flag\"} 1"), "{m_text}");

    // The operator's mark is cancelled.
    let id = m["id"].as_str().unwrap();
    let (s, c) = app.admin("POST", &format!("/admin/fraud-markers/{id}/cancel"), None).await;
    assert_eq!((s, c["status"].as_str()), (200, Some("CANCELLED")), "{c}");
    // On a server without the DICT there is nothing to mark.
    let plain = spawn_app().await;
    let (s, b) = plain
        .admin(
            "POST",
            "/admin/fraud-markers",
            Some(json!({"taxId": mule_doc, "fraudType": "OTHER", "reference": "x"})),
        )
        .await;
    assert_extended(&b, 409, "DICT_REQUIRED");
    assert_eq!(s, 409);
    // Nor a key to claim (decisions.md "DICT key claims").
    let demo = plain.demo_token().await;
    let body = json!({"key": "lucas@example.com"}).to_string();
    let (s, b) = plain.post_raw("/api/dict/claims", &demo, &body, &[]).await;
    assert_extended(&b, 409, "DICT_REQUIRED");
    assert_eq!(s, 409);
}
