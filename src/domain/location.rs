//! Payload locations: the capability URLs that a dynamic QR code carries (BR Code field
//! 26, sub-field 25) and that the payer's institution reads to learn what a cob or a cobv
//! asks (the API Pix's `GET /{pixUrlAccessToken}` and `GET /cobv/{pixUrlAccessToken}`).
//!
//! A location is `{host}/qr/{token}` for a cob, `{host}/qr/cobv/{token}` for a cobv and
//! `{host}/qr/rec/{token}` for a recurrence ([`RecLocations`]),
//! written without a scheme (the payer's app always uses https). The host is the operator's
//! public name for the gateway; the path is fixed ([`LOCATION_PATH`]), so the routes are
//! the same on every server and never shadow another. The token names the charge by its
//! local id and carries a MAC over the charge's kind, local id and txid under a key of the
//! gateway's own: no one can guess a location from a txid, a cob's token does not open a
//! cobv, and a token minted before a restore from a backup never opens another charge that
//! reuses its local id. Nothing is stored per location, so making a charge costs no write.
//!
//! Invariants: a location is at most [`LOCATION_LEN_MAX`] characters (the API Pix's limit),
//! which the host's own limit guarantees for every token; [`opens`] accepts exactly the
//! tokens [`token`] makes for the same key, kind, local id and txid.

use base64::Engine;

use super::webhooks::hmac_sha256;

/// Characters of a location, without its scheme (the API Pix's `PayloadLocation.location`).
pub const LOCATION_LEN_MAX: usize = 77;
/// Bytes of the MAC a token carries (128 bits: a capability no one guesses).
pub const LOCATION_TOKEN_MAC_BYTES: usize = 16;
/// Characters of the longest token: a 10-byte varint and the MAC, in unpadded base64url.
pub const LOCATION_TOKEN_LEN_MAX: usize = ((10 + LOCATION_TOKEN_MAC_BYTES) * 4).div_ceil(3);
/// The path every location lives under.
pub const LOCATION_PATH: &str = "/qr";
/// Characters of the host, so that the longest cobv location still fits.
pub const LOCATION_HOST_LEN_MAX: usize =
    LOCATION_LEN_MAX - LOCATION_PATH.len() - "/cobv/".len() - LOCATION_TOKEN_LEN_MAX;

/// Which charge a location serves; a token made for one kind never opens the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeKind {
    Cob,
    Cobv,
}

