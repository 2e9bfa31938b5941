//! An in-memory [`Store`] for tests: the same contract as sled, with a switch that makes
//! every call fail so tests can show how the server answers a storage outage.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::{Batch, Op, Pairs, Store, StoreError};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Default)]
pub struct MemoryStore {
    // A std Mutex: nothing awaits while it is held, and tests are its only users.
    map: Mutex<Map>,
    failing: AtomicBool,
    ids: std::sync::atomic::AtomicU64,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// From now on every call answers a storage failure (or stops doing so).
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), StoreError> {
        if self.failing.load(Ordering::SeqCst) {
            Err(StoreError::Engine("injected failure".into()))
        } else {
            Ok(())
        }
    }

    fn map(&self) -> Result<std::sync::MutexGuard<'_, Map>, StoreError> {
        self.map.lock().map_err(|_| StoreError::Engine("poisoned".into()))
    }
}

impl Store for MemoryStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.check()?;
        Ok(self.map()?.get(key).cloned())
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Pairs, StoreError> {
        self.check()?;
        Ok(self
            .map()?
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn scan_rev(
        &self,
        from: &[u8],
        to: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        self.check()?;
        let map = self.map()?;
        for (k, v) in map.range(from.to_vec()..to.to_vec()).rev() {
            if !visit(k, v) {
                break;
            }
        }
        Ok(())
    }

    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        self.check()?;
        let mut map = self.map()?;
        for op in batch.ops() {
            match op {
                Op::Put(k, v) | Op::Insert(k, v) => {
                    map.insert(k.clone(), v.clone());
                }
                Op::Delete(k) => {
                    map.remove(k);
                }
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.check()
    }

    fn generate_id(&self) -> Result<u64, StoreError> {
        self.check()?;
        Ok(self.ids.fetch_add(1, Ordering::SeqCst))
    }
}
