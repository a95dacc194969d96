//! RESP: parsing client requests and encoding replies in RESP2 or RESP3.
//!
//! The request parser is written here rather than taken from the `redis-protocol` crate because
//! the server must judge each length header before buffering what it announces: a client that
//! sends `$4294967296` is answered and disconnected at once, not after the server has tried to
//! collect 4 GiB. Requests are arrays of bulk strings, or inline commands (`PING\r\n`), as Redis
//! accepts them.

use bytes::{Buf, Bytes, BytesMut};
use smallvec::SmallVec;
use std::collections::VecDeque;

/// The most bytes of an inline command line (Redis uses the same bound).
const INLINE_BYTES_MAX: usize = 64 << 10;
/// The most digits plus sign a length header may have before it is called malformed.
const HEADER_DIGITS_MAX: usize = 20;

/// Bounds a request must stay within.
#[derive(Clone, Copy, Debug)]
pub struct RequestLimits {
    /// Most bytes of one request (all its headers and arguments).
    pub request_bytes_max: usize,
    /// Most bytes of one argument.
    pub bulk_bytes_max: usize,
    /// Most arguments of one request.
    pub args_max: usize,
    /// Whether these are the tighter limits of a client that has not authenticated yet (the
    /// errors then say so, as Redis's do).
    pub unauthenticated: bool,
    /// Which arguments are streamed rather than buffered (`None`: none).
    pub streaming: Option<StreamRule>,
}

impl RequestLimits {
    fn error(&self, what: &str) -> ProtocolError {
        let prefix = if self.unauthenticated {
            "unauthenticated "
        } else {
            "invalid "
        };
        ProtocolError(format!("{prefix}{what}"))
    }
}

/// A request the server cannot read; it answers with the message and closes the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(message: impl Into<String>) -> Self {
        ProtocolError(message.into())
    }
}

/// What the parser took from the front of the buffer.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// A whole request.
    Request(Vec<Bytes>),
    /// A request with an argument to stream ([`RequestLimits::streaming`]): the arguments before
    /// it, its length (its header is consumed; its bytes and CRLF come next in the stream) and
    /// how many arguments follow it ([`continue_request`] reads them).
    Stream {
        args: Vec<Bytes>,
        length: usize,
        after: usize,
    },
}

/// Which arguments are streamed: those longer than `.0` bytes at an index (of the command
/// named first) where `.1` says the command takes a streamed value.
pub type StreamRule = (usize, fn(&[u8], usize) -> bool);

/// Takes the first complete request from `buffer`: `Ok(Some(frame))` consumes it (or, for a
/// stream, everything up to its streamed argument), `Ok(None)` means more bytes are needed
/// (nothing consumed), and an error means the stream is unusable. An empty inline line yields
/// an empty request, which callers skip.
pub fn parse_request(
    buffer: &mut BytesMut,
    limits: &RequestLimits,
) -> Result<Option<Frame>, ProtocolError> {
    if buffer.is_empty() {
        return Ok(None);
    }
    if buffer[0] != b'*' {
        return Ok(parse_inline(buffer)?.map(Frame::Request));
    }
    let mut cursor = 0usize;
    let Some(count) = read_header(buffer, &mut cursor, b'*')? else {
        return Ok(None);
    };
    if count > limits.args_max as i64 {
        return Err(limits.error("multibulk length"));
    }
    if count <= 0 {
        buffer.advance(cursor);
        return Ok(Some(Frame::Request(Vec::new())));
    }
    parse_arguments(buffer, cursor, count as usize, 0, None, limits)
}

/// Reads the `count` arguments that follow a streamed one, the first of them argument
/// `first_index` of a request naming `command`; as [`parse_request`] otherwise.
pub fn continue_request(
    buffer: &mut BytesMut,
    command: &[u8],
    first_index: usize,
    count: usize,
    limits: &RequestLimits,
) -> Result<Option<Frame>, ProtocolError> {
    parse_arguments(buffer, 0, count, first_index, Some(command), limits)
}

