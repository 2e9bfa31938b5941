//! Transactions: the record every operation leaves, its states and their legal moves.
//!
//! A debit is PENDING from acceptance (its value and fee held in `blocked`) until it is
//! CONFIRMED or ERROR; a credit is recorded CONFIRMED. Final states never change
//! ([`Transaction::settle`] refuses them), which is what makes a repeated settlement from
//! the bank a no-op.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::ids::AccountId;
use super::money::Money;
use super::pix_key::DirectoryKeyType;
use super::scenario::PayoutScenario;

/// The ISPB this gateway uses in the ids it creates unless configured (the simulator's).
pub const GATEWAY_ISPB_DEFAULT: &str = "99999999";

/// This gateway's ISPB: the participant code its end-to-end ids, return ids and recurrence
/// ids carry, and the institution it shows for itself. It is configuration, fixed once at
/// start-up before any id is made (`--spi-ispb` on the SPI rail; the simulator's
/// [`GATEWAY_ISPB_DEFAULT`] otherwise), so every rule that makes an id stays a function of
/// its inputs within a process.
pub fn gateway_ispb() -> &'static str {
    GATEWAY_ISPB.get().map_or(GATEWAY_ISPB_DEFAULT, String::as_str)
}

static GATEWAY_ISPB: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Fixes this gateway's ISPB for the process (start-up only). A second, different value is
/// refused: ids already made carry the first.
pub fn set_gateway_ispb(ispb: &str) -> Result<(), String> {
    let valid = ispb.len() == 8 && ispb.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase());
    if !valid {
        return Err(format!("{ispb:?} is not an ISPB (eight digits or upper-case letters)"));
    }
    match GATEWAY_ISPB.set(ispb.to_owned()) {
        Ok(()) => Ok(()),
        Err(_) if gateway_ispb() == ispb => Ok(()),
        Err(_) => Err(format!("the ISPB is already {}", gateway_ispb())),
    }
}
/// The ISPB of the simulated payers' bank (received PIX, paid charges).
pub const PAYER_ISPB: &str = "00000000";
/// The simulated payer of a received PIX or a paid charge when the request names none and
/// the charge names no debtor: every received payment names a payer with a document.
pub const SANDBOX_PAYER_NAME: &str = "Sandbox Payer";
/// The simulated payer's CPF (valid check digits).
pub const SANDBOX_PAYER_DOCUMENT: &str = "11144477735";

/// Characters of an `externalId`.
pub const EXTERNAL_ID_LEN_MAX: usize = 100;
/// Characters of a description.
pub const DESCRIPTION_LEN_MAX: usize = 140;
/// Characters of a counterpart name.
pub const COUNTERPART_NAME_LEN_MAX: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TxKind {
    CashOut,
    QrCashOut,
    DictPix,
    PixIn,
    /// A charge (`POST /api/pix/cash-in`): PENDING until paid or expired.
    CashIn,
    /// A refund of a received PIX (family A refund-in, family B devolução): a debit.
    RefundIn,
    /// A counterparty returns part of a payment we made: a credit.
    RefundOut,
    /// Money the operator put into the account (funding, a correction): a credit.
    OperatorCredit,
    /// Money the operator took out of the account (a correction): a debit.
    OperatorDebit,
}

impl TxKind {
    /// Every kind.
    pub const ALL: [TxKind; 9] = [
        TxKind::CashOut,
        TxKind::QrCashOut,
        TxKind::DictPix,
        TxKind::PixIn,
        TxKind::CashIn,
        TxKind::RefundIn,
        TxKind::RefundOut,
        TxKind::OperatorCredit,
        TxKind::OperatorDebit,
    ];

    /// The name it is stored and shown under (`CASH_OUT`, `PIX_IN`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TxKind::CashOut => "CASH_OUT",
            TxKind::QrCashOut => "QR_CASH_OUT",
            TxKind::DictPix => "DICT_PIX",
            TxKind::PixIn => "PIX_IN",
            TxKind::CashIn => "CASH_IN",
            TxKind::RefundIn => "REFUND_IN",
            TxKind::RefundOut => "REFUND_OUT",
            TxKind::OperatorCredit => "OPERATOR_CREDIT",
            TxKind::OperatorDebit => "OPERATOR_DEBIT",
        }
    }

    pub fn is_debit(self) -> bool {
        !matches!(self, TxKind::PixIn | TxKind::CashIn | TxKind::RefundOut | TxKind::OperatorCredit)
    }
}

