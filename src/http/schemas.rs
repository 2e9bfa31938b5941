//! The request bodies as the OpenAPI document describes them.
//!
//! Each handler reads its body field by field (`body.rs`), so that one response can name
//! every invalid field. These types are that reading's rules written as schemas: the same
//! members, which of them are required, and the limits, taken from the same constants the
//! readers use. They are never built or deserialized; the integration tests keep them
//! honest by checking every request body they send that succeeds against its schema.
#![allow(dead_code)]

use serde_json::json;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};
use utoipa::ToSchema;

use crate::domain::med::MED_TEXT_LEN_MAX;
use crate::domain::splits::{SPLITS_MAX, SPLIT_TEXT_LEN_MAX};
use crate::domain::transaction::{
    ADDITIONAL_INFO_KEYS_MAX, CHARGE_EXPIRATION_SECONDS_MAX, CHARGE_EXPIRATION_SECONDS_MIN,
    COUNTERPART_NAME_LEN_MAX, DESCRIPTION_LEN_MAX, EXTERNAL_ID_LEN_MAX,
};
use crate::domain::webhooks::{WEBHOOK_HEADERS_MAX, WEBHOOK_HEADER_VALUE_LEN_MAX, WEBHOOK_URL_LEN_MAX};

/// The pattern of a CPF (11 digits) or a CNPJ (14 characters, the last two digits).
pub const DOCUMENT_PATTERN: &str = "^([0-9]{11}|[0-9A-Z]{12}[0-9]{2})$";
/// An end-to-end id: 32 letters and digits.
pub const E2E_PATTERN: &str = "^[A-Za-z0-9]{32}$";

fn string(description: &str) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String).description(Some(description))
}

/// A text of 1 to `max` characters.
fn text(max: usize, description: &str) -> Object {
    string(description).min_length(Some(1)).max_length(Some(max)).build()
}

/// An amount as a JSON number, read exactly as written.
pub fn amount() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Number)
        .minimum(Some(0.01))
        .description(Some(
            "In reais, as a JSON number with at most 2 decimal places (read exactly as written)",
        ))
        .examples([super::openapi::amount("10.50")])
        .build()
}

/// An amount as a decimal string with two places (family B).
pub fn amount_text() -> Object {
    string("In reais, a decimal string with exactly 2 places, at least 0.01")
        .pattern(Some("^[0-9]{1,15}\\.[0-9]{2}$"))
        .examples([json!("10.50")])
        .build()
}

/// A CPF or a CNPJ with valid check digits.
pub fn document() -> Object {
    string("A CPF (11 digits) or a CNPJ (14 characters, numeric or alphanumeric in upper case), with valid check digits")
        .pattern(Some(DOCUMENT_PATTERN))
        .examples([json!("11144477735")])
        .build()
}

pub fn e2e_id() -> Object {
    string("An end-to-end id (32 letters and digits)").pattern(Some(E2E_PATTERN)).build()
}

fn external_id() -> Object {
    text(EXTERNAL_ID_LEN_MAX, "The client's id of this request, unique per account")
}
fn description() -> Object {
    text(DESCRIPTION_LEN_MAX, "Free text")
}
fn name() -> Object {
    text(COUNTERPART_NAME_LEN_MAX, "A person's or company's name")
}
fn split_text() -> Object {
    text(SPLIT_TEXT_LEN_MAX, "Text")
}
fn med_text() -> Object {
    text(MED_TEXT_LEN_MAX, "Free text")
}
fn webhook_url() -> Object {
    text(WEBHOOK_URL_LEN_MAX, "An https URL (http only when the server allows it), not to a private address")
}
fn webhook_header_value() -> Object {
    string("Printable text, possibly empty").max_length(Some(WEBHOOK_HEADER_VALUE_LEN_MAX)).build()
}
fn charge_expiration() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(CHARGE_EXPIRATION_SECONDS_MIN as f64))
        .maximum(Some(CHARGE_EXPIRATION_SECONDS_MAX as f64))
        .description(Some("Seconds until the charge expires (default one day)"))
        .build()
}
fn additional_info() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(
            string("At most 200 characters").max_length(Some(super::charges::ADDITIONAL_INFO_VALUE_LEN_MAX)),
        ))
        .max_properties(Some(ADDITIONAL_INFO_KEYS_MAX))
        .description(Some("Names (at most 50 characters) to texts"))
        .build()
}
fn splits() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(utoipa::openapi::Ref::from_schema_name("Split"))
        .max_items(Some(SPLITS_MAX))
        .build()
}
/// The interface's `[{key, value}]`, or the object of names and values the configuration is
/// read back in.
fn webhook_headers() -> utoipa::openapi::schema::Schema {
    let array = utoipa::openapi::schema::ArrayBuilder::new()
        .items(utoipa::openapi::Ref::from_schema_name("WebhookHeader"))
        .max_items(Some(WEBHOOK_HEADERS_MAX))
        .build();
    let object = ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(ObjectBuilder::new().schema_type(Type::String)))
        .max_properties(Some(WEBHOOK_HEADERS_MAX))
        .build();
    utoipa::openapi::schema::Schema::OneOf(
        utoipa::openapi::schema::OneOfBuilder::new().item(array).item(object).build(),
    )
}
fn cob_expiration() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(super::cob::COB_EXPIRACAO_MIN as f64))
        .maximum(Some(super::cob::COB_EXPIRACAO_MAX as f64))
        .description(Some("Seconds from creation (default 86400)"))
        .build()
}
fn devedor_nome() -> Object {
    text(super::cob::DEVEDOR_NOME_LEN_MAX, "Name")
}
fn chave() -> Object {
    text(super::cob::CHAVE_LEN_MAX, "The account's receiving key (the only one it can take)")
}
fn info_adicionais() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(utoipa::openapi::Ref::from_schema_name("InfoAdicional"))
        .max_items(Some(super::cob::INFO_ADICIONAIS_MAX))
        .build()
}
fn ispb_deny() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(string("An ISPB code").pattern(Some("^[0-9]{8}$")))
        .max_items(Some(super::dict::ISPB_DENY_LEN_MAX))
        .build()
}
fn dict_expiration() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(super::dict::EXPIRATION_SECONDS_MIN as f64))
        .maximum(Some(super::dict::EXPIRATION_SECONDS_MAX as f64))
        .description(Some("Seconds the transfer may wait for the bank (default 600)"))
        .build()
}
fn cpf() -> Object {
    string("A CPF: 11 digits with valid check digits").pattern(Some("^[0-9]{11}$")).build()
}
fn cnpj() -> Object {
    string("A CNPJ: 14 characters, numeric or alphanumeric in upper case")
        .pattern(Some("^[0-9A-Z]{12}[0-9]{2}$"))
        .build()
}

