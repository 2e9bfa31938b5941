//! MED (Mecanismo Especial de Devolução) cases: the record, its life cycle and its JSON
//! (interface.md "Life cycles", decisions.md "MED").
//!
//! Life cycle: a MED is opened (`OPEN`) against a received PIX, with the disputed amount
//! capped at what is available blocked in the same step; the gateway acknowledges it at once
//! (`RECEIVED`). The analysis ends it `ANALYZED` with `APPROVED` (the blocked amount leaves as
//! a Refund in of natureza `MED_FRAUDE` or `MED_OPERACIONAL`) or `REJECTED` (released). Before
//! that the requesting bank may withdraw it: `CANCELLED`, reason `REFUND_CANCELLATION`,
//! released. `CANCELLED` and `ANALYZED` are final.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::events::{iso, money_number};
use super::money::Money;
use super::transaction::Natureza;

/// Characters of a MED's description and of its analysis details.
pub const MED_TEXT_LEN_MAX: usize = 500;

/// Causes a sandbox MED may name. The fraud ones make an approved MED a `MED_FRAUDE`
/// refund, the others `MED_OPERACIONAL`.
pub const FRAUD_CAUSES: [&str; 4] =
    ["UNAUTHORIZED_TRANSACTION", "SOCIAL_ENGINEERING", "SCAM", "ACCOUNT_TAKEOVER"];
pub const OPERATIONAL_CAUSES: [&str; 2] = ["OPERATIONAL_FLAW", "DUPLICATED_TRANSACTION"];
pub const DEFAULT_CAUSE: &str = "UNAUTHORIZED_TRANSACTION";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MedStatus {
    Open,
    Received,
    Cancelled,
    Analyzed,
}

impl MedStatus {
    pub const ALL: [MedStatus; 4] =
        [MedStatus::Open, MedStatus::Received, MedStatus::Cancelled, MedStatus::Analyzed];

    pub fn as_str(self) -> &'static str {
        match self {
            MedStatus::Open => "OPEN",
            MedStatus::Received => "RECEIVED",
            MedStatus::Cancelled => "CANCELLED",
            MedStatus::Analyzed => "ANALYZED",
        }
    }

    pub fn parse(text: &str) -> Option<MedStatus> {
        MedStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MedReason {
    RefundRequest,
    RefundCancellation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AnalysisResult {
    Approved,
    Rejected,
}

impl AnalysisResult {
    pub fn parse(text: &str) -> Option<AnalysisResult> {
        match text {
            "APPROVED" => Some(AnalysisResult::Approved),
            "REJECTED" => Some(AnalysisResult::Rejected),
            _ => None,
        }
    }
}

/// A PIX participant (a bank or payment institution), by its ISPB and name: the one that
/// asked for the MED and the one it contests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    pub ispb: String,
    pub name: String,
}

/// What the MED record shows of the disputed PIX.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OriginalTransaction {
    pub amount: Money,
    /// The operation (`PIX_IN`, `CASH_IN`).
    pub kind: String,
    pub name: String,
    /// Masked.
    pub document: Option<String>,
    pub date_time: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Med {
    pub id: u64,
    pub account_id: u64,
    pub end_to_end: String,
    pub status: MedStatus,
    pub reason: MedReason,
    pub cause: Option<String>,
    pub description: Option<String>,
    pub analysis_result: Option<AnalysisResult>,
    pub analysis_details: Option<String>,
    pub requesting_bank: Participant,
    pub contested_bank: Participant,
    pub original: Option<OriginalTransaction>,
    /// The local id of the disputed PIX when the end-to-end id matched one.
    pub original_transaction_id: Option<u64>,
    /// The amount the requesting bank disputes.
    pub amount: Money,
    /// What was blocked for it: the amount, capped at what was available.
    pub blocked: Money,
    /// The Refund in an approval made.
    pub refund_transaction_id: Option<u64>,
    /// The DICT's refund request this MED answers (a MED on the SPI rail); its approval
    /// returns the money through the rail, and its analysis goes back to the DICT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dict_refund_id: Option<String>,
    /// The DICT's infraction report this MED answers (MED 2.0: a funds recovery traced a
    /// payment to this account). Its approval keeps the money blocked until the DICT asks
    /// for it back; docs/decisions.md "MED 2.0".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infraction: Option<Infraction>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Days the receiving institution has to analyse an infraction report, from its creation.
pub const REPORT_ANALYSIS_DAYS_MAX: i64 = 7;
/// The fraud type an approval names to the DICT unless the operator names another.
pub const FRAUD_TYPE_DEFAULT: &str = "MULE_ACCOUNT";
/// The fraud type the gateway names when the analysis deadline decided (no one analysed).
pub const FRAUD_TYPE_BY_DEADLINE: &str = "OTHER";

/// What a MED 2.0 case keeps of its infraction report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Infraction {
    pub report_id: String,
    pub recovery_id: Option<String>,
    /// The report's situation (`SCAM`, `ACCOUNT_TAKEOVER`, ...).
    pub situation: String,
    /// When the analysis is due: [`REPORT_ANALYSIS_DAYS_MAX`] after the report's creation.
    pub due_at: DateTime<Utc>,
    /// The fraud type an approval names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraud_type: Option<String>,
    /// When the blocked money left as a return the DICT asked for (what left is
    /// `blocked`, the rest having been released).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returned_at: Option<DateTime<Utc>>,
    /// What the client sent in its defence, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
}

/// A client's statement for the analysis of a case against it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    pub text: String,
    pub at: DateTime<Utc>,
}

