//! Pix Automático recurrences through the real server: journey 1 from creation to each
//! ending (approved with the payer's maximum, rejected, expired by the clock, cancelled by
//! either side), the `rec` webhooks in order, a withdrawn solicitation sent again, the list
//! and its filters, bad input, another account's ids, and a solicitation that expires after
//! a kill -9.

use serde_json::{json, Value};

use crate::helpers::{assert_extended, assert_simple, send, spawn_with, Options, TestApp};
use crate::receiver::{signature_verifies, Receiver};

/// Tomorrow in São Paulo (the server's clock is the system's in a fresh app).
pub fn tomorrow() -> String {
    let sp = chrono::Utc::now() - chrono::Duration::hours(3);
    (sp.date_naive() + chrono::Duration::days(1)).to_string()
}

pub fn rec_body(valor: Value) -> Value {
    json!({
        "vinculo": {"objeto": "Gym", "contrato": "c-77", "devedor": {"cpf": "52998224725", "nome": "Ana"}},
        "calendario": {"dataInicial": tomorrow(), "periodicidade": "MENSAL"},
        "valor": valor,
        "politicaRetentativa": "PERMITE_3R_7D",
    })
}

pub fn in_hours(h: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::hours(h)).to_rfc3339()
}

pub fn solic_body(id_rec: &str, expires: &str) -> Value {
    json!({
        "idRec": id_rec,
        "destinatario": {"cpf": "11144477735", "conta": "123456", "agencia": "0001", "ispbParticipante": "00000000"},
        "calendario": {"dataExpiracaoSolicitacao": expires},
    })
}

pub async fn post(app: &TestApp, path: &str, token: &str, body: Value) -> (u16, Value) {
    app.post_raw(path, token, &body.to_string(), &[]).await
}

pub async fn patch(app: &TestApp, path: &str, token: &str, body: Value) -> (u16, Value) {
    send(awc::Client::new().patch(app.url(path)).bearer_auth(token), Some(body)).await
}

/// A recurrence made and sent for authorisation: (idRec, idSolicRec).
pub async fn sent(app: &TestApp, token: &str, valor: Value, expires: &str) -> (String, String) {
    let (s, r) = post(app, "/rec", token, rec_body(valor)).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, sol) = post(app, "/solicrec", token, solic_body(&id, expires)).await;
    assert_eq!(s, 201, "{sol}");
    (id, sol["idSolicRec"].as_str().unwrap().to_owned())
}

pub fn statuses(v: &Value) -> Vec<String> {
    v["atualizacao"].as_array().unwrap().iter().map(|u| u["status"].as_str().unwrap().to_owned()).collect()
}

