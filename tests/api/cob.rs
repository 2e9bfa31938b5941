//! Family B immediate charges: `PUT`, `GET`, `PATCH /cob/{txid}`.

use futures::future::join_all;
use pixgw::domain::brcode;
use serde_json::{json, Value};

use crate::helpers::{assert_simple, send, TestApp};

const TXID: &str = "pedido20261122abcdefghijk01";

async fn put(app: &TestApp, token: &str, txid: &str, body: Value) -> (u16, Value) {
    send(app.client.put(app.url(&format!("/cob/{txid}"))).bearer_auth(token), Some(body)).await
}

fn cob(valor: &str) -> Value {
    json!({
        "calendario": {"expiracao": 3600},
        "devedor": {"cpf": "52998224725", "nome": "Ana Devedora"},
        "valor": {"original": valor},
        "solicitacaoPagador": "pedido 42",
        "infoAdicionais": [{"nome": "loja", "valor": "centro"}]
    })
}

#[actix_rt::test]
async fn a_cob_is_created_read_paid_and_refundable() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (_, me) = app.get_with("/api/account", &token).await;
    let (s, b) = put(&app, &token, TXID, cob("42.00")).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["txid"], TXID);
    assert_eq!(b["status"], "ATIVA");
    assert_eq!(b["revisao"], 0);
    assert_eq!(b["calendario"]["expiracao"], 3600);
    assert_eq!(b["valor"]["original"], "42.00");
    assert_eq!(b["chave"], me["receivingKey"]);
    assert_eq!(b["devedor"], json!({"cpf": "52998224725", "nome": "Ana Devedora"}));
    assert_eq!(b["loc"]["tipoCob"], "cob");
    assert_eq!(b["location"], b["loc"]["location"]);
    let code = brcode::parse(b["location"].as_str().unwrap()).unwrap();
    // The cob's txid does not fit the code's field of 25: the code names it by reference.
    assert!(code.txid.as_deref().is_some_and(|r| r.starts_with("COB") && r.len() <= 25), "{code:?}");
    assert_eq!(code.amount.map(|a| a.to_cents_string()), Some("42.00".into()));
    let (s, got) = app.get_with(&format!("/cob/{TXID}"), &token).await;
    assert_eq!((s, &got), (200, &b));
    let (s, paid) = app.post_raw("/sandbox/pay", &token, &json!({"txid": TXID}).to_string(), &[]).await;
    assert_eq!(s, 200, "{paid}");
    let (_, got) = app.get_with(&format!("/cob/{TXID}"), &token).await;
    assert_eq!(got["status"], "CONCLUIDA");
    assert_eq!(app.balance(&token).await.0, "42.00");
    // A paid cob is a received PIX: it can be refunded.
    let e2e = paid["endToEndId"].as_str().unwrap();
    let req = app.client.put(app.url(&format!("/pix/{e2e}/devolucao/d1"))).bearer_auth(&token);
    assert_eq!(send(req, Some(json!({"valor": "2.00"}))).await.0, 201);
}

#[actix_rt::test]
async fn cobs_whose_txids_share_25_characters_have_codes_that_each_pay_their_own_cob() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (a, b) = (format!("{}X", &TXID[..25]), format!("{}Y", &TXID[..25]));
    let (s, cob_a) = put(&app, &token, &a, cob("1.00")).await;
    assert_eq!(s, 201, "{cob_a}");
    let (s, cob_b) = put(&app, &token, &b, cob("2.00")).await;
    assert_eq!(s, 201, "{cob_b}");
    assert_ne!(cob_a["location"], cob_b["location"]);
    let pay = |code: &Value| json!({"pixCode": code}).to_string();
    let (s, paid) = app.post_raw("/sandbox/pay", &token, &pay(&cob_b["location"]), &[]).await;
    assert_eq!((s, paid["txid"].as_str()), (200, Some(b.as_str())), "{paid}");
    assert_eq!(app.get_with(&format!("/cob/{a}"), &token).await.1["status"], "ATIVA");
    assert_eq!(app.get_with(&format!("/cob/{b}"), &token).await.1["status"], "CONCLUIDA");
    let (s, paid) = app.post_raw("/sandbox/pay", &token, &pay(&cob_a["location"]), &[]).await;
    assert_eq!((s, paid["txid"].as_str()), (200, Some(a.as_str())), "{paid}");
    assert_eq!(app.balance(&token).await.0, "3.00");
    // Another account's code is not the caller's to pay.
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let other = t["access_token"].as_str().unwrap();
    let (s, _) = app.post_raw("/sandbox/pay", other, &pay(&cob_a["location"]), &[]).await;
    assert_eq!(s, 404);
}

