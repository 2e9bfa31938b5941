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

    /// The half cents, where half-even and half away from zero part: docs/interface.md and
    /// docs/decisions.md both say away from zero.
    #[test]
    fn a_half_cent_always_rounds_up() {
        let m = |s| Money::parse(s).unwrap();
        let half = rule("0", "0.5");
        assert_eq!(half.fee_for(m("1.00")), m("0.01")); // 0.005
        assert_eq!(half.fee_for(m("3.00")), m("0.02")); // 0.015
        assert_eq!(half.fee_for(m("5.00")), m("0.03")); // 0.025: half-even would say 0.02
        assert_eq!(half.fee_for(m("9.00")), m("0.05")); // 0.045: half-even would say 0.04
        assert_eq!(half.fee_for(m("0.99")), m("0.00")); // 0.00495
        assert_eq!(rule("0.01", "0.5").fee_for(m("5.00")), m("0.04"));
    }
}
