//! One leaf of the packed index: the entries of a key range, each stored as the key bytes after
//! the prefix the leaf's keys share, then its location and seqno as LEB128 varints and, for a
//! short value kept in the index, its length byte and bytes; with a dense array of slots (entry
//! offset and first four suffix bytes) that a binary search compares.

use super::entry::Entry;
use crate::segment::{Location, SegmentId};
use std::cmp::Ordering;
use std::ops::Range;

/// A leaf grown past this many bytes splits in two; merged leaves stay below half of it.
pub(super) const LEAF_BYTES_MAX: usize = 4096;
/// An entry's location and seqno as varints (5 + 5 + 5 + 10 bytes at most), then a value kept
/// in the index: its length byte and bytes.
const ENTRY_VALUE_BYTES_MAX: usize = 25 + 1 + crate::limits::INDEX_VALUE_BYTES_LIMIT;

// Offsets inside a leaf are u16: a full leaf plus one largest entry must fit.
const _: () = assert!(
    LEAF_BYTES_MAX + 3 + crate::limits::KEY_BYTES_MAX + ENTRY_VALUE_BYTES_MAX <= u16::MAX as usize
);

#[derive(Default)]
pub(super) struct Leaf {
    /// How many leading bytes of the fence every key in this leaf starts with: the common prefix
    /// of this fence and the next one (a key between two fences starts with what they share).
    pub(super) prefix_len: u16,
    /// The entries in key order, each: suffix length (varint), key suffix, segment, offset,
    /// length (varints), seqno times two plus one if a value follows (varint), and then that
    /// value's length (one byte) and bytes.
    pub(super) bytes: Vec<u8>,
    /// Each entry's place in `bytes` and the first bytes of its suffix, in key order: a search
    /// compares the hints in this dense array and reads `bytes` only to break ties.
    pub(super) slots: Vec<Slot>,
}

#[derive(Clone, Copy)]
pub(super) struct Slot {
    pub(super) start: u16,
    /// The suffix's first four bytes, big-endian, zero-padded, as two halves (a `u32` would
    /// align the slot to 8 bytes): ordered like the suffixes except where equal. Four bytes,
    /// not two: a leaf's keys often share their first two bytes past the prefix (the digits
    /// of numbered keys), and each tie decodes an entry and compares its bytes.
    hint_high: u16,
    hint_low: u16,
}

impl Slot {
    fn new(start: usize, hint: u32) -> Slot {
        debug_assert!(start <= usize::from(u16::MAX), "a leaf's offsets are u16");
        Slot {
            start: start as u16,
            hint_high: (hint >> 16) as u16,
            hint_low: hint as u16,
        }
    }

    fn hint(&self) -> u32 {
        (u32::from(self.hint_high) << 16) | u32::from(self.hint_low)
    }
}

fn hint_of(suffix: impl IntoIterator<Item = u8>) -> u32 {
    let mut bytes = suffix.into_iter();
    u32::from_be_bytes(std::array::from_fn(|_| bytes.next().unwrap_or(0)))
}

