//! Pix Automático on us: a recurrence whose payer is another account of this gateway. The
//! payer finds it in its own API and answers it (the sandbox may not, another account sees
//! nothing), its charges are debited from the payer on their day (a refusal of its balance
//! is a failed attempt, retried to success once it is funded), both sides carry one
//! end-to-end id, and a kill -9 between the payer's debit and the receiver's credit neither loses nor doubles
//! the payment.

use chrono::Duration;
use pixgw::domain::money::Money;
use serde_json::{json, Value};

use crate::cobr::{cobr_body, plus, seconds_to, today};
use crate::helpers::{spawn_with, Options, TestApp};
use crate::rec::{in_hours, post, rec_body};

/// A second account, the payer, whose document is 52998224725.
struct Payer {
    id: u64,
    client_id: String,
    secret: String,
    pem: String,
}

impl Payer {
    async fn new(app: &TestApp) -> Payer {
        let (id, client_id, secret, pem) = app.new_account_with("Bia Payer", true).await;
        Payer { id, client_id, secret, pem }
    }

    /// A fresh token (one issued before the clock moved has expired).
    async fn token(&self, app: &TestApp) -> String {
        let (s, t) = app.token_with(&self.pem, &self.client_id, &self.secret).await;
        assert_eq!(s, 201, "{t}");
        t["access_token"].as_str().unwrap().to_owned()
    }
}

fn on_us_solicitation(id_rec: &str, payer: u64, cpf: &str) -> Value {
    json!({
        "idRec": id_rec,
        "destinatario": {"cpf": cpf, "conta": payer.to_string(), "ispbParticipante": "99999999"},
        "calendario": {"dataExpiracaoSolicitacao": in_hours(24)},
    })
}

/// A recurrence of the demo account (30.00 monthly, retries allowed) sent to `payer` on us,
/// and approved by it: its idRec.
async fn approved_on_us(app: &TestApp, token: &str, payer_token: &str, payer: u64) -> String {
    let (s, r) = post(app, "/rec", token, rec_body(json!({"valorRec": "30.00"}))).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, sol) = post(app, "/solicrec", token, on_us_solicitation(&id, payer, "52998224725")).await;
    assert_eq!(s, 201, "{sol}");
    let path = format!("/api/automatic-pix/recurrences/{id}/answer");
    let (s, a) = post(app, &path, payer_token, json!({"decision": "APPROVE"})).await;
    assert_eq!(s, 200, "{a}");
    id
}

async fn put_cobr(app: &TestApp, token: &str, txid: &str, body: Value) -> Value {
    let req = awc::Client::new().put(app.url(&format!("/cobr/{txid}"))).bearer_auth(token);
    let (s, c) = crate::helpers::send(req, Some(body)).await;
    assert_eq!(s, 201, "{c}");
    c
}

