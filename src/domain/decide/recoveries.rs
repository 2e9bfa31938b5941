//! MED 2.0 contests (domain::recovery): a client contests a Pix it sent; the DICT's answers
//! move the record forward, each move with its `recovery` webhook.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{Account, Ids, Plan, Record, Refusal};
use crate::domain::events::{EventBody, EventType, OutboxEvent};
use crate::domain::money::Money;
use crate::domain::recovery::{check_contest, Recovery, RecoveryStatus, Seen};
use crate::domain::transaction::Transaction;

/// A client's contest of a Pix it sent.
#[derive(Debug, Clone)]
pub struct ContestRequest {
    pub end_to_end_id: String,
    pub situation: String,
    pub details: Option<String>,
    pub email: String,
    pub phone: String,
}

fn event(r: &Recovery, name: &str, now: DateTime<Utc>) -> OutboxEvent {
    OutboxEvent {
        account_id: r.account_id,
        local_id: r.id,
        event_type: EventType::Recovery,
        created_at: now,
        body: EventBody::Json(json!({ "event": name, "recovery": r.to_json() })),
    }
}

/// Records a contest of `original` (the account's transaction with that end-to-end id),
/// `REQUESTED` until the DICT has it. `contested`: the payment has a contest already. Ids:
/// one, the contest's.
pub fn contest(
    account: &Account,
    req: ContestRequest,
    original: Option<Transaction>,
    contested: bool,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Recovery>, Refusal> {
    check_contest(original.as_ref(), contested, now).map_err(Refusal::Recovery)?;
    let original = original.ok_or(Refusal::Bug("checked above".into()))?;
    let id = ids.take()?.local_id;
    let r = Recovery {
        id,
        account_id: account.id.get(),
        end_to_end_id: req.end_to_end_id,
        transaction_id: original.local_id,
        amount: original.value,
        situation: req.situation,
        details: req.details,
        email: req.email,
        phone: req.phone,
        status: RecoveryStatus::Requested,
        dict_id: None,
        traced: 0,
        returned: Money::ZERO,
        created_at: now,
        updated_at: now,
    };
    let mut plan = Plan::new(r.clone());
    plan.events.push(event(&r, "RecoveryRequested", now));
    plan.records.push(Record::Recovery(r));
    Ok(plan)
}

/// The client's change of its contest, once the DICT took it: the record as it now is (no
/// webhook: the contest did not move).
pub fn amend_contest(
    existing: &Recovery,
    amendment: &crate::domain::recovery::Amendment,
    now: DateTime<Utc>,
) -> Result<Plan<Recovery>, Refusal> {
    let next = existing.amended(amendment, now).map_err(Refusal::Recovery)?;
    let mut plan = Plan::new(next.clone());
    plan.records.push(Record::Recovery(next));
    Ok(plan)
}

/// What the DICT said of a contest (and what came back of the payment so far): the record
/// moved, with its webhook, or `None` when nothing is new.
pub fn observe_recovery(
    existing: &Recovery,
    seen: &Seen,
    returned: Money,
    now: DateTime<Utc>,
) -> Option<Plan<Recovery>> {
    let next = existing.observe(seen, returned, now)?;
    let mut plan = Plan::new(next.clone());
    if next.status != existing.status || next.returned != existing.returned {
        let name = match next.status {
            RecoveryStatus::Completed => "RecoveryCompleted",
            RecoveryStatus::Cancelled => "RecoveryCancelled",
            _ if next.returned != existing.returned => "RecoveryMoneyReturned",
            _ => "RecoveryUpdated",
        };
        plan.events.push(event(&next, name, now));
    }
    plan.records.push(Record::Recovery(next));
    Some(plan)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::domain::transaction::{TxKind, TxStatus};

    #[test]
    fn a_contest_is_recorded_requested_with_its_webhook_and_the_dicts_steps_move_it_once() {
        let f = Fixture::with_balance("0");
        let mut sent =
            Transaction::new(8, uuid::Uuid::nil(), f.account().id, TxKind::CashOut, m("500.00"), noon());
        sent.status = TxStatus::Confirmed;
        sent.processed_at = Some(noon());
        let req = ContestRequest {
            end_to_end_id: "E1".into(),
            situation: "SCAM".into(),
            details: None,
            email: "a@b.br".into(),
            phone: "+5561988887777".into(),
        };
        let plan =
            contest(&f.account(), req.clone(), Some(sent.clone()), false, noon(), &mut ids(&[40])).unwrap();
        let r = plan.reply.clone();
        assert_eq!((r.id, r.status, r.amount), (40, RecoveryStatus::Requested, m("500.00")));
        assert_eq!(plan.events[0].event_type, EventType::Recovery);
        let again = contest(&f.account(), req, Some(sent), true, noon(), &mut ids(&[41])).unwrap_err();
        assert!(matches!(
            again,
            Refusal::Recovery(crate::domain::recovery::RecoveryRejection::AlreadyContested)
        ));
        let seen =
            Seen { dict_id: Some("d".into()), status: RecoveryStatus::AwaitingAnalysis, traced: Some(2) };
        let moved = observe_recovery(&r, &seen, Money::ZERO, noon()).unwrap();
        assert_eq!(moved.reply.status, RecoveryStatus::AwaitingAnalysis);
        assert_eq!(moved.events.len(), 1);
        assert!(observe_recovery(&moved.reply, &seen, Money::ZERO, noon()).is_none());
        let back = observe_recovery(&moved.reply, &seen, m("100.00"), noon()).unwrap();
        assert_eq!(back.events[0].payload()["event"], "RecoveryMoneyReturned");
    }
}
