//! MED 2.0 funds recovery across three hops, end to end: three pixgw, each a participant of
//! one `pixgw spi-sim` (which plays the SPI and the DICT). A victim at the first pays a mule
//! at the second, which passes most of it on to a mule at the third; the victim contests
//! the payment; the DICT traces the money, the two receiving institutions block what they
//! hold and their operators agree; the money comes back hop by hop as returns (pacs.004,
//! FR01) to the victim, and every ledger equals its settlement account's movement. A kill -9
//! of the intermediate institution mid-recovery loses and repeats nothing.

use serde_json::{json, Value};

use crate::helpers::*;
use crate::spi::{cash_out, eventually, live_account, wait_balance, Sim, ISPB, SETTLE_WAIT_MAX};

const SECOND: &str = "5555BBBB";
const THIRD: &str = "6666CCCC";

fn options(config: &std::path::Path) -> Options {
    Options {
        env: vec![
            ("PIXGW_CONFIG".into(), config.display().to_string()),
            ("PIXGW_SPI_MED_POLL_MS".into(), "100".into()),
        ],
        ..Options::default()
    }
}

/// A live account with an EVP key in the DICT: (account, token, key).
async fn with_key(app: &TestApp, name: &str) -> (u64, String, String) {
    let (account, token) = live_account(app, name).await;
    let (s, k) =
        app.admin("POST", &format!("/admin/accounts/{account}/keys"), Some(json!({"keyType": "EVP"}))).await;
    assert_eq!(s, 201, "{k}");
    (account, token, k["key"].as_str().unwrap().to_owned())
}

/// Pays `value` from the token's account to `key`, settled: the payment's end-to-end id.
async fn pay(app: &TestApp, token: &str, key: &str, external: &str, value: &str) -> String {
    let (s, out) = app
        .post_raw("/api/pix/cash-out", token, &cash_out(key, "RANDOM", "52998224725", external, value), &[])
        .await;
    assert_eq!(s, 201, "{out}");
    let done = app.wait_final_within(token, out["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(done["status"], "CONFIRMED", "{done}");
    done["endToEndId"].as_str().unwrap().to_owned()
}

/// The account's MED 2.0 case (the one an infraction report opened) once `ready` holds.
async fn case_when(app: &TestApp, token: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || {
        let ready = &ready;
        let token = token.to_owned();
        async move {
            let (s, list) = app.get_with("/api/med", &token).await;
            let cases: Vec<&Value> =
                list["data"].as_array()?.iter().filter(|m| m["infractionReportId"].is_string()).collect();
            (s == 200 && cases.len() == 1 && ready(cases[0])).then(|| cases[0].clone())
        }
    })
    .await
}

async fn contest_when(
    app: &TestApp,
    token: &str,
    id: u64,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, || {
        let ready = &ready;
        let token = token.to_owned();
        async move {
            let (s, c) = app.get_with(&format!("/api/med/recoveries/{id}"), &token).await;
            (s == 200 && ready(&c)).then_some(c)
        }
    })
    .await
}

/// An amount as the MED record writes it (a JSON number with two decimals).
fn amount(v: &Value) -> String {
    v.to_string()
}

/// POSTs a JSON body with a bearer token.
async fn post(app: &TestApp, path: &str, token: &str, body: Value) -> (u16, Value) {
    app.post_raw(path, token, &body.to_string(), &[]).await
}

/// SIGKILL, then the same server started again on its data dir and settings.
fn kill_9_and_start_again(app: &mut TestApp, config: &std::path::Path) {
    let mut child = app.take_child().expect("a subprocess server");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    app.start_again(&options(config));
}