#[actix_rt::test]
async fn a_txid_is_created_once_even_concurrently() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let results = join_all((0..10).map(|_| put(&app, &token, TXID, cob("1.00")))).await;
    assert_eq!(results.iter().filter(|(s, _)| *s == 201).count(), 1);
    for (s, b) in results.iter().filter(|(s, _)| *s != 201) {
        assert_eq!(*s, 409);
        assert_simple(b, 409);
    }
}

#[actix_rt::test]
async fn an_invalid_cob_is_a_simple_400_and_stores_nothing() {
    // Each body rule is the reader's (unit tests of `http::cob`); this is the route.
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    for (txid, body) in [("short", cob("1.00")), (TXID, cob("1.0"))] {
        let (s, b) = put(&app, &token, txid, body.clone()).await;
        assert_eq!(s, 400, "{txid} {body}: {b}");
        assert_simple(&b, 400);
    }
    assert_eq!(app.get_with(&format!("/cob/{TXID}"), &token).await.0, 404);
    // An alphanumeric CNPJ with its right check digits is a debtor like any other.
    let devedor = json!({"cnpj": "12ABC34501DE35", "nome": "Aurora"});
    let body = json!({"calendario": {}, "valor": {"original": "1.00"}, "devedor": devedor});
    let (s, b) = put(&app, &token, TXID, body).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["devedor"], devedor);
}

#[actix_rt::test]
async fn a_cob_can_be_cancelled_once_and_expires_on_the_clock() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    assert_eq!(put(&app, &token, TXID, cob("5.00")).await.0, 201);
    let patch = |txid: &str, body: Value| {
        let (app, token, path) = (&app, token.clone(), format!("/cob/{txid}"));
        async move { send(app.client.patch(app.url(&path)).bearer_auth(&token), Some(body)).await }
    };
    let (s, b) = patch(TXID, json!({"status": "CONCLUIDA"})).await;
    assert_eq!(s, 400, "{b}");
    let (s, b) = patch(TXID, json!({"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"})).await;
    assert_eq!((s, b["status"].as_str()), (200, Some("REMOVIDA_PELO_USUARIO_RECEBEDOR")));
    let (s, b) = patch(TXID, json!({"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"})).await;
    assert_eq!(s, 409);
    assert_simple(&b, 409);
    let (s, _) = app.post_raw("/sandbox/pay", &token, &json!({"txid": TXID}).to_string(), &[]).await;
    assert_eq!(s, 422);
    let other = "expira20261122abcdefghijk0";
    assert_eq!(
        put(&app, &token, other, json!({"calendario": {"expiracao": 60}, "valor": {"original": "3.00"}}))
            .await
            .0,
        201
    );
    app.advance(60).await;
    let token = app.demo_token().await;
    let (_, got) = app.get_with(&format!("/cob/{other}"), &token).await;
    assert_eq!(got["status"], "REMOVIDA_PELO_PSP");
    assert_eq!(app.balance(&token).await.0, "0.00");
    // Another account does not see it.
    let (_, client_id, secret, pem) = app.new_account("Other").await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    assert_eq!(app.get_with(&format!("/cob/{other}"), t["access_token"].as_str().unwrap()).await.0, 404);
}

#[actix_rt::test]
async fn a_cob_posted_without_a_txid_gets_one_from_the_server() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let post = |body: Value| {
        let (app, token) = (&app, token.clone());
        async move { send(app.client.post(app.url("/cob")).bearer_auth(&token), Some(body)).await }
    };
    let (s, first) = post(cob("7.50")).await;
    assert_eq!(s, 201, "{first}");
    let txid = first["txid"].as_str().unwrap().to_owned();
    assert_eq!(txid.len(), 32);
    assert!(txid.bytes().all(|b| b.is_ascii_alphanumeric()), "{txid}");
    assert_eq!(first["status"], "ATIVA");
    assert_eq!(first["valor"]["original"], "7.50");
    let (s, read) = app.get_with(&format!("/cob/{txid}"), &token).await;
    assert_eq!(s, 200);
    assert_eq!(read["location"], first["location"]);
    // Each POST is a new cob.
    let (s, second) = post(cob("7.50")).await;
    assert_eq!(s, 201);
    assert_ne!(second["txid"], first["txid"]);
    let (s, b) = post(cob("7.5")).await;
    assert_eq!(s, 400);
    assert_simple(&b, 400);
}

