//! The ordered map from each key to its newest entry, packed for DRAM.
//!
//! Keys sit in sorted leaves of a few KiB. A leaf is found by its fence (the smallest key it may
//! hold) in a small B-tree of leaves; inside, each entry is the part of its key after the prefix
//! every key of the leaf shares, then its location and seqno as varints, and a binary search
//! over a dense array of slots (each entry's offset and first two suffix bytes) finds a key. For
//! 23-byte YCSB keys this takes about 35 bytes per key where a `BTreeMap` slot took 75
//! (ARCHITECTURE.md, "Index memory").

use super::entry::Entry;
use super::leaf::{Leaf, Slot, LEAF_BYTES_MAX};
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
        let (_, leaf) = self.leaf_for(key)?;
        let suffix = &key[usize::from(leaf.prefix_len)..];
        let at = leaf.search(suffix).ok()?;
        Some(leaf.entry(at))
    }

    /// Makes `entry` the one of `key`; returns the one it replaced.
    pub fn insert(&mut self, key: &[u8], entry: Entry) -> Option<Entry> {
        if self.leaves.is_empty() {
            self.leaves.insert(Fence::from(&[][..]), Leaf::default());
        }
        let (fence, leaf) =
            leaf_containing(&mut self.leaves, key).expect("the first leaf holds every key");
        let suffix = &key[usize::from(leaf.prefix_len)..];
        let replaced = match leaf.search(suffix) {
            Ok(at) => {
                let old = leaf.entry(at);
                leaf.replace(at, entry);
                Some(old)
            }
            Err(at) => {
                leaf.insert(at, suffix, entry);
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
    pub fn insert_mostly_ascending(&mut self, key: &[u8], entry: Entry) -> Option<Entry> {
        if self.append(key, entry) {
            return None;
        }
        self.insert(key, entry)
    }

    /// Appends `key` to the last leaf if it sorts after every key of the map; returns whether
    /// it did.
    fn append(&mut self, key: &[u8], entry: Entry) -> bool {
        let Some((fence, leaf)) = self.leaves.iter_mut().next_back() else {
            return false;
        };
        // The last leaf has no next fence to share a prefix with: its suffixes are whole keys.
        if leaf.prefix_len != 0 || leaf.last_suffix().is_some_and(|last| last >= key) {
            return false;
        }
        let at = leaf.slots.len();
        leaf.insert(at, key, entry);
        self.len += 1;
        if let Some(fence) = leaf.is_oversized().then(|| fence.clone()) {
            self.split_at(&fence, at);
        }
        true
    }

    /// Makes `new` the entry of `key` if its entry is `expected` (a compare-and-swap in one
    /// search); returns whether it did.
    pub fn replace_if(&mut self, key: &[u8], expected: Entry, new: Entry) -> bool {
        let Some((fence, leaf)) = leaf_containing(&mut self.leaves, key) else {
            return false;
        };
        let Ok(at) = leaf.search(&key[usize::from(leaf.prefix_len)..]) else {
            return false;
        };
        if leaf.entry(at) != expected {
            return false;
        }
        leaf.replace(at, new);
        if let Some(fence) = leaf.is_oversized().then(|| fence.clone()) {
            self.split(&fence);
        }
        true
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

    /// Calls `visit` with each key in `lower..upper` and its entry, in key order (descending
    /// when `reverse`), until it breaks.
    pub fn visit_range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        mut visit: impl FnMut(&[u8], Entry) -> ControlFlow<()>,
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
                if ended || visit(&key, leaf.entry(at)).is_break() {
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

    /// Splits the leaf at `fence` in two halves by bytes, and those again while too big (a
    /// merge that shortened the prefix can leave a leaf more than one split over).
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
        let mut middle_key = Vec::new();
        leaf.key_into(fence, middle, &mut middle_key);
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
    /// an empty leaf always goes (except the first).
    fn merge_small(&mut self, fence: &[u8]) {
        let size = self.leaves[fence].bytes.len();
        let fits = |other: &Leaf| size + other.bytes.len() <= LEAF_BYTES_MAX / 2;
        if let Some(next) = self.next_fence(fence) {
            if fits(&self.leaves[next]) || size == 0 {
                let next = Fence::from(next);
                return self.merge(fence, &next);
            }
        }
        if let Some(previous) = self.previous_fence(fence) {
            if fits(&self.leaves[previous]) || size == 0 {
                let previous = Fence::from(previous);
                self.merge(&previous, fence);
            }
        }
    }

    /// Moves every entry of the leaf at `right` into the one at `left`, its predecessor.
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
        let oversized = merged.is_oversized();
        self.leaves.insert(left.into(), merged);
        if oversized {
            self.split(left);
        }
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
mod tests {
    use super::*;
    use crate::segment::{Location, SegmentId};
    use proptest::prelude::*;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::ops::RangeBounds;

    /// Counts the heap bytes each thread holds, so a test can weigh what it builds.
    struct HeapMeter;

    thread_local! {
        static HELD_BYTES: Cell<isize> = const { Cell::new(0) };
    }

    // SAFETY: every call forwards to `System` with the same arguments, so `System`'s guarantees
    // hold; the counter is a const-initialized thread-local `Cell`, which never allocates.
    unsafe impl GlobalAlloc for HeapMeter {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            HELD_BYTES.with(|held| held.set(held.get() + layout.size() as isize));
            // SAFETY: the caller upholds `alloc`'s contract, which `System.alloc` shares.
            unsafe { System.alloc(layout) }
        }

        unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
            HELD_BYTES.with(|held| held.set(held.get() - layout.size() as isize));
            // SAFETY: `pointer` came from `alloc` above, i.e. from `System`, with `layout`.
            unsafe { System.dealloc(pointer, layout) }
        }
    }

    #[global_allocator]
    static METER: HeapMeter = HeapMeter;

    fn held_bytes() -> isize {
        HELD_BYTES.with(Cell::get)
    }

    fn entry(n: u64) -> Entry {
        Entry {
            location: Location {
                segment: SegmentId((n % 5000) as u32),
                offset: (n.wrapping_mul(1129) % (1 << 26)) as u32,
                len: 1100 + (n % 300) as u32,
            },
            seqno: n + 1,
        }
    }

    /// YCSB's key for record `n`: "user" and a hash of `n` (FNV-1a 64), 23 bytes.
    fn ycsb_key(n: u64) -> Vec<u8> {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in n.to_le_bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
        }
        format!("user{:019}", hash % 10_000_000_000_000_000_000).into_bytes()
    }

    #[test]
    fn ycsb_keys_take_at_most_40_bytes_each_and_the_estimate_says_so() {
        const KEYS: u64 = 200_000;
        let before = held_bytes();
        let mut map = PackedMap::default();
        for n in 0..KEYS {
            map.insert(&ycsb_key(n), entry(n));
        }
        let held = (held_bytes() - before) as f64 / KEYS as f64;
        let estimated = map.estimated_dram_bytes() as f64 / KEYS as f64;
        assert_eq!(map.len(), KEYS as usize);
        assert!(held <= 40.0, "{held:.1} heap bytes per key");
        // The estimate adds allocator overhead and B-tree slack the meter cannot see.
        assert!(
            estimated >= held && estimated <= held * 1.15,
            "estimated {estimated:.1} vs held {held:.1} bytes per key"
        );
        for n in (0..KEYS).step_by(997) {
            assert_eq!(map.get(&ycsb_key(n)), Some(entry(n)));
        }
        // Deleting everything gives the leaves back.
        for n in 0..KEYS {
            assert_eq!(map.remove(&ycsb_key(n)), Some(entry(n)));
        }
        assert_eq!(map.len(), 0);
        assert!(map.leaves.len() <= 1 && map.estimated_dram_bytes() < 1024);
    }

    #[test]
    fn keys_in_ascending_order_fill_their_leaves() {
        let mut keys: Vec<Vec<u8>> = (0..50_000).map(ycsb_key).collect();
        keys.sort();
        let (mut appended, mut inserted) = (PackedMap::default(), PackedMap::default());
        for (n, key) in keys.iter().enumerate() {
            assert_eq!(appended.insert_mostly_ascending(key, entry(n as u64)), None);
            inserted.insert(key, entry(n as u64));
        }
        assert_eq!(appended.len(), keys.len());
        for (n, key) in keys.iter().enumerate().step_by(101) {
            assert_eq!(appended.get(key), Some(entry(n as u64)));
        }
        let leaf_bytes: usize = appended.leaves.values().map(|leaf| leaf.bytes.len()).sum();
        let average = leaf_bytes / appended.leaves.len();
        // A leaf fills with whole keys while it is the last; split off, its keys lose the prefix
        // it shares with the next fence (YCSB's keys: ~6 of 23 bytes).
        assert!(
            average >= LEAF_BYTES_MAX * 3 / 4,
            "{average} bytes per leaf"
        );
        // `insert` splits a full leaf in halves, and in-order keys never come back to the left.
        assert!(
            appended.leaves.len() * 3 / 2 <= inserted.leaves.len(),
            "{} leaves appended, {} inserted",
            appended.leaves.len(),
            inserted.leaves.len()
        );
        // A key that is not past the last one takes the ordinary path.
        let first = keys[0].clone();
        assert_eq!(
            appended.insert_mostly_ascending(&first, entry(7)),
            Some(entry(0))
        );
        assert_eq!(appended.get(&first), Some(entry(7)));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(Vec<u8>, u64),
        /// `insert_mostly_ascending` of the key, or (when `past_last`) of the map's last key
        /// with the key's first byte appended.
        InsertAscending(Vec<u8>, u64, bool),
        /// Compare-and-swap to `entry(n)`, expecting the current entry when `hit`.
        ReplaceIf(Vec<u8>, u64, bool),
        Remove(Vec<u8>),
        Range(Bound<Vec<u8>>, Bound<Vec<u8>>, bool),
    }

    /// Keys over a small alphabet, so they share prefixes and collide, some of them long.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            8 => proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(0u8), Just(0xff)], 1..12),
            1 => (0usize..4, 100usize..1024).prop_map(|(byte, len)| vec![b"ab\0\xff"[byte]; len]),
        ]
    }

    fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
        prop_oneof![
            3 => key().prop_map(Bound::Included),
            3 => key().prop_map(Bound::Excluded),
            1 => Just(Bound::Unbounded),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (key(), any::<u64>()).prop_map(|(key, n)| Op::Insert(key, n >> 1)),
            3 => (key(), any::<u64>(), any::<bool>())
                .prop_map(|(key, n, past_last)| Op::InsertAscending(key, n >> 1, past_last)),
            1 => (key(), any::<u64>(), any::<bool>())
                .prop_map(|(key, n, hit)| Op::ReplaceIf(key, n >> 1, hit)),
            3 => key().prop_map(Op::Remove),
            2 => (bound(), bound(), any::<bool>())
                .prop_map(|(low, high, reverse)| Op::Range(low, high, reverse)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// The packed map answers like a `BTreeMap` through splits, merges and prefix changes.
        #[test]
        fn behaves_like_an_ordered_map(ops in proptest::collection::vec(op(), 1..1500)) {
            let mut map = PackedMap::default();
            let mut model: BTreeMap<Vec<u8>, Entry> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(key, n) => {
                        prop_assert_eq!(map.insert(&key, entry(n)), model.insert(key, entry(n)));
                    }
                    Op::InsertAscending(key, n, past_last) => {
                        let key = match model.keys().next_back() {
                            // One byte more: keys stay within the key size limit.
                            Some(last) if past_last => [last.as_slice(), &key[..1]].concat(),
                            _ => key,
                        };
                        prop_assert_eq!(
                            map.insert_mostly_ascending(&key, entry(n)),
                            model.insert(key, entry(n))
                        );
                    }
                    Op::ReplaceIf(key, n, hit) => {
                        let current = model.get(&key).copied();
                        let expected = match current {
                            Some(entry) if hit => entry,
                            _ => entry(n ^ 1),
                        };
                        let swapped = map.replace_if(&key, expected, entry(n));
                        prop_assert_eq!(swapped, current == Some(expected));
                        if swapped {
                            model.insert(key, entry(n));
                        }
                    }
                    Op::Remove(key) => {
                        prop_assert_eq!(map.remove(&key), model.remove(&key));
                    }
                    Op::Range(low, high, reverse) => {
                        let (lower, upper) = (low.as_ref().map(Vec::as_slice), high.as_ref().map(Vec::as_slice));
                        let mut seen = Vec::new();
                        map.visit_range(lower, upper, reverse, |key, entry| {
                            seen.push((key.to_vec(), entry));
                            ControlFlow::Continue(())
                        });
                        let mut expected: Vec<(Vec<u8>, Entry)> = model
                            .iter()
                            .filter(|(key, _)| <(Bound<&[u8]>, Bound<&[u8]>) as RangeBounds<[u8]>>::contains(&(lower, upper), key.as_slice()))
                            .map(|(key, entry)| (key.clone(), *entry))
                            .collect();
                        if reverse {
                            expected.reverse();
                        }
                        prop_assert_eq!(seen, expected);
                    }
                }
                prop_assert_eq!(map.len(), model.len());
            }
            let mut all = Vec::new();
            map.visit_range(Bound::Unbounded, Bound::Unbounded, false, |key, entry| {
                all.push((key.to_vec(), entry));
                ControlFlow::Continue(())
            });
            let expected: Vec<(Vec<u8>, Entry)> =
                model.iter().map(|(key, entry)| (key.clone(), *entry)).collect();
            prop_assert_eq!(all, expected);
            for (key, entry) in &model {
                prop_assert_eq!(map.get(key), Some(*entry));
            }
            for (fence, leaf) in &map.leaves {
                prop_assert!(leaf.bytes.len() <= LEAF_BYTES_MAX);
                let next = map.next_fence(fence);
                let shared = next.map_or(0, |next| common_prefix_len(fence, next));
                prop_assert_eq!(usize::from(leaf.prefix_len), shared);
            }
        }
    }
}
