//! List commands.

use super::{
    bulk_or_nil, bulks, is, parse_int, reply_fits, serve_or_block, syntax_error, unless_retrying,
    wrong_arity, Ctx, Outcome,
};
use crate::keyspace::{KeyType, ListEnd, Pivot};
use crate::resp::Reply;
use bytes::Bytes;

fn push(ctx: &mut Ctx, args: &[Bytes], end: ListEnd, only_if_exists: bool) -> Outcome {
    let len = ctx
        .view()
        .list_push(&args[1], end, &args[2..], only_if_exists)?;
    Ok(Reply::Integer(len as i64))
}

pub(super) fn lpush(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    push(ctx, args, ListEnd::Left, false)
}

pub(super) fn rpush(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    push(ctx, args, ListEnd::Right, false)
}

pub(super) fn lpushx(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    push(ctx, args, ListEnd::Left, true)
}

pub(super) fn rpushx(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    push(ctx, args, ListEnd::Right, true)
}

fn pop(ctx: &mut Ctx, args: &[Bytes], end: ListEnd) -> Outcome {
    let count = match args.len() {
        2 => None,
        3 => match parse_int(&args[2]) {
            Ok(count) if count >= 0 => Some(count as usize),
            _ => return Err(Reply::error("ERR value is out of range, must be positive")),
        },
        _ => return Err(wrong_arity(&String::from_utf8_lossy(&args[0]))),
    };
    let mut view = ctx.view();
    let popped = view.list_pop(&args[1], end, count.unwrap_or(1))?;
    Ok(match count {
        None => bulk_or_nil(popped.into_iter().next()),
        Some(_) if popped.is_empty() && view.key_type(&args[1])?.is_none() => Reply::NilArray,
        Some(_) => bulks(popped),
    })
}

pub(super) fn lpop(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    pop(ctx, args, ListEnd::Left)
}

pub(super) fn rpop(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    pop(ctx, args, ListEnd::Right)
}

pub(super) fn llen(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(ctx.view().list_len(&args[1])? as i64))
}

pub(super) fn lrange(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (start, stop) = (parse_int(&args[2])?, parse_int(&args[3])?);
    let items = ctx.view().list_range(&args[1], start, stop)?;
    reply_fits(ctx.shared, items.iter().map(|item| item.len() + 16).sum())?;
    Ok(bulks(items))
}

pub(super) fn lindex(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let index = parse_int(&args[2])?;
    Ok(bulk_or_nil(ctx.view().list_index(&args[1], index)?))
}

pub(super) fn lset(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let index = parse_int(&args[2])?;
    ctx.view().list_set(&args[1], index, &args[3])?;
    Ok(Reply::OK)
}

pub(super) fn lrem(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let count = parse_int(&args[2])?;
    let target = &args[3];
    let mut view = ctx.view();
    let mut items = view.list_all(&args[1])?;
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut removed = 0;
    if count >= 0 {
        items.retain(|item| {
            let remove = removed < limit && item == target;
            removed += usize::from(remove);
            !remove
        });
    } else {
        items.reverse();
        items.retain(|item| {
            let remove = removed < limit && item == target;
            removed += usize::from(remove);
            !remove
        });
        items.reverse();
    }
    if removed > 0 {
        view.list_rewrite(&args[1], &items)?;
    }
    Ok(Reply::Integer(removed as i64))
}

pub(super) fn ltrim(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (start, stop) = (parse_int(&args[2])?, parse_int(&args[3])?);
    ctx.view().list_trim(&args[1], start, stop)?;
    Ok(Reply::OK)
}

