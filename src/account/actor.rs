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
use crate::cause::Cause;
use crate::clock::Clock;
use crate::domain::account::AccountSettings;
use crate::domain::claim::Claim;
use crate::domain::cobr::Cobr;
use crate::domain::decide::{self, Account, Fresh, Ids, Plan, Record, Refusal, FRESH_RANDOM_BYTES};
use crate::domain::ids::AccountId;
use crate::domain::ledger::{Ledger, StoredKeys};
use crate::domain::med::Med;
use crate::domain::rec::Recurrence;
use crate::domain::transaction::{
    gateway_ispb, BankInfo, ErrorCode, RailOutcome, Transaction, TxKind, TxStatus,
};
use crate::rail::sim::directory::Directory;
use crate::rail::{Payer, Payout, Rail, Rails};
use crate::store::{AccountRecord, CommitError, GroupCommit, Repo, RepoError, StoreError};

/// Messages an actor's mailbox holds before senders wait.
const MAILBOX_CAPACITY: usize = 4096;
/// How long a settlement refused for a full disk waits before it is written again.
pub(super) const SETTLE_RETRY_AFTER: Duration = Duration::from_secs(1);
/// An actor with nothing in flight stops after this long without a request (server
/// clock), so a node that served many accounts does not keep them all in memory; the
/// registry starts it again from storage on its next request.
pub const ACCOUNT_IDLE_STOP_SECONDS: i64 = 300;
/// Deadlines one turn of the timer acts on, at most (see [`AccountActor::expire_due`]). A
/// recurring charge's settlement takes about 70 µs, so a turn is about 20 ms of work:
/// `benches/pix_automatico/due_at_once.sh` measured reads through the actor waiting 39 ms at
/// most while 10,000 charges settled, against 1.07 s when they were done in one go.
pub const DUE_PER_TURN_MAX: usize = 256;
/// Rounds one tick of the clock route makes at most. Acting on a deadline may set another
/// that has come too (a recurring charge's morning try fails and its evening try is already
/// due when the test clock jumped past it), so the tick goes round until nothing is due; the
/// longest such chain a jump makes is a few rounds a day, and a record that stays due
/// (refused again and again) must not hold the actor for ever.
pub const TICK_ROUNDS_MAX: usize = 64;

/// What every account actor shares.
pub struct Deps {
    pub repo: Repo,
    pub commit: Arc<GroupCommit>,
    pub clock: Arc<Clock>,
    /// The rails payouts go to: a sandbox account's, and a live account's.
    pub rails: Rails,
    pub directory: Arc<Directory>,
    /// Where a payer's actor hands the credits its on-us payments owe; set once the
    /// registry exists (unset, a credit waits in storage for the next start).
    pub on_us: std::sync::OnceLock<Recipient<super::on_us::DeliverOnUs>>,
    /// Where a receiver's actor sends an on-us recurring charge's request for money (the
    /// same courier); unset, the attempt waits and is tried again.
    pub collect: std::sync::OnceLock<Recipient<super::on_us::Collect>>,
    /// Where a recurrence's location is served (`--payload-host`); `None`: a location names
    /// the sandbox's host, which no server answers.
    pub rec_locations: Option<crate::domain::location::RecLocations>,
}

pub struct AccountActor {
    pub(super) account: Owner,
    pub(super) deps: Arc<Deps>,
    /// `Err` when the ledger could not be loaded: the actor stops at once.
    ledger: Result<Ledger, String>,
    /// Set by [`AccountActor::halt`]: the actor answers nothing more and is stopping.
    halted: bool,
    /// The writes queued before the halt have landed (or failed).
    halt_landed: bool,
    /// What is pending, open, scheduled or in flight; `None` while nothing is, so an idle
    /// account of a node that serves many holds next to nothing (see [`Work`]).
    work: Option<Box<Work>>,
    /// The newest group-commit ticket of this actor's writes; replies wait for it.
    pub(super) last_ticket: u64,
    /// The last request (server clock), for the idle stop.
    last_active: DateTime<Utc>,
    /// Replies waiting for durability.
    replies_pending: usize,
    /// The one timer an actor may hold: for its earliest deadline or scheduled split (server
    /// clock), and its handle. None while it has no deadline: the idle stop is driven by the
    /// registry's sweep, not by a timer per actor.
    timer: Option<(DateTime<Utc>, SpawnHandle)>,
    /// A wait for this actor's writes to become durable is under way, after which it
    /// forgets them (see [`AccountActor::forget_when_durable`]).
    forgetting: bool,
    /// The request whose message is being handled, if one is (see `Traced`).
    pub(super) request_id: Option<Arc<str>>,
    /// A `Traced` message is being handled: its reply goes at once, and the request waits
    /// for durability itself (see `messages::Early`).
    pub(super) early: bool,
}

/// What an actor keeps of its account's record: what its commands read (not the secrets,
/// the document or the client id).
pub(super) struct Owner {
    pub(super) id: AccountId,
    pub(super) settings: AccountSettings,
    name: Box<str>,
    /// The holder's CPF or CNPJ: the payer a rail's messages name.
    document: Box<str>,
    pub(super) receiving_key: Box<str>,
    /// Where this account's payouts go (sandbox accounts always pay on the simulator).
    rail: Rail,
}

