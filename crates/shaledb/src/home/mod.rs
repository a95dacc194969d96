//! The KVDB's home and media directories: creating a KVDB (only in an empty home), opening its
//! manifest, locking every directory, and checking that each media directory is the one the
//! KVDB was created with (its identity file), so an empty, unmounted, foreign or shared
//! directory is a clear error rather than a KVDB that silently lacks its data.

mod checks;
mod create;
mod dirs;
mod rebuild;
mod upgrade;

use crate::error::{Error, ErrorKind, Result};
use crate::identity::Identity;
use crate::legacy::LegacyCatalog;
use crate::manifest::{self, Edit, LoadReport, Manifest, MediaDirs};
use crate::media::MediaClass;
use crate::options::Options;
use crate::poison::Poison;
use checks::{changed_staging_budget, check_identity, check_requested_dirs};
pub use create::NewKvdb;
use create::{create, holds_only_an_unfinished_creation};
use dirs::{canonical, lock_dir, place, DirLock};
use rebuild::{rebuild, repairable_identity};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use upgrade::upgrade;

/// What opening the home did, for the recovery report.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HomeReport {
    /// The KVDB was created by this open.
    pub created: bool,
    /// The KVDB was written by a ShaleDB without a manifest and was upgraded.
    pub upgraded_from_catalog: bool,
    /// The manifest's last edit was torn by a crash (and cut off); where.
    pub manifest_torn_tail: Option<String>,
    /// Media directories outside the home that were moved with it and now name it as owner.
    pub adopted_dirs: Vec<String>,
    /// In a salvage: the damage found here (a lost or damaged manifest, a damaged identity)
    /// and what was done about it.
    pub salvaged: Vec<String>,
}

/// An open home: its manifest, its media directories (absolute), and the locks held on all.
pub struct Home {
    pub path: PathBuf,
    pub manifest: Arc<Manifest>,
    /// Every media directory with its class, capacity first.
    pub media: Vec<(MediaClass, PathBuf)>,
    /// Where index checkpoints live: the fastest class present.
    checkpoint_dir: PathBuf,
    pub report: HomeReport,
    /// Changes the open found due, made by `finish_open` once the KVDB opened: an open that
    /// fails writes nothing.
    pending: Pending,
    /// Held until the home is dropped.
    _locks: Vec<DirLock>,
}

#[derive(Default)]
struct Pending {
    /// A new staging budget to record.
    media: Option<MediaDirs>,
    /// Media directories a moved home adopts: their identity, naming the new owner.
    adoptions: Vec<(PathBuf, Identity)>,
}

