//! A person's record at the tax authority (Receita Federal's CPF register, as its registry
//! service answers it: a name, a social name, and a registration situation) and what the
//! gateway does with an account holder's name and CPF against it (docs/decisions.md
//! "The holder's name against the tax authority's record").
//!
//! - A holder whose CPF is **suspended, cancelled (by multiplicity or by the authority),
//!   null, or of a deceased holder** may not have keys in the DICT: registration is refused,
//!   and the periodic check removes the keys it has (reason `RFB_VALIDATION`). A CPF
//!   *pending regularisation* is a regular person with a missing tax return: it keeps its
//!   keys.
//! - A holder whose name is not the record's (nor its social name) is renamed to the
//!   record's name, and the DICT's entries follow. Names are compared as the register
//!   writes them: without accents, case or repeated spaces.

use super::brcode::fold_ascii;

/// A CPF's registration situation, by the register's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Situation {
    /// `0`
    Regular,
    /// `2`
    Suspended,
    /// `3`
    HolderDeceased,
    /// `4`: a tax return is missing.
    PendingRegularisation,
    /// `5`
    CancelledByMultiplicity,
    /// `8`
    Null,
    /// `9`
    CancelledByTheAuthority,
}

impl Situation {
    /// The register's code (`situacao.codigo`); `None` for a code it does not define.
    pub fn of_code(code: &str) -> Option<Situation> {
        Some(match code.trim() {
            "0" => Situation::Regular,
            "2" => Situation::Suspended,
            "3" => Situation::HolderDeceased,
            "4" => Situation::PendingRegularisation,
            "5" => Situation::CancelledByMultiplicity,
            "8" => Situation::Null,
            "9" => Situation::CancelledByTheAuthority,
            _ => return None,
        })
    }

    pub fn code(self) -> &'static str {
        match self {
            Situation::Regular => "0",
            Situation::Suspended => "2",
            Situation::HolderDeceased => "3",
            Situation::PendingRegularisation => "4",
            Situation::CancelledByMultiplicity => "5",
            Situation::Null => "8",
            Situation::CancelledByTheAuthority => "9",
        }
    }

    /// The words the gateway's logs and answers use.
    pub fn name(self) -> &'static str {
        match self {
            Situation::Regular => "regular",
            Situation::Suspended => "suspended",
            Situation::HolderDeceased => "of a deceased holder",
            Situation::PendingRegularisation => "pending regularisation",
            Situation::CancelledByMultiplicity => "cancelled by multiplicity",
            Situation::Null => "null",
            Situation::CancelledByTheAuthority => "cancelled by the tax authority",
        }
    }

    /// Whether a holder in this situation may have keys in the DICT.
    pub fn may_hold_keys(self) -> bool {
        matches!(self, Situation::Regular | Situation::PendingRegularisation)
    }
}

/// What the register says of a CPF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaxRecord {
    pub name: String,
    pub social_name: Option<String>,
    pub situation: Situation,
}

/// What the gateway does with an account holder, given the record of its CPF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The name is the record's and the CPF may hold keys: nothing to do.
    Matches,
    /// The CPF may hold keys, but the name is not the record's: the holder takes this name.
    Rename(String),
    /// The CPF may not hold keys.
    Irregular(Situation),
}

/// A name as the register compares it: ASCII without accents, upper case, one space
/// between words.
pub fn comparable(name: &str) -> String {
    fold_ascii(name).to_ascii_uppercase().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// See the module doc.
pub fn check(holder_name: &str, record: &TaxRecord) -> Check {
    if !record.situation.may_hold_keys() {
        return Check::Irregular(record.situation);
    }
    let ours = comparable(holder_name);
    let known = std::iter::once(&record.name).chain(record.social_name.as_ref());
    if known.map(|n| comparable(n)).any(|n| n == ours) {
        Check::Matches
    } else {
        Check::Rename(record.name.trim().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, social: Option<&str>, code: &str) -> TaxRecord {
        TaxRecord {
            name: name.into(),
            social_name: social.map(str::to_owned),
            situation: Situation::of_code(code).unwrap(),
        }
    }

    #[test]
    fn every_code_of_the_register_reads_back_and_no_other() {
        for code in ["0", "2", "3", "4", "5", "8", "9"] {
            assert_eq!(Situation::of_code(code).unwrap().code(), code);
        }
        for other in ["1", "6", "7", "10", "", "REGULAR", "-0"] {
            assert_eq!(Situation::of_code(other), None, "{other:?}");
        }
        assert_eq!(Situation::of_code(" 3 "), Some(Situation::HolderDeceased));
    }

    #[test]
    fn only_a_regular_cpf_or_one_pending_a_tax_return_may_hold_keys() {
        let may: Vec<&str> = ["0", "2", "3", "4", "5", "8", "9"]
            .into_iter()
            .filter(|c| Situation::of_code(c).unwrap().may_hold_keys())
            .collect();
        assert_eq!(may, ["0", "4"]);
    }

    #[test]
    fn a_name_matches_its_record_without_accents_case_or_extra_spaces_and_its_social_name_too() {
        let r = record("JOAO DA SILVA", Some("JOANA DA SILVA"), "0");
        for same in ["João da Silva", "JOAO DA SILVA", "  joão   da silva ", "Joana da Silva"] {
            assert_eq!(check(same, &r), Check::Matches, "{same:?}");
        }
        assert_eq!(check("João Silva", &r), Check::Rename("JOAO DA SILVA".into()));
        assert_eq!(check("João da Silva", &record("JOAO DA SILVA", None, "4")), Check::Matches);
    }

    #[test]
    fn an_irregular_cpf_is_irregular_whatever_the_name() {
        for code in ["2", "3", "5", "8", "9"] {
            let r = record("ANA", None, code);
            assert_eq!(check("Ana", &r), Check::Irregular(r.situation), "{code}");
            assert_eq!(check("Bia", &r), Check::Irregular(r.situation), "{code}");
        }
    }
}
