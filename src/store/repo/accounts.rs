//! Accounts and their credentials: account records, clients (the secret's salted hash),
//! certificates and their index per account, and the index of receiving keys.
//!
//! These change only on the admin paths, each as one flushed batch under the admin lock;
//! authenticated requests read them through the auth cache (`cached`).

use crate::domain::certificate::Fingerprint;
use crate::domain::ids::{AccountId, ClientId};

use super::{parse_json, to_json, Repo, RepoError};
use crate::store::records::*;

use crate::store::{keys, Batch, GroupCommit, StoreError};

impl Repo {
    /// The next account id. Call with the admin lock held, and commit the account in the
    /// same batch as [`Repo::account_batch`] makes, so an id is never handed out twice.
    pub fn next_account_id(&self) -> Result<AccountId, RepoError> {
        let last =
            match self.store.get(keys::SEQ_ACCOUNT)? {
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
        b.put(keys::SEQ_ACCOUNT, account.id.get().to_be_bytes().to_vec());
        b.put(keys::account(account.id), self.account_json(account)?);
        b.put(keys::receiving_key(&account.receiving_key), account.id.get().to_be_bytes().to_vec());
        b.put(keys::client(&client.client_id), to_json(client)?);
        if let Some(c) = cert {
            self.certificate_writes(&mut b, c)?;
        }
        Ok(b)
    }

    /// Records a key registered for an account: it resolves to the account (payments to it,
    /// on us and from the rails) and is listed with the account; `receiving` makes it the
    /// key the account's new charges carry.
    pub fn register_key(
        &self,
        account: &AccountRecord,
        key: &KeyRecord,
        receiving: bool,
    ) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(keys::receiving_key(&key.key), account.id.get().to_be_bytes().to_vec());
        b.put(keys::account_key(account.id, &key.key), to_json(key)?);
        if receiving {
            let mut a = account.clone();
            a.receiving_key = key.key.clone();
            b.put(keys::account(a.id), self.account_json(&a)?);
        }
        self.commit(&b)
    }

