//! Server commands: CONFIG, INFO, TIME, FUNCTION, SCRIPT, DBSIZE, FLUSHDB, FLUSHALL.

use super::{
    is, parse_int, syntax_error, wrong_arity, Ctx, Outcome, Shared, COMMANDS, REDIS_VERSION,
};
use crate::glob;
use crate::resp::Reply;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// Redis parameters ShaleDB accepts and reports back but that mean nothing here: the encoding
/// limits of Redis's compact encodings (ShaleDB has one encoding per type), persistence settings
/// (the engine persists everything), and scripting limits (no scripting).
const ACCEPTED: &[(&str, &str)] = &[
    ("save", ""),
    ("appendonly", "no"),
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("hash-max-listpack-entries", "128"),
    ("hash-max-listpack-value", "64"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    ("set-max-intset-entries", "512"),
    ("set-max-listpack-entries", "128"),
    ("set-max-listpack-value", "64"),
    ("list-max-listpack-size", "-2"),
    ("list-compress-depth", "0"),
    ("stream-node-max-bytes", "4096"),
    ("stream-node-max-entries", "100"),
    ("lua-time-limit", "5000"),
    ("busy-reply-threshold", "5000"),
    ("lazyfree-lazy-user-del", "no"),
    ("lazyfree-lazy-user-flush", "no"),
];

/// Redis 7's old names of the parameters above.
const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("lua-time-limit", "busy-reply-threshold"),
];

fn canonical(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canonical)| canonical)
}

/// The values CONFIG SET changed (only parameters in `ACCEPTED`).
#[derive(Default)]
pub struct RedisConfig(parking_lot::Mutex<BTreeMap<String, String>>);

/// Every parameter CONFIG GET knows, with its value now.
fn parameters(shared: &Shared) -> Vec<(String, String)> {
    let config = &shared.config;
    let changed = shared.redis_config.0.lock();
    let mut all: Vec<(String, String)> = vec![
        (
            "appendfsync".into(),
            durability_name(config.durability).into(),
        ),
        ("databases".into(), shared.keyspaces.len().to_string()),
        ("maxclients".into(), shared.client_slots.limit().to_string()),
        ("timeout".into(), shared.idle_timeout.seconds().to_string()),
        ("bind".into(), config.bind.clone()),
        (
            "port".into(),
            config.bind.rsplit(':').next().unwrap_or("").to_string(),
        ),
        (
            "proto-max-bulk-len".into(),
            shared.max_bulk_bytes().to_string(),
        ),
        (
            "client-query-buffer-limit".into(),
            config.max_request_bytes.to_string(),
        ),
        ("dir".into(), config.db.display().to_string()),
    ];
    for (name, default) in ACCEPTED {
        let value = changed.get(*name).map_or(*default, String::as_str);
        all.push((name.to_string(), value.to_string()));
    }
    for (alias, name) in ALIASES {
        let value = all
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, value)| value.clone())
            .unwrap_or_default();
        all.push((alias.to_string(), value));
    }
    all
}

pub(super) fn config(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let shared = ctx.shared;
    let sub = &args[1];
    if is(sub, "GET") {
        if args.len() < 3 {
            return Err(wrong_arity("config|get"));
        }
        let pairs = parameters(shared)
            .into_iter()
            .filter(|(name, _)| {
                args[2..]
                    .iter()
                    .any(|pattern| glob::matches(&pattern.to_ascii_lowercase(), name.as_bytes()))
            })
            .map(|(name, value)| (Reply::text(name), Reply::text(value)))
            .collect();
        return Ok(Reply::Map(pairs));
    }
    if is(sub, "SET") {
        if args.len() < 4 || !args.len().is_multiple_of(2) {
            return Err(wrong_arity("config|set"));
        }
        // Every pair is checked before any is applied, as Redis does.
        let mut updates = Vec::new();
        let mut live = Vec::new();
        for pair in args[2..].chunks(2) {
            let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
            let name = canonical(&name).to_string();
            if let Some(setting) = LiveSetting::named(&name) {
                live.push((setting, setting.parse(&pair[1])?));
                continue;
            }
            if !ACCEPTED.iter().any(|(known, _)| *known == name) {
                return Err(Reply::error(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}' \
                     (ShaleDB applies its own settings at start: see docs/SERVER.md)"
                )));
            }
            updates.push((name, String::from_utf8_lossy(&pair[1]).into_owned()));
        }
        for (setting, value) in live {
            setting.apply(shared, value);
        }
        shared.redis_config.0.lock().extend(updates);
        return Ok(Reply::OK);
    }
    if is(sub, "RESETSTAT") && args.len() == 2 {
        return Ok(Reply::OK);
    }
    Err(Reply::error(format!(
        "ERR CONFIG {} is not supported: ShaleDB reads its settings from its config file, \
         SHALE_ environment variables and flags at start",
        String::from_utf8_lossy(sub).to_ascii_uppercase()
    )))
}

