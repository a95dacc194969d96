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

    /// How many keys that have a value now `lower..upper` holds, and the keys at the positions
    /// `choose` picks for that count (see `PackedMap::count_and_pick`).
    pub fn count_and_pick(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        choose: impl FnOnce(usize) -> Vec<usize>,
    ) -> (usize, Vec<Key>) {
        if crate::bounds::is_empty_range(lower, upper) {
            return (0, Vec::new());
        }
        self.newest.count_and_pick(lower, upper, choose)
    }

    /// Whether any replaced version is kept for a snapshot.
    pub fn keeps_old_versions(&self) -> bool {
        !self.old.is_empty()
    }

    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        self.newest.get(key)
    }

    /// Whether `key` has a value now.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.newest.contains(key)
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

    /// Moves the version of `key` at `seqno` stored at `from` to the location `copy` returns,
    /// if the index still holds it there (a compare-and-swap for the cleaner, in one search of
    /// the newest entries): `copy` is told whether it is the newest version or one kept for a
    /// snapshot, and makes the copy. Returns the new location, or `None` if the version is dead
    /// (and `copy` was not called).
    pub fn relocate_with<E>(
        &mut self,
        key: &[u8],
        seqno: u64,
        from: Location,
        copy: impl FnOnce(Liveness) -> Result<Location, E>,
    ) -> Result<Option<Location>, E> {
        let wanted = Entry {
            location: from,
            seqno,
        };
        let mut copy = Some(copy);
        let mut copy_as = |liveness| (copy.take().expect("called once"))(liveness);
        if let Some(to) = self
            .newest
            .relocate_with(key, wanted, || copy_as(Liveness::Newest))?
        {
            return Ok(Some(to));
        }
        let Some(version) = self
            .old
            .get_mut(key)
            .and_then(|versions| versions.iter_mut().find(|version| version.entry == wanted))
        else {
            return Ok(None);
        };
        let to = copy_as(Liveness::Snapshot)?;
        version.entry.location = to;
        Ok(Some(to))
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

    /// Like [`KvsIndex::visit_newest_after`], with entries only: no key is built but the one
    /// returned.
    pub fn visit_newest_entries_after(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        visit: impl FnMut(Entry),
    ) -> Option<Key> {
        self.newest.visit_entries_after(after, limit, visit)
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
mod tests;
