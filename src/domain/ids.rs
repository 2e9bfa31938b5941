//! Identifiers: numeric account ids, UUID v4 client ids, and the transactionId that carries
//! its transaction's local id.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

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

/// A client id: a UUID of version 4 (interface.md "Ids").
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

/// The largest local id a transactionId carries (56 bits).
pub const UUID_LOCAL_ID_MAX: u64 = (1 << 56) - 1;

/// A transactionId that carries its transaction's local id, so the record is found by it
/// without an index: a UUID v4 made of `random`, whose bytes 9 to 15 hold the local id
/// masked by its bytes 0 to 6, so it looks as random as any other. A local id above
/// [`UUID_LOCAL_ID_MAX`] does not fit: [`local_id_in_uuid`] then answers another number,
/// and storage indexes that transactionId instead.
pub fn transaction_uuid(local_id: u64, random: [u8; 16]) -> Uuid {
    let mut b = *uuid::Builder::from_random_bytes(random).as_uuid().as_bytes();
    let masked = (local_id ^ uuid_mask(&b)) & UUID_LOCAL_ID_MAX;
    b[9..16].copy_from_slice(&masked.to_be_bytes()[1..8]);
    Uuid::from_bytes(b)
}

/// The local id a transactionId made by [`transaction_uuid`] carries. Any other UUID gives
/// some number: the caller checks that the transaction found there has this transactionId.
pub fn local_id_in_uuid(u: &Uuid) -> u64 {
    let b = u.as_bytes();
    let masked = u64::from_be_bytes([0, b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
    masked ^ uuid_mask(b)
}

fn uuid_mask(b: &[u8; 16]) -> u64 {
    u64::from_be_bytes([0, b[0], b[1], b[2], b[3], b[4], b[5], b[6]])
}

/// The instant local ids are measured from (2026-01-01T00:00:00Z).
pub const LOCAL_ID_EPOCH_UNIX_MS: i64 = 1_767_225_600_000;
/// Local ids a server may hand out per millisecond, on average since it started: about 70
/// times what one node reaches (14,000 a second), far beyond what any node here could.
pub const LOCAL_IDS_PER_MS_MAX: u64 = 1_000;

/// Where the local ids of a store restored from a backup at `now` start, so that none is an
/// id the original server handed out after the backup was taken.
///
/// Why it holds: a store's counter starts at 1 (or at this floor, for a restored one) and
/// grows by at most [`LOCAL_IDS_PER_MS_MAX`] a millisecond, so every id any server has
/// handed out by an instant is below this floor at that instant; the restored store starts
/// above every id the original reached, and stays below the floor of any later restore in
/// turn. A restore on a machine whose clock is behind the original's by nearly all of the
/// original's uptime would break it; the floor is at most about 3.2e14 in 2036, well within
/// the 2^53 that JSON clients read exactly.
pub fn restored_local_id_floor(now: DateTime<Utc>) -> u64 {
    let ms = now.timestamp_millis().saturating_sub(LOCAL_ID_EPOCH_UNIX_MS).max(0);
    u64::try_from(ms).unwrap_or(0).saturating_mul(LOCAL_IDS_PER_MS_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_id_is_a_uuid_v4_that_carries_its_local_id() {
        for (local, seed) in [(0u64, 0u8), (1, 7), (123_456_789, 200), (UUID_LOCAL_ID_MAX, 255)] {
            let u = transaction_uuid(local, [seed; 16]);
            assert_eq!(u.get_version_num(), 4);
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
            assert_eq!(local_id_in_uuid(&u), local);
        }
        // Two ids of consecutive transactions share no visible pattern.
        let (a, b) = (transaction_uuid(41, [3; 16]), transaction_uuid(42, [9; 16]));
        assert_ne!(a.as_bytes()[9..], b.as_bytes()[9..]);
        // Too large a local id does not come back: storage indexes such an id.
        assert_ne!(
            local_id_in_uuid(&transaction_uuid(UUID_LOCAL_ID_MAX + 1, [1; 16])),
            UUID_LOCAL_ID_MAX + 1
        );
    }

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

    #[test]
    fn a_restored_store_starts_above_every_id_handed_out_before_it() {
        use chrono::TimeZone;
        let epoch = Utc.timestamp_millis_opt(LOCAL_ID_EPOCH_UNIX_MS).unwrap();
        assert_eq!(restored_local_id_floor(epoch), 0);
        assert_eq!(restored_local_id_floor(epoch - chrono::Duration::days(1)), 0, "never below zero");
        let day = chrono::Duration::days(1);
        assert_eq!(restored_local_id_floor(epoch + day), 86_400_000 * LOCAL_IDS_PER_MS_MAX);
        // A server started at the epoch that handed out 14,000 ids a second for a year is
        // still below the floor of a restore made then.
        let year = chrono::Duration::days(365);
        assert!(14_000 * 365 * 86_400 < restored_local_id_floor(epoch + year));
        // Ten years on, ids are still exact in a JSON client's double.
        assert!(restored_local_id_floor(epoch + year * 10) < 1 << 53);
        assert!(restored_local_id_floor(epoch + day) < restored_local_id_floor(epoch + day * 2));
    }
}
