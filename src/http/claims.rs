//! DICT key claim routes: a client's (`/api/dict/claims`) and an operator's
//! (`/admin/accounts/{id}/claims`). A claim opened here brings a key held at another
//! institution to the account (the account is the claimer); a claim the DICT lists against
//! one of the account's keys is answered here (the account is the donor). Each step is
//! checked against the claim's rules first ([`crate::domain::claim::check`]), then taken at
//! the DICT, and the DICT's answer is what the account records (its actor writes the copy,
//! the key that leaves or arrives, and the `claim` webhook) before the route answers.

use std::collections::HashMap;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{json, Map, Value};

use super::admin::{account_id, read_key_request};
use super::auth::{Admin, Caller};
use super::body::{int_param, known_params, request_object, Fields};
use super::error::{ApiError, ExtendedErrorBody, Violation};
use super::AppState;
use crate::account::ObserveClaim;
use crate::domain::claim::{
    check, claimable, Claim, ClaimStatus, ClaimType, Reason, Role, Step, CLAIMS_PAGE_MAX,
};
use crate::domain::ids::AccountId;
use crate::domain::listing::PageInfo;

const CLAIMS_PAGE_SIZE_DEFAULT: u32 = 20;
const LIST_PARAMS: [&str; 4] = ["status", "role", "page", "pageSize"];

/// The reasons a client may give: the others are the gateway's own (`DEFAULT_OPERATION`,
/// taken at a deadline), an operator's (`RECONCILIATION`, `RFB_VALIDATION`) or the DICT's.
const CLIENT_REASONS: [Reason; 3] = [Reason::UserRequested, Reason::AccountClosure, Reason::Fraud];

/// Who asks for a step: the account's client, or an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asker {
    Client,
    Operator,
}

/// Records the DICT's answer in the account (its actor), and answers the copy.
async fn record(
    state: &AppState,
    account: AccountId,
    seen: crate::domain::claim::Seen,
    role: Role,
) -> Result<Claim, ApiError> {
    let actor = state
        .registry
        .get(account)
        .map_err(|e| ApiError::Unavailable(crate::cause::Cause::msg(e.to_string())))?;
    // The actor answers once the copy is durable.
    let copy = actor
        .send(ObserveClaim { seen, role })
        .await
        .map_err(|e| ApiError::Unavailable(crate::cause::Cause::msg(e.to_string())))?;
    Ok(copy?)
}

/// Opens a claim for the account: body `{key, type}` (`type` PORTABILITY, the default, or
/// OWNERSHIP). An operator's unknown members are refused, a client's ignored (each family's
/// rule, docs/interface.md "Requests").
async fn open(
    state: &AppState,
    id: AccountId,
    obj: &Map<String, Value>,
    asker: Asker,
) -> Result<HttpResponse, ApiError> {
    let mut f = Fields::new(obj);
    if asker == Asker::Operator {
        f.only(&["key", "type"]);
    }
    let claim_type = match f.string("type", false) {
        None => Some(ClaimType::Portability),
        Some(t) => {
            let parsed = ClaimType::parse(t);
            if parsed.is_none() {
                f.fail("type", "must be PORTABILITY or OWNERSHIP");
            }
            parsed
        }
    };
    if !f.violations.is_empty() {
        return Err(ApiError::Validation(f.violations));
    }
    let key_only: Map<String, Value> =
        obj.iter().filter(|(k, _)| k.as_str() == "key").map(|(k, v)| (k.clone(), v.clone())).collect();
    let (key, key_type, _) = read_key_request(&key_only)?;
    let claim_type = claim_type.unwrap_or(ClaimType::Portability);
    if key.is_empty() {
        return Err(ApiError::Validation(vec![Violation::new(
            "key",
            "is required: an EVP cannot be claimed",
        )]));
    }
    claimable(&key_type, claim_type).map_err(ApiError::Claim)?;
    let account = state.repo.account(id)?.ok_or_else(|| ApiError::NotFound("no such account".into()))?;
    if account.profile.sandbox {
        return Err(ApiError::Dict(crate::rail::keys::DictAskError::NoDict));
    }
    let document = account.profile.document.to_string();
    if matches!(key_type.as_str(), "CPF" | "CNPJ") && key != document {
        return Err(ApiError::Validation(vec![Violation::new(
            "key",
            "must be the holder's own document when it is a CPF or CNPJ",
        )]));
    }
    if let Some(owner) = state.repo.account_by_receiving_key(&key)? {
        return Err(ApiError::Conflict(if owner == id {
            "the key is already this account's".into()
        } else {
            "the key is another account's of this gateway".into()
        }));
    }
    let registration = crate::rail::keys::Registration {
        key,
        key_type,
        account: id,
        holder_document: document,
        holder_name: account.profile.name.as_str().to_owned(),
        opened: account.created_at,
        nth: 0,
    };
    let seen = state.keys.open_claim(claim_type, registration).await.map_err(ApiError::Dict)?;
    metrics::counter!("pixgw_dict_claims_opened_total").increment(1);
    let claim = record(state, id, seen, Role::Claimer).await?;
    tracing::info!(account = id.get(), claim = claim.id, key = claim.key, "a key claim was opened");
    Ok(HttpResponse::Created().json(claim.to_json()))
}

