//! RocksDB through the `rocksdb` crate (bundled RocksDB), configured as the papers' baseline:
//! default leveled compaction, WAL on, bloom filters, an LRU block cache of the shared budget
//! holding index and filter blocks too, and direct I/O for reads, flushes and compactions.

use crate::engine::{Engine, EngineConfig, EngineSpec};
use anyhow::Result;
use rocksdb::{BlockBasedOptions, Cache, Options, WriteOptions, DB};

pub const SPEC: EngineSpec = EngineSpec {
    name: "rocksdb",
    direct_io: true,
    describe: |config| {
        format!(
            "RocksDB (rust-rocksdb, bundled librocksdb): leveled compaction (defaults), WAL on with \
             sync=false, LRU block cache {} MiB with cache_index_and_filter_blocks, bloom filter \
             10 bits/key, use_direct_reads, use_direct_io_for_flush_and_compaction, \
             max_background_jobs {}, lz4 compression (default), write_buffer_size 64 MiB (default)",
            config.cache_bytes >> 20,
            config.threads.clamp(2, 4)
        )
    },
    open: |config| Ok(Box::new(RocksEngine::open(config)?)),
};

struct RocksEngine {
    db: DB,
    write_options: WriteOptions,
}

impl RocksEngine {
    fn open(config: &EngineConfig) -> Result<Self> {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(config.cache_bytes as usize));
        table.set_cache_index_and_filter_blocks(true);
        table.set_bloom_filter(10.0, false);
        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_block_based_table_factory(&table);
        options.set_use_direct_reads(true);
        options.set_use_direct_io_for_flush_and_compaction(true);
        options.set_max_background_jobs(config.threads.clamp(2, 4) as i32);
        let db = DB::open(&options, &config.dir)?;
        Ok(RocksEngine {
            db,
            write_options: WriteOptions::default(),
        })
    }
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
            "total_sst_files_size": property("rocksdb.total-sst-files-size"),
            "estimate_live_data_size": property("rocksdb.estimate-live-data-size"),
            "block_cache_usage": property("rocksdb.block-cache-usage"),
            "cur_size_all_mem_tables": property("rocksdb.cur-size-all-mem-tables"),
            "num_running_compactions": property("rocksdb.num-running-compactions"),
        })
    }
}
