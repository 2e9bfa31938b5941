//! Settings of `pixgw serve`: command-line flags, environment variables and an optional
//! TOML file, checked at start.
//!
//! Precedence, highest first: a flag, its environment variable (clap merges those two),
//! the TOML file named by `--config` / `PIXGW_CONFIG`, the default. Every TOML key has an
//! environment variable (interface.md "Running the server").

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use serde::Deserialize;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_DATA_DIR: &str = "./data/run";
pub const DEFAULT_SIM_SETTLE_MS: u64 = 200;
/// Seconds that in-flight requests get to finish after SIGTERM or Ctrl-C.
pub const DEFAULT_SHUTDOWN_TIMEOUT_SECONDS: u64 = 30;
/// Webhook sender actors (threads); each runs many requests at once.
pub const DEFAULT_WEBHOOK_SENDERS: usize = 2;
/// Bytes of a request body; larger bodies answer 413.
pub const REQUEST_BODY_BYTES_MAX: usize = 64 * 1024;
/// How long a request's body may take to arrive unless configured, and the longest accepted
/// (milliseconds).
pub const BODY_TIMEOUT_MS_DEFAULT: u64 = 10_000;
pub const BODY_TIMEOUT_MS_MAX: u64 = 600_000;

#[derive(Debug, Parser)]
#[command(name = "pixgw", version, about = "PIX instant-payment gateway")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway server.
    Serve(ServeArgs),
    /// Developer tools for webhooks.
    #[command(subcommand)]
    Webhooks(WebhooksCommand),
    /// Load a running server with a scenario, then check its balance and counts.
    Load(LoadArgs),
    /// Copy a running server's embedded store into a backup directory, without stopping it.
    Backup(BackupArgs),
    /// Make a new data dir from a backup.
    Restore(RestoreArgs),
    /// Move a stopped server's embedded store (or a backup) into an empty PostgreSQL database.
    Migrate(MigrateArgs),
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The directory to write the backup into; it must not exist or be empty.
    #[arg(long)]
    pub to: PathBuf,
    /// The running server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The server's admin token.
    #[arg(long, env = "PIXGW_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: String,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup directory (as `pixgw backup --to` wrote it).
    #[arg(long)]
    pub from: PathBuf,
    /// The new data dir; it must not exist or be empty.
    #[arg(long)]
    pub data_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// A stopped server's data dir, or a backup directory.
    #[arg(long)]
    pub from: PathBuf,
    /// The PostgreSQL database (postgres://...); it must hold no pixgw data.
    #[arg(long, env = "PIXGW_DATABASE_URL", hide_env_values = true)]
    pub to: String,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The server's data dir, for the Demo credentials (when no --client-id is given).
    #[arg(long, env = "PIXGW_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    #[arg(long)]
    pub client_id: Option<String>,
    #[arg(long, hide_env_values = true)]
    pub client_secret: Option<String>,
    /// The client certificate (PEM) registered for the account.
    #[arg(long)]
    pub cert: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "cash-out")]
    pub scenario: crate::load::Scenario,
    /// Connections of the closed loop (and of the client pool of the open loop).
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Open loop: requests per second, each timed from when it was due.
    #[arg(long)]
    pub rate: Option<f64>,
    /// How long to run (20s, 2m, 500ms).
    #[arg(long, default_value = "20s", value_parser = crate::load::parse_duration)]
    pub duration: std::time::Duration,
    /// Stop after this many requests (whichever of this and --duration comes first).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Requests before the measurement starts (they still count in the consistency check).
    #[arg(long, default_value = "2s", value_parser = crate::load::parse_duration)]
    pub warmup: std::time::Duration,
    /// Sandbox funding before the run (0: none).
    #[arg(long, default_value = "1000000.00")]
    pub fund: String,
    /// Value of each cash-out.
    #[arg(long, default_value = "0.01")]
    pub value: String,
    /// Weights of the mixed scenario.
    #[arg(long, default_value = "cash-out=25,cash-in=25,balance=25,list=25", value_parser = crate::load::parse_mix)]
    pub mix: [u32; 4],
    /// Requests of the duplicate storm that share one externalId.
    #[arg(long, default_value_t = 8)]
    pub storm_group: u64,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Receive webhooks on this machine and print each one, with its signature checked.
    Listen(ListenArgs),
}