/// Statements a case keeps at most, and the characters of one.
pub const EVIDENCE_COUNT_MAX: usize = 10;
pub const EVIDENCE_TEXT_LEN_MAX: usize = 2000;

/// Why a MED cannot change as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MedError {
    #[error("the MED is already {0}")]
    Final(&'static str),
}

/// Why a MED is refused, each mapped once to its HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MedRejection {
    #[error("no MED of this account has this id")]
    NotFound,
    #[error(transparent)]
    Final(#[from] MedError),
    /// The end-to-end id names a transaction of the account that it did not receive.
    #[error("a MED can only dispute a PIX this account received")]
    NotReceived,
    /// No local transaction matched, so the amount must be given.
    #[error("amount is required when the end-to-end id matches no received PIX")]
    AmountRequired,
    #[error("amount must not exceed the disputed PIX ({0})")]
    AboveOriginal(Money),
    /// A case keeps at most [`EVIDENCE_COUNT_MAX`] statements.
    #[error("the case holds as many statements as it may ({EVIDENCE_COUNT_MAX})")]
    EvidenceFull,
}

impl Med {
    pub fn is_reconciled(&self) -> bool {
        self.original_transaction_id.is_some()
    }

    fn open_or_received(&self) -> Result<(), MedError> {
        match self.status {
            MedStatus::Open | MedStatus::Received => Ok(()),
            s @ (MedStatus::Cancelled | MedStatus::Analyzed) => Err(MedError::Final(s.as_str())),
        }
    }

    /// The gateway's acknowledgement: OPEN becomes RECEIVED.
    pub fn acknowledge(&mut self, now: DateTime<Utc>) {
        if self.status == MedStatus::Open {
            self.status = MedStatus::Received;
            self.updated_at = now;
        }
    }

    /// An approved MED 2.0 case whose blocked money the DICT has not asked back yet.
    pub fn awaiting_return(&self) -> bool {
        self.status == MedStatus::Analyzed
            && self.analysis_result == Some(AnalysisResult::Approved)
            && self.infraction.as_ref().is_some_and(|i| i.returned_at.is_none())
    }

    /// A MED whose hold may still change: open, or approved and awaiting its return.
    pub fn is_live(&self) -> bool {
        matches!(self.status, MedStatus::Open | MedStatus::Received) || self.awaiting_return()
    }

