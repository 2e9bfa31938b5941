//! The one error mapping of the server, and the middleware that writes every error body.
//!
//! Handlers and extractors return [`ApiError`]; [`ApiError::parts`] maps each variant to
//! its status, code and texts (the only place that does). The [`envelope`] middleware then
//! writes the body in the shape of the route's family (decisions.md §8, §10):
//! - *extended* for `/api/*`, `/admin/*`, `/sandbox/*` and everything else:
//!   `{statusCode, timestamp, path, method, code, message, userMessage, errorId, error,
//!   details?, errorCode?}`;
//! - *simple* for the family B routes and `/balance`: `{statusCode, message, error}`.
//!
//! Errors that actix itself produces (no route, wrong method, body too large) carry no
//! `ApiError`; the middleware gives them a body from their status, so no request ever
//! answers HTML or an empty error. `errorId` is the request's id (`access.rs`), which every
//! response carries in `x-request-id`.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{web, HttpResponse, ResponseError};
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::AppState;
use crate::accounts::AccountsError;
use crate::store::RepoError;

/// What rule a violation breaks, for the `errorCode` of decisions.md §10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ViolationKind {
    Amount,
    Key,
    #[default]
    Other,
}

/// One offending field of a request body.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Violation {
    pub field: String,
    pub message: String,
    #[serde(skip)]
    pub kind: ViolationKind,
}

impl Violation {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Violation {
        Violation { field: field.into(), message: message.into(), kind: ViolationKind::Other }
    }

    pub fn of_kind(mut self, kind: ViolationKind) -> Violation {
        self.kind = kind;
        self
    }

    /// The one-line text of family A validation messages: `"field message"`.
    pub fn text(&self) -> String {
        format!("{} {}", self.field, self.message)
    }
}

/// Failures of `POST /api/auth/token`, in the order the endpoint checks them.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenFailure {
    HeaderMissing,
    MalformedPem(&'static str),
    BodyInvalid(Vec<Violation>),
    CertNotYetValid,
    CertExpired,
    CertNotRegistered,
    InvalidCredentials,
    CertNotAuthorizedForAccount,
    /// Too many failed attempts; `Retry-After` says in how many seconds to try again.
    TooManyFailures {
        retry_after_seconds: u64,
    },
    /// Storage answered something it should not (a record that does not decode).
    UpstreamError,
    /// Storage did not answer.
    UpstreamUnavailable,
}

/// Business rejections of family A payments, each with its stable code.
#[derive(Debug, Clone, PartialEq)]
pub enum Business {
    DuplicateExternalId {
        external_id: String,
        existing: u64,
    },
    /// The QR cash-out answers a duplicate with 409 (interface.md's endpoint list).
    DuplicateExternalIdConflict {
        external_id: String,
        existing: u64,
    },
    TransactionLimitExceeded,
    DailyLimitExceeded,
    NightLimitExceeded,
    InsufficientBalance,
    /// 89 days have passed since the PIX was received.
    RefundDeadlineExceeded,
    /// Refunds would exceed the amount received; `refundable` is what is left.
    RefundExceedsRefundable {
        refundable: String,
    },
    /// A charge's expirationTime is below the provider's minimum (seconds).
    ProviderExpirationBelowMinimum {
        minimum: u32,
    },
}

/// Every error a client can be answered with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("business rejection: {0:?}")]
    Business(Business),
    /// A family B business rejection (422).
    #[error("unprocessable: {0}")]
    Unprocessable(String),
    /// The PIX provider could not be reached; nothing was recorded (500, retry).
    #[error("provider unavailable")]
    ProviderDown,
    /// Storage or an actor did not answer in time (503).
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("validation failed: {0:?}")]
    Validation(Vec<Violation>),
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("unauthorized: {0}")]
    Unauthorized(&'static str),
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("conflict: {0}")]
    Conflict(String),
    /// Too many calls; `Retry-After` says in how many seconds one is allowed again.
    #[error("rate limited for {retry_after_seconds}s")]
    RateLimited { retry_after_seconds: u64 },
    #[error("token issuance failed: {0:?}")]
    Token(TokenFailure),
    #[error("storage: {0}")]
    Storage(#[from] RepoError),
    #[error("internal: {0}")]
    Internal(String),
}