fn parse_arguments(
    buffer: &mut BytesMut,
    mut cursor: usize,
    count: usize,
    first_index: usize,
    command: Option<&[u8]>,
    limits: &RequestLimits,
) -> Result<Option<Frame>, ProtocolError> {
    // The count is only a claim until the arguments arrive: allocate for a few at first.
    let mut spans: Spans = SmallVec::with_capacity(count.min(64));
    for position in 0..count {
        if cursor >= buffer.len() {
            return incomplete(buffer, limits);
        }
        if buffer[cursor] != b'$' {
            return Err(ProtocolError::new(format!(
                "expected '$', got '{}'",
                char::from(buffer[cursor]).escape_default()
            )));
        }
        let Some(length) = read_header(buffer, &mut cursor, b'$')? else {
            return incomplete(buffer, limits);
        };
        if length < 0 || length as u64 > limits.bulk_bytes_max as u64 {
            return Err(limits.error("bulk length"));
        }
        let length = length as usize;
        if let Some((stream_above, takes_stream)) = limits.streaming {
            let name = command.or_else(|| {
                spans
                    .first()
                    .map(|&(start, len)| &buffer[start..start + len])
            });
            if length > stream_above
                && name.is_some_and(|name| takes_stream(name, first_index + position))
            {
                let frame = buffer.split_to(cursor).freeze();
                return Ok(Some(Frame::Stream {
                    args: slices(frame, spans),
                    length,
                    after: count - position - 1,
                }));
            }
        }
        if cursor + length > limits.request_bytes_max {
            return Err(ProtocolError::new(
                "request is larger than the server's limit",
            ));
        }
        if buffer.len() < cursor + length + 2 {
            return incomplete(buffer, limits);
        }
        if &buffer[cursor + length..cursor + length + 2] != b"\r\n" {
            return Err(ProtocolError::new("bulk string not terminated by CRLF"));
        }
        spans.push((cursor, length));
        cursor += length + 2;
    }
    let frame = buffer.split_to(cursor).freeze();
    Ok(Some(Frame::Request(slices(frame, spans))))
}

/// Each argument's start and length in its request: a request of up to eight arguments (most
/// commands) notes them without an allocation.
type Spans = SmallVec<[(usize, usize); 8]>;

/// The arguments at `spans` of `frame`, each sharing its bytes; the last takes the frame's own
/// reference instead of a new one (a reference is an atomic count, taken and dropped per
/// argument: 5-8% of a network thread under SADD at pipeline 16).
fn slices(mut frame: Bytes, spans: Spans) -> Vec<Bytes> {
    let Some((&(last_start, last_length), others)) = spans.split_last() else {
        return Vec::new();
    };
    let mut args = Vec::with_capacity(spans.len());
    args.extend(
        others
            .iter()
            .map(|&(start, length)| frame.slice(start..start + length)),
    );
    frame.advance(last_start);
    frame.truncate(last_length);
    args.push(frame);
    args
}

fn incomplete(buffer: &BytesMut, limits: &RequestLimits) -> Result<Option<Frame>, ProtocolError> {
    if buffer.len() > limits.request_bytes_max {
        return Err(ProtocolError::new(
            "request is larger than the server's limit",
        ));
    }
    Ok(None)
}

/// Reads `<tag><signed decimal>\r\n` at `cursor`; `None` when the line is not complete yet.
fn read_header(buffer: &[u8], cursor: &mut usize, tag: u8) -> Result<Option<i64>, ProtocolError> {
    debug_assert_eq!(buffer[*cursor], tag);
    let start = *cursor + 1;
    let search_end = buffer.len().min(start + HEADER_DIGITS_MAX + 2);
    let Some(newline) = buffer[start..search_end].iter().position(|&b| b == b'\n') else {
        if search_end - start >= HEADER_DIGITS_MAX + 2 {
            return Err(ProtocolError::new(format!(
                "invalid {} length",
                header_name(tag)
            )));
        }
        return Ok(None);
    };
    let line = &buffer[start..start + newline];
    let digits = line
        .strip_suffix(b"\r")
        .ok_or_else(|| ProtocolError::new(format!("invalid {} length", header_name(tag))))?;
    let value = parse_integer(digits)
        .ok_or_else(|| ProtocolError::new(format!("invalid {} length", header_name(tag))))?;
    *cursor = start + newline + 1;
    Ok(Some(value))
}

/// `text` as an `i64` if it is one in the only form Redis writes and reads (its `string2ll`):
/// an optional `-`, then digits without a leading zero (`0` alone), within `i64`. Redis
/// rejects "+1", "01", "-0" and " 1" as integers, and as lengths in a request.
pub fn parse_integer(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    match digits {
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    // Accumulated on the negative side, which holds one more value (`i64::MIN`).
    let mut value: i64 = 0;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(digit))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

fn header_name(tag: u8) -> &'static str {
    if tag == b'*' {
        "multibulk"
    } else {
        "bulk"
    }
}

fn parse_inline(buffer: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(newline) = buffer.iter().position(|&b| b == b'\n') else {
        if buffer.len() > INLINE_BYTES_MAX {
            return Err(ProtocolError::new("too big inline request"));
        }
        return Ok(None);
    };
    if newline > INLINE_BYTES_MAX {
        return Err(ProtocolError::new("too big inline request"));
    }
    let line = buffer.split_to(newline + 1).freeze();
    let text = line.slice(..newline);
    let text = text.strip_suffix(b"\r").unwrap_or(&text);
    split_inline(text)
        .map(Some)
        .ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))
}

