//! `shale bench`: the YCSB and db_bench suites of the `shaledb-bench` harness, side by side
//! with the peer engines compiled in, and `quick`, ShaleDB's own put/get self-measurement.

use crate::Cli;
use anyhow::{Context, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use shaledb::{Db, Options};
use shaledb_bench::dbbench::DbBenchParams;
use shaledb_bench::engines::ENGINES;
use shaledb_bench::results::SuiteReport;
use shaledb_bench::runner::CommonParams;
use shaledb_bench::suite::YcsbParams;
use shaledb_bench::ycsb::workload::{Distribution, RecordShape};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// YCSB core workloads A-F: load, then each workload at each thread count, in rounds.
    Ycsb(YcsbArgs),
    /// db_bench workloads: fills, overwrite, reads, readwhilewriting, readrandomwriterandom.
    Db(DbArgs),
    /// ShaleDB alone: random puts then random gets, with the engine's efficiency counters.
    Quick(QuickArgs),
    /// ShaleDB transactions: 2-key transfers between two KVSs, per thread count.
    Transfer(TransferArgs),
    /// ShaleDB's cleaner under a steady update load: write and space amplification, get tails.
    Gc(GcArgs),
}

#[derive(clap::Args)]
pub struct GcArgs {
    /// Records loaded, then updated.
    #[arg(long, default_value_t = 200_000)]
    records: u64,
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Stop after writing this many times the data set in updates.
    #[arg(long, default_value_t = 20.0)]
    written_multiple: f64,
    /// Which keys the updates hit: zipfian (YCSB's scrambled Zipfian) or uniform.
    #[arg(long, default_value = "zipfian")]
    distribution: String,
    /// Keep live/physical at this ratio (the space budget's utilization target).
    #[arg(long, default_value_t = 0.8)]
    live_ratio: f64,
    /// Add a staging class of this fraction of the live data (KVS policy staging_max_capacity).
    #[arg(long)]
    staging_fraction: Option<f64>,
    /// Run with the background cleaner off (the baseline for get latency).
    #[arg(long)]
    cleaner_off: bool,
    /// Segment size in MiB (smaller segments let the cleaner work on small data sets).
    #[arg(long, default_value_t = 16)]
    segment_mb: u64,
    /// Where the run's KVDB is created (and removed afterwards).
    #[arg(long, default_value = "shale-data/bench")]
    data_dir: PathBuf,
}

#[derive(clap::Args)]
pub struct TransferArgs {
    /// Accounts in each of the two KVSs.
    #[arg(long, default_value_t = 100_000)]
    accounts: u32,
    /// Thread counts to run, each on a fresh KVDB.
    #[arg(long, default_value = "1,4,16", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Seconds per thread count.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Where each run's KVDB is created (and removed afterwards).
    #[arg(long, default_value = "shale-data/bench")]
    data_dir: PathBuf,
}

/// Options every suite shares.
#[derive(clap::Args)]
pub struct CommonArgs {
    /// Engines to compare (default: every engine compiled in).
    #[arg(long, value_delimiter = ',')]
    engines: Vec<String>,
    /// Client thread counts to sweep.
    #[arg(long, default_value = "1,4", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Where each engine's data lives (one subdirectory per engine).
    #[arg(long, default_value = "shale-data/bench")]
    data_dir: PathBuf,
    /// Where results.json, report.md and the charts go.
    #[arg(long, default_value = "bench/out")]
    out: PathBuf,
    /// Rounds per comparison; engines alternate within each round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds of device random-read probing before and after each round (0: off).
    #[arg(long, default_value_t = 2.0)]
    probe_secs: f64,
    /// Concurrent reads of the device probe.
    #[arg(long, default_value_t = 32)]
    probe_threads: usize,
    /// Equal memory: after the load, read the data for this many seconds with each engine and
    /// give each peer the cache that makes its engine RSS (peak RSS less the RSS before it
    /// opened; index, filters and buffers included) equal ShaleDB's with --cache-mb (ycsb only).
    #[arg(long, default_value_t = 0.0)]
    equal_rss_secs: f64,
    /// Run each workload untimed for this many seconds after the engine opens, then measure
    /// (not the loads, which start empty).
    #[arg(long, default_value_t = 0.0)]
    warmup_secs: f64,
    /// Compression of the stored data, for every engine that can: none, or lz4 (ShaleDB's KVS
    /// compression; RocksDB's on every level; fjall's). The report says what each engine did.
    #[arg(long, default_value = "none")]
    compression: shaledb::Compression,
}

