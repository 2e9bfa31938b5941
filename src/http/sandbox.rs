//! Sandbox routes (interface.md "Sandbox scenarios"): only for sandbox accounts (403 otherwise,
//! answered by `authorize`, as the route table declares them).

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::ask::ask;
use super::auth::Caller;
use super::body::{request_object, Fields};
use super::error::{ApiError, ExtendedErrorBody};
use super::AppState;
use crate::account::{PayCharge, PixIn, ReturnPayment};
use crate::domain::decide::Payer;
use crate::domain::events::money_number;
use crate::domain::money::Money;
use crate::domain::transaction::{COUNTERPART_NAME_LEN_MAX, SANDBOX_PAYER_NAME};

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PixInCreated {
    transaction_id: String,
    end_to_end_id: String,
    #[schema(value_type = f64)]
    amount: Value,
    status: &'static str,
}

#[utoipa::path(
    post, operation_id = "sandbox_pix_in", path = "/sandbox/pix-in", tag = "sandbox",
    request_body(content = super::schemas::PixInRequest),
    responses((status = 201, body = PixInCreated), (status = 400, body = ExtendedErrorBody), (status = 403, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn pix_in(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    let amount = f.amount("amount", true);
    let payer_name =
        f.text("payerName", false, COUNTERPART_NAME_LEN_MAX).unwrap_or(SANDBOX_PAYER_NAME).to_owned();
    let payer_document = f.document("payerDocument", false).map(|t| t.to_string());
    let (Some(value), true) = (amount, f.violations.is_empty()) else {
        return Err(ApiError::Validation(f.violations));
    };
    let tx = ask(&state, &caller, PixIn { value, payer_name, payer_document }).await??;
    Ok(HttpResponse::Created().json(PixInCreated {
        transaction_id: tx.transaction_id.to_string(),
        end_to_end_id: tx.end_to_end_id,
        amount: money_number(tx.value),
        status: tx.status.as_str(),
    }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Paid {
    status: &'static str,
    end_to_end_id: String,
    transaction_id: String,
    txid: Option<String>,
}

/// The caller's charge named by exactly one of pixCode, transactionId, txid; the payer, if
/// the body names one (`payer {name, document}`); and the amount paid, if it names one
/// (else the amount due: a cobv's price of the day).
fn find_charge(
    state: &AppState,
    caller: &Caller,
    obj: &serde_json::Map<String, Value>,
) -> Result<(crate::domain::transaction::Transaction, Option<Payer>, Option<Money>), ApiError> {
    // Family A ignores members it does not know (docs/decisions.md "Unknown members").
    let mut f = Fields::new(obj);
    let amount = f.amount("amount", false);
    let payer = f
        .object("payer", |p| {
            let name = p.text("name", true, COUNTERPART_NAME_LEN_MAX).map(str::to_owned);
            let document = p.document("document", true);
            Some(Payer { name: name?, document: document?, end_to_end_id: None })
        })
        .flatten();
    let code = f.string("pixCode", false);
    let id = f.string("transactionId", false);
    let txid = f.string("txid", false);
    let given = [code.is_some(), id.is_some(), txid.is_some()].iter().filter(|g| **g).count();
    if given != 1 {
        f.fail("body", "must have exactly one of pixCode, transactionId and txid");
    }
    let from_code = code.and_then(|c| match crate::domain::brcode::parse(c) {
        Ok(p) => p.txid,
        Err(e) => {
            f.fail("pixCode", format!("is not a valid PIX code: it {e}"));
            None
        }
    });
    if !f.violations.is_empty() {
        return Err(ApiError::Validation(f.violations));
    }
    let found = match (from_code, txid, id) {
        (Some(reference), _, _) => state.repo.charge_by_code(caller.account_id, &reference)?,
        (None, Some(t), _) => state.repo.charge_by_txid(caller.account_id, t)?,
        (None, None, Some(id)) => match uuid::Uuid::try_parse(id) {
            Ok(u) => state.repo.transaction_by_uuid(&u)?,
            Err(_) => None,
        },
        (None, None, None) => None,
    };
    let charge = found
        .filter(|t| t.account_id == caller.account_id && t.charge.is_some())
        .ok_or_else(|| ApiError::NotFound("no charge of this account matches".into()))?;
    Ok((charge, payer, amount))
}

#[utoipa::path(
    post, operation_id = "sandbox_pay_charge", path = "/sandbox/pay", tag = "sandbox",
    request_body(content = super::schemas::SandboxPayRequest, description = "{pixCode} or {transactionId} or {txid}, payer? {name, document} and amount?: pays one of the caller's charges (the payer defaults to the charge's debtor, else the sandbox payer; the amount to the amount due today)"),
    responses(
        (status = 200, body = Paid),
        (status = 400, description = "invalid body, or PIX_INVALID_AMOUNT: an amount other than the amount due today", body = ExtendedErrorBody),
        (status = 403, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 422, description = "the charge is paid or expired", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn pay(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let obj = request_object(&req, &bytes)?;
    let (charge, payer, amount) = find_charge(&state, &caller, &obj)?;
    let tx = ask(&state, &caller, PayCharge { local_id: charge.local_id, payer, amount }).await??;
    Ok(HttpResponse::Ok().json(Paid {
        status: tx.status.as_str(),
        end_to_end_id: tx.end_to_end_id,
        transaction_id: tx.transaction_id.to_string(),
        txid: tx.charge.map(|c| c.txid),
    }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Returned {
    transaction_id: String,
    end_to_end_id: String,
}

#[utoipa::path(
    post, operation_id = "sandbox_refund_out", path = "/sandbox/refund-out", tag = "sandbox",
    request_body(content = super::schemas::RefundOutRequest),
    responses(
        (status = 201, body = Returned),
        (status = 400, body = ExtendedErrorBody),
        (status = 403, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn refund_out(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    let e2e = f.text("endToEndId", true, 32).map(str::to_owned);
    let amount = f.amount("amount", true);
    let (Some(e2e), Some(value), true) = (e2e, amount, f.violations.is_empty()) else {
        return Err(ApiError::Validation(f.violations));
    };
    let original = state
        .repo
        .transaction_by_e2e(caller.account_id, &e2e)?
        .filter(|t| t.account_id == caller.account_id)
        .ok_or_else(|| ApiError::NotFound("no payment of this account with this end-to-end id".into()))?;
    let tx = ask(&state, &caller, ReturnPayment { original_local_id: original.local_id, value }).await??;
    Ok(HttpResponse::Created()
        .json(Returned { transaction_id: tx.transaction_id.to_string(), end_to_end_id: tx.end_to_end_id }))
}