    /// Writes the account under its holder's new name and, in the same batch, a pending
    /// update of the DICT's entry of each of `dict_keys` to that name (docs/decisions.md
    /// "Key updates when an account changes"). Call with the admin lock held.
    pub fn rename_account(&self, account: &AccountRecord, dict_keys: &[String]) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(keys::account(account.id), self.account_json(account)?);
        for key in dict_keys {
            b.put(keys::key_update(account.id, key), account.profile.name.as_str().as_bytes().to_vec());
        }
        self.commit(&b)
    }

    /// Asks for the DICT's entry of `key` to take `name` (a key registered while its account
    /// was renamed). Call with the admin lock held.
    pub fn mark_key_update(&self, account: AccountId, key: &str, name: &str) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(keys::key_update(account, key), name.as_bytes().to_vec());
        self.commit(&b)
    }

    /// The DICT's entries waiting for an update, oldest account first, `limit` at most:
    /// (account, key, the name to send).
    pub fn pending_key_updates(&self, limit: usize) -> Result<Vec<(AccountId, String, String)>, RepoError> {
        let mut out = Vec::new();
        for (k, v) in self.store.scan_prefix(keys::KEY_UPDATES)?.into_iter().take(limit) {
            let corrupt = |reason: &str| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: reason.into(),
            };
            let rest = std::str::from_utf8(&k[keys::KEY_UPDATES.len()..]).map_err(|_| corrupt("not text"))?;
            let (id, key) = rest.split_once('/').ok_or_else(|| corrupt("no key"))?;
            let id = id.parse().ok().and_then(AccountId::new).ok_or_else(|| corrupt("bad account"))?;
            let name = String::from_utf8(v).map_err(|_| corrupt("the name is not text"))?;
            out.push((id, key.to_owned(), name));
        }
        Ok(out)
    }

    /// The update of the DICT's entry of `key` of `account` to `name` ended: taken, when
    /// `cid` is `Some` (the key's record takes the entry's new CID, `None` inside when it
    /// cannot be computed), or refused for good. The pending update ends unless a later
    /// rename asked for another name (that one goes next). A key the account no longer has
    /// (it left by a claim, or was removed) only ends the update. Call with the admin lock
    /// held. Answers whether the update ended.
    pub fn end_key_update(
        &self,
        account: AccountId,
        key: &str,
        name: &str,
        cid: Option<Option<String>>,
    ) -> Result<bool, RepoError> {
        let mut b = Batch::default();
        let had = self.store.get(&keys::account_key(account, key))?;
        if let (Some(v), Some(cid)) = (had, cid) {
            let mut record: KeyRecord = parse_json(&keys::account_key(account, key), &v)?;
            record.cid = cid;
            b.put(keys::account_key(account, key), to_json(&record)?);
        }
        let pending = self.store.get(&keys::key_update(account, key))?;
        let done = pending.as_deref().is_none_or(|p| p == name.as_bytes());
        if done {
            b.delete(keys::key_update(account, key));
        }
        self.commit(&b)?;
        Ok(done)
    }

    /// Forgets a key of an account (removed from the directory).
    pub fn remove_key(&self, account: AccountId, key: &str) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.delete(keys::receiving_key(key));
        b.delete(keys::account_key(account, key));
        b.delete(keys::key_update(account, key));
        self.commit(&b)
    }

    /// Every key registered for an account of this gateway, with its account.
    pub fn all_keys(&self) -> Result<Vec<(AccountId, KeyRecord)>, RepoError> {
        let mut out = Vec::new();
        for (k, v) in self.store.scan_prefix(b"akey/")? {
            let corrupt = || RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "bad account".into(),
            };
            let text = std::str::from_utf8(&k[5..]).map_err(|_| corrupt())?;
            let id = text
                .split('/')
                .next()
                .and_then(|a| a.parse().ok())
                .and_then(AccountId::new)
                .ok_or_else(corrupt)?;
            out.push((id, super::parse_json(&k, &v)?));
        }
        Ok(out)
    }

    /// Writes a key of an account as it now is (its CID adopted in a repair).
    pub fn put_key(&self, account: AccountId, key: &KeyRecord) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(keys::receiving_key(&key.key), account.get().to_be_bytes().to_vec());
        b.put(keys::account_key(account, &key.key), to_json(key)?);
        self.commit(&b)
    }

    /// The keys registered for an account, in key order.
    pub fn keys_of(&self, account: AccountId) -> Result<Vec<KeyRecord>, RepoError> {
        self.store
            .scan_prefix(&keys::account_keys_prefix(account))?
            .into_iter()
            .map(|(k, v)| super::parse_json(&k, &v))
            .collect()
    }

    /// The account an operator's request id made, if one did.
    pub fn account_by_request(&self, request_id: &str) -> Result<Option<AccountId>, RepoError> {
        Ok(self.local_by(&keys::account_request(request_id))?.and_then(AccountId::new))
    }

    pub fn account(&self, id: AccountId) -> Result<Option<AccountRecord>, RepoError> {
        self.cached(&id, (|c| &c.accounts, |c| &mut c.accounts), || {
            self.get_json(&keys::account(id))?.map(|a| self.open_account(a)).transpose()
        })
    }

    pub fn put_account(&self, account: &AccountRecord) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(keys::account(account.id), self.account_json(account)?);
        self.commit(&b)
    }

    pub fn client(&self, id: &ClientId) -> Result<Option<ClientRecord>, RepoError> {
        self.cached(id, (|c| &c.clients, |c| &mut c.clients), || self.get_json(&keys::client(id)))
    }

    pub fn put_client(&self, client: &ClientRecord) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(keys::client(&client.client_id), to_json(client)?);
        self.commit(&b)
    }

    pub fn certificate(&self, fp: &Fingerprint) -> Result<Option<CertificateRecord>, RepoError> {
        self.cached(fp, (|c| &c.certificates, |c| &mut c.certificates), || {
            self.get_json(&keys::certificate(fp))
        })
    }

    fn certificate_writes(&self, b: &mut Batch, c: &CertificateRecord) -> Result<(), RepoError> {
        b.put(keys::certificate(&c.fingerprint), to_json(c)?);
        b.put(keys::account_certificate(c.account_id, &c.fingerprint), Vec::new());
        Ok(())
    }

    pub fn put_certificate(&self, c: &CertificateRecord) -> Result<(), RepoError> {
        let mut b = Batch::default();
        self.certificate_writes(&mut b, c)?;
        self.commit(&b)
    }

    pub fn certificates_of(&self, id: AccountId) -> Result<Vec<CertificateRecord>, RepoError> {
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(&keys::account_certificates_prefix(id))? {
            let fp = keys::fingerprint_of(&k).ok_or_else(|| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "bad fingerprint".into(),
            })?;
            if let Some(c) = self.certificate(&fp)? {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// The account of this gateway whose receiving key `key` is.
    pub fn account_by_receiving_key(&self, key: &str) -> Result<Option<AccountId>, RepoError> {
        Ok(self.local_by(&keys::receiving_key(key))?.and_then(AccountId::new))
    }

    /// Indexes the receiving keys of accounts made before the index existed (once per
    /// database; a crash midway redoes it).
    pub fn backfill_receiving_keys(&self, commit: &GroupCommit) -> Result<usize, RepoError> {
        if self.store.get(keys::RKEY_BUILT)?.is_some() {
            return Ok(0);
        }
        let mut b = Batch::default();
        let mut written = 0;
        for (k, v) in self.store.scan_prefix(keys::ACCOUNTS)? {
            let account: AccountRecord = parse_json(&k, &v)?;
            b.put(keys::receiving_key(&account.receiving_key), account.id.get().to_be_bytes().to_vec());
            written += 1;
        }
        b.put(keys::RKEY_BUILT.to_vec(), vec![1]);
        commit.submit(b).map_err(|e| RepoError::Store(StoreError::Engine(e.to_string())))?;
        Ok(written)
    }

    /// A credit waiting for a second operator, by its reference.
    pub fn credit_proposal(
        &self,
        id: AccountId,
        reference: &str,
    ) -> Result<Option<crate::domain::decide::CreditProposal>, RepoError> {
        self.get_json(&keys::credit_proposal(id, reference))
    }

    /// Stores a credit proposal, durably.
    pub fn put_credit_proposal(
        &self,
        id: AccountId,
        p: &crate::domain::decide::CreditProposal,
    ) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(keys::credit_proposal(id, &p.reference), to_json(p)?);
        self.commit(&b)
    }
}
