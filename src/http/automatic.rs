//! Pix Automático, the payer's side for an account of this gateway (on us): the recurrences
//! offered to the account as their payer (`GET /api/automatic-pix/recurrences`), its answer
//! to a request for authorisation, its authorisation by a QR code (journeys 2 to 4), a
//! change of its maximum, its cancellation of one scheduled payment, and its cancellation of
//! an authorisation.
//!
//! A QR code leads to its recurrence through the location in its template 80: a location
//! this gateway made names the receiver's account and the location under the gateway's MAC
//! (`RecLocations`), so a code names no recurrence it was not made for.
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
use super::body::{request_object, Fields};
use super::error::{ApiError, ExtendedErrorBody, Violation};
use super::rec::{cod_mun, read_answer, read_maximum, valor};
use super::rec_schemas as s;
use super::AppState;
use crate::account::{ChangeCobr, ChangeRec, RecRef};
use crate::domain::decide::{CobrChange, RecChange};
use crate::domain::ids::AccountId;
use crate::domain::money::Money;
use crate::domain::rec::{is_id_shaped, rec_local, CodMun, Party, PayerAuthorisation, PayerSide, Recurrence};
use crate::domain::transaction::gateway_ispb;

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
    Ok(HttpResponse::Ok().json(rec.to_payer_json(caller.account_id.get())))
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
    let newest: Vec<_> = shown.take(PAYER_RECS_LIST_MAX).map(|r| r.to_payer_json(payer)).collect();
    Ok(HttpResponse::Ok().json(json!({ "recurrences": newest })))
}

/// Reads `{qrCode, valorMaximo?}` (family A: a member it does not know is ignored).
fn read_qr_authorisation(
    req: &HttpRequest,
    bytes: &Bytes,
) -> Result<(String, Option<Money>, Option<CodMun>), ApiError> {
    let obj = request_object(req, bytes)?;
    let mut f = Fields::new(&obj);
    let code = f.string("qrCode", true).map(str::to_owned);
    let maximum = valor(&mut f, "valorMaximo", false);
    let municipality = cod_mun(&mut f);
    match code {
        Some(code) if f.violations.is_empty() => Ok((code, maximum, municipality)),
        _ => Err(ApiError::Validation(f.violations)),
    }
}

#[utoipa::path(
    post, operation_id = "authorise_automatic_pix_by_qr", path = "/api/automatic-pix/authorisations", tag = "automatic-pix",
    request_body(content = s::QrAuthorisation),
    responses(
        (status = 200, description = "The recurrence, APROVADA with this account as its payer: JORNADA_2, or JORNADA_3 / JORNADA_4 once this account paid its first charge", body = s::RecView),
        (status = 400, description = "Not a BR Code, or one that carries no recurrence", body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
        (status = 404, description = "No recurrence of this gateway at the code's location, or one another payer holds", body = ExtendedErrorBody),
        (status = 409, description = "Not CRIADA, a request for authorisation awaits its answer, or its first charge is not paid by this account", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn authorise(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (code, maximum, municipality) = read_qr_authorisation(&req, &bytes)?;
    let location = crate::domain::brcode::recurrence_location(&code)
        .map_err(|e| ApiError::Validation(vec![Violation::new("qrCode", e.to_string())]))?;
    let none =
        || ApiError::NotFound("no recurrence of this gateway at the location this code carries".into());
    let locations = state.registry.deps().rec_locations.as_ref().ok_or_else(none)?;
    let (receiver, loc) = locations.opens_location(&location).ok_or_else(none)?;
    let receiver = AccountId::new(receiver).ok_or_else(none)?;
    let id = state.repo.locrec(receiver, loc)?.and_then(|l| l.id_rec).ok_or_else(none)?;
    let document = state
        .repo
        .account(caller.account_id)?
        .map(|r| r.profile.document.to_string())
        .ok_or_else(|| ApiError::internal("the caller's account is not stored"))?;
    // The account that speaks is the payer (the receiver's actor sets it so).
    let payer = PayerAuthorisation {
        document,
        ispb: gateway_ispb().to_owned(),
        maximum,
        municipality,
        on_us: Some(caller.account_id.get()),
    };
    change(&state, &caller, receiver, id, RecChange::ApproveByQr { payer, first_paid: false }).await
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
