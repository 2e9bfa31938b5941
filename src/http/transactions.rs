//! `GET /api/transactions` (interface.md "GET /api/transactions", with its filters and paging, read
//! through the storage index) and, beyond the interface, `GET /api/transactions/{id}`: one
//! of the caller's transactions by numeric id, transactionId, end-to-end id or externalId.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use std::collections::HashMap;

use chrono::NaiveDate;

use super::auth::Caller;
use super::body::{int_param, known_params};
use super::error::{ApiError, ExtendedErrorBody, Violation};
use super::{iso, AppState};
use crate::domain::document::masked_document;
use crate::domain::events::{bank_json, money_number};
use crate::domain::listing::{
    date_range, local_day, parse_status, status_display, Operation, PageInfo, PAGE_SIZE_DEFAULT,
    PAGE_SIZE_MAX,
};
use crate::domain::transaction::{BankInfo, Transaction, TxKind};
use crate::rail::sim::directory::Directory;

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"transactionId": "5cc07301-67d0-4d59-ab5c-c0730167d04e", "id": 3, "externalId": "order-1001",
    "operation": "CASH_OUT", "status": "CONFIRMED", "operationType": "Pix out", "movementType": "DEBIT",
    "errorCode": null, "errorMessage": null,
    "originalAmount": super::openapi::amount("10.50"), "feeAmount": super::openapi::amount("0.00"), "finalAmount": super::openapi::amount("10.50"), "endToEndId": "E99999999202611251200A0000000003",
    "createdAt": "2026-11-25T12:00:00.000Z", "processedAt": "2026-11-25T12:00:00.200Z",
    "counterpart": {"name": "Fabio Ferreira", "document": "***.690.060-**", "key": "98369006086", "keyType": "DOCUMENT",
        "bank": {"bankISPB": "60746948", "bankName": "Banco Bradesco S.A.", "bankCode": "237", "accountBranch": "8065", "accountNumber": "3815772-5"}}}))]
pub struct TransactionView {
    transaction_id: String,
    id: u64,
    external_id: Option<String>,
    /// CASH_OUT, QR_CASH_OUT, DICT_PIX, PIX_IN, CASH_IN
    operation: String,
    status: &'static str,
    /// The list's words for the same transaction: `Pix in`, `Pix out`, `Refund in`, `Refund out`...
    operation_type: &'static str,
    /// `CREDIT` or `DEBIT`, as the list and the webhooks say.
    movement_type: &'static str,
    error_code: Option<&'static str>,
    error_message: Option<String>,
    #[schema(value_type = f64)]
    original_amount: Value,
    #[schema(value_type = f64)]
    fee_amount: Value,
    /// What moves in the balance: the amount with its fee, as the list shows it.
    #[schema(value_type = Option<f64>)]
    final_amount: Value,
    end_to_end_id: String,
    created_at: String,
    processed_at: Option<String>,
    #[schema(value_type = super::schemas::CounterpartView)]
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
    /// A payment the risk rule flagged: it went, and this says why.
    #[serde(skip_serializing_if = "Option::is_none")]
    risk: Option<super::payments::RiskView>,
}