/// Polls the demo account's charge until `done` holds (bounded: 10 s): the payer's debit
/// and its credit travel between two actors after the clock moved.
async fn wait_cobr(app: &TestApp, txid: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let token = app.demo_token().await;
        let (s, c) = app.get_with(&format!("/cobr/{txid}"), &token).await;
        if s == 200 && done(&c) {
            return c;
        }
        assert!(std::time::Instant::now() < deadline, "{txid} never got there: {c}");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

async fn net(app: &TestApp, token: &str) -> Money {
    let (_, _, net) = app.balance(token).await;
    Money::parse(&net).unwrap()
}

fn settle_fast() -> Options {
    Options { env: vec![("PIXGW_SIM_SETTLE_MS".into(), "20".into())], ..Default::default() }
}

/// A fast-settling server, its Demo receiver's token, a payer of this gateway, and a stranger
/// (another account, which must never see or touch the payer's recurrences), each with a token.
struct OnUs {
    app: TestApp,
    token: String,
    payer: Payer,
    payer_token: String,
    stranger: Payer,
    stranger_token: String,
}

async fn on_us() -> OnUs {
    let app = spawn_with(settle_fast()).await;
    let token = app.demo_token().await;
    let payer = Payer::new(&app).await;
    let payer_token = payer.token(&app).await;
    let stranger = Payer::new(&app).await;
    let stranger_token = stranger.token(&app).await;
    OnUs { app, token, payer, payer_token, stranger, stranger_token }
}

#[actix_rt::test]
async fn a_payer_of_this_gateway_authorises_and_pays_a_recurrence_with_one_end_to_end_id() {
    let OnUs { app, token, payer, payer_token, stranger, stranger_token } = on_us().await;

    // Sent on us: a number and document that name no account are refused.
    let (s, r) = post(&app, "/rec", &token, rec_body(json!({"valorRec": "30.00"}))).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, b) = post(&app, "/solicrec", &token, on_us_solicitation(&id, payer.id, "11144477735")).await;
    assert_eq!(s, 400, "{b}");
    assert!(b.to_string().contains("destinatario.conta"), "{b}");
    let (s, sol) = post(&app, "/solicrec", &token, on_us_solicitation(&id, payer.id, "52998224725")).await;
    assert_eq!(s, 201, "{sol}");
    let sid = sol["idSolicRec"].as_str().unwrap();

    // Only the payer answers: not the sandbox, and to another account it does not exist.
    let (s, b) =
        post(&app, &format!("/sandbox/solicrec/{sid}/answer"), &token, json!({"decision": "APPROVE"})).await;
    assert_eq!(s, 409, "the payer answers itself: {b}");
    let answer = format!("/api/automatic-pix/recurrences/{id}/answer");
    let (s, b) = post(&app, &answer, &stranger_token, json!({"decision": "APPROVE"})).await;
    assert_eq!(s, 404, "{b}");
    let (s, list) = app.get_with("/api/automatic-pix/recurrences", &stranger_token).await;
    assert_eq!((s, list["recurrences"].as_array().map(Vec::len)), (200, Some(0)), "{list}");
    let (s, list) = app.get_with("/api/automatic-pix/recurrences", &payer_token).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["recurrences"][0]["idRec"], id.as_str());
    assert_eq!(list["recurrences"][0]["status"], "CRIADA");
    let (s, b) = post(&app, &answer, &payer_token, json!({"decision": "MAYBE"})).await;
    assert_eq!(s, 400, "{b}");
    let (s, rec) = post(&app, &answer, &payer_token, json!({"decision": "APPROVE"})).await;
    assert_eq!(s, 200, "{rec}");
    assert_eq!(rec["status"], "APROVADA");
    assert_eq!(rec["ativacao"]["tipoJornada"], "JORNADA_1");
    assert_eq!(rec["pagador"]["ispbParticipante"], "99999999", "{rec}");
    let (s, b) = post(&app, &answer, &payer_token, json!({"decision": "REJECT"})).await;
    assert_eq!(s, 409, "answered once: {b}");

    // A charge due in two days; the payer has 20.00, so the day's attempt fails.
    app.fund(&payer_token, "20").await;
    let due = today() + Duration::days(2);
    let txid = "onuscycle000000000000000000001";
    put_cobr(&app, &token, txid, cobr_body(&id, due)).await;
    let (receiver_before, payer_before) = (net(&app, &token).await, net(&app, &payer_token).await);
    app.advance(seconds_to(due, 0)).await;
    let payer_token = payer.token(&app).await;
    let c = wait_cobr(&app, txid, |c| c["tentativas"][0]["status"] == "EXPIRADA").await;
    assert_eq!(
        (c["status"].as_str(), c["tentativas"][1]["tipo"].as_str()),
        (Some("ATIVA"), Some("RIFL")),
        "{c}"
    );
    assert_eq!(net(&app, &payer_token).await, payer_before, "a refused debit moves nothing");
    let first = format!("/api/transactions/pixauto:{id}:{txid}:1");
    assert_eq!(app.get_with(&first, &payer_token).await.0, 404, "the refused attempt made no debit");
    // The evening's try (18:00) asks the payer's account again, and is refused again.
    app.advance(18 * 3600).await;
    let (token, payer_token) = (app.demo_token().await, payer.token(&app).await);
    let c = wait_cobr(&app, txid, |c| c["tentativas"][1]["status"] == "EXPIRADA").await;
    assert_eq!(c["status"], "ATIVA", "a retry may follow: {c}");

    // Funded, the retry the receiver asks for the next day is debited and settles the charge.
    app.fund(&payer_token, "100").await;
    let retry = due + Duration::days(1);
    let (s, b) = post(&app, &format!("/cobr/{txid}/retentativa/{retry}"), &token, json!({})).await;
    assert_eq!(s, 201, "{b}");
    let scheduled_e2e = b["tentativas"][2]["endToEndId"].as_str().unwrap().to_owned();
    app.advance(6 * 3600).await;
    let (token, payer_token) = (app.demo_token().await, payer.token(&app).await);
    let stranger_token = stranger.token(&app).await;
    let c = wait_cobr(&app, txid, |c| c["status"] != "ATIVA").await;
    assert_eq!(c["status"], "CONCLUIDA", "{c}");
    let e2e = c["tentativas"][2]["endToEndId"].as_str().unwrap().to_owned();
    assert_ne!(e2e, scheduled_e2e, "on us, the attempt shows the id the payer's debit carries once paid");
    let (s, pix) = app.get_with(&format!("/pix/{e2e}"), &token).await;
    assert_eq!((s, pix["txid"].as_str(), pix["valor"].as_str()), (200, Some(txid), Some("30.00")), "{pix}");
    assert_eq!(net(&app, &token).await, plus(receiver_before, "30"), "the receiver is credited once");
    let second = format!("pixauto:{id}:{txid}:3");
    let debit = app.wait_final(&payer_token, &second).await;
    assert_eq!(
        (debit["status"].as_str(), debit["endToEndId"].as_str()),
        (Some("CONFIRMED"), Some(e2e.as_str()))
    );
    let (s, same) = app.get_with(&format!("/api/transactions/{e2e}"), &payer_token).await;
    assert_eq!((s, &same["externalId"]), (200, &debit["externalId"]), "one end-to-end id on both sides");
    let fee = Money::parse(&debit["feeAmount"].to_string()).unwrap();
    let payer_now = net(&app, &payer_token).await;
    assert_eq!(plus(payer_now, "30").checked_add(fee), plus(payer_before, "100").into(), "30.00 and its fee");

    // A devolução of the charge's PIX gives the payer its money back, on us: the books keep it.
    let req = app.client.put(app.url(&format!("/pix/{e2e}/devolucao/back1"))).bearer_auth(&token);
    let (s, d) = crate::helpers::send(req, Some(json!({"valor": "10.00"}))).await;
    assert_eq!(s, 201, "{d}");
    let rtr = d["rtrId"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let back = loop {
        let (s, t) = app.get_with(&format!("/api/transactions/{rtr}"), &payer_token).await;
        if s == 200 && t["status"] == "CONFIRMED" {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "the return never reached the payer: {t}");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(
        (back["status"].as_str(), back["operation"].as_str()),
        (Some("CONFIRMED"), Some("REFUND_OUT"))
    );
    assert_eq!(net(&app, &payer_token).await, plus(payer_now, "10"), "{back}");
    assert_eq!(net(&app, &token).await, plus(receiver_before, "20"), "the receiver gave 10.00 back");

    // Only the payer cancels: not the sandbox, not another account.
    let (s, b) = post(&app, &format!("/sandbox/rec/{id}/cancel"), &token, json!({})).await;
    assert_eq!(s, 409, "{b}");
    let cancel = format!("/api/automatic-pix/recurrences/{id}/cancel");
    assert_eq!(post(&app, &cancel, &stranger_token, json!({})).await.0, 404);
    let (s, rec) = post(&app, &cancel, &payer_token, json!({})).await;
    assert_eq!(s, 200, "{rec}");
    assert_eq!(
        (rec["status"].as_str(), rec["encerramento"]["cancelamento"]["codigo"].as_str()),
        (Some("CANCELADA"), Some("SLDB"))
    );
}

#[actix_rt::test]
async fn a_kill_9_between_the_payers_debit_and_the_receivers_credit_pays_the_cycle_once() {
    // The bank takes 5 s to settle at first, so the process dies with the payer's debit
    // made (PENDING) and the receiver's charge still waiting for its credit.
    let slow = Options { env: vec![("PIXGW_SIM_SETTLE_MS".into(), "5000".into())], ..Default::default() };
    let mut app = spawn_with(slow).await;
    let token = app.demo_token().await;
    let payer = Payer::new(&app).await;
    let payer_token = payer.token(&app).await;
    let id = approved_on_us(&app, &token, &payer_token, payer.id).await;
    app.fund(&payer_token, "100").await;
    let due = today() + Duration::days(2);
    let txid = "onuskill000000000000000000001";
    put_cobr(&app, &token, txid, cobr_body(&id, due)).await;
    let receiver_before = net(&app, &token).await;
    let payer_before = net(&app, &payer_token).await;
    app.advance(seconds_to(due, 0)).await;
    let debit_id = format!("pixauto:{id}:{txid}:1");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let payer_token = payer.token(&app).await;
    loop {
        let (s, t) = app.get_with(&format!("/api/transactions/{debit_id}"), &payer_token).await;
        if s == 200 {
            assert_eq!(t["status"], "PENDING", "the bank has not answered yet: {t}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the payer was never debited: {t}");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(cobr_status(&app, txid).await, "ATIVA");
    let kill = |app: &mut TestApp| {
        let mut child = app.take_child().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        app.start_again(&settle_fast());
    };
    // The restart asks the payer's account again (the debit is found, not made twice), the
    // bank settles the debit, and its credit settles the charge.
    kill(&mut app);
    let c = wait_cobr(&app, txid, |c| c["status"] != "ATIVA").await;
    assert_eq!(c["status"], "CONCLUIDA", "{c}");
    // And once more, after it settled.
    kill(&mut app);
    app.advance(3600).await;
    let c = wait_cobr(&app, txid, |c| c["status"] != "ATIVA").await;
    let tries = c["tentativas"].as_array().unwrap();
    assert_eq!((c["status"].as_str(), tries.len()), (Some("CONCLUIDA"), 1), "{c}");
    let (token, payer_token) = (app.demo_token().await, payer.token(&app).await);
    assert_eq!(net(&app, &token).await, plus(receiver_before, "30"), "credited once");
    let debit = app.wait_final(&payer_token, &debit_id).await;
    assert_eq!(debit["status"], "CONFIRMED");
    assert_eq!(debit["endToEndId"], c["tentativas"][0]["endToEndId"]);
    let fee = Money::parse(&debit["feeAmount"].to_string()).unwrap();
    let spent = payer_before.checked_sub(net(&app, &payer_token).await).unwrap();
    assert_eq!(spent, plus(fee, "30"), "debited once");
}

async fn cobr_status(app: &TestApp, txid: &str) -> String {
    let token = app.demo_token().await;
    let (s, c) = app.get_with(&format!("/cobr/{txid}"), &token).await;
    assert_eq!(s, 200, "{c}");
    c["status"].as_str().unwrap().to_owned()
}

/// A payer of this gateway whose solicitation ended unapproved still lists the recurrence;
/// answering or cancelling it then is 409 (nothing is asked of it any more), never 404,
/// which is for a recurrence never offered to the account.
#[actix_rt::test]
async fn a_payer_that_refused_is_told_409_on_a_later_answer_or_cancel() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let payer = Payer::new(&app).await;
    let payer_token = payer.token(&app).await;
    let (s, r) = post(&app, "/rec", &token, rec_body(json!({"valorRec": "30.00"}))).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, sol) = post(&app, "/solicrec", &token, on_us_solicitation(&id, payer.id, "52998224725")).await;
    assert_eq!(s, 201, "{sol}");
    let answer = format!("/api/automatic-pix/recurrences/{id}/answer");
    let (s, r) = post(&app, &answer, &payer_token, json!({"decision": "REJECT"})).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("REJEITADA")), "{r}");
    for decision in ["APPROVE", "REJECT"] {
        let (s, b) = post(&app, &answer, &payer_token, json!({"decision": decision})).await;
        assert_eq!(s, 409, "{decision}: {b}");
    }
    let cancel = format!("/api/automatic-pix/recurrences/{id}/cancel");
    let (s, b) = post(&app, &cancel, &payer_token, json!({})).await;
    assert_eq!(s, 409, "{b}");
    let (_, list) = app.get_with("/api/automatic-pix/recurrences", &payer_token).await;
    assert_eq!(list["recurrences"][0]["idRec"], id.as_str(), "{list}");
}

