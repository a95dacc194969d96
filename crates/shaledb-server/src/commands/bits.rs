//! Bit and sequence commands on strings: SETBIT, GETBIT, BITCOUNT, LCS.

use super::{clamp_range, is, parse_int, syntax_error, Ctx, Outcome};
use crate::keyspace::{Failure, KeyType, SetExpiry};
use crate::resp::Reply;
use bytes::Bytes;

fn bit_offset(arg: &[u8], max_bytes: usize) -> Result<usize, Reply> {
    parse_int(arg)
        .ok()
        .filter(|&offset| offset >= 0 && (offset as u64) < (max_bytes as u64) * 8)
        .map(|offset| offset as usize)
        .ok_or_else(|| Reply::error("ERR bit offset is not an integer or out of range"))
}

pub(super) fn getbit(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let offset = bit_offset(&args[2], ctx.shared.max_bulk_bytes())?;
    let value = ctx.view().get_string(&args[1])?.unwrap_or_default();
    let bit = value
        .get(offset / 8)
        .map_or(0, |byte| (byte >> (7 - offset % 8)) & 1);
    Ok(Reply::Integer(i64::from(bit)))
}

pub(super) fn setbit(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let offset = bit_offset(&args[2], ctx.shared.max_bulk_bytes())?;
    let on = match &args[3][..] {
        b"0" => false,
        b"1" => true,
        _ => return Err(Reply::error("ERR bit is not an integer or out of range")),
    };
    let old = ctx.view().get_string(&args[1])?.unwrap_or_default();
    if old.len() <= offset / 8 {
        super::strings::check_built_length(ctx, (offset / 8 + 1) as u64)?;
    }
    let mut view = ctx.view();
    let mut data = old.to_vec();
    if data.len() <= offset / 8 {
        data.resize(offset / 8 + 1, 0);
    }
    let mask = 1u8 << (7 - offset % 8);
    let old = data[offset / 8] & mask != 0;
    if on {
        data[offset / 8] |= mask;
    } else {
        data[offset / 8] &= !mask;
    }
    view.set_string(&args[1], &data, SetExpiry::Keep)?;
    Ok(Reply::Integer(i64::from(old)))
}

pub(super) fn bitcount(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let range = match &args[2..] {
        [] => None,
        [start, end] => Some((parse_int(start)?, parse_int(end)?, false)),
        [start, end, unit] if is(unit, "BYTE") || is(unit, "BIT") => {
            Some((parse_int(start)?, parse_int(end)?, is(unit, "BIT")))
        }
        _ => return Err(syntax_error()),
    };
    let value = ctx.view().get_string(&args[1])?.unwrap_or_default();
    let Some((start, end, bits)) = range else {
        return Ok(Reply::Integer(
            value.iter().map(|byte| byte.count_ones() as i64).sum(),
        ));
    };
    let len = if bits { value.len() * 8 } else { value.len() };
    let Some((start, end)) = clamp_range(start, end, len) else {
        return Ok(Reply::Integer(0));
    };
    let count: i64 = if bits {
        (start..=end)
            .filter(|bit| value[bit / 8] >> (7 - bit % 8) & 1 == 1)
            .count() as i64
    } else {
        value[start..=end]
            .iter()
            .map(|byte| byte.count_ones() as i64)
            .sum()
    };
    Ok(Reply::Integer(count))
}

/// LCS, as Redis computes it (the same table, the same walk back, so the same matches).
pub(super) fn lcs(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let (mut want_len, mut want_idx, mut with_match_len) = (false, false, false);
    let mut min_match_len = 0u64;
    let mut options = args[3..].iter();
    while let Some(option) = options.next() {
        if is(option, "LEN") {
            want_len = true;
        } else if is(option, "IDX") {
            want_idx = true;
        } else if is(option, "WITHMATCHLEN") {
            with_match_len = true;
        } else if is(option, "MINMATCHLEN") {
            min_match_len = parse_int(options.next().ok_or_else(syntax_error)?)?.max(0) as u64;
        } else {
            return Err(syntax_error());
        }
    }
    if want_len && want_idx {
        return Err(Reply::error(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    let view = ctx.view();
    let mut strings = Vec::with_capacity(2);
    for key in &args[1..3] {
        match view.key_type(key)? {
            None | Some(KeyType::String) => {}
            Some(_) => {
                return Err(Reply::error(
                    "ERR The specified keys must contain string values",
                ))
            }
        }
        strings.push(match view.get_string(key) {
            Ok(value) => value.unwrap_or_default(),
            Err(Failure::WrongType) => Bytes::new(),
            Err(other) => return Err(other.into()),
        });
    }
    let (a, b) = (&strings[0], &strings[1]);
    let (alen, blen) = (a.len(), b.len());
    let table_bytes = (alen as u64 + 1) * (blen as u64 + 1) * 4;
    if table_bytes > ctx.shared.max_bulk_bytes() as u64 {
        return Err(Reply::error(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    // Redis bounds the table by proto-max-bulk-len alone; here it is memory a command holds, so
    // max_in_memory_string_bytes bounds it too.
    let in_memory_max = ctx.shared.config.max_in_memory_string_bytes;
    if table_bytes > in_memory_max as u64 {
        return Err(Reply::error(format!(
            "ERR LCS would hold a table of {table_bytes} bytes, more than \
             max_in_memory_string_bytes ({in_memory_max})"
        )));
    }
    let width = blen + 1;
    let mut table = vec![0u32; (alen + 1) * width];
    for i in 1..=alen {
        for j in 1..=blen {
            table[i * width + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * width + j - 1] + 1
            } else {
                table[(i - 1) * width + j].max(table[i * width + j - 1])
            };
        }
    }
    let lcs_len = table[alen * width + blen] as usize;
    let mut result = vec![0u8; lcs_len];
    let mut matches = Vec::new();
    let (mut i, mut j, mut index) = (alen, blen, lcs_len);
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0, 0, 0);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[index - 1] = a[i - 1];
            if a_start == alen {
                (a_start, a_end, b_start, b_end) = (i - 1, i - 1, j - 1, j - 1);
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            index -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[(i - 1) * width + j] > table[i * width + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        let match_len = (a_end - a_start + 1) as u64;
        if emit {
            if min_match_len == 0 || match_len >= min_match_len {
                let range = |start: usize, end: usize| {
                    Reply::Array(vec![
                        Reply::Integer(start as i64),
                        Reply::Integer(end as i64),
                    ])
                };
                let mut item = vec![range(a_start, a_end), range(b_start, b_end)];
                if with_match_len {
                    item.push(Reply::Integer(match_len as i64));
                }
                matches.push(Reply::Array(item));
            }
            a_start = alen;
        }
    }
    if want_idx {
        return Ok(Reply::Map(vec![
            (Reply::text("matches"), Reply::Array(matches)),
            (Reply::text("len"), Reply::Integer(lcs_len as i64)),
        ]));
    }
    if want_len {
        return Ok(Reply::Integer(lcs_len as i64));
    }
    Ok(Reply::bulk(result))
}
