//! Money in from a real rail: the accounts' side of [`crate::rail::Inbound`].
//!
//! The rail reads a payment or return and asks [`Accounts::accept`]: this finds the account
//! it is for (by the receiving key, by the account number, or by the payment returned),
//! and that account's actor accepts it durably or refuses it
//! ([`crate::domain::decide::accept_incoming`]). When the SPI later says it settled or was
//! rejected, [`Accounts::incoming_ended`] has the actor credit it or drop it; the answer to
//! a payout of ours goes to the actor that made it ([`Accounts::payout_ended`]).
//!
//! Every step is idempotent, because the rail repeats what it is not sure was done: an
//! accepted arrival is found again by its id, a settled one has left its credit behind, and
//! a payout that is no longer pending ignores a second answer.

use std::sync::Arc;

use actix::prelude::*;
use futures_util::future::BoxFuture;

use super::actor::AccountActor;
use super::messages::CommandError;
use super::messages::OpenMed;
use super::registry::{Registry, RegistryError};
use crate::domain::decide::{self, Incoming, IncomingKind, IncomingRefusal, Named};
use crate::domain::ids::AccountId;
use crate::domain::transaction::{BankInfo, RailOutcome, Transaction, TxKind};
use crate::rail::{Arrival, ArrivalTo, Inbound, RefundAnswer, RefundAsked, Refuse, Settled, Unavailable};

/// Accept an arrival for this account: `Ok(Ok(()))` once the acceptance is durable.
#[derive(Message)]
#[rtype(result = "Result<Result<(), IncomingRefusal>, CommandError>")]
pub struct AcceptIncoming {
    pub incoming: Incoming,
    pub creditor_document: String,
}

/// The SPI settled (`settled`) or rejected what this account accepted under `id`; answers
/// whether anything waited under that id.
#[derive(Message)]
#[rtype(result = "Result<bool, CommandError>")]
pub struct EndIncoming {
    pub id: String,
    pub settled: bool,
}

/// The accounts, as a real rail's inbound port.
pub struct Accounts {
    pub registry: Arc<Registry>,
}

fn unavailable(e: impl std::fmt::Display) -> Unavailable {
    Unavailable(e.to_string())
}

impl Accounts {
    /// The account an arrival is for, and what it is: `Err` when it is for none of ours.
    fn payee(&self, a: &Arrival) -> Result<Result<(AccountId, IncomingKind), Refuse>, Unavailable> {
        let repo = &self.registry.deps().repo;
        match &a.to {
            ArrivalTo::Payment { key, account, account_type, reference } => {
                let key_holder = match key {
                    Some(k) => Some(repo.account_by_receiving_key(k).map_err(unavailable)?),
                    None => None,
                };
                Ok(crate::rail::payee_of_payment(account, account_type.as_deref(), key_holder)
                    .map(|id| (id, IncomingKind::Payment { reference: reference.clone() })))
            }
            ArrivalTo::Return { original_end_to_end_id } => {
                let original = repo.payout_by_id(original_end_to_end_id).map_err(unavailable)?;
                Ok(original
                    .filter(|t| matches!(t.kind, TxKind::CashOut | TxKind::QrCashOut | TxKind::DictPix))
                    .map(|t| {
                        let kind = IncomingKind::Return {
                            original_end_to_end_id: original_end_to_end_id.clone(),
                            original_local_id: t.local_id,
                        };
                        (t.account_id, kind)
                    })
                    .ok_or(Refuse::UnknownAccount))
            }
        }
    }

    fn actor(&self, id: AccountId) -> Result<Option<Addr<AccountActor>>, Unavailable> {
        match self.registry.get(id) {
            Ok(a) => Ok(Some(a)),
            Err(RegistryError::NotFound) => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }
}

/// The cause a MED of the DICT carries: the fraud causes' first, or an operational flaw.
fn med_cause(fraud: bool) -> &'static str {
    if fraud {
        crate::domain::med::FRAUD_CAUSES[0]
    } else {
        crate::domain::med::OPERATIONAL_CAUSES[0]
    }
}

impl Accounts {
    /// How a refund request closes once its MED has ended; `Waiting` while it has not.
    fn answer_of(&self, med: &crate::domain::med::Med) -> Result<RefundAnswer, Unavailable> {
        answer_of(&self.registry.deps().repo, med)
    }
}

