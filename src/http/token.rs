//! `POST /api/auth/token`: client credentials plus a registered certificate give a bearer
//! token valid for 1800 s.
//!
//! The checks run in this order, each with its code (interface.md "Token
//! codes"): the certificate header is present, its PEM parses, the body is
//! `{clientId: UUID v4, clientSecret}`, the certificate is within its validity window on
//! the server clock, its fingerprint is registered and not revoked, the credentials match,
//! and the certificate belongs to the clientId's account. Credentials are checked only
//! after the certificate is known, so a client without a registered certificate learns
//! nothing about credentials; an unknown clientId and a wrong secret cost the same and
//! answer the same. Failed attempts are throttled (`domain::throttle`): past the limit, 429
//! `PUB_TOO_MANY_ATTEMPTS` with `Retry-After`, before the secret is checked.

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::body::{json_object, Fields};
use super::error::{ApiError, ExtendedErrorBody, TokenFailure};
use super::AppState;
use crate::auth::certs::{self, ParsedCert};
use crate::auth::secrets;
use crate::auth::tokens::TOKEN_TTL_SECONDS;
use crate::domain::certificate::{Fingerprint, ValidityVerdict};
use crate::domain::ids::ClientId;
use crate::domain::scope::Scopes;
use crate::domain::throttle::TokenThrottle;
use crate::store::RepoError;

