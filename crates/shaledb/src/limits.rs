//! Every bound the engine enforces, in one place, with their relations checked at compile time.

/// Largest key, in bytes. Keys are never empty.
pub const KEY_BYTES_MAX: usize = 1024;
/// Largest value, in bytes. Empty values are allowed.
pub const VALUE_BYTES_MAX: usize = 1 << 20;
/// Bytes of a record header on media (see `record.rs`).
pub const RECORD_HEADER_BYTES: usize = 24;
/// Largest record on media.
pub const RECORD_BYTES_MAX: usize = RECORD_HEADER_BYTES + KEY_BYTES_MAX + VALUE_BYTES_MAX;
/// Alignment and size unit of every direct I/O.
pub const PAGE_BYTES: usize = 4096;
/// The first page of every segment holds its header; records start after it.
pub const SEGMENT_HEADER_BYTES: u64 = PAGE_BYTES as u64;
/// Smallest allowed segment: must hold the header and the largest record.
pub const SEGMENT_BYTES_MIN: u64 = 2 << 20;
/// Largest allowed segment: offsets inside a segment are stored as u32.
pub const SEGMENT_BYTES_MAX: u64 = 1 << 31;
/// Smallest allowed in-memory write buffer per log head: must hold the largest record twice
/// (one being flushed while the next is appended).
pub const WRITE_BUFFER_BYTES_MIN: usize = 2 * RECORD_BYTES_MAX + 2 * PAGE_BYTES;
/// Longest KVS name, in bytes.
/// Most bytes `Options::index_value_bytes_max` may keep in an index entry: it bounds a leaf's
/// largest entry, whose offsets are `u16`.
pub const INDEX_VALUE_BYTES_LIMIT: usize = 64;
pub const KVS_NAME_BYTES_MAX: usize = 255;
/// Most KVSs a KVDB may hold at once.
pub const KVS_COUNT_MAX: usize = 4096;
/// Most records a scan reads in one batch (all of its device reads in flight at once).
pub const SCAN_BATCH_RECORDS_MAX: usize = 64;
/// Most scattered key ranges `Options::sort_queue_ranges` may keep waiting for the sorter (each
/// holds a key: at most 64 MiB of keys).
pub const SORT_QUEUE_RANGES_MAX: usize = 1 << 16;
/// Most records of a victim the cleaner tells live by one walk of the indexes (which holds one
/// offset per live version: at most 16 MiB) rather than by index lookups.
pub const CLEANER_WALK_RECORDS_MAX: u64 = 4 << 20;
/// Smallest bound of the warm-keys file other than 0 (none): a page, which lists a few hundred
/// keys.
pub const WARM_KEYS_BYTES_MIN: u64 = PAGE_BYTES as u64;

const _: () = assert!(SEGMENT_BYTES_MIN >= SEGMENT_HEADER_BYTES + RECORD_BYTES_MAX as u64);
const _: () = assert!(SEGMENT_BYTES_MAX <= u32::MAX as u64);
const _: () = assert!(KEY_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(VALUE_BYTES_MAX <= u32::MAX as usize);
const _: () = assert!(SEGMENT_HEADER_BYTES.is_multiple_of(PAGE_BYTES as u64));
