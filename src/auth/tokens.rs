//! Access tokens: HS256 JWTs signed with a key made on first start (decisions.md "Tokens").
//!
//! Claims: `sub` (account id), `client_id`, `iat`, `exp` = iat + [`TOKEN_TTL_SECONDS`],
//! `jti`, `cnf.x5t#S256` (RFC 8705) binding the token to the certificate it was issued
//! against, and `scope` when the token was asked for with one (absent: every scope of the
//! API Pix, `domain::scope`). Expiry is checked here against the server clock given by the caller, never
//! the system clock, with no leeway: a token is valid while `now < exp`.

use base64::Engine;
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::certificate::Fingerprint;
use crate::domain::ids::{AccountId, ClientId};
use crate::domain::scope::Scopes;

pub const TOKEN_TTL_SECONDS: i64 = 1800;
/// Bytes of a bearer token the server reads at most; longer ones are refused unparsed.
pub const TOKEN_BYTES_MAX: usize = 4096;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Confirmation {
    #[serde(rename = "x5t#S256")]
    pub x5t_s256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Claims {
    pub sub: String,
    pub client_id: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    pub cnf: Confirmation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// Who a verified token speaks for.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenSubject {
    pub account_id: AccountId,
    pub client_id: ClientId,
    pub fingerprint: Fingerprint,
    pub issued_at: i64,
    /// The API Pix's scopes it carries.
    pub scopes: Scopes,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is malformed or its signature is invalid")]
    Invalid,
    #[error("the token has expired")]
    Expired,
}

/// Tokens whose signature was verified, kept so the next request with the same token skips
/// the HMAC, the base64 and the claims' JSON (every authenticated request presents one).
pub const VERIFIED_TOKENS_MAX: usize = 10_000;

pub struct TokenKeys {
    keys: std::sync::RwLock<KeySet>,
    validation: Validation,
    /// Token text -> (subject, exp). Only tokens with a valid signature enter, so no client
    /// can fill it with garbage; it is emptied when full. Expiry is checked on every use.
    verified: std::sync::RwLock<std::collections::HashMap<String, (TokenSubject, i64)>>,
}

/// The key tokens are signed with, and the one before it, whose tokens keep working until
/// they expire (a rotation never logs a client out early; a second one drops it).
struct KeySet {
    encoding: EncodingKey,
    decoding: DecodingKey,
    previous: Option<DecodingKey>,
}

impl TokenKeys {
    pub fn new(secret: &[u8]) -> TokenKeys {
        TokenKeys::with_previous(secret, None)
    }

    /// Keys signing with `secret`, also verifying with `previous`.
    pub fn with_previous(secret: &[u8], previous: Option<&[u8]>) -> TokenKeys {
        let mut validation = Validation::new(Algorithm::HS256);
        // Expiry is ours to check, on the server clock.
        validation.validate_exp = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        TokenKeys {
            keys: std::sync::RwLock::new(KeySet {
                encoding: EncodingKey::from_secret(secret),
                decoding: DecodingKey::from_secret(secret),
                previous: previous.map(DecodingKey::from_secret),
            }),
            validation,
            verified: std::sync::RwLock::default(),
        }
    }

    /// Signs with `secret` from now on; the key signing until now still verifies its tokens.
    /// The caller has stored the new key (and the previous one) durably first.
    pub fn rotate(&self, secret: &[u8], previous: &[u8]) {
        let mut keys = self.keys.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        *keys = KeySet {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            previous: Some(DecodingKey::from_secret(previous)),
        };
        // Tokens of the key before the previous one must not outlive it in the cache.
        self.verified.write().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    /// Signs a token for the subject at `now`; `jti` comes from the caller.
    pub fn issue(
        &self,
        account: AccountId,
        client: ClientId,
        fingerprint: &Fingerprint,
        now: DateTime<Utc>,
        jti: Uuid,
    ) -> Result<String, jsonwebtoken::errors::Error> {
        self.issue_scoped(account, client, fingerprint, now, jti, None)
    }

    /// A token carrying `scopes` alone (`None`: every scope, and no `scope` claim).
    pub fn issue_scoped(
        &self,
        account: AccountId,
        client: ClientId,
        fingerprint: &Fingerprint,
        now: DateTime<Utc>,
        jti: Uuid,
        scopes: Option<Scopes>,
    ) -> Result<String, jsonwebtoken::errors::Error> {
        let iat = now.timestamp();
        let claims = Claims {
            sub: account.to_string(),
            client_id: client.to_string(),
            iat,
            exp: iat + TOKEN_TTL_SECONDS,
            jti: jti.to_string(),
            cnf: Confirmation {
                x5t_s256: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(fingerprint.to_bytes()),
            },
            scope: scopes.map(Scopes::to_text),
        };
        let keys = self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &keys.encoding)
    }

    /// Checks signature, algorithm, claims' shape and expiry at `now`.
    pub fn verify(&self, token: &str, now: DateTime<Utc>) -> Result<TokenSubject, TokenError> {
        if token.len() > TOKEN_BYTES_MAX {
            return Err(TokenError::Invalid);
        }
        let known = self.verified.read().unwrap_or_else(|p| p.into_inner()).get(token).cloned();
        let (subject, exp) = match known {
            Some(known) => known,
            None => {
                let fresh = self.verify_signature(token)?;
                let mut verified = self.verified.write().unwrap_or_else(|p| p.into_inner());
                if verified.len() >= VERIFIED_TOKENS_MAX {
                    verified.clear();
                }
                verified.insert(token.to_owned(), fresh.clone());
                fresh
            }
        };
        if now.timestamp() >= exp {
            return Err(TokenError::Expired);
        }
        Ok(subject)
    }

    /// Checks the signature and the claims' form; answers the subject and its `exp`.
    fn verify_signature(&self, token: &str) -> Result<(TokenSubject, i64), TokenError> {
        let data = {
            let keys = self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            jsonwebtoken::decode::<Claims>(token, &keys.decoding, &self.validation).or_else(|e| {
                match &keys.previous {
                    Some(previous) => jsonwebtoken::decode::<Claims>(token, previous, &self.validation),
                    None => Err(e),
                }
            })
        }
        .map_err(|_| TokenError::Invalid)?;
        let c = data.claims;
        let account_id = c.sub.parse::<AccountId>().map_err(|_| TokenError::Invalid)?;
        let client_id = ClientId::parse(&c.client_id).ok_or(TokenError::Invalid)?;
        let fp_bytes: [u8; 32] = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(c.cnf.x5t_s256.as_bytes())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(TokenError::Invalid)?;
        let scopes = match c.scope.as_deref() {
            None => Scopes::ALL,
            Some(text) => Scopes::parse(text).map_err(|_| TokenError::Invalid)?,
        };
        let subject = TokenSubject {
            account_id,
            client_id,
            fingerprint: Fingerprint::from_digest(&fp_bytes),
            issued_at: c.iat,
            scopes,
        };
        Ok((subject, c.exp))
    }

    /// Signs and verifies one token. jsonwebtoken panics at first use when its crypto
    /// backend is ambiguous (several providers are compiled in); doing it at start turns that into a
    /// start-up failure instead of a panic under load.
    pub fn self_test(&self, now: DateTime<Utc>) -> Result<(), String> {
        let id = AccountId::new(1).ok_or("account id")?;
        let client = ClientId::from_uuid(Uuid::new_v4()).ok_or("client id")?;
        let fp = Fingerprint::from_digest(&[7u8; 32]);
        let token = self.issue(id, client, &fp, now, Uuid::new_v4()).map_err(|e| e.to_string())?;
        let subject = self.verify(&token, now).map_err(|e| e.to_string())?;
        (subject.account_id == id && subject.fingerprint == fp)
            .then_some(())
            .ok_or_else(|| "token self-test round trip differs".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn setup() -> (TokenKeys, DateTime<Utc>, AccountId, ClientId, Fingerprint) {
        let now = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let client = ClientId::parse("3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c").unwrap();
        (
            TokenKeys::new(b"0123456789abcdef0123456789abcdef"),
            now,
            AccountId::new(9).unwrap(),
            client,
            Fingerprint::from_digest(&[3u8; 32]),
        )
    }

    #[test]
    fn a_verified_token_is_answered_from_memory_and_still_expires() {
        let (keys, now, id, client, fp) = setup();
        let t = keys.issue(id, client, &fp, now, Uuid::new_v4()).unwrap();
        assert!(keys.verify(&t, now).is_ok());
        assert_eq!(keys.verified.read().unwrap().len(), 1);
        assert!(keys.verify(&t, now).is_ok(), "from memory");
        let exp = now + Duration::seconds(TOKEN_TTL_SECONDS);
        assert_eq!(keys.verify(&t, exp), Err(TokenError::Expired), "expiry is checked on every use");
        // A forged token never enters.
        // Another signature: a character in its middle changed.
        let at = t.len() - 10;
        let other = if &t[at..=at] == "A" { "B" } else { "A" };
        let forged = format!("{}{other}{}", &t[..at], &t[at + 1..]);
        assert_eq!(keys.verify(&forged, now), Err(TokenError::Invalid));
        assert_eq!(keys.verified.read().unwrap().len(), 1);
    }

    #[test]
    fn a_token_carries_the_scopes_it_was_asked_for_or_all_of_them() {
        let (keys, now, id, client, fp) = setup();
        let all = keys.issue(id, client, &fp, now, Uuid::new_v4()).unwrap();
        assert_eq!(keys.verify(&all, now).unwrap().scopes, Scopes::ALL);
        let some = Scopes::parse("cob.read rec.write").unwrap();
        let t = keys.issue_scoped(id, client, &fp, now, Uuid::new_v4(), Some(some)).unwrap();
        let s = keys.verify(&t, now).unwrap();
        assert_eq!(s.scopes, some);
        assert!(s.scopes.allows("rec.write") && !s.scopes.allows("cob.write"));
    }

    #[test]
    fn a_token_is_valid_until_one_second_before_exp() {
        let (keys, now, id, client, fp) = setup();
        let t = keys.issue(id, client, &fp, now, Uuid::new_v4()).unwrap();
        let s = keys.verify(&t, now).unwrap();
        assert_eq!((s.account_id, s.client_id, s.fingerprint), (id, client, fp));
        let last = now + Duration::seconds(TOKEN_TTL_SECONDS - 1);
        assert!(keys.verify(&t, last).is_ok());
        let exp = now + Duration::seconds(TOKEN_TTL_SECONDS);
        assert_eq!(keys.verify(&t, exp), Err(TokenError::Expired));
    }

    #[test]
    fn a_token_signed_with_another_key_is_invalid() {
        let (keys, now, id, client, fp) = setup();
        let other = TokenKeys::new(b"another key another key another k");
        let t = other.issue(id, client, &fp, now, Uuid::new_v4()).unwrap();
        assert_eq!(keys.verify(&t, now), Err(TokenError::Invalid));
    }

    #[test]
    fn alg_none_and_tampered_tokens_are_invalid() {
        let (keys, now, id, client, fp) = setup();
        let t = keys.issue(id, client, &fp, now, Uuid::new_v4()).unwrap();
        let parts: Vec<&str> = t.split('.').collect();
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let none_header = b64.encode(br#"{"alg":"none","typ":"JWT"}"#);
        assert_eq!(keys.verify(&format!("{none_header}.{}.", parts[1]), now), Err(TokenError::Invalid));
        let mut claims: serde_json::Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
        claims["sub"] = serde_json::json!("10");
        let forged = b64.encode(serde_json::to_vec(&claims).unwrap());
        assert_eq!(
            keys.verify(&format!("{}.{forged}.{}", parts[0], parts[2]), now),
            Err(TokenError::Invalid)
        );
        assert_eq!(keys.verify("not.a.token", now), Err(TokenError::Invalid));
        assert_eq!(keys.verify(&"a".repeat(TOKEN_BYTES_MAX + 1), now), Err(TokenError::Invalid));
    }

    #[test]
    fn the_self_test_passes() {
        let (keys, now, ..) = setup();
        assert_eq!(keys.self_test(now), Ok(()));
    }

    #[test]
    fn a_rotation_keeps_the_previous_keys_tokens_until_a_second_one_drops_them() {
        let (keys, now, id, client, fp) = setup();
        let old = keys.issue(id, client, &fp, now, Uuid::new_v4()).unwrap();
        keys.rotate(b"a second key, also thirty-two byt", b"0123456789abcdef0123456789abcdef");
        let new = keys.issue(id, client, &fp, now, Uuid::new_v4()).unwrap();
        assert!(keys.verify(&old, now).is_ok(), "signed before the rotation, still valid");
        assert!(keys.verify(&new, now).is_ok());
        // A fresh set with the stored keys (a restart) says the same.
        let restarted = TokenKeys::with_previous(
            b"a second key, also thirty-two byt",
            Some(b"0123456789abcdef0123456789abcdef"),
        );
        assert!(restarted.verify(&old, now).is_ok() && restarted.verify(&new, now).is_ok());
        keys.rotate(b"and a third key, thirty-two bytes", b"a second key, also thirty-two byt");
        assert_eq!(keys.verify(&old, now), Err(TokenError::Invalid), "two rotations later");
        assert!(keys.verify(&new, now).is_ok());
        // Expiry is still the token's own.
        assert_eq!(keys.verify(&new, now + Duration::seconds(TOKEN_TTL_SECONDS)), Err(TokenError::Expired));
    }
}
