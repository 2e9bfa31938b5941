//! Family B immediate charges: `PUT /cob/{txid}` creates, `POST /cob` creates with a txid
//! the server chooses, `GET /cob/{txid}` reads and `PATCH /cob/{txid}` cancels (the last
//! three beyond the interface, as the API Pix has them). A cob is a charge like
//! a cash-in (same expiry, same payment through `/sandbox/pay`), with the client's txid and
//! the statuses ATIVA, CONCLUIDA, REMOVIDA_PELO_PSP, REMOVIDA_PELO_USUARIO_RECEBEDOR.

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::ask::ask;
use super::auth::Caller;
use super::body::{request_object, Fields};
use super::error::{ApiError, SimpleErrorBody, Violation, ViolationKind};
use super::{iso, AppState};
use crate::account::{CancelCharge, ChargeRequest, CreateCharge};
use crate::domain::document::TaxId;
use crate::domain::money::Money;
use crate::domain::transaction::{
    CobDetails, ErrorCode, Transaction, TxStatus, COB_TXID_LEN_MAX, COB_TXID_LEN_MIN, DESCRIPTION_LEN_MAX,
};

/// Bounds of `calendario.expiracao`, in seconds.
pub const COB_EXPIRACAO_MIN: u64 = 1;
pub const COB_EXPIRACAO_MAX: u64 = 604_800;
pub const COB_EXPIRACAO_DEFAULT: u64 = 86_400;
pub const CHAVE_LEN_MAX: usize = 77;
pub const INFO_ADICIONAIS_MAX: usize = 50;
pub const DEVEDOR_NOME_LEN_MAX: usize = 200;

/// The caller's receiving key: the only `chave` its charges carry.
pub(super) fn receiving_key(state: &AppState, caller: &Caller) -> Result<String, ApiError> {
    Ok(state
        .repo
        .account(caller.account_id)?
        .ok_or(ApiError::Unauthorized("the access token was revoked"))?
        .receiving_key)
}

pub(super) fn check_txid(txid: &str) -> Result<(), ApiError> {
    let ok = (COB_TXID_LEN_MIN..=COB_TXID_LEN_MAX).contains(&txid.len())
        && txid.bytes().all(|b| b.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(ApiError::Validation(vec![Violation::new("txid", "must be 26 to 35 alphanumeric characters")]))
    }
}

pub(super) fn status(t: &Transaction) -> &'static str {
    match (t.status, t.error_code) {
        (TxStatus::Pending, _) => "ATIVA",
        (TxStatus::Confirmed, _) => "CONCLUIDA",
        (TxStatus::Error, Some(ErrorCode::Cancelled)) => "REMOVIDA_PELO_USUARIO_RECEBEDOR",
        (TxStatus::Error, _) => "REMOVIDA_PELO_PSP",
    }
}

pub(super) fn view(t: &Transaction) -> Value {
    let (Some(charge), Some(cob)) = (t.charge.as_ref(), t.charge.as_ref().and_then(|c| c.cob.as_ref()))
    else {
        return Value::Null;
    };
    let mut v = json!({
        "calendario": {"criacao": iso(t.created_at), "expiracao": cob.expiracao},
        "txid": charge.txid,
        "revisao": 0,
        "loc": {"id": t.local_id, "location": charge.pix_code, "tipoCob": "cob"},
        "location": charge.pix_code,
        "status": status(t),
        "valor": {"original": t.value.to_cents_string(), "modalidadeAlteracao": cob.modalidade_alteracao},
        "chave": cob.chave,
        "infoAdicionais": cob.info_adicionais.iter().map(|(n, v)| json!({"nome": n, "valor": v})).collect::<Vec<_>>(),
    });
    if let Some(d) = &cob.devedor {
        v["devedor"] = d.clone();
    }
    if let Some(s) = &cob.solicitacao_pagador {
        v["solicitacaoPagador"] = json!(s);
    }
    v
}

