//! Engines through the `rocksdb` crate. With the `rocksdb` feature, RocksDB as two peers:
//! `rocksdb`, configured as RocksDB ships (index and filter blocks held outside the block cache,
//! their memory counted in the process's RSS), and `rocksdb-tuned`, configured as RocksDB's
//! tuning guide recommends for point reads over a data set larger than memory. ShaleDB's ratios
//! are read against the better of the two. Both compress as ShaleDB does (`--compression`: none,
//! or lz4 on every level), with a bloom filter of 10 bits per key and direct I/O for reads,
//! flushes and compactions. Their options, as plain data, are in `rocksdb_options.rs`.
//!
//! The library is either the one the `rocksdb` crate bundles (built from C++ source) or, when
//! the build sets `ROCKSDB_LIB_DIR`, the system's (Debian's librocksdb, the same library as
//! Debian's `db_bench`): see `build.rs` and `scripts/bench`. The version that ran is read from
//! the OPTIONS file RocksDB writes and reported with the engine's statistics.
//!
//! With the `rocksdb-api` feature instead, the crate is linked to ShaleDB's RocksDB-compatible
//! library (`crates/shaledb-rocksdb`; `build.rs` refuses any other) and the one engine is
//! `rocksdb-api`: the `rocksdb` peer's program and options unchanged, on ShaleDB. Run beside
//! `shaledb` in one process, their ratio is the compatibility layer's cost
//! (`scripts/bench-rocksdb-api`).

use super::rocksdb_options::{self, CommonOptions, Tuning};
use crate::engine::{Engine, EngineConfig, EngineSpec};
use anyhow::Result;
use rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, Cache, DBCompressionType, Options, WriteOptions, DB,
};
use std::path::Path;

/// Which library this build links (set by `build.rs`).
const LIBRARY: &str = env!("SHALE_ROCKSDB_LIBRARY");

#[cfg(feature = "rocksdb")]
pub const SPEC: EngineSpec = EngineSpec {
    name: "rocksdb",
    direct_io: rocksdb_options::DIRECT_IO,
    describe: |config| rocksdb_options::describe(config, Tuning::AsShipped, LIBRARY),
    open: |config| Ok(Box::new(RocksEngine::open(config, Tuning::AsShipped)?)),
};

#[cfg(feature = "rocksdb")]
pub const TUNED_SPEC: EngineSpec = EngineSpec {
    name: "rocksdb-tuned",
    direct_io: rocksdb_options::DIRECT_IO,
    describe: |config| rocksdb_options::describe(config, Tuning::Tuned, LIBRARY),
    open: |config| Ok(Box::new(RocksEngine::open(config, Tuning::Tuned)?)),
};

#[cfg(feature = "rocksdb-api")]
pub const API_SPEC: EngineSpec = EngineSpec {
    name: "rocksdb-api",
    direct_io: rocksdb_options::DIRECT_IO,
    describe: |config| rocksdb_options::describe_api(config, LIBRARY),
    open: |config| Ok(Box::new(RocksEngine::open_shaledb(config)?)),
};

/// RocksDB's compression for the harness's: the same on every level (`compression` with no
/// per-level or bottommost override).
fn compression_type(compression: shaledb::Compression) -> DBCompressionType {
    match compression {
        shaledb::Compression::None => DBCompressionType::None,
        shaledb::Compression::Lz4 => DBCompressionType::Lz4,
    }
}

struct RocksEngine {
    db: DB,
    write_options: WriteOptions,
    /// The RocksDB version that wrote the OPTIONS file at open (ShaleDB's library writes none).
    version: Option<String>,
    /// Through ShaleDB's library: the first line of the LOG it wrote at open, naming ShaleDB's
    /// version and the c.h it implements.
    shaledb_log: Option<String>,
}

