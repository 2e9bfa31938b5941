//! The admin API: authorization, validation with the extended body, accounts,
//! certificates, settings and the test clock.

use chrono::{DateTime, Duration, Utc};
use pixgw::auth::certs;
use serde_json::{json, Value};

use crate::helpers::{assert_extended, cert, send, spawn_app, spawn_with, Options, TestApp};

#[actix_rt::test]
async fn admin_routes_refuse_a_missing_or_wrong_admin_token() {
    let app = spawn_app().await;
    let routes = [
        ("POST", "/admin/accounts"),
        ("GET", "/admin/accounts/1"),
        ("PATCH", "/admin/accounts/1"),
        ("POST", "/admin/accounts/1/certificates"),
        ("DELETE", &format!("/admin/accounts/1/certificates/{}", "a".repeat(64))),
        ("POST", "/admin/accounts/1/secret"),
        ("POST", "/admin/clock"),
    ];
    for (method, path) in routes {
        let req = app.client.request(method.parse().unwrap(), app.url(path));
        let (s, body) = send(req, Some(json!({}))).await;
        assert_eq!(s, 401, "{method} {path}");
        assert_extended(&body, 401, "HTTP_ERROR");
        let req = app.client.request(method.parse().unwrap(), app.url(path)).bearer_auth("pgwadm_wrong");
        let (s, _) = send(req, Some(json!({}))).await;
        assert_eq!(s, 401, "{method} {path}");
        // A client token is not an admin token.
        let token = app.demo_token().await;
        let req = app.client.request(method.parse().unwrap(), app.url(path)).bearer_auth(token);
        assert_eq!(send(req, Some(json!({}))).await.0, 401, "{method} {path}");
    }
}

#[actix_rt::test]
async fn an_invalid_account_is_400_and_creates_nothing() {
    // Each field rule is the reader's (unit tests of `http::admin`); this is the route.
    let app = spawn_app().await;
    let (s, body) = app
        .admin(
            "POST",
            "/admin/accounts",
            Some(json!({"name": "", "document": "52998224724", "sandbox": "yes", "initialBalance": "1.005", "extra": 1})),
        )
        .await;
    assert_eq!(s, 400);
    assert_extended(&body, 400, "HTTP_ERROR");
    assert_eq!(body["message"].as_array().unwrap().len(), 5, "{body}");
    // Nothing was created: the next account still gets id 2.
    let (s, body) = app
        .admin(
            "POST",
            "/admin/accounts",
            Some(json!({"name": "Acme", "document": "11222333000181", "initialBalance": "10.50"})),
        )
        .await;
    assert_eq!(s, 201, "{body}");
    assert_eq!(body["accountId"], 2);
    assert!(uuid::Uuid::parse_str(body["clientId"].as_str().unwrap()).is_ok());
    assert_eq!(body["clientSecret"].as_str().unwrap().len(), 43);
    assert!(body["webhookSecret"].as_str().unwrap().starts_with("whsec_"));
    let (s, view) = app.admin("GET", "/admin/accounts/2", None).await;
    assert_eq!(s, 200);
    assert_eq!(view["name"], "Acme");
    assert_eq!(view["sandbox"], false);
    assert!(view.get("clientSecret").is_none());
}

#[actix_rt::test]
async fn a_body_that_is_not_json_or_not_declared_json_is_400() {
    let app = spawn_app().await;
    let req = app.client.post(app.url("/admin/accounts")).bearer_auth(&app.creds.admin_token);
    let (s, body) = send(req.content_type("text/plain"), None).await;
    assert_eq!(s, 400);
    assert_extended(&body, 400, "HTTP_ERROR");
    let req = app.client.post(app.url("/admin/accounts")).bearer_auth(&app.creds.admin_token);
    let mut res = req.content_type("application/json").send_body("{not json").await.unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let body: Value = res.json().await.unwrap();
    assert_extended(&body, 400, "HTTP_ERROR");
}

