//! The server's settings, from a TOML file, then `SHALE_...` environment variables, then flags
//! (each later source wins).

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Flags of `shale serve`; each also reads the environment variable it names.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct ServeArgs {
    /// TOML file with any of the settings below (see docs/SERVER.md).
    #[arg(long, env = "SHALE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address for Redis clients [default: 127.0.0.1:6379].
    #[arg(long, env = "SHALE_BIND")]
    pub bind: Option<String>,
    /// Address of the admin HTTP port (/metrics, /livez, /readyz); off unless set.
    #[arg(long, env = "SHALE_ADMIN_BIND")]
    pub admin_bind: Option<String>,
    /// Password clients must AUTH with (prefer the file or SHALE_PASSWORD: flags show in `ps`).
    #[arg(long, env = "SHALE_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Most simultaneous clients [default: 10000].
    #[arg(long, env = "SHALE_MAXCLIENTS")]
    pub maxclients: Option<usize>,
    /// Most bytes of one request [default: 67108864].
    #[arg(long, env = "SHALE_MAX_REQUEST_BYTES")]
    pub max_request_bytes: Option<usize>,
    /// Most bytes of one argument and of one string (Redis's proto-max-bulk-len); string values
    /// longer than 512 KiB are streamed to the engine as they arrive, not buffered
    /// [default: 536870912].
    #[arg(long, env = "SHALE_MAX_BULK_BYTES")]
    pub max_bulk_bytes: Option<usize>,
    /// Longest string a command that works on a whole string in memory (APPEND, SETRANGE,
    /// SETBIT, GETRANGE, BITCOUNT, LCS, INCR, SORT's weights) reads or builds; GET, SET and the
    /// other commands that move a string whole stream it instead [default: 67108864].
    #[arg(long, env = "SHALE_MAX_IN_MEMORY_STRING_BYTES")]
    pub max_in_memory_string_bytes: Option<usize>,
    /// A hash or set is packed into one record while it has at most this many members; past
    /// it, it becomes one record per member for good; 0: never packed [default: 128].
    #[arg(long, env = "SHALE_PACKED_MEMBERS_MAX")]
    pub packed_members_max: Option<usize>,
    /// ... and while its packed record takes at most this many bytes (at most 1048576)
    /// [default: 4096].
    #[arg(long, env = "SHALE_PACKED_BYTES_MAX")]
    pub packed_bytes_max: Option<usize>,
    /// Most bytes of one request before the client authenticates [default: 16384].
    #[arg(long, env = "SHALE_MAX_UNAUTHENTICATED_REQUEST_BYTES")]
    pub max_unauthenticated_request_bytes: Option<usize>,
    /// Most bytes of replies one client may leave unread before it is disconnected
    /// [default: 67108864].
    #[arg(long, env = "SHALE_MAX_OUTPUT_BYTES")]
    pub max_output_bytes: Option<usize>,
    /// Seconds a client may leave a reply unread before it is disconnected [default: 60].
    #[arg(long, env = "SHALE_OUTPUT_STALL_TIMEOUT")]
    pub output_stall_timeout: Option<u64>,
    /// Most bytes all clients' input and output buffers may hold together [default: 1073741824].
    #[arg(long, env = "SHALE_MAX_CLIENT_BUFFERS_BYTES")]
    pub max_client_buffers_bytes: Option<usize>,
    /// Most simultaneous connections to the admin port [default: 16].
    #[arg(long, env = "SHALE_ADMIN_MAXCLIENTS")]
    pub admin_maxclients: Option<usize>,
    /// Seconds a client may stay idle before it is disconnected; 0: never [default: 0].
    #[arg(long, env = "SHALE_IDLE_TIMEOUT")]
    pub idle_timeout: Option<u64>,
    /// Number of databases SELECT can reach [default: 16].
    #[arg(long, env = "SHALE_DATABASES")]
    pub databases: Option<usize>,
    /// Where commands run: `inline` on the network threads, or `pool` on up to pool-threads
    /// blocking threads [default: inline].
    #[arg(long, env = "SHALE_EXECUTOR")]
    pub executor: Option<Executor>,
    /// Most pipelines running at once with the pool executor [default: 64].
    #[arg(long, env = "SHALE_POOL_THREADS")]
    pub pool_threads: Option<usize>,
    /// Most writing commands of one client's pipeline committed together while they write the
    /// same keys' stripes, their replies sent once all are committed; 1: each alone
    /// [default: 64].
    #[arg(long, env = "SHALE_MAX_BATCHED_WRITES")]
    pub max_batched_writes: Option<usize>,
    /// Log level filter (error, warn, info, debug, trace) [default: info].
    #[arg(long, env = "SHALE_LOG_LEVEL")]
    pub log_level: Option<String>,
    /// Also serve memcached's text and meta protocol on this address (off unless given; with a
    /// password set it must be a loopback address: memcached's protocol has no AUTH).
    #[arg(long, env = "SHALE_MEMCACHED")]
    pub memcached: Option<String>,
    /// Most simultaneous memcached clients [default: 1024].
    #[arg(long, env = "SHALE_MEMCACHED_MAXCLIENTS")]
    pub memcached_maxclients: Option<usize>,
    /// At start, read the values the cache held at the last stop back into it, at most this
    /// many keys a second, beside the clients' first requests; 0: off [default: 50000].
    #[arg(long, env = "SHALE_WARM_READS_PER_SEC")]
    pub warm_reads_per_sec: Option<u64>,
    /// Values of at most this many bytes are kept in their keys' index entries, read without
    /// the value cache; 0: none, at most 64 [default: 16].
    #[arg(long, env = "SHALE_INDEX_VALUE_BYTES_MAX")]
    pub index_value_bytes_max: Option<usize>,
    /// Most threads that serve clients; connections are spread over as many of them as serve
    /// the most requests under the load of the moment [default: one per core].
    #[arg(long, env = "SHALE_NETWORK_THREADS")]
    pub network_threads: Option<usize>,
}

