//! The simulator's DICT key claims (API 2.12.1, `/claims/`), with the rules of every step
//! ([`crate::domain::claim::check`], the same rules pixgw checks before it asks) and their
//! effect on the directory: a confirmation takes the donor's entry out, a completion makes
//! the claimer's. The DICT moves nothing by itself at a deadline (the API has none); the
//! resolution period is [`RESOLUTION_PERIOD_DAYS`] days, and an ownership claim's
//! completion period as long (the API's examples; the durations are the Pix manuals', not
//! the API's).
//!
//! Virtual participants play their side at once: a virtual donor acknowledges a claim and
//! answers it as `PUT /sim/claims/settings` says (confirm, the default; cancel; or leave it
//! waiting), and a virtual claimer completes its confirmed claims as soon as the rules let
//! it. The control routes open a claim as a virtual claimer (`POST /sim/claims`), take a
//! step for the virtual side (`POST /sim/claims/{id}/{step}`), read one (`GET`), and move
//! the simulator's clock (`PUT /sim/clock`), so a test plays the central bank's and the
//! other institution's side and reaches a deadline without waiting for it.

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::dict::{answer_problem, correlation_id, problem, signed, signed_write, Directory};
use super::icom::participant;
use super::Sim;
use crate::domain::claim::{check, claimable, Claim, ClaimError, ClaimStatus, ClaimType, Reason, Role, Step};
use crate::rail::spi::claims::{
    claim_response, list_response, read_step_request, DictClaim, CLAIMS_LIST_MAX,
};
use crate::rail::spi::dict::{owner_type_of, Entry, Problem};
use crate::rail::spi::message::Ispb;

/// Days of a claim's resolution period, and of an ownership claim's completion period.
pub const RESOLUTION_PERIOD_DAYS: i64 = 7;

/// How a virtual donor answers a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DonorAnswer {
    Confirm,
    Cancel,
    Ignore,
}

/// A claim as the simulator's DICT holds it.
#[derive(Debug, Clone)]
struct Held {
    claim: DictClaim,
    /// The completion's `RequestId` and the new entry's dates, once completed.
    completed: Option<(String, DateTime<Utc>, DateTime<Utc>)>,
}

/// The DICT's claims, oldest first.
#[derive(Debug)]
pub struct Book {
    claims: Vec<Held>,
    pub donor_answer: DonorAnswer,
    /// Steps applied and then answered 500 (the answer lost), still to play.
    pub answer_500_after_storing: u32,
    /// Lists answered.
    pub lists: u64,
}

impl Default for Book {
    fn default() -> Self {
        Book { claims: Vec::new(), donor_answer: DonorAnswer::Confirm, answer_500_after_storing: 0, lists: 0 }
    }
}

fn p(status: u16, kind: &str, title: &str) -> Problem {
    problem(status, kind, title)
}

fn rule_problem(e: ClaimError) -> Problem {
    match e {
        ClaimError::NotYours { .. } => p(403, "Forbidden", &e.to_string()),
        ClaimError::WrongStatus { .. } => p(400, "ClaimOperationInvalid", &e.to_string()),
        ClaimError::ResolutionPeriodNotEnded(_) => p(400, "ClaimResolutionPeriodNotEnded", &e.to_string()),
        ClaimError::CompletionPeriodNotEnded(_) => p(400, "ClaimCompletionPeriodNotEnded", &e.to_string()),
        ClaimError::KeyTypeNotClaimable { .. } => p(400, "ClaimInvalid", &e.to_string()),
    }
}

/// The claim seen from one side, for the domain's rules (a first sight is always a copy).
fn as_side(c: &DictClaim, role: Role) -> Option<Claim> {
    crate::domain::claim::observe(None, &c.seen(), role, 0, 0, c.modified).map(|ch| ch.claim)
}

impl Book {
    /// The claim in progress (not completed or cancelled) for a key, if any.
    pub fn open_for(&self, key: &str) -> Option<&DictClaim> {
        self.claims.iter().map(|h| &h.claim).find(|c| c.claimer.key == key && !c.status.is_final())
    }

