//! Money in from another institution, in the SPI's two steps.
//!
//! 1. **Accept** ([`accept`]): a payment (pacs.008) or a return of one of our payments
//!    (pacs.004) arrives. The account checks it: the payee's document, the charge its
//!    reference names (still payable at the instant the payer's institution accepted the
//!    payment, and asking this amount), or the payment it returns (ours, settled, with room
//!    for this much). Accepting writes an [`Incoming`] record and moves no money: the
//!    institution answers ACSP only once that record is durable, and a repeat of the same
//!    message finds the record and is answered the same.
//! 2. **Settle** ([`settle`]): the SPI reports it settled (ACCC). The money is ours now, so
//!    this never refuses: a payment pays the charge it named if that charge is still due
//!    (it was held for it by nothing but the instant it was accepted at, which prices it),
//!    else it is a received PIX; a return credits a Refund out. The record is deleted in the
//!    same batch, so the credit happens once however often the SPI says so.
//!    **Drop** ([`drop_incoming`]): the SPI rejected it (the payer's account, a timeout):
//!    the record goes and nothing moved.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::charges::amount_due;
use super::on_us::{credit, open_if_paid_in_time, OnUsCredit};
use super::refunds::take_back;
use super::{Account, Ids, Plan, Record, Refusal};
use crate::domain::ids::AccountId;
use crate::domain::money::Money;
use crate::domain::refunds::check_return;
use crate::domain::transaction::{BankInfo, Transaction, TxStatus};

/// What a payment or return in is, as accepted and kept until the SPI settles it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Incoming {
    /// The payment's end-to-end id, or the return's id: what the SPI's answers name.
    pub id: String,
    pub payee: AccountId,
    pub value: Money,
    pub payer_name: String,
    pub payer_document: String,
    /// The payer's institution.
    pub payer_ispb: String,
    /// When the payer's institution accepted it: what a charge is priced at.
    pub paid_at: DateTime<Utc>,
    pub kind: IncomingKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum IncomingKind {
    /// A payment to the account; `reference` is the receiver's id of what it pays (the
    /// `TxId`: a charge's reference), when it names one.
    Payment { reference: Option<String> },
    /// A return of the account's payment `original_end_to_end_id` (local id
    /// `original_local_id`).
    Return { original_end_to_end_id: String, original_local_id: u64 },
}

/// Why an account refuses a payment or return in, in precedence order (the rail maps each
/// to the catalogue's reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IncomingRefusal {
    /// The payee's CPF or CNPJ in the message is not the account holder's.
    #[error("the payee's document is not the account's")]
    DocumentMismatch,
    /// The reference names a charge this account does not have.
    #[error("no charge of the account has this reference")]
    UnknownCharge,
    /// The charge was paid already.
    #[error("the charge was paid")]
    ChargePaid,
    /// The charge is no longer payable (cancelled, expired, removed).
    #[error("the charge is not payable")]
    ChargeClosed,
    /// The charge asks another amount at the payer's instant.
    #[error("the amount is not the charge's")]
    WrongAmount,
    /// A return of a payment the account did not make, or that did not settle.
    #[error("the payment returned is not the account's settled payment")]
    OriginalNotFound,
    /// A return beyond what is left of the payment.
    #[error("the return is larger than what is left of the payment")]
    ReturnTooLarge,
}

/// What [`accept`] reads: the account holder's document, and the charge or payment the
/// incoming names, as the actor found them (`None`: there is none).
#[derive(Debug, Clone, Default)]
pub struct Named {
    pub holder_document: String,
    pub creditor_document: String,
    pub charge: Option<Transaction>,
    pub original: Option<Transaction>,
}

