//! Key claims of the DICT (API 2.12.1, "Reivindicação"): a key moving to an account of this
//! gateway from another institution (pixgw the claimer) or leaving one (pixgw the donor),
//! the rules of each step, the steps this gateway owes by itself, and the claim's JSON.
//!
//! The DICT holds a claim; an account keeps its copy, as the DICT last answered it. The
//! copy only moves forward: an answer older than the copy (by `LastModified`) changes
//! nothing, and `CANCELLED` and `COMPLETED` are final.
//!
//! Life cycle (the DICT's): `OPEN` (made by the claimer) → `WAITING_RESOLUTION` (the donor
//! acknowledged it) → `CONFIRMED` (the donor gave the key up: its entry is gone) →
//! `COMPLETED` (the claimer's entry is made); `CANCELLED` from `OPEN`, `WAITING_RESOLUTION`
//! and, for some reasons, `CONFIRMED`.
//!
//! The keys follow the claim: the donor's account stops receiving on the key once the claim
//! is `CONFIRMED` (or seen later, `COMPLETED`); the claimer's account starts once it is
//! `COMPLETED`.
//!
//! The DICT moves nothing by itself at a deadline: each deadline's outcome is a step a
//! participant takes with reason `DEFAULT_OPERATION` ([`duty`]). This gateway, as donor,
//! acknowledges every claim at once, cancels a portability its client has not answered by
//! the end of the resolution period and confirms an ownership claim its client has not
//! contested by then; as claimer, it completes a confirmed claim as soon as the DICT lets it.
//! Every rule here takes `now`; nothing reads a clock.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::events::iso;

/// Claims one list of an account's claims answers at most.
pub const CLAIMS_PAGE_MAX: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ClaimType {
    /// The key changed hands (a phone number): another person claims it.
    Ownership,
    /// The same owner moves the key to another institution.
    Portability,
}

impl ClaimType {
    pub const ALL: [ClaimType; 2] = [ClaimType::Ownership, ClaimType::Portability];

    pub fn as_str(self) -> &'static str {
        match self {
            ClaimType::Ownership => "OWNERSHIP",
            ClaimType::Portability => "PORTABILITY",
        }
    }

    pub fn parse(text: &str) -> Option<ClaimType> {
        ClaimType::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ClaimStatus {
    Open,
    WaitingResolution,
    Confirmed,
    Cancelled,
    Completed,
}

impl ClaimStatus {
    pub const ALL: [ClaimStatus; 5] = [
        ClaimStatus::Open,
        ClaimStatus::WaitingResolution,
        ClaimStatus::Confirmed,
        ClaimStatus::Cancelled,
        ClaimStatus::Completed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClaimStatus::Open => "OPEN",
            ClaimStatus::WaitingResolution => "WAITING_RESOLUTION",
            ClaimStatus::Confirmed => "CONFIRMED",
            ClaimStatus::Cancelled => "CANCELLED",
            ClaimStatus::Completed => "COMPLETED",
        }
    }

    pub fn parse(text: &str) -> Option<ClaimStatus> {
        ClaimStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// No step moves it again.
    pub fn is_final(self) -> bool {
        matches!(self, ClaimStatus::Cancelled | ClaimStatus::Completed)
    }

    /// Whether the DICT's life cycle goes from `self` to `to`.
    fn leads_to(self, to: ClaimStatus) -> bool {
        use ClaimStatus::*;
        matches!(
            (self, to),
            (Open, WaitingResolution)
                | (Open, Cancelled)
                | (WaitingResolution, Confirmed)
                | (WaitingResolution, Cancelled)
                | (Confirmed, Completed)
                | (Confirmed, Cancelled)
                // A step seen late: the copy skips what it missed.
                | (Open, Confirmed)
                | (Open, Completed)
                | (WaitingResolution, Completed)
        )
    }
}

/// This gateway's side of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Role {
    /// The key comes to an account of this gateway.
    Claimer,
    /// The key leaves an account of this gateway.
    Donor,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Claimer => "CLAIMER",
            Role::Donor => "DONOR",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        [Role::Claimer, Role::Donor].into_iter().find(|r| r.as_str() == text)
    }
}

/// The reasons of a claim's confirmation or cancellation (`ClaimOperationReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Reason {
    UserRequested,
    AccountClosure,
    Fraud,
    DefaultOperation,
    Reconciliation,
    RfbValidation,
    /// The DICT's own, when a participant leaves: no participant sends it.
    ParticipantExclusion,
}