impl RocksEngine {
    fn open(config: &EngineConfig, tuning: Tuning) -> Result<Self> {
        let common = CommonOptions::new(config);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(common.block_cache_bytes));
        table.set_bloom_filter(common.bloom_bits_per_key, false);
        let mut options = Options::default();
        options.create_if_missing(common.create_if_missing);
        options.set_compression_type(compression_type(common.compression));
        options.set_use_direct_reads(common.use_direct_reads);
        options.set_use_direct_io_for_flush_and_compaction(
            common.use_direct_io_for_flush_and_compaction,
        );
        options.set_max_background_jobs(common.max_background_jobs);
        match tuning {
            Tuning::AsShipped => table.set_cache_index_and_filter_blocks(false),
            Tuning::Tuned => {
                table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
                table.set_partition_filters(true);
                table.set_metadata_block_size(4096);
                table.set_cache_index_and_filter_blocks(true);
                table.set_pin_top_level_index_and_filter(true);
                table.set_pin_l0_filter_and_index_blocks_in_cache(true);
                options.set_write_buffer_size(rocksdb_options::TUNED_WRITE_BUFFER_BYTES);
                options.set_max_write_buffer_number(rocksdb_options::TUNED_WRITE_BUFFERS);
                options.set_level_compaction_dynamic_level_bytes(true);
                options.set_optimize_filters_for_hits(true);
                options.set_bytes_per_sync(1 << 20);
                // WAL and memtable writes overlap: db_bench turns this on by default, and on
                // this machine it wrote 1.4x faster (fillrandom, 1M keys, 4 threads).
                options.set_enable_pipelined_write(true);
            }
        }
        options.set_block_based_table_factory(&table);
        let mut write_options = WriteOptions::default();
        write_options.disable_wal(common.disable_wal);
        write_options.set_sync(common.sync);
        let db = DB::open(&options, &config.dir)?;
        Ok(RocksEngine {
            db,
            write_options,
            version: options_file_version(&config.dir),
            shaledb_log: None,
        })
    }

    /// The `rocksdb-api` engine: the `rocksdb` peer's open, on ShaleDB's library, checked to be
    /// ShaleDB with the harness's budget.
    #[cfg_attr(
        not(feature = "rocksdb-api"),
        expect(dead_code, reason = "rocksdb-api only")
    )]
    fn open_shaledb(config: &EngineConfig) -> Result<Self> {
        // As the native engine, start with the cache this reopen leaves: the library saved the
        // keys its cache held at the last close and would warm the cache from them.
        match std::fs::remove_file(config.dir.join(rocksdb_options::WARM_KEYS_FILE)) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error.into()),
            _ => {}
        }
        let mut engine = Self::open(config, Tuning::AsShipped)?;
        let log = std::fs::read_to_string(config.dir.join("LOG")).unwrap_or_default();
        let first_line = log.lines().next().unwrap_or_default();
        anyhow::ensure!(
            first_line.starts_with("ShaleDB "),
            "rocksdb-api: the librocksdb this process loaded is not ShaleDB's (its LOG in {} \
             begins {first_line:?}); the build linked {LIBRARY}",
            config.dir.display()
        );
        let capacity = engine
            .db
            .property_int_value("rocksdb.block-cache-capacity")?;
        anyhow::ensure!(
            capacity == Some(config.cache_bytes),
            "rocksdb-api: ShaleDB's value cache is {capacity:?} bytes, not the budget {}",
            config.cache_bytes
        );
        engine.shaledb_log = Some(first_line.to_owned());
        Ok(engine)
    }
}

/// `rocksdb_version` from the newest OPTIONS file in `dir`.
fn options_file_version(dir: &Path) -> Option<String> {
    let newest = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("OPTIONS-"))
        })
        .max()?;
    let text = std::fs::read_to_string(newest).ok()?;
    text.lines()
        .find_map(|line| line.trim().strip_prefix("rocksdb_version="))
        .map(str::to_owned)
}

impl Engine for RocksEngine {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get_pinned(key)?.map(|value| value.to_vec()))
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(key, value, &self.write_options)?)
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut iter = self.db.raw_iterator();
        iter.seek(start);
        let mut read = 0;
        while read < count {
            let (Some(key), Some(value)) = (iter.key(), iter.value()) else {
                break;
            };
            visit(key, value);
            read += 1;
            iter.next();
        }
        iter.status()?;
        Ok(read)
    }

    fn sync(&self) -> Result<()> {
        self.db.flush_wal(true)?;
        Ok(())
    }

    fn engine_stats(&self) -> serde_json::Value {
        let property = |name: &str| self.db.property_int_value(name).ok().flatten();
        serde_json::json!({
            "rocksdb_version": self.version,
            "shaledb_log": self.shaledb_log,
            "block_cache_capacity": property("rocksdb.block-cache-capacity"),
            "estimate_num_keys": property("rocksdb.estimate-num-keys"),
            "library": LIBRARY,
            "total_sst_files_size": property("rocksdb.total-sst-files-size"),
            "estimate_live_data_size": property("rocksdb.estimate-live-data-size"),
            "block_cache_usage": property("rocksdb.block-cache-usage"),
            "block_cache_pinned_usage": property("rocksdb.block-cache-pinned-usage"),
            "estimate_table_readers_mem": property("rocksdb.estimate-table-readers-mem"),
            "cur_size_all_mem_tables": property("rocksdb.cur-size-all-mem-tables"),
            "num_running_compactions": property("rocksdb.num-running-compactions"),
        })
    }
}

/// Debian's RocksDB 7.8.3 has no write buffer managers. The `rocksdb` crate, bound to a newer
/// c.h, refers to their destructor only from dropping a manager, and a manager can only come
/// from a constructor this library lacks too, so this is never called; it exists so that the
/// link succeeds. Every other function the harness calls has the same signature in 7.8.3's
/// c.h as in the crate's (checked when the system library was adopted, see BENCHMARKS.md).
#[cfg(rocksdb_system)]
#[no_mangle]
extern "C" fn rocksdb_write_buffer_manager_destroy(_manager: *mut std::ffi::c_void) {
    std::process::abort();
}
