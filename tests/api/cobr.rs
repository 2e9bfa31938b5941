//! Recurring charges through the real server, on the test clock: a cycle settled on its day
//! as a received PIX (balance, `GET /pix` with its txid, a refund), a failed cycle retried to
//! success, a cycle failed past its last retry, a cycle per charge, cancellation by the
//! receiver and with the recurrence, the `cobr` webhooks, and a kill -9 before and after
//! the settlement day that pays the cycle once.

use chrono::{Duration, NaiveDate, Utc};
use serde_json::{json, Value};

use crate::helpers::{spawn_with, Options, TestApp};
use crate::rec::{in_hours, patch, post, rec_body, solic_body};
use crate::receiver::{signature_verifies, Receiver};

/// Today in São Paulo, by the system's clock (a fresh app's clock is the system's).
pub fn today() -> NaiveDate {
    (Utc::now() - Duration::hours(3)).date_naive()
}

/// Seconds to move a fresh clock (already moved by `moved`) to 00:00:05 of `day` in São
/// Paulo.
pub fn seconds_to(day: NaiveDate, moved: i64) -> i64 {
    let start = day.and_hms_opt(3, 0, 5).unwrap().and_utc();
    (start - Utc::now()).num_seconds() - moved
}

/// An approved recurrence (monthly from tomorrow, 30.00 fixed) under `policy`: its idRec.
pub async fn approved(app: &TestApp, token: &str, policy: &str) -> String {
    let mut body = rec_body(json!({"valorRec": "30.00"}));
    body["politicaRetentativa"] = json!(policy);
    approved_as(app, token, body).await.1
}

/// The recurrence `body` makes, approved by the sandbox's payer: as it was made, and its idRec.
pub async fn approved_as(app: &TestApp, token: &str, body: Value) -> (Value, String) {
    let (s, r) = post(app, "/rec", token, body).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, sol) = post(app, "/solicrec", token, solic_body(&id, &in_hours(24))).await;
    assert_eq!(s, 201, "{sol}");
    let path = format!("/sandbox/solicrec/{}/answer", sol["idSolicRec"].as_str().unwrap());
    let (s, a) = post(app, &path, token, json!({"decision": "APPROVE"})).await;
    assert_eq!(s, 200, "{a}");
    (r, id)
}

pub fn cobr_body(id_rec: &str, due: NaiveDate) -> Value {
    json!({"idRec": id_rec, "calendario": {"dataDeVencimento": due.to_string()}, "valor": {"original": "30.00"},
        "ajusteDiaUtil": false, "infoAdicional": "cycle 1"})
}

/// A charge made with a scenario: its view.
pub async fn charge(app: &TestApp, token: &str, txid: &str, body: Value, scenario: &str) -> Value {
    let req = awc::Client::new()
        .put(app.url(&format!("/cobr/{txid}")))
        .bearer_auth(token)
        .insert_header(("X-Sandbox-Scenario", scenario));
    let (s, c) = crate::helpers::send(req, Some(body)).await;
    assert_eq!(s, 201, "{c}");
    c
}

pub async fn cobr(app: &TestApp, txid: &str) -> Value {
    let token = app.demo_token().await;
    let (s, c) = app.get_with(&format!("/cobr/{txid}"), &token).await;
    assert_eq!(s, 200, "{c}");
    c
}

