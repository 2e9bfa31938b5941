//! Fraud marks (DICT API 2.12.1, `/fraud-markers/`), the operator's: marking a person (and
//! one of its keys) whose account was used for fraud, cancelling a mark of ours, and reading a
//! person's marks. The DICT holds them; every participant's lookups then carry their counts,
//! which the risk rule reads (domain::risk).

use std::collections::HashMap;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::auth::Admin;
use super::body::{known_params, request_object, Fields};
use super::error::{ApiError, ExtendedErrorBody, Violation};
use super::AppState;
use crate::rail::spi::fraud::{FraudMarker, FRAUD_TYPES};

/// Characters of a mark's `reference` (its idempotency key).
pub const FRAUD_REFERENCE_LEN_MAX: usize = 64;

fn marker_json(m: &FraudMarker) -> Value {
    json!({
        "id": m.id,
        "taxId": m.tax_id,
        "key": m.key,
        "fraudType": m.fraud_type,
        "status": m.status,
        "createdAt": crate::domain::events::iso(m.created),
        "lastModified": crate::domain::events::iso(m.modified),
    })
}

fn digits_document(text: &str) -> bool {
    matches!(text.len(), 11 | 14) && text.bytes().all(|b| b.is_ascii_digit())
}

/// Mark a person for fraud
///
/// Marks a person (a CPF or CNPJ) and, when given, one of its keys in the DICT as used for
/// fraud: every participant's lookups of them carry the mark from then on.
#[utoipa::path(
    post, operation_id = "mark_fraud", path = "/admin/fraud-markers", tag = "admin",
    request_body(content = super::schemas::FraudMarkRequest),
    responses(
        (status = 201, description = "The mark, REGISTERED (the same reference again answers the same mark)", body = Object),
        (status = 400, body = ExtendedErrorBody),
        (status = 409, description = "The DICT refused it, or this server has no DICT", body = ExtendedErrorBody),
        (status = 503, body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
pub async fn mark(
    _: Admin,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    f.only(&["taxId", "key", "fraudType", "reference"]);
    let tax_id = f.string("taxId", true).map(str::to_owned);
    if tax_id.as_deref().is_some_and(|t| !digits_document(t)) {
        f.fail("taxId", "must be a CPF (11 digits) or a CNPJ (14 digits)");
    }
    let key = f.text("key", false, crate::rail::spi::dict::KEY_LEN_MAX).map(str::to_owned);
    let fraud_type = f.string("fraudType", true).map(str::to_owned);
    if fraud_type.as_deref().is_some_and(|t| !FRAUD_TYPES.contains(&t)) {
        f.fail("fraudType", format!("must be one of {}", FRAUD_TYPES.join(", ")));
    }
    let reference = f.text("reference", true, FRAUD_REFERENCE_LEN_MAX).map(str::to_owned);
    let (Some(tax_id), Some(fraud_type), Some(reference), true) =
        (tax_id, fraud_type, reference, f.violations.is_empty())
    else {
        return Err(ApiError::Validation(f.violations));
    };
    let asked = FraudMarker {
        tax_id,
        key,
        fraud_type,
        id: String::new(),
        status: String::new(),
        created: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        modified: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
    };
    let m = state.keys.mark_fraud(asked, &reference).await.map_err(ApiError::Dict)?;
    tracing::warn!(target: "pixgw::audit", mark = m.id, tax_id = m.tax_id, key = ?m.key, fraud_type = m.fraud_type, reference, "a fraud mark was made in the DICT");
    Ok(HttpResponse::Created().json(marker_json(&m)))
}

/// Cancel a fraud mark
///
/// Cancels a mark this participant made; the DICT's counts leave it out from then on.
#[utoipa::path(
    post, operation_id = "cancel_fraud_mark", path = "/admin/fraud-markers/{id}/cancel", tag = "admin",
    params(("id" = String, Path, description = "The DICT's id of the mark")),
    responses(
        (status = 200, description = "The mark, CANCELLED", body = Object),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, body = ExtendedErrorBody),
        (status = 503, body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
pub async fn cancel(
    _: Admin,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let m = state.keys.cancel_fraud_mark(&path).await.map_err(ApiError::Dict)?;
    tracing::warn!(target: "pixgw::audit", mark = m.id, "a fraud mark was cancelled in the DICT");
    Ok(HttpResponse::Ok().json(marker_json(&m)))
}

/// List a person's fraud marks
///
/// The marks the DICT holds for a person (every participant's), and of one of its keys when
/// `key` is given.
#[utoipa::path(
    get, operation_id = "list_fraud_marks", path = "/admin/fraud-markers", tag = "admin",
    params(("taxId" = String, Query, description = "A CPF or CNPJ, digits"), ("key" = Option<String>, Query)),
    responses(
        (status = 200, description = "The marks", body = Object),
        (status = 400, body = ExtendedErrorBody),
        (status = 409, body = ExtendedErrorBody),
        (status = 503, body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
pub async fn list(
    _: Admin,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let mut v = Vec::new();
    known_params(&q, &["taxId", "key"], &mut v);
    let tax_id = q.get("taxId").cloned().unwrap_or_default();
    if !digits_document(&tax_id) {
        v.push(Violation::new("taxId", "must be a CPF (11 digits) or a CNPJ (14 digits)"));
    }
    if !v.is_empty() {
        return Err(ApiError::Validation(v));
    }
    let marks =
        state.keys.fraud_marks(&tax_id, q.get("key").map(String::as_str)).await.map_err(ApiError::Dict)?;
    Ok(HttpResponse::Ok().json(json!({ "data": marks.iter().map(marker_json).collect::<Vec<_>>() })))
}
