//! Who may call a route is decided on the route the router matches, before anything else of
//! the request is read. Every operation of the server's OpenAPI document is called by its
//! path and by variants of it (percent-encoded, double-encoded, `//`, `/./`, `..`, a
//! trailing slash, upper case), without a token, with a token lacking its scope, with a
//! live account's token on the sandbox and with a client's token on the operators' routes,
//! each time with a body that would change something and the headers that are read after
//! authorization (`X-Sandbox-Scenario`, `Idempotency-Key`). A variant the router takes to the
//! route is refused as the route is (401 or 403, in the route's error body); any other is
//! 404; and afterwards nothing any of them could change has changed.

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::*;

/// One request written byte for byte (no client library may tidy its path); answers the
/// status and the body as JSON (`Null` when it is not).
async fn raw(base: &str, method: &str, target: &str, headers: &[(&str, String)], body: &str) -> (u16, Value) {
    let addr = base.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    head.push_str(body);
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer);
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status: {text}"));
    let json = text.split_once("\r\n\r\n").and_then(|(_, b)| serde_json::from_str(b).ok());
    (status, json.unwrap_or(Value::Null))
}

/// Every character of every segment percent-encoded (slashes kept), in `case`'s hex.
fn encode_all(path: &str, upper: bool) -> String {
    path.split('/')
        .map(|seg| {
            seg.bytes()
                .map(|b| if upper { format!("%{b:02X}") } else { format!("%{b:02x}") })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The first character of the first segment percent-encoded (`/cob/x` is `/%63ob/x`).
fn encode_first(path: &str) -> String {
    let c = path.as_bytes()[1];
    format!("/%{c:02x}{}", &path[2..])
}

/// Variants the router takes to the same route.
fn same_route(path: &str) -> Vec<String> {
    vec![path.to_owned(), encode_first(path), encode_all(path, true), encode_all(path, false)]
}

/// Variants no route matches.
fn no_route(path: &str) -> Vec<String> {
    let first_segment_end = path[1..].find('/').map_or(path.len(), |i| i + 1);
    vec![
        // A double escape: `%2563` is `%63` once decoded, which the router does not decode again.
        format!("/%25{:02x}{}", path.as_bytes()[1], &path[2..]),
        format!("/{path}"),
        format!("/.{path}"),
        format!("/x/..{path}"),
        format!("{path}/"),
        format!("{}{}", path[..first_segment_end].to_uppercase(), &path[first_segment_end..]),
    ]
}

/// A concrete path for a pattern of the document.
fn fill(pattern: &str, txid: &str) -> String {
    let mut out = String::new();
    for seg in pattern.split('/').skip(1) {
        out.push('/');
        let value = match seg {
            "{txid}" => txid,
            "{e2eid}" => "E12345678202611281200abcdefghijk",
            "{fingerprint}" => "0000000000000000000000000000000000000000000000000000000000000000",
            "{eventType}" => "cash_out",
            "{data}" => "2026-12-01",
            "{transactionIdentifier}" => "1",
            s if s.starts_with('{') => "1",
            s => s,
        };
        out.push_str(value);
    }
    out
}

/// A body that would change something if the route ran it.
fn body_for(method: &str, pattern: &str) -> String {
    let cob = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "1.00"}});
    let body = match (method, pattern) {
        ("PUT" | "POST", p) if p.starts_with("/cob") => cob,
        ("PATCH", "/cob/{txid}") => json!({"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"}),
        ("POST", "/admin/accounts") => json!({"name": "Intruder", "document": "52998224725"}),
        ("POST", "/admin/accounts/{id}/adjustments") => {
            json!({"amount": "1000.00", "direction": "CREDIT", "reference": "intruder", "reason": "x"})
        }
        ("PATCH", "/admin/accounts/{id}") => json!({"limits": {"perTransaction": "0.01"}}),
        ("POST", "/sandbox/pix-in") => json!({"amount": 1000}),
        ("POST", "/api/pix/cash-out") => serde_json::from_str(&cash_out_body("intruder-1", "1.00")).unwrap(),
        ("POST", "/api/webhooks") => json!({"url": "https://example.com/hook", "eventType": "cash_out"}),
        ("PUT", "/webhookrec" | "/webhookcobr") => json!({"webhookUrl": "https://example.com/hook"}),
        ("POST", "/locrec") => json!({}),
        _ => json!({}),
    };
    body.to_string()
}

/// What any caller could have changed, read with full rights; times that move on their own
/// are left out.
async fn everything(app: &TestApp, token: &str, accounts: &[u64]) -> Vec<Value> {
    let window = "inicio=2020-01-01T00:00:00Z&fim=2030-01-01T00:00:00Z";
    let mut reads = vec![];
    for path in [
        "/api/balance".to_owned(),
        "/api/account".to_owned(),
        "/api/transactions?startDate=2026-01-01&endDate=2026-01-31".to_owned(),
        "/api/med".to_owned(),
        "/api/webhooks".to_owned(),
        "/webhookrec".to_owned(),
        "/webhookcobr".to_owned(),
        format!("/cob?{window}"),
        format!("/cobv?{window}"),
        format!("/rec?{window}"),
        format!("/cobr?{window}"),
        format!("/locrec?{window}"),
        format!("/pix?{window}"),
    ] {
        reads.push(app.get_with(&path, token).await);
    }
    for id in accounts {
        reads.push(app.admin("GET", &format!("/admin/accounts/{id}"), None).await);
        reads.push(app.admin("GET", &format!("/admin/accounts/{id}/keys"), None).await);
    }
    reads.into_iter().map(|(s, b)| json!({"status": s, "body": without_times(b)})).collect()
}

fn without_times(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !matches!(k.as_str(), "consultedAt" | "eventDate" | "timestamp" | "errorId"))
                .map(|(k, v)| (k, without_times(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_times).collect()),
        other => other,
    }
}

