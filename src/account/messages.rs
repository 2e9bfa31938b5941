//! The messages an account actor answers.

use actix::Message;

use crate::domain::account::AccountSettings;
use crate::domain::ledger::{Balance, Rejection};
use crate::domain::money::Money;
use crate::domain::pix_key::DirectoryKey;
use crate::domain::scenario::PayoutScenario;
use crate::domain::transaction::{Counterpart, Priority, Transaction, TxKind};

/// The `/dict/pix` parts of a payment.
#[derive(Debug, Clone)]
pub struct DictRequest {
    pub idempotency_key: String,
    pub request_hash: String,
    pub priority: Priority,
    pub expiration_seconds: u32,
    pub currency: String,
}

/// A payment out of the account (cash-out, QR cash-out, `/dict/pix`).
#[derive(Debug, Clone)]
pub struct PayRequest {
    pub kind: TxKind,
    pub external_id: Option<String>,
    pub value: Money,
    pub description: Option<String>,
    pub counterpart: Counterpart,
    /// The key the bank settles to (`None`: unknown, the bank rejects it).
    pub settle_key: Option<DirectoryKey>,
    pub scenario: Option<PayoutScenario>,
    /// checkPixKeyWithDocument found another holder: record ERROR / TAX_ID_MISMATCH at
    /// once and move no money.
    pub document_mismatch: bool,
    pub dict: Option<DictRequest>,
    pub qr_txid: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PayOutcome {
    pub tx: Transaction,
    /// The same `/dict/pix` request was seen before; nothing moved.
    pub replayed: bool,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum PayError {
    #[error("rejected: {0:?}")]
    Rejected(Rejection),
    /// A charge's expiration is below the provider's minimum (seconds).
    #[error("expiration below the provider minimum of {0} s")]
    BelowProviderMinimum(u32),
    /// The charge is not open: paid, or expired (its status).
    #[error("the charge is not payable: {0}")]
    NotPayable(&'static str),
    /// A cob with this txid exists (409).
    #[error("txid already exists")]
    TxidTaken,
    /// A refund (or a return) the rules refuse.
    #[error("refund refused: {0:?}")]
    Refund(crate::domain::refunds::RefundRejection),
    /// A MED the rules refuse.
    #[error("MED refused: {0}")]
    Med(crate::domain::med::MedRejection),
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("internal: {0}")]
    Internal(String),
}

#[derive(Message, Clone)]
#[rtype(result = "Result<PayOutcome, PayError>")]
pub struct Pay(pub PayRequest);

/// A received PIX that funds the account (sandbox).
#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, PayError>")]
pub struct PixIn {
    pub value: Money,
    pub payer_name: String,
    pub payer_document: Option<String>,
}

/// The balance, once everything the actor applied so far is durable.
#[derive(Message, Clone)]
#[rtype(result = "Result<Balance, PayError>")]
pub struct GetBalance;

/// Time moved: expire what is due (sent after the test clock moves; actors also check
/// every second on their own). Answers once the expirations are durable.
#[derive(Message)]
#[rtype(result = "Result<(), PayError>")]
pub struct Tick;

/// The operator changed the account's settings.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SettingsChanged(pub AccountSettings);

/// A charge to create (`POST /api/pix/cash-in`).
#[derive(Debug, Clone)]
pub struct ChargeRequest {
    /// Family A charges have one; a cob has its txid instead.
    pub external_id: Option<String>,
    /// A cob's txid, chosen by the client (unique per account).
    pub txid: Option<String>,
    pub cob: Option<crate::domain::transaction::CobDetails>,
    pub value: Money,
    pub description: String,
    pub payer_name: String,
    pub payer_document: Option<String>,
    pub expiration_seconds: u32,
    pub additional_info: std::collections::BTreeMap<String, String>,
    pub scenario: Option<crate::domain::scenario::ChargeScenario>,
    pub splits: Vec<crate::domain::splits::Split>,
}

#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, PayError>")]
pub struct CreateCharge(pub ChargeRequest);

/// A payer pays an open charge (sandbox).
#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, PayError>")]
pub struct PayCharge {
    pub local_id: u64,
}

/// A refund of a received PIX, from either family.
#[derive(Debug, Clone)]
pub struct RefundRequest {
    pub original_local_id: u64,
    pub value: Money,
    /// The refund-in externalId or the devolução id (one namespace).
    pub refund_id: Option<String>,
    pub reason: Option<String>,
    pub natureza: crate::domain::transaction::Natureza,
    pub family: crate::domain::transaction::Family,
    pub scenario: Option<PayoutScenario>,
}

/// Answers the refund and whether it is a replay of an earlier one with the same id.
#[derive(Message, Clone)]
#[rtype(result = "Result<(Transaction, bool), PayError>")]
pub struct Refund(pub RefundRequest);

/// The counterparty of one of our payments returns `value` of it (sandbox).
#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, PayError>")]
pub struct ReturnPayment {
    pub original_local_id: u64,
    pub value: Money,
}

/// The receiver cancels an open charge (`PATCH /cob/{txid}`).
#[derive(Message, Clone)]
#[rtype(result = "Result<Transaction, PayError>")]
pub struct CancelCharge {
    pub local_id: u64,
}

/// Opens a MED against a received PIX (sandbox: the requesting bank's side).
#[derive(Message, Clone)]
#[rtype(result = "Result<crate::domain::med::Med, PayError>")]
pub struct OpenMed {
    pub end_to_end: String,
    pub cause: String,
    pub amount: Option<Money>,
    pub description: Option<String>,
}

/// Ends a MED: its analysis, or its withdrawal by the requesting bank (`result: None`).
#[derive(Message, Clone)]
#[rtype(result = "Result<crate::domain::med::Med, PayError>")]
pub struct CloseMed {
    pub id: u64,
    pub result: Option<crate::domain::med::AnalysisResult>,
    pub details: Option<String>,
}
