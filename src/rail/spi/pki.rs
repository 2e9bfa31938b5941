//! The participant's keys and the certificates it trusts on the rails: reading them from
//! PEM files, naming a certificate as XML signatures name it (issuer and decimal serial),
//! signing with RSA-SHA256 and checking such a signature.
//!
//! Signing uses ring (constant time, the provider rustls already runs on). Making a key is
//! only for `pixgw spi-sim`'s local PKI and for tests: ring cannot make RSA keys, so the `rsa`
//! crate (already built for the token library) does that one job.

use std::path::Path;

use ring::signature::{RsaKeyPair, UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256, RSA_PKCS1_SHA256};
use x509_parser::prelude::{FromDer, X509Certificate, X509Name};

/// The smallest RSA key accepted, in bits (the security manual's floor).
pub const RSA_BITS_MIN: usize = 2048;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PkiError {
    #[error("reading {0}: {1}")]
    Read(String, String),
    #[error("{0} holds no {1}")]
    Missing(String, &'static str),
    #[error("{0}: {1}")]
    Invalid(String, String),
}

/// A certificate as a signature's `KeyInfo` names it, with the key it certifies.
#[derive(Clone, PartialEq, Eq)]
pub struct Certificate {
    /// The issuer's distinguished name, most specific first (`CN=..., O=..., C=BR`).
    pub issuer: String,
    /// The subject's distinguished name, written the same way.
    pub subject: String,
    /// The serial number in decimal.
    pub serial: String,
    /// The RSA public key (PKCS#1 `RSAPublicKey`, DER).
    public_key: Vec<u8>,
    /// The whole certificate (DER).
    pub der: Vec<u8>,
}

impl std::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate").field("subject", &self.subject).field("serial", &self.serial).finish()
    }
}

impl Certificate {
    pub fn from_der(der: &[u8]) -> Result<Certificate, PkiError> {
        let (_, cert) = X509Certificate::from_der(der)
            .map_err(|e| PkiError::Invalid("a certificate".into(), e.to_string()))?;
        let spki = cert.public_key();
        let is_rsa = spki.algorithm.algorithm == x509_parser::oid_registry::OID_PKCS1_RSAENCRYPTION;
        if !is_rsa {
            return Err(PkiError::Invalid(dn(cert.subject()), "the key is not RSA".into()));
        }
        Ok(Certificate {
            issuer: dn(cert.issuer()),
            subject: dn(cert.subject()),
            serial: cert.tbs_certificate.serial.to_string(),
            public_key: spki.subject_public_key.data.to_vec(),
            der: der.to_vec(),
        })
    }

    /// Every certificate of a PEM text.
    pub fn all_from_pem(pem: &[u8], what: &str) -> Result<Vec<Certificate>, PkiError> {
        let mut out = Vec::new();
        for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
            let block = block.map_err(|e| PkiError::Invalid(what.into(), e.to_string()))?;
            if block.label == "CERTIFICATE" {
                out.push(Certificate::from_der(&block.contents)?);
            }
        }
        if out.is_empty() {
            return Err(PkiError::Missing(what.into(), "CERTIFICATE"));
        }
        Ok(out)
    }

    pub fn from_pem_file(path: &Path) -> Result<Vec<Certificate>, PkiError> {
        let what = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| PkiError::Read(what.clone(), e.to_string()))?;
        Certificate::all_from_pem(&bytes, &what)
    }

    /// The RSA key's modulus and public exponent, big-endian without leading zeros (as a
    /// JWK's `n` and `e` carry them).
    pub fn rsa_components(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let (_, cert) = X509Certificate::from_der(&self.der).ok()?;
        match cert.public_key().parsed().ok()? {
            x509_parser::public_key::PublicKey::RSA(k) => {
                let strip = |b: &[u8]| b.iter().skip_while(|x| **x == 0).copied().collect::<Vec<u8>>();
                Some((strip(k.modulus), strip(k.exponent)))
            }
            _ => None,
        }
    }

    /// Whether `signature` is this certificate's key's RSA-SHA256 signature of `data`.
    pub fn verifies(&self, data: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &self.public_key).verify(data, signature).is_ok()
    }

    /// Whether `issuer` (as a `KeyInfo` writes it) and `serial` name this certificate. Names
    /// are compared attribute by attribute, ignoring the space after each comma, which
    /// writers differ on.
    pub fn is_named(&self, issuer: &str, serial: &str) -> bool {
        self.serial == serial.trim() && same_dn(&self.issuer, issuer)
    }
}

