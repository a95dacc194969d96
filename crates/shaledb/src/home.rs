//! The KVDB's home and media directories: creating a KVDB (only in an empty home), opening its
//! manifest, locking every directory, and checking that each media directory is the one the
//! KVDB was created with (its identity file), so an empty, unmounted, foreign or shared
//! directory is a clear error rather than a KVDB that silently lacks its data.

use crate::error::{Error, ErrorKind, Result};
use crate::identity::Identity;
use crate::legacy::LegacyCatalog;
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::manifest::{self, Edit, KvdbState, LoadReport, Manifest, MediaDirs, SegmentEntry};
use crate::media::{remove_file_durably, set_file_aside, MediaClass, MediaCounters, SegmentFile};
use crate::options::Options;
use crate::poison::Poison;
use crate::segment::{list_segment_files, SegmentHeader};
use std::collections::hash_map::RandomState;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const LOCK_FILE_NAME: &str = "LOCK";

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
    pub report: HomeReport,
    /// Changes the open found due, made by `finish_open` once the KVDB opened: an open that
    /// fails writes nothing.
    pending: Pending,
    /// Held until the home is dropped.
    _locks: Vec<File>,
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
        let mut locks = vec![lock_dir(path, options.read_only)?];
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
        let media = {
            let state = manifest.state();
            check_requested_dirs(path, options, &state.media)?;
            state.media.classes(path)
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
            locks.push(lock_dir(dir, options.read_only)?);
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

    /// Where index checkpoints live: the fastest class present.
    pub fn checkpoint_dir(&self) -> &Path {
        self.staging_dir().unwrap_or(self.capacity_dir())
    }
}

/// A new KVDB in `home`: every media directory empty, given its identity, then the manifest
/// (whose presence marks the creation complete).
fn create(home: &Path, options: &Options, poison: Arc<Poison>) -> Result<Manifest> {
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

/// Upgrades a KVDB written before the manifest: its catalog's KVSs and media directories, and
/// every segment file found, recorded unsealed (recovery scans and seals them, as it does the
/// active segments after a crash). The catalog is kept beside, renamed.
fn upgrade(home: &Path, options: &Options, poison: Arc<Poison>) -> Result<Manifest> {
    let legacy = LegacyCatalog::load(home)?;
    let kvdb_id = random_id();
    let capacity = match (&options.capacity_dir, &legacy.capacity_dir) {
        (Some(asked), _) => asked.clone(),
        (None, Some(old)) => legacy_dir(home, old)?,
        (None, None) => home.join(MediaClass::Capacity.name()),
    };
    let mut media_dirs = vec![(MediaClass::Capacity, capacity)];
    if let Some(staging) = options.staging_dir.clone().or(legacy.staging_dir.clone()) {
        media_dirs.push((MediaClass::Staging, legacy_dir(home, &staging)?));
    }
    let mut stored = Vec::new();
    for (class, dir) in &media_dirs {
        std::fs::create_dir_all(dir)
            .map_err(|error| Error::io(format!("create {}", dir.display()), error))?;
        let (relative, owner_home) = place(home, dir)?;
        Identity {
            kvdb_id,
            class: *class,
            owner_home,
        }
        .store(dir)?;
        stored.push(relative);
    }
    let mut state = KvdbState::new(
        kvdb_id,
        MediaDirs {
            capacity_dir: stored[0].clone(),
            staging_dir: stored.get(1).cloned(),
            staging_bytes_max: legacy
                .staging_bytes_max
                .unwrap_or(options.staging_bytes_max),
        },
    );
    let mut edits = vec![Edit::NextIds {
        next_kvs_id: legacy.next_kvs_id,
        next_segment_id: 1,
    }];
    for (id, name, kvs_options) in legacy.kvs {
        edits.push(Edit::KvsCreated {
            id,
            name,
            options: kvs_options,
        });
    }
    for (class, dir) in &media_dirs {
        for (id, path) in list_segment_files(dir)? {
            let counters = Arc::new(MediaCounters::default());
            let file = SegmentFile::open(&*options.storage(), &path, false, counters)?;
            if file.len_bytes()? < SEGMENT_HEADER_BYTES {
                // Its creation never completed: the old engine removed such files too.
                remove_file_durably(&path)?;
                continue;
            }
            let header = SegmentHeader::read(&file, &path)?;
            edits.push(Edit::SegmentCreated {
                id,
                class: *class,
                head: header.head,
                created_seqno: header.created_seqno,
            });
        }
    }
    for edit in &edits {
        state.apply(edit).map_err(|why| {
            Error::corruption(
                LegacyCatalog::path(home),
                0,
                format!("the old catalog and segments do not agree: {why}"),
            )
        })?;
    }
    let manifest = Manifest::create(home, state, poison)?;
    LegacyCatalog::retire(home)?;
    tracing::warn!(home = %home.display(), "upgraded a KVDB written before the manifest");
    Ok(manifest)
}

/// Where a directory an old catalog named is now. Old catalogs stored paths as given, so a
/// relative one was relative to the working directory of that time: it is looked for as the
/// same-named directory inside the home (where the old default put it) and there.
fn legacy_dir(home: &Path, stored: &Path) -> Result<PathBuf> {
    if stored.is_absolute() {
        return Ok(stored.to_path_buf());
    }
    let inside_home = stored.file_name().map(|name| home.join(name));
    inside_home
        .into_iter()
        .chain([stored.to_path_buf()])
        .find(|candidate| candidate.is_dir())
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the old catalog of {} names the media directory {} relative to the working \
                 directory it was created from; open it from there, or give the directory",
                home.display(),
                stored.display()
            ))
        })
}

