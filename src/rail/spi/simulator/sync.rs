//! The simulator's DICT reconciliation (API 2.12.1, "Reconciliação"): sync verifications
//! against the CIDs of the participant's entries, CID set files (made at once, read over
//! the DICT's own connection), and entries by CID. Control routes put an entry in or take one
//! out behind a participant's back (`PUT`/`DELETE /sim/dict/entries/{key}`), so a test makes
//! the difference a verification must find, show an entry as the DICT holds it, with its CID
//! (`GET /sim/dict/entries/{key}`), and read the counts (`GET /sim/dict/sync`).

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::dict::{answer_problem, correlation_id, problem, signed, signed_write};
use super::icom::participant;
use super::Sim;
use crate::rail::spi::dict::{owner_type_of, Entry, KEY_TYPES};
use crate::rail::spi::message::Ispb;
use crate::rail::spi::sync::{
    cid_file_response, entry_by_cid_response, read_verification_request, verification_response, CidFile,
};

/// The files made and the verifications answered.
#[derive(Debug, Default)]
pub struct Files {
    files: Vec<(CidFile, String)>,
    pub verifications: u64,
    pub nok: u64,
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v2/sync-verifications/", web::post().to(verify))
        .route("/api/v2/cids/files/", web::post().to(create_file))
        .route("/api/v2/cids/files/{id}", web::get().to(get_file))
        .route("/api/v2/cids/files/{id}/content", web::get().to(file_content))
        .route("/api/v2/cids/entries/{cid}", web::get().to(entry_by_cid))
        .route("/api/v2/cids/events", web::get().to(cid_events));
}

fn created(sim: &Sim, body: &str) -> HttpResponse {
    signed(sim, actix_web::http::StatusCode::CREATED, body, false)
}

async fn verify(req: HttpRequest, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match signed_write(&req, &sim, &body) {
        Ok(w) => w,
        Err(answer) => return *answer,
    };
    let (who, key_type, theirs) = match read_verification_request(&doc) {
        Ok(r) => r,
        Err(e) => return answer_problem(&problem(400, "BadRequest", &e)),
    };
    if who != from.as_str() || !KEY_TYPES.contains(&key_type.as_str()) {
        return answer_problem(&problem(
            400,
            "BadRequest",
            "Participant must be the caller, KeyType a key type",
        ));
    }
    let cids = sim.directory.lock().unwrap_or_else(|p| p.into_inner()).cids_of(from.as_str(), &key_type);
    let ours = crate::domain::cid::vsync(cids.iter().map(String::as_str)).unwrap_or_default();
    let ok = ours.eq_ignore_ascii_case(&theirs);
    let id = {
        let mut files = sim.sync.lock().unwrap_or_else(|p| p.into_inner());
        files.verifications += 1;
        files.nok += u64::from(!ok);
        files.verifications
    };
    created(&sim, &verification_response(&from, &key_type, &theirs, id, ok, &correlation_id(), sim.now()))
}

