//! What the SPI rail needs to run: the participant's ISPB, where ICOM and the DICT are,
//! its certificates and keys, and whom it trusts. Read from the `[spi]` table of the
//! settings file, each key also settable by environment (`PIXGW_SPI_ISPB`, ...), and
//! checked at start: a file that cannot be read, a key its certificate does not certify, an
//! ISPB that is not one, all stop the start with the reason.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::message::Ispb;
use super::pki::{Certificate, Signer};

/// Streams read in parallel unless set (the interface allows six per participant).
pub const STREAMS_DEFAULT: usize = 2;
/// How often the DICT is asked for the MED's refund requests, unless set (ms), and the
/// bounds of the setting: the API lists a change within five seconds of it, and the MED
/// gives the contested participant days to answer.
pub const MED_POLL_MS_DEFAULT: u64 = 30_000;
/// Payouts waiting for the rail beyond which payments are refused, by default: about a
/// second or two of what the rail signs and sends on two shared cores, well inside the 15 s
/// a payout has to leave.
pub const PAYOUT_BACKLOG_MAX_DEFAULT: usize = 2_000;
pub const PAYOUT_BACKLOG_MAX_LIMIT: usize = 1_000_000;
/// The DICT category assumed when none is set: the largest, so the mirror of the
/// participant's bucket refuses nothing the DICT would take (set the one you were given).
pub const DICT_CATEGORY_DEFAULT: char = 'A';
/// How often the DICT's claims are listed, unless set (ms), and the bound of the setting:
/// a claim opened against one of our keys is to be acknowledged within a minute (the
/// homologation's test), so a turn may not wait longer.
pub const CLAIMS_POLL_MS_DEFAULT: u64 = 10_000;
pub const CLAIMS_POLL_MS_MAX: u64 = 60_000;
/// How often the keys' sync with the DICT is verified, unless set (ms), and the bound of the
/// setting: the DICT takes ten verifications a minute (bucket 50) and one is made per key
/// type, so at most one check every 30 s is kept within it over time.
pub const SYNC_EVERY_MS_DEFAULT: u64 = 3_600_000;
pub const SYNC_EVERY_MS_MAX: u64 = 86_400_000;
pub const MED_POLL_MS_MIN: u64 = 100;
pub const MED_POLL_MS_MAX: u64 = 3_600_000;

/// The `[spi]` table of the settings file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SpiFile {
    pub ispb: Option<String>,
    pub icom_url: Option<String>,
    pub dict_url: Option<String>,
    /// The CA (PEM) ICOM's and the DICT's TLS certificates chain to.
    pub ca_file: Option<PathBuf>,
    /// The participant's TLS client certificate and key (PEM).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// The participant's signing certificate and key (PEM, RSA).
    pub sign_cert: Option<PathBuf>,
    pub sign_key: Option<PathBuf>,
    /// The SPI's and the DICT's signing certificates (PEM): what received messages and DICT
    /// answers are verified with.
    pub trusted_signers: Option<PathBuf>,
    /// Accept messages that carry no signature (homologation tools; refused in production).
    pub accept_unsigned: Option<bool>,
    /// Streams read in parallel (1 to 6).
    pub streams: Option<usize>,
    /// CA certificates (PEM) that other institutions' payload locations may chain to,
    /// besides the public web roots (a homologation or test CA).
    pub payload_ca_file: Option<PathBuf>,
    /// How often the DICT is asked for the MED's refund requests, its infraction reports and
    /// the events of our funds recoveries, in ms.
    pub med_poll_ms: Option<u64>,
    /// How often the DICT's claims are listed and a rename's key updates sent, in ms (100 to 60,000).
    pub claims_poll_ms: Option<u64>,
    /// How often the keys' sync with the DICT is verified, in ms (100 to 86,400,000).
    pub sync_every_ms: Option<u64>,
    /// How long after its debit a payout may still leave, in ms (1,000 to 35,000).
    pub leave_within_ms: Option<u64>,
    /// The participant's category in the DICT's anti-scan policy (`A` to `H`), as the
    /// central bank set it.
    pub dict_category: Option<String>,
    /// Payouts waiting for the rail beyond which new payments are refused (503).
    pub payout_backlog_max: Option<usize>,
    /// The tax authority's CPF register (its registry service's base URL,
    /// `super::tax_registry`); without it, holders' names are not checked by the gateway.
    pub tax_registry_url: Option<String>,
    /// A file holding the register's `key:secret` (mode 600).
    pub tax_registry_credentials: Option<PathBuf>,
    /// How often every live holder with keys in the DICT is checked against the register,
    /// in ms (100 to 86,400,000).
    pub tax_check_ms: Option<u64>,
}