/// Salvage: a new manifest for `home`, whose own is lost or damaged. What its readable records
/// say is kept (identity, media directories, KVSs, seals); the segments are the segment files
/// found in the media directories (recovery scans those it knows no seal of, and names KVSs it
/// finds records of but no name for `salvaged-kvs-ID`). A damaged manifest is set aside.
fn rebuild(home: &Path, options: &Options, poison: Arc<Poison>) -> Result<(Manifest, String)> {
    let prefix = manifest::readable_prefix(home);
    let found_prefix = prefix.is_some();
    let mut state = match prefix {
        Some(state) => state,
        None => {
            let capacity = options
                .capacity_dir
                .clone()
                .unwrap_or_else(|| home.join(MediaClass::Capacity.name()));
            let kvdb_id = Identity::load(&capacity)
                .ok()
                .flatten()
                .map_or_else(random_id, |identity| identity.kvdb_id);
            let staging = match &options.staging_dir {
                Some(dir) => Some(place(home, dir)?.0),
                None => None,
            };
            let media = MediaDirs {
                capacity_dir: place(home, &capacity)?.0,
                staging_dir: staging,
                staging_bytes_max: options.staging_bytes_max,
            };
            KvdbState::new(kvdb_id, media)
        }
    };
    let recorded = std::mem::take(&mut state.segments);
    state.freeing.clear();
    let mut found = 0;
    for (class, dir) in state.media.classes(home) {
        for (id, path) in list_segment_files(&dir)? {
            let counters = Arc::new(MediaCounters::default());
            let file = SegmentFile::open(&*options.storage(), &path, false, counters)?;
            // An unreadable header: recovery meets the file as unexpected and sets it aside.
            let Ok(header) = SegmentHeader::read(&file, &path) else {
                continue;
            };
            if header.class != class || header.id != id || state.segments.contains_key(&id) {
                continue;
            }
            let known = recorded.get(&id).filter(|entry| {
                (entry.class, entry.head, entry.created_seqno)
                    == (header.class, header.head, header.created_seqno)
            });
            state.segments.insert(
                id,
                known.copied().unwrap_or(SegmentEntry {
                    class,
                    head: header.head,
                    created_seqno: header.created_seqno,
                    seal: None,
                    durable_end: 0,
                }),
            );
            state.next_segment_id = state.next_segment_id.max(id.0 + 1);
            found += 1;
        }
    }
    let old = home.join(manifest::FILE_NAME);
    if old.exists() {
        set_file_aside(&old)?;
    }
    let note = format!(
        "the manifest was rebuilt from {} and the {found} segment files found",
        if found_prefix {
            "its readable records"
        } else {
            "nothing of it (KVS names found in no record are lost)"
        }
    );
    Ok((Manifest::create(home, state, poison)?, note))
}

/// Whether `dir`'s identity may be written anew in a salvage: it holds segment files, and no
/// readable identity of another KVDB.
fn repairable_identity(dir: &Path) -> Result<bool> {
    let foreign_or_fine = matches!(Identity::load(dir), Ok(Some(_)));
    Ok(!foreign_or_fine && !list_segment_files(dir)?.is_empty())
}

