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
    /// Make a key file: an age identity for encrypted backups, or the key that seals secrets
    /// in the store.
    #[command(subcommand)]
    Keygen(KeygenCommand),
    /// Accounts of a running server, through its admin API.
    #[command(subcommand)]
    Account(AccountCommand),
    /// The SPI rail of a stopped server's store.
    #[command(subcommand)]
    Rail(RailCommand),
    /// The central bank's homologation tests this participant runs itself.
    #[command(subcommand)]
    Homologation(HomologationCommand),
    /// The central bank's rails on this machine, for tests and for trying `--rail spi`:
    /// ICOM, the SPI and the DICT over mutual TLS with a local PKI, and virtual participants.
    SpiSim(crate::rail::spi::simulator::SimArgs),
}

#[derive(Debug, Subcommand)]
pub enum HomologationCommand {
    /// The DICT capacity test: distinct keys looked up at a steady pace by this
    /// participant's DICT client (1,000 in 60 s; 10,000 in 600 s), with a report.
    DictCapacity(DictCapacityArgs),
    /// The DICT functional test, replayed in minutes against a node on the SPI rail and a
    /// DICT that plays the central bank (`pixgw spi-sim`): keys preloaded, every key type,
    /// a sync check, claims both ways, an infraction flow and refunds for both reasons,
    /// each step with its evidence in a report.
    DictFunctional(DictFunctionalArgs),
}

#[derive(Debug, Args)]
pub struct DictFunctionalArgs {
    /// The node's settings file (its `[spi]` table: the DICT's address and the
    /// participant's certificates, for the lookups).
    #[arg(long)]
    pub config: PathBuf,
    /// The node's base URL.
    #[arg(long)]
    pub server: String,
    /// The node's admin token.
    #[arg(long, env = "PIXGW_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: String,
    /// The base URL of `pixgw spi-sim`'s control routes.
    #[arg(long)]
    pub sim_control: String,
    /// Keys registered beforehand.
    #[arg(long, default_value_t = 1_000)]
    pub preload_keys: usize,
    /// Where to write the report (JSON) as well as on standard output.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DictCapacityArgs {
    /// The settings file of a node on the SPI rail (its `[spi]` table: the DICT's address,
    /// the participant's certificates and ISPB).
    #[arg(long)]
    pub config: PathBuf,
    /// Distinct keys to look up.
    #[arg(long, default_value_t = 1_000)]
    pub lookups: usize,
    /// Seconds the lookups are spread over.
    #[arg(long, default_value_t = 60)]
    pub within_seconds: u64,
    /// The keys: `{}` is replaced by 0, 1, 2, ... (they must be in the DICT).
    #[arg(long, default_value = "cap{}@capacity.spi-sim.pixgw")]
    pub key_pattern: String,
    /// Where to write the report (JSON) as well as on standard output.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum RailCommand {
    /// Let the rail of a restored or migrated store run: once no other node reads the same
    /// ISPB's streams (docs/deploy.md "Restoring a node on the SPI rail").
    Release(RailReleaseArgs),
}

