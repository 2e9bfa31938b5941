//! The sled implementation of [`Store`]: one tree, keys laid out by `repo.rs`. It is the
//! snapshot store: only the checkpointer writes and flushes it (and recovery, before the
//! server serves); everything else reads it through the overlay.

use std::path::Path;

use super::{Batch, Op, Pairs, Store, StoreError};

pub struct SledStore {
    db: sled::Db,
}

/// sled's page cache, in MiB, unless the operator says otherwise. sled's own default (1 GiB)
/// made a node that had touched a gigabyte of data hold a gigabyte of memory.
pub const STORAGE_CACHE_MB_DEFAULT: u64 = 64;
/// How long opening waits for a lock held by a handle that is closing.
pub const SLED_LOCK_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(2);

impl SledStore {
    /// Opens (or creates) the database under `dir` with the default cache. sled holds an
    /// exclusive file lock on it, which is how a second server on the same data dir is
    /// refused.
    pub fn open(dir: &Path) -> Result<SledStore, StoreError> {
        SledStore::open_with_cache(dir, STORAGE_CACHE_MB_DEFAULT)
    }

    /// Opens with a page cache of `cache_mb` MiB.
    pub fn open_with_cache(dir: &Path, cache_mb: u64) -> Result<SledStore, StoreError> {
        // A handle this process dropped a moment ago (a restore, then the migration that
        // reads it) keeps its lock until sled's background writes of it end: give those a
        // moment before calling the data dir another process's.
        let started = std::time::Instant::now();
        loop {
            match SledStore::try_open(dir, cache_mb) {
                Err(StoreError::Locked(_)) if started.elapsed() < SLED_LOCK_WAIT_MAX => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    fn try_open(dir: &Path, cache_mb: u64) -> Result<SledStore, StoreError> {
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_mb.saturating_mul(1024 * 1024))
            // Flushes are explicit (the checkpointer's). sled's own timer flush is off: a flush
            // running beside writers stalls them (docs/benchmarks.md).
            .flush_every_ms(None)
            .open()
            .map_err(|e| match e {
                sled::Error::Io(ref io) if io.to_string().contains("could not acquire lock") => {
                    StoreError::Locked(dir.display().to_string())
                }
                other => StoreError::Engine(other.to_string()),
            })?;
        Ok(SledStore { db })
    }
}

fn engine(e: sled::Error) -> StoreError {
    StoreError::Engine(e.to_string())
}

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.db.get(key).map_err(engine)?.map(|v| v.to_vec()))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Pairs, StoreError> {
        self.db
            .scan_prefix(prefix)
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).map_err(engine))
            .collect()
    }

    fn scan_rev(
        &self,
        from: &[u8],
        to: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        for pair in self.db.range(from..to).rev() {
            let (k, v) = pair.map_err(engine)?;
            if !visit(&k, &v) {
                break;
            }
        }
        Ok(())
    }

    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        let mut b = sled::Batch::default();
        for op in batch.ops() {
            match op {
                Op::Put(k, v) | Op::Insert(k, v) => b.insert(k.as_slice(), v.as_slice()),
                Op::Delete(k) => b.remove(k.as_slice()),
            }
        }
        self.db.apply_batch(b).map_err(engine)
    }

    /// Each write on its own: sled's `apply_batch` takes a process-wide lock that every
    /// `get` waits for, and a checkpoint's batches held the request path up for tens of
    /// milliseconds a second (docs/benchmarks.md, issue 25). Single writes take only the
    /// shared side of that lock.
    fn apply_loose(&self, batch: &Batch) -> Result<(), StoreError> {
        for op in batch.ops() {
            match op {
                Op::Put(k, v) | Op::Insert(k, v) => {
                    self.db.insert(k.as_slice(), v.as_slice()).map_err(engine)?;
                }
                Op::Delete(k) => {
                    self.db.remove(k.as_slice()).map_err(engine)?;
                }
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map(|_| ()).map_err(engine)
    }

    fn generate_id(&self) -> Result<u64, StoreError> {
        self.db.generate_id().map_err(engine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(ops: &[(&str, Option<&str>)]) -> Batch {
        let mut b = Batch::default();
        for (k, v) in ops {
            match v {
                Some(v) => b.put(k.as_bytes(), v.as_bytes().to_vec()),
                None => b.delete(k.as_bytes()),
            }
        }
        b
    }

    #[test]
    fn a_loose_apply_leaves_what_an_atomic_one_does() {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let [atomic, loose] = [&dirs[0], &dirs[1]].map(|d| SledStore::open(d.path()).unwrap());
        let seed = batch(&[("a", Some("1")), ("b", Some("2"))]);
        atomic.apply(&seed).unwrap();
        loose.apply(&seed).unwrap();
        // A new value, a delete, a new key, a delete of a key never written, and a key
        // written twice: the last write wins in order.
        let change =
            batch(&[("a", Some("10")), ("b", None), ("c", Some("3")), ("d", None), ("c", Some("30"))]);
        atomic.apply(&change).unwrap();
        loose.apply_loose(&change).unwrap();
        let all = |s: &SledStore| s.scan_prefix(b"").unwrap();
        assert_eq!(all(&loose), vec![(b"a".to_vec(), b"10".to_vec()), (b"c".to_vec(), b"30".to_vec())]);
        assert_eq!(all(&loose), all(&atomic));
    }
}
