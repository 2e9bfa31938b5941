//! The typed repository: records of accounts, client credentials and certificates over a
//! [`Store`], and the key layout of the whole database.
//!
//! # Key layout (one sled tree; integers big-endian, ids zero-padded so keys sort)
//! ```text
//! meta/jwt_key              32 random bytes: the HS256 key that signs access tokens
//! meta/admin_token_hash     hex SHA-256 of the generated admin token
//! meta/clock_offset_ms      i64: the test clock's offset from the system clock
//! meta/demo_account         u64: the id of the Demo account made on first start
//! seq/account               u64: the last account id handed out
//! acct/{id:020}             AccountRecord (JSON)
//! client/{clientId}         ClientRecord (JSON): the account and the secret's salted hash
//! cert/{fingerprint}        CertificateRecord (JSON)
//! acct_cert/{id:020}/{fp}   empty: the index of an account's certificates
//! ledger/{id:020}           LedgerState (codec.rs): balance, limit counters, totals
//! tx/{local:020}            Transaction (codec.rs), by its numeric local id
//! txid/{uuid}               u64: local id by transactionId, only for a transactionId that
//!                           does not carry its local id (those made before 2026-11-23)
//! e2e/{endToEndId}          u64: local id by end-to-end id, only for an id that does not
//!                           carry its local id (received PIX: the payer's bank made it)
//! tlist/{id:020}/{created_ms:013}/{local:020}  2 bytes (status, operation): the list index,
//!                           also every transaction of the account, oldest first (releases
//!                           before the journal also wrote `atx/{id}/{local}`, now unused)
//! tcnt/{id:020}/{yyyymmdd}/{status}{operation}  i64: list entries per Sao Paulo day, kept
//!                           by the committer (CountedIndex), so totals need no scan
//! ext/{id:020}/{externalId} u64: the externalId index (decisions.md §4)
//! idem/{id:020}/{key}       JSON [local id, request hash]: `/dict/pix` idempotency keys
//! pend/{id:020}/{local:020} Money (codec.rs): the hold of a pending debit
//! copen/{id:020}/{local:020} empty: an open charge (PENDING, not yet paid or expired)
//! ctxid/{id:020}/{txid}     u64: a charge by the txid of its BR Code
//! outbox/{seq:020}          OutboxEvent (codec.rs): an event whose delivery has not ended
//! whst/{seq:020}            DeliveryState (JSON): attempts made on it, when the next is due
//! whlog/{id:020}/{log:020}  DeliveryLog (JSON): one attempt (or resend) of a webhook
//! whcfg/{id:020}/{type}     WebhookConfig (JSON): one endpoint per account and event type
//! med/{id:020}/{med:020}    Med (JSON): the account's MED cases; a MED's id is also the id
//!                           of its hold in the ledger
//! rkey/{receivingKey}       u64: the account whose receiving key this is (on-us payments)
//! reqkey/{id:020}/{sha256}  RequestRecord (JSON): a request made with an Idempotency-Key
//!                           (the SHA-256 of the key), started or with its response
//! onus/{endToEndId}         OnUsCredit (JSON): a credit owed to an account of this gateway,
//!                           written with the payer's settlement, deleted with the credit
//! ```
//! Every write goes through group commit: the payment paths' batches from the account
//! actors, and the admin writes here, which wait on the calling thread until they are
//! durable (they are rare, and must not write beside the committer).

use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use std::collections::HashMap;

use uuid::Uuid;

use super::{codec, Batch, CountedIndex, GroupCommit, Layout, Paging, SharedStore, Storage, StoreError};
use crate::domain::account::{AccountProfile, AccountSettings};
use crate::domain::brcode::TXID_LEN_MAX;
use crate::domain::certificate::{Fingerprint, Validity};
use crate::domain::decide::Record;
use crate::domain::events::OutboxEvent;
use crate::domain::ids::{local_id_in_uuid, AccountId, ClientId};
use crate::domain::ledger::{Ledger, LedgerChange, LedgerState, StoredKeys};
use crate::domain::listing::{day_start, local_day, summary, summary_matches, Operation};
use crate::domain::money::Money;
use crate::domain::transaction::{
    code_reference, local_id_in_end_to_end, parse_code_reference, CodeReference, Transaction, TxKind,
    TxStatus,
};
use chrono::{Datelike, NaiveDate};

/// The keys kept in pages (see `paged.rs`): written in key order on the payment path, so a
/// checkpoint writes a page for many of them.
pub const PAGES: &[Paging] = &[
    // tx/{local:020}: 100 local ids a page.
    Paging { prefix: b"tx/", page_len: 21 },
    // tlist/{id:020}/{created_ms:013}/{local:020}: an account's entries of one second.
    Paging { prefix: b"tlist/", page_len: 37 },
    // whlog/{id:020}/{log:020}: 100 log ids a page.
    Paging { prefix: b"whlog/", page_len: 45 },
];

pub const KEY_JWT: &[u8] = b"meta/jwt_key";
pub const KEY_ADMIN_TOKEN_HASH: &[u8] = b"meta/admin_token_hash";
pub const KEY_CLOCK_OFFSET: &[u8] = b"meta/clock_offset_ms";
pub const KEY_DEMO_ACCOUNT: &[u8] = b"meta/demo_account";
/// Present once the list index covers every transaction (see `backfill_transaction_index`).
const KEY_TLIST_BUILT: &[u8] = b"meta/tlist_built";
const KEY_RKEY_BUILT: &[u8] = b"meta/rkey_built";
const KEY_SEQ_ACCOUNT: &[u8] = b"seq/account";

/// A key of the layout: texts as they are, numbers zero-padded to a fixed width so keys
/// sort by them. (Built by hand: these are made several times per payment, and `format!`
/// showed in the profile.)
struct Key(Vec<u8>);

impl Key {
    fn new(prefix: &str) -> Key {
        let mut v = Vec::with_capacity(64);
        v.extend_from_slice(prefix.as_bytes());
        Key(v)
    }

