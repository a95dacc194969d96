//! The per-KVS index in DRAM: for each key, where its newest record lives.
//!
//! Older versions are kept, in a separate map, only while an open snapshot can see them, so the
//! common case (no snapshots) pays nothing for them. A version written at `seqno` and replaced
//! at `superseded` is visible to a snapshot at `at` when `seqno <= at < superseded`.

use super::entry::{Entry, Key, Visible};
use super::packed::PackedMap;
use crate::segment::Location;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::ops::{Bound, ControlFlow};

/// A replaced version kept for snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldVersion {
    pub entry: Entry,
    pub superseded: u64,
}

/// Whether a record found on media is still needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// The newest version of its key.
    Newest,
    /// An old version some snapshot can see.
    Snapshot,
    Dead,
}

/// What a key range holds: see [`KvsIndex::range_size`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RangeSize {
    pub keys: u64,
    pub bytes: u64,
}

#[derive(Default)]
pub struct KvsIndex {
    newest: PackedMap,
    old: BTreeMap<Key, Vec<OldVersion>>,
}

impl KvsIndex {
    pub fn len(&self) -> usize {
        self.newest.len()
    }

    /// The keys within `lower..upper` that have a value now, and the bytes of their records on
    /// media (newest versions only).
    pub fn range_size(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> RangeSize {
        let mut size = RangeSize::default();
        if !crate::bounds::is_empty_range(lower, upper) {
            self.newest.visit_range(lower, upper, false, |_, entry, _| {
                size.keys += 1;
                size.bytes += u64::from(entry.location.len);
                ControlFlow::Continue(())
            });
        }
        size
    }

    /// Whether any replaced version is kept for a snapshot.
    pub fn keeps_old_versions(&self) -> bool {
        !self.old.is_empty()
    }

    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        self.newest.get(key)
    }

    /// The version of `key` a reader at `at` (the newest if `None`) sees, and the value kept
    /// with it in the index, if any (only the newest version keeps one).
    pub fn get_with_value(&self, key: &[u8], at: Option<u64>) -> Option<(Entry, Option<&[u8]>)> {
        let newest = self.newest.get_with_value(key);
        match at {
            None => newest,
            Some(at) => self.visible(key, newest, at),
        }
    }

    /// The version of `key` a reader at `at` sees, given its newest version and kept value:
    /// those if visible, else the old version kept for the reader's snapshot, with no value.
    fn visible<'a>(
        &'a self,
        key: &[u8],
        newest: Option<(Entry, Option<&'a [u8]>)>,
        at: u64,
    ) -> Option<(Entry, Option<&'a [u8]>)> {
        match newest {
            Some(found) if found.0.seqno <= at => Some(found),
            _ => self
                .old
                .get(key)?
                .iter()
                .find(|version| version.entry.seqno <= at && at < version.superseded)
                .map(|version| (version.entry, None)),
        }
    }

    /// Makes `entry` the newest version of `key`, with its value kept in the index if `value`
    /// is given (see `Options::index_value_bytes_max`). Returns the replaced version when no
    /// snapshot (the newest open one is `snapshot_max`, 0 if none) can see it, so the caller
    /// frees it. A replaced version kept for snapshots keeps no value: it is read from media.
    pub fn put(
        &mut self,
        key: &[u8],
        entry: Entry,
        value: Option<&[u8]>,
        snapshot_max: u64,
    ) -> Option<Entry> {
        let replaced = self.newest.insert(key, entry, value)?;
        self.retire(key, replaced, entry.seqno, snapshot_max)
    }

    /// Inserts without snapshot bookkeeping, for recovery and checkpoint loading.
    pub fn put_recovered(
        &mut self,
        key: &[u8],
        entry: Entry,
        value: Option<&[u8]>,
    ) -> Option<Entry> {
        self.newest.insert_mostly_ascending(key, entry, value)
    }

    /// Removes `key` (deleted at `seqno`); returns the removed version if no snapshot needs it.
    pub fn remove(&mut self, key: &[u8], seqno: u64, snapshot_max: u64) -> Option<Entry> {
        let removed = self.newest.remove(key)?;
        self.retire(key, removed, seqno, snapshot_max)
    }

    /// Estimated DRAM this index holds for its newest versions (see `PackedMap`).
    pub fn estimated_dram_bytes(&self) -> u64 {
        self.newest.estimated_dram_bytes()
    }

