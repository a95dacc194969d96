//! Sorted-set commands.

use super::{
    draw_members, draw_members_with, intercard_args, is, is_wrong_type, not_float, parse_float,
    parse_int, random_args, random_items, reply_fits, serve_or_block, syntax_error, Ctx, Outcome,
};
use crate::keyspace::{normalize_range, KeyType, LexBound, ScoreBound, View};
use crate::resp::Reply;
use bytes::Bytes;
use std::collections::HashMap;

/// Members with their scores, as a reply: flat or (RESP3) as pairs with WITHSCORES.
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

fn score_bounds(min: &[u8], max: &[u8]) -> Result<(ScoreBound, ScoreBound), Reply> {
    parse_score_bound(min)
        .zip(parse_score_bound(max))
        .ok_or_else(|| Reply::error("ERR min or max is not a float"))
}

fn parse_lex_bound(arg: &Bytes) -> Option<LexBound> {
    match arg.first()? {
        b'-' if arg.len() == 1 => Some(LexBound::Lowest),
        b'+' if arg.len() == 1 => Some(LexBound::Highest),
        b'[' => Some(LexBound::Inclusive(arg.slice(1..))),
        b'(' => Some(LexBound::Exclusive(arg.slice(1..))),
        _ => None,
    }
}

fn lex_bounds(min: &Bytes, max: &Bytes) -> Result<(LexBound, LexBound), Reply> {
    parse_lex_bound(min)
        .zip(parse_lex_bound(max))
        .ok_or_else(|| Reply::error("ERR min or max not valid string range item"))
}