impl Leaf {
    /// Gives back the room reserved beyond the entries (a built leaf takes what it holds).
    pub(super) fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
        self.slots.shrink_to_fit();
    }

    /// An empty leaf whose keys will all start with their first `prefix_len` bytes.
    pub(super) fn with_prefix(prefix_len: usize) -> Leaf {
        Leaf {
            prefix_len: prefix_len as u16,
            ..Leaf::default()
        }
    }

    /// Appends the entries `range` of `source` (the leaf at `source_fence`) after this leaf's
    /// last, in order, each key cut again at this leaf's prefix: what a split or merge does,
    /// copying each entry's bytes once (no key is rebuilt on the heap).
    pub(super) fn extend_from(&mut self, source: &Leaf, source_fence: &[u8], range: Range<usize>) {
        let own = usize::from(self.prefix_len);
        let theirs = usize::from(source.prefix_len);
        // A key's bytes past this leaf's prefix: the part of the source's prefix this leaf does
        // not share (a merge widens the range), then the source suffix past what this leaf's
        // longer prefix takes (a split narrows it).
        let head = source_fence.get(own..theirs).unwrap_or_default();
        let skip = own.saturating_sub(theirs);
        let source_bytes = if range.is_empty() {
            0
        } else {
            source.end(range.end - 1) - usize::from(source.slots[range.start].start)
        };
        self.bytes.reserve(source_bytes + range.len() * head.len());
        self.slots.reserve(range.len());
        for at in range {
            let (suffix, value_start) = source.suffix(at);
            let suffix = &suffix[skip..];
            let hint = hint_of(head.iter().chain(suffix).copied());
            self.slots.push(Slot::new(self.bytes.len(), hint));
            put_varint(&mut self.bytes, (head.len() + suffix.len()) as u64);
            self.bytes.extend_from_slice(head);
            self.bytes.extend_from_slice(suffix);
            self.bytes
                .extend_from_slice(&source.bytes[value_start..source.end(at)]);
        }
    }

    pub(super) fn is_oversized(&self) -> bool {
        self.bytes.len() > LEAF_BYTES_MAX
    }

    /// The entry at position `at`: its suffix and where its value starts.
    fn suffix(&self, at: usize) -> (&[u8], usize) {
        let start = usize::from(self.slots[at].start);
        let (len, len_bytes) = get_varint(&self.bytes[start..]);
        let suffix_start = start + len_bytes;
        let suffix_end = suffix_start + len as usize;
        (&self.bytes[suffix_start..suffix_end], suffix_end)
    }

    /// The suffix of the leaf's last key, if it holds any.
    pub(super) fn last_suffix(&self) -> Option<&[u8]> {
        let last = self.slots.len().checked_sub(1)?;
        Some(self.suffix(last).0)
    }

    pub(super) fn entry(&self, at: usize) -> Entry {
        self.entry_with_value(at).0
    }

    /// The entry at position `at` and the value kept with it, if any.
    pub(super) fn entry_with_value(&self, at: usize) -> (Entry, Option<&[u8]>) {
        let (_, value_start) = self.suffix(at);
        let (entry, value) = decode_entry(&self.bytes[value_start..self.end(at)]);
        (entry, value.map(|range| &self.bytes[value_start..][range]))
    }

    pub(super) fn key_into(&self, fence: &[u8], at: usize, key: &mut Vec<u8>) {
        let prefix = &fence[..usize::from(self.prefix_len)];
        let suffix = self.suffix(at).0;
        key.clear();
        // Room for the whole key at once: grown by each part in turn, an empty buffer was
        // allocated twice (a type probe's first key, 2.5% of a packed hash's update).
        key.reserve(prefix.len() + suffix.len());
        key.extend_from_slice(prefix);
        key.extend_from_slice(suffix);
    }

    fn end(&self, at: usize) -> usize {
        self.slots
            .get(at + 1)
            .map_or(self.bytes.len(), |slot| usize::from(slot.start))
    }

    /// The key suffix of the entry at position `at`.
    pub(super) fn suffix_at(&self, at: usize) -> &[u8] {
        self.suffix(at).0
    }

    /// Whether the entry at position `at` is the one of `suffix`.
    pub(super) fn holds_at(&self, at: usize, suffix: &[u8]) -> bool {
        at < self.slots.len() && self.suffix_at(at) == suffix
    }

    pub(super) fn search(&self, suffix: &[u8]) -> Result<usize, usize> {
        let hint = hint_of(suffix.iter().copied());
        let (mut low, mut high) = (0, self.slots.len());
        while low < high {
            let middle = low + (high - low) / 2;
            let ordering = self.slots[middle]
                .hint()
                .cmp(&hint)
                .then_with(|| self.suffix(middle).0.cmp(suffix));
            match ordering {
                Ordering::Less => low = middle + 1,
                Ordering::Greater => high = middle,
                Ordering::Equal => return Ok(middle),
            }
        }
        Err(low)
    }

    /// Puts a new entry for `suffix` at position `at`, with `value` kept in it if given.
    pub(super) fn insert(&mut self, at: usize, suffix: &[u8], entry: Entry, value: Option<&[u8]>) {
        let mut head = [0; 3];
        let head_len = varint_into(suffix.len() as u64, &mut head);
        let mut encoded = [0; ENTRY_VALUE_BYTES_MAX];
        let encoded_len = encode_entry(entry, value, &mut encoded);
        let start = self
            .slots
            .get(at)
            .map_or(self.bytes.len(), |slot| usize::from(slot.start));
        reserve_gently(&mut self.slots, 1);
        self.slots
            .insert(at, Slot::new(start, hint_of(suffix.iter().copied())));
        let parts = [&head[..head_len], suffix, &encoded[..encoded_len]];
        self.splice(at + 1, start, 0, &parts);
    }

    /// Writes `entry` and `value` over the entry at position `at` and its value.
    pub(super) fn replace(&mut self, at: usize, entry: Entry, value: Option<&[u8]>) {
        let mut encoded = [0; ENTRY_VALUE_BYTES_MAX];
        let encoded_len = encode_entry(entry, value, &mut encoded);
        let (_, value_start) = self.suffix(at);
        let old_len = self.end(at) - value_start;
        self.splice(at + 1, value_start, old_len, &[&encoded[..encoded_len]]);
    }

    /// Writes `entry` over the location and seqno of the entry at position `at`, keeping the
    /// value kept with it (the same version, moved by the cleaner).
    pub(super) fn relocate(&mut self, at: usize, entry: Entry) {
        let (old, value) = self.entry_with_value(at);
        debug_assert_eq!(old.seqno, entry.seqno, "a move keeps its version");
        let mut kept = [0; crate::limits::INDEX_VALUE_BYTES_LIMIT];
        let kept = value.map(|value| {
            kept[..value.len()].copy_from_slice(value);
            &kept[..value.len()]
        });
        self.replace(at, entry, kept);
    }

    pub(super) fn remove(&mut self, at: usize) {
        let start = usize::from(self.slots[at].start);
        let len = self.end(at) - start;
        self.slots.remove(at);
        self.splice(at, start, len, &[]);
        shrink_gently(&mut self.bytes);
        shrink_gently(&mut self.slots);
    }

    /// Replaces `old_len` bytes at `start` with `parts`, and moves the starts of the entries
    /// from position `moved` on by the change in length.
    fn splice(&mut self, moved: usize, start: usize, old_len: usize, parts: &[&[u8]]) {
        let new_len: usize = parts.iter().map(|part| part.len()).sum();
        let delta = new_len as isize - old_len as isize;
        if delta != 0 {
            self.resize_gap(start + old_len, delta);
            for later in &mut self.slots[moved..] {
                later.start = (later.start as isize + delta) as u16;
            }
        }
        let mut out = start;
        for part in parts {
            self.bytes[out..out + part.len()].copy_from_slice(part);
            out += part.len();
        }
    }

    /// Grows or shrinks `bytes` by `delta` at `at`, moving what follows.
    fn resize_gap(&mut self, at: usize, delta: isize) {
        let old_len = self.bytes.len();
        if delta > 0 {
            let grow = delta as usize;
            reserve_gently(&mut self.bytes, grow);
            self.bytes.resize(old_len + grow, 0);
            self.bytes.copy_within(at..old_len, at + grow);
        } else if delta < 0 {
            let shrink = delta.unsigned_abs();
            self.bytes.copy_within(at..old_len, at - shrink);
            self.bytes.truncate(old_len - shrink);
        }
    }
}

