//! The subcommands that work on a KVDB.

use crate::{Cli, Command, KvsAction};
use anyhow::{bail, Context, Result};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use shaledb::{Db, ErrorKind, KvsOptions, Options, TxnOptions};
use std::collections::BTreeMap;
use std::io::{BufRead, BufWriter, Write};
use std::ops::Bound;
use std::process::ExitCode;
use std::time::Instant;

/// Records per batch when loading.
const LOAD_BATCH_RECORDS: usize = 1000;

#[derive(serde::Serialize, serde::Deserialize)]
struct DumpLine {
    kvs: String,
    key: String,
    value: String,
}

/// Whether `command` only reads, so the KVDB is opened read-only and nothing is created.
fn only_reads(command: &Command) -> bool {
    matches!(
        command,
        Command::Get { .. }
            | Command::Scan { .. }
            | Command::Info { .. }
            | Command::Dump
            | Command::Check { .. }
            | Command::Backup { .. }
            | Command::Kvs {
                action: KvsAction::List
            }
    )
}

fn open(cli: &Cli) -> Result<Db> {
    let read_only = cli.read_only || only_reads(&cli.command);
    let salvage = matches!(cli.command, Command::Salvage);
    let options = Options {
        read_only,
        salvage,
        create_if_missing: !read_only && !salvage,
        durability: cli.durability.parse()?,
        cache_bytes: cli.cache_mb.unwrap_or(256) << 20,
        capacity_dir: cli.capacity.clone(),
        staging_dir: cli.staging.clone(),
        staging_bytes_max: cli
            .staging_mb
            .map_or(Options::default().staging_bytes_max, |mib| mib << 20),
        space_bytes_max: cli.space_mb.map(|mib| mib << 20),
        cleaner_deferred_segments: cli
            .cleaner_deferred_segments
            .unwrap_or(Options::default().cleaner_deferred_segments),
        // A one-shot command neither warms the cache (it closes before the warming would pay)
        // nor replaces the warm-keys file a long-running open (`shale serve`) saved with the
        // few keys it touched.
        warm_keys_max_bytes: Some(0),
        ..Options::default()
    };
    Db::open(&cli.db, options).with_context(|| format!("opening KVDB {}", cli.db.display()))
}

fn kvs_name(cli: &Cli) -> &str {
    cli.kvs.as_deref().unwrap_or("default")
}

pub fn run(cli: Cli) -> Result<ExitCode> {
    if let Command::Bench { suite } = &cli.command {
        return crate::bench::run(&cli, suite);
    }
    let db = open(&cli)?;
    let code = run_on(&cli, &db)?;
    db.close().context("closing the KVDB")?;
    Ok(code)
}

