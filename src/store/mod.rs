//! Storage: a small key-value trait, its sled implementation, an in-memory one for tests,
//! the journal and group commit that make writes durable, the pages that keep many records
//! to a sled value, the record formats, the start-up migrations, and the typed repository
//! the rest of the server uses.
//!
//! Every write goes through [`GroupCommit`]: it is acknowledged only once its journal record
//! is synced to disk; sled is the snapshot store, written and flushed by checkpoints
//! (docs/storage.md). Reads go through [`GroupCommit::view`], which layers the writes not
//! yet checkpointed over sled. The trait is deliberately tiny (get, scans, apply a batch,
//! flush) so that every durability rule stays visible in this module.

pub mod backup;
pub mod codec;
mod commit;
pub mod journal;
pub mod keys;
mod memory;
pub mod migrate;
mod overlay;
pub mod paged;
pub mod postgres;
mod records;
mod repo;
mod sled_store;

use std::path::Path;
use std::sync::Arc;

pub use commit::{CommitError, CountedIndex, GroupCommit, Log, LogTail, KEY_APPLIED_SEQ};
pub use journal::{JournalError, JournalOptions};
pub use memory::MemoryStore;
pub use paged::{PagedStore, Paging};
pub use records::{
    AccountRecord, AttemptOutcome, CertificateRecord, ClientRecord, DeliveryLog, DeliveryState, KeyRecord,
    RequestRecord, StoredResponse, Undelivered, WebhookConfig,
};
pub use repo::{Repo, RepoError};
pub use sled_store::{SledStore, STORAGE_CACHE_MB_DEFAULT};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The data dir is held by another process.
    #[error("the data dir {0} is in use by another pixgw process")]
    Locked(String),
    /// The storage engine failed (I/O error, corruption).
    #[error("storage failure: {0}")]
    Engine(String),
    /// No room for the next write; nothing was written, and writes resume once room returns.
    #[error("storage is full: {0}")]
    Full(String),
}

/// One write in a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put(Vec<u8>, Vec<u8>),
    /// A put of a key that exists nowhere yet (a new record, index entry or hold, under an
    /// id never handed out before). The writer's word for it lets the layers above storage
    /// drop a key inserted and deleted before it reaches the snapshot, and lets the
    /// committer count a new index entry without reading an old one. Storage and the
    /// journal treat it as a put.
    Insert(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl Op {
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Put(k, _) | Op::Insert(k, _) | Op::Delete(k) => k,
        }
    }

    /// The value written, `None` for a delete.
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            Op::Put(_, v) | Op::Insert(_, v) => Some(v),
            Op::Delete(_) => None,
        }
    }
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

    /// Puts a key that exists nowhere yet (see [`Op::Insert`]).
    pub fn insert(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push(Op::Insert(key.into(), value.into()));
    }

    pub fn delete(&mut self, key: impl Into<Vec<u8>>) {
        self.ops.push(Op::Delete(key.into()));
    }

    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    pub fn into_ops(self) -> Vec<Op> {
        self.ops
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
    /// payment, is written once per group). A key inserted in the batch stays an insert
    /// whatever was put after, and one inserted and then deleted is dropped altogether.
    pub fn compact(&mut self) {
        use std::collections::hash_map::Entry;
        // Per key: the index of its last write, and whether its first write inserted it.
        let mut last: std::collections::HashMap<&[u8], (usize, bool)> =
            std::collections::HashMap::with_capacity(self.ops.len());
        for (i, op) in self.ops.iter().enumerate() {
            match last.entry(op.key()) {
                Entry::Occupied(mut e) => e.get_mut().0 = i,
                Entry::Vacant(e) => {
                    e.insert((i, matches!(op, Op::Insert(..))));
                }
            }
        }
        if last.len() == self.ops.len() {
            return;
        }
        let keep: Vec<Option<bool>> = self
            .ops
            .iter()
            .enumerate()
            .map(|(i, op)| match last.get(op.key()) {
                Some(&(at, inserted)) if at == i => Some(inserted),
                _ => None,
            })
            .collect();
        let ops = std::mem::take(&mut self.ops);
        self.ops = ops
            .into_iter()
            .zip(keep)
            .filter_map(|(op, keep)| match (keep?, op) {
                (true, Op::Delete(_)) => None,
                (true, Op::Put(k, v)) => Some(Op::Insert(k, v)),
                (_, op) => Some(op),
            })
            .collect();
    }

    /// The number of writes.
    pub fn len_hint(&self) -> usize {
        self.ops.len()
    }

    /// The batch as a journal record's payload (physical redo: replaying it needs no
    /// business logic). Format version 1: a version byte, then for each write a tag (1 put,
    /// 2 delete), the key's length (u32 LE) and bytes, and for a put the value's length and
    /// bytes. An insert is written as a put: replay only needs the final values.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(REDO_FORMAT_VERSION);
        for op in &self.ops {
            let (tag, key, value) = match op {
                Op::Put(k, v) | Op::Insert(k, v) => (1u8, k, Some(v)),
                Op::Delete(k) => (2u8, k, None),
            };
            out.push(tag);
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
            if let Some(v) = value {
                out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                out.extend_from_slice(v);
            }
        }
    }

    /// Reads a payload written by [`Batch::encode`].
    pub fn decode(mut bytes: &[u8]) -> Result<Batch, String> {
        fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
            if bytes.len() < n {
                return Err("truncated".into());
            }
            let (head, rest) = bytes.split_at(n);
            *bytes = rest;
            Ok(head)
        }
        fn take_len(bytes: &mut &[u8]) -> Result<usize, String> {
            let b = take(bytes, 4)?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        }
        match take(&mut bytes, 1)?[0] {
            REDO_FORMAT_VERSION => {}
            v => return Err(format!("redo format version {v}; this release reads {REDO_FORMAT_VERSION}")),
        }
        let mut batch = Batch::default();
        while !bytes.is_empty() {
            let tag = take(&mut bytes, 1)?[0];
            let n = take_len(&mut bytes)?;
            let key = take(&mut bytes, n)?.to_vec();
            match tag {
                1 => {
                    let n = take_len(&mut bytes)?;
                    batch.put(key, take(&mut bytes, n)?.to_vec());
                }
                2 => batch.delete(key),
                t => return Err(format!("unknown write tag {t}")),
            }
        }
        Ok(batch)
    }
}

