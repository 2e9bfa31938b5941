//! What a charge with a due date (a `cobv`) costs on the day it is paid.
//!
//! A cobv has an original value, a due date and up to four adjustments, with the modalities
//! of the central bank's API Pix:
//! - **abatement** (`abatimento`), always: a fixed value or a percent of the original;
//! - **discount** (`desconto`), when paid on or before the due date: a fixed value or a
//!   percent until given dates (the first date not before the payment day applies), or a
//!   value or percent per calendar or business day paid early;
//! - **fine** (`multa`), once, when paid after the due date: a fixed value or a percent;
//! - **interest** (`juros`), when paid after the due date: a value or a percent per day,
//!   month or year, counted in calendar or business days late.
//!
//! Rules (decisions.md "Charges with a due date"):
//! - the base of every percent is the original value minus the abatement;
//! - a due date on a non-business day moves to the next business day: paying then is on
//!   time; paying later counts the days late from the due date as written;
//! - a percent per month is a thirtieth of it per day, a percent per year a 365th;
//! - each adjustment is rounded half away from zero to the cent, then they are summed;
//! - the amount due is never below 0.01 (a PIX moves at least a cent);
//! - after `validadeAposVencimento` calendar days past the due date (counted from the
//!   business day a due date on a non-business day moves to), it cannot be paid.
//!
//! Pure: the payment day comes in as an argument (the Sao Paulo date of the payment).

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use chrono_tz::America::Sao_Paulo;
use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use super::calendar::{business_days_between, next_business_day};
use super::money::{Money, Percent};

/// Entries of a discount until given dates, at most.
pub const DISCOUNT_DATES_MAX: usize = 3;
/// Days after the due date a cobv may be paid, at most (`validadeAposVencimento`).
pub const VALIDITY_AFTER_DUE_DAYS_MAX: u32 = 3650;

/// How days are counted: every day, or business days only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Days {
    Calendar,
    Business,
}

/// A fixed value or a percent of the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Amount {
    Value(Money),
    Percent(Percent),
}

/// The period a percent of interest is given for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Period {
    Day,
    Month,
    Year,
}

/// Interest per day late: a value per day, or a percent per period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Interest {
    ValuePerDay(Money, Days),
    Percent(Percent, Period, Days),
}

/// A discount for paying on time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Discount {
    /// Up to [`DISCOUNT_DATES_MAX`] `(date, amount)`, dates ascending: paying on or before a
    /// date earns its amount.
    UntilDates(Vec<(NaiveDate, Amount)>),
    /// Per day paid before the due date.
    PerDayEarly(Amount, Days),
}

/// A cobv's price terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terms {
    pub original: Money,
    pub due: NaiveDate,
    pub validity_after_due_days: u32,
    pub abatement: Option<Amount>,
    pub discount: Option<Discount>,
    pub fine: Option<Amount>,
    pub interest: Option<Interest>,
}

/// What a payment on a given day owes, part by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub original: Money,
    pub abatement: Money,
    pub discount: Money,
    pub fine: Money,
    pub interest: Money,
    /// What the payer pays: original - abatement - discount + fine + interest, at least 0.01.
    pub due: Money,
}

/// Why a cobv cannot be paid on a day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    #[error("the charge can no longer be paid: its validity after the due date has ended")]
    Expired,
    #[error("the amount due is out of range")]
    OutOfRange,
}

fn cents(d: Decimal) -> Decimal {
    d.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
}

fn of(amount: Amount, base: Decimal) -> Decimal {
    match amount {
        Amount::Value(m) => m.as_decimal(),
        Amount::Percent(p) => base * p.as_decimal() / Decimal::ONE_HUNDRED,
    }
}

fn count(from: NaiveDate, to: NaiveDate, days: Days) -> i64 {
    match days {
        Days::Calendar => (to - from).num_days().max(0),
        Days::Business => business_days_between(from, to),
    }
}

/// The day a payment made at `now` is priced on: its date in Sao Paulo.
pub fn payment_day(now: DateTime<Utc>) -> NaiveDate {
    now.with_timezone(&Sao_Paulo).date_naive()
}

