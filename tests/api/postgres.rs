//! The PostgreSQL store: the storage contract on all three engines, fencing at the store,
//! and the binary on PostgreSQL (payments, a leader paused past its lease, kill -9 of the
//! leader while cash-outs stream, the database stopped and started under load).
//!
//! Every test starts its own throwaway cluster (`pg_cluster`); where PostgreSQL is not
//! installed they print how to install it and return, except under CI, where they fail.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pixgw::domain::ids::AccountId;
use pixgw::domain::money::Money;
use pixgw::domain::transaction::{TxKind, TxStatus};
use pixgw::store::postgres::lease::LeaseTimes;
use pixgw::store::postgres::{Pg, PgStore, PgUrl};
use pixgw::store::{Batch, MemoryStore, Repo, SledStore, Storage, Store};

use crate::helpers::{
    bin, cash_out_body, client, cutting_proxy, read_credentials, start_process, Options, TestApp,
};
use crate::pg_cluster::PgCluster;
use crate::recovery::stream_then_kill_with;

fn pg(url: &str, node: &str) -> Arc<Pg> {
    let pg = Pg::new(PgUrl::parse(url).unwrap(), node.into()).unwrap();
    pg.migrate().unwrap();
    pg
}

/// What every engine must do: point reads, atomic batches of puts, inserts and deletes,
/// prefix scans in key order and reverse scans that stop when told.
fn contract(store: &dyn Store) {
    assert_eq!(store.get(b"a/1").unwrap(), None);
    let mut b = Batch::default();
    b.put("a/1", b"one".to_vec());
    b.put("a/2", b"two".to_vec());
    b.insert("a/3", Vec::new());
    b.put("b/1", b"other".to_vec());
    b.put(vec![0xff, 0xff], vec![0, 1, 2]);
    store.apply(&b).unwrap();
    assert_eq!(store.get(b"a/1").unwrap(), Some(b"one".to_vec()));
    assert_eq!(store.get(b"a/3").unwrap(), Some(Vec::new()), "an empty value is a value");
    let keys = |pairs: Vec<(Vec<u8>, Vec<u8>)>| pairs.into_iter().map(|p| p.0).collect::<Vec<_>>();
    assert_eq!(
        keys(store.scan_prefix(b"a/").unwrap()),
        vec![b"a/1".to_vec(), b"a/2".to_vec(), b"a/3".to_vec()]
    );
    assert_eq!(store.scan_prefix(&[0xff]).unwrap(), vec![(vec![0xff, 0xff], vec![0, 1, 2])]);
    let mut seen = Vec::new();
    store
        .scan_rev(b"a/", b"a/3", &mut |k, _| {
            seen.push(k.to_vec());
            false
        })
        .unwrap();
    assert_eq!(seen, vec![b"a/2".to_vec()], "highest first, and it stops when told");
    // A batch that deletes, overwrites and puts-then-deletes in one go.
    let mut b = Batch::default();
    b.delete("a/2");
    b.put("a/1", b"uno".to_vec());
    b.put("c/1", b"gone".to_vec());
    b.delete("c/1");
    store.apply(&b).unwrap();
    assert_eq!(store.get(b"a/2").unwrap(), None);
    assert_eq!(store.get(b"a/1").unwrap(), Some(b"uno".to_vec()));
    assert_eq!(store.get(b"c/1").unwrap(), None);
    // Reverse scans across more pairs than one read of any engine.
    let mut b = Batch::default();
    for i in 0..700u32 {
        b.put(format!("r/{i:05}"), i.to_be_bytes().to_vec());
    }
    store.apply(&b).unwrap();
    let mut all = Vec::new();
    store
        .scan_rev(b"r/", b"r/\xff", &mut |_, v| {
            all.push(u32::from_be_bytes(v.try_into().unwrap()));
            true
        })
        .unwrap();
    assert_eq!(all, (0..700).rev().collect::<Vec<u32>>());
    assert_eq!(store.scan_prefix(b"r/").unwrap().len(), 700);
}

