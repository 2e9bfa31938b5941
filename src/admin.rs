//! Account administration: creating accounts with their credentials, registering and
//! revoking certificates, changing settings and rotating secrets.
//!
//! Each operation reads, decides and commits one atomic, flushed batch under the repo's
//! admin lock, so concurrent admin calls never hand out an id twice or let two accounts
//! claim one certificate. Time and randomness come in from the caller's clock and the OS.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::auth::certs::ParsedCert;
use crate::auth::secrets;
use crate::domain::account::{AccountProfile, AccountSettings};
use crate::domain::certificate::Fingerprint;
use crate::domain::ids::{AccountId, ClientId};
use crate::domain::money::Money;
use crate::store::{AccountRecord, CertificateRecord, ClientRecord, Repo, RepoError};

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("account not found")]
    AccountNotFound,
    #[error("certificate not found")]
    CertificateNotFound,
    #[error("certificate registered to another account")]
    CertificateOfAnotherAccount,
    #[error("certificate revoked")]
    CertificateRevoked,
    #[error(transparent)]
    Repo(#[from] RepoError),
    #[error("random generator failed: {0}")]
    Random(String),
    /// A `requestId` that made an account of another name or document.
    #[error("this requestId made another account")]
    RequestIdReused,
}

fn random_err(e: getrandom::Error) -> AdminError {
    AdminError::Random(e.to_string())
}

/// A new account with the one copy of its secrets the caller will ever see.
#[derive(Debug, Clone)]
pub struct CreatedAccount {
    pub record: AccountRecord,
    pub client_secret: String,
}

fn new_client(account_id: AccountId, now: DateTime<Utc>) -> Result<(ClientRecord, String), AdminError> {
    let client_id =
        ClientId::from_uuid(Uuid::new_v4()).ok_or_else(|| AdminError::Random("uuid v4".into()))?;
    let secret = secrets::new_client_secret().map_err(random_err)?;
    let salt_hex = secrets::hex(&secrets::random_bytes::<{ secrets::SALT_BYTES }>().map_err(random_err)?);
    let record = ClientRecord {
        client_id,
        account_id,
        secret_hash_hex: secrets::hash_secret(&salt_hex, &secret),
        salt_hex,
        rotated_at: now,
    };
    Ok((record, secret))
}

/// Creates an account, its credentials and, when given, its first certificate.
pub fn create_account(
    repo: &Repo,
    profile: AccountProfile,
    opening_balance: Money,
    cert: Option<&ParsedCert>,
    now: DateTime<Utc>,
) -> Result<CreatedAccount, AdminError> {
    match create_account_once(repo, profile, opening_balance, cert, now, None)? {
        AccountMade::Created(c) => Ok(c),
        AccountMade::Replayed(r) => {
            Err(AdminError::Random(format!("account {} replayed without a request id", r.id)))
        }
    }
}

/// What [`create_account_once`] did.
#[derive(Debug)]
pub enum AccountMade {
    Created(CreatedAccount),
    /// The request id made this account before: nothing was made now (its client secret,
    /// never stored, is not known any more).
    Replayed(AccountRecord),
}

/// Makes an account once per `request_id`: the same id again answers the account it made
/// (the index is written in the same batch as the account, so a crash leaves both or
/// neither), and an id that made an account of another name or document is refused.
pub fn create_account_once(
    repo: &Repo,
    profile: AccountProfile,
    opening_balance: Money,
    cert: Option<&ParsedCert>,
    now: DateTime<Utc>,
    request_id: Option<&str>,
) -> Result<AccountMade, AdminError> {
    let _guard = repo.admin_lock();
    if let Some(rid) = request_id {
        if let Some(id) = repo.account_by_request(rid)? {
            let record = repo.account(id)?.ok_or(AdminError::AccountNotFound)?;
            if record.profile.name != profile.name || record.profile.document != profile.document {
                return Err(AdminError::RequestIdReused);
            }
            return Ok(AccountMade::Replayed(record));
        }
    }
    if let Some(c) = cert {
        ensure_registrable(repo, &c.fingerprint, None)?;
    }
    let id = repo.next_account_id()?;
    let (client, client_secret) = new_client(id, now)?;
    let record = AccountRecord {
        id,
        profile,
        settings: AccountSettings::default(),
        client_id: client.client_id,
        webhook_secret: secrets::new_webhook_secret().map_err(random_err)?,
        receiving_key: Uuid::new_v4().to_string(),
        opening_balance,
        created_at: now,
    };
    let cert_record = cert.map(|c| certificate_record(id, c, now));
    let mut batch = repo.account_batch(&record, &client, cert_record.as_ref())?;
    if let Some(rid) = request_id {
        batch.put(crate::store::keys::account_request(rid), id.get().to_be_bytes().to_vec());
    }
    repo.commit_batch(&batch)?;
    Ok(AccountMade::Created(CreatedAccount { record, client_secret }))
}