impl Reason {
    pub const ALL: [Reason; 7] = [
        Reason::UserRequested,
        Reason::AccountClosure,
        Reason::Fraud,
        Reason::DefaultOperation,
        Reason::Reconciliation,
        Reason::RfbValidation,
        Reason::ParticipantExclusion,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::UserRequested => "USER_REQUESTED",
            Reason::AccountClosure => "ACCOUNT_CLOSURE",
            Reason::Fraud => "FRAUD",
            Reason::DefaultOperation => "DEFAULT_OPERATION",
            Reason::Reconciliation => "RECONCILIATION",
            Reason::RfbValidation => "RFB_VALIDATION",
            Reason::ParticipantExclusion => "PARTICIPANT_EXCLUSION",
        }
    }

    pub fn parse(text: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == text)
    }
}

/// A step of a claim, taken at the DICT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Acknowledge,
    Confirm(Reason),
    Cancel(Reason),
    Complete,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Acknowledge => "acknowledge",
            Step::Confirm(_) => "confirm",
            Step::Cancel(_) => "cancel",
            Step::Complete => "complete",
        }
    }

    pub fn reason(self) -> Option<Reason> {
        match self {
            Step::Confirm(r) | Step::Cancel(r) => Some(r),
            Step::Acknowledge | Step::Complete => None,
        }
    }
}

/// Why a claim or a step of one is refused here, before the DICT is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// The key type cannot be claimed so (an EVP never; ownership only of a phone).
    #[error("a {key_type} key cannot be claimed by {claim_type}")]
    KeyTypeNotClaimable { key_type: &'static str, claim_type: &'static str },
    /// The step is not this side's to take, or not with this reason.
    #[error("the {role} cannot {step} a {claim_type} claim with reason {reason}")]
    NotYours { role: &'static str, step: &'static str, claim_type: &'static str, reason: &'static str },
    /// The claim's status does not allow the step.
    #[error("a claim {status} cannot be {step}ed")]
    WrongStatus { status: &'static str, step: &'static str },
    /// `DEFAULT_OPERATION` before the resolution period ends.
    #[error("the resolution period ends at {0}")]
    ResolutionPeriodNotEnded(DateTime<Utc>),
    /// An ownership claim completed before its completion period ends.
    #[error("the completion period ends at {0}")]
    CompletionPeriodNotEnded(DateTime<Utc>),
}

impl ClaimError {
    /// The error code clients branch on.
    pub fn code(self) -> &'static str {
        match self {
            ClaimError::KeyTypeNotClaimable { .. } => "CLAIM_KEY_TYPE_INVALID",
            ClaimError::NotYours { .. } => "CLAIM_STEP_NOT_ALLOWED",
            ClaimError::WrongStatus { .. } => "CLAIM_STATUS_INVALID",
            ClaimError::ResolutionPeriodNotEnded(_) => "CLAIM_RESOLUTION_PERIOD_NOT_ENDED",
            ClaimError::CompletionPeriodNotEnded(_) => "CLAIM_COMPLETION_PERIOD_NOT_ENDED",
        }
    }
}

/// Whether a key of this type may be claimed so: a portability of any key but an EVP, an
/// ownership claim of a phone only (API 2.12.1; CPF and CNPJ have one owner, e-mail
/// ownership claims ended with API 2.x).
pub fn claimable(key_type: &str, claim_type: ClaimType) -> Result<(), ClaimError> {
    let ok = match claim_type {
        ClaimType::Portability => matches!(key_type, "CPF" | "CNPJ" | "PHONE" | "EMAIL"),
        ClaimType::Ownership => key_type == "PHONE",
    };
    if ok {
        return Ok(());
    }
    let key_type = match key_type {
        "CPF" => "CPF",
        "CNPJ" => "CNPJ",
        "PHONE" => "PHONE",
        "EMAIL" => "EMAIL",
        _ => "EVP",
    };
    Err(ClaimError::KeyTypeNotClaimable { key_type, claim_type: claim_type.as_str() })
}

/// A claim as the DICT answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The DICT's id (a UUID).
    pub id: String,
    pub claim_type: ClaimType,
    pub key: String,
    pub key_type: String,
    /// The claimer's ISPB and the account number it names.
    pub claimer: String,
    pub claimer_account: String,
    /// The claimer's tax id and name.
    pub claimer_tax_id: String,
    pub claimer_name: String,
    /// The CID of the claimer's entry, once the claim is completed by this gateway (it
    /// knows the completion's `RequestId`).
    pub claimer_cid: Option<String>,
    /// The `RequestId` that CID is computed under (an update of the entry keeps it).
    pub claimer_request_id: Option<uuid::Uuid>,
    pub donor: String,
    pub status: ClaimStatus,
    pub resolution_end: DateTime<Utc>,
    pub completion_end: Option<DateTime<Utc>>,
    pub modified: DateTime<Utc>,
    pub confirm_reason: Option<Reason>,
    pub cancel_reason: Option<Reason>,
    pub cancelled_by: Option<Role>,
}

