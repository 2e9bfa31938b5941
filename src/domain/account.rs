//! An account's profile and settings: who it is and the limits and fees that apply to it.
//!
//! The balance and the transactions are not here: they belong to the account actor (the
//! "Money out" work). This module owns the defaults of interface.md "Balances, fees and limits" and the validation
//! of the admin `PATCH` body's values.

use serde::{Deserialize, Serialize};

use super::document::TaxId;
use super::money::{Money, Percent};

/// Characters of an account's name.
pub const ACCOUNT_NAME_LEN_MAX: usize = 100;

/// Bounds of the provider minimum expiration of cash-in charges, in seconds
/// (interface.md "Limits": expirationTime 30 to 604,800).
pub const PROVIDER_MIN_EXPIRATION_SECONDS_MIN: u32 = 30;
pub const PROVIDER_MIN_EXPIRATION_SECONDS_MAX: u32 = 604_800;

/// A trimmed, non-empty account name of at most [`ACCOUNT_NAME_LEN_MAX`] characters with no
/// control characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AccountName(String);

impl AccountName {
    pub fn parse(text: &str) -> Result<AccountName, &'static str> {
        let t = text.trim();
        if t.is_empty() {
            return Err("must not be empty");
        }
        if t.chars().count() > ACCOUNT_NAME_LEN_MAX {
            return Err("must have at most 100 characters");
        }
        if t.chars().any(char::is_control) {
            return Err("must not contain control characters");
        }
        Ok(AccountName(t.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for AccountName {
    type Error = &'static str;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        AccountName::parse(&s)
    }
}

impl From<AccountName> for String {
    fn from(n: AccountName) -> String {
        n.0
    }
}

/// Debit limits (interface.md "Balances, fees and limits"). A value equal to a limit is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub per_transaction: Money,
    pub daily: Money,
    pub nightly: Money,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            per_transaction: Money::try_from(rust_decimal::Decimal::new(100_000, 0)).unwrap_or(Money::ZERO),
            daily: Money::try_from(rust_decimal::Decimal::new(1_000_000, 0)).unwrap_or(Money::ZERO),
            nightly: Money::try_from(rust_decimal::Decimal::new(10_000, 0)).unwrap_or(Money::ZERO),
        }
    }
}

/// A fee: a fixed part plus a percent of the amount (rounded when applied, interface.md "Balances, fees and limits").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct FeeRule {
    pub fixed: Money,
    pub percent: Percent,
}

/// Fees per operation type; all zero by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Fees {
    pub cash_out: FeeRule,
    pub cash_in: FeeRule,
    pub dict_pix: FeeRule,
    pub refund: FeeRule,
}

/// When non-immediate splits of paid charges run (decisions.md "Money in: charges").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "UPPERCASE")]
pub enum SplitFrequency {
    #[default]
    Daily,
    Hourly,
}

impl SplitFrequency {
    pub fn parse(text: &str) -> Option<SplitFrequency> {
        match text {
            "DAILY" => Some(SplitFrequency::Daily),
            "HOURLY" => Some(SplitFrequency::Hourly),
            _ => None,
        }
    }
}

/// The most requests a second an account's own rate limit may allow.
pub const ACCOUNT_RATE_LIMIT_MAX: u32 = 1_000_000;

/// Everything an operator may change about an account with `PATCH /admin/accounts/{id}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountSettings {
    pub limits: Limits,
    pub fees: Fees,
    pub split_frequency: SplitFrequency,
    pub provider_min_expiration_seconds: u32,
    /// Requests a second this account may make (1 to [`ACCOUNT_RATE_LIMIT_MAX`], with bursts
    /// of as many); `None`: the server's `--account-rate-limit`, if any. Absent from records
    /// written before it existed, and from those of accounts that never had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<u32>,
}

impl Default for AccountSettings {
    fn default() -> Self {
        AccountSettings {
            limits: Limits::default(),
            fees: Fees::default(),
            split_frequency: SplitFrequency::Daily,
            provider_min_expiration_seconds: PROVIDER_MIN_EXPIRATION_SECONDS_MIN,
            rate_limit: None,
        }
    }
}

/// Who an account is. Immutable after creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountProfile {
    pub name: AccountName,
    pub document: TaxId,
    pub sandbox: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_limits_are_those_of_the_decisions() {
        let l = Limits::default();
        assert_eq!(l.per_transaction.to_cents_string(), "100000.00");
        assert_eq!(l.daily.to_cents_string(), "1000000.00");
        assert_eq!(l.nightly.to_cents_string(), "10000.00");
    }

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(AccountName::parse("  Acme  ").map(|n| n.0), Ok("Acme".into()));
        assert!(AccountName::parse("   ").is_err());
        assert!(AccountName::parse(&"a".repeat(100)).is_ok());
        assert!(AccountName::parse(&"a".repeat(101)).is_err());
        assert!(AccountName::parse("bad\u{0}name").is_err());
        // characters, not bytes, are counted
        assert!(AccountName::parse(&"é".repeat(100)).is_ok());
    }

    #[test]
    fn split_frequency_values() {
        assert_eq!(SplitFrequency::parse("HOURLY"), Some(SplitFrequency::Hourly));
        assert_eq!(SplitFrequency::parse("DAILY"), Some(SplitFrequency::Daily));
        assert_eq!(SplitFrequency::parse("daily"), None);
    }
}