/// The account's copy of the claim with the DICT's id `claim_id`.
fn copy_of(state: &AppState, id: AccountId, claim_id: &str) -> Result<Claim, ApiError> {
    for role in [Role::Claimer, Role::Donor] {
        if let Some(c) = state.repo.claim_by_id(claim_id, role)?.filter(|c| c.account_id == id.get()) {
            return Ok(c);
        }
    }
    Err(ApiError::NotFound("no such claim for this account".into()))
}

/// Takes `step_name` (confirm, cancel, complete) of the account's claim: body `{reason}`
/// for a confirmation or a cancellation (USER_REQUESTED by default).
async fn step(
    state: &AppState,
    id: AccountId,
    claim_id: &str,
    step_name: &str,
    obj: &Map<String, Value>,
    asker: Asker,
) -> Result<HttpResponse, ApiError> {
    let mut f = Fields::new(obj);
    if asker == Asker::Operator {
        f.only(&["reason"]);
    }
    let reason = match f.string("reason", false) {
        None => Some(Reason::UserRequested),
        Some(r) => {
            let allowed: Vec<Reason> = match asker {
                Asker::Client => CLIENT_REASONS.to_vec(),
                Asker::Operator => {
                    Reason::ALL.into_iter().filter(|r| *r != Reason::ParticipantExclusion).collect()
                }
            };
            let parsed = Reason::parse(r).filter(|r| allowed.contains(r));
            if parsed.is_none() {
                let names: Vec<&str> = allowed.iter().map(|r| r.as_str()).collect();
                f.fail("reason", format!("must be one of {}", names.join(", ")));
            }
            parsed
        }
    };
    let step = match (step_name, reason) {
        ("confirm", Some(r)) => Step::Confirm(r),
        ("cancel", Some(r)) => Step::Cancel(r),
        ("complete", _) => Step::Complete,
        ("confirm" | "cancel", None) => return Err(ApiError::Validation(f.violations)),
        _ => return Err(ApiError::NotFound("the steps of a claim are confirm, cancel and complete".into())),
    };
    if !f.violations.is_empty() {
        return Err(ApiError::Validation(f.violations));
    }
    let claim = copy_of(state, id, claim_id)?;
    check(&claim, step, state.clock.now()).map_err(ApiError::Claim)?;
    let seen = state.keys.claim_step(&claim.id, step).await.map_err(ApiError::Dict)?;
    let by = match asker {
        Asker::Client => "client",
        Asker::Operator => "operator",
    };
    metrics::counter!("pixgw_dict_claim_steps_total", "step" => step.name(), "by" => by).increment(1);
    let claim = record(state, id, seen, claim.role).await?;
    tracing::info!(
        account = id.get(),
        claim = claim.id,
        step = step.name(),
        by,
        status = claim.status.as_str(),
        "a claim step was taken"
    );
    Ok(HttpResponse::Ok().json(claim.to_json()))
}

