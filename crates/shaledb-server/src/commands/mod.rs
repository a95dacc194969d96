//! The command table, how a command runs, and what connections share.
//!
//! A command runs against a [`Tx`]: it reads through it and writes into it, and the dispatcher
//! commits it as one engine batch when the command succeeds (EXEC: after all of its commands).
//! Commands that write hold the stripe locks of every key they name from before their first
//! read until after their commit, so two clients changing one key never interleave, and WATCH
//! sees every write to a watched key. Plain reads take no lock. Each module holds the commands
//! of one Redis type or area; this one holds the table, the dispatcher and the shared helpers.

mod bits;
mod blocking;
mod connection;
mod hashes;
mod keys;
mod lists;
mod server;
mod sets;
mod sort;
mod strings;
mod transactions;
mod zsets;

use crate::buffers::BufferBudget;
use crate::clients::{ClientSlots, IdleTimeout, InputWaits};
use crate::combiner::Combiner;
use crate::config::Config;
use crate::keyspace::{
    self, stripe_of, BlobIds, BlobReader, Failure, Keyspace, StagedBlob, StringInput, StringValue,
    Tx, View, STRIPES,
};
use crate::metrics::{CommandTally, Metrics};
use crate::network_threads::Balance;
use crate::resp::{self, ChunkSource, Reply, StreamedBulk};
use crate::stripes::{StripeGuard, StripeLock};
use crate::syncer::Syncer;
pub use blocking::Waiter;
use bytes::Bytes;
use parking_lot::Mutex;
use shaledb::{Db, ErrorKind, SyncPoint};
use smallvec::SmallVec;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};
pub use strings::takes_streamed_value;
pub use transactions::Watches;

/// The Redis version whose commands and replies this server follows.
pub const REDIS_VERSION: &str = "7.2.0";
/// SCAN cursors remembered at once; the oldest are forgotten first.
const SCAN_CURSORS_MAX: usize = 100_000;

type Outcome = Result<Reply, Reply>;
type Handler = fn(&mut Ctx<'_, '_>, &[Bytes]) -> Outcome;

/// Which arguments of a command are keys: what a writing command locks, what COMMAND reports.
#[derive(Clone, Copy, Debug)]
pub enum KeySpec {
    None,
    /// Redis's first, last (negative: from the end) and step.
    Range(i32, i32, i32),
    /// `numkeys` at this index, the keys after it (ZUNION, SINTERCARD, ...); with a destination
    /// key at index 1 when `store`.
    NumKeys {
        at: usize,
        store: bool,
    },
    /// Every key of every database (FLUSHALL, SWAPDB, ...).
    All,
}

/// One entry of the command table, with what COMMAND reports about it.
pub struct CommandSpec {
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments including the name, -N at least N.
    arity: i32,
    flags: &'static [&'static str],
    keys: KeySpec,
    handler: Handler,
}

impl CommandSpec {
    fn writes(&self) -> bool {
        self.flags.contains(&"write")
    }

    /// Commands that may walk many keys: run off the network threads (see `connection`).
    pub fn is_slow(&self) -> bool {
        self.flags.contains(&"slow")
    }
}

const fn spec(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: KeySpec,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        handler,
    }
}

const READ: &[&str] = &["readonly", "fast"];
const READ_SLOW: &[&str] = &["readonly", "slow"];
const WRITE: &[&str] = &["write", "denyoom"];
const CONN: &[&str] = &["fast", "stale", "loading", "no-auth"];
const ADMIN: &[&str] = &["admin", "noscript"];
const ADMIN_SLOW: &[&str] = &["admin", "noscript", "slow"];
const TXN: &[&str] = &["noscript", "loading", "stale", "fast", "allow-busy"];
const ONE: KeySpec = KeySpec::Range(1, 1, 1);
const ALL_KEYS: KeySpec = KeySpec::Range(1, -1, 1);
const NO_KEYS: KeySpec = KeySpec::None;

