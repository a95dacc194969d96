//! Names of segments and of records' places in them.

/// Identifies a segment; never reused within a KVDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentId(pub u32);

/// Where a record lives on media.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Location {
    pub segment: SegmentId,
    pub offset: u32,
    pub len: u32,
}
