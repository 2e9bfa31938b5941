//! Random secrets, their salted hashes, and comparison in constant time.
//!
//! Client secrets are 256 random bits made by the server, so a salted SHA-256 is enough to
//! store them: a slow password hash protects low-entropy human passwords, which these are
//! not. The comparison runs in time independent of where the bytes differ, and an unknown
//! clientId is checked against a dummy hash, so neither timing nor answers tell an attacker
//! which of the two was wrong (decisions.md "Tokens").

use base64::Engine;
use sha2::{Digest, Sha256};

/// Random bytes in a client secret, the admin token and the token-signing key.
pub const SECRET_BYTES: usize = 32;
/// Random bytes in a webhook secret (`whsec_` + base64 of them).
pub const WEBHOOK_SECRET_BYTES: usize = 24;
pub const SALT_BYTES: usize = 16;

/// Fills a buffer from the operating system's generator.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf)?;
    Ok(buf)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new client secret: 43 URL-safe characters.
pub fn new_client_secret() -> Result<String, getrandom::Error> {
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes::<SECRET_BYTES>()?))
}

/// A new admin token, recognisable in logs and secret scanners by its prefix.
pub fn new_admin_token() -> Result<String, getrandom::Error> {
    Ok(format!("pgwadm_{}", new_client_secret()?))
}

/// A new Standard Webhooks secret.
pub fn new_webhook_secret() -> Result<String, getrandom::Error> {
    let raw = random_bytes::<WEBHOOK_SECRET_BYTES>()?;
    Ok(format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(raw)))
}

/// SHA-256 of salt || secret, in hex.
pub fn hash_secret(salt_hex: &str, secret: &str) -> String {
    let mut h = Sha256::new();
    h.update(salt_hex.as_bytes());
    h.update(secret.as_bytes());
    hex(&h.finalize())
}

/// Equality whose running time depends only on the lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks `secret` against a stored salted hash; `None` (unknown client) costs the same
/// work and answers false.
pub fn verify_secret(stored: Option<(&str, &str)>, secret: &str) -> bool {
    const DUMMY_SALT: &str = "00000000000000000000000000000000";
    const DUMMY_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
    let (salt, hash, known) = match stored {
        Some((salt, hash)) => (salt, hash, true),
        None => (DUMMY_SALT, DUMMY_HASH, false),
    };
    let matches = constant_time_eq(hash_secret(salt, secret).as_bytes(), hash.as_bytes());
    matches && known
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_verifies_only_against_its_own_hash() {
        let salt = "abcd";
        let h = hash_secret(salt, "s3cret");
        assert!(verify_secret(Some((salt, &h)), "s3cret"));
        assert!(!verify_secret(Some((salt, &h)), "s3cret!"));
        assert!(!verify_secret(Some(("abce", &h)), "s3cret"));
        assert!(!verify_secret(None, "s3cret"));
    }

    #[test]
    fn constant_time_eq_compares_whole_slices() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn generated_secrets_are_distinct_and_well_formed() {
        let a = new_client_secret().unwrap_or_default();
        let b = new_client_secret().unwrap_or_default();
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
        assert!(new_webhook_secret().unwrap_or_default().starts_with("whsec_"));
        assert!(new_admin_token().unwrap_or_default().starts_with("pgwadm_"));
    }
}
