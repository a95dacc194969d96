//! One memcached client: read a command line (and a storage command's data block), run it,
//! answer as memcached 1.6 does, until the client leaves, quits or breaks the protocol.

use super::items::{self, expiry_of, Counted, Item, ItemError, Mode, StoreReply};
use super::{Memcached, Stats};
use crate::buffers::BufferCharge;
use crate::clients::ClientSlot;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::{Buf, Bytes, BytesMut};
use shaledb::SyncPoint;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// The longest command line (a `get` of many keys included).
const LINE_BYTES_MAX: usize = 64 << 10;
const READ_BYTES: usize = 16 << 10;
/// Replies are written once this many bytes of them are ready.
const FLUSH_BYTES: usize = 64 << 10;
/// Opaque tokens of meta commands, at most (memcached's bound).
const OPAQUE_BYTES_MAX: usize = 32;

pub async fn refuse(mut stream: TcpStream) {
    let _ = stream
        .write_all(b"SERVER_ERROR too many open connections\r\n")
        .await;
    let _ = stream.shutdown().await;
}

/// A whole command: its line's tokens, a storage command's data block, and the input bytes it
/// took.
struct Parsed {
    tokens: Vec<Bytes>,
    data: Option<Bytes>,
    consumed: usize,
}

/// Replies not yet sent, and where the log must be durable before they may be: the writes
/// they acknowledge, under `sync` durability (an empty point under the other modes).
#[derive(Default)]
struct Output {
    replies: BytesMut,
    unsynced: SyncPoint,
}

impl Deref for Output {
    type Target = BytesMut;

    fn deref(&self) -> &BytesMut {
        &self.replies
    }
}

impl DerefMut for Output {
    fn deref_mut(&mut self) -> &mut BytesMut {
        &mut self.replies
    }
}

