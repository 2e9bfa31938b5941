//! Fees: a fixed part plus a percent of the amount, rounded half away from zero to cents
//! (interface.md "Balances, fees and limits").

use rust_decimal::{Decimal, RoundingStrategy};

use super::account::FeeRule;
use super::money::Money;

impl FeeRule {
    /// The fee on `value`. Saturates at [`super::money::MONEY_MAX`] (unreachable with sane
    /// settings, and never a panic).
    pub fn fee_for(&self, value: Money) -> Money {
        let percent_part = (value.as_decimal() * self.percent.as_decimal() / Decimal::ONE_HUNDRED)
            .round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero);
        Money::try_from(percent_part)
            .ok()
            .and_then(|p| p.checked_add(self.fixed))
            .unwrap_or(Money::try_from(super::money::MONEY_MAX).unwrap_or(Money::ZERO))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::money::Percent;

    fn rule(fixed: &str, percent: &str) -> FeeRule {
        FeeRule { fixed: Money::parse(fixed).unwrap(), percent: Percent::parse(percent).unwrap() }
    }

    #[test]
    fn fees_round_half_away_from_zero_to_cents() {
        let m = |s| Money::parse(s).unwrap();
        assert_eq!(rule("0", "0").fee_for(m("100")), m("0"));
        assert_eq!(rule("0.50", "0").fee_for(m("100")), m("0.50"));
        assert_eq!(rule("0", "1").fee_for(m("10.50")), m("0.11")); // 0.105 -> 0.11
        assert_eq!(rule("0", "1").fee_for(m("10.49")), m("0.10")); // 0.1049 -> 0.10
        assert_eq!(rule("0.10", "2.5").fee_for(m("0.01")), m("0.10")); // 0.00025 -> 0.00
        assert_eq!(rule("1", "100").fee_for(m("5")), m("6"));
    }
}
