//! String commands.

use super::{
    clamp_range, is, not_float, parse_float, parse_int, reply_fits, string_reply, syntax_error,
    wrong_arity, Ctx, Outcome,
};
use crate::keyspace::{self, now_ms, Failure, SetCondition, SetExpiry, StringValue};
use crate::resp::Reply;
use bytes::Bytes;

/// A string past `max_bulk_bytes` (Redis's proto-max-bulk-len), as Redis words it.
fn too_long(ctx: &Ctx) -> Reply {
    Reply::error(format!(
        "ERR string exceeds maximum allowed size (proto-max-bulk-len: {} bytes)",
        ctx.shared.max_bulk_bytes()
    ))
}

/// Whether a string of `length` bytes that a command builds whole in memory (APPEND, SETRANGE,
/// SETBIT) may be built: at most proto-max-bulk-len, and at most max_in_memory_string_bytes.
pub(super) fn check_built_length(ctx: &Ctx, length: u64) -> Result<(), Reply> {
    if length > ctx.shared.max_bulk_bytes() as u64 {
        return Err(too_long(ctx));
    }
    let in_memory = ctx.shared.config.max_in_memory_string_bytes;
    if length > in_memory as u64 {
        return Err(Reply::error(format!(
            "ERR the string would be {length} bytes, more than max_in_memory_string_bytes \
             ({in_memory}) that this command builds whole"
        )));
    }
    Ok(())
}

pub(super) fn get(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(string_reply(ctx.view().get_string_value(&args[1])?))
}

/// Whether `command` takes a string value at argument `index` that may be streamed into a blob
/// as it arrives (`resp::StreamRule`); such a value is then [`Ctx::string_arg`]'s to take.
pub fn takes_streamed_value(command: &[u8], index: usize) -> bool {
    let is_command = |name: &str| command.eq_ignore_ascii_case(name.as_bytes());
    match index {
        2 if is_command("SET") || is_command("SETNX") || is_command("GETSET") => true,
        3 if is_command("SETEX") || is_command("PSETEX") => true,
        _ => index >= 2 && index.is_multiple_of(2) && (is_command("MSET") || is_command("MSETNX")),
    }
}

/// An expiry option's time as unix ms: `option` is EX, PX, EXAT or PXAT.
fn expiry_at(option: &[u8], amount: &[u8], command: &str) -> Result<u64, Reply> {
    let amount = parse_int(amount)?;
    let invalid = || Reply::error(format!("ERR invalid expire time in '{command}' command"));
    if amount <= 0 {
        return Err(invalid());
    }
    let at = if is(option, "EX") {
        amount
            .checked_mul(1000)
            .and_then(|ms| ms.checked_add(now_ms() as i64))
    } else if is(option, "PX") {
        amount.checked_add(now_ms() as i64)
    } else if is(option, "EXAT") {
        amount.checked_mul(1000)
    } else {
        Some(amount)
    };
    at.map(|at| at as u64).ok_or_else(invalid)
}

fn is_expiry_option(option: &[u8]) -> bool {
    ["EX", "PX", "EXAT", "PXAT"]
        .iter()
        .any(|unit| is(option, unit))
}

pub(super) fn set(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let key = &args[1];
    let mut condition = SetCondition::Always;
    let mut expiry = SetExpiry::Clear;
    let mut return_old = false;
    let mut options = args[3..].iter();
    while let Some(option) = options.next() {
        if is(option, "NX") && condition != SetCondition::IfExists {
            condition = SetCondition::IfMissing;
        } else if is(option, "XX") && condition != SetCondition::IfMissing {
            condition = SetCondition::IfExists;
        } else if is(option, "GET") {
            return_old = true;
        } else if is(option, "KEEPTTL") && expiry == SetExpiry::Clear {
            expiry = SetExpiry::Keep;
        } else if is_expiry_option(option) && expiry == SetExpiry::Clear {
            let amount = options.next().ok_or_else(syntax_error)?;
            expiry = SetExpiry::At(expiry_at(option, amount, "set")?);
        } else {
            return Err(syntax_error());
        }
    }
    let data = ctx.string_arg(args, 2);
    let mut view = ctx.view();
    let old = if return_old {
        view.get_string_value(key)?
    } else {
        None
    };
    let written = view.set_string_if(key, data, condition, expiry)?;
    Ok(match (return_old, written) {
        (true, _) => string_reply(old),
        (false, true) => Reply::OK,
        (false, false) => Reply::Nil,
    })
}

