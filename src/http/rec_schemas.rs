//! Pix Automático's bodies as the OpenAPI document describes them (see `schemas.rs` for why
//! these types are never built): the requests of `/rec`, `/solicrec` and the sandbox's
//! payer's institution, and the views they answer.
#![allow(dead_code)]

use utoipa::ToSchema;

use super::schemas::{amount_text, Paginacao};
use crate::domain::rec::{AGENCIA_LEN_MAX, CONTA_LEN_MAX, CONTRATO_LEN_MAX, OBJETO_LEN_MAX};

/// `POST /rec`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({
    "vinculo": {"objeto": "Gym membership", "contrato": "63100862", "devedor": {"cpf": "11144477735", "nome": "Joao Silva"}},
    "calendario": {"dataInicial": "2026-12-01", "periodicidade": "MENSAL"},
    "valor": {"valorRec": "89.90"},
    "politicaRetentativa": "PERMITE_3R_7D"}))]
pub struct RecRequest {
    vinculo: Vinculo,
    calendario: RecCalendario,
    /// Absent: a variable value with no minimum.
    valor: Option<RecValor>,
    politica_retentativa: RetryPolicyName,
    /// A location's id (`POST /locrec`) not linked yet: journey 2's QR code carries it.
    #[schema(minimum = 1)]
    loc: Option<u64>,
    /// Journey 3: the cob whose payment authorises the recurrence.
    ativacao: Option<AtivacaoRequest>,
    recebedor: Option<RecRecebedorRequest>,
    automacao: Option<Automacao>,
}

/// pixgw's own, beyond the API Pix (off by default): what the gateway does by itself for the
/// receiver.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Automacao {
    /// Under PERMITE_3R_7D: after each failed attempt the gateway asks for the next retry
    /// itself, on the first of these days after the settlement day still to come (1 to 3
    /// days, each 1 to 7, ascending). The receiver may still ask for retries of its own.
    dias_retentativa: Option<Vec<u8>>,
    /// For a recurrence with valorRec: the gateway sends each cycle's charge by itself this
    /// many days (2 to 10) before the cycle's first date, with a txid of its own
    /// (`pixgwauto...`), once the recurrence is APROVADA; a cycle already charged is passed
    /// over.
    dias_antes_envio: Option<u8>,
}

/// `recebedor` of `POST /rec`.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecRecebedorRequest {
    /// The receiver's agreement with its PSP the recurrence falls under; `GET /rec` and `GET
    /// /cobr` filter on it.
    #[schema(min_length = 1, max_length = 60)]
    convenio: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AtivacaoRequest {
    dados_jornada: DadosJornada,
}

#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DadosJornada {
    /// The txid of a cob of the account.
    #[schema(pattern = "^[A-Za-z0-9]{26,35}$")]
    txid: String,
}

/// A recurrence's location (`POST /locrec`, `GET /locrec/{id}`).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocRecView {
    id: u64,
    location: String,
    /// RFC 3339, UTC.
    criacao: String,
    /// Once linked.
    id_rec: Option<String>,
}

/// `GET /locrec`
#[derive(ToSchema)]
pub struct LocRecList {
    parametros: LocRecListParams,
    loc: Vec<LocRecView>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocRecListParams {
    inicio: String,
    fim: String,
    id_rec_presente: Option<bool>,
    paginacao: Paginacao,
}

/// `POST /sandbox/rec/{idRec}/approve`: the payer who read the QR code (by default the
/// contract's debtor at the sandbox payer's institution).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QrApproval {
    #[schema(pattern = "^[0-9]{11}$")]
    cpf: Option<String>,
    #[schema(pattern = "^[0-9A-Z]{12}[0-9]{2}$")]
    cnpj: Option<String>,
    #[schema(pattern = "^[0-9]{8}$")]
    ispb_participante: Option<String>,
    /// For a recurrence without valorRec: the most a charge may be.
    #[schema(schema_with = amount_text)]
    valor_maximo: Option<String>,
    /// The payer's municipality: the 7 digits of its IBGE code (`pagador.codMun`).
    #[schema(pattern = "^[0-9]{7}$")]
    cod_mun: Option<String>,
}

