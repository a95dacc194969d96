//! Recovery: check every segment file against the manifest, then rebuild the indexes at open
//! from the newest valid checkpoint plus the records appended after it.
//!
//! What recovery trusts (docs/ARCHITECTURE.md, "Corruption policy"): the manifest (checksummed)
//! for which segments must exist, on which class, with which header and, once sealed, exactly
//! where their records end, how many there are and their checksum; the checkpoint only if its
//! checksum and structure validate (otherwise every segment is replayed, which gives the same
//! index); records only if their checksum validates. Every segment file must be in the
//! manifest, every live segment in the manifest must have its file, and a sealed segment's
//! replay must end exactly at its seal. Only a segment that was still being appended to at a
//! crash (unsealed) may end in a torn tail, and never before the position the checkpoint saw
//! in it. Anything else is corruption, which fails the open naming the file and offset.
//!
//! Replay is order-independent: every record carries a unique seqno and the highest one wins,
//! with tombstones and prefix tombstones taking part as versions. A record of an atomic batch is
//! applied only together with the rest of its batch; a batch cut off by a torn tail is dropped.

use crate::checkpoint::{self, Checkpoint};
use crate::counters::Counters;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{Entry, Key, KvsIndex};
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::manifest::{KvdbState, SegmentEntry};
use crate::media::{MediaClass, ReadPurpose, SegmentFile, Storage};
use crate::record::{RecordKind, RecordRef, FLAG_BATCH_CONTINUES};
use crate::segment::{
    list_segment_files, scan_records, Location, Seal, SegmentHeader, SegmentId, SegmentMeta,
};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What recovery is given.
pub struct RecoveryInput<'a> {
    /// What the manifest says the KVDB holds.
    pub state: &'a KvdbState,
    /// Every media directory, absolute, with its class.
    pub media: &'a [(MediaClass, PathBuf)],
    pub checkpoint_dir: &'a Path,
    pub storage: &'a dyn Storage,
    pub direct_io: bool,
    pub counters: &'a Counters,
}

/// What recovery rebuilt.
pub struct Recovered {
    pub indexes: HashMap<u32, KvsIndex>,
    /// Every live segment, sealed (active segments at a crash are sealed where they end).
    pub segments: Vec<Arc<SegmentMeta>>,
    pub next_seqno: u64,
    /// The loaded checkpoint's covered seqno (0 without one).
    pub covered_seqno: u64,
    pub report: RecoveryReport,
    /// What the open must still record in the manifest or remove, unless it is read-only.
    pub cleanup: Vec<Cleanup>,
}

/// A change recovery found necessary but leaves to the caller (a read-only open makes none).
#[derive(Debug)]
pub enum Cleanup {
    /// A segment that was active at a crash, now scanned to its end: record its seal, since
    /// nothing is appended to it again (invariant I10).
    Seal(SegmentId, Seal),
    /// A segment that holds no record: free it and delete its file.
    FreeEmpty(SegmentId, PathBuf),
    /// A segment recorded freed: delete its file if it is still there, record the deletion.
    FinishFree(SegmentId, Option<PathBuf>),
    /// A header-only file the manifest never recorded: a crash while it was being created.
    RemoveUnrecorded(PathBuf),
}

/// What recovery saw, for logs and `shale info`.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct RecoveryReport {
    /// The KVDB was created by this open.
    pub created: bool,
    /// The KVDB was written by a ShaleDB without a manifest and was upgraded.
    pub upgraded_from_catalog: bool,
    /// The manifest's last edit was torn by a crash and cut off; where.
    pub manifest_torn_tail: Option<String>,
    /// Media directories outside the home that were moved with it and now name it as owner.
    pub adopted_dirs: Vec<String>,
    pub checkpoint_loaded: bool,
    /// Why the checkpoint was not used, when there was one.
    pub checkpoint_rejected: Option<String>,
    pub segments_replayed: u64,
    pub records_replayed: u64,
    pub bytes_replayed: u64,
    /// Segments still being appended to at a crash, scanned and sealed at this open.
    pub active_segments_sealed: u64,
    /// Batches dropped because the log ended inside them.
    pub incomplete_batches_dropped: u64,
    /// Active segments whose last record was cut off (expected after a crash).
    pub torn_tails: u64,
    /// For each torn tail: the file, where its readable records end, how many bytes after that
    /// were dropped, and the last durable point known (the dropped bytes lie past it: a write
    /// the crash tore, or damage there, which nothing can tell apart).
    pub torn_tail_details: Vec<String>,
    /// Files removed as leftovers of a crash: unrecorded header-only segments, freed segments.
    pub leftovers_removed: Vec<String>,
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
    /// KVS ids below it that have no index were dropped; at or past it, never created.
    next_kvs_id: u32,
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

