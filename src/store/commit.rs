//! Group commit: many writers, one flush.
//!
//! A writer applies its batch (atomic, in memory) and gets a ticket; a single flusher
//! thread repeatedly takes the newest ticket, flushes, and publishes it as durable; the
//! writer answers its client only once its ticket is durable. Every batch applied before a
//! flush starts is in that flush, so one `fsync` acknowledges every write that arrived
//! while the previous one ran, across all accounts. Nothing is acknowledged before it is on
//! disk (rule 2), and no writer waits for a flush of its own.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::{Batch, SharedStore, StoreError};

/// How long a writer waits for its flush before answering "unavailable" (the write may
/// still become durable later; the client's retry meets its idempotency key).
pub const FLUSH_WAIT_MAX: Duration = Duration::from_secs(10);
/// Pause after a failed flush before the next try.
const FLUSH_RETRY_PAUSE: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the write was not flushed within {0:?}")]
    NotDurable(Duration),
}

pub struct GroupCommit {
    store: SharedStore,
    requested: AtomicU64,
    wake: Mutex<()>,
    wake_cv: Condvar,
    durable: watch::Sender<u64>,
    flushes: AtomicU64,
    stopping: AtomicBool,
}

impl GroupCommit {
    /// Starts the flusher thread.
    pub fn start(store: SharedStore) -> std::io::Result<Arc<GroupCommit>> {
        let (durable, _) = watch::channel(0);
        let gc = Arc::new(GroupCommit {
            store,
            requested: AtomicU64::new(0),
            wake: Mutex::new(()),
            wake_cv: Condvar::new(),
            durable,
            flushes: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
        });
        let flusher = Arc::clone(&gc);
        std::thread::Builder::new().name("pixgw-flusher".into()).spawn(move || flusher.run())?;
        Ok(gc)
    }

    pub fn store(&self) -> &SharedStore {
        &self.store
    }

    /// How many flushes ran (the group-commit ratio is writes / flushes).
    pub fn flush_count(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    fn run(&self) {
        let mut flushed = 0u64;
        loop {
            {
                let mut guard = self.wake.lock().unwrap_or_else(|p| p.into_inner());
                while self.requested.load(Ordering::Acquire) == flushed {
                    if self.stopping.load(Ordering::Acquire) {
                        return;
                    }
                    guard = self.wake_cv.wait(guard).unwrap_or_else(|p| p.into_inner());
                }
            }
            let target = self.requested.load(Ordering::Acquire);
            match self.store.flush() {
                Ok(()) => {
                    flushed = target;
                    self.flushes.fetch_add(1, Ordering::Relaxed);
                    self.durable.send_replace(target);
                }
                Err(e) => {
                    tracing::error!(error = %e, "flush failed; retrying");
                    std::thread::sleep(FLUSH_RETRY_PAUSE);
                }
            }
        }
    }

    /// Stops the flusher after it has flushed everything applied so far.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        let _guard = self.wake.lock().unwrap_or_else(|p| p.into_inner());
        self.wake_cv.notify_all();
    }

    /// Applies a batch and answers its ticket; it is durable once [`GroupCommit::durable`]
    /// for that ticket returns.
    pub fn apply(&self, batch: &Batch) -> Result<u64, StoreError> {
        self.store.apply(batch)?;
        let ticket = self.requested.fetch_add(1, Ordering::AcqRel) + 1;
        let _guard = self.wake.lock().unwrap_or_else(|p| p.into_inner());
        self.wake_cv.notify_one();
        Ok(ticket)
    }

    /// Waits until everything up to `ticket` is on disk.
    pub async fn durable(&self, ticket: u64) -> Result<(), CommitError> {
        let mut rx = self.durable.subscribe();
        let reached =
            tokio::time::timeout(FLUSH_WAIT_MAX, async { rx.wait_for(|d| *d >= ticket).await.is_ok() }).await;
        match reached {
            Ok(true) => Ok(()),
            _ => Err(CommitError::NotDurable(FLUSH_WAIT_MAX)),
        }
    }

    /// The newest ticket handed out (waiting for it waits for everything applied so far).
    pub fn latest(&self) -> u64 {
        self.requested.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, Store};

    #[actix_rt::test]
    async fn a_write_is_acknowledged_after_a_flush_and_flushes_are_shared() {
        let store = Arc::new(MemoryStore::new());
        let gc = GroupCommit::start(store.clone()).unwrap();
        let mut tickets = Vec::new();
        for i in 0..100u32 {
            let mut b = Batch::default();
            b.put(format!("k{i}"), vec![1]);
            tickets.push(gc.apply(&b).unwrap());
        }
        for t in &tickets {
            gc.durable(*t).await.unwrap();
        }
        assert!(store.get(b"k99").unwrap().is_some());
        assert!(gc.flush_count() >= 1);
        assert!(gc.flush_count() <= 100);
        gc.stop();
    }

    #[actix_rt::test]
    async fn a_write_that_cannot_be_applied_gets_no_ticket() {
        let store = Arc::new(MemoryStore::new());
        let gc = GroupCommit::start(store.clone()).unwrap();
        store.set_failing(true);
        let mut b = Batch::default();
        b.put("k", vec![1]);
        assert!(gc.apply(&b).is_err());
        store.set_failing(false);
        let t = gc.apply(&b).unwrap();
        gc.durable(t).await.unwrap();
        gc.stop();
    }
}
