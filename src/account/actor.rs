//! The account actor: gather, decide, execute, reply.
//!
//! Every command takes the same four steps. The actor gathers what the command needs
//! (records from storage, fresh ids, the time), the pure [`crate::domain::decide`] turns it
//! into a plan, and [`AccountActor::execute`] carries the plan out: it queues the plan's
//! writes with the group committer, applies the ledger's change, and tracks what the records
//! say is pending, open or scheduled. The reply waits until the writes are durable
//! ([`AccountActor::reply_when_durable`]); meanwhile the actor serves its next command on
//! the state it already applied, so one fdatasync acknowledges many commands.
//!
//! Failure has one rule. A refusal is an answer and changes nothing. A full disk refuses the
//! write before anything is applied: the command did not happen (503). Anything else, a
//! storage failure or a plan that breaks an invariant (a bug), [`halts`](AccountActor::halt)
//! the actor: it answers nothing more, and stops once the writes it already queued have
//! landed, so the fresh actor the registry starts next loads a state that holds all of
//! them.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};

use super::messages::*;
use crate::clock::Clock;
use crate::domain::decide::{self, Account, Fresh, Ids, Plan, Record, Refusal, FRESH_RANDOM_BYTES};
use crate::domain::ledger::{Ledger, StoredKeys};
use crate::domain::med::{Med, MedStatus};
use crate::domain::pix_key::parse_directory_key;
use crate::domain::transaction::{BankInfo, ErrorCode, Transaction, TxKind, TxStatus};
use crate::sim::bank::{Bank, Submit};
use crate::sim::directory::Directory;
use crate::store::{AccountRecord, CommitError, GroupCommit, Repo, RepoError, StoreError};

/// Messages an actor's mailbox holds before senders wait.
const MAILBOX_CAPACITY: usize = 4096;
/// Key index entries (externalIds, idempotency keys) an actor holds in memory before it
/// forgets those whose writes are durable (storage answers for them).
const KEYS_HELD_MAX: usize = 1024;
/// How long a settlement refused for a full disk waits before it is written again.
pub(super) const SETTLE_RETRY_AFTER: Duration = Duration::from_secs(1);
/// How often an actor looks for expired transfers on its own.
const TICK_EVERY: Duration = Duration::from_secs(1);
/// An actor with nothing in flight stops after this long without a request (server
/// clock), so a node that served many accounts does not keep them all in memory; the
/// registry starts it again from storage on its next request.
pub const ACCOUNT_IDLE_STOP_SECONDS: i64 = 300;

/// What every account actor shares.
pub struct Deps {
    pub repo: Repo,
    pub commit: Arc<GroupCommit>,
    pub clock: Arc<Clock>,
    pub bank: Addr<Bank>,
    pub directory: Arc<Directory>,
}

pub struct AccountActor {
    pub(super) account: AccountRecord,
    pub(super) deps: Arc<Deps>,
    /// `Err` when the ledger could not be loaded: the actor stops at once.
    ledger: Result<Ledger, String>,
    /// Set by [`AccountActor::halt`]: the actor answers nothing more and is stopping.
    halted: bool,
    /// The writes queued before the halt have landed (or failed).
    halt_landed: bool,
    /// Pending debits, to settle without a storage read.
    pending: HashMap<u64, Transaction>,
    /// Open charges (PENDING cash-ins).
    pub(super) open_charges: HashMap<u64, Transaction>,
    /// `/dict/pix` and charge expirations: (deadline, local id).
    deadlines: BTreeSet<(DateTime<Utc>, u64)>,
    /// Scheduled splits: (when they go to the bank, local id).
    scheduled: BTreeSet<(DateTime<Utc>, u64)>,
    /// New pending debits to send to the bank once the writes that made them are durable.
    ready: Vec<Transaction>,
    /// The newest group-commit ticket of this actor's writes; replies wait for it.
    last_ticket: u64,
    /// Transactions this actor wrote that the committer may not have applied yet, with the
    /// ticket of their latest write: the actor reads its own writes here first, because
    /// storage lags its memory by up to one group. Pruned at every commit, so it holds only
    /// writes in flight.
    unapplied: HashMap<u64, (u64, Transaction)>,
    unapplied_order: VecDeque<(u64, u64)>,
    /// MEDs of this account that are not closed: their latest state, ahead of storage.
    pub(super) meds: HashMap<u64, Med>,
    /// The last request (server clock), for the idle stop.
    last_active: DateTime<Utc>,
    /// Replies waiting for durability.
    replies_pending: usize,
}

