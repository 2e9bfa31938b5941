//! Pix Automático against the API Pix itself (release 2.9.0, `tests/data/pix-api/`): the
//! specification's request examples are sent as written, but for what must change to be
//! true today (dates, the idRec they name, CPFs whose check digits the examples get wrong),
//! and every answer is checked against the schema the specification gives it.

use std::sync::OnceLock;

use chrono::Duration;
use serde_json::{json, Value};

use crate::cobr::today;
use crate::helpers::{send, TestApp};
use crate::rec::{in_hours, patch, post, rec_body, solic_body};

/// The specification, with its slash-wrapped patterns read as the expressions they mean.
fn spec() -> &'static Value {
    static SPEC: OnceLock<Value> = OnceLock::new();
    SPEC.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/pix-api/openapi-2.9.0.json");
        let text = std::fs::read_to_string(path).expect("the API Pix specification is in tests/data");
        let text =
            text.replace(r#""/^\\d{11}$/""#, r#""^\\d{11}$""#).replace(r#""/^\\d{7}$/""#, r#""^\\d{7}$""#);
        let mut doc: Value = serde_json::from_str(&text).expect("the specification is JSON");
        // Members its `required` lists name that the specification defines nowhere (or at
        // another level): no answer could have them (tests/data/pix-api/README.md).
        let schemas = &mut doc["components"]["schemas"];
        for (schema, member) in [
            ("RecBase", "retentativa"),
            ("DadosPagadorRec", "ispbParticipante"),
            ("SolicRecCompleta", "rec"),
            ("SolicRecBase", "pagador"),
            ("PayloadLocationRecGerada", "tipo"),
        ] {
            let required = schemas[schema]["required"].as_array_mut().expect("a required list");
            let before = required.len();
            required.retain(|m| m != member);
            assert_eq!(required.len() + 1, before, "{schema} no longer requires {member}: drop this fix");
        }
        doc
    })
}

/// A request example of the specification, by name.
fn example(name: &str) -> Value {
    spec()["components"]["examples"][name]["value"].clone()
}

/// Checks `body` against the schema the specification gives `method path` answering `status`.
fn conforms(method: &str, path: &str, status: u16, body: &Value) {
    let op = &spec()["paths"][path][method];
    let schema = &op["responses"][status.to_string()]["content"]["application/json"]["schema"];
    assert!(schema.is_object(), "the specification gives {method} {path} no {status} answer");
    let mut root = schema.clone();
    root["components"] = spec()["components"].clone();
    let v = jsonschema::validator_for(&root).expect("the specification's schema compiles");
    let errors: Vec<String> = v.iter_errors(body).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{method} {path} {status} does not conform: {errors:#?}\n{body:#}");
}

/// A valid CPF in place of the examples' (whose check digits are wrong).
const CPF: &str = "52998224725";

#[actix_rt::test]
async fn the_specifications_recurrence_and_solicitation_examples_are_accepted_and_answered_to_its_schemas() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;

    let mut rec = example("recBody2");
    rec["vinculo"]["devedor"]["cpf"] = json!(CPF);
    rec["calendario"]["dataInicial"] = json!((today() + Duration::days(1)).to_string());
    let (s, r) = post(&app, "/rec", &token, rec).await;
    assert_eq!(s, 201, "{r}");
    conforms("post", "/rec", 201, &r);
    let id = r["idRec"].as_str().unwrap().to_owned();

    let mut sol = example("solicRecBody1");
    sol["idRec"] = json!(id);
    sol["calendario"]["dataExpiracaoSolicitacao"] = json!(in_hours(24));
    sol["destinatario"]["cpf"] = json!(CPF);
    let (s, b) = post(&app, "/solicrec", &token, sol).await;
    assert_eq!(s, 201, "{b}");
    conforms("post", "/solicrec", 201, &b);
    let sid = b["idSolicRec"].as_str().unwrap().to_owned();
    let (s, b) = app.get_with(&format!("/solicrec/{sid}"), &token).await;
    assert_eq!(s, 200, "{b}");
    conforms("get", "/solicrec/{idSolicRec}", 200, &b);
    let (s, b) = patch(&app, &format!("/solicrec/{sid}"), &token, example("solicRecBody2")).await;
    assert_eq!(s, 201, "{b}");
    conforms("patch", "/solicrec/{idSolicRec}", 201, &b);

    let (s, b) = app.get_with(&format!("/rec/{id}"), &token).await;
    assert_eq!(s, 200, "{b}");
    conforms("get", "/rec/{idRec}", 200, &b);
}