/// Which family asked for a refund (its webhook and statuses differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Family {
    A,
    B,
}

/// `natureza` of a family B refund.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Natureza {
    Original,
    Retirada,
    MedOperacional,
    MedFraude,
}

impl Natureza {
    pub fn as_str(self) -> &'static str {
        match self {
            Natureza::Original => "ORIGINAL",
            Natureza::Retirada => "RETIRADA",
            Natureza::MedOperacional => "MED_OPERACIONAL",
            Natureza::MedFraude => "MED_FRAUDE",
        }
    }
}

/// What a refund (in or out) keeps beyond the common fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefundDetails {
    pub original_local_id: u64,
    pub original_end_to_end_id: String,
    /// The refund-in externalId or the devolução id (one namespace).
    pub refund_id: Option<String>,
    /// The return id (`D…`, 32 characters).
    pub rtr_id: String,
    pub natureza: Natureza,
    pub reason: Option<String>,
    pub family: Family,
}

/// Bounds of a charge's `expirationTime`, in seconds (interface.md "Limits").
pub const CHARGE_EXPIRATION_SECONDS_MIN: u64 = 30;
pub const CHARGE_EXPIRATION_SECONDS_MAX: u64 = 604_800;
pub const CHARGE_EXPIRATION_SECONDS_DEFAULT: u64 = 86_400;
/// Keys of a charge's `additionalInfo`.
pub const ADDITIONAL_INFO_KEYS_MAX: usize = 10;

/// What a charge keeps beyond the common fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChargeDetails {
    pub correlation_id: Uuid,
    /// The charge's txid: a family A charge's own (25 hex characters, also its code's
    /// reference) or a cob's, chosen by the client. The code carries [`code_reference`].
    pub txid: String,
    /// The BR Code to pay (copy and paste).
    pub pix_code: String,
    pub expires_at: DateTime<Utc>,
    pub additional_info: std::collections::BTreeMap<String, String>,
    /// Present for an immediate charge of family B (`PUT /cob/{txid}`).
    #[serde(default)]
    pub cob: Option<CobDetails>,
    #[serde(default)]
    pub splits: Vec<super::splits::Split>,
    /// The numeric ids of the transfers its splits became, once paid.
    #[serde(default)]
    pub split_transactions: Vec<u64>,
}

/// What a charge's BR Code names it by, in the txid field (EMV 62/05), which holds at most
/// [`super::brcode::TXID_LEN_MAX`] characters. A txid that fits (a family A charge's, 25
/// lower-case hex characters) is written as it is. A cob's txid (26 to 35 characters) does
/// not fit, and cutting it would give two cobs whose txids share their first 25 characters
/// the same code; so a cob's code carries `COB` and its local id in 20 digits instead (23
/// characters, upper case, never a family A txid nor a cob's, whose shortest is 26). Local
/// ids are unique, so the reference is too, and it is found without an index.
pub fn code_reference(txid: &str, local_id: u64) -> String {
    if txid.len() <= super::brcode::TXID_LEN_MAX {
        txid.to_owned()
    } else {
        format!("{COB_REFERENCE_PREFIX}{local_id:020}")
    }
}

/// The prefix of a cob's [`code_reference`].
pub const COB_REFERENCE_PREFIX: &str = "COB";

/// What a BR Code's txid field names: a transaction by local id, or a charge by its txid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeReference<'a> {
    Local(u64),
    Txid(&'a str),
}

/// Reads a BR Code's txid field back as [`code_reference`] wrote it.
pub fn parse_code_reference(text: &str) -> CodeReference<'_> {
    let local = text
        .strip_prefix(COB_REFERENCE_PREFIX)
        .filter(|d| d.len() == 20 && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse().ok());
    match local {
        Some(l) => CodeReference::Local(l),
        None => CodeReference::Txid(text),
    }
}

/// Cob txid: 26 to 35 alphanumeric characters (interface.md "Limits").
pub const COB_TXID_LEN_MIN: usize = 26;
pub const COB_TXID_LEN_MAX: usize = 35;