/// The payer's institution checks the payer's maximum when a charge arrives, not on its
/// due date: above it, the charge is REJEITADA at once (AM02) and its cycle stays free. The
/// payer may change its maximum; then the cycle is charged again. Only the payer may.
#[actix_rt::test]
async fn a_charge_above_the_payers_maximum_is_refused_when_it_arrives_and_the_payer_may_raise_it() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let payer = Payer::new(&app).await;
    let payer_token = payer.token(&app).await;
    let (s, r) = post(&app, "/rec", &token, rec_body(json!({}))).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, sol) = post(&app, "/solicrec", &token, on_us_solicitation(&id, payer.id, "52998224725")).await;
    assert_eq!(s, 201, "{sol}");
    let answer = format!("/api/automatic-pix/recurrences/{id}/answer");
    let approve = json!({"decision": "APPROVE", "valorMaximo": "25.00"});
    assert_eq!(post(&app, &answer, &payer_token, approve).await.0, 200);

    let due = today() + Duration::days(3);
    let c = put_cobr(&app, &token, "abovemaximum000000000000000001", cobr_body(&id, due)).await;
    assert_eq!(
        (c["status"].as_str(), c["encerramento"]["rejeicao"]["codigo"].as_str()),
        (Some("REJEITADA"), Some("AM02")),
        "{c}"
    );
    assert_eq!(c["tentativas"][0]["status"], "REJEITADA");

    // The receiver may not change the payer's maximum; the payer may.
    let maximum = format!("/api/automatic-pix/recurrences/{id}/maximum");
    assert_eq!(
        post(&app, &maximum, &token, json!({"valorMaximo": "40.00"})).await.0,
        404,
        "not offered to the receiver"
    );
    let (s, b) = post(&app, &maximum, &payer_token, json!({})).await;
    assert_eq!(s, 400, "{b}");
    let (s, r) = post(&app, &maximum, &payer_token, json!({"valorMaximo": "40.00"})).await;
    assert_eq!((s, r["pagador"]["valorMaximo"].as_str()), (200, Some("40.00")), "{r}");
    let (s, b) =
        post(&app, &format!("/sandbox/rec/{id}/maximum"), &token, json!({"valorMaximo": "50.00"})).await;
    assert_eq!(s, 409, "the sandbox does not speak for a payer of ours: {b}");

    let c = put_cobr(&app, &token, "withinmaximum00000000000000001", cobr_body(&id, due)).await;
    assert_eq!(c["status"], "ATIVA", "the cycle is charged again: {c}");
}

