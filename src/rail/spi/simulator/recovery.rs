//! The simulator's DICT of MED 2.0 (API 2.12.1): funds recoveries, the tracking graph it
//! draws from the payments the SPI settled, the infraction reports it opens against each
//! institution the money reached, the refund requests it makes once the creator asks, and
//! the event notifications it keeps for the creator.
//!
//! The flow, as the simulator plays it (the automated flow; the interactive one is
//! deprecated in 2.12.1):
//! 1. The payer's participant creates a recovery for a settled payment it sent. The DICT
//!    traces the money (breadth first: payments out of the receiving account settled within
//!    the hop window, of at least the minimum amount, up to the maximum hops and
//!    transactions), and opens one infraction report per traced payment against its receiving
//!    participant, with the amount to block (the payment's, capped at the root's). The
//!    recovery is `AWAITING_ANALYSIS` at once.
//! 2. Each counterparty acknowledges and closes its report (`AGREED` or `DISAGREED`; an
//!    `AGREED` close marks the payment's receiver, its document and key, with the
//!    report's `FraudType`, and the report names the mark). A
//!    report against a virtual participant is closed `DISAGREED` at once (it holds nothing).
//!    Once every report is closed the recovery is `ANALYSED` (event).
//! 3. The creator asks for the refund (`REFUNDING`). Refund requests are made for the agreed
//!    reports, deepest hop first: the SPI's return (pacs.004) goes back along the payment it
//!    returns, to that payment's payer's institution, so what the last hop returns reaches
//!    the hop before it, which returns it on with its own. The requests of a hop are made
//!    once those of every deeper hop are closed; when the root's are closed the recovery is
//!    `COMPLETED` (event).
//! 4. The creator may cancel it before it completes: open reports and refund requests are
//!    cancelled with it (event).

use std::collections::{HashMap, VecDeque};

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use super::core::{Payment, Stage};
use super::dict::{answer_problem, correlation_id, problem, signed, signed_write};
use super::icom::participant;
use super::Sim;
use crate::domain::money::Money;
use crate::rail::spi::dict::{Problem, Refund};
use crate::rail::spi::fraud::FRAUD_TYPES;
use crate::rail::spi::message::Ispb;
use crate::rail::spi::recovery::{
    events_response, list_reports_response, recovery_response, report_response, EventNotification,
    FundsRecovery, GraphAccount, GraphParameters, GraphTransaction, InfractionReport, TrackingGraph,
    LIST_MAX,
};

/// One recovery: the record, its graph, and the hop of each traced payment.
#[derive(Debug, Clone)]
struct Held {
    recovery: FundsRecovery,
    graph: TrackingGraph,
    /// Each traced payment's hop (the root is 1).
    hops: HashMap<String, u32>,
    /// The hop whose refund requests are open (none before the refund, 0 after the last).
    refunding_hop: Option<u32>,
}

/// The DICT's recoveries, reports and events.
#[derive(Debug, Default)]
pub struct Book {
    recoveries: Vec<Held>,
    reports: Vec<InfractionReport>,
    events: Vec<EventNotification>,
}

/// What the DICT traces: the payments it settled.
pub trait Settled {
    fn payment(&self, id: &str) -> Option<&Payment>;
    /// Settled payments (not returns) out of account `number` at `ispb`.
    fn out_of(&self, ispb: &str, number: &str) -> Vec<Payment>;
}

impl Settled for super::core::Engine {
    fn payment(&self, id: &str) -> Option<&Payment> {
        super::core::Engine::payment(self, id)
    }

    fn out_of(&self, ispb: &str, number: &str) -> Vec<Payment> {
        self.payments()
            .filter(|p| {
                !p.is_return && p.stage == Stage::Settled && p.payer == ispb && p.debtor_account == number
            })
            .cloned()
            .collect()
    }
}

/// Traces the money from `root` (settled, not a return) as `p` allows: breadth first.
pub fn trace(
    settled: &dyn Settled,
    root: &Payment,
    p: &GraphParameters,
    recovery_id: &str,
    now: DateTime<Utc>,
) -> (TrackingGraph, HashMap<String, u32>) {
    let root_cents = u64::try_from(root.cents).unwrap_or(0);
    let mut accounts: Vec<(String, String)> = Vec::new();
    let mut account_id = |ispb: &str, number: &str| -> u32 {
        let at = accounts.iter().position(|(i, n)| i == ispb && n == number).unwrap_or_else(|| {
            accounts.push((ispb.to_owned(), number.to_owned()));
            accounts.len() - 1
        });
        u32::try_from(at + 1).unwrap_or(u32::MAX)
    };
    let money = |cents: i128| Money::from_cents(u64::try_from(cents).unwrap_or(0)).unwrap_or(Money::ZERO);
    let mut transactions = Vec::new();
    let mut hops = HashMap::new();
    let mut queue = VecDeque::from([(root.clone(), 1u32)]);
    while let Some((tx, hop)) = queue.pop_front() {
        if transactions.len() >= p.max_transactions as usize {
            break;
        }
        let settled_at = tx.settled_at.unwrap_or(now);
        let cents = u64::try_from(tx.cents).unwrap_or(0);
        transactions.push(GraphTransaction {
            id: tx.id.clone(),
            debtor_account: account_id(&tx.payer, &tx.debtor_account),
            creditor_account: account_id(&tx.receiver, &tx.creditor_account),
            amount: money(tx.cents),
            refundable: money(i128::from(cents.min(root_cents))),
            settled: settled_at,
        });
        hops.insert(tx.id.clone(), hop);
        if hop >= p.max_hops {
            continue;
        }
        let window = settled_at + Duration::hours(i64::from(p.hop_window_hours));
        let mut next = settled.out_of(&tx.receiver, &tx.creditor_account);
        next.retain(|n| {
            n.settled_at.is_some_and(|at| at >= settled_at && at <= window)
                && u64::try_from(n.cents).unwrap_or(0) >= p.min_amount.cents()
                && !hops.contains_key(&n.id)
        });
        next.sort_by_key(|n| n.settled_at);
        queue.extend(next.into_iter().map(|n| (n, hop + 1)));
    }
    let accounts = accounts
        .into_iter()
        .enumerate()
        .map(|(i, (participant, _))| {
            let id = u32::try_from(i + 1).unwrap_or(u32::MAX);
            GraphAccount { id, owner_id: id, participant }
        })
        .collect();
    let graph = TrackingGraph {
        recovery_id: recovery_id.to_owned(),
        root_transaction_id: root.id.clone(),
        created: now,
        parameters: *p,
        accounts,
        transactions,
    };
    (graph, hops)
}