impl Home {
    /// Opens (or, in an empty home, creates) the KVDB in `path`.
    pub fn open(path: &Path, options: &Options, poison: Arc<Poison>) -> Result<Home> {
        let may_create = options.create_if_missing && !options.read_only;
        if may_create {
            std::fs::create_dir_all(path)
                .map_err(|error| Error::io(format!("create {}", path.display()), error))?;
        } else if !path.is_dir() {
            return Err(Error::KvdbNotFound(path.to_path_buf()));
        }
        let mut locks: Vec<DirLock> = lock_dir(path, options.read_only)?.into_iter().collect();
        let mut report = HomeReport::default();
        let loaded = match Manifest::open(path, options.read_only, poison.clone()) {
            Err(error) if options.salvage && error.kind() == ErrorKind::Corruption => {
                report.salvaged.push(error.to_string());
                let (manifest, note) = rebuild(path, options, poison.clone())?;
                report.salvaged.push(note);
                Some((manifest, LoadReport::default()))
            }
            loaded => loaded?,
        };
        let manifest = match loaded {
            Some((manifest, LoadReport { torn_tail, .. })) => {
                report.manifest_torn_tail = torn_tail;
                manifest
            }
            None if LegacyCatalog::exists(path) => {
                if options.read_only {
                    return Err(Error::InvalidArgument(format!(
                        "KVDB {} was written by an older ShaleDB (catalog.json, no manifest); \
                         open it once without read-only to upgrade it",
                        path.display()
                    )));
                }
                report.upgraded_from_catalog = true;
                upgrade(path, options, poison)?
            }
            None if holds_only_an_unfinished_creation(path)? => {
                if !may_create {
                    return Err(Error::KvdbNotFound(path.to_path_buf()));
                }
                report.created = true;
                create(path, options, poison)?
            }
            None if options.salvage => {
                report.salvaged.push(format!(
                    "{}: missing",
                    path.join(manifest::FILE_NAME).display()
                ));
                let (manifest, note) = rebuild(path, options, poison)?;
                report.salvaged.push(note);
                manifest
            }
            None => {
                return Err(Error::corruption(
                    path.join(manifest::FILE_NAME),
                    0,
                    "the home holds files but no manifest: the manifest was lost, or this is \
                     not a KVDB (nothing is created here; a KVDB is created only in an empty \
                     directory; `shale salvage` rebuilds a lost manifest from the segments)",
                ))
            }
        };
        let (media, checkpoint_dir) = {
            let state = manifest.state();
            check_requested_dirs(path, options, &state.media)?;
            (state.media.classes(path), state.media.checkpoint_dir(path))
        };
        let mut pending = Pending {
            media: changed_staging_budget(options, &manifest.state().media),
            adoptions: Vec::new(),
        };
        let kvdb_id = manifest.state().kvdb_id;
        for (class, dir) in &media {
            if !dir.is_dir() {
                return Err(Error::InvalidArgument(format!(
                    "the {} directory {} of KVDB {} is missing: is its device mounted?",
                    class.name(),
                    dir.display(),
                    path.display()
                )));
            }
            locks.extend(lock_dir(dir, options.read_only)?);
            let checked = match check_identity(path, dir, *class, kvdb_id) {
                Err(error) if options.salvage && repairable_identity(dir)? => {
                    // The directory holds segment files but its identity is lost or damaged:
                    // it is given this KVDB's again (a foreign id is never overridden).
                    report
                        .salvaged
                        .push(format!("{error}; its identity is written anew"));
                    let (_, owner_home) = place(path, dir)?;
                    pending.adoptions.push((
                        dir.clone(),
                        Identity {
                            kvdb_id,
                            class: *class,
                            owner_home,
                        },
                    ));
                    None
                }
                checked => checked?,
            };
            if let Some(adopted) = checked {
                report.adopted_dirs.push(format!(
                    "{} (was owned by {})",
                    dir.display(),
                    adopted
                        .owner_home
                        .as_ref()
                        .map_or("?".into(), |old| old.display().to_string())
                ));
                pending.adoptions.push((dir.clone(), adopted));
            }
        }
        Ok(Home {
            path: path.to_path_buf(),
            manifest: Arc::new(manifest),
            media,
            checkpoint_dir,
            report,
            pending,
            _locks: locks,
        })
    }

    /// Makes the changes the open found due (a new staging budget, directories a moved home
    /// adopts); called once the KVDB opened, never by a read-only open.
    pub fn finish_open(&mut self) -> Result<()> {
        if let Some(media) = self.pending.media.take() {
            self.manifest.record(&Edit::Media(media))?;
        }
        let owner = canonical(&self.path)?;
        for (dir, identity) in self.pending.adoptions.drain(..) {
            Identity {
                owner_home: identity.owner_home.as_ref().map(|_| owner.clone()),
                ..identity
            }
            .store(&dir)?;
        }
        Ok(())
    }

    pub fn capacity_dir(&self) -> &Path {
        &self.media[0].1
    }

    pub fn staging_dir(&self) -> Option<&Path> {
        self.media.get(1).map(|(_, dir)| dir.as_path())
    }

    pub fn checkpoint_dir(&self) -> &Path {
        &self.checkpoint_dir
    }
}