/// `POST /api/pix/cash-out`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"value": super::openapi::amount("10.50"), "externalId": "order-1001", "description": "Invoice 1001",
    "details": {"key": "98369006086", "keyType": "DOCUMENT", "name": "Fabio Ferreira", "document": "98369006086"}}))]
pub struct CashOutRequest {
    #[schema(schema_with = amount)]
    value: String,
    #[schema(schema_with = external_id)]
    external_id: String,
    #[schema(schema_with = description)]
    description: Option<String>,
    details: CashOutDetails,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CashOutDetails {
    /// The PIX key, in the form its type takes (a document's digits, an e-mail, +55 and a phone, a UUID).
    #[schema(min_length = 1, max_length = 77)]
    key: String,
    key_type: CashOutKeyType,
    #[schema(schema_with = name)]
    name: String,
    #[schema(schema_with = document)]
    document: String,
    /// Refuse the payment (ERROR, TAX_ID_MISMATCH) when the key's holder has another document.
    check_pix_key_with_document: Option<bool>,
}

#[derive(ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum CashOutKeyType {
    Document,
    Email,
    Phone,
    Random,
}

/// `POST /api/pix/cash-out-qrcode`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QrCashOutRequest {
    /// Must equal the amount the code carries, when it carries one.
    #[schema(schema_with = amount)]
    value: String,
    /// A BR Code (static or dynamic), with its CRC.
    #[schema(min_length = 1)]
    qr_code: String,
    #[schema(schema_with = external_id)]
    external_id: String,
    #[schema(schema_with = description)]
    description: Option<String>,
    #[schema(schema_with = name)]
    name: Option<String>,
    #[schema(schema_with = document)]
    document: Option<String>,
}

/// `POST /api/pix/cash-in`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"transaction": {"value": super::openapi::amount("25.00"), "description": "Order 77", "externalId": "charge-77",
    "generateQrCode": true}, "payer": {"fullName": "Joao Silva", "document": "11144477735"}}))]
pub struct CashInRequest {
    transaction: CashInTransaction,
    payer: CashInPayer,
    #[schema(schema_with = additional_info)]
    additional_info: Option<String>,
    #[schema(schema_with = splits)]
    splits: Option<Vec<Split>>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CashInTransaction {
    #[schema(schema_with = amount)]
    value: String,
    #[schema(schema_with = description)]
    description: String,
    #[schema(schema_with = external_id)]
    external_id: String,
    #[schema(schema_with = charge_expiration)]
    expiration_time: Option<u64>,
    /// Answer a PNG of the QR code in `qrCodeImage`.
    generate_qr_code: Option<bool>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CashInPayer {
    #[schema(schema_with = name)]
    full_name: String,
    #[schema(schema_with = document)]
    document: String,
}

/// A share of a paid charge sent on to another key.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Split {
    pix_key_type: SplitKeyType,
    #[schema(schema_with = split_text)]
    pix_key: String,
    #[schema(schema_with = split_text)]
    name: String,
    #[schema(schema_with = document)]
    document: String,
    #[serde(rename = "type")]
    kind: SplitKind,
    /// FIXED: an amount; PERCENTAGE: at most 100.
    #[schema(schema_with = amount)]
    value: String,
    /// Sent when the charge is paid rather than at the account's split frequency.
    immediate: Option<bool>,
}

#[derive(ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum SplitKeyType {
    Email,
    Phone,
    Cpf,
    Cnpj,
    Random,
}