    /// What a MED 2.0 case still lacks of its amount while money may come in to block:
    /// arrivals to the account are blocked for it until it holds its amount.
    pub fn shortfall(&self) -> Money {
        if self.infraction.is_none() || !self.is_live() {
            return Money::ZERO;
        }
        self.amount.checked_sub(self.blocked).unwrap_or(Money::ZERO)
    }

    pub fn analyze(
        &mut self,
        result: AnalysisResult,
        details: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<(), MedError> {
        self.open_or_received()?;
        self.status = MedStatus::Analyzed;
        self.analysis_result = Some(result);
        self.analysis_details = details;
        self.updated_at = now;
        Ok(())
    }

    /// A MED 2.0 case the DICT withdrew (its report or its recovery cancelled): it ends
    /// `CANCELLED`, open or approved and awaiting its return alike.
    pub fn withdraw(&mut self, now: DateTime<Utc>) -> Result<(), MedError> {
        if !self.is_live() || self.infraction.is_none() {
            return Err(MedError::Final(self.status.as_str()));
        }
        self.status = MedStatus::Cancelled;
        self.reason = MedReason::RefundCancellation;
        self.updated_at = now;
        Ok(())
    }

    pub fn cancel(&mut self, now: DateTime<Utc>) -> Result<(), MedError> {
        self.open_or_received()?;
        self.status = MedStatus::Cancelled;
        self.reason = MedReason::RefundCancellation;
        self.updated_at = now;
        Ok(())
    }

    /// The natureza of the refund an approval makes.
    pub fn natureza(&self) -> Natureza {
        match self.cause.as_deref() {
            Some(c) if OPERATIONAL_CAUSES.contains(&c) => Natureza::MedOperacional,
            _ => Natureza::MedFraude,
        }
    }

    /// The MED record (interface.md "GET /api/med"), plus `amount`, `blockedAmount` and
    /// `refundTransactionId` (beyond the interface).
    pub fn to_json(&self) -> Value {
        let original = self.original.as_ref().map(|o| {
            json!({
                "amount": money_number(o.amount),
                "type": o.kind,
                "transactionType": "PIX",
                "name": o.name,
                "document": o.document,
                "dateTime": iso(o.date_time),
            })
        });
        let mut v = json!({
            "id": self.id,
            "endToEnd": self.end_to_end,
            "status": self.status.as_str(),
            "reason": self.reason,
            "cause": self.cause,
            "description": self.description,
            "analysisResult": self.analysis_result,
            "analysisDetails": self.analysis_details,
            "requestingBank": { "ispb": self.requesting_bank.ispb, "name": self.requesting_bank.name },
            "contestedBank": { "ispb": self.contested_bank.ispb, "name": self.contested_bank.name },
            "originalTransaction": original,
            "isReconciled": self.is_reconciled(),
            "originalTransactionId": self.original_transaction_id,
            "amount": money_number(self.amount),
            "blockedAmount": money_number(self.blocked),
            "refundTransactionId": self.refund_transaction_id,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
        });
        if let Some(id) = &self.dict_refund_id {
            v["dictRefundId"] = json!(id);
        }
        if let Some(i) = &self.infraction {
            v["infractionReportId"] = json!(i.report_id);
            v["fundsRecoveryId"] = json!(i.recovery_id);
            v["situationType"] = json!(i.situation);
            v["analysisDueAt"] = json!(iso(i.due_at));
            v["fraudType"] = json!(i.fraud_type);
            v["returnedAt"] = json!(i.returned_at.map(iso));
            v["evidence"] = json!(i
                .evidence
                .iter()
                .map(|e| json!({"text": e.text, "at": iso(e.at)}))
                .collect::<Vec<_>>());
        }
        v
    }
}

/// What a MED 2.0 case says to its infraction report now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportAnswer {
    /// Analysed and approved: the report is closed `AGREED` with this fraud type.
    Agree { fraud_type: String, details: Option<String> },
    /// Analysed and rejected (or withdrawn): closed `DISAGREED`.
    Disagree { details: Option<String> },
    /// Not analysed, and not due yet.
    Wait,
    /// Not analysed and due: the rule decides it ([`deadline_analysis`]) before it is told.
    Due,
}

