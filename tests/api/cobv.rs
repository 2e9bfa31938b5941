//! Family B charges with a due date: `PUT`, `GET`, `PATCH /cobv/{txid}` and `GET /cobv`,
//! priced on the day they are paid (the sandbox and an on-us QR cash-out), revised, removed
//! and expired after their validity, over the real binary and its test clock.
//!
//! Every test first moves the test clock to the next noon in Sao Paulo, so the days it
//! counts are whole days whatever the machine's time; the modalities counted in business
//! days, which depend on the weekday, are the domain's unit tests.

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::America::Sao_Paulo;
use pixgw::domain::{brcode, calendar};
use serde_json::{json, Value};

use crate::helpers::{assert_extended, assert_simple, send, TestApp};

const TXID: &str = "boleto20261124abcdefghijk01";

/// The due dates the tests set, in days from "today": each must be a business day, or a
/// due date that moves to the next business day would change the prices the tests expect.
const DUE_OFFSETS: [i64; 5] = [-1, 1, 3, 10, 15];

/// Moves the test clock to the next noon in Sao Paulo from which every day of
/// [`DUE_OFFSETS`] is a business day; answers that day. (Without that, the tests' prices
/// would depend on the weekday the machine's clock starts on.)
async fn noon(app: &TestApp) -> NaiveDate {
    let (s, b) = app.admin("POST", "/admin/clock", Some(json!({"advanceSeconds": 0}))).await;
    assert_eq!(s, 200, "{b}");
    let now: DateTime<Utc> = b["now"].as_str().unwrap().parse().unwrap();
    let mut day = now.with_timezone(&Sao_Paulo).date_naive();
    let at = |d: NaiveDate| Sao_Paulo.from_local_datetime(&d.and_hms_opt(12, 0, 0).unwrap()).unwrap();
    let fits = |d: NaiveDate| DUE_OFFSETS.iter().all(|n| calendar::is_business_day(d + Duration::days(*n)));
    while at(day) <= now || !fits(day) {
        day += Duration::days(1);
    }
    let target = at(day).with_timezone(&Utc).to_rfc3339();
    let (s, b) = app.admin("POST", "/admin/clock", Some(json!({"set": target}))).await;
    assert_eq!(s, 200, "{b}");
    day
}

/// Moves the clock `n` whole days ahead; answers a fresh token (tokens live 30 minutes).
async fn days_later(app: &TestApp, n: i64) -> String {
    app.advance(n * 86_400).await;
    app.demo_token().await
}

fn ymd(d: NaiveDate) -> String {
    d.format("%Y-%m-%d").to_string()
}

async fn put(app: &TestApp, token: &str, txid: &str, body: &Value) -> (u16, Value) {
    send(app.client.put(app.url(&format!("/cobv/{txid}"))).bearer_auth(token), Some(body.clone())).await
}

async fn patch(app: &TestApp, token: &str, txid: &str, body: Value) -> (u16, Value) {
    send(app.client.patch(app.url(&format!("/cobv/{txid}"))).bearer_auth(token), Some(body)).await
}

/// 100.00 due on `due`, payable 5 days after; a 2.00 fine, 1 % interest a calendar day, and
/// 5.00 off until 2 days before the due date.
fn cobv(due: NaiveDate) -> Value {
    json!({
        "calendario": {"dataDeVencimento": ymd(due), "validadeAposVencimento": 5},
        "devedor": {"cnpj": "11222333000181", "nome": "Padaria Devedora", "logradouro": "Rua A, 10", "cidade": "Recife", "uf": "PE", "cep": "50000000"},
        "valor": {
            "original": "100.00",
            "multa": {"modalidade": 1, "valorPerc": "2.00"},
            "juros": {"modalidade": 2, "valorPerc": "1.00"},
            "desconto": {"modalidade": 1, "descontoDataFixa": [{"data": ymd(due - Duration::days(2)), "valorPerc": "5.00"}]}
        },
        "solicitacaoPagador": "boleto 7",
        "infoAdicionais": [{"nome": "pedido", "valor": "7"}]
    })
}