#[actix_rt::test]
async fn certificates_belong_to_one_account_and_revocation_is_permanent() {
    let app = spawn_app().await;
    let (id, ..) = app.new_account("Owner").await;
    let pem = cert(Utc::now() - Duration::hours(1), Utc::now() + Duration::days(1));
    let path = format!("/admin/accounts/{id}/certificates");
    let (s, first) = app.admin("POST", &path, Some(json!({"pem": pem}))).await;
    assert_eq!(s, 201);
    let fp = first["fingerprint"].as_str().unwrap().to_owned();
    assert_eq!(fp, certs::parse_pem(&pem).unwrap().fingerprint.to_string());
    // Again for the same account: idempotent.
    let (s, again) = app.admin("POST", &path, Some(json!({"pem": pem}))).await;
    assert_eq!((s, again["fingerprint"].as_str()), (200, Some(fp.as_str())));
    // For another account: conflict.
    let demo_path = format!("/admin/accounts/{}/certificates", app.creds.account_id);
    let (s, body) = app.admin("POST", &demo_path, Some(json!({"pem": pem}))).await;
    assert_eq!(s, 409);
    assert_extended(&body, 409, "CONFLICT");
    // Revoke, twice, then it cannot come back.
    let revoke = format!("/admin/accounts/{id}/certificates/{fp}");
    assert_eq!(app.admin("DELETE", &revoke, None).await.0, 204);
    assert_eq!(app.admin("DELETE", &revoke, None).await.0, 204);
    assert_eq!(app.admin("POST", &path, Some(json!({"pem": pem}))).await.0, 409);
    let (_, view) = app.admin("GET", &format!("/admin/accounts/{id}"), None).await;
    let listed: Vec<&Value> =
        view["certificates"].as_array().unwrap().iter().filter(|c| c["fingerprint"] == fp.as_str()).collect();
    assert_eq!(listed.len(), 1);
    assert!(listed[0]["revokedAt"].is_string());
    // Another account cannot revoke it; unknown and malformed fingerprints are 404.
    let other = format!("/admin/accounts/{}/certificates/{fp}", app.creds.account_id);
    assert_eq!(app.admin("DELETE", &other, None).await.0, 404);
    assert_eq!(
        app.admin("DELETE", &format!("/admin/accounts/{id}/certificates/{}", "b".repeat(64)), None).await.0,
        404
    );
    assert_eq!(app.admin("DELETE", &format!("/admin/accounts/{id}/certificates/XYZ"), None).await.0, 404);
}

#[actix_rt::test]
async fn a_pem_that_does_not_parse_and_an_unknown_account_are_refused() {
    let app = spawn_app().await;
    let (s, body) = app
        .admin(
            "POST",
            &format!("/admin/accounts/{}/certificates", app.creds.account_id),
            Some(json!({"pem": "nope"})),
        )
        .await;
    assert_eq!(s, 400);
    assert_extended(&body, 400, "HTTP_ERROR");
    let pem = cert(Utc::now(), Utc::now() + Duration::days(1));
    for id in ["999", "0", "abc"] {
        let (s, body) =
            app.admin("POST", &format!("/admin/accounts/{id}/certificates"), Some(json!({"pem": pem}))).await;
        assert_eq!(s, 404, "{id}");
        assert_extended(&body, 404, "NOT_FOUND");
    }
}