/// `devedor`: `nome` and exactly one of `cpf` (11 digits) and `cnpj` (14 characters,
/// numeric or alphanumeric); with `address`, a cobv's debtor, also its optional address and
/// e-mail, and nothing else. Answers (name, document, the debtor as it is shown).
pub(super) fn devedor(f: &mut Fields<'_>, address: bool) -> Option<(String, String, Value)> {
    f.object("devedor", |d| {
        let extra = if address {
            super::cobv::devedor_address(d)
        } else {
            d.only(&["cpf", "cnpj", "nome"]);
            serde_json::Map::new()
        };
        let nome = d.text("nome", true, DEVEDOR_NOME_LEN_MAX).map(str::to_owned);
        let cpf = d.string("cpf", false);
        let cnpj = d.string("cnpj", false);
        // Each fault is named by the field that has it.
        let doc = match (cpf, cnpj) {
            (Some(c), None) => {
                let doc = TaxId::parse(c).ok().filter(|_| c.len() == 11);
                if doc.is_none() {
                    d.fail("cpf", "must be 11 digits with valid check digits");
                }
                doc
            }
            (None, Some(c)) => {
                let doc = TaxId::parse(c).ok().filter(|_| c.len() == 14);
                if doc.is_none() {
                    d.fail(
                        "cnpj",
                        "must be 14 characters (digits, or letters and digits) with valid check digits",
                    );
                }
                doc
            }
            (Some(_), Some(_)) => {
                d.fail("cnpj", "give cpf or cnpj, not both");
                None
            }
            (None, None) => {
                d.fail("cpf", "exactly one of cpf (11 digits) and cnpj (14 characters) is required");
                None
            }
        };
        match (nome, doc) {
            (Some(n), Some(doc)) => {
                let key = if doc.as_str().len() == 11 { "cpf" } else { "cnpj" };
                let mut shown = json!({ key: doc.as_str(), "nome": n });
                if let Some(o) = shown.as_object_mut() {
                    o.extend(extra);
                }
                Some((n.clone(), doc.to_string(), shown))
            }
            _ => None,
        }
    })
    .flatten()
}

pub(super) fn info_adicionais(
    f: &mut Fields<'_>,
    obj: &serde_json::Map<String, Value>,
) -> Vec<(String, String)> {
    match obj.get("infoAdicionais") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.len() <= INFO_ADICIONAIS_MAX => {
            let pairs: Vec<(String, String)> = items
                .iter()
                .filter_map(|i| {
                    Some((i.get("nome")?.as_str()?.to_owned(), i.get("valor")?.as_str()?.to_owned()))
                })
                .filter(|(n, v)| n.chars().count() <= 50 && v.chars().count() <= 200)
                .collect();
            if pairs.len() != items.len() {
                f.fail(
                    "infoAdicionais",
                    "items must be {nome, valor} strings (50 and 200 characters at most)",
                );
            }
            pairs
        }
        Some(_) => {
            f.fail("infoAdicionais", format!("must be an array of at most {INFO_ADICIONAIS_MAX} items"));
            Vec::new()
        }
    }
}

/// A cob's body, for the txid of its path, on the account whose receiving key is
/// `receiving_key` (the only `chave` it can take).
/// The members of a cob's request.
const COB_MEMBERS: [&str; 6] =
    ["calendario", "devedor", "valor", "chave", "solicitacaoPagador", "infoAdicionais"];