#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Vinculo {
    /// What is paid for.
    #[schema(min_length = 1, max_length = 35)]
    objeto: Option<String>,
    /// The contract's reference.
    #[schema(min_length = 1, max_length = 35)]
    contrato: String,
    devedor: super::schemas::CobDevedor,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecCalendario {
    /// YYYY-MM-DD, today or later (São Paulo): the first cycle's date.
    #[schema(format = Date)]
    data_inicial: String,
    /// YYYY-MM-DD, not before dataInicial: no cycle starts after it.
    #[schema(format = Date)]
    data_final: Option<String>,
    periodicidade: PeriodicityName,
}

#[derive(ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PeriodicityName {
    Semanal,
    Mensal,
    Trimestral,
    Semestral,
    Anual,
}

#[derive(ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RetryPolicyName {
    NaoPermite,
    #[serde(rename = "PERMITE_3R_7D")]
    Permite3r7d,
}

/// `valorRec` (every charge is this) or `valorMinimoRecebedor` (a variable value of at
/// least this), not both; empty: a variable value.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecValor {
    #[schema(schema_with = amount_text)]
    valor_rec: Option<String>,
    #[schema(schema_with = amount_text)]
    valor_minimo_recebedor: Option<String>,
}

/// `PATCH /rec/{idRec}` (`RecRevisada`): `status` alone cancels it; the other members revise
/// it (the first date, the location and the first cob only while it is CRIADA and no
/// solicitation awaits an answer).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"vinculo": {"devedor": {"nome": "Fulano de Tal"}}, "calendario": {"dataInicial": "2027-01-01"}}))]
pub struct RecRevisionRequest {
    status: Option<CanceladaName>,
    vinculo: Option<RevisedVinculo>,
    calendario: Option<RevisedCalendario>,
    /// A location's id (`POST /locrec`) not linked to another recurrence.
    #[schema(minimum = 1)]
    loc: Option<u64>,
    ativacao: Option<AtivacaoRequest>,
}

#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevisedVinculo {
    devedor: RevisedDevedor,
}

#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevisedDevedor {
    #[schema(min_length = 1, max_length = 200)]
    nome: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevisedCalendario {
    /// Today or later, not after dataFinal.
    #[schema(format = Date)]
    data_inicial: String,
}

/// `PATCH /solicrec/{idSolicRec}` and `PATCH /cobr/{txid}`: the one change a receiver makes.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecPatch {
    status: CanceladaName,
}

#[derive(ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CanceladaName {
    Cancelada,
}

/// `POST /solicrec`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"idRec": "RR999999992026112600000000001",
    "destinatario": {"cpf": "11144477735", "conta": "12345678", "agencia": "0001", "ispbParticipante": "00000000"},
    "calendario": {"dataExpiracaoSolicitacao": "2026-11-30T12:00:00Z"}}))]
pub struct SolicRecRequest {
    #[schema(pattern = "^R[RN][0-9A-Z]{8}[0-9]{8}[a-zA-Z0-9]{11}$")]
    id_rec: String,
    destinatario: Destinatario,
    calendario: SolicCalendario,
}

/// The payer's account: exactly one of `cpf` and `cnpj`.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Destinatario {
    #[schema(pattern = "^[0-9]{11}$")]
    cpf: Option<String>,
    #[schema(pattern = "^[0-9A-Z]{12}[0-9]{2}$")]
    cnpj: Option<String>,
    #[schema(pattern = "^[0-9]{1,20}$")]
    conta: String,
    #[schema(min_length = 1, max_length = 4)]
    agencia: Option<String>,
    #[schema(pattern = "^[0-9]{8}$")]
    ispb_participante: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SolicCalendario {
    /// RFC 3339: in the future, at most 30 days ahead.
    data_expiracao_solicitacao: String,
}

/// The payer's new maximum (`POST /api/automatic-pix/recurrences/{idRec}/maximum` and the
/// sandbox's `POST /sandbox/rec/{idRec}/maximum`).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PayerMaximum {
    /// The most a charge may be; null removes the maximum. For a recurrence without valorRec,
    /// not below its valorMinimoRecebedor.
    #[schema(schema_with = amount_text)]
    valor_maximo: Option<String>,
}

