//! Secrets sealed at rest: the values in the store that would let a reader of the store act
//! as the gateway (the token-signing keys, the payload-location key, every account's webhook
//! secret) are kept encrypted under a key that lives outside the store, in an owner-only
//! file (`serve --secrets-key-file`). A backup, a copy of the data dir or a dump of the
//! database then holds them sealed; the key file is kept and backed up apart.
//!
//! A sealed value is text: `pgwsealed1:{key id}:{base64url(nonce | ciphertext | tag)}`,
//! ChaCha20-Poly1305 (RFC 8439) with a random 96-bit nonce. The key id is the first 8 hex
//! digits of the key's SHA-256, so a value sealed under a key the file lacks is named as
//! such instead of failing as damage. The associated data is the value's place in the store
//! (its key, and for a field its name), so a sealed value copied to another place does not
//! open there.
//!
//! The key file holds one key per line (64 hex digits; `#` starts a comment). The first
//! seals; every line opens, so a new key is put first and the old one kept below it until the
//! start that reseals everything under the new one (docs/deploy.md "Sealing secrets at
//! rest").

use base64::Engine;
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use sha2::{Digest, Sha256};

/// What every sealed value starts with.
pub const SEALED_PREFIX: &str = "pgwsealed1:";
/// Bytes of a sealing key.
pub const SEALING_KEY_BYTES: usize = 32;
/// Keys one key file may hold (the current one and those it replaced).
pub const SEALING_KEYS_MAX: usize = 8;
/// Hex digits of a key id.
const KEY_ID_HEX: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("the key file: {0}")]
    KeyFile(String),
    #[error("sealed under the key {0}, which the key file does not hold")]
    UnknownKey(String),
    #[error("a sealed value is damaged or not in its place")]
    Damaged,
    #[error("a sealed value is found but no key file is configured (--secrets-key-file)")]
    NoKey,
    #[error("random: {0}")]
    Random(String),
}

struct Key {
    id: String,
    key: LessSafeKey,
}

/// The keys of a key file: the first seals, each opens what it sealed.
pub struct SealingKeys {
    keys: Vec<Key>,
}

impl std::fmt::Debug for SealingKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        f.debug_struct("SealingKeys").field("ids", &ids).finish()
    }
}

/// The id of a key: the first hex digits of its SHA-256.
fn key_id(key: &[u8]) -> String {
    crate::auth::secrets::hex(&Sha256::digest(key))[..KEY_ID_HEX].to_owned()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

impl SealingKeys {
    /// Reads a key file's text.
    pub fn parse(text: &str) -> Result<SealingKeys, SealError> {
        let mut keys = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let bytes = decode_hex(line).filter(|b| b.len() == SEALING_KEY_BYTES).ok_or_else(|| {
                SealError::KeyFile(format!("a line is not {SEALING_KEY_BYTES} bytes in hex"))
            })?;
            let unbound = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
                .map_err(|_| SealError::KeyFile("a key is refused by the cipher".into()))?;
            keys.push(Key { id: key_id(&bytes), key: LessSafeKey::new(unbound) });
        }
        if keys.is_empty() {
            return Err(SealError::KeyFile("it holds no key".into()));
        }
        if keys.len() > SEALING_KEYS_MAX {
            return Err(SealError::KeyFile(format!("it holds more than {SEALING_KEYS_MAX} keys")));
        }
        Ok(SealingKeys { keys })
    }

    /// Reads a key file, which its group and others must not be able to read.
    pub fn read_file(path: &std::path::Path) -> Result<SealingKeys, SealError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SealError::KeyFile(format!("{}: {e}", path.display())))?;
        if !crate::private::is_owner_only(path) {
            return Err(SealError::KeyFile(format!(
                "{}: its group or others may read it: chmod 600 it",
                path.display()
            )));
        }
        SealingKeys::parse(&text)
    }

    /// The id of the key that seals.
    pub fn current_id(&self) -> &str {
        &self.keys[0].id
    }

    /// Seals `clear` for the place `place` with the given nonce (which must never repeat
    /// under one key: [`SealingKeys::seal`] draws it at random).
    pub fn seal_with_nonce(&self, place: &[u8], clear: &[u8], nonce: [u8; NONCE_LEN]) -> String {
        let key = &self.keys[0];
        let mut sealed = clear.to_vec();
        // Sealing fails only for a message longer than the cipher's 256 GiB limit.
        let tag = key
            .key
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(place), &mut sealed)
            .unwrap_or_else(|_| unreachable!("a secret is far below ChaCha20-Poly1305's limit"));
        let mut body = nonce.to_vec();
        body.extend_from_slice(&sealed);
        body.extend_from_slice(tag.as_ref());
        format!("{SEALED_PREFIX}{}:{}", key.id, base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(body))
    }

    /// Seals `clear` for `place` with a random nonce.
    pub fn seal(&self, place: &[u8], clear: &[u8]) -> Result<String, SealError> {
        let nonce = crate::auth::secrets::random_bytes::<NONCE_LEN>()
            .map_err(|e| SealError::Random(e.to_string()))?;
        Ok(self.seal_with_nonce(place, clear, nonce))
    }

    /// Opens what [`SealingKeys::seal`] made for `place`.
    pub fn open(&self, place: &[u8], sealed: &str) -> Result<Vec<u8>, SealError> {
        let rest = sealed.strip_prefix(SEALED_PREFIX).ok_or(SealError::Damaged)?;
        let (id, body) = rest.split_once(':').ok_or(SealError::Damaged)?;
        let key =
            self.keys.iter().find(|k| k.id == id).ok_or_else(|| SealError::UnknownKey(id.to_owned()))?;
        let body =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(body).map_err(|_| SealError::Damaged)?;
        if body.len() < NONCE_LEN + aead::MAX_TAG_LEN {
            return Err(SealError::Damaged);
        }
        let (nonce, sealed) = body.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Damaged)?;
        let mut buf = sealed.to_vec();
        let clear =
            key.key.open_in_place(nonce, Aad::from(place), &mut buf).map_err(|_| SealError::Damaged)?;
        Ok(clear.to_vec())
    }
}

