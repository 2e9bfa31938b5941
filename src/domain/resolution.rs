//! Operators closing what the rail could not: an unmatched rail item, or a payout that got
//! no final status from the SPI past its limit (aged). Money at stake is never moved by one
//! person: one operator proposes, with the evidence (the settlement account's statement, a
//! message of the SPI), and another approves; only the approval has an effect.
//!
//! Pure: the proposal and the approval are decided here from what storage holds, with
//! `now` and the new id given.

use chrono::{DateTime, Utc};

/// The longest evidence text a resolution keeps.
pub const EVIDENCE_LEN_MAX: usize = 2000;
/// The shortest: a resolution says what it went by.
pub const EVIDENCE_LEN_MIN: usize = 10;

/// What a resolution closes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Subject {
    /// An unmatched rail item, by its digest.
    Unmatched(String),
    /// An aged payout, by the id the SPI knows it by (end-to-end or return id).
    Payout(String),
}

/// How it is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// The payout settled at the SPI (the statement shows it): CONFIRMED.
    Settled,
    /// The payout did not settle: ERROR, its amount released.
    Failed,
    /// An unmatched item needs nothing from the books (or its correction was made as an
    /// operator adjustment, named in the evidence).
    Dismissed,
}

impl Outcome {
    pub fn parse(text: &str) -> Option<Outcome> {
        match text {
            "SETTLED" => Some(Outcome::Settled),
            "FAILED" => Some(Outcome::Failed),
            "DISMISSED" => Some(Outcome::Dismissed),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Settled => "SETTLED",
            Outcome::Failed => "FAILED",
            Outcome::Dismissed => "DISMISSED",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Proposed,
    Approved,
}

/// A resolution, proposed or approved.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolution {
    pub id: String,
    pub subject: Subject,
    pub outcome: Outcome,
    pub evidence: String,
    pub status: Status,
    pub proposed_by: String,
    pub proposed_at: DateTime<Utc>,
    pub approved_by: Option<String>,
    pub approved_at: Option<DateTime<Utc>>,
}

/// What the subject is now, as storage holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectState {
    /// It does not exist.
    Missing,
    /// An unmatched item still open, or an aged payout still pending.
    Open,
    /// A payout still waiting for the SPI, within its limit: the SPI may still answer.
    NotAged,
    /// Closed already (resolved, or a payout with its final status).
    Closed,
}

