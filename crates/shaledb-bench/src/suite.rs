//! Running suites side by side: every engine gets the same data set, thread count and DRAM
//! budget, and engines alternate within each round (A, B, A, B, ...), with the device's
//! random-read IOPS probed before and after each round, so a ratio is always read from paired
//! runs minutes apart at most.

use crate::dbbench::{self, DbBenchParams};
use crate::engine::{Engine, EngineConfig, EngineSpec};
use crate::engines;
use crate::measure::{self, Measured, Monitor, ProcessCounters};
use crate::results::{RunResult, SuiteReport};
use crate::ycsb::generator::key_name;
use crate::ycsb::workload::{Distribution, RecordShape, RunState, WorkloadSpec};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Parameters shared by both suites.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CommonParams {
    pub engines: Vec<String>,
    pub threads: Vec<usize>,
    pub cache_bytes: u64,
    pub data_dir: PathBuf,
    pub out_dir: PathBuf,
    pub rounds: usize,
    /// Seconds of each device probe (0 disables probing).
    pub probe_secs: f64,
    pub probe_threads: usize,
}

/// Parameters of the YCSB suite.
#[derive(Debug, Clone, serde::Serialize)]
pub struct YcsbParams {
    pub workloads: Vec<char>,
    pub records: u64,
    pub operations: u64,
    pub duration_secs: Option<f64>,
    pub shape: RecordShape,
    pub target_ops_per_sec: Option<f64>,
    /// Overrides each workload's request distribution.
    pub distribution: Option<Distribution>,
}

/// Wraps an engine to count the bytes clients write, identically for every engine.
pub struct Counted {
    pub inner: Box<dyn Engine>,
    pub user_bytes_written: AtomicU64,
}

impl Counted {
    fn new(inner: Box<dyn Engine>) -> Self {
        Counted {
            inner,
            user_bytes_written: AtomicU64::new(0),
        }
    }
}

impl Engine for Counted {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.read(key)
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.user_bytes_written
            .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
        self.inner.write(key, value)
    }

    fn scan(
        &self,
        start: &[u8],
        count: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        self.inner.scan(start, count, visit)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn engine_stats(&self) -> serde_json::Value {
        self.inner.engine_stats()
    }
}

pub(crate) struct Runner<'a> {
    pub common: &'a CommonParams,
    pub suite: &'static str,
    pub runs: Vec<RunResult>,
}