impl ChargeKind {
    fn tag(self) -> u8 {
        match self {
            ChargeKind::Cob => b'i',
            ChargeKind::Cobv => b'v',
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationHostError {
    #[error("must be a host name, with a port if any (pix.example.com), without a scheme or a path")]
    Shape,
    #[error(
        "must have at most {LOCATION_HOST_LEN_MAX} characters, so every location fits in {LOCATION_LEN_MAX}"
    )]
    Length,
}

/// The public host the locations are served on (with a port, if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationHost(String);

impl LocationHost {
    pub fn parse(text: &str) -> Result<LocationHost, LocationHostError> {
        if text.len() > LOCATION_HOST_LEN_MAX {
            return Err(LocationHostError::Length);
        }
        let (name, port) = match text.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (text, None),
        };
        let label_ok = |l: &str| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        let name_ok = name.split('.').all(label_ok);
        let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0) && !p.starts_with('0'));
        if !name_ok || !port_ok {
            return Err(LocationHostError::Shape);
        }
        Ok(LocationHost(text.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The location of a charge, as a QR code carries it.
    pub fn location(&self, kind: ChargeKind, token: &str) -> String {
        match kind {
            ChargeKind::Cob => format!("{}{LOCATION_PATH}/{token}", self.0),
            ChargeKind::Cobv => format!("{}{LOCATION_PATH}/cobv/{token}", self.0),
        }
    }

    /// Where the keys that verify the payloads are published (the JWS header's `jku`): on
    /// the locations' own host, as the payer's app requires.
    pub fn jwks_url(&self) -> String {
        format!("https://{}{LOCATION_PATH}/jwks", self.0)
    }
}

/// The token of a charge's location.
pub fn token(key: &[u8], kind: ChargeKind, local_id: u64, txid: &str) -> String {
    let mut bytes = varint(local_id);
    bytes.extend_from_slice(&mac(key, kind, local_id, txid));
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The local id a token names, if the token is well formed; the caller loads that charge
/// and confirms it with [`opens`], since the MAC covers its txid.
pub fn token_local_id(token: &str) -> Option<u64> {
    if token.len() > LOCATION_TOKEN_LEN_MAX {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).ok()?;
    let (local, used) = read_varint(&bytes)?;
    (bytes.len() == used + LOCATION_TOKEN_MAC_BYTES).then_some(local)
}

/// Whether `token` is the location token of the charge (`kind`, `local_id`, `txid`).
pub fn opens(key: &[u8], token: &str, kind: ChargeKind, local_id: u64, txid: &str) -> bool {
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token) else { return false };
    let Some((local, used)) = read_varint(&bytes) else { return false };
    let expected = mac(key, kind, local_id, txid);
    // Compared in full, every byte, so the time taken says nothing of how much matched.
    local == local_id
        && bytes.len() == used + LOCATION_TOKEN_MAC_BYTES
        && bytes[used..].iter().zip(expected.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn mac(key: &[u8], kind: ChargeKind, local_id: u64, txid: &str) -> [u8; LOCATION_TOKEN_MAC_BYTES] {
    let mut message = vec![kind.tag()];
    message.extend_from_slice(&local_id.to_be_bytes());
    message.extend_from_slice(txid.as_bytes());
    let full = hmac_sha256(key, &message);
    let mut out = [0u8; LOCATION_TOKEN_MAC_BYTES];
    out.copy_from_slice(&full[..LOCATION_TOKEN_MAC_BYTES]);
    out
}

/// The largest account id a recurrence's location token carries, and the largest local id:
/// with both, the token is at most [`LOCATION_TOKEN_LEN_MAX`] characters, so a recurrence's
/// location fits as a cob's does. Beyond them (never: 2 million accounts, local ids for two
/// thousand years at a thousand a millisecond) a location is not made.
pub const REC_LOCATION_ACCOUNT_MAX: u64 = (1 << 21) - 1;
pub const REC_LOCATION_LOCAL_MAX: u64 = (1 << 56) - 1;
/// The MAC's tag of a recurrence's location (a cob's is `i`, a cobv's `v`).
const REC_TAG: u8 = b'r';

/// Where the recurrences' locations are made (Pix Automático's journey 2): `{host}/qr/rec/
/// {token}`, the token naming the account and the location's local id (a location is
/// stored per account) under a MAC of the gateway's key. Pure: the host and the key are
/// values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecLocations {
    host: LocationHost,
    key: Vec<u8>,
}

impl RecLocations {
    pub fn new(host: LocationHost, key: Vec<u8>) -> RecLocations {
        RecLocations { host, key }
    }

    /// The location of the account's location `local`; `None` beyond the ids' bounds.
    pub fn location(&self, account: u64, local: u64) -> Option<String> {
        if account > REC_LOCATION_ACCOUNT_MAX || local > REC_LOCATION_LOCAL_MAX {
            return None;
        }
        let mut bytes = varint(account);
        bytes.extend(varint(local));
        bytes.extend_from_slice(&rec_mac(&self.key, account, local));
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        Some(format!("{}{LOCATION_PATH}/rec/{token}", self.host.as_str()))
    }

    /// The (account, local id) a recurrence's location names (as a QR code's template 80
    /// carries it, with or without `https://`), when it is one of this host's and its
    /// token's MAC holds.
    pub fn opens_location(&self, location: &str) -> Option<(u64, u64)> {
        let bare = location.strip_prefix("https://").unwrap_or(location);
        let token =
            bare.strip_prefix(self.host.as_str())?.strip_prefix(LOCATION_PATH)?.strip_prefix("/rec/")?;
        self.opens(token)
    }

    /// The (account, local id) a recurrence's token names, if its MAC holds.
    pub fn opens(&self, token: &str) -> Option<(u64, u64)> {
        if token.len() > LOCATION_TOKEN_LEN_MAX {
            return None;
        }
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).ok()?;
        let (account, a) = read_varint(&bytes)?;
        let (local, l) = read_varint(&bytes[a..])?;
        let mac = bytes.get(a + l..).filter(|m| m.len() == LOCATION_TOKEN_MAC_BYTES)?;
        let expected = rec_mac(&self.key, account, local);
        let same = mac.iter().zip(expected.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
        same.then_some((account, local))
    }
}

fn rec_mac(key: &[u8], account: u64, local: u64) -> [u8; LOCATION_TOKEN_MAC_BYTES] {
    let mut message = vec![REC_TAG];
    message.extend_from_slice(&account.to_be_bytes());
    message.extend_from_slice(&local.to_be_bytes());
    let full = hmac_sha256(key, &message);
    let mut out = [0u8; LOCATION_TOKEN_MAC_BYTES];
    out.copy_from_slice(&full[..LOCATION_TOKEN_MAC_BYTES]);
    out
}

/// LEB128: seven bits a byte, least significant first, the high bit saying more follow.
fn varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(low);
            return out;
        }
        out.push(low | 0x80);
    }
}