/// How a refund request closes once its MED has ended; `Waiting` while it has not.
fn answer_of(repo: &crate::store::Repo, med: &crate::domain::med::Med) -> Result<RefundAnswer, Unavailable> {
    {
        use crate::domain::med::{AnalysisResult, MedStatus};
        let close = |result, refund_transaction_id| RefundAnswer::Close {
            result,
            details: med.analysis_details.clone(),
            refund_transaction_id,
        };
        Ok(match (med.status, med.analysis_result) {
            (MedStatus::Analyzed, Some(AnalysisResult::Rejected)) => close("REJECTED", None),
            (MedStatus::Analyzed, Some(AnalysisResult::Approved)) if med.blocked.is_zero() => {
                RefundAnswer::Close {
                    result: "REJECTED",
                    details: Some("nothing was left of the payment to give back".into()),
                    refund_transaction_id: None,
                }
            }
            (MedStatus::Analyzed, Some(AnalysisResult::Approved)) => {
                let refund = match med.refund_transaction_id {
                    Some(local) => repo.transaction(local).map_err(unavailable)?,
                    None => None,
                };
                match refund {
                    // The DICT is told once the SPI settled the return.
                    Some(t) if t.status == crate::domain::transaction::TxStatus::Confirmed => {
                        let whole = med.blocked == med.amount;
                        close(
                            if whole { "TOTALLY_ACCEPTED" } else { "PARTIALLY_ACCEPTED" },
                            Some(t.end_to_end_id),
                        )
                    }
                    Some(t) if t.status == crate::domain::transaction::TxStatus::Error => {
                        tracing::warn!(
                            med = med.id,
                            local_id = t.local_id,
                            "a MED's return was rejected by the SPI; its refund request stays open"
                        );
                        RefundAnswer::Waiting
                    }
                    _ => RefundAnswer::Waiting,
                }
            }
            _ => RefundAnswer::Waiting,
        })
    }
}

