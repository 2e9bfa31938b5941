//! Brazilian tax ids: CPF (people, 11 digits) and CNPJ (companies, 14 characters).
//!
//! A CNPJ is either the numeric one (14 digits) or the alphanumeric one the Receita Federal
//! issues from July 2026 (IN RFB 2.229/2024): twelve characters `0-9` or `A-Z`, then two
//! numeric check digits. Both use the same mod-11 weights, each character counting as its
//! ASCII code minus 48 (so a digit counts as itself and `A` as 17). Letters must be upper
//! case: the Receita writes them so, and keys and indexes compare documents as text, so a
//! lower-case form would be a second spelling of one company.
//!
//! A [`TaxId`] is always well formed: its characters, length and check digits are verified
//! at construction (docs/decisions.md, "Documents").

use std::fmt;

use serde::{Deserialize, Serialize};

pub const CPF_DIGITS: usize = 11;
pub const CNPJ_DIGITS: usize = 14;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaxIdError {
    #[error("must contain digits only (a CNPJ may also have upper-case letters in its first 12 characters)")]
    NotDigits,
    #[error("must have 11 (CPF) or 14 (CNPJ) characters")]
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
        let b = text.as_bytes();
        if b.is_empty() || !b.iter().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()) {
            return Err(TaxIdError::NotDigits);
        }
        let numeric = b.iter().all(u8::is_ascii_digit);
        let values: Vec<u32> = b.iter().map(|&c| u32::from(c - b'0')).collect();
        let valid = match b.len() {
            CPF_DIGITS if numeric => cpf_is_valid(&values),
            // Letters only in the root and branch; the check digits are always digits.
            CNPJ_DIGITS if b[12..].iter().all(u8::is_ascii_digit) => cnpj_is_valid(&values),
            CPF_DIGITS | CNPJ_DIGITS => return Err(TaxIdError::NotDigits),
            _ => return Err(TaxIdError::WrongLength),
        };
        if valid {
            Ok(TaxId(text.to_owned()))
        } else {
            Err(TaxIdError::BadCheckDigits)
        }
    }

    /// Whether `text` has the shape of a document (digits, or a CNPJ's upper-case letters),
    /// whatever its check digits: what tells a document key from other key types.
    pub fn looks_like(text: &str) -> bool {
        let b = text.as_bytes();
        match b.len() {
            CPF_DIGITS => b.iter().all(u8::is_ascii_digit),
            CNPJ_DIGITS => {
                b[..12].iter().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
                    && b[12..].iter().all(u8::is_ascii_digit)
            }
            _ => !b.is_empty() && b.iter().all(u8::is_ascii_digit),
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
    /// `12.345.678/****-**` (an alphanumeric one the same way: `12.ABC.345/****-**`).
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

/// The valid CPF whose first nine digits are `base` (below 10^9), check digits appended:
/// documents for test and homologation accounts. A base whose CPF would be eleven equal
/// digits (never issued) takes the next base's.
pub fn cpf_of(base: u64) -> String {
    let mut d: Vec<u32> =
        format!("{:09}", base % 1_000_000_000).bytes().map(|b| u32::from(b - b'0')).collect();
    d.push(check_digit(&d, &[10, 9, 8, 7, 6, 5, 4, 3, 2]));
    d.push(check_digit(&d, &[11, 10, 9, 8, 7, 6, 5, 4, 3, 2]));
    if d.iter().all(|&x| x == d[0]) {
        return cpf_of(base % 1_000_000_000 + 1);
    }
    d.iter().map(|x| char::from(b'0' + *x as u8)).collect()
}

/// The valid numeric CNPJ whose first twelve digits are `base` (below 10^12); as
/// [`cpf_of`], one of fourteen equal digits takes the next base's.
pub fn cnpj_of(base: u64) -> String {
    let mut d: Vec<u32> =
        format!("{:012}", base % 1_000_000_000_000).bytes().map(|b| u32::from(b - b'0')).collect();
    d.push(check_digit(&d, &[5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]));
    d.push(check_digit(&d, &[6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]));
    if d.iter().all(|&x| x == d[0]) {
        return cnpj_of(base % 1_000_000_000_000 + 1);
    }
    d.iter().map(|x| char::from(b'0' + *x as u8)).collect()
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

/// `d` holds each character's ASCII code minus 48, so digits are themselves and letters
/// 17 (`A`) to 42 (`Z`), as the alphanumeric CNPJ's rule says.
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
    fn made_documents_carry_their_check_digits() {
        assert_eq!(cpf_of(529_982_247), "52998224725");
        assert_eq!(cnpj_of(112_223_330_001), "11222333000181");
        assert_eq!(cpf_of(111_111_111), cpf_of(111_111_112), "eleven equal digits are never issued");
        assert_eq!(cnpj_of(0), cnpj_of(1));
        for n in [1, 12_345, 111_111_111, 999_999_999] {
            assert!(TaxId::parse(&cpf_of(n)).is_ok(), "{}", cpf_of(n));
            assert!(TaxId::parse(&cnpj_of(n * 1000 + 1)).is_ok(), "{}", cnpj_of(n * 1000 + 1));
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
    fn the_receitas_alphanumeric_example_parses_and_is_a_cnpj() {
        let t = TaxId::parse("12ABC34501DE35").expect("the Receita's example");
        assert_eq!(t.kind(), TaxIdKind::Cnpj);
        assert_eq!(t.masked(), "12.ABC.345/****-**");
        // Letters in every position of root and branch (check digits computed by hand).
        for ok in ["ABCDEFGHIJKL80", "Z9Y8X7W6V5U429"] {
            assert_eq!(TaxId::parse(ok).map(|t| t.kind()), Ok(TaxIdKind::Cnpj), "{ok}");
        }
    }

    #[test]
    fn an_alphanumeric_cnpj_with_wrong_check_digits_is_refused() {
        for last in 0..100 {
            let text = format!("12ABC34501DE{last:02}");
            let parsed = TaxId::parse(&text);
            if last == 35 {
                assert!(parsed.is_ok());
            } else {
                assert_eq!(parsed, Err(TaxIdError::BadCheckDigits), "{text}");
            }
        }
    }

    #[test]
    fn alphanumeric_rules_letters_upper_case_only_and_never_in_check_digits_or_a_cpf() {
        assert_eq!(TaxId::parse("12abc34501de35"), Err(TaxIdError::NotDigits));
        assert_eq!(TaxId::parse("12ABC34501DEA5"), Err(TaxIdError::NotDigits));
        assert_eq!(TaxId::parse("12ABC34501D"), Err(TaxIdError::NotDigits));
        assert_eq!(TaxId::parse("12ABC3450"), Err(TaxIdError::WrongLength));
        assert_eq!(TaxId::parse("12ABC34501DE3"), Err(TaxIdError::WrongLength));
        assert_eq!(TaxId::parse("12ÁBC34501DE35"), Err(TaxIdError::NotDigits));
        assert!(TaxId::looks_like("12ABC34501DE35"));
        assert!(TaxId::looks_like("12ABC34501DE99"));
        assert!(!TaxId::looks_like("12ABC34501DEA5"));
        assert!(!TaxId::looks_like("ABCDEFGHIJK"));
        assert!(TaxId::looks_like("52998224725"));
    }

    #[test]
    fn the_check_digits_of_a_numeric_cnpj_are_those_of_the_alphanumeric_rule() {
        // Digits count as themselves under ASCII minus 48: the numeric CNPJ is unchanged.
        for ok in ["11222333000181", "45723174000110"] {
            assert_eq!(TaxId::parse(ok).map(|t| t.kind()), Ok(TaxIdKind::Cnpj));
        }
    }

    #[test]
    fn masks_show_the_middle_of_a_cpf_and_the_root_of_a_cnpj() {
        let cpf = TaxId::parse("52998224725").ok();
        assert_eq!(cpf.map(|t| t.masked()), Some("***.982.247-**".into()));
        let cnpj = TaxId::parse("11222333000181").ok();
        assert_eq!(cnpj.map(|t| t.masked()), Some("11.222.333/****-**".into()));
    }
}