#[actix_rt::test]
async fn patch_changes_settings_and_a_bad_patch_changes_nothing() {
    let app = spawn_app().await;
    let path = format!("/admin/accounts/{}", app.creds.account_id);
    let (s, body) = app
        .admin(
            "PATCH",
            &path,
            Some(json!({
                "limits": {"perTransaction": "500.00", "nightly": "1000"},
                "fees": {"cashOut": {"fixed": "0.50", "percent": "1.5"}},
                "splitFrequency": "HOURLY",
                "providerMinExpirationSeconds": 600
            })),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["limits"]["perTransaction"], "500.00");
    assert_eq!(body["limits"]["nightly"], "1000.00");
    assert_eq!(body["limits"]["daily"], "1000000.00");
    assert_eq!(body["fees"]["cashOut"]["fixed"], "0.50");
    assert_eq!(body["fees"]["cashOut"]["percent"], "1.5");
    assert_eq!(body["splitFrequency"], "HOURLY");
    assert_eq!(body["providerMinExpirationSeconds"], 600);
    let before = body;
    let (s, err) = app
        .admin(
            "PATCH",
            &path,
            Some(json!({
                "limits": {"daily": "-1"},
                "fees": {"refund": {"percent": "101"}, "pix": {}},
                "splitFrequency": "WEEKLY",
                "providerMinExpirationSeconds": 10
            })),
        )
        .await;
    assert_eq!(s, 400);
    let messages: Vec<&str> =
        err["message"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(
        messages,
        vec![
            "limits.daily must not be negative",
            "fees.pix is not a known field",
            "fees.refund.percent must be between 0 and 100",
            "splitFrequency must be DAILY or HOURLY",
            "providerMinExpirationSeconds must be an integer from 30 to 604800",
        ]
    );
    let (_, view) = app.admin("GET", &path, None).await;
    assert_eq!(view["settings"], before);
    assert_eq!(app.admin("PATCH", "/admin/accounts/999", Some(json!({}))).await.0, 404);
}

#[actix_rt::test]
async fn the_test_clock_moves_forward_only() {
    let app = spawn_app().await;
    let (s, body) = app.admin("POST", "/admin/clock", Some(json!({"advanceSeconds": 86400}))).await;
    assert_eq!(s, 200);
    let now = DateTime::parse_from_rfc3339(body["now"].as_str().unwrap()).unwrap();
    let skew = now.with_timezone(&Utc) - Utc::now();
    assert!((skew - Duration::days(1)).num_seconds().abs() <= 5, "{skew}");
    let target = "2040-01-01T00:00:00.000Z";
    let (s, body) = app.admin("POST", "/admin/clock", Some(json!({"set": target}))).await;
    assert_eq!(s, 200);
    assert!(body["now"].as_str().unwrap().starts_with("2040-01-01T00:00:0"), "{body}");
    for bad in [
        json!({"set": "2030-01-01T00:00:00Z"}),
        json!({"advanceSeconds": -5}),
        json!({"advanceSeconds": 1, "set": target}),
        json!({}),
        json!({"set": "tomorrow"}),
    ] {
        let (s, body) = app.admin("POST", "/admin/clock", Some(bad.clone())).await;
        assert_eq!(s, 400, "{bad}");
        assert_extended(&body, 400, "HTTP_ERROR");
    }
}

#[actix_rt::test]
async fn without_the_test_clock_flag_the_clock_route_is_404() {
    let app = spawn_with(Options { test_clock: false, ..Options::default() }).await;
    let (s, body) = app.admin("POST", "/admin/clock", Some(json!({"advanceSeconds": 1}))).await;
    assert_eq!(s, 404);
    assert_extended(&body, 404, "NOT_FOUND");
}

#[actix_rt::test]
async fn the_admin_token_from_the_environment_overrides_the_generated_one() {
    let token = "operator-chosen-admin-token-123";
    let app =
        spawn_with(Options { env: vec![("PIXGW_ADMIN_TOKEN".into(), token.into())], ..Options::default() })
            .await;
    let req = app.client.get(app.url("/admin/accounts/1")).bearer_auth(token);
    assert_eq!(send(req, None).await.0, 200);
}

#[actix_rt::test]
async fn the_test_clock_can_be_enabled_by_environment() {
    // PIXGW_TEST_CLOCK=1, as the decisions write it, without the flag.
    let app = spawn_with(Options {
        test_clock: false,
        env: vec![("PIXGW_TEST_CLOCK".into(), "1".into())],
        ..Options::default()
    })
    .await;
    let (s, body) = app.admin("POST", "/admin/clock", Some(json!({"advanceSeconds": 5}))).await;
    assert_eq!(s, 200, "{body}");
}

/// A credit above `--operator-credit-single-max` takes two operators: the first to send it
/// proposes it (202, nothing moves; sending it again changes nothing), another operator
/// sending the same request makes it, recorded under both names; the same reference with
/// another amount is 409. Debits and credits at the bound need one.
#[actix_rt::test]
async fn a_credit_above_the_bound_is_made_only_when_a_second_operator_sends_it() {
    use std::os::unix::fs::PermissionsExt;
    const ANA: &str = "ana-admin-token-0123456789012";
    const BIA: &str = "bia-admin-token-0123456789012";
    let keys = tempfile::tempdir().unwrap();
    let file = keys.path().join("admin-tokens");
    std::fs::write(&file, format!("ana {ANA}\nbia {BIA}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let app = spawn_with(Options {
        env: vec![
            ("PIXGW_ADMIN_TOKEN_FILE".into(), file.display().to_string()),
            ("PIXGW_OPERATOR_CREDIT_SINGLE_MAX".into(), "1000.00".into()),
        ],
        ..Options::default()
    })
    .await;
    let (id, client_id, secret, pem) = app.new_account("Loja").await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let token = t["access_token"].as_str().unwrap().to_owned();
    let path = format!("/admin/accounts/{id}/adjustments");
    let by = |who: &'static str, body: Value| {
        let (app, path) = (&app, &path);
        async move { send(app.client.post(app.url(path)).bearer_auth(who), Some(body)).await }
    };
    let at_bound = json!({"type": "CREDIT", "amount": "1000.00", "reason": "aporte", "reference": "a-1"});
    let (s, b) = by(ANA, at_bound).await;
    assert_eq!((s, b["operator"].as_str()), (201, Some("ana")), "{b}");
    let big = json!({"type": "CREDIT", "amount": "5000.00", "reason": "aporte grande", "reference": "big-1"});
    let (s, b) = by(ANA, big.clone()).await;
    assert_eq!(
        (s, b["status"].as_str(), b["proposedBy"].as_str()),
        (202, Some("PROPOSED"), Some("ana")),
        "{b}"
    );
    let (s, b) = by(ANA, big.clone()).await;
    assert_eq!(s, 202, "the proposer alone never makes it: {b}");
    assert_eq!(app.balance(&token).await.0, "1000.00", "nothing moved");
    let other =
        json!({"type": "CREDIT", "amount": "5000.01", "reason": "aporte grande", "reference": "big-1"});
    let (s, b) = by(BIA, other).await;
    assert_eq!(s, 409, "{b}");
    let (s, made) = by(BIA, big.clone()).await;
    assert_eq!((s, made["operator"].as_str()), (201, Some("ana (approved by bia)")), "{made}");
    assert_eq!(app.balance(&token).await.0, "6000.00");
    let (s, again) = by(ANA, big).await;
    assert_eq!((s, &again["transactionId"]), (200, &made["transactionId"]), "made once: {again}");
    let debit = json!({"type": "DEBIT", "amount": "5500.00", "reason": "estorno", "reference": "d-1"});
    let (s, b) = by(ANA, debit).await;
    assert_eq!(s, 201, "a debit takes one operator: {b}");
    assert_eq!(app.balance(&token).await.0, "500.00");
}

