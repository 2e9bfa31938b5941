//! Sandbox scenarios (`X-Sandbox-Scenario`, interface.md "Sandbox scenarios").

use serde::{Deserialize, Serialize};

use super::transaction::ErrorCode;

/// Milliseconds a `DELAY_<ms>` scenario may ask for.
pub const SCENARIO_DELAY_MS_MAX: u64 = 600_000;

/// Scenarios of the cash-out family (cash-out, QR cash-out, `/dict/pix`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value")]
pub enum PayoutScenario {
    Confirm,
    Reject(ErrorCode),
    Delay(u64),
    Stuck,
    ProviderDown,
}

pub const PAYOUT_SCENARIOS: &str = "CONFIRM, TAX_ID_MISMATCH, INVALID_TAX_ID, BLOCKED_ACCOUNT, \
ACCOUNT_CLOSED, ORDER_REJECTED, PAYMENT_EXPIRED, SETTLEMENT_TIMEOUT, DELAY_<ms>, STUCK, PROVIDER_DOWN";

impl PayoutScenario {
    pub fn parse(text: &str) -> Option<PayoutScenario> {
        use ErrorCode as E;
        Some(match text {
            "CONFIRM" => PayoutScenario::Confirm,
            "TAX_ID_MISMATCH" => PayoutScenario::Reject(E::TaxIdMismatch),
            "INVALID_TAX_ID" => PayoutScenario::Reject(E::InvalidTaxId),
            "BLOCKED_ACCOUNT" => PayoutScenario::Reject(E::BlockedAccount),
            "ACCOUNT_CLOSED" => PayoutScenario::Reject(E::AccountClosed),
            "ORDER_REJECTED" => PayoutScenario::Reject(E::OrderRejected),
            "PAYMENT_EXPIRED" => PayoutScenario::Reject(E::PaymentExpired),
            "SETTLEMENT_TIMEOUT" => PayoutScenario::Reject(E::SettlementTimeout),
            "STUCK" => PayoutScenario::Stuck,
            "PROVIDER_DOWN" => PayoutScenario::ProviderDown,
            other => {
                let ms = other.strip_prefix("DELAY_")?;
                if ms.is_empty() || !ms.bytes().all(|b| b.is_ascii_digit()) || ms.len() > 9 {
                    return None;
                }
                let ms: u64 = ms.parse().ok()?;
                (ms <= SCENARIO_DELAY_MS_MAX).then_some(PayoutScenario::Delay(ms))?
            }
        })
    }
}

/// Scenarios of a cash-in charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeScenario {
    /// Paid right after creation.
    PayNow,
    /// Expires right after creation.
    ExpireNow,
    /// The provider's minimum expiration is this many seconds.
    ProviderExpirationMin(u32),
}

pub const CHARGE_SCENARIOS: &str = "PAY_NOW, EXPIRE_NOW, PROVIDER_EXPIRATION_MIN_<seconds>";

impl ChargeScenario {
    pub fn parse(text: &str) -> Option<ChargeScenario> {
        match text {
            "PAY_NOW" => Some(ChargeScenario::PayNow),
            "EXPIRE_NOW" => Some(ChargeScenario::ExpireNow),
            other => {
                let s = other.strip_prefix("PROVIDER_EXPIRATION_MIN_")?;
                if s.is_empty() || s.len() > 7 || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                s.parse().ok().map(ChargeScenario::ProviderExpirationMin)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charge_scenarios_parse() {
        assert_eq!(ChargeScenario::parse("PAY_NOW"), Some(ChargeScenario::PayNow));
        assert_eq!(ChargeScenario::parse("EXPIRE_NOW"), Some(ChargeScenario::ExpireNow));
        assert_eq!(
            ChargeScenario::parse("PROVIDER_EXPIRATION_MIN_3600"),
            Some(ChargeScenario::ProviderExpirationMin(3600))
        );
        assert_eq!(ChargeScenario::parse("PROVIDER_EXPIRATION_MIN_"), None);
        assert_eq!(ChargeScenario::parse("CONFIRM"), None);
    }

    #[test]
    fn every_documented_value_parses() {
        for v in PAYOUT_SCENARIOS.split(", ") {
            let v = v.replace("<ms>", "250");
            assert!(PayoutScenario::parse(&v).is_some(), "{v}");
        }
        assert_eq!(PayoutScenario::parse("DELAY_0"), Some(PayoutScenario::Delay(0)));
        assert_eq!(PayoutScenario::parse("DELAY_600001"), None);
        assert_eq!(PayoutScenario::parse("DELAY_"), None);
        assert_eq!(PayoutScenario::parse("DELAY_-1"), None);
        assert_eq!(PayoutScenario::parse("confirm"), None);
        assert_eq!(PayoutScenario::parse("PAY_NOW"), None);
    }
}