#[derive(Debug, Args)]
pub struct RailReleaseArgs {
    /// The stopped server's data dir.
    #[arg(long)]
    pub data_dir: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum AccountCommand {
    /// Make an account with a client certificate (its key made here, never sent) and write
    /// its credentials, certificate and key into a new directory.
    Create(AccountCreateArgs),
}

#[derive(Debug, Args)]
pub struct AccountCreateArgs {
    /// The account holder's name (1 to 100 characters).
    #[arg(long)]
    pub name: String,
    /// The holder's CPF or CNPJ.
    #[arg(long)]
    pub document: String,
    /// Make a sandbox account (refused by a production server).
    #[arg(long)]
    pub sandbox: bool,
    /// The directory to write the files into; it must not exist or be empty.
    #[arg(long)]
    pub out: PathBuf,
    /// Days the generated client certificate is valid (1 to 3650).
    #[arg(long, default_value_t = 365)]
    pub cert_days: u32,
    /// Register this PEM certificate (issued by your own CA) instead of generating one; no
    /// key is written.
    #[arg(long)]
    pub cert: Option<PathBuf>,
    /// The opening balance, a decimal string such as 100.00 (moving a client's money in).
    #[arg(long)]
    pub initial_balance: Option<String>,
    /// The running server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The server's admin token.
    #[arg(long, env = "PIXGW_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// A file holding the admin token (owner-only), as the server's: its first token.
    #[arg(long, env = "PIXGW_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum KeygenCommand {
    /// An age X25519 identity file (owner-only) for `backup --encrypt-to` and `restore
    /// --identity`; prints its recipient (age1...). `age-keygen` makes the same files.
    Backup(KeygenArgs),
    /// A key file (owner-only) for `serve --secrets-key-file`: 32 random bytes in hex.
    Secrets(KeygenArgs),
}

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// The file to write; it must not exist.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The directory to write the backup into; it must not exist or be empty.
    #[arg(long)]
    pub to: PathBuf,
    /// Encrypt the backup (age format) to this recipient, an age X25519 public key
    /// (age1...); repeat for more. Without it the backup is written in clear, owner-only.
    #[arg(long = "encrypt-to", value_name = "RECIPIENT")]
    pub encrypt_to: Vec<String>,
    /// The running server.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The server's admin token.
    #[arg(long, env = "PIXGW_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// A file holding the admin token (owner-only), as the server's: its first token.
    #[arg(long, env = "PIXGW_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
}

/// The admin token a CLI command presents: `--admin-token` (or `PIXGW_ADMIN_TOKEN`), else
/// the first token of `--admin-token-file` (or `PIXGW_ADMIN_TOKEN_FILE`), the server's own
/// file, owner-only.
pub fn cli_admin_token(token: Option<&str>, file: Option<&Path>) -> Result<String, ConfigError> {
    match (token, file) {
        (Some(t), _) => Ok(t.to_owned()),
        (None, Some(path)) => read_admin_tokens(path).map(|(first, _)| first),
        (None, None) => Err(ConfigError::Invalid(
            "the admin token is needed: --admin-token-file (the server's file) or PIXGW_ADMIN_TOKEN",
        )),
    }
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup directory (as `pixgw backup --to` wrote it).
    #[arg(long)]
    pub from: PathBuf,
    /// The new data dir; it must not exist or be empty.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The age identity file (owner-only) that decrypts an encrypted backup.
    #[arg(long, env = "PIXGW_BACKUP_IDENTITY_FILE")]
    pub identity: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// A stopped server's data dir, or a backup directory.
    #[arg(long)]
    pub from: PathBuf,
    /// The PostgreSQL database (postgres://...); it must hold no pixgw data.
    #[arg(long, env = "PIXGW_DATABASE_URL", hide_env_values = true)]
    pub to: String,
    /// The age identity file (owner-only) that decrypts an encrypted backup.
    #[arg(long, env = "PIXGW_BACKUP_IDENTITY_FILE")]
    pub identity: Option<PathBuf>,
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
    /// A latency curve: run the open loop at each of these rates in turn (requests per
    /// second, comma-separated), --duration each, and print the server's p50, p99, p99.9
    /// and max per rate.
    #[arg(long, value_parser = crate::load::parse_rates_arg, conflicts_with = "rate")]
    pub rates: Option<crate::load::Rates>,
    /// With --rates: the highest rate whose server p99 stays within this bound without an
    /// error (5ms, 0.5ms), narrowed by up to three more runs.
    #[arg(long, value_parser = crate::load::parse_duration, requires = "rates")]
    pub slo: Option<std::time::Duration>,
    /// Write a self-contained HTML report of the run (charts and checks) to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
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
    /// With --forward-to, the local endpoint's status is answered instead.
    #[arg(long, default_value_t = 200)]
    pub status: u16,
    /// Also send each delivery on to this URL (your application's endpoint, such as
    /// http://localhost:3000/webhooks), with its body and signature headers unchanged, and
    /// answer the gateway with that endpoint's status. A delivery to a path under the
    /// listener (the API Pix's `/pix`, `/rec`, `/cobr`) goes to the same path under the URL.
    #[arg(long, value_name = "URL")]
    pub forward_to: Option<String>,
}

