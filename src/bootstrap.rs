//! First start and every start: the token-signing key, the admin token, the test clock's
//! offset, and the Demo sandbox account with its certificate and credentials file
//! (interface.md "Running the server").
//!
//! A production server (`--production`) makes neither the Demo account nor its files, and
//! never generates an admin token: the operator gives one.
//!
//! On first start the Demo account is created (and committed) before its files are
//! written, and the marker `meta/demo_account` is committed last: a crash in between makes
//! the next start create a fresh Demo account and overwrite the files, never leave files
//! that point at nothing.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::admin;
use crate::auth::certs;
use crate::auth::secrets;
use crate::domain::account::{AccountName, AccountProfile};
use crate::domain::document::TaxId;
use crate::domain::money::Money;
use crate::store::keys::{
    ADMIN_TOKEN_HASH, CLOCK_OFFSET, DATA_VERSION, DEMO_ACCOUNT, JWT_KEY, JWT_KEY_PREVIOUS, LOCATION_KEY,
};
use crate::store::Repo;

/// The data version this release writes: a release that changes what the store holds in a
/// way an older one would misread (a new index it keeps up to date, a new record format)
/// raises it. 1: the layout of 2026-11-25 (binary records, the `tlist/`, `rkey/` and
/// `pixin/` indexes). 2: pages of a smaller shape (`tx/` of 50 ids, `tlist/` of 10 ms; a
/// release of version 1 would look for them under the names of the old shape).
/// docs/deploy.md "Upgrading and rolling back".
pub const DATA_VERSION_CURRENT: u32 = 2;
/// The data version of a store whose secrets are sealed (`serve --secrets-key-file`): a
/// release that cannot open them refuses it, rather than take a sealed value for a key.
pub const DATA_VERSION_SEALED: u32 = 3;

/// The Demo account's document: a valid CNPJ reserved for examples.
pub const DEMO_DOCUMENT: &str = "11222333000181";
/// How long the generated Demo certificate is valid.
pub const DEMO_CERT_VALID_DAYS: i64 = 3650;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DemoCredentials {
    pub account_id: u64,
    pub client_id: String,
    pub client_secret: String,
    pub webhook_secret: String,
    pub admin_token: String,
}

pub struct Boot {
    pub jwt_key: Vec<u8>,
    /// The token-signing key before the last rotation, if there was one.
    pub jwt_key_previous: Option<Vec<u8>>,
    /// The MAC key of payload locations (`domain::location`).
    pub location_key: Vec<u8>,
    /// Hash of the generated admin token, if one was ever generated.
    pub stored_admin_token_hash: Option<String>,
    pub clock_offset_ms: i64,
    pub demo_dir: PathBuf,
    /// Whether this start created the Demo account.
    pub created_demo: bool,
    /// The production profile: no Demo account, no credentials file.
    pub production: bool,
}

pub fn demo_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("demo")
}

/// Reads or creates the persistent start-up state.
pub fn load_or_init(
    repo: &Repo,
    data_dir: &Path,
    now: DateTime<Utc>,
    admin_override: Option<&str>,
    production: bool,
) -> anyhow::Result<Boot> {
    check_data_version(repo)?;
    seal_secrets(repo)?;
    let stored_or_new = |name: &[u8]| -> anyhow::Result<Vec<u8>> {
        Ok(match repo.secret_meta(name)? {
            Some(k) => k,
            None => {
                let k = secrets::random_bytes::<{ secrets::SECRET_BYTES }>()
                    .map_err(|e| anyhow::anyhow!("random: {e}"))?
                    .to_vec();
                repo.put_secret_meta(name, &k)?;
                k
            }
        })
    };
    let jwt_key = stored_or_new(JWT_KEY)?;
    let jwt_key_previous = repo.secret_meta(JWT_KEY_PREVIOUS)?;
    let location_key = stored_or_new(LOCATION_KEY)?;
    let clock_offset_ms =
        repo.meta(CLOCK_OFFSET)?.and_then(|b| b.try_into().ok().map(i64::from_be_bytes)).unwrap_or(0);
    let dir = demo_dir(data_dir);
    // A production server makes no Demo account and writes no credentials file.
    let created_demo = if !production && repo.meta(DEMO_ACCOUNT)?.is_none() {
        create_demo(repo, &dir, now, admin_override)?;
        true
    } else {
        false
    };
    let stored_admin_token_hash =
        repo.meta(ADMIN_TOKEN_HASH)?.map(|b| String::from_utf8_lossy(&b).into_owned());
    Ok(Boot {
        jwt_key,
        jwt_key_previous,
        location_key,
        stored_admin_token_hash,
        clock_offset_ms,
        demo_dir: dir,
        created_demo,
        production,
    })
}

