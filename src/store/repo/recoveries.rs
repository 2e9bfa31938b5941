//! MED 2.0 contests, per account (domain::recovery): each record, its indexes by the
//! contested payment and by the DICT's id, the index of those not yet final (which the
//! recovery poller follows), and where the DICT's next list of events starts.

use crate::domain::ids::AccountId;
use crate::domain::recovery::Recovery;

use super::{to_json, Repo, RepoError};

use crate::store::{keys, Batch};

impl Repo {
    /// Writes a contest as it now is, with its indexes.
    pub fn put_recovery(&self, b: &mut Batch, r: &Recovery) -> Result<(), RepoError> {
        let at = to_json(&(r.account_id, r.id))?;
        b.put(keys::recovery(r.account_id, r.id), to_json(r)?);
        b.put(keys::recovery_e2e(&r.end_to_end_id), at.clone());
        if let Some(d) = &r.dict_id {
            b.put(keys::recovery_dict(d), at);
        }
        let open = keys::open_recovery(r.account_id, r.id);
        if r.status.is_final() {
            b.delete(open);
        } else {
            b.put(open, Vec::new());
        }
        Ok(())
    }

    fn recovery_at(&self, key: &[u8]) -> Result<Option<Recovery>, RepoError> {
        let Some((account, local)) = self.get_json::<(u64, u64)>(key)? else { return Ok(None) };
        self.get_json(&keys::recovery(account, local))
    }

    /// The contest of a payment, whichever account made it.
    pub fn recovery_by_e2e(&self, end_to_end_id: &str) -> Result<Option<Recovery>, RepoError> {
        self.recovery_at(&keys::recovery_e2e(end_to_end_id))
    }

    /// A contest by the DICT's id of its recovery.
    pub fn recovery_by_dict_id(&self, id: &str) -> Result<Option<Recovery>, RepoError> {
        self.recovery_at(&keys::recovery_dict(id))
    }

    /// A contest of an account.
    pub fn recovery(&self, account: AccountId, id: u64) -> Result<Option<Recovery>, RepoError> {
        self.get_json(&keys::recovery(account.get(), id))
    }

    /// One page of the account's contests that `keep` keeps, newest first.
    pub fn recoveries_page(
        &self,
        id: AccountId,
        keep: impl Fn(&Recovery) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<Recovery>, usize), RepoError> {
        let (from, to) = keys::recoveries_range(id);
        self.json_page((&from, &to), keep, skip, size)
    }

    /// Every contest not yet final, of every account.
    pub fn open_recoveries(&self) -> Result<Vec<Recovery>, RepoError> {
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(keys::OPEN_RECOVERIES)? {
            let corrupt = || RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "bad id".into(),
            };
            let text = std::str::from_utf8(&k[keys::OPEN_RECOVERIES.len()..]).map_err(|_| corrupt())?;
            let (account, local) = text.split_once('/').ok_or_else(corrupt)?;
            let account: u64 = account.parse().map_err(|_| corrupt())?;
            let local: u64 = local.parse().map_err(|_| corrupt())?;
            if let Some(r) = self.get_json(&keys::recovery(account, local))? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Where the DICT's next list of event notifications starts (`None`: its first).
    pub fn dict_events_cursor(&self) -> Result<Option<String>, RepoError> {
        Ok(self.meta(keys::DICT_EVENTS_CURSOR)?.and_then(|v| String::from_utf8(v).ok()))
    }

    /// Where the DICT's CID events of a key type are read from (`None`: never yet).
    pub fn cid_events_after(
        &self,
        key_type: &str,
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>, RepoError> {
        Ok(self
            .meta(&keys::cid_events_after(key_type))?
            .and_then(|v| String::from_utf8(v).ok())
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
            .map(|d| d.with_timezone(&chrono::Utc)))
    }

    /// The CID events of a key type before `at` are reflected in our keys.
    pub fn set_cid_events_after(
        &self,
        key_type: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), RepoError> {
        self.put_meta(
            &keys::cid_events_after(key_type),
            at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true).as_bytes(),
        )
    }

    /// Every event before `cursor` is recorded.
    pub fn set_dict_events_cursor(&self, cursor: &str) -> Result<(), RepoError> {
        self.put_meta(keys::DICT_EVENTS_CURSOR, cursor.as_bytes())
    }
}
