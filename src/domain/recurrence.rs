//! The rules of Pix Automático on the receiver's side: a recurrence's cycles, when a
//! recurring charge (`cobr`) may be sent for one, its due date, its amount, and its retries.
//!
//! - **Cycles.** Cycle 0 starts on the recurrence's `dataInicial`; cycle `n` starts `n`
//!   periods later. Months are counted from the first date, not from the cycle before: a
//!   monthly recurrence from 31 January has cycles on 29 February (in a leap year), 31 March
//!   and 30 April, never drifting to the 28th. A date belongs to the last cycle that starts
//!   on or before it; with a `dataFinal`, no cycle starts after it.
//! - **Sending.** A charge is sent from [`SEND_DAYS_BEFORE_MAX`] to [`SEND_DAYS_BEFORE_MIN`]
//!   calendar days before its due date (the payer's institution needs the time to notify
//!   the payer), one per cycle.
//! - **Due date.** With `ajusteDiaUtil` a due date on a non-business day moves to the next
//!   business day (the banking calendar of `calendar.rs`).
//! - **Amount.** A recurrence with a fixed value (`valorRec`) is charged exactly that; one
//!   with a variable value is charged at least its `valorMinimoRecebedor` when it has one.
//!   The payer's maximum, when the payer set one on approving, is the payer's institution's
//!   to enforce: [`within_payer_maximum`] answers what it decides.
//! - **Retries.** Under `PERMITE_3R_7D`, a charge that failed is tried again at most
//!   [`RETRIES_MAX`] times, each on a date of its own, after the due date and at most
//!   [`RETRY_WINDOW_DAYS`] calendar days after it, and never on a date already past. Under
//!   `NAO_PERMITE`, never.
//!
//! Pure: dates come in as arguments (the São Paulo date of "today" is the caller's).
//! docs/decisions.md "Pix Automático: the rules of cycles" says why each rule is so.

use chrono::{Datelike, Duration, Months, NaiveDate};
use serde::{Deserialize, Serialize};

use super::calendar::next_business_day;
use super::money::Money;

/// A charge is sent at least this many calendar days before its due date.
pub const SEND_DAYS_BEFORE_MIN: i64 = 2;
/// ... and at most this many.
pub const SEND_DAYS_BEFORE_MAX: i64 = 10;
/// Retries of a failed charge, at most, where the recurrence allows them.
pub const RETRIES_MAX: usize = 3;
/// A retry is at most this many calendar days after the due date.
pub const RETRY_WINDOW_DAYS: i64 = 7;
/// Cycles a recurrence may have, at most: a weekly one for about 100 years.
pub const CYCLES_MAX: u32 = 5_200;

/// Why a rule refuses. Each is one variant; the HTTP layer maps them to codes in one place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecurrenceRejection {
    #[error("periodicidade must be one of SEMANAL, MENSAL, TRIMESTRAL, SEMESTRAL, ANUAL")]
    UnknownPeriodicity,
    #[error("politicaRetentativa must be NAO_PERMITE or PERMITE_3R_7D")]
    UnknownRetryPolicy,
    #[error("dataFinal is before dataInicial")]
    EndsBeforeStart,
    #[error("the date is before the recurrence's first cycle")]
    BeforeFirstCycle,
    #[error("the date is after the recurrence's last date")]
    AfterLastDate,
    #[error("a charge is sent {SEND_DAYS_BEFORE_MIN} to {SEND_DAYS_BEFORE_MAX} days before its due date; this one is {0} days before")]
    OutsideSendWindow(i64),
    #[error("the recurrence's value is fixed at {0}")]
    NotTheFixedValue(Money),
    #[error("the value is below the recurrence's minimum, {0}")]
    BelowMinimum(Money),
    #[error("the recurrence does not allow retries")]
    RetriesNotAllowed,
    #[error("a charge is retried at most {RETRIES_MAX} times")]
    TooManyRetries,
    #[error("a retry is after the due date and at most {RETRY_WINDOW_DAYS} days after it")]
    RetryOutsideWindow,
    #[error("a retry's date is today or later")]
    RetryInThePast,
    #[error("the charge is already tried on that date")]
    RetrySameDate,
    #[error("the gateway's retries are 1 to {RETRIES_MAX} days, each 1 to {RETRY_WINDOW_DAYS} after the due date, in ascending order")]
    BadAutoRetryDays,
}

