//! Pix Automático's recurring charges, as the API Pix has them: `PUT /cobr/{txid}` and
//! `POST /cobr` make one for a cycle of an approved recurrence, `GET /cobr/{txid}` reads it
//! with its attempts, `PATCH /cobr/{txid}` cancels it before it settles, `GET /cobr` lists,
//! and `POST /cobr/{txid}/retentativa/{data}` asks for a retry after a failed attempt.
//!
//! The payer's institution settles a charge on its day by itself (the account's actor keeps
//! a timer for it); a settled charge is a received PIX of the account (`GET /pix` shows it
//! with the charge's txid). What the sandbox's institution meets when it tries is the
//! `X-Sandbox-Scenario` the charge was made with (`domain::cobr::SettleScenario`).

use std::collections::HashMap;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::NaiveDate;
use serde_json::{json, Value};

use super::api_pix::read_list_window;
use super::ask::ask;
use super::auth::Caller;
use super::body::{request_object, Fields};
use super::cob::check_txid;
use super::error::{ApiError, SimpleErrorBody, Violation};
use super::payments::SCENARIO_HEADER;
use super::rec::{check_id, read_cancel, status_param, valor};
use super::rec_schemas as s;
use super::AppState;
use crate::account::{ChangeCobr, CreateCobr};
use crate::domain::cobr::{
    Cobr, CobrStatus, DebtorDetails, ReceiverAccount, SettleScenario, DEBTOR_ADDRESS_LEN_MAX,
    DEBTOR_CEP_LEN_MAX, DEBTOR_UF_LEN_MAX, INFO_ADICIONAL_LEN_MAX, RECEIVER_ACCOUNT_LEN_MAX,
    RECEIVER_ACCOUNT_TYPES, RECEIVER_BRANCH_LEN_MAX, SETTLE_SCENARIOS,
};
use crate::domain::decide::{CobrChange, CobrRequest};
use crate::domain::rec::ID_SHAPE;

/// The `X-Sandbox-Scenario` of a recurring charge: sandbox accounts only.
fn scenario(req: &HttpRequest, caller: &Caller) -> Result<SettleScenario, ApiError> {
    let Some(raw) = req.headers().get(SCENARIO_HEADER) else { return Ok(SettleScenario::Pay) };
    let fail = |m: String| ApiError::Validation(vec![Violation::new("X-Sandbox-Scenario", m)]);
    if !caller.sandbox {
        return Err(fail("is only accepted for sandbox accounts".into()));
    }
    raw.to_str()
        .ok()
        .and_then(SettleScenario::parse)
        .ok_or_else(|| fail(format!("must be one of {SETTLE_SCENARIOS}")))
}

/// A recurring charge's request: (idRec, what it asks for but the txid and scenario).
fn read_cobr(
    obj: &serde_json::Map<String, Value>,
    txid: String,
    scenario: SettleScenario,
) -> Result<CreateCobr, ApiError> {
    let mut f = Fields::new(obj);
    f.only(&["idRec", "calendario", "valor", "ajusteDiaUtil", "infoAdicional", "recebedor", "devedor"]);
    let id_rec = f.string("idRec", true).map(str::to_owned);
    if id_rec.as_deref().is_some_and(|id| check_id(id, "idRec").is_err()) {
        f.fail("idRec", ID_SHAPE);
    }
    let due = f
        .object("calendario", |c| {
            c.only(&["dataDeVencimento"]);
            c.date("dataDeVencimento", true)
        })
        .flatten();
    if obj.get("calendario").is_none() {
        f.fail("calendario", "is required");
    }
    let value = f
        .object("valor", |v| {
            v.only(&["original"]);
            valor(v, "original", true)
        })
        .flatten();
    if obj.get("valor").is_none() {
        f.fail("valor", "is required");
    }
    // The API Pix lists it as required and gives it a default: absent, it is the default.
    let adjust = f.boolean("ajusteDiaUtil").unwrap_or(true);
    let info = f.text("infoAdicional", false, INFO_ADICIONAL_LEN_MAX).map(str::to_owned);
    let receiver_account = f.object("recebedor", read_receiver_account).flatten();
    let debtor_details = f.object("devedor", read_debtor_details);
    match (id_rec, due, value, f.violations.is_empty()) {
        (Some(id_rec), Some(due), Some(value), true) => Ok(CreateCobr {
            id_rec,
            request: CobrRequest {
                txid,
                due,
                adjust,
                value,
                info,
                scenario,
                receiver_account,
                debtor_details,
            },
        }),
        _ => Err(ApiError::Validation(f.violations)),
    }
}

