//! The ordered map from each key to its newest entry, packed for DRAM.
//!
//! Keys sit in sorted leaves of a few KiB. A leaf is found by its fence (a lower bound of the keys
//! it may hold, as short as separates it from the leaf before) in a small B-tree of leaves;
//! inside, each entry is the part of its key after the prefix every key of the leaf shares, then
//! its location and seqno as varints and a short value kept with it, and a binary search over a
//! dense array of slots (each entry's offset and first four suffix bytes) finds a key. For
//! 23-byte YCSB keys this takes about 38 bytes per key where a `BTreeMap` slot took 75
//! (ARCHITECTURE.md, "Index memory").
//!
//! A write usually follows a read of the same key on the same thread (the server reads a key's
//! record to check its type, then commits the new one), and its search of the B-tree and the
//! leaf was nearly as costly as the read's, though every line it touched was warm. So leaves sit
//! at stable places in a slab, and each thread remembers where its recent searches and its last
//! insert ended (`recent.rs`): an insert of such a key (or of a key right after the last insert)
//! in the same map, while no leaf was added or removed since (`shape`), goes straight to the
//! leaf and checks the entry there instead of searching.

use super::entry::{Entry, Key};
use super::leaf::{Leaf, Slot, LEAF_BYTES_MAX};
use super::recent::{self, Found};
use crate::segment::Location;
use crate::short_bytes::{ShortBytes, INLINE_BYTES};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

/// A leaf shrunk below this many bytes merges with a neighbour when both fit in half a leaf.
const LEAF_BYTES_LOW: usize = LEAF_BYTES_MAX / 4;
/// Allocator bookkeeping per heap allocation, for the DRAM estimate.
const ALLOCATION_OVERHEAD_BYTES: usize = 16;

pub struct PackedMap {
    /// Leaves by fence, each its place in `slab`: a key lives in the leaf with the greatest
    /// fence not above it. The first leaf's fence is empty (below every key) and that leaf is
    /// never removed.
    leaves: BTreeMap<Fence, LeafId>,
    /// The leaves, each at the place `leaves` names; a leaf keeps its place until a split or
    /// merge changes `shape`.
    slab: Vec<Leaf>,
    /// Places in `slab` whose leaves were merged away, for the next split.
    free: Vec<LeafId>,
    len: usize,
    /// This map's number, unique in the process: what a thread's notes of its searches name it
    /// by (`recent.rs`).
    id: u64,
    /// Changed whenever a leaf is added or removed or the slab compacted (a split, a merge, the
    /// first leaf), which is whenever a key may move to another leaf or place, or a leaf's
    /// prefix changes.
    shape: u64,
}

/// A leaf's fence: inline when short, so the search for a leaf compares bytes inside the B-tree
/// node it visits instead of following a pointer per comparison.
type Fence = ShortBytes;

/// A leaf's place in the slab.
type LeafId = u32;

/// The number of the next map made.
static NEXT_MAP_ID: AtomicU64 = AtomicU64::new(0);

impl Default for PackedMap {
    fn default() -> Self {
        PackedMap {
            leaves: BTreeMap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            len: 0,
            id: NEXT_MAP_ID.fetch_add(1, Ordering::Relaxed),
            shape: 0,
        }
    }
}

