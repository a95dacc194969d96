//! The options the harness gives RocksDB through the `rocksdb` crate, as plain data, and the
//! engines' descriptions: compiled in every build, so the mapping from the harness's
//! configuration is tested without any librocksdb. `engines/rocksdb.rs` applies them to the
//! crate's option objects, for RocksDB's library (`rocksdb`, `rocksdb-tuned`) and for ShaleDB's
//! RocksDB-compatible one (`rocksdb-api`).

use crate::engine::EngineConfig;

/// RocksDB reads, flushes and compacts with direct I/O, as ShaleDB does (the harness's rule: no
/// hidden page cache), so every RocksDB engine's spec says so and its options ask for it.
pub const DIRECT_IO: bool = true;
pub const BLOOM_BITS_PER_KEY: f64 = 10.0;
/// Memtable size of the tuned peer (RocksDB's default is 64 MiB, two of them).
pub const TUNED_WRITE_BUFFER_BYTES: usize = 128 << 20;
pub const TUNED_WRITE_BUFFERS: i32 = 3;
/// The file a KVDB's directory keeps ShaleDB's warm-keys list in (`warm_keys_max_bytes` in
/// `shaledb::Options`), which the `rocksdb-api` engine removes before each open.
pub const WARM_KEYS_FILE: &str = "warm-keys";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tuning {
    /// RocksDB's defaults but for what must be equal to ShaleDB's configuration: the block
    /// cache is the shared budget, the same compression, direct I/O, a bloom filter.
    AsShipped,
    /// RocksDB's tuning guide ("Setup Options and Basic Tuning", "Partitioned Index/Filters",
    /// "Block Cache"): partitioned index and filters in the block cache, the top level and L0's
    /// pinned there at high priority, larger memtables, dynamic level sizes, filters skipped on
    /// the last level (every YCSB read hits an existing key), smoothed writeback, pipelined
    /// writes.
    Tuned,
}

/// What every configuration sets, from the harness's configuration. The tuned peer's additions
/// are in `engines/rocksdb.rs`, next to the calls that set them.
#[derive(Debug, Clone, PartialEq)]
pub struct CommonOptions {
    pub create_if_missing: bool,
    /// Capacity of the LRU block cache: the harness's cache budget.
    pub block_cache_bytes: usize,
    /// The harness's compression, on every level (no per-level or bottommost override).
    pub compression: shaledb::Compression,
    pub bloom_bits_per_key: f64,
    pub use_direct_reads: bool,
    pub use_direct_io_for_flush_and_compaction: bool,
    pub max_background_jobs: i32,
    /// Every write: the WAL on, no sync (durable at the next WAL sync, as ShaleDB's interval
    /// durability makes writes durable within 100 ms).
    pub disable_wal: bool,
    pub sync: bool,
}

impl CommonOptions {
    pub fn new(config: &EngineConfig) -> Self {
        CommonOptions {
            create_if_missing: true,
            block_cache_bytes: config.cache_bytes as usize,
            compression: config.compression,
            bloom_bits_per_key: BLOOM_BITS_PER_KEY,
            use_direct_reads: DIRECT_IO,
            use_direct_io_for_flush_and_compaction: DIRECT_IO,
            max_background_jobs: config.threads.clamp(2, 4) as i32,
            disable_wal: false,
            sync: false,
        }
    }
}

fn compression_text(compression: shaledb::Compression) -> String {
    match compression {
        shaledb::Compression::None => "no compression".to_string(),
        compression => format!("compression {compression} on every level"),
    }
}

/// The RocksDB peers' options, as the report lists them; `library` names the librocksdb linked.
pub fn describe(config: &EngineConfig, tuning: Tuning, library: &str) -> String {
    let options = CommonOptions::new(config);
    let common = format!(
        "RocksDB ({library}): {}, bloom filter {} bits/key, LRU block cache {} MiB, \
         use_direct_reads, use_direct_io_for_flush_and_compaction (compaction readahead 2 MiB, \
         RocksDB's default under direct I/O), max_background_jobs {}, WAL on with sync=false",
        compression_text(options.compression),
        options.bloom_bits_per_key,
        options.block_cache_bytes >> 20,
        options.max_background_jobs
    );
    match tuning {
        Tuning::AsShipped => format!(
            "{common}; otherwise as RocksDB ships: index and filter blocks outside the block \
             cache (their memory counted in RSS), write_buffer_size 64 MiB x 2, leveled \
             compaction with static level sizes"
        ),
        Tuning::Tuned => format!(
            "{common}; tuned as RocksDB's tuning guide recommends: partitioned index and filters \
             (kTwoLevelIndexSearch, partition_filters, metadata_block_size 4096) in the block \
             cache with cache_index_and_filter_blocks, pin_top_level_index_and_filter and \
             pin_l0_filter_and_index_blocks_in_cache (high priority, RocksDB's default), \
             write_buffer_size {} MiB x {}, level_compaction_dynamic_level_bytes, \
             optimize_filters_for_hits, bytes_per_sync 1 MiB, enable_pipelined_write",
            TUNED_WRITE_BUFFER_BYTES >> 20,
            TUNED_WRITE_BUFFERS
        ),
    }
}