/// Which requests get an access line (`pixgw::access`). Payment lines are not affected:
/// they are the audit trail and are always written at info.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AccessLog {
    /// Every request.
    All,
    /// Requests answered 4xx or 5xx, and those that took longer than one second.
    #[default]
    Errors,
    /// None.
    Off,
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
    /// Which requests get an access line: all, errors (answered 4xx or 5xx, or slower than
    /// one second; the default) or off. Payment lines are always written.
    #[arg(long, env = "PIXGW_ACCESS_LOG", value_enum)]
    pub access_log: Option<AccessLog>,
    /// Admin token; overrides the one generated on first start.
    #[arg(long, env = "PIXGW_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Settle delay of the simulated bank, in milliseconds.
    #[arg(long, env = "PIXGW_SIM_SETTLE_MS")]
    pub sim_settle_ms: Option<u64>,
    /// The rail live accounts pay on: `sim` (the in-process simulator, the default), `spi`
    /// (the central bank's SPI and DICT; see the `[spi]` settings) or `none` (a closed
    /// wallet: payments between accounts of this server only). Sandbox accounts always pay
    /// on the simulator.
    #[arg(long, env = "PIXGW_RAIL", value_parser = parse_rail)]
    pub rail: Option<crate::rail::RailKind>,
    /// The production profile: no Demo account and no credentials file, no sandbox routes or
    /// scenarios for any account, no test clock, the admin token required (from the
    /// environment or --admin-token-file), and --require-client-cert required unless
    /// --allow-without-client-cert says otherwise.
    #[arg(long, env = "PIXGW_PRODUCTION", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    pub production: bool,
    /// A file holding the admin token (readable by its owner only: a file that its group or
    /// others may read is refused).
    #[arg(long, env = "PIXGW_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// A key file (owner-only; `pixgw keygen secrets` makes one) whose key seals the store's
    /// secrets at rest: the token-signing keys, the payload-location key and every webhook
    /// secret. Once a store is sealed, every start needs it.
    #[arg(long, env = "PIXGW_SECRETS_KEY_FILE")]
    pub secrets_key_file: Option<PathBuf>,
    /// With --production: serve without --require-client-cert (a proxy that checks client
    /// certificates some other way), said out loud rather than by omission.
    #[arg(long, env = "PIXGW_ALLOW_WITHOUT_CLIENT_CERT", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    pub allow_without_client_cert: bool,
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
    /// The public host (with a port, if any) of this gateway's payload locations: with it,
    /// every cob and cobv gets a dynamic QR code (`pixCopiaECola`) whose location any bank's
    /// app reads at `https://{host}/qr/...`, a JWS signed with --payload-cert.
    #[arg(long, env = "PIXGW_PAYLOAD_HOST")]
    pub payload_host: Option<String>,
    /// The certificate (PEM, RSA; its chain may follow it) of --payload-host that signs the
    /// payloads; required with it (the SPI rail's signing key signs nothing else).
    #[arg(long, env = "PIXGW_PAYLOAD_CERT")]
    pub payload_cert: Option<PathBuf>,
    /// The private key (PEM) of --payload-cert, readable by its owner only.
    #[arg(long, env = "PIXGW_PAYLOAD_KEY")]
    pub payload_key: Option<PathBuf>,
    /// HTTP worker threads (default: one per core).
    #[arg(long, env = "PIXGW_WORKERS")]
    pub workers: Option<usize>,
    /// Requests a second each account may make, on average, with a burst of as many (429
    /// with Retry-After beyond it); default: no limit (a load test hammers one account).
    #[arg(long, env = "PIXGW_ACCOUNT_RATE_LIMIT")]
    pub account_rate_limit: Option<u64>,
    /// The largest operator credit one admin token makes alone (default 10000.00); a larger
    /// one is made when a second operator sends the same request.
    #[arg(long, env = "PIXGW_OPERATOR_CREDIT_SINGLE_MAX")]
    pub operator_credit_single_max: Option<String>,
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
    /// (`postgres://user@host1:5432,host2:5432/pixgw?target_session_attrs=read-write`); the
    /// password comes from PGPASSWORD or the password file (`passfile=`, PGPASSFILE, ~/.pgpass).
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
    pub production: Option<bool>,
    pub admin_token_file: Option<PathBuf>,
    pub secrets_key_file: Option<PathBuf>,
    pub allow_without_client_cert: Option<bool>,
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub test_clock: Option<bool>,
    pub log_format: Option<LogFormat>,
    pub access_log: Option<AccessLog>,
    pub admin_token: Option<String>,
    pub sim_settle_ms: Option<u64>,
    pub rail: Option<crate::rail::RailKind>,
    pub dict_file: Option<PathBuf>,
    pub payload_host: Option<String>,
    pub payload_cert: Option<PathBuf>,
    pub payload_key: Option<PathBuf>,
    pub require_client_cert: Option<bool>,
    pub body_timeout_ms: Option<u64>,
    pub webhook_allow_http: Option<bool>,
    pub webhook_allow_private: Option<bool>,
    pub webhook_ca_file: Option<PathBuf>,
    pub webhook_senders: Option<usize>,
    pub workers: Option<usize>,
    pub account_rate_limit: Option<u64>,
    pub operator_credit_single_max: Option<String>,
    pub storage_cache_mb: Option<u64>,
    pub journal_segment_mb: Option<u64>,
    pub shutdown_timeout_seconds: Option<u64>,
    pub store: Option<String>,
    pub lease_ms: Option<u64>,
    pub lease_renew_ms: Option<u64>,
    /// The SPI rail's settings (`--rail spi`); every key also `PIXGW_SPI_*`.
    pub spi: Option<crate::rail::spi::settings::SpiFile>,
}