/// Refuses a store a newer release has served from (it may hold what this one would
/// misread or fail to keep up to date), and records this release's version otherwise.
fn check_data_version(repo: &Repo) -> anyhow::Result<()> {
    let stored = repo.meta(DATA_VERSION)?.and_then(|b| b.try_into().ok().map(u32::from_be_bytes));
    let wanted = if repo.seals() { DATA_VERSION_SEALED } else { DATA_VERSION_CURRENT };
    match stored {
        Some(v) if v > DATA_VERSION_SEALED => anyhow::bail!(
            "this store was written by a newer release of pixgw (data version {v}; this release knows \
             {DATA_VERSION_SEALED}): run that release, or restore the backup taken before upgrading \
             (docs/deploy.md \"Upgrading and rolling back\")"
        ),
        Some(DATA_VERSION_SEALED) if !repo.seals() => anyhow::bail!(
            "this store's secrets are sealed (under the key {}): start with --secrets-key-file naming \
             the key file they were sealed with (docs/deploy.md \"Sealing secrets at rest\")",
            repo.secrets_sealed_with()?.unwrap_or_else(|| "of its key file".into())
        ),
        Some(v) if v == wanted => Ok(()),
        // Sealed from now: the version is written before the first sealed value, so that a
        // start without the key file is refused even after a crash midway.
        _ => Ok(repo.put_meta(DATA_VERSION, &wanted.to_be_bytes())?),
    }
}

/// With a key file: reseals every secret not yet under its first key (`Repo::seal_stored_secrets`).
fn seal_secrets(repo: &Repo) -> anyhow::Result<()> {
    let Some(current) = repo.sealing_key_id() else { return Ok(()) };
    if repo.secrets_sealed_with()?.as_deref() == Some(current) {
        return Ok(());
    }
    let done = repo.seal_stored_secrets().context("sealing the store's secrets")?;
    tracing::info!(
        key = current,
        meta = done.meta,
        accounts = done.accounts,
        "the store's secrets are sealed under the key of --secrets-key-file"
    );
    Ok(())
}

fn create_demo(
    repo: &Repo,
    dir: &Path,
    now: DateTime<Utc>,
    admin_override: Option<&str>,
) -> anyhow::Result<()> {
    let generated = certs::generate(
        "pixgw demo client",
        now - Duration::hours(1),
        now + Duration::days(DEMO_CERT_VALID_DAYS),
    )
    .context("generating the Demo certificate")?;
    let parsed = certs::parse_pem(&generated.cert_pem)
        .map_err(|e| anyhow::anyhow!("the generated certificate does not parse: {e}"))?;
    let profile = AccountProfile {
        name: AccountName::parse("Demo").map_err(anyhow::Error::msg)?,
        document: TaxId::parse(DEMO_DOCUMENT).map_err(anyhow::Error::msg)?,
        sandbox: true,
    };
    let created = admin::create_account(repo, profile, Money::ZERO, Some(&parsed), now)
        .map_err(|e| anyhow::anyhow!("creating the Demo account: {e}"))?;
    let admin_token = match admin_override {
        Some(t) => t.to_owned(),
        None => secrets::new_admin_token().map_err(|e| anyhow::anyhow!("random: {e}"))?,
    };
    let credentials = DemoCredentials {
        account_id: created.record.id.get(),
        client_id: created.record.client_id.to_string(),
        client_secret: created.client_secret,
        webhook_secret: created.record.webhook_secret.clone(),
        admin_token: admin_token.clone(),
    };
    write_client_files(dir, &serde_json::to_value(&credentials)?, &generated)?;
    repo.put_meta(ADMIN_TOKEN_HASH, secrets::hash_secret("", &admin_token).as_bytes())?;
    repo.put_meta(DEMO_ACCOUNT, &created.record.id.get().to_be_bytes())?;
    Ok(())
}

