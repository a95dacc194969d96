//! `ShortBytes`: a byte string kept inline when short (up to [`INLINE_BYTES`]), else shared on
//! the heap. The index's leaf fences and the value cache's keys are such strings: inline, a
//! B-tree node's comparisons and a cache read's copy touch no other memory, and most keys need
//! no allocation of their own.

use std::cmp::Ordering;
use std::sync::Arc;

/// Strings up to this long live inline (YCSB's 23-byte keys and the server's records of
/// redis-benchmark's keys among them).
pub const INLINE_BYTES: usize = 30;

#[derive(Clone)]
pub enum ShortBytes {
    /// The bytes past `len` are zero: the order compares them.
    Inline {
        len: u8,
        bytes: [u8; INLINE_BYTES],
    },
    Shared(Arc<[u8]>),
}

impl ShortBytes {
    /// Bytes it holds on the heap beyond itself (its shared string and that allocation's
    /// reference counts); `allocation_overhead` is what the allocator adds per allocation.
    pub fn heap_bytes(&self, allocation_overhead: usize) -> usize {
        match self {
            ShortBytes::Inline { .. } => 0,
            ShortBytes::Shared(bytes) => 2 * size_of::<usize>() + bytes.len() + allocation_overhead,
        }
    }
}

impl From<&[u8]> for ShortBytes {
    fn from(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE_BYTES {
            let mut inline = [0; INLINE_BYTES];
            inline[..bytes.len()].copy_from_slice(bytes);
            ShortBytes::Inline {
                len: bytes.len() as u8,
                bytes: inline,
            }
        } else {
            ShortBytes::Shared(bytes.into())
        }
    }
}

impl std::ops::Deref for ShortBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ShortBytes::Inline { len, bytes } => &bytes[..usize::from(*len)],
            ShortBytes::Shared(bytes) => bytes,
        }
    }
}

impl std::borrow::Borrow<[u8]> for ShortBytes {
    fn borrow(&self) -> &[u8] {
        self
    }
}

// Ordered and compared exactly like the bytes, as `Borrow` requires.
impl Ord for ShortBytes {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (
                ShortBytes::Inline { len, bytes },
                ShortBytes::Inline {
                    len: other_len,
                    bytes: other_bytes,
                },
            ) => compare_padded(bytes, other_bytes).then(len.cmp(other_len)),
            _ => (**self).cmp(&**other),
        }
    }
}

/// Orders two inline strings by their zero-padded bytes, eight at a time as big-endian words:
/// a search of the index's B-tree of fences compared byte strings with a call to `memcmp`
/// (fences of one map often share their first fifteen bytes), a tenth of a pipelined SET's
/// instructions. Where the padded bytes tie, the shorter string is the other's prefix and sorts
/// first, so with the lengths compared after them this is the bytes' order.
#[inline]
fn compare_padded(left: &[u8; INLINE_BYTES], right: &[u8; INLINE_BYTES]) -> Ordering {
    // The last word overlaps the one before it, whose bytes are equal by then.
    const WORD_STARTS: [usize; 4] = [0, 8, 16, INLINE_BYTES - 8];
    let word = |bytes: &[u8; INLINE_BYTES], at: usize| {
        u64::from_be_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
    };
    for at in WORD_STARTS {
        match word(left, at).cmp(&word(right, at)) {
            Ordering::Equal => {}
            unequal => return unequal,
        }
    }
    Ordering::Equal
}

const _: () = assert!(
    INLINE_BYTES >= 24 && INLINE_BYTES <= 32,
    "four words cover it"
);

impl PartialOrd for ShortBytes {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for ShortBytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for ShortBytes {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Two strings sharing a prefix of up to the inline limit and more, then a few zeros and
    /// other bytes each: ties on padded words at every word.
    fn pair() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
        let tail =
            || proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(255u8)], 0..4);
        (
            proptest::collection::vec(any::<u8>(), 0..34),
            tail(),
            tail(),
        )
            .prop_map(|(shared, left, right)| {
                (
                    [&shared[..], &left[..]].concat(),
                    [&shared[..], &right[..]].concat(),
                )
            })
    }

    proptest! {
        #[test]
        fn orders_like_its_bytes((left, right) in pair()) {
            let (short_left, short_right) = (ShortBytes::from(&left[..]), ShortBytes::from(&right[..]));
            prop_assert_eq!(short_left.cmp(&short_right), left.cmp(&right));
            prop_assert_eq!(short_left == short_right, left == right);
        }
    }

    #[test]
    fn holds_and_orders_its_bytes_inline_or_shared() {
        let short = ShortBytes::from(&b"abc"[..]);
        let long = ShortBytes::from(&[7u8; INLINE_BYTES + 1][..]);
        let at_limit = ShortBytes::from(&[7u8; INLINE_BYTES][..]);
        assert!(matches!(short, ShortBytes::Inline { .. }));
        assert!(matches!(at_limit, ShortBytes::Inline { .. }));
        assert!(matches!(long, ShortBytes::Shared(_)));
        assert_eq!(&*short, b"abc");
        assert_eq!(&*long, &[7u8; INLINE_BYTES + 1][..]);
        assert!(at_limit < long, "ordered as bytes, whatever the form");
        assert_eq!(short.heap_bytes(16), 0);
        assert_eq!(long.heap_bytes(16), 16 + INLINE_BYTES + 1 + 16);
        assert_eq!(ShortBytes::from(&[][..]).len(), 0);
    }
}