#[derive(Debug, Args)]
pub struct ListenArgs {
    /// Port to listen on (0 picks a free one; the first line printed says which).
    #[arg(long, default_value_t = 9000)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
    /// The account's webhook secret (whsec_...), to verify signatures.
    #[arg(long, env = "PIXGW_WEBHOOK_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// The status to answer a delivery with a valid signature (try 500 to watch retries).
    #[arg(long, default_value_t = 200)]
    pub status: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "PIXGW_LISTEN")]
    pub listen: Option<String>,
    /// Directory of the database and the Demo credentials.
    #[arg(long, env = "PIXGW_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Optional TOML file with the same settings.
    #[arg(long, env = "PIXGW_CONFIG")]
    pub config: Option<PathBuf>,
    /// Enable the adjustable test clock (`POST /admin/clock`).
    #[arg(long, env = "PIXGW_TEST_CLOCK", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    pub test_clock: bool,
    /// Log format.
    #[arg(long, env = "PIXGW_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Admin token; overrides the one generated on first start.
    #[arg(long, env = "PIXGW_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Settle delay of the simulated bank, in milliseconds.
    #[arg(long, env = "PIXGW_SIM_SETTLE_MS")]
    pub sim_settle_ms: Option<u64>,
    /// Refuse (401) any authenticated request without the client certificate its token is
    /// bound to in X-SSL-Client-Cert: for a TLS-terminating proxy that sets it on every request.
    #[arg(long, env = "PIXGW_REQUIRE_CLIENT_CERT", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    pub require_client_cert: bool,
    /// Milliseconds a request's body may take to arrive after its headers (default 10000;
    /// 1 to 600000); a slower one is answered 408 and its connection closed.
    #[arg(long, env = "PIXGW_BODY_TIMEOUT_MS")]
    pub body_timeout_ms: Option<u64>,
    /// Allow plain http webhook URLs (local development and tests).
    #[arg(long, env = "PIXGW_WEBHOOK_ALLOW_HTTP", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    pub webhook_allow_http: bool,
    /// Allow webhook deliveries to loopback and private addresses (local development).
    #[arg(long, env = "PIXGW_WEBHOOK_ALLOW_PRIVATE", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    pub webhook_allow_private: bool,
    /// A PEM file of CA certificates that webhook receivers may present, besides the public roots.
    #[arg(long, env = "PIXGW_WEBHOOK_CA_FILE")]
    pub webhook_ca_file: Option<PathBuf>,
    /// Webhook sender actors, each on its own thread.
    #[arg(long, env = "PIXGW_WEBHOOK_SENDERS")]
    pub webhook_senders: Option<usize>,
    /// The simulator's key directory (default: the data/dict.json built into the binary).
    #[arg(long, env = "PIXGW_DICT_FILE")]
    pub dict_file: Option<PathBuf>,
    /// HTTP worker threads (default: one per core).
    #[arg(long, env = "PIXGW_WORKERS")]
    pub workers: Option<usize>,
    /// sled's page cache in MiB (default 64).
    #[arg(long, env = "PIXGW_STORAGE_CACHE_MB")]
    pub storage_cache_mb: Option<u64>,
    /// The size of each journal segment in MiB (default 8; 1 to 1024). Writes are refused
    /// while the data dir has less than four segments' worth free.
    #[arg(long, env = "PIXGW_JOURNAL_SEGMENT_MB")]
    pub journal_segment_mb: Option<u64>,
    /// Seconds in-flight requests get to finish on shutdown.
    #[arg(long, env = "PIXGW_SHUTDOWN_TIMEOUT_SECONDS")]
    pub shutdown_timeout_seconds: Option<u64>,
    /// Keep every durable thing in PostgreSQL instead of the data dir: a connection string
    /// (`postgres://user:password@host1:5432,host2:5432/pixgw?target_session_attrs=read-write`).
    /// Any number of nodes may point at one database; the one holding the lease serves.
    #[arg(long, env = "PIXGW_DATABASE_URL", hide_env_values = true)]
    pub store: Option<String>,
    /// How long the leader's lease lasts without a renewal, in ms (PostgreSQL store; default
    /// 5000): a standby takes over at most this long after the leader stops renewing it.
    #[arg(long, env = "PIXGW_LEASE_MS")]
    pub lease_ms: Option<u64>,
    /// How often the leader renews its lease and a standby tries to take it, in ms (default
    /// 1000; at most a third of the lease).
    #[arg(long, env = "PIXGW_LEASE_RENEW_MS")]
    pub lease_renew_ms: Option<u64>,
}

/// Where the server keeps its data.
#[derive(Debug, Clone, Default)]
pub enum StoreChoice {
    /// The journal and sled in the data dir (the default).
    #[default]
    Embedded,
    /// A PostgreSQL database, shared by every node pointed at it.
    Postgres(Box<crate::store::postgres::PgUrl>),
}

