//! Running suites side by side: every engine gets the same data set, thread count and DRAM
//! budget, and engines alternate within each round (A, B, A, B, ...), with the device's
//! random-read IOPS probed before and after each round, so a ratio is always read from paired
//! runs minutes apart at most.

use crate::dbbench::{self, DbBenchParams};
use crate::engine::{Engine, EngineConfig, EngineSpec};
use crate::engines;
use crate::measure;
use crate::results::{workload_label, RunResult, SuiteReport};
use crate::runner::{CommonParams, Runner};
use crate::values::{self, PieceWindow};
use crate::ycsb::generator::key_name;
use crate::ycsb::workload::{Distribution, RecordShape, RunState, WorkloadSpec};
use anyhow::{Context, Result};
use rand::Rng;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Parameters of the YCSB suite.
#[derive(Debug, Clone, serde::Serialize)]
pub struct YcsbParams {
    pub workloads: Vec<char>,
    pub records: u64,
    pub operations: u64,
    pub duration_secs: Option<f64>,
    pub shape: RecordShape,
    /// Offered loads to run each workload at, ops/s across all threads (YCSB's -target); `None`
    /// is unthrottled. More than one is a sweep: latency compared at equal offered load.
    pub targets: Vec<Option<f64>>,
    /// Overrides each workload's request distribution.
    pub distribution: Option<Distribution>,
}

pub fn engines(names: &[String]) -> Result<Vec<&'static EngineSpec>> {
    names.iter().map(|name| engines::find(name)).collect()
}

fn machine() -> serde_json::Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .next()
        .map(str::to_string);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|text| text.trim().to_string())
        .ok();
    serde_json::json!({
        "cpus": std::thread::available_parallelism().map(|count| count.get()).unwrap_or(1),
        "cpu_model": model,
        "memory": memory,
        "kernel": kernel,
        "hostname": std::fs::read_to_string("/proc/sys/kernel/hostname").map(|text| text.trim().to_string()).ok(),
    })
}

