//! A recurrence of Pix Automático (`/rec`) and the requests that ask the payer's institution
//! to authorise it (`/solicrec`): the record, its life cycle, its ids and its API Pix view.
//!
//! Life cycle of a recurrence (docs/interface.md "Life cycles", docs/decisions.md "Pix
//! Automático: recurrences and their authorisation"):
//! - `CRIADA` when the receiver makes it. It moves money only once the payer authorised it.
//! - `APROVADA` when the payer's institution answers a request for authorisation with the
//!   payer's yes (journey 1: `/solicrec`). The approval may carry the payer's maximum per
//!   charge, for a recurrence without a fixed value.
//! - `REJEITADA` when the payer says no; `EXPIRADA` when the request was not answered by its
//!   expiry; `CANCELADA` when either side ends it (who, and why, is kept).
//!
//! Three journeys lead to `APROVADA` (`ativacao.tipoJornada`): journey 1, a solicitation the
//! payer's institution answers; journey 2, the payer reads a QR code that carries only the
//! recurrence's location (a [`LocRec`]); journey 3, the payer pays the recurrence's first cob
//! (`ativacao.dadosJornada.txid`) and authorises the recurrence with that payment.
//!
//! The last three statuses are final. A request for authorisation (a solicitation) is `RECEBIDA` as
//! soon as it is made: the sandbox's payer's institution is reached at once, so its `CRIADA`
//! and `ENVIADA` steps share that instant in its history. It ends `ACEITA`, `REJEITADA`,
//! `EXPIRADA` or `CANCELADA` (by the receiver, before an answer); a recurrence holds at most
//! one solicitation awaiting an answer, and a new one may follow only a cancelled one.
//!
//! Ids carry the local id of the record they name (as transaction ids do), so a lookup needs
//! no index: `idRec` is `R`, then `R` when the recurrence allows retries or `N` when not, the
//! gateway's ISPB, the São Paulo date it was made and 11 base-36 digits of its local id (29
//! characters, the API Pix's pattern); `idSolicRec` is `SC`, the ISPB, the date and 11
//! base-36 digits of the solicitation's own local id.
//!
//! Pure: time and ids come in as arguments.

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::events::iso;
use super::listing::local_day;
use super::money::Money;
use super::recurrence::{AmountRule, AutoRetry, RetryPolicy, Schedule};
use super::transaction::gateway_ispb;

/// Characters of `vinculo.objeto` and of `vinculo.contrato`.
pub const OBJETO_LEN_MAX: usize = 35;
pub const CONTRATO_LEN_MAX: usize = 35;
/// Characters of a solicitation's `destinatario.conta` and `destinatario.agencia`.
pub const CONTA_LEN_MAX: usize = 20;
pub const AGENCIA_LEN_MAX: usize = 4;
/// Solicitations one recurrence may have had (each new one follows a cancelled one).
pub const SOLICITATIONS_PER_REC_MAX: usize = 10;
/// How far ahead a solicitation's expiry may be, in days from when it is made.
pub const SOLICITATION_DAYS_MAX: i64 = 30;
/// Characters of an `idRec` and of an `idSolicRec`.
pub const REC_ID_LEN: usize = 29;
/// Base-36 digits of the local id at the end of an id.
const ID_DIGITS: usize = 11;

/// Why a recurrence's command is refused. Each is one variant; the HTTP layer maps them to
/// status and code in one place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecError {
    #[error("no recurrence with this idRec")]
    NotFound,
    #[error("no solicitation with this idSolicRec")]
    SolicitationNotFound,
    #[error("the recurrence is {0}, so it can no longer change")]
    Final(&'static str),
    #[error("the recurrence is {0}: only a recurrence in CRIADA is sent for authorisation")]
    NotAwaitingAuthorisation(&'static str),
    #[error("a solicitation of this recurrence awaits the payer's answer")]
    SolicitationAwaiting,
    #[error("the solicitation is {0}, no longer awaiting an answer")]
    SolicitationClosed(&'static str),
    #[error("the recurrence had {SOLICITATIONS_PER_REC_MAX} solicitations already")]
    TooManySolicitations,
    #[error("dataExpiracaoSolicitacao must be in the future")]
    ExpiryInThePast,
    #[error("dataExpiracaoSolicitacao is at most {SOLICITATION_DAYS_MAX} days ahead")]
    ExpiryTooFar,
    #[error("a payer's maximum is only for a recurrence without a fixed value (valorRec)")]
    MaximumOnFixedValue,
    #[error("the payer's maximum is below the recurrence's minimum, {0}")]
    MaximumBelowMinimum(Money),
    #[error("dataInicial is before today")]
    StartsBeforeToday,
    #[error("dataInicial is after the recurrence's dataFinal")]
    StartsAfterEnd,
    #[error("the recurrence is {0}: only an authorised one has a payer's maximum to change")]
    NotAuthorised(&'static str),
    #[error("no location with this id")]
    LocationNotFound,
    #[error("the location is linked to the recurrence {0} already")]
    LocationTaken(String),
    #[error("no cob or cobv of this account with this txid")]
    FirstChargeNotFound,
    #[error("the recurrence has neither a location nor a first cob: it is authorised by a solicitation")]
    NoQrJourney,
    #[error("the first charge is not paid: journeys 3 and 4 authorise with its payment")]
    FirstChargeUnpaid,
    #[error("the payer is account {0} of this gateway: it answers through its own API, not the sandbox")]
    PayerOnUs(u64),
}

/// A recurrence's status (`status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RecStatus {
    Criada,
    Aprovada,
    Rejeitada,
    Expirada,
    Cancelada,
}

impl RecStatus {
    pub const ALL: [RecStatus; 5] = [
        RecStatus::Criada,
        RecStatus::Aprovada,
        RecStatus::Rejeitada,
        RecStatus::Expirada,
        RecStatus::Cancelada,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RecStatus::Criada => "CRIADA",
            RecStatus::Aprovada => "APROVADA",
            RecStatus::Rejeitada => "REJEITADA",
            RecStatus::Expirada => "EXPIRADA",
            RecStatus::Cancelada => "CANCELADA",
        }
    }

    pub fn parse(text: &str) -> Option<RecStatus> {
        RecStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn is_final(self) -> bool {
        matches!(self, RecStatus::Rejeitada | RecStatus::Expirada | RecStatus::Cancelada)
    }
}

/// A solicitation's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SolicStatus {
    Criada,
    Enviada,
    Recebida,
    Aceita,
    Rejeitada,
    Expirada,
    Cancelada,
}

impl SolicStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SolicStatus::Criada => "CRIADA",
            SolicStatus::Enviada => "ENVIADA",
            SolicStatus::Recebida => "RECEBIDA",
            SolicStatus::Aceita => "ACEITA",
            SolicStatus::Rejeitada => "REJEITADA",
            SolicStatus::Expirada => "EXPIRADA",
            SolicStatus::Cancelada => "CANCELADA",
        }
    }
}

/// Who ended a recurrence (`encerramento.cancelamento.solicitante`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Party {
    UsuarioRecebedor,
    UsuarioPagador,
}

impl Party {
    pub fn as_str(self) -> &'static str {
        match self {
            Party::UsuarioRecebedor => "USUARIO_RECEBEDOR",
            Party::UsuarioPagador => "USUARIO_PAGADOR",
        }
    }

    /// The code of a cancellation this party asked for.
    pub fn cancel_code(self) -> &'static str {
        match self {
            Party::UsuarioRecebedor => "SLCR",
            Party::UsuarioPagador => "SLDB",
        }
    }
}

