//! The one trait every benchmarked engine implements, the config an engine is opened with and
//! the spec it is registered by. The registry itself is `engines::ENGINES`.

use anyhow::Result;
use std::path::PathBuf;

/// What every engine is given: the same directory layout, DRAM budget and thread count.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// An empty or previously loaded directory owned by this engine.
    pub dir: PathBuf,
    /// DRAM budget for the engine's cache of data, in bytes.
    pub cache_bytes: u64,
    /// Client threads that will use the engine at once.
    pub threads: usize,
    /// Compression of the stored data, for every engine that can compress (`--compression`).
    pub compression: shaledb::Compression,
}

/// A key-value engine under test. Shared by all client threads.
pub trait Engine: Send + Sync {
    /// Reads `key`'s value.
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Inserts or replaces `key`'s value.
    fn write(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Reads up to `count` records in key order starting at `start`, passing each to `visit`;
    /// returns how many it read.
    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize>;
    /// Makes everything written durable (between phases).
    fn sync(&self) -> Result<()>;
    /// The engine's own counters, as JSON (may be `null`).
    fn engine_stats(&self) -> serde_json::Value;
}

/// A registered engine: its name, a description of the exact options it runs with, and how to
/// open it.
pub struct EngineSpec {
    pub name: &'static str,
    /// Whether it reads and writes with direct I/O, so the page cache adds no hidden cache.
    pub direct_io: bool,
    pub describe: fn(&EngineConfig) -> String,
    pub open: fn(&EngineConfig) -> Result<Box<dyn Engine>>,
}
