//! On-us payments: one account of this gateway pays another (or itself).
//!
//! The payer's transfer goes through the simulated bank like any other; when it settles
//! CONFIRMED, its settlement writes, in the same batch, an [`OnUsCredit`] owed to the payee.
//! The payee's actor carries the credit out ([`receive`]) and deletes it in the same batch
//! as the credit, so the credit happens once however many times it is delivered (at least
//! once: by the payer after its settlement is durable, and again at every start while it is
//! still written). The credit is a payment of the payee's charge when the code named one
//! that is still open and due this amount, else a received PIX; it never fails, because the
//! payer's money has already left. The amount due is the one of the instant the payer made
//! the payment (`paid_at`): a cobv paid just before midnight is priced on that day however
//! late its credit arrives.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::charges::{amount_due, pay_charge, ChargeOutcome, ChargeState, Offer, Payer};
use super::pay::{pix_in, PixInRequest};
use super::{Account, Ids, Plan, Record, Refusal};
use crate::domain::document::TaxId;
use crate::domain::ids::AccountId;
use crate::domain::money::Money;
use crate::domain::transaction::{
    code_reference, parse_code_reference, BankInfo, CodeReference, ErrorCode, Transaction, TxStatus,
};

/// A credit owed to an account of this gateway for a payment made to one of its keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OnUsCredit {
    pub payee: AccountId,
    /// The payer's end-to-end id, which the payee's transaction carries too.
    pub end_to_end_id: String,
    pub value: Money,
    pub payer_name: String,
    pub payer_document: String,
    /// What the code's txid field said, when the payment was made by code.
    pub reference: Option<String>,
    /// When the payer made the payment (credits written before this field have none: they
    /// are priced when they arrive).
    #[serde(default)]
    pub paid_at: Option<DateTime<Utc>>,
    /// Set when this money returns a payment the payee made (a refund of an on-us payment):
    /// that payment's end-to-end id. The credit is then a Refund out of that payment, and
    /// `end_to_end_id` is the return's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returns: Option<String>,
}

/// Who pays, as the payer's settlement writes it into the credit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnUsPayer {
    pub payee: AccountId,
    pub name: String,
    pub document: String,
}

/// The credit a confirmed transfer owes, if it was made to an account of this gateway.
pub fn credit_of(tx: &Transaction, payer: &OnUsPayer) -> OnUsCredit {
    OnUsCredit {
        payee: payer.payee,
        end_to_end_id: tx.end_to_end_id.clone(),
        value: tx.value,
        payer_name: payer.name.clone(),
        payer_document: payer.document.clone(),
        reference: tx.qr_txid.clone(),
        paid_at: Some(tx.created_at),
        returns: None,
    }
}

/// The credit a confirmed refund of an on-us payment owes the account that made the
/// payment: its money back, as a return of that payment.
pub fn return_of(refund: &Transaction, payer: &OnUsPayer) -> Option<OnUsCredit> {
    let details = refund.refund.as_ref()?;
    Some(OnUsCredit {
        payee: payer.payee,
        end_to_end_id: details.rtr_id.clone(),
        value: refund.value,
        payer_name: payer.name.clone(),
        payer_document: payer.document.clone(),
        reference: None,
        paid_at: Some(refund.created_at),
        returns: Some(details.original_end_to_end_id.clone()),
    })
}

/// Whether `charge` is the one a code's reference names.
pub fn names_charge(reference: &str, charge: &Transaction) -> bool {
    let Some(c) = &charge.charge else { return false };
    match parse_code_reference(reference) {
        CodeReference::Local(local) => {
            local == charge.local_id && code_reference(&c.txid, local) == reference
        }
        CodeReference::Txid(txid) => c.txid == txid,
    }
}

