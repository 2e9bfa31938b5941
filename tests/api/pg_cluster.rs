//! A throwaway PostgreSQL cluster for one test, from the system's own binaries: `initdb`
//! and `pg_ctl` in a temporary dir, as the `postgres` user when the tests run as root
//! (PostgreSQL refuses to run as root), on a free port of 127.0.0.1.
//!
//! Where PostgreSQL is not installed, [`PgCluster::start`] prints one line saying how to
//! install it and answers `None`, and the test returns; under CI (`CI=true`) a missing
//! PostgreSQL is a failure instead, so CI never passes by skipping.

use std::path::PathBuf;
use std::process::{Command, Stdio};

pub struct PgCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
    /// Server options beyond the common ones (TLS).
    extra: String,
}

/// Where Debian installs the server binaries (the newest version present).
fn server_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("pg_ctl").exists() && p.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// How many ports the first start of a cluster tries before it gives up.
const FIRST_START_TRIES_MAX: u32 = 3;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl PgCluster {
    /// Starts a cluster, or answers `None` (with one printed line) where PostgreSQL is not
    /// installed outside CI.
    pub fn start(test: &str) -> Option<PgCluster> {
        Self::start_with(test, None)
    }

    /// Starts a cluster that accepts TCP connections over TLS only, with this certificate
    /// and key (PEM).
    pub fn start_tls(test: &str, cert_pem: &str, key_pem: &str) -> Option<PgCluster> {
        Self::start_with(test, Some((cert_pem, key_pem)))
    }

    fn start_with(test: &str, tls: Option<(&str, &str)>) -> Option<PgCluster> {
        let Some(bin) = server_bin() else {
            let how = "PostgreSQL is not installed: apt-get install postgresql";
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: {how} (required under CI)");
            }
            println!("skipped {test}: {how}");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        if is_root() {
            let ok = Command::new("chown").arg("postgres").arg(dir.path()).status().unwrap().success();
            assert!(ok, "chown of the cluster dir to postgres failed");
        }
        let mut cluster = PgCluster { dir, bin, port: free_port(), extra: String::new() };
        let data = cluster.data();
        cluster.run("initdb", &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"]);
        if let Some((cert, key)) = tls {
            let data = PathBuf::from(&data);
            std::fs::write(data.join("server.crt"), cert).unwrap();
            std::fs::write(data.join("server.key"), key).unwrap();
            let hba = "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n";
            std::fs::write(data.join("pg_hba.conf"), hba).unwrap();
            // The server refuses a key that others may read, or that it does not own.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(data.join("server.key"), std::fs::Permissions::from_mode(0o600))
                .unwrap();
            if is_root() {
                let ok = Command::new("chown")
                    .arg("postgres")
                    .args([data.join("server.crt"), data.join("server.key"), data.join("pg_hba.conf")])
                    .status()
                    .unwrap()
                    .success();
                assert!(ok, "chown of the TLS files to postgres failed");
            }
            cluster.extra = " -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key".into();
        }
        cluster.first_start();
        Some(cluster)
    }

    /// A streaming standby of this cluster (`pg_basebackup -R`), started on a port of its
    /// own, that the primary's `pg_stat_replication` names `application_name`.
    pub fn standby(&self, application_name: &str) -> PgCluster {
        let dir = tempfile::tempdir().unwrap();
        if is_root() {
            let ok = Command::new("chown").arg("postgres").arg(dir.path()).status().unwrap().success();
            assert!(ok, "chown of the standby's dir to postgres failed");
        }
        let mut standby = PgCluster { dir, bin: self.bin.clone(), port: free_port(), extra: String::new() };
        let source =
            format!("host=127.0.0.1 port={} user=postgres application_name={application_name}", self.port);
        // A fast checkpoint: the default spreads it over minutes.
        standby.run(
            "pg_basebackup",
            &["-D", &standby.data(), "-R", "-X", "stream", "-c", "fast", "-d", &source],
        );
        standby.first_start();
        standby
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn run(&self, tool: &str, args: &[&str]) {
        if let Err(e) = self.try_run(tool, args) {
            panic!("{e}");
        }
    }

    fn try_run(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        let exe = self.bin.join(tool);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let out = cmd.args(args).current_dir(self.dir.path()).stdin(Stdio::null()).output().unwrap();
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("{tool} {args:?}: {}", String::from_utf8_lossy(&out.stderr)))
        }
    }

    /// The first start, on a free port: a port found free may be taken by another test's
    /// server before this one binds it, so a failed start tries another port (at most
    /// [`FIRST_START_TRIES_MAX`] times).
    fn first_start(&mut self) {
        for tries in 1.. {
            match self.try_start_server() {
                Ok(()) => return,
                Err(e) if tries >= FIRST_START_TRIES_MAX => panic!("{e}"),
                Err(_) => self.port = free_port(),
            }
        }
    }

    /// Starts the server (again) and waits until it accepts connections.
    pub fn start_server(&self) {
        if let Err(e) = self.try_start_server() {
            panic!("{e}");
        }
    }

    fn try_start_server(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=100{}",
            self.port,
            self.dir.path().display(),
            self.extra
        );
        let log = self.dir.path().join("server.log").display().to_string();
        self.try_run("pg_ctl", &["-D", &self.data(), "-o", &options, "-l", &log, "-w", "-t", "60", "start"])
    }

    /// Stops the server at once (`immediate`: as if it crashed; recovery runs at its start).
    pub fn stop_server(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"]);
    }

    /// A connection string for a fresh database of this cluster.
    pub fn database(&self, name: &str) -> String {
        let psql = self.bin.join("psql");
        let out = Command::new(psql)
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-c"])
            .arg(format!("CREATE DATABASE {name}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        self.url(name)
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs one SQL statement in `db`; answers its output, unaligned.
    pub fn sql(&self, db: &str, statement: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-At", "-d", db, "-c"])
            .arg(statement)
            .output()
            .unwrap();
        assert!(out.status.success(), "{statement}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let exe = self.bin.join("pg_ctl");
        let data = self.data();
        let args = ["-D", data.as_str(), "-m", "immediate", "stop"];
        let _ = if is_root() {
            Command::new("runuser").args(["-u", "postgres", "--"]).arg(&exe).args(args).output()
        } else {
            Command::new(&exe).args(args).output()
        };
    }
}
