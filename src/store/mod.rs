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

pub use commit::{CommitError, CountedIndex, GroupCommit};
pub use memory::MemoryStore;
pub use repo::{
    AccountRecord, AttemptOutcome, CertificateRecord, ClientRecord, DeliveryLog, DeliveryState, Repo,
    RepoError, Undelivered, WebhookConfig, KEY_ADMIN_TOKEN_HASH, KEY_CLOCK_OFFSET, KEY_DEMO_ACCOUNT, KEY_JWT,
};
pub use sled_store::{SledStore, STORAGE_CACHE_MB_DEFAULT};

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

    /// Appends another batch's writes after this one's.
    pub fn extend(&mut self, other: Batch) {
        self.ops.extend(other.ops);
    }

    /// Drops every write that a later write of the same key in this batch overrides. The
    /// batch applies atomically, so no reader could have seen the dropped values: the result
    /// is the same, with less to write (a hot account's ledger record, written once per
    /// payment, is written once per group).
    pub fn compact(&mut self) {
        let mut seen = std::collections::HashSet::new();
        let mut kept: Vec<Op> = Vec::with_capacity(self.ops.len());
        for op in self.ops.drain(..).rev() {
            let key = match &op {
                Op::Put(k, _) | Op::Delete(k) => k.clone(),
            };
            if seen.insert(key) {
                kept.push(op);
            }
        }
        kept.reverse();
        self.ops = kept;
    }

    /// The number of writes.
    pub fn len_hint(&self) -> usize {
        self.ops.len()
    }
}

/// Key-value pairs in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The storage engine behind the server.
pub trait Store: Send + Sync + 'static {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Every pair whose key starts with `prefix`, in key order.
    fn scan_prefix(&self, prefix: &[u8]) -> Result<Pairs, StoreError>;
    /// Visits the pairs with `from <= key < to`, highest key first, while `visit` answers
    /// true; nothing past the last pair visited is read.
    fn scan_rev(
        &self,
        from: &[u8],
        to: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError>;
    /// Applies the batch atomically (not yet durable).
    fn apply(&self, batch: &Batch) -> Result<(), StoreError>;
    /// Makes everything applied so far durable.
    fn flush(&self) -> Result<(), StoreError>;
    /// A number never handed out before, across restarts and crashes (ids may skip).
    fn generate_id(&self) -> Result<u64, StoreError>;
}

pub type SharedStore = Arc<dyn Store>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_keeps_the_last_write_of_each_key_in_order() {
        let mut b = Batch::default();
        b.put("a", vec![1]);
        b.put("b", vec![1]);
        b.put("a", vec![2]);
        b.delete("b");
        b.put("c", vec![3]);
        b.compact();
        let ops: Vec<String> = b
            .ops()
            .iter()
            .map(|o| match o {
                Op::Put(k, v) => format!("put {}={}", String::from_utf8_lossy(k), v[0]),
                Op::Delete(k) => format!("del {}", String::from_utf8_lossy(k)),
            })
            .collect();
        assert_eq!(ops, vec!["put a=2", "del b", "put c=3"]);
    }
}