/// An actor's bookkeeping of unfinished business. Transactions are boxed: one is large, a
/// hash table keeps its entries inline, and its first insert makes room for several. Each
/// map gives its table back once it is empty, and the whole is dropped once everything is.
#[derive(Default)]
pub(super) struct Work {
    /// Pending debits, to settle without a storage read.
    pending: HashMap<u64, Box<Transaction>>,
    /// Open charges (PENDING cash-ins).
    open_charges: HashMap<u64, Box<Transaction>>,
    /// `/dict/pix` and charge expirations: (deadline, local id).
    deadlines: BTreeSet<(DateTime<Utc>, u64)>,
    /// Scheduled splits: (when they go to the bank, local id).
    scheduled: BTreeSet<(DateTime<Utc>, u64)>,
    /// New pending debits to send to the bank once the writes that made them are durable:
    /// (ticket of that write, local id).
    ready: Vec<(u64, u64)>,
    /// Transactions this actor wrote that the committer may not have applied yet, with the
    /// ticket of their latest write: the actor reads its own writes here first, because
    /// storage lags its memory by up to one group. Pruned at every commit, so it holds only
    /// writes in flight.
    unapplied: HashMap<u64, (u64, Box<Transaction>)>,
    unapplied_order: VecDeque<(u64, u64)>,
    /// MEDs of this account that are not closed (or, for MED 2.0, await their return):
    /// their latest state, ahead of storage.
    meds: HashMap<u64, Med>,
    /// MEDs closed lately, until storage has the write that closed them: so a command on
    /// one never reads the state before it closed.
    closed_meds: Held<Med>,
    /// Recurrences this actor wrote that may not be applied yet, and those whose
    /// solicitation awaits an answer (their expiry is among `deadlines`).
    recs: Held<Recurrence>,
    /// Recurring charges likewise: those written lately, and those still `ATIVA` (their next
    /// attempt, or the end of their retry window, is among `deadlines`).
    cobrs: Held<Cobr>,
    /// DICT key claims this actor wrote that storage may not have yet.
    pub(super) claims: Held<Claim>,
    /// MED 2.0 contests this actor wrote that storage may not have yet.
    pub(super) recoveries: Held<crate::domain::recovery::Recovery>,
}

/// A record with a time at which its actor must act on it.
pub(super) trait Timed {
    fn deadline(&self) -> Option<DateTime<Utc>>;
}

impl Timed for Recurrence {
    fn deadline(&self) -> Option<DateTime<Utc>> {
        Recurrence::deadline(self)
    }
}

impl Timed for Claim {
    /// The claims poller keeps a claim's deadlines, not its actor.
    fn deadline(&self) -> Option<DateTime<Utc>> {
        None
    }
}

impl Timed for Med {
    /// A MED's deadlines are its poller's (the DICT's), not its actor's.
    fn deadline(&self) -> Option<DateTime<Utc>> {
        None
    }
}

impl Timed for crate::domain::recovery::Recovery {
    /// The recovery poller follows a contest, not its actor.
    fn deadline(&self) -> Option<DateTime<Utc>> {
        None
    }
}

impl Timed for Cobr {
    fn deadline(&self) -> Option<DateTime<Utc>> {
        Cobr::deadline(self)
    }
}

/// Records of one kind an actor holds ahead of storage: each with the ticket of its latest
/// write. One is dropped once storage has that write, unless it still has a deadline.
pub(super) struct Held<T> {
    map: HashMap<u64, (u64, Box<T>)>,
    order: VecDeque<(u64, u64)>,
}

impl<T> Default for Held<T> {
    fn default() -> Self {
        Held { map: HashMap::new(), order: VecDeque::new() }
    }
}

impl<T: Timed> Held<T> {
    fn is_empty(&self) -> bool {
        self.map.is_empty() && self.order.is_empty()
    }

    fn get(&self, id: u64) -> Option<&T> {
        self.map.get(&id).map(|(_, r)| &**r)
    }

    /// Holds `record`'s latest state, and moves its deadline in `deadlines`.
    fn hold(&mut self, ticket: u64, id: u64, record: T, deadlines: &mut BTreeSet<(DateTime<Utc>, u64)>) {
        if let Some(old) = self.get(id).and_then(Timed::deadline) {
            deadlines.remove(&(old, id));
        }
        if let Some(at) = record.deadline() {
            deadlines.insert((at, id));
        }
        self.order.push_back((ticket, id));
        self.map.insert(id, (ticket, Box::new(record)));
    }

    /// Drops what storage now has (writes up to `durable`) and no deadline keeps.
    fn prune(&mut self, durable: u64) {
        while let Some(&(ticket, id)) = self.order.front() {
            if ticket > durable {
                break;
            }
            self.order.pop_front();
            let done = |(latest, r): &(u64, Box<T>)| *latest == ticket && r.deadline().is_none();
            if self.map.get(&id).is_some_and(done) {
                self.map.remove(&id);
            }
        }
    }

    fn give_back(&mut self) {
        give_back(&mut self.map);
        if self.order.is_empty() {
            self.order.shrink_to_fit();
        }
    }

    /// The held records whose latest write storage may not have yet: what a lookup through
    /// storage's indexes would miss. Few (one group commit's worth), unlike all the records
    /// held for their deadlines.
    pub(super) fn in_flight(&self) -> impl Iterator<Item = &T> {
        self.order.iter().filter_map(|(ticket, id)| match self.map.get(id) {
            Some((latest, r)) if latest == ticket => Some(&**r),
            _ => None,
        })
    }
}