/// What a `cob` keeps of its request, to answer it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CobDetails {
    pub expiracao: u32,
    pub modalidade_alteracao: u8,
    pub chave: String,
    pub solicitacao_pagador: Option<String>,
    pub info_adicionais: Vec<(String, String)>,
    /// `cpf` or `cnpj` and `nome` (and a cobv's address and e-mail), as sent.
    pub devedor: Option<serde_json::Value>,
    /// Present for a charge with a due date (`PUT /cobv/{txid}`).
    #[serde(default)]
    pub vencimento: Option<CobvDetails>,
}

/// What a `cobv` keeps beyond a cob's fields: its price terms and how often they were
/// revised. Its `expires_at` is [`super::cobv::Terms::closes_at`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CobvDetails {
    /// 0 at creation, one more at each revision (`PATCH /cobv/{txid}`).
    pub revisao: u32,
    pub terms: super::cobv::Terms,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TxStatus {
    Pending,
    Confirmed,
    Error,
}

impl TxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TxStatus::Pending => "PENDING",
            TxStatus::Confirmed => "CONFIRMED",
            TxStatus::Error => "ERROR",
        }
    }
}

/// Why a payment ended in ERROR (interface.md "Rejection reasons of a settled payment", plus
/// `EXPIRED` for a `/dict/pix` transfer queued past its expiration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    TaxIdMismatch,
    InvalidTaxId,
    BlockedAccount,
    AccountClosed,
    OrderRejected,
    PaymentExpired,
    SettlementTimeout,
    Expired,
    /// A charge the receiver cancelled (`cob` REMOVIDA_PELO_USUARIO_RECEBEDOR).
    Cancelled,
    /// A split the account could not cover (its charge's fee left too little).
    InsufficientBalance,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::TaxIdMismatch => "TAX_ID_MISMATCH",
            ErrorCode::InvalidTaxId => "INVALID_TAX_ID",
            ErrorCode::BlockedAccount => "BLOCKED_ACCOUNT",
            ErrorCode::AccountClosed => "ACCOUNT_CLOSED",
            ErrorCode::OrderRejected => "ORDER_REJECTED",
            ErrorCode::PaymentExpired => "PAYMENT_EXPIRED",
            ErrorCode::SettlementTimeout => "SETTLEMENT_TIMEOUT",
            ErrorCode::Expired => "EXPIRED",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::InsufficientBalance => "INSUFFICIENT_BALANCE",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            ErrorCode::TaxIdMismatch => "The document does not match the key holder.",
            ErrorCode::InvalidTaxId => "The CPF or CNPJ is invalid.",
            ErrorCode::BlockedAccount => "The destination account is blocked.",
            ErrorCode::AccountClosed => "The destination account is closed.",
            ErrorCode::OrderRejected => "The destination bank rejected the payment.",
            ErrorCode::PaymentExpired => "The payment expired before processing; send it again.",
            ErrorCode::SettlementTimeout => "The destination bank did not answer in time; send it again.",
            ErrorCode::Expired => "It expired.",
            ErrorCode::Cancelled => "The receiver cancelled the charge.",
            ErrorCode::InsufficientBalance => "The account could not cover the split.",
        }
    }
}

/// How the rail ended a pending debit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RailOutcome {
    /// Settled, with the payee's institution when the rail names it; or refused, and why in
    /// the interface's terms.
    pub result: Result<Option<BankInfo>, ErrorCode>,
    /// The rail's own code for a refusal (a reason of the SPI's catalogue, such as `AC03`),
    /// kept in the record and the webhook's message for support.
    pub reason: Option<String>,
}

impl RailOutcome {
    pub fn settled(bank: Option<BankInfo>) -> RailOutcome {
        RailOutcome { result: Ok(bank), reason: None }
    }

    pub fn refused(code: ErrorCode) -> RailOutcome {
        RailOutcome { result: Err(code), reason: None }
    }
}