impl Runner<'_> {
    pub fn engine_dir(&self, engine: &str) -> PathBuf {
        self.common.data_dir.join(engine)
    }

    pub fn config(&self, engine: &str, threads: usize) -> EngineConfig {
        EngineConfig {
            dir: self.engine_dir(engine),
            cache_bytes: self.common.cache_bytes,
            threads,
        }
    }

    pub fn probe(&self) -> Result<Option<f64>> {
        if self.common.probe_secs <= 0.0 {
            return Ok(None);
        }
        let iops = measure::probe_device(
            &self.common.data_dir,
            self.common.probe_threads,
            Duration::from_secs_f64(self.common.probe_secs),
        )?;
        Ok(Some(iops))
    }

    /// Opens `spec` (fresh if asked), runs `work` under measurement, closes it, records a result.
    #[expect(
        clippy::too_many_arguments,
        reason = "a run is described by all of these; a struct would only rename them"
    )]
    pub fn measure(
        &mut self,
        spec: &EngineSpec,
        workload: &str,
        threads: usize,
        round: usize,
        fresh: bool,
        live_bytes: impl FnOnce() -> u64,
        work: impl FnOnce(&Counted, &Monitor) -> Result<Measured>,
    ) -> Result<()> {
        let config = self.config(spec.name, threads);
        if fresh {
            let _ = std::fs::remove_dir_all(&config.dir);
        }
        std::fs::create_dir_all(&config.dir)?;
        let engine =
            Counted::new((spec.open)(&config).with_context(|| format!("opening {}", spec.name))?);
        let before = ProcessCounters::now();
        let monitor = Monitor::start();
        let measured = work(&engine, &monitor)
            .with_context(|| format!("{} {workload} on {}", self.suite, spec.name))?;
        engine.sync()?;
        let (timeline, peak_rss_bytes) = monitor.finish();
        let delta = ProcessCounters::now().since(&before);
        let engine_stats = engine.engine_stats();
        let user_bytes_written = engine.user_bytes_written.load(Ordering::Relaxed);
        drop(engine);
        let summaries = measured.recorder.summaries();
        let operations = measured.operations;
        let elapsed_secs = measured.elapsed.as_secs_f64();
        let result = RunResult {
            engine: spec.name.to_string(),
            suite: self.suite.to_string(),
            workload: workload.to_string(),
            threads,
            round,
            operations,
            elapsed_secs,
            ops_per_sec: operations as f64 / elapsed_secs.max(1e-9),
            latency_us: summaries
                .into_iter()
                .map(|(kind, summary)| (kind.ycsb_name().to_string(), summary))
                .collect(),
            device_bytes_written: delta.device_bytes_written,
            device_bytes_read: delta.device_bytes_read,
            user_bytes_written,
            cpu_seconds: delta.cpu_seconds,
            cpu_seconds_per_1000_ops: delta.cpu_seconds * 1000.0 / operations.max(1) as f64,
            peak_rss_bytes,
            disk_bytes: measure::disk_bytes(&config.dir),
            live_bytes: live_bytes(),
            cache_bytes: self.common.cache_bytes,
            timeline,
            device_probe_iops_before: None,
            device_probe_iops_after: None,
            engine_stats,
        };
        eprintln!(
            "{:<8} {:<22} {:<8} threads {:>3} round {}: {:>10.0} ops/s",
            self.suite, workload, spec.name, threads, round, result.ops_per_sec
        );
        self.runs.push(result);
        Ok(())
    }

    /// Runs `round_body` once per round, with device probes around it recorded on its runs.
    pub fn rounds(
        &mut self,
        mut round_body: impl FnMut(&mut Self, usize) -> Result<()>,
    ) -> Result<()> {
        for round in 1..=self.common.rounds.max(1) {
            let first = self.runs.len();
            let before = self.probe()?;
            round_body(self, round)?;
            let after = self.probe()?;
            if let Some(iops) = before {
                eprintln!("device probe: {iops:.0} random 4 KiB reads/s before round {round}, {:.0} after", after.unwrap_or(0.0));
            }
            for run in &mut self.runs[first..] {
                run.device_probe_iops_before = before;
                run.device_probe_iops_after = after;
            }
        }
        Ok(())
    }
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
    let specs = engines(&common.engines)?;
    let mut runner = Runner {
        common,
        suite: "ycsb",
        runs: Vec::new(),
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
            |engine, monitor| {
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
        for &threads in &common.threads {
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
                        &name.to_string(),
                        threads,
                        round,
                        false,
                        || (state.inserts.last_value() + 1) * record_len,
                        |engine, monitor| {
                            let measured = measure::run_phase(
                                threads,
                                params.operations,
                                params.duration_secs.map(Duration::from_secs_f64),
                                params.target_ops_per_sec,
                                monitor,
                                |_, _, recorder| {
                                    state.operation(engine, &mut rand::thread_rng(), recorder)
                                },
                            )?;
                            let engine_grown = grown
                                .get_mut(engine_spec.name)
                                .expect("every engine is counted");
                            *engine_grown = (*engine_grown).max(state.inserts.last_value() + 1);
                            Ok(measured)
                        },
                    )?;
                }
                Ok(())
            })?;
        }
        record_counts = grown;
    }
    Ok(suite_report(
        "ycsb",
        serde_json::to_value(params)?,
        loaded_bytes,
        common,
        &specs,
        runner.runs,
    ))
}

/// The db_bench suite: each benchmark at each thread count, in rounds.
pub fn run_dbbench(common: &CommonParams, params: &DbBenchParams) -> Result<SuiteReport> {
    let specs = engines(&common.engines)?;
    let mut runner = Runner {
        common,
        suite: "db",
        runs: Vec::new(),
    };
    for benchmark in &params.benchmarks {
        let benchmark = dbbench::Benchmark::parse(benchmark)?;
        for &threads in &common.threads {
            runner.rounds(|runner, round| {
                for spec in &specs {
                    dbbench::run(runner, spec, benchmark, params, threads, round)?;
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