/// `recebedor` (`DadosBancariosRecebedor`): `conta` and `tipoConta` required, `agencia`.
fn read_receiver_account(r: &mut Fields) -> Option<ReceiverAccount> {
    r.only(&["conta", "tipoConta", "agencia"]);
    let account = r.text("conta", true, RECEIVER_ACCOUNT_LEN_MAX).map(str::to_owned);
    let account_type = r.string("tipoConta", true).map(str::to_owned);
    if account_type.as_deref().is_some_and(|t| !RECEIVER_ACCOUNT_TYPES.contains(&t)) {
        r.fail("tipoConta", format!("must be one of {}", RECEIVER_ACCOUNT_TYPES.join(", ")));
    }
    let branch = r.text("agencia", false, RECEIVER_BRANCH_LEN_MAX).map(str::to_owned);
    match (account, account_type) {
        (Some(account), Some(account_type)) if RECEIVER_ACCOUNT_TYPES.contains(&account_type.as_str()) => {
            Some(ReceiverAccount { account, account_type, branch })
        }
        _ => None,
    }
}

/// `devedor` (`DadosDevedorRecorrencia`): optional texts of the debtor's address.
fn read_debtor_details(d: &mut Fields) -> DebtorDetails {
    d.only(&["email", "logradouro", "cidade", "uf", "cep"]);
    let mut text = |name: &str, max: usize| d.text(name, false, max).map(str::to_owned);
    DebtorDetails {
        email: text("email", DEBTOR_ADDRESS_LEN_MAX),
        street: text("logradouro", DEBTOR_ADDRESS_LEN_MAX),
        city: text("cidade", DEBTOR_ADDRESS_LEN_MAX),
        uf: text("uf", DEBTOR_UF_LEN_MAX),
        // Kept as its 8 digits: the API Pix's answer allows 8 characters, and its own
        // example writes the hyphen.
        cep: text("cep", DEBTOR_CEP_LEN_MAX).map(|c| c.replace('-', "")),
    }
}

async fn create(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
    txid: String,
) -> Result<HttpResponse, ApiError> {
    let scenario = scenario(&req, &caller)?;
    let obj = request_object(&req, &bytes)?;
    let msg = read_cobr(&obj, txid, scenario)?;
    let cobr = ask(&state, &caller, msg).await??;
    Ok(HttpResponse::Created().json(cobr.to_json()))
}

