//! What the index stores per version of a key: where its record is, and its seqno.

use crate::segment::Location;

pub type Key = Box<[u8]>;

/// The newest version of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub location: Location,
    pub seqno: u64,
}
