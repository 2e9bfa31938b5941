//! Recovery: a restart resumes what was pending, and a kill -9 while cash-outs stream in
//! loses nothing acknowledged and duplicates nothing.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use futures::future::join_all;
use pixgw::domain::ids::AccountId;
use pixgw::domain::money::Money;
use pixgw::domain::transaction::{TxKind, TxStatus};
use pixgw::store::{JournalOptions, Repo, Storage};

use crate::helpers::{cash_out_body, directory_key, Options, TestApp};

pub fn fast() -> Options {
    Options { test_clock: true, env: vec![("PIXGW_SIM_SETTLE_MS".into(), "20".into())], ..Default::default() }
}

#[actix_rt::test]
async fn a_restart_resumes_pending_payments_and_expirations() {
    let mut app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "100").await;
    let (_, slow) = app
        .post_raw(
            "/api/pix/cash-out",
            &token,
            &cash_out_body("slow", "10"),
            &[("X-Sandbox-Scenario", "DELAY_1500")],
        )
        .await;
    let (evp, _, _) = directory_key("EVP", 1);
    let body =
        format!(r#"{{"pixKey": "{evp}", "expiration": 30, "payment": {{"currency": "BRL", "amount": 5}}}}"#);
    let idem = uuid::Uuid::new_v4().to_string();
    let (s, stuck) = app
        .post_raw(
            "/dict/pix",
            &token,
            &body,
            &[("x-idempotency-key", &idem), ("X-Sandbox-Scenario", "STUCK")],
        )
        .await;
    assert_eq!(s, 201);
    app.restart(&fast());
    let token = app.demo_token().await;
    assert_eq!(app.balance(&token).await, ("100.00".into(), "15.00".into(), "85.00".into()));
    let t = app.wait_final(&token, slow["transactionId"].as_str().unwrap()).await;
    assert_eq!(t["status"], "CONFIRMED");
    // The idempotency key survived the restart too.
    let (s, again) = app
        .post_raw(
            "/dict/pix",
            &token,
            &body,
            &[("x-idempotency-key", &idem), ("X-Sandbox-Scenario", "STUCK")],
        )
        .await;
    assert_eq!((s, &again), (200, &stuck));
    app.advance(31).await;
    let token = app.demo_token().await;
    let t = app.wait_final(&token, &stuck["id"].to_string()).await;
    assert_eq!(t["errorCode"], "EXPIRED");
    assert_eq!(app.balance(&token).await, ("90.00".into(), "0.00".into(), "90.00".into()));
}

/// Streams cash-outs (`body_of` an externalId) from `workers` concurrent clients; SIGKILLs
/// the server once `kill_after` have been acknowledged. Answers the acknowledged
/// (externalId, transactionId) pairs and every externalId that was sent.
pub async fn stream_then_kill(
    app: &mut TestApp,
    token: &str,
    workers: usize,
    kill_after: usize,
    round: usize,
    body_of: &dyn Fn(&str) -> String,
) -> (HashMap<String, String>, Vec<String>) {
    stream_then_kill_with(app, token, workers, kill_after, round, body_of, false).await
}

/// [`stream_then_kill`], each request under an `Idempotency-Key` equal to its externalId
/// when `keyed`.
pub async fn stream_then_kill_with(
    app: &mut TestApp,
    token: &str,
    workers: usize,
    kill_after: usize,
    round: usize,
    body_of: &dyn Fn(&str) -> String,
    keyed: bool,
) -> (HashMap<String, String>, Vec<String>) {
    let acked = Rc::new(RefCell::new(HashMap::new()));
    let sent = Rc::new(RefCell::new(Vec::new()));
    let killed = Rc::new(Cell::new(false));
    let child = Rc::new(RefCell::new(app.take_child()));
    let work = (0..workers).map(|w| {
        let (acked, sent, killed, child) = (acked.clone(), sent.clone(), killed.clone(), child.clone());
        let app = &*app;
        async move {
            for i in 0.. {
                if killed.get() {
                    break;
                }
                let ext = format!("r{round}-w{w}-{i}");
                sent.borrow_mut().push(ext.clone());
                let mut req = app.client.post(app.url("/api/pix/cash-out")).bearer_auth(token);
                req = req.content_type("application/json");
                if keyed {
                    req = req.insert_header(("Idempotency-Key", ext.as_str()));
                }
                let Ok(mut res) = req.send_body(body_of(&ext)).await else { break };
                if res.status().as_u16() == 201 {
                    let b: serde_json::Value = match res.json().await {
                        Ok(b) => b,
                        Err(_) => break,
                    };
                    acked.borrow_mut().insert(ext, b["transactionId"].as_str().unwrap().to_owned());
                    if acked.borrow().len() >= kill_after && !killed.get() {
                        killed.set(true);
                        if let Some(mut c) = child.borrow_mut().take() {
                            c.kill().unwrap(); // SIGKILL
                            c.wait().unwrap();
                        }
                    }
                } else {
                    // Only a duplicate externalId (a retry after the kill) may be refused.
                    let status = res.status().as_u16();
                    let b: serde_json::Value = res.json().await.unwrap_or_default();
                    assert_eq!((status, b["code"].as_str()), (400, Some("PIX_DUPLICATE_EXTERNAL_ID")), "{b}");
                }
            }
        }
    });
    join_all(work).await;
    let acked = acked.borrow().clone();
    let sent = sent.borrow().clone();
    (acked, sent)
}

