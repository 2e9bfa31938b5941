//! Family B charges with a due date, as the API Pix has them: `PUT /cobv/{txid}` creates,
//! `GET /cobv/{txid}` reads, `PATCH /cobv/{txid}` revises or removes, `GET /cobv` lists.
//!
//! A cobv is a cob (same txids, statuses, `pix` array, refunds and webhooks) whose
//! `calendario` has a due date (`dataDeVencimento`) and a number of days it may still be paid
//! after it (`validadeAposVencimento`), and whose `valor` may carry a fine (`multa`),
//! interest (`juros`), an abatement (`abatimento`) and a discount (`desconto`). What it costs
//! on a day is `domain::cobv`'s; this module reads and writes the API's encoding of those
//! terms (modalities as numbers, `valorPerc` as a decimal string with two places).
//!
//! A revision is a JSON merge patch (RFC 7396) of the cobv's request: the members it names
//! replace the current ones (objects member by member, `null` removes), and the result is
//! read again by the same rules as a new cobv, so a revision can never hold what a creation
//! could not. It is decided on the revision it was read from (`revisao`), so two revisions
//! made at once never silently undo each other. A client that read the cobv says which
//! revision its change is based on with `If-Match` (the `ETag` every answer carries is the
//! revision): a revision made since is then 412, never overwritten.
//!
//! While a cobv is `ATIVA` and payable, its view carries `valorDoDia`: what paying it today
//! costs, adjustment by adjustment, as the payer's payload of the API Pix shows it.

use std::collections::HashMap;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::NaiveDate;
use serde_json::{json, Map, Value};

use super::ask::ask;
use super::auth::Caller;
use super::body::{request_object, Fields};
use super::cob::{
    check_txid, devedor, find, info_adicionais, receiving_key, status, view_with_pix, CHAVE_LEN_MAX,
};
use super::error::{ApiError, Rejection, SimpleErrorBody, ViolationKind};
use super::{iso, AppState};
use crate::account::{CancelCharge, ChargeRequest, CreateCharge, ReviseCharge};
use crate::domain::cobv::{
    payment_day, Amount, Days, Discount, Interest, Period, Terms, DISCOUNT_DATES_MAX,
    VALIDITY_AFTER_DUE_DAYS_MAX,
};
use crate::domain::money::{Money, Percent};
use crate::domain::transaction::{CobDetails, CobvDetails, Transaction, DESCRIPTION_LEN_MAX};

/// `validadeAposVencimento` when the request gives none (the API Pix's default).
pub const VALIDITY_AFTER_DUE_DAYS_DEFAULT: u64 = 30;
/// How far ahead a due date may be, in days from today.
pub const DUE_DATE_AHEAD_DAYS_MAX: i64 = 3650;
/// Characters of the debtor's street and city.
pub const DEVEDOR_ADDRESS_LEN_MAX: usize = 200;
/// Characters of the debtor's e-mail.
pub const DEVEDOR_EMAIL_LEN_MAX: usize = 77;
/// Characters of a `valorPerc`.
pub const VALOR_PERC_LEN_MAX: usize = 16;

/// The members a cobv's request may have.
const COBV_MEMBERS: [&str; 6] =
    ["calendario", "devedor", "valor", "chave", "solicitacaoPagador", "infoAdicionais"];

/// A cobv debtor's optional address and e-mail, as given (`logradouro`, `cidade`, `uf`,
/// `cep`, `email`); refuses any other member besides `cpf`, `cnpj` and `nome`.
pub(super) fn devedor_address(d: &mut Fields<'_>) -> Map<String, Value> {
    d.only(&["cpf", "cnpj", "nome", "logradouro", "cidade", "uf", "cep", "email"]);
    let mut out = Map::new();
    for field in ["logradouro", "cidade"] {
        if let Some(t) = d.text(field, false, DEVEDOR_ADDRESS_LEN_MAX) {
            out.insert(field.into(), json!(t));
        }
    }
    if let Some(uf) = d.string("uf", false) {
        if uf.len() == 2 && uf.bytes().all(|b| b.is_ascii_uppercase()) {
            out.insert("uf".into(), json!(uf));
        } else {
            d.fail("uf", "must be a state's two upper-case letters");
        }
    }
    if let Some(cep) = d.string("cep", false) {
        if cep.len() == 8 && cep.bytes().all(|b| b.is_ascii_digit()) {
            out.insert("cep".into(), json!(cep));
        } else {
            d.fail("cep", "must be 8 digits");
        }
    }
    if let Some(email) = d.text("email", false, DEVEDOR_EMAIL_LEN_MAX) {
        let parts = email.split_once('@');
        if parts.is_some_and(|(user, host)| !user.is_empty() && host.contains('.') && !email.contains(' ')) {
            out.insert("email".into(), json!(email));
        } else {
            d.fail("email", "must be an e-mail address");
        }
    }
    out
}

/// A `modalidade`: an integer in `range`, also accepted as a string of digits (the API
/// Pix's examples write both).
fn modalidade(f: &mut Fields<'_>, range: std::ops::RangeInclusive<u8>) -> Option<u8> {
    let parsed = match f.raw("modalidade").filter(|v| !v.is_null()) {
        None => {
            f.fail("modalidade", "is required");
            return None;
        }
        Some(Value::Number(n)) => n.as_u64().and_then(|v| u8::try_from(v).ok()),
        Some(Value::String(s)) => s.parse::<u8>().ok(),
        Some(_) => None,
    };
    match parsed.filter(|m| range.contains(m)) {
        Some(m) => Some(m),
        None => {
            f.fail("modalidade", format!("must be an integer from {} to {}", range.start(), range.end()));
            None
        }
    }
}