#[actix_rt::test]
async fn the_specifications_recurring_charge_example_is_accepted_and_answered_to_its_schemas() {
    let app = TestApp::spawn_fast().await;
    let token = app.demo_token().await;
    // A recurrence of the example's value, approved by the sandbox's payer.
    let (s, r) = post(&app, "/rec", &token, rec_body(json!({"valorRec": "106.07"}))).await;
    assert_eq!(s, 201, "{r}");
    let id = r["idRec"].as_str().unwrap().to_owned();
    let (s, sol) = post(&app, "/solicrec", &token, solic_body(&id, &in_hours(24))).await;
    assert_eq!(s, 201, "{sol}");
    let path = format!("/sandbox/solicrec/{}/answer", sol["idSolicRec"].as_str().unwrap());
    let approve = json!({"decision": "APPROVE", "codMun": "3550308"});
    assert_eq!(post(&app, &path, &token, approve).await.0, 200);
    let (s, r) = app.get_with(&format!("/rec/{id}"), &token).await;
    assert_eq!((s, r["pagador"]["codMun"].as_str()), (200, Some("3550308")), "{r}");
    conforms("get", "/rec/{idRec}", 200, &r);

    // cobRBody1 as written (recebedor, devedor and all), but for its recurrence and date.
    let mut body = example("cobRBody1");
    body["idRec"] = json!(id);
    body["calendario"]["dataDeVencimento"] = json!((today() + Duration::days(5)).to_string());
    let txid = "specexample0000000000000000001";
    let req = app.client.put(app.url(&format!("/cobr/{txid}"))).bearer_auth(&token);
    let (s, c) = crate::helpers::send(req, Some(body.clone())).await;
    assert_eq!(s, 201, "{c}");
    conforms("put", "/cobr/{txid}", 201, &c);
    let named = |r: &Value| (r["conta"].clone(), r["tipoConta"].clone(), r["agencia"].clone());
    assert_eq!(named(&c["recebedor"]), named(&body["recebedor"]), "as the receiver named it: {c}");
    assert_eq!(
        (c["recebedor"]["cnpj"].as_str(), c["recebedor"]["nome"].as_str()),
        (Some("11222333000181"), Some("Demo"))
    );
    assert_eq!(
        (c["devedor"]["cep"].as_str(), &c["devedor"]["cidade"]),
        (Some("89256140"), &body["devedor"]["cidade"])
    );
    let (s, c) = app.get_with(&format!("/cobr/{txid}"), &token).await;
    assert_eq!(s, 200, "{c}");
    conforms("get", "/cobr/{txid}", 200, &c);

    let window = format!(
        "inicio={}&fim={}",
        (chrono::Utc::now() - Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ"),
        (chrono::Utc::now() + Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ")
    );
    let (s, list) = app.get_with(&format!("/cobr?{window}"), &token).await;
    assert_eq!((s, list["cobsr"].as_array().map(Vec::len)), (200, Some(1)), "{list}");
    conforms("get", "/cobr", 200, &list);

    let (s, c) = patch(&app, &format!("/cobr/{txid}"), &token, example("cobRBody2")).await;
    assert_eq!((s, c["status"].as_str()), (200, Some("CANCELADA")), "{c}");
    conforms("patch", "/cobr/{txid}", 200, &c);

    // A cancelled charge frees its cycle (the specification refuses a second charge only
    // while the cycle has one that is not REJEITADA or CANCELADA); without ajusteDiaUtil,
    // the specification's default (true) applies.
    body.as_object_mut().unwrap().remove("ajusteDiaUtil");
    body["calendario"]["dataDeVencimento"] = json!((today() + Duration::days(6)).to_string());
    let (s, c) = post(&app, "/cobr", &token, body).await;
    assert_eq!((s, c["ajusteDiaUtil"].as_bool()), (201, Some(true)), "{c}");
    conforms("post", "/cobr", 201, &c);
}

/// Every operation the specification secures requires the scope it names there, and no
/// other; a token asked for with `scope` carries those alone (403 naming the one a route
/// lacks), one asked for without carries them all, and a scope the API Pix does not have is
/// refused when the token is asked for.
#[actix_rt::test]
async fn each_route_of_the_api_pix_requires_the_scope_the_specification_gives_it() {
    let mut secured = 0;
    for (path, ops) in spec()["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let named: Vec<&str> = op["security"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|s| s.as_object().unwrap().values())
                .flat_map(|v| v.as_array().unwrap().iter().map(|s| s.as_str().unwrap()))
                .collect();
            if let [scope] = named.as_slice() {
                secured += 1;
                assert_eq!(pixgw::domain::scope::required(method, path), Some(*scope), "{method} {path}");
            }
        }
    }
    assert_eq!(secured, 48, "every secured operation of release 2.9.0");

    let app = TestApp::spawn_fast().await;
    let creds = &app.creds;
    let ask = |scope: Value| {
        let req = app
            .client
            .post(app.url("/api/auth/token"))
            .insert_header(("X-SSL-Client-Cert", pixgw::auth::certs::url_encode_pem(&creds.cert_pem)));
        send(
            req,
            Some(json!({"clientId": creds.client_id, "clientSecret": creds.client_secret, "scope": scope})),
        )
    };
    let (s, b) = ask(json!("cob.read cob.delete")).await;
    assert_eq!(s, 400, "{b}");
    assert!(b.to_string().contains("cob.delete"), "{b}");
    let (s, t) = ask(json!("cob.read rec.read")).await;
    assert_eq!((s, t["scope"].as_str()), (201, Some("cob.read rec.read")), "{t}");
    let token = t["access_token"].as_str().unwrap();
    let window = "inicio=2026-01-01T00:00:00Z&fim=2026-01-31T00:00:00Z";
    assert_eq!(app.get_with(&format!("/cob?{window}"), token).await.0, 200);
    assert_eq!(app.get_with(&format!("/rec?{window}"), token).await.0, 200);
    let (s, b) = app.get_with(&format!("/cobr?{window}"), token).await;
    assert_eq!(s, 403, "{b}");
    assert!(b["message"].to_string().contains("cobr.read"), "{b}");
    let put = app.client.put(app.url("/cob/scopedtxid000000000000000001")).bearer_auth(token);
    let cob = json!({"calendario": {"expiracao": 3600}, "valor": {"original": "1.00"}});
    let (s, b) = send(put, Some(cob.clone())).await;
    assert_eq!(s, 403, "a read scope writes nothing: {b}");
    assert_eq!(app.get_with("/cob/scopedtxid000000000000000001", token).await.0, 404, "nothing made");
    assert_eq!(app.get_with("/api/balance", token).await.0, 200, "family A takes no scope");
    let all = app.demo_token().await;
    let put = app.client.put(app.url("/cob/scopedtxid000000000000000001")).bearer_auth(&all);
    assert_eq!(send(put, Some(cob)).await.0, 201, "a token without scope carries them all");
}
