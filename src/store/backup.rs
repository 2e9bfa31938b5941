//! Online backups of the embedded store, and restoring them into a new data dir.
//!
//! A backup is taken from a running server without stopping its writes, the way a
//! database's base backup is: the snapshot store (sled) is copied while checkpoints go on
//! writing into it, so the copy is *fuzzy* (each key holds its value from some moment of
//! the copy), and then every journal record since the snapshot the copy started from is
//! copied after it. Restoring applies the copied keys and then replays those records over
//! them; because a record holds the final value of each key it writes, replaying it over
//! any state at or after the snapshot it follows gives the state right after it. So the
//! restored store is exactly the server's state at the last record copied: a group
//! boundary, which is how the server itself recovers after a crash.
//!
//! Why that holds: the only writer of the snapshot store is the checkpointer, and it writes
//! only groups that are durable in the journal. The copy starts at snapshot `S` (the
//! `meta/applied_seq` read after journal segments were held, so none after `S` can be
//! deleted); a key that changes during the copy is changed by a record after `S`, and the
//! last record copied (`T`, read after the copy ended) is at or after every record the
//! checkpointer could have written during the copy. Keys no record in `(S, T]` writes have
//! had their value since `S`.
//!
//! # The stream (format version 1)
//! ```text
//! "PIXGWBAK" | version: u32 LE | snapshot seq S: u64 LE
//! frames: tag: u8 | len: u32 LE | body
//!   'P' a key and its value: key length u32 LE | key | value
//!   'R' a journal record: seq u64 LE | payload (the redo encoding of `Batch`)
//!   'E' the end: the summary as JSON (counts, S, T, when)
//! SHA-256 of every byte before it (32 bytes)
//! ```
//! Records are dense from `S + 1` to `T`. Nothing may follow the digest. A reader checks all
//! of this before a restore is allowed to become a data dir.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::overlay::IdSource;
use super::{applied_seq, replay, Batch, GroupCommit, Layout, OpenError, PagedStore, SharedStore, SledStore};
use super::{Store, StoreError, KEY_APPLIED_SEQ};

/// The first bytes of every backup.
pub const BACKUP_MAGIC: &[u8; 8] = b"PIXGWBAK";
/// The format this release writes and reads.
pub const BACKUP_FORMAT_VERSION: u32 = 1;
/// The largest frame body a reader accepts: a damaged length is refused, not allocated.
pub const BACKUP_FRAME_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Keys applied to the new store at a time when restoring.
const RESTORE_PAIRS_MAX: usize = 10_000;
/// Bytes of journal records replayed at a time when restoring.
const RESTORE_RECORD_BYTES_MAX: usize = 64 * 1024 * 1024;
/// The name of the stream inside a backup directory.
pub const BACKUP_FILE: &str = "backup.pixgw";
/// The name of the manifest, written last: a directory without it is not a backup.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Told each key and value copied; an error stops the copy.
pub type PairVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> io::Result<()> + 'a;

const TAG_PAIR: u8 = b'P';
const TAG_RECORD: u8 = b'R';
const TAG_END: u8 = b'E';

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("the journal: {0}")]
    Journal(#[from] super::JournalError),
    /// The server's store has no journal to copy (PostgreSQL keeps its own backups).
    #[error("this server's store is not the embedded one; back up its database with the database's tools")]
    NotEmbedded,
    #[error("not a valid backup: {0}")]
    Invalid(String),
    #[error("{0}")]
    Target(String),
}

fn invalid(why: impl Into<String>) -> BackupError {
    BackupError::Invalid(why.into())
}

/// What a backup holds, written at its end and into its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub format: u32,
    /// The snapshot the copy started from: every record up to it was in the copied keys.
    pub snapshot_seq: u64,
    /// The last journal record the backup holds: its state is the server's right after it.
    pub through_seq: u64,
    pub pairs: u64,
    pub records: u64,
    /// When the server finished it (RFC 3339).
    pub taken_at: String,
}