/// The operator's money: a credit and a debit are transactions of their own, final at once,
/// listed with their kind; a reference is one move however often it is asked; a debit
/// beyond the balance moves nothing.
#[actix_rt::test]
async fn operator_credits_and_debits_are_ledger_transactions_made_once_per_reference() {
    let app = TestApp::spawn_fast().await;
    let (id, client_id, secret, pem) = app.new_account("Loja").await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let token = t["access_token"].as_str().unwrap().to_owned();
    let path = format!("/admin/accounts/{id}/adjustments");
    let credit =
        json!({"type": "CREDIT", "amount": "100.00", "reason": "aporte inicial", "reference": "f-1"});
    let (s, b) = app.admin("POST", &path, Some(credit.clone())).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!((b["operation"].as_str(), b["status"].as_str()), (Some("OPERATOR_CREDIT"), Some("CONFIRMED")));
    assert_eq!(b["operator"], "admin", "the admin token's name is on the move: {b}");
    let (s, again) = app.admin("POST", &path, Some(credit)).await;
    assert_eq!(
        (s, &again["transactionId"], &again["operator"]),
        (200, &b["transactionId"], &b["operator"]),
        "the same move under its reference: the first move"
    );
    // The reference sent again with another amount, or another type, is another move: 409
    // naming the reference, and nothing moves.
    for other in [
        json!({"type": "CREDIT", "amount": "1000.00", "reason": "aporte inicial", "reference": "f-1"}),
        json!({"type": "DEBIT", "amount": "100.00", "reason": "aporte inicial", "reference": "f-1"}),
    ] {
        let (s, b) = app.admin("POST", &path, Some(other)).await;
        assert_extended(&b, 409, "CONFLICT");
        assert_eq!(s, 409);
        assert!(b["message"].to_string().contains("f-1"), "{b}");
    }
    assert_eq!(app.balance(&token).await.0, "100.00");
    // The client's view names the gateway's operator, not the token.
    let (_, mine) = app
        .get_with(&format!("/api/transactions/{}", again["transactionId"].as_str().unwrap()), &token)
        .await;
    assert!(!mine.to_string().contains("\"admin\""), "{mine}");
    let debit = json!({"type": "DEBIT", "amount": "30.00", "reason": "estorno", "reference": "c-1"});
    let (s, b) = app.admin("POST", &path, Some(debit)).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(app.balance(&token).await, ("70.00".into(), "0.00".into(), "70.00".into()));
    let too_much = json!({"type": "DEBIT", "amount": "70.01", "reason": "x", "reference": "c-2"});
    let (s, b) = app.admin("POST", &path, Some(too_much)).await;
    assert_extended(&b, 400, "PIX_INSUFFICIENT_BALANCE");
    assert_eq!(s, 400);
    for bad in [
        json!({"type": "GIFT", "amount": "1.00", "reason": "x", "reference": "r"}),
        json!({"type": "CREDIT", "amount": "0.00", "reason": "x", "reference": "r"}),
        json!({"type": "CREDIT", "amount": "1.005", "reason": "x", "reference": "r"}),
        json!({"type": "CREDIT", "amount": "1.00", "reference": "r"}),
        json!({"type": "CREDIT", "amount": "1.00", "reason": "x"}),
    ] {
        let (s, b) = app.admin("POST", &path, Some(bad.clone())).await;
        assert_eq!(s, 400, "{bad}: {b}");
    }
    assert_eq!(
        app.balance(&token).await,
        ("70.00".into(), "0.00".into(), "70.00".into()),
        "refusals moved nothing"
    );
    let (_, list) = app.get_with("/api/transactions?type=OPERATOR_CREDIT", &token).await;
    assert_eq!(list["metadata"]["total"], 1, "{list}");
    assert_eq!(list["data"][0]["operationType"], "Operator credit");
    assert_eq!(list["data"][0]["movementType"], "CREDIT");
    // A client may not take the operator's references.
    let body = r#"{"value": 1.00, "externalId": "operator:f-2", "details": {"key": "a@b.co", "keyType": "EMAIL", "name": "N", "document": "52998224725"}}"#;
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, body, &[]).await;
    assert_eq!(s, 400, "{b}");
}
