//! Pix Automático, the receiver's side as the API Pix has it: recurrences (`POST /rec`,
//! `GET /rec/{idRec}`, `GET /rec`, `PATCH /rec/{idRec}` to cancel), requests for the payer's
//! authorisation (`POST /solicrec`, `GET /solicrec/{idSolicRec}`, `PATCH
//! /solicrec/{idSolicRec}` to withdraw), locations for journey 2's QR code (`POST /locrec`,
//! `GET /locrec/{id}`, `GET /locrec`), and the sandbox's payer's institution, which
//! answers a request and may cancel an authorised recurrence (`/sandbox/solicrec/...`,
//! `/sandbox/rec/...`).
//!
//! Reads go to storage; every change goes to the account's actor (`account::recs`), which
//! decides it with `domain::rec`'s life cycle.

use std::collections::HashMap;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::api_pix::read_list_window;
use super::ask::ask;
use super::auth::Caller;
use super::body::{request_object, Fields};
use super::cob::devedor;
use super::error::{ApiError, ExtendedErrorBody, SimpleErrorBody, Violation, ViolationKind};
use super::rec_schemas as s;
use super::AppState;
use crate::account::{ChangeRec, CreateLocRec, CreateRec, RecRef, UnlinkLocRec};
use crate::domain::decide::RecChange;
use crate::domain::ids::AccountId;
use crate::domain::money::Money;
use crate::domain::rec::{
    is_id_shaped, rec_local, solicitation_local, Answer, CodMun, Debtor, Link, LocRec, Party,
    PayerAuthorisation, PayerSide, RecStatus, Recipient, Recurrence, Revision, AGENCIA_LEN_MAX,
    CONTA_LEN_MAX, CONTRATO_LEN_MAX, CONVENIO_LEN_MAX, ID_SHAPE, OBJETO_LEN_MAX,
};
use crate::domain::recurrence::{
    AmountRule, AutoRetry, Periodicity, RetryPolicy, Schedule, SEND_DAYS_BEFORE_MAX, SEND_DAYS_BEFORE_MIN,
};
use crate::domain::transaction::{gateway_ispb, PAYER_ISPB};

/// The members of a recurrence's request.
const REC_MEMBERS: [&str; 8] =
    ["vinculo", "calendario", "valor", "politicaRetentativa", "loc", "ativacao", "recebedor", "automacao"];

/// A family B amount: a decimal string with two places, at least 0.01.
pub(super) fn valor(f: &mut Fields<'_>, field: &str, required: bool) -> Option<Money> {
    let text = f.string(field, required)?;
    let m = Money::parse_two_places(text);
    if m.is_none() {
        f.fail_as(field, "must be a decimal string with 2 places, at least 0.01", ViolationKind::Amount);
    }
    m
}

/// The `convenio` filter of `GET /rec` and `GET /cobr`: at most 60 characters.
pub(super) fn agreement_param<'a>(q: &'a HashMap<String, String>, v: &mut Vec<Violation>) -> Option<&'a str> {
    let a = q.get("convenio")?;
    if a.is_empty() || a.chars().count() > CONVENIO_LEN_MAX {
        v.push(Violation::new("convenio", format!("must have 1 to {CONVENIO_LEN_MAX} characters")));
        return None;
    }
    Some(a.as_str())
}

