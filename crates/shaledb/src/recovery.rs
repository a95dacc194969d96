//! Recovery: rebuild the indexes at open from the newest valid checkpoint plus the records
//! appended after it.
//!
//! Replay is order-independent: every record carries a unique seqno and the highest one wins,
//! with tombstones and prefix tombstones taking part as versions. A record of an atomic batch is
//! applied only together with the rest of its batch; a batch cut off by a torn tail is dropped.
//! Records that fail their CRC are reported and never applied.

use crate::checkpoint::{self, Checkpoint};
use crate::counters::Counters;
use crate::error::{Error, Result};
use crate::index::{Entry, Key, KvsIndex};
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::media::{AlignedBuf, MediaClass, ReadPurpose, SegmentFile};
use crate::record::{RecordKind, RecordRef, FLAG_BATCH_CONTINUES};
use crate::segment::{
    parse_segment_file_name, scan_records, Location, SegmentHeader, SegmentId, SegmentMeta,
};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// What recovery rebuilt.
pub struct Recovered {
    pub indexes: HashMap<u32, KvsIndex>,
    pub segments: Vec<Arc<SegmentMeta>>,
    pub next_seqno: u64,
    pub next_segment_id: SegmentId,
    /// The loaded checkpoint's covered seqno (0 without one).
    pub covered_seqno: u64,
    pub report: RecoveryReport,
}

/// What recovery saw, for logs and `shale info`.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct RecoveryReport {
    pub checkpoint_loaded: bool,
    /// Why the checkpoint was not used, when there was one.
    pub checkpoint_rejected: Option<String>,
    pub segments_replayed: u64,
    pub records_replayed: u64,
    pub bytes_replayed: u64,
    /// Batches dropped because the log ended inside them.
    pub incomplete_batches_dropped: u64,
    /// Segments whose last record was cut off (expected after a crash).
    pub torn_tails: u64,
    /// Records that failed validation, as "file at offset: reason".
    pub corruptions: Vec<String>,
}

struct PendingRecord {
    kind: RecordKind,
    kvs_id: u32,
    seqno: u64,
    key: Key,
    location: Location,
}

/// Replay state: the indexes plus the deletions seen, so older puts replayed later lose.
struct Replay {
    indexes: HashMap<u32, KvsIndex>,
    deleted: HashMap<(u32, Key), u64>,
    prefix_deleted: Vec<(u32, Key, u64)>,
    max_seqno: u64,
}

impl Replay {
    fn apply(&mut self, record: PendingRecord) {
        self.max_seqno = self.max_seqno.max(record.seqno);
        let Some(index) = self.indexes.get_mut(&record.kvs_id) else {
            return; // a dropped KVS
        };
        match record.kind {
            RecordKind::Put => {
                let newer_exists = index
                    .get(&record.key)
                    .is_some_and(|entry| entry.seqno > record.seqno);
                let deleted_later = self
                    .deleted
                    .get(&(record.kvs_id, record.key.clone()))
                    .is_some_and(|&seqno| seqno > record.seqno);
                let prefix_deleted_later =
                    self.prefix_deleted.iter().any(|(kvs_id, prefix, seqno)| {
                        *kvs_id == record.kvs_id
                            && *seqno > record.seqno
                            && record.key.starts_with(prefix)
                    });
                if !(newer_exists || deleted_later || prefix_deleted_later) {
                    let entry = Entry {
                        location: record.location,
                        seqno: record.seqno,
                    };
                    index.put_recovered(&record.key, entry);
                }
            }
            RecordKind::Tombstone => {
                if index
                    .get(&record.key)
                    .is_some_and(|entry| entry.seqno < record.seqno)
                {
                    index.remove(&record.key, record.seqno, 0);
                }
                let slot = self.deleted.entry((record.kvs_id, record.key)).or_default();
                *slot = (*slot).max(record.seqno);
            }
            RecordKind::PrefixTombstone => {
                index.remove_prefix(&record.key, record.seqno, 0);
                self.prefix_deleted
                    .push((record.kvs_id, record.key, record.seqno));
            }
            RecordKind::SnapshotCopy => {}
        }
    }
}

