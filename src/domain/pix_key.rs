//! PIX keys: the formats of each endpoint's key types, and the directory's canonical form.
//!
//! Family A cash-out names keys `DOCUMENT`, `EMAIL`, `PHONE` (10 or 11 digits, no `+55`),
//! `RANDOM` (UUID with or without hyphens). The key directory (and `/dict/pix`) writes
//! them `CPF`, `CNPJ`, `EMAIL`, `PHONE` (`+55` + digits) and `EVP` (hyphenated UUID).
//! [`DirectoryKey`] is that canonical form, the one the directory is looked up by.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::document::TaxId;

/// Characters of an e-mail key (the DICT limit).
pub const EMAIL_KEY_LEN_MAX: usize = 77;

/// Key types of the family A cash-out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum CashOutKeyType {
    Document,
    Email,
    Phone,
    Random,
}

impl CashOutKeyType {
    pub fn parse(text: &str) -> Option<CashOutKeyType> {
        match text {
            "DOCUMENT" => Some(CashOutKeyType::Document),
            "EMAIL" => Some(CashOutKeyType::Email),
            "PHONE" => Some(CashOutKeyType::Phone),
            "RANDOM" => Some(CashOutKeyType::Random),
            _ => None,
        }
    }
}

/// Key types of the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DirectoryKeyType {
    Cpf,
    Cnpj,
    Email,
    Phone,
    Evp,
}

impl DirectoryKeyType {
    /// The directory's name (and `/dict/pix`'s): CPF, CNPJ, EMAIL, PHONE, EVP.
    pub fn directory_name(self) -> &'static str {
        match self {
            DirectoryKeyType::Cpf => "CPF",
            DirectoryKeyType::Cnpj => "CNPJ",
            DirectoryKeyType::Email => "EMAIL",
            DirectoryKeyType::Phone => "PHONE",
            DirectoryKeyType::Evp => "EVP",
        }
    }

    /// The name a family A cash-out gives this type: DOCUMENT for a CPF or CNPJ, RANDOM
    /// for an EVP.
    pub fn cash_out_name(self) -> &'static str {
        match self {
            DirectoryKeyType::Cpf | DirectoryKeyType::Cnpj => "DOCUMENT",
            DirectoryKeyType::Evp => "RANDOM",
            other => other.directory_name(),
        }
    }

    /// The name a charge's split gives this type: CPF, CNPJ, EMAIL, PHONE, RANDOM.
    pub fn split_name(self) -> &'static str {
        match self {
            DirectoryKeyType::Evp => "RANDOM",
            other => other.directory_name(),
        }
    }
}

/// A key in the directory's canonical form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DirectoryKey {
    pub key: String,
    pub key_type: DirectoryKeyType,
}

impl fmt::Display for DirectoryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("must be a CPF (11 digits) or CNPJ (14 characters) with valid check digits")]
    Document,
    #[error("must be a valid e-mail address of at most 77 characters")]
    Email,
    #[error("must be an area code and number, 10 or 11 digits, without +55")]
    Phone,
    #[error("must be +55 followed by an area code and number (10 or 11 digits)")]
    PhoneE164,
    /// The digits are as many as a phone's, but its area code has a zero digit.
    #[error("has an area code with a zero digit: area codes run from 11 to 99 without a zero")]
    PhoneAreaCode,
    /// Eleven digits are a mobile number, whose nine digits after the area code start with 9.
    #[error("has 11 digits, which is a mobile number, whose 9 digits after the area code must start with 9")]
    PhoneMobile,
    #[error("must be a UUID")]
    Random,
    #[error("is not a valid PIX key")]
    Unknown,
}

