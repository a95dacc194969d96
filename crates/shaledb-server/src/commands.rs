//! The command table and every command's implementation.
//!
//! Commands run on a blocking thread (they may read the device or wait for an fdatasync). Writes
//! that read before they write (SET NX, INCR, HSET's count of new fields, ZADD, ...) hold the
//! stripe locks of their keys, so two clients changing one key never interleave; plain reads take
//! no lock. Each write is one engine batch: all of it, or none of it, survives a crash.

use crate::config::Config;
use crate::glob;
use crate::keyspace::{self, Failure, KeyType, Keyspace, ScoreBound, StringValue};
use crate::metrics::Metrics;
use crate::resp::Reply;
use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use shaledb::{Db, ErrorKind, WriteBatch};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The Redis version whose commands and replies this server follows.
pub const REDIS_VERSION: &str = "7.2.0";
const STRIPES: usize = 4096;
/// SCAN cursors remembered at once; the oldest are forgotten first.
const SCAN_CURSORS_MAX: usize = 100_000;
const SCAN_COUNT_DEFAULT: usize = 10;

type Outcome = Result<Reply, Reply>;
type Handler = fn(&Shared, &mut Session, &[Bytes]) -> Outcome;

/// One entry of the command table, with what COMMAND reports about it.
pub struct CommandSpec {
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments including the name, -N at least N.
    arity: i32,
    flags: &'static [&'static str],
    first_key: i32,
    last_key: i32,
    key_step: i32,
    handler: Handler,
}

macro_rules! command {
    ($name:literal, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $handler:expr) => {
        CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            key_step: $step,
            handler: $handler,
        }
    };
}

const READ: &[&str] = &["readonly", "fast"];
const WRITE: &[&str] = &["write", "denyoom"];
const CONN: &[&str] = &["fast", "stale", "loading", "no-auth"];
const ADMIN: &[&str] = &["admin", "noscript"];

pub static COMMANDS: &[CommandSpec] = &[
    command!("PING", -1, CONN, 0, 0, 0, ping),
    command!("ECHO", 2, CONN, 0, 0, 0, echo),
    command!("QUIT", -1, CONN, 0, 0, 0, quit),
    command!("HELLO", -1, CONN, 0, 0, 0, hello),
    command!("AUTH", -2, CONN, 0, 0, 0, auth),
    command!("SELECT", 2, CONN, 0, 0, 0, select),
    command!("CLIENT", -2, CONN, 0, 0, 0, client),
    command!("COMMAND", -1, CONN, 0, 0, 0, command_info),
    command!("CONFIG", -2, ADMIN, 0, 0, 0, config),
    command!("INFO", -1, CONN, 0, 0, 0, info),
    command!("DBSIZE", 1, READ, 0, 0, 0, dbsize),
    command!("FLUSHDB", -1, WRITE, 0, 0, 0, flushdb),
    command!("FLUSHALL", -1, WRITE, 0, 0, 0, flushall),
    command!("TYPE", 2, READ, 1, 1, 1, type_of),
    command!("TTL", 2, READ, 1, 1, 1, ttl),
    command!("PTTL", 2, READ, 1, 1, 1, pttl),
    command!("GET", 2, READ, 1, 1, 1, get),
    command!("SET", -3, WRITE, 1, 1, 1, set),
    command!("SETNX", 3, WRITE, 1, 1, 1, setnx),
    command!("GETDEL", 2, WRITE, 1, 1, 1, getdel),
    command!("MGET", -2, READ, 1, -1, 1, mget),
    command!("MSET", -3, WRITE, 1, -1, 2, mset),
    command!("DEL", -2, WRITE, 1, -1, 1, del),
    command!("UNLINK", -2, WRITE, 1, -1, 1, del),
    command!("EXISTS", -2, READ, 1, -1, 1, exists),
    command!("INCR", 2, WRITE, 1, 1, 1, incr),
    command!("INCRBY", 3, WRITE, 1, 1, 1, incrby),
    command!("DECR", 2, WRITE, 1, 1, 1, decr),
    command!("DECRBY", 3, WRITE, 1, 1, 1, decrby),
    command!("APPEND", 3, WRITE, 1, 1, 1, append),
    command!("STRLEN", 2, READ, 1, 1, 1, strlen),
    command!("SCAN", -2, READ, 0, 0, 0, scan),
    command!("KEYS", 2, READ, 0, 0, 0, keys),
    command!("HSET", -4, WRITE, 1, 1, 1, hset),
    command!("HMSET", -4, WRITE, 1, 1, 1, hmset),
    command!("HGET", 3, READ, 1, 1, 1, hget),
    command!("HMGET", -3, READ, 1, 1, 1, hmget),
    command!("HGETALL", 2, READ, 1, 1, 1, hgetall),
    command!("HDEL", -3, WRITE, 1, 1, 1, hdel),
    command!("HEXISTS", 3, READ, 1, 1, 1, hexists),
    command!("HLEN", 2, READ, 1, 1, 1, hlen),
    command!("ZADD", -4, WRITE, 1, 1, 1, zadd),
    command!("ZREM", -3, WRITE, 1, 1, 1, zrem),
    command!("ZRANGEBYSCORE", -4, READ, 1, 1, 1, zrangebyscore),
    command!("ZRANGE", -4, READ, 1, 1, 1, zrange),
    command!("ZCARD", 2, READ, 1, 1, 1, zcard),
    command!("ZSCORE", 3, READ, 1, 1, 1, zscore),
];

