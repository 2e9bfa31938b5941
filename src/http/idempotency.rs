//! The `Idempotency-Key` header (the IETF httpapi draft; what Stripe and Mercado Pago do) on
//! every write of a client: each POST, PUT, PATCH and DELETE of families A and B (the
//! sandbox's included), whatever else the route does to be idempotent. The token route and
//! the operators' routes refuse it with 400, so a client never believes a key protected a
//! request it did not; a read (GET) ignores it, since repeating a read is always safe.
//!
//! A request with the header is recorded per account under its key, with a digest of its
//! method, path and parsed body ([`fingerprint`]: the same JSON with other spacing or member
//! order is the same request), durably **before** it runs. Then:
//! - the same key and the same request again answers the first response (status and body,
//!   with `Idempotent-Replayed: true`) and moves nothing;
//! - the same key with another request is 422;
//! - the same key while the first is still running is 409 (`Retry-After: 1`);
//! - a first request that was interrupted (a crash or a failover after it was recorded,
//!   before its response was) is resolved where its outcome can be known: a payment
//!   (`POST /api/pix/cash-out`, `/api/pix/cash-out-qrcode`) is looked up by its externalId.
//!   Found, the key answers it (201, `Idempotent-Replayed: true`) and keeps that answer; not
//!   found, it never happened (the process that ran it is gone, or fenced off the store), so
//!   the request runs now, once: the account's actor refuses a second debit under one
//!   externalId whatever happens. Any other interrupted request answers 409 without
//!   `Retry-After`, since that never changes: its outcome is unknown here, and the client
//!   finds it by its own reference (docs/deploy.md "After a crash or a failover: requests
//!   whose outcome the client did not hear"). Nothing runs twice.
//!
//! Only a success (2xx) is kept. A refusal (4xx) changed nothing by rule, and neither did a
//! 503 refused before the request ran (a standby, a full disk) nor a 500 that says nothing
//! was recorded (the provider was down), so their record is deleted and the key may be used
//! again; any other 500 keeps the record (the outcome is unknown). A 503 after a storage
//! failure may hide a write that landed, but then storage refuses every write, the deletion
//! included: the record stays as it was written before the request ran, and a repeat is 409
//! "interrupted" until the client finds the payment by its externalId. Keys are kept for
//! [`IDEMPOTENCY_KEY_TTL_HOURS`] on the server clock. The interface's own rules are
//! untouched and apply inside this layer: a repeated externalId is still 400, and
//! `/dict/pix` still requires its `x-idempotency-key`. The operators' routes are left out:
//! creating an account and rotating a secret answer secrets, which are never stored, and
//! every other operator write is idempotent by its own reference.

use std::collections::HashSet;
use std::sync::Mutex;

use actix_web::body::{to_bytes, BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage, HttpResponse};
use sha2::{Digest, Sha256};

use super::error::{ApiError, Rejection, Violation};
use super::AppState;
use crate::domain::ids::AccountId;
use crate::store::{RequestRecord, StoredResponse};

pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// Characters of a key: 1 to this many visible ASCII characters.
pub const IDEMPOTENCY_KEY_LEN_MAX: usize = 255;
/// How long a key answers for its first request (server clock).
pub const IDEMPOTENCY_KEY_TTL_HOURS: i64 = 24;

/// The requests with a key that are running now, by account and key.
#[derive(Default)]
pub struct InFlight(Mutex<HashSet<(AccountId, String)>>);

impl InFlight {
    fn enter(&self, id: AccountId, key: &str) -> bool {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert((id, key.to_owned()))
    }

    fn leave(&self, id: AccountId, key: &str) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&(id, key.to_owned()));
    }
}

/// What an `Idempotency-Key` does on a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// A client's write: the key is honoured.
    Honoured,
    /// The token route and the operators' routes: a key is refused with 400.
    Refused,
    /// A read: repeating it is safe, so the key is not looked at.
    Ignored,
}

/// What a key does on `method path`; `path` is a request's path or a route's template
/// (the documentation asks with templates), which share their prefixes.
pub fn key_use(method: &Method, path: &str) -> KeyUse {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        KeyUse::Ignored
    } else if path == TOKEN_PATH || path == "/admin" || path.starts_with("/admin/") {
        KeyUse::Refused
    } else {
        KeyUse::Honoured
    }
}

