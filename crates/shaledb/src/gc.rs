//! The cleaner (garbage collection): copies the live records of a segment to the cleaner's own
//! log head, then frees the segment.
//!
//! Victims are chosen by cost-benefit (see [`cost_benefit`]) while the KVDB holds more dead data
//! than `space_target_live_ratio` allows. Survivors are tiered by generation: records leaving a
//! client segment go to the young cleaner head, records cleaned again go to the old one, so
//! cold data collects in segments that rarely need cleaning and never mixes with fresh writes.

use crate::error::{Error, Result};
use crate::index::{Entry, Key, Liveness, WALK_CHUNK_KEYS};
use crate::limits::{CLEANER_WALK_RECORDS_MAX, SEGMENT_HEADER_BYTES};
use crate::log::LogHead;
use crate::media::{MediaClass, ReadPurpose};
use crate::options::MediaPolicy;
use crate::record::{RecordKind, RecordRef, FLAG_BATCH_CONTINUES};
use crate::segment::{scan_records, HeadKind, Location, ScanSummary, SegmentId, SegmentMeta};
use crate::store::{KvsState, Store};
use parking_lot::{Mutex, MutexGuard};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A segment is not worth cleaning when more than this fraction of it is live.
const VICTIM_LIVE_RATIO_MAX: f64 = 0.95;
/// Dead bytes, in segments, the KVDB may hold whatever the live-ratio target says. A KVDB whose
/// live data is small against a segment can never meet the target (its active segments alone
/// exceed it), and cleaning each segment as soon as it is sealed would copy the newest versions
/// its keys will soon overwrite again; with this slack the victims are old enough to be dead
/// through and through, and cleaning them costs a scan and no copy (`copy_live`).
const DEAD_SEGMENTS_ALWAYS_ALLOWED: u64 = 2;

/// Index entries a walk of every index may visit per record of the victim, for the cleaner to
/// tell the victim's live records by that walk rather than by one lookup per record: a lookup
/// (a search of the B-tree of leaves, then of a leaf, ~230 ns each under redis-benchmark's
/// suite, most of it cache misses) costs several steps of a walk, which decodes each entry
/// next to the last.
const WALK_ENTRIES_PER_RECORD_MAX: u64 = 4;

/// Most victims one walk of the indexes collects live offsets for (`Cleaner::live_offsets`).
const WALK_VICTIMS_MAX: usize = 8;

/// The cleaner: handed the store, it moves live records out of segments and frees them.
pub struct Cleaner {
    store: Arc<Store>,
    /// Clean while live bytes / bytes on media is below this (`Options::space_target_live_ratio`).
    target_live_ratio: f64,
    /// Past this many bytes on staging, its oldest data moves down to capacity.
    staging_bytes_max: u64,
    /// Dead bytes below which the target is not enforced (`DEAD_SEGMENTS_ALWAYS_ALLOWED`).
    dead_bytes_allowed: u64,
    /// Dead bytes past the target left for a pause in client writes
    /// (`Options::cleaner_deferred_segments`).
    deferred_bytes: u64,
    /// One cleaning pass at a time; `check` holds it too, so no record moves while it reads.
    pass: Mutex<()>,
    /// The live offsets one walk of the indexes found in the victims it was made for and that
    /// have not been cleaned yet (see `live_offsets`), kept until a victim they do not cover
    /// comes; read and changed under `pass`.
    walked: Mutex<Vec<(SegmentId, Vec<u32>)>>,
}

/// Cost-benefit score of cleaning `segment` now (the LFS policy): the space freed, 1 - u,
/// times the age of its data, over the cost of reading the segment and rewriting its live
/// part, 1 + u. Old, mostly dead segments go first; young ones get time for more of their data
/// to die. Age is measured in sequence numbers since the segment was created.
pub fn cost_benefit(segment: &SegmentMeta, next_seqno: u64) -> f64 {
    let age = next_seqno
        .saturating_sub(segment.header.created_seqno)
        .max(1);
    score(segment.live_ratio(), age)
}

