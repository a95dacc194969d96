//! Options, layered by scope: [`Options`] for the KVDB, [`KvsOptions`] for one KVS.

use crate::compression::Compression;
use crate::error::{Error, Result};
pub use crate::key_groups::KeyGroups;
use crate::limits;
use crate::media::{OsStorage, Storage};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// When an acknowledged write becomes durable (survives power loss and `kill -9`).
///
/// Defined in system calls: records are written with `pwrite` (O_DIRECT where the file system
/// allows it) and made durable by `fdatasync` on the segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// A background thread calls `fdatasync` at most this long after a write. The default, 100 ms.
    Interval(Duration),
    /// Every write returns only after `fdatasync`; concurrent writers share one (group commit).
    Sync,
    /// No periodic `fdatasync`: only [`crate::Db::sync`], segment sealing and close make data
    /// durable. For bulk loads and tests.
    None,
}

impl Default for Durability {
    fn default() -> Self {
        Durability::Interval(Duration::from_millis(100))
    }
}

impl std::str::FromStr for Durability {
    type Err = Error;
    /// Parses `sync`, `none`, `interval` (100 ms) or `interval:MS`.
    fn from_str(text: &str) -> Result<Self> {
        match text {
            "sync" => Ok(Durability::Sync),
            "none" => Ok(Durability::None),
            "interval" => Ok(Durability::default()),
            other => match other.strip_prefix("interval:").map(str::parse::<u64>) {
                Some(Ok(ms)) if ms > 0 => Ok(Durability::Interval(Duration::from_millis(ms))),
                _ => Err(Error::InvalidArgument(format!(
                    "durability {other:?}: expected sync, none, interval or interval:MS"
                ))),
            },
        }
    }
}

