use super::*;
use crate::segment::{Location, SegmentId};
use std::collections::BTreeMap;

fn entry(seqno: u64) -> Entry {
    Entry {
        location: Location {
            segment: SegmentId(1),
            offset: seqno as u32,
            len: 50,
        },
        seqno,
    }
}

fn filled(keys: usize) -> PartitionedIndex {
    let index = PartitionedIndex::default();
    for number in 0..keys {
        let key = format!("key{number:06}");
        index
            .part(key.as_bytes())
            .write()
            .put(key.as_bytes(), entry(number as u64 + 1), None, 0);
    }
    index
}

/// Every key of the range, read chunk by chunk as a cursor does.
fn read_all(index: &PartitionedIndex, limit: usize, reverse: bool) -> Vec<Key> {
    let mut keys: Vec<Key> = Vec::new();
    loop {
        let after = keys.last().cloned();
        let (lower, upper) = match (&after, reverse) {
            (None, _) => (Bound::Unbounded, Bound::Unbounded),
            (Some(last), false) => (Bound::Excluded(&last[..]), Bound::Unbounded),
            (Some(last), true) => (Bound::Unbounded, Bound::Excluded(&last[..])),
        };
        let chunk = index.collect_visible(lower, upper, u64::MAX, limit, reverse);
        assert!(chunk.entries.len() <= limit);
        assert!(
            chunk.exhausted || !chunk.entries.is_empty(),
            "a chunk that is not the last holds a key"
        );
        keys.extend(chunk.entries.into_iter().map(|visible| visible.key));
        if chunk.exhausted {
            return keys;
        }
    }
}

#[test]
fn merged_chunks_list_every_key_once_in_order_both_ways() {
    let index = filled(5000);
    let mut expected: Vec<Key> = (0..5000)
        .map(|number| Key::from(format!("key{number:06}").as_bytes()))
        .collect();
    for limit in [1, 7, 128, 4096, 10_000] {
        assert_eq!(read_all(&index, limit, false), expected, "limit {limit}");
    }
    expected.reverse();
    for limit in [1, 128, 10_000] {
        assert_eq!(read_all(&index, limit, true), expected, "limit {limit}");
    }
}

#[test]
fn for_each_newest_visits_every_key_once_in_each_partitions_order() {
    let index = filled(1000);
    for chunk in [1, 7, 100, 5000] {
        let mut seen: Vec<Key> = Vec::new();
        index.for_each_newest(chunk, |key, _, _| seen.push(key.into()));
        let mut in_partitions = vec![Vec::new(); PARTITIONS];
        for key in &seen {
            in_partitions[index.partition_of(key)].push(key.clone());
        }
        for keys in &in_partitions {
            assert!(
                keys.windows(2).all(|pair| pair[0] < pair[1]),
                "chunk {chunk}"
            );
        }
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 1000, "chunk {chunk}");
    }
}

#[test]
fn for_each_newest_entry_visits_the_entries_for_each_newest_visits() {
    // Enough keys for several leaves per partition: the chunks resume across leaves.
    let index = filled(20_000);
    let mut expected = Vec::new();
    index.for_each_newest(5000, |_, entry, _| expected.push(entry));
    assert_eq!(expected.len(), 20_000);
    for chunk in [0, 1, 7, 100, 5000, 50_000] {
        let mut seen = Vec::new();
        index.for_each_newest_entry(chunk, |entry| seen.push(entry));
        assert_eq!(seen, expected, "chunk {chunk}");
    }
}

#[test]
fn keys_spread_over_every_partition() {
    let index = filled(PARTITIONS * 100);
    for part in index.parts() {
        let held = part.read().len();
        assert!(
            (30..=300).contains(&held),
            "a partition holds {held} of 1600"
        );
    }
}

#[test]
fn empty_and_tiny_indexes_are_exhausted_at_once() {
    let index = PartitionedIndex::default();
    let chunk = index.collect_visible(Bound::Unbounded, Bound::Unbounded, 9, 128, false);
    assert!(chunk.exhausted && chunk.entries.is_empty());
    let index = filled(3);
    let chunk = index.collect_visible(Bound::Unbounded, Bound::Unbounded, 9, 128, true);
    assert!(chunk.exhausted);
    assert_eq!(chunk.entries.len(), 3);
}

/// A Redis-style key: a 2-byte big-endian length, that many bytes, then a suffix.
fn grouped_key(group: &[u8], suffix: &[u8]) -> Vec<u8> {
    let mut key = (group.len() as u16).to_be_bytes().to_vec();
    key.extend_from_slice(group);
    key.extend_from_slice(suffix);
    key
}

