//! Salvage of the home: a manifest rebuilt when it is lost or damaged, and the test of whether
//! a media directory's identity may be written anew.

use super::dirs::{place, random_id};
use crate::error::Result;
use crate::identity::Identity;
use crate::manifest::{self, KvdbState, Manifest, MediaDirs, SegmentEntry};
use crate::media::{set_file_aside, MediaClass, MediaCounters, SegmentFile};
use crate::options::Options;
use crate::poison::Poison;
use crate::segment::{list_segment_files, SegmentHeader};
use std::path::Path;
use std::sync::Arc;

/// Salvage: a new manifest for `home`, whose own is lost or damaged. What its readable records
/// say is kept (identity, media directories, KVSs, seals); the segments are the segment files
/// found in the media directories (recovery scans those it knows no seal of, and names KVSs it
/// finds records of but no name for `salvaged-kvs-ID`). A damaged manifest is set aside.
pub fn rebuild(home: &Path, options: &Options, poison: Arc<Poison>) -> Result<(Manifest, String)> {
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
            let file = SegmentFile::open(&*options.storage(), &path, false, false, counters)?;
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
pub fn repairable_identity(dir: &Path) -> Result<bool> {
    let foreign_or_fine = matches!(Identity::load(dir), Ok(Some(_)));
    Ok(!foreign_or_fine && !list_segment_files(dir)?.is_empty())
}