/// Writes the stream, hashing every byte.
pub struct BackupWriter<W: Write> {
    out: W,
    hash: Sha256,
    pairs: u64,
    records: u64,
    last_seq: u64,
    snapshot_seq: u64,
}

impl<W: Write> BackupWriter<W> {
    pub fn new(out: W, snapshot_seq: u64) -> io::Result<BackupWriter<W>> {
        let mut w = BackupWriter {
            out,
            hash: Sha256::new(),
            pairs: 0,
            records: 0,
            last_seq: snapshot_seq,
            snapshot_seq,
        };
        let mut head = Vec::with_capacity(20);
        head.extend_from_slice(BACKUP_MAGIC);
        head.extend_from_slice(&BACKUP_FORMAT_VERSION.to_le_bytes());
        head.extend_from_slice(&snapshot_seq.to_le_bytes());
        w.write(&head)?;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hash.update(bytes);
        self.out.write_all(bytes)
    }

    fn frame(&mut self, tag: u8, parts: &[&[u8]]) -> io::Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let len32 = u32::try_from(len)
            .ok()
            .filter(|l| *l as usize <= BACKUP_FRAME_BYTES_MAX)
            .ok_or_else(|| io::Error::other(format!("a frame of {len} bytes is over the limit")))?;
        let mut head = [0u8; 5];
        head[0] = tag;
        head[1..].copy_from_slice(&len32.to_le_bytes());
        self.write(&head)?;
        for p in parts {
            self.write(p)?;
        }
        Ok(())
    }

    pub fn pair(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        let klen = u32::try_from(key.len()).map_err(|_| io::Error::other("key too long"))?.to_le_bytes();
        self.pairs += 1;
        self.frame(TAG_PAIR, &[&klen, key, value])
    }

    /// Appends journal record `seq`, which must follow the one before (or the snapshot).
    pub fn record(&mut self, seq: u64, payload: &[u8]) -> io::Result<()> {
        if seq != self.last_seq + 1 {
            return Err(io::Error::other(format!("record {seq} does not follow {}", self.last_seq)));
        }
        self.last_seq = seq;
        self.records += 1;
        self.frame(TAG_RECORD, &[&seq.to_le_bytes(), payload])
    }

    /// Ends the stream with its summary and digest, and answers the summary and the sink.
    pub fn finish(mut self, taken_at: String) -> io::Result<(Summary, W)> {
        let summary = Summary {
            format: BACKUP_FORMAT_VERSION,
            snapshot_seq: self.snapshot_seq,
            through_seq: self.last_seq,
            pairs: self.pairs,
            records: self.records,
            taken_at,
        };
        let json = serde_json::to_vec(&summary).map_err(io::Error::other)?;
        self.frame(TAG_END, &[&json])?;
        let digest: [u8; 32] = std::mem::take(&mut self.hash).finalize().into();
        self.out.write_all(&digest)?;
        self.out.flush()?;
        Ok((summary, self.out))
    }
}

/// One thing read from a backup.
#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    Pair(Vec<u8>, Vec<u8>),
    Record(u64, Vec<u8>),
    /// The end, after its digest and counts were checked.
    End(Summary),
}

/// Reads a stream, checking it as it goes; [`Item::End`] comes only when every check
/// passed (digest, counts, dense records, nothing after the digest).
pub struct BackupReader<R: Read> {
    input: R,
    hash: Sha256,
    snapshot_seq: u64,
    last_seq: u64,
    pairs: u64,
    records: u64,
    ended: bool,
}

fn read_exact_or(input: &mut impl Read, buf: &mut [u8], what: &str) -> Result<(), BackupError> {
    input.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => invalid(format!("it ends inside {what} (an interrupted copy?)")),
        _ => BackupError::Io(e),
    })
}