/// What a response body says, before the family's shape is applied.
#[derive(Debug, Clone)]
pub struct ErrorParts {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: Value,
    pub user_message: &'static str,
    pub details: Option<Value>,
    pub error_code: Option<&'static str>,
}

const GENERIC_USER_MESSAGE: &str = "We could not process your request.";

impl ApiError {
    /// The mapping of every variant to status, code and texts. No catch-all arm.
    pub fn parts(&self) -> ErrorParts {
        let simple = |status: StatusCode, code: &'static str, message: String, user| ErrorParts {
            status,
            code,
            message: Value::String(message),
            user_message: user,
            details: None,
            error_code: None,
        };
        match self {
            ApiError::Validation(v) => ErrorParts {
                status: StatusCode::BAD_REQUEST,
                code: "HTTP_ERROR",
                message: Value::Array(v.iter().map(|x| Value::String(x.text())).collect()),
                user_message: "Some fields of the request are invalid.",
                details: Some(json!({ "violations": v })),
                error_code: validation_error_code(v),
            },
            ApiError::Business(b) => business_parts(b),
            ApiError::Unprocessable(m) => simple(
                StatusCode::UNPROCESSABLE_ENTITY,
                "UNPROCESSABLE",
                m.clone(),
                "The request cannot be carried out.",
            ),
            ApiError::ProviderDown => simple(
                StatusCode::INTERNAL_SERVER_ERROR,
                "HTTP_ERROR",
                "failure to reach the PIX provider; nothing was recorded; retry".to_owned(),
                "The payment provider is unavailable; try again.",
            ),
            ApiError::Unavailable(_) => simple(
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVICE_UNAVAILABLE",
                "the service is temporarily unavailable; retry with the same externalId".to_owned(),
                "The service is temporarily unavailable.",
            ),
            ApiError::BadRequest(m) => {
                simple(StatusCode::BAD_REQUEST, "HTTP_ERROR", m.clone(), "The request is malformed.")
            }
            ApiError::Unauthorized(m) => {
                simple(StatusCode::UNAUTHORIZED, "HTTP_ERROR", (*m).to_owned(), "Authentication is required.")
            }
            ApiError::Forbidden(m) => {
                simple(StatusCode::FORBIDDEN, "FORBIDDEN", (*m).to_owned(), "Access denied.")
            }
            ApiError::NotFound(m) => {
                simple(StatusCode::NOT_FOUND, "NOT_FOUND", m.clone(), "The resource was not found.")
            }
            ApiError::Conflict(m) => simple(
                StatusCode::CONFLICT,
                "CONFLICT",
                m.clone(),
                "The request conflicts with the current state.",
            ),
            ApiError::RateLimited { retry_after_seconds } => ErrorParts {
                details: Some(json!({ "retryAfterSeconds": retry_after_seconds })),
                ..simple(
                    StatusCode::TOO_MANY_REQUESTS,
                    "TOO_MANY_REQUESTS",
                    format!("rate limit reached; retry in {retry_after_seconds} s"),
                    "Too many requests; try again shortly.",
                )
            },
            ApiError::Token(t) => token_parts(t),
            ApiError::Storage(RepoError::Store(_)) => simple(
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVICE_UNAVAILABLE",
                "storage is unavailable; retry later".to_owned(),
                "The service is temporarily unavailable.",
            ),
            ApiError::Storage(RepoError::Corrupt { .. }) | ApiError::Internal(_) => simple(
                StatusCode::INTERNAL_SERVER_ERROR,
                "HTTP_ERROR",
                "internal error".to_owned(),
                GENERIC_USER_MESSAGE,
            ),
        }
    }
}

/// `PIX_INVALID_AMOUNT` or `PIX_INVALID_PIX_KEY` when every violation is of that kind.
fn validation_error_code(v: &[Violation]) -> Option<&'static str> {
    let all = |k| !v.is_empty() && v.iter().all(|x| x.kind == k);
    if all(ViolationKind::Amount) {
        Some("PIX_INVALID_AMOUNT")
    } else if all(ViolationKind::Key) {
        Some("PIX_INVALID_PIX_KEY")
    } else {
        None
    }
}

