//! The journal through the real binary: a damaged journal refuses to start and says where,
//! a torn tail is cut and the server starts, a data dir of the release before the journal
//! (sled only) is read as it is, and one of the release before the binary records, or of the
//! pages' older shape, is migrated once at start.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use pixgw::store::{
    codec, keys, paged, Batch, JournalOptions, PagedStore, Paging, SledStore, Store, KEY_APPLIED_SEQ,
};

use crate::helpers::{cash_out_body, serve_to_completion, Options, TestApp};

fn fast() -> Options {
    Options { test_clock: true, env: vec![("PIXGW_SIM_SETTLE_MS".into(), "20".into())], ..Default::default() }
}

/// The journal's segments, oldest first.
fn segments(data_dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir.join("journal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    v.sort();
    v
}

/// Record boundaries of a segment: (start, end) of each record, read from the framing.
fn records(path: &Path) -> Vec<(usize, usize)> {
    let data = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut at = 32;
    while at + 16 <= data.len() && data[at..at + 16].iter().any(|b| *b != 0) {
        let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        out.push((at, at + 16 + len));
        at += 16 + len;
    }
    out
}

fn patch(path: &Path, offset: usize, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset as u64)).unwrap();
    f.write_all(bytes).unwrap();
}

/// Runs a server that cashes out a few times and is killed with SIGKILL.
async fn write_then_kill() -> TestApp {
    let mut app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    for i in 0..5 {
        let (s, b) =
            app.post_raw("/api/pix/cash-out", &token, &cash_out_body(&format!("j{i}"), "1"), &[]).await;
        assert_eq!(s, 201, "{b}");
    }
    let mut child = app.take_child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    app
}

#[actix_rt::test]
async fn a_damaged_journal_refuses_to_start_and_names_the_file_and_offset() {
    let app = write_then_kill().await;
    let first = segments(&app.data_dir())[0].clone();
    let recs = records(&first);
    assert!(recs.len() >= 3, "records in the first segment: {recs:?}");
    // A byte in the middle of the second record: valid ones follow, so it is damage.
    let (start, end) = recs[1];
    patch(&first, (start + end) / 2, &[0xA5]);
    let out = serve_to_completion(&app.data_dir());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let name = first.file_name().unwrap().to_string_lossy().into_owned();
    assert!(stderr.contains(&name) && stderr.contains(&format!("offset {start}")), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"), "it must not serve");
}

#[actix_rt::test]
async fn a_torn_last_record_is_cut_and_everything_before_it_is_served() {
    let mut app = write_then_kill().await;
    let seg = segments(&app.data_dir()).into_iter().rev().find(|p| !records(p).is_empty()).unwrap();
    let recs = records(&seg);
    let (start, end) = *recs.last().unwrap();
    // As a crash in the middle of the append leaves it: the record's second half is zeros.
    patch(&seg, (start + end) / 2, &vec![0u8; end - (start + end) / 2]);
    app.start_again(&fast());
    let token = app.demo_token().await;
    // The server serves, from the records before the torn one: the funding is there, and no
    // more than the five cash-outs left the account.
    let (gross, blocked, net) = app.balance(&token).await;
    let num = |t: &str| t.trim_matches('"').parse::<f64>().unwrap();
    assert!((95.0..=100.0).contains(&num(&gross)), "gross balance {gross}");
    assert!((95.0..=100.0).contains(&(num(&net) + num(&blocked))), "net {net} + blocked {blocked}");
    assert_eq!(records(&seg)[..recs.len() - 1], recs[..recs.len() - 1], "the records before it are kept");
}

#[actix_rt::test]
async fn a_data_dir_of_the_release_before_the_journal_is_read_as_it_is() {
    let mut app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (s, out) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("before", "10"), &[]).await;
    assert_eq!(s, 201, "{out}");
    let id = out["transactionId"].as_str().unwrap().to_owned();
    app.wait_final(&token, &id).await;
    assert!(app.stop().success());
    // The previous release kept everything in sled and had no journal: make the data dir so.
    {
        let sled = SledStore::open(&app.data_dir().join("db")).unwrap();
        let mut b = Batch::default();
        b.delete(KEY_APPLIED_SEQ);
        sled.apply(&b).unwrap();
        sled.flush().unwrap();
    }
    std::fs::remove_dir_all(app.data_dir().join("journal")).unwrap();
    app.start_again(&fast());
    let token = app.demo_token().await;
    assert_eq!(app.balance(&token).await, ("90.00".into(), "0.00".into(), "90.00".into()));
    let (s, t) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
    assert_eq!((s, t["externalId"].as_str()), (200, Some("before")));
    // It goes on writing, now through the journal.
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("after", "5"), &[]).await;
    assert_eq!(s, 201, "{b}");
    assert!(!segments(&app.data_dir()).is_empty());
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("before", "10"), &[]).await;
    assert_eq!((s, b["code"].as_str()), (400, Some("PIX_DUPLICATE_EXTERNAL_ID")));
}