/// The key the participant signs with, and the certificate that names it.
pub struct Signer {
    key: RsaKeyPair,
    pub cert: Certificate,
    rng: ring::rand::SystemRandom,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("cert", &self.cert).finish()
    }
}

impl Signer {
    /// A signer from a PKCS#8 or PKCS#1 key and its certificate (both PEM).
    pub fn from_pem(key_pem: &[u8], cert_pem: &[u8], what: &str) -> Result<Signer, PkiError> {
        let cert = Certificate::all_from_pem(cert_pem, what)?.remove(0);
        let mut key = None;
        for block in x509_parser::pem::Pem::iter_from_buffer(key_pem) {
            let block = block.map_err(|e| PkiError::Invalid(what.into(), e.to_string()))?;
            key = match block.label.as_str() {
                "PRIVATE KEY" => Some(RsaKeyPair::from_pkcs8(&block.contents)),
                "RSA PRIVATE KEY" => Some(RsaKeyPair::from_der(&block.contents)),
                _ => continue,
            };
            break;
        }
        let key = key
            .ok_or(PkiError::Missing(what.into(), "PRIVATE KEY"))?
            .map_err(|e| PkiError::Invalid(what.into(), format!("the RSA key is not usable: {e}")))?;
        if key.public().modulus_len() * 8 < RSA_BITS_MIN {
            return Err(PkiError::Invalid(
                what.into(),
                format!("the key has fewer than {RSA_BITS_MIN} bits"),
            ));
        }
        if key.public().as_ref() != cert.public_key.as_slice() {
            return Err(PkiError::Invalid(what.into(), "the certificate does not certify this key".into()));
        }
        Ok(Signer { key, cert, rng: ring::rand::SystemRandom::new() })
    }

    pub fn from_files(key: &Path, cert: &Path) -> Result<Signer, PkiError> {
        let read =
            |p: &Path| std::fs::read(p).map_err(|e| PkiError::Read(p.display().to_string(), e.to_string()));
        Signer::from_pem(&read(key)?, &read(cert)?, &key.display().to_string())
    }

    /// The RSA-SHA256 (PKCS#1 v1.5) signature of `data`.
    pub fn sign(&self, data: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; self.key.public().modulus_len()];
        // Fails only for a buffer of the wrong size, which `modulus_len` rules out.
        if self.key.sign(&RSA_PKCS1_SHA256, &self.rng, data, &mut out).is_err() {
            out.clear();
        }
        out
    }
}

/// A distinguished name written as the Pix messages write it: most specific attribute
/// first, `TYPE=value` joined by `", "`.
pub fn dn(name: &X509Name) -> String {
    let mut parts: Vec<String> = Vec::new();
    for rdn in name.iter() {
        for attr in rdn.iter() {
            let oid = attr.attr_type();
            let ty = x509_parser::objects::oid2abbrev(oid, x509_parser::objects::oid_registry())
                .map(str::to_owned)
                .unwrap_or_else(|_| oid.to_id_string());
            let value = attr.as_str().map(str::to_owned).unwrap_or_default();
            parts.push(format!("{ty}={}", value.replace(',', "\\,")));
        }
    }
    parts.reverse();
    parts.join(", ")
}

/// Whether two names written as `TYPE=value, ...` are the same, attribute by attribute.
fn same_dn(a: &str, b: &str) -> bool {
    fn parts(s: &str) -> Vec<(String, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for (i, &c) in bytes.iter().enumerate() {
            if c == b',' && (i == 0 || bytes[i - 1] != b'\\') {
                out.push(&s[start..i]);
                start = i + 1;
            }
        }
        out.push(&s[start..]);
        out.into_iter()
            .map(|p| {
                let p = p.trim();
                match p.split_once('=') {
                    Some((t, v)) => (t.trim().to_ascii_uppercase(), v.trim()),
                    None => (String::new(), p),
                }
            })
            .collect()
    }
    parts(a) == parts(b)
}

/// A certificate authority made here: `pixgw spi-sim`'s local PKI, and the tests'. Its keys
/// are RSA, as the security manual asks of every key on the rails.
pub struct Authority {
    params: rcgen::CertificateParams,
    key: rcgen::KeyPair,
    pub cert_pem: String,
}

/// A key and the certificate an [`Authority`] issued for it, both PEM.
#[derive(Clone)]
pub struct Issued {
    pub key_pem: String,
    pub cert_pem: String,
}

/// What an issued certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// A TLS server (with these DNS names and addresses) that also signs messages.
    Server,
    /// A TLS client that also signs messages.
    Client,
}

