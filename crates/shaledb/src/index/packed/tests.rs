//! The packed map's tests: its DRAM per key, measured with a counting allocator, and a model
//! test against `BTreeMap`.

use super::*;
use crate::segment::{Location, SegmentId};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ops::ControlFlow;
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

/// The value kept with `entry(n)`: none for a third of them, else up to the limit's bytes.
fn value_of(n: u64) -> Option<Vec<u8>> {
    let len = (n % (crate::limits::INDEX_VALUE_BYTES_LIMIT as u64 + 1)) as usize;
    (!n.is_multiple_of(3)).then(|| vec![n as u8; len])
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
        map.insert(&ycsb_key(n), entry(n), None);
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
        assert_eq!(
            appended.insert_mostly_ascending(key, entry(n as u64), None),
            None
        );
        inserted.insert(key, entry(n as u64), None);
    }
    assert_eq!(appended.len(), keys.len());
    for (n, key) in keys.iter().enumerate().step_by(101) {
        assert_eq!(appended.get(key), Some(entry(n as u64)));
    }
    let leaf_bytes: usize = appended
        .leaves_in_order()
        .map(|(_, leaf)| leaf.bytes.len())
        .sum();
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
        appended.insert_mostly_ascending(&first, entry(7), None),
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
    /// Compare-and-swap to `entry(n)`'s location, expecting the current entry when `hit`.
    RelocateIf(Vec<u8>, u64, bool),
    Remove(Vec<u8>),
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>, bool),
    /// What a server's write does: a read of the key (or, when `decoy`, of the key in another
    /// map; when `walk`, a range walk from the key, whose first key is then the one written),
    /// then a write of `other` (which may move the key in its leaf or split the leaf), then the
    /// key's write, which may start where the read ended.
    ReadThenWrite {
        key: Vec<u8>,
        other: Vec<u8>,
        n: u64,
        decoy: bool,
        walk: bool,
    },
    /// Inserts of the key with each byte of `tails` appended, in order (ascending when the
    /// tails are: a batch's keys, each right after the one before in its leaf).
    InsertRun(Vec<u8>, Vec<u8>, u64),
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
            .prop_map(|(key, n, hit)| Op::RelocateIf(key, n >> 1, hit)),
        3 => key().prop_map(Op::Remove),
        2 => (bound(), bound(), any::<bool>())
            .prop_map(|(low, high, reverse)| Op::Range(low, high, reverse)),
        2 => (key(), proptest::collection::vec(any::<u8>(), 1..40), any::<u64>())
            .prop_map(|(key, mut tails, n)| {
                if n % 4 != 0 {
                    tails.sort_unstable();
                }
                Op::InsertRun(key, tails, n >> 1)
            }),
        4 => (key(), key(), any::<u64>(), any::<bool>(), any::<bool>())
            .prop_map(|(key, other, n, decoy, walk)| Op::ReadThenWrite { key, other, n: n >> 1, decoy, walk }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The packed map answers like a `BTreeMap` through splits, merges and prefix changes,
    /// with the values kept in its entries.
    #[test]
    fn behaves_like_an_ordered_map(ops in proptest::collection::vec(op(), 1..1500)) {
        let mut map = PackedMap::default();
        // Gets every other insert: a map whose leaves differ from `map`'s, read in between.
        let mut decoy = PackedMap::default();
        let mut model: BTreeMap<Vec<u8>, (Entry, Option<Vec<u8>>)> = BTreeMap::new();
        let old_entry = |old: Option<(Entry, Option<Vec<u8>>)>| old.map(|(entry, _)| entry);
        for op in ops {
            match op {
                Op::Insert(key, n) => {
                    if n % 2 == 0 {
                        decoy.insert(&key, entry(n), None);
                    }
                    let value = value_of(n);
                    prop_assert_eq!(
                        map.insert(&key, entry(n), value.as_deref()),
                        old_entry(model.insert(key, (entry(n), value)))
                    );
                }
                Op::InsertAscending(key, n, past_last) => {
                    let key = match model.keys().next_back() {
                        // One byte more: keys stay within the key size limit.
                        Some(last) if past_last => [last.as_slice(), &key[..1]].concat(),
                        _ => key,
                    };
                    let value = value_of(n);
                    prop_assert_eq!(
                        map.insert_mostly_ascending(&key, entry(n), value.as_deref()),
                        old_entry(model.insert(key, (entry(n), value)))
                    );
                }
                Op::RelocateIf(key, n, hit) => {
                    let current = model.get(&key).map(|(entry, _)| *entry);
                    let expected = match current {
                        Some(entry) if hit => entry,
                        _ => entry(n ^ 1),
                    };
                    let moved = Entry { location: entry(n).location, seqno: expected.seqno };
                    let swapped = map
                        .relocate_with(&key, expected, || Ok::<_, ()>(moved.location))
                        .unwrap()
                        .is_some();
                    prop_assert_eq!(swapped, current == Some(expected));
                    if swapped {
                        model.get_mut(&key).expect("swapped").0 = moved;
                    }
                }
                Op::Remove(key) => {
                    prop_assert_eq!(map.remove(&key), old_entry(model.remove(&key)));
                }
                Op::InsertRun(key, tails, n) => {
                    for (i, tail) in tails.into_iter().enumerate() {
                        let key = [key.as_slice(), &[tail]].concat();
                        let n = n.wrapping_add(i as u64) >> 1;
                        let value = value_of(n);
                        prop_assert_eq!(
                            map.insert(&key, entry(n), value.as_deref()),
                            old_entry(model.insert(key, (entry(n), value)))
                        );
                    }
                }
                Op::ReadThenWrite { key, other, n, decoy: read_decoy, walk } => {
                    let mut key = key;
                    if walk {
                        let mut first = None;
                        map.visit_range(Bound::Included(&key), Bound::Unbounded, false, |found, _, _| {
                            first = Some(found.to_vec());
                            ControlFlow::Break(())
                        });
                        prop_assert_eq!(&first, &model.range(key.clone()..).next().map(|(found, _)| found.clone()));
                        key = first.unwrap_or(key);
                    } else if read_decoy {
                        decoy.get(&key);
                    } else {
                        prop_assert_eq!(map.get(&key), model.get(&key).map(|(entry, _)| *entry));
                        prop_assert_eq!(map.contains(&key), model.contains_key(&key));
                    }
                    let value = value_of(n ^ 1);
                    prop_assert_eq!(
                        map.insert(&other, entry(n ^ 1), value.as_deref()),
                        old_entry(model.insert(other, (entry(n ^ 1), value)))
                    );
                    let value = value_of(n);
                    prop_assert_eq!(
                        map.insert(&key, entry(n), value.as_deref()),
                        old_entry(model.insert(key, (entry(n), value)))
                    );
                }
                Op::Range(low, high, reverse) => {
                    let (lower, upper) = (low.as_ref().map(Vec::as_slice), high.as_ref().map(Vec::as_slice));
                    let mut seen = Vec::new();
                    map.visit_range(lower, upper, reverse, |key, entry, _| {
                        seen.push((key.to_vec(), entry));
                        ControlFlow::Continue(())
                    });
                    let mut expected: Vec<(Vec<u8>, Entry)> = model
                        .iter()
                        .filter(|(key, _)| <(Bound<&[u8]>, Bound<&[u8]>) as RangeBounds<[u8]>>::contains(&(lower, upper), key.as_slice()))
                        .map(|(key, (entry, _))| (key.clone(), *entry))
                        .collect();
                    // Counted leaf by leaf, and keys picked by position: every third, the
                    // last, and one past the end, which is left out.
                    let (count, picked) = map.count_and_pick(lower, upper, |count| {
                        (0..count).step_by(3).chain([count.saturating_sub(1), count + 1]).collect()
                    });
                    prop_assert_eq!(count, expected.len());
                    let wanted: Vec<Vec<u8>> = (0..count)
                        .step_by(3)
                        .chain(count.checked_sub(1))
                        .map(|at| expected[at].0.clone())
                        .collect();
                    let picked: Vec<Vec<u8>> = picked.iter().map(|key| key.to_vec()).collect();
                    prop_assert_eq!(picked, wanted);
                    if reverse {
                        expected.reverse();
                    }
                    prop_assert_eq!(seen, expected);
                }
            }
            prop_assert_eq!(map.len(), model.len());
        }
        let mut all = Vec::new();
        map.visit_range(Bound::Unbounded, Bound::Unbounded, false, |key, entry, _| {
            all.push((key.to_vec(), entry));
            ControlFlow::Continue(())
        });
        let expected: Vec<(Vec<u8>, Entry)> =
            model.iter().map(|(key, (entry, _))| (key.clone(), *entry)).collect();
        prop_assert_eq!(all, expected);
        for (key, (entry, value)) in &model {
            prop_assert_eq!(map.get(key), Some(*entry));
            prop_assert_eq!(map.get_with_value(key), Some((*entry, value.as_deref())));
        }
        for (fence, leaf) in map.leaves_in_order() {
            prop_assert!(leaf.bytes.len() <= LEAF_BYTES_MAX);
            let next = map.next_fence(fence);
            let shared = next.map_or(0, |next| common_prefix_len(fence, next));
            prop_assert_eq!(usize::from(leaf.prefix_len), shared);
        }
    }
}

