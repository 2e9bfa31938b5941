//! One rule for a body member a route does not know, per family, on every operation of the
//! OpenAPI document: family B and the operators' routes refuse it with a 400 naming it;
//! family A ignores it (docs/decisions.md "Unknown members").

use serde_json::{json, Value};

use crate::cobr::{approved, charge, cobr_body, today};
use crate::helpers::TestApp;
use crate::rec::sent;

const UNKNOWN: &str = "zzUnknownMember";

/// The family an operation answers errors in, by the body its 400 refers to.
fn simple_family(op: &Value) -> bool {
    op["responses"]["400"].to_string().contains("SimpleErrorBody")
}

#[actix_rt::test]
async fn every_operation_refuses_or_ignores_an_unknown_member_by_its_family() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let account = app.creds.account_id;
    // What the operations' paths name, made first so that each one reads its body.
    let send_json = |method: &str, path: String, body: Value| {
        let (app, token) = (&app, token.clone());
        let method = awc::http::Method::from_bytes(method.as_bytes()).unwrap();
        async move {
            crate::helpers::send(app.client.request(method, app.url(&path)).bearer_auth(&token), Some(body))
                .await
        }
    };
    let cob_txid = "unknownmembercob0000000000000001";
    let (s, b) = send_json(
        "PUT",
        format!("/cob/{cob_txid}"),
        json!({"calendario": {"expiracao": 3600}, "valor": {"original": "1.00"}}),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let cobv_txid = "unknownmembercobv000000000000001";
    let due = (today() + chrono::Duration::days(20)).to_string();
    let cobv = json!({"calendario": {"dataDeVencimento": due}, "devedor": {"cpf": "52998224725", "nome": "Ana"}, "valor": {"original": "10.00"}});
    let (s, b) = send_json("PUT", format!("/cobv/{cobv_txid}"), cobv).await;
    assert_eq!(s, 201, "{b}");
    let id_rec = approved(&app, &token, "PERMITE_3R_7D").await;
    let cobr_txid = "unknownmembercobr000000000000001";
    charge(&app, &token, cobr_txid, cobr_body(&id_rec, today() + chrono::Duration::days(5)), "PAY").await;
    let (_, id_solic) = sent(&app, &token, json!({"valorRec": "10.00"}), &crate::rec::in_hours(24)).await;
    let (s, received) = app.post_raw("/sandbox/pix-in", &token, r#"{"amount": 5}"#, &[]).await;
    assert_eq!(s, 201, "{received}");
    let e2e = app.wait_final(&token, received["transactionId"].as_str().unwrap()).await["endToEndId"]
        .as_str()
        .unwrap()
        .to_owned();

    let account_text = account.to_string();
    let (s, doc) = app.get_with("/openapi.json", "").await;
    assert_eq!(s, 200);
    let (mut refused, mut ignored, mut schemas_wrong) = (Vec::new(), Vec::new(), Vec::new());
    for (template, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if op.get("requestBody").is_none() || template == "/api/auth/token" {
                continue;
            }
            let fresh = method == "put" || method == "post";
            let path = template
                .replace(
                    "{txid}",
                    match template.as_str() {
                        _ if fresh && template.starts_with("/cobr") && template.ends_with("{txid}") => {
                            "unknownmembercobr000000000000002"
                        }
                        _ if fresh && template.starts_with("/cobv") => "unknownmembercobv000000000000002",
                        _ if fresh && template.starts_with("/cob/") => "unknownmembercob0000000000000002",
                        _ if template.starts_with("/cobr") => cobr_txid,
                        _ if template.starts_with("/cobv") => cobv_txid,
                        _ => cob_txid,
                    },
                )
                .replace("{e2eid}", &e2e)
                .replace("{idRec}", &id_rec)
                .replace("{idSolicRec}", &id_solic)
                .replace("{id}", if template.starts_with("/admin/") { &account_text } else { "1" })
                .replace("{medId}", "1")
                .replace("{claimId}", "00000000-0000-4000-8000-000000000000")
                .replace("{step}", "confirm")
                .replace("{data}", &(today() + chrono::Duration::days(9)).to_string())
                .replace("{transactionIdentifier}", "1");
            assert!(!path.contains('{'), "{path}: a path parameter this test does not fill");
            let mut req = app.client.request(
                awc::http::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap(),
                app.url(&path),
            );
            req = if path.starts_with("/admin/") {
                req.bearer_auth(&app.creds.admin_token)
            } else {
                req.bearer_auth(&token)
            };
            if path == "/dict/pix" {
                req = req.insert_header(("x-idempotency-key", uuid::Uuid::new_v4().to_string()));
            }
            let mut res = req.send_json(&json!({ UNKNOWN: 1 })).await.unwrap();
            let status = res.status().as_u16();
            let body = String::from_utf8_lossy(&res.body().await.unwrap()).into_owned();
            let named = body.contains(UNKNOWN);
            let strict = simple_family(op) || path.starts_with("/admin/");
            let what = format!("{} {template} -> {status} {body}", method.to_uppercase());
            // The document says the same of the body's schema.
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            let schema = match schema["$ref"].as_str() {
                Some(r) => &doc["components"]["schemas"][r.rsplit('/').next().unwrap()],
                None => schema,
            };
            if (schema["additionalProperties"] == json!(false)) != strict {
                schemas_wrong.push(format!(
                    "{} {template} ({})",
                    method.to_uppercase(),
                    op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                ));
            }
            if strict {
                assert!(status == 400 && named, "refused with a 400 naming it: {what}");
                refused.push(what);
            } else {
                assert!(!named, "ignored, never refused for it: {what}");
                ignored.push(what);
            }
        }
    }
    assert!(schemas_wrong.is_empty(), "request schemas that say otherwise: {schemas_wrong:#?}");
    // Both families were walked, each route of theirs.
    assert!(refused.len() >= 20 && ignored.len() >= 12, "refused {refused:#?}\nignored {ignored:#?}");
}