const TOKEN_PATH: &str = "/api/auth/token";

/// The refusal of a key on a route that takes none.
fn refused_here() -> ApiError {
    ApiError::Validation(vec![Violation::new(
        "Idempotency-Key",
        "is not taken on this route: only a client's writes honour it (the token route and the \
         operators' routes refuse it, reads ignore it)",
    )])
}

/// Whether a key is well formed: 1 to 255 visible ASCII characters.
pub fn key_ok(key: &str) -> bool {
    (1..=IDEMPOTENCY_KEY_LEN_MAX).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic())
}

/// The digest a repeat must match: the method, the path as the router reads it with its
/// query, and the body as parsed. A JSON body is digested in a canonical form (members in
/// order of their names, no whitespace, numbers without trailing zeros), so the same request
/// written with other spacing or member order is the same request, as Stripe compares a
/// request's parameters rather than its bytes; a body that is not JSON counts byte for byte.
pub fn fingerprint(method: &str, path_and_query: &str, body: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) => {
            let mut text = String::with_capacity(body.len());
            canonical_json(&v, &mut text);
            digest(method, path_and_query, text.as_bytes())
        }
        Err(_) => digest(method, path_and_query, body),
    }
}

/// The digest releases before 0.3.0 stored: the raw path and the body's bytes. A record
/// made by one of them is still matched by it, for the hours it lives after an upgrade.
fn legacy_fingerprint(method: &str, raw_path_and_query: &str, body: &[u8]) -> String {
    digest(method, raw_path_and_query, body)
}

fn digest(method: &str, path_and_query: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    // Lengths first, so no bytes can move from one part to the next with the same digest.
    for part in [method.as_bytes(), path_and_query.as_bytes()] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.update(body);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `v` in one canonical text: object members sorted by name, no whitespace, strings
/// escaped as serde_json escapes them, and a number as its decimal value without trailing
/// zeros (`10.50` is `10.5`) when it is one, else as written.
fn canonical_json(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut members: Vec<_> = m.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (name, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(name.clone()).to_string());
                out.push(':');
                canonical_json(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(item, out);
            }
            out.push(']');
        }
        Value::Number(n) => {
            let text = n.to_string();
            match text.parse::<rust_decimal::Decimal>() {
                Ok(d) => out.push_str(&d.normalize().to_string()),
                Err(_) => out.push_str(&text),
            }
        }
        other => out.push_str(&other.to_string()),
    }
}

fn refuse(req: ServiceRequest, e: ApiError) -> ServiceResponse<BoxBody> {
    refuse_with(req, e, false)
}

/// `retry_soon`: the refusal lasts only while the first request runs, so `Retry-After: 1`
/// says when to try again. A refusal that can never change carries none, or a client that
/// obeys it would loop.
fn refuse_with(req: ServiceRequest, e: ApiError, retry_soon: bool) -> ServiceResponse<BoxBody> {
    let mut res = HttpResponse::from_error(e);
    if retry_soon {
        res.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    // Kept as an HttpResponse, the error stays attached for `error::envelope` to render.
    let (request, _) = req.into_parts();
    ServiceResponse::new(request, res)
}

/// What a request's key asks of the layer before its route runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// No key, or a key a read ignores: the request goes on as it is.
    Pass,
    /// A key on a client's write: [`idempotency`] carries the request out.
    Honour,
    /// A key on a route that takes none: [`refusal`] answers it.
    Refuse,
}

/// Sorts a request by its key and route.
pub fn gate(req: &ServiceRequest) -> Gate {
    if !req.headers().contains_key(IDEMPOTENCY_KEY_HEADER) {
        return Gate::Pass;
    }
    // A path no route matches is the router's 404, whatever its headers.
    let Some(pattern) = super::authorize::routed_pattern(req.request()) else { return Gate::Pass };
    match key_use(req.method(), &pattern) {
        KeyUse::Ignored => Gate::Pass,
        KeyUse::Honoured => Gate::Honour,
        KeyUse::Refused => Gate::Refuse,
    }
}

/// The 400 of a key sent to a route that takes none; nothing of the request has run.
pub fn refusal(req: ServiceRequest) -> ServiceResponse<BoxBody> {
    refuse(req, refused_here())
}