/// Why a proposal or an approval is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no such {0}")]
    Missing(&'static str),
    #[error("the {0} is closed already")]
    Closed(&'static str),
    #[error("the payout is within the SPI's limit: its answer may still come")]
    NotAged,
    #[error("{0}")]
    WrongOutcome(&'static str),
    #[error("the evidence must say what the resolution goes by: {EVIDENCE_LEN_MIN} to {EVIDENCE_LEN_MAX} characters")]
    Evidence,
    #[error("the resolution is approved already")]
    Approved,
    #[error("another operator must approve what {0} proposed")]
    SameOperator(String),
}

fn what(subject: &Subject) -> &'static str {
    match subject {
        Subject::Unmatched(_) => "unmatched item",
        Subject::Payout(_) => "payout",
    }
}

fn check_subject(subject: &Subject, state: SubjectState) -> Result<(), Refusal> {
    match state {
        SubjectState::Missing => Err(Refusal::Missing(what(subject))),
        SubjectState::Closed => Err(Refusal::Closed(what(subject))),
        SubjectState::NotAged => Err(Refusal::NotAged),
        SubjectState::Open => Ok(()),
    }
}

/// A proposal by operator `by`.
pub fn propose(
    id: String,
    subject: Subject,
    outcome: Outcome,
    evidence: &str,
    by: &str,
    state: SubjectState,
    now: DateTime<Utc>,
) -> Result<Resolution, Refusal> {
    let evidence = evidence.trim();
    if !(EVIDENCE_LEN_MIN..=EVIDENCE_LEN_MAX).contains(&evidence.chars().count()) {
        return Err(Refusal::Evidence);
    }
    match (&subject, outcome) {
        (Subject::Payout(_), Outcome::Dismissed) => {
            return Err(Refusal::WrongOutcome("a payout is closed SETTLED or FAILED"))
        }
        (Subject::Unmatched(_), Outcome::Settled | Outcome::Failed) => {
            return Err(Refusal::WrongOutcome(
                "an unmatched item is closed DISMISSED (money is corrected by an operator adjustment)",
            ))
        }
        _ => {}
    }
    check_subject(&subject, state)?;
    Ok(Resolution {
        id,
        subject,
        outcome,
        evidence: evidence.to_owned(),
        status: Status::Proposed,
        proposed_by: by.to_owned(),
        proposed_at: now,
        approved_by: None,
        approved_at: None,
    })
}

/// The approval of `r` by operator `by`: the resolution as it takes effect.
pub fn approve(
    r: &Resolution,
    by: &str,
    state: SubjectState,
    now: DateTime<Utc>,
) -> Result<Resolution, Refusal> {
    if r.status == Status::Approved {
        return Err(Refusal::Approved);
    }
    if r.proposed_by == by {
        return Err(Refusal::SameOperator(by.to_owned()));
    }
    check_subject(&r.subject, state)?;
    Ok(Resolution {
        status: Status::Approved,
        approved_by: Some(by.to_owned()),
        approved_at: Some(now),
        ..r.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-11-28T12:00:00Z".parse().unwrap()
    }

    fn payout() -> Subject {
        Subject::Payout("E1234ABCD202611281200abcdefghijk".into())
    }

    const EVIDENCE: &str = "statement of 28/11 shows it paid";

    #[test]
    fn a_proposal_needs_evidence_an_outcome_fit_for_its_subject_and_an_open_subject() {
        let p = |subject, outcome, evidence: &str, state| {
            propose("r1".into(), subject, outcome, evidence, "ana", state, now())
        };
        let made = p(payout(), Outcome::Settled, EVIDENCE, SubjectState::Open).unwrap();
        assert_eq!(
            (made.status, made.proposed_by.as_str(), made.approved_by),
            (Status::Proposed, "ana", None)
        );
        assert_eq!(p(payout(), Outcome::Settled, "too short", SubjectState::Open), Err(Refusal::Evidence));
        assert!(p(payout(), Outcome::Settled, &"x".repeat(EVIDENCE_LEN_MIN), SubjectState::Open).is_ok());
        assert!(p(payout(), Outcome::Settled, &"x".repeat(EVIDENCE_LEN_MAX), SubjectState::Open).is_ok());
        let long = "x".repeat(EVIDENCE_LEN_MAX + 1);
        assert_eq!(p(payout(), Outcome::Settled, &long, SubjectState::Open), Err(Refusal::Evidence));
        assert!(matches!(
            p(payout(), Outcome::Dismissed, EVIDENCE, SubjectState::Open),
            Err(Refusal::WrongOutcome(_))
        ));
        let item = Subject::Unmatched("ab".into());
        assert!(matches!(
            p(item.clone(), Outcome::Failed, EVIDENCE, SubjectState::Open),
            Err(Refusal::WrongOutcome(_))
        ));
        assert!(p(item.clone(), Outcome::Dismissed, EVIDENCE, SubjectState::Open).is_ok());
        assert_eq!(
            p(item, Outcome::Dismissed, EVIDENCE, SubjectState::Missing),
            Err(Refusal::Missing("unmatched item"))
        );
        assert_eq!(
            p(payout(), Outcome::Failed, EVIDENCE, SubjectState::Closed),
            Err(Refusal::Closed("payout"))
        );
        assert_eq!(p(payout(), Outcome::Failed, EVIDENCE, SubjectState::NotAged), Err(Refusal::NotAged));
    }

    #[test]
    fn only_another_operator_approves_once_while_the_subject_is_still_open() {
        let r = propose("r1".into(), payout(), Outcome::Failed, EVIDENCE, "ana", SubjectState::Open, now())
            .unwrap();
        assert_eq!(approve(&r, "ana", SubjectState::Open, now()), Err(Refusal::SameOperator("ana".into())));
        assert_eq!(approve(&r, "bia", SubjectState::Closed, now()), Err(Refusal::Closed("payout")));
        let done = approve(&r, "bia", SubjectState::Open, now()).unwrap();
        assert_eq!((done.status, done.approved_by.as_deref()), (Status::Approved, Some("bia")));
        assert_eq!((done.outcome, done.evidence.as_str()), (Outcome::Failed, EVIDENCE));
        assert_eq!(approve(&done, "caio", SubjectState::Open, now()), Err(Refusal::Approved));
    }
}