/// A step of the claim, as the account's copy recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct History {
    pub status: ClaimStatus,
    /// When the DICT made the change (its `LastModified`).
    pub at: DateTime<Utc>,
}

/// An account's copy of a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    /// The id of its record in the account (a local id).
    pub local_id: u64,
    pub account_id: u64,
    /// The DICT's id.
    pub id: String,
    pub role: Role,
    pub claim_type: ClaimType,
    pub key: String,
    pub key_type: String,
    /// The other participant's ISPB.
    pub counterpart: String,
    pub status: ClaimStatus,
    pub resolution_end: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_end: Option<DateTime<Utc>>,
    /// The DICT's `LastModified` of the status the copy holds.
    pub modified: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_reason: Option<Reason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_reason: Option<Reason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<Role>,
    /// Whether the key moved for this account: left it (donor) or arrived (claimer).
    #[serde(default)]
    pub key_moved: bool,
    /// When this gateway first recorded the claim.
    pub created_at: DateTime<Utc>,
    pub history: Vec<History>,
}

/// What the key does when a claim's copy changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMove {
    /// The key leaves the donor's account.
    Leaves,
    /// The key arrives at the claimer's account.
    Arrives,
}

/// A change of an account's copy: the copy as it now is, what the key does, and the event
/// that tells the client.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub claim: Claim,
    pub key: Option<KeyMove>,
    /// The webhook's `event` (`ClaimOpened`, `ClaimReceived`, `ClaimWaitingResolution`,
    /// `ClaimConfirmed`, `ClaimCancelled`, `ClaimCompleted`).
    pub event: &'static str,
    /// A confirmation the copy never saw (the DICT's claim was completed, and says why it
    /// was confirmed, before the copy heard of the confirmation): its webhook's event and the
    /// claim as that step left it, told before [`Change::event`].
    pub skipped: Option<(&'static str, Claim)>,
}

fn event_name(role: Role, status: ClaimStatus, first: bool) -> &'static str {
    match (status, first) {
        (ClaimStatus::Open, _) if role == Role::Donor => "ClaimReceived",
        (ClaimStatus::Open, _) => "ClaimOpened",
        (ClaimStatus::WaitingResolution, true) if role == Role::Donor => "ClaimReceived",
        (ClaimStatus::WaitingResolution, _) => "ClaimWaitingResolution",
        (ClaimStatus::Confirmed, _) => "ClaimConfirmed",
        (ClaimStatus::Cancelled, _) => "ClaimCancelled",
        (ClaimStatus::Completed, _) => "ClaimCompleted",
    }
}

/// What the key does at `status` for `role`, if it has not moved yet.
fn key_move(role: Role, status: ClaimStatus, moved: bool) -> Option<KeyMove> {
    if moved {
        return None;
    }
    match (role, status) {
        (Role::Donor, ClaimStatus::Confirmed | ClaimStatus::Completed) => Some(KeyMove::Leaves),
        (Role::Claimer, ClaimStatus::Completed) => Some(KeyMove::Arrives),
        _ => None,
    }
}

