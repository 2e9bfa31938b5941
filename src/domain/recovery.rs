//! MED 2.0 funds recoveries, the payer's side (docs/decisions.md "MED 2.0"): a client
//! contests a Pix it sent, the gateway opens a funds recovery in the DICT, and follows it
//! to its end while the DICT traces the money, the institutions it reached analyse and
//! return it, and the returns come back to the client's account.
//!
//! Invariants: one recovery per payment (the DICT's rule too); a recovery only moves forward
//! through the DICT's statuses ([`RecoveryStatus::rank`]), so a late or repeated answer
//! changes nothing; the money itself comes back as returns of the original payment, which
//! the rail credits like any return, never by this record.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::events::iso;
use super::money::Money;
use super::transaction::{Transaction, TxKind, TxStatus};

/// Days after a payment within which its payer may contest it.
pub const CONTEST_DAYS_MAX: i64 = 80;
/// Characters of a contest's details (the DICT's `ReportDetails`).
pub const RECOVERY_DETAILS_LEN_MAX: usize = 2000;
/// Characters of a contact e-mail and phone.
pub const CONTACT_LEN_MAX: usize = 77;

/// The situations a contest may name (the DICT's `SituationType` of API 2.x).
pub const SITUATIONS: [&str; 5] = ["SCAM", "ACCOUNT_TAKEOVER", "COERCION", "FRAUDULENT_ACCESS", "OTHER"];

/// A recovery's status: `REQUESTED` until the DICT has it, then the DICT's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RecoveryStatus {
    Requested,
    Created,
    Tracked,
    AwaitingAnalysis,
    Analysed,
    Refunding,
    Completed,
    Cancelled,
}

impl RecoveryStatus {
    pub const ALL: [RecoveryStatus; 8] = [
        RecoveryStatus::Requested,
        RecoveryStatus::Created,
        RecoveryStatus::Tracked,
        RecoveryStatus::AwaitingAnalysis,
        RecoveryStatus::Analysed,
        RecoveryStatus::Refunding,
        RecoveryStatus::Completed,
        RecoveryStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryStatus::Requested => "REQUESTED",
            RecoveryStatus::Created => "CREATED",
            RecoveryStatus::Tracked => "TRACKED",
            RecoveryStatus::AwaitingAnalysis => "AWAITING_ANALYSIS",
            RecoveryStatus::Analysed => "ANALYSED",
            RecoveryStatus::Refunding => "REFUNDING",
            RecoveryStatus::Completed => "COMPLETED",
            RecoveryStatus::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(text: &str) -> Option<RecoveryStatus> {
        RecoveryStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Its place in the life cycle: a status moves only to a higher one.
    pub fn rank(self) -> u8 {
        match self {
            RecoveryStatus::Requested => 0,
            RecoveryStatus::Created => 1,
            RecoveryStatus::Tracked => 2,
            RecoveryStatus::AwaitingAnalysis => 3,
            RecoveryStatus::Analysed => 4,
            RecoveryStatus::Refunding => 5,
            RecoveryStatus::Completed | RecoveryStatus::Cancelled => 6,
        }
    }

    pub fn is_final(self) -> bool {
        self.rank() == 6
    }
}

/// A contest of a payment the account sent, and the DICT's recovery of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recovery {
    /// The gateway's id of it.
    pub id: u64,
    pub account_id: u64,
    /// The contested payment: its end-to-end id and the account's transaction.
    pub end_to_end_id: String,
    pub transaction_id: u64,
    pub amount: Money,
    pub situation: String,
    pub details: Option<String>,
    pub email: String,
    pub phone: String,
    pub status: RecoveryStatus,
    /// The DICT's id, once it has the recovery.
    pub dict_id: Option<String>,
    /// Payments the DICT traced (the contested one included).
    pub traced: u32,
    /// What has come back to the account so far: returns of the contested payment.
    pub returned: Money,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Why a contest is refused, each mapped once to its HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryRejection {
    #[error("no transaction of this account has this end-to-end id")]
    NotFound,
    #[error("only a Pix this account sent can be contested")]
    NotSent,
    #[error("the Pix has not settled")]
    NotSettled,
    #[error("the Pix settled more than {CONTEST_DAYS_MAX} days ago")]
    TooLate,
    #[error("this Pix is contested already")]
    AlreadyContested,
    #[error("the SPI rail with the DICT is needed to contest a Pix")]
    RailRequired,
    /// Withdrawn before the DICT has it: the recovery poller opens it within its period.
    #[error("the contest is not in the DICT yet; try again in a moment")]
    NotOpened,
    /// Changed once the DICT no longer takes changes (analysed, refunding, ended).
    #[error("the contest can no longer be changed: the institutions have analysed it")]
    NotAmendable,
    /// A contest of situation `OTHER` says what happened.
    #[error("details are required when situationType is OTHER")]
    DetailsRequired,
}

/// What a client changes of its contest (absent: kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Amendment {
    pub situation: Option<String>,
    pub details: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
}

/// Whether `original` (the account's transaction of the end-to-end id) may be contested now.
pub fn check_contest(
    original: Option<&Transaction>,
    contested: bool,
    now: DateTime<Utc>,
) -> Result<(), RecoveryRejection> {
    let t = original.ok_or(RecoveryRejection::NotFound)?;
    if !matches!(t.kind, TxKind::CashOut | TxKind::QrCashOut | TxKind::DictPix) {
        return Err(RecoveryRejection::NotSent);
    }
    if t.status != TxStatus::Confirmed {
        return Err(RecoveryRejection::NotSettled);
    }
    if now - t.moved_at() > Duration::days(CONTEST_DAYS_MAX) {
        return Err(RecoveryRejection::TooLate);
    }
    if contested {
        return Err(RecoveryRejection::AlreadyContested);
    }
    Ok(())
}

/// What the DICT says of a recovery now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The DICT's id (none when the DICT refused to open it).
    pub dict_id: Option<String>,
    pub status: RecoveryStatus,
    /// Payments the DICT traced, when the answer carried its graph.
    pub traced: Option<u32>,
}

