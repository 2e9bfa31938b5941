//! The simulator's tax register: the two routes of the CPF registry service pixgw reads
//! (`crate::rail::spi::tax_registry`), served on the control port (plain HTTP, loopback):
//! `POST /token` gives a bearer token for any Basic credentials, and
//! `GET /consulta-cpf-df/v2/cpf/{ni}` answers a CPF's record with such a token (404 for a
//! CPF the register does not hold, 401 without a token it gave). A control route puts a
//! record in: `PUT /sim/tax-records/{ni}` `{nome, codigo?, nomeSocial?}` (`codigo` "0",
//! regular, unless set), and counts the register's answers: `GET /sim/tax-records`.

use std::collections::{HashMap, HashSet};

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::Sim;

/// The register's records by CPF, the tokens it gave, and how many records it answered.
#[derive(Default)]
pub struct Register {
    records: HashMap<String, Value>,
    tokens: HashSet<String>,
    answered: u64,
}

/// The path the register's API starts with on the control port.
pub const BASE_PATH: &str = "/consulta-cpf-df/v2";

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/token", web::post().to(token))
        .route(&format!("{BASE_PATH}/cpf/{{ni}}"), web::get().to(record))
        .route("/sim/tax-records", web::get().to(control_stats))
        .route("/sim/tax-records/{ni}", web::put().to(control_put));
}

async fn token(req: HttpRequest, body: String, sim: web::Data<Sim>) -> HttpResponse {
    let basic = req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !basic.starts_with("Basic ") || body.trim() != "grant_type=client_credentials" {
        return HttpResponse::Unauthorized().json(json!({"error": "invalid_client"}));
    }
    let token = uuid::Uuid::new_v4().simple().to_string();
    sim.tax.lock().unwrap_or_else(|p| p.into_inner()).tokens.insert(token.clone());
    HttpResponse::Ok().json(json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600}))
}

async fn record(req: HttpRequest, ni: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let bearer = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let mut register = sim.tax.lock().unwrap_or_else(|p| p.into_inner());
    if !register.tokens.contains(bearer) {
        return HttpResponse::Unauthorized().json(json!({"error": "invalid_token"}));
    }
    if crate::domain::document::TaxId::parse(&ni).map_or(true, |t| t.as_str().len() != 11) {
        return HttpResponse::BadRequest().json(json!({"error": "invalid_request"}));
    }
    match register.records.get(ni.as_str()).cloned() {
        Some(r) => {
            register.answered += 1;
            HttpResponse::Ok().json(r)
        }
        None => HttpResponse::NotFound().json(json!({"error": "not_found"})),
    }
}

async fn control_put(ni: web::Path<String>, body: web::Json<Value>, sim: web::Data<Sim>) -> HttpResponse {
    let Some(name) = body["nome"].as_str().filter(|n| !n.trim().is_empty()) else {
        return HttpResponse::BadRequest().json(json!({"error": "nome is required"}));
    };
    let code = body["codigo"].as_str().unwrap_or("0");
    let Some(situation) = crate::domain::tax_record::Situation::of_code(code) else {
        return HttpResponse::BadRequest().json(json!({"error": "codigo is not a situation"}));
    };
    let mut r = json!({
        "ni": ni.as_str(),
        "nome": name,
        "situacao": {"codigo": situation.code(), "descricao": situation.name().to_uppercase()},
        "nascimento": "01011990",
        "dataInscricao": "01012008",
    });
    if let Some(social) = body["nomeSocial"].as_str() {
        r["nomeSocial"] = json!(social);
    }
    sim.tax.lock().unwrap_or_else(|p| p.into_inner()).records.insert(ni.into_inner(), r.clone());
    HttpResponse::Ok().json(r)
}

async fn control_stats(sim: web::Data<Sim>) -> HttpResponse {
    let register = sim.tax.lock().unwrap_or_else(|p| p.into_inner());
    HttpResponse::Ok().json(json!({"records": register.records.len(), "answered": register.answered}))
}