impl Authority {
    /// A new self-signed CA valid over `[not_before, not_after]`.
    pub fn new(
        name: &str,
        not_before: time::OffsetDateTime,
        not_after: time::OffsetDateTime,
    ) -> Result<Authority, PkiError> {
        let key = rsa_key_pair()?;
        let params = Authority::params(name, not_before, not_after)?;
        let cert = params.self_signed(&key).map_err(rcgen_error)?;
        Ok(Authority { params, key, cert_pem: cert.pem() })
    }

    /// A CA made before by [`Authority::new`], from its certificate and key: what it issues
    /// now chains to the same certificate.
    pub fn load(cert_pem: &str, key_pem: &str) -> Result<Authority, PkiError> {
        let cert = Certificate::all_from_pem(cert_pem.as_bytes(), "the CA certificate")?.remove(0);
        let (_, parsed) = X509Certificate::from_der(&cert.der)
            .map_err(|e| PkiError::Invalid("the CA certificate".into(), e.to_string()))?;
        let name = parsed
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .ok_or(PkiError::Missing("the CA certificate".into(), "common name"))?
            .to_owned();
        let at = |t: x509_parser::time::ASN1Time| time::OffsetDateTime::from_unix_timestamp(t.timestamp());
        let validity = parsed.validity();
        let (Ok(not_before), Ok(not_after)) = (at(validity.not_before), at(validity.not_after)) else {
            return Err(PkiError::Invalid(
                "the CA certificate".into(),
                "its validity is out of range".into(),
            ));
        };
        let key =
            rcgen::KeyPair::from_pem_and_sign_algo(key_pem, &rcgen::PKCS_RSA_SHA256).map_err(rcgen_error)?;
        let params = Authority::params(&name, not_before, not_after)?;
        Ok(Authority { params, key, cert_pem: cert_pem.to_owned() })
    }

    /// The CA's key (PKCS#8 PEM), to keep beside its certificate.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    fn params(
        name: &str,
        not_before: time::OffsetDateTime,
        not_after: time::OffsetDateTime,
    ) -> Result<rcgen::CertificateParams, PkiError> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
        // The most general attribute first in the certificate, as ICP-Brasil's are (rcgen
        // starts with a common name of its own).
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "pixgw local PKI");
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        params.not_before = not_before;
        params.not_after = not_after;
        params.serial_number = Some(rcgen::SerialNumber::from(1u64));
        Ok(params)
    }

    /// Issues a certificate for a fresh RSA key: `name` is its common name, `hosts` its DNS
    /// names or IP addresses, `serial` its serial number.
    pub fn issue(&self, name: &str, hosts: &[&str], serial: u64, usage: Usage) -> Result<Issued, PkiError> {
        let key = rsa_key_pair()?;
        let sans: Vec<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
        let mut params = rcgen::CertificateParams::new(sans).map_err(rcgen_error)?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "pixgw local PKI");
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.not_before = self.params.not_before;
        params.not_after = self.params.not_after;
        params.serial_number = Some(rcgen::SerialNumber::from(serial));
        params.key_usages =
            vec![rcgen::KeyUsagePurpose::DigitalSignature, rcgen::KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = match usage {
            Usage::Server => {
                vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth, rcgen::ExtendedKeyUsagePurpose::ClientAuth]
            }
            Usage::Client => vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth],
        };
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(rcgen_error)?;
        Ok(Issued { key_pem: key.serialize_pem(), cert_pem: cert.pem() })
    }
}

fn rcgen_error(e: rcgen::Error) -> PkiError {
    PkiError::Invalid("a certificate of the local PKI".into(), e.to_string())
}

fn rsa_key_pair() -> Result<rcgen::KeyPair, PkiError> {
    let der = generate_rsa_pkcs8(RSA_BITS_MIN)?;
    rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&der.as_slice().into(), &rcgen::PKCS_RSA_SHA256)
        .map_err(rcgen_error)
}

/// A fresh RSA key (PKCS#8 DER) of `bits`, for the simulator's PKI and tests.
pub fn generate_rsa_pkcs8(bits: usize) -> Result<Vec<u8>, PkiError> {
    use rsa::pkcs8::EncodePrivateKey;
    let key = rsa::RsaPrivateKey::new(&mut OsRandom, bits)
        .map_err(|e| PkiError::Invalid("a new RSA key".into(), e.to_string()))?;
    let der = key.to_pkcs8_der().map_err(|e| PkiError::Invalid("a new RSA key".into(), e.to_string()))?;
    Ok(der.as_bytes().to_vec())
}

