//! Replaying segments into the indexes. Replay is order-independent: every record carries a
//! unique seqno and the highest one wins, with tombstones and prefix tombstones taking part as
//! versions. A record of an atomic batch is applied only together with the rest of its batch; a
//! batch cut off by a torn tail is dropped.

use super::report::{Cleanup, RecoveryReport};
use super::salvage::Damage;
use crate::error::{Error, Result};
use crate::index::{keeps_value, Entry, Key, PartitionedIndex};
use crate::key_groups::KeyGroups;
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::manifest::SegmentEntry;
use crate::media::ReadPurpose;
use crate::record::{RecordKind, RecordRef, FLAG_BATCH_CONTINUES};
use crate::segment::{scan_records, HeadKind, Location, Seal, SegmentMeta};
use std::collections::HashMap;

struct PendingRecord {
    kind: RecordKind,
    kvs_id: u32,
    seqno: u64,
    key: Key,
    location: Location,
    /// The value, when the index keeps it in the entry (`Options::index_value_bytes_max`).
    value: Option<Box<[u8]>>,
}

/// Replay state: the indexes plus the deletions seen, so older puts replayed later lose.
pub struct Replay {
    pub indexes: HashMap<u32, PartitionedIndex>,
    /// KVS ids below it that have no index were dropped; at or past it, never created.
    pub next_kvs_id: u32,
    pub deleted: HashMap<(u32, Key), u64>,
    pub prefix_deleted: Vec<(u32, Key, u64)>,
    pub max_seqno: u64,
    /// Values of at most this many bytes are kept in the index entries replayed.
    index_value_bytes_max: usize,
}

impl Replay {
    /// A replay of the KVSs `kvs`, each starting empty, with the key groups it was created with.
    pub fn new(
        kvs: impl Iterator<Item = (u32, KeyGroups)>,
        next_kvs_id: u32,
        index_value_bytes_max: usize,
    ) -> Self {
        Replay {
            indexes: kvs
                .map(|(id, groups)| (id, PartitionedIndex::new(groups)))
                .collect(),
            next_kvs_id,
            deleted: HashMap::new(),
            prefix_deleted: Vec::new(),
            max_seqno: 0,
            index_value_bytes_max,
        }
    }

    /// Salvage: a KVS whose records were found but which the manifest never created is created,
    /// under a name that says where it came from.
    pub fn create_found_kvs(&mut self, kvs_id: u32, cleanup: &mut Vec<Cleanup>) {
        self.indexes.entry(kvs_id).or_default();
        self.next_kvs_id = self.next_kvs_id.max(kvs_id + 1);
        cleanup.push(Cleanup::CreateKvs(kvs_id, format!("salvaged-kvs-{kvs_id}")));
    }

    fn apply(&mut self, record: PendingRecord) {
        self.max_seqno = self.max_seqno.max(record.seqno);
        let Some(index) = self.indexes.get_mut(&record.kvs_id) else {
            return; // a dropped KVS
        };
        match record.kind {
            RecordKind::Put => {
                let index = index.part_mut(&record.key);
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
                    index.put_recovered(&record.key, entry, record.value.as_deref());
                }
            }
            RecordKind::Tombstone => {
                let index = index.part_mut(&record.key);
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
                for index in index.parts_mut() {
                    index.remove_prefix(&record.key, record.seqno, 0);
                }
                self.prefix_deleted
                    .push((record.kvs_id, record.key, record.seqno));
            }
            RecordKind::SnapshotCopy => {}
        }
    }
}