/// A new recurrence, read from `POST /rec`'s body.
fn read_rec(obj: &serde_json::Map<String, Value>) -> Result<CreateRec, ApiError> {
    let mut f = Fields::new(obj);
    f.only(&REC_MEMBERS);
    let link = f.object("vinculo", |v| {
        v.only(&["objeto", "contrato", "devedor"]);
        let object = v.text("objeto", false, OBJETO_LEN_MAX).map(str::to_owned);
        let contract = v.text("contrato", true, CONTRATO_LEN_MAX).map(str::to_owned);
        let debtor = devedor(v, false);
        if v.raw("devedor").is_none() {
            v.fail("devedor", "is required");
        }
        match (contract, debtor) {
            (Some(contract), Some((name, document, _))) => {
                Some(Link { object, contract, debtor: Debtor { name, document } })
            }
            _ => None,
        }
    });
    if obj.get("vinculo").is_none() {
        f.fail("vinculo", "is required");
    }
    let schedule = f.object("calendario", |c| {
        c.only(&["dataInicial", "dataFinal", "periodicidade"]);
        let start = c.date("dataInicial", true);
        let end = c.date("dataFinal", false);
        let every = c.string("periodicidade", true).and_then(|p| match Periodicity::parse(p) {
            Ok(p) => Some(p),
            Err(e) => {
                c.fail("periodicidade", e.to_string());
                None
            }
        });
        let (start, every) = (start?, every?);
        match Schedule::new(start, every, end) {
            Ok(s) => Some(s),
            Err(e) => {
                c.fail("dataFinal", e.to_string());
                None
            }
        }
    });
    if obj.get("calendario").is_none() {
        f.fail("calendario", "is required");
    }
    let amount = f
        .object("valor", |v| {
            v.only(&["valorRec", "valorMinimoRecebedor"]);
            let fixed = valor(v, "valorRec", false);
            let minimum = valor(v, "valorMinimoRecebedor", false);
            if v.raw("valorRec").is_some() && v.raw("valorMinimoRecebedor").is_some() {
                v.fail(
                    "valorMinimoRecebedor",
                    "give valorRec (a fixed value) or valorMinimoRecebedor, not both",
                );
            }
            match fixed {
                Some(value) => AmountRule::Fixed(value),
                None => AmountRule::Variable { minimum },
            }
        })
        .unwrap_or(AmountRule::Variable { minimum: None });
    let retry = f.string("politicaRetentativa", true).and_then(|p| match RetryPolicy::parse(p) {
        Ok(p) => Some(p),
        Err(e) => {
            f.fail("politicaRetentativa", e.to_string());
            None
        }
    });
    let loc = f.integer("loc", 1, u64::MAX);
    let first_txid = read_first_txid(&mut f);
    let agreement = f
        .object("recebedor", |r| {
            r.only(&["convenio"]);
            r.text("convenio", false, CONVENIO_LEN_MAX).map(str::to_owned)
        })
        .flatten();
    let auto_send_days = f
        .object("automacao", |a| {
            let days = a.integer("diasAntesEnvio", SEND_DAYS_BEFORE_MIN as u64, SEND_DAYS_BEFORE_MAX as u64);
            if days.is_some() && !matches!(amount, AmountRule::Fixed(_)) {
                a.fail(
                    "diasAntesEnvio",
                    "is for a recurrence with valorRec: the charge the gateway sends asks for it",
                );
            }
            days.and_then(|d| u8::try_from(d).ok())
        })
        .flatten();
    let days = f.object("automacao", |a| {
        a.only(&["diasRetentativa", "diasAntesEnvio"]);
        match a.raw("diasRetentativa") {
            None | Some(Value::Null) => Some(Vec::new()),
            Some(Value::Array(items)) if items.iter().all(|d| d.as_u64().is_some()) => {
                Some(items.iter().filter_map(Value::as_u64).collect::<Vec<u64>>())
            }
            Some(_) => {
                a.fail("diasRetentativa", "must be a list of whole numbers of days");
                None
            }
        }
    });
    let auto_retry = match (days.flatten(), retry) {
        (Some(days), Some(policy)) => match AutoRetry::parse(&days, policy) {
            Ok(a) => a,
            Err(e) => {
                f.fail("automacao.diasRetentativa", e.to_string());
                AutoRetry::default()
            }
        },
        _ => AutoRetry::default(),
    };
    match (link.flatten(), schedule.flatten(), retry, f.violations.is_empty()) {
        (Some(link), Some(schedule), Some(retry), true) => Ok(CreateRec {
            link,
            schedule,
            amount,
            retry,
            loc,
            first_txid,
            agreement,
            auto_retry,
            auto_send_days,
        }),
        _ => Err(ApiError::Validation(f.violations)),
    }
}

/// An `idRec` path parameter: 400 when it does not have the API Pix's shape.
pub(super) fn check_id(id: &str, what: &str) -> Result<(), ApiError> {
    if is_id_shaped(id) {
        Ok(())
    } else {
        Err(ApiError::Validation(vec![Violation::new(what, ID_SHAPE)]))
    }
}

/// A list's `status` parameter, read by `parse`; a value it refuses is named with `allowed`.
pub(super) fn status_param<T>(
    q: &HashMap<String, String>,
    parse: fn(&str) -> Option<T>,
    allowed: &str,
    v: &mut Vec<Violation>,
) -> Option<T> {
    let text = q.get("status")?;
    let parsed = parse(text);
    if parsed.is_none() {
        v.push(Violation::new("status", format!("must be {allowed}")));
    }
    parsed
}

/// `ativacao.dadosJornada.txid` (journey 3): the txid of a cob of the account.
fn read_first_txid(f: &mut Fields) -> Option<String> {
    f.object("ativacao", |a| {
        a.only(&["dadosJornada"]);
        a.object("dadosJornada", |d| {
            d.only(&["txid"]);
            let txid = d.string("txid", true)?;
            let ok = (26..=35).contains(&txid.len()) && txid.bytes().all(|b| b.is_ascii_alphanumeric());
            if !ok {
                d.fail("txid", "must be 26 to 35 letters and digits: the txid of a cob or a cobv");
            }
            ok.then(|| txid.to_owned())
        })
        .flatten()
    })
    .flatten()
}