/// The answer a case gives its report at `now` (the server clock).
pub fn report_answer(med: &Med, now: DateTime<Utc>) -> ReportAnswer {
    match (med.status, med.analysis_result) {
        (MedStatus::Analyzed, Some(AnalysisResult::Approved)) => ReportAnswer::Agree {
            fraud_type: med
                .infraction
                .as_ref()
                .and_then(|i| i.fraud_type.clone())
                .unwrap_or_else(|| FRAUD_TYPE_DEFAULT.to_owned()),
            details: med.analysis_details.clone(),
        },
        (MedStatus::Analyzed | MedStatus::Cancelled, _) => {
            ReportAnswer::Disagree { details: med.analysis_details.clone() }
        }
        (MedStatus::Open | MedStatus::Received, _) => {
            if med.infraction.as_ref().is_some_and(|i| now >= i.due_at) {
                ReportAnswer::Due
            } else {
                ReportAnswer::Wait
            }
        }
    }
}

/// The analysis the rule gives a case whose deadline passed without one: approved (the
/// money stays blocked for the return), fraud type `OTHER`, with the reason in its details
/// (the DICT requires details with `OTHER`). docs/decisions.md "MED 2.0" says why.
pub fn deadline_analysis() -> (AnalysisResult, String, &'static str) {
    (
        AnalysisResult::Approved,
        format!(
            "the {REPORT_ANALYSIS_DAYS_MAX}-day analysis period ended without an analysis: the blocked money is kept for the return"
        ),
        FRAUD_TYPE_BY_DEADLINE,
    )
}

/// How long a case asked for more than it blocks waits, from the DICT's refund request, for
/// money still due to it (a return from the next institution on its way) before it returns
/// what it holds: well within the 24 hours the DICT gives for the return.
pub const RETURN_WAIT_MINUTES_MAX: i64 = 60;

/// Whether a case asked to return `requested` by a request made at `asked_at` waits (it
/// holds less, and the wait has not run out at `now`).
pub fn return_waits(med: &Med, requested: Money, asked_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    med.blocked < requested && now - asked_at < chrono::Duration::minutes(RETURN_WAIT_MINUTES_MAX)
}

/// The cause a MED 2.0 case records for its report's situation: the fraud causes name two
/// of them; the others are an unauthorised transaction.
pub fn cause_of_situation(situation: &str) -> &'static str {
    match situation {
        "SCAM" => "SCAM",
        "ACCOUNT_TAKEOVER" => "ACCOUNT_TAKEOVER",
        _ => DEFAULT_CAUSE,
    }
}

