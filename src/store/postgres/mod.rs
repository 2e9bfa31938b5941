//! The PostgreSQL engine: the same storage as the embedded one, with the database as its
//! journal and its snapshot store (docs/storage.md "PostgreSQL").
//!
//! - [`PgLog`] is the committer's log: a group is one row of `pixgw_journal`, inserted by a
//!   single statement that also locks the lease row at the writer's epoch. The statement is
//!   its own transaction, and PostgreSQL answers it only after its COMMIT is durable (and
//!   replicated, where the operator configured synchronous standbys), so a group is
//!   acknowledged exactly when the database holds it.
//! - [`PgStore`] is the snapshot store under the overlay: `pixgw_kv`, brought up to date by
//!   the checkpoints, every write of it checked against the epoch in the same transaction.
//! - The lease (`lease.rs`) says which node writes.
//!
//! Fencing: every write of a leader, journal row or snapshot part, checks in its own
//! transaction that the lease still carries the leader's epoch, with a share lock on the
//! lease row. A takeover bumps the epoch with an update of that row, which waits for every
//! such transaction still open and makes every later one find another epoch: once the new
//! leader's bump has committed, nothing of the old leader can commit, whatever it believes.
//!
//! The [`Store`] trait is synchronous, as sled is. Its calls run on a small runtime of this
//! module's own ("pixgw-postgres" threads) and the caller's thread waits for the answer, as
//! it waits for sled's disk; each call is bounded by [`PG_CALL_TIMEOUT`], so a database
//! that does not answer makes a request fail, never hang.

pub mod import;
pub mod lease;
pub mod schema;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::{Client, NoTls};

use super::{Batch, Op, Pairs, Store, StoreError};

/// The longest any one database call may take before it counts as failed.
pub const PG_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting may take (unless the connection string says).
pub const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Connections of the read pool.
pub const PG_POOL_SIZE_MAX: usize = 8;
/// Pairs a reverse scan reads per query.
const SCAN_REV_CHUNK: i64 = 256;
/// How long the committer tries to learn the outcome of a group whose connection was lost
/// before it gives up: its requests then answer 503 (an unknown outcome, which a client
/// resolves by the externalId) and the node starts again and reads the database. Long
/// enough for a read-back on a database that is there (or on a standby just promoted),
/// short enough that a database that is gone does not hold requests: they answer at once.
pub const IN_DOUBT_RESOLVE_MAX: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// Shown with its causes: tokio-postgres says only "db error" at the top, and the
    /// server's message (or the TLS failure) is below it.
    #[error("{}", with_causes(.0))]
    Db(#[from] tokio_postgres::Error),
    #[error("the database did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the read pool: {0}")]
    Pool(String),
    #[error("this node no longer holds the lease (epoch {0}): another node writes now")]
    Deposed(u64),
    #[error("{0}")]
    Other(String),
}

/// An error and each of its sources, joined by ": ".
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

impl From<PgError> for StoreError {
    fn from(e: PgError) -> StoreError {
        StoreError::Engine(format!("postgres: {e}"))
    }
}

/// A connection string, checked, with the password kept out of every message.
#[derive(Clone)]
pub struct PgUrl {
    config: tokio_postgres::Config,
    shown: String,
    tls: PgTls,
}

/// How a node's connections to the database are secured.
#[derive(Clone)]
enum PgTls {
    /// Plain TCP: `sslmode` absent, `disable`, `allow` or `prefer`.
    Plain,
    /// TLS that checks the server's certificate chain and its name for every host:
    /// `sslmode` `require`, `verify-ca` or `verify-full`.
    Verified(tokio_postgres_rustls::MakeRustlsConnect),
}

impl std::fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl std::fmt::Display for PgUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// The TLS settings a libpq connection string may carry that tokio-postgres does not read
/// itself (`sslrootcert`, and `sslmode` beyond disable/prefer/require).
#[derive(Debug, Default, PartialEq, Eq)]
struct TlsParams {
    sslmode: Option<String>,
    sslrootcert: Option<String>,
    /// libpq's `passfile`: where the password is, when the string has none.
    passfile: Option<String>,
}

