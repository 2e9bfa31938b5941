//! DICT key claims, per account (domain::claim): each copy, the index by the DICT's id, the
//! index of claims not yet final (whose steps the gateway may owe), and where the claims
//! poller's next list starts.

use chrono::{DateTime, Utc};

use crate::domain::claim::{Claim, Role};
use crate::domain::ids::AccountId;

use super::{to_json, Repo, RepoError};

use crate::store::{keys, Batch};

impl Repo {
    /// Writes a claim as it now is, with its indexes.
    pub fn put_claim(&self, b: &mut Batch, claim: &Claim) -> Result<(), RepoError> {
        b.put(keys::claim(claim.account_id, claim.local_id), to_json(claim)?);
        b.put(keys::claim_id(&claim.id, claim.role.as_str()), to_json(&(claim.account_id, claim.local_id))?);
        let open = keys::open_claim(claim.account_id, claim.local_id);
        if claim.status.is_final() {
            b.delete(open);
        } else {
            b.put(open, Vec::new());
        }
        Ok(())
    }

    /// A claim by the DICT's id and this gateway's side, whichever account holds it.
    pub fn claim_by_id(&self, id: &str, role: Role) -> Result<Option<Claim>, RepoError> {
        let Some((account, local)) = self.get_json::<(u64, u64)>(&keys::claim_id(id, role.as_str()))? else {
            return Ok(None);
        };
        self.get_json(&keys::claim(account, local))
    }

    /// One page of the account's claims that `keep` keeps, newest first, after `skip` of
    /// them, and how many it keeps in all.
    pub fn claims_page(
        &self,
        id: AccountId,
        keep: impl Fn(&Claim) -> bool,
        skip: usize,
        size: usize,
    ) -> Result<(Vec<Claim>, usize), RepoError> {
        let (from, to) = keys::claims_range(id);
        self.json_page((&from, &to), keep, skip, size)
    }

    /// Every claim not yet `CANCELLED` or `COMPLETED`, of every account.
    pub fn open_claims(&self) -> Result<Vec<Claim>, RepoError> {
        let mut out = Vec::new();
        for (k, _) in self.store.scan_prefix(keys::OPEN_CLAIMS)? {
            let corrupt = || RepoError::Corrupt {
                key: String::from_utf8_lossy(&k).into_owned(),
                reason: "bad id".into(),
            };
            let text = std::str::from_utf8(&k[keys::OPEN_CLAIMS.len()..]).map_err(|_| corrupt())?;
            let (account, local) = text.split_once('/').ok_or_else(corrupt)?;
            let account: u64 = account.parse().map_err(|_| corrupt())?;
            let local: u64 = local.parse().map_err(|_| corrupt())?;
            if let Some(c) = self.get_json(&keys::claim(account, local))? {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// Where the claims poller's next list starts (`None`: from the first claim).
    pub fn claims_after(&self) -> Result<Option<DateTime<Utc>>, RepoError> {
        Ok(self
            .meta(keys::DICT_CLAIMS_AFTER)?
            .and_then(|v| String::from_utf8(v).ok())
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .map(|d| d.with_timezone(&Utc)))
    }

    /// Every claim the DICT changed before `at` is recorded.
    pub fn set_claims_after(&self, at: DateTime<Utc>) -> Result<(), RepoError> {
        self.put_meta(
            keys::DICT_CLAIMS_AFTER,
            at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true).as_bytes(),
        )
    }
}
