//! RocksDB through the `rocksdb` crate, as two peers: `rocksdb`, configured as RocksDB ships
//! (index and filter blocks held outside the block cache, their memory counted in the
//! process's RSS), and `rocksdb-tuned`, configured as RocksDB's tuning guide recommends for
//! point reads over a data set larger than memory. ShaleDB's ratios are read against the
//! better of the two. Both compress as ShaleDB does (`--compression`: none, or lz4 on every
//! level), with a bloom filter of 10 bits per key and direct I/O for reads, flushes and
//! compactions.
//!
//! The library is either the one the `rocksdb` crate bundles (built from C++ source) or, when
//! the build sets `ROCKSDB_LIB_DIR`, the system's (Debian's librocksdb, the same library as
//! Debian's `db_bench`): see `build.rs` and `scripts/bench`. The version that ran is read from
//! the OPTIONS file RocksDB writes and reported with the engine's statistics.

use crate::engine::{Engine, EngineConfig, EngineSpec};
use anyhow::Result;
use rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, Cache, DBCompressionType, Options, WriteOptions, DB,
};
use std::path::Path;

/// Which library this build links (set by `build.rs`).
const LIBRARY: &str = env!("SHALE_ROCKSDB_LIBRARY");

pub const SPEC: EngineSpec = EngineSpec {
    name: "rocksdb",
    direct_io: true,
    describe: |config| describe(config, Tuning::AsShipped),
    open: |config| Ok(Box::new(RocksEngine::open(config, Tuning::AsShipped)?)),
};

pub const TUNED_SPEC: EngineSpec = EngineSpec {
    name: "rocksdb-tuned",
    direct_io: true,
    describe: |config| describe(config, Tuning::Tuned),
    open: |config| Ok(Box::new(RocksEngine::open(config, Tuning::Tuned)?)),
};

#[derive(Clone, Copy)]
enum Tuning {
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

/// Memtable size of the tuned peer (RocksDB's default is 64 MiB, two of them).
const TUNED_WRITE_BUFFER_BYTES: usize = 128 << 20;
const TUNED_WRITE_BUFFERS: i32 = 3;

fn background_jobs(config: &EngineConfig) -> i32 {
    config.threads.clamp(2, 4) as i32
}

/// RocksDB's compression for the harness's: the same on every level (`compression` with no
/// per-level or bottommost override).
fn compression_type(compression: shaledb::Compression) -> DBCompressionType {
    match compression {
        shaledb::Compression::None => DBCompressionType::None,
        shaledb::Compression::Lz4 => DBCompressionType::Lz4,
    }
}

fn describe(config: &EngineConfig, tuning: Tuning) -> String {
    let compression = match config.compression {
        shaledb::Compression::None => "no compression".to_string(),
        compression => format!("compression {compression} on every level"),
    };
    let common = format!(
        "RocksDB ({LIBRARY}): {compression}, bloom filter 10 bits/key, LRU block cache {} MiB, \
         use_direct_reads, use_direct_io_for_flush_and_compaction (compaction readahead 2 MiB, \
         RocksDB's default under direct I/O), max_background_jobs {}, WAL on with sync=false",
        config.cache_bytes >> 20,
        background_jobs(config)
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

struct RocksEngine {
    db: DB,
    write_options: WriteOptions,
    /// The RocksDB version that wrote the OPTIONS file at open.
    version: Option<String>,
}

impl RocksEngine {
    fn open(config: &EngineConfig, tuning: Tuning) -> Result<Self> {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(config.cache_bytes as usize));
        table.set_bloom_filter(10.0, false);
        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_compression_type(compression_type(config.compression));
        options.set_use_direct_reads(true);
        options.set_use_direct_io_for_flush_and_compaction(true);
        options.set_max_background_jobs(background_jobs(config));
        match tuning {
            Tuning::AsShipped => table.set_cache_index_and_filter_blocks(false),
            Tuning::Tuned => {
                table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
                table.set_partition_filters(true);
                table.set_metadata_block_size(4096);
                table.set_cache_index_and_filter_blocks(true);
                table.set_pin_top_level_index_and_filter(true);
                table.set_pin_l0_filter_and_index_blocks_in_cache(true);
                options.set_write_buffer_size(TUNED_WRITE_BUFFER_BYTES);
                options.set_max_write_buffer_number(TUNED_WRITE_BUFFERS);
                options.set_level_compaction_dynamic_level_bytes(true);
                options.set_optimize_filters_for_hits(true);
                options.set_bytes_per_sync(1 << 20);
                // WAL and memtable writes overlap: db_bench turns this on by default, and on
                // this machine it wrote 1.4x faster (fillrandom, 1M keys, 4 threads).
                options.set_enable_pipelined_write(true);
            }
        }
        options.set_block_based_table_factory(&table);
        let db = DB::open(&options, &config.dir)?;
        Ok(RocksEngine {
            db,
            write_options: WriteOptions::default(),
            version: options_file_version(&config.dir),
        })
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