/// Takes `sslmode` and `sslrootcert` out of a connection string, in either form; answers the
/// rest of the string and what was taken.
fn take_tls_params(text: &str) -> Result<(String, TlsParams), String> {
    let mut taken = TlsParams::default();
    let mut keep = |key: &str, value: String| -> bool {
        match key {
            "sslmode" => taken.sslmode = Some(value),
            "sslrootcert" => taken.sslrootcert = Some(value),
            "passfile" => taken.passfile = Some(value),
            _ => return true,
        }
        false
    };
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        let Some((base, query)) = text.split_once('?') else { return Ok((text.to_owned(), taken)) };
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_encoding::percent_decode_str(v).decode_utf8_lossy().into_owned();
            if keep(k, value) {
                rest.push(pair);
            }
        }
        let rest = if rest.is_empty() { base.to_owned() } else { format!("{base}?{}", rest.join("&")) };
        return Ok((rest, taken));
    }
    // key = value pairs, a value quoted with '' where it holds spaces (\' and \\ escaped).
    let chars: Vec<char> = text.chars().collect();
    let (mut i, mut rest) = (0, String::new());
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i] != '=' && !chars[i].is_whitespace() {
            i += 1;
        }
        let key: String = chars[start..i].iter().collect();
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if chars.get(i) != Some(&'=') {
            return Err(format!("not a PostgreSQL connection string: `{key}` has no value"));
        }
        i += 1;
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if chars.get(i) == Some(&'\'') {
            i += 1;
            loop {
                match chars.get(i) {
                    None => {
                        return Err(format!(
                            "not a PostgreSQL connection string: the value of `{key}` is not closed"
                        ))
                    }
                    Some('\'') => break,
                    Some('\\') if i + 1 < chars.len() => {
                        value.push(chars[i + 1]);
                        i += 1;
                    }
                    Some(c) => value.push(*c),
                }
                i += 1;
            }
            i += 1;
        } else {
            while i < chars.len() && !chars[i].is_whitespace() {
                value.push(chars[i]);
                i += 1;
            }
        }
        if keep(&key, value) {
            rest.push_str(&chars[start..i].iter().collect::<String>());
            rest.push(' ');
        }
    }
    Ok((rest.trim_end().to_owned(), taken))
}

impl PgTls {
    /// What `sslmode` and `sslrootcert` ask for. Any TLS pixgw makes checks the server's
    /// certificate and name (docs/storage.md "TLS to the database"): against the PEM file
    /// `sslrootcert` alone where it is given, else against the public web roots.
    fn from_params(p: &TlsParams) -> Result<PgTls, String> {
        match p.sslmode.as_deref() {
            None | Some("disable" | "allow" | "prefer") => match &p.sslrootcert {
                Some(_) => {
                    Err("sslrootcert is given but sslmode does not ask for TLS: add sslmode=verify-full"
                        .into())
                }
                None => Ok(PgTls::Plain),
            },
            Some("require" | "verify-ca" | "verify-full") => {
                crate::trust::install_provider();
                let roots = match &p.sslrootcert {
                    Some(path) if path == "system" => crate::trust::public_roots(),
                    Some(path) => {
                        let mut roots = rustls::RootCertStore::empty();
                        crate::trust::add_pem_file(
                            &mut roots,
                            std::path::Path::new(path),
                            "sslrootcert file",
                        )?;
                        roots
                    }
                    None => crate::trust::public_roots(),
                };
                let config =
                    rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
                Ok(PgTls::Verified(tokio_postgres_rustls::MakeRustlsConnect::new(config)))
            }
            Some(other) => Err(format!(
                "sslmode={other} is not one of disable, allow, prefer, require, verify-ca, verify-full"
            )),
        }
    }
}

/// The password libpq would use for `config` when its string has none: `PGPASSWORD`, else
/// the first matching line of the password file. A password file that its group or others
/// may read is refused (libpq ignores one; a start that silently ignores it would fail later
/// with a less clear reason).
fn password_from_env(
    config: &tokio_postgres::Config,
    passfile: Option<&str>,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    if let Some(p) = env("PGPASSWORD").filter(|p| !p.is_empty()) {
        return Ok(Some(p));
    }
    let path = match passfile.map(str::to_owned).or_else(|| env("PGPASSFILE")) {
        Some(p) => std::path::PathBuf::from(p),
        None => match env("HOME") {
            Some(home) => std::path::Path::new(&home).join(".pgpass"),
            None => return Ok(None),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("reading the password file {}: {e}", path.display())),
    };
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).map_err(|e| e.to_string())?.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "the password file {} may be read by others (mode {:o}): chmod 600 it",
                path.display(),
                mode & 0o777
            ));
        }
    }
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => String::new(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432).to_string();
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or(user);
    Ok(pgpass_lookup(&text, [&host, &port, db, user]))
}

/// The password of the first line of a `.pgpass` text whose host, port, database and user
/// match (`*` matches anything; `\:` and `\\` are a colon and a backslash; `#` starts a
/// comment line).
pub fn pgpass_lookup(text: &str, wanted: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => field.extend(chars.next()),
                ':' if fields.len() < 4 => fields.push(std::mem::take(&mut field)),
                c => field.push(c),
            }
        }
        fields.push(field);
        let [host, port, db, user, password] = fields.as_slice() else { continue };
        let matches =
            [host, port, db, user].iter().zip(wanted).all(|(f, w)| f.as_str() == "*" || f.as_str() == w);
        if matches {
            return Some(password.clone());
        }
    }
    None
}

