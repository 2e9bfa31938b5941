//! The simulator's DICT fraud marks (API 2.12.1, `/fraud-markers/`) and the anti-fraud
//! counters a lookup with `IncludeStatistics=true` carries, counted from them over the API's
//! windows (90 days, 12 months, 60 months) on the simulator's clock. A control route marks a
//! person or a key as another participant would (`POST /sim/fraud-markers`).

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::dict::{answer_problem, correlation_id, problem, signed, signed_write};
use super::icom::participant;
use super::Sim;
use crate::domain::risk::{Counters, Signals, Windowed};
use crate::rail::spi::fraud::{list_response, marker_response, FraudMarker, FRAUD_TYPES};
use crate::rail::spi::message::Ispb;

/// One mark, by whom, under which request.
#[derive(Debug, Clone)]
struct Held {
    marker: FraudMarker,
    by: String,
    request_id: Option<String>,
}

/// The DICT's fraud marks.
#[derive(Debug, Default)]
pub struct Marks {
    marks: Vec<Held>,
}

impl Marks {
    /// Marks `m` for participant `by`; the same `RequestId` again answers the same mark.
    pub fn create(
        &mut self,
        by: &str,
        mut m: FraudMarker,
        request_id: Option<String>,
        now: DateTime<Utc>,
    ) -> FraudMarker {
        if let Some(h) =
            self.marks.iter().find(|h| h.by == by && request_id.is_some() && h.request_id == request_id)
        {
            return h.marker.clone();
        }
        m.id = uuid::Uuid::new_v4().to_string();
        m.status = "REGISTERED".into();
        m.created = now;
        m.modified = now;
        self.marks.push(Held { marker: m.clone(), by: by.to_owned(), request_id });
        m
    }