pub static COMMANDS: &[CommandSpec] = &[
    spec("PING", -1, CONN, NO_KEYS, connection::ping),
    spec("ECHO", 2, CONN, NO_KEYS, connection::echo),
    spec("QUIT", -1, CONN, NO_KEYS, connection::quit),
    spec("RESET", 1, CONN, NO_KEYS, connection::reset),
    spec("HELLO", -1, CONN, NO_KEYS, connection::hello),
    spec("AUTH", -2, CONN, NO_KEYS, connection::auth),
    spec("SELECT", 2, CONN, NO_KEYS, connection::select),
    spec("CLIENT", -2, CONN, NO_KEYS, connection::client),
    spec("COMMAND", -1, CONN, NO_KEYS, connection::command_info),
    spec("CONFIG", -2, ADMIN, NO_KEYS, server::config),
    spec("INFO", -1, ADMIN_SLOW, NO_KEYS, server::info),
    spec("TIME", 1, CONN, NO_KEYS, server::time),
    spec("FUNCTION", -2, ADMIN, NO_KEYS, server::function),
    spec("SCRIPT", -2, ADMIN, NO_KEYS, server::script),
    spec("DBSIZE", 1, READ, NO_KEYS, server::dbsize),
    spec("FLUSHDB", -1, WRITE, KeySpec::All, server::flushdb),
    spec("FLUSHALL", -1, WRITE, KeySpec::All, server::flushall),
    spec("SWAPDB", 3, WRITE, KeySpec::All, server::swapdb),
    spec("MULTI", 1, TXN, NO_KEYS, transactions::multi),
    spec("EXEC", 1, TXN, NO_KEYS, transactions::exec),
    spec("DISCARD", 1, TXN, NO_KEYS, transactions::discard),
    spec("WATCH", -2, TXN, ALL_KEYS, transactions::watch),
    spec("UNWATCH", 1, TXN, NO_KEYS, transactions::unwatch),
    spec("TYPE", 2, READ, ONE, keys::type_of),
    spec("TTL", 2, READ, ONE, keys::ttl),
    spec("PTTL", 2, READ, ONE, keys::pttl),
    spec("EXPIRETIME", 2, READ, ONE, keys::expiretime),
    spec("PEXPIRETIME", 2, READ, ONE, keys::pexpiretime),
    spec("EXPIRE", -3, WRITE, ONE, keys::expire),
    spec("PEXPIRE", -3, WRITE, ONE, keys::pexpire),
    spec("EXPIREAT", -3, WRITE, ONE, keys::expireat),
    spec("PEXPIREAT", -3, WRITE, ONE, keys::pexpireat),
    spec("PERSIST", 2, WRITE, ONE, keys::persist),
    spec("DEL", -2, WRITE, ALL_KEYS, keys::del),
    spec("UNLINK", -2, WRITE, ALL_KEYS, keys::del),
    spec("EXISTS", -2, READ, ALL_KEYS, keys::exists),
    spec("RENAME", 3, WRITE, KeySpec::Range(1, 2, 1), keys::rename),
    spec(
        "RENAMENX",
        3,
        WRITE,
        KeySpec::Range(1, 2, 1),
        keys::renamenx,
    ),
    spec("COPY", -3, WRITE, KeySpec::All, keys::copy),
    spec("MOVE", 3, WRITE, KeySpec::All, keys::move_key),
    spec("RANDOMKEY", 1, READ_SLOW, NO_KEYS, keys::randomkey),
    spec("SCAN", -2, READ_SLOW, NO_KEYS, keys::scan),
    spec("KEYS", 2, READ_SLOW, NO_KEYS, keys::keys),
    spec("HSCAN", -3, READ_SLOW, ONE, keys::hscan),
    spec("SSCAN", -3, READ_SLOW, ONE, keys::sscan),
    spec("ZSCAN", -3, READ_SLOW, ONE, keys::zscan),
    spec("GET", 2, READ, ONE, strings::get),
    spec("SET", -3, WRITE, ONE, strings::set),
    spec("SETNX", 3, WRITE, ONE, strings::setnx),
    spec("SETEX", 4, WRITE, ONE, strings::setex),
    spec("PSETEX", 4, WRITE, ONE, strings::psetex),
    spec("GETSET", 3, WRITE, ONE, strings::getset),
    spec("GETDEL", 2, WRITE, ONE, strings::getdel),
    spec("GETEX", -2, WRITE, ONE, strings::getex),
    spec("MGET", -2, READ, ALL_KEYS, strings::mget),
    spec("MSET", -3, WRITE, KeySpec::Range(1, -1, 2), strings::mset),
    spec(
        "MSETNX",
        -3,
        WRITE,
        KeySpec::Range(1, -1, 2),
        strings::msetnx,
    ),
    spec("INCR", 2, WRITE, ONE, strings::incr),
    spec("INCRBY", 3, WRITE, ONE, strings::incrby),
    spec("DECR", 2, WRITE, ONE, strings::decr),
    spec("DECRBY", 3, WRITE, ONE, strings::decrby),
    spec("INCRBYFLOAT", 3, WRITE, ONE, strings::incrbyfloat),
    spec("APPEND", 3, WRITE, ONE, strings::append),
    spec("STRLEN", 2, READ, ONE, strings::strlen),
    spec("SETRANGE", 4, WRITE, ONE, strings::setrange),
    spec("GETRANGE", 4, READ, ONE, strings::getrange),
    spec("SUBSTR", 4, READ, ONE, strings::getrange),
    spec("GETBIT", 3, READ, ONE, bits::getbit),
    spec("SETBIT", 4, WRITE, ONE, bits::setbit),
    spec("BITCOUNT", -2, READ, ONE, bits::bitcount),
    spec("LCS", -3, READ, KeySpec::Range(1, 2, 1), bits::lcs),
    spec("HSET", -4, WRITE, ONE, hashes::hset),
    spec("HMSET", -4, WRITE, ONE, hashes::hmset),
    spec("HSETNX", 4, WRITE, ONE, hashes::hsetnx),
    spec("HGET", 3, READ, ONE, hashes::hget),
    spec("HMGET", -3, READ, ONE, hashes::hmget),
    spec("HGETALL", 2, READ, ONE, hashes::hgetall),
    spec("HKEYS", 2, READ, ONE, hashes::hkeys),
    spec("HVALS", 2, READ, ONE, hashes::hvals),
    spec("HDEL", -3, WRITE, ONE, hashes::hdel),
    spec("HEXISTS", 3, READ, ONE, hashes::hexists),
    spec("HLEN", 2, READ, ONE, hashes::hlen),
    spec("HSTRLEN", 3, READ, ONE, hashes::hstrlen),
    spec("HINCRBY", 4, WRITE, ONE, hashes::hincrby),
    spec("HINCRBYFLOAT", 4, WRITE, ONE, hashes::hincrbyfloat),
    spec("HRANDFIELD", -2, READ, ONE, hashes::hrandfield),
    spec("LPUSH", -3, WRITE, ONE, lists::lpush),
    spec("RPUSH", -3, WRITE, ONE, lists::rpush),
    spec("LPUSHX", -3, WRITE, ONE, lists::lpushx),
    spec("RPUSHX", -3, WRITE, ONE, lists::rpushx),
    spec("LPOP", -2, WRITE, ONE, lists::lpop),
    spec("RPOP", -2, WRITE, ONE, lists::rpop),
    spec("LLEN", 2, READ, ONE, lists::llen),
    spec("LRANGE", 4, READ, ONE, lists::lrange),
    spec("LINDEX", 3, READ, ONE, lists::lindex),
    spec("LSET", 4, WRITE, ONE, lists::lset),
    spec("LREM", 4, WRITE, ONE, lists::lrem),
    spec("LTRIM", 4, WRITE, ONE, lists::ltrim),
    spec("LINSERT", 5, WRITE, ONE, lists::linsert),
    spec("LPOS", -3, READ, ONE, lists::lpos),
    spec("LMOVE", 5, WRITE, KeySpec::Range(1, 2, 1), lists::lmove),
    spec(
        "RPOPLPUSH",
        3,
        WRITE,
        KeySpec::Range(1, 2, 1),
        lists::rpoplpush,
    ),
    spec("BLPOP", -3, WRITE, KeySpec::Range(1, -2, 1), lists::blpop),
    spec("BRPOP", -3, WRITE, KeySpec::Range(1, -2, 1), lists::brpop),
    spec("BLMOVE", 6, WRITE, KeySpec::Range(1, 2, 1), lists::blmove),
    spec(
        "BRPOPLPUSH",
        4,
        WRITE,
        KeySpec::Range(1, 2, 1),
        lists::brpoplpush,
    ),
    spec(
        "LMPOP",
        -4,
        WRITE,
        KeySpec::NumKeys {
            at: 1,
            store: false,
        },
        lists::lmpop,
    ),
    spec(
        "BLMPOP",
        -5,
        WRITE,
        KeySpec::NumKeys {
            at: 2,
            store: false,
        },
        lists::blmpop,
    ),
    spec("SADD", -3, WRITE, ONE, sets::sadd),
    spec("SREM", -3, WRITE, ONE, sets::srem),
    spec("SMEMBERS", 2, READ, ONE, sets::smembers),
    spec("SISMEMBER", 3, READ, ONE, sets::sismember),
    spec("SMISMEMBER", -3, READ, ONE, sets::smismember),
    spec("SCARD", 2, READ, ONE, sets::scard),
    spec("SPOP", -2, WRITE, ONE, sets::spop),
    spec("SRANDMEMBER", -2, READ, ONE, sets::srandmember),
    spec("SMOVE", 4, WRITE, KeySpec::Range(1, 2, 1), sets::smove),
    spec("SINTER", -2, READ, ALL_KEYS, sets::sinter),
    spec("SUNION", -2, READ, ALL_KEYS, sets::sunion),
    spec("SDIFF", -2, READ, ALL_KEYS, sets::sdiff),
    spec("SINTERSTORE", -3, WRITE, ALL_KEYS, sets::sinterstore),
    spec("SUNIONSTORE", -3, WRITE, ALL_KEYS, sets::sunionstore),
    spec("SDIFFSTORE", -3, WRITE, ALL_KEYS, sets::sdiffstore),
    spec(
        "SINTERCARD",
        -3,
        READ,
        KeySpec::NumKeys {
            at: 1,
            store: false,
        },
        sets::sintercard,
    ),
    spec("ZADD", -4, WRITE, ONE, zsets::zadd),
    spec("ZINCRBY", 4, WRITE, ONE, zsets::zincrby),
    spec("ZREM", -3, WRITE, ONE, zsets::zrem),
    spec("ZSCORE", 3, READ, ONE, zsets::zscore),
    spec("ZMSCORE", -3, READ, ONE, zsets::zmscore),
    spec("ZCARD", 2, READ, ONE, zsets::zcard),
    spec("ZCOUNT", 4, READ, ONE, zsets::zcount),
    spec("ZLEXCOUNT", 4, READ, ONE, zsets::zlexcount),
    spec("ZRANK", -3, READ, ONE, zsets::zrank),
    spec("ZREVRANK", -3, READ, ONE, zsets::zrevrank),
    spec("ZRANGE", -4, READ, ONE, zsets::zrange),
    spec(
        "ZRANGESTORE",
        -5,
        WRITE,
        KeySpec::Range(1, 2, 1),
        zsets::zrangestore,
    ),
    spec("ZREVRANGE", -4, READ, ONE, zsets::zrevrange),
    spec("ZRANGEBYSCORE", -4, READ, ONE, zsets::zrangebyscore),
    spec("ZREVRANGEBYSCORE", -4, READ, ONE, zsets::zrevrangebyscore),
    spec("ZRANGEBYLEX", -4, READ, ONE, zsets::zrangebylex),
    spec("ZREVRANGEBYLEX", -4, READ, ONE, zsets::zrevrangebylex),
    spec("ZPOPMIN", -2, WRITE, ONE, zsets::zpopmin),
    spec("ZPOPMAX", -2, WRITE, ONE, zsets::zpopmax),
    spec("ZREMRANGEBYSCORE", 4, WRITE, ONE, zsets::zremrangebyscore),
    spec("ZREMRANGEBYRANK", 4, WRITE, ONE, zsets::zremrangebyrank),
    spec("ZREMRANGEBYLEX", 4, WRITE, ONE, zsets::zremrangebylex),
    spec(
        "BZPOPMIN",
        -3,
        WRITE,
        KeySpec::Range(1, -2, 1),
        zsets::bzpopmin,
    ),
    spec(
        "BZPOPMAX",
        -3,
        WRITE,
        KeySpec::Range(1, -2, 1),
        zsets::bzpopmax,
    ),
    spec(
        "ZMPOP",
        -4,
        WRITE,
        KeySpec::NumKeys {
            at: 1,
            store: false,
        },
        zsets::zmpop,
    ),
    spec(
        "BZMPOP",
        -5,
        WRITE,
        KeySpec::NumKeys {
            at: 2,
            store: false,
        },
        zsets::bzmpop,
    ),
    spec("ZRANDMEMBER", -2, READ, ONE, zsets::zrandmember),
    spec("SORT", -2, WRITE, KeySpec::All, sort::sort),
    spec("SORT_RO", -2, READ, ONE, sort::sort_ro),
    spec(
        "ZUNION",
        -3,
        READ,
        KeySpec::NumKeys {
            at: 1,
            store: false,
        },
        zsets::zunion,
    ),
    spec(
        "ZINTER",
        -3,
        READ,
        KeySpec::NumKeys {
            at: 1,
            store: false,
        },
        zsets::zinter,
    ),
    spec(
        "ZDIFF",
        -3,
        READ,
        KeySpec::NumKeys {
            at: 1,
            store: false,
        },
        zsets::zdiff,
    ),
    spec(
        "ZUNIONSTORE",
        -4,
        WRITE,
        KeySpec::NumKeys { at: 2, store: true },
        zsets::zunionstore,
    ),
    spec(
        "ZINTERSTORE",
        -4,
        WRITE,
        KeySpec::NumKeys { at: 2, store: true },
        zsets::zinterstore,
    ),
    spec(
        "ZDIFFSTORE",
        -4,
        WRITE,
        KeySpec::NumKeys { at: 2, store: true },
        zsets::zdiffstore,
    ),
    spec(
        "ZINTERCARD",
        -3,
        READ,
        KeySpec::NumKeys {
            at: 1,
            store: false,
        },
        zsets::zintercard,
    ),
    spec(
        "OBJECT",
        -2,
        READ_SLOW,
        KeySpec::Range(2, 2, 1),
        keys::object,
    ),
    spec(
        "MEMORY",
        -2,
        READ_SLOW,
        KeySpec::Range(2, 2, 1),
        keys::memory,
    ),
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
    /// MULTI's queue, while one is open.
    multi: Option<Vec<Request>>,
    /// Bytes of the arguments in MULTI's queue: the connection charges them to the client's
    /// buffers, so a queue is bounded like any buffer.
    multi_bytes: usize,
    /// The streamed values of the request running now, by argument index; a command that takes
    /// one ([`Ctx::string_arg`]) links it, and what is left is deleted when the request ends.
    streamed: Vec<(usize, StagedBlob)>,
    /// A command failed to queue: EXEC answers EXECABORT.
    multi_failed: bool,
    /// This session's WATCHed keys, and the flag a write to any of them sets.
    watch: transactions::WatchState,
    /// Set while EXEC runs the queue: blocking commands then answer at once.
    in_exec: bool,
    /// Set by a blocking command that found nothing: the connection waits for a write, then
    /// runs the request again, or answers the block's timeout reply.
    pub blocked: Option<Blocked>,
    /// Set while a blocked command runs again: a key that now holds another type is passed
    /// over (Redis leaves such a client blocked), where the first attempt answers WRONGTYPE.
    pub block_retry: bool,
}

