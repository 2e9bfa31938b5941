//! Group commit: many writers, one thread that writes.
//!
//! Writers take a ticket from an atomic counter and queue their batch; nothing is locked.
//! A single committer thread drains everything queued, merges it into one atomic batch,
//! applies it, flushes once, and publishes the durable *watermark*: the highest ticket such
//! that it and every ticket below it are on disk (two writers may queue in the other order
//! than their tickets, so a ticket is durable only once every lower one is). A writer
//! answers its client only once its ticket is under the watermark (rule 2). Applying and flushing on one thread is not a
//! detail: sled slows to a crawl, with multi-second stalls, when a flush runs while other
//! threads write (measured in docs/benchmarks.md), and one merged batch per group costs a
//! fraction of one batch per write.
//!
//! Failure is final: if a group cannot be applied or flushed, every ticket from that group
//! on is refused and the committer takes nothing more until the server restarts. Writers
//! keep their state in memory ahead of durability, so letting a later batch through after
//! a lost one could persist a state built on something that never was.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Batch, Op, SharedStore, StoreError};

/// How long a writer waits for its flush before answering "unavailable" (the write may
/// still become durable; the client's retry meets its idempotency key).
pub const FLUSH_WAIT_MAX: Duration = Duration::from_secs(10);
/// Batches merged into one write at most.
pub const GROUP_BATCHES_MAX: usize = 4096;

#[derive(Debug, Clone, thiserror::Error)]
pub enum CommitError {
    #[error("storage failed; no write is accepted until a restart: {0}")]
    Failed(String),
    #[error("the write was not flushed within {0:?}")]
    NotDurable(Duration),
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

/// Told of every group once it is durable (see [`GroupCommit::observe`]).
pub type Observer = Box<dyn Fn(&Batch) + Send + Sync>;

pub struct GroupCommit {
    tickets: AtomicU64,
    counted: Option<CountedIndex>,
    observer: OnceLock<Observer>,
    queue: Sender<Job>,
    stopped: AtomicBool,
    progress: watch::Sender<Progress>,
    flushes: AtomicU64,
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

impl GroupCommit {
    /// Starts the committer thread.
    pub fn start(store: SharedStore) -> std::io::Result<Arc<GroupCommit>> {
        GroupCommit::start_counting(store, None)
    }

    /// Starts the committer thread, keeping the counts of `counted`.
    pub fn start_counting(
        store: SharedStore,
        counted: Option<CountedIndex>,
    ) -> std::io::Result<Arc<GroupCommit>> {
        let (tx, rx) = mpsc::channel();
        let (progress, _) = watch::channel(Progress::default());
        let gc = Arc::new(GroupCommit {
            tickets: AtomicU64::new(0),
            counted,
            observer: OnceLock::new(),
            queue: tx,
            stopped: AtomicBool::new(false),
            progress,
            flushes: AtomicU64::new(0),
        });
        let committer = Arc::clone(&gc);
        std::thread::Builder::new()
            .name("pixgw-committer".into())
            .spawn(move || committer.run(&store, &rx))?;
        Ok(gc)
    }

    /// How many flushes ran (the group size is writes / flushes).
    pub fn flush_count(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// The durability watermark now: every ticket up to it is applied and on disk.
    pub fn durable_now(&self) -> u64 {
        self.progress.borrow().durable
    }

    /// Whether storage has failed (health reports it).
    pub fn has_failed(&self) -> bool {
        self.progress.borrow().failed_from.is_some()
    }

    fn run(&self, store: &SharedStore, rx: &Receiver<Job>) {
        let mut watermark = Watermark::default();
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
            let started = Instant::now();
            let counted = match self.counted {
                Some(index) => count(store, index, &mut merged),
                None => Ok(()),
            };
            merged.compact();
            let applied = counted.and_then(|()| store.apply(&merged));
            let apply_seconds = started.elapsed().as_secs_f64();
            match applied.and_then(|()| store.flush()) {
                Ok(()) => {
                    metrics::histogram!("pixgw_commit_apply_seconds").record(apply_seconds);
                    metrics::histogram!("pixgw_commit_seconds").record(started.elapsed().as_secs_f64());
                    self.flushes.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!("pixgw_committed_batches_total").increment(tickets.len() as u64);
                    let durable = watermark.flushed(tickets);
                    self.progress.send_modify(|p| p.durable = durable);
                    if let Some(observe) = self.observer.get() {
                        observe(&merged);
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "storage failed; refusing every write until restart");
                    let first_refused = self.progress.borrow().durable + 1;
                    self.progress.send_modify(|p| p.failed_from = Some((first_refused, e.to_string())));
                }
            }
        }
    }

