//! The operator's money: funding an account, correcting it. Every such move is a
//! transaction of its own kind (`OPERATOR_CREDIT`, `OPERATOR_DEBIT`), final at once, with its
//! record, its webhook and its payment-log line, so no balance ever appears or disappears
//! without one.
//!
//! The operator names each move with a reference of its own, which is the move's
//! idempotency key: it takes the account's externalId `operator:{reference}` (a prefix no
//! client may use), so the same move asked twice is made once.
//!
//! A credit above the server's single-operator bound needs two operators: the first to ask
//! proposes it (nothing moves), and the same request from another admin token makes it
//! ([`second_operator`]).

use chrono::{DateTime, Utc};

use super::{Account, Ids, PayDecision, Plan, Record, Refusal};
use crate::domain::ledger::{DebitDecision, DebitRequest, Limited, StoredKeys};
use crate::domain::money::Money;
use crate::domain::transaction::{Counterpart, Transaction, TxKind, TxStatus};

/// The externalId prefix of the operator's moves.
pub const OPERATOR_EXTERNAL_ID_PREFIX: &str = "operator:";
/// The longest reason and reference.
pub const ADJUSTMENT_REASON_LEN_MAX: usize = 140;
pub const ADJUSTMENT_REFERENCE_LEN_MAX: usize = 64;
/// Who a move names as its counterpart.
pub const OPERATOR_NAME: &str = "pixgw operator";

/// A move of the operator's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjustment {
    pub credit: bool,
    pub value: Money,
    pub reason: String,
    pub reference: String,
    /// Who asked: the name of the operator's admin token, kept on the transaction.
    pub operator: String,
}

impl Adjustment {
    pub fn external_id(&self) -> String {
        format!("{OPERATOR_EXTERNAL_ID_PREFIX}{}", self.reference)
    }

    /// Whether this asks again for the move `tx` made under the same reference: the same
    /// direction, amount and reason (whoever asks). Anything else under a reference already
    /// used is another move, which the reference cannot name twice.
    pub fn repeats(&self, tx: &Transaction) -> bool {
        let kind = if self.credit { TxKind::OperatorCredit } else { TxKind::OperatorDebit };
        tx.kind == kind && tx.value == self.value && tx.description.as_deref() == Some(self.reason.as_str())
    }
}

/// Decides an operator's move: a replay of the same reference answers the first move.
pub fn adjust(
    account: &Account,
    req: Adjustment,
    stored: StoredKeys,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<PayDecision, Refusal> {
    let fresh = ids.take()?;
    let external_id = req.external_id();
    let mut ledger = account.ledger.draft();
    // The debit request takes the reference (a credit holds nothing, a debit its amount).
    let take = DebitRequest {
        local_id: fresh.local_id,
        external_id: Some(external_id.clone()),
        idempotency: None,
        value: req.value,
        fee: Money::ZERO,
        hold: !req.credit,
        limited: Limited::No,
        now,
        stored,
    };
    match ledger.debit(&take, &account.settings.limits) {
        Ok(DebitDecision::Accepted { .. }) => {}
        Ok(DebitDecision::Replay { existing }) => return Ok(PayDecision::Replay(existing)),
        Err(crate::domain::ledger::Rejection::DuplicateExternalId { existing }) => {
            return Ok(PayDecision::Replay(existing))
        }
        Err(r) => return Err(Refusal::Ledger(r)),
    }
    if req.credit {
        ledger.credit(req.value, Money::ZERO).map_err(Refusal::Ledger)?;
    } else if ledger.settle(fresh.local_id, true).is_none() {
        return Err(Refusal::Bug("an operator debit held nothing".into()));
    }
    let kind = if req.credit { TxKind::OperatorCredit } else { TxKind::OperatorDebit };
    let tx = Transaction {
        status: TxStatus::Confirmed,
        processed_at: Some(now),
        external_id: Some(external_id),
        end_to_end_id: String::new(),
        description: Some(req.reason),
        counterpart: Counterpart { name: OPERATOR_NAME.into(), ..Counterpart::default() },
        operator: Some(req.operator),
        ..Transaction::new(fresh.local_id, fresh.transaction_id(), account.id, kind, req.value, now)
    };
    let mut plan = Plan::new(tx.clone());
    plan.ledger = Some(ledger.finish()?);
    plan.write(Record::NewTransaction(tx), now);
    Ok(PayDecision::Plan(Box::new(plan)))
}

/// The default bound above which an operator credit needs a second operator.
pub const OPERATOR_CREDIT_SINGLE_MAX_DEFAULT: &str = "10000.00";

/// A credit above the bound, proposed by one operator, waiting for another.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreditProposal {
    pub reference: String,
    pub value: Money,
    pub reason: String,
    pub proposed_by: String,
    pub proposed_at: DateTime<Utc>,
}