    fn text(mut self, s: &str) -> Key {
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    /// `n` in decimal, zero-padded to `width` digits (wider if it needs more).
    fn num(mut self, mut n: u64, width: usize) -> Key {
        let mut digits = [b'0'; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let start = at.min(digits.len() - width.min(digits.len()));
        self.0.extend_from_slice(&digits[start..]);
        self
    }

    fn id(self, id: AccountId) -> Key {
        self.num(id.get(), 20)
    }

    fn done(self) -> Vec<u8> {
        self.0
    }
}

fn account_key(id: AccountId) -> Vec<u8> {
    Key::new("acct/").id(id).done()
}
fn request_key(id: AccountId, key: &str) -> Vec<u8> {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    with_suffix(format!("reqkey/{:020}/", id.get()).into_bytes(), &hex)
}

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

fn receiving_key_key(key: &str) -> Vec<u8> {
    with_suffix(b"rkey/".to_vec(), key)
}
fn on_us_key(end_to_end_id: &str) -> Vec<u8> {
    with_suffix(b"onus/".to_vec(), end_to_end_id)
}
fn tlist_prefix(id: AccountId) -> String {
    format!("tlist/{:020}/", id.get())
}

fn tlist_key(id: AccountId, created: DateTime<Utc>, local: u64) -> Vec<u8> {
    let millis = u64::try_from(created.timestamp_millis()).unwrap_or(0);
    Key::new("tlist/").id(id).text("/").num(millis, 13).text("/").num(local, 20).done()
}

/// The list index's counter of an entry: its account, Sao Paulo day, status and operation.
fn tlist_counter(key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(key).ok()?.strip_prefix("tlist/")?;
    let account = text.get(..20)?;
    let millis = text.get(21..34)?.parse::<i64>().ok()?;
    let day = local_day(DateTime::from_timestamp_millis(millis)?);
    let summary = std::str::from_utf8(value).ok()?;
    let date = u64::try_from(day.year()).ok()? * 10_000 + u64::from(day.month()) * 100 + u64::from(day.day());
    Some(Key::new("tcnt/").text(account).text("/").num(date, 8).text("/").text(summary).done())
}

fn outbox_key(seq: u64) -> Vec<u8> {
    Key::new("outbox/").num(seq, 20).done()
}

/// The sequence number at the end of a key such as `outbox/00000000000000000042`.
fn seq_of(key: &[u8], prefix: &str) -> Result<u64, RepoError> {
    std::str::from_utf8(key)
        .ok()
        .and_then(|k| k.strip_prefix(prefix))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| RepoError::Corrupt {
            key: String::from_utf8_lossy(key).into_owned(),
            reason: "no sequence number".into(),
        })
}

fn parse_json<T: DeserializeOwned>(key: &[u8], value: &[u8]) -> Result<T, RepoError> {
    serde_json::from_slice(value).map_err(|e| RepoError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: e.to_string(),
    })
}

fn client_key(id: &ClientId) -> Vec<u8> {
    format!("client/{id}").into_bytes()
}
fn cert_key(fp: &Fingerprint) -> Vec<u8> {
    format!("cert/{fp}").into_bytes()
}
fn account_cert_prefix(id: AccountId) -> Vec<u8> {
    format!("acct_cert/{:020}/", id.get()).into_bytes()
}
fn ledger_key(id: AccountId) -> Vec<u8> {
    Key::new("ledger/").id(id).done()
}
fn tx_key(local: u64) -> Vec<u8> {
    Key::new("tx/").num(local, 20).done()
}
fn txid_key(id: &Uuid) -> Vec<u8> {
    format!("txid/{id}").into_bytes()
}
fn e2e_key(e2e: &str) -> Vec<u8> {
    Key::new("e2e/").text(e2e).done()
}
fn ext_prefix(id: AccountId) -> Vec<u8> {
    Key::new("ext/").id(id).text("/").done()
}
fn idem_prefix(id: AccountId) -> Vec<u8> {
    Key::new("idem/").id(id).text("/").done()
}
fn pend_prefix(id: AccountId) -> Vec<u8> {
    Key::new("pend/").id(id).text("/").done()
}
fn pend_key(id: AccountId, local: u64) -> Vec<u8> {
    Key::new("pend/").id(id).text("/").num(local, 20).done()
}
fn copen_key(id: AccountId, local: u64) -> Vec<u8> {
    Key::new("copen/").id(id).text("/").num(local, 20).done()
}
fn with_suffix(mut prefix: Vec<u8>, suffix: &str) -> Vec<u8> {
    prefix.extend_from_slice(suffix.as_bytes());
    prefix
}

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored record does not decode: a bug or a damaged database, never client input.
    #[error("corrupt record under {key}: {reason}")]
    Corrupt { key: String, reason: String },
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

/// Where an account wants the events of one type (decisions.md §7).
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

/// Records of each kind the auth cache holds at most (it is emptied when full).
pub const AUTH_CACHE_ENTRIES_MAX: usize = 10_000;

/// The records every authenticated request reads (its client, certificate and account),
/// decoded and kept in memory. Only the admin paths change them, and every admin write
/// empties the cache and bumps `generation` under the same lock in which a reader fills an
/// entry, so a reader that loaded a record before a write can never put it back after.
#[derive(Default)]
struct AuthCache {
    generation: u64,
    clients: HashMap<ClientId, ClientRecord>,
    certificates: HashMap<Fingerprint, CertificateRecord>,
    accounts: HashMap<AccountId, AccountRecord>,
}

/// Selects one map of the auth cache, to read and to fill.
type Pick<K, V> = (fn(&AuthCache) -> &HashMap<K, V>, fn(&mut AuthCache) -> &mut HashMap<K, V>);

#[derive(Clone)]
pub struct Repo {
    store: SharedStore,
    writer: Arc<GroupCommit>,
    auth: Arc<std::sync::RwLock<AuthCache>>,
    /// Serializes the read-modify-write paths of the admin API (account ids, certificate
    /// ownership). It is never taken on the payment paths.
    admin_writes: Arc<Mutex<()>>,
}

impl Repo {
    pub fn new(storage: &Storage) -> Repo {
        Repo {
            store: Arc::clone(&storage.view),
            writer: Arc::clone(&storage.commit),
            auth: Arc::default(),
            admin_writes: Arc::new(Mutex::new(())),
        }
    }

    pub fn store(&self) -> &SharedStore {
        &self.store
    }

    /// Takes the admin write lock. Poisoning is ignored: the guarded data is `()`, and every
    /// write under it is a single atomic batch.
    pub fn admin_lock(&self) -> MutexGuard<'_, ()> {
        self.admin_writes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get_json<T: DeserializeOwned>(&self, key: &[u8]) -> Result<Option<T>, RepoError> {
        match self.store.get(key)? {
            None => Ok(None),
            Some(bytes) => parse_json(key, &bytes).map(Some),
        }
    }

    fn commit(&self, batch: &Batch) -> Result<(), RepoError> {
        let done = self.writer.commit_blocking(batch.clone()).map_err(|e| match e {
            super::CommitError::Full(why) => RepoError::Store(StoreError::Full(why)),
            other => RepoError::Store(StoreError::Engine(other.to_string())),
        });
        // Whether or not it became durable, what the cache holds may be stale now.
        let mut auth = self.auth.write().unwrap_or_else(|p| p.into_inner());
        auth.generation += 1;
        auth.clients.clear();
        auth.certificates.clear();
        auth.accounts.clear();
        done
    }

    /// A record through the auth cache: `pick` and `pick_mut` select the map, `load` reads
    /// storage.
    fn cached<K, V>(
        &self,
        key: &K,
        (pick, pick_mut): Pick<K, V>,
        load: impl FnOnce() -> Result<Option<V>, RepoError>,
    ) -> Result<Option<V>, RepoError>
    where
        K: std::hash::Hash + Eq + Clone,
        V: Clone,
    {
        let generation = {
            let auth = self.auth.read().unwrap_or_else(|p| p.into_inner());
            if let Some(v) = pick(&auth).get(key) {
                return Ok(Some(v.clone()));
            }
            auth.generation
        };
        let value = load()?;
        if let Some(v) = &value {
            let mut auth = self.auth.write().unwrap_or_else(|p| p.into_inner());
            if auth.generation == generation {
                let map = pick_mut(&mut auth);
                if map.len() >= AUTH_CACHE_ENTRIES_MAX {
                    map.clear();
                }
                map.insert(key.clone(), v.clone());
            }
        }
        Ok(value)
    }