fn pay(txid: &str, amount: Option<&str>) -> String {
    match amount {
        Some(a) => format!(r#"{{"txid": "{txid}", "amount": {a}}}"#),
        None => format!(r#"{{"txid": "{txid}"}}"#),
    }
}

#[actix_rt::test]
async fn a_cobv_is_priced_by_the_day_paid_once_at_that_price_and_listed_apart_from_cobs() {
    let app = TestApp::spawn_fast().await;
    let today = noon(&app).await;
    let token = app.demo_token().await;
    let (_, me) = app.get_with("/api/account", &token).await;
    let due = today + Duration::days(3);
    let (s, b) = put(&app, &token, TXID, &cobv(due)).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!((b["status"].as_str(), b["revisao"].as_i64()), (Some("ATIVA"), Some(0)));
    assert_eq!(b["calendario"]["dataDeVencimento"], ymd(due));
    assert_eq!(b["calendario"]["validadeAposVencimento"], 5);
    assert_eq!(b["valor"], cobv(due)["valor"], "valor as it was sent");
    assert_eq!(b["devedor"]["cep"], "50000000");
    assert_eq!(b["chave"], me["receivingKey"]);
    assert_eq!((b["loc"]["tipoCob"].as_str(), &b["location"]), (Some("cobv"), &b["loc"]["location"]));
    let code = brcode::parse(b["location"].as_str().unwrap()).unwrap();
    assert_eq!(code.amount, None, "a cobv's code has no amount: it is priced on the day");
    let (s, got) = app.get_with(&format!("/cobv/{TXID}"), &token).await;
    assert_eq!((s, &got), (200, &b));

    // A cob is not a cobv and shares its txids.
    let cob = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "1.00"}});
    let (s, e) = send(app.client.put(app.url(&format!("/cob/{TXID}"))).bearer_auth(&token), Some(cob)).await;
    assert_eq!(s, 409, "{e}");
    assert_eq!(app.get_with(&format!("/cob/{TXID}"), &token).await.0, 404);
    let (s, e) = put(&app, &token, TXID, &cobv(due)).await;
    assert_eq!(s, 409, "{e}");
    assert_simple(&e, 409);

    // Today, 3 days early: the discount applies (95.00); any other amount is refused.
    let (s, e) = app.post_raw("/sandbox/pay", &token, &pay(TXID, Some("100.00")), &[]).await;
    // Told as every wrong amount is: HTTP_ERROR with errorCode PIX_INVALID_AMOUNT.
    assert_extended(&e, 400, "HTTP_ERROR");
    assert_eq!(
        (e["errorCode"].as_str(), e["details"]["violations"][0]["field"].as_str()),
        (Some("PIX_INVALID_AMOUNT"), Some("amount")),
        "{e}"
    );
    assert_eq!((s, e["details"]["amountDue"].as_str()), (400, Some("95.00")), "{e}");
    // Two days late: 100 + the 2.00 fine + 1 % a day for 2 days.
    let token = days_later(&app, 5).await;
    let (s, paid) = app.post_raw("/sandbox/pay", &token, &pay(TXID, Some("104.00")), &[]).await;
    assert_eq!(s, 200, "{paid}");
    let (_, got) = app.get_with(&format!("/cobv/{TXID}"), &token).await;
    assert_eq!(got["status"], "CONCLUIDA");
    assert_eq!(got["valor"]["original"], "100.00", "the terms stay as written");
    assert_eq!(got["pix"][0]["valor"], "104.00", "{got}");
    assert_eq!(got["pix"][0]["endToEndId"], paid["endToEndId"]);
    // Paid once: not again, not revised.
    let (s, e) = app.post_raw("/sandbox/pay", &token, &pay(TXID, None), &[]).await;
    assert_eq!(s, 422, "{e}");
    let (s, e) = patch(&app, &token, TXID, json!({"valor": {"original": "1.00"}})).await;
    assert_eq!(s, 409, "{e}");
    // In the transactions list, a Pix in of the amount paid.
    let e2e = paid["endToEndId"].as_str().unwrap();
    let (s, list) = app.get_with(&format!("/api/transactions?endToEndId={e2e}"), &token).await;
    assert_eq!(s, 200, "{list}");
    let t = &list["data"][0];
    assert_eq!(t["transactionId"], paid["transactionId"], "{list}");
    assert_eq!((t["operationType"].as_str(), t["status"].as_str()), (Some("Pix in"), Some("Confirmado")));
    assert_eq!(t["originalAmount"].to_string(), "104.00", "{t}");
    // The received PIX is refundable like any other.
    let req = app.client.put(app.url(&format!("/pix/{e2e}/devolucao/cobv1"))).bearer_auth(&token);
    assert_eq!(send(req, Some(json!({"valor": "104.00"}))).await.0, 201);
    let req = app.client.put(app.url(&format!("/pix/{e2e}/devolucao/cobv2"))).bearer_auth(&token);
    assert_eq!(send(req, Some(json!({"valor": "0.01"}))).await.0, 400, "nothing left to refund");

    // Lists: /cobv has it (with the status filter), /cob does not.
    let range = format!(
        "inicio={}&fim={}",
        (Utc::now() - Duration::days(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        (Utc::now() + Duration::days(20)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    )
    .replace('+', "%2B");
    let (s, list) = app.get_with(&format!("/cobv?{range}&status=CONCLUIDA"), &token).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["cobs"].as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list["cobs"][0]["txid"], TXID);
    assert_eq!(list["parametros"]["status"], "CONCLUIDA");
    let (_, list) = app.get_with(&format!("/cobv?{range}&status=ATIVA"), &token).await;
    assert_eq!(list["cobs"], json!([]));
    let (_, list) = app.get_with(&format!("/cob?{range}"), &token).await;
    assert_eq!(list["cobs"], json!([]), "a cobv is not listed as a cob");
}

#[actix_rt::test]
async fn a_cobv_is_revised_by_merge_patches_removed_and_expires_after_its_validity() {
    let app = TestApp::spawn_fast().await;
    let today = noon(&app).await;
    let token = app.demo_token().await;
    let due = today + Duration::days(10);
    let (s, created) = put(&app, &token, TXID, &cobv(due)).await;
    assert_eq!(s, 201, "{created}");
    // A revision replaces what it names; what it leaves out stays.
    let later = due + Duration::days(5);
    let (s, r) = patch(
        &app,
        &token,
        TXID,
        json!({"calendario": {"dataDeVencimento": ymd(later)}, "valor": {"original": "80.00"}, "solicitacaoPagador": null}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["revisao"], 1);
    assert_eq!(
        (r["valor"]["original"].as_str(), r["calendario"]["dataDeVencimento"].as_str()),
        (Some("80.00"), Some(ymd(later).as_str()))
    );
    assert_eq!(r["calendario"]["validadeAposVencimento"], 5, "kept");
    assert_eq!(r["valor"]["multa"], cobv(due)["valor"]["multa"], "kept");
    assert!(r.get("solicitacaoPagador").is_none(), "null removes it: {r}");
    assert_eq!(r["location"], created["location"], "the same code: it names the charge, not a price");
    let (s, r) =
        patch(&app, &token, TXID, json!({"valor": {"multa": null, "juros": null, "desconto": null}})).await;
    assert_eq!((s, r["revisao"].as_i64()), (200, Some(2)), "{r}");
    assert_eq!(r["valor"], json!({"original": "80.00"}));
    // A revision that breaks a rule changes nothing.
    for bad in [
        json!({"calendario": {"validadeAposVencimento": 3651}}),
        json!({"valor": {"original": "80"}}),
        json!({"valor": {"desconto": {"modalidade": 1, "descontoDataFixa": [{"data": ymd(later + Duration::days(1)), "valorPerc": "1.00"}]}}}),
        json!({"devedor": {"cpf": "52998224725"}}),
        json!({"loc": {"id": 1}}),
        json!({}),
        json!({"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR", "valor": {"original": "1.00"}}),
    ] {
        let (s, e) = patch(&app, &token, TXID, bad.clone()).await;
        assert_eq!(s, 400, "{bad}: {e}");
        assert_simple(&e, 400);
    }
    let (_, got) = app.get_with(&format!("/cobv/{TXID}"), &token).await;
    assert_eq!((got["revisao"].as_i64(), got["valor"]["original"].as_str()), (Some(2), Some("80.00")));
    // Paid at the revised price, on the (revised) due date.
    let token = days_later(&app, 15).await;
    let (s, p) = app.post_raw("/sandbox/pay", &token, &pay(TXID, Some("80.00")), &[]).await;
    assert_eq!(s, 200, "{p}");

    // Removed by the receiver: no longer payable.
    let other = "removida20261124abcdefghijk1";
    assert_eq!(put(&app, &token, other, &cobv(today + Duration::days(20))).await.0, 201);
    let (s, r) = patch(&app, &token, other, json!({"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"})).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("REMOVIDA_PELO_USUARIO_RECEBEDOR")), "{r}");
    assert_eq!(app.post_raw("/sandbox/pay", &token, &pay(other, None), &[]).await.0, 422);

    // Past its validity: REMOVIDA_PELO_PSP at the end of its last day.
    let short = "validade20261124abcdefghijk1";
    let last = today + Duration::days(15);
    let mut body = cobv(last);
    body["calendario"]["validadeAposVencimento"] = json!(0);
    assert_eq!(put(&app, &token, short, &body).await.0, 201);
    // Noon of its last day plus 11:59:59 is still that day in Sao Paulo.
    app.advance(12 * 3600 - 1).await;
    let token = app.demo_token().await;
    assert_eq!(app.get_with(&format!("/cobv/{short}"), &token).await.1["status"], "ATIVA");
    app.advance(1).await;
    let token = app.demo_token().await;
    let (_, got) = app.get_with(&format!("/cobv/{short}"), &token).await;
    assert_eq!(got["status"], "REMOVIDA_PELO_PSP", "{got}");
    assert_eq!(app.post_raw("/sandbox/pay", &token, &pay(short, None), &[]).await.0, 422);
    let (s, e) = patch(&app, &token, short, json!({"valor": {"original": "1.00"}})).await;
    assert_eq!(s, 409, "{e}");
}

