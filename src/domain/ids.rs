//! Identifiers: numeric account ids and UUID v4 client ids.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The numeric id of an account, unique in the server, starting at 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AccountId(u64);

impl AccountId {
    pub fn new(raw: u64) -> Option<AccountId> {
        (raw > 0).then_some(AccountId(raw))
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for AccountId {
    type Err = ();
    /// Accepts the canonical decimal form only (no sign, no leading zeros).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || s.starts_with('0') || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(());
        }
        s.parse::<u64>().ok().and_then(AccountId::new).ok_or(())
    }
}

/// A client id: a UUID of version 4 (interface.md "Authentication").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClientId(Uuid);

impl ClientId {
    /// Parses the hyphenated form and insists on version 4 and the RFC 4122 variant.
    pub fn parse(text: &str) -> Option<ClientId> {
        if text.len() != 36 {
            return None;
        }
        let uuid = Uuid::parse_str(text).ok()?;
        let v4 = uuid.get_version_num() == 4 && uuid.get_variant() == uuid::Variant::RFC4122;
        v4.then_some(ClientId(uuid))
    }

    pub fn from_uuid(uuid: Uuid) -> Option<ClientId> {
        ClientId::parse(&uuid.hyphenated().to_string())
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl TryFrom<String> for ClientId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        ClientId::parse(&s).ok_or_else(|| format!("{s} is not a UUID v4"))
    }
}

impl From<ClientId> for String {
    fn from(c: ClientId) -> String {
        c.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_ids_are_positive_canonical_numbers() {
        assert_eq!("42".parse::<AccountId>().map(AccountId::get), Ok(42));
        assert!("0".parse::<AccountId>().is_err());
        assert!("042".parse::<AccountId>().is_err());
        assert!("-1".parse::<AccountId>().is_err());
        assert!("1a".parse::<AccountId>().is_err());
        assert!("99999999999999999999999".parse::<AccountId>().is_err());
    }

    #[test]
    fn client_ids_must_be_uuid_v4() {
        assert!(ClientId::parse("3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c").is_some());
        // version 1
        assert!(ClientId::parse("3f2b8c1e-9d4a-1e6b-8a7c-1d2e3f4a5b6c").is_none());
        // wrong variant
        assert!(ClientId::parse("3f2b8c1e-9d4a-4e6b-ca7c-1d2e3f4a5b6c").is_none());
        // simple form without hyphens
        assert!(ClientId::parse("3f2b8c1e9d4a4e6b8a7c1d2e3f4a5b6c").is_none());
        assert!(ClientId::parse("not-a-uuid").is_none());
    }
}
