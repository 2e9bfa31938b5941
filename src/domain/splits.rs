//! Payment splits of a charge (interface.md "POST /api/pix/cash-in", decisions.md "Money in: charges"): their rules,
//! their amounts, and when the scheduled ones run.
//!
//! A PERCENTAGE split is that percent of the charge's gross amount, rounded half away from
//! zero to cents; a FIXED split is its value. The splits together may not exceed the amount.
//! Splits with `immediate` run right after the payment; the others at the account's split
//! frequency: DAILY at 00:00 America/Sao_Paulo, HOURLY at the top of each hour.

use chrono::{DateTime, Duration, TimeZone, Timelike, Utc};
use chrono_tz::America::Sao_Paulo;
use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use super::account::SplitFrequency;
use super::money::Money;
use super::pix_key::DirectoryKey;

pub const SPLITS_MAX: usize = 10;
/// Characters of a split's pixKey and name.
pub const SPLIT_TEXT_LEN_MAX: usize = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitValue {
    Fixed(Money),
    /// Percent of the gross amount (10 means 10%), 0.01 to 100 with at most 2 decimals.
    Percentage(Decimal),
}

/// A split as stored on its charge, its amount already computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Split {
    pub key: DirectoryKey,
    pub name: String,
    pub document: String,
    pub amount: Money,
    pub immediate: bool,
}

/// The amount of each split of `gross`, or `None` when together they exceed it.
pub fn amounts(gross: Money, values: &[SplitValue]) -> Option<Vec<Money>> {
    let mut total = Money::ZERO;
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        let amount = match v {
            SplitValue::Fixed(m) => *m,
            SplitValue::Percentage(p) => Money::try_from(
                (gross.as_decimal() * p / Decimal::ONE_HUNDRED)
                    .round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero),
            )
            .ok()?,
        };
        total = total.checked_add(amount)?;
        out.push(amount);
    }
    (total <= gross).then_some(out)
}

/// The first run of the split frequency strictly after `now`.
pub fn next_run(frequency: SplitFrequency, now: DateTime<Utc>) -> DateTime<Utc> {
    match frequency {
        SplitFrequency::Hourly => {
            let top = now
                .with_minute(0)
                .and_then(|t| t.with_second(0))
                .and_then(|t| t.with_nanosecond(0))
                .unwrap_or(now);
            top + Duration::hours(1)
        }
        SplitFrequency::Daily => {
            let tomorrow = now.with_timezone(&Sao_Paulo).date_naive() + Duration::days(1);
            let midnight = tomorrow.and_hms_opt(0, 0, 0).unwrap_or_default();
            Sao_Paulo
                .from_local_datetime(&midnight)
                .earliest()
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(now + Duration::days(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> Money {
        Money::parse(s).unwrap()
    }

    #[test]
    fn fixed_and_percentage_add_up_to_the_gross_at_most() {
        let pct = |s: &str| SplitValue::Percentage(s.parse().unwrap());
        assert_eq!(amounts(m("100"), &[SplitValue::Fixed(m("60")), pct("40")]), Some(vec![m("60"), m("40")]));
        assert_eq!(amounts(m("100"), &[SplitValue::Fixed(m("60.01")), pct("40")]), None);
        // 33.335 rounds half away from zero to 33.34; three of them exceed 100.
        assert_eq!(amounts(m("100.01"), &[pct("33.33")]), Some(vec![m("33.33")]));
        assert_eq!(amounts(m("10.05"), &[pct("50")]), Some(vec![m("5.03")]));
        assert_eq!(amounts(m("10.05"), &[pct("50"), pct("50")]), None);
        assert_eq!(amounts(m("1"), &[]), Some(vec![]));
    }

    #[test]
    fn the_daily_run_is_the_next_local_midnight() {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        // 23:59 in Sao Paulo is 02:59 UTC the next day; the run is 03:00 UTC.
        assert_eq!(next_run(SplitFrequency::Daily, at("2026-03-11T02:59:00Z")), at("2026-03-11T03:00:00Z"));
        // Exactly at midnight: the next one, a day later.
        assert_eq!(next_run(SplitFrequency::Daily, at("2026-03-11T03:00:00Z")), at("2026-03-12T03:00:00Z"));
        assert_eq!(next_run(SplitFrequency::Hourly, at("2026-03-11T10:15:30Z")), at("2026-03-11T11:00:00Z"));
        assert_eq!(next_run(SplitFrequency::Hourly, at("2026-03-11T11:00:00Z")), at("2026-03-11T12:00:00Z"));
    }
}