/// A page of the account's claims, newest first: `status`, `role`, `page`, `pageSize`.
fn list(state: &AppState, id: AccountId, q: &HashMap<String, String>) -> Result<HttpResponse, ApiError> {
    let mut v = Vec::new();
    known_params(q, &LIST_PARAMS, &mut v);
    let page = int_param(q, "page", 1..=u32::MAX, 1, &mut v);
    let size = int_param(q, "pageSize", 1..=CLAIMS_PAGE_MAX as u32, CLAIMS_PAGE_SIZE_DEFAULT, &mut v);
    let status = q.get("status").and_then(|s| {
        let parsed = ClaimStatus::parse(s);
        if parsed.is_none() {
            v.push(Violation::new(
                "status",
                "must be OPEN, WAITING_RESOLUTION, CONFIRMED, CANCELLED or COMPLETED",
            ));
        }
        parsed
    });
    let role = q.get("role").and_then(|s| {
        let parsed = Role::parse(s);
        if parsed.is_none() {
            v.push(Violation::new("role", "must be CLAIMER or DONOR"));
        }
        parsed
    });
    if !v.is_empty() {
        return Err(ApiError::Validation(v));
    }
    let keep = |c: &Claim| status.is_none_or(|s| s == c.status) && role.is_none_or(|r| r == c.role);
    let skip = (page as usize - 1).saturating_mul(size as usize);
    let (claims, total) = state.repo.claims_page(id, keep, skip, size as usize)?;
    let info = PageInfo::new(page, size, total as u64);
    Ok(HttpResponse::Ok().json(json!({
        "data": claims.iter().map(Claim::to_json).collect::<Vec<_>>(),
        "metadata": {"total": info.total, "page": page, "pageSize": size, "totalPages": info.total_pages},
    })))
}

