//! The error contract of the whole server (interface.md "Errors"): both body shapes, errorId =
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

/// A body that does not arrive within the deadline is answered 408 and its connection
/// closed, however it is framed, even while the client keeps trickling bytes: a chunked body
/// kept its connection open and read on (a Content-Length one was closed).
#[actix_rt::test]
async fn a_body_that_does_not_arrive_in_time_is_a_json_408_and_the_connection_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let opts = crate::helpers::Options {
        env: vec![("PIXGW_BODY_TIMEOUT_MS".into(), "300".into())],
        ..Default::default()
    };
    let app = crate::helpers::spawn_with(opts).await;
    let addr = app.url("").trim_start_matches("http://").trim_end_matches('/').to_owned();
    // (framing header, the part sent at once, one more byte of the body as the framing writes it)
    let framings = [
        ("Content-Length: 100", "{\"name\": ", " "),
        ("Transfer-Encoding: chunked", "9\r\n{\"name\": \r\n", "1\r\n \r\n"),
    ];
    for (framing, start, trickle) in framings {
        let conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let (mut rd, mut wr) = conn.into_split();
        let head = format!(
            "POST /admin/accounts HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\n{framing}\r\n\r\n{start}",
            app.creds.admin_token
        );
        wr.write_all(head.as_bytes()).await.unwrap();
        // The client trickles a byte every 50 ms, never finishing, until the server closes.
        let trickler = actix_rt::spawn(async move {
            for _ in 0..400 {
                actix_rt::time::sleep(std::time::Duration::from_millis(50)).await;
                if wr.write_all(trickle.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
        let mut answer = Vec::new();
        let read = tokio::time::timeout(std::time::Duration::from_secs(15), rd.read_to_end(&mut answer));
        let closed = read.await;
        trickler.abort();
        let text = String::from_utf8_lossy(&answer);
        // Closed: an end of stream, or a reset (the server closed with trickled bytes unread).
        let closed = match closed {
            Ok(Ok(_)) => true,
            Ok(Err(e)) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Err(_) => false,
        };
        assert!(closed, "{framing}: the connection stayed open after {text}");
        assert!(text.starts_with("HTTP/1.1 408"), "{framing}: {text}");
        let body: Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_extended(&body, 408, "REQUEST_TIMEOUT");
    }
    // Nothing was created: the next account made is the second.
    let (s, b) = app
        .admin(
            "POST",
            "/admin/accounts",
            Some(serde_json::json!({"name": "Next", "document": "52998224725"})),
        )
        .await;
    assert_eq!((s, b["accountId"].as_u64()), (201, Some(2)), "{b}");
}

#[actix_rt::test]
async fn a_member_named_twice_is_400_and_moves_nothing() {
    let app = crate::helpers::TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "10").await;
    let (key, doc, _) = crate::helpers::directory_key("EMAIL", 0);
    let body = format!(
        r#"{{"value": 0.01, "value": 0.02, "externalId": "twice", "details": {{"key": "{key}", "keyType": "EMAIL", "name": "P", "document": "{doc}"}}}}"#
    );
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body, &[]).await;
    assert_eq!(s, 400, "{b}");
    assert_extended(&b, 400, "HTTP_ERROR");
    assert!(b["message"].to_string().contains("\\\"value\\\" appears twice"), "{b}");
    assert_eq!(app.balance(&token).await.0, "10.00");
}

/// The value of the one sample of `family` whose labels include every one of `labels`.
fn sample(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(family) && l[family.len()..].starts_with(['{', ' ']))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[actix_rt::test]
async fn metrics_describe_every_family_start_counters_at_zero_and_count_payments_and_token_failures() {
    let app = crate::helpers::TestApp::spawn_fast().await;
    let scrape = || async {
        let mut res = app.client.get(app.url("/metrics")).send().await.unwrap();
        String::from_utf8(res.body().await.unwrap().to_vec()).unwrap()
    };
    let text = scrape().await;
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let family = line.split_whitespace().nth(2).unwrap();
        assert!(text.contains(&format!("# HELP {family} ")), "no HELP for {family}");
    }
    let confirmed = [r#"operation="CASH_OUT""#, r#"status="CONFIRMED""#];
    assert_eq!(sample(&text, "pixgw_payments_total", &confirmed), Some(0.0), "present at zero");
    let invalid = [r#"code="PUB_INVALID_CREDENTIALS""#];
    assert_eq!(sample(&text, "pixgw_token_failures_total", &invalid), Some(0.0));
    assert_eq!(sample(&text, "pixgw_webhooks_failed_total", &[]), Some(0.0));
    assert!(sample(&text, "process_resident_memory_bytes", &[]).is_some_and(|v| v > 1e6), "{text}");
    assert!(sample(&text, "process_open_fds", &[]).is_some_and(|v| v > 3.0));
    assert_eq!(sample(&text, "pixgw_build_info", &["version="]), Some(1.0));
    assert!(sample(&text, "pixgw_commit_queue_depth", &[]).is_some());

    let (s, _) = app.token_with(&app.creds.cert_pem, &app.creds.client_id, "wrong").await;
    assert_eq!(s, 401);
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (s, b) =
        app.post_raw("/api/pix/cash-out", &token, &crate::helpers::cash_out_body("m1", "10.50"), &[]).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(app.wait_final(&token, b["transactionId"].as_str().unwrap()).await["status"], "CONFIRMED");
    let text = scrape().await;
    assert_eq!(sample(&text, "pixgw_token_failures_total", &invalid), Some(1.0));
    assert_eq!(sample(&text, "pixgw_payments_total", &confirmed), Some(1.0), "{text}");
    assert_eq!(sample(&text, "pixgw_payment_amount_cents_total", &confirmed), Some(1050.0));
    let pix_in = [r#"operation="PIX_IN""#, r#"status="CONFIRMED""#];
    assert_eq!(sample(&text, "pixgw_payments_total", &pix_in), Some(1.0), "the funding");
    // The commit histograms have buckets, not a summary's quantiles.
    assert!(text.contains("pixgw_commit_apply_seconds_bucket"), "{text}");
    assert!(sample(&text, "pixgw_journal_last_seq", &[]).is_some_and(|v| v >= 1.0), "{text}");
    // Live actors: the Demo's, and another account's once it is used.
    let (_, client_id, secret, pem) = app.new_account("Other").await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    app.balance(t["access_token"].as_str().unwrap()).await;
    assert_eq!(sample(&scrape().await, "pixgw_account_actors", &[]), Some(2.0));
}

/// Every metric README's list names is on `/metrics` from the first scrape after a request,
/// before any payment, checkpoint or backpressure wait: an alert or a dashboard over a metric
/// that appears only once its event has happened reads "no data" where it should read zero.
/// (`pixgw_commit_backpressure_seconds` was absent until backpressure first happened.)
#[actix_rt::test]
async fn every_metric_readme_lists_is_there_from_the_start() {
    let readme = crate::helpers::readme();
    let listed: Vec<String> = readme
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|name| name.split('{').next().unwrap().to_owned())
        .filter(|name| {
            ["pixgw_", "http_request", "process_"].iter().any(|p| name.starts_with(p))
                && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .collect();
    assert!(listed.len() >= 25, "README lists {listed:?}");
    let app = crate::helpers::TestApp::spawn_fast().await;
    let (s, _) = app.get_with("/healthz", "").await;
    assert_eq!(s, 200);
    let mut res = app.client.get(app.url("/metrics")).send().await.unwrap();
    let text = String::from_utf8(res.body().await.unwrap().to_vec()).unwrap();
    let missing: Vec<&String> = listed
        .iter()
        .filter(|name| {
            !is_rail_metric(name) && !is_postgres_metric(name) && !text.contains(&format!("# TYPE {name} "))
        })
        .collect();
    assert!(missing.is_empty(), "absent from the first scrape: {missing:?}\n{text}");
    // So is every metric the alerting rules and the dashboard of deploy/ read (a rule over
    // a metric pixgw does not export never fires).
    for file in ["deploy/prometheus/pixgw-alerts.yml", "deploy/grafana/pixgw.json"] {
        let rules =
            std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
        let used = metric_names(&rules);
        assert!(used.len() >= 10, "{file}: {used:?}");
        // `up` is Prometheus' own; the rails' metrics exist on an SPI node only, and
        // spi.rs checks them there.
        for name in used.iter().filter(|n| *n != "up") {
            let family = family_of(name);
            assert!(listed.iter().any(|l| l == family), "{file} reads {name}, which README does not list");
            assert!(
                is_rail_metric(name)
                    || is_postgres_metric(name)
                    || text.contains(&format!("# TYPE {family} ")),
                "{file} reads {name}, which /metrics does not export"
            );
        }
    }
}

/// The family a series belongs to: a histogram's `_bucket`, `_sum` and `_count` are its own.
pub(crate) fn family_of(name: &str) -> &str {
    ["_bucket", "_sum", "_count"].iter().fold(name, |n, s| n.strip_suffix(s).unwrap_or(n))
}

/// Whether a metric is the SPI rail's (ICOM, SPI, DICT), exported by a node on that rail only.
pub(crate) fn is_rail_metric(name: &str) -> bool {
    ["pixgw_spi_", "pixgw_icom_", "pixgw_dict_"].iter().any(|p| name.starts_with(p))
}

/// Whether a metric is the PostgreSQL store's, exported by a node on it only (postgres.rs
/// checks them there).
pub(crate) fn is_postgres_metric(name: &str) -> bool {
    name.starts_with("pixgw_db_") || ["pixgw_database_up", "pixgw_lease_epoch"].contains(&name)
}

/// The metric names a PromQL text mentions (pixgw's own, HTTP's, the process's and `up`).
pub(crate) fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            w.starts_with("pixgw_")
                || w.starts_with("http_request")
                || w.starts_with("process_")
                || *w == "up"
        })
        .map(str::to_owned)
        .collect()
}
