//! Refunds: a refund of a received PIX (a debit, held until the payer's bank settles it),
//! and money a counterparty returns of a payment we made (a credit).
//!
//! The original's `refunded` sum is written in the same plan as the refund, so "refunds never
//! exceed the amount" holds under any concurrency: the actor decides one refund at a time on
//! the sum that includes every earlier one, pending ones too. A refund that fails gives its
//! amount back to that sum (see [`super::settle`]).

use chrono::{DateTime, Utc};

use super::{Account, Ids, Plan, Record, Refusal};
use crate::domain::ledger::{DebitDecision, DebitRequest, Limited, Rejection, StoredKeys};
use crate::domain::money::Money;
use crate::domain::refunds::{check_refund, check_return, RefundRejection};
use crate::domain::scenario::PayoutScenario;
use crate::domain::transaction::{
    end_to_end_id, Family, Natureza, RefundDetails, Transaction, TxKind, TxStatus, PAYER_ISPB,
};

/// A refund of a received PIX, from either family.
#[derive(Debug, Clone)]
pub struct RefundRequest {
    pub original_local_id: u64,
    pub value: Money,
    /// The refund-in externalId or the devolução id (one namespace).
    pub refund_id: Option<String>,
    pub reason: Option<String>,
    pub natureza: Natureza,
    pub family: Family,
    pub scenario: Option<PayoutScenario>,
}

/// A refund decided: a new one, or the one made before with the same id.
#[derive(Debug, Clone, PartialEq)]
pub enum RefundDecision {
    Replay(Box<Transaction>),
    Plan(Box<Plan<Transaction>>),
}

/// The transaction a refund id already names: its local id, and the transaction if it is one
/// of this account's.
pub type TakenBy = (u64, Option<Transaction>);