/// What the input holds next.
enum Next {
    Command(Parsed),
    /// More bytes are needed.
    More,
    /// A data block too large for an item: `.0` bytes to drop, then answer `.1`.
    Skip(usize, &'static str),
    /// The stream is unusable: answer this and close.
    Broken(&'static str),
}

pub async fn serve_client(
    memcached: Arc<Memcached>,
    mut stream: TcpStream,
    peer: SocketAddr,
    _slot: ClientSlot,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let mut charge = BufferCharge::new(memcached.buffer_budget.clone());
    let mut input = BytesMut::with_capacity(READ_BYTES);
    let mut output = Output::default();
    let mut skipping = 0usize;
    loop {
        // Run every whole command the input holds, writing replies as they pile up.
        loop {
            if skipping > 0 {
                let dropped = skipping.min(input.len());
                input.advance(dropped);
                skipping -= dropped;
                if skipping > 0 {
                    break;
                }
            }
            match next_command(&input) {
                Next::More => break,
                Next::Skip(bytes, reply) => {
                    skipping = bytes;
                    output.extend_from_slice(reply.as_bytes());
                }
                Next::Broken(reply) => {
                    output.extend_from_slice(reply.as_bytes());
                    write(&memcached, &mut stream, &mut output).await;
                    return;
                }
                Next::Command(parsed) => {
                    input.advance(parsed.consumed);
                    let quit = run(&memcached, &parsed.tokens, parsed.data, &mut output);
                    if output.len() > memcached.max_output_bytes {
                        tracing::warn!(%peer, "closing memcached client: a reply exceeds max_output_bytes");
                        return;
                    }
                    if quit {
                        write(&memcached, &mut stream, &mut output).await;
                        return;
                    }
                    if output.len() >= FLUSH_BYTES
                        && !write(&memcached, &mut stream, &mut output).await
                    {
                        return;
                    }
                }
            }
        }
        if !output.is_empty() && !write(&memcached, &mut stream, &mut output).await {
            return;
        }
        // Room for what a command may still need: its line, or its data block.
        if input.capacity() - input.len() < READ_BYTES {
            let wanted = input.len() + READ_BYTES;
            if !charge.set(wanted.max(input.capacity())) {
                tracing::warn!(%peer, "closing memcached client: max_client_buffers_bytes reached");
                return;
            }
            input.reserve(READ_BYTES);
        }
        tokio::select! {
            read = stream.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = shutdown.changed() => return,
        }
        if input.is_empty() && input.capacity() > 4 * READ_BYTES {
            input = BytesMut::with_capacity(READ_BYTES);
            charge.set(READ_BYTES);
        }
    }
}

/// Sends the replies once the writes they acknowledge are durable (one fdatasync serves every
/// connection of the network thread's turn, see syncer.rs); returns false if the client is to
/// be closed: the sync failed (the replies are withheld) or the client stopped reading.
async fn write(memcached: &Memcached, stream: &mut TcpStream, output: &mut Output) -> bool {
    if let Err(reason) = memcached
        .syncer
        .wait(std::mem::take(&mut output.unsynced))
        .await
    {
        tracing::error!(%reason, "closing memcached client: its replies are withheld");
        return false;
    }
    let written = tokio::time::timeout(
        memcached.output_stall_timeout,
        stream.write_all(&output.replies),
    );
    let ok = matches!(written.await, Ok(Ok(())));
    output.clear();
    ok
}

fn next_command(input: &BytesMut) -> Next {
    let search = &input[..input.len().min(LINE_BYTES_MAX + 2)];
    let Some(newline) = search.iter().position(|&byte| byte == b'\n') else {
        if input.len() > LINE_BYTES_MAX {
            return Next::Broken("CLIENT_ERROR line too long\r\n");
        }
        return Next::More;
    };
    let line = &input[..newline];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let frozen = Bytes::copy_from_slice(line);
    let tokens: Vec<Bytes> = frozen
        .split(|&byte| byte == b' ')
        .filter(|token| !token.is_empty())
        .map(|token| frozen.slice_ref(token))
        .collect();
    let line_bytes = newline + 1;
    let data_length = match tokens.first().map(|name| &name[..]) {
        Some(b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas") => tokens.get(4),
        Some(b"ms") => tokens.get(2),
        _ => None,
    };
    let without_data = |tokens| {
        Next::Command(Parsed {
            tokens,
            data: None,
            consumed: line_bytes,
        })
    };
    let Some(length) = data_length else {
        return without_data(tokens);
    };
    // A bad key: memcached answers the line and reads what follows as commands; so does this.
    if !tokens.get(1).is_some_and(|key| valid_key(key)) {
        return without_data(tokens);
    }
    // A length that is not a number: the command answers its format error, reading no data.
    let Some(length) = std::str::from_utf8(length)
        .ok()
        .and_then(|text| text.parse::<usize>().ok())
    else {
        return without_data(tokens);
    };
    if length > items::DATA_BYTES_MAX {
        // Its data is read past as it arrives (a huge length only keeps reading).
        return Next::Skip(
            line_bytes.saturating_add(length).saturating_add(2),
            "SERVER_ERROR object too large for cache\r\n",
        );
    }
    if input.len() < line_bytes + length + 2 {
        return Next::More;
    }
    if &input[line_bytes + length..line_bytes + length + 2] != b"\r\n" {
        return Next::Broken("CLIENT_ERROR bad data chunk\r\n");
    }
    let data = Bytes::copy_from_slice(&input[line_bytes..line_bytes + length]);
    Next::Command(Parsed {
        tokens,
        data: Some(data),
        consumed: line_bytes + length + 2,
    })
}

const ERROR: &str = "ERROR\r\n";
const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format\r\n";

/// Runs one command, appending its reply; returns whether the client asked to quit.
fn run(memcached: &Memcached, tokens: &[Bytes], data: Option<Bytes>, out: &mut Output) -> bool {
    let Some(name) = tokens.first() else {
        out.extend_from_slice(ERROR.as_bytes());
        return false;
    };
    let args = &tokens[1..];
    if let Err(error) = memcached.items.flush_if_due(&mut out.unsynced) {
        report(error, out);
        return false;
    }
    let result = match &name[..] {
        b"get" => retrieve(memcached, args, false, None, out),
        b"gets" => retrieve(memcached, args, true, None, out),
        b"gat" | b"gats" => match args.split_first() {
            Some((exptime, keys)) if !keys.is_empty() => match parse::<i64>(exptime) {
                Some(exptime) => {
                    retrieve(memcached, keys, &name[..] == b"gats", Some(exptime), out)
                }
                None => answer(out, BAD_FORMAT),
            },
            _ => answer(out, ERROR),
        },
        b"set" => store(memcached, args, data, Mode::Set, out),
        b"add" => store(memcached, args, data, Mode::Add, out),
        b"replace" => store(memcached, args, data, Mode::Replace, out),
        b"append" => store(memcached, args, data, Mode::Append, out),
        b"prepend" => store(memcached, args, data, Mode::Prepend, out),
        b"cas" => store(memcached, args, data, Mode::Cas(0), out),
        b"delete" => delete(memcached, args, out),
        b"incr" => arithmetic(memcached, args, true, out),
        b"decr" => arithmetic(memcached, args, false, out),
        b"touch" => touch(memcached, args, out),
        b"flush_all" => flush_all(memcached, args, out),
        b"version" => answer(out, &format!("VERSION {}\r\n", version())),
        b"verbosity" => match args {
            [_] => answer(out, "OK\r\n"),
            [_, noreply] if &noreply[..] == b"noreply" => Ok(()),
            _ => answer(out, ERROR),
        },
        b"stats" if args.is_empty() => {
            stats(memcached, out);
            Ok(())
        }
        b"stats" => answer(out, "END\r\n"),
        b"quit" => return true,
        b"mn" => answer(out, "MN\r\n"),
        b"mg" => meta_get(memcached, args, out),
        b"ms" => meta_set(memcached, args, data, out),
        b"md" => meta_delete(memcached, args, out),
        b"ma" => meta_arithmetic(memcached, args, out),
        _ => answer(out, ERROR),
    };
    if let Err(error) = result {
        report(error, out);
    }
    false
}

/// Appends the SERVER_ERROR line that answers a failed command.
fn report(error: ItemError, out: &mut BytesMut) {
    let message = match error {
        ItemError::Damaged(what) => format!("SERVER_ERROR damaged data: {what}"),
        ItemError::Engine(error) if error.kind() == shaledb::ErrorKind::NoSpace => {
            "SERVER_ERROR out of memory storing object".to_string()
        }
        ItemError::Engine(error) => format!("SERVER_ERROR storage engine: {error}"),
    };
    let _ = write!(Text(out), "{}\r\n", message.replace(['\r', '\n'], " "));
}

fn version() -> String {
    format!("1.6.0-shaledb-{}", env!("CARGO_PKG_VERSION"))
}

fn reply(out: &mut BytesMut, text: &str) {
    out.extend_from_slice(text.as_bytes());
}

/// `reply`, as a command's outcome.
fn answer(out: &mut BytesMut, text: &str) -> Outcome {
    reply(out, text);
    Ok(())
}

/// `write!` into a reply buffer.
struct Text<'a>(&'a mut BytesMut);

impl std::fmt::Write for Text<'_> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.0.extend_from_slice(text.as_bytes());
        Ok(())
    }
}

