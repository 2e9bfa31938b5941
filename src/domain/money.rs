//! Money: exact BRL amounts.
//!
//! An amount is a `rust_decimal::Decimal` from the JSON text to storage; binary floating
//! point never touches it. Invariants of [`Money`]: not negative, at most
//! [`AMOUNT_DECIMALS_MAX`] decimals *as written by the client* (`10.50` is fine, `10.005`
//! and `10.500` are not), and not above [`MONEY_MAX`].

use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// Decimals a client may write in an amount.
pub const AMOUNT_DECIMALS_MAX: u32 = 2;

/// The largest amount the gateway represents (one trillion reais): far above any limit,
/// small enough that sums of many amounts never overflow a `Decimal`.
pub const MONEY_MAX: Decimal = Decimal::from_parts(3_567_587_328, 232, 0, false, 0); // 1e12

/// Characters of an amount's text; longer texts are refused before parsing.
pub const AMOUNT_TEXT_LEN_MAX: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("must be a decimal number")]
    NotANumber,
    #[error("must not be negative")]
    Negative,
    #[error("must have at most 2 decimal places")]
    TooManyDecimals,
    #[error("is too large")]
    TooLarge,
}

/// A non-negative BRL amount with at most two decimals.
///
/// It serializes as a string with exactly two decimals (`"10.50"`), in storage and in
/// responses that write amounts as strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(try_from = "Decimal")]
pub struct Money(Decimal);

impl Serialize for Money {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_cents_string())
    }
}

impl Money {
    pub const ZERO: Money = Money(Decimal::ZERO);

    /// Parses the text of an amount exactly as the client wrote it (JSON number text or a
    /// decimal string). Exponent notation is accepted (`1e2`), its decimals counted after
    /// expansion.
    pub fn parse(text: &str) -> Result<Money, MoneyError> {
        let text = text.trim();
        if text.is_empty() || text.len() > AMOUNT_TEXT_LEN_MAX {
            return Err(MoneyError::NotANumber);
        }
        let value = if text.contains(['e', 'E']) {
            Decimal::from_scientific(text).map_err(|_| MoneyError::NotANumber)?
        } else {
            if !text.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'-' || b == b'+') {
                return Err(MoneyError::NotANumber);
            }
            Decimal::from_str(text).map_err(|_| MoneyError::NotANumber)?
        };
        Money::try_from(value)
    }

    /// A positive amount written as a string with exactly two decimals (`"10.50"`), as
    /// family B writes `valor`: `"10.5"`, `"10"` and `"0.00"` are refused.
    pub fn parse_two_places(text: &str) -> Option<Money> {
        let (int, dec) = text.split_once('.')?;
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        let well_formed = !int.is_empty() && int.len() <= 13 && digits(int) && dec.len() == 2 && digits(dec);
        Money::parse(text).ok().filter(|m| well_formed && !m.is_zero())
    }

    pub fn as_decimal(self) -> Decimal {
        self.0
    }

    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }

    pub fn checked_add(self, other: Money) -> Option<Money> {
        Money::try_from(self.0.checked_add(other.0)?).ok()
    }

    pub fn checked_sub(self, other: Money) -> Option<Money> {
        Money::try_from(self.0.checked_sub(other.0)?).ok()
    }

    /// The amount in whole centavos (exact: an amount has at most two decimals).
    pub fn cents(self) -> u64 {
        let scaled = self.0 * Decimal::ONE_HUNDRED;
        u64::try_from(scaled.trunc()).unwrap_or(u64::MAX)
    }

    /// An amount of `cents` centavos (`None` above [`MONEY_MAX`]).
    pub fn from_cents(cents: u64) -> Option<Money> {
        Money::try_from(Decimal::from_i128_with_scale(i128::from(cents), 2)).ok()
    }

    /// An amount of `cents` centavos, for constants (a `u32` is far below [`MONEY_MAX`]).
    pub const fn from_cents_const(cents: u32) -> Money {
        Money(Decimal::from_parts(cents, 0, 0, false, 2))
    }

    /// The amount with exactly two decimals, as responses write it (`10.5` -> `10.50`).
    pub fn to_cents_string(self) -> String {
        format!("{:.2}", self.0)
    }
}

impl Default for Money {
    fn default() -> Self {
        Money::ZERO
    }
}

impl TryFrom<Decimal> for Money {
    type Error = MoneyError;

    fn try_from(value: Decimal) -> Result<Self, Self::Error> {
        if value.is_sign_negative() && !value.is_zero() {
            return Err(MoneyError::Negative);
        }
        if value.scale() > AMOUNT_DECIMALS_MAX {
            return Err(MoneyError::TooManyDecimals);
        }
        if value > MONEY_MAX {
            return Err(MoneyError::TooLarge);
        }
        Ok(Money(value.abs()))
    }
}

impl From<Money> for Decimal {
    fn from(m: Money) -> Decimal {
        m.0
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2}", self.0)
    }
}

/// A percentage from 0 to 100 with at most [`PERCENT_DECIMALS_MAX`] decimals (fees).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "Decimal", into = "Decimal")]
pub struct Percent(Decimal);

pub const PERCENT_DECIMALS_MAX: u32 = 4;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PercentError {
    #[error("must be a decimal number")]
    NotANumber,
    #[error("must be between 0 and 100")]
    OutOfRange,
    #[error("must have at most 4 decimal places")]
    TooManyDecimals,
}

impl Percent {
    pub const ZERO: Percent = Percent(Decimal::ZERO);

