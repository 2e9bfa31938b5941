//! The payload locations of dynamic QR codes: what the payer's institution reads when its
//! client scans a cob's or a cobv's dynamic code (the API Pix's `GET /{pixUrlAccessToken}`
//! and `GET /cobv/{pixUrlAccessToken}`) or a recurrence's (journey 2: `GET
//! /rec/{recUrlAccessToken}`), served here under `/qr/`, with the keys that verify them at
//! `/qr/jwks` (the JWS header's `jku`).
//!
//! A payload is a compact JWS (RFC 7515) whose JOSE header names the signing certificate
//! as the Pix security manual asks: `alg` RS256, `kid`, `jku` on the locations' own host,
//! `x5t` (SHA-1 of the certificate, base64url) and `x5t#S256`. The JWK Set publishes the
//! same `kid` and thumbprints with the key's `n` and `e` and the certificate chain (`x5c`,
//! leaf first). The routes are open (a location is a capability URL: its token is the
//! only secret) and read only; a location of a charge that can no longer be paid answers
//! 410, one that names no charge 404, and a server with no location host configured
//! answers 404 everywhere here. Which certificate signs: `--payload-cert`/`--payload-key`,
//! or else the SPI rail's signing certificate.

use std::sync::Arc;

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use base64::Engine;
use chrono::NaiveDate;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::error::{ApiError, Violation};
use super::{iso, AppState};
use crate::domain::brcode;
use crate::domain::cobv::payment_day;
use crate::domain::location::{opens, token, token_local_id, ChargeKind, LocationHost, RecLocations};
use crate::domain::transaction::Transaction;
use crate::rail::spi::pki::{Certificate, Signer};

/// The JWS media type the API Pix answers payloads with.
pub const JOSE_CONTENT_TYPE: &str = "application/jose";

/// Signs and names the payload locations of this gateway's charges.
pub struct Locations {
    host: LocationHost,
    signer: Arc<Signer>,
    /// The JOSE header, JSON then base64url: the same for every payload.
    header: String,
    jwks: Value,
    /// The key of the locations' MACs (`domain::location`), made on first start.
    mac_key: Vec<u8>,
    /// The recurrences' locations, under the same host and key.
    rec: RecLocations,
}

impl std::fmt::Debug for Locations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locations").field("host", &self.host).finish()
    }
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Locations {
    /// `chain`: the signer's certificate and those that certify it, leaf first (the
    /// signer's own certificate is put first when the chain lacks it).
    pub fn new(
        host: LocationHost,
        signer: Arc<Signer>,
        chain: Vec<Certificate>,
        mac_key: Vec<u8>,
    ) -> Result<Locations, String> {
        let leaf = &signer.cert;
        let (n, e) = leaf.rsa_components().ok_or("the payload certificate's key is not RSA")?;
        let x5t = b64url(ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &leaf.der).as_ref());
        let x5t_s256 = b64url(&Sha256::digest(&leaf.der));
        let mut certs: Vec<&Certificate> = vec![leaf];
        certs.extend(chain.iter().filter(|c| c.der != leaf.der));
        let x5c: Vec<String> =
            certs.iter().map(|c| base64::engine::general_purpose::STANDARD.encode(&c.der)).collect();
        let header = json!({
            "alg": "RS256",
            "typ": "JWS",
            "kid": x5t_s256,
            "jku": host.jwks_url(),
            "x5t": x5t,
            "x5t#S256": x5t_s256,
        });
        let jwks = json!({"keys": [{
            "kty": "RSA",
            "use": "sig",
            "key_ops": ["verify"],
            "alg": "RS256",
            "kid": x5t_s256,
            "n": b64url(&n),
            "e": b64url(&e),
            "x5t": x5t,
            "x5t#S256": x5t_s256,
            "x5c": x5c,
        }]});
        let rec = RecLocations::new(host.clone(), mac_key.clone());
        Ok(Locations { host, signer, header: b64url(header.to_string().as_bytes()), jwks, mac_key, rec })
    }

    fn kind(t: &Transaction) -> Option<ChargeKind> {
        if t.is_cob(false) {
            Some(ChargeKind::Cob)
        } else if t.is_cob(true) {
            Some(ChargeKind::Cobv)
        } else {
            None
        }
    }

    /// The location of a cob or cobv; `None` for any other transaction.
    pub fn location(&self, t: &Transaction) -> Option<String> {
        let kind = Self::kind(t)?;
        let txid = &t.charge.as_ref()?.txid;
        Some(self.host.location(kind, &token(&self.mac_key, kind, t.local_id, txid)))
    }

    /// The dynamic BR Code of a cob or cobv: its location, under the merchant name and city
    /// of its static code.
    pub fn dynamic_code(&self, t: &Transaction) -> Option<String> {
        let location = self.location(t)?;
        let code = brcode::parse(&t.charge.as_ref()?.pix_code).ok()?;
        Some(brcode::generate_dynamic(&location, &code.merchant_name, &code.merchant_city))
    }

    /// The JWK Set the payloads verify against (what `GET /qr/jwks` answers).
    pub fn jwks(&self) -> &Value {
        &self.jwks
    }

    /// The compact JWS of `payload`.
    pub fn sign(&self, payload: &Value) -> String {
        let input = format!("{}.{}", self.header, b64url(payload.to_string().as_bytes()));
        let signature = self.signer.sign(input.as_bytes());
        format!("{input}.{}", b64url(&signature))
    }

    /// The charge of kind `kind` a token opens, if any.
    fn charge(&self, state: &AppState, kind: ChargeKind, token: &str) -> Result<Transaction, ApiError> {
        let missing = || ApiError::NotFound("no charge at this location".into());
        let local = token_local_id(token).ok_or_else(missing)?;
        let t = state.repo.transaction(local)?.ok_or_else(missing)?;
        let txid = t.charge.as_ref().map(|c| c.txid.as_str()).unwrap_or_default();
        if Self::kind(&t) != Some(kind) || !opens(&self.mac_key, token, kind, local, txid) {
            return Err(missing());
        }
        Ok(t)
    }
}

