//! The error body middleware: every error response gets a JSON body in the shape of its
//! route's family.
//!
//! - *extended*: `{statusCode, timestamp, path, method, code, message, userMessage,
//!   errorId, error, details?, errorCode?}`;
//! - *simple*: `{statusCode, message, error}`.
//!
//! The family is declared with each route in the route table (`http::routes`), which
//! hands the envelope a [`RouteFamilies`] map from route pattern to family. The envelope
//! finds the request's pattern in the app's resource map, which also works for a request
//! refused before routing (a body too large, a reused Idempotency-Key), so the family never
//! depends on a path prefix. A path that matches no route is answered in the extended
//! shape.
//!
//! Errors that actix itself produces (no route, wrong method, body too large) carry no
//! `ApiError`; the middleware gives them a body from their status, so no request ever
//! answers HTML or an empty error. `errorId` is the request's id (`access.rs`), which every
//! response carries in `x-request-id`.

use std::collections::HashMap;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::{ApiError, Chain, ErrorParts, GENERIC_USER_MESSAGE};
use crate::http::AppState;

/// The two body shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Family A, the admin, sandbox and operations routes.
    Extended,
    /// Family B (the API Pix style routes) and `/balance`.
    Simple,
}

/// The family of every route pattern, as the route table declared it, and of every scope
/// (a path's first segment) whose routes all share one family.
#[derive(Debug, Clone, Default)]
pub struct RouteFamilies {
    routes: HashMap<&'static str, Family>,
    /// `None` when the scope's routes are of both families.
    scopes: HashMap<&'static str, Option<Family>>,
}

impl RouteFamilies {
    /// Records `pattern`'s family. A pattern has one family whatever the method, because
    /// a client reads one error shape per resource.
    pub fn declare(&mut self, pattern: &'static str, family: Family) {
        let before = self.routes.insert(pattern, family);
        assert!(before.is_none_or(|f| f == family), "{pattern} is declared in two families");
        let scope = self.scopes.entry(scope_of(pattern)).or_insert(Some(family));
        if *scope != Some(family) {
            *scope = None;
        }
    }

    /// The family of the route `req` matches (before or after routing); for a path that
    /// matches no route, the family of its scope; extended when neither says.
    pub fn of(req: &HttpRequest) -> Family {
        let Some(families) = req.app_data::<RouteFamilies>() else { return Family::Extended };
        match crate::http::authorize::routed_pattern(req) {
            Some(p) => families.get(&p),
            None => {
                families.scopes.get(scope_of(crate::http::authorize::routed_path(req))).copied().flatten()
            }
        }
        .unwrap_or(Family::Extended)
    }

    pub fn get(&self, pattern: &str) -> Option<Family> {
        self.routes.get(pattern).copied()
    }

    /// Every route pattern with its family.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, Family)> + '_ {
        self.routes.iter().map(|(p, f)| (*p, *f))
    }
}

/// A path's first segment: `/cob/{txid}` and `/cob/x/y` are in scope `cob`.
fn scope_of(path: &str) -> &str {
    path.trim_start_matches('/').split('/').next().unwrap_or("")
}

/// The parts of an error that actix produced on its own, from its status.
fn parts_from_status(status: StatusCode) -> ErrorParts {
    let (code, message) = match status {
        StatusCode::NOT_FOUND => ("NOT_FOUND", "no route matches this path"),
        StatusCode::METHOD_NOT_ALLOWED => ("METHOD_NOT_ALLOWED", "this method is not allowed here"),
        StatusCode::PAYLOAD_TOO_LARGE => ("PAYLOAD_TOO_LARGE", "the request body is too large"),
        StatusCode::REQUEST_TIMEOUT => ("REQUEST_TIMEOUT", "the request body did not arrive in time"),
        StatusCode::BAD_REQUEST => ("HTTP_ERROR", "the request is malformed"),
        s if s.is_server_error() => ("HTTP_ERROR", "internal error"),
        _ => ("HTTP_ERROR", "the request cannot be served"),
    };
    ErrorParts {
        status,
        code,
        message: Value::String(message.into()),
        user_message: GENERIC_USER_MESSAGE,
        details: None,
        error_code: None,
    }
}

