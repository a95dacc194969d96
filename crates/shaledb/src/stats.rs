//! The [`Stats`] snapshot `Db::stats()` returns: a point-in-time copy of the engine's counters.

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