/// What a payment made on the SPI rail keeps beyond the common fields: what its messages
/// need that the client did not give, and what the SPI answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RailDetails {
    /// How the payment was started (the catalogue's `LclInstrm`: MANU, DICT, QRES, QRDN...).
    pub instrument: Option<String>,
    /// The payee's CPF or CNPJ as the DICT gave it (the message's `Cdtr`).
    pub creditor_document: Option<String>,
    /// The payee's account type as the DICT gave it (CACC, TRAN, SVGS, SLRY).
    pub creditor_account_type: Option<String>,
    /// The rail's reason for a refusal (a catalogue code).
    pub reason: Option<String>,
    /// Why the risk rule flagged the payment (domain::risk): the payee's key or owner carries
    /// fraud signals in the DICT. The payment went; the client reads the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<String>,
}

/// A bank as the directory names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BankInfo {
    pub ispb: String,
    pub name: String,
    pub code: String,
    pub branch: Option<String>,
    pub account_number: Option<String>,
}

/// The other side of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Counterpart {
    pub name: String,
    /// Digits only.
    pub document: Option<String>,
    pub key: Option<String>,
    pub key_type: Option<DirectoryKeyType>,
    pub bank: Option<BankInfo>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Priority {
    High,
    Norm,
}

/// What a `/dict/pix` transfer keeps beyond the common fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DictDetails {
    pub idempotency_key: String,
    pub request_hash: String,
    pub priority: Priority,
    pub expiration_seconds: u32,
    pub currency: String,
    /// The end-to-end id answered at creation; the real one comes with settlement.
    pub provisional_end_to_end_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transaction {
    pub local_id: u64,
    pub transaction_id: Uuid,
    pub account_id: AccountId,
    pub kind: TxKind,
    pub status: TxStatus,
    pub error_code: Option<ErrorCode>,
    pub value: Money,
    pub fee: Money,
    pub external_id: Option<String>,
    pub end_to_end_id: String,
    pub description: Option<String>,
    pub counterpart: Counterpart,
    pub created_at: DateTime<Utc>,
    pub processed_at: Option<DateTime<Utc>>,
    pub scenario: Option<PayoutScenario>,
    pub dict: Option<DictDetails>,
    /// The txid of the BR Code a QR cash-out paid, or of the recurring charge (`cobr`) a
    /// received PIX settled.
    pub qr_txid: Option<String>,
    #[serde(default)]
    pub charge: Option<ChargeDetails>,
    #[serde(default)]
    pub refund: Option<RefundDetails>,
    /// On a received PIX: the sum of its refunds, pending ones included. On a payment we
    /// made: the sum the counterparty returned.
    #[serde(default)]
    pub refunded: Money,
    /// A split's transfer: the numeric id of the charge it comes from.
    #[serde(default)]
    pub split_of: Option<u64>,
    /// A scheduled split waits until then to go to the bank.
    #[serde(default)]
    pub scheduled_for: Option<DateTime<Utc>>,
    /// Present for a payment made on the SPI rail.
    #[serde(default)]
    pub rail: Option<RailDetails>,
    /// Who made an operator's move: the name of the admin token it came with. Operators
    /// read it; a client's views never show it (their counterpart is the operator).
    #[serde(default)]
    pub operator: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("transaction {0} is already final")]
pub struct AlreadyFinal(pub u64);

impl Transaction {
    /// A PENDING transaction with its identity, kind, amount and time, and nothing else:
    /// callers set what differs with struct update syntax (`Transaction { fee, ..new }`).
    pub fn new(
        local_id: u64,
        transaction_id: Uuid,
        account_id: AccountId,
        kind: TxKind,
        value: Money,
        created_at: DateTime<Utc>,
    ) -> Transaction {
        Transaction {
            local_id,
            transaction_id,
            account_id,
            kind,
            status: TxStatus::Pending,
            error_code: None,
            value,
            fee: Money::ZERO,
            external_id: None,
            end_to_end_id: String::new(),
            description: None,
            counterpart: Counterpart::default(),
            created_at,
            processed_at: None,
            scenario: None,
            dict: None,
            qr_txid: None,
            charge: None,
            refund: None,
            refunded: Money::ZERO,
            split_of: None,
            scheduled_for: None,
            rail: None,
            operator: None,
        }
    }

    pub fn is_final(&self) -> bool {
        self.status != TxStatus::Pending
    }