fn certificate_record(account_id: AccountId, c: &ParsedCert, now: DateTime<Utc>) -> CertificateRecord {
    CertificateRecord {
        fingerprint: c.fingerprint.clone(),
        account_id,
        subject: c.subject.clone(),
        validity: c.validity,
        registered_at: now,
        revoked_at: None,
    }
}

/// Refuses a fingerprint owned by another account or revoked; answers the existing record
/// when `account` already holds it.
fn ensure_registrable(
    repo: &Repo,
    fp: &Fingerprint,
    account: Option<AccountId>,
) -> Result<Option<CertificateRecord>, AdminError> {
    match repo.certificate(fp)? {
        None => Ok(None),
        Some(existing) if Some(existing.account_id) != account => {
            Err(AdminError::CertificateOfAnotherAccount)
        }
        Some(existing) if existing.is_revoked() => Err(AdminError::CertificateRevoked),
        Some(existing) => Ok(Some(existing)),
    }
}

pub fn account(repo: &Repo, id: AccountId) -> Result<AccountRecord, AdminError> {
    repo.account(id)?.ok_or(AdminError::AccountNotFound)
}

/// Registers a certificate for an account. Returns the record and whether it is new
/// (registering the same certificate again for the same account is idempotent).
pub fn register_certificate(
    repo: &Repo,
    id: AccountId,
    cert: &ParsedCert,
    now: DateTime<Utc>,
) -> Result<(CertificateRecord, bool), AdminError> {
    let _guard = repo.admin_lock();
    account(repo, id)?;
    if let Some(existing) = ensure_registrable(repo, &cert.fingerprint, Some(id))? {
        return Ok((existing, false));
    }
    let record = certificate_record(id, cert, now);
    repo.put_certificate(&record)?;
    Ok((record, true))
}

/// Revokes a certificate of the account; revoking twice is a no-op. Tokens bound to it stop
/// working at once (the bearer check reads the certificate's record).
pub fn revoke_certificate(
    repo: &Repo,
    id: AccountId,
    fp: &Fingerprint,
    now: DateTime<Utc>,
) -> Result<(), AdminError> {
    let _guard = repo.admin_lock();
    account(repo, id)?;
    let mut record = match repo.certificate(fp)? {
        Some(r) if r.account_id == id => r,
        _ => return Err(AdminError::CertificateNotFound),
    };
    if record.revoked_at.is_none() {
        record.revoked_at = Some(now);
        repo.put_certificate(&record)?;
    }
    Ok(())
}

/// Replaces the account's settings with `update(current)`.
pub fn update_settings(
    repo: &Repo,
    id: AccountId,
    update: impl FnOnce(AccountSettings) -> AccountSettings,
) -> Result<AccountRecord, AdminError> {
    let _guard = repo.admin_lock();
    let mut record = account(repo, id)?;
    record.settings = update(record.settings);
    repo.put_account(&record)?;
    Ok(record)
}

/// Renames an account's holder. When its keys are in the DICT (`dict`), each gets a pending
/// update of its entry in the same batch as the new name, so no crash leaves the DICT with
/// the old name for good (docs/decisions.md "Key updates when an account changes"). The same
/// name again changes nothing. Answers the account as it now is and how many of its keys'
/// updates this rename asked for.
pub fn rename(
    repo: &Repo,
    id: AccountId,
    name: crate::domain::account::AccountName,
    dict: bool,
) -> Result<(AccountRecord, usize), AdminError> {
    let _guard = repo.admin_lock();
    let mut record = account(repo, id)?;
    if record.profile.name == name {
        return Ok((record, 0));
    }
    record.profile.name = name;
    let keys: Vec<String> =
        if dict { repo.keys_of(id)?.into_iter().map(|k| k.key).collect() } else { Vec::new() };
    repo.rename_account(&record, &keys)?;
    Ok((record, keys.len()))
}

/// A key was registered in the DICT under `name` while its account may have been renamed:
/// if the account's name is now another, the key's entry gets a pending update to it.
/// Answers whether it did.
pub fn follow_rename(repo: &Repo, id: AccountId, key: &str, name: &str) -> Result<bool, AdminError> {
    let _guard = repo.admin_lock();
    let record = account(repo, id)?;
    if record.profile.name.as_str() == name {
        return Ok(false);
    }
    repo.mark_key_update(id, key, record.profile.name.as_str())?;
    Ok(true)
}

/// Gives the account a new clientSecret; the old one and every token issued before now
/// stop working.
pub fn rotate_secret(repo: &Repo, id: AccountId, now: DateTime<Utc>) -> Result<String, AdminError> {
    let _guard = repo.admin_lock();
    let record = account(repo, id)?;
    let mut client = repo
        .client(&record.client_id)?
        .ok_or_else(|| RepoError::Corrupt { key: "client".into(), reason: "missing".into() })?;
    let secret = secrets::new_client_secret().map_err(random_err)?;
    client.salt_hex = secrets::hex(&secrets::random_bytes::<{ secrets::SALT_BYTES }>().map_err(random_err)?);
    client.secret_hash_hex = secrets::hash_secret(&client.salt_hex, &secret);
    client.rotated_at = now;
    repo.put_client(&client)?;
    Ok(secret)
}