impl Book {
    fn event(&mut self, event: &str, r: &FundsRecovery, now: DateTime<Utc>) {
        let id = self.events.len() as u64 + 1;
        self.events.push(EventNotification {
            id,
            event: event.into(),
            entity_id: r.id.clone(),
            at: now,
            participant: r.reporter.clone(),
        });
    }

    /// Opens a recovery of `asked` for `by`, with the graph traced and the reports opened
    /// (`virtual_ispb` says which participants the simulator plays).
    pub fn create(
        &mut self,
        by: &str,
        mut asked: FundsRecovery,
        parameters: &GraphParameters,
        settled: &dyn Settled,
        is_virtual: &dyn Fn(&str) -> bool,
        now: DateTime<Utc>,
    ) -> Result<(FundsRecovery, TrackingGraph), Problem> {
        let root = settled
            .payment(&asked.root_transaction_id)
            .filter(|p| !p.is_return && p.stage == Stage::Settled)
            .ok_or_else(|| {
                problem(400, "FundsRecoveryTransactionNotIndexed", "no settled payment has this id")
            })?
            .clone();
        if root.payer != by {
            return Err(problem(
                400,
                "FundsRecoveryTransactionNotEligible",
                "a recovery is created by the payment's payer's participant",
            ));
        }
        if self.recoveries.iter().any(|h| h.recovery.root_transaction_id == asked.root_transaction_id) {
            return Err(problem(
                409,
                "FundsRecoveryForTransactionAlreadyExists",
                "this payment has a recovery already",
            ));
        }
        asked.id = uuid::Uuid::new_v4().to_string();
        asked.reporter = by.to_owned();
        asked.created = now;
        asked.modified = now;
        asked.status = "AWAITING_ANALYSIS".into();
        let (graph, hops) = trace(settled, &root, parameters, &asked.id, now);
        for t in &graph.transactions {
            let Some(to) = settled.payment(&t.id).map(|p| p.receiver.clone()) else { continue };
            let closed = is_virtual(&to);
            self.reports.push(InfractionReport {
                id: uuid::Uuid::new_v4().to_string(),
                transaction_id: t.id.clone(),
                situation_type: asked.situation_type.clone(),
                details: asked.details.clone(),
                recovery_id: Some(asked.id.clone()),
                status: if closed { "CLOSED" } else { "OPEN" }.into(),
                reporter: by.to_owned(),
                counterparty: to,
                analysis_result: closed.then(|| "DISAGREED".into()),
                analysis_details: closed
                    .then(|| "a participant the simulator plays holds nothing back".into()),
                fraud_marker_id: None,
                amount: Some(t.refundable),
                created: now,
                modified: now,
            });
        }
        self.recoveries.push(Held {
            recovery: asked.clone(),
            graph: graph.clone(),
            hops,
            refunding_hop: None,
        });
        self.settle_analysis(&asked.id, now);
        let r = self.find(&asked.id).map_or(asked, |h| h.recovery.clone());
        Ok((r, graph))
    }

    fn find(&self, id: &str) -> Option<&Held> {
        self.recoveries.iter().find(|h| h.recovery.id == id)
    }

    fn find_mut(&mut self, id: &str) -> Option<&mut Held> {
        self.recoveries.iter_mut().find(|h| h.recovery.id == id)
    }

    /// A recovery, as `by` may see it: its creator, or a counterparty of one of its reports.
    pub fn get(&self, by: &str, id: &str) -> Result<(FundsRecovery, TrackingGraph), Problem> {
        let h = self.find(id).ok_or_else(|| problem(404, "NotFound", "no such funds recovery"))?;
        let party = h.recovery.reporter == by
            || self.reports.iter().any(|r| r.recovery_id.as_deref() == Some(id) && r.counterparty == by);
        if !party {
            return Err(problem(404, "NotFound", "no such funds recovery"));
        }
        Ok((h.recovery.clone(), h.graph.clone()))
    }

    /// Once every report of the recovery is closed, it is `ANALYSED`.
    fn settle_analysis(&mut self, id: &str, now: DateTime<Utc>) {
        let all_closed = self
            .reports
            .iter()
            .filter(|r| r.recovery_id.as_deref() == Some(id))
            .all(|r| r.status == "CLOSED");
        let Some(h) = self.find_mut(id) else { return };
        if !all_closed || h.recovery.status != "AWAITING_ANALYSIS" {
            return;
        }
        h.recovery.status = "ANALYSED".into();
        h.recovery.modified = now;
        let r = h.recovery.clone();
        self.event("FUNDS_RECOVERY_ANALYSED", &r, now);
    }

    /// The reports `by` takes part in, as asked.
    pub fn reports_of(
        &self,
        by: &str,
        counterparty: Option<bool>,
        reporter: Option<bool>,
        statuses: &[String],
    ) -> Vec<InfractionReport> {
        let mut found: Vec<InfractionReport> = self
            .reports
            .iter()
            .filter(|r| counterparty.is_none_or(|c| (r.counterparty == by) == c))
            .filter(|r| reporter.is_none_or(|c| (r.reporter == by) == c))
            .filter(|r| r.counterparty == by || r.reporter == by)
            .filter(|r| statuses.is_empty() || statuses.contains(&r.status))
            .cloned()
            .collect();
        found.sort_by_key(|r| r.modified);
        found
    }

    fn report_mut(&mut self, by: &str, id: &str) -> Result<&mut InfractionReport, Problem> {
        let r = self
            .reports
            .iter_mut()
            .find(|r| r.id == id)
            .ok_or_else(|| problem(404, "NotFound", "no such infraction report"))?;
        if r.counterparty != by {
            return Err(problem(403, "Forbidden", "only the counterparty answers a report"));
        }
        Ok(r)
    }