fn business_parts(b: &Business) -> ErrorParts {
    let (status, code, message, details) = match b {
        Business::DuplicateExternalId { external_id, existing } => (
            StatusCode::BAD_REQUEST,
            "PIX_DUPLICATE_EXTERNAL_ID",
            "externalId already used for this account",
            Some(json!({"externalId": external_id, "existingTransactionId": existing})),
        ),
        Business::DuplicateExternalIdConflict { external_id, existing } => (
            StatusCode::CONFLICT,
            "PIX_DUPLICATE_EXTERNAL_ID",
            "externalId already used for this account",
            Some(json!({"externalId": external_id, "existingTransactionId": existing})),
        ),
        Business::TransactionLimitExceeded => (
            StatusCode::BAD_REQUEST,
            "PIX_TRANSACTION_LIMIT_EXCEEDED",
            "the amount is above the per-transaction limit",
            None,
        ),
        Business::DailyLimitExceeded => (
            StatusCode::BAD_REQUEST,
            "PIX_DAILY_LIMIT_EXCEEDED",
            "the amount would exceed the daily limit",
            None,
        ),
        Business::NightLimitExceeded => (
            StatusCode::BAD_REQUEST,
            "PIX_NIGHT_LIMIT_EXCEEDED",
            "the amount would exceed the night limit (20:00 to 06:00)",
            None,
        ),
        Business::InsufficientBalance => (
            StatusCode::BAD_REQUEST,
            "PIX_INSUFFICIENT_BALANCE",
            "the available balance is below value plus fee",
            None,
        ),
        Business::RefundDeadlineExceeded => (
            StatusCode::BAD_REQUEST,
            "REFUND_DEADLINE_EXCEEDED",
            "the refund deadline (89 days after receipt) has passed",
            None,
        ),
        Business::RefundExceedsRefundable { refundable } => (
            StatusCode::BAD_REQUEST,
            "REFUND_AMOUNT_EXCEEDS_REFUNDABLE",
            "refunds would exceed the amount received",
            Some(json!({"refundable": refundable})),
        ),
        Business::ProviderExpirationBelowMinimum { minimum } => (
            StatusCode::BAD_REQUEST,
            "PROVIDER_EXPIRATION_BELOW_MINIMUM",
            "expirationTime is below the provider's minimum",
            Some(json!({"minimumExpirationTime": minimum})),
        ),
    };
    ErrorParts {
        status,
        code,
        message: Value::String(message.to_owned()),
        user_message: GENERIC_USER_MESSAGE,
        details,
        error_code: Some(code),
    }
}

