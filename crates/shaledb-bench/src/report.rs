//! The Markdown report: throughput per round with paired ratios, latency percentiles,
//! efficiency figures, and YCSB's own text format so existing parsers read the runs.

pub use crate::results::SUBJECT;
use crate::results::{RunResult, SuiteReport};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Median of `values` (which must not be empty).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[middle - 1] + values[middle]) / 2.0
    } else {
        values[middle]
    }
}

/// A group of runs of one workload at one thread count, in the order they ran.
pub fn groups(report: &SuiteReport) -> Vec<((String, usize), Vec<&RunResult>)> {
    let mut order: Vec<(String, usize)> = Vec::new();
    let mut grouped: BTreeMap<(String, usize), Vec<&RunResult>> = BTreeMap::new();
    for run in &report.runs {
        let id = (run.workload.clone(), run.threads);
        if !grouped.contains_key(&id) {
            order.push(id.clone());
        }
        grouped.entry(id).or_default().push(run);
    }
    order
        .into_iter()
        .map(|id| {
            let runs = grouped.remove(&id).unwrap_or_default();
            (id, runs)
        })
        .collect()
}

/// The run of `engine` with the median throughput among `runs`.
pub fn median_run<'a>(runs: &[&'a RunResult], engine: &str) -> Option<&'a RunResult> {
    let mut mine: Vec<&RunResult> = runs
        .iter()
        .copied()
        .filter(|run| run.engine == engine)
        .collect();
    mine.sort_by(|left, right| left.ops_per_sec.total_cmp(&right.ops_per_sec));
    mine.get(mine.len() / 2).copied()
}

/// What ShaleDB is compared with: each peer engine alone, and for an engine run in several
/// configurations (`rocksdb`, `rocksdb-tuned`: the part of the name before `-`), the better of
/// them round by round, which is the ratio that counts.
pub fn comparisons(engines: &[String]) -> Vec<(String, Vec<String>)> {
    let peers: Vec<&String> = engines.iter().filter(|name| *name != SUBJECT).collect();
    let family = |name: &str| name.split('-').next().unwrap_or(name).to_owned();
    let mut out: Vec<(String, Vec<String>)> = peers
        .iter()
        .map(|peer| (peer.to_string(), vec![peer.to_string()]))
        .collect();
    let mut families: Vec<String> = peers.iter().map(|peer| family(peer)).collect();
    families.dedup();
    for name in families {
        let members: Vec<String> = peers
            .iter()
            .filter(|peer| family(peer) == name)
            .map(|peer| peer.to_string())
            .collect();
        if members.len() > 1 {
            out.push((format!("best {name}"), members));
        }
    }
    out
}

/// Paired throughput ratios of [`SUBJECT`] over the best of `peers` in the same round, one per
/// round, and their median.
pub fn paired_ratios(runs: &[&RunResult], peers: &[String]) -> Option<(Vec<f64>, f64)> {
    let mut ratios = Vec::new();
    for run in runs.iter().filter(|run| run.engine == SUBJECT) {
        let best = runs
            .iter()
            .filter(|other| peers.contains(&other.engine) && other.round == run.round)
            .map(|other| other.ops_per_sec)
            .fold(0.0, f64::max);
        if best > 0.0 {
            ratios.push(run.ops_per_sec / best);
        }
    }
    if ratios.is_empty() {
        return None;
    }
    let middle = median(&mut ratios.clone());
    Some((ratios, middle))
}

/// The engines of `runs`, in the order they first ran.
pub fn engines_in<'a>(runs: impl IntoIterator<Item = &'a RunResult>) -> Vec<String> {
    let mut engines: Vec<String> = Vec::new();
    for run in runs {
        if !engines.contains(&run.engine) {
            engines.push(run.engine.clone());
        }
    }
    engines
}