fn parse<T: std::str::FromStr>(token: &[u8]) -> Option<T> {
    std::str::from_utf8(token).ok()?.parse().ok()
}

/// A key memcached accepts: 1 to 250 bytes. Like memcached, any byte but the space and line
/// ends that split a command is taken (memaslap's keys start with control bytes).
fn valid_key(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= items::KEY_BYTES_MAX
}

type Outcome = Result<(), ItemError>;

fn retrieve(
    memcached: &Memcached,
    keys: &[Bytes],
    with_cas: bool,
    touch_to: Option<i64>,
    out: &mut Output,
) -> Outcome {
    if keys.is_empty() {
        reply(out, ERROR);
        return Ok(());
    }
    if !keys.iter().all(|key| valid_key(key)) {
        reply(out, BAD_FORMAT);
        return Ok(());
    }
    let start = out.len();
    for key in keys {
        if out.len() - start > memcached.max_output_bytes {
            // Built whole before it is written: stop at the bound, as memcached does at its own.
            out.truncate(start);
            reply(out, "SERVER_ERROR out of memory writing get response\r\n");
            return Ok(());
        }
        let stats = &memcached.stats;
        let item = match touch_to {
            Some(exptime) => {
                Stats::add(&stats.cmd_touch);
                memcached
                    .items
                    .touch(key, expiry_of(exptime), &mut out.unsynced)?
            }
            None => memcached.items.get(key)?,
        };
        Stats::add(&stats.cmd_get);
        let Some(item) = item else {
            Stats::add(&stats.get_misses);
            continue;
        };
        Stats::add(&stats.get_hits);
        out.extend_from_slice(b"VALUE ");
        out.extend_from_slice(key);
        let _ = write!(Text(out), " {} {}", item.flags, item.data.len());
        if with_cas {
            let _ = write!(Text(out), " {}", item.cas);
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&item.data);
        out.extend_from_slice(b"\r\n");
    }
    reply(out, "END\r\n");
    Ok(())
}