/// Writes the files a client needs to get a token into `dir` (made if missing), each
/// readable by its owner only: `credentials.json` (`credentials` as given, which names
/// `clientId` and `clientSecret`), `token-request.json`, `client-cert.pem`, `client-key.pem`
/// and `client-cert.urlencoded` (the header value). The Demo account's files and those of
/// `pixgw account create` are the same set.
pub fn write_client_files(
    dir: &Path,
    credentials: &serde_json::Value,
    cert: &certs::GeneratedCert,
) -> anyhow::Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write_private(&dir.join("credentials.json"), &serde_json::to_vec_pretty(credentials)?)?;
    let token_request = serde_json::json!({
        "clientId": credentials["clientId"],
        "clientSecret": credentials["clientSecret"],
    });
    write_private(&dir.join("token-request.json"), &serde_json::to_vec_pretty(&token_request)?)?;
    // A certificate the operator brought has its key elsewhere.
    if !cert.key_pem.is_empty() {
        write_private(&dir.join("client-key.pem"), cert.key_pem.as_bytes())?;
    }
    write_private(&dir.join("client-cert.pem"), cert.cert_pem.as_bytes())?;
    write_private(&dir.join("client-cert.urlencoded"), certs::url_encode_pem(&cert.cert_pem).as_bytes())?;
    Ok(())
}

/// Writes a file readable by its owner only, through a temporary file and a rename so a
/// crash never leaves half a file.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut opts = fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Storage;

    #[test]
    fn a_store_of_a_newer_release_is_refused_and_an_older_one_is_marked() {
        let storage = Storage::memory().unwrap();
        let repo = Repo::new(&storage);
        assert!(check_data_version(&repo).is_ok(), "a new store");
        let stored = repo.meta(DATA_VERSION).unwrap().unwrap();
        assert_eq!(stored, DATA_VERSION_CURRENT.to_be_bytes().to_vec());
        assert!(check_data_version(&repo).is_ok(), "the same release again");
        repo.put_meta(DATA_VERSION, &(DATA_VERSION_SEALED + 1).to_be_bytes()).unwrap();
        let e = check_data_version(&repo).unwrap_err().to_string();
        let newer = format!("data version {}", DATA_VERSION_SEALED + 1);
        assert!(e.contains("newer release") && e.contains(&newer), "{e}");
        // A store of the version before is marked with this one.
        repo.put_meta(DATA_VERSION, &(DATA_VERSION_CURRENT - 1).to_be_bytes()).unwrap();
        assert!(check_data_version(&repo).is_ok(), "an older store");
        assert_eq!(repo.meta(DATA_VERSION).unwrap().unwrap(), DATA_VERSION_CURRENT.to_be_bytes().to_vec());
    }

    #[test]
    fn a_sealed_store_is_refused_without_its_key_file_and_opened_with_it() {
        let storage = Storage::memory().unwrap();
        let text = crate::auth::sealing::new_key_file().unwrap();
        let keys = std::sync::Arc::new(crate::auth::sealing::SealingKeys::parse(&text).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let now = chrono::Utc::now();
        let sealed = Repo::new(&storage).with_sealing(Some(keys));
        let first = load_or_init(&sealed, dir.path(), now, None, true).unwrap();
        assert_eq!(sealed.meta(DATA_VERSION).unwrap(), Some(DATA_VERSION_SEALED.to_be_bytes().to_vec()));
        assert!(crate::auth::sealing::is_sealed(&sealed.meta(JWT_KEY).unwrap().unwrap()));
        let again = load_or_init(&sealed, dir.path(), now, None, true).unwrap();
        assert_eq!((again.jwt_key, again.location_key), (first.jwt_key, first.location_key));

        let e = load_or_init(&Repo::new(&storage), dir.path(), now, None, true).err().unwrap().to_string();
        let id = sealed.sealing_key_id().unwrap();
        assert!(e.contains("sealed") && e.contains(id) && e.contains("--secrets-key-file"), "{e}");

        // Another key file: refused, naming the key the store needs.
        let other = crate::auth::sealing::new_key_file().unwrap();
        let other = std::sync::Arc::new(crate::auth::sealing::SealingKeys::parse(&other).unwrap());
        let wrong = Repo::new(&storage).with_sealing(Some(other));
        let e = format!("{:#}", load_or_init(&wrong, dir.path(), now, None, true).err().unwrap());
        assert!(e.contains("cannot be opened") && e.contains(id), "{e}");
    }
}