/// What the config file may hold.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    db: Option<PathBuf>,
    durability: Option<String>,
    cache_mb: Option<u64>,
    bind: Option<String>,
    admin_bind: Option<String>,
    password: Option<String>,
    maxclients: Option<usize>,
    max_request_bytes: Option<usize>,
    max_bulk_bytes: Option<usize>,
    max_in_memory_string_bytes: Option<usize>,
    packed_members_max: Option<usize>,
    packed_bytes_max: Option<usize>,
    max_unauthenticated_request_bytes: Option<usize>,
    max_output_bytes: Option<usize>,
    output_stall_timeout: Option<u64>,
    max_client_buffers_bytes: Option<usize>,
    admin_maxclients: Option<usize>,
    idle_timeout: Option<u64>,
    databases: Option<usize>,
    log_level: Option<String>,
    memcached: Option<String>,
    memcached_maxclients: Option<usize>,
    warm_reads_per_sec: Option<u64>,
    index_value_bytes_max: Option<usize>,
    network_threads: Option<usize>,
    /// The KVS memcached's items live in [default: "memcached"].
    memcached_kvs: Option<String>,
    executor: Option<Executor>,
    pool_threads: Option<usize>,
    max_batched_writes: Option<usize>,
    /// Database number -> KVS name, for the databases that should not use `redis-N`.
    kvs: Option<BTreeMap<String, String>>,
}