/// The account that made an on-us payment gets money of it back (its payee refunded it):
/// a Refund out of `original` (this account's payment as it is now), and the credit's
/// record deleted in the same batch. Ids: one.
pub fn receive_return(
    account: &Account,
    owed: OnUsCredit,
    original: Option<Transaction>,
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Transaction>, Refusal> {
    let e2e = owed.end_to_end_id.clone();
    let mut plan = super::refunds::take_back(account, original, owed.value, Some(e2e.clone()), now, ids)?;
    plan.update(Record::OnUsCredited(e2e));
    Ok(plan)
}

/// The payee carries out a credit: [`credit`], and the credit's record is deleted in the
/// same batch. Ids: one, plus one per split of the charge.
pub fn receive(
    account: &Account,
    owed: OnUsCredit,
    charge: Option<Transaction>,
    payer_bank: Option<BankInfo>,
    split_banks: &[Option<BankInfo>],
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Transaction>, Refusal> {
    let e2e = owed.end_to_end_id.clone();
    let mut plan = credit(account, owed, charge, payer_bank, split_banks, now, ids)?;
    plan.update(Record::OnUsCredited(e2e));
    Ok(plan)
}

/// Money the account is owed because a payer paid it (on us, or through the SPI): pays
/// `charge` (an open charge of the account that the credit's reference names, as the actor
/// found it) when it is still due at the payer's instant and asks for this amount, else
/// records a received PIX. It never refuses for the charge: the payer's money has left.
/// Ids: one, plus one per split of the charge.
pub fn credit(
    account: &Account,
    credit: OnUsCredit,
    charge: Option<Transaction>,
    payer_bank: Option<BankInfo>,
    split_banks: &[Option<BankInfo>],
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Transaction>, Refusal> {
    let e2e = credit.end_to_end_id.clone();
    let (amount, at) = (Some(credit.value), credit.paid_at.unwrap_or(now));
    let payable = charge.map(|c| open_if_paid_in_time(c, at)).filter(|c| amount_due(c, at) == amount);
    let plan = match (payable, TaxId::parse(&credit.payer_document)) {
        (Some(charge), Ok(document)) => {
            let payer = Payer { name: credit.payer_name, document, end_to_end_id: Some(e2e.clone()) };
            let plan = pay_charge(
                account,
                ChargeState::Open(Box::new(charge)),
                Offer { payer: Some(payer), amount, at: Some(at) },
                payer_bank,
                split_banks,
                now,
                ids,
            )?;
            match plan.reply.clone() {
                ChargeOutcome::Paid(tx) => plan.with_reply(*tx),
                ChargeOutcome::Expired => return Err(Refusal::Bug("a due charge expired".into())),
            }
        }
        _ => pix_in(
            account,
            PixInRequest {
                value: credit.value,
                payer_name: credit.payer_name,
                payer_document: Some(credit.payer_document),
                payer_bank,
                end_to_end_id: Some(e2e.clone()),
                paid_txid: None,
            },
            now,
            ids,
        )?,
    };
    Ok(plan)
}

/// A charge its deadline closed (ERROR / EXPIRED) while a payment made before that deadline
/// was on its way to it is still that payment's to pay: the payer's instant decides whether
/// it was in time, as it decides the price (docs/decisions.md "Charges with a due date").
/// Any other closed charge (paid, cancelled) stays closed.
pub(super) fn open_if_paid_in_time(mut charge: Transaction, paid_at: DateTime<Utc>) -> Transaction {
    let expired = charge.status == TxStatus::Error && charge.error_code == Some(ErrorCode::Expired);
    if expired && charge.charge.as_ref().is_some_and(|d| paid_at < d.expires_at) {
        charge.status = TxStatus::Pending;
        charge.error_code = None;
        charge.processed_at = None;
    }
    charge
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::decide::testing::{charge_request, ids, m, noon, Fixture};
    use crate::domain::ledger::StoredKeys;
    use crate::domain::transaction::{TxKind, TxStatus};

    fn credit(value: &str, reference: Option<String>) -> OnUsCredit {
        OnUsCredit {
            payee: AccountId::new(1).unwrap(),
            end_to_end_id: "E99999999202611231200A0000000042".into(),
            value: m(value),
            payer_name: "Bia".into(),
            payer_document: "52998224725".into(),
            reference,
            paid_at: None,
            returns: None,
        }
    }

    /// Creates the charge `request` asks for, with local id 7.
    fn created(f: &mut Fixture, request: crate::domain::decide::ChargeRequest) -> Transaction {
        let plan = super::super::create_charge(
            &f.account(),
            request,
            false,
            StoredKeys::default(),
            noon(),
            &mut ids(&[7]),
        )
        .unwrap();
        f.apply(&plan);
        plan.reply
    }

    fn charge(f: &mut Fixture, value: &str) -> Transaction {
        created(f, charge_request(value))
    }

    /// The cobv of `testing::cobv_request`: 100.00 due 2026-11-24, a 2.00 fine, payable ten
    /// days after.
    fn cobv(f: &mut Fixture) -> Transaction {
        created(f, crate::domain::decide::testing::cobv_request(0))
    }

    #[test]
    fn money_an_on_us_payee_returns_is_a_refund_out_of_the_payment_and_ends_the_credit() {
        let mut f = Fixture::with_balance("0");
        let mut paid = Transaction::new(
            5,
            uuid::Uuid::nil(),
            AccountId::new(1).unwrap(),
            TxKind::CashOut,
            m("10"),
            noon(),
        );
        (paid.status, paid.end_to_end_id) = (TxStatus::Confirmed, "E99999999202611231200A0000000005".into());
        let back = OnUsCredit {
            end_to_end_id: "D99999999202611231300A0000000042".into(),
            returns: Some(paid.end_to_end_id.clone()),
            ..credit("4", None)
        };
        let plan =
            receive_return(&f.account(), back.clone(), Some(paid.clone()), noon(), &mut ids(&[8])).unwrap();
        let tx = &plan.reply;
        assert_eq!((tx.kind, tx.status, tx.value), (TxKind::RefundOut, TxStatus::Confirmed, m("4")));
        assert_eq!(tx.end_to_end_id, back.end_to_end_id, "the return's id, as the refunder made it");
        assert_eq!(tx.refund.as_ref().map(|r| r.original_local_id), Some(5));
        assert!(plan.records.contains(&Record::OnUsCredited(back.end_to_end_id.clone())));
        assert!(
            plan.records
                .iter()
                .any(|r| matches!(r, Record::Transaction(t) if t.local_id == 5 && t.refunded == m("4"))),
            "the payment counts what came back: {:?}",
            plan.records
        );
        f.apply(&plan);
        assert_eq!(f.ledger.balance().available, m("4"));
        // Its payment not found (never the case: ids are unique), the credit stays owed.
        assert!(receive_return(&f.account(), back.clone(), None, noon(), &mut ids(&[9])).is_err());
        // More than was paid is never taken.
        paid.refunded = m("8");
        assert!(receive_return(&f.account(), back, Some(paid), noon(), &mut ids(&[9])).is_err());
    }

    #[test]
    fn a_credit_pays_the_charge_its_code_names_with_the_payers_end_to_end_id() {
        let mut f = Fixture::with_balance("0");
        let open = charge(&mut f, "10");
        let reference = open.charge.as_ref().map(|c| code_reference(&c.txid, 7));
        assert!(names_charge(reference.as_deref().unwrap(), &open));
        let plan =
            receive(&f.account(), credit("10", reference), Some(open), None, &[], noon(), &mut ids(&[8]))
                .unwrap();
        assert_eq!((plan.reply.kind, plan.reply.status), (TxKind::CashIn, TxStatus::Confirmed));
        assert_eq!(plan.reply.end_to_end_id, "E99999999202611231200A0000000042");
        assert_eq!(plan.reply.counterpart.name, "Bia");
        assert_eq!(
            plan.records.last(),
            Some(&Record::OnUsCredited("E99999999202611231200A0000000042".into()))
        );
        f.apply(&plan);
        assert_eq!(f.ledger.balance().available, m("10"));
    }

    #[test]
    fn a_credit_that_no_open_charge_takes_is_a_received_pix_never_a_refusal() {
        for (value, at) in [("9.99", noon()), ("10", noon() + chrono::Duration::seconds(600))] {
            let mut f = Fixture::with_balance("0");
            let open = charge(&mut f, "10");
            let reference = open.charge.as_ref().map(|c| code_reference(&c.txid, 7));
            let plan =
                receive(&f.account(), credit(value, reference), Some(open), None, &[], at, &mut ids(&[8]))
                    .unwrap();
            assert_eq!(
                (plan.reply.kind, plan.reply.status),
                (TxKind::PixIn, TxStatus::Confirmed),
                "{value} at {at}"
            );
            assert_eq!(plan.reply.value, m(value));
            assert!(plan.records.contains(&Record::OnUsCredited("E99999999202611231200A0000000042".into())));
        }
        // A key payment (no code) is a received PIX too.
        let f = Fixture::with_balance("0");
        let plan = receive(&f.account(), credit("3", None), None, None, &[], noon(), &mut ids(&[8])).unwrap();
        assert_eq!(plan.reply.kind, TxKind::PixIn);
        assert_eq!(plan.reply.counterpart.document.as_deref(), Some("52998224725"));
    }

    #[test]
    fn a_credit_pays_a_cobv_at_the_price_of_the_day_the_payer_paid() {
        let mut f = Fixture::with_balance("0");
        let cobv = cobv(&mut f);
        let reference = cobv.charge.as_ref().map(|c| code_reference(&c.txid, 7));
        // Paid at 23:59:59 on the due date (Sao Paulo), credited after midnight: 100.00, not
        // the 102.00 with the fine of the day after.
        let paid_at = crate::domain::decide::testing::at("2026-11-25T02:59:59Z");
        let arrives = crate::domain::decide::testing::at("2026-11-25T03:00:02Z");
        let late = |value: &str| OnUsCredit { paid_at: Some(paid_at), ..credit(value, reference.clone()) };
        let plan =
            receive(&f.account(), late("100.00"), Some(cobv.clone()), None, &[], arrives, &mut ids(&[8]))
                .unwrap();
        assert_eq!((plan.reply.kind, plan.reply.value), (TxKind::CashIn, m("100.00")), "the cobv is paid");
        let plan =
            receive(&f.account(), late("102.00"), Some(cobv), None, &[], arrives, &mut ids(&[8])).unwrap();
        assert_eq!((plan.reply.kind, plan.reply.value), (TxKind::PixIn, m("102.00")), "another amount");
    }

    /// Paid a second before its last day ends, credited after the cobv closed at midnight:
    /// it pays the cobv (it became a loose received PIX before). Paid at midnight, it does
    /// not.
    #[test]
    fn a_credit_paid_in_time_pays_a_charge_its_deadline_closed_meanwhile() {
        let mut f = Fixture::with_balance("0");
        let cobv = cobv(&mut f);
        let closes = cobv.charge.as_ref().unwrap().expires_at;
        let closed = super::super::charges::expire_charge(cobv, closes).reply;
        assert_eq!((closed.status, closed.error_code), (TxStatus::Error, Some(ErrorCode::Expired)));
        let reference = closed.charge.as_ref().map(|c| code_reference(&c.txid, 7));
        // Its last day is ten days after the due date: late, with the fine of 2.00.
        let paid = |at| OnUsCredit { paid_at: Some(at), ..credit("102.00", reference.clone()) };
        let arrives = closes + chrono::Duration::seconds(2);
        let in_time = closes - chrono::Duration::seconds(1);
        let plan =
            receive(&f.account(), paid(in_time), Some(closed.clone()), None, &[], arrives, &mut ids(&[8]))
                .unwrap();
        assert_eq!((plan.reply.kind, plan.reply.status), (TxKind::CashIn, TxStatus::Confirmed));
        assert_eq!((plan.reply.local_id, plan.reply.error_code), (closed.local_id, None));
        let plan =
            receive(&f.account(), paid(closes), Some(closed.clone()), None, &[], arrives, &mut ids(&[8]))
                .unwrap();
        assert_eq!(plan.reply.kind, TxKind::PixIn, "paid at the deadline: too late");
        // A charge closed otherwise (cancelled by its receiver) is not reopened.
        let cancelled = Transaction { error_code: Some(ErrorCode::OrderRejected), ..closed };
        let plan = receive(&f.account(), paid(in_time), Some(cancelled), None, &[], arrives, &mut ids(&[8]))
            .unwrap();
        assert_eq!(plan.reply.kind, TxKind::PixIn);
    }

    #[test]
    fn a_reference_names_only_its_own_charge() {
        let mut f = Fixture::with_balance("0");
        let open = charge(&mut f, "10");
        let txid = open.charge.as_ref().unwrap().txid.clone();
        assert!(names_charge(&txid, &open), "a family A charge by its txid");
        assert!(!names_charge("COB00000000000000000007", &open), "not a cob");
        assert!(!names_charge("something else", &open));
    }
}
