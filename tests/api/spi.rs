//! The SPI rail, end to end: `pixgw spi-sim` as a child process (ICOM, the SPI and the DICT
//! over mutual TLS, with its own PKI) and `pixgw serve --rail spi` against it. Money moves
//! between the simulator's settlement accounts, and pixgw's ledger must agree with them.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::*;

/// How long a test waits, at most, for the rail to settle what it sent. The payout thread
/// runs under `SCHED_IDLE` (docs/decisions.md "The SPI rail"): on a machine whose cores the
/// whole test suite keeps busy, it gets only the CPU time left over, so this is a bound for
/// a loaded machine, not a measure of speed.
pub const SETTLE_WAIT_MAX: Duration = Duration::from_secs(180);

/// The simulator, running.
pub struct Sim {
    child: Child,
    /// Kept so the PKI and settings outlive the process.
    _dir: Arc<tempfile::TempDir>,
    pub control: String,
    pub config: PathBuf,
    pub client: awc::Client,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub const ISPB: &str = "1234ABCD";

impl Sim {
    pub fn start(extra: &[&str]) -> Sim {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let mut child = Command::new(bin())
            .args(["spi-sim", "--dir"])
            .arg(dir.path())
            .args(["--participant", ISPB])
            // Short polls and a short idle time, unless the test sets its own.
            .args(
                [["--long-poll-ms", "500"], ["--stream-idle-ms", "3000"]]
                    .into_iter()
                    .filter(|[flag, _]| !extra.contains(flag))
                    .flatten(),
            )
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn pixgw spi-sim");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let mut second = String::new();
        out.read_line(&mut second).unwrap();
        std::thread::spawn(move || for _ in out.lines() {});
        let control = first
            .split(" control ")
            .nth(1)
            .unwrap_or_else(|| panic!("unexpected banner: {first:?}"))
            .trim()
            .to_owned();
        let config = PathBuf::from(second.trim().strip_prefix("pixgw settings for it: ").unwrap());
        Sim { child, _dir: dir, control, config, client: client() }
    }