fn token_parts(t: &TokenFailure) -> ErrorParts {
    use TokenFailure as T;
    let (status, code, message, hint): (StatusCode, &'static str, String, &'static str) = match t {
        T::HeaderMissing => (
            StatusCode::BAD_REQUEST,
            "PUB_CERT_HEADER_MISSING",
            "the X-SSL-Client-Cert header is missing".into(),
            "Send the client certificate PEM, URL-encoded, in the X-SSL-Client-Cert header.",
        ),
        T::MalformedPem(why) => (
            StatusCode::BAD_REQUEST,
            "PUB_CERT_MALFORMED_PEM",
            format!("the certificate cannot be parsed: {why}"),
            "URL-encode the whole PEM; every '+' of the base64 body must be sent as %2B, not %20.",
        ),
        T::BodyInvalid(_) => (
            StatusCode::BAD_REQUEST,
            "PUB_REQUEST_BODY_INVALID",
            "the request body is invalid".into(),
            "Send a JSON object {\"clientId\": \"<UUID v4>\", \"clientSecret\": \"<secret>\"}.",
        ),
        T::CertNotYetValid => (
            StatusCode::UNAUTHORIZED,
            "PUB_CERT_NOT_YET_VALID",
            "the certificate is not valid yet (notBefore is in the future)".into(),
            "Use a certificate whose notBefore has passed, or check the client's clock.",
        ),
        T::CertExpired => (
            StatusCode::UNAUTHORIZED,
            "PUB_CERT_EXPIRED",
            "the certificate has expired (notAfter has passed)".into(),
            "Register a new certificate for the account and use it.",
        ),
        T::CertNotRegistered => (
            StatusCode::UNAUTHORIZED,
            "PUB_CERT_NOT_REGISTERED",
            "the certificate is not registered".into(),
            "Ask the operator to register this certificate's fingerprint for your account.",
        ),
        T::InvalidCredentials => (
            StatusCode::UNAUTHORIZED,
            "PUB_INVALID_CREDENTIALS",
            "invalid client credentials".into(),
            "Check clientId and clientSecret.",
        ),
        T::CertNotAuthorizedForAccount => (
            StatusCode::FORBIDDEN,
            "PUB_CERT_NOT_AUTHORIZED_FOR_ACCOUNT",
            "the certificate is not linked to the account of this clientId".into(),
            "Use the certificate registered for this account.",
        ),
        T::TooManyFailures { .. } => (
            StatusCode::TOO_MANY_REQUESTS,
            "PUB_TOO_MANY_ATTEMPTS",
            "too many failed attempts; try again after the time in Retry-After".into(),
            "Check clientId, clientSecret and the certificate before trying again.",
        ),
        T::UpstreamError => (
            StatusCode::BAD_GATEWAY,
            "PUB_AUTH_UPSTREAM_ERROR",
            "authentication failed with an unexpected error".into(),
            "Contact support with the errorId.",
        ),
        T::UpstreamUnavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            "PUB_AUTH_UPSTREAM_UNAVAILABLE",
            "authentication is temporarily unavailable".into(),
            "Retry with exponential backoff.",
        ),
    };
    let mut details = json!({ "hint": hint });
    if let T::BodyInvalid(v) = t {
        details["violations"] = json!(v);
    }
    ErrorParts {
        status,
        code,
        message: Value::String(message),
        user_message: "Authentication failed.",
        details: Some(details),
        error_code: Some(code),
    }
}

impl From<AccountsError> for ApiError {
    fn from(e: AccountsError) -> ApiError {
        match e {
            AccountsError::AccountNotFound => ApiError::NotFound("account not found".into()),
            AccountsError::CertificateNotFound => {
                ApiError::NotFound("certificate not found for this account".into())
            }
            AccountsError::CertificateOfAnotherAccount => {
                ApiError::Conflict("the certificate is registered to another account".into())
            }
            AccountsError::CertificateRevoked => ApiError::Conflict(
                "the certificate was revoked; revocation is permanent, register a new one".into(),
            ),
            AccountsError::Repo(r) => ApiError::Storage(r),
            AccountsError::Random(m) => ApiError::Internal(m),
        }
    }
}

/// What a 503 tells the client to wait before it retries.
pub const UNAVAILABLE_RETRY_AFTER_SECONDS: u64 = 5;

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.parts().status
    }

    /// The body is written by [`envelope`], which knows the request; this response only
    /// carries the status and the error itself.
    fn error_response(&self) -> HttpResponse<BoxBody> {
        match self {
            ApiError::RateLimited { retry_after_seconds }
            | ApiError::Token(TokenFailure::TooManyFailures { retry_after_seconds }) => {
                HttpResponse::build(self.status_code())
                    .insert_header((header::RETRY_AFTER, retry_after_seconds.to_string()))
                    .finish()
            }
            // Unavailable is temporary (a full disk, a slow flush): say when to come back.
            _ if self.status_code() == StatusCode::SERVICE_UNAVAILABLE => {
                HttpResponse::build(self.status_code())
                    .insert_header((header::RETRY_AFTER, UNAVAILABLE_RETRY_AFTER_SECONDS.to_string()))
                    .finish()
            }
            _ => HttpResponse::new(self.status_code()),
        }
    }
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

/// The two body shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Extended,
    Simple,
}

pub fn family_of(path: &str) -> Family {
    const SIMPLE_PREFIXES: [&str; 4] = ["/accounts/", "/dict/", "/pix/", "/cob/"];
    if path == "/balance" || SIMPLE_PREFIXES.iter().any(|p| path.starts_with(p)) {
        Family::Simple
    } else {
        Family::Extended
    }
}

