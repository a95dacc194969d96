//! What a program reads about a database's activity through its options and caches:
//! statistics (`rocksdb_options_statistics_*`: ShaleDB's counters, and the RocksDB tickers that
//! have one), cache usage, the approximate memory usage of databases and caches, histograms and
//! perf contexts. A ticker or histogram ShaleDB keeps no figure for reads 0, as a counter that
//! never moved; docs/ROCKSDB-API.md lists the tickers that are kept.

use crate::args::{handle, handle_mut, into_handle, malloc_string};
use crate::db::{rocksdb_t, Database};
use crate::options::rocksdb_options_t;
use crate::plugins::rocksdb_cache_t;
use crate::settings::option_object;
use crate::status::{call, quiet};
use engine::Stats;
use libc::c_char;
use parking_lot::Mutex;
use std::fmt::Write;
use std::sync::{Arc, Weak};

/// The databases an options object's statistics or a cache serve (each held weakly: a closed
/// database drops out).
pub(crate) type Users = Arc<Mutex<Vec<Weak<Database>>>>;

/// Counters of every live database in `users`.
fn collect(users: &Users) -> Vec<Stats> {
    let mut users = users.lock();
    users.retain(|user| user.strong_count() > 0);
    users
        .iter()
        .filter_map(Weak::upgrade)
        .map(|database| database.engine.stats())
        .collect()
}

/// Registers a database just opened with the statistics and the block cache of its options.
pub(crate) fn attach(options: &rocksdb_options_t, database: &Arc<Database>) {
    let cache = options
        .table
        .as_ref()
        .and_then(|table| table.block_cache.as_ref());
    for users in options
        .statistics
        .iter()
        .chain(cache.map(|cache| &cache.users))
    {
        users.lock().push(Arc::downgrade(database));
    }
}

/// RocksDB's ticker numbers (include/rocksdb/statistics.h of 10.4.2) that ShaleDB has a
/// counter for.
const BLOCK_CACHE_MISS: u32 = 0;
const BLOCK_CACHE_HIT: u32 = 1;
const NUMBER_KEYS_READ: u32 = 58;
const BYTES_WRITTEN: u32 = 60;
const ROW_CACHE_HIT: u32 = 114;
const ROW_CACHE_MISS: u32 = 115;

fn ticker(stats: &Stats, ticker: u32) -> u64 {
    match ticker {
        BLOCK_CACHE_HIT | ROW_CACHE_HIT => stats.cache_hits,
        BLOCK_CACHE_MISS | ROW_CACHE_MISS => stats.cache_misses,
        NUMBER_KEYS_READ => stats.gets,
        BYTES_WRITTEN => stats.user_bytes_written,
        _ => 0,
    }
}

fn statistics(options: *mut rocksdb_options_t) -> Option<Vec<Stats>> {
    handle(options, "options")
        .ok()
        .and_then(|options| options.statistics.as_ref())
        .map(collect)
}