#[actix_rt::test]
async fn journey_one_approved_with_a_maximum_is_told_by_webhooks_in_order() {
    let app = spawn_with(Options {
        env: vec![
            ("PIXGW_WEBHOOK_ALLOW_HTTP".into(), "1".into()),
            ("PIXGW_WEBHOOK_ALLOW_PRIVATE".into(), "1".into()),
        ],
        ..Default::default()
    })
    .await;
    let token = app.demo_token().await;
    let mut hooks = Receiver::ok();
    // The API Pix's own route sets the `rec` endpoint.
    let put = awc::Client::new().put(app.url("/webhookrec")).bearer_auth(&token);
    let (s, w) = send(put, Some(json!({"webhookUrl": hooks.url}))).await;
    assert_eq!((s, w["webhookUrl"].as_str()), (200, Some(hooks.url.as_str())), "{w}");
    let (_, listed) = app.get_with("/api/webhooks", &token).await;
    assert!(listed.to_string().contains("\"rec\""), "the same configuration: {listed}");

    let body = rec_body(json!({"valorMinimoRecebedor": "10.00"})).to_string();
    let key = [("Idempotency-Key", "rec-1")];
    let (s, r) = app.post_raw("/rec", &token, &body, &key).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, again) = app.post_raw("/rec", &token, &body, &key).await;
    assert_eq!((s, &again), (201, &r), "a retry with its key answers the first recurrence");
    assert!(id.starts_with("RR99999999") && id.len() == 29, "{id}");
    assert_eq!(
        (r["status"].as_str(), r["valor"]["valorMinimoRecebedor"].as_str()),
        (Some("CRIADA"), Some("10.00"))
    );
    assert_eq!(r["recebedor"]["ispbParticipante"], "99999999");
    assert_eq!(r["vinculo"]["devedor"]["cpf"], "52998224725");
    assert!(r.get("pagador").is_none(), "{r}");
    assert_eq!(r["ativacao"], json!({"tipoJornada": "AGUARDANDO_DEFINICAO"}), "no journey yet");

    let (s, sol) = post(&app, "/solicrec", &token, solic_body(&id, &in_hours(24))).await;
    assert_eq!(s, 201, "{sol}");
    assert_eq!((sol["status"].as_str(), sol["idRec"].as_str()), (Some("RECEBIDA"), Some(id.as_str())));
    assert_eq!(statuses(&sol), ["CRIADA", "ENVIADA", "RECEBIDA"]);
    assert_eq!(sol["recPayload"]["status"], "CRIADA");
    let sid = sol["idSolicRec"].as_str().unwrap().to_owned();
    let (s, again) = post(&app, "/solicrec", &token, solic_body(&id, &in_hours(24))).await;
    assert_eq!(s, 409, "one solicitation awaits at a time: {again}");
    assert_simple(&again, 409);

    let answer = json!({"decision": "APPROVE", "valorMaximo": "9.99"});
    let (s, low) = post(&app, &format!("/sandbox/solicrec/{sid}/answer"), &token, answer).await;
    assert_eq!(s, 400, "a maximum below the minimum: {low}");
    for (bad, member) in [
        (json!({"decision": "APPROVE", "valorMaximo": "50.00", "codMun": "355030"}), "codMun"),
        (json!({"decision": "APPROVE", "valorMaximo": "50.00", "codMun": "35503O8"}), "codMun"),
        (json!({"decision": "REJECT", "codMun": "3550308"}), "codMun"),
    ] {
        let (s, b) = post(&app, &format!("/sandbox/solicrec/{sid}/answer"), &token, bad).await;
        assert_eq!(s, 400, "{b}");
        assert!(b.to_string().contains(member), "{b}");
    }
    // The payer's institution says the payer's municipality (codMun, IBGE's 7 digits).
    let answer = json!({"decision": "APPROVE", "valorMaximo": "50.00", "codMun": "3550308"});
    let (s, ok) = post(&app, &format!("/sandbox/solicrec/{sid}/answer"), &token, answer).await;
    assert_eq!(s, 200, "{ok}");
    let (s, r) = app.get_with(&format!("/rec/{id}"), &token).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        (r["status"].as_str(), r["ativacao"]["tipoJornada"].as_str()),
        (Some("APROVADA"), Some("JORNADA_1"))
    );
    assert_eq!(
        (r["pagador"]["cpf"].as_str(), r["pagador"]["valorMaximo"].as_str(), r["pagador"]["codMun"].as_str()),
        (Some("11144477735"), Some("50.00"), Some("3550308"))
    );
    assert_eq!(statuses(&r), ["CRIADA", "APROVADA"]);
    let (s, sol) = app.get_with(&format!("/solicrec/{sid}"), &token).await;
    assert_eq!((s, sol["status"].as_str()), (200, Some("ACEITA")), "{sol}");
    let (s, late) =
        post(&app, &format!("/sandbox/solicrec/{sid}/answer"), &token, json!({"decision": "REJECT"})).await;
    assert_eq!(s, 409, "an answered solicitation takes no second answer: {late}");

    // Each status change once, in order, signed.
    for expected in ["CRIADA", "APROVADA"] {
        let got = hooks.next().await;
        let body = got.json();
        assert_eq!(body["recs"][0]["idRec"], id.as_str(), "{body}");
        assert_eq!(body["recs"][0]["status"], expected, "{body}");
        assert!(signature_verifies(&app.creds.webhook_secret, &got));
        assert!(got.path.ends_with("/rec"), "the API Pix's callback, {{webhookUrl}}/rec: {}", got.path);
    }
    assert!(hooks.drain().is_empty(), "no other event");
    let delete = awc::Client::new().delete(app.url("/webhookrec")).bearer_auth(&token);
    assert_eq!(send(delete, None).await.0, 204);
    assert_eq!(app.get_with("/webhookrec", &token).await.0, 404);
    let bad = awc::Client::new().put(app.url("/webhookcobr")).bearer_auth(&token);
    let (s, b) = send(bad, Some(json!({"webhookUrl": "ftp://x"}))).await;
    assert_eq!(s, 400, "{b}");
}