/// Settings CONFIG SET changes in the running server (not in the config file).
#[derive(Clone, Copy)]
enum LiveSetting {
    /// `idle_timeout`, in seconds; 0: never.
    Timeout,
    Maxclients,
    /// `max_bulk_bytes`: the longest argument and string from the next request on.
    ProtoMaxBulkLen,
}

impl LiveSetting {
    fn named(name: &str) -> Option<LiveSetting> {
        match name {
            "timeout" => Some(LiveSetting::Timeout),
            "maxclients" => Some(LiveSetting::Maxclients),
            "proto-max-bulk-len" => Some(LiveSetting::ProtoMaxBulkLen),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            LiveSetting::Timeout => "timeout",
            LiveSetting::Maxclients => "maxclients",
            LiveSetting::ProtoMaxBulkLen => "proto-max-bulk-len",
        }
    }

    /// Redis's bounds: `timeout` is an int of 0 or more, `maxclients` an unsigned int of 1 or
    /// more, `proto-max-bulk-len` at least 1 MiB.
    fn bounds(self) -> (u64, u64) {
        match self {
            LiveSetting::Timeout => (0, i32::MAX as u64),
            LiveSetting::Maxclients => (1, u32::MAX as u64),
            LiveSetting::ProtoMaxBulkLen => (1 << 20, i64::MAX as u64),
        }
    }

    /// The value `arg` sets, or Redis's error naming the parameter.
    fn parse(self, arg: &[u8]) -> Result<u64, Reply> {
        let failed = |why: String| {
            Reply::error(format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
                self.name()
            ))
        };
        let value = std::str::from_utf8(arg)
            .ok()
            .and_then(|text| text.parse::<i64>().ok())
            .ok_or_else(|| failed("argument couldn't be parsed into an integer".into()))?;
        let (low, high) = self.bounds();
        u64::try_from(value)
            .ok()
            .filter(|value| (low..=high).contains(value))
            .ok_or_else(|| {
                failed(format!(
                    "argument must be between {low} and {high} inclusive"
                ))
            })
    }

    fn apply(self, shared: &Shared, value: u64) {
        match self {
            LiveSetting::Timeout => {
                shared.idle_timeout.set_seconds(value);
                shared.input_waits.wake_all();
            }
            LiveSetting::Maxclients => shared.client_slots.set_limit(value as usize),
            LiveSetting::ProtoMaxBulkLen => shared.max_bulk_bytes.store(
                usize::try_from(value).unwrap_or(usize::MAX),
                Ordering::Relaxed,
            ),
        }
    }
}

fn durability_name(durability: shaledb::Durability) -> &'static str {
    match durability {
        shaledb::Durability::Sync => "always",
        shaledb::Durability::Interval(_) => "everysec",
        shaledb::Durability::None => "no",
    }
}

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "keyspace",
    "shaledb",
];

pub(super) fn info(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let shared = ctx.shared;
    let mut sections: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        if !sections.iter().any(|known| known == name) {
            sections.push(name.to_string());
        }
    };
    if args.len() == 1 {
        DEFAULT_SECTIONS.iter().for_each(|name| add(name));
    }
    for arg in &args[1..] {
        let name = String::from_utf8_lossy(arg).to_ascii_lowercase();
        match name.as_str() {
            "default" => DEFAULT_SECTIONS.iter().for_each(|name| add(name)),
            "all" | "everything" => {
                DEFAULT_SECTIONS.iter().for_each(|name| add(name));
                add("commandstats");
            }
            other => add(other),
        }
    }
    let mut out = String::new();
    for section in &sections {
        write_section(shared, section, &mut out)?;
    }
    Ok(Reply::Verbatim(out))
}