/// The first instant of `day` in Sao Paulo (UTC-3 where the zone has no answer, which a
/// midnight never lacks since Brazil dropped daylight saving in 2019).
pub fn start_of_day(day: NaiveDate) -> DateTime<Utc> {
    let midnight = day.and_time(chrono::NaiveTime::MIN);
    match Sao_Paulo.from_local_datetime(&midnight).earliest() {
        Some(t) => t.with_timezone(&Utc),
        None => Utc.from_utc_datetime(&(midnight + chrono::Duration::hours(3))),
    }
}

/// The last day a cobv due on `due` with `validity` days after it may be paid (see
/// [`Terms::last_day`]).
pub fn last_payable_day(due: NaiveDate, validity: u32) -> NaiveDate {
    next_business_day(due) + chrono::Duration::days(i64::from(validity))
}

impl Terms {
    /// When the cobv can no longer be paid: the start of the day after its last day, in
    /// Sao Paulo. A payment at `now` is priced (not [`PriceError::Expired`]) exactly when
    /// `now < closes_at()`.
    pub fn closes_at(&self) -> DateTime<Utc> {
        start_of_day(self.last_day() + chrono::Duration::days(1))
    }

    /// The last day the cobv may be paid: `validadeAposVencimento` days after the business
    /// day the due date moves to, so a Saturday due date with a validity of 0 can still be
    /// paid on the Monday on which paying counts as on time.
    pub fn last_day(&self) -> NaiveDate {
        last_payable_day(self.due, self.validity_after_due_days)
    }

    /// Whether a payment on `day` is late: after the due date, or after the next business
    /// day when the due date is not one.
    pub fn is_late(&self, day: NaiveDate) -> bool {
        day > next_business_day(self.due)
    }