fn store(
    memcached: &Memcached,
    args: &[Bytes],
    data: Option<Bytes>,
    mode: Mode,
    out: &mut Output,
) -> Outcome {
    let cas_arg = usize::from(matches!(mode, Mode::Cas(_)));
    let (required, noreply) = match args.len() {
        n if n == 4 + cas_arg => (args, false),
        n if n == 5 + cas_arg && &args[4 + cas_arg][..] == b"noreply" => {
            (&args[..4 + cas_arg], true)
        }
        _ => {
            reply(out, ERROR);
            return Ok(());
        }
    };
    let (Some(flags), Some(exptime), Some(data)) =
        (parse::<u32>(&required[1]), parse::<i64>(&required[2]), data)
    else {
        reply(out, BAD_FORMAT);
        return Ok(());
    };
    let mode = match mode {
        Mode::Cas(_) => match parse::<u64>(&required[4]) {
            Some(unique) => Mode::Cas(unique),
            None => {
                reply(out, BAD_FORMAT);
                return Ok(());
            }
        },
        other => other,
    };
    if !valid_key(&required[0]) {
        reply(out, BAD_FORMAT);
        return Ok(());
    }
    Stats::add(&memcached.stats.cmd_set);
    let stored = memcached.items.store(
        &required[0],
        mode,
        flags,
        expiry_of(exptime),
        data,
        &mut out.unsynced,
    )?;
    if !noreply {
        reply(
            out,
            match stored {
                StoreReply::Stored(_) => "STORED\r\n",
                StoreReply::NotStored => "NOT_STORED\r\n",
                StoreReply::Exists => "EXISTS\r\n",
                StoreReply::NotFound => "NOT_FOUND\r\n",
            },
        );
    }
    Ok(())
}

/// The arguments before an optional trailing `noreply`.
fn split_noreply(args: &[Bytes]) -> (&[Bytes], bool) {
    match args.split_last() {
        Some((last, rest)) if &last[..] == b"noreply" => (rest, true),
        _ => (args, false),
    }
}

fn delete(memcached: &Memcached, args: &[Bytes], out: &mut Output) -> Outcome {
    let (args, noreply) = split_noreply(args);
    // memcached still accepts a hold time of 0 after the key.
    let key = match args {
        [key] => key,
        [key, zero] if &zero[..] == b"0" => key,
        [_, _] => {
            reply(
                out,
                "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
            );
            return Ok(());
        }
        _ => {
            reply(out, ERROR);
            return Ok(());
        }
    };
    if !valid_key(key) {
        reply(out, BAD_FORMAT);
        return Ok(());
    }
    let deleted = memcached.items.delete(key, None, &mut out.unsynced)?;
    if !noreply {
        reply(
            out,
            match deleted {
                StoreReply::Stored(_) => "DELETED\r\n",
                _ => "NOT_FOUND\r\n",
            },
        );
    }
    Ok(())
}

