//! `shale`: the ShaleDB command-line tool.

mod allocator;
mod bench;
mod commands;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "shale",
    version,
    about = "ShaleDB: a key-value storage engine for flash"
)]
struct Cli {
    /// The KVDB's home directory (commands that write create it when missing or empty).
    #[arg(long, global = true, env = "SHALE_DB", default_value = "shale-data")]
    db: PathBuf,
    /// Open the KVDB read-only: nothing is written (works on a read-only file system); commands
    /// that write fail. get, scan, info, dump, check and `kvs list` always open read-only.
    #[arg(long, global = true)]
    read_only: bool,
    /// The KVS to work on (created on first use). `dump` takes every KVS unless this is given.
    #[arg(long, global = true)]
    kvs: Option<String>,
    /// Durability: sync, none, interval or interval:MS.
    #[arg(long, global = true, default_value = "interval")]
    durability: String,
    /// Capacity media class directory (default: HOME/capacity); fixed when the KVDB is created.
    #[arg(long, global = true)]
    capacity: Option<PathBuf>,
    /// Staging media class directory (fast device); fixed when the KVDB is created.
    #[arg(long, global = true)]
    staging: Option<PathBuf>,
    /// Staging budget in MiB (default 4096).
    #[arg(long, global = true)]
    staging_mb: Option<u64>,
    /// Most MiB the capacity class may hold (default: what its file system holds); writes past
    /// it are refused with an out-of-space error.
    #[arg(long, global = true)]
    space_mb: Option<u64>,
    /// Segments of dead data past the space target the cleaner leaves for a pause in client
    /// writes (default 2; 0: clean during writes as soon as the target says).
    #[arg(long, global = true, env = "SHALE_CLEANER_DEFERRED_SEGMENTS")]
    cleaner_deferred_segments: Option<u64>,
    /// DRAM cache budget in MiB (KVDB commands: 256; benchmarks: the budget each engine gets).
    #[arg(long, global = true)]
    cache_mb: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Set KEY to VALUE.
    Put { key: String, value: String },
    /// Print KEY's value and a newline; exit 1 when it has none, 4 when its record is damaged.
    Get { key: String },
    /// Delete KEY.
    Del { key: String },
    /// Delete every key starting with PREFIX.
    PrefixDel { prefix: String },
    /// Print keys and values in order, one `key<TAB>value` a line (bytes escaped).
    Scan {
        #[arg(long)]
        prefix: Option<String>,
        /// First key (inclusive).
        #[arg(long)]
        start: Option<String>,
        /// Last key (exclusive).
        #[arg(long)]
        end: Option<String>,
        #[arg(long)]
        reverse: bool,
        #[arg(long)]
        limit: Option<usize>,
    },
    /// List, create or drop KVSs.
    Kvs {
        #[command(subcommand)]
        action: KvsAction,
    },
    /// Counters and space, human-readable or JSON.
    Info {
        #[arg(long)]
        json: bool,
    },
    /// Load JSON Lines ({"kvs","key","value"}, key and value base64) from FILE or - (stdin).
    Load { file: String },
    /// Write every record as JSON Lines ({"kvs","key","value"}, key and value base64).
    Dump,
    /// Verify everything recovery relies on (manifest, checkpoint, every segment file against the
    /// manifest, every record, the index, the live-byte counters); exit 2 and name file and
    /// offset of each problem.
    Check {
        #[arg(long)]
        json: bool,
    },
    /// Run the cleaner now over every segment with dead data.
    Compact,
    /// Copy the KVDB as it is now into DEST (missing or empty), a KVDB of its own with a new
    /// id; every copied segment is read back and verified, and the copy is a KVDB only once
    /// complete. The source is opened read-only (`Db::backup` copies one that is being written).
    Backup {
        dest: std::path::PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Open a damaged KVDB anyway: keep every readable record, set damaged files aside (never
    /// deleted), rebuild a lost manifest, and report what may be lost or may have come back
    /// (also written to a salvage-report-*.json in the home). The KVDB then opens normally.
    Salvage,
    /// Run a script of operations in one transaction, committed at its end (exit 3 on conflict).
    ///
    /// One operation a line: `put KVS KEY VALUE`, `del KVS KEY`, `get KVS KEY`,
    /// `scan KVS [PREFIX]`, or `abort`. VALUE is the rest of the line; `#` starts a comment.
    Txn {
        /// The script file, or - for standard input.
        script: String,
        /// Also fail on conflicts with the keys the script read (prevents write skew).
        #[arg(long)]
        validate_reads: bool,
    },
    /// Serve the KVDB to Redis clients (RESP2/RESP3); see docs/SERVER.md.
    Serve(shaledb_server::ServeArgs),
    /// Benchmarks: YCSB and db_bench suites side by side with peer engines, or a quick self-test.
    Bench {
        #[command(subcommand)]
        suite: bench::BenchCommand,
    },
}

#[derive(Subcommand)]
enum KvsAction {
    List,
    Create {
        name: String,
        /// Prefix length for prefix deletes (0: any length).
        #[arg(long, default_value_t = 0)]
        prefix_len: usize,
        /// capacity_only, staging_only or staging_max_capacity.
        #[arg(long, default_value = "capacity_only")]
        media_policy: String,
        /// How values are stored: none, or lz4 (each value compressed when that makes it
        /// smaller). Fixed at creation.
        #[arg(long, default_value = "none")]
        compression: shaledb::Compression,
    },
    Drop {
        name: String,
    },
}

fn main() -> ExitCode {
    allocator::install();
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    if let Command::Serve(args) = &cli.command {
        return serve(&cli, &matches, args);
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHALE_LOG")
                .unwrap_or_else(|_| "warn,usvg=error".into()),
        )
        .init();
    match commands::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("shale: {error:#}");
            exit_code_for(&error)
        }
    }
}

/// Exit status of a failed command: 4 when data was found damaged (`ErrorKind::Corruption`),
/// so a script can tell it from "not found" (1) and from other errors (2).
fn exit_code_for(error: &anyhow::Error) -> ExitCode {
    let corrupt = error.chain().any(|cause| {
        cause
            .downcast_ref::<shaledb::Error>()
            .is_some_and(|error| error.kind() == shaledb::ErrorKind::Corruption)
    });
    ExitCode::from(if corrupt { 4 } else { 2 })
}

/// `shale serve`: global KVDB flags the user gave beat the config file; defaults do not.
fn serve(cli: &Cli, matches: &clap::ArgMatches, args: &shaledb_server::ServeArgs) -> ExitCode {
    let given = |id: &str| {
        matches!(
            matches.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    };
    let kvdb = shaledb_server::KvdbArgs {
        db: given("db").then(|| cli.db.clone()),
        durability: given("durability").then(|| cli.durability.clone()),
        cache_mb: cli.cache_mb,
        capacity: cli.capacity.clone(),
        staging: cli.staging.clone(),
        staging_mb: cli.staging_mb,
        space_mb: cli.space_mb,
        cleaner_deferred_segments: cli.cleaner_deferred_segments,
    };
    let config = match shaledb_server::Config::resolve(&kvdb, args) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("shale: {error:#}");
            return ExitCode::from(2);
        }
    };
    shaledb_server::init_logging(&config.log_level);
    match shaledb_server::serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = %format!("{error:#}"), "server failed");
            ExitCode::from(2)
        }
    }
}
