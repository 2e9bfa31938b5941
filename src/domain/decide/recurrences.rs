//! Pix Automático's recurrences as commands (`domain::rec` holds the record and its life
//! cycle): each change is one plan that writes the recurrence as it now is and, when its
//! status moved, the event its webhook (`rec`) carries.

use chrono::{DateTime, Utc};

use super::{Account, Ids, Plan, Record, Refusal};
use crate::domain::events::{EventBody, EventType, OutboxEvent};
use crate::domain::listing::local_day;
use crate::domain::rec::{Answer, Link, Party, RecError, Receiver, Recipient, Recurrence};
use crate::domain::recurrence::{AmountRule, RetryPolicy, Schedule};

/// A new recurrence, as the receiver asks for it (`POST /rec`).
#[derive(Debug, Clone)]
pub struct RecRequest {
    pub link: Link,
    pub schedule: Schedule,
    pub amount: AmountRule,
    pub retry: RetryPolicy,
    /// The receiver's name and document, as its recurrences show them.
    pub receiver: Receiver,
}

/// A change of a recurrence.
#[derive(Debug, Clone)]
pub enum RecChange {
    /// Send a solicitation to the payer's institution (`POST /solicrec`).
    Solicit { recipient: Recipient, expires_at: DateTime<Utc> },
    /// The payer's institution answers the solicitation (sandbox).
    Answer { solicitation: String, answer: Answer },
    /// The receiver withdraws the solicitation before an answer (`PATCH /solicrec`).
    Withdraw { solicitation: String },
    /// One side cancels the recurrence (`PATCH /rec` by the receiver; sandbox for the payer).
    Cancel(Party),
}

/// The event of a recurrence's status change: the webhook carries its view.
fn rec_event(rec: &Recurrence) -> OutboxEvent {
    OutboxEvent {
        account_id: rec.account_id,
        local_id: rec.local_id,
        event_type: EventType::Rec,
        created_at: rec.updated_at,
        body: EventBody::Json(serde_json::json!({ "recs": [rec.to_json()] })),
    }
}

/// Writes the recurrence, with its event when its status moved.
fn written(rec: Recurrence, status_moved: bool) -> Plan<Recurrence> {
    let mut plan = Plan::new(rec.clone());
    if status_moved {
        plan.events.push(rec_event(&rec));
    }
    plan.records.push(Record::Recurrence(rec));
    plan
}

