//! Key commands: TYPE, TTL and expiry, DEL, EXISTS, RENAME, COPY, MOVE, RANDOMKEY, SCAN, KEYS.

use super::{is, parse_int, random_u64, reply_fits, syntax_error, Ctx, Outcome, SCAN_CURSORS_MAX};
use crate::glob;
use crate::keyspace::{now_ms, ExpireCondition, KeyType};
use crate::resp::{format_double, Reply};
use bytes::Bytes;
use std::collections::HashSet;

/// Keys one step of KEYS or SCAN walks before it takes a fresh cursor (bounded work per step).
const WALK_STEP_KEYS: usize = 1000;
const SCAN_COUNT_DEFAULT: usize = 10;

pub(super) fn type_of(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let found = ctx.view().key_type(&args[1])?;
    Ok(Reply::Status(found.map_or("none", KeyType::name)))
}

/// `key`'s expiry time in unix ms, read through `measure`: -2 for no key, -1 for no expiry.
fn expiry_reply(ctx: &mut Ctx, key: &[u8], measure: impl Fn(u64) -> i64) -> Outcome {
    let view = ctx.view();
    if view.key_type(key)?.is_none() {
        return Ok(Reply::Integer(-2));
    }
    Ok(Reply::Integer(view.expires_at(key)?.map_or(-1, measure)))
}

pub(super) fn ttl(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    expiry_reply(ctx, &args[1], |at| {
        (at.saturating_sub(now_ms()) as i64 + 500) / 1000
    })
}

pub(super) fn pttl(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    expiry_reply(ctx, &args[1], |at| at.saturating_sub(now_ms()) as i64)
}

pub(super) fn expiretime(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    expiry_reply(ctx, &args[1], |at| at as i64 / 1000)
}

pub(super) fn pexpiretime(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    expiry_reply(ctx, &args[1], |at| at as i64)
}