/// Resolved, checked settings. Its `Debug` hides the admin token.
#[derive(Clone)]
pub struct Settings {
    /// The named operators' tokens of `--admin-token-file`, and the file, which SIGHUP reads
    /// again (`None`: one token, `admin_token` or the stored one).
    pub admin_tokens: Option<crate::auth::admin_tokens::AdminTokens>,
    pub admin_token_file: Option<PathBuf>,
    /// The keys of `--secrets-key-file`, which seal the store's secrets at rest.
    pub sealing: Option<std::sync::Arc<crate::auth::sealing::SealingKeys>>,
    /// The production profile (`--production`): see [`ServeArgs::production`].
    pub production: bool,
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub test_clock: bool,
    pub log_format: LogFormat,
    pub access_log: AccessLog,
    pub admin_token: Option<String>,
    pub sim_settle_ms: u64,
    pub rail: crate::rail::RailKind,
    pub dict_file: Option<PathBuf>,
    pub require_client_cert: bool,
    pub body_timeout_ms: u64,
    pub webhook_allow_http: bool,
    pub webhook_allow_private: bool,
    pub webhook_ca_file: Option<PathBuf>,
    pub webhook_senders: usize,
    pub workers: usize,
    /// Requests a second per account (`None`: no limit).
    pub account_rate_limit: Option<u64>,
    /// The largest operator credit one operator makes alone.
    pub operator_credit_single_max: crate::domain::money::Money,
    pub storage_cache_mb: u64,
    pub journal_segment_mb: u64,
    pub shutdown_timeout_seconds: u64,
    pub store: StoreChoice,
    pub lease: crate::store::postgres::lease::LeaseTimes,
    /// Loaded and checked when `rail` is `spi`.
    pub spi: Option<crate::rail::spi::settings::SpiSettings>,
    /// The payload locations' host and signer, when `payload_host` is set.
    pub payload: Option<PayloadSettings>,
}

/// What serving payload locations needs: where, and who signs.
#[derive(Clone, Debug)]
pub struct PayloadSettings {
    pub host: crate::domain::location::LocationHost,
    pub signer: std::sync::Arc<crate::rail::spi::pki::Signer>,
    /// The signer's certificate and its chain, leaf first.
    pub chain: Vec<crate::rail::spi::pki::Certificate>,
}

