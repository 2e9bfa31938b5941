//! Debit limits on the Sao Paulo business calendar (interface.md "Balances, fees and limits").
//!
//! Per transaction: `value <= perTransaction`. Daily: the sum of debits accepted on the
//! current calendar day in America/Sao_Paulo, plus this one, `<= daily`. Night: between
//! 20:00 and 06:00 local time (the window `[20:00, 06:00)`), the sum of debits accepted in
//! the current window, plus this one, `<= nightly`. Debits that later fail still count.
//! Only the value counts, not the fee.

use chrono::{DateTime, Duration, NaiveDate, Timelike, Utc};
use chrono_tz::America::Sao_Paulo;
use serde::{Deserialize, Serialize};

use super::account::Limits;
use super::money::Money;

pub const NIGHT_START_HOUR: u32 = 20;
pub const NIGHT_END_HOUR: u32 = 6;

/// Sums of accepted debits: per calendar day, and per night window (named by the date on
/// which the window started).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitCounters {
    pub day: Option<(NaiveDate, Money)>,
    pub night: Option<(NaiveDate, Money)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitBreach {
    PerTransaction,
    Daily,
    Nightly,
}

/// The local calendar day and, if `now` is in a night window, the date it started on.
pub fn calendar(now: DateTime<Utc>) -> (NaiveDate, Option<NaiveDate>) {
    let local = now.with_timezone(&Sao_Paulo);
    let day = local.date_naive();
    let night = if local.hour() >= NIGHT_START_HOUR {
        Some(day)
    } else if local.hour() < NIGHT_END_HOUR {
        Some(day - Duration::days(1))
    } else {
        None
    };
    (day, night)
}

fn sum_for(counter: Option<(NaiveDate, Money)>, key: NaiveDate) -> Money {
    match counter {
        Some((d, m)) if d == key => m,
        _ => Money::ZERO,
    }
}

impl LimitCounters {
    /// Checks `value` against the limits at `now`; on success answers the counters that
    /// include it. A debit the payer did not make at that hour (`by_night: false`: a Pix
    /// Automático debit, made when the arrangement says) is neither checked against nor
    /// counted in the night's limit, only the transaction's and the day's.
    pub fn admit(
        &self,
        limits: &Limits,
        value: Money,
        now: DateTime<Utc>,
        by_night: bool,
    ) -> Result<LimitCounters, LimitBreach> {
        if value > limits.per_transaction {
            return Err(LimitBreach::PerTransaction);
        }
        let (day, night) = calendar(now);
        let day_total = sum_for(self.day, day).checked_add(value).ok_or(LimitBreach::Daily)?;
        if day_total > limits.daily {
            return Err(LimitBreach::Daily);
        }
        let night_counter = match night {
            None => self.night,
            Some(_) if !by_night => self.night,
            Some(start) => {
                let total = sum_for(self.night, start).checked_add(value).ok_or(LimitBreach::Nightly)?;
                if total > limits.nightly {
                    return Err(LimitBreach::Nightly);
                }
                Some((start, total))
            }
        };
        Ok(LimitCounters { day: Some((day, day_total)), night: night_counter })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn m(s: &str) -> Money {
        Money::parse(s).unwrap()
    }

    /// A UTC instant from a Sao Paulo wall-clock time (UTC-3 since 2019).
    fn sp(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Sao_Paulo.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap().with_timezone(&Utc)
    }

    fn limits() -> Limits {
        Limits { per_transaction: m("100"), daily: m("250"), nightly: m("50") }
    }

    #[test]
    fn the_night_window_is_20_to_6_local_time() {
        let d = NaiveDate::from_ymd_opt(2026, 3, 10).unwrap();
        assert_eq!(calendar(sp(2026, 3, 10, 19, 59)).1, None);
        assert_eq!(calendar(sp(2026, 3, 10, 20, 0)).1, Some(d));
        assert_eq!(calendar(sp(2026, 3, 11, 5, 59)).1, Some(d));
        assert_eq!(calendar(sp(2026, 3, 11, 6, 0)).1, None);
        // 23:30 in Sao Paulo is already the next day in UTC; the local day is what counts.
        assert_eq!(calendar(sp(2026, 3, 10, 23, 30)).0, d);
    }

    #[test]
    fn a_value_equal_to_a_limit_is_allowed() {
        let c = LimitCounters::default();
        let noon = sp(2026, 3, 10, 12, 0);
        assert!(c.admit(&limits(), m("100"), noon, true).is_ok());
        assert_eq!(c.admit(&limits(), m("100.01"), noon, true), Err(LimitBreach::PerTransaction));
    }

    #[test]
    fn the_daily_sum_resets_at_local_midnight() {
        let lim = limits();
        let mut c = LimitCounters::default();
        for _ in 0..2 {
            c = c.admit(&lim, m("100"), sp(2026, 3, 10, 10, 0), true).unwrap();
        }
        c = c.admit(&lim, m("50"), sp(2026, 3, 10, 11, 0), true).unwrap(); // exactly 250
        assert_eq!(c.admit(&lim, m("0.01"), sp(2026, 3, 10, 12, 0), true), Err(LimitBreach::Daily));
        // The next local day starts fresh (07:00, outside the night window).
        assert!(c.admit(&lim, m("100"), sp(2026, 3, 11, 7, 0), true).is_ok());
    }

    #[test]
    fn the_night_sum_spans_midnight_and_resets_at_6() {
        let lim = Limits { daily: m("1000"), ..limits() };
        let mut c = LimitCounters::default();
        c = c.admit(&lim, m("30"), sp(2026, 3, 10, 22, 0), true).unwrap();
        // After local midnight, the same window: 30 + 20 = 50 is allowed, 0.01 more is not.
        c = c.admit(&lim, m("20"), sp(2026, 3, 11, 1, 0), true).unwrap();
        assert_eq!(c.admit(&lim, m("0.01"), sp(2026, 3, 11, 5, 59), true), Err(LimitBreach::Nightly));
        // Daytime: no night limit.
        let day = c.admit(&lim, m("100"), sp(2026, 3, 11, 6, 0), true).unwrap();
        // The next window starts fresh.
        assert!(day.admit(&lim, m("50"), sp(2026, 3, 11, 20, 0), true).is_ok());
    }

    /// A debit the arrangement makes at its own hour (Pix Automático) counts against the
    /// transaction's and the day's limits, not the night's, and leaves the night's sum as it
    /// was.
    #[test]
    fn a_debit_made_at_the_arrangements_hour_skips_only_the_nights_limit() {
        let lim = Limits { per_transaction: m("100"), daily: m("150"), nightly: m("10") };
        let midnight = sp(2026, 3, 11, 0, 0);
        let c = LimitCounters::default();
        assert_eq!(c.admit(&lim, m("30"), midnight, true), Err(LimitBreach::Nightly));
        let c = c.admit(&lim, m("100"), midnight, false).unwrap();
        assert_eq!(c.admit(&lim, m("100.01"), midnight, false), Err(LimitBreach::PerTransaction));
        assert_eq!(c.admit(&lim, m("50.01"), midnight, false), Err(LimitBreach::Daily));
        let c = c.admit(&lim, m("10"), midnight, true).unwrap();
        assert_eq!(
            c.admit(&lim, m("0.01"), midnight, true),
            Err(LimitBreach::Nightly),
            "10.00 by night in all"
        );
    }
}
