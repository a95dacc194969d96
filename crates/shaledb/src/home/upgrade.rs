//! Upgrading a KVDB written before the manifest (`catalog.json`).

use super::dirs::{place, random_id};
use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::legacy::LegacyCatalog;
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::manifest::{Edit, KvdbState, Manifest, MediaDirs};
use crate::media::{remove_file_durably, MediaClass, MediaCounters, SegmentFile};
use crate::options::Options;
use crate::poison::Poison;
use crate::segment::{list_segment_files, SegmentHeader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Upgrades a KVDB written before the manifest: its catalog's KVSs and media directories, and
/// every segment file found, recorded unsealed (recovery scans and seals them, as it does the
/// active segments after a crash). The catalog is kept beside, renamed.
pub fn upgrade(home: &Path, options: &Options, poison: Arc<Poison>) -> Result<Manifest> {
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
            let file = SegmentFile::open(&*options.storage(), &path, false, false, counters)?;
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