impl TransactionView {
    fn of(t: &Transaction, directory: &Directory) -> Self {
        TransactionView {
            transaction_id: t.transaction_id.to_string(),
            id: t.local_id,
            external_id: t.external_id.clone(),
            operation: serde_json::to_value(t.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            status: t.status.as_str(),
            operation_type: Operation::of(t.kind).display(),
            movement_type: Operation::of(t.kind).movement(),
            error_code: t.error_code.map(|e| e.as_str()),
            error_message: t.error_message(),
            original_amount: money_number(t.value),
            fee_amount: money_number(t.fee),
            final_amount: t.final_amount().map(money_number).unwrap_or(Value::Null),
            end_to_end_id: t.end_to_end_id.clone(),
            created_at: iso(t.created_at),
            processed_at: t.processed_at.map(iso),
            counterpart: counterpart_view(t, directory),
            split_of: t.split_of,
            split_transactions: t.charge.as_ref().map(|c| c.split_transactions.clone()).unwrap_or_default(),
            scheduled_for: t.scheduled_for.map(iso),
            risk: super::payments::RiskView::of(t),
        }
    }
}

/// The counterpart with its key type in the words of the route that made the transfer: a
/// family A cash-out says DOCUMENT and RANDOM, a split CPF, CNPJ and RANDOM, `/dict/pix`
/// the directory's CPF, CNPJ and EVP.
fn counterpart_view(t: &Transaction, directory: &Directory) -> Value {
    let mut v = serde_json::to_value(&t.counterpart).unwrap_or(Value::Null);
    // Masked, and the bank named, as in the list (docs/interface.md "Documents").
    if let Some(obj) = v.as_object_mut() {
        let shown = masked_document(t.counterpart.document.as_deref());
        obj.insert("document".into(), shown.map_or(Value::Null, Value::String));
        let bank = shown_bank(t, directory);
        obj.insert("bank".into(), bank.as_ref().map_or(Value::Null, bank_json));
    }
    if let (Some(kt), Some(obj)) = (t.counterpart.key_type, v.as_object_mut()) {
        let name = match (t.kind, t.split_of) {
            (TxKind::DictPix, _) => kt.directory_name(),
            (_, Some(_)) => kt.split_name(),
            _ => kt.cash_out_name(),
        };
        obj.insert("keyType".into(), Value::String(name.into()));
    }
    v
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
        Some(t) => Ok(HttpResponse::Ok().json(TransactionView::of(&t, &state.directory))),
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
    if let Some(t) = own(state.repo.transaction_by_e2e(caller.account_id, id)?) {
        return Ok(Some(t));
    }
    Ok(own(state.repo.transaction_by_external_id(caller.account_id, id)?))
}

/// One transaction as the list shows it (interface.md "GET /api/transactions").
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListedTransaction {
    transaction_id: String,
    /// The numeric id (beyond the interface).
    id: u64,
    external_id: Option<String>,
    /// `Pendente`, `Confirmado`, `Error`
    status: &'static str,
    /// `Pix in`, `Pix out`, `Refund in`, `Refund out`
    operation_type: &'static str,
    /// `CREDIT` or `DEBIT`
    movement_type: &'static str,
    #[schema(value_type = f64)]
    original_amount: Value,
    #[schema(value_type = f64)]
    fee_amount: Value,
    #[schema(value_type = f64)]
    final_amount: Value,
    end_to_end_id: String,
    created_at: String,
    processed_at: Option<String>,
    #[schema(value_type = super::schemas::ListedCounterpart)]
    counterpart: Value,
}

impl ListedTransaction {
    fn of(t: &Transaction, directory: &Directory) -> ListedTransaction {
        let op = Operation::of(t.kind);
        let bank = shown_bank(t, directory);
        let document = masked_document(t.counterpart.document.as_deref());
        ListedTransaction {
            transaction_id: t.transaction_id.to_string(),
            id: t.local_id,
            external_id: t.external_id.clone(),
            status: status_display(t.status),
            operation_type: op.display(),
            movement_type: op.movement(),
            original_amount: money_number(t.value),
            fee_amount: money_number(t.fee),
            final_amount: t.final_amount().map(money_number).unwrap_or(Value::Null),
            end_to_end_id: t.end_to_end_id.clone(),
            created_at: iso(t.created_at),
            processed_at: t.processed_at.map(iso),
            counterpart: serde_json::json!({
                "name": t.counterpart.name,
                "document": document,
                "bank": bank.as_ref().map(bank_json),
            }),
        }
    }
}

/// The bank a transaction's counterpart is shown with. A transfer not yet settled has no
/// bank from the bank's answer: the directory's entry of its key says where it goes.
fn shown_bank(t: &Transaction, directory: &Directory) -> Option<BankInfo> {
    t.counterpart.bank.clone().or_else(|| {
        let key = crate::domain::pix_key::parse_directory_key(t.counterpart.key.as_deref()?).ok()?;
        directory.bank_of(directory.lookup(&key)?)
    })
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PageMetadata {
    page: u32,
    size: u32,
    total: u64,
    total_pages: u64,
    has_next: bool,
    has_previous: bool,
}

#[derive(Serialize, ToSchema)]
pub struct TransactionPage {
    data: Vec<ListedTransaction>,
    metadata: PageMetadata,
}

const LIST_PARAMS: [&str; 8] =
    ["page", "size", "status", "type", "startDate", "endDate", "externalId", "endToEndId"];

#[utoipa::path(
    get, path = "/api/transactions", tag = "account",
    params(
        ("page" = Option<u32>, Query, minimum = 1, description = "from 1, default 1"),
        ("size" = Option<u32>, Query, minimum = 1, maximum = 100, description = "1 to 100, default 20"),
        ("status" = Option<String>, Query, description = "PENDING, CONFIRMED or ERROR"),
        ("type" = Option<String>, Query, description = "PAYMENT, WITHDRAW, REFUND_IN or REFUND_OUT"),
        ("startDate" = Option<String>, Query, description = "YYYY-MM-DD, a Sao Paulo day; default endDate - 31 days"),
        ("endDate" = Option<String>, Query, description = "YYYY-MM-DD, a Sao Paulo day; default today"),
        ("externalId" = Option<String>, Query, description = "only this externalId"),
        ("endToEndId" = Option<String>, Query, description = "only this end-to-end id"),
    ),
    responses(
        (status = 200, description = "Newest first", body = TransactionPage),
        (status = 400, description = "An invalid parameter, or more than 31 days", body = ExtendedErrorBody),
        (status = 401, body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_transactions(
    caller: Caller,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let mut v = Vec::new();
    known_params(&q, &LIST_PARAMS, &mut v);
    let page = int_param(&q, "page", 1..=u32::MAX, 1, &mut v);
    let size = int_param(&q, "size", 1..=PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT, &mut v);
    let status = q.get("status").and_then(|s| {
        let parsed = parse_status(s);
        if parsed.is_none() {
            v.push(Violation::new("status", "must be PENDING, CONFIRMED or ERROR"));
        }
        parsed
    });
    let operation = q.get("type").and_then(|t| {
        let parsed = Operation::parse(t);
        if parsed.is_none() {
            v.push(Violation::new("type", "must be PAYMENT, WITHDRAW, REFUND_IN or REFUND_OUT"));
        }
        parsed
    });
    let mut date = |name: &str| {
        q.get(name).and_then(|d| match NaiveDate::parse_from_str(d, "%Y-%m-%d") {
            Ok(day) => Some(day),
            Err(_) => {
                v.push(Violation::new(name, "must be a date, YYYY-MM-DD"));
                None
            }
        })
    };
    let (start, end) = (date("startDate"), date("endDate"));
    let range = match date_range(start, end, state.clock.now()) {
        Ok(r) => Some(r),
        Err(e) => {
            v.push(Violation::new("startDate", e.to_string()));
            None
        }
    };
    let Some((first, last)) = range.filter(|_| v.is_empty()) else {
        return Err(ApiError::Validation(v));
    };
    let info_of = |total| PageInfo::new(page, size, total);
    let single = match (q.get("externalId"), q.get("endToEndId")) {
        (None, None) => None,
        (ext, e2e) => {
            // Two transactions at most (an account that paid itself on us has both sides
            // under one end-to-end id): look them up, then apply the other filters.
            let mut found = match ext {
                Some(x) => state.repo.transaction_by_external_id(caller.account_id, x)?.into_iter().collect(),
                None => state.repo.transactions_by_e2e(caller.account_id, e2e.map_or("", String::as_str))?,
            };
            found.retain(|t| {
                let day = local_day(t.created_at);
                t.account_id == caller.account_id
                    // With both filters, the externalId's transaction must carry the id.
                    && (ext.is_none() || e2e.is_none_or(|e| &t.end_to_end_id == e))
                    && (first..=last).contains(&day)
                    && status.is_none_or(|s| s == t.status)
                    && operation.is_none_or(|o| o == Operation::of(t.kind))
            });
            // Newest first, as the list is.
            found.sort_by_key(|t| std::cmp::Reverse((t.created_at, t.local_id)));
            Some(found)
        }
    };
    let (rows, total) = match single {
        Some(found) => {
            let total = found.len() as u64;
            let skip = usize::try_from(info_of(total).offset()).unwrap_or(usize::MAX);
            (found.into_iter().skip(skip).take(size as usize).collect(), total)
        }
        None => state.repo.transactions_page(
            caller.account_id,
            (first, last),
            (status, operation),
            info_of(0).offset(),
            size as usize,
        )?,
    };
    let info = info_of(total);
    Ok(HttpResponse::Ok().json(TransactionPage {
        data: rows.iter().map(|t| ListedTransaction::of(t, &state.directory)).collect(),
        metadata: PageMetadata {
            page: info.page,
            size: info.size,
            total: info.total,
            total_pages: info.total_pages,
            has_next: info.has_next,
            has_previous: info.has_previous,
        },
    }))
}