impl Session {
    /// Bytes this session holds in MULTI's queue.
    pub fn queued_bytes(&self) -> usize {
        self.multi_bytes
    }

    /// A request was refused before it could run or queue (a streamed value the engine could
    /// not store): inside MULTI, EXEC then answers EXECABORT, as Redis does for a command it
    /// refuses while queuing.
    pub fn refused_request(&mut self) {
        self.multi_failed |= self.multi.is_some();
    }
}

/// A client waiting in a blocking command (BLPOP and friends).
pub struct Blocked {
    /// How long it may wait at most (`None`: forever), counted from its first attempt.
    pub timeout: Option<Duration>,
    /// The write generation its last attempt read at: any later commit may have what it waits
    /// for.
    pub generation: u64,
    /// What it answers when the timeout passes.
    pub timeout_reply: Reply,
}

/// Everything connections share.
pub struct Shared {
    pub db: Arc<Db>,
    pub keyspaces: Vec<Keyspace>,
    pub config: Config,
    pub metrics: Metrics,
    /// Bounds how many pipelines run at once on the blocking pool (`Executor::Pool`).
    pub pool_slots: Arc<tokio::sync::Semaphore>,
    /// Syncs the log for pipelines whose commits deferred their durability wait.
    pub syncer: Arc<Syncer>,
    /// What all clients' buffers may hold together.
    pub buffer_budget: Arc<BufferBudget>,
    /// `maxclients` in force now (CONFIG SET changes it; `config` keeps the start value).
    pub client_slots: Arc<ClientSlots>,
    /// How many network threads serve the connections now (`network_threads`).
    pub network: Arc<Balance>,
    /// The idle timeout in force now (CONFIG SET timeout).
    pub idle_timeout: IdleTimeout,
    /// Wakes the clients waiting for input when the idle timeout changes or the server drains.
    pub input_waits: Arc<InputWaits>,
    /// The longest argument and string (`max_bulk_bytes`, Redis's proto-max-bulk-len), as
    /// CONFIG SET last made it.
    max_bulk_bytes: AtomicUsize,
    stripes: Vec<StripeLock>,
    /// Which network thread runs the pipelines that start with a write to each stripe.
    pub combiner: Combiner,
    watches: Arc<Watches>,
    redis_config: server::RedisConfig,
    scan_cursors: Mutex<ScanCursors>,
    next_client_id: AtomicU64,
    pub connected_clients: AtomicUsize,
    pub connections_received: AtomicU64,
    pub expired_keys: AtomicU64,
    /// Transactions committed with writes (a pipeline's batched commands count once).
    pub write_commits: AtomicU64,
    /// Counts commits that wrote: a blocked request queued late compares it with the one it saw.
    write_generation: AtomicU64,
    /// Requests waiting in blocking commands.
    pub waiters: blocking::Waiters,
    pub started: Instant,
}

#[derive(Default)]
struct ScanCursors {
    next_id: u64,
    /// Cursor id -> (database, key to resume at).
    positions: HashMap<u64, (usize, Vec<u8>)>,
    order: VecDeque<u64>,
}

/// One request of a client: its arguments, and the string values that were streamed into blobs
/// as they arrived (their places in `args` hold empty bytes).
pub struct Request {
    pub args: Vec<Bytes>,
    pub streamed: Vec<(usize, StagedBlob)>,
    /// The index in `COMMANDS` of the command `args` name, looked up once when the request
    /// arrives (the connection asks which executor runs it, then runs it).
    command: Option<usize>,
}

impl Request {
    pub fn command(&self) -> Option<&'static CommandSpec> {
        self.command.map(|index| &COMMANDS[index])
    }
}

impl From<Vec<Bytes>> for Request {
    fn from(args: Vec<Bytes>) -> Self {
        Request {
            command: args.first().and_then(|name| command_index(name)),
            args,
            streamed: Vec::new(),
        }
    }
}

/// What one command runs with.
pub struct Ctx<'c, 's> {
    pub shared: &'s Shared,
    pub session: &'c mut Session,
    pub tx: &'c mut Tx<'s>,
    /// The run's deferred sync, for a command that commits on its own (EXEC).
    pub deferred_sync: &'c mut Option<SyncPoint>,
}