/// The retries the gateway asks for by itself after a failed attempt (pixgw's own, off by
/// default): days after the charge's settlement day, ascending, each within the retry
/// window, at most [`RETRIES_MAX`]. After each failure the first of them still to come is
/// scheduled, as if the receiver had asked for it; the receiver may still ask for its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct AutoRetry(Vec<u8>);

impl AutoRetry {
    pub fn parse(days: &[u64], policy: RetryPolicy) -> Result<AutoRetry, RecurrenceRejection> {
        if days.is_empty() {
            return Ok(AutoRetry::default());
        }
        if policy == RetryPolicy::NotAllowed {
            return Err(RecurrenceRejection::RetriesNotAllowed);
        }
        let in_window = days.iter().all(|d| (1..=RETRY_WINDOW_DAYS as u64).contains(d));
        let ascending = days.windows(2).all(|w| w[0] < w[1]);
        if days.len() > RETRIES_MAX || !in_window || !ascending {
            return Err(RecurrenceRejection::BadAutoRetryDays);
        }
        Ok(AutoRetry(days.iter().map(|d| *d as u8).collect()))
    }

    pub fn days(&self) -> &[u8] {
        &self.0
    }

    pub fn is_off(&self) -> bool {
        self.0.is_empty()
    }

    /// The retry to schedule after a failure on `failed_on` of a charge settled on `due`, that
    /// `retried` holds the retries of: the first of these days after the failure, not before
    /// `today`, that the rules of retries allow.
    pub fn next(
        &self,
        policy: RetryPolicy,
        due: NaiveDate,
        retried: &[NaiveDate],
        failed_on: NaiveDate,
        today: NaiveDate,
    ) -> Option<NaiveDate> {
        self.0
            .iter()
            .map(|d| due + chrono::Duration::days(i64::from(*d)))
            .filter(|date| *date > failed_on)
            .find(|date| check_retry(policy, due, retried, *date, today).is_ok())
    }
}

/// How often a recurrence charges (`periodicidade`). Stored and shown by its API Pix name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum Periodicity {
    Weekly,
    Monthly,
    Quarterly,
    HalfYearly,
    Yearly,
}

impl Periodicity {
    /// The API Pix's name for it.
    pub fn parse(text: &str) -> Result<Periodicity, RecurrenceRejection> {
        Ok(match text {
            "SEMANAL" => Periodicity::Weekly,
            "MENSAL" => Periodicity::Monthly,
            "TRIMESTRAL" => Periodicity::Quarterly,
            "SEMESTRAL" => Periodicity::HalfYearly,
            "ANUAL" => Periodicity::Yearly,
            _ => return Err(RecurrenceRejection::UnknownPeriodicity),
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Periodicity::Weekly => "SEMANAL",
            Periodicity::Monthly => "MENSAL",
            Periodicity::Quarterly => "TRIMESTRAL",
            Periodicity::HalfYearly => "SEMESTRAL",
            Periodicity::Yearly => "ANUAL",
        }
    }

    /// Months in one period (none for weekly).
    fn months(self) -> Option<u32> {
        match self {
            Periodicity::Weekly => None,
            Periodicity::Monthly => Some(1),
            Periodicity::Quarterly => Some(3),
            Periodicity::HalfYearly => Some(6),
            Periodicity::Yearly => Some(12),
        }
    }
}

/// Whether a failed charge is tried again (`politicaRetentativa`). Stored and shown by its
/// API Pix name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum RetryPolicy {
    NotAllowed,
    ThreeWithinSevenDays,
}

impl RetryPolicy {
    pub fn parse(text: &str) -> Result<RetryPolicy, RecurrenceRejection> {
        match text {
            "NAO_PERMITE" => Ok(RetryPolicy::NotAllowed),
            "PERMITE_3R_7D" => Ok(RetryPolicy::ThreeWithinSevenDays),
            _ => Err(RecurrenceRejection::UnknownRetryPolicy),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RetryPolicy::NotAllowed => "NAO_PERMITE",
            RetryPolicy::ThreeWithinSevenDays => "PERMITE_3R_7D",
        }
    }
}