/// The payer may cancel one scheduled payment before its attempt: that charge is CANCELADA
/// by the payer (SLBD) and the recurrence goes on; a paid one is final (409). No other
/// account may cancel it. (That the attempt is under way from 00:00 of its day is the
/// receiver's rule too, shown by the domain's tests.)
#[actix_rt::test]
async fn the_payer_cancels_one_scheduled_payment_until_the_day_before() {
    let OnUs { app, token, payer, payer_token, stranger: _, stranger_token } = on_us().await;
    let id = approved_on_us(&app, &token, &payer_token, payer.id).await;
    let due = today() + Duration::days(3);
    let txid = "payercancels000000000000000001";
    put_cobr(&app, &token, txid, cobr_body(&id, due)).await;
    let cancel = format!("/api/automatic-pix/recurrences/{id}/charges/{txid}/cancel");
    assert_eq!(post(&app, &cancel, &stranger_token, json!({})).await.0, 404, "not offered to it");
    let (s, b) = post(
        &app,
        &format!("/api/automatic-pix/recurrences/{id}/charges/nosuchcharge0000000000000001/cancel"),
        &payer_token,
        json!({}),
    )
    .await;
    assert_eq!(s, 404, "{b}");
    let (s, c) = post(&app, &cancel, &payer_token, json!({})).await;
    assert_eq!(s, 200, "{c}");
    assert_eq!(
        (
            c["status"].as_str(),
            c["encerramento"]["cancelamento"]["solicitante"].as_str(),
            c["encerramento"]["cancelamento"]["codigo"].as_str()
        ),
        (Some("CANCELADA"), Some("USUARIO_PAGADOR"), Some("SLBD")),
        "{c}"
    );
    let (_, r) = app.get_with(&format!("/rec/{id}"), &token).await;
    assert_eq!(r["status"], "APROVADA", "the recurrence goes on: {r}");

    // Charged again for the cycle and paid on its day: then too late to cancel.
    app.fund(&payer_token, "100").await;
    let again = "payercancels000000000000000002";
    put_cobr(&app, &token, again, cobr_body(&id, due)).await;
    app.advance(seconds_to(due, 0)).await;
    let c = wait_cobr(&app, again, |c| c["status"] == "CONCLUIDA").await;
    assert_eq!(c["tentativas"][0]["status"], "PAGA", "{c}");
    let payer_token = payer.token(&app).await;
    let path = format!("/api/automatic-pix/recurrences/{id}/charges/{again}/cancel");
    let (s, b) = post(&app, &path, &payer_token, json!({})).await;
    assert_eq!(s, 409, "{b}");
}

