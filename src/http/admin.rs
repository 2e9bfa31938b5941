//! The admin API under `/admin/` (interface.md "Running the server"): accounts, certificates, settings,
//! secret rotation and the test clock. Every route needs the admin token.

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::auth::Admin;
use super::body::{request_object, Fields};
use super::error::{ApiError, ExtendedErrorBody, Violation};
use super::{iso, AppState};
use crate::admin;
use crate::auth::certs;
use crate::clock::{ClockError, CLOCK_ADVANCE_SECONDS_MAX};
use crate::domain::account::{
    AccountName, AccountProfile, AccountSettings, FeeRule, SplitFrequency, ACCOUNT_RATE_LIMIT_MAX,
    PROVIDER_MIN_EXPIRATION_SECONDS_MAX, PROVIDER_MIN_EXPIRATION_SECONDS_MIN,
};
use crate::domain::certificate::Fingerprint;
use crate::domain::document::TaxId;
use crate::domain::ids::AccountId;
use crate::domain::money::{Money, Percent};
use crate::store::keys::CLOCK_OFFSET;
use crate::store::{AccountRecord, CertificateRecord};

fn finish(violations: Vec<Violation>) -> Result<(), ApiError> {
    if violations.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Validation(violations))
    }
}

pub(super) fn account_id(raw: &str) -> Result<AccountId, ApiError> {
    raw.parse().map_err(|_| ApiError::NotFound("account not found".into()))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedAccountResponse {
    account_id: u64,
    client_id: String,
    /// Shown once, when the account is made; only its hash is stored, so a replay of the
    /// same `requestId` has none (rotate it: `POST /admin/accounts/{id}/secret`).
    client_secret: Option<String>,
    webhook_secret: String,
    /// The same `requestId` made this account before: nothing was made now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    replayed: bool,
}

/// Characters of a `requestId` at most.
pub const ACCOUNT_REQUEST_ID_LEN_MAX: usize = 64;

/// Body: `{name, document, sandbox?, initialBalance?}`.
/// A new account's body: who it is and its opening balance.
fn read_new_account(obj: &Map<String, Value>) -> Result<(AccountProfile, Money, Option<String>), ApiError> {
    let mut f = Fields::new(obj);
    f.only(&["name", "document", "sandbox", "initialBalance", "requestId"]);
    let request_id = f.string("requestId", false).and_then(|r| {
        let ok = (1..=ACCOUNT_REQUEST_ID_LEN_MAX).contains(&r.len())
            && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            f.fail("requestId", "must be 1 to 64 letters, digits, '-' or '_'");
        }
        ok.then(|| r.to_owned())
    });
    let name = holder_name(&mut f);
    let document = f.string("document", true).and_then(|d| match TaxId::parse(d) {
        Ok(t) => Some(t),
        Err(e) => {
            f.fail("document", e.to_string());
            None
        }
    });
    let sandbox = f.boolean("sandbox").unwrap_or(false);
    let opening = f.money_string("initialBalance").unwrap_or(Money::ZERO);
    finish(std::mem::take(&mut f.violations))?;
    let (Some(name), Some(document)) = (name, document) else {
        return Err(ApiError::internal("validated fields missing"));
    };
    Ok((AccountProfile { name, document, sandbox }, opening, request_id))
}

