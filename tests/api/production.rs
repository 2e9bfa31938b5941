//! The production profile (`--production`), on the real binary: it refuses to start without
//! an admin token or client certificates; it makes no Demo account and no credentials file;
//! no account has a sandbox there, not even a Demo made by an earlier sandbox start; and
//! `pixgw account create` makes an account, with its certificate and owner-only files,
//! through the admin API.

use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::helpers::{bin, send, spawn_with, Options, TestApp};

const ADMIN_TOKEN: &str = "production-admin-token-0123456789";

fn production(extra: &[(&str, &str)]) -> Options {
    let mut env: Vec<(String, String)> =
        vec![("PIXGW_PRODUCTION".into(), "1".into()), ("PIXGW_RAIL".into(), "none".into())];
    env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    Options { test_clock: false, env, stderr: None, binary: None }
}

/// Runs `pixgw serve --production` on an empty dir with `env`, to its (failed) end.
fn refused_start(env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--production", "--data-dir"])
        .arg(dir.path())
        .env("RUST_LOG", "off")
        .env_remove("PIXGW_ADMIN_TOKEN")
        .env_remove("PIXGW_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(!out.status.success(), "it started");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "it wrote into the data dir");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_production_start_without_its_safeguards_is_refused_with_the_reason() {
    let e = refused_start(&[("PIXGW_REQUIRE_CLIENT_CERT", "1"), ("PIXGW_RAIL", "none")]);
    assert!(e.contains("an admin token is required"), "{e}");
    // The simulator (the default rail) moves no money: production says so.
    let e = refused_start(&[("PIXGW_ADMIN_TOKEN", ADMIN_TOKEN), ("PIXGW_REQUIRE_CLIENT_CERT", "1")]);
    assert!(e.contains("--rail spi"), "{e}");
    let e = refused_start(&[("PIXGW_ADMIN_TOKEN", ADMIN_TOKEN), ("PIXGW_RAIL", "none")]);
    assert!(e.contains("--require-client-cert"), "{e}");
    let e = refused_start(&[
        ("PIXGW_ADMIN_TOKEN", ADMIN_TOKEN),
        ("PIXGW_REQUIRE_CLIENT_CERT", "1"),
        ("PIXGW_TEST_CLOCK", "1"),
        ("PIXGW_RAIL", "none"),
    ]);
    assert!(e.contains("test clock"), "{e}");
}

fn create_account(app: &TestApp, out: &std::path::Path, sandbox: bool) -> std::process::Output {
    let mut cmd = Command::new(bin());
    cmd.args(["account", "create", "--name", "Acme Pagamentos", "--document", "52998224725", "--url"])
        .arg(&app.base)
        .arg("--out")
        .arg(out)
        .env("PIXGW_ADMIN_TOKEN", ADMIN_TOKEN);
    if sandbox {
        cmd.arg("--sandbox");
    }
    cmd.output().unwrap()
}

#[actix_rt::test]
async fn a_production_server_has_no_sandbox_and_makes_accounts_with_pixgw_account_create() {
    // An earlier sandbox start on the same data dir made the Demo account.
    let mut app = spawn_with(Options { test_clock: false, ..Default::default() }).await;
    assert!(app.stop().success());
    let opts = production(&[("PIXGW_ADMIN_TOKEN", ADMIN_TOKEN), ("PIXGW_REQUIRE_CLIENT_CERT", "1")]);
    app.start_again(&opts);
    app.creds.admin_token = ADMIN_TOKEN.into();
    let (s, health) = app.get_with("/healthz", "").await;
    assert_eq!(s, 200, "{health}");

    // The Demo account is still there, but it has no sandbox here.
    let demo = app.demo_token().await;
    let pem = pixgw::auth::certs::url_encode_pem(&app.creds.cert_pem);
    let with_cert =
        |req: awc::ClientRequest| req.bearer_auth(&demo).insert_header(("X-SSL-Client-Cert", pem.clone()));
    let (s, b) =
        send(with_cert(app.client.post(app.url("/sandbox/pix-in"))), Some(json!({"amount": 5}))).await;
    assert_eq!(s, 403, "{b}");
    let (s, b) = send(
        with_cert(app.client.post(app.url("/api/pix/cash-out")))
            .insert_header(("X-Sandbox-Scenario", "CONFIRM")),
        Some(serde_json::from_str::<Value>(&crate::helpers::cash_out_body("p1", "1")).unwrap()),
    )
    .await;
    assert_eq!(s, 400, "{b}");
    assert!(b.to_string().contains("only accepted for sandbox accounts"), "{b}");
    // Nor can one be made.
    let (s, b) = app
        .admin(
            "POST",
            "/admin/accounts",
            Some(json!({"name": "S", "document": "52998224725", "sandbox": true})),
        )
        .await;
    assert_eq!(s, 400, "{b}");
    // Nor does money appear without a transaction: an opening balance is refused.
    let opening = json!({"name": "L", "document": "52998224725", "initialBalance": "10.00"});
    let (s, b) = app.admin("POST", "/admin/accounts", Some(opening)).await;
    assert_eq!(s, 400, "{b}");
    assert!(b.to_string().contains("operator credit"), "{b}");

    // pixgw account create: an account, its certificate registered, its files owner-only.
    let out = app.data_dir().join("acme");
    let made = create_account(&app, &out, false);
    let printed = String::from_utf8_lossy(&made.stdout);
    assert!(made.status.success(), "{printed}{}", String::from_utf8_lossy(&made.stderr));
    assert!(printed.contains("account 2 created"), "{printed}");
    for file in [
        "credentials.json",
        "token-request.json",
        "client-cert.pem",
        "client-key.pem",
        "client-cert.urlencoded",
    ] {
        let meta = std::fs::metadata(out.join(file)).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{file}");
        }
        assert!(meta.len() > 0, "{file}");
    }
    let creds: Value = serde_json::from_slice(&std::fs::read(out.join("credentials.json")).unwrap()).unwrap();
    assert!(creds.get("adminToken").is_none(), "an account's files never hold the admin token: {creds}");
    // The files are enough to get a token, exactly as README shows for the Demo.
    let body = std::fs::read_to_string(out.join("token-request.json")).unwrap();
    let header = std::fs::read_to_string(out.join("client-cert.urlencoded")).unwrap();
    let req =
        app.client.post(app.url("/api/auth/token")).insert_header(("X-SSL-Client-Cert", header.clone()));
    let (s, t) = send(req, Some(serde_json::from_str(&body).unwrap())).await;
    assert_eq!(s, 201, "{t}");
    let token = t["access_token"].as_str().unwrap();
    let req = app
        .client
        .get(app.url("/api/account"))
        .bearer_auth(token)
        .insert_header(("X-SSL-Client-Cert", header));
    let (s, me) = send(req, None).await;
    assert_eq!((s, me["name"].as_str()), (200, Some("Acme Pagamentos")), "{me}");
    // Its directory is never overwritten, and a sandbox account is refused.
    let again = create_account(&app, &out, false);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("not empty"));
    let sandbox = create_account(&app, &app.data_dir().join("sandbox"), true);
    assert!(!sandbox.status.success());
    assert!(String::from_utf8_lossy(&sandbox.stderr).contains("no sandbox accounts"), "{sandbox:?}");

    // Its report to a pipe whose reader is gone (`... | head -1` after its line) is dropped,
    // not a panic: the account was made, and the exit status says so, so a script that
    // retries on failure does not make a second one.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let piped = app.data_dir().join("piped");
    let made = Command::new(bin())
        .args(["account", "create", "--name", "Acme Pagamentos", "--document", "52998224725", "--url"])
        .arg(&app.base)
        .arg("--out")
        .arg(&piped)
        .env("PIXGW_ADMIN_TOKEN", ADMIN_TOKEN)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&made.stderr);
    assert!(made.status.success() && !stderr.contains("panicked"), "{:?}: {stderr}", made.status);
    assert!(piped.join("credentials.json").exists());
    let (s, b) = app.admin("GET", "/admin/accounts/3", None).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = app.admin("GET", "/admin/accounts/4", None).await;
    assert_eq!(s, 404, "one account, not two: {b}");

    // A run that died after the server made its account (its request id written, no
    // credentials yet): the same run again finishes that account instead of making another.
    let resumed = app.data_dir().join("resumed");
    std::fs::create_dir_all(&resumed).unwrap();
    std::fs::write(resumed.join(".request-id"), "run-7").unwrap();
    let first = json!({"name": "Acme Pagamentos", "document": "52998224725", "requestId": "run-7"});
    let (s, made) = app.admin("POST", "/admin/accounts", Some(first.clone())).await;
    assert_eq!(s, 201, "{made}");
    let id = made["accountId"].as_u64().unwrap();
    let again = create_account(&app, &resumed, false);
    let printed = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{printed}{}", String::from_utf8_lossy(&again.stderr));
    assert!(printed.contains(&format!("account {id} created")), "the same account: {printed}");
    let (s, b) = app.admin("GET", &format!("/admin/accounts/{}", id + 1), None).await;
    assert_eq!(s, 404, "no second account: {b}");
    // Its files hold a secret that works (the one the dead run saw was replaced).
    let body = std::fs::read_to_string(resumed.join("token-request.json")).unwrap();
    let header = std::fs::read_to_string(resumed.join("client-cert.urlencoded")).unwrap();
    let req = app.client.post(app.url("/api/auth/token")).insert_header(("X-SSL-Client-Cert", header));
    let (s, t) = send(req, Some(serde_json::from_str(&body).unwrap())).await;
    assert_eq!(s, 201, "{t}");
    // The server answers a replay without the secret; another name under the id is refused.
    let (s, replay) = app.admin("POST", "/admin/accounts", Some(first)).await;
    assert_eq!(
        (s, replay["accountId"].as_u64(), replay["replayed"].as_bool()),
        (200, Some(id), Some(true)),
        "{replay}"
    );
    assert!(replay["clientSecret"].is_null(), "{replay}");
    let (s, b) = app
        .admin(
            "POST",
            "/admin/accounts",
            Some(json!({"name": "Other", "document": "52998224725", "requestId": "run-7"})),
        )
        .await;
    assert_eq!(s, 409, "{b}");
}