#[derive(ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum SplitKind {
    Fixed,
    Percentage,
}

/// `POST /api/pix/refund-in/{id}`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefundInRequest {
    /// At most what is left of the received payment.
    #[schema(schema_with = amount)]
    refund_value: String,
    #[schema(schema_with = description)]
    reason: Option<String>,
    #[schema(schema_with = external_id)]
    external_id: Option<String>,
}

/// `PUT /pix/{e2eid}/devolucao/{id}`
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DevolucaoRequest {
    #[schema(schema_with = amount_text)]
    valor: String,
    natureza: Option<DevolucaoNatureza>,
    #[schema(schema_with = description)]
    descricao: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DevolucaoNatureza {
    Original,
    Retirada,
}

/// `PUT /cob/{txid}`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"calendario": {"expiracao": 3600}, "devedor": {"cpf": "11144477735", "nome": "Joao Silva"},
    "valor": {"original": "12.34"}, "solicitacaoPagador": "Order 12"}))]
#[serde(deny_unknown_fields)]
pub struct CobRequest {
    calendario: CobCalendario,
    devedor: Option<CobDevedor>,
    valor: CobValor,
    #[schema(schema_with = chave)]
    chave: Option<String>,
    #[schema(schema_with = description)]
    solicitacao_pagador: Option<String>,
    #[schema(schema_with = info_adicionais)]
    info_adicionais: Option<Vec<InfoAdicional>>,
}

#[derive(ToSchema)]
pub struct CobCalendario {
    #[schema(schema_with = cob_expiration)]
    expiracao: Option<u64>,
}

/// Exactly one of `cpf` and `cnpj`.
#[derive(ToSchema)]
pub struct CobDevedor {
    #[schema(schema_with = cpf)]
    cpf: Option<String>,
    #[schema(schema_with = cnpj)]
    cnpj: Option<String>,
    #[schema(schema_with = devedor_nome)]
    nome: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobValor {
    #[schema(schema_with = amount_text)]
    original: String,
    /// 1: the payer may change the amount.
    #[schema(minimum = 0, maximum = 1)]
    modalidade_alteracao: Option<u8>,
}

#[derive(ToSchema)]
pub struct InfoAdicional {
    #[schema(min_length = 0, max_length = 50)]
    nome: String,
    #[schema(min_length = 0, max_length = 200)]
    valor: String,
}

fn valor_perc() -> Object {
    string("A value in reais (at least 0.01) or a percent (above 0, at most 100), as the modalidade says: a decimal string with 2 places")
        .pattern(Some("^[0-9]{1,13}\\.[0-9]{2}$"))
        .examples([json!("2.00")])
        .build()
}
fn due_date() -> Object {
    string("A date, YYYY-MM-DD: at most 3650 days ahead")
        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Date)))
        .build()
}

/// `PUT /cobv/{txid}`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"calendario": {"dataDeVencimento": "2026-12-10", "validadeAposVencimento": 30},
    "devedor": {"cpf": "11144477735", "nome": "Joao Silva", "cidade": "Recife", "uf": "PE", "cep": "50000000"},
    "valor": {"original": "100.00", "multa": {"modalidade": 2, "valorPerc": "2.00"}, "juros": {"modalidade": 2, "valorPerc": "0.03"}},
    "solicitacaoPagador": "Invoice 12"}))]
pub struct CobvRequest {
    calendario: CobvCalendario,
    devedor: CobvDevedor,
    valor: CobvValor,
    #[schema(schema_with = chave)]
    chave: Option<String>,
    #[schema(schema_with = description)]
    solicitacao_pagador: Option<String>,
    #[schema(schema_with = info_adicionais)]
    info_adicionais: Option<Vec<InfoAdicional>>,
}

/// `PATCH /cobv/{txid}`: a JSON merge patch of the request (every member optional, null
/// removes an optional one), or `status` alone.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CobvPatch {
    /// Members of `calendario` to replace.
    #[schema(value_type = Option<Object>)]
    calendario: Option<serde_json::Value>,
    /// Members of `devedor` to replace (null removes one).
    #[schema(value_type = Option<Object>)]
    devedor: Option<serde_json::Value>,
    /// Members of `valor` to replace (null removes an adjustment).
    #[schema(value_type = Option<Object>)]
    valor: Option<serde_json::Value>,
    #[schema(schema_with = chave)]
    chave: Option<String>,
    /// Null removes it.
    #[schema(nullable, min_length = 1, max_length = 140)]
    solicitacao_pagador: Option<String>,
    /// Null removes them.
    #[schema(nullable, max_items = 50)]
    info_adicionais: Option<Vec<InfoAdicional>>,
    /// Removes the cobv; sent alone.
    status: Option<CobPatchStatus>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CobvCalendario {
    #[schema(schema_with = due_date)]
    data_de_vencimento: String,
    /// Calendar days after the due date it may still be paid (default 30).
    #[schema(minimum = 0, maximum = 3650)]
    validade_apos_vencimento: Option<u32>,
}

