//! The operator's commands around the store: `pixgw backup` (a running server's embedded
//! store, through the admin API, into a directory), `pixgw restore` (a backup into a new
//! data dir) and `pixgw migrate` (a stopped data dir, or a backup, into an empty PostgreSQL
//! database). docs/storage.md "Backups of the embedded store" and "Moving onto PostgreSQL" tell the whole story.
//!
//! A backup directory holds the stream (`backup.pixgw`, see `store::backup`) and, written
//! last, `manifest.json`: a directory without the manifest is an interrupted backup and is
//! refused. Every file is synced before the manifest names it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::store::backup::{self, BackupReader, Item, Summary, BACKUP_FILE, MANIFEST_FILE};
use crate::store::postgres::{Pg, PgUrl};
use crate::store::Repo;

/// How long the server may take to start answering a backup request.
const BACKUP_ANSWER_WAIT: Duration = Duration::from_secs(30);

/// What `manifest.json` says of a backup.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    #[serde(flatten)]
    pub summary: Summary,
    /// The stream's size and SHA-256 (of the whole file, digest included).
    pub bytes: u64,
    pub sha256: String,
    /// The server it was taken from.
    pub source: String,
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Takes a backup of the server at `url` into `to` (which must not exist or be empty).
pub async fn backup(url: &str, admin_token: &str, to: &Path) -> anyhow::Result<Manifest> {
    backup::ensure_empty_target(to)?;
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    let partial = to.join(format!("{BACKUP_FILE}.partial"));
    let base = url.trim_end_matches('/');
    let client = awc::Client::builder().timeout(BACKUP_ANSWER_WAIT).finish();
    let mut res = client
        .get(format!("{base}/admin/backup"))
        .insert_header(("Authorization", format!("Bearer {admin_token}")))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach {base}: {e}"))?;
    if !res.status().is_success() {
        let status = res.status();
        let body = res.body().limit(64 * 1024).await.unwrap_or_default();
        bail!("the server answered {status}: {}", String::from_utf8_lossy(&body));
    }
    let mut file =
        std::fs::File::create(&partial).with_context(|| format!("creating {}", partial.display()))?;
    let mut hash = Sha256::new();
    let mut bytes = 0u64;
    while let Some(chunk) = res.next().await {
        let chunk = chunk.map_err(|e| anyhow::anyhow!("the backup stream broke off: {e}"))?;
        hash.update(&chunk);
        bytes += chunk.len() as u64;
        file.write_all(&chunk).with_context(|| format!("writing {}", partial.display()))?;
    }
    file.sync_all()?;
    drop(file);
    // Read back whole before it is called a backup: the digest, the counts, every frame.
    let summary = verify(&partial)?;
    let stream = to.join(BACKUP_FILE);
    std::fs::rename(&partial, &stream)?;
    let manifest = Manifest { summary, bytes, sha256: hex(&hash.finalize()), source: base.to_owned() };
    write_synced(&to.join(MANIFEST_FILE), &serde_json::to_vec_pretty(&manifest)?)?;
    sync_dir(to)?;
    Ok(manifest)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn write_synced(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Reads a stream to its end, checking everything; answers its summary.
pub fn verify(path: &Path) -> anyhow::Result<Summary> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = BackupReader::new(std::io::BufReader::with_capacity(1 << 20, file))?;
    loop {
        if let Item::End(summary) = reader.next_item()? {
            return Ok(summary);
        }
    }
}

/// The manifest of the backup in `dir`, refusing a directory that is not a whole backup.
pub fn manifest(dir: &Path) -> anyhow::Result<Manifest> {
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read(&path).map_err(|e| {
        anyhow::anyhow!("{} is not a finished pixgw backup ({}: {e})", dir.display(), MANIFEST_FILE)
    })?;
    serde_json::from_slice(&text).with_context(|| format!("reading {}", path.display()))
}

/// Makes the data dir `data_dir` from the backup in `from`. The manifest must describe
/// the stream beside it (its size and SHA-256), so that two backups' files mixed by hand
/// are refused before anything is built.
pub fn restore(from: &Path, data_dir: &Path) -> anyhow::Result<Summary> {
    let manifest = manifest(from)?;
    let stream = from.join(BACKUP_FILE);
    let mut file = std::fs::File::open(&stream).with_context(|| format!("opening {}", stream.display()))?;
    let (mut hash, mut bytes, mut buf) = (Sha256::new(), 0u64, vec![0u8; 1 << 20]);
    loop {
        let n = std::io::Read::read(&mut file, &mut buf)?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        bytes += n as u64;
    }
    if (bytes, hex(&hash.finalize())) != (manifest.bytes, manifest.sha256.clone()) {
        bail!("{} is not the stream its manifest describes (size or SHA-256 differ)", stream.display());
    }
    let file = std::fs::File::open(&stream).with_context(|| format!("opening {}", stream.display()))?;
    Ok(backup::restore(file, data_dir, Repo::layout(), chrono::Utc::now())?)
}

/// Where `pixgw migrate` reads from.
enum Source {
    DataDir(PathBuf),
    Backup(PathBuf),
}

/// Moves the data dir (or backup) `from` into the empty database at `to`; answers the rows
/// written. A backup is first restored into a temporary data dir beside nothing else.
pub fn migrate(from: &Path, to: &PgUrl) -> anyhow::Result<u64> {
    let source = if from.join(MANIFEST_FILE).exists() {
        Source::Backup(from.to_owned())
    } else {
        Source::DataDir(from.to_owned())
    };
    let pg = Pg::new(to.clone(), "pixgw-migrate".into())?;
    pg.migrate().with_context(|| format!("preparing the schema in {to}"))?;
    let mut import = pg.begin_import().with_context(|| format!("{to}"))?;
    let (dir, scratch) = match source {
        Source::DataDir(dir) => (dir, None),
        Source::Backup(b) => {
            let scratch = std::env::temp_dir().join(format!("pixgw-migrate-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&scratch);
            restore(&b, &scratch).with_context(|| format!("reading the backup {}", b.display()))?;
            (scratch.clone(), Some(scratch))
        }
    };
    let mut failed = None;
    let read = backup::read_stopped_data_dir(&dir, Repo::layout(), &mut |k, v| {
        import.put(k, v).map_err(|e| {
            let io = std::io::Error::other(e.to_string());
            failed = Some(e);
            io
        })
    });
    if let Some(scratch) = scratch {
        let _ = std::fs::remove_dir_all(scratch);
    }
    if let Some(e) = failed {
        return Err(anyhow::Error::new(e).context(format!("writing into {to}")));
    }
    read.with_context(|| format!("reading {}", dir.display()))?;
    let rows = import.finish().with_context(|| format!("committing into {to}"))?;
    Ok(rows)
}
