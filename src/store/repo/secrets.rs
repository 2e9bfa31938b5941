//! The secrets the store keeps, sealed at rest when a key file is configured
//! (`auth::sealing`): the token-signing keys, the payload-location key, and each account's
//! webhook secret. Everything else reads and writes them in clear through this module.
//!
//! Invariants: a repository with keys writes every secret sealed under the first key, and
//! reads both sealed values and clear ones (a store sealed at its first start with a key
//! file, and one written before, read the same way); a repository without keys writes them
//! in clear and refuses a sealed value, naming the missing key file. [`Repo::seal_stored_secrets`]
//! reseals whatever is not under the current key, at start, before anything reads them.

use crate::auth::sealing::{self, SealError};
use crate::domain::ids::AccountId;
use crate::store::keys;
use crate::store::records::AccountRecord;
use crate::store::Batch;

use super::{parse_json, to_json, Repo, RepoError};

/// The store's meta values that are secrets.
pub const SECRET_META: [&[u8]; 3] = [keys::JWT_KEY, keys::JWT_KEY_PREVIOUS, keys::LOCATION_KEY];
/// Accounts resealed per durable write at start.
const RESEAL_BATCH_ACCOUNTS_MAX: usize = 1_000;

/// The place an account's webhook secret is sealed for: its record's key and the field.
fn webhook_secret_place(id: AccountId) -> Vec<u8> {
    let mut place = keys::account(id);
    place.extend_from_slice(b"#webhookSecret");
    place
}

fn unreadable(place: &[u8], e: SealError) -> RepoError {
    RepoError::Sealed { key: String::from_utf8_lossy(place).into_owned(), reason: e.to_string() }
}

/// What a start with a key file resealed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Resealed {
    pub meta: usize,
    pub accounts: usize,
}

impl Repo {
    /// Whether this repository seals what it writes.
    pub fn seals(&self) -> bool {
        self.sealing.is_some()
    }

    /// The id of the key this repository seals under.
    pub fn sealing_key_id(&self) -> Option<&str> {
        self.sealing.as_deref().map(sealing::SealingKeys::current_id)
    }

    fn seal_bytes(&self, place: &[u8], clear: &[u8]) -> Result<Vec<u8>, RepoError> {
        match &self.sealing {
            None => Ok(clear.to_vec()),
            Some(k) => k.seal(place, clear).map(String::into_bytes).map_err(|e| unreadable(place, e)),
        }
    }

    fn open_bytes(&self, place: &[u8], stored: Vec<u8>) -> Result<Vec<u8>, RepoError> {
        if !sealing::is_sealed(&stored) {
            return Ok(stored);
        }
        let text = String::from_utf8(stored).map_err(|_| unreadable(place, SealError::Damaged))?;
        match &self.sealing {
            None => Err(unreadable(place, SealError::NoKey)),
            Some(k) => k.open(place, &text).map_err(|e| unreadable(place, e)),
        }
    }

    /// A secret meta value, opened.
    pub fn secret_meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>, RepoError> {
        self.meta(key)?.map(|v| self.open_bytes(key, v)).transpose()
    }

    /// Stores a secret meta value, sealed when this repository seals.
    pub fn put_secret_meta(&self, key: &[u8], value: &[u8]) -> Result<(), RepoError> {
        let mut b = Batch::default();
        self.put_secret_meta_in(&mut b, key, value)?;
        self.commit(&b)
    }

    /// Adds the write of a secret meta value to a batch.
    pub fn put_secret_meta_in(&self, b: &mut Batch, key: &[u8], value: &[u8]) -> Result<(), RepoError> {
        b.put(key, self.seal_bytes(key, value)?);
        Ok(())
    }

