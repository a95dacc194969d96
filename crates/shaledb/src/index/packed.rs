//! The ordered map from each key to its newest entry, packed for DRAM.
//!
//! Keys sit in sorted leaves of a few KiB. A leaf is found by its fence (a lower bound of the keys
//! it may hold, as short as separates it from the leaf before) in a small B-tree of leaves;
//! inside, each entry is the part of its key after the prefix every key of the leaf shares, then
//! its location and seqno as varints and a short value kept with it, and a binary search over a
//! dense array of slots (each entry's offset and first four suffix bytes) finds a key. For
//! 23-byte YCSB keys this takes about 38 bytes per key where a `BTreeMap` slot took 75
//! (ARCHITECTURE.md, "Index memory").

use super::entry::Entry;
use super::leaf::{Leaf, Slot, LEAF_BYTES_MAX};
use crate::segment::Location;
use crate::short_bytes::ShortBytes;
use std::collections::BTreeMap;
use std::ops::{Bound, ControlFlow};

/// A leaf shrunk below this many bytes merges with a neighbour when both fit in half a leaf.
const LEAF_BYTES_LOW: usize = LEAF_BYTES_MAX / 4;
/// Allocator bookkeeping per heap allocation, for the DRAM estimate.
const ALLOCATION_OVERHEAD_BYTES: usize = 16;

#[derive(Default)]
pub struct PackedMap {
    /// Leaves by fence: a key lives in the leaf with the greatest fence not above it. The first
    /// leaf's fence is empty (below every key) and that leaf is never removed.
    leaves: BTreeMap<Fence, Leaf>,
    len: usize,
}

/// A leaf's fence: inline when short, so the search for a leaf compares bytes inside the B-tree
/// node it visits instead of following a pointer per comparison.
type Fence = ShortBytes;

