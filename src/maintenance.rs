//! The operator's commands around the store: `pixgw backup` (a running server's embedded
//! store, through the admin API, into a directory), `pixgw restore` (a backup into a new
//! data dir) and `pixgw migrate` (a stopped data dir, or a backup, into an empty PostgreSQL
//! database). docs/storage.md "Backups of the embedded store" and "Moving onto PostgreSQL" tell the whole story.
//!
//! A backup directory holds the stream (`backup.pixgw`, see `store::backup`) and, written
//! last, `manifest.json`: a directory without the manifest is an interrupted backup and is
//! refused. Every file is synced before the manifest names it.
//!
//! With `--encrypt-to` the stream is written in the age format (`backup.pixgw.age`) to one or
//! more X25519 recipients, and no byte of it in clear ever reaches the disk: it is checked as
//! it passes, on its way into the encryptor. The manifest stays in clear (counts, sequence
//! numbers, the file's size and SHA-256 as stored) so that a backup can be checked whole
//! without its key; restoring it needs an identity that matches one recipient.
//! docs/decisions.md "Encrypted backups and secrets sealed at rest" says why age.

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
    /// `"age"` when the stream is encrypted (`backup.pixgw.age`); absent in clear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<String>,
}

/// The manifest's name for a stream in the age format.
pub const ENCRYPTION_AGE: &str = "age";
/// The name of an encrypted stream inside a backup directory.
pub const ENCRYPTED_BACKUP_FILE: &str = "backup.pixgw.age";
/// Recipients one backup may be encrypted to.
pub const BACKUP_RECIPIENTS_MAX: usize = 16;
/// Chunks of the stream queued for the checker of an encrypted backup.
const CHECK_QUEUE_CHUNKS_MAX: usize = 64;

/// The recipients of `--encrypt-to`: age X25519 public keys (`age1...`).
pub fn parse_recipients(texts: &[String]) -> anyhow::Result<Vec<age::x25519::Recipient>> {
    if texts.len() > BACKUP_RECIPIENTS_MAX {
        bail!("at most {BACKUP_RECIPIENTS_MAX} recipients (--encrypt-to)");
    }
    texts
        .iter()
        .map(|t| {
            t.trim().parse::<age::x25519::Recipient>().map_err(|e| {
                anyhow::anyhow!("--encrypt-to {t:?} is not an age X25519 recipient (age1...): {e}")
            })
        })
        .collect()
}

