//! Segments: large append-only files of records, their header, the table of segments a KVDB
//! holds with their live-byte counters, and the sequential record scanner that recovery, the
//! cleaner and `check` share.

mod header;
mod id;
mod scan;
mod table;

pub use header::{parse_segment_file_name, segment_file_name, HeadKind, SegmentHeader};
pub use id::{Location, SegmentId};
pub use scan::scan_records;
pub use table::{SegmentMeta, SegmentTable};