impl Work {
    fn is_empty(&self) -> bool {
        self.pending.is_empty()
            && self.open_charges.is_empty()
            && self.deadlines.is_empty()
            && self.scheduled.is_empty()
            && self.ready.is_empty()
            && self.unapplied.is_empty()
            && self.meds.is_empty()
            && self.closed_meds.is_empty()
            && self.recs.is_empty()
            && self.cobrs.is_empty()
            && self.claims.is_empty()
            && self.recoveries.is_empty()
    }

    fn give_back(&mut self) {
        give_back(&mut self.pending);
        give_back(&mut self.open_charges);
        give_back(&mut self.unapplied);
        give_back(&mut self.meds);
        self.closed_meds.give_back();
        self.recs.give_back();
        self.cobrs.give_back();
        self.claims.give_back();
        self.recoveries.give_back();
        if self.unapplied_order.is_empty() {
            self.unapplied_order.shrink_to_fit();
        }
        if self.ready.is_empty() {
            self.ready.shrink_to_fit();
        }
    }
}

impl AccountActor {
    /// Loads the account's ledger and pending debits from storage.
    pub fn load(account: AccountRecord, deps: Arc<Deps>) -> AccountActor {
        let ledger = deps.repo.load_ledger(&account).map_err(|e| e.to_string());
        let started = deps.clock.now();
        let owner = Owner {
            id: account.id,
            settings: account.settings,
            name: account.profile.name.as_str().into(),
            document: account.profile.document.as_str().into(),
            receiving_key: account.receiving_key.into_boxed_str(),
            rail: deps.rails.for_account(account.profile.sandbox),
        };
        let mut actor = AccountActor {
            account: owner,
            deps,
            ledger,
            halted: false,
            halt_landed: false,
            work: None,
            last_ticket: 0,
            last_active: started,
            replies_pending: 0,
            timer: None,
            forgetting: false,
            request_id: None,
            early: false,
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
        // MED 2.0 cases still live: money that arrives is blocked for them (top_up_meds).
        let live = self.deps.repo.live_cases_of(self.account.id).map_err(|e| e.to_string())?;
        if !live.is_empty() {
            let w = self.work();
            for m in live {
                w.meds.insert(m.id, m);
            }
        }
        for charge in self.deps.repo.open_charges(self.account.id).map_err(|e| e.to_string())? {
            self.track_charge(charge);
        }
        for rec in self.deps.repo.open_recs(self.account.id).map_err(|e| e.to_string())? {
            let w = self.work.get_or_insert_with(Box::default);
            w.recs.hold(0, rec.local_id, rec, &mut w.deadlines);
        }
        for cobr in self.deps.repo.open_cobrs(self.account.id).map_err(|e| e.to_string())? {
            let w = self.work.get_or_insert_with(Box::default);
            w.cobrs.hold(0, cobr.local_id, cobr, &mut w.deadlines);
        }
        Ok(())
    }

    // ---- bookkeeping --------------------------------------------------------------------

    pub(super) fn work(&mut self) -> &mut Work {
        self.work.get_or_insert_with(Box::default)
    }

    /// Drops the bookkeeping once nothing is left in it.
    fn tidy(&mut self) {
        if let Some(w) = self.work.as_mut() {
            if w.is_empty() {
                self.work = None;
            } else {
                w.give_back();
            }
        }
    }

    fn pending_tx(&self, local_id: u64) -> Option<&Transaction> {
        self.work.as_ref()?.pending.get(&local_id).map(|t| &**t)
    }

    pub(super) fn open_charge(&self, local_id: u64) -> Option<&Transaction> {
        self.work.as_ref()?.open_charges.get(&local_id).map(|t| &**t)
    }

    /// The open charge that matches, if one does.
    pub(super) fn open_charge_matching(&self, f: impl Fn(&Transaction) -> bool) -> Option<Transaction> {
        self.work.as_ref()?.open_charges.values().find(|t| f(t)).map(|t| (**t).clone())
    }

    /// Whether an open charge matches.
    pub(super) fn open_charges_any(&self, f: impl Fn(&Transaction) -> bool) -> bool {
        self.work.as_ref().is_some_and(|w| w.open_charges.values().any(|t| f(t)))
    }

    /// A MED's latest state when this actor wrote it lately or it is still live.
    pub(super) fn unclosed_med(&self, id: u64) -> Option<&Med> {
        let w = self.work.as_ref()?;
        w.meds.get(&id).or_else(|| w.closed_meds.get(id))
    }

    /// The live MEDs this actor holds (their latest state).
    pub(super) fn live_meds(&self) -> Vec<Med> {
        self.work.as_ref().map(|w| w.meds.values().cloned().collect()).unwrap_or_default()
    }

    /// A recurrence this actor holds (written lately, or awaiting an answer).
    pub(super) fn held_rec(&self, local_id: u64) -> Option<&Recurrence> {
        self.work.as_ref()?.recs.get(local_id)
    }

    /// A recurring charge this actor holds (written lately, or still `ATIVA`).
    pub(super) fn held_cobr(&self, local_id: u64) -> Option<&Cobr> {
        self.work.as_ref()?.cobrs.get(local_id)
    }

    /// The recurring charge with this txid among those whose write storage may not have
    /// yet (storage's txid index answers for the others).
    pub(super) fn in_flight_cobr_by_txid(&self, txid: &str) -> Option<&Cobr> {
        self.work.as_ref()?.cobrs.in_flight().find(|c| c.txid == txid)
    }

    /// Takes a record's deadline off the timer and tries it again later: what was due could
    /// not be done now (a full disk, a failed read), and a deadline left in the past would
    /// fire the timer again at once, without end.
    pub(super) fn postpone(
        &mut self,
        local_id: u64,
        again: fn(&mut Self, u64, &mut Context<Self>),
        ctx: &mut Context<Self>,
    ) {
        self.set_aside(local_id);
        ctx.run_later(SETTLE_RETRY_AFTER, move |act, ctx| again(act, local_id, ctx));
    }

    /// Takes a record's deadlines that have come off the timer: what was due is under way
    /// elsewhere (an on-us charge's request to its payer), and its answer, not the timer,
    /// moves the record on. Its next write sets its next deadline.
    pub(super) fn set_aside(&mut self, local_id: u64) {
        let now = self.now();
        if let Some(w) = self.work.as_mut() {
            let due: Vec<_> =
                w.deadlines.iter().filter(|(at, id)| *id == local_id && *at <= now).copied().collect();
            for d in due {
                w.deadlines.remove(&d);
            }
        }
    }

    /// The holder's name the account's payments and charges carry from now on.
    pub(super) fn set_name(&mut self, name: String) {
        self.account.name = name.into_boxed_str();
    }

    /// The key the account's new charges carry from now on.
    pub(super) fn set_receiving_key(&mut self, key: String) {
        self.account.receiving_key = key.into_boxed_str();
    }

    /// The account holder's CPF or CNPJ.
    pub(super) fn account_document(&self) -> &str {
        &self.account.document
    }

    /// This account's name and receiving key, as its actor keeps them.
    pub(super) fn own_key(&self) -> (&str, &str) {
        (&self.account.name, &self.account.receiving_key)
    }

    /// Whether the actor halted (it answers nothing more).
    pub(super) fn halted(&self) -> bool {
        self.halted
    }

    /// The recurrence linked to this location among those whose write storage may not have
    /// yet (the stored location says it for the others).
    pub(super) fn in_flight_rec_of_location(&self, loc: u64) -> Option<&Recurrence> {
        self.work.as_ref()?.recs.in_flight().find(|r| r.loc.as_ref().is_some_and(|l| l.local_id == loc))
    }

    /// The held recurring charges of a recurrence that are not final.
    pub(super) fn open_cobrs_of(&self, rec_local: u64) -> Vec<Cobr> {
        let Some(w) = self.work.as_ref() else { return Vec::new() };
        w.cobrs
            .map
            .values()
            .map(|(_, c)| &**c)
            .filter(|c| c.rec_local == rec_local && !c.status.is_final())
            .cloned()
            .collect()
    }

    /// The held recurrence that has the solicitation with this local id, if one does.
    pub(super) fn held_rec_of_solicitation(&self, solicitation: u64) -> Option<&Recurrence> {
        let w = self.work.as_ref()?;
        w.recs.in_flight().find(|r| r.solicitations.iter().any(|s| s.local_id == solicitation))
    }

    // ---- gather ------------------------------------------------------------------------

    /// What the pure rules read of this account; refused while halted.
    pub(super) fn view(&self) -> Result<Account<'_>, CommandError> {
        if self.halted {
            return Err(CommandError::Unavailable(Cause::msg("the account is restarting; retry")));
        }
        let ledger = self.ledger.as_ref().map_err(|e| {
            CommandError::Unavailable(Cause::msg(e.clone()).context("loading the ledger failed"))
        })?;
        Ok(Account {
            id: self.account.id,
            settings: &self.account.settings,
            name: &self.account.name,
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
    ) -> Result<T, CommandError> {
        r.map_err(|e| {
            let corrupt = matches!(e, RepoError::Corrupt { .. } | RepoError::Sealed { .. });
            self.halt_on_storage(&format!("storage read failed: {e}"), corrupt, ctx)
        })
    }

    /// `n` fresh ids for a command. A full disk (no room to reserve ids) refuses the
    /// command; any other storage failure halts the actor.
    pub(super) fn draw_ids(&mut self, n: usize, ctx: &mut Context<Self>) -> Result<Ids, CommandError> {
        let mut random = vec![0u8; n * FRESH_RANDOM_BYTES];
        getrandom::fill(&mut random)
            .map_err(|e| CommandError::Unavailable(Cause::new(e).context("no randomness")))?;
        let mut fresh = Vec::with_capacity(n);
        for chunk in random.chunks_exact(FRESH_RANDOM_BYTES) {
            let local_id = match self.deps.repo.store().generate_id() {
                Ok(id) => id,
                Err(e @ StoreError::Full(_)) => return Err(CommandError::Unavailable(Cause::new(e))),
                Err(e) => return Err(self.halt_on_storage(&format!("drawing ids failed: {e}"), false, ctx)),
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
    ) -> Result<StoredKeys, CommandError> {
        let r = self.deps.repo.stored_keys(self.account.id, external_id, idempotency_key);
        self.read(r, ctx)
    }

    /// One of this account's transactions as this actor last wrote it (`None`: no such
    /// transaction, or another account's).
    pub(super) fn transaction(
        &mut self,
        local_id: u64,
        ctx: &mut Context<Self>,
    ) -> Result<Option<Transaction>, CommandError> {
        self.prune_unapplied();
        if let Some((_, tx)) = self.work.as_ref().and_then(|w| w.unapplied.get(&local_id)) {
            return Ok(Some((**tx).clone()));
        }
        let r = self.deps.repo.transaction(local_id);
        let account = self.account.id;
        Ok(self.read(r, ctx)?.filter(|t| t.account_id == account))
    }

    /// Whether any write still in flight matches.
    pub(super) fn unapplied_any(&self, f: impl Fn(&Transaction) -> bool) -> bool {
        self.work.as_ref().is_some_and(|w| w.unapplied.values().any(|(_, t)| f(t)))
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
    pub(super) fn refused(&mut self, r: Refusal, ctx: &mut Context<Self>) -> CommandError {
        if let Refusal::Bug(why) = &r {
            let why = why.clone();
            self.halt(&why, ctx);
        }
        CommandError::from(r)
    }

    /// Carries out a plan: queues its writes, applies the ledger's change, tracks its
    /// records, and answers its reply (sent once durable by the handler).
    pub(super) fn execute<R>(&mut self, plan: Plan<R>, ctx: &mut Context<Self>) -> Result<R, CommandError> {
        let Plan { ledger, records, events, reply } = plan;
        let batch = match self.deps.repo.plan_batch(self.account.id, ledger.as_ref(), &records, &events) {
            Ok(b) => b,
            Err(e @ RepoError::Store(StoreError::Full(_))) => {
                return Err(CommandError::Unavailable(Cause::new(e)))
            }
            Err(e) => {
                let corrupt = matches!(e, RepoError::Corrupt { .. } | RepoError::Sealed { .. });
                return Err(self.halt_on_storage(&format!("encoding a plan failed: {e}"), corrupt, ctx));
            }
        };
        self.prune_unapplied();
        let ticket = match self.deps.commit.submit(batch) {
            Ok(ticket) => ticket,
            // Refused before anything was written or applied: the command did not happen.
            Err(e @ CommitError::Full(_)) => return Err(CommandError::Unavailable(Cause::new(e))),
            Err(e) => return Err(self.halt_on_storage(&format!("the write was refused: {e}"), false, ctx)),
        };
        self.last_ticket = ticket;
        // The log follows each payment: created (accepted, or received already final), then
        // each final status its events announce; the metrics count the final ones.
        for record in &records {
            if let Record::NewTransaction(tx) = record {
                crate::telemetry::log_payment(tx, self.request_id.as_ref());
            }
        }
        for e in &events {
            if let crate::domain::events::EventBody::Transaction(tx) = &e.body {
                let created_here = records
                    .iter()
                    .any(|r| matches!(r, Record::NewTransaction(t) if t.local_id == tx.local_id));
                if !created_here {
                    crate::telemetry::log_payment(tx, self.request_id.as_ref());
                }
                crate::telemetry::count_payment(tx);
            }
        }
        if let (Ok(l), Some(change)) = (self.ledger.as_mut(), ledger) {
            l.apply(change);
        }
        for record in records {
            self.track(ticket, record);
        }
        self.arm(ctx);
        Ok(reply)
    }

    /// Cancels the timer (`arm` sets it again).
    pub(super) fn disarm(&mut self, ctx: &mut Context<Self>) {
        if let Some((_, handle)) = self.timer.take() {
            ctx.cancel_future(handle);
        }
    }

    /// Sets the timer for the earliest deadline or scheduled split, if there is one and no
    /// timer fires before it.
    fn arm(&mut self, ctx: &mut Context<Self>) {
        let earliest = self.work.as_ref().and_then(|w| {
            let deadline = w.deadlines.first().map(|(at, _)| *at);
            let scheduled = w.scheduled.first().map(|(at, _)| *at);
            deadline.into_iter().chain(scheduled).min()
        });
        match (earliest, self.timer.as_ref()) {
            (None, None) => {}
            (None, Some(&(_, handle))) => {
                ctx.cancel_future(handle);
                self.timer = None;
            }
            (Some(at), Some(&(set, _))) if set <= at => {}
            (Some(at), old) => {
                if let Some(&(_, handle)) = old {
                    ctx.cancel_future(handle);
                }
                let wait = (at - self.now()).to_std().unwrap_or(Duration::ZERO);
                let handle = ctx.run_later(wait, |act, ctx| {
                    act.timer = None;
                    act.expire_due(ctx);
                });
                self.timer = Some((at, handle));
            }
        }
    }

    /// What a written record means for the actor's own bookkeeping.
    fn track(&mut self, ticket: u64, record: Record) {
        let (tx, new) = match record {
            Record::NewTransaction(tx) => (tx, true),
            Record::Transaction(tx) => (tx, false),
            Record::Med(med) => {
                let w = self.work();
                if med.is_live() {
                    w.meds.insert(med.id, med);
                } else {
                    w.meds.remove(&med.id);
                    let id = med.id;
                    w.closed_meds.hold(ticket, id, med, &mut w.deadlines);
                }
                return;
            }
            // Storage holds a credit until its payee carries it out; the payer keeps nothing.
            Record::OnUsCredit(_) | Record::OnUsCredited(_) => return,
            // Storage holds an accepted incoming until the SPI settles it.
            Record::Incoming(_) | Record::IncomingDone(_) => return,
            Record::Recurrence(rec) => {
                let w = self.work();
                w.recs.hold(ticket, rec.local_id, rec, &mut w.deadlines);
                return;
            }
            Record::Cobr(c) => {
                let w = self.work();
                w.cobrs.hold(ticket, c.local_id, c, &mut w.deadlines);
                return;
            }
            // A location changes only with its recurrence, which the actor holds.
            Record::LocRec(_) => return,
            // Storage holds claims and keys; the claims poller reads the open ones.
            Record::Claim(c) => {
                let w = self.work();
                w.claims.hold(ticket, c.local_id, c, &mut w.deadlines);
                return;
            }
            Record::KeyArrived { .. } => return,
            Record::Recovery(r) => {
                let w = self.work();
                w.recoveries.hold(ticket, r.id, r, &mut w.deadlines);
                return;
            }
            Record::KeyLeft { receiving, .. } => {
                if let Some(key) = receiving {
                    self.account.receiving_key = key.into_boxed_str();
                    self.deps.repo.forget_cached_accounts();
                }
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
                            self.work().scheduled.insert((at, tx.local_id));
                        }
                        None => self.work().ready.push((ticket, tx.local_id)),
                    }
                }
                self.track_pending(tx.clone());
            }
            (kind, _) if kind.is_debit() => self.untrack_pending(&tx),
            _ => {}
        }
        let w = self.work();
        w.unapplied_order.push_back((ticket, tx.local_id));
        w.unapplied.insert(tx.local_id, (ticket, Box::new(tx)));
    }

    fn track_charge(&mut self, tx: Transaction) {
        let w = self.work();
        // A revised cobv may have moved its expiration: its old deadline goes.
        if let Some(c) = w.open_charges.get(&tx.local_id).and_then(|t| t.charge.as_ref()) {
            w.deadlines.remove(&(c.expires_at, tx.local_id));
        }
        if let Some(c) = &tx.charge {
            w.deadlines.insert((c.expires_at, tx.local_id));
        }
        w.open_charges.insert(tx.local_id, Box::new(tx));
    }

    fn untrack_charge(&mut self, tx: &Transaction) {
        let Some(w) = self.work.as_mut() else { return };
        if let Some(c) = &tx.charge {
            w.deadlines.remove(&(c.expires_at, tx.local_id));
        }
        w.open_charges.remove(&tx.local_id);
    }

    fn track_pending(&mut self, tx: Transaction) {
        let w = self.work();
        if let Some(d) = &tx.dict {
            let deadline = tx.created_at + chrono::Duration::seconds(i64::from(d.expiration_seconds));
            w.deadlines.insert((deadline, tx.local_id));
        }
        w.pending.insert(tx.local_id, Box::new(tx));
    }

    fn untrack_pending(&mut self, tx: &Transaction) {
        let Some(w) = self.work.as_mut() else { return };
        w.pending.remove(&tx.local_id);
        if let Some(d) = &tx.dict {
            let deadline = tx.created_at + chrono::Duration::seconds(i64::from(d.expiration_seconds));
            w.deadlines.remove(&(deadline, tx.local_id));
        }
    }

    /// Sends the new pending debits whose writes are durable to the bank; the others wait
    /// for a later call.
    fn submit_ready(&mut self, ctx: &mut Context<Self>) {
        let durable = self.deps.commit.durable_now();
        let Some(w) = self.work.as_mut() else { return };
        let (ready, later): (Vec<_>, Vec<_>) = w.ready.drain(..).partition(|(ticket, _)| *ticket <= durable);
        w.ready = later;
        for (_, local_id) in ready {
            if let Some(tx) = self.pending_tx(local_id) {
                self.submit(tx, ctx);
            }
        }
        self.tidy();
    }

    fn submit(&self, tx: &Transaction, ctx: &mut Context<Self>) {
        let returns_on_us = match self.returns_on_us(tx) {
            Ok(r) => r,
            Err(e) => {
                // Sent to another bank, an on-us refund's money would leave the books: it
                // waits until the store answers.
                tracing::error!(local_id = tx.local_id, error = %e, "a refund's payer cannot be read");
                let local_id = tx.local_id;
                ctx.run_later(SETTLE_RETRY_AFTER, move |act, ctx| {
                    if let Some(tx) = act.pending_tx(local_id).cloned() {
                        act.submit(&tx, ctx);
                    }
                });
                return;
            }
        };
        let payer = Payer {
            account: self.account.id,
            name: self.account.name.to_string(),
            document: self.account.document.to_string(),
        };
        self.account.rail.do_send(Payout {
            tx: Box::new(tx.clone()),
            payer,
            reply_to: ctx.address().recipient(),
            returns_on_us,
        });
    }

    /// The account of this gateway that made the payment a refund returns, if one did: the
    /// payment (a debit of any account) its end-to-end id names names its account.
    fn returns_on_us(&self, tx: &Transaction) -> Result<Option<AccountId>, RepoError> {
        let Some(r) = tx.refund.as_ref().filter(|_| tx.kind == TxKind::RefundIn) else { return Ok(None) };
        if tx.counterpart.bank.as_ref().is_none_or(|b| b.ispb != gateway_ispb()) {
            return Ok(None);
        }
        Ok(self.deps.repo.payout_by_id(&r.original_end_to_end_id)?.and_then(|paid| {
            let payment = matches!(paid.kind, TxKind::CashOut | TxKind::QrCashOut | TxKind::DictPix);
            (payment && paid.end_to_end_id == r.original_end_to_end_id).then_some(paid.account_id)
        }))
    }

    /// Forgets the writes that storage now has (their ticket is under the watermark).
    fn prune_unapplied(&mut self) {
        let durable = self.deps.commit.durable_now();
        if let Some(w) = self.work.as_mut() {
            while let Some(&(ticket, id)) = w.unapplied_order.front() {
                if ticket > durable {
                    break;
                }
                w.unapplied_order.pop_front();
                // A later write of the same transaction keeps its entry.
                if w.unapplied.get(&id).is_some_and(|(latest, _)| *latest == ticket) {
                    w.unapplied.remove(&id);
                }
            }
            // Recurrences and their charges that storage now has are storage's to answer
            // for, unless a deadline is still to come.
            w.recs.prune(durable);
            w.cobrs.prune(durable);
            w.claims.prune(durable);
            w.closed_meds.prune(durable);
            w.recoveries.prune(durable);
        }
        // The keys of durable writes are storage's to answer for (a command asks it anyway),
        // so the ledger keeps only those in flight.
        if let Ok(ledger) = self.ledger.as_mut() {
            if ledger.keys_held() > 0 {
                let in_flight = self.work.as_ref().map(|w| &w.unapplied);
                ledger.retain_keys(|local| in_flight.is_some_and(|u| u.contains_key(&local)));
            }
        }
        self.tidy();
    }

    /// Stops the actor after a failure that may leave its memory ahead of (or apart from)
    /// the disk. It answers nothing more, and stops once the writes it queued have landed
    /// (or failed), so the next actor of this account loads a state that holds them, and
    /// once the replies it owes are sent.
    pub(super) fn halt(&mut self, why: &str, ctx: &mut Context<Self>) -> CommandError {
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
        CommandError::Internal(Cause::msg(why))
    }

    /// Halts after storage failed under a command, before anything of it was applied: the
    /// client may retry, so it answers 503 (`Unavailable`), as a database that does not
    /// answer is a passing condition. A record that does not decode (`corrupt`) is damage
    /// or a bug, and answers 500.
    pub(super) fn halt_on_storage(
        &mut self,
        why: &str,
        corrupt: bool,
        ctx: &mut Context<Self>,
    ) -> CommandError {
        match self.halt(why, ctx) {
            CommandError::Internal(cause) if !corrupt => CommandError::Unavailable(cause),
            other => other,
        }
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
        reply: Result<T, CommandError>,
    ) -> ResponseActFuture<Self, Result<T, CommandError>> {
        self.last_active = self.deps.clock.now();
        if self.early {
            // The request waits for durability itself; `forget_when_durable` does the rest.
            return Box::pin(fut::ready(reply));
        }
        let commit = Arc::clone(&self.deps.commit);
        let ticket = self.last_ticket;
        let wait = async move { commit.durable(ticket).await };
        self.replies_pending += 1;
        Box::pin(wait.into_actor(self).map(move |durable, act, ctx| {
            act.replies_pending -= 1;
            let reply = match durable {
                Ok(()) => {
                    act.submit_ready(ctx);
                    // What is durable now is storage's to answer for.
                    act.prune_unapplied();
                    reply
                }
                // This actor's memory may hold effects that never reached the disk.
                Err(e) => Err(match act.halt(&format!("write not durable: {e}"), ctx) {
                    CommandError::Internal(cause) => CommandError::Unavailable(cause),
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
        outcome: RailOutcome,
        on_us: Option<AccountId>,
        ctx: &mut Context<Self>,
    ) {
        let Some(tx) = self.pending_tx(local_id).cloned() else { return };
        // A refund that failed gives its amount back to the original's refunded sum.
        let original = match (&tx.refund, tx.kind, outcome.result.is_err()) {
            (Some(r), TxKind::RefundIn, true) => match self.transaction(r.original_local_id, ctx) {
                Ok(o) => o,
                Err(_) => return,
            },
            _ => None,
        };
        // An on-us payment names its payer to the payee: this account's name and document.
        let payer = match on_us {
            Some(payee) => match self.deps.repo.account(self.account.id) {
                Ok(Some(a)) => Some(decide::OnUsPayer {
                    payee,
                    name: a.profile.name.as_str().to_owned(),
                    document: a.profile.document.to_string(),
                }),
                Ok(None) => None,
                Err(e) => {
                    self.halt(&format!("storage read failed: {e}"), ctx);
                    return;
                }
            },
            None => None,
        };
        let now = self.now();
        let decided = match self.view() {
            Ok(view) => decide::settle(&view, tx, outcome.clone(), original, payer.as_ref(), now),
            Err(_) => return,
        };
        match decided {
            Ok(None) => {}
            Ok(Some(plan)) => {
                let credit = plan.records.iter().find_map(|r| match r {
                    Record::OnUsCredit(c) => Some(c.clone()),
                    _ => None,
                });
                match self.execute(plan, ctx) {
                    Ok(()) => {
                        if let Some(credit) = credit {
                            self.deliver_when_durable(credit, ctx);
                        }
                        self.forget_when_durable(ctx)
                    }
                    Err(_) if !self.halted => {
                        // The disk is full (logged once by the journal): the bank's answer is
                        // kept and written once room returns, so the money does not stay
                        // blocked.
                        ctx.run_later(SETTLE_RETRY_AFTER, move |act, ctx| {
                            act.settle(local_id, outcome, on_us, ctx)
                        });
                    }
                    Err(_) => {}
                }
            }
            Err(r) => {
                self.refused(r, ctx);
            }
        }
    }

    /// Hands an on-us credit to the courier once the settlement that wrote it is durable
    /// (before, a crash could lose the settlement and leave a credit delivered for it).
    fn deliver_when_durable(&mut self, credit: decide::OnUsCredit, ctx: &mut Context<Self>) {
        let commit = Arc::clone(&self.deps.commit);
        let ticket = self.last_ticket;
        let courier = self.deps.on_us.get().cloned();
        ctx.spawn(
            async move {
                if commit.durable(ticket).await.is_ok() {
                    if let Some(c) = courier {
                        c.do_send(super::on_us::DeliverOnUs(credit));
                    }
                }
            }
            .into_actor(self),
        );
    }

    /// Once this actor's writes are durable: sends their new debits to the bank and forgets
    /// them, for the writes no reply of the actor's waits for (a settlement, an expiry, every
    /// request's: see `messages::Early`). The memory of an account whose last write was one
    /// must not wait for its next command. One wait at a time; a write that does not become
    /// durable halts the actor, as a reply's does.
    pub(super) fn forget_when_durable(&mut self, ctx: &mut Context<Self>) {
        let nothing = |w: &Work| w.unapplied.is_empty() && w.ready.is_empty();
        if self.forgetting || self.halted || self.work.as_deref().is_none_or(nothing) {
            return;
        }
        self.forgetting = true;
        let commit = Arc::clone(&self.deps.commit);
        let ticket = self.last_ticket;
        let landed = async move { commit.durable(ticket).await };
        ctx.spawn(landed.into_actor(self).map(|landed, act, ctx| {
            act.forgetting = false;
            match landed {
                Ok(()) => {
                    act.submit_ready(ctx);
                    act.prune_unapplied();
                    // Writes made meanwhile get their own wait.
                    act.forget_when_durable(ctx);
                }
                Err(e) => {
                    act.halt(&format!("write not durable: {e}"), ctx);
                }
            }
        }));
    }

    /// Closes an open charge that reached its expiration.
    fn expire_charge(&mut self, local_id: u64, ctx: &mut Context<Self>) {
        let Some(charge) = self.open_charge(local_id).cloned() else { return };
        let plan = decide::expire_charge(charge, self.now());
        match self.execute(plan, ctx) {
            Ok(_) => self.forget_when_durable(ctx),
            Err(e) => {
                tracing::error!(account = %self.account.id, local_id, error = %e, "charge expiry not recorded")
            }
        }
    }

    /// Whether the actor can stop without losing anything: nothing pending, open, scheduled
    /// or in flight, every write durable, and no request for a while.
    fn idle(&mut self, now: DateTime<Utc>) -> bool {
        self.prune_unapplied();
        now - self.last_active >= chrono::Duration::seconds(ACCOUNT_IDLE_STOP_SECONDS)
            && self.work.is_none()
            && self.replies_pending == 0
            && self.last_ticket <= self.deps.commit.durable_now()
    }

    /// What the timer does: at most [`DUE_PER_TURN_MAX`] of what is due, so a long run of
    /// things due at one instant (a merchant's recurring charges at 00:00) is done in turns
    /// between which the actor serves its mailbox; the timer, armed again on what is left
    /// (due already), takes the next turn at once.
    pub(super) fn expire_due(&mut self, ctx: &mut Context<Self>) {
        self.expire_due_up_to(DUE_PER_TURN_MAX, ctx);
    }

    /// Whether a deadline or a scheduled split has come at the actor's `now`.
    pub(super) fn anything_due(&self) -> bool {
        let now = self.now();
        self.work.as_ref().is_some_and(|w| {
            w.deadlines.first().is_some_and(|(at, _)| *at <= now)
                || w.scheduled.first().is_some_and(|(at, _)| *at <= now)
        })
    }

    /// Does at most `limit` of the deadlines that have come (and every scheduled split).
    pub(super) fn expire_due_up_to(&mut self, limit: usize, ctx: &mut Context<Self>) {
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
        let Some(w) = self.work.as_mut() else { return };
        // Scheduled splits whose time has come go to the bank (their writes are long durable).
        let due: Vec<(DateTime<Utc>, u64)> =
            w.scheduled.iter().take_while(|(at, _)| *at <= now).copied().collect();
        for key in &due {
            w.scheduled.remove(key);
        }
        let expired: Vec<u64> =
            w.deadlines.iter().take_while(|(d, _)| *d <= now).take(limit).map(|(_, id)| *id).collect();
        for (_, local_id) in due {
            if let Some(tx) = self.pending_tx(local_id) {
                self.submit(tx, ctx);
            }
        }
        for id in expired {
            if self.open_charge(id).is_some() {
                self.expire_charge(id, ctx);
            } else if self.held_rec(id).is_some() {
                self.expire_rec(id, ctx);
            } else if self.held_cobr(id).is_some() {
                self.attempt_cobr(id, ctx);
            } else {
                self.settle(id, RailOutcome::refused(ErrorCode::Expired), None, ctx);
            }
        }
        self.tidy();
        self.arm(ctx);
    }

    /// Keeps `last_active` as it was (time moving is not a request).
    pub(super) fn untouched_reply(&mut self) -> ResponseActFuture<Self, Result<(), CommandError>> {
        let last = self.last_active;
        let reply = self.reply_when_durable(Ok(()));
        self.last_active = last;
        reply
    }
}

/// Frees an emptied map's table (a map keeps its largest size otherwise).
fn give_back<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>) {
    if map.is_empty() && map.capacity() > 0 {
        map.shrink_to_fit();
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
        let pending: Vec<(u64, Option<DateTime<Utc>>)> = self
            .work
            .as_ref()
            .map(|w| w.pending.values().map(|t| (t.local_id, t.scheduled_for)).collect())
            .unwrap_or_default();
        for (local_id, scheduled_for) in pending {
            match scheduled_for {
                Some(at) if at > now => {
                    self.work().scheduled.insert((at, local_id));
                }
                _ => {
                    if let Some(tx) = self.pending_tx(local_id) {
                        self.submit(tx, ctx);
                    }
                }
            }
        }
        self.arm(ctx);
    }
}
