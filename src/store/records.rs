//! The records of the repository that are not the domain's own types: what storage keeps
//! of accounts, credentials, webhook configuration and delivery, and requests made with an
//! `Idempotency-Key`. All are JSON; the payment path's records (transactions, ledgers,
//! holds, outbox events) use the binary codec (`codec.rs`) and the domain's types.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::account::{AccountProfile, AccountSettings};
use crate::domain::certificate::{Fingerprint, Validity};
use crate::domain::ids::{AccountId, ClientId};
use crate::domain::money::Money;

/// A request made with an `Idempotency-Key`: what it was (a digest of method, path and
/// body), when, and once it succeeded, its response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    pub fingerprint: String,
    pub at: DateTime<Utc>,
    /// `None` while the request is carried out (or if it was interrupted).
    pub response: Option<StoredResponse>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredResponse {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountRecord {
    pub id: AccountId,
    pub profile: AccountProfile,
    pub settings: AccountSettings,
    pub client_id: ClientId,
    /// `whsec_` + base64: signs this account's webhooks; kept in clear because signing
    /// needs it.
    pub webhook_secret: String,
    /// The EVP key this account's charges carry in their BR Code.
    pub receiving_key: String,
    /// The balance given at creation (`initialBalance`), credited once by the account actor.
    pub opening_balance: Money,
    pub created_at: DateTime<Utc>,
}

/// A client's credentials. The secret itself is never stored: only a salted SHA-256.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientRecord {
    pub client_id: ClientId,
    pub account_id: AccountId,
    pub salt_hex: String,
    pub secret_hash_hex: String,
    /// Tokens issued before this second are refused (the secret was rotated).
    pub rotated_at: DateTime<Utc>,
}

/// Where an account wants the events of one type (decisions.md "Webhooks").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookConfig {
    pub id: u64,
    pub account_id: u64,
    pub event_type: crate::domain::events::EventType,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub is_active: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Set through the API Pix's route (`PUT /webhookrec`, `PUT /webhookcobr`): events go
    /// to `{url}/rec` or `{url}/cobr`, as that specification writes its callbacks.
    #[serde(default)]
    pub api_pix_callback: bool,
}

impl WebhookConfig {
    /// Where this endpoint's events are sent.
    pub fn target(&self) -> String {
        use crate::domain::events::EventType;
        match (self.api_pix_callback, self.event_type) {
            (true, EventType::Rec) => format!("{}/rec", self.url.trim_end_matches('/')),
            (true, EventType::Cobr) => format!("{}/cobr", self.url.trim_end_matches('/')),
            _ => self.url.clone(),
        }
    }
}

/// Where a delivery stands between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryState {
    pub attempts: u32,
    pub next_attempt_at: DateTime<Utc>,
}

/// An outbox event as the dispatcher loads it at start: no payload, which is read when
/// the event is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undelivered {
    pub seq: u64,
    pub account_id: u64,
    pub local_id: u64,
    pub event_type: crate::domain::events::EventType,
    pub state: Option<DeliveryState>,
}

/// What an attempt led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AttemptOutcome {
    /// A 2xx answer: the delivery ended.
    Delivered,
    /// Failed; another attempt is scheduled.
    Retrying,
    /// Failed, and it was the last attempt: the delivery ended.
    Failed,
    /// A resend on request (`POST /api/resend-webhook`), whatever the answer.
    Resent,
}

/// One attempt to deliver a webhook, as the delivery log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryLog {
    pub webhook_log_id: u64,
    pub account_id: u64,
    /// The transaction's local id.
    pub transaction_id: u64,
    pub event_type: crate::domain::events::EventType,
    pub webhook_id: String,
    pub url: String,
    pub attempt: u32,
    /// The receiver's status; `None` when no answer came (see `error`).
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: u64,
    pub sent_at: DateTime<Utc>,
    pub outcome: AttemptOutcome,
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// A key registered for an account in the directory of its rail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyRecord {
    pub key: String,
    /// CPF, CNPJ, EMAIL, PHONE or EVP.
    pub key_type: String,
    pub registered_at: DateTime<Utc>,
    /// The key's CID at the DICT (domain::cid), when this gateway knows it: what the sync
    /// verification counts. Absent for keys of other rails and keys registered before CIDs
    /// were kept (a repair gives them theirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cid: Option<String>,
    /// The `RequestId` the key's CID is computed under: the registration's or the claim
    /// completion's, or the DICT's answer in a repair. An update of the entry (a rename)
    /// keeps it, so the gateway computes the entry's new CID. Absent for keys recorded
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<uuid::Uuid>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRecord {
    pub fingerprint: Fingerprint,
    pub account_id: AccountId,
    pub subject: String,
    pub validity: Validity,
    pub registered_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl CertificateRecord {
    pub fn is_revoked(&self) -> bool {
        self.revoked_at.is_some()
    }
}