/// A `valorPerc` as a value (at least 0.01) or as a percent (above 0, at most 100): a
/// decimal string with two places.
fn valor_perc(f: &mut Fields<'_>, field: &str, percent: bool) -> Option<Amount> {
    let text = f.text(field, true, VALOR_PERC_LEN_MAX)?;
    let (whole, cents) = text.split_once('.').unwrap_or((text, ""));
    let shaped = !whole.is_empty()
        && cents.len() == 2
        && whole.bytes().all(|b| b.is_ascii_digit())
        && cents.bytes().all(|b| b.is_ascii_digit());
    let amount = if !shaped {
        None
    } else if percent {
        Percent::parse(text).ok().filter(|p| !p.as_decimal().is_zero()).map(Amount::Percent)
    } else {
        Money::parse_two_places(text).map(Amount::Value)
    };
    if amount.is_none() {
        let rule = if percent {
            "must be a percent above 0 and at most 100, a decimal string with 2 places"
        } else {
            "must be a decimal string with 2 places, at least 0.01"
        };
        f.fail_as(field, rule, ViolationKind::Amount);
    }
    amount
}

/// A fine or an abatement: modalidade 1 a value, 2 a percent.
fn value_or_percent(f: &mut Fields<'_>) -> Option<Amount> {
    f.only(&["modalidade", "valorPerc"]);
    let m = modalidade(f, 1..=2)?;
    valor_perc(f, "valorPerc", m == 2)
}

/// Interest: modalidade 1 a value per calendar day, 2 to 4 a percent per day, month or year
/// (calendar days); 5 to 8 the same in business days.
fn interest(f: &mut Fields<'_>) -> Option<Interest> {
    f.only(&["modalidade", "valorPerc"]);
    let m = modalidade(f, 1..=8)?;
    let days = if m <= 4 { Days::Calendar } else { Days::Business };
    let period = match (m - 1) % 4 {
        0 => None,
        1 => Some(Period::Day),
        2 => Some(Period::Month),
        _ => Some(Period::Year),
    };
    match (period, valor_perc(f, "valorPerc", period.is_some())?) {
        (None, Amount::Value(v)) => Some(Interest::ValuePerDay(v, days)),
        (Some(p), Amount::Percent(pc)) => Some(Interest::Percent(pc, p, days)),
        _ => None,
    }
}

/// A discount: modalidade 1 (values) or 2 (percents) until the dates of `descontoDataFixa`
/// (1 to 3 entries, dates ascending, none after the due date); 3 to 6 a value (3, 4) or a
/// percent (5, 6) per calendar (3, 5) or business (4, 6) day paid early, in `valorPerc`.
fn discount(f: &mut Fields<'_>, obj: &Map<String, Value>, due: Option<NaiveDate>) -> Option<Discount> {
    let m = modalidade(f, 1..=6)?;
    if m <= 2 {
        f.only(&["modalidade", "descontoDataFixa"]);
        let items = match obj.get("descontoDataFixa") {
            Some(Value::Array(items)) if (1..=DISCOUNT_DATES_MAX).contains(&items.len()) => items,
            _ => {
                f.fail(
                    "descontoDataFixa",
                    format!("must be an array of 1 to {DISCOUNT_DATES_MAX} {{data, valorPerc}}"),
                );
                return None;
            }
        };
        let mut dates = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let Value::Object(entry) = item else {
                f.fail(&format!("descontoDataFixa[{i}]"), "must be an object");
                continue;
            };
            let mut e = Fields::nested(entry, format!("{}descontoDataFixa[{i}].", f.prefix()));
            e.only(&["data", "valorPerc"]);
            let day = e.date("data", true);
            let amount = valor_perc(&mut e, "valorPerc", m == 2);
            if let (Some(day), Some(due)) = (day, due) {
                if day > due {
                    e.fail("data", "must not be after calendario.dataDeVencimento");
                }
            }
            if let (Some(day), Some((before, _))) = (day, dates.last()) {
                if day <= *before {
                    e.fail("data", "must be after the date of the entry before");
                }
            }
            f.violations.append(&mut e.violations);
            if let (Some(day), Some(amount)) = (day, amount) {
                dates.push((day, amount));
            }
        }
        (dates.len() == items.len()).then_some(Discount::UntilDates(dates))
    } else {
        f.only(&["modalidade", "valorPerc"]);
        let days = if m % 2 == 1 { Days::Calendar } else { Days::Business };
        valor_perc(f, "valorPerc", m >= 5).map(|a| Discount::PerDayEarly(a, days))
    }
}