#[actix_rt::test]
async fn a_contested_pix_is_traced_across_three_institutions_and_the_money_comes_back_to_the_payer() {
    let sim = Sim::start(&["--participant", SECOND, "--participant", THIRD]);
    let a = spawn_with(options(&sim.config)).await;
    let mut b = spawn_with(options(&sim.config_of(SECOND))).await;
    let c = spawn_with(options(&sim.config_of(THIRD))).await;
    let settled = |ispb: &'static str| {
        let sim = &sim;
        async move { sim.balance_cents(ispb).await }
    };
    let before = [settled(ISPB).await, settled(SECOND).await, settled(THIRD).await];

    // The victim at the first institution, funded with 600.00.
    let (victim, victim_token) = live_account(&a, "Vitima").await;
    sim.pay_account(victim, "52998224725", "600.00").await;
    wait_balance(&a, &victim_token, "600.00").await;
    let (mule1, mule1_token, mule1_key) = with_key(&b, "Mula Um").await;
    let (mule2, mule2_token, mule2_key) = with_key(&c, "Mula Dois").await;

    // The scam: 500.00 to the first mule, who passes 400.00 on at once.
    let root = pay(&a, &victim_token, &mule1_key, "golpe", "500.00").await;
    wait_balance(&b, &mule1_token, "500.00").await;
    pay(&b, &mule1_token, &mule2_key, "repasse", "400.00").await;
    wait_balance(&c, &mule2_token, "400.00").await;

    // A contest the rules refuse changes nothing: a payment the account received, bad input.
    let contest = |e2e: &str| json!({"endToEndId": e2e, "situationType": "SCAM", "details": "falso vendedor", "email": "vitima@example.com", "phone": "+5561988887777"});
    let (s, e) = post(&b, "/api/med/recoveries", &mule1_token, contest(&root)).await;
    assert_extended(&e, 409, "PIX_NOT_CONTESTABLE");
    assert_eq!(s, 409);
    let bad = json!({"endToEndId": root, "situationType": "BAD", "email": "x", "phone": "1"});
    let (s, e) = post(&a, "/api/med/recoveries", &victim_token, bad).await;
    assert_eq!(s, 400, "{e}");

    // The victim contests it, self-service.
    let (s, opened) = post(&a, "/api/med/recoveries", &victim_token, contest(&root)).await;
    assert_eq!((s, opened["status"].as_str()), (201, Some("REQUESTED")), "{opened}");
    let id = opened["id"].as_u64().unwrap();
    let (s, again) = post(&a, "/api/med/recoveries", &victim_token, contest(&root)).await;
    assert_eq!(s, 409);
    assert_extended(&again, 409, "ALREADY_CONTESTED");
    let traced = contest_when(&a, &victim_token, id, "the DICT's recovery", |c| {
        c["status"] == "AWAITING_ANALYSIS" && c["fundsRecoveryId"].is_string()
    })
    .await;
    assert_eq!(traced["tracedTransactions"], 2, "the root and the second hop: {traced}");

    // Each receiving institution opens a case and blocks what the account holds: 100.00 at
    // the first mule's, 400.00 at the second's.
    let case1 =
        case_when(&b, &mule1_token, "the first mule's case", |m| amount(&m["blockedAmount"]) == "100.00")
            .await;
    let case2 =
        case_when(&c, &mule2_token, "the second mule's case", |m| amount(&m["blockedAmount"]) == "400.00")
            .await;
    assert_eq!(
        (case1["amount"].to_string(), case2["amount"].to_string()),
        ("500.00".into(), "400.00".into())
    );
    assert_eq!((case1["situationType"].as_str(), case1["cause"].as_str()), (Some("SCAM"), Some("SCAM")));
    let (_, blocked, net) = b.balance(&mule1_token).await;
    assert_eq!((blocked.as_str(), net.as_str()), ("100.00", "0.00"), "nothing left to spend");

    // The second mule answers with its statement, which its case keeps.
    let path = format!("/api/med/{}/evidence", case2["id"]);
    let (s, with) = post(&c, &path, &mule2_token, json!({"text": "recebi por uma venda"})).await;
    assert_eq!((s, with["evidence"][0]["text"].as_str()), (200, Some("recebi por uma venda")), "{with}");

    // kill -9 of the intermediate institution while its case is open: restarted, it holds
    // one case, the same block.
    kill_9_and_start_again(&mut b, &sim.config_of(SECOND));
    let (s, list) = b.get_with("/api/med", &mule1_token).await;
    assert_eq!((s, list["data"].as_array().unwrap().len()), (200, 1), "{list}");

    // The operators agree; the DICT asks the deepest institution first: its 400.00 goes
    // back to the first mule's account, is blocked there at once, and the 500.00 goes on to
    // the victim.
    for (app, account, case) in [(&b, mule1, &case1), (&c, mule2, &case2)] {
        let path = format!("/admin/accounts/{account}/med/{}/analysis", case["id"]);
        let (s, done) =
            app.admin("POST", &path, Some(json!({"result": "APPROVED", "fraudType": "MULE_ACCOUNT"}))).await;
        assert_eq!((s, done["status"].as_str()), (200, Some("ANALYZED")), "{done}");
    }
    contest_when(&a, &victim_token, id, "the recovery's end", |c| c["status"] == "COMPLETED").await;
    wait_balance(&a, &victim_token, "600.00").await;
    let done =
        contest_when(&a, &victim_token, id, "the money counted", |c| c["returnedAmount"] == "500.00").await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    wait_balance(&b, &mule1_token, "0.00").await;
    wait_balance(&c, &mule2_token, "0.00").await;
    for (app, token) in [(&b, &mule1_token), (&c, &mule2_token)] {
        let (gross, blocked, _) = app.balance(token).await;
        assert_eq!((gross.as_str(), blocked.as_str()), ("0.00", "0.00"));
    }
    let (_, list) = b.get_with("/api/med", &mule1_token).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "one case, never opened twice: {list}");

    // Each agreed close made a fraud mark of its type on the account that received the
    // money, as the DICT does: a payment to the first mule's key is now refused before any
    // debit (from the third institution, which had not looked the key up before).
    let (s, marks) = b.admin("GET", "/admin/fraud-markers?taxId=52998224725", None).await;
    assert_eq!(s, 200, "{marks}");
    let mut marked: Vec<(&str, &str)> = marks["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["fraudType"].as_str().unwrap(), m["key"].as_str().unwrap_or_default()))
        .collect();
    marked.sort();
    let mut expected = vec![("MULE_ACCOUNT", mule1_key.as_str()), ("MULE_ACCOUNT", mule2_key.as_str())];
    expected.sort();
    assert_eq!(marked, expected, "{marks}");
    let refused = cash_out(&mule1_key, "RANDOM", "52998224725", "after-the-scam", "1.00");
    let (s, e) = c.post_raw("/api/pix/cash-out", &mule2_token, &refused, &[]).await;
    assert_extended(&e, 400, "PIX_PAYEE_FRAUD_MARKED");
    assert_eq!(s, 400);

    // Every ledger equals its settlement account's movement: the victim's 600.00 at the
    // first, nothing at the other two.
    let after = [settled(ISPB).await, settled(SECOND).await, settled(THIRD).await];
    assert_eq!([after[0] - before[0], after[1] - before[1], after[2] - before[2]], [60_000, 0, 0]);
    let (_, view) =
        sim.get(&format!("/sim/funds-recoveries/{}", done["fundsRecoveryId"].as_str().unwrap())).await;
    assert_eq!(view["status"], "COMPLETED", "{view}");
}