fn arithmetic(memcached: &Memcached, args: &[Bytes], incr: bool, out: &mut Output) -> Outcome {
    let (args, noreply) = split_noreply(args);
    let [key, delta] = args else {
        reply(out, ERROR);
        return Ok(());
    };
    if !valid_key(key) {
        reply(out, BAD_FORMAT);
        return Ok(());
    }
    let Some(delta) = parse::<u64>(delta) else {
        reply(out, "CLIENT_ERROR invalid numeric delta argument\r\n");
        return Ok(());
    };
    let counted = memcached
        .items
        .count(key, incr, delta, None, None, &mut out.unsynced)?;
    match counted {
        Counted::NotANumber => reply(
            out,
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        ),
        _ if noreply => {}
        Counted::Value(item) => {
            out.extend_from_slice(&item.data);
            out.extend_from_slice(b"\r\n");
        }
        Counted::NotFound | Counted::Exists => reply(out, "NOT_FOUND\r\n"),
    }
    Ok(())
}

fn touch(memcached: &Memcached, args: &[Bytes], out: &mut Output) -> Outcome {
    let (args, noreply) = split_noreply(args);
    let [key, exptime] = args else {
        reply(out, ERROR);
        return Ok(());
    };
    let Some(exptime) = parse::<i64>(exptime).filter(|_| valid_key(key)) else {
        reply(out, BAD_FORMAT);
        return Ok(());
    };
    Stats::add(&memcached.stats.cmd_touch);
    let touched = memcached
        .items
        .touch(key, expiry_of(exptime), &mut out.unsynced)?;
    if !noreply {
        reply(
            out,
            if touched.is_some() {
                "TOUCHED\r\n"
            } else {
                "NOT_FOUND\r\n"
            },
        );
    }
    Ok(())
}

fn flush_all(memcached: &Memcached, args: &[Bytes], out: &mut Output) -> Outcome {
    let (args, noreply) = split_noreply(args);
    let delay = match args {
        [] => 0,
        [delay] => match parse::<i64>(delay) {
            Some(delay) => delay,
            None => {
                reply(out, "CLIENT_ERROR invalid exptime argument\r\n");
                return Ok(());
            }
        },
        _ => {
            reply(out, ERROR);
            return Ok(());
        }
    };
    // Like an exptime (up to 30 days relative, more an absolute unix time; 0 or less: now),
    // less a second, as memcached 1.6 counts it: `flush_all 1` flushes at once.
    let at = if delay > 0 {
        expiry_of(delay).saturating_sub(1000)
    } else {
        0
    };
    memcached.items.flush_at(at, &mut out.unsynced)?;
    if !noreply {
        reply(out, "OK\r\n");
    }
    Ok(())
}

fn stats(memcached: &Memcached, out: &mut BytesMut) {
    let stats = &memcached.stats;
    let counter = |value: &std::sync::atomic::AtomicU64| value.load(Ordering::Relaxed);
    let now = items::now_ms() / 1000;
    let lines: [(&str, String); 11] = [
        ("pid", std::process::id().to_string()),
        ("uptime", memcached.started.elapsed().as_secs().to_string()),
        ("time", now.to_string()),
        ("version", version()),
        ("curr_connections", memcached.slots.admitted().to_string()),
        (
            "total_connections",
            counter(&stats.total_connections).to_string(),
        ),
        ("cmd_get", counter(&stats.cmd_get).to_string()),
        ("cmd_set", counter(&stats.cmd_set).to_string()),
        ("cmd_touch", counter(&stats.cmd_touch).to_string()),
        ("get_hits", counter(&stats.get_hits).to_string()),
        ("get_misses", counter(&stats.get_misses).to_string()),
    ];
    for (name, value) in lines {
        let _ = write!(Text(out), "STAT {name} {value}\r\n");
    }
    reply(out, "END\r\n");
}