/// Exactly one of `cpf` and `cnpj`; the address and e-mail are optional.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CobvDevedor {
    #[schema(schema_with = cpf)]
    cpf: Option<String>,
    #[schema(schema_with = cnpj)]
    cnpj: Option<String>,
    #[schema(schema_with = devedor_nome)]
    nome: String,
    #[schema(min_length = 1, max_length = 200)]
    logradouro: Option<String>,
    #[schema(min_length = 1, max_length = 200)]
    cidade: Option<String>,
    #[schema(pattern = "^[A-Z]{2}$")]
    uf: Option<String>,
    #[schema(pattern = "^[0-9]{8}$")]
    cep: Option<String>,
    #[schema(min_length = 3, max_length = 77)]
    email: Option<String>,
}

#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CobvValor {
    #[schema(schema_with = amount_text)]
    original: String,
    multa: Option<CobvFixedOrPercent>,
    juros: Option<CobvJuros>,
    abatimento: Option<CobvFixedOrPercent>,
    desconto: Option<CobvDesconto>,
}

/// A fine (once, after the due date) or an abatement (always): modalidade 1 a value, 2 a
/// percent of the original.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CobvFixedOrPercent {
    #[schema(minimum = 1, maximum = 2)]
    modalidade: u8,
    #[schema(schema_with = valor_perc)]
    valor_perc: String,
}

/// Interest per day late: 1 a value per day, 2/3/4 a percent per day/month/year, counted
/// in calendar days; 5 to 8 the same in business days.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CobvJuros {
    #[schema(minimum = 1, maximum = 8)]
    modalidade: u8,
    #[schema(schema_with = valor_perc)]
    valor_perc: String,
}

/// A discount for paying on time: 1 values / 2 percents until the dates of
/// `descontoDataFixa`; 3 value / 4 value (business days) / 5 percent / 6 percent (business
/// days) per day paid early, in `valorPerc`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CobvDesconto {
    #[schema(minimum = 1, maximum = 6)]
    modalidade: u8,
    /// Modalidades 1 and 2: 1 to 3 entries, dates ascending, none after the due date.
    #[schema(min_items = 1, max_items = 3)]
    desconto_data_fixa: Option<Vec<CobvDescontoData>>,
    /// Modalidades 3 to 6.
    #[schema(schema_with = valor_perc)]
    valor_perc: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CobvDescontoData {
    #[schema(schema_with = due_date)]
    data: String,
    #[schema(schema_with = valor_perc)]
    valor_perc: String,
}

/// A cobv (`PUT`, `GET`, `PATCH /cobv/{txid}`).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobvView {
    calendario: CobvCalendarioView,
    txid: String,
    /// 0 at creation, one more at each revision.
    revisao: u32,
    loc: CobLoc,
    /// The BR Code that pays it (without an amount: it is priced on the day it is paid).
    location: String,
    /// With `--payload-host`: the dynamic BR Code whose location any bank's app reads the
    /// cobv from, priced on the day it is paid.
    pix_copia_e_cola: Option<String>,
    status: CobStatus,
    devedor: CobvDevedor,
    valor: CobvValor,
    chave: String,
    solicitacao_pagador: Option<String>,
    info_adicionais: Vec<InfoAdicional>,
    /// Once paid (CONCLUIDA): the PIX that paid it, with the amount paid.
    pix: Option<Vec<PixView>>,
    /// While ATIVA and payable: what paying it today costs (beyond the API Pix's receiver
    /// view, as its payer's payload shows it).
    valor_do_dia: Option<CobvValorDoDia>,
}

/// The price of paying a cobv on `data`, each adjustment rounded to the cent, as decimal
/// strings with 2 places.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobvValorDoDia {
    /// YYYY-MM-DD, the payment day in Sao Paulo.
    data: String,
    original: String,
    abatimento: String,
    desconto: String,
    multa: String,
    juros: String,
    /// What the payer pays: original - abatimento - desconto + multa + juros, at least 0.01.
    #[serde(rename = "final")]
    final_: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobvCalendarioView {
    /// RFC 3339, UTC.
    criacao: String,
    data_de_vencimento: String,
    validade_apos_vencimento: u32,
}

/// A page of cobvs (`GET /cobv`).
#[derive(ToSchema)]
pub struct CobvList {
    parametros: CobListParams,
    cobs: Vec<CobvView>,
}

/// `PATCH /cob/{txid}`
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CobPatch {
    status: CobPatchStatus,
}

#[derive(ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CobPatchStatus {
    RemovidaPeloUsuarioRecebedor,
}