    /// A report, as `by` may see it (its reporter or its counterparty).
    pub fn report(&self, by: &str, id: &str) -> Option<InfractionReport> {
        self.reports.iter().find(|r| r.id == id && (r.counterparty == by || r.reporter == by)).cloned()
    }

    /// The counterparty acknowledges a report (again: the same answer).
    pub fn acknowledge(
        &mut self,
        by: &str,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<InfractionReport, Problem> {
        let r = self.report_mut(by, id)?;
        match r.status.as_str() {
            "OPEN" => {
                r.status = "ACKNOWLEDGED".into();
                r.modified = now;
            }
            "ACKNOWLEDGED" => {}
            _ => return Err(problem(400, "InfractionReportInvalidStatus", "the report is not open")),
        }
        Ok(r.clone())
    }

    /// The counterparty closes an acknowledged report with its analysis (again, with the
    /// same analysis: the same answer).
    pub fn close(
        &mut self,
        by: &str,
        id: &str,
        result: &str,
        details: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<InfractionReport, Problem> {
        let r = self.report_mut(by, id)?;
        match r.status.as_str() {
            "ACKNOWLEDGED" => {
                r.status = "CLOSED".into();
                r.analysis_result = Some(result.to_owned());
                r.analysis_details = details;
                r.modified = now;
            }
            "CLOSED" if r.analysis_result.as_deref() == Some(result) => return Ok(r.clone()),
            _ => return Err(problem(400, "InfractionReportInvalidStatus", "the report is not acknowledged")),
        }
        let (report, recovery) = (r.clone(), r.recovery_id.clone());
        if let Some(rid) = recovery {
            self.settle_analysis(&rid, now);
        }
        Ok(report)
    }

    /// The fraud mark the DICT made when report `id` closed agreed.
    pub fn marked(&mut self, id: &str, marker_id: &str) -> Option<InfractionReport> {
        let r = self.reports.iter_mut().find(|r| r.id == id)?;
        r.fraud_marker_id = Some(marker_id.to_owned());
        Some(r.clone())
    }

    /// The creator asks for the refund: the refund requests of the deepest agreed hop are made.
    pub fn refund(
        &mut self,
        by: &str,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<(FundsRecovery, Vec<Refund>), Problem> {
        let h = self.find(id).ok_or_else(|| problem(404, "NotFound", "no such funds recovery"))?;
        if h.recovery.reporter != by {
            return Err(problem(403, "Forbidden", "only the creator asks for the refund"));
        }
        match h.recovery.status.as_str() {
            "ANALYSED" => {}
            "REFUNDING" | "COMPLETED" => return Ok((h.recovery.clone(), Vec::new())),
            _ => return Err(problem(400, "FundsRecoveryOperationInvalid", "the recovery is not analysed")),
        }
        let deepest = self.agreed(id).iter().map(|(_, hop)| *hop).max();
        let h = self.find_mut(id).ok_or_else(|| problem(404, "NotFound", "no such funds recovery"))?;
        h.recovery.status = "REFUNDING".into();
        h.recovery.modified = now;
        let refunds = match deepest {
            Some(hop) => self.open_hop(id, hop, now),
            None => {
                self.complete(id, now);
                Vec::new()
            }
        };
        let r = self.find(id).map(|h| h.recovery.clone()).ok_or_else(|| problem(404, "NotFound", "gone"))?;
        Ok((r, refunds))
    }

    /// The agreed reports of a recovery, with the hop of each.
    fn agreed(&self, id: &str) -> Vec<(InfractionReport, u32)> {
        let Some(h) = self.find(id) else { return Vec::new() };
        self.reports
            .iter()
            .filter(|r| {
                r.recovery_id.as_deref() == Some(id) && r.analysis_result.as_deref() == Some("AGREED")
            })
            .map(|r| (r.clone(), h.hops.get(&r.transaction_id).copied().unwrap_or(1)))
            .collect()
    }

    fn open_hop(&mut self, id: &str, hop: u32, now: DateTime<Utc>) -> Vec<Refund> {
        let refunds: Vec<Refund> = self
            .agreed(id)
            .into_iter()
            .filter(|(_, h)| *h == hop)
            .map(|(r, _)| Refund {
                id: uuid::Uuid::new_v4().to_string(),
                transaction_id: r.transaction_id.clone(),
                reason: "FRAUD".into(),
                amount: r.amount.unwrap_or(Money::ZERO),
                details: r.details.clone(),
                status: "OPEN".into(),
                contested: r.counterparty.clone(),
                requesting: r.reporter.clone(),
                created: now,
                modified: now,
                analysis_result: None,
                analysis_details: None,
                refund_transaction_id: None,
                funds_recovery_id: Some(id.to_owned()),
            })
            .collect();
        if let Some(h) = self.find_mut(id) {
            h.refunding_hop = Some(hop);
        }
        refunds
    }

    fn complete(&mut self, id: &str, now: DateTime<Utc>) {
        let Some(h) = self.find_mut(id) else { return };
        h.recovery.status = "COMPLETED".into();
        h.recovery.modified = now;
        h.refunding_hop = Some(0);
        let r = h.recovery.clone();
        self.event("FUNDS_RECOVERY_COMPLETED", &r, now);
    }

    /// A refund request of recovery `id` was closed; `open` says whether any of its hop is
    /// still open. Once none is, the next hop's requests are made, or the recovery completes.
    pub fn refund_closed(&mut self, id: &str, open: bool, now: DateTime<Utc>) -> Vec<Refund> {
        let Some(hop) = self.find(id).and_then(|h| h.refunding_hop).filter(|h| *h > 0) else {
            return Vec::new();
        };
        if open {
            return Vec::new();
        }
        let next = self.agreed(id).iter().map(|(_, h)| *h).filter(|h| *h < hop).max();
        match next {
            Some(h) => self.open_hop(id, h, now),
            None => {
                self.complete(id, now);
                Vec::new()
            }
        }
    }

    /// The creator cancels a recovery that has not completed.
    pub fn cancel(&mut self, by: &str, id: &str, now: DateTime<Utc>) -> Result<FundsRecovery, Problem> {
        let h = self.find_mut(id).ok_or_else(|| problem(404, "NotFound", "no such funds recovery"))?;
        if h.recovery.reporter != by {
            return Err(problem(403, "Forbidden", "only the creator cancels a recovery"));
        }
        match h.recovery.status.as_str() {
            "COMPLETED" => {
                return Err(problem(400, "FundsRecoveryOperationInvalid", "the recovery completed"))
            }
            "CANCELLED" => return Ok(h.recovery.clone()),
            _ => {}
        }
        h.recovery.status = "CANCELLED".into();
        h.recovery.modified = now;
        let r = h.recovery.clone();
        for report in self.reports.iter_mut().filter(|x| x.recovery_id.as_deref() == Some(id)) {
            report.status = "CANCELLED".into();
            report.modified = now;
        }
        self.event("FUNDS_RECOVERY_CANCELLED", &r, now);
        Ok(r)
    }

    /// The creator updates a recovery's situation, details and contact while it is
    /// `CREATED`, `TRACKED` or `AWAITING_ANALYSIS`.
    pub fn update(
        &mut self,
        by: &str,
        id: &str,
        asked: &FundsRecovery,
        now: DateTime<Utc>,
    ) -> Result<FundsRecovery, Problem> {
        let h = self.find_mut(id).ok_or_else(|| problem(404, "NotFound", "no such funds recovery"))?;
        if h.recovery.reporter != by {
            return Err(problem(403, "Forbidden", "only the creator updates a recovery"));
        }
        if !crate::rail::spi::recovery::UPDATABLE.contains(&h.recovery.status.as_str()) {
            return Err(problem(
                400,
                "FundsRecoveryOperationInvalid",
                "the recovery can no longer be updated",
            ));
        }
        h.recovery.situation_type = asked.situation_type.clone();
        h.recovery.details = asked.details.clone();
        h.recovery.email = asked.email.clone();
        h.recovery.phone = asked.phone.clone();
        h.recovery.modified = now;
        Ok(h.recovery.clone())
    }

    /// The events of `by` after `cursor`, a page at most.
    pub fn events_of(&self, by: &str, cursor: u64) -> (Vec<EventNotification>, bool) {
        let mut found: Vec<EventNotification> =
            self.events.iter().filter(|e| e.id > cursor && e.participant == by).cloned().collect();
        let more = found.len() > LIST_MAX;
        found.truncate(LIST_MAX);
        (found, more)
    }

    /// The control route's view of a recovery.
    pub fn view(&self, id: &str) -> Option<serde_json::Value> {
        let h = self.find(id)?;
        let reports: Vec<_> = self
            .reports
            .iter()
            .filter(|r| r.recovery_id.as_deref() == Some(id))
            .map(|r| {
                json!({"id": r.id, "transactionId": r.transaction_id, "counterparty": r.counterparty,
                    "status": r.status, "analysisResult": r.analysis_result,
                    "amount": r.amount.map(|a| a.to_cents_string()),
                    "hop": h.hops.get(&r.transaction_id)})
            })
            .collect();
        Some(json!({"id": h.recovery.id, "status": h.recovery.status, "reporter": h.recovery.reporter,
            "rootTransactionId": h.recovery.root_transaction_id,
            "situationType": h.recovery.situation_type, "details": h.recovery.details,
            "transactions": h.graph.transactions.len(), "reports": reports}))
    }
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v2/funds-recoveries/", web::post().to(create))
        .route("/api/v2/funds-recoveries/{id}", web::get().to(get))
        .route("/api/v2/funds-recoveries/{id}", web::put().to(update))
        .route("/api/v2/funds-recoveries/{id}/tracking-graph", web::get().to(graph))
        .route("/api/v2/funds-recoveries/{id}/refund", web::post().to(refund))
        .route("/api/v2/funds-recoveries/{id}/refunds", web::get().to(refunds))
        .route("/api/v2/funds-recoveries/{id}/cancel", web::post().to(cancel))
        .route("/api/v2/infraction-reports/", web::get().to(list_reports))
        .route("/api/v2/infraction-reports/{id}", web::get().to(get_report))
        .route("/api/v2/infraction-reports/{id}/acknowledge", web::post().to(acknowledge))
        .route("/api/v2/infraction-reports/{id}/close", web::post().to(close))
        .route("/api/v2/event-notifications", web::get().to(events));
}

fn ok(sim: &Sim, status: actix_web::http::StatusCode, body: &str) -> HttpResponse {
    signed(sim, status, body, false)
}

/// The caller of a write whose `Participant` (and `FundsRecoveryId`, when named) must be its own.
fn write_of(
    req: &HttpRequest,
    sim: &Sim,
    body: &Bytes,
    id: Option<(&str, &str)>,
) -> Result<(Ispb, crate::rail::spi::xml::Document), Box<HttpResponse>> {
    let (from, doc) = signed_write(req, sim, body)?;
    let text = |n: &str| doc.root.text_at(&[n]).map(|t| t.trim().to_owned());
    if text("Participant").as_deref() != Some(from.as_str()) {
        return Err(Box::new(answer_problem(&problem(400, "BadRequest", "Participant must be the caller"))));
    }
    if let Some((name, value)) = id {
        if text(name).as_deref() != Some(value) {
            return Err(Box::new(answer_problem(&problem(
                400,
                "BadRequest",
                &format!("{name} must be the path's"),
            ))));
        }
    }
    Ok((from, doc))
}

async fn create(req: HttpRequest, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match write_of(&req, &sim, &body, None) {
        Ok(w) => w,
        Err(a) => return *a,
    };
    let asked = match doc.root.child("FundsRecovery").map(|e| FundsRecovery::read(e, false)) {
        Some(Ok(r)) if r.situation_type != "UNKNOWN" => r,
        Some(Ok(_)) => {
            return answer_problem(&problem(400, "FundsRecoveryInvalid", "UNKNOWN is not a situation of 2.x"))
        }
        Some(Err(e)) => return answer_problem(&problem(400, "FundsRecoveryInvalid", &e)),
        None => return answer_problem(&problem(400, "FundsRecoveryInvalid", "FundsRecovery is missing")),
    };
    if asked.situation_type == "OTHER" && asked.details.is_none() {
        return answer_problem(&problem(400, "FundsRecoveryInvalid", "ReportDetails is required for OTHER"));
    }
    if asked.details.as_ref().is_some_and(|d| d.chars().count() > crate::rail::spi::recovery::DETAILS_LEN_MAX)
    {
        return answer_problem(&problem(400, "FundsRecoveryInvalid", "ReportDetails is longer than 2000"));
    }
    let parameters = match GraphParameters::read(doc.root.child("TrackingGraphParameters")) {
        Ok(p) => p,
        Err(e) => return answer_problem(&problem(400, "FundsRecoveryTrackingGraphParameterInvalid", &e)),
    };
    let now = sim.now();
    let made = {
        let engine = sim.engine.lock().unwrap_or_else(|p| p.into_inner());
        let is_virtual = |ispb: &str| Ispb::parse(ispb).is_none_or(|i| !sim.is_real(&i));
        sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).create(
            from.as_str(),
            asked,
            &parameters,
            &*engine,
            &is_virtual,
            now,
        )
    };
    match made {
        Ok((r, g)) => ok(
            &sim,
            actix_web::http::StatusCode::CREATED,
            &recovery_response("CreateFundsRecoveryResponse", &r, Some(&g), &correlation_id(), now),
        ),
        Err(p) => answer_problem(&p),
    }
}

fn reader(req: &HttpRequest, sim: &Sim) -> Result<Ispb, Box<HttpResponse>> {
    let from = participant(req, sim, None, true).map_err(|r| Box::new(r.response()))?;
    let asked = req.headers().get("pi-requestingparticipant").and_then(|v| v.to_str().ok());
    if asked != Some(from.as_str()) {
        return Err(Box::new(answer_problem(&problem(
            403,
            "Forbidden",
            "PI-RequestingParticipant is not the caller",
        ))));
    }
    Ok(from)
}

async fn get(req: HttpRequest, id: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match reader(&req, &sim) {
        Ok(f) => f,
        Err(a) => return *a,
    };
    match sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).get(from.as_str(), &id) {
        Ok((r, _)) => ok(
            &sim,
            actix_web::http::StatusCode::OK,
            &recovery_response("GetFundsRecoveryResponse", &r, None, &correlation_id(), sim.now()),
        ),
        Err(p) => answer_problem(&p),
    }
}

/// `PUT /funds-recoveries/{id}`: the creator's update (`UpdateFundsRecoveryRequest`).
async fn update(req: HttpRequest, id: web::Path<String>, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match write_of(&req, &sim, &body, Some(("FundsRecoveryId", &id))) {
        Ok(w) => w,
        Err(a) => return *a,
    };
    let text = |n: &str| doc.root.text_at(&[n]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    let contact = |n: &str| {
        doc.root.text_at(&["ContactInformation", n]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
    };
    let now = sim.now();
    let mut book = sim.recovery.lock().unwrap_or_else(|p| p.into_inner());
    let Ok((current, _)) = book.get(from.as_str(), &id) else {
        return answer_problem(&problem(404, "NotFound", "no such funds recovery"));
    };
    // Fields the request leaves out keep their value.
    let asked = FundsRecovery {
        situation_type: text("SituationType").unwrap_or(current.situation_type.clone()),
        details: text("ReportDetails").or(current.details.clone()),
        email: contact("Email").unwrap_or(current.email.clone()),
        phone: contact("Phone").unwrap_or(current.phone.clone()),
        ..current
    };
    if !crate::domain::recovery::SITUATIONS.contains(&asked.situation_type.as_str())
        || asked.situation_type == "UNKNOWN"
    {
        return answer_problem(&problem(
            400,
            "FundsRecoveryInvalid",
            "SituationType is not a situation of 2.x",
        ));
    }
    if asked.details.as_ref().is_some_and(|d| d.chars().count() > crate::rail::spi::recovery::DETAILS_LEN_MAX)
    {
        return answer_problem(&problem(400, "FundsRecoveryInvalid", "ReportDetails is too long"));
    }
    match book.update(from.as_str(), &id, &asked, now) {
        Ok(r) => ok(
            &sim,
            actix_web::http::StatusCode::OK,
            &recovery_response("UpdateFundsRecoveryResponse", &r, None, &correlation_id(), now),
        ),
        Err(p) => answer_problem(&p),
    }
}

async fn graph(req: HttpRequest, id: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match reader(&req, &sim) {
        Ok(f) => f,
        Err(a) => return *a,
    };
    match sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).get(from.as_str(), &id) {
        Ok((_, g)) => ok(
            &sim,
            actix_web::http::StatusCode::OK,
            &format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><GetTrackingGraphResponse><ResponseTime>{}</ResponseTime><CorrelationId>{}</CorrelationId>{}</GetTrackingGraphResponse>",
                crate::rail::spi::dict::stamp(sim.now()),
                correlation_id(),
                g.write()
            ),
        ),
        Err(p) => answer_problem(&p),
    }
}

async fn refund(req: HttpRequest, id: web::Path<String>, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, _) = match write_of(&req, &sim, &body, Some(("FundsRecoveryId", &id))) {
        Ok(w) => w,
        Err(a) => return *a,
    };
    let now = sim.now();
    let made = sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).refund(from.as_str(), &id, now);
    match made {
        Ok((r, refunds)) => {
            sim.refunds.lock().unwrap_or_else(|p| p.into_inner()).extend(refunds);
            ok(
                &sim,
                actix_web::http::StatusCode::OK,
                &recovery_response("RefundFundsRecoveryResponse", &r, None, &correlation_id(), now),
            )
        }
        Err(p) => answer_problem(&p),
    }
}