impl Inbound for Accounts {
    fn claim_seen(
        &self,
        seen: crate::domain::claim::Seen,
        ours: String,
    ) -> BoxFuture<'static, Result<Vec<crate::domain::claim::Claim>, Unavailable>> {
        super::claims::claim_seen(Arc::clone(&self.registry), seen, ours)
    }

    fn open_claims(
        &self,
    ) -> Result<(Vec<crate::domain::claim::Claim>, chrono::DateTime<chrono::Utc>), Unavailable> {
        let deps = self.registry.deps();
        let open = deps.repo.open_claims().map_err(unavailable)?;
        Ok((open, deps.clock.now()))
    }

    fn claims_after(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>, Unavailable> {
        self.registry.deps().repo.claims_after().map_err(unavailable)
    }

    fn set_claims_after(&self, at: chrono::DateTime<chrono::Utc>) -> Result<(), Unavailable> {
        self.registry.deps().repo.set_claims_after(at).map_err(unavailable)
    }

    fn dict_cids(&self, key_type: &str) -> Result<Vec<String>, Unavailable> {
        super::sync::cids(&self.registry.deps().repo, key_type)
    }

    fn sync_take_in(&self, found: crate::rail::SyncEntry) -> Result<crate::rail::Repair, Unavailable> {
        let ours = crate::domain::transaction::gateway_ispb();
        super::sync::take_in(&self.registry.deps().repo, ours, found)
    }

    fn cid_events_after(&self, key_type: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>, Unavailable> {
        self.registry.deps().repo.cid_events_after(key_type).map_err(unavailable)
    }

    fn set_cid_events_after(
        &self,
        key_type: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), Unavailable> {
        self.registry.deps().repo.set_cid_events_after(key_type, at).map_err(unavailable)
    }

    fn sync_drop(&self, cid: &str) -> Result<crate::rail::Repair, Unavailable> {
        super::sync::drop_cid(&self.registry.deps().repo, cid)
    }

    fn pending_key_updates(&self) -> Result<Vec<crate::rail::KeyUpdate>, Unavailable> {
        super::sync::pending_updates(&self.registry.deps().repo)
    }

    fn tax_holders(&self) -> Result<Vec<crate::rail::Holder>, Unavailable> {
        super::sync::tax_holders(&self.registry.deps().repo)
    }

    fn holder_renamed(
        &self,
        account: crate::domain::ids::AccountId,
        name: &str,
    ) -> Result<usize, Unavailable> {
        let name = crate::domain::account::AccountName::parse(name)
            .map_err(|e| Unavailable(format!("the register's name {name:?}: {e}")))?;
        let (record, updates) = crate::admin::rename(&self.registry.deps().repo, account, name, true)
            .map_err(|e| Unavailable(e.to_string()))?;
        self.registry.name_changed(account, record.profile.name.as_str().to_owned());
        Ok(updates)
    }

    fn key_removed(&self, account: crate::domain::ids::AccountId, key: &str) -> Result<(), Unavailable> {
        self.registry.deps().repo.remove_key(account, key).map_err(|e| Unavailable(e.to_string()))
    }

    fn key_update_ended(
        &self,
        update: &crate::rail::KeyUpdate,
        cid: Option<Option<String>>,
    ) -> Result<bool, Unavailable> {
        super::sync::update_ended(&self.registry.deps().repo, update, cid)
    }

    fn report_seen(
        &self,
        report: crate::rail::ReportSeen,
    ) -> BoxFuture<'static, Result<crate::rail::ReportAction, Unavailable>> {
        super::recovery::report_seen(Arc::clone(&self.registry), report)
    }

    fn live_cases(&self) -> Result<Vec<crate::domain::med::Med>, Unavailable> {
        self.registry.deps().repo.live_cases().map_err(unavailable)
    }

    fn release_case(&self, case: crate::domain::med::Med) -> BoxFuture<'static, Result<(), Unavailable>> {
        let actor = crate::domain::ids::AccountId::new(case.account_id)
            .ok_or_else(|| unavailable("a case of no account"))
            .and_then(|id| self.registry.get(id).map_err(unavailable));
        Box::pin(async move {
            actor?
                .send(super::messages::ReleaseCase { id: case.id })
                .await
                .map_err(unavailable)?
                .map(|_| ())
                .map_err(unavailable)
        })
    }

    fn open_recoveries(&self) -> Result<Vec<crate::domain::recovery::Recovery>, Unavailable> {
        self.registry.deps().repo.open_recoveries().map_err(unavailable)
    }

    fn recovery_of(
        &self,
        dict_id: &str,
        end_to_end_id: Option<&str>,
    ) -> Result<Option<crate::domain::recovery::Recovery>, Unavailable> {
        let repo = &self.registry.deps().repo;
        if let Some(r) = repo.recovery_by_dict_id(dict_id).map_err(unavailable)? {
            return Ok(Some(r));
        }
        match end_to_end_id {
            Some(e) => repo.recovery_by_e2e(e).map_err(unavailable),
            None => Ok(None),
        }
    }

    fn recovery_seen(
        &self,
        contest: crate::domain::recovery::Recovery,
        seen: crate::domain::recovery::Seen,
    ) -> BoxFuture<'static, Result<crate::domain::recovery::Recovery, Unavailable>> {
        let actor = crate::domain::ids::AccountId::new(contest.account_id)
            .ok_or_else(|| unavailable("a contest of no account"))
            .and_then(|id| self.registry.get(id).map_err(unavailable));
        Box::pin(async move {
            actor?
                .send(super::recovery::ObserveRecovery { id: contest.id, seen })
                .await
                .map_err(unavailable)?
                .map_err(unavailable)
        })
    }

    fn events_cursor(&self) -> Result<Option<String>, Unavailable> {
        self.registry.deps().repo.dict_events_cursor().map_err(unavailable)
    }

    fn set_events_cursor(&self, cursor: &str) -> Result<(), Unavailable> {
        self.registry.deps().repo.set_dict_events_cursor(cursor).map_err(unavailable)
    }

    fn refund_asked(&self, asked: RefundAsked) -> BoxFuture<'static, Result<RefundAnswer, Unavailable>> {
        if let Some(recovery) = asked.funds_recovery_id.clone() {
            let registry = Arc::clone(&self.registry);
            let answer = move |m: &crate::domain::med::Med| answer_of(&registry.deps().repo, m);
            return super::recovery::recovery_refund(Arc::clone(&self.registry), asked, recovery, answer);
        }
        let repo = &self.registry.deps().repo;
        let found = (|| {
            let Some(received) = repo.received_by_id(&asked.end_to_end_id).map_err(unavailable)? else {
                return Ok(Err(RefundAnswer::Close {
                    result: "REJECTED",
                    details: Some("no payment of this participant has this end-to-end id".into()),
                    refund_transaction_id: None,
                }));
            };
            let account = received.account_id;
            let (meds, _) = repo
                .meds_page(account, |m| m.dict_refund_id.as_deref() == Some(asked.id.as_str()), 0, 1)
                .map_err(unavailable)?;
            match meds.into_iter().next() {
                Some(med) => Ok(Err(self.answer_of(&med)?)),
                None => Ok(Ok(self.actor(account)?)),
            }
        })();
        Box::pin(async move {
            let actor = match found? {
                Err(answer) => return Ok(answer),
                Ok(None) => return Ok(RefundAnswer::Waiting),
                Ok(Some(actor)) => actor,
            };
            let open = OpenMed {
                end_to_end: asked.end_to_end_id,
                cause: med_cause(asked.fraud).to_owned(),
                amount: Some(asked.amount),
                description: asked.details,
                dict_refund_id: Some(asked.id.clone()),
                infraction: None,
            };
            match actor.send(open).await {
                Ok(Ok(med)) => {
                    tracing::info!(med = med.id, refund = asked.id, blocked = %med.blocked, "a MED refund request opened a MED");
                    Ok(RefundAnswer::Waiting)
                }
                // The account refuses it (more than the payment, say): the request is rejected.
                Ok(Err(CommandError::Refused(r))) => Ok(RefundAnswer::Close {
                    result: "REJECTED",
                    details: Some(format!("{r:?}")),
                    refund_transaction_id: None,
                }),
                Ok(Err(e)) => Err(unavailable(e)),
                Err(e) => Err(unavailable(e)),
            }
        })
    }

    fn accept(&self, a: Arrival) -> BoxFuture<'static, Result<Result<(), Refuse>, Unavailable>> {
        let found = (|| {
            let (payee, kind) = match self.payee(&a)? {
                Ok(p) => p,
                Err(r) => return Ok(Err(r)),
            };
            let record = match self.registry.deps().repo.account(payee).map_err(unavailable)? {
                Some(r) => r,
                None => return Ok(Err(Refuse::UnknownAccount)),
            };
            if record.profile.sandbox {
                return Ok(Err(Refuse::NotAccepted));
            }
            Ok(Ok((payee, kind, self.actor(payee)?)))
        })();
        Box::pin(async move {
            let (payee, kind, actor) = match found? {
                Ok((payee, kind, Some(actor))) => (payee, kind, actor),
                Ok((_, _, None)) => return Ok(Err(Refuse::UnknownAccount)),
                Err(r) => return Ok(Err(r)),
            };
            let incoming = Incoming {
                id: a.id,
                payee,
                value: a.value,
                payer_name: a.payer_name,
                payer_document: a.payer_document,
                payer_ispb: a.payer_ispb,
                paid_at: a.paid_at,
                kind,
            };
            let msg = AcceptIncoming { incoming, creditor_document: a.creditor_document };
            match actor.send(msg).await {
                Ok(Ok(answer)) => Ok(answer.map_err(Refuse::Account)),
                Ok(Err(e)) => Err(unavailable(e)),
                Err(e) => Err(unavailable(e)),
            }
        })
    }

    fn incoming_ended(&self, id: String, settled: bool) -> BoxFuture<'static, Result<bool, Unavailable>> {
        let repo = &self.registry.deps().repo;
        let found = repo.incoming(&id).map_err(unavailable).and_then(|i| match i {
            Some(i) => self.actor(i.payee),
            // Its record goes with the credit: a settlement read again (delivered twice,
            // or after a crash) names an arrival credited already, which the account
            // recognises as done. A refusal of one credited is no repeat: it stays
            // unknown here, and the rail keeps it for an operator.
            None if settled => match repo.credited_account_by_id(&id).map_err(unavailable)? {
                Some(account) => self.actor(account),
                None => Ok(None),
            },
            None => Ok(None),
        });
        Box::pin(async move {
            let Some(actor) = found? else { return Ok(false) };
            match actor.send(EndIncoming { id, settled }).await {
                Ok(Ok(found)) => Ok(found),
                Ok(Err(e)) => Err(unavailable(e)),
                Err(e) => Err(unavailable(e)),
            }
        })
    }

    fn payout_ended(
        &self,
        id: String,
        outcome: RailOutcome,
    ) -> BoxFuture<'static, Result<crate::rail::PayoutEnded, Unavailable>> {
        use crate::rail::PayoutEnded;
        let found = self.registry.deps().repo.payout_by_id(&id).map_err(unavailable).and_then(|t| match t {
            Some(t) => match t.contradicted_by(&outcome) {
                Some(why) => Ok(Err(why)),
                None => Ok(Ok(self.actor(t.account_id)?.map(|a| (a, t.local_id)))),
            },
            None => Ok(Ok(None)),
        });
        // A payout is durable and readable before its message leaves, so an id storage does
        // not know is no payout of ours: the rail records it as unmatched, as it does an
        // answer that contradicts a final status.
        Box::pin(async move {
            match found? {
                Err(why) => Ok(PayoutEnded::Contradicts(why)),
                Ok(Some((actor, local_id))) => {
                    actor.do_send(Settled { local_id, outcome, on_us: None });
                    Ok(PayoutEnded::Applied)
                }
                Ok(None) => Ok(PayoutEnded::NotOurs),
            }
        })
    }

    fn unmatched(&self, item: crate::rail::Unmatched) -> BoxFuture<'static, Result<(), Unavailable>> {
        let repo = self.registry.deps().repo.clone();
        Box::pin(async move {
            let new = repo.put_unmatched(&item).await.map_err(unavailable)?;
            if new {
                metrics::counter!("pixgw_spi_unmatched_total", "kind" => item.kind.clone()).increment(1);
                tracing::error!(
                    kind = %item.kind, reference = %item.reference, resource = item.resource_id.as_deref(),
                    digest = %item.digest, why = %item.why,
                    "a message from the SPI could not be applied: kept as an unmatched rail item for an operator"
                );
            }
            Ok(())
        })
    }
}