/// The payload settings from the host and the certificate and key files. The payloads have
/// a key of their own, never the SPI rail's signing key: that one signs the participant's
/// messages to the central bank, and a key is used for one purpose (the payloads' is a
/// certificate of the payload host, which the payers' apps check).
fn payload_settings(
    host: Option<String>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
) -> Result<Option<PayloadSettings>, ConfigError> {
    use crate::rail::spi::pki::{Certificate, Signer};
    let Some(host) = host else {
        if cert.is_some() || key.is_some() {
            return Err(ConfigError::Payload(
                "a payload certificate without --payload-host serves nothing".into(),
            ));
        }
        return Ok(None);
    };
    let host = crate::domain::location::LocationHost::parse(&host)
        .map_err(|e| ConfigError::Payload(format!("--payload-host {host:?} {e}")))?;
    let (signer, chain) = match (cert, key) {
        (Some(cert), Some(key)) => {
            let read = |p: &PathBuf| {
                std::fs::read(p).map_err(|e| ConfigError::Payload(format!("reading {}: {e}", p.display())))
            };
            if !crate::private::is_owner_only(&key) {
                return Err(ConfigError::Payload(format!(
                    "--payload-key {}: its group or others may read it: chmod 600 it",
                    key.display()
                )));
            }
            let (cert_pem, key_pem) = (read(&cert)?, read(&key)?);
            let what = cert.display().to_string();
            let signer = Signer::from_pem(&key_pem, &cert_pem, &what)
                .map_err(|e| ConfigError::Payload(e.to_string()))?;
            let chain = Certificate::all_from_pem(&cert_pem, &what)
                .map_err(|e| ConfigError::Payload(e.to_string()))?;
            (std::sync::Arc::new(signer), chain)
        }
        (None, None) => {
            return Err(ConfigError::Payload(
                "--payload-host needs --payload-cert and --payload-key: a certificate of that host, \
                 never the SPI rail's signing key"
                    .into(),
            ))
        }
        _ => return Err(ConfigError::Payload("--payload-cert and --payload-key go together".into())),
    };
    Ok(Some(PayloadSettings { host, signer, chain }))
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("production", &self.production)
            .field("listen", &self.listen)
            .field("data_dir", &self.data_dir)
            .field("test_clock", &self.test_clock)
            .field("log_format", &self.log_format)
            .field("access_log", &self.access_log)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "(hidden)"))
            .field("sealing", &self.sealing)
            .field("sim_settle_ms", &self.sim_settle_ms)
            .field("rail", &self.rail)
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
            .field("spi", &self.spi)
            .finish()
    }
}

