//! The transactions list against a big account: one account with a million transactions
//! (`LIST_BENCH_TRANSACTIONS`, default 1,000,000) spread over the last 62 days, written
//! through group commit into a sled database in a temporary directory, so about half of
//! them fall in the default 31-day range. Then criterion times the pages the API serves.
//!
//! Run: `cargo bench --bench list` (building the database takes a minute or two and
//! about 1 GB of disk). Figures go to docs/benchmarks.md.

use std::hint::black_box;
use std::sync::Arc;

use chrono::{Duration, Utc};
use criterion::{criterion_group, criterion_main, Criterion};
use pixgw::domain::ids::AccountId;
use pixgw::domain::listing::{date_range, Operation};
use pixgw::domain::money::Money;
use pixgw::domain::transaction::{Transaction, TxKind, TxStatus};
use pixgw::store::{Batch, JournalOptions, Repo, Storage};
use uuid::Uuid;

/// Writes `b` and waits until it is on disk, however long: this bench writes several times
/// faster than checkpoints can follow, so the committer holds it back (backpressure) and a
/// group may take longer than a reply's deadline.
fn durable(
    rt: &tokio::runtime::Runtime,
    commit: &pixgw::store::GroupCommit,
    b: Batch,
) -> Result<(), pixgw::store::CommitError> {
    let ticket = commit.submit(b)?;
    loop {
        match rt.block_on(commit.durable(ticket)) {
            Err(pixgw::store::CommitError::NotDurable(_)) => continue,
            other => return other,
        }
    }
}

fn list(c: &mut Criterion) {
    let n: u64 =
        std::env::var("LIST_BENCH_TRANSACTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let Ok(dir) = tempfile::tempdir() else { return };
    let Ok(storage) = Storage::open(dir.path(), 64, JournalOptions::default(), Repo::layout()) else {
        return;
    };
    let commit = Arc::clone(&storage.commit);
    let repo = Repo::new(&storage);
    let Some(account) = AccountId::new(1) else { return };
    let now = Utc::now();
    let span_ms = Duration::days(62).num_milliseconds();
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_time().build() else { return };
    let started = std::time::Instant::now();
    let mut b = Batch::default();
    for i in 0..n {
        // Oldest first, as they would have been made; one in a hundred failed.
        let at = now - Duration::milliseconds(span_ms - span_ms * i as i64 / n as i64);
        let kind = if i % 3 == 0 { TxKind::PixIn } else { TxKind::CashOut };
        let mut tx = Transaction::new(
            i + 1,
            Uuid::new_v4(),
            account,
            kind,
            Money::parse(&format!("{}.{:02}", 1 + i % 1000, i % 100)).unwrap_or(Money::ZERO),
            at,
        );
        tx.status = if i % 100 == 7 { TxStatus::Error } else { TxStatus::Confirmed };
        tx.external_id = Some(format!("ext-{i}"));
        tx.end_to_end_id = format!("E{:031}", i);
        if let Err(e) = repo.put_transaction(&mut b, &tx, true) {
            eprintln!("list bench: {e}");
            return;
        }
        // One durable group at a time keeps memory flat (the queue has no back-pressure).
        if b.len_hint() >= 30_000 {
            if let Err(e) = durable(&rt, &commit, std::mem::take(&mut b)) {
                eprintln!("list bench: writing transaction {i}: {e}");
                return;
            }
        }
    }
    if let Err(e) = durable(&rt, &commit, b) {
        eprintln!("list bench: {e}");
        return;
    }
    eprintln!("wrote {n} transactions in {:.1?}", started.elapsed());
    // Measure the steady state: what a checkpoint has not written yet sits in memory, and a
    // server holds about a second of writes there, not the backlog this bench leaves.
    if let Err(e) = commit.checkpoint_now() {
        eprintln!("list bench: checkpoint: {e}");
        return;
    }
    eprintln!("checkpointed after {:.1?}", started.elapsed());
    let Ok(range) = date_range(None, None, now) else { return };
    let (first_page, total) =
        repo.transactions_page(account, range, (None, None), 0, 100).unwrap_or_default();
    eprintln!("default range: {total} transactions, first page {}", first_page.len());

    let mut g = c.benchmark_group("transactions_list_1m");
    g.bench_function("page_1_size_100", |bch| {
        bch.iter(|| repo.transactions_page(account, black_box(range), (None, None), 0, 100))
    });
    g.bench_function("page_1000_size_100", |bch| {
        bch.iter(|| repo.transactions_page(account, black_box(range), (None, None), 99_900, 100))
    });
    g.bench_function("status_error_page_1_size_100", |bch| {
        bch.iter(|| repo.transactions_page(account, black_box(range), (Some(TxStatus::Error), None), 0, 100))
    });
    g.bench_function("type_payment_page_1_size_100", |bch| {
        bch.iter(|| {
            repo.transactions_page(account, black_box(range), (None, Some(Operation::Payment)), 0, 100)
        })
    });
    g.finish();
}

criterion_group!(benches, list);
criterion_main!(benches);
