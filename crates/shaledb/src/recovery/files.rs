//! Matching the segment files on media with the segments the manifest lists: every file must
//! be a listed segment (or a crash leftover), every listed segment must have its file, with
//! the recorded header and, sealed, at least its sealed length.

use super::input::RecoveryInput;
use super::report::Cleanup;
use super::salvage::Damage;
use crate::error::{Error, Result};
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::manifest::SegmentEntry;
use crate::media::{MediaClass, SegmentFile};
use crate::segment::{
    list_segment_files, segment_file_name, SegmentHeader, SegmentId, SegmentMeta,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Opens every segment file the manifest lists, checks each one's header against it, and
/// notes crash leftovers. A file the manifest does not account for, and a live segment without
/// its file, are damage (in a salvage: set aside, or forgotten). Returns the segments in id
/// order, with what the manifest says of each.
pub fn open_segments(
    input: &RecoveryInput<'_>,
    damage: &mut Damage,
    cleanup: &mut Vec<Cleanup>,
) -> Result<Vec<(Arc<SegmentMeta>, SegmentEntry)>> {
    let state = input.state;
    let mut found: BTreeMap<SegmentId, (MediaClass, PathBuf)> = BTreeMap::new();
    for (class, dir) in input.media {
        for (id, path) in list_segment_files(dir)? {
            if let Some(freed) = state.freeing.get(&id) {
                if freed.class == *class {
                    cleanup.push(Cleanup::FinishFree(id, Some(path)));
                    continue;
                }
            }
            if !state.segments.contains_key(&id) {
                let header_only = std::fs::metadata(&path)
                    .map_err(|error| Error::io(format!("stat {}", path.display()), error))?
                    .len()
                    <= SEGMENT_HEADER_BYTES;
                if id.0 >= state.next_segment_id && header_only {
                    cleanup.push(Cleanup::RemoveUnrecorded(path));
                    continue;
                }
                damage.found(Error::corruption(
                    &path,
                    0,
                    format!(
                        "unexpected segment file: the manifest lists no segment {} (a file \
                         copied or restored into the {} directory?)",
                        id.0,
                        class.name()
                    ),
                ))?;
                cleanup.push(Cleanup::SetAside(path));
                continue;
            }
            if let Some((other_class, other)) = found.get(&id) {
                damage.found(Error::corruption(
                    &path,
                    0,
                    format!(
                        "segment {} exists twice: here and in the {} directory as {}",
                        id.0,
                        other_class.name(),
                        other.display()
                    ),
                ))?;
                cleanup.push(Cleanup::SetAside(path));
                continue;
            }
            found.insert(id, (*class, path));
        }
    }
    for &id in state.freeing.keys() {
        let still_there = cleanup
            .iter()
            .any(|step| matches!(step, Cleanup::FinishFree(freed, Some(_)) if *freed == id));
        if !still_there {
            cleanup.push(Cleanup::FinishFree(id, None));
        }
    }
    let mut segments = Vec::new();
    for (&id, entry) in &state.segments {
        let Some((class, path)) = found.remove(&id) else {
            let dir = input
                .media
                .iter()
                .find(|(class, _)| *class == entry.class)
                .map_or_else(PathBuf::new, |(_, dir)| dir.clone());
            damage.found(Error::corruption(
                dir.join(segment_file_name(id)),
                0,
                format!(
                    "segment {} is missing: the manifest lists it on the {} class ({}), and \
                     its file was deleted or its directory replaced",
                    id.0,
                    entry.class.name(),
                    describe(entry)
                ),
            ))?;
            cleanup.push(Cleanup::Forget(id));
            continue;
        };
        if class != entry.class {
            damage.found(Error::corruption(
                &path,
                0,
                format!(
                    "segment {} is in the {} directory, but the manifest puts it on {}",
                    id.0,
                    class.name(),
                    entry.class.name()
                ),
            ))?;
            cleanup.extend([Cleanup::SetAside(path), Cleanup::Forget(id)]);
            continue;
        }
        let counters = input.counters.media(class).clone();
        let file = SegmentFile::open(
            input.storage,
            &path,
            input.direct_io,
            !input.read_only,
            counters,
        )?;
        let expected = SegmentHeader {
            id,
            class: entry.class,
            head: entry.head,
            created_seqno: entry.created_seqno,
        };
        let header = match SegmentHeader::read(&file, &path) {
            Ok(header) if header == expected => header,
            read => {
                damage.found(match read {
                    Ok(header) => Error::corruption(
                        &path,
                        0,
                        format!(
                            "the file's header ({header:?}) is not the segment the manifest \
                             lists ({expected:?}): the file was replaced"
                        ),
                    ),
                    Err(error) => error,
                })?;
                cleanup.extend([Cleanup::SetAside(path), Cleanup::Forget(id)]);
                continue;
            }
        };
        if let Some(seal) = entry.seal {
            let len = file.len_bytes()?;
            if len < seal.end_bytes {
                // In a salvage the replay reads what is there, and the segment is rescued.
                damage.found(Error::corruption(
                    &path,
                    len,
                    format!(
                        "sealed segment {} is cut short: {len} bytes, but its records end at {}",
                        id.0, seal.end_bytes
                    ),
                ))?;
            }
        }
        let end = entry
            .seal
            .map_or(SEGMENT_HEADER_BYTES, |seal| seal.end_bytes);
        segments.push((
            Arc::new(SegmentMeta::new(header, Arc::new(file), end, None)),
            *entry,
        ));
    }
    Ok(segments)
}

fn describe(entry: &SegmentEntry) -> String {
    match entry.seal {
        Some(seal) => format!(
            "sealed with {} records in {} bytes",
            seal.record_count, seal.end_bytes
        ),
        None => "active".to_string(),
    }
}