/// A meta command's flags: each a letter, with the token after it.
struct MetaFlags<'a>(Vec<(u8, &'a [u8])>);

impl<'a> MetaFlags<'a> {
    /// Parses `tokens`; `None` (answered `CLIENT_ERROR invalid flag`) for a flag not in
    /// `known`, or an opaque token too long.
    fn parse(tokens: &'a [Bytes], known: &[u8]) -> Option<MetaFlags<'a>> {
        let mut flags = Vec::with_capacity(tokens.len());
        for token in tokens {
            let (&flag, rest) = token.split_first()?;
            if !known.contains(&flag) || (flag == b'O' && rest.len() > OPAQUE_BYTES_MAX) {
                return None;
            }
            flags.push((flag, rest));
        }
        Some(MetaFlags(flags))
    }

    fn has(&self, flag: u8) -> bool {
        self.0.iter().any(|(name, _)| *name == flag)
    }

    /// The token of `flag`, parsed; `Err` if present but not a `T`.
    fn number<T: std::str::FromStr>(&self, flag: u8) -> Result<Option<T>, ()> {
        match self.0.iter().find(|(name, _)| *name == flag) {
            None => Ok(None),
            Some((_, token)) => parse(token).map(Some).ok_or(()),
        }
    }

    /// The key a meta command names: its token, or with `b` the bytes the token encodes in
    /// base64 (any bytes, up to memcached's key length). `None` once the error is answered.
    fn key(&self, token: &'a [u8], out: &mut BytesMut) -> Option<Cow<'a, [u8]>> {
        if !self.has(b'b') {
            return Some(Cow::Borrowed(token));
        }
        match BASE64.decode(token) {
            Err(_) => {
                reply(out, "CLIENT_ERROR error decoding key\r\n");
                None
            }
            Ok(key) if !valid_key(&key) => {
                reply(out, BAD_FORMAT);
                None
            }
            Ok(key) => Some(Cow::Owned(key)),
        }
    }

    /// The flags a reply returns, in the order asked: O and k (the key's token, as sent)
    /// always, the rest from `item`.
    fn returned(&self, key: &[u8], item: Option<&Item>, out: &mut BytesMut) {
        for (flag, token) in &self.0 {
            match (flag, item) {
                (b'O', _) => {
                    out.extend_from_slice(b" O");
                    out.extend_from_slice(token);
                }
                (b'k', _) => {
                    out.extend_from_slice(b" k");
                    out.extend_from_slice(key);
                    // memcached 1.6 says a key returned in base64 is so right after it.
                    if self.has(b'b') {
                        out.extend_from_slice(b" b");
                    }
                }
                (b'c', Some(item)) => {
                    let _ = write!(Text(out), " c{}", item.cas);
                }
                (b'f', Some(item)) => {
                    let _ = write!(Text(out), " f{}", item.flags);
                }
                (b's', Some(item)) => {
                    let _ = write!(Text(out), " s{}", item.data.len());
                }
                (b't', Some(item)) => {
                    let _ = write!(Text(out), " t{}", item.ttl_secs());
                }
                _ => {}
            }
        }
    }
}

impl MetaFlags<'_> {
    /// A reply without a value: `code`, the flags asked for, CRLF.
    fn status(&self, out: &mut BytesMut, code: &str, key: &[u8], item: Option<&Item>) {
        out.extend_from_slice(code.as_bytes());
        self.returned(key, item, out);
        out.extend_from_slice(b"\r\n");
    }

    /// A reply with the item's value: `VA`, its length, the flags asked for, then the data.
    fn value(&self, out: &mut BytesMut, key: &[u8], item: &Item) {
        let _ = write!(Text(out), "VA {}", item.data.len());
        self.returned(key, Some(item), out);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&item.data);
        out.extend_from_slice(b"\r\n");
    }
}

