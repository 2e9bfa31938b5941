//! Group commit: many writers, one thread that writes, and checkpoints behind it.
//!
//! Writers take a ticket from an atomic counter and queue their batch; nothing is locked.
//! A single committer thread drains everything queued, merges it into one batch, appends it
//! to the journal as one record, calls `fdatasync` once, puts it into the overlay that
//! readers see, and publishes the durable *watermark*: the highest ticket such that it and
//! every ticket below it are on disk (two writers may queue in the other order than their
//! tickets, so a ticket is durable only once every lower one is). A writer answers its
//! client only once its ticket is under the watermark: acknowledged means on disk.
//!
//! The snapshot store (sled) is not on that path. A checkpointer thread, about every
//! second or every [`CHECKPOINT_BYTES`] of writes, freezes the overlay, writes it to the
//! snapshot key by key (pausing after each [`CHECKPOINT_SLICE`] of work while it is on
//! time, so it never holds a core long), then `meta/applied_seq` (the last journal record
//! it holds), flushes, and then deletes the journal segments below it. sled is written and
//! flushed by that one thread only: it stalls writers for seconds when a flush runs beside
//! them (docs/benchmarks.md). If checkpoints fall behind, the committer waits before it
//! takes the next group (backpressure), so neither memory nor the journal grows without
//! bound.
//!
//! Failure is final: if a group cannot be written or synced, every ticket from that group
//! on is refused and the committer takes nothing more until the server restarts. Writers
//! keep their state in memory ahead of durability, so letting a later batch through after
//! a lost one could persist a state built on something that never was. A full disk is not
//! a failure: the journal knows it before it writes ([`CommitError::Full`]), so
//! [`GroupCommit::submit`] refuses new batches, which no writer has applied yet, and takes
//! them again once a segment can be made.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::journal::{Journal, JournalHandle};
use super::overlay::{IdSource, Overlay};
use super::{Batch, Op, SharedStore, Store, StoreError};

/// How long a writer waits for its flush before answering "unavailable" (the write may
/// still become durable; the client's retry meets its idempotency key).
pub const FLUSH_WAIT_MAX: Duration = Duration::from_secs(10);
/// Batches merged into one write at most.
pub const GROUP_BATCHES_MAX: usize = 4096;
/// A checkpoint starts at least this often while anything was written.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);
/// ... or as soon as the overlay holds this many bytes of writes.
pub const CHECKPOINT_BYTES: u64 = 32 * 1024 * 1024;
/// The committer waits while a checkpoint runs and the overlay holds more than this.
pub const OVERLAY_BYTES_MAX: u64 = 128 * 1024 * 1024;
/// Where the snapshot store keeps the last journal record it holds (u64 big-endian).
pub const KEY_APPLIED_SEQ: &[u8] = super::keys::APPLIED_SEQ;
/// Writes gathered at a time when a checkpoint writes its layer (see `checkpoint_once`):
/// the pages it builds are held in memory this many writes at a time.
pub const CHECKPOINT_CHUNK_OPS: usize = 512;
/// The longest the checkpointer works without a pause while it is on time. It shares the
/// machine's cores with the request path, and a checkpoint that held a core for tens of
/// milliseconds at a stretch queued the cash-outs behind it (docs/benchmarks.md, issue 25).
pub const CHECKPOINT_SLICE: Duration = Duration::from_millis(1);
/// The checkpointer's pause after each slice: a sleep, so the request path has the cores for
/// that long (a yield gives them up only to a thread waiting at that instant).
pub const CHECKPOINT_PAUSE: Duration = Duration::from_millis(1);
/// A checkpoint pauses only while it has run less than this: past it, or with the next
/// checkpoint's writes already past [`CHECKPOINT_BYTES`], it runs flat out, so pausing can
/// never make checkpoints fall behind the writes for good.
pub const CHECKPOINT_PACED_MAX: Duration = Duration::from_millis(500);
/// Every id handed out is below this (u64 big-endian); raised, durably, a block at a time.
pub const KEY_ID_FLOOR: &[u8] = super::keys::ID_FLOOR;
/// Ids reserved by one durable write: a crash skips at most this many.
pub const ID_BLOCK: u64 = 100_000;

#[derive(Debug, Clone, thiserror::Error)]
pub enum CommitError {
    #[error("storage failed; no write is accepted until a restart: {0}")]
    Failed(String),
    #[error("the write was not flushed within {0:?}")]
    NotDurable(Duration),
    /// The disk has no room for the journal's next segment; nothing was written, and writes
    /// are taken again once room returns.
    #[error("storage is full; retry later: {0}")]
    Full(String),
}

#[derive(Debug, Clone, Default)]
struct Progress {
    durable: u64,
    /// The first ticket refused, once storage failed.
    failed_from: Option<(u64, String)>,
}

struct Job {
    ticket: u64,
    batch: Batch,
}

/// An index whose entries the committer counts: for every key under `prefix`, the entry
/// `(key, value)` counts once under `counter(key, value)` (if `Some`). The committer is
/// the only thread that writes, so it reads an entry's previous value and the counters
/// without a race, and writes their new values in the same atomic batch as the entries:
/// a count can never disagree with its entries, even across a crash. Counters are big-endian
/// `i64`s; nothing else may write under their keys.
#[derive(Clone, Copy)]
pub struct CountedIndex {
    pub prefix: &'static [u8],
    pub counter: fn(key: &[u8], value: &[u8]) -> Option<Vec<u8>>,
}

/// Told of every group's writes under a prefix once they are durable (see
/// [`GroupCommit::observe`]).
pub type Observer = Box<dyn Fn(&[Op]) + Send + Sync>;