/// Reserves room for `additional` more items with an eighth of slack, not the doubling `Vec`
/// does by itself: leaves grow one entry at a time and their spare capacity is DRAM per key.
fn reserve_gently<T>(vec: &mut Vec<T>, additional: usize) {
    if vec.capacity() - vec.len() < additional {
        vec.reserve_exact(additional + vec.len() / 8);
    }
}

/// Gives back spare capacity once it is most of the allocation, keeping an eighth of slack.
fn shrink_gently<T>(vec: &mut Vec<T>) {
    if vec.capacity() > 2 * vec.len() + 16 {
        vec.shrink_to(vec.len() + vec.len() / 8);
    }
}

/// Encodes `entry` and the value kept with it into `out`; returns the bytes written. The seqno's
/// lowest bit says whether a value follows (seqnos stay far below 2^63), which costs an entry
/// without one a byte only where the doubled seqno needs one more varint byte.
fn encode_entry(entry: Entry, value: Option<&[u8]>, out: &mut [u8]) -> usize {
    let Location {
        segment,
        offset,
        len,
    } = entry.location;
    let mut at = varint_into(u64::from(segment.0), out);
    at += varint_into(u64::from(offset), &mut out[at..]);
    at += varint_into(u64::from(len), &mut out[at..]);
    debug_assert!(
        entry.seqno < 1 << 63,
        "seqnos are counted from 1, one per record"
    );
    at += varint_into(
        entry.seqno << 1 | u64::from(value.is_some()),
        &mut out[at..],
    );
    if let Some(value) = value {
        assert!(
            value.len() <= crate::limits::INDEX_VALUE_BYTES_LIMIT,
            "values kept in the index are bounded by Options::validate"
        );
        out[at] = value.len() as u8;
        out[at + 1..at + 1 + value.len()].copy_from_slice(value);
        at += 1 + value.len();
    }
    at
}

/// The entry encoded at the start of `bytes` (one entry's encoding, as `encode_entry` wrote
/// it) and where in `bytes` the value kept with it is.
fn decode_entry(bytes: &[u8]) -> (Entry, Option<Range<usize>>) {
    let (segment, mut at) = get_varint(bytes);
    let (offset, used) = get_varint(&bytes[at..]);
    at += used;
    let (len, used) = get_varint(&bytes[at..]);
    at += used;
    let (seqno_and_flag, used) = get_varint(&bytes[at..]);
    at += used;
    let value = (seqno_and_flag & 1 == 1).then(|| {
        let len = usize::from(bytes[at]);
        at + 1..at + 1 + len
    });
    let entry = Entry {
        location: Location {
            segment: SegmentId(segment as u32),
            offset: offset as u32,
            len: len as u32,
        },
        seqno: seqno_and_flag >> 1,
    };
    (entry, value)
}

/// LEB128: seven bits per byte, low first, the high bit set on every byte but the last.
fn varint_into(mut value: u64, out: &mut [u8]) -> usize {
    let mut at = 0;
    while value >= 0x80 {
        out[at] = value as u8 | 0x80;
        value >>= 7;
        at += 1;
    }
    out[at] = value as u8;
    at + 1
}

fn put_varint(out: &mut Vec<u8>, value: u64) {
    let mut buffer = [0; 10];
    let len = varint_into(value, &mut buffer);
    out.extend_from_slice(&buffer[..len]);
}

fn get_varint(bytes: &[u8]) -> (u64, usize) {
    let mut value = 0u64;
    for (at, byte) in bytes.iter().enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * at);
        if byte & 0x80 == 0 {
            return (value, at + 1);
        }
    }
    unreachable!("a leaf's varints are written whole")
}