/// State of one client connection.
pub struct Session {
    pub id: u64,
    pub protocol: u8,
    pub authenticated: bool,
    pub db: usize,
    pub name: Option<Bytes>,
    pub library: Option<String>,
    /// Set by QUIT: close after replying.
    pub closing: bool,
}

/// Everything connections share.
pub struct Shared {
    pub db: Arc<Db>,
    pub keyspaces: Vec<Keyspace>,
    pub config: Config,
    pub metrics: Metrics,
    /// Bounds how many pipelines run at once on the blocking pool (`Executor::Pool`).
    pub pool_slots: Arc<tokio::sync::Semaphore>,
    command_index: HashMap<&'static str, usize>,
    stripes: Vec<Mutex<()>>,
    scan_cursors: Mutex<ScanCursors>,
    next_client_id: AtomicU64,
    pub connected_clients: AtomicUsize,
    pub commands_processed: AtomicU64,
    pub connections_received: AtomicU64,
    pub started: Instant,
}

#[derive(Default)]
struct ScanCursors {
    next_id: u64,
    /// Cursor id -> (database, key to resume at).
    positions: HashMap<u64, (usize, Vec<u8>)>,
    order: VecDeque<u64>,
}

impl Shared {
    pub fn new(db: Arc<Db>, config: Config) -> shaledb::Result<Shared> {
        let keyspaces = config
            .kvs_names
            .iter()
            .map(|name| {
                Ok(Keyspace {
                    db: db.clone(),
                    kvs: db.kvs(name)?,
                })
            })
            .collect::<shaledb::Result<Vec<_>>>()?;
        let names: Vec<&str> = COMMANDS.iter().map(|command| command.name).collect();
        Ok(Shared {
            metrics: Metrics::new(db.clone(), &names),
            db,
            keyspaces,
            pool_slots: Arc::new(tokio::sync::Semaphore::new(config.pool_threads)),
            config,
            command_index: names
                .iter()
                .enumerate()
                .map(|(index, name)| (*name, index))
                .collect(),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            scan_cursors: Mutex::new(ScanCursors::default()),
            next_client_id: AtomicU64::new(1),
            connected_clients: AtomicUsize::new(0),
            commands_processed: AtomicU64::new(0),
            connections_received: AtomicU64::new(0),
            started: Instant::now(),
        })
    }

    pub fn new_session(&self) -> Session {
        Session {
            id: self.next_client_id.fetch_add(1, Ordering::Relaxed),
            protocol: 2,
            authenticated: self.config.password.is_none(),
            db: 0,
            name: None,
            library: None,
            closing: false,
        }
    }

    /// Runs one request and returns its reply.
    pub fn execute(&self, session: &mut Session, args: &[Bytes]) -> Reply {
        let Some(index) = self.lookup(&args[0]) else {
            return unknown_command(args);
        };
        let command = &COMMANDS[index];
        let arity_ok = if command.arity >= 0 {
            args.len() == command.arity as usize
        } else {
            args.len() >= command.arity.unsigned_abs() as usize
        };
        if !arity_ok {
            return wrong_arity(command.name);
        }
        if !session.authenticated && !matches!(command.name, "AUTH" | "HELLO" | "QUIT") {
            return Reply::error("NOAUTH Authentication required.");
        }
        self.commands_processed.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        let outcome = (command.handler)(self, session, args);
        self.metrics
            .observe(index, start.elapsed().as_secs_f64(), outcome.is_err());
        outcome.unwrap_or_else(|error| error)
    }

    /// The command-table index of the command `name`, in any letter case.
    fn lookup(&self, name: &[u8]) -> Option<usize> {
        let mut upper = [0u8; 32];
        let upper = upper.get_mut(..name.len())?;
        upper.copy_from_slice(name);
        upper.make_ascii_uppercase();
        let upper = std::str::from_utf8(upper).ok()?;
        self.command_index.get(upper).copied()
    }

    fn keyspace(&self, session: &Session) -> &Keyspace {
        &self.keyspaces[session.db]
    }

    /// Locks the stripes of `keys` in database `db`, in stripe order (no deadlock).
    fn lock<'a>(
        &'a self,
        db: usize,
        keys: impl Iterator<Item = &'a [u8]>,
    ) -> Vec<MutexGuard<'a, ()>> {
        let mut stripes: Vec<usize> = keys.map(|key| stripe_of(db, key)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes
            .into_iter()
            .map(|stripe| self.stripes[stripe].lock())
            .collect()
    }
}

fn stripe_of(db: usize, key: &[u8]) -> usize {
    // FNV-1a: cheap, and good enough to spread keys over stripes.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ db as u64;
    for &byte in key {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % STRIPES as u64) as usize
}