#[actix_rt::test]
async fn a_refusal_an_expiry_and_a_cancellation_by_either_side_each_end_it_for_good() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let fixed = || json!({"valorRec": "30.00"});

    let (refused, sid) = sent(&app, &token, fixed(), &in_hours(24)).await;
    let with_max = json!({"decision": "APPROVE", "valorMaximo": "50.00"});
    let (s, b) = post(&app, &format!("/sandbox/solicrec/{sid}/answer"), &token, with_max).await;
    assert_eq!(s, 400, "a fixed value takes no maximum: {b}");
    let (s, r) =
        post(&app, &format!("/sandbox/solicrec/{sid}/answer"), &token, json!({"decision": "REJECT"})).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("REJEITADA")), "{r}");
    assert_eq!(r["encerramento"]["rejeicao"]["codigo"], "AP13");
    let (s, b) = patch(&app, &format!("/rec/{refused}"), &token, json!({"status": "CANCELADA"})).await;
    assert_eq!(s, 409, "{b}");

    let (expiring, sid) = sent(&app, &token, fixed(), &in_hours(1)).await;
    app.advance(3600 - 60).await;
    // Access tokens live 1,800 s of the server's clock.
    let token = app.demo_token().await;
    let (_, r) = app.get_with(&format!("/rec/{expiring}"), &token).await;
    assert_eq!(r["status"], "CRIADA", "not before its time: {r}");
    app.advance(120).await;
    let token = app.demo_token().await;
    let (_, r) = app.get_with(&format!("/rec/{expiring}"), &token).await;
    assert_eq!(r["status"], "EXPIRADA", "{r}");
    assert_eq!(r["encerramento"]["rejeicao"]["codigo"], "AP14", "{r}");
    let (_, sol) = app.get_with(&format!("/solicrec/{sid}"), &token).await;
    assert_eq!(statuses(&sol).last().map(String::as_str), Some("EXPIRADA"));

    let (by_receiver, sid) = sent(&app, &token, fixed(), &in_hours(24)).await;
    let approve = json!({"decision": "APPROVE"});
    assert_eq!(post(&app, &format!("/sandbox/solicrec/{sid}/answer"), &token, approve.clone()).await.0, 200);
    let (s, r) = patch(&app, &format!("/rec/{by_receiver}"), &token, json!({"status": "CANCELADA"})).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("CANCELADA")), "{r}");
    let c = &r["encerramento"]["cancelamento"];
    assert_eq!((c["solicitante"].as_str(), c["codigo"].as_str()), (Some("USUARIO_RECEBEDOR"), Some("SLCR")));

    let (by_payer, sid) = sent(&app, &token, fixed(), &in_hours(24)).await;
    assert_eq!(post(&app, &format!("/sandbox/solicrec/{sid}/answer"), &token, approve).await.0, 200);
    let (s, r) = post(&app, &format!("/sandbox/rec/{by_payer}/cancel"), &token, json!({})).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("CANCELADA")), "{r}");
    assert_eq!(r["encerramento"]["cancelamento"]["codigo"], "SLDB");
    let (s, b) = post(&app, &format!("/sandbox/rec/{by_payer}/cancel"), &token, json!({})).await;
    assert_eq!(s, 409, "{b}");
    assert_extended(&b, 409, "CONFLICT");

    // The list, its filters and its counts.
    let window = format!(
        "inicio={}&fim={}",
        (chrono::Utc::now() - chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ"),
        (chrono::Utc::now() + chrono::Duration::days(2)).format("%Y-%m-%dT%H:%M:%SZ"),
    );
    let (s, all) = app.get_with(&format!("/rec?{window}"), &token).await;
    assert_eq!(s, 200, "{all}");
    let ids: Vec<&str> =
        all["recs"].as_array().unwrap().iter().map(|r| r["idRec"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [by_payer.as_str(), by_receiver.as_str(), expiring.as_str(), refused.as_str()],
        "newest first"
    );
    let (_, cancelled) =
        app.get_with(&format!("/rec?{window}&status=CANCELADA&paginacao.itensPorPagina=1"), &token).await;
    assert_eq!(cancelled["parametros"]["paginacao"]["quantidadeTotalDeItens"], 2, "{cancelled}");
    assert_eq!(cancelled["parametros"]["status"], "CANCELADA");
    assert_eq!(cancelled["recs"].as_array().unwrap().len(), 1);
    let (_, none) = app.get_with(&format!("/rec?{window}&cpf=11144477735"), &token).await;
    assert_eq!(none["recs"].as_array().unwrap().len(), 0, "another debtor's: {none}");
    let (s, b) = app.get_with(&format!("/rec?{window}&status=ATIVA"), &token).await;
    assert_eq!(s, 400, "{b}");
}

#[actix_rt::test]
async fn a_withdrawn_solicitation_leaves_the_recurrence_to_be_sent_again() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (id, first) = sent(&app, &token, json!({}), &in_hours(2)).await;
    let (s, sol) = patch(&app, &format!("/solicrec/{first}"), &token, json!({"status": "CANCELADA"})).await;
    assert_eq!((s, sol["status"].as_str()), (201, Some("CANCELADA")), "the API Pix answers 201: {sol}");
    assert_eq!(sol["recPayload"]["status"], "CRIADA");
    let (s, b) = patch(&app, &format!("/solicrec/{first}"), &token, json!({"status": "CANCELADA"})).await;
    assert_eq!(s, 409, "{b}");
    let (s, second) = post(&app, "/solicrec", &token, solic_body(&id, &in_hours(2))).await;
    assert_eq!(s, 201, "{second}");
    assert_ne!(second["idSolicRec"], first.as_str());
    // The first one's expiry is no longer a deadline: only the second's counts.
    app.advance(7300).await;
    let token = app.demo_token().await;
    let (_, r) = app.get_with(&format!("/rec/{id}"), &token).await;
    assert_eq!(r["status"], "EXPIRADA", "{r}");
    let (_, old) = app.get_with(&format!("/solicrec/{first}"), &token).await;
    assert_eq!(old["status"], "CANCELADA", "a withdrawn one stays withdrawn: {old}");
}

