//! Files pixgw writes are its own: every process of it creates files and directories that
//! only its user can read (a data dir holds sled's snapshot and the journal, with webhook
//! secrets and the token-signing key; a backup holds all of it), and a data dir made by an
//! earlier release, when files were created group- and world-readable, is tightened at
//! start.

use std::path::Path;

/// Permission bits no file pixgw creates may carry: none for the group or others.
pub const CREATION_MASK: u32 = 0o077;

/// Makes every file and directory this process creates from now owner-only (the process
/// umask; no code of ours has to remember a mode).
pub fn owner_only_from_now() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(CREATION_MASK));
}

/// Writes a new file (refusing one that exists) readable by its owner alone, synced.
pub fn write_new_secret_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts.open(path).map_err(|e| anyhow::anyhow!("creating {}: {e}", path.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}

/// Whether a file's group and others have no access to it (always true off Unix).
pub fn is_owner_only(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & CREATION_MASK == 0)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        true
    }
}

/// Takes the group's and others' permissions off `dir` and everything under it; answers
/// how many entries it changed. Symbolic links are left alone (their target is not ours to
/// change).
pub fn tighten(dir: &Path) -> std::io::Result<usize> {
    use std::os::unix::fs::PermissionsExt;
    let mut changed = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode();
        if mode & CREATION_MASK != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & !CREATION_MASK & 0o7777))?;
            changed += 1;
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                pending.push(entry?.path());
            }
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_data_dir_of_an_earlier_release_is_tightened_to_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("db");
        std::fs::create_dir(&sub).unwrap();
        let file = sub.join("snap");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(tighten(dir.path()).unwrap(), 2);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&sub), mode(&file)), (0o700, 0o600));
        assert_eq!(tighten(dir.path()).unwrap(), 0, "nothing left to change");
    }
}
