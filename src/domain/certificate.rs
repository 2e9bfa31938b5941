//! Client certificates as the domain sees them: a SHA-256 fingerprint and a validity
//! window, checked against the server clock passed in by the caller.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Hex characters of a SHA-256 fingerprint.
pub const FINGERPRINT_HEX_LEN: usize = 64;

/// The SHA-256 of a certificate's DER, as 64 lower-case hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Fingerprint(String);

impl Fingerprint {
    /// Accepts exactly 64 lower-case hex characters (interface.md "Ids").
    pub fn parse(text: &str) -> Option<Fingerprint> {
        let ok = text.len() == FINGERPRINT_HEX_LEN
            && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| Fingerprint(text.to_owned()))
    }

    pub fn from_digest(digest: &[u8; 32]) -> Fingerprint {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = String::with_capacity(64);
        for b in digest {
            text.push(char::from(HEX[usize::from(b >> 4)]));
            text.push(char::from(HEX[usize::from(b & 15)]));
        }
        Fingerprint(text)
    }

    /// The 32 bytes of the digest (for the token's `x5t#S256` confirmation claim).
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, chunk) in self.0.as_bytes().chunks(2).enumerate() {
            let hex = std::str::from_utf8(chunk).unwrap_or("00");
            out[i] = u8::from_str_radix(hex, 16).unwrap_or(0);
        }
        out
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Fingerprint {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Fingerprint::parse(&s).ok_or_else(|| "not a SHA-256 fingerprint".to_owned())
    }
}

impl From<Fingerprint> for String {
    fn from(f: Fingerprint) -> String {
        f.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A certificate's notBefore..=notAfter window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Validity {
    pub not_before: DateTime<Utc>,
    pub not_after: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidityVerdict {
    Valid,
    NotYetValid,
    Expired,
}

impl Validity {
    /// X.509 validity is inclusive at both ends (RFC 5280, section 4.1.2.5).
    pub fn at(&self, now: DateTime<Utc>) -> ValidityVerdict {
        if now < self.not_before {
            ValidityVerdict::NotYetValid
        } else if now > self.not_after {
            ValidityVerdict::Expired
        } else {
            ValidityVerdict::Valid
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn fingerprints_are_64_lower_hex() {
        assert!(Fingerprint::parse(&"a1".repeat(32)).is_some());
        assert!(Fingerprint::parse(&"A1".repeat(32)).is_none());
        assert!(Fingerprint::parse(&"a1".repeat(31)).is_none());
        assert!(Fingerprint::parse(&"g1".repeat(32)).is_none());
    }

    #[test]
    fn fingerprint_bytes_round_trip() {
        let mut d = [0u8; 32];
        for (i, b) in d.iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        assert_eq!(Fingerprint::from_digest(&d).to_bytes(), d);
    }

    #[test]
    fn validity_is_inclusive_at_both_ends() {
        let t = |s| Utc.timestamp_opt(s, 0).single().unwrap_or_default();
        let v = Validity { not_before: t(100), not_after: t(200) };
        assert_eq!(v.at(t(99)), ValidityVerdict::NotYetValid);
        assert_eq!(v.at(t(100)), ValidityVerdict::Valid);
        assert_eq!(v.at(t(200)), ValidityVerdict::Valid);
        assert_eq!(v.at(t(201)), ValidityVerdict::Expired);
    }
}