/// Replays one segment: a sealed one from `from` (the checkpoint's position, or the first
/// record), which must end exactly at its seal; an active one from its first record, applying
/// only what lies at or after `from`, which may end torn (past the last point known durable)
/// and is sealed where it ends. Returns the seal, or, in a salvage, `None` for a damaged
/// segment (its readable records are applied, and it is to be rescued).
pub fn replay_segment(
    segment: &SegmentMeta,
    entry: &SegmentEntry,
    from: u64,
    replay: &mut Replay,
    report: &mut RecoveryReport,
    damage: &mut Damage,
    cleanup: &mut Vec<Cleanup>,
) -> Result<Option<Seal>> {
    let mut batch: Vec<PendingRecord> = Vec::new();
    let id = segment.id();
    let path = segment.path();
    let scan_from = if entry.seal.is_some() {
        from
    } else {
        SEGMENT_HEADER_BYTES
    };
    // Where each record was, with its seqno: in a salvage, what bounds an unreadable region.
    let mut seqnos: Vec<(u64, u64)> = Vec::new();
    let summary = scan_records(
        &segment.file,
        scan_from,
        entry.seal.map_or(u64::MAX, |seal| seal.end_bytes),
        ReadPurpose::Other,
        |offset, record: &RecordRef<'_>| {
            if damage.is_salvage() {
                seqnos.push((offset, record.seqno));
            }
            if offset < from {
                return Ok(());
            }
            report.records_replayed += 1;
            report.bytes_replayed += record.encoded_len() as u64;
            if record.kvs_id >= replay.next_kvs_id {
                damage.found(Error::corruption(
                    path,
                    offset,
                    format!(
                        "a record of KVS {}, which the manifest never created (it lost edits?)",
                        record.kvs_id
                    ),
                ))?;
                replay.create_found_kvs(record.kvs_id, cleanup);
            }
            // Kept as the commit kept it: a non-empty put of at most `index_value_bytes_max`
            // bytes, stored compressed or not (only a value stored that short can be one).
            let max = replay.index_value_bytes_max;
            let short =
                record.kind == RecordKind::Put && (1..=max).contains(&record.stored_value.len());
            let value = match short.then(|| record.value()) {
                Some(Ok(value)) if keeps_value(&value, max) => Some(Box::from(&*value)),
                _ => None,
            };
            batch.push(PendingRecord {
                kind: record.kind,
                kvs_id: record.kvs_id,
                seqno: record.seqno,
                key: record.key.into(),
                value,
                location: Location {
                    segment: id,
                    offset: offset as u32,
                    len: record.encoded_len() as u32,
                },
            });
            if record.flags & FLAG_BATCH_CONTINUES == 0 {
                for pending in batch.drain(..) {
                    replay.apply(pending);
                }
            }
            Ok(())
        },
    )?;
    if from < summary.end_offset {
        report.segments_replayed += 1;
    }
    let must_reach = match entry.seal {
        Some(seal) => seal.end_bytes,
        None => from.max(entry.durable_end),
    };
    let whole = scan_from == SEGMENT_HEADER_BYTES;
    let problem = if let Some((offset, reason)) = summary.corruptions.first() {
        Some(Error::corruption(
            path,
            *offset,
            format!(
                "record fails validation ({reason}){}",
                more(summary.corruptions.len() - 1)
            ),
        ))
    } else if let Some(seal) = entry.seal.filter(|seal| {
        summary.end_offset != seal.end_bytes
            || summary.torn_tail
            || (whole
                && (summary.records != seal.record_count
                    || summary.records_crc != seal.records_crc))
    }) {
        Some(Error::corruption(
            path,
            summary.end_offset,
            format!(
                "sealed segment {}: its readable records end at {}{}, but it was sealed with {} \
                 records ending at {}",
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
        ))
    } else if entry.seal.is_none() && summary.end_offset < must_reach {
        Some(Error::corruption(
            path,
            summary.end_offset,
            format!(
                "active segment {}: its readable records end at {}, before {must_reach}, up to \
                 which they were durable (the manifest or the checkpoint says so)",
                id.0, summary.end_offset
            ),
        ))
    } else {
        None
    };
    if let Some(problem) = problem {
        damage.found(problem)?;
        // Salvage: note what could not be read, and rescue what could.
        let bound = |end: u64| {
            let next = seqnos.iter().find(|(offset, _)| *offset >= end);
            next.filter(|_| entry.head == HeadKind::Client)
                .map(|&(_, seqno)| seqno)
        };
        for (index, (start, _)) in summary.corruptions.iter().enumerate() {
            let end = summary
                .resumed_at
                .get(index)
                .copied()
                .unwrap_or(must_reach.max(summary.end_offset));
            damage.unreadable(path, *start, end, bound(end));
        }
        if summary.end_offset < must_reach {
            damage.unreadable(path, summary.end_offset, must_reach, None);
        }
        segment.quarantine();
        cleanup.push(Cleanup::Rescue(id));
        return Ok(None);
    }
    if entry.seal.is_some() {
        return Ok(entry.seal);
    }
    if !batch.is_empty() {
        report.incomplete_batches_dropped += 1;
    }
    if summary.torn_tail {
        report.torn_tails += 1;
        let file_len = segment.file.len_bytes()?;
        report.torn_tail_details.push(format!(
            "{}: readable records end at {} of {file_len} bytes, the rest no record or cut (a \
             write torn by the crash, or damage past the last durable point, {must_reach})",
            path.display(),
            summary.end_offset,
        ));
    }
    Ok(Some(Seal {
        end_bytes: summary.end_offset,
        record_count: summary.records,
        records_crc: summary.records_crc,
    }))
}

fn more(count: usize) -> String {
    match count {
        0 => String::new(),
        count => format!("; {count} more bad records after it"),
    }
}
