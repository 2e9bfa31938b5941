//! Reconciliation: what the participant's settlement account at the central bank should have
//! moved over a window, by the ledger, for an operator to hold against the SPI's statement of
//! that account.
//!
//! The settlement account moves when the SPI settles something between this participant and
//! another: a payment or a return sent (out) or received (in), each for its whole value (a
//! fee is the gateway's and never leaves it). Payments between two accounts of this gateway
//! (on us) and everything of sandbox accounts (the simulator's) never reach it; an operator's
//! credit or debit does not either (it is funding, which reaches the settlement account by
//! another way), so those are totalled apart. What the ledger counts is what it applied when
//! the SPI reported it settled, at that instant (`processed_at`).
//!
//! Open items are listed too: payouts still pending (sent or about to be, their amount
//! blocked) and payments accepted from other institutions that the SPI has not yet reported
//! settled. An item that stays open longer than the SPI's time limit is one to look into.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use super::decide::Incoming;
use super::money::Money;
use super::transaction::{Transaction, TxKind, TxStatus};

/// The longest window one report covers (the store is read whole for it).
pub const WINDOW_DAYS_MAX: i64 = 31;

/// A count and the sum of its amounts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sum {
    pub count: u64,
    pub amount: Decimal,
}

impl Sum {
    fn add(&mut self, value: Money) {
        self.count += 1;
        self.amount += value.as_decimal();
    }
}

/// Open items of one kind, and the oldest one's instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Open {
    pub sum: Sum,
    pub oldest: Option<DateTime<Utc>>,
}

impl Open {
    fn add(&mut self, value: Money, at: DateTime<Utc>) {
        self.sum.add(value);
        self.oldest = Some(self.oldest.map_or(at, |o| o.min(at)));
    }
}

/// How a settled transaction moved the settlement account, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Movement {
    /// A payment of ours to another institution.
    Sent,
    /// A return (devolução) of ours of a payment received from another institution.
    ReturnSent,
    /// A payment from another institution (a received PIX, a charge paid).
    Received,
    /// Another institution returned (part of) a payment of ours.
    ReturnReceived,
}

/// The report over `[from, to)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub sent: Sum,
    pub returns_sent: Sum,
    pub received: Sum,
    pub returns_received: Sum,
    pub operator_credits: Sum,
    pub operator_debits: Sum,
    /// What the settlement account should have gained over the window (negative: lost).
    pub net: Decimal,
    pub payouts_pending: Open,
    pub arrivals_accepted: Open,
}

/// The movement of a transaction of a live account, once final, where `ours` is this
/// participant's ISPB: `None` for anything that is not a settled exchange with another
/// institution.
pub fn movement(tx: &Transaction, ours: &str) -> Option<Movement> {
    if tx.status != TxStatus::Confirmed {
        return None;
    }
    let other = tx.counterpart.bank.as_ref().is_some_and(|b| !b.ispb.is_empty() && b.ispb != ours);
    if !other {
        return None;
    }
    match tx.kind {
        TxKind::CashOut | TxKind::QrCashOut | TxKind::DictPix => Some(Movement::Sent),
        TxKind::RefundIn => Some(Movement::ReturnSent),
        TxKind::PixIn | TxKind::CashIn => Some(Movement::Received),
        TxKind::RefundOut => Some(Movement::ReturnReceived),
        TxKind::OperatorCredit | TxKind::OperatorDebit => None,
    }
}

/// Whether a transaction is a payout to another institution still waiting for the SPI.
/// Whether `tx` is a payout that left for the SPI (not on us) and has no final status more
/// than `within` after it was debited, at `now`: past the SPI's own limit, its answer was
/// lost, and an operator must close it with the settlement's evidence.
pub fn aged_payout(tx: &Transaction, ours: &str, now: DateTime<Utc>, within: std::time::Duration) -> bool {
    pending_payout(tx, ours) && (now - tx.created_at).to_std().is_ok_and(|waited| waited > within)
}

pub fn pending_payout(tx: &Transaction, ours: &str) -> bool {
    tx.status == TxStatus::Pending
        && matches!(tx.kind, TxKind::CashOut | TxKind::QrCashOut | TxKind::DictPix | TxKind::RefundIn)
        && tx.counterpart.bank.as_ref().is_none_or(|b| b.ispb != ours)
}