/// Decides a refund. `taken` is the owner of the refund id, if any; `original`, the account's
/// transaction it refunds as it is now (`None`: not one of this account's).
pub fn refund(
    account: &Account,
    req: RefundRequest,
    taken: Option<TakenBy>,
    original: Option<Transaction>,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<RefundDecision, Refusal> {
    if let Some((existing, earlier)) = taken {
        // The same id again: the same refund if it asks the same, else a conflict.
        let earlier = earlier.ok_or(Refusal::Refund(RefundRejection::NotReceived))?;
        let same = earlier.kind == TxKind::RefundIn
            && earlier.value == req.value
            && earlier.refund.as_ref().is_some_and(|r| r.original_local_id == req.original_local_id);
        return if same {
            Ok(RefundDecision::Replay(Box::new(earlier)))
        } else {
            Err(Refusal::Ledger(Rejection::DuplicateExternalId { existing }))
        };
    }
    let mut original = original.ok_or(Refusal::Refund(RefundRejection::NotReceived))?;
    check_refund(&original, req.value, now).map_err(Refusal::Refund)?;
    let fresh = ids.take()?;
    let fee = account.fee_rule(TxKind::RefundIn).fee_for(req.value);
    let mut ledger = account.ledger.draft();
    let debit = DebitRequest {
        local_id: fresh.local_id,
        external_id: req.refund_id.clone(),
        idempotency: None,
        value: req.value,
        fee,
        hold: true,
        limited: Limited::No,
        now,
        stored: StoredKeys::default(),
    };
    if let DebitDecision::Replay { .. } =
        ledger.debit(&debit, &account.settings.limits).map_err(Refusal::Ledger)?
    {
        return Err(Refusal::Bug("a refund replayed".into()));
    }
    let rtr_id = fresh.end_to_end_id('D', now);
    let tx = Transaction {
        fee,
        external_id: req.refund_id.clone(),
        end_to_end_id: rtr_id.clone(),
        description: req.reason.clone(),
        counterpart: original.counterpart.clone(),
        scenario: req.scenario,
        refund: Some(RefundDetails {
            original_local_id: original.local_id,
            original_end_to_end_id: original.end_to_end_id.clone(),
            refund_id: req.refund_id,
            rtr_id,
            natureza: req.natureza,
            reason: req.reason,
            family: req.family,
        }),
        ..Transaction::new(
            fresh.local_id,
            fresh.transaction_id(),
            account.id,
            TxKind::RefundIn,
            req.value,
            now,
        )
    };
    original.refunded =
        original.refunded.checked_add(req.value).ok_or(Refusal::Ledger(Rejection::Overflow))?;
    let mut plan = Plan::new(tx.clone());
    plan.ledger = Some(ledger.finish()?);
    plan.write(Record::NewTransaction(tx), now);
    plan.update(Record::Transaction(original));
    Ok(RefundDecision::Plan(Box::new(plan)))
}

/// The counterparty of one of our payments returns `value` of it (the sandbox's at once, the
/// SPI's once it settled): a Refund out. `original` is the account's payment as it is now;
/// `return_id` the return's id when the counterparty's institution sent one.
pub fn take_back(
    account: &Account,
    original: Option<Transaction>,
    value: Money,
    return_id: Option<String>,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Transaction>, Refusal> {
    let mut original = original.ok_or(Refusal::Refund(RefundRejection::NotSettledPayment))?;
    check_return(&original, value).map_err(Refusal::Refund)?;
    let fresh = ids.take()?;
    let mut ledger = account.ledger.draft();
    ledger.credit(value, Money::ZERO).map_err(Refusal::Ledger)?;
    // The counterparty's institution made the return's id (the SPI's message carries it).
    let ispb = original.counterpart.bank.as_ref().map_or(PAYER_ISPB, |b| b.ispb.as_str()).to_owned();
    let rtr_id = return_id.unwrap_or_else(|| end_to_end_id('D', &ispb, now, &fresh.entropy()));
    let tx = Transaction {
        status: TxStatus::Confirmed,
        end_to_end_id: rtr_id.clone(),
        counterpart: original.counterpart.clone(),
        processed_at: Some(now),
        refund: Some(RefundDetails {
            original_local_id: original.local_id,
            original_end_to_end_id: original.end_to_end_id.clone(),
            refund_id: None,
            rtr_id,
            natureza: Natureza::Original,
            reason: None,
            family: Family::A,
        }),
        ..Transaction::new(fresh.local_id, fresh.transaction_id(), account.id, TxKind::RefundOut, value, now)
    };
    original.refunded = original.refunded.checked_add(value).ok_or(Refusal::Ledger(Rejection::Overflow))?;
    let mut plan = Plan::new(tx.clone());
    plan.ledger = Some(ledger.finish()?);
    plan.write(Record::NewTransaction(tx), now);
    plan.update(Record::Transaction(original));
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::domain::ledger::Balance;

    fn request(value: &str, id: &str) -> RefundRequest {
        RefundRequest {
            original_local_id: 10,
            value: m(value),
            refund_id: Some(id.into()),
            reason: Some("return".into()),
            natureza: Natureza::Original,
            family: Family::B,
            scenario: None,
        }
    }

    fn planned(d: RefundDecision) -> Plan<Transaction> {
        match d {
            RefundDecision::Plan(p) => *p,
            RefundDecision::Replay(t) => panic!("replay of {}", t.local_id),
        }
    }

    #[test]
    fn a_refund_holds_its_amount_and_adds_to_the_originals_refunded_sum() {
        let mut f = Fixture::with_balance("20");
        let plan = planned(
            refund(&f.account(), request("4", "r1"), None, Some(received("10")), noon(), &mut ids(&[11]))
                .unwrap(),
        );
        let tx = &plan.reply;
        assert_eq!(
            (tx.kind, tx.status, tx.external_id.as_deref()),
            (TxKind::RefundIn, TxStatus::Pending, Some("r1"))
        );
        assert!(tx.end_to_end_id.starts_with(&format!("D{}", crate::domain::transaction::gateway_ispb())));
        assert_eq!(crate::domain::transaction::local_id_in_end_to_end(&tx.end_to_end_id), Some(11));
        let written = transactions(&plan);
        assert_eq!(written[1].local_id, 10);
        assert_eq!(written[1].refunded, m("4"));
        assert!(plan.events.is_empty(), "pending: no event yet");
        f.apply(&plan);
        assert_eq!(f.ledger.balance(), Balance { available: m("16"), blocked: m("4") });
        assert_eq!(f.ledger.external_id("r1"), Some(11));
    }

    #[test]
    fn the_same_refund_id_replays_the_same_refund_or_conflicts() {
        let f = Fixture::with_balance("20");
        let plan = planned(
            refund(&f.account(), request("4", "r1"), None, Some(received("10")), noon(), &mut ids(&[11]))
                .unwrap(),
        );
        let earlier = plan.reply;
        let again = refund(
            &f.account(),
            request("4", "r1"),
            Some((11, Some(earlier.clone()))),
            None,
            noon(),
            &mut ids(&[12]),
        );
        assert_eq!(again, Ok(RefundDecision::Replay(Box::new(earlier.clone()))));
        let other = refund(
            &f.account(),
            request("5", "r1"),
            Some((11, Some(earlier))),
            None,
            noon(),
            &mut ids(&[12]),
        );
        assert_eq!(other, Err(Refusal::Ledger(Rejection::DuplicateExternalId { existing: 11 })));
        let foreign =
            refund(&f.account(), request("4", "r1"), Some((11, None)), None, noon(), &mut ids(&[12]));
        assert_eq!(foreign, Err(Refusal::Refund(RefundRejection::NotReceived)));
    }

    #[test]
    fn a_refund_beyond_the_refundable_sum_or_of_nothing_is_refused() {
        let f = Fixture::with_balance("20");
        let mut o = received("10");
        o.refunded = m("7");
        let got = refund(&f.account(), request("4", "r"), None, Some(o), noon(), &mut ids(&[1]));
        assert_eq!(got, Err(Refusal::Refund(RefundRejection::ExceedsRefundable { refundable: m("3") })));
        let got = refund(&f.account(), request("4", "r"), None, None, noon(), &mut ids(&[1]));
        assert_eq!(got, Err(Refusal::Refund(RefundRejection::NotReceived)));
    }

    #[test]
    fn money_returned_of_a_payment_is_credited_at_once() {
        let mut f = Fixture::with_balance("0");
        let mut paid = received("10");
        paid.kind = TxKind::CashOut;
        let plan =
            take_back(&f.account(), Some(paid.clone()), m("3"), None, noon(), &mut ids(&[20])).unwrap();
        assert_eq!((plan.reply.kind, plan.reply.status), (TxKind::RefundOut, TxStatus::Confirmed));
        assert_eq!(transactions(&plan)[1].refunded, m("3"));
        assert_eq!(plan.events.len(), 1, "the refund_out event");
        f.apply(&plan);
        assert_eq!(f.ledger.balance().available, m("3"));
        paid.refunded = m("9");
        let got = take_back(&f.account(), Some(paid), m("3"), None, noon(), &mut ids(&[21]));
        assert_eq!(got, Err(Refusal::Refund(RefundRejection::ExceedsRefundable { refundable: m("1") })));
    }
}
