//! A KVS's index split by key hash into partitions, each behind its own lock: commits whose
//! keys fall in different partitions apply in parallel, and a reader waits only for a writer
//! of its own key's partition. Ordered reads merge the partitions, except a read within one
//! key group (`KeyGroups`), whose keys all hash to one partition.

use super::entry::{Entry, Key, Visible};
use super::kvs_index::{KvsIndex, RangeSize};
use crate::bounds::cmp_prefix_end;
use crate::key_groups::KeyGroups;
use bytes::Bytes;
use std::hash::Hasher;
use std::ops::Bound;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{PoisonError, RwLockReadGuard, RwLockWriteGuard};

/// Partitions per KVS. Enough that two writers (or a writer and a reader) rarely meet in one,
/// few enough that a merged range read asks each for only a handful of keys.
pub const PARTITIONS: usize = 16;
/// Index entries a walk of a whole index (a checkpoint's, the cleaner's) reads per hold of a
/// partition's read lock: a writer to that partition waits for at most this many.
pub const WALK_CHUNK_KEYS: usize = 4096;
const _: () = assert!(
    PARTITIONS <= u32::BITS as usize,
    "a bit of `keeping_old` per partition"
);

/// One partition's lock: std's `RwLock`, which spins briefly and then sleeps on a futex, where
/// parking_lot's also yields the CPU several times first. With two network threads committing
/// batches of ten keys (MSET), each batch holding about ten of the sixteen partitions while it
/// applies, sched_yield and its context switches took about a twentieth of the server's CPU.
/// A partition's lock has no poisoning, as parking_lot's had none: a panic under it is the
/// process's end, not a state a later reader must refuse.
pub struct PartitionLock<T>(std::sync::RwLock<T>);

impl<T> PartitionLock<T> {
    fn new(value: T) -> Self {
        PartitionLock(std::sync::RwLock::new(value))
    }

    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Keys each partition gives a merged range read beyond its even share of the limit, for the
/// spread of the hash.
const MERGE_SLACK: usize = 4;

/// Up to a limit of (key, version) pairs in order, and whether the range holds no more.
#[derive(Debug, Default)]
pub struct Chunk {
    pub entries: Vec<Visible>,
    pub exhausted: bool,
}

pub struct PartitionedIndex {
    parts: Box<[PartitionLock<KvsIndex>]>,
    groups: KeyGroups,
    /// Bit `p` set: partition `p` keeps old versions for snapshots. Changed only under that
    /// partition's write lock (`note_old_versions`), read without it by a snapshot's release.
    keeping_old: AtomicU32,
}

impl Default for PartitionedIndex {
    fn default() -> Self {
        PartitionedIndex::new(KeyGroups::None)
    }
}

impl PartitionedIndex {
    pub fn new(groups: KeyGroups) -> Self {
        PartitionedIndex {
            parts: (0..PARTITIONS)
                .map(|_| PartitionLock::new(KvsIndex::default()))
                .collect(),
            groups,
            keeping_old: AtomicU32::new(0),
        }
    }

    /// Records whether partition `part`, which the caller holds write-locked as `index`, keeps
    /// old versions.
    pub fn note_old_versions(&self, part: usize, index: &KvsIndex) {
        let bit = 1 << part;
        let marked = self.keeping_old.load(Ordering::SeqCst) & bit != 0;
        match (index.keeps_old_versions(), marked) {
            (true, false) => {
                self.keeping_old.fetch_or(bit, Ordering::SeqCst);
            }
            (false, true) => {
                self.keeping_old.fetch_and(!bit, Ordering::SeqCst);
            }
            _ => {}
        }
    }

    /// Whether any partition kept old versions when last noted.
    pub fn keeps_old_versions(&self) -> bool {
        self.keeping_old.load(Ordering::SeqCst) != 0
    }

    /// The partitions that kept old versions when last noted.
    pub fn parts_keeping_old_versions(&self) -> impl Iterator<Item = usize> {
        let mask = self.keeping_old.load(Ordering::SeqCst);
        (0..PARTITIONS).filter(move |part| mask & (1 << part) != 0)
    }

    /// The partition `key` belongs to: its group's, by hash. In memory only (nothing on media
    /// depends on it): a commit computes it about three times per record, so the hash is
    /// FxHash's few inline instructions rather than a checksum's call.
    pub fn partition_of(&self, key: &[u8]) -> usize {
        let group = self.groups.group_of(key).unwrap_or(key);
        let mut hasher = rustc_hash::FxHasher::default();
        hasher.write(group);
        (hasher.finish() % PARTITIONS as u64) as usize
    }

