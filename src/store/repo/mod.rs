//! The typed repository over a [`Store`](super::Store): one [`Repo`] handle, and one module
//! per entity that reads and writes it. The key layout is `keys.rs`'s; the records that
//! are not domain types are `records.rs`'s.
//!
//! - [`accounts`]: accounts, clients, certificates, receiving keys;
//! - [`transactions`]: transactions, their indexes and the plan of a command;
//! - [`ledger`]: ledgers and holds;
//! - [`charges`]: open charges and charges by txid or code;
//! - [`webhooks`]: endpoints, the outbox, delivery state and log;
//! - [`med`], [`on_us`], [`requests`]: MED cases, on-us credits, `Idempotency-Key` records;
//! - [`recs`]: Pix Automático recurrences and their solicitations;
//! - [`secrets`]: the secrets it keeps sealed at rest when a key file is configured.
//!
//! Every write goes through group commit: the payment paths' batches from the account
//! actors, and the admin writes here, which wait on the calling thread until they are
//! durable (they are rare, and must not write beside the committer).

mod accounts;
mod charges;
mod claims;
mod ledger;
mod med;
mod on_us;
mod recoveries;
mod recs;
mod requests;
mod secrets;
mod transactions;
mod webhooks;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::records::*;
use super::{codec, keys, Batch, GroupCommit, Layout, SharedStore, Storage, StoreError};
use crate::domain::certificate::Fingerprint;
use crate::domain::ids::{AccountId, ClientId};

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored record does not decode: a bug or a damaged database, never client input.
    #[error("corrupt record under {key}: {reason}")]
    Corrupt { key: String, reason: String },
    /// A secret sealed at rest that this process cannot open (no key file, or not the key
    /// that sealed it; `secrets.rs`): like a corrupt record, nothing a client sent.
    #[error("the sealed secret under {key} cannot be opened: {reason}")]
    Sealed { key: String, reason: String },
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
    /// The keys that seal secrets at rest (`secrets.rs`), when a key file is configured.
    sealing: Option<Arc<crate::auth::sealing::SealingKeys>>,
}

impl Repo {
    pub fn new(storage: &Storage) -> Repo {
        Repo {
            store: Arc::clone(&storage.view),
            writer: Arc::clone(&storage.commit),
            auth: Arc::default(),
            admin_writes: Arc::new(Mutex::new(())),
            sealing: None,
        }
    }

