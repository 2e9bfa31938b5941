//! The `pixgw` binary: parse the command line, start logs, run.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use pixgw::config::{
    AccountCommand, AccountCreateArgs, BackupArgs, Cli, Command, DictCapacityArgs, DictFunctionalArgs,
    HomologationCommand, KeygenCommand, ListenArgs, LoadArgs, MigrateArgs, RailCommand, RestoreArgs,
    ServeArgs, Settings, WebhooksCommand,
};
use pixgw::startup::Application;
use pixgw::telemetry;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // Every file any command writes (data dir, backup, account credentials) is the user's own.
    pixgw::private::owner_only_from_now();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(&args),
        Command::Webhooks(WebhooksCommand::Listen(args)) => listen(args),
        Command::Load(args) => load(args),
        Command::Backup(args) => backup(&args),
        Command::Restore(args) => restore(&args),
        Command::Migrate(args) => migrate(&args),
        Command::Keygen(command) => keygen(&command),
        Command::Account(AccountCommand::Create(args)) => create_account(args),
        Command::Rail(RailCommand::Release(args)) => release_rail(&args),
        Command::SpiSim(args) => spi_sim(args),
        Command::Homologation(HomologationCommand::DictCapacity(args)) => dict_capacity(args),
        Command::Homologation(HomologationCommand::DictFunctional(args)) => dict_functional(args),
    }
}

/// The `[spi]` settings of a node's settings file.
fn spi_settings(config: &std::path::Path) -> Result<pixgw::rail::spi::settings::SpiSettings, String> {
    #[derive(serde::Deserialize)]
    struct OnlySpi {
        spi: Option<pixgw::rail::spi::settings::SpiFile>,
    }
    std::fs::read_to_string(config)
        .map_err(|e| format!("reading {}: {e}", config.display()))
        .and_then(|text| toml::from_str::<OnlySpi>(&text).map_err(|e| format!("{}: {e}", config.display())))
        .and_then(|f| {
            let table = f.spi.unwrap_or_default().with_env(|k| std::env::var(k).ok());
            pixgw::rail::spi::settings::SpiSettings::load(&table)
        })
}

