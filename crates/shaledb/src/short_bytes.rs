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
    Inline { len: u8, bytes: [u8; INLINE_BYTES] },
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
    fn cmp(&self, other: &Self) -> Ordering {
        (**self).cmp(&**other)
    }
}

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