/// The operating system's random source, for the `rsa` crate's key generation.
struct OsRandom;

impl rsa::rand_core::RngCore for OsRandom {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill_bytes(&mut b);
        u32::from_le_bytes(b)
    }

    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        // A machine without a random source cannot make keys at all; failing loudly beats
        // a key from zeros.
        #[allow(clippy::expect_used)]
        getrandom::fill(dest).expect("the operating system's random source failed");
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rsa::rand_core::Error> {
        getrandom::fill(dest).map_err(|_| rsa::rand_core::Error::from(std::num::NonZeroU32::MIN))
    }
}

impl rsa::rand_core::CryptoRng for OsRandom {}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A CA and a signer it certified, made once for the tests of this crate.
    pub(crate) fn test_signer() -> &'static (Authority, Signer) {
        static ONE: std::sync::OnceLock<(Authority, Signer)> = std::sync::OnceLock::new();
        ONE.get_or_init(|| {
            let now = time::OffsetDateTime::now_utc();
            let ca =
                Authority::new("Test SPI CA", now - time::Duration::days(1), now + time::Duration::days(30))
                    .unwrap();
            let issued = ca.issue("participant 99999999", &["localhost"], 4242, Usage::Client).unwrap();
            let signer =
                Signer::from_pem(issued.key_pem.as_bytes(), issued.cert_pem.as_bytes(), "test").unwrap();
            (ca, signer)
        })
    }

    #[test]
    fn an_issued_certificate_names_its_issuer_and_decimal_serial_and_signs() {
        let (_, signer) = test_signer();
        assert_eq!(signer.cert.issuer, "CN=Test SPI CA, O=pixgw local PKI");
        assert_eq!(signer.cert.subject, "CN=participant 99999999, O=pixgw local PKI");
        assert_eq!(signer.cert.serial, "4242");
        let sig = signer.sign(b"data");
        assert_eq!(sig.len(), 256);
        assert!(signer.cert.verifies(b"data", &sig));
        assert!(!signer.cert.verifies(b"other", &sig));
    }

    #[test]
    fn a_server_certificate_of_the_local_pki_verifies_with_rustls_for_its_names() {
        use rustls::client::danger::ServerCertVerifier;
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
        crate::trust::install_provider();
        let (ca, _) = test_signer();
        let server = ca.issue("server", &["localhost", "127.0.0.1"], 9, Usage::Server).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(ca.cert_pem.as_bytes()).unwrap()).unwrap();
        let verifier =
            rustls::client::WebPkiServerVerifier::builder(std::sync::Arc::new(roots)).build().unwrap();
        let leaf = CertificateDer::from_pem_slice(server.cert_pem.as_bytes()).unwrap();
        let now = UnixTime::now();
        for name in ["localhost", "127.0.0.1"] {
            let name = ServerName::try_from(name).unwrap();
            verifier.verify_server_cert(&leaf, &[], &name, &[], now).unwrap();
        }
        let other = ServerName::try_from("example.com").unwrap();
        assert!(verifier.verify_server_cert(&leaf, &[], &other, &[], now).is_err());
    }

    #[test]
    fn a_key_that_its_certificate_does_not_certify_is_refused() {
        let (ca, _) = test_signer();
        let other = ca.issue("other", &[], 7, Usage::Client).unwrap();
        let e = Signer::from_pem(other.key_pem.as_bytes(), ca.cert_pem.as_bytes(), "mixed").unwrap_err();
        assert!(e.to_string().contains("does not certify"), "{e}");
        assert!(matches!(
            Signer::from_pem(b"", other.cert_pem.as_bytes(), "none"),
            Err(PkiError::Missing(..))
        ));
    }

    #[test]
    fn names_compare_attribute_by_attribute_whatever_the_spacing() {
        let wire = "CN=Autoridade Certificadora do SERPRO Final SSL, OU=Servico Federal de Processamento de Dados - SERPRO, OU=CSPB-1, O=ICP-Brasil, C=BR";
        let tight = wire.replace(", ", ",");
        assert!(same_dn(wire, &tight));
        assert!(same_dn("cn=a, o=b", "CN=a,O=b"));
        assert!(!same_dn(wire, "CN=Autoridade Certificadora do SERPRO Final SSL, O=ICP-Brasil, C=BR"));
        assert!(!same_dn("CN=a\\, b, O=c", "CN=a, B=b, O=c"), "an escaped comma is part of the value");
    }
}
