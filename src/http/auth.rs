//! Request authentication: the bearer token of clients and the admin token of operators.
//!
//! [`Caller`] accepts a token only if its signature and algorithm are the server's, it has
//! not expired on the server clock, its client still belongs to its account and was not
//! rotated after the token was issued, and the certificate it is bound to is still
//! registered to that account and not revoked. A request that presents a client
//! certificate (`X-SSL-Client-Cert`, as a TLS-terminating proxy forwards it) must present
//! the one the token is bound to (`cnf.x5t#S256`); with `--require-client-cert` every
//! request must present it. Any failure is one 401 in the route family's body shape.
//!
//! These checks run in `authorize`, the middleware that decides every request's access
//! before anything else of it is read; the extractors only take the caller it admitted.

use std::future::{ready, Ready};

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};

use super::error::ApiError;
use super::token::CERT_HEADER;
use super::AppState;
use crate::auth::certs;
use crate::auth::tokens::TokenError;
use crate::domain::certificate::Fingerprint;
use crate::domain::ids::{AccountId, ClientId};

/// An authenticated client of an account.
#[derive(Debug, Clone)]
pub struct Caller {
    pub account_id: AccountId,
    pub client_id: ClientId,
    pub sandbox: bool,
    /// The id of the request it made, for what its account actor logs.
    pub request_id: Option<std::sync::Arc<str>>,
    /// Requests a second it may make: its account's own limit, else the server's.
    rate_limit: Option<u64>,
}

fn bearer(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

fn state(req: &HttpRequest) -> Result<&web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>().ok_or_else(|| ApiError::internal("application state missing"))
}

/// Admits a client to the route of `pattern`: a valid token, carrying the route's scope
/// when it is a route of the API Pix, of a sandbox account when `sandbox` is asked, and
/// within its account's request rate.
pub(super) fn admit_client(req: &HttpRequest, pattern: &str, sandbox: bool) -> Result<Caller, ApiError> {
    let caller = authenticate(req, pattern)?;
    if sandbox && !caller.sandbox {
        return Err(ApiError::Forbidden("sandbox routes are only for sandbox accounts"));
    }
    count_request(req, &caller)?;
    Ok(caller)
}

fn authenticate(req: &HttpRequest, pattern: &str) -> Result<Caller, ApiError> {
    let state = state(req)?;
    let token = bearer(req).ok_or(ApiError::Unauthorized("missing bearer token"))?;
    let subject = state.tokens.verify(token, state.clock.now()).map_err(|e| match e {
        TokenError::Expired => ApiError::Unauthorized("the access token has expired"),
        TokenError::Invalid => ApiError::Unauthorized("the access token is invalid"),
    })?;
    let revoked = ApiError::Unauthorized("the access token was revoked");
    let client = state
        .repo
        .client(&subject.client_id)?
        .ok_or(ApiError::Unauthorized("the access token is invalid"))?;
    if client.account_id != subject.account_id || subject.issued_at < client.rotated_at.timestamp() {
        return Err(revoked);
    }
    check_binding(req, &subject.fingerprint, state.require_client_cert)?;
    // A route of the API Pix requires its scope (domain::scope); a token asked for without
    // `scope` carries them all.
    if let Some(needed) = crate::domain::scope::required(req.method().as_str(), pattern) {
        if !subject.scopes.allows(needed) {
            return Err(ApiError::Forbidden(crate::domain::scope::lacking(needed)));
        }
    }
    match state.repo.certificate(&subject.fingerprint)? {
        Some(c) if c.account_id == subject.account_id && !c.is_revoked() => {}
        _ => return Err(revoked),
    }
    let Some(account) = state.repo.account(subject.account_id)? else {
        return Err(revoked);
    };
    super::access::record_account(req, subject.account_id);
    Ok(Caller {
        account_id: subject.account_id,
        client_id: subject.client_id,
        // A production server serves no sandbox, whatever an account was made as.
        sandbox: account.profile.sandbox && !state.production,
        request_id: super::access::shared_request_id(req),
        rate_limit: account.settings.rate_limit.map(u64::from).or(state.account_rate_limit),
    })
}

/// The certificate a request presents, if any, must be the one its token is bound to. An
/// empty header is no certificate (a proxy forwards an empty value when the client sent
/// none); it is refused only when certificates are required.
fn check_binding(req: &HttpRequest, bound: &Fingerprint, required: bool) -> Result<(), ApiError> {
    let presented = req.headers().get(CERT_HEADER).map(|v| v.to_str().map(str::trim));
    match presented {
        None | Some(Ok("")) if required => {
            Err(ApiError::Unauthorized("a client certificate (X-SSL-Client-Cert) is required"))
        }
        None | Some(Ok("")) => Ok(()),
        Some(Ok(text)) => match certs::parse_header(text) {
            Ok(c) if c.fingerprint == *bound => Ok(()),
            Ok(_) => {
                Err(ApiError::Unauthorized("the client certificate is not the one the token is bound to"))
            }
            Err(_) => Err(ApiError::Unauthorized("the client certificate header is malformed")),
        },
        Some(Err(_)) => Err(ApiError::Unauthorized("the client certificate header is malformed")),
    }
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Ready<Result<Caller, ApiError>>;

    /// The caller `authorize` admitted; a route not declared as a client's has none.
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let admitted = req.extensions().get::<Caller>().cloned();
        ready(
            admitted.ok_or_else(|| {
                ApiError::internal("no caller admitted: the route is not declared as a client's")
            }),
        )
    }
}

/// Spends one of the caller's requests of the second (its account's `rateLimit`, else
/// `--account-rate-limit`), once per request: counted once the caller is known, so another
/// account's traffic never spends it.
fn count_request(req: &HttpRequest, caller: &Caller) -> Result<(), ApiError> {
    let Some(per_second) = caller.rate_limit else { return Ok(()) };
    let state = state(req)?;
    let taken = state.account_rate.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take(
        caller.account_id.get(),
        per_second,
        state.clock.now(),
    );
    taken.map_err(|wait| ApiError::RateLimited {
        retry_after_seconds: u64::try_from((wait.num_milliseconds() + 999) / 1000).unwrap_or(1).max(1),
    })
}

/// An operator holding one of the admin tokens; `name` is the token's name, which the
/// audit line of every operator request carries.
#[derive(Debug, Clone)]
pub struct Admin {
    pub name: String,
}

/// Admits an operator holding one of the admin tokens, with an audit line.
pub(super) fn admit_admin(req: &HttpRequest) -> Result<Admin, ApiError> {
    let state = state(req)?;
    let token = bearer(req).ok_or(ApiError::Unauthorized("missing admin token"))?;
    let tokens = state.admin_tokens.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    let name = tokens.name_of(token).ok_or(ApiError::Unauthorized("invalid admin token"))?.to_owned();
    tracing::info!(target: "pixgw::audit", operator = %name, method = %req.method(), path = %req.path(), "operator request");
    Ok(Admin { name })
}

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = Ready<Result<Admin, ApiError>>;

    /// The operator `authorize` admitted; a route not declared as an operator's has none.
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let admitted = req.extensions().get::<Admin>().cloned();
        ready(admitted.ok_or_else(|| {
            ApiError::internal("no operator admitted: the route is not declared as an operator's")
        }))
    }
}