#[actix_rt::test]
async fn the_cob_list_filters_by_range_status_and_debtor_and_pages_from_zero() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let mut created = Vec::new();
    for (i, devedor) in
        [("52998224725", "Ana"), ("11144477735", "Bia"), ("52998224725", "Ana")].iter().enumerate()
    {
        let body = json!({"calendario": {}, "valor": {"original": format!("{}.00", i + 1)}, "devedor": {"cpf": devedor.0, "nome": devedor.1}});
        let txid = format!("{TXID}{i}");
        let (s, cob) = put(&app, &token, &txid, body).await;
        assert_eq!(s, 201, "{cob}");
        created.push(cob);
        // Distinct creation instants, so "newest first" has one answer.
        app.advance(1).await;
    }
    // A family A charge is not a cob.
    let charge = r#"{"transaction": {"value": 1, "description": "order", "externalId": "not-a-cob"}, "payer": {"fullName": "Ana Payer", "document": "52998224725"}}"#;
    assert_eq!(app.post_raw("/api/pix/cash-in", &token, charge, &[]).await.0, 201);
    let patch = json!({"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"});
    let (s, _) =
        send(app.client.patch(app.url(&format!("/cob/{TXID}0"))).bearer_auth(&token), Some(patch)).await;
    assert_eq!(s, 200);
    let start = created[0]["calendario"]["criacao"].as_str().unwrap().to_owned();
    let end = created[2]["calendario"]["criacao"].as_str().unwrap().to_owned();
    let list = |extra: &str| {
        let (app, token) = (&app, token.clone());
        let url = format!("/cob?inicio={start}&fim={end}{extra}");
        async move { app.get_with(&url, &token).await }
    };
    let (s, all) = list("").await;
    assert_eq!(s, 200, "{all}");
    let txids: Vec<&str> =
        all["cobs"].as_array().unwrap().iter().map(|c| c["txid"].as_str().unwrap()).collect();
    assert_eq!(txids, vec![format!("{TXID}2"), format!("{TXID}1"), format!("{TXID}0")], "newest first");
    assert_eq!(all["parametros"]["paginacao"]["quantidadeTotalDeItens"], 3);
    assert_eq!(all["parametros"]["paginacao"]["paginaAtual"], 0);
    let (_, ana) = list("&cpf=52998224725").await;
    assert_eq!(ana["cobs"].as_array().unwrap().len(), 2);
    assert_eq!(ana["parametros"]["cpf"], "52998224725");
    let (_, active) = list("&status=ATIVA").await;
    assert_eq!(active["parametros"]["paginacao"]["quantidadeTotalDeItens"], 2);
    let (_, page) = list("&paginacao.paginaAtual=1&paginacao.itensPorPagina=2").await;
    assert_eq!(page["cobs"].as_array().unwrap().len(), 1);
    assert_eq!(page["cobs"][0]["txid"], format!("{TXID}0"));
    assert_eq!(page["parametros"]["paginacao"]["quantidadeDePaginas"], 2);
    let (s, b) = app.get_with("/cob?inicio=2026-01-01T00:00:00Z", &token).await;
    assert_eq!(s, 400);
    assert_simple(&b, 400);
}

