//! Received PIX, as the API Pix shows them: `GET /pix/{e2eid}` and `GET /pix` (family B).
//!
//! A received PIX is a payment in that settled: a PIX received on the account's key, or a
//! charge (a cob or a family A cash-in) that was paid. Each is shown with its end-to-end
//! id, the txid of the charge it paid, the value, the account's key, when it settled, the
//! payer, and its refunds (`devolucoes`). A paid cob shows the same object in its `pix`.

use std::collections::HashMap;

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use super::api_pix::{read_list_window, ListWindow};
use super::auth::Caller;
use super::cob::receiving_key;
use super::error::{ApiError, SimpleErrorBody, Violation};
use super::refunds::Devolucao;
use super::AppState;
use crate::domain::transaction::{Transaction, COB_TXID_LEN_MAX};

const PIX_LIST_PARAMS: [&str; 9] = [
    "inicio",
    "fim",
    "txid",
    "txIdPresente",
    "devolucaoPresente",
    "cpf",
    "cnpj",
    "paginacao.paginaAtual",
    "paginacao.itensPorPagina",
];

/// Whether `t` is a PIX the account received (settled).
pub fn is_received(t: &Transaction) -> bool {
    t.is_received()
}

/// The API Pix's view of a received PIX with its devoluções (`GET /pix`, a cob's and a
/// cobr's `pix`).
pub fn pix_view(t: &Transaction, receiving_key: &str, refunds: &[Transaction]) -> Value {
    let mut v = crate::domain::events::pix_json(t, receiving_key);
    v["devolucoes"] =
        refunds.iter().map(|r| serde_json::to_value(Devolucao::of(r)).unwrap_or(Value::Null)).collect();
    v
}

/// The filters of `GET /pix` beyond the window.
#[derive(Debug, Clone, PartialEq)]
struct PixQuery {
    window: ListWindow,
    txid: Option<String>,
    txid_present: Option<bool>,
    refund_present: Option<bool>,
}

/// A query flag: `true` or `false`.
pub(super) fn flag(q: &HashMap<String, String>, name: &str, v: &mut Vec<Violation>) -> Option<bool> {
    q.get(name).and_then(|t| match t.as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => {
            v.push(Violation::new(name, "must be true or false"));
            None
        }
    })
}

fn read_pix_query(q: &HashMap<String, String>) -> Result<PixQuery, ApiError> {
    let mut v = Vec::new();
    super::body::known_params(q, &PIX_LIST_PARAMS, &mut v);
    let window = read_list_window(q, &mut v);
    let txid = q.get("txid").cloned();
    if txid.as_ref().is_some_and(|t| {
        t.is_empty() || t.len() > COB_TXID_LEN_MAX || !t.bytes().all(|b| b.is_ascii_alphanumeric())
    }) {
        v.push(Violation::new("txid", format!("must be 1 to {COB_TXID_LEN_MAX} letters and digits")));
    }
    let txid_present = flag(q, "txIdPresente", &mut v);
    let refund_present = flag(q, "devolucaoPresente", &mut v);
    match (window, v.is_empty()) {
        (Some(window), true) => Ok(PixQuery { window, txid, txid_present, refund_present }),
        _ => Err(ApiError::Validation(v)),
    }
}