/// `POST /dict/pix`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"pixKey": "lucas.lima0@example.com", "payment": {"currency": "BRL", "amount": super::openapi::amount("15.00")},
    "priority": "NORM", "description": "Rent"}))]
#[serde(deny_unknown_fields)]
pub struct DictPixRequest {
    /// A PIX key of any type, in its own form.
    #[schema(min_length = 1, max_length = 77)]
    pix_key: String,
    payment: DictPayment,
    #[schema(schema_with = document)]
    creditor_document: Option<String>,
    /// HIGH requires `creditorDocument`.
    priority: Option<DictPriority>,
    #[schema(schema_with = description)]
    description: Option<String>,
    #[schema(schema_with = dict_expiration)]
    expiration: Option<u64>,
    /// Institutions the payment must not go to.
    #[schema(schema_with = ispb_deny)]
    ispb_deny: Option<Vec<String>>,
}

#[derive(ToSchema)]
pub struct DictPayment {
    currency: DictCurrency,
    #[schema(schema_with = amount)]
    amount: String,
}

#[derive(ToSchema)]
pub enum DictCurrency {
    #[serde(rename = "BRL")]
    Brl,
}

#[derive(ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum DictPriority {
    High,
    Norm,
}

/// `POST /api/webhooks`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"url": "https://hooks.example.com/pix", "eventType": "cash_out",
    "headers": [{"key": "X-Tenant", "value": "acme"}]}))]
pub struct WebhookRequest {
    #[schema(schema_with = webhook_url)]
    url: String,
    event_type: WebhookEventType,
    #[schema(schema_with = webhook_headers)]
    headers: Option<Vec<WebhookHeader>>,
}

#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookEventType {
    CashIn,
    CashOut,
    RefundIn,
    RefundOut,
    MedCreated,
    MedAccepted,
    MedRejected,
    Rec,
    Cobr,
    Claim,
    Recovery,
}

/// A header sent with every delivery (not one the server sets itself).
#[derive(ToSchema)]
pub struct WebhookHeader {
    #[schema(min_length = 1, max_length = 256)]
    key: String,
    #[schema(schema_with = webhook_header_value)]
    value: String,
}

/// `POST /api/resend-webhook/{transactionIdentifier}` (the body is optional)
#[derive(ToSchema)]
pub struct ResendRequest {
    /// Send there this once instead of the configured URL.
    #[schema(schema_with = webhook_url)]
    url: Option<String>,
}

/// `POST /sandbox/pix-in`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"amount": super::openapi::amount("100.00")}))]
pub struct PixInRequest {
    #[schema(schema_with = amount)]
    amount: String,
    #[schema(schema_with = name)]
    payer_name: Option<String>,
    #[schema(schema_with = document)]
    payer_document: Option<String>,
}

/// `POST /sandbox/pay`: exactly one of `pixCode`, `transactionId` and `txid`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxPayRequest {
    pix_code: Option<String>,
    transaction_id: Option<String>,
    txid: Option<String>,
    payer: Option<SandboxPayer>,
    /// What the payer pays; without it, the amount due today.
    #[schema(schema_with = amount)]
    amount: Option<serde_json::Value>,
}

#[derive(ToSchema)]
pub struct SandboxPayer {
    #[schema(schema_with = name)]
    name: String,
    #[schema(schema_with = document)]
    document: String,
}

/// `POST /sandbox/refund-out`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefundOutRequest {
    #[schema(schema_with = e2e_id)]
    end_to_end_id: String,
    #[schema(schema_with = amount)]
    amount: String,
}

/// `POST /sandbox/med`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MedOpenRequest {
    /// The end-to-end id of the disputed PIX, named as the MED record names it. Required,
    /// unless given by its older name `endToEndId`.
    #[schema(schema_with = e2e_id)]
    end_to_end: Option<String>,
    /// The older name of `endToEnd`, still taken; give one of the two, not both.
    #[schema(schema_with = e2e_id)]
    end_to_end_id: Option<String>,
    /// A fraud or operational cause (default: a fraud).
    #[schema(max_length = 64)]
    cause: Option<String>,
    /// Defaults to the whole payment.
    #[schema(schema_with = amount)]
    amount: Option<String>,
    #[schema(schema_with = med_text)]
    description: Option<String>,
}

/// `POST /sandbox/med/{id}/analyze`
#[derive(ToSchema)]
pub struct MedAnalyzeRequest {
    result: MedResult,
    #[schema(schema_with = med_text)]
    details: Option<String>,
}