/// The `rocksdb-api` engine's options and what ShaleDB's library makes of them.
pub fn describe_api(config: &EngineConfig, library: &str) -> String {
    let options = CommonOptions::new(config);
    format!(
        "ShaleDB {} through RocksDB's C API: the `rocksdb` crate linked to {library}, opened \
         with the `rocksdb` peer's options unchanged (the same program, relinked). What the \
         library makes of them (docs/ROCKSDB-API.md): the LRU block cache is ShaleDB's value \
         cache, {} MiB; {}{}; use_direct_reads is O_DIRECT; the bloom filter, table options and \
         max_background_jobs are accepted and change nothing; writes with sync=false are \
         durable within ShaleDB's 100 ms interval. As for the native engine, no cache warming \
         after reopen: the library saves a warm-keys file at close (it has no option to stop \
         that) and the harness removes it before each open",
        env!("CARGO_PKG_VERSION"),
        options.block_cache_bytes >> 20,
        compression_text(options.compression),
        match options.compression {
            shaledb::Compression::None => "",
            _ => " (ShaleDB's KVS compression, each value on its own)",
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn config(cache_mib: u64, threads: usize, compression: shaledb::Compression) -> EngineConfig {
        EngineConfig {
            dir: PathBuf::from("unused"),
            cache_bytes: cache_mib << 20,
            threads,
            compression,
        }
    }

    #[test]
    fn every_configuration_carries_the_harness_budget_compression_and_direct_io() {
        for compression in [shaledb::Compression::None, shaledb::Compression::Lz4] {
            let options = CommonOptions::new(&config(48, 16, compression));
            assert_eq!(
                options,
                CommonOptions {
                    create_if_missing: true,
                    block_cache_bytes: 48 << 20,
                    compression,
                    bloom_bits_per_key: 10.0,
                    use_direct_reads: true,
                    use_direct_io_for_flush_and_compaction: true,
                    max_background_jobs: 4,
                    disable_wal: false,
                    sync: false,
                }
            );
        }
        let few = CommonOptions::new(&config(1, 1, shaledb::Compression::None));
        assert_eq!(few.max_background_jobs, 2);
    }

    /// What ShaleDB's RocksDB-compatible library opens for these options, as docs/ROCKSDB-API.md
    /// states its mapping: the block cache's capacity is the value cache's budget, kNoCompression
    /// stores values as given and any codec compresses with LZ4, use_direct_reads (or direct I/O
    /// for flush and compaction) is O_DIRECT, everything else ShaleDB's defaults.
    fn through_compat_library(options: &CommonOptions) -> (shaledb::Options, shaledb::KvsOptions) {
        let engine = shaledb::Options {
            cache_bytes: options.block_cache_bytes as u64,
            direct_io: options.use_direct_reads || options.use_direct_io_for_flush_and_compaction,
            ..shaledb::Options::default()
        };
        let kvs = shaledb::KvsOptions {
            compression: match options.compression {
                shaledb::Compression::None => shaledb::Compression::None,
                _ => shaledb::Compression::Lz4,
            },
            ..shaledb::KvsOptions::default()
        };
        (engine, kvs)
    }

    #[test]
    fn through_the_compat_library_shaledb_runs_as_the_native_engine_but_for_warm_keys() {
        for compression in [shaledb::Compression::None, shaledb::Compression::Lz4] {
            let config = config(32, 4, compression);
            let (native, native_kvs) = super::super::shaledb::options(&config);
            let (api, api_kvs) = through_compat_library(&CommonOptions::new(&config));
            assert_eq!(api.cache_bytes, native.cache_bytes);
            assert_eq!(api.direct_io, native.direct_io);
            assert_eq!(
                format!("{:?}", api.durability),
                format!("{:?}", native.durability)
            );
            assert_eq!(api_kvs, native_kvs);
            // The one difference: the native engine keeps no warm-keys file; the library saves
            // one and warms from it, which the `rocksdb-api` engine undoes by removing it.
            assert_eq!(native.warm_keys_max_bytes, Some(0));
            assert_eq!(api.warm_keys_max_bytes, None);
            let (mut native, mut api) = (native, api);
            native.warm_keys_max_bytes = None;
            api.warm_keys_max_bytes = None;
            assert_eq!(format!("{api:?}"), format!("{native:?}"));
        }
    }

    #[test]
    fn shaledb_with_the_compat_librarys_options_saves_its_warm_keys_where_the_engine_removes_them()
    {
        let dir = tempfile::tempdir().unwrap();
        let config = config(1, 1, shaledb::Compression::None);
        let (options, _) = through_compat_library(&CommonOptions::new(&config));
        let db = shaledb::Db::open(dir.path(), options).unwrap();
        let kvs = db.kvs("default").unwrap();
        kvs.put(b"key", b"value").unwrap();
        assert!(kvs.get(b"key").unwrap().is_some());
        drop(kvs);
        db.close().unwrap();
        assert!(dir.path().join(WARM_KEYS_FILE).is_file());
    }

    #[test]
    fn descriptions_name_what_each_engine_is_given() {
        let config = config(16, 4, shaledb::Compression::Lz4);
        let peer = describe(&config, Tuning::AsShipped, "system librocksdb 7.8.3");
        assert!(peer.contains("LRU block cache 16 MiB") && peer.contains("lz4 on every level"));
        let api = describe_api(&config, "ShaleDB's librocksdb");
        assert!(
            api.contains("value cache, 16 MiB") && api.contains("lz4"),
            "{api}"
        );
        assert!(api.contains("the `rocksdb` peer's options unchanged"));
    }
}
