//! MED routes: the sandbox's side of a MED (`POST /sandbox/med`, `POST
//! /sandbox/med/{id}/analyze`, and beyond the interface `POST /sandbox/med/{id}/cancel`) and
//! the client's list, `GET /api/med`, with its filters, paging and rate limit
//! (interface.md "Life cycles"; decisions.md "MED").

use std::collections::HashMap;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::ask::ask;
use super::auth::Caller;
use super::body::{int_param, known_params, request_object, Fields};
use super::error::{ApiError, ExtendedErrorBody, Violation};
use super::AppState;
use crate::account::{CloseMed, OpenMed};
use crate::domain::listing::PageInfo;
use crate::domain::med::{
    cause_known, AnalysisResult, Med, MedStatus, DEFAULT_CAUSE, FRAUD_CAUSES, MED_TEXT_LEN_MAX,
    OPERATIONAL_CAUSES,
};

/// `GET /api/med` calls per account in any [`MED_LIST_WINDOW_SECONDS`].
pub const MED_LIST_PER_WINDOW_MAX: usize = 120;
pub const MED_LIST_WINDOW_SECONDS: i64 = 60;
pub const MED_PAGE_SIZE_MAX: u32 = 100;
const MED_PAGE_SIZE_DEFAULT: u32 = 20;
const MED_PARAMS: [&str; 6] = ["status", "isReconciled", "startDate", "endDate", "page", "pageSize"];