impl SpiFile {
    /// The same table with every `PIXGW_SPI_*` variable of `env` laid over it.
    pub fn with_env(mut self, env: impl Fn(&str) -> Option<String>) -> SpiFile {
        let path = |k: &str| env(k).map(PathBuf::from);
        self.ispb = env("PIXGW_SPI_ISPB").or(self.ispb);
        self.icom_url = env("PIXGW_SPI_ICOM_URL").or(self.icom_url);
        self.dict_url = env("PIXGW_SPI_DICT_URL").or(self.dict_url);
        self.ca_file = path("PIXGW_SPI_CA_FILE").or(self.ca_file);
        self.tls_cert = path("PIXGW_SPI_TLS_CERT").or(self.tls_cert);
        self.tls_key = path("PIXGW_SPI_TLS_KEY").or(self.tls_key);
        self.sign_cert = path("PIXGW_SPI_SIGN_CERT").or(self.sign_cert);
        self.sign_key = path("PIXGW_SPI_SIGN_KEY").or(self.sign_key);
        self.trusted_signers = path("PIXGW_SPI_TRUSTED_SIGNERS").or(self.trusted_signers);
        self.payload_ca_file = path("PIXGW_SPI_PAYLOAD_CA_FILE").or(self.payload_ca_file);
        if let Some(v) = env("PIXGW_SPI_ACCEPT_UNSIGNED") {
            self.accept_unsigned = Some(matches!(v.as_str(), "1" | "true" | "yes" | "on"));
        }
        if let Some(v) = env("PIXGW_SPI_STREAMS").and_then(|v| v.parse().ok()) {
            self.streams = Some(v);
        }
        if let Some(v) = env("PIXGW_SPI_MED_POLL_MS").and_then(|v| v.parse().ok()) {
            self.med_poll_ms = Some(v);
        }
        if let Some(v) = env("PIXGW_SPI_CLAIMS_POLL_MS").and_then(|v| v.parse().ok()) {
            self.claims_poll_ms = Some(v);
        }
        if let Some(v) = env("PIXGW_SPI_SYNC_EVERY_MS").and_then(|v| v.parse().ok()) {
            self.sync_every_ms = Some(v);
        }
        self.dict_category = env("PIXGW_SPI_DICT_CATEGORY").or(self.dict_category);
        if let Some(v) = env("PIXGW_SPI_PAYOUT_BACKLOG_MAX").and_then(|v| v.parse().ok()) {
            self.payout_backlog_max = Some(v);
        }
        if let Some(v) = env("PIXGW_SPI_LEAVE_WITHIN_MS").and_then(|v| v.parse().ok()) {
            self.leave_within_ms = Some(v);
        }
        self.tax_registry_url = env("PIXGW_SPI_TAX_REGISTRY_URL").or(self.tax_registry_url);
        self.tax_registry_credentials =
            path("PIXGW_SPI_TAX_REGISTRY_CREDENTIALS").or(self.tax_registry_credentials);
        if let Some(v) = env("PIXGW_SPI_TAX_CHECK_MS").and_then(|v| v.parse().ok()) {
            self.tax_check_ms = Some(v);
        }
        self
    }
}