/// Which members a range takes.
enum RangeBy {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

/// A range of a sorted set: `by`, from the top with `reverse`, then LIMIT's offset and count.
struct Range {
    by: RangeBy,
    reverse: bool,
    offset: usize,
    limit: Option<usize>,
}

impl Range {
    fn members(&self, view: &View, key: &[u8]) -> Result<Vec<(Bytes, f64)>, Reply> {
        let mut out = Vec::new();
        let mut skipped = 0;
        let (from, first_rank, last_rank) = match &self.by {
            // Ranks counted from the front need no count: the walk stops past the last one
            // (ZPOPMIN, ZRANGE 0 9; with start above stop, before reaching start). Counting
            // walks every member, milliseconds for a large set.
            RangeBy::Rank(start, stop) if *start >= 0 && *stop >= 0 => {
                (None, *start as usize, *stop as usize)
            }
            RangeBy::Rank(start, stop) => {
                let len = view.member_count(key, KeyType::ZSet)?;
                match normalize_range(*start, *stop, len) {
                    // Ranks in the back half (ZRANGE key -10 -1) are walked from the other end,
                    // only to the range's far rank, where a walk from the front passed every
                    // member before them.
                    Some((first, last))
                        if first > len / 2 && self.offset == 0 && self.limit.is_none() =>
                    {
                        let from_back = Range {
                            by: RangeBy::Rank((len - 1 - last) as i64, (len - 1 - first) as i64),
                            reverse: !self.reverse,
                            offset: 0,
                            limit: None,
                        };
                        let mut out = from_back.members(view, key)?;
                        out.reverse();
                        return Ok(out);
                    }
                    Some((first, last)) => (None, first, last),
                    None => return Ok(out),
                }
            }
            RangeBy::Score(min, max) => (
                Some(if self.reverse { max.score } else { min.score }),
                0,
                usize::MAX,
            ),
            RangeBy::Lex(..) => (None, 0, usize::MAX),
        };
        for (rank, item) in view.zset_ranked(key, from, self.reverse)?.enumerate() {
            let (member, score) = item?;
            // Whether this member is before the range (skip it) or past it (stop).
            let (before, past) = match &self.by {
                RangeBy::Rank(..) => (rank < first_rank, rank > last_rank),
                RangeBy::Score(min, max) if !self.reverse => {
                    (!min.admits_above(score), !max.admits_below(score))
                }
                RangeBy::Score(min, max) => (!max.admits_below(score), !min.admits_above(score)),
                RangeBy::Lex(min, max) if !self.reverse => {
                    (!min.admits_above(&member), !max.admits_below(&member))
                }
                RangeBy::Lex(min, max) => (!max.admits_below(&member), !min.admits_above(&member)),
            };
            if past {
                break;
            }
            if before {
                continue;
            }
            if skipped < self.offset {
                skipped += 1;
                continue;
            }
            if self.limit.is_some_and(|limit| out.len() >= limit) {
                break;
            }
            out.push((member, score));
        }
        Ok(out)
    }
}

/// LIMIT's offset and count: a negative offset selects nothing, a negative count everything.
fn limit_args(offset: &[u8], count: &[u8]) -> Result<(usize, Option<usize>, bool), Reply> {
    let (offset, count) = (parse_int(offset)?, parse_int(count)?);
    Ok((
        offset.max(0) as usize,
        (count >= 0).then_some(count as usize),
        offset < 0,
    ))
}

/// Parses ZRANGE's (and ZRANGESTORE's) arguments after the key: `min max [BYSCORE|BYLEX] [REV]
/// [LIMIT offset count] [WITHSCORES]`. Returns the range and WITHSCORES, or `None` for an empty
/// range (a negative LIMIT offset).
fn parse_zrange(args: &[Bytes], allow_scores: bool) -> Result<(Option<Range>, bool), Reply> {
    let (mut by_score, mut by_lex, mut reverse, mut with_scores) = (false, false, false, false);
    let mut limit = None;
    let mut position = 2;
    while let Some(option) = args.get(position) {
        if is(option, "BYSCORE") {
            by_score = true;
        } else if is(option, "BYLEX") {
            by_lex = true;
        } else if is(option, "REV") {
            reverse = true;
        } else if is(option, "WITHSCORES") && allow_scores {
            with_scores = true;
        } else if is(option, "LIMIT") && args.len() > position + 2 {
            limit = Some(limit_args(&args[position + 1], &args[position + 2])?);
            position += 2;
        } else {
            return Err(syntax_error());
        }
        position += 1;
    }
    if by_score && by_lex {
        return Err(syntax_error());
    }
    if limit.is_some() && !by_score && !by_lex {
        return Err(Reply::error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if with_scores && by_lex {
        return Err(Reply::error(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // With REV, BYSCORE and BYLEX take the maximum first.
    let (low, high) = if reverse && (by_score || by_lex) {
        (&args[1], &args[0])
    } else {
        (&args[0], &args[1])
    };
    let by = if by_score {
        let (min, max) = score_bounds(low, high)?;
        RangeBy::Score(min, max)
    } else if by_lex {
        let (min, max) = lex_bounds(low, high)?;
        RangeBy::Lex(min, max)
    } else {
        RangeBy::Rank(parse_int(low)?, parse_int(high)?)
    };
    let (offset, count, empty) = limit.unwrap_or((0, None, false));
    if empty {
        return Ok((None, with_scores));
    }
    Ok((
        Some(Range {
            by,
            reverse,
            offset,
            limit: count,
        }),
        with_scores,
    ))
}

fn range_reply(ctx: &mut Ctx, key: &[u8], range: Option<Range>, with_scores: bool) -> Outcome {
    let protocol = ctx.session.protocol;
    let members = match range {
        Some(range) => range.members(&ctx.view(), key)?,
        None => {
            ctx.view().check_type(key, KeyType::ZSet)?;
            Vec::new()
        }
    };
    reply_fits(
        ctx.shared,
        members.iter().map(|(member, _)| member.len() + 40).sum(),
    )?;
    Ok(scored(members, with_scores, protocol))
}

pub(super) fn zrange(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (range, with_scores) = parse_zrange(&args[2..], true)?;
    range_reply(ctx, &args[1], range, with_scores)
}

pub(super) fn zrangestore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (range, _) = parse_zrange(&args[3..], false)?;
    let mut view = ctx.view();
    let members = match range {
        Some(range) => range.members(&view, &args[2])?,
        None => Vec::new(),
    };
    Ok(Reply::Integer(view.zset_store(&args[1], &members)? as i64))
}

/// The old forms: ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX.
fn classic_range(ctx: &mut Ctx, args: &[Bytes], by: &str, reverse: bool) -> Outcome {
    let mut rest: Vec<Bytes> = args[2..4].to_vec();
    if !by.is_empty() {
        rest.push(Bytes::from(by.to_string()));
    }
    if reverse {
        rest.push(Bytes::from_static(b"REV"));
    }
    let mut position = 4;
    while let Some(option) = args.get(position) {
        let scores_allowed = by != "BYLEX";
        if is(option, "WITHSCORES") && scores_allowed {
            rest.push(option.clone());
            position += 1;
        } else if is(option, "LIMIT") && !by.is_empty() && args.len() > position + 2 {
            rest.extend_from_slice(&args[position..position + 3]);
            position += 3;
        } else {
            return Err(syntax_error());
        }
    }
    let (range, with_scores) = parse_zrange(&rest, true)?;
    range_reply(ctx, &args[1], range, with_scores)
}

pub(super) fn zrevrange(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    classic_range(ctx, args, "", true)
}

pub(super) fn zrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    classic_range(ctx, args, "BYSCORE", false)
}

pub(super) fn zrevrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    classic_range(ctx, args, "BYSCORE", true)
}

pub(super) fn zrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    classic_range(ctx, args, "BYLEX", false)
}

pub(super) fn zrevrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    classic_range(ctx, args, "BYLEX", true)
}

pub(super) fn zadd(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut increment) =
        (false, false, false, false, false, false);
    let mut position = 2;
    while let Some(option) = args.get(position) {
        let flag = [
            ("NX", &mut nx),
            ("XX", &mut xx),
            ("GT", &mut gt),
            ("LT", &mut lt),
            ("CH", &mut ch),
            ("INCR", &mut increment),
        ]
        .into_iter()
        .find(|(name, _)| is(option, name));
        let Some((_, flag)) = flag else {
            break;
        };
        *flag = true;
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
        let score = parse_float(&pair[0]).ok_or_else(not_float)?;
        pairs.push((score, pair[1].clone()));
    }
    let key = &args[1];
    let mut view = ctx.view();
    let mut exists = view.prepare(key, KeyType::ZSet)?;
    // Scores as this command leaves them, so a member named twice is handled as Redis does.
    // (Only needed, and only kept, when the command names more than one member.)
    let mut scores: HashMap<Bytes, Option<f64>> = HashMap::new();
    let many = pairs.len() > 1;
    let (mut added, mut changed) = (0i64, 0i64);
    let mut result = None;
    for (score, member) in pairs {
        let old = match scores.get(&member) {
            Some(known) => *known,
            None if exists => view.zset_score(key, &member)?,
            None => None,
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
            result = Some(new);
            if new == old {
                continue;
            }
            changed += 1;
        } else {
            added += 1;
        }
        view.zset_put(key, &member, new, old, &mut exists)?;
        if many {
            scores.insert(member, Some(new));
        }
        result = Some(new);
    }
    if increment {
        return Ok(result.map_or(Reply::Nil, Reply::Double));
    }
    Ok(Reply::Integer(if ch { added + changed } else { added }))
}

