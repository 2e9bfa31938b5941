//! The accounts' side of the DICT's sync verification (domain::cid): the CIDs of their
//! keys, and the repair of a difference the DICT found, where the DICT wins. Every repair is
//! logged (target `pixgw::audit`) and counted (`pixgw_dict_sync_repairs_total{action}`).
//!
//! A key the DICT does not hold for us is dropped, unless it is an account's receiving key
//! (its charges carry it): that one is kept and logged as an error for an operator, since
//! dropping it would leave the account's new charges pointing nowhere. An entry the DICT
//! holds for us is taken in by the account its account number names, if that is a live
//! account of ours; the key moves there from another account of ours that had it.
//!
//! It also keeps the DICT's entries of our keys up to date when an account's holder is
//! renamed: the rename writes a pending update per key (`dictupd/`), which the rail's claims
//! poller sends (`updateEntry`) and ends here, the key taking its entry's new CID, so the
//! next sync verification finds the sets equal.

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
        request_id: Some(found.request_id),
    };
    if let Some(mut had) = repo.keys_of(id).map_err(unavailable)?.into_iter().find(|k| k.key == found.key) {
        had.cid = Some(found.cid.clone());
        had.request_id = Some(found.request_id);
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

/// Pending updates of DICT entries one turn sends at most.
pub const KEY_UPDATES_PER_TURN_MAX: usize = 100;

/// The DICT entries waiting for an update, as the rail sends them. An update whose account
/// or key is gone ends here: there is nothing left to update.
pub(super) fn pending_updates(repo: &Repo) -> Result<Vec<crate::rail::KeyUpdate>, Unavailable> {
    let mut out = Vec::new();
    for (id, key, name) in repo.pending_key_updates(KEY_UPDATES_PER_TURN_MAX).map_err(unavailable)? {
        let account = repo.account(id).map_err(unavailable)?;
        let record = repo.keys_of(id).map_err(unavailable)?.into_iter().find(|k| k.key == key);
        let (Some(account), Some(record)) = (account, record) else {
            let _guard = repo.admin_lock();
            repo.end_key_update(id, &key, &name, None).map_err(unavailable)?;
            continue;
        };
        out.push(crate::rail::KeyUpdate {
            account: id,
            key,
            key_type: record.key_type,
            name,
            document: account.profile.document.to_string(),
            opened: account.created_at,
            request_id: record.request_id,
        });
    }
    Ok(out)
}

/// See [`crate::rail::Inbound::key_update_ended`].
pub(super) fn update_ended(
    repo: &Repo,
    u: &crate::rail::KeyUpdate,
    cid: Option<Option<String>>,
) -> Result<bool, Unavailable> {
    let _guard = repo.admin_lock();
    repo.end_key_update(u.account, &u.key, &u.name, cid).map_err(unavailable)
}

/// See [`crate::rail::Inbound::tax_holders`].
pub(super) fn tax_holders(repo: &Repo) -> Result<Vec<crate::rail::Holder>, Unavailable> {
    let mut keys: std::collections::BTreeMap<AccountId, Vec<String>> = std::collections::BTreeMap::new();
    for (id, k) in repo.all_keys().map_err(unavailable)? {
        keys.entry(id).or_default().push(k.key);
    }
    let mut out = Vec::new();
    for (id, keys) in keys {
        let Some(a) = repo.account(id).map_err(unavailable)? else { continue };
        if a.profile.sandbox || a.profile.document.as_str().len() != 11 {
            continue;
        }
        out.push(crate::rail::Holder {
            account: id,
            name: a.profile.name.as_str().to_owned(),
            cpf: a.profile.document.to_string(),
            keys,
        });
    }
    Ok(out)
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
