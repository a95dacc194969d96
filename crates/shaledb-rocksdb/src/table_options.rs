//! Table formats' options: ShaleDB has no SST tables, so these are recorded (and dumped to the
//! `LOG`) except the block cache, whose capacity becomes the budget of ShaleDB's value cache.

use crate::args::{drop_handle, handle, handle_mut, into_handle};
use crate::plugins::rocksdb_cache_t;
use crate::settings::{recorded_knobs, Settings};
use crate::status::quiet;

/// `rocksdb_block_based_table_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_block_based_table_options_t {
    pub(crate) settings: Settings,
    pub(crate) block_cache: Option<rocksdb_cache_t>,
    /// The filter policy's bits per key (ShaleDB's index in DRAM answers for absent keys
    /// without a device read, so it needs no filter).
    pub(crate) filter_bits_per_key: Option<f64>,
}

/// `rocksdb_cuckoo_table_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_cuckoo_table_options_t {
    pub(crate) settings: Settings,
}

#[no_mangle]
pub extern "C" fn rocksdb_block_based_options_create() -> *mut rocksdb_block_based_table_options_t {
    into_handle(rocksdb_block_based_table_options_t::default())
}

#[no_mangle]
pub extern "C" fn rocksdb_block_based_options_destroy(
    options: *mut rocksdb_block_based_table_options_t,
) {
    quiet((), || drop_handle(options))
}

#[no_mangle]
pub extern "C" fn rocksdb_block_based_options_set_block_cache(
    options: *mut rocksdb_block_based_table_options_t,
    cache: *mut rocksdb_cache_t,
) {
    quiet((), || {
        if let (Ok(options), Ok(cache)) =
            (handle_mut(options, "table options"), handle(cache, "cache"))
        {
            options.block_cache = Some(cache.clone());
        }
    })
}

/// The hash ratio of cuckoo table options, for the `LOG`.
pub(crate) fn cuckoo_hash_ratio(table: *mut rocksdb_cuckoo_table_options_t) -> f64 {
    handle(table, "cuckoo table options").map_or(0.0, |table| {
        table
            .settings
            .value(CUCKOO_KNOBS, "rocksdb_cuckoo_options_set_hash_ratio")
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_cuckoo_options_create() -> *mut rocksdb_cuckoo_table_options_t {
    into_handle(rocksdb_cuckoo_table_options_t::default())
}

#[no_mangle]
pub extern "C" fn rocksdb_cuckoo_options_destroy(options: *mut rocksdb_cuckoo_table_options_t) {
    quiet((), || drop_handle(options))
}

recorded_knobs!(rocksdb_block_based_table_options_t, BLOCK_BASED_KNOBS, "rocksdb_block_based_options_set_" {
        rocksdb_block_based_options_set_checksum(libc::c_char) = 4, -;
        rocksdb_block_based_options_set_block_size(usize) = 4096, -;
        rocksdb_block_based_options_set_block_size_deviation(libc::c_int) = 10, -;
        rocksdb_block_based_options_set_block_restart_interval(libc::c_int) = 16, -;
        rocksdb_block_based_options_set_index_block_restart_interval(libc::c_int) = 1, -;
        rocksdb_block_based_options_set_metadata_block_size(u64) = 4096, -;
        rocksdb_block_based_options_set_partition_filters(libc::c_uchar) = 0, -;
        rocksdb_block_based_options_set_optimize_filters_for_memory(libc::c_uchar) = 1, -;
        rocksdb_block_based_options_set_use_delta_encoding(libc::c_uchar) = 1, -;
        rocksdb_block_based_options_set_no_block_cache(libc::c_uchar) = 0, -;
        rocksdb_block_based_options_set_whole_key_filtering(libc::c_uchar) = 1, -;
        rocksdb_block_based_options_set_format_version(libc::c_int) = 6, -;
        rocksdb_block_based_options_set_index_type(libc::c_int) = 0, -;
        rocksdb_block_based_options_set_data_block_index_type(libc::c_int) = 0, -;
        rocksdb_block_based_options_set_data_block_hash_ratio(f64) = 0.75, "data_block_hash_table_util_ratio";
        rocksdb_block_based_options_set_cache_index_and_filter_blocks(libc::c_uchar) = 0, -;
        rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(libc::c_uchar) = 0, -;
        rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(libc::c_uchar) = 0, -;
        rocksdb_block_based_options_set_pin_top_level_index_and_filter(libc::c_uchar) = 0, -;
        rocksdb_block_based_options_set_top_level_index_pinning_tier(libc::c_int) = 0, -;
        rocksdb_block_based_options_set_partition_pinning_tier(libc::c_int) = 0, -;
        rocksdb_block_based_options_set_unpartitioned_pinning_tier(libc::c_int) = 0, -;
});

recorded_knobs!(rocksdb_cuckoo_table_options_t, CUCKOO_KNOBS, "rocksdb_cuckoo_options_set_" {
        rocksdb_cuckoo_options_set_hash_ratio(f64) = 0.9, -;
        rocksdb_cuckoo_options_set_max_search_depth(u32) = 100, -;
        rocksdb_cuckoo_options_set_cuckoo_block_size(u32) = 5, -;
        rocksdb_cuckoo_options_set_identity_as_first_hash(libc::c_uchar) = 0, -;
        rocksdb_cuckoo_options_set_use_module_hash(libc::c_uchar) = 1, -;
});
