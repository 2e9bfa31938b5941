//! The account actor's DICT key claims: the copy of a claim as the DICT last answered it,
//! and the key that leaves or arrives with it. Gather (the copy, ahead of storage; the
//! account's keys), decide with [`crate::domain::decide::observe_claim`], execute, reply
//! once durable. The DICT is the claim's truth: the actor never takes a step itself (the
//! claims poller and the routes do, at the DICT, and bring the answer here).

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::BoxFuture;

use super::actor::AccountActor;
use super::messages::CommandError;
use super::registry::{Registry, RegistryError};
use crate::domain::claim::{Claim, Role, Seen};
use crate::domain::decide::{self, ClaimAccount};
use crate::domain::ids::AccountId;
use crate::rail::Unavailable;
use crate::store::RepoError;

/// The DICT answered this for a claim of the account, on `role`'s side: the copy as it now
/// is (the same copy when the answer says nothing new).
#[derive(Message, Clone)]
#[rtype(result = "Result<Claim, CommandError>")]
pub struct ObserveClaim {
    pub seen: Seen,
    pub role: Role,
}

impl AccountActor {
    /// The account's copy of a claim: the one in flight first, else storage's.
    fn claim_copy(
        &mut self,
        id: &str,
        role: Role,
        ctx: &mut Context<Self>,
    ) -> Result<Option<Claim>, CommandError> {
        let held = self.work().claims.in_flight().filter(|c| c.id == id && c.role == role).last().cloned();
        if held.is_some() {
            return Ok(held);
        }
        let r = self.deps.repo.claim_by_id(id, role);
        let stored = self.read(r, ctx)?;
        Ok(stored.filter(|c| c.account_id == self.account.id.get()))
    }

    fn observe_claim(&mut self, msg: ObserveClaim, ctx: &mut Context<Self>) -> Result<Claim, CommandError> {
        self.view()?;
        let existing = self.claim_copy(&msg.seen.id, msg.role, ctx)?;
        let r = self.deps.repo.keys_of(self.account.id);
        let keys: Vec<(String, String)> =
            self.read(r, ctx)?.into_iter().map(|k| (k.key, k.key_type)).collect();
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        let (name, receiving) = self.own_key();
        let (name, receiving) = (name.to_owned(), receiving.to_owned());
        let account =
            ClaimAccount { id: self.account.id, keys: &keys, receiving_key: &receiving, holder_name: &name };
        match decide::observe_claim(account, existing.as_ref(), &msg.seen, msg.role, &mut ids, now) {
            Ok(Some(plan)) => self.execute(plan, ctx),
            Ok(None) => existing.ok_or_else(|| {
                CommandError::Unavailable(crate::cause::Cause::msg(String::from(
                    "a claim without a copy changed nothing",
                )))
            }),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }
}

impl Handler<ObserveClaim> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Claim, CommandError>>;

    fn handle(&mut self, msg: ObserveClaim, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.observe_claim(msg, ctx);
        self.reply_when_durable(reply)
    }
}

/// The accounts a claim the DICT answered concerns, and on which side: the claimer's
/// account is the one the claim's account number names (when our ISPB is the claimer's);
/// the donor's is the one that holds the key (when our ISPB is the donor), or, once the key
/// has left it, the one whose copy the claim already has. A side of ours that names no
/// live account of ours is logged and counted, not recorded.
fn sides(repo: &crate::store::Repo, seen: &Seen, ours: &str) -> Result<Vec<(Role, AccountId)>, RepoError> {
    let mut out = Vec::new();
    if seen.claimer == ours {
        let copy = repo.claim_by_id(&seen.id, Role::Claimer)?.and_then(|c| AccountId::new(c.account_id));
        let named = seen.claimer_account.parse().ok().and_then(AccountId::new);
        match copy.or(named) {
            Some(id) if repo.account(id)?.is_some_and(|a| !a.profile.sandbox) => {
                out.push((Role::Claimer, id))
            }
            _ => unattributed(seen, Role::Claimer),
        }
    }
    if seen.donor == ours {
        let copy = repo.claim_by_id(&seen.id, Role::Donor)?.and_then(|c| AccountId::new(c.account_id));
        match copy.map_or_else(|| repo.account_by_receiving_key(&seen.key), |id| Ok(Some(id)))? {
            Some(id) => out.push((Role::Donor, id)),
            None => unattributed(seen, Role::Donor),
        }
    }
    Ok(out)
}

fn unattributed(seen: &Seen, role: Role) {
    metrics::counter!("pixgw_dict_claims_unattributed_total").increment(1);
    tracing::error!(
        claim = seen.id,
        key = seen.key,
        role = role.as_str(),
        status = seen.status.as_str(),
        "a DICT claim names this participant but no account of it: the DICT and this gateway disagree on the key (see the sync verification)"
    );
}

/// The DICT answered `seen`: each account of ours it concerns records it (see [`sides`]).
pub(super) fn claim_seen(
    registry: Arc<Registry>,
    seen: Seen,
    ours: String,
) -> BoxFuture<'static, Result<Vec<Claim>, Unavailable>> {
    let found = sides(&registry.deps().repo, &seen, &ours).map_err(|e| Unavailable(e.to_string()));
    Box::pin(async move {
        let mut copies = Vec::new();
        for (role, id) in found? {
            let actor = match registry.get(id) {
                Ok(a) => a,
                Err(RegistryError::NotFound) => {
                    unattributed(&seen, role);
                    continue;
                }
                Err(e) => return Err(Unavailable(e.to_string())),
            };
            match actor.send(ObserveClaim { seen: seen.clone(), role }).await {
                Ok(Ok(c)) => copies.push(c),
                Ok(Err(e)) => return Err(Unavailable(e.to_string())),
                Err(e) => return Err(Unavailable(e.to_string())),
            }
        }
        Ok(copies)
    })
}
