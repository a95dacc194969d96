//! Counters the engine keeps, and the [`Stats`] snapshot `Db::stats()` returns.

use crate::media::MediaClass;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Why bytes are written to media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePurpose {
    Client = 0,
    Cleaning = 1,
    Checkpoint = 2,
}

/// Why bytes are read from media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPurpose {
    Get = 0,
    Scan = 1,
    Cleaning = 2,
    /// Recovery, check and headers.
    Other = 3,
}

/// Bytes moved to and from one media class, by purpose.
#[derive(Debug, Default)]
pub struct MediaCounters {
    written: [AtomicU64; 3],
    read: [AtomicU64; 4],
}

impl MediaCounters {
    pub fn add_written(&self, purpose: WritePurpose, bytes: u64) {
        self.written[purpose as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn add_read(&self, purpose: ReadPurpose, bytes: u64) {
        self.read[purpose as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn written(&self, purpose: WritePurpose) -> u64 {
        self.written[purpose as usize].load(Ordering::Relaxed)
    }

    pub fn read(&self, purpose: ReadPurpose) -> u64 {
        self.read[purpose as usize].load(Ordering::Relaxed)
    }

    /// (bytes written, bytes read), all purposes.
    pub fn snapshot(&self) -> (u64, u64) {
        let sum = |counters: &[AtomicU64]| {
            counters
                .iter()
                .map(|counter| counter.load(Ordering::Relaxed))
                .sum()
        };
        (sum(&self.written), sum(&self.read))
    }
}

/// A monotonically increasing event counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn add(&self, amount: u64) {
        self.0.fetch_add(amount, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The engine's live counters.
#[derive(Debug, Default)]
pub struct Counters {
    pub media: [Arc<MediaCounters>; 2],
    pub user_bytes_written: Counter,
    pub gets: Counter,
    pub get_device_reads: Counter,
    pub cache_hits: Counter,
    pub cache_misses: Counter,
    pub write_buffer_hits: Counter,
    pub cleaner_segments_cleaned: Counter,
    pub cleaner_bytes_copied: Counter,
    pub cleaner_tombstones_dropped: Counter,
    /// Sum over cleaned segments of their live fraction when picked, in millionths.
    pub cleaner_live_fraction_micros: Counter,
    /// Time writers spent slowed down by the space reserve, in microseconds.
    pub throttled_micros: Counter,
    pub checkpoints_written: Counter,
    pub checkpoint_bytes_written: Counter,
}

impl Counters {
    pub fn media(&self, class: MediaClass) -> &Arc<MediaCounters> {
        &self.media[class as usize]
    }
}

/// Bytes moved to and from one media class.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MediaStats {
    pub class: &'static str,
    pub bytes_written: u64,
    pub bytes_written_by_clients: u64,
    pub bytes_written_by_cleaning: u64,
    pub bytes_written_by_checkpoints: u64,
    pub bytes_read: u64,
    pub bytes_read_by_gets: u64,
    pub bytes_read_by_scans: u64,
    pub bytes_read_by_cleaning: u64,
    /// Bytes of segment files on this class.
    pub segment_bytes: u64,
    pub segments: u64,
}

/// Segments written by one log head.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct HeadStats {
    pub head: &'static str,
    pub segments: u64,
    pub segment_bytes: u64,
    pub live_bytes: u64,
}

/// A point-in-time copy of the engine's counters.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    /// Key and value bytes of puts, deletes and prefix deletes issued by clients.
    pub user_bytes_written: u64,
    /// Per media class: bytes written to and read from the device.
    pub media: Vec<MediaStats>,
    /// Index checkpoints written, and their bytes (also counted in the fastest media class).
    pub checkpoints_written: u64,
    pub checkpoint_bytes_written: u64,
    pub gets: u64,
    /// Device reads done by gets (cache and write-buffer hits do none).
    pub get_device_reads: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub write_buffer_hits: u64,
    /// Bytes of values held in the value cache, and its budget.
    pub cache_bytes: u64,
    pub cache_bytes_budget: u64,
    /// Keys in all indexes (newest versions only).
    pub index_keys: u64,
    /// Estimated DRAM held by the indexes (see `docs/ARCHITECTURE.md` for the formula).
    pub index_bytes: u64,
    /// Bytes of records the indexes point at (including versions kept for snapshots).
    pub live_bytes: u64,
    /// Bytes of all segment files, on all media classes.
    pub total_bytes: u64,
    pub cleaner_segments_cleaned: u64,
    pub cleaner_bytes_copied: u64,
    pub cleaner_tombstones_dropped: u64,
    /// Average live fraction of the segments the cleaner picked (0 when none).
    pub cleaner_live_fraction_avg: f64,
    /// Time writers spent slowed down because the space reserve was running low.
    pub throttled_secs: f64,
    /// Bytes the capacity class uses, and the most it may use (space budget or free space).
    pub capacity_used_bytes: u64,
    pub capacity_limit_bytes: u64,
    /// Segments and their bytes by the head that wrote them: client, cleaner-young, cleaner-old.
    pub segments_by_head: Vec<HeadStats>,
    /// Open snapshots, and the age in seconds of the oldest one.
    pub snapshots_open: u64,
    pub oldest_snapshot_age_secs: f64,
    pub next_seqno: u64,
    /// Whether segment files use O_DIRECT (false where the file system refused it).
    pub direct_io: bool,
}

impl Stats {
    /// Bytes written to media per byte written by clients.
    pub fn write_amplification(&self) -> f64 {
        let written: u64 = self.media.iter().map(|media| media.bytes_written).sum();
        if self.user_bytes_written == 0 {
            0.0
        } else {
            written as f64 / self.user_bytes_written as f64
        }
    }

    /// Bytes on media per live byte.
    pub fn space_amplification(&self) -> f64 {
        if self.live_bytes == 0 {
            0.0
        } else {
            self.total_bytes as f64 / self.live_bytes as f64
        }
    }

    /// Device reads per get.
    pub fn device_reads_per_get(&self) -> f64 {
        if self.gets == 0 {
            0.0
        } else {
            self.get_device_reads as f64 / self.gets as f64
        }
    }
}