pub const CERT_HEADER: &str = "x-ssl-client-cert";
/// Characters of a clientSecret the endpoint reads at most.
pub const CLIENT_SECRET_LEN_MAX: usize = 256;

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct TokenRequest {
    /// UUID v4.
    client_id: String,
    client_secret: String,
    /// The API Pix's scopes the token is to carry, separated by spaces (`cob.read
    /// rec.write`); without it the token carries every scope.
    scope: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[schema(example = json!({"access_token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
    "token_type": "Bearer", "expires_in": 1800}))]
pub struct TokenResponse {
    pub access_token: String,
    /// Always `Bearer`.
    pub token_type: &'static str,
    /// Seconds; 1800.
    pub expires_in: i64,
    /// The scopes the token carries, when it was asked for with `scope`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

fn fail(f: TokenFailure) -> ApiError {
    let e = ApiError::Token(f);
    metrics::counter!("pixgw_token_failures_total", "code" => e.parts(crate::http::error::Family::Extended).code).increment(1);
    e
}

fn upstream(e: RepoError) -> ApiError {
    tracing::error!(error = %e, "token issuance could not read storage");
    match e {
        RepoError::Store(_) => fail(TokenFailure::UpstreamUnavailable),
        RepoError::Corrupt { .. } | RepoError::Sealed { .. } => fail(TokenFailure::UpstreamError),
    }
}

fn read_certificate(req: &HttpRequest) -> Result<ParsedCert, ApiError> {
    let raw = req.headers().get(CERT_HEADER).ok_or(fail(TokenFailure::HeaderMissing))?;
    let text = raw.to_str().map_err(|_| fail(TokenFailure::MalformedPem("the header is not ASCII")))?;
    if text.trim().is_empty() {
        return Err(fail(TokenFailure::HeaderMissing));
    }
    certs::parse_header(text).map_err(|e| fail(TokenFailure::MalformedPem(e.0)))
}

fn throttle(state: &AppState) -> std::sync::MutexGuard<'_, TokenThrottle<Fingerprint, ClientId>> {
    // A panic while holding it leaves counts, not a broken invariant: keep using them.
    state.token_throttle.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn read_body(req: &HttpRequest, body: &[u8]) -> Result<(ClientId, String, Option<Scopes>), ApiError> {
    let obj = json_object(req, body).map_err(|e| fail(TokenFailure::BodyInvalid(vec![e.violation()])))?;
    let mut f = Fields::new(&obj);
    let client_id = f.string("clientId", true);
    let secret = f.string("clientSecret", true);
    let scopes = f.string("scope", false).and_then(|text| match Scopes::parse(text) {
        Ok(s) => Some(s),
        Err(e) => {
            f.fail("scope", e.to_string());
            None
        }
    });
    let client_id = client_id.and_then(|c| {
        let parsed = ClientId::parse(c);
        if parsed.is_none() {
            f.fail("clientId", "must be a UUID v4");
        }
        parsed
    });
    if let Some(s) = secret {
        if s.is_empty() || s.len() > CLIENT_SECRET_LEN_MAX {
            f.fail("clientSecret", "must have 1 to 256 characters");
        }
    }
    match (client_id, secret, f.violations.is_empty()) {
        (Some(c), Some(s), true) => Ok((c, s.to_owned(), scopes)),
        _ => Err(fail(TokenFailure::BodyInvalid(f.violations))),
    }
}

#[utoipa::path(
    post,
    path = "/api/auth/token",
    tag = "auth",
    request_body = TokenRequest,
    params(("X-SSL-Client-Cert" = String, Header, description = "URL-encoded PEM client certificate; '+' as %2B")),
    responses(
        (status = 201, description = "Access token", body = TokenResponse),
        (status = 400, description = "PUB_CERT_HEADER_MISSING, PUB_CERT_MALFORMED_PEM, PUB_REQUEST_BODY_INVALID", body = ExtendedErrorBody),
        (status = 401, description = "PUB_CERT_NOT_YET_VALID, PUB_CERT_EXPIRED, PUB_CERT_NOT_REGISTERED, PUB_INVALID_CREDENTIALS", body = ExtendedErrorBody),
        (status = 403, description = "PUB_CERT_NOT_AUTHORIZED_FOR_ACCOUNT", body = ExtendedErrorBody),
        (status = 429, description = "PUB_TOO_MANY_ATTEMPTS: too many failed attempts with this certificate or on this clientId; Retry-After says when to try again", body = ExtendedErrorBody),
        (status = 502, description = "PUB_AUTH_UPSTREAM_ERROR", body = ExtendedErrorBody),
        (status = 503, description = "PUB_AUTH_UPSTREAM_UNAVAILABLE", body = ExtendedErrorBody),
    )
)]
pub async fn issue_token(
    req: HttpRequest,
    body: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let cert = read_certificate(&req)?;
    let (client_id, secret, scopes) = read_body(&req, &body)?;
    let now = state.clock.now();
    match cert.validity.at(now) {
        ValidityVerdict::Valid => {}
        ValidityVerdict::NotYetValid => return Err(fail(TokenFailure::CertNotYetValid)),
        ValidityVerdict::Expired => return Err(fail(TokenFailure::CertExpired)),
    }
    let registered = state.repo.certificate(&cert.fingerprint).map_err(upstream)?;
    let registered = match registered {
        Some(r) if !r.is_revoked() => r,
        _ => return Err(fail(TokenFailure::CertNotRegistered)),
    };
    let client = state.repo.client(&client_id).map_err(upstream)?;
    let own_account = client.as_ref().is_some_and(|c| c.account_id == registered.account_id);
    if let Err(wait) = throttle(&state).admit(&cert.fingerprint, &client_id, own_account, now) {
        let retry_after_seconds = wait.num_seconds().max(0) as u64 + u64::from(wait.subsec_nanos() > 0);
        return Err(fail(TokenFailure::TooManyFailures { retry_after_seconds }));
    }
    let stored = client.as_ref().map(|c| (c.salt_hex.as_str(), c.secret_hash_hex.as_str()));
    let client = match (secrets::verify_secret(stored, &secret), client) {
        (true, Some(c)) if own_account => c,
        (true, Some(_)) => {
            throttle(&state).fail(&cert.fingerprint, &client_id, own_account, now);
            return Err(fail(TokenFailure::CertNotAuthorizedForAccount));
        }
        _ => {
            throttle(&state).fail(&cert.fingerprint, &client_id, own_account, now);
            return Err(fail(TokenFailure::InvalidCredentials));
        }
    };
    if state.repo.account(client.account_id).map_err(upstream)?.is_none() {
        return Err(fail(TokenFailure::InvalidCredentials));
    }
    let token = state
        .tokens
        .issue_scoped(client.account_id, client_id, &cert.fingerprint, now, Uuid::new_v4(), scopes)
        .map_err(|e| {
            tracing::error!(error = %e, "token signing failed");
            fail(TokenFailure::UpstreamError)
        })?;
    super::access::record_account(&req, client.account_id);
    Ok(HttpResponse::Created().json(TokenResponse {
        access_token: token,
        token_type: "Bearer",
        expires_in: TOKEN_TTL_SECONDS,
        scope: scopes.map(Scopes::to_text),
    }))
}