pub(super) fn linsert(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let pivot = if is(&args[2], "BEFORE") {
        Pivot::Before
    } else if is(&args[2], "AFTER") {
        Pivot::After
    } else {
        return Err(syntax_error());
    };
    let mut view = ctx.view();
    if !view.check_type(&args[1], KeyType::List)? {
        return Ok(Reply::Integer(0));
    }
    let mut items = view.list_all(&args[1])?;
    let Some(at) = items.iter().position(|item| *item == args[3]) else {
        return Ok(Reply::Integer(-1));
    };
    let at = if pivot == Pivot::Before { at } else { at + 1 };
    items.insert(at, args[4].clone());
    view.list_rewrite(&args[1], &items)?;
    Ok(Reply::Integer(items.len() as i64))
}

pub(super) fn lpos(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (mut rank, mut count, mut max_len) = (1i64, None, 0usize);
    let mut options = args[3..].iter();
    while let Some(option) = options.next() {
        let value = parse_int(options.next().ok_or_else(syntax_error)?)?;
        if is(option, "RANK") {
            if value == 0 || value == i64::MIN {
                return Err(Reply::error(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                     second ... or use negative to start from the end of the list",
                ));
            }
            rank = value;
        } else if is(option, "COUNT") {
            if value < 0 {
                return Err(Reply::error("ERR COUNT can't be negative"));
            }
            count = Some(value as usize);
        } else if is(option, "MAXLEN") {
            if value < 0 {
                return Err(Reply::error("ERR MAXLEN can't be negative"));
            }
            max_len = value as usize;
        } else {
            return Err(syntax_error());
        }
    }
    let items = ctx.view().list_all(&args[1])?;
    let len = items.len();
    let indices: Box<dyn Iterator<Item = usize>> = if rank > 0 {
        Box::new(0..len)
    } else {
        Box::new((0..len).rev())
    };
    let wanted = count.map_or(1, |count| if count == 0 { usize::MAX } else { count });
    let mut skip = rank.unsigned_abs() as usize - 1;
    let mut found = Vec::new();
    for (compared, index) in indices.enumerate() {
        if max_len != 0 && compared >= max_len {
            break;
        }
        if items[index] == args[2] {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            found.push(Reply::Integer(index as i64));
            if found.len() >= wanted {
                break;
            }
        }
    }
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    })
}

fn list_end(arg: &[u8]) -> Result<ListEnd, Reply> {
    if is(arg, "LEFT") {
        Ok(ListEnd::Left)
    } else if is(arg, "RIGHT") {
        Ok(ListEnd::Right)
    } else {
        Err(syntax_error())
    }
}

/// Moves one element from `from`'s end `take` to `to`'s end `put`.
fn move_element(ctx: &mut Ctx, from: &[u8], to: &[u8], take: ListEnd, put: ListEnd) -> Outcome {
    let mut view = ctx.view();
    if !view.check_type(from, KeyType::List)? {
        return Ok(Reply::Nil);
    }
    view.check_type(to, KeyType::List)?;
    let Some(element) = view.list_pop(from, take, 1)?.pop() else {
        return Ok(Reply::Nil);
    };
    view.list_push(to, put, std::slice::from_ref(&element), false)?;
    Ok(Reply::Bulk(element))
}

pub(super) fn lmove(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (take, put) = (list_end(&args[3])?, list_end(&args[4])?);
    move_element(ctx, &args[1], &args[2], take, put)
}

pub(super) fn rpoplpush(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    move_element(ctx, &args[1], &args[2], ListEnd::Right, ListEnd::Left)
}

/// BLPOP and BRPOP: the first element of the first non-empty list, or wait for one.
fn blocking_pop(ctx: &mut Ctx, args: &[Bytes], end: ListEnd) -> Outcome {
    let (keys, timeout) = args[1..].split_at(args.len() - 2);
    serve_or_block(ctx, &timeout[0], Reply::NilArray, |ctx| {
        for key in keys {
            let popped = ctx.view().list_pop(key, end, 1);
            if let Some(element) = unless_retrying(ctx, popped)?.pop() {
                return Ok(Some(Reply::Array(vec![
                    Reply::Bulk(key.clone()),
                    Reply::Bulk(element),
                ])));
            }
        }
        Ok(None)
    })
}

