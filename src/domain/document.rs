//! Brazilian tax ids: CPF (people, 11 digits) and CNPJ (companies, 14 digits).
//!
//! A [`TaxId`] holds digits only and its check digits are verified at construction, so a
//! value of this type is always a well-formed document (decisions.md §10 "Documents").

use std::fmt;

use serde::{Deserialize, Serialize};

pub const CPF_DIGITS: usize = 11;
pub const CNPJ_DIGITS: usize = 14;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaxIdError {
    #[error("must contain digits only")]
    NotDigits,
    #[error("must have 11 (CPF) or 14 (CNPJ) digits")]
    WrongLength,
    #[error("has invalid check digits")]
    BadCheckDigits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TaxIdKind {
    Cpf,
    Cnpj,
}

/// A CPF or CNPJ whose check digits are valid.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TaxId(String);

impl TaxId {
    pub fn parse(text: &str) -> Result<TaxId, TaxIdError> {
        if !text.bytes().all(|b| b.is_ascii_digit()) || text.is_empty() {
            return Err(TaxIdError::NotDigits);
        }
        let digits: Vec<u32> = text.bytes().map(|b| u32::from(b - b'0')).collect();
        let valid = match digits.len() {
            CPF_DIGITS => cpf_is_valid(&digits),
            CNPJ_DIGITS => cnpj_is_valid(&digits),
            _ => return Err(TaxIdError::WrongLength),
        };
        if valid {
            Ok(TaxId(text.to_owned()))
        } else {
            Err(TaxIdError::BadCheckDigits)
        }
    }

    pub fn kind(&self) -> TaxIdKind {
        if self.0.len() == CPF_DIGITS {
            TaxIdKind::Cpf
        } else {
            TaxIdKind::Cnpj
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The masked form shown to other parties: CPF `***.456.789-**`, CNPJ
    /// `12.345.678/****-**` (decisions.md §2).
    pub fn masked(&self) -> String {
        let d = &self.0;
        match self.kind() {
            TaxIdKind::Cpf => format!("***.{}.{}-**", &d[3..6], &d[6..9]),
            TaxIdKind::Cnpj => format!("{}.{}.{}/****-**", &d[0..2], &d[2..5], &d[5..8]),
        }
    }
}

/// The masked form of a stored document (digits), or `None` if there is none or it is not
/// a valid CPF or CNPJ.
pub fn masked_document(digits: Option<&str>) -> Option<String> {
    digits.and_then(|d| TaxId::parse(d).ok()).map(|t| t.masked())
}

impl TryFrom<String> for TaxId {
    type Error = TaxIdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        TaxId::parse(&s)
    }
}

impl From<TaxId> for String {
    fn from(t: TaxId) -> String {
        t.0
    }
}

impl fmt::Display for TaxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Mod-11 check digit over `digits` weighted by `weights`.
fn check_digit(digits: &[u32], weights: &[u32]) -> u32 {
    let sum: u32 = digits.iter().zip(weights).map(|(d, w)| d * w).sum();
    let rest = sum % 11;
    if rest < 2 {
        0
    } else {
        11 - rest
    }
}

fn cpf_is_valid(d: &[u32]) -> bool {
    // Eleven equal digits pass the arithmetic but are not issued; the Receita rejects them.
    if d.iter().all(|&x| x == d[0]) {
        return false;
    }
    let first = check_digit(&d[..9], &[10, 9, 8, 7, 6, 5, 4, 3, 2]);
    let second = check_digit(&d[..10], &[11, 10, 9, 8, 7, 6, 5, 4, 3, 2]);
    d[9] == first && d[10] == second
}

fn cnpj_is_valid(d: &[u32]) -> bool {
    if d.iter().all(|&x| x == d[0]) {
        return false;
    }
    let first = check_digit(&d[..12], &[5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]);
    let second = check_digit(&d[..13], &[6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]);
    d[12] == first && d[13] == second
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_documents_parse() {
        for ok in ["52998224725", "11144477735", "11222333000181", "45723174000110"] {
            assert!(TaxId::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_wrong_check_digit_is_rejected() {
        assert_eq!(TaxId::parse("52998224724"), Err(TaxIdError::BadCheckDigits));
        assert_eq!(TaxId::parse("11222333000182"), Err(TaxIdError::BadCheckDigits));
    }

    #[test]
    fn repeated_digits_are_rejected() {
        assert_eq!(TaxId::parse("11111111111"), Err(TaxIdError::BadCheckDigits));
        assert_eq!(TaxId::parse("00000000000000"), Err(TaxIdError::BadCheckDigits));
    }

    #[test]
    fn length_and_characters_are_checked() {
        assert_eq!(TaxId::parse("5299822472"), Err(TaxIdError::WrongLength));
        assert_eq!(TaxId::parse("529.982.247-25"), Err(TaxIdError::NotDigits));
        assert_eq!(TaxId::parse(""), Err(TaxIdError::NotDigits));
        assert_eq!(TaxId::parse("１１１"), Err(TaxIdError::NotDigits));
    }

    #[test]
    fn masks_show_the_middle_of_a_cpf_and_the_root_of_a_cnpj() {
        let cpf = TaxId::parse("52998224725").ok();
        assert_eq!(cpf.map(|t| t.masked()), Some("***.982.247-**".into()));
        let cnpj = TaxId::parse("11222333000181").ok();
        assert_eq!(cnpj.map(|t| t.masked()), Some("11.222.333/****-**".into()));
    }
}
