//! The transactions list as the domain sees it (interface.md "GET /api/transactions",
//! "Time"): its filters and their display values, the date range on the
//! America/Sao_Paulo calendar, paging, and the two-byte summary the storage index keeps
//! of each transaction so a page is read without loading the ones a filter skips.
//!
//! Rules: dates are whole local days; `endDate` defaults to today and `startDate` to 31
//! days before `endDate`; `startDate <= endDate`; the interval (`endDate - startDate`) is at
//! most [`RANGE_DAYS_MAX`] days; `size` is 1 to [`PAGE_SIZE_MAX`], default 20; `page` starts
//! at 1.

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::America::Sao_Paulo;

use super::transaction::{TxKind, TxStatus};

/// Days between `startDate` and `endDate` at most.
pub const RANGE_DAYS_MAX: i64 = 31;
pub const PAGE_SIZE_MAX: u32 = 100;
pub const PAGE_SIZE_DEFAULT: u32 = 20;

/// The `type` filter: the operation as the list shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Payment,
    Withdraw,
    RefundIn,
    RefundOut,
    /// Beyond the interface: the operator's money in and out.
    OperatorCredit,
    OperatorDebit,
}

impl Operation {
    pub const ALL: [Operation; 6] = [
        Operation::Payment,
        Operation::Withdraw,
        Operation::RefundIn,
        Operation::RefundOut,
        Operation::OperatorCredit,
        Operation::OperatorDebit,
    ];

    pub fn of(kind: TxKind) -> Operation {
        match kind {
            TxKind::PixIn | TxKind::CashIn => Operation::Payment,
            TxKind::CashOut | TxKind::QrCashOut | TxKind::DictPix => Operation::Withdraw,
            TxKind::RefundIn => Operation::RefundIn,
            TxKind::RefundOut => Operation::RefundOut,
            TxKind::OperatorCredit => Operation::OperatorCredit,
            TxKind::OperatorDebit => Operation::OperatorDebit,
        }
    }

    pub fn parse(text: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|o| o.filter_value() == text)
    }

    pub fn filter_value(self) -> &'static str {
        match self {
            Operation::Payment => "PAYMENT",
            Operation::Withdraw => "WITHDRAW",
            Operation::RefundIn => "REFUND_IN",
            Operation::RefundOut => "REFUND_OUT",
            Operation::OperatorCredit => "OPERATOR_CREDIT",
            Operation::OperatorDebit => "OPERATOR_DEBIT",
        }
    }

    pub fn display(self) -> &'static str {
        match self {
            Operation::Payment => "Pix in",
            Operation::Withdraw => "Pix out",
            Operation::RefundIn => "Refund in",
            Operation::RefundOut => "Refund out",
            Operation::OperatorCredit => "Operator credit",
            Operation::OperatorDebit => "Operator debit",
        }
    }

    /// `CREDIT` for Pix in and Refund out, `DEBIT` for Pix out and Refund in.
    pub fn movement(self) -> &'static str {
        match self {
            Operation::Payment | Operation::RefundOut | Operation::OperatorCredit => "CREDIT",
            Operation::Withdraw | Operation::RefundIn | Operation::OperatorDebit => "DEBIT",
        }
    }

    fn code(self) -> u8 {
        match self {
            Operation::Payment => b'P',
            Operation::Withdraw => b'W',
            Operation::RefundIn => b'I',
            Operation::RefundOut => b'O',
            Operation::OperatorCredit => b'C',
            Operation::OperatorDebit => b'D',
        }
    }
}

pub const STATUSES: [TxStatus; 3] = [TxStatus::Pending, TxStatus::Confirmed, TxStatus::Error];

pub fn parse_status(text: &str) -> Option<TxStatus> {
    STATUSES.into_iter().find(|s| s.as_str() == text)
}

/// `Pendente`, `Confirmado`, `Error`.
pub fn status_display(s: TxStatus) -> &'static str {
    match s {
        TxStatus::Pending => "Pendente",
        TxStatus::Confirmed => "Confirmado",
        TxStatus::Error => "Error",
    }
}

fn status_code(s: TxStatus) -> u8 {
    match s {
        TxStatus::Pending => b'P',
        TxStatus::Confirmed => b'C',
        TxStatus::Error => b'E',
    }
}

/// What the index keeps of a transaction: its status and operation, two ASCII bytes.
pub fn summary(status: TxStatus, op: Operation) -> [u8; 2] {
    [status_code(status), op.code()]
}

/// Whether a summary passes the filters.
pub fn summary_matches(summary: &[u8], status: Option<TxStatus>, op: Option<Operation>) -> bool {
    summary.len() == 2
        && status.is_none_or(|s| summary[0] == status_code(s))
        && op.is_none_or(|o| summary[1] == o.code())
}

/// Why a date range is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("startDate must not be after endDate")]
    Reversed,
    #[error("the interval between startDate and endDate must not exceed 31 days")]
    TooLong,
}

/// The local days `[start, end]` the list covers, from the optional dates and the server's
/// `now`.
pub fn date_range(
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
    now: DateTime<Utc>,
) -> Result<(NaiveDate, NaiveDate), RangeError> {
    let end = end.unwrap_or_else(|| now.with_timezone(&Sao_Paulo).date_naive());
    let start = start.unwrap_or(end - Duration::days(RANGE_DAYS_MAX));
    if start > end {
        return Err(RangeError::Reversed);
    }
    if end - start > Duration::days(RANGE_DAYS_MAX) {
        return Err(RangeError::TooLong);
    }
    Ok((start, end))
}