/// Makes the records of `db` as the release before the binary format wrote them: JSON, a
/// transactionId that carries nothing, every transactionId and end-to-end id indexed, every
/// key on its own (no pages), and no record format mark. Answers the transactionIds it gave,
/// by end-to-end id.
fn as_the_json_release_wrote_it(db: &Path) -> std::collections::HashMap<String, String> {
    let raw: Arc<dyn Store> = Arc::new(SledStore::open(db).unwrap());
    let sled = PagedStore::open(raw.clone(), pixgw::store::keys::PAGES).unwrap();
    let mut b = Batch::default();
    for prefix in ["tlist/", "whlog/"] {
        for (k, v) in sled.scan_prefix(prefix.as_bytes()).unwrap() {
            b.put(k, v);
        }
    }
    for (k, _) in raw.scan_prefix(pixgw::store::paged::PAGE_PREFIX).unwrap() {
        b.delete(k);
    }
    let mut ids = std::collections::HashMap::new();
    for (k, v) in sled.scan_prefix(b"tx/").unwrap() {
        let mut tx = codec::decode_transaction(&v).unwrap();
        tx.transaction_id = uuid::Uuid::new_v4();
        let local = tx.local_id.to_be_bytes().to_vec();
        b.put(format!("txid/{}", tx.transaction_id).into_bytes(), local.clone());
        b.put(format!("e2e/{}", tx.end_to_end_id).into_bytes(), local);
        ids.insert(tx.end_to_end_id.clone(), tx.transaction_id.to_string());
        b.put(k, serde_json::to_vec(&tx).unwrap());
    }
    for (k, v) in sled.scan_prefix(b"ledger/").unwrap() {
        b.put(k, serde_json::to_vec(&codec::decode_ledger(&v).unwrap()).unwrap());
    }
    for (k, v) in sled.scan_prefix(b"outbox/").unwrap() {
        let e = codec::decode_event(&v).unwrap();
        let old = serde_json::json!({
            "accountId": e.account_id, "localId": e.local_id, "eventType": e.event_type,
            "createdAt": e.created_at, "payload": e.payload(),
        });
        b.put(k, serde_json::to_vec(&old).unwrap());
    }
    b.delete(pixgw::store::migrate::KEY_RECORD_FORMAT);
    raw.apply(&b).unwrap();
    raw.flush().unwrap();
    ids
}