async fn create_file(req: HttpRequest, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match signed_write(&req, &sim, &body) {
        Ok(w) => w,
        Err(answer) => return *answer,
    };
    let text = |n: &str| doc.root.text_at(&[n]).map(|t| t.trim().to_owned());
    let (Some(who), Some(key_type)) = (text("Participant"), text("KeyType")) else {
        return answer_problem(&problem(400, "BadRequest", "Participant and KeyType are required"));
    };
    if who != from.as_str() || !KEY_TYPES.contains(&key_type.as_str()) {
        return answer_problem(&problem(
            400,
            "BadRequest",
            "Participant must be the caller, KeyType a key type",
        ));
    }
    let cids = sim.directory.lock().unwrap_or_else(|p| p.into_inner()).cids_of(from.as_str(), &key_type);
    let content: String = cids.iter().map(|c| format!("{c}\n")).collect();
    use sha2::Digest;
    let sha: String = sha2::Sha256::digest(content.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    // Host carries no port (the ICOM manual's rule, which this listener keeps for the DICT
    // too): the file's URL names the host asked for and the port this listener serves on.
    let host = format!("{}:{}", req.connection_info().host(), req.app_config().local_addr().port());
    let now = sim.now();
    let file = {
        let mut files = sim.sync.lock().unwrap_or_else(|p| p.into_inner());
        let id = files.files.len() as u64 + 1;
        let file = CidFile {
            id,
            status: "AVAILABLE".into(),
            participant: from.to_string(),
            key_type,
            requested: now,
            url: Some(format!("https://{host}/api/v2/cids/files/{id}/content")),
            bytes: Some(content.len() as u64),
            sha256: Some(sha),
        };
        files.files.push((file.clone(), content));
        file
    };
    created(&sim, &cid_file_response("CreateCidSetFileResponse", &file, &correlation_id(), now))
}

/// A file of the caller's, by id.
fn file_of(req: &HttpRequest, sim: &Sim, id: u64) -> Result<(CidFile, String), Box<HttpResponse>> {
    let from = participant(req, sim, None, true).map_err(|r| Box::new(r.response()))?;
    let files = sim.sync.lock().unwrap_or_else(|p| p.into_inner());
    match files.files.iter().find(|(f, _)| f.id == id) {
        Some((f, c)) if f.participant == from.as_str() => Ok((f.clone(), c.clone())),
        Some(_) => {
            Err(Box::new(answer_problem(&problem(403, "Forbidden", "the file is another participant's"))))
        }
        None => Err(Box::new(answer_problem(&problem(404, "NotFound", "no such file")))),
    }
}

async fn get_file(req: HttpRequest, id: web::Path<u64>, sim: web::Data<Sim>) -> HttpResponse {
    match file_of(&req, &sim, *id) {
        Ok((f, _)) => signed(
            &sim,
            actix_web::http::StatusCode::OK,
            &cid_file_response("GetCidSetFileResponse", &f, &correlation_id(), sim.now()),
            false,
        ),
        Err(r) => *r,
    }
}

async fn file_content(req: HttpRequest, id: web::Path<u64>, sim: web::Data<Sim>) -> HttpResponse {
    match file_of(&req, &sim, *id) {
        Ok((_, content)) => HttpResponse::Ok().content_type("text/plain").body(content),
        Err(r) => *r,
    }
}

async fn entry_by_cid(req: HttpRequest, cid: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match participant(&req, &sim, None, true) {
        Ok(p) => p,
        Err(r) => return r.response(),
    };
    let found = sim.directory.lock().unwrap_or_else(|p| p.into_inner()).by_cid(&cid);
    match found {
        Some((e, rid)) if e.participant == from => signed(
            &sim,
            actix_web::http::StatusCode::OK,
            &entry_by_cid_response(&cid.to_ascii_lowercase(), &e, &rid, &correlation_id(), sim.now()),
            false,
        ),
        Some(_) => answer_problem(&problem(403, "Forbidden", "the entry is another participant's")),
        None => answer_problem(&problem(404, "NotFound", "no active entry has this CID")),
    }
}

// ---- control routes ---------------------------------------------------------------------

fn bad(why: &str) -> HttpResponse {
    HttpResponse::BadRequest().json(json!({ "error": why }))
}

/// `PUT /sim/dict/entries/{key}` `{keyType, participant, account, taxId?, name?}`: the DICT
/// holds this entry from now on, whatever the participant knows (a fresh `RequestId`).
pub async fn control_put_entry(
    key: web::Path<String>,
    body: web::Json<Value>,
    sim: web::Data<Sim>,
) -> HttpResponse {
    let b = body.into_inner();
    let Some(key_type) = b["keyType"].as_str().filter(|t| KEY_TYPES.contains(t)) else {
        return bad("keyType is a key type");
    };
    let Some(participant) = b["participant"].as_str().and_then(Ispb::parse) else {
        return bad("participant is an ISPB");
    };
    let Some(account) = b["account"].as_str().filter(|a| !a.is_empty()) else {
        return bad("account is required");
    };
    let tax_id = b["taxId"].as_str().unwrap_or("52998224725").to_owned();
    let now = sim.now();
    let entry = Entry {
        key: key.into_inner(),
        key_type: key_type.to_owned(),
        participant,
        branch: None,
        account_number: account.to_owned(),
        account_type: "TRAN".into(),
        opening_date: now,
        owner_type: owner_type_of(&tax_id).into(),
        name: b["name"].as_str().unwrap_or("Titular Simulado").to_owned(),
        tax_id,
        trade_name: None,
        creation_date: now,
        key_ownership_date: now,
    };
    let rid = uuid::Uuid::new_v4();
    let cid = crate::rail::spi::sync::cid_of(&entry, &rid);
    sim.directory.lock().unwrap_or_else(|p| p.into_inner()).put(entry, rid);
    HttpResponse::Ok().json(json!({ "cid": cid }))
}

/// Keys one seeding makes at most.
pub const SEED_KEYS_MAX: u64 = 1_000_000;

/// `POST /sim/dict/seed` `{count, pattern?}`: the DICT holds `count` e-mail keys of the
/// virtual receiver, `pattern` with `{}` replaced by 0, 1, 2, ... (`cap{}@capacity.spi-sim.pixgw`
/// unless set): the distinct keys a capacity test looks up.
pub async fn control_seed(body: web::Json<Value>, sim: web::Data<Sim>) -> HttpResponse {
    let Some(count) = body["count"].as_u64().filter(|c| (1..=SEED_KEYS_MAX).contains(c)) else {
        return bad("count is 1 to 1,000,000");
    };
    let pattern = body["pattern"].as_str().unwrap_or("cap{}@capacity.spi-sim.pixgw");
    if !pattern.contains("{}") {
        return bad("pattern must hold {}");
    }
    let Some(participant) = Ispb::parse(super::VIRTUAL_RECEIVER) else { return bad("no virtual receiver") };
    let now = sim.now();
    let mut dir = sim.directory.lock().unwrap_or_else(|p| p.into_inner());
    for i in 0..count {
        let key = pattern.replace("{}", &i.to_string());
        let entry = Entry {
            key,
            key_type: "EMAIL".into(),
            participant: participant.clone(),
            branch: None,
            account_number: (i + 1).to_string(),
            account_type: "CACC".into(),
            opening_date: now,
            owner_type: "NATURAL_PERSON".into(),
            tax_id: "52998224725".into(),
            name: "Recebedor Simulado".into(),
            trade_name: None,
            creation_date: now,
            key_ownership_date: now,
        };
        dir.put(entry, uuid::Uuid::new_v4());
    }
    HttpResponse::Ok().json(json!({ "seeded": count, "pattern": pattern }))
}

/// `GET /sim/dict/entries/{key}`: the entry as the DICT holds it, with its CID.
pub async fn control_get_entry(key: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    match sim.directory.lock().unwrap_or_else(|p| p.into_inner()).held(&key) {
        Some((e, cid)) => HttpResponse::Ok().json(json!({
            "key": e.key,
            "keyType": e.key_type,
            "participant": e.participant.to_string(),
            "account": e.account_number,
            "taxId": e.tax_id,
            "name": e.name,
            "tradeName": e.trade_name,
            "cid": cid,
        })),
        None => HttpResponse::NotFound().json(json!({ "error": "no such entry" })),
    }
}

/// `DELETE /sim/dict/entries/{key}`: the DICT forgets the entry, whatever the participant
/// knows.
pub async fn control_delete_entry(key: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    match sim.directory.lock().unwrap_or_else(|p| p.into_inner()).take(&key) {
        Some(_) => HttpResponse::NoContent().finish(),
        None => HttpResponse::NotFound().json(json!({ "error": "no such entry" })),
    }
}

/// `GET /sim/dict/sync`: verifications answered, how many found a difference, files made.
pub async fn control_stats(sim: web::Data<Sim>) -> HttpResponse {
    let files = sim.sync.lock().unwrap_or_else(|p| p.into_inner());
    HttpResponse::Ok().json(json!({
        "verifications": files.verifications,
        "nok": files.nok,
        "files": files.files.len(),
    }))
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct CidEventsQuery {
    participant: String,
    key_type: String,
    start_time: Option<String>,
    limit: Option<usize>,
}

/// `GET /cids/events`: the caller's CID events of a key type from `StartTime` on (inclusive),
/// oldest first.
async fn cid_events(req: HttpRequest, q: web::Query<CidEventsQuery>, sim: web::Data<Sim>) -> HttpResponse {
    use crate::rail::spi::sync::{cid_events_response, CID_EVENTS_LIST_MAX};
    let from = match super::dict::lister(&req, &sim, &q.participant) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    if !KEY_TYPES.contains(&q.key_type.as_str()) {
        return answer_problem(&problem(400, "BadRequest", "KeyType is not a key type"));
    }
    let start = match q.start_time.as_deref().map(chrono::DateTime::parse_from_rfc3339) {
        None => None,
        Some(Ok(t)) => Some(t.with_timezone(&chrono::Utc)),
        Some(Err(_)) => return answer_problem(&problem(400, "BadRequest", "StartTime is not a date-time")),
    };
    let limit = q.limit.unwrap_or(100).min(CID_EVENTS_LIST_MAX);
    let now = sim.now();
    let (events, window, more) = sim.directory.lock().unwrap_or_else(|p| p.into_inner()).cid_events_of(
        from.as_str(),
        &q.key_type,
        start,
        limit,
        now,
    );
    let body =
        cid_events_response(from.as_str(), &q.key_type, &events, &window, more, &correlation_id(), now);
    signed(&sim, actix_web::http::StatusCode::OK, &body, false)
}