/// Checks the segment files against the manifest and rebuilds the indexes of its KVSs.
pub fn recover(input: &RecoveryInput<'_>) -> Result<Recovered> {
    let mut report = RecoveryReport::default();
    let mut cleanup = Vec::new();
    let segments = open_segments(input, &mut cleanup)?;
    let checkpoint = match checkpoint::load(input.checkpoint_dir) {
        Ok(found) => found,
        Err(error) if error.kind() == ErrorKind::Corruption => {
            tracing::warn!(%error, "ignoring the damaged index checkpoint; rebuilding the index from all segments");
            report.checkpoint_rejected = Some(error.to_string());
            None
        }
        Err(error) => return Err(error),
    };
    let mut replay = Replay {
        indexes: input
            .state
            .kvs
            .keys()
            .map(|&id| (id, KvsIndex::default()))
            .collect(),
        next_kvs_id: input.state.next_kvs_id,
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
    for (segment, entry) in segments {
        next_seqno = next_seqno.max(segment.header.created_seqno);
        let from = replay_from
            .get(&segment.id())
            .copied()
            .unwrap_or(SEGMENT_HEADER_BYTES);
        let seal = replay_segment(
            &segment,
            entry.seal,
            entry.durable_end,
            from,
            &mut replay,
            &mut report,
        )?;
        if entry.seal.is_none() {
            report.active_segments_sealed += 1;
            if seal.record_count == 0 {
                cleanup.push(Cleanup::FreeEmpty(
                    segment.id(),
                    segment.path().to_path_buf(),
                ));
                continue;
            }
            cleanup.push(Cleanup::Seal(segment.id(), seal));
            segment.seal(seal);
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
                input.checkpoint_dir.join(checkpoint::FILE_NAME),
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
        covered_seqno,
        report,
        cleanup,
    })
}

/// Opens every segment file the manifest lists, checks each one's header against it, and
/// notes crash leftovers. Any file the manifest does not account for, and any live segment
/// without its file, is corruption. Returns the segments in id order, with what the manifest
/// says of each.
fn open_segments(
    input: &RecoveryInput<'_>,
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
                return Err(Error::corruption(
                    &path,
                    0,
                    format!(
                        "unexpected segment file: the manifest lists no segment {} (a file \
                         copied or restored into the {} directory?)",
                        id.0,
                        class.name()
                    ),
                ));
            }
            if let Some((other_class, other)) = found.insert(id, (*class, path.clone())) {
                return Err(Error::corruption(
                    &path,
                    0,
                    format!(
                        "segment {} exists twice: here and in the {} directory as {}",
                        id.0,
                        other_class.name(),
                        other.display()
                    ),
                ));
            }
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
            return Err(Error::corruption(
                dir.join(crate::segment::segment_file_name(id)),
                0,
                format!(
                    "segment {} is missing: the manifest lists it on the {} class ({}), and \
                     its file was deleted or its directory replaced",
                    id.0,
                    entry.class.name(),
                    describe(entry)
                ),
            ));
        };
        if class != entry.class {
            return Err(Error::corruption(
                &path,
                0,
                format!(
                    "segment {} is in the {} directory, but the manifest puts it on {}",
                    id.0,
                    class.name(),
                    entry.class.name()
                ),
            ));
        }
        let counters = input.counters.media(class).clone();
        let file = SegmentFile::open(input.storage, &path, input.direct_io, counters)?;
        let header = SegmentHeader::read(&file, &path)?;
        let expected = SegmentHeader {
            id,
            class: entry.class,
            head: entry.head,
            created_seqno: entry.created_seqno,
        };
        if header != expected {
            return Err(Error::corruption(
                &path,
                0,
                format!(
                    "the file's header ({header:?}) is not the segment the manifest lists \
                     ({expected:?}): the file was replaced"
                ),
            ));
        }
        if let Some(seal) = entry.seal {
            let len = file.len_bytes()?;
            if len < seal.end_bytes {
                return Err(Error::corruption(
                    &path,
                    len,
                    format!(
                        "sealed segment {} is cut short: {len} bytes, but its records end at {}",
                        id.0, seal.end_bytes
                    ),
                ));
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

/// Replays one segment: a sealed one from `from` (the checkpoint's position, or the first
/// record), which must end exactly at its seal; an active one from its first record, applying
/// only what lies at or after `from`, which may end torn (past `from`) and is sealed where it
/// ends. Returns the seal.
fn replay_segment(
    segment: &SegmentMeta,
    seal: Option<Seal>,
    durable_end: u64,
    from: u64,
    replay: &mut Replay,
    report: &mut RecoveryReport,
) -> Result<Seal> {
    let mut batch: Vec<PendingRecord> = Vec::new();
    let id = segment.id();
    let scan_from = if seal.is_some() {
        from
    } else {
        SEGMENT_HEADER_BYTES
    };
    let summary = scan_records(
        &segment.file,
        scan_from,
        seal.map_or(u64::MAX, |seal| seal.end_bytes),
        ReadPurpose::Other,
        |offset, record: &RecordRef<'_>| {
            if offset < from {
                return Ok(());
            }
            report.records_replayed += 1;
            report.bytes_replayed += record.encoded_len() as u64;
            batch.push(PendingRecord {
                kind: record.kind,
                kvs_id: record.kvs_id,
                seqno: record.seqno,
                key: record.key.into(),
                location: Location {
                    segment: id,
                    offset: offset as u32,
                    len: record.encoded_len() as u32,
                },
            });
            if record.kvs_id >= replay.next_kvs_id {
                return Err(Error::corruption(
                    segment.path(),
                    offset,
                    format!(
                        "a record of KVS {}, which the manifest never created (it lost edits?)",
                        record.kvs_id
                    ),
                ));
            }
            if record.flags & FLAG_BATCH_CONTINUES == 0 {
                for pending in batch.drain(..) {
                    replay.apply(pending);
                }
            }
            Ok(())
        },
    )?;
    let path = segment.path();
    if let Some((offset, reason)) = summary.corruptions.first() {
        return Err(Error::corruption(
            path,
            *offset,
            format!(
                "record fails validation ({reason}){}",
                more(summary.corruptions.len() - 1)
            ),
        ));
    }
    if from < summary.end_offset {
        report.segments_replayed += 1;
    }
    match seal {
        Some(seal) => {
            let whole = scan_from == SEGMENT_HEADER_BYTES;
            let matches = summary.end_offset == seal.end_bytes
                && !summary.torn_tail
                && (!whole
                    || (summary.records == seal.record_count
                        && summary.records_crc == seal.records_crc));
            if !matches {
                return Err(Error::corruption(
                    path,
                    summary.end_offset,
                    format!(
                        "sealed segment {}: its readable records end at {}{}, but it was sealed \
                         with {} records ending at {}",
                        id.0,
                        summary.end_offset,
                        if whole {
                            format!(" ({} records)", summary.records)
                        } else {
                            String::new()
                        },
                        seal.record_count,
                        seal.end_bytes
                    ),
                ));
            }
            Ok(seal)
        }
        None => {
            let must_reach = from.max(durable_end);
            if summary.end_offset < must_reach {
                return Err(Error::corruption(
                    path,
                    summary.end_offset,
                    format!(
                        "active segment {}: its readable records end at {}, before {must_reach}, \
                         up to which they were durable (the manifest or the checkpoint says so)",
                        id.0, summary.end_offset
                    ),
                ));
            }
            if !batch.is_empty() {
                report.incomplete_batches_dropped += 1;
            }
            if summary.torn_tail {
                report.torn_tails += 1;
                let file_len = segment.file.len_bytes()?;
                report.torn_tail_details.push(format!(
                    "{}: readable records end at {} of {file_len} bytes, the rest no record or \
                     cut (a write torn by the crash, or damage past the last durable point, {})",
                    path.display(),
                    summary.end_offset,
                    must_reach
                ));
            }
            Ok(Seal {
                end_bytes: summary.end_offset,
                record_count: summary.records,
                records_crc: summary.records_crc,
            })
        }
    }
}

fn more(count: usize) -> String {
    match count {
        0 => String::new(),
        count => format!("; {count} more bad records after it"),
    }
}
