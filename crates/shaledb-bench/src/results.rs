//! The results of a suite as plain data: one record per run, and the report that collects them
//! (what results.json serializes, and what the Markdown report and the charts read).

use crate::measure::LatencySummary;
use std::collections::BTreeMap;

/// One engine x workload x thread count x round.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunResult {
    pub engine: String,
    pub suite: String,
    pub workload: String,
    pub threads: usize,
    pub round: usize,
    pub operations: u64,
    pub elapsed_secs: f64,
    pub ops_per_sec: f64,
    /// Per operation type (YCSB names), in microseconds.
    pub latency_us: BTreeMap<String, LatencySummary>,
    /// Bytes the process read from / wrote to the block layer during the run (/proc/self/io).
    pub device_bytes_written: u64,
    pub device_bytes_read: u64,
    /// Key and value bytes the workload wrote.
    pub user_bytes_written: u64,
    pub cpu_seconds: f64,
    pub cpu_seconds_per_1000_ops: f64,
    pub peak_rss_bytes: u64,
    /// Peak RSS less the RSS just before the engine opened (freed memory returned first): the
    /// memory this engine held, index, caches and buffers included.
    pub engine_rss_bytes: u64,
    /// Bytes of the engine's files after the run, and the logical bytes of live records.
    pub disk_bytes: u64,
    pub live_bytes: u64,
    pub cache_bytes: u64,
    /// Operations completed in each whole second of the run.
    pub timeline: Vec<u64>,
    pub device_probe_iops_before: Option<f64>,
    pub device_probe_iops_after: Option<f64>,
    pub engine_stats: serde_json::Value,
}

/// Everything a suite produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SuiteReport {
    pub machine: serde_json::Value,
    pub params: serde_json::Value,
    pub runs: Vec<RunResult>,
}
