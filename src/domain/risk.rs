//! The risk rule of a payment to a key of another institution: what the DICT's anti-fraud
//! counters (API 2.12.1, a lookup's `KeyStatistics` and `OwnerStatistics`) say of the payee,
//! and what the gateway does with it (docs/decisions.md "Fraud marks and the risk rule").
//!
//! - **Refuse** when the key or its owner carries a fraud mark of a mule account or a
//!   scammer's account set in the last 12 months: the money would go to an account the
//!   participants found used for fraud. Nothing is debited; the client reads why.
//! - **Flag** (the payment goes, logged and counted) when the key or its owner carries another
//!   fraud mark in the last 12 months (application fraud, other), or infraction reports still
//!   open against it.
//! - **Pass** otherwise, and when the DICT gave no counters.

/// A counter over the DICT's windows: the last 90 days, 12 months, 60 months.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Windowed {
    pub d90: u32,
    pub m12: u32,
    pub m60: u32,
}

/// The anti-fraud counters of a key or of a person.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub application_frauds: Windowed,
    pub mule_accounts: Windowed,
    pub scammer_accounts: Windowed,
    pub other_frauds: Windowed,
    /// Infraction reports neither closed nor cancelled.
    pub open_reports: u32,
}

/// What the DICT said of a payee: its key's counters and its owner's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Signals {
    pub key: Counters,
    pub owner: Counters,
}

/// What the gateway does with a payment to the payee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// The payment goes; the reason is logged and counted.
    Flag(&'static str),
    /// The payment is refused before anything is debited, with this reason.
    Refuse(&'static str),
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Flag(_) => "flag",
            Verdict::Refuse(_) => "refuse",
        }
    }
}

/// See the module doc.
pub fn assess(s: &Signals) -> Verdict {
    let both = [s.key, s.owner];
    if both.iter().any(|c| c.mule_accounts.m12 > 0 || c.scammer_accounts.m12 > 0) {
        return Verdict::Refuse(
            "the payee's key or its owner is marked in the DICT as a mule or scammer's account",
        );
    }
    if both.iter().any(|c| c.application_frauds.m12 > 0 || c.other_frauds.m12 > 0) {
        return Verdict::Flag("the payee's key or its owner carries a fraud mark of the last 12 months");
    }
    if both.iter().any(|c| c.open_reports > 0) {
        return Verdict::Flag("infraction reports are open against the payee's key or its owner");
    }
    Verdict::Pass
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(d90: u32, m12: u32, m60: u32) -> Windowed {
        Windowed { d90, m12, m60 }
    }

    #[test]
    fn a_mule_or_scammer_mark_of_the_year_on_the_key_or_the_owner_refuses() {
        for (key, owner) in [
            (Counters { mule_accounts: w(0, 1, 1), ..Counters::default() }, Counters::default()),
            (Counters::default(), Counters { scammer_accounts: w(1, 1, 1), ..Counters::default() }),
        ] {
            assert!(matches!(assess(&Signals { key, owner }), Verdict::Refuse(_)));
        }
        // Older than a year: a flag at most, not a refusal.
        let old = Counters { mule_accounts: w(0, 0, 3), ..Counters::default() };
        assert_eq!(assess(&Signals { key: old, owner: Counters::default() }), Verdict::Pass);
    }

    #[test]
    fn other_marks_of_the_year_and_open_reports_flag_and_nothing_passes() {
        let app = Counters { application_frauds: w(0, 2, 2), ..Counters::default() };
        assert!(matches!(assess(&Signals { key: Counters::default(), owner: app }), Verdict::Flag(_)));
        let other = Counters { other_frauds: w(0, 1, 1), ..Counters::default() };
        assert!(matches!(assess(&Signals { key: other, owner: Counters::default() }), Verdict::Flag(_)));
        let open = Counters { open_reports: 1, ..Counters::default() };
        assert!(matches!(assess(&Signals { key: open, owner: Counters::default() }), Verdict::Flag(_)));
        assert_eq!(assess(&Signals::default()), Verdict::Pass);
        // A refusal outranks a flag.
        let both = Counters { mule_accounts: w(1, 1, 1), open_reports: 4, ..Counters::default() };
        assert!(matches!(assess(&Signals { key: both, owner: Counters::default() }), Verdict::Refuse(_)));
    }
}
