//! The failures of `POST /api/auth/token` and their table: each has its own status, stable
//! code and a hint that says what to do, because a client integrating the token call
//! needs to know which of certificate, secret or header is wrong.

use actix_web::http::StatusCode;
use serde_json::{json, Value};

use super::validation::Violation;
use super::ErrorParts;

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

pub(super) fn token_parts(t: &TokenFailure) -> ErrorParts {
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
            "URL-encode the whole PEM: every '+' of the base64 body must be sent as %2B (an unencoded '+' reads as a space).",
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

#[cfg(test)]
mod tests {
    use super::*;

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
            let p = token_parts(&failure);
            assert_eq!((p.status.as_u16(), p.code), (status, code));
            assert!(p.details.as_ref().and_then(|d| d.get("hint")).is_some());
        }
    }
}
