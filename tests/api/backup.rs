//! Backups of the embedded store: `pixgw backup` from a server while cash-outs stream,
//! `pixgw restore` into a new data dir, the restored server compared with the original.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

use futures::future::join_all;
use pixgw::domain::ids::AccountId;
use pixgw::domain::money::Money;
use pixgw::domain::transaction::{TxKind, TxStatus};
use pixgw::store::{JournalOptions, Repo, Storage};

use crate::helpers::{bin, cash_out_body, start_process, Options, TestApp};

/// Runs `pixgw backup` against `app` into `to`.
pub fn backup_cli(app: &TestApp, to: &Path) -> Output {
    Command::new(bin())
        .args(["backup", "--url", &app.base, "--to"])
        .arg(to)
        .env("PIXGW_ADMIN_TOKEN", &app.creds.admin_token)
        .output()
        .unwrap()
}

pub fn restore_cli(from: &Path, data_dir: &Path) -> Output {
    restore_cli_with(from, data_dir, None)
}

/// Runs `pixgw restore`, with `--identity` when one is given.
fn restore_cli_with(from: &Path, data_dir: &Path, identity: Option<&Path>) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(["restore", "--from"]).arg(from).arg("--data-dir").arg(data_dir);
    if let Some(identity) = identity {
        cmd.arg("--identity").arg(identity);
    }
    cmd.output().unwrap()
}

/// Runs `pixgw backup --encrypt-to recipient` against `app` into `to`.
pub fn backup_encrypted_cli(app: &TestApp, to: &Path, recipient: &str) -> Output {
    Command::new(bin())
        .args(["backup", "--url", &app.base, "--encrypt-to", recipient, "--to"])
        .arg(to)
        .env("PIXGW_ADMIN_TOKEN", &app.creds.admin_token)
        .output()
        .unwrap()
}

/// Every entry under `dir`, `dir` too, carries no permission for the group or others.
fn assert_owner_only(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(p) = pending.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!(meta.permissions().mode() & 0o077, 0, "{} is readable by others", p.display());
        if meta.is_dir() {
            pending.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Sends cash-outs from `workers` clients, `each` per client, or until `stop` is set when
/// `each` is `None`. Answers the acknowledged (externalId, transactionId) pairs.
async fn stream(
    app: &TestApp,
    token: &str,
    workers: usize,
    each: Option<usize>,
    phase: &str,
    stop: &Cell<bool>,
    sent: &RefCell<Vec<String>>,
) -> HashMap<String, String> {
    let acked = RefCell::new(HashMap::new());
    let work = (0..workers).map(|w| {
        let acked = &acked;
        async move {
            for i in 0.. {
                if each.is_some_and(|n| i >= n) || (each.is_none() && stop.get()) {
                    break;
                }
                let ext = format!("{phase}-w{w}-{i}");
                sent.borrow_mut().push(ext.clone());
                let (s, b) =
                    app.post_raw("/api/pix/cash-out", token, &cash_out_body(&ext, "1.00"), &[]).await;
                assert_eq!(s, 201, "{b}");
                acked.borrow_mut().insert(ext, b["transactionId"].as_str().unwrap().to_owned());
            }
        }
    });
    join_all(work).await;
    acked.into_inner()
}

/// Starts a server on a restored data dir, with the original's Demo credentials (a backup
/// holds the store; the credentials file of the first start is the operator's).
fn serve_restored(original: &TestApp, restored: &Path) -> TestApp {
    let demo = restored.join("demo");
    std::fs::create_dir_all(&demo).unwrap();
    for f in std::fs::read_dir(original.data_dir().join("demo")).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), demo.join(f.file_name())).unwrap();
    }
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let (child, base) = start_process(restored, &fast());
    let mut app = TestApp::adopt(base, dir, child);
    app.creds = original.creds.clone();
    app
}

/// A response with the times it was read at (`consultedAt`, a balance's `eventDate`) left
/// out; numbers keep their text, so amounts still compare to the digit.
pub fn without_read_time(body: &[u8]) -> String {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("consultedAt");
                m.remove("eventDate");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v: serde_json::Value = serde_json::from_slice(body).unwrap();
    strip(&mut v);
    v.to_string()
}