fn read_cob(
    obj: &serde_json::Map<String, Value>,
    txid: String,
    receiving_key: &str,
) -> Result<ChargeRequest, ApiError> {
    let mut f = Fields::new(obj);
    // Family B refuses a member it does not know (a typo never drops data silently).
    f.only(&COB_MEMBERS);
    let expiracao = f
        .object("calendario", |c| {
            c.only(&["expiracao"]);
            c.integer("expiracao", COB_EXPIRACAO_MIN, COB_EXPIRACAO_MAX)
        })
        .flatten()
        .unwrap_or(COB_EXPIRACAO_DEFAULT);
    if obj.get("calendario").is_none() {
        f.fail("calendario", "is required");
    }
    let valor = f.object("valor", |v| {
        v.only(&["original", "modalidadeAlteracao"]);
        let original = v.string("original", true).and_then(|t| {
            let m = Money::parse_two_places(t);
            if m.is_none() {
                v.fail_as(
                    "original",
                    "must be a decimal string with 2 places, at least 0.01",
                    ViolationKind::Amount,
                );
            }
            m
        });
        let modalidade = v.integer("modalidadeAlteracao", 0, 1).unwrap_or(0);
        (original, modalidade)
    });
    if valor.is_none() {
        f.fail("valor", "is required");
    }
    let debtor = devedor(&mut f, false);
    let chave = f.text("chave", false, CHAVE_LEN_MAX).map(str::to_owned);
    if chave.as_ref().is_some_and(|c| c != receiving_key) {
        f.fail("chave", "must be this account's receiving key");
    }
    let solicitacao = f.text("solicitacaoPagador", false, DESCRIPTION_LEN_MAX).map(str::to_owned);
    let info = info_adicionais(&mut f, obj);
    let (Some((Some(value), modalidade)), true) = (valor, f.violations.is_empty()) else {
        return Err(ApiError::Validation(f.violations));
    };
    let expiration_seconds = u32::try_from(expiracao).unwrap_or(u32::MAX);
    Ok(ChargeRequest {
        external_id: None,
        txid: Some(txid),
        value,
        description: solicitacao.clone().unwrap_or_else(|| "cob".into()),
        payer_name: debtor.as_ref().map(|d| d.0.clone()).unwrap_or_default(),
        payer_document: debtor.as_ref().map(|d| d.1.clone()),
        expiration_seconds,
        additional_info: Default::default(),
        scenario: None,
        splits: Vec::new(),
        cob: Some(CobDetails {
            expiracao: expiration_seconds,
            modalidade_alteracao: u8::try_from(modalidade).unwrap_or(0),
            chave: receiving_key.to_owned(),
            solicitacao_pagador: solicitacao,
            info_adicionais: info,
            devedor: debtor.map(|d| d.2),
            vencimento: None,
        }),
    })
}