impl PgUrl {
    /// Parses a `postgres://` URL or a `key=value` string (multi-host with
    /// `target_session_attrs=read-write` included; `sslmode` and `sslrootcert` as libpq
    /// reads them, see [`PgTls`]).
    pub fn parse(text: &str) -> Result<PgUrl, String> {
        PgUrl::parse_with_env(text, |k| std::env::var(k).ok())
    }

    /// [`PgUrl::parse`] with the environment given: a string without a password takes it as
    /// libpq does, from `PGPASSWORD`, else from the password file (`passfile` in the string,
    /// `PGPASSFILE`, or `~/.pgpass`), so it never has to be on a command line.
    pub fn parse_with_env(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<PgUrl, String> {
        let (rest, tls_params) = take_tls_params(text)?;
        let tls = PgTls::from_params(&tls_params)?;
        let mut config: tokio_postgres::Config =
            rest.parse().map_err(|e| format!("not a PostgreSQL connection string: {e}"))?;
        if config.get_hosts().is_empty() {
            return Err("the PostgreSQL connection string names no host".into());
        }
        config.ssl_mode(match tls {
            PgTls::Plain => tokio_postgres::config::SslMode::Disable,
            PgTls::Verified(_) => tokio_postgres::config::SslMode::Require,
        });
        if config.get_password().is_none() {
            if let Some(password) = password_from_env(&config, tls_params.passfile.as_deref(), &env)? {
                config.password(password);
            }
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(PG_CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("pixgw");
        }
        config.keepalives(true).keepalives_idle(Duration::from_secs(10));
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
            .map(|(h, p)| match h {
                tokio_postgres::config::Host::Tcp(h) => format!("{h}:{p}"),
                tokio_postgres::config::Host::Unix(path) => format!("{}:{p}", path.display()),
            })
            .collect();
        let shown = format!(
            "postgres://{}@{}/{}{}",
            config.get_user().unwrap_or(""),
            hosts.join(","),
            config.get_dbname().unwrap_or(""),
            if matches!(tls, PgTls::Verified(_)) { " (TLS, verified)" } else { "" }
        );
        Ok(PgUrl { config, shown, tls })
    }

    /// Whether connections use TLS.
    pub fn tls(&self) -> bool {
        matches!(self.tls, PgTls::Verified(_))
    }

    /// Connects once with this string's TLS settings; the connection is driven on `handle`
    /// until the client is dropped.
    async fn connect_on(&self, handle: tokio::runtime::Handle) -> Result<Client, PgError> {
        fn drive<F>(handle: &tokio::runtime::Handle, connection: F)
        where
            F: Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
        {
            handle.spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "a database connection ended");
                }
            });
        }
        match &self.tls {
            PgTls::Plain => {
                let (client, connection) = self.config.connect(NoTls).await?;
                drive(&handle, connection);
                Ok(client)
            }
            PgTls::Verified(tls) => {
                let (client, connection) = self.config.connect(tls.clone()).await?;
                drive(&handle, connection);
                Ok(client)
            }
        }
    }
}

/// The database's standbys, as the leader sees them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Replication {
    /// Standbys in `sync` or `quorum` state: those a commit waits for.
    pub synchronous: u64,
    /// Every standby attached.
    pub attached: u64,
    /// The largest replay lag among them, in seconds.
    pub replay_lag_seconds: f64,
}

/// The database connection of a node: the runtime its calls run on, the read pool, the
/// node's name and the epoch it writes under (0: it holds no lease).
pub struct Pg {
    runtime: Option<tokio::runtime::Runtime>,
    url: PgUrl,
    pool: Pool,
    node: String,
    epoch: AtomicU64,
}