    pub fn get(&self, id: &str) -> Option<&DictClaim> {
        self.claims.iter().map(|h| &h.claim).find(|c| c.id == id)
    }

    /// Opens a claim `from` the claimer's participant.
    pub fn create(
        &mut self,
        dir: &mut Directory,
        from: &Ispb,
        asked: DictClaim,
        id: String,
        now: DateTime<Utc>,
    ) -> Result<DictClaim, Problem> {
        if asked.claimer.participant != *from {
            return Err(p(403, "Forbidden", "a claim is opened by the claimer's own participant"));
        }
        claimable(&asked.claimer.key_type, asked.claim_type).map_err(rule_problem)?;
        let Some(entry) = dir.lookup(&asked.claimer.key).cloned() else {
            return Err(p(404, "ClaimKeyNotFound", "no entry is registered with the claimed key"));
        };
        if self.open_for(&entry.key).is_some() {
            return Err(p(400, "ClaimAlreadyExistsForKey", "a claim for the key is in progress"));
        }
        let same_owner = entry.tax_id == asked.claimer.tax_id;
        match asked.claim_type {
            ClaimType::Portability if !same_owner => {
                return Err(p(400, "ClaimTypeInconsistent", "a portability is the same owner's"))
            }
            ClaimType::Ownership if same_owner => {
                return Err(p(400, "ClaimTypeInconsistent", "an ownership claim is another person's"))
            }
            ClaimType::Portability if entry.participant == *from => {
                return Err(p(400, "ClaimResultingEntryAlreadyExists", "the key is already at the claimer"))
            }
            _ => {}
        }
        let period = chrono::Duration::days(RESOLUTION_PERIOD_DAYS);
        let claim = DictClaim {
            claimer: asked.claimer,
            claim_type: asked.claim_type,
            donor: entry.participant.clone(),
            id,
            status: ClaimStatus::Open,
            resolution_end: now + period,
            completion_end: (asked.claim_type == ClaimType::Ownership).then_some(now + period),
            modified: now,
            confirm_reason: None,
            cancel_reason: None,
            cancelled_by: None,
        };
        self.claims.push(Held { claim: claim.clone(), completed: None });
        Ok(claim)
    }