impl<'s> Ctx<'_, 's> {
    /// The session's database, through the command's transaction.
    fn view(&mut self) -> View<'_, 's> {
        let db = self.session.db;
        self.tx.on(db)
    }

    /// The string value at argument `index`: its bytes, or the blob it was streamed into.
    fn string_arg<'a>(&mut self, args: &'a [Bytes], index: usize) -> StringInput<'a> {
        match self
            .session
            .streamed
            .iter()
            .position(|(at, _)| *at == index)
        {
            Some(position) => StringInput::Staged(self.session.streamed.swap_remove(position).1),
            None => StringInput::Bytes(&args[index]),
        }
    }
}

/// Replies a pipeline's run reserves room for at first (a longer pipeline's grow as usual).
const REPLIES_RESERVED_MAX: usize = 64;

/// Locks held while a writing command (or EXEC) runs and commits.
type Guards<'a> = SmallVec<[StripeGuard<'a>; KEYS_INLINE]>;

/// Keys, stripes and stripe locks a command holds without an allocation of their own: most
/// commands name one key, MSET and the multi-key commands of benchmarks a few.
const KEYS_INLINE: usize = 4;

/// The stripes a set of commands writes: some, sorted and without repeats, or every one.
#[derive(Default, PartialEq, Eq)]
enum Stripes {
    #[default]
    None,
    Some(SmallVec<[usize; KEYS_INLINE]>),
    Every,
}

/// The index in `COMMANDS` of the command `name` names, in any case.
fn command_index(name: &[u8]) -> Option<usize> {
    static INDEX: LazyLock<HashMap<&'static [u8], usize, BuildHasherDefault<CommandNameHasher>>> =
        LazyLock::new(|| {
            COMMANDS
                .iter()
                .enumerate()
                .map(|(index, command)| (command.name.as_bytes(), index))
                .collect()
        });
    let mut upper = [0u8; 32];
    let upper = upper.get_mut(..name.len())?;
    upper.copy_from_slice(name);
    upper.make_ascii_uppercase();
    INDEX.get(&*upper).copied()
}

/// FNV-1a (`stripes::key_hash`) as the command table's hasher: the table is a fixed set of
/// names, so no client's input can lengthen its probes, and a lookup costs a few instructions
/// per byte where SipHash's setup and finish cost a few hundred (twice per command before).
struct CommandNameHasher(u64);

impl Default for CommandNameHasher {
    fn default() -> Self {
        CommandNameHasher(crate::stripes::key_hash(&[]))
    }
}

impl std::hash::Hasher for CommandNameHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = crate::stripes::key_hash_from(self.0, bytes);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The stripes of every key the `requests` (each a command and its arguments) name (every
/// stripe when one of them touches every key, or with `all`).
fn stripes_of<'r>(
    requests: impl Iterator<Item = (&'static CommandSpec, &'r [Bytes])>,
    all: bool,
) -> Stripes {
    if all {
        return Stripes::Every;
    }
    let mut stripes = SmallVec::new();
    for (command, args) in requests {
        // A command of one key (most writes): its stripe without a list of its keys first.
        if let (KeySpec::Range(1, 1, _), Some(key)) = (&command.keys, args.get(1)) {
            stripes.push(stripe_of(key));
            continue;
        }
        match command_keys(command, args) {
            Some(keys) => stripes.extend(keys.into_iter().map(stripe_of)),
            None => return Stripes::Every,
        }
    }
    if stripes.is_empty() {
        return Stripes::None;
    }
    stripes.sort_unstable();
    stripes.dedup();
    Stripes::Some(stripes)
}

/// What one client's pipeline holds from one command to the next while its writing commands
/// need exactly the same stripes (a pipeline of writes to one hot key, as redis-benchmark's
/// LPUSH, SADD, HSET and ZADD send): the stripe locks, and the writes of up to
/// `max_batched_writes` such commands in one transaction, committed together.
///
/// Unlocking after each command woke the other network thread waiting for the stripe, and
/// locking again parked this one: with two threads writing one key, a third of the server's
/// time went to futex wakeups and task switches. Committing each command alone wrote a hot
/// list's bounds (or a set's count) once per command, and paid a commit per command; together,
/// they are written once and committed once. Nobody can tell: the stripes stay locked until the
/// commit, and every reply of the run waits for it (a failed commit turns each of its commands'
/// replies into the error, so nothing is acknowledged that was not written).
///
/// Kept only while the connection runs commands without waiting for anything else: committed
/// and released before a command that needs other stripes or none, while blocked clients wait
/// (they are served after each command, as in Redis), and when the connection's slice of its
/// pipeline ends, before it writes replies or reads requests.
#[derive(Default)]
pub struct PipelineRun<'a> {
    stripes: Stripes,
    guards: Guards<'a>,
    /// The uncommitted writes of the batched commands, if any.
    tx: Option<Tx<'a>>,
    /// Commands whose writes `tx` holds.
    batched: usize,
    /// Replies of the commands run, in order, not yet taken by the connection.
    replies: Vec<Reply>,
    /// Which of `replies` stand only if `tx` commits.
    uncommitted: Vec<usize>,
    /// Calls of the command run last, not yet added to the shared metrics.
    tally: CommandTally,
    /// `Some`: commits return before their durability wait and the point to sync is gathered
    /// here, for the connection to sync before it sends the run's replies (`deferring_sync`);
    /// `None`: each commit waits for its own sync.
    deferred_sync: Option<SyncPoint>,
    /// When the command run last ended: the next one's start, so a command costs one clock read
    /// (its time then includes encoding the reply before it, well under the histogram's first
    /// bucket of 10 us). Read from the TSC (`quanta`, where the CPU reports an invariant TSC;
    /// else it reads the monotonic clock as `Instant` does): 9 ns a read where `Instant::now`
    /// took 24, two percent of a pipelined GET.
    clock: Option<quanta::Instant>,
}

impl PipelineRun<'_> {
    /// A run whose commits do not wait for their durability: its replies may be sent only once
    /// `take_sync_point`'s point is synced (`Db::wait_synced`). Under `sync` durability this
    /// lets a network thread run a pipeline without blocking on fdatasync, and one wait cover
    /// all of it.
    /// A run of about `requests` requests (its replies' room reserved for them, at most
    /// `REPLIES_RESERVED_MAX`).
    pub fn deferring_sync(requests: usize) -> Self {
        PipelineRun {
            deferred_sync: Some(SyncPoint::default()),
            replies: Vec::with_capacity(requests.min(REPLIES_RESERVED_MAX)),
            ..PipelineRun::default()
        }
    }

    /// What the run's commits left to sync before its replies are sent.
    pub fn take_sync_point(&mut self) -> SyncPoint {
        self.deferred_sync
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn release(&mut self) {
        self.guards.clear();
        self.stripes = Stripes::None;
    }

    /// The replies that are final, in order: none while a batch waits for its commit (later
    /// replies wait behind it).
    pub fn final_replies(&mut self) -> std::vec::Drain<'_, Reply> {
        let end = if self.tx.is_some() {
            0
        } else {
            self.replies.len()
        };
        self.replies.drain(..end)
    }
}

/// Counts in `tally` a call begun at `start`, which ends now: the next call's start (`clock`).
fn count_call(
    tally: &mut CommandTally,
    clock: &mut Option<quanta::Instant>,
    start: quanta::Instant,
    failed: bool,
) {
    let end = quanta::Instant::now();
    tally.count(end.duration_since(start).as_nanos() as u64, failed);
    *clock = Some(end);
}

/// What unit tests serve from: the KVDB at `path` opened as `shale serve` opens it, with one
/// Redis database and no durability wait.
#[cfg(test)]
impl Shared {
    pub(crate) fn open_for_tests(path: &std::path::Path) -> Result<Shared, Failure> {
        let kvdb = crate::config::KvdbArgs {
            db: Some(path.to_path_buf()),
            durability: Some("none".into()),
            ..Default::default()
        };
        let args = crate::config::ServeArgs {
            databases: Some(1),
            ..Default::default()
        };
        let db = Arc::new(Db::open(path, shaledb::Options::default()).unwrap());
        let config = Config::resolve(&kvdb, &args).unwrap();
        let network = Arc::new(Balance::new(config.network_threads));
        Shared::new(db, config, network)
    }
}

