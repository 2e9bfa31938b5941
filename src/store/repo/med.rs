//! MED cases, per account, newest first when listed.

use crate::domain::ids::AccountId;
use crate::domain::med::Med;

use super::{to_json, Repo, RepoError};

use crate::store::{keys, Batch};

impl Repo {
    pub fn put_med(&self, b: &mut Batch, med: &Med) -> Result<(), RepoError> {
        b.put(keys::med(med.account_id, med.id), to_json(med)?);
        if let Some(i) = &med.infraction {
            let index = keys::live_case(&i.report_id);
            if med.is_live() {
                b.put(index, to_json(&(med.account_id, med.id))?);
            } else {
                b.delete(index);
            }
        }
        Ok(())
    }

    /// Every MED 2.0 case still live, of every account.
    pub fn live_cases(&self) -> Result<Vec<Med>, RepoError> {
        self.live_cases_where(|_| true)
    }

    /// The account's MED 2.0 cases still live. Read through the index of live cases, which
    /// is small (empty on most days): an actor that starts asks it, and a scan of its own
    /// MEDs would cost every start a range read.
    pub fn live_cases_of(&self, id: AccountId) -> Result<Vec<Med>, RepoError> {
        self.live_cases_where(|account| account == id.get())
    }

    fn live_cases_where(&self, keep: impl Fn(u64) -> bool) -> Result<Vec<Med>, RepoError> {
        let mut out = Vec::new();
        for (k, v) in self.store.scan_prefix(keys::LIVE_CASES)? {
            let (account, med): (u64, u64) = serde_json::from_slice(&v).map_err(|e| RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: e.to_string(),
            })?;
            if !keep(account) {
                continue;
            }
            if let Some(m) = self.get_json::<Med>(&keys::med(account, med))? {
                out.push(m);
            }
        }
        Ok(out)
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
