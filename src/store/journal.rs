//! The journal: an append-only log of preallocated segment files that carries every
//! acknowledged change until the snapshot store (sled) holds it.
//!
//! # Format (version 1; docs/storage.md has the whole story)
//! A segment is a file `{index:016}.seg` of a fixed size, zero-filled when it was made. It
//! opens with a 32-byte header (magic, format version, index, CRC32C of the header) and then
//! holds records back to back:
//! ```text
//! len: u32 LE | crc: u32 LE | seq: u64 LE | payload (len bytes)
//! ```
//! `crc` is CRC32C over `seq`, `len` and the payload, in that order; `seq` is dense (each
//! record's is one more than the one before, across segments). A header of 16 zero bytes
//! ends the records of a segment: the next record, if any, starts the next segment.
//!
//! # Why each rule
//! - Segments are zero-filled by writing and then fsynced before use, so appending never
//!   changes a file's size: `fdatasync` then has no metadata to write, and a crash leaves
//!   zeros, not garbage from an old file, after the last record.
//! - A segment is made under a temporary name and renamed, with the directory fsynced after
//!   every create, rename and delete, so a crash never leaves a half-made segment under a
//!   real name or a deleted one that comes back.
//! - One writer (the committer) appends and syncs on its own file handle: no lock is held
//!   across `fdatasync`. A background thread keeps spare segments ready, so a full disk is
//!   known before anything is written ([`JournalError::NoRoom`]).
//! - An error of a write or an fsync inside a segment is final: after a failed fsync the
//!   kernel may have dropped the dirty pages, so retrying could report success for data that
//!   is not on disk.
//!
//! # Recovery
//! Records are read in order. A record that is torn at the tail of the log (a bad length, a
//! bad CRC, a sequence gap, or a zero header followed by stray bytes), with no valid record
//! anywhere after it, is what a crash in the middle of an append leaves: it is cut off and
//! zeroed before anything is appended. A bad record followed by a valid one is damage, not a
//! crash, and [`Journal::open`] refuses with the file and offset.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// The first bytes of every segment.
const MAGIC: &[u8; 8] = b"PIXGWJNL";
/// The format this release writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of a segment's header; records start here.
pub const SEGMENT_HEADER_BYTES: u64 = 32;
/// Bytes of a record's header.
pub const RECORD_HEADER_BYTES: u64 = 16;
/// A segment's size unless configured.
pub const SEGMENT_BYTES_DEFAULT: u64 = 8 * 1024 * 1024;
/// The smallest segment accepted (a record must fit in one).
pub const SEGMENT_BYTES_MIN: u64 = 64 * 1024;
/// Spare segments kept ready ahead of the one being written.
pub const SPARE_SEGMENTS_MAX: usize = 2;
/// Writes are refused while the data dir has less free space than this many segments: the
/// headroom lets checkpoints go on (sled treats a failed write as final), and they free
/// journal segments.
pub const HEADROOM_SEGMENTS: u64 = 4;
/// How long the preallocator waits before trying again after it could not make a segment.
const PREALLOCATE_RETRY: Duration = Duration::from_millis(500);
/// Bytes written at a time when zero-filling.
const ZERO_CHUNK_BYTES: usize = 256 * 1024;
/// Zero-filling syncs after this many bytes: one large writeback would make the journal's
/// own `fdatasync`, on the same device, wait behind it (stalls of 100 ms and more measured
/// when a whole segment was synced at once).
const ZERO_SYNC_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Clone, thiserror::Error)]
pub enum JournalError {
    /// No segment is ready and none can be made (a full disk): nothing was written, and
    /// writes may go on once room returns.
    #[error("the journal has no room for its next segment: {0}")]
    NoRoom(String),
    /// A write or sync failed: final.
    #[error("journal write failed: {0}")]
    Failed(String),
    /// The journal on disk is damaged or of an unknown format: the server must not start.
    #[error("the journal is damaged: {file} at offset {offset}: {reason}")]
    Corrupt { file: String, offset: u64, reason: String },
    /// A record is larger than a segment can hold.
    #[error("a record of {0} bytes does not fit in a segment")]
    TooLarge(u64),
}

/// Faults a test can inject (the journal's own code has no other way to be made to fail).
#[derive(Debug, Default)]
pub struct Faults {
    /// The next `fdatasync` answers an error.
    pub fail_sync: AtomicBool,
    /// Making a segment answers "no space", as a full disk would.
    pub no_room: AtomicBool,
    /// While closed, `fdatasync` waits: a sync that takes as long as the test wants.
    pub sync_gate: Gate,
}