pub(super) fn zincrby(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let rewritten = [
        args[0].clone(),
        args[1].clone(),
        Bytes::from_static(b"INCR"),
        args[2].clone(),
        args[3].clone(),
    ];
    zadd(ctx, &rewritten)
}

pub(super) fn zrem(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let key = &args[1];
    let mut view = ctx.view();
    if !view.prepare(key, KeyType::ZSet)? {
        return Ok(Reply::Integer(0));
    }
    let mut removed = 0;
    for member in &args[2..] {
        if let Some(score) = view.zset_score(key, member)? {
            view.zset_remove(key, member, score)?;
            removed += 1;
        }
    }
    Ok(Reply::Integer(removed))
}

pub(super) fn zscore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let score = ctx.view().zset_score(&args[1], &args[2])?;
    Ok(score.map_or(Reply::Nil, Reply::Double))
}

pub(super) fn zmscore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let view = ctx.view();
    let mut scores = Vec::with_capacity(args.len() - 2);
    for member in &args[2..] {
        scores.push(
            view.zset_score(&args[1], member)?
                .map_or(Reply::Nil, Reply::Double),
        );
    }
    Ok(Reply::Array(scores))
}

pub(super) fn zcard(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(Reply::Integer(
        ctx.view().member_count(&args[1], KeyType::ZSet)? as i64,
    ))
}

fn count_in(ctx: &mut Ctx, key: &[u8], by: RangeBy) -> Outcome {
    let range = Range {
        by,
        reverse: false,
        offset: 0,
        limit: None,
    };
    Ok(Reply::Integer(range.members(&ctx.view(), key)?.len() as i64))
}

pub(super) fn zcount(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (min, max) = score_bounds(&args[2], &args[3])?;
    count_in(ctx, &args[1], RangeBy::Score(min, max))
}

pub(super) fn zlexcount(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (min, max) = lex_bounds(&args[2], &args[3])?;
    count_in(ctx, &args[1], RangeBy::Lex(min, max))
}

