//! The account side of MED 2.0 (docs/decisions.md "MED 2.0"), for both ends of a funds
//! recovery:
//! - the payer's: a client's contest of a Pix it sent ([`Contest`]), and the DICT's answers
//!   about its recovery ([`ObserveRecovery`]); money that comes back is a return of the
//!   payment, credited as any return, and the contest counts it in the same step;
//! - the receiving institution's: an infraction report opens the account's case (the money
//!   blocked, and what arrives later blocked too, up to the report's amount), the operator's
//!   analysis (or its deadline) answers it, and the DICT's refund request takes the blocked
//!   money back as a return.
//!
//! Every step is idempotent: the rail repeats what it is not sure was done, and the same
//! report, answer or request again changes nothing.

use actix::prelude::*;
use chrono::{DateTime, Duration, Utc};
use futures_util::future::BoxFuture;

use super::actor::AccountActor;
use super::messages::{CloseMed, CommandError, OpenMed, ReturnMed};
use super::registry::Registry;
use crate::domain::decide::{self, ContestRequest};
use crate::domain::med::{
    deadline_analysis, report_answer, Infraction, Med, ReportAnswer, REPORT_ANALYSIS_DAYS_MAX,
};
use crate::domain::money::Money;
use crate::domain::recovery::{Recovery, Seen};
use crate::rail::{RefundAnswer, RefundAsked, ReportAction, ReportSeen, Unavailable};

/// A client contests a Pix it sent.
#[derive(Message, Clone)]
#[rtype(result = "Result<Recovery, CommandError>")]
pub struct Contest(pub ContestRequest);

/// The client changed its contest, and the DICT took the change.
#[derive(Message, Clone)]
#[rtype(result = "Result<Recovery, CommandError>")]
pub struct AmendContest {
    pub id: u64,
    pub amendment: crate::domain::recovery::Amendment,
}

/// The DICT said this of a contest of the account.
#[derive(Message, Clone)]
#[rtype(result = "Result<Recovery, CommandError>")]
pub struct ObserveRecovery {
    pub id: u64,
    pub seen: Seen,
}

impl AccountActor {
    /// A contest as it is now: the actor's write in flight first, else storage's.
    fn contest_copy(&mut self, id: u64, ctx: &mut Context<Self>) -> Result<Option<Recovery>, CommandError> {
        let held = self.work().recoveries.in_flight().filter(|r| r.id == id).last().cloned();
        if held.is_some() {
            return Ok(held);
        }
        let r = self.deps.repo.recovery(self.account.id, id);
        self.read(r, ctx)
    }

    /// A contest the caller knows exists (its route read it, or the DICT named it).
    fn contest_held(&mut self, id: u64, ctx: &mut Context<Self>) -> Result<Recovery, CommandError> {
        self.contest_copy(id, ctx)?
            .ok_or_else(|| CommandError::Unavailable(crate::cause::Cause::msg(format!("no contest {id}"))))
    }

    /// The contest of a payment of the account, if any (in flight first).
    pub(super) fn contest_of(
        &mut self,
        end_to_end_id: &str,
        ctx: &mut Context<Self>,
    ) -> Result<Option<Recovery>, CommandError> {
        let held =
            self.work().recoveries.in_flight().filter(|r| r.end_to_end_id == end_to_end_id).last().cloned();
        if held.is_some() {
            return Ok(held);
        }
        let r = self.deps.repo.recovery_by_e2e(end_to_end_id);
        Ok(self.read(r, ctx)?.filter(|r| r.account_id == self.account.id.get()))
    }

    /// What has come back of the contested payment so far.
    fn returned_of(&mut self, r: &Recovery, ctx: &mut Context<Self>) -> Result<Money, CommandError> {
        Ok(self.transaction(r.transaction_id, ctx)?.map_or(r.returned, |t| t.refunded))
    }