impl Shared {
    pub fn new(db: Arc<Db>, config: Config, network: Arc<Balance>) -> Result<Shared, Failure> {
        let blob_ids = BlobIds::new();
        let mut keyspaces = config
            .kvs_names
            .iter()
            .enumerate()
            .map(|(number, name)| {
                let kvs = db.kvs_with_options(name, crate::keyspace::kvs_options())?;
                Keyspace::open(db.clone(), kvs, number, blob_ids.clone())
            })
            .collect::<Result<Vec<_>, Failure>>()?;
        // After SWAPDB a KVS serves another database than the one configured: order by that.
        keyspaces.sort_by_key(|keyspace| keyspace.number);
        if let Some((index, keyspace)) = keyspaces
            .iter()
            .enumerate()
            .find(|(index, keyspace)| keyspace.number != *index)
        {
            return Err(Failure::Damaged(format!(
                "KVS {:?} says it serves database {}, but the configured KVSs serve databases \
                 0..{} with database {index} missing or twice",
                keyspace.space().kvs.name(),
                keyspace.number,
                keyspaces.len()
            )));
        }
        Keyspace::share_spaces(&mut keyspaces);
        let names: Vec<&str> = COMMANDS.iter().map(|command| command.name).collect();
        // The commands' clock calibrates itself against the monotonic clock at its first read
        // (up to 200 ms): here, not in the first client's command.
        quanta::Instant::now();
        let syncer = Syncer::start(Arc::downgrade(&db)).map_err(|source| {
            Failure::Engine(shaledb::Error::Io {
                context: "starting the syncer thread".into(),
                source,
            })
        })?;
        Ok(Shared {
            metrics: Metrics::new(db.clone(), &names),
            db,
            keyspaces,
            pool_slots: Arc::new(tokio::sync::Semaphore::new(config.pool_threads)),
            syncer: Arc::new(syncer),
            buffer_budget: BufferBudget::new(config.max_client_buffers_bytes),
            client_slots: ClientSlots::new(config.maxclients),
            network,
            idle_timeout: IdleTimeout::new(config.idle_timeout),
            input_waits: Arc::default(),
            max_bulk_bytes: AtomicUsize::new(config.max_bulk_bytes),
            config,
            stripes: (0..STRIPES).map(|_| StripeLock::default()).collect(),
            combiner: Combiner::new(STRIPES),
            watches: Arc::new(Watches::default()),
            redis_config: server::RedisConfig::default(),
            scan_cursors: Mutex::new(ScanCursors::default()),
            next_client_id: AtomicU64::new(1),
            connected_clients: AtomicUsize::new(0),
            connections_received: AtomicU64::new(0),
            expired_keys: AtomicU64::new(0),
            write_commits: AtomicU64::new(0),
            write_generation: AtomicU64::new(0),
            waiters: blocking::Waiters::default(),
            started: Instant::now(),
        })
    }