    /// Why `outcome` cannot be this payout's, when it contradicts the final status already
    /// recorded (a settlement of a payout recorded ERROR, a refusal of one recorded
    /// CONFIRMED); `None` when it agrees or the payout is still pending. A final status is
    /// never changed by a later answer: the rail keeps it for an operator.
    pub fn contradicted_by(&self, outcome: &RailOutcome) -> Option<String> {
        match (self.status, &outcome.result) {
            (TxStatus::Error, Ok(_)) => Some(format!(
                "a settlement of payout {} recorded ERROR ({})",
                self.end_to_end_id,
                self.error_code.map_or("no code", ErrorCode::as_str)
            )),
            (TxStatus::Confirmed, Err(code)) => Some(format!(
                "a refusal ({}{}) of payout {} recorded CONFIRMED",
                code.as_str(),
                outcome.reason.as_deref().map(|r| format!(", {r}")).unwrap_or_default(),
                self.end_to_end_id
            )),
            _ => None,
        }
    }

    /// Whether this is a PIX the account received: a payment in that settled (a PIX to the
    /// account's key, or a charge that was paid).
    pub fn is_received(&self) -> bool {
        matches!(self.kind, TxKind::PixIn | TxKind::CashIn) && self.status == TxStatus::Confirmed
    }

    /// When the money of this transaction moved, as every read of it shows it: a charge's
    /// payment once it is paid (a charge is created long before a PIX pays it), and
    /// otherwise the moment the transaction was made.
    pub fn moved_at(&self) -> DateTime<Utc> {
        match (self.kind, self.status) {
            (TxKind::CashIn, TxStatus::Confirmed) => self.processed_at.unwrap_or(self.created_at),
            _ => self.created_at,
        }
    }

    /// The due-date terms, when this is a charge with a due date (a cobv).
    pub fn cobv(&self) -> Option<&CobvDetails> {
        self.charge.as_ref()?.cob.as_ref()?.vencimento.as_ref()
    }

    /// Whether this is a family B charge: an immediate one (`cob`) when `due_date` is false,
    /// one with a due date (`cobv`) when it is true.
    pub fn is_cob(&self, due_date: bool) -> bool {
        self.charge.as_ref().and_then(|c| c.cob.as_ref()).is_some_and(|c| c.vencimento.is_some() == due_date)
    }

    /// Moves a PENDING debit to its final state.
    pub fn settle(&mut self, result: Result<(), ErrorCode>, at: DateTime<Utc>) -> Result<(), AlreadyFinal> {
        if self.is_final() {
            return Err(AlreadyFinal(self.local_id));
        }
        match result {
            Ok(()) => self.status = TxStatus::Confirmed,
            Err(code) => {
                self.status = TxStatus::Error;
                self.error_code = Some(code);
            }
        }
        self.processed_at = Some(at);
        Ok(())
    }

    /// The `errorMessage` clients see: the interface's text of the error code, and the
    /// rail's own reason when it gave one (a catalogue code support can look up).
    pub fn error_message(&self) -> Option<String> {
        let code = self.error_code?;
        Some(match self.rail.as_ref().and_then(|r| r.reason.as_deref()) {
            Some(reason) => format!("{} Rail reason: {reason}.", code.message()),
            None => code.message().to_owned(),
        })
    }

    /// What the account pays in all: value plus fee for a debit.
    pub fn total_debit(&self) -> Option<Money> {
        self.value.checked_add(self.fee)
    }

    /// The `finalAmount` clients see (interface.md "Balances, fees and limits"): value + fee for a debit, value − fee
    /// (never below zero) for a credit.
    pub fn final_amount(&self) -> Option<Money> {
        if self.kind.is_debit() {
            self.total_debit()
        } else {
            Some(self.value.checked_sub(self.fee).unwrap_or(Money::ZERO))
        }
    }
}

/// An end-to-end id: `E` (or `D` for a refund return) + the 8-digit ISPB + `yyyyMMddHHmm`
/// in UTC + 11 alphanumeric characters = 32 characters. `entropy` supplies the last part.
pub fn end_to_end_id(prefix: char, ispb: &str, at: DateTime<Utc>, entropy: &[u8; 16]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz";
    let tail: String =
        entropy.iter().take(11).map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char).collect();
    format!("{prefix}{ispb:0>8.8}{}{tail}", at.format("%Y%m%d%H%M"))
}

