//! The rule of a DICT key claim's copy in an account: what the account writes when the
//! DICT answers a claim (domain::claim::observe), with the key that leaves or arrives and
//! the event that tells the client, in one plan.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{Ids, Plan, Record, Refusal};
use crate::domain::claim::{observe, Claim, KeyMove, Role, Seen};
use crate::domain::events::{EventBody, EventType, OutboxEvent};
use crate::domain::ids::AccountId;

/// What a claim's rule reads of its account.
#[derive(Debug, Clone, Copy)]
pub struct ClaimAccount<'a> {
    pub id: AccountId,
    /// The account's keys and their types.
    pub keys: &'a [(String, String)],
    pub receiving_key: &'a str,
    /// The holder's name as it is now.
    pub holder_name: &'a str,
}

/// The plan of the DICT's answer `seen` for the account's claim (`existing` its copy, if it
/// has one): `None` when nothing changes. A key that leaves and was the account's receiving
/// key gives way to another key of the account (an EVP first), or to a fresh random one
/// when it has none, so the account's charges never carry a key that is not its own.
pub fn observe_claim(
    account: ClaimAccount<'_>,
    existing: Option<&Claim>,
    seen: &Seen,
    role: Role,
    ids: &mut Ids,
    now: DateTime<Utc>,
) -> Result<Option<Plan<Claim>>, Refusal> {
    let fresh = ids.take()?;
    let local_id = existing.map_or(fresh.local_id, |c| c.local_id);
    let Some(change) = observe(existing, seen, role, account.id.get(), local_id, now) else {
        return Ok(None);
    };
    let mut plan = Plan::new(change.claim.clone());
    plan.records.push(Record::Claim(change.claim.clone()));
    match change.key {
        Some(KeyMove::Arrives) if !account.keys.iter().any(|(k, _)| *k == seen.key) => {
            plan.records.push(Record::KeyArrived {
                key: seen.key.clone(),
                key_type: seen.key_type.clone(),
                at: now,
                cid: seen.claimer_cid.clone(),
                request_id: seen.claimer_request_id,
                // The entry names the holder as the claim was opened: a rename since asks
                // for the entry's update (docs/decisions.md "Key updates when an account
                // changes").
                update_to: (seen.claimer_name != account.holder_name).then(|| account.holder_name.to_owned()),
            });
        }
        Some(KeyMove::Leaves) => {
            let receiving = (account.receiving_key == seen.key).then(|| {
                let others = || account.keys.iter().filter(|(k, _)| *k != seen.key);
                others()
                    .find(|(_, t)| t == "EVP")
                    .or_else(|| others().next())
                    .map_or_else(|| fresh.second_uuid().to_string(), |(k, _)| k.clone())
            });
            plan.records.push(Record::KeyLeft { key: seen.key.clone(), receiving });
        }
        _ => {}
    }
    if let Some((event, confirmed)) = &change.skipped {
        plan.events.push(OutboxEvent {
            account_id: account.id.get(),
            local_id,
            event_type: EventType::Claim,
            created_at: now,
            body: EventBody::Json(json!({ "event": event, "claim": confirmed.to_json() })),
        });
    }
    if !change.event.is_empty() {
        plan.events.push(OutboxEvent {
            account_id: account.id.get(),
            local_id,
            event_type: EventType::Claim,
            created_at: now,
            body: EventBody::Json(json!({ "event": change.event, "claim": change.claim.to_json() })),
        });
    }
    Ok(Some(plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::claim::{ClaimStatus, ClaimType};
    use crate::domain::decide::Fresh;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn seen(status: ClaimStatus) -> Seen {
        Seen {
            id: "c1".into(),
            claim_type: ClaimType::Portability,
            key: "ana@example.com".into(),
            key_type: "EMAIL".into(),
            claimer: "99999A04".into(),
            claimer_account: "9".into(),
            claimer_tax_id: "52998224725".into(),
            claimer_name: "Ana".into(),
            claimer_cid: None,
            claimer_request_id: None,
            donor: "1234ABCD".into(),
            status,
            resolution_end: at("2026-01-17T10:00:00Z"),
            completion_end: None,
            modified: at("2026-01-10T10:00:00Z"),
            confirm_reason: None,
            cancel_reason: None,
            cancelled_by: None,
        }
    }

    fn fresh() -> Fresh {
        Fresh { local_id: 500, random: [7; super::super::FRESH_RANDOM_BYTES] }
    }

    #[test]
    fn a_confirmed_claim_takes_the_key_and_a_receiving_key_gives_way_to_an_evp_of_the_account() {
        let keys = [
            ("ana@example.com".to_owned(), "EMAIL".to_owned()),
            ("phone".to_owned(), "PHONE".to_owned()),
            ("e-v-p".to_owned(), "EVP".to_owned()),
        ];
        let account = ClaimAccount {
            id: AccountId::new(3).unwrap(),
            keys: &keys,
            receiving_key: "ana@example.com",
            holder_name: "Ana",
        };
        let now = at("2026-01-10T10:00:01Z");
        let plan = observe_claim(
            account,
            None,
            &seen(ClaimStatus::Confirmed),
            Role::Donor,
            &mut Ids::new([fresh()]),
            now,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            plan.records[1],
            Record::KeyLeft { key: "ana@example.com".into(), receiving: Some("e-v-p".into()) }
        );
        assert_eq!(
            (plan.events.len(), plan.events[0].local_id, plan.events[0].event_type),
            (1, 500, EventType::Claim)
        );
        // Not the receiving key: nothing else changes.
        let other = ClaimAccount { receiving_key: "e-v-p", ..account };
        let plan = observe_claim(
            other,
            None,
            &seen(ClaimStatus::Confirmed),
            Role::Donor,
            &mut Ids::new([fresh()]),
            now,
        )
        .unwrap()
        .unwrap();
        assert_eq!(plan.records[1], Record::KeyLeft { key: "ana@example.com".into(), receiving: None });
        // The account's only key: a fresh random one takes its place.
        let alone = [keys[0].clone()];
        let only = ClaimAccount { keys: &alone, ..account };
        let plan = observe_claim(
            only,
            None,
            &seen(ClaimStatus::Confirmed),
            Role::Donor,
            &mut Ids::new([fresh()]),
            now,
        )
        .unwrap()
        .unwrap();
        let Record::KeyLeft { receiving: Some(new), .. } = &plan.records[1] else {
            panic!("{:?}", plan.records)
        };
        assert_eq!(new, &fresh().second_uuid().to_string());
    }

    #[test]
    fn a_completed_claim_brings_the_key_once_and_the_same_answer_again_writes_nothing() {
        let account = ClaimAccount {
            id: AccountId::new(3).unwrap(),
            keys: &[],
            receiving_key: "x",
            holder_name: "Ana",
        };
        let now = at("2026-01-10T10:00:01Z");
        let plan = observe_claim(
            account,
            None,
            &seen(ClaimStatus::Completed),
            Role::Claimer,
            &mut Ids::new([fresh()]),
            now,
        )
        .unwrap()
        .unwrap();
        assert!(
            matches!(&plan.records[1], Record::KeyArrived { key, update_to: None, .. } if key == "ana@example.com")
        );
        // Renamed since the claim was opened: the key arrives asking for its entry's update.
        let renamed = ClaimAccount { holder_name: "Recebedora Nova", ..account };
        let plan = observe_claim(
            renamed,
            None,
            &seen(ClaimStatus::Completed),
            Role::Claimer,
            &mut Ids::new([fresh()]),
            now,
        )
        .unwrap()
        .unwrap();
        assert!(
            matches!(&plan.records[1], Record::KeyArrived { update_to: Some(n), .. } if n == "Recebedora Nova")
        );
        let copy = plan.reply;
        assert_eq!(
            observe_claim(
                account,
                Some(&copy),
                &seen(ClaimStatus::Completed),
                Role::Claimer,
                &mut Ids::new([fresh()]),
                now
            )
            .unwrap(),
            None
        );
        // Already the account's key (registered by hand meanwhile): not written twice.
        let keys = [("ana@example.com".to_owned(), "EMAIL".to_owned())];
        let has = ClaimAccount { keys: &keys, ..account };
        let plan = observe_claim(
            has,
            None,
            &seen(ClaimStatus::Completed),
            Role::Claimer,
            &mut Ids::new([fresh()]),
            now,
        )
        .unwrap()
        .unwrap();
        assert_eq!(plan.records.len(), 1);
    }
}
