//! Segments: large append-only files of records, their header, the table of segments a KVDB
//! holds with their live-byte counters, and the sequential record scanner that recovery, the
//! cleaner and `check` share.

mod files;
mod header;
mod id;
mod scan;
mod table;

pub use files::{list_segment_files, segment_file_name};
pub use header::{HeadKind, SegmentHeader};
pub use id::{Location, SegmentId};
pub use scan::{scan_records, ScanSummary};
pub use table::{Seal, SegmentMeta, SegmentTable};