/// `POST /api/automatic-pix/authorisations`: a recurrence's QR code, read by its payer.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QrAuthorisation {
    /// The code's text (copy and paste): journey 2's, or journey 3's or 4's composite code
    /// once its charge is paid.
    qr_code: String,
    /// For a recurrence without valorRec: the most a charge may be.
    #[schema(schema_with = amount_text)]
    valor_maximo: Option<String>,
    /// The payer's municipality: the 7 digits of its IBGE code (`pagador.codMun`).
    #[schema(pattern = "^[0-9]{7}$")]
    cod_mun: Option<String>,
}

/// `POST /sandbox/solicrec/{idSolicRec}/answer`: the payer's institution's answer.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SolicRecAnswer {
    decision: DecisionName,
    /// With APPROVE, for a recurrence without valorRec: the most a charge may be.
    #[schema(schema_with = amount_text)]
    valor_maximo: Option<String>,
    /// The payer's municipality: the 7 digits of its IBGE code (`pagador.codMun`).
    #[schema(pattern = "^[0-9]{7}$")]
    cod_mun: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DecisionName {
    Approve,
    Reject,
}

/// A recurrence (`POST`, `GET`, `PATCH /rec/{idRec}`, each item of `GET /rec`, the
/// `recPayload` of a solicitation, and each item of a `rec` webhook's `recs`).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecView {
    /// R, then R (retries allowed) or N, the ISPB, the date it was made, 11 letters or digits.
    #[schema(pattern = "^R[RN][0-9A-Z]{8}[0-9]{8}[a-zA-Z0-9]{11}$")]
    id_rec: String,
    vinculo: VinculoView,
    calendario: RecCalendarioView,
    valor: RecValorView,
    politica_retentativa: RetryPolicyName,
    recebedor: PartyView,
    /// Once APROVADA: the payer's document and institution, and the payer's maximum.
    pagador: Option<PagadorView>,
    status: RecStatusName,
    /// Each status, with when it was reached.
    atualizacao: Vec<Step>,
    ativacao: Ativacao,
    encerramento: Option<Encerramento>,
    /// Its location, when it has one (journeys 2 and 3).
    loc: Option<RecLocView>,
    /// While CRIADA with a location and no first cob: journey 2's QR code.
    #[serde(rename = "dadosQR")]
    dados_qr: Option<DadosQr>,
    /// When the receiver asked for it (pixgw's own).
    automacao: Option<Automacao>,
}

