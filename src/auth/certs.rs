//! Client certificates: reading the `X-SSL-Client-Cert` header and PEM text, and making the
//! Demo account's certificate on first start.
//!
//! The header carries a URL-encoded PEM. Every `+` of the base64 body must arrive as `%2B`;
//! one sent as `%20` (or as a raw space) decodes to a space inside the base64, which this
//! reader refuses as a malformed PEM instead of silently skipping it (interface.md
//! "Authentication").

use base64::Engine;
use chrono::{DateTime, Utc};
use percent_encoding::percent_decode_str;
use sha2::{Digest, Sha256};

use crate::domain::certificate::{Fingerprint, Validity};

/// Bytes of a PEM (decoded header or admin body) the server reads at most.
pub const PEM_BYTES_MAX: usize = 16 * 1024;

const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const END: &str = "-----END CERTIFICATE-----";

/// What the gateway keeps of a parsed certificate.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCert {
    pub fingerprint: Fingerprint,
    pub validity: Validity,
    pub subject: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct MalformedPem(pub &'static str);

/// Decodes the URL-encoded header value and parses the certificate in it.
pub fn parse_header(value: &str) -> Result<ParsedCert, MalformedPem> {
    let decoded = percent_decode_str(value)
        .decode_utf8()
        .map_err(|_| MalformedPem("the header is not valid URL-encoded UTF-8"))?;
    parse_pem(&decoded)
}

/// Parses the first certificate of a PEM text.
pub fn parse_pem(pem: &str) -> Result<ParsedCert, MalformedPem> {
    if pem.len() > PEM_BYTES_MAX {
        return Err(MalformedPem("the certificate is too large"));
    }
    let start = pem.find(BEGIN).ok_or(MalformedPem("no BEGIN CERTIFICATE line"))?;
    let rest = &pem[start + BEGIN.len()..];
    let end = rest.find(END).ok_or(MalformedPem("no END CERTIFICATE line"))?;
    let body: String = rest[..end].chars().filter(|c| *c != '\n' && *c != '\r').collect();
    if !body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=') {
        return Err(MalformedPem(
            "the base64 body has characters outside base64, a space most often: a '+' sent unencoded \
             (which URL decoding reads as a space) or as %20; send it as %2B",
        ));
    }
    let der = base64::engine::general_purpose::STANDARD
        .decode(body.as_bytes())
        .map_err(|_| MalformedPem("the base64 body does not decode"))?;
    parse_der(&der)
}

pub fn parse_der(der: &[u8]) -> Result<ParsedCert, MalformedPem> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|_| MalformedPem("the DER is not an X.509 certificate"))?;
    if !rest.is_empty() {
        return Err(MalformedPem("trailing bytes after the certificate"));
    }
    let to_utc = |t: x509_parser::time::ASN1Time| {
        DateTime::<Utc>::from_timestamp(t.timestamp(), 0)
            .ok_or(MalformedPem("the validity dates are out of range"))
    };
    let validity = Validity {
        not_before: to_utc(cert.validity().not_before)?,
        not_after: to_utc(cert.validity().not_after)?,
    };
    let digest: [u8; 32] = Sha256::digest(der).into();
    Ok(ParsedCert {
        fingerprint: Fingerprint::from_digest(&digest),
        validity,
        subject: cert.subject().to_string(),
    })
}

/// A self-signed client certificate and its private key, both PEM.
pub struct GeneratedCert {
    pub cert_pem: String,
    pub key_pem: String,
}

/// Makes a self-signed ECDSA P-256 client certificate valid from `not_before` to
/// `not_after` (the Demo account's, and the tests').
pub fn generate(
    common_name: &str,
    not_before: DateTime<Utc>,
    not_after: DateTime<Utc>,
) -> Result<GeneratedCert, rcgen::Error> {
    let to_time = |t: DateTime<Utc>| {
        time::OffsetDateTime::from_unix_timestamp(t.timestamp()).unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
    };
    let mut params = rcgen::CertificateParams::new(vec![common_name.to_owned()])?;
    params.distinguished_name.push(rcgen::DnType::CommonName, common_name);
    params.not_before = to_time(not_before);
    params.not_after = to_time(not_after);
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(GeneratedCert { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// URL-encodes a PEM for the `X-SSL-Client-Cert` header: everything but unreserved
/// characters is percent-encoded, so `+` becomes `%2B`.
pub fn url_encode_pem(pem: &str) -> String {
    percent_encoding::utf8_percent_encode(pem, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn demo() -> Option<(GeneratedCert, DateTime<Utc>)> {
        let now = DateTime::<Utc>::from_timestamp(1_800_000_000, 0)?;
        let c = generate("test", now - Duration::days(1), now + Duration::days(1)).ok()?;
        Some((c, now))
    }

    #[test]
    fn a_generated_certificate_parses_back_with_its_window() {
        let (c, now) = demo().unwrap_or_else(|| unreachable!());
        let p = parse_pem(&c.cert_pem).map_err(|e| e.0);
        let p = p.unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(p.validity.not_before, now - Duration::days(1));
        assert_eq!(p.validity.not_after, now + Duration::days(1));
        assert!(p.subject.contains("test"));
    }

    #[test]
    fn the_url_encoded_header_form_parses_and_gives_the_same_fingerprint() {
        let (c, _) = demo().unwrap_or_else(|| unreachable!());
        let a = parse_pem(&c.cert_pem).ok().map(|p| p.fingerprint);
        let b = parse_header(&url_encode_pem(&c.cert_pem)).ok().map(|p| p.fingerprint);
        assert!(a.is_some());
        assert_eq!(a, b);
    }

    #[test]
    fn a_plus_sent_as_a_space_is_malformed() {
        // Find a generated certificate whose base64 has a '+', as real ones mostly do.
        for _ in 0..50 {
            let (c, _) = demo().unwrap_or_else(|| unreachable!());
            if !c.cert_pem.contains('+') {
                continue;
            }
            let wrong = url_encode_pem(&c.cert_pem).replace("%2B", "%20");
            assert!(parse_header(&wrong).is_err());
            return;
        }
        unreachable!("no certificate with a '+' in 50 tries");
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(parse_pem("hello").is_err());
        assert!(parse_pem(&format!("{BEGIN}\nAAAA\n{END}\n")).is_err());
        assert!(parse_header("%FF%FE").is_err());
        assert!(parse_pem(&"A".repeat(PEM_BYTES_MAX + 1)).is_err());
    }
}