#[actix_rt::test]
async fn the_storage_contract_holds_on_memory_sled_and_postgres() {
    contract(&MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    contract(&SledStore::open_with_cache(dir.path(), 8).unwrap());
    let Some(cluster) = PgCluster::start("the_storage_contract_holds_on_memory_sled_and_postgres") else {
        return;
    };
    let pg = pg(&cluster.database("contract"), "node-a");
    assert!(pg.try_acquire(LeaseTimes::default()).await.unwrap().is_some());
    contract(&PgStore::new(pg));
}

#[actix_rt::test]
async fn a_deposed_writer_commits_nothing_and_the_next_one_reads_every_group() {
    let Some(cluster) = PgCluster::start("a_deposed_writer_commits_nothing") else { return };
    let url = cluster.database("fencing");
    let times = LeaseTimes::default();
    let a = pg(&url, "node-a");
    let epoch_a = a.try_acquire(times).await.unwrap().unwrap();
    let b = pg(&url, "node-b");
    assert_eq!(b.try_acquire(times).await.unwrap(), None, "the lease is held");
    let storage_a = Storage::open_postgres(&a, Repo::layout()).unwrap();
    for i in 0..20u32 {
        let mut batch = Batch::default();
        batch.put(format!("k/{i}"), i.to_be_bytes().to_vec());
        storage_a.commit.commit(batch).await.unwrap();
    }
    // A takeover: the lease ends (as it would by expiring) and B takes it.
    a.release().await.unwrap();
    let epoch_b = b.try_acquire(times).await.unwrap().unwrap();
    assert!(epoch_b > epoch_a);
    // A still believes it writes: its group is refused, nothing lands, and it takes no more.
    let mut late = Batch::default();
    late.put("k/late", vec![1]);
    assert!(storage_a.commit.commit(late).await.is_err());
    assert!(storage_a.commit.has_failed());
    let mut direct = Batch::default();
    direct.put("k/direct", vec![1]);
    assert!(PgStore::new(Arc::clone(&a)).apply(&direct).is_err(), "a snapshot write is fenced too");
    // B replays A's journal: every acknowledged group, nothing after.
    let storage_b = Storage::open_postgres(&b, Repo::layout()).unwrap();
    for i in 0..20u32 {
        assert_eq!(storage_b.view.get(format!("k/{i}").as_bytes()).unwrap(), Some(i.to_be_bytes().to_vec()));
    }
    assert_eq!(storage_b.view.get(b"k/late").unwrap(), None);
    assert_eq!(storage_b.view.get(b"k/direct").unwrap(), None);
    assert_eq!(
        cluster.sql("fencing", &format!("SELECT count(*) FROM pixgw_journal WHERE epoch = {epoch_a}")),
        "0",
        "the takeover folded A's journal into the snapshot"
    );
    storage_b.commit.checkpoint_now().unwrap();
    assert_eq!(cluster.sql("fencing", "SELECT count(*) FROM pixgw_kv WHERE key LIKE 'k/%'"), "20");
}

/// A group whose connection dies after the database committed it, before the answer came
/// back, is learned by reading it back: it is acknowledged, not refused (tokio-postgres calls
/// such a connection "closed", which was once taken to mean the group was never sent).
#[actix_rt::test]
async fn a_group_whose_answer_is_lost_after_its_commit_is_read_back_and_acknowledged() {
    let Some(cluster) = PgCluster::start("a_group_whose_answer_is_lost") else { return };
    cluster.database("indoubt");
    let proxy = cutting_proxy(&format!("127.0.0.1:{}", cluster.port), |chunk| {
        chunk.windows(b"k/answer-lost".len()).any(|w| w == b"k/answer-lost")
    });
    let a = pg(&format!("postgres://postgres@{proxy}/indoubt"), "node-a");
    a.try_acquire(LeaseTimes::default()).await.unwrap().unwrap();
    let storage = Storage::open_postgres(&a, Repo::layout()).unwrap();
    // What the open wrote (the id floor it raised).
    let opened: u64 = cluster.sql("indoubt", "SELECT count(*) FROM pixgw_journal").parse().unwrap();
    let put = |key: &str| {
        let mut batch = Batch::default();
        batch.put(key, vec![7]);
        batch
    };
    storage.commit.commit(put("k/before")).await.unwrap();
    let lost = storage.commit.commit(put("k/answer-lost")).await;
    assert!(lost.is_ok(), "{lost:?}");
    assert!(!storage.commit.has_failed());
    storage.commit.commit(put("k/after")).await.unwrap();
    for key in ["k/before", "k/answer-lost", "k/after"] {
        assert_eq!(storage.view.get(key.as_bytes()).unwrap(), Some(vec![7]), "{key}");
    }
    assert_eq!(cluster.sql("indoubt", "SELECT count(*) FROM pixgw_journal"), (opened + 3).to_string());
}

#[test]
fn a_database_with_a_newer_schema_runs_on_unless_a_newer_migration_breaks_older_releases() {
    let Some(cluster) = PgCluster::start(
        "a_database_with_a_newer_schema_runs_on_unless_a_newer_migration_breaks_older_releases",
    ) else {
        return;
    };
    let url = cluster.database("newer");
    pg(&url, "node-a");
    // A newer release's migration that only adds: this one runs on as it is.
    cluster.sql("newer", "INSERT INTO pixgw_schema (version, breaks_older) VALUES (98, false)");
    let again = Pg::new(PgUrl::parse(&url).unwrap(), "node-b".into()).unwrap();
    assert_eq!(again.migrate().unwrap(), 98);
    // One that changes what this release reads: refused, naming it.
    cluster.sql("newer", "INSERT INTO pixgw_schema (version, breaks_older) VALUES (99, true)");
    let refused = again.migrate().unwrap_err().to_string();
    assert!(refused.contains("schema version 99") && refused.contains("version 99 of it"), "{refused}");
}

/// Reads the database itself, as the next leader would, with every node stopped: each
/// cash-out of `account` is one that was sent, stored once; each acknowledged one and each
/// in `sent` (all answered 201 under their keys) is there; and `funded` equals the balance
/// `net` plus what the confirmed cash-outs took.
pub(crate) async fn assert_stored_once(
    url: &str,
    account: u64,
    sent: &[String],
    acked: &HashMap<String, String>,
    net: &str,
    funded: &str,
) {
    let reader = pg(url, "reader");
    assert!(reader.try_acquire(LeaseTimes::default()).await.unwrap().is_some());
    let storage = Storage::open_postgres(&reader, Repo::layout()).unwrap();
    let repo = Repo::new(&storage);
    let txs = repo.transactions_of(AccountId::new(account).unwrap()).unwrap();
    let mut seen = HashMap::new();
    for t in txs.iter().filter(|t| t.kind == TxKind::CashOut) {
        let ext = t.external_id.clone().unwrap();
        assert!(seen.insert(ext.clone(), t.local_id).is_none(), "{ext} appears twice");
        assert!(sent.contains(&ext), "{ext} was never sent");
    }
    for ext in acked.keys() {
        assert!(seen.contains_key(ext), "{ext} acknowledged but not stored");
    }
    for ext in sent {
        assert!(seen.contains_key(ext), "{ext} was answered 201 under its key but is not stored");
    }
    let confirmed = txs
        .iter()
        .filter(|t| t.kind == TxKind::CashOut && t.status == TxStatus::Confirmed)
        .try_fold(Money::ZERO, |acc, t| acc.checked_add(t.value)?.checked_add(t.fee))
        .unwrap();
    let available = Money::parse(net).unwrap();
    assert_eq!(available.checked_add(confirmed), Money::parse(funded).ok(), "money is conserved");
}

/// Makes the first leader's Demo account ready for a stream of cash-outs: its credentials
/// read from its data dir, 100,000.00 funded and its limits raised to match; answers the
/// credentials and a token.
pub(crate) async fn ready_to_stream(leader: &mut TestApp) -> (crate::helpers::Credentials, String) {
    leader.creds = read_credentials(&leader.data_dir());
    let token = leader.demo_token().await;
    leader.fund(&token, "100000").await;
    let limits = serde_json::json!({"limits": {"daily": "100000", "nightly": "100000"}});
    let path = format!("/admin/accounts/{}", leader.creds.account_id);
    assert_eq!(leader.admin("PATCH", &path, Some(limits)).await.0, 200);
    (leader.creds.clone(), token)
}

/// Starts `pixgw serve --store url` on a data dir of its own; answers once it serves as
/// the leader (or, with `leader` false, once it is up).
pub(crate) async fn node(url: &str, extra: &[(&str, &str)], leader: bool) -> TestApp {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut env =
        vec![("PIXGW_DATABASE_URL".to_owned(), url.to_owned()), ("PIXGW_SIM_SETTLE_MS".into(), "20".into())];
    env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let opts = Options { env, ..Options::default() };
    let (child, base) = start_process(dir.path(), &opts);
    if leader {
        wait_role(&base, "leader", Duration::from_secs(30)).await;
    }
    TestApp::adopt(base, dir, child)
}

/// Waits until `/healthz` of `base` says `role`.
pub(crate) async fn wait_role(base: &str, role: &str, within: Duration) -> Duration {
    let started = Instant::now();
    let c = client();
    loop {
        if let Ok(mut res) = c.get(format!("{base}/healthz")).send().await {
            let body: serde_json::Value = res.json().await.unwrap_or_default();
            if body["role"] == role {
                return started.elapsed();
            }
        }
        assert!(started.elapsed() < within, "{base} is not the {role} after {within:?}");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of the metric line `name` (with its labels, as written) in a scrape.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
}

/// The leader publishes what its database says of its standbys (`pg_stat_replication`):
/// one attached and synchronous once the primary names it, and their replay lag; and how
/// long its reads waited for a connection of the pool.
#[actix_rt::test]
async fn the_leader_publishes_its_databases_standbys_and_its_read_pools_wait() {
    let Some(cluster) = PgCluster::start("standby_metrics") else { return };
    let url = cluster.database("watched");
    let _standby = cluster.standby("standby1");
    cluster.sql("postgres", "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (standby1)'");
    cluster.sql("postgres", "SELECT pg_reload_conf()");
    let leader = node(&url, &[], true).await;
    let scrape = || {
        let req = leader.client.get(leader.url("/metrics"));
        async move { String::from_utf8(req.send().await.unwrap().body().await.unwrap().to_vec()).unwrap() }
    };
    // The leader reads every 5 s: bounded by 20 s.
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let text = scrape().await;
        if metric(&text, r#"pixgw_db_standbys{state="synchronous"}"#) == Some(1.0) {
            break text;
        }
        assert!(Instant::now() < deadline, "no synchronous standby published: {text}");
        actix_rt::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(metric(&text, r#"pixgw_db_standbys{state="attached"}"#), Some(1.0));
    let lag = metric(&text, "pixgw_db_standby_replay_lag_seconds").expect("the replay lag is published");
    assert!((0.0..30.0).contains(&lag), "{lag}");
    let waited = metric(&text, "pixgw_db_pool_wait_seconds_count").expect("the pool's wait is published");
    assert!(waited >= 1.0, "the reads took connections of the pool: {waited}");
}

/// A cash-out of 1.00 under `ext`: its numeric id.
async fn numeric_id_of_a_cash_out(app: &TestApp, token: &str, ext: &str) -> u64 {
    let (s, out) = app.post_raw("/api/pix/cash-out", token, &cash_out_body(ext, "1"), &[]).await;
    assert_eq!(s, 201, "{out}");
    let id = out["transactionId"].as_str().unwrap();
    let (_, t) = app.get_with(&format!("/api/transactions/{id}"), token).await;
    t["id"].as_u64().unwrap()
}

/// A database rewound below ids it had handed out (a point-in-time recovery; here its id
/// floor is set back by hand, with the nodes stopped) never hands one of them out again:
/// the next leader's ids start above every id made before.
#[actix_rt::test]
async fn after_the_database_is_rewound_no_id_is_handed_out_again() {
    let Some(cluster) = PgCluster::start("rewound_ids") else { return };
    let url = cluster.database("rewound");
    let mut first = node(&url, &[], true).await;
    first.creds = read_credentials(&first.data_dir());
    let creds = first.creds.clone();
    let token = first.demo_token().await;
    first.fund(&token, "100").await;
    let before = numeric_id_of_a_cash_out(&first, &token, "before-the-rewind").await;
    assert!(first.stop().success());
    // The rewind: the id floor as it was long before.
    cluster.sql(
        "rewound",
        "UPDATE pixgw_kv SET value = '\\x0000000000000001'::bytea WHERE key = 'meta/id_floor'::bytea",
    );
    assert_eq!(
        cluster
            .sql("rewound", "SELECT encode(value, 'hex') FROM pixgw_kv WHERE key = 'meta/id_floor'::bytea"),
        "0000000000000001"
    );
    let mut next = node(&url, &[], true).await;
    next.creds = creds;
    let token = next.demo_token().await;
    let after = numeric_id_of_a_cash_out(&next, &token, "after-the-rewind").await;
    assert!(after > before, "an id of before the rewind came again: {after} after {before}");
}

#[actix_rt::test]
async fn payments_on_postgres_survive_a_restart_and_a_standby_answers_503() {
    let Some(cluster) = PgCluster::start("payments_on_postgres") else { return };
    let url = cluster.database("payments");
    let mut leader = node(&url, &[], true).await;
    leader.creds = read_credentials(&leader.data_dir());
    let token = leader.demo_token().await;
    leader.fund(&token, "100").await;
    let (s, out) = leader.post_raw("/api/pix/cash-out", &token, &cash_out_body("pg-1", "10"), &[]).await;
    assert_eq!(s, 201, "{out}");
    leader.wait_final(&token, out["transactionId"].as_str().unwrap()).await;
    let epoch = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    let scrape = |app: &TestApp| {
        let req = app.client.get(app.url("/metrics"));
        async move { String::from_utf8(req.send().await.unwrap().body().await.unwrap().to_vec()).unwrap() }
    };
    let text = scrape(&leader).await;
    assert_eq!(epoch(&text, "pixgw_database_up"), Some(1.0), "the database answers the leader");
    let first_epoch = epoch(&text, "pixgw_lease_epoch").expect("the leader says its epoch");
    let standby = node(&url, &[], false).await;
    wait_role(&standby.base, "standby", Duration::from_secs(10)).await;
    let (s, refused) = standby.get_with("/api/balance", &token).await;
    assert_eq!((s, refused["code"].as_str()), (503, Some("SERVICE_UNAVAILABLE")), "{refused}");
    // A graceful stop ends the lease at once: the standby takes over well within it.
    assert!(leader.stop().success());
    let took = wait_role(&standby.base, "leader", Duration::from_secs(10)).await;
    assert!(took < Duration::from_secs(4), "took {took:?}, as long as waiting the lease out");
    let taken = epoch(&scrape(&standby).await, "pixgw_lease_epoch").expect("the new leader says its epoch");
    assert!(taken > first_epoch, "a takeover is a new epoch: {first_epoch} then {taken}");
    let mut standby = standby;
    standby.creds = read_credentials(&leader.data_dir());
    let token = standby.demo_token().await;
    assert_eq!(standby.balance(&token).await, ("90.00".into(), "0.00".into(), "90.00".into()));
    let (s, dup) = standby.post_raw("/api/pix/cash-out", &token, &cash_out_body("pg-1", "10"), &[]).await;
    assert_eq!((s, dup["code"].as_str()), (400, Some("PIX_DUPLICATE_EXTERNAL_ID")));
}

#[actix_rt::test]
async fn a_leader_paused_past_its_lease_commits_nothing_more_and_comes_back_as_a_standby() {
    let Some(cluster) = PgCluster::start("a_leader_paused_past_its_lease") else { return };
    let url = cluster.database("paused");
    let lease = [("PIXGW_LEASE_MS", "2000"), ("PIXGW_LEASE_RENEW_MS", "500")];
    let mut first = node(&url, &lease, true).await;
    first.creds = read_credentials(&first.data_dir());
    let token = first.demo_token().await;
    first.fund(&token, "100").await;
    let mut second = node(&url, &lease, false).await;
    second.creds = read_credentials(&first.data_dir());
    wait_role(&second.base, "standby", Duration::from_secs(10)).await;
    let pid = first.pid().to_string();
    assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    // The lease runs out on the database's clock; the standby takes over and serves.
    wait_role(&second.base, "leader", Duration::from_secs(15)).await;
    let token2 = second.demo_token().await;
    let (s, paid) = second.post_raw("/api/pix/cash-out", &token2, &cash_out_body("after", "1"), &[]).await;
    assert_eq!(s, 201, "{paid}");
    // A request sent to the paused leader waits in its socket (the kernel takes the
    // connection and the bytes while the process is stopped; once `write_all` returns they
    // are there). When the leader wakes, it must not serve it: its lease ran out.
    let late = {
        use std::io::{Read, Write};
        let body = cash_out_body("late", "1");
        let request = format!(
            "POST /api/pix/cash-out HTTP/1.1\r\nHost: pixgw\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let addr = first.base.trim_start_matches("http://").to_owned();
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        actix_rt::task::spawn_blocking(move || {
            let mut answer = String::new();
            let _ = stream.read_to_string(&mut answer);
            let status = answer.split(' ').nth(1).and_then(|s| s.parse::<u16>().ok()).unwrap_or(0);
            (status, answer)
        })
    };
    assert!(std::process::Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
    let (status, body) = late.await.unwrap();
    assert_eq!(status, 503, "the old leader served after its lease: {body}");
    // It starts again as a standby (same pid) and the new leader keeps serving.
    wait_role(&first.base, "standby", Duration::from_secs(20)).await;
    assert_eq!(first.pid().to_string(), pid, "the same process");
    assert_eq!(second.balance(&token2).await.2, "99.00", "only the new leader's cash-out moved money");
    let (s, dup) = second.post_raw("/api/pix/cash-out", &token2, &cash_out_body("late", "1"), &[]).await;
    assert_eq!(s, 201, "the refused request left its externalId free: {dup}");
}

#[actix_rt::test]
async fn kill_9_of_the_leader_while_cash_outs_stream_loses_nothing_and_the_standby_serves() {
    let Some(cluster) = PgCluster::start("kill_9_of_the_leader") else { return };
    let url = cluster.database("failover");
    let mut a = node(&url, &[], true).await;
    let (creds, _) = ready_to_stream(&mut a).await;
    let mut b = node(&url, &[], false).await;
    b.creds = creds.clone();
    wait_role(&b.base, "standby", Duration::from_secs(10)).await;
    let body_of = |ext: &str| cash_out_body(ext, "1.00");
    // One failover here; benches/failover.sh runs 50 (PIXGW_FAILOVER_CYCLES), alternating:
    // each killed leader is replaced by a fresh standby, which the next cycle's kill promotes.
    let cycles = std::env::var("PIXGW_FAILOVER_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let (mut acked, mut sent) = (HashMap::new(), Vec::new());
    let mut slowest = Duration::ZERO;
    for round in 0..cycles {
        let token = a.demo_token().await;
        let kill_after = 100 + (round * 137) % 400;
        // Each under an Idempotency-Key (its externalId), resent below.
        let (acked_now, sent_now) =
            stream_then_kill_with(&mut a, &token, 16, kill_after, round, &body_of, true).await;
        acked.extend(acked_now);
        sent.extend(sent_now);
        let took = wait_role(&b.base, "leader", Duration::from_secs(20)).await;
        assert!(took < Duration::from_secs(10), "failover {round} took {took:?}");
        slowest = slowest.max(took);
        if round + 1 < cycles {
            let mut fresh = node(&url, &[], false).await;
            fresh.creds = creds.clone();
            wait_role(&fresh.base, "standby", Duration::from_secs(10)).await;
            a = std::mem::replace(&mut b, fresh);
        }
    }
    println!(
        "{cycles} failovers under load, the slowest {slowest:?}, {} cash-outs acknowledged",
        acked.len()
    );
    // The killed leader recorded itself `leader` and never said otherwise: what operators
    // read shows it gone, and one leader.
    let count = |table: &str, role: &str| {
        cluster.sql("failover", &format!("SELECT count(*) FROM {table} WHERE role = '{role}'"))
    };
    assert_eq!(
        count("pixgw_nodes", "leader"),
        (cycles + 1).to_string(),
        "the table alone says every killed one leads"
    );
    assert_eq!(count("pixgw_nodes_now", "leader"), "1");
    assert_eq!(count("pixgw_nodes_now", "gone"), cycles.to_string());
    let token = b.demo_token().await;
    // Every request sent, sent again under its key: none is left 409 ("interrupted") by the
    // kill. One acknowledged answers its payment; one in flight at the kill answers the
    // payment it made, or runs now if it made none.
    let mut resolved = 0;
    for ext in &sent {
        let headers = [("Idempotency-Key", ext.as_str())];
        let (s, b2) = b.post_raw("/api/pix/cash-out", &token, &body_of(ext), &headers).await;
        assert_eq!(s, 201, "{ext}: {b2}");
        if let Some(id) = acked.get(ext) {
            assert_eq!(b2["transactionId"].as_str(), Some(id.as_str()), "{ext}");
        } else {
            resolved += 1;
        }
    }
    println!("{resolved} requests in flight at the kills, each resolved under its key");
    let deadline = Instant::now() + Duration::from_secs(60);
    while b.balance(&token).await.1 != "0.00" {
        assert!(Instant::now() < deadline, "cash-outs still pending after 60 s");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, _, net) = b.balance(&token).await;
    assert!(b.stop().success());
    assert_stored_once(&url, a.creds.account_id, &sent, &acked, &net, "100000").await;
}

#[actix_rt::test]
async fn the_database_stopped_under_load_refuses_writes_at_once_and_service_resumes_by_itself() {
    let Some(cluster) = PgCluster::start("the_database_stopped_under_load") else { return };
    let url = cluster.database("outage");
    let mut app = node(&url, &[], true).await;
    app.creds = read_credentials(&app.data_dir());
    let token = app.demo_token().await;
    app.fund(&token, "1000").await;
    let mut acked = Vec::new();
    for i in 0..50 {
        let (s, b) =
            app.post_raw("/api/pix/cash-out", &token, &cash_out_body(&format!("before-{i}"), "1"), &[]).await;
        assert_eq!(s, 201, "{b}");
        acked.push(format!("before-{i}"));
    }
    cluster.stop_server();
    // Writes answer 503 at once, never hang. (While the node re-executes itself to drop
    // what it held in memory, for a few milliseconds, a connection may be refused: a proxy
    // tries the next node then.) Before the node deposed itself first, its port stayed
    // closed while a lost group was read back, and most of these were refused.
    let mut refused = 0;
    for i in 0..20 {
        let started = Instant::now();
        let sent = app
            .client
            .post(app.url("/api/pix/cash-out"))
            .bearer_auth(&token)
            .content_type("application/json")
            .send_body(cash_out_body(&format!("down-{i}"), "1"))
            .await;
        // The longest a write may wait: the read-back of a group whose connection died
        // under it, bounded, then 503.
        let bound = pixgw::store::postgres::IN_DOUBT_RESOLVE_MAX + Duration::from_secs(1);
        assert!(started.elapsed() < bound, "a request hung for {:?}", started.elapsed());
        if let Ok(res) = sent {
            assert_eq!(res.status().as_u16(), 503);
            refused += 1;
        }
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    // A node that gives up keeps answering (503) until its writes in flight settle; its
    // port is closed only for the moment it re-executes itself.
    assert!(refused >= 15, "only {refused} of 20 requests were answered while the database was down");
    cluster.start_server();
    wait_role(&app.base, "leader", Duration::from_secs(30)).await;
    let token = app.demo_token().await;
    for i in 0..50 {
        let (s, b) =
            app.post_raw("/api/pix/cash-out", &token, &cash_out_body(&format!("after-{i}"), "1"), &[]).await;
        assert_eq!(s, 201, "{b}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.balance(&token).await.1 != "0.00" {
        assert!(Instant::now() < deadline, "cash-outs still pending");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(app.balance(&token).await.2, "900.00", "100 cash-outs of 1.00, none twice, none lost");
    for ext in acked.iter().take(10) {
        let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body(ext, "1"), &[]).await;
        assert_eq!((s, b["code"].as_str()), (400, Some("PIX_DUPLICATE_EXTERNAL_ID")));
    }
}

/// `pixgw load` streams cash-outs while the database is stopped (the hard way) and started
/// again: its check, run once the stream ends, finds every cash-out answered 201 on the
/// server once, resolves those answered 503 or cut by their externalId, and the balance exact.
#[actix_rt::test]
async fn the_database_restarted_while_cash_outs_stream_loses_and_doubles_nothing_as_the_load_tool_checks() {
    let Some(cluster) = PgCluster::start("the_database_restarted_while_cash_outs_stream") else { return };
    let url = cluster.database("restart");
    let mut app = node(&url, &[], true).await;
    app.creds = read_credentials(&app.data_dir());
    let load = std::process::Command::new(bin())
        .args(["load", "--url", &app.base, "--data-dir"])
        .arg(app.data_dir())
        .args(["--warmup", "0s", "--json", "--fund", "100000", "--connections", "8", "--duration", "12s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let token = app.demo_token().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (s, list) = app.get_with("/api/transactions?type=WITHDRAW&size=1", &token).await;
        if s == 200 && list["metadata"]["total"].as_u64().unwrap_or(0) >= 300 {
            break;
        }
        assert!(Instant::now() < deadline, "the load did not get going");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.stop_server();
    // Start it again once the node has seen the outage (it no longer leads).
    let c = client();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let role = match c.get(app.url("/healthz")).send().await {
            Ok(mut res) => res.json::<serde_json::Value>().await.unwrap_or_default()["role"].clone(),
            Err(_) => serde_json::Value::Null,
        };
        if role != "leader" {
            break;
        }
        assert!(Instant::now() < deadline, "the node never noticed the database was gone");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.start_server();
    wait_role(&app.base, "leader", Duration::from_secs(30)).await;
    let out = load.wait_with_output().unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["consistency"]["ok"], true, "{summary:#}");
    assert!(out.status.success());
    let by_status = &summary["byStatus"];
    assert!(by_status["201"].as_u64().unwrap() > 300, "{summary:#}");
    let refused = by_status["503"].as_u64().unwrap_or(0) + by_status["0"].as_u64().unwrap_or(0);
    assert!(refused > 0, "the outage fell within the stream: {summary:#}");
}

fn migrate_cli(from: &std::path::Path, url: &str) -> std::process::Output {
    migrate_cli_with(from, url, None)
}

fn migrate_cli_with(
    from: &std::path::Path,
    url: &str,
    identity: Option<&std::path::Path>,
) -> std::process::Output {
    let mut cmd = std::process::Command::new(crate::helpers::bin());
    cmd.args(["migrate", "--from"]).arg(from).args(["--to", url]).env("RUST_LOG", "warn");
    if let Some(identity) = identity {
        cmd.arg("--identity").arg(identity);
    }
    cmd.output().unwrap()
}

fn said(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The bodies a client reads, without the times they were read at.
async fn reads(app: &TestApp, token: &str) -> Vec<String> {
    let mut out = Vec::new();
    for path in ["/api/balance", "/accounts/balances", "/api/transactions?size=100"] {
        let mut res = app.client.get(app.url(path)).bearer_auth(token).send().await.unwrap();
        assert_eq!(res.status().as_u16(), 200, "{path}");
        out.push(crate::backup::without_read_time(&res.body().limit(1 << 24).await.unwrap()));
    }
    out
}

#[actix_rt::test]
async fn migrate_moves_a_data_dir_or_a_backup_onto_postgres_and_never_into_a_database_with_data() {
    let Some(cluster) = PgCluster::start("migrate") else { return };
    let mut app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let (s, b) =
            app.post_raw("/api/pix/cash-out", &token, &cash_out_body(&format!("m-{i}"), "1.50"), &[]).await;
        assert_eq!(s, 201, "{b}");
        ids.push(b["transactionId"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        app.wait_final(&token, id).await;
    }
    let busy = migrate_cli(&app.data_dir(), &cluster.database("busy"));
    assert!(!busy.status.success() && said(&busy).contains("stop it first"), "{}", said(&busy));
    let backup = tempfile::tempdir().unwrap();
    let out = crate::backup::backup_cli(&app, &backup.path().join("b"));
    assert!(out.status.success(), "{}", said(&out));
    // And one encrypted, which only its identity moves.
    let key = backup.path().join("backup.key");
    let recipient = crate::backup::backup_identity(&key);
    let out = crate::backup::backup_encrypted_cli(&app, &backup.path().join("e"), &recipient);
    assert!(out.status.success(), "{}", said(&out));
    let before = reads(&app, &token).await;
    assert!(app.stop().success());
    let locked = migrate_cli(&backup.path().join("e"), &cluster.database("from_encrypted"));
    assert!(!locked.status.success() && said(&locked).contains("--identity"), "{}", said(&locked));

    for (source, db, identity) in [
        (app.data_dir(), "from_dir", None),
        (backup.path().join("b"), "from_backup", None),
        // The database the refused run above was pointed at: it wrote nothing there.
        (backup.path().join("e"), "from_encrypted", Some(key.as_path())),
    ] {
        let url = if identity.is_some() { cluster.url(db) } else { cluster.database(db) };
        let out = migrate_cli_with(&source, &url, identity);
        assert!(out.status.success(), "{}", said(&out));
        let mut leader = node(&url, &[], true).await;
        leader.creds = read_credentials(&app.data_dir());
        let token = leader.demo_token().await;
        assert_eq!(reads(&leader, &token).await, before, "{db}: what a client reads changed");
        let (s, new) =
            leader.post_raw("/api/pix/cash-out", &token, &cash_out_body("after", "1.00"), &[]).await;
        assert_eq!(s, 201, "{new}");
        assert!(!ids.contains(&new["transactionId"].as_str().unwrap().to_owned()), "an id handed out twice");
        let (s, refused) = leader.admin("GET", "/admin/backup", None).await;
        assert_eq!((s, refused["code"].as_str()), (409, Some("CONFLICT")), "{refused}");
        let live = migrate_cli(&source, &url);
        assert!(
            !live.status.success() && said(&live).contains("holds this database's lease"),
            "{}",
            said(&live)
        );
        assert!(leader.stop().success());
        let full = migrate_cli(&source, &url);
        assert!(
            !full.status.success() && said(&full).contains("already holds pixgw data"),
            "{}",
            said(&full)
        );
    }
}

/// A database that accepts TLS only: a node whose URL asks for verified TLS against the
/// server's CA (`sslmode=verify-full&sslrootcert=`) serves over TLS; a plain URL, or TLS
/// against another CA, never connects.
#[actix_rt::test]
async fn a_node_reaches_a_database_over_verified_tls_and_never_one_it_cannot_verify() {
    let server =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let stranger = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let Some(cluster) = PgCluster::start_tls(
        "a_node_reaches_a_database_over_verified_tls",
        &server.cert.pem(),
        &server.signing_key.serialize_pem(),
    ) else {
        return;
    };
    let url = cluster.database("tls");
    let dir = tempfile::tempdir().unwrap();
    let (ca, other) = (dir.path().join("ca.pem"), dir.path().join("other.pem"));
    std::fs::write(&ca, server.cert.pem()).unwrap();
    std::fs::write(&other, stranger.cert.pem()).unwrap();

    let plain = Pg::new(PgUrl::parse(&url).unwrap(), "plain".into()).unwrap();
    let refused = plain.migrate().unwrap_err().to_string();
    assert!(refused.contains("pg_hba.conf") && refused.contains("no encryption"), "{refused}");
    let forged = format!("{url}?sslmode=verify-full&sslrootcert={}", other.display());
    let untrusted = Pg::new(PgUrl::parse(&forged).unwrap(), "untrusted".into()).unwrap();
    let refused = untrusted.migrate().unwrap_err().to_string();
    assert!(refused.contains("invalid peer certificate"), "{refused}");

    let verified = format!("{url}?sslmode=verify-full&sslrootcert={}", ca.display());
    let mut leader = node(&verified, &[], true).await;
    leader.creds = read_credentials(&leader.data_dir());
    let token = leader.demo_token().await;
    leader.fund(&token, "50").await;
    let (s, out) = leader.post_raw("/api/pix/cash-out", &token, &cash_out_body("tls-1", "5"), &[]).await;
    assert_eq!(s, 201, "{out}");
    let of_pixgw = |ssl: bool| {
        cluster.sql(
            "tls",
            &format!(
                "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                 WHERE a.datname = 'tls' AND a.application_name = 'pixgw' AND s.ssl = {ssl}"
            ),
        )
    };
    assert_ne!(of_pixgw(true), "0", "the node's connections are encrypted");
    assert_eq!(of_pixgw(false), "0");
    assert!(leader.stop().success());
}

#[actix_rt::test]
async fn a_recurring_charge_on_postgres_is_settled_by_the_node_that_took_over() {
    use crate::cobr::{approved, charge, cobr, cobr_body, net, plus, seconds_to, today};
    let Some(cluster) = PgCluster::start("cobr_on_postgres") else { return };
    let url = cluster.database("cobr");
    let mut leader = node(&url, &[], true).await;
    leader.creds = read_credentials(&leader.data_dir());
    let token = leader.demo_token().await;
    let id = approved(&leader, &token, "NAO_PERMITE").await;
    let due = today() + chrono::Duration::days(2);
    let txid = "onpostgres00000000000000000001";
    charge(&leader, &token, txid, cobr_body(&id, due), "PAY").await;
    let before = net(&leader).await;
    let standby = node(&url, &[], false).await;
    wait_role(&standby.base, "standby", Duration::from_secs(10)).await;
    assert!(leader.stop().success());
    wait_role(&standby.base, "leader", Duration::from_secs(10)).await;
    let mut standby = standby;
    standby.creds = read_credentials(&leader.data_dir());
    // Nothing touches the account: the new leader resumes it from the index of charges
    // still ATIVA, and its timer makes the attempt.
    standby.advance(seconds_to(due, 0)).await;
    assert_eq!(cobr(&standby, txid).await["status"], "CONCLUIDA");
    assert_eq!(net(&standby).await, plus(before, "30"));
}