/// The body of `PATCH /rec/{idRec}` (`RecRevisada`): `{status: "CANCELADA"}` alone, or a
/// revision of the debtor's name, the first date, the location or the first cob.
fn read_rec_patch(req: &HttpRequest, bytes: &[u8]) -> Result<RecChange, ApiError> {
    let obj = request_object(req, bytes)?;
    let mut f = Fields::new(&obj);
    f.only(&["status", "vinculo", "calendario", "loc", "ativacao"]);
    if f.string("status", false).is_some_and(|s| s != "CANCELADA") {
        f.fail("status", "must be CANCELADA");
    }
    let debtor_name = f
        .object("vinculo", |v| {
            v.only(&["devedor"]);
            v.object("devedor", |d| {
                d.only(&["nome"]);
                d.text("nome", true, super::cob::DEVEDOR_NOME_LEN_MAX).map(str::to_owned)
            })
            .flatten()
        })
        .flatten();
    let start = f
        .object("calendario", |c| {
            c.only(&["dataInicial"]);
            c.date("dataInicial", true)
        })
        .flatten();
    let loc_id = f.integer("loc", 1, u64::MAX);
    let first_txid = read_first_txid(&mut f);
    let revises = ["vinculo", "calendario", "loc", "ativacao"].iter().any(|m| obj.contains_key(*m));
    match (obj.contains_key("status"), revises) {
        (true, true) => f.fail("status", "is sent alone: a cancellation revises nothing else"),
        (false, false) => f.fail("status", "is required when nothing is revised"),
        _ => {}
    }
    if !f.violations.is_empty() {
        return Err(ApiError::Validation(f.violations));
    }
    if obj.contains_key("status") {
        return Ok(RecChange::Cancel(Party::UsuarioRecebedor));
    }
    Ok(RecChange::Revise(Revision {
        debtor_name,
        start,
        loc_id,
        loc: None,
        first_txid,
        first_is_cobv: false,
    }))
}

/// The body of a receiver's `PATCH`: `{status: "CANCELADA"}`, the one change it makes.
pub(super) fn read_cancel(req: &HttpRequest, bytes: &[u8]) -> Result<(), ApiError> {
    let obj = request_object(req, bytes)?;
    let mut f = Fields::new(&obj);
    f.only(&["status"]);
    if f.string("status", true).is_some_and(|s| s != "CANCELADA") {
        f.fail("status", "must be CANCELADA");
    }
    if f.violations.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Validation(f.violations))
    }
}

/// The caller's recurrence with this `idRec`.
fn find_rec(state: &AppState, caller: &Caller, id: &str) -> Result<Recurrence, ApiError> {
    check_id(id, "idRec")?;
    let found = match rec_local(id) {
        Some(local) => state.repo.rec(caller.account_id, local)?.filter(|r| r.id == id),
        None => None,
    };
    found.ok_or_else(|| ApiError::NotFound("no recurrence with this idRec".into()))
}

/// A solicitation to this gateway's ISPB goes to one of its accounts, named by its number
/// (`conta`, the accountId) and its document: that account is the payer, and answers it
/// itself (on us). Any other ISPB is the sandbox's payer's institution.
fn on_us_recipient(state: &AppState, mut r: Recipient) -> Result<Recipient, ApiError> {
    if r.ispb != gateway_ispb() {
        return Ok(r);
    }
    let found = match r.account.parse::<u64>().ok().and_then(AccountId::new) {
        Some(id) => state.repo.account(id)?,
        None => None,
    };
    match found {
        Some(a) if a.profile.document.to_string() == r.document => {
            r.on_us = Some(a.id.get());
            Ok(r)
        }
        _ => Err(ApiError::Validation(vec![Violation::new(
            "destinatario.conta",
            "no account of this gateway has this number and this document",
        )])),
    }
}

/// The caller's recurrence that has the solicitation with this `idSolicRec`.
fn find_solicitation(state: &AppState, caller: &Caller, id: &str) -> Result<Recurrence, ApiError> {
    check_id(id, "idSolicRec")?;
    let rec = match solicitation_local(id) {
        Some(s) => match state.repo.rec_of_solicitation(caller.account_id, s)? {
            Some(local) => state.repo.rec(caller.account_id, local)?,
            None => None,
        },
        None => None,
    };
    rec.filter(|r| r.solicitation(id).is_some())
        .ok_or_else(|| ApiError::NotFound("no solicitation with this idSolicRec".into()))
}

fn solicitation_view(rec: &Recurrence, id: &str) -> Value {
    rec.solicitation(id).map(|s| s.to_json(rec)).unwrap_or(Value::Null)
}