    /// This repository, sealing the secrets it writes under `keys` and opening those it reads.
    pub fn with_sealing(mut self, keys: Option<Arc<crate::auth::sealing::SealingKeys>>) -> Repo {
        self.sealing = keys;
        self
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

    async fn commit_async(&self, b: Batch) -> Result<(), RepoError> {
        self.writer.commit(b).await.map_err(|e| match e {
            super::CommitError::Full(why) => RepoError::Store(StoreError::Full(why)),
            other => RepoError::Store(StoreError::Engine(other.to_string())),
        })
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

    pub fn delete_meta(&self, key: &[u8]) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.delete(key);
        self.commit(&b)
    }

    /// Forgets the cached accounts: an account record was written by a plan (a claim took
    /// its receiving key), not through this repository's own writes.
    pub fn forget_cached_accounts(&self) {
        let mut auth = self.auth.write().unwrap_or_else(|p| p.into_inner());
        auth.generation += 1;
        auth.accounts.clear();
    }

    /// Applies and flushes a batch made by this repository.
    pub fn commit_batch(&self, batch: &Batch) -> Result<(), RepoError> {
        self.commit(batch)
    }

    pub(crate) fn local_by(&self, key: &[u8]) -> Result<Option<u64>, RepoError> {
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

    /// Whether storage answers (for `/healthz`).
    pub fn ping(&self) -> Result<(), RepoError> {
        self.store.get(keys::JWT_KEY)?;
        Ok(())
    }

    /// What storage needs to know of this layout: the counted list index, and the keys
    /// kept in pages ([`keys::PAGES`](super::keys::PAGES)).
    pub fn layout() -> Layout {
        Layout { counted: Some(keys::list_index()), pages: keys::PAGES }
    }
}

impl Repo {
    /// One page of the JSON records with `from <= key < to` that `keep` keeps, highest key
    /// first, after `skip` of them, and how many it keeps in all. Only the page is held: the
    /// rest are read one at a time and counted.
    fn json_page<T: DeserializeOwned>(
        &self,
        (from, to): (&[u8], &[u8]),
        keep: impl Fn(&T) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<T>, usize), RepoError> {
        let (mut page, mut total, mut bad) = (Vec::new(), 0usize, None);
        self.store.scan_rev(from, to, &mut |k, v| {
            match parse_json::<T>(k, v) {
                Ok(item) if keep(&item) => {
                    if total >= skip && page.len() < size {
                        page.push(item);
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
}

fn parse_json<T: DeserializeOwned>(key: &[u8], value: &[u8]) -> Result<T, RepoError> {
    serde_json::from_slice(value).map_err(|e| RepoError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: e.to_string(),
    })
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
    use chrono::{DateTime, Utc};

    use crate::domain::account::AccountName;
    use crate::domain::account::{AccountProfile, AccountSettings};
    use crate::domain::document::TaxId;
    use crate::domain::listing::local_day;
    use crate::domain::money::Money;
    use crate::domain::transaction::{code_reference, Transaction, TxStatus};

    pub(super) fn sample(id: u64) -> Option<(AccountRecord, ClientRecord)> {
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
    fn a_renames_key_updates_are_written_with_it_end_only_for_the_name_sent_and_go_with_their_key() {
        let storage = Storage::memory().unwrap();
        let repo = Repo::new(&storage);
        let (mut account, client) = sample(7).unwrap();
        repo.commit_batch(&repo.account_batch(&account, &client, None).unwrap()).unwrap();
        let key = |k: &str| KeyRecord {
            key: k.into(),
            key_type: "EMAIL".into(),
            registered_at: DateTime::<Utc>::UNIX_EPOCH,
            cid: Some("0".repeat(64)),
            request_id: None,
        };
        for k in ["a@x.com", "b@x.com", "c@x.com"] {
            repo.put_key(account.id, &key(k)).unwrap();
        }
        account.profile.name = AccountName::parse("Acme Nova").unwrap();
        let keys: Vec<String> = ["a@x.com", "b@x.com", "c@x.com"].map(str::to_owned).to_vec();
        repo.rename_account(&account, &keys).unwrap();
        assert_eq!(repo.account(account.id).unwrap().unwrap().profile.name.as_str(), "Acme Nova");
        let pending = repo.pending_key_updates(10).unwrap();
        assert_eq!(pending.len(), 3);
        assert!(pending.iter().all(|(id, _, name)| *id == account.id && name == "Acme Nova"));
        assert_eq!(repo.pending_key_updates(2).unwrap().len(), 2, "a turn's worth at most");
        // A newer rename while the first name was in flight: the update stays, for the newer.
        account.profile.name = AccountName::parse("Acme Novíssima").unwrap();
        repo.rename_account(&account, &keys[..1]).unwrap();
        let cid = Some("1".repeat(64));
        assert!(!repo.end_key_update(account.id, "a@x.com", "Acme Nova", Some(cid.clone())).unwrap());
        let kept = repo.keys_of(account.id).unwrap();
        assert_eq!(kept[0].cid, cid, "the DICT's entry as it is now");
        assert!(repo.end_key_update(account.id, "a@x.com", "Acme Novíssima", Some(cid)).unwrap());
        // Refused for good: ends, the key's CID untouched.
        assert!(repo.end_key_update(account.id, "b@x.com", "Acme Nova", None).unwrap());
        assert_eq!(repo.keys_of(account.id).unwrap()[1].cid, Some("0".repeat(64)));
        // A key removed takes its pending update with it.
        repo.remove_key(account.id, "c@x.com").unwrap();
        assert!(repo.pending_key_updates(10).unwrap().is_empty());
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
                dict_refund_id: None,
                infraction: None,
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
        b.put(keys::account(AccountId::new(7).unwrap_or_else(|| unreachable!())), b"{".to_vec());
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
            b.put(keys::transaction(i), to_json(&tx).unwrap());
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

    /// A database from before the `pixin/` index: its received PIX (a paid charge created
    /// days before its payment among them) are indexed once, by when their money arrived.
    #[actix_rt::test]
    async fn a_database_from_before_the_received_index_is_indexed_once_by_arrival() {
        use crate::domain::transaction::TxKind;
        let storage = Storage::memory().unwrap();
        let repo = Repo::new(&storage);
        let account = AccountId::new(3).unwrap();
        let now = Utc::now();
        let days = |n: i64| now - chrono::Duration::days(n);
        let tx = |local: u64, kind: TxKind, created: chrono::DateTime<Utc>| {
            let mut t = Transaction::new(
                local,
                uuid::Uuid::new_v4(),
                account,
                kind,
                Money::parse("1").unwrap(),
                created,
            );
            t.status = TxStatus::Confirmed;
            t.processed_at = Some(created);
            t
        };
        let mut charge = tx(1, TxKind::CashIn, days(5));
        charge.processed_at = Some(days(1));
        let mut open = tx(3, TxKind::CashIn, days(2));
        open.status = TxStatus::Pending;
        let old = [charge, tx(2, TxKind::PixIn, days(2)), open, tx(4, TxKind::CashOut, days(1))];
        let mut b = Batch::default();
        for t in &old {
            b.put(keys::transaction(t.local_id), to_json(t).unwrap());
        }
        storage.view.apply(&b).unwrap();
        let commit = &storage.commit;
        assert_eq!(repo.backfill_received_index(commit).unwrap(), 2, "the paid charge and the PIX in");
        commit.commit(Batch::default()).await.unwrap();
        let ids = |from: i64, to: i64| {
            let (page, total) =
                repo.received_in_page(account, (days(from), days(to)), |_| true, 0, 10).unwrap();
            (page.iter().map(|t| t.local_id).collect::<Vec<_>>(), total)
        };
        assert_eq!(ids(3, 0), (vec![1, 2], 2), "newest first by arrival: the charge paid yesterday first");
        assert_eq!(ids(6, 4), (vec![], 0), "not by the charge's creation");
        assert_eq!(repo.backfill_received_index(commit).unwrap(), 0, "only once");
    }
}