#[actix_rt::test]
async fn a_data_dir_of_the_json_release_is_migrated_once_and_its_old_ids_still_work() {
    let mut app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (s, pix_in) = app.post_raw("/sandbox/pix-in", &token, r#"{"amount": 100}"#, &[]).await;
    assert_eq!(s, 201, "{pix_in}");
    let (s, out) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("before", "10"), &[]).await;
    assert_eq!(s, 201, "{out}");
    let paid = app.wait_final(&token, out["transactionId"].as_str().unwrap()).await;
    assert!(app.stop().success());
    let old_ids = as_the_json_release_wrote_it(&app.data_dir().join("db"));
    let old_cash_out = &old_ids[paid["endToEndId"].as_str().unwrap()];

    app.start_again(&fast());
    let token = app.demo_token().await;
    assert_eq!(app.balance(&token).await, ("90.00".into(), "0.00".into(), "90.00".into()));
    // The old transactionId and the received PIX's end-to-end id still find their records.
    let (s, t) = app.get_with(&format!("/api/transactions/{old_cash_out}"), &token).await;
    assert_eq!(
        (s, t["externalId"].as_str(), t["status"].as_str()),
        (200, Some("before"), Some("CONFIRMED")),
        "{t}"
    );
    let e2e = pix_in["endToEndId"].as_str().unwrap();
    let (s, t) = app.get_with(&format!("/api/transactions/{e2e}"), &token).await;
    assert_eq!((s, t["endToEndId"].as_str()), (200, Some(e2e)), "{t}");
    let (s, list) = app.get_with("/api/transactions", &token).await;
    assert_eq!((s, list["metadata"]["total"].as_u64()), (200, Some(2)), "{list}");
    // The externalId is still taken, and writing goes on.
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("before", "10"), &[]).await;
    assert_eq!((s, b["code"].as_str()), (400, Some("PIX_DUPLICATE_EXTERNAL_ID")));
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("after", "5"), &[]).await;
    assert_eq!(s, 201, "{b}");
    app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert!(app.stop().success());

    // Every record is in the binary format now, in pages, and marked so.
    let raw: Arc<dyn Store> = Arc::new(SledStore::open(&app.data_dir().join("db")).unwrap());
    assert!(raw.scan_prefix(b"tx/").unwrap().is_empty(), "transactions are kept in pages");
    let sled = PagedStore::open(raw, pixgw::store::keys::PAGES).unwrap();
    let records: Vec<_> = ["tx/", "ledger/", "pend/", "outbox/"]
        .iter()
        .flat_map(|p| sled.scan_prefix(p.as_bytes()).unwrap())
        .collect();
    assert!(records.len() >= 4, "{} records", records.len());
    assert!(records.iter().all(|(_, v)| v[0] == codec::FORMAT_BINARY_V1));
    assert_eq!(sled.get(pixgw::store::migrate::KEY_RECORD_FORMAT).unwrap(), Some(vec![1]));
}

/// The pages of data version 1: `tx/` pages of 100 ids and `tlist/` pages of one second.
static VERSION_1_PAGES: &[Paging] = &[
    Paging { prefix: b"tx/", page_len: 21, halves: false },
    Paging { prefix: b"tlist/", page_len: 37, halves: false },
    Paging { prefix: b"whlog/", page_len: 45, halves: false },
];

/// The lengths of the names of the pages under `prefix` in a raw store.
fn page_name_lengths(raw: &dyn Store, prefix: &str) -> std::collections::BTreeSet<usize> {
    let under = [paged::PAGE_PREFIX, prefix.as_bytes()].concat();
    raw.scan_prefix(&under).unwrap().iter().map(|(k, _)| k.len() - paged::PAGE_PREFIX.len()).collect()
}