impl Settings {
    /// One line with every setting the server starts with; of the admin token, only where
    /// it comes from.
    pub fn log_start(&self) {
        let shown = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        tracing::info!(
            production = self.production,
            listen = %self.listen,
            data_dir = %self.data_dir.display(),
            test_clock = self.test_clock,
            log_format = ?self.log_format,
            access_log = ?self.access_log,
            admin_token = if self.admin_token.is_some() { "from settings" } else { "stored" },
            secrets_sealed_with = self.sealing.as_deref().map(|k| k.current_id().to_owned()),
            sim_settle_ms = self.sim_settle_ms,
            rail = self.rail.as_str(),
            payload_host = self.payload.as_ref().map(|p| p.host.as_str().to_owned()),
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
    #[error("--production: {0}")]
    Production(&'static str),
    #[error("the admin token file {0}: {1}")]
    AdminTokenFile(PathBuf, String),
    #[error("--rail spi: {0}")]
    Rail(String),
    #[error("payload locations: {0}")]
    Payload(String),
    #[error("--secrets-key-file: {0}")]
    SecretsKey(String),
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
        let production = args.production || file.production.unwrap_or(false);
        let token_file = args.admin_token_file.clone().or(file.admin_token_file);
        let from_config_file = args.admin_token.is_none() && file.admin_token.is_some();
        let sealing = match args.secrets_key_file.clone().or(file.secrets_key_file) {
            None => None,
            Some(path) => Some(std::sync::Arc::new(
                crate::auth::sealing::SealingKeys::read_file(&path)
                    .map_err(|e| ConfigError::SecretsKey(e.to_string()))?,
            )),
        };
        let (admin_token, admin_tokens) = match (args.admin_token.clone().or(file.admin_token), &token_file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Invalid(
                    "the admin token is given twice: give it or an admin token file, not both",
                ))
            }
            (Some(t), None) => (Some(t), None),
            (None, Some(path)) => {
                let (first, tokens) = read_admin_tokens(path)?;
                (Some(first), Some(tokens))
            }
            (None, None) => (None, None),
        };
        if admin_token.as_ref().is_some_and(|t| t.len() < ADMIN_TOKEN_LEN_MIN) {
            return Err(ConfigError::Invalid("the admin token must have at least 16 characters"));
        }
        let test_clock = args.test_clock || file.test_clock.unwrap_or(false);
        let rail = args.rail.or(file.rail).unwrap_or_default();
        let spi = match rail {
            crate::rail::RailKind::Spi => {
                let table = file.spi.clone().unwrap_or_default().with_env(|k| std::env::var(k).ok());
                Some(crate::rail::spi::settings::SpiSettings::load(&table).map_err(ConfigError::Rail)?)
            }
            _ => None,
        };
        let payload = payload_settings(
            args.payload_host.clone().or(file.payload_host),
            args.payload_cert.clone().or(file.payload_cert),
            args.payload_key.clone().or(file.payload_key),
        )?;
        let require_client_cert = args.require_client_cert || file.require_client_cert.unwrap_or(false);
        if production {
            let allow_without_cert =
                args.allow_without_client_cert || file.allow_without_client_cert.unwrap_or(false);
            check_production(ProductionInputs {
                admin_token: admin_token.is_some(),
                token_in_config_file: from_config_file,
                config_file_private: args.config.as_deref().is_some_and(crate::private::is_owner_only),
                test_clock,
                require_client_cert,
                allow_without_cert,
                rail,
                accept_unsigned: spi.as_ref().is_some_and(|s| s.accept_unsigned),
            })?;
        }
        let workers = args
            .workers
            .or(file.workers)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        if workers == 0 {
            return Err(ConfigError::Invalid("workers must be at least 1"));
        }
        let account_rate_limit = args.account_rate_limit.or(file.account_rate_limit);
        if account_rate_limit == Some(0) {
            return Err(ConfigError::Invalid("the account rate limit must be at least 1 request a second"));
        }
        let operator_credit_single_max = crate::domain::money::Money::parse(
            args.operator_credit_single_max
                .as_deref()
                .or(file.operator_credit_single_max.as_deref())
                .unwrap_or(crate::domain::decide::OPERATOR_CREDIT_SINGLE_MAX_DEFAULT),
        )
        .map_err(|_| {
            ConfigError::Invalid("the operator credit bound must be a decimal amount such as 10000.00")
        })?;
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
            production,
            listen,
            store,
            lease,
            spi,
            payload,
            body_timeout_ms,
            data_dir: args
                .data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
            test_clock,
            log_format: args.log_format.or(file.log_format).unwrap_or_default(),
            access_log: args.access_log.or(file.access_log).unwrap_or_default(),
            admin_token,
            admin_tokens,
            admin_token_file: token_file.clone(),
            sealing,
            sim_settle_ms: args.sim_settle_ms.or(file.sim_settle_ms).unwrap_or(DEFAULT_SIM_SETTLE_MS),
            rail,
            dict_file: args.dict_file.clone().or(file.dict_file),
            require_client_cert,
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
            account_rate_limit,
            operator_credit_single_max,
            shutdown_timeout_seconds: args
                .shutdown_timeout_seconds
                .or(file.shutdown_timeout_seconds)
                .unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT_SECONDS),
        })
    }
}

/// What the production profile checks, gathered so that the rule is a pure function.
#[derive(Debug, Clone, Copy)]
struct ProductionInputs {
    admin_token: bool,
    token_in_config_file: bool,
    config_file_private: bool,
    test_clock: bool,
    require_client_cert: bool,
    allow_without_cert: bool,
    rail: crate::rail::RailKind,
    /// The SPI rail accepts unsigned messages (homologation tools only).
    accept_unsigned: bool,
}