fn mib(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

pub fn markdown(report: &SuiteReport, command: &str) -> String {
    let mut out = String::new();
    let params = &report.params;
    let engines = engines_in(&report.runs);
    let _ = writeln!(
        out,
        "# ShaleDB benchmark report: {} suite\n",
        params["suite"].as_str().unwrap_or("?")
    );
    let _ = writeln!(out, "Command: `{command}`\n");
    let _ = writeln!(
        out,
        "Machine: {} CPUs ({}), {}, kernel {}\n",
        report.machine["cpus"],
        report.machine["cpu_model"].as_str().unwrap_or("?"),
        report.machine["memory"].as_str().unwrap_or("?"),
        report.machine["kernel"].as_str().unwrap_or("?")
    );
    let _ = writeln!(
        out,
        "Data set {:.0} MiB, DRAM (cache) budget per engine {:.0} MiB: the data set is {:.1}x the budget. \
         Rounds: {}. Engines alternate within each round; the device probe is {} threads of 4 KiB O_DIRECT \
         random reads.\n",
        mib(params["dataset_bytes"].as_f64().unwrap_or(0.0)),
        mib(params["common"]["cache_bytes"].as_f64().unwrap_or(0.0)),
        params["dataset_to_cache_ratio"].as_f64().unwrap_or(0.0),
        params["common"]["rounds"],
        params["common"]["probe_threads"]
    );
    let value_ratio = params["db"]["compression_ratio"]
        .as_f64()
        .or(params["ycsb"]["shape"]["compression_ratio"].as_f64());
    if let Some(ratio) = value_ratio {
        let _ = writeln!(
            out,
            "Values compress to about {ratio} of their size (as db_bench makes them; 1: \
             incompressible). Compression asked of the engines: {} (each engine's line below \
             says what it does).\n",
            params["common"]["compression"].as_str().unwrap_or("?")
        );
    }
    let _ = writeln!(out, "## Engines\n");
    if let Some(described) = params["engines"].as_object() {
        for (name, details) in described {
            let direct = if details["direct_io"].as_bool() == Some(true) {
                "direct I/O"
            } else {
                "**no direct I/O: the page cache adds unbudgeted caching**"
            };
            let _ = writeln!(
                out,
                "- **{name}** ({direct}): {}",
                details["options"].as_str().unwrap_or("")
            );
        }
    }
    if let Some(calibrations) = params["equal_rss"].as_array() {
        let _ = writeln!(
            out,
            "\n## Equal memory\n\nAfter the load, each engine read the data for {} s; each peer's cache was \
             then set so that its engine RSS equals ShaleDB's (cache -> engine RSS at each step):\n",
            params["common"]["equal_rss_secs"]
        );
        for calibration in calibrations {
            let steps: Vec<String> = calibration["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|step| {
                    format!(
                        "{:.0} MiB -> {:.0} MiB",
                        mib(step[0].as_f64().unwrap_or(0.0)),
                        mib(step[1].as_f64().unwrap_or(0.0))
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "- **{}**: cache {:.0} MiB ({})",
                calibration["engine"].as_str().unwrap_or("?"),
                mib(calibration["cache_bytes"].as_f64().unwrap_or(0.0)),
                steps.join(", ")
            );
        }
    }
    let groups = groups(report);
    let _ = writeln!(out, "\n## Throughput (ops/s)\n");
    let rounds = report.runs.iter().map(|run| run.round).max().unwrap_or(1);
    let _ = write!(out, "| workload | threads | engine |");
    for round in 1..=rounds {
        let _ = write!(out, " round {round} |");
    }
    let _ = writeln!(out, " median | device IOPS before/after |");
    let _ = writeln!(out, "|{}", "---|".repeat(rounds + 5));
    for ((workload, threads), runs) in &groups {
        for engine in &engines {
            let mine: Vec<&&RunResult> = runs.iter().filter(|run| &run.engine == engine).collect();
            if mine.is_empty() {
                continue;
            }
            let _ = write!(out, "| {workload} | {threads} | {engine} |");
            for round in 1..=rounds {
                match mine.iter().find(|run| run.round == round) {
                    Some(run) => {
                        let _ = write!(out, " {:.0} |", run.ops_per_sec);
                    }
                    None => out.push_str(" |"),
                }
            }
            let mut values: Vec<f64> = mine.iter().map(|run| run.ops_per_sec).collect();
            let probes: Vec<String> = mine
                .iter()
                .filter_map(|run| {
                    Some(format!(
                        "{:.0}/{:.0}",
                        run.device_probe_iops_before?, run.device_probe_iops_after?
                    ))
                })
                .collect();
            let _ = writeln!(out, " {:.0} | {} |", median(&mut values), probes.join(", "));
        }
    }
    let comparisons = comparisons(&engines);
    if engines.iter().any(|engine| engine == SUBJECT) && !comparisons.is_empty() {
        let _ = writeln!(
            out,
            "\n## Paired ratios (ShaleDB ops/s / peer ops/s, per round, and their median; \
             \"best X\" is the better configuration of X in each round, the ratio that counts)\n"
        );
        let _ = writeln!(
            out,
            "| workload | threads | peer | per round | median |\n|---|---|---|---|---|"
        );
        for ((workload, threads), runs) in &groups {
            for (label, peers) in &comparisons {
                if let Some((ratios, middle)) = paired_ratios(runs, peers) {
                    let each: Vec<String> =
                        ratios.iter().map(|ratio| format!("{ratio:.2}")).collect();
                    let _ = writeln!(
                        out,
                        "| {workload} | {threads} | {label} | {} | **{middle:.2}x** |",
                        each.join(", ")
                    );
                }
            }
        }
    }
    let _ = writeln!(out, "\n## Latency (µs, median-throughput round)\n");
    let _ = writeln!(
        out,
        "| workload | threads | engine | operation | count | avg | p50 | p95 | p99 | p99.9 | p99.99 | max |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for ((workload, threads), runs) in &groups {
        for engine in &engines {
            let Some(run) = median_run(runs, engine) else {
                continue;
            };
            for (operation, latency) in &run.latency_us {
                let _ = writeln!(
                    out,
                    "| {workload} | {threads} | {engine} | {operation} | {} | {:.1} | {} | {} | {} | {} | {} | {} |",
                    latency.count, latency.avg, latency.p50, latency.p95, latency.p99, latency.p999, latency.p9999, latency.max
                );
            }
        }
    }
    let _ = writeln!(out, "\n## Efficiency (median-throughput round)\n");
    let _ = writeln!(
        out,
        "Device bytes come from /proc/self/io for the whole process during the run, the same way for every engine; bytes written are `write_bytes` less `cancelled_write_bytes` (page-cache data deleted before it reached the device).\n\n\
         Engine RSS is the process's peak RSS during the run less its RSS just before the engine opened \
         (memory freed by earlier runs returned to the kernel first): the engine's index, caches and buffers.\n\n\
         | workload | threads | engine | device bytes written / user byte | device bytes written / op | device bytes read / op | CPU s / 1000 ops | cache MiB | engine RSS MiB | peak RSS MiB | disk bytes / live byte |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for ((workload, threads), runs) in &groups {
        for engine in &engines {
            let Some(run) = median_run(runs, engine) else {
                continue;
            };
            let ops = run.operations.max(1) as f64;
            let write_amplification = if run.user_bytes_written > 0 {
                format!(
                    "{:.2}",
                    run.device_bytes_written as f64 / run.user_bytes_written as f64
                )
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "| {workload} | {threads} | {engine} | {write_amplification} | {:.0} | {:.0} | {:.4} | {:.0} | {:.0} | {:.0} | {:.2} |",
                run.device_bytes_written as f64 / ops,
                run.device_bytes_read as f64 / ops,
                run.cpu_seconds_per_1000_ops,
                mib(run.cache_bytes as f64),
                mib(run.engine_rss_bytes as f64),
                mib(run.peak_rss_bytes as f64),
                run.disk_bytes as f64 / run.live_bytes.max(1) as f64
            );
        }
    }
    let _ = writeln!(out, "\n## YCSB-format output (every run)\n\n```");
    for run in &report.runs {
        out.push_str(&ycsb_text(run));
    }
    let _ = writeln!(out, "```");
    out
}

/// One run in YCSB's text output format.
pub fn ycsb_text(run: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# engine={} suite={} workload={} threads={} round={}",
        run.engine, run.suite, run.workload, run.threads, run.round
    );
    let _ = writeln!(
        out,
        "[OVERALL], RunTime(ms), {:.0}",
        run.elapsed_secs * 1000.0
    );
    let _ = writeln!(
        out,
        "[OVERALL], Throughput(ops/sec), {:.3}",
        run.ops_per_sec
    );
    for (operation, latency) in &run.latency_us {
        let _ = writeln!(out, "[{operation}], Operations, {}", latency.count);
        let _ = writeln!(out, "[{operation}], AverageLatency(us), {:.3}", latency.avg);
        let _ = writeln!(out, "[{operation}], MinLatency(us), {}", latency.min);
        let _ = writeln!(out, "[{operation}], MaxLatency(us), {}", latency.max);
        let _ = writeln!(
            out,
            "[{operation}], 95thPercentileLatency(us), {}",
            latency.p95
        );
        let _ = writeln!(
            out,
            "[{operation}], 99thPercentileLatency(us), {}",
            latency.p99
        );
        let _ = writeln!(
            out,
            "[{operation}], 99.9PercentileLatency(us), {}",
            latency.p999
        );
        let _ = writeln!(out, "[{operation}], Return=OK, {}", latency.count);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(engine: &str, round: usize, ops_per_sec: f64) -> RunResult {
        RunResult {
            engine: engine.into(),
            suite: "ycsb".into(),
            workload: "a".into(),
            threads: 4,
            round,
            operations: 1000,
            elapsed_secs: 1.0,
            ops_per_sec,
            latency_us: BTreeMap::new(),
            device_bytes_written: 0,
            device_bytes_read: 0,
            user_bytes_written: 0,
            cpu_seconds: 0.0,
            cpu_seconds_per_1000_ops: 0.0,
            peak_rss_bytes: 0,
            engine_rss_bytes: 0,
            disk_bytes: 0,
            live_bytes: 0,
            cache_bytes: 0,
            timeline: Vec::new(),
            device_probe_iops_before: None,
            device_probe_iops_after: None,
            engine_stats: serde_json::Value::Null,
        }
    }

    #[test]
    fn ratios_count_against_the_better_configuration_of_a_peer_in_each_round() {
        let runs = [
            run("shaledb", 1, 300.0),
            run("rocksdb", 1, 100.0),
            run("rocksdb-tuned", 1, 150.0),
            run("lmdb", 1, 60.0),
            run("shaledb", 2, 200.0),
            run("rocksdb", 2, 100.0),
            run("rocksdb-tuned", 2, 80.0),
            run("lmdb", 2, 50.0),
        ];
        let engines = engines_in(&runs);
        assert_eq!(engines, ["shaledb", "rocksdb", "rocksdb-tuned", "lmdb"]);
        let comparisons = comparisons(&engines);
        let labels: Vec<&str> = comparisons
            .iter()
            .map(|(label, _)| label.as_str())
            .collect();
        assert_eq!(labels, ["rocksdb", "rocksdb-tuned", "lmdb", "best rocksdb"]);
        let refs: Vec<&RunResult> = runs.iter().collect();
        let (best, _) = comparisons.last().unwrap();
        assert_eq!(best, "best rocksdb");
        let (ratios, median) = paired_ratios(&refs, &comparisons[3].1).unwrap();
        assert_eq!(ratios, [2.0, 2.0]);
        assert_eq!(median, 2.0);
        let (ratios, _) = paired_ratios(&refs, &["rocksdb".to_owned()]).unwrap();
        assert_eq!(ratios, [3.0, 2.0]);
        assert!(paired_ratios(&refs, &["fjall".to_owned()]).is_none());
    }
}
