//! Media: classes of devices, aligned buffers, and segment files read and written with direct I/O.
//!
//! Every write and scan of a segment file is page-aligned in offset, length and memory address,
//! and every exact read (a get's one record) aligned to the device's logical block, so the file
//! can be opened with O_DIRECT and the page cache never acts as a hidden cache.
//! Where the file system refuses O_DIRECT (tmpfs, some overlay file systems) the file falls back
//! to buffered I/O with `fdatasync`, and a warning says so once per process.

mod batch;
mod buf;
mod class;
mod counters;
mod dir;
mod file;
mod storage;
mod uring;

pub use batch::{device_reads, read_exact_batch, ExactRead};
pub use buf::{round_down_to_page, round_up_to_page, AlignedBuf};
pub use class::MediaClass;
pub use counters::{MediaCounters, ReadPurpose, WritePurpose};
pub use dir::{
    remove_file_durably, replace_file_durably, set_file_aside, sync_dir, temporary_name,
};
pub use file::SegmentFile;
pub use storage::{OsStorage, Storage, StorageFile};