/// Whether `home` holds nothing but the remains of a creation that never wrote its manifest:
/// its LOCK, and media directories holding at most their identity and lock.
fn holds_only_an_unfinished_creation(home: &Path) -> Result<bool> {
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

/// The media directories the caller asked for must be the ones the KVDB was created with.
fn check_requested_dirs(home: &Path, options: &Options, media: &MediaDirs) -> Result<()> {
    let same = |asked: &Path, stored: &Path| match (asked.canonicalize(), stored.canonicalize()) {
        (Ok(asked), Ok(stored)) => asked == stored,
        _ => asked == stored,
    };
    let conflict = |what: &str, was: Option<PathBuf>, asked: Option<&PathBuf>| {
        Error::InvalidArgument(format!(
            "KVDB {} was created with {what} {:?}, not {:?}; media classes are fixed at creation",
            home.display(),
            was,
            asked
        ))
    };
    if let Some(asked) = &options.capacity_dir {
        if !same(asked, &media.capacity(home)) {
            return Err(conflict(
                "capacity directory",
                Some(media.capacity(home)),
                Some(asked),
            ));
        }
    }
    if let Some(asked) = &options.staging_dir {
        match media.staging(home) {
            Some(stored) if same(asked, &stored) => {}
            stored => return Err(conflict("staging directory", stored, Some(asked))),
        }
    }
    Ok(())
}

/// The media directories with the staging budget `options` give, when a staging directory was
/// given and its budget differs from the stored one (the budget may change between opens).
fn changed_staging_budget(options: &Options, media: &MediaDirs) -> Option<MediaDirs> {
    (options.staging_dir.is_some() && options.staging_bytes_max != media.staging_bytes_max).then(
        || MediaDirs {
            staging_bytes_max: options.staging_bytes_max,
            ..media.clone()
        },
    )
}

/// Checks that `dir` is the `class` directory of KVDB `kvdb_id` in `home`. A directory outside
/// the home that names another home as owner is refused when that home still holds this KVDB
/// (this home is a copy sharing the original's directory), and is to be adopted otherwise (the
/// home was moved): returns its identity then.
fn check_identity(
    home: &Path,
    dir: &Path,
    class: MediaClass,
    kvdb_id: u64,
) -> Result<Option<Identity>> {
    let Some(identity) = Identity::load(dir)? else {
        let why = match first_entry_but(dir, &[LOCK_FILE_NAME])? {
            None => "it is empty: is the right device mounted there?".to_string(),
            Some(entry) => format!("it has no identity file (it holds {entry})"),
        };
        return Err(Error::corruption(
            dir.join(crate::identity::FILE_NAME),
            0,
            format!(
                "the {} directory of KVDB {} is not this KVDB's: {why}",
                class.name(),
                home.display()
            ),
        ));
    };
    let mismatch = |why: String| {
        Error::corruption(
            dir.join(crate::identity::FILE_NAME),
            0,
            format!(
                "the {} directory of KVDB {}: {why}",
                class.name(),
                home.display()
            ),
        )
    };
    if identity.kvdb_id != kvdb_id {
        return Err(mismatch(format!(
            "it belongs to another KVDB ({:016x}, not {kvdb_id:016x})",
            identity.kvdb_id
        )));
    }
    if identity.class != class {
        return Err(mismatch(format!(
            "it is a {} directory",
            identity.class.name()
        )));
    }
    let Some(owner) = &identity.owner_home else {
        return Ok(None);
    };
    let canonical_home = canonical(home)?;
    if *owner == canonical_home {
        return Ok(None);
    }
    let owner_still_holds_it = matches!(
        Manifest::open(owner, true, Arc::new(Poison::default())),
        Ok(Some((other, _))) if other.state().kvdb_id == kvdb_id
    );
    if owner_still_holds_it {
        return Err(Error::InvalidArgument(format!(
            "the {} directory {} belongs to the KVDB at {}, and {} is a copy of it that would \
             share it; copy a KVDB with `shale backup DEST` (or copy its media directories too \
             and create the copy's with new paths)",
            class.name(),
            dir.display(),
            owner.display(),
            home.display()
        )));
    }
    Ok(Some(identity))
}

/// How the manifest stores `dir`: relative when inside `home`, else absolute and canonical;
/// and the owner home its identity names (`None` inside the home).
fn place(home: &Path, dir: &Path) -> Result<(PathBuf, Option<PathBuf>)> {
    let (home, dir) = (canonical(home)?, canonical(dir)?);
    match dir.strip_prefix(&home) {
        Ok(relative) if !relative.as_os_str().is_empty() => Ok((relative.to_path_buf(), None)),
        _ => Ok((dir.clone(), Some(home))),
    }
}

fn canonical(path: &Path) -> Result<PathBuf> {
    path.canonicalize()
        .map_err(|error| Error::io(format!("resolve {}", path.display()), error))
}

fn read_dir(dir: &Path) -> Result<Vec<std::fs::DirEntry>> {
    let list = |error| Error::io(format!("list {}", dir.display()), error);
    std::fs::read_dir(dir)
        .map_err(list)?
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(list)
}

/// The name of an entry of `dir` other than `except`, if there is one.
fn first_entry_but(dir: &Path, except: &[&str]) -> Result<Option<String>> {
    Ok(read_dir(dir)?
        .into_iter()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .find(|name| !except.contains(&name.as_str())))
}

/// Locks `dir/LOCK` (exclusive, or shared when read-only) for as long as the file is held.
fn lock_dir(dir: &Path, read_only: bool) -> Result<File> {
    let path = dir.join(LOCK_FILE_NAME);
    let opened = if read_only {
        std::fs::File::open(&path)
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
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(Error::io(format!("lock {}", path.display()), error))
        }
    }
}

/// A random 64-bit id, from the operating system's randomness behind `RandomState`.
fn random_id() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(std::process::id().into());
    hasher.finish()
}
