//! Pix Automático, per account: recurrences (with their solicitations), the index from a
//! solicitation to its recurrence, the index of recurrences whose solicitation awaits an
//! answer; recurring charges, their txid index and the index of those still `ATIVA` (their
//! actors keep a timer for each).

use crate::domain::cobr::Cobr;
use crate::domain::ids::AccountId;
use crate::domain::rec::{LocRec, Recurrence};

use super::{to_json, Repo, RepoError};

use crate::store::{keys, Batch};

impl Repo {
    /// Writes a recurrence as it now is, with its indexes.
    pub fn put_rec(&self, b: &mut Batch, rec: &Recurrence) -> Result<(), RepoError> {
        b.put(keys::rec(rec.account_id, rec.local_id), to_json(rec)?);
        // A solicitation's index is written with the solicitation, once.
        if let Some(s) = rec.solicitations.last().filter(|s| s.history.len() <= 3) {
            b.put(keys::solicitation(rec.account_id, s.local_id), rec.local_id.to_be_bytes().to_vec());
        }
        // A payer of this gateway finds the recurrences offered to it through this index.
        if let Some(payer) = rec.on_us_payer() {
            b.put(keys::payer_rec(payer, rec.local_id), rec.account_id.to_be_bytes().to_vec());
        }
        let open = keys::open_rec(rec.account_id, rec.local_id);
        // Open while its actor has something to do at a time: an expiry, or a charge to send.
        if rec.deadline().is_some() {
            b.put(open, Vec::new());
        } else {
            b.delete(open);
        }
        Ok(())
    }

    /// The account's recurrence with this local id.
    pub fn rec(&self, id: AccountId, local: u64) -> Result<Option<Recurrence>, RepoError> {
        self.get_json(&keys::rec(id.get(), local))
    }

    /// The local id of the recurrence the account's solicitation (by its local id) belongs to.
    pub fn rec_of_solicitation(&self, id: AccountId, solicitation: u64) -> Result<Option<u64>, RepoError> {
        self.local_by(&keys::solicitation(id.get(), solicitation))
    }

    /// The receiver's account of the recurrence (by its local id) offered to `payer`, an
    /// account of this gateway; `None` when none was offered to it.
    pub fn receiver_of_payer_rec(&self, payer: AccountId, local: u64) -> Result<Option<u64>, RepoError> {
        self.local_by(&keys::payer_rec(payer.get(), local))
    }

    /// The recurrences offered to `payer` (an account of this gateway) as their payer, in
    /// the order they were made, as each receiver's storage holds them.
    pub fn payer_recs(&self, payer: AccountId) -> Result<Vec<Recurrence>, RepoError> {
        let mut out = Vec::new();
        for (k, v) in self.store.scan_prefix(&keys::payer_recs_prefix(payer))? {
            let corrupt = |reason: &str| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: reason.into(),
            };
            let local = keys::local_at_end(&k).ok_or_else(|| corrupt("bad id"))?;
            let receiver = <[u8; 8]>::try_from(v.as_slice()).map_err(|_| corrupt("bad account"))?;
            let receiver =
                AccountId::new(u64::from_be_bytes(receiver)).ok_or_else(|| corrupt("bad account"))?;
            if let Some(rec) = self.rec(receiver, local)? {
                out.push(rec);
            }
        }
        Ok(out)
    }

    /// The account's recurrences whose solicitation awaits an answer.
    pub fn open_recs(&self, id: AccountId) -> Result<Vec<Recurrence>, RepoError> {
        self.listed(&keys::open_recs_prefix(id), |local| self.rec(id, local))
    }

    /// The records an index under `prefix` names by the local id its keys end with.
    fn listed<T>(
        &self,
        prefix: &[u8],
        get: impl Fn(u64) -> Result<Option<T>, RepoError>,
    ) -> Result<Vec<T>, RepoError> {
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(prefix)? {
            let local = keys::local_at_end(&k).ok_or_else(|| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "bad id".into(),
            })?;
            if let Some(r) = get(local)? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// One page of the account's recurrences that `keep` keeps, newest first, after `skip`
    /// of them, and how many it keeps in all. Only the page is held.
    pub fn recs_page(
        &self,
        id: AccountId,
        keep: impl Fn(&Recurrence) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<Recurrence>, usize), RepoError> {
        let from = keys::recs_prefix(id);
        let mut to = from.clone();
        if let Some(last) = to.last_mut() {
            *last += 1;
        }
        self.json_page((&from, &to), keep, skip, size)
    }

    /// Writes a recurring charge as it now is, with its indexes.
    pub fn put_cobr(&self, b: &mut Batch, c: &Cobr) -> Result<(), RepoError> {
        b.put(keys::cobr(c.account_id, c.local_id), to_json(c)?);
        b.put(keys::cobr_txid(c.account_id, &c.txid), c.local_id.to_be_bytes().to_vec());
        let open = keys::open_cobr(c.account_id, c.local_id);
        if c.status.is_final() {
            b.delete(open);
        } else {
            b.put(open, Vec::new());
        }
        Ok(())
    }

    pub fn cobr(&self, id: AccountId, local: u64) -> Result<Option<Cobr>, RepoError> {
        self.get_json(&keys::cobr(id.get(), local))
    }

    /// The account's recurring charge with this txid.
    pub fn cobr_by_txid(&self, id: AccountId, txid: &str) -> Result<Option<Cobr>, RepoError> {
        match self.local_by(&keys::cobr_txid(id.get(), txid))? {
            Some(local) => self.cobr(id, local),
            None => Ok(None),
        }
    }

    /// The account's recurring charges still `ATIVA`.
    pub fn open_cobrs(&self, id: AccountId) -> Result<Vec<Cobr>, RepoError> {
        self.listed(&keys::open_cobrs_prefix(id), |local| self.cobr(id, local))
    }

    /// One page of the account's recurring charges that `keep` keeps, newest first.
    pub fn cobrs_page(
        &self,
        id: AccountId,
        keep: impl Fn(&Cobr) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<Cobr>, usize), RepoError> {
        let from = keys::cobrs_prefix(id);
        let mut to = from.clone();
        if let Some(last) = to.last_mut() {
            *last += 1;
        }
        self.json_page((&from, &to), keep, skip, size)
    }

    /// The account's recurrence location with this id.
    pub fn locrec(&self, id: AccountId, local: u64) -> Result<Option<LocRec>, RepoError> {
        self.get_json(&keys::locrec(id.get(), local))
    }

    /// One page of the account's locations that `keep` keeps, newest first, after `skip`
    /// of them, and how many it keeps in all.
    pub fn locrecs_page(
        &self,
        id: AccountId,
        keep: impl Fn(&LocRec) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<LocRec>, usize), RepoError> {
        let from = keys::locrecs_prefix(id);
        let mut to = from.clone();
        if let Some(last) = to.last_mut() {
            *last += 1;
        }
        self.json_page((&from, &to), keep, skip, size)
    }
}