fn rank_of(ctx: &mut Ctx, args: &[Bytes], reverse: bool) -> Outcome {
    let with_score = match args.get(3) {
        None => false,
        Some(option) if args.len() == 4 && is(option, "WITHSCORE") => true,
        Some(_) => return Err(syntax_error()),
    };
    let view = ctx.view();
    let Some(score) = view.zset_score(&args[1], &args[2])? else {
        return Ok(if with_score {
            Reply::NilArray
        } else {
            Reply::Nil
        });
    };
    let mut rank = 0;
    for item in view.zset_ranked(&args[1], None, reverse)? {
        let (member, _) = item?;
        if member == args[2] {
            break;
        }
        rank += 1;
    }
    Ok(if with_score {
        Reply::Array(vec![Reply::Integer(rank), Reply::Double(score)])
    } else {
        Reply::Integer(rank)
    })
}

pub(super) fn zrank(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    rank_of(ctx, args, false)
}

pub(super) fn zrevrank(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    rank_of(ctx, args, true)
}

fn pop(ctx: &mut Ctx, args: &[Bytes], highest: bool) -> Outcome {
    let count = match args.len() {
        2 => None,
        3 => match parse_int(&args[2]) {
            Ok(count) if count >= 0 => Some(count as usize),
            _ => return Err(Reply::error("ERR value is out of range, must be positive")),
        },
        _ => return Err(syntax_error()),
    };
    let protocol = ctx.session.protocol;
    let mut view = ctx.view();
    let range = Range {
        by: RangeBy::Rank(0, count.unwrap_or(1) as i64 - 1),
        reverse: highest,
        offset: 0,
        limit: None,
    };
    let members = if count == Some(0) {
        view.check_type(&args[1], KeyType::ZSet)?;
        Vec::new()
    } else {
        range.members(&view, &args[1])?
    };
    for (member, score) in &members {
        view.zset_remove(&args[1], member, *score)?;
    }
    Ok(match count {
        Some(_) => scored(members, true, protocol),
        None => scored(members, true, 2.min(protocol)),
    })
}

pub(super) fn zpopmin(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    pop(ctx, args, false)
}

pub(super) fn zpopmax(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    pop(ctx, args, true)
}

fn remove_range(ctx: &mut Ctx, key: &[u8], by: RangeBy) -> Outcome {
    let range = Range {
        by,
        reverse: false,
        offset: 0,
        limit: None,
    };
    let mut view = ctx.view();
    let members = range.members(&view, key)?;
    for (member, score) in &members {
        view.zset_remove(key, member, *score)?;
    }
    Ok(Reply::Integer(members.len() as i64))
}

pub(super) fn zremrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (min, max) = score_bounds(&args[2], &args[3])?;
    remove_range(ctx, &args[1], RangeBy::Score(min, max))
}

pub(super) fn zremrangebyrank(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (start, stop) = (parse_int(&args[2])?, parse_int(&args[3])?);
    remove_range(ctx, &args[1], RangeBy::Rank(start, stop))
}

pub(super) fn zremrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (min, max) = lex_bounds(&args[2], &args[3])?;
    remove_range(ctx, &args[1], RangeBy::Lex(min, max))
}

/// The members of a sorted set, or of a set with scores of 1 (ZUNION and friends take both).
fn weighted_members(view: &View, key: &[u8]) -> Result<Vec<(Bytes, f64)>, Reply> {
    match view.key_type(key)? {
        None => Ok(Vec::new()),
        Some(KeyType::ZSet) => Ok(view
            .zset_ranked(key, None, false)?
            .collect::<Result<Vec<_>, _>>()?),
        Some(KeyType::Set) => Ok(view
            .member_names(key, KeyType::Set)?
            .into_iter()
            .map(|member| (member, 1.0))
            .collect()),
        Some(_) => Err(crate::keyspace::Failure::WrongType.into()),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Combine {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            // inf + -inf is NaN; Redis makes it 0.
            Aggregate::Sum => {
                let sum = a + b;
                if sum.is_nan() {
                    0.0
                } else {
                    sum
                }
            }
            Aggregate::Min => a.min(b),
            Aggregate::Max => a.max(b),
        }
    }
}

