//! A rolling upgrade of two nodes on PostgreSQL, as docs/deploy.md "Rolling upgrade of two
//! nodes on PostgreSQL" tells an operator to do it: from the previous release's binary
//! (`PIXGW_PREVIOUS_BIN`, which `.ci/run` builds from the commit `.ci/previous-release`
//! names) to this build, one node at a time, while cash-outs stream under their
//! Idempotency-Keys. The new release migrates the schema while the old leader serves on it.
//!
//! Outside CI a missing previous binary skips this test, saying so; under CI (`CI=true`) it
//! is a failure.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;

use crate::helpers::{bin, cash_out_body, client, start_process, Options, TestApp};
use crate::pg_cluster::PgCluster;
use crate::postgres::{assert_stored_once, ready_to_stream, wait_role};

/// The previous release's binary, if there is one to test against.
fn previous_bin() -> Option<PathBuf> {
    let path = std::env::var_os("PIXGW_PREVIOUS_BIN").map(PathBuf::from).filter(|p| p.exists());
    if path.is_none() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "PIXGW_PREVIOUS_BIN (the previous release's binary, built by .ci/run) is required under CI"
        );
        eprintln!("PIXGW_PREVIOUS_BIN is not set: the rolling upgrade is skipped outside CI");
    }
    path
}