#[actix_rt::test]
async fn a_first_production_start_writes_no_demo_account_and_no_credentials() {
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let opts = production(&[("PIXGW_ADMIN_TOKEN", ADMIN_TOKEN), ("PIXGW_ALLOW_WITHOUT_CLIENT_CERT", "1")]);
    let (child, base) = crate::helpers::start_process(dir.path(), &opts);
    let mut app = TestApp::adopt(base, dir.clone(), child);
    app.creds.admin_token = ADMIN_TOKEN.into();
    assert!(!dir.path().join("demo").exists(), "no Demo files");
    let (s, b) = app.admin("GET", "/admin/accounts/1", None).await;
    assert_eq!(s, 404, "no account at all: {b}");
    assert!(app.stop().success());
}

/// `app.admin` with a given token: the status.
async fn admin_status(app: &TestApp, token: &str, path: &str) -> u16 {
    let res = app.client.get(app.url(path)).bearer_auth(token).send().await.unwrap();
    res.status().as_u16()
}

#[actix_rt::test]
async fn named_admin_tokens_are_audited_by_name_and_read_again_on_sighup() {
    use std::os::unix::fs::PermissionsExt;
    const ALICE: &str = "alice-admin-token-0123456789";
    const BOB: &str = "bob-admin-token-01234567890";
    const CAROL: &str = "carol-admin-token-012345678";
    let keys = tempfile::tempdir().unwrap();
    let file = keys.path().join("admin-tokens");
    let write = |text: &str| {
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    };
    write(&format!("# operators of this node\nalice {ALICE}\nbob {BOB}\n"));
    let log = keys.path().join("server.log");
    let mut opts = production(&[
        ("PIXGW_ADMIN_TOKEN_FILE", file.to_str().unwrap()),
        ("PIXGW_ALLOW_WITHOUT_CLIENT_CERT", "1"),
        ("RUST_LOG", "info"),
    ]);
    opts.stderr = Some(log.clone());
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let (child, base) = crate::helpers::start_process(dir.path(), &opts);
    let app = TestApp::adopt(base, dir.clone(), child);
    // Each name's token works; anything else is 401.
    assert_eq!(admin_status(&app, ALICE, "/admin/accounts/1").await, 404, "alice is an operator");
    assert_eq!(admin_status(&app, BOB, "/admin/accounts/1").await, 404, "bob too");
    assert_eq!(admin_status(&app, "not-a-token-of-anyone-0000", "/admin/accounts/1").await, 401);
    // The audit line names the operator, never the token (log lines are written by a thread
    // of their own: read until they are there, bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if text.contains("operator=alice") && text.contains("operator=bob") {
            break text;
        }
        assert!(std::time::Instant::now() < deadline, "no audit lines: {text}");
        actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let audit: Vec<&str> = text.lines().filter(|l| l.contains("operator request")).collect();
    assert!(
        audit.iter().any(|l| l.contains("operator=alice"))
            && audit.iter().any(|l| l.contains("operator=bob")),
        "{text}"
    );
    assert!(!text.contains(ALICE) && !text.contains(BOB), "a token in the log");

    // Alice leaves, carol comes: the file is read again on SIGHUP, without a restart.
    write(&format!("bob {BOB}\ncarol {CAROL}\n"));
    let hup = Command::new("kill").args(["-HUP", &app.pid().to_string()]).status().unwrap();
    assert!(hup.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while admin_status(&app, CAROL, "/admin/accounts/1").await != 404 {
        assert!(std::time::Instant::now() < deadline, "carol's token never worked");
        actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(admin_status(&app, ALICE, "/admin/accounts/1").await, 401, "alice's token no longer works");
    assert_eq!(admin_status(&app, BOB, "/admin/accounts/1").await, 404);
    // A file that breaks a rule changes nothing.
    write("carol short\n");
    let hup = Command::new("kill").args(["-HUP", &app.pid().to_string()]).status().unwrap();
    assert!(hup.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&log).unwrap().contains("the admin token file was not read") {
        assert!(std::time::Instant::now() < deadline, "the refused reload was not logged");
        actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(admin_status(&app, CAROL, "/admin/accounts/1").await, 404, "the tokens stayed");

    // The CLI reads the same file: `pixgw backup` presents its first token.
    write(&format!("carol {CAROL}\nbob {BOB}\n"));
    let to = keys.path().join("backup");
    let out = Command::new(bin())
        .args(["backup", "--url", &app.base, "--to"])
        .arg(&to)
        .env_remove("PIXGW_ADMIN_TOKEN")
        .env("PIXGW_ADMIN_TOKEN_FILE", &file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let audited =
        |text: &str| text.lines().any(|l| l.contains("operator=carol") && l.contains("/admin/backup"));
    while !audited(&std::fs::read_to_string(&log).unwrap()) {
        assert!(std::time::Instant::now() < deadline, "no audit line for the backup");
        actix_rt::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