/// Parses `numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]` starting at
/// `args[0]` (numkeys), combines the inputs and returns the result in member order, and
/// WITHSCORES.
fn combine(
    ctx: &mut Ctx,
    args: &[Bytes],
    how: Combine,
    command: &str,
    allow_scores: bool,
) -> Result<(Vec<(Bytes, f64)>, bool), Reply> {
    let numkeys = parse_int(&args[0])?;
    if numkeys <= 0 {
        return Err(Reply::error(format!(
            "ERR at least 1 input key is needed for '{command}' command"
        )));
    }
    let numkeys = numkeys as usize;
    if numkeys > args.len() - 1 {
        return Err(syntax_error());
    }
    let keys = &args[1..1 + numkeys];
    let mut weights = vec![1.0; numkeys];
    let mut aggregate = Aggregate::Sum;
    let mut with_scores = false;
    let mut position = 1 + numkeys;
    while let Some(option) = args.get(position) {
        if is(option, "WEIGHTS") && how != Combine::Diff && args.len() > position + numkeys {
            for (index, weight) in args[position + 1..position + 1 + numkeys]
                .iter()
                .enumerate()
            {
                weights[index] = parse_float(weight)
                    .ok_or_else(|| Reply::error("ERR weight value is not a float"))?;
            }
            position += 1 + numkeys;
        } else if is(option, "AGGREGATE") && how != Combine::Diff && args.len() > position + 1 {
            let kind = &args[position + 1];
            aggregate = if is(kind, "SUM") {
                Aggregate::Sum
            } else if is(kind, "MIN") {
                Aggregate::Min
            } else if is(kind, "MAX") {
                Aggregate::Max
            } else {
                return Err(syntax_error());
            };
            position += 2;
        } else if is(option, "WITHSCORES") && allow_scores {
            with_scores = true;
            position += 1;
        } else {
            return Err(syntax_error());
        }
    }
    let view = ctx.view();
    let mut inputs = Vec::with_capacity(numkeys);
    for key in keys {
        inputs.push(weighted_members(&view, key)?);
    }
    let mut result: HashMap<Bytes, f64> = HashMap::new();
    let weighted = |score: f64, weight: f64| {
        let value = score * weight;
        if value.is_nan() {
            0.0
        } else {
            value
        }
    };
    match how {
        Combine::Union => {
            for (input, weight) in inputs.into_iter().zip(&weights) {
                for (member, score) in input {
                    let score = weighted(score, *weight);
                    result
                        .entry(member)
                        .and_modify(|total| *total = aggregate.apply(*total, score))
                        .or_insert(score);
                }
            }
        }
        Combine::Inter => {
            let mut inputs = inputs.into_iter().zip(&weights);
            if let Some((first, weight)) = inputs.next() {
                result = first
                    .into_iter()
                    .map(|(member, score)| (member, weighted(score, *weight)))
                    .collect();
            }
            for (input, weight) in inputs {
                let other: HashMap<Bytes, f64> = input.into_iter().collect();
                result.retain(|member, _| other.contains_key(member));
                for (member, total) in result.iter_mut() {
                    *total = aggregate.apply(*total, weighted(other[member], *weight));
                }
            }
        }
        Combine::Diff => {
            let mut inputs = inputs.into_iter();
            result = inputs.next().unwrap_or_default().into_iter().collect();
            for input in inputs {
                for (member, _) in input {
                    result.remove(&member);
                }
            }
        }
    }
    let mut members: Vec<(Bytes, f64)> = result.into_iter().collect();
    members.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok((members, with_scores))
}

fn combine_reply(ctx: &mut Ctx, args: &[Bytes], how: Combine, command: &str) -> Outcome {
    let protocol = ctx.session.protocol;
    let (members, with_scores) = combine(ctx, &args[1..], how, command, true)?;
    reply_fits(
        ctx.shared,
        members.iter().map(|(member, _)| member.len() + 40).sum(),
    )?;
    Ok(scored(members, with_scores, protocol))
}

fn combine_store(ctx: &mut Ctx, args: &[Bytes], how: Combine, command: &str) -> Outcome {
    let (members, _) = combine(ctx, &args[2..], how, command, false)?;
    Ok(Reply::Integer(
        ctx.view().zset_store(&args[1], &members)? as i64
    ))
}

pub(super) fn zunion(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_reply(ctx, args, Combine::Union, "zunion")
}

pub(super) fn zinter(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_reply(ctx, args, Combine::Inter, "zinter")
}

pub(super) fn zdiff(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_reply(ctx, args, Combine::Diff, "zdiff")
}