#[utoipa::path(
    post, path = "/admin/accounts", tag = "admin",
    request_body(content = super::schemas::CreateAccountRequest),
    responses(
        (status = 201, body = CreatedAccountResponse),
        (status = 200, description = "The same requestId made this account before: it, without its client secret", body = CreatedAccountResponse),
        (status = 400, body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
        (status = 409, description = "The requestId made an account of another name or document", body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
pub async fn create_account(
    _: Admin,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (profile, opening, request_id) = read_new_account(&request_object(&req, &bytes)?)?;
    if profile.sandbox && state.production {
        // A sandbox account mints money (`/sandbox/pix-in`): a production server has none.
        return Err(ApiError::Validation(vec![Violation::new(
            "sandbox",
            "is not allowed: a production server (--production) makes no sandbox accounts",
        )]));
    }
    if !opening.is_zero() && state.production {
        // Money in production comes from somewhere: an operator credit records where.
        return Err(ApiError::Validation(vec![Violation::new(
            "initialBalance",
            "is not allowed: a production server opens every account empty; fund it with an operator credit (POST /admin/accounts/{id}/adjustments)",
        )]));
    }
    let made = admin::create_account_once(
        &state.repo,
        profile,
        opening,
        None,
        state.clock.now(),
        request_id.as_deref(),
    )?;
    Ok(match made {
        admin::AccountMade::Created(created) => {
            tracing::info!(account = created.record.id.get(), "account created");
            HttpResponse::Created().json(CreatedAccountResponse {
                account_id: created.record.id.get(),
                client_id: created.record.client_id.to_string(),
                client_secret: Some(created.client_secret),
                webhook_secret: created.record.webhook_secret,
                replayed: false,
            })
        }
        admin::AccountMade::Replayed(record) => HttpResponse::Ok().json(CreatedAccountResponse {
            account_id: record.id.get(),
            client_id: record.client_id.to_string(),
            client_secret: None,
            webhook_secret: record.webhook_secret,
            replayed: true,
        }),
    })
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateView {
    fingerprint: String,
    subject: String,
    not_before: String,
    not_after: String,
    registered_at: String,
    revoked_at: Option<String>,
}

impl From<&CertificateRecord> for CertificateView {
    fn from(c: &CertificateRecord) -> Self {
        CertificateView {
            fingerprint: c.fingerprint.to_string(),
            subject: c.subject.clone(),
            not_before: iso(c.validity.not_before),
            not_after: iso(c.validity.not_after),
            registered_at: iso(c.registered_at),
            revoked_at: c.revoked_at.map(iso),
        }
    }
}

/// An account as operators see it (no secrets but the webhook secret's absence).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountView {
    account_id: u64,
    name: String,
    document: String,
    sandbox: bool,
    client_id: String,
    receiving_key: String,
    #[schema(value_type = super::schemas::SettingsView)]
    settings: Value,
    created_at: String,
    certificates: Vec<CertificateView>,
}

fn account_view(record: &AccountRecord, certs: &[CertificateRecord]) -> AccountView {
    AccountView {
        account_id: record.id.get(),
        name: record.profile.name.as_str().to_owned(),
        document: record.profile.document.to_string(),
        sandbox: record.profile.sandbox,
        client_id: record.client_id.to_string(),
        receiving_key: record.receiving_key.clone(),
        settings: settings_json(&record.settings),
        created_at: iso(record.created_at),
        certificates: certs.iter().map(CertificateView::from).collect(),
    }
}

pub fn settings_json(s: &AccountSettings) -> Value {
    serde_json::to_value(s).unwrap_or(Value::Null)
}

#[utoipa::path(
    get, path = "/admin/accounts/{id}", tag = "admin",
    params(("id" = u64, Path)),
    responses((status = 200, body = AccountView), (status = 401, body = ExtendedErrorBody), (status = 404, body = ExtendedErrorBody)),
    security(("admin" = []))
)]
pub async fn get_account(
    _: Admin,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = account_id(&path)?;
    let record = admin::account(&state.repo, id)?;
    let certs = state.repo.certificates_of(id)?;
    Ok(HttpResponse::Ok().json(account_view(&record, &certs)))
}

/// Reads one `{fixed, percent}` fee rule over the current one.
fn fee_rule(f: &mut Fields<'_>, current: FeeRule) -> FeeRule {
    f.only(&["fixed", "percent"]);
    let fixed = f.money_string("fixed").unwrap_or(current.fixed);
    let percent = match f.string("percent", false) {
        None => current.percent,
        Some(text) => Percent::parse(text).unwrap_or_else(|e| {
            f.fail("percent", e.to_string());
            current.percent
        }),
    };
    FeeRule { fixed, percent }
}

/// Applies the PATCH body to `current`, collecting every violation.
fn patch_settings(obj: &Map<String, Value>, current: AccountSettings) -> Result<AccountSettings, ApiError> {
    let mut f = Fields::new(obj);
    f.only(&["limits", "fees", "splitFrequency", "providerMinExpirationSeconds", "rateLimit"]);
    let mut next = current;
    if let Some(l) = f.object("limits", |l| {
        l.only(&["perTransaction", "daily", "nightly"]);
        let mut limits = current.limits;
        limits.per_transaction = l.money_string("perTransaction").unwrap_or(limits.per_transaction);
        limits.daily = l.money_string("daily").unwrap_or(limits.daily);
        limits.nightly = l.money_string("nightly").unwrap_or(limits.nightly);
        limits
    }) {
        next.limits = l;
    }
    if let Some(fees) = f.object("fees", |o| {
        o.only(&["cashOut", "cashIn", "dictPix", "refund"]);
        let mut fees = current.fees;
        let c = fees;
        fees.cash_out = o.object("cashOut", |r| fee_rule(r, c.cash_out)).unwrap_or(c.cash_out);
        fees.cash_in = o.object("cashIn", |r| fee_rule(r, c.cash_in)).unwrap_or(c.cash_in);
        fees.dict_pix = o.object("dictPix", |r| fee_rule(r, c.dict_pix)).unwrap_or(c.dict_pix);
        fees.refund = o.object("refund", |r| fee_rule(r, c.refund)).unwrap_or(c.refund);
        fees
    }) {
        next.fees = fees;
    }
    if let Some(text) = f.string("splitFrequency", false) {
        match SplitFrequency::parse(text) {
            Some(s) => next.split_frequency = s,
            None => f.fail("splitFrequency", "must be DAILY or HOURLY"),
        }
    }
    if let Some(s) = f.integer(
        "providerMinExpirationSeconds",
        u64::from(PROVIDER_MIN_EXPIRATION_SECONDS_MIN),
        u64::from(PROVIDER_MIN_EXPIRATION_SECONDS_MAX),
    ) {
        next.provider_min_expiration_seconds =
            u32::try_from(s).unwrap_or(PROVIDER_MIN_EXPIRATION_SECONDS_MAX);
    }
    // A number sets the account's own rate limit; null gives it back the server's.
    if obj.get("rateLimit").is_some_and(Value::is_null) {
        next.rate_limit = None;
    } else if let Some(n) = f.integer("rateLimit", 1, u64::from(ACCOUNT_RATE_LIMIT_MAX)) {
        next.rate_limit = Some(u32::try_from(n).unwrap_or(ACCOUNT_RATE_LIMIT_MAX));
    }
    finish(f.violations)?;
    Ok(next)
}

#[utoipa::path(
    patch, path = "/admin/accounts/{id}", tag = "admin",
    params(("id" = u64, Path)),
    request_body(content = super::schemas::PatchAccountRequest),
    responses((status = 200, description = "The account's settings as they now are", body = super::schemas::SettingsView), (status = 400, body = ExtendedErrorBody), (status = 404, body = ExtendedErrorBody)),
    security(("admin" = []))
)]
pub async fn patch_account(
    _: Admin,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = account_id(&path)?;
    let obj = request_object(&req, &bytes)?;
    let current = admin::account(&state.repo, id)?.settings;
    // Validate against the current settings first so a bad body changes nothing; the
    // update then re-applies the same body under the admin lock.
    patch_settings(&obj, current)?;
    let mut result = Ok(current);
    let record = admin::update_settings(&state.repo, id, |s| {
        result = patch_settings(&obj, s);
        result.as_ref().map_or(s, |n| *n)
    })?;
    result?;
    state.registry.settings_changed(id, record.settings);
    Ok(HttpResponse::Ok().json(settings_json(&record.settings)))
}

#[derive(Serialize, ToSchema)]
pub struct FingerprintResponse {
    fingerprint: String,
}

#[utoipa::path(
    post, path = "/admin/accounts/{id}/certificates", tag = "admin",
    params(("id" = u64, Path)),
    request_body(content = super::schemas::CertificateRequest),
    responses(
        (status = 201, description = "Registered", body = FingerprintResponse),
        (status = 200, description = "Already registered to this account", body = FingerprintResponse),
        (status = 400, body = ExtendedErrorBody), (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "Registered to another account, or revoked", body = ExtendedErrorBody)),
    security(("admin" = []))
)]
pub async fn register_certificate(
    _: Admin,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = account_id(&path)?;
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    f.only(&["pem"]);
    let pem = f.string("pem", true);
    let parsed = pem.and_then(|p| match certs::parse_pem(p) {
        Ok(c) => Some(c),
        Err(e) => {
            f.fail("pem", format!("is not a PEM certificate: {}", e.0));
            None
        }
    });
    finish(f.violations)?;
    let Some(parsed) = parsed else {
        return Err(ApiError::internal("validated pem missing"));
    };
    let (record, created) = admin::register_certificate(&state.repo, id, &parsed, state.clock.now())?;
    let body = FingerprintResponse { fingerprint: record.fingerprint.to_string() };
    Ok(if created { HttpResponse::Created().json(body) } else { HttpResponse::Ok().json(body) })
}

#[utoipa::path(
    delete, path = "/admin/accounts/{id}/certificates/{fingerprint}", tag = "admin",
    params(("id" = u64, Path), ("fingerprint" = String, Path, description = "64 lower-case hex characters")),
    responses((status = 204, description = "Revoked (or already revoked)"), (status = 404, body = ExtendedErrorBody)),
    security(("admin" = []))
)]
pub async fn revoke_certificate(
    _: Admin,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (raw_id, raw_fp) = path.into_inner();
    let id = account_id(&raw_id)?;
    let fp = Fingerprint::parse(&raw_fp)
        .ok_or_else(|| ApiError::NotFound("certificate not found for this account".into()))?;
    admin::revoke_certificate(&state.repo, id, &fp, state.clock.now())?;
    Ok(HttpResponse::NoContent().finish())
}