/// Whether a stored value is sealed.
pub fn is_sealed(stored: &[u8]) -> bool {
    stored.starts_with(SEALED_PREFIX.as_bytes())
}

/// The id of the key a sealed value was sealed under.
pub fn sealed_with(stored: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(stored).ok()?.strip_prefix(SEALED_PREFIX)?;
    text.split_once(':').map(|(id, _)| id)
}

/// The text of a new key file: one random key, with a comment saying what it is.
pub fn new_key_file() -> Result<String, getrandom::Error> {
    let key = crate::auth::secrets::random_bytes::<SEALING_KEY_BYTES>()?;
    Ok(format!(
        "# pixgw secrets key {} (serve --secrets-key-file); keep it apart from the store and its backups\n{}\n",
        key_id(&key),
        crate::auth::secrets::hex(&key)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const K2: &str = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100";

    fn keys(text: &str) -> SealingKeys {
        SealingKeys::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_sealed_value_opens_in_its_place_and_nowhere_else() {
        let k = keys(K1);
        let sealed = k.seal_with_nonce(b"meta/jwt_key", b"the secret", [7; NONCE_LEN]);
        assert!(is_sealed(sealed.as_bytes()));
        assert!(!sealed.contains("the secret"));
        assert_eq!(k.open(b"meta/jwt_key", &sealed), Ok(b"the secret".to_vec()));
        assert_eq!(k.open(b"meta/location_key", &sealed), Err(SealError::Damaged));
    }

    #[test]
    fn one_changed_character_is_refused() {
        let k = keys(K1);
        let sealed = k.seal_with_nonce(b"p", b"the secret", [1; NONCE_LEN]);
        let last = sealed.chars().last().unwrap_or('A');
        let mut forged = sealed[..sealed.len() - 1].to_owned();
        forged.push(if last == 'A' { 'B' } else { 'A' });
        assert_eq!(k.open(b"p", &forged), Err(SealError::Damaged));
        assert_eq!(k.open(b"p", "pgwsealed1:"), Err(SealError::Damaged));
        assert_eq!(k.open(b"p", "the secret"), Err(SealError::Damaged));
    }

    #[test]
    fn a_value_sealed_under_another_key_names_that_key() {
        let sealed = keys(K2).seal_with_nonce(b"p", b"s", [0; NONCE_LEN]);
        let id = sealed_with(sealed.as_bytes()).unwrap_or_default().to_owned();
        assert_eq!(id, key_id(&decode_hex(K2).unwrap_or_default()));
        assert_eq!(keys(K1).open(b"p", &sealed), Err(SealError::UnknownKey(id)));
    }

    #[test]
    fn the_first_key_seals_and_every_key_opens() {
        let old = keys(K1).seal_with_nonce(b"p", b"old", [0; NONCE_LEN]);
        let both = keys(&format!("# new first\n{K2}\n\n{K1}\n"));
        assert_eq!(both.open(b"p", &old), Ok(b"old".to_vec()));
        let new = both.seal_with_nonce(b"p", b"new", [0; NONCE_LEN]);
        assert_eq!(sealed_with(new.as_bytes()), Some(both.current_id()));
        assert_eq!(both.current_id(), key_id(&decode_hex(K2).unwrap_or_default()));
    }

    #[test]
    fn a_key_file_holds_one_to_eight_keys_of_32_bytes() {
        assert!(matches!(SealingKeys::parse(""), Err(SealError::KeyFile(_))));
        assert!(matches!(SealingKeys::parse("# nothing\n"), Err(SealError::KeyFile(_))));
        assert!(matches!(SealingKeys::parse(&K1[..62]), Err(SealError::KeyFile(_))));
        assert!(matches!(SealingKeys::parse(&format!("{K1}00")), Err(SealError::KeyFile(_))));
        assert!(matches!(SealingKeys::parse(&K1.replace('0', "g")), Err(SealError::KeyFile(_))));
        let eight = [K1; SEALING_KEYS_MAX].join("\n");
        assert!(SealingKeys::parse(&eight).is_ok());
        assert!(matches!(SealingKeys::parse(&format!("{eight}\n{K2}")), Err(SealError::KeyFile(_))));
    }

    #[test]
    fn a_new_key_file_reads_back_and_seals() {
        let text = new_key_file().unwrap_or_default();
        let k = keys(&text);
        let sealed = k.seal(b"p", b"s").unwrap_or_default();
        assert_eq!(k.open(b"p", &sealed), Ok(b"s".to_vec()));
        assert!(text.contains(k.current_id()));
    }

    #[test]
    fn clear_values_are_not_taken_for_sealed_ones() {
        assert!(!is_sealed(b"whsec_abc"));
        assert!(!is_sealed(&[0u8; 32]));
        assert_eq!(sealed_with(b"whsec_abc"), None);
    }
}
