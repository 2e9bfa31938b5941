//! Pages: many adjacent keys in one value of the store underneath.
//!
//! sled spends about 15 µs on every key it writes, whatever the value's size, and about as
//! much on a 20 KB value as on an 8-byte one (docs/benchmarks.md). The records a payment
//! leaves (a transaction by local id, its entry in the account's list, a delivery log) are
//! written in key order, so [`PagedStore`] keeps the keys of each [`Paging`] in pages: the
//! first `page_len` bytes of a key name its page, the rest its slot in it, and a page is one
//! value under `pg/` + that name. Everything above sees the same keys and values as before:
//! get, the two scans and atomic batches behave exactly as on a store without pages. A batch
//! that writes many keys of one page writes that page once.
//!
//! A page is named by its key's first `page_len` bytes, and, for a [`Paging`] with `halves`,
//! by one more byte that says which half of the next digit (0 to 4 or 5 to 9) its keys have:
//! page names sort as the keys they hold. The size of a page matters beyond the key count:
//! sled writes a tree node of up to 17 values whole every tenth change to it, and a node
//! larger than a quarter of its 512 KiB segment goes to a file of its own (a "blob"), which
//! ext4 creates and later deletes, ever more slowly as a busy data dir ages
//! (docs/benchmarks.md). So no page is meant to pass about 7 KiB at the rates one node
//! reaches, and the shapes in `keys.rs` are chosen for that.
//!
//! The shape of the pages (each paging's `page_len` and `halves`) is recorded in the store
//! underneath ([`SHAPE_KEY`]); when a release changes it, opening the store moves every page
//! of the old shape into pages of the new one, a chunk per atomic batch (a crash half-way
//! leaves each key in one page or the other, and the next open goes on), before anything
//! reads it. A new shape must change the length of a page's name, since that length is how a
//! page of the old shape is told from one of the new.
//!
//! Invariants: every key under a paged prefix is longer than its `page_len`, and than
//! `page_len + 1` with `halves` (the key layout gives them fixed widths); no other key starts
//! with `pg/`; a page holds its slots in order, and an empty page is deleted.
//!
//! Page format (version 1): [`codec::FORMAT_BINARY_V1`], the number of slots `n` (u32 LE),
//! `n` end offsets (u32 LE, where each entry ends in the body), then the body: each slot's
//! length and bytes and its value's length and bytes (varint lengths), in slot order. The
//! offsets let a read find one slot by binary search.

use std::collections::BTreeMap;

use super::codec::FORMAT_BINARY_V1;
use super::{prefix_end, Batch, Op, Pairs, SharedStore, Store, StoreError, Write};

/// Where pages are kept in the store underneath.
pub const PAGE_PREFIX: &[u8] = b"pg/";
/// Where the pages' shape is recorded: under `pg/` (so no scan above sees it), outside every
/// paging's prefix.
pub const SHAPE_KEY: &[u8] = b"pg/~shape";
/// Keys moved at a time when a data dir without pages, or with pages of another shape, is
/// opened.
const MIGRATE_KEYS_MAX: usize = 10_000;
/// Bytes of old pages read at a time when pages of another shape are moved.
const MIGRATE_BYTES_MAX: usize = 32 << 20;

/// Keys under `prefix` live in pages named by their first `page_len` bytes and, with
/// `halves`, the half of the digit that follows (`0` for 0 to 4, `5` for 5 to 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    pub prefix: &'static [u8],
    pub page_len: usize,
    pub halves: bool,
}

impl Paging {
    /// How long a page's name is (after `pg/`).
    fn name_len(&self) -> usize {
        self.page_len + usize::from(self.halves)
    }

    /// The store key of the page that holds `key`, or of the lowest page at or above `key`
    /// when `key` is a bound shorter than a page's name (see `visit_paged_rev`).
    fn clip(&self, key: &[u8]) -> Vec<u8> {
        let mut name = [PAGE_PREFIX, &key[..key.len().min(self.page_len)]].concat();
        if self.halves && key.len() > self.page_len {
            name.push(if key[self.page_len] < b'5' { b'0' } else { b'5' });
        }
        name
    }

    /// How the shape record writes this paging: `prefix:page_len`, and `h` with halves.
    fn describe(&self) -> String {
        let halves = if self.halves { "h" } else { "" };
        format!("{}:{}{halves}", String::from_utf8_lossy(self.prefix), self.page_len)
    }
}

/// The shape record of `pagings`.
fn describe_shape(pagings: &[Paging]) -> Vec<u8> {
    pagings.iter().map(Paging::describe).collect::<Vec<_>>().join(",").into_bytes()
}