/// Body of the extended shape (for the OpenAPI document).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"statusCode": 400, "timestamp": "2026-11-25T12:00:00.000Z", "path": "/api/pix/cash-out",
    "method": "POST", "code": "HTTP_ERROR", "message": ["value must be at least 0.01"],
    "userMessage": "Some fields of the request are invalid.", "errorId": "0b7f3a52-9d1e-4c55-8f0e-3f1c2a9d4b61",
    "error": "Bad Request", "details": {"violations": [{"field": "value", "message": "must be at least 0.01"}]},
    "errorCode": "PIX_INVALID_AMOUNT"}))]
pub struct ExtendedErrorBody {
    pub status_code: u16,
    pub timestamp: String,
    pub path: String,
    pub method: String,
    pub code: String,
    /// A text, or one text per invalid field for validation errors.
    #[schema(schema_with = text_or_texts)]
    pub message: Value,
    pub user_message: String,
    pub error_id: String,
    pub error: String,
    #[schema(value_type = Option<Object>)]
    pub details: Option<Value>,
    pub error_code: Option<String>,
}

/// `message`: a text, or a list of texts (one per invalid field).
fn text_or_texts() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::String))
        .item(ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::String)))
        .build()
        .into()
}

/// Body of the simple shape (for the OpenAPI document).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"statusCode": 404, "message": "no cob of this account has this txid", "error": "Not Found"}))]
pub struct SimpleErrorBody {
    pub status_code: u16,
    pub message: String,
    pub error: String,
}

fn render(parts: &ErrorParts, family: Family, ctx: &Ctx) -> Value {
    let reason = parts.status.canonical_reason().unwrap_or("Error");
    match family {
        Family::Simple => {
            let message = match &parts.message {
                Value::String(s) => s.clone(),
                Value::Array(items) => items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "),
                other => other.to_string(),
            };
            json!({ "statusCode": parts.status.as_u16(), "message": message, "error": reason })
        }
        Family::Extended => {
            let mut body = json!({
                "statusCode": parts.status.as_u16(),
                "timestamp": ctx.timestamp,
                "path": ctx.path,
                "method": ctx.method,
                "code": parts.code,
                "message": parts.message,
                "userMessage": parts.user_message,
                "errorId": ctx.request_id,
                "error": reason,
            });
            if let Some(d) = &parts.details {
                body["details"] = d.clone();
            }
            if let Some(c) = parts.error_code {
                body["errorCode"] = json!(c);
            }
            body
        }
    }
}

struct Ctx {
    path: String,
    method: String,
    request_id: String,
    timestamp: String,
}