/// How the payer authorised it (`ativacao.tipoJornada`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Journey {
    /// A request sent to the payer's institution (`/solicrec`).
    #[serde(rename = "JORNADA_1")]
    One,
    /// A QR code with the recurrence's location only.
    #[serde(rename = "JORNADA_2")]
    Two,
    /// A QR code that pays a first cob and authorises with that payment.
    #[serde(rename = "JORNADA_3")]
    Three,
    /// The same with a first cobv (a charge with a due date).
    #[serde(rename = "JORNADA_4")]
    Four,
}

impl Journey {
    pub fn as_str(self) -> &'static str {
        match self {
            Journey::One => "JORNADA_1",
            Journey::Two => "JORNADA_2",
            Journey::Three => "JORNADA_3",
            Journey::Four => "JORNADA_4",
        }
    }
}

/// A location of a recurrence (`/locrec`): what a journey 2 QR code carries. Made on its own,
/// then linked to one recurrence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocRec {
    pub account_id: u64,
    pub local_id: u64,
    pub location: String,
    pub created_at: DateTime<Utc>,
    /// The recurrence it is linked to.
    pub id_rec: Option<String>,
}

impl LocRec {
    pub fn to_json(&self) -> Value {
        let mut v = json!({"id": self.local_id, "location": self.location, "criacao": iso(self.created_at)});
        if let Some(id) = &self.id_rec {
            v["idRec"] = json!(id);
        }
        v
    }
}

/// The debtor of the contract: a name and a CPF or CNPJ (checked by whoever parsed it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Debtor {
    pub name: String,
    pub document: String,
}

/// What the recurrence pays for (`vinculo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub object: Option<String>,
    pub contract: String,
    pub debtor: Debtor,
}

/// The account of the payer that a solicitation goes to (`destinatario`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipient {
    pub document: String,
    pub account: String,
    pub branch: Option<String>,
    pub ispb: String,
    /// The account of this gateway it names (on us), as the route that read it found it:
    /// `ispb` is this gateway's and `account` that account's number, with its document.
    #[serde(default)]
    pub on_us: Option<u64>,
}

/// What the payer's institution said on approving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayerAuthorisation {
    pub document: String,
    pub ispb: String,
    /// The most the payer allows a charge to be, for a recurrence without a fixed value.
    pub maximum: Option<Money>,
    /// The payer's municipality (`pagador.codMun`), when its institution said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub municipality: Option<CodMun>,
    /// The payer's account when it is an account of this gateway (on us).
    #[serde(default)]
    pub on_us: Option<u64>,
}

/// An IBGE municipality code (`codMun`): 7 digits, the first two the state's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CodMun(String);

/// Digits of a municipality code.
pub const COD_MUN_LEN: usize = 7;

impl CodMun {
    pub fn parse(text: &str) -> Option<CodMun> {
        (text.len() == COD_MUN_LEN && text.bytes().all(|b| b.is_ascii_digit()))
            .then(|| CodMun(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Who speaks for the payer in a change of a recurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayerSide {
    /// The sandbox's payer's institution (a sandbox route, called by the receiver).
    Sandbox,
    /// An account of this gateway, through its own API, as the payer.
    Account(u64),
}

/// Why a recurrence ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Closing {
    /// The payer said no (`encerramento.rejeicao`, [`REFUSED_BY_PAYER`]).
    Rejected { code: String, description: String },
    /// The solicitation expired unanswered (`encerramento.rejeicao`, [`EXPIRED_UNANSWERED`]).
    Expired { description: String },
    /// One side cancelled it (`encerramento.cancelamento`).
    Cancelled { by: Party, code: String, description: String },
}

/// The rejection code of a recurrence the payer refused (the API Pix's `RecEncerramento`
/// allows AP13 and AP14; docs/decisions.md "Pix Automático to the API Pix" says how we read
/// them).
pub const REFUSED_BY_PAYER: &str = "AP13";
/// The rejection code of a recurrence whose solicitation expired unanswered.
pub const EXPIRED_UNANSWERED: &str = "AP14";

/// What the receiver revises of a recurrence (the API Pix's `RecRevisada`, but its status).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Revision {
    /// `vinculo.devedor.nome`.
    pub debtor_name: Option<String>,
    /// `calendario.dataInicial`.
    pub start: Option<NaiveDate>,
    /// `loc`: the id of a location to link (journey 2) ...
    pub loc_id: Option<u64>,
    /// ... and that location as stored, which the caller reads by its id.
    pub loc: Option<LocRec>,
    /// `ativacao.dadosJornada.txid`: a cob of the account, or a cobv (journey 4): the caller
    /// checks it is one and says which.
    pub first_txid: Option<String>,
    pub first_is_cobv: bool,
}

/// The payer's institution's answer to a solicitation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// With the most a charge may be, and the payer's municipality (`codMun`), when given.
    Approve {
        maximum: Option<Money>,
        municipality: Option<CodMun>,
    },
    Reject,
}

/// A request to the payer's institution to authorise the recurrence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Solicitation {
    pub local_id: u64,
    pub id: String,
    pub recipient: Recipient,
    pub expires_at: DateTime<Utc>,
    pub status: SolicStatus,
    pub history: Vec<(SolicStatus, DateTime<Utc>)>,
}

impl Solicitation {
    fn step(&mut self, status: SolicStatus, now: DateTime<Utc>) {
        self.status = status;
        self.history.push((status, now));
    }

    /// The API Pix view of the solicitation, with the recurrence it asks for.
    pub fn to_json(&self, rec: &Recurrence) -> Value {
        let mut out = self.view(&rec.id);
        let mut payload = rec.to_json();
        // The recurrence as asked for, not its list of what was asked.
        if let Some(o) = payload.as_object_mut() {
            o.remove("solicitacao");
        }
        out["recPayload"] = payload;
        out
    }

    /// The solicitation as its recurrence lists it (`solicitacao`): without the recurrence.
    fn view(&self, id_rec: &str) -> Value {
        let mut destinatario = Map::new();
        destinatario.insert(document_field(&self.recipient.document).into(), json!(self.recipient.document));
        destinatario.insert("conta".into(), json!(self.recipient.account));
        if let Some(b) = &self.recipient.branch {
            destinatario.insert("agencia".into(), json!(b));
        }
        destinatario.insert("ispbParticipante".into(), json!(self.recipient.ispb));
        json!({
            "idSolicRec": self.id,
            "idRec": id_rec,
            "calendario": {"dataExpiracaoSolicitacao": iso(self.expires_at)},
            "destinatario": destinatario,
            "status": self.status.as_str(),
            "atualizacao": self.history.iter().map(|(s, at)| json!({"status": s.as_str(), "data": iso(*at)})).collect::<Vec<_>>(),
        })
    }
}

/// The receiver as its recurrences name it (`recebedor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receiver {
    pub name: String,
    pub document: String,
    /// The receiver's agreement with its PSP that the recurrence falls under
    /// (`recebedor.convenio`), when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<String>,
}

/// Characters of `recebedor.convenio`.
pub const CONVENIO_LEN_MAX: usize = 60;