/// Checked settings of the SPI rail.
#[derive(Clone)]
pub struct SpiSettings {
    pub ispb: Ispb,
    pub icom_url: String,
    pub dict_url: String,
    pub tls: Arc<rustls::ClientConfig>,
    pub signer: Arc<Signer>,
    pub trusted: Arc<Vec<Certificate>>,
    pub accept_unsigned: bool,
    pub streams: usize,
    /// Reads and verifies other institutions' payload locations (dynamic QR codes).
    pub payloads: Arc<super::payload_reader::PayloadReader>,
    /// How often the DICT is asked for the MED's refund requests.
    pub med_poll: std::time::Duration,
    /// How often the DICT's claims are listed (and the steps owed on them taken).
    pub claims_poll: std::time::Duration,
    /// How often the keys' sync with the DICT is verified (and a difference repaired).
    pub sync_every: std::time::Duration,
    /// How long after its debit a payout may still leave; later, it fails unsent.
    pub leave_within: std::time::Duration,
    /// The participant's category in the DICT's anti-scan policy.
    pub dict_category: char,
    /// Payouts waiting for the rail beyond which new payments are refused.
    pub payout_backlog_max: usize,
    /// The tax authority's CPF register, when configured.
    pub tax_registry: Option<super::tax_registry::RegistrySettings>,
    /// How often holders are checked against the register.
    pub tax_check: std::time::Duration,
}

impl std::fmt::Debug for SpiSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpiSettings")
            .field("ispb", &self.ispb)
            .field("icom_url", &self.icom_url)
            .field("dict_url", &self.dict_url)
            .field("signer", &self.signer.cert)
            .field("trusted", &self.trusted.len())
            .field("accept_unsigned", &self.accept_unsigned)
            .field("streams", &self.streams)
            .finish()
    }
}

fn required<'a, T>(v: &'a Option<T>, name: &str) -> Result<&'a T, String> {
    v.as_ref().ok_or_else(|| {
        format!("[spi] {name} (PIXGW_SPI_{}) is required with --rail spi", name.to_ascii_uppercase())
    })
}

impl SpiSettings {
    /// Checks the table and loads every file it names.
    pub fn load(f: &SpiFile) -> Result<SpiSettings, String> {
        let ispb_text = required(&f.ispb, "ispb")?;
        let ispb = Ispb::parse(ispb_text)
            .ok_or_else(|| format!("[spi] ispb {ispb_text:?} is not eight digits or upper-case letters"))?;
        let url = |v: &Option<String>, name: &str| -> Result<String, String> {
            let u = required(v, name)?.trim_end_matches('/').to_owned();
            if !u.starts_with("https://") {
                return Err(format!("[spi] {name} must be an https URL (the rails are mutual TLS)"));
            }
            Ok(u)
        };
        let icom_url = url(&f.icom_url, "icom_url")?;
        let dict_url = url(&f.dict_url, "dict_url")?;
        let sign_key = private_key_file(required(&f.sign_key, "sign_key")?, "sign_key")?;
        let signer = Signer::from_files(sign_key, required(&f.sign_cert, "sign_cert")?)
            .map_err(|e| format!("[spi] signing key: {e}"))?;
        let trusted = Certificate::from_pem_file(required(&f.trusted_signers, "trusted_signers")?)
            .map_err(|e| format!("[spi] trusted_signers: {e}"))?;
        let tls = client_tls(
            required(&f.ca_file, "ca_file")?,
            required(&f.tls_cert, "tls_cert")?,
            private_key_file(required(&f.tls_key, "tls_key")?, "tls_key")?,
        )?;
        let streams = f.streams.unwrap_or(STREAMS_DEFAULT);
        if !(1..=super::icom::STREAMS_PER_PARTICIPANT_MAX).contains(&streams) {
            return Err(format!("[spi] streams must be 1 to {}", super::icom::STREAMS_PER_PARTICIPANT_MAX));
        }
        let mut roots = crate::trust::public_roots();
        if let Some(path) = &f.payload_ca_file {
            crate::trust::add_pem_file(&mut roots, path, "[spi] payload_ca_file")?;
        }
        let payloads = super::payload_reader::PayloadReader::new(roots)?;
        let med_poll = period_ms(f.med_poll_ms, MED_POLL_MS_DEFAULT, MED_POLL_MS_MAX, "med_poll_ms")?;
        let Bounds { leave_within, dict_category, payout_backlog_max, claims_poll, sync_every } = bounds(f)?;
        let tax_registry = tax_registry(f)?;
        let tax_check = period_ms(f.tax_check_ms, TAX_CHECK_MS_DEFAULT, TAX_CHECK_MS_MAX, "tax_check_ms")?;
        Ok(SpiSettings {
            tax_registry,
            tax_check,
            payout_backlog_max,
            dict_category,
            leave_within,
            payloads: Arc::new(payloads),
            med_poll,
            claims_poll,
            sync_every,
            ispb,
            icom_url,
            dict_url,
            tls,
            signer: Arc::new(signer),
            trusted: Arc::new(trusted),
            accept_unsigned: f.accept_unsigned.unwrap_or(false),
            streams,
        })
    }
}

