//! Payload locations (`--payload-host`): a cob's and a cobv's dynamic code leads any bank's
//! app to a JWS that verifies against the published keys and says what the charge asks
//! (a cobv priced on the day the payer means to pay); a location that names no charge is
//! 404, one whose charge ended 410, and a server without the host serves none.

use base64::Engine;
use chrono::{Duration, NaiveDate};
use pixgw::rail::spi::pki::{Authority, Usage};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::helpers::{send, spawn_with, Options, TestApp};

const HOST: &str = "pix.example.com";

fn b64url(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).unwrap()
}

/// A certificate for the locations' host, with the CA after it, and its key.
fn payload_pki(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<u8>) {
    let now = time::OffsetDateTime::now_utc();
    let ca =
        Authority::new("Payload Test CA", now - time::Duration::days(1), now + time::Duration::days(365))
            .unwrap();
    let leaf = ca.issue(HOST, &[HOST], 7, Usage::Server).unwrap();
    let (cert, key) = (dir.join("payload.pem"), dir.join("payload.key"));
    std::fs::write(&cert, format!("{}{}", leaf.cert_pem, ca.cert_pem)).unwrap();
    std::fs::write(&key, &leaf.key_pem).unwrap();
    // A private key pixgw reads must be its owner's alone.
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let der = x509_parser::pem::parse_x509_pem(leaf.cert_pem.as_bytes()).unwrap().1.contents;
    (cert, key, der)
}

/// A server that serves locations on [`HOST`], signed with a certificate made in `dir`;
/// and that certificate (DER).
async fn serving_locations(dir: &std::path::Path) -> (TestApp, Vec<u8>) {
    let (cert, key, leaf_der) = payload_pki(dir);
    let env = vec![
        ("PIXGW_PAYLOAD_HOST".to_owned(), HOST.to_owned()),
        ("PIXGW_PAYLOAD_CERT".to_owned(), cert.display().to_string()),
        ("PIXGW_PAYLOAD_KEY".to_owned(), key.display().to_string()),
    ];
    (spawn_with(Options { env, ..Options::default() }).await, leaf_der)
}

/// GET of a location (given as the code carries it, host first) on the test server.
async fn read_location(app: &TestApp, location: &str, query: &str) -> (u16, String, String) {
    let path = location.strip_prefix(HOST).expect("the location is on the configured host");
    let mut res = app.client.get(app.url(&format!("{path}{query}"))).send().await.unwrap();
    let content_type =
        res.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let body = res.body().await.unwrap();
    (res.status().as_u16(), content_type, String::from_utf8(body.to_vec()).unwrap())
}

/// The payload of a JWS, after checking its header and its signature against the JWK Set.
fn verified(jws: &str, jwks: &Value, leaf_der: &[u8]) -> Value {
    let parts: Vec<&str> = jws.split('.').collect();
    assert_eq!(parts.len(), 3, "a compact JWS: {jws}");
    let header: Value = serde_json::from_slice(&b64url(parts[0])).unwrap();
    let key = &jwks["keys"][0];
    assert_eq!(header["alg"], "RS256");
    assert_eq!(header["jku"], format!("https://{HOST}/qr/jwks"), "the keys on the locations' own host");
    assert_eq!(header["kid"], key["kid"]);
    assert_eq!(header["x5t"], key["x5t"]);
    let s256 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(leaf_der));
    assert_eq!((&header["x5t#S256"], &key["x5t#S256"]), (&json!(s256), &json!(s256)));
    let public = ring::signature::RsaPublicKeyComponents {
        n: b64url(key["n"].as_str().unwrap()),
        e: b64url(key["e"].as_str().unwrap()),
    };
    let signed = format!("{}.{}", parts[0], parts[1]);
    public
        .verify(&ring::signature::RSA_PKCS1_2048_8192_SHA256, signed.as_bytes(), &b64url(parts[2]))
        .expect("the signature verifies with the published key");
    // A payload changed after signing does not.
    let forged = format!("{}.{}", parts[0], base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b"{}"));
    assert!(public
        .verify(&ring::signature::RSA_PKCS1_2048_8192_SHA256, forged.as_bytes(), &b64url(parts[2]))
        .is_err());
    serde_json::from_slice(&b64url(parts[1])).unwrap()
}

fn location_of(view: &Value) -> String {
    let code = view["pixCopiaECola"].as_str().unwrap_or_else(|| panic!("a dynamic code: {view}"));
    let read = pixgw::domain::brcode::parse(code).unwrap();
    assert_eq!(read.point_of_initiation.as_deref(), Some("12"), "single use");
    assert_eq!((read.key, read.amount), (None, None), "the payload says what to pay");
    let url = read.url.unwrap();
    assert!(url.len() <= 77, "{url}");
    url
}

