//! Storage: a small key-value trait, its sled implementation, an in-memory one for tests,
//! and the typed repository the rest of the server uses.
//!
//! The trait is deliberately tiny (get, scan a prefix, apply an atomic batch, flush) so that
//! every durability rule is visible in the callers: **a change is acknowledged only after
//! `flush` returned Ok** (rule 2). Callers that write a lot apply many batches and flush
//! once (group commit).

mod commit;
mod memory;
mod repo;
mod sled_store;

use std::sync::Arc;

pub use commit::{CommitError, GroupCommit};
pub use memory::MemoryStore;
pub use repo::{
    AccountRecord, CertificateRecord, ClientRecord, Repo, RepoError, KEY_ADMIN_TOKEN_HASH, KEY_CLOCK_OFFSET,
    KEY_DEMO_ACCOUNT, KEY_JWT,
};
pub use sled_store::SledStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The data dir is held by another process.
    #[error("the data dir {0} is in use by another pixgw process")]
    Locked(String),
    /// The storage engine failed (disk full, I/O error, corruption).
    #[error("storage failure: {0}")]
    Engine(String),
}

/// One write in a batch.
#[derive(Debug, Clone)]
pub enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// Writes applied all together or not at all.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    ops: Vec<Op>,
}

impl Batch {
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push(Op::Put(key.into(), value.into()));
    }

    pub fn delete(&mut self, key: impl Into<Vec<u8>>) {
        self.ops.push(Op::Delete(key.into()));
    }

    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Key-value pairs in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The storage engine behind the server.
pub trait Store: Send + Sync + 'static {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Every pair whose key starts with `prefix`, in key order.
    fn scan_prefix(&self, prefix: &[u8]) -> Result<Pairs, StoreError>;
    /// Applies the batch atomically (not yet durable).
    fn apply(&self, batch: &Batch) -> Result<(), StoreError>;
    /// Makes everything applied so far durable.
    fn flush(&self) -> Result<(), StoreError>;
    /// A number never handed out before, across restarts and crashes (ids may skip).
    fn generate_id(&self) -> Result<u64, StoreError>;
}

pub type SharedStore = Arc<dyn Store>;