#[actix_rt::test]
async fn bad_input_is_named_by_its_field_and_another_accounts_recurrence_is_not_found() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let mut bad = rec_body(json!({"valorRec": "30.00", "valorMinimoRecebedor": "1.00"}));
    bad["calendario"]["dataInicial"] = json!("2020-01-01");
    bad["politicaRetentativa"] = json!("TALVEZ");
    let (s, b) = post(&app, "/rec", &token, bad).await;
    assert_eq!(s, 400, "{b}");
    assert_simple(&b, 400);
    let text = b["message"].as_str().unwrap();
    assert!(text.contains("valorMinimoRecebedor") && text.contains("politicaRetentativa"), "{text}");
    let mut past = rec_body(json!({}));
    past["calendario"]["dataInicial"] = json!("2020-01-01");
    let (s, b) = post(&app, "/rec", &token, past).await;
    assert_eq!(s, 400, "{b}");
    assert!(b["message"].as_str().unwrap().contains("dataInicial"), "{b}");

    let (id, _) = sent(&app, &token, json!({}), &in_hours(2)).await;
    let (s, b) = post(&app, "/solicrec", &token, solic_body(&id, &in_hours(24 * 31))).await;
    assert_eq!(s, 409, "the first one still awaits: {b}");
    let (other_id, _) = {
        let (s, r) = post(&app, "/rec", &token, rec_body(json!({}))).await;
        assert_eq!(s, 201);
        (r["idRec"].as_str().unwrap().to_owned(), ())
    };
    let (s, b) = post(&app, "/solicrec", &token, solic_body(&other_id, &in_hours(24 * 31))).await;
    assert_eq!(s, 400, "more than 30 days ahead: {b}");
    let (s, b) = post(&app, "/solicrec", &token, solic_body(&other_id, &in_hours(-1))).await;
    assert_eq!(s, 400, "in the past: {b}");
    let (s, b) = app.get_with("/rec/not-an-id", &token).await;
    assert_eq!(s, 400, "{b}");
    let (s, b) = patch(&app, &format!("/rec/{id}"), &token, json!({"status": "APROVADA"})).await;
    assert_eq!(s, 400, "{b}");

    let (account, client, secret, pem) = app.new_account_with("Other", true).await;
    let (_, t) = app.token_with(&pem, &client, &secret).await;
    let other = t["access_token"].as_str().unwrap().to_owned();
    assert!(account > 0);
    let (s, b) = app.get_with(&format!("/rec/{id}"), &other).await;
    assert_eq!(s, 404, "{b}");
    let (s, b) = patch(&app, &format!("/rec/{id}"), &other, json!({"status": "CANCELADA"})).await;
    assert_eq!(s, 404, "{b}");
    let (s, b) = post(&app, "/solicrec", &other, solic_body(&other_id, &in_hours(2))).await;
    assert_eq!(s, 404, "{b}");
    let (s, _) = app.get_with(&format!("/rec/{id}"), &token).await;
    assert_eq!(s, 200, "still the owner's");
}

