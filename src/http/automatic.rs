//! Pix Automático, the payer's side for an account of this gateway (on us): the recurrences
//! offered to the account as their payer (`GET /api/automatic-pix/recurrences`), its answer
//! to a request for authorisation, a change of its maximum, its cancellation of one
//! scheduled payment, and its cancellation of an authorisation.
//!
//! A recurrence is its receiver's record. The `payrec/` index says which account that is;
//! a change goes to the receiver's actor with the caller as the payer, and the actor checks
//! that the recurrence names the caller as its payer (`Recurrence::check_payer_side`), so
//! no other account can answer for it, and to any other account it does not exist (404).

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::json;

use super::ask::ask_account;
use super::auth::Caller;
use super::error::{ApiError, ExtendedErrorBody};
use super::rec::{read_answer, read_maximum};
use super::rec_schemas as s;
use super::AppState;
use crate::account::{ChangeCobr, ChangeRec, RecRef};
use crate::domain::decide::{CobrChange, RecChange};
use crate::domain::ids::AccountId;
use crate::domain::rec::{is_id_shaped, rec_local, Party, PayerSide, Recurrence};

/// The most recurrences `GET /api/automatic-pix/recurrences` lists (the newest).
pub const PAYER_RECS_LIST_MAX: usize = 500;

fn not_found() -> ApiError {
    ApiError::NotFound("no recurrence with this idRec was offered to this account".into())
}

/// The receiver's account and the recurrence `id`, offered to the caller as its payer.
fn offered(state: &AppState, caller: &Caller, id: &str) -> Result<(AccountId, Recurrence), ApiError> {
    let local = Some(id).filter(|id| is_id_shaped(id)).and_then(rec_local).ok_or_else(not_found)?;
    let receiver = state
        .repo
        .receiver_of_payer_rec(caller.account_id, local)?
        .and_then(AccountId::new)
        .ok_or_else(not_found)?;
    let payer = caller.account_id.get();
    let rec = state.repo.rec(receiver, local)?;
    let rec = rec.filter(|r| r.id == id && r.shown_to_payer(payer)).ok_or_else(not_found)?;
    Ok((receiver, rec))
}

/// Sends the payer's change to the receiver's actor and answers the recurrence.
async fn change(
    state: &AppState,
    caller: &Caller,
    receiver: AccountId,
    id: String,
    change: RecChange,
) -> Result<HttpResponse, ApiError> {
    let payer = Some(PayerSide::Account(caller.account_id.get()));
    let msg = ChangeRec { rec: RecRef::Rec(id), change, payer };
    let rec = ask_account(state, caller, receiver, msg).await??;
    Ok(HttpResponse::Ok().json(rec.to_json()))
}

#[utoipa::path(
    get, operation_id = "list_automatic_pix_recurrences", path = "/api/automatic-pix/recurrences", tag = "automatic-pix",
    responses(
        (status = 200, description = "The recurrences offered to this account as their payer, newest first", body = s::PayerRecList),
        (status = 401, body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let recs = state.repo.payer_recs(caller.account_id)?;
    let payer = caller.account_id.get();
    let shown = recs.iter().rev().filter(|r| r.shown_to_payer(payer));
    let newest: Vec<_> = shown.take(PAYER_RECS_LIST_MAX).map(Recurrence::to_json).collect();
    Ok(HttpResponse::Ok().json(json!({ "recurrences": newest })))
}

#[utoipa::path(
    post, operation_id = "answer_automatic_pix_recurrence", path = "/api/automatic-pix/recurrences/{idRec}/answer", tag = "automatic-pix",
    params(("idRec" = String, Path, description = "The recurrence's id")),
    request_body(content = s::SolicRecAnswer),
    responses(
        (status = 200, description = "The recurrence: APROVADA (with this account as its payer) or REJEITADA", body = s::RecView),
        (status = 400, body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "Its request for authorisation no longer awaits an answer", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn answer(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let answer = read_answer(&req, &bytes)?;
    let id = path.into_inner();
    let (receiver, rec) = offered(&state, &caller, &id)?;
    // The latest request is the one answered; one that is not awaiting is refused (409).
    let solicitation = rec.solicitations.last().map(|s| s.id.clone()).ok_or_else(not_found)?;
    change(&state, &caller, receiver, id, RecChange::Answer { solicitation, answer }).await
}

#[utoipa::path(
    post, operation_id = "change_automatic_pix_maximum", path = "/api/automatic-pix/recurrences/{idRec}/maximum", tag = "automatic-pix",
    params(("idRec" = String, Path, description = "The recurrence's id")),
    request_body(content = s::PayerMaximum),
    responses(
        (status = 200, description = "The recurrence with this account's new maximum; its charges not yet tried follow it", body = s::RecView),
        (status = 400, body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "The recurrence is not authorised by this account, or it ended", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn maximum(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let maximum = read_maximum(&req, &bytes)?;
    let id = path.into_inner();
    let (receiver, _) = offered(&state, &caller, &id)?;
    change(&state, &caller, receiver, id, RecChange::Maximum(maximum)).await
}

#[utoipa::path(
    post, operation_id = "cancel_automatic_pix_recurrence", path = "/api/automatic-pix/recurrences/{idRec}/cancel", tag = "automatic-pix",
    params(("idRec" = String, Path, description = "The recurrence's id")),
    responses(
        (status = 200, description = "The recurrence, CANCELADA by the payer (SLDB)", body = s::RecView),
        (status = 401, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "The recurrence already ended", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn cancel(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    let (receiver, _) = offered(&state, &caller, &id)?;
    change(&state, &caller, receiver, id, RecChange::Cancel(Party::UsuarioPagador)).await
}

#[utoipa::path(
    post, operation_id = "cancel_automatic_pix_charge", path = "/api/automatic-pix/recurrences/{idRec}/charges/{txid}/cancel", tag = "automatic-pix",
    params(
        ("idRec" = String, Path, description = "The recurrence's id"),
        ("txid" = String, Path, description = "The recurring charge's txid"),
    ),
    responses(
        (status = 200, description = "The charge, CANCELADA by the payer (USUARIO_PAGADOR, SLBD); the recurrence goes on", body = s::CobrView),
        (status = 401, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "The charge is final, or its day has begun", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn cancel_charge(
    caller: Caller,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (id, txid) = path.into_inner();
    let (receiver, _) = offered(&state, &caller, &id)?;
    let change = CobrChange::CancelByPayer { payer: caller.account_id.get(), id_rec: id };
    let cobr = ask_account(&state, &caller, receiver, ChangeCobr { txid, change }).await??;
    Ok(HttpResponse::Ok().json(cobr.to_json()))
}
