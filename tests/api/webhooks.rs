//! Webhook configuration: `POST /api/webhooks` (upsert per event type, its validation rules
//! one by one) and `GET /api/webhooks`.

use serde_json::{json, Value};

use crate::helpers::{assert_extended, send, spawn_with, Options, TestApp};

async fn configure(app: &TestApp, token: &str, body: Value) -> (u16, Value) {
    app.post_raw("/api/webhooks", token, &body.to_string(), &[]).await
}

#[actix_rt::test]
async fn one_endpoint_per_event_type_is_created_then_updated() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let body = json!({"url": "https://hooks.example.com/pix", "eventType": "cash_out", "headers": [{"key": "X-Tenant", "value": "acme"}]});
    let (s, b) = configure(&app, &token, body).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["success"], true);
    let (s, _) =
        configure(&app, &token, json!({"url": "https://hooks.example.com/in", "eventType": "cash_in"})).await;
    assert_eq!(s, 201);
    let (_, first) = app.get_with("/api/webhooks", &token).await;
    // The headers read back as an object of names and values; that shape is accepted back
    // as it was read, and changes nothing.
    let read =
        first["webhooks"].as_array().unwrap().iter().find(|w| w["type"] == "cash_out").unwrap().clone();
    assert_eq!(read["headers"], json!({"X-Tenant": "acme"}));
    let back = json!({"url": read["url"], "eventType": "cash_out", "headers": read["headers"]});
    let (s, b) = configure(&app, &token, back).await;
    assert_eq!(s, 200, "{b}");
    let (_, again) = app.get_with("/api/webhooks", &token).await;
    assert_eq!(again, first, "sending back what was read changed nothing");
    let (s, b) = configure(
        &app,
        &token,
        json!({"url": "https://hooks.example.com/pix", "eventType": "cash_out", "headers": {"Host": "x"}}),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    assert!(b.to_string().contains("headers.Host.key is reserved"), "{b}");
    let (s, b) =
        configure(&app, &token, json!({"url": "https://other.example.com/v2", "eventType": "cash_out"}))
            .await;
    assert_eq!(s, 200, "{b}");
    let (s, list) = app.get_with("/api/webhooks", &token).await;
    assert_eq!(s, 200);
    assert_eq!(list["accountId"], app.creds.account_id);
    assert_eq!(list["total"], 2);
    let out: Vec<&Value> =
        list["webhooks"].as_array().unwrap().iter().filter(|w| w["type"] == "cash_out").collect();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["url"], "https://other.example.com/v2");
    assert_eq!(out[0]["headers"], json!({}));
    assert_eq!(out[0]["isActive"], true);
    let before = first["webhooks"].as_array().unwrap().iter().find(|w| w["type"] == "cash_out").unwrap();
    assert_eq!(out[0]["id"], before["id"], "an update keeps the id");
    assert_eq!(out[0]["createdAt"], before["createdAt"]);
    // Another account sees none of them.
    let (_, client_id, secret, pem) = app.new_account("Other").await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let (_, theirs) = app.get_with("/api/webhooks", t["access_token"].as_str().unwrap()).await;
    assert_eq!(theirs["total"], 0);
    let (s, b) = send(app.client.get(app.url("/api/webhooks")), None).await;
    assert_eq!(s, 401);
    assert_extended(&b, 401, "HTTP_ERROR");
}

#[actix_rt::test]
async fn an_invalid_configuration_is_400_and_saves_nothing() {
    // Each rule is the body reader's (unit tests of `http::webhooks`); this is the route.
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (s, b) =
        configure(&app, &token, json!({"url": "ftp://hooks.example.com", "eventType": "cash_out"})).await;
    assert_eq!(s, 400);
    assert_extended(&b, 400, "HTTP_ERROR");
    assert_eq!(b["details"]["violations"][0]["field"], "url", "{b}");
    let (_, list) = app.get_with("/api/webhooks", &token).await;
    assert_eq!(list["total"], 0, "nothing was saved");
    let h = |k: &str| json!({"key": k, "value": "v"});
    let five = json!({"url": "https://hooks.example.com", "eventType": "cash_out", "headers": [h("a"), h("b"), h("c"), h("d"), h("e")]});
    assert_eq!(configure(&app, &token, five).await.0, 201);
}

#[actix_rt::test]
async fn plain_http_is_accepted_only_when_allowed() {
    let app = spawn_with(Options {
        test_clock: true,
        env: vec![("PIXGW_WEBHOOK_ALLOW_HTTP".into(), "1".into())],
        ..Default::default()
    })
    .await;
    let token = app.demo_token().await;
    let (s, b) = configure(
        &app,
        &token,
        json!({"url": "http://hooks.example.com:9999/hook", "eventType": "refund_in"}),
    )
    .await;
    assert_eq!(s, 201, "{b}");
}

#[actix_rt::test]
async fn an_endpoint_is_removed_by_its_event_type_and_only_the_callers() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    for t in ["cash_in", "cash_out"] {
        let (s, _) =
            configure(&app, &token, json!({"url": "https://hooks.example.com/x", "eventType": t})).await;
        assert_eq!(s, 201);
    }
    let (_, client_id, secret, pem) = app.new_account("Other").await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let other = t["access_token"].as_str().unwrap().to_owned();
    let delete = |path: &str, token: &str| {
        let req = app.client.delete(app.url(path)).bearer_auth(token);
        send(req, None)
    };
    // Another account has no cash_in endpoint: 404, and the caller's is untouched.
    let (s, b) = delete("/api/webhooks/cash_in", &other).await;
    assert_eq!(s, 404, "{b}");
    assert_extended(&b, 404, "NOT_FOUND");
    let (s, _) = delete("/api/webhooks/cash_in", &token).await;
    assert_eq!(s, 204);
    let (_, list) = app.get_with("/api/webhooks", &token).await;
    assert_eq!(list["total"], 1);
    assert_eq!(list["webhooks"][0]["type"], "cash_out");
    let (s, _) = delete("/api/webhooks/cash_in", &token).await;
    assert_eq!(s, 404, "already removed");
    let (s, b) = delete("/api/webhooks/cash_everything", &token).await;
    assert_eq!(s, 400, "{b}");
    assert_extended(&b, 400, "HTTP_ERROR");
    // Configuring it again creates a new endpoint.
    let (s, _) =
        configure(&app, &token, json!({"url": "https://hooks.example.com/y", "eventType": "cash_in"})).await;
    assert_eq!(s, 201);
}