    /// An account record as stored: its webhook secret sealed when this repository seals.
    pub(super) fn account_json(&self, account: &AccountRecord) -> Result<Vec<u8>, RepoError> {
        if self.sealing.is_none() {
            return to_json(account);
        }
        let place = webhook_secret_place(account.id);
        let sealed = self.seal_bytes(&place, account.webhook_secret.as_bytes())?;
        let mut stored = account.clone();
        stored.webhook_secret =
            String::from_utf8(sealed).map_err(|_| unreadable(&place, SealError::Damaged))?;
        to_json(&stored)
    }

    /// An account record as read: its webhook secret opened.
    pub(super) fn open_account(&self, mut account: AccountRecord) -> Result<AccountRecord, RepoError> {
        let place = webhook_secret_place(account.id);
        let clear = self.open_bytes(&place, std::mem::take(&mut account.webhook_secret).into_bytes())?;
        account.webhook_secret =
            String::from_utf8(clear).map_err(|_| unreadable(&place, SealError::Damaged))?;
        Ok(account)
    }

    /// Reseals, under the current key, every secret the store holds in clear or under an
    /// older key, then records the key's id (`meta/secrets_sealed_with`). Runs at start
    /// before anything reads them; a crash midway is redone by the next start, since values
    /// already resealed are skipped and the id is written last.
    pub fn seal_stored_secrets(&self) -> Result<Resealed, RepoError> {
        let Some(current) = self.sealing_key_id().map(str::to_owned) else {
            return Ok(Resealed::default());
        };
        let fresh = |stored: &[u8]| sealing::sealed_with(stored) == Some(current.as_str());
        let mut done = Resealed::default();
        let mut b = Batch::default();
        for key in SECRET_META {
            if let Some(stored) = self.meta(key)? {
                if !fresh(&stored) {
                    let clear = self.open_bytes(key, stored)?;
                    self.put_secret_meta_in(&mut b, key, &clear)?;
                    done.meta += 1;
                }
            }
        }
        let mut in_batch = 0;
        for (k, v) in self.store.scan_prefix(keys::ACCOUNTS)? {
            let account: AccountRecord = parse_json(&k, &v)?;
            if fresh(account.webhook_secret.as_bytes()) {
                continue;
            }
            let account = self.open_account(account)?;
            b.put(k, self.account_json(&account)?);
            done.accounts += 1;
            in_batch += 1;
            if in_batch == RESEAL_BATCH_ACCOUNTS_MAX {
                self.commit(&std::mem::take(&mut b))?;
                in_batch = 0;
            }
        }
        b.put(keys::SECRETS_SEALED_WITH, current.into_bytes());
        self.commit(&b)?;
        Ok(done)
    }