/// A case nobody analyses is decided by the rule when its seven days end on the receiving
/// institution's clock: agreed, the money kept for the return, which then goes back.
#[actix_rt::test]
async fn a_report_left_unanalysed_is_agreed_at_its_deadline_and_the_money_goes_back() {
    let sim = Sim::start(&["--participant", SECOND]);
    let a = spawn_with(options(&sim.config)).await;
    let b = spawn_with(options(&sim.config_of(SECOND))).await;
    let (victim, victim_token) = live_account(&a, "Vitima").await;
    sim.pay_account(victim, "52998224725", "300.00").await;
    wait_balance(&a, &victim_token, "300.00").await;
    let (_, mule_token, mule_key) = with_key(&b, "Mula").await;
    let root = pay(&a, &victim_token, &mule_key, "golpe", "300.00").await;
    wait_balance(&b, &mule_token, "300.00").await;
    let body = json!({"endToEndId": root, "situationType": "ACCOUNT_TAKEOVER", "email": "v@example.com", "phone": "+5511999990000"});
    let (s, opened) = post(&a, "/api/med/recoveries", &victim_token, body).await;
    assert_eq!(s, 201, "{opened}");
    let id = opened["id"].as_u64().unwrap();
    let case = case_when(&b, &mule_token, "the case", |m| amount(&m["blockedAmount"]) == "300.00").await;
    let due = case["analysisDueAt"].as_str().unwrap().to_owned();
    let traced =
        contest_when(&a, &victim_token, id, "the recovery", |c| c["fundsRecoveryId"].is_string()).await;
    let recovery = traced["fundsRecoveryId"].as_str().unwrap().to_owned();
    let report_of = |v: &Value| v["reports"][0].clone();

    // A day before the deadline nothing is decided.
    b.advance(6 * 86_400).await;
    let (_, view) = sim.get(&format!("/sim/funds-recoveries/{recovery}")).await;
    assert_eq!(report_of(&view)["status"], "ACKNOWLEDGED", "{view}");
    // Past it, the rule agrees and the recovery runs to its end.
    b.advance(86_400 + 1).await;
    eventually("the report agreed by the rule", || {
        let (sim, recovery) = (&sim, recovery.clone());
        async move {
            let (_, view) = sim.get(&format!("/sim/funds-recoveries/{recovery}")).await;
            (view["reports"][0]["analysisResult"] == "AGREED").then_some(())
        }
    })
    .await;
    contest_when(&a, &victim_token, id, "the money back and the end", |c| {
        c["returnedAmount"] == "300.00" && c["status"] == "COMPLETED"
    })
    .await;
    wait_balance(&a, &victim_token, "300.00").await;
    let (_, view) = sim.get(&format!("/sim/funds-recoveries/{recovery}")).await;
    assert_eq!(view["status"], "COMPLETED", "{view}");
    assert!(due.as_str() > case["createdAt"].as_str().unwrap(), "a deadline after the case opened");
}

