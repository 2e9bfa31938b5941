//! Charges: the index of open charges (resumed and expired by their account's actor) and
//! the index that finds a charge by its txid or by the reference its BR Code carries.

use crate::domain::brcode::TXID_LEN_MAX;

use crate::domain::ids::AccountId;
use crate::domain::transaction::{code_reference, parse_code_reference, CodeReference, Transaction};

use super::{Repo, RepoError};

use crate::store::{keys, Batch};

impl Repo {
    pub fn put_open_charge(&self, b: &mut Batch, id: AccountId, local: u64) {
        b.insert(keys::open_charge(id, local), Vec::new());
    }

    pub fn delete_open_charge(&self, b: &mut Batch, id: AccountId, local: u64) {
        b.delete(keys::open_charge(id, local));
    }

    /// The account's open charges, oldest first.
    pub fn open_charges(&self, id: AccountId) -> Result<Vec<Transaction>, RepoError> {
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(&keys::open_charges_prefix(id))? {
            let local = keys::local_at_end(&k).ok_or_else(|| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "bad id".into(),
            })?;
            if let Some(t) = self.transaction(local)? {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// An account's charge by the txid of its BR Code.
    pub fn charge_by_txid(&self, id: AccountId, txid: &str) -> Result<Option<Transaction>, RepoError> {
        match self.local_by(&keys::charge_txid(id, txid))? {
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
                    let hits = self.store.scan_prefix(&keys::charge_txid(id, txid))?;
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
}

/// Whether a code with `reference` in its txid field names this charge: its reference, or
/// for a cob made before references, the first 25 characters of its txid.
fn is_named_by(c: &crate::domain::transaction::ChargeDetails, local: u64, reference: &str) -> bool {
    code_reference(&c.txid, local) == reference
        || (c.txid.len() > TXID_LEN_MAX && c.txid.starts_with(reference))
}