/// How often holders are checked against the tax register by default (a day), and at most.
pub const TAX_CHECK_MS_DEFAULT: u64 = 86_400_000;
pub const TAX_CHECK_MS_MAX: u64 = 86_400_000;

/// The register's settings: both or neither of its URL and credentials; an https URL, or
/// plain http to this machine (`pixgw spi-sim`'s control port); the credentials' file
/// private, holding `key:secret`.
fn tax_registry(f: &SpiFile) -> Result<Option<super::tax_registry::RegistrySettings>, String> {
    let (url, file) = match (&f.tax_registry_url, &f.tax_registry_credentials) {
        (None, None) => return Ok(None),
        (Some(u), Some(c)) => (u.trim_end_matches('/').to_owned(), c),
        _ => return Err("[spi] tax_registry_url and tax_registry_credentials go together".into()),
    };
    let local =
        ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"].iter().any(|p| url.starts_with(p));
    if !(url.starts_with("https://") || local) || super::tax_registry::token_url(&url).is_none() {
        return Err("[spi] tax_registry_url must be an https URL (plain http only to this machine)".into());
    }
    let text = std::fs::read_to_string(private_key_file(file, "tax_registry_credentials")?)
        .map_err(|e| format!("[spi] tax_registry_credentials {}: {e}", file.display()))?;
    let credentials = text.trim().to_owned();
    if !credentials.split_once(':').is_some_and(|(k, s)| !k.is_empty() && !s.is_empty()) {
        return Err("[spi] tax_registry_credentials must hold key:secret".into());
    }
    Ok(Some(super::tax_registry::RegistrySettings { url, credentials }))
}

/// The rail's bounds a settings table sets, each checked at its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    leave_within: std::time::Duration,
    dict_category: char,
    payout_backlog_max: usize,
    claims_poll: std::time::Duration,
    sync_every: std::time::Duration,
}

/// A period setting in ms: its default when absent, refused outside `[MED_POLL_MS_MIN, max]`.
fn period_ms(value: Option<u64>, default: u64, max: u64, name: &str) -> Result<std::time::Duration, String> {
    let ms = value.unwrap_or(default);
    if !(MED_POLL_MS_MIN..=max).contains(&ms) {
        return Err(format!("[spi] {name} must be {MED_POLL_MS_MIN} to {max}"));
    }
    Ok(std::time::Duration::from_millis(ms))
}

fn bounds(f: &SpiFile) -> Result<Bounds, String> {
    use super::sent::{LEAVE_WITHIN_DEFAULT, LEAVE_WITHIN_MAX, LEAVE_WITHIN_MIN};
    let leave_within = f.leave_within_ms.map_or(LEAVE_WITHIN_DEFAULT, std::time::Duration::from_millis);
    if !(LEAVE_WITHIN_MIN..=LEAVE_WITHIN_MAX).contains(&leave_within) {
        return Err(format!(
            "[spi] leave_within_ms must be {} to {}",
            LEAVE_WITHIN_MIN.as_millis(),
            LEAVE_WITHIN_MAX.as_millis()
        ));
    }
    let dict_category = match f.dict_category.as_deref().map(str::as_bytes) {
        None => DICT_CATEGORY_DEFAULT,
        Some(&[c]) if super::directory::participant_policy(char::from(c)).is_some() => char::from(c),
        Some(_) => return Err("[spi] dict_category must be one of A to H".into()),
    };
    let payout_backlog_max = f.payout_backlog_max.unwrap_or(PAYOUT_BACKLOG_MAX_DEFAULT);
    if !(1..=PAYOUT_BACKLOG_MAX_LIMIT).contains(&payout_backlog_max) {
        return Err(format!("[spi] payout_backlog_max must be 1 to {PAYOUT_BACKLOG_MAX_LIMIT}"));
    }
    let claims_poll =
        period_ms(f.claims_poll_ms, CLAIMS_POLL_MS_DEFAULT, CLAIMS_POLL_MS_MAX, "claims_poll_ms")?;
    let sync_every = period_ms(f.sync_every_ms, SYNC_EVERY_MS_DEFAULT, SYNC_EVERY_MS_MAX, "sync_every_ms")?;
    Ok(Bounds { leave_within, dict_category, payout_backlog_max, claims_poll, sync_every })
}