/// KVDB settings given to `shale` itself (global flags); `None` where the user gave none.
#[derive(Debug, Default, Clone)]
pub struct KvdbArgs {
    pub db: Option<PathBuf>,
    pub durability: Option<String>,
    pub cache_mb: Option<u64>,
    pub capacity: Option<PathBuf>,
    pub staging: Option<PathBuf>,
    pub staging_mb: Option<u64>,
    pub space_mb: Option<u64>,
    pub cleaner_deferred_segments: Option<u64>,
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub db: PathBuf,
    pub durability: shaledb::Durability,
    pub cache_bytes: u64,
    pub capacity: Option<PathBuf>,
    pub staging: Option<PathBuf>,
    pub staging_bytes_max: Option<u64>,
    pub space_bytes_max: Option<u64>,
    /// `Options::cleaner_deferred_segments`; `None`: the engine's default.
    pub cleaner_deferred_segments: Option<u64>,
    pub bind: String,
    pub admin_bind: Option<String>,
    pub password: Option<String>,
    pub maxclients: usize,
    pub max_request_bytes: usize,
    pub max_bulk_bytes: usize,
    pub max_in_memory_string_bytes: usize,
    /// When a hash or set is packed into one record.
    pub packing: crate::keyspace::Packing,
    pub max_unauthenticated_request_bytes: usize,
    pub max_output_bytes: usize,
    pub output_stall_timeout: Duration,
    pub max_client_buffers_bytes: usize,
    pub admin_maxclients: usize,
    pub idle_timeout: Option<Duration>,
    /// KVS name of each database, indexed by number.
    pub kvs_names: Vec<String>,
    pub log_level: String,
    pub memcached: Option<String>,
    pub memcached_maxclients: usize,
    pub memcached_kvs: String,
    pub executor: Executor,
    pub pool_threads: usize,
    /// Most writing commands of a pipeline committed as one transaction.
    pub max_batched_writes: usize,
    /// `shaledb::Options::warm_reads_per_sec`.
    pub warm_reads_per_sec: u64,
    /// `shaledb::Options::index_value_bytes_max`.
    pub index_value_bytes_max: usize,
    /// Threads serving clients (`network_threads`).
    pub network_threads: usize,
}

/// Where a connection's commands run.
///
/// Measured with redis-benchmark (50 clients, see docs/SERVER.md): running commands inline on
/// the network threads avoids a thread handoff per pipeline and doubles SET rates. Under
/// durability `sync` too: a pipeline's commits do not wait for fdatasync on the network thread;
/// its replies wait for the syncer (`syncer.rs`), where one fdatasync serves every pipeline
/// waiting (SET at pipeline 16: 154,000/s on the pool, 388,000/s inline). A device read still
/// holds a network thread; commands that may walk many keys always run on the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Executor {
    Inline,
    Pool,
}

pub const DEFAULT_DB: &str = "shale-data";
/// Most network threads: each is an OS thread with its own runtime, and more than cores only
/// adds switching between them.
const NETWORK_THREADS_MAX: usize = 256;