/// The instant a local day starts in Sao Paulo.
pub fn day_start(day: NaiveDate) -> DateTime<Utc> {
    let midnight = day.and_hms_opt(0, 0, 0).unwrap_or_default();
    // Brazil has had no daylight saving since 2019; `earliest` also covers a midnight that
    // a past transition skipped or repeated.
    Sao_Paulo
        .from_local_datetime(&midnight)
        .earliest()
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|| Utc.from_utc_datetime(&midnight))
}

/// The local day of an instant.
pub fn local_day(t: DateTime<Utc>) -> NaiveDate {
    t.with_timezone(&Sao_Paulo).date_naive()
}

/// The paging metadata of interface.md "GET /api/transactions".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageInfo {
    pub page: u32,
    pub size: u32,
    pub total: u64,
    pub total_pages: u64,
    pub has_next: bool,
    pub has_previous: bool,
}

impl PageInfo {
    pub fn new(page: u32, size: u32, total: u64) -> PageInfo {
        let total_pages = total.div_ceil(u64::from(size.max(1)));
        PageInfo {
            page,
            size,
            total,
            total_pages,
            has_next: u64::from(page) < total_pages,
            has_previous: page > 1,
        }
    }

    /// Entries before this page.
    pub fn offset(&self) -> u64 {
        u64::from(self.page.saturating_sub(1)) * u64::from(self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn filters_and_display_values() {
        assert_eq!(Operation::parse("WITHDRAW"), Some(Operation::Withdraw));
        assert_eq!(Operation::parse("withdraw"), None);
        for o in Operation::ALL {
            assert_eq!(Operation::parse(o.filter_value()), Some(o));
        }
        assert_eq!(Operation::of(TxKind::DictPix).display(), "Pix out");
        assert_eq!(Operation::of(TxKind::CashIn).display(), "Pix in");
        assert_eq!(Operation::of(TxKind::RefundIn).movement(), "DEBIT");
        assert_eq!(Operation::of(TxKind::RefundOut).movement(), "CREDIT");
        assert_eq!(Operation::of(TxKind::PixIn).movement(), "CREDIT");
        assert_eq!(Operation::of(TxKind::QrCashOut).movement(), "DEBIT");
        assert_eq!(parse_status("ERROR"), Some(TxStatus::Error));
        assert_eq!(parse_status("Error"), None);
        assert_eq!(STATUSES.map(status_display), ["Pendente", "Confirmado", "Error"]);
    }

    #[test]
    fn summaries_filter_exactly() {
        let s = summary(TxStatus::Confirmed, Operation::Withdraw);
        assert!(summary_matches(&s, None, None));
        assert!(summary_matches(&s, Some(TxStatus::Confirmed), Some(Operation::Withdraw)));
        assert!(!summary_matches(&s, Some(TxStatus::Pending), None));
        assert!(!summary_matches(&s, None, Some(Operation::Payment)));
        assert!(!summary_matches(b"", None, None));
    }

    #[test]
    fn the_range_is_at_most_31_days_and_defaults_to_the_last_31() {
        let now = Utc.with_ymd_and_hms(2026, 11, 22, 2, 0, 0).unwrap(); // 23:00 on the 21st in Sao Paulo
        assert_eq!(date_range(None, None, now), Ok((d("2026-10-21"), d("2026-11-21"))));
        assert_eq!(
            date_range(Some(d("2026-10-01")), Some(d("2026-11-01")), now),
            Ok((d("2026-10-01"), d("2026-11-01")))
        );
        assert_eq!(date_range(Some(d("2026-10-01")), Some(d("2026-11-02")), now), Err(RangeError::TooLong));
        assert_eq!(date_range(Some(d("2026-11-02")), Some(d("2026-11-01")), now), Err(RangeError::Reversed));
        assert_eq!(date_range(None, Some(d("2026-01-31")), now), Ok((d("2025-12-31"), d("2026-01-31"))));
        assert_eq!(date_range(Some(d("2026-11-21")), None, now), Ok((d("2026-11-21"), d("2026-11-21"))));
        assert_eq!(date_range(Some(d("2026-10-20")), None, now), Err(RangeError::TooLong));
    }

    #[test]
    fn local_days_start_at_sao_paulo_midnight() {
        assert_eq!(day_start(d("2026-11-22")), Utc.with_ymd_and_hms(2026, 11, 22, 3, 0, 0).unwrap());
        assert_eq!(local_day(Utc.with_ymd_and_hms(2026, 11, 22, 2, 59, 59).unwrap()), d("2026-11-21"));
        assert_eq!(local_day(Utc.with_ymd_and_hms(2026, 11, 22, 3, 0, 0).unwrap()), d("2026-11-22"));
    }

    #[test]
    fn page_metadata_at_the_edges() {
        let p = PageInfo::new(1, 20, 0);
        assert_eq!((p.total_pages, p.has_next, p.has_previous), (0, false, false));
        let p = PageInfo::new(2, 20, 40);
        assert_eq!((p.total_pages, p.has_next, p.has_previous, p.offset()), (2, false, true, 20));
        let p = PageInfo::new(1, 20, 41);
        assert_eq!((p.total_pages, p.has_next), (3, true));
        let p = PageInfo::new(9, 20, 41);
        assert_eq!((p.has_next, p.has_previous), (false, true));
    }
}
