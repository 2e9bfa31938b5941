//! The simulator's local PKI, written once into its directory and reused by later starts:
//! a CA, the SPI's TLS and signing certificates, the DICT's signing certificate, and for
//! each real participant a TLS client certificate and a signing certificate. Every key is
//! RSA 2048; every file is owner-only.
//!
//! Layout of the directory:
//!
//! | file | what |
//! |---|---|
//! | `ca.pem` | the CA every certificate below chains to (participants trust it for TLS) |
//! | `spi/tls.pem`, `spi/tls.key` | the server certificate of ICOM and the DICT (`localhost`, `127.0.0.1`) |
//! | `spi/sign.pem`, `spi/sign.key` | the SPI's signing certificate |
//! | `dict/sign.pem`, `dict/sign.key` | the DICT's signing certificate |
//! | `signers.pem` | the SPI's and the DICT's signing certificates: what a participant verifies with |
//! | `participants/{ISPB}/tls.pem`, `tls.key` | the participant's TLS client certificate |
//! | `participants/{ISPB}/sign.pem`, `sign.key` | the participant's signing certificate |

use std::path::{Path, PathBuf};

use crate::rail::spi::message::Ispb;
use crate::rail::spi::pki::{Authority, Issued, PkiError, Usage};

/// How long the local certificates are valid from the day they are made.
pub const LOCAL_PKI_VALIDITY_DAYS: i64 = 3650;

/// Paths of one participant's files.
#[derive(Debug, Clone)]
pub struct ParticipantFiles {
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    pub sign_cert: PathBuf,
    pub sign_key: PathBuf,
}

impl ParticipantFiles {
    pub fn of(dir: &Path, ispb: &Ispb) -> ParticipantFiles {
        let d = dir.join("participants").join(ispb.as_str());
        ParticipantFiles {
            tls_cert: d.join("tls.pem"),
            tls_key: d.join("tls.key"),
            sign_cert: d.join("sign.pem"),
            sign_key: d.join("sign.key"),
        }
    }
}

fn write_private(path: &Path, text: &str) -> Result<(), PkiError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| PkiError::Read(parent.display().to_string(), e.to_string()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| PkiError::Read(path.display().to_string(), e.to_string()))?;
    f.write_all(text.as_bytes()).map_err(|e| PkiError::Read(path.display().to_string(), e.to_string()))
}

fn write_issued(cert: &Path, key: &Path, issued: &Issued) -> Result<(), PkiError> {
    write_private(cert, &issued.cert_pem)?;
    write_private(key, &issued.key_pem)
}

/// Makes whatever of the PKI `dir` lacks: everything on a first start, a new participant's
/// files on a later start that names one more. Answers whether anything was made.
pub fn ensure(dir: &Path, participants: &[Ispb]) -> Result<bool, PkiError> {
    let ca_key = dir.join("ca.key");
    let ca_path = dir.join("ca.pem");
    let missing = |p: &Path| !p.exists();
    let need_participants: Vec<&Ispb> =
        participants.iter().filter(|i| missing(&ParticipantFiles::of(dir, i).sign_key)).collect();
    if !missing(&ca_path) && !missing(&dir.join("signers.pem")) && need_participants.is_empty() {
        return Ok(false);
    }
    let ca = if missing(&ca_path) {
        let now = time::OffsetDateTime::now_utc();
        let ca = Authority::new(
            "pixgw spi-sim CA",
            now - time::Duration::days(1),
            now + time::Duration::days(LOCAL_PKI_VALIDITY_DAYS),
        )?;
        write_private(&ca_path, &ca.cert_pem)?;
        write_private(&ca_key, &ca.key_pem())?;
        ca
    } else {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|e| PkiError::Read(p.display().to_string(), e.to_string()))
        };
        Authority::load(&read(&ca_path)?, &read(&ca_key)?)?
    };
    let mut serial = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64);
    let mut next = || {
        serial += 1;
        serial
    };
    if missing(&dir.join("signers.pem")) {
        let tls = ca.issue("ICOM and DICT (spi-sim)", &["localhost", "127.0.0.1"], next(), Usage::Server)?;
        write_issued(&dir.join("spi/tls.pem"), &dir.join("spi/tls.key"), &tls)?;
        let spi = ca.issue("SPI 00038166 (spi-sim)", &[], next(), Usage::Client)?;
        write_issued(&dir.join("spi/sign.pem"), &dir.join("spi/sign.key"), &spi)?;
        let dict = ca.issue("DICT (spi-sim)", &[], next(), Usage::Client)?;
        write_issued(&dir.join("dict/sign.pem"), &dir.join("dict/sign.key"), &dict)?;
        write_private(&dir.join("signers.pem"), &format!("{}{}", spi.cert_pem, dict.cert_pem))?;
    }
    for ispb in need_participants {
        let f = ParticipantFiles::of(dir, ispb);
        let tls = ca.issue(&format!("participant {ispb} (TLS)"), &[], next(), Usage::Client)?;
        write_issued(&f.tls_cert, &f.tls_key, &tls)?;
        let sign = ca.issue(&format!("participant {ispb}"), &[], next(), Usage::Client)?;
        write_issued(&f.sign_cert, &f.sign_key, &sign)?;
    }
    Ok(true)
}