/// A gate a thread waits at while it is closed (a fault for tests; open by default).
#[derive(Debug, Default)]
pub struct Gate {
    closed: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl Gate {
    pub fn close(&self) {
        *self.closed.lock().unwrap_or_else(|p| p.into_inner()) = true;
    }

    pub fn open(&self) {
        *self.closed.lock().unwrap_or_else(|p| p.into_inner()) = false;
        self.opened.notify_all();
    }

    /// Returns once the gate is open.
    fn pass(&self) {
        let mut closed = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        while *closed {
            closed = self.opened.wait(closed).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// How the journal is set up.
#[derive(Debug, Clone)]
pub struct JournalOptions {
    pub segment_bytes: u64,
    pub faults: Arc<Faults>,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions { segment_bytes: SEGMENT_BYTES_DEFAULT, faults: Arc::new(Faults::default()) }
    }
}

/// CRC32C of a record: over its sequence number, its length and its payload.
pub fn record_crc(seq: u64, payload: &[u8]) -> u32 {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let crc = crc32c::crc32c(&seq.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &len.to_le_bytes());
    crc32c::crc32c_append(crc, payload)
}

/// A record framed for the disk.
pub fn frame(seq: u64, payload: &[u8], out: &mut Vec<u8>) -> Result<(), JournalError> {
    let len = u32::try_from(payload.len()).map_err(|_| JournalError::TooLarge(payload.len() as u64))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&record_crc(seq, payload).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// What one position of a segment holds.
#[derive(Debug, PartialEq, Eq)]
enum Slot<'a> {
    /// A valid record and the offset just past it.
    Record { seq: u64, payload: &'a [u8], next: u64 },
    /// A zero header: the segment's records end here.
    End,
    /// Not a valid record.
    Bad(&'static str),
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// Reads the record at `at` in a segment's bytes.
fn read_slot(data: &[u8], at: u64) -> Slot<'_> {
    let at = at as usize;
    let Some(header) = data.get(at..at + RECORD_HEADER_BYTES as usize) else {
        return if data[at.min(data.len())..].iter().all(|b| *b == 0) {
            Slot::End
        } else {
            Slot::Bad("torn header")
        };
    };
    if header.iter().all(|b| *b == 0) {
        return Slot::End;
    }
    let len = le_u32(&header[0..4]) as usize;
    let crc = le_u32(&header[4..8]);
    let seq = le_u64(&header[8..16]);
    let start = at + RECORD_HEADER_BYTES as usize;
    let Some(payload) = data.get(start..start + len) else {
        return Slot::Bad("length past the segment's end");
    };
    if record_crc(seq, payload) != crc {
        return Slot::Bad("checksum mismatch");
    }
    Slot::Record { seq, payload, next: (start + len) as u64 }
}

/// Where a valid record with a sequence number in `(after, before)` starts in `data[from..]`,
/// if anywhere (the test that tells damage from a torn tail). A header is checked for a
/// plausible sequence number and length before its checksum is computed, so a scan of
/// arbitrary bytes stays linear in practice.
fn valid_record_after(data: &[u8], from: u64, after: u64, before: u64) -> Option<u64> {
    let end = data.len().saturating_sub(RECORD_HEADER_BYTES as usize);
    (from as usize..=end).map(|o| o as u64).find(|&o| {
        let h = &data[o as usize..o as usize + RECORD_HEADER_BYTES as usize];
        let (len, seq) = (le_u32(&h[0..4]) as u64, le_u64(&h[8..16]));
        seq > after
            && seq < before
            && o + RECORD_HEADER_BYTES + len <= data.len() as u64
            && matches!(read_slot(data, o), Slot::Record { .. })
    })
}

fn segment_name(index: u64) -> String {
    format!("{index:016}.seg")
}

fn segment_header(index: u64) -> [u8; SEGMENT_HEADER_BYTES as usize] {
    let mut h = [0u8; SEGMENT_HEADER_BYTES as usize];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&index.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..24]);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h
}

fn check_segment_header(data: &[u8], index: u64, file: &str) -> Result<(), JournalError> {
    let corrupt = |reason: String| JournalError::Corrupt { file: file.to_owned(), offset: 0, reason };
    let h =
        data.get(..SEGMENT_HEADER_BYTES as usize).ok_or_else(|| corrupt("shorter than its header".into()))?;
    if &h[0..8] != MAGIC {
        return Err(corrupt("not a pixgw journal segment".into()));
    }
    let version = le_u32(&h[8..12]);
    if version != FORMAT_VERSION {
        return Err(corrupt(format!("format version {version}; this release reads {FORMAT_VERSION}")));
    }
    if le_u32(&h[24..28]) != crc32c::crc32c(&h[0..24]) || le_u64(&h[16..24]) != index {
        return Err(corrupt("header checksum or index mismatch".into()));
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

fn is_no_space(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge)
}

/// Makes segment `index`: a temporary file, its header, zeros to its full size, fsync,
/// rename, fsync of the directory. A failure removes the temporary file.
fn make_segment(dir: &Path, index: u64, bytes: u64, faults: &Faults) -> std::io::Result<()> {
    if faults.no_room.load(Ordering::SeqCst) {
        return Err(std::io::Error::new(ErrorKind::StorageFull, "no space left on device (injected)"));
    }
    let tmp = dir.join(format!("{}.tmp", segment_name(index)));
    let made = (|| {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(&segment_header(index))?;
        let zeros = vec![0u8; ZERO_CHUNK_BYTES];
        let mut left = bytes - SEGMENT_HEADER_BYTES;
        let mut unsynced = 0u64;
        while left > 0 {
            let n = left.min(ZERO_CHUNK_BYTES as u64) as usize;
            f.write_all(&zeros[..n])?;
            left -= n as u64;
            unsynced += n as u64;
            if unsynced >= ZERO_SYNC_BYTES {
                f.sync_data()?;
                unsynced = 0;
            }
        }
        f.sync_all()
    })();
    if let Err(e) = made {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir)?;
    fs::rename(&tmp, dir.join(segment_name(index)))?;
    sync_dir(dir)
}

/// The spare segments, shared by the writer and the preallocator thread.
#[derive(Debug, Default)]
struct Spares {
    ready: VecDeque<u64>,
    /// The index the next segment made gets.
    next_index: u64,
    /// Why writes are refused now: too little free space, or the last attempt to make a
    /// segment failed (cleared once there is room again).
    failing: Option<String>,
    /// Rounds of the preallocator so far (a writer waits for the next one when it needs a
    /// segment).
    attempts: u64,
    /// A writer needs a segment now: try again without waiting for the retry delay.
    wanted: bool,
    stop: bool,
}

/// Segments before the current one that recovery may still need, with the last sequence
/// number each holds.
#[derive(Debug, Default)]
struct Closed {
    segments: VecDeque<(u64, u64)>,
    /// Readers that need every segment kept (a backup copying records): while any is
    /// held, nothing is deleted; the first release after the last one ends deletes all
    /// that became due meanwhile.
    holds: usize,
}

/// Keeps every segment on disk while it lives (see [`JournalHandle::hold`]).
pub struct SegmentHold {
    shared: Arc<Shared>,
}

impl Drop for SegmentHold {
    fn drop(&mut self) {
        let mut closed = lock(&self.shared.closed);
        closed.holds = closed.holds.saturating_sub(1);
    }
}

struct Shared {
    dir: PathBuf,
    segment_bytes: u64,
    faults: Arc<Faults>,
    spares: Mutex<Spares>,
    /// Signalled when a spare is taken (the preallocator makes another) or made.
    spares_changed: Condvar,
    closed: Mutex<Closed>,
    /// Bytes of records appended since the journal was opened (for metrics and checkpoints).
    appended: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The segment being written.
struct Current {
    index: u64,
    file: File,
    offset: u64,
    /// The last sequence number written in it (0: none).
    last_seq: u64,
}

/// The journal's writer. Only the committer thread appends; [`JournalHandle`] lets the
/// checkpointer release segments and the health check ask whether there is room.
pub struct Journal {
    shared: Arc<Shared>,
    current: Option<Current>,
    next_seq: u64,
    buf: Vec<u8>,
    /// Set by a failed write or sync: nothing more is appended.
    failed: Option<String>,
    preallocator: Option<std::thread::JoinHandle<()>>,
}

/// What [`Journal::open`] found: the records to replay, in order.
pub struct Recovered {
    pub journal: Journal,
    /// `(seq, payload)` of every valid record above `applied_seq`.
    pub records: Vec<(u64, Vec<u8>)>,
    /// Bytes cut off a torn tail (0 when the log ended cleanly).
    pub cut_bytes: u64,
}

/// The parts of the journal other threads use.
#[derive(Clone)]
pub struct JournalHandle {
    shared: Arc<Shared>,
}

impl JournalHandle {
    /// Deletes every closed segment whose records are all at or below `seq` (the snapshot
    /// store holds them now), fsyncing the directory after.
    pub fn release_through(&self, seq: u64) -> std::io::Result<usize> {
        let doomed: Vec<u64> = {
            let mut closed = lock(&self.shared.closed);
            let mut out = Vec::new();
            if closed.holds > 0 {
                return Ok(0);
            }
            while closed.segments.front().is_some_and(|(_, last)| *last <= seq) {
                if let Some((index, _)) = closed.segments.pop_front() {
                    out.push(index);
                }
            }
            out
        };
        for index in &doomed {
            fs::remove_file(self.shared.dir.join(segment_name(*index)))?;
        }
        if !doomed.is_empty() {
            sync_dir(&self.shared.dir)?;
            // Room came back: the preallocator may succeed now.
            self.shared.spares_changed.notify_all();
        }
        Ok(doomed.len())
    }

    /// Keeps every segment on disk until the hold is dropped, so that records the snapshot
    /// store already holds can still be read (an online backup reads them after copying a
    /// snapshot that moved while it was copied).
    pub fn hold(&self) -> SegmentHold {
        lock(&self.shared.closed).holds += 1;
        SegmentHold { shared: Arc::clone(&self.shared) }
    }

    /// Hands `visit` every record with `after < seq <= through`, in order, reading the
    /// segment files beside the writer. Every record up to `through` must be durable and
    /// still on disk (under a [`JournalHandle::hold`] taken before `after` was known);
    /// anything else is an error, never a silent gap.
    pub fn read_records(
        &self,
        after: u64,
        through: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> std::io::Result<()>,
    ) -> Result<(), JournalError> {
        if through <= after {
            return Ok(());
        }
        let dir = &self.shared.dir;
        let io = |e: std::io::Error| JournalError::Failed(format!("{}: {e}", dir.display()));
        let mut indexes = Vec::new();
        for entry in fs::read_dir(dir).map_err(io)? {
            let name = entry.map_err(io)?.file_name().to_string_lossy().into_owned();
            if let Some(index) = name.strip_suffix(".seg").and_then(|n| n.parse::<u64>().ok()) {
                indexes.push(index);
            }
        }
        indexes.sort_unstable();
        let mut expected = after + 1;
        for index in indexes {
            let name = segment_name(index);
            let mut data = Vec::new();
            File::open(dir.join(&name)).and_then(|mut f| f.read_to_end(&mut data)).map_err(io)?;
            check_segment_header(&data, index, &name)?;
            let mut at = SEGMENT_HEADER_BYTES;
            while let Slot::Record { seq, payload, next } = read_slot(&data, at) {
                if seq > expected {
                    return Err(JournalError::Corrupt {
                        file: name,
                        offset: at,
                        reason: format!("record {expected} is not on disk (the next is {seq})"),
                    });
                }
                if seq == expected {
                    visit(seq, payload).map_err(io)?;
                    if seq == through {
                        return Ok(());
                    }
                    expected += 1;
                }
                at = next;
            }
        }
        Err(JournalError::Failed(format!(
            "records {expected} to {through} are not in the journal at {}",
            dir.display()
        )))
    }

    /// Why new writes are refused now (too little room), if they are.
    pub fn no_room(&self) -> Option<String> {
        lock(&self.shared.spares).failing.clone()
    }

    /// Asks the preallocator to look at the free space (and make a segment if one is
    /// missing) now rather than at its next round, and waits for it; answers whether writes
    /// are taken after it.
    pub fn try_make_room(&self) -> bool {
        let mut spares = lock(&self.shared.spares);
        let seen = spares.attempts;
        spares.wanted = true;
        self.shared.spares_changed.notify_all();
        while spares.attempts == seen && !spares.stop {
            spares = self.shared.spares_changed.wait(spares).unwrap_or_else(|p| p.into_inner());
        }
        spares.failing.is_none()
    }

    /// Bytes of the segments on disk (current, closed and spare).
    pub fn disk_bytes(&self) -> u64 {
        let closed = lock(&self.shared.closed).segments.len() as u64;
        let spare = lock(&self.shared.spares).ready.len() as u64;
        (closed + spare + 1) * self.shared.segment_bytes
    }

    /// Bytes of records appended since start.
    pub fn appended_bytes(&self) -> u64 {
        self.shared.appended.load(Ordering::Relaxed)
    }

    pub fn faults(&self) -> &Arc<Faults> {
        &self.shared.faults
    }
}

impl Journal {
    /// Opens the journal in `dir` (creating it), validates it, cuts a torn tail, and answers
    /// the records after `applied_seq` for the caller to replay. Refuses damage.
    pub fn open(dir: &Path, applied_seq: u64, options: JournalOptions) -> Result<Recovered, JournalError> {
        if options.segment_bytes < SEGMENT_BYTES_MIN {
            return Err(JournalError::Failed(format!(
                "segments must hold at least {SEGMENT_BYTES_MIN} bytes"
            )));
        }
        let io = |e: std::io::Error| JournalError::Failed(format!("{}: {e}", dir.display()));
        fs::create_dir_all(dir).map_err(io)?;
        let mut indexes = Vec::new();
        let mut removed_tmp = false;
        for entry in fs::read_dir(dir).map_err(io)? {
            let name = entry.map_err(io)?.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tmp") {
                // A segment whose making was cut short: it never held a record.
                fs::remove_file(dir.join(&name)).map_err(io)?;
                removed_tmp = true;
            } else if let Some(index) = name.strip_suffix(".seg").and_then(|n| n.parse::<u64>().ok()) {
                indexes.push(index);
            }
        }
        if removed_tmp {
            sync_dir(dir).map_err(io)?;
        }
        indexes.sort_unstable();
        let scan = scan(dir, &indexes, applied_seq)?;
        let shared = Arc::new(Shared {
            dir: dir.to_owned(),
            segment_bytes: options.segment_bytes,
            faults: options.faults,
            spares: Mutex::new(Spares {
                next_index: indexes.last().map_or(1, |i| i + 1),
                ..Spares::default()
            }),
            spares_changed: Condvar::new(),
            closed: Mutex::new(Closed::default()),
            appended: AtomicU64::new(0),
        });
        let mut current = None;
        {
            let mut spares = lock(&shared.spares);
            let mut closed = lock(&shared.closed);
            for (i, seg) in scan.segments.iter().enumerate() {
                if i < scan.tail_segment {
                    closed.segments.push_back((seg.index, seg.last_seq));
                } else if i == scan.tail_segment {
                    let path = dir.join(segment_name(seg.index));
                    let mut file = OpenOptions::new().read(true).write(true).open(&path).map_err(io)?;
                    if seg.cut_bytes > 0 {
                        zero_range(&mut file, seg.tail, seg.tail + seg.cut_bytes).map_err(io)?;
                        file.sync_data().map_err(io)?;
                    }
                    current =
                        Some(Current { index: seg.index, file, offset: seg.tail, last_seq: seg.last_seq });
                } else {
                    spares.ready.push_back(seg.index);
                }
            }
        }
        let next_seq = scan.last_seq.max(applied_seq) + 1;
        // The spares are made before the server serves, so its first writes do not wait for
        // (or sync beside) the making of segments. A full disk is not an error here: the
        // preallocator then refuses writes until room returns.
        {
            let mut spares = lock(&shared.spares);
            while spares.ready.len() < SPARE_SEGMENTS_MAX {
                let index = spares.next_index;
                if make_next(&shared, index).is_err() {
                    break;
                }
                spares.next_index = index + 1;
                spares.ready.push_back(index);
            }
        }
        let mut journal =
            Journal { shared, current, next_seq, buf: Vec::new(), failed: None, preallocator: None };
        journal.start_preallocator().map_err(io)?;
        let cut_bytes = scan.segments.iter().map(|s| s.cut_bytes).sum();
        Ok(Recovered { journal, records: scan.records, cut_bytes })
    }

    /// A handle for other threads.
    pub fn handle(&self) -> JournalHandle {
        JournalHandle { shared: Arc::clone(&self.shared) }
    }

    /// The sequence number the next record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn start_preallocator(&mut self) -> std::io::Result<()> {
        let shared = Arc::clone(&self.shared);
        self.preallocator = Some(
            std::thread::Builder::new()
                .name("pixgw-journal-alloc".into())
                .spawn(move || preallocate(&shared))?,
        );
        Ok(())
    }

    /// Appends one record (not yet durable) and answers its sequence number. `NoRoom` leaves
    /// the journal as it was; any other error is final.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64, JournalError> {
        if let Some(why) = &self.failed {
            return Err(JournalError::Failed(why.clone()));
        }
        let seq = self.next_seq;
        self.buf.clear();
        frame(seq, payload, &mut self.buf)?;
        let size = self.buf.len() as u64;
        if size + SEGMENT_HEADER_BYTES + RECORD_HEADER_BYTES > self.shared.segment_bytes {
            return Err(JournalError::TooLarge(size));
        }
        // A record may end anywhere up to the segment's end: the bytes after it are the
        // segment's zeros, which a reader takes for the end of its records.
        let fits = self.current.as_ref().is_some_and(|c| c.offset + size <= self.shared.segment_bytes);
        if !fits {
            self.roll()?;
        }
        let Some(current) = self.current.as_mut() else {
            return Err(JournalError::Failed("no current segment".into()));
        };
        let written = current
            .file
            .seek(SeekFrom::Start(current.offset))
            .and_then(|_| current.file.write_all(&self.buf))
            .map_err(|e| format!("write to {}: {e}", segment_name(current.index)));
        if written.is_ok() {
            current.offset += size;
            current.last_seq = seq;
        }
        if let Err(why) = written {
            return Err(self.fail(why));
        }
        self.next_seq += 1;
        self.shared.appended.fetch_add(size, Ordering::Relaxed);
        Ok(seq)
    }

    /// Makes every record appended so far durable (one `fdatasync`). An error is final.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        if let Some(why) = &self.failed {
            return Err(JournalError::Failed(why.clone()));
        }
        let Some(current) = self.current.as_ref() else { return Ok(()) };
        self.shared.faults.sync_gate.pass();
        let injected = self.shared.faults.fail_sync.swap(false, Ordering::SeqCst);
        let synced = if injected {
            Err(std::io::Error::other("fdatasync failed (injected)"))
        } else {
            current.file.sync_data()
        };
        let synced = synced.map_err(|e| format!("fdatasync of {}: {e}", segment_name(current.index)));
        synced.map_err(|why| self.fail(why))
    }