#[actix_rt::test]
async fn kill_9_while_cash_outs_stream_in_loses_nothing_acknowledged_and_duplicates_nothing() {
    let mut app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    app.fund(&token, "1000000").await;
    // Many cycles move more than the default daily and nightly limits allow.
    let limits = serde_json::json!({"limits": {"daily": "1000000", "nightly": "1000000"}});
    let path = format!("/admin/accounts/{}", app.creds.account_id);
    assert_eq!(app.admin("PATCH", &path, Some(limits)).await.0, 200);
    let mut all_acked = HashMap::new();
    let mut all_sent = Vec::new();
    // Four cycles (PIXGW_CRASH_CYCLES for more: benches/crash.sh runs 100), killed after a
    // different count each time, so the kill lands at different points of the group commit
    // and of the checkpoints (one a second).
    let cycles = std::env::var("PIXGW_CRASH_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    for round in 0..cycles {
        let token = app.demo_token().await;
        let kill_after = 120 + (round * 173) % 900;
        let body_of = |ext: &str| cash_out_body(ext, "1.00");
        let (acked, sent) = stream_then_kill(&mut app, &token, 16, kill_after, round, &body_of).await;
        assert!(acked.len() >= kill_after);
        all_acked.extend(acked);
        all_sent.extend(sent);
        app.start_again(&fast());
    }
    let token = app.demo_token().await;
    // Acknowledged cash-outs answer through the API with their ids (a sample: the database
    // check below covers every one of them).
    for (ext, id) in all_acked.iter().take(300) {
        let (s, t) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
        assert_eq!(s, 200, "{ext} was acknowledged and is gone");
        assert_eq!(t["externalId"], ext.as_str());
    }
    // Every pending one settles: nothing stays blocked.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while app.balance(&token).await.1 != "0.00" {
        assert!(std::time::Instant::now() < deadline, "cash-outs still pending after 60 s");
        actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Resending any externalId that was acknowledged is a duplicate, never a second debit.
    for ext in all_acked.keys().take(50) {
        let (s, b) = app.post_raw("/api/pix/cash-out", &token, &cash_out_body(ext, "1.00"), &[]).await;
        assert_eq!((s, b["code"].as_str()), (400, Some("PIX_DUPLICATE_EXTERNAL_ID")), "{ext}");
    }
    let (gross, blocked, net) = app.balance(&token).await;
    assert!(app.stop().success());

    // Read the database itself.
    let storage = Storage::open(&app.data_dir(), 16, JournalOptions::default(), Repo::layout()).unwrap();
    let repo = Repo::new(&storage);
    let txs = repo.transactions_of(AccountId::new(app.creds.account_id).unwrap()).unwrap();
    let mut seen = HashMap::new();
    for t in txs.iter().filter(|t| t.kind == TxKind::CashOut) {
        let ext = t.external_id.clone().unwrap();
        assert!(seen.insert(ext.clone(), t.local_id).is_none(), "{ext} appears twice");
        assert!(all_sent.contains(&ext), "{ext} was never sent");
    }
    for ext in all_acked.keys() {
        assert!(seen.contains_key(ext), "{ext} acknowledged but not stored");
    }
    let sum = |f: &dyn Fn(&&pixgw::domain::transaction::Transaction) -> bool| {
        txs.iter()
            .filter(f)
            .try_fold(Money::ZERO, |acc, t| acc.checked_add(t.value)?.checked_add(t.fee))
            .unwrap()
    };
    let funding = sum(&|t| t.kind == TxKind::PixIn);
    let debits = sum(&|t| t.kind == TxKind::CashOut && t.status == TxStatus::Confirmed);
    let pending = sum(&|t| t.kind == TxKind::CashOut && t.status == TxStatus::Pending);
    assert_eq!(funding.to_cents_string(), "1000000.00");
    assert_eq!(pending, Money::ZERO);
    assert_eq!(blocked, "0.00");
    let available = Money::parse(&net).unwrap();
    assert_eq!(available.checked_add(debits), Some(funding), "available {net} + debits {debits} != funding");
    assert_eq!(gross, net);
}