/// The account's copy after the DICT answered `seen`: `None` when the answer says nothing
/// new (the same status, an older answer, or a final copy). `local_id` names a new copy;
/// `now` is when this gateway records it.
pub fn observe(
    existing: Option<&Claim>,
    seen: &Seen,
    role: Role,
    account_id: u64,
    local_id: u64,
    now: DateTime<Utc>,
) -> Option<Change> {
    let counterpart = match role {
        Role::Claimer => seen.donor.clone(),
        Role::Donor => seen.claimer.clone(),
    };
    let Some(old) = existing else {
        let key = key_move(role, seen.status, false);
        let claim = Claim {
            local_id,
            account_id,
            id: seen.id.clone(),
            role,
            claim_type: seen.claim_type,
            key: seen.key.clone(),
            key_type: seen.key_type.clone(),
            counterpart,
            status: seen.status,
            resolution_end: seen.resolution_end,
            completion_end: seen.completion_end,
            modified: seen.modified,
            confirm_reason: seen.confirm_reason,
            cancel_reason: seen.cancel_reason,
            cancelled_by: seen.cancelled_by,
            key_moved: key.is_some(),
            created_at: now,
            history: vec![History { status: seen.status, at: seen.modified }],
        };
        return Some(Change { event: event_name(role, seen.status, true), claim, key, skipped: None });
    };
    let moves_on = old.status.leads_to(seen.status) && seen.modified >= old.modified;
    // The same status with new periods (a donor's confirmation moves the completion
    // period forward) is taken too, without an event.
    let periods_moved = old.status == seen.status
        && seen.modified >= old.modified
        && (old.completion_end != seen.completion_end || old.resolution_end != seen.resolution_end);
    if !moves_on && !periods_moved {
        return None;
    }
    let mut claim = old.clone();
    claim.resolution_end = seen.resolution_end;
    claim.completion_end = seen.completion_end;
    claim.modified = seen.modified;
    if !moves_on {
        return Some(Change { claim, key: None, event: "", skipped: None });
    }
    // A completed claim with a confirmation reason was confirmed: a copy that missed the
    // confirmation (its own step's answer recorded after the claimer's completion, or both
    // between two lists) records it first, so the history and the webhooks tell every step.
    let skipped = (seen.status == ClaimStatus::Completed
        && matches!(old.status, ClaimStatus::Open | ClaimStatus::WaitingResolution)
        && seen.confirm_reason.is_some())
    .then(|| {
        let mut confirmed = claim.clone();
        confirmed.status = ClaimStatus::Confirmed;
        confirmed.confirm_reason = seen.confirm_reason;
        confirmed.key_moved |= key_move(role, ClaimStatus::Confirmed, old.key_moved).is_some();
        confirmed.history.push(History { status: ClaimStatus::Confirmed, at: seen.modified });
        (event_name(role, ClaimStatus::Confirmed, false), confirmed)
    });
    if let Some((_, confirmed)) = &skipped {
        claim.history = confirmed.history.clone();
    }
    claim.status = seen.status;
    claim.confirm_reason = seen.confirm_reason.or(old.confirm_reason);
    claim.cancel_reason = seen.cancel_reason;
    claim.cancelled_by = seen.cancelled_by;
    let key = key_move(role, seen.status, old.key_moved);
    claim.key_moved |= key.is_some();
    claim.history.push(History { status: seen.status, at: seen.modified });
    Some(Change { event: event_name(role, seen.status, false), claim, key, skipped })
}

/// Whether this side may take `step` on the claim now (API 2.12.1, the rules of
/// `acknowledgeClaim`, `confirmClaim`, `cancelClaim` and `completeClaim`).
pub fn check(claim: &Claim, step: Step, now: DateTime<Utc>) -> Result<(), ClaimError> {
    use ClaimStatus::*;
    let role = claim.role;
    let not_yours = |reason: Option<Reason>| ClaimError::NotYours {
        role: match role {
            Role::Claimer => "claimer",
            Role::Donor => "donor",
        },
        step: step.name(),
        claim_type: claim.claim_type.as_str(),
        reason: reason.map_or("none", Reason::as_str),
    };
    let wrong_status = || ClaimError::WrongStatus { status: claim.status.as_str(), step: step.name() };
    let resolution_ended = || {
        if now >= claim.resolution_end {
            Ok(())
        } else {
            Err(ClaimError::ResolutionPeriodNotEnded(claim.resolution_end))
        }
    };
    match step {
        Step::Acknowledge => {
            if role != Role::Donor {
                return Err(not_yours(None));
            }
            if !matches!(claim.status, Open | WaitingResolution) {
                return Err(wrong_status());
            }
            Ok(())
        }
        Step::Confirm(reason) => {
            let allowed = role == Role::Donor
                && match claim.claim_type {
                    ClaimType::Ownership => {
                        matches!(reason, Reason::UserRequested | Reason::DefaultOperation)
                    }
                    ClaimType::Portability => {
                        matches!(reason, Reason::UserRequested | Reason::AccountClosure)
                    }
                };
            if !allowed {
                return Err(not_yours(Some(reason)));
            }
            if claim.status != WaitingResolution {
                return Err(wrong_status());
            }
            if reason == Reason::DefaultOperation {
                resolution_ended()?;
            }
            Ok(())
        }
        Step::Cancel(reason) => {
            let (allowed, statuses): (bool, &[ClaimStatus]) = match claim.claim_type {
                ClaimType::Portability => {
                    let allowed = match reason {
                        Reason::UserRequested | Reason::Fraud => true,
                        Reason::DefaultOperation => role == Role::Donor,
                        Reason::AccountClosure | Reason::Reconciliation | Reason::RfbValidation => {
                            role == Role::Claimer
                        }
                        Reason::ParticipantExclusion => false,
                    };
                    let late = role == Role::Claimer
                        && matches!(reason, Reason::Fraud | Reason::Reconciliation | Reason::RfbValidation);
                    let statuses: &[ClaimStatus] = match (late, reason) {
                        (true, Reason::Reconciliation) => &[Open, Confirmed],
                        (true, _) => &[Open, WaitingResolution, Confirmed],
                        _ => &[Open, WaitingResolution],
                    };
                    (allowed, statuses)
                }
                ClaimType::Ownership => {
                    let allowed = match role {
                        Role::Claimer => reason != Reason::ParticipantExclusion,
                        Role::Donor => reason == Reason::Fraud,
                    };
                    (allowed, &[Open, WaitingResolution, Confirmed])
                }
            };
            if !allowed {
                return Err(not_yours(Some(reason)));
            }
            if !statuses.contains(&claim.status) {
                return Err(wrong_status());
            }
            if reason == Reason::DefaultOperation {
                resolution_ended()?;
            }
            Ok(())
        }
        Step::Complete => {
            if role != Role::Claimer {
                return Err(not_yours(None));
            }
            if claim.status != Confirmed {
                return Err(wrong_status());
            }
            match (claim.claim_type, claim.completion_end) {
                (ClaimType::Ownership, Some(end)) if now < end => {
                    Err(ClaimError::CompletionPeriodNotEnded(end))
                }
                _ => Ok(()),
            }
        }
    }
}