/// Where the committer makes a group durable: the file journal, or PostgreSQL's journal
/// table. Only the committer thread appends.
pub trait Log: Send {
    /// Appends `payload` as the next record and returns only once it is durable, with its
    /// sequence number (one more than the last). An error means the record is not durable
    /// and the committer takes nothing more.
    fn append_durable(&mut self, payload: &[u8]) -> Result<u64, String>;
}

/// The end of a log that the checkpointer releases once the snapshot holds its records.
pub trait LogTail: Send + Sync {
    fn release_through(&self, seq: u64) -> Result<(), String>;
}

impl Log for Journal {
    fn append_durable(&mut self, payload: &[u8]) -> Result<u64, String> {
        let seq = self.append(payload).map_err(|e| e.to_string())?;
        self.sync().map_err(|e| e.to_string())?;
        Ok(seq)
    }
}

impl LogTail for JournalHandle {
    fn release_through(&self, seq: u64) -> Result<(), String> {
        JournalHandle::release_through(self, seq).map(|_| ()).map_err(|e| format!("segments: {e}"))
    }
}

/// What the committer and the checkpointer tell each other.
#[derive(Default)]
struct CheckpointState {
    /// A checkpoint is wanted now (the overlay is large, or a caller waits for one).
    requested: bool,
    /// Checkpoints finished so far.
    done: u64,
    /// Why checkpoints stopped, if they did (the journal then keeps everything).
    failed: Option<String>,
    stop: bool,
    /// The checkpointer thread has ended.
    ended: bool,
}