#[actix_rt::test]
async fn a_cob_and_a_cobv_are_read_from_their_locations_as_signed_payloads() {
    let keys = tempfile::tempdir().unwrap();
    let (app, leaf_der) = serving_locations(keys.path()).await;
    let token = app.demo_token().await;
    let (s, jwks) = send(app.client.get(app.url("/qr/jwks")), None).await;
    assert_eq!(s, 200, "{jwks}");
    let key = &jwks["keys"][0];
    assert_eq!((&key["kty"], &key["use"], &key["alg"]), (&json!("RSA"), &json!("sig"), &json!("RS256")));
    let x5c: Vec<&str> = key["x5c"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(x5c.len(), 2, "the leaf and its CA");
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(x5c[0]).unwrap(), leaf_der, "leaf first");

    // A cob: its static code stays in `location`, its dynamic code leads to its payload.
    let txid = "payloadcob0000000000000000000001";
    let body = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "7.50"}, "solicitacaoPagador": "mesa 4"});
    let (s, cob) =
        send(app.client.put(app.url(&format!("/cob/{txid}"))).bearer_auth(&token), Some(body)).await;
    assert_eq!(s, 201, "{cob}");
    assert!(pixgw::domain::brcode::parse(cob["location"].as_str().unwrap()).unwrap().key.is_some());
    let location = location_of(&cob);
    assert!(location.starts_with(&format!("{HOST}/qr/")), "{location}");
    let (s, content_type, jws) = read_location(&app, &location, "").await;
    assert_eq!((s, content_type.as_str()), (200, "application/jose"), "{jws}");
    let payload = verified(&jws, &jwks, &leaf_der);
    assert_eq!(payload["txid"], txid);
    assert_eq!(payload["status"], "ATIVA");
    assert_eq!(payload["valor"]["original"], "7.50");
    assert_eq!(payload["solicitacaoPagador"], "mesa 4");
    assert_eq!(payload["calendario"]["expiracao"], 3600);
    assert!(payload["calendario"]["apresentacao"].is_string() && payload["chave"].is_string(), "{payload}");
    assert!(payload.get("location").is_none() && payload.get("loc").is_none(), "{payload}");
    // The same location on every read of the cob.
    let (_, again) = app.get_with(&format!("/cob/{txid}"), &token).await;
    assert_eq!(location_of(&again), location);

    // A token changed by one character, or a cob's token on the cobv route, opens nothing.
    let (prefix, tok) = location.rsplit_once('/').unwrap();
    let mut chars: Vec<char> = tok.chars().collect();
    chars[3] = if chars[3] == 'A' { 'B' } else { 'A' };
    let altered: String = chars.into_iter().collect();
    assert_eq!(read_location(&app, &format!("{prefix}/{altered}"), "").await.0, 404);
    assert_eq!(read_location(&app, &format!("{prefix}/cobv/{tok}"), "").await.0, 404);
    assert_eq!(read_location(&app, &format!("{prefix}/not-a-token"), "").await.0, 404);

    // A cobv: priced on the day the payer means to pay.
    let (_, probe) = {
        let txid = "payloadcobv000000000000000000002";
        let due = chrono::Utc::now().date_naive() + Duration::days(20);
        let body = json!({
            "calendario": {"dataDeVencimento": due.format("%Y-%m-%d").to_string(), "validadeAposVencimento": 30},
            "devedor": {"cpf": "52998224725", "nome": "Ana Devedora"},
            "valor": {"original": "100.00", "multa": {"modalidade": 2, "valorPerc": "2.00"}},
        });
        send(app.client.put(app.url(&format!("/cobv/{txid}"))).bearer_auth(&token), Some(body)).await
    };
    assert!(probe["txid"].is_string(), "{probe}");
    let today = NaiveDate::parse_from_str(probe["valorDoDia"]["data"].as_str().unwrap(), "%Y-%m-%d").unwrap();
    let due =
        NaiveDate::parse_from_str(probe["calendario"]["dataDeVencimento"].as_str().unwrap(), "%Y-%m-%d")
            .unwrap();
    let location = location_of(&probe);
    assert!(location.starts_with(&format!("{HOST}/qr/cobv/")), "{location}");
    let (s, _, jws) = read_location(&app, &location, "").await;
    assert_eq!(s, 200, "{jws}");
    let on_time = verified(&jws, &jwks, &leaf_der);
    assert_eq!(on_time["valor"]["final"], "100.00", "today, before the due date");
    assert_eq!(on_time["calendario"]["dataDeVencimento"], due.format("%Y-%m-%d").to_string());
    assert_eq!(on_time["calendario"]["validadeAposVencimento"], 30);
    assert_eq!(on_time["recebedor"]["nome"], "Demo");
    assert_eq!(on_time["devedor"]["nome"], "Ana Devedora");
    let late = (due + Duration::days(8)).format("%Y-%m-%d").to_string();
    let (s, _, jws) = read_location(&app, &location, &format!("?DPP={late}&codMun=3550308")).await;
    assert_eq!(s, 200, "{jws}");
    let later = verified(&jws, &jwks, &leaf_der);
    assert_eq!(
        (&later["valor"]["multa"], &later["valor"]["final"]),
        (&json!("2.00"), &json!("102.00")),
        "{later}"
    );
    for bad in [
        format!("?DPP={}", (today - Duration::days(1)).format("%Y-%m-%d")),
        format!("?DPP={}", (due + Duration::days(60)).format("%Y-%m-%d")),
        "?DPP=tomorrow".to_owned(),
        "?codMun=355".to_owned(),
    ] {
        let (s, _, b) = read_location(&app, &location, &bad).await;
        assert_eq!(s, 400, "{bad}: {b}");
    }

    // Once the cob is removed its location is gone for good.
    let (s, _) = send(
        app.client.patch(app.url(&format!("/cob/{txid}"))).bearer_auth(&token),
        Some(json!({"status": "REMOVIDA_PELO_USUARIO_RECEBEDOR"})),
    )
    .await;
    assert_eq!(s, 200);
    let cob_location = location_of(&again);
    assert_eq!(read_location(&app, &cob_location, "").await.0, 410);
}