/// Carries out a request that [`gate`] sorted as [`Gate::Honour`]; `body` is its whole body
/// (empty when none was announced), read before routing (`body::read_within_deadline`,
/// which calls this).
pub async fn idempotency(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
    body: web::Bytes,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let raw = req.headers().get(IDEMPOTENCY_KEY_HEADER).cloned();
    let key = match raw.as_ref().map(|r| r.to_str().map(str::to_owned)) {
        Some(Ok(k)) if key_ok(&k) => k,
        _ => {
            let v = Violation::new("Idempotency-Key", "must be 1 to 255 visible ASCII characters");
            return Ok(refuse(req, ApiError::Validation(vec![v])));
        }
    };
    // The key belongs to the caller's account, whom `authorize` admitted before the body
    // was read; a route without a caller is open, and takes its request as it is.
    let caller = req.extensions().get::<super::auth::Caller>().cloned();
    let (Some(state), Some(caller)) = (req.app_data::<web::Data<AppState>>().cloned(), caller) else {
        req.set_payload(Payload::from(body));
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let account = caller.account_id;
    let routed = super::authorize::routed_path(req.request());
    let path = match req.query_string() {
        "" => routed.to_owned(),
        query => format!("{routed}?{query}"),
    };
    let print = fingerprint(req.method().as_str(), &path, &body);
    // Read again only if the key turns out interrupted (a cheap handle on the same bytes).
    let sent = (req.method().clone(), super::authorize::routed_path(req.request()).to_owned(), body.clone());
    req.set_payload(Payload::from(body));
    let now = state.clock.now();
    if !state.idempotency.enter(account, &key) {
        return Ok(refuse_with(
            req,
            ApiError::Conflict("a request with this Idempotency-Key is in progress".into()),
            true,
        ));
    }
    // Left however the request ends, also when the client goes away and this future is
    // dropped half way: a key must not stay "in progress" for ever.
    let _running = Running { state: state.clone(), account, key: key.clone() };
    run(req, next, &state, account, &key, print, sent, now).await
}

/// What an interrupted payment is looked up by: its externalId and value, as its body
/// says them. `None` for any other route, or a body without them (it would have been
/// refused, so it was not interrupted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentRef {
    external_id: String,
    value: crate::domain::money::Money,
    kind: crate::domain::transaction::TxKind,
}

/// The routes whose interrupted requests are resolved by their externalId.
pub fn interrupted_payment(method: &Method, path: &str, body: &[u8]) -> Option<PaymentRef> {
    use crate::domain::transaction::TxKind;
    let kind = match (method, path) {
        (&Method::POST, "/api/pix/cash-out") => TxKind::CashOut,
        (&Method::POST, "/api/pix/cash-out-qrcode") => TxKind::QrCashOut,
        _ => return None,
    };
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let external_id = v.get("externalId")?.as_str()?.to_owned();
    let value = match v.get("value")? {
        serde_json::Value::Number(n) => crate::domain::money::Money::parse(&n.to_string()).ok()?,
        _ => return None,
    };
    Some(PaymentRef { external_id, value, kind })
}

/// What became of an interrupted request, as far as storage tells.
#[derive(Debug)]
enum Interrupted {
    /// Its payment is stored: the answer it would have had.
    Happened(Box<crate::domain::transaction::Transaction>),
    /// No payment under its externalId: it never happened.
    NeverHappened,
    /// Not a payment, or a payment under its externalId that is not this one.
    Unknown,
}

fn resolve(
    state: &AppState,
    account: AccountId,
    payment: Option<&PaymentRef>,
) -> Result<Interrupted, ApiError> {
    let Some(p) = payment else { return Ok(Interrupted::Unknown) };
    Ok(match state.repo.transaction_by_external_id(account, &p.external_id)? {
        None => Interrupted::NeverHappened,
        Some(tx) if tx.kind == p.kind && tx.value == p.value => Interrupted::Happened(Box::new(tx)),
        // Another request took the externalId (without this key): not this one's outcome.
        Some(_) => Interrupted::Unknown,
    })
}

/// A stored answer as the layer replays it.
fn replay(req: ServiceRequest, stored: StoredResponse) -> ServiceResponse<BoxBody> {
    let mut res = HttpResponse::build(StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK));
    if let Some(ct) = stored.content_type {
        res.insert_header((header::CONTENT_TYPE, ct));
    }
    res.insert_header(("idempotent-replayed", "true"));
    req.into_response(res.body(stored.body))
}