impl TryFrom<String> for Periodicity {
    type Error = RecurrenceRejection;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Periodicity::parse(&text)
    }
}

impl From<Periodicity> for &'static str {
    fn from(p: Periodicity) -> Self {
        p.as_str()
    }
}

impl TryFrom<String> for RetryPolicy {
    type Error = RecurrenceRejection;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        RetryPolicy::parse(&text)
    }
}

impl From<RetryPolicy> for &'static str {
    fn from(p: RetryPolicy) -> Self {
        p.as_str()
    }
}

/// A stored schedule's fields, read back through [`Schedule::new`].
#[derive(Deserialize)]
struct ScheduleRecord {
    start: NaiveDate,
    every: Periodicity,
    end: Option<NaiveDate>,
}

impl TryFrom<ScheduleRecord> for Schedule {
    type Error = RecurrenceRejection;

    fn try_from(r: ScheduleRecord) -> Result<Self, Self::Error> {
        Schedule::new(r.start, r.every, r.end)
    }
}

/// A recurrence's calendar: its first date, its period and its optional last date. Built
/// only through [`Schedule::new`] (a stored one too: it is read back through it), so the
/// last date is never before the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ScheduleRecord")]
pub struct Schedule {
    start: NaiveDate,
    every: Periodicity,
    end: Option<NaiveDate>,
}

impl Schedule {
    pub fn new(
        start: NaiveDate,
        every: Periodicity,
        end: Option<NaiveDate>,
    ) -> Result<Schedule, RecurrenceRejection> {
        if end.is_some_and(|end| end < start) {
            return Err(RecurrenceRejection::EndsBeforeStart);
        }
        Ok(Schedule { start, every, end })
    }

    pub fn start(&self) -> NaiveDate {
        self.start
    }

    pub fn every(&self) -> Periodicity {
        self.every
    }

    pub fn end(&self) -> Option<NaiveDate> {
        self.end
    }

    /// The first date of cycle `n`, counted from the first date (months keep its day where
    /// the month has it, else take the month's last day). `None` past [`CYCLES_MAX`] or
    /// after the last date.
    pub fn cycle_start(&self, n: u32) -> Option<NaiveDate> {
        if n > CYCLES_MAX {
            return None;
        }
        let date = match self.every.months() {
            None => self.start.checked_add_signed(Duration::weeks(i64::from(n)))?,
            Some(m) => self.start.checked_add_months(Months::new(m.checked_mul(n)?))?,
        };
        match self.end {
            Some(end) if date > end => None,
            _ => Some(date),
        }
    }

    /// The cycle `date` falls in: the last one that starts on or before it.
    pub fn cycle_of(&self, date: NaiveDate) -> Result<u32, RecurrenceRejection> {
        if date < self.start {
            return Err(RecurrenceRejection::BeforeFirstCycle);
        }
        if self.end.is_some_and(|end| date > end) {
            return Err(RecurrenceRejection::AfterLastDate);
        }
        // An estimate from the elapsed time, then corrected by at most a step or two: a
        // month is 28 to 31 days, so the estimate is never far.
        let mut n = match self.every.months() {
            None => ((date - self.start).num_days() / 7) as u32,
            Some(m) => {
                let months =
                    (date.year() - self.start.year()) * 12 + date.month() as i32 - self.start.month() as i32;
                (months.max(0) as u32) / m
            }
        };
        n = n.min(CYCLES_MAX);
        while n > 0 && self.cycle_start(n).is_none_or(|s| s > date) {
            n -= 1;
        }
        while self.cycle_start(n + 1).is_some_and(|s| s <= date) {
            n += 1;
        }
        Ok(n)
    }
}

/// The day a charge due on `due` is paid: the next business day when `adjust_to_business_day`
/// (`ajusteDiaUtil`) and `due` is not one.
pub fn effective_due_date(due: NaiveDate, adjust_to_business_day: bool) -> NaiveDate {
    if adjust_to_business_day {
        next_business_day(due)
    } else {
        due
    }
}