/// The step this gateway owes the claim by itself now, if any: as donor, the
/// acknowledgement of a claim just opened, and at the end of the resolution period the
/// default outcome (a portability unanswered is cancelled, an ownership claim uncontested is
/// confirmed); as claimer, the completion of a confirmed claim once the DICT allows it.
pub fn duty(claim: &Claim, now: DateTime<Utc>) -> Option<Step> {
    let step = match (claim.role, claim.status, claim.claim_type) {
        (Role::Donor, ClaimStatus::Open, _) => Step::Acknowledge,
        (Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Portability) => {
            Step::Cancel(Reason::DefaultOperation)
        }
        (Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Ownership) => {
            Step::Confirm(Reason::DefaultOperation)
        }
        (Role::Claimer, ClaimStatus::Confirmed, _) => Step::Complete,
        _ => return None,
    };
    check(claim, step, now).ok().map(|_| step)
}

impl Claim {
    /// The claim as clients read it.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "role": self.role.as_str(),
            "type": self.claim_type.as_str(),
            "key": self.key,
            "keyType": self.key_type,
            "counterpartIspb": self.counterpart,
            "status": self.status.as_str(),
            "resolutionPeriodEnd": iso(self.resolution_end),
            "completionPeriodEnd": self.completion_end.map(iso),
            "lastModified": iso(self.modified),
            "confirmReason": self.confirm_reason.map(Reason::as_str),
            "cancelReason": self.cancel_reason.map(Reason::as_str),
            "cancelledBy": self.cancelled_by.map(Role::as_str),
            "keyMoved": self.key_moved,
            "createdAt": iso(self.created_at),
            "history": self.history.iter().map(|h| json!({"status": h.status.as_str(), "at": iso(h.at)})).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn seen(status: ClaimStatus, claim_type: ClaimType, modified: &str) -> Seen {
        Seen {
            id: "c8d5b8a2-1b54-4cbd-9a51-0a4b0e0f3e6a".into(),
            claim_type,
            key: "+5511987654321".into(),
            key_type: "PHONE".into(),
            claimer: "99999A04".into(),
            claimer_account: "1".into(),
            claimer_tax_id: "52998224725".into(),
            claimer_name: "Recebedor".into(),
            claimer_cid: None,
            claimer_request_id: None,
            donor: "1234ABCD".into(),
            status,
            resolution_end: at("2026-01-17T10:00:00Z"),
            completion_end: (claim_type == ClaimType::Ownership).then(|| at("2026-01-24T10:00:00Z")),
            modified: at(modified),
            confirm_reason: None,
            cancel_reason: None,
            cancelled_by: None,
        }
    }

    fn copy(role: Role, status: ClaimStatus, claim_type: ClaimType) -> Claim {
        observe(
            None,
            &seen(status, claim_type, "2026-01-10T10:00:00Z"),
            role,
            7,
            70,
            at("2026-01-10T10:00:01Z"),
        )
        .unwrap()
        .claim
    }

    #[test]
    fn a_claim_seen_first_is_recorded_with_its_event_and_no_key_move_before_confirmation() {
        let c = observe(
            None,
            &seen(ClaimStatus::Open, ClaimType::Portability, "2026-01-10T10:00:00Z"),
            Role::Donor,
            7,
            70,
            at("2026-01-10T10:00:01Z"),
        )
        .unwrap();
        assert_eq!(c.event, "ClaimReceived");
        assert_eq!(c.key, None);
        assert_eq!((c.claim.local_id, c.claim.account_id, c.claim.counterpart.as_str()), (70, 7, "99999A04"));
        let mine = observe(
            None,
            &seen(ClaimStatus::Open, ClaimType::Portability, "2026-01-10T10:00:00Z"),
            Role::Claimer,
            7,
            70,
            at("2026-01-10T10:00:01Z"),
        )
        .unwrap();
        assert_eq!((mine.event, mine.claim.counterpart.as_str()), ("ClaimOpened", "1234ABCD"));
    }

