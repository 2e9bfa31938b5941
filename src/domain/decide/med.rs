//! MED cases (docs/decisions.md "MED"): opening one blocks the disputed amount, capped at
//! what is available, as a ledger hold named by the MED's id; the analysis debits it as a
//! Refund in (APPROVED) or releases it (REJECTED), and so does a cancellation.

use chrono::{DateTime, Utc};

use super::{Account, Ids, Plan, Record, Refusal};
use crate::domain::events::{EventBody, EventType, OutboxEvent};
use crate::domain::ledger::{DebitDecision, DebitRequest, Limited, StoredKeys};
use crate::domain::med::{
    AnalysisResult, Evidence, Infraction, Med, MedReason, MedRejection, MedStatus, OriginalTransaction,
    Participant, EVIDENCE_COUNT_MAX,
};
use crate::domain::money::Money;
use crate::domain::transaction::{
    gateway_ispb, Counterpart, Family, RefundDetails, Transaction, TxKind, TxStatus, PAYER_ISPB,
};

/// The name the MED record gives this gateway as the contested bank.
pub const GATEWAY_NAME: &str = "pixgw";

/// A MED against a received PIX (sandbox: the requesting bank's side).
#[derive(Debug, Clone)]
pub struct OpenMedRequest {
    pub end_to_end: String,
    pub cause: String,
    pub amount: Option<Money>,
    pub description: Option<String>,
    /// The DICT's refund request it answers (a MED on the SPI rail).
    pub dict_refund_id: Option<String>,
    /// The DICT's infraction report it answers (MED 2.0).
    pub infraction: Option<Infraction>,
}

/// The event of a MED step, carrying the MED record as it is at that step.
fn med_event(med: &Med, event_type: EventType, name: &str) -> OutboxEvent {
    OutboxEvent {
        account_id: med.account_id,
        local_id: med.id,
        event_type,
        created_at: med.updated_at,
        body: EventBody::Json(serde_json::json!({ "event": name, "med": med.to_json() })),
    }
}

/// Blocks `value` of the balance under `local_id`, with no fee and no limit (what a MED holds,
/// and what its return through the rail holds until the SPI settles it).
fn hold(
    ledger: &mut crate::domain::ledger::LedgerDraft<'_>,
    account: &Account,
    local_id: u64,
    value: Money,
    now: DateTime<Utc>,
    replayed: &str,
) -> Result<(), Refusal> {
    let request = DebitRequest {
        local_id,
        external_id: None,
        idempotency: None,
        value,
        fee: Money::ZERO,
        hold: true,
        limited: Limited::No,
        now,
        stored: StoredKeys::default(),
    };
    match ledger.debit(&request, &account.settings.limits).map_err(Refusal::Ledger)? {
        DebitDecision::Replay { .. } => Err(Refusal::Bug(replayed.into())),
        _ => Ok(()),
    }
}