impl AccountActor {
    /// Loads the account's ledger and pending debits from storage.
    pub fn load(account: AccountRecord, deps: Arc<Deps>) -> AccountActor {
        let ledger = deps.repo.load_ledger(&account).map_err(|e| e.to_string());
        let started = deps.clock.now();
        let mut actor = AccountActor {
            account,
            deps,
            ledger,
            halted: false,
            halt_landed: false,
            pending: HashMap::new(),
            open_charges: HashMap::new(),
            deadlines: BTreeSet::new(),
            scheduled: BTreeSet::new(),
            ready: Vec::new(),
            last_ticket: 0,
            unapplied: HashMap::new(),
            unapplied_order: VecDeque::new(),
            meds: HashMap::new(),
            last_active: started,
            replies_pending: 0,
        };
        if let Err(e) = actor.load_pending() {
            actor.ledger = Err(e);
        }
        actor
    }

    fn load_pending(&mut self) -> Result<(), String> {
        let Ok(ledger) = &self.ledger else { return Ok(()) };
        let ids: Vec<u64> = ledger.pending().map(|(id, _)| id).collect();
        for id in ids {
            match self.deps.repo.transaction(id).map_err(|e| e.to_string())? {
                Some(tx) => self.track_pending(tx),
                // A MED's hold: nothing to send to the bank; its analysis ends it.
                None if self.deps.repo.med(self.account.id, id).map_err(|e| e.to_string())?.is_some() => {}
                None => return Err(format!("pending transaction {id} has no record")),
            }
        }
        for charge in self.deps.repo.open_charges(self.account.id).map_err(|e| e.to_string())? {
            self.track_charge(charge);
        }
        Ok(())
    }

    // ---- gather ------------------------------------------------------------------------