/// A cobv's body, for the txid of its path, on the account whose receiving key is
/// `receiving_key`, on `today` (Sao Paulo): a due date at most
/// [`DUE_DATE_AHEAD_DAYS_MAX`] days ahead, still payable today.
pub fn read_cobv(
    obj: &Map<String, Value>,
    txid: String,
    receiving_key: &str,
    today: NaiveDate,
) -> Result<ChargeRequest, ApiError> {
    let mut f = Fields::new(obj);
    f.only(&COBV_MEMBERS);
    let calendario = f.object("calendario", |c| {
        c.only(&["dataDeVencimento", "validadeAposVencimento"]);
        let due = c.date("dataDeVencimento", true);
        let validity = c
            .integer("validadeAposVencimento", 0, u64::from(VALIDITY_AFTER_DUE_DAYS_MAX))
            .unwrap_or(VALIDITY_AFTER_DUE_DAYS_DEFAULT);
        let validity = u32::try_from(validity).unwrap_or(VALIDITY_AFTER_DUE_DAYS_MAX);
        if let Some(d) = due {
            if (d - today).num_days() > DUE_DATE_AHEAD_DAYS_MAX {
                c.fail("dataDeVencimento", format!("must be at most {DUE_DATE_AHEAD_DAYS_MAX} days ahead"));
            } else if crate::domain::cobv::last_payable_day(d, validity) < today {
                c.fail(
                    "dataDeVencimento",
                    "with validadeAposVencimento, the charge could no longer be paid today",
                );
            }
        }
        due.map(|d| (d, validity))
    });
    if calendario.is_none() {
        f.fail("calendario", "is required");
    }
    let due = calendario.flatten().map(|(d, _)| d);
    let valor = match obj.get("valor") {
        Some(Value::Object(v)) => {
            let mut vf = Fields::nested(v, "valor.".into());
            vf.only(&["original", "multa", "juros", "abatimento", "desconto"]);
            let original = vf.string("original", true).and_then(|t| {
                let m = Money::parse_two_places(t);
                if m.is_none() {
                    vf.fail_as(
                        "original",
                        "must be a decimal string with 2 places, at least 0.01",
                        ViolationKind::Amount,
                    );
                }
                m
            });
            let fine = vf.object("multa", value_or_percent).flatten();
            let interest = vf.object("juros", interest).flatten();
            let abatement = vf.object("abatimento", value_or_percent).flatten();
            let discount = match v.get("desconto") {
                Some(Value::Object(d)) => {
                    let mut df = Fields::nested(d, "valor.desconto.".into());
                    let out = discount(&mut df, d, due);
                    vf.violations.append(&mut df.violations);
                    out
                }
                None | Some(Value::Null) => None,
                Some(_) => {
                    vf.fail("desconto", "must be an object");
                    None
                }
            };
            if let (Some(o), Some(Amount::Value(a))) = (original, abatement) {
                if a >= o {
                    vf.fail_as("abatimento.valorPerc", "must be below valor.original", ViolationKind::Amount);
                }
            }
            f.violations.append(&mut vf.violations);
            original.map(|o| (o, fine, interest, abatement, discount))
        }
        None | Some(Value::Null) => {
            f.fail("valor", "is required");
            None
        }
        Some(_) => {
            f.fail("valor", "must be an object");
            None
        }
    };
    let debtor = devedor(&mut f, true);
    if obj.get("devedor").is_none_or(Value::is_null) {
        f.fail("devedor", "is required: a cobv names its debtor");
    }
    let chave = f.text("chave", false, CHAVE_LEN_MAX).map(str::to_owned);
    if chave.as_ref().is_some_and(|c| c != receiving_key) {
        f.fail("chave", "must be this account's receiving key");
    }
    let solicitacao = f.text("solicitacaoPagador", false, DESCRIPTION_LEN_MAX).map(str::to_owned);
    let info = info_adicionais(&mut f, obj);
    let (
        Some(Some((due, validity))),
        Some((original, fine, interest, abatement, discount)),
        Some(debtor),
        true,
    ) = (calendario, valor, debtor, f.violations.is_empty())
    else {
        return Err(ApiError::Validation(f.violations));
    };
    let terms =
        Terms { original, due, validity_after_due_days: validity, abatement, discount, fine, interest };
    Ok(ChargeRequest {
        external_id: None,
        txid: Some(txid),
        value: original,
        description: solicitacao.clone().unwrap_or_else(|| "cobv".into()),
        payer_name: debtor.0,
        payer_document: Some(debtor.1),
        // A cobv's expiration is its terms' (the end of its last payable day).
        expiration_seconds: 0,
        additional_info: Default::default(),
        scenario: None,
        splits: Vec::new(),
        cob: Some(CobDetails {
            expiracao: 0,
            modalidade_alteracao: 0,
            chave: receiving_key.to_owned(),
            solicitacao_pagador: solicitacao,
            info_adicionais: info,
            devedor: Some(debtor.2),
            vencimento: Some(CobvDetails { revisao: 0, terms }),
        }),
    })
}

fn valor_perc_text(a: Amount) -> (bool, String) {
    match a {
        Amount::Value(m) => (false, m.to_cents_string()),
        Amount::Percent(p) => (true, format!("{:.2}", p.as_decimal())),
    }
}

/// The API's `valor` of a cobv's terms: what [`read_cobv`] reads back into the same terms.
fn valor_view(t: &Terms) -> Value {
    let mut v = json!({"original": t.original.to_cents_string()});
    let simple = |a: Amount| {
        let (percent, text) = valor_perc_text(a);
        json!({"modalidade": if percent { 2 } else { 1 }, "valorPerc": text})
    };
    if let Some(a) = t.fine {
        v["multa"] = simple(a);
    }
    if let Some(a) = t.abatement {
        v["abatimento"] = simple(a);
    }
    if let Some(i) = t.interest {
        let (m, text) = match i {
            Interest::ValuePerDay(m, _) => (1, valor_perc_text(Amount::Value(m)).1),
            Interest::Percent(p, period, _) => {
                let m = match period {
                    Period::Day => 2,
                    Period::Month => 3,
                    Period::Year => 4,
                };
                (m, valor_perc_text(Amount::Percent(p)).1)
            }
        };
        let business =
            matches!(i, Interest::ValuePerDay(_, Days::Business) | Interest::Percent(_, _, Days::Business));
        v["juros"] = json!({"modalidade": if business { m + 4 } else { m }, "valorPerc": text});
    }
    match &t.discount {
        None => {}
        Some(Discount::UntilDates(dates)) => {
            let percent = dates.first().is_some_and(|(_, a)| matches!(a, Amount::Percent(_)));
            let entries: Vec<Value> = dates
                .iter()
                .map(|(d, a)| json!({"data": d.format("%Y-%m-%d").to_string(), "valorPerc": valor_perc_text(*a).1}))
                .collect();
            v["desconto"] = json!({"modalidade": if percent { 2 } else { 1 }, "descontoDataFixa": entries});
        }
        Some(Discount::PerDayEarly(a, days)) => {
            let (percent, text) = valor_perc_text(*a);
            let m = match (percent, days) {
                (false, Days::Calendar) => 3,
                (false, Days::Business) => 4,
                (true, Days::Calendar) => 5,
                (true, Days::Business) => 6,
            };
            v["desconto"] = json!({"modalidade": m, "valorPerc": text});
        }
    }
    v
}

