//! The account actor: apply, commit, reply.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::messages::*;
use crate::clock::Clock;
use crate::domain::account::FeeRule;
use crate::domain::events::event_for;
use crate::domain::ledger::{Balance, DebitDecision, DebitRequest, Ledger};
use crate::domain::money::Money;
use crate::domain::pix_key::parse_directory_key;
use crate::domain::transaction::{
    end_to_end_id, BankInfo, DictDetails, ErrorCode, Transaction, TxKind, TxStatus,
};
use crate::sim::bank::{Bank, Settled, Submit};
use crate::sim::directory::Directory;
use crate::sim::GATEWAY_ISPB;
use crate::store::{AccountRecord, Batch, GroupCommit, Repo};

/// Messages an actor's mailbox holds before senders wait.
const MAILBOX_CAPACITY: usize = 4096;
/// Key index entries (externalIds, idempotency keys) an actor holds in memory before it
/// forgets those whose writes are durable (storage answers for them).
const KEYS_HELD_MAX: usize = 1024;
/// How long a settlement refused for a full disk waits before it is written again.
const SETTLE_RETRY_AFTER: Duration = Duration::from_secs(1);
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
    pub(super) ledger: Result<Ledger, String>,
    /// Pending debits, to settle without a storage read.
    pending: HashMap<u64, Transaction>,
    /// Open charges (PENDING cash-ins).
    pub(super) open_charges: HashMap<u64, Transaction>,
    /// `/dict/pix` and charge expirations: (deadline, local id).
    deadlines: BTreeSet<(DateTime<Utc>, u64)>,
    /// Scheduled splits: (when they go to the bank, local id).
    pub(super) scheduled: BTreeSet<(DateTime<Utc>, u64)>,
    /// Pending transfers to submit to the bank once the writes that made them are durable.
    pub(super) ready: Vec<Transaction>,
    /// The newest group-commit ticket of this actor's writes; replies wait for it.
    last_ticket: u64,
    /// Transactions this actor wrote that the committer may not have applied yet, with the
    /// ticket of their latest write: the actor reads its own writes here first, because
    /// storage lags its memory by up to one group. Pruned at every commit, so it holds only
    /// writes in flight.
    unapplied: HashMap<u64, (u64, Transaction)>,
    unapplied_order: VecDeque<(u64, u64)>,
    /// MEDs this actor opened and has not closed: their latest state, ahead of storage.
    pub(super) meds: HashMap<u64, crate::domain::med::Med>,
    /// The last request (server clock), for the idle stop.
    last_active: DateTime<Utc>,
    /// Replies waiting for durability.
    replies_pending: usize,
}

type PayResult = Result<(Transaction, bool), PayError>;