pub(super) fn setnx(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let data = ctx.string_arg(args, 2);
    let written =
        ctx.view()
            .set_string_if(&args[1], data, SetCondition::IfMissing, SetExpiry::Clear)?;
    Ok(Reply::Integer(i64::from(written)))
}

fn set_with_expiry(ctx: &mut Ctx, args: &[Bytes], unit: &str, command: &str) -> Outcome {
    let at = expiry_at(unit.as_bytes(), &args[2], command)?;
    let data = ctx.string_arg(args, 3);
    ctx.view().set_string(&args[1], data, SetExpiry::At(at))?;
    Ok(Reply::OK)
}

pub(super) fn setex(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    set_with_expiry(ctx, args, "EX", "setex")
}

pub(super) fn psetex(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    set_with_expiry(ctx, args, "PX", "psetex")
}

pub(super) fn getset(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let data = ctx.string_arg(args, 2);
    let mut view = ctx.view();
    let old = view.get_string_value(&args[1])?;
    view.set_string(&args[1], data, SetExpiry::Clear)?;
    Ok(string_reply(old))
}

pub(super) fn getdel(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let mut view = ctx.view();
    let Some(old) = view.get_string_value(&args[1])? else {
        return Ok(Reply::Nil);
    };
    view.remove_key(&args[1])?;
    Ok(string_reply(Some(old)))
}

pub(super) fn getex(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    enum Change {
        None,
        At(u64),
        Persist,
    }
    let mut change = Change::None;
    let mut options = args[2..].iter();
    while let Some(option) = options.next() {
        if is(option, "PERSIST") && matches!(change, Change::None) {
            change = Change::Persist;
        } else if is_expiry_option(option) && matches!(change, Change::None) {
            let amount = options.next().ok_or_else(syntax_error)?;
            change = Change::At(expiry_at(option, amount, "getex")?);
        } else {
            return Err(syntax_error());
        }
    }
    let mut view = ctx.view();
    let Some(value) = view.get_string_value(&args[1])? else {
        return Ok(Reply::Nil);
    };
    match change {
        Change::None => {}
        Change::Persist => {
            view.persist(&args[1])?;
        }
        Change::At(at) => {
            view.expire(&args[1], at, keyspace::ExpireCondition::ALWAYS)?;
        }
    }
    Ok(string_reply(Some(value)))
}

pub(super) fn mget(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let shared = ctx.shared;
    let view = ctx.view();
    let mut values = Vec::with_capacity(args.len() - 1);
    let mut reply_bytes = 0;
    for key in &args[1..] {
        // MGET answers nil for keys of other types, as Redis does.
        let value = match view.get_string_value(key) {
            Ok(value) => value,
            Err(Failure::WrongType) => None,
            Err(other) => return Err(other.into()),
        };
        // A long string is streamed, not held: only its header counts.
        reply_bytes += match &value {
            Some(StringValue::Inline(data)) => data.len() + 16,
            _ => 16,
        };
        reply_fits(shared, reply_bytes)?;
        values.push(string_reply(value));
    }
    Ok(Reply::Array(values))
}

pub(super) fn mset(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    if args.len().is_multiple_of(2) {
        return Err(wrong_arity("mset"));
    }
    for index in (1..args.len()).step_by(2) {
        let data = ctx.string_arg(args, index + 1);
        ctx.view()
            .set_string(&args[index], data, SetExpiry::Clear)?;
    }
    Ok(Reply::OK)
}

pub(super) fn msetnx(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    if args.len().is_multiple_of(2) {
        return Err(wrong_arity("msetnx"));
    }
    let view = ctx.view();
    for pair in args[1..].chunks(2) {
        if view.key_type(&pair[0])?.is_some() {
            return Ok(Reply::Integer(0));
        }
    }
    for index in (1..args.len()).step_by(2) {
        let data = ctx.string_arg(args, index + 1);
        ctx.view()
            .set_string(&args[index], data, SetExpiry::Clear)?;
    }
    Ok(Reply::Integer(1))
}

