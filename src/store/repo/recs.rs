//! Pix Automático recurrences, per account: the record (with its solicitations), the index
//! from a solicitation to its recurrence, and the index of recurrences whose solicitation
//! awaits an answer (their actors keep its expiry's timer).

use crate::domain::ids::AccountId;
use crate::domain::rec::Recurrence;

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
        let open = keys::open_rec(rec.account_id, rec.local_id);
        if rec.awaiting().is_some() {
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

    /// The account's recurrences whose solicitation awaits an answer.
    pub fn open_recs(&self, id: AccountId) -> Result<Vec<Recurrence>, RepoError> {
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(&keys::open_recs_prefix(id))? {
            let local = keys::local_at_end(&k).ok_or_else(|| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "bad id".into(),
            })?;
            if let Some(r) = self.rec(id, local)? {
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
}