impl Config {
    pub fn resolve(kvdb: &KvdbArgs, args: &ServeArgs) -> Result<Config> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let databases = args.databases.or(file.databases).unwrap_or(16);
        if databases == 0 || databases > 4096 {
            bail!("databases must be between 1 and 4096, not {databases}");
        }
        let mut kvs_names: Vec<String> = (0..databases).map(|n| format!("redis-{n}")).collect();
        for (number, name) in file.kvs.unwrap_or_default() {
            let index: usize = number
                .parse()
                .ok()
                .filter(|&index| index < databases)
                .with_context(|| {
                    format!("[kvs] key {number:?} is not a database number below {databases}")
                })?;
            kvs_names[index] = name;
        }
        let durability = kvdb
            .durability
            .clone()
            .or(file.durability)
            .unwrap_or_else(|| "interval".into());
        let durability: shaledb::Durability = durability
            .parse()
            .with_context(|| format!("durability {durability:?}"))?;
        let config = Config {
            db: kvdb
                .db
                .clone()
                .or(file.db)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DB)),
            durability,
            cache_bytes: kvdb.cache_mb.or(file.cache_mb).unwrap_or(256) << 20,
            capacity: kvdb.capacity.clone(),
            staging: kvdb.staging.clone(),
            staging_bytes_max: kvdb.staging_mb.map(|mib| mib << 20),
            space_bytes_max: kvdb.space_mb.map(|mib| mib << 20),
            cleaner_deferred_segments: kvdb.cleaner_deferred_segments,
            bind: args
                .bind
                .clone()
                .or(file.bind)
                .unwrap_or_else(|| "127.0.0.1:6379".into()),
            admin_bind: args.admin_bind.clone().or(file.admin_bind),
            password: args
                .password
                .clone()
                .or(file.password)
                .filter(|password| !password.is_empty()),
            maxclients: args.maxclients.or(file.maxclients).unwrap_or(10_000),
            max_request_bytes: args
                .max_request_bytes
                .or(file.max_request_bytes)
                .unwrap_or(64 << 20),
            max_bulk_bytes: args
                .max_bulk_bytes
                .or(file.max_bulk_bytes)
                .unwrap_or(512 << 20),
            max_in_memory_string_bytes: args
                .max_in_memory_string_bytes
                .or(file.max_in_memory_string_bytes)
                .unwrap_or(64 << 20),
            packing: crate::keyspace::Packing {
                members_max: args
                    .packed_members_max
                    .or(file.packed_members_max)
                    .unwrap_or(crate::keyspace::Packing::DEFAULT.members_max),
                bytes_max: args
                    .packed_bytes_max
                    .or(file.packed_bytes_max)
                    .unwrap_or(crate::keyspace::Packing::DEFAULT.bytes_max),
            },
            max_unauthenticated_request_bytes: args
                .max_unauthenticated_request_bytes
                .or(file.max_unauthenticated_request_bytes)
                .unwrap_or(16 << 10),
            max_output_bytes: args
                .max_output_bytes
                .or(file.max_output_bytes)
                .unwrap_or(64 << 20),
            output_stall_timeout: Duration::from_secs(
                args.output_stall_timeout
                    .or(file.output_stall_timeout)
                    .unwrap_or(60),
            ),
            max_client_buffers_bytes: args
                .max_client_buffers_bytes
                .or(file.max_client_buffers_bytes)
                .unwrap_or(1 << 30),
            admin_maxclients: args
                .admin_maxclients
                .or(file.admin_maxclients)
                .unwrap_or(16),
            idle_timeout: match args.idle_timeout.or(file.idle_timeout).unwrap_or(0) {
                0 => None,
                secs => Some(Duration::from_secs(secs)),
            },
            kvs_names,
            log_level: args
                .log_level
                .clone()
                .or(file.log_level)
                .unwrap_or_else(|| "info".into()),
            memcached: args.memcached.clone().or(file.memcached),
            memcached_maxclients: args
                .memcached_maxclients
                .or(file.memcached_maxclients)
                .unwrap_or(1024),
            memcached_kvs: file.memcached_kvs.unwrap_or_else(|| "memcached".into()),
            executor: args.executor.or(file.executor).unwrap_or(Executor::Inline),
            pool_threads: args.pool_threads.or(file.pool_threads).unwrap_or(64),
            max_batched_writes: args
                .max_batched_writes
                .or(file.max_batched_writes)
                .unwrap_or(64),
            warm_reads_per_sec: args
                .warm_reads_per_sec
                .or(file.warm_reads_per_sec)
                .unwrap_or(shaledb::Options::default().warm_reads_per_sec),
            index_value_bytes_max: args
                .index_value_bytes_max
                .or(file.index_value_bytes_max)
                .unwrap_or(shaledb::Options::default().index_value_bytes_max),
            network_threads: args
                .network_threads
                .or(file.network_threads)
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
        };
        if config.memcached_maxclients == 0 {
            bail!("memcached_maxclients must be at least 1");
        }
        if config.kvs_names.contains(&config.memcached_kvs) {
            bail!(
                "memcached_kvs {:?} is also a Redis database's KVS",
                config.memcached_kvs
            );
        }
        if config.packing.bytes_max > shaledb::limits::VALUE_BYTES_MAX {
            bail!(
                "packed_bytes_max must not exceed {} (a record's value)",
                shaledb::limits::VALUE_BYTES_MAX
            );
        }
        if config.index_value_bytes_max > shaledb::limits::INDEX_VALUE_BYTES_LIMIT {
            bail!(
                "index_value_bytes_max must not exceed {} (an index entry's value)",
                shaledb::limits::INDEX_VALUE_BYTES_LIMIT
            );
        }
        if !(1..=NETWORK_THREADS_MAX).contains(&config.network_threads) {
            bail!("network_threads must be between 1 and {NETWORK_THREADS_MAX}");
        }
        if config.pool_threads == 0 {
            bail!("pool_threads must be at least 1");
        }
        if config.max_batched_writes == 0 {
            bail!("max_batched_writes must be at least 1");
        }
        if config.maxclients == 0 || config.admin_maxclients == 0 {
            bail!("maxclients and admin_maxclients must be at least 1");
        }
        if config.output_stall_timeout.is_zero() {
            bail!("output_stall_timeout must be at least 1 second");
        }
        if config.max_unauthenticated_request_bytes > config.max_request_bytes {
            bail!("max_unauthenticated_request_bytes must not exceed max_request_bytes");
        }
        if config.max_client_buffers_bytes < config.max_request_bytes {
            bail!("max_client_buffers_bytes must be at least max_request_bytes");
        }
        Ok(config)
    }
}