#[actix_rt::test]
async fn a_solicitation_awaiting_an_answer_expires_after_a_kill_9() {
    let mut app = spawn_with(Options::default()).await;
    let token = app.demo_token().await;
    let (id, sid) = sent(&app, &token, json!({"valorRec": "12.00"}), &in_hours(1)).await;
    let mut child = app.take_child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    app.start_again(&Options::default());
    let token = app.demo_token().await;
    let (_, r) = app.get_with(&format!("/rec/{id}"), &token).await;
    assert_eq!(r["status"], "CRIADA", "{r}");
    // No request touches the account: the start resumed it, and its timer expires it.
    app.advance(3700).await;
    let token = app.demo_token().await;
    let (_, sol) = app.get_with(&format!("/solicrec/{sid}"), &token).await;
    assert_eq!(sol["status"], "EXPIRADA", "{sol}");
    assert_eq!(sol["recPayload"]["status"], "EXPIRADA");
}

#[actix_rt::test]
async fn journeys_two_and_three_authorise_by_a_location_s_qr_code_and_by_a_first_cob_s_payment() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;

    // Journey 2: a location, linked once, whose code pays nothing.
    let (s, loc) = post(&app, "/locrec", &token, json!({})).await;
    assert_eq!(s, 201, "{loc}");
    let mut body = rec_body(json!({}));
    body["loc"] = loc["id"].clone();
    let (s, r) = post(&app, "/rec", &token, body.clone()).await;
    assert_eq!(s, 201, "{r}");
    let two = r["idRec"].as_str().unwrap().to_owned();
    assert_eq!(r["loc"]["location"], loc["location"]);
    let code = r["dadosQR"]["pixCopiaECola"].as_str().unwrap().to_owned();
    assert!(
        code.contains(loc["location"].as_str().unwrap()) && r["dadosQR"]["jornada"] == "JORNADA_2",
        "{r}"
    );
    let (_, linked) = app.get_with(&format!("/locrec/{}", loc["id"]), &token).await;
    assert_eq!(linked["idRec"], two.as_str());
    let (s, b) = post(&app, "/rec", &token, body).await;
    assert_eq!(s, 400, "one location, one recurrence: {b}");
    let (s, b) = post(&app, "/rec", &token, {
        let mut b = rec_body(json!({}));
        b["loc"] = json!(999_999_999);
        b
    })
    .await;
    assert_eq!(s, 404, "{b}");
    let pay = json!({"value": 1, "qrCode": code, "externalId": "pay-a-rec-code"});
    let (s, b) = post(&app, "/api/pix/cash-out-qrcode", &token, pay).await;
    assert_eq!(s, 400, "nothing to pay with it: {b}");
    let (s, r) =
        post(&app, &format!("/sandbox/rec/{two}/approve"), &token, json!({"cpf": "11144477735"})).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        (r["status"].as_str(), r["ativacao"]["tipoJornada"].as_str()),
        (Some("APROVADA"), Some("JORNADA_2"))
    );
    assert_eq!(r["pagador"]["cpf"], "11144477735");
    assert!(r.get("dadosQR").is_none(), "no code once authorised: {r}");

    // Journey 3: a first cob, paid, then the authorisation with it.
    let txid = "firstcobofarecurrence00000001";
    let cob = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "30.00"}});
    let put = awc::Client::new().put(app.url(&format!("/cob/{txid}"))).bearer_auth(&token);
    assert_eq!(send(put, Some(cob)).await.0, 201);
    let mut body = rec_body(json!({"valorRec": "30.00"}));
    body["ativacao"] = json!({"dadosJornada": {"txid": txid}});
    let (s, r) = post(&app, "/rec", &token, body).await;
    assert_eq!(s, 201, "{r}");
    let three = r["idRec"].as_str().unwrap().to_owned();
    assert_eq!(r["ativacao"]["dadosJornada"]["txid"], txid);
    let (s, b) = post(&app, &format!("/sandbox/rec/{three}/approve"), &token, json!({})).await;
    assert_eq!(s, 409, "not before the first cob is paid: {b}");
    let (s, paid) = post(&app, "/sandbox/pay", &token, json!({"txid": txid})).await;
    assert_eq!(s, 200, "{paid}");
    let (s, r) = post(&app, &format!("/sandbox/rec/{three}/approve"), &token, json!({})).await;
    assert_eq!((s, r["ativacao"]["tipoJornada"].as_str()), (200, Some("JORNADA_3")), "{r}");
    assert_eq!(r["pagador"]["cpf"], "52998224725", "the contract's debtor by default");
    let mut bad = rec_body(json!({}));
    bad["ativacao"] = json!({"dadosJornada": {"txid": "nosuchcob00000000000000000001"}});
    let (s, b) = post(&app, "/rec", &token, bad).await;
    assert_eq!(s, 400, "{b}");

    // Journey 1's recurrence has no QR journey.
    let (one, _) = sent(&app, &token, json!({}), &in_hours(2)).await;
    let (s, b) = post(&app, &format!("/sandbox/rec/{one}/approve"), &token, json!({})).await;
    assert_eq!(s, 409, "{b}");
}