/// On us the payer hears, at its own `rec` and `cobr` endpoints, of the solicitation asked
/// of it and of each charge scheduled and settled (the receiver hears of its own as before).
#[actix_rt::test]
async fn the_payer_of_this_gateway_hears_of_the_solicitation_and_of_its_charges() {
    let app = spawn_with(crate::deliveries::options()).await;
    let token = app.demo_token().await;
    let payer = Payer::new(&app).await;
    let payer_token = payer.token(&app).await;
    let mut hooks = crate::receiver::Receiver::ok();
    for t in ["rec", "cobr"] {
        let body = json!({"eventType": t, "url": hooks.url}).to_string();
        assert_eq!(app.post_raw("/api/webhooks", &payer_token, &body, &[]).await.0, 201);
    }
    let (s, r) = post(&app, "/rec", &token, rec_body(json!({"valorRec": "30.00"}))).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, sol) = post(&app, "/solicrec", &token, on_us_solicitation(&id, payer.id, "52998224725")).await;
    assert_eq!(s, 201, "{sol}");
    let asked = hooks.next().await.json();
    assert_eq!(
        (asked["recs"][0]["idRec"].as_str(), asked["recs"][0]["status"].as_str()),
        (Some(id.as_str()), Some("CRIADA")),
        "{asked}"
    );

    let answer = format!("/api/automatic-pix/recurrences/{id}/answer");
    assert_eq!(post(&app, &answer, &payer_token, json!({"decision": "APPROVE"})).await.0, 200);
    let approved = hooks.next().await.json();
    assert_eq!(approved["recs"][0]["status"], "APROVADA", "{approved}");

    let txid = "payerhears0000000000000000001";
    put_cobr(&app, &token, txid, cobr_body(&id, today() + Duration::days(3))).await;
    let scheduled = hooks.next().await.json();
    assert_eq!(
        (scheduled["cobsr"][0]["txid"].as_str(), scheduled["cobsr"][0]["status"].as_str()),
        (Some(txid), Some("ATIVA")),
        "{scheduled}"
    );
    assert!(hooks.drain().is_empty(), "nothing else yet");
}

