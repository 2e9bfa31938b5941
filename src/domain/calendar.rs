//! Brazil's banking calendar: which days are business days.
//!
//! A business day is a weekday that is not a national bank holiday. The holidays are the
//! national ones that close banks everywhere in Brazil: New Year (1 January), Carnival
//! Monday and Tuesday (48 and 47 days before Easter), Good Friday, Tiradentes (21 April),
//! Labour Day (1 May), Corpus Christi (60 days after Easter), Independence (7 September),
//! Our Lady Aparecida (12 October), All Souls (2 November), the Republic (15 November), Black
//! Consciousness (20 November, a national holiday from 2024) and Christmas (25 December).
//! State and city holidays are not counted: a charge is priced the same wherever its
//! payer is.
//!
//! Pure: dates in, answers out. Easter is computed (the Gregorian computus), so the
//! calendar holds for any year.

use chrono::{Datelike, Duration, NaiveDate, Weekday};

/// Easter Sunday of `year` (the anonymous Gregorian algorithm).
pub fn easter(year: i32) -> Option<NaiveDate> {
    let a = year.rem_euclid(19);
    let b = year.div_euclid(100);
    let c = year.rem_euclid(100);
    let d = b / 4;
    let e = b % 4;
    let f = (b + 8) / 25;
    let g = (b - f + 1) / 3;
    let h = (19 * a + b - d - g + 15).rem_euclid(30);
    let i = c / 4;
    let k = c % 4;
    let l = (32 + 2 * e + 2 * i - h - k).rem_euclid(7);
    let m = (a + 11 * h + 22 * l) / 451;
    let month = (h + l - 7 * m + 114) / 31;
    let day = (h + l - 7 * m + 114) % 31 + 1;
    NaiveDate::from_ymd_opt(year, u32::try_from(month).ok()?, u32::try_from(day).ok()?)
}

/// Whether `date` is a national bank holiday.
pub fn is_holiday(date: NaiveDate) -> bool {
    let fixed = matches!(
        (date.month(), date.day()),
        (1, 1) | (4, 21) | (5, 1) | (9, 7) | (10, 12) | (11, 2) | (11, 15) | (12, 25)
    ) || (date.month() == 11 && date.day() == 20 && date.year() >= 2024);
    if fixed {
        return true;
    }
    let Some(easter) = easter(date.year()) else { return false };
    let from_easter = (date - easter).num_days();
    matches!(from_easter, -48 | -47 | -2 | 60)
}

/// Whether banks open on `date`.
pub fn is_business_day(date: NaiveDate) -> bool {
    !matches!(date.weekday(), Weekday::Sat | Weekday::Sun) && !is_holiday(date)
}

/// `date` when it is a business day, else the next one.
pub fn next_business_day(date: NaiveDate) -> NaiveDate {
    let mut day = date;
    // At most a few days: a weekend next to a holiday or Carnival.
    while !is_business_day(day) {
        day += Duration::days(1);
    }
    day
}

/// Business days in `(from, to]`; zero when `to <= from`.
pub fn business_days_between(from: NaiveDate, to: NaiveDate) -> i64 {
    let mut count = 0;
    let mut day = from;
    while day < to {
        day += Duration::days(1);
        if is_business_day(day) {
            count += 1;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap()
    }

    #[test]
    fn easter_falls_on_its_known_dates() {
        for (year, month, day) in
            [(2024, 3, 31), (2025, 4, 20), (2026, 4, 5), (2027, 3, 28), (2000, 4, 23), (2038, 4, 25)]
        {
            assert_eq!(easter(year), Some(d(year, month, day)), "{year}");
        }
    }

    #[test]
    fn the_national_holidays_of_2026_are_holidays_and_their_neighbours_are_not() {
        let holidays = [
            d(2026, 1, 1),
            d(2026, 2, 16), // Carnival Monday
            d(2026, 2, 17), // Carnival Tuesday
            d(2026, 4, 3),  // Good Friday
            d(2026, 4, 21),
            d(2026, 5, 1),
            d(2026, 6, 4), // Corpus Christi
            d(2026, 9, 7),
            d(2026, 10, 12),
            d(2026, 11, 2),
            d(2026, 11, 15),
            d(2026, 11, 20),
            d(2026, 12, 25),
        ];
        for h in holidays {
            assert!(is_holiday(h), "{h}");
            assert!(!is_business_day(h), "{h}");
        }
        for plain in [d(2026, 2, 18), d(2026, 4, 2), d(2026, 6, 5), d(2026, 11, 19), d(2026, 12, 24)] {
            assert!(!is_holiday(plain), "{plain}");
        }
        assert!(!is_holiday(d(2023, 11, 20)), "not yet a national holiday");
    }

    #[test]
    fn weekends_and_holidays_move_to_the_next_business_day() {
        assert_eq!(next_business_day(d(2026, 11, 23)), d(2026, 11, 23), "a Monday");
        assert_eq!(next_business_day(d(2026, 11, 21)), d(2026, 11, 23), "a Saturday");
        // Friday 20 November is a holiday: the weekend follows.
        assert_eq!(next_business_day(d(2026, 11, 20)), d(2026, 11, 23));
        // Carnival: Saturday 14 February 2026 moves past Monday and Tuesday to Wednesday.
        assert_eq!(next_business_day(d(2026, 2, 14)), d(2026, 2, 18));
    }

    #[test]
    fn business_days_are_counted_after_the_first_date_up_to_the_second() {
        // Thursday 19 to Monday 23 November 2026: Friday is a holiday, then the weekend.
        assert_eq!(business_days_between(d(2026, 11, 19), d(2026, 11, 23)), 1);
        assert_eq!(business_days_between(d(2026, 11, 23), d(2026, 11, 27)), 4);
        assert_eq!(business_days_between(d(2026, 11, 23), d(2026, 11, 23)), 0);
        assert_eq!(business_days_between(d(2026, 11, 27), d(2026, 11, 23)), 0);
    }
}
