//! On-us credits: what a payment between two accounts of this gateway owes its payee,
//! written with the payer's settlement and deleted once the payee carried it out; and the
//! payments in from the SPI an account accepted, until the SPI settles or rejects them; and
//! what the rail read and could not apply (unmatched rail items).

use crate::domain::decide::{Incoming, OnUsCredit};

use super::{parse_json, to_json, Batch, Repo, RepoError};

use crate::store::keys;

impl Repo {
    /// A credit owed to an account of this gateway that its payee has not carried out yet.
    pub fn on_us_credit(&self, end_to_end_id: &str) -> Result<Option<OnUsCredit>, RepoError> {
        self.get_json(&keys::on_us(end_to_end_id))
    }

    /// Every credit not carried out yet (delivered again at start).
    pub fn on_us_credits(&self) -> Result<Vec<OnUsCredit>, RepoError> {
        self.store.scan_prefix(keys::ON_US)?.into_iter().map(|(k, v)| parse_json(&k, &v)).collect()
    }

    /// A payment or return in from the SPI that its account accepted and the SPI has not
    /// settled or rejected yet.
    pub fn incoming(&self, id: &str) -> Result<Option<Incoming>, RepoError> {
        self.get_json(&keys::incoming(id))
    }

    /// Every payment or return in still waiting for the SPI (the reconciliation read).
    pub fn incoming_all(&self) -> Result<Vec<Incoming>, RepoError> {
        self.store.scan_prefix(keys::INCOMING)?.into_iter().map(|(k, v)| parse_json(&k, &v)).collect()
    }

    /// Records an unmatched rail item durably; the same message again is the same item
    /// (its first reading is kept). Answers whether it was new.
    pub async fn put_unmatched(&self, item: &crate::rail::Unmatched) -> Result<bool, RepoError> {
        let key = keys::unmatched(&item.digest);
        if self.store.get(&key)?.is_some() {
            return Ok(false);
        }
        let mut b = Batch::default();
        b.put(key, to_json(item)?);
        self.commit_async(b).await?;
        Ok(true)
    }

    /// Every unmatched rail item, open or resolved, oldest reading first.
    pub fn unmatched_items(&self) -> Result<Vec<crate::rail::Unmatched>, RepoError> {
        let mut items: Vec<crate::rail::Unmatched> = self
            .store
            .scan_prefix(keys::UNMATCHED)?
            .into_iter()
            .map(|(k, v)| parse_json(&k, &v))
            .collect::<Result<_, _>>()?;
        items.sort_by(|a, b| a.read_at.cmp(&b.read_at).then_with(|| a.digest.cmp(&b.digest)));
        Ok(items)
    }
}
