//! The setters of `rocksdb_options_t` that take an object or several values at once (paths,
//! Env, logger, rate limiter, write buffer manager, compression options, memtable and table
//! factories, ...), and the tuning presets (`optimize_*`, `increase_parallelism`,
//! `prepare_for_bulk_load`). None has a ShaleDB meaning except an in-memory Env, which makes
//! the open fail by name: each is recorded and written to the `LOG` at open.

use crate::args::{array, handle, handle_mut, into_handle};
use crate::options::rocksdb_options_t;
use crate::plugins::{rocksdb_cache_t, Feature};
use crate::resources::{
    rocksdb_dbpath_t, rocksdb_env_t, rocksdb_filterpolicy_t, rocksdb_logger_t,
    rocksdb_ratelimiter_t, rocksdb_write_buffer_manager_t,
};
use crate::status::quiet;
use crate::table_options::{rocksdb_block_based_table_options_t, rocksdb_cuckoo_table_options_t};

/// Runs `body` on the options behind `options` (nothing for NULL: c.h's setters report
/// nothing).
fn with_options(options: *mut rocksdb_options_t, body: impl FnOnce(&mut rocksdb_options_t)) {
    quiet((), || {
        if let Ok(options) = handle_mut(options, "options") {
            body(options)
        }
    })
}

/// Records `value` under `name`, for the `LOG`.
fn record(options: *mut rocksdb_options_t, name: &'static str, value: String) {
    with_options(options, |options| {
        options.recorded.insert(name.to_string(), value);
    })
}

