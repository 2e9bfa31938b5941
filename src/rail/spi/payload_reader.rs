//! Reading another institution's dynamic QR code: its payload location is fetched over
//! https, its JWS verified as the Pix security manual asks, and the charge it describes
//! read (`domain::payload`).
//!
//! Verification, in order: the location's TLS certificate is valid for its host (the TLS
//! client checks it against the trusted roots); the JWS header's `jku` is an https URL on
//! the same host; the key the header's `kid` names in that JWK Set is an RSA key whose
//! certificate chain (`x5c`, leaf first) is valid for that host under the same roots, whose
//! leaf certifies exactly that key, and whose thumbprints match the header's `x5t` and
//! `x5t#S256` when it has them; the signature verifies with that key. Any failure refuses
//! the code before anything is debited. The JWK Set is fetched on every read: a payment is
//! one read of it, and a key the receiver rotated is then never missed.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use chrono::{DateTime, Utc};
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::http1::{split_url, Client};
use super::pki::Certificate;
use crate::domain::payload::{read_charge, split_jws, DynamicCharge, JwsAlg, PayloadError};

/// How long a location or its keys may take to answer.
pub const PAYLOAD_READ_TIMEOUT_MS: u64 = 5_000;

/// Reads payload locations, trusting `roots` for their certificates.
pub struct PayloadReader {
    tls: Arc<rustls::ClientConfig>,
    verifier: Arc<rustls::client::WebPkiServerVerifier>,
}

impl std::fmt::Debug for PayloadReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadReader").finish()
    }
}

fn unreachable(e: impl std::fmt::Display) -> PayloadError {
    PayloadError::Unreachable(e.to_string())
}

fn signature(why: impl Into<String>) -> PayloadError {
    PayloadError::Signature(why.into())
}

impl PayloadReader {
    pub fn new(roots: rustls::RootCertStore) -> Result<PayloadReader, String> {
        crate::trust::install_provider();
        let roots = Arc::new(roots);
        let verifier = rustls::client::WebPkiServerVerifier::builder(Arc::clone(&roots))
            .build()
            .map_err(|e| format!("the payload locations' roots: {e}"))?;
        let mut tls = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(PayloadReader { tls: Arc::new(tls), verifier })
    }

    /// GET of an https URL's body (200 only); 404 and 410 mean the charge is gone.
    async fn get(&self, url: &str, accept: &str) -> Result<(String, Vec<u8>), PayloadError> {
        let (host, port, path) = split_url(url).map_err(unreachable)?;
        let client =
            Client::new(Arc::clone(&self.tls), &format!("https://{host}:{port}")).map_err(unreachable)?;
        let path = if path.is_empty() { "/".to_owned() } else { path };
        let res = client
            .send("GET", &path, &[("Accept", accept)], &[], Duration::from_millis(PAYLOAD_READ_TIMEOUT_MS))
            .await
            .map_err(unreachable)?;
        match res.status {
            200 if res.body.len() <= crate::domain::payload::PAYLOAD_BYTES_MAX => Ok((host, res.body)),
            200 => Err(PayloadError::Malformed("it is too large".into())),
            404 | 410 => Err(PayloadError::NotPayable(format!("its location answered {}", res.status))),
            other => Err(PayloadError::Unreachable(format!("its location answered {other}"))),
        }
    }

    /// The charge at `location` (a URL without its scheme, as a BR Code carries it), with
    /// its signature verified, as it stands at `now`.
    pub async fn read(&self, location: &str, now: DateTime<Utc>) -> Result<DynamicCharge, PayloadError> {
        let url = format!("https://{}", location.trim_start_matches("https://"));
        let (host, body) = self.get(&url, "application/jose").await?;
        let text = String::from_utf8(body).map_err(|_| PayloadError::Malformed("it is not text".into()))?;
        let jws = split_jws(&text)?;
        let jku = jws.header["jku"].as_str().ok_or_else(|| signature("the header has no jku"))?;
        let (jku_host, _, _) = split_url(jku).map_err(|_| signature("jku is not an https URL"))?;
        if !jku_host.eq_ignore_ascii_case(&host) {
            return Err(signature(format!("jku is on {jku_host}, not on the location's host {host}")));
        }
        let (_, keys) = self.get(jku, "application/json").await?;
        let keys: Value =
            serde_json::from_slice(&keys).map_err(|_| signature("the JWK Set at jku is not JSON"))?;
        let key = pick_key(&keys, &jws.header)?;
        let (n, e) = self.certified_key(key, &jws.header, &host, now)?;
        let params = match jws.alg {
            JwsAlg::Rs256 => &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            JwsAlg::Ps256 => &ring::signature::RSA_PSS_2048_8192_SHA256,
        };
        ring::signature::RsaPublicKeyComponents { n, e }
            .verify(params, jws.signing_input.as_bytes(), &jws.signature)
            .map_err(|_| signature("the signature does not verify with the published key"))?;
        read_charge(&jws.payload, now)
    }