/// The TOML file: the same keys, snake_case.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub test_clock: Option<bool>,
    pub log_format: Option<LogFormat>,
    pub admin_token: Option<String>,
    pub sim_settle_ms: Option<u64>,
    pub dict_file: Option<PathBuf>,
    pub require_client_cert: Option<bool>,
    pub body_timeout_ms: Option<u64>,
    pub webhook_allow_http: Option<bool>,
    pub webhook_allow_private: Option<bool>,
    pub webhook_ca_file: Option<PathBuf>,
    pub webhook_senders: Option<usize>,
    pub workers: Option<usize>,
    pub storage_cache_mb: Option<u64>,
    pub journal_segment_mb: Option<u64>,
    pub shutdown_timeout_seconds: Option<u64>,
    pub store: Option<String>,
    pub lease_ms: Option<u64>,
    pub lease_renew_ms: Option<u64>,
}

/// Resolved, checked settings. Its `Debug` hides the admin token.
#[derive(Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub test_clock: bool,
    pub log_format: LogFormat,
    pub admin_token: Option<String>,
    pub sim_settle_ms: u64,
    pub dict_file: Option<PathBuf>,
    pub require_client_cert: bool,
    pub body_timeout_ms: u64,
    pub webhook_allow_http: bool,
    pub webhook_allow_private: bool,
    pub webhook_ca_file: Option<PathBuf>,
    pub webhook_senders: usize,
    pub workers: usize,
    pub storage_cache_mb: u64,
    pub journal_segment_mb: u64,
    pub shutdown_timeout_seconds: u64,
    pub store: StoreChoice,
    pub lease: crate::store::postgres::lease::LeaseTimes,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("listen", &self.listen)
            .field("data_dir", &self.data_dir)
            .field("test_clock", &self.test_clock)
            .field("log_format", &self.log_format)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "(hidden)"))
            .field("sim_settle_ms", &self.sim_settle_ms)
            .field("dict_file", &self.dict_file)
            .field("require_client_cert", &self.require_client_cert)
            .field("body_timeout_ms", &self.body_timeout_ms)
            .field("webhook_allow_http", &self.webhook_allow_http)
            .field("webhook_allow_private", &self.webhook_allow_private)
            .field("webhook_ca_file", &self.webhook_ca_file)
            .field("webhook_senders", &self.webhook_senders)
            .field("workers", &self.workers)
            .field("storage_cache_mb", &self.storage_cache_mb)
            .field("journal_segment_mb", &self.journal_segment_mb)
            .field("shutdown_timeout_seconds", &self.shutdown_timeout_seconds)
            .field("store", &self.store)
            .field("lease", &self.lease)
            .finish()
    }
}

