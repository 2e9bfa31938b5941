//! Ledgers: an account's balance and counters, and the holds of its pending debits and
//! MED cases. Loading a ledger rebuilds it from its record and its holds.

use crate::domain::ids::AccountId;
use crate::domain::ledger::{Ledger, LedgerState, StoredKeys};
use crate::domain::money::Money;

use super::{corrupt, Repo, RepoError};
use crate::store::records::*;
use std::collections::HashMap;

use crate::store::{codec, keys, Batch};

impl Repo {
    pub fn put_ledger(&self, b: &mut Batch, id: AccountId, state: &LedgerState) -> Result<(), RepoError> {
        let mut record = Vec::with_capacity(48);
        codec::encode_ledger(state, &mut record);
        b.put(keys::ledger(id), record);
        Ok(())
    }

    /// The hold of a new pending debit (or MED): a new key.
    pub fn put_pending(&self, b: &mut Batch, id: AccountId, local: u64, hold: Money) {
        b.insert(keys::pending(id, local), codec::encode_hold(hold));
    }

    pub fn delete_pending(&self, b: &mut Batch, id: AccountId, local: u64) {
        b.delete(keys::pending(id, local));
    }

    /// The accounts that have pending debits, open charges, recurrences awaiting an answer or
    /// recurring charges still `ATIVA` (to resume them at start).
    pub fn accounts_with_pending(&self) -> Result<Vec<AccountId>, RepoError> {
        let mut out: Vec<AccountId> = Vec::new();
        let mut holds = self.store.scan_prefix(keys::PENDING)?;
        holds.extend(self.store.scan_prefix(keys::OPEN_CHARGES)?);
        holds.extend(self.store.scan_prefix(keys::OPEN_RECS)?);
        holds.extend(self.store.scan_prefix(keys::OPEN_COBRS)?);
        for (k, _) in holds {
            let id = keys::account_of_hold(&k).ok_or_else(|| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "bad pending key".into(),
            })?;
            if !out.contains(&id) {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Every transaction with a pending debit (payouts waiting for their rail, whatever the
    /// account): a MED's hold, which is no transaction, is skipped.
    pub fn pending_transactions(&self) -> Result<Vec<crate::domain::transaction::Transaction>, RepoError> {
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(keys::PENDING)? {
            let local = keys::local_of_pending(&k).ok_or_else(|| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "bad pending key".into(),
            })?;
            if let Some(tx) = self.transaction(local)? {
                out.push(tx);
            }
        }
        Ok(out)
    }

    /// The account's ledger as stored, or its opening ledger when it never moved money.
    pub fn load_ledger(&self, account: &AccountRecord) -> Result<Ledger, RepoError> {
        let id = account.id;
        let key = keys::ledger(id);
        let Some(bytes) = self.store.get(&key)? else {
            return Ok(Ledger::opening(account.opening_balance));
        };
        let state = codec::decode_ledger(&bytes).map_err(|e| corrupt(&key, e))?;
        let corrupt = |what: &str, reason: String| RepoError::Corrupt { key: format!("{what}/{id}"), reason };
        let strip = |prefix: &[u8], k: &[u8]| String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
        let mut pending = HashMap::new();
        let p = keys::pending_prefix(id);
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
            Some(e) => self.local_by(&keys::external_id(id, e))?,
            None => None,
        };
        let idempotency = match idempotency_key {
            Some(k) => self.get_json::<(u64, String)>(&keys::dict_idempotency(id, k))?,
            None => None,
        };
        Ok(StoredKeys { external, idempotency })
    }
}
