//! The cleaner (garbage collection): copies the live records of a segment to the cleaner's own
//! log head, then frees the segment.
//!
//! Policy here is simple and greedy (least live first) and runs only while the KVDB holds more
//! dead data than `space_target_live_ratio` allows; the mechanism (liveness by compare-and-swap
//! on the index, tombstone dropping, durable copies before the free) is what later policies
//! build on.

use crate::db::Inner;
use crate::error::Result;
use crate::index::Liveness;
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::log::Location;
use crate::media::sync_dir;
use crate::record::{self, RecordKind, RecordRef};
use crate::segment::{scan_records, SegmentMeta};
use std::sync::Arc;

/// A segment is not worth cleaning when more than this fraction of it is live.
const VICTIM_LIVE_RATIO_MAX: f64 = 0.95;

/// Segments the cleaner may pick: sealed, not damaged, not the active segment of a head.
fn candidates(inner: &Inner) -> Vec<Arc<SegmentMeta>> {
    let mut segments: Vec<_> = inner
        .segments
        .all()
        .into_iter()
        .filter(|segment| segment.is_sealed() && !segment.is_quarantined())
        .collect();
    segments.sort_by(|left, right| left.live_ratio().total_cmp(&right.live_ratio()));
    segments
}

/// One step of background cleaning: frees a segment if the KVDB is over its space target.
/// Returns whether it freed one.
pub fn clean_step(inner: &Inner) -> Result<bool> {
    let _one_pass = inner.cleaner_lock.lock();
    let segments = inner.segments.all();
    let total: u64 = segments.iter().map(|segment| segment.disk_bytes()).sum();
    let live: u64 = segments.iter().map(|segment| segment.live_bytes()).sum();
    let Some(victim) = candidates(inner).into_iter().next() else {
        return Ok(false);
    };
    let over_target = (live as f64) < inner.options.space_target_live_ratio * total as f64;
    if victim.live_bytes() > 0 && !(over_target && victim.live_ratio() < VICTIM_LIVE_RATIO_MAX) {
        return Ok(false);
    }
    clean_segment(inner, &victim)
}

/// Seals the active segments and cleans every segment that holds dead data; returns how many
/// were freed.
pub fn compact(inner: &Inner) -> Result<u64> {
    let _one_pass = inner.cleaner_lock.lock();
    inner.client_head.seal_active()?;
    inner.cleaner_head.seal_active()?;
    let mut freed = 0;
    for victim in candidates(inner) {
        if victim.live_ratio() < 1.0 && clean_segment(inner, &victim)? {
            freed += 1;
        }
    }
    Ok(freed)
}

/// Copies what is live in `victim` to the cleaner head, makes the copies durable, and deletes
/// the segment. Returns false (and frees nothing) if the segment holds corrupt records.
fn clean_segment(inner: &Inner, victim: &Arc<SegmentMeta>) -> Result<bool> {
    // Invariant I6: a tombstone may go only when the checkpoint covers it and no other segment
    // old enough to hold an older version of its key remains (a segment without records holds
    // none, and the cleaner never copies a version its tombstone made dead).
    let covered_seqno = inner
        .covered_seqno
        .load(std::sync::atomic::Ordering::SeqCst);
    let oldest_other_created = inner
        .segments
        .all()
        .iter()
        .filter(|segment| segment.id() != victim.id() && segment.end_bytes() > SEGMENT_HEADER_BYTES)
        .map(|segment| segment.header.created_seqno)
        .min()
        .unwrap_or(u64::MAX);
    let tombstone_droppable = |seqno: u64| seqno < covered_seqno && oldest_other_created > seqno;
    let mut encoded = Vec::new();
    let summary = scan_records(&victim.file, SEGMENT_HEADER_BYTES, |offset, record| {
        let from = Location {
            segment: victim.id(),
            offset: offset as u32,
            len: record.encoded_len() as u32,
        };
        let Some(kvs) = inner.kvs_by_id(record.kvs_id) else {
            return Ok(()); // its KVS was dropped
        };
        match record.kind {
            RecordKind::Put | RecordKind::SnapshotCopy => {
                // Holding the index lock across the append makes the move a compare-and-swap:
                // a concurrent overwrite either happened before (the record is dead) or waits.
                let mut index = kvs.index.write();
                let kind = match index.liveness(record.key, record.seqno, from) {
                    Liveness::Dead => return Ok(()),
                    Liveness::Newest => RecordKind::Put,
                    Liveness::Snapshot => RecordKind::SnapshotCopy,
                };
                let to = copy_record(inner, &mut encoded, record, kind)?;
                let moved = index.relocate(record.key, record.seqno, from, to);
                debug_assert!(
                    moved,
                    "the index lock is held, so the version cannot have changed"
                );
                victim.sub_live(u64::from(from.len));
                if let Some(segment) = inner.segments.get(to.segment) {
                    segment.add_live(u64::from(to.len));
                }
            }
            RecordKind::Tombstone | RecordKind::PrefixTombstone => {
                if tombstone_droppable(record.seqno) {
                    inner.counters.cleaner_tombstones_dropped.add(1);
                } else {
                    copy_record(inner, &mut encoded, record, record.kind)?;
                }
            }
        }
        Ok(())
    })?;
    if !summary.corruptions.is_empty() {
        tracing::error!(segment = %victim.path().display(), corruptions = ?summary.corruptions,
            "not freeing a segment with corrupt records");
        victim.quarantine();
        return Ok(false);
    }
    // The copies must be durable before the originals go.
    inner.cleaner_head.flush(true)?;
    inner.segments.remove(victim.id());
    std::fs::remove_file(victim.path())
        .map_err(|error| crate::Error::io(format!("remove {}", victim.path().display()), error))?;
    sync_dir(
        victim
            .path()
            .parent()
            .expect("segments live in a directory"),
    )?;
    inner.counters.cleaner_segments_cleaned.add(1);
    debug_assert_eq!(
        victim.live_bytes(),
        0,
        "every live record of a cleaned segment was moved"
    );
    Ok(true)
}

/// Appends `record` as `kind`, outside any batch, to the cleaner head.
fn copy_record(
    inner: &Inner,
    encoded: &mut Vec<u8>,
    record: &RecordRef<'_>,
    kind: RecordKind,
) -> Result<Location> {
    encoded.clear();
    record::encode(
        encoded,
        &RecordRef {
            kind,
            flags: 0,
            ..*record
        },
    );
    let mut appender = inner.cleaner_head.lock();
    appender.reserve(encoded.len())?;
    let location = appender.append(encoded);
    inner
        .counters
        .cleaner_bytes_copied
        .add(encoded.len() as u64);
    Ok(location)
}