fn parse_rail(text: &str) -> Result<crate::rail::RailKind, String> {
    crate::rail::RailKind::parse(text).ok_or_else(|| format!("{text:?} is not a rail: sim, spi or none"))
}

/// The production profile's rules (README "Running in production"): every way of starting
/// that only makes sense in a sandbox is refused with the reason, before anything is opened.
fn check_production(p: ProductionInputs) -> Result<(), ConfigError> {
    if !p.admin_token {
        return Err(ConfigError::Production(
            "an admin token is required: set PIXGW_ADMIN_TOKEN or --admin-token-file (a production server never generates one)",
        ));
    }
    if p.token_in_config_file && !p.config_file_private {
        return Err(ConfigError::Production(
            "the config file holds the admin token and its group or others may read it: chmod 600 it, or use PIXGW_ADMIN_TOKEN_FILE",
        ));
    }
    if p.test_clock {
        return Err(ConfigError::Production("the test clock is for tests: drop --test-clock"));
    }
    if !p.require_client_cert && !p.allow_without_cert {
        return Err(ConfigError::Production(
            "set --require-client-cert (behind a proxy that terminates mutual TLS), or say --allow-without-client-cert",
        ));
    }
    if p.rail == crate::rail::RailKind::Sim {
        return Err(ConfigError::Production(
            "the simulated rail moves no money: use --rail spi (the SPI and the DICT) or --rail none (a closed wallet)",
        ));
    }
    if p.accept_unsigned {
        return Err(ConfigError::Production(
            "accepting unsigned SPI messages is for homologation tools only: drop accept_unsigned",
        ));
    }
    Ok(())
}

/// A secret kept in a file of its own: its owner alone may read it, and its text, trimmed,
/// is the secret.
/// The named tokens of an admin token file (owner-only), and the first one's token (the one
/// the Demo's credentials show and a CLI command presents).
pub fn read_admin_tokens(
    path: &Path,
) -> Result<(String, crate::auth::admin_tokens::AdminTokens), ConfigError> {
    use crate::auth::admin_tokens::AdminTokens;
    let text = read_private_secret(path)?;
    let tokens = AdminTokens::parse(&text).map_err(|e| ConfigError::AdminTokenFile(path.to_path_buf(), e))?;
    let first = AdminTokens::first_token(&text)
        .ok_or_else(|| ConfigError::AdminTokenFile(path.to_path_buf(), "it holds no token".into()))?;
    Ok((first, tokens))
}

