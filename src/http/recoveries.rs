//! MED 2.0 routes of the client: contest a Pix the account sent (`POST /api/med/recoveries`,
//! self-service, opening a funds recovery in the DICT), follow its contests
//! (`GET /api/med/recoveries`, `GET /api/med/recoveries/{id}`), and answer a case against
//! the account with its statement (`POST /api/med/{id}/evidence`), which the operator reads
//! in the analysis. docs/decisions.md "MED 2.0".

use std::collections::HashMap;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::json;

use super::ask::ask;
use super::auth::Caller;
use super::body::{int_param, known_params, request_object, Fields};
use super::error::{ApiError, ExtendedErrorBody, Violation};
use super::AppState;
use crate::account::{AddEvidence, AmendContest, Contest};
use crate::domain::decide::ContestRequest;
use crate::domain::listing::PageInfo;
use crate::domain::med::EVIDENCE_TEXT_LEN_MAX;
use crate::domain::recovery::{
    Amendment, Recovery, RecoveryRejection, RecoveryStatus, CONTACT_LEN_MAX, RECOVERY_DETAILS_LEN_MAX,
    SITUATIONS,
};

const PAGE_SIZE_MAX: u32 = 100;
const PAGE_SIZE_DEFAULT: u32 = 20;
const LIST_PARAMS: [&str; 3] = ["status", "page", "pageSize"];