/// Called by the refund requests' close: moves the recovery the request belongs to on.
pub fn refund_closed(sim: &Sim, recovery_id: &str) {
    let open = sim
        .refunds
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|r| r.funds_recovery_id.as_deref() == Some(recovery_id) && r.status == "OPEN");
    let next =
        sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).refund_closed(recovery_id, open, sim.now());
    sim.refunds.lock().unwrap_or_else(|p| p.into_inner()).extend(next);
}

async fn refunds(req: HttpRequest, id: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match reader(&req, &sim) {
        Ok(f) => f,
        Err(a) => return *a,
    };
    let mine = sim
        .recovery
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(from.as_str(), &id)
        .is_ok_and(|(r, _)| r.reporter == from.as_str());
    if !mine {
        return answer_problem(&problem(403, "Forbidden", "only the creator lists a recovery's refunds"));
    }
    let found: Vec<Refund> = sim
        .refunds
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|r| r.funds_recovery_id.as_deref() == Some(id.as_str()))
        .cloned()
        .collect();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListFundsRecoveryRefundsResponse><ResponseTime>{}</ResponseTime><CorrelationId>{}</CorrelationId><Refunds>",
        crate::rail::spi::dict::stamp(sim.now()),
        correlation_id()
    );
    for r in &found {
        out.push_str(&r.write());
    }
    out.push_str("</Refunds></ListFundsRecoveryRefundsResponse>");
    ok(&sim, actix_web::http::StatusCode::OK, &out)
}