/// A recurrence: the contract, its calendar and value rule, and how far its authorisation
/// went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recurrence {
    pub account_id: u64,
    pub local_id: u64,
    pub id: String,
    pub link: Link,
    pub schedule: Schedule,
    pub amount: AmountRule,
    pub retry: RetryPolicy,
    pub receiver: Receiver,
    pub status: RecStatus,
    pub history: Vec<(RecStatus, DateTime<Utc>)>,
    pub journey: Option<Journey>,
    pub payer: Option<PayerAuthorisation>,
    pub closing: Option<Closing>,
    pub solicitations: Vec<Solicitation>,
    /// The cycles charged so far: (cycle, the local id of its recurring charge). One charge
    /// per cycle.
    #[serde(default)]
    pub charges: Vec<(u32, u64)>,
    /// Its location, for journey 2 (and shown with journey 3's).
    #[serde(default)]
    pub loc: Option<LocRec>,
    /// The txid of the cob whose payment authorises it (journey 3).
    #[serde(default)]
    pub first_txid: Option<String>,
    /// That first charge is a cobv (journey 4), not a cob.
    #[serde(default)]
    pub first_is_cobv: bool,
    /// The retries the gateway asks for by itself after a failed attempt (pixgw's own
    /// `automacao.diasRetentativa`; off by default).
    #[serde(default)]
    pub auto_retry: AutoRetry,
    /// The gateway sends each cycle's charge by itself this many days before its due date
    /// (pixgw's own `automacao.diasAntesEnvio`; a recurrence with `valorRec` only; off by
    /// default) ...
    #[serde(default)]
    pub auto_send_days: Option<u8>,
    /// ... starting from this cycle (the ones before were sent or passed over).
    #[serde(default)]
    pub auto_next_cycle: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// `cpf` for an 11-character document, `cnpj` for a 14-character one.
pub fn document_field(document: &str) -> &'static str {
    if document.len() == 11 {
        "cpf"
    } else {
        "cnpj"
    }
}

/// `n` in `digits` base-36 digits (0-9, a-z), or `None` when it does not fit.
fn base36(mut n: u64, digits: usize) -> Option<String> {
    let mut out = vec![b'0'; digits];
    for slot in out.iter_mut().rev() {
        *slot = b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize];
        n /= 36;
    }
    (n == 0).then(|| String::from_utf8_lossy(&out).into_owned())
}

fn id_of(prefix: &str, local_id: u64, made: NaiveDate) -> Option<String> {
    Some(format!("{prefix}{}{}{}", gateway_ispb(), made.format("%Y%m%d"), base36(local_id, ID_DIGITS)?))
}

/// The local id an id made by [`rec_id`] or [`solicitation_id`] carries, if `id` is one of
/// this gateway's of that kind.
fn local_of(id: &str, prefixes: &[&str]) -> Option<u64> {
    let b = id.as_bytes();
    let well_formed = b.len() == REC_ID_LEN
        && prefixes.iter().any(|p| id.starts_with(p))
        && &id[2..10] == gateway_ispb()
        && b[10..18].iter().all(u8::is_ascii_digit)
        && b[18..].iter().all(|c| c.is_ascii_digit() || c.is_ascii_lowercase());
    if !well_formed {
        return None;
    }
    u64::from_str_radix(&id[18..], 36).ok()
}

/// The `idRec` of the recurrence with this local id, made on `made` (São Paulo date).
pub fn rec_id(local_id: u64, retry: RetryPolicy, made: NaiveDate) -> Option<String> {
    let prefix = if retry == RetryPolicy::NotAllowed { "RN" } else { "RR" };
    id_of(prefix, local_id, made)
}

/// The local id an `idRec` carries.
pub fn rec_local(id: &str) -> Option<u64> {
    local_of(id, &["RN", "RR"])
}

/// The `idSolicRec` of the solicitation with this local id, made on `made`.
pub fn solicitation_id(local_id: u64, made: NaiveDate) -> Option<String> {
    id_of("SC", local_id, made)
}

/// The local id an `idSolicRec` carries.
pub fn solicitation_local(id: &str) -> Option<u64> {
    local_of(id, &["SC"])
}

/// What [`is_id_shaped`] asks, as a violation says it.
pub const ID_SHAPE: &str =
    "must be 2 capital letters, 8 capitals or digits (an ISPB), 8 digits (a date) and 11 letters or digits";

/// Whether `text` has the shape of an `idRec` or `idSolicRec` (the API Pix's formation: two
/// capitals, the ISPB in 8 capitals or digits, the date in 8 digits, 11 letters or digits).
pub fn is_id_shaped(text: &str) -> bool {
    let b = text.as_bytes();
    let capital_or_digit = |c: &u8| c.is_ascii_uppercase() || c.is_ascii_digit();
    b.len() == REC_ID_LEN
        && b[..2].iter().all(u8::is_ascii_uppercase)
        && b[2..10].iter().all(capital_or_digit)
        && b[10..18].iter().all(u8::is_ascii_digit)
        && b[18..].iter().all(u8::is_ascii_alphanumeric)
}