#[utoipa::path(
    put, path = "/cob/{txid}", tag = "family B",
    params(("txid" = String, Path, pattern = "^[A-Za-z0-9]{26,35}$", description = "26 to 35 letters and digits, unique per account")),
    request_body(content = super::schemas::CobRequest),
    responses(
        (status = 201, description = "The cob, status ATIVA, location = its BR Code", body = super::schemas::CobView),
        (status = 400, body = SimpleErrorBody),
        (status = 401, body = SimpleErrorBody),
        (status = 409, description = "txid already exists", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn put_cob(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let txid = path.into_inner();
    check_txid(&txid)?;
    let receiving_key = receiving_key(&state, &caller)?;
    let request = read_cob(&request_object(&req, &bytes)?, txid, &receiving_key)?;
    let tx = ask(&state, &caller, CreateCharge(request)).await??;
    Ok(HttpResponse::Created().json(super::payload::with_code(&state, view(&tx), &tx)))
}

#[utoipa::path(
    post, operation_id = "post_cob", path = "/cob", tag = "family B",
    request_body(content = super::schemas::CobRequest),
    responses(
        (status = 201, description = "The cob, status ATIVA, with the txid the server chose", body = super::schemas::CobView),
        (status = 400, body = SimpleErrorBody),
        (status = 401, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
/// `POST /cob`: a cob whose txid the server chooses (32 letters and digits, random).
pub async fn post_cob(
    caller: Caller,
    req: HttpRequest,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let receiving_key = receiving_key(&state, &caller)?;
    // A v4 UUID's 32 hex digits: unique without asking storage (a clash would be refused as
    // a taken txid, never overwrite a cob).
    let txid = uuid::Uuid::new_v4().simple().to_string();
    let request = read_cob(&request_object(&req, &bytes)?, txid, &receiving_key)?;
    let tx = ask(&state, &caller, CreateCharge(request)).await??;
    Ok(HttpResponse::Created().json(super::payload::with_code(&state, view(&tx), &tx)))
}

const COB_LIST_PARAMS: [&str; 7] =
    ["inicio", "fim", "cpf", "cnpj", "status", "paginacao.paginaAtual", "paginacao.itensPorPagina"];
const COB_STATUSES: [&str; 4] =
    ["ATIVA", "CONCLUIDA", "REMOVIDA_PELO_USUARIO_RECEBEDOR", "REMOVIDA_PELO_PSP"];

/// The filters of `GET /cob`.
#[derive(Debug, Clone, PartialEq)]
struct CobQuery {
    window: super::api_pix::ListWindow,
    status: Option<&'static str>,
}

fn read_cob_query(q: &std::collections::HashMap<String, String>) -> Result<CobQuery, ApiError> {
    let mut v = Vec::new();
    super::body::known_params(q, &COB_LIST_PARAMS, &mut v);
    let window = super::api_pix::read_list_window(q, &mut v);
    let status = q.get("status").and_then(|s| {
        let found = COB_STATUSES.into_iter().find(|x| x == s);
        if found.is_none() {
            v.push(Violation::new("status", format!("must be one of {}", COB_STATUSES.join(", "))));
        }
        found
    });
    match (window, v.is_empty()) {
        (Some(window), true) => Ok(CobQuery { window, status }),
        _ => Err(ApiError::Validation(v)),
    }
}

#[utoipa::path(
    get, operation_id = "list_cobs", path = "/cob", tag = "family B",
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
        (status = 200, description = "Newest first, with the filters echoed", body = super::schemas::CobList),
        (status = 400, body = SimpleErrorBody),
        (status = 401, body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
/// `GET /cob`: the account's cobs created in a range, as the API Pix lists them.
pub async fn list_cobs(
    caller: Caller,
    query: web::Query<std::collections::HashMap<String, String>>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    list(&caller, &query.into_inner(), &state, false)
}

/// The account's cobs (or, with `due_date`, cobvs) that a list query asks for.
pub(super) fn list(
    caller: &Caller,
    query: &std::collections::HashMap<String, String>,
    state: &AppState,
    due_date: bool,
) -> Result<HttpResponse, ApiError> {
    let q = read_cob_query(query)?;
    let keep = |t: &Transaction| {
        t.is_cob(due_date)
            && q.status.is_none_or(|s| status(t) == s)
            && q.window.document.as_ref().is_none_or(|(name, d)| {
                let devedor = t.charge.as_ref().and_then(|c| c.cob.as_ref()).and_then(|c| c.devedor.as_ref());
                devedor.and_then(|v| v.get(*name)).and_then(Value::as_str) == Some(d.as_str())
            })
    };
    let (skip, size) = q.window.skip_take();
    let w = &q.window;
    let (page, total) =
        state.repo.payments_in_page(caller.account_id, (w.inicio, w.fim), keep, skip, size)?;
    let mut parametros = w.parametros(total);
    if let Some(s) = q.status {
        parametros["status"] = json!(s);
    }
    let paid: Vec<&Transaction> = page.iter().filter(|t| super::received::is_received(t)).collect();
    let refunds = state.repo.refunds_of(caller.account_id, &paid)?;
    let cobs: Vec<Value> = page.iter().map(|t| view_with_pix(state, t, &refunds)).collect();
    Ok(HttpResponse::Ok().json(json!({"parametros": parametros, "cobs": cobs})))
}

/// The view of a cob or cobv with, once it is paid, the PIX that paid it and that PIX's
/// refunds.
pub(super) fn view_with_pix(
    state: &AppState,
    t: &Transaction,
    refunds: &std::collections::HashMap<u64, Vec<Transaction>>,
) -> Value {
    let mut v = if t.cobv().is_some() { super::cobv::view(t) } else { view(t) };
    if super::received::is_received(t) {
        let chave = v["chave"].as_str().unwrap_or_default().to_owned();
        let none = Vec::new();
        v["pix"] = json!([super::received::pix_view(t, &chave, refunds.get(&t.local_id).unwrap_or(&none))]);
    }
    super::payload::with_code(state, v, t)
}

/// The caller's cob (or, with `due_date`, cobv) with this txid.
pub(super) fn find(
    state: &AppState,
    caller: &Caller,
    txid: &str,
    due_date: bool,
) -> Result<Transaction, ApiError> {
    check_txid(txid)?;
    let what = if due_date { "cobv" } else { "cob" };
    state
        .repo
        .charge_by_txid(caller.account_id, txid)?
        .filter(|t| t.is_cob(due_date))
        .ok_or_else(|| ApiError::NotFound(format!("no {what} with this txid")))
}

#[utoipa::path(
    get, path = "/cob/{txid}", tag = "family B",
    params(("txid" = String, Path, pattern = "^[A-Za-z0-9]{26,35}$", description = "26 to 35 letters and digits")),
    responses((status = 200, description = "The cob as it is now", body = super::schemas::CobView), (status = 400, description = "The txid is not 26 to 35 letters and digits", body = SimpleErrorBody), (status = 404, body = SimpleErrorBody)),
    security(("bearer" = []))
)]
pub async fn get_cob(
    caller: Caller,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let cob = find(&state, &caller, &path.into_inner(), false)?;
    let refunds = state.repo.refunds_of(caller.account_id, &[&cob])?;
    Ok(HttpResponse::Ok().json(view_with_pix(&state, &cob, &refunds)))
}

#[utoipa::path(
    patch, path = "/cob/{txid}", tag = "family B",
    params(("txid" = String, Path, pattern = "^[A-Za-z0-9]{26,35}$", description = "26 to 35 letters and digits")),
    request_body(content = super::schemas::CobPatch),
    responses(
        (status = 200, description = "The cancelled cob", body = super::schemas::CobView),
        (status = 400, body = SimpleErrorBody),
        (status = 404, body = SimpleErrorBody),
        (status = 409, description = "the cob is no longer ATIVA", body = SimpleErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn patch_cob(
    caller: Caller,
    req: HttpRequest,
    path: web::Path<String>,
    bytes: Bytes,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let cob = find(&state, &caller, &path.into_inner(), false)?;
    let obj = request_object(&req, &bytes)?;
    let mut f = Fields::new(&obj);
    f.only(&["status"]);
    if f.string("status", true).is_some_and(|s| s != "REMOVIDA_PELO_USUARIO_RECEBEDOR") {
        f.fail("status", "must be REMOVIDA_PELO_USUARIO_RECEBEDOR");
    }
    if !f.violations.is_empty() {
        return Err(ApiError::Validation(f.violations));
    }
    let tx = ask(&state, &caller, CancelCharge { local_id: cob.local_id }).await??;
    Ok(HttpResponse::Ok().json(super::payload::with_code(&state, view(&tx), &tx)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::testing::{object, violations};
    use serde_json::json;

    const TXID: &str = "pedido20261122abcdefghijk01";
    const KEY: &str = "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c";

    fn read(body: Value) -> Result<ChargeRequest, ApiError> {
        read_cob(&object(&body.to_string()), TXID.into(), KEY)
    }

    fn cob(valor: &str) -> Value {
        json!({
            "calendario": {"expiracao": 3600},
            "devedor": {"cpf": "52998224725", "nome": "Ana Devedora"},
            "valor": {"original": valor},
            "solicitacaoPagador": "pedido 42",
            "infoAdicionais": [{"nome": "loja", "valor": "centro"}]
        })
    }

    #[test]
    fn a_txid_is_26_to_35_letters_and_digits() {
        for bad in ["short", "pedido-20261122-abcdefghijk", &"a".repeat(25), &"a".repeat(36)] {
            assert!(check_txid(bad).is_err(), "{bad}");
        }
        for good in [TXID, &"a".repeat(26), &"A1".repeat(17)] {
            assert!(check_txid(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn every_invalid_cob_body_is_a_validation_error() {
        let cases = [
            cob("1.0"),
            cob("1"),
            cob("0.00"),
            json!({"calendario": {"expiracao": 60}, "valor": {"original": 1.00}}),
            json!({"valor": {"original": "1.00"}}),
            json!({"calendario": {"expiracao": 0}, "valor": {"original": "1.00"}}),
            json!({"calendario": {}, "valor": {"original": "1.00"}, "devedor": {"cpf": "52998224724", "nome": "X"}}),
            json!({"calendario": {}, "valor": {"original": "1.00"}, "devedor": {"cpf": "52998224725", "cnpj": "11222333000181", "nome": "X"}}),
            json!({"calendario": {}, "valor": {"original": "1.00"}, "devedor": {"cnpj": "12ABC34501DE36", "nome": "X"}}),
            json!({"calendario": {}, "valor": {"original": "1.00"}, "chave": "someone@example.com"}),
            json!({"calendario": {}, "valor": {"original": "1.00"}, "solicitacaoPagador": "s".repeat(141)}),
        ];
        for body in cases {
            let e = read(body.clone()).err().unwrap_or_else(|| panic!("accepted {body}"));
            assert!(!violations(e).is_empty(), "{body}");
        }
    }

    #[test]
    fn a_valid_cob_reads_into_a_charge_of_the_account_key() {
        let request = read(cob("5.00")).unwrap();
        assert_eq!(request.value, Money::parse("5.00").unwrap());
        assert_eq!(request.txid.as_deref(), Some(TXID));
        let details = request.cob.unwrap();
        assert_eq!((details.expiracao, details.chave.as_str()), (3600, KEY));
        // The account's own key is accepted, and an alphanumeric CNPJ is a debtor like any other.
        let body = json!({"calendario": {}, "valor": {"original": "1.00"}, "chave": KEY, "devedor": {"cnpj": "12ABC34501DE35", "nome": "Aurora"}});
        let request = read(body).unwrap();
        assert_eq!(request.expiration_seconds, COB_EXPIRACAO_DEFAULT as u32);
        assert_eq!(request.payer_document.as_deref(), Some("12ABC34501DE35"));
    }

    fn query(pairs: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_cob_list_query_needs_a_range_of_at_most_31_days_and_known_filters() {
        let range = [("inicio", "2026-11-01T00:00:00Z"), ("fim", "2026-12-02T00:00:00Z")];
        let q = read_cob_query(&query(&range)).unwrap();
        assert_eq!((q.window.page, q.window.size, q.status, q.window.document.clone()), (0, 100, None, None));
        let fields = |pairs: &[(&str, &str)]| -> Vec<String> {
            violations(read_cob_query(&query(pairs)).err().unwrap()).into_iter().map(|(f, _)| f).collect()
        };
        assert_eq!(fields(&[]), vec!["inicio", "fim"]);
        assert_eq!(
            fields(&[("inicio", "2026-11-01T00:00:00Z"), ("fim", "2026-12-02T00:00:01Z")]),
            vec!["fim"]
        );
        assert_eq!(
            fields(&[("inicio", "2026-11-02T00:00:00Z"), ("fim", "2026-11-01T00:00:00Z")]),
            vec!["fim"]
        );
        assert_eq!(fields(&[("inicio", "yesterday"), ("fim", "2026-11-01T00:00:00Z")]), vec!["inicio"]);
        fn with<'a>(range: &[(&'a str, &'a str)], extra: (&'a str, &'a str)) -> Vec<(&'a str, &'a str)> {
            let mut pairs = range.to_vec();
            pairs.push(extra);
            pairs
        }
        assert_eq!(fields(&with(&range, ("status", "PAGA"))), vec!["status"]);
        assert_eq!(fields(&with(&range, ("cpf", "52998224724"))), vec!["cpf"]);
        assert_eq!(fields(&with(&range, ("cpf", "11222333000181"))), vec!["cpf"], "a CNPJ is not a cpf");
        assert_eq!(
            fields(&with(&range, ("paginacao.itensPorPagina", "1001"))),
            vec!["paginacao.itensPorPagina"]
        );
        assert_eq!(fields(&with(&range, ("pagina", "1"))), vec!["pagina"]);
        let mut both = with(&range, ("cpf", "52998224725"));
        both.push(("cnpj", "11222333000181"));
        assert_eq!(fields(&both), vec!["cnpj"]);
        let q = read_cob_query(&query(&with(&range, ("status", "CONCLUIDA")))).unwrap();
        assert_eq!(q.status, Some("CONCLUIDA"));
        let q = read_cob_query(&query(&with(&range, ("paginacao.itensPorPagina", "1000")))).unwrap();
        assert_eq!(q.window.size, 1000, "the maximum is allowed");
    }
}