fn fast() -> Options {
    Options { env: vec![("PIXGW_SIM_SETTLE_MS".into(), "20".into())], ..Options::default() }
}

async fn settle(app: &TestApp, token: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while app.balance(token).await.1 != "0.00" {
        assert!(std::time::Instant::now() < deadline, "cash-outs still pending after 60 s");
        actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Reads the stopped data dir: every cash-out once, each one sent, and the books balance
/// (funding = what is available + what was paid out).
fn books_balance(
    dir: &Path,
    account: u64,
    sent: &[String],
    funding: &str,
    net: &str,
) -> HashMap<String, u64> {
    let storage = Storage::open(dir, 16, JournalOptions::default(), Repo::layout()).unwrap();
    let repo = Repo::new(&storage);
    let account = AccountId::new(account).unwrap();
    let txs = repo.transactions_of(account).unwrap();
    let mut seen = HashMap::new();
    for t in txs.iter().filter(|t| t.kind == TxKind::CashOut) {
        let ext = t.external_id.clone().unwrap();
        assert!(seen.insert(ext.clone(), t.local_id).is_none(), "{ext} appears twice");
        assert!(sent.contains(&ext), "{ext} was never sent");
    }
    let sum = |f: &dyn Fn(&&pixgw::domain::transaction::Transaction) -> bool| {
        txs.iter()
            .filter(f)
            .try_fold(Money::ZERO, |acc, t| acc.checked_add(t.value)?.checked_add(t.fee))
            .unwrap()
    };
    let funded = sum(&|t| t.kind == TxKind::PixIn);
    let paid = sum(&|t| t.kind == TxKind::CashOut && t.status == TxStatus::Confirmed);
    assert_eq!(funded.to_cents_string(), funding);
    let available = Money::parse(net).unwrap();
    assert_eq!(available.checked_add(paid), Some(funded), "available {net} + paid {paid} != funded {funded}");
    seen
}

#[actix_rt::test]
async fn a_backup_taken_while_cash_outs_stream_restores_every_acknowledged_one_and_a_quiet_one_is_identical()
{
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100000").await;
    let limits = serde_json::json!({"limits": {"daily": "100000", "nightly": "100000"}});
    let path = format!("/admin/accounts/{}", app.creds.account_id);
    assert_eq!(app.admin("PATCH", &path, Some(limits)).await.0, 200);
    let sent = RefCell::new(Vec::new());
    let never = Cell::new(false);
    let before = stream(&app, &token, 8, Some(40), "before", &never, &sent).await;

    // The backup runs while eight clients keep paying; they stop once it is written.
    let work = tempfile::tempdir().unwrap();
    let streamed = work.path().join("streamed");
    let (done_tx, done_rx) = futures::channel::oneshot::channel();
    let (base, admin_token, to) = (app.base.clone(), app.creds.admin_token.clone(), streamed.clone());
    std::thread::spawn(move || {
        let out = Command::new(bin())
            .args(["backup", "--url", &base, "--to"])
            .arg(&to)
            .env("PIXGW_ADMIN_TOKEN", admin_token)
            .output()
            .unwrap();
        let _ = done_tx.send(out);
    });
    let stop = Cell::new(false);
    let (during, out) = futures::join!(stream(&app, &token, 8, None, "during", &stop, &sent), async {
        let out = done_rx.await.unwrap();
        stop.set(true);
        out
    });
    assert!(out.status.success(), "{}", text(&out));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(streamed.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["records"].as_u64().unwrap() > 0, "no journal record was copied: {manifest}");
    assert!(!during.is_empty());
    settle(&app, &token).await;

    // A quiet server's backup, and a second backup into a directory already used is refused.
    let quiet = work.path().join("quiet");
    let out = backup_cli(&app, &quiet);
    assert!(out.status.success(), "{}", text(&out));
    let again = backup_cli(&app, &quiet);
    assert!(!again.status.success() && text(&again).contains("not empty"), "{}", text(&again));
    // The backup holds secrets (webhook secrets, the token-signing key), and so does the
    // server's data dir: nothing of either is readable by anyone but their owner.
    for dir in [quiet.clone(), streamed.clone(), app.data_dir().to_path_buf()] {
        assert_owner_only(&dir);
    }

    // The route is the admin's; a manifest of another backup beside a stream is refused.
    let res = app.client.get(app.url("/admin/backup")).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 401);
    let mixed = work.path().join("mixed");
    std::fs::create_dir(&mixed).unwrap();
    std::fs::copy(quiet.join("backup.pixgw"), mixed.join("backup.pixgw")).unwrap();
    std::fs::copy(streamed.join("manifest.json"), mixed.join("manifest.json")).unwrap();
    let refused = restore_cli(&mixed, &work.path().join("never"));
    assert!(!refused.status.success() && text(&refused).contains("manifest describes"), "{}", text(&refused));
    assert!(!work.path().join("never").exists());

    // Restored from the streamed backup: every cash-out acknowledged before it began is there,
    // nothing is there twice or unsent, and the books balance once the pending ones settle.
    let restored = work.path().join("restored");
    let out = restore_cli(&streamed, &restored);
    assert!(out.status.success(), "{}", text(&out));
    let refused = restore_cli(&streamed, &restored);
    assert!(!refused.status.success() && text(&refused).contains("not empty"), "{}", text(&refused));
    let mut copy = serve_restored(&app, &restored);
    let t = copy.demo_token().await;
    settle(&copy, &t).await;
    let (_, _, net) = copy.balance(&t).await;
    assert!(copy.stop().success());
    let seen = books_balance(&restored, app.creds.account_id, &sent.borrow(), "100000.00", &net);
    for ext in before.keys() {
        assert!(seen.contains_key(ext), "{ext} was acknowledged before the backup and is not in it");
    }

    // Restored from the quiet backup: the same balances and list, to the byte; new ids
    // never reuse an old one.
    let restored = work.path().join("restored-quiet");
    let restored_at = chrono::Utc::now();
    let out = restore_cli(&quiet, &restored);
    assert!(out.status.success(), "{}", text(&out));
    assert_owner_only(&restored);
    let copy = serve_restored(&app, &restored);
    let t = copy.demo_token().await;
    for path in [
        "/api/balance",
        "/accounts/balances",
        "/api/transactions?size=100",
        "/api/transactions?page=3&size=7",
    ] {
        let body = |app: &TestApp, token: String| {
            let req = app.client.get(app.url(path)).bearer_auth(token);
            async move { req.send().await.unwrap().body().limit(1 << 24).await.unwrap() }
        };
        let (a, b) = (body(&app, token.clone()).await, body(&copy, t.clone()).await);
        assert_eq!(without_read_time(&a), without_read_time(&b), "{path} differs after the restore");
    }
    let (s, new) = copy.post_raw("/api/pix/cash-out", &t, &cash_out_body("after-restore", "1.00"), &[]).await;
    assert_eq!(s, 201, "{new}");
    let new_id = new["transactionId"].as_str().unwrap();
    assert!(before.values().chain(during.values()).all(|id| id != new_id), "id {new_id} handed out twice");
    // The original went on after the backup; the restored server's numeric ids start past
    // any it can have handed out since (a floor that grows faster than any server's ids).
    let (s, later) =
        app.post_raw("/api/pix/cash-out", &token, &cash_out_body("original-after-backup", "1.00"), &[]).await;
    assert_eq!(s, 201, "{later}");
    let numeric = |app: &TestApp, token: String, external: &'static str| {
        let req = app.client.get(app.url(&format!("/api/transactions/{external}"))).bearer_auth(token);
        async move { crate::helpers::send(req, None).await.1["id"].as_u64().unwrap() }
    };
    let original_id = numeric(&app, token.clone(), "original-after-backup").await;
    let restored_id = numeric(&copy, t.clone(), "after-restore").await;
    assert!(restored_id >= pixgw::domain::ids::restored_local_id_floor(restored_at), "{restored_id}");
    assert!(restored_id > original_id, "{restored_id} vs {original_id}");
}

