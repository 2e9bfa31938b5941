//! The read view of storage: the snapshot store (sled) under an in-memory overlay of every
//! write that the journal holds and the snapshot does not yet.
//!
//! The committer puts each durable group into the *active* layer. A checkpoint freezes it
//! (the active layer becomes the *frozen* one and a new active layer starts), writes the
//! frozen layer to the snapshot store in one batch, flushes, and only then drops it. A key
//! written many times between two checkpoints is in the layer once, so it reaches the
//! snapshot once. A key inserted ([`Op::Insert`]: its writer knows it exists nowhere else)
//! and deleted in the same layer leaves the layer altogether: it never reaches the snapshot.
//! Any other delete stays in the layer as a tombstone, which the checkpoint skips when the
//! snapshot never had the key.
//!
//! Reads look at the active layer, then the frozen one, then the snapshot, and always in
//! that order (layers before the snapshot): a value leaves the layers only after the
//! snapshot holds it, so a reader never misses a write that was acknowledged.

use std::collections::btree_map::Entry as MapEntry;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

use super::{prefix_end, Batch, Op, Pairs, SharedStore, Store, StoreError};

/// A key's newest write in a layer.
#[derive(Debug, Clone)]
pub struct Entry {
    /// `None`: deleted.
    pub value: Option<Vec<u8>>,
    /// Its first write in this layer was an insert: no older layer and not the snapshot has
    /// it, so a delete removes the entry instead of leaving a tombstone.
    fresh: bool,
}

/// A layer: each key's newest write.
type Layer = BTreeMap<Vec<u8>, Entry>;

fn entry_bytes(key: &[u8], value: Option<&Vec<u8>>) -> u64 {
    (key.len() + value.map_or(0, Vec::len)) as u64
}

#[derive(Default)]
struct Layers {
    active: Layer,
    /// Bytes of keys and values in the active layer (for checkpoint triggers and memory).
    active_bytes: u64,
    /// The journal sequence number of the last group in the active layer.
    active_seq: u64,
    frozen: Arc<Layer>,
}

/// What a checkpoint writes: the frozen layer and the last sequence number it holds.
pub struct Frozen {
    pub layer: Arc<BTreeMap<Vec<u8>, Entry>>,
    pub seq: u64,
    pub bytes: u64,
}

/// Hands out ids that are never handed out again (see [`Store::generate_id`]).
pub trait IdSource: Send + Sync {
    fn next_id(&self) -> Result<u64, StoreError>;
}

pub struct Overlay {
    base: SharedStore,
    layers: RwLock<Layers>,
    ids: Weak<dyn IdSource>,
}

impl Overlay {
    pub fn new(base: SharedStore, ids: Weak<dyn IdSource>) -> Overlay {
        Overlay { base, layers: RwLock::new(Layers::default()), ids }
    }

    /// The snapshot store underneath.
    pub fn base(&self) -> &SharedStore {
        &self.base
    }

    fn read(&self) -> RwLockReadGuard<'_, Layers> {
        self.layers.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Layers> {
        self.layers.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts a durable group, journal record `seq`, into the active layer.
    pub fn put_group(&self, batch: Batch, seq: u64) {
        let mut layers = self.write();
        let Layers { active, active_bytes, active_seq, .. } = &mut *layers;
        for op in batch.into_ops() {
            let (key, value, insert) = match op {
                Op::Put(k, v) => (k, Some(v), false),
                Op::Insert(k, v) => (k, Some(v), true),
                Op::Delete(k) => (k, None, false),
            };
            let added = entry_bytes(&key, value.as_ref());
            match active.entry(key) {
                MapEntry::Vacant(e) => {
                    *active_bytes += added;
                    e.insert(Entry { value, fresh: insert });
                }
                MapEntry::Occupied(mut e) => {
                    *active_bytes = active_bytes.saturating_sub(entry_bytes(e.key(), e.get().value.as_ref()));
                    if value.is_none() && e.get().fresh {
                        // Inserted in this layer and deleted again: as if never written.
                        e.remove();
                    } else {
                        *active_bytes += added;
                        e.get_mut().value = value;
                    }
                }
            }
        }
        *active_seq = (*active_seq).max(seq);
    }

    /// Bytes held by the active layer.
    pub fn active_bytes(&self) -> u64 {
        self.read().active_bytes
    }

    /// The journal sequence number of the last durable group put here since start (0: none).
    pub fn last_seq(&self) -> u64 {
        self.read().active_seq
    }

    /// Whether a checkpoint is being written (the frozen layer is not empty).
    pub fn checkpointing(&self) -> bool {
        !self.read().frozen.is_empty()
    }

    /// Starts a checkpoint: the active layer becomes the frozen one. Answers `None` when
    /// nothing was written since the last one. Call only when no checkpoint is under way.
    pub fn freeze(&self) -> Option<Frozen> {
        let mut layers = self.write();
        if layers.active.is_empty() {
            return None;
        }
        let layer = Arc::new(std::mem::take(&mut layers.active));
        let bytes = std::mem::take(&mut layers.active_bytes);
        layers.frozen = Arc::clone(&layer);
        Some(Frozen { layer, seq: layers.active_seq, bytes })
    }

    /// Ends a checkpoint once the snapshot store holds the frozen layer on disk.
    pub fn release_frozen(&self) {
        self.write().frozen = Arc::new(Layer::new());
    }

    /// The newest write of `key` in the layers: `Some(None)` if it was deleted, `None` if
    /// the layers do not know it.
    fn layered(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        let layers = self.read();
        layers.active.get(key).or_else(|| layers.frozen.get(key)).map(|e| e.value.clone())
    }

    /// The layers' writes with keys in `range`, newest layer winning, in key order.
    fn layered_range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
        let layers = self.read();
        let mut out: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            layers.frozen.range::<[u8], _>((from, to)).map(|(k, e)| (k.clone(), e.value.clone())).collect();
        out.extend(layers.active.range::<[u8], _>((from, to)).map(|(k, e)| (k.clone(), e.value.clone())));
        out
    }
}

