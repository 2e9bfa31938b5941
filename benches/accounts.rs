//! Memory of a node that served many accounts: `ACCOUNTS_BENCH_N` accounts (default
//! 100,000), each with one cash-out through its own account actor, on sled in a data dir;
//! the resident memory with every actor live, then after they went idle and stopped.
//!
//! Run: `cargo bench --bench accounts`; then `benches/restart.sh <the data dir it prints>`
//! times a server start on that data dir until it serves. Figures go to docs/benchmarks.md.
//! (Not criterion: it measures memory, once.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use pixgw::account::{Deps, GetBalance, Pay, PayRequest, Registry, ACCOUNT_IDLE_STOP_SECONDS};
use pixgw::clock::Clock;
use pixgw::domain::account::{AccountName, AccountProfile};
use pixgw::domain::document::TaxId;
use pixgw::domain::money::Money;
use pixgw::domain::pix_key::{parse_directory_key, DirectoryKeyType};
use pixgw::domain::transaction::{Counterpart, TxKind};
use pixgw::rail::sim::bank::SimulatedBank;
use pixgw::rail::sim::directory::Directory;
use pixgw::store::{JournalOptions, Repo, Storage};

/// How long the allocator is given to return freed memory before the last measurement
/// (jemalloc purges dirty pages after about 10 s).
const MEMORY_DECAY_WAIT: Duration = Duration::from_secs(15);

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmRSS:").map(|v| v.trim().trim_end_matches(" kB").trim().to_owned())
            })
        })
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    let n: u64 = std::env::var("ACCOUNTS_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let dir = std::env::var("ACCOUNTS_BENCH_DIR").map(std::path::PathBuf::from).unwrap_or_else(|_| {
        std::env::temp_dir().join(format!("pixgw-accounts-bench-{}", std::process::id()))
    });
    if let Err(e) = actix_rt::System::new().block_on(run(n, dir)) {
        eprintln!("accounts bench: {e:#}");
        std::process::exit(1);
    }
}

async fn run(n: u64, dir: std::path::PathBuf) -> anyhow::Result<()> {
    std::fs::create_dir_all(&dir)?;
    let storage = Storage::open(&dir, 64, JournalOptions::default(), Repo::layout())?;
    let commit = Arc::clone(&storage.commit);
    let repo = Repo::new(&storage);
    let clock = Arc::new(Clock::test(0));
    let directory = Arc::new(Directory::embedded()?);
    let bank_dir = Arc::clone(&directory);
    let bank = actix::Actor::start_in_arbiter(&actix::Arbiter::new().handle(), move |_| {
        SimulatedBank::new(bank_dir, Duration::from_millis(20))
    });
    let deps = Arc::new(Deps {
        repo: repo.clone(),
        commit,
        clock: Arc::clone(&clock),
        rails: pixgw::rail::Rails { sandbox: bank.clone().recipient(), live: bank.recipient() },
        directory: Arc::clone(&directory),
        on_us: std::sync::OnceLock::new(),
        collect: std::sync::OnceLock::new(),
        rec_locations: None,
    });
    let registry = Registry::new(deps, 2);
    println!("data dir: {}", dir.display());
    println!("resident memory at start: {:.0} MB", rss_mb());

    let started = Instant::now();
    let opening = Money::parse("10.00").map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let mut ids = Vec::with_capacity(n as usize);
    for i in 0..n {
        let profile = AccountProfile {
            name: AccountName::parse(&format!("Bench {i}")).map_err(|e| anyhow::anyhow!(e))?,
            document: TaxId::parse("52998224725").map_err(|e| anyhow::anyhow!("{e:?}"))?,
            sandbox: true,
        };
        let created = pixgw::admin::create_account(&repo, profile, opening, None, clock.now())?;
        ids.push(created.record.id);
    }
    println!("created {n} accounts in {:.1?}; resident memory: {:.0} MB", started.elapsed(), rss_mb());

    // Every account's actor started, before anything is written: the actors' own cost.
    for chunk in ids.chunks(2_000) {
        let asks = chunk.iter().map(|id| {
            let addr = registry.get(*id);
            async move {
                match addr {
                    Ok(a) => matches!(a.send(GetBalance).await, Ok(Ok(_))),
                    Err(_) => false,
                }
            }
        });
        let ok = futures::future::join_all(asks).await.into_iter().filter(|b| *b).count();
        anyhow::ensure!(ok == chunk.len(), "{} balances failed", chunk.len() - ok);
    }
    println!(
        "live account actors: {} (no writes yet); resident memory: {:.0} MB",
        registry.live_count(),
        rss_mb()
    );
    let key = directory
        .keys_of_type(DirectoryKeyType::Email)
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("no key"))?;
    let settle_key = parse_directory_key(&key).ok();
    let document = settle_key.as_ref().and_then(|k| directory.lookup(k)).map(|e| e.document.clone());
    let started = Instant::now();
    for chunk in ids.chunks(2_000) {
        let sends = chunk.iter().map(|id| {
            let req = PayRequest {
                kind: TxKind::CashOut,
                external_id: Some(format!("bench-{}", id.get())),
                value: Money::parse("0.01").unwrap_or(Money::ZERO),
                description: None,
                counterpart: Counterpart {
                    name: "Payee".into(),
                    document: document.clone(),
                    key: Some(key.clone()),
                    key_type: Some(DirectoryKeyType::Email),
                    bank: None,
                },
                scenario: None,
                document_mismatch: false,
                dict: None,
                qr_txid: None,
                automatic: false,
                end_to_end_id: None,
                rail: None,
            };
            let addr = registry.get(*id);
            async move {
                match addr {
                    Ok(a) => matches!(a.send(Pay(req)).await, Ok(Ok(_))),
                    Err(_) => false,
                }
            }
        });
        let ok = futures::future::join_all(sends).await.into_iter().filter(|b| *b).count();
        anyhow::ensure!(ok == chunk.len(), "{} of {} cash-outs failed", chunk.len() - ok, chunk.len());
    }
    println!("{n} cash-outs, one per account actor, in {:.1?}", started.elapsed());
    // Settled when no account has anything blocked.
    let deadline = Instant::now() + Duration::from_secs(120);
    for id in &ids {
        loop {
            let addr = registry.get(*id)?;
            let blocked = addr.send(GetBalance).await.ok().and_then(Result::ok).map(|b| b.blocked);
            if blocked.is_some_and(|b| b.is_zero()) {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "account {id} still has money blocked");
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
    }
    println!("live account actors: {}; resident memory: {:.0} MB", registry.live_count(), rss_mb());
    actix_rt::time::sleep(MEMORY_DECAY_WAIT).await;
    println!(
        "{:?} later, every actor still live ({}): resident memory: {:.0} MB",
        MEMORY_DECAY_WAIT,
        registry.live_count(),
        rss_mb()
    );

    clock.advance(ACCOUNT_IDLE_STOP_SECONDS + 1).map_err(|e| anyhow::anyhow!("{e}"))?;
    registry.tick_all().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while registry.live_count() > 0 && Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "after the idle stop: live account actors: {}; resident memory: {:.0} MB",
        registry.live_count(),
        rss_mb()
    );
    // The allocator gives freed memory back on its own background thread (decay): measure
    // again once it had the time to.
    actix_rt::time::sleep(MEMORY_DECAY_WAIT).await;
    println!("{:?} later: resident memory: {:.0} MB", MEMORY_DECAY_WAIT, rss_mb());
    Ok(())
}