    /// Registers the one observer, called on the committer thread with each group's writes
    /// right after they are durable: the webhook dispatcher learns of new outbox events this
    /// way, so it never sends an event that a crash could still take back. Answers false if
    /// an observer was already registered. The observer must be quick; it runs before the
    /// next group is written.
    pub fn observe(&self, observer: Observer) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// Stops taking batches (at shutdown, after the server stopped serving).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// Queues a batch; it is durable once [`GroupCommit::durable`] for the ticket returns.
    pub fn submit(&self, batch: Batch) -> Result<u64, CommitError> {
        if let Some((_, why)) = &self.progress.borrow().failed_from {
            return Err(CommitError::Failed(why.clone()));
        }
        if self.stopped.load(Ordering::Acquire) {
            return Err(CommitError::Failed("shutting down".into()));
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
            let seen = rx
                .wait_for(|p| {
                    p.durable >= ticket || p.failed_from.as_ref().is_some_and(|(f, _)| *f <= ticket)
                })
                .await
                .map(|p| p.clone());
            match seen {
                Ok(p) if p.durable >= ticket => Ok(()),
                Ok(p) => Err(CommitError::Failed(p.failed_from.map(|f| f.1).unwrap_or_default())),
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
}

/// Appends to `batch` the new values of the counters its writes under the index change.
fn count(store: &SharedStore, index: CountedIndex, batch: &mut Batch) -> Result<(), StoreError> {
    let mut entries: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
    let mut deltas: HashMap<Vec<u8>, i64> = HashMap::new();
    for op in batch.ops() {
        let (key, new) = match op {
            Op::Put(k, v) => (k, Some(v)),
            Op::Delete(k) => (k, None),
        };
        if !key.starts_with(index.prefix) {
            continue;
        }
        let old = match entries.get(key) {
            Some(v) => v.clone(),
            None => store.get(key)?,
        };
        if let Some(c) = old.as_deref().and_then(|v| (index.counter)(key, v)) {
            *deltas.entry(c).or_default() -= 1;
        }
        if let Some(c) = new.and_then(|v| (index.counter)(key, v)) {
            *deltas.entry(c).or_default() += 1;
        }
        entries.insert(key.clone(), new.cloned());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, Store};

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
        assert!(store.get(b"k0").unwrap().is_some() && store.get(b"k99").unwrap().is_some());
        assert!((1..=100).contains(&gc.flush_count()));
    }

    #[actix_rt::test]
    async fn the_observer_sees_each_group_once_it_is_durable() {
        let store = Arc::new(MemoryStore::new());
        let gc = GroupCommit::start(store.clone()).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let seen_store = store.clone();
        let watcher = Arc::clone(&gc);
        assert!(gc.observe(Box::new(move |batch: &Batch| {
            for op in batch.ops() {
                if let crate::store::Op::Put(k, _) = op {
                    // Already in storage and under the watermark when observed.
                    let stored = seen_store.get(k).unwrap().is_some();
                    let _ = tx.send((k.clone(), stored, watcher.durable_now()));
                }
            }
        })));
        assert!(!gc.observe(Box::new(|_| {})), "one observer only");
        let mut b = Batch::default();
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
        let read = |store: &MemoryStore, k: &str| {
            store.get(k.as_bytes()).unwrap().map(|v| i64::from_be_bytes(v.try_into().unwrap())).unwrap_or(0)
        };
        let store = Arc::new(MemoryStore::new());
        let index = CountedIndex { prefix: b"idx/", counter };
        let gc = GroupCommit::start_counting(store.clone(), Some(index)).unwrap();
        let mut b = Batch::default();
        b.put("idx/1", b"a".to_vec());
        b.put("idx/2", b"a".to_vec());
        b.put("idx/3", b"b".to_vec());
        b.put("idx/3", b"a".to_vec()); // moved within the batch: counts once, under a
        b.put("other/1", b"a".to_vec());
        gc.commit(b).await.unwrap();
        assert_eq!((read(&store, "cnt/a"), read(&store, "cnt/b")), (3, 0));
        let mut b = Batch::default();
        b.put("idx/1", b"b".to_vec()); // a status change
        b.delete("idx/2");
        b.put("idx/4", b"x".to_vec()); // not counted
        gc.commit(b).await.unwrap();
        assert_eq!((read(&store, "cnt/a"), read(&store, "cnt/b")), (1, 1));
        let mut b = Batch::default();
        b.put("idx/1", b"b".to_vec()); // rewritten unchanged
        gc.commit(b).await.unwrap();
        assert_eq!(read(&store, "cnt/b"), 1);
    }

    #[actix_rt::test]
    async fn after_a_storage_failure_nothing_more_is_accepted() {
        let store = Arc::new(MemoryStore::new());
        let gc = GroupCommit::start(store.clone()).unwrap();
        gc.commit(Batch::default()).await.unwrap();
        store.set_failing(true);
        let mut b = Batch::default();
        b.put("lost", vec![1]);
        assert!(matches!(gc.commit(b).await, Err(CommitError::Failed(_))));
        assert!(gc.has_failed());
        store.set_failing(false);
        // Storage answers again, but a write after a lost one could build on it: refused.
        let mut b = Batch::default();
        b.put("later", vec![1]);
        assert!(matches!(gc.submit(b), Err(CommitError::Failed(_))));
        assert_eq!(store.get(b"later").unwrap(), None);
    }
}