/// (1 - u) * age / (1 + u), with u clamped to [0, 1].
fn score(live_ratio: f64, age: u64) -> f64 {
    let u = live_ratio.clamp(0.0, 1.0);
    (1.0 - u) * age as f64 / (1.0 + u)
}

impl Cleaner {
    pub fn new(
        store: Arc<Store>,
        target_live_ratio: f64,
        staging_bytes_max: u64,
        segment_bytes: u64,
        deferred_segments: u64,
    ) -> Self {
        Cleaner {
            store,
            target_live_ratio,
            staging_bytes_max,
            dead_bytes_allowed: DEAD_SEGMENTS_ALWAYS_ALLOWED * segment_bytes,
            deferred_bytes: deferred_segments.saturating_mul(segment_bytes),
            pass: Mutex::new(()),
            walked: Mutex::new(Vec::new()),
        }
    }

    /// Holds off cleaning while the guard lives, so records stay where the index says.
    pub fn pause(&self) -> MutexGuard<'_, ()> {
        self.pass.lock()
    }

    /// Segments the cleaner may pick (sealed, not damaged; active segments are never sealed), best
    /// cost-benefit score first.
    fn candidates(&self) -> Vec<Arc<SegmentMeta>> {
        let store = &self.store;
        let next_seqno = store.next_seqno.load(Ordering::SeqCst);
        let mut segments: Vec<(f64, Arc<SegmentMeta>)> = store
            .segments
            .all()
            .into_iter()
            .filter(|segment| segment.is_sealed() && !segment.is_quarantined())
            .map(|segment| (cost_benefit(&segment, next_seqno), segment))
            .collect();
        segments.sort_by(|left, right| right.0.total_cmp(&left.0));
        segments.into_iter().map(|(_, segment)| segment).collect()
    }

    /// One step of background cleaning: frees a segment if the KVDB is over its space target.
    /// Returns whether it freed one. While clients are `writing`, the target is moved out by
    /// the deferred bytes and segments with nothing live wait too: their scan would take the
    /// writers' CPU for space that the pause after them frees as well.
    pub fn clean_step(&self, writing: bool) -> Result<bool> {
        let _one_pass = self.pass.lock();
        let store = &self.store;
        if store.corruption().is_some() {
            return Ok(false); // never make a damaged KVDB worse
        }
        if let Some(oldest) = self.staging_overflow() {
            return self.clean_segment(&oldest, true);
        }
        let segments = store.segments.all();
        let total: u64 = segments.iter().map(|segment| segment.disk_bytes()).sum();
        let live: u64 = segments.iter().map(|segment| segment.live_bytes()).sum();
        let Some(victim) = self.candidates().into_iter().next() else {
            return Ok(false);
        };
        // Inside the space reserve the cleaner works whatever the live ratio says.
        let pressure = store.space.under_pressure();
        let worth_cleaning = |deferred: u64| {
            let over_target = pressure
                || ((live as f64) < self.target_live_ratio * total.saturating_sub(deferred) as f64
                    && total - live.min(total) > self.dead_bytes_allowed.saturating_add(deferred));
            over_target && victim.live_ratio() < VICTIM_LIVE_RATIO_MAX
        };
        if !(worth_cleaning(0) || victim.live_bytes() == 0) {
            return Ok(false);
        }
        if writing && self.deferred_bytes > 0 && !worth_cleaning(self.deferred_bytes) {
            store.counters.cleaner_steps_deferred.add(1);
            return Ok(false);
        }
        self.clean_segment(&victim, false)
    }

    /// When the staging class is over its budget, its oldest sealed segment, whose live data the
    /// cleaner then moves down to capacity (whatever the KVSs' policies) instead of refusing writes.
    fn staging_overflow(&self) -> Option<Arc<SegmentMeta>> {
        let store = &self.store;
        if !store.heads.has_staging() {
            return None;
        }
        let staging: Vec<Arc<SegmentMeta>> = store
            .segments
            .all()
            .into_iter()
            .filter(|segment| segment.header.class == MediaClass::Staging)
            .collect();
        let used: u64 = staging.iter().map(|segment| segment.disk_bytes()).sum();
        if used <= self.staging_bytes_max {
            return None;
        }
        staging
            .into_iter()
            .filter(|segment| segment.is_sealed() && !segment.is_quarantined())
            .min_by_key(|segment| segment.header.created_seqno)
    }

    /// Seals the active segments and cleans every segment that holds dead data; returns how many
    /// were freed.
    pub fn compact(&self) -> Result<u64> {
        let _one_pass = self.pass.lock();
        let store = &self.store;
        if let Some(corruption) = store.corruption() {
            return Err(Error::CorruptionFound(corruption));
        }
        for head in store.heads.all() {
            head.seal_active()?;
        }
        let mut freed = 0;
        for victim in self.candidates() {
            if victim.live_ratio() < 1.0 && self.clean_segment(&victim, false)? {
                freed += 1;
            }
        }
        Ok(freed)
    }

    /// Copies what is live in `victim` to the cleaner head, makes the copies durable, and deletes
    /// the segment. Returns false (and frees nothing) if the segment does not read back as it
    /// was sealed.
    fn clean_segment(&self, victim: &Arc<SegmentMeta>, overflow: bool) -> Result<bool> {
        let store = &self.store;
        let victim_live_fraction = victim.live_ratio().min(1.0);
        let live_fraction_micros = (victim_live_fraction * 1e6) as u64;
        let summary = self.copy_live(victim, overflow, false)?;
        let whole = victim.sealed().is_some_and(|seal| {
            summary.corruptions.is_empty()
                && !summary.torn_tail
                && summary.end_offset == seal.end_bytes
                && summary.records == seal.record_count
                && summary.records_crc == seal.records_crc
        });
        if !whole {
            // What could not be read may hold the only copy of something: keep it all.
            let seal = victim.sealed();
            store.note_corruption(&Error::corruption(
                victim.path(),
                summary.end_offset,
                format!(
                    "the cleaner read {} records ending here ({} bad, torn end: {}), but the \
                     segment was sealed as {seal:?}; it is kept, never freed",
                    summary.records,
                    summary.corruptions.len(),
                    summary.torn_tail
                ),
            ));
            victim.quarantine();
            return Ok(false);
        }
        self.make_copies_durable()?;
        store.lifecycle.free(victim)?;
        if victim.header.class == MediaClass::Capacity {
            store.space.note_freed(victim.disk_bytes());
        }
        tracing::debug!(
            segment = ?victim.id(),
            records = summary.records,
            live_fraction = victim_live_fraction,
            "cleaned"
        );
        store.counters.cleaner_segments_cleaned.add(1);
        store
            .counters
            .cleaner_live_fraction_micros
            .add(live_fraction_micros);
        debug_assert_eq!(
            victim.live_bytes(),
            0,
            "every live record of a cleaned segment was moved"
        );
        Ok(true)
    }

    /// Salvage: copies the readable live records of the damaged segment `id` to fresh
    /// segments, drops the index entries of what could not be read (returned as "KVS key"),
    /// and sets the segment's file aside (kept, never deleted). Returns where it went.
    pub fn rescue(&self, id: SegmentId) -> Result<(PathBuf, Vec<String>)> {
        let _one_pass = self.pass.lock();
        let store = &self.store;
        let victim = store
            .segments
            .get(id)
            .expect("a segment to rescue is held by the store");
        self.copy_live(&victim, false, true)?;
        self.make_copies_durable()?;
        // What the index still finds in the victim could not be read: it is lost.
        let mut lost = Vec::new();
        for kvs in store.kvs.all() {
            for part in kvs.index.parts() {
                let mut index = part.write();
                let mut gone = Vec::new();
                index.for_each_version(|key, entry, _| {
                    if entry.location.segment == id {
                        gone.push((Key::from(key), entry));
                    }
                });
                for (key, entry) in gone {
                    index.remove(&key, entry.seqno, 0);
                    victim.sub_live(u64::from(entry.location.len));
                    lost.push(format!("{} {}", kvs.name, key.escape_ascii()));
                }
            }
        }
        let aside = store.lifecycle.set_aside(&victim)?;
        Ok((aside, lost))
    }

    /// The copies must be durable, and recorded so, before the originals go.
    fn make_copies_durable(&self) -> Result<()> {
        for head in self.store.heads.cleaners() {
            head.flush(true)?;
            head.record_durable_point()?;
        }
        Ok(())
    }

    /// The offsets, sorted, of every version the indexes hold in `victim`, when one walk of
    /// every index costs less than a lookup per record of the victim: a victim of many small
    /// records whose keys are few, as a hot key's overwrites make (`WALK_ENTRIES_PER_RECORD_MAX`).
    /// Any record of the victim not among them is dead for good: a version that leaves the
    /// index never comes back, nothing is appended to a sealed victim, and only the cleaner's
    /// pass, held now, moves versions (out of the segments it cleans, into segments not sealed
    /// yet). A commit that appended to the victim holds its partitions' write locks until it is
    /// applied, so the walk waits for it and sees it.
    ///
    /// The same holds for any segment sealed before the walk, however long after it is cleaned:
    /// its versions can only have left the index since. So a walk also collects the offsets of
    /// the next candidates the cleaner would take (`WALK_VICTIMS_MAX` in all, whose records add
    /// up to at most `CLEANER_WALK_RECORDS_MAX`), kept until their turn or until a victim they do
    /// not cover comes: cleaning in bursts, as runs of overwrites make it, walks the indexes once
    /// for several victims.
    /// A kept list may name versions that died since: `move_version`'s compare-and-swap under
    /// the write lock finds them dead, at the cost of a live one's move (asked under the read
    /// lock first, every live one cost two searches, and a burst of cleaning during YCSB's
    /// inserts more than the walks it saved).
    fn live_offsets(&self, victim: &SegmentMeta) -> Option<Vec<u32>> {
        let mut walked = self.walked.lock();
        if let Some(at) = walked.iter().position(|(id, _)| *id == victim.id()) {
            return Some(walked.swap_remove(at).1);
        }
        walked.clear();
        let records = victim.sealed()?.record_count;
        if records > CLEANER_WALK_RECORDS_MAX {
            return None;
        }
        let entries: u64 = self
            .store
            .kvs
            .all()
            .iter()
            .map(|kvs| kvs.index.len() as u64)
            .sum();
        if entries > WALK_ENTRIES_PER_RECORD_MAX * records {
            return None;
        }
        let mut batch = vec![(victim.id(), Vec::new())];
        let mut batch_records = records;
        for candidate in self.candidates() {
            if batch.len() == WALK_VICTIMS_MAX {
                break;
            }
            let Some(seal) = candidate.sealed() else {
                continue;
            };
            if candidate.id() != victim.id()
                && candidate.live_bytes() > 0
                && candidate.live_ratio() < VICTIM_LIVE_RATIO_MAX
                && batch_records + seal.record_count <= CLEANER_WALK_RECORDS_MAX
            {
                batch_records += seal.record_count;
                batch.push((candidate.id(), Vec::new()));
            }
        }
        // The indexes to walk are listed after the batch is chosen: a KVS created since could
        // have records in a segment sealed before `candidates()` looked, and a walk that missed
        // it would take them for dead (found by review). One created after this line appends
        // only to segments sealed after the batch was chosen, which are not in it.
        let indexes = self.store.kvs.all();
        let mut keep = |entry: Entry| {
            let segment = entry.location.segment;
            if let Some((_, offsets)) = batch.iter_mut().find(|(id, _)| *id == segment) {
                offsets.push(entry.location.offset);
            }
        };
        for kvs in &indexes {
            kvs.index.for_each_newest_entry(WALK_CHUNK_KEYS, &mut keep);
            for part in kvs.index.parts() {
                part.read().for_each_old_version(|_, entry| keep(entry));
            }
        }
        self.store.counters.cleaner_index_walks.add(1);
        for (_, offsets) in &mut batch {
            offsets.sort_unstable();
        }
        let (_, offsets) = batch.swap_remove(0);
        *walked = batch;
        Some(offsets)
    }

    /// Copies what is live in `victim` (as its index entries say) to the cleaner heads, and
    /// its tombstones unless they may be dropped (never in a `rescue`). Returns its scan.
    fn copy_live(
        &self,
        victim: &Arc<SegmentMeta>,
        overflow: bool,
        rescue: bool,
    ) -> Result<ScanSummary> {
        let store = &self.store;
        // Invariant I6: a tombstone may go only when the checkpoint covers it and no other segment
        // old enough to hold an older version of its key remains (a segment without records holds
        // none, and the cleaner never copies a version its tombstone made dead).
        let covered_seqno = store.covered_seqno.load(Ordering::SeqCst);
        let oldest_other_created = store
            .segments
            .all()
            .iter()
            .filter(|segment| {
                segment.id() != victim.id() && segment.end_bytes() > SEGMENT_HEADER_BYTES
            })
            .map(|segment| segment.header.created_seqno)
            .min()
            .unwrap_or(u64::MAX);
        let tombstone_droppable =
            |seqno: u64| !rescue && seqno < covered_seqno && oldest_other_created > seqno;
        // No index entry points into a segment without live bytes (I9), and a sealed segment
        // gains none: none of its versions needs the index asked (which, one lookup per record,
        // is most of what cleaning costs). A rescue asks anyway: it runs on a damaged KVDB.
        let holds_live_versions = rescue || victim.live_bytes() > 0;
        let walked = if holds_live_versions {
            self.live_offsets(victim)
        } else {
            None
        };
        // The scan meets records in offset order, the order of the walk's offsets: a cursor
        // steps through them (a binary search per record was a tenth of cleaning).
        let seen_live = walked.is_some();
        let mut walked_live = walked.as_deref().map(|offsets| offsets.iter().peekable());
        let mut kvs_of_records: Option<Arc<KvsState>> = None;
        // Where survivors go: on capacity, by generation; from staging, they stay only for
        // staging_only KVSs while staging is within its budget, and otherwise move down.
        let destination_for = |policy: MediaPolicy| -> &LogHead {
            match victim.header.class {
                MediaClass::Capacity => store.heads.at(
                    MediaClass::Capacity,
                    victim.header.head.cleaning_destination(),
                ),
                MediaClass::Staging if policy == MediaPolicy::StagingOnly && !overflow => {
                    store.heads.at(MediaClass::Staging, HeadKind::CleanerYoung)
                }
                MediaClass::Staging => store.heads.at(MediaClass::Capacity, HeadKind::CleanerYoung),
            }
        };
        scan_records(
            &victim.file,
            SEGMENT_HEADER_BYTES,
            victim.sealed().map_or(u64::MAX, |seal| seal.end_bytes),
            ReadPurpose::Cleaning,
            |offset, record| {
                let from = Location {
                    segment: victim.id(),
                    offset: offset as u32,
                    len: record.encoded_len() as u32,
                };
                // A victim's records mostly belong to one KVS: it is asked for by id only when
                // that changes.
                if kvs_of_records
                    .as_ref()
                    .is_none_or(|kvs| kvs.id != record.kvs_id || kvs.is_dropped())
                {
                    kvs_of_records = store.kvs.get(record.kvs_id);
                }
                let Some(kvs) = &kvs_of_records else {
                    return Ok(()); // its KVS was dropped
                };
                match record.kind {
                    RecordKind::Put | RecordKind::SnapshotCopy if holds_live_versions => {
                        if let Some(live) = &mut walked_live {
                            while live.next_if(|&&offset| offset < from.offset).is_some() {}
                            if live.next_if_eq(&&from.offset).is_none() {
                                return Ok(()); // dead for good, as the walk found
                            }
                        }
                        let destination = destination_for(kvs.options.media_policy);
                        if let Some(to) =
                            move_version(store, kvs, victim, record, from, destination, seen_live)?
                        {
                            store.counters.cleaner_bytes_copied.add(u64::from(to.len));
                        }
                    }
                    RecordKind::Put | RecordKind::SnapshotCopy => {}
                    RecordKind::Tombstone | RecordKind::PrefixTombstone => {
                        if tombstone_droppable(record.seqno) {
                            store.counters.cleaner_tombstones_dropped.add(1);
                        } else {
                            let to = copy_record(
                                destination_for(kvs.options.media_policy),
                                record,
                                record.kind,
                            )?;
                            store.counters.cleaner_bytes_copied.add(u64::from(to.len));
                        }
                    }
                }
                Ok(())
            },
        )
    }
}