async fn cancel(req: HttpRequest, id: web::Path<String>, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, _) = match write_of(&req, &sim, &body, Some(("FundsRecoveryId", &id))) {
        Ok(w) => w,
        Err(a) => return *a,
    };
    let now = sim.now();
    let done = sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).cancel(from.as_str(), &id, now);
    match done {
        Ok(r) => {
            for refund in sim.refunds.lock().unwrap_or_else(|p| p.into_inner()).iter_mut() {
                if refund.funds_recovery_id.as_deref() == Some(id.as_str()) && refund.status == "OPEN" {
                    refund.status = "CANCELLED".into();
                    refund.modified = now;
                }
            }
            ok(
                &sim,
                actix_web::http::StatusCode::OK,
                &recovery_response("CancelFundsRecoveryResponse", &r, None, &correlation_id(), now),
            )
        }
        Err(p) => answer_problem(&p),
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ReportsQuery {
    participant: String,
    is_counterparty: Option<bool>,
    is_reporter: Option<bool>,
    status: Option<String>,
    limit: Option<usize>,
}

async fn list_reports(req: HttpRequest, q: web::Query<ReportsQuery>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match super::dict::lister(&req, &sim, &q.participant) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let statuses: Vec<String> =
        q.status.as_deref().map(|s| s.split(',').map(str::to_owned).collect()).unwrap_or_default();
    let mut found = sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).reports_of(
        from.as_str(),
        q.is_counterparty,
        q.is_reporter,
        &statuses,
    );
    let limit = q.limit.unwrap_or(20).min(LIST_MAX);
    let more = found.len() > limit;
    found.truncate(limit);
    ok(
        &sim,
        actix_web::http::StatusCode::OK,
        &list_reports_response(&found, more, &correlation_id(), sim.now()),
    )
}