impl From<Failure> for Reply {
    fn from(failure: Failure) -> Reply {
        match failure {
            Failure::WrongType => {
                Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            Failure::TooLarge => Reply::error(format!(
                "ERR key, field or member too large: ShaleDB keys are at most {} bytes including \
                 5 bytes of encoding",
                shaledb::limits::KEY_BYTES_MAX
            )),
            Failure::Engine(error) => engine_error(&error),
        }
    }
}

impl From<shaledb::Error> for Reply {
    fn from(error: shaledb::Error) -> Reply {
        engine_error(&error)
    }
}

fn engine_error(error: &shaledb::Error) -> Reply {
    match error.kind() {
        ErrorKind::NoSpace => Reply::error(format!("ERR out of space, write refused: {error}")),
        ErrorKind::LimitExceeded => Reply::error(format!("ERR too large: {error}")),
        _ => Reply::error(format!("ERR storage engine: {error}")),
    }
}

fn unknown_command(args: &[Bytes]) -> Reply {
    let mut message = format!(
        "ERR unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(&args[0])
    );
    for arg in args.iter().skip(1).take(16) {
        let _ = write!(message, "'{}' ", String::from_utf8_lossy(arg));
    }
    Reply::Error(message)
}

fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{}' command",
        name.to_ascii_lowercase()
    ))
}

fn syntax_error() -> Reply {
    Reply::error("ERR syntax error")
}

fn not_integer() -> Reply {
    Reply::error("ERR value is not an integer or out of range")
}

fn parse_int(arg: &[u8]) -> Result<i64, Reply> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .ok_or_else(not_integer)
}

fn parse_float(arg: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(arg).ok()?;
    let value = match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => text.parse::<f64>().ok()?,
    };
    (!value.is_nan()).then_some(value)
}

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

fn bulk_or_nil(value: Option<Bytes>) -> Reply {
    value.map_or(Reply::Nil, Reply::Bulk)
}

fn scored(members: Vec<(Bytes, f64)>, with_scores: bool, protocol: u8) -> Reply {
    let mut items = Vec::with_capacity(members.len() * if with_scores { 2 } else { 1 });
    for (member, score) in members {
        if !with_scores {
            items.push(Reply::Bulk(member));
        } else if protocol >= 3 {
            items.push(Reply::Array(vec![
                Reply::Bulk(member),
                Reply::Double(score),
            ]));
        } else {
            items.push(Reply::Bulk(member));
            items.push(Reply::Double(score));
        }
    }
    Reply::Array(items)
}

// ---- connection and server commands ----

fn ping(_: &Shared, _: &mut Session, args: &[Bytes]) -> Outcome {
    match args.len() {
        1 => Ok(Reply::Status("PONG")),
        2 => Ok(Reply::Bulk(args[1].clone())),
        _ => Err(wrong_arity("ping")),
    }
}

fn echo(_: &Shared, _: &mut Session, args: &[Bytes]) -> Outcome {
    Ok(Reply::Bulk(args[1].clone()))
}

fn quit(_: &Shared, session: &mut Session, _: &[Bytes]) -> Outcome {
    session.closing = true;
    Ok(Reply::OK)
}

fn check_password(shared: &Shared, user: &[u8], password: &[u8]) -> Result<(), Reply> {
    let Some(expected) = &shared.config.password else {
        return Err(Reply::error(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        ));
    };
    if user == b"default" && password == expected.as_bytes() {
        Ok(())
    } else {
        Err(Reply::error(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ))
    }
}

fn auth(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let (user, password) = match args.len() {
        2 => (&b"default"[..], &args[1][..]),
        3 => (&args[1][..], &args[2][..]),
        _ => return Err(syntax_error()),
    };
    check_password(shared, user, password)?;
    session.authenticated = true;
    Ok(Reply::OK)
}

fn hello(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let mut protocol = session.protocol;
    let mut rest = &args[1..];
    if let Some(version) = rest.first() {
        protocol = match parse_int(version) {
            Ok(2) => 2,
            Ok(3) => 3,
            Ok(_) => return Err(Reply::error("NOPROTO unsupported protocol version")),
            Err(_) => {
                return Err(Reply::error(
                    "ERR Protocol version is not an integer or out of range",
                ))
            }
        };
        rest = &rest[1..];
    }
    let mut name = None;
    while let Some(option) = rest.first() {
        if is(option, "AUTH") && rest.len() >= 3 {
            check_password(shared, &rest[1], &rest[2])?;
            session.authenticated = true;
            rest = &rest[3..];
        } else if is(option, "SETNAME") && rest.len() >= 2 {
            name = Some(rest[1].clone());
            rest = &rest[2..];
        } else {
            return Err(Reply::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(option)
            )));
        }
    }
    if !session.authenticated {
        return Err(Reply::error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        ));
    }
    if let Some(name) = name {
        set_client_name(session, name)?;
    }
    session.protocol = protocol;
    let text = |value: &str| Reply::text(value);
    Ok(Reply::Map(vec![
        (text("server"), text("shaledb")),
        (text("version"), text(REDIS_VERSION)),
        (text("shaledb_version"), text(env!("CARGO_PKG_VERSION"))),
        (text("proto"), Reply::Integer(i64::from(protocol))),
        (text("id"), Reply::Integer(session.id as i64)),
        (text("mode"), text("standalone")),
        (text("role"), text("master")),
        (text("modules"), Reply::Array(Vec::new())),
    ]))
}

fn select(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let index = parse_int(&args[1])?;
    if index < 0 || index as usize >= shared.keyspaces.len() {
        return Err(Reply::error("ERR DB index is out of range"));
    }
    session.db = index as usize;
    Ok(Reply::OK)
}