/// Opens a MED. `original` is the account's transaction with that end-to-end id as it is
/// now, if any; `institution`, the bank the end-to-end id's ISPB names, if known. Ids: one,
/// the MED's (also its hold's).
pub fn open_med(
    account: &Account,
    req: OpenMedRequest,
    original: Option<Transaction>,
    institution: Option<Participant>,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Med>, Refusal> {
    if let Some(t) = &original {
        let received = matches!(t.kind, TxKind::PixIn | TxKind::CashIn) && t.status == TxStatus::Confirmed;
        if !received {
            return Err(Refusal::Med(MedRejection::NotReceived));
        }
    }
    let amount = match (&original, req.amount) {
        (Some(o), Some(a)) if a > o.value => return Err(Refusal::Med(MedRejection::AboveOriginal(o.value))),
        (_, Some(a)) => a,
        (Some(o), None) => o.value,
        (None, None) => return Err(Refusal::Med(MedRejection::AmountRequired)),
    };
    let id = ids.take()?.local_id;
    let mut ledger = account.ledger.draft();
    let available = ledger.balance().available;
    let blocked = if amount > available { available } else { amount };
    if !blocked.is_zero() {
        hold(&mut ledger, account, id, blocked, now, "a MED hold replayed")?;
    }
    let requesting_bank = original
        .as_ref()
        .and_then(|o| o.counterpart.bank.as_ref())
        .map(|b| Participant { ispb: b.ispb.clone(), name: b.name.clone() })
        // An unmatched end-to-end id still names the payer's institution.
        .or(institution)
        .unwrap_or_else(|| Participant { ispb: PAYER_ISPB.into(), name: "Unknown institution".into() });
    let mut med = Med {
        id,
        account_id: account.id.get(),
        end_to_end: req.end_to_end,
        status: MedStatus::Open,
        reason: MedReason::RefundRequest,
        cause: Some(req.cause),
        description: req.description,
        analysis_result: None,
        analysis_details: None,
        requesting_bank,
        contested_bank: Participant { ispb: gateway_ispb().into(), name: GATEWAY_NAME.into() },
        original: original.as_ref().map(|o| OriginalTransaction {
            amount: o.value,
            kind: o.kind.as_str().to_owned(),
            name: o.counterpart.name.clone(),
            document: crate::domain::document::masked_document(o.counterpart.document.as_deref()),
            date_time: o.moved_at(),
        }),
        original_transaction_id: original.as_ref().map(|o| o.local_id),
        amount,
        blocked,
        refund_transaction_id: None,
        dict_refund_id: req.dict_refund_id,
        infraction: req.infraction,
        created_at: now,
        updated_at: now,
    };
    // The event says OPEN; the gateway acknowledges the MED at once, so it is stored RECEIVED.
    let created = med_event(&med, EventType::MedCreated, "MedCreated");
    med.acknowledge(now);
    let mut plan = Plan::new(med.clone());
    plan.ledger = Some(ledger.finish()?);
    plan.records.push(Record::Med(med));
    plan.events.push(created);
    Ok(plan)
}

/// Ends a MED: its analysis, or its withdrawal by the requesting bank (`result: None`).
#[derive(Debug, Clone)]
pub struct CloseMedRequest {
    pub result: Option<AnalysisResult>,
    pub details: Option<String>,
    /// The fraud type an approval of a MED 2.0 case names to the DICT.
    pub fraud_type: Option<String>,
}

/// Ends a MED. `med` is its latest state; `original`, the disputed PIX as it is now (read
/// when the MED is reconciled). Ids: one, for the Refund in of an approval.
pub fn close_med(
    account: &Account,
    med: Option<Med>,
    req: CloseMedRequest,
    original: Option<Transaction>,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Med>, Refusal> {
    let mut med = med.ok_or(Refusal::Med(MedRejection::NotFound))?;
    let approved = req.result == Some(AnalysisResult::Approved);
    match req.result {
        Some(result) => med.analyze(result, req.details, now),
        None => med.cancel(now),
    }
    .map_err(|e| Refusal::Med(MedRejection::Final(e)))?;
    // A MED 2.0 case approved keeps its money blocked: the DICT asks for it back once every
    // institution of the recovery has answered ([`return_med`]).
    if approved {
        if let Some(i) = med.infraction.as_mut() {
            i.fraud_type =
                Some(req.fraud_type.unwrap_or_else(|| crate::domain::med::FRAUD_TYPE_DEFAULT.to_owned()));
            let mut plan = Plan::new(med.clone());
            plan.events.push(med_event(&med, EventType::MedAccepted, "MedAccepted"));
            plan.records.push(Record::Med(med));
            return Ok(plan);
        }
    }
    // An approval debits what was blocked; anything else gives it back. A MED of the DICT
    // returns the money through the rail instead: its hold becomes the hold of a pending
    // Refund in, which the rail sends as a return and settles like any other.
    let through_rail = approved && med.dict_refund_id.is_some() && !med.blocked.is_zero();
    let mut ledger = account.ledger.draft();
    if !med.blocked.is_zero() && ledger.settle(med.id, approved && !through_rail).is_none() {
        return Err(Refusal::Bug(format!("MED {} has no hold", med.id)));
    }
    let mut refund = None;
    let mut original_after = None;
    if approved && !med.blocked.is_zero() {
        let fresh = ids.take()?;
        let rtr_id = fresh.end_to_end_id('D', now);
        let name = med.original.as_ref().map_or_else(|| med.requesting_bank.name.clone(), |o| o.name.clone());
        let status = if through_rail {
            hold(&mut ledger, account, fresh.local_id, med.blocked, now, "a MED's return replayed")?;
            TxStatus::Pending
        } else {
            TxStatus::Confirmed
        };
        // The rail pays the return back to the payer: the original's counterpart.
        let counterpart = match (&original, through_rail) {
            (Some(o), true) => o.counterpart.clone(),
            _ => Counterpart { name, ..Counterpart::default() },
        };
        refund = Some(Transaction {
            status,
            end_to_end_id: rtr_id.clone(),
            counterpart,
            processed_at: (!through_rail).then_some(now),
            description: Some(format!("MED {}", med.id)),
            refund: Some(RefundDetails {
                // Local ids start at 0: the MED's Option says whether there is an original.
                original_local_id: med.original_transaction_id.unwrap_or(0),
                original_end_to_end_id: med.end_to_end.clone(),
                refund_id: None,
                rtr_id,
                natureza: med.natureza(),
                reason: med.cause.clone(),
                family: Family::A,
            }),
            ..Transaction::new(
                fresh.local_id,
                fresh.transaction_id(),
                account.id,
                TxKind::RefundIn,
                med.blocked,
                now,
            )
        });
        med.refund_transaction_id = Some(fresh.local_id);
        if let (Some(_), Some(mut o)) = (med.original_transaction_id, original) {
            o.refunded = o.refunded.checked_add(med.blocked).unwrap_or(o.refunded);
            original_after = Some(o);
        }
    }
    let event = match req.result {
        Some(AnalysisResult::Approved) => Some(med_event(&med, EventType::MedAccepted, "MedAccepted")),
        Some(AnalysisResult::Rejected) => Some(med_event(&med, EventType::MedRejected, "MedRejected")),
        None => None,
    };
    let mut plan = Plan::new(med.clone());
    plan.ledger = Some(ledger.finish()?);
    plan.records.push(Record::Med(med));
    if let Some(t) = refund {
        plan.write(Record::NewTransaction(t), now);
    }
    if let Some(o) = original_after {
        plan.update(Record::Transaction(o));
    }
    plan.events.extend(event);
    Ok(plan)
}

/// The DICT asks for the money of an approved MED 2.0 case: what is blocked, up to
/// `requested`, leaves as a pending Refund in that the rail sends as a return (pacs.004) and
/// settles like any other; the rest is released. Nothing blocked: nothing leaves, and the
/// request is answered as rejected. Ids: one, for the Refund in.
pub fn return_med(
    account: &Account,
    med: Option<Med>,
    requested: Money,
    original: Option<Transaction>,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Med>, Refusal> {
    let mut med = med.ok_or(Refusal::Med(MedRejection::NotFound))?;
    if !med.awaiting_return() {
        return Err(Refusal::Med(MedRejection::Final(crate::domain::med::MedError::Final(
            med.status.as_str(),
        ))));
    }
    let value = med.blocked.min(requested);
    let mut ledger = account.ledger.draft();
    if !med.blocked.is_zero() && ledger.settle(med.id, false).is_none() {
        return Err(Refusal::Bug(format!("MED {} has no hold", med.id)));
    }
    med.blocked = value;
    med.updated_at = now;
    if let Some(i) = med.infraction.as_mut() {
        i.returned_at = Some(now);
    }
    let mut plan_records = Vec::new();
    if !value.is_zero() {
        let fresh = ids.take()?;
        hold(&mut ledger, account, fresh.local_id, value, now, "a MED's return replayed")?;
        let counterpart = original.as_ref().map(|o| o.counterpart.clone()).unwrap_or_default();
        let refund = Transaction {
            status: TxStatus::Pending,
            end_to_end_id: fresh.end_to_end_id('D', now),
            counterpart,
            description: Some(format!("MED {}", med.id)),
            refund: Some(RefundDetails {
                original_local_id: med.original_transaction_id.unwrap_or(0),
                original_end_to_end_id: med.end_to_end.clone(),
                refund_id: None,
                rtr_id: fresh.end_to_end_id('D', now),
                natureza: med.natureza(),
                reason: med.cause.clone(),
                family: Family::A,
            }),
            ..Transaction::new(
                fresh.local_id,
                fresh.transaction_id(),
                account.id,
                TxKind::RefundIn,
                value,
                now,
            )
        };
        med.refund_transaction_id = Some(fresh.local_id);
        plan_records.push(Record::NewTransaction(refund));
        if let (Some(_), Some(mut o)) = (med.original_transaction_id, original) {
            o.refunded = o.refunded.checked_add(value).unwrap_or(o.refunded);
            plan_records.push(Record::Transaction(o));
        }
    }
    let mut plan = Plan::new(med.clone());
    plan.ledger = Some(ledger.finish()?);
    plan.records.push(Record::Med(med));
    for r in plan_records {
        match r {
            Record::NewTransaction(_) => plan.write(r, now),
            other => plan.update(other),
        }
    }
    Ok(plan)
}

/// The DICT withdrew a MED 2.0 case (its report or its recovery cancelled): what it blocks
/// is released and it ends `CANCELLED`.
pub fn release_case(account: &Account, med: Option<Med>, now: DateTime<Utc>) -> Result<Plan<Med>, Refusal> {
    let mut med = med.ok_or(Refusal::Med(MedRejection::NotFound))?;
    med.withdraw(now).map_err(|e| Refusal::Med(MedRejection::Final(e)))?;
    let mut ledger = account.ledger.draft();
    if !med.blocked.is_zero() && ledger.settle(med.id, false).is_none() {
        return Err(Refusal::Bug(format!("MED {} has no hold", med.id)));
    }
    let mut plan = Plan::new(med.clone());
    plan.ledger = Some(ledger.finish()?);
    plan.records.push(Record::Med(med));
    Ok(plan)
}

/// Blocks, for each MED 2.0 case that lacks part of its amount (oldest first), what the
/// account has available now: money that arrived after the case opened (the payment's
/// return from the next institution, a later credit) is held for the victim as it lands.
/// `None` when nothing is short or nothing is available.
pub fn top_up(account: &Account, meds: Vec<Med>, now: DateTime<Utc>) -> Result<Option<Plan<()>>, Refusal> {
    let mut ledger = account.ledger.draft();
    let mut records = Vec::new();
    let mut meds = meds;
    meds.sort_by_key(|m| m.id);
    for mut med in meds {
        let available = ledger.balance().available;
        let extra = med.shortfall().min(available);
        if extra.is_zero() {
            continue;
        }
        ledger.grow_hold(med.id, extra).map_err(Refusal::Ledger)?;
        med.blocked = med.blocked.checked_add(extra).ok_or(Refusal::Bug("a MED's block overflows".into()))?;
        med.updated_at = now;
        records.push(Record::Med(med));
    }
    if records.is_empty() {
        return Ok(None);
    }
    let mut plan = Plan::new(());
    plan.ledger = Some(ledger.finish()?);
    plan.records = records;
    Ok(Some(plan))
}

/// The client's statement for a case against it, kept for the operator's analysis while
/// the case is open (at most [`EVIDENCE_COUNT_MAX`]).
pub fn add_evidence(med: Option<Med>, text: String, now: DateTime<Utc>) -> Result<Plan<Med>, Refusal> {
    let mut med = med.ok_or(Refusal::Med(MedRejection::NotFound))?;
    if !matches!(med.status, MedStatus::Open | MedStatus::Received) {
        return Err(Refusal::Med(MedRejection::Final(crate::domain::med::MedError::Final(
            med.status.as_str(),
        ))));
    }
    let Some(i) = med.infraction.as_mut() else { return Err(Refusal::Med(MedRejection::NotFound)) };
    if i.evidence.len() >= EVIDENCE_COUNT_MAX {
        return Err(Refusal::Med(MedRejection::EvidenceFull));
    }
    i.evidence.push(Evidence { text, at: now });
    med.updated_at = now;
    let mut plan = Plan::new(med.clone());
    plan.records.push(Record::Med(med));
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::domain::ledger::Balance;

    fn open(amount: Option<&str>) -> OpenMedRequest {
        OpenMedRequest {
            end_to_end: "E00000000202603101500abcdefghijk".into(),
            cause: "SCAM".into(),
            amount: amount.map(m),
            description: None,
            dict_refund_id: None,
            infraction: None,
        }
    }

    fn opened(f: &mut Fixture, amount: Option<&str>, original: Option<Transaction>) -> Plan<Med> {
        let plan = open_med(&f.account(), open(amount), original, None, noon(), &mut ids(&[30])).unwrap();
        f.apply(&plan);
        plan
    }

    #[test]
    fn opening_blocks_the_amount_capped_at_what_is_available_and_is_stored_received() {
        let mut f = Fixture::with_balance("6");
        let plan = opened(&mut f, None, Some(received("10")));
        let med = &plan.reply;
        assert_eq!((med.amount, med.blocked), (m("10"), m("6")));
        assert_eq!(med.status, MedStatus::Received);
        assert_eq!(plan.events[0].payload()["med"]["status"], "OPEN");
        assert_eq!(med.requesting_bank.ispb, "00000000");
        assert_eq!(f.ledger.balance(), Balance { available: m("0"), blocked: m("6") });
    }

    /// The original's time is when its money moved: a paid charge's payment, not the
    /// charge's creation days before.
    #[test]
    fn the_original_of_a_paid_charge_is_dated_by_its_payment() {
        let mut f = Fixture::with_balance("10");
        let mut paid = received("10");
        paid.kind = TxKind::CashIn;
        paid.created_at = noon() - chrono::Duration::days(3);
        let plan = opened(&mut f, None, Some(paid));
        let original = plan.reply.original.as_ref().unwrap();
        assert_eq!(original.date_time, noon());
        assert_eq!(
            plan.reply.to_json()["originalTransaction"]["dateTime"],
            crate::domain::events::iso(noon())
        );
    }

    #[test]
    fn a_med_that_cannot_be_decided_is_refused() {
        let f = Fixture::with_balance("6");
        let mut paid = received("10");
        paid.kind = TxKind::CashOut;
        let got = open_med(&f.account(), open(None), Some(paid), None, noon(), &mut ids(&[1]));
        assert_eq!(got.unwrap_err(), Refusal::Med(MedRejection::NotReceived));
        let got =
            open_med(&f.account(), open(Some("11")), Some(received("10")), None, noon(), &mut ids(&[1]));
        assert_eq!(got.unwrap_err(), Refusal::Med(MedRejection::AboveOriginal(m("10"))));
        let got = open_med(&f.account(), open(None), None, None, noon(), &mut ids(&[1]));
        assert_eq!(got.unwrap_err(), Refusal::Med(MedRejection::AmountRequired));
        // Unreconciled with an amount: the institution of the id's ISPB requests it.
        let bank = Participant { ispb: "12345678".into(), name: "Other".into() };
        let plan = open_med(&f.account(), open(Some("1")), None, Some(bank.clone()), noon(), &mut ids(&[1]))
            .unwrap();
        assert_eq!(plan.reply.requesting_bank, bank);
        assert!(!plan.reply.is_reconciled());
    }

    #[test]
    fn an_approval_debits_the_hold_as_a_refund_of_the_original() {
        let mut f = Fixture::with_balance("20");
        let med = opened(&mut f, Some("4"), Some(received("10"))).reply;
        let req = CloseMedRequest { result: Some(AnalysisResult::Approved), details: None, fraud_type: None };
        let plan =
            close_med(&f.account(), Some(med), req, Some(received("10")), noon(), &mut ids(&[31])).unwrap();
        assert_eq!(plan.reply.status, MedStatus::Analyzed);
        assert_eq!(plan.reply.refund_transaction_id, Some(31));
        let written = transactions(&plan);
        assert_eq!((written[0].kind, written[0].value), (TxKind::RefundIn, m("4")));
        assert_eq!(written[1].refunded, m("4"));
        // The refund's event, then the MED's.
        assert_eq!(plan.events.len(), 2);
        assert_eq!(plan.events[1].event_type, EventType::MedAccepted);
        f.apply(&plan);
        assert_eq!(f.ledger.balance(), Balance { available: m("16"), blocked: m("0") });
    }

    #[test]
    fn an_approved_med_of_the_dict_goes_back_as_a_pending_return_that_keeps_the_amount_blocked() {
        let mut f = Fixture::with_balance("20");
        let mut req = open(Some("4"));
        req.dict_refund_id = Some("91d65e98-97c0-4b0f-b577-73625da1f9fc".into());
        let plan = open_med(&f.account(), req, Some(received("10")), None, noon(), &mut ids(&[30])).unwrap();
        f.apply(&plan);
        let med = plan.reply;
        assert_eq!(med.to_json()["dictRefundId"], "91d65e98-97c0-4b0f-b577-73625da1f9fc");
        let approve =
            CloseMedRequest { result: Some(AnalysisResult::Approved), details: None, fraud_type: None };
        let plan = close_med(&f.account(), Some(med), approve, Some(received("10")), noon(), &mut ids(&[31]))
            .unwrap();
        let written = transactions(&plan);
        let refund = &written[0];
        assert_eq!((refund.kind, refund.status, refund.value), (TxKind::RefundIn, TxStatus::Pending, m("4")));
        assert_eq!(refund.processed_at, None, "the SPI has not settled it");
        assert_eq!(refund.counterpart, received("10").counterpart, "it goes back to the payer");
        assert_eq!(
            refund.refund.as_ref().map(|r| r.natureza),
            Some(crate::domain::transaction::Natureza::MedFraude)
        );
        f.apply(&plan);
        // Still blocked, now by the return, until the SPI settles it.
        assert_eq!(f.ledger.balance(), Balance { available: m("16"), blocked: m("4") });
    }

    #[test]
    fn a_rejection_or_cancellation_releases_the_hold_and_a_closed_med_stays_closed() {
        let mut f = Fixture::with_balance("20");
        let med = opened(&mut f, Some("4"), Some(received("10"))).reply;
        let cancel = CloseMedRequest { result: None, details: None, fraud_type: None };
        let plan = close_med(&f.account(), Some(med), cancel.clone(), None, noon(), &mut ids(&[])).unwrap();
        assert_eq!(plan.reply.status, MedStatus::Cancelled);
        assert!(plan.events.is_empty(), "a cancellation sends no event");
        f.apply(&plan);
        assert_eq!(f.ledger.balance(), Balance { available: m("20"), blocked: m("0") });
        let got = close_med(&f.account(), Some(plan.reply), cancel.clone(), None, noon(), &mut ids(&[]));
        assert!(matches!(got, Err(Refusal::Med(MedRejection::Final(_)))));
        assert_eq!(
            close_med(&f.account(), None, cancel, None, noon(), &mut ids(&[])).unwrap_err(),
            Refusal::Med(MedRejection::NotFound)
        );
    }
    fn infraction(due_at: chrono::DateTime<chrono::Utc>) -> Infraction {
        Infraction {
            report_id: "r-1".into(),
            recovery_id: Some("fr-1".into()),
            situation: "SCAM".into(),
            due_at,
            fraud_type: None,
            returned_at: None,
            evidence: Vec::new(),
        }
    }

    /// A MED 2.0 case of 10.00 on an account holding `balance`, opened and applied.
    fn case(f: &mut Fixture) -> Med {
        let mut req = open(Some("10"));
        req.infraction = Some(infraction(noon() + chrono::Duration::days(7)));
        let plan = open_med(&f.account(), req, Some(received("10")), None, noon(), &mut ids(&[30])).unwrap();
        f.apply(&plan);
        plan.reply
    }

    fn approve() -> CloseMedRequest {
        CloseMedRequest {
            result: Some(AnalysisResult::Approved),
            details: None,
            fraud_type: Some("SCAMMER_ACCOUNT".into()),
        }
    }

    #[test]
    fn an_approved_case_of_a_report_keeps_its_block_until_the_dict_asks_for_it() {
        let mut f = Fixture::with_balance("3");
        let med = case(&mut f);
        assert_eq!((med.blocked, med.shortfall()), (m("3"), m("7")));
        let plan =
            close_med(&f.account(), Some(med), approve(), Some(received("10")), noon(), &mut ids(&[31]))
                .unwrap();
        assert!(plan.ledger.is_none(), "nothing moves: the block stays");
        assert!(transactions(&plan).is_empty());
        assert_eq!(plan.events[0].event_type, EventType::MedAccepted);
        f.apply(&plan);
        let med = plan.reply;
        assert!(med.awaiting_return() && med.is_live());
        assert_eq!(med.infraction.as_ref().unwrap().fraud_type.as_deref(), Some("SCAMMER_ACCOUNT"));
        assert_eq!(f.ledger.balance(), Balance { available: m("0"), blocked: m("3") });
    }

    #[test]
    fn money_that_arrives_is_blocked_for_a_short_case_up_to_its_amount_oldest_first() {
        let mut f = Fixture::with_balance("3");
        let first = case(&mut f);
        // Credits land: 12.00 more available.
        let mut credit = f.ledger.draft();
        credit.credit(m("12"), m("0")).unwrap();
        f.ledger.apply(credit.finish().unwrap());
        let mut second = first.clone();
        second.id = 40;
        second.blocked = m("0");
        let plan = top_up(&f.account(), vec![second.clone(), first.clone()], noon()).unwrap().unwrap();
        let meds: Vec<&Med> = plan
            .records
            .iter()
            .filter_map(|r| match r {
                Record::Med(m) => Some(m),
                _ => None,
            })
            .collect();
        assert_eq!((meds[0].id, meds[0].blocked), (30, m("10")), "the older case fills first");
        assert_eq!((meds[1].id, meds[1].blocked), (40, m("5")), "the rest to the next");
        f.apply(&plan);
        assert_eq!(f.ledger.balance(), Balance { available: m("0"), blocked: m("15") });
        assert!(
            top_up(&f.account(), vec![meds[0].clone()], noon()).unwrap().is_none(),
            "full: nothing to do"
        );
    }

    #[test]
    fn the_dicts_refund_request_sends_back_what_is_blocked_up_to_what_it_asks_and_releases_the_rest() {
        let mut f = Fixture::with_balance("10");
        let med = case(&mut f);
        let plan =
            close_med(&f.account(), Some(med), approve(), Some(received("10")), noon(), &mut ids(&[31]))
                .unwrap();
        f.apply(&plan);
        let approved = plan.reply;
        let plan = return_med(
            &f.account(),
            Some(approved.clone()),
            m("6"),
            Some(received("10")),
            noon(),
            &mut ids(&[32]),
        )
        .unwrap();
        let written = transactions(&plan);
        assert_eq!(
            (written[0].kind, written[0].status, written[0].value),
            (TxKind::RefundIn, TxStatus::Pending, m("6"))
        );
        assert_eq!(written[1].refunded, m("6"), "counted against the original");
        let returned = plan.reply.clone();
        assert_eq!((returned.blocked, returned.refund_transaction_id), (m("6"), Some(32)));
        assert!(!returned.awaiting_return() && !returned.is_live());
        f.apply(&plan);
        assert_eq!(f.ledger.balance(), Balance { available: m("4"), blocked: m("6") });
        let again = return_med(&f.account(), Some(returned), m("6"), None, noon(), &mut ids(&[33]));
        assert!(matches!(again, Err(Refusal::Med(MedRejection::Final(_)))), "{again:?}");
    }

    #[test]
    fn a_statement_is_kept_while_the_case_is_open_up_to_the_limit() {
        let mut f = Fixture::with_balance("10");
        let mut med = case(&mut f);
        for n in 0..crate::domain::med::EVIDENCE_COUNT_MAX {
            med = add_evidence(Some(med), format!("statement {n}"), noon()).unwrap().reply;
        }
        let full = add_evidence(Some(med.clone()), "one more".into(), noon());
        assert_eq!(full.unwrap_err(), Refusal::Med(MedRejection::EvidenceFull));
        let plan = close_med(&f.account(), Some(med), approve(), None, noon(), &mut ids(&[31])).unwrap();
        let closed = add_evidence(Some(plan.reply), "late".into(), noon());
        assert!(matches!(closed, Err(Refusal::Med(MedRejection::Final(_)))));
        let plain = opened(&mut f, Some("1"), Some(received("10"))).reply;
        assert_eq!(
            add_evidence(Some(plain), "x".into(), noon()).unwrap_err(),
            Refusal::Med(MedRejection::NotFound)
        );
    }
    #[test]
    fn a_case_the_dict_withdraws_releases_its_block_open_or_awaiting_its_return() {
        let mut f = Fixture::with_balance("10");
        let open = case(&mut f);
        let plan = release_case(&f.account(), Some(open.clone()), noon()).unwrap();
        assert_eq!(
            (plan.reply.status, plan.reply.reason),
            (MedStatus::Cancelled, MedReason::RefundCancellation)
        );
        let mut g = Fixture::with_balance("10");
        let med = case(&mut g);
        let approved = close_med(&g.account(), Some(med), approve(), None, noon(), &mut ids(&[31])).unwrap();
        g.apply(&approved);
        let plan = release_case(&g.account(), Some(approved.reply), noon()).unwrap();
        g.apply(&plan);
        assert_eq!(g.ledger.balance(), Balance { available: m("10"), blocked: m("0") });
        let again = release_case(&g.account(), Some(plan.reply), noon());
        assert!(matches!(again, Err(Refusal::Med(MedRejection::Final(_)))));
        let plain = opened(&mut f, Some("1"), Some(received("10"))).reply;
        assert!(
            release_case(&f.account(), Some(plain), noon()).is_err(),
            "a MED 1 case is not the DICT's to withdraw"
        );
    }
}