    #[test]
    fn a_completion_seen_before_its_confirmation_tells_the_confirmation_first() {
        let donor = copy(Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Ownership);
        let completed = Seen {
            confirm_reason: Some(Reason::UserRequested),
            ..seen(ClaimStatus::Completed, ClaimType::Ownership, "2026-01-11T10:00:00Z")
        };
        let c = observe(Some(&donor), &completed, Role::Donor, 7, 0, at("2026-01-11T10:00:01Z")).unwrap();
        let statuses: Vec<ClaimStatus> = c.claim.history.iter().map(|h| h.status).collect();
        use ClaimStatus::*;
        assert_eq!(statuses, [WaitingResolution, Confirmed, Completed]);
        assert_eq!((c.event, c.key, c.claim.key_moved), ("ClaimCompleted", Some(KeyMove::Leaves), true));
        let (event, confirmed) = c.skipped.clone().unwrap();
        assert_eq!((event, confirmed.status, confirmed.history.len()), ("ClaimConfirmed", Confirmed, 2));
        // The confirmation's own answer, recorded after: old news.
        let late = seen(Confirmed, ClaimType::Ownership, "2026-01-11T09:59:00Z");
        assert!(observe(Some(&c.claim), &late, Role::Donor, 7, 0, at("2026-01-11T10:00:02Z")).is_none());
        // A completion with no confirmation reason (or from a confirmed copy) skips nothing.
        let plain = seen(Completed, ClaimType::Ownership, "2026-01-11T10:00:00Z");
        assert!(observe(Some(&donor), &plain, Role::Donor, 7, 0, at("2026-01-11T10:00:01Z"))
            .unwrap()
            .skipped
            .is_none());
        let was_confirmed = copy(Role::Donor, Confirmed, ClaimType::Ownership);
        let from_confirmed =
            observe(Some(&was_confirmed), &completed, Role::Donor, 7, 0, at("2026-01-11T10:00:01Z"));
        assert!(from_confirmed.unwrap().skipped.is_none());
    }

    #[test]
    fn the_key_leaves_the_donor_at_confirmation_and_arrives_at_the_claimer_at_completion_once() {
        let donor = copy(Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Portability);
        let confirmed = seen(ClaimStatus::Confirmed, ClaimType::Portability, "2026-01-11T10:00:00Z");
        let c = observe(Some(&donor), &confirmed, Role::Donor, 7, 0, at("2026-01-11T10:00:01Z")).unwrap();
        assert_eq!((c.key, c.event), (Some(KeyMove::Leaves), "ClaimConfirmed"));
        assert!(c.claim.key_moved);
        let completed = seen(ClaimStatus::Completed, ClaimType::Portability, "2026-01-11T11:00:00Z");
        let c2 = observe(Some(&c.claim), &completed, Role::Donor, 7, 0, at("2026-01-11T11:00:01Z")).unwrap();
        assert_eq!(c2.key, None, "the key left once");
        let claimer = copy(Role::Claimer, ClaimStatus::Confirmed, ClaimType::Portability);
        let c3 =
            observe(Some(&claimer), &completed, Role::Claimer, 7, 0, at("2026-01-11T11:00:01Z")).unwrap();
        assert_eq!((c3.key, c3.event), (Some(KeyMove::Arrives), "ClaimCompleted"));
        // A donor that first hears of the claim when it is completed lets the key go.
        let late = observe(None, &completed, Role::Donor, 7, 71, at("2026-01-12T00:00:00Z")).unwrap();
        assert_eq!(late.key, Some(KeyMove::Leaves));
    }

    #[test]
    fn an_answer_older_than_the_copy_or_the_same_or_after_a_final_status_changes_nothing() {
        let c = copy(Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Portability);
        let same = seen(ClaimStatus::WaitingResolution, ClaimType::Portability, "2026-01-10T10:00:00Z");
        assert_eq!(observe(Some(&c), &same, Role::Donor, 7, 0, at("2026-01-12T00:00:00Z")), None);
        let back = seen(ClaimStatus::Open, ClaimType::Portability, "2026-01-10T11:00:00Z");
        assert_eq!(observe(Some(&c), &back, Role::Donor, 7, 0, at("2026-01-12T00:00:00Z")), None);
        let older = seen(ClaimStatus::Confirmed, ClaimType::Portability, "2026-01-09T10:00:00Z");
        assert_eq!(observe(Some(&c), &older, Role::Donor, 7, 0, at("2026-01-12T00:00:00Z")), None);
        let done = copy(Role::Donor, ClaimStatus::Cancelled, ClaimType::Portability);
        let after = seen(ClaimStatus::Completed, ClaimType::Portability, "2026-01-12T10:00:00Z");
        assert_eq!(observe(Some(&done), &after, Role::Donor, 7, 0, at("2026-01-12T11:00:00Z")), None);
    }