#[derive(ToSchema)]
pub struct RecLocView {
    id: u64,
    location: String,
    criacao: String,
    /// The recurrence it serves.
    #[serde(rename = "idRec")]
    id_rec: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DadosQr {
    /// A BR Code that carries the location in its template 80, and no key or amount.
    pix_copia_e_cola: String,
    jornada: String,
}

#[derive(ToSchema)]
pub struct VinculoView {
    objeto: Option<String>,
    contrato: String,
    devedor: PartyView,
}

/// A person's or company's name and CPF or CNPJ (and, for the receiver, its institution).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartyView {
    cpf: Option<String>,
    cnpj: Option<String>,
    nome: String,
    ispb_participante: Option<String>,
    /// The receiver's `convenio`, when `POST /rec` named one.
    convenio: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecCalendarioView {
    #[schema(format = Date)]
    data_inicial: String,
    #[schema(format = Date)]
    data_final: Option<String>,
    periodicidade: PeriodicityName,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecValorView {
    #[schema(schema_with = amount_text)]
    valor_rec: Option<String>,
    #[schema(schema_with = amount_text)]
    valor_minimo_recebedor: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PagadorView {
    cpf: Option<String>,
    cnpj: Option<String>,
    ispb_participante: String,
    #[schema(schema_with = amount_text)]
    valor_maximo: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RecStatusName {
    Criada,
    Aprovada,
    Rejeitada,
    Expirada,
    Cancelada,
}

#[derive(ToSchema)]
pub struct Step {
    /// The status reached.
    status: String,
    /// RFC 3339, UTC.
    data: String,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ativacao {
    /// AGUARDANDO_DEFINICAO until the payer authorises it; then JORNADA_1 (a solicitation),
    /// JORNADA_2 (its location's QR code) or JORNADA_3 (its first cob's payment).
    tipo_jornada: String,
    /// Journey 3: the first cob.
    dados_jornada: Option<DadosJornada>,
}

/// Why it ended: one of the three.
#[derive(ToSchema)]
pub struct Encerramento {
    /// `codigo`: AP13 (the payer refused) or AP14 (the solicitation expired unanswered).
    rejeicao: Option<Motivo>,
    cancelamento: Option<Cancelamento>,
}

#[derive(ToSchema)]
pub struct Motivo {
    codigo: Option<String>,
    descricao: String,
}

#[derive(ToSchema)]
pub struct Cancelamento {
    /// USUARIO_RECEBEDOR or USUARIO_PAGADOR.
    solicitante: String,
    /// SLCR (asked by the receiver) or SLDB (asked by the payer).
    codigo: String,
    descricao: String,
}

/// `GET /rec`
#[derive(ToSchema)]
pub struct RecList {
    parametros: RecListParams,
    recs: Vec<RecView>,
}

#[derive(ToSchema)]
pub struct RecListParams {
    inicio: String,
    fim: String,
    cpf: Option<String>,
    cnpj: Option<String>,
    status: Option<RecStatusName>,
    paginacao: Paginacao,
}

/// A solicitation (`POST /solicrec`, `GET` and `PATCH /solicrec/{idSolicRec}`).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SolicRecView {
    #[schema(pattern = "^SC[0-9A-Z]{8}[0-9]{8}[a-zA-Z0-9]{11}$")]
    id_solic_rec: String,
    id_rec: String,
    calendario: SolicCalendario,
    destinatario: DestinatarioView,
    /// RECEBIDA (awaiting an answer), ACEITA, REJEITADA, EXPIRADA or CANCELADA.
    status: String,
    atualizacao: Vec<Step>,
    /// The recurrence as it is now.
    rec_payload: RecView,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DestinatarioView {
    cpf: Option<String>,
    cnpj: Option<String>,
    conta: String,
    agencia: Option<String>,
    ispb_participante: String,
}

/// Limits the schemas state as numbers, tied to the readers' constants.
const _: () = {
    assert!(OBJETO_LEN_MAX == 35 && CONTRATO_LEN_MAX == 35);
    assert!(CONTA_LEN_MAX == 20 && AGENCIA_LEN_MAX == 4);
};

/// `PUT /cobr/{txid}` and `POST /cobr`
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({"idRec": "RR999999992026112600000000001",
    "calendario": {"dataDeVencimento": "2027-01-05"}, "valor": {"original": "89.90"}, "ajusteDiaUtil": true,
    "infoAdicional": "January", "recebedor": {"conta": "012682", "tipoConta": "CORRENTE", "agencia": "9708"}}))]
pub struct CobrRequest {
    #[schema(pattern = "^R[RN][0-9A-Z]{8}[0-9]{8}[a-zA-Z0-9]{11}$")]
    id_rec: String,
    calendario: CobrCalendario,
    valor: CobrValor,
    /// Move a due date that is not a business day to the next one (default true).
    ajuste_dia_util: Option<bool>,
    #[schema(min_length = 1, max_length = 140)]
    info_adicional: Option<String>,
    /// The receiver's account the payer's institution is told of (the money goes to the
    /// account of this gateway that makes the charge). The API Pix requires it; pixgw
    /// answers with that account when it is left out.
    recebedor: Option<CobrRecebedor>,
    devedor: Option<CobrDevedor>,
}

/// `recebedor` of a recurring charge (`DadosBancariosRecebedor`).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CobrRecebedor {
    #[schema(min_length = 1, max_length = 20)]
    conta: String,
    /// CORRENTE, POUPANCA or PAGAMENTO.
    tipo_conta: String,
    #[schema(min_length = 1, max_length = 4)]
    agencia: Option<String>,
}

/// `recebedor` of a recurring charge as it is answered: the account named (or the account of
/// this gateway), and the receiver its recurrence names.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobrRecebedorView {
    conta: String,
    /// CORRENTE, POUPANCA or PAGAMENTO.
    tipo_conta: String,
    agencia: Option<String>,
    cnpj: Option<String>,
    cpf: Option<String>,
    nome: Option<String>,
}

/// `devedor` of a recurring charge: the debtor's contact and address.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CobrDevedor {
    #[schema(max_length = 200)]
    email: Option<String>,
    #[schema(max_length = 200)]
    logradouro: Option<String>,
    #[schema(max_length = 200)]
    cidade: Option<String>,
    #[schema(max_length = 2)]
    uf: Option<String>,
    /// 8 digits, or 9 characters with a hyphen.
    #[schema(max_length = 9)]
    cep: Option<String>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CobrCalendario {
    /// YYYY-MM-DD, 2 to 10 days from today, in a cycle of the recurrence with no charge yet.
    #[schema(format = Date)]
    data_de_vencimento: String,
}

#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CobrValor {
    /// The recurrence's valorRec, or at least its valorMinimoRecebedor.
    #[schema(schema_with = amount_text)]
    original: String,
}