impl AccountActor {
    /// Loads the account's ledger and pending debits from storage.
    pub fn load(account: AccountRecord, deps: Arc<Deps>) -> AccountActor {
        let ledger = deps.repo.load_ledger(&account).map_err(|e| e.to_string());
        let started = deps.clock.now();
        let mut actor = AccountActor {
            account,
            deps,
            ledger,
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
                Some(tx) => self.track(tx),
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

    pub(super) fn track_charge(&mut self, tx: Transaction) {
        if let Some(c) = &tx.charge {
            self.deadlines.insert((c.expires_at, tx.local_id));
        }
        self.open_charges.insert(tx.local_id, tx);
    }

    pub(super) fn untrack_charge(&mut self, tx: &Transaction) {
        if let Some(c) = &tx.charge {
            self.deadlines.remove(&(c.expires_at, tx.local_id));
        }
        self.open_charges.remove(&tx.local_id);
    }

    pub(super) fn track(&mut self, tx: Transaction) {
        if let Some(d) = &tx.dict {
            let deadline = tx.created_at + chrono::Duration::seconds(i64::from(d.expiration_seconds));
            self.deadlines.insert((deadline, tx.local_id));
        }
        self.pending.insert(tx.local_id, tx);
    }

    pub(super) fn fee_rule(&self, kind: TxKind) -> FeeRule {
        let fees = &self.account.settings.fees;
        match kind {
            TxKind::CashOut | TxKind::QrCashOut => fees.cash_out,
            TxKind::DictPix => fees.dict_pix,
            TxKind::PixIn | TxKind::CashIn => fees.cash_in,
            TxKind::RefundIn => fees.refund,
            // Money of ours coming back carries no fee.
            TxKind::RefundOut => FeeRule::default(),
        }
    }

    /// Submits what [`AccountActor::ready`] holds (call once its writes are durable).
    pub(super) fn submit_ready(&mut self, ctx: &mut Context<Self>) {
        for tx in std::mem::take(&mut self.ready) {
            self.submit(&tx, ctx);
        }
    }

    pub(super) fn submit(&self, tx: &Transaction, ctx: &mut Context<Self>) {
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

    /// Queues the batch, which writes `txs`, for the committer; the ledger may then apply
    /// its effects, and replies wait for durability in [`AccountActor::after_flush`].
    pub(super) fn commit(&mut self, batch: Batch, txs: &[&Transaction]) -> Result<(), PayError> {
        self.prune_unapplied();
        let ticket = self.deps.commit.submit(batch).map_err(|e| PayError::Unavailable(e.to_string()))?;
        self.last_ticket = ticket;
        for tx in txs {
            self.unapplied.insert(tx.local_id, (ticket, (*tx).clone()));
            self.unapplied_order.push_back((ticket, tx.local_id));
        }
        Ok(())
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

    /// What storage holds for an externalId and idempotency key that the ledger may have
    /// forgotten (see [`crate::domain::ledger::StoredKeys`]).
    pub(super) fn stored_keys(
        &self,
        external_id: Option<&str>,
        idempotency_key: Option<&str>,
    ) -> Result<crate::domain::ledger::StoredKeys, PayError> {
        self.deps
            .repo
            .stored_keys(self.account.id, external_id, idempotency_key)
            .map_err(|e| PayError::Unavailable(e.to_string()))
    }

    /// Whether any write still queued matches.
    pub(super) fn unapplied_any(&self, f: impl Fn(&Transaction) -> bool) -> bool {
        self.unapplied.values().any(|(_, t)| f(t))
    }

    /// One of this account's transactions as this actor last wrote it.
    pub(super) fn transaction(&mut self, local_id: u64) -> Result<Option<Transaction>, PayError> {
        self.prune_unapplied();
        if let Some((_, tx)) = self.unapplied.get(&local_id) {
            return Ok(Some(tx.clone()));
        }
        self.deps.repo.transaction(local_id).map_err(|e| PayError::Unavailable(e.to_string()))
    }

    pub(super) fn broken(&self, why: &str, ctx: &mut Context<Self>) -> PayError {
        tracing::error!(account = %self.account.id, why, "account actor stops; it reloads from storage on next use");
        ctx.stop();
        PayError::Internal(why.to_owned())
    }

    fn pay(&mut self, req: PayRequest, ctx: &mut Context<Self>) -> PayResult {
        let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
        let now = self.deps.clock.now();
        let store = self.deps.repo.store();
        let local_id = store.generate_id().map_err(|e| PayError::Unavailable(e.to_string()))?;
        let fee =
            if req.document_mismatch { Money::ZERO } else { self.fee_rule(req.kind).fee_for(req.value) };
        let debit = DebitRequest {
            local_id,
            external_id: req.external_id.clone(),
            idempotency: req.dict.as_ref().map(|d| (d.idempotency_key.clone(), d.request_hash.clone())),
            value: req.value,
            fee,
            hold: !req.document_mismatch,
            limited: true,
            now,
            stored: self.stored_keys(
                req.external_id.as_deref(),
                req.dict.as_ref().map(|d| d.idempotency_key.as_str()),
            )?,
        };
        let effects = match ledger.decide_debit(&debit, &self.account.settings.limits) {
            Err(r) => return Err(PayError::Rejected(r)),
            Ok(DebitDecision::Replay { existing }) => {
                let tx = self.transaction(existing)?;
                return tx
                    .map(|t| (t, true))
                    .ok_or_else(|| PayError::Internal(format!("transaction {existing} missing")));
            }
            Ok(DebitDecision::Accept(e)) => e,
        };
        let entropy = Uuid::new_v4().into_bytes();
        let e2e = end_to_end_id('E', GATEWAY_ISPB, now, &entropy);
        let mut tx = Transaction {
            fee,
            external_id: req.external_id,
            end_to_end_id: e2e.clone(),
            description: req.description,
            counterpart: req.counterpart,
            scenario: req.scenario,
            dict: req.dict.map(|d| DictDetails {
                idempotency_key: d.idempotency_key,
                request_hash: d.request_hash,
                priority: d.priority,
                expiration_seconds: d.expiration_seconds,
                currency: d.currency,
                provisional_end_to_end_id: e2e,
            }),
            qr_txid: req.qr_txid,
            ..Transaction::new(local_id, Uuid::new_v4(), self.account.id, req.kind, req.value, now)
        };
        if req.document_mismatch {
            let _ = tx.settle(Err(ErrorCode::TaxIdMismatch), now);
        }
        let repo = &self.deps.repo;
        let mut b = Batch::default();
        let write = (|| {
            repo.put_transaction(&mut b, &tx, true, true)?;
            repo.put_ledger(&mut b, self.account.id, &effects.state)?;
            if !effects.hold.is_zero() {
                repo.put_pending(&mut b, self.account.id, local_id, effects.hold)?;
            }
            if let Some(ev) = event_for(&tx, now) {
                repo.put_outbox(&mut b, &ev)?;
            }
            Ok::<(), crate::store::RepoError>(())
        })();
        write.map_err(|e| PayError::Unavailable(e.to_string()))?;
        self.commit(b, &[&tx])?;
        let applied = self.ledger.as_mut().map(|l| l.apply_debit(effects));
        if let Ok(Err(v)) = applied {
            return Err(self.broken(&v.to_string(), ctx));
        }
        if tx.status == TxStatus::Pending {
            self.track(tx.clone());
        }
        Ok((tx, false))
    }

    /// Ends a pending debit: the bank answered, or a `/dict/pix` transfer expired.
    fn settle(
        &mut self,
        local_id: u64,
        result: Result<Option<BankInfo>, ErrorCode>,
        ctx: &mut Context<Self>,
    ) {
        let Some(mut tx) = self.pending.get(&local_id).cloned() else { return };
        let Ok(ledger) = &self.ledger else { return };
        let answer = result.clone();
        let Some(effects) = ledger.decide_settle(local_id, result.is_ok()) else { return };
        let now = self.deps.clock.now();
        if let Ok(Some(bank)) = &result {
            tx.counterpart.bank = Some(bank.clone());
        }
        let new_e2e = tx.kind == TxKind::DictPix && result.is_ok();
        if new_e2e {
            // The provisional id answered at creation gives way to the settled one.
            tx.end_to_end_id = end_to_end_id('E', GATEWAY_ISPB, now, &Uuid::new_v4().into_bytes());
        }
        if tx.settle(result.map(|_| ()), now).is_err() {
            return;
        }
        // A refund that did not happen no longer counts against the original.
        let mut original = None;
        if let (TxKind::RefundIn, TxStatus::Error, Some(r)) = (tx.kind, tx.status, &tx.refund) {
            match self.transaction(r.original_local_id) {
                Ok(Some(mut o)) => {
                    o.refunded = o.refunded.checked_sub(tx.value).unwrap_or(Money::ZERO);
                    original = Some(o);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(account = %self.account.id, local_id, error = %e, "settlement not recorded");
                    return;
                }
            }
        }
        let repo = &self.deps.repo;
        let mut b = Batch::default();
        let write = (|| {
            if let Some(o) = &original {
                repo.put_transaction(&mut b, o, false, false)?;
            }
            repo.put_transaction(&mut b, &tx, false, new_e2e)?;
            repo.put_ledger(&mut b, self.account.id, &effects.state)?;
            repo.delete_pending(&mut b, self.account.id, local_id);
            if let Some(ev) = event_for(&tx, now) {
                repo.put_outbox(&mut b, &ev)?;
            }
            Ok::<(), crate::store::RepoError>(())
        })();
        let mut written = vec![&tx];
        written.extend(original.as_ref());
        if let Err(e) =
            write.map_err(|e| PayError::Unavailable(e.to_string())).and_then(|_| self.commit(b, &written))
        {
            if self.deps.commit.full().is_some() {
                // The disk is full (logged once by the journal): the bank's answer is kept and
                // written once room returns, so the money does not stay blocked until a restart.
                ctx.run_later(SETTLE_RETRY_AFTER, move |act, ctx| act.settle(local_id, answer, ctx));
                return;
            }
            // Still pending in storage; a restart submits it to the bank again.
            tracing::error!(account = %self.account.id, local_id, error = %e, "settlement not recorded");
            return;
        }
        if let Ok(Err(v)) = self.ledger.as_mut().map(|l| l.apply_settle(effects)) {
            self.broken(&v.to_string(), ctx);
            return;
        }
        self.pending.remove(&local_id);
        if let Some(d) = &tx.dict {
            let deadline = tx.created_at + chrono::Duration::seconds(i64::from(d.expiration_seconds));
            self.deadlines.remove(&(deadline, local_id));
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

    fn expire_due(&mut self, ctx: &mut Context<Self>) {
        let now = self.deps.clock.now();
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
                if let Err(e) = self.expire_charge(id) {
                    tracing::error!(account = %self.account.id, id, error = %e, "charge expiry not recorded");
                }
            } else {
                self.settle(id, Err(ErrorCode::Expired), ctx);
            }
        }
    }

    fn pix_in(&mut self, msg: PixIn) -> Result<Transaction, PayError> {
        let ledger = self.ledger.as_ref().map_err(|e| PayError::Unavailable(e.clone()))?;
        let now = self.deps.clock.now();
        let fee = self.fee_rule(TxKind::PixIn).fee_for(msg.value);
        let effects = ledger.decide_credit(msg.value, fee).map_err(PayError::Rejected)?;
        let local_id =
            self.deps.repo.store().generate_id().map_err(|e| PayError::Unavailable(e.to_string()))?;
        let payer_bank = self.deps.directory.institution("00000000").map(|i| BankInfo {
            ispb: i.ispb.clone(),
            name: i.name.clone(),
            code: i.code.clone(),
            branch: None,
            account_number: None,
        });
        let tx = Transaction {
            status: TxStatus::Confirmed,
            fee,
            end_to_end_id: end_to_end_id('E', "00000000", now, &Uuid::new_v4().into_bytes()),
            counterpart: crate::domain::transaction::Counterpart {
                name: msg.payer_name,
                document: msg.payer_document,
                key: None,
                key_type: None,
                bank: payer_bank,
            },
            processed_at: Some(now),
            ..Transaction::new(local_id, Uuid::new_v4(), self.account.id, TxKind::PixIn, msg.value, now)
        };
        let repo = &self.deps.repo;
        let mut b = Batch::default();
        let write = (|| {
            repo.put_transaction(&mut b, &tx, true, true)?;
            repo.put_ledger(&mut b, self.account.id, &effects.state)?;
            if let Some(ev) = event_for(&tx, now) {
                repo.put_outbox(&mut b, &ev)?;
            }
            Ok::<(), crate::store::RepoError>(())
        })();
        write.map_err(|e| PayError::Unavailable(e.to_string()))?;
        self.commit(b, &[&tx])?;
        if let Ok(Err(v)) = self.ledger.as_mut().map(|l| l.apply_credit(effects)) {
            return Err(PayError::Internal(v.to_string()));
        }
        Ok(tx)
    }

    /// A reply that waits until this actor's writes so far are durable.
    pub(super) fn after_flush<T: 'static>(
        &mut self,
        reply: Result<T, PayError>,
        then: impl FnOnce(&mut Self, &mut Context<Self>, &T) + 'static,
    ) -> ResponseActFuture<Self, Result<T, PayError>> {
        let commit = Arc::clone(&self.deps.commit);
        let ticket = self.last_ticket;
        let wait = async move { commit.durable(ticket).await };
        self.replies_pending += 1;
        self.last_active = self.deps.clock.now();
        Box::pin(wait.into_actor(self).map(move |durable, act, ctx| {
            act.replies_pending -= 1;
            if let Err(e) = durable {
                // This actor's memory may hold effects that never reached the disk.
                tracing::error!(account = %act.account.id, error = %e, "write not durable; actor stops");
                ctx.stop();
                return Err(PayError::Unavailable(e.to_string()));
            }
            let value = reply?;
            then(act, ctx, &value);
            Ok(value)
        }))
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
        let now = self.deps.clock.now();
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

impl Handler<Pay> for AccountActor {
    type Result = ResponseActFuture<Self, Result<PayOutcome, PayError>>;

    fn handle(&mut self, msg: Pay, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.pay(msg.0, ctx).map(|(tx, replayed)| PayOutcome { tx, replayed });
        self.after_flush(reply, |act, ctx, out| {
            if !out.replayed && out.tx.status == TxStatus::Pending {
                act.submit(&out.tx, ctx);
            }
        })
    }
}

impl Handler<PixIn> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Transaction, PayError>>;

    fn handle(&mut self, msg: PixIn, _: &mut Context<Self>) -> Self::Result {
        let reply = self.pix_in(msg);
        self.after_flush(reply, |_, _, _| {})
    }
}

impl Handler<GetBalance> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Balance, PayError>>;

    fn handle(&mut self, _: GetBalance, _: &mut Context<Self>) -> Self::Result {
        let reply = self.ledger.as_ref().map(|l| l.balance()).map_err(|e| PayError::Unavailable(e.clone()));
        self.after_flush(reply, |_, _, _| {})
    }
}

impl Handler<Settled> for AccountActor {
    type Result = ();

    fn handle(&mut self, msg: Settled, ctx: &mut Context<Self>) {
        self.settle(msg.local_id, msg.result, ctx);
    }
}

impl Handler<Tick> for AccountActor {
    type Result = ResponseActFuture<Self, Result<(), PayError>>;

    /// Answers once what expired is on disk, so the clock route's caller reads it back.
    fn handle(&mut self, _: Tick, ctx: &mut Context<Self>) -> Self::Result {
        self.expire_due(ctx);
        // Time moving is not a request: it must not keep an idle actor alive.
        let last = self.last_active;
        let reply = self.after_flush(Ok(()), |_, _, _| {});
        self.last_active = last;
        reply
    }
}

impl Handler<SettingsChanged> for AccountActor {
    type Result = ();

    fn handle(&mut self, msg: SettingsChanged, _: &mut Context<Self>) {
        self.account.settings = msg.0;
    }
}
