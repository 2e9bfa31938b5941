//! The OpenAPI document held to what the server really does: every response the tests'
//! helpers receive must have a status its operation declares and, when JSON, conform to the
//! declared schema; every request body that succeeds must conform to the operation's
//! request schema (so the document never refuses what the server accepts).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde_json::{json, Value};
use utoipa::OpenApi;

struct Contract {
    doc: Value,
    validators: Mutex<HashMap<String, &'static jsonschema::Validator>>,
}

fn contract() -> &'static Contract {
    static C: OnceLock<Contract> = OnceLock::new();
    C.get_or_init(|| Contract {
        doc: serde_json::to_value(pixgw::http::openapi::ApiDoc::openapi()).unwrap(),
        validators: Mutex::new(HashMap::new()),
    })
}

/// The document's path template that `path` (without its query) falls under: the one with
/// the most literal segments among those that match.
fn template(doc: &Value, path: &str) -> Option<String> {
    let path = path.split('?').next().unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    doc["paths"]
        .as_object()?
        .keys()
        .filter_map(|t| {
            let parts: Vec<&str> = t.split('/').collect();
            let fits = parts.len() == segments.len()
                && parts.iter().zip(&segments).all(|(p, s)| p.starts_with('{') && !s.is_empty() || p == s);
            fits.then(|| (parts.iter().filter(|p| !p.starts_with('{')).count(), t.clone()))
        })
        .max()
        .map(|(_, t)| t)
}

/// A validator of `schema` (inline or a `$ref`), with the document's components beside it.
fn validator(key: String, schema: &Value) -> &'static jsonschema::Validator {
    let c = contract();
    let mut cache = c.validators.lock().unwrap();
    cache.entry(key).or_insert_with(|| {
        let mut root = match schema {
            Value::Object(o) if o.contains_key("$ref") => json!({"$ref": o["$ref"]}),
            other => other.clone(),
        };
        root["components"] = c.doc["components"].clone();
        Box::leak(Box::new(jsonschema::validator_for(&root).expect("a schema of the document compiles")))
    })
}

fn errors(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance).map(|e| format!("{e} at {}", e.instance_path())).collect()
}

/// Checks one exchange; panics with what does not conform.
pub fn check(method: &str, path: &str, request: Option<&Value>, status: u16, json_body: Option<&Value>) {
    let c = contract();
    let Some(t) = template(&c.doc, path) else { return };
    let method = method.to_ascii_lowercase();
    let Some(op) = c.doc["paths"][&t].get(&method) else { return };
    let declared = &op["responses"][status.to_string()];
    assert!(
        declared.is_object(),
        "{method} {t} answered {status}, which the document does not declare (it declares {:?})",
        op["responses"].as_object().map(|r| r.keys().collect::<Vec<_>>())
    );
    if let Some(body) = json_body {
        assert!(
            declared["content"].get("application/json").is_some(),
            "{method} {t} {status}: the document declares no JSON body, the server sent {body}"
        );
    }
    if let (Some(body), Some(schema)) = (json_body, declared["content"]["application/json"].get("schema")) {
        let v = validator(format!("{method} {t} {status}"), schema);
        let bad = errors(v, body);
        assert!(
            bad.is_empty(),
            "{method} {t} {status}: the response does not conform:\n{}\n{body}",
            bad.join("\n")
        );
    }
    if let (true, Some(req), Some(schema)) = (
        (200..300).contains(&status),
        request,
        op["requestBody"]["content"]["application/json"].get("schema"),
    ) {
        let v = validator(format!("{method} {t} request"), schema);
        let bad = errors(v, req);
        assert!(
            bad.is_empty(),
            "{method} {t}: an accepted request does not conform:\n{}\n{req}",
            bad.join("\n")
        );
    }
}

#[test]
#[should_panic(expected = "does not conform")]
fn a_response_that_breaks_its_schema_is_caught() {
    check("GET", "/api/balance", None, 200, Some(&json!({"grossBalance": "a lot"})));
}

#[test]
#[should_panic(expected = "does not declare")]
fn an_undeclared_status_is_caught() {
    check("GET", "/api/balance", None, 418, None);
}

#[test]
#[should_panic(expected = "an accepted request does not conform")]
fn an_accepted_request_the_document_would_refuse_is_caught() {
    check("POST", "/api/pix/cash-out", Some(&json!({"value": 1})), 201, None);
}
