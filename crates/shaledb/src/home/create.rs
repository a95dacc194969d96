//! Creating a KVDB: only in an empty home, every media directory empty and given its identity,
//! the manifest written last (its presence marks the creation complete).

use super::dirs::{first_entry_but, lock_dir, place, random_id, read_dir, DirLock, LOCK_FILE_NAME};
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::manifest::{KvdbState, Manifest, MediaDirs};
use crate::media::temporary_name;
use crate::media::MediaClass;
use crate::options::Options;
use crate::poison::Poison;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A new KVDB in `home`: every media directory empty, given its identity, then the manifest
/// (whose presence marks the creation complete).
pub fn create(home: &Path, options: &Options, poison: Arc<Poison>) -> Result<Manifest> {
    let capacity = options
        .capacity_dir
        .clone()
        .unwrap_or_else(|| home.join(MediaClass::Capacity.name()));
    let new = NewKvdb::prepare(
        home,
        capacity,
        options.staging_dir.clone(),
        options.staging_bytes_max,
    )?;
    let state = KvdbState::new(new.kvdb_id, new.media.clone());
    new.finish(state, poison)
}

/// A KVDB being made: its id chosen, its media directories made, empty and given their
/// identity. It is a KVDB only once [`NewKvdb::finish`] wrote its manifest; until then an open
/// finds no KVDB there.
pub struct NewKvdb {
    home: PathBuf,
    pub kvdb_id: u64,
    /// As the manifest stores them.
    pub media: MediaDirs,
    /// The home's lock, when this made the home (an open holds it otherwise).
    _lock: Option<DirLock>,
}

impl NewKvdb {
    /// Makes the media directories of a new KVDB in `home`, each of which must be missing or
    /// empty.
    fn prepare(
        home: &Path,
        capacity: PathBuf,
        staging: Option<PathBuf>,
        staging_bytes_max: u64,
    ) -> Result<NewKvdb> {
        let kvdb_id = random_id();
        let mut stored = Vec::new();
        for (class, dir) in [
            (MediaClass::Capacity, Some(capacity)),
            (MediaClass::Staging, staging),
        ] {
            let Some(dir) = dir else {
                stored.push(None);
                continue;
            };
            std::fs::create_dir_all(&dir)
                .map_err(|error| Error::io(format!("create {}", dir.display()), error))?;
            if let Some(stray) = first_stray_in_media_dir(&dir)? {
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
        Ok(NewKvdb {
            home: home.to_path_buf(),
            kvdb_id,
            media: MediaDirs {
                capacity_dir: stored[0].clone().expect("capacity is always given"),
                staging_dir: stored[1].clone(),
                staging_bytes_max,
            },
            _lock: None,
        })
    }

    /// A new KVDB in `home`, which must be missing or an empty directory (a backup's
    /// destination), with its media directories inside it; the home is locked until finished.
    pub fn in_empty_home(
        home: &Path,
        with_staging: bool,
        staging_bytes_max: u64,
    ) -> Result<NewKvdb> {
        std::fs::create_dir_all(home)
            .map_err(|error| Error::io(format!("create {}", home.display()), error))?;
        if let Some(stray) = first_entry_but(home, &[])? {
            return Err(Error::InvalidArgument(format!(
                "{} is not empty (it holds {stray}): a new KVDB is made only in a missing or \
                 empty directory",
                home.display()
            )));
        }
        let lock = lock_dir(home, false)?;
        let staging = with_staging.then(|| home.join(MediaClass::Staging.name()));
        let new = NewKvdb::prepare(
            home,
            home.join(MediaClass::Capacity.name()),
            staging,
            staging_bytes_max,
        )?;
        Ok(NewKvdb { _lock: lock, ..new })
    }

    /// The media directory of `class`, absolute, if the KVDB has one.
    pub fn dir(&self, class: MediaClass) -> Option<PathBuf> {
        self.media
            .classes(&self.home)
            .into_iter()
            .find(|(present, _)| *present == class)
            .map(|(_, dir)| dir)
    }

    /// Where the new KVDB's index checkpoint goes.
    pub fn checkpoint_dir(&self) -> PathBuf {
        self.media.checkpoint_dir(&self.home)
    }

    /// Writes the manifest holding `state` under this KVDB's id and media directories: from
    /// now on the home is a KVDB.
    pub fn finish(self, state: KvdbState, poison: Arc<Poison>) -> Result<Manifest> {
        let state = KvdbState {
            kvdb_id: self.kvdb_id,
            media: self.media,
            ..state
        };
        Manifest::create(&self.home, state, poison)
    }
}

/// Whether `home` holds nothing but the remains of a creation that never wrote its manifest:
/// its LOCK, the temporary of its manifest, and media directories holding at most their
/// identity (or its temporary) and lock.
pub fn holds_only_an_unfinished_creation(home: &Path) -> Result<bool> {
    // The manifest's temporary, as the identity's (`creation_files`).
    let manifest_temporary = temporary_name(crate::manifest::FILE_NAME);
    let creation_files = creation_files();
    for entry in read_dir(home)? {
        let name = entry.file_name();
        if creation_files.iter().any(|file| name == file.as_str()) || name == *manifest_temporary {
            continue;
        }
        let is_empty_media_dir = name == MediaClass::Capacity.name()
            && entry.path().is_dir()
            && first_stray_in_media_dir(&entry.path())?.is_none();
        if !is_empty_media_dir {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What a creation puts in a media directory before its manifest: its lock, its identity, and
/// the identity's temporary, which a creation killed while writing it leaves unrenamed
/// (`replace_file_durably`) and the next creation writes again.
fn creation_files() -> [String; 3] {
    [
        LOCK_FILE_NAME.to_string(),
        crate::identity::FILE_NAME.to_string(),
        temporary_name(crate::identity::FILE_NAME),
    ]
}

/// The first entry of `dir` that no creation put there.
fn first_stray_in_media_dir(dir: &Path) -> Result<Option<String>> {
    let files = creation_files();
    first_entry_but(dir, &files.each_ref().map(String::as_str))
}
