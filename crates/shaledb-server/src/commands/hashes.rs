//! Hash commands.

use super::strings::format_float_result;
use super::{
    bulk_or_nil, bulks, draw_members, draw_members_with, not_float, parse_float, parse_int,
    random_args, random_items, reply_fits, wrong_arity, Ctx, Outcome,
};
use crate::keyspace::{KeyType, View};
use crate::resp::{self, Reply};
use bytes::Bytes;

fn field_pairs(args: &[Bytes], command: &str) -> Result<Vec<(Bytes, Bytes)>, Reply> {
    if !args.len().is_multiple_of(2) {
        return Err(wrong_arity(command));
    }
    Ok(args[2..]
        .chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect())
}

pub(super) fn hset(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let pairs = field_pairs(args, "hset")?;
    let added = ctx
        .view()
        .put_members(&args[1], KeyType::Hash, &pairs, false)?;
    Ok(Reply::Integer(added as i64))
}

pub(super) fn hmset(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let pairs = field_pairs(args, "hmset")?;
    ctx.view()
        .put_members(&args[1], KeyType::Hash, &pairs, false)?;
    Ok(Reply::OK)
}

pub(super) fn hsetnx(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let pair = [(args[2].clone(), args[3].clone())];
    let added = ctx
        .view()
        .put_members(&args[1], KeyType::Hash, &pair, true)?;
    Ok(Reply::Integer(added as i64))
}

pub(super) fn hget(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(bulk_or_nil(ctx.view().hash_get(&args[1], &args[2])?))
}

pub(super) fn hmget(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let view = ctx.view();
    let mut values = Vec::with_capacity(args.len() - 2);
    for field in &args[2..] {
        values.push(bulk_or_nil(view.hash_get(&args[1], field)?));
    }
    Ok(Reply::Array(values))
}

pub(super) fn hgetall(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let pairs = ctx.view().hash_all(&args[1])?;
    let bytes: usize = pairs.iter().map(|(f, v)| f.len() + v.len() + 32).sum();
    reply_fits(ctx.shared, bytes)?;
    Ok(Reply::BulkMap(pairs))
}

pub(super) fn hkeys(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(bulks(ctx.view().member_names(&args[1], KeyType::Hash)?))
}

pub(super) fn hvals(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let pairs = ctx.view().hash_all(&args[1])?;
    let bytes: usize = pairs.iter().map(|(_, v)| v.len() + 16).sum();
    reply_fits(ctx.shared, bytes)?;
    Ok(bulks(pairs.into_iter().map(|(_, value)| value).collect()))
}

pub(super) fn hdel(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let removed = ctx
        .view()
        .remove_members(&args[1], KeyType::Hash, &args[2..])?;
    Ok(Reply::Integer(removed as i64))
}

pub(super) fn hexists(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let found = ctx.view().has_member(&args[1], KeyType::Hash, &args[2])?;
    Ok(Reply::Integer(i64::from(found)))
}

pub(super) fn hlen(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        ctx.view().member_count(&args[1], KeyType::Hash)? as i64,
    ))
}

pub(super) fn hstrlen(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let value = ctx.view().hash_get(&args[1], &args[2])?;
    Ok(Reply::Integer(value.map_or(0, |value| value.len()) as i64))
}

pub(super) fn hincrby(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let delta = parse_int(&args[3])?;
    let mut view = ctx.view();
    let current = match view.hash_get(&args[1], &args[2])? {
        Some(value) => resp::parse_integer(&value)
            .ok_or_else(|| Reply::error("ERR hash value is not an integer"))?,
        None => 0,
    };
    let updated = current
        .checked_add(delta)
        .ok_or_else(|| Reply::error("ERR increment or decrement would overflow"))?;
    let pair = [(args[2].clone(), Bytes::from(updated.to_string()))];
    view.put_members(&args[1], KeyType::Hash, &pair, false)?;
    Ok(Reply::Integer(updated))
}

pub(super) fn hincrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let increment = parse_float(&args[3]).ok_or_else(not_float)?;
    if !increment.is_finite() {
        return Err(Reply::error("ERR value is NaN or Infinity"));
    }
    let mut view = ctx.view();
    let current = match view.hash_get(&args[1], &args[2])? {
        Some(value) => parse_float(&value)
            .filter(|value| value.is_finite())
            .ok_or_else(|| Reply::error("ERR hash value is not a float"))?,
        None => 0.0,
    };
    let updated = current + increment;
    if !updated.is_finite() {
        return Err(Reply::error("ERR increment would produce NaN or Infinity"));
    }
    let text = format_float_result(updated);
    let pair = [(args[2].clone(), Bytes::from(text.clone()))];
    view.put_members(&args[1], KeyType::Hash, &pair, false)?;
    Ok(Reply::text(text))
}

pub(super) fn hrandfield(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (count, with_values) = random_args(args, "WITHVALUES")?;
    let protocol = ctx.session.protocol;
    let key = &args[1];
    let Some(count) = count else {
        return Ok(bulk_or_nil(draw_members(ctx, key, KeyType::Hash, 1)?.pop()));
    };
    let chosen = if with_values {
        let value = |view: &View, field: &[u8]| view.hash_get(key, field);
        match draw_members_with(ctx, key, KeyType::Hash, count, value)? {
            Some(pairs) => pairs,
            None => random_items(ctx.shared, ctx.view().hash_all(key)?, count)?,
        }
    } else {
        let fields = draw_members(ctx, key, KeyType::Hash, count)?;
        fields
            .into_iter()
            .map(|field| (field, Bytes::new()))
            .collect()
    };
    let mut items = Vec::with_capacity(chosen.len() * 2);
    for (field, value) in chosen {
        match (with_values, protocol >= 3) {
            (false, _) => items.push(Reply::Bulk(field)),
            (true, true) => items.push(Reply::Array(vec![Reply::Bulk(field), Reply::Bulk(value)])),
            (true, false) => {
                items.push(Reply::Bulk(field));
                items.push(Reply::Bulk(value));
            }
        }
    }
    Ok(Reply::Array(items))
}