    #[test]
    fn a_confirmation_that_moves_the_completion_period_is_taken_without_an_event() {
        let c = copy(Role::Claimer, ClaimStatus::Confirmed, ClaimType::Ownership);
        let mut s = seen(ClaimStatus::Confirmed, ClaimType::Ownership, "2026-01-10T10:00:00Z");
        s.completion_end = Some(at("2026-01-10T10:00:00Z"));
        let ch = observe(Some(&c), &s, Role::Claimer, 7, 0, at("2026-01-10T10:00:02Z")).unwrap();
        assert_eq!((ch.event, ch.key), ("", None));
        assert_eq!(ch.claim.completion_end, s.completion_end);
        assert_eq!(ch.claim.history.len(), 1);
    }

    #[test]
    fn only_a_phone_can_be_claimed_by_ownership_and_an_evp_never() {
        for (kt, own, port) in [
            ("PHONE", true, true),
            ("EMAIL", false, true),
            ("CPF", false, true),
            ("CNPJ", false, true),
            ("EVP", false, false),
        ] {
            assert_eq!(claimable(kt, ClaimType::Ownership).is_ok(), own, "{kt}");
            assert_eq!(claimable(kt, ClaimType::Portability).is_ok(), port, "{kt}");
        }
    }

    #[test]
    fn confirm_is_the_donors_in_waiting_resolution_with_the_reasons_of_its_type() {
        let now = at("2026-01-11T00:00:00Z");
        let p = copy(Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Portability);
        assert!(check(&p, Step::Confirm(Reason::UserRequested), now).is_ok());
        assert!(check(&p, Step::Confirm(Reason::AccountClosure), now).is_ok());
        assert!(matches!(
            check(&p, Step::Confirm(Reason::DefaultOperation), now),
            Err(ClaimError::NotYours { .. })
        ));
        let o = copy(Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Ownership);
        assert!(check(&o, Step::Confirm(Reason::UserRequested), now).is_ok());
        assert!(matches!(
            check(&o, Step::Confirm(Reason::AccountClosure), now),
            Err(ClaimError::NotYours { .. })
        ));
        assert_eq!(
            check(&o, Step::Confirm(Reason::DefaultOperation), now),
            Err(ClaimError::ResolutionPeriodNotEnded(o.resolution_end))
        );
        // At the end of the period exactly, and after.
        assert!(check(&o, Step::Confirm(Reason::DefaultOperation), o.resolution_end).is_ok());
        let open = copy(Role::Donor, ClaimStatus::Open, ClaimType::Portability);
        assert!(matches!(
            check(&open, Step::Confirm(Reason::UserRequested), now),
            Err(ClaimError::WrongStatus { .. })
        ));
        let claimer = copy(Role::Claimer, ClaimStatus::WaitingResolution, ClaimType::Portability);
        assert!(matches!(
            check(&claimer, Step::Confirm(Reason::UserRequested), now),
            Err(ClaimError::NotYours { .. })
        ));
    }

    #[test]
    fn a_portability_is_cancelled_by_each_side_with_its_reasons_and_late_only_by_the_claimer() {
        let now = at("2026-01-11T00:00:00Z");
        let cases = [
            (Reason::UserRequested, true, true),
            (Reason::AccountClosure, false, true),
            (Reason::Fraud, true, true),
            (Reason::Reconciliation, false, true),
            (Reason::RfbValidation, false, true),
            (Reason::ParticipantExclusion, false, false),
        ];
        for (reason, donor_may, claimer_may) in cases {
            let d = copy(Role::Donor, ClaimStatus::Open, ClaimType::Portability);
            let c = copy(Role::Claimer, ClaimStatus::Open, ClaimType::Portability);
            assert_eq!(check(&d, Step::Cancel(reason), now).is_ok(), donor_may, "donor {reason:?}");
            assert_eq!(check(&c, Step::Cancel(reason), now).is_ok(), claimer_may, "claimer {reason:?}");
        }
        let waiting = copy(Role::Claimer, ClaimStatus::WaitingResolution, ClaimType::Portability);
        assert!(matches!(
            check(&waiting, Step::Cancel(Reason::Reconciliation), now),
            Err(ClaimError::WrongStatus { .. })
        ));
        let confirmed = copy(Role::Claimer, ClaimStatus::Confirmed, ClaimType::Portability);
        assert!(check(&confirmed, Step::Cancel(Reason::Fraud), now).is_ok());
        assert!(check(&confirmed, Step::Cancel(Reason::Reconciliation), now).is_ok());
        assert!(matches!(
            check(&confirmed, Step::Cancel(Reason::UserRequested), now),
            Err(ClaimError::WrongStatus { .. })
        ));
        let d = copy(Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Portability);
        assert!(matches!(
            check(&d, Step::Cancel(Reason::DefaultOperation), now),
            Err(ClaimError::ResolutionPeriodNotEnded(_))
        ));
        assert!(check(&d, Step::Cancel(Reason::DefaultOperation), d.resolution_end).is_ok());
    }