impl Store for Overlay {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        match self.layered(key) {
            Some(value) => Ok(value),
            None => self.base.get(key),
        }
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Pairs, StoreError> {
        let end = prefix_end(prefix);
        let to = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let layered = self.layered_range(Bound::Included(prefix), to);
        let base = self.base.scan_prefix(prefix)?;
        if layered.is_empty() {
            return Ok(base);
        }
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = base.into_iter().collect();
        for (k, v) in layered {
            match v {
                Some(v) => merged.insert(k, v),
                None => merged.remove(&k),
            };
        }
        Ok(merged.into_iter().collect())
    }

    fn scan_rev(
        &self,
        from: &[u8],
        to: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        let layered = self.layered_range(Bound::Included(from), Bound::Excluded(to));
        if layered.is_empty() {
            return self.base.scan_rev(from, to, visit);
        }
        // Merge, highest key first: the layers' entries above each snapshot key go before it,
        // and a layered key hides the snapshot's.
        let mut pending = layered.iter().rev().peekable();
        let mut go_on = true;
        self.base.scan_rev(from, to, &mut |k, v| {
            while let Some((lk, lv)) = pending.next_if(|(lk, _)| lk.as_slice() >= k) {
                let shadows = lk.as_slice() == k;
                if let Some(lv) = lv {
                    if !visit(lk, lv) {
                        go_on = false;
                        return false;
                    }
                }
                if shadows {
                    return true;
                }
            }
            go_on = visit(k, v);
            go_on
        })?;
        if go_on {
            for (lk, lv) in pending {
                if let Some(lv) = lv {
                    if !visit(lk, lv) {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes straight to the layers, outside any journal record: only for stores that have
    /// no journal (tests). The committer uses [`Overlay::put_group`].
    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        let seq = self.read().active_seq;
        self.put_group(batch.clone(), seq);
        Ok(())
    }

    /// Durability is the journal's; the snapshot is flushed by checkpoints.
    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn generate_id(&self) -> Result<u64, StoreError> {
        match self.ids.upgrade() {
            Some(ids) => ids.next_id(),
            None => Err(StoreError::Engine("storage is closed".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn no_ids() -> Weak<dyn IdSource> {
        Weak::<crate::store::GroupCommit>::new()
    }

    fn batch(ops: &[(&str, Option<&str>)]) -> Batch {
        let mut b = Batch::default();
        for (k, v) in ops {
            match v {
                Some(v) => b.put(k.as_bytes(), v.as_bytes()),
                None => b.delete(k.as_bytes()),
            }
        }
        b
    }

    fn text(pairs: Pairs) -> Vec<String> {
        pairs
            .into_iter()
            .map(|(k, v)| format!("{}={}", String::from_utf8_lossy(&k), String::from_utf8_lossy(&v)))
            .collect()
    }

    fn rev(o: &Overlay, from: &str, to: &str, limit: usize) -> Vec<String> {
        let mut out = Vec::new();
        o.scan_rev(from.as_bytes(), to.as_bytes(), &mut |k, v| {
            out.push(format!("{}={}", String::from_utf8_lossy(k), String::from_utf8_lossy(v)));
            out.len() < limit
        })
        .unwrap();
        out
    }

    /// A snapshot with a/1, b/1, d/1, e/1; a checkpoint in progress that deleted b/1 and put
    /// c/1; and active writes over them.
    fn layered() -> Overlay {
        let base = Arc::new(MemoryStore::new());
        base.apply(&batch(&[("a/1", Some("s")), ("b/1", Some("s")), ("d/1", Some("s")), ("e/1", Some("s"))]))
            .unwrap();
        let o = Overlay::new(base, no_ids());
        o.put_group(batch(&[("b/1", None), ("c/1", Some("f")), ("d/1", Some("f"))]), 1);
        assert!(o.freeze().is_some());
        o.put_group(batch(&[("d/1", Some("a")), ("e/1", None), ("f/1", Some("a"))]), 2);
        o
    }

    #[test]
    fn reads_see_the_newest_layer_first_and_deletes_hide_the_snapshot() {
        let o = layered();
        let get = |k: &str| o.get(k.as_bytes()).unwrap().map(|v| String::from_utf8(v).unwrap());
        assert_eq!(get("a/1").as_deref(), Some("s"));
        assert_eq!(get("b/1"), None);
        assert_eq!(get("c/1").as_deref(), Some("f"));
        assert_eq!(get("d/1").as_deref(), Some("a"));
        assert_eq!(get("e/1"), None);
        assert_eq!(get("f/1").as_deref(), Some("a"));
        assert_eq!(text(o.scan_prefix(b"").unwrap()), vec!["a/1=s", "c/1=f", "d/1=a", "f/1=a"]);
        assert_eq!(text(o.scan_prefix(b"d/").unwrap()), vec!["d/1=a"]);
    }

    #[test]
    fn a_key_inserted_and_deleted_in_one_layer_leaves_no_trace_but_an_older_one_a_tombstone() {
        let base = Arc::new(MemoryStore::new());
        let o = Overlay::new(base.clone(), no_ids());
        let mut b = Batch::default();
        b.insert("hold/1", vec![1]);
        b.insert("hold/2", vec![1]);
        o.put_group(b, 1);
        let mut b = Batch::default();
        b.delete("hold/1");
        o.put_group(b, 2);
        assert_eq!(o.get(b"hold/1").unwrap(), None);
        let frozen = o.freeze().unwrap();
        assert!(!frozen.layer.contains_key(b"hold/1".as_slice()), "nothing for the checkpoint to write");
        assert_eq!(frozen.bytes, entry_bytes(b"hold/2", Some(&vec![1])), "bytes follow the entries");
        // The checkpoint writes the frozen layer; then hold/2 is deleted in a later layer:
        // the snapshot has it, so the delete stays as a tombstone.
        base.apply(&batch(&[("hold/2", Some("\u{1}"))])).unwrap();
        o.release_frozen();
        let mut b = Batch::default();
        b.delete("hold/2");
        o.put_group(b, 3);
        assert_eq!(o.get(b"hold/2").unwrap(), None);
        let again = o.freeze().unwrap();
        assert_eq!(again.layer.get(b"hold/2".as_slice()).map(|e| e.value.clone()), Some(None));
    }

    #[test]
    fn a_reverse_scan_merges_the_layers_and_stops_when_told() {
        let o = layered();
        assert_eq!(rev(&o, "a", "z", 10), vec!["f/1=a", "d/1=a", "c/1=f", "a/1=s"]);
        assert_eq!(rev(&o, "a", "z", 2), vec!["f/1=a", "d/1=a"]);
        assert_eq!(rev(&o, "b", "d/2", 10), vec!["d/1=a", "c/1=f"]);
        assert_eq!(rev(&o, "c/1", "c/2", 10), vec!["c/1=f"]);
    }

    #[test]
    fn the_scans_agree_with_a_plain_map_after_random_writes() {
        use proptest::prelude::*;
        let keys = prop::sample::select(vec!["k/1", "k/2", "k/3", "k/4", "k/5", "l/1"]);
        let op = (keys, prop::option::of(prop::sample::select(vec!["x", "y"])));
        let runner = proptest::collection::vec((op, 0u8..3), 0..40);
        proptest!(ProptestConfig::with_cases(200), |(ops in runner)| {
            let base = Arc::new(MemoryStore::new());
            let o = Overlay::new(base.clone(), no_ids());
            let mut model: BTreeMap<String, String> = BTreeMap::new();
            for (i, ((k, v), step)) in ops.into_iter().enumerate() {
                // step 0: into the snapshot directly; 1: a group; 2: a group, then a checkpoint.
                let b = batch(&[(k, v)]);
                if step == 0 && !o.checkpointing() && o.active_bytes() == 0 {
                    base.apply(&b).unwrap();
                } else {
                    o.put_group(b, i as u64 + 1);
                    if step == 2 {
                        if let Some(f) = o.freeze() {
                            let mut w = Batch::default();
                            for (k, e) in f.layer.iter() {
                                match &e.value { Some(v) => w.put(k.clone(), v.clone()), None => w.delete(k.clone()) }
                            }
                            base.apply(&w).unwrap();
                            o.release_frozen();
                        }
                    }
                }
                match v { Some(v) => { model.insert(k.into(), v.into()); } None => { model.remove(k); } }
                let all: Vec<String> = model.iter().map(|(k, v)| format!("{k}={v}")).collect();
                prop_assert_eq!(text(o.scan_prefix(b"").unwrap()), all.clone());
                let mut reversed = all.clone();
                reversed.reverse();
                prop_assert_eq!(rev(&o, "", "z", 100), reversed);
            }
        });
    }
}