fn read_file(path: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_beat_file_and_file_beats_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shale.toml");
        std::fs::write(
            &path,
            "bind = \"127.0.0.1:7000\"\nmaxclients = 5\ndurability = \"sync\"\n\
             databases = 4\npassword = \"secret\"\n[kvs]\n0 = \"users\"\n",
        )
        .unwrap();
        let args = ServeArgs {
            config: Some(path.clone()),
            maxclients: Some(7),
            ..ServeArgs::default()
        };
        let config = Config::resolve(&KvdbArgs::default(), &args).unwrap();
        assert_eq!(config.bind, "127.0.0.1:7000");
        assert_eq!(config.maxclients, 7);
        assert_eq!(config.durability, shaledb::Durability::Sync);
        assert_eq!(config.executor, Executor::Inline);
        assert_eq!(config.password.as_deref(), Some("secret"));
        assert_eq!(config.kvs_names, ["users", "redis-1", "redis-2", "redis-3"]);
        assert_eq!(config.db, PathBuf::from(DEFAULT_DB));
        let kvdb = KvdbArgs {
            durability: Some("none".into()),
            ..KvdbArgs::default()
        };
        let config = Config::resolve(&kvdb, &args).unwrap();
        assert_eq!(config.durability, shaledb::Durability::None);
        assert_eq!(config.executor, Executor::Inline);

        // The packing's bounds: from the file, and a packed record past a record's value refused.
        std::fs::write(&path, "packed_members_max = 16\npacked_bytes_max = 1024\n").unwrap();
        let config = Config::resolve(&KvdbArgs::default(), &args).unwrap();
        assert_eq!(
            config.packing,
            crate::keyspace::Packing {
                members_max: 16,
                bytes_max: 1024
            }
        );
        // Values kept in index entries: the default, and from the file.
        assert_eq!(config.index_value_bytes_max, 16);
        std::fs::write(&path, "index_value_bytes_max = 0\n").unwrap();
        let config = Config::resolve(&KvdbArgs::default(), &args).unwrap();
        assert_eq!(config.index_value_bytes_max, 0);

        // Bounds past what a record's value or an index entry holds, and network threads
        // outside 1..=NETWORK_THREADS_MAX, are refused, by name.
        for (too_large, name) in [
            (
                ServeArgs {
                    packed_bytes_max: Some(shaledb::limits::VALUE_BYTES_MAX + 1),
                    ..ServeArgs::default()
                },
                "packed_bytes_max",
            ),
            (
                ServeArgs {
                    index_value_bytes_max: Some(shaledb::limits::INDEX_VALUE_BYTES_LIMIT + 1),
                    ..ServeArgs::default()
                },
                "index_value_bytes_max",
            ),
            (
                ServeArgs {
                    network_threads: Some(0),
                    ..ServeArgs::default()
                },
                "network_threads",
            ),
            (
                ServeArgs {
                    network_threads: Some(NETWORK_THREADS_MAX + 1),
                    ..ServeArgs::default()
                },
                "network_threads",
            ),
        ] {
            let error = Config::resolve(&KvdbArgs::default(), &too_large).unwrap_err();
            assert!(format!("{error:#}").contains(name), "{error:#}");
        }

        std::fs::write(&path, "bogus = 1\n").unwrap();
        let error = Config::resolve(&KvdbArgs::default(), &args).unwrap_err();
        assert!(format!("{error:#}").contains("bogus"), "{error:#}");
    }
}