/// Options of a KVDB, fixed at open.
#[derive(Debug, Clone)]
pub struct Options {
    /// Durability mode. Default: `Interval(100 ms)`.
    pub durability: Durability,
    /// DRAM budget of the value cache shared by all KVSs, in bytes. 0 disables it. Default 256 MiB.
    pub cache_bytes: u64,
    /// Also put each written value in the value cache, so reads of recent writes need no device
    /// read (YCSB A/D, read-after-write). Default true.
    pub cache_writes: bool,
    /// A written value of at most this many bytes is kept in its key's index entry (data in
    /// index, as Aerospike keeps single-bin integers): a read of it needs neither the value
    /// cache nor the device, and the write skips the cache. It costs the index the value's
    /// bytes plus one per key so kept, while that version is the key's newest; a restart keeps
    /// them (the checkpoint and the log hold them). 0 keeps none. At most
    /// `limits::INDEX_VALUE_BYTES_LIMIT` (64). Default 16.
    pub index_value_bytes_max: usize,
    /// Most bytes of the warm-keys file (`HOME/warm-keys`): the keys the value cache holds,
    /// saved at a clean close and every `warm_keys_save_interval`, so the next open can warm
    /// the cache from them (`warm_reads_per_sec`). `None` (the default): a quarter of
    /// `cache_bytes`, which lists a full cache whenever values are at least three times as long
    /// as keys (a key costs the file its bytes plus 6, the cache its bytes, its value's and
    /// 64). `Some(0)`: no file is written or read; any other bound is at least 4096.
    pub warm_keys_max_bytes: Option<u64>,
    /// How often an open KVDB saves the warm-keys file besides at close, so that after a crash
    /// the next open still warms from a recent list; zero: only at close. Default 60 s. The file
    /// is not rewritten while neither reads nor writes changed the cache, nor while the warming
    /// from it is still running (it still lists what was hot before this open). A read-only
    /// open never writes it.
    pub warm_keys_save_interval: Duration,
    /// At open, a background job reads the values of the keys the warm-keys file lists into
    /// the value cache, at most this many keys a second, until the list is done, the cache is
    /// full or the KVDB closes; the open does not wait for it. 0 turns warming off (the file
    /// is still saved). Default 50,000. The file is a hint: a damaged, cut or unexpected one is
    /// logged (a warning naming it and why), counted in `Stats::warm_keys_files_rejected` and
    /// ignored, and a listed key that no longer exists is skipped.
    pub warm_reads_per_sec: u64,
    /// Size of a segment file. Larger segments mean fewer files; smaller ones let the cleaner
    /// free space in finer steps. Default 64 MiB.
    pub segment_bytes: u64,
    /// In-memory write buffer per log head, in bytes. Writers block only when it is full. A
    /// write batch must fit in it (less a page). Default 8 MiB.
    pub write_buffer_bytes: usize,
    /// The background flusher writes the buffer once this many bytes are pending. Default 1 MiB.
    pub flush_chunk_bytes: usize,
    /// Write an index checkpoint after this many bytes of client records, or after eight times
    /// the last checkpoint's size if that is more (so a large index's checkpoints cost at most
    /// an eighth of the client writes; replay at open reads at most that much log). Default
    /// 512 MiB.
    pub checkpoint_interval_bytes: u64,
    /// Run the background cleaner. Default true.
    pub cleaner: bool,
    /// The cleaner works while live bytes / bytes on media is below this. Default 0.7: media
    /// holds about 1.5x the live data, where the curve of space saved per byte of cleaning
    /// written bends (ARCHITECTURE.md, "Choosing the live-ratio target"); 0.5 writes about a
    /// third less and holds about 2x, 0.9 holds 1.17x and writes 1.8x as much.
    pub space_target_live_ratio: f64,
    /// Segments of dead data past the live-ratio target that the cleaner leaves for a pause in
    /// client writes: while clients wrote during its last round (100 ms) it starts only once
    /// this much more is dead than the target allows, so a burst of writes is not slowed by
    /// cleaning that can wait for the idle moment after it (ARCHITECTURE.md, "Cleaning in the
    /// pauses"). Under space pressure (the reserve, or the soft budget's reserve past the
    /// target) it cleans at once whatever this says, so past `reserve_segments` it changes
    /// nothing. Default 2; 0: clean during writes as soon as the target says.
    pub cleaner_deferred_segments: u64,
    /// Foreground reads should take at most this long: while more than 1% of gets' device
    /// reads take longer and writes are a large share of the device's bytes, the writes of
    /// threads that do not read are paced, down to `write_rate_floor`, so an unthrottled
    /// writer cannot starve readers (ARCHITECTURE.md, "pacing for reads"). Threads that read
    /// and write are never slowed. Default 400 µs (about 7x an unloaded 4 KiB read on this
    /// project's virtio disk); zero turns pacing off.
    pub read_latency_target: Duration,
    /// The rate, in bytes per second, below which pacing never slows client writes. Default
    /// 16 MiB/s.
    pub write_rate_floor: u64,
    /// Most bytes per second the sorter may rewrite: it moves key ranges that scans found
    /// scattered over many segments into key order, so the next scan of them reads a few
    /// contiguous spans instead of one record per read (ARCHITECTURE.md, "Sorting"); over any
    /// time it rewrites at most this rate's bytes plus one run (up to 1 MiB, sorted whole). 0
    /// turns it off. Default 32 MiB/s.
    pub sort_bytes_per_sec: u64,
    /// Most scattered key ranges waiting for the sorter; more are dropped (counted in
    /// `Stats::sort_ranges_dropped`) until scans find them again. Default 256.
    pub sort_queue_ranges: usize,
    /// Try O_DIRECT on segment files (falls back to buffered I/O where refused). Default true.
    pub direct_io: bool,
    /// Largest atomic write batch, in encoded bytes. Default 16 MiB; a batch must also fit in
    /// one segment and in a log head's write buffer (see [`Options::batch_bytes_limit`]).
    pub batch_bytes_max: u64,
    /// Directory of the capacity media class (large, NAND). Default: `capacity` inside the
    /// KVDB's directory. Fixed when the KVDB is created and remembered; giving another one
    /// later is an error.
    pub capacity_dir: Option<PathBuf>,
    /// Directory of the optional staging media class (small, fast: SCM, Optane, Z-SSD). Fixed
    /// when the KVDB is created and remembered.
    pub staging_dir: Option<PathBuf>,
    /// Budget of the staging class, in bytes: past it the cleaner moves the oldest staging data
    /// down to capacity. Default 4 GiB; at least four segments.
    pub staging_bytes_max: u64,
    /// Most bytes the capacity class may hold. Default: whatever its file system can hold.
    pub space_bytes_max: Option<u64>,
    /// Segments of space kept in reserve below the limit: inside it the cleaner works at once
    /// and writers are slowed in proportion. Default 4.
    pub reserve_segments: u64,
    /// Space past the limit that only batches of deletes may use, so a full KVDB can still be
    /// emptied (on a filling file system, other writes stop this far before it is full).
    /// Default 16 MiB: some hundred thousand deletes.
    pub space_delete_headroom_bytes: u64,
    /// Create the KVDB when the directory is missing or empty. Default true. A directory that
    /// holds files but no KVDB is never taken over either way.
    pub create_if_missing: bool,
    /// Open for reading only: nothing is written, no file is created or removed (so a KVDB on
    /// a read-only file system can be inspected or backed up), and every write fails with
    /// `ErrorKind::ReadOnly`. Default false.
    pub read_only: bool,
    /// Open a damaged KVDB anyway: whatever cannot be read is reported instead of failing the
    /// open; damaged and unexpected segment files are renamed aside (`NAME.damaged`, never
    /// deleted) after the readable live records of the damaged ones were copied to fresh
    /// segments; and `RecoveryReport::salvage` (written in full to a file in the home) says
    /// what may be lost or may have come back. The KVDB then opens normally again. Default
    /// false. Not with `read_only`.
    pub salvage: bool,
    /// Where segment files are created, read, written and synced (see [`Storage`] for the
    /// contract). Default `None`: the operating system's file system ([`OsStorage`]). Tests put
    /// a device that fails on demand here.
    pub storage: Option<Arc<dyn Storage>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::default(),
            cache_bytes: 256 << 20,
            cache_writes: true,
            index_value_bytes_max: 16,
            warm_keys_max_bytes: None,
            warm_keys_save_interval: Duration::from_secs(60),
            warm_reads_per_sec: 50_000,
            segment_bytes: 64 << 20,
            write_buffer_bytes: 8 << 20,
            flush_chunk_bytes: 1 << 20,
            checkpoint_interval_bytes: 512 << 20,
            cleaner: true,
            space_target_live_ratio: 0.7,
            cleaner_deferred_segments: 2,
            read_latency_target: Duration::from_micros(400),
            write_rate_floor: 16 << 20,
            sort_bytes_per_sec: 32 << 20,
            sort_queue_ranges: 256,
            direct_io: true,
            batch_bytes_max: 16 << 20,
            capacity_dir: None,
            staging_dir: None,
            staging_bytes_max: 4 << 30,
            space_bytes_max: None,
            reserve_segments: 4,
            space_delete_headroom_bytes: 16 << 20,
            create_if_missing: true,
            read_only: false,
            salvage: false,
            storage: None,
        }
    }
}