    /// Removes every key starting with `prefix` that is older than `seqno`; returns the removed
    /// versions no snapshot needs.
    pub fn remove_prefix(&mut self, prefix: &[u8], seqno: u64, snapshot_max: u64) -> Vec<Entry> {
        let mut doomed: Vec<Key> = Vec::new();
        self.newest.visit_range(
            Bound::Included(prefix),
            Bound::Unbounded,
            false,
            |key, entry, _| {
                if !key.starts_with(prefix) {
                    return ControlFlow::Break(());
                }
                if entry.seqno < seqno {
                    doomed.push(key.into());
                }
                ControlFlow::Continue(())
            },
        );
        doomed
            .iter()
            .filter_map(|key| self.remove(key, seqno, snapshot_max))
            .collect()
    }

    fn retire(
        &mut self,
        key: &[u8],
        replaced: Entry,
        superseded: u64,
        snapshot_max: u64,
    ) -> Option<Entry> {
        if snapshot_max >= replaced.seqno {
            self.old.entry(key.into()).or_default().push(OldVersion {
                entry: replaced,
                superseded,
            });
            None
        } else {
            Some(replaced)
        }
    }

    /// Is the record of `key` at `seqno` stored at `location` still needed?
    pub fn liveness(&self, key: &[u8], seqno: u64, location: Location) -> Liveness {
        let wanted = Entry { location, seqno };
        if self.newest.get(key) == Some(wanted) {
            return Liveness::Newest;
        }
        let kept = self
            .old
            .get(key)
            .is_some_and(|versions| versions.iter().any(|version| version.entry == wanted));
        if kept {
            Liveness::Snapshot
        } else {
            Liveness::Dead
        }
    }

    /// Moves the version of `key` at `seqno` from `from` to `to` if it is still stored at `from`
    /// (a compare-and-swap for the cleaner). Returns whether it moved.
    pub fn relocate(&mut self, key: &[u8], seqno: u64, from: Location, to: Location) -> bool {
        let wanted = Entry {
            location: from,
            seqno,
        };
        let moved = Entry {
            location: to,
            seqno,
        };
        if self.newest.relocate_if(key, wanted, moved) {
            return true;
        }
        if let Some(versions) = self.old.get_mut(key) {
            if let Some(version) = versions.iter_mut().find(|version| version.entry == wanted) {
                version.entry.location = to;
                return true;
            }
        }
        false
    }

    /// Drops old versions no snapshot in `is_visible_to_some_snapshot` needs; returns them.
    pub fn prune_old(&mut self, mut needed: impl FnMut(u64, u64) -> bool) -> Vec<Entry> {
        let mut freed = Vec::new();
        self.old.retain(|_, versions| {
            versions.retain(|version| {
                let keep = needed(version.entry.seqno, version.superseded);
                if !keep {
                    freed.push(version.entry);
                }
                keep
            });
            !versions.is_empty()
        });
        freed
    }

    /// Every version the index holds (newest and kept), with the value it keeps, for
    /// accounting and checks.
    pub fn for_each_version(&self, mut visit: impl FnMut(&[u8], Entry, Option<&[u8]>)) {
        self.newest.visit_range(
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            |key, entry, value| {
                visit(key, entry, value);
                ControlFlow::Continue(())
            },
        );
        self.for_each_old_version(|key, entry| visit(key, entry, None));
    }

    /// Every older version kept for a snapshot.
    pub fn for_each_old_version(&self, mut visit: impl FnMut(&[u8], Entry)) {
        for (key, versions) in &self.old {
            for version in versions {
                visit(key, version.entry);
            }
        }
    }