/// Keys that share a long prefix pack into leaves with long prefixes; a merge with a leaf that
/// shares none gives every entry its prefix back. Merges are bounded by that re-prefixed size,
/// so a leaf never outgrows its `u16` offsets (a merge by the leaves' own bytes wrapped them,
/// then panicked in the next split).
#[test]
fn merges_of_leaves_with_long_prefixes_stay_within_a_leaf() {
    let long = |first: u8, n: u64| {
        let mut key = vec![first; 1000];
        key.extend_from_slice(format!("{n:05}").as_bytes());
        key
    };
    let mut map = PackedMap::default();
    let mut model = BTreeMap::new();
    for n in 0..3000 {
        map.insert(&long(b'a', n), entry(n), None);
        model.insert(long(b'a', n), entry(n));
    }
    for n in 0..20 {
        map.insert(&long(b'b', n), entry(n), None);
        model.insert(long(b'b', n), entry(n));
    }
    // Deletes in a scattered order shrink leaves until they merge across the 'a'/'b' border.
    for n in (0..3000).map(|n: u64| n * 7 % 3000) {
        if n % 10 != 0 {
            assert_eq!(map.remove(&long(b'a', n)), model.remove(&long(b'a', n)));
        }
    }
    for (fence, leaf) in map.leaves_in_order() {
        assert!(
            leaf.bytes.len() <= LEAF_BYTES_MAX,
            "{} bytes",
            leaf.bytes.len()
        );
        let shared = map
            .next_fence(fence)
            .map_or(0, |next| common_prefix_len(fence, next));
        assert_eq!(usize::from(leaf.prefix_len), shared);
    }
    for (key, entry) in &model {
        assert_eq!(map.get(key), Some(*entry));
    }
    assert_eq!(map.len(), model.len());
}