#[utoipa::path(
    post, operation_id = "open_med_case", path = "/sandbox/med", tag = "sandbox",
    request_body(content = super::schemas::MedOpenRequest),
    responses(
        (status = 201, description = "The MED, RECEIVED; the disputed amount (capped at what is available) is blocked", body = super::schemas::MedView),
        (status = 400, body = ExtendedErrorBody),
        (status = 403, body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn open(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    let e2e = med_end_to_end(&obj, &mut f);
    let cause = f.text("cause", false, 64).unwrap_or(DEFAULT_CAUSE).to_owned();
    if !cause_known(&cause) {
        let known: Vec<&str> = FRAUD_CAUSES.iter().chain(OPERATIONAL_CAUSES.iter()).copied().collect();
        f.fail("cause", format!("must be one of {}", known.join(", ")));
    }
    let amount = f.amount("amount", false);
    let description = f.text("description", false, MED_TEXT_LEN_MAX).map(str::to_owned);
    let (Some(end_to_end), true) = (e2e, f.violations.is_empty()) else {
        return Err(ApiError::Validation(f.violations));
    };
    let med = ask(
        &state,
        &caller,
        OpenMed { end_to_end, cause, amount, description, dict_refund_id: None, infraction: None },
    )
    .await??;
    Ok(HttpResponse::Created().json(med.to_json()))
}

/// The disputed PIX's end-to-end id, under the record's name `endToEnd` or the request's
/// older name `endToEndId` (which earlier releases took): one of the two, not both.
fn med_end_to_end(obj: &serde_json::Map<String, Value>, f: &mut Fields) -> Option<String> {
    match (obj.contains_key("endToEnd"), obj.contains_key("endToEndId")) {
        (true, true) => {
            f.fail("endToEndId", "is the older name of endToEnd: give one of the two");
            None
        }
        (false, true) => f.text("endToEndId", true, 32).map(str::to_owned),
        _ => f.text("endToEnd", true, 32).map(str::to_owned),
    }
}

fn med_id(path: &str) -> Result<u64, ApiError> {
    path.parse().map_err(|_| ApiError::NotFound("no MED of this account has this id".into()))
}

#[utoipa::path(
    post, operation_id = "analyze_med_case", path = "/sandbox/med/{id}/analyze", tag = "sandbox",
    params(("id" = u64, Path, description = "the MED's id")),
    request_body(content = super::schemas::MedAnalyzeRequest),
    responses(
        (status = 200, description = "ANALYZED: approved debits the blocked amount as a Refund in, rejected releases it", body = super::schemas::MedView),
        (status = 400, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "Already analyzed or cancelled", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn analyze(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (result, details, _) = read_analysis(&req, &bytes, false)?;
    close(&caller, &state, med_id(&path)?, Some(result), details).await
}

/// An analysis's body: `result`, `details`, and on the operators' route the `fraudType` an
/// approval of a MED 2.0 case names to the DICT. `strict`: a member it does not know is
/// refused (the operators' routes), else ignored (family A).
fn read_analysis(
    req: &HttpRequest,
    bytes: &Bytes,
    strict: bool,
) -> Result<(AnalysisResult, Option<String>, Option<String>), ApiError> {
    let obj = request_object(req, bytes)?;
    let mut f = Fields::new(&obj);
    let mut fraud_type = None;
    if strict {
        f.only(&["result", "details", "fraudType"]);
        fraud_type = f.string("fraudType", false).map(str::to_owned);
        if fraud_type.as_deref().is_some_and(|t| !crate::rail::spi::fraud::FRAUD_TYPES.contains(&t)) {
            f.fail(
                "fraudType",
                format!("must be one of {}", crate::rail::spi::fraud::FRAUD_TYPES.join(", ")),
            );
        }
    }
    let result = f.string("result", true).and_then(|r| {
        let parsed = AnalysisResult::parse(r);
        if parsed.is_none() {
            f.fail("result", "must be APPROVED or REJECTED");
        }
        parsed
    });
    let details = f.text("details", false, MED_TEXT_LEN_MAX).map(str::to_owned);
    match (result, f.violations.is_empty()) {
        (Some(result), true) => Ok((result, details, fraud_type)),
        _ => Err(ApiError::Validation(f.violations)),
    }
}

#[utoipa::path(
    post, operation_id = "analyze_account_med_case", path = "/admin/accounts/{id}/med/{medId}/analysis", tag = "admin",
    params(("id" = u64, Path, description = "the account's id"), ("medId" = u64, Path, description = "the MED's id")),
    request_body(content = super::schemas::MedAnalysisRequest),
    responses(
        (status = 200, description = "ANALYZED: approved, the blocked amount goes back to the payer (a MED of the DICT: as a return on the rail, and the DICT is told once it settles); rejected, it is released", body = super::schemas::MedView),
        (status = 400, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "Already analyzed or cancelled", body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
/// The operator's analysis of a MED of a live account: the contested institution's decision,
/// which is the operator's, not the account holder's.
pub async fn admin_analyze(
    _: super::auth::Admin,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (account, med) = path.into_inner();
    let account: crate::domain::ids::AccountId =
        account.parse().map_err(|_| ApiError::NotFound("account not found".into()))?;
    let med = med_id(&med)?;
    let (result, details, fraud_type) = read_analysis(&req, &bytes, true)?;
    crate::admin::account(&state.repo, account)?;
    let closed = state
        .registry
        .get(account)?
        .send(CloseMed { id: med, result: Some(result), details, fraud_type })
        .await
        .map_err(|e| ApiError::Unavailable(crate::cause::Cause::msg(e.to_string())))??;
    tracing::info!(account = account.get(), med, result = ?result, "operator MED analysis");
    Ok(HttpResponse::Ok().json(closed.to_json()))
}

#[utoipa::path(
    post, operation_id = "cancel_med_case", path = "/sandbox/med/{id}/cancel", tag = "sandbox",
    params(("id" = u64, Path, description = "the MED's id")),
    responses(
        (status = 200, description = "CANCELLED (REFUND_CANCELLATION); the blocked amount is released", body = super::schemas::MedView),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "Already analyzed or cancelled", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn cancel(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    close(&caller, &state, med_id(&path)?, None, None).await
}

async fn close(
    caller: &Caller,
    state: &AppState,
    id: u64,
    result: Option<AnalysisResult>,
    details: Option<String>,
) -> Result<HttpResponse, ApiError> {
    let med = ask(state, caller, CloseMed { id, result, details, fraud_type: None }).await??;
    Ok(HttpResponse::Ok().json(med.to_json()))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MedMetadata {
    total: u64,
    page: u32,
    page_size: u32,
    total_pages: u64,
    has_next: bool,
    has_previous: bool,
}

#[derive(Serialize, ToSchema)]
pub struct MedPage {
    #[schema(value_type = Vec<super::schemas::MedView>)]
    data: Vec<Value>,
    metadata: MedMetadata,
}

#[utoipa::path(
    get, operation_id = "list_med_cases", path = "/api/med", tag = "account",
    params(
        ("status" = Option<String>, Query, description = "OPEN, RECEIVED, CANCELLED or ANALYZED"),
        ("isReconciled" = Option<bool>, Query, description = "true or false"),
        ("startDate" = Option<String>, Query, description = "RFC 3339 date-time: created at or after"),
        ("endDate" = Option<String>, Query, description = "RFC 3339 date-time: created at or before"),
        ("page" = Option<u32>, Query, minimum = 1, description = "from 1, default 1"),
        ("pageSize" = Option<u32>, Query, minimum = 1, maximum = 100, description = "1 to 100, default 20"),
    ),
    responses(
        (status = 200, description = "Newest first", body = MedPage),
        (status = 400, body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
        (status = 429, description = "More than 120 calls in a minute; see Retry-After", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    caller: Caller,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    super::rate_limit(&state.med_list_rate, &caller, state.clock.now())?;
    list_of(&state, caller.account_id, query.into_inner())
}

/// List an account's MED cases
///
/// The operator's view of `GET /api/med` for any account (no rate limit): the cases to
/// analyse, the MED 2.0 ones with their statements and deadlines.
#[utoipa::path(
    get, operation_id = "list_account_med_cases", path = "/admin/accounts/{id}/med", tag = "admin",
    params(
        ("id" = u64, Path, description = "the account's id"),
        ("status" = Option<String>, Query, description = "OPEN, RECEIVED, CANCELLED or ANALYZED"),
        ("isReconciled" = Option<bool>, Query, description = "true or false"),
        ("startDate" = Option<String>, Query, description = "RFC 3339 date-time: created at or after"),
        ("endDate" = Option<String>, Query, description = "RFC 3339 date-time: created at or before"),
        ("page" = Option<u32>, Query, minimum = 1, description = "from 1, default 1"),
        ("pageSize" = Option<u32>, Query, minimum = 1, maximum = 100, description = "1 to 100, default 20"),
    ),
    responses(
        (status = 200, description = "Newest first", body = MedPage),
        (status = 400, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
    ),
    security(("admin" = []))
)]
pub async fn admin_list(
    _: super::auth::Admin,
    path: web::Path<String>,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let account: crate::domain::ids::AccountId =
        path.parse().map_err(|_| ApiError::NotFound("account not found".into()))?;
    crate::admin::account(&state.repo, account)?;
    list_of(&state, account, query.into_inner())
}

fn list_of(
    state: &AppState,
    account: crate::domain::ids::AccountId,
    q: HashMap<String, String>,
) -> Result<HttpResponse, ApiError> {
    let mut v = Vec::new();
    known_params(&q, &MED_PARAMS, &mut v);
    let page = int_param(&q, "page", 1..=u32::MAX, 1, &mut v);
    let size = int_param(&q, "pageSize", 1..=MED_PAGE_SIZE_MAX, MED_PAGE_SIZE_DEFAULT, &mut v);
    let status = q.get("status").and_then(|s| {
        let parsed = MedStatus::parse(s);
        if parsed.is_none() {
            v.push(Violation::new("status", "must be OPEN, RECEIVED, CANCELLED or ANALYZED"));
        }
        parsed
    });
    let reconciled = super::received::flag(&q, "isReconciled", &mut v);
    let mut instant = |name: &str| {
        q.get(name).and_then(|d| match DateTime::parse_from_rfc3339(d) {
            Ok(t) => Some(t.with_timezone(&Utc)),
            Err(_) => {
                v.push(Violation::new(name, "must be an RFC 3339 date-time"));
                None
            }
        })
    };
    let (from, to) = (instant("startDate"), instant("endDate"));
    if let (Some(a), Some(b)) = (from, to) {
        if a > b {
            v.push(Violation::new("startDate", "must not be after endDate"));
        }
    }
    if !v.is_empty() {
        return Err(ApiError::Validation(v));
    }
    let keep = |m: &Med| {
        status.is_none_or(|s| s == m.status)
            && reconciled.is_none_or(|r| r == m.is_reconciled())
            && from.is_none_or(|f| m.created_at >= f)
            && to.is_none_or(|t| m.created_at <= t)
    };
    let skip = (page as usize - 1).saturating_mul(size as usize);
    let (meds, total) = state.repo.meds_page(account, keep, skip, size as usize)?;
    let data = meds.iter().map(Med::to_json).collect();
    Ok(HttpResponse::Ok().json(MedPage {
        data,
        metadata: {
            let info = PageInfo::new(page, size, total as u64);
            MedMetadata {
                total: info.total,
                page,
                page_size: size,
                total_pages: info.total_pages,
                has_next: info.has_next,
                has_previous: info.has_previous,
            }
        },
    }))
}