/// Splits an inline command into arguments as Redis's `sdssplitargs` does: words separated by
/// white space, `"double quotes"` with C-like escapes (`\n`, `\xHH`, ...), `'single quotes'`
/// with only `\'`. `None` for an unbalanced quote, or a closing quote not followed by a space.
fn split_inline(text: &[u8]) -> Option<Vec<Bytes>> {
    let mut args = Vec::new();
    let mut at = 0;
    loop {
        while at < text.len() && text[at].is_ascii_whitespace() {
            at += 1;
        }
        if at == text.len() {
            return Some(args);
        }
        let mut arg = Vec::new();
        match text[at] {
            b'"' => {
                at += 1;
                loop {
                    match *text.get(at)? {
                        b'\\'
                            if text.get(at + 1) == Some(&b'x')
                                && text.len() > at + 3
                                && text[at + 2].is_ascii_hexdigit()
                                && text[at + 3].is_ascii_hexdigit() =>
                        {
                            let hex = std::str::from_utf8(&text[at + 2..at + 4]).ok()?;
                            arg.push(u8::from_str_radix(hex, 16).ok()?);
                            at += 4;
                        }
                        b'\\' if at + 1 < text.len() => {
                            arg.push(match text[at + 1] {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 8,
                                b'a' => 7,
                                other => other,
                            });
                            at += 2;
                        }
                        b'"' => {
                            at += 1;
                            break;
                        }
                        byte => {
                            arg.push(byte);
                            at += 1;
                        }
                    }
                }
            }
            b'\'' => {
                at += 1;
                loop {
                    match *text.get(at)? {
                        b'\\' if text.get(at + 1) == Some(&b'\'') => {
                            arg.push(b'\'');
                            at += 2;
                        }
                        b'\'' => {
                            at += 1;
                            break;
                        }
                        byte => {
                            arg.push(byte);
                            at += 1;
                        }
                    }
                }
            }
            _ => {
                while at < text.len() && !text[at].is_ascii_whitespace() {
                    arg.push(text[at]);
                    at += 1;
                }
                args.push(Bytes::from(arg));
                continue;
            }
        }
        // A closing quote must end the argument.
        if at < text.len() && !text[at].is_ascii_whitespace() {
            return None;
        }
        args.push(Bytes::from(arg));
    }
}

/// A reply, encoded for the connection's protocol version by [`Reply::encode`].
/// Where a long bulk reply's bytes come from: chunk by chunk, read as the socket takes them,
/// so a 512 MB value is never in memory whole.
pub trait ChunkSource: Send {
    /// The next chunk; `None` after the last; an error names what could not be read.
    fn next_chunk(&mut self) -> Result<Option<Bytes>, String>;
}

/// A bulk reply of `length` bytes that its [`ChunkSource`] yields when written.
pub struct StreamedBulk {
    length: u64,
    source: std::sync::Mutex<Option<Box<dyn ChunkSource>>>,
}

impl StreamedBulk {
    pub fn new(length: u64, source: Box<dyn ChunkSource>) -> std::sync::Arc<StreamedBulk> {
        std::sync::Arc::new(StreamedBulk {
            length,
            source: std::sync::Mutex::new(Some(source)),
        })
    }

    /// Takes the source to write it (once: a reply is written once).
    pub fn take_source(&self) -> Option<Box<dyn ChunkSource>> {
        self.source.lock().ok()?.take()
    }

    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }
}

impl std::fmt::Debug for StreamedBulk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StreamedBulk({} bytes)", self.length)
    }
}

