//! The results of a suite as plain data: one record per run, and the report that collects them
//! (what results.json serializes, and what the Markdown report and the charts read).

use crate::measure::LatencySummary;
use std::collections::BTreeMap;

/// The engine every ratio is computed for.
pub const SUBJECT: &str = "shaledb";

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

/// A workload's name in the results: `a`, or `a at 20000/s` when run at an offered load.
pub fn workload_label(name: char, target: Option<f64>) -> String {
    match target {
        Some(ops) => format!("{name} at {ops:.0}/s"),
        None => name.to_string(),
    }
}

/// The workload and offered load a label of [`workload_label`] names.
pub fn parse_workload_label(label: &str) -> (&str, Option<f64>) {
    match label.split_once(" at ") {
        Some((name, rest)) => (name, rest.trim_end_matches("/s").parse().ok()),
        None => (label, None),
    }
}

/// Everything a suite produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SuiteReport {
    pub machine: serde_json::Value,
    pub params: serde_json::Value,
    pub runs: Vec<RunResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_labels_name_the_offered_load_and_read_back() {
        assert_eq!(workload_label('a', None), "a");
        assert_eq!(workload_label('a', Some(20000.0)), "a at 20000/s");
        assert_eq!(parse_workload_label("a at 20000/s"), ("a", Some(20000.0)));
        assert_eq!(parse_workload_label("a"), ("a", None));
        assert_eq!(
            parse_workload_label("readwhilewriting"),
            ("readwhilewriting", None)
        );
    }
}