/// A request with a key that is running; dropping it ends that.
struct Running {
    state: web::Data<AppState>,
    account: AccountId,
    key: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.state.idempotency.leave(self.account, &self.key);
    }
}

#[allow(clippy::too_many_arguments)]
async fn run(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
    state: &AppState,
    account: AccountId,
    key: &str,
    print: String,
    sent: (Method, String, web::Bytes),
    now: chrono::DateTime<chrono::Utc>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let fresh = |r: &RequestRecord| now < r.at + chrono::Duration::hours(IDEMPOTENCY_KEY_TTL_HOURS);
    match state.repo.request_record(account, key) {
        Err(e) => return Ok(refuse(req, ApiError::Storage(e))),
        Ok(Some(r)) if fresh(&r) => {
            let raw = req.uri().path_and_query().map_or(req.path(), |p| p.as_str());
            if r.fingerprint != print
                && r.fingerprint != legacy_fingerprint(req.method().as_str(), raw, &sent.2)
            {
                return Ok(refuse(req, Rejection::RequestKeyReused.into()));
            }
            if let Some(stored) = r.response {
                return Ok(replay(req, stored));
            }
            // Interrupted: no request under this key runs now (this one holds it).
            let (method, route, body) = &sent;
            match resolve(state, account, interrupted_payment(method, route, body).as_ref()) {
                Err(e) => return Ok(refuse(req, e)),
                Ok(Interrupted::Happened(tx)) => {
                    let body = serde_json::to_string(&super::payments::PaymentCreated::of(&tx))
                        .map_err(|_| actix_web::error::ErrorInternalServerError("response body"))?;
                    let stored = StoredResponse {
                        status: StatusCode::CREATED.as_u16(),
                        content_type: Some("application/json".into()),
                        body,
                    };
                    let done = RequestRecord { fingerprint: print, at: r.at, response: Some(stored.clone()) };
                    if let Err(e) = state.repo.put_request_record(account, key, &done).await {
                        tracing::warn!(error = %e, "the resolved answer of an interrupted request was not recorded");
                    }
                    return Ok(replay(req, stored));
                }
                // It never happened: it runs now, as a first request would.
                Ok(Interrupted::NeverHappened) => {}
                Ok(Interrupted::Unknown) => {
                    return Ok(refuse(
                        req,
                        ApiError::Conflict(
                            "the first request with this Idempotency-Key was interrupted and its outcome \
                             is unknown here; look it up by its own reference (docs/deploy.md)"
                                .into(),
                        ),
                    ))
                }
            }
        }
        Ok(_) => {}
    }
    let started = RequestRecord { fingerprint: print.clone(), at: now, response: None };
    if let Err(e) = state.repo.put_request_record(account, key, &started).await {
        return Ok(refuse(req, ApiError::Storage(e)));
    }
    let res = next.call(req).await?.map_into_boxed_body();
    let status = res.status();
    let did_nothing =
        res.response().error().and_then(|e| e.as_error::<ApiError>()).is_some_and(ApiError::did_nothing);
    if status.is_success() {
        let (request, response) = res.into_parts();
        let content_type =
            response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (head, body) = response.into_parts();
        let bytes =
            to_bytes(body).await.map_err(|_| actix_web::error::ErrorInternalServerError("response body"))?;
        let stored = StoredResponse {
            status: status.as_u16(),
            content_type,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        };
        let done = RequestRecord { fingerprint: print, at: now, response: Some(stored) };
        // The request happened; if its record cannot be written, a repeat answers 409
        // (outcome unknown) rather than running it again.
        if let Err(e) = state.repo.put_request_record(account, key, &done).await {
            tracing::error!(error = %e, "the response of an idempotent request was not recorded");
        }
        return Ok(ServiceResponse::new(request, head.set_body(BoxBody::new(bytes))));
    }
    // A refusal changed nothing and a 503 did not run (after a storage failure this
    // deletion is refused with every other write, see the module doc): the key is free
    // again. Anything else (a 500) keeps its record, since the outcome is unknown.
    if status.is_client_error() || status == StatusCode::SERVICE_UNAVAILABLE || did_nothing {
        if let Err(e) = state.repo.delete_request_record(account, key).await {
            tracing::error!(error = %e, "the record of a refused idempotent request was not deleted");
        }
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_1_to_255_visible_ascii_characters() {
        assert!(key_ok("a"));
        assert!(key_ok(&"k".repeat(IDEMPOTENCY_KEY_LEN_MAX)));
        assert!(key_ok("3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c"));
        assert!(!key_ok(""));
        assert!(!key_ok(&"k".repeat(IDEMPOTENCY_KEY_LEN_MAX + 1)));
        assert!(!key_ok("with space"));
        assert!(!key_ok("çé"));
    }

    #[test]
    fn the_fingerprint_covers_method_path_and_the_parsed_body() {
        let base = fingerprint("POST", "/api/pix/cash-out", b"{}");
        assert_eq!(base, fingerprint("POST", "/api/pix/cash-out", b"{}"));
        assert_eq!(base, fingerprint("POST", "/api/pix/cash-out", b" { }\n"), "spacing is not the request");
        assert_ne!(base, fingerprint("POST", "/api/pix/cash-in", b"{}"));
        assert_ne!(base, fingerprint("PUT", "/api/pix/cash-out", b"{}"));
        assert_ne!(base, fingerprint("POST", "/api/pix/cash-out", b"[]"));
        let body =
            br#"{"value": 10.50, "externalId": "a", "details": {"key": "k", "name": "N"}, "tags": [1, 2]}"#;
        let same = br#"{"details":{"name":"N","key":"k"},"externalId":"a","tags":[1,2],"value":10.5}"#;
        let print = fingerprint("POST", "/p", body);
        assert_eq!(print, fingerprint("POST", "/p", same), "member order, spacing and trailing zeros");
        for other in [
            br#"{"details":{"name":"N","key":"k"},"externalId":"a","tags":[2,1],"value":10.5}"#.as_slice(),
            br#"{"details":{"name":"N","key":"k"},"externalId":"a","tags":[1,2],"value":10.51}"#,
            br#"{"details":{"name":"N","key":"k"},"externalId":"a","tags":[1,2],"value":"10.5"}"#,
            br#"{"details":{"name":"N ","key":"k"},"externalId":"a","tags":[1,2],"value":10.5}"#,
            br#"{"details":{"name":"N","key":"k"},"externalid":"a","tags":[1,2],"value":10.5}"#,
        ] {
            assert_ne!(print, fingerprint("POST", "/p", other), "{}", String::from_utf8_lossy(other));
        }
        // A body that is not JSON counts byte for byte.
        assert_eq!(fingerprint("POST", "/p", b"not json"), fingerprint("POST", "/p", b"not json"));
        assert_ne!(fingerprint("POST", "/p", b"not json"), fingerprint("POST", "/p", b"not  json"));
        // No way to move bytes between the parts and keep the digest.
        assert_ne!(fingerprint("POST", "/a\nb", b"c"), fingerprint("POST", "/a", b"b\nc"));
    }

    #[test]
    fn every_client_write_honours_a_key_the_token_and_operator_routes_refuse_it_and_reads_ignore_it() {
        use KeyUse::*;
        for (method, path) in [
            (Method::POST, "/api/pix/cash-out"),
            (Method::POST, "/sandbox/pix-in"),
            (Method::POST, "/dict/pix"),
            (Method::POST, "/cob"),
            (Method::POST, "/locrec"),
            (Method::POST, "/rec"),
            (Method::PUT, "/cob/abc"),
            (Method::PATCH, "/cobv/abc"),
            (Method::DELETE, "/webhookrec"),
            (Method::DELETE, "/api/webhooks/cash_in"),
        ] {
            assert_eq!(key_use(&method, path), Honoured, "{method} {path}");
        }
        for (method, path) in [
            (Method::POST, "/api/auth/token"),
            (Method::POST, "/admin/accounts"),
            (Method::PATCH, "/admin/accounts/1"),
            (Method::DELETE, "/admin/accounts/1/keys/k"),
        ] {
            assert_eq!(key_use(&method, path), Refused, "{method} {path}");
        }
        // A path that only begins like an operator's is a client's.
        assert_eq!(key_use(&Method::POST, "/administer"), Honoured);
        assert_eq!(key_use(&Method::GET, "/api/transactions"), Ignored);
        assert_eq!(key_use(&Method::HEAD, "/cob/abc"), Ignored);
    }
}