/// A varint and how many bytes it took; `None` if it runs off the end, overflows, or is
/// not written in its shortest form (so one id has exactly one token).
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut n: u64 = 0;
    for (i, b) in bytes.iter().enumerate().take(10) {
        let part = u64::from(b & 0x7f);
        if i == 9 && part > 1 {
            return None;
        }
        n |= part << (7 * i);
        if b & 0x80 == 0 {
            let shortest = i == 0 || *b != 0;
            return shortest.then_some((n, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a location key of thirty-two by.";

    #[test]
    fn a_recurrence_location_names_its_account_and_location_and_fits_at_the_bounds() {
        let host = LocationHost::parse(&"h".repeat(LOCATION_HOST_LEN_MAX)).unwrap();
        let locs = RecLocations::new(host, KEY.to_vec());
        let longest = locs.location(REC_LOCATION_ACCOUNT_MAX, REC_LOCATION_LOCAL_MAX).unwrap();
        assert!(longest.len() <= LOCATION_LEN_MAX, "{} characters", longest.len());
        assert_eq!(locs.location(REC_LOCATION_ACCOUNT_MAX + 1, 1), None);
        assert_eq!(locs.location(1, REC_LOCATION_LOCAL_MAX + 1), None);
        let loc = locs.location(7, 4242).unwrap();
        let token = loc.rsplit('/').next().unwrap();
        assert_eq!(locs.opens(token), Some((7, 4242)));
        let other = RecLocations::new(LocationHost::parse("pix.example.com").unwrap(), b"another".to_vec());
        assert_eq!(other.opens(token), None, "another key");
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).unwrap();
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 1;
            let bad = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bad);
            assert_eq!(locs.opens(&bad), None, "byte {i}");
        }
        // A cob's token of the same numbers is not a recurrence's.
        assert_eq!(locs.opens(&token_of_cob()), None);
    }

    #[test]
    fn a_whole_location_opens_only_under_its_own_host_and_path() {
        let locs = RecLocations::new(LocationHost::parse("pix.example.com").unwrap(), KEY.to_vec());
        let loc = locs.location(7, 4242).unwrap();
        assert_eq!(locs.opens_location(&loc), Some((7, 4242)));
        assert_eq!(locs.opens_location(&format!("https://{loc}")), Some((7, 4242)));
        let token = loc.rsplit('/').next().unwrap();
        for other in [
            format!("pix.example.org/qr/rec/{token}"),
            format!("pix.example.com/qr/cob/{token}"),
            format!("pix.example.com/rec/{token}"),
            format!("http://{loc}"),
            format!("{loc}x"),
        ] {
            assert_eq!(locs.opens_location(&other), None, "{other}");
        }
    }

    fn token_of_cob() -> String {
        token(KEY, ChargeKind::Cob, 4242, "abc123")
    }

    #[test]
    fn a_token_opens_its_own_charge_and_no_other() {
        let t = token(KEY, ChargeKind::Cob, 42, "abc123");
        assert_eq!(token_local_id(&t), Some(42));
        assert!(opens(KEY, &t, ChargeKind::Cob, 42, "abc123"));
        assert!(!opens(KEY, &t, ChargeKind::Cobv, 42, "abc123"), "a cob's token is not a cobv's");
        assert!(!opens(KEY, &t, ChargeKind::Cob, 43, "abc123"));
        assert!(!opens(KEY, &t, ChargeKind::Cob, 42, "abc124"), "another charge under the same id");
        assert!(!opens(b"another key", &t, ChargeKind::Cob, 42, "abc123"));
        // Any byte changed is refused.
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&t).unwrap();
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 1;
            let bad = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bad);
            let local = token_local_id(&bad).unwrap_or(42);
            assert!(!opens(KEY, &bad, ChargeKind::Cob, local, "abc123"), "byte {i}");
        }
        assert_eq!(token_local_id("not base64!"), None);
        assert_eq!(token_local_id(""), None);
        assert_eq!(token_local_id(&"A".repeat(LOCATION_TOKEN_LEN_MAX + 1)), None);
    }

    #[test]
    fn varints_round_trip_at_their_boundaries_and_only_in_their_shortest_form() {
        for n in [0, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX - 1, u64::MAX] {
            let v = varint(n);
            assert_eq!(read_varint(&v), Some((n, v.len())), "{n}");
        }
        assert_eq!(varint(u64::MAX).len(), 10);
        assert_eq!(read_varint(&[0x80, 0x00]), None, "0 written in two bytes");
        assert_eq!(read_varint(&[0x80]), None, "runs off the end");
        assert_eq!(
            read_varint(&[0xff; 9].iter().copied().chain([0x02]).collect::<Vec<_>>()),
            None,
            "overflows"
        );
    }

    #[test]
    fn the_longest_token_fits_the_longest_host_within_the_api_pix_limit() {
        let t = token(KEY, ChargeKind::Cobv, u64::MAX, "x");
        assert_eq!(t.len(), LOCATION_TOKEN_LEN_MAX);
        let host = format!("{}.br", "h".repeat(LOCATION_HOST_LEN_MAX - 3));
        let host = LocationHost::parse(&host).unwrap();
        assert_eq!(host.location(ChargeKind::Cobv, &t).len(), LOCATION_LEN_MAX);
        let too_long = format!("{}.br", "h".repeat(LOCATION_HOST_LEN_MAX - 2));
        assert_eq!(LocationHost::parse(&too_long), Err(LocationHostError::Length));
    }

    #[test]
    fn a_host_is_a_name_and_perhaps_a_port() {
        let h = LocationHost::parse("Pix.Example.com:8443").unwrap();
        assert_eq!(h.location(ChargeKind::Cob, "T"), "pix.example.com:8443/qr/T");
        assert_eq!(h.location(ChargeKind::Cobv, "T"), "pix.example.com:8443/qr/cobv/T");
        assert_eq!(h.jwks_url(), "https://pix.example.com:8443/qr/jwks");
        assert!(LocationHost::parse("localhost").is_ok());
        for bad in [
            "",
            "https://pix.example.com",
            "pix.example.com/qr",
            "pix..example.com",
            "-pix.com",
            "pix.com:0",
            "pix.com:08443",
            "pix.com:65536",
            "pix.com:",
            "pix com",
        ] {
            assert_eq!(LocationHost::parse(bad), Err(LocationHostError::Shape), "{bad}");
        }
    }
}
