//! Creating a KVDB: only in an empty home, every media directory empty and given its identity,
//! the manifest written last (its presence marks the creation complete).

use super::dirs::{first_entry_but, place, random_id, read_dir, LOCK_FILE_NAME};
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::manifest::{KvdbState, Manifest, MediaDirs};
use crate::media::MediaClass;
use crate::options::Options;
use crate::poison::Poison;
use std::path::Path;
use std::sync::Arc;

/// A new KVDB in `home`: every media directory empty, given its identity, then the manifest
/// (whose presence marks the creation complete).
pub fn create(home: &Path, options: &Options, poison: Arc<Poison>) -> Result<Manifest> {
    let kvdb_id = random_id();
    let capacity = options
        .capacity_dir
        .clone()
        .unwrap_or_else(|| home.join(MediaClass::Capacity.name()));
    let mut stored = Vec::new();
    let requested = [
        (MediaClass::Capacity, Some(capacity)),
        (MediaClass::Staging, options.staging_dir.clone()),
    ];
    for (class, dir) in requested {
        let Some(dir) = dir else {
            stored.push(None);
            continue;
        };
        std::fs::create_dir_all(&dir)
            .map_err(|error| Error::io(format!("create {}", dir.display()), error))?;
        if let Some(stray) = first_entry_but(&dir, &[crate::identity::FILE_NAME, LOCK_FILE_NAME])? {
            return Err(Error::InvalidArgument(format!(
                "the {} directory {} for the new KVDB {} is not empty (it holds {stray}); \
                 give an empty directory",
                class.name(),
                dir.display(),
                home.display()
            )));
        }
        let (relative, owner_home) = place(home, &dir)?;
        Identity {
            kvdb_id,
            class,
            owner_home,
        }
        .store(&dir)?;
        stored.push(Some(relative));
    }
    let media = MediaDirs {
        capacity_dir: stored[0].clone().expect("capacity is always given"),
        staging_dir: stored[1].clone(),
        staging_bytes_max: options.staging_bytes_max,
    };
    Manifest::create(home, KvdbState::new(kvdb_id, media), poison)
}

/// Whether `home` holds nothing but the remains of a creation that never wrote its manifest:
/// its LOCK, and media directories holding at most their identity and lock.
pub fn holds_only_an_unfinished_creation(home: &Path) -> Result<bool> {
    let allowed = [LOCK_FILE_NAME, crate::identity::FILE_NAME];
    for entry in read_dir(home)? {
        let name = entry.file_name();
        if allowed.iter().any(|allowed| name == *allowed) {
            continue;
        }
        let is_empty_media_dir = name == MediaClass::Capacity.name()
            && entry.path().is_dir()
            && first_entry_but(&entry.path(), &allowed)?.is_none();
        if !is_empty_media_dir {
            return Ok(false);
        }
    }
    Ok(true)
}