    /// The settings file the simulator wrote for participant `ispb` (named by `--participant`).
    pub fn config_of(&self, ispb: &str) -> PathBuf {
        self._dir.path().join(format!("pixgw-spi-{ispb}.toml"))
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        send(self.client.post(format!("{}{path}", self.control)), Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        send(self.client.put(format!("{}{path}", self.control)), Some(body)).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        send(self.client.get(format!("{}{path}", self.control)), None).await
    }

    /// A participant's settlement account, in centavos.
    pub async fn balance_cents(&self, ispb: &str) -> i128 {
        let (s, b) = self.get("/sim/participants").await;
        assert_eq!(s, 200, "{b}");
        let p = b["participants"].as_array().unwrap().iter().find(|p| p["ispb"] == ispb).unwrap().clone();
        p["balanceCents"].as_str().unwrap().parse().unwrap()
    }

    /// The simulator's payer pays one of pixgw's accounts by its number.
    pub async fn pay_account(&self, account: u64, document: &str, amount: &str) -> String {
        let body = json!({"toAccount": {"ispb": ISPB, "number": account.to_string(), "document": document}, "amount": amount});
        let (s, b) = self.post("/sim/pix", body).await;
        assert_eq!(s, 201, "{b}");
        b["endToEndId"].as_str().unwrap().to_owned()
    }

    /// Polls a payment until the SPI settled or rejected it (bounded: [`SETTLE_WAIT_MAX`]).
    pub async fn wait_payment(&self, id: &str) -> Value {
        let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
        loop {
            let (s, p) = self.get(&format!("/sim/payments/{id}")).await;
            if s == 200 && p["stage"] != "AWAITING_RECEIVER" {
                return p;
            }
            assert!(std::time::Instant::now() < deadline, "the SPI did not settle {id}: {p}");
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// pixgw on the SPI rail of `sim`.
pub async fn spawn_on(sim: &Sim) -> TestApp {
    let opts = Options {
        env: vec![("PIXGW_CONFIG".into(), sim.config.display().to_string())],
        ..Options::default()
    };
    spawn_with(opts).await
}

/// A live account with a token: (account id, token).
pub async fn live_account(app: &TestApp, name: &str) -> (u64, String) {
    let (id, client_id, secret, pem) = app.new_account(name).await;
    let (s, t) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(s, 201, "{t}");
    (id, t["access_token"].as_str().unwrap().to_owned())
}

/// The reconciliation read of the hour around now.
pub async fn reconciliation(app: &TestApp) -> (u16, Value) {
    let now = chrono::Utc::now();
    let window = format!(
        "from={}&to={}",
        (now - chrono::Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        (now + chrono::Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    app.admin("GET", &format!("/admin/rail/reconciliation?{window}"), None).await
}

/// A live account paid `amount` through the SPI by the simulator's payer, once the money
/// is there: (account id, token).
pub async fn funded_account(app: &TestApp, sim: &Sim, amount: &str) -> (u64, String) {
    let (account, token) = live_account(app, "Loja Real").await;
    let funded = sim.pay_account(account, "52998224725", amount).await;
    assert_eq!(sim.wait_payment(&funded).await["stage"], "SETTLED");
    wait_balance(app, &token, amount).await;
    (account, token)
}

/// Polls the account's balance until it is `net` (bounded: [`SETTLE_WAIT_MAX`]).
pub async fn wait_balance(app: &TestApp, token: &str, net: &str) {
    let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
    loop {
        let (_, _, have) = app.balance(token).await;
        if have == net {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the balance stayed {have}, not {net}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn cash_out(key: &str, key_type: &str, document: &str, external_id: &str, value: &str) -> String {
    format!(
        r#"{{"value": {value}, "externalId": "{external_id}", "details": {{"key": "{key}", "keyType": "{key_type}", "name": "Payee", "document": "{document}"}}}}"#
    )
}

#[actix_rt::test]
async fn money_arrives_and_leaves_through_the_spi_and_both_books_agree() {
    let sim = Sim::start(&[]);
    let app = spawn_on(&sim).await;
    let (account, token) = live_account(&app, "Loja Real").await;
    let ours_before = sim.balance_cents(ISPB).await;

    // Money in: the simulator's payer pays the account by its number.
    let e2e = sim.pay_account(account, "52998224725", "100.00").await;
    let p = sim.wait_payment(&e2e).await;
    assert_eq!(p["stage"], "SETTLED", "{p}");
    wait_balance(&app, &token, "100.00").await;
    let (s, list) = app.get_with("/api/transactions?type=PAYMENT", &token).await;
    assert_eq!(s, 200, "{list}");
    let received = &list["data"][0];
    assert_eq!(received["endToEndId"], e2e.as_str());
    assert_eq!(received["counterpart"]["bank"]["bankISPB"], "99999A03");

    // Money out, to a key of the DICT: the debit waits for the SPI's settlement.
    let (key, doc, _) = directory_key("EMAIL", 0);
    let (s, b) = app
        .post_raw("/api/pix/cash-out", &token, &cash_out(&key, "EMAIL", &doc, "out-1", "10.00"), &[])
        .await;
    assert_eq!(s, 201, "{b}");
    let tx = app.wait_final_within(&token, b["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(tx["status"], "CONFIRMED", "{tx}");
    let out_e2e = tx["endToEndId"].as_str().unwrap().to_owned();
    assert!(out_e2e.starts_with(&format!("E{ISPB}")), "{out_e2e}");
    let p = sim.wait_payment(&out_e2e).await;
    assert_eq!(p["stage"], "SETTLED", "{p}");
    assert_eq!(app.balance(&token).await, ("90.00".into(), "0.00".into(), "90.00".into()));
    assert_eq!(
        sim.balance_cents(ISPB).await - ours_before,
        9_000,
        "the settlement account moved as the ledger did"
    );

    // A receiver that refuses (a blocked account): ERROR with the SPI's reason, money back.
    let (s, b) = app
        .post_raw(
            "/api/pix/cash-out",
            &token,
            &cash_out("ac06@rejeita.spi-sim.pixgw", "EMAIL", "52998224725", "out-2", "5.00"),
            &[],
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let tx = app.wait_final_within(&token, b["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(tx["status"], "ERROR", "{tx}");
    assert_eq!(tx["errorCode"], "BLOCKED_ACCOUNT", "{tx}");
    assert!(tx["errorMessage"].as_str().unwrap().contains("AC06"), "{tx}");
    assert_eq!(app.balance(&token).await, ("90.00".into(), "0.00".into(), "90.00".into()));

    // A static QR code of another bank's key (no amount, a txid): QRES with its TxId.
    let (qr_key, _, _) = directory_key("EMAIL", 3);
    let code = pixgw::domain::brcode::generate(&pixgw::domain::brcode::BrCodeSpec {
        single_use: false,
        key: qr_key,
        info: None,
        amount: None,
        merchant_name: "Padaria".into(),
        merchant_city: "Recife".into(),
        txid: Some("pedido42".into()),
    });
    let body = format!(r#"{{"value": 2.50, "qrCode": "{code}", "externalId": "qr-1"}}"#);
    let (s, b) = app.post_raw("/api/pix/cash-out-qrcode", &token, &body, &[]).await;
    assert_eq!(s, 201, "{b}");
    let tx = app.wait_final_within(&token, b["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(tx["status"], "CONFIRMED", "{tx}");
    assert_eq!(app.balance(&token).await, ("87.50".into(), "0.00".into(), "87.50".into()));

    // /dict/pix: the end-to-end id answered at once is the one the SPI settles with.
    let (phone, phone_doc, _) = directory_key("PHONE", 0);
    let transfer = format!(
        r#"{{"pixKey": "{phone}", "payment": {{"currency": "BRL", "amount": 7.50}}, "priority": "HIGH", "creditorDocument": "{phone_doc}"}}"#
    );
    let idem = uuid::Uuid::new_v4().to_string();
    let (s, t) = app.post_raw("/dict/pix", &token, &transfer, &[("x-idempotency-key", &idem)]).await;
    assert_eq!(s, 201, "{t}");
    let dict_e2e = t["endToEndId"].as_str().unwrap().to_owned();
    assert_eq!(sim.wait_payment(&dict_e2e).await["stage"], "SETTLED");
    // The balance is 80.00 from the debit on; the transaction is final once the node has
    // read the SPI's settlement, which may come a moment after the simulator's.
    wait_balance(&app, &token, "80.00").await;
    let settled = app.wait_final_within(&token, &dict_e2e, SETTLE_WAIT_MAX).await;
    assert_eq!(settled["status"], "CONFIRMED", "{settled}");
    let (_, list) = app.get_with(&format!("/api/transactions?endToEndId={dict_e2e}"), &token).await;
    assert_eq!(list["data"][0]["status"], "Confirmado", "{list}");
    let (s, again) = app.post_raw("/dict/pix", &token, &transfer, &[("x-idempotency-key", &idem)]).await;
    assert_eq!((s, again["endToEndId"].as_str()), (200, Some(dict_e2e.as_str())), "a replay moves nothing");

    // A key the DICT does not know: refused before any debit.
    let (s, b) = app
        .post_raw(
            "/api/pix/cash-out",
            &token,
            &cash_out("ninguem@nada.example", "EMAIL", "52998224725", "out-3", "1.00"),
            &[],
        )
        .await;
    assert_extended(&b, 400, "PIX_KEY_NOT_FOUND");
    assert_eq!(s, 400);
    assert_eq!(app.balance(&token).await, ("80.00".into(), "0.00".into(), "80.00".into()));
    assert_eq!(sim.balance_cents(ISPB).await - ours_before, 8_000);

    // The reconciliation read: the ledger's view of the settlement account agrees with the
    // SPI's (one PIX in, three payments out; the rejected one moved nothing).
    let (s, r) = reconciliation(&app).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!((r["ispb"].as_str(), r["rail"].as_str()), (Some(ISPB), Some("spi")), "{r}");
    assert_eq!(r["received"], json!({"count": 1, "amount": "100.00"}), "{r}");
    assert_eq!(r["sent"], json!({"count": 3, "amount": "20.00"}), "{r}");
    assert_eq!(r["net"], "80.00", "the settlement account moved 8,000 centavos: {r}");
    assert_eq!(r["payoutsPending"]["count"], 0, "{r}");
    assert_eq!(r["arrivalsAccepted"]["count"], 0, "{r}");
    let (s, bad) = app
        .admin("GET", "/admin/rail/reconciliation?from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z", None)
        .await;
    assert_extended(&bad, 400, "HTTP_ERROR");
    assert_eq!(s, 400);
    assert!(bad.to_string().contains("at most 31 days"), "{bad}");

    // Every rail metric the alerts and the dashboard of deploy/ read is exported now that
    // money moved both ways, but those a refusal of ours makes (admi.002, an arrival refused).
    let mut res = app.client.get(app.url("/metrics")).send().await.unwrap();
    let text = String::from_utf8(res.body().await.unwrap().to_vec()).unwrap();
    for file in ["deploy/prometheus/pixgw-alerts.yml", "deploy/grafana/pixgw.json"] {
        let rules =
            std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
        let used: Vec<String> = crate::errors::metric_names(&rules)
            .into_iter()
            .filter(|n| crate::errors::is_rail_metric(n))
            .collect();
        assert!(used.len() >= 7, "{file}: {used:?}");
        for name in used {
            if ["pixgw_spi_admi002_total", "pixgw_spi_arrivals_refused_total"].contains(&name.as_str()) {
                continue;
            }
            let family = crate::errors::family_of(&name);
            assert!(
                text.contains(&format!("# TYPE {family} ")),
                "{file} reads {name}, which /metrics does not export\n{text}"
            );
        }
    }
    let rejected = r#"pixgw_spi_rejections_total{reason="AC06"} 1"#;
    assert!(text.contains(rejected), "{text}");
}

#[actix_rt::test]
async fn a_charge_is_paid_from_another_bank_by_its_code_and_money_goes_back_both_ways() {
    let sim = Sim::start(&[]);
    let app = spawn_on(&sim).await;
    let (account, token) = live_account(&app, "Loja Real").await;
    // The account's receiving key is registered in the DICT (which makes the EVP).
    let (s, k) =
        app.admin("POST", &format!("/admin/accounts/{account}/keys"), Some(json!({"keyType": "EVP"}))).await;
    assert_eq!(s, 201, "{k}");
    assert_eq!((&k["receiving"], &k["directory"]), (&json!(true), &json!("DICT")), "{k}");
    let key = k["key"].as_str().unwrap().to_owned();
    let (s, keys) = app.admin("GET", &format!("/admin/accounts/{account}/keys"), None).await;
    assert_eq!((s, keys.as_array().unwrap().len()), (200, 1), "{keys}");
    assert_eq!(keys[0]["directory"], "DICT");
    // A sandbox account's key stays in the simulator's directory, and the answer says so.
    let demo = app.creds.account_id;
    let (s, k) = app
        .admin(
            "POST",
            &format!("/admin/accounts/{demo}/keys"),
            Some(json!({"keyType": "EVP", "receiving": false})),
        )
        .await;
    assert_eq!((s, &k["directory"]), (201, &json!("SIMULATOR")), "{k}");
    // A CPF key must be the holder's own document.
    let (s, b) = app
        .admin("POST", &format!("/admin/accounts/{account}/keys"), Some(json!({"key": "11144477735"})))
        .await;
    assert_eq!(s, 400, "{b}");

    // A charge: its code carries the registered key and its reference.
    let body = r#"{"transaction": {"value": 25.00, "description": "pedido", "externalId": "c1"}, "payer": {"fullName": "Ana", "document": "52998224725"}}"#;
    let (s, charge) = app.post_raw("/api/pix/cash-in", &token, body, &[]).await;
    assert_eq!(s, 201, "{charge}");
    let code = pixgw::domain::brcode::parse(charge["pixCode"].as_str().unwrap()).unwrap();
    assert_eq!(code.key.as_deref(), Some(key.as_str()));
    let reference = code.txid.clone().unwrap();

    // Another bank's payer pays a wrong amount: refused by the account, nothing moves.
    let (s, b) = sim.post("/sim/pix", json!({"to": key, "amount": "24.99", "txId": reference})).await;
    assert_eq!(s, 201, "{b}");
    let p = sim.wait_payment(b["endToEndId"].as_str().unwrap()).await;
    assert_eq!((p["stage"].as_str(), p["reason"].as_str()), (Some("REJECTED"), Some("AM09")), "{p}");
    // The right amount pays it.
    let (s, b) = sim
        .post(
            "/sim/pix",
            json!({"to": key, "amount": "25.00", "txId": reference, "payerName": "Beto Pagador"}),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let e2e = b["endToEndId"].as_str().unwrap().to_owned();
    assert_eq!(sim.wait_payment(&e2e).await["stage"], "SETTLED");
    let paid =
        app.wait_final_within(&token, charge["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(paid["status"], "CONFIRMED", "{paid}");
    assert_eq!(paid["endToEndId"], e2e.as_str());
    wait_balance(&app, &token, "25.00").await;
    // A second payment of the same charge is refused: it was paid.
    let (_, b) = sim.post("/sim/pix", json!({"to": key, "amount": "25.00", "txId": reference})).await;
    let p = sim.wait_payment(b["endToEndId"].as_str().unwrap()).await;
    assert_eq!((p["stage"].as_str(), p["reason"].as_str()), (Some("REJECTED"), Some("DUPL")), "{p}");

    // A devolução of part of it goes back to the payer's bank (pacs.004 out).
    let devolucao = json!({"valor": "5.00", "descricao": "troca"});
    let req = app.client.put(app.url(&format!("/pix/{e2e}/devolucao/d1"))).bearer_auth(&token);
    let (s, d) = send(req, Some(devolucao)).await;
    assert_eq!(s, 201, "{d}");
    let rtr = d["rtrId"].as_str().unwrap().to_owned();
    assert!(rtr.starts_with(&format!("D{ISPB}")), "{rtr}");
    let p = sim.wait_payment(&rtr).await;
    assert_eq!(p["stage"], "SETTLED", "{p}");
    let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
    loop {
        let (_, d) = app.get_with(&format!("/pix/{e2e}/devolucao/d1"), &token).await;
        if d["status"] == "DEVOLVIDO" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{d}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(app.balance(&token).await, ("20.00".into(), "0.00".into(), "20.00".into()));

    // A cash-out of ours, then its payee's bank returns part of it (pacs.004 in).
    let (k, doc, _) = directory_key("EMAIL", 1);
    let (s, b) =
        app.post_raw("/api/pix/cash-out", &token, &cash_out(&k, "EMAIL", &doc, "out-r", "8.00"), &[]).await;
    assert_eq!(s, 201, "{b}");
    let out = app.wait_final_within(&token, b["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(out["status"], "CONFIRMED", "{out}");
    wait_balance(&app, &token, "12.00").await;
    let out_e2e = out["endToEndId"].as_str().unwrap();
    let (s, r) = sim.post("/sim/return", json!({"endToEndId": out_e2e, "amount": "3.00"})).await;
    assert_eq!(s, 201, "{r}");
    let p = sim.wait_payment(r["returnId"].as_str().unwrap()).await;
    assert_eq!(p["stage"], "SETTLED", "{p}");
    wait_balance(&app, &token, "15.00").await;
    let (_, list) = app.get_with("/api/transactions?type=REFUND_OUT", &token).await;
    assert_eq!(list["data"][0]["endToEndId"], r["returnId"], "{list}");
    // More than is left of the payment is refused.
    let (_, r) = sim.post("/sim/return", json!({"endToEndId": out_e2e, "amount": "5.01"})).await;
    let p = sim.wait_payment(r["returnId"].as_str().unwrap()).await;
    assert_eq!(p["stage"], "REJECTED", "{p}");
    wait_balance(&app, &token, "15.00").await;
}

impl Sim {
    /// Switches an outage of ICOM's sending or reading half on or off.
    pub async fn outage(&self, sends: bool, reads: bool) {
        let req = self.client.put(format!("{}/sim/icom", self.control));
        let (s, b) = send(req, Some(json!({"sends": sends, "reads": reads}))).await;
        assert_eq!(s, 204, "{b}");
    }

    /// A participant's row of the control route.
    pub async fn participant(&self, ispb: &str) -> Value {
        let (_, b) = self.get("/sim/participants").await;
        b["participants"].as_array().unwrap().iter().find(|p| p["ispb"] == ispb).unwrap().clone()
    }
}

/// SIGKILL, then the same server started again on its data dir.
fn kill_9_and_start_again(app: &mut TestApp, sim: &Sim) {
    let mut child = app.take_child().expect("a subprocess server");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let opts = Options {
        env: vec![("PIXGW_CONFIG".into(), sim.config.display().to_string())],
        ..Options::default()
    };
    app.start_again(&opts);
}

/// kill -9 at each step where a message is in flight: a payout written but not sent, a
/// payout settled by the SPI but its answer not read, a payment in read and accepted but
/// its answer not sent. Each is counted once on both sides: pixgw's balance and the
/// simulator's settlement account move by the same amounts.
#[actix_rt::test]
async fn kill_9_at_each_step_of_a_payment_counts_it_once_on_both_sides() {
    let sim = Sim::start(&["--timeout-ms", "60000"]);
    let mut app = spawn_on(&sim).await;
    let (account, token) = live_account(&app, "Loja Real").await;
    let ours = sim.balance_cents(ISPB).await;
    sim.pay_account(account, "52998224725", "100.00").await;
    wait_balance(&app, &token, "100.00").await;
    let (key, doc, _) = directory_key("EMAIL", 2);

    // 1. Written, not sent: ICOM takes nothing, the server dies, comes back, sends it.
    sim.outage(true, false).await;
    let (s, b) =
        app.post_raw("/api/pix/cash-out", &token, &cash_out(&key, "EMAIL", &doc, "k1", "10.00"), &[]).await;
    assert_eq!(s, 201, "{b}");
    let first = b["transactionId"].as_str().unwrap().to_owned();
    kill_9_and_start_again(&mut app, &sim);
    assert_eq!(
        app.balance(&token).await,
        ("100.00".into(), "10.00".into(), "90.00".into()),
        "acknowledged: still held"
    );
    sim.outage(false, false).await;
    assert_eq!(app.wait_final_within(&token, &first, SETTLE_WAIT_MAX).await["status"], "CONFIRMED");

    // 2. Sent and settled, its answer not read: the server dies, comes back, sends the
    // same message again (taken once), and reads the answer.
    sim.outage(false, true).await;
    let (s, b) =
        app.post_raw("/api/pix/cash-out", &token, &cash_out(&key, "EMAIL", &doc, "k2", "5.00"), &[]).await;
    assert_eq!(s, 201, "{b}");
    let second = b["transactionId"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
    while sim.participant(ISPB).await["paid"].as_u64() != Some(2) {
        assert!(std::time::Instant::now() < deadline, "the SPI did not settle the second payment");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    kill_9_and_start_again(&mut app, &sim);
    sim.outage(false, false).await;
    assert_eq!(app.wait_final_within(&token, &second, SETTLE_WAIT_MAX).await["status"], "CONFIRMED");
    assert_eq!(sim.participant(ISPB).await["paid"], 2, "the message sent again was taken once");

    // 3. A payment in, read and perhaps accepted, its answer not sent: the server dies
    // before it confirms the read; the SPI delivers it again and it is credited once.
    sim.outage(true, false).await;
    let e2e = sim.pay_account(account, "52998224725", "20.00").await;
    let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
    while sim.participant(ISPB).await["unconfirmed"].as_u64().unwrap_or(0) == 0 {
        assert!(std::time::Instant::now() < deadline, "the payment was not read");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    kill_9_and_start_again(&mut app, &sim);
    sim.outage(false, false).await;
    assert_eq!(sim.wait_payment(&e2e).await["stage"], "SETTLED");
    wait_balance(&app, &token, "105.00").await;
    assert_eq!(app.balance(&token).await, ("105.00".into(), "0.00".into(), "105.00".into()));
    let (_, list) = app.get_with("/api/transactions?type=PAYMENT", &token).await;
    assert_eq!(list["metadata"]["total"], 2, "two payments in, each once: {list}");

    // Both books agree: what the account holds is what the settlement account gained.
    assert_eq!(sim.balance_cents(ISPB).await - ours, 10_500);
}

/// A failover on PostgreSQL in the middle of SPI traffic: the leader is killed while
/// cash-outs stream out and the simulator's payer pays in; the standby takes over the rail
/// (payouts written and not answered go out again under the same message ids, what the dead
/// leader read and did not confirm is delivered again) and each side counts every payment
/// once: the ledger equals the settlement account's movement.
#[actix_rt::test]
async fn kill_9_of_the_leader_on_postgres_mid_traffic_counts_every_payment_once_on_both_sides() {
    use crate::postgres::{node, wait_role};
    let Some(cluster) = crate::pg_cluster::PgCluster::start("spi_failover") else { return };
    let url = cluster.database("spi");
    let sim = Sim::start(&[]);
    let config = sim.config.display().to_string();
    let env = [("PIXGW_CONFIG", config.as_str())];
    let mut a = node(&url, &env, true).await;
    a.creds = read_credentials(&a.data_dir());
    let (account, token) = live_account(&a, "Loja Real").await;
    let limits = json!({"limits": {"daily": "100000", "nightly": "100000"}});
    assert_eq!(a.admin("PATCH", &format!("/admin/accounts/{account}"), Some(limits)).await.0, 200);
    let (s, k) =
        a.admin("POST", &format!("/admin/accounts/{account}/keys"), Some(json!({"keyType": "EVP"}))).await;
    assert_eq!(s, 201, "{k}");
    let key = k["key"].as_str().unwrap().to_owned();
    let ours_before = sim.balance_cents(ISPB).await;
    sim.pay_account(account, "52998224725", "500.00").await;
    wait_balance(&a, &token, "500.00").await;
    let mut b = node(&url, &env, false).await;
    b.creds = a.creds.clone();
    wait_role(&b.base, "standby", Duration::from_secs(10)).await;

    // Money in through the kill, at a steady rate, and money out until the kill.
    let (s, l) =
        sim.post("/sim/load", json!({"to": key, "count": 150, "perSecond": 50, "amount": "1.00"})).await;
    assert_eq!(s, 202, "{l}");
    let body_of = |ext: &str| cash_out_body(ext, "1.00");
    let (acked, _) = crate::recovery::stream_then_kill(&mut a, &token, 8, 60, 0, &body_of).await;
    assert!(acked.len() >= 60, "killed after 60 acknowledgements: {}", acked.len());
    wait_role(&b.base, "leader", Duration::from_secs(20)).await;

    // Until everything settled: the 150 payments in, every payout of the account.
    let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
    let ledger = loop {
        let (_, p) = sim.get("/sim/participants").await;
        let ours = p["participants"].as_array().unwrap().iter().find(|p| p["ispb"] == ISPB).unwrap().clone();
        let (gross, blocked, _) = b.balance(&token).await;
        if ours["received"] == 151 && blocked == "0.00" && ours["unconfirmed"] == 0 && ours["queued"] == 0 {
            break gross;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not settled after {SETTLE_WAIT_MAX:?}: {ours}, blocked {blocked}"
        );
        actix_rt::time::sleep(Duration::from_millis(100)).await;
    };
    let ledger_cents: i128 = ledger.replace('.', "").parse().unwrap();
    assert_eq!(
        sim.balance_cents(ISPB).await - ours_before,
        ledger_cents,
        "the ledger is the settlement account"
    );

    // Every acknowledged cash-out is stored once and settled; every PIX in credited once.
    for (ext, id) in &acked {
        let (s, t) = b.get_with(&format!("/api/transactions/{id}"), &token).await;
        assert_eq!(s, 200, "{ext}: {t}");
        assert_eq!(t["status"], "CONFIRMED", "{ext}: {t}");
    }
    let mut received = Vec::new();
    for page in 1.. {
        let (s, list) =
            b.get_with(&format!("/api/transactions?type=PAYMENT&size=100&page={page}"), &token).await;
        assert_eq!(s, 200, "{list}");
        let data = list["data"].as_array().unwrap();
        received.extend(
            data.iter()
                .filter(|t| t["operationType"] == "Pix in")
                .map(|t| t["endToEndId"].as_str().unwrap().to_owned()),
        );
        if list["metadata"]["hasNext"] != true {
            break;
        }
    }
    let unique: std::collections::HashSet<&String> = received.iter().collect();
    assert_eq!((received.len(), unique.len()), (151, 151), "each PIX in credited once");
}

/// Another institution's payload locations, served over TLS on `localhost`: each prepared
/// JWS at `/qr/{name}`, the keys at `/qr/jwks`. Answers the host (`localhost:port`), the CA
/// file to trust, and a signer of that host's payloads.
struct OtherBank {
    host: String,
    ca_file: PathBuf,
    locations: pixgw::http::payload::Locations,
    payloads: Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    _dir: tempfile::TempDir,
}

impl OtherBank {
    fn start() -> OtherBank {
        use actix_web::{web, App, HttpResponse, HttpServer};
        use pixgw::rail::spi::pki::{Authority, Signer, Usage};
        use rustls::pki_types::pem::PemObject;
        let dir = tempfile::tempdir().unwrap();
        let now = time::OffsetDateTime::now_utc();
        let ca =
            Authority::new("Other Bank CA", now - time::Duration::days(1), now + time::Duration::days(30))
                .unwrap();
        let leaf = ca.issue("localhost", &["localhost"], 9, Usage::Server).unwrap();
        let ca_file = dir.path().join("other-bank-ca.pem");
        std::fs::write(&ca_file, &ca.cert_pem).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let host = format!("localhost:{}", listener.local_addr().unwrap().port());
        let chain_pem = format!("{}{}", leaf.cert_pem, ca.cert_pem);
        let signer = Signer::from_pem(leaf.key_pem.as_bytes(), chain_pem.as_bytes(), "other bank").unwrap();
        let chain =
            pixgw::rail::spi::pki::Certificate::all_from_pem(chain_pem.as_bytes(), "other bank").unwrap();
        let locations = pixgw::http::payload::Locations::new(
            pixgw::domain::location::LocationHost::parse(&host).unwrap(),
            Arc::new(signer),
            chain,
            b"other bank's location key".to_vec(),
        )
        .unwrap();
        pixgw::trust::install_provider();
        let certs: Vec<rustls::pki_types::CertificateDer<'static>> =
            rustls::pki_types::CertificateDer::pem_slice_iter(chain_pem.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
        let tls = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key).unwrap();
        let payloads: Arc<std::sync::Mutex<std::collections::HashMap<String, String>>> = Arc::default();
        let (served, jwks) = (Arc::clone(&payloads), locations.jwks().clone());
        let server = HttpServer::new(move || {
            let (served, jwks) = (Arc::clone(&served), jwks.clone());
            App::new()
                .route(
                    "/qr/jwks",
                    web::get().to(move || {
                        let jwks = jwks.clone();
                        async move { HttpResponse::Ok().json(jwks) }
                    }),
                )
                .route(
                    "/qr/{name}",
                    web::get().to(move |name: web::Path<String>| {
                        let found = served.lock().unwrap().get(name.as_str()).cloned();
                        async move {
                            match found {
                                Some(jws) => HttpResponse::Ok().content_type("application/jose").body(jws),
                                None => HttpResponse::NotFound().finish(),
                            }
                        }
                    }),
                )
        })
        .workers(1)
        .listen_rustls_0_23(listener, tls)
        .unwrap()
        .run();
        actix_rt::spawn(server);
        OtherBank { host, ca_file, locations, payloads, _dir: dir }
    }

    /// Serves `jws` at `/qr/{name}`; answers the dynamic BR Code that leads to it.
    fn serve(&self, name: &str, jws: String) -> String {
        self.payloads.lock().unwrap().insert(name.to_owned(), jws);
        pixgw::domain::brcode::generate_dynamic(&format!("{}/qr/{name}", self.host), "Outra Loja", "Recife")
    }
}

#[actix_rt::test]
async fn another_banks_dynamic_qr_code_is_paid_as_its_signed_payload_says_and_a_bad_one_moves_nothing() {
    let sim = Sim::start(&[]);
    let bank = OtherBank::start();
    let opts = Options {
        env: vec![
            ("PIXGW_CONFIG".into(), sim.config.display().to_string()),
            ("PIXGW_SPI_PAYLOAD_CA_FILE".into(), bank.ca_file.display().to_string()),
        ],
        ..Options::default()
    };
    let app = spawn_with(opts).await;
    let (account, token) = live_account(&app, "Pagadora").await;
    sim.pay_account(account, "52998224725", "100.00").await;
    wait_balance(&app, &token, "100.00").await;

    let (key, _, _) = directory_key("EMAIL", 2);
    let now = chrono::Utc::now();
    let cob = |txid: &str, status: &str, original: &str| {
        json!({
            "calendario": {"criacao": pixgw::http::iso(now - chrono::Duration::minutes(1)), "apresentacao": pixgw::http::iso(now), "expiracao": 3600},
            "txid": txid, "revisao": 0, "status": status,
            "valor": {"original": original}, "chave": key,
        })
    };
    let pay = |code: &str, value: &str, ext: &str| {
        format!(r#"{{"value": {value}, "qrCode": "{code}", "externalId": "{ext}"}}"#)
    };

    // A good one: paid at its amount, as a QRDN payment carrying its txid.
    let txid = "outrobancodinamico00000000000001";
    let code = bank.serve("good", bank.locations.sign(&cob(txid, "ATIVA", "12.34")));
    let (s, b) = app.post_raw("/api/pix/cash-out-qrcode", &token, &pay(&code, "12.34", "dyn-1"), &[]).await;
    assert_eq!(s, 201, "{b}");
    let tx = app.wait_final_within(&token, b["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(tx["status"], "CONFIRMED", "{tx}");
    let p = sim.wait_payment(tx["endToEndId"].as_str().unwrap()).await;
    assert_eq!(
        (p["instrument"].as_str(), p["txId"].as_str(), p["cents"].as_i64()),
        (Some("QRDN"), Some(txid), Some(1234)),
        "{p}"
    );
    assert_eq!(app.balance(&token).await.2, "87.66");

    // Each of these is refused before any money moves.
    let mut forged = bank.locations.sign(&cob(txid, "ATIVA", "1.00"));
    let other_payload = bank.locations.sign(&cob(txid, "ATIVA", "99.00"));
    // The signature of one payload over another's text.
    forged = format!("{}.{}", other_payload.rsplit_once('.').unwrap().0, forged.rsplit_once('.').unwrap().1);
    let cases = [
        (bank.serve("forged", forged), "99.00", "signature does not verify"),
        (
            bank.serve("paid", bank.locations.sign(&cob(txid, "CONCLUIDA", "5.00"))),
            "5.00",
            "can no longer be paid",
        ),
        (
            bank.serve("good-again", bank.locations.sign(&cob(txid, "ATIVA", "12.34"))),
            "12.00",
            "must equal the amount",
        ),
        (bank.serve("unsigned", "not a jws".to_owned()), "1.00", "three parts"),
        (
            pixgw::domain::brcode::generate_dynamic(&format!("{}/qr/nothing-here", bank.host), "X", "Y"),
            "1.00",
            "can no longer be paid",
        ),
    ];
    for (i, (code, value, why)) in cases.iter().enumerate() {
        let (s, b) = app
            .post_raw("/api/pix/cash-out-qrcode", &token, &pay(code, value, &format!("bad-{i}")), &[])
            .await;
        assert_eq!(s, 400, "{why}: {b}");
        assert!(b.to_string().contains(why), "{why}: {b}");
    }
    // A location whose TLS certificate chains to a CA this gateway does not trust.
    let stranger = OtherBank::start();
    let code = stranger.serve("good", stranger.locations.sign(&cob(txid, "ATIVA", "1.00")));
    let (s, b) = app.post_raw("/api/pix/cash-out-qrcode", &token, &pay(&code, "1.00", "stranger"), &[]).await;
    assert_eq!(s, 400, "{b}");
    assert!(b.to_string().contains("could not be read"), "{b}");
    assert_eq!(app.balance(&token).await.2, "87.66", "nothing moved");
}

/// Polls until `f` answers something (bounded: [`SETTLE_WAIT_MAX`]).
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "{what} did not happen");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
}

#[actix_rt::test]
async fn a_med_refund_request_of_the_dict_is_analysed_by_the_operator_and_the_money_goes_back_through_the_spi(
) {
    let sim = Sim::start(&[]);
    let opts = Options {
        env: vec![
            ("PIXGW_CONFIG".into(), sim.config.display().to_string()),
            ("PIXGW_SPI_MED_POLL_MS".into(), "100".into()),
        ],
        ..Options::default()
    };
    let app = spawn_with(opts).await;
    let (account, token) = live_account(&app, "Recebedora").await;
    let ours_before = sim.balance_cents(ISPB).await;
    let e2e = sim.pay_account(account, "52998224725", "100.00").await;
    assert_eq!(sim.wait_payment(&e2e).await["stage"], "SETTLED");
    wait_balance(&app, &token, "100.00").await;

    // The payer's institution asks 40.00 back for fraud, through the DICT.
    let ask =
        |amount: &str| json!({"endToEndId": e2e, "amount": amount, "reason": "FRAUD", "details": "golpe"});
    let (s, r) = sim.post("/sim/refund-requests", ask("40.00")).await;
    assert_eq!(s, 201, "{r}");
    let refund_id = r["id"].as_str().unwrap().to_owned();
    // pixgw opens the account's MED once, blocking what it asks.
    let med = eventually("the MED", || {
        let (app, token, refund_id) = (&app, token.clone(), refund_id.clone());
        async move {
            let (_, list) = app.get_with("/api/med", &token).await;
            list["data"].as_array()?.iter().find(|m| m["dictRefundId"] == refund_id.as_str()).cloned()
        }
    })
    .await;
    assert_eq!(
        (med["status"].as_str(), med["endToEnd"].as_str()),
        (Some("RECEIVED"), Some(e2e.as_str())),
        "{med}"
    );
    assert_eq!(serde_json::to_string(&med["blockedAmount"]).unwrap(), "40.00");
    assert_eq!(app.balance(&token).await, ("100.00".into(), "40.00".into(), "60.00".into()));
    // Three more lists of the still-open request later, there is still one MED.
    let (_, r) = sim.get(&format!("/sim/refund-requests/{refund_id}")).await;
    let listed = r["listsServed"].as_u64().unwrap();
    eventually("three more lists", || {
        let (sim, refund_id) = (&sim, refund_id.clone());
        async move {
            let (_, r) = sim.get(&format!("/sim/refund-requests/{refund_id}")).await;
            (r["listsServed"].as_u64()? >= listed + 3).then_some(())
        }
    })
    .await;
    let (_, list) = app.get_with("/api/med", &token).await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");

    // The operator approves it: the blocked amount goes back as a return on the SPI, and the
    // DICT's request is closed naming that return once the SPI settled it.
    let path = format!("/admin/accounts/{account}/med/{}/analysis", med["id"]);
    let (s, analysed) =
        app.admin("POST", &path, Some(json!({"result": "APPROVED", "details": "fraude confirmada"}))).await;
    assert_eq!(s, 200, "{analysed}");
    assert_eq!(analysed["analysisResult"], "APPROVED");
    let closed = eventually("the close in the DICT", || {
        let (sim, refund_id) = (&sim, refund_id.clone());
        async move {
            let (_, r) = sim.get(&format!("/sim/refund-requests/{refund_id}")).await;
            (r["status"] == "CLOSED").then_some(r)
        }
    })
    .await;
    assert_eq!(closed["analysisResult"], "TOTALLY_ACCEPTED", "{closed}");
    let rtr = closed["refundTransactionId"].as_str().unwrap();
    let ret = sim.wait_payment(rtr).await;
    assert_eq!(
        (ret["isReturn"].as_bool(), ret["stage"].as_str(), ret["cents"].as_i64()),
        (Some(true), Some("SETTLED"), Some(4000)),
        "{ret}"
    );
    assert_eq!(app.balance(&token).await, ("60.00".into(), "0.00".into(), "60.00".into()));
    assert_eq!(sim.balance_cents(ISPB).await - ours_before, 6_000, "the settlement account agrees");

    // A second request the operator rejects: released, closed REJECTED, nothing moves.
    let (s, r) = sim.post("/sim/refund-requests", ask("10.00")).await;
    assert_eq!(s, 201, "{r}");
    let second = r["id"].as_str().unwrap().to_owned();
    let med = eventually("the second MED", || {
        let (app, token, second) = (&app, token.clone(), second.clone());
        async move {
            let (_, list) = app.get_with("/api/med", &token).await;
            list["data"].as_array()?.iter().find(|m| m["dictRefundId"] == second.as_str()).cloned()
        }
    })
    .await;
    let path = format!("/admin/accounts/{account}/med/{}/analysis", med["id"]);
    let (s, b) = app.admin("POST", &path, Some(json!({"result": "REJECTED"}))).await;
    assert_eq!(s, 200, "{b}");
    let closed = eventually("the rejection in the DICT", || {
        let (sim, second) = (&sim, second.clone());
        async move {
            let (_, r) = sim.get(&format!("/sim/refund-requests/{second}")).await;
            (r["status"] == "CLOSED").then_some(r)
        }
    })
    .await;
    assert_eq!(
        (closed["analysisResult"].as_str(), closed["refundTransactionId"].as_str()),
        (Some("REJECTED"), None)
    );
    assert_eq!(app.balance(&token).await, ("60.00".into(), "0.00".into(), "60.00".into()));
    assert_eq!(sim.balance_cents(ISPB).await - ours_before, 6_000);
}

/// Two pixgw, each a participant of one `spi-sim` (`--participant` twice, each with the
/// settings file the simulator wrote for it), pay each other through the SPI: the payer's
/// cash-out settles, the payee is credited, and the settlement accounts move by as much.
#[actix_rt::test]
async fn two_participants_of_one_simulator_pay_each_other_with_the_settings_it_wrote_for_each() {
    const SECOND: &str = "5555BBBB";
    let sim = Sim::start(&["--participant", SECOND]);
    let first = spawn_on(&sim).await;
    let second = spawn_with(Options {
        env: vec![("PIXGW_CONFIG".into(), sim.config_of(SECOND).display().to_string())],
        ..Options::default()
    })
    .await;
    let (payer, payer_token) = live_account(&first, "Loja A").await;
    sim.pay_account(payer, "52998224725", "50.00").await;
    wait_balance(&first, &payer_token, "50.00").await;
    let (payee, payee_token) = live_account(&second, "Loja B").await;
    let (s, k) =
        second.admin("POST", &format!("/admin/accounts/{payee}/keys"), Some(json!({"keyType": "EVP"}))).await;
    assert_eq!((s, &k["directory"]), (201, &json!("DICT")), "{k}");
    let key = k["key"].as_str().unwrap();
    let (before_first, before_second) = (sim.balance_cents(ISPB).await, sim.balance_cents(SECOND).await);
    let (s, out) = first
        .post_raw(
            "/api/pix/cash-out",
            &payer_token,
            &cash_out(key, "RANDOM", "52998224725", "a-to-b", "12.34"),
            &[],
        )
        .await;
    assert_eq!(s, 201, "{out}");
    let done =
        first.wait_final_within(&payer_token, out["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(done["status"], "CONFIRMED", "{done}");
    assert_eq!(done["counterpart"]["bank"]["bankISPB"], SECOND, "{done}");
    wait_balance(&second, &payee_token, "12.34").await;
    wait_balance(&first, &payer_token, "37.66").await;
    assert_eq!(sim.balance_cents(ISPB).await, before_first - 1234);
    assert_eq!(sim.balance_cents(SECOND).await, before_second + 1234);
}

/// A payment to a key that another account of this gateway holds (an e-mail registered in
/// the DICT, not its receiving key) is a book transfer: it settles on us and credits that
/// account, and nothing of it reaches the SPI (the SPI refuses a pacs.008 to its own sender's
/// ISPB, AG12).
#[actix_rt::test]
async fn a_payment_to_a_registered_key_of_another_account_of_ours_settles_on_us_and_never_reaches_the_spi() {
    let sim = Sim::start(&[]);
    let app = spawn_on(&sim).await;
    let (payer, payer_token) = live_account(&app, "Loja A").await;
    let e2e = sim.pay_account(payer, "52998224725", "20.00").await;
    assert_eq!(sim.wait_payment(&e2e).await["stage"], "SETTLED");
    wait_balance(&app, &payer_token, "20.00").await;
    let (payee, payee_token) = live_account(&app, "Loja B").await;
    let (s, k) = app
        .admin("POST", &format!("/admin/accounts/{payee}/keys"), Some(json!({"key": "loja.b@example.org"})))
        .await;
    assert_eq!((s, &k["directory"]), (201, &json!("DICT")), "{k}");
    let settlement = sim.balance_cents(ISPB).await;
    let (_, before) = sim.get("/sim/stats").await;
    assert!(
        before["messagesReceived"].as_u64().is_some_and(|n| n > 0),
        "the funding's answer counted: {before}"
    );
    let body = cash_out("loja.b@example.org", "EMAIL", "52998224725", "book-1", "4.00");
    let (s, out) = app.post_raw("/api/pix/cash-out", &payer_token, &body, &[]).await;
    assert_eq!(s, 201, "{out}");
    let done =
        app.wait_final_within(&payer_token, out["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(done["status"], "CONFIRMED", "{done}");
    wait_balance(&app, &payee_token, "4.00").await;
    wait_balance(&app, &payer_token, "16.00").await;
    assert_eq!(sim.balance_cents(ISPB).await, settlement, "the settlement account did not move");
    let (_, after) = sim.get("/sim/stats").await;
    assert_eq!(after["messagesReceived"], before["messagesReceived"], "no message reached the SPI: {after}");
}

/// What the rail reads and cannot apply never blocks a stream: a pacs.002 of a payment that
/// is not ours, an admi.002 whose reference names no message of ours, and a text that is no
/// message are each recorded durably as an unmatched rail item (listed by the
/// reconciliation read with the message itself, counted), their reads confirmed, and a
/// payment delivered after them is credited at once. After a restart they are still listed,
/// once each.
#[actix_rt::test]
async fn a_message_the_rail_cannot_apply_is_kept_as_an_unmatched_item_and_the_stream_goes_on() {
    let sim = Sim::start(&[]);
    let mut app = spawn_on(&sim).await;
    let (account, token) = live_account(&app, "Loja Real").await;
    let first = sim.pay_account(account, "52998224725", "10.00").await;
    assert_eq!(sim.wait_payment(&first).await["stage"], "SETTLED");
    wait_balance(&app, &token, "10.00").await;

    let unknown = format!("E{ISPB}202611281200Xunknownpay");
    let injected = [
        json!({"pacs002": {"endToEndId": unknown, "status": "ACSC"}}),
        json!({"admi002": {"reference": format!("M{ISPB}nothingofours00000001"), "reason": "AB01"}}),
        json!({"unreadable": "this is not an ISO 20022 message"}),
    ];
    for body in injected {
        let (s, b) = sim.post("/sim/inject", body).await;
        assert_eq!(s, 201, "{b}");
    }
    // Behind them on the stream, a payment: credited, not held up.
    let second = sim.pay_account(account, "52998224725", "5.00").await;
    assert_eq!(sim.wait_payment(&second).await["stage"], "SETTLED", "the stream went on");
    wait_balance(&app, &token, "15.00").await;

    let listed = |r: &Value| -> Vec<(String, String)> {
        r["unmatched"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i["kind"].as_str().unwrap().to_owned(), i["reference"].as_str().unwrap().to_owned()))
            .collect()
    };
    let (s, r) = reconciliation(&app).await;
    assert_eq!(s, 200, "{r}");
    let mut items = listed(&r);
    items.sort();
    assert_eq!(items.len(), 3, "{r}");
    assert_eq!(items[0], ("admi.002".to_owned(), format!("M{ISPB}nothingofours00000001")));
    assert_eq!(items[1], ("pacs.002".to_owned(), unknown.clone()));
    assert_eq!(items[2].0, "unreadable");
    for item in r["unmatched"].as_array().unwrap() {
        assert!(!item["why"].as_str().unwrap().is_empty(), "{item}");
        assert!(item["text"].as_str().is_some_and(|t| !t.is_empty()), "the message is kept: {item}");
        assert_eq!(item["digest"].as_str().map(str::len), Some(64), "{item}");
    }
    let pacs002 = r["unmatched"].as_array().unwrap().iter().find(|i| i["kind"] == "pacs.002").unwrap();
    assert!(pacs002["text"].as_str().unwrap().contains(&unknown), "{pacs002}");
    let mut res = app.client.get(app.url("/metrics")).send().await.unwrap();
    let metrics = String::from_utf8(res.body().await.unwrap().to_vec()).unwrap();
    assert!(metrics.contains(r#"pixgw_spi_unmatched_total{kind="pacs.002"} 1"#), "{metrics}");
    assert_eq!(app.balance(&token).await.2, "15.00", "nothing unmatched moved money");

    // Durable, and one item each however often they are read.
    app.restart(&Options {
        env: vec![("PIXGW_CONFIG".into(), sim.config.display().to_string())],
        ..Options::default()
    });
    let (s, r) = reconciliation(&app).await;
    assert_eq!(s, 200, "{r}");
    let mut again = listed(&r);
    again.sort();
    assert_eq!(again, items);

    // A kill -9 while new ones are being read: whatever was not confirmed is delivered
    // again, and each still ends as one item; the stream goes on after the restart.
    let opts = Options {
        env: vec![("PIXGW_CONFIG".into(), sim.config.display().to_string())],
        ..Options::default()
    };
    let fresh: Vec<String> = (0..3).map(|i| format!("E{ISPB}202611281200Xkilledpay{i}")).collect();
    for id in &fresh {
        let (s, b) = sim.post("/sim/inject", json!({"pacs002": {"endToEndId": id, "status": "ACSC"}})).await;
        assert_eq!(s, 201, "{b}");
    }
    let mut child = app.take_child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    app.start_again(&opts);
    let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
    loop {
        let (s, r) = reconciliation(&app).await;
        assert_eq!(s, 200, "{r}");
        let now_listed = listed(&r);
        let killed: Vec<&(String, String)> = now_listed.iter().filter(|(_, id)| fresh.contains(id)).collect();
        if killed.len() == fresh.len() {
            assert_eq!(now_listed.len(), items.len() + fresh.len(), "one item each: {r}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the messages read before the kill: {r}");
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    let third = sim.pay_account(account, "52998224725", "2.00").await;
    assert_eq!(sim.wait_payment(&third).await["stage"], "SETTLED");
    wait_balance(&app, &token, "17.00").await;
}

/// An answer that contradicts a payout's recorded final status changes nothing and is kept
/// for an operator: a refusal (RJCT) of a payout the SPI settled, and a settlement (ACSC) of
/// one it refused, each stay as they were, with the money where it was, and each is an
/// unmatched rail item naming the contradiction.
#[actix_rt::test]
async fn an_answer_contradicting_a_payouts_final_status_changes_nothing_and_is_kept() {
    let sim = Sim::start(&[]);
    let app = spawn_on(&sim).await;
    let (account, token) = funded_account(&app, &sim, "50.00").await;
    let pay = |external: &'static str, key: String, value: &'static str| {
        let app = &app;
        let token = &token;
        async move {
            let (s, b) = app
                .post_raw(
                    "/api/pix/cash-out",
                    token,
                    &cash_out(&key, "EMAIL", "52998224725", external, value),
                    &[],
                )
                .await;
            assert_eq!(s, 201, "{b}");
            app.wait_final_within(token, b["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await
        }
    };
    let (key, _, _) = directory_key("EMAIL", 0);
    let settled = pay("settled-1", key, "10.00").await;
    assert_eq!(settled["status"], "CONFIRMED", "{settled}");
    let refused = pay("refused-1", "ac06@rejeita.spi-sim.pixgw".into(), "5.00").await;
    assert_eq!(refused["status"], "ERROR", "{refused}");
    wait_balance(&app, &token, "40.00").await;

    let (settled_id, refused_id) =
        (settled["endToEndId"].as_str().unwrap(), refused["endToEndId"].as_str().unwrap());
    for body in [
        json!({"pacs002": {"endToEndId": settled_id, "status": "RJCT", "reason": "AB03"}}),
        json!({"pacs002": {"endToEndId": refused_id, "status": "ACSC"}}),
    ] {
        let (s, b) = sim.post("/sim/inject", body).await;
        assert_eq!(s, 201, "{b}");
    }
    // A payment behind them on the stream is credited: they were read and confirmed.
    let later = sim.pay_account(account, "52998224725", "1.00").await;
    assert_eq!(sim.wait_payment(&later).await["stage"], "SETTLED");
    wait_balance(&app, &token, "41.00").await;

    let (s, r) = reconciliation(&app).await;
    assert_eq!(s, 200, "{r}");
    let items = r["unmatched"].as_array().unwrap();
    let about = |id: &str| {
        items.iter().find(|i| i["reference"] == id).unwrap_or_else(|| panic!("no item for {id}: {r}")).clone()
    };
    let why = about(settled_id)["why"].as_str().unwrap().to_owned();
    assert!(why.contains("recorded CONFIRMED") && why.contains("AB03"), "{why}");
    let why = about(refused_id)["why"].as_str().unwrap().to_owned();
    assert!(why.contains("recorded ERROR"), "{why}");
    for (id, status) in [
        (settled["transactionId"].as_str().unwrap(), "CONFIRMED"),
        (refused["transactionId"].as_str().unwrap(), "ERROR"),
    ] {
        let (_, t) = app.get_with(&format!("/api/transactions/{id}"), &token).await;
        assert_eq!(t["status"], status, "a final status stays: {t}");
    }
    assert_eq!(app.balance(&token).await, ("41.00".into(), "0.00".into(), "41.00".into()), "no money moved");
}

/// pixgw on the SPI rail of `sim` with one stream, so what the simulator delivers is read
/// in the order it was queued.
fn one_stream(sim: &Sim) -> Options {
    Options {
        env: vec![
            ("PIXGW_CONFIG".into(), sim.config.display().to_string()),
            ("PIXGW_SPI_STREAMS".into(), "1".into()),
        ],
        ..Options::default()
    }
}

/// The message id pixgw gives the message of payout `id` (outgoing.rs).
fn msg_id_of(id: &str) -> String {
    format!("M{ISPB}{}", &id[9..])
}

/// Polls the simulator until message `msg_id` was posted `n` times; answers its postings.
async fn wait_postings(sim: &Sim, msg_id: &str, n: u64) -> Value {
    let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
    loop {
        let (s, b) = sim.get(&format!("/sim/messages/{msg_id}")).await;
        if s == 200 && b["postings"].as_u64() >= Some(n) {
            return b;
        }
        assert!(std::time::Instant::now() < deadline, "{msg_id} was not posted {n} times: {b}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A cash-out of 10.00 to the receiver that never answers, once the SPI has it: its
/// transaction and end-to-end ids.
async fn pay_the_silent_receiver(app: &TestApp, token: &str, sim: &Sim, external: &str) -> (String, String) {
    let body = cash_out("silencio@spi-sim.pixgw", "EMAIL", "52998224725", external, "10.00");
    let (s, b) = app.post_raw("/api/pix/cash-out", token, &body, &[]).await;
    assert_eq!(s, 201, "{b}");
    let id = b["transactionId"].as_str().unwrap().to_owned();
    let (_, t) = app.get_with(&format!("/api/transactions/{id}"), token).await;
    let e2e = t["endToEndId"].as_str().unwrap().to_owned();
    wait_postings(sim, &msg_id_of(&e2e), 1).await;
    (id, e2e)
}

/// A resend posts the bytes first sent (same message id, same timestamps, same
/// signature), and only the SPI's answer to the original posting ends a payout: a refusal
/// of the repeat changes nothing; a refusal or DUPL named by message id, which may answer
/// either posting, changes nothing and is kept for an operator; the ACSC settles it. A
/// payout whose posting ICOM took is not posted again after a kill -9. A payout posted
/// once fails by an admi.002 naming the resource id its POST got.
#[actix_rt::test]
async fn a_resend_posts_the_same_bytes_and_only_the_answer_to_the_original_ends_a_payout() {
    let sim = Sim::start(&["--timeout-ms", "600000"]);
    let mut app = spawn_with(one_stream(&sim)).await;
    let (_, token) = funded_account(&app, &sim, "50.00").await;
    // Payouts to the receiver that never answers: the SPI holds them, open. The first
    // posting of this one is stored by ICOM but answered 502: its outcome unknown, it is
    // posted again, byte for byte, and ICOM takes that repeat.
    let (s, b) = send(
        sim.client.put(format!("{}/sim/faults", sim.control)),
        Some(json!({"answer502AfterStoring": 1})),
    )
    .await;
    assert_eq!(s, 204, "{b}");
    let repeated = pay_the_silent_receiver(&app, &token, &sim, "held-1").await;
    let posted = wait_postings(&sim, &msg_id_of(&repeated.1), 2).await;
    assert_eq!(posted["distinctBodies"], 1, "a resend is the same bytes: {posted}");
    // Once pixgw has recorded that ICOM took it (the one request answered 201)...
    eventually("the posting recorded", || async {
        metrics_text(&app).await.lines().any(|l| l == "pixgw_spi_postings_recorded_total 1").then_some(())
    })
    .await;

    // ...a kill -9: the start hands it over again, and since ICOM took a posting of it, it
    // waits for the SPI's answer rather than being posted a third time (checked below,
    // once a payout made after the start has been posted).
    let mut child = app.take_child().expect("a subprocess server");
    child.kill().unwrap();
    child.wait().unwrap();
    app.start_again(&one_stream(&sim));
    let once = pay_the_silent_receiver(&app, &token, &sim, "held-2").await;

    let inject = |body: Value| {
        let sim = &sim;
        async move {
            let (s, b) = sim.post("/sim/inject", body).await;
            assert_eq!(s, 201, "{b}");
        }
    };
    // The repeat's refusal, then a DUPL and a refusal named by message id: the last two
    // are kept (read in this order on the one stream), and nothing ends the payout.
    inject(json!({"admi002": {"reference": posted["resourceIds"][1], "reason": "CH16"}})).await;
    inject(json!({"pacs002": {"endToEndId": repeated.1, "status": "RJCT", "reason": "DUPL"}})).await;
    inject(json!({"admi002": {"reference": msg_id_of(&repeated.1), "reason": "CH16"}})).await;
    let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
    let items = loop {
        let (s, r) = reconciliation(&app).await;
        assert_eq!(s, 200, "{r}");
        let items = r["unmatched"].as_array().unwrap().clone();
        if items.len() >= 2 {
            break items;
        }
        assert!(std::time::Instant::now() < deadline, "the refusals were not kept: {r}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(items.len(), 2, "the repeat's refusal is no item: {items:?}");
    for (item, kind) in items.iter().zip(["pacs.002", "admi.002"]) {
        assert_eq!(item["kind"], kind, "{item}");
        assert!(item["why"].as_str().unwrap().contains("posted more than once"), "{item}");
    }
    let (_, t) = app.get_with(&format!("/api/transactions/{}", repeated.0), &token).await;
    assert_eq!(t["status"], "PENDING", "no answer to a copy ends it: {t}");
    // The SPI's settlement of it does.
    inject(json!({"pacs002": {"endToEndId": repeated.1, "status": "ACSC"}})).await;
    assert_eq!(app.wait_final_within(&token, &repeated.0, SETTLE_WAIT_MAX).await["status"], "CONFIRMED");

    // One posted once fails by the refusal naming the resource id its POST got (read the
    // instant ICOM answered it, or later).
    let first_only = wait_postings(&sim, &msg_id_of(&once.1), 1).await;
    assert_eq!(first_only["postings"], 1, "{first_only}");
    let (_, after_start) = sim.get(&format!("/sim/messages/{}", msg_id_of(&repeated.1))).await;
    assert_eq!(after_start["postings"], 2, "taken by ICOM: not posted again after the start: {after_start}");
    inject(json!({"admi002": {"reference": first_only["resourceIds"][0], "reason": "CH16"}})).await;
    let failed = app.wait_final_within(&token, &once.0, SETTLE_WAIT_MAX).await;
    assert_eq!(failed["status"], "ERROR", "{failed}");
    wait_balance(&app, &token, "40.00").await;
    assert_eq!(app.balance(&token).await, ("40.00".into(), "0.00".into(), "40.00".into()));
}

/// The text of `GET /metrics`.
pub async fn metrics_text(app: &TestApp) -> String {
    let mut res = app.client.get(app.url("/metrics")).send().await.unwrap();
    String::from_utf8(res.body().limit(8 << 20).await.unwrap().to_vec()).unwrap()
}

/// An admin request with a given operator's token.
async fn admin_as(app: &TestApp, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let req = app.client.request(method.parse().unwrap(), app.url(path)).bearer_auth(token);
    send(req, body).await
}

/// Proposes a resolution as the operator of `token`: `subject` (`{"payout": id}` or
/// `{"unmatched": digest}`) closed with `outcome`, with some evidence.
async fn propose_as(app: &TestApp, token: &str, subject: Value, outcome: &str) -> (u16, Value) {
    let mut body = subject;
    body["outcome"] = json!(outcome);
    body["evidence"] = json!("settlement statement of 28/11: no debit for this id");
    admin_as(app, token, "POST", "/admin/rail/resolutions", Some(body)).await
}

/// Polls the reconciliation read until it lists an unmatched item; answers the oldest.
async fn first_unmatched(app: &TestApp) -> Value {
    let deadline = std::time::Instant::now() + SETTLE_WAIT_MAX;
    loop {
        let (_, r) = reconciliation(app).await;
        if let Some(i) = r["unmatched"].as_array().unwrap().first() {
            return i.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no unmatched item was kept: {r}");
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A payout with no answer from the SPI past its limit is listed as aged with the message
/// kept for it (the catalogue has no status query), shown by a gauge, and closed only by
/// two operators: one proposes with the evidence, another approves; then it takes effect.
/// An unmatched item is closed the same way and stops counting as open.
#[actix_rt::test]
async fn an_aged_payout_and_an_unmatched_item_are_closed_by_two_operators_with_the_evidence() {
    use std::os::unix::fs::PermissionsExt;
    const ANA: &str = "ana-admin-token-0123456789012";
    const BIA: &str = "bia-admin-token-0123456789012";
    let sim = Sim::start(&["--timeout-ms", "600000"]);
    let keys = tempfile::tempdir().unwrap();
    let file = keys.path().join("admin-tokens");
    std::fs::write(&file, format!("ana {ANA}\nbia {BIA}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut opts = one_stream(&sim);
    opts.env.push(("PIXGW_ADMIN_TOKEN_FILE".into(), file.display().to_string()));
    let app = spawn_with(opts).await;
    assert_eq!(app.creds.admin_token, ANA, "the first operator's token is the one tests use");
    let (_, token) = funded_account(&app, &sim, "50.00").await;
    let (tx_id, e2e) = pay_the_silent_receiver(&app, &token, &sim, "aged-1").await;

    // Within the SPI's limit the SPI may still answer: no resolution yet.
    let (s, b) = propose_as(&app, ANA, json!({"payout": e2e}), "FAILED").await;
    assert_eq!(s, 409, "{b}");
    let (_, r) = reconciliation(&app).await;
    assert_eq!(r["payoutsAged"], json!([]), "{r}");

    app.advance(120).await;
    let (_, r) = reconciliation(&app).await;
    let aged = r["payoutsAged"].as_array().unwrap();
    assert_eq!(aged.len(), 1, "{r}");
    assert_eq!((aged[0]["id"].as_str(), aged[0]["value"].as_str()), (Some(e2e.as_str()), Some("10.00")));
    assert_eq!(aged[0]["message"]["msgId"], msg_id_of(&e2e), "{r}");
    assert_eq!(aged[0]["message"]["attempts"], 1, "{r}");
    let metrics = metrics_text(&app).await;
    assert!(metrics.contains("pixgw_spi_payouts_pending{age=\"aged\"} 1"), "{metrics}");

    // Bad proposals change nothing.
    for (body, field) in [
        (json!({"payout": e2e, "outcome": "FAILED", "evidence": "short"}), "evidence"),
        (json!({"payout": e2e, "outcome": "DISMISSED", "evidence": "a long enough evidence"}), "outcome"),
        (
            json!({"payout": e2e, "unmatched": "ab", "outcome": "FAILED", "evidence": "a long enough evidence"}),
            "unmatched",
        ),
    ] {
        let (s, b) = admin_as(&app, ANA, "POST", "/admin/rail/resolutions", Some(body)).await;
        assert_eq!(s, 400, "{b}");
        assert!(b.to_string().contains(field), "{b}");
    }
    let (s, b) = propose_as(&app, ANA, json!({"payout": "E0000"}), "FAILED").await;
    assert_eq!(s, 404, "{b}");

    let (s, proposed) = propose_as(&app, ANA, json!({"payout": e2e}), "FAILED").await;
    assert_eq!(s, 201, "{proposed}");
    assert_eq!(
        (proposed["status"].as_str(), proposed["proposedBy"].as_str()),
        (Some("PROPOSED"), Some("ana"))
    );
    let approval = format!("/admin/rail/resolutions/{}/approval", proposed["id"].as_str().unwrap());
    let (s, b) = admin_as(&app, ANA, "POST", &approval, None).await;
    assert_eq!(s, 409, "the proposer cannot approve: {b}");
    let (_, t) = app.get_with(&format!("/api/transactions/{tx_id}"), &token).await;
    assert_eq!(t["status"], "PENDING", "a proposal alone changes nothing: {t}");
    let (s, approved) = admin_as(&app, BIA, "POST", &approval, None).await;
    assert_eq!(s, 200, "{approved}");
    assert_eq!(
        (approved["status"].as_str(), approved["approvedBy"].as_str()),
        (Some("APPROVED"), Some("bia"))
    );
    assert_eq!(app.wait_final_within(&token, &tx_id, SETTLE_WAIT_MAX).await["status"], "ERROR");
    wait_balance(&app, &token, "50.00").await;
    let (s, b) = admin_as(&app, BIA, "POST", &approval, None).await;
    assert_eq!(s, 409, "approved once: {b}");

    // An unmatched item: a status of nothing of ours.
    let (s, b) = sim
        .post(
            "/sim/inject",
            json!({"pacs002": {"endToEndId": "E9999999920261128120000000000000", "status": "ACSC"}}),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    let digest = first_unmatched(&app).await["digest"].as_str().unwrap().to_owned();
    let (s, b) = propose_as(&app, BIA, json!({"unmatched": digest}), "SETTLED").await;
    assert_eq!(s, 400, "an item is dismissed, not settled: {b}");
    let (s, proposed) = propose_as(&app, BIA, json!({"unmatched": digest}), "DISMISSED").await;
    assert_eq!(s, 201, "{proposed}");
    let approval = format!("/admin/rail/resolutions/{}/approval", proposed["id"].as_str().unwrap());
    let (s, b) = admin_as(&app, ANA, "POST", &approval, None).await;
    assert_eq!(s, 200, "{b}");
    let (_, r) = reconciliation(&app).await;
    let item = &r["unmatched"][0];
    assert_eq!(
        (item["resolution"]["proposedBy"].as_str(), item["resolution"]["approvedBy"].as_str()),
        (Some("bia"), Some("ana")),
        "{r}"
    );
    let metrics = metrics_text(&app).await;
    assert!(metrics.contains("pixgw_spi_unmatched_open 0"), "{metrics}");
    assert!(metrics.contains("pixgw_spi_payouts_pending{age=\"aged\"} 0"), "{metrics}");
    let (s, list) = admin_as(&app, BIA, "GET", "/admin/rail/resolutions", None).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["resolutions"].as_array().unwrap().len(), 2, "{list}");
    assert_eq!(app.balance(&token).await, ("50.00".into(), "0.00".into(), "50.00".into()));
}

/// ICOM's faults on a post: a 408, and a 429 whose `Retry-After` is an HTTP date, stored
/// nothing and are tried again (the payout settles). A 502 after the SPI stored the message
/// leaves its outcome unknown: the next posting is the same bytes, counted as a repeat, so a
/// refusal named by message id fails nothing (it is kept) and the SPI's settlement ends it.
#[actix_rt::test]
async fn icom_faults_on_a_post_are_tried_again_and_a_post_of_unknown_outcome_counts_as_sent() {
    let sim = Sim::start(&["--timeout-ms", "600000"]);
    let app = spawn_with(one_stream(&sim)).await;
    let (_, token) = funded_account(&app, &sim, "50.00").await;
    let faults = |body: Value| {
        let sim = &sim;
        async move {
            let (s, b) = send(sim.client.put(format!("{}/sim/faults", sim.control)), Some(body)).await;
            assert_eq!(s, 204, "{b}");
        }
    };

    faults(json!({"answer408": 1, "answer429HttpDate": 1})).await;
    let (key, doc, _) = directory_key("EMAIL", 1);
    let (s, b) =
        app.post_raw("/api/pix/cash-out", &token, &cash_out(&key, "EMAIL", &doc, "f-1", "5.00"), &[]).await;
    assert_eq!(s, 201, "{b}");
    let paid = app.wait_final_within(&token, b["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(paid["status"], "CONFIRMED", "{paid}");
    let posted = wait_postings(&sim, &msg_id_of(paid["endToEndId"].as_str().unwrap()), 1).await;
    assert_eq!(posted["postings"], 1, "the refused posts stored nothing: {posted}");

    faults(json!({"answer502AfterStoring": 1})).await;
    let (tx_id, e2e) = pay_the_silent_receiver(&app, &token, &sim, "f-2").await;
    let posted = wait_postings(&sim, &msg_id_of(&e2e), 2).await;
    assert_eq!(posted["distinctBodies"], 1, "{posted}");
    let (s, b) =
        sim.post("/sim/inject", json!({"admi002": {"reference": msg_id_of(&e2e), "reason": "CH16"}})).await;
    assert_eq!(s, 201, "{b}");
    let item = first_unmatched(&app).await;
    assert!(item["why"].as_str().unwrap().contains("posted more than once"), "{item}");
    let (_, t) = app.get_with(&format!("/api/transactions/{tx_id}"), &token).await;
    assert_eq!(t["status"], "PENDING", "{t}");
    let (s, b) = sim.post("/sim/inject", json!({"pacs002": {"endToEndId": e2e, "status": "ACSC"}})).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(app.wait_final_within(&token, &tx_id, SETTLE_WAIT_MAX).await["status"], "CONFIRMED");
    wait_balance(&app, &token, "35.00").await;
}

/// A payment in is credited only to the payment account it names, and only when the key it
/// names (if any) is ours and that account's; each refusal is answered with the
/// catalogue's reason and credits nothing.
#[actix_rt::test]
async fn a_payment_in_that_breaks_the_receiving_rules_is_refused_with_its_reason_and_credits_nothing() {
    let sim = Sim::start(&[]);
    let app = spawn_on(&sim).await;
    let (a, a_token) = live_account(&app, "Loja A").await;
    let (b, b_token) = live_account(&app, "Loja B").await;
    let (s, k) =
        app.admin("POST", &format!("/admin/accounts/{a}/keys"), Some(json!({"keyType": "EVP"}))).await;
    assert_eq!(s, 201, "{k}");
    let key = k["key"].as_str().unwrap().to_owned();
    let doc = "52998224725";
    let pay = |to: Option<&str>, number: String, kind: &str, document: &str| {
        let mut body = json!({
            "toAccount": {"ispb": ISPB, "number": number, "document": document, "type": kind},
            "amount": "1000.00",
        });
        if let Some(k) = to {
            body["to"] = json!(k);
        }
        let sim = &sim;
        async move {
            let (s, b) = sim.post("/sim/pix", body).await;
            assert_eq!(s, 201, "{b}");
            sim.wait_payment(b["endToEndId"].as_str().unwrap()).await
        }
    };
    for (to, number, kind, document, reason) in [
        // Account 777 does not exist; the key named is account A's.
        (Some(key.as_str()), "777".to_owned(), "TRAN", doc, "AC03"),
        // The key is A's, the account B's.
        (Some(key.as_str()), b.to_string(), "TRAN", doc, "AC03"),
        // A key no account of ours holds.
        (Some("d6a4e2b1-0c5e-4f6a-9b8d-2f1e3c4a5b6c"), a.to_string(), "TRAN", doc, "AC03"),
        // A current account: ours are payment accounts.
        (None, a.to_string(), "CACC", doc, "AC14"),
        // Another holder's tax id.
        (None, a.to_string(), "TRAN", "11144477735", "BE01"),
    ] {
        let p = pay(to, number.clone(), kind, document).await;
        assert_eq!(
            (p["stage"].as_str(), p["reason"].as_str()),
            (Some("REJECTED"), Some(reason)),
            "{number} {kind}: {p}"
        );
    }
    // The payment that keeps every rule is credited.
    let p = pay(Some(&key), a.to_string(), "TRAN", doc).await;
    assert_eq!(p["stage"], "SETTLED", "{p}");
    wait_balance(&app, &a_token, "1000.00").await;
    assert_eq!(app.balance(&a_token).await.0, "1000.00", "credited once, and only that");
    assert_eq!(app.balance(&b_token).await.0, "0.00");
}

/// A store made by `pixgw restore` holds its rail: the node serves, but reads nothing from
/// the SPI and sends nothing until an operator releases it (here by the admin route), and
/// then what waited goes: the payment that arrived meanwhile is credited, the payout
/// settles, and a payout that waited past the bound to leave (the test clock moved on)
/// fails unsent with its amount released. The release is stored: a restart does not hold
/// it again. `pixgw rail release` does the same to a stopped store.
#[actix_rt::test]
async fn a_restored_store_holds_its_rail_until_an_operator_releases_it() {
    let sim = Sim::start(&["--timeout-ms", "600000"]);
    let mut app = spawn_on(&sim).await;
    let (account, token) = funded_account(&app, &sim, "50.00").await;
    let work = Arc::new(tempfile::tempdir().unwrap());
    let backup = work.path().join("backup");
    let out = crate::backup::backup_cli(&app, &backup);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The primary is gone; its copy is restored (twice: one for the command line).
    let mut child = app.take_child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let restored = Arc::new(tempfile::tempdir().unwrap());
    let offline = work.path().join("offline");
    for dir in [restored.path(), offline.as_path()] {
        let out = crate::backup::restore_cli(&backup, dir);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    let log = work.path().join("restored.log");
    let mut opts = one_stream(&sim);
    opts.stderr = Some(log.clone());
    // Two payouts may wait for the rail; the next payment is refused at the door.
    opts.env.push(("PIXGW_SPI_PAYOUT_BACKLOG_MAX".into(), "2".into()));
    let (child, base) = crate::helpers::start_process(restored.path(), &opts);
    let mut copy = TestApp::adopt(base, Arc::clone(&restored), child);
    copy.creds = app.creds.clone();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("the SPI rail is held"), "{text}");
    assert!(metrics_text(&copy).await.contains("pixgw_spi_rail_held 1"));
    // A payment on us needs no rail: it settles while the rail is held.
    let (shop, shop_token) = live_account(&copy, "Loja Vizinha").await;
    let (s, k) =
        copy.admin("POST", &format!("/admin/accounts/{shop}/keys"), Some(json!({"keyType": "EVP"}))).await;
    assert_eq!(s, 201, "{k}");
    let on_us = format!(
        r#"{{"value": 2.00, "externalId": "dr-on-us", "details": {{"key": "{}", "keyType": "RANDOM", "name": "Loja", "document": "52998224725"}}}}"#,
        k["key"].as_str().unwrap()
    );
    let (s, b) = copy.post_raw("/api/pix/cash-out", &token, &on_us, &[]).await;
    assert_eq!(s, 201, "{b}");
    let paid = copy.wait_final_within(&token, b["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await;
    assert_eq!(paid["status"], "CONFIRMED", "{paid}");
    wait_balance(&copy, &shop_token, "2.00").await;
    let arrived = sim.pay_account(account, "52998224725", "5.00").await;
    let (key, doc, _) = directory_key("EMAIL", 0);
    let (s, b) = copy
        .post_raw("/api/pix/cash-out", &token, &cash_out(&key, "EMAIL", &doc, "dr-1", "10.00"), &[])
        .await;
    assert_eq!(s, 201, "the API serves while the rail is held: {b}");
    let late = b["transactionId"].as_str().unwrap().to_owned();
    let (_, t) = copy.get_with(&format!("/api/transactions/{late}"), &token).await;
    assert_eq!(t["status"], "PENDING", "{t}");
    // The server clock moves on while the rail is held: the first payout will have waited
    // past the bound a payout may leave within (15 s), the second not.
    copy.advance(10).await;
    let (s, b) =
        copy.post_raw("/api/pix/cash-out", &token, &cash_out(&key, "EMAIL", &doc, "dr-2", "1.00"), &[]).await;
    assert_eq!(s, 201, "{b}");
    let payout = b["transactionId"].as_str().unwrap().to_owned();
    // The door counts a payout in once the rail is handed it, just after the 201.
    eventually("two payouts waiting", || async {
        metrics_text(&copy).await.lines().any(|l| l == "pixgw_spi_payout_backlog 2").then_some(())
    })
    .await;
    let (s, b) =
        copy.post_raw("/api/pix/cash-out", &token, &cash_out(&key, "EMAIL", &doc, "dr-3", "1.00"), &[]).await;
    assert_eq!(s, 503, "the rail has as many payouts waiting as it may: {b}");
    assert!(b.to_string().contains("more payments waiting"), "{b}");
    assert_eq!(copy.balance(&token).await.1, "11.00", "the refused one blocked nothing");
    let (_, p) = sim.get(&format!("/sim/payments/{arrived}")).await;
    assert_eq!(p["stage"], "AWAITING_RECEIVER", "nobody read it: {p}");
    let late_msg = msg_id_of(t["endToEndId"].as_str().unwrap());
    let (s, _) = sim.get(&format!("/sim/messages/{late_msg}")).await;
    assert_eq!(s, 404, "the payout was not sent");
    copy.advance(6).await;

    let (s, r) = copy.admin("POST", "/admin/rail/release", None).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["released"], true, "{r}");
    assert!(r["heldBecause"].as_str().unwrap().contains("restored"), "{r}");
    assert_eq!(sim.wait_payment(&arrived).await["stage"], "SETTLED");
    assert_eq!(copy.wait_final_within(&token, &payout, SETTLE_WAIT_MAX).await["status"], "CONFIRMED");
    // Too late to leave (16 s after its debit): it fails unsent and its amount comes back.
    let failed = copy.wait_final_within(&token, &late, SETTLE_WAIT_MAX).await;
    assert_eq!(failed["status"], "ERROR", "{failed}");
    assert_eq!(failed["errorCode"], "PAYMENT_EXPIRED", "{failed}");
    assert!(failed.to_string().contains("NOT_SENT_IN_TIME"), "{failed}");
    let (s, _) = sim.get(&format!("/sim/messages/{late_msg}")).await;
    assert_eq!(s, 404, "the late payout was never sent");
    wait_balance(&copy, &token, "52.00").await;
    // Stored: a restart is not held again.
    let mut child = copy.take_child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    copy.start_again(&one_stream(&sim));
    assert!(metrics_text(&copy).await.contains("pixgw_spi_rail_held 0"));
    let (s, r) = copy.admin("POST", "/admin/rail/release", None).await;
    assert_eq!((s, &r["released"]), (200, &json!(false)), "{r}");

    // Offline, on a stopped store.
    let release = |dir: &std::path::Path| {
        let out = Command::new(bin()).args(["rail", "release", "--data-dir"]).arg(dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(release(&offline).contains("it was held: restored"));
    assert!(release(&offline).contains("was not held"));
}

/// The DICT out of its window: a payment that needs a lookup is answered 503 with
/// `Retry-After` (an outage of the directory, not a fault of the gateway), records nothing,
/// and leaves its Idempotency-Key free: the same request once the DICT is back pays once.
#[actix_rt::test]
async fn a_dict_outage_answers_503_with_retry_after_and_records_nothing() {
    let sim = Sim::start(&[]);
    let app = spawn_on(&sim).await;
    let (_, token) = funded_account(&app, &sim, "20.00").await;
    let dict = |down: bool| {
        let sim = &sim;
        async move {
            let req = sim.client.put(format!("{}/sim/icom", sim.control));
            let (s, b) = send(req, Some(json!({"dict": down}))).await;
            assert_eq!(s, 204, "{b}");
        }
    };
    dict(true).await;
    let (key, doc, _) = directory_key("EMAIL", 3);
    let body = cash_out(&key, "EMAIL", &doc, "dict-down", "5.00");
    let headers = [("Idempotency-Key", "dict-down-1")];
    let url = app.url("/api/pix/cash-out");
    let mut res = app
        .client
        .post(&url)
        .bearer_auth(&token)
        .insert_header(("Content-Type", "application/json"))
        .insert_header(headers[0])
        .send_body(body.clone())
        .await
        .unwrap();
    let status = res.status().as_u16();
    let raw = res.body().await.unwrap();
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&raw));
    assert_eq!(res.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("5"));
    let answer: Value = serde_json::from_slice(&raw).unwrap();
    assert!(answer.to_string().contains("key directory"), "{answer}");
    assert_eq!(
        app.balance(&token).await,
        ("20.00".into(), "0.00".into(), "20.00".into()),
        "nothing recorded"
    );
    dict(false).await;
    let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body, &headers).await;
    assert_eq!(s, 201, "the key is free again: {b}");
    assert_eq!(
        app.wait_final_within(&token, b["transactionId"].as_str().unwrap(), SETTLE_WAIT_MAX).await["status"],
        "CONFIRMED"
    );
    wait_balance(&app, &token, "15.00").await;
}

async fn sim_stats(sim: &Sim) -> Value {
    let (s, b) = sim.get("/sim/stats").await;
    assert_eq!(s, 200, "{b}");
    b
}

/// Streams are closed with `DELETE`, never left to expire: a killed run's stream at the
/// next start (where it was written down, every read before it carried out), and every
/// stream at a graceful stop. ICOM never expires one, and the participant never holds more
/// than its readers' streams.
#[actix_rt::test]
async fn a_stop_closes_the_streams_and_a_start_closes_those_a_killed_run_left() {
    // Streams never expire here: only a DELETE closes one.
    let sim = Sim::start(&["--stream-idle-ms", "600000"]);
    let opts = one_stream(&sim);
    let mut app = spawn_with(opts.clone()).await;
    funded_account(&app, &sim, "10.00").await;
    // Reading fails from now on: the reader's stream stays where its last read left it,
    // which it wrote down before asking (a refused read comes after the write).
    sim.outage(false, true).await;
    eventually("a read refused", || async {
        (sim_stats(&sim).await["readsRefused"].as_u64() >= Some(1)).then_some(())
    })
    .await;
    let before = sim_stats(&sim).await;
    assert_eq!(before["streamsOpen"], 1, "{before}");
    assert_eq!(before["streamsClosed"], 0, "{before}");

    let mut child = app.take_child().unwrap();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    app.start_again(&opts);
    // The start closes the stream the killed run left before it opens its own.
    let closed = eventually("the left stream closed", || async {
        let st = sim_stats(&sim).await;
        (st["streamsClosed"] == 1).then_some(st)
    })
    .await;
    assert_eq!(closed["streamsOpen"], 0, "the outage refuses the new stream: {closed}");
    sim.outage(false, false).await;
    eventually("a new stream", || async { (sim_stats(&sim).await["streamsOpen"] == 1).then_some(()) }).await;
    // The rail reads on that stream: a payment in is credited.
    let (account, token) = live_account(&app, "Outra Loja").await;
    sim.pay_account(account, "52998224725", "3.00").await;
    wait_balance(&app, &token, "3.00").await;

    // A graceful stop closes it.
    assert!(app.stop().success());
    let after = sim_stats(&sim).await;
    assert_eq!(after["streamsOpen"], 0, "{after}");
    assert_eq!(after["streamsClosed"], 2, "{after}");
    assert_eq!(after["streamsExpired"], 0, "{after}");
    assert_eq!(after["streamsRefused"], 0, "{after}");
    // What was read before the stop stays read: a start gives nothing again.
    app.start_again(&opts);
    wait_balance(&app, &token, "3.00").await;
    assert_eq!(sim_stats(&sim).await["messagesSent"], after["messagesSent"]);
}

/// Every ICOM fault at once, each at a steady rate (`/sim/faults` `every`): posts refused
/// (408, 429, 500) or stored and then dropped, reads refused (408, 429, 500) or delivered
/// and lost, messages delivered twice, statuses held back. Money still moves once each way:
/// every payment settles, the balance and the settlement account move by the same amount,
/// and nothing is left unmatched (a message delivered twice is applied once).
#[actix_rt::test]
async fn under_every_icom_fault_at_a_steady_rate_each_payment_moves_money_once_on_both_sides() {
    let sim = Sim::start(&["--stream-idle-ms", "1000", "--timeout-ms", "60000"]);
    let app = spawn_on(&sim).await;
    let (account, token) = funded_account(&app, &sim, "20.00").await;
    let ours_before = sim.balance_cents(ISPB).await;
    let every = json!({"every": {
        "post408": 5, "post429": 7, "post500": 4, "postReset": 3,
        "read408": 9, "read429": 11, "read500": 6, "readDropped": 4,
        "duplicate": 3, "lateStatus": 4, "lateMs": 1500
    }});
    let (s, b) = send(sim.client.put(format!("{}/sim/faults", sim.control)), Some(every)).await;
    assert_eq!(s, 204, "{b}");

    const EACH_WAY: usize = 8;
    let mut outs = Vec::new();
    for n in 0..EACH_WAY {
        let (key, doc, _) = directory_key("EMAIL", n % 4);
        let body = cash_out(&key, "EMAIL", &doc, &format!("faulty-{n}"), "1.00");
        let (s, b) = app.post_raw("/api/pix/cash-out", &token, &body, &[]).await;
        assert_eq!(s, 201, "{b}");
        outs.push(b["transactionId"].as_str().unwrap().to_owned());
    }
    let mut ins = Vec::new();
    for _ in 0..EACH_WAY {
        ins.push(sim.pay_account(account, "52998224725", "2.00").await);
    }
    for id in &ins {
        assert_eq!(sim.wait_payment(id).await["stage"], "SETTLED", "{id}");
    }
    for id in &outs {
        let tx = app.wait_final_within(&token, id, SETTLE_WAIT_MAX).await;
        assert_eq!(tx["status"], "CONFIRMED", "{tx}");
        let e2e = tx["endToEndId"].as_str().unwrap();
        assert_eq!(sim.wait_payment(e2e).await["stage"], "SETTLED", "{e2e}");
    }
    // 20.00 - 8 x 1.00 + 8 x 2.00, once each.
    wait_balance(&app, &token, "28.00").await;
    assert_eq!(
        sim.balance_cents(ISPB).await - ours_before,
        800,
        "the settlement account moved as the ledger did"
    );
    let stats = sim_stats(&sim).await;
    for kind in [
        "post408",
        "post429",
        "post500",
        "postReset",
        "read408",
        "read500",
        "readDropped",
        "duplicate",
        "lateStatus",
    ] {
        assert!(stats["faultsPlayed"][kind].as_u64() >= Some(1), "{kind} was never played: {stats}");
    }
    let (s, r) = reconciliation(&app).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["unmatched"].as_array().map(Vec::len), Some(0), "{r}");
    // The transactions: each payment once.
    let (_, list) = app.get_with("/api/transactions?size=100", &token).await;
    let rows = list["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1 + 2 * EACH_WAY, "the funding and each payment once: {list}");
}