/// `POST /admin/accounts/{id}/med/{medId}/analysis` (an operator's route: unknown members
/// are refused)
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MedAnalysisRequest {
    result: MedResult,
    #[schema(schema_with = med_text)]
    details: Option<String>,
    /// For a MED 2.0 case (an infraction report of the DICT): the fraud type an approval
    /// names, APPLICATION_FRAUD, MULE_ACCOUNT (unless given), SCAMMER_ACCOUNT or OTHER.
    #[serde(rename = "fraudType")]
    fraud_type: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum MedResult {
    Approved,
    Rejected,
}

/// `POST /admin/accounts`
#[derive(ToSchema)]
#[schema(example = json!({"name": "Acme Ltda", "document": "12ABC34501DE35", "sandbox": true}))]
#[serde(deny_unknown_fields)]
pub struct CreateAccountRequest {
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    #[schema(schema_with = document)]
    document: String,
    /// A sandbox account can use `/sandbox/*` and scenario headers.
    sandbox: Option<bool>,
    /// The opening balance (default 0).
    #[serde(rename = "initialBalance")]
    #[schema(schema_with = money_text)]
    initial_balance: Option<String>,
    /// The operator's id of this request (1 to 64 letters, digits, '-', '_'): the same one
    /// again answers the account it made (200, without its secret) instead of a second one.
    #[serde(rename = "requestId")]
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    request_id: Option<String>,
}

/// `PATCH /admin/accounts/{id}`: only the members sent change.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct PatchAccountRequest {
    limits: Option<LimitsPatch>,
    fees: Option<FeesPatch>,
    split_frequency: Option<SplitFrequency>,
    #[schema(minimum = 1)]
    provider_min_expiration_seconds: Option<u32>,
    /// Requests a second this account may make, with bursts of as many (429 with
    /// `Retry-After` beyond it); null gives it back the server's `--account-rate-limit`.
    #[schema(minimum = 1, maximum = 1000000, nullable)]
    rate_limit: Option<u32>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct LimitsPatch {
    #[schema(schema_with = money_text)]
    per_transaction: Option<String>,
    #[schema(schema_with = money_text)]
    daily: Option<String>,
    #[schema(schema_with = money_text)]
    nightly: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct FeesPatch {
    cash_out: Option<FeeRule>,
    cash_in: Option<FeeRule>,
    dict_pix: Option<FeeRule>,
    refund: Option<FeeRule>,
}

#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FeeRule {
    #[schema(schema_with = money_text)]
    fixed: Option<String>,
    /// A percentage as a decimal string, 0 to 100.
    #[schema(pattern = "^[0-9]{1,3}(\\.[0-9]+)?$")]
    percent: Option<String>,
}

fn money_text() -> Object {
    string("In reais, a decimal string with at most 2 places")
        .pattern(Some("^[0-9]{1,15}(\\.[0-9]{1,2})?$"))
        .build()
}

#[derive(ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum SplitFrequency {
    Daily,
    Hourly,
}

/// `PUT /admin/accounts/{id}/name`
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameRequest {
    /// The holder's name as the tax authority's record has it: 1 to 100 characters.
    #[schema(min_length = 1, max_length = 100)]
    name: String,
}

/// `POST /admin/accounts/{id}/certificates`
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CertificateRequest {
    /// A PEM certificate (BEGIN CERTIFICATE ... END CERTIFICATE).
    #[schema(min_length = 1)]
    pem: String,
}

/// `POST /admin/accounts/{id}/keys`: a key (`key`, its type read from it), or
/// `keyType: EVP` alone for a key the directory makes.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct KeyRequest {
    /// A CPF or CNPJ (the holder's own), an e-mail, `+55` and a phone, or a UUID.
    key: Option<String>,
    /// CPF, CNPJ, EMAIL, PHONE or EVP; required alone for an EVP the directory makes.
    key_type: Option<String>,
    /// Make it the key the account's new charges carry (default: true for an EVP).
    receiving: Option<bool>,
}

/// `POST /api/dict/claims`: a key to claim from another institution.
#[derive(ToSchema)]
pub struct ClaimRequest {
    /// A CPF or CNPJ (the holder's own), an e-mail, `+55` and a phone.
    key: String,
    /// PORTABILITY (default) or OWNERSHIP (a phone only).
    r#type: Option<String>,
}

/// `POST /api/med/recoveries`: a Pix the account sent, contested (MED 2.0).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContestRequestBody {
    /// The contested Pix's end-to-end id (a settled Pix the account sent, at most 80 days old).
    end_to_end_id: String,
    /// SCAM, ACCOUNT_TAKEOVER, COERCION, FRAUDULENT_ACCESS or OTHER.
    situation_type: String,
    /// What may help the institutions that analyse it (up to 2,000 characters; required for OTHER).
    details: Option<String>,
    /// The payer's contact e-mail, for the institutions that analyse it.
    email: String,
    /// The payer's contact phone, `+` and digits.
    phone: String,
}

/// `PATCH /api/med/recoveries/{id}`: what changes of a contest (at least one member).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmendContestBody {
    /// SCAM, ACCOUNT_TAKEOVER, COERCION, FRAUDULENT_ACCESS or OTHER.
    situation_type: Option<String>,
    /// Up to 2,000 characters (a contest of situation OTHER keeps some).
    details: Option<String>,
    email: Option<String>,
    /// `+` and digits.
    phone: Option<String>,
}

