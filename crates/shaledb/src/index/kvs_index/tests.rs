//! The per-KVS index's tests: versions kept for snapshots, liveness and the cleaner's moves.
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
    assert_eq!(
        relocate(&mut index, 2, entry(2).location, to),
        Some(Liveness::Newest)
    );
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
    assert_eq!(relocate(&mut index, 1, to, to), None);
    assert_eq!(
        relocate(&mut index, 1, entry(1).location, to),
        Some(Liveness::Newest)
    );
    assert_eq!(index.get(b"k").unwrap().location, to);
    // A version kept for a snapshot moves too, and is told so.
    index.put(b"k", entry(2), None, 1);
    let further = Location { offset: 100, ..to };
    assert_eq!(
        relocate(&mut index, 1, to, further),
        Some(Liveness::Snapshot)
    );
    assert_eq!(index.liveness(b"k", 1, further), Liveness::Snapshot);
}

/// Relocates `b"k"` at `seqno` from `from` to `to`; returns what the copy was told.
fn relocate(index: &mut KvsIndex, seqno: u64, from: Location, to: Location) -> Option<Liveness> {
    let mut told = None;
    let moved = index
        .relocate_with(b"k", seqno, from, |liveness| {
            told = Some(liveness);
            Ok::<_, ()>(to)
        })
        .unwrap();
    assert_eq!(moved.is_some(), told.is_some());
    told
}