    /// Takes `step` of claim `id` for `from`; a repeat of a step already taken answers the
    /// claim as it is. A completion answers the new entry's dates too.
    #[allow(clippy::type_complexity)]
    pub fn step(
        &mut self,
        dir: &mut Directory,
        from: &Ispb,
        id: &str,
        step: Step,
        request_id: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<(DictClaim, Option<(DateTime<Utc>, DateTime<Utc>)>), Problem> {
        let Some(held) = self.claims.iter_mut().find(|h| h.claim.id == id) else {
            return Err(p(404, "NotFound", "no such claim"));
        };
        let c = &mut held.claim;
        let role = if *from == c.donor {
            Role::Donor
        } else if *from == c.claimer.participant {
            Role::Claimer
        } else {
            return Err(p(403, "Forbidden", "the participant is neither the claim's donor nor its claimer"));
        };
        let dates = held.completed.as_ref().map(|(_, a, b)| (*a, *b));
        // The same step again answers what the first did.
        let repeat = match (step, c.status) {
            (Step::Acknowledge, ClaimStatus::WaitingResolution) => role == Role::Donor,
            (Step::Confirm(r), ClaimStatus::Confirmed) => role == Role::Donor && c.confirm_reason == Some(r),
            (Step::Cancel(r), ClaimStatus::Cancelled) => {
                c.cancel_reason == Some(r) && c.cancelled_by == Some(role)
            }
            (Step::Complete, ClaimStatus::Completed) => {
                role == Role::Claimer
                    && held.completed.as_ref().map(|(r, _, _)| Some(r)) == Some(request_id.as_ref())
            }
            _ => false,
        };
        if repeat {
            return Ok((c.clone(), dates));
        }
        if step == Step::Complete && request_id.is_none() {
            return Err(p(400, "BadRequest", "a completion names its RequestId"));
        }
        let side = as_side(c, role).ok_or_else(|| p(500, "InternalServerError", "the claim has no side"))?;
        check(&side, step, now).map_err(rule_problem)?;
        c.modified = now;
        match step {
            Step::Acknowledge => c.status = ClaimStatus::WaitingResolution,
            Step::Confirm(r) => {
                c.status = ClaimStatus::Confirmed;
                c.confirm_reason = Some(r);
                // The owner gave the key up: the claimer need not wait for the period.
                if c.claim_type == ClaimType::Ownership && r == Reason::UserRequested {
                    c.completion_end = Some(now);
                }
                dir.take(&c.claimer.key);
            }
            Step::Cancel(r) => {
                c.status = ClaimStatus::Cancelled;
                c.cancel_reason = Some(r);
                c.cancelled_by = Some(role);
            }
            Step::Complete => {
                let rid = request_id.as_deref().and_then(|r| uuid::Uuid::parse_str(r).ok());
                let Some(rid) = rid else { return Err(p(400, "BadRequest", "RequestId is not a UUID")) };
                c.status = ClaimStatus::Completed;
                let mut entry = c.claimer.clone();
                entry.creation_date = now;
                entry.key_ownership_date = now;
                dir.put(entry, rid);
                held.completed = Some((request_id.unwrap_or_default(), now, now));
                return Ok((c.clone(), Some((now, now))));
            }
        }
        Ok((c.clone(), None))
    }

    /// The virtual participants' side: a virtual donor acknowledges and answers, a virtual
    /// claimer completes what it may.
    pub fn play_virtual(&mut self, dir: &mut Directory, is_real: &dyn Fn(&Ispb) -> bool, now: DateTime<Utc>) {
        // A claim takes at most three steps of the virtual sides in a row (acknowledge,
        // answer, complete).
        for _ in 0..3 {
            if !self.play_virtual_once(dir, is_real, now) {
                return;
            }
        }
    }

    /// One round of [`Book::play_virtual`]: whether a step was taken.
    fn play_virtual_once(
        &mut self,
        dir: &mut Directory,
        is_real: &dyn Fn(&Ispb) -> bool,
        now: DateTime<Utc>,
    ) -> bool {
        let todo: Vec<(String, Ispb, Step)> = self
            .claims
            .iter()
            .filter_map(|h| {
                let c = &h.claim;
                let step = match c.status {
                    ClaimStatus::Open if !is_real(&c.donor) => Step::Acknowledge,
                    ClaimStatus::WaitingResolution if !is_real(&c.donor) => match self.donor_answer {
                        DonorAnswer::Confirm => Step::Confirm(Reason::UserRequested),
                        DonorAnswer::Cancel => Step::Cancel(Reason::UserRequested),
                        DonorAnswer::Ignore => return None,
                    },
                    ClaimStatus::Confirmed if !is_real(&c.claimer.participant) => Step::Complete,
                    _ => return None,
                };
                let by = if step == Step::Complete { c.claimer.participant.clone() } else { c.donor.clone() };
                Some((c.id.clone(), by, step))
            })
            .collect();
        let mut moved = false;
        for (id, by, step) in todo {
            let request = (step == Step::Complete).then(|| uuid::Uuid::new_v4().to_string());
            // A step the rules do not allow yet (an ownership completion) waits.
            moved |= self.step(dir, &by, &id, step, request, now).is_ok();
        }
        moved
    }

    /// The claims `participant` is donor or claimer of changed at or after `after`, oldest
    /// change first, at most `limit`; and whether more follow.
    pub fn list(
        &self,
        participant: &str,
        after: Option<DateTime<Utc>>,
        limit: usize,
    ) -> (Vec<DictClaim>, bool) {
        let mut found: Vec<DictClaim> = self
            .claims
            .iter()
            .map(|h| &h.claim)
            .filter(|c| c.donor.as_str() == participant || c.claimer.participant.as_str() == participant)
            .filter(|c| after.is_none_or(|a| c.modified >= a))
            .cloned()
            .collect();
        found.sort_by_key(|c| c.modified);
        let more = found.len() > limit;
        found.truncate(limit);
        (found, more)
    }
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v2/claims/", web::post().to(create))
        .route("/api/v2/claims/", web::get().to(list))
        .route("/api/v2/claims/{id}", web::get().to(get))
        .route("/api/v2/claims/{id}/{step}", web::post().to(step));
}

/// The claims and the directory, with the virtual participants' side played at `now`.
fn with_book<T>(sim: &Sim, f: impl FnOnce(&mut Book, &mut Directory, DateTime<Utc>) -> T) -> T {
    let now = sim.now();
    let mut book = sim.claims.lock().unwrap_or_else(|p| p.into_inner());
    let mut dir = sim.directory.lock().unwrap_or_else(|p| p.into_inner());
    book.play_virtual(&mut dir, &|i| sim.is_real(i), now);
    let out = f(&mut book, &mut dir, now);
    book.play_virtual(&mut dir, &|i| sim.is_real(i), now);
    out
}

fn ok(sim: &Sim, status: actix_web::http::StatusCode, body: &str) -> HttpResponse {
    signed(sim, status, body, false)
}

async fn create(req: HttpRequest, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match signed_write(&req, &sim, &body) {
        Ok(w) => w,
        Err(answer) => return *answer,
    };
    let asked = match doc.root.child("Claim").map(|c| DictClaim::read(c, false)) {
        Some(Ok(c)) => c,
        Some(Err(e)) => return answer_problem(&p(400, "ClaimInvalid", &e)),
        None => return answer_problem(&p(400, "ClaimInvalid", "Claim is missing")),
    };
    let id = uuid::Uuid::new_v4().to_string();
    match with_book(&sim, |book, dir, now| book.create(dir, &from, asked, id.clone(), now).map(|c| (c, now)))
    {
        Ok((c, now)) => {
            // The answer is the claim as made (a virtual donor may have moved it since).
            let body = claim_response("CreateClaimResponse", &c, None, &correlation_id(), now);
            ok(&sim, actix_web::http::StatusCode::CREATED, &body)
        }
        Err(e) => answer_problem(&e),
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListQuery {
    participant: String,
    modified_after: Option<String>,
    limit: Option<usize>,
}

async fn list(req: HttpRequest, q: web::Query<ListQuery>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match participant(&req, &sim, None, true) {
        Ok(p) => p,
        Err(r) => return r.response(),
    };
    if q.participant != from.as_str() {
        return answer_problem(&p(403, "Forbidden", "Participant is not the certificate's participant"));
    }
    let after = match q.modified_after.as_deref().map(DateTime::parse_from_rfc3339).transpose() {
        Ok(a) => a.map(|d| d.with_timezone(&Utc)),
        Err(_) => return answer_problem(&p(400, "BadRequest", "ModifiedAfter is not a date-time")),
    };
    let limit = q.limit.unwrap_or(20).clamp(1, CLAIMS_LIST_MAX);
    let ((claims, more), now) = with_book(&sim, |book, _, now| {
        book.lists += 1;
        (book.list(from.as_str(), after, limit), now)
    });
    ok(&sim, actix_web::http::StatusCode::OK, &list_response(&claims, more, &correlation_id(), now))
}

async fn get(req: HttpRequest, id: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match participant(&req, &sim, None, true) {
        Ok(p) => p,
        Err(r) => return r.response(),
    };
    let found = with_book(&sim, |book, _, now| book.get(&id).cloned().map(|c| (c, now)));
    match found {
        Some((c, now)) if c.donor == from || c.claimer.participant == from => ok(
            &sim,
            actix_web::http::StatusCode::OK,
            &claim_response("GetClaimResponse", &c, None, &correlation_id(), now),
        ),
        Some(_) => answer_problem(&p(403, "Forbidden", "the claim is other participants'")),
        None => answer_problem(&p(404, "NotFound", "no such claim")),
    }
}

async fn step(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: Bytes,
    sim: web::Data<Sim>,
) -> HttpResponse {
    let (id, name) = path.into_inner();
    let (from, doc) = match signed_write(&req, &sim, &body) {
        Ok(w) => w,
        Err(answer) => return *answer,
    };
    let (body_id, who, step, request_id) = match read_step_request(&doc, &name) {
        Ok(r) => r,
        Err(e) => return answer_problem(&p(400, "BadRequest", &e)),
    };
    if body_id != id || who != from.as_str() {
        return answer_problem(&p(
            400,
            "BadRequest",
            "ClaimId and Participant must be the path's and the caller's",
        ));
    }
    let done = with_book(&sim, |book, dir, now| {
        let r = book.step(dir, &from, &id, step, request_id, now);
        let lose = r.is_ok() && book.answer_500_after_storing > 0;
        if lose {
            book.answer_500_after_storing -= 1;
        }
        (r, lose, now)
    });
    match done {
        (Ok(_), true, _) => {
            answer_problem(&p(500, "InternalServerError", "the answer was lost after the step was taken"))
        }
        (Ok((c, dates)), false, now) => {
            let root = match step {
                Step::Acknowledge => "AcknowledgeClaimResponse",
                Step::Confirm(_) => "ConfirmClaimResponse",
                Step::Cancel(_) => "CancelClaimResponse",
                Step::Complete => "CompleteClaimResponse",
            };
            ok(
                &sim,
                actix_web::http::StatusCode::OK,
                &claim_response(root, &c, dates, &correlation_id(), now),
            )
        }
        (Err(e), _, _) => answer_problem(&e),
    }
}

// ---- control routes ---------------------------------------------------------------------

/// A claim as the control routes show it.
pub fn claim_json(c: &DictClaim) -> Value {
    json!({
        "id": c.id,
        "type": c.claim_type.as_str(),
        "key": c.claimer.key,
        "keyType": c.claimer.key_type,
        "claimer": c.claimer.participant.as_str(),
        "donor": c.donor.as_str(),
        "status": c.status.as_str(),
        "resolutionPeriodEnd": c.resolution_end.to_rfc3339(),
        "completionPeriodEnd": c.completion_end.map(|t| t.to_rfc3339()),
        "lastModified": c.modified.to_rfc3339(),
        "confirmReason": c.confirm_reason.map(Reason::as_str),
        "cancelReason": c.cancel_reason.map(Reason::as_str),
        "cancelledBy": c.cancelled_by.map(Role::as_str),
    })
}

fn bad(why: &str) -> HttpResponse {
    HttpResponse::BadRequest().json(json!({ "error": why }))
}

/// `POST /sim/claims` `{key, type?, claimer?, taxId?, name?}`: a virtual participant (the
/// virtual receiver unless `claimer` names another) claims a key; `taxId` and `name` are
/// the claimer's (the key's owner's by default, as a portability has it).
pub async fn control_open(body: web::Json<Value>, sim: web::Data<Sim>) -> HttpResponse {
    let b = body.into_inner();
    let Some(key) = b["key"].as_str() else { return bad("key is required") };
    let claim_type = match b["type"].as_str().map(ClaimType::parse) {
        None => ClaimType::Portability,
        Some(Some(t)) => t,
        Some(None) => return bad("type is PORTABILITY or OWNERSHIP"),
    };
    let claimer = b["claimer"].as_str().unwrap_or(super::VIRTUAL_RECEIVER);
    let Some(claimer) = Ispb::parse(claimer) else { return bad("claimer is not an ISPB") };
    if sim.is_real(&claimer) {
        return bad("claimer must be a virtual participant (real ones claim through the DICT)");
    }
    let Some(entry) = sim.directory.lock().unwrap_or_else(|p| p.into_inner()).lookup(key).cloned() else {
        return HttpResponse::NotFound().json(json!({ "error": "no entry for the key" }));
    };
    let tax_id = b["taxId"].as_str().unwrap_or(&entry.tax_id).to_owned();
    let claimer_entry = Entry {
        participant: claimer.clone(),
        branch: None,
        account_number: "1".into(),
        account_type: "CACC".into(),
        opening_date: sim.now(),
        owner_type: owner_type_of(&tax_id).into(),
        name: b["name"].as_str().unwrap_or(&entry.name).to_owned(),
        tax_id,
        trade_name: None,
        ..entry
    };
    let asked = DictClaim::asked(claim_type, claimer_entry);
    let id = uuid::Uuid::new_v4().to_string();
    match with_book(&sim, |book, dir, now| book.create(dir, &claimer, asked, id, now)) {
        Ok(c) => HttpResponse::Created().json(claim_json(&c)),
        Err(e) => HttpResponse::BadRequest().json(json!({ "error": e.kind, "title": e.title })),
    }
}

/// `GET /sim/claims/{id}`
pub async fn control_get(id: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    match with_book(&sim, |book, _, _| book.get(&id).cloned()) {
        Some(c) => HttpResponse::Ok().json(claim_json(&c)),
        None => HttpResponse::NotFound().json(json!({ "error": "no such claim" })),
    }
}

/// `POST /sim/claims/{id}/{step}` `{reason?}`: the claim's virtual side takes a step
/// (`acknowledge`, `confirm`, `cancel`, `complete`; reason `USER_REQUESTED` unless set).
pub async fn control_step(
    path: web::Path<(String, String)>,
    body: Option<web::Json<Value>>,
    sim: web::Data<Sim>,
) -> HttpResponse {
    let (id, name) = path.into_inner();
    let reason = body.as_ref().and_then(|b| b["reason"].as_str()).unwrap_or("USER_REQUESTED");
    let Some(reason) = Reason::parse(reason) else { return bad("reason is not a claim reason") };
    let step = match name.as_str() {
        "acknowledge" => Step::Acknowledge,
        "confirm" => Step::Confirm(reason),
        "cancel" => Step::Cancel(reason),
        "complete" => Step::Complete,
        _ => return bad("the steps are acknowledge, confirm, cancel and complete"),
    };
    let done = with_book(&sim, |book, dir, now| {
        let Some(c) = book.get(&id).cloned() else { return Err(p(404, "NotFound", "no such claim")) };
        let by = if !sim.is_real(&c.donor) && step != Step::Complete {
            c.donor.clone()
        } else if !sim.is_real(&c.claimer.participant) {
            c.claimer.participant.clone()
        } else {
            return Err(p(400, "BadRequest", "both sides of this claim are real participants"));
        };
        let request = (step == Step::Complete).then(|| uuid::Uuid::new_v4().to_string());
        book.step(dir, &by, &id, step, request, now).map(|(c, _)| c)
    });
    match done {
        Ok(c) => HttpResponse::Ok().json(claim_json(&c)),
        Err(e) if e.status == 404 => HttpResponse::NotFound().json(json!({ "error": e.kind })),
        Err(e) => HttpResponse::BadRequest().json(json!({ "error": e.kind, "title": e.title })),
    }
}

/// `PUT /sim/claims/settings` `{donorAnswer?, answer500AfterStoring?}`
pub async fn control_settings(body: web::Json<Value>, sim: web::Data<Sim>) -> HttpResponse {
    let b = body.into_inner();
    let mut book = sim.claims.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(a) = b.get("donorAnswer") {
        match serde_json::from_value::<DonorAnswer>(a.clone()) {
            Ok(a) => book.donor_answer = a,
            Err(_) => return bad("donorAnswer is confirm, cancel or ignore"),
        }
    }
    if let Some(n) = b.get("answer500AfterStoring").and_then(Value::as_u64) {
        book.answer_500_after_storing = u32::try_from(n).unwrap_or(u32::MAX);
    }
    HttpResponse::Ok().json(json!({
        "donorAnswer": book.donor_answer,
        "answer500AfterStoring": book.answer_500_after_storing,
        "lists": book.lists,
    }))
}

/// `PUT /sim/clock` `{advanceSeconds}`: moves the simulator's clock on; answers its now.
pub async fn control_clock(body: web::Json<Value>, sim: web::Data<Sim>) -> HttpResponse {
    let Some(s) = body["advanceSeconds"].as_i64().filter(|s| *s >= 0) else {
        return bad("advanceSeconds is a whole number of seconds, not negative");
    };
    sim.clock_offset_ms.fetch_add(s.saturating_mul(1000), std::sync::atomic::Ordering::Relaxed);
    HttpResponse::Ok().json(json!({ "now": sim.now().to_rfc3339() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn ispb(s: &str) -> Ispb {
        Ispb::parse(s).unwrap()
    }

    fn entry(key: &str, at_participant: &str, tax_id: &str) -> Entry {
        Entry {
            key: key.into(),
            key_type: "PHONE".into(),
            participant: ispb(at_participant),
            branch: None,
            account_number: "7".into(),
            account_type: "TRAN".into(),
            opening_date: at("2026-01-01T00:00:00Z"),
            owner_type: "NATURAL_PERSON".into(),
            tax_id: tax_id.into(),
            name: "Ana".into(),
            trade_name: None,
            creation_date: at("2026-01-01T00:00:00Z"),
            key_ownership_date: at("2026-01-01T00:00:00Z"),
        }
    }

    fn asked(claim_type: ClaimType, claimer: Entry) -> DictClaim {
        DictClaim::asked(claim_type, claimer)
    }

    #[test]
    fn a_portability_moves_the_entry_at_confirmation_and_completion_and_a_repeat_changes_nothing() {
        let mut dir = Directory::seeded().unwrap();
        dir.put(entry("+5511900000001", "99999A04", "52998224725"), uuid::Uuid::nil());
        let mut book = Book::default();
        let now = at("2026-02-01T10:00:00Z");
        let me = ispb("1234ABCD");
        let c = book
            .create(
                &mut dir,
                &me,
                asked(ClaimType::Portability, entry("+5511900000001", "1234ABCD", "52998224725")),
                "c1".into(),
                now,
            )
            .unwrap();
        assert_eq!((c.status, c.donor.as_str()), (ClaimStatus::Open, "99999A04"));
        assert_eq!(c.resolution_end, now + chrono::Duration::days(7));
        assert!(book.open_for("+5511900000001").is_some());
        // The virtual donor acknowledges and confirms; the entry leaves it.
        book.play_virtual(&mut dir, &|i| *i == me, now);
        assert_eq!(book.get("c1").unwrap().status, ClaimStatus::Confirmed);
        assert!(dir.lookup("+5511900000001").is_none());
        let (done, dates) = book
            .step(
                &mut dir,
                &me,
                "c1",
                Step::Complete,
                Some("00000000-0000-4000-8000-000000000001".into()),
                now,
            )
            .unwrap();
        assert_eq!((done.status, dates), (ClaimStatus::Completed, Some((now, now))));
        assert_eq!(dir.lookup("+5511900000001").unwrap().participant, me);
        // The same completion again: the same answer, nothing made twice.
        let later = now + chrono::Duration::minutes(1);
        let (again, dates) = book
            .step(
                &mut dir,
                &me,
                "c1",
                Step::Complete,
                Some("00000000-0000-4000-8000-000000000001".into()),
                later,
            )
            .unwrap();
        assert_eq!((again.modified, dates), (now, Some((now, now))));
        // Another completion request id is no repeat: the claim is completed.
        assert_eq!(
            book.step(
                &mut dir,
                &me,
                "c1",
                Step::Complete,
                Some("00000000-0000-4000-8000-000000000002".into()),
                later
            )
            .unwrap_err()
            .kind,
            "ClaimOperationInvalid"
        );
    }

    #[test]
    fn a_claim_is_refused_for_a_missing_key_a_second_claim_and_an_inconsistent_type() {
        let mut dir = Directory::seeded().unwrap();
        dir.put(entry("+5511900000002", "99999A04", "52998224725"), uuid::Uuid::nil());
        let mut book = Book::default();
        let now = at("2026-02-01T10:00:00Z");
        let me = ispb("1234ABCD");
        let none = book.create(
            &mut dir,
            &me,
            asked(ClaimType::Portability, entry("+5511900000009", "1234ABCD", "52998224725")),
            "x".into(),
            now,
        );
        assert_eq!(none.unwrap_err().kind, "ClaimKeyNotFound");
        let other = book.create(
            &mut dir,
            &me,
            asked(ClaimType::Portability, entry("+5511900000002", "1234ABCD", "11144477735")),
            "x".into(),
            now,
        );
        assert_eq!(other.unwrap_err().kind, "ClaimTypeInconsistent");
        let same = book.create(
            &mut dir,
            &me,
            asked(ClaimType::Ownership, entry("+5511900000002", "1234ABCD", "52998224725")),
            "x".into(),
            now,
        );
        assert_eq!(same.unwrap_err().kind, "ClaimTypeInconsistent");
        book.create(
            &mut dir,
            &me,
            asked(ClaimType::Ownership, entry("+5511900000002", "1234ABCD", "11144477735")),
            "o1".into(),
            now,
        )
        .unwrap();
        let twice = book.create(
            &mut dir,
            &me,
            asked(ClaimType::Ownership, entry("+5511900000002", "1234ABCD", "11144477735")),
            "o2".into(),
            now,
        );
        assert_eq!(twice.unwrap_err().kind, "ClaimAlreadyExistsForKey");
        let foreign = book.create(
            &mut dir,
            &ispb("99999A03"),
            asked(ClaimType::Ownership, entry("+5511900000002", "1234ABCD", "11144477735")),
            "x".into(),
            now,
        );
        assert_eq!(foreign.unwrap_err().kind, "Forbidden");
    }

    #[test]
    fn an_ownership_claim_against_a_real_donor_waits_for_it_and_completes_after_its_period() {
        let mut dir = Directory::seeded().unwrap();
        let me = ispb("1234ABCD");
        dir.put(entry("+5511900000003", "1234ABCD", "52998224725"), uuid::Uuid::nil());
        let mut book = Book::default();
        let now = at("2026-02-01T10:00:00Z");
        let virtual_claimer = ispb("99999A04");
        book.create(
            &mut dir,
            &virtual_claimer,
            asked(ClaimType::Ownership, entry("+5511900000003", "99999A04", "11144477735")),
            "o".into(),
            now,
        )
        .unwrap();
        let real = |i: &Ispb| *i == ispb("1234ABCD");
        book.play_virtual(&mut dir, &real, now);
        assert_eq!(book.get("o").unwrap().status, ClaimStatus::Open, "the real donor answers for itself");
        book.step(&mut dir, &me, "o", Step::Acknowledge, None, now).unwrap();
        let early = book.step(&mut dir, &me, "o", Step::Confirm(Reason::DefaultOperation), None, now);
        assert_eq!(early.unwrap_err().kind, "ClaimResolutionPeriodNotEnded");
        let end = now + chrono::Duration::days(7);
        book.step(&mut dir, &me, "o", Step::Confirm(Reason::DefaultOperation), None, end).unwrap();
        assert!(dir.lookup("+5511900000003").is_none());
        // The virtual claimer completes once its completion period has ended.
        book.play_virtual(&mut dir, &real, end);
        assert_eq!(book.get("o").unwrap().status, ClaimStatus::Completed);
        assert_eq!(dir.lookup("+5511900000003").unwrap().participant, virtual_claimer);
        let (list, more) = book.list("1234ABCD", Some(end), 20);
        assert_eq!((list.len(), more), (1, false));
        assert!(book.list("1234ABCD", Some(end + chrono::Duration::seconds(1)), 20).0.is_empty());
    }
}