/// The version of [`Batch::encode`]'s format.
pub const REDO_FORMAT_VERSION: u8 = 1;

/// The smallest key greater than every key starting with `prefix` (`None`: no bound, for a
/// prefix of `0xFF` bytes only).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Key-value pairs in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// A write handed over by reference: a key and its new value (`None`: deleted).
pub type Write<'a> = (&'a [u8], Option<&'a [u8]>);

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
    /// Applies the batch's writes in order, each on its own rather than atomically, where
    /// the engine does that without holding readers up (sled: an atomic batch takes a lock
    /// that every read in the process waits for; single writes do not). For a checkpoint,
    /// which needs no atomicity below its `applied_seq`. By default, [`Store::apply`].
    fn apply_loose(&self, batch: &Batch) -> Result<(), StoreError> {
        self.apply(batch)
    }
    /// Applies `writes`, given in increasing key order, in parts of at most `part_ops`
    /// writes underneath, each applied loosely ([`Store::apply_loose`]), in order. For a
    /// checkpoint: a long atomic batch would hold up every reader, and a crash between
    /// writes is safe because the journal replays them all. Only a part is held in memory at
    /// a time.
    fn apply_writes<'a>(
        &self,
        writes: &mut dyn Iterator<Item = Write<'a>>,
        part_ops: usize,
    ) -> Result<(), StoreError> {
        let mut part = Batch::default();
        for (key, value) in writes {
            match value {
                Some(v) => part.put(key, v),
                None => part.delete(key),
            }
            if part.len_hint() >= part_ops {
                self.apply_loose(&std::mem::take(&mut part))?;
            }
        }
        if !part.is_empty() {
            self.apply_loose(&part)?;
        }
        Ok(())
    }
    /// Makes everything applied so far durable.
    fn flush(&self) -> Result<(), StoreError>;
    /// A number never handed out before, across restarts and crashes (ids may skip).
    fn generate_id(&self) -> Result<u64, StoreError>;
}

pub type SharedStore = Arc<dyn Store>;

/// Open storage: the committer, and the view every reader uses.
#[derive(Clone)]
pub struct Storage {
    pub commit: Arc<GroupCommit>,
    pub view: SharedStore,
}

