//! MED cases, per account, newest first when listed.

use crate::domain::ids::AccountId;
use crate::domain::med::Med;

use super::{to_json, Repo, RepoError};

use crate::store::{keys, Batch};

impl Repo {
    pub fn put_med(&self, b: &mut Batch, med: &Med) -> Result<(), RepoError> {
        b.put(keys::med(med.account_id, med.id), to_json(med)?);
        Ok(())
    }

    pub fn med(&self, id: AccountId, med: u64) -> Result<Option<Med>, RepoError> {
        self.get_json(&keys::med(id.get(), med))
    }

    /// One page of the account's MEDs that `keep` keeps, newest first, after `skip` of them,
    /// and how many it keeps in all. Only the page is held: the rest are read one at a time
    /// and counted.
    pub fn meds_page(
        &self,
        id: AccountId,
        keep: impl Fn(&Med) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<Med>, usize), RepoError> {
        let (from, to) = keys::meds_range(id);
        self.json_page((&from, &to), keep, skip, size)
    }
}