fn set_client_name(session: &mut Session, name: Bytes) -> Result<(), Reply> {
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(Reply::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    session.name = (!name.is_empty()).then_some(name);
    Ok(())
}

fn client(_: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let sub = &args[1];
    if is(sub, "ID") && args.len() == 2 {
        Ok(Reply::Integer(session.id as i64))
    } else if is(sub, "SETNAME") && args.len() == 3 {
        set_client_name(session, args[2].clone())?;
        Ok(Reply::OK)
    } else if is(sub, "GETNAME") && args.len() == 2 {
        Ok(bulk_or_nil(session.name.clone()))
    } else if is(sub, "SETINFO") && args.len() == 4 {
        let value = String::from_utf8_lossy(&args[3]).into_owned();
        if is(&args[2], "LIB-NAME") {
            session.library = Some(value);
        } else if !is(&args[2], "LIB-VER") {
            return Err(Reply::error(format!(
                "ERR Unrecognized option '{}'",
                String::from_utf8_lossy(&args[2])
            )));
        }
        Ok(Reply::OK)
    } else {
        Err(Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(sub)
        )))
    }
}

fn command_entry(command: &CommandSpec) -> Reply {
    Reply::Array(vec![
        Reply::text(command.name.to_ascii_lowercase()),
        Reply::Integer(i64::from(command.arity)),
        Reply::Array(
            command
                .flags
                .iter()
                .map(|flag| Reply::Status(flag))
                .collect(),
        ),
        Reply::Integer(i64::from(command.first_key)),
        Reply::Integer(i64::from(command.last_key)),
        Reply::Integer(i64::from(command.key_step)),
    ])
}

fn command_info(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Outcome {
    let Some(sub) = args.get(1) else {
        return Ok(Reply::Array(COMMANDS.iter().map(command_entry).collect()));
    };
    let find = |name: &Bytes| shared.lookup(name).map(|index| &COMMANDS[index]);
    if is(sub, "COUNT") {
        Ok(Reply::Integer(COMMANDS.len() as i64))
    } else if is(sub, "INFO") {
        Ok(Reply::Array(
            args[2..]
                .iter()
                .map(|name| find(name).map_or(Reply::NilArray, command_entry))
                .collect(),
        ))
    } else if is(sub, "DOCS") {
        // Clients only need the names to exist; the documentation lives in docs/SERVER.md.
        let names: Vec<&CommandSpec> = if args.len() > 2 {
            args[2..].iter().filter_map(find).collect()
        } else {
            COMMANDS.iter().collect()
        };
        Ok(Reply::Map(
            names
                .into_iter()
                .map(|command| {
                    (
                        Reply::text(command.name.to_ascii_lowercase()),
                        Reply::Map(vec![(Reply::text("summary"), Reply::text(""))]),
                    )
                })
                .collect(),
        ))
    } else if is(sub, "LIST") {
        Ok(Reply::Array(
            COMMANDS
                .iter()
                .map(|command| Reply::text(command.name.to_ascii_lowercase()))
                .collect(),
        ))
    } else {
        Err(Reply::error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        )))
    }
}

fn config(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Outcome {
    if !is(&args[1], "GET") {
        return Err(Reply::error(format!(
            "ERR CONFIG {} is not supported: ShaleDB reads its settings from its config file, \
             SHALE_ environment variables and flags at start",
            String::from_utf8_lossy(&args[1]).to_ascii_uppercase()
        )));
    }
    if args.len() < 3 {
        return Err(wrong_arity("config|get"));
    }
    let config = &shared.config;
    let timeout = config.idle_timeout.map_or(0, |idle| idle.as_secs());
    let values: Vec<(&str, String)> = vec![
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("appendfsync", durability_name(config.durability).into()),
        ("databases", shared.keyspaces.len().to_string()),
        ("maxclients", config.maxclients.to_string()),
        ("timeout", timeout.to_string()),
        ("bind", config.bind.clone()),
        ("maxmemory", "0".into()),
        ("maxmemory-policy", "noeviction".into()),
        ("proto-max-bulk-len", config.max_bulk_bytes.to_string()),
        (
            "client-query-buffer-limit",
            config.max_request_bytes.to_string(),
        ),
        ("dir", config.db.display().to_string()),
    ];
    let mut pairs = Vec::new();
    for (name, value) in values {
        if args[2..]
            .iter()
            .any(|pattern| glob::matches(&pattern.to_ascii_lowercase(), name.as_bytes()))
        {
            pairs.push((Reply::text(name), Reply::text(value)));
        }
    }
    Ok(Reply::Map(pairs))
}

fn durability_name(durability: shaledb::Durability) -> &'static str {
    match durability {
        shaledb::Durability::Sync => "always",
        shaledb::Durability::Interval(_) => "everysec",
        shaledb::Durability::None => "no",
    }
}