/// The counters of the databases opened with these options, as text; NULL when statistics
/// were not enabled.
#[no_mangle]
pub extern "C" fn rocksdb_options_statistics_get_string(
    options: *mut rocksdb_options_t,
) -> *mut c_char {
    quiet(std::ptr::null_mut(), || {
        statistics(options).map_or(std::ptr::null_mut(), |all| {
            let mut text = String::new();
            for stats in &all {
                let _ = writeln!(
                    text,
                    "rocksdb.block.cache.miss COUNT : {}\nrocksdb.block.cache.hit COUNT : {}\n\
                     rocksdb.number.keys.read COUNT : {}\nrocksdb.bytes.written COUNT : {}\n\
                     ShaleDB counters: {stats:?}",
                    stats.cache_misses, stats.cache_hits, stats.gets, stats.user_bytes_written
                );
            }
            malloc_string(&text)
        })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_options_statistics_get_ticker_count(
    options: *mut rocksdb_options_t,
    ticker_type: u32,
) -> u64 {
    quiet(0, || {
        statistics(options).map_or(0, |all| all.iter().map(|s| ticker(s, ticker_type)).sum())
    })
}

/// `rocksdb_statistics_histogram_data_t`: no histogram is kept, so every figure is 0.
#[derive(Default)]
pub struct rocksdb_statistics_histogram_data_t {
    _empty: (),
}

option_object! {
    rocksdb_statistics_histogram_data_t:
        rocksdb_statistics_histogram_data_create, rocksdb_statistics_histogram_data_destroy;
}

#[no_mangle]
pub extern "C" fn rocksdb_options_statistics_get_histogram_data(
    _options: *mut rocksdb_options_t,
    _histogram_type: u32,
    _data: *mut rocksdb_statistics_histogram_data_t,
) {
}

macro_rules! empty_histogram {
    ($($name:ident -> $t:ty;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(_data: *mut rocksdb_statistics_histogram_data_t) -> $t {
            Default::default()
        }
    )*};
}

empty_histogram! {
    rocksdb_statistics_histogram_data_get_median -> f64;
    rocksdb_statistics_histogram_data_get_p95 -> f64;
    rocksdb_statistics_histogram_data_get_p99 -> f64;
    rocksdb_statistics_histogram_data_get_average -> f64;
    rocksdb_statistics_histogram_data_get_std_dev -> f64;
    rocksdb_statistics_histogram_data_get_max -> f64;
    rocksdb_statistics_histogram_data_get_min -> f64;
    rocksdb_statistics_histogram_data_get_count -> u64;
    rocksdb_statistics_histogram_data_get_sum -> u64;
}

/// `rocksdb_perfcontext_t`: RocksDB's per-thread timers; ShaleDB keeps none, so each metric
/// reads 0 and the report says so.
#[derive(Default)]
pub struct rocksdb_perfcontext_t {
    _empty: (),
}

option_object! {
    rocksdb_perfcontext_t: rocksdb_perfcontext_create, rocksdb_perfcontext_destroy;
}

#[no_mangle]
pub extern "C" fn rocksdb_set_perf_level(_level: libc::c_int) {}

#[no_mangle]
pub extern "C" fn rocksdb_perfcontext_reset(_context: *mut rocksdb_perfcontext_t) {}

#[no_mangle]
pub extern "C" fn rocksdb_perfcontext_report(
    _context: *mut rocksdb_perfcontext_t,
    _exclude_zero_counters: libc::c_uchar,
) -> *mut c_char {
    malloc_string("ShaleDB keeps no per-thread perf context")
}

#[no_mangle]
pub extern "C" fn rocksdb_perfcontext_metric(
    _context: *mut rocksdb_perfcontext_t,
    _metric: libc::c_int,
) -> u64 {
    0
}

fn cache_usage(cache: *const rocksdb_cache_t) -> usize {
    quiet(0, || {
        handle(cache, "cache").map_or(0, |cache| {
            collect(&cache.users)
                .iter()
                .map(|stats| stats.cache_bytes as usize)
                .sum()
        })
    })
}

/// Bytes of values the value caches this cache sizes hold now.
#[no_mangle]
pub extern "C" fn rocksdb_cache_get_usage(cache: *const rocksdb_cache_t) -> usize {
    cache_usage(cache)
}

/// Nothing is pinned: a value read out of ShaleDB's cache is shared, not held in it.
#[no_mangle]
pub extern "C" fn rocksdb_cache_get_pinned_usage(_cache: *const rocksdb_cache_t) -> usize {
    0
}

/// HyperClockCache's table figures: ShaleDB's cache has no such table.
#[no_mangle]
pub extern "C" fn rocksdb_cache_get_table_address_count(_cache: *const rocksdb_cache_t) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_cache_get_occupancy_count(_cache: *const rocksdb_cache_t) -> usize {
    0
}

/// The cache keeps its capacity after its handle is destroyed while databases use it (they
/// hold their own share), so there is nothing to disown.
#[no_mangle]
pub extern "C" fn rocksdb_cache_disown_data(_cache: *mut rocksdb_cache_t) {}

/// `rocksdb_memory_consumers_t`: the databases and caches whose memory a program asks about.
#[derive(Default)]
pub struct rocksdb_memory_consumers_t {
    databases: Vec<Arc<Database>>,
    caches: Vec<rocksdb_cache_t>,
}

option_object! {
    rocksdb_memory_consumers_t: rocksdb_memory_consumers_create, rocksdb_memory_consumers_destroy;
}

#[no_mangle]
pub extern "C" fn rocksdb_memory_consumers_add_db(
    consumers: *mut rocksdb_memory_consumers_t,
    db: *mut rocksdb_t,
) {
    quiet((), || {
        if let (Ok(consumers), Ok(db)) =
            (handle_mut(consumers, "memory consumers"), handle(db, "db"))
        {
            consumers.databases.push(db.database.clone());
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_memory_consumers_add_cache(
    consumers: *mut rocksdb_memory_consumers_t,
    cache: *mut rocksdb_cache_t,
) {
    quiet((), || {
        if let (Ok(consumers), Ok(cache)) = (
            handle_mut(consumers, "memory consumers"),
            handle(cache, "cache"),
        ) {
            consumers.caches.push(cache.clone());
        }
    })
}

/// `rocksdb_memory_usage_t`: memory as RocksDB's MemoryUtil counts it. ShaleDB has no
/// memtables (its write buffers are the head of its log, counted with nothing here); its
/// "table readers" are its index in DRAM; its cache is the value cache.
pub struct rocksdb_memory_usage_t {
    readers: u64,
    cache: u64,
}

#[no_mangle]
pub extern "C" fn rocksdb_approximate_memory_usage_create(
    consumers: *mut rocksdb_memory_consumers_t,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_memory_usage_t {
    call(errptr, std::ptr::null_mut(), || {
        let consumers = handle(consumers, "memory consumers")?;
        let stats: Vec<Stats> = consumers
            .databases
            .iter()
            .map(|db| db.engine.stats())
            .collect();
        let readers = stats.iter().map(|stats| stats.index_bytes).sum();
        // A cache's usage already counts the databases opened with it.
        let database_caches: u64 = stats.iter().map(|stats| stats.cache_bytes).sum();
        let caches: u64 = consumers
            .caches
            .iter()
            .map(|cache| cache_usage(cache) as u64)
            .sum();
        Ok(into_handle(rocksdb_memory_usage_t {
            readers,
            cache: database_caches.max(caches),
        }))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_approximate_memory_usage_destroy(usage: *mut rocksdb_memory_usage_t) {
    quiet((), || crate::args::drop_handle(usage))
}

#[no_mangle]
pub extern "C" fn rocksdb_approximate_memory_usage_get_mem_table_total(
    _usage: *mut rocksdb_memory_usage_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_approximate_memory_usage_get_mem_table_unflushed(
    _usage: *mut rocksdb_memory_usage_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_approximate_memory_usage_get_mem_table_readers_total(
    usage: *mut rocksdb_memory_usage_t,
) -> u64 {
    quiet(0, || {
        handle(usage, "memory usage").map_or(0, |usage| usage.readers)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_approximate_memory_usage_get_cache_total(
    usage: *mut rocksdb_memory_usage_t,
) -> u64 {
    quiet(0, || {
        handle(usage, "memory usage").map_or(0, |usage| usage.cache)
    })
}