/// The report over `[from, to)` of live accounts' transactions `txs` and the arrivals
/// accepted and not yet settled, for participant `ours`.
pub fn report<'a>(
    txs: impl IntoIterator<Item = &'a Transaction>,
    accepted: &[Incoming],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    ours: &str,
) -> Report {
    let mut r = Report::default();
    let within = |at: Option<DateTime<Utc>>| at.is_some_and(|at| from <= at && at < to);
    for tx in txs {
        if pending_payout(tx, ours) {
            r.payouts_pending.add(tx.value, tx.created_at);
            continue;
        }
        if !within(tx.processed_at) {
            continue;
        }
        match (tx.kind, tx.status, movement(tx, ours)) {
            (_, _, Some(Movement::Sent)) => r.sent.add(tx.value),
            (_, _, Some(Movement::ReturnSent)) => r.returns_sent.add(tx.value),
            (_, _, Some(Movement::Received)) => r.received.add(tx.value),
            (_, _, Some(Movement::ReturnReceived)) => r.returns_received.add(tx.value),
            (TxKind::OperatorCredit, TxStatus::Confirmed, None) => r.operator_credits.add(tx.value),
            (TxKind::OperatorDebit, TxStatus::Confirmed, None) => r.operator_debits.add(tx.value),
            _ => {}
        }
    }
    for i in accepted {
        r.arrivals_accepted.add(i.value, i.paid_at);
    }
    r.net = r.received.amount + r.returns_received.amount - r.sent.amount - r.returns_sent.amount;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::decide::IncomingKind;
    use crate::domain::ids::AccountId;
    use crate::domain::transaction::{BankInfo, Counterpart};

    const OURS: &str = "1234ABCD";

    fn at(minute: u32) -> DateTime<Utc> {
        DateTime::from_timestamp(1_764_000_000 + i64::from(minute) * 60, 0).unwrap()
    }

    fn tx(
        kind: TxKind,
        status: TxStatus,
        value: &str,
        bank: Option<&str>,
        processed: Option<u32>,
    ) -> Transaction {
        let mut t = Transaction::new(
            1,
            uuid::Uuid::nil(),
            AccountId::new(1).unwrap(),
            kind,
            Money::parse(value).unwrap(),
            at(0),
        );
        t.status = status;
        t.counterpart = Counterpart {
            bank: bank.map(|ispb| BankInfo {
                ispb: ispb.into(),
                name: String::new(),
                code: String::new(),
                branch: None,
                account_number: None,
            }),
            ..Counterpart::default()
        };
        t.processed_at = processed.map(at);
        t
    }

    #[test]
    fn each_kind_moves_the_settlement_account_its_way_and_on_us_never() {
        use TxKind::*;
        let c = TxStatus::Confirmed;
        for (kind, expected) in [
            (CashOut, Some(Movement::Sent)),
            (QrCashOut, Some(Movement::Sent)),
            (DictPix, Some(Movement::Sent)),
            (RefundIn, Some(Movement::ReturnSent)),
            (PixIn, Some(Movement::Received)),
            (CashIn, Some(Movement::Received)),
            (RefundOut, Some(Movement::ReturnReceived)),
            (OperatorCredit, None),
            (OperatorDebit, None),
        ] {
            assert_eq!(movement(&tx(kind, c, "1.00", Some("99999A04"), Some(1)), OURS), expected, "{kind:?}");
            assert_eq!(movement(&tx(kind, c, "1.00", Some(OURS), Some(1)), OURS), None, "{kind:?} on us");
            assert_eq!(movement(&tx(kind, c, "1.00", None, Some(1)), OURS), None, "{kind:?} without a bank");
        }
        for status in [TxStatus::Pending, TxStatus::Error] {
            assert_eq!(movement(&tx(CashOut, status, "1.00", Some("99999A04"), Some(1)), OURS), None);
        }
    }

    #[test]
    fn the_window_counts_what_settled_in_it_and_the_net_is_in_minus_out() {
        use TxKind::*;
        let c = TxStatus::Confirmed;
        let other = Some("99999A04");
        let txs = [
            tx(CashOut, c, "10.00", other, Some(5)),
            tx(DictPix, c, "2.50", other, Some(6)),
            tx(RefundIn, c, "1.00", other, Some(7)),
            tx(PixIn, c, "100.00", other, Some(8)),
            tx(CashIn, c, "20.00", other, Some(9)),
            tx(RefundOut, c, "0.50", other, Some(9)),
            // Outside the window: at its start is in, at its end is out.
            tx(CashOut, c, "7.00", other, Some(4)),
            tx(PixIn, c, "7.00", other, Some(10)),
            // Never the settlement account's: on us, failed, the operator's.
            tx(CashOut, c, "3.00", Some(OURS), Some(6)),
            tx(CashOut, TxStatus::Error, "3.00", other, Some(6)),
            tx(OperatorCredit, c, "500.00", None, Some(6)),
            tx(OperatorDebit, c, "5.00", None, Some(6)),
        ];
        let r = report(&txs, &[], at(5), at(10), OURS);
        let sum = |count, amount: &str| Sum { count, amount: amount.parse().unwrap() };
        assert_eq!(r.sent, sum(2, "12.50"));
        assert_eq!(r.returns_sent, sum(1, "1.00"));
        assert_eq!(r.received, sum(2, "120.00"));
        assert_eq!(r.returns_received, sum(1, "0.50"));
        assert_eq!(r.operator_credits, sum(1, "500.00"));
        assert_eq!(r.operator_debits, sum(1, "5.00"));
        assert_eq!(r.net, "107.00".parse::<Decimal>().unwrap(), "120.50 in, 13.50 out");
        assert_eq!(r.payouts_pending, Open::default());
    }

    #[test]
    fn a_payout_ages_past_the_bound_after_its_debit_unless_final_or_on_us() {
        let within = std::time::Duration::from_secs(60);
        let mut p = tx(TxKind::CashOut, TxStatus::Pending, "4.00", Some("99999A04"), None);
        p.created_at = at(0);
        let now = p.created_at + chrono::Duration::seconds(60);
        assert!(!aged_payout(&p, OURS, now, within), "at the bound");
        assert!(aged_payout(&p, OURS, now + chrono::Duration::milliseconds(1), within));
        let later = now + chrono::Duration::hours(1);
        let mut done = p.clone();
        done.status = TxStatus::Confirmed;
        assert!(!aged_payout(&done, OURS, later, within), "final");
        let on_us = tx(TxKind::CashOut, TxStatus::Pending, "9.00", Some(OURS), None);
        assert!(!aged_payout(&on_us, OURS, later, within), "on us");
        let credit = tx(TxKind::PixIn, TxStatus::Pending, "9.00", Some("99999A04"), None);
        assert!(!aged_payout(&credit, OURS, later, within), "not a payout");
    }

    #[test]
    fn open_items_are_counted_whenever_they_started_with_the_oldest_named() {
        let other = Some("99999A04");
        let mut early = tx(TxKind::CashOut, TxStatus::Pending, "4.00", other, None);
        early.created_at = at(1);
        let mut late = tx(TxKind::RefundIn, TxStatus::Pending, "1.00", None, None);
        late.created_at = at(30);
        // Pending on us settles without the SPI: not open at the rail.
        let on_us = tx(TxKind::CashOut, TxStatus::Pending, "9.00", Some(OURS), None);
        let accepted = Incoming {
            id: "E1".into(),
            payee: AccountId::new(1).unwrap(),
            value: Money::parse("3.00").unwrap(),
            payer_name: "Ana".into(),
            payer_document: "52998224725".into(),
            payer_ispb: "99999A03".into(),
            paid_at: at(2),
            kind: IncomingKind::Payment { reference: None },
        };
        let r = report([&early, &late, &on_us], &[accepted], at(100), at(200), OURS);
        assert_eq!(r.payouts_pending.sum.count, 2);
        assert_eq!(r.payouts_pending.sum.amount, "5.00".parse::<Decimal>().unwrap());
        assert_eq!(r.payouts_pending.oldest, Some(at(1)));
        assert_eq!(r.arrivals_accepted.sum.count, 1);
        assert_eq!(r.arrivals_accepted.oldest, Some(at(2)));
        assert_eq!(r.net, Decimal::ZERO);
    }
}
