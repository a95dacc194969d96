//! The engine's live event counters, shared by the read and write paths and the background jobs;
//! `Db::stats()` copies them into a `Stats`.

use crate::media::{MediaClass, MediaCounters};
pub use crate::sharded_counter::Counter;
use std::sync::Arc;

/// The engine's live counters.
#[derive(Debug, Default)]
pub struct Counters {
    pub media: [Arc<MediaCounters>; 2],
    pub user_bytes_written: Counter,
    pub gets: Counter,
    pub get_device_reads: Counter,
    pub index_value_hits: Counter,
    pub cache_hits: Counter,
    pub cache_misses: Counter,
    pub write_buffer_hits: Counter,
    pub cleaner_segments_cleaned: Counter,
    pub cleaner_bytes_copied: Counter,
    pub cleaner_tombstones_dropped: Counter,
    /// Victims whose live records the cleaner told by one walk of the indexes instead.
    pub cleaner_index_walks: Counter,
    /// Sum over cleaned segments of their live fraction when picked, in millionths.
    pub cleaner_live_fraction_micros: Counter,
    /// Cleaning steps left for a pause in client writes (`Options::cleaner_deferred_segments`).
    pub cleaner_steps_deferred: Counter,
    pub sorted_ranges: Counter,
    pub sort_bytes_copied: Counter,
    /// Time writers spent slowed down by the write pacer, in microseconds.
    pub paced_micros: Counter,
    /// Time writers spent slowed down by the space reserve, in microseconds.
    pub throttled_micros: Counter,
    pub checkpoints_written: Counter,
    pub checkpoint_bytes_written: Counter,
    /// Keys the warm-keys file listed at open, values the warming read into the cache, and
    /// warm-keys files turned down as damaged or unexpected.
    pub warm_keys_listed: Counter,
    pub warm_values_read: Counter,
    pub warm_keys_files_rejected: Counter,
}

impl Counters {
    pub fn media(&self, class: MediaClass) -> &Arc<MediaCounters> {
        &self.media[class as usize]
    }
}