#[actix_rt::test]
async fn received_pix_are_read_one_by_one_and_listed_with_their_refunds() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let post = |path: &'static str, body: Value| {
        let (app, token) = (&app, token.clone());
        async move { send(app.client.post(app.url(path)).bearer_auth(&token), Some(body)).await }
    };
    let (s, received) =
        post("/sandbox/pix-in", json!({"amount": 10, "payerName": "Ana", "payerDocument": "52998224725"}))
            .await;
    assert_eq!(s, 201, "{received}");
    let e2e = received["endToEndId"].as_str().unwrap().to_owned();
    let (s, pix) = app.get_with(&format!("/pix/{e2e}"), &token).await;
    assert_eq!(s, 200, "{pix}");
    assert_eq!((pix["valor"].as_str(), pix["pagador"]["cpf"].as_str()), (Some("10.00"), Some("52998224725")));
    assert!(pix.get("txid").is_none(), "{pix}");
    assert_eq!(pix["devolucoes"], json!([]));
    let refund = json!({"valor": "3.00"});
    let path = format!("/pix/{e2e}/devolucao/d1");
    assert_eq!(send(app.client.put(app.url(&path)).bearer_auth(&token), Some(refund)).await.0, 201);
    let (_, pix) = app.get_with(&format!("/pix/{e2e}"), &token).await;
    assert_eq!(pix["devolucoes"].as_array().unwrap().len(), 1, "{pix}");
    assert_eq!(pix["devolucoes"][0]["id"], "d1");

    // A paid cob shows the PIX that paid it.
    assert_eq!(put(&app, &token, TXID, cob("4.00")).await.0, 201);
    let (s, paid) = post("/sandbox/pay", json!({"txid": TXID})).await;
    assert_eq!(s, 200, "{paid}");
    let (_, read) = app.get_with(&format!("/cob/{TXID}"), &token).await;
    assert_eq!(read["status"], "CONCLUIDA");
    assert_eq!(read["pix"][0]["txid"], TXID);
    assert_eq!(read["pix"][0]["valor"], "4.00");
    assert_eq!(read["pix"][0]["endToEndId"], paid["endToEndId"]);

    let inicio = pix["horario"].as_str().unwrap().to_owned();
    let fim = iso(chrono::DateTime::parse_from_rfc3339(&inicio).unwrap().with_timezone(&chrono::Utc)
        + chrono::Duration::days(1));
    let list = |extra: String| {
        let (app, token) = (&app, token.clone());
        let url = format!("/pix?inicio={inicio}&fim={fim}{extra}");
        async move { app.get_with(&url, &token).await }
    };
    let (s, all) = list(String::new()).await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(all["parametros"]["paginacao"]["quantidadeTotalDeItens"], 2, "{all}");
    let (_, with_txid) = list("&txIdPresente=true".into()).await;
    assert_eq!(with_txid["pix"][0]["txid"], TXID);
    assert_eq!(with_txid["pix"].as_array().unwrap().len(), 1);
    let (_, refunded) = list("&devolucaoPresente=true".into()).await;
    assert_eq!(refunded["pix"][0]["endToEndId"], e2e.as_str());
    assert_eq!(refunded["pix"].as_array().unwrap().len(), 1);
    let (_, by_txid) = list(format!("&txid={TXID}")).await;
    assert_eq!(by_txid["pix"].as_array().unwrap().len(), 1);
    // Both payers are this CPF: the sandbox payer of the PIX in, and the cob's debtor, who
    // paid it.
    let (_, by_payer) = list("&cpf=52998224725".into()).await;
    assert_eq!(by_payer["pix"].as_array().unwrap().len(), 2, "{by_payer}");
    let (_, nobody) = list("&cpf=11144477735".into()).await;
    assert_eq!(nobody["pix"], json!([]));

    let (s, b) = app.get_with(&format!("/pix/E{}", "0".repeat(31)), &token).await;
    assert_eq!(s, 404);
    assert_simple(&b, 404);
    let (s, b) = app.get_with("/pix?fim=2026-01-01T00:00:00Z", &token).await;
    assert_eq!(s, 400);
    assert_simple(&b, 400);
}

/// `GET /pix` selects and orders by when the money arrived (`horario`): a cob created three
/// days before it was paid is in the window around its payment, after a PIX received
/// between the two, and not in a window around its creation (it was, before).
#[actix_rt::test]
async fn received_pix_are_listed_by_when_they_were_received_not_when_their_charge_was_created() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let mut body = cob("5.00");
    body["calendario"]["expiracao"] = json!(604_800);
    let (s, created) = put(&app, &token, TXID, body).await;
    assert_eq!(s, 201, "{created}");
    let criacao = chrono::DateTime::parse_from_rfc3339(created["calendario"]["criacao"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    app.advance(3 * 86_400).await;
    let token = app.demo_token().await;
    let (s, pix_in) = app.post_raw("/sandbox/pix-in", &token, r#"{"amount": 2}"#, &[]).await;
    assert_eq!(s, 201, "{pix_in}");
    app.advance(3_600).await;
    let token = app.demo_token().await;
    let (s, paid) = app.post_raw("/sandbox/pay", &token, &json!({"txid": TXID}).to_string(), &[]).await;
    assert_eq!(s, 200, "{paid}");
    let window = |from: chrono::DateTime<chrono::Utc>, to: chrono::DateTime<chrono::Utc>| {
        let (app, token) = (&app, token.clone());
        let url = format!("/pix?inicio={}&fim={}", iso(from), iso(to));
        async move { app.get_with(&url, &token).await }
    };
    let hour = chrono::Duration::hours(1);
    let around_payment = criacao + chrono::Duration::days(3);
    let (s, listed) = window(around_payment - hour, around_payment + hour * 2).await;
    assert_eq!(s, 200, "{listed}");
    let e2es: Vec<&str> =
        listed["pix"].as_array().unwrap().iter().map(|p| p["endToEndId"].as_str().unwrap()).collect();
    assert_eq!(
        e2es,
        vec![paid["endToEndId"].as_str().unwrap(), pix_in["endToEndId"].as_str().unwrap()],
        "newest first by horario: {listed}"
    );
    assert_eq!(listed["pix"][0]["txid"], TXID);
    let horario = listed["pix"][0]["horario"].as_str().unwrap();
    assert!(horario > listed["pix"][1]["horario"].as_str().unwrap(), "{listed}");
    let (_, at_creation) = window(criacao - hour, criacao + hour).await;
    assert_eq!(at_creation["pix"], json!([]), "not by the charge's creation: {at_creation}");
}

fn iso(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