    fn fail(&mut self, why: String) -> JournalError {
        self.failed = Some(why.clone());
        JournalError::Failed(why)
    }

    /// Moves to the next spare segment. The current one is synced first, so a record is
    /// never in a later segment than an unsynced one (recovery relies on it).
    fn roll(&mut self) -> Result<(), JournalError> {
        let index = {
            let mut spares = lock(&self.shared.spares);
            // At most one new attempt after the last failure: room may have come back.
            let mut retried = spares.failing.is_none();
            loop {
                if let Some(i) = spares.ready.pop_front() {
                    break i;
                }
                if let (Some(why), true) = (&spares.failing, retried) {
                    return Err(JournalError::NoRoom(why.clone()));
                }
                let seen = spares.attempts;
                spares.wanted = true;
                self.shared.spares_changed.notify_all();
                // The preallocator is making one: wait for its attempt (backpressure).
                while spares.attempts == seen && !spares.stop {
                    spares = self.shared.spares_changed.wait(spares).unwrap_or_else(|p| p.into_inner());
                }
                retried = true;
            }
        };
        self.shared.spares_changed.notify_all();
        if let Some(old) = self.current.take() {
            if let Err(e) = old.file.sync_data() {
                return Err(self.fail(format!("fdatasync of {}: {e}", segment_name(old.index))));
            }
            lock(&self.shared.closed).segments.push_back((old.index, old.last_seq));
        }
        let path = self.shared.dir.join(segment_name(index));
        match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => {
                self.current = Some(Current { index, file, offset: SEGMENT_HEADER_BYTES, last_seq: 0 });
                Ok(())
            }
            Err(e) => Err(self.fail(format!("opening {}: {e}", path.display()))),
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        lock(&self.shared.spares).stop = true;
        self.shared.spares_changed.notify_all();
        if let Some(t) = self.preallocator.take() {
            let _ = t.join();
        }
    }
}