/// Rebuilds the indexes of the KVSs in `kvs_ids` from the segments in `class_dirs`.
pub fn recover(
    checkpoint_dir: &Path,
    class_dirs: &[(MediaClass, &Path)],
    kvs_ids: &HashSet<u32>,
    direct_io: bool,
    counters: &Counters,
) -> Result<Recovered> {
    let mut report = RecoveryReport::default();
    let (segments, mut next_segment_id) = open_segments(class_dirs, direct_io, counters)?;
    let checkpoint = match checkpoint::load(checkpoint_dir) {
        Ok(found) => found,
        Err(error) if error.kind() == crate::error::ErrorKind::Corruption => {
            tracing::warn!(%error, "ignoring the damaged index checkpoint; rebuilding the index from all segments");
            report.checkpoint_rejected = Some(error.to_string());
            None
        }
        Err(error) => return Err(error),
    };
    let mut replay = Replay {
        indexes: kvs_ids
            .iter()
            .map(|&id| (id, KvsIndex::default()))
            .collect(),
        deleted: HashMap::new(),
        prefix_deleted: Vec::new(),
        max_seqno: 0,
    };
    let Checkpoint {
        covered_seqno,
        next_seqno: checkpoint_next_seqno,
        replay_from,
        kvs,
    } = checkpoint.unwrap_or_default();
    report.checkpoint_loaded = checkpoint_next_seqno > 0;
    for (kvs_id, entries) in kvs {
        if let Some(index) = replay.indexes.get_mut(&kvs_id) {
            for (key, entry) in entries {
                index.put_recovered(&key, entry);
            }
        }
    }
    let mut next_seqno = checkpoint_next_seqno.max(1);
    let mut kept = Vec::new();
    for segment in segments {
        next_seqno = next_seqno.max(segment.header.created_seqno);
        next_segment_id = next_segment_id.max(SegmentId(segment.id().0 + 1));
        let from = replay_from
            .get(&segment.id())
            .copied()
            .unwrap_or(SEGMENT_HEADER_BYTES);
        let end = replay_segment(&segment, from, &mut replay, &mut report)?;
        segment.set_end_bytes(end.max(from));
        if segment.end_bytes() <= SEGMENT_HEADER_BYTES && !segment.is_quarantined() {
            // Created but never written: nothing in it to keep.
            std::fs::remove_file(segment.path()).map_err(|error| {
                Error::io(format!("remove {}", segment.path().display()), error)
            })?;
            continue;
        }
        kept.push(segment);
    }
    next_seqno = next_seqno.max(replay.max_seqno + 1);
    let by_id: HashMap<SegmentId, &Arc<SegmentMeta>> =
        kept.iter().map(|segment| (segment.id(), segment)).collect();
    for (kvs_id, index) in &replay.indexes {
        let mut dangling = None;
        index.for_each_version(|key, entry| match by_id.get(&entry.location.segment) {
            Some(segment) => segment.add_live(u64::from(entry.location.len)),
            None if dangling.is_none() => dangling = Some((key.to_vec(), entry)),
            None => {}
        });
        if let Some((key, entry)) = dangling {
            return Err(Error::corruption(
                checkpoint_dir.join(checkpoint::FILE_NAME),
                0,
                format!(
                    "KVS {kvs_id} key {:?} points at segment {} which does not exist",
                    String::from_utf8_lossy(&key),
                    entry.location.segment.0
                ),
            ));
        }
    }
    Ok(Recovered {
        indexes: replay.indexes,
        segments: kept,
        next_seqno,
        next_segment_id,
        covered_seqno,
        report,
    })
}

/// Opens every segment file; returns them in id order and the next unused segment id.
fn open_segments(
    class_dirs: &[(MediaClass, &Path)],
    direct_io: bool,
    counters: &Counters,
) -> Result<(Vec<Arc<SegmentMeta>>, SegmentId)> {
    let mut segments = Vec::new();
    let mut next_id = SegmentId(1);
    for &(class, dir) in class_dirs {
        let listing = std::fs::read_dir(dir)
            .map_err(|error| Error::io(format!("list {}", dir.display()), error))?;
        for item in listing {
            let item = item.map_err(|error| Error::io(format!("list {}", dir.display()), error))?;
            let name = item.file_name();
            let Some(id) = name.to_str().and_then(parse_segment_file_name) else {
                continue;
            };
            next_id = next_id.max(SegmentId(id.0 + 1));
            let path = item.path();
            let file = SegmentFile::open(&path, direct_io, counters.media(class).clone())?;
            let mut page = AlignedBuf::zeroed(crate::limits::PAGE_BYTES);
            file.read_pages(0, &mut page, ReadPurpose::Other)?;
            match SegmentHeader::decode(page.as_slice(), &path) {
                Ok(header) if header.id == id => {
                    segments.push(Arc::new(SegmentMeta::new(
                        header,
                        Arc::new(file),
                        SEGMENT_HEADER_BYTES,
                        true,
                    )));
                }
                Ok(_) | Err(_) if file.len_bytes()? <= SEGMENT_HEADER_BYTES => {
                    // Torn while being created: it never held a record.
                    tracing::warn!(path = %path.display(), "removing a segment whose creation did not complete");
                    std::fs::remove_file(&path)
                        .map_err(|error| Error::io(format!("remove {}", path.display()), error))?;
                }
                Ok(header) => {
                    return Err(Error::corruption(
                        &path,
                        16,
                        format!(
                            "header names segment {} but the file name says {}",
                            header.id.0, id.0
                        ),
                    ))
                }
                Err(error) => return Err(error),
            }
        }
    }
    segments.sort_by_key(|segment| segment.id());
    Ok((segments, next_id))
}

/// Replays one segment from `from`; returns the end of its valid records.
fn replay_segment(
    segment: &SegmentMeta,
    from: u64,
    replay: &mut Replay,
    report: &mut RecoveryReport,
) -> Result<u64> {
    let mut batch: Vec<PendingRecord> = Vec::new();
    let id = segment.id();
    let summary = scan_records(
        &segment.file,
        from,
        ReadPurpose::Other,
        |offset, record: &RecordRef<'_>| {
            report.records_replayed += 1;
            report.bytes_replayed += record.encoded_len() as u64;
            let pending = PendingRecord {
                kind: record.kind,
                kvs_id: record.kvs_id,
                seqno: record.seqno,
                key: record.key.into(),
                location: Location {
                    segment: id,
                    offset: offset as u32,
                    len: record.encoded_len() as u32,
                },
            };
            batch.push(pending);
            if record.flags & FLAG_BATCH_CONTINUES == 0 {
                for pending in batch.drain(..) {
                    replay.apply(pending);
                }
            }
            Ok(())
        },
    )?;
    if !batch.is_empty() {
        report.incomplete_batches_dropped += 1;
    }
    if from < summary.end_offset || !summary.corruptions.is_empty() {
        report.segments_replayed += 1;
    }
    if summary.torn_tail {
        report.torn_tails += 1;
    }
    for (offset, reason) in &summary.corruptions {
        let line = format!("{} at {offset}: {reason}", segment.path().display());
        tracing::error!(corruption = %line, "skipped a corrupt record during recovery");
        report.corruptions.push(line);
    }
    if !summary.corruptions.is_empty() {
        segment.quarantine();
    }
    Ok(summary.end_offset)
}