/// `GET /infraction-reports/{id}`: a report, to its reporter or its counterparty.
async fn get_report(req: HttpRequest, id: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match reader(&req, &sim) {
        Ok(f) => f,
        Err(a) => return *a,
    };
    let found = sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).report(from.as_str(), &id);
    match found {
        Some(r) => ok(
            &sim,
            actix_web::http::StatusCode::OK,
            &report_response("GetInfractionReportResponse", &r, &correlation_id(), sim.now()),
        ),
        None => answer_problem(&problem(404, "NotFound", "no such infraction report")),
    }
}

async fn acknowledge(
    req: HttpRequest,
    id: web::Path<String>,
    body: Bytes,
    sim: web::Data<Sim>,
) -> HttpResponse {
    let (from, _) = match write_of(&req, &sim, &body, Some(("InfractionReportId", &id))) {
        Ok(w) => w,
        Err(a) => return *a,
    };
    let now = sim.now();
    match sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).acknowledge(from.as_str(), &id, now) {
        Ok(r) => ok(
            &sim,
            actix_web::http::StatusCode::OK,
            &report_response("AcknowledgeInfractionReportResponse", &r, &correlation_id(), now),
        ),
        Err(p) => answer_problem(&p),
    }
}

async fn close(req: HttpRequest, id: web::Path<String>, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let (from, doc) = match write_of(&req, &sim, &body, Some(("InfractionReportId", &id))) {
        Ok(w) => w,
        Err(a) => return *a,
    };
    let text = |n: &str| doc.root.text_at(&[n]).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    let result = text("AnalysisResult").unwrap_or_default();
    match result.as_str() {
        "AGREED" if !text("FraudType").is_some_and(|t| FRAUD_TYPES.contains(&t.as_str())) => {
            return answer_problem(&problem(400, "BadRequest", "AGREED requires a FraudType of API 2.x"))
        }
        "AGREED" | "DISAGREED" => {}
        _ => return answer_problem(&problem(400, "BadRequest", "AnalysisResult is AGREED or DISAGREED")),
    }
    let now = sim.now();
    let done = sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).close(
        from.as_str(),
        &id,
        &result,
        text("AnalysisDetails"),
        now,
    );
    match done {
        Ok(r) => {
            let fraud_type = text("FraudType").unwrap_or_default();
            let r = if result == "AGREED" && r.fraud_marker_id.is_none() {
                mark_agreed(&sim, from.as_str(), r, &fraud_type, now)
            } else {
                r
            };
            if let Some(rid) = &r.recovery_id {
                virtual_reporter_refunds(&sim, rid);
            }
            ok(
                &sim,
                actix_web::http::StatusCode::OK,
                &report_response("CloseInfractionReportResponse", &r, &correlation_id(), now),
            )
        }
        Err(p) => answer_problem(&p),
    }
}