#[utoipa::path(
    put, path = "/cobr/{txid}", tag = "automatic-pix",
    params(
        ("txid" = String, Path, pattern = "^[A-Za-z0-9]{26,35}$", description = "26 to 35 letters and digits"),
        ("X-Sandbox-Scenario" = Option<String>, Header, description = "PAY, NO_FUNDS, NO_FUNDS_<1 to 9>, ACCOUNT_CLOSED: what the payer's institution meets when it settles; sandbox accounts only"),
    ),
    request_body(content = s::CobrRequest),
    responses(
        (status = 201, description = "The charge, ATIVA, its first attempt scheduled", body = s::CobrView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, description = "No recurrence with this idRec", body = SimpleErrorBody),
        (status = 409, description = "The txid is taken, the recurrence is not APROVADA, or the cycle has a charge", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn put_cobr(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let txid = path.into_inner();
    check_txid(&txid)?;
    create(caller, req, bytes, state, txid).await
}

#[utoipa::path(
    post, path = "/cobr", tag = "automatic-pix",
    params(("X-Sandbox-Scenario" = Option<String>, Header, description = "as on PUT /cobr/{txid}; sandbox accounts only")),
    request_body(content = s::CobrRequest),
    responses(
        (status = 201, description = "The charge, ATIVA, with a txid the server chose", body = s::CobrView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, description = "No recurrence with this idRec", body = SimpleErrorBody),
        (status = 409, description = "The recurrence is not APROVADA, or the cycle has a charge", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn post_cobr(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let txid = uuid::Uuid::new_v4().simple().to_string();
    create(caller, req, bytes, state, txid).await
}

/// The caller's recurring charge with this txid.
/// The charge as the API Pix reads it (`CobRCompleta`): once paid, with its `pix`, the
/// received PIX that paid it and its devoluções.
fn view(state: &AppState, caller: &Caller, cobr: &Cobr) -> Result<Value, ApiError> {
    let mut out = cobr.to_json();
    let paid = match cobr.paid_end_to_end_id() {
        Some(e2e) => state.repo.received_by_e2e(caller.account_id, e2e)?,
        None => None,
    };
    if let Some(tx) = paid {
        let refunds = state.repo.refunds_of(caller.account_id, &[&tx])?;
        let key = super::cob::receiving_key(state, caller)?;
        let of_it = refunds.get(&tx.local_id).map_or(&[][..], Vec::as_slice);
        out["pix"] = json!([super::received::pix_view(&tx, &key, of_it)]);
    }
    Ok(out)
}

fn find(state: &AppState, caller: &Caller, txid: &str) -> Result<Cobr, ApiError> {
    check_txid(txid)?;
    state
        .repo
        .cobr_by_txid(caller.account_id, txid)?
        .ok_or_else(|| ApiError::NotFound("no recurring charge with this txid".into()))
}

#[utoipa::path(
    get, path = "/cobr/{txid}", tag = "automatic-pix",
    params(("txid" = String, Path, pattern = "^[A-Za-z0-9]{26,35}$", description = "26 to 35 letters and digits")),
    responses(
        (status = 200, description = "The charge as it is now, with its attempts", body = s::CobrView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_cobr(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let cobr = find(&state, &caller, &path.into_inner())?;
    Ok(HttpResponse::Ok().json(view(&state, &caller, &cobr)?))
}

#[utoipa::path(
    patch, path = "/cobr/{txid}", tag = "automatic-pix",
    params(("txid" = String, Path, pattern = "^[A-Za-z0-9]{26,35}$", description = "26 to 35 letters and digits")),
    request_body(content = s::RecPatch),
    responses(
        (status = 200, description = "The cancelled charge", body = s::CobrView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, body = SimpleErrorBody),
        (status = 409, description = "The charge already settled or ended", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn patch_cobr(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let txid = path.into_inner();
    check_txid(&txid)?;
    read_cancel(&req, &bytes)?;
    let cobr = ask(&state, &caller, ChangeCobr { txid, change: CobrChange::Cancel }).await??;
    Ok(HttpResponse::Ok().json(cobr.to_json()))
}

#[utoipa::path(
    post, operation_id = "retry_cobr", path = "/cobr/{txid}/retentativa/{data}", tag = "automatic-pix",
    params(
        ("txid" = String, Path, pattern = "^[A-Za-z0-9]{26,35}$", description = "26 to 35 letters and digits"),
        ("data" = String, Path, description = "YYYY-MM-DD: the day to try again, today or later, within 7 days of the settlement day"),
    ),
    responses(
        (status = 201, description = "The charge with the retry scheduled", body = s::CobrView),
        (status = 400, description = "The date breaks a rule of retries, or the recurrence allows none", body = SimpleErrorBody),
        (status = 404, body = SimpleErrorBody),
        (status = 409, description = "No failed attempt to retry, a retry already scheduled, or the charge ended", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn retry(
    caller: Caller,
    path: web::Path<(String, String)>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let (txid, data) = path.into_inner();
    check_txid(&txid)?;
    let day = NaiveDate::parse_from_str(&data, "%Y-%m-%d").ok().filter(|_| data.len() == 10);
    let Some(day) = day else {
        return Err(ApiError::Validation(vec![Violation::new("data", "must be a date, YYYY-MM-DD")]));
    };
    let cobr = ask(&state, &caller, ChangeCobr { txid, change: CobrChange::Retry(day) }).await??;
    Ok(HttpResponse::Created().json(cobr.to_json()))
}

#[utoipa::path(
    get, path = "/cobr", tag = "automatic-pix",
    params(
        ("inicio" = String, Query, description = "RFC 3339: charges made at or after it"),
        ("fim" = String, Query, description = "RFC 3339: and at or before it (at most 31 days after inicio)"),
        ("idRec" = Option<String>, Query, description = "Only this recurrence's"),
        ("status" = Option<String>, Query, description = "CRIADA, ATIVA, CONCLUIDA, EXPIRADA, REJEITADA or CANCELADA"),
        ("paginacao.paginaAtual" = Option<u32>, Query, description = "The page, from 0"),
        ("paginacao.itensPorPagina" = Option<u32>, Query, description = "1 to 1000, default 100"),
    ),
    responses(
        (status = 200, description = "Newest first, with the filters echoed", body = s::CobrList),
        (status = 400, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_cobrs(
    caller: Caller,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let mut v = Vec::new();
    super::body::known_params(
        &q,
        &[
            "inicio",
            "fim",
            "idRec",
            "cpf",
            "cnpj",
            "status",
            "convenio",
            "paginacao.paginaAtual",
            "paginacao.itensPorPagina",
        ],
        &mut v,
    );
    let window = read_list_window(&q, &mut v);
    let allowed = "CRIADA, ATIVA, CONCLUIDA, EXPIRADA, REJEITADA or CANCELADA";
    let status = status_param(&q, CobrStatus::parse, allowed, &mut v);
    let agreement = super::rec::agreement_param(&q, &mut v);
    let id_rec = q.get("idRec");
    let (Some(w), true) = (window, v.is_empty()) else { return Err(ApiError::Validation(v)) };
    let keep = |c: &Cobr| {
        (w.inicio..=w.fim).contains(&c.created_at)
            && status.is_none_or(|s| c.status == s)
            && id_rec.is_none_or(|id| &c.id_rec == id)
            && w.document.as_ref().is_none_or(|(_, d)| c.debtor_document.as_ref() == Some(d))
            && agreement.is_none_or(|a| c.agreement.as_deref() == Some(a))
    };
    let (skip, size) = w.skip_take();
    let (page, total) = state.repo.cobrs_page(caller.account_id, keep, skip, size)?;
    let mut parametros = w.parametros(total);
    if let Some(s) = status {
        parametros["status"] = json!(s.as_str());
    }
    if let Some(id) = id_rec {
        parametros["idRec"] = json!(id);
    }
    if let Some(a) = agreement {
        parametros["recebedor"] = json!({"convenio": a});
    }
    let cobrs = page.iter().map(|c| view(&state, &caller, c)).collect::<Result<Vec<Value>, ApiError>>()?;
    Ok(HttpResponse::Ok().json(json!({"parametros": parametros, "cobsr": cobrs})))
}