#[utoipa::path(
    post, path = "/rec", tag = "automatic-pix",
    request_body(content = s::RecRequest),
    responses(
        (status = 201, description = "The recurrence, status CRIADA", body = s::RecView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, description = "No location with the id in loc", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn post_rec(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let obj = request_object(&req, &bytes)?;
    let msg = read_rec(&obj)?;
    let rec = ask(&state, &caller, msg).await??;
    Ok(HttpResponse::Created().json(rec.to_json()))
}

#[utoipa::path(
    get, path = "/rec/{idRec}", tag = "automatic-pix",
    params(("idRec" = String, Path, pattern = "^R[RN][0-9A-Z]{8}[0-9]{8}[a-zA-Z0-9]{11}$", description = "The recurrence's id")),
    params(("txid" = Option<String>, Query, description = "A cob's (journey 3) or a cobv's (journey 4) txid: dadosQR is then the composite code that pays it and carries the recurrence's location")),
    responses(
        (status = 200, description = "The recurrence as it is now", body = s::RecView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_rec(
    caller: Caller,
    path: web::Path<String>,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let mut v = Vec::new();
    super::body::known_params(&q, &["txid"], &mut v);
    if !v.is_empty() {
        return Err(ApiError::Validation(v));
    }
    let rec = find_rec(&state, &caller, &path.into_inner())?;
    let mut view = rec.to_json();
    if let Some(txid) = q.get("txid") {
        view["dadosQR"] = composite_qr(&state, &caller, &rec, txid)?;
    }
    Ok(HttpResponse::Ok().json(view))
}

/// `dadosQR` of journeys 3 and 4 (`GET /rec/{idRec}?txid=`): the charge's code (its dynamic
/// one where locations are served) with the recurrence's location in template 80.
fn composite_qr(state: &AppState, caller: &Caller, rec: &Recurrence, txid: &str) -> Result<Value, ApiError> {
    let fail = |m: &str| ApiError::Validation(vec![Violation::new("txid", m)]);
    let charge = state
        .repo
        .charge_by_txid(caller.account_id, txid)?
        .ok_or_else(|| fail("names no cob or cobv of this account"))?;
    let journey = if charge.is_cob(false) {
        "JORNADA_3"
    } else if charge.is_cob(true) {
        "JORNADA_4"
    } else {
        return Err(fail("names no cob or cobv of this account"));
    };
    let Some(loc) = &rec.loc else {
        return Err(fail("the recurrence has no location (loc) for its code to carry"));
    };
    let static_code = charge.charge.as_ref().map(|c| c.pix_code.clone()).unwrap_or_default();
    let code = state.locations.as_deref().and_then(|l| l.dynamic_code(&charge)).unwrap_or(static_code);
    let composite = crate::domain::brcode::generate_composite(&code, &loc.location)
        .ok_or_else(|| ApiError::internal("a charge's code has no CRC field"))?;
    Ok(json!({"jornada": journey, "pixCopiaECola": composite}))
}

#[utoipa::path(
    patch, path = "/rec/{idRec}", tag = "automatic-pix",
    params(("idRec" = String, Path, pattern = "^R[RN][0-9A-Z]{8}[0-9]{8}[a-zA-Z0-9]{11}$", description = "The recurrence's id")),
    request_body(content = s::RecRevisionRequest),
    responses(
        (status = 200, description = "The cancelled or revised recurrence", body = s::RecView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, description = "No recurrence with this idRec, or no location with this loc", body = SimpleErrorBody),
        (status = 409, description = "The recurrence already ended, or its terms are revised once it is authorised or while a solicitation awaits an answer", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn patch_rec(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    check_id(&id, "idRec")?;
    let change = read_rec_patch(&req, &bytes)?;
    let msg = ChangeRec { rec: RecRef::Rec(id), change, payer: None };
    let rec = ask(&state, &caller, msg).await??;
    Ok(HttpResponse::Ok().json(rec.to_json()))
}

#[utoipa::path(
    get, path = "/rec", tag = "automatic-pix",
    params(
        ("inicio" = String, Query, description = "RFC 3339: recurrences made at or after it"),
        ("fim" = String, Query, description = "RFC 3339: and at or before it (at most 31 days after inicio)"),
        ("cpf" = Option<String>, Query, description = "The debtor's CPF"),
        ("cnpj" = Option<String>, Query, description = "The debtor's CNPJ"),
        ("status" = Option<String>, Query, description = "CRIADA, APROVADA, REJEITADA, EXPIRADA or CANCELADA"),
        ("paginacao.paginaAtual" = Option<u32>, Query, description = "The page, from 0"),
        ("paginacao.itensPorPagina" = Option<u32>, Query, description = "1 to 1000, default 100"),
    ),
    responses(
        (status = 200, description = "Newest first, with the filters echoed", body = s::RecList),
        (status = 400, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_recs(
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
            "cpf",
            "cnpj",
            "status",
            "locationPresente",
            "convenio",
            "paginacao.paginaAtual",
            "paginacao.itensPorPagina",
        ],
        &mut v,
    );
    let window = read_list_window(&q, &mut v);
    let status =
        status_param(&q, RecStatus::parse, "CRIADA, APROVADA, REJEITADA, EXPIRADA or CANCELADA", &mut v);
    let located = super::received::flag(&q, "locationPresente", &mut v);
    let agreement = agreement_param(&q, &mut v);
    let (Some(w), true) = (window, v.is_empty()) else { return Err(ApiError::Validation(v)) };
    let keep = |r: &Recurrence| {
        (w.inicio..=w.fim).contains(&r.created_at)
            && status.is_none_or(|s| r.status == s)
            && w.document.as_ref().is_none_or(|(_, d)| &r.link.debtor.document == d)
            && located.is_none_or(|l| r.loc.is_some() == l)
            && agreement.is_none_or(|a| r.receiver.agreement.as_deref() == Some(a))
    };
    let (skip, size) = w.skip_take();
    let (page, total) = state.repo.recs_page(caller.account_id, keep, skip, size)?;
    let mut parametros = w.parametros(total);
    if let Some(s) = status {
        parametros["status"] = json!(s.as_str());
    }
    if let Some(l) = located {
        parametros["locationPresente"] = json!(l);
    }
    if let Some(a) = agreement {
        parametros["recebedor"] = json!({"convenio": a});
    }
    let recs: Vec<Value> = page.iter().map(Recurrence::to_json).collect();
    Ok(HttpResponse::Ok().json(json!({"parametros": parametros, "recs": recs})))
}

#[utoipa::path(
    post, path = "/solicrec", tag = "automatic-pix",
    request_body(content = s::SolicRecRequest),
    responses(
        (status = 201, description = "The solicitation, RECEBIDA by the payer's institution", body = s::SolicRecView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, description = "No recurrence with this idRec", body = SimpleErrorBody),
        (status = 409, description = "The recurrence is not CRIADA, or a solicitation of it awaits an answer", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn post_solicrec(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    f.only(&["idRec", "destinatario", "calendario"]);
    let id = f.string("idRec", true).map(str::to_owned);
    if id.as_deref().is_some_and(|id| !is_id_shaped(id)) {
        f.fail("idRec", ID_SHAPE);
    }
    let recipient = f
        .object("destinatario", |d| {
            d.only(&["cpf", "cnpj", "conta", "agencia", "ispbParticipante"]);
            let document = match (d.raw("cpf").is_some(), d.raw("cnpj").is_some()) {
                (true, true) => {
                    d.fail("cnpj", "give cpf or cnpj, not both");
                    None
                }
                (false, false) => {
                    d.fail("cpf", "exactly one of cpf and cnpj is required");
                    None
                }
                (cpf, _) => {
                    let (field, len) = if cpf { ("cpf", 11) } else { ("cnpj", 14) };
                    let doc = d.document(field, true);
                    if doc.as_ref().is_some_and(|t| t.as_str().len() != len) {
                        d.fail(field, format!("must be {len} characters"));
                        None
                    } else {
                        doc
                    }
                }
            };
            let account = d.text("conta", true, CONTA_LEN_MAX).map(str::to_owned);
            let branch = d.text("agencia", false, AGENCIA_LEN_MAX).map(str::to_owned);
            let ispb = d.string("ispbParticipante", true).map(str::to_owned);
            if ispb.as_deref().is_some_and(|i| i.len() != 8 || !i.bytes().all(|b| b.is_ascii_digit())) {
                d.fail("ispbParticipante", "must be 8 digits");
            }
            if account.as_deref().is_some_and(|a| !a.bytes().all(|b| b.is_ascii_digit())) {
                d.fail("conta", "must be digits");
            }
            match (document, account, ispb) {
                (Some(doc), Some(account), Some(ispb)) => {
                    Some(Recipient { document: doc.to_string(), account, branch, ispb, on_us: None })
                }
                _ => None,
            }
        })
        .flatten();
    if obj.get("destinatario").is_none() {
        f.fail("destinatario", "is required");
    }
    let expires_at = f
        .object("calendario", |c| {
            c.only(&["dataExpiracaoSolicitacao"]);
            let text = c.string("dataExpiracaoSolicitacao", true)?;
            match chrono::DateTime::parse_from_rfc3339(text) {
                Ok(t) => Some(t.with_timezone(&chrono::Utc)),
                Err(_) => {
                    c.fail("dataExpiracaoSolicitacao", "must be an RFC 3339 date-time");
                    None
                }
            }
        })
        .flatten();
    if obj.get("calendario").is_none() {
        f.fail("calendario", "is required");
    }
    let (Some(id), Some(recipient), Some(expires_at), true) =
        (id, recipient, expires_at, f.violations.is_empty())
    else {
        return Err(ApiError::Validation(f.violations));
    };
    let recipient = on_us_recipient(&state, recipient)?;
    let msg =
        ChangeRec { rec: RecRef::Rec(id), change: RecChange::Solicit { recipient, expires_at }, payer: None };
    let rec = ask(&state, &caller, msg).await??;
    let made = rec.solicitations.last().map(|s| s.to_json(&rec)).unwrap_or(Value::Null);
    Ok(HttpResponse::Created().json(made))
}

#[utoipa::path(
    get, path = "/solicrec/{idSolicRec}", tag = "automatic-pix",
    params(("idSolicRec" = String, Path, pattern = "^SC[0-9A-Z]{8}[0-9]{8}[a-zA-Z0-9]{11}$", description = "The solicitation's id")),
    responses(
        (status = 200, description = "The solicitation as it is now, with its recurrence", body = s::SolicRecView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_solicrec(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    let rec = find_solicitation(&state, &caller, &id)?;
    Ok(HttpResponse::Ok().json(solicitation_view(&rec, &id)))
}

#[utoipa::path(
    patch, path = "/solicrec/{idSolicRec}", tag = "automatic-pix",
    params(("idSolicRec" = String, Path, pattern = "^SC[0-9A-Z]{8}[0-9]{8}[a-zA-Z0-9]{11}$", description = "The solicitation's id")),
    request_body(content = s::RecPatch),
    responses(
        (status = 201, description = "The withdrawn solicitation (CANCELADA); its recurrence stays CRIADA", body = s::SolicRecView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, body = SimpleErrorBody),
        (status = 409, description = "The solicitation was already answered, expired or withdrawn", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn patch_solicrec(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    check_id(&id, "idSolicRec")?;
    read_cancel(&req, &bytes)?;
    let msg = ChangeRec {
        rec: RecRef::Solicitation(id.clone()),
        change: RecChange::Withdraw { solicitation: id.clone() },
        payer: None,
    };
    let rec = ask(&state, &caller, msg).await??;
    // The API Pix answers this revision 201.
    Ok(HttpResponse::Created().json(solicitation_view(&rec, &id)))
}

#[utoipa::path(
    post, path = "/sandbox/solicrec/{idSolicRec}/answer", tag = "sandbox",
    params(("idSolicRec" = String, Path, description = "The solicitation's id")),
    request_body(content = s::SolicRecAnswer),
    responses(
        (status = 200, description = "The recurrence: APROVADA (with the payer and its maximum) or REJEITADA", body = s::RecView),
        (status = 400, body = ExtendedErrorBody),
        (status = 403, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "The solicitation no longer awaits an answer", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn sandbox_answer(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    let answer = read_answer(&req, &bytes)?;
    if !is_id_shaped(&id) {
        return Err(ApiError::NotFound("no solicitation with this idSolicRec".into()));
    }
    let msg = ChangeRec {
        rec: RecRef::Solicitation(id.clone()),
        change: RecChange::Answer { solicitation: id, answer },
        payer: Some(PayerSide::Sandbox),
    };
    let rec = ask(&state, &caller, msg).await??;
    Ok(HttpResponse::Ok().json(rec.to_json()))
}

/// A payer's answer to a solicitation: `decision` (APPROVE or REJECT) and, with an
/// approval, `valorMaximo`.
pub(super) fn read_answer(req: &HttpRequest, bytes: &Bytes) -> Result<Answer, ApiError> {
    let obj = request_object(req, bytes)?;
    let mut f = Fields::new(&obj);
    // Family A (the payer's answer and the sandbox's): a member it does not know is ignored.
    let maximum = valor(&mut f, "valorMaximo", false);
    let municipality = cod_mun(&mut f);
    let answer = match f.string("decision", true) {
        Some("APPROVE") => Some(Answer::Approve { maximum, municipality }),
        Some("REJECT") => {
            for member in ["valorMaximo", "codMun"] {
                if obj.get(member).is_some() {
                    f.fail(member, "only an approval carries it");
                }
            }
            Some(Answer::Reject)
        }
        Some(_) => {
            f.fail("decision", "must be APPROVE or REJECT");
            None
        }
        None => None,
    };
    match (answer, f.violations.is_empty()) {
        (Some(answer), true) => Ok(answer),
        _ => Err(ApiError::Validation(f.violations)),
    }
}

/// The payer's municipality, `codMun` (optional): the IBGE code of 7 digits.
pub(super) fn cod_mun(f: &mut Fields<'_>) -> Option<CodMun> {
    let text = f.string("codMun", false)?;
    let parsed = CodMun::parse(text);
    if parsed.is_none() {
        f.fail("codMun", "must be the 7 digits of an IBGE municipality code");
    }
    parsed
}

/// The payer's new maximum: `{valorMaximo}`, a family B amount, or null to remove it.
pub(super) fn read_maximum(req: &HttpRequest, bytes: &Bytes) -> Result<Option<Money>, ApiError> {
    let obj = request_object(req, bytes)?;
    let mut f = Fields::new(&obj);
    if !obj.contains_key("valorMaximo") {
        f.fail("valorMaximo", "is required (null removes the maximum)");
    }
    let maximum = valor(&mut f, "valorMaximo", false);
    if f.violations.is_empty() {
        Ok(maximum)
    } else {
        Err(ApiError::Validation(f.violations))
    }
}

#[utoipa::path(
    post, path = "/sandbox/rec/{idRec}/maximum", tag = "sandbox",
    params(("idRec" = String, Path, description = "The recurrence's id")),
    request_body(content = s::PayerMaximum),
    responses(
        (status = 200, description = "The recurrence with the sandbox payer's new maximum", body = s::RecView),
        (status = 400, body = ExtendedErrorBody),
        (status = 403, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "The recurrence is not authorised, or its payer is an account of this gateway", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn sandbox_maximum(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let maximum = read_maximum(&req, &bytes)?;
    let id = path.into_inner();
    if !is_id_shaped(&id) {
        return Err(ApiError::NotFound("no recurrence with this idRec".into()));
    }
    let msg = ChangeRec {
        rec: RecRef::Rec(id),
        change: RecChange::Maximum(maximum),
        payer: Some(PayerSide::Sandbox),
    };
    let rec = ask(&state, &caller, msg).await??;
    Ok(HttpResponse::Ok().json(rec.to_json()))
}

#[utoipa::path(
    post, path = "/sandbox/rec/{idRec}/cancel", tag = "sandbox",
    params(("idRec" = String, Path, description = "The recurrence's id")),
    responses(
        (status = 200, description = "The recurrence, CANCELADA by the payer (SLDB)", body = s::RecView),
        (status = 403, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "The recurrence already ended", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn sandbox_cancel(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    if !is_id_shaped(&id) {
        return Err(ApiError::NotFound("no recurrence with this idRec".into()));
    }
    let msg = ChangeRec {
        rec: RecRef::Rec(id),
        change: RecChange::Cancel(Party::UsuarioPagador),
        payer: Some(PayerSide::Sandbox),
    };
    let rec = ask(&state, &caller, msg).await??;
    Ok(HttpResponse::Ok().json(rec.to_json()))
}

#[utoipa::path(
    post, path = "/locrec", tag = "automatic-pix",
    responses((status = 201, description = "A location, for a recurrence's journey 2 QR code", body = s::LocRecView)),
    security(("bearer" = []))
)]
pub async fn post_locrec(caller: Caller, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let loc = ask(&state, &caller, CreateLocRec).await??;
    Ok(HttpResponse::Created().json(loc.to_json()))
}

#[utoipa::path(
    get, path = "/locrec", tag = "automatic-pix",
    params(
        ("inicio" = String, Query, description = "RFC 3339: locations made at or after it"),
        ("fim" = String, Query, description = "RFC 3339: and at or before it (at most 31 days after inicio)"),
        ("idRecPresente" = Option<bool>, Query, description = "true: only those linked to a recurrence; false: only those not linked"),
        ("paginacao.paginaAtual" = Option<u32>, Query, description = "The page, from 0"),
        ("paginacao.itensPorPagina" = Option<u32>, Query, description = "1 to 1000, default 100"),
    ),
    responses(
        (status = 200, description = "Newest first, with the filters echoed", body = s::LocRecList),
        (status = 400, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list_locrecs(
    caller: Caller,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let mut v = Vec::new();
    let known = ["inicio", "fim", "idRecPresente", "paginacao.paginaAtual", "paginacao.itensPorPagina"];
    super::body::known_params(&q, &known, &mut v);
    let window = read_list_window(&q, &mut v);
    let linked = super::received::flag(&q, "idRecPresente", &mut v);
    let (Some(w), true) = (window, v.is_empty()) else { return Err(ApiError::Validation(v)) };
    let keep = |l: &LocRec| {
        (w.inicio..=w.fim).contains(&l.created_at) && linked.is_none_or(|p| l.id_rec.is_some() == p)
    };
    let (skip, size) = w.skip_take();
    let (page, total) = state.repo.locrecs_page(caller.account_id, keep, skip, size)?;
    let mut parametros = w.parametros(total);
    if let Some(p) = linked {
        parametros["idRecPresente"] = json!(p);
    }
    let loc: Vec<Value> = page.iter().map(LocRec::to_json).collect();
    Ok(HttpResponse::Ok().json(json!({"parametros": parametros, "loc": loc})))
}

#[utoipa::path(
    get, path = "/locrec/{id}", tag = "automatic-pix",
    params(("id" = u64, Path, description = "The location's id")),
    responses((status = 200, description = "The location, with the idRec it is linked to", body = s::LocRecView), (status = 404, body = SimpleErrorBody)),
    security(("bearer" = []))
)]
pub async fn get_locrec(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let found = match path.into_inner().parse::<u64>() {
        Ok(id) => state.repo.locrec(caller.account_id, id)?,
        Err(_) => None,
    };
    let loc = found.ok_or_else(|| ApiError::NotFound("no location with this id".into()))?;
    Ok(HttpResponse::Ok().json(loc.to_json()))
}

#[utoipa::path(
    delete, path = "/locrec/{id}/idRec", tag = "automatic-pix",
    params(("id" = u64, Path, description = "The location's id")),
    responses(
        (status = 200, description = "The location, linked to no recurrence; the recurrence it served no longer shows it, and keeps its status", body = s::LocRecView),
        (status = 404, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn unlink_locrec(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let Ok(id) = path.into_inner().parse::<u64>() else {
        return Err(ApiError::NotFound("no location with this id".into()));
    };
    let loc = ask(&state, &caller, UnlinkLocRec { id }).await??;
    Ok(HttpResponse::Ok().json(loc.to_json()))
}

#[utoipa::path(
    post, path = "/sandbox/rec/{idRec}/approve", tag = "sandbox",
    params(("idRec" = String, Path, description = "The recurrence's id")),
    request_body(content = s::QrApproval),
    responses(
        (status = 200, description = "The recurrence, APROVADA by journey 2 (its location) or 3 (its first cob, paid)", body = s::RecView),
        (status = 400, body = ExtendedErrorBody),
        (status = 403, body = ExtendedErrorBody),
        (status = 404, body = ExtendedErrorBody),
        (status = 409, description = "Not CRIADA, no QR journey, or the first cob not paid", body = ExtendedErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn sandbox_approve(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    // Family A (the sandbox's payer): a member it does not know is ignored.
    let maximum = valor(&mut f, "valorMaximo", false);
    let municipality = cod_mun(&mut f);
    let document = match (obj.get("cpf"), obj.get("cnpj")) {
        (Some(_), Some(_)) => {
            f.fail("cnpj", "give cpf or cnpj, not both");
            None
        }
        (Some(_), None) => f.document("cpf", true),
        (None, Some(_)) => f.document("cnpj", true),
        (None, None) => None,
    };
    let ispb = f.string("ispbParticipante", false).map(str::to_owned);
    if ispb.as_deref().is_some_and(|i| i.len() != 8 || !i.bytes().all(|b| b.is_ascii_digit())) {
        f.fail("ispbParticipante", "must be 8 digits");
    }
    if !f.violations.is_empty() {
        return Err(ApiError::Validation(f.violations));
    }
    if !is_id_shaped(&id) {
        return Err(ApiError::NotFound("no recurrence with this idRec".into()));
    }
    // The payer is the contract's debtor unless the body names another document.
    let rec = find_rec(&state, &caller, &id)?;
    let payer = PayerAuthorisation {
        document: document.map_or_else(|| rec.link.debtor.document.clone(), |d| d.to_string()),
        ispb: ispb.unwrap_or_else(|| PAYER_ISPB.to_owned()),
        maximum,
        municipality,
        on_us: None,
    };
    let change = RecChange::ApproveByQr { payer, first_paid: false };
    let msg = ChangeRec { rec: RecRef::Rec(id), change, payer: Some(PayerSide::Sandbox) };
    let rec = ask(&state, &caller, msg).await??;
    Ok(HttpResponse::Ok().json(rec.to_json()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::testing::{object, violations};

    fn body() -> Value {
        json!({
            "vinculo": {"objeto": "gym", "contrato": "c-1", "devedor": {"cpf": "52998224725", "nome": "Ana"}},
            "calendario": {"dataInicial": "2026-12-01", "periodicidade": "MENSAL"},
            "valor": {"valorRec": "30.00"},
            "politicaRetentativa": "NAO_PERMITE",
        })
    }

    fn read(v: Value) -> Result<CreateRec, ApiError> {
        read_rec(&object(&v.to_string()))
    }

    #[test]
    fn a_recurrence_is_read_with_its_fixed_or_variable_value() {
        let r = read(body()).ok().unwrap();
        assert_eq!(r.amount, AmountRule::Fixed(Money::parse("30").unwrap()));
        assert_eq!(r.link.debtor.document, "52998224725");
        let mut v = body();
        v["valor"] = json!({"valorMinimoRecebedor": "10.00"});
        let r = read(v).ok().unwrap();
        assert_eq!(r.amount, AmountRule::Variable { minimum: Some(Money::parse("10").unwrap()) });
        let mut v = body();
        v.as_object_mut().unwrap().remove("valor");
        assert_eq!(read(v).ok().unwrap().amount, AmountRule::Variable { minimum: None });
    }

    #[test]
    fn each_fault_of_a_recurrence_is_named_by_its_field() {
        let mut v = body();
        v["valor"] = json!({"valorRec": "30.00", "valorMinimoRecebedor": "10.00"});
        v["calendario"] =
            json!({"dataInicial": "2026-12-01", "dataFinal": "2026-11-01", "periodicidade": "DIARIA"});
        v["politicaRetentativa"] = json!("SEMPRE");
        v["vinculo"]["contrato"] = json!("x".repeat(CONTRATO_LEN_MAX + 1));
        v["extra"] = json!(1);
        let fields: Vec<String> = violations(read(v).err().unwrap()).into_iter().map(|(f, _)| f).collect();
        for f in [
            "valor.valorMinimoRecebedor",
            "calendario.periodicidade",
            "politicaRetentativa",
            "vinculo.contrato",
            "extra",
        ] {
            assert!(fields.iter().any(|x| x == f), "{f} in {fields:?}");
        }
        let mut v = body();
        v["calendario"]["dataFinal"] = json!("2026-11-30");
        let fields = violations(read(v).err().unwrap());
        assert_eq!(fields[0].0, "calendario.dataFinal");
        let fields = violations(read(json!({})).err().unwrap());
        let names: Vec<&str> = fields.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, ["vinculo", "calendario", "politicaRetentativa"]);
    }
}