/// Two maps whose leaves changed as often (the same `shape`): where a search of one ended
/// says nothing about the other, though the key is the same.
#[test]
fn a_search_of_one_map_never_steers_a_write_to_another() {
    let (mut first, mut second) = (PackedMap::default(), PackedMap::default());
    let fill = |map: &mut PackedMap, letter: u8| {
        let mut n = 0;
        while map.leaves.len() < 2 {
            map.insert(&[letter, (n / 256) as u8, n as u8], entry(n), None);
            n += 1;
        }
    };
    fill(&mut first, b'a');
    fill(&mut second, b'b');
    assert_eq!(first.shape, second.shape);
    // In the first map the key is in its second leaf; in the second, below every 'b', in the
    // first.
    let key = [b'a', 0xff, 0xff];
    first.insert(&key, entry(1), None);
    assert_eq!(first.get(&key), Some(entry(1)));
    assert_eq!(second.insert(&key, entry(2), None), None);
    assert_eq!(second.get(&key), Some(entry(2)));
    assert_eq!(first.get(&key), Some(entry(1)));
}

/// Keys inserted in ascending order go right after the one before when they sort before the
/// entry that follows it, and are searched for when they do not.
#[test]
fn an_ascending_run_of_inserts_keeps_the_order() {
    let key = |n: u16| n.to_be_bytes().to_vec();
    let mut map = PackedMap::default();
    let mut model = BTreeMap::new();
    let mut insert = |map: &mut PackedMap, n: u16| {
        assert_eq!(
            map.insert(&key(n), entry(n.into()), None),
            model.insert(key(n), entry(n.into()))
        );
    };
    for n in (0..2000).step_by(10) {
        insert(&mut map, n);
    }
    // Runs that fit between two keys, and runs that pass over them.
    for n in (101..109).chain((1..2000).step_by(2)).chain(1995..2010) {
        insert(&mut map, n);
    }
    let mut all = Vec::new();
    map.visit_range(
        Bound::Unbounded,
        Bound::Unbounded,
        false,
        |key, entry, _| {
            all.push((key.to_vec(), entry));
            ControlFlow::Continue(())
        },
    );
    assert_eq!(all, model.into_iter().collect::<Vec<_>>());
}