/// `POST /api/med/{id}/evidence`: the account's statement for a case against it.
#[derive(ToSchema)]
pub struct EvidenceRequest {
    /// Up to 2,000 characters.
    text: String,
}

/// `POST /admin/accounts/{id}/claims`: a key to claim for the account.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminClaimRequest {
    /// A CPF or CNPJ (the holder's own), an e-mail, `+55` and a phone.
    key: String,
    /// PORTABILITY (default) or OWNERSHIP (a phone only).
    r#type: Option<String>,
}

/// A client's step of a key claim: its reason, for a confirmation or a cancellation.
#[derive(ToSchema)]
pub struct ClaimStepRequest {
    /// USER_REQUESTED (default), ACCOUNT_CLOSURE or FRAUD.
    reason: Option<String>,
}

/// An operator's step of a key claim: its reason, for a confirmation or a cancellation.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdminClaimStepRequest {
    /// Any claim reason but PARTICIPANT_EXCLUSION (USER_REQUESTED by default).
    reason: Option<String>,
}

/// `POST /admin/fraud-markers`: a person (and one of its keys) to mark for fraud.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct FraudMarkRequest {
    /// The person's CPF (11 digits) or CNPJ (14 digits).
    tax_id: String,
    /// One of the person's keys, to mark with it.
    key: Option<String>,
    /// APPLICATION_FRAUD, MULE_ACCOUNT, SCAMMER_ACCOUNT or OTHER.
    fraud_type: String,
    /// The mark's idempotency key (at most 64 characters): the same reference again answers
    /// the same mark.
    reference: String,
}

/// `POST /admin/accounts/{id}/adjustments`: an operator's move of money.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct AdjustmentRequest {
    /// `CREDIT` (into the account) or `DEBIT` (out of it).
    #[serde(rename = "type")]
    kind: String,
    /// A decimal string with at most 2 places, at least 0.01.
    amount: String,
    /// Why, for the record (1 to 140 characters).
    reason: String,
    /// The operator's own id of this move (1 to 64 characters): the same reference again
    /// answers the first move and moves nothing.
    reference: String,
}

/// `POST /admin/rail/resolutions`: what to close (exactly one of `unmatched` and `payout`),
/// how, and by what evidence.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ResolutionRequest {
    /// An unmatched rail item's digest (as the reconciliation read lists it).
    unmatched: Option<String>,
    /// An aged payout's end-to-end id (a refund: its return id).
    payout: Option<String>,
    /// `SETTLED` or `FAILED` for a payout (as the settlement account shows it), `DISMISSED`
    /// for an unmatched item.
    outcome: String,
    /// What the resolution goes by: the statement line, the SPI's message, the adjustment
    /// made (10 to 2000 characters).
    evidence: String,
}

/// `POST /admin/clock` (test clock only): exactly one of `set` and `advanceSeconds`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
#[serde(deny_unknown_fields)]
pub struct ClockRequest {
    /// An RFC 3339 date-time.
    #[schema(format = DateTime)]
    set: Option<String>,
    advance_seconds: Option<i64>,
}

// ---- responses built as JSON values by their handlers ----------------------------------

/// A received PIX, API Pix style (`GET /pix/{e2eid}`, and in `GET /pix` and a paid cob).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PixView {
    end_to_end_id: String,
    /// The txid of the charge it paid, if it paid one.
    txid: Option<String>,
    /// In reais, 2 places.
    valor: String,
    /// The account's receiving key.
    chave: String,
    /// When it settled (RFC 3339, UTC).
    horario: String,
    pagador: PixPagador,
    devolucoes: Vec<super::refunds::Devolucao>,
}

/// Who paid: a name and a CPF or a CNPJ (digits).
#[derive(ToSchema)]
pub struct PixPagador {
    nome: String,
    cpf: Option<String>,
    cnpj: Option<String>,
}

/// A page of received PIX (`GET /pix`).
#[derive(ToSchema)]
pub struct PixList {
    /// The filters as read (`inicio`, `fim`, `txid`, `txIdPresente`, `devolucaoPresente`,
    /// `cpf`/`cnpj`), with the page.
    #[schema(value_type = Object)]
    parametros: serde_json::Value,
    pix: Vec<PixView>,
}

/// A page of cobs (`GET /cob`).
#[derive(ToSchema)]
pub struct CobList {
    /// The filters as read, with the page.
    parametros: CobListParams,
    cobs: Vec<CobView>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobListParams {
    inicio: String,
    fim: String,
    cpf: Option<String>,
    cnpj: Option<String>,
    status: Option<CobStatus>,
    paginacao: Paginacao,
}

/// A page of a family B list, pages counted from 0.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Paginacao {
    pagina_atual: u32,
    itens_por_pagina: u32,
    quantidade_de_paginas: u64,
    quantidade_total_de_itens: u64,
}

