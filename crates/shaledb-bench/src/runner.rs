//! Measuring one run: the parameters every suite shares, the wrapper that counts the bytes
//! clients write, and the runner that opens an engine, measures a workload on it and records the
//! result, with device probes around each round.

use crate::engine::{Engine, EngineConfig, EngineSpec};
use crate::measure::{self, Measured, Monitor, Phase, ProcessCounters};
use crate::results::RunResult;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
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
    /// Seconds of reads over the loaded data after which each peer's cache is set so that its
    /// engine RSS equals ShaleDB's (see `Runner::equalize_rss`); 0 gives every engine
    /// `cache_bytes` as its cache.
    pub equal_rss_secs: f64,
    /// Seconds each run's work runs untimed after the engine opened and before it is measured
    /// (caches filled, background work under way), except runs on a fresh directory (loads).
    pub warmup_secs: f64,
    /// Seconds of each device probe (0 disables probing).
    pub probe_secs: f64,
    pub probe_threads: usize,
    /// Compression every engine stores its data with, where it can (each engine's description
    /// in the report says what it does).
    pub compression: shaledb::Compression,
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
    /// Cache budgets set by `equalize_rss`, by engine; the others get `common.cache_bytes`.
    pub cache_bytes: BTreeMap<String, u64>,
}

/// Engine RSS at each step of equalizing one engine's memory with ShaleDB's.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RssCalibration {
    pub engine: String,
    /// (cache bytes, engine RSS bytes measured with it), in the order tried.
    pub steps: Vec<(u64, u64)>,
    pub cache_bytes: u64,
}

/// Cache steps of equalizing a peer: each moves the cache by the RSS still to match.
const RSS_CALIBRATION_STEPS: usize = 2;
/// The smallest cache a peer is given, however much more memory ShaleDB's other parts hold.
const CACHE_BYTES_MIN: u64 = 1 << 20;

impl Runner<'_> {
    pub fn engine_dir(&self, engine: &str) -> PathBuf {
        self.common.data_dir.join(engine)
    }

    pub fn config(&self, engine: &str, threads: usize) -> EngineConfig {
        EngineConfig {
            dir: self.engine_dir(engine),
            cache_bytes: self
                .cache_bytes
                .get(engine)
                .copied()
                .unwrap_or(self.common.cache_bytes),
            threads,
            compression: self.common.compression,
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
        work: impl Fn(&Counted, &Monitor, Phase) -> Result<Measured>,
    ) -> Result<()> {
        let result = self.run_one(spec, workload, threads, round, fresh, live_bytes, work)?;
        eprintln!(
            "{:<8} {:<22} {:<8} threads {:>3} round {}: {:>10.0} ops/s",
            self.suite, workload, spec.name, threads, round, result.ops_per_sec
        );
        self.runs.push(result);
        Ok(())
    }

    /// Sets each peer's cache so that its engine RSS, after `secs` of `reads` at `threads`,
    /// equals ShaleDB's with the common budget: ShaleDB's index lives outside its cache and a
    /// peer's index and filters may live outside its own, so equal caches are not equal memory.
    pub fn equalize_rss(
        &mut self,
        specs: &[&EngineSpec],
        threads: usize,
        live_bytes: u64,
        reads: impl Fn(&Counted, &Monitor, Duration) -> Result<Measured>,
    ) -> Result<Vec<RssCalibration>> {
        let secs = Duration::from_secs_f64(self.common.equal_rss_secs);
        let rss_of = |runner: &mut Self, spec: &EngineSpec| -> Result<u64> {
            let run = runner.run_one(
                spec,
                "rss-calibration",
                threads,
                0,
                false,
                || live_bytes,
                |engine, monitor, phase| {
                    let duration = match phase {
                        Phase::WarmUp(warmup) => warmup,
                        Phase::Timed => secs,
                    };
                    reads(engine, monitor, duration)
                },
            )?;
            Ok(run.engine_rss_bytes)
        };
        let Some(subject) = specs
            .iter()
            .find(|spec| spec.name == crate::results::SUBJECT)
        else {
            anyhow::bail!("equal RSS needs ShaleDB among the engines: its RSS is the target");
        };
        // The first open after the load replays logs (RocksDB's memtables, for one) and holds
        // memory no later open does: one settling read pass per engine, not measured.
        for spec in specs {
            rss_of(self, spec)?;
        }
        let target = rss_of(self, subject)?;
        let mut calibrations = vec![RssCalibration {
            engine: subject.name.to_string(),
            steps: vec![(self.common.cache_bytes, target)],
            cache_bytes: self.common.cache_bytes,
        }];
        for spec in specs.iter().filter(|spec| spec.name != subject.name) {
            let mut cache = self.common.cache_bytes;
            let mut steps = Vec::new();
            for _ in 0..RSS_CALIBRATION_STEPS {
                self.cache_bytes.insert(spec.name.to_string(), cache);
                let rss = rss_of(self, spec)?;
                steps.push((cache, rss));
                cache =
                    (cache as i64 + target as i64 - rss as i64).max(CACHE_BYTES_MIN as i64) as u64;
            }
            self.cache_bytes.insert(spec.name.to_string(), cache);
            eprintln!(
                "equal RSS: {} gets a {} MiB cache (ShaleDB's engine RSS {} MiB; tried {})",
                spec.name,
                cache >> 20,
                target >> 20,
                steps
                    .iter()
                    .map(|(cache, rss)| format!("{} MiB cache -> {} MiB", cache >> 20, rss >> 20))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            calibrations.push(RssCalibration {
                engine: spec.name.to_string(),
                steps,
                cache_bytes: cache,
            });
        }
        Ok(calibrations)
    }

    /// Opens `spec`, runs `work` under measurement, closes it, and returns the result.
    #[expect(
        clippy::too_many_arguments,
        reason = "a run is described by all of these; a struct would only rename them"
    )]
    fn run_one(
        &mut self,
        spec: &EngineSpec,
        workload: &str,
        threads: usize,
        round: usize,
        fresh: bool,
        live_bytes: impl FnOnce() -> u64,
        work: impl Fn(&Counted, &Monitor, Phase) -> Result<Measured>,
    ) -> Result<RunResult> {
        let config = self.config(spec.name, threads);
        if fresh {
            let _ = std::fs::remove_dir_all(&config.dir);
        }
        std::fs::create_dir_all(&config.dir)?;
        measure::release_freed_memory();
        let rss_before_open = measure::rss_bytes();
        let engine =
            Counted::new((spec.open)(&config).with_context(|| format!("opening {}", spec.name))?);
        if self.common.warmup_secs > 0.0 && !fresh {
            let monitor = Monitor::start();
            let warmup = Phase::WarmUp(Duration::from_secs_f64(self.common.warmup_secs));
            work(&engine, &monitor, warmup)
                .with_context(|| format!("{} {workload} warm-up on {}", self.suite, spec.name))?;
            monitor.finish();
        }
        let before = ProcessCounters::now();
        let monitor = Monitor::start();
        let measured = work(&engine, &monitor, Phase::Timed)
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
            engine_rss_bytes: peak_rss_bytes.saturating_sub(rss_before_open),
            disk_bytes: measure::disk_bytes(&config.dir),
            live_bytes: live_bytes(),
            cache_bytes: config.cache_bytes,
            timeline,
            device_probe_iops_before: None,
            device_probe_iops_after: None,
            engine_stats,
        };
        Ok(result)
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