/// Journeys 2 to 4 on us: an account of this gateway authorises a recurrence with its QR
/// code. Journey 2's code authorises at once; the composite code of journey 3 (4) pays its
/// first cob (cobv) as any code would, and authorises only once this account paid it. A text that is no
/// code, a code with no recurrence, a location this gateway never made, and a recurrence
/// another payer holds are refused; the payer finds the recurrence among its own.
#[actix_rt::test]
async fn a_payer_of_this_gateway_authorises_by_the_recurrences_qr_code() {
    let OnUs { app, token, payer: _, payer_token, stranger: _, stranger_token } = on_us().await;
    let path = "/api/automatic-pix/authorisations";

    // Journey 2: the location's code.
    let (s, loc) = post(&app, "/locrec", &token, json!({})).await;
    assert_eq!(s, 201, "{loc}");
    let mut body = rec_body(json!({"valorRec": "30.00"}));
    body["loc"] = loc["id"].clone();
    let (s, r) = post(&app, "/rec", &token, body).await;
    assert_eq!(s, 201, "{r}");
    let two = r["idRec"].as_str().unwrap().to_owned();
    let code = r["dadosQR"]["pixCopiaECola"].as_str().unwrap().to_owned();

    let (s, b) = post(&app, path, &payer_token, json!({})).await;
    assert_eq!(s, 400, "{b}");
    let (s, b) = post(&app, path, &payer_token, json!({"qrCode": "not a code"})).await;
    assert_eq!(s, 400, "{b}");
    let charge = json!({"transaction": {"value": 5, "description": "bread", "externalId": "c-1"},
        "payer": {"fullName": "Bia Payer", "document": "52998224725"}});
    let (s, cob) = app.post_raw("/api/pix/cash-in", &token, &charge.to_string(), &[]).await;
    assert_eq!(s, 201, "{cob}");
    let (s, b) = post(&app, path, &payer_token, json!({"qrCode": cob["pixCode"]})).await;
    assert_eq!(s, 400, "a charge's code alone carries no recurrence: {b}");
    assert!(b.to_string().contains("template 80"), "{b}");
    let forged_location = loc["location"].as_str().unwrap().replace("/rec/", "/rec/A");
    let forged = pixgw::domain::brcode::generate_recurrence(&forged_location, "Demo", "SAO PAULO");
    let (s, b) = post(&app, path, &payer_token, json!({"qrCode": forged})).await;
    assert_eq!(s, 404, "a location this gateway did not make: {b}");

    let (s, rec) = post(&app, path, &payer_token, json!({"qrCode": code})).await;
    assert_eq!(s, 200, "{rec}");
    assert_eq!(
        (rec["status"].as_str(), rec["ativacao"]["tipoJornada"].as_str()),
        (Some("APROVADA"), Some("JORNADA_2"))
    );
    assert_eq!(
        (rec["pagador"]["cpf"].as_str(), rec["pagador"]["ispbParticipante"].as_str()),
        (Some("52998224725"), Some("99999999")),
        "this account is the payer: {rec}"
    );
    let (_, mine) = app.get_with("/api/automatic-pix/recurrences", &payer_token).await;
    assert_eq!(mine["recurrences"][0]["idRec"], two.as_str(), "{mine}");
    let (s, b) = post(&app, path, &stranger_token, json!({"qrCode": code})).await;
    assert_eq!(s, 404, "another payer holds it: {b}");
    let (s, b) = post(&app, path, &payer_token, json!({"qrCode": code})).await;
    assert_eq!(s, 409, "authorised once: {b}");

    // Journey 3: the composite code of a first cob and the recurrence's location.
    let txid = "onusfirstcobofarecurrence0001";
    let cob = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "30.00"}});
    put_cob(&app, &token, txid, cob).await;
    let composite = composite_of_first(&app, &token, txid, "JORNADA_3").await;
    let (s, b) = post(&app, path, &payer_token, json!({"qrCode": composite})).await;
    assert_eq!(s, 409, "not before its first cob is paid: {b}");
    pay_first(&app, &token, &payer_token, &composite, &format!("/cob/{txid}")).await;
    let (s, b) = post(&app, path, &stranger_token, json!({"qrCode": composite})).await;
    assert_eq!(s, 409, "the first cob authorises only the account that paid it: {b}");
    let (s, rec) = post(&app, path, &payer_token, json!({"qrCode": composite})).await;
    assert_eq!(s, 200, "{rec}");
    assert_eq!(
        (rec["status"].as_str(), rec["ativacao"]["tipoJornada"].as_str()),
        (Some("APROVADA"), Some("JORNADA_3"))
    );

    // Journey 4: the same with a first cobv, paid by its composite code.
    let txid = "onusfirstcobvofarecurrence001";
    let due = (crate::cobr::today() + chrono::Duration::days(5)).to_string();
    let cobv = json!({"calendario": {"dataDeVencimento": due}, "valor": {"original": "30.00"},
        "devedor": {"cpf": "52998224725", "nome": "Bia Payer"}});
    let put = awc::Client::new().put(app.url(&format!("/cobv/{txid}"))).bearer_auth(&token);
    let (s, c) = crate::helpers::send(put, Some(cobv)).await;
    assert_eq!(s, 201, "{c}");
    let composite = composite_of_first(&app, &token, txid, "JORNADA_4").await;
    pay_first(&app, &token, &payer_token, &composite, &format!("/cobv/{txid}")).await;
    let (s, rec) = post(&app, path, &payer_token, json!({"qrCode": composite, "codMun": "3550308"})).await;
    assert_eq!(s, 200, "{rec}");
    assert_eq!(
        (rec["ativacao"]["tipoJornada"].as_str(), rec["pagador"]["codMun"].as_str()),
        (Some("JORNADA_4"), Some("3550308"))
    );
}

