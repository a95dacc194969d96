//! `rocksdb_options_t`: the options of an open, and of each column family. The knobs a ShaleDB
//! open uses are read from it by name (db.rs maps them); the rest are recorded (settings.rs).

use crate::args::{drop_handle, handle, handle_mut, into_handle};
use crate::plugins::{Feature, Plugin, SliceTransform};
use crate::resources::rocksdb_logger_t;
use crate::settings::{recorded_knobs, Scalar, Settings};
use crate::status::quiet;
use crate::table_options::{rocksdb_block_based_table_options_t, BLOCK_BASED_KNOBS};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `rocksdb_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_options_t {
    pub(crate) settings: Settings,
    /// The block-based table options last given, whose block cache sizes ShaleDB's value cache.
    pub(crate) table: Option<rocksdb_block_based_table_options_t>,
    /// How keys are cut into prefixes, for `prefix_same_as_start` reads.
    pub(crate) prefix_extractor: Option<Arc<SliceTransform>>,
    /// Features set that ShaleDB cannot honour; an open with any of them fails, naming it.
    pub(crate) unsupported: Vec<Plugin>,
    /// Settings given as objects or several values at once (paths, rate limiter, compression
    /// options, ...), as `name: value` lines for the `LOG`: recorded, with no ShaleDB meaning.
    pub(crate) recorded: BTreeMap<String, String>,
    /// The info log set, handed back by `rocksdb_options_get_info_log`.
    pub(crate) info_log: Option<rocksdb_logger_t>,
    /// Event listeners added (kept alive, never called: see events.rs).
    pub(crate) listeners: Vec<crate::events::Listener>,
    /// Set by `rocksdb_options_enable_statistics`: the databases opened with these options,
    /// whose counters `rocksdb_options_statistics_get_*` read.
    pub(crate) statistics: Option<crate::statistics::Users>,
}

#[no_mangle]
pub extern "C" fn rocksdb_options_create() -> *mut rocksdb_options_t {
    into_handle(rocksdb_options_t::default())
}

#[no_mangle]
pub extern "C" fn rocksdb_options_destroy(options: *mut rocksdb_options_t) {
    quiet((), || drop_handle(options))
}

#[no_mangle]
pub extern "C" fn rocksdb_options_create_copy(
    options: *mut rocksdb_options_t,
) -> *mut rocksdb_options_t {
    quiet(std::ptr::null_mut(), || {
        handle(options, "options")
            .map_or(std::ptr::null_mut(), |options| into_handle(options.clone()))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_block_based_table_factory(
    options: *mut rocksdb_options_t,
    table_options: *mut rocksdb_block_based_table_options_t,
) {
    quiet((), || {
        if let (Ok(options), Ok(table)) = (
            handle_mut(options, "options"),
            handle(table_options, "table options"),
        ) {
            options.table = Some(table.clone());
        }
    })
}

impl rocksdb_options_t {
    /// A knob's value as set, or RocksDB's default for it.
    pub(crate) fn value<T: Scalar>(&self, setter: &str) -> T {
        self.settings.value(OPTIONS_KNOBS, setter)
    }

    pub(crate) fn flag(&self, setter: &str) -> bool {
        self.settings.flag(OPTIONS_KNOBS, setter)
    }

    /// Whether the block-based table options turn the block cache off.
    pub(crate) fn no_block_cache(&self) -> bool {
        let defaults = Settings::default();
        let table = self
            .table
            .as_ref()
            .map_or(&defaults, |table| &table.settings);
        table.flag(
            BLOCK_BASED_KNOBS,
            "rocksdb_block_based_options_set_no_block_cache",
        )
    }

    /// RocksDB's options dump, for the `LOG`: every knob with its value or default.
    pub(crate) fn dump(&self, out: &mut String) {
        self.settings.dump(OPTIONS_KNOBS, "  Options.", out);
        out.push_str("  table_factory options (block-based):\n");
        let table = self.table.clone().unwrap_or_default();
        table.settings.dump(BLOCK_BASED_KNOBS, "    ", out);
        if let Some(bits) = table.filter_bits_per_key {
            out.push_str(&format!("    filter_policy: bits_per_key {bits:.6}\n"));
        }
        if let Some(extractor) = &self.prefix_extractor {
            out.push_str(&format!(
                "  Options.prefix_extractor: {}\n",
                extractor.name()
            ));
        }
        for (name, value) in &self.recorded {
            out.push_str(&format!("  Options.{name}: {value}\n"));
        }
        if !self.listeners.is_empty() {
            out.push_str(&format!(
                "  Options.listeners: {} (never called: ShaleDB has no flushes or compactions \
                 in RocksDB's sense)\n",
                self.listeners.len()
            ));
        }
        for plugin in &self.unsupported {
            out.push_str(&format!("  not honoured: {}\n", plugin.describe()));
        }
    }

    /// Records a feature ShaleDB cannot honour; opening with it fails.
    pub(crate) fn refuse(&mut self, feature: Feature, name: String) {
        self.unsupported.retain(|plugin| plugin.feature != feature);
        self.unsupported.push(Plugin { feature, name });
    }
}

recorded_knobs!(rocksdb_options_t, OPTIONS_KNOBS, "rocksdb_options_set_" {
        rocksdb_options_set_allow_ingest_behind(libc::c_uchar) => rocksdb_options_get_allow_ingest_behind(libc::c_uchar) = 0, -;
        rocksdb_options_set_create_if_missing(libc::c_uchar) => rocksdb_options_get_create_if_missing(libc::c_uchar) = 0, -;
        rocksdb_options_set_create_missing_column_families(libc::c_uchar) => rocksdb_options_get_create_missing_column_families(libc::c_uchar) = 0, -;
        rocksdb_options_set_error_if_exists(libc::c_uchar) => rocksdb_options_get_error_if_exists(libc::c_uchar) = 0, -;
        rocksdb_options_set_paranoid_checks(libc::c_uchar) => rocksdb_options_get_paranoid_checks(libc::c_uchar) = 1, -;
        rocksdb_options_set_info_log_level(libc::c_int) => rocksdb_options_get_info_log_level(libc::c_int) = 1, -;
        rocksdb_options_set_write_buffer_size(usize) => rocksdb_options_get_write_buffer_size(usize) = 64 << 20, -;
        rocksdb_options_set_db_write_buffer_size(usize) => rocksdb_options_get_db_write_buffer_size(usize) = 0, -;
        rocksdb_options_set_max_open_files(libc::c_int) => rocksdb_options_get_max_open_files(libc::c_int) = -1, -;
        rocksdb_options_set_max_file_opening_threads(libc::c_int) => rocksdb_options_get_max_file_opening_threads(libc::c_int) = 16, -;
        rocksdb_options_set_max_total_wal_size(u64) => rocksdb_options_get_max_total_wal_size(u64) = 0, -;
        rocksdb_options_set_compression_options_zstd_max_train_bytes(libc::c_int) => rocksdb_options_get_compression_options_zstd_max_train_bytes(libc::c_int) = 0, -;
        rocksdb_options_set_compression_options_use_zstd_dict_trainer(libc::c_uchar) => rocksdb_options_get_compression_options_use_zstd_dict_trainer(libc::c_uchar) = 1, -;
        rocksdb_options_set_compression_options_parallel_threads(libc::c_int) => rocksdb_options_get_compression_options_parallel_threads(libc::c_int) = 1, -;
        rocksdb_options_set_compression_options_max_dict_buffer_bytes(u64) => rocksdb_options_get_compression_options_max_dict_buffer_bytes(u64) = 0, -;
        rocksdb_options_set_num_levels(libc::c_int) => rocksdb_options_get_num_levels(libc::c_int) = 7, -;
        rocksdb_options_set_level0_file_num_compaction_trigger(libc::c_int) => rocksdb_options_get_level0_file_num_compaction_trigger(libc::c_int) = 4, -;
        rocksdb_options_set_level0_slowdown_writes_trigger(libc::c_int) => rocksdb_options_get_level0_slowdown_writes_trigger(libc::c_int) = 20, -;
        rocksdb_options_set_level0_stop_writes_trigger(libc::c_int) => rocksdb_options_get_level0_stop_writes_trigger(libc::c_int) = 36, -;
        rocksdb_options_set_target_file_size_base(u64) => rocksdb_options_get_target_file_size_base(u64) = 64 << 20, -;
        rocksdb_options_set_target_file_size_multiplier(libc::c_int) => rocksdb_options_get_target_file_size_multiplier(libc::c_int) = 1, -;
        rocksdb_options_set_max_bytes_for_level_base(u64) => rocksdb_options_get_max_bytes_for_level_base(u64) = 256 << 20, -;
        rocksdb_options_set_level_compaction_dynamic_level_bytes(libc::c_uchar) => rocksdb_options_get_level_compaction_dynamic_level_bytes(libc::c_uchar) = 1, -;
        rocksdb_options_set_max_bytes_for_level_multiplier(f64) => rocksdb_options_get_max_bytes_for_level_multiplier(f64) = 10.0, -;
        rocksdb_options_set_ttl(u64) => rocksdb_options_get_ttl(u64) = 0xffff_ffff_ffff_fffe, -;
        rocksdb_options_set_periodic_compaction_seconds(u64) => rocksdb_options_get_periodic_compaction_seconds(u64) = 0xffff_ffff_ffff_fffe, -;
        rocksdb_options_set_memtable_op_scan_flush_trigger(u32) => rocksdb_options_get_memtable_op_scan_flush_trigger(u32) = 0, -;
        rocksdb_options_set_memtable_avg_op_scan_flush_trigger(u32) => rocksdb_options_get_memtable_avg_op_scan_flush_trigger(u32) = 0, -;
        rocksdb_options_set_statistics_level(libc::c_int) => rocksdb_options_get_statistics_level(libc::c_int) = 0, -;
        rocksdb_options_set_skip_stats_update_on_db_open(libc::c_uchar) => rocksdb_options_get_skip_stats_update_on_db_open(libc::c_uchar) = 0, -;
        rocksdb_options_set_skip_checking_sst_file_sizes_on_db_open(libc::c_uchar) => rocksdb_options_get_skip_checking_sst_file_sizes_on_db_open(libc::c_uchar) = 0, -;
        rocksdb_options_set_enable_blob_files(libc::c_uchar) => rocksdb_options_get_enable_blob_files(libc::c_uchar) = 0, -;
        rocksdb_options_set_min_blob_size(u64) => rocksdb_options_get_min_blob_size(u64) = 0, -;
        rocksdb_options_set_blob_file_size(u64) => rocksdb_options_get_blob_file_size(u64) = 256 << 20, -;
        rocksdb_options_set_blob_compression_type(libc::c_int) => rocksdb_options_get_blob_compression_type(libc::c_int) = 0, -;
        rocksdb_options_set_enable_blob_gc(libc::c_uchar) => rocksdb_options_get_enable_blob_gc(libc::c_uchar) = 0, -;
        rocksdb_options_set_blob_gc_age_cutoff(f64) => rocksdb_options_get_blob_gc_age_cutoff(f64) = 0.25, -;
        rocksdb_options_set_blob_gc_force_threshold(f64) => rocksdb_options_get_blob_gc_force_threshold(f64) = 1.0, -;
        rocksdb_options_set_blob_compaction_readahead_size(u64) => rocksdb_options_get_blob_compaction_readahead_size(u64) = 0, -;
        rocksdb_options_set_blob_file_starting_level(libc::c_int) => rocksdb_options_get_blob_file_starting_level(libc::c_int) = 0, -;
        rocksdb_options_set_prepopulate_blob_cache(libc::c_int) => rocksdb_options_get_prepopulate_blob_cache(libc::c_int) = 0, -;
        rocksdb_options_set_max_write_buffer_number(libc::c_int) => rocksdb_options_get_max_write_buffer_number(libc::c_int) = 2, -;
        rocksdb_options_set_min_write_buffer_number_to_merge(libc::c_int) => rocksdb_options_get_min_write_buffer_number_to_merge(libc::c_int) = 1, -;
        rocksdb_options_set_max_write_buffer_size_to_maintain(i64) => rocksdb_options_get_max_write_buffer_size_to_maintain(i64) = 0, -;
        rocksdb_options_set_enable_pipelined_write(libc::c_uchar) => rocksdb_options_get_enable_pipelined_write(libc::c_uchar) = 0, -;
        rocksdb_options_set_unordered_write(libc::c_uchar) => rocksdb_options_get_unordered_write(libc::c_uchar) = 0, -;
        rocksdb_options_set_max_subcompactions(u32) => rocksdb_options_get_max_subcompactions(u32) = 1, -;
        rocksdb_options_set_max_background_jobs(libc::c_int) => rocksdb_options_get_max_background_jobs(libc::c_int) = 2, -;
        rocksdb_options_set_max_background_compactions(libc::c_int) => rocksdb_options_get_max_background_compactions(libc::c_int) = -1, -;
        rocksdb_options_set_max_background_flushes(libc::c_int) => rocksdb_options_get_max_background_flushes(libc::c_int) = -1, -;
        rocksdb_options_set_max_log_file_size(usize) => rocksdb_options_get_max_log_file_size(usize) = 0, -;
        rocksdb_options_set_log_file_time_to_roll(usize) => rocksdb_options_get_log_file_time_to_roll(usize) = 0, -;
        rocksdb_options_set_keep_log_file_num(usize) => rocksdb_options_get_keep_log_file_num(usize) = 1000, -;
        rocksdb_options_set_recycle_log_file_num(usize) => rocksdb_options_get_recycle_log_file_num(usize) = 0, -;
        rocksdb_options_set_soft_pending_compaction_bytes_limit(usize) => rocksdb_options_get_soft_pending_compaction_bytes_limit(usize) = 64 << 30, -;
        rocksdb_options_set_hard_pending_compaction_bytes_limit(usize) => rocksdb_options_get_hard_pending_compaction_bytes_limit(usize) = 256 << 30, -;
        rocksdb_options_set_max_manifest_file_size(usize) => rocksdb_options_get_max_manifest_file_size(usize) = 1 << 30, -;
        rocksdb_options_set_table_cache_numshardbits(libc::c_int) => rocksdb_options_get_table_cache_numshardbits(libc::c_int) = 6, -;
        rocksdb_options_set_arena_block_size(usize) => rocksdb_options_get_arena_block_size(usize) = 0, -;
        rocksdb_options_set_use_fsync(libc::c_int) => rocksdb_options_get_use_fsync(libc::c_int) = 0, -;
        rocksdb_options_set_WAL_ttl_seconds(u64) => rocksdb_options_get_WAL_ttl_seconds(u64) = 0, -;
        rocksdb_options_set_WAL_size_limit_MB(u64) => rocksdb_options_get_WAL_size_limit_MB(u64) = 0, -;
        rocksdb_options_set_manifest_preallocation_size(usize) => rocksdb_options_get_manifest_preallocation_size(usize) = 4 << 20, -;
        rocksdb_options_set_allow_mmap_reads(libc::c_uchar) => rocksdb_options_get_allow_mmap_reads(libc::c_uchar) = 0, -;
        rocksdb_options_set_allow_mmap_writes(libc::c_uchar) => rocksdb_options_get_allow_mmap_writes(libc::c_uchar) = 0, -;
        rocksdb_options_set_use_direct_reads(libc::c_uchar) => rocksdb_options_get_use_direct_reads(libc::c_uchar) = 0, -;
        rocksdb_options_set_use_direct_io_for_flush_and_compaction(libc::c_uchar) => rocksdb_options_get_use_direct_io_for_flush_and_compaction(libc::c_uchar) = 0, -;
        rocksdb_options_set_is_fd_close_on_exec(libc::c_uchar) => rocksdb_options_get_is_fd_close_on_exec(libc::c_uchar) = 1, -;
        rocksdb_options_set_stats_dump_period_sec(libc::c_uint) => rocksdb_options_get_stats_dump_period_sec(libc::c_uint) = 600, -;
        rocksdb_options_set_stats_persist_period_sec(libc::c_uint) => rocksdb_options_get_stats_persist_period_sec(libc::c_uint) = 600, -;
        rocksdb_options_set_advise_random_on_open(libc::c_uchar) => rocksdb_options_get_advise_random_on_open(libc::c_uchar) = 1, -;
        rocksdb_options_set_use_adaptive_mutex(libc::c_uchar) => rocksdb_options_get_use_adaptive_mutex(libc::c_uchar) = 0, -;
        rocksdb_options_set_bytes_per_sync(u64) => rocksdb_options_get_bytes_per_sync(u64) = 0, -;
        rocksdb_options_set_wal_bytes_per_sync(u64) => rocksdb_options_get_wal_bytes_per_sync(u64) = 0, -;
        rocksdb_options_set_writable_file_max_buffer_size(u64) => rocksdb_options_get_writable_file_max_buffer_size(u64) = 1 << 20, -;
        rocksdb_options_set_allow_concurrent_memtable_write(libc::c_uchar) => rocksdb_options_get_allow_concurrent_memtable_write(libc::c_uchar) = 1, -;
        rocksdb_options_set_enable_write_thread_adaptive_yield(libc::c_uchar) => rocksdb_options_get_enable_write_thread_adaptive_yield(libc::c_uchar) = 1, -;
        rocksdb_options_set_max_sequential_skip_in_iterations(u64) => rocksdb_options_get_max_sequential_skip_in_iterations(u64) = 8, -;
        rocksdb_options_set_disable_auto_compactions(libc::c_int) => rocksdb_options_get_disable_auto_compactions(libc::c_uchar) = 0, -;
        rocksdb_options_set_optimize_filters_for_hits(libc::c_int) => rocksdb_options_get_optimize_filters_for_hits(libc::c_uchar) = 0, -;
        rocksdb_options_set_delete_obsolete_files_period_micros(u64) => rocksdb_options_get_delete_obsolete_files_period_micros(u64) = 21_600_000_000, -;
        rocksdb_options_set_memtable_prefix_bloom_size_ratio(f64) => rocksdb_options_get_memtable_prefix_bloom_size_ratio(f64) = 0, -;
        rocksdb_options_set_max_compaction_bytes(u64) => rocksdb_options_get_max_compaction_bytes(u64) = 0, -;
        rocksdb_options_set_write_dbid_to_manifest(libc::c_uchar) => rocksdb_options_get_write_dbid_to_manifest(libc::c_uchar) = 1, -;
        rocksdb_options_set_write_identity_file(libc::c_uchar) => rocksdb_options_get_write_identity_file(libc::c_uchar) = 1, -;
        rocksdb_options_set_track_and_verify_wals_in_manifest(libc::c_uchar) => rocksdb_options_get_track_and_verify_wals_in_manifest(libc::c_uchar) = 0, -;
        rocksdb_options_set_memtable_huge_page_size(usize) => rocksdb_options_get_memtable_huge_page_size(usize) = 0, -;
        rocksdb_options_set_max_successive_merges(usize) => rocksdb_options_get_max_successive_merges(usize) = 0, -;
        rocksdb_options_set_bloom_locality(u32) => rocksdb_options_get_bloom_locality(u32) = 0, -;
        rocksdb_options_set_inplace_update_support(libc::c_uchar) => rocksdb_options_get_inplace_update_support(libc::c_uchar) = 0, -;
        rocksdb_options_set_inplace_update_num_locks(usize) => rocksdb_options_get_inplace_update_num_locks(usize) = 10000, -;
        rocksdb_options_set_report_bg_io_stats(libc::c_int) => rocksdb_options_get_report_bg_io_stats(libc::c_uchar) = 0, -;
        rocksdb_options_set_avoid_unnecessary_blocking_io(libc::c_uchar) => rocksdb_options_get_avoid_unnecessary_blocking_io(libc::c_uchar) = 0, -;
        rocksdb_options_set_experimental_mempurge_threshold(f64) => rocksdb_options_get_experimental_mempurge_threshold(f64) = 0, -;
        rocksdb_options_set_wal_recovery_mode(libc::c_int) => rocksdb_options_get_wal_recovery_mode(libc::c_int) = 2, -;
        rocksdb_options_set_compression(libc::c_int) => rocksdb_options_get_compression(libc::c_int) = 1, -;
        rocksdb_options_set_bottommost_compression(libc::c_int) => rocksdb_options_get_bottommost_compression(libc::c_int) = 0x7f, -;
        rocksdb_options_set_compaction_style(libc::c_int) => rocksdb_options_get_compaction_style(libc::c_int) = 0, -;
        rocksdb_options_set_atomic_flush(libc::c_uchar) => rocksdb_options_get_atomic_flush(libc::c_uchar) = 0, -;
        rocksdb_options_set_manual_wal_flush(libc::c_uchar) => rocksdb_options_get_manual_wal_flush(libc::c_uchar) = 0, -;
        rocksdb_options_set_wal_compression(libc::c_int) => rocksdb_options_get_wal_compression(libc::c_int) = 0, -;
        rocksdb_options_set_compaction_pri(libc::c_int) => rocksdb_options_get_compaction_pri(libc::c_int) = 0, -;
        rocksdb_options_set_hash_link_list_rep(usize) = 0, -;
        rocksdb_options_set_min_level_to_compress(libc::c_int) = 0, -;
        rocksdb_options_set_dump_malloc_stats(libc::c_uchar) = 0, -;
        rocksdb_options_set_memtable_whole_key_filtering(libc::c_uchar) = 0, -;
});