/// Gives an approved resolution of an aged payout its effect: the payout's final status,
/// as if the SPI had answered (CONFIRMED; or ERROR with its amount released). Idempotent:
/// a payout no longer pending ignores it, so a start applies every approved one again.
pub async fn apply_resolution(
    registry: &Registry,
    r: &crate::domain::resolution::Resolution,
) -> Result<(), Unavailable> {
    use crate::domain::resolution::{Outcome, Status, Subject};
    let (Status::Approved, Subject::Payout(id)) = (r.status, &r.subject) else { return Ok(()) };
    let Some(tx) = registry.deps().repo.payout_by_id(id).map_err(unavailable)? else { return Ok(()) };
    if tx.status != crate::domain::transaction::TxStatus::Pending {
        return Ok(());
    }
    let outcome = match r.outcome {
        Outcome::Settled => RailOutcome::settled(None),
        _ => RailOutcome {
            result: Err(crate::domain::transaction::ErrorCode::PaymentExpired),
            reason: Some("OPERATOR_RESOLVED".into()),
        },
    };
    let actor = registry.get(tx.account_id).map_err(unavailable)?;
    actor.send(Settled { local_id: tx.local_id, outcome, on_us: None }).await.map_err(unavailable)
}

/// Applies again, at start, every approved resolution of a payout still pending (a crash
/// between the approval and its effect).
pub async fn apply_resolutions_again(registry: &Registry) -> Result<usize, Unavailable> {
    let all = registry.deps().repo.resolutions().map_err(unavailable)?;
    let mut n = 0;
    for r in all.iter().filter(|r| r.status == crate::domain::resolution::Status::Approved) {
        apply_resolution(registry, r).await?;
        n += 1;
    }
    Ok(n)
}