    /// The price of paying on `day`.
    pub fn price(&self, day: NaiveDate) -> Result<Price, PriceError> {
        if day > self.last_day() {
            return Err(PriceError::Expired);
        }
        let original = self.original.as_decimal();
        let abatement = self.abatement.map_or(Decimal::ZERO, |a| cents(of(a, original)).min(original));
        let base = original - abatement;
        let (mut discount, mut fine, mut interest) = (Decimal::ZERO, Decimal::ZERO, Decimal::ZERO);
        if self.is_late(day) {
            fine = self.fine.map_or(Decimal::ZERO, |f| cents(of(f, base)));
            interest = match self.interest {
                None => Decimal::ZERO,
                Some(Interest::ValuePerDay(v, days)) => {
                    cents(v.as_decimal() * Decimal::from(count(self.due, day, days)))
                }
                Some(Interest::Percent(p, period, days)) => {
                    let per_day = match period {
                        Period::Day => p.as_decimal(),
                        Period::Month => p.as_decimal() / Decimal::from(30),
                        Period::Year => p.as_decimal() / Decimal::from(365),
                    };
                    cents(base * per_day / Decimal::ONE_HUNDRED * Decimal::from(count(self.due, day, days)))
                }
            };
        } else {
            // Paying on the business day a weekend or holiday due date moves to is paying on
            // the due date: the discounts of that date apply (decisions.md "Charges with a
            // due date").
            let as_of = day.min(self.due);
            discount = match &self.discount {
                None => Decimal::ZERO,
                Some(Discount::UntilDates(dates)) => dates
                    .iter()
                    .find(|(until, _)| as_of <= *until)
                    .map_or(Decimal::ZERO, |(_, amount)| cents(of(*amount, base))),
                Some(Discount::PerDayEarly(amount, days)) => {
                    let early = Decimal::from(count(day, self.due, *days));
                    cents(of(*amount, base) * early)
                }
            };
        }
        let total = base - discount + fine + interest;
        let floor = Decimal::new(1, 2);
        let due = Money::try_from(total.max(floor)).map_err(|_| PriceError::OutOfRange)?;
        let money = |d: Decimal| Money::try_from(d.max(Decimal::ZERO)).map_err(|_| PriceError::OutOfRange);
        Ok(Price {
            original: self.original,
            abatement: money(abatement)?,
            discount: money(discount)?,
            fine: money(fine)?,
            interest: money(interest)?,
            due,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap()
    }

    fn m(s: &str) -> Money {
        Money::parse(s).unwrap()
    }

    fn p(s: &str) -> Percent {
        Percent::parse(s).unwrap()
    }

    /// 100.00 due Tuesday 24 November 2026, payable 30 days after.
    fn terms() -> Terms {
        Terms {
            original: m("100.00"),
            due: d(2026, 11, 24),
            validity_after_due_days: 30,
            abatement: None,
            discount: None,
            fine: None,
            interest: None,
        }
    }

    fn due(t: &Terms, day: NaiveDate) -> Money {
        t.price(day).unwrap().due
    }

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn the_payment_day_is_the_sao_paulo_date_and_the_charge_closes_at_its_midnight() {
        // 02:59 UTC on the 25th is still the 24th in Sao Paulo (UTC-3).
        assert_eq!(payment_day(utc("2026-11-25T02:59:59Z")), d(2026, 11, 24));
        assert_eq!(payment_day(utc("2026-11-25T03:00:00Z")), d(2026, 11, 25));
        let t = terms();
        // Last day: 24 December; it closes at 00:00 of the 25th in Sao Paulo.
        assert_eq!(t.closes_at(), utc("2026-12-25T03:00:00Z"));
        let last = utc("2026-12-25T02:59:59Z");
        assert!(last < t.closes_at() && t.price(payment_day(last)).is_ok());
        assert_eq!(t.price(payment_day(t.closes_at())), Err(PriceError::Expired));
        let none_after = Terms { validity_after_due_days: 0, ..terms() };
        assert_eq!(none_after.closes_at(), utc("2026-11-25T03:00:00Z"), "payable on the due date only");
    }

    #[test]
    fn without_adjustments_the_original_is_due_until_the_validity_ends() {
        let t = terms();
        for day in [d(2026, 11, 1), d(2026, 11, 24), d(2026, 11, 25), d(2026, 12, 24)] {
            assert_eq!(due(&t, day), m("100.00"), "{day}");
        }
        assert_eq!(t.price(d(2026, 12, 25)), Err(PriceError::Expired), "the 31st day after");
    }

    #[test]
    fn a_fine_is_charged_once_from_the_day_after_the_due_date() {
        let fixed = Terms { fine: Some(Amount::Value(m("2.50"))), ..terms() };
        let percent = Terms { fine: Some(Amount::Percent(p("2"))), ..terms() };
        for t in [&fixed, &percent] {
            assert_eq!(due(t, d(2026, 11, 23)), m("100.00"), "the day before");
            assert_eq!(due(t, d(2026, 11, 24)), m("100.00"), "on the due date");
        }
        assert_eq!(due(&fixed, d(2026, 11, 25)), m("102.50"), "the day after");
        assert_eq!(due(&fixed, d(2026, 12, 20)), m("102.50"), "once, not per day");
        assert_eq!(due(&percent, d(2026, 11, 25)), m("102.00"));
    }

    #[test]
    fn interest_counts_calendar_or_business_days_late() {
        // Due Thursday 19 November 2026; Friday 20 is a holiday, then the weekend. Paid on
        // Sunday 22: 3 calendar days late, 0 business days; on Monday 23: 4 and 1.
        let (c, b) = (Days::Calendar, Days::Business);
        let cases = [
            (Interest::ValuePerDay(m("0.10"), c), "100.30", "100.40"),
            (Interest::ValuePerDay(m("0.10"), b), "100.00", "100.10"),
            (Interest::Percent(p("1"), Period::Day, c), "103.00", "104.00"),
            (Interest::Percent(p("1"), Period::Day, b), "100.00", "101.00"),
            (Interest::Percent(p("3"), Period::Month, c), "100.30", "100.40"),
            (Interest::Percent(p("3"), Period::Month, b), "100.00", "100.10"),
            (Interest::Percent(p("36.5"), Period::Year, c), "100.30", "100.40"),
            (Interest::Percent(p("36.5"), Period::Year, b), "100.00", "100.10"),
        ];
        for (interest, sunday, monday) in cases {
            let t = Terms { due: d(2026, 11, 19), interest: Some(interest), ..terms() };
            assert_eq!(due(&t, d(2026, 11, 18)), m("100.00"), "{interest:?} the day before");
            assert_eq!(due(&t, d(2026, 11, 19)), m("100.00"), "{interest:?} on the due date");
            assert_eq!(due(&t, d(2026, 11, 22)), m(sunday), "{interest:?} on Sunday");
            assert_eq!(due(&t, d(2026, 11, 23)), m(monday), "{interest:?} on Monday");
        }
    }

    #[test]
    fn a_due_date_on_a_holiday_or_weekend_is_on_time_until_the_next_business_day() {
        // Due Friday 20 November 2026 (a holiday): paying Monday 23 is on time.
        let t = Terms {
            due: d(2026, 11, 20),
            fine: Some(Amount::Value(m("1.00"))),
            interest: Some(Interest::ValuePerDay(m("0.10"), Days::Calendar)),
            ..terms()
        };
        assert_eq!(due(&t, d(2026, 11, 21)), m("100.00"), "Saturday");
        assert_eq!(due(&t, d(2026, 11, 23)), m("100.00"), "Monday, the next business day");
        // Tuesday: late, 4 calendar days after the due date as written.
        assert_eq!(due(&t, d(2026, 11, 24)), m("101.40"));
        assert!(!t.is_late(d(2026, 11, 23)) && t.is_late(d(2026, 11, 24)));
    }

    #[test]
    fn paying_on_the_day_a_weekend_due_date_moves_to_earns_the_discount_of_the_due_date() {
        // Due Saturday 21 November 2026, 5.00 off until that date: paid on Monday 23 (on
        // time) it is 95.00, as on the Saturday; on Tuesday it is late and earns nothing.
        let t = Terms {
            due: d(2026, 11, 21),
            discount: Some(Discount::UntilDates(vec![(d(2026, 11, 21), Amount::Value(m("5.00")))])),
            ..terms()
        };
        assert_eq!(due(&t, d(2026, 11, 21)), m("95.00"), "Saturday");
        assert_eq!(due(&t, d(2026, 11, 23)), m("95.00"), "Monday, on time");
        assert_eq!(due(&t, d(2026, 11, 24)), m("100.00"), "Tuesday, late");
        // A date before the due date has passed by the Monday all the same.
        let early = Terms {
            discount: Some(Discount::UntilDates(vec![(d(2026, 11, 20), Amount::Value(m("5.00")))])),
            ..t
        };
        assert_eq!(due(&early, d(2026, 11, 23)), m("100.00"));
    }

    #[test]
    fn the_validity_counts_from_the_business_day_the_due_date_moves_to() {
        // Due Saturday 21 November 2026 with no validity after it: payable, on time, until
        // Monday 23 (it used to close at the end of the Saturday).
        let t = Terms { due: d(2026, 11, 21), validity_after_due_days: 0, ..terms() };
        assert_eq!(t.last_day(), d(2026, 11, 23));
        assert_eq!(due(&t, d(2026, 11, 23)), m("100.00"));
        assert_eq!(t.price(d(2026, 11, 24)), Err(PriceError::Expired));
        assert_eq!(t.closes_at(), start_of_day(d(2026, 11, 24)));
        // Five days after that Monday; a due date on a business day is unchanged.
        let five = Terms { validity_after_due_days: 5, ..t.clone() };
        assert_eq!(five.last_day(), d(2026, 11, 28));
        let weekday = Terms { due: d(2026, 11, 24), validity_after_due_days: 0, ..terms() };
        assert_eq!(weekday.last_day(), d(2026, 11, 24));
        // Due on the holiday of Friday 20 November: Monday 23 again.
        assert_eq!(last_payable_day(d(2026, 11, 20), 0), d(2026, 11, 23));
    }

    #[test]
    fn an_abatement_always_applies_and_is_the_base_of_every_percent() {
        let t = Terms {
            abatement: Some(Amount::Percent(p("10"))),
            fine: Some(Amount::Percent(p("2"))),
            interest: Some(Interest::Percent(p("1"), Period::Day, Days::Calendar)),
            ..terms()
        };
        assert_eq!(due(&t, d(2026, 11, 20)), m("90.00"), "before");
        assert_eq!(due(&t, d(2026, 11, 24)), m("90.00"), "on the due date");
        // 90 + 2 % of 90 (1.80) + 1 % of 90 for one day (0.90).
        let price = t.price(d(2026, 11, 25)).unwrap();
        assert_eq!(
            (price.abatement, price.fine, price.interest, price.due),
            (m("10"), m("1.80"), m("0.90"), m("92.70"))
        );
        let fixed = Terms { abatement: Some(Amount::Value(m("15.55"))), ..terms() };
        assert_eq!(due(&fixed, d(2026, 11, 30)), m("84.45"));
    }

    #[test]
    fn a_discount_until_dates_takes_the_first_date_not_before_the_payment() {
        let t = Terms {
            discount: Some(Discount::UntilDates(vec![
                (d(2026, 11, 10), Amount::Value(m("5.00"))),
                (d(2026, 11, 20), Amount::Value(m("2.00"))),
            ])),
            ..terms()
        };
        assert_eq!(due(&t, d(2026, 11, 9)), m("95.00"));
        assert_eq!(due(&t, d(2026, 11, 10)), m("95.00"), "on the date");
        assert_eq!(due(&t, d(2026, 11, 11)), m("98.00"), "the day after: the next entry");
        assert_eq!(due(&t, d(2026, 11, 20)), m("98.00"));
        assert_eq!(due(&t, d(2026, 11, 21)), m("100.00"), "past every date");
        assert_eq!(due(&t, d(2026, 11, 25)), m("100.00"), "late: no discount");
        let percent = Terms {
            discount: Some(Discount::UntilDates(vec![(d(2026, 11, 24), Amount::Percent(p("3.5")))])),
            ..terms()
        };
        assert_eq!(due(&percent, d(2026, 11, 24)), m("96.50"));
    }

    #[test]
    fn a_discount_per_day_early_counts_calendar_or_business_days() {
        let calendar = Terms {
            discount: Some(Discount::PerDayEarly(Amount::Value(m("0.50")), Days::Calendar)),
            ..terms()
        };
        let business = Terms {
            discount: Some(Discount::PerDayEarly(Amount::Value(m("0.50")), Days::Business)),
            ..terms()
        };
        let percent = Terms {
            discount: Some(Discount::PerDayEarly(Amount::Percent(p("0.1")), Days::Calendar)),
            ..terms()
        };
        // Paid Thursday 19 November for Tuesday 24: 5 calendar days, 2 business days (Friday
        // 20 is a holiday; Monday 23 and Tuesday 24 count).
        assert_eq!(due(&calendar, d(2026, 11, 19)), m("97.50"));
        assert_eq!(due(&business, d(2026, 11, 19)), m("99.00"));
        assert_eq!(due(&percent, d(2026, 11, 19)), m("99.50"));
        for t in [&calendar, &business, &percent] {
            assert_eq!(due(t, d(2026, 11, 24)), m("100.00"), "on the due date: no day early");
        }
    }

    #[test]
    fn adjustments_round_to_the_cent_and_the_amount_due_is_at_least_a_cent() {
        // 1/3 % of 100.00 a day for one day: 0.3333 rounds to 0.33; 2.5 % of 0.10: 0.0025
        // rounds to 0.00.
        let t =
            Terms { interest: Some(Interest::Percent(p("0.3333"), Period::Day, Days::Calendar)), ..terms() };
        assert_eq!(due(&t, d(2026, 11, 25)), m("100.33"));
        let half = Terms { original: m("0.10"), fine: Some(Amount::Percent(p("5"))), ..terms() };
        assert_eq!(due(&half, d(2026, 11, 25)), m("0.11"), "0.005 rounds away from zero");
        let all_off = Terms {
            discount: Some(Discount::UntilDates(vec![(d(2026, 11, 24), Amount::Value(m("150")))])),
            ..terms()
        };
        assert_eq!(due(&all_off, d(2026, 11, 1)), m("0.01"));
        let over = Terms { abatement: Some(Amount::Value(m("120"))), ..terms() };
        assert_eq!(over.price(d(2026, 11, 1)).unwrap().abatement, m("100"), "capped at the original");
    }
}