/// Free bytes of the file system that holds `dir`, for an unprivileged user.
fn available_bytes(dir: &Path, faults: &Faults) -> std::io::Result<u64> {
    if faults.no_room.load(Ordering::SeqCst) {
        return Ok(0);
    }
    let s = rustix::fs::statvfs(dir).map_err(std::io::Error::from)?;
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}

/// Makes the next segment unless the headroom would be gone.
fn make_next(shared: &Shared, index: u64) -> std::io::Result<()> {
    let headroom = HEADROOM_SEGMENTS * shared.segment_bytes;
    let free = available_bytes(&shared.dir, &shared.faults)?;
    if free < headroom + shared.segment_bytes {
        return Err(std::io::Error::new(
            ErrorKind::StorageFull,
            format!(
                "{} MiB free, and a segment of {} MiB needs {} MiB with the {} MiB kept for checkpoints",
                free >> 20,
                shared.segment_bytes >> 20,
                (headroom + shared.segment_bytes) >> 20,
                headroom >> 20
            ),
        ));
    }
    make_segment(&shared.dir, index, shared.segment_bytes, &shared.faults)
}

/// The preallocator thread: keeps [`SPARE_SEGMENTS_MAX`] segments ready, and refuses writes
/// (sets `failing`) while the free space is under the headroom, looking again every
/// [`PREALLOCATE_RETRY`].
fn preallocate(shared: &Shared) {
    let mut spares = lock(&shared.spares);
    loop {
        if spares.stop {
            return;
        }
        if spares.ready.len() >= SPARE_SEGMENTS_MAX {
            // Enough spares: only watch the free space.
            let low = available_bytes(&shared.dir, &shared.faults)
                .map(|free| free < HEADROOM_SEGMENTS * shared.segment_bytes)
                .unwrap_or(false);
            if low && spares.failing.is_none() {
                tracing::error!(
                    "journal: the data dir is nearly full; writes are refused until room returns"
                );
                spares.failing = Some("the data dir is nearly full".into());
            } else if !low && spares.failing.take().is_some() {
                tracing::warn!("journal: there is room again; writes resume");
            }
            spares.attempts += 1;
            shared.spares_changed.notify_all();
            if !spares.wanted {
                spares = shared
                    .spares_changed
                    .wait_timeout(spares, PREALLOCATE_RETRY)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            spares.wanted = false;
            continue;
        }
        let index = spares.next_index;
        drop(spares);
        let made = make_next(shared, index);
        spares = lock(&shared.spares);
        spares.attempts += 1;
        spares.wanted = false;
        match made {
            Ok(()) => {
                spares.next_index = index + 1;
                spares.ready.push_back(index);
                if spares.failing.take().is_some() {
                    tracing::warn!("journal: a segment could be made again; writes resume");
                }
                shared.spares_changed.notify_all();
            }
            Err(e) => {
                let why = if is_no_space(&e) {
                    format!("no space left in the data dir ({e})")
                } else {
                    e.to_string()
                };
                if spares.failing.is_none() {
                    // Logged once per outage, not once per refused request.
                    tracing::error!(error = %why, "journal: cannot make a segment; writes are refused until room returns");
                }
                spares.failing = Some(why);
                shared.spares_changed.notify_all();
                if !spares.wanted && !spares.stop {
                    let (s, _) = shared
                        .spares_changed
                        .wait_timeout(spares, PREALLOCATE_RETRY)
                        .unwrap_or_else(|p| p.into_inner());
                    spares = s;
                }
            }
        }
    }
}

fn zero_range(file: &mut File, from: u64, to: u64) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(from))?;
    let zeros = vec![0u8; ZERO_CHUNK_BYTES];
    let mut left = to.saturating_sub(from);
    while left > 0 {
        let n = left.min(ZERO_CHUNK_BYTES as u64) as usize;
        file.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// One segment as recovery read it.
struct ScannedSegment {
    index: u64,
    /// Where appending resumes (past the last valid record).
    tail: u64,
    last_seq: u64,
    /// Bytes of a torn tail to zero.
    cut_bytes: u64,
}

struct Scan {
    segments: Vec<ScannedSegment>,
    /// The segment appending resumes in (the last one holding a record, or the first).
    tail_segment: usize,
    last_seq: u64,
    records: Vec<(u64, Vec<u8>)>,
}

/// Reads every segment, validates the records and finds the tail.
fn scan(dir: &Path, indexes: &[u64], applied_seq: u64) -> Result<Scan, JournalError> {
    let mut datas = Vec::with_capacity(indexes.len());
    for index in indexes {
        let name = segment_name(*index);
        let mut data = Vec::new();
        File::open(dir.join(&name))
            .and_then(|mut f| f.read_to_end(&mut data))
            .map_err(|e| JournalError::Failed(format!("reading {name}: {e}")))?;
        check_segment_header(&data, *index, &name)?;
        datas.push(data);
    }
    let mut segments: Vec<ScannedSegment> = Vec::new();
    let mut records = Vec::new();
    let mut expected: Option<u64> = None;
    let mut tail_segment = 0;
    // Where the log stopped being valid, if it did before the end: (segment, offset, why).
    let mut stop: Option<(usize, u64, &'static str)> = None;
    for (i, data) in datas.iter().enumerate() {
        let mut at = SEGMENT_HEADER_BYTES;
        let mut last_seq = 0;
        if stop.is_none() {
            loop {
                match read_slot(data, at) {
                    Slot::Record { seq, payload, next } => {
                        if expected.is_some_and(|e| e != seq) {
                            stop = Some((i, at, "sequence gap"));
                            break;
                        }
                        if expected.is_none() && seq > applied_seq + 1 {
                            return Err(JournalError::Corrupt {
                                file: segment_name(indexes[i]),
                                offset: at,
                                reason: format!(
                                    "the log starts at record {seq} but the snapshot holds only up to {applied_seq}"
                                ),
                            });
                        }
                        if seq > applied_seq {
                            records.push((seq, payload.to_vec()));
                        }
                        expected = Some(seq + 1);
                        last_seq = seq;
                        at = next;
                        tail_segment = i;
                    }
                    Slot::End => {
                        if data[at as usize..].iter().any(|b| *b != 0) {
                            stop = Some((i, at, "zero header followed by stray bytes"));
                        }
                        break;
                    }
                    Slot::Bad(why) => {
                        stop = Some((i, at, why));
                        break;
                    }
                }
            }
        }
        segments.push(ScannedSegment { index: indexes[i], tail: at, last_seq, cut_bytes: 0 });
    }
    if let Some((i, at, why)) = stop {
        let after = expected.map_or(applied_seq, |e| e.saturating_sub(1));
        // No later record can have a sequence number beyond one per header's worth of bytes.
        let total: u64 = datas.iter().map(|d| d.len() as u64).sum();
        let before = after.saturating_add(total / RECORD_HEADER_BYTES + 2);
        // Damage if any valid later record exists: in the rest of this segment, or in any
        // later one.
        let later = valid_record_after(&datas[i], at + 1, after, before).map(|o| (i, o)).or_else(|| {
            (i + 1..datas.len()).find_map(|j| {
                valid_record_after(&datas[j], SEGMENT_HEADER_BYTES, after, before).map(|o| (j, o))
            })
        });
        if let Some((j, o)) = later {
            return Err(JournalError::Corrupt {
                file: segment_name(indexes[i]),
                offset: at,
                reason: format!(
                    "{why}, yet a valid record follows in {} at offset {o}",
                    segment_name(indexes[j])
                ),
            });
        }
        // A torn tail: appending resumes at the cut in its segment.
        tail_segment = i;
        let seg = &mut segments[i];
        seg.cut_bytes = datas[i][at as usize..].iter().rposition(|b| *b != 0).map_or(0, |p| p as u64 + 1);
        seg.tail = at;
    }
    // Segments after the tail must hold nothing but zeros to be reused as spares.
    let mut kept = Vec::with_capacity(segments.len());
    for (i, seg) in segments.into_iter().enumerate() {
        if i > tail_segment && datas[i][SEGMENT_HEADER_BYTES as usize..].iter().any(|b| *b != 0) {
            return Err(JournalError::Corrupt {
                file: segment_name(seg.index),
                offset: SEGMENT_HEADER_BYTES,
                reason: "bytes after the end of the log".into(),
            });
        }
        kept.push(seg);
    }
    let last_seq = expected.map_or(0, |e| e.saturating_sub(1));
    Ok(Scan { segments: kept, tail_segment, last_seq, records })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(segment_bytes: u64) -> JournalOptions {
        JournalOptions { segment_bytes, faults: Arc::new(Faults::default()) }
    }

    fn open(dir: &Path, applied: u64) -> Result<Recovered, JournalError> {
        Journal::open(dir, applied, opts(SEGMENT_BYTES_MIN))
    }

    fn write(dir: &Path, payloads: &[Vec<u8>]) {
        let mut j = open(dir, 0).unwrap().journal;
        for p in payloads {
            j.append(p).unwrap();
            j.sync().unwrap();
        }
    }

    fn payloads(n: usize, size: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| vec![(i % 251) as u8 + 1; size]).collect()
    }

    fn segments(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "seg"))
            .collect();
        v.sort();
        v
    }

    /// The segment holding the last record and the offset where that record starts.
    fn last_record(dir: &Path) -> (PathBuf, u64, u64) {
        let mut found = None;
        for path in segments(dir) {
            let data = fs::read(&path).unwrap();
            let mut at = SEGMENT_HEADER_BYTES;
            while let Slot::Record { next, .. } = read_slot(&data, at) {
                found = Some((path.clone(), at, next));
                at = next;
            }
        }
        found.unwrap()
    }

    fn patch(path: &Path, offset: u64, bytes: &[u8]) {
        let mut f = OpenOptions::new().write(true).open(path).unwrap();
        f.seek(SeekFrom::Start(offset)).unwrap();
        f.write_all(bytes).unwrap();
    }

    #[test]
    fn a_hold_keeps_released_segments_readable_and_reads_are_exact_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = open(dir.path(), 0).unwrap().journal;
        let data = payloads(30, 10_000);
        for p in &data {
            j.append(p).unwrap();
            j.sync().unwrap();
        }
        let handle = j.handle();
        let read = |after, through| {
            let mut seen = Vec::new();
            handle
                .read_records(after, through, &mut |seq, payload| {
                    seen.push((seq, payload.to_vec()));
                    Ok(())
                })
                .map(|()| seen)
        };
        let hold = handle.hold();
        let before = segments(dir.path()).len();
        assert_eq!(handle.release_through(20).unwrap(), 0, "nothing is deleted under a hold");
        assert_eq!(segments(dir.path()).len(), before);
        let seen = read(5, 25).unwrap();
        assert_eq!(seen.iter().map(|(s, _)| *s).collect::<Vec<_>>(), (6..=25).collect::<Vec<u64>>());
        assert!(seen.iter().all(|(s, p)| *p == data[*s as usize - 1]));
        assert!(read(25, 31).is_err(), "a record never written is an error, not the end");
        assert_eq!(read(30, 30).unwrap(), Vec::new());
        drop(hold);
        assert!(handle.release_through(20).unwrap() > 0, "the first release after the hold deletes");
        assert!(read(5, 25).is_err(), "released records are missing, and said to be");
        assert_eq!(read(25, 30).unwrap().len(), 5);
    }

    #[test]
    fn a_frame_round_trips_and_any_flipped_bit_is_caught() {
        let mut out = vec![0u8; SEGMENT_HEADER_BYTES as usize];
        frame(7, b"hello", &mut out).unwrap();
        assert_eq!(
            read_slot(&out, SEGMENT_HEADER_BYTES),
            Slot::Record { seq: 7, payload: b"hello", next: out.len() as u64 }
        );
        for byte in SEGMENT_HEADER_BYTES as usize..out.len() {
            for bit in 0..8 {
                let mut bad = out.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    !matches!(
                        read_slot(&bad, SEGMENT_HEADER_BYTES),
                        Slot::Record { seq: 7, payload: b"hello", .. }
                    ),
                    "flip of byte {byte} bit {bit} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn records_come_back_in_order_across_segments_and_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let data = payloads(40, 5000); // about three segments of 64 KiB
        write(dir.path(), &data);
        let r = open(dir.path(), 0).unwrap();
        assert_eq!(r.cut_bytes, 0);
        assert_eq!(r.records.iter().map(|(s, _)| *s).collect::<Vec<_>>(), (1..=40).collect::<Vec<_>>());
        assert!(r.records.iter().map(|(_, p)| p).eq(data.iter()));
        assert!(segments(dir.path()).len() >= 4, "rolled over several segments");
        // Appending goes on after the last record.
        let mut j = r.journal;
        assert_eq!(j.append(b"more").unwrap(), 41);
        j.sync().unwrap();
        drop(j);
        let r = open(dir.path(), 40).unwrap();
        assert_eq!(r.records, vec![(41, b"more".to_vec())], "only what the snapshot lacks is replayed");
    }

    #[test]
    fn a_record_torn_at_any_offset_of_the_tail_is_cut_off_and_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &payloads(3, 300));
        let (path, start, end) = last_record(dir.path());
        let pristine = fs::read(&path).unwrap();
        for cut in start..end {
            // A crash leaves the record's first `cut - start` bytes and zeros after them.
            let mut torn = pristine.clone();
            torn[cut as usize..end as usize].fill(0);
            fs::write(&path, &torn).unwrap();
            let r = open(dir.path(), 0).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            assert_eq!(r.records.len(), 2, "cut at {cut}");
            assert_eq!(r.cut_bytes > 0, cut > start, "cut at {cut}");
            drop(r);
            // The tail was zeroed: the next append and a new recovery agree.
            let data = fs::read(&path).unwrap();
            assert!(data[start as usize..].iter().all(|b| *b == 0), "cut at {cut}: tail not zeroed");
            fs::write(&path, &pristine).unwrap();
        }
        // Only the header's first page lost: stray bytes after a zero header are a torn tail too.
        let mut torn = pristine.clone();
        torn[start as usize..start as usize + 16].fill(0);
        fs::write(&path, &torn).unwrap();
        let mut r = open(dir.path(), 0).unwrap();
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.journal.append(b"after").unwrap(), 3);
        r.journal.sync().unwrap();
        drop(r);
        assert_eq!(open(dir.path(), 0).unwrap().records.last().unwrap(), &(3, b"after".to_vec()));
    }

    #[test]
    fn a_flipped_byte_in_the_tail_record_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &payloads(3, 300));
        let (path, start, end) = last_record(dir.path());
        let mut data = fs::read(&path).unwrap();
        data[((start + end) / 2) as usize] ^= 0x40;
        fs::write(&path, &data).unwrap();
        let r = open(dir.path(), 0).unwrap();
        assert_eq!(r.records.len(), 2);
        assert!(r.cut_bytes > 0);
    }

    #[test]
    fn a_bad_record_followed_by_good_ones_refuses_to_start_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &payloads(5, 300));
        let path = segments(dir.path())[0].clone();
        // The second record (records are 316 bytes here).
        let second = SEGMENT_HEADER_BYTES + 316;
        patch(&path, second + 100, &[0xAA]);
        let err = open(dir.path(), 0).err().unwrap();
        let text = err.to_string();
        assert!(matches!(err, JournalError::Corrupt { offset, .. } if offset == second), "{text}");
        assert!(text.contains(&segment_name(1)), "{text}");
    }

    #[test]
    fn damage_in_an_earlier_segment_refuses_to_start() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &payloads(40, 5000));
        let first = segments(dir.path())[0].clone();
        patch(&first, SEGMENT_HEADER_BYTES + 5016 + 2000, &[0x55]);
        let err = open(dir.path(), 0).err().unwrap();
        assert!(matches!(&err, JournalError::Corrupt { file, .. } if file == &segment_name(1)), "{err}");
    }

    #[test]
    fn a_log_that_starts_past_the_snapshot_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), 10, opts(SEGMENT_BYTES_MIN)).unwrap().journal;
        assert_eq!(j.append(b"x").unwrap(), 11);
        j.sync().unwrap();
        drop(j);
        // The snapshot says 5: records 6 to 10 are missing.
        assert!(matches!(open(dir.path(), 5), Err(JournalError::Corrupt { .. })));
        assert_eq!(open(dir.path(), 10).unwrap().records, vec![(11, b"x".to_vec())]);
    }

    #[test]
    fn released_segments_are_deleted_and_the_log_still_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = open(dir.path(), 0).unwrap();
        for p in payloads(40, 5000) {
            r.journal.append(&p).unwrap();
            r.journal.sync().unwrap();
        }
        let before = segments(dir.path());
        let released = r.journal.handle().release_through(30).unwrap();
        assert!(released >= 1);
        // The oldest ones went (the preallocator may have made new spares meanwhile).
        assert!(before.iter().take(released).all(|p| !p.exists()));
        assert!(before.iter().skip(released).all(|p| p.exists()));
        drop(r);
        let r = open(dir.path(), 30).unwrap();
        assert_eq!(r.records.iter().map(|(s, _)| *s).collect::<Vec<_>>(), (31..=40).collect::<Vec<_>>());
    }

    #[test]
    fn without_room_for_a_segment_nothing_is_written_and_writing_resumes_with_room() {
        let dir = tempfile::tempdir().unwrap();
        let faults = Arc::new(Faults::default());
        faults.no_room.store(true, Ordering::SeqCst);
        let options = JournalOptions { segment_bytes: SEGMENT_BYTES_MIN, faults: Arc::clone(&faults) };
        let mut j = Journal::open(dir.path(), 0, options).unwrap().journal;
        assert!(matches!(j.append(b"x"), Err(JournalError::NoRoom(_))));
        assert!(j.handle().no_room().is_some());
        faults.no_room.store(false, Ordering::SeqCst);
        assert_eq!(j.append(b"x").unwrap(), 1, "the refused record took no sequence number");
        j.sync().unwrap();
        assert!(j.handle().no_room().is_none());
    }

    #[test]
    fn a_failed_fsync_is_final() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path(), 0).unwrap();
        let mut j = r.journal;
        j.append(b"a").unwrap();
        j.handle().faults().fail_sync.store(true, Ordering::SeqCst);
        assert!(matches!(j.sync(), Err(JournalError::Failed(_))));
        // Never retried: the next sync and append fail too.
        assert!(matches!(j.sync(), Err(JournalError::Failed(_))));
        assert!(matches!(j.append(b"b"), Err(JournalError::Failed(_))));
    }

    #[test]
    fn leftover_temporary_segments_are_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("0000000000000009.seg.tmp"), b"half").unwrap();
        drop(open(dir.path(), 0).unwrap());
        assert!(!dir.path().join("0000000000000009.seg.tmp").exists());
    }

    #[test]
    fn a_segment_of_another_format_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &payloads(1, 10));
        patch(&segments(dir.path())[0], 8, &2u32.to_le_bytes());
        let err = open(dir.path(), 0).err().unwrap();
        assert!(err.to_string().contains("format version 2"), "{err}");
    }
}
