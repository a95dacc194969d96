//! ShaleDB itself, with default options but the shared cache budget and the harness's
//! compression as its KVS's.

use crate::engine::{Engine, EngineConfig, EngineSpec};
use anyhow::Result;

pub const SPEC: EngineSpec = EngineSpec {
    name: "shaledb",
    direct_io: true,
    describe: |config| {
        format!(
            "ShaleDB {}: value cache {} MiB, durability interval 100 ms, 64 MiB segments, O_DIRECT, no cache warming after reopen, {}",
            env!("CARGO_PKG_VERSION"),
            config.cache_bytes >> 20,
            match config.compression {
                shaledb::Compression::None => "no compression".to_string(),
                compression => format!(
                    "KVS compression {compression} (each value stored compressed when that makes \
                     it smaller; the value cache holds values uncompressed)"
                ),
            }
        )
    },
    open: |config| Ok(Box::new(ShaleEngine::open(config)?)),
};

struct ShaleEngine {
    db: shaledb::Db,
    kvs: shaledb::Kvs,
}

/// The KVDB's and the KVS's options for `config`.
pub(crate) fn options(config: &EngineConfig) -> (shaledb::Options, shaledb::KvsOptions) {
    let options = shaledb::Options {
        cache_bytes: config.cache_bytes,
        // Every engine starts each workload with the cache its own reopen leaves: no
        // warm-keys file, as the peers have none (like for like; the server uses one).
        warm_keys_max_bytes: Some(0),
        ..shaledb::Options::default()
    };
    let kvs_options = shaledb::KvsOptions {
        compression: config.compression,
        ..shaledb::KvsOptions::default()
    };
    (options, kvs_options)
}

impl ShaleEngine {
    fn open(config: &EngineConfig) -> Result<Self> {
        let (options, kvs_options) = options(config);
        let db = shaledb::Db::open(&config.dir, options)?;
        let kvs = db.kvs_with_options("usertable", kvs_options)?;
        // An existing KVS keeps its options: data loaded with another compression would be
        // measured and reported as this one.
        anyhow::ensure!(
            kvs.options().compression == config.compression,
            "{} holds data stored with compression {}, not {}: use a fresh data directory",
            config.dir.display(),
            kvs.options().compression,
            config.compression
        );
        Ok(ShaleEngine { db, kvs })
    }
}

impl Engine for ShaleEngine {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.kvs.get(key)?.map(|value| value.to_vec()))
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.kvs.put(key, value)?)
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut read = 0;
        for item in self.kvs.range(start..).will_take(count).take(count) {
            let (key, value) = item?;
            visit(&key, &value);
            read += 1;
        }
        Ok(read)
    }

    fn sync(&self) -> Result<()> {
        Ok(self.db.sync()?)
    }

    fn engine_stats(&self) -> serde_json::Value {
        let stats = self.db.stats();
        let mut value = serde_json::to_value(&stats).unwrap_or(serde_json::Value::Null);
        value["write_amplification"] = stats.write_amplification().into();
        value["space_amplification"] = stats.space_amplification().into();
        value
    }
}
