//! LMDB through heed: a B+tree in a memory map. Its cache is the page cache, so the DRAM budget
//! cannot be enforced (the report says so); commits skip fsync (NO_SYNC) and `sync` forces one,
//! matching the others' interval durability.

use crate::engine::{Engine, EngineConfig, EngineSpec};
use anyhow::Result;
use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions};
use std::ops::Bound;

/// Address space reserved for the map (sparse; only written pages use disk).
const MAP_BYTES: usize = 256 << 30;

pub const SPEC: EngineSpec = EngineSpec {
    name: "lmdb",
    direct_io: false,
    describe: |_| {
        "LMDB (heed, bundled liblmdb): no compression (LMDB has none, whatever --compression \
         says), one write transaction per write, NO_SYNC with an explicit sync between phases, \
         memory-mapped reads through the page cache (no budget possible)"
            .to_string()
    },
    open: |config| Ok(Box::new(LmdbEngine::open(config)?)),
};

struct LmdbEngine {
    env: Env,
    db: Database<Bytes, Bytes>,
}

impl LmdbEngine {
    fn open(config: &EngineConfig) -> Result<Self> {
        let mut options = EnvOpenOptions::new();
        options.map_size(MAP_BYTES).max_dbs(1).max_readers(1024);
        // SAFETY: heed marks these unsafe because LMDB's guarantees rely on the caller: the
        // directory is opened by this one environment only (each engine has its own directory
        // and the harness opens it once at a time), and NO_SYNC only weakens durability, which
        // `sync` restores between phases.
        let env = unsafe {
            options.flags(EnvFlags::NO_SYNC);
            options.open(&config.dir)?
        };
        let mut transaction = env.write_txn()?;
        let db = env.create_database(&mut transaction, Some("usertable"))?;
        transaction.commit()?;
        Ok(LmdbEngine { env, db })
    }
}

impl Engine for LmdbEngine {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let transaction = self.env.read_txn()?;
        Ok(self.db.get(&transaction, key)?.map(<[u8]>::to_vec))
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut transaction = self.env.write_txn()?;
        self.db.put(&mut transaction, key, value)?;
        Ok(transaction.commit()?)
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let transaction = self.env.read_txn()?;
        let mut read = 0;
        // LMDB rejects empty keys, even as a bound; an empty start means "from the first key".
        let lower = if start.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Included(start)
        };
        let range = (lower, Bound::Unbounded);
        for item in self.db.range(&transaction, &range)?.take(count) {
            let (key, value) = item?;
            visit(key, value);
            read += 1;
        }
        Ok(read)
    }

    fn sync(&self) -> Result<()> {
        Ok(self.env.force_sync()?)
    }

    fn engine_stats(&self) -> serde_json::Value {
        let transaction = self.env.read_txn();
        let entries = transaction
            .ok()
            .and_then(|transaction| self.db.len(&transaction).ok());
        serde_json::json!({ "entries": entries })
    }
}