fn attempts(c: &Value) -> Vec<(String, String)> {
    c["tentativas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["tipo"].as_str().unwrap().to_owned(), t["status"].as_str().unwrap().to_owned()))
        .collect()
}

/// The account's net balance.
pub async fn net(app: &TestApp) -> pixgw::domain::money::Money {
    let token = app.demo_token().await;
    let (_, _, net) = app.balance(&token).await;
    pixgw::domain::money::Money::parse(&net).unwrap()
}

pub fn plus(m: pixgw::domain::money::Money, text: &str) -> pixgw::domain::money::Money {
    m.checked_add(pixgw::domain::money::Money::parse(text).unwrap()).unwrap()
}

fn hooked() -> Options {
    Options {
        env: vec![
            ("PIXGW_WEBHOOK_ALLOW_HTTP".into(), "1".into()),
            ("PIXGW_WEBHOOK_ALLOW_PRIVATE".into(), "1".into()),
            ("PIXGW_SIM_SETTLE_MS".into(), "20".into()),
        ],
        ..Default::default()
    }
}

#[actix_rt::test]
async fn a_cycle_settles_on_its_day_as_a_received_pix_that_can_be_refunded() {
    let app = spawn_with(hooked()).await;
    let token = app.demo_token().await;
    let mut hooks = Receiver::ok();
    for t in ["cobr", "cash_in"] {
        assert_eq!(
            post(&app, "/api/webhooks", &token, json!({"eventType": t, "url": hooks.url})).await.0,
            201
        );
    }
    let id = approved(&app, &token, "NAO_PERMITE").await;
    let due = today() + Duration::days(3);
    let txid = "cycleone0000000000000000000001";
    let c = charge(&app, &token, txid, cobr_body(&id, due), "PAY").await;
    assert_eq!((c["status"].as_str(), c["idRec"].as_str()), (Some("ATIVA"), Some(id.as_str())));
    assert_eq!(c["tentativas"][0]["dataLiquidacao"], due.to_string());
    assert_eq!(c["calendario"]["criacao"], today().to_string(), "a date, as the API Pix has it");
    assert_eq!(attempts(&c), [("AGND".to_owned(), "AGENDADA".to_owned())]);
    let scheduled_e2e = c["tentativas"][0]["endToEndId"].as_str().unwrap().to_owned();
    let (s, b) = post(&app, "/cobr", &token, cobr_body(&id, due + Duration::days(1))).await;
    assert_eq!(s, 409, "one charge per cycle: {b}");
    let before = net(&app).await;

    let seconds = seconds_to(due, 0);
    app.advance(seconds - 60).await;
    assert_eq!(cobr(&app, txid).await["status"], "ATIVA", "not before its day");
    app.advance(60).await;
    let c = cobr(&app, txid).await;
    assert_eq!(c["status"], "CONCLUIDA", "{c}");
    let e2e = c["tentativas"][0]["endToEndId"].as_str().unwrap().to_owned();
    assert_eq!(e2e, scheduled_e2e, "the received PIX carries the id the attempt was scheduled with");
    assert_eq!(net(&app).await, plus(before, "30"), "credited");
    let token = app.demo_token().await;
    let (s, pix) = app.get_with(&format!("/pix/{e2e}"), &token).await;
    assert_eq!((s, pix["txid"].as_str(), pix["valor"].as_str()), (200, Some(txid), Some("30.00")), "{pix}");
    let (s, r) = crate::helpers::send(
        awc::Client::new().put(app.url(&format!("/pix/{e2e}/devolucao/d1"))).bearer_auth(&token),
        Some(json!({"valor": "10.00"})),
    )
    .await;
    assert_eq!(s, 201, "a settled cycle is refunded like any received PIX: {r}");
    // The charge shows the PIX that paid it, with its devolução (the API Pix's `pix`).
    let c = cobr(&app, txid).await;
    let paid = &c["pix"][0];
    assert_eq!((paid["endToEndId"].as_str(), paid["txid"].as_str()), (Some(e2e.as_str()), Some(txid)), "{c}");
    assert_eq!(paid["devolucoes"][0]["id"], "d1", "{c}");
    assert_eq!(c["pix"].as_array().map(Vec::len), Some(1));

    // Its webhooks: made (ATIVA), the received PIX, settled (CONCLUIDA).
    let mut got = Vec::new();
    for _ in 0..3 {
        let r = hooks.next().await;
        assert!(signature_verifies(&app.creds.webhook_secret, &r));
        let v = r.json();
        let status = v["cobsr"][0]["status"].as_str().map(str::to_owned);
        // A settled charge's notification carries its `pix`, as `CobRNotification` does and
        // as `GET /cobr/{txid}` shows it (the devolução came later); the others carry none.
        let settled_pix = &v["cobsr"][0]["pix"];
        if status.as_deref() == Some("CONCLUIDA") {
            let p = &settled_pix[0];
            assert_eq!(
                (p["endToEndId"].as_str(), p["txid"].as_str(), p["valor"].as_str()),
                (Some(e2e.as_str()), Some(txid), Some("30.00")),
                "{v}"
            );
            assert_eq!((&p["chave"], &p["pagador"]), (&paid["chave"], &paid["pagador"]), "{v}");
        } else {
            assert!(settled_pix.is_null(), "{v}");
        }
        got.push(status.unwrap_or_else(|| "cash_in".to_owned()));
    }
    assert_eq!(got, ["ATIVA", "cash_in", "CONCLUIDA"]);
}

/// One move of the clock past a due day's evening carries out every try it passes, in
/// order and each at its own hour: the 00:00 try that finds no money, then the 18:00 one
/// (which settles `NO_FUNDS_1` and fails `NO_FUNDS`), as two smaller moves would.
#[actix_rt::test]
async fn one_jump_past_a_due_days_evening_makes_both_of_its_tries_in_order() {
    let app = spawn_with(hooked()).await;
    let token = app.demo_token().await;
    let due = today() + Duration::days(3);
    let first = approved(&app, &token, "PERMITE_3R_7D").await;
    let evening = "eveningpays00000000000000001";
    charge(&app, &token, evening, cobr_body(&first, due), "NO_FUNDS_1").await;
    let second = approved(&app, &token, "PERMITE_3R_7D").await;
    let never = "eveningfails0000000000000001";
    charge(&app, &token, never, cobr_body(&second, due), "NO_FUNDS").await;
    let before = net(&app).await;
    // From now to 00:00:05 of the day after the due date, in one step.
    app.advance(seconds_to(due + Duration::days(1), 0)).await;
    let six_pm =
        (due.and_hms_opt(21, 0, 0).unwrap().and_utc()).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let c = cobr(&app, evening).await;
    assert_eq!(c["status"], "CONCLUIDA", "{c}");
    assert_eq!(
        attempts(&c),
        [("AGND".to_owned(), "EXPIRADA".to_owned()), ("RIFL".to_owned(), "PAGA".to_owned())],
        "{c}"
    );
    assert_eq!(c["pix"][0]["horario"], six_pm.as_str(), "paid at the evening's hour: {c}");
    assert_eq!(net(&app).await, plus(before, "30"), "credited once");
    let c = cobr(&app, never).await;
    assert_eq!(c["status"], "ATIVA", "a retry may still be asked for: {c}");
    assert_eq!(
        attempts(&c),
        [("AGND".to_owned(), "EXPIRADA".to_owned()), ("RIFL".to_owned(), "EXPIRADA".to_owned())],
        "{c}"
    );
    let ended = c["tentativas"][1]["atualizacao"].as_array().unwrap().last().unwrap()["data"].clone();
    assert_eq!(ended, six_pm.as_str(), "the evening's try failed at its hour: {c}");
}

#[actix_rt::test]
async fn a_failed_cycle_is_retried_to_success_and_one_failed_past_its_last_retry_expires() {
    let app = spawn_with(hooked()).await;
    let token = app.demo_token().await;
    let id = approved(&app, &token, "PERMITE_3R_7D").await;
    let due = today() + Duration::days(3);
    let once = "retriedonce000000000000000001";
    charge(&app, &token, once, cobr_body(&id, due), "NO_FUNDS_2").await;
    let other = approved(&app, &token, "PERMITE_3R_7D").await;
    let never = "neverpays0000000000000000001";
    charge(&app, &token, never, cobr_body(&other, due), "NO_FUNDS").await;
    let fixed = approved(&app, &token, "NAO_PERMITE").await;
    let closed = "closedaccount00000000000001";
    charge(&app, &token, closed, cobr_body(&fixed, due), "ACCOUNT_CLOSED").await;

    let retry = |txid: &'static str, day: NaiveDate| {
        let app = &app;
        async move {
            let token = app.demo_token().await;
            post(app, &format!("/cobr/{txid}/retentativa/{day}"), &token, json!({})).await
        }
    };
    let (s, b) = retry(once, due + Duration::days(1)).await;
    assert_eq!(s, 409, "nothing failed yet: {b}");
    let mut moved = seconds_to(due, 0);
    app.advance(moved).await;
    let c = cobr(&app, once).await;
    assert_eq!(
        (c["status"].as_str(), attempts(&c)),
        (
            Some("ATIVA"),
            vec![("AGND".to_owned(), "EXPIRADA".to_owned()), ("RIFL".to_owned(), "AGENDADA".to_owned())]
        ),
        "the morning's try found no money; the evening's is to come: {c}"
    );
    let c = cobr(&app, closed).await;
    assert_eq!(c["status"], "REJEITADA", "a closed account ends it: {c}");
    assert_eq!(c["encerramento"]["rejeicao"]["codigo"], "AC05", "{c}");
    let (s, b) = retry(closed, due + Duration::days(1)).await;
    assert_eq!(s, 409, "{b}");
    let (s, b) = retry(once, due + Duration::days(1)).await;
    assert_eq!(s, 409, "the day's evening try first: {b}");
    // 18:00: the evening's try fails too.
    app.advance(18 * 3600).await;
    moved += 18 * 3600;
    let c = cobr(&app, once).await;
    assert_eq!(c["tentativas"][1]["status"], "EXPIRADA", "{c}");

    let (s, b) = retry(once, due + Duration::days(8)).await;
    assert_eq!(s, 400, "past the window: {b}");
    let (s, c) = retry(once, due + Duration::days(1)).await;
    assert_eq!((s, attempts(&c).len()), (201, 3), "the API Pix answers a retry 201: {c}");
    let (s, _) = retry(once, due + Duration::days(2)).await;
    assert_eq!(s, 409, "one retry scheduled at a time");
    let (s, _) = retry(never, due + Duration::days(1)).await;
    assert_eq!(s, 201);
    let step = seconds_to(due + Duration::days(1), moved);
    app.advance(step).await;
    moved += step;
    let c = cobr(&app, once).await;
    assert_eq!(c["status"], "CONCLUIDA", "{c}");
    assert_eq!(
        attempts(&c),
        [
            ("AGND".to_owned(), "EXPIRADA".to_owned()),
            ("RIFL".to_owned(), "EXPIRADA".to_owned()),
            ("NTAG".to_owned(), "PAGA".to_owned())
        ]
    );

    for n in [2, 3] {
        // The day before's evening try first.
        app.advance(18 * 3600).await;
        moved += 18 * 3600;
        let day = due + Duration::days(n);
        let (s, b) = retry(never, day).await;
        assert_eq!(s, 201, "{b}");
        let step = seconds_to(day, moved);
        app.advance(step).await;
        moved += step;
    }
    app.advance(18 * 3600).await;
    let c = cobr(&app, never).await;
    assert_eq!(
        (c["status"].as_str(), attempts(&c).len()),
        (Some("EXPIRADA"), 8),
        "four days, two tries each: {c}"
    );
    let (s, b) = retry(never, due + Duration::days(5)).await;
    assert_eq!(s, 409, "nothing after the third retry: {b}");
    let token = app.demo_token().await;
    let window = format!(
        "inicio={}&fim={}",
        (Utc::now() - Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ"),
        (Utc::now() + Duration::days(20)).format("%Y-%m-%dT%H:%M:%SZ")
    );
    let (_, pix) = app.get_with(&format!("/pix?{window}&txid={once}"), &token).await;
    assert_eq!(pix["pix"].as_array().map(Vec::len), Some(1), "the retry's money: {pix}");
    let (_, pix) = app.get_with(&format!("/pix?{window}&txid={never}"), &token).await;
    assert_eq!(pix["pix"].as_array().map(Vec::len), Some(0), "no money from it: {pix}");
}

#[actix_rt::test]
async fn a_cancelled_charge_or_recurrence_is_never_settled() {
    let app = spawn_with(hooked()).await;
    let token = app.demo_token().await;
    let due = today() + Duration::days(4);
    let id = approved(&app, &token, "NAO_PERMITE").await;
    let mine = "cancelledbyme0000000000000001";
    charge(&app, &token, mine, cobr_body(&id, due), "PAY").await;
    let (s, c) = patch(&app, &format!("/cobr/{mine}"), &token, json!({"status": "CANCELADA"})).await;
    assert_eq!((s, c["status"].as_str()), (200, Some("CANCELADA")), "{c}");
    assert_eq!(attempts(&c), [("AGND".to_owned(), "CANCELADA".to_owned())], "{c}");
    assert_eq!(c["encerramento"]["cancelamento"]["codigo"], "SLCR", "{c}");
    let (s, b) = patch(&app, &format!("/cobr/{mine}"), &token, json!({"status": "CANCELADA"})).await;
    assert_eq!(s, 409, "{b}");

    let other = approved(&app, &token, "NAO_PERMITE").await;
    let theirs = "cancelledwithrec000000000001";
    charge(&app, &token, theirs, cobr_body(&other, due), "PAY").await;
    let (s, r) = post(&app, &format!("/sandbox/rec/{other}/cancel"), &token, json!({})).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("CANCELADA")), "{r}");
    assert_eq!(cobr(&app, theirs).await["status"], "CANCELADA", "the payer's cancellation ends its charges");
    let (s, b) = post(&app, "/cobr", &token, cobr_body(&other, due)).await;
    assert_eq!(s, 409, "no charge for a cancelled recurrence: {b}");

    // From 22:00 of the day before, the receiver may no longer cancel; the payer may until
    // the day begins, and its cancellation of the recurrence takes the charge with it.
    let late = approved(&app, &token, "NAO_PERMITE").await;
    let last = "cancelledtoolate0000000000001";
    charge(&app, &token, last, cobr_body(&late, due), "PAY").await;
    let moved = seconds_to(due, 0) - 2 * 3600;
    app.advance(moved).await;
    let token = app.demo_token().await;
    let (s, b) = patch(&app, &format!("/cobr/{last}"), &token, json!({"status": "CANCELADA"})).await;
    assert_eq!(s, 409, "{b}");
    assert!(b["message"].to_string().contains("22:00"), "{b}");
    let (s, r) = post(&app, &format!("/sandbox/rec/{late}/cancel"), &token, json!({})).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("CANCELADA")), "{r}");
    assert_eq!(cobr(&app, last).await["status"], "CANCELADA", "the payer's deadline had not passed");

    let before = net(&app).await;
    app.advance(seconds_to(due + Duration::days(1), moved)).await;
    assert_eq!(net(&app).await, before, "nothing settled");
    let token = app.demo_token().await;
    assert_eq!(cobr(&app, mine).await["status"], "CANCELADA");
    let window = format!(
        "inicio={}&fim={}",
        (Utc::now() - Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ"),
        (Utc::now() + Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ")
    );
    let (s, list) = app.get_with(&format!("/cobr?{window}&status=CANCELADA&idRec={other}"), &token).await;
    assert_eq!(s, 200, "{list}");
    let txids: Vec<&str> =
        list["cobsr"].as_array().unwrap().iter().map(|c| c["txid"].as_str().unwrap()).collect();
    assert_eq!(txids, [theirs]);
    let (s, b) = app.get_with(&format!("/cobr?{window}&status=PAGA"), &token).await;
    assert_eq!(s, 400, "not a status of a charge: {b}");
}

/// SIGKILL, then the same server started again on its data dir.
fn kill_9_and_start_again(app: &mut TestApp) {
    let mut child = app.take_child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    app.start_again(&Options::default());
}

#[actix_rt::test]
async fn a_kill_9_before_and_after_the_settlement_day_pays_the_cycle_once() {
    let mut app = spawn_with(Options::default()).await;
    let token = app.demo_token().await;
    let id = approved(&app, &token, "NAO_PERMITE").await;
    let due = today() + Duration::days(2);
    let txid = "killnine00000000000000000001";
    charge(&app, &token, txid, cobr_body(&id, due), "PAY").await;
    let before = net(&app).await;
    kill_9_and_start_again(&mut app);
    // No request reaches the account: the start resumes it, and its timer makes the attempt.
    app.advance(seconds_to(due, 0)).await;
    assert_eq!(cobr(&app, txid).await["status"], "CONCLUIDA");
    kill_9_and_start_again(&mut app);
    app.advance(3600).await;
    let c = cobr(&app, txid).await;
    assert_eq!((c["status"].as_str(), attempts(&c).len()), (Some("CONCLUIDA"), 1));
    assert_eq!(net(&app).await, plus(before, "30"), "paid once");
}

/// The gateway's own sending (`automacao.diasAntesEnvio`) through kill -9s: killed before the
/// sending day, the start resumes the recurrence's timer and the charge goes out on its day;
/// killed after, the start does not send it again; it is paid once on its due date.
#[actix_rt::test]
async fn a_kill_9_around_the_gateways_own_sending_sends_and_pays_the_cycle_once() {
    let mut app = spawn_with(Options::default()).await;
    let token = app.demo_token().await;
    let mut body = rec_body(json!({"valorRec": "30.00"}));
    body["automacao"] = json!({"diasAntesEnvio": 3});
    let (r, id) = approved_as(&app, &token, body).await;
    let first =
        NaiveDate::parse_from_str(r["calendario"]["dataInicial"].as_str().unwrap(), "%Y-%m-%d").unwrap();
    let second = first.checked_add_months(chrono::Months::new(1)).unwrap();
    let txid = pixgw::domain::decide::auto_txid(pixgw::domain::rec::rec_local(&id).unwrap(), 1);
    let before = net(&app).await;
    kill_9_and_start_again(&mut app);
    let moved = seconds_to(second - Duration::days(3), 0);
    app.advance(moved).await;
    let c = cobr(&app, &txid).await;
    assert_eq!(c["status"], "ATIVA", "sent on its day after the restart: {c}");
    kill_9_and_start_again(&mut app);
    app.advance(3600).await;
    let token = app.demo_token().await;
    // The charges created around the (moved) clock.
    let then = Utc::now() + Duration::seconds(moved);
    let window = format!(
        "inicio={}&fim={}",
        (then - Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ"),
        (then + Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ")
    );
    let (s, list) = app.get_with(&format!("/cobr?{window}&idRec={id}"), &token).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["cobsr"].as_array().map(Vec::len), Some(1), "sent once: {list}");
    // Its attempt is on the first business day from the due date (ajusteDiaUtil).
    let day = c["tentativas"][0]["dataLiquidacao"].as_str().unwrap();
    let day = NaiveDate::parse_from_str(day, "%Y-%m-%d").unwrap();
    app.advance(seconds_to(day, moved + 3600)).await;
    assert_eq!(cobr(&app, &txid).await["status"], "CONCLUIDA");
    assert_eq!(net(&app).await, plus(before, "30"), "paid once");
}

/// pixgw's own retry policy (`automacao.diasRetentativa`, off by default): after a failed
/// attempt the gateway asks for the next retry itself, and the charge settles on it with no
/// call of the receiver's. It keeps the rules of retries.
#[actix_rt::test]
async fn the_gateway_asks_for_a_retry_itself_when_the_recurrence_says_so() {
    let app = spawn_with(hooked()).await;
    let token = app.demo_token().await;
    for (policy, days) in
        [("NAO_PERMITE", json!([1])), ("PERMITE_3R_7D", json!([9])), ("PERMITE_3R_7D", json!([3, 1]))]
    {
        let mut body = rec_body(json!({"valorRec": "30.00"}));
        body["politicaRetentativa"] = json!(policy);
        body["automacao"] = json!({"diasRetentativa": days});
        let (s, b) = post(&app, "/rec", &token, body).await;
        assert_eq!(s, 400, "{b}");
        assert!(b["message"].as_str().unwrap_or("").contains("automacao.diasRetentativa"), "{b}");
    }
    let mut body = rec_body(json!({"valorRec": "30.00"}));
    body["automacao"] = json!({"diasRetentativa": [1]});
    let (r, id) = approved_as(&app, &token, body).await;
    assert_eq!(r["automacao"]["diasRetentativa"], json!([1]), "{r}");

    let due = today() + Duration::days(3);
    let txid = "gatewayretries000000000000001";
    charge(&app, &token, txid, cobr_body(&id, due), "NO_FUNDS_2").await;
    let before = net(&app).await;
    app.advance(seconds_to(due, 0) + 18 * 3600).await;
    let c = cobr(&app, txid).await;
    assert_eq!(c["status"], "ATIVA", "{c}");
    assert_eq!(
        attempts(&c),
        [
            ("AGND".to_owned(), "EXPIRADA".to_owned()),
            ("RIFL".to_owned(), "EXPIRADA".to_owned()),
            ("NTAG".to_owned(), "AGENDADA".to_owned())
        ],
        "the retry asked for by the gateway after the day's two tries: {c}"
    );
    assert_eq!(c["tentativas"][2]["dataLiquidacao"], (due + Duration::days(1)).to_string());
    app.advance(6 * 3600).await;
    let c = cobr(&app, txid).await;
    assert_eq!(c["status"], "CONCLUIDA", "{c}");
    assert_eq!(net(&app).await, plus(before, "30"), "paid once");
}

/// pixgw's own `automacao.diasAntesEnvio`: once the recurrence is authorised, the gateway
/// sends each cycle's charge by itself that many days before the cycle's first date; a cycle
/// already too near to be sent is passed over. A recurrence without valorRec takes none.
#[actix_rt::test]
async fn the_gateway_sends_each_cycles_charge_itself_when_the_recurrence_says_so() {
    let app = spawn_with(hooked()).await;
    let token = app.demo_token().await;
    let mut variable = rec_body(json!({"valorMinimoRecebedor": "10.00"}));
    variable["automacao"] = json!({"diasAntesEnvio": 3});
    let (s, b) = post(&app, "/rec", &token, variable).await;
    assert_eq!(s, 400, "{b}");
    for days in [1, 11] {
        let mut body = rec_body(json!({"valorRec": "30.00"}));
        body["automacao"] = json!({"diasAntesEnvio": days});
        assert_eq!(post(&app, "/rec", &token, body).await.0, 400, "{days}");
    }
    let mut body = rec_body(json!({"valorRec": "30.00"}));
    body["automacao"] = json!({"diasAntesEnvio": 3});
    let (r, id) = approved_as(&app, &token, body).await;
    assert_eq!(r["automacao"]["diasAntesEnvio"], json!(3), "{r}");

    // The first cycle (tomorrow) is too near to be sent; the second's charge goes 3 days
    // before its first date, at 00:00.
    let first =
        NaiveDate::parse_from_str(r["calendario"]["dataInicial"].as_str().unwrap(), "%Y-%m-%d").unwrap();
    let second = first.checked_add_months(chrono::Months::new(1)).unwrap();
    let local = pixgw::domain::rec::rec_local(&id).unwrap();
    let txid = pixgw::domain::decide::auto_txid(local, 1);
    let send_day = second - Duration::days(3);
    let moved = seconds_to(send_day, 0) - 60;
    app.advance(moved).await;
    let token = app.demo_token().await;
    assert_eq!(app.get_with(&format!("/cobr/{txid}"), &token).await.0, 404, "not before its day");
    app.advance(60).await;
    let c = cobr(&app, &txid).await;
    assert_eq!(
        (c["status"].as_str(), c["calendario"]["dataDeVencimento"].as_str(), c["valor"]["original"].as_str()),
        (Some("ATIVA"), Some(second.to_string().as_str()), Some("30.00")),
        "{c}"
    );
    let token = app.demo_token().await;
    let never = pixgw::domain::decide::auto_txid(local, 0);
    assert_eq!(
        app.get_with(&format!("/cobr/{never}"), &token).await.0,
        404,
        "the first cycle was passed over"
    );
}
