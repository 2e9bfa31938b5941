//! The accounts' side of the DICT's sync verification (domain::cid): the CIDs of their
//! keys, and the repair of a difference the DICT found, where the DICT wins. Every repair is
//! logged (target `pixgw::audit`) and counted (`pixgw_dict_sync_repairs_total{action}`).
//!
//! A key the DICT does not hold for us is dropped, unless it is an account's receiving key
//! (its charges carry it): that one is kept and logged as an error for an operator, since
//! dropping it would leave the account's new charges pointing nowhere. An entry the DICT
//! holds for us is taken in by the account its account number names, if that is a live
//! account of ours; the key moves there from another account of ours that had it.

use crate::domain::ids::AccountId;
use crate::rail::{Repair, SyncEntry, Unavailable};
use crate::store::{KeyRecord, Repo};

fn unavailable(e: impl std::fmt::Display) -> Unavailable {
    Unavailable(e.to_string())
}

fn counted(action: Repair, key: &str, cid: &str) -> Repair {
    metrics::counter!("pixgw_dict_sync_repairs_total", "action" => action.as_str()).increment(1);
    if matches!(action, Repair::Kept | Repair::Unattributed) {
        tracing::error!(target: "pixgw::audit", key, cid, action = action.as_str(), "a sync difference with the DICT was not repaired: an operator must look at it");
    } else {
        tracing::warn!(target: "pixgw::audit", key, cid, action = action.as_str(), "a sync difference with the DICT was repaired (the DICT wins)");
    }
    action
}

/// The CIDs of the keys of `key_type` this gateway recorded.
pub(super) fn cids(repo: &Repo, key_type: &str) -> Result<Vec<String>, Unavailable> {
    Ok(repo
        .all_keys()
        .map_err(unavailable)?
        .into_iter()
        .filter(|(_, k)| k.key_type == key_type)
        .filter_map(|(_, k)| k.cid)
        .collect())
}

/// See the module doc.
pub(super) fn take_in(repo: &Repo, ours: &str, found: SyncEntry) -> Result<Repair, Unavailable> {
    let named = found.account_number.parse().ok().and_then(AccountId::new);
    let live = match named {
        Some(id) => repo.account(id).map_err(unavailable)?.filter(|a| !a.profile.sandbox).map(|a| a.id),
        None => None,
    };
    let Some(id) = live.filter(|_| found.participant == ours) else {
        return Ok(counted(Repair::Unattributed, &found.key, &found.cid));
    };
    let record = KeyRecord {
        key: found.key.clone(),
        key_type: found.key_type.clone(),
        registered_at: found.created,
        cid: Some(found.cid.clone()),
    };
    if let Some(mut had) = repo.keys_of(id).map_err(unavailable)?.into_iter().find(|k| k.key == found.key) {
        had.cid = Some(found.cid.clone());
        repo.put_key(id, &had).map_err(unavailable)?;
        return Ok(counted(Repair::Adopted, &found.key, &found.cid));
    }
    if let Some(other) = repo.account_by_receiving_key(&found.key).map_err(unavailable)? {
        if other != id {
            let receiving =
                repo.account(other).map_err(unavailable)?.is_some_and(|a| a.receiving_key == found.key);
            if receiving {
                return Ok(counted(Repair::Kept, &found.key, &found.cid));
            }
            repo.remove_key(other, &found.key).map_err(unavailable)?;
        }
    }
    repo.put_key(id, &record).map_err(unavailable)?;
    Ok(counted(Repair::Added, &found.key, &found.cid))
}

/// See the module doc.
pub(super) fn drop_cid(repo: &Repo, cid: &str) -> Result<Repair, Unavailable> {
    let held = repo.all_keys().map_err(unavailable)?.into_iter().find(|(_, k)| k.cid.as_deref() == Some(cid));
    let Some((id, key)) = held else { return Ok(Repair::Removed) };
    let receiving = repo.account(id).map_err(unavailable)?.is_some_and(|a| a.receiving_key == key.key);
    if receiving {
        return Ok(counted(Repair::Kept, &key.key, cid));
    }
    repo.remove_key(id, &key.key).map_err(unavailable)?;
    Ok(counted(Repair::Removed, &key.key, cid))
}