#[actix_rt::test]
async fn a_data_dir_of_the_older_page_shape_is_moved_into_the_new_one_at_start() {
    let mut app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let body = cash_out_body(&format!("shape{i}"), "1");
        let (s, out) = app.post_raw("/api/pix/cash-out", &token, &body, &[]).await;
        assert_eq!(s, 201, "{out}");
        let id = out["transactionId"].as_str().unwrap().to_owned();
        app.wait_final(&token, &id).await;
        ids.push(id);
    }
    let (s, before) = app.get_with("/api/transactions", &token).await;
    assert_eq!((s, before["metadata"]["total"].as_u64()), (200, Some(4)), "{before}");
    assert!(app.stop().success());
    // As a release of data version 1 left it: pages of its shape, no shape record.
    {
        let raw: Arc<dyn Store> = Arc::new(SledStore::open(&app.data_dir().join("db")).unwrap());
        drop(PagedStore::open(raw.clone(), VERSION_1_PAGES).unwrap());
        let mut b = Batch::default();
        b.delete(paged::SHAPE_KEY);
        b.put(keys::DATA_VERSION, 1u32.to_be_bytes().to_vec());
        raw.apply(&b).unwrap();
        raw.flush().unwrap();
        assert_eq!(page_name_lengths(&*raw, "tx/"), [21].into());
        assert_eq!(page_name_lengths(&*raw, "tlist/"), [37].into());
    }

    app.start_again(&fast());
    let token = app.demo_token().await;
    assert_eq!(app.balance(&token).await, ("97.00".into(), "0.00".into(), "97.00".into()));
    let (s, after) = app.get_with("/api/transactions", &token).await;
    assert_eq!((s, &after), (200, &before));
    for (i, id) in ids.iter().enumerate() {
        let (s, t) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
        assert_eq!((s, t["externalId"].as_str()), (200, Some(format!("shape{i}").as_str())), "{t}");
    }
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("shape0", "1"), &[]).await;
    assert_eq!((s, b["code"].as_str()), (400, Some("PIX_DUPLICATE_EXTERNAL_ID")));
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("shape3", "1"), &[]).await;
    assert_eq!(s, 201, "{b}");
    app.wait_final(&token, b["transactionId"].as_str().unwrap()).await;
    assert!(app.stop().success());

    let raw: Arc<dyn Store> = Arc::new(SledStore::open(&app.data_dir().join("db")).unwrap());
    assert_eq!(page_name_lengths(&*raw, "tx/"), [22].into(), "every transaction page is of the new shape");
    assert_eq!(page_name_lengths(&*raw, "tlist/"), [39].into(), "every list page is of the new shape");
    assert!(raw.get(paged::SHAPE_KEY).unwrap().is_some(), "the shape is recorded");
    assert_eq!(raw.get(keys::DATA_VERSION).unwrap(), Some(2u32.to_be_bytes().to_vec()));
}

#[actix_rt::test]
async fn a_full_disk_refuses_writes_with_503_and_retry_after_and_still_serves_reads() {
    use pixgw::store::journal::Faults;
    use pixgw::store::{Repo, Storage};
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let options = JournalOptions { segment_bytes: 1 << 20, faults: Arc::clone(&faults) };
    let storage = Storage::open(dir.path(), 16, options, Repo::layout()).unwrap();
    let app = crate::helpers::spawn_in_process(storage.clone()).await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    // The disk fills: the journal sees it before it writes anything.
    faults.no_room.store(true, Ordering::SeqCst);
    let journal = storage.commit.journal().unwrap();
    assert!(!journal.try_make_room());
    let mut res = app
        .client
        .post(app.url("/api/pix/cash-out"))
        .bearer_auth(&token)
        .content_type("application/json")
        .send_body(cash_out_body("while-full", "1"))
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 503);
    assert_eq!(res.headers().get("retry-after").unwrap(), "5");
    let body: serde_json::Value = res.json().await.unwrap();
    crate::helpers::assert_extended(&body, 503, "SERVICE_UNAVAILABLE");
    // Nothing moved, and reads are served.
    assert_eq!(app.balance(&token).await, ("100.00".into(), "0.00".into(), "100.00".into()));
    assert_eq!(crate::helpers::send(app.client.get(app.url("/healthz")), None).await.0, 200);
    // Room returns: the same request is taken.
    faults.no_room.store(false, Ordering::SeqCst);
    assert!(journal.try_make_room());
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body("while-full", "1"), &[]).await;
    assert_eq!(s, 201, "{b}");
}