    #[test]
    fn an_ownership_claim_is_cancelled_by_the_claimer_and_by_the_donor_only_for_fraud() {
        let now = at("2026-01-11T00:00:00Z");
        let d = copy(Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Ownership);
        assert!(check(&d, Step::Cancel(Reason::Fraud), now).is_ok());
        assert!(matches!(
            check(&d, Step::Cancel(Reason::UserRequested), now),
            Err(ClaimError::NotYours { .. })
        ));
        let c = copy(Role::Claimer, ClaimStatus::Confirmed, ClaimType::Ownership);
        assert!(check(&c, Step::Cancel(Reason::UserRequested), now).is_ok());
        let done = copy(Role::Claimer, ClaimStatus::Completed, ClaimType::Ownership);
        assert!(matches!(
            check(&done, Step::Cancel(Reason::UserRequested), now),
            Err(ClaimError::WrongStatus { .. })
        ));
    }

    #[test]
    fn an_ownership_claim_completes_after_its_completion_period_and_a_portability_at_once() {
        let o = copy(Role::Claimer, ClaimStatus::Confirmed, ClaimType::Ownership);
        let end = o.completion_end.unwrap();
        assert_eq!(
            check(&o, Step::Complete, end - chrono::Duration::seconds(1)),
            Err(ClaimError::CompletionPeriodNotEnded(end))
        );
        assert!(check(&o, Step::Complete, end).is_ok());
        let p = copy(Role::Claimer, ClaimStatus::Confirmed, ClaimType::Portability);
        assert!(check(&p, Step::Complete, at("2026-01-10T10:00:02Z")).is_ok());
        let d = copy(Role::Donor, ClaimStatus::Confirmed, ClaimType::Portability);
        assert!(matches!(check(&d, Step::Complete, end), Err(ClaimError::NotYours { .. })));
        let w = copy(Role::Claimer, ClaimStatus::WaitingResolution, ClaimType::Portability);
        assert!(matches!(check(&w, Step::Complete, end), Err(ClaimError::WrongStatus { .. })));
    }

    #[test]
    fn the_gateway_owes_an_acknowledgement_at_once_and_the_default_outcome_at_the_deadline() {
        let before = at("2026-01-11T00:00:00Z");
        let open = copy(Role::Donor, ClaimStatus::Open, ClaimType::Ownership);
        assert_eq!(duty(&open, before), Some(Step::Acknowledge));
        let p = copy(Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Portability);
        assert_eq!(duty(&p, before), None);
        assert_eq!(duty(&p, p.resolution_end), Some(Step::Cancel(Reason::DefaultOperation)));
        let o = copy(Role::Donor, ClaimStatus::WaitingResolution, ClaimType::Ownership);
        assert_eq!(duty(&o, o.resolution_end), Some(Step::Confirm(Reason::DefaultOperation)));
        let c = copy(Role::Claimer, ClaimStatus::Confirmed, ClaimType::Ownership);
        assert_eq!(duty(&c, before), None);
        assert_eq!(duty(&c, c.completion_end.unwrap()), Some(Step::Complete));
        let cp = copy(Role::Claimer, ClaimStatus::Confirmed, ClaimType::Portability);
        assert_eq!(duty(&cp, before), Some(Step::Complete));
        for s in [
            ClaimStatus::Open,
            ClaimStatus::WaitingResolution,
            ClaimStatus::Cancelled,
            ClaimStatus::Completed,
        ] {
            assert_eq!(duty(&copy(Role::Claimer, s, ClaimType::Portability), before), None, "{s:?}");
        }
        for s in [ClaimStatus::Confirmed, ClaimStatus::Cancelled, ClaimStatus::Completed] {
            assert_eq!(duty(&copy(Role::Donor, s, ClaimType::Portability), p.resolution_end), None, "{s:?}");
        }
    }

    #[test]
    fn every_status_type_role_and_reason_reads_back_from_its_name() {
        for s in ClaimStatus::ALL {
            assert_eq!(ClaimStatus::parse(s.as_str()), Some(s));
        }
        for t in ClaimType::ALL {
            assert_eq!(ClaimType::parse(t.as_str()), Some(t));
        }
        for r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(r));
        }
        for r in [Role::Claimer, Role::Donor] {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(ClaimStatus::parse("open"), None);
    }
}