    /// Calls `visit` with up to `limit` newest entries with keys after `after` (all keys if
    /// `None`), in order; returns the last key visited when it stopped at `limit`, where a
    /// following call resumes.
    pub fn visit_newest_after(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        mut visit: impl FnMut(&[u8], Entry, Option<&[u8]>),
    ) -> Option<Key> {
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut visited = 0;
        let mut stopped_at = None;
        if limit > 0 {
            self.newest
                .visit_range(lower, Bound::Unbounded, false, |key, entry, value| {
                    visit(key, entry, value);
                    visited += 1;
                    if visited == limit {
                        stopped_at = Some(key.into());
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                });
        }
        stopped_at
    }

    /// The first key within `lower..upper` that has a value now (a newest version).
    pub fn first_key(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Option<Key> {
        let mut first = None;
        if !crate::bounds::is_empty_range(lower, upper) {
            self.newest.visit_range(lower, upper, false, |key, _, _| {
                first = Some(key.into());
                ControlFlow::Break(())
            });
        }
        first
    }

    /// Up to `limit` versions visible at `at` within `lower..upper`, in key order (descending
    /// when `reverse`), with the values the index keeps.
    pub fn collect_visible(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        at: u64,
        limit: usize,
        reverse: bool,
    ) -> Vec<Visible> {
        let mut out = Vec::with_capacity(limit.min(256));
        if limit == 0 || crate::bounds::is_empty_range(lower, upper) {
            return out;
        }
        // Keys only kept versions have (deleted since a snapshot) merge in between the newest
        // keys, each once, in the requested order.
        let old_keys = self
            .old
            .range::<[u8], _>((lower, upper))
            .map(|(key, _)| key);
        let mut old_only: Box<dyn Iterator<Item = &Key>> = if reverse {
            Box::new(old_keys.rev())
        } else {
            Box::new(old_keys)
        };
        let mut pending_old = old_only.next();
        let comes_first = |old: &[u8], newest: &[u8]| {
            if reverse {
                old > newest
            } else {
                old < newest
            }
        };
        let emit = |key: &[u8], newest: Option<(Entry, Option<&[u8]>)>, out: &mut Vec<Visible>| {
            if let Some((entry, value)) = self.visible(key, newest, at) {
                out.push(Visible {
                    key: key.into(),
                    entry,
                    value: value.map(Bytes::copy_from_slice),
                });
            }
            if out.len() == limit {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let flow = {
            let mut flow = ControlFlow::Continue(());
            self.newest
                .visit_range(lower, upper, reverse, |key, entry, value| {
                    while let Some(old) = pending_old.filter(|old| comes_first(old, key)) {
                        flow = emit(old, None, &mut out);
                        pending_old = old_only.next();
                        if flow.is_break() {
                            return flow;
                        }
                    }
                    if pending_old.is_some_and(|old| &**old == key) {
                        pending_old = old_only.next();
                    }
                    flow = emit(key, Some((entry, value)), &mut out);
                    flow
                });
            flow
        };
        if flow.is_continue() {
            while let Some(old) = pending_old {
                if emit(old, None, &mut out).is_break() {
                    break;
                }
                pending_old = old_only.next();
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::SegmentId;

    fn entry(seqno: u64) -> Entry {
        Entry {
            location: Location {
                segment: SegmentId(1),
                offset: seqno as u32 * 100,
                len: 50,
            },
            seqno,
        }
    }

    #[test]
    fn snapshots_keep_exactly_the_versions_they_see() {
        let mut index = KvsIndex::default();
        assert_eq!(index.put(b"k", entry(1), None, 0), None);
        // A snapshot at 1 sees version 1, so replacing it keeps it.
        assert_eq!(index.put(b"k", entry(2), None, 1), None);
        assert_eq!(
            index.get_with_value(b"k", Some(1)).map(|(entry, _)| entry),
            Some(entry(1))
        );
        assert_eq!(
            index.get_with_value(b"k", Some(2)).map(|(entry, _)| entry),
            Some(entry(2))
        );
        // No snapshot sees version 2: deleting frees it.
        assert_eq!(index.remove(b"k", 3, 1), Some(entry(2)));
        assert_eq!(
            index.get_with_value(b"k", Some(1)).map(|(entry, _)| entry),
            Some(entry(1))
        );
        assert_eq!(
            index.get_with_value(b"k", Some(5)).map(|(entry, _)| entry),
            None
        );
        assert_eq!(
            index.liveness(b"k", 1, entry(1).location),
            Liveness::Snapshot
        );
        let freed = index.prune_old(|_, _| false);
        assert_eq!(freed, vec![entry(1)]);
        assert_eq!(
            index.get_with_value(b"k", Some(1)).map(|(entry, _)| entry),
            None
        );
    }

    #[test]
    fn a_range_size_counts_the_newest_records_within_its_bounds() {
        let mut index = KvsIndex::default();
        for (seqno, key) in [b"a", b"b", b"c", b"d"].iter().enumerate() {
            index.put(*key, entry(seqno as u64 + 1), None, 0);
        }
        // A replaced version kept for a snapshot is not counted.
        index.put(b"b", entry(9), None, 1);
        let size = index.range_size(Bound::Included(b"b"), Bound::Excluded(b"d"));
        assert_eq!(
            size,
            RangeSize {
                keys: 2,
                bytes: 100
            }
        );
        assert_eq!(
            index.range_size(Bound::Unbounded, Bound::Unbounded),
            RangeSize {
                keys: 4,
                bytes: 200
            }
        );
        assert_eq!(
            index.range_size(Bound::Included(b"d"), Bound::Excluded(b"a")),
            RangeSize::default()
        );
    }

    #[test]
    fn prefix_removal_spares_newer_keys_and_other_prefixes() {
        let mut index = KvsIndex::default();
        index.put(b"a1", entry(1), None, 0);
        index.put(b"a2", entry(5), None, 0);
        index.put(b"b1", entry(2), None, 0);
        let freed = index.remove_prefix(b"a", 4, 0);
        assert_eq!(freed, vec![entry(1)]);
        assert!(index.get(b"a2").is_some() && index.get(b"b1").is_some());
    }

    #[test]
    fn short_and_long_keys_order_like_their_bytes() {
        let mut index = KvsIndex::default();
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            b"a".to_vec(),
            vec![b'a'; 30],
            vec![b'a'; 31],
            vec![b'a'; 200],
            b"b".to_vec(),
            vec![0xff; 31],
        ];
        for (position, key) in keys.iter().enumerate().rev() {
            index.put(key, entry(position as u64 + 1), None, 0);
        }
        let mut listed: Vec<Key> = Vec::new();
        let stopped_at = index.visit_newest_after(None, 100, |key, _, _| listed.push(key.into()));
        assert_eq!(
            stopped_at, None,
            "fewer keys than the limit: the walk ran to the end"
        );
        let expected: Vec<Key> = keys.iter().map(|key| Key::from(key.as_slice())).collect();
        assert_eq!(listed, expected);
        for (position, key) in keys.iter().enumerate() {
            assert_eq!(index.get(key), Some(entry(position as u64 + 1)));
        }
    }

    #[test]
    fn visible_ranges_merge_kept_versions_in_both_directions() {
        let mut index = KvsIndex::default();
        index.put(b"a", entry(1), None, 0);
        index.put(b"b", entry(2), None, 0);
        index.put(b"c", entry(3), None, 0);
        index.remove(b"b", 4, 3);
        index.put(b"d", entry(5), None, 3);
        let at3: Vec<Key> = index
            .collect_visible(Bound::Unbounded, Bound::Unbounded, 3, 10, false)
            .into_iter()
            .map(|visible| visible.key)
            .collect();
        assert_eq!(
            at3,
            vec![
                b"a".to_vec().into(),
                b"b".to_vec().into(),
                b"c".to_vec().into()
            ]
        );
        let now: Vec<Key> = index
            .collect_visible(Bound::Unbounded, Bound::Excluded(b"d"), 9, 10, true)
            .into_iter()
            .map(|visible| visible.key)
            .collect();
        assert_eq!(now, vec![b"c".to_vec().into(), b"a".to_vec().into()]);
    }

    #[test]
    fn only_the_newest_version_keeps_its_value_and_a_move_keeps_it() {
        let mut index = KvsIndex::default();
        index.put(b"k", entry(1), Some(b"one"), 0);
        index.put(b"k", entry(2), Some(b"two"), 1);
        assert_eq!(
            index.get_with_value(b"k", None),
            Some((entry(2), Some(&b"two"[..])))
        );
        assert_eq!(
            index.get_with_value(b"k", Some(2)),
            Some((entry(2), Some(&b"two"[..])))
        );
        // The version a snapshot kept is read from media.
        assert_eq!(index.get_with_value(b"k", Some(1)), Some((entry(1), None)));
        assert_eq!(index.get_with_value(b"k", Some(0)), None);
        let to = Location {
            segment: SegmentId(2),
            offset: 0,
            len: 50,
        };
        assert!(index.relocate(b"k", 2, entry(2).location, to));
        let moved = Entry {
            location: to,
            seqno: 2,
        };
        assert_eq!(
            index.get_with_value(b"k", None),
            Some((moved, Some(&b"two"[..])))
        );
        // A put without a value drops the one kept.
        index.put(b"k", entry(3), None, 0);
        assert_eq!(index.get_with_value(b"k", None), Some((entry(3), None)));
        assert_eq!(index.get_with_value(b"missing", None), None);
    }

    #[test]
    fn relocation_is_a_compare_and_swap() {
        let mut index = KvsIndex::default();
        index.put(b"k", entry(1), None, 0);
        let to = Location {
            segment: SegmentId(2),
            offset: 0,
            len: 50,
        };
        assert!(!index.relocate(b"k", 1, to, to));
        assert!(index.relocate(b"k", 1, entry(1).location, to));
        assert_eq!(index.get(b"k").unwrap().location, to);
    }
}
