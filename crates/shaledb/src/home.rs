//! The KVDB's home directory: its `LOCK` (held while a process has the KVDB open) and the media
//! directories the KVDB was created with.

use crate::catalog::MediaDirs;
use crate::error::{Error, Result};
use crate::media::MediaClass;
use crate::options::Options;
use std::fs::File;
use std::path::Path;

const LOCK_FILE_NAME: &str = "LOCK";

/// The KVDB's media classes: those it was created with, or, for a new KVDB, those `options` give.
pub fn resolve_media(
    home: &Path,
    options: &Options,
    remembered: Option<&MediaDirs>,
) -> Result<MediaDirs> {
    let requested = MediaDirs {
        capacity_dir: options
            .capacity_dir
            .clone()
            .unwrap_or_else(|| home.join(MediaClass::Capacity.name())),
        staging_dir: options.staging_dir.clone(),
        staging_bytes_max: options.staging_bytes_max,
    };
    let Some(remembered) = remembered else {
        return Ok(requested);
    };
    let conflict = |what: &str, was: Option<&Path>, asked: Option<&Path>| {
        Error::InvalidArgument(format!(
            "KVDB {} was created with {what} {:?}, not {:?}; media classes are fixed at creation",
            home.display(),
            was,
            asked
        ))
    };
    if options.capacity_dir.is_some()
        && options.capacity_dir.as_deref() != Some(remembered.capacity_dir.as_path())
    {
        return Err(conflict(
            "capacity directory",
            Some(&remembered.capacity_dir),
            options.capacity_dir.as_deref(),
        ));
    }
    if options.staging_dir.is_some() && options.staging_dir != remembered.staging_dir {
        return Err(conflict(
            "staging directory",
            remembered.staging_dir.as_deref(),
            options.staging_dir.as_deref(),
        ));
    }
    Ok(MediaDirs {
        // The budget may change between opens; the directories may not.
        staging_bytes_max: if options.staging_dir.is_some() {
            options.staging_bytes_max
        } else {
            remembered.staging_bytes_max
        },
        ..remembered.clone()
    })
}

pub fn lock_home(home: &Path) -> Result<File> {
    let path = home.join(LOCK_FILE_NAME);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|error| Error::io(format!("open {}", path.display()), error))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(home.to_path_buf())),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(Error::io(format!("lock {}", path.display()), error))
        }
    }
}