/// Claim a key held at another institution
///
/// The account becomes the claimer of a portability or an ownership claim at the DICT; the
/// gateway completes it once the other institution confirms, and the key is then the account's.
#[utoipa::path(
    post, operation_id = "open_key_claim", path = "/api/dict/claims", tag = "account",
    request_body(content = super::schemas::ClaimRequest),
    responses((status = 201, description = "The claim, as the DICT made it", body = Object), (status = 400, body = ExtendedErrorBody), (status = 404, body = ExtendedErrorBody), (status = 409, description = "A claim rule or the DICT refuses it; nothing changed", body = ExtendedErrorBody), (status = 503, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn client_open(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let obj = request_object(&req, &bytes)?;
    open(&state, caller.account_id, &obj, Asker::Client).await
}

/// List the account's key claims
///
/// As claimer and as donor, newest first, with the status and role filters and paging.
#[utoipa::path(
    get, operation_id = "list_key_claims", path = "/api/dict/claims", tag = "account",
    params(
        ("status" = Option<String>, Query, description = "OPEN, WAITING_RESOLUTION, CONFIRMED, CANCELLED or COMPLETED"),
        ("role" = Option<String>, Query, description = "CLAIMER or DONOR"),
        ("page" = Option<u32>, Query, minimum = 1),
        ("pageSize" = Option<u32>, Query, minimum = 1, maximum = 100),
    ),
    responses((status = 200, description = "Newest first", body = Object), (status = 400, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn client_list(
    caller: Caller,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    list(&state, caller.account_id, &query)
}

/// Read one key claim
///
/// The account's copy of a claim, by the DICT's id, with its history.
#[utoipa::path(
    get, operation_id = "get_key_claim", path = "/api/dict/claims/{id}", tag = "account",
    params(("id" = String, Path, description = "The DICT's claim id")),
    responses((status = 200, body = Object), (status = 404, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn client_get(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(copy_of(&state, caller.account_id, &path)?.to_json()))
}

/// Take a step of a key claim
///
/// Confirm (give the key up), cancel, or complete; checked against the claim's rules, then
/// taken at the DICT, whose answer the account records before this answers.
#[utoipa::path(
    post, operation_id = "take_key_claim_step", path = "/api/dict/claims/{id}/{step}", tag = "account",
    params(("id" = String, Path), ("step" = String, Path, description = "confirm, cancel or complete")),
    request_body(content = super::schemas::ClaimStepRequest),
    responses((status = 200, description = "The claim as it now is", body = Object), (status = 400, body = ExtendedErrorBody), (status = 404, body = ExtendedErrorBody), (status = 409, description = "A claim rule or the DICT refuses it; nothing changed", body = ExtendedErrorBody), (status = 503, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn client_step(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (claim_id, name) = path.into_inner();
    let obj = if bytes.is_empty() { Map::new() } else { request_object(&req, &bytes)? };
    step(&state, caller.account_id, &claim_id, &name, &obj, Asker::Client).await
}

/// Claim a key for an account
///
/// The operator's side of the client's claim route, for the account named.
#[utoipa::path(
    post, path = "/admin/accounts/{id}/claims", tag = "admin",
    params(("id" = u64, Path)),
    request_body(content = super::schemas::AdminClaimRequest),
    responses((status = 201, body = Object), (status = 400, body = ExtendedErrorBody), (status = 404, body = ExtendedErrorBody), (status = 409, description = "A claim rule or the DICT refuses it; nothing changed", body = ExtendedErrorBody), (status = 503, body = ExtendedErrorBody)),
    security(("admin" = []))
)]
pub async fn admin_open(
    _: Admin,
    req: HttpRequest,
    bytes: Bytes,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = account_id(&path)?;
    let obj = request_object(&req, &bytes)?;
    open(&state, id, &obj, Asker::Operator).await
}

/// List an account's key claims
///
/// The operator's view of the account's claims, with the client's filters and paging.
#[utoipa::path(
    get, path = "/admin/accounts/{id}/claims", tag = "admin",
    params(("id" = u64, Path), ("status" = Option<String>, Query), ("role" = Option<String>, Query), ("page" = Option<u32>, Query), ("pageSize" = Option<u32>, Query)),
    responses((status = 200, body = Object), (status = 400, body = ExtendedErrorBody), (status = 404, body = ExtendedErrorBody)),
    security(("admin" = []))
)]
pub async fn admin_list(
    _: Admin,
    path: web::Path<String>,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = account_id(&path)?;
    state.repo.account(id)?.ok_or_else(|| ApiError::NotFound("no such account".into()))?;
    list(&state, id, &query)
}

/// Take a step of an account's key claim
///
/// The operator's steps, with any reason but the DICT's own PARTICIPANT_EXCLUSION.
#[utoipa::path(
    post, path = "/admin/accounts/{id}/claims/{claimId}/{step}", tag = "admin",
    params(("id" = u64, Path), ("claimId" = String, Path), ("step" = String, Path, description = "confirm, cancel or complete")),
    request_body(content = super::schemas::AdminClaimStepRequest),
    responses((status = 200, body = Object), (status = 400, body = ExtendedErrorBody), (status = 404, body = ExtendedErrorBody), (status = 409, description = "A claim rule or the DICT refuses it; nothing changed", body = ExtendedErrorBody), (status = 503, body = ExtendedErrorBody)),
    security(("admin" = []))
)]
pub async fn admin_step(
    _: Admin,
    req: HttpRequest,
    bytes: Bytes,
    path: web::Path<(String, String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (raw, claim_id, name) = path.into_inner();
    let id = account_id(&raw)?;
    let obj = if bytes.is_empty() { Map::new() } else { request_object(&req, &bytes)? };
    step(&state, id, &claim_id, &name, &obj, Asker::Operator).await
}
