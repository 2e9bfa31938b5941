//! `GET /api/transactions/{id}` (beyond the interface): one of the caller's transactions
//! by numeric id, transactionId, end-to-end id or externalId, with its current status.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::{ApiError, ExtendedErrorBody};
use super::{iso, AppState};
use crate::domain::events::money_number;
use crate::domain::transaction::Transaction;

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransactionView {
    transaction_id: String,
    id: u64,
    external_id: Option<String>,
    /// CASH_OUT, QR_CASH_OUT, DICT_PIX, PIX_IN, CASH_IN
    operation: String,
    status: &'static str,
    error_code: Option<&'static str>,
    error_message: Option<&'static str>,
    #[schema(value_type = f64)]
    original_amount: Value,
    #[schema(value_type = f64)]
    fee_amount: Value,
    end_to_end_id: String,
    created_at: String,
    processed_at: Option<String>,
    #[schema(value_type = Object)]
    counterpart: Value,
    /// A split's transfer: the numeric id of its charge.
    #[serde(skip_serializing_if = "Option::is_none")]
    split_of: Option<u64>,
    /// A paid charge: the numeric ids of the transfers its splits became.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    split_transactions: Vec<u64>,
    /// A scheduled split: when it goes to the bank.
    #[serde(skip_serializing_if = "Option::is_none")]
    scheduled_for: Option<String>,
}

impl From<&Transaction> for TransactionView {
    fn from(t: &Transaction) -> Self {
        TransactionView {
            transaction_id: t.transaction_id.to_string(),
            id: t.local_id,
            external_id: t.external_id.clone(),
            operation: serde_json::to_value(t.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            status: t.status.as_str(),
            error_code: t.error_code.map(|e| e.as_str()),
            error_message: t.error_code.map(|e| e.message()),
            original_amount: money_number(t.value),
            fee_amount: money_number(t.fee),
            end_to_end_id: t.end_to_end_id.clone(),
            created_at: iso(t.created_at),
            processed_at: t.processed_at.map(iso),
            counterpart: serde_json::to_value(&t.counterpart).unwrap_or(Value::Null),
            split_of: t.split_of,
            split_transactions: t.charge.as_ref().map(|c| c.split_transactions.clone()).unwrap_or_default(),
            scheduled_for: t.scheduled_for.map(iso),
        }
    }
}

#[utoipa::path(
    get, path = "/api/transactions/{id}", tag = "account",
    params(("id" = String, Path, description = "numeric id, transactionId, end-to-end id or externalId")),
    responses((status = 200, body = TransactionView), (status = 404, body = ExtendedErrorBody)),
    security(("bearer" = []))
)]
pub async fn get_transaction(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    match find_own(&state, &caller, &path.into_inner())? {
        Some(t) => Ok(HttpResponse::Ok().json(TransactionView::from(&t))),
        None => Err(ApiError::NotFound("transaction not found".into())),
    }
}

/// One of the caller's transactions by numeric id, transactionId, end-to-end id or
/// externalId, tried in that order; the first that names one of the caller's transactions
/// wins (an externalId that looks like a number is found once no transaction of the caller
/// has that number as its id).
pub fn find_own(state: &AppState, caller: &Caller, id: &str) -> Result<Option<Transaction>, ApiError> {
    let own = |t: Option<Transaction>| t.filter(|t| t.account_id == caller.account_id);
    if let Ok(local) = id.parse::<u64>() {
        if let Some(t) = own(state.repo.transaction(local)?) {
            return Ok(Some(t));
        }
    }
    if let Ok(uuid) = uuid::Uuid::try_parse(id) {
        if let Some(t) = own(state.repo.transaction_by_uuid(&uuid)?) {
            return Ok(Some(t));
        }
    }
    if let Some(t) = own(state.repo.transaction_by_e2e(id)?) {
        return Ok(Some(t));
    }
    Ok(own(state.repo.transaction_by_external_id(caller.account_id, id)?))
}