fn paths(paths: *mut *const rocksdb_dbpath_t, count: usize) -> String {
    let Ok(paths) = array(paths.cast_const(), count) else {
        return "(NULL)".into();
    };
    paths
        .iter()
        .filter_map(|path| handle(*path, "db path").ok())
        .map(|path| format!("{} ({} bytes)", path.path, path.target_size))
        .collect::<Vec<_>>()
        .join(", ")
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_db_paths(
    options: *mut rocksdb_options_t,
    path_values: *mut *const rocksdb_dbpath_t,
    num_paths: usize,
) {
    record(options, "db_paths", paths(path_values, num_paths))
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_cf_paths(
    options: *mut rocksdb_options_t,
    path_values: *mut *const rocksdb_dbpath_t,
    num_paths: usize,
) {
    record(options, "cf_paths", paths(path_values, num_paths))
}

/// An Env: ShaleDB does its own I/O, so the default Env changes nothing, and an in-memory one
/// cannot be honoured (the open fails, naming it).
#[no_mangle]
pub extern "C" fn rocksdb_options_set_env(
    options: *mut rocksdb_options_t,
    env: *mut rocksdb_env_t,
) {
    with_options(options, |options| {
        let in_memory = handle(env, "env").is_ok_and(|env| env.in_memory);
        if in_memory {
            options.refuse(Feature::InMemoryEnv, "MemEnv".into());
        } else {
            options
                .unsupported
                .retain(|plugin| plugin.feature != Feature::InMemoryEnv);
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_info_log(
    options: *mut rocksdb_options_t,
    logger: *mut rocksdb_logger_t,
) {
    with_options(options, |options| {
        options.info_log = handle(logger, "logger").ok().cloned();
    })
}

/// A new handle on the logger set (NULL when none), which the caller destroys.
#[no_mangle]
pub extern "C" fn rocksdb_options_get_info_log(
    options: *mut rocksdb_options_t,
) -> *mut rocksdb_logger_t {
    quiet(std::ptr::null_mut(), || {
        handle(options, "options")
            .ok()
            .and_then(|options| options.info_log.clone())
            .map_or(std::ptr::null_mut(), into_handle)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_ratelimiter(
    options: *mut rocksdb_options_t,
    limiter: *mut rocksdb_ratelimiter_t,
) {
    let rate = handle(limiter, "rate limiter").map_or(0, |limiter| limiter.rate_bytes_per_sec);
    record(options, "rate_limiter", format!("{rate} bytes/s"))
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_write_buffer_manager(
    options: *mut rocksdb_options_t,
    wbm: *mut rocksdb_write_buffer_manager_t,
) {
    let size = crate::resources::rocksdb_write_buffer_manager_buffer_size(wbm);
    record(options, "write_buffer_manager", format!("{size} bytes"))
}

/// A row cache: ShaleDB's value cache is its row cache, sized by the block cache (see db.rs);
/// this one is recorded.
#[no_mangle]
pub extern "C" fn rocksdb_options_set_row_cache(
    options: *mut rocksdb_options_t,
    cache: *mut rocksdb_cache_t,
) {
    let capacity = handle(cache, "cache").map_or(0, rocksdb_cache_t::capacity);
    record(options, "row_cache", format!("{capacity} bytes"))
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_blob_cache(
    options: *mut rocksdb_options_t,
    cache: *mut rocksdb_cache_t,
) {
    let capacity = handle(cache, "cache").map_or(0, rocksdb_cache_t::capacity);
    record(options, "blob_cache", format!("{capacity} bytes"))
}

#[no_mangle]
pub extern "C" fn rocksdb_block_based_options_set_filter_policy(
    table: *mut rocksdb_block_based_table_options_t,
    policy: *mut rocksdb_filterpolicy_t,
) {
    quiet((), || {
        if let Ok(table) = handle_mut(table, "table options") {
            table.filter_bits_per_key =
                handle(policy, "filter policy").ok().map(|p| p.bits_per_key);
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_cuckoo_table_factory(
    options: *mut rocksdb_options_t,
    table: *mut rocksdb_cuckoo_table_options_t,
) {
    let ratio = crate::table_options::cuckoo_hash_ratio(table);
    record(
        options,
        "table_factory",
        format!("CuckooTable (hash_ratio {ratio})"),
    )
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn rocksdb_options_set_plain_table_factory(
    options: *mut rocksdb_options_t,
    user_key_len: u32,
    bloom_bits_per_key: libc::c_int,
    hash_table_ratio: f64,
    index_sparseness: usize,
    huge_page_tlb_size: usize,
    encoding_type: libc::c_char,
    full_scan_mode: libc::c_uchar,
    store_index_in_file: libc::c_uchar,
) {
    record(
        options,
        "table_factory",
        format!(
            "PlainTable (user_key_len {user_key_len}, bloom_bits_per_key {bloom_bits_per_key}, \
             hash_table_ratio {hash_table_ratio}, index_sparseness {index_sparseness}, \
             huge_page_tlb_size {huge_page_tlb_size}, encoding_type {encoding_type}, \
             full_scan_mode {full_scan_mode}, store_index_in_file {store_index_in_file})"
        ),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_memtable_vector_rep(options: *mut rocksdb_options_t) {
    record(options, "memtable_factory", "VectorRepFactory".into())
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_hash_skip_list_rep(
    options: *mut rocksdb_options_t,
    bucket_count: usize,
    skiplist_height: i32,
    branching_factor: i32,
) {
    record(
        options,
        "memtable_factory",
        format!("HashSkipListRepFactory ({bucket_count}, {skiplist_height}, {branching_factor})"),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_compression_options(
    options: *mut rocksdb_options_t,
    window_bits: libc::c_int,
    level: libc::c_int,
    strategy: libc::c_int,
    max_dict_bytes: libc::c_int,
) {
    record(
        options,
        "compression_opts",
        format!("window_bits {window_bits}, level {level}, strategy {strategy}, max_dict_bytes {max_dict_bytes}"),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_bottommost_compression_options(
    options: *mut rocksdb_options_t,
    window_bits: libc::c_int,
    level: libc::c_int,
    strategy: libc::c_int,
    max_dict_bytes: libc::c_int,
    enabled: libc::c_uchar,
) {
    record(
        options,
        "bottommost_compression_opts",
        format!(
            "window_bits {window_bits}, level {level}, strategy {strategy}, \
             max_dict_bytes {max_dict_bytes}, enabled {enabled}"
        ),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_bottommost_compression_options_zstd_max_train_bytes(
    options: *mut rocksdb_options_t,
    zstd_max_train_bytes: libc::c_int,
    enabled: libc::c_uchar,
) {
    record(
        options,
        "bottommost_compression_opts.zstd_max_train_bytes",
        format!("{zstd_max_train_bytes} (enabled {enabled})"),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_bottommost_compression_options_use_zstd_dict_trainer(
    options: *mut rocksdb_options_t,
    use_zstd_dict_trainer: libc::c_uchar,
    _enabled: libc::c_uchar,
) {
    with_options(options, |options| {
        options.settings.set(
            "rocksdb_options_set_bottommost_compression_options_use_zstd_dict_trainer",
            use_zstd_dict_trainer,
        )
    })
}

/// RocksDB's default: the dictionary trainer is used.
#[no_mangle]
pub extern "C" fn rocksdb_options_get_bottommost_compression_options_use_zstd_dict_trainer(
    options: *mut rocksdb_options_t,
) -> libc::c_uchar {
    quiet(1, || {
        handle(options, "options").map_or(1, |options| {
            options.settings.get(
                "rocksdb_options_set_bottommost_compression_options_use_zstd_dict_trainer",
                1u8,
            )
        })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_bottommost_compression_options_max_dict_buffer_bytes(
    options: *mut rocksdb_options_t,
    max_dict_buffer_bytes: u64,
    enabled: libc::c_uchar,
) {
    record(
        options,
        "bottommost_compression_opts.max_dict_buffer_bytes",
        format!("{max_dict_buffer_bytes} (enabled {enabled})"),
    )
}

fn levels(values: *const libc::c_int, count: usize) -> String {
    array(values, count).map_or_else(|_| "(NULL)".into(), |values| format!("{values:?}"))
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_compression_per_level(
    options: *mut rocksdb_options_t,
    level_values: *const libc::c_int,
    num_levels: usize,
) {
    record(
        options,
        "compression_per_level",
        levels(level_values, num_levels),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_max_bytes_for_level_multiplier_additional(
    options: *mut rocksdb_options_t,
    level_values: *mut libc::c_int,
    num_levels: usize,
) {
    record(
        options,
        "max_bytes_for_level_multiplier_additional",
        levels(level_values, num_levels),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_db_log_dir(
    options: *mut rocksdb_options_t,
    dir: *const libc::c_char,
) {
    let dir = crate::args::text(dir, "directory")
        .unwrap_or("(NULL)")
        .to_string();
    record(options, "db_log_dir", dir)
}

/// The WAL's directory: ShaleDB's log is its data, kept in the database's directory.
#[no_mangle]
pub extern "C" fn rocksdb_options_set_wal_dir(
    options: *mut rocksdb_options_t,
    dir: *const libc::c_char,
) {
    let dir = crate::args::text(dir, "directory")
        .unwrap_or("(NULL)")
        .to_string();
    record(options, "wal_dir", dir)
}

#[no_mangle]
pub extern "C" fn rocksdb_options_add_compact_on_deletion_collector_factory(
    options: *mut rocksdb_options_t,
    window_size: usize,
    num_dels_trigger: usize,
) {
    rocksdb_options_add_compact_on_deletion_collector_factory_del_ratio(
        options,
        window_size,
        num_dels_trigger,
        0.0,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_options_add_compact_on_deletion_collector_factory_del_ratio(
    options: *mut rocksdb_options_t,
    window_size: usize,
    num_dels_trigger: usize,
    deletion_ratio: f64,
) {
    record(
        options,
        "table_properties_collector_factories",
        format!(
            "CompactOnDeletionCollector (Sliding window size = {window_size} Deletion trigger = \
             {num_dels_trigger} Deletion ratio = {deletion_ratio})"
        ),
    )
}

/// The tuning presets: each records that it was applied (they set LSM knobs ShaleDB has no
/// use for).
macro_rules! preset {
    ($($name:ident($arg:ident: $t:ty) => $what:literal;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(options: *mut rocksdb_options_t, $arg: $t) {
            record(options, $what, $arg.to_string())
        }
    )*};
}

preset! {
    rocksdb_options_increase_parallelism(total_threads: libc::c_int) => "IncreaseParallelism";
    rocksdb_options_optimize_for_point_lookup(block_cache_size_mb: u64) => "OptimizeForPointLookup";
    rocksdb_options_optimize_level_style_compaction(memtable_memory_budget: u64) => "OptimizeLevelStyleCompaction";
    rocksdb_options_optimize_universal_style_compaction(memtable_memory_budget: u64) => "OptimizeUniversalStyleCompaction";
}

#[no_mangle]
pub extern "C" fn rocksdb_options_prepare_for_bulk_load(options: *mut rocksdb_options_t) {
    record(options, "PrepareForBulkLoad", "applied".into())
}

/// RocksDB's default compaction readahead, 2 MiB.
const COMPACTION_READAHEAD_DEFAULT: usize = 2 << 20;

#[no_mangle]
pub extern "C" fn rocksdb_options_compaction_readahead_size(
    options: *mut rocksdb_options_t,
    size: usize,
) {
    with_options(options, |options| {
        options
            .settings
            .set("rocksdb_options_compaction_readahead_size", size)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_options_get_compaction_readahead_size(
    options: *mut rocksdb_options_t,
) -> usize {
    quiet(COMPACTION_READAHEAD_DEFAULT, || {
        handle(options, "options").map_or(COMPACTION_READAHEAD_DEFAULT, |options| {
            options.settings.get(
                "rocksdb_options_compaction_readahead_size",
                COMPACTION_READAHEAD_DEFAULT,
            )
        })
    })
}

const STATISTICS_LEVEL: &str = "rocksdb_options_set_statistics_level";

/// Statistics: the databases opened with these options report ShaleDB's counters through
/// them (statistics.rs).
#[no_mangle]
pub extern "C" fn rocksdb_options_enable_statistics(options: *mut rocksdb_options_t) {
    with_options(options, |options| {
        options.statistics.get_or_insert_with(Default::default);
        // RocksDB's Statistics start at kExceptDetailedTimers (3).
        if options.value::<i32>(STATISTICS_LEVEL) == 0 {
            options.settings.set(STATISTICS_LEVEL, 3i32);
        }
    })
}