const LENGTH_PREFIXED: KeyGroups = KeyGroups::LengthPrefixed {
    offset: 0,
    width: 2,
};

#[test]
fn a_groups_keys_share_one_partition_and_its_prefix_deletes_lock_only_that() {
    let index = PartitionedIndex::new(LENGTH_PREFIXED);
    for group in [&b"user:1"[..], b"user:2", b"\xff\xff", b""] {
        let part = index.partition_of(&grouped_key(group, b""));
        for suffix in [&b"a"[..], b"b\x00", b"\xff\xff\xff", b"zzzz"] {
            assert_eq!(index.partition_of(&grouped_key(group, suffix)), part);
        }
        assert_eq!(
            index.partitions_of_prefix(&grouped_key(group, b"a")),
            part..part + 1
        );
    }
    // Too short to hold its group's length: every partition.
    assert_eq!(index.partitions_of_prefix(b"\x00"), 0..PARTITIONS);
    // Without groups, keys of one prefix spread.
    let spread = PartitionedIndex::default();
    let parts: std::collections::HashSet<usize> = (0..64)
        .map(|n| spread.partition_of(&grouped_key(b"user:1", &[n])))
        .collect();
    assert!(parts.len() > 1);
    assert_eq!(spread.partitions_of_prefix(b"user"), 0..PARTITIONS);
}

fn bound(owned: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    owned.as_ref().map(Vec::as_slice)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Range reads of an index with key groups, within a group (one partition) or across
    /// groups (merged), chunk by chunk, list what a sorted map lists.
    #[test]
    fn grouped_ranges_read_like_a_sorted_map(
        keys in proptest::collection::btree_set(
            (0u8..4, proptest::collection::vec(proptest::prelude::prop_oneof![
                proptest::prelude::Just(0u8), proptest::prelude::Just(b'a'), proptest::prelude::Just(0xffu8)
            ], 0..4)),
            0..60,
        ),
        ranges in proptest::collection::vec(
            (0u8..4, proptest::collection::vec(0u8..=255, 0..3), 0u8..4,
             proptest::collection::vec(0u8..=255, 0..3), 0u8..3, 0u8..3, proptest::prelude::any::<bool>(), 1usize..6),
            1..20,
        ),
    ) {
        let groups: [&[u8]; 4] = [b"", b"a", b"ab", b"\xff\xff"];
        let index = PartitionedIndex::new(LENGTH_PREFIXED);
        let mut model = BTreeMap::new();
        for (n, (group, suffix)) in keys.iter().enumerate() {
            let key = grouped_key(groups[usize::from(*group)], suffix);
            index.part(&key).write().put(&key, entry(n as u64 + 1), None, 0);
            model.insert(key, ());
        }
        for (low_group, low_suffix, high_group, high_suffix, low_kind, high_kind, reverse, limit) in ranges {
            let make = |kind: u8, group: u8, suffix: &[u8]| {
                let key = grouped_key(groups[usize::from(group)], suffix);
                match kind {
                    0 => Bound::Included(key),
                    1 => Bound::Excluded(key),
                    _ => Bound::Unbounded,
                }
            };
            let lower = make(low_kind, low_group, &low_suffix);
            let upper = make(high_kind, high_group, &high_suffix);
            let expected: Vec<Vec<u8>> = {
                let mut keys: Vec<Vec<u8>> = model
                    .keys()
                    .filter(|key| {
                        <(Bound<&[u8]>, Bound<&[u8]>) as std::ops::RangeBounds<[u8]>>::contains(
                            &(bound(&lower), bound(&upper)),
                            key.as_slice(),
                        )
                    })
                    .cloned()
                    .collect();
                if reverse {
                    keys.reverse();
                }
                keys
            };
            let mut seen: Vec<Vec<u8>> = Vec::new();
            loop {
                let (from, to) = match (seen.last(), reverse) {
                    (None, _) => (lower.clone(), upper.clone()),
                    (Some(last), false) => (Bound::Excluded(last.clone()), upper.clone()),
                    (Some(last), true) => (lower.clone(), Bound::Excluded(last.clone())),
                };
                let chunk = index.collect_visible(bound(&from), bound(&to), u64::MAX, limit, reverse);
                proptest::prop_assert!(chunk.entries.len() <= limit);
                seen.extend(chunk.entries.into_iter().map(|visible| visible.key.to_vec()));
                if chunk.exhausted {
                    break;
                }
                proptest::prop_assert!(seen.len() <= model.len(), "chunks never end");
            }
            proptest::prop_assert_eq!(seen, expected);
        }
    }
}
