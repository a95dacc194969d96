//! Backup: a copy of an open KVDB as it was at one instant, made while reads and writes go on,
//! into a new KVDB of its own (a new id) that opens like any other.
//!
//! The instant (the cut) is taken as a crash would take it: with the cleaner paused, an index
//! checkpoint is encoded (and stored only in the copy), then, with every log head locked, the
//! manifest's state and every segment's end are read. The copy holds exactly what the source
//! would recover after a crash at the cut with that checkpoint: sealed segments whole, active
//! ones up to their end at the cut (bytes a head appended never change), zeroes after it. The
//! cleaner runs again while the bytes are copied: a segment it frees stays readable through the
//! file handle held here. Every copied segment is read back from the destination and verified
//! against its seal or its end at the cut; damage is blamed on the source if the source reads
//! back damaged too. The manifest, written last, makes the copy a KVDB, so a backup that fails
//! or is interrupted leaves a directory no open takes for a KVDB.

use crate::checkpoint;
use crate::checkpointer::Checkpointer;
use crate::error::{Error, Result};
use crate::gc::Cleaner;
use crate::home::NewKvdb;
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::manifest::{KvdbState, SegmentEntry};
use crate::media::{
    round_up_to_page, sync_dir, AlignedBuf, MediaClass, ReadPurpose, SegmentFile, Storage,
};
use crate::poison::Poison;
use crate::segment::{scan_records, segment_file_name, SegmentHeader, SegmentId, SegmentMeta};
use crate::store::Store;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Bytes copied per read and write: the backup's only buffer.
const COPY_CHUNK_BYTES: usize = 4 << 20;

/// What a backup copied.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BackupReport {
    /// The new KVDB.
    pub path: String,
    /// Its id (every KVDB has its own), in hex.
    pub kvdb_id: String,
    pub kvs: u64,
    pub segments: u64,
    /// Bytes of segments copied (headers and records, as of the cut).
    pub segment_bytes: u64,
    pub checkpoint_bytes: u64,
}

/// One segment as of the cut.
struct AtCut {
    id: SegmentId,
    entry: SegmentEntry,
    source: Arc<SegmentMeta>,
    /// Where its records end at the cut.
    end: u64,
}

impl AtCut {
    fn header(&self) -> SegmentHeader {
        SegmentHeader {
            id: self.id,
            class: self.entry.class,
            head: self.entry.head,
            created_seqno: self.entry.created_seqno,
        }
    }
}

/// Copies the KVDB of `store` into `dest` (missing or empty); see the module docs.
pub fn backup(
    store: &Store,
    cleaner: &Cleaner,
    checkpointer: &Checkpointer,
    dest: &Path,
    storage: &dyn Storage,
) -> Result<BackupReport> {
    store.poison.check()?;
    let (with_staging, staging_bytes_max) = {
        let state = store.lifecycle.manifest.state();
        (
            state.media.staging_dir.is_some(),
            state.media.staging_bytes_max,
        )
    };
    let target = NewKvdb::in_empty_home(dest, with_staging, staging_bytes_max)?;
    let (checkpoint, state, segments) = {
        let _no_cleaning = cleaner.pause();
        let checkpoint = checkpointer.encode();
        let _no_appends = store.heads.lock_all();
        let state = store.lifecycle.manifest.state().clone();
        // Segments just created and still empty (the prepared next ones, perhaps not yet in
        // the table) hold nothing: the copy goes without them.
        let segments: Vec<AtCut> = state
            .segments
            .iter()
            .filter_map(|(&id, &entry)| {
                let source = store.segments.get(id)?;
                let end = entry
                    .seal
                    .map_or_else(|| source.end_bytes(), |seal| seal.end_bytes);
                (end > SEGMENT_HEADER_BYTES).then_some(AtCut {
                    id,
                    entry,
                    source,
                    end,
                })
            })
            .collect();
        (checkpoint, state, segments)
    };
    // Appends buffered at the cut reach the files.
    store.heads.flush_all(false)?;
    let mut copied = BTreeMap::new();
    let mut segment_bytes = 0;
    for segment in &segments {
        let dir = target.dir(segment.entry.class).ok_or_else(|| {
            Error::corruption(
                store.lifecycle.manifest.path(),
                0,
                format!(
                    "segment {} is on the {} class, which the KVDB does not have",
                    segment.id.0,
                    segment.entry.class.name()
                ),
            )
        })?;
        let path = dir.join(segment_file_name(segment.id));
        copy_segment(segment, &path, storage)?;
        verify_copy(segment, &path, storage)?;
        segment_bytes += segment.end;
        copied.insert(
            segment.id,
            SegmentEntry {
                // The copy is durable to where it was cut; damage before that is corruption.
                durable_end: if segment.entry.seal.is_none() {
                    segment.end
                } else {
                    segment.entry.durable_end
                },
                ..segment.entry
            },
        );
    }
    for class in MediaClass::ALL {
        if let Some(dir) = target.dir(class) {
            sync_dir(&dir)?;
        }
    }
    checkpoint::store(&target.checkpoint_dir(), &checkpoint.bytes)?;
    let kvs = state.kvs.len() as u64;
    let state = KvdbState {
        segments: copied,
        freeing: BTreeMap::new(),
        ..state
    };
    let kvdb_id = target.kvdb_id;
    target.finish(state, Arc::new(Poison::default()))?;
    Ok(BackupReport {
        path: dest.display().to_string(),
        kvdb_id: format!("{kvdb_id:016x}"),
        kvs,
        segments: segments.len() as u64,
        segment_bytes,
        checkpoint_bytes: checkpoint.bytes.len() as u64,
    })
}

