//! What option objects point at: environments, loggers, rate limiters, write buffer managers,
//! SST file managers, database paths, filter policies, memory allocators, and the cache
//! option objects. ShaleDB has its own I/O, threads and memory budget, so each is accepted and
//! recorded (its knobs returned by its getters) with the exceptions that would change what a
//! program gets back: an in-memory Env (ShaleDB always writes to the directory given) makes
//! the open fail by name, and jemalloc's allocator is not built ("Not implemented", as
//! RocksDB answers without jemalloc).

use crate::args::{handle, handle_mut, into_handle, text};
use crate::plugins::rocksdb_cache_t;
use crate::settings::option_object;
use crate::status::{call, quiet, Code, Status};
use libc::c_char;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

/// `rocksdb_env_t`: background thread counts (recorded), and whether it keeps files in memory.
#[derive(Default)]
pub struct rocksdb_env_t {
    pub(crate) in_memory: bool,
    threads: [AtomicUsize; 4],
}

/// `rocksdb_envoptions_t`.
#[derive(Clone, Default)]
pub struct rocksdb_envoptions_t {
    _recorded: (),
}

/// `rocksdb_logger_t`: where RocksDB would write its info log. ShaleDB logs through `tracing`
/// and writes the options of each open to the database's `LOG`; the logger is kept on the
/// options, for `rocksdb_options_get_info_log`.
#[derive(Clone)]
pub struct rocksdb_logger_t {
    _recorded: (),
}

/// `rocksdb_ratelimiter_t`: a rate for background I/O (recorded; ShaleDB paces its cleaner by
/// its own read-latency target).
pub struct rocksdb_ratelimiter_t {
    pub(crate) rate_bytes_per_sec: i64,
}

/// `rocksdb_write_buffer_manager_t`: a memtable memory budget (recorded; ShaleDB's write
/// buffers are bounded per head by its own options).
pub struct rocksdb_write_buffer_manager_t {
    buffer_size: AtomicUsize,
    /// Made with a cache, whose budget RocksDB would charge memtable memory to.
    cost_to_cache: bool,
}

/// `rocksdb_sst_file_manager_t`: space limits for SST files (recorded; ShaleDB bounds its
/// space with its capacity budget and reserve).
pub struct rocksdb_sst_file_manager_t {
    max_allowed_space: AtomicU64,
    delete_rate: AtomicI64,
    max_trash_db_ratio: AtomicU64,
}

/// `rocksdb_dbpath_t`: a data path with a target size (recorded; a KVDB keeps its data in its
/// own directory and media classes).
pub struct rocksdb_dbpath_t {
    pub(crate) path: String,
    pub(crate) target_size: u64,
}

/// `rocksdb_filterpolicy_t`: a Bloom or Ribbon filter (recorded; ShaleDB's index is in DRAM,
/// so a point read of an absent key never touches the device and needs no filter).
pub struct rocksdb_filterpolicy_t {
    pub(crate) bits_per_key: f64,
}

/// `rocksdb_memory_allocator_t`: never made (jemalloc is not built).
pub struct rocksdb_memory_allocator_t {
    _never: (),
}

/// `rocksdb_lru_cache_options_t`, `rocksdb_hyper_clock_cache_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_lru_cache_options_t {
    capacity: usize,
}

#[derive(Clone, Default)]
pub struct rocksdb_hyper_clock_cache_options_t {
    capacity: usize,
}

option_object! {
    rocksdb_env_t: rocksdb_create_default_env, rocksdb_env_destroy;
    rocksdb_envoptions_t: rocksdb_envoptions_create, rocksdb_envoptions_destroy;
    rocksdb_lru_cache_options_t: rocksdb_lru_cache_options_create, rocksdb_lru_cache_options_destroy;
}

/// An Env keeping files in memory: ShaleDB cannot honour it, so an open with it fails.
#[no_mangle]
pub extern "C" fn rocksdb_create_mem_env() -> *mut rocksdb_env_t {
    into_handle(rocksdb_env_t {
        in_memory: true,
        ..Default::default()
    })
}

/// The thread pools of an Env, by RocksDB's priority: bottom, low (the default), high, user.
const LOW: usize = 1;
const HIGH: usize = 2;
const BOTTOM: usize = 0;

