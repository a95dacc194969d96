//! fjall, an LSM-tree engine in Rust, with its block cache set to the shared budget and the
//! harness's compression (fjall's own default is lz4). fjall does buffered I/O only, so the page
//! cache adds caching beyond the budget (the report says so).

use crate::engine::{Engine, EngineConfig, EngineSpec};
use anyhow::Result;
use fjall::{
    CompressionType, Config, Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode,
};

pub const SPEC: EngineSpec = EngineSpec {
    name: "fjall",
    direct_io: false,
    describe: |config| {
        format!(
            "fjall 2 (LSM, default options but compression): {}, block cache {} MiB, journal \
             on, buffered I/O",
            match config.compression {
                shaledb::Compression::None => "no compression".to_string(),
                compression => format!("compression {compression}"),
            },
            config.cache_bytes >> 20
        )
    },
    open: |config| Ok(Box::new(FjallEngine::open(config)?)),
};

struct FjallEngine {
    keyspace: Keyspace,
    partition: PartitionHandle,
}

impl FjallEngine {
    fn open(config: &EngineConfig) -> Result<Self> {
        let keyspace = Config::new(&config.dir)
            .cache_size(config.cache_bytes)
            .open()?;
        let compression = match config.compression {
            shaledb::Compression::None => CompressionType::None,
            shaledb::Compression::Lz4 => CompressionType::Lz4,
        };
        let partition = keyspace.open_partition(
            "usertable",
            PartitionCreateOptions::default().compression(compression),
        )?;
        Ok(FjallEngine {
            keyspace,
            partition,
        })
    }
}

impl Engine for FjallEngine {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.partition.get(key)?.map(|value| value.to_vec()))
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.partition.insert(key, value)?)
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut read = 0;
        for item in self.partition.range(start.to_vec()..).take(count) {
            let (key, value) = item?;
            visit(&key, &value);
            read += 1;
        }
        Ok(read)
    }

    fn sync(&self) -> Result<()> {
        Ok(self.keyspace.persist(PersistMode::SyncAll)?)
    }

    fn engine_stats(&self) -> serde_json::Value {
        serde_json::json!({
            "disk_space": self.keyspace.disk_space(),
            "journal_count": self.keyspace.journal_count(),
        })
    }
}