pub struct GroupCommit {
    tickets: AtomicU64,
    counted: Option<CountedIndex>,
    observer: OnceLock<(&'static [u8], Observer)>,
    queue: Sender<Job>,
    stopped: AtomicBool,
    progress: watch::Sender<Progress>,
    /// The watermark again, for writers that wait on a thread rather than a task.
    durable_sync: (Mutex<Progress>, Condvar),
    flushes: AtomicU64,
    overlay: Arc<Overlay>,
    /// The file journal's shared parts (room, faults, disk use); `None` on other logs.
    journal: Option<JournalHandle>,
    /// Releases the log's records once the snapshot holds them.
    tail: Option<Box<dyn LogTail>>,
    checkpoint: (Mutex<CheckpointState>, Condvar),
    ids: Ids,
}

/// The id allocator: an atomic counter below a floor that is raised by a durable write
/// before any id above the old floor is handed out, so no id is handed out twice across
/// crashes.
struct Ids {
    next: AtomicU64,
    /// Ids below it are reserved on disk (`u64::MAX`/0 until the first reservation).
    floor: AtomicU64,
    /// Serializes reservations.
    reserving: Mutex<()>,
}

/// The committer's view of which tickets are on disk.
#[derive(Default)]
struct Watermark {
    durable: u64,
    /// Tickets flushed above a gap (a lower ticket not yet received).
    ahead: BTreeSet<u64>,
}

impl Watermark {
    fn flushed(&mut self, tickets: impl IntoIterator<Item = u64>) -> u64 {
        self.ahead.extend(tickets);
        while self.ahead.remove(&(self.durable + 1)) {
            self.durable += 1;
        }
        self.durable
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl GroupCommit {
    /// Starts a committer with no journal over `base` (tests and tools: durability is then
    /// the base store's, at each checkpoint).
    pub fn start(base: SharedStore) -> std::io::Result<Arc<GroupCommit>> {
        GroupCommit::start_with(base, None, None)
    }

    /// The same, keeping the counts of `counted`.
    pub fn start_counting(
        base: SharedStore,
        counted: Option<CountedIndex>,
    ) -> std::io::Result<Arc<GroupCommit>> {
        GroupCommit::start_with(base, None, counted)
    }

    /// Starts the committer and the checkpointer over the snapshot store `base`, appending
    /// to `journal`, keeping the counts of `counted`.
    pub fn start_with(
        base: SharedStore,
        journal: Option<Journal>,
        counted: Option<CountedIndex>,
    ) -> std::io::Result<Arc<GroupCommit>> {
        let handle = journal.as_ref().map(Journal::handle);
        let tail = handle.clone().map(|h| Box::new(h) as Box<dyn LogTail>);
        let log = journal.map(|j| Box::new(j) as Box<dyn Log>);
        GroupCommit::start_on(base, log, handle, tail, counted)
    }

    /// Starts the committer over `base` on any log (PostgreSQL's journal table).
    pub fn start_on_log(
        base: SharedStore,
        log: Box<dyn Log>,
        tail: Box<dyn LogTail>,
        counted: Option<CountedIndex>,
    ) -> std::io::Result<Arc<GroupCommit>> {
        GroupCommit::start_on(base, Some(log), None, Some(tail), counted)
    }

    fn start_on(
        base: SharedStore,
        log: Option<Box<dyn Log>>,
        journal: Option<JournalHandle>,
        tail: Option<Box<dyn LogTail>>,
        counted: Option<CountedIndex>,
    ) -> std::io::Result<Arc<GroupCommit>> {
        let (tx, rx) = mpsc::channel();
        let (progress, _) = watch::channel(Progress::default());
        let first_id = first_id(&*base).map_err(|e| std::io::Error::other(e.to_string()))?;
        let gc = Arc::new_cyclic(|me: &std::sync::Weak<GroupCommit>| GroupCommit {
            tickets: AtomicU64::new(0),
            counted,
            observer: OnceLock::new(),
            queue: tx,
            stopped: AtomicBool::new(false),
            progress,
            durable_sync: (Mutex::new(Progress::default()), Condvar::new()),
            flushes: AtomicU64::new(0),
            overlay: Arc::new(Overlay::new(base, me.clone() as std::sync::Weak<dyn IdSource>)),
            journal,
            tail,
            checkpoint: (Mutex::new(CheckpointState::default()), Condvar::new()),
            ids: Ids {
                next: AtomicU64::new(first_id),
                floor: AtomicU64::new(first_id),
                reserving: Mutex::new(()),
            },
        });
        let committer = Arc::clone(&gc);
        std::thread::Builder::new().name("pixgw-committer".into()).spawn(move || committer.run(log, &rx))?;
        let checkpointer = Arc::clone(&gc);
        std::thread::Builder::new()
            .name("pixgw-checkpoint".into())
            .spawn(move || checkpointer.run_checkpoints())?;
        Ok(gc)
    }

    /// What readers read: the snapshot store under every durable write not yet
    /// checkpointed.
    pub fn view(&self) -> SharedStore {
        Arc::clone(&self.overlay) as SharedStore
    }

    /// The snapshot store under the overlay: what checkpoints write (an online backup
    /// copies it while they go on).
    pub fn base(&self) -> SharedStore {
        Arc::clone(self.overlay.base())
    }

    /// The sequence number of the last group made durable since start (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.overlay.last_seq()
    }

    /// How many groups were written (the group size is writes / flushes).
    pub fn flush_count(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// The durability watermark now: every ticket up to it is on disk and readable.
    pub fn durable_now(&self) -> u64 {
        self.progress.borrow().durable
    }

    /// Batches submitted and not yet durable.
    pub fn queue_depth(&self) -> u64 {
        self.tickets.load(Ordering::Acquire).saturating_sub(self.durable_now())
    }

    /// Why storage failed, if it did.
    pub fn failure(&self) -> Option<String> {
        self.progress.borrow().failed_from.as_ref().map(|f| f.1.clone())
    }

    /// Why checkpoints stopped, if they did.
    pub fn checkpoint_failure(&self) -> Option<String> {
        lock(&self.checkpoint.0).failed.clone()
    }

    /// Waits until storage fails; answers why.
    pub async fn failed(&self) -> String {
        let mut rx = self.progress.subscribe();
        let seen = rx.wait_for(|p| p.failed_from.is_some()).await.map(|p| p.failed_from.clone());
        match seen {
            Ok(failed) => failed.map(|f| f.1).unwrap_or_default(),
            Err(_) => "the committer stopped".into(),
        }
    }

    /// Whether storage has failed (health reports it).
    pub fn has_failed(&self) -> bool {
        self.progress.borrow().failed_from.is_some()
    }

    /// Why new writes are refused for lack of room, if they are.
    pub fn full(&self) -> Option<String> {
        self.journal.as_ref().and_then(JournalHandle::no_room)
    }

    /// The journal, if there is one (metrics, fault injection in tests).
    pub fn journal(&self) -> Option<&JournalHandle> {
        self.journal.as_ref()
    }

    fn run(&self, mut log: Option<Box<dyn Log>>, rx: &Receiver<Job>) {
        let mut watermark = Watermark::default();
        let mut payload = Vec::new();
        let mut memory_seq = 0u64;
        while let Ok(first) = rx.recv() {
            let mut tickets = vec![first.ticket];
            let mut merged = first.batch;
            while tickets.len() < GROUP_BATCHES_MAX {
                match rx.try_recv() {
                    Ok(job) => {
                        tickets.push(job.ticket);
                        merged.extend(job.batch);
                    }
                    Err(_) => break,
                }
            }
            if self.progress.borrow().failed_from.is_some() {
                continue;
            }
            self.wait_for_checkpoint_room();
            let started = Instant::now();
            let counted = match self.counted {
                Some(index) => count(&*self.overlay, index, &mut merged),
                None => Ok(()),
            };
            merged.compact();
            let written = counted.map_err(|e| e.to_string()).and_then(|()| {
                if merged.is_empty() {
                    return Ok(None);
                }
                match log.as_mut() {
                    Some(j) => {
                        payload.clear();
                        merged.encode(&mut payload);
                        let seq = j.append_durable(&payload)?;
                        // With pixgw_checkpoint_applied_seq, the checkpoint's lag in records.
                        metrics::gauge!("pixgw_journal_last_seq").set(seq as f64);
                        Ok(Some(seq))
                    }
                    None => {
                        memory_seq += 1;
                        Ok(Some(memory_seq))
                    }
                }
            });
            match written {
                Ok(seq) => {
                    let write_seconds = started.elapsed().as_secs_f64();
                    let observed: Vec<Op> = match self.observer.get() {
                        Some((prefix, _)) => {
                            merged.ops().iter().filter(|op| op.key().starts_with(prefix)).cloned().collect()
                        }
                        None => Vec::new(),
                    };
                    if let Some(seq) = seq {
                        self.overlay.put_group(merged, seq);
                    }
                    metrics::histogram!("pixgw_commit_apply_seconds").record(write_seconds);
                    metrics::histogram!("pixgw_commit_seconds").record(started.elapsed().as_secs_f64());
                    self.flushes.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!("pixgw_committed_batches_total").increment(tickets.len() as u64);
                    let durable = watermark.flushed(tickets);
                    self.publish(|p| p.durable = durable);
                    if let (Some((_, observe)), false) = (self.observer.get(), observed.is_empty()) {
                        observe(&observed);
                    }
                    if self.overlay.active_bytes() >= CHECKPOINT_BYTES {
                        self.request_checkpoint();
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "storage failed; refusing every write until restart");
                    metrics::gauge!("pixgw_storage_failed").set(1.0);
                    let first_refused = self.progress.borrow().durable + 1;
                    self.publish(|p| p.failed_from = Some((first_refused, e.clone())));
                }
            }
        }
    }

    fn publish(&self, change: impl Fn(&mut Progress)) {
        self.progress.send_modify(&change);
        let (m, cv) = &self.durable_sync;
        change(&mut lock(m));
        cv.notify_all();
    }

    /// Backpressure: while a checkpoint is being written and the overlay is already large,
    /// taking more would only grow memory and the journal.
    fn wait_for_checkpoint_room(&self) {
        if self.overlay.active_bytes() < OVERLAY_BYTES_MAX || !self.overlay.checkpointing() {
            return;
        }
        let started = Instant::now();
        let (m, cv) = &self.checkpoint;
        let mut state = lock(m);
        while self.overlay.checkpointing() && state.failed.is_none() && !state.stop {
            state = cv.wait_timeout(state, Duration::from_millis(50)).unwrap_or_else(|p| p.into_inner()).0;
        }
        metrics::histogram!("pixgw_commit_backpressure_seconds").record(started.elapsed().as_secs_f64());
    }

    fn request_checkpoint(&self) {
        let (m, cv) = &self.checkpoint;
        lock(m).requested = true;
        cv.notify_all();
    }

    /// The checkpointer thread.
    fn run_checkpoints(&self) {
        self.checkpoint_loop();
        let (m, cv) = &self.checkpoint;
        lock(m).ended = true;
        cv.notify_all();
    }

    fn checkpoint_loop(&self) {
        let (m, cv) = &self.checkpoint;
        let mut last = Instant::now();
        loop {
            {
                let mut state = lock(m);
                while !state.requested && !state.stop && last.elapsed() < CHECKPOINT_EVERY {
                    let wait = CHECKPOINT_EVERY.saturating_sub(last.elapsed());
                    state = cv.wait_timeout(state, wait).unwrap_or_else(|p| p.into_inner()).0;
                }
                // Stopped: what is left stays in the journal (a shutdown asks for a last
                // checkpoint first).
                if state.failed.is_some() || (state.stop && !state.requested) {
                    return;
                }
                state.requested = false;
            }
            last = Instant::now();
            let outcome = self.checkpoint_once();
            let mut state = lock(m);
            match outcome {
                Ok(()) => state.done += 1,
                Err(e) => {
                    // The journal still holds everything since the last checkpoint, so nothing
                    // is lost; a restart replays it. Writes stop once the journal fills the disk.
                    tracing::error!(error = %e, "checkpoint failed; the journal keeps every write until restart");
                    state.failed = Some(e.to_string());
                }
            }
            let stop = state.stop;
            cv.notify_all();
            if stop || state.failed.is_some() {
                return;
            }
        }
    }

    /// Writes the overlay to the snapshot store, flushes it, and releases the journal
    /// below it.
    fn checkpoint_once(&self) -> Result<(), StoreError> {
        let Some(frozen) = self.overlay.freeze() else { return Ok(()) };
        let started = Instant::now();
        let base = self.overlay.base();
        // Written one write at a time, never as an atomic batch: sled holds a process-wide
        // lock that every read waits for while it applies a batch, and the account actor
        // reads storage for every cash-out. One batch of a second's writes held it for a
        // third of a second; parts of 512 writes still held each cash-out up for
        // milliseconds while a checkpoint ran, and the queue behind them made the tail of
        // the latency curve (docs/benchmarks.md, issue 25). A crash between two writes is
        // safe: `applied_seq` moves only after the last one, so recovery replays the whole
        // window again, and replaying puts and deletes of final values is idempotent.
        // The writes are paced ([`Pace`]): worked through at once, a checkpoint held a core
        // for 100 ms and more of every second at 6,000 cash-outs/s, and the requests that
        // arrived meanwhile queued for the other.
        let mut missing = None;
        let mut pace = Pace::new(started);
        let overlay = &self.overlay;
        let mut writes = frozen.layer.iter().inspect(|_| pace.write(|| overlay.active_bytes())).filter_map(
            |(key, entry)| match &entry.value {
                Some(v) => Some((key.as_slice(), Some(v.as_slice()))),
                // Put and deleted within the window: the snapshot never had it.
                None => match base.get(key) {
                    Ok(None) => None,
                    Ok(Some(_)) => Some((key.as_slice(), None)),
                    Err(e) => {
                        missing = Some(e);
                        None
                    }
                },
            },
        );
        base.apply_writes(&mut writes, CHECKPOINT_CHUNK_OPS)?;
        if let Some(e) = missing {
            return Err(e);
        }
        let mut applied = Batch::default();
        applied.put(KEY_APPLIED_SEQ, frozen.seq.to_be_bytes().to_vec());
        base.apply(&applied)?;
        base.flush()?;
        self.overlay.release_frozen();
        if let Some(tail) = &self.tail {
            tail.release_through(frozen.seq)
                .map_err(|e| StoreError::Engine(format!("releasing the journal: {e}")))?;
        }
        metrics::histogram!("pixgw_checkpoint_seconds").record(started.elapsed().as_secs_f64());
        metrics::histogram!("pixgw_checkpoint_paused_seconds").record(pace.paused.as_secs_f64());
        metrics::counter!("pixgw_checkpoint_bytes_total").increment(frozen.bytes);
        metrics::counter!("pixgw_checkpoints_total").increment(1);
        metrics::gauge!("pixgw_checkpoint_applied_seq").set(frozen.seq as f64);
        if let Some(j) = &self.journal {
            metrics::gauge!("pixgw_journal_disk_bytes").set(j.disk_bytes() as f64);
        }
        Ok(())
    }

    /// Runs a checkpoint now and waits for it (at shutdown, so the snapshot store holds
    /// everything and the next start replays nothing).
    pub fn checkpoint_now(&self) -> Result<(), CommitError> {
        let (m, cv) = &self.checkpoint;
        let mut state = lock(m);
        // Two rounds: one may already be under way with an older frozen layer.
        let target = state.done + 2;
        while state.done < target {
            if let Some(why) = &state.failed {
                return Err(CommitError::Failed(why.clone()));
            }
            if state.ended {
                return Err(CommitError::Failed("checkpoints were stopped".into()));
            }
            state.requested = true;
            cv.notify_all();
            state = cv.wait_timeout(state, Duration::from_millis(100)).unwrap_or_else(|p| p.into_inner()).0;
        }
        Ok(())
    }

    /// Stops the checkpointer (after [`GroupCommit::checkpoint_now`] at shutdown).
    pub fn stop_checkpoints(&self) {
        let (m, cv) = &self.checkpoint;
        lock(m).stop = true;
        cv.notify_all();
    }

    /// Registers the one observer, called on the committer thread with each group's writes
    /// under `prefix` right after they are durable (and readable): the webhook dispatcher
    /// learns of new outbox events this way, so it never sends an event that a crash could
    /// still take back. Answers false if an observer was already registered. The observer
    /// must be quick; it runs before the next group is written.
    pub fn observe(&self, prefix: &'static [u8], observer: Observer) -> bool {
        self.observer.set((prefix, observer)).is_ok()
    }

    /// Stops taking batches (at shutdown, after the server stopped serving).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// Queues a batch; it is durable once [`GroupCommit::durable`] for the ticket returns.
    pub fn submit(&self, batch: Batch) -> Result<u64, CommitError> {
        if let Some((_, why)) = &self.progress.borrow().failed_from {
            metrics::counter!("pixgw_storage_write_refusals_total", "reason" => "failed").increment(1);
            return Err(CommitError::Failed(why.clone()));
        }
        if self.stopped.load(Ordering::Acquire) {
            return Err(CommitError::Failed("shutting down".into()));
        }
        if let Some(why) = self.full() {
            metrics::counter!("pixgw_storage_write_refusals_total", "reason" => "full").increment(1);
            return Err(CommitError::Full(why));
        }
        let ticket = self.tickets.fetch_add(1, Ordering::AcqRel) + 1;
        self.queue
            .send(Job { ticket, batch })
            .map_err(|_| CommitError::Failed("committer stopped".into()))?;
        Ok(ticket)
    }

    /// Waits until everything up to `ticket` is on disk.
    pub async fn durable(&self, ticket: u64) -> Result<(), CommitError> {
        let mut rx = self.progress.subscribe();
        let outcome = tokio::time::timeout(FLUSH_WAIT_MAX, async {
            let seen = rx.wait_for(|p| reached(p, ticket)).await.map(|p| p.clone());
            match seen {
                Ok(p) => outcome_of(&p, ticket),
                Err(_) => Err(CommitError::Failed("committer stopped".into())),
            }
        })
        .await;
        outcome.unwrap_or(Err(CommitError::NotDurable(FLUSH_WAIT_MAX)))
    }

    /// Stops taking batches and waits (up to [`FLUSH_WAIT_MAX`]) until every batch taken
    /// is on disk: the last step of a graceful shutdown.
    pub async fn drain(&self) -> Result<(), CommitError> {
        self.stop();
        let issued = self.tickets.load(Ordering::Acquire);
        self.durable(issued).await
    }

    /// Queues a batch and waits until it is durable.
    pub async fn commit(&self, batch: Batch) -> Result<(), CommitError> {
        let ticket = self.submit(batch)?;
        self.durable(ticket).await
    }

    /// Queues a batch and blocks this thread until it is durable: for the rare writes made
    /// outside an actor (administration, start-up), which must not go around the committer.
    pub fn commit_blocking(&self, batch: Batch) -> Result<(), CommitError> {
        let ticket = self.submit(batch)?;
        let (m, cv) = &self.durable_sync;
        let deadline = Instant::now() + FLUSH_WAIT_MAX;
        let mut p = lock(m);
        while !reached(&p, ticket) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(CommitError::NotDurable(FLUSH_WAIT_MAX));
            }
            p = cv.wait_timeout(p, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        outcome_of(&p, ticket)
    }
}

impl GroupCommit {
    /// Moves the id counter up to `at_least` when it is below it, with the floor reserved
    /// durably first. Called once at start, before the store is shared: on PostgreSQL the
    /// database may have been rewound (a point-in-time recovery) below ids handed out
    /// before, and `domain::ids::restored_local_id_floor` of the start's time is above all
    /// of them (docs/deploy.md "Point-in-time recovery on PostgreSQL").
    pub fn raise_id_floor(&self, at_least: u64) -> Result<(), StoreError> {
        let _one = lock(&self.ids.reserving);
        if self.ids.next.load(Ordering::Acquire) >= at_least {
            return Ok(());
        }
        self.reserve_ids_below(at_least.saturating_add(ID_BLOCK))?;
        self.ids.next.store(at_least, Ordering::Release);
        Ok(())
    }

    /// Writes `floor` as the id floor, durably, then lets ids below it be handed out. The
    /// caller holds `ids.reserving`.
    fn reserve_ids_below(&self, floor: u64) -> Result<(), StoreError> {
        let mut b = Batch::default();
        b.put(KEY_ID_FLOOR, floor.to_be_bytes().to_vec());
        self.commit_blocking(b).map_err(|e| match e {
            CommitError::Full(why) => StoreError::Full(why),
            other => StoreError::Engine(other.to_string()),
        })?;
        self.ids.floor.store(floor, Ordering::Release);
        Ok(())
    }
}

impl IdSource for GroupCommit {
    fn next_id(&self) -> Result<u64, StoreError> {
        let id = self.ids.next.fetch_add(1, Ordering::AcqRel);
        if id < self.ids.floor.load(Ordering::Acquire) {
            return Ok(id);
        }
        // Rare (once per block): reserve the next block durably before answering.
        let _one = lock(&self.ids.reserving);
        while id >= self.ids.floor.load(Ordering::Acquire) {
            self.reserve_ids_below(self.ids.floor.load(Ordering::Acquire).saturating_add(ID_BLOCK))?;
        }
        Ok(id)
    }
}

/// Where ids start after a restart: the reserved floor, or, in a data dir of a release that
/// had sled hand out ids, past sled's counter (sled then flushed every write, so its counter
/// was durable).
fn first_id(base: &dyn Store) -> Result<u64, StoreError> {
    match base.get(KEY_ID_FLOOR)? {
        Some(v) => v
            .as_slice()
            .try_into()
            .map(u64::from_be_bytes)
            .map_err(|_| StoreError::Engine("meta/id_floor is not a u64".into())),
        None => Ok(base.generate_id()?.saturating_add(1)),
    }
}

fn reached(p: &Progress, ticket: u64) -> bool {
    p.durable >= ticket || p.failed_from.as_ref().is_some_and(|(f, _)| *f <= ticket)
}

fn outcome_of(p: &Progress, ticket: u64) -> Result<(), CommitError> {
    if p.durable >= ticket {
        Ok(())
    } else {
        Err(CommitError::Failed(p.failed_from.as_ref().map(|f| f.1.clone()).unwrap_or_default()))
    }
}

/// Appends to `batch` the new values of the counters its writes under the index change.
fn count(store: &dyn Store, index: CountedIndex, batch: &mut Batch) -> Result<(), StoreError> {
    let mut entries: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
    let mut deltas: HashMap<Vec<u8>, i64> = HashMap::new();
    for op in batch.ops() {
        let (key, new) = (op.key(), op.value());
        if !key.starts_with(index.prefix) {
            continue;
        }
        let old = match (entries.get(key), op) {
            (Some(v), _) => v.clone(),
            // A new entry: there is no old one to read.
            (None, Op::Insert(..)) => None,
            (None, _) => store.get(key)?,
        };
        if let Some(c) = old.as_deref().and_then(|v| (index.counter)(key, v)) {
            *deltas.entry(c).or_default() -= 1;
        }
        if let Some(c) = new.and_then(|v| (index.counter)(key, v)) {
            *deltas.entry(c).or_default() += 1;
        }
        entries.insert(key.to_vec(), new.map(<[u8]>::to_vec));
    }
    for (counter, delta) in deltas {
        if delta == 0 {
            continue;
        }
        let current = store.get(&counter)?.and_then(|v| v.try_into().ok()).map_or(0, i64::from_be_bytes);
        batch.put(counter, (current + delta).to_be_bytes().to_vec());
    }
    Ok(())
}

impl From<StoreError> for CommitError {
    fn from(e: StoreError) -> Self {
        CommitError::Failed(e.to_string())
    }
}

/// Whether a checkpoint that has run for `ran`, `slice` of it since its last pause, with
/// `next_bytes` of writes already gathered for the next checkpoint, pauses now.
fn pause_now(ran: Duration, slice: Duration, next_bytes: u64) -> bool {
    slice >= CHECKPOINT_SLICE && ran < CHECKPOINT_PACED_MAX && next_bytes < CHECKPOINT_BYTES
}

/// Paces a checkpoint's writes: a pause of [`CHECKPOINT_PAUSE`] after each
/// [`CHECKPOINT_SLICE`] of work, while [`pause_now`] says so.
struct Pace {
    started: Instant,
    slice_from: Instant,
    writes: u32,
    /// The time spent in pauses so far.
    paused: Duration,
}

impl Pace {
    /// The clock is read every this many writes (a write takes sled about 15 µs).
    const CLOCK_EVERY: u32 = 16;

    fn new(started: Instant) -> Pace {
        Pace { started, slice_from: started, writes: 0, paused: Duration::ZERO }
    }

    /// Counts one write, and pauses when a slice is over.
    fn write(&mut self, next_bytes: impl FnOnce() -> u64) {
        self.writes = self.writes.wrapping_add(1);
        if self.writes % Self::CLOCK_EVERY != 0 {
            return;
        }
        let now = Instant::now();
        if pause_now(now - self.started, now - self.slice_from, next_bytes()) {
            std::thread::sleep(CHECKPOINT_PAUSE);
            self.slice_from = Instant::now();
            self.paused += self.slice_from - now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::journal::{Journal, JournalOptions};
    use crate::store::{MemoryStore, Store};

    fn read(store: &dyn Store, k: &str) -> i64 {
        store.get(k.as_bytes()).unwrap().map(|v| i64::from_be_bytes(v.try_into().unwrap())).unwrap_or(0)
    }

    #[test]
    fn a_checkpoint_pauses_after_each_slice_only_while_it_is_on_time() {
        let ms = Duration::from_millis;
        let just_under = |d: Duration| d - Duration::from_nanos(1);
        assert!(!pause_now(ms(10), just_under(CHECKPOINT_SLICE), 0), "within its slice");
        assert!(pause_now(ms(10), CHECKPOINT_SLICE, 0), "a slice is over");
        assert!(pause_now(just_under(CHECKPOINT_PACED_MAX), ms(3), CHECKPOINT_BYTES - 1), "on time");
        assert!(!pause_now(CHECKPOINT_PACED_MAX, ms(3), 0), "it has run long: flat out");
        assert!(!pause_now(ms(10), ms(3), CHECKPOINT_BYTES), "the next one is due already: flat out");
    }

    fn journaled(dir: &std::path::Path, base: SharedStore) -> Arc<GroupCommit> {
        let applied =
            base.get(KEY_APPLIED_SEQ).unwrap().map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
        let r = Journal::open(dir, applied, JournalOptions::default()).unwrap();
        GroupCommit::start_with(base, Some(r.journal), None).unwrap()
    }

    #[test]
    fn the_watermark_waits_for_every_lower_ticket() {
        let mut w = Watermark::default();
        assert_eq!(w.flushed([2, 3]), 0);
        assert_eq!(w.flushed([1]), 3);
        assert_eq!(w.flushed([5]), 3);
        assert_eq!(w.flushed([4, 6]), 6);
    }

    #[actix_rt::test]
    async fn writes_are_acknowledged_after_a_flush_that_serves_many() {
        let store = Arc::new(MemoryStore::new());
        let gc = GroupCommit::start(store.clone()).unwrap();
        let mut tickets = Vec::new();
        for i in 0..100u32 {
            let mut b = Batch::default();
            b.put(format!("k{i}"), vec![1]);
            tickets.push(gc.submit(b).unwrap());
        }
        assert_eq!(tickets, (1..=100).collect::<Vec<u64>>());
        gc.durable(100).await.unwrap();
        let view = gc.view();
        assert!(view.get(b"k0").unwrap().is_some() && view.get(b"k99").unwrap().is_some());
        assert!((1..=100).contains(&gc.flush_count()));
    }

    #[test]
    fn a_checkpoint_moves_the_overlay_into_the_snapshot_once_per_key() {
        let dir = tempfile::tempdir().unwrap();
        let base = Arc::new(MemoryStore::new());
        let gc = journaled(dir.path(), base.clone());
        for i in 0..50u8 {
            let mut b = Batch::default();
            b.put("ledger/1", vec![i]); // rewritten by every group
            b.put(format!("pend/{i}"), vec![1]);
            b.delete(format!("pend/{i}")); // put and deleted within the window
            gc.commit_blocking(b).unwrap();
        }
        assert_eq!(base.get(b"ledger/1").unwrap(), None, "the snapshot lags until a checkpoint");
        assert_eq!(gc.view().get(b"ledger/1").unwrap(), Some(vec![49]));
        gc.checkpoint_now().unwrap();
        assert_eq!(base.get(b"ledger/1").unwrap(), Some(vec![49]));
        assert!(base.scan_prefix(b"pend/").unwrap().is_empty());
        assert_eq!(base.get(KEY_APPLIED_SEQ).unwrap(), Some(50u64.to_be_bytes().to_vec()));
        assert_eq!(gc.view().get(b"ledger/1").unwrap(), Some(vec![49]), "still readable after");
    }

    #[test]
    fn what_the_journal_holds_beyond_the_snapshot_is_replayed_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let base = Arc::new(MemoryStore::new());
        {
            let gc = journaled(dir.path(), base.clone());
            let mut b = Batch::default();
            b.put("a", vec![1]);
            gc.commit_blocking(b).unwrap();
            gc.checkpoint_now().unwrap();
            gc.stop_checkpoints();
            let mut b = Batch::default();
            b.put("b", vec![2]);
            b.delete("a");
            gc.commit_blocking(b).unwrap();
        }
        // As after a kill -9: the snapshot has the first group only.
        assert_eq!(base.get(b"a").unwrap(), Some(vec![1]));
        let r = Journal::open(dir.path(), 1, JournalOptions::default()).unwrap();
        assert_eq!(r.records.len(), 1);
        let batch = Batch::decode(&r.records[0].1).unwrap();
        assert_eq!(
            format!("{:?}", batch.ops()),
            format!("{:?}", [Op::Put(b"b".to_vec(), vec![2]), Op::Delete(b"a".to_vec())])
        );
    }

    #[test]
    fn a_raised_id_floor_holds_and_is_kept_and_a_lower_one_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let base = Arc::new(MemoryStore::new());
        let gc = journaled(dir.path(), base.clone());
        let small = gc.next_id().unwrap();
        gc.raise_id_floor(5_000_000).unwrap();
        let raised = gc.next_id().unwrap();
        assert_eq!(raised, 5_000_000, "after {small}");
        gc.raise_id_floor(10).unwrap();
        assert_eq!(gc.next_id().unwrap(), raised + 1, "a lower floor moves nothing");
        // The raise is durable (in the journal): a restart starts above it.
        gc.stop_checkpoints();
        drop(gc);
        let r = Journal::open(dir.path(), 0, JournalOptions::default()).unwrap();
        for (_, payload) in &r.records {
            base.apply(&Batch::decode(payload).unwrap()).unwrap();
        }
        drop(r);
        let again = GroupCommit::start(base.clone()).unwrap();
        assert!(again.next_id().unwrap() > raised + 1);
    }

    #[test]
    fn ids_are_never_handed_out_twice_across_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let base = Arc::new(MemoryStore::new());
        let gc = journaled(dir.path(), base.clone());
        gc.stop_checkpoints(); // as if killed: the snapshot never sees the reservation
        let first: Vec<u64> = (0..10).map(|_| gc.next_id().unwrap()).collect();
        assert!(first.windows(2).all(|w| w[0] < w[1]));
        // Recovery replays the journal into the snapshot, then ids go on above the floor.
        let r = Journal::open(dir.path(), 0, JournalOptions::default()).unwrap();
        for (_, payload) in &r.records {
            base.apply(&Batch::decode(payload).unwrap()).unwrap();
        }
        drop(r);
        let again = GroupCommit::start(base.clone()).unwrap();
        let next = again.next_id().unwrap();
        assert!(next > *first.last().unwrap(), "{next} was handed out before");
        assert!(next <= first[0] + 2 * ID_BLOCK, "a crash skips at most a block or so");
    }

    #[actix_rt::test]
    async fn the_observer_sees_each_group_once_it_is_durable() {
        let store = Arc::new(MemoryStore::new());
        let gc = GroupCommit::start(store.clone()).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let view = gc.view();
        let watcher = Arc::clone(&gc);
        assert!(gc.observe(
            b"outbox/",
            Box::new(move |ops: &[Op]| {
                for op in ops {
                    // Already readable and under the watermark when observed.
                    let stored = view.get(op.key()).unwrap().is_some();
                    let _ = tx.send((op.key().to_vec(), stored, watcher.durable_now()));
                }
            })
        ));
        assert!(!gc.observe(b"", Box::new(|_| {})), "one observer only");
        let mut b = Batch::default();
        b.put("other/1", vec![1]);
        b.put("outbox/1", vec![1]);
        let ticket = gc.submit(b).unwrap();
        let (key, stored, durable) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(key, b"outbox/1".to_vec());
        assert!(stored);
        assert!(durable >= ticket);
    }

    #[actix_rt::test]
    async fn counts_follow_the_entries_of_a_counted_index() {
        fn counter(_: &[u8], value: &[u8]) -> Option<Vec<u8>> {
            (value != b"x").then(|| [b"cnt/".as_slice(), value].concat())
        }
        let store = Arc::new(MemoryStore::new());
        let index = CountedIndex { prefix: b"idx/", counter };
        let gc = GroupCommit::start_counting(store.clone(), Some(index)).unwrap();
        let view = gc.view();
        let mut b = Batch::default();
        b.put("idx/1", b"a".to_vec());
        b.put("idx/2", b"a".to_vec());
        b.put("idx/3", b"b".to_vec());
        b.put("idx/3", b"a".to_vec()); // moved within the batch: counts once, under a
        b.put("other/1", b"a".to_vec());
        gc.commit(b).await.unwrap();
        assert_eq!((read(&*view, "cnt/a"), read(&*view, "cnt/b")), (3, 0));
        let mut b = Batch::default();
        b.put("idx/1", b"b".to_vec()); // a status change
        b.delete("idx/2");
        b.put("idx/4", b"x".to_vec()); // not counted
        gc.commit(b).await.unwrap();
        assert_eq!((read(&*view, "cnt/a"), read(&*view, "cnt/b")), (1, 1));
        // Across a checkpoint the counts go on from the snapshot's.
        gc.checkpoint_now().unwrap();
        let mut b = Batch::default();
        b.put("idx/1", b"b".to_vec()); // rewritten unchanged
        b.put("idx/5", b"b".to_vec());
        gc.commit(b).await.unwrap();
        assert_eq!(read(&*view, "cnt/b"), 2);
    }

    #[actix_rt::test]
    async fn after_a_failed_fsync_nothing_more_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(MemoryStore::new());
        let gc = journaled(dir.path(), store.clone());
        gc.commit(Batch::default()).await.unwrap();
        let mut b = Batch::default();
        b.put("kept", vec![1]);
        gc.commit(b).await.unwrap();
        gc.journal().unwrap().faults().fail_sync.store(true, Ordering::SeqCst);
        let mut b = Batch::default();
        b.put("lost", vec![1]);
        assert!(matches!(gc.commit(b).await, Err(CommitError::Failed(_))));
        assert!(gc.has_failed());
        // The disk may answer again, but a write after a lost one could build on it: refused,
        // and the fsync is never retried.
        let mut b = Batch::default();
        b.put("later", vec![1]);
        assert!(matches!(gc.submit(b), Err(CommitError::Failed(_))));
        assert_eq!(gc.view().get(b"lost").unwrap(), None, "never readable");
        assert_eq!(gc.view().get(b"later").unwrap(), None);
        assert_eq!(gc.view().get(b"kept").unwrap(), Some(vec![1]));
    }