/// A cob's or cobv's view with its dynamic code (`pixCopiaECola`), where locations are
/// served: the code any bank's app reads the charge from. `location` keeps the static code
/// the interface fixes.
pub fn with_code(state: &AppState, mut view: Value, t: &Transaction) -> Value {
    if let Some(code) = state.locations.as_deref().and_then(|l| l.dynamic_code(t)) {
        view["pixCopiaECola"] = json!(code);
    }
    view
}

fn locations(state: &AppState) -> Result<&Locations, ApiError> {
    state
        .locations
        .as_deref()
        .ok_or_else(|| ApiError::NotFound("this server serves no payload locations".into()))
}

fn jose(body: String) -> HttpResponse {
    // A payload says what the charge asks now (a cobv's price changes by the day): never
    // cached by anyone between.
    HttpResponse::Ok()
        .content_type(JOSE_CONTENT_TYPE)
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(body)
}

/// A view without what only the receiver's API shows (the location, the static code).
fn payload_of(mut view: Value, now: chrono::DateTime<chrono::Utc>) -> Value {
    if let Some(m) = view.as_object_mut() {
        m.remove("loc");
        m.remove("location");
        m.remove("pixCopiaECola");
        m.remove("valorDoDia");
        m.remove("pix");
    }
    view["calendario"]["apresentacao"] = json!(iso(now));
    view
}

#[utoipa::path(
    get, path = "/qr/{token}", tag = "payload-locations",
    params(("token" = String, Path, description = "The location's token (the pixUrlAccessToken of the API Pix)")),
    responses(
        (status = 200, description = "The cob's payload (CobPayload of the API Pix), a compact JWS", content_type = "application/jose", body = String),
        (status = 404, description = "No charge at this location", body = super::error::SimpleErrorBody),
        (status = 410, description = "The cob can no longer be paid (paid, removed or expired)", body = super::error::SimpleErrorBody),
    ),
)]
pub async fn cob_payload(
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let locations = locations(&state)?;
    let t = locations.charge(&state, ChargeKind::Cob, &path.into_inner())?;
    let now = state.clock.now();
    let expires = t.charge.as_ref().map(|c| c.expires_at);
    if super::cob::status(&t) != "ATIVA" || expires.is_some_and(|e| now >= e) {
        return Err(ApiError::Gone("this cob can no longer be paid".into()));
    }
    Ok(jose(locations.sign(&payload_of(super::cob::view(&t), now))))
}

#[derive(Debug, Deserialize)]
pub struct CobvPayloadQuery {
    #[serde(rename = "codMun")]
    cod_mun: Option<String>,
    #[serde(rename = "DPP")]
    dpp: Option<String>,
}