/// The identities of an age identity file (as `age-keygen` and `pixgw keygen backup` write
/// it), which must be readable by its owner alone.
pub fn read_identities(path: &Path) -> anyhow::Result<Vec<age::x25519::Identity>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if !crate::private::is_owner_only(path) {
        bail!("{}: its group or others may read it: chmod 600 it", path.display());
    }
    let identities = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            l.parse::<age::x25519::Identity>()
                .map_err(|e| anyhow::anyhow!("{}: a line is not an age X25519 identity: {e}", path.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if identities.is_empty() {
        bail!("{} holds no age identity (AGE-SECRET-KEY-1...)", path.display());
    }
    Ok(identities)
}

/// A new age identity, as the text of an identity file, and its recipient.
pub fn new_identity_file(now: chrono::DateTime<chrono::Utc>) -> (String, String) {
    use age::secrecy::ExposeSecret;
    let identity = age::x25519::Identity::generate();
    let recipient = identity.to_public().to_string();
    let text = format!(
        "# created: {}\n# public key: {recipient}\n{}\n",
        now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        identity.to_string().expose_secret()
    );
    (text, recipient)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Takes a backup of the server at `url` into `to` (which must not exist or be empty),
/// encrypted to `recipients` when there are any.
pub async fn backup(
    url: &str,
    admin_token: &str,
    to: &Path,
    recipients: &[age::x25519::Recipient],
) -> anyhow::Result<Manifest> {
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
    if !recipients.is_empty() {
        return backup_encrypted(res, to, base, recipients).await;
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
    let manifest =
        Manifest { summary, bytes, sha256: hex(&hash.finalize()), source: base.to_owned(), encryption: None };
    write_synced(&to.join(MANIFEST_FILE), &serde_json::to_vec_pretty(&manifest)?)?;
    sync_dir(to)?;
    Ok(manifest)
}

/// The file written under a backup, hashing what it stores.
struct HashingFile {
    file: std::fs::File,
    hash: Sha256,
    bytes: u64,
}

impl Write for HashingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// The clear stream as it arrives, read by the checker on its own thread.
struct ChunkReader {
    chunks: std::sync::mpsc::Receiver<bytes::Bytes>,
    current: bytes::Bytes,
}

impl std::io::Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.chunks.recv() {
                Ok(next) => self.current = next,
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

/// Writes the stream through age into `backup.pixgw.age`, while a thread reads the same
/// clear bytes through `BackupReader` (the digest, the counts, every frame), so the backup is
/// checked whole without its clear text ever being stored.
async fn backup_encrypted(
    mut res: awc::ClientResponse<
        impl futures_util::Stream<Item = Result<bytes::Bytes, awc::error::PayloadError>> + Unpin,
    >,
    to: &Path,
    base: &str,
    recipients: &[age::x25519::Recipient],
) -> anyhow::Result<Manifest> {
    let partial = to.join(format!("{ENCRYPTED_BACKUP_FILE}.partial"));
    let file = std::fs::File::create(&partial).with_context(|| format!("creating {}", partial.display()))?;
    let encryptor = age::Encryptor::with_recipients(recipients.iter().map(|r| r as &dyn age::Recipient))
        .map_err(|e| anyhow::anyhow!("encrypting to the recipients: {e}"))?;
    let mut out = encryptor.wrap_output(HashingFile { file, hash: Sha256::new(), bytes: 0 })?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<bytes::Bytes>(CHECK_QUEUE_CHUNKS_MAX);
    let checker = std::thread::spawn(move || -> anyhow::Result<Summary> {
        let reader = ChunkReader { chunks: rx, current: bytes::Bytes::new() };
        let mut reader = BackupReader::new(std::io::BufReader::with_capacity(1 << 20, reader))?;
        loop {
            if let Item::End(summary) = reader.next_item()? {
                // Whatever follows the end (there must be nothing) is refused by the reader.
                return Ok(summary);
            }
        }
    });
    let mut streamed: anyhow::Result<()> = Ok(());
    while let Some(chunk) = res.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                streamed = Err(anyhow::anyhow!("the backup stream broke off: {e}"));
                break;
            }
        };
        if let Err(e) = out.write_all(&chunk) {
            streamed = Err(anyhow::Error::new(e).context(format!("writing {}", partial.display())));
            break;
        }
        // A checker that stopped early found the stream invalid; its error is reported below.
        if tx.send(chunk).is_err() {
            break;
        }
    }
    drop(tx);
    let checked = checker.join().map_err(|_| anyhow::anyhow!("the backup's checker failed"))?;
    streamed?;
    let summary = checked?;
    let HashingFile { file, hash, bytes } = out.finish()?;
    file.sync_all()?;
    drop(file);
    let stream = to.join(ENCRYPTED_BACKUP_FILE);
    std::fs::rename(&partial, &stream)?;
    let manifest = Manifest {
        summary,
        bytes,
        sha256: hex(&hash.finalize()),
        source: base.to_owned(),
        encryption: Some(ENCRYPTION_AGE.to_owned()),
    };
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
/// are refused before anything is built. An encrypted backup needs `identity`, an age
/// identity file with the key of one of its recipients.
pub fn restore(from: &Path, data_dir: &Path, identity: Option<&Path>) -> anyhow::Result<Summary> {
    let manifest = manifest(from)?;
    let encrypted = match manifest.encryption.as_deref() {
        None => false,
        Some(ENCRYPTION_AGE) => true,
        Some(other) => bail!("{} is encrypted as {other:?}, which this release cannot read", from.display()),
    };
    // Read the key before the stream, so a missing or unreadable key costs no reading.
    let identities = match (encrypted, identity) {
        (true, Some(path)) => read_identities(path)?,
        (true, None) => bail!(
            "{} is encrypted (age): give --identity with the identity file of one of its recipients",
            from.display()
        ),
        (false, _) => Vec::new(),
    };
    let stream = from.join(if encrypted { ENCRYPTED_BACKUP_FILE } else { BACKUP_FILE });
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
    if !encrypted {
        return Ok(backup::restore(file, data_dir, Repo::layout(), chrono::Utc::now())?);
    }
    let decryptor = age::Decryptor::new_buffered(std::io::BufReader::with_capacity(1 << 20, file))
        .map_err(|e| anyhow::anyhow!("{} is not an age file: {e}", stream.display()))?;
    let clear =
        decryptor.decrypt(identities.iter().map(|i| i as &dyn age::Identity)).map_err(|e| match e {
            age::DecryptError::NoMatchingKeys => anyhow::anyhow!(
                "no identity in the identity file matches a recipient of {}: it was encrypted to other keys",
                stream.display()
            ),
            e => anyhow::anyhow!("decrypting {}: {e}", stream.display()),
        })?;
    Ok(backup::restore(clear, data_dir, Repo::layout(), chrono::Utc::now())?)
}

/// Releases the SPI rail of the stopped server's data dir `data_dir` that a restore or a
/// migration held; answers why it was held (`None`: it was not).
pub fn release_rail(data_dir: &Path) -> anyhow::Result<Option<String>> {
    let db = data_dir.join("db");
    if !db.exists() {
        bail!("{} holds no pixgw store (no db/)", data_dir.display());
    }
    let store = crate::store::SledStore::open(&db)
        .with_context(|| format!("opening {} (is a server running on it? stop it first)", db.display()))?;
    use crate::store::Store;
    let held = store.get(crate::store::keys::RAIL_HELD)?;
    if held.is_some() {
        let mut b = crate::store::Batch::default();
        b.delete(crate::store::keys::RAIL_HELD);
        store.apply(&b)?;
        store.flush()?;
    }
    Ok(held.map(|v| String::from_utf8_lossy(&v).into_owned()))
}

/// Where `pixgw migrate` reads from.
enum Source {
    DataDir(PathBuf),
    Backup(PathBuf),
}

/// Moves the data dir (or backup) `from` into the empty database at `to`; answers the rows
/// written. A backup is first restored into a temporary data dir beside nothing else.
pub fn migrate(from: &Path, to: &PgUrl, identity: Option<&Path>) -> anyhow::Result<u64> {
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
            restore(&b, &scratch, identity).with_context(|| format!("reading the backup {}", b.display()))?;
            (scratch.clone(), Some(scratch))
        }
    };
    let mut failed = None;
    let read = backup::read_stopped_data_dir(&dir, Repo::layout(), &mut |k, v| {
        // Held again below, with this migration's reason.
        if k == crate::store::keys::RAIL_HELD {
            return Ok(());
        }
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
    // The store moved from may still be served: the new one's rail waits for an operator.
    let why = format!("migrated on {} from {}", chrono::Utc::now().to_rfc3339(), from.display());
    import
        .put(crate::store::keys::RAIL_HELD, why.as_bytes())
        .with_context(|| format!("writing into {to}"))?;
    let rows = import.finish().with_context(|| format!("committing into {to}"))?;
    Ok(rows)
}