/// A recurrence of the Demo (30.00, with a location) whose first charge is `txid`: the
/// composite code of its journey (`jornada`), as `GET /rec/{idRec}?txid=` answers it.
async fn composite_of_first(app: &TestApp, token: &str, txid: &str, jornada: &str) -> String {
    let (_, loc) = post(app, "/locrec", token, json!({})).await;
    let mut body = rec_body(json!({"valorRec": "30.00"}));
    body["loc"] = loc["id"].clone();
    body["ativacao"] = json!({"dadosJornada": {"txid": txid}});
    let (s, r) = post(app, "/rec", token, body).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, r) = app.get_with(&format!("/rec/{id}?txid={txid}"), token).await;
    assert_eq!((s, r["dadosQR"]["jornada"].as_str()), (200, Some(jornada)), "{r}");
    r["dadosQR"]["pixCopiaECola"].as_str().unwrap().to_owned()
}

/// The payer (funded with 30.00 first) pays the composite code as any code, and the first
/// charge at `charge` (its read route) is `CONCLUIDA` (bounded: 10 s, the on-us courier).
async fn pay_first(app: &TestApp, token: &str, payer_token: &str, composite: &str, charge: &str) {
    app.fund(payer_token, "30").await;
    let pay = json!({"value": 30, "qrCode": composite, "externalId": format!("pay-first{charge}")});
    let (s, paid) = app.post_raw("/api/pix/cash-out-qrcode", payer_token, &pay.to_string(), &[]).await;
    assert_eq!(s, 201, "{paid}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, c) = app.get_with(charge, token).await;
        if c["status"] == "CONCLUIDA" {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the first charge was not paid: {c}");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

async fn put_cob(app: &TestApp, token: &str, txid: &str, body: Value) {
    let req = awc::Client::new().put(app.url(&format!("/cob/{txid}"))).bearer_auth(token);
    let (s, c) = crate::helpers::send(req, Some(body)).await;
    assert_eq!(s, 201, "{c}");
}