const INVALID_FLAG: &str = "CLIENT_ERROR invalid flag\r\n";

fn meta_get(memcached: &Memcached, args: &[Bytes], out: &mut Output) -> Outcome {
    let Some((key, rest)) = args.split_first().filter(|(key, _)| valid_key(key)) else {
        reply(out, BAD_FORMAT);
        return Ok(());
    };
    // u (no LRU bump) is honoured trivially: there is no LRU.
    let Some(flags) = MetaFlags::parse(rest, b"bcfkOqstuvT") else {
        reply(out, INVALID_FLAG);
        return Ok(());
    };
    let Some(stored_key) = flags.key(key, out) else {
        return Ok(());
    };
    let Ok(new_ttl) = flags.number::<i64>(b'T') else {
        reply(out, BAD_FORMAT);
        return Ok(());
    };
    Stats::add(&memcached.stats.cmd_get);
    let item = match new_ttl {
        Some(exptime) => {
            Stats::add(&memcached.stats.cmd_touch);
            memcached
                .items
                .touch(&stored_key, expiry_of(exptime), &mut out.unsynced)?
        }
        None => memcached.items.get(&stored_key)?,
    };
    let Some(item) = item else {
        Stats::add(&memcached.stats.get_misses);
        if !flags.has(b'q') {
            flags.status(out, "EN", key, None);
        }
        return Ok(());
    };
    Stats::add(&memcached.stats.get_hits);
    if flags.has(b'v') {
        flags.value(out, key, &item);
    } else {
        flags.status(out, "HD", key, Some(&item));
    }
    Ok(())
}

fn meta_set(
    memcached: &Memcached,
    args: &[Bytes],
    data: Option<Bytes>,
    out: &mut Output,
) -> Outcome {
    let (Some(key), Some(data)) = (args.first().filter(|key| valid_key(key)), data) else {
        reply(out, BAD_FORMAT);
        return Ok(());
    };
    let Some(flags) = MetaFlags::parse(&args[2..], b"bcCFkOqTM") else {
        reply(out, INVALID_FLAG);
        return Ok(());
    };
    let Some(stored_key) = flags.key(key, out) else {
        return Ok(());
    };
    let (Ok(compare), Ok(client_flags), Ok(exptime)) = (
        flags.number::<u64>(b'C'),
        flags.number::<u32>(b'F'),
        flags.number::<i64>(b'T'),
    ) else {
        reply(out, BAD_FORMAT);
        return Ok(());
    };
    let mode = match flags
        .0
        .iter()
        .find(|(name, _)| *name == b'M')
        .map(|(_, token)| *token)
    {
        None | Some(b"S" | b"s") => Mode::Set,
        Some(b"E" | b"e") => Mode::Add,
        Some(b"A" | b"a") => Mode::Append,
        Some(b"P" | b"p") => Mode::Prepend,
        Some(b"R" | b"r") => Mode::Replace,
        Some(_) => {
            reply(out, "CLIENT_ERROR invalid mode for ms\r\n");
            return Ok(());
        }
    };
    let mode = match compare {
        Some(unique) if mode == Mode::Set => Mode::Cas(unique),
        Some(_) => {
            reply(
                out,
                "CLIENT_ERROR CAS with a mode other than set is not supported by ShaleDB\r\n",
            );
            return Ok(());
        }
        None => mode,
    };
    Stats::add(&memcached.stats.cmd_set);
    let stored = memcached.items.store(
        &stored_key,
        mode,
        client_flags.unwrap_or(0),
        expiry_of(exptime.unwrap_or(0)),
        data,
        &mut out.unsynced,
    )?;
    let (code, cas) = match stored {
        StoreReply::Stored(cas) => ("HD", Some(cas)),
        StoreReply::NotStored => ("NS", None),
        StoreReply::Exists => ("EX", None),
        StoreReply::NotFound => ("NF", None),
    };
    if code == "HD" && flags.has(b'q') {
        return Ok(());
    }
    // What a reply may return of the item it stored: its CAS (ms takes no f, s or t).
    let stored = cas.map(|cas| Item {
        flags: 0,
        expires_at: 0,
        cas,
        data: Bytes::new(),
    });
    flags.status(out, code, key, stored.as_ref());
    Ok(())
}