#[actix_rt::test]
async fn the_locations_are_listed_in_their_window_newest_first_and_by_whether_they_are_linked() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (_, first) = post(&app, "/locrec", &token, json!({})).await;
    let (_, second) = post(&app, "/locrec", &token, json!({})).await;
    let mut body = rec_body(json!({}));
    body["loc"] = first["id"].clone();
    let (s, r) = post(&app, "/rec", &token, body).await;
    assert_eq!(s, 201, "{r}");
    let window = format!(
        "inicio={}&fim={}",
        (chrono::Utc::now() - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%SZ"),
        (chrono::Utc::now() + chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%SZ")
    );
    let ids =
        |v: &Value| -> Vec<Value> { v["loc"].as_array().unwrap().iter().map(|l| l["id"].clone()).collect() };
    let (s, all) = app.get_with(&format!("/locrec?{window}"), &token).await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(ids(&all), [second["id"].clone(), first["id"].clone()], "newest first: {all}");
    assert_eq!(all["parametros"]["paginacao"]["quantidadeTotalDeItens"], 2);
    let (_, linked) = app.get_with(&format!("/locrec?{window}&idRecPresente=true"), &token).await;
    assert_eq!(ids(&linked), [first["id"].clone()]);
    assert_eq!(linked["loc"][0]["idRec"], r["idRec"]);
    let (_, free) = app.get_with(&format!("/locrec?{window}&idRecPresente=false"), &token).await;
    assert_eq!(ids(&free), [second["id"].clone()]);
    let (s, b) = app.get_with(&format!("/locrec?{window}&idRecPresente=yes"), &token).await;
    assert_eq!(s, 400, "{b}");
    let (s, b) = app.get_with("/locrec", &token).await;
    assert_eq!(s, 400, "the window is required: {b}");
    // Another account has none of them.
    let (_, client_id, secret, pem) = app.new_account_with("Other", true).await;
    let (_, t) = app.token_with(&pem, &client_id, &secret).await;
    let (s, theirs) = app.get_with(&format!("/locrec?{window}"), t["access_token"].as_str().unwrap()).await;
    assert_eq!((s, ids(&theirs).len()), (200, 0), "{theirs}");
}

/// `PATCH /rec/{idRec}` revises what the API Pix's `RecRevisada` names: the debtor's name at
/// any time before the end, the first date and the location only before the payer is asked;
/// `status` goes alone. `recebedor.convenio` is kept and filtered on, as is
/// `locationPresente`.
#[actix_rt::test]
async fn a_recurrence_is_revised_before_authorisation_and_listed_by_agreement_and_location() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let mut body = rec_body(json!({"valorRec": "30.00"}));
    body["recebedor"] = json!({"convenio": "Master"});
    let (s, r) = post(&app, "/rec", &token, body).await;
    assert_eq!((s, r["recebedor"]["convenio"].as_str()), (201, Some("Master")), "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, loc) = post(&app, "/locrec", &token, json!({})).await;
    assert_eq!(s, 201, "{loc}");
    let later = (crate::cobr::today() + chrono::Duration::days(9)).to_string();
    let revision = json!({"vinculo": {"devedor": {"nome": "Fulano de Tal"}}, "calendario": {"dataInicial": later},
        "loc": loc["id"]});
    let (s, r) = patch(&app, &format!("/rec/{id}"), &token, revision).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        (
            r["vinculo"]["devedor"]["nome"].as_str(),
            r["calendario"]["dataInicial"].as_str(),
            r["status"].as_str()
        ),
        (Some("Fulano de Tal"), Some(later.as_str()), Some("CRIADA"))
    );
    assert_eq!(
        (r["loc"]["id"].clone(), r["loc"]["idRec"].as_str()),
        (loc["id"].clone(), Some(id.as_str())),
        "{r}"
    );
    let (_, l) = app.get_with(&format!("/locrec/{}", loc["id"]), &token).await;
    assert_eq!(l["idRec"], id.as_str(), "the location names it: {l}");
    // Unlinked: neither names the other any more, and the status stays.
    let unlink =
        awc::Client::new().delete(app.url(&format!("/locrec/{}/idRec", loc["id"]))).bearer_auth(&token);
    let (s, l) = send(unlink, None).await;
    assert_eq!((s, l.get("idRec")), (200, None), "{l}");
    let (_, r) = app.get_with(&format!("/rec/{id}"), &token).await;
    assert_eq!((r.get("loc"), r.get("dadosQR"), r["status"].as_str()), (None, None, Some("CRIADA")), "{r}");
    let missing = awc::Client::new().delete(app.url("/locrec/999999/idRec")).bearer_auth(&token);
    assert_eq!(send(missing, None).await.0, 404);
    // Linked again by a revision.
    let (s, r) = patch(&app, &format!("/rec/{id}"), &token, json!({"loc": loc["id"]})).await;
    assert_eq!((s, r["loc"]["idRec"].as_str()), (200, Some(id.as_str())), "{r}");
    // Journey 3's composite code: a cob's code that pays it, with the recurrence's location.
    let cob_txid = "compositecob00000000000000000001";
    let cob = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "30.00"}});
    let (s, c) =
        send(awc::Client::new().put(app.url(&format!("/cob/{cob_txid}"))).bearer_auth(&token), Some(cob))
            .await;
    assert_eq!(s, 201, "{c}");
    let (s, r) = app.get_with(&format!("/rec/{id}?txid={cob_txid}"), &token).await;
    assert_eq!((s, r["dadosQR"]["jornada"].as_str()), (200, Some("JORNADA_3")), "{r}");
    let code = r["dadosQR"]["pixCopiaECola"].as_str().unwrap();
    let (paid, of_cob) = (
        pixgw::domain::brcode::parse(code).unwrap(),
        pixgw::domain::brcode::parse(c["location"].as_str().unwrap()).unwrap(),
    );
    assert_eq!(
        (paid.key, paid.amount, paid.txid),
        (of_cob.key, of_cob.amount, of_cob.txid),
        "it pays the cob"
    );
    assert!(code.contains(loc["location"].as_str().unwrap()), "and carries the location: {code}");
    for bad in ["txid=nocobhasthistxid000000000001", "other=1"] {
        let (s, b) = app.get_with(&format!("/rec/{id}?{bad}"), &token).await;
        assert_eq!(s, 400, "{bad}: {b}");
    }

    // Refused: nothing, a status with a revision, a date in the past; nothing changed.
    for (bad, field) in [
        (json!({}), "status"),
        (json!({"status": "CANCELADA", "loc": loc["id"]}), "status"),
        (json!({"calendario": {"dataInicial": "2020-01-01"}}), "calendario.dataInicial"),
        (json!({"vinculo": {"devedor": {"nome": ""}}}), "vinculo.devedor.nome"),
    ] {
        let (s, b) = patch(&app, &format!("/rec/{id}"), &token, bad.clone()).await;
        assert_eq!(s, 400, "{bad}: {b}");
        assert!(b["message"].as_str().unwrap_or("").contains(field), "{bad}: {b}");
    }
    let (_, same) = app.get_with(&format!("/rec/{id}"), &token).await;
    assert_eq!(same["calendario"]["dataInicial"], later.as_str());

    // Sent for authorisation: the terms stay as the payer is asked them.
    let (s, sol) = post(&app, "/solicrec", &token, solic_body(&id, &in_hours(24))).await;
    assert_eq!(s, 201, "{sol}");
    let (s, b) =
        patch(&app, &format!("/rec/{id}"), &token, json!({"calendario": {"dataInicial": later}})).await;
    assert_eq!(s, 409, "{b}");
    let (s, r) =
        patch(&app, &format!("/rec/{id}"), &token, json!({"vinculo": {"devedor": {"nome": "Beltrano"}}}))
            .await;
    assert_eq!((s, r["vinculo"]["devedor"]["nome"].as_str()), (200, Some("Beltrano")), "{r}");

    // Listed by agreement and by whether it has a location.
    let (s, other) = post(&app, "/rec", &token, rec_body(json!({}))).await;
    assert_eq!(s, 201, "{other}");
    let window = format!(
        "inicio={}&fim={}",
        (chrono::Utc::now() - chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ"),
        (chrono::Utc::now() + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ")
    );
    let ids = |l: &Value| -> Vec<String> {
        l["recs"].as_array().unwrap().iter().map(|r| r["idRec"].as_str().unwrap().to_owned()).collect()
    };
    for (query, expected) in [
        ("convenio=Master", vec![id.clone()]),
        ("convenio=Other", vec![]),
        ("locationPresente=true", vec![id.clone()]),
        ("locationPresente=false", vec![other["idRec"].as_str().unwrap().to_owned()]),
    ] {
        let (s, l) = app.get_with(&format!("/rec?{window}&{query}"), &token).await;
        assert_eq!((s, ids(&l)), (200, expected), "{query}: {l}");
    }
    let (_, l) = app.get_with(&format!("/rec?{window}&convenio=Master"), &token).await;
    assert_eq!(l["parametros"]["recebedor"]["convenio"], "Master", "{l}");
    let (s, b) = app.get_with(&format!("/rec?{window}&locationPresente=maybe"), &token).await;
    assert_eq!(s, 400, "{b}");
}

/// Journey 4: a recurrence whose first charge is a cobv is authorised by that cobv's
/// payment, and its composite code is journey 4's.
#[actix_rt::test]
async fn journey_four_authorises_by_a_first_cobvs_payment() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let txid = "firstcobvofarecurrence0000001";
    let due = (crate::cobr::today() + chrono::Duration::days(5)).to_string();
    let cobv = json!({"calendario": {"dataDeVencimento": due}, "valor": {"original": "30.00"},
        "devedor": {"cpf": "11144477735", "nome": "Ana"}});
    let put = awc::Client::new().put(app.url(&format!("/cobv/{txid}"))).bearer_auth(&token);
    let (s, c) = send(put, Some(cobv)).await;
    assert_eq!(s, 201, "{c}");
    let mut body = rec_body(json!({"valorRec": "30.00"}));
    body["ativacao"] = json!({"dadosJornada": {"txid": txid}});
    let (s, r) = post(&app, "/rec", &token, body).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, b) = post(&app, &format!("/sandbox/rec/{id}/approve"), &token, json!({})).await;
    assert_eq!(s, 409, "not before the first cobv is paid: {b}");
    let pay = json!({"txid": txid, "amount": 30});
    let (s, paid) = post(&app, "/sandbox/pay", &token, pay).await;
    assert_eq!(s, 200, "{paid}");
    let (s, r) = post(&app, &format!("/sandbox/rec/{id}/approve"), &token, json!({})).await;
    assert_eq!((s, r["ativacao"]["tipoJornada"].as_str()), (200, Some("JORNADA_4")), "{r}");
}
