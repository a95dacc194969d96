//! Set commands.

use super::{
    bulk_or_nil, bulks, draw_members, intercard_args, parse_int, reply_fits, syntax_error, Ctx,
    Outcome,
};
use crate::keyspace::KeyType;
use crate::resp::Reply;
use bytes::Bytes;
use std::collections::BTreeSet;

pub(super) fn sadd(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        ctx.view().set_add(&args[1], &args[2..])? as i64
    ))
}

pub(super) fn srem(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        ctx.view()
            .remove_members(&args[1], KeyType::Set, &args[2..])? as i64,
    ))
}

pub(super) fn smembers(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let members = ctx.view().member_names(&args[1], KeyType::Set)?;
    reply_fits(
        ctx.shared,
        members.iter().map(|member| member.len() + 16).sum(),
    )?;
    Ok(bulks(members))
}

pub(super) fn sismember(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let found = ctx.view().has_member(&args[1], KeyType::Set, &args[2])?;
    Ok(Reply::Integer(i64::from(found)))
}

pub(super) fn smismember(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let view = ctx.view();
    let mut found = Vec::with_capacity(args.len() - 2);
    for member in &args[2..] {
        found.push(Reply::Integer(i64::from(view.has_member(
            &args[1],
            KeyType::Set,
            member,
        )?)));
    }
    Ok(Reply::Array(found))
}

pub(super) fn scard(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        ctx.view().member_count(&args[1], KeyType::Set)? as i64,
    ))
}

/// SPOP's and SRANDMEMBER's count: negative only where `repeats_allowed`.
fn count_arg(args: &[Bytes], repeats_allowed: bool) -> Result<Option<i64>, Reply> {
    match args.len() {
        2 => Ok(None),
        3 => match parse_int(&args[2]) {
            Ok(count) if count >= 0 || (repeats_allowed && count > i64::MIN / 2) => Ok(Some(count)),
            _ => Err(Reply::error("ERR value is out of range, must be positive")),
        },
        _ => Err(syntax_error()),
    }
}

pub(super) fn spop(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let count = count_arg(args, false)?;
    let chosen = draw_members(ctx, &args[1], KeyType::Set, count.unwrap_or(1))?;
    let mut view = ctx.view();
    view.remove_members(&args[1], KeyType::Set, &chosen)?;
    Ok(match count {
        None => bulk_or_nil(chosen.into_iter().next()),
        Some(_) => bulks(chosen),
    })
}

pub(super) fn srandmember(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let count = count_arg(args, true)?;
    Ok(match count {
        None => bulk_or_nil(draw_members(ctx, &args[1], KeyType::Set, 1)?.pop()),
        Some(count) => bulks(draw_members(ctx, &args[1], KeyType::Set, count)?),
    })
}

pub(super) fn smove(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (from, to, member) = (&args[1], &args[2], &args[3]);
    let mut view = ctx.view();
    view.check_type(from, KeyType::Set)?;
    view.check_type(to, KeyType::Set)?;
    if !view.has_member(from, KeyType::Set, member)? {
        return Ok(Reply::Integer(0));
    }
    if from != to {
        view.remove_members(from, KeyType::Set, std::slice::from_ref(member))?;
        view.set_add(to, std::slice::from_ref(member))?;
    }
    Ok(Reply::Integer(1))
}

#[derive(Clone, Copy)]
enum Combine {
    Inter,
    Union,
    Diff,
}

/// The members of the sets at `keys` combined; missing keys are empty sets.
fn combine(ctx: &mut Ctx, keys: &[Bytes], how: Combine) -> Result<BTreeSet<Bytes>, Reply> {
    let view = ctx.view();
    let mut sets = Vec::with_capacity(keys.len());
    for key in keys {
        sets.push(view.member_names(key, KeyType::Set)?);
    }
    let mut sets = sets.into_iter();
    let mut result: BTreeSet<Bytes> = sets.next().unwrap_or_default().into_iter().collect();
    for set in sets {
        match how {
            Combine::Inter => {
                let other: BTreeSet<Bytes> = set.into_iter().collect();
                result.retain(|member| other.contains(member));
            }
            Combine::Union => result.extend(set),
            Combine::Diff => {
                for member in set {
                    result.remove(&member);
                }
            }
        }
    }
    Ok(result)
}

fn combine_reply(ctx: &mut Ctx, args: &[Bytes], how: Combine) -> Outcome {
    let members = combine(ctx, &args[1..], how)?;
    reply_fits(
        ctx.shared,
        members.iter().map(|member| member.len() + 16).sum(),
    )?;
    Ok(bulks(members.into_iter().collect()))
}

fn combine_store(ctx: &mut Ctx, args: &[Bytes], how: Combine) -> Outcome {
    let members: Vec<Bytes> = combine(ctx, &args[2..], how)?.into_iter().collect();
    let size = ctx.view().set_store(&args[1], &members)?;
    Ok(Reply::Integer(size as i64))
}

pub(super) fn sinter(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_reply(ctx, args, Combine::Inter)
}

pub(super) fn sunion(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_reply(ctx, args, Combine::Union)
}

pub(super) fn sdiff(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_reply(ctx, args, Combine::Diff)
}

pub(super) fn sinterstore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_store(ctx, args, Combine::Inter)
}

pub(super) fn sunionstore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_store(ctx, args, Combine::Union)
}

pub(super) fn sdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_store(ctx, args, Combine::Diff)
}

pub(super) fn sintercard(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (keys, limit) = intercard_args(args, "ERR numkeys should be greater than 0")?;
    let members = combine(ctx, keys, Combine::Inter)?;
    Ok(Reply::Integer(members.len().min(limit) as i64))
}