fn add_to_integer(ctx: &mut Ctx, key: &[u8], delta: i64) -> Outcome {
    let mut view = ctx.view();
    let added = |current: i64| {
        current
            .checked_add(delta)
            .ok_or_else(|| Reply::error("ERR increment or decrement would overflow"))
    };
    let mut digits = itoa::Buffer::new();
    // A counter that exists is a short string: rewritten in place, with one lookup.
    if let Some(found) = view.live_short_string(key)? {
        let updated = added(parse_int(&found.value)?)?;
        view.rewrite_short_string(key, found, digits.format(updated).as_bytes());
        return Ok(Reply::Integer(updated));
    }
    let current = match view.get_string(key)? {
        Some(value) => parse_int(&value)?,
        None => 0,
    };
    let updated = added(current)?;
    view.set_string(key, digits.format(updated).as_bytes(), SetExpiry::Keep)?;
    Ok(Reply::Integer(updated))
}

pub(super) fn incr(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    add_to_integer(ctx, &args[1], 1)
}

pub(super) fn incrby(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let delta = parse_int(&args[2])?;
    add_to_integer(ctx, &args[1], delta)
}

pub(super) fn decr(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    add_to_integer(ctx, &args[1], -1)
}

pub(super) fn decrby(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let delta = parse_int(&args[2])?
        .checked_neg()
        .ok_or_else(|| Reply::error("ERR decrement would overflow"))?;
    add_to_integer(ctx, &args[1], delta)
}

/// Formats INCRBYFLOAT's result: Redis computes in long double and prints 17 digits, which for
/// the decimal results people add up reads as the shortest form (2.0 - 0.1 is 1.9); here that is
/// the shortest form that reads back to the same double, never in exponent notation.
pub(super) fn format_float_result(value: f64) -> String {
    if value == 0.0 {
        // No negative zero, as Redis.
        return "0".to_string();
    }
    format!("{value}")
}

pub(super) fn incrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let increment = parse_float(&args[2]).ok_or_else(not_float)?;
    let mut view = ctx.view();
    let current = match view.get_string(&args[1])? {
        Some(value) => parse_float(&value)
            .filter(|value| value.is_finite())
            .ok_or_else(not_float)?,
        None => 0.0,
    };
    let updated = current + increment;
    if !updated.is_finite() {
        return Err(Reply::error("ERR increment would produce NaN or Infinity"));
    }
    let text = format_float_result(updated);
    view.set_string(&args[1], text.as_bytes(), SetExpiry::Keep)?;
    Ok(Reply::text(text))
}

pub(super) fn append(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let old = ctx.view().get_string(&args[1])?;
    let length = old.as_ref().map_or(0, Bytes::len) + args[2].len();
    check_built_length(ctx, length as u64)?;
    let mut data = old.map_or_else(Vec::new, |value| value.to_vec());
    data.extend_from_slice(&args[2]);
    ctx.view().set_string(&args[1], &data, SetExpiry::Keep)?;
    Ok(Reply::Integer(data.len() as i64))
}

pub(super) fn strlen(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(ctx.view().string_length(&args[1])? as i64))
}

pub(super) fn setrange(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let offset = parse_int(&args[2])?;
    if offset < 0 {
        return Err(Reply::error("ERR offset is out of range"));
    }
    let offset = offset as usize;
    let patch = &args[3];
    let old = ctx.view().get_string(&args[1])?;
    if patch.is_empty() {
        return Ok(Reply::Integer(old.map_or(0, |old| old.len()) as i64));
    }
    check_built_length(ctx, (offset as u64).saturating_add(patch.len() as u64))?;
    let mut view = ctx.view();
    let mut data = old.map_or_else(Vec::new, |old| old.to_vec());
    if data.len() < offset + patch.len() {
        data.resize(offset + patch.len(), 0);
    }
    data[offset..offset + patch.len()].copy_from_slice(patch);
    view.set_string(&args[1], &data, SetExpiry::Keep)?;
    Ok(Reply::Integer(data.len() as i64))
}

pub(super) fn getrange(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (start, end) = (parse_int(&args[2])?, parse_int(&args[3])?);
    let Some(value) = ctx.view().get_string(&args[1])? else {
        return Ok(Reply::bulk(Bytes::new()));
    };
    let Some((start, end)) = clamp_range(start, end, value.len()) else {
        return Ok(Reply::bulk(Bytes::new()));
    };
    Ok(Reply::Bulk(value.slice(start..end + 1)))
}
