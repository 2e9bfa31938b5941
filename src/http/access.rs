//! The outermost middleware: every request gets an id, a tracing span, one access line,
//! and its count and latency in the request metrics.
//!
//! The id is made here, answered in `x-request-id`, and is the `errorId` of an error body
//! (the envelope reads it from the request's extensions). Every line logged while the
//! request is handled carries the span's `request_id`, and its `account` once the caller is
//! authenticated ([`record_account`]). When the response is ready, one line with target
//! `pixgw::access` says what was asked and answered: request id, method, route template
//! (never the path, which can hold a txid or a key), status, latency in microseconds,
//! account and response bytes. Nothing from headers or bodies is logged, so no token,
//! secret, certificate or document can reach the log from here.
//!
//! Which requests get that line is the operator's choice (`--access-log`): by default only
//! those answered 4xx or 5xx or slower than [`ACCESS_LOG_SLOW_MS`], since a line per
//! request is most of the log at load (README "Operating it" gives the volumes); the
//! metrics count every request whatever is logged.

use std::time::Instant;

use actix_web::body::{BodySize, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest};
use tracing::Instrument;

use crate::config::AccessLog;
use crate::domain::ids::AccountId;

pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// A request slower than this gets its access line under `--access-log errors`.
pub const ACCESS_LOG_SLOW_MS: u128 = 1000;

/// Whether a request answered `status` after `elapsed_ms` gets an access line.
pub fn logged(mode: AccessLog, status: u16, elapsed_ms: u128) -> bool {
    match mode {
        AccessLog::All => true,
        AccessLog::Errors => status >= 400 || elapsed_ms > ACCESS_LOG_SLOW_MS,
        AccessLog::Off => false,
    }
}

/// The request id, kept in the request's extensions for handlers, the envelope and logs.
#[derive(Debug, Clone)]
pub struct RequestId(pub std::sync::Arc<str>);

/// The authenticated account of a request, for its access line.
#[derive(Debug, Clone, Copy)]
struct CallerAccount(AccountId);

/// Says which account a request acts for: on its span, so the lines logged inside carry it,
/// and on the request, for its access line.
pub fn record_account(req: &HttpRequest, account: AccountId) {
    tracing::Span::current().record("account", account.get());
    req.extensions_mut().insert(CallerAccount(account));
}

/// The request id of a request this middleware saw (empty if it did not).
pub fn request_id(req: &HttpRequest) -> String {
    req.extensions().get::<RequestId>().map(|r| r.0.to_string()).unwrap_or_default()
}

/// The request id, shared (it travels with messages to account actors).
pub fn shared_request_id(req: &HttpRequest) -> Option<std::sync::Arc<str>> {
    req.extensions().get::<RequestId>().map(|r| r.0.clone())
}

pub async fn access(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let request_id = uuid::Uuid::new_v4().to_string();
    req.extensions_mut().insert(RequestId(request_id.as_str().into()));
    let method = req.method().clone();
    // At error level so that the span is on whenever any line is: an error logged under
    // `RUST_LOG=warn` still says which request it belongs to.
    let span = tracing::error_span!("request", request_id = %request_id, account = tracing::field::Empty);
    // The inner services run their synchronous part inside `call`, so the call itself is
    // made inside the span, not only its future.
    let mut res = async move { next.call(req).await }.instrument(span).await?;
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        res.headers_mut().insert(HeaderName::from_static(REQUEST_ID_HEADER), v);
    }
    let elapsed = started.elapsed();
    // The pattern, not the path: ids in URLs would multiply the series and leak into logs.
    let route = super::authorize::routed_pattern(res.request())
        .map_or_else(|| "unmatched".to_owned(), |p| p.into_owned());
    let status = res.status().as_u16();
    metrics::counter!("http_requests_total", "route" => route.clone(), "method" => method.to_string(), "status" => status.to_string())
        .increment(1);
    metrics::histogram!("http_request_duration_seconds", "route" => route.clone())
        .record(elapsed.as_secs_f64());
    let mode = res
        .request()
        .app_data::<actix_web::web::Data<super::AppState>>()
        .map_or(AccessLog::default(), |s| s.access_log);
    if !logged(mode, status, elapsed.as_millis()) {
        return Ok(res);
    }
    let account = res.request().extensions().get::<CallerAccount>().map(|c| c.0.get());
    let bytes = match res.response().body().size() {
        BodySize::Sized(n) => Some(n),
        BodySize::None => Some(0),
        BodySize::Stream => None,
    };
    tracing::info!(
        target: "pixgw::access",
        request_id = %request_id,
        method = %method,
        route = route.as_str(),
        status,
        latency_us = elapsed.as_micros() as u64,
        account,
        bytes,
        "request"
    );
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_logs_errors_and_slow_requests_only() {
        assert_eq!(AccessLog::default(), AccessLog::Errors);
        let slow = ACCESS_LOG_SLOW_MS;
        for (status, ms, all, errors) in [
            (201, 0, true, false),
            (201, slow, true, false),
            (201, slow + 1, true, true),
            (399, 5, true, false),
            (400, 5, true, true),
            (422, 0, true, true),
            (503, 0, true, true),
        ] {
            assert_eq!(logged(AccessLog::All, status, ms), all, "{status} {ms}");
            assert_eq!(logged(AccessLog::Errors, status, ms), errors, "{status} {ms}");
            assert!(!logged(AccessLog::Off, status, ms));
        }
    }
}