impl<R: Read> BackupReader<R> {
    pub fn new(mut input: R) -> Result<BackupReader<R>, BackupError> {
        let mut head = [0u8; 20];
        read_exact_or(&mut input, &mut head, "its header")?;
        if &head[..8] != BACKUP_MAGIC {
            return Err(invalid("it does not start as a pixgw backup"));
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if version != BACKUP_FORMAT_VERSION {
            return Err(invalid(format!(
                "format version {version}; this release reads {BACKUP_FORMAT_VERSION}"
            )));
        }
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&head[12..20]);
        let snapshot_seq = u64::from_le_bytes(seq);
        let mut hash = Sha256::new();
        hash.update(head);
        Ok(BackupReader {
            input,
            hash,
            snapshot_seq,
            last_seq: snapshot_seq,
            pairs: 0,
            records: 0,
            ended: false,
        })
    }

    pub fn snapshot_seq(&self) -> u64 {
        self.snapshot_seq
    }

    /// The next item; an error for anything that is not a whole, undamaged backup.
    pub fn next_item(&mut self) -> Result<Item, BackupError> {
        if self.ended {
            return Err(invalid("read past its end"));
        }
        let mut head = [0u8; 5];
        read_exact_or(&mut self.input, &mut head, "a frame")?;
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > BACKUP_FRAME_BYTES_MAX {
            return Err(invalid(format!("a frame of {len} bytes")));
        }
        let mut body = vec![0u8; len];
        read_exact_or(&mut self.input, &mut body, "a frame")?;
        self.hash.update(head);
        self.hash.update(&body);
        match head[0] {
            TAG_PAIR => {
                let klen = body
                    .get(..4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                    .filter(|k| 4 + k <= body.len())
                    .ok_or_else(|| invalid("a key longer than its frame"))?;
                let value = body.split_off(4 + klen);
                let key = body[4..].to_vec();
                self.pairs += 1;
                Ok(Item::Pair(key, value))
            }
            TAG_RECORD => {
                if body.len() < 8 {
                    return Err(invalid("a record frame without its sequence number"));
                }
                let payload = body.split_off(8);
                let mut s = [0u8; 8];
                s.copy_from_slice(&body);
                let seq = u64::from_le_bytes(s);
                if seq != self.last_seq + 1 {
                    return Err(invalid(format!("record {seq} follows record {}", self.last_seq)));
                }
                self.last_seq = seq;
                self.records += 1;
                Ok(Item::Record(seq, payload))
            }
            TAG_END => {
                let summary: Summary =
                    serde_json::from_slice(&body).map_err(|e| invalid(format!("its summary: {e}")))?;
                let mut digest = [0u8; 32];
                read_exact_or(&mut self.input, &mut digest, "its digest")?;
                let computed: [u8; 32] = std::mem::take(&mut self.hash).finalize().into();
                if digest != computed {
                    return Err(invalid("its SHA-256 does not match its content (damaged)"));
                }
                let mut extra = [0u8; 1];
                if self.input.read(&mut extra)? != 0 {
                    return Err(invalid("bytes follow its digest"));
                }
                let expected = (self.snapshot_seq, self.last_seq, self.pairs, self.records);
                if (summary.snapshot_seq, summary.through_seq, summary.pairs, summary.records) != expected {
                    return Err(invalid("its summary disagrees with its content"));
                }
                self.ended = true;
                Ok(Item::End(summary))
            }
            t => Err(invalid(format!("an unknown frame tag {t:#04x}"))),
        }
    }
}

/// Takes a backup of the running store behind `commit` into `out`, while writes go on.
/// Blocking: run it on a thread of its own. `now` names when it ends.
pub fn write_backup<W: Write>(
    commit: &GroupCommit,
    out: W,
    now: impl FnOnce() -> String,
) -> Result<(Summary, W), BackupError> {
    let journal = commit.journal().ok_or(BackupError::NotEmbedded)?;
    // A data dir of an old release may have had sled hand out ids: reserving one makes the
    // id floor a stored key, so the restored server never hands out an id again.
    commit.next_id()?;
    // Held before the snapshot's seq is read: no record after it can be deleted now.
    let hold = journal.hold();
    let base = commit.base();
    let snapshot_seq = applied_seq(&*base)?;
    let mut w = BackupWriter::new(out, snapshot_seq)?;
    copy_pairs(&*base, &mut |k, v| w.pair(k, v))?;
    // Read after the copy: every group the checkpointer wrote during it is at or below.
    let through = commit.last_seq().max(snapshot_seq);
    journal.read_records(snapshot_seq, through, &mut |seq, payload| w.record(seq, payload))?;
    drop(hold);
    Ok(w.finish(now())?)
}

/// Hands every key and value of `store` to `visit` (highest key first), stopping at the
/// first error of either.
fn copy_pairs(store: &dyn Store, visit: &mut PairVisitor<'_>) -> Result<(), BackupError> {
    let mut failed = None;
    // Every key of the layout starts with a printable prefix (keys.rs), so [0, 0xFF) is
    // all of them.
    store.scan_rev(b"", &[u8::MAX], &mut |k, v| match visit(k, v) {
        Ok(()) => true,
        Err(e) => {
            failed = Some(e);
            false
        }
    })?;
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Hands `visit` every key of a stopped server's data dir as its snapshot store keeps it
/// (pages as pages), once the journal is replayed into it, as a start would: the source of
/// `pixgw migrate`. The data dir is left a valid data dir of its own.
pub fn read_stopped_data_dir(
    dir: &Path,
    layout: Layout,
    visit: &mut PairVisitor<'_>,
) -> Result<(), BackupError> {
    if !dir.join("db").is_dir() {
        return Err(BackupError::Target(format!(
            "{} is not a pixgw data dir (it has no db/)",
            dir.display()
        )));
    }
    let sled: SharedStore = Arc::new(SledStore::open(&dir.join("db")).map_err(|e| match e {
        StoreError::Locked(d) => {
            BackupError::Target(format!("{d} is in use by a running server: stop it first"))
        }
        other => other.into(),
    })?);
    let base = PagedStore::open(Arc::clone(&sled), layout.pages)?;
    let applied = applied_seq(&base)?;
    let recovered = super::journal::Journal::open(&dir.join("journal"), applied, Default::default())?;
    replay(&base, applied, &recovered.records)?;
    drop(recovered);
    // As a backup does (see `write_backup`): the id floor becomes a stored key.
    if base.get(super::commit::KEY_ID_FLOOR)?.is_none() {
        let mut floor = Batch::default();
        floor.put(super::commit::KEY_ID_FLOOR, sled.generate_id()?.saturating_add(1).to_be_bytes().to_vec());
        base.apply(&floor)?;
        base.flush()?;
    }
    copy_pairs(&*sled, visit)
}

/// Restores the backup read from `input` into the new data dir `data_dir`, which must not
/// exist or be empty. The store is built beside it and renamed into place only once the
/// whole backup was read and checked, so a failed restore leaves no data dir behind.
/// `now` is when the restore runs: its local ids start past any the original server can have
/// handed out since the backup (`domain::ids::restored_local_id_floor`).
pub fn restore(
    input: impl Read,
    data_dir: &Path,
    layout: Layout,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Summary, BackupError> {
    ensure_empty_target(data_dir)?;
    let staging = staging_dir(data_dir)?;
    let built = build(input, &staging, layout, now);
    match built {
        Ok(summary) => {
            if data_dir.exists() {
                std::fs::remove_dir(data_dir)?;
            }
            std::fs::rename(&staging, data_dir)?;
            if let Some(parent) = data_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::File::open(parent)?.sync_all()?;
            }
            Ok(summary)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

/// Refuses a target that holds anything: a restore never mixes with another store.
pub fn ensure_empty_target(dir: &Path) -> Result<(), BackupError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(BackupError::Target(format!("{} is not empty", dir.display()))),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(BackupError::Target(format!("{}: {e}", dir.display()))),
    }
}

fn staging_dir(data_dir: &Path) -> Result<PathBuf, BackupError> {
    let name = data_dir
        .file_name()
        .ok_or_else(|| BackupError::Target(format!("{} names no directory", data_dir.display())))?;
    let staging =
        data_dir.with_file_name(format!(".{}.restoring-{}", name.to_string_lossy(), std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    std::fs::create_dir_all(&staging)?;
    Ok(staging)
}

/// Applies the backup to a new store in `dir` (its `db/`): keys in batches, then the
/// records replayed over them, `meta/applied_seq` set to the last, flushed.
fn build(
    input: impl Read,
    dir: &Path,
    layout: Layout,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Summary, BackupError> {
    let sled: SharedStore = Arc::new(SledStore::open(&dir.join("db"))?);
    let store = PagedStore::open(sled, layout.pages)?;
    let mut reader = BackupReader::new(io::BufReader::with_capacity(1 << 20, input))?;
    let mut pairs = Batch::default();
    let mut records: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut record_bytes = 0;
    let mut applied = reader.snapshot_seq();
    loop {
        match reader.next_item()? {
            Item::Pair(k, v) => {
                if !records.is_empty() {
                    return Err(invalid("a key after the journal records"));
                }
                pairs.put(k, v);
                if pairs.len_hint() >= RESTORE_PAIRS_MAX {
                    store.apply(&std::mem::take(&mut pairs))?;
                }
            }
            Item::Record(seq, payload) => {
                if !pairs.is_empty() {
                    store.apply(&std::mem::take(&mut pairs))?;
                }
                record_bytes += payload.len();
                records.push((seq, payload));
                if record_bytes >= RESTORE_RECORD_BYTES_MAX {
                    replay(&store, applied, &records)?;
                    applied = seq;
                    records.clear();
                    record_bytes = 0;
                }
            }
            Item::End(summary) => {
                if !pairs.is_empty() {
                    store.apply(&pairs)?;
                }
                replay(&store, applied, &records)?;
                // The copied keys carry the applied seq of some moment of the copy; the
                // restored store holds everything through the last record.
                let mut last = Batch::default();
                last.put(KEY_APPLIED_SEQ, summary.through_seq.to_be_bytes().to_vec());
                // The original may have gone on handing out ids after the backup: the
                // restored store starts past all of them.
                let floor = match store.get(super::commit::KEY_ID_FLOOR)? {
                    Some(v) => v.as_slice().try_into().map(u64::from_be_bytes).unwrap_or(0),
                    None => 0,
                };
                let floor = floor.max(crate::domain::ids::restored_local_id_floor(now));
                last.put(super::commit::KEY_ID_FLOOR, floor.to_be_bytes().to_vec());
                // The original may still run and read its rail's streams: the copy's rail
                // waits for an operator (docs/deploy.md "Restoring a node on the SPI rail").
                let why =
                    format!("restored on {} from a backup taken {}", now.to_rfc3339(), summary.taken_at);
                last.put(super::keys::RAIL_HELD, why.into_bytes());
                store.apply(&last)?;
                store.flush()?;
                return Ok(summary);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(snapshot: u64, pairs: &[(&str, &str)], records: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut w = BackupWriter::new(Vec::new(), snapshot).unwrap();
        for (k, v) in pairs {
            w.pair(k.as_bytes(), v.as_bytes()).unwrap();
        }
        for (s, p) in records {
            w.record(*s, p).unwrap();
        }
        w.finish("2026-11-25T12:00:00Z".into()).unwrap().1
    }

    fn read_all(bytes: &[u8]) -> Result<Vec<Item>, BackupError> {
        let mut r = BackupReader::new(bytes)?;
        let mut out = Vec::new();
        loop {
            let item = r.next_item()?;
            let end = matches!(item, Item::End(_));
            out.push(item);
            if end {
                return Ok(out);
            }
        }
    }

    fn redo(key: &str, value: Option<&str>) -> Vec<u8> {
        let mut b = Batch::default();
        match value {
            Some(v) => b.put(key, v.as_bytes().to_vec()),
            None => b.delete(key),
        }
        let mut out = Vec::new();
        b.encode(&mut out);
        out
    }

    #[test]
    fn a_stream_round_trips_and_its_summary_counts_what_it_holds() {
        let bytes = stream(7, &[("b", "2"), ("a", "")], &[(8, vec![1, 2]), (9, vec![])]);
        let items = read_all(&bytes).unwrap();
        assert_eq!(items[0], Item::Pair(b"b".to_vec(), b"2".to_vec()));
        assert_eq!(items[1], Item::Pair(b"a".to_vec(), Vec::new()));
        assert_eq!(items[2], Item::Record(8, vec![1, 2]));
        assert_eq!(items[3], Item::Record(9, vec![]));
        let Item::End(s) = &items[4] else { panic!("no end") };
        assert_eq!((s.snapshot_seq, s.through_seq, s.pairs, s.records), (7, 9, 2, 2));
    }

    #[test]
    fn every_damaged_or_cut_stream_is_refused() {
        let bytes = stream(3, &[("key", "value")], &[(4, vec![9; 10])]);
        for cut in 0..bytes.len() {
            assert!(read_all(&bytes[..cut]).is_err(), "a stream cut at {cut} was accepted");
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x01;
            assert!(read_all(&bad).is_err(), "a flipped bit at byte {at} was accepted");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(read_all(&longer).is_err(), "bytes after the digest");
    }

    #[test]
    fn records_must_follow_the_snapshot_densely() {
        let mut w = BackupWriter::new(Vec::new(), 5).unwrap();
        assert!(w.record(7, b"x").is_err(), "a writer refuses a gap");
        assert!(w.record(6, b"x").is_ok());
    }

    #[test]
    fn a_restore_replays_the_records_over_a_fuzzy_copy() {
        // The copy saw "a" already at its later value and "b" before its change: both end
        // as record 3 left them, "c" as record 2 deleted it, "d" untouched since the snapshot.
        let bytes = stream(
            1,
            &[("a", "new"), ("b", "old"), ("c", "old"), ("d", "kept")],
            &[(2, redo("c", None)), (3, redo("b", Some("new")))],
        );
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("restored");
        let layout = crate::store::Repo::layout();
        let now = chrono::Utc::now();
        let summary = restore(bytes.as_slice(), &target, layout, now).unwrap();
        assert_eq!(summary.through_seq, 3);
        let sled: SharedStore = Arc::new(SledStore::open(&target.join("db")).unwrap());
        let get = |k: &str| sled.get(k.as_bytes()).unwrap().map(|v| String::from_utf8(v).unwrap());
        assert_eq!(get("a").as_deref(), Some("new"));
        assert_eq!(get("b").as_deref(), Some("new"));
        assert_eq!(get("c"), None);
        assert_eq!(get("d").as_deref(), Some("kept"));
        assert_eq!(applied_seq(&*sled).unwrap(), 3);
        // Its ids start past any the original can have handed out since the backup.
        let floor = sled.get(crate::store::commit::KEY_ID_FLOOR).unwrap().unwrap();
        let floor = u64::from_be_bytes(floor.as_slice().try_into().unwrap());
        assert_eq!(floor, crate::domain::ids::restored_local_id_floor(now));
    }

    #[test]
    fn a_restore_refuses_a_target_with_anything_in_it_and_leaves_nothing_when_it_fails() {
        let dir = tempfile::tempdir().unwrap();
        let layout = crate::store::Repo::layout();
        let busy = dir.path().join("busy");
        std::fs::create_dir_all(&busy).unwrap();
        std::fs::write(busy.join("x"), b"").unwrap();
        let bytes = stream(0, &[("a", "1")], &[]);
        assert!(matches!(
            restore(bytes.as_slice(), &busy, layout, chrono::Utc::now()),
            Err(BackupError::Target(_))
        ));
        let target = dir.path().join("new");
        let cut = &bytes[..bytes.len() - 1];
        assert!(matches!(restore(cut, &target, layout, chrono::Utc::now()), Err(BackupError::Invalid(_))));
        assert!(!target.exists(), "a failed restore left a data dir");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "a failed restore left its staging dir"
        );
    }
}