    fn contest(&mut self, msg: Contest, ctx: &mut Context<Self>) -> Result<Recovery, CommandError> {
        self.view()?;
        let r = self.deps.repo.transactions_by_e2e(self.account.id, &msg.0.end_to_end_id);
        let mut found = self.read(r, ctx)?;
        found.retain(|t| t.account_id == self.account.id);
        // A payment the account made to itself has both sides under one id: the sent one.
        found.sort_by_key(|t| t.is_received());
        let original = match found.into_iter().next() {
            Some(t) => self.transaction(t.local_id, ctx)?,
            None => None,
        };
        let contested = self.contest_of(&msg.0.end_to_end_id, ctx)?.is_some();
        let mut ids = self.draw_ids(1, ctx)?;
        let now = self.now();
        match decide::contest(&self.view()?, msg.0, original, contested, now, &mut ids) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    fn observe_recovery(
        &mut self,
        msg: ObserveRecovery,
        ctx: &mut Context<Self>,
    ) -> Result<Recovery, CommandError> {
        self.view()?;
        let existing = self.contest_held(msg.id, ctx)?;
        let returned = self.returned_of(&existing, ctx)?;
        match decide::observe_recovery(&existing, &msg.seen, returned, self.now()) {
            Some(plan) => self.execute(plan, ctx),
            None => Ok(existing),
        }
    }

    fn amend_contest(
        &mut self,
        msg: AmendContest,
        ctx: &mut Context<Self>,
    ) -> Result<Recovery, CommandError> {
        self.view()?;
        let existing = self.contest_held(msg.id, ctx)?;
        match decide::amend_contest(&existing, &msg.amendment, self.now()) {
            Ok(plan) => self.execute(plan, ctx),
            Err(r) => Err(self.refused(r, ctx)),
        }
    }

    /// A return of a payment the account contested landed: the contest counts it (in the
    /// same turn of the actor as the credit).
    pub(super) fn count_return(
        &mut self,
        end_to_end_id: &str,
        ctx: &mut Context<Self>,
    ) -> Result<(), CommandError> {
        let Some(existing) = self.contest_of(end_to_end_id, ctx)? else { return Ok(()) };
        let returned = self.returned_of(&existing, ctx)?;
        let seen = Seen { dict_id: existing.dict_id.clone(), status: existing.status, traced: None };
        if let Some(plan) = decide::observe_recovery(&existing, &seen, returned, self.now()) {
            self.execute(plan, ctx)?;
        }
        Ok(())
    }
}

impl Handler<AmendContest> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Recovery, CommandError>>;

