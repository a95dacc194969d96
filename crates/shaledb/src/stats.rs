//! The [`Stats`] snapshot `Db::stats()` returns: a point-in-time copy of the engine's counters,
//! and how it is taken from the store.

use crate::media::{MediaClass, ReadPurpose, WritePurpose};
use crate::segment::HeadKind;
use crate::store::Store;
use std::sync::atomic::Ordering;

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
    /// Read by the warming of the value cache after an open.
    pub bytes_read_by_warming: u64,
    /// Device reads made by scans (batched reads of records lying close together count once).
    pub reads_by_scans: u64,
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
    /// Gets answered from the value their key's index entry keeps
    /// (`Options::index_value_bytes_max`): they look at neither the cache nor the device, and
    /// count in no cache counter.
    pub index_value_hits: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub write_buffer_hits: u64,
    /// Bytes of values held in the value cache, and its budget.
    pub cache_bytes: u64,
    pub cache_bytes_budget: u64,
    /// Warming the value cache from the warm-keys file at open (`Options::warm_reads_per_sec`):
    /// whether it is still running, the keys the file listed, and the values it read into the
    /// cache (these reads count in no other get or cache counter).
    pub warming: bool,
    pub warm_keys_listed: u64,
    pub warm_values_read: u64,
    /// Warm-keys files turned down at open as damaged, cut short or unexpected (0 or 1: the
    /// file is read once; the warning logged names it and says why). Harmless: the cache then
    /// warms from client reads.
    pub warm_keys_files_rejected: u64,
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
    /// Victims whose live records the cleaner told by one walk of every index instead (when
    /// that costs less: many records, few keys).
    pub cleaner_index_walks: u64,
    /// Average live fraction of the segments the cleaner picked (0 when none).
    pub cleaner_live_fraction_avg: f64,
    /// Maintenance rounds in which the cleaner would have cleaned but left it for a pause in
    /// client writes (`Options::cleaner_deferred_segments`).
    pub cleaner_steps_deferred: u64,
    /// Key ranges the sorter rewrote in key order, the bytes it copied doing so, and the
    /// scattered ranges not queued for it because its queue was full.
    pub sorted_ranges: u64,
    pub sort_bytes_copied: u64,
    pub sort_ranges_dropped: u64,
    /// Time writers spent slowed down so that reads kept their latency target, and the rate
    /// client writes are limited to now (bytes per second; `None`: not limited).
    pub paced_secs: f64,
    pub write_rate_limit: Option<u64>,
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
    /// A copy of `store`'s counters now; `snapshots` is the registry's (open, oldest age secs),
    /// `warming` whether the cache's warming is still running.
    pub(crate) fn collect(store: &Store, snapshots: (u64, f64), warming: bool) -> Stats {
        let segments = store.segments.all();
        let mut media: Vec<MediaStats> = MediaClass::ALL
            .iter()
            .map(|&class| {
                let counters = store.counters.media(class);
                let (bytes_written, bytes_read) = counters.snapshot();
                MediaStats {
                    class: class.name(),
                    bytes_written,
                    bytes_written_by_clients: counters.written(WritePurpose::Client),
                    bytes_written_by_cleaning: counters.written(WritePurpose::Cleaning),
                    bytes_written_by_checkpoints: counters.written(WritePurpose::Checkpoint),
                    bytes_read,
                    bytes_read_by_gets: counters.read(ReadPurpose::Get),
                    bytes_read_by_scans: counters.read(ReadPurpose::Scan),
                    bytes_read_by_cleaning: counters.read(ReadPurpose::Cleaning),
                    bytes_read_by_warming: counters.read(ReadPurpose::Warming),
                    reads_by_scans: counters.read_ops(ReadPurpose::Scan),
                    ..MediaStats::default()
                }
            })
            .collect();
        let mut live_bytes = 0;
        let mut segments_by_head: Vec<HeadStats> = HeadKind::ALL
            .iter()
            .map(|head| HeadStats {
                head: head.name(),
                ..HeadStats::default()
            })
            .collect();
        for segment in &segments {
            let head = &mut segments_by_head[segment.header.head as usize];
            head.segments += 1;
            head.segment_bytes += segment.disk_bytes();
            head.live_bytes += segment.live_bytes();
            let class = &mut media[segment.header.class as usize];
            class.segment_bytes += segment.disk_bytes();
            class.segments += 1;
            live_bytes += segment.live_bytes();
        }
        let (mut index_keys, mut index_bytes) = (0u64, 0u64);
        for kvs in store.kvs.all() {
            index_keys += kvs.index.len() as u64;
            index_bytes += kvs.index.estimated_dram_bytes();
        }
        let (snapshots_open, oldest_snapshot_age_secs) = snapshots;
        let (capacity_used_bytes, capacity_limit_bytes) = store.space.usage();
        let counters = &store.counters;
        Stats {
            user_bytes_written: counters.user_bytes_written.get(),
            total_bytes: media.iter().map(|class| class.segment_bytes).sum(),
            media,
            checkpoints_written: counters.checkpoints_written.get(),
            checkpoint_bytes_written: counters.checkpoint_bytes_written.get(),
            gets: counters.gets.get(),
            get_device_reads: counters.get_device_reads.get(),
            index_value_hits: counters.index_value_hits.get(),
            cache_hits: counters.cache_hits.get(),
            cache_misses: counters.cache_misses.get(),
            write_buffer_hits: counters.write_buffer_hits.get(),
            cache_bytes: store.cache.weight_bytes(),
            cache_bytes_budget: store.cache.budget_bytes(),
            warming,
            warm_keys_listed: counters.warm_keys_listed.get(),
            warm_values_read: counters.warm_values_read.get(),
            warm_keys_files_rejected: counters.warm_keys_files_rejected.get(),
            index_keys,
            index_bytes,
            live_bytes,
            cleaner_segments_cleaned: counters.cleaner_segments_cleaned.get(),
            cleaner_bytes_copied: counters.cleaner_bytes_copied.get(),
            cleaner_tombstones_dropped: counters.cleaner_tombstones_dropped.get(),
            cleaner_index_walks: counters.cleaner_index_walks.get(),
            cleaner_live_fraction_avg: match counters.cleaner_segments_cleaned.get() {
                0 => 0.0,
                cleaned => {
                    counters.cleaner_live_fraction_micros.get() as f64 / 1e6 / cleaned as f64
                }
            },
            cleaner_steps_deferred: counters.cleaner_steps_deferred.get(),
            sorted_ranges: counters.sorted_ranges.get(),
            sort_bytes_copied: counters.sort_bytes_copied.get(),
            sort_ranges_dropped: store.scattered.dropped.get(),
            segments_by_head,
            paced_secs: counters.paced_micros.get() as f64 / 1e6,
            write_rate_limit: store.pacer.limit(),
            throttled_secs: counters.throttled_micros.get() as f64 / 1e6,
            capacity_used_bytes,
            capacity_limit_bytes,
            snapshots_open,
            oldest_snapshot_age_secs,
            next_seqno: store.next_seqno.load(Ordering::SeqCst),
            direct_io: segments.iter().all(|segment| segment.file.is_direct()),
        }
    }

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
