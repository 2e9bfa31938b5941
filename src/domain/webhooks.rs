//! Webhooks as the domain sees them: the configurable event types, the rules of a
//! configuration (decisions.md "Webhooks"), and the Standard Webhooks signature.
//!
//! Signature: `webhook-signature` = `v1,` + base64(HMAC-SHA256(key, id + "." + timestamp +
//! "." + body)), where the key is the base64 part of the account's `whsec_` secret. A test
//! reproduces the specification's published vector, which is what tells that a receiver's
//! own library will accept what we send.

use base64::Engine;
use sha2::{Digest, Sha256};

use super::events::EventType;

/// Custom headers on one configuration.
pub const WEBHOOK_HEADERS_MAX: usize = 5;
/// Characters of a webhook URL.
pub const WEBHOOK_URL_LEN_MAX: usize = 2048;
/// Characters of a custom header's value.
pub const WEBHOOK_HEADER_VALUE_LEN_MAX: usize = 1024;

/// Header names a configuration may not set: transport headers (decisions.md "Webhooks") and the
/// signature headers, which only the gateway writes.
pub const BLOCKED_HEADERS: [&str; 9] = [
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "content-type",
    "user-agent",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
];

impl EventType {
    pub fn parse(text: &str) -> Option<EventType> {
        Some(match text {
            "cash_in" => EventType::CashIn,
            "cash_out" => EventType::CashOut,
            "refund_in" => EventType::RefundIn,
            "refund_out" => EventType::RefundOut,
            "med_created" => EventType::MedCreated,
            "med_accepted" => EventType::MedAccepted,
            "med_rejected" => EventType::MedRejected,
            "rec" => EventType::Rec,
            "cobr" => EventType::Cobr,
            "claim" => EventType::Claim,
            "recovery" => EventType::Recovery,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::CashIn => "cash_in",
            EventType::CashOut => "cash_out",
            EventType::RefundIn => "refund_in",
            EventType::RefundOut => "refund_out",
            EventType::MedCreated => "med_created",
            EventType::MedAccepted => "med_accepted",
            EventType::MedRejected => "med_rejected",
            EventType::Rec => "rec",
            EventType::Cobr => "cobr",
            EventType::Claim => "claim",
            EventType::Recovery => "recovery",
        }
    }
}

/// Why a custom header is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("is not a valid header name")]
    BadName,
    #[error("is reserved and cannot be set")]
    Blocked,
    #[error("must be printable text of at most 1024 characters")]
    BadValue,
}

/// Checks one custom header (name per RFC 9110 `token`).
pub fn check_header(name: &str, value: &str) -> Result<(), HeaderError> {
    const TOKEN_EXTRA: &[u8] = b"!#$%&'*+-.^_`|~";
    let name_ok =
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || TOKEN_EXTRA.contains(&b));
    if !name_ok {
        return Err(HeaderError::BadName);
    }
    if BLOCKED_HEADERS.iter().any(|b| b.eq_ignore_ascii_case(name)) {
        return Err(HeaderError::Blocked);
    }
    let value_ok = value.len() <= WEBHOOK_HEADER_VALUE_LEN_MAX
        && value.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
    if !value_ok {
        return Err(HeaderError::BadValue);
    }
    Ok(())
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let ipad: Vec<u8> = k.iter().map(|b| b ^ 0x36).collect();
    let opad: Vec<u8> = k.iter().map(|b| b ^ 0x5c).collect();
    let inner = Sha256::new().chain_update(&ipad).chain_update(message).finalize();
    Sha256::new().chain_update(&opad).chain_update(inner).finalize().into()
}

/// The signing key of a `whsec_` secret: its base64 part, decoded.
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    let b64 = secret.strip_prefix("whsec_").unwrap_or(secret);
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// The `webhook-signature` header value for one delivery.
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut signed = Vec::with_capacity(id.len() + body.len() + 24);
    signed.extend_from_slice(id.as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(timestamp.to_string().as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(body);
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(hmac_sha256(key, &signed)))
}

/// Whether a `webhook-signature` header (one or more space-separated `v1,<base64>`
/// signatures, as Standard Webhooks allows during a secret rotation) signs this delivery.
/// The comparison takes the same time wherever the strings differ.
pub fn verify(key: &[u8], id: &str, timestamp: i64, body: &[u8], header: &str) -> bool {
    let expected = sign(key, id, timestamp, body);
    header.split_whitespace().fold(false, |found, candidate| found | constant_time_eq(candidate, &expected))
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_webhooks_published_vector_reproduces() {
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let got = sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, br#"{"test": 2432232314}"#);
        assert_eq!(got, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn verification_accepts_any_listed_signature_and_nothing_else() {
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let good = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert!(verify(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body, good));
        assert!(verify(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            body,
            &format!("v1,old= {good}")
        ));
        assert!(!verify(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_331, body, good));
        assert!(!verify(&key, "msg_other", 1_614_265_330, body, good));
        assert!(!verify(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, b"{}", good));
        assert!(!verify(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body, ""));
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        // Test case 6: a key longer than the block.
        let mac = hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    #[test]
    fn event_types_round_trip() {
        for t in
            ["cash_in", "cash_out", "refund_in", "refund_out", "med_created", "med_accepted", "med_rejected"]
        {
            assert_eq!(EventType::parse(t).map(EventType::as_str), Some(t));
        }
        assert_eq!(EventType::parse("CASH_IN"), None);
    }

    #[test]
    fn custom_headers_are_checked() {
        assert_eq!(check_header("X-Tenant", "acme"), Ok(()));
        for blocked in BLOCKED_HEADERS {
            assert_eq!(check_header(&blocked.to_uppercase(), "x"), Err(HeaderError::Blocked), "{blocked}");
        }
        assert_eq!(check_header("bad name", "x"), Err(HeaderError::BadName));
        assert_eq!(check_header("", "x"), Err(HeaderError::BadName));
        assert_eq!(check_header("X-A", "line\nbreak"), Err(HeaderError::BadValue));
        assert_eq!(check_header("X-A", &"v".repeat(1025)), Err(HeaderError::BadValue));
    }
}