impl Recovery {
    /// The contest with `a` applied. The DICT takes a creator's change while its recovery is
    /// `CREATED`, `TRACKED` or `AWAITING_ANALYSIS` (API 2.12.1, `updateFundsRecovery`): before
    /// it has the recovery the change is refused as the withdrawal is (the poller's creation
    /// could carry the old fields), and after the analysis it is too late. A contest of
    /// situation `OTHER` keeps its details.
    pub fn amended(&self, a: &Amendment, now: DateTime<Utc>) -> Result<Recovery, RecoveryRejection> {
        match self.status {
            RecoveryStatus::Requested => return Err(RecoveryRejection::NotOpened),
            RecoveryStatus::Created | RecoveryStatus::Tracked | RecoveryStatus::AwaitingAnalysis => {}
            _ => return Err(RecoveryRejection::NotAmendable),
        }
        let next = Recovery {
            situation: a.situation.clone().unwrap_or_else(|| self.situation.clone()),
            details: a.details.clone().or_else(|| self.details.clone()),
            email: a.email.clone().unwrap_or_else(|| self.email.clone()),
            phone: a.phone.clone().unwrap_or_else(|| self.phone.clone()),
            updated_at: now,
            ..self.clone()
        };
        if next.situation == "OTHER" && next.details.is_none() {
            return Err(RecoveryRejection::DetailsRequired);
        }
        Ok(next)
    }

    /// The recovery as the DICT's answer moves it, or `None` when the answer is not news (a
    /// status it has passed, or the same again).
    pub fn observe(&self, seen: &Seen, returned: Money, now: DateTime<Utc>) -> Option<Recovery> {
        let forward = seen.status.rank() > self.status.rank();
        let traced = seen.traced.filter(|t| *t != self.traced);
        let new_money = returned != self.returned;
        let new_id = seen.dict_id.is_some() && seen.dict_id != self.dict_id;
        if !forward && traced.is_none() && !new_money && !new_id {
            return None;
        }
        let mut next = self.clone();
        if forward {
            next.status = seen.status;
        }
        if seen.dict_id.is_some() {
            next.dict_id.clone_from(&seen.dict_id);
        }
        if let Some(t) = traced {
            next.traced = t;
        }
        next.returned = returned;
        next.updated_at = now;
        Some(next)
    }

    /// Whether the creator owes the DICT a step: asking for the refund once analysed.
    pub fn owes_refund(&self) -> bool {
        self.status == RecoveryStatus::Analysed
    }

    /// The record as the client reads it.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "endToEndId": self.end_to_end_id,
            "transactionId": self.transaction_id,
            "amount": self.amount.to_cents_string(),
            "situationType": self.situation,
            "details": self.details,
            "contact": {"email": self.email, "phone": self.phone},
            "status": self.status.as_str(),
            "fundsRecoveryId": self.dict_id,
            "tracedTransactions": self.traced,
            "returnedAmount": self.returned.to_cents_string(),
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::AccountId;

    fn at(days: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-09-01T12:00:00Z").unwrap().with_timezone(&Utc)
            + Duration::days(days)
    }