    /// Cancels a mark of `by`'s.
    pub fn cancel(
        &mut self,
        by: &str,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<FraudMarker, crate::rail::spi::dict::Problem> {
        let Some(h) = self.marks.iter_mut().find(|h| h.marker.id == id) else {
            return Err(problem(404, "NotFound", "no such fraud marker"));
        };
        if h.by != by {
            return Err(problem(403, "Forbidden", "a mark is cancelled by the participant that made it"));
        }
        if h.marker.status != "CANCELLED" {
            h.marker.status = "CANCELLED".into();
            h.marker.modified = now;
        }
        Ok(h.marker.clone())
    }

    /// A person's marks (and of one of its keys, when named).
    pub fn of(&self, tax_id: &str, key: Option<&str>) -> Vec<FraudMarker> {
        self.marks
            .iter()
            .map(|h| &h.marker)
            .filter(|m| m.tax_id == tax_id && key.is_none_or(|k| m.key.as_deref() == Some(k)))
            .cloned()
            .collect()
    }

    fn counters(&self, keep: impl Fn(&FraudMarker) -> bool, now: DateTime<Utc>) -> Counters {
        let mut c = Counters::default();
        for m in self.marks.iter().map(|h| &h.marker).filter(|m| m.status == "REGISTERED" && keep(m)) {
            let w = match m.fraud_type.as_str() {
                "APPLICATION_FRAUD" => &mut c.application_frauds,
                "MULE_ACCOUNT" => &mut c.mule_accounts,
                "SCAMMER_ACCOUNT" => &mut c.scammer_accounts,
                _ => &mut c.other_frauds,
            };
            let age = now - m.created;
            let count = |w: &mut Windowed| {
                w.m60 += u32::from(age <= chrono::Duration::days(5 * 365));
                w.m12 += u32::from(age <= chrono::Duration::days(365));
                w.d90 += u32::from(age <= chrono::Duration::days(90));
            };
            count(w);
        }
        c
    }

    /// The counters of a key and of its owner.
    pub fn signals(&self, key: &str, owner: &str, now: DateTime<Utc>) -> Signals {
        Signals {
            key: self.counters(|m| m.key.as_deref() == Some(key), now),
            owner: self.counters(|m| m.tax_id == owner, now),
        }
    }
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v2/fraud-markers/", web::post().to(create))
        .route("/api/v2/fraud-markers/", web::get().to(list))
        .route("/api/v2/fraud-markers/{id}/cancel", web::post().to(cancel));
}

async fn create(req: HttpRequest, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match signed_write(&req, &sim, &body) {
        Ok(w) => w,
        Err(answer) => return *answer,
    };
    if doc.root.text_at(&["Participant"]).as_deref().map(str::trim) != Some(from.as_str()) {
        return answer_problem(&problem(400, "BadRequest", "Participant must be the caller"));
    }
    let asked = match doc.root.child("FraudMarker").map(FraudMarker::read) {
        Some(Ok(m)) => m,
        Some(Err(e)) => return answer_problem(&problem(400, "FraudMarkerInvalid", &e)),
        None => return answer_problem(&problem(400, "FraudMarkerInvalid", "FraudMarker is missing")),
    };
    let request_id = doc.root.text_at(&["RequestId"]).map(|t| t.trim().to_owned());
    let now = sim.now();
    let m = sim.fraud.lock().unwrap_or_else(|p| p.into_inner()).create(from.as_str(), asked, request_id, now);
    signed(
        &sim,
        actix_web::http::StatusCode::CREATED,
        &marker_response("CreateFraudMarkerResponse", &m, &correlation_id(), now),
        false,
    )
}

async fn cancel(req: HttpRequest, id: web::Path<String>, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match signed_write(&req, &sim, &body) {
        Ok(w) => w,
        Err(answer) => return *answer,
    };
    if doc.root.text_at(&["FraudMarkerId"]).as_deref().map(str::trim) != Some(id.as_str()) {
        return answer_problem(&problem(400, "BadRequest", "FraudMarkerId must be the path's"));
    }
    let now = sim.now();
    match sim.fraud.lock().unwrap_or_else(|p| p.into_inner()).cancel(from.as_str(), &id, now) {
        Ok(m) => signed(
            &sim,
            actix_web::http::StatusCode::OK,
            &marker_response("CancelFraudMarkerResponse", &m, &correlation_id(), now),
            false,
        ),
        Err(p) => answer_problem(&p),
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListQuery {
    tax_id_number: String,
    key: Option<String>,
}

async fn list(req: HttpRequest, q: web::Query<ListQuery>, sim: web::Data<Sim>) -> HttpResponse {
    if let Err(r) = participant(&req, &sim, None, true) {
        return r.response();
    }
    let marks = sim.fraud.lock().unwrap_or_else(|p| p.into_inner()).of(&q.tax_id_number, q.key.as_deref());
    signed(&sim, actix_web::http::StatusCode::OK, &list_response(&marks, &correlation_id(), sim.now()), false)
}

/// `POST /sim/fraud-markers` `{taxId, key?, fraudType, participant?}`: a participant (the
/// virtual receiver unless named) marks a person or a key.
pub async fn control_mark(body: web::Json<Value>, sim: web::Data<Sim>) -> HttpResponse {
    let b = body.into_inner();
    let Some(tax_id) = b["taxId"].as_str() else {
        return HttpResponse::BadRequest().json(json!({"error": "taxId is required"}));
    };
    let Some(fraud_type) = b["fraudType"].as_str().filter(|t| FRAUD_TYPES.contains(t)) else {
        return HttpResponse::BadRequest().json(json!({"error": "fraudType is a fraud type"}));
    };
    let by = b["participant"].as_str().unwrap_or(super::VIRTUAL_RECEIVER);
    if Ispb::parse(by).is_none() {
        return HttpResponse::BadRequest().json(json!({"error": "participant is an ISPB"}));
    }
    let asked = FraudMarker {
        tax_id: tax_id.to_owned(),
        key: b["key"].as_str().map(str::to_owned),
        fraud_type: fraud_type.to_owned(),
        id: String::new(),
        status: String::new(),
        created: DateTime::<Utc>::UNIX_EPOCH,
        modified: DateTime::<Utc>::UNIX_EPOCH,
    };
    let m = sim.fraud.lock().unwrap_or_else(|p| p.into_inner()).create(by, asked, None, sim.now());
    HttpResponse::Created().json(json!({"id": m.id, "status": m.status}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn mark(fraud_type: &str, key: Option<&str>) -> FraudMarker {
        FraudMarker {
            tax_id: "52998224725".into(),
            key: key.map(str::to_owned),
            fraud_type: fraud_type.into(),
            id: String::new(),
            status: String::new(),
            created: DateTime::<Utc>::UNIX_EPOCH,
            modified: DateTime::<Utc>::UNIX_EPOCH,
        }
    }

    #[test]
    fn marks_count_in_their_windows_once_per_request_and_not_once_cancelled() {
        let mut marks = Marks::default();
        let t0 = at("2026-01-01T00:00:00Z");
        let a = marks.create("1234ABCD", mark("MULE_ACCOUNT", Some("k@x.com")), Some("r1".into()), t0);
        let again = marks.create("1234ABCD", mark("MULE_ACCOUNT", Some("k@x.com")), Some("r1".into()), t0);
        assert_eq!(a.id, again.id, "the same request is the same mark");
        marks.create("99999A04", mark("OTHER", None), None, t0);
        let s = marks.signals("k@x.com", "52998224725", t0 + chrono::Duration::days(100));
        assert_eq!(s.key.mule_accounts, Windowed { d90: 0, m12: 1, m60: 1 });
        assert_eq!((s.owner.mule_accounts.m12, s.owner.other_frauds.m12), (1, 1));
        assert_eq!(marks.cancel("99999A04", &a.id, t0).unwrap_err().kind, "Forbidden");
        marks.cancel("1234ABCD", &a.id, t0).unwrap();
        let s = marks.signals("k@x.com", "52998224725", t0);
        assert_eq!((s.key.mule_accounts.m12, s.owner.other_frauds.d90), (0, 1));
    }
}