fn dict_functional(args: DictFunctionalArgs) -> ExitCode {
    let _logs = telemetry::init_logs(pixgw::config::LogFormat::Human);
    let settings = match spi_settings(&args.config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pixgw homologation dict-functional: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.preload_keys > pixgw::homologation::functional::PRELOAD_KEYS_MAX {
        eprintln!(
            "pixgw homologation dict-functional: --preload-keys must be at most {}",
            pixgw::homologation::functional::PRELOAD_KEYS_MAX
        );
        return ExitCode::FAILURE;
    }
    let f = pixgw::homologation::functional::Functional {
        server: args.server.trim_end_matches('/').to_owned(),
        admin_token: args.admin_token,
        sim_control: args.sim_control.trim_end_matches('/').to_owned(),
        settings,
        preload_keys: args.preload_keys,
    };
    let report = actix_web::rt::System::new().block_on(pixgw::homologation::functional::dict_functional(f));
    let text = serde_json::to_string_pretty(&report).unwrap_or_default();
    println!("{text}");
    if let Some(path) = &args.report {
        if let Err(e) = std::fs::write(path, &text) {
            eprintln!("pixgw homologation dict-functional: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn dict_capacity(args: DictCapacityArgs) -> ExitCode {
    let _logs = telemetry::init_logs(pixgw::config::LogFormat::Human);
    let settings = spi_settings(&args.config);
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pixgw homologation dict-capacity: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.lookups == 0 || args.lookups > pixgw::homologation::LOOKUPS_MAX || args.within_seconds == 0 {
        eprintln!(
            "pixgw homologation dict-capacity: --lookups must be 1 to {} and --within-seconds above 0",
            pixgw::homologation::LOOKUPS_MAX
        );
        return ExitCode::FAILURE;
    }
    let keys: Vec<String> =
        (0..args.lookups).map(|i| args.key_pattern.replace("{}", &i.to_string())).collect();
    let window = std::time::Duration::from_secs(args.within_seconds);
    let report =
        actix_web::rt::System::new().block_on(pixgw::homologation::dict_capacity(settings, keys, window));
    let text = serde_json::to_string_pretty(&report).unwrap_or_default();
    println!("{text}");
    if let Some(path) = &args.report {
        if let Err(e) = std::fs::write(path, &text) {
            eprintln!("pixgw homologation dict-capacity: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn spi_sim(args: pixgw::rail::spi::simulator::SimArgs) -> ExitCode {
    let _logs = telemetry::init_logs(pixgw::config::LogFormat::Human);
    match actix_web::rt::System::new().block_on(pixgw::rail::spi::simulator::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pixgw spi-sim: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn create_account(args: AccountCreateArgs) -> ExitCode {
    let admin_token =
        match pixgw::config::cli_admin_token(args.admin_token.as_deref(), args.admin_token_file.as_deref()) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("pixgw account create: {e}");
                return ExitCode::FAILURE;
            }
        };
    let req = pixgw::provision::NewAccount {
        url: args.url,
        admin_token,
        name: args.name,
        document: args.document,
        sandbox: args.sandbox,
        cert_days: args.cert_days,
        out: args.out,
        cert_file: args.cert,
        initial_balance: args.initial_balance,
    };
    actix_web::rt::System::new().block_on(async move {
        match pixgw::provision::create(&req, chrono::Utc::now()).await {
            Ok(made) => {
                let dir = made.out.display();
                pixgw::say!("account {} created; client {}", made.account_id, made.client_id);
                pixgw::say!("files (owner-only) in {dir}: credentials.json, token-request.json, client-cert.pem, client-cert.urlencoded, and client-key.pem unless --cert brought the certificate");
                pixgw::say!("get a token:");
                pixgw::say!(
                    "  curl -s -X POST {}/api/auth/token -H 'Content-Type: application/json' \\\n    \
                     -H \"X-SSL-Client-Cert: $(cat {dir}/client-cert.urlencoded)\" -d @{dir}/token-request.json",
                    req.url.trim_end_matches('/')
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("pixgw account create: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}

fn backup(args: &BackupArgs) -> ExitCode {
    let admin_token =
        match pixgw::config::cli_admin_token(args.admin_token.as_deref(), args.admin_token_file.as_deref()) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("pixgw backup: {e}");
                return ExitCode::FAILURE;
            }
        };
    let recipients = match pixgw::maintenance::parse_recipients(&args.encrypt_to) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pixgw backup: {e:#}");
            return ExitCode::from(2);
        }
    };
    actix_web::rt::System::new().block_on(async move {
        match pixgw::maintenance::backup(&args.url, &admin_token, &args.to, &recipients).await {
            Ok(m) => {
                pixgw::say!(
                    "backup written to {}{}: {} keys and {} journal records, through record {} ({} bytes, sha256 {})",
                    args.to.display(),
                    if m.encryption.is_some() { " (encrypted, age)" } else { "" },
                    m.summary.pairs,
                    m.summary.records,
                    m.summary.through_seq,
                    m.bytes,
                    m.sha256
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("pixgw backup: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}

fn restore(args: &RestoreArgs) -> ExitCode {
    match pixgw::maintenance::restore(&args.from, &args.data_dir, args.identity.as_deref()) {
        Ok(s) => {
            pixgw::say!(
                "restored {} into {}: the state after journal record {} (taken {})",
                args.from.display(),
                args.data_dir.display(),
                s.through_seq,
                s.taken_at
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pixgw restore: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn release_rail(args: &pixgw::config::RailReleaseArgs) -> ExitCode {
    match pixgw::maintenance::release_rail(&args.data_dir) {
        Ok(Some(why)) => {
            pixgw::say!("released the SPI rail of {} (it was held: {why})", args.data_dir.display());
            ExitCode::SUCCESS
        }
        Ok(None) => {
            pixgw::say!("the SPI rail of {} was not held; nothing changed", args.data_dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pixgw rail release: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn migrate(args: &MigrateArgs) -> ExitCode {
    let url = match pixgw::store::postgres::PgUrl::parse(&args.to) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("pixgw migrate: --to: {e}");
            return ExitCode::from(2);
        }
    };
    match pixgw::maintenance::migrate(&args.from, &url, args.identity.as_deref()) {
        Ok(rows) => {
            pixgw::say!(
                "moved {} into {url}: {rows} rows; start the nodes with --store",
                args.from.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pixgw migrate: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn keygen(command: &KeygenCommand) -> ExitCode {
    let (out, made) = match command {
        KeygenCommand::Backup(a) => (&a.out, Ok(pixgw::maintenance::new_identity_file(chrono::Utc::now()))),
        KeygenCommand::Secrets(a) => {
            (&a.out, pixgw::auth::sealing::new_key_file().map(|t| (t, String::new())))
        }
    };
    let written = made.map_err(anyhow::Error::new).and_then(|(text, public)| {
        pixgw::private::write_new_secret_file(out, text.as_bytes())?;
        Ok(public)
    });
    match written {
        Ok(public) if public.is_empty() => {
            pixgw::say!(
                "key written to {} (owner-only): give it to `serve --secrets-key-file`",
                out.display()
            );
            ExitCode::SUCCESS
        }
        Ok(public) => {
            pixgw::say!(
                "identity written to {} (owner-only); its recipient, for --encrypt-to:",
                out.display()
            );
            pixgw::say!("{public}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pixgw keygen: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load(args: LoadArgs) -> ExitCode {
    let money = |name: &str, text: &str| {
        pixgw::domain::money::Money::parse(text).map_err(|e| format!("--{name} {text:?}: {e:?}"))
    };
    let settings = match (money("fund", &args.fund), money("value", &args.value)) {
        (Ok(fund), Ok(value)) => pixgw::load::LoadSettings {
            url: args.url,
            data_dir: args.data_dir,
            client_id: args.client_id,
            client_secret: args.client_secret,
            cert: args.cert,
            scenario: args.scenario,
            connections: args.connections,
            rate: args.rate,
            duration: args.duration,
            requests: args.requests,
            warmup: args.warmup,
            fund,
            value,
            mix: args.mix,
            storm_group: args.storm_group,
            json: args.json,
            rates: args.rates.map(|r| r.0).unwrap_or_default(),
            slo: args.slo,
            report: args.report,
        },
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("pixgw: {e}");
            return ExitCode::from(2);
        }
    };
    actix_web::rt::System::new().block_on(async move {
        match pixgw::load::run(settings).await {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => {
                eprintln!("pixgw load: the consistency check failed");
                ExitCode::from(1)
            }
            Err(e) => {
                eprintln!("pixgw load: {e:#}");
                ExitCode::from(2)
            }
        }
    })
}

fn listen(args: ListenArgs) -> ExitCode {
    let addr = std::net::SocketAddr::new(args.host, args.port);
    actix_web::rt::System::new().block_on(async move {
        match pixgw::webhooks::listen::run(addr, args.secret, args.status, args.forward_to).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pixgw: {e:#}");
                ExitCode::from(2)
            }
        }
    })
}

fn serve(args: &ServeArgs) -> ExitCode {
    let settings = match Settings::resolve(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pixgw: {e}");
            return ExitCode::from(2);
        }
    };
    // Held until main returns: dropping it writes the lines still queued.
    let _log_guard = telemetry::init_logs(settings.log_format);
    actix_web::rt::System::new().block_on(async move {
        if let pixgw::config::StoreChoice::Postgres(url) = settings.store.clone() {
            return match pixgw::node::serve(settings, *url).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "stopped");
                    eprintln!("pixgw: {e:#}");
                    ExitCode::FAILURE
                }
            };
        }
        let data_dir = settings.data_dir.clone();
        let app = match Application::build(settings) {
            Ok(app) => app,
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "start failed");
                eprintln!("pixgw: {e:#}");
                return ExitCode::FAILURE;
            }
        };
        print_banner(&app, &data_dir);
        match app.run_until_stopped().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pixgw: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Tells the user where to go next. The first line is stable: tests and scripts read the
/// address from it.
fn print_banner(app: &Application, data_dir: &std::path::Path) {
    let addr = app.address();
    let dir = &app.boot.demo_dir;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "pixgw listening on http://{addr}");
    let _ = writeln!(out, "data dir: {}", data_dir.display());
    if app.boot.production {
        // Nothing of the sandbox is printed: there is none, and no credentials file.
        let _ = writeln!(out, "production profile: no sandbox; create accounts with `pixgw account create`");
        let _ = out.flush();
        return;
    }
    if app.boot.created_demo {
        let _ = writeln!(out, "first start: created the Demo sandbox account");
    }
    let creds = dir.join("credentials.json");
    if creds.exists() {
        let _ = writeln!(out, "demo credentials: {}", creds.display());
        let _ = writeln!(out, "get a token:");
        let _ = writeln!(
            out,
            "  curl -s -X POST http://{addr}/api/auth/token -H 'Content-Type: application/json' \\\n    \
             -H \"X-SSL-Client-Cert: $(cat {cert})\" -d @{body}",
            cert = dir.join("client-cert.urlencoded").display(),
            body = dir.join("token-request.json").display(),
        );
    } else {
        let _ = writeln!(out, "demo credentials file {} is missing; rotate the Demo secret with POST /admin/accounts/{{id}}/secret", creds.display());
    }
    let _ = out.flush();
}