/// Gives every error response its JSON body, in the shape of its route's family.
pub async fn envelope(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let request_id = crate::http::access::request_id(req.request());
    let path = req.path().to_owned();
    let method = req.method().to_string();
    let state = req.app_data::<web::Data<AppState>>().cloned();
    // actix turns handler and extractor errors into responses (with the error attached)
    // before they reach a middleware, so an `Err` here can only come from a middleware
    // below this one, and ours never fail. The request must not be cloned before routing
    // (actix needs it unshared), so such an error is passed on as it is.
    let res = next.call(req).await?.map_into_boxed_body();
    let res = if res.status().is_client_error() || res.status().is_server_error() {
        let family = RouteFamilies::of(res.request());
        let parts = match res.response().error() {
            Some(e) => match e.as_error::<ApiError>() {
                Some(api) => {
                    let parts = api.parts(family);
                    if parts.status == StatusCode::SERVICE_UNAVAILABLE {
                        // Its cause (a full disk, a failed storage) is logged once where it
                        // happens; a line per refused request would flood the log.
                        tracing::debug!(%path, error = %Chain(api), "request refused");
                    } else if parts.status.is_server_error() {
                        tracing::error!(%path, error = %Chain(api), "request failed");
                    }
                    parts
                }
                None => parts_from_status(res.status()),
            },
            None => parts_from_status(res.status()),
        };
        let now = state.map(|s| s.clock.now()).unwrap_or_else(chrono::Utc::now);
        let ctx = Ctx {
            path: path.clone(),
            method,
            request_id: request_id.clone(),
            timestamp: crate::http::iso(now),
        };
        let body = render(&parts, family, &ctx);
        let (req, mut old) = res.into_parts();
        let mut fresh =
            HttpResponse::build(parts.status).content_type("application/json").body(body.to_string());
        for (name, value) in old.headers() {
            if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
                fresh.headers_mut().append(name.clone(), value.clone());
            }
        }
        // What the response carries beyond its headers goes with it: a connection to close,
        // and the unread body that keeps the dispatcher from draining it (http::body).
        if old.head().connection_type() == actix_web::http::ConnectionType::Close {
            fresh.head_mut().set_connection_type(actix_web::http::ConnectionType::Close);
        }
        let carried = std::mem::take(&mut *old.extensions_mut());
        fresh.extensions_mut().extend(carried);
        ServiceResponse::new(req, crate::http::body::hold_unread(fresh))
    } else {
        res
    };
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::error::Violation;

    #[test]
    fn a_path_takes_its_routes_family_or_else_its_scopes() {
        let mut f = RouteFamilies::default();
        f.declare("/cob/{txid}", Family::Simple);
        f.declare("/balance", Family::Simple);
        f.declare("/api/balance", Family::Extended);
        f.declare("/mixed/a", Family::Simple);
        f.declare("/mixed/b", Family::Extended);
        assert_eq!(f.get("/cob/{txid}"), Some(Family::Simple));
        assert_eq!(f.scopes.get(scope_of("/cob/x/y/z")).copied().flatten(), Some(Family::Simple));
        assert_eq!(f.scopes.get(scope_of("/balance")).copied().flatten(), Some(Family::Simple));
        assert_eq!(f.scopes.get(scope_of("/api/nothing")).copied().flatten(), Some(Family::Extended));
        assert_eq!(f.scopes.get(scope_of("/mixed/c")).copied().flatten(), None);
        assert_eq!(f.scopes.get(scope_of("/nowhere")).copied().flatten(), None);
    }

    #[test]
    fn the_server_declares_family_b_and_balance_simple_and_the_rest_extended() {
        let f = crate::http::route_families();
        for p in ["/dict/pix", "/pix/{e2eid}/devolucao/{id}", "/cob/{txid}", "/accounts/balances", "/balance"]
        {
            assert_eq!(f.get(p), Some(Family::Simple), "{p}");
        }
        for p in ["/api/auth/token", "/admin/accounts", "/sandbox/pix-in", "/healthz", "/api/balance"] {
            assert_eq!(f.get(p), Some(Family::Extended), "{p}");
        }
    }

    #[test]
    fn the_simple_shape_joins_validation_messages() {
        let parts =
            ApiError::Validation(vec![Violation::new("a", "is bad"), Violation::new("b", "is worse")])
                .parts(Family::Extended);
        let ctx = Ctx {
            path: "/dict/pix".into(),
            method: "POST".into(),
            request_id: "r".into(),
            timestamp: "t".into(),
        };
        let body = render(&parts, Family::Simple, &ctx);
        assert_eq!(
            body,
            json!({"statusCode": 400, "message": "a is bad; b is worse", "error": "Bad Request"})
        );
        let body = render(&parts, Family::Extended, &ctx);
        assert_eq!(body["message"], json!(["a is bad", "b is worse"]));
        assert_eq!(body["errorId"], "r");
        assert_eq!(body["code"], "HTTP_ERROR");
    }
}