pub(super) fn blpop(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    blocking_pop(ctx, args, ListEnd::Left)
}

pub(super) fn brpop(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    blocking_pop(ctx, args, ListEnd::Right)
}

fn blocking_move(
    ctx: &mut Ctx,
    args: &[Bytes],
    take: ListEnd,
    put: ListEnd,
    timeout: &[u8],
) -> Outcome {
    serve_or_block(ctx, timeout, Reply::Nil, |ctx| {
        // Run again, a source that now holds another type leaves the client blocked; a
        // destination of another type is an error, as in Redis.
        let source_replaced = ctx.session.block_retry
            && ctx
                .view()
                .key_type(&args[1])?
                .is_some_and(|kind| kind != KeyType::List);
        if source_replaced {
            return Ok(None);
        }
        match move_element(ctx, &args[1], &args[2], take, put)? {
            Reply::Nil => Ok(None),
            moved => Ok(Some(moved)),
        }
    })
}

pub(super) fn blmove(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (take, put) = (list_end(&args[3])?, list_end(&args[4])?);
    blocking_move(ctx, args, take, put, &args[5])
}

pub(super) fn brpoplpush(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    blocking_move(ctx, args, ListEnd::Right, ListEnd::Left, &args[3])
}

/// LMPOP's and ZMPOP's `numkeys key... WHERE [COUNT n]`: the keys, WHERE and the count.
pub(super) fn parse_mpop<'a>(
    args: &'a [Bytes],
    wheres: [&str; 2],
) -> Result<(&'a [Bytes], bool, usize), Reply> {
    let numkeys = parse_int(&args[0])
        .ok()
        .filter(|&numkeys| numkeys > 0)
        .ok_or_else(|| Reply::error("ERR numkeys should be greater than 0"))?
        as usize;
    if numkeys >= args.len() {
        return Err(syntax_error());
    }
    let keys = &args[1..1 + numkeys];
    let first = match &args[1 + numkeys] {
        word if is(word, wheres[0]) => true,
        word if is(word, wheres[1]) => false,
        _ => return Err(syntax_error()),
    };
    let count = match &args[2 + numkeys..] {
        [] => 1,
        [option, count] if is(option, "COUNT") => parse_int(count)
            .ok()
            .filter(|&count| count > 0)
            .ok_or_else(|| {
            Reply::error("ERR count should be greater than 0")
        })? as usize,
        _ => return Err(syntax_error()),
    };
    Ok((keys, first, count))
}

/// LMPOP's reply for the first non-empty list, or `None`.
fn pop_many(ctx: &mut Ctx, args: &[Bytes]) -> Result<Option<Reply>, Reply> {
    let (keys, left, count) = parse_mpop(args, ["LEFT", "RIGHT"])?;
    let end = if left { ListEnd::Left } else { ListEnd::Right };
    for key in keys {
        let popped = ctx.view().list_pop(key, end, count);
        let popped = unless_retrying(ctx, popped)?;
        if !popped.is_empty() {
            return Ok(Some(Reply::Array(vec![
                Reply::Bulk(key.clone()),
                bulks(popped),
            ])));
        }
    }
    Ok(None)
}

pub(super) fn lmpop(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(pop_many(ctx, &args[1..])?.unwrap_or(Reply::NilArray))
}

pub(super) fn blmpop(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    serve_or_block(ctx, &args[1], Reply::NilArray, |ctx| {
        pop_many(ctx, &args[2..])
    })
}

#[cfg(test)]
mod tests {
    use crate::keyspace::normalize_range;

    #[test]
    fn ranges_read_like_redis() {
        assert_eq!(normalize_range(0, -1, 3), Some((0, 2)));
        assert_eq!(normalize_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(normalize_range(2, 1, 3), None);
        assert_eq!(normalize_range(5, 10, 3), None);
        assert_eq!(normalize_range(0, -4, 3), None);
        assert_eq!(normalize_range(0, 0, 0), None);
    }
}
