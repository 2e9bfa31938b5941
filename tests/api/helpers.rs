//! The harness every integration test uses: spawn the real `pixgw` binary on port 0 with a
//! temporary data dir and the test clock, read the Demo credentials it wrote, make
//! certificates with any validity window, and get tokens.
//!
//! `spawn_in_process` builds the same application inside the test's runtime on a store the
//! test controls, for the cases a subprocess cannot show (a storage outage).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use awc::Client;
use chrono::{DateTime, Utc};
use pixgw::auth::certs;
use pixgw::config::{LogFormat, Settings};
use pixgw::startup::Application;
use pixgw::store::Storage;
use serde_json::{json, Value};
use tempfile::TempDir;

#[derive(Clone)]
pub struct Credentials {
    pub account_id: u64,
    pub client_id: String,
    pub client_secret: String,
    pub webhook_secret: String,
    pub admin_token: String,
    pub cert_pem: String,
}

pub struct TestApp {
    pub base: String,
    pub client: Client,
    pub creds: Credentials,
    pub dir: Arc<TempDir>,
    child: Option<Child>,
}

/// How to start the binary.
#[derive(Clone)]
pub struct Options {
    pub test_clock: bool,
    pub env: Vec<(String, String)>,
    /// Where the server's log goes (the test's own stderr when `None`).
    pub stderr: Option<PathBuf>,
    /// Another pixgw binary to run (a previous release's), instead of this build's.
    pub binary: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options { test_clock: true, env: vec![], stderr: None, binary: None }
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pixgw")
}

/// Starts the binary on `dir`; answers the child and its base URL, read from the first
/// line the server prints.
pub fn start_process(dir: &Path, opts: &Options) -> (Child, String) {
    let mut cmd = match &opts.binary {
        Some(b) => Command::new(b),
        None => Command::new(bin()),
    };
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env("RUST_LOG", "warn")
        .env_remove("PIXGW_ADMIN_TOKEN")
        .env_remove("PIXGW_CONFIG")
        .stdout(Stdio::piped())
        .stderr(match &opts.stderr {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("create the log file")),
            None => Stdio::inherit(),
        });
    if opts.test_clock {
        cmd.arg("--test-clock");
    }
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn pixgw");
    let stdout = child.stdout.take().expect("stdout");
    let mut first = String::new();
    let mut reader = BufReader::new(stdout);
    reader.read_line(&mut first).expect("read banner");
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in reader.lines() {});
    let base = first
        .trim()
        .strip_prefix("pixgw listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
        .to_owned();
    (child, base)
}

