//! The error contract of the whole server (decisions.md §8): both body shapes, errorId =
//! x-request-id, JSON 404/405/400/413, never HTML; and the operations routes.

use std::sync::Arc;

use pixgw::store::{MemoryStore, Storage};
use serde_json::Value;

use crate::helpers::{assert_extended, assert_simple, send, spawn_app, spawn_in_process};

#[actix_rt::test]
async fn an_unknown_route_is_a_json_404_whose_error_id_is_the_request_id() {
    let app = spawn_app().await;
    let mut res = app.client.get(app.url("/no/such/route")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 404);
    assert_eq!(res.headers().get("content-type").unwrap(), "application/json");
    let request_id = res.headers().get("x-request-id").unwrap().to_str().unwrap().to_owned();
    let body: Value = res.json().await.unwrap();
    assert_extended(&body, 404, "NOT_FOUND");
    assert_eq!(body["errorId"], request_id.as_str());
    assert_eq!(body["path"], "/no/such/route");
    assert_eq!(body["method"], "GET");
    assert!(body["timestamp"].as_str().unwrap().ends_with('Z'));
}

#[actix_rt::test]
async fn family_b_paths_answer_the_simple_shape() {
    let app = spawn_app().await;
    for path in ["/dict/nothing", "/cob/nothing/here/at/all", "/balance"] {
        let (s, body) = send(app.client.delete(app.url(path)), None).await;
        assert!(s == 404 || s == 405, "{path}: {s}");
        assert_simple(&body, s);
    }
}

#[actix_rt::test]
async fn a_wrong_method_is_a_json_405() {
    let app = spawn_app().await;
    let (s, body) = send(app.client.delete(app.url("/healthz")), None).await;
    assert_eq!(s, 405);
    assert_extended(&body, 405, "METHOD_NOT_ALLOWED");
    let (s, body) = send(app.client.get(app.url("/api/auth/token")), None).await;
    assert_eq!(s, 405);
    assert_extended(&body, 405, "METHOD_NOT_ALLOWED");
}

#[actix_rt::test]
async fn a_body_over_the_limit_is_a_json_413() {
    let app = spawn_app().await;
    let big = "x".repeat(pixgw::config::REQUEST_BODY_BYTES_MAX + 1);
    let req = app.client.post(app.url("/admin/accounts")).bearer_auth(&app.creds.admin_token);
    let mut res = req.content_type("application/json").send_body(big).await.unwrap();
    assert_eq!(res.status().as_u16(), 413);
    let body: Value = res.json().await.unwrap();
    assert_extended(&body, 413, "PAYLOAD_TOO_LARGE");
}

#[actix_rt::test]
async fn health_metrics_openapi_and_docs_are_served() {
    let app = spawn_app().await;
    let (s, body) = send(app.client.get(app.url("/healthz")), None).await;
    assert_eq!((s, body["status"].as_str()), (200, Some("ok")));

    let (s, doc) = send(app.client.get(app.url("/openapi.json")), None).await;
    assert_eq!(s, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/api/auth/token"]["post"].is_object());

    let mut res = app.client.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let html = String::from_utf8(res.body().await.unwrap().to_vec()).unwrap();
    assert!(html.contains("swagger"), "{html}");
    // The page's assets come from this server, not from the internet.
    assert!(!html.contains("https://"), "{html}");
    let res = app.client.get(app.url("/docs/swagger-initializer.js")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let res = app.client.get(app.url("/docs")).send().await.unwrap();
    // awc follows the redirect to /docs/.
    assert_eq!(res.status().as_u16(), 200);
    let res = crate::helpers::client_without_redirects().get(app.url("/docs")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 308);
    assert_eq!(res.headers().get("location").unwrap(), "/docs/");

    let mut res = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let text = String::from_utf8(res.body().await.unwrap().to_vec()).unwrap();
    assert!(text.contains(r#"http_requests_total{route="/healthz",method="GET",status="200"}"#), "{text}");
    assert!(text.contains("http_request_duration_seconds_bucket"), "{text}");
}

#[actix_rt::test]
async fn a_storage_outage_answers_json_503_on_health_and_admin_routes() {
    let store = Arc::new(MemoryStore::new());
    let storage = Storage::without_journal(store.clone()).unwrap();
    let app = spawn_in_process(storage.clone()).await;
    // Everything written so far into the store, so every read reaches it.
    storage.commit.checkpoint_now().unwrap();
    store.set_failing(true);
    let (s, body) = send(app.client.get(app.url("/healthz")), None).await;
    assert_eq!(s, 503);
    assert_extended(&body, 503, "SERVICE_UNAVAILABLE");
    let (s, body) = app.admin("GET", "/admin/accounts/1", None).await;
    assert_eq!(s, 503);
    assert_extended(&body, 503, "SERVICE_UNAVAILABLE");
    store.set_failing(false);
    assert_eq!(send(app.client.get(app.url("/healthz")), None).await.0, 200);
}