    /// The partitions that may hold keys starting with `prefix`: its group's, if it is within
    /// one, else every partition.
    pub fn partitions_of_prefix(&self, prefix: &[u8]) -> std::ops::Range<usize> {
        match self.groups.group_of(prefix) {
            Some(group) => {
                let part = self.partition_of(group);
                part..part + 1
            }
            None => 0..PARTITIONS,
        }
    }

    /// The partition holding `key`.
    pub fn part(&self, key: &[u8]) -> &PartitionLock<KvsIndex> {
        &self.parts[self.partition_of(key)]
    }

    /// The one partition holding every key of `lower..upper`, when the range lies within the
    /// group of its lower bound.
    fn part_of_range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Option<&PartitionLock<KvsIndex>> {
        let (Bound::Included(lower) | Bound::Excluded(lower)) = lower else {
            return None;
        };
        let group = self.groups.group_of(lower)?;
        // Past the group's keys starts its prefix's successor; an all-0xff group has none (its
        // keys run to the end of all keys).
        let end_order = |upper: &[u8]| cmp_prefix_end(upper, group);
        let within = match upper {
            Bound::Included(upper) => end_order(upper).is_none_or(|order| order.is_lt()),
            Bound::Excluded(upper) => end_order(upper).is_none_or(|order| order.is_le()),
            Bound::Unbounded => end_order(&[]).is_none(),
        };
        within.then(|| self.part(group))
    }

    /// Every partition, in lock order (the partition of a key is at [`partition_of`]).
    pub fn parts(&self) -> &[PartitionLock<KvsIndex>] {
        &self.parts
    }

    /// The partition holding `key`, for a sole owner (recovery) that needs no lock.
    pub fn part_mut(&mut self, key: &[u8]) -> &mut KvsIndex {
        let part = self.partition_of(key);
        self.parts[part].get_mut()
    }

    /// Every partition, for a sole owner.
    pub fn parts_mut(&mut self) -> impl Iterator<Item = &mut KvsIndex> {
        self.parts.iter_mut().map(PartitionLock::get_mut)
    }

    /// Write-locks every partition, in lock order.
    pub fn write_all(&self) -> Vec<RwLockWriteGuard<'_, KvsIndex>> {
        self.parts.iter().map(PartitionLock::write).collect()
    }