fn info(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Outcome {
    let wanted: Vec<String> = args[1..]
        .iter()
        .map(|arg| String::from_utf8_lossy(arg).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|section| matches!(section.as_str(), "all" | "everything" | "default"));
    let want = |section: &str| all || wanted.iter().any(|wanted| wanted == section);
    let stats = shared.db.stats();
    let mut out = String::new();
    if want("server") {
        let _ = write!(
            out,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nshaledb_version:{}\r\nredis_mode:standalone\r\n\
             os:{} {}\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH,
            std::process::id(),
            shared.config.bind.rsplit(':').next().unwrap_or(""),
            shared.started.elapsed().as_secs(),
        );
    }
    if want("clients") {
        let _ = write!(
            out,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n\r\n",
            shared.connected_clients.load(Ordering::Relaxed),
            shared.config.maxclients
        );
    }
    if want("memory") {
        let _ = write!(
            out,
            "# Memory\r\nused_memory:{}\r\nused_memory_rss:{}\r\nshaledb_index_bytes:{}\r\n\
             shaledb_cache_bytes:{}\r\nshaledb_cache_budget_bytes:{}\r\nmaxmemory:0\r\n\r\n",
            stats.index_bytes + stats.cache_bytes,
            resident_bytes(),
            stats.index_bytes,
            stats.cache_bytes,
            stats.cache_bytes_budget,
        );
    }
    if want("stats") {
        let _ = write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             rejected_connections:{}\r\n\r\n",
            shared.connections_received.load(Ordering::Relaxed),
            shared.commands_processed.load(Ordering::Relaxed),
            shared.metrics.connections_rejected.get(),
        );
    }
    if want("keyspace") {
        out.push_str("# Keyspace\r\n");
        for (index, keyspace) in shared.keyspaces.iter().enumerate() {
            let keys = keyspace.key_count()?;
            if keys > 0 {
                let _ = write!(out, "db{index}:keys={keys},expires=0,avg_ttl=0\r\n");
            }
        }
        out.push_str("\r\n");
    }
    if want("shaledb") {
        let hits = stats.cache_hits as f64;
        let lookups = (stats.cache_hits + stats.cache_misses).max(1) as f64;
        let _ = write!(
            out,
            "# ShaleDB\r\nkvdb:{}\r\ndurability:{}\r\ndirect_io:{}\r\nuser_bytes_written:{}\r\n\
             write_amplification:{:.3}\r\nspace_amplification:{:.3}\r\ncache_hit_ratio:{:.4}\r\n\
             index_keys:{}\r\nlive_bytes:{}\r\n",
            shared.config.db.display(),
            durability_name(shared.config.durability),
            u8::from(stats.direct_io),
            stats.user_bytes_written,
            stats.write_amplification(),
            stats.space_amplification(),
            hits / lookups,
            stats.index_keys,
            stats.live_bytes,
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
    Ok(Reply::Verbatim(out))
}

fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|text| text.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn dbsize(shared: &Shared, session: &mut Session, _: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(shared.keyspace(session).key_count()? as i64))
}

fn flush_mode_ok(args: &[Bytes]) -> Result<(), Reply> {
    match args.get(1) {
        None => Ok(()),
        Some(mode) if args.len() == 2 && (is(mode, "ASYNC") || is(mode, "SYNC")) => Ok(()),
        Some(_) => Err(syntax_error()),
    }
}

fn flushdb(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    flush_mode_ok(args)?;
    shared.keyspace(session).flush()?;
    Ok(Reply::OK)
}

fn flushall(shared: &Shared, _: &mut Session, args: &[Bytes]) -> Outcome {
    flush_mode_ok(args)?;
    for keyspace in &shared.keyspaces {
        keyspace.flush()?;
    }
    Ok(Reply::OK)
}

fn type_of(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let found = shared.keyspace(session).key_type(&args[1])?;
    Ok(Reply::Status(found.map_or("none", KeyType::name)))
}

fn remaining_ms(shared: &Shared, session: &Session, key: &[u8]) -> Result<i64, Reply> {
    let keyspace = shared.keyspace(session);
    match keyspace.key_type(key)? {
        None => Ok(-2),
        Some(KeyType::String) => Ok(keyspace
            .read_string(key)?
            .and_then(|value| value.expires_at_ms)
            .map_or(-1, |at| at.saturating_sub(keyspace::now_ms()) as i64)),
        Some(_) => Ok(-1),
    }
}

fn ttl(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let ms = remaining_ms(shared, session, &args[1])?;
    Ok(Reply::Integer(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

fn pttl(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(remaining_ms(shared, session, &args[1])?))
}

// ---- strings ----

fn get(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let value = shared.keyspace(session).read_string(&args[1])?;
    Ok(bulk_or_nil(value.map(|value| value.data)))
}

/// Writes a string in its own batch.
fn put_string(
    keyspace: &Keyspace,
    key: &[u8],
    data: &[u8],
    expires_at_ms: Option<u64>,
) -> Result<(), Reply> {
    let mut batch = WriteBatch::new();
    keyspace.write_string(&mut batch, key, data, expires_at_ms)?;
    keyspace.db.write(batch)?;
    Ok(())
}

fn set(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let (key, data) = (&args[1], &args[2]);
    let (mut only_if_missing, mut only_if_present, mut return_old, mut keep_ttl) =
        (false, false, false, false);
    let mut expires_at_ms = None;
    let mut options = args[3..].iter();
    while let Some(option) = options.next() {
        if is(option, "NX") && !only_if_present {
            only_if_missing = true;
        } else if is(option, "XX") && !only_if_missing {
            only_if_present = true;
        } else if is(option, "GET") {
            return_old = true;
        } else if is(option, "KEEPTTL") && expires_at_ms.is_none() {
            keep_ttl = true;
        } else if ["EX", "PX", "EXAT", "PXAT"]
            .iter()
            .any(|unit| is(option, unit))
            && expires_at_ms.is_none()
            && !keep_ttl
        {
            let amount = parse_int(options.next().ok_or_else(syntax_error)?)?;
            let at = if is(option, "EX") {
                amount
                    .checked_mul(1000)
                    .and_then(|ms| ms.checked_add(keyspace::now_ms() as i64))
            } else if is(option, "PX") {
                amount.checked_add(keyspace::now_ms() as i64)
            } else if is(option, "EXAT") {
                amount.checked_mul(1000)
            } else {
                Some(amount)
            };
            match at {
                Some(at) if amount > 0 => expires_at_ms = Some(at as u64),
                _ => return Err(Reply::error("ERR invalid expire time in 'set' command")),
            }
        } else {
            return Err(syntax_error());
        }
    }
    let keyspace = shared.keyspace(session);
    let _guard = shared.lock(session.db, std::iter::once(&key[..]));
    let needs_old = return_old || only_if_missing || only_if_present || keep_ttl;
    let old = if !needs_old {
        None
    } else if return_old {
        keyspace.read_string(key)?
    } else {
        match keyspace.key_type(key)? {
            Some(KeyType::String) if keep_ttl => keyspace.read_string(key)?,
            Some(_) => Some(StringValue {
                data: Bytes::new(),
                expires_at_ms: None,
            }),
            None => None,
        }
    };
    let exists = old.is_some();
    let old_reply = || bulk_or_nil(old.as_ref().map(|value| value.data.clone()));
    if (only_if_missing && exists) || (only_if_present && !exists) {
        return Ok(if return_old { old_reply() } else { Reply::Nil });
    }
    if keep_ttl {
        expires_at_ms = old.as_ref().and_then(|value| value.expires_at_ms);
    }
    put_string(keyspace, key, data, expires_at_ms)?;
    Ok(if return_old { old_reply() } else { Reply::OK })
}

fn setnx(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let keyspace = shared.keyspace(session);
    let _guard = shared.lock(session.db, std::iter::once(&args[1][..]));
    if keyspace.key_type(&args[1])?.is_some() {
        return Ok(Reply::Integer(0));
    }
    put_string(keyspace, &args[1], &args[2], None)?;
    Ok(Reply::Integer(1))
}

fn getdel(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let keyspace = shared.keyspace(session);
    let _guard = shared.lock(session.db, std::iter::once(&args[1][..]));
    let Some(old) = keyspace.read_string(&args[1])? else {
        return Ok(Reply::Nil);
    };
    let mut batch = WriteBatch::new();
    keyspace.delete_key(&mut batch, &args[1]);
    keyspace.db.write(batch)?;
    Ok(Reply::Bulk(old.data))
}

fn mget(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let keyspace = shared.keyspace(session);
    let mut values = Vec::with_capacity(args.len() - 1);
    for key in &args[1..] {
        // MGET answers nil for keys of other types, as Redis does.
        let value = match keyspace.read_string(key) {
            Ok(value) => value.map(|value| value.data),
            Err(Failure::WrongType) => None,
            Err(other) => return Err(other.into()),
        };
        values.push(bulk_or_nil(value));
    }
    Ok(Reply::Array(values))
}

fn mset(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    if args.len().is_multiple_of(2) {
        return Err(wrong_arity("mset"));
    }
    let keyspace = shared.keyspace(session);
    let _guards = shared.lock(session.db, args[1..].iter().step_by(2).map(|key| &key[..]));
    let mut batch = WriteBatch::new();
    for pair in args[1..].chunks(2) {
        keyspace.write_string(&mut batch, &pair[0], &pair[1], None)?;
    }
    keyspace.db.write(batch)?;
    Ok(Reply::OK)
}

fn del(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let keyspace = shared.keyspace(session);
    let _guards = shared.lock(session.db, args[1..].iter().map(|key| &key[..]));
    let mut batch = WriteBatch::new();
    let mut deleted = HashSet::new();
    for key in &args[1..] {
        if !deleted.contains(key) && keyspace.key_type(key)?.is_some() {
            keyspace.delete_key(&mut batch, key);
            deleted.insert(key.clone());
        }
    }
    if !deleted.is_empty() {
        keyspace.db.write(batch)?;
    }
    Ok(Reply::Integer(deleted.len() as i64))
}

fn exists(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let keyspace = shared.keyspace(session);
    let mut count = 0;
    for key in &args[1..] {
        if keyspace.key_type(key)?.is_some() {
            count += 1;
        }
    }
    Ok(Reply::Integer(count))
}

fn add_to_integer(shared: &Shared, session: &Session, key: &[u8], delta: i64) -> Outcome {
    let keyspace = shared.keyspace(session);
    let _guard = shared.lock(session.db, std::iter::once(key));
    let old = keyspace.read_string(key)?;
    let current = match &old {
        Some(value) => parse_int(&value.data)?,
        None => 0,
    };
    let updated = current
        .checked_add(delta)
        .ok_or_else(|| Reply::error("ERR increment or decrement would overflow"))?;
    put_string(
        keyspace,
        key,
        updated.to_string().as_bytes(),
        old.and_then(|value| value.expires_at_ms),
    )?;
    Ok(Reply::Integer(updated))
}

fn incr(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    add_to_integer(shared, session, &args[1], 1)
}

fn incrby(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    add_to_integer(shared, session, &args[1], parse_int(&args[2])?)
}

fn decr(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    add_to_integer(shared, session, &args[1], -1)
}

fn decrby(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let delta = parse_int(&args[2])?
        .checked_neg()
        .ok_or_else(|| Reply::error("ERR decrement would overflow"))?;
    add_to_integer(shared, session, &args[1], delta)
}

fn append(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let keyspace = shared.keyspace(session);
    let _guard = shared.lock(session.db, std::iter::once(&args[1][..]));
    let old = keyspace.read_string(&args[1])?;
    let mut data = old
        .as_ref()
        .map_or_else(Vec::new, |value| value.data.to_vec());
    data.extend_from_slice(&args[2]);
    put_string(
        keyspace,
        &args[1],
        &data,
        old.and_then(|value| value.expires_at_ms),
    )?;
    Ok(Reply::Integer(data.len() as i64))
}

fn strlen(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let value = shared.keyspace(session).read_string(&args[1])?;
    Ok(Reply::Integer(
        value.map_or(0, |value| value.data.len()) as i64
    ))
}

// ---- keys ----

fn scan(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let cursor: u64 = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| Reply::error("ERR invalid cursor"))?;
    let mut pattern = None;
    let mut count = SCAN_COUNT_DEFAULT;
    let mut wanted_type = None;
    let mut options = args[2..].iter();
    while let Some(option) = options.next() {
        let value = options.next().ok_or_else(syntax_error)?;
        if is(option, "MATCH") {
            pattern = Some(value.clone());
        } else if is(option, "COUNT") {
            count = usize::try_from(parse_int(value)?)
                .ok()
                .filter(|&count| count > 0)
                .ok_or_else(syntax_error)?;
        } else if is(option, "TYPE") {
            wanted_type = Some(String::from_utf8_lossy(value).to_ascii_lowercase());
        } else {
            return Err(syntax_error());
        }
    }
    let resume = if cursor == 0 {
        Vec::new()
    } else {
        match shared.scan_cursors.lock().positions.get(&cursor) {
            Some((db, resume)) if *db == session.db => resume.clone(),
            _ => return Err(Reply::error("ERR invalid cursor")),
        }
    };
    let mut found = Vec::new();
    let next = shared
        .keyspace(session)
        .walk_keys(&resume, count, |key, key_type| {
            let type_ok = wanted_type
                .as_deref()
                .is_none_or(|wanted| wanted == key_type.name());
            let pattern_ok = pattern
                .as_ref()
                .is_none_or(|pattern| glob::matches(pattern, key));
            if type_ok && pattern_ok {
                found.push(Reply::bulk(Bytes::copy_from_slice(key)));
            }
        })?;
    let next_cursor = match next {
        None => 0,
        Some(resume) => {
            let mut cursors = shared.scan_cursors.lock();
            cursors.next_id += 1;
            let id = cursors.next_id;
            cursors.positions.insert(id, (session.db, resume));
            cursors.order.push_back(id);
            if cursors.order.len() > SCAN_CURSORS_MAX {
                if let Some(oldest) = cursors.order.pop_front() {
                    cursors.positions.remove(&oldest);
                }
            }
            id
        }
    };
    Ok(Reply::Array(vec![
        Reply::text(next_cursor.to_string()),
        Reply::Array(found),
    ]))
}

fn keys(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let mut found = Vec::new();
    shared
        .keyspace(session)
        .walk_keys(&[], usize::MAX, |key, _| {
            if glob::matches(&args[1], key) {
                found.push(Reply::bulk(Bytes::copy_from_slice(key)));
            }
        })?;
    Ok(Reply::Array(found))
}

// ---- hashes ----

fn field_pairs(args: &[Bytes], command: &str) -> Result<Vec<(Bytes, Bytes)>, Reply> {
    if !args.len().is_multiple_of(2) {
        return Err(wrong_arity(command));
    }
    Ok(args[2..]
        .chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect())
}

fn hset(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let pairs = field_pairs(args, "hset")?;
    let _guard = shared.lock(session.db, std::iter::once(&args[1][..]));
    let added = shared.keyspace(session).hash_set(&args[1], &pairs)?;
    Ok(Reply::Integer(added as i64))
}

fn hmset(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let pairs = field_pairs(args, "hmset")?;
    let _guard = shared.lock(session.db, std::iter::once(&args[1][..]));
    shared.keyspace(session).hash_set(&args[1], &pairs)?;
    Ok(Reply::OK)
}

fn hget(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    Ok(bulk_or_nil(
        shared.keyspace(session).hash_get(&args[1], &args[2])?,
    ))
}

fn hmget(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let values = shared
        .keyspace(session)
        .hash_multi_get(&args[1], &args[2..])?;
    Ok(Reply::Array(values.into_iter().map(bulk_or_nil).collect()))
}

fn hgetall(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let pairs = shared.keyspace(session).hash_all(&args[1])?;
    Ok(Reply::Map(
        pairs
            .into_iter()
            .map(|(field, value)| (Reply::Bulk(field), Reply::Bulk(value)))
            .collect(),
    ))
}

fn hdel(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let _guard = shared.lock(session.db, std::iter::once(&args[1][..]));
    let removed = shared.keyspace(session).hash_delete(&args[1], &args[2..])?;
    Ok(Reply::Integer(removed as i64))
}

fn hexists(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let found = shared.keyspace(session).hash_contains(&args[1], &args[2])?;
    Ok(Reply::Integer(i64::from(found)))
}

fn hlen(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        shared.keyspace(session).hash_len(&args[1])? as i64
    ))
}