    fn handle(&mut self, msg: AmendContest, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.amend_contest(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<Contest> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Recovery, CommandError>>;

    fn handle(&mut self, msg: Contest, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.contest(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<ObserveRecovery> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Recovery, CommandError>>;

    fn handle(&mut self, msg: ObserveRecovery, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.observe_recovery(msg, ctx);
        self.reply_when_durable(reply)
    }
}

fn unavailable(e: impl std::fmt::Display) -> Unavailable {
    Unavailable(e.to_string())
}

/// What to tell the DICT of a case, as the pure rule says ([`report_answer`]); `None` when
/// the case is due and the rule must decide it first.
fn report_action(med: &Med, now: DateTime<Utc>) -> Option<ReportAction> {
    Some(match report_answer(med, now) {
        ReportAnswer::Agree { fraud_type, details } => {
            ReportAction::Close { agreed: true, fraud_type, details }
        }
        ReportAnswer::Disagree { details } => {
            ReportAction::Close { agreed: false, fraud_type: String::new(), details }
        }
        ReportAnswer::Wait => ReportAction::Wait,
        ReportAnswer::Due => return None,
    })
}

/// An infraction report against a payment of ours (see [`crate::rail::Inbound::report_seen`]).
pub(super) fn report_seen(
    registry: std::sync::Arc<Registry>,
    report: ReportSeen,
) -> BoxFuture<'static, Result<ReportAction, Unavailable>> {
    Box::pin(async move {
        let deps = registry.deps();
        let now = deps.clock.now();
        let Some(received) = deps.repo.received_by_id(&report.end_to_end_id).map_err(unavailable)? else {
            // Not a payment this gateway received: acknowledged, then disagreed.
            tracing::warn!(
                report = report.id,
                e2e = report.end_to_end_id,
                "an infraction report names no payment this gateway received"
            );
            return Ok(if report.acknowledged {
                ReportAction::Close {
                    agreed: false,
                    fraud_type: String::new(),
                    details: Some("no payment of this participant has this end-to-end id".into()),
                }
            } else {
                ReportAction::Acknowledge
            });
        };
        let actor = registry.get(received.account_id).map_err(unavailable)?;
        let open = OpenMed {
            end_to_end: report.end_to_end_id.clone(),
            cause: crate::domain::med::cause_of_situation(&report.situation).to_owned(),
            amount: report.amount.map(|a| a.min(received.value)),
            description: report.details.clone(),
            dict_refund_id: None,
            infraction: Some(Infraction {
                report_id: report.id.clone(),
                recovery_id: report.recovery_id.clone(),
                situation: report.situation.clone(),
                due_at: report.created + Duration::days(REPORT_ANALYSIS_DAYS_MAX),
                fraud_type: None,
                returned_at: None,
                evidence: Vec::new(),
            }),
        };
        let med = match actor.send(open).await.map_err(unavailable)? {
            Ok(m) => m,
            Err(CommandError::Refused(r)) => {
                tracing::warn!(report = report.id, refusal = ?r, "an infraction report's case could not be opened");
                return Ok(if report.acknowledged {
                    ReportAction::Close {
                        agreed: false,
                        fraud_type: String::new(),
                        details: Some(format!("{r:?}")),
                    }
                } else {
                    ReportAction::Acknowledge
                });
            }
            Err(e) => return Err(unavailable(e)),
        };
        if !report.acknowledged {
            if med.created_at == med.updated_at {
                tracing::info!(med = med.id, report = report.id, blocked = %med.blocked, "an infraction report opened a case");
            }
            return Ok(ReportAction::Acknowledge);
        }
        if let Some(a) = report_action(&med, now) {
            return Ok(a);
        }
        let (result, details, fraud_type) = deadline_analysis();
        let close = CloseMed {
            id: med.id,
            result: Some(result),
            details: Some(details),
            fraud_type: Some(fraud_type.to_owned()),
        };
        let closed = actor.send(close).await.map_err(unavailable)?.map_err(unavailable)?;
        tracing::warn!(
            med = closed.id,
            report = report.id,
            "an infraction report's analysis period ended: approved by the rule"
        );
        metrics::counter!("pixgw_dict_reports_decided_by_deadline_total").increment(1);
        Ok(report_action(&closed, now).unwrap_or(ReportAction::Wait))
    })
}

/// A refund request of a funds recovery: the case its report opened gives back what it
/// blocked (see [`crate::rail::Inbound::refund_asked`]); `answer_of` says how to close it.
pub(super) fn recovery_refund(
    registry: std::sync::Arc<Registry>,
    asked: RefundAsked,
    recovery_id: String,
    answer_of: impl Fn(&Med) -> Result<RefundAnswer, Unavailable> + Send + 'static,
) -> BoxFuture<'static, Result<RefundAnswer, Unavailable>> {
    Box::pin(async move {
        let deps = registry.deps();
        let now = deps.clock.now();
        let rejected = |why: &str| RefundAnswer::Close {
            result: "REJECTED",
            details: Some(why.to_owned()),
            refund_transaction_id: None,
        };
        let Some(received) = deps.repo.received_by_id(&asked.end_to_end_id).map_err(unavailable)? else {
            return Ok(rejected("no payment of this participant has this end-to-end id"));
        };
        let of = |m: &Med| {
            m.end_to_end == asked.end_to_end_id
                && m.infraction
                    .as_ref()
                    .is_some_and(|i| i.recovery_id.as_deref() == Some(recovery_id.as_str()))
        };
        let (found, _) = deps.repo.meds_page(received.account_id, of, 0, 1).map_err(unavailable)?;
        let Some(stored) = found.into_iter().next() else {
            return Ok(rejected("no case of this participant answers the recovery"));
        };
        let actor = registry.get(received.account_id).map_err(unavailable)?;
        // The actor's state, not storage's: ReturnMed answers the case as it is.
        let awaiting = stored.awaiting_return();
        if !awaiting {
            let latest =
                deps.repo.med(received.account_id, stored.id).map_err(unavailable)?.unwrap_or(stored);
            return answer_of(&latest);
        }
        if crate::domain::med::return_waits(&stored, asked.amount, asked.created, now) {
            return Ok(RefundAnswer::Waiting);
        }
        let med = actor
            .send(ReturnMed { id: stored.id, requested: asked.amount })
            .await
            .map_err(unavailable)?
            .map_err(unavailable)?;
        tracing::info!(med = med.id, refund = asked.id, returned = %med.blocked, "a funds recovery's refund request takes the blocked money back");
        answer_of(&med)
    })
}