/// Step 1: accept an incoming payment or return (a plan that writes its record), or refuse.
pub fn accept(incoming: Incoming, named: Named) -> Result<Plan<()>, IncomingRefusal> {
    // A payment names its payee; a return goes back along a payment and names none.
    let is_payment = matches!(incoming.kind, IncomingKind::Payment { .. });
    if is_payment && named.creditor_document != named.holder_document {
        return Err(IncomingRefusal::DocumentMismatch);
    }
    match &incoming.kind {
        IncomingKind::Payment { reference: Some(_) } => {
            let charge = named.charge.ok_or(IncomingRefusal::UnknownCharge)?;
            if charge.status == TxStatus::Confirmed {
                return Err(IncomingRefusal::ChargePaid);
            }
            let due = amount_due(&open_if_paid_in_time(charge, incoming.paid_at), incoming.paid_at)
                .ok_or(IncomingRefusal::ChargeClosed)?;
            if due != incoming.value {
                return Err(IncomingRefusal::WrongAmount);
            }
        }
        IncomingKind::Payment { reference: None } => {}
        IncomingKind::Return { .. } => {
            let original = named.original.ok_or(IncomingRefusal::OriginalNotFound)?;
            check_return(&original, incoming.value).map_err(|e| match e {
                crate::domain::refunds::RefundRejection::ExceedsRefundable { .. } => {
                    IncomingRefusal::ReturnTooLarge
                }
                _ => IncomingRefusal::OriginalNotFound,
            })?;
        }
    }
    let mut plan = Plan::new(());
    plan.update(Record::Incoming(incoming));
    Ok(plan)
}

/// Step 2: the SPI settled what was accepted: the credit, and the record deleted. Ids: one,
/// plus one per split of a charge paid.
#[allow(clippy::too_many_arguments)]
pub fn settle(
    account: &Account,
    incoming: Incoming,
    charge: Option<Transaction>,
    original: Option<Transaction>,
    payer_bank: Option<BankInfo>,
    split_banks: &[Option<BankInfo>],
    now: DateTime<Utc>,
    ids: &mut Ids,
) -> Result<Plan<Transaction>, Refusal> {
    let id = incoming.id.clone();
    let mut plan = match incoming.kind {
        IncomingKind::Payment { reference } => {
            let owed = OnUsCredit {
                payee: incoming.payee,
                end_to_end_id: incoming.id,
                value: incoming.value,
                payer_name: incoming.payer_name,
                payer_document: incoming.payer_document,
                reference,
                paid_at: Some(incoming.paid_at),
                returns: None,
            };
            credit(account, owed, charge, payer_bank, split_banks, now, ids)?
        }
        IncomingKind::Return { .. } => {
            take_back(account, original, incoming.value, Some(id.clone()), now, ids)?
        }
    };
    plan.update(Record::IncomingDone(id));
    Ok(plan)
}