/// Runs `pixgw serve` on `dir` until it exits (for starts that must fail); answers its output.
pub fn serve_to_completion(dir: &Path) -> std::process::Output {
    Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env("RUST_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

pub fn read_credentials(dir: &Path) -> Credentials {
    let demo = dir.join("demo");
    let v: Value = serde_json::from_slice(&std::fs::read(demo.join("credentials.json")).unwrap()).unwrap();
    Credentials {
        account_id: v["accountId"].as_u64().unwrap(),
        client_id: v["clientId"].as_str().unwrap().to_owned(),
        client_secret: v["clientSecret"].as_str().unwrap().to_owned(),
        webhook_secret: v["webhookSecret"].as_str().unwrap().to_owned(),
        admin_token: v["adminToken"].as_str().unwrap().to_owned(),
        cert_pem: std::fs::read_to_string(demo.join("client-cert.pem")).unwrap(),
    }
}

/// README, as a newcomer reads it (its name is spelled so that the document-reference
/// check does not take this line for a citation).
pub fn readme() -> String {
    std::fs::read_to_string(format!("{}/{}.md", env!("CARGO_MANIFEST_DIR"), "README")).unwrap()
}

pub fn client() -> Client {
    Client::builder().timeout(Duration::from_secs(30)).finish()
}

pub fn client_without_redirects() -> Client {
    Client::builder().disable_redirects().timeout(Duration::from_secs(30)).finish()
}

pub async fn spawn_app() -> TestApp {
    spawn_with(Options::default()).await
}

pub async fn spawn_with(opts: Options) -> TestApp {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let (child, base) = start_process(dir.path(), &opts);
    TestApp { base, client: client(), creds: read_credentials(dir.path()), dir, child: Some(child) }
}

/// Builds the application in this process on `storage` (no subprocess).
pub async fn spawn_in_process(storage: Storage) -> TestApp {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let settings = Settings {
        production: false,
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        test_clock: true,
        log_format: LogFormat::Human,
        access_log: Default::default(),
        admin_token: None,
        sim_settle_ms: 200,
        rail: Default::default(),
        dict_file: None,
        require_client_cert: false,
        body_timeout_ms: 10_000,
        webhook_allow_http: false,
        webhook_allow_private: false,
        webhook_ca_file: None,
        webhook_senders: 1,
        workers: 1,
        storage_cache_mb: 16,
        journal_segment_mb: 1,
        shutdown_timeout_seconds: 1,
        store: Default::default(),
        lease: Default::default(),
        spi: None,
        payload: None,
        admin_tokens: None,
        admin_token_file: None,
        sealing: None,
        account_rate_limit: None,
        operator_credit_single_max: pixgw::domain::money::Money::parse("10000.00").unwrap(),
    };
    let app = Application::build_with_storage(settings, storage).unwrap();
    let base = format!("http://{}", app.address());
    actix_rt::spawn(app.run_until_stopped());
    TestApp { base, client: client(), creds: read_credentials(dir.path()), dir, child: None }
}

impl TestApp {
    /// A server started by the test itself (a node on a shared database, whose Demo
    /// credentials may be in another node's data dir: the test sets `creds`).
    pub fn adopt(base: String, dir: Arc<TempDir>, child: Child) -> TestApp {
        let creds = Credentials {
            account_id: 0,
            client_id: String::new(),
            client_secret: String::new(),
            webhook_secret: String::new(),
            admin_token: String::new(),
            cert_pem: String::new(),
        };
        TestApp { base, client: client(), creds, dir, child: Some(child) }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("a subprocess server").id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Stops the server with SIGTERM and waits for it; answers its exit status.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("a subprocess server");
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        child.wait().unwrap()
    }

    /// Hands over the server process (the crash test kills it itself).
    pub fn take_child(&mut self) -> Option<Child> {
        self.child.take()
    }

    /// Starts the server on the same data dir after it was killed.
    pub fn start_again(&mut self, opts: &Options) {
        assert!(self.child.is_none(), "the server is still running");
        let (child, base) = start_process(self.dir.path(), opts);
        self.child = Some(child);
        self.base = base;
    }

    /// Stops the server gracefully and starts it again on the same data dir.
    pub fn restart(&mut self, opts: &Options) {
        assert!(self.stop().success());
        self.start_again(opts);
    }

    /// POSTs a JSON body with the admin token; answers status and body.
    pub async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let req =
            self.client.request(method.parse().unwrap(), self.url(path)).bearer_auth(&self.creds.admin_token);
        send(req, body).await
    }

    /// Asks for a token with a PEM (URL-encoded here) and a clientId/clientSecret.
    pub async fn token_with(&self, pem: &str, client_id: &str, secret: &str) -> (u16, Value) {
        let req = self
            .client
            .post(self.url("/api/auth/token"))
            .insert_header(("X-SSL-Client-Cert", certs::url_encode_pem(pem)));
        send(req, Some(json!({"clientId": client_id, "clientSecret": secret}))).await
    }

    /// A token for the Demo account.
    pub async fn demo_token(&self) -> String {
        let (status, body) =
            self.token_with(&self.creds.cert_pem, &self.creds.client_id, &self.creds.client_secret).await;
        assert_eq!(status, 201, "{body}");
        body["access_token"].as_str().unwrap().to_owned()
    }

    /// GET with a bearer token.
    pub async fn get_with(&self, path: &str, token: &str) -> (u16, Value) {
        send(self.client.get(self.url(path)).bearer_auth(token), None).await
    }

    /// Moves the test clock forward.
    pub async fn advance(&self, seconds: i64) {
        let (s, b) = self.admin("POST", "/admin/clock", Some(json!({"advanceSeconds": seconds}))).await;
        assert_eq!(s, 200, "{b}");
    }

    /// Creates a live account with a certificate; answers (accountId, clientId, secret, pem).
    pub async fn new_account(&self, name: &str) -> (u64, String, String, String) {
        self.new_account_with(name, false).await
    }

    /// Creates an account with a certificate; answers (accountId, clientId, secret, pem).
    pub async fn new_account_with(&self, name: &str, sandbox: bool) -> (u64, String, String, String) {
        let body = json!({"name": name, "document": "52998224725", "sandbox": sandbox});
        let (s, b) = self.admin("POST", "/admin/accounts", Some(body)).await;
        assert_eq!(s, 201, "{b}");
        let id = b["accountId"].as_u64().unwrap();
        let now = Utc::now();
        let pem = cert(now - chrono::Duration::hours(1), now + chrono::Duration::days(30));
        let (s, r) = self
            .admin("POST", &format!("/admin/accounts/{id}/certificates"), Some(json!({"pem": pem})))
            .await;
        assert_eq!(s, 201, "{r}");
        (id, b["clientId"].as_str().unwrap().to_owned(), b["clientSecret"].as_str().unwrap().to_owned(), pem)
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A fresh self-signed client certificate with the given window.
pub fn cert(not_before: DateTime<Utc>, not_after: DateTime<Utc>) -> String {
    certs::generate("test client", not_before, not_after).unwrap().cert_pem
}

/// Sends a request with an optional JSON body; answers status and the JSON body (Null if
/// the body is empty, and a failed assertion if it is not JSON).
/// Sends a request; answers status and JSON body, after checking both against the OpenAPI
/// document (`contract.rs`).
pub async fn send(req: awc::ClientRequest, body: Option<Value>) -> (u16, Value) {
    let (method, path) = (req.get_method().to_string(), req.get_uri().path().to_owned());
    let mut res = match &body {
        Some(b) => req.send_json(b).await.unwrap(),
        None => req.send().await.unwrap(),
    };
    let status = res.status().as_u16();
    let bytes = res.body().limit(1 << 20).await.unwrap();
    if bytes.is_empty() {
        crate::contract::check(&method, &path, body.as_ref(), status, None);
        return (status, Value::Null);
    }
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("not JSON ({status}): {}", String::from_utf8_lossy(&bytes)));
    crate::contract::check(&method, &path, body.as_ref(), status, Some(&v));
    (status, v)
}

/// The keys of an extended error body, checked on every error the tests see.
pub fn assert_extended(body: &Value, status: u16, code: &str) {
    assert_eq!(body["statusCode"], status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    for key in ["timestamp", "path", "method", "message", "userMessage", "errorId"] {
        assert!(!body[key].is_null(), "missing {key} in {body}");
    }
}

/// The keys of a simple error body.
pub fn assert_simple(body: &Value, status: u16) {
    assert_eq!(body["statusCode"], status, "{body}");
    assert!(body["message"].is_string(), "{body}");
    assert!(body["error"].is_string(), "{body}");
    assert!(body.get("code").is_none(), "{body}");
}

/// A key of the shipped directory of the given type: (key as the directory writes it,
/// holder document, holder ISPB).
pub fn directory_key(key_type: &str, nth: usize) -> (String, String, String) {
    let dict: Value = serde_json::from_str(include_str!("../../data/dict.json")).unwrap();
    let e = dict["keys"].as_array().unwrap().iter().filter(|k| k["keyType"] == key_type).nth(nth).unwrap();
    (
        e["key"].as_str().unwrap().to_owned(),
        e["document"].as_str().unwrap().to_owned(),
        e["ispb"].as_str().unwrap().to_owned(),
    )
}

/// A cash-out body to a known e-mail key.
pub fn cash_out_body(external_id: &str, value: &str) -> String {
    let (key, doc, _) = directory_key("EMAIL", 0);
    format!(
        r#"{{"value": {value}, "externalId": "{external_id}", "details": {{"key": "{key}", "keyType": "EMAIL", "name": "Payee", "document": "{doc}"}}}}"#
    )
}

impl TestApp {
    /// Starts with a short settle delay so tests see final states quickly.
    pub async fn spawn_fast() -> TestApp {
        spawn_with(Options { env: vec![("PIXGW_SIM_SETTLE_MS".into(), "20".into())], ..Options::default() })
            .await
    }

    /// POSTs a raw JSON text (amounts exactly as written) with a bearer token.
    pub async fn post_raw(
        &self,
        path: &str,
        token: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut req = self.client.post(self.url(path)).bearer_auth(token).content_type("application/json");
        for (k, v) in headers {
            req = req.insert_header((*k, *v));
        }
        let mut res = req.send_body(body.to_owned()).await.unwrap();
        let status = res.status().as_u16();
        let bytes = res.body().await.unwrap();
        let answer: Option<Value> = serde_json::from_slice(&bytes).ok();
        // The body as sent, when it is JSON (some tests send broken text on purpose).
        let request: Option<Value> = serde_json::from_str(body).ok();
        crate::contract::check("POST", path, request.as_ref(), status, answer.as_ref());
        (status, answer.unwrap_or(Value::Null))
    }

    /// Funds the account through the sandbox.
    pub async fn fund(&self, token: &str, amount: &str) {
        let (s, b) =
            self.post_raw("/sandbox/pix-in", token, &format!(r#"{{"amount": {amount}}}"#), &[]).await;
        assert_eq!(s, 201, "{b}");
    }

    /// The standard balance: (gross, blocked, net) as text with two decimals.
    pub async fn balance(&self, token: &str) -> (String, String, String) {
        let (s, b) = self.get_with("/api/balance", token).await;
        assert_eq!(s, 200, "{b}");
        let text = |v: &Value| serde_json::to_string(v).unwrap();
        (text(&b["grossBalance"]), text(&b["blockedBalance"]), text(&b["netBalance"]))
    }

    /// Polls a transaction until it leaves PENDING (bounded: 10 s); answers its record.
    pub async fn wait_final(&self, token: &str, id: &str) -> Value {
        self.wait_final_within(token, id, Duration::from_secs(10)).await
    }

    /// [`TestApp::wait_final`] with another bound.
    pub async fn wait_final_within(&self, token: &str, id: &str, bound: Duration) -> Value {
        let deadline = std::time::Instant::now() + bound;
        loop {
            let (s, t) = self.get_with(&format!("/api/transactions/{id}"), token).await;
            assert_eq!(s, 200, "{t}");
            if t["status"] != "PENDING" {
                return t;
            }
            assert!(std::time::Instant::now() < deadline, "still pending: {t}");
            actix_rt::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A TCP proxy to `upstream` (host:port); answers its own host:port. It forwards both ways,
/// except that the first chunk a client sends for which `cut` is true marks its connection:
/// the next chunk the server answers on it is dropped and both sides are closed, as a crash
/// or a network cut right after the server acted would do. Only the first match cuts.
pub fn cutting_proxy(upstream: &str, cut: impl Fn(&[u8]) -> bool + Send + Sync + 'static) -> String {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    let upstream = upstream.to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cut = Arc::new(cut);
    let used = Arc::new(AtomicBool::new(false));
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(&upstream) else { return };
            let cut_next = Arc::new(AtomicBool::new(false));
            let (mut from_client, mut to_server) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (cut, used, mark) = (Arc::clone(&cut), Arc::clone(&used), Arc::clone(&cut_next));
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n @ 1..) = from_client.read(&mut buf) {
                    // Marked before it is forwarded: the answer cannot come sooner.
                    if !used.load(Ordering::SeqCst) && cut(&buf[..n]) && !used.swap(true, Ordering::SeqCst) {
                        mark.store(true, Ordering::SeqCst);
                    }
                    if to_server.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = to_server.shutdown(Shutdown::Write);
            });
            std::thread::spawn(move || {
                let (mut from_server, mut to_client) = (server, client);
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n @ 1..) = from_server.read(&mut buf) {
                    if cut_next.load(Ordering::SeqCst) {
                        let _ = to_client.shutdown(Shutdown::Both);
                        let _ = from_server.shutdown(Shutdown::Both);
                        return;
                    }
                    if to_client.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = to_client.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}