/// A cob (`PUT`, `GET`, `PATCH /cob/{txid}`).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobView {
    calendario: CobCalendarioView,
    /// 26 to 35 letters and digits.
    txid: String,
    /// Always 0: a cob is never revised.
    revisao: u32,
    loc: CobLoc,
    /// The BR Code that pays it.
    location: String,
    /// With `--payload-host`: the dynamic BR Code whose location any bank's app reads the
    /// cob from.
    pix_copia_e_cola: Option<String>,
    status: CobStatus,
    valor: CobValorView,
    /// The account's receiving key.
    chave: String,
    devedor: Option<CobDevedorView>,
    solicitacao_pagador: Option<String>,
    info_adicionais: Vec<InfoAdicional>,
    /// Once paid (CONCLUIDA): the PIX that paid it.
    pix: Option<Vec<PixView>>,
}

#[derive(ToSchema)]
pub struct CobCalendarioView {
    /// RFC 3339, UTC.
    criacao: String,
    /// Seconds from creation.
    expiracao: u64,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobLoc {
    id: u64,
    location: String,
    tipo_cob: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CobStatus {
    Ativa,
    Concluida,
    RemovidaPeloUsuarioRecebedor,
    RemovidaPeloPsp,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobValorView {
    #[schema(schema_with = amount_text)]
    original: String,
    modalidade_alteracao: u8,
}

/// The debtor as it was given: `cpf` or `cnpj`, and `nome`.
#[derive(ToSchema)]
pub struct CobDevedorView {
    cpf: Option<String>,
    cnpj: Option<String>,
    nome: String,
}

/// An account's settings (`PATCH /admin/accounts/{id}`, and `settings` of the account).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SettingsView {
    limits: LimitsView,
    fees: FeesView,
    split_frequency: SplitFrequency,
    provider_min_expiration_seconds: u32,
    /// The account's own rate limit (requests a second), when it has one; without it the
    /// server's `--account-rate-limit` applies.
    #[schema(minimum = 1, maximum = 1000000)]
    rate_limit: Option<u32>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitsView {
    #[schema(schema_with = money_text)]
    per_transaction: String,
    #[schema(schema_with = money_text)]
    daily: String,
    #[schema(schema_with = money_text)]
    nightly: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeesView {
    cash_out: FeeRuleView,
    cash_in: FeeRuleView,
    dict_pix: FeeRuleView,
    refund: FeeRuleView,
}

#[derive(ToSchema)]
pub struct FeeRuleView {
    #[schema(schema_with = money_text)]
    fixed: String,
    /// A percentage as a decimal string.
    percent: String,
}

/// A MED case (`POST /sandbox/med`, `.../analyze`, `.../cancel`, and each item of `GET /api/med`).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MedView {
    id: u64,
    #[schema(schema_with = e2e_id)]
    end_to_end: String,
    status: MedStatusView,
    reason: MedReasonView,
    cause: Option<String>,
    description: Option<String>,
    analysis_result: Option<MedResult>,
    analysis_details: Option<String>,
    requesting_bank: MedBank,
    contested_bank: MedBank,
    original_transaction: Option<MedOriginal>,
    is_reconciled: bool,
    original_transaction_id: Option<u64>,
    /// In reais, a JSON number.
    amount: f64,
    /// In reais, a JSON number: what is blocked of the account's balance for it.
    blocked_amount: f64,
    refund_transaction_id: Option<u64>,
    /// The DICT's refund request this MED answers (a live account on the SPI rail).
    dict_refund_id: Option<String>,
    /// RFC 3339, UTC.
    created_at: String,
    /// RFC 3339, UTC.
    updated_at: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MedStatusView {
    Open,
    Received,
    Cancelled,
    Analyzed,
}

#[derive(ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MedReasonView {
    RefundRequest,
    RefundCancellation,
}

#[derive(ToSchema)]
pub struct MedBank {
    ispb: String,
    name: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MedOriginal {
    /// In reais, a JSON number.
    amount: f64,
    #[serde(rename = "type")]
    kind: String,
    transaction_type: String,
    name: String,
    /// Masked.
    document: Option<String>,
    date_time: String,
}

/// The other side of a transaction (`GET /api/transactions/{id}`).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CounterpartView {
    name: String,
    /// Digits (or the alphanumeric CNPJ) as given.
    document: Option<String>,
    key: Option<String>,
    /// In the words of the request that made the payment (DOCUMENT, EMAIL, PHONE, RANDOM, ...).
    key_type: Option<String>,
    bank: Option<ListedBank>,
}

/// The other side of a transaction in a list item (document masked).
#[derive(ToSchema)]
pub struct ListedCounterpart {
    name: String,
    document: Option<String>,
    bank: Option<ListedBank>,
}

#[derive(ToSchema)]
pub struct ListedBank {
    #[serde(rename = "bankISPB")]
    bank_ispb: String,
    #[serde(rename = "bankName")]
    bank_name: String,
    #[serde(rename = "bankCode")]
    bank_code: String,
    #[serde(rename = "accountBranch")]
    account_branch: Option<String>,
    #[serde(rename = "accountNumber")]
    account_number: Option<String>,
}