/// Which end-to-end id of its transaction an own id is (the letter after its minute).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum E2eVariant {
    /// Made with the transaction.
    Created,
    /// A `/dict/pix` transfer's settled id (its provisional one is `Created`).
    Settled,
}

impl E2eVariant {
    fn letter(self) -> u8 {
        match self {
            E2eVariant::Created => b'A',
            E2eVariant::Settled => b'B',
        }
    }
}

pub(crate) const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Base-62 digits of the local id in an own end-to-end id.
const OWN_DIGITS: usize = 10;
/// The largest local id an own end-to-end id carries: 62^10 - 1.
pub const E2E_LOCAL_ID_MAX: u64 = 839_299_365_868_340_223;

/// An end-to-end id this gateway makes for its own transaction: `prefix` (`E`, or `D` for a
/// return), our ISPB, the minute, the variant letter and the local id in 10 base-62 digits
/// (32 characters), so the transaction is found by it without an index. The last 11
/// characters are where the PIX format puts the institution's own sequence. `None` when the
/// local id does not fit (never, below [`E2E_LOCAL_ID_MAX`]).
pub fn own_end_to_end_id(
    prefix: char,
    at: DateTime<Utc>,
    local_id: u64,
    variant: E2eVariant,
) -> Option<String> {
    if local_id > E2E_LOCAL_ID_MAX {
        return None;
    }
    let mut digits = [b'0'; OWN_DIGITS];
    let mut n = local_id;
    for d in digits.iter_mut().rev() {
        *d = BASE62[(n % 62) as usize];
        n /= 62;
    }
    let tail: String = std::iter::once(variant.letter()).chain(digits).map(char::from).collect();
    Some(format!("{prefix}{}{}{tail}", gateway_ispb(), at.format("%Y%m%d%H%M")))
}

/// [`own_end_to_end_id`], or for a local id too large to carry (never in practice) an id with
/// the tail drawn from `entropy`, which storage then indexes.
pub fn own_or_random_end_to_end_id(
    prefix: char,
    at: DateTime<Utc>,
    local_id: u64,
    variant: E2eVariant,
    entropy: &[u8; 16],
) -> String {
    own_end_to_end_id(prefix, at, local_id, variant)
        .unwrap_or_else(|| end_to_end_id(prefix, gateway_ispb(), at, entropy))
}

