//! Measuring one run: the parameters every suite shares, the wrapper that counts the bytes
//! clients write, and the runner that opens an engine, measures a workload on it and records the
//! result, with device probes around each round.

use crate::engine::{Engine, EngineConfig, EngineSpec};
use crate::measure::{self, Measured, Monitor, ProcessCounters};
use crate::results::RunResult;
use anyhow::{Context, Result};
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
    /// Seconds of each device probe (0 disables probing).
    pub probe_secs: f64,
    pub probe_threads: usize,
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
