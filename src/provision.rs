//! `pixgw account create`: makes an account on a running server, with a client certificate
//! whose private key is generated on the operator's machine and never sent anywhere, or
//! with a certificate the operator's own CA issued (`--cert`, for a proxy that checks client
//! certificates against that CA; its key stays wherever it is).
//!
//! It goes through the admin API a person would use (`POST /admin/accounts`, then `POST
//! /admin/accounts/{id}/certificates`), so it works against a remote server and a
//! production one alike, and writes the same files the Demo account gets on first start
//! (`bootstrap::write_client_files`), owner-only, into a directory that must be new or
//! empty. The account's secrets are written before the certificate is registered: if the
//! registration fails, the operator still holds the only copy of the client secret and is
//! told how to finish by hand.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::auth::certs;

/// How long a request to the admin API may take.
const ADMIN_ANSWER_WAIT: Duration = Duration::from_secs(30);
/// The longest validity a generated client certificate may be given.
pub const CERT_DAYS_MAX: u32 = 3650;

/// What the operator asks for.
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub url: String,
    pub admin_token: String,
    pub name: String,
    pub document: String,
    pub sandbox: bool,
    pub cert_days: u32,
    pub out: PathBuf,
    /// A PEM certificate to register instead of generating one.
    pub cert_file: Option<PathBuf>,
    /// The opening balance, a decimal string (`"100.00"`).
    pub initial_balance: Option<String>,
}

/// What was made: the account's id and client id, and where its files are.
#[derive(Debug, Clone)]
pub struct Made {
    pub account_id: u64,
    pub client_id: String,
    pub out: PathBuf,
}

/// The file in the output directory that holds this run's request id, written before the
/// account is asked for: a run that died after the server made the account is run again
/// with the same directory, and the same id answers that account instead of a second one.
pub const REQUEST_ID_FILE: &str = ".request-id";

/// Refuses an output directory that holds anything but the request id of an earlier run
/// that did not finish: credentials are never overwritten. Answers that request id, or a
/// new one written there.
fn request_id_of(dir: &Path) -> anyhow::Result<String> {
    let entries: Vec<String> = match std::fs::read_dir(dir) {
        Ok(e) => e.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    match entries.as_slice() {
        [] => {
            let id = uuid::Uuid::new_v4().to_string();
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            std::fs::write(dir.join(REQUEST_ID_FILE), &id)
                .with_context(|| format!("writing {}", dir.join(REQUEST_ID_FILE).display()))?;
            Ok(id)
        }
        [only] if only == REQUEST_ID_FILE => {
            Ok(std::fs::read_to_string(dir.join(REQUEST_ID_FILE))?.trim().to_owned())
        }
        _ => bail!("{} is not empty: give a new directory, credentials are never overwritten", dir.display()),
    }
}

async fn post(client: &awc::Client, url: &str, token: &str, body: &Value) -> anyhow::Result<(u16, Value)> {
    let mut res = client
        .post(url)
        .insert_header(("Authorization", format!("Bearer {token}")))
        .send_json(body)
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach {url}: {e}"))?;
    let bytes = res.body().limit(256 * 1024).await.context("reading the answer")?;
    let parsed = serde_json::from_slice(&bytes).unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes)));
    Ok((res.status().as_u16(), parsed))
}