impl Drop for Pg {
    fn drop(&mut self) {
        // A runtime may not be dropped from inside another's task; let its threads end alone.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Pg {
    /// Prepares the connection (nothing is connected yet; the first call connects).
    pub fn new(url: PgUrl, node: String) -> Result<Arc<Pg>, PgError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pixgw-postgres")
            .enable_all()
            .build()
            .map_err(|e| PgError::Other(format!("starting the database threads: {e}")))?;
        let recycling = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = match &url.tls {
            PgTls::Plain => Manager::from_config(url.config.clone(), NoTls, recycling),
            PgTls::Verified(tls) => Manager::from_config(url.config.clone(), tls.clone(), recycling),
        };
        let pool = Pool::builder(manager)
            .max_size(PG_POOL_SIZE_MAX)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(PG_CALL_TIMEOUT))
            .create_timeout(Some(PG_CALL_TIMEOUT))
            .recycle_timeout(Some(PG_CALL_TIMEOUT))
            .build()
            .map_err(|e| PgError::Pool(e.to_string()))?;
        Ok(Arc::new(Pg { runtime: Some(runtime), url, pool, node, epoch: AtomicU64::new(0) }))
    }

    pub fn url(&self) -> &PgUrl {
        &self.url
    }

    /// This node's name in the lease.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The epoch this node writes under (0: none).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    fn set_epoch(&self, epoch: u64) {
        self.epoch.store(epoch, Ordering::Release);
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        // Set from `new` until drop.
        self.runtime.as_ref().map(tokio::runtime::Runtime::handle).unwrap_or_else(|| unreachable_runtime())
    }

    /// Runs `fut` on the database runtime, bounded by [`PG_CALL_TIMEOUT`], and blocks this
    /// thread until it answers. Never call it from a database runtime thread.
    pub fn block<T, F>(&self, fut: F) -> Result<T, PgError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, PgError>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle().spawn(async move {
            let out = tokio::time::timeout(PG_CALL_TIMEOUT, fut)
                .await
                .unwrap_or(Err(PgError::Timeout(PG_CALL_TIMEOUT)));
            let _ = tx.send(out);
        });
        rx.recv().unwrap_or_else(|_| Err(PgError::Other("the database task ended without an answer".into())))
    }

    /// Runs `fut` on the database runtime, bounded by [`PG_CALL_TIMEOUT`], for async callers.
    pub async fn run<T, F>(&self, fut: F) -> Result<T, PgError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, PgError>> + Send + 'static,
    {
        let task = self.handle().spawn(async move {
            tokio::time::timeout(PG_CALL_TIMEOUT, fut).await.unwrap_or(Err(PgError::Timeout(PG_CALL_TIMEOUT)))
        });
        task.await.unwrap_or_else(|e| Err(PgError::Other(format!("the database task failed: {e}"))))
    }

    /// A connection of the read pool. How long it was waited for, and how many callers wait
    /// behind it, are metrics (`pixgw_db_pool_wait_seconds`, `pixgw_db_pool_waiting`): a pool
    /// too small for the load shows there before it shows as slow requests.
    async fn pooled(pool: Pool) -> Result<deadpool_postgres::Object, PgError> {
        let asked = Instant::now();
        let got = pool.get().await;
        metrics::histogram!("pixgw_db_pool_wait_seconds").record(asked.elapsed().as_secs_f64());
        metrics::gauge!("pixgw_db_pool_waiting").set(pool.status().waiting as f64);
        got.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => PgError::Db(e),
            other => PgError::Pool(other.to_string()),
        })
    }

    /// What the database says of its standbys (`pg_stat_replication`, as seen by the leader's
    /// connection): how many are synchronous (`sync` or `quorum`), and the largest replay lag
    /// among all of them in seconds (0 when none lags or none is attached).
    pub async fn replication(self: &Arc<Self>) -> Result<Replication, PgError> {
        let pool = self.pool.clone();
        self.run(async move {
            let c = Pg::pooled(pool).await?;
            let row = c
                .query_one(
                    "SELECT count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')), count(*), \
                     COALESCE(max(EXTRACT(EPOCH FROM replay_lag)), 0)::float8 FROM pg_stat_replication",
                    &[],
                )
                .await?;
            Ok(Replication {
                synchronous: row.get::<_, i64>(0) as u64,
                attached: row.get::<_, i64>(1) as u64,
                replay_lag_seconds: row.get::<_, f64>(2),
            })
        })
        .await
    }

    /// A connection of its own (the committer's, the lease's), driven on the database
    /// runtime until it is dropped.
    pub fn connect(self: &Arc<Self>) -> Result<Client, PgError> {
        let url = self.url.clone();
        let handle = self.handle().clone();
        self.block(async move { url.connect_on(handle).await })
    }

    /// Applies the schema's migrations (see [`schema`]).
    pub fn migrate(self: &Arc<Self>) -> Result<i32, PgError> {
        let mut client = self.connect()?;
        self.block(async move {
            schema::migrate(&mut client).await.map_err(|e| match e {
                schema::SchemaError::Db(e) => PgError::Db(e),
                too_new => PgError::Other(too_new.to_string()),
            })
        })
    }

    /// The journal rows above `applied`, in order (recovery at a takeover).
    pub fn journal_after(self: &Arc<Self>, applied: u64) -> Result<Vec<(u64, Vec<u8>)>, PgError> {
        let pool = self.pool.clone();
        self.block(async move {
            let c = Pg::pooled(pool).await?;
            let rows = c
                .query(
                    "SELECT seq, payload FROM pixgw_journal WHERE seq > $1 ORDER BY seq",
                    &[&(applied as i64)],
                )
                .await?;
            Ok(rows.iter().map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, Vec<u8>>(1))).collect())
        })
    }

    /// The highest journal row (0: none).
    pub fn last_journal_seq(self: &Arc<Self>) -> Result<u64, PgError> {
        let pool = self.pool.clone();
        self.block(async move {
            let c = Pg::pooled(pool).await?;
            let last: Option<i64> = c.query_one("SELECT max(seq) FROM pixgw_journal", &[]).await?.get(0);
            Ok(last.unwrap_or(0) as u64)
        })
    }

    /// Deletes the journal rows at or below `seq` (the snapshot holds them), fenced.
    pub fn release_journal_through(self: &Arc<Self>, seq: u64) -> Result<u64, PgError> {
        let (pool, epoch) = (self.pool.clone(), self.epoch());
        self.block(async move {
            let mut c = Pg::pooled(pool).await?;
            let tx = c.transaction().await?;
            fence(&tx, epoch).await?;
            let n = tx.execute("DELETE FROM pixgw_journal WHERE seq <= $1", &[&(seq as i64)]).await?;
            tx.commit().await?;
            Ok(n)
        })
    }

    /// Whether the database holds no record of any deployment (for `pixgw migrate`).
    pub fn is_empty(self: &Arc<Self>) -> Result<bool, PgError> {
        let pool = self.pool.clone();
        self.block(async move {
            let c = Pg::pooled(pool).await?;
            let kv = c.query_opt("SELECT 1 FROM pixgw_kv LIMIT 1", &[]).await?;
            let journal = c.query_opt("SELECT 1 FROM pixgw_journal LIMIT 1", &[]).await?;
            Ok(kv.is_none() && journal.is_none())
        })
    }
}