/// Off the SPI rail there is no DICT to contest a Pix in: 409 `DICT_REQUIRED`, nothing
/// recorded; a statement for a case the account does not have is 404.
#[actix_rt::test]
async fn a_contest_needs_the_dict_and_a_statement_needs_a_case() {
    let app = spawn_app().await;
    let token = app.demo_token().await;
    let body = json!({"endToEndId": "E1234ABCD202611281200abcdefghijk", "situationType": "SCAM", "email": "a@b.br", "phone": "+5561988887777"});
    let (s, e) = post(&app, "/api/med/recoveries", &token, body).await;
    assert_eq!(s, 409);
    assert_extended(&e, 409, "DICT_REQUIRED");
    let (s, list) = app.get_with("/api/med/recoveries", &token).await;
    assert_eq!((s, list["metadata"]["total"].as_u64()), (200, Some(0)), "{list}");
    let (s, e) = post(&app, "/api/med/99/evidence", &token, json!({"text": "x"})).await;
    assert_eq!(s, 404, "{e}");
    let (s, e) = post(&app, "/api/med/99/evidence", &token, json!({"text": ""})).await;
    assert_eq!(s, 400, "{e}");
}

/// The payer withdraws its contest while the receiving institution holds the money: the
/// DICT cancels the recovery and its report, and the receiving institution releases the
/// block; a second withdrawal is refused.
#[actix_rt::test]
async fn a_withdrawn_contest_releases_what_the_receiving_institution_blocked() {
    let sim = Sim::start(&["--participant", SECOND]);
    let a = spawn_with(options(&sim.config)).await;
    let b = spawn_with(options(&sim.config_of(SECOND))).await;
    let (victim, victim_token) = live_account(&a, "Vitima").await;
    sim.pay_account(victim, "52998224725", "300.00").await;
    wait_balance(&a, &victim_token, "300.00").await;
    let (mule, mule_token, mule_key) = with_key(&b, "Mula").await;
    let root = pay(&a, &victim_token, &mule_key, "engano", "300.00").await;
    wait_balance(&b, &mule_token, "300.00").await;
    let body = json!({"endToEndId": root, "situationType": "OTHER", "details": "engano meu", "email": "v@example.com", "phone": "+5511999990000"});
    let (s, opened) = post(&a, "/api/med/recoveries", &victim_token, body).await;
    assert_eq!(s, 201, "{opened}");
    let id = opened["id"].as_u64().unwrap();
    let case = case_when(&b, &mule_token, "the case", |m| amount(&m["blockedAmount"]) == "300.00").await;
    let opened =
        contest_when(&a, &victim_token, id, "in the DICT", |c| c["fundsRecoveryId"].is_string()).await;

    // Before the analysis the payer corrects its contest; the DICT's recovery takes it.
    let path = format!("/api/med/recoveries/{id}");
    let patch = |body: Value| {
        let (a, path, token) = (&a, path.clone(), victim_token.clone());
        async move {
            let req = a.client.patch(a.url(&path)).bearer_auth(&token);
            send(req, Some(body)).await
        }
    };
    for bad in [json!({}), json!({"situationType": "BAD"}), json!({"phone": "123"})] {
        let (s, e) = patch(bad.clone()).await;
        assert_eq!(s, 400, "{bad}: {e}");
    }
    let (s, changed) = patch(json!({"details": "paguei por engano", "phone": "+5511988880000"})).await;
    assert_eq!(s, 200, "{changed}");
    assert_eq!(
        (changed["details"].as_str(), changed["contact"]["phone"].as_str()),
        (Some("paguei por engano"), Some("+5511988880000"))
    );
    assert_eq!(changed["contact"]["email"], "v@example.com", "kept: {changed}");
    let dict_id = opened["fundsRecoveryId"].as_str().unwrap();
    let (_, view) = sim.get(&format!("/sim/funds-recoveries/{dict_id}")).await;
    assert_eq!(view["details"], "paguei por engano", "{view}");

    let (s, done) = post(&a, &format!("/api/med/recoveries/{id}/cancel"), &victim_token, json!({})).await;
    assert_eq!((s, done["status"].as_str()), (200, Some("CANCELLED")), "{done}");
    let (s, again) = post(&a, &format!("/api/med/recoveries/{id}/cancel"), &victim_token, json!({})).await;
    assert_eq!(s, 409, "{again}");
    let (s, late) = patch(json!({"details": "tarde demais"})).await;
    assert_extended(&late, 409, "CONTEST_NOT_AMENDABLE");
    assert_eq!(s, 409);
    eventually("the case released", || {
        let (b, path) = (&b, format!("/admin/accounts/{mule}/med"));
        let case_id = case["id"].clone();
        async move {
            let (_, list) = b.admin("GET", &path, None).await;
            let c = list["data"].as_array()?.iter().find(|m| m["id"] == case_id)?.clone();
            (c["status"] == "CANCELLED").then_some(())
        }
    })
    .await;
    let (_, blocked, net) = b.balance(&mule_token).await;
    assert_eq!((blocked.as_str(), net.as_str()), ("0.00", "300.00"));
    wait_balance(&a, &victim_token, "0.00").await;
}