/// The required `name` member: an account holder's name.
fn holder_name(f: &mut Fields) -> Option<AccountName> {
    f.string("name", true).and_then(|n| match AccountName::parse(n) {
        Ok(n) => Some(n),
        Err(e) => {
            f.fail("name", e);
            None
        }
    })
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"accountId": 7, "name": "Ana Souza", "dictUpdates": 2}))]
pub struct RenameResponse {
    account_id: u64,
    name: String,
    /// How many of the account's keys this rename asked the DICT to update (0 off the DICT,
    /// and for the same name again).
    dict_updates: usize,
}

#[utoipa::path(
    put, path = "/admin/accounts/{id}/name", tag = "admin",
    params(("id" = u64, Path)),
    request_body(content = super::schemas::RenameRequest),
    responses((status = 200, body = RenameResponse), (status = 400, body = ExtendedErrorBody), (status = 404, body = ExtendedErrorBody)),
    security(("admin" = []))
)]
/// Admin: rename an account's holder; the DICT's entries of its keys follow.
pub async fn rename_account(
    _: Admin,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = account_id(&path)?;
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    f.only(&["name"]);
    let name = holder_name(&mut f);
    finish(f.violations)?;
    let Some(name) = name else { return Err(ApiError::internal("validated name missing")) };
    let current = admin::account(&state.repo, id)?;
    let dict = directory_of(&state, &current) == "DICT";
    let (record, dict_updates) = admin::rename(&state.repo, id, name, dict)?;
    state.registry.name_changed(id, record.profile.name.as_str().to_owned());
    tracing::info!(target: "pixgw::audit", account = id.get(), dict_updates, "account holder renamed");
    Ok(HttpResponse::Ok().json(RenameResponse {
        account_id: id.get(),
        name: record.profile.name.as_str().to_owned(),
        dict_updates,
    }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretResponse {
    client_secret: String,
}

#[utoipa::path(
    post, path = "/admin/accounts/{id}/secret", tag = "admin",
    params(("id" = u64, Path)),
    responses((status = 200, body = SecretResponse), (status = 404, body = ExtendedErrorBody)),
    security(("admin" = []))
)]
pub async fn rotate_secret(
    _: Admin,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = account_id(&path)?;
    let secret = admin::rotate_secret(&state.repo, id, state.clock.now())?;
    tracing::info!(account = id.get(), "client secret rotated");
    Ok(HttpResponse::Ok().json(SecretResponse { client_secret: secret }))
}

#[derive(Serialize, ToSchema)]
pub struct ClockResponse {
    now: String,
}

#[utoipa::path(
    post, path = "/admin/clock", tag = "admin",
    request_body(content = super::schemas::ClockRequest, description = "{set: ISO-8601} or {advanceSeconds: n}; only with --test-clock"),
    responses((status = 200, body = ClockResponse), (status = 400, body = ExtendedErrorBody), (status = 404, description = "The test clock is not enabled", body = ExtendedErrorBody)),
    security(("admin" = []))
)]
pub async fn move_clock(
    _: Admin,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    if !state.clock.is_adjustable() {
        return Err(ApiError::NotFound("no route matches this path".into()));
    }
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    f.only(&["set", "advanceSeconds"]);
    let set = f.string("set", false);
    let advance = match obj.get("advanceSeconds") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_i64() {
            Some(v) => Some(v),
            None => {
                f.fail("advanceSeconds", "must be an integer");
                None
            }
        },
        Some(_) => {
            f.fail("advanceSeconds", "must be an integer");
            None
        }
    };
    let target = set.and_then(|s| match DateTime::parse_from_rfc3339(s) {
        Ok(t) => Some(t.with_timezone(&Utc)),
        Err(_) => {
            f.fail("set", "must be an RFC 3339 date-time");
            None
        }
    });
    if set.is_some() == obj.get("advanceSeconds").is_some_and(|v| !v.is_null()) {
        f.fail("body", "must have exactly one of set and advanceSeconds");
    }
    finish(f.violations)?;
    let moved = match (target, advance) {
        (Some(t), _) => state.clock.set(t),
        (None, Some(s)) => state.clock.advance(s),
        (None, None) => return Err(ApiError::internal("validated clock body empty")),
    };
    let offset = moved.map_err(|e| match e {
        ClockError::Backwards => ApiError::Validation(vec![Violation::new("clock", "never moves backwards")]),
        ClockError::TooFar => ApiError::Validation(vec![Violation::new(
            "clock",
            format!("may move at most {CLOCK_ADVANCE_SECONDS_MAX} seconds at once"),
        )]),
        ClockError::Disabled => ApiError::NotFound("no route matches this path".into()),
    })?;
    state.repo.put_meta(CLOCK_OFFSET, &offset.to_be_bytes())?;
    // Whatever came due at the new time (expired transfers) happens before we answer, and
    // the webhooks due by then are on their way.
    state.registry.tick_all().await;
    let _ = state.webhooks.dispatcher.send(crate::webhooks::dispatcher::Wake).await;
    Ok(HttpResponse::Ok().json(ClockResponse { now: iso(state.clock.now()) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::testing::{object, violations};

    #[test]
    fn a_new_account_body_is_checked_field_by_field_at_once() {
        let body = r#"{"name": "", "document": "52998224724", "sandbox": "yes", "initialBalance": "1.005", "extra": 1}"#;
        let texts: Vec<String> =
            violations(read_new_account(&object(body)).err().unwrap()).into_iter().map(|(_, t)| t).collect();
        assert_eq!(
            texts,
            vec![
                "extra is not a known field",
                "name must not be empty",
                "document has invalid check digits",
                "sandbox must be a boolean",
                "initialBalance must have at most 2 decimal places",
            ]
        );
        let (profile, opening, _) = read_new_account(&object(
            r#"{"name": "Acme", "document": "11222333000181", "initialBalance": "10.50"}"#,
        ))
        .unwrap();
        assert_eq!((profile.name.as_str(), profile.sandbox), ("Acme", false));
        assert_eq!(opening, Money::parse("10.50").unwrap());
    }
}

/// Bytes of the backup stream sent per chunk.
const BACKUP_CHUNK_BYTES: usize = 256 * 1024;
/// Chunks queued between the thread that reads the store and the connection.
const BACKUP_CHUNKS_QUEUED_MAX: usize = 8;

/// A `Write` that hands its bytes, in chunks, to the response being streamed; it fails
/// once the client has gone, which ends the backup and its hold on the journal.
struct ChunkSender {
    tx: tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
}

impl ChunkSender {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(BACKUP_CHUNK_BYTES)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl std::io::Write for ChunkSender {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= BACKUP_CHUNK_BYTES {
            self.send()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

#[utoipa::path(
    get, path = "/admin/backup", tag = "admin",
    responses(
        (status = 200, description = "An online backup of the embedded store, streamed (docs/storage.md \"Backups of the embedded store\"); `pixgw backup` reads it", content_type = "application/octet-stream"),
        (status = 409, description = "The store is PostgreSQL, which keeps its own backups", body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
pub async fn backup(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let commit = std::sync::Arc::clone(&state.registry.deps().commit);
    if commit.journal().is_none() {
        return Err(ApiError::Conflict(
            "this server keeps its data in PostgreSQL: back it up with the database's own tools".into(),
        ));
    }
    let (tx, rx) = tokio::sync::mpsc::channel(BACKUP_CHUNKS_QUEUED_MAX);
    let clock = std::sync::Arc::clone(&state.clock);
    let failed = tx.clone();
    let sink = ChunkSender { tx, buf: Vec::with_capacity(BACKUP_CHUNK_BYTES) };
    std::thread::Builder::new()
        .name("pixgw-backup".into())
        .spawn(move || match crate::store::backup::write_backup(&commit, sink, || iso(clock.now())) {
            Ok((s, _)) => tracing::info!(
                pairs = s.pairs,
                records = s.records,
                through_seq = s.through_seq,
                "backup sent"
            ),
            Err(e) => {
                tracing::error!(error = %e, "backup failed");
                // The stream ends in an error, so the client never takes it for whole (it
                // would also miss the digest).
                let _ = failed.blocking_send(Err(std::io::Error::other(e.to_string())));
            }
        })
        .map_err(|e| ApiError::internal(format!("starting the backup thread: {e}")))?;
    let body =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    Ok(HttpResponse::Ok()
        .content_type("application/octet-stream")
        // Already dense; and compressing would cost the server's CPU.
        .insert_header((actix_web::http::header::CONTENT_ENCODING, "identity"))
        .streaming(body))
}

/// A key registered for an account.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyResponse {
    key: String,
    /// CPF, CNPJ, EMAIL, PHONE or EVP.
    key_type: String,
    registered_at: String,
    /// Whether it is the key the account's new charges carry.
    receiving: bool,
    /// Where the key is registered: `DICT` (the central bank's directory: a live account on
    /// `--rail spi`), `SIMULATOR` (the built-in simulator's directory: every sandbox account,
    /// and live accounts on `--rail sim`; no real institution can find it) or `GATEWAY`
    /// (this gateway alone: `--rail none`). Payments to it from this gateway's accounts
    /// settle on us in every case.
    #[schema(example = "SIMULATOR")]
    directory: &'static str,
}

/// The directory a key of `account` is registered in (see [`KeyResponse`]).
fn directory_of(state: &AppState, account: &AccountRecord) -> &'static str {
    match (account.profile.sandbox, state.keys.rail_name()) {
        (true, _) | (false, "sim") => "SIMULATOR",
        (false, "spi") => "DICT",
        (false, _) => "GATEWAY",
    }
}

fn key_response(
    k: &crate::store::KeyRecord,
    account: &AccountRecord,
    directory: &'static str,
) -> KeyResponse {
    KeyResponse {
        key: k.key.clone(),
        key_type: k.key_type.clone(),
        registered_at: iso(k.registered_at),
        receiving: k.key == account.receiving_key,
        directory,
    }
}

/// A key registration's body: `{key}` (its type read from it), or `{keyType: "EVP"}` for a
/// key the directory makes; `receiving` (default: true for an EVP) makes it the key the
/// account's new charges carry.
pub(super) fn read_key_request(obj: &Map<String, Value>) -> Result<(String, String, bool), ApiError> {
    use crate::domain::pix_key::parse_directory_key;
    let mut f = Fields::new(obj);
    f.only(&["key", "keyType", "receiving"]);
    let key = f.string("key", false).map(str::to_owned);
    let key_type = f.string("keyType", false).map(str::to_owned);
    let receiving = f.boolean("receiving");
    finish(std::mem::take(&mut f.violations))?;
    let fail = |field: &str, m: &str| ApiError::Validation(vec![Violation::new(field, m)]);
    let (key, key_type) = match (key, key_type) {
        (Some(k), t) => {
            let parsed = parse_directory_key(&k).map_err(|e| fail("key", &e.to_string()))?;
            let name = parsed.key_type.directory_name().to_owned();
            if t.as_deref().is_some_and(|t| t != name) {
                return Err(fail("keyType", "is not the type of the key"));
            }
            (parsed.key, name)
        }
        (None, Some(t)) if t == "EVP" => (String::new(), t),
        (None, Some(_)) => return Err(fail("key", "is required unless keyType is EVP")),
        (None, None) => return Err(fail("key", "give key, or keyType EVP")),
    };
    let receiving = receiving.unwrap_or(key_type == "EVP");
    Ok((key, key_type, receiving))
}

#[utoipa::path(
    post, path = "/admin/accounts/{id}/keys", tag = "admin",
    params(("id" = u64, Path)),
    request_body(content = super::schemas::KeyRequest),
    responses(
        (status = 201, description = "Registered in the directory of the account's rail, which `directory` names (the DICT on the SPI rail; a sandbox account's keys stay in the simulator's)", body = KeyResponse),
        (status = 400, description = "Not a key, or a CPF/CNPJ key that is not the holder's document", body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "The key is another account's, or the directory refused it", body = ExtendedErrorBody),
        (status = 503, description = "The directory did not answer; nothing was registered", body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
pub async fn register_key(
    _: Admin,
    req: HttpRequest,
    bytes: Bytes,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = account_id(&path)?;
    let (key, key_type, receiving) = read_key_request(&request_object(&req, &bytes)?)?;
    let account = admin::account(&state.repo, id)?;
    let document = account.profile.document.to_string();
    if matches!(key_type.as_str(), "CPF" | "CNPJ") && key != document {
        return Err(ApiError::Validation(vec![Violation::new(
            "key",
            "must be the holder's own document when it is a CPF or CNPJ",
        )]));
    }
    if !key.is_empty() {
        if let Some(owner) = state.repo.account_by_receiving_key(&key)? {
            if owner != id {
                return Err(ApiError::Conflict("the key is another account's".into()));
            }
        }
    }
    let now = state.clock.now();
    let registration = crate::rail::keys::Registration {
        key: key.clone(),
        key_type: key_type.clone(),
        account: id,
        holder_document: document,
        holder_name: account.profile.name.as_str().to_owned(),
        opened: account.created_at,
        nth: state.repo.keys_of(id)?.len(),
    };
    // The tax authority's register first: a holder it does not know under this name, or
    // whose CPF may not hold keys, gets none in the DICT.
    if !account.profile.sandbox {
        let holder = &registration;
        state.keys.holder_check(&holder.holder_document, &holder.holder_name).await.map_err(|e| match e {
            crate::rail::keys::HolderRefused::Unavailable(why) => {
                ApiError::Unavailable(crate::cause::Cause::msg(why))
            }
            refused => ApiError::Conflict(refused.to_string()),
        })?;
    }
    // A sandbox account's keys live in the simulator's world only.
    let (registered, cid) = if account.profile.sandbox {
        (if key.is_empty() { uuid::Uuid::new_v4().to_string() } else { key }, None)
    } else {
        state.keys.register(registration).await.map_err(|e| match e {
            crate::rail::keys::RegistrationError::Refused(why) => {
                ApiError::Conflict(format!("the directory refused the key: {why}"))
            }
            crate::rail::keys::RegistrationError::Unavailable(why) => {
                ApiError::Unavailable(crate::cause::Cause::msg(why))
            }
        })?
    };
    let (cid, request_id) = cid.unzip();
    let record =
        crate::store::KeyRecord { key: registered.clone(), key_type, registered_at: now, cid, request_id };
    state.repo.register_key(&account, &record, receiving)?;
    // The entry carries the name read before the DICT answered: a rename meanwhile wrote no
    // update for a key it did not see, so the key asks for one itself.
    if record.cid.is_some() {
        admin::follow_rename(&state.repo, id, &record.key, account.profile.name.as_str())?;
    }
    if receiving {
        state.registry.receiving_key_changed(id, registered.clone());
    }
    tracing::info!(account = id.get(), key = %registered, receiving, "key registered");
    let directory = directory_of(&state, &account);
    let account = AccountRecord {
        receiving_key: if receiving { registered } else { account.receiving_key.clone() },
        ..account
    };
    Ok(HttpResponse::Created().json(key_response(&record, &account, directory)))
}

#[utoipa::path(
    get, path = "/admin/accounts/{id}/keys", tag = "admin",
    params(("id" = u64, Path)),
    responses((status = 200, body = [KeyResponse]), (status = 404, body = ExtendedErrorBody)),
    security(("admin" = []))
)]
pub async fn list_keys(
    _: Admin,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = account_id(&path)?;
    let account = admin::account(&state.repo, id)?;
    let directory = directory_of(&state, &account);
    let keys: Vec<KeyResponse> =
        state.repo.keys_of(id)?.iter().map(|k| key_response(k, &account, directory)).collect();
    Ok(HttpResponse::Ok().json(keys))
}

#[utoipa::path(
    delete, path = "/admin/accounts/{id}/keys/{key}", tag = "admin",
    params(
        ("id" = u64, Path),
        ("key" = String, Path),
        ("reason" = Option<String>, Query, description = "USER_REQUESTED (default), ACCOUNT_CLOSURE, RECONCILIATION, FRAUD or RFB_VALIDATION: what the DICT is told"),
    ),
    responses(
        (status = 204, description = "Removed from the directory and from the account"),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "The account's receiving key: register another receiving key first", body = ExtendedErrorBody),
        (status = 503, body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
pub async fn remove_key(
    _: Admin,
    path: web::Path<(String, String)>,
    query: web::Query<std::collections::HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (raw_id, key) = path.into_inner();
    let id = account_id(&raw_id)?;
    let mut v = Vec::new();
    super::body::known_params(&query, &["reason"], &mut v);
    let reason = query.get("reason").map_or("USER_REQUESTED", String::as_str);
    if !crate::rail::keys::DELETE_REASONS.contains(&reason) {
        v.push(Violation::new(
            "reason",
            format!("must be one of {}", crate::rail::keys::DELETE_REASONS.join(", ")),
        ));
    }
    finish(v)?;
    let account = admin::account(&state.repo, id)?;
    if !state.repo.keys_of(id)?.iter().any(|k| k.key == key) {
        return Err(ApiError::NotFound("no such key registered for this account".into()));
    }
    if account.receiving_key == key {
        return Err(ApiError::Conflict(
            "this is the account's receiving key: register another receiving key first".into(),
        ));
    }
    if !account.profile.sandbox {
        state.keys.remove(&key, reason).await.map_err(|e| match e {
            crate::rail::keys::RegistrationError::Refused(why) => {
                ApiError::Conflict(format!("the directory refused: {why}"))
            }
            crate::rail::keys::RegistrationError::Unavailable(why) => {
                ApiError::Unavailable(crate::cause::Cause::msg(why))
            }
        })?;
    }
    state.repo.remove_key(id, &key)?;
    tracing::info!(account = id.get(), key, reason, "key removed");
    Ok(HttpResponse::NoContent().finish())
}

/// An operator's move, as answered.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdjustmentResponse {
    transaction_id: String,
    /// The numeric transaction id.
    id: u64,
    /// `OPERATOR_CREDIT` or `OPERATOR_DEBIT`.
    operation: &'static str,
    #[schema(value_type = f64)]
    amount: Value,
    reason: Option<String>,
    reference: String,
    /// The name of the admin token that made the move (absent on moves made before
    /// operators were recorded).
    operator: Option<String>,
    status: &'static str,
    processed_at: Option<String>,
}

#[utoipa::path(
    post, path = "/admin/accounts/{id}/adjustments", tag = "admin",
    params(("id" = u64, Path)),
    request_body(content = super::schemas::AdjustmentRequest),
    responses(
        (status = 201, description = "Made: a transaction of its own, final, with its webhook", body = AdjustmentResponse),
        (status = 200, description = "The same move again under its reference (same type, amount and reason): the first move, nothing moved", body = AdjustmentResponse),
        (status = 202, description = "A credit above --operator-credit-single-max, proposed: nothing moved; it is made when another operator sends the same request", body = Object),
        (status = 409, description = "The reference names another move (another type, amount or reason); nothing moved", body = ExtendedErrorBody),
        (status = 400, description = "Invalid body, or PIX_INSUFFICIENT_BALANCE for a debit", body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
pub async fn adjust(
    admin: Admin,
    req: HttpRequest,
    bytes: Bytes,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    use crate::domain::decide::{Adjustment, ADJUSTMENT_REASON_LEN_MAX, ADJUSTMENT_REFERENCE_LEN_MAX};
    let id = account_id(&path)?;
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    f.only(&["type", "amount", "reason", "reference"]);
    let credit = match f.string("type", true) {
        Some("CREDIT") => Some(true),
        Some("DEBIT") => Some(false),
        Some(_) => {
            f.fail("type", "must be CREDIT or DEBIT");
            None
        }
        None => None,
    };
    let value = match obj.get("amount") {
        None | Some(Value::Null) => {
            f.fail("amount", "is required (a decimal string such as \"100.00\")");
            None
        }
        Some(_) => f.money_string("amount").filter(|m| !m.is_zero()),
    };
    if value.is_none()
        && obj
            .get("amount")
            .is_some_and(|v| v.as_str().is_some_and(|t| Money::parse(t).is_ok_and(|m| m.is_zero())))
    {
        f.fail("amount", "must be at least 0.01");
    }
    let reason = f.text("reason", true, ADJUSTMENT_REASON_LEN_MAX).map(str::to_owned);
    let reference = f.text("reference", true, ADJUSTMENT_REFERENCE_LEN_MAX).map(str::to_owned);
    finish(std::mem::take(&mut f.violations))?;
    let (Some(credit), Some(value), Some(reason), Some(reference)) = (credit, value, reason, reference)
    else {
        return Err(ApiError::internal("validated fields missing"));
    };
    admin::account(&state.repo, id)?;
    let mut adjustment =
        Adjustment { credit, value, reason, reference: reference.clone(), operator: admin.name.clone() };
    // A large credit needs a second operator, unless its reference made it already (a replay
    // answers the move, below).
    let large = credit && value > state.operator_credit_single_max;
    if large && state.repo.stored_keys(id, Some(&adjustment.external_id()), None)?.external.is_none() {
        use crate::domain::decide::{second_operator, CreditApproval};
        let proposed = state.repo.credit_proposal(id, &reference)?;
        let waiting = |p: &crate::domain::decide::CreditProposal, status| {
            HttpResponse::Accepted().json(serde_json::json!({
                "status": "PROPOSED",
                "reference": p.reference,
                "amount": crate::domain::events::money_number(p.value),
                "reason": p.reason,
                "proposedBy": p.proposed_by,
                "proposedAt": iso(p.proposed_at),
                "message": format!(
                    "a credit above {} is made when another operator sends the same request{status}",
                    state.operator_credit_single_max.to_cents_string()
                ),
            }))
        };
        match second_operator(&adjustment, state.operator_credit_single_max, proposed, state.clock.now()) {
            CreditApproval::Proceed { operator } => adjustment.operator = operator,
            CreditApproval::Propose(p) => {
                state.repo.put_credit_proposal(id, &p)?;
                tracing::warn!(target: "pixgw::audit", account = id.get(), reference, operator = %admin.name, amount = %value, "an operator credit above the single-operator bound was proposed; another operator must send it too");
                return Ok(waiting(&p, ""));
            }
            CreditApproval::Wait(p) => return Ok(waiting(&p, "; the proposer cannot")),
            CreditApproval::Conflict(p) => {
                return Err(ApiError::Conflict(format!(
                    "the reference {reference} names a proposed credit of {} ({}); nothing moved",
                    p.value.to_cents_string(),
                    p.reason
                )))
            }
        }
    }
    let outcome = state
        .registry
        .get(id)?
        .send(crate::account::Adjust(adjustment.clone()))
        .await
        .map_err(|e| ApiError::Unavailable(crate::cause::Cause::msg(e.to_string())))??;
    let tx = &outcome.tx;
    if outcome.replayed && !adjustment.repeats(tx) {
        // Another move under a reference already used: nothing moved, and what it asked for
        // is kept in the log beside the move the reference names.
        tracing::warn!(
            target: "pixgw::audit", account = id.get(), reference, operator = %adjustment.operator,
            asked_credit = credit, asked_amount = %value, asked_reason = %adjustment.reason,
            made_local_id = tx.local_id, made_kind = tx.kind.as_str(), made_amount = %tx.value,
            made_by = tx.operator.as_deref().unwrap_or("unknown"),
            "operator adjustment refused: its reference names another move"
        );
        return Err(ApiError::Conflict(format!(
            "the reference {reference} names another move ({} {}); nothing moved",
            tx.kind.as_str(),
            tx.value.to_cents_string()
        )));
    }
    tracing::info!(account = id.get(), local_id = tx.local_id, credit, amount = %tx.value, reference, operator = tx.operator.as_deref().unwrap_or("unknown"), replayed = outcome.replayed, "operator adjustment");
    let body = AdjustmentResponse {
        transaction_id: tx.transaction_id.to_string(),
        id: tx.local_id,
        operation: tx.kind.as_str(),
        amount: crate::domain::events::money_number(tx.value),
        reason: tx.description.clone(),
        reference,
        operator: tx.operator.clone(),
        status: tx.status.as_str(),
        processed_at: tx.processed_at.map(iso),
    };
    Ok(if outcome.replayed { HttpResponse::Ok().json(body) } else { HttpResponse::Created().json(body) })
}

/// Query parameters of `GET /admin/rail/reconciliation`.
const RECONCILIATION_PARAMS: [&str; 2] = ["from", "to"];

/// A count and a sum (a decimal string, two places).
#[derive(Serialize, ToSchema)]
pub struct SumResponse {
    count: u64,
    amount: String,
}

/// Open items: how many, how much, and since when the oldest.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenResponse {
    count: u64,
    amount: String,
    oldest: Option<String>,
}

/// `GET /admin/rail/reconciliation`: the settlement account's movement by the ledger.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReconciliationResponse {
    /// This participant's ISPB.
    ispb: String,
    /// The rail live accounts pay on: `spi`, `sim` or `none`.
    rail: &'static str,
    from: String,
    to: String,
    /// Settled in the window with other institutions, by what the SPI reported.
    sent: SumResponse,
    returns_sent: SumResponse,
    received: SumResponse,
    returns_received: SumResponse,
    /// What the settlement account should have gained (negative: lost), received and
    /// returned-in less sent and returned-out: the figure to hold against the SPI's statement.
    net: String,
    /// Operators' moves in the window (funding; never through the SPI).
    operator_credits: SumResponse,
    operator_debits: SumResponse,
    /// Now, whatever the window: payouts waiting for the SPI's report, their amount blocked.
    payouts_pending: OpenResponse,
    /// Now: payments accepted from other institutions that the SPI has not reported settled.
    arrivals_accepted: OpenResponse,
    /// Now, whatever the window: every message the rail read and could not apply (a status
    /// of a payment that is not ours, an admi.002 naming no message of ours, a message that
    /// does not verify), oldest first, each with the message itself.
    #[schema(value_type = Vec<Object>)]
    unmatched: Vec<crate::rail::Unmatched>,
    /// Now: payouts that left for the SPI and have no final status a minute after their
    /// debit, past the SPI's own limit (its answer was lost), oldest first, each with the
    /// message kept for it. Closed by an operator's resolution, with the settlement's
    /// evidence (the catalogue has no status query to ask the SPI).
    payouts_aged: Vec<AgedPayout>,
}

/// A payout past the SPI's limit with no final status.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgedPayout {
    account_id: u64,
    transaction_id: String,
    /// Its end-to-end id (a refund: its return id), the id the SPI knows it by.
    id: String,
    value: String,
    created_at: String,
    /// The message kept for it: its `BizMsgIdr`, when it was built, postings that may have
    /// reached the SPI. Absent when none was kept (it never left).
    #[schema(value_type = Option<Object>)]
    message: Option<serde_json::Value>,
}

/// The payouts aged at `now` among `txs`, oldest first, with their kept messages.
pub(crate) fn aged_payouts(
    repo: &crate::store::Repo,
    txs: &[crate::domain::transaction::Transaction],
    now: DateTime<Utc>,
) -> Result<Vec<AgedPayout>, ApiError> {
    use crate::rail::spi::sent::{SentLog, ANSWER_WITHIN};
    let ours = crate::domain::transaction::gateway_ispb();
    let mut aged: Vec<&crate::domain::transaction::Transaction> =
        txs.iter().filter(|t| crate::domain::reconcile::aged_payout(t, ours, now, ANSWER_WITHIN)).collect();
    aged.sort_by_key(|t| (t.created_at, t.local_id));
    aged.into_iter()
        .map(|t| {
            let id = t.refund.as_ref().map_or_else(|| t.end_to_end_id.clone(), |r| r.rtr_id.clone());
            let message = repo
                .sent(&id)
                .map_err(|e| ApiError::internal(e.to_string()))?
                .map(|m| serde_json::json!({"msgId": m.msg_id, "builtAt": iso(m.built_at), "attempts": m.attempts}));
            Ok(AgedPayout {
                account_id: t.account_id.get(),
                transaction_id: t.transaction_id.to_string(),
                id,
                value: two_places(t.value.as_decimal()),
                created_at: iso(t.created_at),
                message,
            })
        })
        .collect()
}

fn two_places(d: rust_decimal::Decimal) -> String {
    format!("{:.2}", d.round_dp(2))
}

fn sum_response(s: crate::domain::reconcile::Sum) -> SumResponse {
    SumResponse { count: s.count, amount: two_places(s.amount) }
}

fn open_response(o: crate::domain::reconcile::Open) -> OpenResponse {
    OpenResponse { count: o.sum.count, amount: two_places(o.sum.amount), oldest: o.oldest.map(iso) }
}

#[utoipa::path(
    get, path = "/admin/rail/reconciliation", tag = "admin",
    params(
        ("from" = String, Query, description = "RFC 3339: the window's start (included)"),
        ("to" = String, Query, description = "RFC 3339: the window's end (excluded); at most 31 days after from"),
    ),
    responses(
        (status = 200, description = "The ledger's view of the settlement account over the window", body = ReconciliationResponse),
        (status = 400, body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
pub async fn reconciliation(
    _: Admin,
    query: web::Query<std::collections::HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    use crate::domain::reconcile::{report, WINDOW_DAYS_MAX};
    let q = query.into_inner();
    let mut v = Vec::new();
    super::body::known_params(&q, &RECONCILIATION_PARAMS, &mut v);
    let mut instant = |name: &str| match q.get(name).map(|t| DateTime::parse_from_rfc3339(t)) {
        Some(Ok(t)) => Some(t.with_timezone(&Utc)),
        Some(Err(_)) => {
            v.push(Violation::new(name, "must be an RFC 3339 date-time"));
            None
        }
        None => {
            v.push(Violation::new(name, "is required (an RFC 3339 date-time)"));
            None
        }
    };
    let (from, to) = (instant("from"), instant("to"));
    if let (Some(a), Some(b)) = (from, to) {
        if a >= b {
            v.push(Violation::new("from", "must be before to"));
        } else if b - a > chrono::Duration::days(WINDOW_DAYS_MAX) {
            v.push(Violation::new("to", format!("must be at most {WINDOW_DAYS_MAX} days after from")));
        }
    }
    finish(v)?;
    let (Some(from), Some(to)) = (from, to) else {
        return Err(ApiError::internal("validated fields missing"));
    };
    // Live accounts only: a sandbox account's payments never leave the simulator.
    let mut txs = Vec::new();
    for id in 1..state.repo.next_account_id()?.get() {
        let Some(id) = AccountId::new(id) else { continue };
        match state.repo.account(id)? {
            Some(a) if !a.profile.sandbox => txs.extend(state.repo.transactions_of(id)?),
            _ => {}
        }
    }
    let accepted = state.repo.incoming_all()?;
    let ours = crate::domain::transaction::gateway_ispb();
    let r = report(&txs, &accepted, from, to, ours);
    let payouts_aged = aged_payouts(&state.repo, &txs, state.clock.now())?;
    Ok(HttpResponse::Ok().json(ReconciliationResponse {
        ispb: ours.to_owned(),
        rail: state.keys.rail_name(),
        from: iso(from),
        to: iso(to),
        sent: sum_response(r.sent),
        returns_sent: sum_response(r.returns_sent),
        received: sum_response(r.received),
        returns_received: sum_response(r.returns_received),
        net: two_places(r.net),
        operator_credits: sum_response(r.operator_credits),
        operator_debits: sum_response(r.operator_debits),
        payouts_pending: open_response(r.payouts_pending),
        arrivals_accepted: open_response(r.arrivals_accepted),
        unmatched: state.repo.unmatched_items()?,
        payouts_aged,
    }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenKeyRotated {
    /// When the new key began to sign (RFC 3339).
    rotated_at: String,
    /// Until when tokens signed before still work, at the latest (their expiry).
    previous_tokens_valid_until: String,
}

/// One rotation at a time: each reads the key it replaces.
static ROTATING: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[utoipa::path(
    post, path = "/admin/token-key/rotation", tag = "admin",
    responses(
        (status = 200, description = "A new key signs tokens from now; tokens signed before keep working until they expire", body = TokenKeyRotated),
        (status = 401, body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
/// Rotates the key that signs access tokens. The new key and the one it replaces are stored
/// in one durable write before either is used; tokens of the replaced key verify until they
/// expire, and a second rotation drops them (so two in a row revoke every token at once).
pub async fn rotate_token_key(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    use crate::store::keys::{JWT_KEY, JWT_KEY_PREVIOUS};
    let _one = ROTATING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let current = state
        .repo
        .secret_meta(JWT_KEY)?
        .ok_or_else(|| ApiError::internal("no token-signing key is stored"))?;
    let fresh = crate::auth::secrets::random_bytes::<{ crate::auth::secrets::SECRET_BYTES }>()
        .map_err(|e| ApiError::internal(format!("random: {e}")))?;
    let mut batch = crate::store::Batch::default();
    state.repo.put_secret_meta_in(&mut batch, JWT_KEY, &fresh)?;
    state.repo.put_secret_meta_in(&mut batch, JWT_KEY_PREVIOUS, &current)?;
    state.repo.commit_batch(&batch)?;
    state.tokens.rotate(&fresh, &current);
    let now = state.clock.now();
    tracing::info!(target: "pixgw::audit", "the token-signing key was rotated");
    Ok(HttpResponse::Ok().json(TokenKeyRotated {
        rotated_at: iso(now),
        previous_tokens_valid_until: iso(
            now + chrono::Duration::seconds(crate::auth::tokens::TOKEN_TTL_SECONDS)
        ),
    }))
}

/// The state of what a resolution closes, as storage holds it now.
fn subject_state(
    state: &AppState,
    subject: &crate::domain::resolution::Subject,
) -> Result<crate::domain::resolution::SubjectState, ApiError> {
    use crate::domain::reconcile::{aged_payout, pending_payout};
    use crate::domain::resolution::{Subject, SubjectState};
    use crate::rail::spi::sent::ANSWER_WITHIN;
    let ours = crate::domain::transaction::gateway_ispb();
    Ok(match subject {
        Subject::Unmatched(digest) => match state.repo.unmatched_item(digest)? {
            None => SubjectState::Missing,
            Some(i) if i.resolution.is_some() => SubjectState::Closed,
            Some(_) => SubjectState::Open,
        },
        Subject::Payout(id) => match state.repo.payout_by_id(id)? {
            None => SubjectState::Missing,
            Some(t) if aged_payout(&t, ours, state.clock.now(), ANSWER_WITHIN) => SubjectState::Open,
            Some(t) if pending_payout(&t, ours) => SubjectState::NotAged,
            Some(_) => SubjectState::Closed,
        },
    })
}

/// The one mapping of a resolution's refusals to the interface's errors.
fn resolution_error(r: crate::domain::resolution::Refusal) -> ApiError {
    use crate::domain::resolution::Refusal;
    match r {
        Refusal::Missing(_) => ApiError::NotFound(r.to_string()),
        Refusal::Evidence => ApiError::Validation(vec![Violation::new("evidence", r.to_string())]),
        Refusal::WrongOutcome(why) => ApiError::Validation(vec![Violation::new("outcome", why)]),
        Refusal::Closed(_) | Refusal::NotAged | Refusal::Approved | Refusal::SameOperator(_) => {
            ApiError::Conflict(r.to_string())
        }
    }
}

#[utoipa::path(
    post, path = "/admin/rail/resolutions", tag = "admin",
    request_body(content = super::schemas::ResolutionRequest),
    responses(
        (status = 201, description = "Proposed: nothing changes until another operator approves", body = Object),
        (status = 400, body = ExtendedErrorBody),
        (status = 404, description = "No such unmatched item or payout", body = ExtendedErrorBody),
        (status = 409, description = "Closed already, or a payout still within the SPI's limit", body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
/// Proposes how to close an unmatched rail item or an aged payout, with the evidence.
pub async fn propose_resolution(
    admin: Admin,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    use crate::domain::resolution::{propose, Outcome, Subject, EVIDENCE_LEN_MAX};
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    f.only(&["unmatched", "payout", "outcome", "evidence"]);
    let subject = match (f.text("unmatched", false, 64), f.text("payout", false, 64)) {
        (Some(d), None) => Some(Subject::Unmatched(d.to_owned())),
        (None, Some(id)) => Some(Subject::Payout(id.to_owned())),
        _ => {
            f.fail("unmatched", "give exactly one of unmatched (an item's digest) and payout (its id)");
            None
        }
    };
    let outcome = match f.string("outcome", true) {
        Some(o) => Outcome::parse(o).or_else(|| {
            f.fail("outcome", "must be SETTLED, FAILED or DISMISSED");
            None
        }),
        None => None,
    };
    let evidence = f.text("evidence", true, EVIDENCE_LEN_MAX).map(str::to_owned);
    finish(std::mem::take(&mut f.violations))?;
    let (Some(subject), Some(outcome), Some(evidence)) = (subject, outcome, evidence) else {
        return Err(ApiError::internal("validated fields missing"));
    };
    let now = state.clock.now();
    let id = uuid::Uuid::new_v4().to_string();
    let subject_now = subject_state(&state, &subject)?;
    let r =
        propose(id, subject, outcome, &evidence, &admin.name, subject_now, now).map_err(resolution_error)?;
    state.repo.put_resolution(&r, None).await?;
    tracing::warn!(target: "pixgw::audit", resolution = %r.id, subject = ?r.subject, outcome = r.outcome.as_str(), operator = %admin.name, evidence = %r.evidence, "a rail resolution was proposed; another operator must approve it");
    Ok(HttpResponse::Created().json(&r))
}

#[utoipa::path(
    post, path = "/admin/rail/resolutions/{id}/approval", tag = "admin",
    params(("id" = String, Path)),
    responses(
        (status = 200, description = "Approved by another operator: it took effect (the payout's final status; the item closed)", body = Object),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "Approved already, proposed by this same operator, or its subject closed meanwhile", body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
/// Approves another operator's proposal, which then takes effect.
pub async fn approve_resolution(
    admin: Admin,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    use crate::domain::resolution::{approve, Subject};
    let Some(proposed) = state.repo.resolution(&path)? else {
        return Err(ApiError::NotFound(format!("no resolution {}", path.as_str())));
    };
    let subject_now = subject_state(&state, &proposed.subject)?;
    let now = state.clock.now();
    let r = approve(&proposed, &admin.name, subject_now, now).map_err(resolution_error)?;
    match &r.subject {
        Subject::Unmatched(digest) => {
            let mut item =
                state.repo.unmatched_item(digest)?.ok_or_else(|| ApiError::internal("item gone"))?;
            item.resolution = Some(crate::rail::Resolved {
                id: r.id.clone(),
                outcome: r.outcome.as_str().to_owned(),
                proposed_by: r.proposed_by.clone(),
                approved_by: admin.name.clone(),
                approved_at: now,
                evidence: r.evidence.clone(),
            });
            state.repo.put_resolution(&r, Some(&item)).await?;
        }
        Subject::Payout(_) => {
            // Recorded approved first: a start after a crash applies it again.
            state.repo.put_resolution(&r, None).await?;
            crate::account::apply_resolution(&state.registry, &r).await.map_err(|e| {
                ApiError::Unavailable(crate::cause::Cause::msg(format!(
                    "approved; its effect is applied at the next start: {e}"
                )))
            })?;
        }
    }
    tracing::warn!(target: "pixgw::audit", resolution = %r.id, subject = ?r.subject, outcome = r.outcome.as_str(), proposed_by = %r.proposed_by, approved_by = %admin.name, "a rail resolution was approved and took effect");
    Ok(HttpResponse::Ok().json(&r))
}

#[utoipa::path(
    get, path = "/admin/rail/resolutions", tag = "admin",
    responses((status = 200, description = "Every resolution, proposed or approved, oldest first", body = Object)),
    security(("admin" = []))
)]
/// Every resolution of rail items, proposed or approved, with who proposed and approved it
/// and the evidence.
pub async fn list_resolutions(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(serde_json::json!({ "resolutions": state.repo.resolutions()? })))
}

#[utoipa::path(
    post, path = "/admin/rail/release", tag = "admin",
    responses(
        (status = 200, description = "The rail runs: `{released: true, heldBecause}`, or `{released: false}` when it was not held", body = Object),
        (status = 409, description = "This node does not run the SPI rail", body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
/// Releases the SPI rail of a store made by a restore or a migration, once no other node
/// reads this ISPB's streams: it starts reading and its waiting payouts go out.
pub async fn release_rail(admin: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    use crate::store::keys::RAIL_HELD;
    let Some(hold) = &state.rail_hold else {
        return Err(ApiError::Conflict("this node does not run the SPI rail".into()));
    };
    let why = state.repo.meta(RAIL_HELD)?.map(|v| String::from_utf8_lossy(&v).into_owned());
    if why.is_some() {
        // Durable before the rail runs: a restart does not hold it again.
        state.repo.delete_meta(RAIL_HELD)?;
    }
    let released = hold.is_held();
    hold.release();
    tracing::warn!(target: "pixgw::audit", operator = %admin.name, held_because = why.as_deref(), released, "the SPI rail was released by an operator");
    Ok(HttpResponse::Ok().json(serde_json::json!({"released": released, "heldBecause": why})))
}