#[utoipa::path(
    get, operation_id = "get_pix", path = "/pix/{e2eid}", tag = "family B",
    params(("e2eid" = String, Path, pattern = "^[A-Za-z0-9]{32}$", description = "the end-to-end id of a PIX the account received")),
    responses(
        (status = 200, description = "The received PIX with its refunds", body = super::schemas::PixView),
        (status = 400, body = SimpleErrorBody),
        (status = 401, body = SimpleErrorBody),
        (status = 404, description = "no PIX received by this account has this end-to-end id", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
/// `GET /pix/{e2eid}`: one received PIX.
pub async fn get_pix(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let e2eid = path.into_inner();
    if e2eid.len() != super::refunds::E2E_LEN || !e2eid.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(ApiError::Validation(vec![Violation::new(
            "e2eid",
            "must be 32 alphanumeric characters",
        )]));
    }
    let tx = state
        .repo
        .received_by_e2e(caller.account_id, &e2eid)?
        .filter(|t| t.account_id == caller.account_id)
        .ok_or_else(|| ApiError::NotFound("no PIX received by this account has this end-to-end id".into()))?;
    let refunds = state.repo.refunds_of(caller.account_id, &[&tx])?;
    let key = receiving_key(&state, &caller)?;
    let none = Vec::new();
    Ok(HttpResponse::Ok().json(pix_view(&tx, &key, refunds.get(&tx.local_id).unwrap_or(&none))))
}

#[utoipa::path(
    get, operation_id = "list_pix", path = "/pix", tag = "family B",
    params(
        ("inicio" = String, Query, description = "RFC 3339: PIX received (horario) at or after (required)"),
        ("fim" = String, Query, description = "RFC 3339: received at or before, at most 31 days after inicio (required)"),
        ("txid" = Option<String>, Query, description = "only the PIX that paid this txid"),
        ("txIdPresente" = Option<bool>, Query, description = "true: only PIX that paid a charge; false: only the others"),
        ("devolucaoPresente" = Option<bool>, Query, description = "true: only PIX with a refund; false: only those without"),
        ("cpf" = Option<String>, Query, description = "the payer's CPF; not with cnpj"),
        ("cnpj" = Option<String>, Query, description = "the payer's CNPJ; not with cpf"),
        ("paginacao.paginaAtual" = Option<u32>, Query, minimum = 0, description = "from 0, default 0"),
        ("paginacao.itensPorPagina" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "1 to 1000, default 100"),
    ),
    responses(
        (status = 200, description = "Newest first by horario, with the filters echoed", body = super::schemas::PixList),
        (status = 400, body = SimpleErrorBody),
        (status = 401, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
/// `GET /pix`: the PIX the account received in a range.
pub async fn list_pix(
    caller: Caller,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = read_pix_query(&query.into_inner())?;
    let keep = |t: &Transaction| {
        let txid = crate::domain::events::paid_txid(t);
        is_received(t)
            && q.txid.as_deref().is_none_or(|want| txid == Some(want))
            && q.txid_present.is_none_or(|present| txid.is_some() == present)
            && q.refund_present.is_none_or(|present| t.refunded.is_zero() != present)
            && q.window
                .document
                .as_ref()
                .is_none_or(|(_, d)| t.counterpart.document.as_deref() == Some(d.as_str()))
    };
    let (skip, size) = q.window.skip_take();
    let w = &q.window;
    let (page, total) =
        state.repo.received_in_page(caller.account_id, (w.inicio, w.fim), keep, skip, size)?;
    let refunds = state.repo.refunds_of(caller.account_id, &page.iter().collect::<Vec<_>>())?;
    let key = receiving_key(&state, &caller)?;
    let none = Vec::new();
    let mut parametros = w.parametros(total);
    if let Some(t) = &q.txid {
        parametros["txid"] = json!(t);
    }
    if let Some(p) = q.txid_present {
        parametros["txIdPresente"] = json!(p);
    }
    if let Some(p) = q.refund_present {
        parametros["devolucaoPresente"] = json!(p);
    }
    let pix: Vec<Value> =
        page.iter().map(|t| pix_view(t, &key, refunds.get(&t.local_id).unwrap_or(&none))).collect();
    Ok(HttpResponse::Ok().json(json!({"parametros": parametros, "pix": pix})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::testing::violations;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_pix_list_query_reads_its_flags_and_refuses_what_it_does_not_know() {
        let range = [("inicio", "2026-11-01T00:00:00Z"), ("fim", "2026-11-02T00:00:00Z")];
        let mut pairs = range.to_vec();
        pairs.extend([("txIdPresente", "true"), ("devolucaoPresente", "false"), ("txid", "abc123")]);
        let q = read_pix_query(&query(&pairs)).unwrap();
        assert_eq!(
            (q.txid_present, q.refund_present, q.txid.as_deref()),
            (Some(true), Some(false), Some("abc123"))
        );
        let mut bad = range.to_vec();
        bad.extend([("txIdPresente", "yes"), ("txid", "a-b"), ("status", "ATIVA")]);
        let fields: Vec<String> =
            violations(read_pix_query(&query(&bad)).err().unwrap()).into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, vec!["status", "txid", "txIdPresente"]);
    }
}