impl AccountActor {
    /// The payer's institution as a received transaction records it.
    fn payer_bank(&self, ispb: &str) -> Option<BankInfo> {
        Some(self.institution(ispb).unwrap_or_else(|| BankInfo {
            ispb: ispb.to_owned(),
            name: format!("ISPB {ispb}"),
            code: String::new(),
            branch: None,
            account_number: None,
        }))
    }

    /// Whether this arrival was credited already (its transaction is in flight or stored).
    fn credited(&mut self, id: &str, ctx: &mut Context<Self>) -> Result<bool, CommandError> {
        let is_credit = |t: &Transaction| {
            (t.end_to_end_id == id || t.refund.as_ref().is_some_and(|r| r.rtr_id == id))
                && matches!(t.kind, TxKind::PixIn | TxKind::CashIn | TxKind::RefundOut)
        };
        if self.unapplied_any(is_credit) {
            return Ok(true);
        }
        let r = self.deps.repo.transactions_by_e2e(self.account.id, id);
        Ok(self.read(r, ctx)?.iter().any(|t| is_credit(t) && t.is_final()))
    }

    /// What an incoming names: the charge its reference names, or the payment it returns.
    fn named(
        &mut self,
        incoming: &Incoming,
        creditor_document: String,
        ctx: &mut Context<Self>,
    ) -> Result<Named, CommandError> {
        let mut named = Named {
            holder_document: self.account_document().to_owned(),
            creditor_document,
            ..Named::default()
        };
        match &incoming.kind {
            IncomingKind::Payment { reference: Some(reference) } => {
                named.charge = match self.open_charge_matching(|c| decide::names_charge(reference, c)) {
                    Some(open) => Some(open),
                    None => self.charge_named(reference, ctx)?,
                };
            }
            IncomingKind::Payment { reference: None } => {}
            IncomingKind::Return { original_local_id, .. } => {
                named.original = self.transaction(*original_local_id, ctx)?
            }
        }
        Ok(named)
    }