#[derive(clap::Args)]
pub struct YcsbArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Workloads to run, in order (D and E insert, so run them last).
    #[arg(long, default_value = "a,b,c,d,e,f", value_delimiter = ',')]
    workloads: Vec<char>,
    /// Records loaded (YCSB recordcount).
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Operations per run (YCSB operationcount).
    #[arg(long, default_value_t = 100_000)]
    operations: u64,
    /// Run each workload for this many seconds instead of a fixed operation count.
    #[arg(long)]
    duration: Option<f64>,
    #[arg(long, default_value_t = 10)]
    field_count: usize,
    #[arg(long, default_value_t = 100)]
    field_length: usize,
    /// Fields compress to about this fraction of their length (1: incompressible, as YCSB's).
    #[arg(long, default_value_t = 1.0)]
    compression_ratio: f64,
    /// Target ops/s across all threads (YCSB -target); latency counts from intended start. A
    /// list sweeps offered loads (0 = unthrottled), so engines' latency is compared at equal
    /// offered load: --target 10000,20000,40000,0.
    #[arg(long, value_delimiter = ',')]
    target: Vec<f64>,
    /// Override the workloads' request distribution: uniform, zipfian or latest.
    #[arg(long)]
    distribution: Option<String>,
}

#[derive(clap::Args)]
pub struct DbArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Benchmarks to run, in order.
    #[arg(
        long,
        default_value = "fillrandom,readrandom,readwhilewriting,readrandomwriterandom",
        value_delimiter = ','
    )]
    benchmarks: Vec<String>,
    /// Keys in the data set and operations per benchmark.
    #[arg(long, default_value_t = 1_000_000)]
    num: u64,
    #[arg(long, default_value_t = 20)]
    key_size: usize,
    #[arg(long, default_value_t = 400)]
    value_size: usize,
    /// Values compress to about this fraction of their size, made as db_bench makes them.
    #[arg(long = "compression_ratio", default_value_t = shaledb_bench::values::DB_BENCH_COMPRESSION_RATIO)]
    compression_ratio: f64,
    /// Percent of reads in readrandomwriterandom.
    #[arg(long = "readwritepercent", default_value_t = 80)]
    read_write_percent: u32,
    /// Run read benchmarks for this many seconds instead of --num operations.
    #[arg(long)]
    duration: Option<f64>,
    /// Bytes per second readwhilewriting's writer may write (keys and values); 0: as fast as
    /// it can, as db_bench's default.
    #[arg(long = "benchmark_write_rate_limit", default_value_t = 0)]
    write_rate_limit: u64,
}

#[derive(clap::Args)]
pub struct QuickArgs {
    /// Records to put, then gets to issue.
    #[arg(long, default_value_t = 200_000)]
    num: u64,
    /// Key length in bytes (YCSB-style `user` + digits; 23 as YCSB's).
    #[arg(long, default_value_t = 23)]
    key_size: usize,
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Thread counts to run, each on a fresh KVDB.
    #[arg(long, default_value = "1,4", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Where each run's KVDB is created (and removed afterwards).
    #[arg(long, default_value = "shale-data/bench")]
    data_dir: PathBuf,
    /// Where results.json is written.
    #[arg(long, default_value = "bench/out")]
    out: PathBuf,
}

#[derive(serde::Serialize)]
struct RunResult {
    threads: usize,
    records: u64,
    key_bytes: usize,
    value_bytes: usize,
    cache_bytes: u64,
    data_bytes: u64,
    put_ops_per_sec: f64,
    get_ops_per_sec: f64,
    device_reads_per_get: f64,
    cache_hit_ratio: f64,
    media_bytes_written_per_user_byte: f64,
    index_bytes_per_key_estimated: f64,
    rss_growth_bytes_per_key: f64,
    reopen_secs: f64,
    space_amplification: f64,
    direct_io: bool,
}

fn key_for(ordinal: u64, key_size: usize) -> Vec<u8> {
    // FNV-1a of the ordinal, as YCSB hashes its keys, rendered as digits after "user".
    let hash = shaledb_bench::ycsb::generator::fnv1a64(ordinal);
    let mut key = format!("user{hash:019}").into_bytes();
    key.resize(key_size.max(1), b'0');
    key
}