/// Writes `segment` as of the cut to the new file `path`: its bytes up to its end, zeroes
/// after them to the end of the page (what follows the cut is not the backup's), made durable.
fn copy_segment(segment: &AtCut, path: &Path, storage: &dyn Storage) -> Result<()> {
    let out = storage
        .create(path, true)
        .map_err(|error| Error::io(format!("create {}", path.display()), error))?;
    let write = |data: &[u8], offset: u64| {
        out.write_all_at(data, offset)
            .map_err(|error| Error::io(format!("write {} at {offset}", path.display()), error))
    };
    let source = &segment.source;
    let mut buf = AlignedBuf::zeroed(COPY_CHUNK_BYTES);
    let mut offset = 0;
    while offset < segment.end {
        buf.clear();
        let read = source
            .file
            .read_pages(offset, &mut buf, ReadPurpose::Other)?;
        let wanted = (segment.end - offset).min(COPY_CHUNK_BYTES as u64) as usize;
        if read < wanted {
            return Err(Error::corruption(
                source.path(),
                offset + read as u64,
                format!(
                    "the file ends before the end of its records ({})",
                    segment.end
                ),
            ));
        }
        let whole_pages = round_up_to_page(wanted as u64) as usize;
        let window = buf.window_mut();
        window[wanted..whole_pages].fill(0);
        write(&window[..whole_pages], offset)?;
        offset += wanted as u64;
    }
    out.sync_data()
        .map_err(|error| Error::io(format!("fdatasync {}", path.display()), error))
}

/// Reads the copy at `path` back and checks it against what the manifest says of `segment` at
/// the cut; if it does not read back, reads the source too, to say which one is damaged.
fn verify_copy(segment: &AtCut, path: &Path, storage: &dyn Storage) -> Result<()> {
    let copy = SegmentFile::open(storage, path, true, false, Arc::default())?;
    let Err(copy_damage) = reads_back(segment, &copy) else {
        return Ok(());
    };
    reads_back(segment, &segment.source.file)?;
    Err(Error::io(
        format!(
            "verify the backup's copy of segment {} ({copy_damage})",
            segment.id.0
        ),
        std::io::Error::other("the copy does not read back as written, though its source does"),
    ))
}

/// Whether `file` holds `segment` as of the cut: its header, and its records up to its end
/// (exactly as sealed, if sealed).
fn reads_back(segment: &AtCut, file: &SegmentFile) -> Result<()> {
    let header = SegmentHeader::read(file, file.path())?;
    if header != segment.header() {
        return Err(Error::corruption(
            file.path(),
            0,
            format!(
                "segment header {header:?} is not the manifest's {:?}",
                segment.header()
            ),
        ));
    }
    let summary = scan_records(
        file,
        SEGMENT_HEADER_BYTES,
        segment.end,
        ReadPurpose::Other,
        |_, _| Ok(()),
    )?;
    if let Some((offset, reason)) = summary.corruptions.first() {
        return Err(Error::corruption(
            file.path(),
            *offset,
            format!("record fails validation ({reason})"),
        ));
    }
    if !summary.reads_back(segment.end, segment.entry.seal.as_ref()) {
        return Err(Error::corruption(
            file.path(),
            summary.end_offset,
            format!(
                "its records read back to here ({} of them), but it held records up to {} at \
                 the backup's cut{}",
                summary.records,
                segment.end,
                if segment.entry.seal.is_some() {
                    " (sealed)"
                } else {
                    ""
                }
            ),
        ));
    }
    Ok(())
}