#[cold]
fn unreachable_runtime() -> &'static tokio::runtime::Handle {
    // `runtime` is only taken in `drop`, after which no method can run.
    panic!("the database runtime is gone")
}

/// Locks the lease row at `epoch` for the rest of the transaction, or answers `Deposed`.
async fn fence(tx: &tokio_postgres::Transaction<'_>, epoch: u64) -> Result<(), PgError> {
    let held = tx
        .query_opt("SELECT 1 FROM pixgw_lease WHERE id = 1 AND epoch = $1 FOR SHARE", &[&(epoch as i64)])
        .await?;
    match held {
        Some(_) => Ok(()),
        None => Err(PgError::Deposed(epoch)),
    }
}

/// The snapshot store in `pixgw_kv` (see the module doc).
pub struct PgStore {
    pg: Arc<Pg>,
}

impl PgStore {
    pub fn new(pg: Arc<Pg>) -> PgStore {
        PgStore { pg }
    }
}

impl Store for PgStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let (pool, key) = (self.pg.pool.clone(), key.to_vec());
        Ok(self.pg.block(async move {
            let c = Pg::pooled(pool).await?;
            let stmt = c.prepare_cached("SELECT value FROM pixgw_kv WHERE key = $1").await?;
            Ok(c.query_opt(&stmt, &[&key]).await?.map(|r| r.get::<_, Vec<u8>>(0)))
        })?)
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Pairs, StoreError> {
        let (pool, from, to) = (self.pg.pool.clone(), prefix.to_vec(), super::prefix_end(prefix));
        Ok(self.pg.block(async move {
            let c = Pg::pooled(pool).await?;
            let rows = match to {
                Some(to) => {
                    let stmt = c
                        .prepare_cached(
                            "SELECT key, value FROM pixgw_kv WHERE key >= $1 AND key < $2 ORDER BY key",
                        )
                        .await?;
                    c.query(&stmt, &[&from, &to]).await?
                }
                None => {
                    let stmt = c
                        .prepare_cached("SELECT key, value FROM pixgw_kv WHERE key >= $1 ORDER BY key")
                        .await?;
                    c.query(&stmt, &[&from]).await?
                }
            };
            Ok(rows.iter().map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, Vec<u8>>(1))).collect())
        })?)
    }

    fn scan_rev(
        &self,
        from: &[u8],
        to: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        // In chunks, highest first, so a visitor that stops early reads little.
        let mut below = to.to_vec();
        loop {
            let (pool, lo, hi) = (self.pg.pool.clone(), from.to_vec(), below.clone());
            let chunk: Pairs = self.pg.block(async move {
                let c = Pg::pooled(pool).await?;
                let stmt = c
                    .prepare_cached(
                        "SELECT key, value FROM pixgw_kv WHERE key >= $1 AND key < $2 ORDER BY key DESC LIMIT $3",
                    )
                    .await?;
                let rows = c.query(&stmt, &[&lo, &hi, &SCAN_REV_CHUNK]).await?;
                Ok(rows.iter().map(|r| (r.get::<_, Vec<u8>>(0), r.get::<_, Vec<u8>>(1))).collect())
            })?;
            let full = chunk.len() as i64 == SCAN_REV_CHUNK;
            for (k, v) in &chunk {
                if !visit(k, v) {
                    return Ok(());
                }
            }
            match chunk.last() {
                Some((k, _)) if full => below.clone_from(k),
                _ => return Ok(()),
            }
        }
    }

    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        let mut batch = batch.clone();
        // One write per key: a multi-row upsert may not touch a row twice.
        batch.compact();
        let (mut keys, mut values, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
        for op in batch.into_ops() {
            match op {
                Op::Put(k, v) | Op::Insert(k, v) => {
                    keys.push(k);
                    values.push(v);
                }
                Op::Delete(k) => deleted.push(k),
            }
        }
        let (pool, epoch) = (self.pg.pool.clone(), self.pg.epoch());
        Ok(self.pg.block(async move {
            let mut c = Pg::pooled(pool).await?;
            let tx = c.transaction().await?;
            fence(&tx, epoch).await?;
            if !deleted.is_empty() {
                tx.execute("DELETE FROM pixgw_kv WHERE key = ANY($1)", &[&deleted]).await?;
            }
            if !keys.is_empty() {
                tx.execute(
                    "INSERT INTO pixgw_kv (key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    &[&keys, &values],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })?)
    }

    /// Every part was committed by `apply`.
    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Ids come from the floor the committer reserves (`meta/id_floor`); a new database
    /// starts them at 1.
    fn generate_id(&self) -> Result<u64, StoreError> {
        Ok(0)
    }
}

/// The committer's log in `pixgw_journal` (see the module doc).
pub struct PgLog {
    pg: Arc<Pg>,
    conn: LogConnection,
    next_seq: u64,
}

/// The committer's own connection and its prepared insert.
struct LogConnection {
    client: Arc<Client>,
    insert: tokio_postgres::Statement,
}

const INSERT_GROUP: &str = "WITH fence AS (SELECT 1 FROM pixgw_lease WHERE id = 1 AND epoch = $1 FOR SHARE) \
     INSERT INTO pixgw_journal (seq, epoch, payload) SELECT $2, $1, $3 FROM fence";

impl LogConnection {
    fn open(pg: &Arc<Pg>) -> Result<LogConnection, PgError> {
        let client = Arc::new(pg.connect()?);
        let c = Arc::clone(&client);
        let insert = pg.block(async move { Ok(c.prepare(INSERT_GROUP).await?) })?;
        Ok(LogConnection { client, insert })
    }
}

/// Why a group did not become durable.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The group is known not to be in the database.
    #[error("{0}")]
    NotWritten(String),
    /// Its outcome could not be learned in time; the node must read the database again.
    #[error("the outcome of group {seq} is unknown: {why}")]
    InDoubt { seq: u64, why: String },
}

impl PgLog {
    /// The log of a leader whose last journal row (or snapshot) is `last_seq`.
    pub fn open(pg: Arc<Pg>, last_seq: u64) -> Result<PgLog, PgError> {
        let conn = LogConnection::open(&pg)?;
        Ok(PgLog { pg, conn, next_seq: last_seq + 1 })
    }

    /// Writes `payload` as the next group and returns once it is committed.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64, LogError> {
        let seq = self.next_seq;
        // A connection known to be closed before anything is sent (the database restarted
        // while the node was idle): nothing of the group has left, so it goes on a new one.
        if self.conn.client.is_closed() {
            self.conn = LogConnection::open(&self.pg).map_err(|e| LogError::NotWritten(e.to_string()))?;
        }
        let (client, stmt) = (Arc::clone(&self.conn.client), self.conn.insert.clone());
        let (epoch, payload) = (self.pg.epoch(), payload.to_vec());
        let written = self.pg.block(async move {
            Ok(client.execute(&stmt, &[&(epoch as i64), &(seq as i64), &payload]).await?)
        });
        match written {
            Ok(1) => {
                self.next_seq += 1;
                Ok(seq)
            }
            Ok(_) => Err(LogError::NotWritten(PgError::Deposed(epoch).to_string())),
            // The server refused the statement: its transaction rolled back.
            Err(PgError::Db(e)) if e.as_db_error().is_some() => Err(LogError::NotWritten(e.to_string())),
            // Anything else, a closed connection included, may have come after the server
            // received the statement and even after it committed: tokio-postgres reports a
            // connection that dies with a statement pending as "closed" too. Found by
            // benches/ha.sh, where groups that the promoted standby held were answered as
            // refused before this.
            Err(e) => self.resolve(seq, e),
        }
    }

    /// The connection was lost or the statement timed out: the group may or may not be
    /// committed. Bumping the epoch first waits for the lost statement's transaction to end
    /// and bars it from ever committing; only then does reading the row back decide.
    fn resolve(&mut self, seq: u64, first: PgError) -> Result<u64, LogError> {
        tracing::warn!(seq, error = %first, "a group's outcome is unknown; reading it back");
        let deadline = Instant::now() + IN_DOUBT_RESOLVE_MAX;
        let mut last = first.to_string();
        while Instant::now() < deadline {
            match self.read_back(seq) {
                Ok((conn, true)) => {
                    self.conn = conn;
                    self.next_seq += 1;
                    tracing::info!(seq, "the group was committed");
                    return Ok(seq);
                }
                Ok((conn, false)) => {
                    self.conn = conn;
                    return Err(LogError::NotWritten(format!("group {seq} was not committed ({last})")));
                }
                Err(PgError::Deposed(epoch)) => {
                    return Err(LogError::NotWritten(PgError::Deposed(epoch).to_string()));
                }
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(LogError::InDoubt { seq, why: last })
    }

    fn read_back(&self, seq: u64) -> Result<(LogConnection, bool), PgError> {
        let conn = LogConnection::open(&self.pg)?;
        let (c, old) = (Arc::clone(&conn.client), self.pg.epoch());
        let (epoch, found) = self.pg.block(async move {
            let bumped = c
                .query_opt(
                    "UPDATE pixgw_lease SET epoch = epoch + 1 WHERE id = 1 AND epoch = $1 RETURNING epoch",
                    &[&(old as i64)],
                )
                .await?;
            let Some(row) = bumped else { return Err(PgError::Deposed(old)) };
            let found = c.query_opt("SELECT 1 FROM pixgw_journal WHERE seq = $1", &[&(seq as i64)]).await?;
            Ok((row.get::<_, i64>(0) as u64, found.is_some()))
        })?;
        self.pg.set_epoch(epoch);
        Ok((conn, found))
    }
}

impl super::commit::Log for PgLog {
    fn append_durable(&mut self, payload: &[u8]) -> Result<u64, String> {
        self.append(payload).map_err(|e| e.to_string())
    }
}

/// Deletes the journal rows a checkpoint made redundant.
pub struct PgTail(pub Arc<Pg>);

impl super::commit::LogTail for PgTail {
    fn release_through(&self, seq: u64) -> Result<(), String> {
        self.0.release_journal_through(seq).map(|_| ()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(text: &str) -> (String, TlsParams) {
        take_tls_params(text).unwrap()
    }

    #[test]
    fn tls_settings_come_out_of_a_url_and_leave_the_rest_as_it_was() {
        let (rest, p) = taken("postgres://u:p@a:5432,b:5433/gw?sslmode=verify-full&target_session_attrs=read-write&sslrootcert=%2Fetc%2Fca.pem");
        assert_eq!(rest, "postgres://u:p@a:5432,b:5433/gw?target_session_attrs=read-write");
        assert_eq!(
            p,
            TlsParams {
                sslmode: Some("verify-full".into()),
                sslrootcert: Some("/etc/ca.pem".into()),
                passfile: None
            }
        );
        let (rest, p) = taken("postgresql://a/gw?sslmode=disable");
        assert_eq!((rest.as_str(), p.sslmode.as_deref()), ("postgresql://a/gw", Some("disable")));
        assert_eq!(taken("postgres://a/gw"), ("postgres://a/gw".into(), TlsParams::default()));
    }

    #[test]
    fn a_pgpass_line_matches_by_host_port_database_and_user_with_wildcards_and_escapes() {
        let text = "# comment\n\
                    db.example:5432:gw:pixgw:first\n\
                    db.example:*:*:pixgw:second\n\
                    *:*:*:*:any\n\
                    odd\\:host:5432:gw:u:pa\\:ss\\\\word\n";
        assert_eq!(pgpass_lookup(text, ["db.example", "5432", "gw", "pixgw"]).as_deref(), Some("first"));
        assert_eq!(pgpass_lookup(text, ["db.example", "6432", "other", "pixgw"]).as_deref(), Some("second"));
        assert_eq!(pgpass_lookup(text, ["elsewhere", "5432", "gw", "pixgw"]).as_deref(), Some("any"));
        assert_eq!(
            pgpass_lookup("odd\\:host:5432:gw:u:pa\\:ss\\\\word", ["odd:host", "5432", "gw", "u"]).as_deref(),
            Some("pa:ss\\word")
        );
        assert_eq!(
            pgpass_lookup("a:1:b:c", ["a", "1", "b", "c"]),
            None,
            "a line of four fields has no password"
        );
    }

    #[test]
    fn the_password_comes_from_pgpassword_then_the_password_file_never_one_others_can_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(&file, "db.example:5432:gw:pixgw:from-file\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let url = "postgres://pixgw@db.example/gw";
        let password = |env: Vec<(&'static str, String)>| {
            PgUrl::parse_with_env(url, move |k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()))
                .map(|u| u.config.get_password().map(|p| String::from_utf8_lossy(p).into_owned()))
        };
        let path = file.display().to_string();
        assert_eq!(
            password(vec![("PGPASSWORD", "from-env".into()), ("PGPASSFILE", path.clone())]),
            Ok(Some("from-env".into()))
        );
        assert_eq!(password(vec![("PGPASSFILE", path.clone())]), Ok(Some("from-file".into())));
        assert_eq!(
            password(vec![("HOME", dir.path().display().to_string())]),
            Ok(None),
            "no ~/.pgpass there"
        );
        // The string's own password wins, and `passfile` in it names the file.
        let own =
            PgUrl::parse_with_env("postgres://pixgw:inline@db.example/gw", |_| Some(path.clone())).unwrap();
        assert_eq!(own.config.get_password(), Some(&b"inline"[..]));
        let named =
            PgUrl::parse_with_env(&format!("postgres://pixgw@db.example/gw?passfile={path}"), |_| None)
                .unwrap();
        assert_eq!(named.config.get_password(), Some(&b"from-file"[..]));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = password(vec![("PGPASSFILE", path)]).unwrap_err();
        assert!(e.contains("chmod 600"), "{e}");
    }

    #[test]
    fn tls_settings_come_out_of_key_value_pairs_quoted_or_not() {
        let (rest, p) =
            taken(r"host=a,b  sslrootcert = '/my certs/ca.pem' password='it\'s' sslmode=require dbname=gw");
        assert_eq!(p.sslrootcert.as_deref(), Some("/my certs/ca.pem"));
        assert_eq!(p.sslmode.as_deref(), Some("require"));
        assert_eq!(rest, r"host=a,b password='it\'s' dbname=gw");
        let config: tokio_postgres::Config = rest.parse().unwrap();
        assert_eq!(config.get_password(), Some(&b"it's"[..]));
        let (rest, p) = taken(r"sslrootcert='C:\\ca.pem' host=a");
        assert_eq!((rest.as_str(), p.sslrootcert.as_deref()), ("host=a", Some(r"C:\ca.pem")));
        assert!(take_tls_params("host=a sslmode").unwrap_err().contains("`sslmode` has no value"));
        assert!(take_tls_params("host=a sslrootcert='x").unwrap_err().contains("not closed"));
    }

    #[test]
    fn tls_is_verified_whenever_it_is_asked_for_and_never_half_configured() {
        let plain = |s: &str| matches!(PgUrl::parse(s).map(|u| u.tls()), Ok(false));
        assert!(plain("postgres://u@127.0.0.1/gw"));
        assert!(plain("postgres://u@127.0.0.1/gw?sslmode=prefer"));
        assert!(plain("host=127.0.0.1 sslmode=disable"));
        for mode in ["require", "verify-ca", "verify-full"] {
            let url = PgUrl::parse(&format!("postgres://u@db.example/gw?sslmode={mode}")).unwrap();
            assert!(url.tls(), "{mode}");
            assert!(url.to_string().ends_with("(TLS, verified)"), "{url}");
        }
        let e = PgUrl::parse("postgres://u@a/gw?sslrootcert=/etc/ca.pem").unwrap_err();
        assert!(e.contains("add sslmode=verify-full"), "{e}");
        let e = PgUrl::parse("postgres://u@a/gw?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
            .unwrap_err();
        assert!(e.starts_with("reading the sslrootcert file /nonexistent/ca.pem"), "{e}");
        let e = PgUrl::parse("postgres://u@a/gw?sslmode=sometimes").unwrap_err();
        assert!(e.contains("sslmode=sometimes is not one of"), "{e}");
        // The password never reaches a message.
        let url = PgUrl::parse("postgres://u:secret@a/gw?sslmode=require").unwrap();
        assert!(!format!("{url} {url:?}").contains("secret"));
    }
}