fn email_ok(s: &str) -> bool {
    if s.is_empty() || s.len() > EMAIL_KEY_LEN_MAX || s.chars().any(|c| c.is_whitespace()) {
        return false;
    }
    let Some((local, domain)) = s.split_once('@') else { return false };
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+/=?^_`{|}~.-".contains(&b));
    let labels: Vec<&str> = domain.split('.').collect();
    let domain_ok = labels.len() >= 2
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        && labels.last().is_some_and(|tld| tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic()));
    local_ok && domain_ok
}

/// Area code (11-99, no zero digit) and number: 8 digits (landline) or 9 starting with 9.
/// `wrong_length` is the error of a text that is not 10 or 11 digits (it depends on the form
/// the key was written in); the other faults name what is wrong with a number of the right
/// length.
fn national_phone(d: &str, wrong_length: KeyError) -> Result<(), KeyError> {
    let b = d.as_bytes();
    if !(d.len() == 10 || d.len() == 11) || !b.iter().all(u8::is_ascii_digit) {
        return Err(wrong_length);
    }
    if b[0] == b'0' || b[1] == b'0' {
        return Err(KeyError::PhoneAreaCode);
    }
    if d.len() == 11 && b[2] != b'9' {
        return Err(KeyError::PhoneMobile);
    }
    Ok(())
}

/// The hyphenated lower-case form of a UUID written with or without hyphens.
fn uuid_canonical(s: &str) -> Option<String> {
    let ok_len = s.len() == 32 || s.len() == 36;
    if !ok_len {
        return None;
    }
    uuid::Uuid::try_parse(s).ok().map(|u| u.hyphenated().to_string())
}

/// Parses a family A cash-out key of `kind` into the directory form.
pub fn parse_cash_out_key(kind: CashOutKeyType, key: &str) -> Result<DirectoryKey, KeyError> {
    match kind {
        CashOutKeyType::Document => {
            let doc = TaxId::parse(key).map_err(|_| KeyError::Document)?;
            let key_type = match doc.kind() {
                super::document::TaxIdKind::Cpf => DirectoryKeyType::Cpf,
                super::document::TaxIdKind::Cnpj => DirectoryKeyType::Cnpj,
            };
            Ok(DirectoryKey { key: doc.to_string(), key_type })
        }
        CashOutKeyType::Email if email_ok(key) => {
            Ok(DirectoryKey { key: key.to_ascii_lowercase(), key_type: DirectoryKeyType::Email })
        }
        CashOutKeyType::Email => Err(KeyError::Email),
        CashOutKeyType::Phone => national_phone(key, KeyError::Phone)
            .map(|()| DirectoryKey { key: format!("+55{key}"), key_type: DirectoryKeyType::Phone }),
        CashOutKeyType::Random => uuid_canonical(key)
            .map(|key| DirectoryKey { key, key_type: DirectoryKeyType::Evp })
            .ok_or(KeyError::Random),
    }
}

/// Parses a key as `/dict/pix` and BR Codes write them, inferring its type: a CPF or a
/// CNPJ (numeric or alphanumeric), an e-mail, `+55` and a phone, or a hyphenated UUID.
pub fn parse_directory_key(key: &str) -> Result<DirectoryKey, KeyError> {
    if let Some(national) = key.strip_prefix("+55") {
        return national_phone(national, KeyError::PhoneE164)
            .map(|()| DirectoryKey { key: key.to_owned(), key_type: DirectoryKeyType::Phone });
    }
    if key.contains('@') {
        return parse_cash_out_key(CashOutKeyType::Email, key);
    }
    if TaxId::looks_like(key) {
        return parse_cash_out_key(CashOutKeyType::Document, key);
    }
    if key.len() == 36 {
        return parse_cash_out_key(CashOutKeyType::Random, key);
    }
    Err(KeyError::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use CashOutKeyType as K;

    #[test]
    fn cash_out_keys_by_type() {
        let ok = [
            (K::Document, "52998224725", "52998224725", DirectoryKeyType::Cpf),
            (K::Document, "11222333000181", "11222333000181", DirectoryKeyType::Cnpj),
            (K::Document, "12ABC34501DE35", "12ABC34501DE35", DirectoryKeyType::Cnpj),
            (K::Email, "Ana.Silva@Example.com", "ana.silva@example.com", DirectoryKeyType::Email),
            (K::Phone, "11987654321", "+5511987654321", DirectoryKeyType::Phone),
            (K::Phone, "1133334444", "+551133334444", DirectoryKeyType::Phone),
            (
                K::Random,
                "3F2B8C1E9D4A4E6B8A7C1D2E3F4A5B6C",
                "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c",
                DirectoryKeyType::Evp,
            ),
            (
                K::Random,
                "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c",
                "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c",
                DirectoryKeyType::Evp,
            ),
        ];
        for (kind, input, key, key_type) in ok {
            assert_eq!(
                parse_cash_out_key(kind, input),
                Ok(DirectoryKey { key: key.into(), key_type }),
                "{input}"
            );
        }
    }

    #[test]
    fn malformed_cash_out_keys_are_refused() {
        let bad = [
            (K::Document, "52998224724", KeyError::Document),
            (K::Document, "529.982.247-25", KeyError::Document),
            (K::Document, "12ABC34501DE36", KeyError::Document),
            (K::Document, "12abc34501de35", KeyError::Document),
            (K::Email, "no-at-sign", KeyError::Email),
            (K::Email, "a@b", KeyError::Email),
            (K::Email, "a b@c.com", KeyError::Email),
            (K::Email, "a..b@c.com", KeyError::Email),
            (K::Email, &format!("{}@example.com", "a".repeat(66)), KeyError::Email),
            (K::Phone, "+5511987654321", KeyError::Phone),
            (K::Phone, "119876543", KeyError::Phone),
            (K::Phone, "01987654321", KeyError::PhoneAreaCode),
            (K::Phone, "1098765432", KeyError::PhoneAreaCode),
            (K::Phone, "11887654321", KeyError::PhoneMobile),
            (K::Phone, "119876543210", KeyError::Phone),
            (K::Random, "not-a-uuid", KeyError::Random),
            (K::Random, "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6", KeyError::Random),
        ];
        for (kind, input, err) in bad {
            assert_eq!(parse_cash_out_key(kind, input), Err(err), "{input}");
        }
    }

    #[test]
    fn each_route_names_key_types_in_its_own_words() {
        use DirectoryKeyType as D;
        let names = |t: D| (t.directory_name(), t.cash_out_name(), t.split_name());
        assert_eq!(names(D::Cpf), ("CPF", "DOCUMENT", "CPF"));
        assert_eq!(names(D::Cnpj), ("CNPJ", "DOCUMENT", "CNPJ"));
        assert_eq!(names(D::Email), ("EMAIL", "EMAIL", "EMAIL"));
        assert_eq!(names(D::Phone), ("PHONE", "PHONE", "PHONE"));
        assert_eq!(names(D::Evp), ("EVP", "RANDOM", "RANDOM"));
        // The directory names are what serde writes.
        for t in [D::Cpf, D::Cnpj, D::Email, D::Phone, D::Evp] {
            assert_eq!(serde_json::to_value(t).unwrap(), t.directory_name());
        }
    }

    #[test]
    fn directory_keys_infer_their_type() {
        assert_eq!(parse_directory_key("+5511987654321").map(|k| k.key_type), Ok(DirectoryKeyType::Phone));
        assert_eq!(parse_directory_key("11987654321").map(|k| k.key_type), Err(KeyError::Document));
        assert_eq!(parse_directory_key("+55119876").map(|k| k.key_type), Err(KeyError::PhoneE164));
        assert_eq!(parse_directory_key("+5511887654321"), Err(KeyError::PhoneMobile));
        assert_eq!(parse_directory_key("+5501987654321"), Err(KeyError::PhoneAreaCode));
        assert!(KeyError::PhoneMobile.to_string().contains("must start with 9"));
        assert_eq!(parse_directory_key("11222333000181").map(|k| k.key_type), Ok(DirectoryKeyType::Cnpj));
        assert_eq!(parse_directory_key("12ABC34501DE35").map(|k| k.key_type), Ok(DirectoryKeyType::Cnpj));
        assert_eq!(parse_directory_key("12ABC34501DE36"), Err(KeyError::Document));
        assert_eq!(parse_directory_key("x@y.io").map(|k| k.key_type), Ok(DirectoryKeyType::Email));
        assert_eq!(
            parse_directory_key("3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c").map(|k| k.key_type),
            Ok(DirectoryKeyType::Evp)
        );
        assert_eq!(parse_directory_key("hello"), Err(KeyError::Unknown));
    }
}
