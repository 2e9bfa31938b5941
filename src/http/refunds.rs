//! Refunds of received PIX, one model for both families: `POST /api/pix/refund-in/{id}`
//! (family A) and `PUT /pix/{e2eid}/devolucao/{id}` (family B). The refund-in externalId
//! and the devolução id are one namespace: the same id again answers the same refund.

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::Caller;
use super::body::{request_object, Fields};
use super::error::{ApiError, ExtendedErrorBody, SimpleErrorBody, Violation, ViolationKind};
use super::payments::{payout_scenario, refuse_if_provider_down};
use super::transactions::find_own;
use super::{iso, AppState};
use crate::account::{Refund, RefundRequest};
use crate::domain::events::money_number;
use crate::domain::money::Money;
use crate::domain::transaction::{Family, Natureza, Transaction, TxStatus, DESCRIPTION_LEN_MAX};

/// Characters of a devolução id.
pub const DEVOLUCAO_ID_LEN_MAX: usize = 35;
/// Characters of an end-to-end id.
pub const E2E_LEN: usize = 32;

/// Sends a refund to the caller's account actor: the refund, and whether it was made
/// before (the same id of the same refund).
async fn ask_refund(
    state: &AppState,
    caller: &Caller,
    req: RefundRequest,
) -> Result<(Transaction, bool), ApiError> {
    Ok(super::ask::ask(state, caller, Refund(req)).await??)
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefundInCreated {
    transaction_id: String,
    external_id: Option<String>,
    /// PENDING, then CONFIRMED or ERROR
    status: &'static str,
    #[schema(value_type = f64)]
    refund_value: Value,
    /// The return id (rtrId) the webhooks carry.
    provider_transaction_id: String,
    generate_time: String,
}

#[utoipa::path(
    post, path = "/api/pix/refund-in/{id}", tag = "pix",
    params(("id" = String, Path, description = "the received transaction: transactionId, numeric id or end-to-end id"),
           ("X-Sandbox-Scenario" = Option<String>, Header, description = "cash-out family values; sandbox accounts only")),
    request_body(content = super::schemas::RefundInRequest),
    responses(
        (status = 201, body = RefundInCreated),
        (status = 200, description = "The same externalId again: the same refund", body = RefundInCreated),
        (status = 400, description = "invalid data, deadline exceeded, amount above what is refundable, insufficient balance", body = ExtendedErrorBody),
        (status = 404, description = "no received PIX of this account with that id", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn refund_in(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let scenario = payout_scenario(&req, &caller)?;
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    let value = f.amount("refundValue", true);
    let reason = f.text("reason", false, DESCRIPTION_LEN_MAX).map(str::to_owned);
    let external_id = f.external_id("externalId", false).map(str::to_owned);
    let (Some(value), true) = (value, f.violations.is_empty()) else {
        return Err(ApiError::Validation(f.violations));
    };
    refuse_if_provider_down(scenario)?;
    let id = path.into_inner();
    // An end-to-end id of an account that paid itself names its payment and its receipt:
    // what is refunded is the receipt.
    let original = match find_own(&state, &caller, &id)? {
        Some(t) if !t.is_received() && t.end_to_end_id == id => {
            Some(state.repo.received_by_e2e(caller.account_id, &id)?.unwrap_or(t))
        }
        other => other,
    }
    .ok_or_else(|| ApiError::NotFound("the original transaction was not found".into()))?;
    let request = RefundRequest {
        original_local_id: original.local_id,
        value,
        refund_id: external_id.clone(),
        reason,
        natureza: Natureza::Original,
        family: Family::A,
        scenario,
    };
    let (tx, replayed) =
        ask_refund(&state, &caller, request).await.map_err(|e| e.with_external_id(external_id.as_deref()))?;
    let body = RefundInCreated {
        transaction_id: tx.transaction_id.to_string(),
        external_id: tx.external_id.clone(),
        status: tx.status.as_str(),
        refund_value: money_number(tx.value),
        provider_transaction_id: tx.refund.as_ref().map(|r| r.rtr_id.clone()).unwrap_or_default(),
        generate_time: iso(tx.created_at),
    };
    Ok(if replayed { HttpResponse::Ok().json(body) } else { HttpResponse::Created().json(body) })
}

#[derive(Serialize, ToSchema)]
pub struct Horario {
    solicitacao: String,
    /// When it settled (`DEVOLVIDO` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    liquidacao: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Devolucao {
    id: String,
    rtr_id: String,
    valor: String,
    natureza: &'static str,
    descricao: Option<String>,
    horario: Horario,
    /// EM_PROCESSAMENTO, DEVOLVIDO or NAO_REALIZADO
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    motivo: Option<String>,
}

impl Devolucao {
    /// The API Pix view of a refund.
    pub fn of(tx: &Transaction) -> Devolucao {
        let r = tx.refund.as_ref();
        Devolucao {
            // A refund made without an id of the client's (a family A refund-in without
            // externalId, a MED's) is addressed by its return id, which is unique too.
            id: r
                .and_then(|r| r.refund_id.clone())
                .or_else(|| r.map(|r| r.rtr_id.clone()))
                .unwrap_or_default(),
            rtr_id: r.map(|r| r.rtr_id.clone()).unwrap_or_default(),
            valor: tx.value.to_cents_string(),
            natureza: r.map_or("ORIGINAL", |r| r.natureza.as_str()),
            descricao: tx.description.clone(),
            horario: Horario {
                solicitacao: iso(tx.created_at),
                liquidacao: tx.processed_at.filter(|_| tx.status == TxStatus::Confirmed).map(iso),
            },
            status: match tx.status {
                TxStatus::Pending => "EM_PROCESSAMENTO",
                TxStatus::Confirmed => "DEVOLVIDO",
                TxStatus::Error => "NAO_REALIZADO",
            },
            motivo: tx.error_message(),
        }
    }
}

/// What is wrong with a devolução path: the e2eid is 32 alphanumeric characters, the id 1
/// to 35.
fn devolucao_path(e2eid: &str, id: &str) -> Vec<Violation> {
    let mut bad = Vec::new();
    if e2eid.len() != E2E_LEN || !e2eid.bytes().all(|b| b.is_ascii_alphanumeric()) {
        bad.push(Violation::new("e2eid", "must be 32 alphanumeric characters"));
    }
    if id.is_empty() || id.len() > DEVOLUCAO_ID_LEN_MAX || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        bad.push(Violation::new("id", "must be 1 to 35 alphanumeric characters"));
    }
    bad
}

/// `valor`: a decimal string with exactly two places.
fn valor(f: &mut Fields<'_>) -> Option<Money> {
    let text = f.string("valor", true)?;
    match Money::parse_two_places(text) {
        Some(m) => Some(m),
        None => {
            f.fail_as(
                "valor",
                "must be a decimal string with 2 places, at least 0.01",
                ViolationKind::Amount,
            );
            None
        }
    }
}

#[utoipa::path(
    put, path = "/pix/{e2eid}/devolucao/{id}", tag = "family B",
    params(("e2eid" = String, Path, pattern = "^[A-Za-z0-9]{32}$", description = "end-to-end id of the received PIX, 32 letters and digits"),
           ("id" = String, Path, pattern = "^[A-Za-z0-9]{1,35}$", description = "the refund's id, 1 to 35 letters and digits"),
           ("X-Sandbox-Scenario" = Option<String>, Header, description = "cash-out family values (a refused or delayed return); sandbox accounts only")),
    request_body(content = super::schemas::DevolucaoRequest),
    responses(
        (status = 201, body = Devolucao),
        (status = 200, description = "The same id and valor again: the same refund", body = Devolucao),
        (status = 400, body = SimpleErrorBody),
        (status = 500, description = "PROVIDER_DOWN: the provider is unreachable; nothing recorded", body = SimpleErrorBody),
        (status = 404, description = "not a received PIX of this account", body = SimpleErrorBody),
        (status = 409, description = "the id exists with another valor", body = SimpleErrorBody),
        (status = 422, description = "the 89-day deadline has passed; insufficient balance", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn devolucao(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (e2eid, id) = path.into_inner();
    let scenario = payout_scenario(&req, &caller)?;
    let bad = devolucao_path(&e2eid, &id);
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    f.violations = bad;
    // Family B refuses a member it does not know (a typo never drops data silently).
    f.only(&["valor", "natureza", "descricao"]);
    let value = valor(&mut f);
    let natureza = match f.string("natureza", false) {
        None | Some("ORIGINAL") => Natureza::Original,
        Some("RETIRADA") => Natureza::Retirada,
        Some(_) => {
            f.fail("natureza", "must be ORIGINAL or RETIRADA");
            Natureza::Original
        }
    };
    let descricao = f.text("descricao", false, DESCRIPTION_LEN_MAX).map(str::to_owned);
    let (Some(value), true) = (value, f.violations.is_empty()) else {
        return Err(ApiError::Validation(f.violations));
    };
    refuse_if_provider_down(scenario)?;
    // The receipt, when the account paid itself and its payment carries the same id.
    let original = match state.repo.received_by_e2e(caller.account_id, &e2eid)? {
        Some(t) => Some(t),
        None => state.repo.transaction_by_e2e(caller.account_id, &e2eid)?,
    };
    let original = original
        .filter(|t| t.account_id == caller.account_id)
        .ok_or_else(|| ApiError::NotFound("no received PIX with this end-to-end id".into()))?;
    let request = RefundRequest {
        original_local_id: original.local_id,
        value,
        refund_id: Some(id),
        reason: descricao,
        natureza,
        family: Family::B,
        scenario,
    };
    let (tx, replayed) = ask_refund(&state, &caller, request).await?;
    let body = Devolucao::of(&tx);
    Ok(if replayed { HttpResponse::Ok().json(body) } else { HttpResponse::Created().json(body) })
}

#[utoipa::path(
    get, path = "/pix/{e2eid}/devolucao/{id}", tag = "family B",
    params(("e2eid" = String, Path, pattern = "^[A-Za-z0-9]{32}$", description = "end-to-end id of the received PIX, 32 letters and digits"),
           ("id" = String, Path, pattern = "^[A-Za-z0-9]{1,35}$", description = "the refund's id, 1 to 35 letters and digits")),
    responses(
        (status = 200, body = Devolucao),
        (status = 400, body = SimpleErrorBody),
        (status = 404, description = "no refund with this id of this account's received PIX", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_devolucao(
    caller: Caller,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (e2eid, id) = path.into_inner();
    let bad = devolucao_path(&e2eid, &id);
    if !bad.is_empty() {
        return Err(ApiError::Validation(bad));
    }
    // The id is the refund's externalId (one namespace with family A refunds), or, for a
    // refund made without one, its return id (what `devolucoes` shows as its id); it must
    // be a refund of the PIX this path names.
    let of_this_pix = |t: &Transaction| {
        t.account_id == caller.account_id
            && t.refund.as_ref().is_some_and(|r| r.original_end_to_end_id == e2eid)
    };
    let mut refund = state.repo.transaction_by_external_id(caller.account_id, &id)?.filter(of_this_pix);
    if refund.is_none() && id.len() == E2E_LEN {
        refund = state.repo.transaction_by_e2e(caller.account_id, &id)?.filter(|t| {
            of_this_pix(t) && t.refund.as_ref().is_some_and(|r| r.refund_id.is_none() && r.rtr_id == id)
        });
    }
    match refund {
        Some(tx) => Ok(HttpResponse::Ok().json(Devolucao::of(&tx))),
        None => {
            Err(ApiError::NotFound("no refund with this id of a PIX received with this end-to-end id".into()))
        }
    }
}