fn run_on(cli: &Cli, db: &Db) -> Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match &cli.command {
        Command::Put { key, value } => db.kvs(kvs_name(cli))?.put(key, value)?,
        Command::Get { key } => {
            let kvs = match db.kvs(kvs_name(cli)) {
                Err(error) if error.kind() == ErrorKind::NotFound => return Ok(ExitCode::from(1)),
                kvs => kvs?,
            };
            match kvs.get(key)? {
                Some(value) => {
                    out.write_all(&value)?;
                    out.write_all(b"\n")?;
                }
                None => return Ok(ExitCode::from(1)),
            }
        }
        Command::Del { key } => db.kvs(kvs_name(cli))?.delete(key)?,
        Command::PrefixDel { prefix } => db.kvs(kvs_name(cli))?.prefix_delete(prefix)?,
        Command::Scan {
            prefix,
            start,
            end,
            reverse,
            limit,
        } => {
            let kvs = db.kvs(kvs_name(cli))?;
            let iter = match prefix {
                Some(prefix) => kvs.prefix(prefix),
                None => {
                    let lower = start
                        .as_ref()
                        .map_or(Bound::Unbounded, |key| Bound::Included(key.as_bytes()));
                    let upper = end
                        .as_ref()
                        .map_or(Bound::Unbounded, |key| Bound::Excluded(key.as_bytes()));
                    kvs.range::<&[u8], _>((lower, upper))
                }
            };
            let items: Box<dyn Iterator<Item = shaledb::Result<_>>> = if *reverse {
                Box::new(iter.rev())
            } else {
                Box::new(iter)
            };
            for item in items.take(limit.unwrap_or(usize::MAX)) {
                let (key, value) = item?;
                writeln!(out, "{}\t{}", key.escape_ascii(), value.escape_ascii())?;
            }
        }
        Command::Kvs { action } => match action {
            KvsAction::List => {
                for name in db.list_kvs()? {
                    writeln!(out, "{name}")?;
                }
            }
            KvsAction::Create {
                name,
                prefix_len,
                media_policy,
                compression,
            } => {
                if db.list_kvs()?.contains(name) {
                    bail!("KVS {name:?} already exists");
                }
                db.kvs_with_options(
                    name,
                    KvsOptions {
                        prefix_len: *prefix_len,
                        media_policy: media_policy.parse()?,
                        compression: *compression,
                        ..KvsOptions::default()
                    },
                )?;
            }
            KvsAction::Drop { name } => db.drop_kvs(name)?,
        },
        Command::Info { json } => info(db, *json, &mut out)?,
        Command::Load { file } => load(db, file)?,
        Command::Dump => dump(db, cli.kvs.as_deref(), &mut out)?,
        Command::Check { json } => {
            let report = db.check()?;
            if *json {
                serde_json::to_writer_pretty(&mut out, &report)?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "{} segments, {} records ({} bytes), {} index entries",
                    report.segments, report.records, report.record_bytes, report.index_entries
                )?;
                for line in report
                    .file_errors
                    .iter()
                    .chain(&report.corruptions)
                    .chain(&report.index_errors)
                    .chain(&report.live_bytes_mismatches)
                {
                    writeln!(out, "ERROR {line}")?;
                }
                for line in &report.crash_leftovers {
                    writeln!(out, "NOTE {line} (the next writable open tidies it)")?;
                }
            }
            out.flush()?;
            if !report.is_ok() {
                eprintln!("shale: check found problems");
                return Ok(ExitCode::from(2));
            }
            writeln!(out, "OK")?;
        }
        Command::Txn {
            script,
            validate_reads,
        } => return run_transaction(db, script, *validate_reads, &mut out),
        Command::Compact => {
            let freed = db.compact()?;
            writeln!(out, "freed {freed} segments")?;
        }
        Command::Backup { dest, json } => {
            let report = db.backup(dest)?;
            if *json {
                serde_json::to_writer_pretty(&mut out, &report)?;
                writeln!(out)?;
            } else {
                writeln!(
                    out,
                    "backed up {} KVSs in {} segments ({} bytes) to {}, a KVDB of its own (id {})",
                    report.kvs, report.segments, report.segment_bytes, report.path, report.kvdb_id
                )?;
            }
        }
        Command::Salvage => {
            let report = db
                .recovery_report()
                .salvage
                .clone()
                .expect("a salvage open reports");
            for line in &report.problems {
                writeln!(out, "problem: {line}")?;
            }
            for line in &report.unreadable_regions {
                writeln!(out, "unreadable: {line}")?;
            }
            for line in &report.set_aside {
                writeln!(out, "set aside: {line}")?;
            }
            for line in &report.rescued_segments {
                writeln!(out, "rescued, then set aside: {line}")?;
            }
            writeln!(
                out,
                "{} keys lost, {} keys suspect (stale, or back after a delete); the full report: {}",
                report.lost_keys.len(),
                report.suspect_keys.len(),
                report.report_file.as_deref().unwrap_or("-")
            )?;
            if report.problems.is_empty() {
                writeln!(out, "nothing was damaged")?;
            }
        }
        Command::Bench { .. } | Command::Serve(_) => unreachable!("handled before opening"),
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn info(db: &Db, json: bool, out: &mut impl Write) -> Result<()> {
    let stats = db.stats();
    let names = db.list_kvs()?;
    let options = names
        .iter()
        .map(|name| Ok((name, db.kvs(name)?.options().clone())))
        .collect::<Result<Vec<_>>>()?;
    if json {
        let value = serde_json::json!({
            "path": db.path(),
            "kvs": names,
            "kvs_options": options.iter().cloned().collect::<BTreeMap<_, _>>(),
            "stats": stats,
            "write_amplification": stats.write_amplification(),
            "space_amplification": stats.space_amplification(),
            "recovery": db.recovery_report(),
        });
        serde_json::to_writer_pretty(&mut *out, &value)?;
        writeln!(out)?;
        return Ok(());
    }
    let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
    writeln!(out, "KVDB            {}", db.path().display())?;
    writeln!(out, "KVSs            {}", names.join(", "))?;
    for (name, options) in &options {
        writeln!(
            out,
            "  {name:<13} prefix_len {}, media policy {}, compression {}",
            options.prefix_len,
            serde_json::to_value(options.media_policy)?
                .as_str()
                .unwrap_or("?"),
            options.compression
        )?;
    }
    writeln!(out, "keys            {}", stats.index_keys)?;
    writeln!(
        out,
        "index DRAM      {:.1} MiB (estimated)",
        mib(stats.index_bytes)
    )?;
    writeln!(out, "live data       {:.1} MiB", mib(stats.live_bytes))?;
    writeln!(
        out,
        "on media        {:.1} MiB (space amplification {:.2})",
        mib(stats.total_bytes),
        stats.space_amplification()
    )?;
    for media in &stats.media {
        writeln!(
            out,
            "  {:<13} {} segments, {:.1} MiB on media",
            media.class,
            media.segments,
            mib(media.segment_bytes)
        )?;
        writeln!(
            out,
            "                written {:.1} MiB (clients {:.1}, cleaning {:.1}, checkpoints {:.1}); read {:.1} MiB (gets {:.1}, scans {:.1}, cleaning {:.1})",
            mib(media.bytes_written),
            mib(media.bytes_written_by_clients),
            mib(media.bytes_written_by_cleaning),
            mib(media.bytes_written_by_checkpoints),
            mib(media.bytes_read),
            mib(media.bytes_read_by_gets),
            mib(media.bytes_read_by_scans),
            mib(media.bytes_read_by_cleaning)
        )?;
    }
    for head in &stats.segments_by_head {
        writeln!(
            out,
            "  {:<13} {} segments, {:.1} MiB, {:.1} MiB live",
            head.head,
            head.segments,
            mib(head.segment_bytes),
            mib(head.live_bytes)
        )?;
    }
    writeln!(out, "direct I/O      {}", stats.direct_io)?;
    writeln!(
        out,
        "cache           {:.1} of {:.1} MiB",
        mib(stats.cache_bytes),
        mib(stats.cache_bytes_budget)
    )?;
    writeln!(
        out,
        "cleaner         {} segments cleaned (average live fraction {:.2}), {:.1} MiB copied, {} tombstones dropped",
        stats.cleaner_segments_cleaned,
        stats.cleaner_live_fraction_avg,
        mib(stats.cleaner_bytes_copied),
        stats.cleaner_tombstones_dropped
    )?;
    writeln!(
        out,
        "sorter          {} scattered ranges rewritten in key order, {:.1} MiB copied, {} not queued",
        stats.sorted_ranges,
        mib(stats.sort_bytes_copied),
        stats.sort_ranges_dropped
    )?;
    writeln!(
        out,
        "checkpoints     {} written this session",
        stats.checkpoints_written
    )?;
    Ok(())
}