/// EXPIRE and its siblings: `unit_ms` per unit of the argument, `absolute` for the AT forms.
fn set_expiry(ctx: &mut Ctx, args: &[Bytes], unit_ms: i64, absolute: bool) -> Outcome {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let amount = parse_int(&args[2])?;
    let mut condition = ExpireCondition::ALWAYS;
    for option in &args[3..] {
        if is(option, "NX") {
            condition.if_none = true;
        } else if is(option, "XX") {
            condition.if_some = true;
        } else if is(option, "GT") {
            condition.if_later = true;
        } else if is(option, "LT") {
            condition.if_earlier = true;
        } else {
            return Err(Reply::error(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(option)
            )));
        }
    }
    if condition.if_none && (condition.if_some || condition.if_later || condition.if_earlier) {
        return Err(Reply::error(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if condition.if_later && condition.if_earlier {
        return Err(Reply::error(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    let invalid = || Reply::error(format!("ERR invalid expire time in '{name}' command"));
    let mut at = amount.checked_mul(unit_ms).ok_or_else(invalid)?;
    if !absolute {
        at = at.checked_add(now_ms() as i64).ok_or_else(invalid)?;
    }
    // A time before the epoch is as past as the epoch: the key goes.
    let at = at.max(0) as u64;
    let changed = ctx.view().expire(&args[1], at, condition)?;
    Ok(Reply::Integer(i64::from(changed)))
}

pub(super) fn expire(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    set_expiry(ctx, args, 1000, false)
}

pub(super) fn pexpire(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    set_expiry(ctx, args, 1, false)
}

pub(super) fn expireat(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    set_expiry(ctx, args, 1000, true)
}

pub(super) fn pexpireat(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    set_expiry(ctx, args, 1, true)
}

pub(super) fn persist(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(i64::from(ctx.view().persist(&args[1])?)))
}

pub(super) fn del(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let mut view = ctx.view();
    let mut deleted = 0;
    let mut seen = HashSet::new();
    for key in &args[1..] {
        if seen.insert(key) && view.remove_key(key)? {
            deleted += 1;
        }
    }
    Ok(Reply::Integer(deleted))
}

pub(super) fn exists(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let view = ctx.view();
    let mut count = 0;
    for key in &args[1..] {
        if view.key_type(key)?.is_some() {
            count += 1;
        }
    }
    Ok(Reply::Integer(count))
}

/// RENAME and RENAMENX; returns whether it renamed.
fn rename_key(ctx: &mut Ctx, args: &[Bytes], only_if_new: bool) -> Result<bool, Reply> {
    let (from, to) = (&args[1], &args[2]);
    let mut view = ctx.view();
    let Some(records) = view.key_records(from)? else {
        return Err(Reply::error("ERR no such key"));
    };
    if from == to {
        return Ok(!only_if_new);
    }
    if only_if_new && view.key_type(to)?.is_some() {
        return Ok(false);
    }
    view.put_key_records(to, records)?;
    view.remove_key(from)?;
    Ok(true)
}

pub(super) fn rename(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    rename_key(ctx, args, false)?;
    Ok(Reply::OK)
}

pub(super) fn renamenx(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(i64::from(rename_key(ctx, args, true)?)))
}

fn database_arg(ctx: &Ctx, arg: &[u8]) -> Result<usize, Reply> {
    let index = parse_int(arg)?;
    if index < 0 || index as usize >= ctx.shared.keyspaces.len() {
        return Err(Reply::error("ERR DB index is out of range"));
    }
    Ok(index as usize)
}

pub(super) fn copy(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (from, to) = (&args[1], &args[2]);
    let mut target_db = ctx.session.db;
    let mut replace = false;
    let mut options = args[3..].iter();
    while let Some(option) = options.next() {
        if is(option, "REPLACE") {
            replace = true;
        } else if is(option, "DB") {
            target_db = database_arg(ctx, options.next().ok_or_else(syntax_error)?)?;
        } else {
            return Err(syntax_error());
        }
    }
    if from == to && target_db == ctx.session.db {
        return Err(Reply::error(
            "ERR source and destination objects are the same",
        ));
    }
    let Some(records) = ctx.view().key_records(from)? else {
        return Ok(Reply::Integer(0));
    };
    let mut target = ctx.tx.on(target_db);
    if !replace && target.key_type(to)?.is_some() {
        return Ok(Reply::Integer(0));
    }
    target.put_key_records(to, records)?;
    Ok(Reply::Integer(1))
}

pub(super) fn move_key(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let key = &args[1];
    let target_db = database_arg(ctx, &args[2])?;
    if target_db == ctx.session.db {
        return Err(Reply::error(
            "ERR source and destination objects are the same",
        ));
    }
    let Some(records) = ctx.view().key_records(key)? else {
        return Ok(Reply::Integer(0));
    };
    let mut target = ctx.tx.on(target_db);
    if target.key_type(key)?.is_some() {
        return Ok(Reply::Integer(0));
    }
    target.put_key_records(key, records)?;
    ctx.view().remove_key(key)?;
    Ok(Reply::Integer(1))
}

pub(super) fn randomkey(ctx: &mut Ctx, _: &[Bytes]) -> Outcome {
    let view = ctx.view();
    // Seek to a random place in the key order and take the next live key, wrapping around.
    let mut start = vec![0u8];
    start.extend_from_slice(&random_u64().to_be_bytes()[..3]);
    for resume in [start, Vec::new()] {
        let mut found = None;
        let mut walked = resume;
        while found.is_none() {
            let next = view.walk_keys(&walked, WALK_STEP_KEYS, |key, _| {
                if found.is_none() {
                    found = Some(Bytes::copy_from_slice(key));
                }
            })?;
            match next {
                Some(next) => walked = next,
                None => break,
            }
        }
        if let Some(key) = found {
            return Ok(Reply::Bulk(key));
        }
    }
    Ok(Reply::Nil)
}

/// SCAN's options: MATCH, COUNT and (for SCAN itself) TYPE.
struct ScanOptions {
    pattern: Option<Bytes>,
    count: usize,
    wanted_type: Option<String>,
}

fn scan_options(args: &[Bytes], allow_type: bool) -> Result<ScanOptions, Reply> {
    let mut options = ScanOptions {
        pattern: None,
        count: SCAN_COUNT_DEFAULT,
        wanted_type: None,
    };
    let mut rest = args.iter();
    while let Some(option) = rest.next() {
        let value = rest.next().ok_or_else(syntax_error)?;
        if is(option, "MATCH") {
            options.pattern = Some(value.clone());
        } else if is(option, "COUNT") {
            options.count = usize::try_from(parse_int(value)?)
                .ok()
                .filter(|&count| count > 0)
                .ok_or_else(syntax_error)?;
        } else if is(option, "TYPE") && allow_type {
            options.wanted_type = Some(String::from_utf8_lossy(value).to_ascii_lowercase());
        } else {
            return Err(syntax_error());
        }
    }
    Ok(options)
}

/// The position a SCAN cursor stands for (empty for cursor 0).
fn cursor_position(ctx: &Ctx, cursor: &[u8]) -> Result<Vec<u8>, Reply> {
    let cursor: u64 = std::str::from_utf8(cursor)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| Reply::error("ERR invalid cursor"))?;
    if cursor == 0 {
        return Ok(Vec::new());
    }
    match ctx.shared.scan_cursors.lock().positions.get(&cursor) {
        Some((db, resume)) if *db == ctx.session.db => Ok(resume.clone()),
        _ => Err(Reply::error("ERR invalid cursor")),
    }
}

/// A cursor for `next` (0 at the end); the oldest cursors are forgotten past SCAN_CURSORS_MAX.
fn new_cursor(ctx: &Ctx, next: Option<Vec<u8>>) -> Reply {
    let Some(resume) = next else {
        return Reply::text("0");
    };
    let mut cursors = ctx.shared.scan_cursors.lock();
    cursors.next_id += 1;
    let id = cursors.next_id;
    cursors.positions.insert(id, (ctx.session.db, resume));
    cursors.order.push_back(id);
    if cursors.order.len() > SCAN_CURSORS_MAX {
        if let Some(oldest) = cursors.order.pop_front() {
            cursors.positions.remove(&oldest);
        }
    }
    Reply::text(id.to_string())
}

pub(super) fn scan(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let options = scan_options(&args[2..], true)?;
    let resume = cursor_position(ctx, &args[1])?;
    let mut found = Vec::new();
    let next = ctx.view().walk_keys(
        &resume,
        options.count.min(WALK_STEP_KEYS),
        |key, key_type| {
            let type_ok = options
                .wanted_type
                .as_deref()
                .is_none_or(|wanted| wanted == key_type.name());
            let pattern_ok = options
                .pattern
                .as_ref()
                .is_none_or(|pattern| glob::matches(pattern, key));
            if type_ok && pattern_ok {
                found.push(Reply::bulk(Bytes::copy_from_slice(key)));
            }
        },
    )?;
    Ok(Reply::Array(vec![
        new_cursor(ctx, next),
        Reply::Array(found),
    ]))
}

/// HSCAN, SSCAN and ZSCAN.
fn scan_collection(ctx: &mut Ctx, args: &[Bytes], kind: KeyType) -> Outcome {
    let options = scan_options(&args[3..], false)?;
    let resume = cursor_position(ctx, &args[2])?;
    let (members, next) =
        ctx.view()
            .scan_members(&args[1], kind, &resume, options.count.min(WALK_STEP_KEYS))?;
    let mut items = Vec::new();
    for (member, value) in members {
        if options
            .pattern
            .as_ref()
            .is_some_and(|pattern| !glob::matches(pattern, &member))
        {
            continue;
        }
        items.push(Reply::Bulk(member));
        match kind {
            KeyType::Hash => items.push(Reply::Bulk(value)),
            KeyType::ZSet => {
                let bits = value
                    .get(..8)
                    .map(|bytes| u64::from_be_bytes(bytes.try_into().expect("8 bytes")))
                    .ok_or_else(|| Reply::error("ERR damaged data: a sorted-set score"))?;
                items.push(Reply::text(format_double(f64::from_bits(bits))));
            }
            _ => {}
        }
    }
    Ok(Reply::Array(vec![
        new_cursor(ctx, next),
        Reply::Array(items),
    ]))
}

pub(super) fn hscan(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    scan_collection(ctx, args, KeyType::Hash)
}

pub(super) fn sscan(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    scan_collection(ctx, args, KeyType::Set)
}

pub(super) fn zscan(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    scan_collection(ctx, args, KeyType::ZSet)
}

pub(super) fn keys(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let shared = ctx.shared;
    let view = ctx.view();
    let mut found = Vec::new();
    let mut reply_bytes = 0;
    let mut resume = Vec::new();
    loop {
        let next = view.walk_keys(&resume, WALK_STEP_KEYS, |key, _| {
            if glob::matches(&args[1], key) {
                reply_bytes += key.len() + 16;
                found.push(Reply::bulk(Bytes::copy_from_slice(key)));
            }
        })?;
        reply_fits(shared, reply_bytes)?;
        match next {
            Some(next) => resume = next,
            None => break,
        }
    }
    Ok(Reply::Array(found))
}

/// OBJECT: ShaleDB never shares one value between keys (REFCOUNT is 1), stores a small hash or
/// set in one record (ENCODING `packed`) and everything else as ordered records (`records`),
/// and keeps no access times or frequencies.
pub(super) fn object(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let sub = &args[1];
    if is(sub, "HELP") {
        return Ok(Reply::Array(
            [
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ENCODING <key>",
                "    Return the kind of internal representation used in order to store the value",
                "    associated with a <key> ('packed' or 'records' in ShaleDB).",
                "REFCOUNT <key>",
                "    Return the number of references of the value associated with the specified",
                "    <key> (always 1 in ShaleDB).",
            ]
            .iter()
            .map(|line| Reply::Status(line))
            .collect(),
        ));
    }
    if args.len() != 3 {
        return Err(Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try OBJECT HELP.",
            String::from_utf8_lossy(sub)
        )));
    }
    let encoding = ctx.view().encoding(&args[2])?;
    if is(sub, "REFCOUNT") {
        return Ok(encoding.map_or(Reply::Nil, |_| Reply::Integer(1)));
    }
    if is(sub, "ENCODING") {
        return Ok(encoding.map_or(Reply::Nil, Reply::text));
    }
    Err(Reply::error(format!(
        "ERR OBJECT {} is not kept by ShaleDB (no access times or frequencies)",
        String::from_utf8_lossy(sub).to_ascii_uppercase()
    )))
}

/// MEMORY USAGE: the bytes of the key's records (keys and values, before the engine's framing
/// and compression).
pub(super) fn memory(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    if !is(&args[1], "USAGE") || args.len() < 3 {
        return Err(Reply::error(format!(
            "ERR MEMORY {} is not supported: ShaleDB answers MEMORY USAGE only",
            String::from_utf8_lossy(&args[1]).to_ascii_uppercase()
        )));
    }
    match &args[3..] {
        [] => {}
        [option, count] if is(option, "SAMPLES") => {
            parse_int(count)?;
        }
        _ => return Err(syntax_error()),
    }
    let records = ctx.view().key_records(&args[2])?;
    Ok(records.map_or(Reply::Nil, |records| {
        Reply::Integer(records.bytes(&args[2]) as i64)
    }))
}