#[utoipa::path(
    get, path = "/qr/cobv/{token}", tag = "payload-locations",
    params(
        ("token" = String, Path, description = "The location's token (the pixUrlAccessToken of the API Pix)"),
        ("codMun" = Option<String>, Query, description = "The payer's IBGE municipality code (7 digits); the business-day calendar is national, so it changes no price"),
        ("DPP" = Option<String>, Query, description = "The day the payer means to pay (YYYY-MM-DD), today or later within the cobv's validity; default today"),
    ),
    responses(
        (status = 200, description = "The cobv's payload (CobVPayload of the API Pix) priced on DPP, a compact JWS", content_type = "application/jose", body = String),
        (status = 400, description = "codMun or DPP breaks its rule", body = super::error::SimpleErrorBody),
        (status = 404, description = "No charge at this location", body = super::error::SimpleErrorBody),
        (status = 410, description = "The cobv can no longer be paid (paid, removed, or past its validity)", body = super::error::SimpleErrorBody),
    ),
)]
pub async fn cobv_payload(
    path: web::Path<String>,
    query: web::Query<CobvPayloadQuery>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let locations = locations(&state)?;
    let t = locations.charge(&state, ChargeKind::Cobv, &path.into_inner())?;
    let now = state.clock.now();
    let today = payment_day(now);
    let Some(terms) = t.cobv().map(|v| v.terms.clone()) else {
        return Err(ApiError::NotFound("no charge at this location".into()));
    };
    if t.is_final() || today > terms.last_day() {
        return Err(ApiError::Gone("this cobv can no longer be paid".into()));
    }
    let mut violations = Vec::new();
    if query.cod_mun.as_deref().is_some_and(|c| c.len() != 7 || !c.bytes().all(|b| b.is_ascii_digit())) {
        violations.push(Violation::new("codMun", "must be 7 digits (an IBGE municipality code)"));
    }
    let day = match query.dpp.as_deref() {
        None => Some(today),
        Some(text) => match NaiveDate::parse_from_str(text, "%Y-%m-%d") {
            Err(_) => {
                violations.push(Violation::new("DPP", "must be a date, YYYY-MM-DD"));
                None
            }
            Ok(d) if d < today => {
                violations.push(Violation::new("DPP", "is before today"));
                None
            }
            Ok(d) if d > terms.last_day() => {
                violations.push(Violation::new("DPP", "is after the last day the cobv may be paid"));
                None
            }
            Ok(d) => Some(d),
        },
    };
    let price = day.map(|d| terms.price(d));
    let price = match price {
        Some(Ok(p)) if violations.is_empty() => p,
        Some(Err(_)) if violations.is_empty() => {
            return Err(ApiError::Gone("this cobv can no longer be paid".into()));
        }
        _ => return Err(ApiError::Validation(violations)),
    };
    let mut payload = payload_of(super::cobv::view(&t), now);
    payload["valor"] = json!({
        "original": price.original.to_cents_string(),
        "multa": price.fine.to_cents_string(),
        "juros": price.interest.to_cents_string(),
        "abatimento": price.abatement.to_cents_string(),
        "desconto": price.discount.to_cents_string(),
        "final": price.due.to_cents_string(),
    });
    if let Some(account) = state.repo.account(t.account_id)? {
        let document = account.profile.document.as_str().to_owned();
        let kind = if document.len() == 11 { "cpf" } else { "cnpj" };
        payload["recebedor"] = json!({"nome": account.profile.name.as_str(), kind: document});
    }
    Ok(jose(locations.sign(&payload)))
}

#[utoipa::path(
    get, path = "/qr/rec/{token}", tag = "payload-locations",
    params(("token" = String, Path, description = "The location's token (the recUrlAccessToken of the API Pix)")),
    responses(
        (status = 200, description = "The recurrence's payload (RecPayload of the API Pix), a compact JWS", content_type = "application/jose", body = String),
        (status = 404, description = "No recurrence at this location (or the location serves none)", body = super::error::SimpleErrorBody),
        (status = 410, description = "The recurrence is no longer to be authorised (authorised, refused, expired or cancelled)", body = super::error::SimpleErrorBody),
    ),
)]
pub async fn rec_payload(
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let locations = locations(&state)?;
    let missing = || ApiError::NotFound("no recurrence at this location".into());
    let (account, local) = locations.rec.opens(&path.into_inner()).ok_or_else(missing)?;
    let account = crate::domain::ids::AccountId::new(account).ok_or_else(missing)?;
    let id_rec = state.repo.locrec(account, local)?.and_then(|l| l.id_rec).ok_or_else(missing)?;
    let rec_local = crate::domain::rec::rec_local(&id_rec).ok_or_else(missing)?;
    let rec = state.repo.rec(account, rec_local)?.filter(|r| r.id == id_rec).ok_or_else(missing)?;
    if rec.status != crate::domain::rec::RecStatus::Criada {
        return Err(ApiError::Gone("this recurrence is no longer to be authorised".into()));
    }
    Ok(jose(locations.sign(&rec_payload_of(rec.to_json()))))
}

/// The API Pix's `RecPayload` of a recurrence's view: what it asks of the payer, without
/// what only the receiver sees (its location and code, its status's details).
fn rec_payload_of(mut view: Value) -> Value {
    if let Some(m) = view.as_object_mut() {
        for member in ["loc", "dadosQR", "pagador", "ativacao", "encerramento", "status"] {
            m.remove(member);
        }
    }
    view
}

#[utoipa::path(
    get, path = "/qr/jwks", tag = "payload-locations",
    responses(
        (status = 200, description = "The JWK Set that verifies the payloads (the JWS header's jku)", body = Object),
        (status = 404, description = "This server serves no payload locations", body = super::error::SimpleErrorBody),
    ),
)]
pub async fn jwks(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let locations = locations(&state)?;
    Ok(HttpResponse::Ok().insert_header((header::CACHE_CONTROL, "max-age=300")).json(locations.jwks()))
}