fn write_section(shared: &Shared, section: &str, out: &mut String) -> Result<(), Reply> {
    let stats = shared.db.stats();
    match section {
        "server" => {
            let _ = write!(
                out,
                "# Server\r\nredis_version:{REDIS_VERSION}\r\nshaledb_version:{}\r\n\
                 redis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nprocess_id:{}\r\n\
                 tcp_port:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\n\r\n",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                std::env::consts::ARCH,
                std::process::id(),
                shared.config.bind.rsplit(':').next().unwrap_or(""),
                shared.started.elapsed().as_secs(),
                shared.started.elapsed().as_secs() / 86_400,
            );
        }
        "clients" => {
            let _ = write!(
                out,
                "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n\
                 client_buffers_bytes:{}\r\n\r\n",
                shared.connected_clients.load(Ordering::Relaxed),
                shared.client_slots.limit(),
                shared.waiters.len(),
                shared.buffer_budget.used(),
            );
        }
        "memory" => {
            let _ = write!(
                out,
                "# Memory\r\nused_memory:{}\r\nused_memory_rss:{}\r\nshaledb_index_bytes:{}\r\n\
                 shaledb_cache_bytes:{}\r\nshaledb_cache_budget_bytes:{}\r\nmaxmemory:0\r\n\
                 maxmemory_policy:noeviction\r\n\r\n",
                stats.index_bytes + stats.cache_bytes,
                resident_bytes(),
                stats.index_bytes,
                stats.cache_bytes,
                stats.cache_bytes_budget,
            );
        }
        "persistence" => {
            let _ = write!(
                out,
                "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_bgsave_in_progress:0\r\n\
                 aof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\n\r\n",
            );
        }
        "stats" => {
            let _ = write!(
                out,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
                 rejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:0\r\n\
                 clients_closed_by_limit:{}\r\nwrite_commits:{}\r\ncombined_pipelines:{}\r\n\
                 network_threads:{}\r\nnetwork_threads_active:{}\r\nnetwork_threads_load:{}\r\n\
                 network_thread_moves:{}\r\n\r\n",
                shared.connections_received.load(Ordering::Relaxed),
                shared.metrics.commands_processed(),
                shared.metrics.connections_rejected.get(),
                shared.expired_keys.load(Ordering::Relaxed),
                shared.metrics.clients_closed_by_limit.get(),
                shared.write_commits.load(Ordering::Relaxed),
                shared.combiner.jobs_run(),
                shared.network.count,
                shared.network.active.load(Ordering::Relaxed),
                shared.network.shape_name(),
                shared.network.moves.load(Ordering::Relaxed),
            );
        }
        "replication" => {
            let _ = write!(
                out,
                "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:0\r\n\r\n"
            );
        }
        "cpu" => {
            let (user, system) = cpu_seconds();
            let _ = write!(
                out,
                "# CPU\r\nused_cpu_sys:{system:.6}\r\nused_cpu_user:{user:.6}\r\n\
                 used_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n\r\n"
            );
        }
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            for (index, command) in COMMANDS.iter().enumerate() {
                let (calls, failed, micros) = shared.metrics.command_stats(index);
                if calls > 0 {
                    let _ = write!(
                        out,
                        "cmdstat_{}:calls={calls},usec={micros},usec_per_call={:.2},\
                         rejected_calls=0,failed_calls={failed}\r\n",
                        command.name.to_ascii_lowercase(),
                        micros as f64 / calls as f64,
                    );
                }
            }
            out.push_str("\r\n");
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            for (index, keyspace) in shared.keyspaces.iter().enumerate() {
                let keys = keyspace.key_count();
                if keys > 0 {
                    let expires = keyspace.keys_with_expiry()?;
                    let _ = write!(out, "db{index}:keys={keys},expires={expires},avg_ttl=0\r\n");
                }
            }
            out.push_str("\r\n");
        }
        "shaledb" => {
            let hits = stats.cache_hits as f64;
            let lookups = (stats.cache_hits + stats.cache_misses).max(1) as f64;
            let _ = write!(
                out,
                "# ShaleDB\r\nkvdb:{}\r\ndurability:{}\r\ndirect_io:{}\r\nuser_bytes_written:{}\r\n\
                 write_amplification:{:.3}\r\nspace_amplification:{:.3}\r\ncache_hit_ratio:{:.4}\r\n\
                 index_value_hits:{}\r\nindex_keys:{}\r\nlive_bytes:{}\r\ntotal_bytes:{}\r\n\
                 cleaner_segments_cleaned:{}\r\ncleaner_bytes_copied:{}\r\n\
                 cleaner_live_fraction_avg:{:.4}\r\ncleaner_index_walks:{}\r\n\
                 cleaner_steps_deferred:{}\r\n",
                shared.config.db.display(),
                durability_name(shared.config.durability),
                u8::from(stats.direct_io),
                stats.user_bytes_written,
                stats.write_amplification(),
                stats.space_amplification(),
                hits / lookups,
                stats.index_value_hits,
                stats.index_keys,
                stats.live_bytes,
                stats.total_bytes,
                stats.cleaner_segments_cleaned,
                stats.cleaner_bytes_copied,
                stats.cleaner_live_fraction_avg,
                stats.cleaner_index_walks,
                stats.cleaner_steps_deferred,
            );
            for media in &stats.media {
                let _ = write!(
                    out,
                    "media_{0}_bytes_written:{1}\r\nmedia_{0}_bytes_read:{2}\r\nmedia_{0}_segment_bytes:{3}\r\n",
                    media.class, media.bytes_written, media.bytes_read, media.segment_bytes
                );
            }
            for (index, name) in shared.config.kvs_names.iter().enumerate() {
                let _ = write!(out, "db{index}_kvs:{name}\r\n");
            }
            out.push_str("\r\n");
        }
        // Sections Redis has that ShaleDB has nothing for (sentinel, modules, ...) are empty.
        _ => {}
    }
    Ok(())
}

fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|text| text.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// User and system CPU seconds of this process (`/proc/self/stat`, in clock ticks of 1/100 s).
fn cpu_seconds() -> (f64, f64) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|value| value.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 100.0
    };
    (ticks(11), ticks(12))
}

pub(super) fn time(_: &mut Ctx, _: &[Bytes]) -> Outcome {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Ok(Reply::Array(vec![
        Reply::text(now.as_secs().to_string()),
        Reply::text(now.subsec_micros().to_string()),
    ]))
}

/// FUNCTION: ShaleDB runs no functions, so there are none to flush or list.
pub(super) fn function(_: &mut Ctx, args: &[Bytes]) -> Outcome {
    if is(&args[1], "FLUSH") && args.len() <= 3 {
        flush_mode_ok(&args[1..])?;
        return Ok(Reply::OK);
    }
    if is(&args[1], "LIST") {
        return Ok(Reply::Array(Vec::new()));
    }
    Err(Reply::error(
        "ERR FUNCTION is not supported: ShaleDB runs no server-side functions",
    ))
}

/// SCRIPT: ShaleDB runs no scripts, so there are none to flush, and none exist.
pub(super) fn script(_: &mut Ctx, args: &[Bytes]) -> Outcome {
    if is(&args[1], "FLUSH") && args.len() <= 3 {
        flush_mode_ok(&args[1..])?;
        return Ok(Reply::OK);
    }
    if is(&args[1], "EXISTS") && args.len() > 2 {
        return Ok(Reply::Array(
            args[2..].iter().map(|_| Reply::Integer(0)).collect(),
        ));
    }
    Err(Reply::error(
        "ERR SCRIPT is not supported: ShaleDB runs no Lua scripts",
    ))
}

pub(super) fn dbsize(ctx: &mut Ctx, _: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        ctx.shared.keyspaces[ctx.session.db].key_count() as i64,
    ))
}

fn flush_mode_ok(args: &[Bytes]) -> Result<(), Reply> {
    match args.get(1) {
        None => Ok(()),
        Some(mode) if args.len() == 2 && (is(mode, "ASYNC") || is(mode, "SYNC")) => Ok(()),
        Some(_) => Err(syntax_error()),
    }
}

/// Empties database `db`; WATCHers of keys that existed see them touched.
fn flush(ctx: &mut Ctx, db: usize) -> Result<(), Reply> {
    let watched = ctx.shared.watches.watched_in(db);
    let mut view = ctx.tx.on(db);
    for key in watched {
        if view.key_type(&key)?.is_some() {
            view.touch(&key);
        }
    }
    view.flush()?;
    Ok(())
}

pub(super) fn flushdb(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    flush_mode_ok(args)?;
    flush(ctx, ctx.session.db)?;
    Ok(Reply::OK)
}

pub(super) fn flushall(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    flush_mode_ok(args)?;
    for db in 0..ctx.shared.keyspaces.len() {
        flush(ctx, db)?;
    }
    Ok(Reply::OK)
}

/// SWAPDB: the two databases exchange their KVSs, durably; WATCHers of keys that exist in either
/// see them touched, and clients blocked on either are served if they now can be.
pub(super) fn swapdb(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let shared = ctx.shared;
    if ctx.session.in_exec {
        // The swap is not part of the transaction's batch: writes queued before it would commit
        // into the swapped databases. Refused rather than applied out of order.
        return Err(Reply::error(
            "ERR SWAPDB inside MULTI is not supported by ShaleDB",
        ));
    }
    let mut numbers = [0usize; 2];
    for (slot, arg) in numbers.iter_mut().zip(&args[1..3]) {
        *slot = parse_int(arg)
            .ok()
            .and_then(|number| usize::try_from(number).ok())
            .filter(|&number| number < shared.keyspaces.len())
            .ok_or_else(|| Reply::error("ERR invalid first DB index"))?;
    }
    let [first, second] = numbers;
    if first == second {
        return Ok(Reply::OK);
    }
    for db in [first, second] {
        let watched = shared.watches.watched_in(db);
        for key in watched {
            let exists_here = ctx.tx.on(first).key_type(&key)?.is_some();
            let exists_there = ctx.tx.on(second).key_type(&key)?.is_some();
            if exists_here || exists_there {
                ctx.tx.on(db).touch(&key);
            }
        }
    }
    shared.keyspaces[first].swap(&shared.keyspaces[second])?;
    shared.swapped();
    Ok(Reply::OK)
}