/// A recurring charge (`PUT`, `POST`, `GET`, `PATCH /cobr/{txid}`, a retry, each item of
/// `GET /cobr` and of a `cobr` webhook's `cobsr`).
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobrView {
    txid: String,
    id_rec: String,
    calendario: CobrCalendarioView,
    valor: CobrValor,
    ajuste_dia_util: bool,
    politica_retentativa: RetryPolicyName,
    info_adicional: Option<String>,
    /// CRIADA, ATIVA, CONCLUIDA, EXPIRADA, REJEITADA or CANCELADA.
    status: String,
    atualizacao: Vec<Step>,
    tentativas: Vec<Tentativa>,
    recebedor: CobrRecebedorView,
    devedor: Option<CobrDevedor>,
    /// Why it was cancelled or rejected (an expired charge has none).
    encerramento: Option<CobrEncerramento>,
    /// Once paid (reads only, not webhooks): the received PIX that paid it, as `GET
    /// /pix/{e2eid}` shows it.
    pix: Option<Vec<super::schemas::PixView>>,
}

/// Why a recurring charge was cancelled or rejected: one of the two.
#[derive(ToSchema)]
pub struct CobrEncerramento {
    cancelamento: Option<Cancelamento>,
    /// `codigo`: AC05 (the payer's account is closed) or AM02 (above the payer's maximum).
    rejeicao: Option<Motivo>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobrCalendarioView {
    /// The day it was made (São Paulo).
    #[schema(format = Date)]
    criacao: String,
    #[schema(format = Date)]
    data_de_vencimento: String,
}

/// One attempt of the payer's institution to settle the charge.
#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tentativa {
    /// The day of the attempt: the due date, moved to a business day with ajusteDiaUtil, or
    /// the day of a retry.
    #[schema(format = Date)]
    data_liquidacao: String,
    /// AGND (the due date's own) or NTAG (a retry the receiver asked for).
    tipo: String,
    /// AGENDADA (still to come), PAGA, EXPIRADA (the day ended without the money; a retry
    /// may follow), REJEITADA or CANCELADA.
    status: String,
    /// The id its payment carries, made when the attempt was scheduled.
    end_to_end_id: String,
    /// SOLICITADA and AGENDADA when it was scheduled, then how it ended.
    atualizacao: Vec<Step>,
    /// Once REJEITADA: AC05 or AM02.
    rejeicao: Option<Motivo>,
}

/// `GET /cobr`
#[derive(ToSchema)]
pub struct CobrList {
    parametros: CobrListParams,
    cobsr: Vec<CobrView>,
}

#[derive(ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CobrListParams {
    inicio: String,
    fim: String,
    id_rec: Option<String>,
    status: Option<String>,
    paginacao: Paginacao,
}

/// `GET /api/automatic-pix/recurrences`: the recurrences offered to the account as their
/// payer (on us), newest first.
#[derive(ToSchema)]
pub struct PayerRecList {
    recurrences: Vec<RecView>,
}