impl Options {
    /// The storage segment files live on.
    pub fn storage(&self) -> Arc<dyn Storage> {
        self.storage.clone().unwrap_or_else(|| Arc::new(OsStorage))
    }

    /// The largest batch accepted: `batch_bytes_max`, but never more than a segment holds, nor
    /// a log head's write buffer: a batch is appended contiguously into it, after the partial
    /// page a flush leaves there (a larger batch waited forever for room no flush could make).
    pub fn batch_bytes_limit(&self) -> u64 {
        self.batch_bytes_max
            .min(self.segment_bytes - limits::SEGMENT_HEADER_BYTES)
            .min(self.write_buffer_bytes.saturating_sub(limits::PAGE_BYTES) as u64)
    }

    /// Most bytes of the warm-keys file: `warm_keys_max_bytes`, or a quarter of the cache; 0
    /// (no file) without a cache, or where that quarter is less than the smallest bound.
    pub(crate) fn warm_keys_bytes_limit(&self) -> u64 {
        let bytes = self.warm_keys_max_bytes.unwrap_or(self.cache_bytes / 4);
        if self.cache_bytes == 0 || bytes < limits::WARM_KEYS_BYTES_MIN {
            0
        } else {
            bytes
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let invalid = |text: String| Err(Error::InvalidArgument(text));
        if self.salvage && self.read_only {
            return invalid("a salvage writes (it sets damaged files aside): not read-only".into());
        }
        if !(limits::SEGMENT_BYTES_MIN..=limits::SEGMENT_BYTES_MAX).contains(&self.segment_bytes)
            || !self.segment_bytes.is_multiple_of(limits::PAGE_BYTES as u64)
        {
            return invalid(format!(
                "segment_bytes {} must be a multiple of {} between {} and {}",
                self.segment_bytes,
                limits::PAGE_BYTES,
                limits::SEGMENT_BYTES_MIN,
                limits::SEGMENT_BYTES_MAX
            ));
        }
        if self.write_buffer_bytes < limits::WRITE_BUFFER_BYTES_MIN {
            return invalid(format!(
                "write_buffer_bytes {} is below the minimum {}",
                self.write_buffer_bytes,
                limits::WRITE_BUFFER_BYTES_MIN
            ));
        }
        if self.flush_chunk_bytes == 0 || self.flush_chunk_bytes > self.write_buffer_bytes / 2 {
            return invalid(format!(
                "flush_chunk_bytes {} must be between 1 and half of write_buffer_bytes",
                self.flush_chunk_bytes
            ));
        }
        if !(0.05..=0.99).contains(&self.space_target_live_ratio) {
            return invalid(format!(
                "space_target_live_ratio {} must be between 0.05 and 0.99",
                self.space_target_live_ratio
            ));
        }
        if self.index_value_bytes_max > limits::INDEX_VALUE_BYTES_LIMIT {
            return invalid(format!(
                "index_value_bytes_max {} is above the maximum {}",
                self.index_value_bytes_max,
                limits::INDEX_VALUE_BYTES_LIMIT
            ));
        }
        if self.write_rate_floor == 0 {
            return invalid("write_rate_floor must be positive: paced writes must go on".into());
        }
        if self.sort_queue_ranges > limits::SORT_QUEUE_RANGES_MAX {
            return invalid(format!(
                "sort_queue_ranges {} is above the maximum {}",
                self.sort_queue_ranges,
                limits::SORT_QUEUE_RANGES_MAX
            ));
        }
        if let Some(bytes @ 1..) = self.warm_keys_max_bytes {
            if bytes < limits::WARM_KEYS_BYTES_MIN {
                return invalid(format!(
                    "warm_keys_max_bytes {bytes} must be 0 (no warm-keys file) or at least {}",
                    limits::WARM_KEYS_BYTES_MIN
                ));
            }
        }
        if self.batch_bytes_max == 0 {
            return invalid("batch_bytes_max must be positive".into());
        }
        if self.staging_dir.is_some() && self.staging_bytes_max < 4 * self.segment_bytes {
            return invalid(format!(
                "staging_bytes_max {} must hold at least four segments ({} bytes)",
                self.staging_bytes_max,
                4 * self.segment_bytes
            ));
        }
        if let Durability::Interval(period) = self.durability {
            if period.is_zero() {
                return invalid("durability interval must be positive".into());
            }
        }
        Ok(())
    }
}

/// Where a KVS's data lives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaPolicy {
    /// Everything on the capacity class (the default).
    #[default]
    CapacityOnly,
    /// Everything on the staging class, until the staging budget overflows and the cleaner
    /// moves the oldest data down.
    StagingOnly,
    /// New writes to staging; records that survive cleaning there move to capacity.
    StagingMaxCapacity,
}