/// The cobv's request as it stands: what a revision patches.
fn request_of(t: &Transaction) -> Map<String, Value> {
    let mut body = Map::new();
    let (Some(cob), Some(v)) = (t.charge.as_ref().and_then(|c| c.cob.as_ref()), t.cobv()) else {
        return body;
    };
    body.insert(
        "calendario".into(),
        json!({
            "dataDeVencimento": v.terms.due.format("%Y-%m-%d").to_string(),
            "validadeAposVencimento": v.terms.validity_after_due_days,
        }),
    );
    if let Some(d) = &cob.devedor {
        body.insert("devedor".into(), d.clone());
    }
    body.insert("valor".into(), valor_view(&v.terms));
    body.insert("chave".into(), json!(cob.chave));
    if let Some(s) = &cob.solicitacao_pagador {
        body.insert("solicitacaoPagador".into(), json!(s));
    }
    let info: Vec<Value> = cob.info_adicionais.iter().map(|(n, v)| json!({"nome": n, "valor": v})).collect();
    body.insert("infoAdicionais".into(), json!(info));
    body
}

/// The API Pix view of a cobv.
pub(super) fn view(t: &Transaction) -> Value {
    let (Some(charge), Some(v)) = (t.charge.as_ref(), t.cobv()) else {
        return Value::Null;
    };
    let mut out = Value::Object(request_of(t));
    out["calendario"]["criacao"] = json!(iso(t.created_at));
    out["txid"] = json!(charge.txid);
    out["revisao"] = json!(v.revisao);
    out["loc"] = json!({"id": t.local_id, "location": charge.pix_code, "tipoCob": "cobv"});
    out["location"] = json!(charge.pix_code);
    out["status"] = json!(status(t));
    out
}

/// RFC 7396: `patch` merged into `target`.
fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(members) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                merge_members(t, members);
            }
        }
        other => *target = other.clone(),
    }
}

/// RFC 7396 on an object: each member of `patch` replaces (or, `null`, removes) its own.
fn merge_members(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (name, value) in patch {
        if value.is_null() {
            target.remove(name);
        } else {
            merge_patch(target.entry(name.clone()).or_insert(Value::Null), value);
        }
    }
}