pub(super) fn zunionstore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_store(ctx, args, Combine::Union, "zunionstore")
}

pub(super) fn zinterstore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_store(ctx, args, Combine::Inter, "zinterstore")
}

pub(super) fn zdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    combine_store(ctx, args, Combine::Diff, "zdiffstore")
}

pub(super) fn zintercard(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (keys, limit) = intercard_args(
        args,
        "ERR at least 1 input key is needed for 'zintercard' command",
    )?;
    let mut combine_args = vec![Bytes::from(keys.len().to_string())];
    combine_args.extend_from_slice(keys);
    let (members, _) = combine(ctx, &combine_args, Combine::Inter, "zintercard", false)?;
    Ok(Reply::Integer(members.len().min(limit) as i64))
}

/// A key and the members popped from it, with their scores.
type Popped = (Bytes, Vec<(Bytes, f64)>);

/// The lowest (or highest) `count` members of the first non-empty sorted set of `keys`,
/// removed; `None` when all are empty.
fn pop_first(
    ctx: &mut Ctx,
    keys: &[Bytes],
    highest: bool,
    count: usize,
) -> Result<Option<Popped>, Reply> {
    for key in keys {
        let range = Range {
            by: RangeBy::Rank(0, count as i64 - 1),
            reverse: highest,
            offset: 0,
            limit: None,
        };
        let members = match range.members(&ctx.view(), key) {
            Err(wrong_type) if ctx.session.block_retry && is_wrong_type(&wrong_type) => continue,
            other => other?,
        };
        let mut view = ctx.view();
        if members.is_empty() {
            continue;
        }
        for (member, score) in &members {
            view.zset_remove(key, member, *score)?;
        }
        return Ok(Some((key.clone(), members)));
    }
    Ok(None)
}

fn blocking_pop(ctx: &mut Ctx, args: &[Bytes], highest: bool) -> Outcome {
    let (keys, timeout) = args[1..].split_at(args.len() - 2);
    serve_or_block(ctx, &timeout[0], Reply::NilArray, |ctx| {
        Ok(pop_first(ctx, keys, highest, 1)?.map(|(key, members)| {
            let (member, score) = members.into_iter().next().expect("one member");
            Reply::Array(vec![
                Reply::Bulk(key),
                Reply::Bulk(member),
                Reply::Double(score),
            ])
        }))
    })
}

pub(super) fn bzpopmin(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    blocking_pop(ctx, args, false)
}

pub(super) fn bzpopmax(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    blocking_pop(ctx, args, true)
}

fn pop_many(ctx: &mut Ctx, args: &[Bytes]) -> Result<Option<Reply>, Reply> {
    let (keys, lowest, count) = super::lists::parse_mpop(args, ["MIN", "MAX"])?;
    Ok(pop_first(ctx, keys, !lowest, count)?.map(|(key, members)| {
        let pairs = members
            .into_iter()
            .map(|(member, score)| Reply::Array(vec![Reply::Bulk(member), Reply::Double(score)]))
            .collect();
        Reply::Array(vec![Reply::Bulk(key), Reply::Array(pairs)])
    }))
}

pub(super) fn zmpop(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    Ok(pop_many(ctx, &args[1..])?.unwrap_or(Reply::NilArray))
}

pub(super) fn bzmpop(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    serve_or_block(ctx, &args[1], Reply::NilArray, |ctx| {
        pop_many(ctx, &args[2..])
    })
}

pub(super) fn zrandmember(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (count, with_scores) = random_args(args, "WITHSCORES")?;
    let protocol = ctx.session.protocol;
    let key = &args[1];
    let Some(count) = count else {
        let drawn = draw_members(ctx, key, KeyType::ZSet, 1)?.pop();
        return Ok(drawn.map_or(Reply::Nil, Reply::Bulk));
    };
    let chosen = if with_scores {
        let score = |view: &View, member: &[u8]| view.zset_score(key, member);
        match draw_members_with(ctx, key, KeyType::ZSet, count, score)? {
            Some(scored) => scored,
            None => {
                let view = ctx.view();
                let all = view
                    .zset_ranked(key, None, false)?
                    .collect::<Result<_, _>>()?;
                random_items(ctx.shared, all, count)?
            }
        }
    } else {
        let members = draw_members(ctx, key, KeyType::ZSet, count)?;
        members.into_iter().map(|member| (member, 0.0)).collect()
    };
    Ok(scored(chosen, with_scores, protocol))
}