    pub fn parse(text: &str) -> Result<Percent, PercentError> {
        let text = text.trim();
        if text.is_empty() || text.len() > AMOUNT_TEXT_LEN_MAX {
            return Err(PercentError::NotANumber);
        }
        let value = Decimal::from_str(text).map_err(|_| PercentError::NotANumber)?;
        Percent::try_from(value)
    }

    pub fn as_decimal(self) -> Decimal {
        self.0
    }
}

impl Default for Percent {
    fn default() -> Self {
        Percent::ZERO
    }
}

impl TryFrom<Decimal> for Percent {
    type Error = PercentError;

    fn try_from(value: Decimal) -> Result<Self, Self::Error> {
        if value.is_sign_negative() && !value.is_zero() || value > Decimal::ONE_HUNDRED {
            return Err(PercentError::OutOfRange);
        }
        if value.scale() > PERCENT_DECIMALS_MAX {
            return Err(PercentError::TooManyDecimals);
        }
        Ok(Percent(value.abs()))
    }
}

impl From<Percent> for Decimal {
    fn from(p: Percent) -> Decimal {
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_amount_round_trips_through_whole_centavos_up_to_the_maximum() {
        for text in ["0", "0.01", "0.1", "10.5", "10.50", "7", "999999999999.99", "1000000000000"] {
            let m = Money::parse(text).unwrap();
            assert_eq!(Money::from_cents(m.cents()), Some(m), "{text}");
        }
        assert_eq!(Money::parse("10.5").unwrap().cents(), 1050);
        assert_eq!(Money::from_cents(100_000_000_000_000), Money::try_from(MONEY_MAX).ok());
        assert_eq!(Money::from_cents(100_000_000_000_001), None, "above the maximum");
    }

    #[test]
    fn two_decimals_as_written_are_accepted() {
        assert_eq!(Money::parse("10.50").map(Money::to_cents_string), Ok("10.50".into()));
        assert_eq!(Money::parse("0.01").map(Money::to_cents_string), Ok("0.01".into()));
        assert_eq!(Money::parse("7").map(Money::to_cents_string), Ok("7.00".into()));
    }

    #[test]
    fn a_value_with_three_decimals_is_rejected_even_when_the_third_is_zero() {
        assert_eq!(Money::parse("10.005"), Err(MoneyError::TooManyDecimals));
        assert_eq!(Money::parse("0.009"), Err(MoneyError::TooManyDecimals));
        assert_eq!(Money::parse("10.500"), Err(MoneyError::TooManyDecimals));
    }

    #[test]
    fn negative_and_garbage_are_rejected() {
        assert_eq!(Money::parse("-1"), Err(MoneyError::Negative));
        assert_eq!(Money::parse("abc"), Err(MoneyError::NotANumber));
        assert_eq!(Money::parse(""), Err(MoneyError::NotANumber));
        assert_eq!(Money::parse("1_0"), Err(MoneyError::NotANumber));
        assert_eq!(Money::parse(&"9".repeat(40)), Err(MoneyError::NotANumber));
    }

    #[test]
    fn negative_zero_is_zero() {
        assert_eq!(Money::parse("-0"), Ok(Money::ZERO));
    }

    #[test]
    fn exponent_notation_counts_decimals_after_expansion() {
        assert_eq!(Money::parse("1e2").map(Money::to_cents_string), Ok("100.00".into()));
        assert_eq!(Money::parse("1.5E1").map(Money::to_cents_string), Ok("15.00".into()));
        assert_eq!(Money::parse("1e-3"), Err(MoneyError::TooManyDecimals));
    }

    #[test]
    fn the_maximum_is_inclusive() {
        assert_eq!(Money::parse("1000000000000").map(Money::as_decimal), Ok(MONEY_MAX));
        assert_eq!(Money::parse("1000000000000.01"), Err(MoneyError::TooLarge));
    }

    #[test]
    fn arithmetic_is_checked() {
        let a = Money::parse("10.10").unwrap_or(Money::ZERO);
        let b = Money::parse("0.20").unwrap_or(Money::ZERO);
        assert_eq!(a.checked_add(b).map(Money::to_cents_string), Some("10.30".into()));
        assert_eq!(b.checked_sub(a), None);
        let max = Money::try_from(MONEY_MAX).unwrap_or(Money::ZERO);
        assert_eq!(max.checked_add(b), None);
    }

    #[test]
    fn two_place_strings_are_exact() {
        assert_eq!(Money::parse_two_places("10.50").map(Money::to_cents_string), Some("10.50".into()));
        for bad in ["10.5", "10", "0.00", "-1.00", "1.000", ".50", "1e2.00", "１.00"] {
            assert_eq!(Money::parse_two_places(bad), None, "{bad}");
        }
    }

    #[test]
    fn percent_bounds() {
        assert!(Percent::parse("0").is_ok());
        assert!(Percent::parse("100").is_ok());
        assert!(Percent::parse("1.2345").is_ok());
        assert_eq!(Percent::parse("100.01"), Err(PercentError::OutOfRange));
        assert_eq!(Percent::parse("-0.5"), Err(PercentError::OutOfRange));
        assert_eq!(Percent::parse("1.23456"), Err(PercentError::TooManyDecimals));
        assert_eq!(Percent::parse("x"), Err(PercentError::NotANumber));
    }

    #[test]
    fn money_round_trips_through_json_as_a_string() {
        let m = Money::parse("12.30").unwrap_or(Money::ZERO);
        let text = serde_json::to_string(&m).unwrap_or_default();
        assert_eq!(text, "\"12.30\"");
        let back: Result<Money, _> = serde_json::from_str(&text);
        assert_eq!(back.ok(), Some(m));
    }
}