/// A private key's file, refused when its group or others may read it, as every secret
/// file pixgw reads is (the admin token file, the secrets key file, a backup's identity).
fn private_key_file<'a>(path: &'a Path, name: &str) -> Result<&'a Path, String> {
    if path.exists() && !crate::private::is_owner_only(path) {
        return Err(format!(
            "[spi] {name} {}: its group or others may read it: chmod 600 it",
            path.display()
        ));
    }
    Ok(path)
}

/// The participant's TLS client: the CA of the rails, and its own certificate and key.
pub fn client_tls(ca: &Path, cert: &Path, key: &Path) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    crate::trust::install_provider();
    let mut roots = rustls::RootCertStore::empty();
    crate::trust::add_pem_file(&mut roots, ca, "[spi] ca_file")?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("[spi] tls_cert {}: {e}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).map_err(|e| format!("[spi] tls_key {}: {e}", key.display()))?;
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("[spi] the TLS certificate and key: {e}"))?;
    // The interfaces speak HTTP/1.1 (ICOM's `Host` rule, its persistent connections).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_variables_override_the_file_and_a_missing_setting_is_named() {
        let f = SpiFile { ispb: Some("00000000".into()), streams: Some(1), ..Default::default() };
        let env = |k: &str| match k {
            "PIXGW_SPI_ISPB" => Some("1234ABCD".to_owned()),
            "PIXGW_SPI_ACCEPT_UNSIGNED" => Some("1".to_owned()),
            _ => None,
        };
        let f = f.with_env(env);
        assert_eq!(f.ispb.as_deref(), Some("1234ABCD"));
        assert_eq!(f.accept_unsigned, Some(true));
        assert_eq!(f.streams, Some(1));
        let e = SpiSettings::load(&f).unwrap_err();
        assert!(e.contains("icom_url") && e.contains("PIXGW_SPI_ICOM_URL"), "{e}");
        let bad = SpiFile { ispb: Some("1234abcd".into()), ..Default::default() };
        assert!(SpiSettings::load(&bad).unwrap_err().contains("not eight digits"));
        let http = SpiFile {
            ispb: Some("1234ABCD".into()),
            icom_url: Some("http://x".into()),
            ..Default::default()
        };
        assert!(SpiSettings::load(&http).unwrap_err().contains("https"));
    }

    #[test]
    fn the_tax_register_needs_its_url_and_private_credentials_together() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &str, mode: u32| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        let good = file("good", "key:secret\n", 0o600);
        let table = |url: &str, creds: Option<PathBuf>| SpiFile {
            tax_registry_url: Some(url.into()),
            tax_registry_credentials: creds,
            ..Default::default()
        };
        assert_eq!(tax_registry(&SpiFile::default()).unwrap(), None);
        let s = tax_registry(&table("https://gateway.example/consulta-cpf-df/v2/", Some(good.clone())))
            .unwrap()
            .unwrap();
        assert_eq!(
            (s.url.as_str(), s.credentials.as_str()),
            ("https://gateway.example/consulta-cpf-df/v2", "key:secret")
        );
        assert!(tax_registry(&table("http://127.0.0.1:8080/v2", Some(good.clone()))).unwrap().is_some());
        let refused = |f: SpiFile, why: &str| {
            let e = tax_registry(&f).unwrap_err();
            assert!(e.contains(why), "{e}");
        };
        refused(table("https://x/v2", None), "go together");
        refused(
            SpiFile { tax_registry_credentials: Some(good.clone()), ..Default::default() },
            "go together",
        );
        refused(table("http://gateway.example/v2", Some(good.clone())), "https");
        refused(table("https://x/v2", Some(file("open", "key:secret", 0o644))), "chmod 600");
        for bad in ["key", ":secret", "key:", ""] {
            refused(table("https://x/v2", Some(file("bad", bad, 0o600))), "key:secret");
        }
        // The check's period, at its limits.
        let period = |ms| period_ms(Some(ms), TAX_CHECK_MS_DEFAULT, TAX_CHECK_MS_MAX, "tax_check_ms");
        assert_eq!(period(TAX_CHECK_MS_MAX).unwrap().as_millis(), u128::from(TAX_CHECK_MS_MAX));
        assert!(period(TAX_CHECK_MS_MAX + 1).unwrap_err().contains("tax_check_ms"));
        assert!(period(MED_POLL_MS_MIN - 1).is_err());
    }

    #[test]
    fn the_rails_bounds_are_taken_at_their_limits_and_refused_past_them() {
        let with = |leave: Option<u64>, category: Option<&str>, backlog: Option<usize>| {
            bounds(&SpiFile {
                leave_within_ms: leave,
                dict_category: category.map(str::to_owned),
                payout_backlog_max: backlog,
                ..Default::default()
            })
        };
        let defaults = with(None, None, None).unwrap();
        assert_eq!(
            defaults,
            Bounds {
                leave_within: super::super::sent::LEAVE_WITHIN_DEFAULT,
                dict_category: DICT_CATEGORY_DEFAULT,
                payout_backlog_max: PAYOUT_BACKLOG_MAX_DEFAULT,
                claims_poll: std::time::Duration::from_millis(CLAIMS_POLL_MS_DEFAULT),
                sync_every: std::time::Duration::from_millis(SYNC_EVERY_MS_DEFAULT),
            }
        );
        // The claims poller and the sync verification, at their limits and past them.
        let periods = |claims: Option<u64>, sync: Option<u64>| {
            bounds(&SpiFile { claims_poll_ms: claims, sync_every_ms: sync, ..Default::default() })
        };
        for ok in [MED_POLL_MS_MIN, CLAIMS_POLL_MS_MAX] {
            assert_eq!(periods(Some(ok), None).unwrap().claims_poll.as_millis(), u128::from(ok));
        }
        for ok in [MED_POLL_MS_MIN, SYNC_EVERY_MS_MAX] {
            assert_eq!(periods(None, Some(ok)).unwrap().sync_every.as_millis(), u128::from(ok));
        }
        for bad in [MED_POLL_MS_MIN - 1, CLAIMS_POLL_MS_MAX + 1] {
            assert!(periods(Some(bad), None).unwrap_err().contains("claims_poll_ms"), "{bad}");
        }
        for bad in [MED_POLL_MS_MIN - 1, SYNC_EVERY_MS_MAX + 1] {
            assert!(periods(None, Some(bad)).unwrap_err().contains("sync_every_ms"), "{bad}");
        }
        assert!(with(Some(1_000), None, None).is_ok() && with(Some(35_000), None, None).is_ok());
        for bad in [999, 35_001] {
            assert!(with(Some(bad), None, None).unwrap_err().contains("leave_within_ms"), "{bad}");
        }
        assert_eq!(with(None, Some("H"), None).unwrap().dict_category, 'H');
        for bad in ["I", "a", "AB", ""] {
            assert!(with(None, Some(bad), None).unwrap_err().contains("dict_category"), "{bad:?}");
        }
        assert!(
            with(None, None, Some(1)).is_ok() && with(None, None, Some(PAYOUT_BACKLOG_MAX_LIMIT)).is_ok()
        );
        for bad in [0, PAYOUT_BACKLOG_MAX_LIMIT + 1] {
            assert!(with(None, None, Some(bad)).unwrap_err().contains("payout_backlog_max"), "{bad}");
        }
    }

    #[test]
    fn a_private_key_its_group_or_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("sign.key");
        std::fs::write(&key, "a key").unwrap();
        for (mode, name) in [(0o644, "sign_key"), (0o640, "tls_key")] {
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = private_key_file(&key, name).unwrap_err();
            assert!(e.contains(name) && e.contains("chmod 600"), "{e}");
        }
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(private_key_file(&key, "sign_key"), Ok(key.as_path()));
        // Through the whole table: the signing key is checked before it is read.
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let f = SpiFile {
            ispb: Some("1234ABCD".into()),
            icom_url: Some("https://icom".into()),
            dict_url: Some("https://dict".into()),
            sign_key: Some(key.clone()),
            sign_cert: Some(dir.path().join("sign.pem")),
            ..Default::default()
        };
        assert!(SpiSettings::load(&f).unwrap_err().contains("chmod 600"));
    }
}