    /// The longest argument and string now.
    pub fn max_bulk_bytes(&self) -> usize {
        self.max_bulk_bytes.load(Ordering::Relaxed)
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
            multi: None,
            multi_bytes: 0,
            streamed: Vec::new(),
            multi_failed: false,
            watch: transactions::WatchState::new(self.watches.clone()),
            in_exec: false,
            blocked: None,
            block_retry: false,
        }
    }

    /// The command `request` names, if it exists.
    pub fn command_of(&self, request: &[Bytes]) -> Option<&'static CommandSpec> {
        command_index(request.first()?).map(|index| &COMMANDS[index])
    }

    /// Runs one request and returns its reply (`None`: it blocked); then, if it wrote, serves
    /// the clients waiting in blocking commands.
    pub fn execute(&self, session: &mut Session, request: &mut Request) -> Option<Reply> {
        let mut run = PipelineRun::default();
        self.execute_pipelined(session, request, None, &mut run);
        self.end_run(&mut run);
        run.replies.pop()
    }

    /// Runs one request of a pipeline as `execute` does, in `run`: under the stripe locks kept
    /// from the previous one, and with its writes batched with theirs, when it writes the same
    /// stripes (`next`, the request after it, says whether to start a batch). Its reply joins
    /// `run`'s (none for a request that blocked).
    pub fn execute_pipelined<'a>(
        &'a self,
        session: &mut Session,
        request: &mut Request,
        next: Option<&Request>,
        run: &mut PipelineRun<'a>,
    ) {
        let generation = self.write_generation();
        session.streamed = std::mem::take(&mut request.streamed);
        let next = next.map(|next| &next.args[..]);
        self.execute_one(session, &request.args, request.command, next, run);
        session.streamed.clear();
        self.serve_waiters_after(generation, run);
    }

    /// The one stripe `request` writes, when it is a write of one key's stripe (what a hot
    /// key's pipeline sends): its pipeline then runs on the thread that runs that stripe
    /// (`combiner`).
    pub fn combining_stripe(&self, request: &Request) -> Option<usize> {
        let command = &COMMANDS[request.command?];
        if !command.writes() || command.is_slow() || !arity_ok(command, &request.args) {
            return None;
        }
        match stripes_of([(command, &request.args[..])].into_iter(), false) {
            Stripes::Some(stripes) if stripes.len() == 1 => Some(stripes[0]),
            _ => None,
        }
    }

    /// Commits what `run` batched and releases its locks: every reply it holds is final.
    pub fn end_run(&self, run: &mut PipelineRun<'_>) {
        let generation = self.write_generation();
        self.commit_run(run);
        run.release();
        self.metrics.add(&mut run.tally);
        self.serve_waiters_after(generation, run);
    }

    /// Serves the blocked clients if a commit since `generation` wrote what they wait for
    /// (after releasing `run`'s locks: they lock their own keys' stripes).
    fn serve_waiters_after(&self, generation: u64, run: &mut PipelineRun<'_>) {
        if self.write_generation() != generation && self.waiters.len() != 0 {
            run.release();
            self.serve_waiters();
        }
    }

    /// Whether the request `next` may join a batch the writing command `args` starts: one on
    /// the same key (first argument), the hot-key pipeline batches are for.
    ///
    /// Across keys a batch saves nothing: under `sync` it once saved a pipeline one fdatasync
    /// wait per command, but a pipeline's commits now share one wait anyway (the syncer), and
    /// holding more stripes for longer slowed SET at pipeline 16 (361-391k/s batched vs
    /// 440k/s not); a long transaction's bookkeeping costs more too (docs/SERVER.md).
    fn may_join(&self, args: &[Bytes], next: &[Bytes]) -> bool {
        args.get(1) == next.get(1)
    }

    /// Whether `run` holds every stripe in `wanted` already. It never locks more: a thread
    /// waiting while holding others out of stripe order could deadlock with one locking in order.
    fn holds_all(run: &PipelineRun<'_>, wanted: &Stripes) -> bool {
        let (Stripes::Some(held), Stripes::Some(wanted)) = (&run.stripes, wanted) else {
            return false;
        };
        wanted
            .iter()
            .all(|stripe| held.binary_search(stripe).is_ok())
    }

    /// Commits the writes `run` batched; if that fails, the replies that depended on them
    /// become its error.
    fn commit_run(&self, run: &mut PipelineRun<'_>) {
        let Some(tx) = run.tx.as_mut() else {
            return;
        };
        run.batched = 0;
        if let Err(error) = self.commit(tx, &mut run.deferred_sync) {
            for &index in &run.uncommitted {
                run.replies[index] = error.clone();
            }
        }
        run.tx = None;
        run.uncommitted.clear();
    }

    /// Runs one command in `run` (see `execute_pipelined`), leaving its reply there.
    fn execute_one<'a>(
        &'a self,
        session: &mut Session,
        args: &[Bytes],
        command: Option<usize>,
        next: Option<&[Bytes]>,
        run: &mut PipelineRun<'a>,
    ) {
        let since = run.clock.take();
        let Some(index) = command else {
            session.multi_failed |= session.multi.is_some();
            return run.replies.push(unknown_command(args));
        };
        let command = &COMMANDS[index];
        if !arity_ok(command, args) {
            session.multi_failed |= session.multi.is_some();
            return run.replies.push(wrong_arity(command.name));
        }
        if !session.authenticated && !matches!(command.name, "AUTH" | "HELLO" | "QUIT") {
            return run
                .replies
                .push(Reply::error("NOAUTH Authentication required."));
        }
        if let Some(queue) = &mut session.multi {
            if !matches!(
                command.name,
                "EXEC" | "DISCARD" | "MULTI" | "WATCH" | "QUIT" | "RESET"
            ) {
                session.multi_bytes += args.iter().map(|arg| arg.len() + 16).sum::<usize>();
                queue.push(Request {
                    args: args.to_vec(),
                    streamed: std::mem::take(&mut session.streamed),
                    command: Some(index),
                });
                return run.replies.push(Reply::Status("QUEUED"));
            }
        }
        self.metrics.begin(&mut run.tally, index);
        let start = since.unwrap_or_else(quanta::Instant::now);
        let mut batching = false;
        if command.writes() {
            let stripes = stripes_of([(command, args)].into_iter(), false);
            // Commands that may touch any key (FLUSHALL, SWAPDB, MOVE, ...) run alone; so does
            // everything while blocked clients wait, so they are served after each command.
            let may_batch = matches!(stripes, Stripes::Some(_))
                && self.config.max_batched_writes > 1
                && self.waiters.len() == 0;
            let joins = may_batch
                && run.tx.is_some()
                && run.batched < self.config.max_batched_writes
                && Self::holds_all(run, &stripes);
            if !joins {
                self.commit_run(run);
                if run.stripes != stripes {
                    run.release();
                    run.guards = self.lock_stripes(&stripes);
                    run.stripes = stripes;
                }
            }
            // A batch starts only if the next request may join it: kept open for nothing, a
            // transaction is a deferred commit that costs more than it saves.
            batching = joins || (may_batch && next.is_some_and(|next| self.may_join(args, next)));
        } else {
            // EXEC locks its own keys' stripes; a reader needs none; both see what came before.
            self.commit_run(run);
            run.release();
        }
        if !batching {
            let mut tx = self.tx();
            let outcome = self
                .run(command, session, &mut tx, &mut run.deferred_sync, args)
                .and_then(|reply| self.commit(&mut tx, &mut run.deferred_sync).map(|()| reply));
            count_call(&mut run.tally, &mut run.clock, start, outcome.is_err());
            if session.blocked.is_none() {
                run.replies.push(outcome.unwrap_or_else(|error| error));
            }
            return;
        }
        let tx = run.tx.get_or_insert_with(|| self.tx());
        // The first command's failure drops the transaction; a later one's rolls back only its
        // own writes (as EXEC does).
        let savepoint = (run.batched > 0).then(|| tx.savepoint());
        let outcome = self.run(command, session, tx, &mut run.deferred_sync, args);
        count_call(&mut run.tally, &mut run.clock, start, outcome.is_err());
        match outcome {
            // Blocked: it found nothing to take and wrote nothing; it has no reply yet.
            Ok(_) if session.blocked.is_some() => {}
            Ok(reply) => {
                run.batched += 1;
                run.uncommitted.push(run.replies.len());
                run.replies.push(reply);
            }
            Err(error) => {
                match savepoint {
                    Some(savepoint) => tx.rollback(savepoint),
                    None => run.tx = None,
                }
                run.replies.push(error);
            }
        }
    }

    /// A transaction for commands (strings read whole are bounded by max_in_memory_string_bytes;
    /// hashes and sets packed as the settings say).
    fn tx(&self) -> Tx<'_> {
        Tx::new(&self.keyspaces)
            .holding_strings_up_to(self.config.max_in_memory_string_bytes)
            .packing(self.config.packing)
            .noting_writes_while_watched(self.watches.watched_keys())
    }

    /// Runs `command` in `tx`, which the caller commits (the caller holds its locks).
    fn run<'s>(
        &'s self,
        command: &CommandSpec,
        session: &mut Session,
        tx: &mut Tx<'s>,
        deferred_sync: &mut Option<SyncPoint>,
        args: &[Bytes],
    ) -> Outcome {
        let mut ctx = Ctx {
            shared: self,
            session,
            tx,
            deferred_sync,
        };
        (command.handler)(&mut ctx, args)
    }

    /// Commits a transaction and tells WATCHers and blocked clients about the keys it wrote.
    /// With `deferred` (a run deferring its sync), the commit's sync point joins it instead of
    /// being waited for here.
    fn commit(&self, tx: &mut Tx<'_>, deferred: &mut Option<SyncPoint>) -> Result<(), Reply> {
        // Without writes there is nothing to commit or sync (moved into the commit and back, a
        // reader's transaction cost a GET two percent); keys it names as changed without
        // writing them (SWAPDB's, which exchanges whole databases) are still told to their
        // watchers.
        if tx.write_count() == 0 {
            self.watches.touched(&tx.take_touched());
            return Ok(());
        }
        let touched = match deferred {
            Some(pending) => {
                let (touched, point) = tx.commit_unsynced()?;
                pending.merge(point);
                touched
            }
            None => tx.commit()?,
        };
        self.write_commits.fetch_add(1, Ordering::Relaxed);
        self.wrote(&touched);
        Ok(())
    }

    /// After a commit that wrote: marks the sessions watching the keys it names (`touched`:
    /// those written while some were watched) and tells blocked clients something changed.
    fn wrote(&self, touched: &[(usize, Bytes)]) {
        self.watches.touched(touched);
        // SeqCst with the waiters' count (blocking.rs): a writer that bumps the generation and
        // then finds no waiter, and a waiter that counts itself and then finds the old
        // generation, cannot both happen.
        self.write_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// After SWAPDB: every database may now hold what a blocked client waits for.
    fn swapped(&self) {
        self.write_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The number of commits that wrote so far.
    pub fn write_generation(&self) -> u64 {
        self.write_generation.load(Ordering::SeqCst)
    }

    /// Locks the stripes of every key the `requests` name (all stripes when one of them
    /// touches every key, or with `all`).
    fn lock<'r>(&self, requests: impl Iterator<Item = &'r [Bytes]>, all: bool) -> Guards<'_> {
        let commands = requests.filter_map(|args| Some((self.command_of(args)?, args)));
        self.lock_stripes(&stripes_of(commands, all))
    }

    /// Locks `stripes` in stripe order, so lockers never deadlock.
    fn lock_stripes(&self, stripes: &Stripes) -> Guards<'_> {
        match stripes {
            Stripes::None => SmallVec::new(),
            Stripes::Some(stripes) => stripes
                .iter()
                .map(|&stripe| self.stripes[stripe].lock())
                .collect(),
            Stripes::Every => self.stripes.iter().map(|stripe| stripe.lock()).collect(),
        }
    }

    /// Removes keys whose expiry time has passed, a bounded number per database, under their
    /// stripe locks; returns how many it removed.
    pub fn expire_keys(&self, per_database: usize) -> Result<usize, Failure> {
        let mut removed = 0;
        for space in &self.keyspaces {
            for key in keyspace::expire_due(space, per_database)? {
                let _guard = self.stripes[stripe_of(&key)].lock();
                let mut tx = Tx::new(&self.keyspaces);
                if tx.on(space.number).remove_if_expired(&key)? {
                    let touched = tx.commit()?;
                    self.wrote(&touched);
                    removed += 1;
                }
            }
        }
        self.expired_keys
            .fetch_add(removed as u64, Ordering::Relaxed);
        Ok(removed)
    }
}

