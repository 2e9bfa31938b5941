//! The simulator's DICT: the keys of `data/dict.json` (each at its institution, a virtual
//! participant), the simulator's own keys (one per virtual receiver, and one per reason the
//! rejecting receiver can give), and those real participants register. Lookups are charged
//! to the payer's token bucket as the DICT's anti-scan policy does (a 404 costs 20, a hit
//! 1; a person's bucket holds 100, a company's 1,000); an empty bucket answers 429.

use std::collections::HashMap;
use std::time::Instant;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::Utc;

use super::icom::participant;
use super::{Sim, REJECTING_RECEIVER, SILENT_RECEIVER, VIRTUAL_RECEIVER};
use crate::rail::spi::dict::{delete_response, entry_response, owner_type_of, Entry, Problem};
use crate::rail::spi::dsig::{self, Profile};
use crate::rail::spi::message::Ispb;
use crate::rail::spi::xml::Document;

/// The reasons the rejecting receiver has a key for: `{code}@rejeita.spi-sim.pixgw`.
pub const REJECT_KEY_REASONS: [&str; 7] = ["ac03", "ac06", "ac07", "be01", "ds04", "ag03", "am02"];
/// The key of the receiver that accepts everything, and of the one that never answers.
pub const ACCEPTING_KEY: &str = "aceita@spi-sim.pixgw";
pub const SILENT_KEY: &str = "silencio@spi-sim.pixgw";
/// The owner every simulator key names (a valid CPF).
const SIM_OWNER: (&str, &str) = ("52998224725", "Recebedor Simulado");

/// A payer's bucket: tokens and when they were counted.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A person's and a company's bucket: size and refill per minute (API 2.x).
pub const BUCKET_PERSON: (f64, f64) = (100.0, 2.0);
pub const BUCKET_COMPANY: (f64, f64) = (1000.0, 20.0);
/// What a lookup costs: a hit, a miss.
pub const COST_HIT: f64 = 1.0;
pub const COST_MISS: f64 = 20.0;

pub struct Directory {
    entries: HashMap<String, Entry>,
    /// The `RequestId` that created each entry (its CID's key), by key.
    request_ids: HashMap<String, uuid::Uuid>,
    institutions: Vec<(Ispb, String)>,
    buckets: HashMap<String, Bucket>,
    /// The CID events since the simulator started, oldest first: (participant, key type,
    /// event).
    cid_events: Vec<(String, String, crate::rail::spi::sync::CidEvent)>,
    /// The simulator's clock offset (ms), which the events' times follow.
    clock: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

impl Directory {
    pub fn seeded() -> anyhow::Result<Directory> {
        let sim = crate::rail::sim::directory::Directory::embedded()?;
        let now = Utc::now();
        let mut entries = HashMap::new();
        let mut institutions = Vec::new();
        for (ispb, name) in sim.institution_list() {
            if let Some(i) = Ispb::parse(&ispb) {
                institutions.push((i, name));
            }
        }
        for e in sim.entries() {
            let Some(participant) = Ispb::parse(&e.ispb) else { continue };
            let number: String = e
                .account_number
                .clone()
                .unwrap_or_else(|| "1".into())
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .collect();
            entries.insert(
                e.key.clone(),
                Entry {
                    key: e.key.clone(),
                    key_type: e.key_type.directory_name().to_owned(),
                    participant,
                    branch: e
                        .account_branch
                        .clone()
                        .filter(|b| b.len() <= 4 && b.bytes().all(|c| c.is_ascii_digit())),
                    account_number: number,
                    account_type: "CACC".into(),
                    opening_date: now,
                    owner_type: owner_type_of(&e.document).into(),
                    tax_id: e.document.clone(),
                    name: e.name.clone(),
                    trade_name: None,
                    creation_date: now,
                    key_ownership_date: now,
                },
            );
        }
        let mut own = |key: String, ispb: &str| {
            if let Some(participant) = Ispb::parse(ispb) {
                entries.insert(
                    key.clone(),
                    Entry {
                        key,
                        key_type: "EMAIL".into(),
                        participant,
                        branch: None,
                        account_number: "1".into(),
                        account_type: "CACC".into(),
                        opening_date: now,
                        owner_type: "NATURAL_PERSON".into(),
                        tax_id: SIM_OWNER.0.into(),
                        name: SIM_OWNER.1.into(),
                        trade_name: None,
                        creation_date: now,
                        key_ownership_date: now,
                    },
                );
            }
        };
        own(ACCEPTING_KEY.into(), VIRTUAL_RECEIVER);
        own(SILENT_KEY.into(), SILENT_RECEIVER);
        for r in REJECT_KEY_REASONS {
            own(format!("{r}@rejeita.spi-sim.pixgw"), REJECTING_RECEIVER);
        }
        let request_ids = entries.keys().map(|k| (k.clone(), uuid::Uuid::new_v4())).collect();
        Ok(Directory {
            entries,
            request_ids,
            institutions,
            buckets: HashMap::new(),
            cid_events: Vec::new(),
            clock: std::sync::Arc::default(),
        })
    }