/// The `page_len` and `halves` a shape record gives each prefix. A record this release
/// cannot read is refused, never guessed at.
fn read_shape(bytes: &[u8]) -> Result<Vec<(Vec<u8>, usize, bool)>, StoreError> {
    let bad =
        || engine(format!("the page shape record {:?} is not readable", String::from_utf8_lossy(bytes)));
    let text = std::str::from_utf8(bytes).map_err(|_| bad())?;
    text.split(',')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (prefix, len) = part.rsplit_once(':').ok_or_else(bad)?;
            let (len, halves) = match len.strip_suffix('h') {
                Some(l) => (l, true),
                None => (len, false),
            };
            Ok((prefix.as_bytes().to_vec(), len.parse().map_err(|_| bad())?, halves))
        })
        .collect()
}

pub struct PagedStore {
    inner: SharedStore,
    pagings: &'static [Paging],
}

fn engine(why: impl std::fmt::Display) -> StoreError {
    StoreError::Engine(format!("page: {why}"))
}

// ---- the page format -----------------------------------------------------------------------

type Page = BTreeMap<Vec<u8>, Vec<u8>>;

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn encode_page(page: &Page) -> Vec<u8> {
    let mut body = Vec::with_capacity(page.iter().map(|(k, v)| k.len() + v.len() + 4).sum());
    let mut ends = Vec::with_capacity(page.len());
    for (slot, value) in page {
        put_varint(&mut body, slot.len());
        body.extend_from_slice(slot);
        put_varint(&mut body, value.len());
        body.extend_from_slice(value);
        ends.push(body.len() as u32);
    }
    let mut out = Vec::with_capacity(5 + 4 * ends.len() + body.len());
    out.push(FORMAT_BINARY_V1);
    out.extend_from_slice(&(ends.len() as u32).to_le_bytes());
    for end in ends {
        out.extend_from_slice(&end.to_le_bytes());
    }
    out.extend_from_slice(&body);
    out
}

/// A page's parts: its end offsets and its body, checked to agree.
fn page_parts(bytes: &[u8]) -> Result<(&[u8], &[u8]), StoreError> {
    let rest = match bytes.split_first() {
        Some((&FORMAT_BINARY_V1, rest)) => rest,
        Some((other, _)) => return Err(engine(format!("unknown format {other:#04x}"))),
        None => return Err(engine("empty")),
    };
    let (n, rest) = rest.split_at_checked(4).ok_or_else(|| engine("truncated"))?;
    let n = u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as usize;
    let (ends, body) =
        n.checked_mul(4).and_then(|len| rest.split_at_checked(len)).ok_or_else(|| engine("truncated"))?;
    let mut last = 0;
    for i in 0..n {
        let end = end_at(ends, i);
        if end < last {
            return Err(engine("offsets out of order"));
        }
        last = end;
    }
    if last != body.len() {
        return Err(engine("offsets disagree with the body"));
    }
    Ok((ends, body))
}

fn end_at(ends: &[u8], i: usize) -> usize {
    let e = &ends[4 * i..4 * i + 4];
    u32::from_le_bytes([e[0], e[1], e[2], e[3]]) as usize
}

/// Entry `i` of a page's body: its slot and value.
fn entry<'a>(ends: &[u8], body: &'a [u8], i: usize) -> Result<(&'a [u8], &'a [u8]), StoreError> {
    let start = if i == 0 { 0 } else { end_at(ends, i - 1) };
    let mut b = body.get(start..end_at(ends, i)).ok_or_else(|| engine("bad offsets"))?;
    let n = varint(&mut b)?;
    let slot = take(&mut b, n)?;
    let n = varint(&mut b)?;
    let value = take(&mut b, n)?;
    if !b.is_empty() {
        return Err(engine("bad entry"));
    }
    Ok((slot, value))
}

/// The value of `slot` in a page, found by binary search.
fn page_get(bytes: &[u8], slot: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
    let (ends, body) = page_parts(bytes)?;
    let (mut lo, mut hi) = (0, ends.len() / 4);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let (s, v) = entry(ends, body, mid)?;
        match s.cmp(slot) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Ok(Some(v.to_vec())),
        }
    }
    Ok(None)
}