/// Whether a charge due on `due` may be sent on `today`.
pub fn check_send_window(today: NaiveDate, due: NaiveDate) -> Result<(), RecurrenceRejection> {
    let days = (due - today).num_days();
    if (SEND_DAYS_BEFORE_MIN..=SEND_DAYS_BEFORE_MAX).contains(&days) {
        Ok(())
    } else {
        Err(RecurrenceRejection::OutsideSendWindow(days))
    }
}

/// What a recurrence says of each charge's value (`valor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AmountRule {
    /// `valorRec`: every charge is this.
    Fixed(Money),
    /// No fixed value; at least `valorMinimoRecebedor` when given.
    Variable { minimum: Option<Money> },
}

/// Whether a charge of `value` keeps to the recurrence's rule.
pub fn check_amount(rule: AmountRule, value: Money) -> Result<(), RecurrenceRejection> {
    match rule {
        AmountRule::Fixed(fixed) if value != fixed => Err(RecurrenceRejection::NotTheFixedValue(fixed)),
        AmountRule::Variable { minimum: Some(min) } if value < min => {
            Err(RecurrenceRejection::BelowMinimum(min))
        }
        _ => Ok(()),
    }
}

/// Whether the payer's institution accepts a charge of `value`, given the maximum the payer
/// set on approving (none: any value).
pub fn within_payer_maximum(payer_maximum: Option<Money>, value: Money) -> bool {
    payer_maximum.is_none_or(|max| value <= max)
}