/// A report closed `AGREED` makes a fraud mark of its `FraudType` on the payment's receiver
/// (its CPF or CNPJ, and the key it was paid to), as the DICT does (API 2.12.1,
/// `closeInfractionReport`); the report names the mark (`FraudMarkerId`). The mark is the
/// closing participant's. A report whose payment the simulator did not settle marks nothing.
fn mark_agreed(
    sim: &Sim,
    by: &str,
    r: InfractionReport,
    fraud_type: &str,
    now: DateTime<Utc>,
) -> InfractionReport {
    let paid = sim
        .engine
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .payment(&r.transaction_id)
        .map(|p| (p.creditor_document.clone(), p.creditor_key.clone()));
    let Some((tax_id, key)) = paid.filter(|(d, _)| !d.is_empty()) else { return r };
    let marker = crate::rail::spi::fraud::FraudMarker {
        tax_id,
        key,
        fraud_type: fraud_type.to_owned(),
        id: String::new(),
        status: String::new(),
        created: now,
        modified: now,
    };
    let made = sim.fraud.lock().unwrap_or_else(|p| p.into_inner()).create(
        by,
        marker,
        Some(format!("infraction-report:{}", r.id)),
        now,
    );
    sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).marked(&r.id, &made.id).unwrap_or(r)
}

/// A virtual participant that created a recovery asks for its refund as soon as it is
/// analysed (the simulator plays the payer's institution).
fn virtual_reporter_refunds(sim: &Sim, recovery_id: &str) {
    let now = sim.now();
    let mut book = sim.recovery.lock().unwrap_or_else(|p| p.into_inner());
    let Some(reporter) = book.find(recovery_id).map(|h| h.recovery.reporter.clone()) else { return };
    if Ispb::parse(&reporter).is_some_and(|i| sim.is_real(&i)) {
        return;
    }
    if let Ok((_, refunds)) = book.refund(&reporter, recovery_id, now) {
        drop(book);
        sim.refunds.lock().unwrap_or_else(|p| p.into_inner()).extend(refunds);
    }
}

/// `POST /sim/funds-recoveries` `{endToEndId, situationType?}`: the payer's institution of a
/// settled payment from a virtual participant opens a funds recovery of it (as a real one
/// would through the DICT), and asks for its refund once it is analysed. Answers the
/// recovery's `{id, status}`.
pub async fn control_create(body: web::Json<serde_json::Value>, sim: web::Data<Sim>) -> HttpResponse {
    let b = body.into_inner();
    let Some(e2e) = b["endToEndId"].as_str() else {
        return HttpResponse::BadRequest().json(json!({"error": "endToEndId is required"}));
    };
    let situation = b["situationType"].as_str().unwrap_or("SCAM");
    let payer = sim.engine.lock().unwrap_or_else(|p| p.into_inner()).payment(e2e).map(|p| p.payer.clone());
    let Some(payer) = payer.filter(|p| Ispb::parse(p).is_some_and(|i| !sim.is_real(&i))) else {
        return HttpResponse::BadRequest().json(json!({"error": "not a payment of a virtual participant"}));
    };
    let now = sim.now();
    let asked = FundsRecovery {
        id: String::new(),
        root_transaction_id: e2e.to_owned(),
        situation_type: situation.to_owned(),
        details: Some("opened by the simulator's control routes".into()),
        email: "fraude@spi-sim.pixgw".into(),
        phone: "+5561988887777".into(),
        status: String::new(),
        reporter: String::new(),
        created: now,
        modified: now,
    };
    let made = {
        let engine = sim.engine.lock().unwrap_or_else(|p| p.into_inner());
        let is_virtual = |ispb: &str| Ispb::parse(ispb).is_none_or(|i| !sim.is_real(&i));
        sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).create(
            &payer,
            asked,
            &crate::rail::spi::recovery::GRAPH_MAX,
            &*engine,
            &is_virtual,
            now,
        )
    };
    match made {
        Ok((r, _)) => {
            virtual_reporter_refunds(&sim, &r.id);
            HttpResponse::Created().json(json!({"id": r.id, "status": r.status}))
        }
        Err(p) => HttpResponse::BadRequest().json(json!({"error": p.kind, "title": p.title})),
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct EventsQuery {
    participant: String,
    cursor: Option<String>,
}

async fn events(req: HttpRequest, q: web::Query<EventsQuery>, sim: web::Data<Sim>) -> HttpResponse {
    let from = match super::dict::lister(&req, &sim, &q.participant) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    let Ok(cursor) = q.cursor.as_deref().map_or(Ok(0), str::parse::<u64>) else {
        return answer_problem(&problem(400, "BadRequest", "Cursor is not one this DICT gave"));
    };
    let (found, more) =
        sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).events_of(from.as_str(), cursor);
    let next = found.last().map_or(cursor, |e| e.id).to_string();
    ok(
        &sim,
        actix_web::http::StatusCode::OK,
        &events_response(&found, &next, more, &correlation_id(), sim.now()),
    )
}