/// Makes the account and writes its files; `now` dates the certificate.
pub async fn create(req: &NewAccount, now: DateTime<Utc>) -> anyhow::Result<Made> {
    if !(1..=CERT_DAYS_MAX).contains(&req.cert_days) {
        bail!("--cert-days must be from 1 to {CERT_DAYS_MAX}");
    }
    let request_id = request_id_of(&req.out)?;
    let cert = match &req.cert_file {
        Some(path) => {
            let pem = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            certs::parse_pem(&pem)
                .map_err(|e| anyhow::anyhow!("{} is not a certificate: {e}", path.display()))?;
            certs::GeneratedCert { cert_pem: pem, key_pem: String::new() }
        }
        None => certs::generate(
            &format!("pixgw client {}", req.name),
            now - chrono::Duration::hours(1),
            now + chrono::Duration::days(i64::from(req.cert_days)),
        )
        .context("generating the client certificate")?,
    };
    let base = req.url.trim_end_matches('/');
    let client = awc::Client::builder().timeout(ADMIN_ANSWER_WAIT).finish();
    let mut body =
        json!({"name": req.name, "document": req.document, "sandbox": req.sandbox, "requestId": request_id});
    if let Some(opening) = &req.initial_balance {
        body["initialBalance"] = json!(opening);
    }
    let (status, created) = post(&client, &format!("{base}/admin/accounts"), &req.admin_token, &body).await?;
    if status != 201 && status != 200 {
        bail!("the server refused the account ({status}): {created}");
    }
    let account_id = created["accountId"].as_u64().context("the answer names no accountId")?;
    // A replay (an earlier run made the account and died before writing its files): its
    // secret was shown to that run only, so a new one is made, and the old one stops working.
    let client_secret = if status == 200 {
        let url = format!("{base}/admin/accounts/{account_id}/secret");
        let (status, rotated) = post(&client, &url, &req.admin_token, &json!({})).await?;
        if status != 200 {
            bail!("account {account_id} was made by an earlier run; a new client secret was refused ({status}: {rotated})");
        }
        rotated["clientSecret"].clone()
    } else {
        created["clientSecret"].clone()
    };
    let credentials = json!({
        "accountId": account_id,
        "clientId": created["clientId"],
        "clientSecret": client_secret,
        "webhookSecret": created["webhookSecret"],
    });
    crate::bootstrap::write_client_files(&req.out, &credentials, &cert)?;
    let url = format!("{base}/admin/accounts/{account_id}/certificates");
    let (status, registered) = post(&client, &url, &req.admin_token, &json!({"pem": cert.cert_pem})).await?;
    if !(200..300).contains(&status) {
        bail!(
            "account {account_id} was made and its credentials written to {}, but registering its \
             certificate failed ({status}: {registered}); register {} with POST {url}",
            req.out.display(),
            req.out.join("client-cert.pem").display()
        );
    }
    Ok(Made {
        account_id,
        client_id: credentials["clientId"].as_str().unwrap_or_default().to_owned(),
        out: req.out.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn a_certificate_validity_outside_its_bounds_is_refused_before_anything_is_sent() {
        let dir = tempfile::tempdir().unwrap();
        let req = |cert_days| NewAccount {
            // Nothing listens here: reaching the network would fail differently.
            url: "http://127.0.0.1:9".into(),
            admin_token: "t".repeat(16),
            name: "Acme".into(),
            document: "52998224725".into(),
            sandbox: false,
            cert_days,
            out: dir.path().join("acme"),
            cert_file: None,
            initial_balance: None,
        };
        for days in [0, CERT_DAYS_MAX + 1] {
            let e = create(&req(days), Utc::now()).await.unwrap_err().to_string();
            assert!(e.contains("--cert-days must be from 1 to 3650"), "{days}: {e}");
        }
        let e = create(&req(CERT_DAYS_MAX), Utc::now()).await.unwrap_err().to_string();
        assert!(e.contains("cannot reach"), "the largest validity is taken: {e}");
        // Only the request id, so that a run again with the same directory asks for the same
        // account.
        let left: Vec<_> =
            std::fs::read_dir(dir.path().join("acme")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [REQUEST_ID_FILE], "nothing but the request id when the server was not reached");
    }

    #[test]
    fn an_output_directory_that_holds_anything_but_an_unfinished_runs_request_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = request_id_of(dir.path()).unwrap();
        assert_eq!(request_id_of(dir.path()).unwrap(), first, "the same id for a run again");
        let fresh = request_id_of(&dir.path().join("new")).unwrap();
        assert_ne!(fresh, first, "a new directory, a new request");
        std::fs::write(dir.path().join("credentials.json"), "{}").unwrap();
        let e = request_id_of(dir.path()).unwrap_err().to_string();
        assert!(e.contains("never overwritten"), "{e}");
    }
}