    pub fn meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>, RepoError> {
        Ok(self.store.get(key)?)
    }

    pub fn put_meta(&self, key: &[u8], value: &[u8]) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(key, value);
        self.commit(&b)
    }

    /// The next account id. Call with the admin lock held, and commit the account in the
    /// same batch as [`Repo::account_batch`] makes, so an id is never handed out twice.
    pub fn next_account_id(&self) -> Result<AccountId, RepoError> {
        let last =
            match self.store.get(KEY_SEQ_ACCOUNT)? {
                Some(b) => u64::from_be_bytes(b.as_slice().try_into().map_err(|_| RepoError::Corrupt {
                    key: "seq/account".into(),
                    reason: "not a u64".into(),
                })?),
                None => 0,
            };
        AccountId::new(last + 1)
            .ok_or_else(|| RepoError::Corrupt { key: "seq/account".into(), reason: "overflow".into() })
    }

    /// The writes that create an account with its credentials and, optionally, its first
    /// certificate.
    pub fn account_batch(
        &self,
        account: &AccountRecord,
        client: &ClientRecord,
        cert: Option<&CertificateRecord>,
    ) -> Result<Batch, RepoError> {
        let mut b = Batch::default();
        b.put(KEY_SEQ_ACCOUNT, account.id.get().to_be_bytes().to_vec());
        b.put(account_key(account.id), to_json(account)?);
        b.put(receiving_key_key(&account.receiving_key), account.id.get().to_be_bytes().to_vec());
        b.put(client_key(&client.client_id), to_json(client)?);
        if let Some(c) = cert {
            self.certificate_writes(&mut b, c)?;
        }
        Ok(b)
    }

    /// Applies and flushes a batch made by this repository.
    pub fn commit_batch(&self, batch: &Batch) -> Result<(), RepoError> {
        self.commit(batch)
    }

    pub fn account(&self, id: AccountId) -> Result<Option<AccountRecord>, RepoError> {
        self.cached(&id, (|c| &c.accounts, |c| &mut c.accounts), || self.get_json(&account_key(id)))
    }

    pub fn put_account(&self, account: &AccountRecord) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(account_key(account.id), to_json(account)?);
        self.commit(&b)
    }

    pub fn client(&self, id: &ClientId) -> Result<Option<ClientRecord>, RepoError> {
        self.cached(id, (|c| &c.clients, |c| &mut c.clients), || self.get_json(&client_key(id)))
    }

    pub fn put_client(&self, client: &ClientRecord) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(client_key(&client.client_id), to_json(client)?);
        self.commit(&b)
    }

    pub fn certificate(&self, fp: &Fingerprint) -> Result<Option<CertificateRecord>, RepoError> {
        self.cached(fp, (|c| &c.certificates, |c| &mut c.certificates), || self.get_json(&cert_key(fp)))
    }

    fn certificate_writes(&self, b: &mut Batch, c: &CertificateRecord) -> Result<(), RepoError> {
        b.put(cert_key(&c.fingerprint), to_json(c)?);
        let mut idx = account_cert_prefix(c.account_id);
        idx.extend_from_slice(c.fingerprint.as_str().as_bytes());
        b.put(idx, Vec::new());
        Ok(())
    }

    pub fn put_certificate(&self, c: &CertificateRecord) -> Result<(), RepoError> {
        let mut b = Batch::default();
        self.certificate_writes(&mut b, c)?;
        self.commit(&b)
    }

    pub fn certificates_of(&self, id: AccountId) -> Result<Vec<CertificateRecord>, RepoError> {
        let prefix = account_cert_prefix(id);
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(&prefix)? {
            let fp = std::str::from_utf8(&k[prefix.len()..]).ok().and_then(Fingerprint::parse).ok_or_else(
                || RepoError::Corrupt {
                    key: String::from_utf8_lossy(&k).into_owned(),
                    reason: "bad fingerprint".into(),
                },
            )?;
            if let Some(c) = self.certificate(&fp)? {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// Puts a transaction; `first` (its first write) also writes its indexes, which never
    /// change afterwards, as inserts: they are new keys. Its transactionId and its own
    /// end-to-end ids carry its local id, so they need no index; an end-to-end id made
    /// elsewhere (a received PIX, given when it is paid) is indexed whenever it is written.
    pub fn put_transaction(&self, b: &mut Batch, tx: &Transaction, first: bool) -> Result<(), RepoError> {
        let mut record = Vec::with_capacity(256);
        codec::encode_transaction(tx, &mut record);
        // The list entry is rewritten on every write: the committer counts a status change
        // from the old value.
        let entry = summary(tx.status, Operation::of(tx.kind)).to_vec();
        let list_key = tlist_key(tx.account_id, tx.created_at, tx.local_id);
        let local = tx.local_id.to_be_bytes().to_vec();
        if !tx.end_to_end_id.is_empty() && local_id_in_end_to_end(&tx.end_to_end_id) != Some(tx.local_id) {
            b.put(e2e_key(&tx.end_to_end_id), local.clone());
        }
        if !first {
            b.put(tx_key(tx.local_id), record);
            b.put(list_key, entry);
            return Ok(());
        }
        b.insert(tx_key(tx.local_id), record);
        b.insert(list_key, entry);
        if let Some(c) = &tx.charge {
            b.insert(format!("ctxid/{:020}/{}", tx.account_id.get(), c.txid).into_bytes(), local.clone());
        }
        if local_id_in_uuid(&tx.transaction_id) != tx.local_id {
            b.insert(txid_key(&tx.transaction_id), local.clone());
        }
        if let Some(ext) = &tx.external_id {
            b.insert(with_suffix(ext_prefix(tx.account_id), ext), local);
        }
        if let Some(d) = &tx.dict {
            let v = to_json(&(tx.local_id, &d.request_hash))?;
            b.insert(with_suffix(idem_prefix(tx.account_id), &d.idempotency_key), v);
        }
        Ok(())
    }

    /// The writes that carry out a plan of an account's command: its records and their
    /// indexes, the ledger's change (its record, holds taken and released), and its events.
    pub fn plan_batch(
        &self,
        id: AccountId,
        ledger: Option<&LedgerChange>,
        records: &[Record],
        events: &[OutboxEvent],
    ) -> Result<Batch, RepoError> {
        let mut b = Batch::default();
        for record in records {
            match record {
                Record::NewTransaction(tx) => {
                    self.put_transaction(&mut b, tx, true)?;
                    if tx.kind == TxKind::CashIn && tx.status == TxStatus::Pending {
                        self.put_open_charge(&mut b, id, tx.local_id);
                    }
                }
                Record::Transaction(tx) => {
                    self.put_transaction(&mut b, tx, false)?;
                    if tx.kind == TxKind::CashIn && tx.status != TxStatus::Pending {
                        self.delete_open_charge(&mut b, id, tx.local_id);
                    }
                }
                Record::Med(med) => self.put_med(&mut b, med)?,
                Record::OnUsCredit(c) => b.put(on_us_key(&c.end_to_end_id), to_json(c)?),
                Record::OnUsCredited(e2e) => b.delete(on_us_key(e2e)),
            }
        }
        if let Some(change) = ledger {
            if let Some(state) = change.state() {
                self.put_ledger(&mut b, id, state)?;
            }
            for (local, hold) in change.holds_taken() {
                self.put_pending(&mut b, id, *local, *hold);
            }
            for local in change.holds_released() {
                self.delete_pending(&mut b, id, *local);
            }
        }
        for event in events {
            self.put_outbox(&mut b, event)?;
        }
        Ok(b)
    }

    pub fn put_ledger(&self, b: &mut Batch, id: AccountId, state: &LedgerState) -> Result<(), RepoError> {
        let mut record = Vec::with_capacity(48);
        codec::encode_ledger(state, &mut record);
        b.put(ledger_key(id), record);
        Ok(())
    }

    /// The hold of a new pending debit (or MED): a new key.
    pub fn put_pending(&self, b: &mut Batch, id: AccountId, local: u64, hold: Money) {
        b.insert(pend_key(id, local), codec::encode_hold(hold));
    }

    pub fn delete_pending(&self, b: &mut Batch, id: AccountId, local: u64) {
        b.delete(pend_key(id, local));
    }

    pub fn put_open_charge(&self, b: &mut Batch, id: AccountId, local: u64) {
        b.insert(copen_key(id, local), Vec::new());
    }

    pub fn delete_open_charge(&self, b: &mut Batch, id: AccountId, local: u64) {
        b.delete(copen_key(id, local));
    }

    /// The account's open charges, oldest first.
    pub fn open_charges(&self, id: AccountId) -> Result<Vec<Transaction>, RepoError> {
        let prefix = format!("copen/{:020}/", id.get()).into_bytes();
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(&prefix)? {
            let local: u64 = String::from_utf8_lossy(&k[prefix.len()..]).parse().map_err(|_| {
                RepoError::Corrupt { key: String::from_utf8_lossy(&k).into_owned(), reason: "bad id".into() }
            })?;
            if let Some(t) = self.transaction(local)? {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// The index of the transactions list, for the committer to count (see the key layout).
    pub fn transaction_index() -> CountedIndex {
        CountedIndex { prefix: b"tlist/", counter: tlist_counter }
    }

    /// What storage needs to know of this layout: the counted list index, and the keys
    /// kept in pages ([`PAGES`]).
    pub fn layout() -> Layout {
        Layout { counted: Some(Repo::transaction_index()), pages: PAGES }
    }

    /// One page of an account's transactions on the local days `[first, last]`, newest
    /// first, with the filters, after `offset` matching ones; and how many match in all.
    /// Totals come from the per-day counters; whole days before the page are skipped by
    /// their counts, so only the page's own day is read entry by entry.
    pub fn transactions_page(
        &self,
        id: AccountId,
        (first, last): (NaiveDate, NaiveDate),
        (status, operation): (Option<TxStatus>, Option<Operation>),
        offset: u64,
        size: usize,
    ) -> Result<(Vec<Transaction>, u64), RepoError> {
        let mut days = Vec::new();
        let mut day = first;
        while day <= last {
            let prefix = format!("tcnt/{:020}/{}/", id.get(), day.format("%Y%m%d"));
            let mut n = 0u64;
            for (k, v) in self.store.scan_prefix(prefix.as_bytes())? {
                if summary_matches(&k[prefix.len()..], status, operation) {
                    let count: [u8; 8] = v.as_slice().try_into().map_err(|_| RepoError::Corrupt {
                        key: String::from_utf8_lossy(&k).into_owned(),
                        reason: "not an i64".into(),
                    })?;
                    n += u64::try_from(i64::from_be_bytes(count)).unwrap_or(0);
                }
            }
            days.push((day, n));
            day += chrono::Duration::days(1);
        }
        let total = days.iter().map(|(_, n)| n).sum();
        let mut skip = offset;
        let mut ids = Vec::new();
        for (day, n) in days.into_iter().rev() {
            if ids.len() >= size {
                break;
            }
            if n == 0 || (ids.is_empty() && skip >= n) {
                skip = skip.saturating_sub(n);
                continue;
            }
            let from = format!("{}{:013}/", tlist_prefix(id), day_start(day).timestamp_millis().max(0));
            let next = day_start(day + chrono::Duration::days(1)).timestamp_millis().max(0);
            let to = format!("{}{next:013}/", tlist_prefix(id));
            let mut bad = None;
            self.store.scan_rev(from.as_bytes(), to.as_bytes(), &mut |k, v| {
                if !summary_matches(v, status, operation) {
                    return true;
                }
                if skip > 0 {
                    skip -= 1;
                    return true;
                }
                match std::str::from_utf8(k)
                    .ok()
                    .and_then(|t| t.rsplit('/').next())
                    .and_then(|n| n.parse().ok())
                {
                    Some(local) => ids.push(local),
                    None => bad = Some(String::from_utf8_lossy(k).into_owned()),
                }
                ids.len() < size && bad.is_none()
            })?;
            if let Some(key) = bad {
                return Err(RepoError::Corrupt { key, reason: "no local id".into() });
            }
        }
        let mut page = Vec::with_capacity(ids.len());
        for local in ids {
            if let Some(t) = self.transaction(local)? {
                page.push(t);
            }
        }
        Ok((page, total))
    }

    /// Writes the list index of transactions stored before it existed (once per database;
    /// a crash midway redoes it, and rewriting an entry changes no count).
    pub fn backfill_transaction_index(&self, commit: &GroupCommit) -> Result<usize, RepoError> {
        if self.store.get(KEY_TLIST_BUILT)?.is_some() {
            return Ok(0);
        }
        let mut written = 0;
        let mut b = Batch::default();
        for (k, v) in self.store.scan_prefix(b"tx/")? {
            let tx = codec::decode_transaction(&v).map_err(|e| corrupt(&k, e))?;
            b.put(
                tlist_key(tx.account_id, tx.created_at, tx.local_id),
                summary(tx.status, Operation::of(tx.kind)).to_vec(),
            );
            written += 1;
            if b.len_hint() >= 1000 {
                commit
                    .submit(std::mem::take(&mut b))
                    .map_err(|e| RepoError::Store(StoreError::Engine(e.to_string())))?;
            }
        }
        b.put(KEY_TLIST_BUILT.to_vec(), vec![1]);
        commit.submit(b).map_err(|e| RepoError::Store(StoreError::Engine(e.to_string())))?;
        Ok(written)
    }

    /// Indexes the receiving keys of accounts made before the index existed (once per
    /// database; a crash midway redoes it).
    pub fn backfill_receiving_keys(&self, commit: &GroupCommit) -> Result<usize, RepoError> {
        if self.store.get(KEY_RKEY_BUILT)?.is_some() {
            return Ok(0);
        }
        let mut b = Batch::default();
        let mut written = 0;
        for (k, v) in self.store.scan_prefix(b"acct/")? {
            let account: AccountRecord = parse_json(&k, &v)?;
            b.put(receiving_key_key(&account.receiving_key), account.id.get().to_be_bytes().to_vec());
            written += 1;
        }
        b.put(KEY_RKEY_BUILT.to_vec(), vec![1]);
        commit.submit(b).map_err(|e| RepoError::Store(StoreError::Engine(e.to_string())))?;
        Ok(written)
    }

    /// The record of a request an account made with an `Idempotency-Key`.
    pub fn request_record(&self, id: AccountId, key: &str) -> Result<Option<RequestRecord>, RepoError> {
        self.get_json(&request_key(id, key))
    }

    /// Writes it and waits until it is durable.
    pub async fn put_request_record(
        &self,
        id: AccountId,
        key: &str,
        r: &RequestRecord,
    ) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(request_key(id, key), to_json(r)?);
        self.commit_async(b).await
    }

    /// Forgets it (the request did not happen), durably.
    pub async fn delete_request_record(&self, id: AccountId, key: &str) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.delete(request_key(id, key));
        self.commit_async(b).await
    }

    async fn commit_async(&self, b: Batch) -> Result<(), RepoError> {
        self.writer.commit(b).await.map_err(|e| match e {
            super::CommitError::Full(why) => RepoError::Store(StoreError::Full(why)),
            other => RepoError::Store(StoreError::Engine(other.to_string())),
        })
    }

    /// The account of this gateway whose receiving key `key` is.
    pub fn account_by_receiving_key(&self, key: &str) -> Result<Option<AccountId>, RepoError> {
        Ok(self.local_by(&receiving_key_key(key))?.and_then(AccountId::new))
    }

    /// A credit owed to an account of this gateway that its payee has not carried out yet.
    pub fn on_us_credit(
        &self,
        end_to_end_id: &str,
    ) -> Result<Option<crate::domain::decide::OnUsCredit>, RepoError> {
        self.get_json(&on_us_key(end_to_end_id))
    }

    /// Every credit not carried out yet (delivered again at start).
    pub fn on_us_credits(&self) -> Result<Vec<crate::domain::decide::OnUsCredit>, RepoError> {
        self.store.scan_prefix(b"onus/")?.into_iter().map(|(k, v)| parse_json(&k, &v)).collect()
    }

    pub fn put_med(&self, b: &mut Batch, med: &crate::domain::med::Med) -> Result<(), RepoError> {
        b.put(format!("med/{:020}/{:020}", med.account_id, med.id).into_bytes(), to_json(med)?);
        Ok(())
    }

    pub fn med(&self, id: AccountId, med: u64) -> Result<Option<crate::domain::med::Med>, RepoError> {
        self.get_json(format!("med/{:020}/{med:020}", id.get()).as_bytes())
    }

    /// One page of the account's MEDs that `keep` keeps, newest first, after `skip` of them,
    /// and how many it keeps in all. Only the page is held: the rest are read one at a time
    /// and counted.
    pub fn meds_page(
        &self,
        id: AccountId,
        keep: impl Fn(&crate::domain::med::Med) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<crate::domain::med::Med>, usize), RepoError> {
        let from = Key::new("med/").id(id).text("/").done();
        let to = Key::new("med/").id(id).text("0").done(); // '0' sorts right after '/'
        let (mut page, mut total, mut bad) = (Vec::new(), 0usize, None);
        self.store.scan_rev(&from, &to, &mut |k, v| {
            match parse_json::<crate::domain::med::Med>(k, v) {
                Ok(med) if keep(&med) => {
                    if total >= skip && page.len() < size {
                        page.push(med);
                    }
                    total += 1;
                }
                Ok(_) => {}
                Err(e) => bad = Some(e),
            }
            bad.is_none()
        })?;
        match bad {
            Some(e) => Err(e),
            None => Ok((page, total)),
        }
    }

    /// An account's transaction by the externalId its client gave.
    pub fn transaction_by_external_id(
        &self,
        id: AccountId,
        external_id: &str,
    ) -> Result<Option<Transaction>, RepoError> {
        match self.local_by(&with_suffix(ext_prefix(id), external_id))? {
            Some(local) => self.transaction(local),
            None => Ok(None),
        }
    }

    /// An account's charge by the txid of its BR Code.
    pub fn charge_by_txid(&self, id: AccountId, txid: &str) -> Result<Option<Transaction>, RepoError> {
        match self.local_by(format!("ctxid/{:020}/{txid}", id.get()).as_bytes())? {
            Some(local) => self.transaction(local),
            None => Ok(None),
        }
    }

    /// The account's charge a BR Code names by `reference`, its txid field (see
    /// [`code_reference`]). A cob made before references existed carries its txid cut to 25
    /// characters: it is found when exactly one of the account's txids begins with it.
    pub fn charge_by_code(&self, id: AccountId, reference: &str) -> Result<Option<Transaction>, RepoError> {
        let found = match parse_code_reference(reference) {
            CodeReference::Local(local) => self.transaction(local)?,
            CodeReference::Txid(txid) => match self.charge_by_txid(id, txid)? {
                Some(tx) => Some(tx),
                None if txid.len() == TXID_LEN_MAX => {
                    let hits = self.store.scan_prefix(format!("ctxid/{:020}/{txid}", id.get()).as_bytes())?;
                    match hits.as_slice() {
                        [(k, _)] => match self.local_by(k)? {
                            Some(local) => self.transaction(local)?,
                            None => None,
                        },
                        _ => None,
                    }
                }
                None => None,
            },
        };
        Ok(found.filter(|t| {
            t.account_id == id && t.charge.as_ref().is_some_and(|c| is_named_by(c, t.local_id, reference))
        }))
    }

    /// The account's webhook configurations, by event type.
    pub fn webhook_configs(&self, id: AccountId) -> Result<Vec<WebhookConfig>, RepoError> {
        let prefix = format!("whcfg/{:020}/", id.get()).into_bytes();
        self.store.scan_prefix(&prefix)?.into_iter().map(|(k, v)| parse_json(&k, &v)).collect()
    }

    /// Creates or replaces the configuration of its account and event type (flushed).
    pub fn put_webhook_config(&self, c: &WebhookConfig) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(format!("whcfg/{:020}/{}", c.account_id, c.event_type.as_str()).into_bytes(), to_json(c)?);
        self.commit(&b)
    }

    /// Removes the configuration of an account's event type (flushed); answers whether there
    /// was one.
    pub fn delete_webhook_config(
        &self,
        id: AccountId,
        event_type: crate::domain::events::EventType,
    ) -> Result<bool, RepoError> {
        if self.webhook_config(id, event_type)?.is_none() {
            return Ok(false);
        }
        let mut b = Batch::default();
        b.delete(format!("whcfg/{:020}/{}", id.get(), event_type.as_str()).into_bytes());
        self.commit(&b)?;
        Ok(true)
    }

    /// Adds an event to the outbox in `b`; answers its sequence number.
    pub fn put_outbox(&self, b: &mut Batch, event: &OutboxEvent) -> Result<u64, RepoError> {
        let seq = self.store.generate_id()?;
        let mut record = Vec::with_capacity(300);
        codec::encode_event(event, &mut record);
        b.insert(outbox_key(seq), record);
        Ok(seq)
    }

    /// One event still in the outbox.
    pub fn outbox_event(&self, seq: u64) -> Result<Option<OutboxEvent>, RepoError> {
        let key = outbox_key(seq);
        match self.store.get(&key)? {
            None => Ok(None),
            Some(bytes) => codec::decode_event(&bytes).map(Some).map_err(|e| corrupt(&key, e)),
        }
    }

    /// Events whose delivery has not ended, oldest first, with their delivery state: at
    /// most `limit`, and whether more remain.
    pub fn undelivered(&self, limit: usize) -> Result<(Vec<Undelivered>, bool), RepoError> {
        let mut out = Vec::new();
        let mut more = false;
        for (k, v) in self.store.scan_prefix(b"outbox/")? {
            if out.len() >= limit {
                more = true;
                break;
            }
            let seq = seq_of(&k, "outbox/")?;
            let event = codec::event_header(&v).map_err(|e| corrupt(&k, e))?;
            let state: Option<DeliveryState> = self.get_json(format!("whst/{seq:020}").as_bytes())?;
            out.push(Undelivered {
                seq,
                account_id: event.account_id,
                local_id: event.local_id,
                event_type: event.event_type,
                state,
            });
        }
        Ok((out, more))
    }

    /// Records in `b` that the delivery of event `seq` failed and when it is tried again.
    pub fn put_delivery_state(
        &self,
        b: &mut Batch,
        seq: u64,
        state: &DeliveryState,
    ) -> Result<(), RepoError> {
        b.put(format!("whst/{seq:020}").into_bytes(), to_json(state)?);
        Ok(())
    }

    /// Removes in `b` an event whose delivery ended (its log stays); `attempted`: an attempt
    /// was made, so its delivery state exists too.
    pub fn end_delivery(&self, b: &mut Batch, seq: u64, attempted: bool) {
        b.delete(outbox_key(seq));
        if attempted {
            b.delete(format!("whst/{seq:020}").into_bytes());
        }
    }

    pub fn put_delivery_log(&self, b: &mut Batch, log: &DeliveryLog) -> Result<(), RepoError> {
        b.put(format!("whlog/{:020}/{:020}", log.account_id, log.webhook_log_id).into_bytes(), to_json(log)?);
        Ok(())
    }

    /// The account's delivery log, newest first, optionally of one transaction only.
    pub fn delivery_logs(
        &self,
        id: AccountId,
        transaction: Option<u64>,
        limit: usize,
    ) -> Result<Vec<DeliveryLog>, RepoError> {
        // Newest first, reading no further back than the page needs (the log grows with every
        // attempt and is never read whole).
        let from = format!("whlog/{:020}/", id.get());
        let to = format!("whlog/{:020}0", id.get()); // '0' sorts right after '/'
        let mut out = Vec::new();
        let mut bad = None;
        self.store.scan_rev(from.as_bytes(), to.as_bytes(), &mut |k, v| {
            match parse_json::<DeliveryLog>(k, v) {
                Ok(log) if transaction.is_none_or(|t| t == log.transaction_id) => out.push(log),
                Ok(_) => {}
                Err(e) => bad = Some(e),
            }
            out.len() < limit && bad.is_none()
        })?;
        match bad {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// The account's endpoint for one event type, if configured.
    pub fn webhook_config(
        &self,
        id: AccountId,
        event_type: crate::domain::events::EventType,
    ) -> Result<Option<WebhookConfig>, RepoError> {
        self.get_json(format!("whcfg/{:020}/{}", id.get(), event_type.as_str()).as_bytes())
    }

    pub fn transaction(&self, local: u64) -> Result<Option<Transaction>, RepoError> {
        let key = tx_key(local);
        match self.store.get(&key)? {
            None => Ok(None),
            Some(bytes) => codec::decode_transaction(&bytes).map(Some).map_err(|e| corrupt(&key, e)),
        }
    }

    fn local_by(&self, key: &[u8]) -> Result<Option<u64>, RepoError> {
        match self.store.get(key)? {
            None => Ok(None),
            Some(b) => {
                Ok(Some(u64::from_be_bytes(b.as_slice().try_into().map_err(|_| RepoError::Corrupt {
                    key: String::from_utf8_lossy(key).into_owned(),
                    reason: "not a u64".into(),
                })?)))
            }
        }
    }

    /// The accounts that have pending debits or open charges (to resume them at start).
    pub fn accounts_with_pending(&self) -> Result<Vec<AccountId>, RepoError> {
        let mut out: Vec<AccountId> = Vec::new();
        let mut keys = self.store.scan_prefix(b"pend/")?;
        keys.extend(self.store.scan_prefix(b"copen/")?);
        for (k, _) in keys {
            let start = k.iter().position(|b| *b == b'/').map_or(k.len(), |p| p + 1);
            let id = std::str::from_utf8(&k[start..])
                .ok()
                .and_then(|rest| rest.split('/').next())
                .and_then(|digits| digits.parse::<u64>().ok())
                .and_then(AccountId::new)
                .ok_or_else(|| RepoError::Corrupt {
                    key: String::from_utf8_lossy(&k).into_owned(),
                    reason: "bad pending key".into(),
                })?;
            if !out.contains(&id) {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Every transaction of an account, oldest first (a full scan of its list index; for
    /// tools and tests).
    pub fn transactions_of(&self, id: AccountId) -> Result<Vec<Transaction>, RepoError> {
        let prefix = tlist_prefix(id).into_bytes();
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(&prefix)? {
            let local: u64 = std::str::from_utf8(&k)
                .ok()
                .and_then(|t| t.rsplit('/').next())
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| RepoError::Corrupt {
                    key: String::from_utf8_lossy(&k).into_owned(),
                    reason: "bad local id".into(),
                })?;
            if let Some(t) = self.transaction(local)? {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// A transaction by its transactionId: the local id it carries, else the index of
    /// transactionIds that carry none.
    pub fn transaction_by_uuid(&self, id: &Uuid) -> Result<Option<Transaction>, RepoError> {
        if let Some(t) = self.transaction(local_id_in_uuid(id))?.filter(|t| t.transaction_id == *id) {
            return Ok(Some(t));
        }
        match self.local_by(&txid_key(id))? {
            Some(local) => self.transaction(local),
            None => Ok(None),
        }
    }

    /// A transaction by one of its end-to-end ids (its own, a `/dict/pix` transfer's
    /// provisional one, a return's): the local id an own id carries, else the index.
    /// The account's transaction an end-to-end id names. An on-us payment's two sides carry
    /// one id: the payer's (found by the local id the id carries) and the payee's (indexed).
    pub fn transaction_by_e2e(
        &self,
        account: AccountId,
        e2e: &str,
    ) -> Result<Option<Transaction>, RepoError> {
        let names = |t: &Transaction| {
            t.account_id == account
                && (t.end_to_end_id == e2e
                    || t.dict.as_ref().is_some_and(|d| d.provisional_end_to_end_id == e2e)
                    || t.refund.as_ref().is_some_and(|r| r.rtr_id == e2e))
        };
        if let Some(local) = local_id_in_end_to_end(e2e) {
            if let Some(t) = self.transaction(local)?.filter(names) {
                return Ok(Some(t));
            }
        }
        match self.local_by(&e2e_key(e2e))? {
            Some(local) => Ok(self.transaction(local)?.filter(|t| t.account_id == account)),
            None => Ok(None),
        }
    }

    /// The account's ledger as stored, or its opening ledger when it never moved money.
    pub fn load_ledger(&self, account: &AccountRecord) -> Result<Ledger, RepoError> {
        let id = account.id;
        let key = ledger_key(id);
        let Some(bytes) = self.store.get(&key)? else {
            return Ok(Ledger::opening(account.opening_balance));
        };
        let state = codec::decode_ledger(&bytes).map_err(|e| corrupt(&key, e))?;
        let corrupt = |what: &str, reason: String| RepoError::Corrupt { key: format!("{what}/{id}"), reason };
        let strip = |prefix: &[u8], k: &[u8]| String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
        let mut pending = HashMap::new();
        let p = pend_prefix(id);
        for (k, v) in self.store.scan_prefix(&p)? {
            let local: u64 = strip(&p, &k).parse().map_err(|_| corrupt("pend", "bad key".into()))?;
            let hold = codec::decode_hold(&v).map_err(|e| corrupt("pend", e.to_string()))?;
            pending.insert(local, hold);
        }
        Ledger::restore(state, pending).map_err(|e| corrupt("ledger", e.to_string()))
    }

    /// What storage holds for an account's externalId and `/dict/pix` idempotency key (the
    /// ledger keeps only those whose writes are in flight).
    pub fn stored_keys(
        &self,
        id: AccountId,
        external_id: Option<&str>,
        idempotency_key: Option<&str>,
    ) -> Result<StoredKeys, RepoError> {
        let external = match external_id {
            Some(e) => self.local_by(&with_suffix(ext_prefix(id), e))?,
            None => None,
        };
        let idempotency = match idempotency_key {
            Some(k) => self.get_json::<(u64, String)>(&with_suffix(idem_prefix(id), k))?,
            None => None,
        };
        Ok(StoredKeys { external, idempotency })
    }

    /// Whether storage answers (for `/healthz`).
    pub fn ping(&self) -> Result<(), RepoError> {
        self.store.get(KEY_JWT)?;
        Ok(())
    }
}

/// Whether a code with `reference` in its txid field names this charge: its reference, or
/// for a cob made before references, the first 25 characters of its txid.
fn is_named_by(c: &crate::domain::transaction::ChargeDetails, local: u64, reference: &str) -> bool {
    code_reference(&c.txid, local) == reference
        || (c.txid.len() > TXID_LEN_MAX && c.txid.starts_with(reference))
}

/// A record under `key` that does not decode.
fn corrupt(key: &[u8], e: codec::CodecError) -> RepoError {
    RepoError::Corrupt { key: String::from_utf8_lossy(key).into_owned(), reason: e.to_string() }
}

fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>, RepoError> {
    serde_json::to_vec(value)
        .map_err(|e| RepoError::Corrupt { key: "<encode>".into(), reason: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::account::AccountName;
    use crate::domain::document::TaxId;

    fn sample(id: u64) -> Option<(AccountRecord, ClientRecord)> {
        let id = AccountId::new(id)?;
        let client_id = ClientId::parse("3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c")?;
        let now = DateTime::<Utc>::UNIX_EPOCH;
        let account = AccountRecord {
            id,
            profile: AccountProfile {
                name: AccountName::parse("Acme").ok()?,
                document: TaxId::parse("11222333000181").ok()?,
                sandbox: true,
            },
            settings: AccountSettings::default(),
            client_id,
            webhook_secret: "whsec_x".into(),
            receiving_key: "k".into(),
            opening_balance: Money::ZERO,
            created_at: now,
        };
        let client = ClientRecord {
            client_id,
            account_id: id,
            salt_hex: "00".into(),
            secret_hash_hex: "11".into(),
            rotated_at: now,
        };
        Some((account, client))
    }

    #[test]
    fn a_med_page_holds_the_newest_kept_after_the_skipped_and_counts_them_all() {
        use crate::domain::med::{Med, MedReason, MedStatus, Participant};
        let storage = Storage::memory().unwrap();
        let repo = Repo::new(&storage);
        let now = Utc::now();
        let mut b = Batch::default();
        for (account, id) in [(1u64, 1u64), (2, 2), (1, 3), (1, 4), (1, 5), (1, 6), (1, 7)] {
            let med = Med {
                id,
                account_id: account,
                end_to_end: "E".into(),
                status: if id % 2 == 0 { MedStatus::Cancelled } else { MedStatus::Received },
                reason: MedReason::RefundRequest,
                cause: None,
                description: None,
                analysis_result: None,
                analysis_details: None,
                requesting_bank: Participant { ispb: "0".into(), name: "b".into() },
                contested_bank: Participant { ispb: "0".into(), name: "b".into() },
                original: None,
                original_transaction_id: None,
                amount: Money::ZERO,
                blocked: Money::ZERO,
                refund_transaction_id: None,
                created_at: now,
                updated_at: now,
            };
            repo.put_med(&mut b, &med).unwrap();
        }
        storage.commit.commit_blocking(b).unwrap();
        let account = AccountId::new(1).unwrap();
        let ids = |(page, total): (Vec<Med>, usize)| (page.iter().map(|m| m.id).collect::<Vec<_>>(), total);
        assert_eq!(ids(repo.meds_page(account, |_| true, 0, 2).unwrap()), (vec![7, 6], 6));
        assert_eq!(ids(repo.meds_page(account, |_| true, 4, 2).unwrap()), (vec![3, 1], 6));
        let received = |m: &Med| m.status == MedStatus::Received;
        assert_eq!(ids(repo.meds_page(account, received, 1, 10).unwrap()), (vec![5, 3, 1], 4));
        assert_eq!(ids(repo.meds_page(account, received, 9, 10).unwrap()), (vec![], 4));
    }

    #[test]
    fn a_code_finds_its_charge_by_reference_and_an_old_cut_txid_only_when_it_is_unambiguous() {
        use crate::domain::transaction::{ChargeDetails, TxKind};
        let storage = Storage::memory().unwrap();
        let repo = Repo::new(&storage);
        let account = AccountId::new(1).unwrap();
        let now = Utc::now();
        let charge = |local: u64, txid: &str| {
            let mut tx =
                Transaction::new(local, uuid::Uuid::new_v4(), account, TxKind::CashIn, Money::ZERO, now);
            tx.charge = Some(ChargeDetails {
                correlation_id: uuid::Uuid::nil(),
                txid: txid.into(),
                pix_code: String::new(),
                expires_at: now,
                additional_info: Default::default(),
                cob: None,
                splits: vec![],
                split_transactions: vec![],
            });
            tx
        };
        let shared = "a".repeat(25);
        let mut b = Batch::default();
        repo.put_transaction(&mut b, &charge(1, &format!("{shared}X")), true).unwrap();
        repo.put_transaction(&mut b, &charge(2, "0123456789abcdef012345678"), true).unwrap();
        repo.put_transaction(&mut b, &charge(3, &format!("{}Z", "b".repeat(25))), true).unwrap();
        storage.commit.commit_blocking(b).unwrap();
        let found = |r: &str| repo.charge_by_code(account, r).unwrap().map(|t| t.local_id);
        assert_eq!(found(&code_reference(&format!("{shared}X"), 1)), Some(1));
        assert_eq!(found("0123456789abcdef012345678"), Some(2));
        assert_eq!(found(&format!("COB{:020}", 2)), None, "a family A charge is named by its txid");
        assert_eq!(found(&"b".repeat(25)), Some(3), "an old code: one txid begins with it");
        assert_eq!(found(&shared), Some(1));
        let mut b = Batch::default();
        repo.put_transaction(&mut b, &charge(4, &format!("{shared}Y")), true).unwrap();
        storage.commit.commit_blocking(b).unwrap();
        assert_eq!(found(&shared), None, "two txids begin with it: no guess");
        assert_eq!(
            repo.charge_by_code(AccountId::new(2).unwrap(), &code_reference("c".repeat(26).as_str(), 1))
                .unwrap(),
            None
        );
    }

    #[test]
    fn keys_are_built_with_their_numbers_zero_padded_as_the_layout_says() {
        let id = AccountId::new(42).unwrap();
        // 2025-11-23 02:00:00.123 UTC, still the 22nd in Sao Paulo.
        let at = DateTime::from_timestamp_millis(1_763_863_200_123).unwrap();
        assert_eq!(tx_key(7), b"tx/00000000000000000007");
        assert_eq!(tx_key(u64::MAX), b"tx/18446744073709551615");
        assert_eq!(
            String::from_utf8(tlist_key(id, at, 9)).unwrap(),
            format!("tlist/{:020}/{:013}/{:020}", 42, 1_763_863_200_123u64, 9)
        );
        assert_eq!(pend_key(id, 5), format!("pend/{:020}/{:020}", 42, 5).into_bytes());
        // The counter of an entry: its Sao Paulo day.
        assert_eq!(
            tlist_counter(&tlist_key(id, at, 9), b"PW").map(String::from_utf8),
            Some(Ok(format!("tcnt/{:020}/20251122/PW", 42)))
        );
    }

    #[test]
    fn an_account_and_its_client_are_created_together_and_the_sequence_advances() {
        let repo = Repo::new(&Storage::memory().unwrap());
        let first = repo.next_account_id().ok();
        assert_eq!(first.map(AccountId::get), Some(1));
        let (a, c) = sample(1).unwrap_or_else(|| unreachable!());
        let batch = repo.account_batch(&a, &c, None);
        assert!(batch.and_then(|b| repo.commit_batch(&b)).is_ok());
        assert_eq!(repo.account(a.id).ok().flatten(), Some(a.clone()));
        assert_eq!(repo.client(&c.client_id).ok().flatten(), Some(c));
        assert_eq!(repo.next_account_id().ok().map(AccountId::get), Some(2));
    }

    #[test]
    fn a_cached_record_is_never_served_after_an_admin_write_changed_it() {
        let storage = Storage::memory().unwrap();
        let repo = Repo::new(&storage);
        let (mut a, c) = sample(1).unwrap();
        repo.commit_batch(&repo.account_batch(&a, &c, None).unwrap()).unwrap();
        assert_eq!(repo.account(a.id).unwrap(), Some(a.clone()), "now cached");
        assert_eq!(repo.client(&c.client_id).unwrap(), Some(c.clone()));
        a.webhook_secret = "whsec_rotated".into();
        repo.put_account(&a).unwrap();
        assert_eq!(repo.account(a.id).unwrap(), Some(a.clone()));
        let mut c2 = c.clone();
        c2.secret_hash_hex = "22".into();
        repo.put_client(&c2).unwrap();
        assert_eq!(repo.client(&c.client_id).unwrap(), Some(c2));
    }

    #[test]
    fn a_record_that_does_not_decode_is_reported_as_corrupt() {
        let storage = Storage::memory().unwrap();
        let mut b = Batch::default();
        b.put(account_key(AccountId::new(7).unwrap_or_else(|| unreachable!())), b"{".to_vec());
        assert!(storage.commit.commit_blocking(b).is_ok());
        let repo = Repo::new(&storage);
        let got = repo.account(AccountId::new(7).unwrap_or_else(|| unreachable!()));
        assert!(matches!(got, Err(RepoError::Corrupt { .. })));
    }

    #[actix_rt::test]
    async fn a_database_from_before_the_list_index_is_indexed_once_at_start() {
        use crate::domain::transaction::TxKind;
        let storage = Storage::memory().unwrap();
        let repo = Repo::new(&storage);
        let account = AccountId::new(3).unwrap();
        let now = Utc::now();
        // Written the old way: records and their indexes, but no list index.
        let mut b = Batch::default();
        for i in 0..5u64 {
            let mut tx = Transaction::new(
                i,
                uuid::Uuid::new_v4(),
                account,
                TxKind::PixIn,
                Money::parse("1").unwrap(),
                now,
            );
            tx.status = TxStatus::Confirmed;
            b.put(tx_key(i), to_json(&tx).unwrap());
        }
        // Straight into the view, around the committer's counting, as the old release left it.
        storage.view.apply(&b).unwrap();
        let commit = &storage.commit;
        let range = (local_day(now), local_day(now));
        assert_eq!(repo.transactions_page(account, range, (None, None), 0, 10).unwrap().1, 0);
        assert_eq!(repo.backfill_transaction_index(commit).unwrap(), 5);
        commit.commit(Batch::default()).await.unwrap();
        let (page, total) =
            repo.transactions_page(account, range, (Some(TxStatus::Confirmed), None), 0, 10).unwrap();
        assert_eq!((page.len(), total), (5, 5));
        assert_eq!(page.iter().map(|t| t.local_id).collect::<Vec<_>>(), vec![4, 3, 2, 1, 0], "newest first");
        assert_eq!(repo.backfill_transaction_index(commit).unwrap(), 0, "only once");
        commit.commit(Batch::default()).await.unwrap();
        assert_eq!(
            repo.transactions_page(account, range, (None, None), 0, 10).unwrap().1,
            5,
            "counts unchanged"
        );
    }
}