    fn accept_incoming(
        &mut self,
        msg: AcceptIncoming,
        ctx: &mut Context<Self>,
    ) -> Result<Result<(), IncomingRefusal>, CommandError> {
        self.view()?;
        let id = msg.incoming.id.clone();
        let r = self.deps.repo.incoming(&id);
        if self.read(r, ctx)?.is_some() || self.credited(&id, ctx)? {
            // Accepted (or settled) before: the same answer again.
            return Ok(Ok(()));
        }
        let named = self.named(&msg.incoming, msg.creditor_document, ctx)?;
        match decide::accept_incoming(msg.incoming, named) {
            Ok(plan) => self.execute(plan, ctx).map(Ok),
            Err(refusal) => Ok(Err(refusal)),
        }
    }

    fn end_incoming(&mut self, msg: EndIncoming, ctx: &mut Context<Self>) -> Result<bool, CommandError> {
        self.view()?;
        // Settled a moment ago and not on disk yet: done already.
        if self.credited(&msg.id, ctx)? {
            return Ok(true);
        }
        let r = self.deps.repo.incoming(&msg.id);
        let Some(incoming) = self.read(r, ctx)?.filter(|i| i.payee == self.account.id) else {
            return Ok(false);
        };
        if !msg.settled {
            self.execute(decide::drop_incoming(msg.id), ctx)?;
            return Ok(true);
        }
        let named = self.named(&incoming, String::new(), ctx)?;
        let splits = named
            .charge
            .as_ref()
            .and_then(|c| c.charge.as_ref())
            .map(|c| c.splits.clone())
            .unwrap_or_default();
        let directory = &self.deps.directory;
        let split_banks: Vec<_> =
            splits.iter().map(|s| directory.lookup(&s.key).and_then(|e| directory.bank_of(e))).collect();
        let payer_bank = self.payer_bank(&incoming.payer_ispb);
        let returned = match &incoming.kind {
            IncomingKind::Return { original_end_to_end_id, .. } => Some(original_end_to_end_id.clone()),
            IncomingKind::Payment { .. } => None,
        };
        let mut ids = self.draw_ids(1 + splits.len(), ctx)?;
        let now = self.now();
        let decided = decide::settle_incoming(
            &self.view()?,
            incoming,
            named.charge,
            named.original,
            payer_bank,
            &split_banks,
            now,
            &mut ids,
        );
        match decided {
            Ok(plan) => {
                self.execute(plan, ctx)?;
                // What arrived is blocked at once for a MED 2.0 case that lacks it, and a
                // return of a contested payment is counted by its contest.
                self.top_up_meds(ctx)?;
                if let Some(e2e) = returned {
                    self.count_return(&e2e, ctx)?;
                }
                Ok(true)
            }
            Err(r) => Err(self.refused(r, ctx)),
        }
    }
}

impl Handler<AcceptIncoming> for AccountActor {
    type Result = ResponseActFuture<Self, Result<Result<(), IncomingRefusal>, CommandError>>;

    fn handle(&mut self, msg: AcceptIncoming, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.accept_incoming(msg, ctx);
        self.reply_when_durable(reply)
    }
}

impl Handler<EndIncoming> for AccountActor {
    type Result = ResponseActFuture<Self, Result<bool, CommandError>>;

    fn handle(&mut self, msg: EndIncoming, ctx: &mut Context<Self>) -> Self::Result {
        let reply = self.end_incoming(msg, ctx);
        self.reply_when_durable(reply)
    }
}