impl PackedMap {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        self.get_with_value(key).map(|(entry, _)| entry)
    }

    /// The entry of `key` and the value kept with it, if any.
    pub fn get_with_value(&self, key: &[u8]) -> Option<(Entry, Option<&[u8]>)> {
        let (leaf, at) = self.find(key)?;
        Some(leaf.entry_with_value(at?))
    }

    /// Whether `key` has an entry, which is not decoded (a server's SET asks before writing).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.find(key).is_some_and(|(_, at)| at.is_some())
    }

    /// The leaf `key` belongs in and its place there if it is in the map, noted for a write of
    /// it that may follow.
    fn find(&self, key: &[u8]) -> Option<(&Leaf, Option<usize>)> {
        // No recall of an earlier search here: a key is rarely read twice in a row, and the
        // recall cost reads more than it saved (SET 1.44 -> 1.53 us with it).
        let (_, id) = self.leaf_for(key)?;
        let leaf = &self.slab[id as usize];
        let found = leaf.search(&key[usize::from(leaf.prefix_len)..]).ok();
        self.remember(key, id, found);
        Some((leaf, found))
    }

    /// Notes that this thread's search of this map ended in leaf `leaf`, at `at` if the key
    /// was there.
    fn remember(&self, key: &[u8], leaf: LeafId, at: Option<usize>) {
        let at = at.map(|at| at as u32);
        recent::remember(self.id, self.shape, key, Found { leaf, at });
    }

    /// The leaf `key` belongs in and its place in it (`Ok`) or where it would go (`Err`): from
    /// this thread's recent search of the key in this map if no leaf changed since, else by a
    /// search.
    fn locate(&self, key: &[u8]) -> (LeafId, Result<usize, usize>) {
        let recalled = recent::recall(self.id, self.shape, key);
        if recalled.is_none() {
            if let Some(next) = self.next_after_last_insert(key) {
                return next;
            }
        }
        let id = match recalled {
            // The leaves are as they were when the key was looked for, so it still belongs in
            // the leaf found then; whether it is still at the same place is checked below.
            Some(found) => found.leaf,
            None => {
                self.leaf_for(key)
                    .expect("the first leaf holds every key")
                    .1
            }
        };
        let leaf = &self.slab[id as usize];
        let suffix = &key[usize::from(leaf.prefix_len)..];
        let at = recalled
            .and_then(|found| found.at)
            .map(|at| at as usize)
            .filter(|&at| leaf.holds_at(at, suffix));
        (id, at.map_or_else(|| leaf.search(suffix), Ok))
    }

    /// Where `key` goes if it sorts between this thread's last insert into this map and the
    /// entry after it in the same leaf (a batch's keys come in order: a pipeline of LPUSHes
    /// puts its new elements one after the other into one leaf). Both are in the leaf, so a
    /// key between them is too, and is not in the map: it goes right after the last insert.
    fn next_after_last_insert(&self, key: &[u8]) -> Option<(LeafId, Result<usize, usize>)> {
        recent::last_insert(self.id, self.shape, |last, found| {
            let leaf = &self.slab[found.leaf as usize];
            let prefix = usize::from(leaf.prefix_len);
            let at = found.at? as usize;
            // The last insert's key shares the leaf's prefix; one that does not is elsewhere.
            if key <= last || key.get(..prefix)? != &last[..prefix] {
                return None;
            }
            let suffix = &key[prefix..];
            let next = at + 1;
            (leaf.holds_at(at, &last[prefix..])
                && next < leaf.slots.len()
                && suffix < leaf.suffix_at(next))
            .then_some((found.leaf, Err(next)))
        })
    }

    /// Makes `entry` the one of `key`, with `value` kept in it if given (at most
    /// `limits::INDEX_VALUE_BYTES_LIMIT` bytes); returns the entry it replaced.
    pub fn insert(&mut self, key: &[u8], entry: Entry, value: Option<&[u8]>) -> Option<Entry> {
        if self.leaves.is_empty() {
            let id = self.add_leaf(Leaf::default());
            self.leaves.insert(Fence::from(&[][..]), id);
        }
        let (id, place) = self.locate(key);
        let leaf = &mut self.slab[id as usize];
        let replaced = match place {
            Ok(at) => {
                let old = leaf.entry(at);
                leaf.replace(at, entry, value);
                self.remember(key, id, Some(at));
                Some(old)
            }
            Err(at) => {
                let suffix = &key[usize::from(leaf.prefix_len)..];
                leaf.insert(at, suffix, entry, value);
                self.len += 1;
                self.remember(key, id, Some(at));
                let found = Found {
                    leaf: id,
                    at: Some(at as u32),
                };
                recent::remember_insert(self.id, self.shape, key, found);
                None
            }
        };
        if self.slab[id as usize].is_oversized() {
            let fence = Fence::from(self.leaf_for(key).expect("the leaf just written").0);
            self.split(&fence);
        }
        replaced
    }

    /// Puts `leaf` at a free place in the slab; the caller names it in `leaves`.
    fn add_leaf(&mut self, leaf: Leaf) -> LeafId {
        self.shape += 1;
        match self.free.pop() {
            Some(id) => {
                self.slab[id as usize] = leaf;
                id
            }
            None => {
                self.slab.push(leaf);
                LeafId::try_from(self.slab.len() - 1).expect("fewer than 2^32 leaves")
            }
        }
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
        let Some((fence, &id)) = self.leaves.iter().next_back() else {
            return false;
        };
        let leaf = &mut self.slab[id as usize];
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
        let Some((fence, &id)) = leaf_containing(&self.leaves, key) else {
            return Ok(None);
        };
        let leaf = &mut self.slab[id as usize];
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
        let (fence, &id) = leaf_containing(&self.leaves, key)?;
        let leaf = &mut self.slab[id as usize];
        let at = leaf.search(&key[usize::from(leaf.prefix_len)..]).ok()?;
        let removed = leaf.entry(at);
        leaf.remove(at);
        self.len -= 1;
        if let Some(fence) = (leaf.bytes.len() < LEAF_BYTES_LOW).then(|| fence.clone()) {
            self.merge_small(&fence);
        }
        Some(removed)
    }

    /// Estimated DRAM this map holds: every leaf's buffers as allocated, its fence, its slot in
    /// the B-tree of leaves at about 75% node fill, and the slab's places.
    pub fn estimated_dram_bytes(&self) -> u64 {
        let slot_bytes = std::mem::size_of::<Fence>() + std::mem::size_of::<LeafId>();
        let leaf_bytes: usize = self
            .leaves
            .iter()
            .map(|(fence, &id)| {
                let leaf = &self.slab[id as usize];
                leaf.bytes.capacity()
                    + leaf.slots.capacity() * std::mem::size_of::<Slot>()
                    + fence.heap_bytes(ALLOCATION_OVERHEAD_BYTES)
                    + 2 * ALLOCATION_OVERHEAD_BYTES
                    + slot_bytes * 4 / 3
            })
            .sum();
        let slab_bytes = self.slab.capacity() * std::mem::size_of::<Leaf>()
            + self.free.capacity() * std::mem::size_of::<LeafId>();
        (leaf_bytes + slab_bytes) as u64
    }

    fn leaf_for(&self, key: &[u8]) -> Option<(&[u8], LeafId)> {
        leaf_containing(&self.leaves, key).map(|(fence, &id)| (&**fence, id))
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
        let leaf = &self.slab[self.leaves[fence] as usize];
        let half = leaf.bytes.len() / 2;
        let middle = leaf
            .slots
            .partition_point(|slot| usize::from(slot.start) < half);
        self.split_at(fence, middle);
    }

    /// Splits the leaf at `fence` before its entry `middle` (kept within 1..len-1), and each
    /// half again in halves while too big.
    fn split_at(&mut self, fence: &[u8], middle: usize) {
        let id = self.leaves[fence];
        let leaf = &self.slab[id as usize];
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
        self.slab[id as usize] = left;
        let right_id = self.add_leaf(right);
        self.leaves.insert(right_fence.clone(), right_id);
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
        let empty = self.slab[self.leaves[fence] as usize].slots.is_empty();
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
                let leaf = &self.slab[self.leaves[*fence] as usize];
                let regained = usize::from(leaf.prefix_len).saturating_sub(prefix) + 1;
                leaf.bytes.len() + leaf.slots.len() * regained
            })
            .sum()
    }

    /// Moves every entry of the leaf at `right` into the one at `left`, its predecessor; the
    /// merged leaf fits in a leaf (`merge_small` checked its bound).
    fn merge(&mut self, left: &[u8], right: &[u8]) {
        let right_id = self.leaves.remove(right).expect("the right leaf");
        let right_leaf = std::mem::take(&mut self.slab[right_id as usize]);
        self.free.push(right_id);
        self.shape += 1;
        let prefix = self
            .next_fence(left)
            .map_or(0, |next| common_prefix_len(left, next));
        let left_id = self.leaves[left];
        let left_leaf = &self.slab[left_id as usize];
        let mut merged = Leaf::with_prefix(prefix);
        merged.extend_from(left_leaf, left, 0..left_leaf.slots.len());
        merged.extend_from(&right_leaf, right, 0..right_leaf.slots.len());
        merged.shrink_to_fit();
        debug_assert!(!merged.is_oversized(), "a merge stays within a leaf");
        self.slab[left_id as usize] = merged;
        // Amortized: after a compaction, as many merges as there are leaves come first.
        if self.free.len() * 2 > self.slab.len() {
            self.compact_slab();
        }
    }

    /// Moves the leaves to the front of a slab of their size, so a map that shrank gives back
    /// the places of the leaves it merged away.
    fn compact_slab(&mut self) {
        let mut slab = Vec::with_capacity(self.leaves.len());
        for id in self.leaves.values_mut() {
            slab.push(std::mem::take(&mut self.slab[*id as usize]));
            *id = (slab.len() - 1) as LeafId;
        }
        self.slab = slab;
        self.free = Vec::new();
        self.shape += 1;
    }
}

/// The leaf `key` belongs in, found with one search, borrowing only the B-tree of leaves (so
/// the slab stays writable while it is held).
fn leaf_containing<'a>(
    leaves: &'a BTreeMap<Fence, LeafId>,
    key: &[u8],
) -> Option<(&'a Fence, &'a LeafId)> {
    if key.len() <= INLINE_BYTES {
        // An inline key against inline fences compares a word at a time (`ShortBytes`'s
        // order), where a slice compared with `memcmp`.
        return leaves.range(..=Fence::from(key)).next_back();
    }
    leaves
        .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
        .next_back()
}

fn common_prefix_len(left: &[u8], right: &[u8]) -> usize {
    left.iter()
        .zip(right)
        .take_while(|(left, right)| left == right)
        .count()
}

#[cfg(test)]
impl PackedMap {
    /// Each leaf with its fence, in key order.
    fn leaves_in_order(&self) -> impl Iterator<Item = (&Fence, &Leaf)> {
        self.leaves
            .iter()
            .map(|(fence, &id)| (fence, &self.slab[id as usize]))
    }
}

mod walks;

#[cfg(test)]
mod tests;