impl PartialEq for StreamedBulk {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+text`
    Status(&'static str),
    /// `-text`; the text starts with the error code (`ERR`, `WRONGTYPE`, ...).
    Error(String),
    Integer(i64),
    Bulk(Bytes),
    /// The null bulk string (RESP3: null).
    Nil,
    Array(Vec<Reply>),
    /// The null array (RESP3: null).
    NilArray,
    /// A RESP3 map; a flat array of keys and values in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A map of bulk strings to bulk strings (HGETALL's), encoded as `Map` is: held as the pairs
    /// themselves, where a `Map` of two `Bulk` replies per pair cost HGETALL of ten fields a
    /// fifth of its instructions to build, size, encode and drop.
    BulkMap(Vec<(Bytes, Bytes)>),
    /// A RESP3 double; a bulk string in RESP2.
    Double(f64),
    /// A RESP3 verbatim text string (`=`); a bulk string in RESP2.
    Verbatim(String),
    /// A bulk string read as it is written (a long string's blob).
    Stream(std::sync::Arc<StreamedBulk>),
}

impl Reply {
    pub const OK: Reply = Reply::Status("OK");

    pub fn error(text: impl Into<String>) -> Reply {
        Reply::Error(text.into())
    }

    pub fn bulk(bytes: impl Into<Bytes>) -> Reply {
        Reply::Bulk(bytes.into())
    }

    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Bulk(Bytes::from(text.into()))
    }

    /// Appends this reply's encoding under protocol `version` (2 or 3) to `out`, reserving room
    /// for all of it first: a reply of many parts (HGETALL's map) grew the buffer part by part,
    /// six reallocations and 1,900 instructions of a 17,400-instruction HGETALL of ten 100-byte
    /// fields (callgrind).
    pub fn encode(&self, version: u8, out: &mut Output) {
        // A reply of one part makes its own room (`put_line`), with no pass over it first.
        let aggregate = matches!(self, Reply::Array(_) | Reply::Map(_) | Reply::BulkMap(_));
        out.reserve(if aggregate { self.copied_len_max() } else { 0 });
        self.encode_reserved(version, out);
    }

    /// At least the bytes this reply's encoding copies into an output, under either protocol
    /// (bulk strings long enough to be shared are not copied).
    fn copied_len_max(&self) -> usize {
        match self {
            Reply::Status(text) => text.len() + 3,
            Reply::Error(text) => text.len() + 3,
            Reply::Integer(_) | Reply::Nil | Reply::NilArray => NUMBER_LINE,
            Reply::Bulk(bytes) => bulk_copied_len_max(bytes),
            Reply::Stream(_) => NUMBER_LINE + 2,
            Reply::Array(items) => {
                NUMBER_LINE + items.iter().map(Reply::copied_len_max).sum::<usize>()
            }
            Reply::Map(pairs) => {
                let pair_len =
                    |(key, value): &(Reply, Reply)| key.copied_len_max() + value.copied_len_max();
                NUMBER_LINE + pairs.iter().map(pair_len).sum::<usize>()
            }
            Reply::BulkMap(pairs) => {
                let pair_len = |(key, value): &(Bytes, Bytes)| {
                    bulk_copied_len_max(key) + bulk_copied_len_max(value)
                };
                NUMBER_LINE + pairs.iter().map(pair_len).sum::<usize>()
            }
            // `%.17g` is at most 24 characters.
            Reply::Double(_) => 2 * NUMBER_LINE + 2,
            Reply::Verbatim(text) => NUMBER_LINE + "txt:".len() + text.len() + 2,
        }
    }

    fn encode_reserved(&self, version: u8, out: &mut Output) {
        let resp3 = version >= 3;
        match self {
            Reply::Status(text) => put_line(out, b'+', text.as_bytes()),
            Reply::Error(text) => put_line(out, b'-', sanitize(text).as_bytes()),
            Reply::Integer(value) => put_number(out, b':', *value),
            Reply::Bulk(bytes) => put_bulk(out, b'$', bytes),
            Reply::Nil | Reply::NilArray if resp3 => out.extend(b"_\r\n"),
            Reply::Nil => out.extend(b"$-1\r\n"),
            Reply::NilArray => out.extend(b"*-1\r\n"),
            Reply::Array(items) => {
                put_number(out, b'*', items.len());
                for item in items {
                    item.encode_reserved(version, out);
                }
            }
            Reply::Map(pairs) => {
                put_map_header(out, resp3, pairs.len());
                for (key, value) in pairs {
                    key.encode_reserved(version, out);
                    value.encode_reserved(version, out);
                }
            }
            Reply::BulkMap(pairs) => {
                put_map_header(out, resp3, pairs.len());
                for (key, value) in pairs {
                    put_bulk(out, b'$', key);
                    put_bulk(out, b'$', value);
                }
            }
            Reply::Double(value) if resp3 => put_line(out, b',', format_double(*value).as_bytes()),
            Reply::Double(value) => put_text_bulk(out, b'$', format_double(*value).as_bytes()),
            Reply::Verbatim(text) if resp3 => {
                let mut body = String::with_capacity(text.len() + 4);
                body.push_str("txt:");
                body.push_str(text);
                put_text_bulk(out, b'=', body.as_bytes());
            }
            Reply::Verbatim(text) => put_text_bulk(out, b'$', text.as_bytes()),
            Reply::Stream(bulk) => {
                put_number(out, b'$', bulk.len());
                out.push_part(Part::Stream(bulk.clone()));
                out.extend(b"\r\n");
            }
        }
    }
}

/// Bulk strings at least this long are queued as the buffers they already are, not copied.
const SHARED_BULK_BYTES_MIN: usize = 16 << 10;

/// A length or number line: a tag, up to 20 digits and a sign, and CRLF.
const NUMBER_LINE: usize = 24;

/// At least the bytes a bulk string's encoding copies into an output.
fn bulk_copied_len_max(bytes: &Bytes) -> usize {
    if bytes.len() < SHARED_BULK_BYTES_MIN {
        NUMBER_LINE + bytes.len() + 2
    } else {
        NUMBER_LINE + 2
    }
}

/// Encoded replies waiting to be written to a client: small parts copied together, large bulk
/// strings kept as the buffers the engine returned (a 1 MiB value is never copied into a reply).
/// A piece of encoded output: bytes, or a streamed bulk's body, read when written.
pub enum Part {
    Bytes(Bytes),
    Stream(std::sync::Arc<StreamedBulk>),
}

/// Encoded replies. `len` counts the bytes held, not streamed bodies (those are read a chunk at a
/// time as they are written).
#[derive(Default)]
pub struct Output {
    parts: VecDeque<Part>,
    tail: BytesMut,
    len: usize,
    /// Bytes to reserve at the first reply, if that reply needs fewer ([`Output::with_room`]).
    first_room: usize,
}

impl Output {
    pub fn new() -> Output {
        Output::default()
    }

    /// An output that makes room for `bytes` of short replies, or for its first reply if that
    /// is longer, as that reply is encoded: one allocation of the size needed, where an output
    /// made with room for short replies copied a long first reply into a larger buffer.
    pub fn with_room(bytes: usize) -> Output {
        Output {
            first_room: bytes,
            ..Output::default()
        }
    }

    /// Makes room for `bytes` more, or for the first reply's room if more.
    fn reserve(&mut self, bytes: usize) {
        self.tail
            .reserve(bytes.max(std::mem::take(&mut self.first_room)));
    }

    /// Bytes waiting to be written.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn extend(&mut self, bytes: &[u8]) {
        self.tail.extend_from_slice(bytes);
        self.len += bytes.len();
    }

    fn share(&mut self, bytes: &Bytes) {
        if bytes.len() < SHARED_BULK_BYTES_MIN {
            return self.extend(bytes);
        }
        self.len += bytes.len();
        self.push_part(Part::Bytes(bytes.clone()));
    }

    fn push_part(&mut self, part: Part) {
        if !self.tail.is_empty() {
            self.parts
                .push_back(Part::Bytes(self.tail.split().freeze()));
        }
        self.parts.push_back(part);
    }

    /// Everything encoded so far, when it is all short replies copied into one buffer.
    pub fn only_replies(&self) -> Option<&[u8]> {
        self.parts.is_empty().then_some(&self.tail[..])
    }

    /// Forgets everything encoded, keeping the buffer's room.
    pub fn clear(&mut self) {
        self.parts.clear();
        self.tail.clear();
        self.len = 0;
    }

    /// Takes every encoded part, in order, leaving this empty.
    pub fn take(&mut self) -> VecDeque<Part> {
        if !self.tail.is_empty() {
            self.parts
                .push_back(Part::Bytes(self.tail.split().freeze()));
        }
        self.len = 0;
        std::mem::take(&mut self.parts)
    }

    /// Everything encoded so far as one buffer, streamed bodies read whole (tests).
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for part in &self.parts {
            match part {
                Part::Bytes(bytes) => out.extend_from_slice(bytes),
                Part::Stream(bulk) => {
                    let mut source = bulk.take_source().expect("read once");
                    while let Some(chunk) = source.next_chunk().expect("a chunk") {
                        out.extend_from_slice(&chunk);
                    }
                }
            }
        }
        out.extend_from_slice(&self.tail);
        out
    }
}

/// Error and status lines may not hold CR or LF.
fn sanitize(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains(['\r', '\n']) {
        std::borrow::Cow::Owned(text.replace(['\r', '\n'], " "))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

fn put_line(out: &mut Output, tag: u8, body: &[u8]) {
    out.tail.reserve(body.len() + 3);
    out.extend(&[tag]);
    out.extend(body);
    out.extend(b"\r\n");
}

fn put_number(out: &mut Output, tag: u8, value: impl itoa::Integer) {
    put_line(out, tag, itoa::Buffer::new().format(value).as_bytes());
}

/// A map's header: its pair count under RESP3, a flat array's length under RESP2.
fn put_map_header(out: &mut Output, resp3: bool, pairs: usize) {
    if resp3 {
        put_number(out, b'%', pairs);
    } else {
        put_number(out, b'*', pairs * 2);
    }
}

fn put_bulk(out: &mut Output, tag: u8, body: &Bytes) {
    put_number(out, tag, body.len());
    out.share(body);
    out.extend(b"\r\n");
}

fn put_text_bulk(out: &mut Output, tag: u8, body: &[u8]) {
    put_number(out, tag, body.len());
    out.extend(body);
    out.extend(b"\r\n");
}

/// Formats a double as Redis 7.0 replies with one: integers below 2^52 without a fraction,
/// `inf` and `-inf` spelled out, everything else as C's `%.17g` (so 0.1 reads back as
/// 0.10000000000000001, as Redis 7.0 answers it).
pub fn format_double(value: f64) -> String {
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    if value.fract() == 0.0 && value.abs() < 4_503_599_627_370_496.0 {
        return format!("{}", value as i64);
    }
    format_g17(value)
}

/// C's `%.17g`: 17 significant digits, trailing zeros dropped, exponent form when the exponent is
/// below -4 or at least 17.
fn format_g17(value: f64) -> String {
    let scientific = format!("{value:.16e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("e in {:e}");
    let exponent: i32 = exponent.parse().expect("an exponent");
    if !(-4..17).contains(&exponent) {
        let mantissa = trim_fraction(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    let decimals = (16 - exponent).max(0) as usize;
    trim_fraction(&format!("{value:.decimals$}")).to_string()
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: RequestLimits = RequestLimits {
        request_bytes_max: 1 << 20,
        bulk_bytes_max: 64 << 10,
        args_max: 1024,
        unauthenticated: false,
        streaming: None,
    };

    fn encode_request(args: &[Vec<u8>]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    fn parse_all(bytes: &[u8]) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
        let mut buffer = BytesMut::from(bytes);
        let mut requests = Vec::new();
        while let Some(frame) = parse_request(&mut buffer, &LIMITS)? {
            match frame {
                Frame::Request(request) => requests.push(request),
                Frame::Stream { .. } => panic!("nothing streams under LIMITS"),
            }
        }
        Ok(requests)
    }

    #[test]
    fn integers_are_read_only_in_the_form_redis_writes() {
        for (text, expected) in [
            ("0", Some(0)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("", None),
            ("-", None),
            ("+1", None),
            ("01", None),
            ("-0", None),
            (" 1", None),
            ("1 ", None),
            ("1a", None),
        ] {
            assert_eq!(parse_integer(text.as_bytes()), expected, "{text:?}");
        }
        let request = b"*+1\r\n$4\r\nPING\r\n";
        assert!(
            parse_all(request).is_err(),
            "a length is read as an integer"
        );
    }

    proptest! {
        #[test]
        fn an_integer_is_read_back_from_its_text_and_nothing_else(
            value in any::<i64>(),
            text in "[-+0-9 ]{0,21}",
        ) {
            prop_assert_eq!(parse_integer(value.to_string().as_bytes()), Some(value));
            let parsed = parse_integer(text.as_bytes());
            prop_assert_eq!(parsed.map(|parsed| parsed.to_string()), parsed.map(|_| text.clone()));
            if let Ok(canonical) = text.parse::<i64>() {
                if canonical.to_string() == text {
                    prop_assert_eq!(parsed, Some(canonical));
                }
            }
        }
    }

    #[test]
    fn parses_pipelined_multibulk_and_inline_requests() {
        let mut bytes = encode_request(&[b"SET".to_vec(), b"k".to_vec(), b"a\r\nb".to_vec()]);
        bytes.extend_from_slice(b"PING  hello\r\n*1\r\n$4\r\nPING\r\n");
        let requests = parse_all(&bytes).unwrap();
        assert_eq!(requests.len(), 3);
        assert_eq!(requests[0][2], Bytes::from_static(b"a\r\nb"));
        assert_eq!(requests[1], vec![Bytes::from("PING"), Bytes::from("hello")]);
        assert_eq!(requests[2], vec![Bytes::from("PING")]);
    }

    #[test]
    fn long_values_stop_the_parse_where_their_bytes_begin() {
        fn takes_stream(command: &[u8], index: usize) -> bool {
            command == b"MSET" && index >= 2 && index.is_multiple_of(2)
        }
        let limits = RequestLimits {
            streaming: Some((4, takes_stream)),
            ..LIMITS
        };
        let bytes = encode_request(&[
            b"MSET".to_vec(),
            b"long-key-is-not-streamed".to_vec(),
            b"0123456789".to_vec(),
            b"k".to_vec(),
            b"v".to_vec(),
        ]);
        let mut buffer = BytesMut::from(&bytes[..]);
        let frame = parse_request(&mut buffer, &limits).unwrap().unwrap();
        assert_eq!(
            frame,
            Frame::Stream {
                args: vec![Bytes::from("MSET"), Bytes::from("long-key-is-not-streamed")],
                length: 10,
                after: 2,
            }
        );
        assert!(
            buffer.starts_with(b"0123456789\r\n"),
            "the value's bytes are left"
        );
        buffer.advance(12);
        let rest = continue_request(&mut buffer, b"MSET", 3, 2, &limits)
            .unwrap()
            .unwrap();
        assert_eq!(
            rest,
            Frame::Request(vec![Bytes::from("k"), Bytes::from("v")])
        );
        assert!(buffer.is_empty());
        // Not at a value's place, or short: buffered as ever.
        let bytes = encode_request(&[b"ECHO".to_vec(), b"0123456789".to_vec()]);
        let mut buffer = BytesMut::from(&bytes[..]);
        assert!(matches!(
            parse_request(&mut buffer, &limits),
            Ok(Some(Frame::Request(_)))
        ));
    }

    #[test]
    fn rejects_huge_lengths_before_buffering() {
        let mut buffer = BytesMut::from(&b"*1\r\n$4294967296\r\n"[..]);
        assert_eq!(
            parse_request(&mut buffer, &LIMITS),
            Err(ProtocolError("invalid bulk length".into()))
        );
        let mut buffer = BytesMut::from(&b"*99999999\r\n"[..]);
        assert!(parse_request(&mut buffer, &LIMITS).is_err());
        let mut buffer = BytesMut::from(&b"*1\r\n$-5\r\n"[..]);
        assert!(parse_request(&mut buffer, &LIMITS).is_err());
        let mut buffer = BytesMut::from(&b"*1\r\n$99999999999999999999999999\r\n"[..]);
        assert!(parse_request(&mut buffer, &LIMITS).is_err());
    }

    #[test]
    fn rejects_malformed_frames() {
        for bad in [
            &b"*1\r\n+PING\r\n"[..],
            b"*1\r\n$4\r\nPINGxx",
            b"*x\r\n",
            b"*1\n$4\r\nPING\r\n",
        ] {
            assert!(
                parse_all(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long_inline = vec![b'a'; INLINE_BYTES_MAX + 10];
        assert!(parse_all(&long_inline).is_err());
    }

    #[test]
    fn inline_commands_split_like_redis() {
        let args = |text: &[u8]| split_inline(text).map(|args| args.to_vec());
        assert_eq!(
            args(br#"set "a b" 'c\'d' "\x41\n" plain"#).unwrap(),
            vec![
                Bytes::from("set"),
                Bytes::from("a b"),
                Bytes::from("c'd"),
                Bytes::from("A\n"),
                Bytes::from("plain")
            ]
        );
        assert_eq!(args(b"  ").unwrap(), Vec::<Bytes>::new());
        assert!(args(br#"set """test-key""" v"#).is_none());
        assert!(args(br#"set "open"#).is_none());
        assert!(args(b"set 'open").is_none());
    }

    #[test]
    fn encodes_both_protocols() {
        let reply = Reply::Map(vec![(Reply::text("a"), Reply::Double(1.5))]);
        let mut two = Output::new();
        reply.encode(2, &mut two);
        assert_eq!(two.to_vec(), b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n");
        let mut three = Output::new();
        reply.encode(3, &mut three);
        assert_eq!(three.to_vec(), b"%1\r\n$1\r\na\r\n,1.5\r\n");
        // A map of bulk strings is encoded as the map of bulk replies it stands for.
        let pairs = [("f", "one"), ("field", ""), ("x", "two")]
            .map(|(field, value)| (Bytes::from(field), Bytes::from(value)));
        let as_replies = pairs
            .iter()
            .map(|(field, value)| (Reply::Bulk(field.clone()), Reply::Bulk(value.clone())));
        let general = Reply::Map(as_replies.collect());
        for version in [2, 3] {
            let (mut bulk_map, mut map) = (Output::new(), Output::new());
            Reply::BulkMap(pairs.to_vec()).encode(version, &mut bulk_map);
            general.encode(version, &mut map);
            assert_eq!(bulk_map.to_vec(), map.to_vec(), "RESP{version}");
        }
        let mut bulk_map = Output::new();
        Reply::BulkMap(pairs.to_vec()).encode(3, &mut bulk_map);
        assert_eq!(
            bulk_map.to_vec(),
            b"%3\r\n$1\r\nf\r\n$3\r\none\r\n$5\r\nfield\r\n$0\r\n\r\n$1\r\nx\r\n$3\r\ntwo\r\n"
        );
        let mut nil = Output::new();
        Reply::Nil.encode(2, &mut nil);
        Reply::Nil.encode(3, &mut nil);
        Reply::error("ERR a\r\nb").encode(2, &mut nil);
        assert_eq!(nil.to_vec(), b"$-1\r\n_\r\n-ERR a  b\r\n");
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(-2.25e-7), "-2.2499999999999999e-07");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(0.353_026_115_965_576), "0.35302611596557598");
        assert_eq!(format_double(123456.789), "123456.789");
    }

    #[test]
    fn a_reply_is_encoded_into_room_reserved_once() {
        let field = |n: usize| Reply::Bulk(Bytes::from(format!("field{n}")));
        let value = Reply::Bulk(Bytes::from(vec![b'x'; 100]));
        let replies = [
            Reply::Map((0..10).map(|n| (field(n), value.clone())).collect()),
            Reply::BulkMap(vec![
                (Bytes::from("field"), Bytes::from(vec![b'x'; 100])),
                (Bytes::new(), Bytes::from(vec![b'l'; SHARED_BULK_BYTES_MIN])),
            ]),
            Reply::Array(vec![
                Reply::Array(vec![Reply::Integer(i64::MIN), Reply::Nil, Reply::NilArray]),
                Reply::Double(-2.25e-7),
                Reply::Double(f64::MIN_POSITIVE),
                Reply::Verbatim("text".repeat(50)),
                Reply::Status("QUEUED"),
                Reply::error("ERR a\r\nb"),
                Reply::Bulk(Bytes::from(vec![b'v'; SHARED_BULK_BYTES_MIN])),
            ]),
            Reply::Integer(-1),
            Reply::Bulk(Bytes::new()),
        ];
        for reply in &replies {
            for version in [2, 3] {
                let mut out = Output::new();
                reply.encode(version, &mut out);
                let copied: usize = out.tail.len()
                    + out
                        .parts
                        .iter()
                        .map(|part| match part {
                            Part::Bytes(bytes) if bytes.len() < SHARED_BULK_BYTES_MIN => {
                                bytes.len()
                            }
                            _ => 0,
                        })
                        .sum::<usize>();
                assert!(
                    copied <= reply.copied_len_max(),
                    "{reply:?} under RESP{version}: {copied} bytes copied"
                );
                // Encoded into what `encode` reserved: the buffer never grew.
                let mut out = Output::new();
                let reserved = reply.copied_len_max();
                out.tail.reserve(reserved);
                let room = out.tail.capacity();
                reply.encode(version, &mut out);
                if out.parts.is_empty() {
                    assert_eq!(out.tail.capacity(), room, "{reply:?}");
                }
            }
        }
        // An output with room for short replies makes it at its first reply, or room for that
        // reply if it is longer.
        let mut out = Output::with_room(64);
        assert_eq!(out.tail.capacity(), 0, "nothing allocated before a reply");
        Reply::Integer(1).encode(2, &mut out);
        assert!(out.tail.capacity() >= 64);
        let mut out = Output::with_room(64);
        replies[0].encode(2, &mut out);
        let room = out.tail.capacity();
        assert!(room >= replies[0].copied_len_max() && room < 2 * replies[0].copied_len_max());
    }

    #[test]
    fn large_bulk_strings_are_queued_without_a_copy() {
        let large = Bytes::from(vec![b'v'; SHARED_BULK_BYTES_MIN]);
        let mut out = Output::new();
        Reply::Array(vec![Reply::Bulk(large.clone()), Reply::Integer(7)]).encode(2, &mut out);
        let expected_len = out.len();
        assert_eq!(out.to_vec().len(), expected_len);
        let parts = out.take();
        assert!(out.is_empty());
        let bytes: Vec<&Bytes> = parts
            .iter()
            .map(|part| match part {
                Part::Bytes(bytes) => bytes,
                Part::Stream(_) => panic!("no streamed part"),
            })
            .collect();
        assert_eq!(bytes.len(), 3, "header, the value itself, then the rest");
        assert_eq!(bytes[1].as_ptr(), large.as_ptr(), "the value's own buffer");
        assert_eq!(
            &bytes[0][..],
            format!("*2\r\n${}\r\n", large.len()).as_bytes()
        );
        assert_eq!(&bytes[2][..], b"\r\n:7\r\n");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Random bytes never panic the parser, and whatever it accepts it consumes.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut buffer = BytesMut::from(&bytes[..]);
            let mut rounds = 0;
            while let Ok(Some(_)) = parse_request(&mut buffer, &LIMITS) {
                rounds += 1;
                prop_assert!(rounds <= bytes.len() + 1);
            }
        }

        /// Mutated valid frames (one byte changed, or cut short) never panic.
        #[test]
        fn mutated_frames_never_panic(
            args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
            position in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = encode_request(&args);
            let at = position.index(bytes.len());
            bytes[at] = byte;
            bytes.truncate(cut.index(bytes.len() + 1));
            let _ = parse_all(&bytes);
        }

        /// A request split at any point parses the same as when it arrives whole.
        #[test]
        fn split_requests_parse_the_same(
            args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..100), 1..8),
            split in any::<prop::sample::Index>(),
        ) {
            let bytes = encode_request(&args);
            let at = split.index(bytes.len());
            let mut buffer = BytesMut::from(&bytes[..at]);
            prop_assert_eq!(parse_request(&mut buffer, &LIMITS).unwrap(), None);
            prop_assert_eq!(buffer.len(), at);
            buffer.extend_from_slice(&bytes[at..]);
            let parsed = parse_request(&mut buffer, &LIMITS).unwrap().unwrap();
            let expected: Vec<Bytes> = args.iter().map(|arg| Bytes::from(arg.clone())).collect();
            prop_assert_eq!(parsed, Frame::Request(expected));
            prop_assert!(buffer.is_empty());
        }
    }
}