    fn sent(status: TxStatus) -> Transaction {
        let mut t = Transaction::new(
            7,
            uuid::Uuid::nil(),
            AccountId::new(1).unwrap(),
            TxKind::CashOut,
            Money::parse_two_places("500.00").unwrap(),
            at(0),
        );
        t.status = status;
        t.processed_at = Some(at(0));
        t
    }

    #[test]
    fn a_settled_pix_sent_may_be_contested_for_80_days_and_once() {
        let t = sent(TxStatus::Confirmed);
        assert_eq!(check_contest(Some(&t), false, at(80)), Ok(()));
        assert_eq!(check_contest(Some(&t), false, at(81)), Err(RecoveryRejection::TooLate));
        assert_eq!(check_contest(Some(&t), true, at(1)), Err(RecoveryRejection::AlreadyContested));
        assert_eq!(check_contest(None, false, at(1)), Err(RecoveryRejection::NotFound));
        assert_eq!(
            check_contest(Some(&sent(TxStatus::Pending)), false, at(1)),
            Err(RecoveryRejection::NotSettled)
        );
        let mut received = sent(TxStatus::Confirmed);
        received.kind = TxKind::PixIn;
        assert_eq!(check_contest(Some(&received), false, at(1)), Err(RecoveryRejection::NotSent));
    }

    fn recovery() -> Recovery {
        Recovery {
            id: 3,
            account_id: 1,
            end_to_end_id: "E".into(),
            transaction_id: 7,
            amount: Money::parse_two_places("500.00").unwrap(),
            situation: "SCAM".into(),
            details: None,
            email: "a@b.br".into(),
            phone: "+5561988887777".into(),
            status: RecoveryStatus::Requested,
            dict_id: None,
            traced: 0,
            returned: Money::ZERO,
            created_at: at(0),
            updated_at: at(0),
        }
    }

    #[test]
    fn a_contest_changes_only_while_the_dict_takes_changes_and_keeps_what_is_not_changed() {
        let change = Amendment { details: Some("pix agendado".into()), ..Amendment::default() };
        for status in RecoveryStatus::ALL {
            let r = Recovery { status, ..recovery() };
            let got = r.amended(&change, at(5));
            match status {
                RecoveryStatus::Requested => assert_eq!(got, Err(RecoveryRejection::NotOpened)),
                RecoveryStatus::Created | RecoveryStatus::Tracked | RecoveryStatus::AwaitingAnalysis => {
                    let next = got.unwrap();
                    assert_eq!((next.details.as_deref(), next.updated_at), (Some("pix agendado"), at(5)));
                    assert_eq!(
                        (next.situation, next.email, next.status),
                        (r.situation.clone(), r.email.clone(), status)
                    );
                }
                _ => assert_eq!(got, Err(RecoveryRejection::NotAmendable), "{status:?}"),
            }
        }
        let open = Recovery { status: RecoveryStatus::Tracked, ..recovery() };
        let other = Amendment { situation: Some("OTHER".into()), ..Amendment::default() };
        assert_eq!(open.amended(&other, at(5)), Err(RecoveryRejection::DetailsRequired));
        let explained = Amendment { details: Some("x".into()), ..other };
        assert_eq!(open.amended(&explained, at(5)).unwrap().situation, "OTHER");
    }

    #[test]
    fn a_recovery_only_moves_forward_and_a_repeated_answer_is_not_news() {
        let r = recovery();
        let seen = |s| Seen { dict_id: Some("d".into()), status: s, traced: Some(2) };
        let analysed = r.observe(&seen(RecoveryStatus::Analysed), Money::ZERO, at(1)).unwrap();
        assert_eq!(
            (analysed.status, analysed.traced, analysed.dict_id.as_deref()),
            (RecoveryStatus::Analysed, 2, Some("d"))
        );
        assert!(analysed.owes_refund());
        assert_eq!(analysed.observe(&seen(RecoveryStatus::Analysed), Money::ZERO, at(2)), None);
        assert_eq!(analysed.observe(&seen(RecoveryStatus::Tracked), Money::ZERO, at(2)), None);
        let back = Money::parse_two_places("500.00").unwrap();
        let done = analysed.observe(&seen(RecoveryStatus::Completed), back, at(3)).unwrap();
        assert_eq!((done.status, done.returned), (RecoveryStatus::Completed, back));
        assert!(done.status.is_final() && !done.owes_refund());
        assert_eq!(done.observe(&seen(RecoveryStatus::Cancelled), back, at(4)), None, "final is final");
    }
}
