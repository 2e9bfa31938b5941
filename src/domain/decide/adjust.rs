//! The operator's money: funding an account, correcting it. Every such move is a
//! transaction of its own kind (`OPERATOR_CREDIT`, `OPERATOR_DEBIT`), final at once, with its
//! record, its webhook and its payment-log line, so no balance ever appears or disappears
//! without one.
//!
//! The operator names each move with a reference of its own, which is the move's
//! idempotency key: it takes the account's externalId `operator:{reference}` (a prefix no
//! client may use), so the same move asked twice is made once.

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
}