// ---- sorted sets ----

fn zadd(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut increment) =
        (false, false, false, false, false, false);
    let mut position = 2;
    while let Some(option) = args.get(position) {
        match option.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            b"CH" => ch = true,
            b"INCR" => increment = true,
            _ => break,
        }
        position += 1;
    }
    let rest = &args[position..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(syntax_error());
    }
    if nx && xx {
        return Err(Reply::error(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (gt && lt) || (nx && (gt || lt)) {
        return Err(Reply::error(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if increment && rest.len() != 2 {
        return Err(Reply::error(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for pair in rest.chunks(2) {
        let score =
            parse_float(&pair[0]).ok_or_else(|| Reply::error("ERR value is not a valid float"))?;
        pairs.push((score, pair[1].clone()));
    }
    let key = &args[1];
    let keyspace = shared.keyspace(session);
    let _guard = shared.lock(session.db, std::iter::once(&key[..]));
    keyspace.expect_type(key, KeyType::ZSet)?;
    // Scores as this command leaves them, so a member named twice is handled like Redis does.
    let mut scores: HashMap<Bytes, Option<f64>> = HashMap::new();
    let mut batch = WriteBatch::new();
    let (mut added, mut changed) = (0i64, 0i64);
    let mut incremented = None;
    for (score, member) in pairs {
        let old = match scores.get(&member) {
            Some(known) => *known,
            None => keyspace.zset_score(key, &member)?,
        };
        if (nx && old.is_some()) || (xx && old.is_none()) {
            continue;
        }
        let new = if increment {
            let sum = old.unwrap_or(0.0) + score;
            if sum.is_nan() {
                return Err(Reply::error("ERR resulting score is not a number (NaN)"));
            }
            sum
        } else {
            score
        };
        if let Some(old) = old {
            if (gt && new <= old) || (lt && new >= old) {
                continue;
            }
            if new == old {
                incremented = Some(new);
                continue;
            }
            changed += 1;
        } else {
            added += 1;
        }
        keyspace.zset_put(&mut batch, key, &member, new, old)?;
        scores.insert(member, Some(new));
        incremented = Some(new);
    }
    if !batch.is_empty() {
        keyspace.db.write(batch)?;
    }
    if increment {
        return Ok(incremented.map_or(Reply::Nil, Reply::Double));
    }
    Ok(Reply::Integer(if ch { added + changed } else { added }))
}

fn zrem(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let key = &args[1];
    let keyspace = shared.keyspace(session);
    let _guard = shared.lock(session.db, std::iter::once(&key[..]));
    let mut batch = WriteBatch::new();
    let mut removed = HashSet::new();
    for member in &args[2..] {
        if removed.contains(member) {
            continue;
        }
        if let Some(score) = keyspace.zset_score(key, member)? {
            keyspace.zset_remove(&mut batch, key, member, score)?;
            removed.insert(member.clone());
        }
    }
    if !removed.is_empty() {
        keyspace.db.write(batch)?;
    }
    Ok(Reply::Integer(removed.len() as i64))
}

fn parse_score_bound(arg: &[u8]) -> Option<ScoreBound> {
    let (exclusive, text) = match arg.strip_prefix(b"(") {
        Some(rest) => (true, rest),
        None => (false, arg),
    };
    Some(ScoreBound {
        score: parse_float(text)?,
        exclusive,
    })
}

fn zrangebyscore(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let bounds = parse_score_bound(&args[2]).zip(parse_score_bound(&args[3]));
    let (min, max) = bounds.ok_or_else(|| Reply::error("ERR min or max is not a float"))?;
    let mut with_scores = false;
    let (mut offset, mut limit) = (0usize, None);
    let mut position = 4;
    while let Some(option) = args.get(position) {
        if is(option, "WITHSCORES") {
            with_scores = true;
            position += 1;
        } else if is(option, "LIMIT") && args.len() >= position + 3 {
            let start = parse_int(&args[position + 1])?;
            let count = parse_int(&args[position + 2])?;
            if start < 0 {
                return Ok(Reply::Array(Vec::new()));
            }
            offset = start as usize;
            limit = (count >= 0).then_some(count as usize);
            position += 3;
        } else {
            return Err(syntax_error());
        }
    }
    let members = shared
        .keyspace(session)
        .zset_range_by_score(&args[1], min, max, offset, limit)?;
    Ok(scored(members, with_scores, session.protocol))
}

fn zrange(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let with_scores = match args.get(4) {
        None => false,
        Some(option) if args.len() == 5 && is(option, "WITHSCORES") => true,
        Some(_) => {
            return Err(Reply::error(
                "ERR syntax error: ShaleDB supports ZRANGE key start stop [WITHSCORES]; use \
                 ZRANGEBYSCORE for score ranges",
            ))
        }
    };
    let (start, stop) = (parse_int(&args[2])?, parse_int(&args[3])?);
    let keyspace = shared.keyspace(session);
    let length = keyspace.zset_len(&args[1])? as i64;
    let start = if start < 0 {
        (length + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        length + stop
    } else {
        stop.min(length - 1)
    };
    if start > stop || start >= length {
        return Ok(Reply::Array(Vec::new()));
    }
    let members = keyspace.zset_range_by_rank(&args[1], start as usize, stop as usize)?;
    Ok(scored(members, with_scores, session.protocol))
}

fn zcard(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        shared.keyspace(session).zset_len(&args[1])? as i64
    ))
}

fn zscore(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Outcome {
    let score = shared.keyspace(session).zset_score(&args[1], &args[2])?;
    Ok(score.map_or(Reply::Nil, Reply::Double))
}