fn varint(b: &mut &[u8]) -> Result<usize, StoreError> {
    let mut v = 0usize;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first().ok_or_else(|| engine("truncated"))?;
        *b = rest;
        v |= usize::from(byte & 0x7F) << shift;
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err(engine("bad length"))
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], StoreError> {
    if b.len() < n {
        return Err(engine("truncated"));
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

/// Reads a page's slots in order, handing each to `visit` until it answers false.
fn read_page<'a>(
    bytes: &'a [u8],
    mut visit: impl FnMut(&'a [u8], &'a [u8]) -> bool,
) -> Result<(), StoreError> {
    let (ends, body) = page_parts(bytes)?;
    for i in 0..ends.len() / 4 {
        let (slot, value) = entry(ends, body, i)?;
        if !visit(slot, value) {
            break;
        }
    }
    Ok(())
}

fn decode_page(bytes: &[u8]) -> Result<Page, StoreError> {
    let mut page = Page::new();
    read_page(bytes, |s, v| {
        page.insert(s.to_vec(), v.to_vec());
        true
    })?;
    Ok(page)
}

// ---- the store -----------------------------------------------------------------------------

/// A stretch of the key space a scan goes through in one way.
enum Span<'a> {
    Plain(Vec<u8>, Vec<u8>),
    Paged(&'a Paging, Vec<u8>, Vec<u8>),
}

impl PagedStore {
    /// Pages over `inner`. Keys of `pagings` that `inner` holds one by one (a data dir of a
    /// release before pages) are moved into pages first, a chunk per atomic batch, and the
    /// result flushed: a crash half-way leaves each key in one place or the other, and the
    /// next open goes on.
    pub fn open(inner: SharedStore, pagings: &'static [Paging]) -> Result<PagedStore, StoreError> {
        let paged = PagedStore { inner, pagings };
        let mut moved = 0;
        for p in pagings {
            let end = prefix_end(p.prefix).unwrap_or_else(|| vec![u8::MAX]);
            loop {
                let mut chunk: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                paged.inner.scan_rev(p.prefix, &end, &mut |k, v| {
                    chunk.push((k.to_vec(), v.to_vec()));
                    chunk.len() < MIGRATE_KEYS_MAX
                })?;
                if chunk.is_empty() {
                    break;
                }
                moved += chunk.len();
                let mut logical = Batch::default();
                let mut removed = Batch::default();
                for (k, v) in chunk {
                    removed.delete(k.clone());
                    logical.put(k, v);
                }
                let mut b = paged.physical(&logical)?;
                b.extend(removed);
                paged.inner.apply(&b)?;
            }
        }
        let reshaped = paged.reshape()?;
        if moved > 0 || reshaped > 0 {
            paged.inner.flush()?;
            tracing::info!(keys = moved, reshaped, "moved records into pages");
        }
        Ok(paged)
    }

    /// Moves the keys of every page of another shape than this release's into pages of this
    /// shape, and records the shape. Answers how many keys it moved. A store without a shape
    /// record has pages of the first shape only (named by a whole prefix of the key, no halves).
    fn reshape(&self) -> Result<usize, StoreError> {
        let wanted = describe_shape(self.pagings);
        let stored = self.inner.get(SHAPE_KEY)?;
        if stored.as_deref() == Some(wanted.as_slice()) {
            return Ok(0);
        }
        let old = match &stored {
            Some(bytes) => read_shape(bytes)?,
            None => Vec::new(),
        };
        let mut moved = 0;
        for p in self.pagings {
            // The old shape of this prefix: its page_len and halves (none recorded: a page's
            // whole name is its keys' prefix).
            let was =
                old.iter().find(|(prefix, _, _)| prefix == p.prefix).map(|(_, len, halves)| (*len, *halves));
            if was == Some((p.page_len, p.halves)) {
                continue;
            }
            if was.is_some_and(|(len, halves)| len + usize::from(halves) == p.name_len()) {
                return Err(engine(format!(
                    "the pages of {} change shape without changing their name's length",
                    String::from_utf8_lossy(p.prefix)
                )));
            }
            moved += self.reshape_paging(p, was.map(|(len, _)| len))?;
        }
        let mut mark = Batch::default();
        mark.put(SHAPE_KEY, wanted);
        self.inner.apply(&mark)?;
        Ok(moved)
    }

    /// Moves the keys of `p`'s pages whose name is not of this shape's length, highest page
    /// first, a chunk per atomic batch. `old_len` is how much of an old page's name its keys
    /// start with (`None`: all of it).
    fn reshape_paging(&self, p: &Paging, old_len: Option<usize>) -> Result<usize, StoreError> {
        let lo = [PAGE_PREFIX, p.prefix].concat();
        let mut hi = prefix_end(&lo).unwrap_or_else(|| vec![u8::MAX]);
        let mut moved = 0;
        loop {
            // Pages of the new shape made from an old page sort above it (or are skipped by
            // their length), so each pass starts below the lowest old page of the last.
            let mut chunk: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let (mut keys, mut bytes) = (0, 0);
            self.inner.scan_rev(&lo, &hi, &mut |name, page| {
                if name.len() - PAGE_PREFIX.len() != p.name_len() {
                    keys += page_parts(page).map_or(0, |(ends, _)| ends.len() / 4);
                    bytes += page.len();
                    chunk.push((name.to_vec(), page.to_vec()));
                }
                keys < MIGRATE_KEYS_MAX && bytes < MIGRATE_BYTES_MAX
            })?;
            let Some((lowest, _)) = chunk.last() else { break };
            hi = lowest.clone();
            let mut logical = Batch::default();
            let mut removed = Batch::default();
            for (name, page) in chunk {
                let keep = old_len.unwrap_or(name.len() - PAGE_PREFIX.len()) + PAGE_PREFIX.len();
                let start = name
                    .get(PAGE_PREFIX.len()..keep)
                    .ok_or_else(|| engine("an old page's name is too short"))?;
                for (slot, value) in decode_page(&page)? {
                    moved += 1;
                    logical.put([start, &slot].concat(), value);
                }
                removed.delete(name);
            }
            let mut b = self.physical(&logical)?;
            b.extend(removed);
            self.inner.apply(&b)?;
        }
        Ok(moved)
    }

    fn paging(&self, key: &[u8]) -> Option<&Paging> {
        self.pagings.iter().find(|p| key.starts_with(p.prefix))
    }

    fn page_key(p: &Paging, key: &[u8]) -> Result<Vec<u8>, StoreError> {
        if key.len() <= p.page_len {
            return Err(engine(format!("key {} is too short for its page", String::from_utf8_lossy(key))));
        }
        Ok(p.clip(key))
    }

    /// The writes to the store underneath that carry out `batch`: each touched page read,
    /// changed and written once; other keys as they are.
    fn physical(&self, batch: &Batch) -> Result<Batch, StoreError> {
        let mut out = Batch::default();
        let mut pages: BTreeMap<Vec<u8>, (usize, Vec<&Op>)> = BTreeMap::new();
        for op in batch.ops() {
            match self.paging(op.key()) {
                None => match op {
                    Op::Put(k, v) | Op::Insert(k, v) => out.put(k.clone(), v.clone()),
                    Op::Delete(k) => out.delete(k.clone()),
                },
                Some(p) => {
                    pages.entry(Self::page_key(p, op.key())?).or_insert((p.page_len, Vec::new())).1.push(op)
                }
            }
        }
        for (page_key, (page_len, ops)) in pages {
            let mut page = match self.inner.get(&page_key)? {
                Some(bytes) => decode_page(&bytes)?,
                None => Page::new(),
            };
            for op in ops {
                let slot = op.key()[page_len..].to_vec();
                match op.value() {
                    Some(v) => page.insert(slot, v.to_vec()),
                    None => page.remove(&slot),
                };
            }
            if page.is_empty() {
                out.delete(page_key);
            } else {
                out.put(page_key, encode_page(&page));
            }
        }
        Ok(out)
    }

    /// Reads page `name`, applies `slots` (keys of that page and their new values) and adds
    /// its new value (or its removal) to `part`.
    fn write_page(
        &self,
        part: &mut Batch,
        name: Vec<u8>,
        page_len: usize,
        slots: &[Write<'_>],
    ) -> Result<(), StoreError> {
        let mut page = match self.inner.get(&name)? {
            Some(bytes) => decode_page(&bytes)?,
            None => Page::new(),
        };
        for (key, value) in slots {
            let slot = key[page_len..].to_vec();
            match value {
                Some(v) => page.insert(slot, v.to_vec()),
                None => page.remove(&slot),
            };
        }
        if page.is_empty() {
            part.delete(name);
        } else {
            part.put(name, encode_page(&page));
        }
        Ok(())
    }

    /// The stretches of `[from, to)` in key order: those under a paged prefix, those of
    /// plain keys, and none of the pages' own keys.
    fn spans(&self, from: &[u8], to: &[u8]) -> Vec<Span<'_>> {
        let mut fences: Vec<(Vec<u8>, Vec<u8>, Option<&Paging>)> = self
            .pagings
            .iter()
            .map(|p| (p.prefix.to_vec(), prefix_end(p.prefix).unwrap_or_else(|| vec![u8::MAX]), Some(p)))
            .collect();
        fences.push((PAGE_PREFIX.to_vec(), prefix_end(PAGE_PREFIX).unwrap_or_default(), None));
        fences.sort_by(|a, b| a.0.cmp(&b.0));
        let mut spans = Vec::new();
        let mut at = from.to_vec();
        for (lo, hi, paging) in fences {
            if at.as_slice() >= to {
                break;
            }
            if hi.as_slice() <= at.as_slice() {
                continue;
            }
            if lo.as_slice() > at.as_slice() {
                let end = if lo.as_slice() < to { lo.clone() } else { to.to_vec() };
                spans.push(Span::Plain(at.clone(), end.clone()));
                at = end;
                if at.as_slice() >= to {
                    break;
                }
            }
            let end = if hi.as_slice() < to { hi } else { to.to_vec() };
            if let Some(p) = paging {
                spans.push(Span::Paged(p, at.clone(), end.clone()));
            }
            at = end;
        }
        if at.as_slice() < to {
            spans.push(Span::Plain(at, to.to_vec()));
        }
        spans
    }

    /// Visits the keys of `[from, to)` under paging `p`, highest first, while `visit`
    /// answers true; answers whether the caller should go on.
    fn visit_paged_rev(
        &self,
        p: &Paging,
        from: &[u8],
        to: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool, StoreError> {
        // Pages whose keys can fall in the range: from the page of `from` to the page of the
        // last key below `to`.
        let lo = p.clip(from);
        let hi = prefix_end(&p.clip(to)).unwrap_or_else(|| vec![u8::MAX]);
        let mut go_on = true;
        let mut failed = None;
        self.inner.scan_rev(&lo, &hi, &mut |page_key, bytes| {
            // A key is its page's name without the half, then its slot.
            let Some(name) = page_key.get(PAGE_PREFIX.len()..PAGE_PREFIX.len() + p.page_len) else {
                failed = Some(engine("a page's name is too short for its prefix"));
                return false;
            };
            let (ends, body) = match page_parts(bytes) {
                Ok(parts) => parts,
                Err(e) => {
                    failed = Some(e);
                    return false;
                }
            };
            let mut key = Vec::with_capacity(p.page_len + 32);
            for i in (0..ends.len() / 4).rev() {
                let (slot, value) = match entry(ends, body, i) {
                    Ok(e) => e,
                    Err(e) => {
                        failed = Some(e);
                        return false;
                    }
                };
                key.clear();
                key.extend_from_slice(name);
                key.extend_from_slice(slot);
                if key.as_slice() >= to || key.as_slice() < from {
                    continue;
                }
                if !visit(&key, value) {
                    go_on = false;
                    return false;
                }
            }
            true
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(go_on),
        }
    }
}

impl Store for PagedStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(p) = self.paging(key) else { return self.inner.get(key) };
        let Some(bytes) = self.inner.get(&Self::page_key(p, key)?)? else { return Ok(None) };
        page_get(&bytes, &key[p.page_len..])
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Pairs, StoreError> {
        let to = prefix_end(prefix).unwrap_or_else(|| vec![u8::MAX; prefix.len() + 1]);
        let mut out = Vec::new();
        self.scan_rev(prefix, &to, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        out.reverse();
        Ok(out)
    }

    fn scan_rev(
        &self,
        from: &[u8],
        to: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        for span in self.spans(from, to).into_iter().rev() {
            let go_on = match span {
                Span::Paged(p, lo, hi) => self.visit_paged_rev(p, &lo, &hi, visit)?,
                Span::Plain(lo, hi) => {
                    let mut go_on = true;
                    self.inner.scan_rev(&lo, &hi, &mut |k, v| {
                        go_on = visit(k, v);
                        go_on
                    })?;
                    go_on
                }
            };
            if !go_on {
                break;
            }
        }
        Ok(())
    }

    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        self.inner.apply(&self.physical(batch)?)
    }

    /// The writes come in key order, so a page's keys come together: each page is read,
    /// changed and written once, and only the part being built is held.
    fn apply_writes<'a>(
        &self,
        writes: &mut dyn Iterator<Item = Write<'a>>,
        part_ops: usize,
    ) -> Result<(), StoreError> {
        let mut part = Batch::default();
        // The page being gathered: its name, where its slots start, and its slots' writes.
        let mut page: Option<(Vec<u8>, usize, Vec<Write<'a>>)> = None;
        let mut last: Option<&[u8]> = None;
        for (key, value) in writes {
            if last.is_some_and(|l| l >= key) {
                return Err(engine("writes out of key order"));
            }
            last = Some(key);
            let here = match self.paging(key) {
                Some(p) => Some((Self::page_key(p, key)?, p.page_len)),
                None => None,
            };
            if page.as_ref().is_some_and(|(name, _, _)| here.as_ref().is_none_or(|(h, _)| h != name)) {
                if let Some((name, len, slots)) = page.take() {
                    self.write_page(&mut part, name, len, &slots)?;
                }
            }
            match here {
                Some((name, len)) => page.get_or_insert_with(|| (name, len, Vec::new())).2.push((key, value)),
                None => match value {
                    Some(v) => part.put(key, v),
                    None => part.delete(key),
                },
            }
            if part.len_hint() >= part_ops {
                self.inner.apply_loose(&std::mem::take(&mut part))?;
            }
        }
        if let Some((name, len, slots)) = page.take() {
            self.write_page(&mut part, name, len, &slots)?;
        }
        if !part.is_empty() {
            self.inner.apply_loose(&part)?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush()
    }

    fn generate_id(&self) -> Result<u64, StoreError> {
        self.inner.generate_id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use std::sync::Arc;

    static PAGINGS: &[Paging] = &[
        Paging { prefix: b"tx/", page_len: 4, halves: false },
        Paging { prefix: b"tl/", page_len: 6, halves: false },
    ];

    /// The same prefixes, `tx/` pages split in halves: `tx/0` + `0` holds `tx/000` to `tx/049`.
    static HALVED: &[Paging] = &[
        Paging { prefix: b"tx/", page_len: 4, halves: true },
        Paging { prefix: b"tl/", page_len: 6, halves: false },
    ];

    fn paged() -> (Arc<MemoryStore>, PagedStore) {
        paged_as(PAGINGS)
    }

    fn paged_as(pagings: &'static [Paging]) -> (Arc<MemoryStore>, PagedStore) {
        let inner = Arc::new(MemoryStore::new());
        let store = PagedStore::open(inner.clone(), pagings).unwrap();
        (inner, store)
    }

    /// The names of the pages `inner` holds, without `pg/`.
    fn page_names(inner: &MemoryStore) -> Vec<String> {
        inner
            .scan_prefix(PAGE_PREFIX)
            .unwrap()
            .into_iter()
            .filter(|(k, _)| k.as_slice() != SHAPE_KEY)
            .map(|(k, _)| String::from_utf8_lossy(&k[PAGE_PREFIX.len()..]).into_owned())
            .collect()
    }

    fn text(pairs: Pairs) -> Vec<String> {
        pairs
            .into_iter()
            .map(|(k, v)| format!("{}={}", String::from_utf8_lossy(&k), String::from_utf8_lossy(&v)))
            .collect()
    }

    #[test]
    fn many_keys_of_a_page_are_one_value_underneath_and_read_back_the_same() {
        let (inner, store) = paged();
        let mut b = Batch::default();
        for i in 0..250u32 {
            b.insert(format!("tx/{i:03}"), format!("v{i}"));
        }
        b.put("other", "o");
        store.apply(&b).unwrap();
        // tx/000..tx/099 share page "tx/0", and so on: 3 pages and one plain key.
        assert_eq!(page_names(&inner), ["tx/0", "tx/1", "tx/2"]);
        assert_eq!(inner.scan_prefix(b"").unwrap().len(), 5, "the pages, the plain key, the shape");
        assert_eq!(store.get(b"tx/042").unwrap(), Some(b"v42".to_vec()));
        assert_eq!(store.get(b"tx/250").unwrap(), None);
        assert_eq!(store.get(b"other").unwrap(), Some(b"o".to_vec()));
        assert_eq!(store.scan_prefix(b"tx/").unwrap().len(), 250);
        let mut b = Batch::default();
        for i in 100..200u32 {
            b.delete(format!("tx/{i:03}"));
        }
        store.apply(&b).unwrap();
        assert_eq!(page_names(&inner), ["tx/0", "tx/2"], "an emptied page is deleted");
        assert!(store.get(b"tx/150").unwrap().is_none());
        assert!(store.get(b"tx/042").unwrap().is_some());
        assert!(matches!(store.get(b"tx/"), Err(StoreError::Engine(_))), "a key too short for its page");
    }

    #[test]
    fn scans_agree_with_a_plain_map_across_paged_and_plain_keys() {
        use proptest::prelude::*;
        let keys = prop::sample::select(vec![
            "a", "tl/10/1", "tl/10/2", "tl/11/1", "tl/2/99", "tl/2/990", "tx/0001", "tx/0002", "tx/0101",
            "tx/0499", "tx/0500", "tx/0599", "tx/999", "tx/95", "ty", "pz", "z",
        ]);
        let op = (keys, prop::option::of(prop::sample::select(vec!["x", "y"])));
        let bounds = prop::sample::select(vec![
            "", "a", "tl/", "tl/10/", "tl/11", "tx/0", "tx/01", "tx/05", "tx/0500", "tx/06", "tx/9", "tz",
            "zz",
        ]);
        let shapes = prop::sample::select(vec![PAGINGS, HALVED]);
        proptest!(ProptestConfig::with_cases(300), |(pagings in shapes, ops in proptest::collection::vec(op, 0..30), from in bounds.clone(), to in bounds, limit in 1usize..20)| {
            let (_, store) = paged_as(pagings);
            let mut model: BTreeMap<String, String> = BTreeMap::new();
            for (k, v) in ops {
                let mut b = Batch::default();
                match v {
                    Some(v) => { b.put(k, v); model.insert(k.into(), v.into()); }
                    None => { b.delete(k); model.remove(k); }
                }
                store.apply(&b).unwrap();
            }
            for (k, v) in &model {
                prop_assert_eq!(store.get(k.as_bytes()).unwrap(), Some(v.clone().into_bytes()));
            }
            let all: Vec<String> = model.iter().map(|(k, v)| format!("{k}={v}")).collect();
            prop_assert_eq!(text(store.scan_prefix(b"").unwrap()), all.clone());
            let tl: Vec<String> = model.iter().filter(|(k, _)| k.starts_with("tl/1")).map(|(k, v)| format!("{k}={v}")).collect();
            prop_assert_eq!(text(store.scan_prefix(b"tl/1").unwrap()), tl);
            let mut rev = Vec::new();
            store.scan_rev(from.as_bytes(), to.as_bytes(), &mut |k, v| {
                rev.push(format!("{}={}", String::from_utf8_lossy(k), String::from_utf8_lossy(v)));
                rev.len() < limit
            }).unwrap();
            let want: Vec<String> = model
                .iter()
                .rev()
                .filter(|(k, _)| k.as_str() >= from && k.as_str() < to)
                .take(limit)
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            prop_assert_eq!(rev, want);
        });
    }

    #[test]
    fn writes_handed_over_in_order_reach_pages_in_parts_the_same_as_one_batch() {
        let (inner, store) = paged();
        let mut first = Batch::default();
        for i in 0..150u32 {
            first.put(format!("tx/{i:03}"), "old");
        }
        store.apply(&first).unwrap();
        let writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..300u32)
            .map(|i| (format!("tx/{i:03}").into_bytes(), (i % 3 != 0).then(|| format!("v{i}").into_bytes())))
            .chain(std::iter::once((b"z".to_vec(), Some(b"plain".to_vec()))))
            .collect();
        let mut it = writes.iter().map(|(k, v)| (k.as_slice(), v.as_deref()));
        store.apply_writes(&mut it, 7).unwrap();
        for (k, v) in &writes {
            assert_eq!(store.get(k).unwrap(), *v, "{}", String::from_utf8_lossy(k));
        }
        assert_eq!(page_names(&inner).len(), 3, "one value per page");
        let mut backwards = [(b"tx/002".as_slice(), None), (b"tx/001".as_slice(), None)].into_iter();
        assert!(store.apply_writes(&mut backwards, 7).is_err(), "out of order is refused");
    }

    #[test]
    fn keys_held_one_by_one_are_moved_into_pages_on_open() {
        let inner = Arc::new(MemoryStore::new());
        let mut b = Batch::default();
        for i in 0..120u32 {
            b.put(format!("tx/{i:03}"), format!("v{i}"));
        }
        b.put("keep", "k");
        inner.apply(&b).unwrap();
        let store = PagedStore::open(inner.clone(), PAGINGS).unwrap();
        assert!(inner.scan_prefix(b"tx/").unwrap().is_empty(), "no key left outside its page");
        assert_eq!(store.scan_prefix(b"tx/").unwrap().len(), 120);
        assert_eq!(store.get(b"tx/119").unwrap(), Some(b"v119".to_vec()));
        assert_eq!(store.get(b"keep").unwrap(), Some(b"k".to_vec()));
    }

    #[test]
    fn pages_of_another_shape_are_moved_into_this_shape_on_open() {
        let (inner, store) = paged();
        let mut b = Batch::default();
        for i in 0..250u32 {
            b.put(format!("tx/{i:03}"), format!("v{i}"));
        }
        b.put("tl/10/1", "t");
        store.apply(&b).unwrap();
        drop(store);
        // The first release kept no shape record: its pages are named by a whole prefix.
        let mut unmark = Batch::default();
        unmark.delete(SHAPE_KEY);
        inner.apply(&unmark).unwrap();
        let logical = |s: &PagedStore| text(s.scan_prefix(b"").unwrap());
        let want: Vec<String> = {
            let mut all: Vec<String> = (0..250u32).map(|i| format!("tx/{i:03}=v{i}")).collect();
            all.insert(0, "tl/10/1=t".into());
            all
        };

        let halved = PagedStore::open(inner.clone(), HALVED).unwrap();
        assert_eq!(page_names(&inner), ["tl/10/", "tx/00", "tx/05", "tx/10", "tx/15", "tx/20"]);
        assert_eq!(logical(&halved), want);
        assert_eq!(inner.get(SHAPE_KEY).unwrap(), Some(b"tx/:4h,tl/:6".to_vec()));
        drop(halved);

        // And back: a recorded shape with halves says how its names end.
        let whole = PagedStore::open(inner.clone(), PAGINGS).unwrap();
        assert_eq!(page_names(&inner), ["tl/10/", "tx/0", "tx/1", "tx/2"]);
        assert_eq!(logical(&whole), want);
        assert_eq!(whole.get(b"tx/249").unwrap(), Some(b"v249".to_vec()));
    }

    /// A store whose atomic batches fail once `applies` of them have succeeded.
    struct FailingAfter {
        inner: Arc<MemoryStore>,
        applies: std::sync::atomic::AtomicUsize,
    }

    impl Store for FailingAfter {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            self.inner.get(key)
        }
        fn scan_prefix(&self, prefix: &[u8]) -> Result<Pairs, StoreError> {
            self.inner.scan_prefix(prefix)
        }
        fn scan_rev(
            &self,
            from: &[u8],
            to: &[u8],
            visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        ) -> Result<(), StoreError> {
            self.inner.scan_rev(from, to, visit)
        }
        fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
            use std::sync::atomic::Ordering;
            if self.applies.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err() {
                return Err(StoreError::Engine("the disk went away".into()));
            }
            self.inner.apply(batch)
        }
        fn flush(&self) -> Result<(), StoreError> {
            self.inner.flush()
        }
        fn generate_id(&self) -> Result<u64, StoreError> {
            self.inner.generate_id()
        }
    }

    #[test]
    fn a_change_of_shape_cut_off_half_way_goes_on_at_the_next_open() {
        // Three old pages of 10,000 keys: one chunk each.
        let (inner, store) = paged();
        let mut b = Batch::default();
        for i in 0..30_000u32 {
            b.put(format!("tx/{i:05}"), format!("v{i}"));
        }
        store.apply(&b).unwrap();
        drop(store);
        let failing = Arc::new(FailingAfter { inner: inner.clone(), applies: 1.into() });
        assert!(PagedStore::open(failing, HALVED).is_err(), "the second chunk fails");
        let names = page_names(&inner);
        assert!(
            names.contains(&"tx/0".to_owned()) && names.contains(&"tx/25".to_owned()),
            "half-way: {names:?}"
        );
        assert_eq!(inner.get(SHAPE_KEY).unwrap(), Some(b"tx/:4,tl/:6".to_vec()), "still the old shape");

        let store = PagedStore::open(inner.clone(), HALVED).unwrap();
        assert_eq!(page_names(&inner), ["tx/00", "tx/05", "tx/10", "tx/15", "tx/20", "tx/25"]);
        let all = store.scan_prefix(b"tx/").unwrap();
        assert_eq!(all.len(), 30_000);
        assert!(
            all.iter()
                .enumerate()
                .all(|(i, (k, v))| *k == format!("tx/{i:05}").into_bytes()
                    && *v == format!("v{i}").into_bytes())
        );
    }

    #[test]
    fn a_shape_that_keeps_its_names_length_or_cannot_be_read_is_refused() {
        let (inner, store) = paged();
        drop(store);
        static SAME_LENGTH: &[Paging] = &[
            Paging { prefix: b"tx/", page_len: 3, halves: true },
            Paging { prefix: b"tl/", page_len: 6, halves: false },
        ];
        assert!(matches!(PagedStore::open(inner.clone(), SAME_LENGTH), Err(StoreError::Engine(_))));
        let mut b = Batch::default();
        b.put(SHAPE_KEY, "tx/:four");
        inner.apply(&b).unwrap();
        assert!(matches!(PagedStore::open(inner, PAGINGS), Err(StoreError::Engine(_))));
    }

    #[test]
    fn a_slot_is_found_by_binary_search_in_a_large_page() {
        let page: Page =
            (0..5_000u32).map(|i| (format!("{:06}", 2 * i).into_bytes(), i.to_le_bytes().to_vec())).collect();
        let bytes = encode_page(&page);
        for i in [0u32, 1, 2_499, 4_999] {
            let hit = page_get(&bytes, format!("{:06}", 2 * i).as_bytes()).unwrap();
            assert_eq!(hit, Some(i.to_le_bytes().to_vec()));
            assert_eq!(page_get(&bytes, format!("{:06}", 2 * i + 1).as_bytes()).unwrap(), None);
        }
        assert_eq!(page_get(&encode_page(&Page::new()), b"x").unwrap(), None);
    }

    #[test]
    fn a_damaged_page_is_refused_never_misread() {
        let mut page = Page::new();
        page.insert(b"01".to_vec(), b"value".to_vec());
        let bytes = encode_page(&page);
        for cut in 0..bytes.len() {
            assert!(decode_page(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(decode_page(&bytes).unwrap(), page);
    }
}
