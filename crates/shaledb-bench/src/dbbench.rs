//! db_bench's workloads (RocksDB's `tools/db_bench`): fills, overwrite, random and sequential
//! reads, readwhilewriting (N-1 readers, 1 writer) and readrandomwriterandom.

use crate::engine::{Engine, EngineSpec};
use crate::measure::Measured;
use crate::measure::{self, Monitor, OpKind, Phase, Recorder};
use crate::runner::Runner;
use crate::values::PieceWindow;
use anyhow::{bail, Result};
use rand::Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Parameters of the db_bench suite.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DbBenchParams {
    pub benchmarks: Vec<String>,
    /// Keys in the data set, and operations per benchmark.
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    /// Values compress to about this fraction of their size (db_bench's `--compression_ratio`,
    /// default 0.5): see `values.rs`.
    pub compression_ratio: f64,
    /// Reads in percent for readrandomwriterandom.
    pub read_write_percent: u32,
    /// Runs each read benchmark for this long instead of `num` operations.
    pub duration_secs: Option<f64>,
    /// Bytes per second (keys and values) readwhilewriting's writer may write; 0: as fast as
    /// it can (db_bench's `--benchmark_write_rate_limit`).
    pub write_rate_limit: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    FillSeq,
    FillRandom,
    Overwrite,
    ReadRandom,
    ReadSeq,
    ReadWhileWriting,
    ReadRandomWriteRandom,
}

impl Benchmark {
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "fillseq" => Benchmark::FillSeq,
            "fillrandom" => Benchmark::FillRandom,
            "overwrite" => Benchmark::Overwrite,
            "readrandom" => Benchmark::ReadRandom,
            "readseq" => Benchmark::ReadSeq,
            "readwhilewriting" => Benchmark::ReadWhileWriting,
            "readrandomwriterandom" => Benchmark::ReadRandomWriteRandom,
            other => bail!(
                "unknown benchmark {other:?} (fillseq, fillrandom, overwrite, readrandom, readseq, \
                 readwhilewriting, readrandomwriterandom)"
            ),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Benchmark::FillSeq => "fillseq",
            Benchmark::FillRandom => "fillrandom",
            Benchmark::Overwrite => "overwrite",
            Benchmark::ReadRandom => "readrandom",
            Benchmark::ReadSeq => "readseq",
            Benchmark::ReadWhileWriting => "readwhilewriting",
            Benchmark::ReadRandomWriteRandom => "readrandomwriterandom",
        }
    }

    fn fills(self) -> bool {
        matches!(self, Benchmark::FillSeq | Benchmark::FillRandom)
    }
}

/// db_bench's key for `n` (its `GenerateKeyFromInt`): the number's low `min(key_size, 8)` bytes
/// big-endian, then '0' bytes up to `key_size`. The layout matters to the engines: decimal keys
/// sharing a 14-byte prefix made RocksDB's fills ~10% slower than db_bench's
/// (bench/results/2026-11-23-issue18-rocksdb-peer-check).
pub fn key(n: u64, key_size: usize) -> Vec<u8> {
    let number = key_size.min(8);
    let mut key = n.to_be_bytes()[8 - number..].to_vec();
    key.resize(key_size, b'0');
    key
}

/// What a fill loaded, kept in the engine directory's `.loaded` marker: a read benchmark uses
/// only data loaded as this run would load it, and fills it again otherwise.
fn loaded_description(params: &DbBenchParams, compression: shaledb::Compression) -> String {
    format!(
        "num {} key_size {} (db_bench's layout) value_size {} compression_ratio {} compression {compression}",
        params.num, params.key_size, params.value_size, params.compression_ratio
    )
}

/// Runs one benchmark on one engine and records it, with values cut from `values`. Read
/// benchmarks on an engine without the data this run would load first fill it (recorded as a
/// `fillrandom` run).
pub(crate) fn run(
    runner: &mut Runner<'_>,
    spec: &EngineSpec,
    benchmark: Benchmark,
    params: &DbBenchParams,
    values: &PieceWindow,
    threads: usize,
    round: usize,
) -> Result<()> {
    let loaded_marker = runner.engine_dir(spec.name).join(".loaded");
    let loaded = loaded_description(params, runner.common.compression);
    let has_data = std::fs::read_to_string(&loaded_marker).is_ok_and(|text| text == loaded);
    if !benchmark.fills() && !has_data {
        run(
            runner,
            spec,
            Benchmark::FillRandom,
            params,
            values,
            threads,
            round,
        )?;
    }
    let value = |rng: &mut rand::rngs::ThreadRng| values.value(params.value_size, rng);
    let live_bytes = params.num * (params.key_size + params.value_size) as u64;
    let duration = params.duration_secs.map(Duration::from_secs_f64);
    runner.measure(
        spec,
        benchmark.name(),
        threads,
        round,
        benchmark.fills(),
        || live_bytes,
        |engine, monitor, pass| {
            let duration = pass.duration_or(duration);
            let measured = match (benchmark, pass) {
                // A whole pass of the key space is no warm-up; the timed pass runs cold.
                (Benchmark::ReadSeq, Phase::WarmUp(_)) => Measured {
                    recorder: Recorder::default(),
                    elapsed: Duration::ZERO,
                    operations: 0,
                },
                (Benchmark::FillSeq, _) => {
                    let next = AtomicU64::new(0);
                    phase(threads, params.num, None, monitor, |_| {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        engine.write(&key(n, params.key_size), &value(&mut rand::thread_rng()))?;
                        Ok(OpKind::Write)
                    })?
                }
                (Benchmark::FillRandom | Benchmark::Overwrite, _) => {
                    phase(threads, params.num, pass.duration_or(None), monitor, |_| {
                        let mut rng = rand::thread_rng();
                        engine.write(
                            &key(rng.gen_range(0..params.num), params.key_size),
                            &value(&mut rng),
                        )?;
                        Ok(OpKind::Write)
                    })?
                }
                (Benchmark::ReadRandom, _) => {
                    phase(threads, params.num, duration, monitor, |_| {
                        read_random(engine, params)?;
                        Ok(OpKind::Read)
                    })?
                }
                (Benchmark::ReadSeq, _) => read_seq(engine, threads, monitor)?,
                (Benchmark::ReadWhileWriting, _) => {
                    read_while_writing(engine, params, values, threads, duration, monitor)?
                }
                (Benchmark::ReadRandomWriteRandom, _) => {
                    phase(threads, params.num, duration, monitor, |_| {
                        let mut rng = rand::thread_rng();
                        if rng.gen_range(0..100) < params.read_write_percent {
                            read_random(engine, params)?;
                            Ok(OpKind::Read)
                        } else {
                            engine.write(
                                &key(rng.gen_range(0..params.num), params.key_size),
                                &value(&mut rng),
                            )?;
                            Ok(OpKind::Write)
                        }
                    })?
                }
            };
            Ok(measured)
        },
    )?;
    if benchmark.fills() {
        std::fs::write(&loaded_marker, loaded)?;
    }
    Ok(())
}