/// Body of the extended shape (for the OpenAPI document).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
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

/// Gives every request an id and every error response its JSON body.
pub async fn envelope(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let request_id = super::access::request_id(req.request());
    let path = req.path().to_owned();
    let method = req.method().to_string();
    let state = req.app_data::<web::Data<AppState>>().cloned();
    // actix turns handler and extractor errors into responses (with the error attached)
    // before they reach a middleware, so an `Err` here can only come from a middleware
    // below this one, and ours never fail. The request must not be cloned before routing
    // (actix needs it unshared), so such an error is passed on as it is.
    let res = next.call(req).await?.map_into_boxed_body();
    let res = if res.status().is_client_error() || res.status().is_server_error() {
        let parts = match res.response().error() {
            Some(e) => match e.as_error::<ApiError>() {
                Some(api) => {
                    if api.parts().status == StatusCode::SERVICE_UNAVAILABLE {
                        // Its cause (a full disk, a failed storage) is logged once where it
                        // happens; a line per refused request would flood the log.
                        tracing::debug!(%path, error = %api, "request refused");
                    } else if api.parts().status.is_server_error() {
                        tracing::error!(%path, error = %api, "request failed");
                    }
                    api.parts()
                }
                None => parts_from_status(res.status()),
            },
            None => parts_from_status(res.status()),
        };
        let now = state.map(|s| s.clock.now()).unwrap_or_else(chrono::Utc::now);
        let ctx =
            Ctx { path: path.clone(), method, request_id: request_id.clone(), timestamp: super::iso(now) };
        let body = render(&parts, family_of(&path), &ctx);
        let (req, old) = res.into_parts();
        let mut fresh =
            HttpResponse::build(parts.status).content_type("application/json").body(body.to_string());
        for (name, value) in old.headers() {
            if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
                fresh.headers_mut().append(name.clone(), value.clone());
            }
        }
        ServiceResponse::new(req, fresh)
    } else {
        res
    };
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_follow_the_route_prefixes() {
        for p in ["/accounts/balances", "/dict/pix", "/pix/E1/devolucao/2", "/cob/abc", "/balance"] {
            assert_eq!(family_of(p), Family::Simple, "{p}");
        }
        for p in ["/api/auth/token", "/admin/accounts", "/sandbox/pix-in", "/nope", "/balances"] {
            assert_eq!(family_of(p), Family::Extended, "{p}");
        }
    }

    #[test]
    fn every_token_failure_has_its_documented_status_and_code() {
        use TokenFailure as T;
        let table = [
            (T::HeaderMissing, 400, "PUB_CERT_HEADER_MISSING"),
            (T::MalformedPem("x"), 400, "PUB_CERT_MALFORMED_PEM"),
            (T::BodyInvalid(vec![]), 400, "PUB_REQUEST_BODY_INVALID"),
            (T::CertNotYetValid, 401, "PUB_CERT_NOT_YET_VALID"),
            (T::CertExpired, 401, "PUB_CERT_EXPIRED"),
            (T::CertNotRegistered, 401, "PUB_CERT_NOT_REGISTERED"),
            (T::InvalidCredentials, 401, "PUB_INVALID_CREDENTIALS"),
            (T::CertNotAuthorizedForAccount, 403, "PUB_CERT_NOT_AUTHORIZED_FOR_ACCOUNT"),
            (T::UpstreamError, 502, "PUB_AUTH_UPSTREAM_ERROR"),
            (T::UpstreamUnavailable, 503, "PUB_AUTH_UPSTREAM_UNAVAILABLE"),
        ];
        for (failure, status, code) in table {
            let p = ApiError::Token(failure).parts();
            assert_eq!((p.status.as_u16(), p.code), (status, code));
            assert!(p.details.as_ref().and_then(|d| d.get("hint")).is_some());
        }
    }

    #[test]
    fn the_simple_shape_joins_validation_messages() {
        let parts =
            ApiError::Validation(vec![Violation::new("a", "is bad"), Violation::new("b", "is worse")])
                .parts();
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