fn describe_engines(specs: &[&EngineSpec], common: &CommonParams) -> serde_json::Value {
    specs
        .iter()
        .map(|spec| {
            let config = EngineConfig {
                dir: common.data_dir.join(spec.name),
                cache_bytes: common.cache_bytes,
                threads: common.threads.iter().copied().max().unwrap_or(1),
                compression: common.compression,
            };
            (
                spec.name.to_string(),
                serde_json::json!({"options": (spec.describe)(&config), "direct_io": spec.direct_io}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// The YCSB suite: load each engine, then run each workload at each thread count, in rounds.
pub fn run_ycsb(common: &CommonParams, params: &YcsbParams) -> Result<SuiteReport> {
    values::check_ratio(params.shape.compression_ratio)?;
    let specs = engines(&common.engines)?;
    let mut runner = Runner {
        common,
        suite: "ycsb",
        runs: Vec::new(),
        cache_bytes: BTreeMap::new(),
    };
    let load_threads = common.threads.iter().copied().max().unwrap_or(1);
    let record_len = (key_name(0).len() + params.shape.encoded_len()) as u64;
    let loaded_bytes = params.records * record_len;
    for spec in &specs {
        runner.measure(
            spec,
            "load",
            load_threads,
            1,
            true,
            || loaded_bytes,
            |engine, monitor, _fresh_so_never_warmed| {
                let next = AtomicU64::new(0);
                measure::run_phase(
                    load_threads,
                    params.records,
                    None,
                    None,
                    monitor,
                    |_, _, _| {
                        let keynum = next.fetch_add(1, Ordering::Relaxed);
                        engine.write(
                            key_name(keynum).as_bytes(),
                            &params.shape.build(&mut rand::thread_rng()),
                        )?;
                        Ok(measure::OpKind::Insert)
                    },
                )
            },
        )?;
    }
    let equal_rss = if common.equal_rss_secs > 0.0 {
        let calibrations = runner.equalize_rss(
            &specs,
            load_threads,
            loaded_bytes,
            |engine, monitor, duration| {
                measure::run_phase(
                    load_threads,
                    u64::MAX,
                    Some(duration),
                    None,
                    monitor,
                    |_, _, _| {
                        let keynum = rand::thread_rng().gen_range(0..params.records);
                        engine.read(key_name(keynum).as_bytes())?;
                        Ok(measure::OpKind::Read)
                    },
                )
            },
        )?;
        Some(calibrations)
    } else {
        None
    };
    // Inserts of D and E grow each engine's data set by however many it inserted; later
    // workloads see that engine's grown set, as in YCSB.
    let mut record_counts: BTreeMap<&str, u64> = specs
        .iter()
        .map(|spec| (spec.name, params.records))
        .collect();
    for &name in &params.workloads {
        let mut spec = WorkloadSpec::core(name)?;
        if let Some(distribution) = params.distribution {
            spec.distribution = distribution;
        }
        let mut grown = record_counts.clone();
        for (&threads, &target) in common
            .threads
            .iter()
            .flat_map(|threads| params.targets.iter().map(move |target| (threads, target)))
        {
            let label = workload_label(name, target);
            runner.rounds(|runner, round| {
                for engine_spec in &specs {
                    let state = RunState::new(
                        spec.clone(),
                        params.shape,
                        record_counts[engine_spec.name],
                        params.operations,
                    );
                    runner.measure(
                        engine_spec,
                        &label,
                        threads,
                        round,
                        false,
                        || (state.inserts.last_value() + 1) * record_len,
                        |engine, monitor, phase| {
                            measure::run_phase(
                                threads,
                                params.operations,
                                phase
                                    .duration_or(params.duration_secs.map(Duration::from_secs_f64)),
                                target,
                                monitor,
                                |_, _, recorder| {
                                    state.operation(engine, &mut rand::thread_rng(), recorder)
                                },
                            )
                        },
                    )?;
                    let engine_grown = grown
                        .get_mut(engine_spec.name)
                        .expect("every engine is counted");
                    *engine_grown = (*engine_grown).max(state.inserts.last_value() + 1);
                }
                Ok(())
            })?;
        }
        record_counts = grown;
    }
    let mut report = suite_report(
        "ycsb",
        serde_json::to_value(params)?,
        loaded_bytes,
        common,
        &specs,
        runner.runs,
    );
    report.params["equal_rss"] = serde_json::to_value(equal_rss)?;
    Ok(report)
}

/// The db_bench suite: each benchmark at each thread count, in rounds.
pub fn run_dbbench(common: &CommonParams, params: &DbBenchParams) -> Result<SuiteReport> {
    values::check_ratio(params.compression_ratio)?;
    let specs = engines(&common.engines)?;
    if common.equal_rss_secs > 0.0 {
        anyhow::bail!("equal RSS calibrates on YCSB's loaded records: use it with the ycsb suite");
    }
    let mut runner = Runner {
        common,
        suite: "db",
        runs: Vec::new(),
        cache_bytes: BTreeMap::new(),
    };
    let values = PieceWindow::new(params.value_size, params.compression_ratio);
    for benchmark in &params.benchmarks {
        let benchmark = dbbench::Benchmark::parse(benchmark)?;
        for &threads in &common.threads {
            runner.rounds(|runner, round| {
                for spec in &specs {
                    dbbench::run(runner, spec, benchmark, params, &values, threads, round)?;
                }
                Ok(())
            })?;
        }
    }
    let dataset_bytes = params.num * (params.key_size + params.value_size) as u64;
    Ok(suite_report(
        "db",
        serde_json::to_value(params)?,
        dataset_bytes,
        common,
        &specs,
        runner.runs,
    ))
}

/// A suite's report: the machine, its parameters (under the suite's name), the data set against
/// the cache budget, the engines' exact options, and the runs.
fn suite_report(
    suite: &str,
    suite_params: serde_json::Value,
    dataset_bytes: u64,
    common: &CommonParams,
    specs: &[&EngineSpec],
    runs: Vec<RunResult>,
) -> SuiteReport {
    let mut params = serde_json::json!({
        "suite": suite,
        "common": common,
        "dataset_bytes": dataset_bytes,
        "dataset_to_cache_ratio": dataset_bytes as f64 / common.cache_bytes.max(1) as f64,
        "engines": describe_engines(specs, common),
    });
    params[suite] = suite_params;
    SuiteReport {
        machine: machine(),
        params,
        runs,
    }
}

/// Writes results.json, report.md and the charts into `out`.
pub fn write_outputs(report: &SuiteReport, out: &Path, command: &str) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut json = serde_json::to_value(report)?;
    json["command"] = command.into();
    std::fs::write(out.join("results.json"), serde_json::to_vec_pretty(&json)?)?;
    std::fs::write(
        out.join("report.md"),
        crate::report::markdown(report, command),
    )?;
    crate::charts::write_all(report, out)?;
    Ok(())
}