pub fn cause_known(cause: &str) -> bool {
    FRAUD_CAUSES.contains(&cause) || OPERATIONAL_CAUSES.contains(&cause)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn med() -> Med {
        let now = Utc::now();
        Med {
            id: 9,
            account_id: 1,
            end_to_end: "E".repeat(32),
            status: MedStatus::Open,
            reason: MedReason::RefundRequest,
            cause: Some("OPERATIONAL_FLAW".into()),
            description: None,
            analysis_result: None,
            analysis_details: None,
            requesting_bank: Participant { ispb: "00000000".into(), name: "B".into() },
            contested_bank: Participant { ispb: "99999999".into(), name: "pixgw".into() },
            original: None,
            original_transaction_id: None,
            amount: Money::parse("10").unwrap(),
            blocked: Money::parse("4").unwrap(),
            refund_transaction_id: None,
            dict_refund_id: None,
            infraction: None,
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn the_life_cycle_ends_once() {
        let now = Utc::now();
        let mut m = med();
        m.acknowledge(now);
        assert_eq!(m.status, MedStatus::Received);
        m.analyze(AnalysisResult::Approved, Some("ok".into()), now).unwrap();
        assert_eq!((m.status, m.analysis_result), (MedStatus::Analyzed, Some(AnalysisResult::Approved)));
        assert_eq!(m.cancel(now), Err(MedError::Final("ANALYZED")));
        assert_eq!(m.analyze(AnalysisResult::Rejected, None, now), Err(MedError::Final("ANALYZED")));
        let mut m = med();
        m.cancel(now).unwrap();
        assert_eq!((m.status, m.reason), (MedStatus::Cancelled, MedReason::RefundCancellation));
        assert_eq!(m.analyze(AnalysisResult::Approved, None, now), Err(MedError::Final("CANCELLED")));
    }

    #[test]
    fn the_cause_decides_the_natureza() {
        let mut m = med();
        assert_eq!(m.natureza(), Natureza::MedOperacional);
        m.cause = Some("SOCIAL_ENGINEERING".into());
        assert_eq!(m.natureza(), Natureza::MedFraude);
        m.cause = None;
        assert_eq!(m.natureza(), Natureza::MedFraude);
        assert!(cause_known("SCAM") && !cause_known("scam"));
    }

    #[test]
    fn the_record_has_every_field_of_the_interface() {
        let v = med().to_json();
        for f in [
            "id",
            "endToEnd",
            "status",
            "reason",
            "cause",
            "description",
            "analysisResult",
            "analysisDetails",
            "requestingBank",
            "contestedBank",
            "originalTransaction",
            "isReconciled",
            "originalTransactionId",
            "createdAt",
            "updatedAt",
        ] {
            assert!(v.get(f).is_some(), "{f}");
        }
        assert_eq!(v["reason"], "REFUND_REQUEST");
        assert_eq!(v["isReconciled"], false);
        assert_eq!(serde_json::to_string(&v["blockedAmount"]).unwrap(), "4.00");
    }
    #[test]
    fn a_reports_answer_follows_the_analysis_and_its_deadline_on_the_server_clock() {
        use chrono::Duration;
        let now = Utc::now();
        let mut m = med();
        m.infraction = Some(Infraction {
            report_id: "r".into(),
            recovery_id: None,
            situation: "SCAM".into(),
            due_at: now + Duration::days(REPORT_ANALYSIS_DAYS_MAX),
            fraud_type: None,
            returned_at: None,
            evidence: Vec::new(),
        });
        let due = now + Duration::days(REPORT_ANALYSIS_DAYS_MAX);
        assert_eq!(report_answer(&m, due - Duration::milliseconds(1)), ReportAnswer::Wait);
        assert_eq!(report_answer(&m, due), ReportAnswer::Due);
        let (result, details, fraud_type) = deadline_analysis();
        m.analyze(result, Some(details), now).unwrap();
        assert_eq!(
            report_answer(&m, due),
            ReportAnswer::Agree {
                fraud_type: FRAUD_TYPE_DEFAULT.into(),
                details: m.analysis_details.clone()
            }
        );
        m.infraction.as_mut().unwrap().fraud_type = Some(fraud_type.into());
        assert!(matches!(report_answer(&m, due), ReportAnswer::Agree { fraud_type: f, .. } if f == "OTHER"));
        let mut rejected = med();
        rejected.analyze(AnalysisResult::Rejected, None, now).unwrap();
        assert_eq!(report_answer(&rejected, now), ReportAnswer::Disagree { details: None });
        assert_eq!(report_answer(&med(), now), ReportAnswer::Wait, "a case of no report is never due");
    }

    #[test]
    fn a_short_case_waits_an_hour_for_money_on_its_way_and_a_full_one_never() {
        use chrono::Duration;
        let asked = Utc::now();
        let mut m = med();
        m.blocked = Money::parse_two_places("100.00").unwrap();
        let (more, same) = (Money::parse_two_places("500.00").unwrap(), m.blocked);
        let limit = asked + Duration::minutes(RETURN_WAIT_MINUTES_MAX);
        assert!(return_waits(&m, more, asked, limit - Duration::milliseconds(1)));
        assert!(!return_waits(&m, more, asked, limit), "then it returns what it holds");
        assert!(!return_waits(&m, same, asked, asked), "holding what is asked, it returns at once");
    }
}