/// Which error body a route answers 401 with, as the document declares it.
fn simple_family(op: &Value) -> bool {
    op["responses"]["401"]["content"]["application/json"]["schema"]["$ref"]
        .as_str()
        .is_some_and(|r| r.ends_with("SimpleErrorBody"))
}

async fn scoped_token(app: &TestApp, scope: &str) -> String {
    let creds = &app.creds;
    let req = app
        .client
        .post(app.url("/api/auth/token"))
        .insert_header(("X-SSL-Client-Cert", pixgw::auth::certs::url_encode_pem(&creds.cert_pem)));
    let body = json!({"clientId": creds.client_id, "clientSecret": creds.client_secret, "scope": scope});
    let (s, t) = send(req, Some(body)).await;
    assert_eq!(s, 201, "{t}");
    t["access_token"].as_str().unwrap().to_owned()
}

#[actix_rt::test]
async fn no_spelling_of_a_path_reaches_a_route_its_caller_may_not_call_and_nothing_changes() {
    let app = TestApp::spawn_fast().await;
    let full = app.demo_token().await;
    app.fund(&full, "100.00").await;
    let txid = "authorizationwalk0000000000001";
    let put = app.client.put(app.url(&format!("/cob/{txid}"))).bearer_auth(&full);
    let cob = json!({"calendario": {"expiracao": 86400}, "valor": {"original": "5.00"}});
    assert_eq!(send(put, Some(cob)).await.0, 201);
    let (live, live_client, live_secret, live_pem) = app.new_account("Live").await;
    let (s, t) = app.token_with(&live_pem, &live_client, &live_secret).await;
    assert_eq!(s, 201, "{t}");
    let live_token = t["access_token"].as_str().unwrap().to_owned();
    // Two narrow tokens: between them, each scope is lacking from one.
    let only_webhook_read = scoped_token(&app, "webhook.read").await;
    let only_cob_read = scoped_token(&app, "cob.read").await;
    let accounts = [app.creds.account_id, live];
    let before = everything(&app, &full, &accounts).await;

    let (s, doc) = app.get_with("/openapi.json", &full).await;
    assert_eq!(s, 200);
    let mut walked = 0;
    for (pattern, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let method = method.to_uppercase();
            let secured = op["security"].as_array().is_some_and(|s| !s.is_empty());
            let admin = pattern.starts_with("/admin/");
            if !secured && !admin {
                continue; // open routes: the token route, payload locations, health, docs
            }
            walked += 1;
            let path = fill(pattern, txid);
            let query =
                if method == "GET" { "?inicio=2020-01-01T00:00:00Z&fim=2030-01-01T00:00:00Z" } else { "" };
            let body = body_for(&method, pattern);
            let scope = pixgw::domain::scope::required(&method, pattern);
            // (the token, if any, and what the route itself answers it)
            let mut callers: Vec<(Option<String>, u16)> = vec![(None, 401)];
            if admin {
                callers.push((Some(full.clone()), 401));
            } else if pattern.starts_with("/sandbox/") {
                callers.push((Some(live_token.clone()), 403));
            }
            if let Some(scope) = scope {
                let lacking = if scope == "webhook.read" { &only_cob_read } else { &only_webhook_read };
                callers.push((Some(lacking.clone()), 403));
            }
            for (token, expected) in &callers {
                let mut headers = vec![
                    ("X-Sandbox-Scenario", "CONFIRM".to_owned()),
                    ("Idempotency-Key", format!("walk-{walked}")),
                ];
                if let Some(t) = token {
                    headers.push(("Authorization", format!("Bearer {t}")));
                }
                for target in same_route(&path) {
                    let (status, answer) =
                        raw(&app.base, &method, &format!("{target}{query}"), &headers, &body).await;
                    assert_eq!(status, *expected, "{method} {target} ({pattern}): {answer}");
                    if simple_family(op) {
                        assert_simple(&answer, status);
                    } else {
                        assert_eq!(answer["statusCode"], *expected, "{method} {target}: {answer}");
                        assert!(answer["errorId"].is_string(), "{method} {target}: {answer}");
                    }
                    if *expected == 403 && !admin && !pattern.starts_with("/sandbox/") {
                        let named = scope.unwrap();
                        assert!(answer["message"].to_string().contains(named), "{method} {target}: {answer}");
                    }
                }
                for target in no_route(&path) {
                    let (status, answer) =
                        raw(&app.base, &method, &format!("{target}{query}"), &headers, &body).await;
                    assert_eq!(status, 404, "{method} {target} ({pattern}): {answer}");
                }
            }
        }
    }
    assert!(walked >= 80, "every operation but the open ones: {walked}");

    assert_eq!(everything(&app, &full, &accounts).await, before, "a refused request changed something");
    // No account was made: the next one takes the number after the live one.
    let (next, ..) = app.new_account("Next").await;
    assert_eq!(next, live + 1);
}

/// A scope is checked before any other rule of the request: a read token that writes with
/// the sandbox's header is told of its scope, not of the header.
#[actix_rt::test]
async fn a_token_without_the_write_scope_hears_of_its_scope_before_the_sandbox_header() {
    let app = TestApp::spawn_fast().await;
    let read = scoped_token(&app, "cob.read").await;
    let headers = [("Authorization", format!("Bearer {read}")), ("X-Sandbox-Scenario", "NOPE".to_owned())];
    let body = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "1.00"}}).to_string();
    let (s, b) = raw(&app.base, "PUT", "/cob/scopefirsttxid000000000000001", &headers, &body).await;
    assert_eq!(s, 403, "{b}");
    assert_simple(&b, 403);
    assert!(b["message"].to_string().contains("cob.write"), "{b}");
}
