//! Key ranges: bounds owned by a cursor, the range of a prefix, and the checks every range
//! walk shares (emptiness, and whether a key is still inside a bound).

use std::cmp::Ordering;
use std::ops::{Bound, RangeBounds};

pub type OwnedBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

pub fn owned_bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(range: &R) -> OwnedBounds {
    let own = |bound: Bound<&K>| match bound {
        Bound::Included(key) => Bound::Included(key.as_ref().to_vec()),
        Bound::Excluded(key) => Bound::Excluded(key.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}

/// The range of keys starting with `prefix`.
pub fn prefix_bounds(prefix: &[u8]) -> OwnedBounds {
    let end = match successor_last(prefix) {
        Some(last) => {
            let mut successor = prefix[..=last].to_vec();
            successor[last] += 1;
            Bound::Excluded(successor)
        }
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix.to_vec()), end)
}

/// The last byte of `prefix` that its successor (the smallest key past every key starting with
/// it) keeps, raised by one, after the bytes before it; `None` when `prefix` is all 0xff bytes.
fn successor_last(prefix: &[u8]) -> Option<usize> {
    prefix.iter().rposition(|&byte| byte < u8::MAX)
}

/// How `key` sorts against the end of the keys starting with `prefix` (the successor that
/// `prefix_bounds(prefix).1` excludes), found without building it; `None` when the keys
/// starting with `prefix` have no end (`prefix` is all 0xff bytes).
pub fn cmp_prefix_end(key: &[u8], prefix: &[u8]) -> Option<Ordering> {
    let last = successor_last(prefix)?;
    // The successor is `prefix[..last]` then `prefix[last] + 1`: compared a slice at a time
    // (memcmp), where a byte at a time cost a partition lookup of every ranged read (HGETALL)
    // 370 instructions.
    let shared = key.len().min(last);
    let order = key[..shared].cmp(&prefix[..shared]);
    if order.is_ne() {
        return Some(order);
    }
    let Some(&byte) = key.get(last) else {
        // `key` is a prefix of the successor's bytes before its last one: shorter, so first.
        return Some(Ordering::Less);
    };
    Some(
        byte.cmp(&(prefix[last] + 1))
            .then(key.len().cmp(&(last + 1))),
    )
}

/// Whether `lower..upper` holds no key at all (inverted, or empty between excluded bounds);
/// `BTreeMap::range` panics on such ranges, so callers check first.
pub fn is_empty_range<T: Ord + ?Sized>(lower: Bound<&T>, upper: Bound<&T>) -> bool {
    match (lower, upper) {
        (Bound::Included(low), Bound::Included(high)) => low > high,
        (Bound::Included(low), Bound::Excluded(high))
        | (Bound::Excluded(low), Bound::Included(high))
        | (Bound::Excluded(low), Bound::Excluded(high)) => low >= high,
        _ => false,
    }
}

pub fn as_slice_bound(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) => Bound::Included(key.as_slice()),
        Bound::Excluded(key) => Bound::Excluded(key.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

pub fn below_upper(key: &[u8], upper: &Bound<Vec<u8>>) -> bool {
    match upper {
        Bound::Included(bound) => key <= bound.as_slice(),
        Bound::Excluded(bound) => key < bound.as_slice(),
        Bound::Unbounded => true,
    }
}

pub fn above_lower(key: &[u8], lower: &Bound<Vec<u8>>) -> bool {
    match lower {
        Bound::Included(bound) => key >= bound.as_slice(),
        Bound::Excluded(bound) => key > bound.as_slice(),
        Bound::Unbounded => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_inverted_ranges_are_recognized() {
        let (a, b): (&[u8], &[u8]) = (b"a", b"b");
        assert!(is_empty_range(Bound::Included(b), Bound::Excluded(a)));
        assert!(is_empty_range(Bound::Excluded(a), Bound::Excluded(a)));
        assert!(is_empty_range(Bound::Included(a), Bound::Excluded(a)));
        assert!(!is_empty_range(Bound::Included(a), Bound::Included(a)));
        assert!(!is_empty_range(Bound::Included(a), Bound::Excluded(b)));
        assert!(!is_empty_range(Bound::Unbounded, Bound::Excluded(a)));
    }

    #[test]
    fn a_key_sorts_against_a_prefixs_end_as_against_the_built_successor() {
        let alphabet = [0u8, 1, 0xfe, 0xff];
        let strings: Vec<Vec<u8>> = (0..=3usize)
            .flat_map(|len| {
                (0..alphabet.len().pow(len as u32)).map(move |mut n| {
                    (0..len)
                        .map(|_| {
                            let byte = alphabet[n % alphabet.len()];
                            n /= alphabet.len();
                            byte
                        })
                        .collect()
                })
            })
            .collect();
        for prefix in &strings {
            for key in &strings {
                let expected = match prefix_bounds(prefix).1 {
                    Bound::Excluded(end) => Some(key.as_slice().cmp(end.as_slice())),
                    _ => None,
                };
                assert_eq!(cmp_prefix_end(key, prefix), expected, "{key:?} {prefix:?}");
            }
        }
    }

    #[test]
    fn prefix_bounds_handle_high_bytes() {
        assert_eq!(
            prefix_bounds(b"ab"),
            (
                Bound::Included(b"ab".to_vec()),
                Bound::Excluded(b"ac".to_vec())
            )
        );
        assert_eq!(
            prefix_bounds(&[1, 0xff]),
            (Bound::Included(vec![1, 0xff]), Bound::Excluded(vec![2]))
        );
        assert_eq!(
            prefix_bounds(&[0xff]),
            (Bound::Included(vec![0xff]), Bound::Unbounded)
        );
    }
}