/// Moves the version `record`, stored at `from` in `source`, to the cleaner head `destination`
/// if the index still needs it there (as the newest version, or as one a snapshot sees), and
/// points the index at the copy. Returns where the copy is, if it moved. `seen_live`: the
/// caller found the version in the index lately (a walk, perhaps one made for an earlier
/// victim; the sorter's run), so it most likely still lives and the read-lock check is skipped
/// (the write lock's compare-and-swap finds a version that died since). Only a job holding the
/// cleaner's pass lock may call it: it alone appends to cleaner heads.
pub(crate) fn move_version(
    store: &Store,
    kvs: &KvsState,
    source: &SegmentMeta,
    record: &RecordRef<'_>,
    from: Location,
    destination: &LogHead,
    seen_live: bool,
) -> Result<Option<Location>> {
    let partition = kvs.index.part(record.key);
    // Most records of a victim are dead, and a dead version never becomes needed again (the
    // index only drops versions): a read lock tells, without stopping the partition's readers
    // or queueing behind its writers, as the write lock below would for every record. A
    // version seen live lately skips it: the write lock below asks anyway.
    if !seen_live && partition.read().liveness(record.key, record.seqno, from) == Liveness::Dead {
        return Ok(None);
    }
    // Any roll or flush happens now, before the index lock (only the pass lock's holder appends
    // to cleaner heads, so the room is still there below).
    destination.make_room(record.encoded_len())?;
    // Holding the key's index partition lock across the append makes the move a
    // compare-and-swap: a concurrent overwrite either happened before (the record is dead) or
    // waits.
    let mut index = partition.write();
    let moved = index.relocate_with(record.key, record.seqno, from, |liveness| {
        // Told `Newest` or `Snapshot`: a dead version is not copied.
        let kind = match liveness {
            Liveness::Snapshot => RecordKind::SnapshotCopy,
            Liveness::Newest | Liveness::Dead => RecordKind::Put,
        };
        copy_record(destination, record, kind)
    })?;
    let Some(to) = moved else {
        return Ok(None);
    };
    // Counted before the lock goes: a commit that overwrites the key next frees the copy's
    // bytes from its new segment, which must hold them by then (counted after, a new segment's
    // live bytes went below zero for that moment: a flaky debug assertion under the sorter's
    // test, its cause found 2026-11-29).
    source.sub_live(u64::from(from.len));
    let moved_bytes = u64::from(to.len);
    store
        .segments
        .with(to.segment, |segment| segment.add_live(moved_bytes));
    drop(index);
    Ok(Some(to))
}

/// Appends `record` as `kind`, outside any batch, to the cleaner head `destination`: its
/// stored bytes as they are (a compressed value stays compressed, its flag kept; nothing is
/// compressed or decompressed again).
fn copy_record(
    destination: &LogHead,
    record: &RecordRef<'_>,
    kind: RecordKind,
) -> Result<Location> {
    let mut appender = destination.lock();
    appender.reserve(record.encoded_len())?;
    Ok(appender.append(&RecordRef {
        kind,
        flags: record.flags & !FLAG_BATCH_CONTINUES,
        ..*record
    }))
}

#[cfg(test)]
mod tests {
    use super::score;

    #[test]
    fn cost_benefit_prefers_old_and_empty_segments() {
        assert!(
            score(0.5, 1000) > score(0.5, 10),
            "older wins at equal utilization"
        );
        assert!(
            score(0.2, 100) > score(0.6, 100),
            "emptier wins at equal age"
        );
        assert!(
            score(0.6, 10_000) > score(0.2, 100),
            "age can outweigh utilization"
        );
        assert_eq!(score(1.0, 1_000_000), 0.0, "a full segment frees nothing");
        assert_eq!(score(1.3, 10), 0.0, "utilization is clamped");
    }
}