    #[actix_rt::test]
    async fn with_no_room_for_a_segment_writes_are_refused_and_resume_when_room_returns() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(MemoryStore::new());
        let gc = journaled(dir.path(), store.clone());
        let mut b = Batch::default();
        b.put("before", vec![1]);
        gc.commit(b).await.unwrap();
        let faults = Arc::clone(gc.journal().unwrap().faults());
        faults.no_room.store(true, Ordering::SeqCst);
        // Fill the segment in use and the spares, until a segment is needed that cannot be made.
        let mut refused = None;
        for i in 0..10_000u32 {
            let mut b = Batch::default();
            b.put(format!("fill/{i}"), vec![0u8; 64 * 1024]);
            match gc.commit(b).await {
                Ok(()) => {}
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        assert!(matches!(refused, Some(CommitError::Full(_))), "{refused:?}");
        assert!(gc.full().is_some());
        assert!(!gc.has_failed(), "a full disk is not a failure");
        assert_eq!(gc.view().get(b"before").unwrap(), Some(vec![1]), "reads are served");
        faults.no_room.store(false, Ordering::SeqCst);
        // The preallocator tries again on its own every half second; here, at once.
        assert!(gc.journal().unwrap().try_make_room());
        assert!(gc.full().is_none());
        let mut b = Batch::default();
        b.put("after", vec![1]);
        gc.commit(b).await.unwrap();
        assert_eq!(gc.view().get(b"after").unwrap(), Some(vec![1]));
    }
}
