//! One-time migrations, run at start before anything is served: each brings a data dir an
//! earlier release wrote to what this release writes, then marks itself done in `meta/`.
//!
//! Every migration is idempotent and written through the committer in chunks, so a crash
//! half-way loses nothing (the journal holds each chunk) and the next start finishes it:
//! what was already rewritten is recognised by its format and left alone.
//!
//! - [`records`]: the JSON records of the releases before 2026-11-23 (format 0: transactions,
//!   ledgers, holds, outbox events) become format 1 (`codec.rs`). Their indexes stay as they
//!   were: a transactionId or end-to-end id made then carries no local id, and the `txid/`
//!   and `e2e/` entries written then still find it.

use super::{codec, keys, prefix_end, Batch, GroupCommit, Store, StoreError};
use crate::store::{Repo, RepoError};

/// `meta/record_format`: the format (one byte) every record on the payment path has.
pub const KEY_RECORD_FORMAT: &[u8] = keys::RECORD_FORMAT;
/// The record format this release writes.
pub const RECORD_FORMAT: u8 = 1;
/// Records rewritten per durable write.
const MIGRATION_CHUNK_MAX: usize = 1_000;

/// Rewrites the records of format 0 in format 1; answers how many it rewrote.
pub fn records(repo: &Repo, commit: &GroupCommit) -> Result<usize, RepoError> {
    let store = repo.store();
    if store.get(KEY_RECORD_FORMAT)?.is_some_and(|v| v.first() >= Some(&RECORD_FORMAT)) {
        return Ok(0);
    }
    let mut rewritten = 0;
    for (prefix, rewrite) in [
        (keys::TRANSACTIONS, rewrite_transaction as Rewrite),
        (keys::LEDGERS, rewrite_ledger),
        (keys::PENDING, rewrite_hold),
        (keys::OUTBOX, rewrite_event),
    ] {
        rewritten += rewrite_all(&**store, commit, prefix, rewrite)?;
    }
    let mut b = Batch::default();
    b.put(KEY_RECORD_FORMAT, vec![RECORD_FORMAT]);
    durable(commit, b)?;
    Ok(rewritten)
}

/// A record of format 0 in format 1 (`Ok(None)`: it is not of format 0).
type Rewrite = fn(&[u8]) -> Result<Option<Vec<u8>>, codec::CodecError>;

fn is_format_0(v: &[u8]) -> bool {
    matches!(v.first(), Some(b'{' | b'"'))
}

fn rewrite_transaction(v: &[u8]) -> Result<Option<Vec<u8>>, codec::CodecError> {
    if !is_format_0(v) {
        return Ok(None);
    }
    let mut out = Vec::new();
    codec::encode_transaction(&codec::decode_transaction(v)?, &mut out);
    Ok(Some(out))
}

fn rewrite_ledger(v: &[u8]) -> Result<Option<Vec<u8>>, codec::CodecError> {
    if !is_format_0(v) {
        return Ok(None);
    }
    let mut out = Vec::new();
    codec::encode_ledger(&codec::decode_ledger(v)?, &mut out);
    Ok(Some(out))
}

fn rewrite_hold(v: &[u8]) -> Result<Option<Vec<u8>>, codec::CodecError> {
    if !is_format_0(v) {
        return Ok(None);
    }
    Ok(Some(codec::encode_hold(codec::decode_hold(v)?)))
}

fn rewrite_event(v: &[u8]) -> Result<Option<Vec<u8>>, codec::CodecError> {
    if !is_format_0(v) {
        return Ok(None);
    }
    let mut out = Vec::new();
    codec::encode_event(&codec::decode_event(v)?, &mut out);
    Ok(Some(out))
}

/// Rewrites every record under `prefix`, newest key first, a chunk at a time: only one chunk
/// is ever held in memory.
fn rewrite_all(
    store: &dyn Store,
    commit: &GroupCommit,
    prefix: &[u8],
    rewrite: Rewrite,
) -> Result<usize, RepoError> {
    let mut to = prefix_end(prefix).unwrap_or_else(|| vec![u8::MAX; prefix.len() + 1]);
    let mut rewritten = 0;
    loop {
        let mut chunk: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(MIGRATION_CHUNK_MAX);
        store.scan_rev(prefix, &to, &mut |k, v| {
            chunk.push((k.to_vec(), v.to_vec()));
            chunk.len() < MIGRATION_CHUNK_MAX
        })?;
        let Some((last, _)) = chunk.last() else { return Ok(rewritten) };
        to = last.clone();
        let mut b = Batch::default();
        for (k, v) in &chunk {
            let new = rewrite(v).map_err(|e| RepoError::Corrupt {
                key: String::from_utf8_lossy(k).into_owned(),
                reason: e.to_string(),
            })?;
            if let Some(new) = new {
                b.put(k.clone(), new);
            }
        }
        if !b.is_empty() {
            rewritten += b.len_hint();
            durable(commit, b)?;
        }
    }
}

fn durable(commit: &GroupCommit, b: Batch) -> Result<(), RepoError> {
    commit.commit_blocking(b).map_err(|e| RepoError::Store(StoreError::Engine(e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::AccountId;
    use crate::domain::ledger::LedgerState;
    use crate::domain::money::Money;
    use crate::domain::transaction::{Transaction, TxKind};
    use crate::store::Storage;

    #[test]
    fn json_records_are_rewritten_once_and_read_the_same() {
        let storage = Storage::memory().unwrap();
        let repo = Repo::new(&storage);
        let commit = &storage.commit;
        let mut b = Batch::default();
        let mut txs = Vec::new();
        for i in 0..2_500u64 {
            let tx = Transaction::new(
                i,
                uuid::Uuid::from_u128(u128::from(i) + 1),
                AccountId::new(1).unwrap(),
                TxKind::CashOut,
                Money::parse("1.50").unwrap(),
                chrono::Utc::now(),
            );
            b.put(format!("tx/{i:020}").into_bytes(), serde_json::to_vec(&tx).unwrap());
            txs.push(tx);
        }
        b.put("ledger/00000000000000000001", serde_json::to_vec(&LedgerState::default()).unwrap());
        b.put(
            "pend/00000000000000000001/00000000000000000007",
            serde_json::to_vec(&Money::parse("2").unwrap()).unwrap(),
        );
        commit.commit_blocking(b).unwrap();
        // One already in format 1 (a crash half-way through an earlier run) is left alone.
        let mut b = Batch::default();
        repo.put_transaction(&mut b, &txs[5], false).unwrap();
        commit.commit_blocking(b).unwrap();

        assert_eq!(records(&repo, commit).unwrap(), 2_499 + 2);
        for tx in [&txs[0], &txs[5], &txs[2_499]] {
            let raw = repo.store().get(format!("tx/{:020}", tx.local_id).as_bytes()).unwrap().unwrap();
            assert_eq!(raw[0], codec::FORMAT_BINARY_V1);
            assert_eq!(repo.transaction(tx.local_id).unwrap().as_ref(), Some(tx));
        }
        let hold = repo.store().get(b"pend/00000000000000000001/00000000000000000007").unwrap().unwrap();
        assert_eq!(codec::decode_hold(&hold).unwrap(), Money::parse("2").unwrap());
        assert_eq!(hold[0], codec::FORMAT_BINARY_V1);
        assert_eq!(records(&repo, commit).unwrap(), 0, "once");
    }
}