impl Recurrence {
    /// A new recurrence in `CRIADA`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        account_id: u64,
        local_id: u64,
        link: Link,
        schedule: Schedule,
        amount: AmountRule,
        retry: RetryPolicy,
        receiver: Receiver,
        now: DateTime<Utc>,
    ) -> Option<Recurrence> {
        Some(Recurrence {
            account_id,
            local_id,
            id: rec_id(local_id, retry, local_day(now))?,
            link,
            schedule,
            amount,
            retry,
            receiver,
            status: RecStatus::Criada,
            history: vec![(RecStatus::Criada, now)],
            journey: None,
            payer: None,
            closing: None,
            solicitations: Vec::new(),
            charges: Vec::new(),
            loc: None,
            first_txid: None,
            first_is_cobv: false,
            auto_retry: AutoRetry::default(),
            auto_send_days: None,
            auto_next_cycle: 0,
            created_at: now,
            updated_at: now,
        })
    }

    fn step(&mut self, status: RecStatus, now: DateTime<Utc>) {
        self.status = status;
        self.history.push((status, now));
        self.updated_at = now;
    }

    /// The solicitation awaiting the payer's answer, if one is.
    pub fn awaiting(&self) -> Option<&Solicitation> {
        self.solicitations.last().filter(|s| s.status == SolicStatus::Recebida)
    }

    /// When its actor must act next: the solicitation awaiting an answer expires, or the
    /// gateway sends a cycle's charge by itself.
    pub fn deadline(&self) -> Option<DateTime<Utc>> {
        match (self.awaiting().map(|s| s.expires_at), self.auto_send_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// When the gateway sends the next cycle's charge by itself: 00:00 (São Paulo) of the
    /// day `auto_send_days` before that cycle's first date, while the recurrence is
    /// authorised; `None` when it sends none.
    pub fn auto_send_at(&self) -> Option<DateTime<Utc>> {
        let days = self.auto_send_days.filter(|_| self.status == RecStatus::Aprovada)?;
        let due = self.schedule.cycle_start(self.auto_next_cycle)?;
        Some(super::cobv::start_of_day(due - chrono::Duration::days(i64::from(days))))
    }

    pub fn solicitation(&self, id: &str) -> Option<&Solicitation> {
        self.solicitations.iter().find(|s| s.id == id)
    }

    /// Sends a solicitation to the payer's institution, which receives it at once.
    pub fn solicit(
        &mut self,
        local_id: u64,
        recipient: Recipient,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<&Solicitation, RecError> {
        if self.status != RecStatus::Criada {
            return Err(RecError::NotAwaitingAuthorisation(self.status.as_str()));
        }
        if self.awaiting().is_some() {
            return Err(RecError::SolicitationAwaiting);
        }
        if self.solicitations.len() >= SOLICITATIONS_PER_REC_MAX {
            return Err(RecError::TooManySolicitations);
        }
        if expires_at <= now {
            return Err(RecError::ExpiryInThePast);
        }
        if expires_at - now > chrono::Duration::days(SOLICITATION_DAYS_MAX) {
            return Err(RecError::ExpiryTooFar);
        }
        let id = solicitation_id(local_id, local_day(now)).ok_or(RecError::TooManySolicitations)?;
        let history = [SolicStatus::Criada, SolicStatus::Enviada, SolicStatus::Recebida]
            .into_iter()
            .map(|s| (s, now))
            .collect();
        self.solicitations.push(Solicitation {
            local_id,
            id,
            recipient,
            expires_at,
            status: SolicStatus::Recebida,
            history,
        });
        self.updated_at = now;
        Ok(&self.solicitations[self.solicitations.len() - 1])
    }

    /// The open solicitation `id`, for a change.
    fn open_solicitation(&mut self, id: &str) -> Result<&mut Solicitation, RecError> {
        let s = self.solicitations.iter_mut().find(|s| s.id == id).ok_or(RecError::SolicitationNotFound)?;
        if s.status != SolicStatus::Recebida {
            return Err(RecError::SolicitationClosed(s.status.as_str()));
        }
        Ok(s)
    }

    /// Whether the payer may cap each charge at `maximum`.
    fn check_maximum(&self, maximum: Option<Money>) -> Result<(), RecError> {
        match (self.amount, maximum) {
            (_, None) => Ok(()),
            (AmountRule::Fixed(_), Some(_)) => Err(RecError::MaximumOnFixedValue),
            (AmountRule::Variable { minimum: Some(min) }, Some(max)) if max < min => {
                Err(RecError::MaximumBelowMinimum(min))
            }
            (AmountRule::Variable { .. }, Some(_)) => Ok(()),
        }
    }

    /// The payer changes the most it allows a charge to be (`None`: no maximum), while it
    /// has authorised the recurrence: the rules of an approval's maximum hold.
    pub fn change_maximum(&mut self, maximum: Option<Money>, now: DateTime<Utc>) -> Result<(), RecError> {
        if self.status.is_final() {
            return Err(RecError::Final(self.status.as_str()));
        }
        self.check_maximum(maximum)?;
        let Some(payer) = self.payer.as_mut().filter(|_| self.status == RecStatus::Aprovada) else {
            return Err(RecError::NotAuthorised(self.status.as_str()));
        };
        payer.maximum = maximum;
        self.updated_at = now;
        Ok(())
    }

    /// The payer authorises it by a QR code: journey 3 when it has a first cob (which must
    /// be paid, `first_paid`), else journey 2 when it has a location.
    pub fn approve_by_qr(
        &mut self,
        payer: PayerAuthorisation,
        first_paid: bool,
        now: DateTime<Utc>,
    ) -> Result<(), RecError> {
        if self.status != RecStatus::Criada {
            return Err(RecError::NotAwaitingAuthorisation(self.status.as_str()));
        }
        if self.awaiting().is_some() {
            return Err(RecError::SolicitationAwaiting);
        }
        let journey = match (&self.first_txid, &self.loc) {
            (Some(_), _) if !first_paid => return Err(RecError::FirstChargeUnpaid),
            (Some(_), _) if self.first_is_cobv => Journey::Four,
            (Some(_), _) => Journey::Three,
            (None, Some(_)) => Journey::Two,
            (None, None) => return Err(RecError::NoQrJourney),
        };
        self.check_maximum(payer.maximum)?;
        self.payer = Some(payer);
        self.journey = Some(journey);
        self.step(RecStatus::Aprovada, now);
        Ok(())
    }

    /// The payer's account of this gateway, when the payer is one: the one that authorised
    /// it, or the one its solicitation awaits.
    pub fn on_us_payer(&self) -> Option<u64> {
        match &self.payer {
            Some(p) => p.on_us,
            None => self.awaiting().and_then(|s| s.recipient.on_us),
        }
    }

    /// Whether the account of this gateway `account` may see the recurrence as its payer:
    /// while it is the payer the recurrence names (authorised by it, or asked of it), or
    /// when it was asked and nobody authorised it since (its own refusal, an expiry, a
    /// withdrawal). Once another payer authorised it, that payer's data is not shown to it.
    pub fn shown_to_payer(&self, account: u64) -> bool {
        let asked = self.solicitations.iter().any(|s| s.recipient.on_us == Some(account));
        match &self.payer {
            Some(p) => p.on_us == Some(account),
            None => asked,
        }
    }

    /// Whether `side` may speak for this recurrence's payer. A payer of this gateway speaks
    /// only for itself, through its own account: the sandbox may not answer for it, and to
    /// any other account the recurrence does not exist. Any other payer is the sandbox's.
    pub fn check_payer_side(&self, side: PayerSide) -> Result<(), RecError> {
        match (self.on_us_payer(), side) {
            (None, PayerSide::Sandbox) => Ok(()),
            (Some(p), PayerSide::Account(a)) if p == a => Ok(()),
            (Some(p), PayerSide::Sandbox) => Err(RecError::PayerOnUs(p)),
            // Asked once and no longer awaited (its own refusal, a withdrawal, a
            // cancellation, an expiry): it still sees the recurrence, so it is told why
            // nothing more is asked of it, not that the recurrence does not exist.
            (_, PayerSide::Account(a)) => {
                match self.solicitations.iter().rev().find(|s| s.recipient.on_us == Some(a)) {
                    Some(s) if self.shown_to_payer(a) => Err(RecError::SolicitationClosed(s.status.as_str())),
                    _ => Err(RecError::NotFound),
                }
            }
        }
    }

    /// Whether the account of this gateway `account` may authorise the recurrence by its QR
    /// code: unless another account of this gateway is its payer or is asked to be (whose
    /// recurrence it then does not see). Whether a QR journey is open at all is
    /// [`Recurrence::approve_by_qr`]'s to say.
    pub fn check_qr_payer(&self, account: u64) -> Result<(), RecError> {
        match self.on_us_payer() {
            Some(p) if p != account => Err(RecError::NotFound),
            _ => Ok(()),
        }
    }

    /// The payer's institution answers the solicitation `id`.
    pub fn answer(&mut self, id: &str, answer: Answer, now: DateTime<Utc>) -> Result<(), RecError> {
        if let Answer::Approve { maximum, .. } = &answer {
            self.check_maximum(*maximum)?;
        }
        let s = self.open_solicitation(id)?;
        match answer {
            Answer::Approve { maximum, municipality } => {
                s.step(SolicStatus::Aceita, now);
                let payer = PayerAuthorisation {
                    document: s.recipient.document.clone(),
                    ispb: s.recipient.ispb.clone(),
                    maximum,
                    municipality,
                    on_us: s.recipient.on_us,
                };
                self.payer = Some(payer);
                self.journey = Some(Journey::One);
                self.step(RecStatus::Aprovada, now);
            }
            Answer::Reject => {
                s.step(SolicStatus::Rejeitada, now);
                self.closing = Some(Closing::Rejected {
                    code: REFUSED_BY_PAYER.into(),
                    description: "the payer refused the authorisation".into(),
                });
                self.step(RecStatus::Rejeitada, now);
            }
        }
        Ok(())
    }

    /// The receiver withdraws the solicitation `id` before it is answered; the recurrence
    /// stays `CRIADA`, and may be sent again.
    pub fn withdraw(&mut self, id: &str, now: DateTime<Utc>) -> Result<(), RecError> {
        self.open_solicitation(id)?.step(SolicStatus::Cancelada, now);
        self.updated_at = now;
        Ok(())
    }

    /// Expires the solicitation awaiting an answer, if its time has come: the recurrence
    /// expires with it. Answers whether anything changed.
    pub fn expire(&mut self, now: DateTime<Utc>) -> bool {
        let Some(s) = self.solicitations.last_mut().filter(|s| s.status == SolicStatus::Recebida) else {
            return false;
        };
        if s.expires_at > now {
            return false;
        }
        s.step(SolicStatus::Expirada, now);
        self.closing = Some(Closing::Expired {
            description: "the payer's institution did not answer the solicitation in time".into(),
        });
        self.step(RecStatus::Expirada, now);
        true
    }

    /// The receiver revises it (`PATCH /rec/{idRec}` beyond a cancellation). The terms the
    /// payer is asked to authorise (the first date, journey 2's location, journey 3's first
    /// cob) change only while it is `CRIADA` and no solicitation awaits an answer; the
    /// debtor's name, while it is not final. Answers the location it no longer has, which
    /// the caller unlinks.
    pub fn revise(
        &mut self,
        r: Revision,
        today: NaiveDate,
        now: DateTime<Utc>,
    ) -> Result<Option<LocRec>, RecError> {
        if self.status.is_final() {
            return Err(RecError::Final(self.status.as_str()));
        }
        let terms = r.start.is_some() || r.loc_id.is_some() || r.first_txid.is_some();
        if terms && self.status != RecStatus::Criada {
            return Err(RecError::NotAwaitingAuthorisation(self.status.as_str()));
        }
        if terms && self.awaiting().is_some() {
            return Err(RecError::SolicitationAwaiting);
        }
        if let Some(start) = r.start {
            if start < today {
                return Err(RecError::StartsBeforeToday);
            }
            self.schedule = Schedule::new(start, self.schedule.every(), self.schedule.end())
                .map_err(|_| RecError::StartsAfterEnd)?;
        }
        let mut unlinked = None;
        if r.loc_id.is_some() {
            let loc = r.loc.ok_or(RecError::LocationNotFound)?;
            match &loc.id_rec {
                Some(other) if other != &self.id => return Err(RecError::LocationTaken(other.clone())),
                _ => {}
            }
            let old = self.loc.replace(LocRec { id_rec: Some(self.id.clone()), ..loc });
            unlinked = old.filter(|o| Some(o.local_id) != self.loc.as_ref().map(|l| l.local_id));
        }
        if let Some(txid) = r.first_txid {
            self.first_txid = Some(txid);
            self.first_is_cobv = r.first_is_cobv;
        }
        if let Some(name) = r.debtor_name {
            self.link.debtor.name = name;
        }
        self.updated_at = now;
        Ok(unlinked.map(|o| LocRec { id_rec: None, ..o }))
    }

    /// One side cancels the recurrence; a solicitation awaiting an answer is cancelled with it.
    pub fn cancel(&mut self, by: Party, now: DateTime<Utc>) -> Result<(), RecError> {
        if self.status.is_final() {
            return Err(RecError::Final(self.status.as_str()));
        }
        if let Some(s) = self.solicitations.last_mut().filter(|s| s.status == SolicStatus::Recebida) {
            s.step(SolicStatus::Cancelada, now);
        }
        let description = match by {
            Party::UsuarioRecebedor => "cancelled by the receiver",
            Party::UsuarioPagador => "cancelled by the payer",
        };
        self.closing =
            Some(Closing::Cancelled { by, code: by.cancel_code().into(), description: description.into() });
        self.step(RecStatus::Cancelada, now);
        Ok(())
    }

    /// The view the account of this gateway `payer` gets as its payer: its `solicitacao`
    /// lists the solicitations sent to it alone (another payer asked before it is not its
    /// business).
    pub fn to_payer_json(&self, payer: u64) -> Value {
        let mut out = self.to_json();
        let mine: Vec<Value> = self
            .solicitations
            .iter()
            .filter(|s| s.recipient.on_us == Some(payer))
            .map(|s| s.view(&self.id))
            .collect();
        match out.as_object_mut() {
            Some(o) if mine.is_empty() => {
                o.remove("solicitacao");
            }
            Some(o) => {
                o.insert("solicitacao".into(), Value::Array(mine));
            }
            None => {}
        }
        out
    }

    /// The API Pix view of the recurrence.
    pub fn to_json(&self) -> Value {
        let devedor = json!({
            document_field(&self.link.debtor.document): self.link.debtor.document,
            "nome": self.link.debtor.name,
        });
        let mut vinculo = json!({"contrato": self.link.contract, "devedor": devedor});
        if let Some(o) = &self.link.object {
            vinculo["objeto"] = json!(o);
        }
        let mut calendario = json!({
            "dataInicial": self.schedule.start().to_string(),
            "periodicidade": self.schedule.every().as_str(),
        });
        if let Some(end) = self.schedule.end() {
            calendario["dataFinal"] = json!(end.to_string());
        }
        let valor = match self.amount {
            AmountRule::Fixed(v) => json!({"valorRec": v.to_cents_string()}),
            AmountRule::Variable { minimum: Some(m) } => json!({"valorMinimoRecebedor": m.to_cents_string()}),
            AmountRule::Variable { minimum: None } => json!({}),
        };
        let mut out = json!({
            "idRec": self.id,
            "vinculo": vinculo,
            "calendario": calendario,
            "valor": valor,
            "politicaRetentativa": self.retry.as_str(),
            "recebedor": {
                document_field(&self.receiver.document): self.receiver.document,
                "nome": self.receiver.name,
                "ispbParticipante": gateway_ispb(),
            },
            "status": self.status.as_str(),
            "atualizacao": self.history.iter().map(|(s, at)| json!({"status": s.as_str(), "data": iso(*at)})).collect::<Vec<_>>(),
        });
        if let Some(a) = &self.receiver.agreement {
            out["recebedor"]["convenio"] = json!(a);
        }
        // pixgw's own, beyond the API Pix: what the gateway does by itself for the receiver.
        if !self.auto_retry.is_off() {
            out["automacao"]["diasRetentativa"] = json!(self.auto_retry.days());
        }
        if let Some(days) = self.auto_send_days {
            out["automacao"]["diasAntesEnvio"] = json!(days);
        }
        if let Some(p) = &self.payer {
            let mut pagador = json!({document_field(&p.document): p.document, "ispbParticipante": p.ispb});
            if let Some(max) = p.maximum {
                pagador["valorMaximo"] = json!(max.to_cents_string());
            }
            if let Some(m) = &p.municipality {
                pagador["codMun"] = json!(m.as_str());
            }
            out["pagador"] = pagador;
        }
        let mut ativacao = Map::new();
        // The API Pix requires it in `ativacao`: before the payer authorises, no journey is
        // decided yet.
        let journey = self.journey.map_or("AGUARDANDO_DEFINICAO", Journey::as_str);
        ativacao.insert("tipoJornada".into(), json!(journey));
        if let Some(t) = &self.first_txid {
            ativacao.insert("dadosJornada".into(), json!({"txid": t}));
        }
        out["ativacao"] = Value::Object(ativacao);
        if let Some(l) = &self.loc {
            out["loc"] = json!({"id": l.local_id, "location": l.location, "criacao": iso(l.created_at), "idRec": self.id});
            if self.first_txid.is_none() && self.status == RecStatus::Criada {
                let code = super::brcode::generate_recurrence(&l.location, &self.receiver.name, "SAO PAULO");
                out["dadosQR"] = json!({"pixCopiaECola": code, "jornada": "JORNADA_2"});
            }
        }
        if !self.solicitations.is_empty() {
            out["solicitacao"] = self.solicitations.iter().map(|s| s.view(&self.id)).collect();
        }
        if let Some(c) = &self.closing {
            out["encerramento"] = match c {
                Closing::Rejected { code, description } => {
                    // Records from before the API Pix's codes wrote a name of their own.
                    let code = if code == "RECUSADA_PELO_PAGADOR" { REFUSED_BY_PAYER } else { code };
                    json!({"rejeicao": {"codigo": code, "descricao": description}})
                }
                Closing::Expired { description } => {
                    json!({"rejeicao": {"codigo": EXPIRED_UNANSWERED, "descricao": description}})
                }
                Closing::Cancelled { by, code, description } => json!({"cancelamento": {
                    "solicitante": by.as_str(), "codigo": code, "descricao": description,
                }}),
            };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::recurrence::Periodicity;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn m(s: &str) -> Money {
        Money::parse(s).unwrap()
    }

    fn rec(amount: AmountRule) -> Recurrence {
        let start = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        Recurrence::new(
            7,
            1234,
            Link {
                object: Some("gym".into()),
                contract: "c-1".into(),
                debtor: Debtor { name: "Ana".into(), document: "52998224725".into() },
            },
            Schedule::new(start, Periodicity::Monthly, None).unwrap(),
            amount,
            RetryPolicy::ThreeWithinSevenDays,
            Receiver { name: "Shop".into(), document: "11222333000181".into(), agreement: None },
            at("2026-11-26T12:00:00Z"),
        )
        .unwrap()
    }

    fn recipient() -> Recipient {
        Recipient {
            document: "52998224725".into(),
            account: "12345".into(),
            branch: None,
            ispb: "00000000".into(),
            on_us: None,
        }
    }

    #[test]
    fn ids_carry_the_local_id_and_keep_the_api_pix_pattern() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 26).unwrap();
        let id = rec_id(1234, RetryPolicy::ThreeWithinSevenDays, day).unwrap();
        assert_eq!(id, format!("RR{}20261126000000000ya", gateway_ispb()));
        assert!(is_id_shaped(&id));
        assert_eq!(rec_local(&id), Some(1234));
        let n = rec_id(u64::from(u32::MAX), RetryPolicy::NotAllowed, day).unwrap();
        assert!(n.starts_with("RN") && rec_local(&n) == Some(u64::from(u32::MAX)));
        let s = solicitation_id(99, day).unwrap();
        assert_eq!(
            (solicitation_local(&s), rec_local(&s)),
            (Some(99), None),
            "a solicitation's id is not a rec's"
        );
        assert_eq!(rec_local(&s.replace("SC", "RR").replace(gateway_ispb(), "12345678")), None);
        assert_eq!(base36(36u64.pow(11), ID_DIGITS), None, "beyond 11 digits there is no id");
        assert_eq!(base36(36u64.pow(11) - 1, ID_DIGITS).as_deref(), Some("zzzzzzzzzzz"));
        assert!(!is_id_shaped("RR1234"));
    }

    #[test]
    fn an_approval_makes_it_aprovada_with_the_payer_and_its_journey() {
        let now = at("2026-11-26T12:00:00Z");
        let mut r = rec(AmountRule::Variable { minimum: Some(m("10")) });
        let sid = r.solicit(55, recipient(), at("2026-11-27T12:00:00Z"), now).unwrap().id.clone();
        assert_eq!(r.deadline(), Some(at("2026-11-27T12:00:00Z")));
        assert_eq!(
            r.solicit(56, recipient(), at("2026-11-27T12:00:00Z"), now),
            Err(RecError::SolicitationAwaiting)
        );
        assert_eq!(
            r.answer(&sid, Answer::Approve { maximum: Some(m("9.99")), municipality: None }, now),
            Err(RecError::MaximumBelowMinimum(m("10")))
        );
        r.answer(&sid, Answer::Approve { maximum: Some(m("50")), municipality: None }, now).unwrap();
        assert_eq!((r.status, r.journey, r.deadline()), (RecStatus::Aprovada, Some(Journey::One), None));
        assert_eq!(r.payer.as_ref().and_then(|p| p.maximum), Some(m("50")));
        let v = r.to_json();
        assert_eq!(
            (v["status"].as_str(), v["ativacao"]["tipoJornada"].as_str()),
            (Some("APROVADA"), Some("JORNADA_1"))
        );
        assert_eq!(v["pagador"]["valorMaximo"], "50.00");
        let sv = r.solicitation(&sid).unwrap().to_json(&r);
        let steps: Vec<&str> =
            sv["atualizacao"].as_array().unwrap().iter().map(|u| u["status"].as_str().unwrap()).collect();
        assert_eq!(steps, ["CRIADA", "ENVIADA", "RECEBIDA", "ACEITA"]);
        assert_eq!(r.answer(&sid, Answer::Reject, now), Err(RecError::SolicitationClosed("ACEITA")));
    }

    #[test]
    fn the_recurrence_lists_its_solicitations_and_a_payer_of_this_gateway_sees_its_own_alone() {
        let now = at("2026-11-26T12:00:00Z");
        let mut r = rec(AmountRule::Fixed(m("30")));
        assert!(r.to_json().get("solicitacao").is_none(), "none sent");
        let to =
            |account: u64| Recipient { on_us: Some(account), account: account.to_string(), ..recipient() };
        let first = r.solicit(55, to(5), at("2026-11-27T12:00:00Z"), now).unwrap().id.clone();
        r.withdraw(&first, now).unwrap();
        let second = r.solicit(56, to(6), at("2026-11-27T12:00:00Z"), now).unwrap().id.clone();
        let ids = |v: &Value| -> Vec<String> {
            v["solicitacao"]
                .as_array()
                .map_or(vec![], |a| a.iter().map(|s| s["idSolicRec"].as_str().unwrap().to_owned()).collect())
        };
        let all = r.to_json();
        assert_eq!(ids(&all), [first.clone(), second.clone()], "{all}");
        assert_eq!(all["solicitacao"][0]["status"], "CANCELADA");
        assert_eq!(all["solicitacao"][1]["destinatario"]["conta"], "6");
        assert_eq!(ids(&r.to_payer_json(6)), [second]);
        assert_eq!(ids(&r.to_payer_json(5)), [first]);
        assert!(r.to_payer_json(7).get("solicitacao").is_none());
        let asked = r.solicitations[1].to_json(&r);
        assert!(asked["recPayload"].get("solicitacao").is_none(), "{asked}");
    }

    #[test]
    fn a_municipality_code_is_seven_digits() {
        assert_eq!(CodMun::parse("3550308").map(|c| c.as_str().to_owned()), Some("3550308".into()));
        for bad in ["355030", "35503080", "35503O8", "", " 355030"] {
            assert_eq!(CodMun::parse(bad), None, "{bad:?}");
        }
        assert_eq!(COD_MUN_LEN, 7);
    }

    #[test]
    fn a_fixed_value_takes_no_maximum_and_a_refusal_is_final() {
        let now = at("2026-11-26T12:00:00Z");
        let mut r = rec(AmountRule::Fixed(m("30")));
        let sid = r.solicit(55, recipient(), at("2026-11-27T12:00:00Z"), now).unwrap().id.clone();
        assert_eq!(
            r.answer(&sid, Answer::Approve { maximum: Some(m("50")), municipality: None }, now),
            Err(RecError::MaximumOnFixedValue)
        );
        r.answer(&sid, Answer::Reject, now).unwrap();
        assert_eq!(r.status, RecStatus::Rejeitada);
        assert_eq!(r.to_json()["encerramento"]["rejeicao"]["codigo"], "AP13");
        assert_eq!(r.cancel(Party::UsuarioRecebedor, now), Err(RecError::Final("REJEITADA")));
        assert_eq!(
            r.solicit(57, recipient(), at("2026-11-27T12:00:00Z"), now).map(|_| ()),
            Err(RecError::NotAwaitingAuthorisation("REJEITADA"))
        );
    }

    #[test]
    fn a_solicitation_expires_at_its_time_not_before_and_takes_the_recurrence_with_it() {
        let now = at("2026-11-26T12:00:00Z");
        let expiry = at("2026-11-27T12:00:00Z");
        let mut r = rec(AmountRule::Fixed(m("30")));
        r.solicit(55, recipient(), expiry, now).unwrap();
        assert!(!r.expire(expiry - chrono::Duration::milliseconds(1)));
        assert_eq!(r.status, RecStatus::Criada);
        assert!(r.expire(expiry));
        assert_eq!((r.status, r.solicitations[0].status), (RecStatus::Expirada, SolicStatus::Expirada));
        assert!(!r.expire(expiry), "an expired one expires once");
    }

    #[test]
    fn the_expiry_is_in_the_future_and_at_most_thirty_days_ahead() {
        let now = at("2026-11-26T12:00:00Z");
        let mut r = rec(AmountRule::Fixed(m("30")));
        assert_eq!(r.solicit(55, recipient(), now, now).map(|_| ()), Err(RecError::ExpiryInThePast));
        let far = now + chrono::Duration::days(SOLICITATION_DAYS_MAX);
        assert_eq!(
            r.solicit(55, recipient(), far + chrono::Duration::seconds(1), now).map(|_| ()),
            Err(RecError::ExpiryTooFar)
        );
        assert!(r.solicit(55, recipient(), far, now).is_ok());
    }

    #[test]
    fn a_withdrawn_solicitation_leaves_the_recurrence_to_be_sent_again_up_to_the_limit() {
        let now = at("2026-11-26T12:00:00Z");
        let expiry = at("2026-11-27T12:00:00Z");
        let mut r = rec(AmountRule::Fixed(m("30")));
        for i in 0..SOLICITATIONS_PER_REC_MAX as u64 {
            let sid = r.solicit(100 + i, recipient(), expiry, now).unwrap().id.clone();
            r.withdraw(&sid, now).unwrap();
            assert_eq!(r.withdraw(&sid, now), Err(RecError::SolicitationClosed("CANCELADA")));
        }
        assert_eq!(r.status, RecStatus::Criada);
        assert_eq!(r.solicit(200, recipient(), expiry, now).map(|_| ()), Err(RecError::TooManySolicitations));
    }

    #[test]
    fn a_cancellation_names_its_side_and_ends_an_awaiting_solicitation() {
        let now = at("2026-11-26T12:00:00Z");
        let mut r = rec(AmountRule::Fixed(m("30")));
        r.solicit(55, recipient(), at("2026-11-27T12:00:00Z"), now).unwrap();
        r.cancel(Party::UsuarioPagador, now).unwrap();
        assert_eq!((r.status, r.solicitations[0].status), (RecStatus::Cancelada, SolicStatus::Cancelada));
        let c = &r.to_json()["encerramento"]["cancelamento"];
        assert_eq!(
            (c["solicitante"].as_str(), c["codigo"].as_str()),
            (Some("USUARIO_PAGADOR"), Some("SLDB"))
        );
        assert_eq!(r.deadline(), None);
        assert_eq!(r.cancel(Party::UsuarioRecebedor, now), Err(RecError::Final("CANCELADA")));
    }

    #[test]
    fn a_record_reads_back_as_it_was_written() {
        let now = at("2026-11-26T12:00:00Z");
        let mut r = rec(AmountRule::Variable { minimum: None });
        let sid = r.solicit(55, recipient(), at("2026-11-27T12:00:00Z"), now).unwrap().id.clone();
        r.answer(&sid, Answer::Approve { maximum: None, municipality: None }, now).unwrap();
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Recurrence>(&text).unwrap(), r);
        let bad = text
            .replace("\"2026-12-01\"", "\"2020-01-01\"")
            .replace("\"end\":null", "\"end\":\"2019-01-01\"");
        assert!(
            serde_json::from_str::<Recurrence>(&bad).is_err(),
            "a schedule that ends before it starts is refused"
        );
    }

    #[test]
    fn a_qr_approval_takes_the_journey_the_recurrence_was_made_for() {
        let now = at("2026-11-26T12:00:00Z");
        let payer = |maximum| PayerAuthorisation {
            document: "11144477735".into(),
            ispb: "00000000".into(),
            maximum,
            municipality: None,
            on_us: None,
        };
        let mut one = rec(AmountRule::Fixed(m("30")));
        assert_eq!(one.approve_by_qr(payer(None), true, now), Err(RecError::NoQrJourney));
        let loc =
            LocRec { account_id: 7, local_id: 3, location: "x/rec/1".into(), created_at: now, id_rec: None };
        let mut two = rec(AmountRule::Variable { minimum: None });
        two.loc = Some(loc.clone());
        assert!(two.to_json()["dadosQR"]["pixCopiaECola"].as_str().is_some_and(|c| c.contains("x/rec/1")));
        two.approve_by_qr(payer(Some(m("40"))), false, now).unwrap();
        assert_eq!((two.status, two.journey), (RecStatus::Aprovada, Some(Journey::Two)));
        assert!(two.to_json().get("dadosQR").is_none());
        assert_eq!(
            two.approve_by_qr(payer(None), false, now),
            Err(RecError::NotAwaitingAuthorisation("APROVADA"))
        );
        let mut three = rec(AmountRule::Fixed(m("30")));
        three.loc = Some(loc);
        three.first_txid = Some("t".repeat(26));
        assert!(three.to_json().get("dadosQR").is_none(), "journey 3's code is its cob's");
        assert_eq!(three.approve_by_qr(payer(None), false, now), Err(RecError::FirstChargeUnpaid));
        assert_eq!(three.approve_by_qr(payer(Some(m("1"))), true, now), Err(RecError::MaximumOnFixedValue));
        three.approve_by_qr(payer(None), true, now).unwrap();
        assert_eq!(
            three.to_json()["ativacao"],
            json!({"tipoJornada": "JORNADA_3", "dadosJornada": {"txid": "t".repeat(26)}})
        );
        one.solicit(9, recipient(), at("2026-11-27T12:00:00Z"), now).unwrap();
        one.first_txid = Some("t".repeat(26));
        assert_eq!(one.approve_by_qr(payer(None), true, now), Err(RecError::SolicitationAwaiting));
    }

    #[test]
    fn an_on_us_payer_speaks_only_for_itself_and_sees_only_what_it_was_asked() {
        let now = at("2026-11-26T12:00:00Z");
        let on_us =
            |account: u64| Recipient { on_us: Some(account), ispb: gateway_ispb().into(), ..recipient() };
        let mut r = rec(AmountRule::Variable { minimum: None });
        r.solicit(1, on_us(7), now + chrono::Duration::hours(1), now).unwrap();
        assert_eq!(r.on_us_payer(), Some(7));
        assert_eq!(r.check_payer_side(PayerSide::Account(7)), Ok(()));
        assert_eq!(r.check_payer_side(PayerSide::Account(8)), Err(RecError::NotFound));
        assert_eq!(r.check_payer_side(PayerSide::Sandbox), Err(RecError::PayerOnUs(7)));
        assert!(r.shown_to_payer(7) && !r.shown_to_payer(8));
        // Withdrawn and sent to the sandbox's payer, who approves: account 7 no longer sees it.
        let first = r.solicitations[0].id.clone();
        r.withdraw(&first, now).unwrap();
        r.solicit(2, recipient(), now + chrono::Duration::hours(1), now).unwrap();
        assert_eq!((r.on_us_payer(), r.check_payer_side(PayerSide::Sandbox)), (None, Ok(())));
        assert!(r.shown_to_payer(7), "asked, and nobody authorised it since");
        assert_eq!(
            r.check_payer_side(PayerSide::Account(7)),
            Err(RecError::SolicitationClosed("CANCELADA")),
            "it still sees it: told why nothing is asked of it (409), not that it does not exist"
        );
        let second = r.solicitations[1].id.clone();
        r.answer(&second, Answer::Approve { maximum: None, municipality: None }, now).unwrap();
        assert!(!r.shown_to_payer(7), "another payer's authorisation");
        assert_eq!(r.check_payer_side(PayerSide::Account(7)), Err(RecError::NotFound));
        // Approved on us, the authorisation carries the account.
        let mut r = rec(AmountRule::Fixed(m("30")));
        r.solicit(1, on_us(7), now + chrono::Duration::hours(1), now).unwrap();
        let id = r.solicitations[0].id.clone();
        r.answer(&id, Answer::Approve { maximum: None, municipality: None }, now).unwrap();
        assert_eq!((r.payer.as_ref().and_then(|p| p.on_us), r.on_us_payer()), (Some(7), Some(7)));
        assert!(r.shown_to_payer(7));
        // Its own refusal: a second answer, or a cancel, is told the solicitation is closed.
        let mut r = rec(AmountRule::Variable { minimum: None });
        r.solicit(1, on_us(7), now + chrono::Duration::hours(1), now).unwrap();
        let id = r.solicitations[0].id.clone();
        r.answer(&id, Answer::Reject, now).unwrap();
        assert_eq!(r.check_payer_side(PayerSide::Account(7)), Err(RecError::SolicitationClosed("REJEITADA")));
        assert_eq!(r.check_payer_side(PayerSide::Account(8)), Err(RecError::NotFound));
    }

    #[test]
    fn a_revision_changes_the_terms_only_before_authorisation_and_the_name_until_the_end() {
        let now = at("2026-11-26T12:00:00Z");
        let today = NaiveDate::from_ymd_opt(2026, 11, 26).unwrap();
        let day = |d: u32| NaiveDate::from_ymd_opt(2026, 12, d).unwrap();
        let mut r = rec(AmountRule::Variable { minimum: None });
        let loc = |id: u64, id_rec: Option<&str>| LocRec {
            account_id: 7,
            local_id: id,
            location: format!("qr.example/rec/{id}"),
            created_at: now,
            id_rec: id_rec.map(str::to_owned),
        };
        let revision = |start: Option<NaiveDate>, l: Option<LocRec>| Revision {
            start,
            loc_id: l.as_ref().map(|l| l.local_id),
            loc: l,
            ..Revision::default()
        };
        assert_eq!(
            r.revise(revision(Some(today - chrono::Duration::days(1)), None), today, now),
            Err(RecError::StartsBeforeToday)
        );
        assert_eq!(
            r.revise(revision(None, Some(loc(40, Some("RRother")))), today, now),
            Err(RecError::LocationTaken("RRother".into()))
        );
        let missing = Revision { loc_id: Some(41), ..Revision::default() };
        assert_eq!(r.revise(missing, today, now), Err(RecError::LocationNotFound));
        assert_eq!(r.revise(revision(Some(day(5)), Some(loc(40, None))), today, now), Ok(None));
        assert_eq!(
            (r.schedule.start(), r.loc.as_ref().and_then(|l| l.id_rec.clone())),
            (day(5), Some(r.id.clone()))
        );
        // Another location: the first is given back unlinked.
        let unlinked = r.revise(revision(None, Some(loc(42, None))), today, now).unwrap();
        assert_eq!(unlinked.map(|l| (l.local_id, l.id_rec)), Some((40, None)));
        // A recurrence with an end: not after it.
        let mut ending = rec(AmountRule::Variable { minimum: None });
        ending.schedule = Schedule::new(day(1), Periodicity::Monthly, Some(day(10))).unwrap();
        assert_eq!(ending.revise(revision(Some(day(11)), None), today, now), Err(RecError::StartsAfterEnd));
        // Sent for authorisation, then authorised: the terms no longer move, the name does.
        r.solicit(1, recipient(), now + chrono::Duration::hours(1), now).unwrap();
        assert_eq!(r.revise(revision(Some(day(6)), None), today, now), Err(RecError::SolicitationAwaiting));
        let sid = r.solicitations[0].id.clone();
        r.answer(&sid, Answer::Approve { maximum: None, municipality: None }, now).unwrap();
        assert_eq!(
            r.revise(revision(Some(day(6)), None), today, now),
            Err(RecError::NotAwaitingAuthorisation("APROVADA"))
        );
        let renamed = Revision { debtor_name: Some("Ana Maria".into()), ..Revision::default() };
        assert_eq!(r.revise(renamed.clone(), today, now), Ok(None));
        assert_eq!(r.to_json()["vinculo"]["devedor"]["nome"], "Ana Maria");
        r.cancel(Party::UsuarioRecebedor, now).unwrap();
        assert_eq!(r.revise(renamed, today, now), Err(RecError::Final("CANCELADA")));
    }

    #[test]
    fn a_refusal_written_before_the_api_pixs_codes_shows_ap13() {
        let mut r = rec(AmountRule::Variable { minimum: None });
        r.status = RecStatus::Rejeitada;
        r.closing =
            Some(Closing::Rejected { code: "RECUSADA_PELO_PAGADOR".into(), description: "no".into() });
        assert_eq!(r.to_json()["encerramento"]["rejeicao"]["codigo"], "AP13");
    }
}
