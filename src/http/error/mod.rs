//! The one error mapping of the server.
//!
//! Handlers and extractors return [`ApiError`]; [`ApiError::parts`] maps each variant to
//! its status, code and texts, and nothing else in the server chooses a status for an
//! error. By concern:
//! - [`rejection`]: every business rejection and its one table, per family;
//! - [`token`]: the failures of the token call and their table;
//! - [`validation`]: the violations body readers report;
//! - [`envelope`]: the middleware that writes each error body in the shape of its route's
//!   family (interface.md "Error bodies").
//!
//! Causes are kept as errors ([`Cause`]), never flattened: a 500 or 503 shows the client
//! only that it happened, and the log gets the whole chain.

pub mod envelope;
pub mod rejection;
pub mod token;
pub mod validation;

use actix_web::body::BoxBody;
use actix_web::http::header;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::{json, Value};

use crate::account::{CommandError, RegistryError};
use crate::admin::AdminError;
pub use crate::cause::{Cause, Chain};
use crate::store::RepoError;
pub use envelope::{envelope, ExtendedErrorBody, Family, RouteFamilies, SimpleErrorBody};
pub use rejection::Rejection;
pub use token::TokenFailure;
pub use validation::{Violation, ViolationKind};

/// Every error a client can be answered with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A rule said no (see [`Rejection`]); its status depends on the route's family.
    #[error("rejected: {0:?}")]
    Rejected(Rejection),
    /// The PIX provider could not be reached; nothing was recorded (500, retry).
    #[error("provider unavailable")]
    ProviderDown,
    /// The key directory (the DICT) did not answer a lookup the request needs; nothing was
    /// recorded (503 with `Retry-After`: an outage of the directory, not a fault here).
    #[error("the key directory is unavailable")]
    DirectoryDown,
    /// The SPI rail has more payouts waiting than it can send in time; nothing was recorded
    /// (503 with `Retry-After`).
    #[error("the payment rail is busy")]
    RailBusy,
    /// Storage or an actor did not answer in time (503).
    #[error("unavailable")]
    Unavailable(#[source] Cause),
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
    /// What was here is gone for good (a payload location whose charge ended).
    #[error("gone: {0}")]
    Gone(String),
    #[error("conflict: {0}")]
    Conflict(String),
    /// An `If-Match` that names another version than the current one (412).
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    /// Too many calls; `Retry-After` says in how many seconds one is allowed again.
    #[error("rate limited for {retry_after_seconds}s")]
    RateLimited { retry_after_seconds: u64 },
    #[error("token issuance failed: {0:?}")]
    Token(TokenFailure),
    /// A DICT key claim's rule said no before the DICT was asked (409).
    #[error("claim refused: {0}")]
    Claim(crate::domain::claim::ClaimError),
    /// The DICT did not take a request of ours (a claim, a step of one, a fraud mark).
    #[error("{0}")]
    Dict(crate::rail::keys::DictAskError),
    #[error("storage")]
    Storage(#[from] RepoError),
    #[error("internal error")]
    Internal(#[source] Cause),
}

impl ApiError {
    /// Whether this error proves the request changed nothing though its status is 5xx (the
    /// provider could not be reached before anything was recorded), so that an
    /// Idempotency-Key it held is free again.
    pub fn did_nothing(&self) -> bool {
        matches!(self, ApiError::ProviderDown | ApiError::DirectoryDown | ApiError::RailBusy)
    }

    /// An internal error that only a sentence explains (a state the code rules out).
    pub fn internal(why: impl Into<String>) -> ApiError {
        ApiError::Internal(Cause::msg(why))
    }

    /// A repeated externalId answered 409 instead of 400 (the QR cash-out's rule).
    pub fn duplicate_as_conflict(self, external_id: &str) -> ApiError {
        match self {
            ApiError::Rejected(Rejection::DuplicateExternalId { existing, .. }) => {
                ApiError::Rejected(Rejection::DuplicateExternalIdOnQr {
                    external_id: external_id.into(),
                    existing,
                })
            }
            other => other,
        }
    }

    /// Names the externalId a duplicate rejection is about, for its details.
    pub fn with_external_id(self, external_id: Option<&str>) -> ApiError {
        match self {
            ApiError::Rejected(Rejection::DuplicateExternalId { existing, .. }) => {
                ApiError::Rejected(Rejection::DuplicateExternalId {
                    external_id: external_id.map(str::to_owned),
                    existing,
                })
            }
            other => other,
        }
    }
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

pub(crate) const GENERIC_USER_MESSAGE: &str = "We could not process your request.";

impl ApiError {
    /// The mapping of every variant to status, code and texts. No catch-all arm.
    pub fn parts(&self, family: Family) -> ErrorParts {
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
                error_code: validation::error_code(v),
            },
            ApiError::Rejected(r) => r.parts(family),
            ApiError::ProviderDown => simple(
                StatusCode::INTERNAL_SERVER_ERROR,
                "HTTP_ERROR",
                "failure to reach the PIX provider; nothing was recorded; retry".to_owned(),
                "The payment provider is unavailable; try again.",
            ),
            ApiError::DirectoryDown => simple(
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVICE_UNAVAILABLE",
                "the key directory (DICT) did not answer; nothing was recorded; retry".to_owned(),
                "The key directory is unavailable; try again shortly.",
            ),
            ApiError::RailBusy => simple(
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVICE_UNAVAILABLE",
                "the payment rail has more payments waiting than it can send in time; nothing was recorded; retry".to_owned(),
                "Too many payments are leaving right now; try again shortly.",
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
            ApiError::Gone(m) => {
                simple(StatusCode::GONE, "GONE", m.clone(), "The resource is no longer available.")
            }
            ApiError::Conflict(m) => simple(
                StatusCode::CONFLICT,
                "CONFLICT",
                m.clone(),
                "The request conflicts with the current state.",
            ),
            ApiError::PreconditionFailed(m) => simple(
                StatusCode::PRECONDITION_FAILED,
                "PRECONDITION_FAILED",
                m.clone(),
                "The resource changed since it was read; read it again.",
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
            ApiError::Token(t) => token::token_parts(t),
            ApiError::Claim(e) => simple(
                StatusCode::CONFLICT,
                e.code(),
                e.to_string(),
                "The claim does not allow this step now.",
            ),
            ApiError::Dict(crate::rail::keys::DictAskError::NoDict) => simple(
                StatusCode::CONFLICT,
                "DICT_REQUIRED",
                "key claims and fraud marks live in the DICT: this server's rail has none (--rail spi has)".to_owned(),
                "This is not available on this server.",
            ),
            ApiError::Dict(crate::rail::keys::DictAskError::NotFound) => simple(
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
                "the DICT has no such claim, or no entry for the key".to_owned(),
                "The resource was not found.",
            ),
            ApiError::Dict(crate::rail::keys::DictAskError::Refused(why)) => simple(
                StatusCode::CONFLICT,
                "DICT_REFUSED",
                format!("the DICT refused: {why}"),
                "The key directory refused the request.",
            ),
            ApiError::Dict(crate::rail::keys::DictAskError::Unavailable(_)) => simple(
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVICE_UNAVAILABLE",
                "the key directory (DICT) did not answer; nothing was changed; retry".to_owned(),
                "The key directory is unavailable; try again shortly.",
            ),
            ApiError::Storage(RepoError::Store(_)) => simple(
                StatusCode::SERVICE_UNAVAILABLE,
                "SERVICE_UNAVAILABLE",
                // After a storage failure a write may have landed without its answer: the
                // client resolves it as docs/decisions.md "Money out: the account actor and
                // durability" says (storage failure is fail-stop).
                "storage is unavailable; a change this request asked for may or may not have been made: \
                 retry later with the same externalId (or Idempotency-Key), or look it up by its externalId"
                    .to_owned(),
                "The service is temporarily unavailable.",
            ),
            ApiError::Storage(RepoError::Corrupt { .. } | RepoError::Sealed { .. })
            | ApiError::Internal(_) => simple(
                StatusCode::INTERNAL_SERVER_ERROR,
                "HTTP_ERROR",
                "internal error".to_owned(),
                GENERIC_USER_MESSAGE,
            ),
        }
    }
}

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> ApiError {
        match e {
            AdminError::AccountNotFound => ApiError::NotFound("account not found".into()),
            AdminError::CertificateNotFound => {
                ApiError::NotFound("certificate not found for this account".into())
            }
            AdminError::CertificateOfAnotherAccount => {
                ApiError::Conflict("the certificate is registered to another account".into())
            }
            AdminError::CertificateRevoked => ApiError::Conflict(
                "the certificate was revoked; revocation is permanent, register a new one".into(),
            ),
            AdminError::Repo(r) => ApiError::Storage(r),
            AdminError::Random(m) => ApiError::internal(m),
            AdminError::RequestIdReused => ApiError::Conflict(
                "this requestId made an account of another name or document: give a new one".into(),
            ),
        }
    }
}

/// What a 503 tells the client to wait before it retries.
pub const UNAVAILABLE_RETRY_AFTER_SECONDS: u64 = 5;

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        // The envelope renders the body with the route's family; a rejection's status
        // there may differ from this one, which only carries the error to it.
        self.parts(Family::Extended).status
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

impl From<CommandError> for ApiError {
    fn from(e: CommandError) -> ApiError {
        match e {
            CommandError::Refused(r) => match Rejection::of(r.clone()) {
                Some(rejection) => ApiError::Rejected(rejection),
                None => ApiError::Internal(Cause::new(r)),
            },
            CommandError::Unavailable(cause) => ApiError::Unavailable(cause),
            CommandError::Internal(cause) => ApiError::Internal(cause),
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> ApiError {
        ApiError::Rejected(r)
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> ApiError {
        match e {
            RegistryError::NotFound => ApiError::Unauthorized("the access token was revoked"),
            RegistryError::Repo(r) => ApiError::Storage(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::decide::Refusal;
    use crate::domain::ledger::Rejection as L;

    #[test]
    fn a_command_error_keeps_its_cause_and_a_bug_is_internal() {
        let e = ApiError::from(CommandError::Unavailable(Cause::msg("disk full").context("journal")));
        assert_eq!(e.parts(Family::Extended).status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(Chain(&e).to_string(), "unavailable: journal: disk full");
        let e = ApiError::from(CommandError::Refused(Refusal::Bug("two debits".into())));
        assert_eq!(e.parts(Family::Simple).status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(Chain(&e).to_string().contains("two debits"));
    }

    #[test]
    fn a_refusal_is_answered_by_the_table_in_the_routes_family() {
        let e = ApiError::from(CommandError::Refused(Refusal::Ledger(L::InsufficientBalance)));
        assert_eq!(e.parts(Family::Extended).status, StatusCode::BAD_REQUEST);
        assert_eq!(e.parts(Family::Simple).status, StatusCode::UNPROCESSABLE_ENTITY);
    }

    #[test]
    fn a_qr_duplicate_is_a_conflict_that_names_its_external_id() {
        let e =
            ApiError::from(CommandError::Refused(Refusal::Ledger(L::DuplicateExternalId { existing: 3 })));
        let p = e.duplicate_as_conflict("ext-1").parts(Family::Extended);
        assert_eq!(p.status, StatusCode::CONFLICT);
        assert_eq!(p.details.unwrap(), json!({"externalId": "ext-1", "existingTransactionId": 3}));
    }
}