/// Runs `work(thread, ordinals)` on `threads` threads over a split of `ordinals`; returns seconds.
fn parallel(
    threads: usize,
    ordinals: &[u64],
    work: impl Fn(&[u64]) -> Result<()> + Sync,
) -> Result<f64> {
    let started = Instant::now();
    let chunk = ordinals.len().div_ceil(threads.max(1));
    std::thread::scope(|scope| {
        let handles: Vec<_> = ordinals
            .chunks(chunk.max(1))
            .map(|part| scope.spawn(|| work(part)))
            .collect();
        handles
            .into_iter()
            .try_for_each(|handle| handle.join().expect("bench thread panicked"))
    })?;
    Ok(started.elapsed().as_secs_f64())
}

fn run_one(cli: &Cli, args: &QuickArgs, threads: usize) -> Result<RunResult> {
    let dir = args
        .data_dir
        .join(format!("run-{}-{threads}t", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data_bytes = args.num * (args.key_size + args.value_size) as u64;
    let cache_bytes = cli.cache_mb.map_or(data_bytes / 8, |mib| mib << 20);
    let options = Options {
        durability: cli.durability.parse()?,
        cache_bytes,
        ..Options::default()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut ordinals: Vec<u64> = (0..args.num).collect();
    ordinals.shuffle(&mut rng);
    let value: Vec<u8> = (0..args.value_size).map(|_| rng.gen()).collect();
    let rss_before = shaledb_bench::measure::rss_bytes();
    let db =
        Db::open(&dir, options.clone()).with_context(|| format!("opening {}", dir.display()))?;
    let kvs = db.kvs("bench")?;
    let put_secs = parallel(threads, &ordinals, |part| {
        for &ordinal in part {
            kvs.put(key_for(ordinal, args.key_size), &value)?;
        }
        Ok(())
    })?;
    db.sync()?;
    let after_fill = db.stats();
    let rss_growth = shaledb_bench::measure::rss_bytes()
        .saturating_sub(rss_before)
        .saturating_sub(after_fill.cache_bytes);
    // Uniform random gets, with replacement, so the cache sees repeats as a real workload would.
    let probes: Vec<u64> = (0..args.num).map(|_| rng.gen_range(0..args.num)).collect();
    let get_secs = parallel(threads, &probes, |part| {
        for &ordinal in part {
            let found = kvs.get(key_for(ordinal, args.key_size))?;
            anyhow::ensure!(
                found.as_deref() == Some(&value[..]),
                "key {ordinal} read back wrong"
            );
        }
        Ok(())
    })?;
    let stats = db.stats();
    drop(kvs);
    db.close()?;
    let started = Instant::now();
    let reopened = Db::open(&dir, options)?;
    let reopen_secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        reopened.kvs("bench")?.len()? as u64 == args.num,
        "reopened KVDB lost keys"
    );
    drop(reopened);
    std::fs::remove_dir_all(&dir).ok();
    let gets = stats.gets.max(1) as f64;
    let media_written: u64 = after_fill
        .media
        .iter()
        .map(|media| media.bytes_written)
        .sum();
    Ok(RunResult {
        threads,
        records: args.num,
        key_bytes: args.key_size,
        value_bytes: args.value_size,
        cache_bytes,
        data_bytes,
        put_ops_per_sec: args.num as f64 / put_secs,
        get_ops_per_sec: args.num as f64 / get_secs,
        device_reads_per_get: stats.get_device_reads as f64 / gets,
        cache_hit_ratio: stats.cache_hits as f64 / gets,
        media_bytes_written_per_user_byte: media_written as f64
            / after_fill.user_bytes_written.max(1) as f64,
        index_bytes_per_key_estimated: after_fill.index_bytes as f64 / args.num as f64,
        rss_growth_bytes_per_key: rss_growth as f64 / args.num as f64,
        reopen_secs,
        space_amplification: after_fill.space_amplification(),
        direct_io: stats.direct_io,
    })
}

fn run_quick(cli: &Cli, args: &QuickArgs) -> Result<ExitCode> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    println!(
        "shale bench: {} records, {}-byte keys, {}-byte values, durability {}",
        args.num, args.key_size, args.value_size, cli.durability
    );
    let mut results = Vec::new();
    for &threads in &args.threads {
        let result = run_one(cli, args, threads)?;
        println!(
            "threads {:>2}: put {:>9.0} ops/s | get {:>9.0} ops/s, {:.2} device reads/get, cache hit {:.0}% \
             (cache {} MiB, data {} MiB) | media bytes/user byte {:.2} | index {:.1} B/key est., RSS +{:.1} B/key | reopen {:.3}s",
            threads,
            result.put_ops_per_sec,
            result.get_ops_per_sec,
            result.device_reads_per_get,
            result.cache_hit_ratio * 100.0,
            result.cache_bytes >> 20,
            result.data_bytes >> 20,
            result.media_bytes_written_per_user_byte,
            result.index_bytes_per_key_estimated,
            result.rss_growth_bytes_per_key,
            result.reopen_secs
        );
        results.push(result);
    }
    let path = args.out.join("results.json");
    let report = serde_json::json!({
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "runs": results,
    });
    std::fs::write(&path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!("results written to {}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// Cache budget each engine gets in the suites, unless `--cache-mb` says otherwise.
const SUITE_CACHE_MB_DEFAULT: u64 = 64;

fn common_params(cli: &Cli, args: &CommonArgs) -> CommonParams {
    let engines = if args.engines.is_empty() {
        ENGINES.iter().map(|spec| spec.name.to_string()).collect()
    } else {
        args.engines.clone()
    };
    CommonParams {
        engines,
        threads: args.threads.clone(),
        cache_bytes: cli.cache_mb.unwrap_or(SUITE_CACHE_MB_DEFAULT) << 20,
        data_dir: args.data_dir.clone(),
        out_dir: args.out.clone(),
        rounds: args.rounds,
        equal_rss_secs: args.equal_rss_secs,
        warmup_secs: args.warmup_secs,
        probe_secs: args.probe_secs,
        probe_threads: args.probe_threads,
        compression: args.compression,
    }
}

/// Prints the median throughput per engine and the paired ratios, and where the report is.
fn summarize(report: &SuiteReport, out: &std::path::Path) {
    for ((workload, threads), runs) in shaledb_bench::report::groups(report) {
        let mut line = format!("{workload:<22} {threads:>3} threads:");
        let names = shaledb_bench::report::engines_in(runs.iter().copied());
        for name in &names {
            if let Some(run) = shaledb_bench::report::median_run(&runs, name) {
                line.push_str(&format!("  {name} {:.0} ops/s", run.ops_per_sec));
            }
        }
        for (label, peers) in shaledb_bench::report::comparisons(&names) {
            if let Some((_, ratio)) = shaledb_bench::report::paired_ratios(&runs, &peers) {
                line.push_str(&format!(" (shaledb/{label} {ratio:.2}x)"));
            }
        }
        println!("{line}");
    }
    println!("report: {}", out.join("report.md").display());
}

pub fn run(cli: &Cli, command: &BenchCommand) -> Result<ExitCode> {
    let invocation = std::env::args().collect::<Vec<_>>().join(" ");
    let (report, out) = match command {
        BenchCommand::Quick(args) => return run_quick(cli, args),
        BenchCommand::Transfer(args) => return run_transfers(cli, args),
        BenchCommand::Gc(args) => return run_gc(cli, args),
        BenchCommand::Ycsb(args) => {
            let common = common_params(cli, &args.common);
            let params = YcsbParams {
                workloads: args
                    .workloads
                    .iter()
                    .map(|name| name.to_ascii_lowercase())
                    .collect(),
                records: args.records,
                operations: args.operations,
                duration_secs: args.duration,
                shape: RecordShape {
                    field_count: args.field_count,
                    field_length: args.field_length,
                    compression_ratio: args.compression_ratio,
                },
                targets: if args.target.is_empty() {
                    vec![None]
                } else {
                    args.target
                        .iter()
                        .map(|&ops| (ops > 0.0).then_some(ops))
                        .collect()
                },
                distribution: args
                    .distribution
                    .as_deref()
                    .map(str::parse::<Distribution>)
                    .transpose()?,
            };
            (
                shaledb_bench::suite::run_ycsb(&common, &params)?,
                common.out_dir,
            )
        }
        BenchCommand::Db(args) => {
            let common = common_params(cli, &args.common);
            let params = DbBenchParams {
                benchmarks: args.benchmarks.clone(),
                num: args.num,
                key_size: args.key_size,
                value_size: args.value_size,
                compression_ratio: args.compression_ratio,
                read_write_percent: args.read_write_percent,
                duration_secs: args.duration,
                write_rate_limit: args.write_rate_limit,
            };
            (
                shaledb_bench::suite::run_dbbench(&common, &params)?,
                common.out_dir,
            )
        }
    };
    shaledb_bench::suite::write_outputs(&report, &out, &invocation)?;
    summarize(&report, &out);
    Ok(ExitCode::SUCCESS)
}

/// Transfers between random accounts of two KVSs: each transaction reads two balances and
/// writes both, retried (up to 10 attempts) when it loses a conflict.
fn run_transfers(cli: &Cli, args: &TransferArgs) -> Result<ExitCode> {
    const BALANCE: u64 = 1_000_000;
    println!(
        "shale bench transfer: {} accounts x 2 KVSs, {:.0} s per thread count, durability {}",
        args.accounts, args.seconds, cli.durability
    );
    for &threads in &args.threads {
        let dir = args
            .data_dir
            .join(format!("transfer-{}-{threads}t", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let options = Options {
            durability: cli.durability.parse()?,
            cache_bytes: cli.cache_mb.unwrap_or(256) << 20,
            ..Options::default()
        };
        let db = Db::open(&dir, options)?;
        let (checking, savings) = (db.kvs("checking")?, db.kvs("savings")?);
        for account in 0..args.accounts {
            let mut batch = db.batch();
            batch.put(&checking, account.to_be_bytes(), BALANCE.to_le_bytes());
            batch.put(&savings, account.to_be_bytes(), BALANCE.to_le_bytes());
            db.write(batch)?;
        }
        let deadline = Instant::now() + std::time::Duration::from_secs_f64(args.seconds);
        let committed = std::sync::atomic::AtomicU64::new(0);
        let attempts = std::sync::atomic::AtomicU64::new(0);
        let started = Instant::now();
        std::thread::scope(|scope| -> Result<()> {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| -> Result<()> {
                        let mut rng = rand::thread_rng();
                        let balance = |value: Option<shaledb::Bytes>| {
                            value.map_or(0, |value| {
                                u64::from_le_bytes(value[..].try_into().unwrap_or_default())
                            })
                        };
                        while Instant::now() < deadline {
                            let (from, to) = (
                                rng.gen_range(0..args.accounts),
                                rng.gen_range(0..args.accounts),
                            );
                            let amount = rng.gen_range(1..100u64);
                            db.transact(shaledb::TxnOptions::default(), 10, |txn| {
                                attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let from_balance = balance(txn.get(&checking, from.to_be_bytes())?);
                                let to_balance = balance(txn.get(&savings, to.to_be_bytes())?);
                                let amount = amount.min(from_balance);
                                txn.put(
                                    &checking,
                                    from.to_be_bytes(),
                                    (from_balance - amount).to_le_bytes(),
                                )?;
                                txn.put(
                                    &savings,
                                    to.to_be_bytes(),
                                    (to_balance + amount).to_le_bytes(),
                                )
                            })?;
                            committed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Ok(())
                    })
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|worker| worker.join().expect("transfer thread panicked"))
        })?;
        let elapsed = started.elapsed().as_secs_f64();
        let committed = committed.into_inner();
        let retries = attempts.into_inner() - committed;
        println!(
            "threads {threads:>2}: {:>9.0} transfers/s committed, {retries} conflict retries ({:.2}% of attempts)",
            committed as f64 / elapsed,
            retries as f64 * 100.0 / (committed + retries).max(1) as f64
        );
        drop((checking, savings));
        db.close()?;
        std::fs::remove_dir_all(&dir).ok();
    }
    Ok(ExitCode::SUCCESS)
}

/// Loads `records` keys, then updates them (zipfian or uniform) from one writer thread until
/// `written_multiple` times the data set was written, while a reader thread samples get latency.
/// Reports media bytes written per user byte during the updates (all classes and capacity
/// alone), space amplification at the end, and the reader's latency tail.
fn run_gc(cli: &Cli, args: &GcArgs) -> Result<ExitCode> {
    use shaledb_bench::measure::{OpKind, Recorder};
    use shaledb_bench::ycsb::generator::ScrambledZipfian;
    let dir = args.data_dir.join(format!("gc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let record_bytes = (args.value_size + 23) as u64;
    let data_bytes = args.records * record_bytes;
    let mut options = Options {
        durability: cli.durability.parse()?,
        cache_bytes: cli.cache_mb.map_or(data_bytes / 8, |mib| mib << 20),
        space_target_live_ratio: args.live_ratio,
        cleaner: !args.cleaner_off,
        segment_bytes: args.segment_mb << 20,
        ..Options::default()
    };
    let mut kvs_options = shaledb::KvsOptions::default();
    if let Some(fraction) = args.staging_fraction {
        options.staging_dir = Some(dir.join("staging"));
        options.staging_bytes_max =
            ((data_bytes as f64 * fraction) as u64).max(4 * options.segment_bytes);
        kvs_options.media_policy = shaledb::MediaPolicy::StagingMaxCapacity;
    }
    let db = Db::open(&dir, options.clone())?;
    let kvs = db.kvs_with_options("gc", kvs_options)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let value: Vec<u8> = (0..args.value_size).map(|_| rng.gen()).collect();
    for ordinal in 0..args.records {
        kvs.put(key_for(ordinal, 23), &value)?;
    }
    db.sync()?;
    let before = db.stats();
    let target_bytes = (data_bytes as f64 * args.written_multiple) as u64;
    let zipfian = ScrambledZipfian::new(0, args.records - 1);
    let uniform = args.distribution == "uniform";
    anyhow::ensure!(
        uniform || args.distribution == "zipfian",
        "distribution must be zipfian or uniform"
    );
    let done = std::sync::atomic::AtomicBool::new(false);
    let started = Instant::now();
    let reader = std::thread::scope(|scope| -> Result<Recorder> {
        let reader = scope.spawn(|| -> Result<Recorder> {
            let mut recorder = Recorder::default();
            let mut rng = rand::thread_rng();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let begin = Instant::now();
                kvs.get(key_for(rng.gen_range(0..args.records), 23))?;
                recorder.record(OpKind::Read, begin.elapsed());
            }
            Ok(recorder)
        });
        let mut written = 0u64;
        let mut rng = rand::thread_rng();
        while written < target_bytes {
            let ordinal = if uniform {
                rng.gen_range(0..args.records)
            } else {
                zipfian.next(&mut rng)
            };
            kvs.put(key_for(ordinal, 23), &value)?;
            written += record_bytes;
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().expect("reader thread panicked")
    })?;
    let update_secs = started.elapsed().as_secs_f64();
    db.sync()?;
    let after = db.stats();
    let user = (after.user_bytes_written - before.user_bytes_written).max(1) as f64;
    let written = |stats: &shaledb::Stats, class: Option<&str>| -> u64 {
        stats
            .media
            .iter()
            .filter(|media| class.is_none_or(|name| media.class == name))
            .map(|media| media.bytes_written)
            .sum()
    };
    let all = (written(&after, None) - written(&before, None)) as f64 / user;
    let capacity =
        (written(&after, Some("capacity")) - written(&before, Some("capacity"))) as f64 / user;
    let reads = &reader.summaries()[&OpKind::Read];
    println!(
        "gc: {} records x {} B ({:.0} MiB), {} MiB segments, {} updates of {:.1}x the data set in {:.1} s, live-ratio target {}, {}{}",
        args.records,
        args.value_size,
        data_bytes as f64 / (1 << 20) as f64,
        args.segment_mb,
        args.distribution,
        args.written_multiple,
        update_secs,
        args.live_ratio,
        args.staging_fraction.map_or("capacity only".to_string(), |fraction| format!("staging {:.0}% of live data", fraction * 100.0)),
        if args.cleaner_off { ", cleaner OFF" } else { "" }
    );
    println!(
        "  media bytes written per user byte: {all:.2} (capacity class {capacity:.2}); space amplification {:.2}; \
         cleaner {} segments (avg live fraction {:.2}); throttled {:.2} s",
        after.space_amplification(),
        after.cleaner_segments_cleaned - before.cleaner_segments_cleaned,
        after.cleaner_live_fraction_avg,
        after.throttled_secs
    );
    println!(
        "  concurrent gets: {} | avg {:.0} us | p99 {} us | p99.9 {} us | max {} us",
        reads.count, reads.avg, reads.p99, reads.p999, reads.max
    );
    drop(kvs);
    db.close()?;
    std::fs::remove_dir_all(&dir).ok();
    Ok(ExitCode::SUCCESS)
}
