//! Secrets sealed at rest (`serve --secrets-key-file`): with a key file no webhook secret
//! is stored in clear, a sealed store does not start without its key, and with it every
//! secret reads back (webhook secrets, and the token-signing key, which keeps old tokens valid).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::helpers::{bin, serve_to_completion, Options, TestApp};

/// Every file under `dir`, its Demo files aside, whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(p) = pending.pop() {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "demo") {
                continue;
            }
            pending.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if std::fs::read(&p).unwrap().windows(needle.len()).any(|w| w == needle.as_bytes()) {
            found.push(p);
        }
    }
    found
}

/// Creates an account under `request_id`; answers its webhook secret.
async fn account_secret(app: &TestApp, request_id: &str) -> (u16, String) {
    let body = json!({"name": "Sealed Ltda", "document": "11444777000161", "requestId": request_id});
    let (s, b) = app.admin("POST", "/admin/accounts", Some(body)).await;
    (s, b["webhookSecret"].as_str().unwrap_or_default().to_owned())
}

#[actix_rt::test]
async fn with_a_key_file_no_secret_is_stored_in_clear_and_a_sealed_store_needs_its_key() {
    let work = tempfile::tempdir().unwrap();
    let key = work.path().join("secrets.key");
    let out = Command::new(bin()).args(["keygen", "secrets", "--out"]).arg(&key).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    }

    // Without a key file the secrets are in the store's files in clear: what the check
    // below would find if sealing did nothing.
    let plain = TestApp::spawn_fast().await;
    let (s, clear_secret) = account_secret(&plain, "plain-1").await;
    assert_eq!(s, 201);
    assert!(!files_containing(&plain.data_dir(), &clear_secret).is_empty());

    let sealed = Options {
        env: vec![("PIXGW_SECRETS_KEY_FILE".into(), key.display().to_string())],
        ..Options::default()
    };
    let mut app = crate::helpers::spawn_with(sealed.clone()).await;
    let token = app.demo_token().await;
    let (s, secret) = account_secret(&app, "sealed-1").await;
    assert_eq!(s, 201);
    for clear in [&secret, &app.creds.webhook_secret] {
        let found = files_containing(&app.data_dir(), clear);
        assert!(found.is_empty(), "a webhook secret is in clear in {found:?}");
    }

    // A start without the key file is refused, and says which file it needs.
    assert!(app.stop().success());
    let refused = serve_to_completion(&app.data_dir());
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(
        !refused.status.success() && said.contains("sealed") && said.contains("--secrets-key-file"),
        "{said}"
    );

    // With it, everything reads back: the token signed before, and the webhook secret
    // (a repeated creation answers the account it made, with its secret).
    app.start_again(&sealed);
    assert_eq!(app.get_with("/api/balance", &token).await.0, 200);
    let (s, again) = account_secret(&app, "sealed-1").await;
    assert_eq!((s, again), (200, secret));
}

/// How many rows of the database's snapshot and journal hold `needle`'s bytes.
fn rows_containing(cluster: &crate::pg_cluster::PgCluster, db: &str, needle: &str) -> u64 {
    let hex: String = needle.bytes().map(|b| format!("{b:02x}")).collect();
    let q = format!(
        "SELECT (SELECT count(*) FROM pixgw_kv WHERE position('\\x{hex}'::bytea in value) > 0) + \
         (SELECT count(*) FROM pixgw_journal WHERE position('\\x{hex}'::bytea in payload) > 0)"
    );
    cluster.sql(db, &q).parse().unwrap()
}

#[actix_rt::test]
async fn on_postgres_the_database_holds_no_secret_in_clear_and_a_node_without_the_key_does_not_serve() {
    let Some(cluster) = crate::pg_cluster::PgCluster::start("secrets_on_postgres") else { return };
    let work = tempfile::tempdir().unwrap();
    let key = work.path().join("secrets.key");
    let out = Command::new(bin()).args(["keygen", "secrets", "--out"]).arg(&key).output().unwrap();
    assert!(out.status.success());
    let keyed = [("PIXGW_SECRETS_KEY_FILE", key.to_str().unwrap())];
    for (db, env) in [("plain", &[][..]), ("sealed", &keyed[..])] {
        let url = cluster.database(db);
        let mut leader = crate::postgres::node(&url, env, true).await;
        leader.creds = crate::helpers::read_credentials(&leader.data_dir());
        let (s, secret) = account_secret(&leader, "pg-1").await;
        assert_eq!(s, 201);
        let found = rows_containing(&cluster, db, &secret)
            + rows_containing(&cluster, db, &leader.creds.webhook_secret);
        // Without a key file the check finds both secrets; with one, neither.
        assert_eq!(found > 0, db == "plain", "{db}: {found} rows hold a webhook secret in clear");
        assert!(leader.stop().success());
        if db == "sealed" {
            // A node without the key file takes the lease, refuses the store and exits.
            let dir = tempfile::tempdir().unwrap();
            let refused = Command::new("timeout")
                .arg("60")
                .arg(bin())
                .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
                .arg(dir.path())
                .env("PIXGW_DATABASE_URL", &url)
                .env("RUST_LOG", "off")
                .env_remove("PIXGW_SECRETS_KEY_FILE")
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&refused.stderr).into_owned();
            assert_eq!(refused.status.code(), Some(1), "{said}");
            assert!(said.contains("sealed") && said.contains("--secrets-key-file"), "{said}");
            // It ended the lease it took as it left, so the next node need not wait it out.
            assert_eq!(cluster.sql(db, "SELECT expires_at <= now() FROM pixgw_lease"), "t");
        }
    }
}