    /// The key of `jwk` (`n`, `e`), once its certificate chain is valid for `host` and its
    /// leaf certifies that key and matches the header's thumbprints.
    fn certified_key(
        &self,
        jwk: &Value,
        header: &Value,
        host: &str,
        now: DateTime<Utc>,
    ) -> Result<(Vec<u8>, Vec<u8>), PayloadError> {
        let b64url = |v: &Value, what: &str| {
            v.as_str()
                .and_then(|t| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(t).ok())
                .ok_or_else(|| signature(format!("the key's {what} is not base64url")))
        };
        let (n, e) = (b64url(&jwk["n"], "n")?, b64url(&jwk["e"], "e")?);
        let chain: Vec<Vec<u8>> = jwk["x5c"]
            .as_array()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| signature("the key has no x5c certificate chain"))?
            .iter()
            .map(|c| c.as_str().and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok()))
            .collect::<Option<_>>()
            .ok_or_else(|| signature("an x5c certificate is not base64"))?;
        let leaf = Certificate::from_der(&chain[0]).map_err(|e| signature(format!("the x5c leaf: {e}")))?;
        let strip = |b: &[u8]| b.iter().skip_while(|x| **x == 0).copied().collect::<Vec<u8>>();
        if leaf.rsa_components() != Some((strip(&n), strip(&e))) {
            return Err(signature("the x5c leaf does not certify the key's n and e"));
        }
        let sha1 = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &chain[0]);
        let thumbprints = [("x5t", sha1.as_ref().to_vec()), ("x5t#S256", Sha256::digest(&chain[0]).to_vec())];
        for (name, digest) in thumbprints {
            let expected = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
            if header.get(name).is_some_and(|v| v.as_str() != Some(expected.as_str())) {
                return Err(signature(format!("the header's {name} is not the certificate's")));
            }
        }
        let name =
            ServerName::try_from(host.to_owned()).map_err(|_| signature("the host is not a server name"))?;
        let intermediates: Vec<CertificateDer<'_>> =
            chain[1..].iter().map(|c| CertificateDer::from(c.as_slice())).collect();
        let at = UnixTime::since_unix_epoch(Duration::from_secs(u64::try_from(now.timestamp()).unwrap_or(0)));
        self.verifier
            .verify_server_cert(&CertificateDer::from(chain[0].as_slice()), &intermediates, &name, &[], at)
            .map_err(|e| signature(format!("the signing certificate is not valid for {host}: {e}")))?;
        Ok((n, e))
    }
}

/// The RSA key the header names: by `kid` when it has one, else the set's only key.
fn pick_key<'a>(keys: &'a Value, header: &Value) -> Result<&'a Value, PayloadError> {
    let list = keys["keys"].as_array().ok_or_else(|| signature("the JWK Set has no keys"))?;
    let key = match header["kid"].as_str() {
        Some(kid) => list.iter().find(|k| k["kid"].as_str() == Some(kid)),
        None if list.len() == 1 => list.first(),
        None => None,
    }
    .ok_or_else(|| signature("the JWK Set has no key the header names"))?;
    if key["kty"] != "RSA" {
        return Err(signature("the key is not RSA"));
    }
    if key["key_ops"].as_array().is_some_and(|ops| !ops.iter().any(|o| o == "verify")) {
        return Err(signature("the key is not for verifying"));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_picked_by_kid_and_must_be_an_rsa_key_for_verifying() {
        let keys = serde_json::json!({"keys": [
            {"kid": "a", "kty": "RSA", "key_ops": ["verify"]},
            {"kid": "b", "kty": "EC"},
            {"kid": "c", "kty": "RSA", "key_ops": ["sign"]},
        ]});
        let header = |kid: &str| serde_json::json!({"kid": kid});
        assert_eq!(pick_key(&keys, &header("a")).unwrap()["kid"], "a");
        assert!(pick_key(&keys, &header("b")).is_err(), "not RSA");
        assert!(pick_key(&keys, &header("c")).is_err(), "not for verifying");
        assert!(pick_key(&keys, &header("z")).is_err(), "not in the set");
        assert!(pick_key(&keys, &serde_json::json!({})).is_err(), "no kid among several keys");
        let one = serde_json::json!({"keys": [{"kty": "RSA"}]});
        assert!(pick_key(&one, &serde_json::json!({})).is_ok(), "the only key");
    }
}