    /// The id of the key the store says its secrets are sealed under, if they are.
    pub fn secrets_sealed_with(&self) -> Result<Option<String>, RepoError> {
        Ok(self.meta(keys::SECRETS_SEALED_WITH)?.map(|b| String::from_utf8_lossy(&b).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::auth::sealing::SealingKeys;
    use crate::store::Storage;

    const K1: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const K2: &str = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100";

    fn keys(text: &str) -> Option<Arc<SealingKeys>> {
        Some(Arc::new(SealingKeys::parse(text).unwrap_or_else(|e| panic!("{e}"))))
    }

    fn account(id: u64) -> AccountRecord {
        let mut a = super::super::tests::sample(id).map(|(a, _)| a).unwrap_or_else(|| unreachable!());
        a.webhook_secret = format!("whsec_the_secret_of_{id}");
        a
    }

    /// Every value the store holds, as one string, to look for a secret in.
    fn everything(repo: &Repo) -> String {
        let all = repo.store().scan_prefix(b"").unwrap_or_default();
        all.iter()
            .map(|(k, v)| format!("{}={}\n", String::from_utf8_lossy(k), String::from_utf8_lossy(v)))
            .collect()
    }

    #[test]
    fn with_keys_no_secret_is_stored_in_clear_and_each_reads_back() {
        let storage = Storage::memory().unwrap_or_else(|e| panic!("{e}"));
        let repo = Repo::new(&storage).with_sealing(keys(K1));
        let a = account(1);
        repo.put_account(&a).unwrap_or_else(|e| panic!("{e}"));
        repo.put_secret_meta(keys::JWT_KEY, b"signing-key-bytes").unwrap_or_else(|e| panic!("{e}"));
        let stored = everything(&repo);
        assert!(!stored.contains(&a.webhook_secret), "{stored}");
        assert!(!stored.contains("signing-key-bytes"), "{stored}");
        assert_eq!(
            repo.account(a.id).ok().flatten().map(|r| r.webhook_secret),
            Some(a.webhook_secret.clone())
        );
        assert_eq!(repo.secret_meta(keys::JWT_KEY).ok().flatten(), Some(b"signing-key-bytes".to_vec()));

        // Without the key file the same store refuses to answer a sealed secret.
        let bare = Repo::new(&storage);
        assert!(matches!(bare.account(a.id), Err(RepoError::Sealed { .. })));
        assert!(matches!(bare.secret_meta(keys::JWT_KEY), Err(RepoError::Sealed { .. })));
    }

    #[test]
    fn a_start_with_keys_seals_a_clear_store_and_a_new_key_reseals_it() {
        let storage = Storage::memory().unwrap_or_else(|e| panic!("{e}"));
        let clear = Repo::new(&storage);
        let (a, b) = (account(1), account(2));
        clear.put_account(&a).unwrap_or_else(|e| panic!("{e}"));
        clear.put_account(&b).unwrap_or_else(|e| panic!("{e}"));
        clear.put_secret_meta(keys::LOCATION_KEY, b"loc").unwrap_or_else(|e| panic!("{e}"));
        assert!(everything(&clear).contains(&a.webhook_secret));

        let first = Repo::new(&storage).with_sealing(keys(K1));
        assert_eq!(first.seal_stored_secrets().ok(), Some(Resealed { meta: 1, accounts: 2 }));
        assert!(!everything(&first).contains(&a.webhook_secret));
        assert_eq!(first.secrets_sealed_with().ok().flatten().as_deref(), first.sealing_key_id());
        // A second start has nothing to do.
        assert_eq!(first.seal_stored_secrets().ok(), Some(Resealed::default()));

        // A new key first, the old below it: everything moves under the new one.
        let rotated = Repo::new(&storage).with_sealing(keys(&format!("{K2}\n{K1}")));
        assert_eq!(rotated.seal_stored_secrets().ok(), Some(Resealed { meta: 1, accounts: 2 }));
        let only_new = Repo::new(&storage).with_sealing(keys(K2));
        assert_eq!(only_new.account(b.id).ok().flatten().map(|r| r.webhook_secret), Some(b.webhook_secret));
        assert_eq!(only_new.secret_meta(keys::LOCATION_KEY).ok().flatten(), Some(b"loc".to_vec()));
        let only_old = Repo::new(&storage).with_sealing(keys(K1));
        assert!(matches!(only_old.account(a.id), Err(RepoError::Sealed { .. })));
    }

    #[test]
    fn a_sealed_secret_moved_to_another_account_does_not_open() {
        let storage = Storage::memory().unwrap_or_else(|e| panic!("{e}"));
        let repo = Repo::new(&storage).with_sealing(keys(K1));
        let (a, mut b) = (account(1), account(2));
        repo.put_account(&a).unwrap_or_else(|e| panic!("{e}"));
        let stored: AccountRecord = repo
            .store()
            .get(&keys::account(a.id))
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_slice(&v).ok())
            .unwrap_or_else(|| unreachable!());
        b.webhook_secret = stored.webhook_secret;
        let mut batch = Batch::default();
        batch.put(keys::account(b.id), to_json(&b).unwrap_or_default());
        repo.commit_batch(&batch).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(repo.account(b.id), Err(RepoError::Sealed { .. })));
    }
}