    /// Whether `key` has a value now.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.part(key).read().contains(key)
    }

    /// The version of `key` a reader at `at` (the newest if `None`) sees, and a copy of the
    /// value the index keeps with it, if any, taken under the partition's read lock.
    pub fn get_with_value(&self, key: &[u8], at: Option<u64>) -> Option<(Entry, Option<Bytes>)> {
        let part = self.part(key).read();
        let (entry, value) = part.get_with_value(key, at)?;
        Some((entry, value.map(Bytes::copy_from_slice)))
    }

    /// The keys in every partition, each counted under its own read lock (so a batch being
    /// applied may be counted in part).
    pub fn len(&self) -> usize {
        self.parts.iter().map(|part| part.read().len()).sum()
    }

    /// The keys within `lower..upper` and their records' bytes, each partition walked under
    /// its own read lock.
    pub fn range_size(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> RangeSize {
        self.parts.iter().fold(RangeSize::default(), |total, part| {
            let size = part.read().range_size(lower, upper);
            RangeSize {
                keys: total.keys + size.keys,
                bytes: total.bytes + size.bytes,
            }
        })
    }

    /// Estimated DRAM the newest versions hold (see `PackedMap`).
    pub fn estimated_dram_bytes(&self) -> u64 {
        self.parts
            .iter()
            .map(|part| part.read().estimated_dram_bytes())
            .sum()
    }

    /// Every version the index holds and the value it keeps, partition by partition (each
    /// under its read lock), in no particular key order.
    pub fn for_each_version(&self, mut visit: impl FnMut(&[u8], Entry, Option<&[u8]>)) {
        for part in self.parts.iter() {
            part.read().for_each_version(&mut visit);
        }
    }

    /// Calls `visit` with every key that has a value now, its newest entry and the value kept
    /// with it, partition by partition, each in key order, holding a partition's read lock for
    /// at most `chunk` keys at a time. Keys come in no global order: what reads it (a
    /// checkpoint) needs none, and a merge of the partitions cost most of a checkpoint's CPU.
    pub fn for_each_newest(
        &self,
        chunk: usize,
        mut visit: impl FnMut(&[u8], Entry, Option<&[u8]>),
    ) {
        let chunk = chunk.max(1);
        self.walk_in_chunks(|part, after| part.visit_newest_after(after, chunk, &mut visit));
    }

    /// Like [`PartitionedIndex::for_each_newest`], with each newest entry only (no key is
    /// built): what a walk for where versions are, the cleaner's, needs.
    pub fn for_each_newest_entry(&self, chunk: usize, mut visit: impl FnMut(Entry)) {
        let chunk = chunk.max(1);
        self.walk_in_chunks(|part, after| {
            part.visit_newest_entries_after(after, chunk, &mut visit)
        });
    }

    /// Runs `chunk_after(partition, after)` under each partition's read lock in turn, from
    /// its first key, again after the key each call returns (where it stopped) until one
    /// returns `None`.
    fn walk_in_chunks(&self, mut chunk_after: impl FnMut(&KvsIndex, Option<&[u8]>) -> Option<Key>) {
        for part in self.parts.iter() {
            let mut after: Option<Key> = None;
            while let Some(stopped_at) = chunk_after(&part.read(), after.as_deref()) {
                after = Some(stopped_at);
            }
        }
    }

    /// When `lower..upper` lies within one key group: the first key in it that has a value now,
    /// read under that one partition's lock (a batch is applied under the locks of all its
    /// partitions, so the answer sees all of one or none of it). `None` when the range spans
    /// partitions, and only a cursor at a snapshot reads it at one moment.
    pub fn first_key_in_group(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Option<Option<Key>> {
        let part = self.part_of_range(lower, upper)?;
        Some(part.read().first_key(lower, upper))
    }

    /// When `lower..upper` lies within one key group: how many keys that have a value now it
    /// holds and the keys at the positions `choose` picks for that count, under that one
    /// partition's lock. `None` when the range spans partitions.
    pub fn count_and_pick_in_group(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        choose: impl FnOnce(usize) -> Vec<usize>,
    ) -> Option<(usize, Vec<Key>)> {
        let part = self.part_of_range(lower, upper)?;
        Some(part.read().count_and_pick(lower, upper, choose))
    }

    /// When `lower..upper` lies within one key group and holds at most `limit` keys: each key
    /// that has a value now, with its newest entry and the value kept with it, in key order,
    /// read under that one partition's lock (all of one batch or none of it). `None` when the
    /// range spans partitions or holds more keys.
    pub fn collect_group(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        limit: usize,
    ) -> Option<Vec<Visible>> {
        let part = self.part_of_range(lower, upper)?;
        let newest = u64::MAX;
        let entries =
            part.read()
                .collect_visible(lower, upper, newest, limit.saturating_add(1), false);
        (entries.len() <= limit).then_some(entries)
    }

    /// Up to `limit` (key, version) pairs visible at `at` within `lower..upper`, in key order
    /// (descending when `reverse`). Not exhausted means the range may hold more after the last.
    pub fn collect_visible(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        at: u64,
        limit: usize,
        reverse: bool,
    ) -> Chunk {
        if let Some(part) = self.part_of_range(lower, upper) {
            let entries = part
                .read()
                .collect_visible(lower, upper, at, limit, reverse);
            let exhausted = entries.len() < limit;
            return Chunk { entries, exhausted };
        }
        self.merged(limit, reverse, |part, per_part| {
            part.collect_visible(lower, upper, at, per_part, reverse)
        })
    }

    /// Merges the first keys of every partition, as `read(partition, count)` gives them in
    /// order. A partition that returned all it was asked for may hold more keys after its last,
    /// so the merge is complete only up to the first such last key; it is cut there.
    fn merged(
        &self,
        limit: usize,
        reverse: bool,
        read: impl Fn(&KvsIndex, usize) -> Vec<Visible>,
    ) -> Chunk {
        if limit == 0 {
            return Chunk::default();
        }
        // Keys hash evenly, so each partition holds about 1/PARTITIONS of the next `limit`.
        // Each key read costs an allocation and a place in the sort: asking for twice the
        // share cost a scan of ~50 keys (YCSB E) 25% more CPU than one lock did.
        let per_part = (limit.div_ceil(PARTITIONS) + MERGE_SLACK).min(limit);
        let before = |a: &[u8], b: &[u8]| if reverse { a > b } else { a < b };
        let mut entries = Vec::new();
        let mut cut: Option<Key> = None;
        for part in self.parts.iter() {
            let chunk = read(&part.read(), per_part);
            if chunk.len() == per_part {
                let last = &chunk[per_part - 1].key;
                if cut.as_ref().is_none_or(|cut| before(last, cut)) {
                    cut = Some(last.clone());
                }
            }
            entries.extend(chunk);
        }
        entries.sort_unstable_by(|a, b| {
            if reverse {
                b.key.cmp(&a.key)
            } else {
                a.key.cmp(&b.key)
            }
        });
        if let Some(cut) = &cut {
            let complete = entries.partition_point(|visible| !before(cut, &visible.key));
            entries.truncate(complete);
        }
        let exhausted = cut.is_none() && entries.len() <= limit;
        entries.truncate(limit);
        Chunk { entries, exhausted }
    }
}

#[cfg(test)]
mod tests;