fn arity_ok(command: &CommandSpec, args: &[Bytes]) -> bool {
    if command.arity >= 0 {
        args.len() == command.arity as usize
    } else {
        args.len() >= command.arity.unsigned_abs() as usize
    }
}

/// The keys `args` name under `command`'s key spec; `None` when it may touch any key.
fn command_keys<'a>(
    command: &CommandSpec,
    args: &'a [Bytes],
) -> Option<SmallVec<[&'a [u8]; KEYS_INLINE]>> {
    match command.keys {
        KeySpec::None => Some(SmallVec::new()),
        KeySpec::All => None,
        KeySpec::Range(first, last, step) => {
            let last = if last < 0 {
                args.len() as i32 + last
            } else {
                last
            };
            let indices = (first..=last).step_by(step.max(1) as usize);
            let mut keys = SmallVec::new();
            // Room for every key at once: collected one at a time (the filter hides the count),
            // MSET's ten keys grew the list twice, 1% of its CPU.
            keys.reserve(indices.size_hint().0.min(args.len()));
            keys.extend(indices.filter_map(|index| args.get(index as usize).map(|key| &key[..])));
            Some(keys)
        }
        KeySpec::NumKeys { at, store } => {
            // Read as the handlers read it (parse_int), so the keys locked are the keys used.
            let count = args
                .get(at)
                .and_then(|count| parse_int(count).ok())
                .unwrap_or(0)
                .clamp(0, args.len() as i64) as usize;
            let mut keys: SmallVec<[&[u8]; KEYS_INLINE]> = args
                .iter()
                .skip(at + 1)
                .take(count)
                .map(|key| &key[..])
                .collect();
            if store {
                keys.extend(args.get(1).map(|key| &key[..]));
            }
            Some(keys)
        }
    }
}