/// What `binary --version` says.
fn version_of(binary: &Path) -> String {
    let out = Command::new(binary).arg("--version").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Starts a node named `name` of `binary` on the data dir `dir` (its own, kept across its
/// upgrade); answers once `/healthz` says `role`.
async fn start_node(
    binary: &Path,
    name: &str,
    url: &str,
    dir: &Arc<tempfile::TempDir>,
    role: &str,
) -> TestApp {
    let env = vec![
        ("PIXGW_DATABASE_URL".to_owned(), url.to_owned()),
        ("PIXGW_SIM_SETTLE_MS".to_owned(), "20".to_owned()),
        ("PIXGW_NODE_NAME".to_owned(), name.to_owned()),
    ];
    let opts = Options { env, binary: Some(binary.to_path_buf()), ..Options::default() };
    let (child, base) = start_process(dir.path(), &opts);
    wait_role(&base, role, Duration::from_secs(30)).await;
    TestApp::adopt(base, Arc::clone(dir), child)
}

/// Stops a node with SIGTERM off the test's thread, so the cash-outs go on meanwhile.
async fn stop_node(mut node: TestApp) {
    let mut child = node.take_child().unwrap();
    let status = actix_rt::task::spawn_blocking(move || {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        child.wait().unwrap()
    })
    .await
    .unwrap();
    assert!(status.success(), "a node did not stop cleanly: {status}");
}

/// Sends one cash-out under its key to whichever node answers 201, trying each in turn
/// (a standby answers 503, a stopping node may refuse the connection).
async fn pay(bases: &RefCell<Vec<String>>, token: &str, ext: &str) -> String {
    let c = client();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let targets = bases.borrow().clone();
        for base in targets {
            let sent = c
                .post(format!("{base}/api/pix/cash-out"))
                .bearer_auth(token)
                .content_type("application/json")
                .insert_header(("Idempotency-Key", ext))
                .send_body(cash_out_body(ext, "1.00"))
                .await;
            if let Ok(mut res) = sent {
                let status = res.status().as_u16();
                let body: serde_json::Value = res.json().await.unwrap_or_default();
                if status == 201 {
                    return body["transactionId"].as_str().unwrap().to_owned();
                }
                assert!(status == 503 || status == 504, "{ext}: {status} {body}");
            }
        }
        assert!(Instant::now() < deadline, "{ext}: no node took it within 60 s");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `acked` holds at least `n` more cash-outs than it does now.
async fn more_acknowledged(acked: &RefCell<HashMap<String, String>>, n: usize) {
    let target = acked.borrow().len() + n;
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.borrow().len() < target {
        assert!(Instant::now() < deadline, "cash-outs stopped being acknowledged");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_rt::test]
async fn two_nodes_are_upgraded_one_at_a_time_while_cash_outs_stream_and_nothing_is_lost() {
    let Some(previous) = previous_bin() else { return };
    let current = PathBuf::from(bin());
    let (old_version, new_version) = (version_of(&previous), version_of(&current));
    assert_ne!(old_version, new_version, "the previous release must be another release");
    let Some(cluster) = PgCluster::start("rolling_upgrade") else { return };
    let url = cluster.database("upgrade");
    let (dir_a, dir_b) = (Arc::new(tempfile::tempdir().unwrap()), Arc::new(tempfile::tempdir().unwrap()));

    // Both nodes on the previous release; the schema is the one it made.
    let mut a = start_node(&previous, "node-a", &url, &dir_a, "leader").await;
    let (creds, token) = ready_to_stream(&mut a).await;
    let b = start_node(&previous, "node-b", &url, &dir_b, "standby").await;
    let schema = || cluster.sql("upgrade", "SELECT max(version) FROM pixgw_schema");
    assert_eq!(schema(), "1");

    let bases = RefCell::new(vec![a.base.clone(), b.base.clone()]);
    let (acked, sent) = (RefCell::new(HashMap::new()), RefCell::new(Vec::new()));
    let done = Cell::new(false);
    let workers = (0..8).map(|w| {
        let (bases, acked, sent, done, token) = (&bases, &acked, &sent, &done, &token);
        async move {
            for i in 0.. {
                if done.get() {
                    break;
                }
                let ext = format!("up-w{w}-{i}");
                sent.borrow_mut().push(ext.clone());
                let id = pay(bases, token, &ext).await;
                acked.borrow_mut().insert(ext, id);
            }
        }
    });
    let upgrade = async {
        more_acknowledged(&acked, 50).await;
        // 1. The standby: stopped, replaced, started. The new release migrates the schema
        //    while the old leader goes on serving on it.
        stop_node(b).await;
        let b = start_node(&current, "node-b", &url, &dir_b, "standby").await;
        bases.borrow_mut()[1] = b.base.clone();
        assert_eq!(schema(), pixgw::store::postgres::schema::latest().to_string());
        more_acknowledged(&acked, 50).await;
        // 2. The leader: stopped (it ends its lease), so the upgraded standby takes over;
        //    then replaced and started, as the new standby.
        let old_leader_base = a.base.clone();
        stop_node(a).await;
        wait_role(&b.base, "leader", Duration::from_secs(20)).await;
        let a = start_node(&current, "node-a", &url, &dir_a, "standby").await;
        {
            let mut next = bases.borrow_mut();
            assert_eq!(next[0], old_leader_base);
            next[0] = a.base.clone();
        }
        more_acknowledged(&acked, 50).await;
        done.set(true);
        (a, b)
    };
    let ((mut a, mut b), _) = futures::join!(upgrade, join_all(workers));
    println!("{} cash-outs acknowledged through the rolling upgrade", acked.borrow().len());

    // Every request sent, sent again under its key, answers the payment it made.
    let (sent, acked) = (sent.into_inner(), acked.into_inner());
    b.creds = creds.clone();
    for ext in &sent {
        let headers = [("Idempotency-Key", ext.as_str())];
        let (s, again) = b.post_raw("/api/pix/cash-out", &token, &cash_out_body(ext, "1.00"), &headers).await;
        assert_eq!((s, again["transactionId"].as_str()), (201, acked.get(ext).map(String::as_str)), "{ext}");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while b.balance(&token).await.1 != "0.00" {
        assert!(Instant::now() < deadline, "cash-outs still pending after 60 s");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, _, net) = b.balance(&token).await;

    // Both nodes say the new release, the upgraded standby leads.
    let nodes = cluster
        .sql("upgrade", "SELECT name || ' ' || release || ' ' || role FROM pixgw_nodes_now ORDER BY name");
    let release = new_version.trim_start_matches("pixgw ");
    assert_eq!(nodes, format!("node-a {release} standby\nnode-b {release} leader"), "{nodes}");
    assert!(a.stop().success());
    assert!(b.stop().success());
    assert_stored_once(&url, creds.account_id, &sent, &acked, &net, "100000").await;
}