/// Whether a charge due on `due`, already retried on `retried` dates, may be retried on
/// `date`, decided on `today`.
pub fn check_retry(
    policy: RetryPolicy,
    due: NaiveDate,
    retried: &[NaiveDate],
    date: NaiveDate,
    today: NaiveDate,
) -> Result<(), RecurrenceRejection> {
    if policy == RetryPolicy::NotAllowed {
        return Err(RecurrenceRejection::RetriesNotAllowed);
    }
    if retried.len() >= RETRIES_MAX {
        return Err(RecurrenceRejection::TooManyRetries);
    }
    let after = (date - due).num_days();
    if !(1..=RETRY_WINDOW_DAYS).contains(&after) {
        return Err(RecurrenceRejection::RetryOutsideWindow);
    }
    if date < today {
        return Err(RecurrenceRejection::RetryInThePast);
    }
    if retried.contains(&date) {
        return Err(RecurrenceRejection::RetrySameDate);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_retries_keep_the_rules_of_retries_and_take_the_first_day_still_to_come() {
        let ok = |days: &[u64]| AutoRetry::parse(days, RetryPolicy::ThreeWithinSevenDays);
        assert_eq!(ok(&[]), Ok(AutoRetry::default()));
        assert_eq!(
            AutoRetry::parse(&[1], RetryPolicy::NotAllowed),
            Err(RecurrenceRejection::RetriesNotAllowed)
        );
        for bad in [&[0][..], &[8], &[3, 1], &[2, 2], &[1, 2, 3, 4]] {
            assert_eq!(ok(bad), Err(RecurrenceRejection::BadAutoRetryDays), "{bad:?}");
        }
        let a = ok(&[1, 3, 7]).unwrap();
        let day = |d: u32| NaiveDate::from_ymd_opt(2026, 12, d).unwrap();
        let policy = RetryPolicy::ThreeWithinSevenDays;
        assert_eq!(a.next(policy, day(10), &[], day(10), day(10)), Some(day(11)));
        assert_eq!(a.next(policy, day(10), &[day(11)], day(11), day(11)), Some(day(13)));
        assert_eq!(
            a.next(policy, day(10), &[day(11)], day(11), day(14)),
            Some(day(17)),
            "not a day already past"
        );
        assert_eq!(
            a.next(policy, day(10), &[day(11), day(13), day(17)], day(17), day(17)),
            None,
            "three at most"
        );
    }

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap()
    }

    fn money(text: &str) -> Money {
        Money::parse(text).unwrap()
    }

    fn schedule(start: NaiveDate, every: Periodicity) -> Schedule {
        Schedule::new(start, every, None).unwrap()
    }

    #[test]
    fn names_read_and_write_back_and_others_are_refused() {
        for name in ["SEMANAL", "MENSAL", "TRIMESTRAL", "SEMESTRAL", "ANUAL"] {
            assert_eq!(Periodicity::parse(name).unwrap().as_str(), name);
        }
        assert_eq!(Periodicity::parse("mensal"), Err(RecurrenceRejection::UnknownPeriodicity));
        assert_eq!(Periodicity::parse("DIARIA"), Err(RecurrenceRejection::UnknownPeriodicity));
        for name in ["NAO_PERMITE", "PERMITE_3R_7D"] {
            assert_eq!(RetryPolicy::parse(name).unwrap().as_str(), name);
        }
        assert_eq!(RetryPolicy::parse("PERMITE_3R"), Err(RecurrenceRejection::UnknownRetryPolicy));
    }

    #[test]
    fn months_keep_the_first_dates_day_across_month_ends_and_leap_years() {
        let monthly = schedule(d(2028, 1, 31), Periodicity::Monthly);
        let starts: Vec<_> = (0..5).map(|n| monthly.cycle_start(n).unwrap()).collect();
        assert_eq!(starts, [d(2028, 1, 31), d(2028, 2, 29), d(2028, 3, 31), d(2028, 4, 30), d(2028, 5, 31)]);
        let quarterly = schedule(d(2026, 11, 30), Periodicity::Quarterly);
        assert_eq!(quarterly.cycle_start(1), Some(d(2027, 2, 28)));
        assert_eq!(quarterly.cycle_start(2), Some(d(2027, 5, 30)));
        let half = schedule(d(2026, 8, 31), Periodicity::HalfYearly);
        assert_eq!(half.cycle_start(1), Some(d(2027, 2, 28)));
        assert_eq!(half.cycle_start(2), Some(d(2027, 8, 31)));
        let yearly = schedule(d(2028, 2, 29), Periodicity::Yearly);
        assert_eq!(yearly.cycle_start(1), Some(d(2029, 2, 28)));
        assert_eq!(yearly.cycle_start(4), Some(d(2032, 2, 29)));
        let weekly = schedule(d(2026, 12, 28), Periodicity::Weekly);
        assert_eq!(weekly.cycle_start(1), Some(d(2027, 1, 4)));
    }

    #[test]
    fn a_last_date_ends_the_cycles_and_is_never_before_the_first() {
        let s = Schedule::new(d(2027, 1, 10), Periodicity::Monthly, Some(d(2027, 3, 10))).unwrap();
        assert_eq!(s.cycle_start(2), Some(d(2027, 3, 10)), "a cycle may start on the last date");
        assert_eq!(s.cycle_start(3), None);
        assert_eq!(s.cycle_of(d(2027, 3, 10)), Ok(2));
        assert_eq!(s.cycle_of(d(2027, 3, 11)), Err(RecurrenceRejection::AfterLastDate));
        assert_eq!(s.cycle_of(d(2027, 1, 9)), Err(RecurrenceRejection::BeforeFirstCycle));
        assert_eq!(
            Schedule::new(d(2027, 1, 10), Periodicity::Monthly, Some(d(2027, 1, 9))),
            Err(RecurrenceRejection::EndsBeforeStart)
        );
        assert!(Schedule::new(d(2027, 1, 10), Periodicity::Monthly, Some(d(2027, 1, 10))).is_ok());
        assert_eq!(schedule(d(2027, 1, 1), Periodicity::Weekly).cycle_start(CYCLES_MAX + 1), None);
    }

    #[test]
    fn every_date_falls_in_the_last_cycle_that_starts_on_or_before_it() {
        use proptest::prelude::*;
        let every = prop::sample::select(vec![
            Periodicity::Weekly,
            Periodicity::Monthly,
            Periodicity::Quarterly,
            Periodicity::HalfYearly,
            Periodicity::Yearly,
        ]);
        proptest!(ProptestConfig::with_cases(500), |(every in every, start_day in 0i64..3_000, offset in 0i64..4_000)| {
            let start = d(2024, 1, 1) + Duration::days(start_day);
            let s = schedule(start, every);
            let date = start + Duration::days(offset);
            let n = s.cycle_of(date).unwrap();
            prop_assert!(s.cycle_start(n).unwrap() <= date);
            prop_assert!(s.cycle_start(n + 1).unwrap() > date);
            prop_assert_eq!(s.cycle_of(s.cycle_start(n).unwrap()), Ok(n));
        });
    }

    #[test]
    fn a_charge_is_sent_two_to_ten_days_before_it_is_due() {
        let due = d(2027, 3, 15);
        assert_eq!(check_send_window(d(2027, 3, 14), due), Err(RecurrenceRejection::OutsideSendWindow(1)));
        assert_eq!(check_send_window(d(2027, 3, 13), due), Ok(()));
        assert_eq!(check_send_window(d(2027, 3, 5), due), Ok(()));
        assert_eq!(check_send_window(d(2027, 3, 4), due), Err(RecurrenceRejection::OutsideSendWindow(11)));
        assert_eq!(check_send_window(d(2027, 3, 16), due), Err(RecurrenceRejection::OutsideSendWindow(-1)));
    }

    #[test]
    fn a_due_date_moves_to_the_next_business_day_only_when_asked() {
        // Saturday 6 March 2027 -> Monday 8 March; Carnival 2027 is 8 and 9 February.
        assert_eq!(effective_due_date(d(2027, 3, 6), true), d(2027, 3, 8));
        assert_eq!(effective_due_date(d(2027, 3, 6), false), d(2027, 3, 6));
        assert_eq!(effective_due_date(d(2027, 2, 8), true), d(2027, 2, 10));
        assert_eq!(effective_due_date(d(2027, 3, 10), true), d(2027, 3, 10), "a business day stays");
    }

    #[test]
    fn amounts_keep_to_the_fixed_value_or_the_minimum_and_the_payers_maximum() {
        let fixed = AmountRule::Fixed(money("99.90"));
        assert_eq!(check_amount(fixed, money("99.90")), Ok(()));
        assert_eq!(
            check_amount(fixed, money("99.91")),
            Err(RecurrenceRejection::NotTheFixedValue(money("99.90")))
        );
        let min = AmountRule::Variable { minimum: Some(money("10.00")) };
        assert_eq!(check_amount(min, money("10.00")), Ok(()));
        assert_eq!(check_amount(min, money("9.99")), Err(RecurrenceRejection::BelowMinimum(money("10.00"))));
        assert_eq!(check_amount(AmountRule::Variable { minimum: None }, money("0.01")), Ok(()));
        assert!(within_payer_maximum(Some(money("150.00")), money("150.00")));
        assert!(!within_payer_maximum(Some(money("150.00")), money("150.01")));
        assert!(within_payer_maximum(None, money("1000000.00")));
    }

    #[test]
    fn retries_are_three_on_distinct_dates_within_seven_days_and_only_where_allowed() {
        let due = d(2027, 3, 15);
        let allowed = RetryPolicy::ThreeWithinSevenDays;
        let today = d(2027, 3, 16);
        assert_eq!(
            check_retry(RetryPolicy::NotAllowed, due, &[], d(2027, 3, 17), today),
            Err(RecurrenceRejection::RetriesNotAllowed)
        );
        assert_eq!(check_retry(allowed, due, &[], d(2027, 3, 16), today), Ok(()), "the day after");
        assert_eq!(check_retry(allowed, due, &[], d(2027, 3, 22), today), Ok(()), "the seventh day");
        assert_eq!(
            check_retry(allowed, due, &[], d(2027, 3, 23), today),
            Err(RecurrenceRejection::RetryOutsideWindow)
        );
        assert_eq!(check_retry(allowed, due, &[], due, today), Err(RecurrenceRejection::RetryOutsideWindow));
        assert_eq!(
            check_retry(allowed, due, &[], d(2027, 3, 16), d(2027, 3, 17)),
            Err(RecurrenceRejection::RetryInThePast)
        );
        let two = [d(2027, 3, 16), d(2027, 3, 18)];
        assert_eq!(
            check_retry(allowed, due, &two, d(2027, 3, 18), today),
            Err(RecurrenceRejection::RetrySameDate)
        );
        assert_eq!(check_retry(allowed, due, &two, d(2027, 3, 20), today), Ok(()), "the third");
        let three = [d(2027, 3, 16), d(2027, 3, 18), d(2027, 3, 20)];
        assert_eq!(
            check_retry(allowed, due, &three, d(2027, 3, 21), today),
            Err(RecurrenceRejection::TooManyRetries)
        );
    }
}
