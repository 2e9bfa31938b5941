//! The certificate authorities pixgw trusts when it is the TLS client: of webhook receivers
//! and of the PostgreSQL server.
//!
//! Only ring is compiled in as rustls's provider (aws-lc-rs would be a second, and rustls
//! then panics without being told which to use); [`install_provider`] makes it the process
//! default, which is idempotent, so every TLS client path calls it.

use std::path::Path;

use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

/// Makes ring the process's rustls provider (a no-op once one is installed).
pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The public web roots (Mozilla's, as webpki-roots ships them).
pub fn public_roots() -> RootCertStore {
    actix_tls::connect::rustls_0_23::webpki_roots_cert_store()
}

/// Adds every `CERTIFICATE` of the PEM file at `path` to `roots`; `what` names the file in
/// errors. A file that holds none is an error: trusting nothing new is never what was meant.
pub fn add_pem_file(roots: &mut RootCertStore, path: &Path, what: &str) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("reading the {what} {}: {e}", path.display()))?;
    let mut added = 0;
    for pem in x509_parser::pem::Pem::iter_from_buffer(&bytes) {
        let pem = pem.map_err(|e| format!("the {what} {} is not PEM: {e}", path.display()))?;
        if pem.label != "CERTIFICATE" {
            continue;
        }
        roots
            .add(CertificateDer::from(pem.contents))
            .map_err(|e| format!("a certificate of the {what} {} is not a usable CA: {e}", path.display()))?;
        added += 1;
    }
    if added == 0 {
        return Err(format!("the {what} {} holds no CERTIFICATE", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pem_file_adds_its_certificates_and_an_empty_or_missing_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["db.example".to_owned()]).unwrap();
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, format!("{}{}", ca.signing_key.serialize_pem(), ca.cert.pem())).unwrap();
        let mut roots = RootCertStore::empty();
        assert_eq!(add_pem_file(&mut roots, &good, "CA file"), Ok(()));
        assert_eq!(roots.len(), 1, "the key block is skipped, the certificate kept");

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let e = add_pem_file(&mut RootCertStore::empty(), &empty, "CA file").unwrap_err();
        assert!(e.contains("holds no CERTIFICATE"), "{e}");
        let e =
            add_pem_file(&mut RootCertStore::empty(), &dir.path().join("none.pem"), "CA file").unwrap_err();
        assert!(e.starts_with("reading the CA file"), "{e}");
        assert!(public_roots().len() > 50);
    }
}