#[actix_rt::test]
async fn another_account_pays_a_cobv_by_qr_code_at_the_amount_of_the_day_and_only_that() {
    let app = TestApp::spawn_fast().await;
    let today = noon(&app).await;
    let payer = app.demo_token().await;
    app.fund(&payer, "200").await;
    let (_, client_id, secret, pem) = app.new_account_with("Padaria Payee", true).await;
    let (s, t) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(s, 201, "{t}");
    let payee = t["access_token"].as_str().unwrap().to_owned();
    // Due yesterday: today it owes the fine and a day of interest, 103.00.
    let mut body = cobv(today - Duration::days(1));
    body["valor"].as_object_mut().unwrap().remove("desconto");
    let (s, c) = put(&app, &payee, TXID, &body).await;
    assert_eq!(s, 201, "{c}");
    let before = app.balance(&payer).await;
    for wrong in ["100.00", "103.01"] {
        let qr = format!(
            r#"{{"value": {wrong}, "qrCode": "{}", "externalId": "pay-{wrong}"}}"#,
            c["location"].as_str().unwrap()
        );
        let (s, e) = app.post_raw("/api/pix/cash-out-qrcode", &payer, &qr, &[]).await;
        assert_extended(&e, 400, "HTTP_ERROR");
        assert_eq!((s, e["errorCode"].as_str()), (400, Some("PIX_INVALID_AMOUNT")), "{e}");
        assert!(e["message"].to_string().contains("103.00"), "names the amount due: {e}");
    }
    assert_eq!(app.balance(&payer).await, before, "a refused payment moves nothing");
    let qr = format!(
        r#"{{"value": 103.00, "qrCode": "{}", "externalId": "pay-right"}}"#,
        c["location"].as_str().unwrap()
    );
    let (s, paid) = app.post_raw("/api/pix/cash-out-qrcode", &payer, &qr, &[]).await;
    assert_eq!(s, 201, "{paid}");
    let out = app.wait_final(&payer, paid["transactionId"].as_str().unwrap()).await;
    assert_eq!(out["status"], "CONFIRMED", "{out}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let got = loop {
        let (_, got) = app.get_with(&format!("/cobv/{TXID}"), &payee).await;
        if got["status"] == "CONCLUIDA" {
            break got;
        }
        assert!(std::time::Instant::now() < deadline, "the cobv was not paid: {got}");
        actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(got["pix"][0]["valor"], "103.00");
    assert_eq!(got["pix"][0]["endToEndId"], out["endToEndId"], "one end-to-end id on both sides");
    assert_eq!(got["pix"][0]["pagador"]["nome"], "Demo");
    // A paid cobv's code pays no more.
    let qr = format!(
        r#"{{"value": 103.00, "qrCode": "{}", "externalId": "pay-again"}}"#,
        c["location"].as_str().unwrap()
    );
    let (s, e) = app.post_raw("/api/pix/cash-out-qrcode", &payer, &qr, &[]).await;
    assert_eq!(s, 400, "{e}");
    assert_eq!(e["details"]["violations"][0]["field"], "qrCode", "{e}");
}

#[actix_rt::test]
async fn a_cobv_and_its_revision_survive_a_kill_and_are_paid_at_their_terms() {
    let mut app = TestApp::spawn_fast().await;
    let today = noon(&app).await;
    let token = app.demo_token().await;
    let (s, created) = put(&app, &token, TXID, &cobv(today + Duration::days(1))).await;
    assert_eq!(s, 201, "{created}");
    let (s, revised) =
        patch(&app, &token, TXID, json!({"valor": {"abatimento": {"modalidade": 2, "valorPerc": "10.00"}}}))
            .await;
    assert_eq!(s, 200, "{revised}");
    // kill -9: what was acknowledged is on disk.
    let mut child = app.take_child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    app.start_again(&crate::helpers::Options::default());
    let token = app.demo_token().await;
    let (s, got) = app.get_with(&format!("/cobv/{TXID}"), &token).await;
    assert_eq!((s, &got), (200, &revised), "the terms and the revision as acknowledged");
    // Two days later (one day late): 90 after the abatement, + 2.00 fine + 1 % of 90.
    let token = days_later(&app, 2).await;
    let (s, paid) = app.post_raw("/sandbox/pay", &token, &pay(TXID, Some("92.90")), &[]).await;
    assert_eq!(s, 200, "{paid}");
}

/// What a client needs to integrate: the price of paying today in the cobv's own view
/// (`valorDoDia`, which `/sandbox/pay` then charges), and the revision a change is based on
/// (`ETag` on every answer, `If-Match` on a PATCH: a revision made since is 412, nothing
/// overwritten).
#[actix_rt::test]
async fn a_cobv_shows_the_price_of_the_day_and_a_patch_names_the_revision_it_read() {
    let app = TestApp::spawn_fast().await;
    let today = noon(&app).await;
    let token = app.demo_token().await;
    let due = today + Duration::days(3);
    let (s, b) = put(&app, &token, TXID, &cobv(due)).await;
    assert_eq!(s, 201, "{b}");
    let read = |token: String| {
        let req = app.client.get(app.url(&format!("/cobv/{TXID}"))).bearer_auth(token);
        async move {
            let mut res = req.send().await.unwrap();
            let etag = res.headers().get("etag").map(|v| v.to_str().unwrap().to_owned());
            let body: Value = serde_json::from_slice(&res.body().await.unwrap()).unwrap();
            (etag, body)
        }
    };
    let (etag, got) = read(token.clone()).await;
    assert_eq!(etag.as_deref(), Some("\"0\""));
    // Three days early: 5.00 off.
    assert_eq!(
        got["valorDoDia"],
        json!({"data": ymd(today), "original": "100.00", "abatimento": "0.00", "desconto": "5.00",
               "multa": "0.00", "juros": "0.00", "final": "95.00"}),
        "{got}"
    );

    let patch_if = |body: Value, tag: &str| {
        let req = app
            .client
            .patch(app.url(&format!("/cobv/{TXID}")))
            .bearer_auth(&token)
            .insert_header(("If-Match", tag.to_owned()));
        send(req, Some(body))
    };
    let (s, b) = patch_if(json!({"solicitacaoPagador": "boleto 8"}), "\"0\"").await;
    assert_eq!((s, b["revisao"].as_u64()), (200, Some(1)), "{b}");
    // A change based on revision 0, which is no longer current: refused, nothing changed.
    let (s, e) = patch_if(json!({"valor": {"original": "50.00"}}), "\"0\"").await;
    assert_eq!(s, 412, "{e}");
    assert_simple(&e, 412);
    let (s, e) = patch_if(json!({"valor": {"original": "50.00"}}), "W/\"x\"").await;
    assert_eq!(s, 412, "not one of our tags: {e}");
    let (etag, got) = read(token.clone()).await;
    assert_eq!((etag.as_deref(), got["revisao"].as_u64()), (Some("\"1\""), Some(1)));
    assert_eq!(got["valor"]["original"], "100.00", "{got}");
    assert_eq!(got["solicitacaoPagador"], "boleto 8");
    // `*`, or no If-Match at all, is based on the revision current when the change arrives.
    let (s, b) = patch_if(json!({"valor": {"original": "50.00"}}), "*").await;
    assert_eq!((s, b["revisao"].as_u64()), (200, Some(2)), "{b}");
    let (_, got) = read(token.clone()).await;
    assert_eq!(got["valorDoDia"]["final"], "45.00", "5.00 off the new 50.00: {got}");

    // Two days late, the day's price has the fine and interest, and the sandbox charges it.
    let token = days_later(&app, 5).await;
    let (_, got) = read(token.clone()).await;
    let day = &got["valorDoDia"];
    // 50.00 + the 2.00 fine + 1 % a day for 2 days.
    assert_eq!(
        (day["multa"].as_str(), day["juros"].as_str(), day["final"].as_str()),
        (Some("2.00"), Some("1.00"), Some("53.00")),
        "{got}"
    );
    let (s, paid) = app.post_raw("/sandbox/pay", &token, &pay(TXID, Some("53.00")), &[]).await;
    assert_eq!(s, 200, "{paid}");
    let (_, got) = read(token).await;
    assert_eq!(got["status"], "CONCLUIDA");
    assert!(got.get("valorDoDia").is_none(), "nothing to pay once paid: {got}");
}