/// Runs `pixgw keygen backup --out path`; answers the recipient it prints.
pub fn backup_identity(path: &Path) -> String {
    let out = Command::new(bin()).args(["keygen", "backup", "--out"]).arg(path).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let recipient = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_owned();
    assert!(recipient.starts_with("age1"), "{}", text(&out));
    recipient
}

/// The `age` tool, which must be installed under CI (`.ci/run` installs it).
fn age_tool() -> bool {
    let found = Command::new("age").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(std::env::var("CI").map_or(true, |v| v != "true"), "age is required under CI");
        eprintln!("age is not installed: its decryption of the backup is skipped outside CI");
    }
    found
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[actix_rt::test]
async fn an_encrypted_backup_holds_nothing_in_clear_and_restores_only_with_its_identity() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "1000").await;
    let sent = RefCell::new(Vec::new());
    let acked = stream(&app, &token, 2, Some(5), "sealed", &Cell::new(false), &sent).await;
    settle(&app, &token).await;
    let work = tempfile::tempdir().unwrap();
    let (id, other) = (work.path().join("backup.key"), work.path().join("other.key"));
    let recipient = backup_identity(&id);
    backup_identity(&other);
    let again = Command::new(bin()).args(["keygen", "backup", "--out"]).arg(&id).output().unwrap();
    assert!(!again.status.success(), "an identity file was overwritten");

    // A recipient that is not one is refused before anything is written.
    let bad = work.path().join("bad");
    let out = Command::new(bin())
        .args(["backup", "--url", &app.base, "--encrypt-to", "age1notakey", "--to"])
        .arg(&bad)
        .env("PIXGW_ADMIN_TOKEN", &app.creds.admin_token)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--encrypt-to") && !bad.exists(), "{}", text(&out));

    let to = work.path().join("encrypted");
    let out = backup_encrypted_cli(&app, &to, &recipient);
    assert!(out.status.success() && text(&out).contains("encrypted"), "{}", text(&out));
    let names: Vec<String> = std::fs::read_dir(&to)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["backup.pixgw.age", "manifest.json"]);
    assert_owner_only(&to);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(to.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["encryption"], "age", "{manifest}");
    let sealed = std::fs::read(to.join("backup.pixgw.age")).unwrap();
    assert!(sealed.starts_with(b"age-encryption.org/v1\n"));
    assert_eq!(manifest["bytes"].as_u64(), Some(sealed.len() as u64));
    // Nothing of the store shows through: not the stream's magic, a webhook secret or a payment.
    let some_payment = acked.keys().next().unwrap().clone();
    for clear in [b"PIXGWBAK".as_slice(), app.creds.webhook_secret.as_bytes(), some_payment.as_bytes()] {
        assert!(!contains(&sealed, clear), "{} is in the encrypted backup", String::from_utf8_lossy(clear));
    }

    // Without an identity, or with one the backup was not encrypted to, nothing is restored.
    let target = work.path().join("restored");
    let out = restore_cli(&to, &target);
    assert!(!out.status.success() && text(&out).contains("--identity"), "{}", text(&out));
    let out = restore_cli_with(&to, &target, Some(&other));
    assert!(!out.status.success() && text(&out).contains("matches"), "{}", text(&out));
    assert!(!target.exists());

    let out = restore_cli_with(&to, &target, Some(&id));
    assert!(out.status.success(), "{}", text(&out));
    assert_owner_only(&target);
    let mut copy = serve_restored(&app, &target);
    let t = copy.demo_token().await;
    assert_eq!(copy.balance(&t).await, app.balance(&token).await);
    let (s, list) = copy.get_with("/api/transactions?size=100", &t).await;
    assert_eq!(s, 200);
    assert!(list.to_string().contains(&some_payment), "{list}");
    assert!(copy.stop().success());

    // The age tool itself decrypts it, with the identity file pixgw wrote, to the clear stream.
    if age_tool() {
        let out = Command::new("age")
            .arg("-d")
            .arg("-i")
            .arg(&id)
            .arg(to.join("backup.pixgw.age"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        assert!(out.stdout.starts_with(b"PIXGWBAK") && contains(&out.stdout, some_payment.as_bytes()));
    }
}