#[utoipa::path(
    put, path = "/cobv/{txid}", tag = "family B",
    params(("txid" = String, Path, pattern = "^[A-Za-z0-9]{26,35}$", description = "26 to 35 letters and digits, unique per account (cob and cobv share them)")),
    request_body(content = super::schemas::CobvRequest),
    responses(
        (status = 201, description = "The cobv, status ATIVA, revisao 0, location = its BR Code (no amount: it is priced on the day it is paid; valorDoDia says today's price)", body = super::schemas::CobvView, headers(("ETag" = String, description = "\"0\""))),
        (status = 400, body = SimpleErrorBody),
        (status = 401, body = SimpleErrorBody),
        (status = 409, description = "txid already exists", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
/// `PUT /cobv/{txid}`: a charge with a due date.
pub async fn put_cobv(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let txid = path.into_inner();
    check_txid(&txid)?;
    let receiving_key = receiving_key(&state, &caller)?;
    let today = payment_day(state.clock.now());
    let request = read_cobv(&request_object(&req, &bytes)?, txid, &receiving_key, today)?;
    let tx = ask(&state, &caller, CreateCharge(request)).await??;
    Ok(HttpResponse::Created().insert_header(etag(&tx)).json(with_price_of_day(
        super::payload::with_code(&state, view(&tx), &tx),
        &tx,
        today,
    )))
}

/// The `ETag` of a cobv: its revision, as a strong entity tag.
fn etag(t: &Transaction) -> (actix_web::http::header::HeaderName, String) {
    (actix_web::http::header::ETAG, format!("\"{}\"", t.cobv().map_or(0, |v| v.revisao)))
}

/// The revision an `If-Match` names: `None` without the header or with `*` (any), else the
/// revision, or 412 for a tag that is not one of ours (it can never match).
fn if_match(req: &HttpRequest) -> Result<Option<u32>, ApiError> {
    let Some(value) = req.headers().get(actix_web::http::header::IF_MATCH) else { return Ok(None) };
    let text = value.to_str().unwrap_or("").trim();
    if text == "*" {
        return Ok(None);
    }
    text.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .and_then(|t| t.parse::<u32>().ok())
        .map(Some)
        .ok_or_else(|| {
            ApiError::PreconditionFailed(format!(
                "If-Match {text} is not a revision of this cobv: send the ETag its last read answered"
            ))
        })
}

/// Adds `valorDoDia` to a cobv's view while it is ATIVA and payable on `today`: the price of
/// paying it that day (the terms stay in `valor`, as they were sent).
fn with_price_of_day(mut v: Value, t: &Transaction, today: NaiveDate) -> Value {
    let Some(terms) = t.cobv().map(|c| &c.terms) else { return v };
    if t.is_final() {
        return v;
    }
    if let Ok(p) = terms.price(today) {
        v["valorDoDia"] = json!({
            "data": today.format("%Y-%m-%d").to_string(),
            "original": p.original.to_cents_string(),
            "abatimento": p.abatement.to_cents_string(),
            "desconto": p.discount.to_cents_string(),
            "multa": p.fine.to_cents_string(),
            "juros": p.interest.to_cents_string(),
            "final": p.due.to_cents_string(),
        });
    }
    v
}

#[utoipa::path(
    get, path = "/cobv/{txid}", tag = "family B",
    params(("txid" = String, Path, pattern = "^[A-Za-z0-9]{26,35}$", description = "26 to 35 letters and digits")),
    responses(
        (status = 200, description = "The cobv as it is now, with what paying it costs today (valorDoDia) while ATIVA, and the PIX that paid it once CONCLUIDA; ETag: its revision", body = super::schemas::CobvView, headers(("ETag" = String, description = "the revision, quoted: send it back in If-Match"))),
        (status = 400, description = "The txid is not 26 to 35 letters and digits", body = SimpleErrorBody),
        (status = 404, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get_cobv(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let cobv = find(&state, &caller, &path.into_inner(), true)?;
    let refunds = state.repo.refunds_of(caller.account_id, &[&cobv])?;
    let today = payment_day(state.clock.now());
    Ok(HttpResponse::Ok().insert_header(etag(&cobv)).json(with_price_of_day(
        view_with_pix(&state, &cobv, &refunds),
        &cobv,
        today,
    )))
}

#[utoipa::path(
    patch, path = "/cobv/{txid}", tag = "family B",
    params(
        ("txid" = String, Path, pattern = "^[A-Za-z0-9]{26,35}$", description = "26 to 35 letters and digits"),
        ("If-Match" = Option<String>, Header, description = "the ETag of the read the change is based on (\"3\"): a revision made since is 412 instead of overwritten; without it, the change is based on the revision current when it arrives"),
    ),
    request_body(content = super::schemas::CobvPatch, description = "A JSON merge patch of the cobv's request (members given replace, objects member by member, null removes), or {status: REMOVIDA_PELO_USUARIO_RECEBEDOR} alone"),
    responses(
        (status = 200, description = "The revised cobv (revisao one more), or the removed one; ETag: its revision", body = super::schemas::CobvView, headers(("ETag" = String, description = "the revision, quoted"))),
        (status = 400, body = SimpleErrorBody),
        (status = 404, body = SimpleErrorBody),
        (status = 409, description = "the cobv is no longer ATIVA, or was revised meanwhile", body = SimpleErrorBody),
        (status = 412, description = "If-Match names another revision than the current one", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn patch_cobv(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let txid = path.into_inner();
    let cobv = find(&state, &caller, &txid, true)?;
    let current = cobv.cobv().map_or(0, |v| v.revisao);
    let based_on = match if_match(&req)? {
        Some(r) if r != current => {
            return Err(ApiError::PreconditionFailed(format!(
                "the cobv is at revision {current}, not {r}: read it again and send the change again"
            )))
        }
        Some(r) => r,
        None => current,
    };
    let patch = request_object(&req, &bytes)?;
    let mut f = Fields::new(&patch);
    if patch.contains_key("status") {
        f.only(&["status"]);
        if f.string("status", true).is_some_and(|s| s != "REMOVIDA_PELO_USUARIO_RECEBEDOR") {
            f.fail("status", "must be REMOVIDA_PELO_USUARIO_RECEBEDOR, sent alone");
        }
        if !f.violations.is_empty() {
            return Err(ApiError::Validation(f.violations));
        }
        let tx = ask(&state, &caller, CancelCharge { local_id: cobv.local_id }).await??;
        return Ok(HttpResponse::Ok().insert_header(etag(&tx)).json(super::payload::with_code(
            &state,
            view(&tx),
            &tx,
        )));
    }
    // A cobv no longer ATIVA is a state conflict, whatever the revision says (its terms
    // may not even be payable today any more).
    if cobv.is_final() {
        return Err(ApiError::Rejected(Rejection::ChargeNotOpen { status: cobv.status.as_str() }));
    }
    f.only(&COBV_MEMBERS);
    if patch.is_empty() {
        f.fail("body", "must name at least one member to revise, or status");
    }
    if !f.violations.is_empty() {
        return Err(ApiError::Validation(f.violations));
    }
    let mut merged = request_of(&cobv);
    merge_members(&mut merged, &patch);
    let receiving_key = receiving_key(&state, &caller)?;
    let today = payment_day(state.clock.now());
    let request = read_cobv(&merged, txid, &receiving_key, today)?;
    let tx = ask(&state, &caller, ReviseCharge { local_id: cobv.local_id, request, based_on }).await??;
    Ok(HttpResponse::Ok().insert_header(etag(&tx)).json(with_price_of_day(
        super::payload::with_code(&state, view(&tx), &tx),
        &tx,
        today,
    )))
}

#[utoipa::path(
    get, operation_id = "list_cobvs", path = "/cobv", tag = "family B",
    params(
        ("inicio" = String, Query, description = "RFC 3339: created at or after (required)"),
        ("fim" = String, Query, description = "RFC 3339: created at or before, at most 31 days after inicio (required)"),
        ("cpf" = Option<String>, Query, description = "the debtor's CPF; not with cnpj"),
        ("cnpj" = Option<String>, Query, description = "the debtor's CNPJ; not with cpf"),
        ("status" = Option<String>, Query, description = "ATIVA, CONCLUIDA, REMOVIDA_PELO_USUARIO_RECEBEDOR or REMOVIDA_PELO_PSP"),
        ("paginacao.paginaAtual" = Option<u32>, Query, minimum = 0, description = "from 0, default 0"),
        ("paginacao.itensPorPagina" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "1 to 1000, default 100"),
    ),
    responses(
        (status = 200, description = "Newest first, with the filters echoed", body = super::schemas::CobvList),
        (status = 400, body = SimpleErrorBody),
        (status = 401, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
/// `GET /cobv`: the account's cobvs created in a range.
pub async fn list_cobvs(
    caller: Caller,
    query: web::Query<HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    super::cob::list(&caller, &query.into_inner(), &state, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::testing::{object, violations};

    const TXID: &str = "boleto20261124abcdefghijk01";
    const KEY: &str = "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c";

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 24).unwrap()
    }

    fn read(body: &Value) -> Result<ChargeRequest, ApiError> {
        read_cobv(&object(&body.to_string()), TXID.into(), KEY, today())
    }

    fn terms(body: &Value) -> Terms {
        let r = read(body).unwrap_or_else(|e| panic!("refused {body}: {:?}", violations(e)));
        r.cob.unwrap().vencimento.unwrap().terms
    }

    fn m(s: &str) -> Money {
        Money::parse(s).unwrap()
    }

    fn p(s: &str) -> Percent {
        Percent::parse(s).unwrap()
    }

    fn cobv(valor: Value) -> Value {
        json!({
            "calendario": {"dataDeVencimento": "2026-12-10", "validadeAposVencimento": 15},
            "devedor": {"cpf": "52998224725", "nome": "Ana Devedora", "logradouro": "Rua A, 1", "cidade": "Recife", "uf": "PE", "cep": "50000000", "email": "ana@example.com"},
            "valor": valor,
            "solicitacaoPagador": "boleto 42"
        })
    }

    #[test]
    fn a_full_cobv_reads_into_its_terms_and_debtor() {
        let body = cobv(json!({
            "original": "100.00",
            "multa": {"modalidade": 2, "valorPerc": "2.00"},
            "juros": {"modalidade": "7", "valorPerc": "1.50"},
            "abatimento": {"modalidade": 1, "valorPerc": "5.00"},
            "desconto": {"modalidade": 1, "descontoDataFixa": [
                {"data": "2026-12-01", "valorPerc": "10.00"}, {"data": "2026-12-05", "valorPerc": "5.00"}]}
        }));
        let r = read(&body).unwrap();
        assert_eq!(
            (r.value, r.payer_name.as_str(), r.payer_document.as_deref()),
            (m("100.00"), "Ana Devedora", Some("52998224725"))
        );
        let cob = r.cob.unwrap();
        assert_eq!(cob.devedor.as_ref().unwrap()["cep"], "50000000", "the address is kept");
        let t = cob.vencimento.unwrap().terms;
        assert_eq!((t.due, t.validity_after_due_days), (NaiveDate::from_ymd_opt(2026, 12, 10).unwrap(), 15));
        assert_eq!(t.fine, Some(Amount::Percent(p("2"))));
        assert_eq!(t.interest, Some(Interest::Percent(p("1.5"), Period::Month, Days::Business)));
        assert_eq!(t.abatement, Some(Amount::Value(m("5"))));
        assert_eq!(
            t.discount,
            Some(Discount::UntilDates(vec![
                (NaiveDate::from_ymd_opt(2026, 12, 1).unwrap(), Amount::Value(m("10"))),
                (NaiveDate::from_ymd_opt(2026, 12, 5).unwrap(), Amount::Value(m("5"))),
            ]))
        );
    }

    #[test]
    fn every_modality_reads_as_the_api_pix_numbers_it() {
        let interest = |m: u8, vp: &str| {
            terms(&cobv(json!({"original": "10.00", "juros": {"modalidade": m, "valorPerc": vp}}))).interest
        };
        let (c, b) = (Days::Calendar, Days::Business);
        assert_eq!(interest(1, "0.10"), Some(Interest::ValuePerDay(m("0.10"), c)));
        assert_eq!(interest(2, "1.00"), Some(Interest::Percent(p("1"), Period::Day, c)));
        assert_eq!(interest(3, "1.00"), Some(Interest::Percent(p("1"), Period::Month, c)));
        assert_eq!(interest(4, "1.00"), Some(Interest::Percent(p("1"), Period::Year, c)));
        assert_eq!(interest(5, "0.10"), Some(Interest::ValuePerDay(m("0.10"), b)));
        assert_eq!(interest(6, "1.00"), Some(Interest::Percent(p("1"), Period::Day, b)));
        assert_eq!(interest(7, "1.00"), Some(Interest::Percent(p("1"), Period::Month, b)));
        assert_eq!(interest(8, "1.00"), Some(Interest::Percent(p("1"), Period::Year, b)));
        let discount = |m: u8| {
            terms(&cobv(json!({"original": "10.00", "desconto": {"modalidade": m, "valorPerc": "0.50"}})))
                .discount
        };
        assert_eq!(discount(3), Some(Discount::PerDayEarly(Amount::Value(m("0.50")), c)));
        assert_eq!(discount(4), Some(Discount::PerDayEarly(Amount::Value(m("0.50")), b)));
        assert_eq!(discount(5), Some(Discount::PerDayEarly(Amount::Percent(p("0.5")), c)));
        assert_eq!(discount(6), Some(Discount::PerDayEarly(Amount::Percent(p("0.5")), b)));
        let fixed = |field: &str, m: u8| {
            let t = terms(&cobv(json!({"original": "10.00", field: {"modalidade": m, "valorPerc": "1.00"}})));
            if field == "multa" {
                t.fine
            } else {
                t.abatement
            }
        };
        for field in ["multa", "abatimento"] {
            assert_eq!(fixed(field, 1), Some(Amount::Value(m("1"))), "{field}");
            assert_eq!(fixed(field, 2), Some(Amount::Percent(p("1"))), "{field}");
        }
        let pct = terms(&cobv(
            json!({"original": "10.00", "desconto": {"modalidade": 2, "descontoDataFixa": [{"data": "2026-12-10", "valorPerc": "3.00"}]}}),
        ));
        assert_eq!(
            pct.discount,
            Some(Discount::UntilDates(vec![(
                NaiveDate::from_ymd_opt(2026, 12, 10).unwrap(),
                Amount::Percent(p("3"))
            )]))
        );
    }

    #[test]
    fn the_view_reads_back_into_the_same_request() {
        for valor in [
            json!({"original": "100.00"}),
            json!({"original": "100.00", "multa": {"modalidade": 1, "valorPerc": "2.50"}, "juros": {"modalidade": 8, "valorPerc": "12.00"},
                "abatimento": {"modalidade": 2, "valorPerc": "10.00"}, "desconto": {"modalidade": 2, "descontoDataFixa": [{"data": "2026-12-01", "valorPerc": "5.00"}]}}),
            json!({"original": "1.00", "juros": {"modalidade": 1, "valorPerc": "0.01"}, "desconto": {"modalidade": 6, "valorPerc": "0.25"}}),
        ] {
            let first = read(&cobv(valor.clone())).unwrap();
            let tx = Transaction {
                charge: Some(crate::domain::transaction::ChargeDetails {
                    correlation_id: uuid::Uuid::nil(),
                    txid: TXID.into(),
                    pix_code: "000201".into(),
                    expires_at: chrono::Utc::now(),
                    additional_info: Default::default(),
                    cob: first.cob.clone(),
                    splits: vec![],
                    split_transactions: vec![],
                }),
                ..Transaction::new(
                    1,
                    uuid::Uuid::nil(),
                    crate::domain::ids::AccountId::new(1).unwrap(),
                    crate::domain::transaction::TxKind::CashIn,
                    first.value,
                    chrono::Utc::now(),
                )
            };
            assert_eq!(view(&tx)["valor"], valor, "the view shows valor as it was sent");
            let again = read_cobv(&request_of(&tx), TXID.into(), KEY, today()).unwrap();
            assert_eq!(again.cob, first.cob, "{valor}");
        }
    }

    #[test]
    fn every_invalid_cobv_is_a_validation_error_naming_its_field() {
        let base = cobv(json!({"original": "100.00"}));
        let with = |path: &[&str], v: Value| {
            let mut b = base.clone();
            let mut at = &mut b;
            for p in &path[..path.len() - 1] {
                at = at.get_mut(*p).unwrap();
            }
            at[path[path.len() - 1]] = v;
            b
        };
        let cases: Vec<(Value, &str)> = vec![
            (with(&["calendario", "dataDeVencimento"], json!("2026-13-01")), "calendario.dataDeVencimento"),
            (with(&["calendario", "dataDeVencimento"], json!("2026-1-5")), "calendario.dataDeVencimento"),
            (with(&["calendario", "dataDeVencimento"], json!("2036-12-01")), "calendario.dataDeVencimento"),
            (with(&["calendario", "dataDeVencimento"], json!("2026-10-24")), "calendario.dataDeVencimento"),
            (
                with(&["calendario", "validadeAposVencimento"], json!(3651)),
                "calendario.validadeAposVencimento",
            ),
            (with(&["calendario", "expiracao"], json!(3600)), "calendario.expiracao"),
            (with(&["valor", "original"], json!("100")), "valor.original"),
            (
                with(&["valor", "multa"], json!({"modalidade": 3, "valorPerc": "1.00"})),
                "valor.multa.modalidade",
            ),
            (
                with(&["valor", "multa"], json!({"modalidade": 2, "valorPerc": "100.01"})),
                "valor.multa.valorPerc",
            ),
            (
                with(&["valor", "multa"], json!({"modalidade": 1, "valorPerc": "1.5"})),
                "valor.multa.valorPerc",
            ),
            (
                with(&["valor", "multa"], json!({"modalidade": 1, "valorPerc": "0.00"})),
                "valor.multa.valorPerc",
            ),
            (
                with(&["valor", "juros"], json!({"modalidade": 9, "valorPerc": "1.00"})),
                "valor.juros.modalidade",
            ),
            (with(&["valor", "juros"], json!({"valorPerc": "1.00"})), "valor.juros.modalidade"),
            (
                with(&["valor", "abatimento"], json!({"modalidade": 1, "valorPerc": "100.00"})),
                "valor.abatimento.valorPerc",
            ),
            (
                with(&["valor", "desconto"], json!({"modalidade": 1, "descontoDataFixa": []})),
                "valor.desconto.descontoDataFixa",
            ),
            (
                with(
                    &["valor", "desconto"],
                    json!({"modalidade": 1, "descontoDataFixa": [{"data": "2026-12-11", "valorPerc": "1.00"}]}),
                ),
                "valor.desconto.descontoDataFixa[0].data",
            ),
            (
                with(
                    &["valor", "desconto"],
                    json!({"modalidade": 1, "descontoDataFixa": [{"data": "2026-12-05", "valorPerc": "1.00"}, {"data": "2026-12-05", "valorPerc": "1.00"}]}),
                ),
                "valor.desconto.descontoDataFixa[1].data",
            ),
            (
                with(
                    &["valor", "desconto"],
                    json!({"modalidade": 1, "descontoDataFixa": [{"data": "2026-12-01", "valorPerc": "1.00"}, {"data": "2026-12-02", "valorPerc": "1.00"}, {"data": "2026-12-03", "valorPerc": "1.00"}, {"data": "2026-12-04", "valorPerc": "1.00"}]}),
                ),
                "valor.desconto.descontoDataFixa",
            ),
            (
                with(
                    &["valor", "desconto"],
                    json!({"modalidade": 3, "descontoDataFixa": [{"data": "2026-12-01", "valorPerc": "1.00"}]}),
                ),
                "valor.desconto.descontoDataFixa",
            ),
            (with(&["valor", "extra"], json!(1)), "valor.extra"),
            (with(&["devedor", "uf"], json!("pe")), "devedor.uf"),
            (with(&["devedor", "cep"], json!("5000-000")), "devedor.cep"),
            (with(&["devedor", "email"], json!("not an email")), "devedor.email"),
            (with(&["devedor", "cpf"], json!("52998224724")), "devedor.cpf"),
            // An invalid CNPJ is named as the cnpj (it was reported under cpf).
            (
                json!({"calendario": {"dataDeVencimento": "2026-12-10"}, "valor": {"original": "1.00"}, "devedor": {"cnpj": "11222333000182", "nome": "A"}}),
                "devedor.cnpj",
            ),
            (
                json!({"calendario": {"dataDeVencimento": "2026-12-10"}, "valor": {"original": "1.00"}, "devedor": {"cnpj": "1122233300018", "nome": "A"}}),
                "devedor.cnpj",
            ),
            (
                json!({"calendario": {"dataDeVencimento": "2026-12-10"}, "valor": {"original": "1.00"}, "devedor": {"cpf": "52998224725", "cnpj": "11222333000181", "nome": "A"}}),
                "devedor.cnpj",
            ),
            (
                json!({"calendario": {"dataDeVencimento": "2026-12-10"}, "valor": {"original": "1.00"}, "devedor": {"nome": "A"}}),
                "devedor.cpf",
            ),
            (with(&["devedor", "telefone"], json!("1")), "devedor.telefone"),
            (with(&["chave"], json!("someone@example.com")), "chave"),
            (with(&["loc"], json!({"id": 1})), "loc"),
            (
                json!({"calendario": {"dataDeVencimento": "2026-12-10"}, "valor": {"original": "1.00"}}),
                "devedor",
            ),
            (
                json!({"devedor": {"cpf": "52998224725", "nome": "A"}, "valor": {"original": "1.00"}}),
                "calendario",
            ),
            (
                json!({"calendario": {"dataDeVencimento": "2026-12-10"}, "devedor": {"cpf": "52998224725", "nome": "A"}}),
                "valor",
            ),
        ];
        for (body, field) in cases {
            let e = read(&body).err().unwrap_or_else(|| panic!("accepted {body}"));
            let fields: Vec<String> = violations(e).into_iter().map(|(f, _)| f).collect();
            assert!(fields.iter().any(|f| f == field), "{field} not in {fields:?} for {body}");
        }
    }

    #[test]
    fn the_due_date_limits_hold_at_their_boundaries() {
        let due = |d: &str, validity: u64| {
            let mut b = cobv(json!({"original": "1.00"}));
            b["calendario"] = json!({"dataDeVencimento": d, "validadeAposVencimento": validity});
            read(&b).is_ok()
        };
        // Today is 2026-11-24: the last payable day may be today, not yesterday.
        assert!(due("2026-11-24", 0));
        assert!(due("2026-11-14", 10));
        assert!(!due("2026-11-13", 10));
        assert!(!due("2026-11-23", 0));
        // A due date on a weekend is payable until the business day it moves to: created on
        // Monday 23, a cobv due Saturday 21 with no validity after it is still payable.
        let monday = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
        let mut b = cobv(json!({"original": "1.00"}));
        b["calendario"] = json!({"dataDeVencimento": "2026-11-21", "validadeAposVencimento": 0});
        assert!(read_cobv(&object(&b.to_string()), TXID.into(), KEY, monday).is_ok());
        assert!(read_cobv(&object(&b.to_string()), TXID.into(), KEY, today()).is_err());
        // At most 3650 days ahead.
        let last = today() + chrono::Duration::days(DUE_DATE_AHEAD_DAYS_MAX);
        assert!(due(&last.format("%Y-%m-%d").to_string(), 0));
        assert!(!due(&(last + chrono::Duration::days(1)).format("%Y-%m-%d").to_string(), 0));
        assert!(due("2026-12-01", u64::from(VALIDITY_AFTER_DUE_DAYS_MAX)));
        let mut b = cobv(json!({"original": "1.00"}));
        b["calendario"] = json!({"dataDeVencimento": "2026-12-01"});
        assert_eq!(terms(&b).validity_after_due_days, 30, "the default");
    }

    #[test]
    fn a_merge_patch_replaces_members_and_null_removes_them() {
        let mut target = json!({"a": 1, "o": {"x": 1, "y": 2}, "s": "t"});
        merge_patch(&mut target, &json!({"a": 2, "o": {"y": null, "z": 3}, "s": null, "n": [1]}));
        assert_eq!(target, json!({"a": 2, "o": {"x": 1, "z": 3}, "n": [1]}));
    }
}