/// What a credit needs before it is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreditApproval {
    /// Make it, recorded as this operator's (both names for a credit two approved).
    Proceed { operator: String },
    /// Above the bound and first asked: keep this proposal; nothing moves.
    Propose(CreditProposal),
    /// Asked again by the operator who proposed it: it still waits for another.
    Wait(CreditProposal),
    /// The reference names a proposal of another amount or reason.
    Conflict(CreditProposal),
}

/// The two-person rule for `a` at `now`: `single_max` is the largest credit one operator
/// makes alone, `proposed` the proposal stored under its reference.
pub fn second_operator(
    a: &Adjustment,
    single_max: Money,
    proposed: Option<CreditProposal>,
    now: DateTime<Utc>,
) -> CreditApproval {
    if !a.credit || a.value <= single_max {
        return CreditApproval::Proceed { operator: a.operator.clone() };
    }
    match proposed {
        None => CreditApproval::Propose(CreditProposal {
            reference: a.reference.clone(),
            value: a.value,
            reason: a.reason.clone(),
            proposed_by: a.operator.clone(),
            proposed_at: now,
        }),
        Some(p) if p.value != a.value || p.reason != a.reason => CreditApproval::Conflict(p),
        Some(p) if p.proposed_by == a.operator => CreditApproval::Wait(p),
        Some(p) => {
            CreditApproval::Proceed { operator: format!("{} (approved by {})", p.proposed_by, a.operator) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::domain::ledger::{Balance, Rejection};

    fn adjustment(credit: bool, value: &str, reference: &str) -> Adjustment {
        Adjustment {
            credit,
            value: m(value),
            reason: "funding".into(),
            reference: reference.into(),
            operator: "ops-ana".into(),
        }
    }

    fn planned(d: PayDecision) -> Plan<Transaction> {
        match d {
            PayDecision::Plan(p) => *p,
            PayDecision::Replay(id) => panic!("replay of {id}"),
        }
    }

    #[test]
    fn a_credit_and_a_debit_are_final_transactions_that_move_the_balance_at_once() {
        let mut f = Fixture::with_balance("0");
        let credit = planned(
            adjust(
                &f.account(),
                adjustment(true, "100", "f-1"),
                StoredKeys::default(),
                noon(),
                &mut ids(&[1]),
            )
            .unwrap(),
        );
        f.apply(&credit);
        assert_eq!((credit.reply.kind, credit.reply.status), (TxKind::OperatorCredit, TxStatus::Confirmed));
        assert_eq!(credit.reply.external_id.as_deref(), Some("operator:f-1"));
        assert_eq!(
            (credit.reply.operator.as_deref(), credit.reply.counterpart.name.as_str()),
            (Some("ops-ana"), OPERATOR_NAME),
            "the operator is on the record; the client's counterpart stays the gateway's operator"
        );
        assert_eq!(credit.events.len(), 1, "it has its webhook");
        let debit = planned(
            adjust(
                &f.account(),
                adjustment(false, "30", "c-1"),
                StoredKeys::default(),
                noon(),
                &mut ids(&[2]),
            )
            .unwrap(),
        );
        f.apply(&debit);
        assert_eq!(debit.reply.kind, TxKind::OperatorDebit);
        assert_eq!(f.ledger.balance(), Balance { available: m("70"), blocked: m("0") });
        // More than is available is refused; nothing moves.
        let e = adjust(
            &f.account(),
            adjustment(false, "70.01", "c-2"),
            StoredKeys::default(),
            noon(),
            &mut ids(&[3]),
        )
        .unwrap_err();
        assert_eq!(e, Refusal::Ledger(Rejection::InsufficientBalance));
    }

    #[test]
    fn the_same_reference_again_answers_the_first_move() {
        let mut f = Fixture::with_balance("0");
        let first = planned(
            adjust(&f.account(), adjustment(true, "5", "r"), StoredKeys::default(), noon(), &mut ids(&[1]))
                .unwrap(),
        );
        f.apply(&first);
        let again =
            adjust(&f.account(), adjustment(true, "5", "r"), StoredKeys::default(), noon(), &mut ids(&[2]))
                .unwrap();
        assert_eq!(again, PayDecision::Replay(1));
        let stored = StoredKeys { external: Some(1), idempotency: None };
        let later = adjust(
            &Fixture::with_balance("5").account(),
            adjustment(false, "1", "r"),
            stored,
            noon(),
            &mut ids(&[3]),
        )
        .unwrap();
        assert_eq!(later, PayDecision::Replay(1), "a reference is one move, whatever it asks later");
    }

    #[test]
    fn a_repeat_asks_for_the_same_direction_amount_and_reason_whoever_asks() {
        let mut f = Fixture::with_balance("0");
        let first = planned(
            adjust(&f.account(), adjustment(true, "5", "r"), StoredKeys::default(), noon(), &mut ids(&[1]))
                .unwrap(),
        );
        f.apply(&first);
        let made = &first.reply;
        assert!(adjustment(true, "5", "r").repeats(made));
        assert!(adjustment(true, "5.00", "r").repeats(made), "the same amount written otherwise");
        assert!(Adjustment { operator: "ops-bia".into(), ..adjustment(true, "5", "r") }.repeats(made));
        assert!(!adjustment(true, "5.01", "r").repeats(made));
        assert!(!adjustment(false, "5", "r").repeats(made));
        assert!(!Adjustment { reason: "another".into(), ..adjustment(true, "5", "r") }.repeats(made));
    }

    #[test]
    fn a_credit_above_the_bound_is_made_only_when_a_second_operator_asks_the_same() {
        let now: DateTime<Utc> = "2026-11-28T12:00:00Z".parse().unwrap();
        let max = Money::parse("10000.00").unwrap();
        let ask = |credit: bool, value: &str, reason: &str, by: &str| Adjustment {
            credit,
            value: Money::parse(value).unwrap(),
            reason: reason.into(),
            reference: "r1".into(),
            operator: by.into(),
        };
        // At the bound, and any debit, one operator is enough.
        let one = |a: &Adjustment| second_operator(a, max, None, now);
        assert_eq!(
            one(&ask(true, "10000.00", "x", "ana")),
            CreditApproval::Proceed { operator: "ana".into() }
        );
        assert_eq!(
            one(&ask(false, "50000.00", "x", "ana")),
            CreditApproval::Proceed { operator: "ana".into() }
        );
        let CreditApproval::Propose(p) = one(&ask(true, "10000.01", "funding", "ana")) else { panic!() };
        assert_eq!((p.proposed_by.as_str(), p.value), ("ana", Money::parse("10000.01").unwrap()));
        let again = |a: &Adjustment| second_operator(a, max, Some(p.clone()), now);
        assert_eq!(again(&ask(true, "10000.01", "funding", "ana")), CreditApproval::Wait(p.clone()));
        assert_eq!(again(&ask(true, "10000.02", "funding", "bia")), CreditApproval::Conflict(p.clone()));
        assert_eq!(again(&ask(true, "10000.01", "other", "bia")), CreditApproval::Conflict(p.clone()));
        assert_eq!(
            again(&ask(true, "10000.01", "funding", "bia")),
            CreditApproval::Proceed { operator: "ana (approved by bia)".into() }
        );
    }
}
