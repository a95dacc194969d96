//! SORT and SORT_RO over lists, sets and sorted sets (without BY and GET patterns).

use super::{bulks, is, parse_float, parse_int, syntax_error, Ctx, Outcome};
use crate::keyspace::{KeyType, ListEnd};
use crate::resp::Reply;
use bytes::Bytes;

fn sort_elements(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> Outcome {
    let (mut descending, mut alpha) = (false, false);
    let mut limit: Option<(i64, i64)> = None;
    let mut store = None;
    let mut options = args[2..].iter();
    while let Some(option) = options.next() {
        if is(option, "ASC") {
            descending = false;
        } else if is(option, "DESC") {
            descending = true;
        } else if is(option, "ALPHA") {
            alpha = true;
        } else if is(option, "LIMIT") {
            let offset = parse_int(options.next().ok_or_else(syntax_error)?)?;
            let count = parse_int(options.next().ok_or_else(syntax_error)?)?;
            limit = Some((offset, count));
        } else if is(option, "STORE") && !read_only {
            store = Some(options.next().ok_or_else(syntax_error)?.clone());
        } else if is(option, "BY") || is(option, "GET") {
            return Err(Reply::error(
                "ERR SORT BY and GET patterns are not supported by ShaleDB",
            ));
        } else {
            return Err(syntax_error());
        }
    }
    let mut view = ctx.view();
    let mut elements = match view.key_type(&args[1])? {
        None => Vec::new(),
        Some(KeyType::List) => view.list_all(&args[1])?,
        Some(KeyType::Set) => view.member_names(&args[1], KeyType::Set)?,
        Some(KeyType::ZSet) => view
            .zset_ranked(&args[1], None, false)?
            .map(|item| item.map(|(member, _)| member))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(crate::keyspace::Failure::WrongType.into()),
    };
    if alpha {
        elements.sort();
    } else {
        let mut keyed = Vec::with_capacity(elements.len());
        for element in elements {
            let score = parse_float(&element).ok_or_else(|| {
                Reply::error("ERR One or more scores can't be converted into double")
            })?;
            keyed.push((score, element));
        }
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        elements = keyed.into_iter().map(|(_, element)| element).collect();
    }
    if descending {
        elements.reverse();
    }
    if let Some((offset, count)) = limit {
        let start = (offset.max(0) as usize).min(elements.len());
        let end = if count < 0 {
            elements.len()
        } else {
            (start + count as usize).min(elements.len())
        };
        elements = elements[start..end].to_vec();
    }
    match store {
        Some(destination) => {
            view.remove_key(&destination)?;
            let len = view.list_push(&destination, ListEnd::Right, &elements, false)?;
            Ok(Reply::Integer(len as i64))
        }
        None => Ok(bulks(elements)),
    }
}

pub(super) fn sort(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    sort_elements(ctx, args, false)
}

pub(super) fn sort_ro(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    sort_elements(ctx, args, true)
}