impl MediaPolicy {
    /// Whether new writes of this KVS go to the staging class.
    pub fn writes_to_staging(self) -> bool {
        self != MediaPolicy::CapacityOnly
    }
}

impl std::str::FromStr for MediaPolicy {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        match text {
            "capacity_only" => Ok(MediaPolicy::CapacityOnly),
            "staging_only" => Ok(MediaPolicy::StagingOnly),
            "staging_max_capacity" => Ok(MediaPolicy::StagingMaxCapacity),
            other => Err(Error::InvalidArgument(format!(
                "media policy {other:?}: expected capacity_only, staging_only or staging_max_capacity"
            ))),
        }
    }
}

/// Options of one KVS, fixed when it is created.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KvsOptions {
    /// Length of the key prefix that `prefix_delete` works on. 0 (the default) lets
    /// `prefix_delete` take a prefix of any length; otherwise it must be exactly this long.
    pub prefix_len: usize,
    /// Which media classes hold the KVS's data (staging policies need a staging class).
    #[serde(default)]
    pub media_policy: MediaPolicy,
    /// How values are stored: `None` (the default) as given, `Lz4` compressed when that makes
    /// them smaller. Reads return values as written either way; the value cache holds them
    /// decompressed.
    #[serde(default)]
    pub compression: Compression,
    /// Which keys the index keeps together (see [`KeyGroups`]).
    #[serde(default)]
    pub key_groups: KeyGroups,
}

impl KvsOptions {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.prefix_len > limits::KEY_BYTES_MAX {
            return Err(Error::InvalidArgument(format!(
                "prefix_len {} is longer than the longest key ({})",
                self.prefix_len,
                limits::KEY_BYTES_MAX
            )));
        }
        self.key_groups.validate()
    }
}
