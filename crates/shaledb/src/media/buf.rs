//! Page-aligned buffers, the only memory direct I/O reads into or writes from, and page
//! arithmetic.

use crate::limits::PAGE_BYTES;
use bytes::Bytes;

pub fn round_up_to_page(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE_BYTES as u64) * PAGE_BYTES as u64
}

pub fn round_down_to_page(bytes: u64) -> u64 {
    bytes / PAGE_BYTES as u64 * PAGE_BYTES as u64
}

/// A byte buffer whose data starts at a page-aligned address, built from a plain `Vec` (no
/// `unsafe`): the vector is over-allocated by a page and the data window starts at the first
/// aligned address inside it. A new buffer is zero; once reused, bytes past `len` hold whatever
/// was there, and [`AlignedBuf::zero_padding`] zeroes the rest of the last page before the
/// padded view is written. Clearing zeroes nothing: a log head recycles a buffer of a megabyte
/// under its lock, and zeroing it there stalled every appender.
pub struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
    capacity: usize,
}

impl AlignedBuf {
    pub fn zeroed(capacity: usize) -> Self {
        let capacity = round_up_to_page(capacity as u64) as usize;
        let storage = vec![0u8; capacity + PAGE_BYTES];
        let start = storage.as_ptr().align_offset(PAGE_BYTES);
        assert!(start < PAGE_BYTES, "a page-sized window always exists");
        AlignedBuf {
            storage,
            start,
            len: 0,
            capacity,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    /// Zeroes the bytes from `len` to the end of its page (at most a page less one byte).
    pub fn zero_padding(&mut self) {
        let padded = round_up_to_page(self.len as u64) as usize;
        self.storage[self.start + self.len..self.start + padded].fill(0);
    }

    /// The data rounded up to whole pages: what a direct write sends. The padding is zero in
    /// a buffer not reused since it was made, else after [`AlignedBuf::zero_padding`].
    pub fn padded(&self) -> &[u8] {
        let padded = round_up_to_page(self.len as u64) as usize;
        let view = &self.storage[self.start..self.start + padded];
        debug_assert!(
            view[self.len..].iter().all(|&byte| byte == 0),
            "padding written unzeroed"
        );
        view
    }

    /// The whole capacity, for reading into; call [`AlignedBuf::set_len`] afterwards.
    pub fn window_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.capacity]
    }

    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity);
        self.len = len;
    }

    pub fn extend_from_slice(&mut self, data: &[u8]) {
        self.extend_with(data.len()).copy_from_slice(data);
    }

    /// Grows the data by `len` bytes and returns them to be filled (they hold stale bytes).
    pub fn extend_with(&mut self, len: usize) -> &mut [u8] {
        assert!(self.len + len <= self.capacity, "aligned buffer overflow");
        let at = self.start + self.len;
        self.len += len;
        &mut self.storage[at..at + len]
    }

    /// Empties the buffer (zeroing nothing: see the type's comment).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Turns `range` of the data into `Bytes` without copying.
    pub fn into_bytes(self, range: std::ops::Range<usize>) -> Bytes {
        assert!(range.end <= self.len);
        Bytes::from(self.storage).slice(self.start + range.start..self.start + range.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffer_is_aligned_and_zero_padded() {
        let mut buf = AlignedBuf::zeroed(10_000);
        assert_eq!(buf.capacity(), 3 * PAGE_BYTES);
        assert_eq!(buf.padded().as_ptr() as usize % PAGE_BYTES, 0);
        buf.extend_from_slice(&[7; 5000]);
        assert_eq!(buf.padded().len(), 2 * PAGE_BYTES);
        assert!(buf.padded()[5000..].iter().all(|&byte| byte == 0));
        buf.clear();
        assert!(buf.padded().is_empty());
        buf.extend_from_slice(&[1; 10]);
        buf.zero_padding();
        assert_eq!(buf.padded().len(), PAGE_BYTES);
        assert!(buf.padded()[10..].iter().all(|&byte| byte == 0));
        assert_eq!(&buf.padded()[..10], &[1; 10]);
    }
}