/// `GET /sim/funds-recoveries/{id}`: a recovery, its reports and their hops.
pub async fn control_view(id: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    match sim.recovery.lock().unwrap_or_else(|p| p.into_inner()).view(&id) {
        Some(v) => HttpResponse::Ok().json(v),
        None => HttpResponse::NotFound().json(json!({"error": "no such funds recovery"})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Paid(Vec<Payment>);

    impl Settled for Paid {
        fn payment(&self, id: &str) -> Option<&Payment> {
            self.0.iter().find(|p| p.id == id)
        }
        fn out_of(&self, ispb: &str, number: &str) -> Vec<Payment> {
            self.0.iter().filter(|p| p.payer == ispb && p.debtor_account == number).cloned().collect()
        }
    }

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-28T10:00:00Z").unwrap().with_timezone(&Utc)
            + Duration::minutes(minutes)
    }

    fn paid(id: &str, from: (&str, &str), to: (&str, &str), cents: i128, minute: i64) -> Payment {
        Payment {
            id: id.into(),
            original_end_to_end_id: id.into(),
            is_return: false,
            payer: from.0.into(),
            receiver: to.0.into(),
            cents,
            stage: Stage::Settled,
            reason: None,
            instrument: None,
            tx_id: None,
            debtor_account: from.1.into(),
            creditor_account: to.1.into(),
            creditor_document: "52998224725".into(),
            creditor_key: None,
            settled_at: Some(at(minute)),
            deadline: std::time::Instant::now(),
            forwarded: std::time::Instant::now(),
        }
    }

    fn recovery_of(root: &str) -> FundsRecovery {
        FundsRecovery {
            id: String::new(),
            root_transaction_id: root.into(),
            situation_type: "SCAM".into(),
            details: None,
            email: "a@b.br".into(),
            phone: "+5561988887777".into(),
            status: String::new(),
            reporter: String::new(),
            created: at(0),
            modified: at(0),
        }
    }

    /// A to B (500), B on to C (400, in the window) and to D (150, under the minimum), and
    /// C's earlier payment (before the money came: not traced).
    fn chain() -> Paid {
        Paid(vec![
            paid("E-root", ("AAAAAAAA", "1"), ("BBBBBBBB", "2"), 50_000, 0),
            paid("E-hop2", ("BBBBBBBB", "2"), ("CCCCCCCC", "3"), 40_000, 30),
            paid("E-small", ("BBBBBBBB", "2"), ("DDDDDDDD", "4"), 15_000, 31),
            paid("E-late", ("BBBBBBBB", "2"), ("CCCCCCCC", "3"), 30_000, 121),
            paid("E-before", ("BBBBBBBB", "2"), ("CCCCCCCC", "3"), 30_000, -5),
        ])
    }

    #[test]
    fn the_graph_follows_the_money_within_the_window_and_over_the_minimum() {
        let paid = chain();
        let (g, hops) = trace(&paid, &paid.0[0], &crate::rail::spi::recovery::GRAPH_MAX, "r", at(200));
        let ids: Vec<&str> = g.transactions.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["E-root", "E-hop2"]);
        assert_eq!((hops["E-root"], hops["E-hop2"]), (1, 2));
        assert_eq!(g.accounts.len(), 3, "A's, B's and C's accounts");
        assert_eq!(g.transactions[1].refundable, Money::parse_two_places("400.00").unwrap());
    }

    #[test]
    fn refunds_are_asked_deepest_hop_first_and_the_recovery_completes_after_the_root() {
        let paid = chain();
        let mut book = Book::default();
        let real = |_: &str| false;
        let (r, _) = book
            .create(
                "AAAAAAAA",
                recovery_of("E-root"),
                &crate::rail::spi::recovery::GRAPH_MAX,
                &paid,
                &real,
                at(1),
            )
            .unwrap();
        assert_eq!(r.status, "AWAITING_ANALYSIS");
        assert_eq!(
            book.create(
                "AAAAAAAA",
                recovery_of("E-root"),
                &crate::rail::spi::recovery::GRAPH_MAX,
                &paid,
                &real,
                at(1)
            )
            .unwrap_err()
            .kind,
            "FundsRecoveryForTransactionAlreadyExists"
        );
        assert_eq!(book.refund("AAAAAAAA", &r.id, at(2)).unwrap_err().kind, "FundsRecoveryOperationInvalid");
        for who in ["BBBBBBBB", "CCCCCCCC"] {
            let report = book.reports_of(who, Some(true), None, &[]).remove(0);
            assert_eq!(
                book.close(who, &report.id, "AGREED", None, at(2)).unwrap_err().kind,
                "InfractionReportInvalidStatus"
            );
            book.acknowledge(who, &report.id, at(2)).unwrap();
            assert_eq!(book.acknowledge("AAAAAAAA", &report.id, at(2)).unwrap_err().kind, "Forbidden");
            book.close(who, &report.id, "AGREED", None, at(3)).unwrap();
        }
        assert_eq!(book.get("AAAAAAAA", &r.id).unwrap().0.status, "ANALYSED");
        assert_eq!(book.events_of("AAAAAAAA", 0).0[0].event, "FUNDS_RECOVERY_ANALYSED");
        let (_, first) = book.refund("AAAAAAAA", &r.id, at(4)).unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].transaction_id.as_str(), first[0].contested.as_str()), ("E-hop2", "CCCCCCCC"));
        let second = book.refund_closed(&r.id, false, at(5));
        assert_eq!(
            (second[0].transaction_id.as_str(), second[0].amount.to_cents_string().as_str()),
            ("E-root", "500.00")
        );
        assert!(book.refund_closed(&r.id, false, at(6)).is_empty());
        assert_eq!(book.get("AAAAAAAA", &r.id).unwrap().0.status, "COMPLETED");
        let (events, _) = book.events_of("AAAAAAAA", 1);
        assert_eq!(events.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(), ["FUNDS_RECOVERY_COMPLETED"]);
        assert!(book.events_of("BBBBBBBB", 0).0.is_empty(), "events are the creator's");
    }

    #[test]
    fn a_report_against_a_virtual_participant_is_closed_at_once_and_a_payee_may_not_open_one() {
        let paid = chain();
        let mut book = Book::default();
        let virtual_c = |i: &str| i == "CCCCCCCC";
        assert_eq!(
            book.create(
                "BBBBBBBB",
                recovery_of("E-root"),
                &crate::rail::spi::recovery::GRAPH_MAX,
                &paid,
                &virtual_c,
                at(1)
            )
            .unwrap_err()
            .kind,
            "FundsRecoveryTransactionNotEligible"
        );
        let (r, _) = book
            .create(
                "AAAAAAAA",
                recovery_of("E-root"),
                &crate::rail::spi::recovery::GRAPH_MAX,
                &paid,
                &virtual_c,
                at(1),
            )
            .unwrap();
        let c = book.reports_of("CCCCCCCC", Some(true), None, &[]);
        assert_eq!((c[0].status.as_str(), c[0].analysis_result.as_deref()), ("CLOSED", Some("DISAGREED")));
        assert_eq!(book.cancel("AAAAAAAA", &r.id, at(2)).unwrap().status, "CANCELLED");
        assert_eq!(book.reports_of("BBBBBBBB", None, None, &[])[0].status, "CANCELLED");
    }
}