fn set_threads(env: *mut rocksdb_env_t, pool: usize, n: libc::c_int) {
    quiet((), || {
        if let Ok(env) = handle(env, "env") {
            env.threads[pool].store(n.max(0) as usize, Ordering::Relaxed);
        }
    })
}

fn threads(env: *mut rocksdb_env_t, pool: usize) -> libc::c_int {
    quiet(0, || {
        handle(env, "env").map_or(0, |env| {
            // RocksDB's default Env starts one thread per pool.
            match env.threads[pool].load(Ordering::Relaxed) {
                0 => 1,
                n => n as libc::c_int,
            }
        })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_env_set_background_threads(env: *mut rocksdb_env_t, n: libc::c_int) {
    set_threads(env, LOW, n)
}

#[no_mangle]
pub extern "C" fn rocksdb_env_get_background_threads(env: *mut rocksdb_env_t) -> libc::c_int {
    threads(env, LOW)
}

#[no_mangle]
pub extern "C" fn rocksdb_env_set_low_priority_background_threads(
    env: *mut rocksdb_env_t,
    n: libc::c_int,
) {
    set_threads(env, LOW, n)
}

#[no_mangle]
pub extern "C" fn rocksdb_env_get_low_priority_background_threads(
    env: *mut rocksdb_env_t,
) -> libc::c_int {
    threads(env, LOW)
}

#[no_mangle]
pub extern "C" fn rocksdb_env_set_high_priority_background_threads(
    env: *mut rocksdb_env_t,
    n: libc::c_int,
) {
    set_threads(env, HIGH, n)
}

#[no_mangle]
pub extern "C" fn rocksdb_env_get_high_priority_background_threads(
    env: *mut rocksdb_env_t,
) -> libc::c_int {
    threads(env, HIGH)
}

#[no_mangle]
pub extern "C" fn rocksdb_env_set_bottom_priority_background_threads(
    env: *mut rocksdb_env_t,
    n: libc::c_int,
) {
    set_threads(env, BOTTOM, n)
}

#[no_mangle]
pub extern "C" fn rocksdb_env_get_bottom_priority_background_threads(
    env: *mut rocksdb_env_t,
) -> libc::c_int {
    threads(env, BOTTOM)
}

/// The Env starts no threads of its own (ShaleDB's run inside each open database, and stop
/// when it closes), so there is nothing to join or to lower the priority of.
macro_rules! env_no_threads {
    ($($name:ident),*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(_env: *mut rocksdb_env_t) {}
    )*};
}

env_no_threads!(
    rocksdb_env_join_all_threads,
    rocksdb_env_lower_thread_pool_io_priority,
    rocksdb_env_lower_high_priority_thread_pool_io_priority,
    rocksdb_env_lower_thread_pool_cpu_priority,
    rocksdb_env_lower_high_priority_thread_pool_cpu_priority
);

#[no_mangle]
pub extern "C" fn rocksdb_create_dir_if_missing(
    env: *mut rocksdb_env_t,
    path: *const c_char,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        if handle(env, "env")?.in_memory {
            return Err(Status::not_supported(
                "an in-memory Env (ShaleDB writes to files)",
            ));
        }
        let path = text(path, "path")?;
        std::fs::create_dir_all(path)
            .map_err(|error| Status::new(Code::IoError, format!("{path}: {error}")))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_logger_create_stderr_logger(
    _log_level: libc::c_int,
    _prefix: *const c_char,
) -> *mut rocksdb_logger_t {
    into_handle(rocksdb_logger_t { _recorded: () })
}

#[no_mangle]
pub extern "C" fn rocksdb_logger_create_callback_logger(
    _log_level: libc::c_int,
    _callback: Option<unsafe extern "C" fn(*mut libc::c_void, libc::c_uint, *mut c_char, usize)>,
    _priv: *mut libc::c_void,
) -> *mut rocksdb_logger_t {
    into_handle(rocksdb_logger_t { _recorded: () })
}

#[no_mangle]
pub extern "C" fn rocksdb_logger_destroy(logger: *mut rocksdb_logger_t) {
    quiet((), || crate::args::drop_handle(logger))
}

#[no_mangle]
pub extern "C" fn rocksdb_ratelimiter_create(
    rate_bytes_per_sec: i64,
    _refill_period_us: i64,
    _fairness: i32,
) -> *mut rocksdb_ratelimiter_t {
    into_handle(rocksdb_ratelimiter_t { rate_bytes_per_sec })
}

#[no_mangle]
pub extern "C" fn rocksdb_ratelimiter_create_auto_tuned(
    rate_bytes_per_sec: i64,
    refill_period_us: i64,
    fairness: i32,
) -> *mut rocksdb_ratelimiter_t {
    rocksdb_ratelimiter_create(rate_bytes_per_sec, refill_period_us, fairness)
}

#[no_mangle]
pub extern "C" fn rocksdb_ratelimiter_create_with_mode(
    rate_bytes_per_sec: i64,
    refill_period_us: i64,
    fairness: i32,
    _mode: libc::c_int,
    _auto_tuned: bool,
) -> *mut rocksdb_ratelimiter_t {
    rocksdb_ratelimiter_create(rate_bytes_per_sec, refill_period_us, fairness)
}

#[no_mangle]
pub extern "C" fn rocksdb_ratelimiter_destroy(limiter: *mut rocksdb_ratelimiter_t) {
    quiet((), || crate::args::drop_handle(limiter))
}

#[no_mangle]
pub extern "C" fn rocksdb_write_buffer_manager_create(
    buffer_size: usize,
    _allow_stall: bool,
) -> *mut rocksdb_write_buffer_manager_t {
    into_handle(rocksdb_write_buffer_manager_t {
        buffer_size: AtomicUsize::new(buffer_size),
        cost_to_cache: false,
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_write_buffer_manager_create_with_cache(
    buffer_size: usize,
    cache: *const rocksdb_cache_t,
    _allow_stall: bool,
) -> *mut rocksdb_write_buffer_manager_t {
    into_handle(rocksdb_write_buffer_manager_t {
        buffer_size: AtomicUsize::new(buffer_size),
        cost_to_cache: !cache.is_null(),
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_write_buffer_manager_destroy(wbm: *mut rocksdb_write_buffer_manager_t) {
    quiet((), || crate::args::drop_handle(wbm))
}

fn with_wbm<T: Copy>(
    wbm: *mut rocksdb_write_buffer_manager_t,
    none: T,
    body: impl FnOnce(&rocksdb_write_buffer_manager_t) -> T,
) -> T {
    quiet(none, || match handle(wbm, "write buffer manager") {
        Ok(wbm) => body(wbm),
        Err(_) => none,
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_write_buffer_manager_enabled(
    wbm: *mut rocksdb_write_buffer_manager_t,
) -> bool {
    with_wbm(wbm, false, |wbm| {
        wbm.buffer_size.load(Ordering::Relaxed) > 0
    })
}

/// Whether the manager was made with a cache to charge (ShaleDB has no memtable memory to
/// charge to it).
#[no_mangle]
pub extern "C" fn rocksdb_write_buffer_manager_cost_to_cache(
    wbm: *mut rocksdb_write_buffer_manager_t,
) -> bool {
    with_wbm(wbm, false, |wbm| wbm.cost_to_cache)
}

/// No memtables hold memory under this manager (ShaleDB has none).
#[no_mangle]
pub extern "C" fn rocksdb_write_buffer_manager_memory_usage(
    _wbm: *mut rocksdb_write_buffer_manager_t,
) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_write_buffer_manager_mutable_memtable_memory_usage(
    _wbm: *mut rocksdb_write_buffer_manager_t,
) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_write_buffer_manager_dummy_entries_in_cache_usage(
    _wbm: *mut rocksdb_write_buffer_manager_t,
) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_write_buffer_manager_buffer_size(
    wbm: *mut rocksdb_write_buffer_manager_t,
) -> usize {
    with_wbm(wbm, 0, |wbm| wbm.buffer_size.load(Ordering::Relaxed))
}

#[no_mangle]
pub extern "C" fn rocksdb_write_buffer_manager_set_buffer_size(
    wbm: *mut rocksdb_write_buffer_manager_t,
    new_size: usize,
) {
    with_wbm(wbm, (), |wbm| {
        wbm.buffer_size.store(new_size, Ordering::Relaxed)
    })
}

#[no_mangle]
/// Stalling writes on memtable memory: ShaleDB has no memtables to stall on.
pub extern "C" fn rocksdb_write_buffer_manager_set_allow_stall(
    _wbm: *mut rocksdb_write_buffer_manager_t,
    _new_allow_stall: bool,
) {
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_create(
    _env: *mut rocksdb_env_t,
) -> *mut rocksdb_sst_file_manager_t {
    into_handle(rocksdb_sst_file_manager_t {
        max_allowed_space: AtomicU64::new(0),
        // RocksDB's defaults: no delete rate limit, trash up to 0.25 of the database.
        delete_rate: AtomicI64::new(0),
        max_trash_db_ratio: AtomicU64::new(0.25f64.to_bits()),
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_destroy(sfm: *mut rocksdb_sst_file_manager_t) {
    quiet((), || crate::args::drop_handle(sfm))
}

fn with_sfm<T: Copy>(
    sfm: *mut rocksdb_sst_file_manager_t,
    none: T,
    body: impl FnOnce(&rocksdb_sst_file_manager_t) -> T,
) -> T {
    quiet(none, || match handle(sfm, "sst file manager") {
        Ok(sfm) => body(sfm),
        Err(_) => none,
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_set_max_allowed_space_usage(
    sfm: *mut rocksdb_sst_file_manager_t,
    max_allowed_space: u64,
) {
    with_sfm(sfm, (), |sfm| {
        sfm.max_allowed_space
            .store(max_allowed_space, Ordering::Relaxed)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_set_compaction_buffer_size(
    _sfm: *mut rocksdb_sst_file_manager_t,
    _compaction_buffer_size: u64,
) {
}

/// No SST files are tracked (ShaleDB has none), so no limit is reached by them.
#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_is_max_allowed_space_reached(
    _sfm: *mut rocksdb_sst_file_manager_t,
) -> bool {
    false
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_is_max_allowed_space_reached_including_compactions(
    _sfm: *mut rocksdb_sst_file_manager_t,
) -> bool {
    false
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_get_total_size(
    _sfm: *mut rocksdb_sst_file_manager_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_get_total_trash_size(
    _sfm: *mut rocksdb_sst_file_manager_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_get_delete_rate_bytes_per_second(
    sfm: *mut rocksdb_sst_file_manager_t,
) -> i64 {
    with_sfm(sfm, 0, |sfm| sfm.delete_rate.load(Ordering::Relaxed))
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_set_delete_rate_bytes_per_second(
    sfm: *mut rocksdb_sst_file_manager_t,
    delete_rate: i64,
) {
    with_sfm(sfm, (), |sfm| {
        sfm.delete_rate.store(delete_rate, Ordering::Relaxed)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_get_max_trash_db_ratio(
    sfm: *mut rocksdb_sst_file_manager_t,
) -> f64 {
    with_sfm(sfm, 0.0, |sfm| {
        f64::from_bits(sfm.max_trash_db_ratio.load(Ordering::Relaxed))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_manager_set_max_trash_db_ratio(
    sfm: *mut rocksdb_sst_file_manager_t,
    ratio: f64,
) {
    with_sfm(sfm, (), |sfm| {
        sfm.max_trash_db_ratio
            .store(ratio.to_bits(), Ordering::Relaxed)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_dbpath_create(
    path: *const c_char,
    target_size: u64,
) -> *mut rocksdb_dbpath_t {
    into_handle(rocksdb_dbpath_t {
        path: text(path, "path").unwrap_or_default().to_string(),
        target_size,
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_dbpath_destroy(path: *mut rocksdb_dbpath_t) {
    quiet((), || crate::args::drop_handle(path))
}

fn filter_policy(bits_per_key: f64) -> *mut rocksdb_filterpolicy_t {
    into_handle(rocksdb_filterpolicy_t { bits_per_key })
}

#[no_mangle]
pub extern "C" fn rocksdb_filterpolicy_create_bloom(
    bits_per_key: f64,
) -> *mut rocksdb_filterpolicy_t {
    filter_policy(bits_per_key)
}

#[no_mangle]
pub extern "C" fn rocksdb_filterpolicy_create_bloom_full(
    bits_per_key: f64,
) -> *mut rocksdb_filterpolicy_t {
    filter_policy(bits_per_key)
}

#[no_mangle]
pub extern "C" fn rocksdb_filterpolicy_create_ribbon(
    bloom_equivalent_bits_per_key: f64,
) -> *mut rocksdb_filterpolicy_t {
    filter_policy(bloom_equivalent_bits_per_key)
}

#[no_mangle]
pub extern "C" fn rocksdb_filterpolicy_create_ribbon_hybrid(
    bloom_equivalent_bits_per_key: f64,
    _bloom_before_level: libc::c_int,
) -> *mut rocksdb_filterpolicy_t {
    filter_policy(bloom_equivalent_bits_per_key)
}

#[no_mangle]
pub extern "C" fn rocksdb_filterpolicy_destroy(policy: *mut rocksdb_filterpolicy_t) {
    quiet((), || crate::args::drop_handle(policy))
}

#[no_mangle]
pub extern "C" fn rocksdb_jemalloc_nodump_allocator_create(
    errptr: *mut *mut c_char,
) -> *mut rocksdb_memory_allocator_t {
    call(errptr, std::ptr::null_mut(), || {
        Err(Status::not_supported(
            "JemallocNodumpAllocator (not built with jemalloc)",
        ))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_memory_allocator_destroy(allocator: *mut rocksdb_memory_allocator_t) {
    quiet((), || crate::args::drop_handle(allocator))
}

#[no_mangle]
pub extern "C" fn rocksdb_lru_cache_options_set_capacity(
    options: *mut rocksdb_lru_cache_options_t,
    capacity: usize,
) {
    quiet((), || {
        if let Ok(options) = handle_mut(options, "cache options") {
            options.capacity = capacity;
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_lru_cache_options_set_num_shard_bits(
    options: *mut rocksdb_lru_cache_options_t,
    bits: libc::c_int,
) {
    // ShaleDB's value cache shards itself.
    let _ = (options, bits);
}

#[no_mangle]
pub extern "C" fn rocksdb_lru_cache_options_set_memory_allocator(
    _options: *mut rocksdb_lru_cache_options_t,
    _allocator: *mut rocksdb_memory_allocator_t,
) {
}

#[no_mangle]
pub extern "C" fn rocksdb_cache_create_lru_opts(
    options: *const rocksdb_lru_cache_options_t,
) -> *mut rocksdb_cache_t {
    quiet(std::ptr::null_mut(), || {
        handle(options, "cache options").map_or(std::ptr::null_mut(), |options| {
            rocksdb_cache_t::new(options.capacity)
        })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_hyper_clock_cache_options_create(
    capacity: usize,
    _estimated_entry_charge: usize,
) -> *mut rocksdb_hyper_clock_cache_options_t {
    into_handle(rocksdb_hyper_clock_cache_options_t { capacity })
}

#[no_mangle]
pub extern "C" fn rocksdb_hyper_clock_cache_options_destroy(
    options: *mut rocksdb_hyper_clock_cache_options_t,
) {
    quiet((), || crate::args::drop_handle(options))
}

fn with_hcc(
    options: *mut rocksdb_hyper_clock_cache_options_t,
    body: impl FnOnce(&mut rocksdb_hyper_clock_cache_options_t),
) {
    quiet((), || {
        if let Ok(options) = handle_mut(options, "cache options") {
            body(options)
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_hyper_clock_cache_options_set_capacity(
    options: *mut rocksdb_hyper_clock_cache_options_t,
    capacity: usize,
) {
    with_hcc(options, |options| options.capacity = capacity)
}

#[no_mangle]
pub extern "C" fn rocksdb_hyper_clock_cache_options_set_estimated_entry_charge(
    options: *mut rocksdb_hyper_clock_cache_options_t,
    charge: usize,
) {
    // ShaleDB's cache charges each value its size.
    let _ = (options, charge);
}

#[no_mangle]
pub extern "C" fn rocksdb_hyper_clock_cache_options_set_num_shard_bits(
    options: *mut rocksdb_hyper_clock_cache_options_t,
    bits: libc::c_int,
) {
    // ShaleDB's value cache shards itself.
    let _ = (options, bits);
}

#[no_mangle]
pub extern "C" fn rocksdb_hyper_clock_cache_options_set_memory_allocator(
    _options: *mut rocksdb_hyper_clock_cache_options_t,
    _allocator: *mut rocksdb_memory_allocator_t,
) {
}

#[no_mangle]
pub extern "C" fn rocksdb_cache_create_hyper_clock_opts(
    options: *const rocksdb_hyper_clock_cache_options_t,
) -> *mut rocksdb_cache_t {
    quiet(std::ptr::null_mut(), || {
        handle(options, "cache options").map_or(std::ptr::null_mut(), |options| {
            rocksdb_cache_t::new(options.capacity)
        })
    })
}