fn load(db: &Db, file: &str) -> Result<()> {
    let reader: Box<dyn BufRead> = if file == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("opening {file}"))?,
        ))
    };
    let started = Instant::now();
    let mut last_report = Instant::now();
    let mut batch = db.batch();
    let mut loaded = 0u64;
    for (number, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading line {}", number + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let record: DumpLine = serde_json::from_str(&line)
            .with_context(|| format!("line {}: not a dump record", number + 1))?;
        let key = BASE64
            .decode(&record.key)
            .with_context(|| format!("line {}: key is not base64", number + 1))?;
        let value = BASE64
            .decode(&record.value)
            .with_context(|| format!("line {}: value is not base64", number + 1))?;
        batch.put(&db.kvs(&record.kvs)?, key, value);
        loaded += 1;
        if batch.len() >= LOAD_BATCH_RECORDS {
            db.write(std::mem::take(&mut batch))
                .with_context(|| format!("writing the batch ending at line {}", number + 1))?;
        }
        if last_report.elapsed().as_secs() >= 1 {
            eprintln!(
                "loaded {loaded} records ({:.0}/s)",
                loaded as f64 / started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
    }
    db.write(batch)?;
    db.sync()?;
    eprintln!(
        "loaded {loaded} records in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn dump(db: &Db, only: Option<&str>, out: &mut impl Write) -> Result<()> {
    let names = match only {
        Some(name) => vec![name.to_string()],
        None => db.list_kvs()?,
    };
    for name in names {
        for item in db.kvs(&name)?.iter() {
            let (key, value) = item?;
            let line = DumpLine {
                kvs: name.clone(),
                key: BASE64.encode(&key),
                value: BASE64.encode(&value),
            };
            serde_json::to_writer(&mut *out, &line)?;
            writeln!(out)?;
        }
    }
    Ok(())
}

/// Runs a `shale txn` script; see the subcommand's help for the format.
fn run_transaction(
    db: &Db,
    script: &str,
    validate_reads: bool,
    out: &mut impl Write,
) -> Result<ExitCode> {
    let text = if script == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading the script from stdin")?
    } else {
        std::fs::read_to_string(script).with_context(|| format!("reading {script}"))?
    };
    let mut txn = db.begin_with(TxnOptions {
        validate_reads,
        ..TxnOptions::default()
    })?;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let context = || format!("script line {}: {line}", number + 1);
        let mut words = line.splitn(4, char::is_whitespace);
        let operation = words.next().unwrap_or_default();
        let mut argument = |what: &str| {
            words.next().filter(|word| !word.is_empty()).ok_or_else(|| {
                anyhow::anyhow!("script line {}: {operation} needs {what}", number + 1)
            })
        };
        match operation {
            "abort" => {
                txn.abort();
                writeln!(out, "aborted")?;
                return Ok(ExitCode::SUCCESS);
            }
            "put" => {
                let (kvs, key, value) =
                    (argument("a KVS")?, argument("a key")?, argument("a value")?);
                txn.put(&db.kvs(kvs)?, key, value).with_context(context)?;
            }
            "del" => {
                let (kvs, key) = (argument("a KVS")?, argument("a key")?);
                txn.delete(&db.kvs(kvs)?, key).with_context(context)?;
            }
            "get" => {
                let (kvs, key) = (argument("a KVS")?, argument("a key")?);
                match txn.get(&db.kvs(kvs)?, key).with_context(context)? {
                    Some(value) => writeln!(out, "{key}\t{}", value.escape_ascii())?,
                    None => writeln!(out, "{key}\t(none)")?,
                }
            }
            "scan" => {
                let kvs = db.kvs(argument("a KVS")?)?;
                let prefix = words.next().unwrap_or_default().to_string();
                for item in txn.prefix(&kvs, prefix.as_bytes()) {
                    let (key, value) = item.with_context(context)?;
                    writeln!(out, "{}\t{}", key.escape_ascii(), value.escape_ascii())?;
                }
            }
            other => bail!(
                "script line {}: unknown operation {other:?} (put, del, get, scan, abort)",
                number + 1
            ),
        }
    }
    match txn.commit() {
        Ok(()) => {
            writeln!(out, "committed")?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) if error.kind() == ErrorKind::Conflict => {
            out.flush()?;
            eprintln!("shale: {error}; nothing was written, run the script again");
            Ok(ExitCode::from(3))
        }
        Err(error) => Err(error.into()),
    }
}
