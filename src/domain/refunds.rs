//! Refunds of received PIX (interface.md "Life cycles", decisions.md "Refunds"): which transactions can be refunded, until
//! when, and how much.
//!
//! A refund is accepted only for a received PIX (a Pix in, or a paid charge) of the same
//! account, while `now < receipt + 89 × 24 h` on the server clock, and only if every refund
//! of that PIX so far (pending ones included) plus this one stays within its amount.

use chrono::{DateTime, Duration, Utc};

use super::money::Money;
use super::transaction::{Transaction, TxKind, TxStatus};

/// Days after receipt during which a PIX can be refunded.
pub const REFUND_DEADLINE_DAYS: i64 = 89;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundRejection {
    /// Not a received PIX (or not received yet): nothing to refund.
    NotReceived,
    /// A return names no settled payment of the account (a cash-out that was confirmed).
    NotSettledPayment,
    DeadlineExceeded,
    /// The amount left to refund is below the request.
    ExceedsRefundable {
        refundable: Money,
    },
}

/// The last instant a PIX received at `receipt` can be refunded is just before this.
pub fn refund_deadline(receipt: DateTime<Utc>) -> DateTime<Utc> {
    receipt + Duration::days(REFUND_DEADLINE_DAYS)
}

/// Checks a refund of `value` of `original` at `now`.
pub fn check_refund(original: &Transaction, value: Money, now: DateTime<Utc>) -> Result<(), RefundRejection> {
    let received =
        matches!(original.kind, TxKind::PixIn | TxKind::CashIn) && original.status == TxStatus::Confirmed;
    let Some(receipt) = original.processed_at.filter(|_| received) else {
        return Err(RefundRejection::NotReceived);
    };
    if now >= refund_deadline(receipt) {
        return Err(RefundRejection::DeadlineExceeded);
    }
    let refundable = original.value.checked_sub(original.refunded).unwrap_or(Money::ZERO);
    if value > refundable {
        return Err(RefundRejection::ExceedsRefundable { refundable });
    }
    Ok(())
}

/// Checks that the counterparty of a settled payment can return `value` of it.
pub fn check_return(original: &Transaction, value: Money) -> Result<(), RefundRejection> {
    let paid = matches!(original.kind, TxKind::CashOut | TxKind::QrCashOut | TxKind::DictPix)
        && original.status == TxStatus::Confirmed;
    if !paid {
        return Err(RefundRejection::NotSettledPayment);
    }
    let returnable = original.value.checked_sub(original.refunded).unwrap_or(Money::ZERO);
    if value > returnable {
        return Err(RefundRejection::ExceedsRefundable { refundable: returnable });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::AccountId;
    use uuid::Uuid;

    fn received(value: &str, at: DateTime<Utc>) -> Transaction {
        Transaction {
            status: TxStatus::Confirmed,
            end_to_end_id: "E".into(),
            processed_at: Some(at),
            ..Transaction::new(
                1,
                Uuid::nil(),
                AccountId::new(1).unwrap(),
                TxKind::PixIn,
                Money::parse(value).unwrap(),
                at,
            )
        }
    }

    #[test]
    fn the_89_day_deadline_is_exclusive() {
        let at = DateTime::parse_from_rfc3339("2026-01-01T12:00:00Z").unwrap().with_timezone(&Utc);
        let t = received("10", at);
        let m = Money::parse("1").unwrap();
        let last = refund_deadline(at) - Duration::milliseconds(1);
        assert_eq!(check_refund(&t, m, last), Ok(()));
        assert_eq!(check_refund(&t, m, refund_deadline(at)), Err(RefundRejection::DeadlineExceeded));
    }

    #[test]
    fn refunds_stay_within_the_amount() {
        let at = Utc::now();
        let mut t = received("10", at);
        t.refunded = Money::parse("7.50").unwrap();
        assert_eq!(check_refund(&t, Money::parse("2.50").unwrap(), at), Ok(()));
        assert_eq!(
            check_refund(&t, Money::parse("2.51").unwrap(), at),
            Err(RefundRejection::ExceedsRefundable { refundable: Money::parse("2.50").unwrap() })
        );
    }

    #[test]
    fn only_received_pix_can_be_refunded() {
        let mut t = received("10", Utc::now());
        t.kind = TxKind::CashOut;
        assert_eq!(
            check_refund(&t, Money::parse("1").unwrap(), Utc::now()),
            Err(RefundRejection::NotReceived)
        );
        let mut charge = received("10", Utc::now());
        charge.kind = TxKind::CashIn;
        charge.status = TxStatus::Pending;
        charge.processed_at = None;
        assert_eq!(
            check_refund(&charge, Money::parse("1").unwrap(), Utc::now()),
            Err(RefundRejection::NotReceived)
        );
    }

    #[test]
    fn only_a_settled_payment_can_be_returned() {
        let mut t = received("10", Utc::now());
        assert_eq!(
            check_return(&t, Money::parse("1").unwrap()),
            Err(RefundRejection::NotSettledPayment),
            "a received PIX is not a payment of the account"
        );
        t.kind = TxKind::CashOut;
        assert_eq!(check_return(&t, Money::parse("10").unwrap()), Ok(()));
        t.status = TxStatus::Pending;
        assert_eq!(check_return(&t, Money::parse("1").unwrap()), Err(RefundRejection::NotSettledPayment));
    }
}