/// Contest a Pix the account sent
///
/// MED 2.0 self-service: the payer says a Pix it sent was a fraud. The contest is recorded
/// (`REQUESTED`) and the gateway opens the funds recovery in the DICT, which traces the
/// money and asks every institution it reached to block and return it; each move comes as a
/// `recovery` webhook, and returned money as returns of the Pix.
#[utoipa::path(
    post, operation_id = "contest_pix", path = "/api/med/recoveries", tag = "account",
    request_body(content = super::schemas::ContestRequestBody),
    responses(
        (status = 201, description = "The contest, REQUESTED", body = Object),
        (status = 400, body = ExtendedErrorBody),
        (status = 404, description = "No Pix of the account has this end-to-end id", body = ExtendedErrorBody),
        (status = 409, description = "Not a settled Pix the account sent, past 80 days, contested already, or no DICT on this server", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn contest(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    let e2e = f.text("endToEndId", true, 32).map(str::to_owned);
    let Amendment { situation, details, email, phone } = contest_fields(&mut f, true);
    if situation.as_deref() == Some("OTHER") && details.is_none() {
        f.fail("details", "is required when situationType is OTHER");
    }
    let (Some(end_to_end_id), Some(situation), Some(email), Some(phone), true) =
        (e2e, situation, email, phone, f.violations.is_empty())
    else {
        return Err(ApiError::Validation(f.violations));
    };
    let account =
        state.repo.account(caller.account_id)?.ok_or_else(|| ApiError::NotFound("no such account".into()))?;
    if account.profile.sandbox || state.keys.rail_name() != "spi" {
        return Err(ApiError::Rejected(crate::http::error::Rejection::Recovery(
            RecoveryRejection::RailRequired,
        )));
    }
    let req = ContestRequest { end_to_end_id, situation, details, email, phone };
    let r = ask(&state, &caller, Contest(req)).await??;
    metrics::counter!("pixgw_dict_contests_total").increment(1);
    tracing::info!(account = caller.account_id.get(), contest = r.id, "a Pix was contested (MED 2.0)");
    Ok(HttpResponse::Created().json(r.to_json()))
}

/// A contest's situation, details and contact as a request gives them, each checked
/// (`required`: the situation, e-mail and phone must be there).
fn contest_fields(f: &mut Fields, required: bool) -> Amendment {
    let situation = f.text("situationType", required, 32).map(str::to_owned);
    if situation.as_deref().is_some_and(|s| !SITUATIONS.contains(&s)) {
        f.fail("situationType", format!("must be one of {}", SITUATIONS.join(", ")));
    }
    let details = f.text("details", false, RECOVERY_DETAILS_LEN_MAX).map(str::to_owned);
    let email = f.text("email", required, CONTACT_LEN_MAX).map(str::to_owned);
    if email.as_deref().is_some_and(|e| !e.contains('@')) {
        f.fail("email", "must be an e-mail address");
    }
    let phone = f.text("phone", required, CONTACT_LEN_MAX).map(str::to_owned);
    if phone
        .as_deref()
        .is_some_and(|p| !(p.starts_with('+') && p.len() >= 8 && p[1..].bytes().all(|b| b.is_ascii_digit())))
    {
        f.fail("phone", "must be + and digits (E.164)");
    }
    Amendment { situation, details, email, phone }
}

/// Change a contest
///
/// The payer corrects its contest while the institutions have not analysed it: its
/// situation, details, e-mail or phone (absent members are kept). The DICT takes the change
/// first; the contest keeps its status.
#[utoipa::path(
    patch, operation_id = "amend_contest", path = "/api/med/recoveries/{id}", tag = "account",
    params(("id" = u64, Path, description = "The contest's id")),
    request_body(content = super::schemas::AmendContestBody),
    responses(
        (status = 200, description = "The contest as it now is", body = Object),
        (status = 400, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "Not in the DICT yet (CONTEST_NOT_OPENED), or analysed already (CONTEST_NOT_AMENDABLE)", body = ExtendedErrorBody),
        (status = 503, body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn amend(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (id, r) = own_contest(&state, &caller, &path)?;
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    let amendment = contest_fields(&mut f, false);
    if amendment == Amendment::default() && f.violations.is_empty() {
        f.fail("situationType", "or details, email, phone: at least one is required");
    }
    if !f.violations.is_empty() {
        return Err(ApiError::Validation(f.violations));
    }
    // The rule first, so the DICT hears only a change the contest takes.
    let next = r
        .amended(&amendment, state.clock.now())
        .map_err(|e| ApiError::Rejected(crate::http::error::Rejection::Recovery(e)))?;
    let Some(dict_id) = r.dict_id.clone() else {
        return Err(ApiError::Rejected(crate::http::error::Rejection::Recovery(
            RecoveryRejection::NotOpened,
        )));
    };
    let asked = crate::rail::spi::recovery::FundsRecovery {
        id: dict_id,
        root_transaction_id: next.end_to_end_id.clone(),
        situation_type: next.situation.clone(),
        details: next.details.clone(),
        email: next.email.clone(),
        phone: next.phone.clone(),
        status: String::new(),
        reporter: String::new(),
        created: next.created_at,
        modified: next.updated_at,
    };
    state.keys.update_recovery(asked).await.map_err(ApiError::Dict)?;
    let amended = ask(&state, &caller, AmendContest { id, amendment }).await??;
    tracing::info!(account = caller.account_id.get(), contest = id, "a contest was changed");
    Ok(HttpResponse::Ok().json(amended.to_json()))
}

/// List the account's contests
///
/// Newest first, with a status filter and paging.
#[utoipa::path(
    get, operation_id = "list_contests", path = "/api/med/recoveries", tag = "account",
    params(
        ("status" = Option<String>, Query, description = "REQUESTED, CREATED, TRACKED, AWAITING_ANALYSIS, ANALYSED, REFUNDING, COMPLETED or CANCELLED"),
        ("page" = Option<u32>, Query, minimum = 1),
        ("pageSize" = Option<u32>, Query, minimum = 1, maximum = 100),
    ),
    responses((status = 200, description = "Newest first", body = Object), (status = 400, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn list(
    caller: Caller,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let mut v = Vec::new();
    known_params(&q, &LIST_PARAMS, &mut v);
    let page = int_param(&q, "page", 1..=u32::MAX, 1, &mut v);
    let size = int_param(&q, "pageSize", 1..=PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT, &mut v);
    let status = q.get("status").and_then(|s| {
        let parsed = RecoveryStatus::parse(s);
        if parsed.is_none() {
            v.push(Violation::new("status", "must be a contest's status"));
        }
        parsed
    });
    if !v.is_empty() {
        return Err(ApiError::Validation(v));
    }
    let keep = |r: &Recovery| status.is_none_or(|s| s == r.status);
    let skip = (page as usize - 1).saturating_mul(size as usize);
    let (found, total) = state.repo.recoveries_page(caller.account_id, keep, skip, size as usize)?;
    let info = PageInfo::new(page, size, total as u64);
    Ok(HttpResponse::Ok().json(json!({
        "data": found.iter().map(Recovery::to_json).collect::<Vec<_>>(),
        "metadata": {"total": info.total, "page": page, "pageSize": size, "totalPages": info.total_pages},
    })))
}

/// Read one contest
///
/// The contest as the DICT last answered, with what has come back of the Pix.
#[utoipa::path(
    get, operation_id = "get_contest", path = "/api/med/recoveries/{id}", tag = "account",
    params(("id" = u64, Path, description = "The contest's id")),
    responses((status = 200, body = Object), (status = 404, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn get(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (_, r) = own_contest(&state, &caller, &path)?;
    Ok(HttpResponse::Ok().json(r.to_json()))
}

/// The caller's contest named by the path: 404 for a number that is none of its contests.
fn own_contest(state: &AppState, caller: &Caller, path: &str) -> Result<(u64, Recovery), ApiError> {
    let gone = || ApiError::NotFound("no such contest".into());
    let id: u64 = path.parse().map_err(|_| gone())?;
    let r = state.repo.recovery(caller.account_id, id)?.ok_or_else(gone)?;
    Ok((id, r))
}

/// Withdraw a contest
///
/// The payer withdraws its contest: the funds recovery is cancelled at the DICT, with its
/// reports and open refund requests, and the institutions that blocked money release it.
/// Money already returned stays returned.
#[utoipa::path(
    post, operation_id = "cancel_contest", path = "/api/med/recoveries/{id}/cancel", tag = "account",
    params(("id" = u64, Path, description = "The contest's id")),
    responses(
        (status = 200, description = "The contest, CANCELLED", body = Object),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "Ended already, not in the DICT yet (CONTEST_NOT_OPENED), or the DICT refuses (DICT_REFUSED: completed)", body = ExtendedErrorBody),
        (status = 503, body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn cancel(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (id, r) = own_contest(&state, &caller, &path)?;
    if r.status.is_final() {
        return Err(ApiError::Conflict(format!("the contest is {} already", r.status.as_str())));
    }
    let Some(dict_id) = r.dict_id.clone() else {
        return Err(ApiError::Rejected(crate::http::error::Rejection::Recovery(
            RecoveryRejection::NotOpened,
        )));
    };
    let seen = state.keys.cancel_recovery(&dict_id).await.map_err(ApiError::Dict)?;
    let moved = ask(&state, &caller, crate::account::ObserveRecovery { id, seen }).await??;
    tracing::info!(account = caller.account_id.get(), contest = id, "a contest was withdrawn");
    Ok(HttpResponse::Ok().json(moved.to_json()))
}

/// Answer a case against the account
///
/// The account's statement for a MED 2.0 case (an infraction report of the DICT against a
/// Pix it received), kept with the case for the operator's analysis while it is open.
#[utoipa::path(
    post, operation_id = "add_med_evidence", path = "/api/med/{id}/evidence", tag = "account",
    params(("id" = u64, Path, description = "The MED's id")),
    request_body(content = super::schemas::EvidenceRequest),
    responses(
        (status = 200, description = "The case, with the statement", body = super::schemas::MedView),
        (status = 400, body = ExtendedErrorBody),
        (status = 404, description = "No MED 2.0 case of the account has this id", body = ExtendedErrorBody),
        (status = 409, description = "The case is analysed, or holds as many statements as it may", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn evidence(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id: u64 = path.parse().map_err(|_| ApiError::NotFound("no such MED".into()))?;
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    let text = f.text("text", true, EVIDENCE_TEXT_LEN_MAX).map(str::to_owned);
    let (Some(text), true) = (text, f.violations.is_empty()) else {
        return Err(ApiError::Validation(f.violations));
    };
    let med = ask(&state, &caller, AddEvidence { id, text }).await??;
    Ok(HttpResponse::Ok().json(med.to_json()))
}