fn phase(
    threads: usize,
    operations: u64,
    duration: Option<Duration>,
    monitor: &Monitor,
    op: impl Fn(&mut Recorder) -> Result<OpKind> + Sync,
) -> Result<Measured> {
    measure::run_phase(
        threads,
        operations,
        duration,
        None,
        monitor,
        |_, _, recorder| op(recorder),
    )
}

fn read_random(engine: &dyn Engine, params: &DbBenchParams) -> Result<()> {
    let n = rand::thread_rng().gen_range(0..params.num);
    std::hint::black_box(engine.read(&key(n, params.key_size))?);
    Ok(())
}

/// Each thread reads the whole key space in order, in chunks of 100 (one SCAN sample each);
/// throughput counts entries.
fn read_seq(engine: &dyn Engine, threads: usize, monitor: &Monitor) -> Result<Measured> {
    const CHUNK: usize = 100;
    let entries = AtomicU64::new(0);
    let started = Instant::now();
    let scanned = measure::run_phase(
        threads,
        threads as u64,
        None,
        None,
        monitor,
        |_, _, recorder| {
            let mut next: Vec<u8> = Vec::new();
            loop {
                let begin = Instant::now();
                let mut last = None;
                let read = engine.scan(&next, CHUNK, &mut |key, value| {
                    std::hint::black_box(value);
                    last = Some(key.to_vec());
                })?;
                recorder.record(OpKind::Scan, begin.elapsed());
                entries.fetch_add(read as u64, Ordering::Relaxed);
                match last {
                    Some(mut key) if read == CHUNK => {
                        key.push(0);
                        next = key;
                    }
                    _ => return Ok(OpKind::Read),
                }
            }
        },
    )?;
    Ok(Measured {
        recorder: scanned.recorder,
        elapsed: started.elapsed(),
        operations: entries.load(Ordering::Relaxed),
    })
}

/// N-1 threads read at random while one writes at random until they finish; throughput counts
/// reads, as db_bench reports it.
fn read_while_writing(
    engine: &dyn Engine,
    params: &DbBenchParams,
    values: &PieceWindow,
    threads: usize,
    duration: Option<Duration>,
    monitor: &Monitor,
) -> Result<Measured> {
    let readers = threads.saturating_sub(1).max(1);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| -> Result<Recorder> {
            let mut recorder = Recorder::default();
            let mut rng = rand::thread_rng();
            let started = Instant::now();
            let mut written = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if params.write_rate_limit > 0 {
                    // Ahead of the rate: wait until the bytes written so far are due.
                    let due =
                        Duration::from_secs_f64(written as f64 / params.write_rate_limit as f64);
                    if let Some(early) = due.checked_sub(started.elapsed()) {
                        std::thread::sleep(early);
                    }
                }
                let begin = Instant::now();
                engine.write(
                    &key(rng.gen_range(0..params.num), params.key_size),
                    &values.value(params.value_size, &mut rng),
                )?;
                recorder.record(OpKind::Write, begin.elapsed());
                written += (params.key_size + params.value_size) as u64;
            }
            Ok(recorder)
        });
        let reads = phase(readers, params.num, duration, monitor, |_| {
            read_random(engine, params)?;
            Ok(OpKind::Read)
        });
        stop.store(true, Ordering::Relaxed);
        let writes = writer.join().expect("writer thread")?;
        // The phase ran (and counts) only the reads.
        let mut measured = reads?;
        measured.recorder.merge(&writes);
        Ok(measured)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_the_requested_size() {
        assert_eq!(key(42, 20), b"\0\0\0\0\0\0\0\x2a000000000000".to_vec());
        assert_eq!(key(0x0102_0304_0506, 4), vec![3, 4, 5, 6]);
        assert!(key(1, 20) < key(256, 20), "keys sort as their numbers");
        assert!(Benchmark::parse("readwhilewriting").is_ok());
        assert!(Benchmark::parse("nonsense").is_err());
    }
}