impl From<Failure> for Reply {
    fn from(failure: Failure) -> Reply {
        match failure {
            Failure::WrongType => {
                Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            Failure::TooLarge => Reply::error(format!(
                "ERR key, field or member too large: ShaleDB keys are at most {} bytes including \
                 13 bytes of encoding",
                shaledb::limits::KEY_BYTES_MAX
            )),
            Failure::Damaged(what) => Reply::error(format!("ERR damaged data: {what}")),
            Failure::Invalid(message) => Reply::Error(message),
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

fn not_float() -> Reply {
    Reply::error("ERR value is not a valid float")
}

fn parse_int(arg: &[u8]) -> Result<i64, Reply> {
    resp::parse_integer(arg).ok_or_else(not_integer)
}

/// A float as Redis reads one (`inf`, `-inf`, no NaN).
fn parse_float(arg: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(arg).ok()?;
    if text.is_empty()
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace)
    {
        return None;
    }
    let named = |names: &[&str]| names.iter().any(|name| text.eq_ignore_ascii_case(name));
    let value = if named(&["inf", "+inf", "infinity", "+infinity"]) {
        f64::INFINITY
    } else if named(&["-inf", "-infinity"]) {
        f64::NEG_INFINITY
    } else {
        text.parse::<f64>().ok()?
    };
    (!value.is_nan()).then_some(value)
}

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A string's reply: its bytes, or its blob read as the socket takes it.
fn string_reply(value: Option<StringValue>) -> Reply {
    match value {
        None => Reply::Nil,
        Some(StringValue::Inline(data)) => Reply::Bulk(data),
        Some(StringValue::Blob(reader)) => {
            Reply::Stream(StreamedBulk::new(reader.len(), Box::new(reader)))
        }
    }
}

impl ChunkSource for BlobReader {
    fn next_chunk(&mut self) -> Result<Option<Bytes>, String> {
        BlobReader::next_chunk(self).map_err(|failure| match Reply::from(failure) {
            Reply::Error(text) => text,
            other => format!("{other:?}"),
        })
    }
}

fn bulk_or_nil(value: Option<Bytes>) -> Reply {
    value.map_or(Reply::Nil, Reply::Bulk)
}

fn bulks(values: Vec<Bytes>) -> Reply {
    Reply::Array(values.into_iter().map(Reply::Bulk).collect())
}

/// Checks that `count` items more of `bytes_each` keep a reply within `max_output_bytes`; a
/// reply past it would only be built to disconnect the client.
fn reply_fits(shared: &Shared, total_bytes: usize) -> Result<(), Reply> {
    if total_bytes > shared.config.max_output_bytes {
        return Err(Reply::error(format!(
            "ERR the reply would exceed max_output_bytes ({} bytes)",
            shared.config.max_output_bytes
        )));
    }
    Ok(())
}

/// A blocking command's timeout argument (seconds, fractions allowed; 0: forever).
fn parse_timeout(arg: &[u8]) -> Result<Option<Duration>, Reply> {
    let seconds = parse_float(arg)
        .filter(|seconds| seconds.is_finite())
        .ok_or_else(|| Reply::error("ERR timeout is not a float or out of range"))?;
    if seconds < 0.0 {
        return Err(Reply::error("ERR timeout is negative"));
    }
    Ok((seconds > 0.0).then(|| Duration::from_secs_f64(seconds)))
}

/// A blocking command: answers what `attempt` finds, or, when it finds nothing, makes the client
/// wait for a write (inside EXEC it answers `timeout_reply` at once, as Redis does).
/// `timeout` is the command's timeout argument.
fn serve_or_block(
    ctx: &mut Ctx,
    timeout: &[u8],
    timeout_reply: Reply,
    attempt: impl FnOnce(&mut Ctx) -> Result<Option<Reply>, Reply>,
) -> Outcome {
    let timeout = parse_timeout(timeout)?;
    // Read before the attempt looks at its keys: a write after it wakes the client.
    let generation = ctx.shared.write_generation();
    if let Some(reply) = attempt(ctx)? {
        return Ok(reply);
    }
    if ctx.session.in_exec {
        return Ok(timeout_reply);
    }
    ctx.session.blocked = Some(Blocked {
        timeout,
        generation,
        timeout_reply,
    });
    // Not sent: the connection answers when the wait ends.
    Ok(Reply::Nil)
}

/// `wanted` distinct positions below `count` chosen at random (all of them if fewer), in
/// ascending order (Floyd's sampling: `wanted` draws whatever `count` is).
fn random_positions(count: usize, wanted: usize) -> Vec<usize> {
    if wanted >= count {
        return (0..count).collect();
    }
    let mut chosen = BTreeSet::new();
    for bound in count - wanted..count {
        let at = (random_u64() % (bound as u64 + 1)) as usize;
        if !chosen.insert(at) {
            chosen.insert(bound);
        }
    }
    chosen.into_iter().collect()
}

/// `items` in a random order.
fn shuffled<T>(items: Vec<T>) -> Vec<T> {
    let count = items.len();
    choose(items, count)
}

/// `count` distinct members of `members` chosen at random, in random order.
fn choose<T>(mut members: Vec<T>, count: usize) -> Vec<T> {
    let count = count.min(members.len());
    for index in 0..count {
        let pick = index + (random_u64() % (members.len() - index) as u64) as usize;
        members.swap(index, pick);
    }
    members.truncate(count);
    members
}

fn is_wrong_type(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(text) if text.starts_with("WRONGTYPE"))
}

/// For a blocking command: a key of the wrong type counts as empty when it runs again.
fn unless_retrying<T: Default>(ctx: &Ctx, result: Result<T, Failure>) -> Result<T, Failure> {
    match result {
        Err(Failure::WrongType) if ctx.session.block_retry => Ok(T::default()),
        other => other,
    }
}

/// GETRANGE's and BITCOUNT's reading of `start..=end` over `len` items (negative: from the end):
/// the first and last index, or `None` for nothing.
fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if len == 0 || (start < 0 && end < 0 && start > end) {
        return None;
    }
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    (start <= end).then_some((start as usize, end as usize))
}

/// SINTERCARD's and ZINTERCARD's `numkeys key... [LIMIT n]` from `args[1]`: the keys and the
/// limit (`usize::MAX` when none, or LIMIT 0 as Redis reads it). `no_keys` is the command's error for a numkeys below 1.
fn intercard_args<'a>(args: &'a [Bytes], no_keys: &str) -> Result<(&'a [Bytes], usize), Reply> {
    let numkeys =
        parse_int(&args[1]).map_err(|_| Reply::error("ERR numkeys should be greater than 0"))?;
    if numkeys <= 0 {
        return Err(Reply::error(no_keys));
    }
    let numkeys = numkeys as usize;
    if numkeys > args.len() - 2 {
        return Err(Reply::error(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let limit = match &args[2 + numkeys..] {
        [] => usize::MAX,
        [option, value] if is(option, "LIMIT") => match parse_int(value)
            .ok()
            .and_then(|limit| usize::try_from(limit).ok())
            .ok_or_else(|| Reply::error("ERR LIMIT can't be negative"))?
        {
            0 => usize::MAX,
            limit => limit,
        },
        _ => return Err(syntax_error()),
    };
    Ok((&args[2..2 + numkeys], limit))
}

/// HRANDFIELD's and ZRANDMEMBER's `key [count [WITH...]]`: the count, and whether `with` was
/// given.
fn random_args(args: &[Bytes], with: &str) -> Result<(Option<i64>, bool), Reply> {
    let parsed = match args.len() {
        2 => (None, false),
        3 => (Some(parse_int(&args[2])?), false),
        4 if is(&args[3], with) => (Some(parse_int(&args[2])?), true),
        _ => return Err(syntax_error()),
    };
    if parsed
        .0
        .is_some_and(|count| count.unsigned_abs() > (i64::MAX as u64) / 2)
    {
        return Err(Reply::error("ERR value is out of range"));
    }
    Ok(parsed)
}

/// Members of the collection `key` (a `kind`) drawn at random as SRANDMEMBER, HRANDFIELD and
/// ZRANDMEMBER draw them: `count` distinct ones (all if fewer) in random order, or with a
/// negative count that many with repeats. Only the members drawn are read (`pick_members`: a
/// collection of a record per member is counted in the index and picked from leaf by leaf),
/// where a negative count read every member first.
fn draw_members(
    ctx: &mut Ctx,
    key: &[u8],
    kind: crate::keyspace::KeyType,
    count: i64,
) -> Result<Vec<Bytes>, Reply> {
    Ok(draw_counted(ctx, key, kind, count)?.0)
}

/// As [`draw_members`], with how many members the collection had when they were drawn (the
/// count `pick_members` makes anyway).
fn draw_counted(
    ctx: &mut Ctx,
    key: &[u8],
    kind: crate::keyspace::KeyType,
    count: i64,
) -> Result<(Vec<Bytes>, usize), Reply> {
    let shared = ctx.shared;
    let view = ctx.view();
    let size = std::cell::Cell::new(0);
    if count >= 0 {
        let wanted = count as usize;
        let picked = view.pick_members(key, kind, |members| {
            size.set(members);
            random_positions(members, wanted)
        })?;
        return Ok((shuffled(picked), size.get()));
    }
    let wanted = count.unsigned_abs() as usize;
    // Checked before any draw is kept, and answered only if there was a member to draw: a
    // missing key or an empty reply needs no room, whatever the count.
    let fits = reply_fits(shared, wanted.saturating_mul(16));
    // The draws are made where the count is known, and kept to be answered in their order.
    let draws = std::cell::RefCell::new(Vec::new());
    let picked = view.pick_members(key, kind, |members| {
        size.set(members);
        let mut draws = draws.borrow_mut();
        draws.clear();
        if members > 0 && fits.is_ok() {
            draws.extend((0..wanted).map(|_| (random_u64() % members as u64) as usize));
        }
        distinct_sorted(&draws)
    })?;
    if size.get() > 0 {
        fits?;
    }
    let draws = draws.into_inner();
    let distinct = distinct_sorted(&draws);
    if picked.len() != distinct.len() {
        return Err(Reply::error(format!(
            "ERR {} members read of the {} drawn",
            picked.len(),
            distinct.len()
        )));
    }
    let drawn = draws
        .iter()
        .map(|&at| picked[distinct.partition_point(|&position| position < at)].clone())
        .collect();
    Ok((drawn, size.get()))
}

/// Collections of at most this many members are read whole to draw members with their values
/// or scores: a packed one (128 members by default) is one record, which each lookup would
/// decode again, and a small one costs no more read whole than looked up.
const WHOLE_READ_MEMBERS_MAX: usize = 128;

/// Members drawn as [`draw_members`] draws them, each with what `read` finds for it (a hash
/// field's value, a sorted set member's score), read once per distinct member. `None` when the
/// caller should draw from the collection read whole: it has at most
/// [`WHOLE_READ_MEMBERS_MAX`] members (its draw, cheap at that size, is then dropped), or a
/// member drawn was removed before it was read (a writer between the draw and the reads; the
/// whole read sees one state).
fn draw_members_with<T: Clone>(
    ctx: &mut Ctx,
    key: &[u8],
    kind: crate::keyspace::KeyType,
    count: i64,
    read: impl Fn(&View, &[u8]) -> keyspace::Result<Option<T>>,
) -> Result<Option<Vec<(Bytes, T)>>, Reply> {
    let (members, size) = draw_counted(ctx, key, kind, count)?;
    if size <= WHOLE_READ_MEMBERS_MAX {
        return Ok(None);
    }
    let view = ctx.view();
    let mut found: HashMap<Bytes, T> = HashMap::new();
    let mut drawn = Vec::with_capacity(members.len());
    for member in members {
        let value = match found.get(&member) {
            Some(value) => value.clone(),
            None => {
                let Some(value) = read(&view, &member)? else {
                    return Ok(None);
                };
                found.insert(member.clone(), value.clone());
                value
            }
        };
        drawn.push((member, value));
    }
    Ok(Some(drawn))
}

fn distinct_sorted(positions: &[usize]) -> Vec<usize> {
    let mut distinct = positions.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    distinct
}

/// SRANDMEMBER's, HRANDFIELD's and ZRANDMEMBER's choice: `count` distinct items, or with a
/// negative count that many with repeats.
fn random_items<T: Clone>(shared: &Shared, items: Vec<T>, count: i64) -> Result<Vec<T>, Reply> {
    if count >= 0 {
        return Ok(choose(items, count as usize));
    }
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let wanted = count.unsigned_abs() as usize;
    reply_fits(shared, wanted.saturating_mul(16))?;
    Ok((0..wanted)
        .map(|_| items[(random_u64() % items.len() as u64) as usize].clone())
        .collect())
}

/// A cheap random number (SPOP, SRANDMEMBER, RANDOMKEY): no cryptographic use.
fn random_u64() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0x9E37_79B9_7F4A_7C15, |elapsed| elapsed.as_nanos() as u64)
                | 1,
        );
    }
    STATE.with(|state| {
        // xorshift64*
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_specs_name_the_keys() {
        let args = |words: &[&str]| -> Vec<Bytes> {
            words
                .iter()
                .map(|word| Bytes::from(word.to_string()))
                .collect()
        };
        let find = |name: &str| {
            COMMANDS
                .iter()
                .find(|command| command.name == name)
                .unwrap()
        };
        let mset = args(&["MSET", "a", "1", "b", "2"]);
        assert_eq!(
            command_keys(find("MSET"), &mset).unwrap().to_vec(),
            vec![&b"a"[..], &b"b"[..]]
        );
        let card = args(&["SINTERCARD", "2", "x", "y", "LIMIT", "5"]);
        assert_eq!(
            command_keys(find("SINTERCARD"), &card).unwrap().to_vec(),
            vec![&b"x"[..], &b"y"[..]]
        );
        assert!(command_keys(find("FLUSHALL"), &args(&["FLUSHALL"])).is_none());
        for command in COMMANDS {
            assert!(command.name.len() <= 32, "lookup bound");
            assert_eq!(command.name, command.name.to_ascii_uppercase());
        }
    }
}