fn meta_delete(memcached: &Memcached, args: &[Bytes], out: &mut Output) -> Outcome {
    let Some((key, rest)) = args.split_first().filter(|(key, _)| valid_key(key)) else {
        reply(out, BAD_FORMAT);
        return Ok(());
    };
    let Some(flags) = MetaFlags::parse(rest, b"bCkOq") else {
        reply(out, INVALID_FLAG);
        return Ok(());
    };
    let Some(stored_key) = flags.key(key, out) else {
        return Ok(());
    };
    let Ok(compare) = flags.number::<u64>(b'C') else {
        reply(out, BAD_FORMAT);
        return Ok(());
    };
    let code = match memcached
        .items
        .delete(&stored_key, compare, &mut out.unsynced)?
    {
        StoreReply::Stored(_) => "HD",
        StoreReply::Exists => "EX",
        StoreReply::NotFound | StoreReply::NotStored => "NF",
    };
    if code == "HD" && flags.has(b'q') {
        return Ok(());
    }
    flags.status(out, code, key, None);
    Ok(())
}

fn meta_arithmetic(memcached: &Memcached, args: &[Bytes], out: &mut Output) -> Outcome {
    let Some((key, rest)) = args.split_first().filter(|(key, _)| valid_key(key)) else {
        reply(out, BAD_FORMAT);
        return Ok(());
    };
    let Some(flags) = MetaFlags::parse(rest, b"bCNJDTMOqtcvk") else {
        reply(out, INVALID_FLAG);
        return Ok(());
    };
    let Some(stored_key) = flags.key(key, out) else {
        return Ok(());
    };
    let (Ok(compare), Ok(vivify), Ok(initial), Ok(delta), Ok(new_ttl)) = (
        flags.number::<u64>(b'C'),
        flags.number::<i64>(b'N'),
        flags.number::<u64>(b'J'),
        flags.number::<u64>(b'D'),
        flags.number::<i64>(b'T'),
    ) else {
        reply(out, "CLIENT_ERROR bad token in command line format\r\n");
        return Ok(());
    };
    let incr = match flags
        .0
        .iter()
        .find(|(name, _)| *name == b'M')
        .map(|(_, token)| *token)
    {
        None | Some(b"I" | b"i" | b"+") => true,
        Some(b"D" | b"d" | b"-") => false,
        Some(_) => {
            reply(out, "CLIENT_ERROR invalid mode for ma\r\n");
            return Ok(());
        }
    };
    let vivify = vivify.map(|exptime| (initial.unwrap_or(0), expiry_of(exptime)));
    let counted = memcached.items.count(
        &stored_key,
        incr,
        delta.unwrap_or(1),
        vivify,
        compare,
        &mut out.unsynced,
    )?;
    let item = match counted {
        Counted::Value(item) => item,
        Counted::NotANumber => {
            reply(
                out,
                "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
            );
            return Ok(());
        }
        Counted::NotFound => {
            flags.status(out, "NF", key, None);
            return Ok(());
        }
        Counted::Exists => {
            flags.status(out, "EX", key, None);
            return Ok(());
        }
    };
    // T: the new TTL, written by a touch after the count (the item it returns is the same but
    // for its expiry).
    let item = match new_ttl {
        Some(exptime) => memcached
            .items
            .touch(&stored_key, expiry_of(exptime), &mut out.unsynced)?
            .unwrap_or(item),
        None => item,
    };
    if flags.has(b'v') {
        flags.value(out, key, &item);
    } else if !flags.has(b'q') {
        flags.status(out, "HD", key, Some(&item));
    }
    Ok(())
}
