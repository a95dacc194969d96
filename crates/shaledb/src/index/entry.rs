//! What the index stores per version of a key: where its record is, and its seqno.

use crate::segment::Location;
use bytes::Bytes;

pub type Key = Box<[u8]>;

/// Whether the index keeps `value` in its key's entry when at most `max` bytes
/// (`Options::index_value_bytes_max`) are kept: a non-empty value that short. An empty value
/// needs no keeping: its record's length alone says it is empty.
pub fn keeps_value(value: &[u8], max: usize) -> bool {
    (1..=max).contains(&value.len())
}

/// The newest version of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub location: Location,
    pub seqno: u64,
}

/// A version a range read found: its key, its entry, and a copy of the value the index keeps
/// with it (only a newest version keeps one).
#[derive(Debug)]
pub struct Visible {
    pub key: Key,
    pub entry: Entry,
    pub value: Option<Bytes>,
}