    /// What the pure rules read of this account; refused while halted.
    pub(super) fn view(&self) -> Result<Account<'_>, PayError> {
        if self.halted {
            return Err(PayError::Unavailable("the account is restarting; retry".into()));
        }
        let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
        Ok(Account {
            id: self.account.id,
            settings: &self.account.settings,
            name: self.account.profile.name.as_str(),
            receiving_key: &self.account.receiving_key,
            ledger,
        })
    }

    pub(super) fn now(&self) -> DateTime<Utc> {
        self.deps.clock.now()
    }

    /// A storage read: its failure halts the actor.
    pub(super) fn read<T>(
        &mut self,
        r: Result<T, RepoError>,
        ctx: &mut Context<Self>,
    ) -> Result<T, PayError> {
        r.map_err(|e| self.halt(&format!("storage read failed: {e}"), ctx))
    }

    /// `n` fresh ids for a command. A full disk (no room to reserve ids) refuses the
    /// command; any other storage failure halts the actor.
    pub(super) fn draw_ids(&mut self, n: usize, ctx: &mut Context<Self>) -> Result<Ids, PayError> {
        let mut random = vec![0u8; n * FRESH_RANDOM_BYTES];
        getrandom::fill(&mut random).map_err(|e| PayError::Unavailable(format!("no randomness: {e}")))?;
        let mut fresh = Vec::with_capacity(n);
        for chunk in random.chunks_exact(FRESH_RANDOM_BYTES) {
            let local_id = match self.deps.repo.store().generate_id() {
                Ok(id) => id,
                Err(StoreError::Full(why)) => return Err(PayError::Unavailable(why)),
                Err(e) => return Err(self.halt(&format!("drawing ids failed: {e}"), ctx)),
            };
            let mut bytes = [0u8; FRESH_RANDOM_BYTES];
            bytes.copy_from_slice(chunk);
            fresh.push(Fresh { local_id, random: bytes });
        }
        Ok(Ids::new(fresh))
    }

    /// What storage holds for an externalId and idempotency key that the ledger may have
    /// forgotten (see [`crate::domain::ledger::StoredKeys`]).
    pub(super) fn stored_keys(
        &mut self,
        external_id: Option<&str>,
        idempotency_key: Option<&str>,
        ctx: &mut Context<Self>,
    ) -> Result<StoredKeys, PayError> {
        let r = self.deps.repo.stored_keys(self.account.id, external_id, idempotency_key);
        self.read(r, ctx)
    }

    /// One of this account's transactions as this actor last wrote it (`None`: no such
    /// transaction, or another account's).
    pub(super) fn transaction(
        &mut self,
        local_id: u64,
        ctx: &mut Context<Self>,
    ) -> Result<Option<Transaction>, PayError> {
        self.prune_unapplied();
        if let Some((_, tx)) = self.unapplied.get(&local_id) {
            return Ok(Some(tx.clone()));
        }
        let r = self.deps.repo.transaction(local_id);
        let account = self.account.id;
        Ok(self.read(r, ctx)?.filter(|t| t.account_id == account))
    }

    /// Whether any write still in flight matches.
    pub(super) fn unapplied_any(&self, f: impl Fn(&Transaction) -> bool) -> bool {
        self.unapplied.values().any(|(_, t)| f(t))
    }

    /// The bank data of an institution of the directory.
    pub(super) fn institution(&self, ispb: &str) -> Option<BankInfo> {
        self.deps.directory.institution(ispb).map(|i| BankInfo {
            ispb: i.ispb.clone(),
            name: i.name.clone(),
            code: i.code.clone(),
            branch: None,
            account_number: None,
        })
    }

    // ---- execute -----------------------------------------------------------------------

    /// Answers a refusal; a bug halts the actor.
    pub(super) fn refused(&mut self, r: Refusal, ctx: &mut Context<Self>) -> PayError {
        if let Refusal::Bug(why) = &r {
            let why = why.clone();
            self.halt(&why, ctx);
        }
        PayError::from(r)
    }

    /// Carries out a plan: queues its writes, applies the ledger's change, tracks its
    /// records, and answers its reply (sent once durable by the handler).
    pub(super) fn execute<R>(&mut self, plan: Plan<R>, ctx: &mut Context<Self>) -> Result<R, PayError> {
        let Plan { ledger, records, events, reply } = plan;
        let batch = match self.deps.repo.plan_batch(self.account.id, ledger.as_ref(), &records, &events) {
            Ok(b) => b,
            Err(RepoError::Store(StoreError::Full(why))) => return Err(PayError::Unavailable(why)),
            Err(e) => return Err(self.halt(&format!("encoding a plan failed: {e}"), ctx)),
        };
        self.prune_unapplied();
        let ticket = match self.deps.commit.submit(batch) {
            Ok(ticket) => ticket,
            // Refused before anything was written or applied: the command did not happen.
            Err(CommitError::Full(why)) => return Err(PayError::Unavailable(why)),
            Err(e) => return Err(self.halt(&format!("the write was refused: {e}"), ctx)),
        };
        self.last_ticket = ticket;
        if let (Ok(l), Some(change)) = (self.ledger.as_mut(), ledger) {
            l.apply(change);
        }
        for record in records {
            self.track(ticket, record);
        }
        Ok(reply)
    }

    /// What a written record means for the actor's own bookkeeping.
    fn track(&mut self, ticket: u64, record: Record) {
        let (tx, new) = match record {
            Record::NewTransaction(tx) => (tx, true),
            Record::Transaction(tx) => (tx, false),
            Record::Med(med) => {
                match med.status {
                    MedStatus::Open | MedStatus::Received => self.meds.insert(med.id, med),
                    MedStatus::Cancelled | MedStatus::Analyzed => self.meds.remove(&med.id),
                };
                return;
            }
        };
        match (tx.kind, tx.status) {
            (TxKind::CashIn, TxStatus::Pending) => self.track_charge(tx.clone()),
            (TxKind::CashIn, _) => self.untrack_charge(&tx),
            (kind, TxStatus::Pending) if kind.is_debit() => {
                if new {
                    match tx.scheduled_for {
                        Some(at) => {
                            self.scheduled.insert((at, tx.local_id));
                        }
                        None => self.ready.push(tx.clone()),
                    }
                }
                self.track_pending(tx.clone());
            }
            (kind, _) if kind.is_debit() => self.untrack_pending(&tx),
            _ => {}
        }
        self.unapplied_order.push_back((ticket, tx.local_id));
        self.unapplied.insert(tx.local_id, (ticket, tx));
    }

    fn track_charge(&mut self, tx: Transaction) {
        if let Some(c) = &tx.charge {
            self.deadlines.insert((c.expires_at, tx.local_id));
        }
        self.open_charges.insert(tx.local_id, tx);
    }

    fn untrack_charge(&mut self, tx: &Transaction) {
        if let Some(c) = &tx.charge {
            self.deadlines.remove(&(c.expires_at, tx.local_id));
        }
        self.open_charges.remove(&tx.local_id);
    }

    fn track_pending(&mut self, tx: Transaction) {
        if let Some(d) = &tx.dict {
            let deadline = tx.created_at + chrono::Duration::seconds(i64::from(d.expiration_seconds));
            self.deadlines.insert((deadline, tx.local_id));
        }
        self.pending.insert(tx.local_id, tx);
    }

    fn untrack_pending(&mut self, tx: &Transaction) {
        self.pending.remove(&tx.local_id);
        if let Some(d) = &tx.dict {
            let deadline = tx.created_at + chrono::Duration::seconds(i64::from(d.expiration_seconds));
            self.deadlines.remove(&(deadline, tx.local_id));
        }
    }

    /// Sends the new pending debits to the bank (their writes are durable by now).
    fn submit_ready(&mut self, ctx: &mut Context<Self>) {
        for tx in std::mem::take(&mut self.ready) {
            self.submit(&tx, ctx);
        }
    }

    fn submit(&self, tx: &Transaction, ctx: &mut Context<Self>) {
        let key = match (&tx.counterpart.key, tx.counterpart.key_type) {
            (Some(k), Some(_)) => parse_directory_key(k).ok(),
            _ => None,
        };
        let immediate =
            tx.dict.as_ref().is_some_and(|d| d.priority == crate::domain::transaction::Priority::High);
        self.deps.bank.do_send(Submit {
            local_id: tx.local_id,
            key,
            scenario: tx.scenario,
            immediate,
            refund: tx.kind == TxKind::RefundIn,
            reply_to: ctx.address().recipient(),
        });
    }

    /// Forgets the writes that storage now has (their ticket is under the watermark).
    fn prune_unapplied(&mut self) {
        let durable = self.deps.commit.durable_now();
        while let Some(&(ticket, id)) = self.unapplied_order.front() {
            if ticket > durable {
                break;
            }
            self.unapplied_order.pop_front();
            // A later write of the same transaction keeps its entry.
            if self.unapplied.get(&id).is_some_and(|(latest, _)| *latest == ticket) {
                self.unapplied.remove(&id);
            }
        }
        if let Ok(ledger) = self.ledger.as_mut() {
            if ledger.keys_held() > KEYS_HELD_MAX {
                let in_flight = &self.unapplied;
                ledger.retain_keys(|local| in_flight.contains_key(&local));
            }
        }
    }

    /// Stops the actor after a failure that may leave its memory ahead of (or apart from)
    /// the disk. It answers nothing more, and stops once the writes it queued have landed
    /// (or failed), so the next actor of this account loads a state that holds them, and
    /// once the replies it owes are sent.
    pub(super) fn halt(&mut self, why: &str, ctx: &mut Context<Self>) -> PayError {
        if !self.halted {
            tracing::error!(account = %self.account.id, why, "account actor halts; it reloads from storage on next use");
            self.halted = true;
            let commit = Arc::clone(&self.deps.commit);
            let ticket = self.last_ticket;
            let landed = async move { commit.durable(ticket).await };
            ctx.spawn(landed.into_actor(self).map(|_, act, ctx| {
                act.halt_landed = true;
                act.stop_when_quiet(ctx);
            }));
        }
        PayError::Internal(why.to_owned())
    }

    /// Stops a halted actor once nothing it owes is outstanding.
    fn stop_when_quiet(&mut self, ctx: &mut Context<Self>) {
        if self.halted && self.halt_landed && self.replies_pending == 0 {
            ctx.stop();
        }
    }

    /// A reply that waits until this actor's writes so far are durable; then the new
    /// pending debits go to the bank.
    pub(super) fn reply_when_durable<T: 'static>(
        &mut self,
        reply: Result<T, PayError>,
    ) -> ResponseActFuture<Self, Result<T, PayError>> {
        let commit = Arc::clone(&self.deps.commit);
        let ticket = self.last_ticket;
        let wait = async move { commit.durable(ticket).await };
        self.replies_pending += 1;
        self.last_active = self.deps.clock.now();
        Box::pin(wait.into_actor(self).map(move |durable, act, ctx| {
            act.replies_pending -= 1;
            let reply = match durable {
                Ok(()) => {
                    act.submit_ready(ctx);
                    reply
                }
                // This actor's memory may hold effects that never reached the disk.
                Err(e) => Err(match act.halt(&format!("write not durable: {e}"), ctx) {
                    PayError::Internal(m) => PayError::Unavailable(m),
                    other => other,
                }),
            };
            act.stop_when_quiet(ctx);
            reply
        }))
    }

    // ---- commands that start inside the actor ------------------------------------------

    /// Ends a pending debit: the bank answered, or a `/dict/pix` transfer expired.
    pub(super) fn settle(
        &mut self,
        local_id: u64,
        result: Result<Option<BankInfo>, ErrorCode>,
        ctx: &mut Context<Self>,
    ) {
        let Some(tx) = self.pending.get(&local_id).cloned() else { return };
        // A refund that failed gives its amount back to the original's refunded sum.
        let original = match (&tx.refund, tx.kind, result.is_err()) {
            (Some(r), TxKind::RefundIn, true) => match self.transaction(r.original_local_id, ctx) {
                Ok(o) => o,
                Err(_) => return,
            },
            _ => None,
        };
        let now = self.now();
        let decided = match self.view() {
            Ok(view) => decide::settle(&view, tx, result.clone(), original, now),
            Err(_) => return,
        };
        match decided {
            Ok(None) => {}
            Ok(Some(plan)) => {
                if self.execute(plan, ctx).is_err() && !self.halted {
                    // The disk is full (logged once by the journal): the bank's answer is kept
                    // and written once room returns, so the money does not stay blocked.
                    ctx.run_later(SETTLE_RETRY_AFTER, move |act, ctx| act.settle(local_id, result, ctx));
                }
            }
            Err(r) => {
                self.refused(r, ctx);
            }
        }
    }

    /// Closes an open charge that reached its expiration.
    fn expire_charge(&mut self, local_id: u64, ctx: &mut Context<Self>) {
        let Some(charge) = self.open_charges.get(&local_id).cloned() else { return };
        let plan = decide::expire_charge(charge, self.now());
        if let Err(e) = self.execute(plan, ctx) {
            tracing::error!(account = %self.account.id, local_id, error = %e, "charge expiry not recorded");
        }
    }

    /// Whether the actor can stop without losing anything: nothing pending, open, scheduled
    /// or in flight, every write durable, and no request for a while.
    fn idle(&mut self, now: DateTime<Utc>) -> bool {
        self.prune_unapplied();
        now - self.last_active >= chrono::Duration::seconds(ACCOUNT_IDLE_STOP_SECONDS)
            && self.pending.is_empty()
            && self.open_charges.is_empty()
            && self.deadlines.is_empty()
            && self.scheduled.is_empty()
            && self.ready.is_empty()
            && self.meds.is_empty()
            && self.unapplied.is_empty()
            && self.replies_pending == 0
            && self.last_ticket <= self.deps.commit.durable_now()
    }

    pub(super) fn expire_due(&mut self, ctx: &mut Context<Self>) {
        if self.halted {
            return;
        }
        let now = self.now();
        if self.idle(now) {
            // Messages still queued are not handled after this; their senders see the
            // mailbox closed and ask the registry again, which starts a fresh actor.
            tracing::debug!(account = %self.account.id, "idle account actor stops");
            ctx.stop();
            return;
        }
        // Scheduled splits whose time has come go to the bank (their writes are long durable).
        let due: Vec<(DateTime<Utc>, u64)> =
            self.scheduled.iter().take_while(|(at, _)| *at <= now).copied().collect();
        for key in due {
            self.scheduled.remove(&key);
            if let Some(tx) = self.pending.get(&key.1).cloned() {
                self.submit(&tx, ctx);
            }
        }
        let due: Vec<u64> = self.deadlines.iter().take_while(|(d, _)| *d <= now).map(|(_, id)| *id).collect();
        for id in due {
            if self.open_charges.contains_key(&id) {
                self.expire_charge(id, ctx);
            } else {
                self.settle(id, Err(ErrorCode::Expired), ctx);
            }
        }
    }

    /// Keeps `last_active` as it was (time moving is not a request).
    pub(super) fn untouched_reply(&mut self) -> ResponseActFuture<Self, Result<(), PayError>> {
        let last = self.last_active;
        let reply = self.reply_when_durable(Ok(()));
        self.last_active = last;
        reply
    }
}

impl Actor for AccountActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Err(e) = &self.ledger {
            tracing::error!(account = %self.account.id, error = %e, "cannot load the account");
            ctx.stop();
            return;
        }
        ctx.set_mailbox_capacity(MAILBOX_CAPACITY);
        // Recovery: whatever was pending when the server stopped goes to the bank again,
        // but a scheduled split waits for its time.
        let now = self.now();
        let pending: Vec<Transaction> = self.pending.values().cloned().collect();
        for tx in &pending {
            match tx.scheduled_for {
                Some(at) if at > now => {
                    self.scheduled.insert((at, tx.local_id));
                }
                _ => self.submit(tx, ctx),
            }
        }
        ctx.run_interval(TICK_EVERY, |act, ctx| act.expire_due(ctx));
    }
}