/// The local id an own end-to-end id carries, if the id has that form. Ids made elsewhere
/// may look like one: the caller checks that the transaction found has this id.
pub fn local_id_in_end_to_end(e2e: &str) -> Option<u64> {
    let b = e2e.as_bytes();
    if b.len() != 32 || &b[1..9] != gateway_ispb().as_bytes() || !matches!(b[21], b'A' | b'B') {
        return None;
    }
    b[22..].iter().try_fold(0u64, |n, c| {
        let d = BASE62.iter().position(|x| x == c)? as u64;
        n.checked_mul(62)?.checked_add(d)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_contradicts_a_final_status_of_the_other_kind_and_nothing_else() {
        let at = DateTime::parse_from_rfc3339("2026-11-28T10:00:00Z").unwrap().with_timezone(&Utc);
        let id = AccountId::new(1).unwrap();
        let money = Money::parse("5.00").unwrap();
        let pending = Transaction {
            end_to_end_id: "E1".into(),
            ..Transaction::new(1, Uuid::nil(), id, TxKind::CashOut, money, at)
        };
        let settled = RailOutcome::settled(None);
        let refused = RailOutcome { result: Err(ErrorCode::BlockedAccount), reason: Some("AC06".into()) };
        assert_eq!(pending.contradicted_by(&settled), None, "a pending payout takes either");
        assert_eq!(pending.contradicted_by(&refused), None);
        let confirmed = Transaction { status: TxStatus::Confirmed, ..pending.clone() };
        assert_eq!(confirmed.contradicted_by(&settled), None, "the same answer again");
        let why = confirmed.contradicted_by(&refused).unwrap();
        assert!(why.contains("AC06") && why.contains("CONFIRMED") && why.contains("E1"), "{why}");
        let failed = Transaction {
            status: TxStatus::Error,
            error_code: Some(ErrorCode::SettlementTimeout),
            ..pending
        };
        assert_eq!(failed.contradicted_by(&refused), None);
        let why = failed.contradicted_by(&settled).unwrap();
        assert!(why.contains("ERROR") && why.contains(ErrorCode::SettlementTimeout.as_str()), "{why}");
    }

    #[test]
    fn a_code_reference_fits_the_field_is_unique_by_local_id_and_reads_back() {
        let hex = "0123456789abcdef012345678";
        assert_eq!(code_reference(hex, 7), hex, "a txid that fits is itself");
        assert_eq!(parse_code_reference(hex), CodeReference::Txid(hex));
        let a = "a".repeat(25) + "X";
        let b = "a".repeat(25) + "Y";
        let (ra, rb) = (code_reference(&a, 1), code_reference(&b, 2));
        assert_ne!(ra, rb, "txids sharing 25 characters get different references");
        for (r, local) in [(&ra, 1), (&rb, 2)] {
            assert!(r.len() <= super::super::brcode::TXID_LEN_MAX);
            assert_eq!(parse_code_reference(r), CodeReference::Local(local));
        }
        let max = code_reference(&"z".repeat(COB_TXID_LEN_MAX), u64::MAX);
        assert_eq!(max.len(), 23);
        assert_eq!(parse_code_reference(&max), CodeReference::Local(u64::MAX));
        // Near misses are txids, not local ids.
        for other in ["COB1", "COB0000000000000000000x", "COB99999999999999999999", "cob00000000000000000001"]
        {
            assert_eq!(parse_code_reference(other), CodeReference::Txid(other), "{other}");
        }
    }

    #[test]
    fn an_own_end_to_end_id_has_the_documented_form_and_carries_its_local_id() {
        let at = DateTime::parse_from_rfc3339("2026-11-22T10:05:00Z").unwrap().with_timezone(&Utc);
        for local in [0, 1, 61, 62, 123_456_789, E2E_LOCAL_ID_MAX] {
            for variant in [E2eVariant::Created, E2eVariant::Settled] {
                let id = own_end_to_end_id('E', at, local, variant).unwrap();
                assert_eq!(id.len(), 32, "{id}");
                assert!(id.starts_with("E99999999202611221005"), "{id}");
                assert!(id.chars().all(|c| c.is_ascii_alphanumeric()));
                assert_eq!(local_id_in_end_to_end(&id), Some(local), "{id}");
            }
        }
        let created = own_end_to_end_id('D', at, 5, E2eVariant::Created).unwrap();
        let settled = own_end_to_end_id('D', at, 5, E2eVariant::Settled).unwrap();
        assert_ne!(created, settled, "a transfer's settled id differs from its provisional one");
        assert_eq!(own_end_to_end_id('E', at, E2E_LOCAL_ID_MAX + 1, E2eVariant::Created), None);
        // Ids made elsewhere carry nothing.
        assert_eq!(local_id_in_end_to_end("E00000000202611221005A000000000a"), None);
        assert_eq!(local_id_in_end_to_end(&end_to_end_id('E', PAYER_ISPB, at, &[9; 16])), None);
        assert_eq!(local_id_in_end_to_end("short"), None);
    }

    #[test]
    fn end_to_end_ids_have_32_characters_in_the_documented_form() {
        let at = DateTime::parse_from_rfc3339("2026-11-22T10:05:00Z").unwrap().with_timezone(&Utc);
        let id = end_to_end_id('E', "12345678", at, &[7u8; 16]);
        assert_eq!(id.len(), 32);
        assert!(id.starts_with("E12345678202611221005"));
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(end_to_end_id('D', "1", at, &[0u8; 16]).len(), 32);
    }

    #[test]
    fn a_kind_is_named_as_it_is_serialized() {
        for kind in TxKind::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }

    #[test]
    fn a_final_transaction_does_not_settle_again() {
        let mut t = Transaction {
            ..Transaction::new(
                1,
                Uuid::nil(),
                AccountId::new(1).unwrap(),
                TxKind::CashOut,
                Money::ZERO,
                Utc::now(),
            )
        };
        assert!(t.settle(Err(ErrorCode::OrderRejected), Utc::now()).is_ok());
        assert_eq!(t.error_code, Some(ErrorCode::OrderRejected));
        assert_eq!(t.settle(Ok(()), Utc::now()), Err(AlreadyFinal(1)));
        assert_eq!(t.status, TxStatus::Error);
    }
}