#[actix_rt::test]
async fn a_server_without_a_payload_host_serves_no_location_and_no_dynamic_code() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    let (s, _) = send(app.client.get(app.url("/qr/jwks")), None).await;
    assert_eq!(s, 404);
    let body = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "1.00"}});
    let (s, cob) = send(app.client.post(app.url("/cob")).bearer_auth(&token), Some(body)).await;
    assert_eq!(s, 201, "{cob}");
    assert!(cob.get("pixCopiaECola").is_none(), "{cob}");
}

/// Journey 2 on a server that serves locations: a recurrence's location is on the host
/// (`/qr/rec/{token}`), its BR Code carries it, and the location answers the signed
/// `RecPayload` while the recurrence awaits the payer; once authorised it is 410, and a
/// forged token is 404.
#[actix_rt::test]
async fn a_recurrences_location_answers_its_signed_payload_until_it_is_authorised() {
    let keys = tempfile::tempdir().unwrap();
    let (app, leaf_der) = serving_locations(keys.path()).await;
    let token = app.demo_token().await;
    let (_, jwks) = send(app.client.get(app.url("/qr/jwks")), None).await;
    let (s, loc) = crate::rec::post(&app, "/locrec", &token, json!({})).await;
    assert_eq!(s, 201, "{loc}");
    let location = loc["location"].as_str().unwrap().to_owned();
    assert!(location.starts_with(&format!("{HOST}/qr/rec/")) && location.len() <= 77, "{location}");
    let (s, _, _) = read_location(&app, &location, "").await;
    assert_eq!(s, 404, "a location no recurrence is linked to serves nothing yet");

    let mut body = crate::rec::rec_body(json!({"valorRec": "30.00"}));
    body["loc"] = loc["id"].clone();
    let (s, rec) = crate::rec::post(&app, "/rec", &token, body).await;
    assert_eq!(s, 201, "{rec}");
    let id = rec["idRec"].as_str().unwrap().to_owned();
    let code = rec["dadosQR"]["pixCopiaECola"].as_str().unwrap();
    assert!(code.contains(location.as_str()), "journey 2's code carries the location: {code}");

    let (s, content_type, jws) = read_location(&app, &location, "").await;
    assert_eq!((s, content_type.as_str()), (200, "application/jose"), "{jws}");
    let payload = verified(&jws, &jwks, &leaf_der);
    assert_eq!(payload["idRec"], id.as_str(), "{payload}");
    assert_eq!(payload["valor"]["valorRec"], "30.00");
    assert_eq!(payload["recebedor"]["ispbParticipante"], "99999999");
    assert!(payload.get("loc").is_none() && payload.get("dadosQR").is_none(), "{payload}");

    // A forged token names nothing.
    let mut forged = location.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    assert_eq!(read_location(&app, &forged, "").await.0, 404);

    // Authorised by its code: the location no longer asks anything.
    let (s, r) =
        crate::rec::post(&app, &format!("/sandbox/rec/{id}/approve"), &token, json!({"cpf": "11144477735"}))
            .await;
    assert_eq!((s, r["status"].as_str()), (200, Some("APROVADA")), "{r}");
    assert_eq!(read_location(&app, &location, "").await.0, 410);
}