/// Makes a recurrence (`CRIADA`). Ids: one, the recurrence's.
pub fn create_rec(
    account: &Account,
    req: RecRequest,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Recurrence>, Refusal> {
    if req.schedule.start() < local_day(now) {
        return Err(Refusal::Rec(RecError::StartsBeforeToday));
    }
    let local_id = ids.take()?.local_id;
    let rec = Recurrence::new(
        account.id.get(),
        local_id,
        req.link,
        req.schedule,
        req.amount,
        req.retry,
        req.receiver,
        now,
    )
    .ok_or_else(|| Refusal::Bug(format!("local id {local_id} does not fit an idRec")))?;
    Ok(written(rec, true))
}

/// Changes a recurrence. Ids: one for a solicitation, none otherwise.
pub fn change_rec(
    mut rec: Recurrence,
    change: RecChange,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Recurrence>, Refusal> {
    let before = rec.status;
    match change {
        RecChange::Solicit { recipient, expires_at } => {
            let local_id = ids.take()?.local_id;
            rec.solicit(local_id, recipient, expires_at, now).map(|_| ())
        }
        RecChange::Answer { solicitation, answer } => rec.answer(&solicitation, answer, now),
        RecChange::Withdraw { solicitation } => rec.withdraw(&solicitation, now),
        RecChange::Cancel(by) => rec.cancel(by, now),
    }
    .map_err(Refusal::Rec)?;
    let moved = rec.status != before;
    Ok(written(rec, moved))
}

/// Expires the recurrence's solicitation if its time has come (`None`: nothing is due).
pub fn expire_rec(mut rec: Recurrence, now: DateTime<Utc>) -> Option<Plan<Recurrence>> {
    rec.expire(now).then(|| written(rec, true))
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::super::testing::*;
    use super::*;
    use crate::domain::rec::{Debtor, RecStatus};
    use crate::domain::recurrence::Periodicity;

    fn request(start: NaiveDate) -> RecRequest {
        RecRequest {
            link: Link {
                object: None,
                contract: "c-1".into(),
                debtor: Debtor { name: "Ana".into(), document: "52998224725".into() },
            },
            schedule: Schedule::new(start, Periodicity::Monthly, None).unwrap(),
            amount: AmountRule::Fixed(m("30")),
            retry: RetryPolicy::NotAllowed,
            receiver: Receiver { name: "Shop".into(), document: "11222333000181".into() },
        }
    }

    fn recipient() -> Recipient {
        Recipient {
            document: "52998224725".into(),
            account: "1".into(),
            branch: None,
            ispb: "00000000".into(),
        }
    }

    #[test]
    fn a_recurrence_starts_today_or_later_and_its_creation_is_an_event() {
        let f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T02:00:00Z".parse().unwrap();
        // 23:00 on the 25th in São Paulo: the 25th is still today there.
        let today = NaiveDate::from_ymd_opt(2026, 11, 25).unwrap();
        let plan = create_rec(&f.account(), request(today), now, &mut ids(&[9])).unwrap();
        assert_eq!((plan.reply.status, plan.reply.local_id), (RecStatus::Criada, 9));
        assert!(plan.reply.id.starts_with("RN") && plan.reply.id.contains("20261125"));
        assert_eq!(plan.events.len(), 1);
        assert_eq!(plan.events[0].event_type, EventType::Rec);
        assert_eq!(plan.records, vec![Record::Recurrence(plan.reply.clone())]);
        let yesterday = today.pred_opt().unwrap();
        assert_eq!(
            create_rec(&f.account(), request(yesterday), now, &mut ids(&[9])).map(|p| p.reply),
            Err(Refusal::Rec(RecError::StartsBeforeToday))
        );
    }

    #[test]
    fn only_a_change_of_status_is_an_event_and_a_refused_change_writes_nothing() {
        let f = Fixture::with_balance("0");
        let now: DateTime<Utc> = "2026-11-26T12:00:00Z".parse().unwrap();
        let today = local_day(now);
        let rec = create_rec(&f.account(), request(today), now, &mut ids(&[9])).unwrap().reply;
        let expires_at = now + chrono::Duration::hours(1);
        let sent =
            change_rec(rec, RecChange::Solicit { recipient: recipient(), expires_at }, now, &mut ids(&[10]))
                .unwrap();
        assert!(sent.events.is_empty(), "a solicitation leaves the recurrence CRIADA");
        let rec = sent.reply;
        let sid = rec.solicitations[0].id.clone();
        assert_eq!(
            change_rec(
                rec.clone(),
                RecChange::Answer { solicitation: "SC0".into(), answer: Answer::Reject },
                now,
                &mut ids(&[])
            )
            .map(|p| p.reply),
            Err(Refusal::Rec(RecError::SolicitationNotFound))
        );
        assert!(expire_rec(rec.clone(), expires_at - chrono::Duration::seconds(1)).is_none());
        let expired = expire_rec(rec.clone(), expires_at).unwrap();
        assert_eq!((expired.reply.status, expired.events.len()), (RecStatus::Expirada, 1));
        let approved = change_rec(
            rec,
            RecChange::Answer { solicitation: sid, answer: Answer::Approve { maximum: None } },
            now,
            &mut ids(&[]),
        )
        .unwrap();
        assert_eq!(approved.events.len(), 1);
        assert_eq!(approved.events[0].payload()["recs"][0]["status"], "APROVADA");
    }
}
