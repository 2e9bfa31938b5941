//! The keys' sync with the DICT, end to end: `pixgw spi-sim` plays the DICT, whose entries a
//! test changes behind pixgw's back; pixgw's periodic verification finds the difference,
//! reads the DICT's CIDs and repairs it (the DICT wins), and the next verification is clean.

use serde_json::{json, Value};

use crate::helpers::*;
use crate::spi::{eventually, live_account, metrics_text, Sim, ISPB};

fn options(sim: &Sim) -> Options {
    Options {
        env: vec![
            ("PIXGW_CONFIG".into(), sim.config.display().to_string()),
            ("PIXGW_SPI_SYNC_EVERY_MS".into(), "300".into()),
        ],
        ..Options::default()
    }
}

async fn keys_of(app: &TestApp, account: u64) -> Vec<String> {
    let (s, keys) = app.admin("GET", &format!("/admin/accounts/{account}/keys"), None).await;
    assert_eq!(s, 200, "{keys}");
    let mut keys: Vec<String> =
        keys.as_array().unwrap().iter().map(|k| k["key"].as_str().unwrap().to_owned()).collect();
    keys.sort();
    keys
}

async fn sync_stats(sim: &Sim) -> Value {
    let (s, b) = sim.get("/sim/dict/sync").await;
    assert_eq!(s, 200, "{b}");
    b
}

fn counter(metrics: &str, line_start: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(line_start))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[actix_rt::test]
async fn a_difference_the_dict_finds_is_repaired_the_dicts_way_and_the_next_verification_is_clean() {
    let sim = Sim::start(&[]);
    let app = spawn_with(options(&sim)).await;
    let (account, _) = live_account(&app, "Sincronizada").await;
    let (phone, email) = ("+5511987650010", "sync@example.com");
    for key in [phone, email] {
        let (s, k) =
            app.admin("POST", &format!("/admin/accounts/{account}/keys"), Some(json!({"key": key}))).await;
        assert_eq!(s, 201, "{k}");
    }
    // While both sides agree, every verification is OK.
    eventually("a clean round of verifications", || async {
        let s = sync_stats(&sim).await;
        (s["verifications"].as_u64()? >= 5).then_some(())
    })
    .await;
    assert_eq!(sync_stats(&sim).await["nok"], 0, "the CIDs pixgw keeps are the DICT's");

    // Behind pixgw's back the DICT loses the phone and holds a second e-mail for the
    // account, and one for an account pixgw does not have.
    let (s, _) = sim
        .client
        .delete(format!("{}/sim/dict/entries/{}", sim.control, phone))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(s, 204);
    let extra = "extra@example.com";
    let (s, e) = sim
        .put(
            &format!("/sim/dict/entries/{extra}"),
            json!({"keyType": "EMAIL", "participant": ISPB, "account": account.to_string()}),
        )
        .await;
    assert_eq!(s, 200, "{e}");
    let (s, _) = sim
        .put(
            "/sim/dict/entries/stray@example.com",
            json!({"keyType": "EMAIL", "participant": ISPB, "account": "999999"}),
        )
        .await;
    assert_eq!(s, 200);

    // pixgw finds out, reads the DICT's CIDs and takes the DICT's side.
    let repaired = eventually("the repair", || async {
        let keys = keys_of(&app, account).await;
        (keys == [extra.to_owned(), email.to_owned()]).then_some(keys)
    })
    .await;
    assert!(!repaired.contains(&phone.to_owned()));
    let metrics = eventually("the repairs counted", || async {
        let m = metrics_text(&app).await;
        (counter(&m, "pixgw_dict_sync_repairs_total{action=\"unattributed\"}") >= 1).then_some(m)
    })
    .await;
    assert!(counter(&metrics, "pixgw_dict_sync_repairs_total{action=\"removed\"}") >= 1, "{metrics}");
    assert!(counter(&metrics, "pixgw_dict_sync_repairs_total{action=\"added\"}") >= 1, "{metrics}");
    // The stray entry names no account of ours: it stays a difference, counted, not taken in.
    let (s, _) = sim
        .client
        .delete(format!("{}/sim/dict/entries/stray@example.com", sim.control))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(s, 204);
    // With the stray gone, a whole round of verifications is clean again.
    let before = sync_stats(&sim).await;
    eventually("a clean round after the repair", || async {
        let now = sync_stats(&sim).await;
        let (v0, n0) = (before["verifications"].as_u64()?, before["nok"].as_u64()?);
        let (v1, n1) = (now["verifications"].as_u64()?, now["nok"].as_u64()?);
        // Ten more answers with at most the one in flight at the deletion finding a difference.
        (v1 >= v0 + 10 && n1 <= n0 + 1).then_some(())
    })
    .await;
    let settled = sync_stats(&sim).await;
    let again = eventually("five more clean verifications", || async {
        let now = sync_stats(&sim).await;
        (now["verifications"].as_u64()? >= settled["verifications"].as_u64()? + 5).then_some(now)
    })
    .await;
    assert_eq!(again["nok"], settled["nok"], "nothing differs any more: {again}");

    // A key removed by the operator, with the reason the DICT is told, leaves both sides.
    let path = format!("/admin/accounts/{account}/keys/{email}");
    let (s, b) = app.admin("DELETE", &format!("{path}?reason=WHIM"), None).await;
    assert_eq!(s, 400, "{b}");
    let (s, b) = app.admin("DELETE", &format!("{path}?reason=ACCOUNT_CLOSURE"), None).await;
    assert_eq!(s, 204, "{b}");
    let gone = sim.client.delete(format!("{}/sim/dict/entries/{email}", sim.control)).send().await.unwrap();
    assert_eq!(gone.status().as_u16(), 404, "the DICT no longer holds it");
    assert_eq!(keys_of(&app, account).await, [extra.to_owned()]);

    // Once a file has repaired the set, a later difference is read from the DICT's CID
    // events since then, not from a new file.
    let before = metrics_text(&app).await;
    let files_before = counter(&before, "pixgw_dict_sync_repaired_total{via=\"file\"}");
    let later = "later@example.com";
    let (s, e) = sim
        .put(
            &format!("/sim/dict/entries/{later}"),
            json!({"keyType": "EMAIL", "participant": ISPB, "account": account.to_string()}),
        )
        .await;
    assert_eq!(s, 200, "{e}");
    eventually("the key taken in from the events", || async {
        let keys = keys_of(&app, account).await;
        (keys == [extra.to_owned(), later.to_owned()]).then_some(())
    })
    .await;
    let after = eventually("the repair by events counted", || async {
        let m = metrics_text(&app).await;
        (counter(&m, "pixgw_dict_sync_repaired_total{via=\"events\"}") >= 1).then_some(m)
    })
    .await;
    assert_eq!(
        counter(&after, "pixgw_dict_sync_repaired_total{via=\"file\"}"),
        files_before,
        "no new file: {after}"
    );
}