/// Step 2': the SPI rejected what was accepted: nothing moved, the record goes.
pub fn drop_incoming(id: String) -> Plan<()> {
    let mut plan = Plan::new(());
    plan.update(Record::IncomingDone(id));
    plan
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::domain::ledger::Balance;
    use crate::domain::transaction::{ErrorCode, TxKind};

    fn incoming(value: &str, kind: IncomingKind) -> Incoming {
        Incoming {
            id: "E0000000A202603101500abcdefghijk".into(),
            payee: AccountId::new(1).unwrap(),
            value: m(value),
            payer_name: "Ana".into(),
            payer_document: "52998224725".into(),
            payer_ispb: "0000000A".into(),
            paid_at: noon(),
            kind,
        }
    }

    fn named() -> Named {
        Named {
            holder_document: "11222333000181".into(),
            creditor_document: "11222333000181".into(),
            ..Named::default()
        }
    }

    fn open_charge(value: &str) -> Transaction {
        let f = Fixture::with_balance("0");
        let plan = super::super::create_charge(
            &f.account(),
            charge_request(value),
            false,
            Default::default(),
            noon(),
            &mut ids(&[20]),
        )
        .unwrap();
        plan.reply
    }

    #[test]
    fn a_plain_payment_is_accepted_moving_nothing_then_credited_once_when_settled() {
        let mut f = Fixture::with_balance("0");
        let inc = incoming("10", IncomingKind::Payment { reference: None });
        let plan = accept(inc.clone(), named()).unwrap();
        assert_eq!(plan.ledger, None, "accepting moves no money");
        assert_eq!(plan.records, vec![Record::Incoming(inc.clone())]);
        let settled =
            settle(&f.account(), inc.clone(), None, None, None, &[], noon(), &mut ids(&[30])).unwrap();
        f.apply(&settled);
        assert_eq!(settled.reply.kind, TxKind::PixIn);
        assert_eq!(settled.reply.end_to_end_id, inc.id);
        assert_eq!(settled.records.last(), Some(&Record::IncomingDone(inc.id.clone())));
        assert_eq!(f.ledger.balance(), Balance { available: m("10"), blocked: m("0") });
        assert_eq!(drop_incoming(inc.id.clone()).records, vec![Record::IncomingDone(inc.id)]);
    }

    #[test]
    fn a_payment_of_a_charge_is_checked_against_the_charge_when_accepted() {
        let charge = open_charge("25.00");
        let reference = Some(charge.charge.as_ref().unwrap().txid.clone());
        let pays = |value: &str, charge: Option<Transaction>| {
            accept(
                incoming(value, IncomingKind::Payment { reference: reference.clone() }),
                Named { charge, ..named() },
            )
        };
        assert!(pays("25.00", Some(charge.clone())).is_ok());
        assert_eq!(pays("25.01", Some(charge.clone())).unwrap_err(), IncomingRefusal::WrongAmount);
        assert_eq!(pays("25.00", None).unwrap_err(), IncomingRefusal::UnknownCharge);
        let paid = Transaction { status: TxStatus::Confirmed, ..charge.clone() };
        assert_eq!(pays("25.00", Some(paid)).unwrap_err(), IncomingRefusal::ChargePaid);
        let cancelled =
            Transaction { status: TxStatus::Error, error_code: Some(ErrorCode::Cancelled), ..charge.clone() };
        assert_eq!(pays("25.00", Some(cancelled)).unwrap_err(), IncomingRefusal::ChargeClosed);
        // Expired by its deadline after the payer's instant: still this payment's to pay.
        let expired = Transaction { status: TxStatus::Error, error_code: Some(ErrorCode::Expired), ..charge };
        assert!(pays("25.00", Some(expired)).is_ok());
        let wrong_payee = Named { creditor_document: "52998224725".into(), ..named() };
        assert_eq!(
            accept(incoming("1", IncomingKind::Payment { reference: None }), wrong_payee).unwrap_err(),
            IncomingRefusal::DocumentMismatch
        );
    }

    #[test]
    fn a_return_is_accepted_only_for_a_settled_payment_of_ours_within_what_is_left() {
        let mut ours = received("40");
        ours.kind = TxKind::CashOut;
        let kind = IncomingKind::Return {
            original_end_to_end_id: ours.end_to_end_id.clone(),
            original_local_id: ours.local_id,
        };
        let ret = |value: &str, original: Option<Transaction>| {
            accept(incoming(value, kind.clone()), Named { original, ..named() })
        };
        assert!(ret("40", Some(ours.clone())).is_ok());
        assert_eq!(ret("40.01", Some(ours.clone())).unwrap_err(), IncomingRefusal::ReturnTooLarge);
        assert_eq!(ret("1", None).unwrap_err(), IncomingRefusal::OriginalNotFound);
        let pending = Transaction { status: TxStatus::Pending, ..ours.clone() };
        assert_eq!(ret("1", Some(pending)).unwrap_err(), IncomingRefusal::OriginalNotFound);
        // Settled: a Refund out with the return's id, and the original's returned sum grows.
        let mut f = Fixture::with_balance("0");
        let inc = Incoming { id: "D0000000A202603101500abcdefghijk".into(), ..incoming("15", kind) };
        let plan =
            settle(&f.account(), inc.clone(), None, Some(ours), None, &[], noon(), &mut ids(&[31])).unwrap();
        f.apply(&plan);
        assert_eq!(plan.reply.kind, TxKind::RefundOut);
        assert_eq!(plan.reply.end_to_end_id, inc.id);
        assert_eq!(f.ledger.balance().available, m("15"));
        let updated = transactions(&plan).into_iter().find(|t| t.kind == TxKind::CashOut).unwrap();
        assert_eq!(updated.refunded, m("15"));
    }
}
