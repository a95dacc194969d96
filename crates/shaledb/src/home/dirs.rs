//! Directory helpers of the home: where a media directory is stored, locks, listing, ids.

use crate::error::{Error, Result};
use std::collections::hash_map::RandomState;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};

pub const LOCK_FILE_NAME: &str = "LOCK";

/// How the manifest stores `dir`: relative when inside `home`, else absolute and canonical;
/// and the owner home its identity names (`None` inside the home).
pub fn place(home: &Path, dir: &Path) -> Result<(PathBuf, Option<PathBuf>)> {
    let (home, dir) = (canonical(home)?, canonical(dir)?);
    match dir.strip_prefix(&home) {
        Ok(relative) if !relative.as_os_str().is_empty() => Ok((relative.to_path_buf(), None)),
        _ => Ok((dir.clone(), Some(home))),
    }
}

pub fn canonical(path: &Path) -> Result<PathBuf> {
    path.canonicalize()
        .map_err(|error| Error::io(format!("resolve {}", path.display()), error))
}

pub fn read_dir(dir: &Path) -> Result<Vec<std::fs::DirEntry>> {
    let list = |error| Error::io(format!("list {}", dir.display()), error);
    std::fs::read_dir(dir)
        .map_err(list)?
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(list)
}

/// The name of an entry of `dir` other than `except`, if there is one.
pub fn first_entry_but(dir: &Path, except: &[&str]) -> Result<Option<String>> {
    Ok(read_dir(dir)?
        .into_iter()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .find(|name| !except.contains(&name.as_str())))
}

/// A lock on a directory's `LOCK` file, released when dropped.
pub struct DirLock(File);

impl Drop for DirLock {
    /// Unlocks before closing: the lock belongs to the open file description, and a child that
    /// another thread is forking holds a copy of the descriptor until its exec, so closing ours
    /// alone could leave the directory locked after the KVDB closed.
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Locks `dir/LOCK` (exclusive, or shared when read-only) for as long as the lock is held.
/// A read-only open of a directory without a `LOCK` (one on a read-only file system that no
/// writer ever opened) takes no lock: no writer can be there.
pub fn lock_dir(dir: &Path, read_only: bool) -> Result<Option<DirLock>> {
    let path = dir.join(LOCK_FILE_NAME);
    let opened = if read_only {
        match std::fs::File::open(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            opened => opened,
        }
    } else {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
    };
    let file = opened.map_err(|error| Error::io(format!("open {}", path.display()), error))?;
    let locked = if read_only {
        file.try_lock_shared()
    } else {
        file.try_lock()
    };
    match locked {
        Ok(()) => Ok(Some(DirLock(file))),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(Error::io(format!("lock {}", path.display()), error))
        }
    }
}

/// A random 64-bit id, from the operating system's randomness behind `RandomState`.
pub fn random_id() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(std::process::id().into());
    hasher.finish()
}