impl PackedMap {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        self.get_with_value(key).map(|(entry, _)| entry)
    }

    /// The entry of `key` and the value kept with it, if any.
    pub fn get_with_value(&self, key: &[u8]) -> Option<(Entry, Option<&[u8]>)> {
        let (_, leaf) = self.leaf_for(key)?;
        let suffix = &key[usize::from(leaf.prefix_len)..];
        let at = leaf.search(suffix).ok()?;
        Some(leaf.entry_with_value(at))
    }

    /// Makes `entry` the one of `key`, with `value` kept in it if given (at most
    /// `limits::INDEX_VALUE_BYTES_LIMIT` bytes); returns the entry it replaced.
    pub fn insert(&mut self, key: &[u8], entry: Entry, value: Option<&[u8]>) -> Option<Entry> {
        if self.leaves.is_empty() {
            self.leaves.insert(Fence::from(&[][..]), Leaf::default());
        }
        let (fence, leaf) =
            leaf_containing(&mut self.leaves, key).expect("the first leaf holds every key");
        let suffix = &key[usize::from(leaf.prefix_len)..];
        let replaced = match leaf.search(suffix) {
            Ok(at) => {
                let old = leaf.entry(at);
                leaf.replace(at, entry, value);
                Some(old)
            }
            Err(at) => {
                leaf.insert(at, suffix, entry, value);
                self.len += 1;
                None
            }
        };
        if let Some(fence) = leaf.is_oversized().then(|| fence.clone()) {
            self.split(&fence);
        }
        replaced
    }

    /// [`PackedMap::insert`] for keys that mostly come in ascending order, as a checkpoint's
    /// keys do at open (partition by partition, each in key order): a key past the map's last
    /// is appended to the last leaf without a search of the B-tree or of the leaf (which took
    /// half of an open's CPU), and a last leaf grown too big gives only that key to a new leaf,
    /// so the leaves such a load builds end up full rather than half full. Any other key costs
    /// one comparison more than `insert`.
    pub fn insert_mostly_ascending(
        &mut self,
        key: &[u8],
        entry: Entry,
        value: Option<&[u8]>,
    ) -> Option<Entry> {
        if self.append(key, entry, value) {
            return None;
        }
        self.insert(key, entry, value)
    }

    /// Appends `key` to the last leaf if it sorts after every key of the map; returns whether
    /// it did.
    fn append(&mut self, key: &[u8], entry: Entry, value: Option<&[u8]>) -> bool {
        let Some((fence, leaf)) = self.leaves.iter_mut().next_back() else {
            return false;
        };
        // The last leaf has no next fence to share a prefix with: its suffixes are whole keys.
        if leaf.prefix_len != 0 || leaf.last_suffix().is_some_and(|last| last >= key) {
            return false;
        }
        let at = leaf.slots.len();
        leaf.insert(at, key, entry, value);
        self.len += 1;
        if let Some(fence) = leaf.is_oversized().then(|| fence.clone()) {
            self.split_at(&fence, at);
        }
        true
    }

    /// If the entry of `key` is `expected`, moves it to the location `move_to` returns (a
    /// compare-and-swap in one search, the copy made between the compare and the swap), keeping
    /// the value kept with it. Returns the new location, or `None` if the entry was not
    /// `expected` (and `move_to` was not called).
    pub fn relocate_with<E>(
        &mut self,
        key: &[u8],
        expected: Entry,
        move_to: impl FnOnce() -> Result<Location, E>,
    ) -> Result<Option<Location>, E> {
        let Some((fence, leaf)) = leaf_containing(&mut self.leaves, key) else {
            return Ok(None);
        };
        let Ok(at) = leaf.search(&key[usize::from(leaf.prefix_len)..]) else {
            return Ok(None);
        };
        if leaf.entry(at) != expected {
            return Ok(None);
        }
        let location = move_to()?;
        leaf.relocate(
            at,
            Entry {
                location,
                seqno: expected.seqno,
            },
        );
        if let Some(fence) = leaf.is_oversized().then(|| fence.clone()) {
            self.split(&fence);
        }
        Ok(Some(location))
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let (fence, leaf) = leaf_containing(&mut self.leaves, key)?;
        let at = leaf.search(&key[usize::from(leaf.prefix_len)..]).ok()?;
        let removed = leaf.entry(at);
        leaf.remove(at);
        self.len -= 1;
        if let Some(fence) = (leaf.bytes.len() < LEAF_BYTES_LOW).then(|| fence.clone()) {
            self.merge_small(&fence);
        }
        Some(removed)
    }

    /// Calls `visit` with each key in `lower..upper`, its entry and the value kept with it, in
    /// key order (descending when `reverse`), until it breaks.
    pub fn visit_range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        mut visit: impl FnMut(&[u8], Entry, Option<&[u8]>) -> ControlFlow<()>,
    ) {
        let below_upper = |key: &[u8]| match upper {
            Bound::Included(upper) => key <= upper,
            Bound::Excluded(upper) => key < upper,
            Bound::Unbounded => true,
        };
        let above_lower = |key: &[u8]| match lower {
            Bound::Included(lower) => key >= lower,
            Bound::Excluded(lower) => key > lower,
            Bound::Unbounded => true,
        };
        let mut key = Vec::new();
        // Visits `leaf`'s entries from the `skip`th in the walk's direction; breaks once the
        // walk is over.
        let mut walk = |fence: &[u8], leaf: &Leaf, skip: usize| -> ControlFlow<()> {
            let count = leaf.slots.len();
            for step in skip..count {
                let at = if reverse { count - 1 - step } else { step };
                leaf.key_into(fence, at, &mut key);
                let ended = if reverse {
                    !above_lower(&key)
                } else {
                    !below_upper(&key)
                };
                if ended {
                    return ControlFlow::Break(());
                }
                let (entry, value) = leaf.entry_with_value(at);
                if visit(&key, entry, value).is_break() {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        };
        // The walk starts in the leaf holding the bound it starts from, at the bound's place in
        // it (a binary search, as `get` does: a short range costs a search, not a leaf's scan),
        // and looks for the leaves after it only if it goes past that leaf's end: a short range
        // (a key's type, a small collection) costs one search of the B-tree of leaves.
        let start_bound = if reverse { upper } else { lower };
        let rest: Box<dyn Iterator<Item = (&Fence, &Leaf)>> = match start_bound {
            Bound::Included(bound) | Bound::Excluded(bound) => {
                let Some((fence, leaf)) = self.leaf_for(bound) else {
                    return;
                };
                let count = leaf.slots.len();
                let included = matches!(start_bound, Bound::Included(_));
                let skip = match (leaf.search(&bound[usize::from(leaf.prefix_len)..]), reverse) {
                    (Ok(at), false) => at + usize::from(!included),
                    (Err(at), false) => at,
                    (Ok(at), true) => count - at - usize::from(included),
                    (Err(at), true) => count - at,
                };
                if walk(fence, leaf, skip).is_break() {
                    return;
                }
                let after = (Bound::Excluded(fence), Bound::Unbounded);
                let before = (Bound::Unbounded, Bound::Excluded(fence));
                if reverse {
                    Box::new(self.leaves.range::<[u8], _>(before).rev())
                } else {
                    Box::new(self.leaves.range::<[u8], _>(after))
                }
            }
            Bound::Unbounded if reverse => Box::new(self.leaves.iter().rev()),
            Bound::Unbounded => Box::new(self.leaves.iter()),
        };
        for (fence, leaf) in rest {
            if walk(fence, leaf, 0).is_break() {
                return;
            }
        }
    }

    /// Estimated DRAM this map holds: every leaf's buffers as allocated, its fence, and its slot
    /// in the B-tree of leaves at about 75% node fill.
    pub fn estimated_dram_bytes(&self) -> u64 {
        let slot_bytes = std::mem::size_of::<Fence>() + std::mem::size_of::<Leaf>();
        let leaf_bytes: usize = self
            .leaves
            .iter()
            .map(|(fence, leaf)| {
                leaf.bytes.capacity()
                    + leaf.slots.capacity() * std::mem::size_of::<Slot>()
                    + fence.heap_bytes(ALLOCATION_OVERHEAD_BYTES)
                    + 2 * ALLOCATION_OVERHEAD_BYTES
                    + slot_bytes * 4 / 3
            })
            .sum();
        leaf_bytes as u64
    }

    fn leaf_for(&self, key: &[u8]) -> Option<(&[u8], &Leaf)> {
        self.leaves
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()
            .map(|(fence, leaf)| (&**fence, leaf))
    }

    fn next_fence(&self, fence: &[u8]) -> Option<&[u8]> {
        self.leaves
            .range::<[u8], _>((Bound::Excluded(fence), Bound::Unbounded))
            .next()
            .map(|(fence, _)| &**fence)
    }

    fn previous_fence(&self, fence: &[u8]) -> Option<&[u8]> {
        self.leaves
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(fence)))
            .next_back()
            .map(|(fence, _)| &**fence)
    }

    /// Splits the leaf at `fence` in two halves by bytes, and those again while too big.
    fn split(&mut self, fence: &[u8]) {
        let leaf = &self.leaves[fence];
        let half = leaf.bytes.len() / 2;
        let middle = leaf
            .slots
            .partition_point(|slot| usize::from(slot.start) < half);
        self.split_at(fence, middle);
    }

    /// Splits the leaf at `fence` before its entry `middle` (kept within 1..len-1), and each
    /// half again in halves while too big.
    fn split_at(&mut self, fence: &[u8], middle: usize) {
        let leaf = &self.leaves[fence];
        let middle = middle.clamp(1, leaf.slots.len() - 1);
        let (mut before, mut middle_key) = (Vec::new(), Vec::new());
        leaf.key_into(fence, middle - 1, &mut before);
        leaf.key_into(fence, middle, &mut middle_key);
        // The right leaf's fence is the shortest prefix of its first key that sorts after the
        // left leaf's last (suffix truncation): any bound between the two serves, and a short
        // one stays inline in the B-tree of leaves, where a long key's (a sorted set's rank
        // record: its key, a score and the member) sat on the heap, a pointer followed at each
        // comparison of every search.
        middle_key.truncate(common_prefix_len(&before, &middle_key) + 1);
        let right_fence = Fence::from(middle_key.as_slice());
        let right_prefix = self
            .next_fence(fence)
            .map_or(0, |next| common_prefix_len(&right_fence, next));
        let left_prefix = common_prefix_len(fence, &right_fence);
        let mut left = Leaf::with_prefix(left_prefix);
        left.extend_from(leaf, fence, 0..middle);
        let mut right = Leaf::with_prefix(right_prefix);
        right.extend_from(leaf, fence, middle..leaf.slots.len());
        left.shrink_to_fit();
        right.shrink_to_fit();
        let (left_over, right_over) = (left.is_oversized(), right.is_oversized());
        self.leaves.insert(fence.into(), left);
        self.leaves.insert(right_fence.clone(), right);
        if left_over {
            self.split(fence);
        }
        if right_over {
            self.split(&right_fence);
        }
    }

    /// Merges the leaf at `fence`, grown small, with a neighbour when both fit in half a leaf;
    /// an empty leaf goes whenever its neighbour's entries fit in a leaf (except the first).
    fn merge_small(&mut self, fence: &[u8]) {
        let empty = self.leaves[fence].slots.is_empty();
        let fits =
            |merged: usize| merged <= LEAF_BYTES_MAX / 2 || (empty && merged <= LEAF_BYTES_MAX);
        if let Some(next) = self.next_fence(fence) {
            if fits(self.merged_bytes_bound(fence, next)) {
                let next = Fence::from(next);
                return self.merge(fence, &next);
            }
        }
        if let Some(previous) = self.previous_fence(fence) {
            if fits(self.merged_bytes_bound(previous, fence)) {
                let previous = Fence::from(previous);
                self.merge(&previous, fence);
            }
        }
    }

    /// At least the bytes the leaves at `left` and `right` (its successor) would take merged.
    /// The merged leaf's prefix is what `left` shares with the fence after `right`, no longer
    /// than either leaf's: each entry gets back the bytes its leaf's prefix took off, and its
    /// suffix length may take one more varint byte. Merging by the leaves' own bytes alone let
    /// a leaf whose keys share a long prefix grow past the `u16` offsets of its slots.
    fn merged_bytes_bound(&self, left: &[u8], right: &[u8]) -> usize {
        let prefix = self
            .next_fence(right)
            .map_or(0, |next| common_prefix_len(left, next));
        [left, right]
            .iter()
            .map(|fence| {
                let leaf = &self.leaves[*fence];
                let regained = usize::from(leaf.prefix_len).saturating_sub(prefix) + 1;
                leaf.bytes.len() + leaf.slots.len() * regained
            })
            .sum()
    }

    /// Moves every entry of the leaf at `right` into the one at `left`, its predecessor; the
    /// merged leaf fits in a leaf (`merge_small` checked its bound).
    fn merge(&mut self, left: &[u8], right: &[u8]) {
        let right_leaf = self.leaves.remove(right).expect("the right leaf");
        let prefix = self
            .next_fence(left)
            .map_or(0, |next| common_prefix_len(left, next));
        let left_leaf = &self.leaves[left];
        let mut merged = Leaf::with_prefix(prefix);
        merged.extend_from(left_leaf, left, 0..left_leaf.slots.len());
        merged.extend_from(&right_leaf, right, 0..right_leaf.slots.len());
        merged.shrink_to_fit();
        debug_assert!(!merged.is_oversized(), "a merge stays within a leaf");
        self.leaves.insert(left.into(), merged);
    }
}

/// The leaf `key` belongs in, found with one search, borrowing only the leaves (so the map's
/// other fields stay usable while it is held).
fn leaf_containing<'a>(
    leaves: &'a mut BTreeMap<Fence, Leaf>,
    key: &[u8],
) -> Option<(&'a Fence, &'a mut Leaf)> {
    leaves
        .range_mut::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
        .next_back()
}

fn common_prefix_len(left: &[u8], right: &[u8]) -> usize {
    left.iter()
        .zip(right)
        .take_while(|(left, right)| left == right)
        .count()
}

#[cfg(test)]
mod tests;