/// Why storage could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("journal record {seq} does not decode: {reason}")]
    Record { seq: u64, reason: String },
    #[error("starting the storage threads: {0}")]
    Threads(#[from] std::io::Error),
    #[error("the database: {0}")]
    Postgres(#[from] postgres::PgError),
    #[error("the database's journal jumps from group {after} to {next}: groups are missing")]
    Gap { after: u64, next: u64 },
}

/// The storage gauges as recovery leaves them (every record through `last` replayed into the
/// snapshot), so that `/metrics` shows them from the first scrape, before the first write or
/// checkpoint moves them.
fn started_at(last: u64, journal_disk_bytes: Option<u64>) {
    metrics::gauge!("pixgw_journal_last_seq").set(last as f64);
    metrics::gauge!("pixgw_checkpoint_applied_seq").set(last as f64);
    if let Some(bytes) = journal_disk_bytes {
        metrics::gauge!("pixgw_journal_disk_bytes").set(bytes as f64);
    }
}

/// Replayed writes applied to the snapshot store at a time during recovery.
const REPLAY_OPS_MAX: usize = 100_000;

/// The last journal record the snapshot store holds (0: none, or a data dir of a release
/// before the journal, whose sled holds everything).
fn applied_seq(base: &dyn Store) -> Result<u64, StoreError> {
    match base.get(KEY_APPLIED_SEQ)? {
        Some(v) => Ok(u64::from_be_bytes(v.as_slice().try_into().map_err(|_| {
            StoreError::Engine(format!("{} is not a u64", String::from_utf8_lossy(KEY_APPLIED_SEQ)))
        })?)),
        None => Ok(0),
    }
}

/// Writes the journal's records above `applied` into the snapshot store, with
/// `meta/applied_seq`, and flushes: puts and deletes of final values, so replaying twice
/// is harmless.
fn replay(base: &dyn Store, applied: u64, records: &[(u64, Vec<u8>)]) -> Result<(), OpenError> {
    let Some(&(last, _)) = records.last() else { return Ok(()) };
    let mut batch = Batch::default();
    for (seq, payload) in records {
        let record = Batch::decode(payload).map_err(|reason| OpenError::Record { seq: *seq, reason })?;
        batch.extend(record);
        if batch.len_hint() >= REPLAY_OPS_MAX {
            batch.compact();
            base.apply(&std::mem::take(&mut batch))?;
        }
    }
    batch.put(KEY_APPLIED_SEQ, last.to_be_bytes().to_vec());
    batch.compact();
    base.apply(&batch)?;
    base.flush()?;
    tracing::info!(records = records.len(), from = applied + 1, to = last, "replayed the journal");
    Ok(())
}

/// What storage needs to know of the key layout (the repository defines it): the index
/// whose entries the committer counts, and the keys kept in pages.
#[derive(Clone, Copy)]
pub struct Layout {
    pub counted: Option<CountedIndex>,
    pub pages: &'static [Paging],
}

impl Storage {
    /// Opens the data dir's storage: sled in `db/` with the layout's pages over it, the
    /// journal in `journal/`. Recovery replays every journal record the snapshot lacks,
    /// flushes, and only then returns, so nothing is served from a state the disk does not
    /// hold.
    pub fn open(
        data_dir: &Path,
        cache_mb: u64,
        journal: JournalOptions,
        layout: Layout,
    ) -> Result<Storage, OpenError> {
        let sled: SharedStore = Arc::new(SledStore::open_with_cache(&data_dir.join("db"), cache_mb)?);
        let base: SharedStore = Arc::new(PagedStore::open(sled, layout.pages)?);
        let applied = applied_seq(&*base)?;
        let recovered = journal::Journal::open(&data_dir.join("journal"), applied, journal)?;
        replay(&*base, applied, &recovered.records)?;
        if !recovered.records.is_empty() {
            tracing::info!(cut_bytes = recovered.cut_bytes, "the journal's end");
        }
        let last = recovered.records.last().map_or(applied, |(seq, _)| *seq);
        started_at(last, Some(recovered.journal.handle().disk_bytes()));
        let commit = GroupCommit::start_with(base, Some(recovered.journal), layout.counted)?;
        let view = commit.view();
        Ok(Storage { commit, view })
    }

    /// Opens the storage kept in PostgreSQL for the node that holds the lease (its epoch
    /// is set in `pg`): replays the journal rows the snapshot lacks, under that epoch, and
    /// starts the committer on the journal table (docs/storage.md "PostgreSQL").
    pub fn open_postgres(pg: &Arc<postgres::Pg>, layout: Layout) -> Result<Storage, OpenError> {
        let kv: SharedStore = Arc::new(postgres::PgStore::new(Arc::clone(pg)));
        let base: SharedStore = Arc::new(PagedStore::open(kv, layout.pages)?);
        let applied = applied_seq(&*base)?;
        let records = pg.journal_after(applied)?;
        let mut expected = applied + 1;
        for (seq, _) in &records {
            if *seq != expected {
                return Err(OpenError::Gap { after: expected - 1, next: *seq });
            }
            expected += 1;
        }
        replay(&*base, applied, &records)?;
        let last = expected - 1;
        started_at(last, None);
        pg.release_journal_through(last)?;
        let log = postgres::PgLog::open(Arc::clone(pg), last)?;
        let tail = postgres::PgTail(Arc::clone(pg));
        let commit = GroupCommit::start_on_log(base, Box::new(log), Box::new(tail), layout.counted)?;
        // The database may have been rewound since the last leader (a point-in-time
        // recovery): ids start above any handed out before, as after a restore.
        let floor = crate::domain::ids::restored_local_id_floor(chrono::Utc::now());
        commit.raise_id_floor(floor)?;
        let view = commit.view();
        Ok(Storage { commit, view })
    }

    /// Storage over `base` with no journal, with the server's layout (tests that inject
    /// faults into `base`): writes reach `base` at each checkpoint.
    pub fn without_journal(base: SharedStore) -> Result<Storage, OpenError> {
        let layout = Repo::layout();
        let base: SharedStore = Arc::new(PagedStore::open(base, layout.pages)?);
        let commit = GroupCommit::start_counting(base, layout.counted)?;
        let view = commit.view();
        Ok(Storage { commit, view })
    }

    /// Storage in memory (tests and benches of everything above storage).
    pub fn memory() -> Result<Storage, OpenError> {
        Storage::without_journal(Arc::new(MemoryStore::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inserted_key_stays_new_and_one_inserted_then_deleted_is_dropped() {
        let mut b = Batch::default();
        b.insert("hold", vec![1]);
        b.insert("tx", vec![1]);
        b.put("tx", vec![2]);
        b.put("ledger", vec![1]);
        b.delete("hold");
        b.delete("old");
        b.compact();
        assert_eq!(
            b.ops(),
            &[
                Op::Insert(b"tx".to_vec(), vec![2]),
                Op::Put(b"ledger".to_vec(), vec![1]),
                Op::Delete(b"old".to_vec())
            ]
        );
        let mut bytes = Vec::new();
        b.encode(&mut bytes);
        let replayed = Batch::decode(&bytes).unwrap();
        assert_eq!(replayed.ops()[0], Op::Put(b"tx".to_vec(), vec![2]), "the journal keeps a put");
    }

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
                Op::Put(k, v) | Op::Insert(k, v) => format!("put {}={}", String::from_utf8_lossy(k), v[0]),
                Op::Delete(k) => format!("del {}", String::from_utf8_lossy(k)),
            })
            .collect();
        assert_eq!(ops, vec!["put a=2", "del b", "put c=3"]);
    }

    #[test]
    fn a_batch_round_trips_through_its_redo_encoding_and_damage_is_refused() {
        let mut b = Batch::default();
        b.put("key", b"value".to_vec());
        b.delete("gone");
        b.put(Vec::new(), Vec::new());
        let mut bytes = Vec::new();
        b.encode(&mut bytes);
        let back = Batch::decode(&bytes).unwrap();
        assert_eq!(format!("{:?}", back.ops()), format!("{:?}", b.ops()));
        for cut in 1..bytes.len() {
            // Every strict prefix that ends inside a write is refused, never misread.
            if let Ok(partial) = Batch::decode(&bytes[..cut]) {
                assert!(partial.ops().len() < b.ops().len());
            }
        }
        assert!(Batch::decode(&[9]).is_err(), "unknown version");
        assert!(Batch::decode(&[1, 7, 0, 0, 0, 0]).is_err(), "unknown tag");
    }
}