fn read_private_secret(path: &Path) -> Result<String, ConfigError> {
    let fail = |m: String| ConfigError::AdminTokenFile(path.to_path_buf(), m);
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    if !crate::private::is_owner_only(path) {
        return Err(fail("its group or others may read it: chmod 600 it".into()));
    }
    let token = text.trim();
    if token.is_empty() {
        return Err(fail("it is empty".into()));
    }
    Ok(token.to_owned())
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read(path.into(), e))?;
    toml::from_str(&text).map_err(|e| ConfigError::Parse(path.into(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn production() -> ProductionInputs {
        ProductionInputs {
            admin_token: true,
            token_in_config_file: false,
            config_file_private: false,
            test_clock: false,
            require_client_cert: true,
            allow_without_cert: false,
            rail: crate::rail::RailKind::Spi,
            accept_unsigned: false,
        }
    }

    /// Every word of every command's help is for its reader: no constant of the code
    /// (`ACCESS_LOG_SLOW_MS`) stands in for what it is; environment variables are fine.
    #[test]
    fn no_help_text_names_a_constant_of_the_code() {
        use clap::CommandFactory;
        fn texts(cmd: &clap::Command, out: &mut Vec<(String, String)>) {
            for arg in cmd.get_arguments() {
                let name =
                    format!("{} --{}", cmd.get_name(), arg.get_long().unwrap_or(arg.get_id().as_str()));
                for help in [arg.get_help(), arg.get_long_help()].into_iter().flatten() {
                    out.push((name.clone(), help.to_string()));
                }
                for value in arg.get_possible_values() {
                    if let Some(help) = value.get_help() {
                        out.push((format!("{name} {}", value.get_name()), help.to_string()));
                    }
                }
            }
            for sub in cmd.get_subcommands() {
                texts(sub, out);
            }
        }
        let mut all = Vec::new();
        texts(&Cli::command(), &mut all);
        assert!(all.len() > 50, "{}", all.len());
        for (name, help) in all {
            let constant = help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).find(|w| {
                w.contains('_')
                    && !w.starts_with("PIXGW_")
                    && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            });
            assert_eq!(constant, None, "{name}: {help}");
        }
    }

    /// README's table of `pixgw serve` settings has every flag of `serve`.
    #[test]
    fn readmes_table_of_settings_has_every_flag_of_serve() {
        use clap::CommandFactory;
        let readme = include_str!(concat!("../README", ".md"));
        let table: String = readme
            .lines()
            .skip_while(|l| !l.starts_with("| flag | env | TOML key | default |"))
            .take_while(|l| l.starts_with('|'))
            .collect();
        let cli = Cli::command();
        let serve = cli.find_subcommand("serve").unwrap();
        let mut missing = Vec::new();
        for arg in serve.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if long == "help" || long == "version" {
                continue;
            }
            if !table.contains(&format!("`--{long}")) {
                missing.push(long.to_owned());
            }
        }
        assert!(missing.is_empty(), "README's table lacks {missing:?}");
    }

    #[test]
    fn payload_locations_need_a_key_of_their_own_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let host = || Some("pix.example.com".to_owned());
        let e = payload_settings(host(), None, None).err().unwrap().to_string();
        assert!(e.contains("--payload-cert and --payload-key") && e.contains("never the SPI"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("qr.pem"), dir.path().join("qr.key"));
        std::fs::write(&cert, "not read before the key's mode is checked").unwrap();
        std::fs::write(&key, "a key").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = payload_settings(host(), Some(cert.clone()), Some(key.clone())).err().unwrap().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = payload_settings(host(), Some(cert), Some(key)).err().unwrap().to_string();
        assert!(!e.contains("chmod 600"), "an owner-only key is read (this one is no key): {e}");
        assert!(payload_settings(None, None, None).unwrap().is_none());
    }

    #[test]
    fn the_production_profile_refuses_every_sandbox_only_way_of_starting() {
        assert!(check_production(production()).is_ok());
        let refused = |p: ProductionInputs, says: &str| {
            let e = check_production(p).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        };
        refused(ProductionInputs { admin_token: false, ..production() }, "an admin token is required");
        refused(ProductionInputs { token_in_config_file: true, ..production() }, "chmod 600");
        refused(ProductionInputs { test_clock: true, ..production() }, "test clock");
        refused(ProductionInputs { require_client_cert: false, ..production() }, "--require-client-cert");
        refused(
            ProductionInputs { rail: crate::rail::RailKind::Sim, ..production() },
            "simulated rail moves no money",
        );
        assert!(
            check_production(ProductionInputs { rail: crate::rail::RailKind::None, ..production() }).is_ok()
        );
        refused(ProductionInputs { accept_unsigned: true, ..production() }, "unsigned");
        // Said out loud, serving without client certificates is allowed; so is a token in a
        // config file that only its owner reads.
        let p = ProductionInputs { require_client_cert: false, allow_without_cert: true, ..production() };
        assert!(check_production(p).is_ok());
        let p = ProductionInputs { token_in_config_file: true, config_file_private: true, ..production() };
        assert!(check_production(p).is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn an_admin_token_file_must_be_its_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let args = ServeArgs { admin_token_file: Some(path.clone()), ..ServeArgs::default() };
        let e = Settings::resolve(&args).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let s = Settings::resolve(&args).unwrap();
        assert_eq!(s.admin_token.as_deref(), Some("0123456789abcdef0123"), "trimmed");
        // Given twice is refused rather than one silently winning.
        let both = ServeArgs { admin_token: Some("x".repeat(20)), ..args };
        assert!(Settings::resolve(&both).unwrap_err().to_string().contains("given twice"));
    }

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