impl Settings {
    /// One line with every setting the server starts with; of the admin token, only where
    /// it comes from.
    pub fn log_start(&self) {
        let shown = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        tracing::info!(
            listen = %self.listen,
            data_dir = %self.data_dir.display(),
            test_clock = self.test_clock,
            log_format = ?self.log_format,
            admin_token = if self.admin_token.is_some() { "from settings" } else { "stored" },
            sim_settle_ms = self.sim_settle_ms,
            dict_file = shown(&self.dict_file),
            require_client_cert = self.require_client_cert,
            body_timeout_ms = self.body_timeout_ms,
            webhook_allow_http = self.webhook_allow_http,
            webhook_allow_private = self.webhook_allow_private,
            webhook_ca_file = shown(&self.webhook_ca_file),
            webhook_senders = self.webhook_senders,
            workers = self.workers,
            storage_cache_mb = self.storage_cache_mb,
            journal_segment_mb = self.journal_segment_mb,
            shutdown_timeout_seconds = self.shutdown_timeout_seconds,
            store = %match &self.store {
                StoreChoice::Embedded => "embedded".to_owned(),
                StoreChoice::Postgres(url) => url.to_string(),
            },
            lease_ms = self.lease.lease().as_millis() as u64,
            lease_renew_ms = self.lease.renew_every().as_millis() as u64,
            version = env!("CARGO_PKG_VERSION"),
            "starting"
        );
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("the config file {0} is invalid: {1}")]
    Parse(PathBuf, String),
    #[error("listen address {0:?} is not host:port")]
    Listen(String),
    #[error("{0}")]
    Invalid(&'static str),
    #[error("--store: {0}")]
    Store(String),
}

/// A journal segment's size unless configured, and the largest accepted (MiB).
pub const JOURNAL_SEGMENT_MB_DEFAULT: u64 = 8;
pub const JOURNAL_SEGMENT_MB_MAX: u64 = 1024;

/// Fewest characters of an operator-chosen admin token.
pub const ADMIN_TOKEN_LEN_MIN: usize = 16;

impl Settings {
    pub fn resolve(args: &ServeArgs) -> Result<Settings, ConfigError> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let listen_text = args.listen.clone().or(file.listen).unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        let listen = listen_text.parse().map_err(|_| ConfigError::Listen(listen_text.clone()))?;
        let admin_token = args.admin_token.clone().or(file.admin_token);
        if admin_token.as_ref().is_some_and(|t| t.len() < ADMIN_TOKEN_LEN_MIN) {
            return Err(ConfigError::Invalid("the admin token must have at least 16 characters"));
        }
        let workers = args
            .workers
            .or(file.workers)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        if workers == 0 {
            return Err(ConfigError::Invalid("workers must be at least 1"));
        }
        let webhook_senders =
            args.webhook_senders.or(file.webhook_senders).unwrap_or(DEFAULT_WEBHOOK_SENDERS);
        if webhook_senders == 0 {
            return Err(ConfigError::Invalid("webhook senders must be at least 1"));
        }
        let journal_segment_mb =
            args.journal_segment_mb.or(file.journal_segment_mb).unwrap_or(JOURNAL_SEGMENT_MB_DEFAULT);
        if !(1..=JOURNAL_SEGMENT_MB_MAX).contains(&journal_segment_mb) {
            return Err(ConfigError::Invalid("journal segments must be of 1 to 1024 MiB"));
        }
        let body_timeout_ms =
            args.body_timeout_ms.or(file.body_timeout_ms).unwrap_or(BODY_TIMEOUT_MS_DEFAULT);
        if !(1..=BODY_TIMEOUT_MS_MAX).contains(&body_timeout_ms) {
            return Err(ConfigError::Invalid("the body timeout must be of 1 to 600000 ms"));
        }
        let store = match args.store.clone().or(file.store) {
            None => StoreChoice::Embedded,
            Some(text) => StoreChoice::Postgres(Box::new(
                crate::store::postgres::PgUrl::parse(&text).map_err(ConfigError::Store)?,
            )),
        };
        let lease = crate::store::postgres::lease::LeaseTimes::new(
            args.lease_ms.or(file.lease_ms).unwrap_or(crate::store::postgres::lease::LEASE_MS_DEFAULT),
            args.lease_renew_ms
                .or(file.lease_renew_ms)
                .unwrap_or(crate::store::postgres::lease::LEASE_RENEW_MS_DEFAULT),
        )
        .map_err(ConfigError::Invalid)?;
        Ok(Settings {
            listen,
            store,
            lease,
            body_timeout_ms,
            data_dir: args
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
            test_clock: args.test_clock || file.test_clock.unwrap_or(false),
            log_format: args.log_format.or(file.log_format).unwrap_or_default(),
            admin_token,
            sim_settle_ms: args.sim_settle_ms.or(file.sim_settle_ms).unwrap_or(DEFAULT_SIM_SETTLE_MS),
            dict_file: args.dict_file.clone().or(file.dict_file),
            require_client_cert: args.require_client_cert || file.require_client_cert.unwrap_or(false),
            webhook_allow_http: args.webhook_allow_http || file.webhook_allow_http.unwrap_or(false),
            webhook_allow_private: args.webhook_allow_private || file.webhook_allow_private.unwrap_or(false),
            webhook_ca_file: args.webhook_ca_file.clone().or(file.webhook_ca_file),
            webhook_senders,
            storage_cache_mb: args
                .storage_cache_mb
                .or(file.storage_cache_mb)
                .unwrap_or(crate::store::STORAGE_CACHE_MB_DEFAULT),
            journal_segment_mb,
            workers,
            shutdown_timeout_seconds: args
                .shutdown_timeout_seconds
                .or(file.shutdown_timeout_seconds)
                .unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT_SECONDS),
        })
    }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read(path.into(), e))?;
    toml::from_str(&text).map_err(|e| ConfigError::Parse(path.into(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_when_nothing_is_given() {
        let s = Settings::resolve(&ServeArgs::default()).unwrap();
        assert_eq!(s.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(s.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        assert!(!s.test_clock);
        assert_eq!(s.sim_settle_ms, 200);
    }

    #[test]
    fn a_flag_beats_the_file_and_the_file_beats_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pixgw.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:9999\"\nsim_settle_ms = 5\ntest_clock = true\nrequire_client_cert = true\n",
        )
        .unwrap();
        let args =
            ServeArgs { config: Some(path), listen: Some("127.0.0.1:7777".into()), ..ServeArgs::default() };
        let s = Settings::resolve(&args).unwrap();
        assert_eq!(s.listen.to_string(), "127.0.0.1:7777");
        assert_eq!(s.sim_settle_ms, 5);
        assert!(s.test_clock);
        assert!(s.require_client_cert);
        assert!(!Settings::resolve(&ServeArgs::default()).unwrap().require_client_cert, "off by default");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pixgw.toml");
        std::fs::write(&path, "lisen = \"x\"\n").unwrap();
        let args = ServeArgs { config: Some(path), ..ServeArgs::default() };
        assert!(matches!(Settings::resolve(&args), Err(ConfigError::Parse(..))));
        let args = ServeArgs { listen: Some("nowhere".into()), ..ServeArgs::default() };
        assert!(matches!(Settings::resolve(&args), Err(ConfigError::Listen(_))));
        let args = ServeArgs { admin_token: Some("short".into()), ..ServeArgs::default() };
        assert!(matches!(Settings::resolve(&args), Err(ConfigError::Invalid(_))));
    }

    #[test]
    fn a_store_url_chooses_postgres_and_never_shows_its_password() {
        let url = "postgres://pixgw:s3cret@db1:5432,db2:5433/pixgw?target_session_attrs=read-write";
        let s = Settings::resolve(&ServeArgs { store: Some(url.into()), ..ServeArgs::default() }).unwrap();
        let StoreChoice::Postgres(pg) = &s.store else { panic!("{:?}", s.store) };
        assert_eq!(pg.to_string(), "postgres://pixgw@db1:5432,db2:5433/pixgw");
        assert!(!format!("{s:?}").contains("s3cret"));
        assert!(matches!(Settings::resolve(&ServeArgs::default()).unwrap().store, StoreChoice::Embedded));
        let bad = Settings::resolve(&ServeArgs {
            store: Some("postgres://h/db?nonsense=1".into()),
            ..ServeArgs::default()
        });
        assert!(matches!(bad, Err(ConfigError::Store(_))), "{bad:?}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pixgw.toml");
        std::fs::write(&path, "store = \"host=db user=pixgw\"\nlease_ms = 9000\nlease_renew_ms = 3000\n")
            .unwrap();
        let s = Settings::resolve(&ServeArgs { config: Some(path), ..ServeArgs::default() }).unwrap();
        assert!(matches!(s.store, StoreChoice::Postgres(_)));
        assert_eq!(s.lease.lease(), std::time::Duration::from_secs(9));
        let short = ServeArgs { lease_ms: Some(2_000), lease_renew_ms: Some(1_000), ..ServeArgs::default() };
        assert!(matches!(Settings::resolve(&short), Err(ConfigError::Invalid(_))));
    }

    #[test]
    fn journal_segments_take_1_to_1024_mib() {
        let with =
            |mb| Settings::resolve(&ServeArgs { journal_segment_mb: Some(mb), ..ServeArgs::default() });
        assert_eq!(
            Settings::resolve(&ServeArgs::default()).unwrap().journal_segment_mb,
            JOURNAL_SEGMENT_MB_DEFAULT
        );
        assert_eq!(with(1).unwrap().journal_segment_mb, 1);
        assert_eq!(with(JOURNAL_SEGMENT_MB_MAX).unwrap().journal_segment_mb, JOURNAL_SEGMENT_MB_MAX);
        assert!(matches!(with(0), Err(ConfigError::Invalid(_))));
        assert!(matches!(with(JOURNAL_SEGMENT_MB_MAX + 1), Err(ConfigError::Invalid(_))));
    }

    #[test]
    fn the_body_timeout_takes_1_to_600000_ms() {
        let with = |ms| Settings::resolve(&ServeArgs { body_timeout_ms: Some(ms), ..ServeArgs::default() });
        assert_eq!(
            Settings::resolve(&ServeArgs::default()).unwrap().body_timeout_ms,
            BODY_TIMEOUT_MS_DEFAULT
        );
        assert_eq!(with(1).unwrap().body_timeout_ms, 1);
        assert_eq!(with(BODY_TIMEOUT_MS_MAX).unwrap().body_timeout_ms, BODY_TIMEOUT_MS_MAX);
        assert!(matches!(with(0), Err(ConfigError::Invalid(_))));
        assert!(matches!(with(BODY_TIMEOUT_MS_MAX + 1), Err(ConfigError::Invalid(_))));
    }
}