    pub fn institutions(&self) -> Vec<(Ispb, String)> {
        self.institutions.clone()
    }

    /// The distinct accounts (participant and number) a person's keys name.
    pub fn accounts_of(&self, tax_id: &str) -> u32 {
        let mut seen: Vec<(&str, &str)> = self
            .entries
            .values()
            .filter(|e| e.tax_id == tax_id)
            .map(|e| (e.participant.as_str(), e.account_number.as_str()))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        u32::try_from(seen.len()).unwrap_or(u32::MAX)
    }

    pub fn lookup(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// A key's entry with its CID (none for a seeded entry, which no request made).
    pub fn held(&self, key: &str) -> Option<(Entry, Option<String>)> {
        let e = self.entries.get(key)?;
        let cid = self.request_ids.get(key).map(|r| crate::rail::spi::sync::cid_of(e, r));
        Some((e.clone(), cid))
    }

    /// Charges a lookup to `payer`'s bucket: `false` when it is empty (429).
    fn charge(&mut self, payer: &str, hit: bool, at: Instant) -> bool {
        let (size, per_minute) = if payer.len() == 11 { BUCKET_PERSON } else { BUCKET_COMPANY };
        let b = self.buckets.entry(payer.to_owned()).or_insert(Bucket { tokens: size, at });
        b.tokens = (b.tokens + at.duration_since(b.at).as_secs_f64() * per_minute / 60.0).min(size);
        b.at = at;
        if b.tokens <= 0.0 {
            return false;
        }
        b.tokens -= if hit { COST_HIT } else { COST_MISS };
        true
    }

    /// Gives a payer's bucket a token back: a payment was sent after its lookup.
    pub fn refund_token(&mut self, payer: &str) {
        if let Some(b) = self.buckets.get_mut(payer) {
            let size = if payer.len() == 11 { BUCKET_PERSON.0 } else { BUCKET_COMPANY.0 };
            b.tokens = (b.tokens + COST_HIT).min(size);
        }
    }

    /// Registers a key (an EVP without one gets a fresh key) under the request that made it.
    pub fn register(&mut self, mut e: Entry, request_id: uuid::Uuid) -> Result<Entry, Problem> {
        if e.key_type == "EVP" && e.key.is_empty() {
            e.key = uuid::Uuid::new_v4().to_string();
        }
        if e.key.is_empty() || e.key.len() > crate::rail::spi::dict::KEY_LEN_MAX {
            return Err(problem(400, "EntryInvalid", "the key is missing or too long"));
        }
        if let Some(old) = self.entries.get(&e.key) {
            let kind =
                if old.tax_id == e.tax_id { "EntryAlreadyExists" } else { "EntryKeyOwnedByDifferentPerson" };
            return Err(problem(400, kind, "the key is already registered"));
        }
        let now = Utc::now();
        e.creation_date = now;
        e.key_ownership_date = now;
        self.cid_event("ADDED", &e, &request_id);
        self.request_ids.insert(e.key.clone(), request_id);
        self.entries.insert(e.key.clone(), e.clone());
        Ok(e)
    }

    /// The directory on the simulator's clock (`Sim::now`), which its CID events follow.
    pub fn with_clock(mut self, clock: std::sync::Arc<std::sync::atomic::AtomicI64>) -> Directory {
        self.clock = clock;
        self
    }

    fn cid_event(&mut self, kind: &str, e: &Entry, request_id: &uuid::Uuid) {
        let offset = self.clock.load(std::sync::atomic::Ordering::Relaxed);
        let event = crate::rail::spi::sync::CidEvent {
            kind: kind.to_owned(),
            cid: crate::rail::spi::sync::cid_of(e, request_id),
            at: Utc::now() + chrono::Duration::milliseconds(offset),
        };
        self.cid_events.push((e.participant.to_string(), e.key_type.clone(), event));
    }

    /// Takes a key's entry out (a claim's confirmation moves it).
    pub fn take(&mut self, key: &str) -> Option<Entry> {
        let request_id = self.request_ids.remove(key);
        let e = self.entries.remove(key)?;
        if let Some(r) = request_id {
            self.cid_event("REMOVED", &e, &r);
        }
        Some(e)
    }

    /// Puts an entry in, made by `request_id` (a claim's completion makes the claimer's).
    pub fn put(&mut self, e: Entry, request_id: uuid::Uuid) {
        self.take(&e.key);
        self.cid_event("ADDED", &e, &request_id);
        self.request_ids.insert(e.key.clone(), request_id);
        self.entries.insert(e.key.clone(), e);
    }

    /// A participant's CID events of a key type at or after `start`, a page at most, the
    /// window they cover (with the VSync of the set at its start and end: every change
    /// toggles its CID in the XOR), and whether more follow.
    pub fn cid_events_of(
        &self,
        participant: &str,
        key_type: &str,
        start: Option<chrono::DateTime<Utc>>,
        limit: usize,
        now: chrono::DateTime<Utc>,
    ) -> (Vec<crate::rail::spi::sync::CidEvent>, crate::rail::spi::sync::CidWindow, bool) {
        let xor = |a: &str, b: &str| crate::domain::cid::vsync([a, b]).unwrap_or_else(|| a.to_owned());
        let mut running = "0".repeat(64);
        let mut vsync_start = None;
        let mut found = Vec::new();
        let mut more = false;
        for (_, _, e) in self.cid_events.iter().filter(|(p, k, _)| p == participant && k == key_type) {
            if start.is_none_or(|s| e.at >= s) {
                if found.len() == limit {
                    more = true;
                    break;
                }
                vsync_start.get_or_insert_with(|| running.clone());
                found.push(e.clone());
            }
            running = xor(&running, &e.cid);
        }
        let window = crate::rail::spi::sync::CidWindow {
            start: found.first().map(|e| e.at).or(start).unwrap_or(now),
            end: found.last().map_or(now, |e| e.at),
            vsync_start: vsync_start.unwrap_or_else(|| running.clone()),
            vsync_end: running,
        };
        (found, window, more)
    }

    /// The CIDs of `participant`'s entries of a key type.
    pub fn cids_of(&self, participant: &str, key_type: &str) -> Vec<String> {
        self.entries
            .values()
            .filter(|e| e.participant.as_str() == participant && e.key_type == key_type)
            .filter_map(|e| self.request_ids.get(&e.key).map(|r| crate::rail::spi::sync::cid_of(e, r)))
            .collect()
    }

    /// The entry a CID names, and the request that made it.
    pub fn by_cid(&self, cid: &str) -> Option<(Entry, uuid::Uuid)> {
        let cid = cid.to_ascii_lowercase();
        self.entries.values().find_map(|e| {
            let r = self.request_ids.get(&e.key)?;
            (crate::rail::spi::sync::cid_of(e, r) == cid).then(|| (e.clone(), *r))
        })
    }

    /// Updates an entry of `by`'s to what `asked` says of its account and of its owner's
    /// name and trade name, for `reason`. The key, its type, its owner's tax id and its
    /// dates stay: another owner is another entry. Its CID changes under the request that
    /// made it, and the change is a CID event (the old CID removed, the new one added).
    pub fn update(&mut self, key: &str, by: &Ispb, asked: &Entry, reason: &str) -> Result<Entry, Problem> {
        let Some(old) = self.entries.get(key).cloned() else {
            return Err(problem(404, "NotFound", "Entry associated with given key does not exist"));
        };
        if old.participant != *by || asked.participant != *by {
            return Err(problem(
                403,
                "Forbidden",
                "an entry is updated by its own participant, and stays there",
            ));
        }
        if !crate::rail::spi::dict::update_reason_allowed(&old.key_type, reason) {
            return Err(problem(
                400,
                "InvalidReason",
                "the reason is not one an update of this key type takes",
            ));
        }
        if asked.tax_id != old.tax_id || asked.owner_type != old.owner_type {
            return Err(problem(
                400,
                "EntryInvalid",
                "the owner's tax id is not the entry's: another owner is a new entry",
            ));
        }
        let e = Entry {
            branch: asked.branch.clone(),
            account_number: asked.account_number.clone(),
            account_type: asked.account_type.clone(),
            opening_date: asked.opening_date,
            name: asked.name.clone(),
            trade_name: asked.trade_name.clone(),
            ..old.clone()
        };
        if let Some(r) = self.request_ids.get(key).copied() {
            self.cid_event("REMOVED", &old, &r);
            self.cid_event("ADDED", &e, &r);
        }
        self.entries.insert(key.to_owned(), e.clone());
        Ok(e)
    }

    pub fn remove(&mut self, key: &str, by: &Ispb) -> Result<(), Problem> {
        match self.entries.get(key) {
            None => Err(problem(404, "NotFound", "Entry associated with given key does not exist")),
            Some(e) if e.participant != *by => {
                Err(problem(403, "Forbidden", "the key is another participant's"))
            }
            Some(_) => {
                self.take(key);
                Ok(())
            }
        }
    }
}

pub fn problem(status: u16, kind: &str, title: &str) -> Problem {
    Problem { kind: kind.into(), title: title.into(), status, detail: None }
}

pub(super) fn answer_problem(p: &Problem) -> HttpResponse {
    let status =
        actix_web::http::StatusCode::from_u16(p.status).unwrap_or(actix_web::http::StatusCode::BAD_REQUEST);
    let mut res = HttpResponse::build(status);
    // As the DICT API 2.12.1 has it: a 503 says when to come back, a 429 does not.
    if p.status == 503 {
        res.insert_header(("retry-after", "7"));
    }
    res.content_type("application/problem+xml").body(p.write())
}

pub(super) fn signed(
    sim: &Sim,
    status: actix_web::http::StatusCode,
    body: &str,
    cacheable: bool,
) -> HttpResponse {
    match dsig::sign_dict(body, &sim.dict_signer) {
        Ok(s) => {
            let mut res = HttpResponse::build(status);
            res.content_type("application/xml");
            res.insert_header(("cache-control", if cacheable { "private, max-age=60" } else { "no-store" }));
            res.body(s)
        }
        Err(e) => answer_problem(&problem(500, "InternalServerError", &e.to_string())),
    }
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v2/entries/", web::post().to(create))
        .route("/api/v2/entries/{key}", web::get().to(get))
        .route("/api/v2/entries/{key}", web::put().to(update))
        .route("/api/v2/entries/{key}/delete", web::post().to(delete))
        .route("/api/v2/refunds/", web::get().to(list_refunds))
        .route("/api/v2/refunds/{id}/close", web::post().to(close_refund));
    super::claims::routes(cfg);
    super::sync::routes(cfg);
    super::fraud::routes(cfg);
    super::recovery::routes(cfg);
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RefundsQuery {
    participant: String,
    participant_role: String,
    status: Option<String>,
    limit: Option<usize>,
}

/// The caller of a list, which must name itself in its `Participant` parameter.
pub(super) fn lister(req: &HttpRequest, sim: &Sim, named: &str) -> Result<Ispb, Box<HttpResponse>> {
    let from = participant(req, sim, None, true).map_err(|r| Box::new(r.response()))?;
    if named != from.as_str() {
        return Err(Box::new(answer_problem(&problem(
            403,
            "Forbidden",
            "Participant is not the certificate's participant",
        ))));
    }
    Ok(from)
}

/// `GET /refunds/`: the refund requests in which the caller takes the role asked, oldest
/// change first.
async fn list_refunds(req: HttpRequest, q: web::Query<RefundsQuery>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match lister(&req, &sim, &q.participant) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let limit = q.limit.unwrap_or(20).min(crate::rail::spi::dict::REFUNDS_LIST_MAX);
    let mut found: Vec<crate::rail::spi::dict::Refund> = sim
        .refunds
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|r| match q.participant_role.as_str() {
            "CONTESTED" => r.contested == from.as_str(),
            "REQUESTING" => r.requesting == from.as_str(),
            _ => false,
        })
        .filter(|r| q.status.as_deref().is_none_or(|s| s.split(',').any(|s| s == r.status)))
        .cloned()
        .collect();
    found.sort_by_key(|r| r.modified);
    sim.refund_lists.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let more = found.len() > limit;
    found.truncate(limit);
    let body = crate::rail::spi::dict::list_refunds_response(&found, more, &correlation_id(), Utc::now());
    signed(&sim, actix_web::http::StatusCode::OK, &body, false)
}

/// `POST /refunds/{id}/close`: the contested participant's analysis. An accepted one names
/// the return that gave the money back, which must be a settled return of that payment.
async fn close_refund(
    req: HttpRequest,
    id: web::Path<String>,
    body: Bytes,
    sim: web::Data<Sim>,
) -> HttpResponse {
    use crate::rail::spi::dict::REFUND_RESULTS;
    let (from, doc) = match signed_write(&req, &sim, &body) {
        Ok(w) => w,
        Err(answer) => return *answer,
    };
    let text = |name: &str| doc.root.text_at(&[name]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    if text("RefundId").as_deref() != Some(id.as_str())
        || text("Participant").as_deref() != Some(from.as_str())
    {
        return answer_problem(&problem(400, "BadRequest", "RefundId or Participant is not the request's"));
    }
    let Some(result) = text("RefundAnalysisResult").filter(|r| REFUND_RESULTS.contains(&r.as_str())) else {
        return answer_problem(&problem(400, "BadRequest", "RefundAnalysisResult is not a result"));
    };
    let refund_tx = text("RefundTransactionId");
    let mut refunds = sim.refunds.lock().unwrap_or_else(|p| p.into_inner());
    let Some(r) = refunds.iter_mut().find(|r| r.id == *id) else {
        return answer_problem(&problem(404, "NotFound", "no refund request with this id"));
    };
    if r.contested != from.as_str() {
        return answer_problem(&problem(
            403,
            "Forbidden",
            "only the contested participant closes a refund request",
        ));
    }
    if r.status != "OPEN" {
        return answer_problem(&problem(400, "RefundInvalidStatus", "the refund request is not open"));
    }
    if result != "REJECTED" {
        let engine = sim.engine.lock().unwrap_or_else(|p| p.into_inner());
        let returned = refund_tx.as_deref().and_then(|t| engine.payment(t)).is_some_and(|p| {
            p.is_return
                && p.original_end_to_end_id == r.transaction_id
                && p.stage == super::core::Stage::Settled
        });
        if !returned {
            return answer_problem(&problem(
                400,
                "RefundTransactionInvalid",
                "RefundTransactionId is not a settled return of the payment",
            ));
        }
    }
    r.status = "CLOSED".into();
    r.analysis_result = Some(result);
    r.analysis_details = text("RefundAnalysisDetails");
    r.refund_transaction_id = refund_tx;
    r.modified = Utc::now();
    let answer = crate::rail::spi::dict::close_refund_response(r, &correlation_id(), Utc::now());
    let recovery = r.funds_recovery_id.clone();
    drop(refunds);
    if let Some(recovery) = recovery {
        super::recovery::refund_closed(&sim, &recovery);
    }
    signed(&sim, actix_web::http::StatusCode::OK, &answer, false)
}

pub(super) fn correlation_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

async fn get(req: HttpRequest, key: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match participant(&req, &sim, None, true) {
        Ok(p) => p,
        Err(r) => return r.response(),
    };
    if sim.outage.lock().unwrap_or_else(|p| p.into_inner()).dict {
        return answer_problem(&problem(503, "ServiceUnavailable", "the DICT is out of its window"));
    }
    let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
    if header("pi-requestingparticipant").as_deref() != Some(from.as_str()) {
        return answer_problem(&problem(
            403,
            "Forbidden",
            "PI-RequestingParticipant is not the certificate's participant",
        ));
    }
    let payer = header("pi-payerid").unwrap_or_default();
    if !matches!(payer.len(), 11 | 14) || !payer.bytes().all(|b| b.is_ascii_digit()) {
        return answer_problem(&problem(400, "BadRequest", "PI-PayerId must be a CPF or CNPJ"));
    }
    if header("pi-endtoendid").is_none_or(|e| !crate::rail::spi::message::is_end_to_end_id(&e, 'E')) {
        return answer_problem(&problem(400, "BadRequest", "PI-EndToEndId must be an end-to-end id"));
    }
    let found = {
        let mut d = sim.directory.lock().unwrap_or_else(|p| p.into_inner());
        let found = d.lookup(&key).cloned();
        if !d.charge(&payer, found.is_some(), Instant::now()) {
            return answer_problem(&problem(429, "RateLimited", "Rate limited"));
        }
        found
    };
    match found {
        Some(e) => {
            let mut body = entry_response("GetEntryResponse", &e, &correlation_id(), Utc::now());
            let asked =
                req.query_string().split('&').any(|p| p.eq_ignore_ascii_case("IncludeStatistics=true"));
            if asked {
                let now = sim.now();
                let s = sim.fraud.lock().unwrap_or_else(|p| p.into_inner()).signals(&e.key, &e.tax_id, now);
                let accounts = sim.directory.lock().unwrap_or_else(|p| p.into_inner()).accounts_of(&e.tax_id);
                let stats = format!(
                    "{}{}</GetEntryResponse>",
                    crate::rail::spi::fraud::write_statistics("KeyStatistics", &s.key, 1, now),
                    crate::rail::spi::fraud::write_statistics("OwnerStatistics", &s.owner, accounts, now)
                );
                body = body.replace("</GetEntryResponse>", &stats);
            }
            signed(&sim, actix_web::http::StatusCode::OK, &body, true)
        }
        None => answer_problem(&problem(404, "NotFound", "Entry associated with given key does not exist")),
    }
}

/// A signed request body from `from`: its document, once its signature checks (or it
/// carries none and the simulator accepts that).
fn signed_request(sim: &Sim, from: &Ispb, body: &Bytes) -> Result<Document, Problem> {
    let doc = Document::parse(body).map_err(|e| problem(400, "BadRequest", &e.to_string()))?;
    if sim.accept_unsigned && dsig::signature_of(&doc, Profile::Dict).is_none() {
        return Ok(doc);
    }
    let certs = sim.signing_certs.get(from).map(Vec::as_slice).unwrap_or(&[]);
    dsig::verify(&doc, Profile::Dict, certs)
        .map_err(|e| problem(400, "RequestSignatureInvalid", &e.to_string()))?;
    Ok(doc)
}

/// A write request's participant (by its certificate) and its document, once its signature
/// checks; else the answer that refuses it.
pub(super) fn signed_write(
    req: &HttpRequest,
    sim: &Sim,
    body: &Bytes,
) -> Result<(Ispb, Document), Box<HttpResponse>> {
    let from = participant(req, sim, None, true).map_err(|r| Box::new(r.response()))?;
    let doc = signed_request(sim, &from, body).map_err(|p| Box::new(answer_problem(&p)))?;
    Ok((from, doc))
}

async fn create(req: HttpRequest, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match signed_write(&req, &sim, &body) {
        Ok(w) => w,
        Err(answer) => return *answer,
    };
    let entry = match doc.root.child("Entry").map(Entry::read) {
        Some(Ok(e)) => e,
        Some(Err(e)) => return answer_problem(&problem(400, "EntryInvalid", &e)),
        None => return answer_problem(&problem(400, "EntryInvalid", "Entry is missing")),
    };
    if entry.participant != from {
        return answer_problem(&problem(403, "Forbidden", "an entry is registered by its own participant"));
    }
    let Some(request_id) =
        doc.root.text_at(&["RequestId"]).and_then(|r| uuid::Uuid::parse_str(r.trim()).ok())
    else {
        return answer_problem(&problem(400, "EntryInvalid", "RequestId is missing or not a UUID"));
    };
    let registered = sim.directory.lock().unwrap_or_else(|p| p.into_inner()).register(entry, request_id);
    match registered {
        Ok(e) => signed(
            &sim,
            actix_web::http::StatusCode::CREATED,
            &entry_response("CreateEntryResponse", &e, &correlation_id(), Utc::now()),
            false,
        ),
        Err(p) => answer_problem(&p),
    }
}

/// `PUT /entries/{key}`: the participant's update of one of its entries (its account, its
/// owner's name).
async fn update(req: HttpRequest, key: web::Path<String>, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match signed_write(&req, &sim, &body) {
        Ok(w) => w,
        Err(answer) => return *answer,
    };
    let (asked_key, reason, asked) = match crate::rail::spi::dict::read_update_request(&doc) {
        Ok(r) => r,
        Err(e) => return answer_problem(&problem(400, "EntryInvalid", &e)),
    };
    if asked_key != *key {
        return answer_problem(&problem(400, "BadRequest", "the body's Key is not the path's"));
    }
    if sim.claims.lock().unwrap_or_else(|p| p.into_inner()).open_for(&key).is_some() {
        return answer_problem(&problem(400, "EntryLockedByClaim", "a claim in progress locks the entry"));
    }
    let updated =
        sim.directory.lock().unwrap_or_else(|p| p.into_inner()).update(&key, &from, &asked, &reason);
    match updated {
        Ok(e) => signed(
            &sim,
            actix_web::http::StatusCode::OK,
            &entry_response("UpdateEntryResponse", &e, &correlation_id(), Utc::now()),
            false,
        ),
        Err(p) => answer_problem(&p),
    }
}

async fn delete(req: HttpRequest, key: web::Path<String>, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match signed_write(&req, &sim, &body) {
        Ok(w) => w,
        Err(answer) => return *answer,
    };
    if doc.root.text_at(&["Key"]).as_deref() != Some(key.as_str()) {
        return answer_problem(&problem(400, "BadRequest", "the body's Key is not the path's"));
    }
    let reason = doc.root.text_at(&["Reason"]).unwrap_or_default();
    if !crate::rail::keys::DELETE_REASONS.contains(&reason.trim()) {
        return answer_problem(&problem(400, "InvalidReason", "the reason is not one a deletion takes"));
    }
    if sim.claims.lock().unwrap_or_else(|p| p.into_inner()).open_for(&key).is_some() {
        return answer_problem(&problem(400, "EntryLockedByClaim", "a claim in progress locks the entry"));
    }
    let removed = sim.directory.lock().unwrap_or_else(|p| p.into_inner()).remove(&key, &from);
    match removed {
        Ok(()) => signed(
            &sim,
            actix_web::http::StatusCode::OK,
            &delete_response(&key, &correlation_id(), Utc::now()),
            false,
        ),
        Err(p) => answer_problem(&p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persons_bucket_empties_after_five_misses_and_refills_two_a_minute() {
        let mut d = Directory::seeded().unwrap();
        let t0 = Instant::now();
        for i in 0..5 {
            assert!(d.charge("52998224725", false, t0), "miss {i}");
        }
        assert!(!d.charge("52998224725", true, t0), "100 tokens spent by five misses");
        assert!(d.charge("11222333000181", false, t0), "a company's bucket is its own");
        // 30 s later: one token back (2 a minute), enough for a hit.
        assert!(d.charge("52998224725", true, t0 + std::time::Duration::from_secs(30)));
        assert!(!d.charge("52998224725", true, t0 + std::time::Duration::from_secs(30)));
    }

    #[test]
    fn the_seeded_directory_holds_the_simulated_banks_keys_and_the_simulators_own() {
        let d = Directory::seeded().unwrap();
        assert!(d.lookup(ACCEPTING_KEY).is_some_and(|e| e.participant.as_str() == VIRTUAL_RECEIVER));
        assert!(d
            .lookup("ac06@rejeita.spi-sim.pixgw")
            .is_some_and(|e| e.participant.as_str() == REJECTING_RECEIVER));
        let banks = d.institutions();
        assert!(banks.len() >= 5);
        let any = d.entries.values().find(|e| e.participant == banks[0].0).unwrap();
        assert!(any.account_number.bytes().all(|b| b.is_ascii_alphanumeric()));
    }

    /// An entry of Ana's at participant `ours`, account 7.
    fn ours_entry(key: &str, key_type: &str, ours: &Ispb) -> Entry {
        Entry {
            key: key.into(),
            key_type: key_type.into(),
            participant: ours.clone(),
            branch: None,
            account_number: "7".into(),
            account_type: "TRAN".into(),
            opening_date: Utc::now(),
            owner_type: "NATURAL_PERSON".into(),
            tax_id: "52998224725".into(),
            name: "Ana".into(),
            trade_name: None,
            creation_date: Utc::now(),
            key_ownership_date: Utc::now(),
        }
    }

    #[test]
    fn cid_events_follow_every_change_and_their_window_carries_the_sets_vsync() {
        let mut d = Directory::seeded().unwrap();
        let ours = Ispb::parse("1234ABCD").unwrap();
        let entry = |key: &str| ours_entry(key, "EMAIL", &ours);
        d.register(entry("a@x.com"), uuid::Uuid::new_v4()).unwrap();
        d.register(entry("b@x.com"), uuid::Uuid::new_v4()).unwrap();
        let first_cids = d.cids_of("1234ABCD", "EMAIL");
        d.remove("a@x.com", &ours).unwrap();
        let now = Utc::now();
        let (all, window, more) = d.cid_events_of("1234ABCD", "EMAIL", None, 10, now);
        let kinds: Vec<&str> = all.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!((kinds, more), (vec!["ADDED", "ADDED", "REMOVED"], false));
        assert_eq!(window.vsync_start, "0".repeat(64), "the set was empty before");
        let left = d.cids_of("1234ABCD", "EMAIL");
        assert_eq!(window.vsync_end, crate::domain::cid::vsync(left.iter().map(String::as_str)).unwrap());
        let (page, w, more) = d.cid_events_of("1234ABCD", "EMAIL", None, 2, now);
        assert_eq!((page.len(), more), (2, true));
        assert_eq!(w.vsync_end, crate::domain::cid::vsync(first_cids.iter().map(String::as_str)).unwrap());
        let (none, w, _) =
            d.cid_events_of("1234ABCD", "EMAIL", Some(now + chrono::Duration::seconds(1)), 10, now);
        assert!(none.is_empty());
        assert_eq!(
            (w.vsync_start.clone(), w.end),
            (window.vsync_end.clone(), now),
            "no change since: the set as it is"
        );
        assert!(d.cid_events_of("1234ABCD", "PHONE", None, 10, now).0.is_empty());
    }

    #[test]
    fn an_update_renames_the_owner_moves_the_cid_under_the_same_request_and_keeps_the_rest() {
        let mut d = Directory::seeded().unwrap();
        let ours = Ispb::parse("1234ABCD").unwrap();
        let other = Ispb::parse("99999010").unwrap();
        let e = ours_entry("", "EVP", &ours);
        let rid = uuid::Uuid::new_v4();
        let made = d.register(e, rid).unwrap();
        let before = d.cids_of("1234ABCD", "EVP");
        let asked = Entry { name: "Ana Souza".into(), ..made.clone() };
        // Refusals change nothing.
        let refused = |d: &mut Directory, key: &str, by: &Ispb, asked: &Entry, reason: &str| {
            d.update(key, by, asked, reason).unwrap_err().kind
        };
        assert_eq!(refused(&mut d, &made.key, &ours, &asked, "USER_REQUESTED"), "InvalidReason", "an EVP");
        assert_eq!(refused(&mut d, &made.key, &other, &asked, "RFB_VALIDATION"), "Forbidden");
        let moved = Entry { participant: other.clone(), ..asked.clone() };
        assert_eq!(refused(&mut d, &made.key, &ours, &moved, "RFB_VALIDATION"), "Forbidden");
        let someone_else = Entry { tax_id: "11144477735".into(), ..asked.clone() };
        assert_eq!(refused(&mut d, &made.key, &ours, &someone_else, "RFB_VALIDATION"), "EntryInvalid");
        assert_eq!(refused(&mut d, "nobody@x.com", &ours, &asked, "RFB_VALIDATION"), "NotFound");
        assert_eq!(d.cids_of("1234ABCD", "EVP"), before);

        let updated = d.update(&made.key, &ours, &asked, "RFB_VALIDATION").unwrap();
        assert_eq!(updated.name, "Ana Souza");
        assert_eq!((updated.key_type.as_str(), updated.creation_date), ("EVP", made.creation_date));
        let after = d.cids_of("1234ABCD", "EVP");
        assert_eq!(
            after,
            vec![crate::rail::spi::sync::cid_of(&updated, &rid)],
            "the CID of the same request"
        );
        assert_ne!(after, before);
        let (events, _, _) = d.cid_events_of("1234ABCD", "EVP", None, 10, Utc::now());
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["ADDED", "REMOVED", "ADDED"]);
        assert_eq!((events[1].cid.as_str(), events[2].cid.as_str()), (before[0].as_str(), after[0].as_str()));
    }
}
