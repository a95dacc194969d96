//! `rocksdb_writebatch_t`: writes collected to apply atomically with `rocksdb_write`, as one
//! ShaleDB write batch (all of it survives a crash, or none).
//!
//! Its serialized form (`rocksdb_writebatch_data`, `rocksdb_writebatch_create_from`) is
//! RocksDB's: a 12-byte header (sequence number, count) and one tagged record per operation.

use crate::args::{bytes, drop_handle, handle, handle_mut, into_handle, set_out};
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t, sync_if_asked, Database};
use crate::plugins::Feature;
use crate::read_write_options::rocksdb_writeoptions_t;
use crate::status::{call, quiet, Result, Status};
use libc::{c_char, c_void};

/// What one operation of a batch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Put,
    Delete,
    SingleDelete,
    DeleteRange,
    Merge,
    LogData,
}

impl OpKind {
    /// RocksDB's record tags (db/dbformat.h): for the default column family, and for others.
    fn tags(self) -> (u8, u8) {
        match self {
            OpKind::Put => (0x01, 0x05),
            OpKind::Delete => (0x00, 0x04),
            OpKind::SingleDelete => (0x07, 0x08),
            OpKind::DeleteRange => (0x0F, 0x0E),
            OpKind::Merge => (0x02, 0x06),
            OpKind::LogData => (0x03, 0x03),
        }
    }

    fn of_tag(tag: u8) -> Option<(OpKind, bool)> {
        [
            OpKind::Put,
            OpKind::Delete,
            OpKind::SingleDelete,
            OpKind::DeleteRange,
            OpKind::Merge,
            OpKind::LogData,
        ]
        .into_iter()
        .find_map(|kind| {
            let (default, other) = kind.tags();
            if tag == default {
                Some((kind, false))
            } else if tag == other {
                Some((kind, true))
            } else {
                None
            }
        })
    }
}

/// One operation: on column family `cf` (its number), `key` (a range's start) and `value` (a
/// put's value, a range's end, a merge operand, a log blob).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Op {
    pub kind: OpKind,
    pub cf: u32,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// `rocksdb_writebatch_t`.
#[derive(Default, Clone)]
pub struct rocksdb_writebatch_t {
    pub(crate) ops: Vec<Op>,
    save_points: Vec<usize>,
    /// The serialized form last handed out by `rocksdb_writebatch_data`.
    serialized: Vec<u8>,
    /// Why an operation could not be added (c.h's adders report nothing): `rocksdb_write`
    /// fails with it rather than write the batch without that operation.
    pub(crate) error: Option<Status>,
}

impl rocksdb_writebatch_t {
    fn push(&mut self, kind: OpKind, cf: u32, key: &[u8], value: &[u8]) {
        self.ops.push(Op {
            kind,
            cf,
            key: key.to_vec(),
            value: value.to_vec(),
        });
    }

    /// The operations that change data (a log blob changes none), as RocksDB counts them.
    fn count(&self) -> usize {
        self.ops
            .iter()
            .filter(|op| op.kind != OpKind::LogData)
            .count()
    }

    pub(crate) fn serialize(&self) -> Vec<u8> {
        let mut out = vec![0u8; 8];
        out.extend_from_slice(&(self.count() as u32).to_le_bytes());
        for op in &self.ops {
            let (default, other) = op.kind.tags();
            if op.kind == OpKind::LogData {
                out.push(default);
                put_slice(&mut out, &op.key);
                continue;
            }
            if op.cf == 0 {
                out.push(default);
            } else {
                out.push(other);
                put_varint(&mut out, op.cf);
            }
            put_slice(&mut out, &op.key);
            if op.kind != OpKind::Delete && op.kind != OpKind::SingleDelete {
                put_slice(&mut out, &op.value);
            }
        }
        out
    }

    pub(crate) fn parse(mut rep: &[u8]) -> Result<rocksdb_writebatch_t> {
        let malformed = |what: &str| Status::new(crate::status::Code::Corruption, what.to_string());
        if rep.len() < 12 {
            return Err(malformed("malformed WriteBatch (too small)"));
        }
        let count = u32::from_le_bytes(rep[8..12].try_into().expect("4 bytes"));
        rep = &rep[12..];
        let mut batch = rocksdb_writebatch_t::default();
        while let Some((&tag, rest)) = rep.split_first() {
            rep = rest;
            let (kind, with_cf) =
                OpKind::of_tag(tag).ok_or_else(|| malformed("unknown WriteBatch tag"))?;
            let cf = if with_cf && kind != OpKind::LogData {
                get_varint(&mut rep).ok_or_else(|| malformed("bad WriteBatch column family"))?
            } else {
                0
            };
            let key = get_slice(&mut rep).ok_or_else(|| malformed("bad WriteBatch key"))?;
            let value = match kind {
                OpKind::Delete | OpKind::SingleDelete | OpKind::LogData => Vec::new(),
                _ => get_slice(&mut rep).ok_or_else(|| malformed("bad WriteBatch value"))?,
            };
            batch.ops.push(Op {
                kind,
                cf,
                key,
                value,
            });
        }
        if batch.count() != count as usize {
            return Err(malformed("WriteBatch has wrong count"));
        }
        Ok(batch)
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn get_varint(input: &mut &[u8]) -> Option<u32> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        let (&byte, rest) = input.split_first()?;
        *input = rest;
        value |= u32::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn put_slice(out: &mut Vec<u8>, data: &[u8]) {
    put_varint(out, data.len() as u32);
    out.extend_from_slice(data);
}

fn get_slice(input: &mut &[u8]) -> Option<Vec<u8>> {
    let len = get_varint(input)? as usize;
    if input.len() < len {
        return None;
    }
    let (data, rest) = input.split_at(len);
    *input = rest;
    Some(data.to_vec())
}

/// Applies `batch` to `database` as one ShaleDB batch.
pub(crate) fn apply(database: &Database, batch: &rocksdb_writebatch_t) -> Result<()> {
    if let Some(error) = &batch.error {
        return Err(error.clone());
    }
    let mut engine_batch = database.engine.batch();
    let column_families = database.column_families();
    for op in &batch.ops {
        if op.kind == OpKind::LogData {
            continue;
        }
        let cf = crate::db::numbered(&column_families, op.cf)?;
        match op.kind {
            OpKind::Put => engine_batch.put(&cf.kvs, &op.key, &op.value),
            OpKind::Delete | OpKind::SingleDelete => engine_batch.delete(&cf.kvs, &op.key),
            OpKind::DeleteRange => match prefix_of_range(&op.key, &op.value) {
                Some(prefix) => engine_batch.prefix_delete(&cf.kvs, prefix),
                None => {
                    return Err(Status::not_supported(
                        "DeleteRange over a range that is not all the keys of one prefix \
                         (ShaleDB deletes ranges atomically only by prefix)",
                    ))
                }
            },
            OpKind::Merge => return Err(Feature::MergeOperator.refused()),
            OpKind::LogData => {}
        }
    }
    drop(column_families);
    database.engine.write(engine_batch)?;
    Ok(())
}

/// The prefix `p` when `[begin, end)` is exactly the keys starting with `p`: `begin` is `p` and
/// `end` is `p`'s successor (its trailing 0xFF bytes dropped, then its last byte plus one).
fn prefix_of_range<'a>(begin: &'a [u8], end: &[u8]) -> Option<&'a [u8]> {
    let last = begin.iter().rposition(|&byte| byte != 0xFF)?;
    let mut successor = begin[..=last].to_vec();
    successor[last] += 1;
    (successor == end).then_some(begin)
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_create() -> *mut rocksdb_writebatch_t {
    into_handle(rocksdb_writebatch_t::default())
}

/// A batch from RocksDB's serialized form; NULL if it is malformed (c.h has no error to report).
#[no_mangle]
pub extern "C" fn rocksdb_writebatch_create_from(
    rep: *const c_char,
    size: usize,
) -> *mut rocksdb_writebatch_t {
    quiet(std::ptr::null_mut(), || {
        bytes(rep, size)
            .and_then(rocksdb_writebatch_t::parse)
            .map_or(std::ptr::null_mut(), into_handle)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_destroy(batch: *mut rocksdb_writebatch_t) {
    quiet((), || drop_handle(batch))
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_clear(batch: *mut rocksdb_writebatch_t) {
    quiet((), || {
        if let Ok(batch) = handle_mut(batch, "batch") {
            batch.ops.clear();
            batch.save_points.clear();
            batch.error = None;
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_count(batch: *mut rocksdb_writebatch_t) -> libc::c_int {
    quiet(0, || {
        handle(batch, "batch").map_or(0, |batch| batch.count() as libc::c_int)
    })
}

/// Adds one operation to `batch` (a NULL column family handle: the default one); one that
/// cannot be added (a NULL slice with a length, a NULL handle) is kept as the batch's error.
pub(crate) fn add(
    batch: *mut rocksdb_writebatch_t,
    cf: *mut rocksdb_column_family_handle_t,
    kind: OpKind,
    key: (*const c_char, usize),
    value: (*const c_char, usize),
) {
    quiet((), || {
        let Ok(batch) = handle_mut(batch, "batch") else {
            return;
        };
        let op = (|| -> Result<(u32, &[u8], &[u8])> {
            let cf = if cf.is_null() {
                0
            } else {
                handle(cf, "column family")?.cf.id
            };
            Ok((cf, bytes(key.0, key.1)?, bytes(value.0, value.1)?))
        })();
        match op {
            Ok((cf, key, value)) => batch.push(kind, cf, key, value),
            Err(status) => {
                batch.error.get_or_insert(status);
            }
        }
    })
}

const NO_VALUE: (*const c_char, usize) = (std::ptr::null(), 0);

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_put(
    batch: *mut rocksdb_writebatch_t,
    key: *const c_char,
    klen: usize,
    val: *const c_char,
    vlen: usize,
) {
    add(
        batch,
        std::ptr::null_mut(),
        OpKind::Put,
        (key, klen),
        (val, vlen),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_put_cf(
    batch: *mut rocksdb_writebatch_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
    val: *const c_char,
    vlen: usize,
) {
    add(batch, column_family, OpKind::Put, (key, klen), (val, vlen))
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_delete(
    batch: *mut rocksdb_writebatch_t,
    key: *const c_char,
    klen: usize,
) {
    add(
        batch,
        std::ptr::null_mut(),
        OpKind::Delete,
        (key, klen),
        NO_VALUE,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_delete_cf(
    batch: *mut rocksdb_writebatch_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
) {
    add(batch, column_family, OpKind::Delete, (key, klen), NO_VALUE)
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_singledelete(
    batch: *mut rocksdb_writebatch_t,
    key: *const c_char,
    klen: usize,
) {
    add(
        batch,
        std::ptr::null_mut(),
        OpKind::SingleDelete,
        (key, klen),
        NO_VALUE,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_singledelete_cf(
    batch: *mut rocksdb_writebatch_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
) {
    add(
        batch,
        column_family,
        OpKind::SingleDelete,
        (key, klen),
        NO_VALUE,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_delete_range(
    batch: *mut rocksdb_writebatch_t,
    start_key: *const c_char,
    start_key_len: usize,
    end_key: *const c_char,
    end_key_len: usize,
) {
    add(
        batch,
        std::ptr::null_mut(),
        OpKind::DeleteRange,
        (start_key, start_key_len),
        (end_key, end_key_len),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_delete_range_cf(
    batch: *mut rocksdb_writebatch_t,
    column_family: *mut rocksdb_column_family_handle_t,
    start_key: *const c_char,
    start_key_len: usize,
    end_key: *const c_char,
    end_key_len: usize,
) {
    add(
        batch,
        column_family,
        OpKind::DeleteRange,
        (start_key, start_key_len),
        (end_key, end_key_len),
    )
}

/// A merge operand: recorded, and refused when the batch is written (ShaleDB has no merge
/// operators).
#[no_mangle]
pub extern "C" fn rocksdb_writebatch_merge(
    batch: *mut rocksdb_writebatch_t,
    key: *const c_char,
    klen: usize,
    val: *const c_char,
    vlen: usize,
) {
    add(
        batch,
        std::ptr::null_mut(),
        OpKind::Merge,
        (key, klen),
        (val, vlen),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_merge_cf(
    batch: *mut rocksdb_writebatch_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
    val: *const c_char,
    vlen: usize,
) {
    add(
        batch,
        column_family,
        OpKind::Merge,
        (key, klen),
        (val, vlen),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_put_log_data(
    batch: *mut rocksdb_writebatch_t,
    blob: *const c_char,
    len: usize,
) {
    add(
        batch,
        std::ptr::null_mut(),
        OpKind::LogData,
        (blob, len),
        NO_VALUE,
    )
}

/// Calls `put` or `deleted` for each put and delete of the default column family, in order.
#[no_mangle]
pub extern "C" fn rocksdb_writebatch_iterate(
    batch: *mut rocksdb_writebatch_t,
    state: *mut c_void,
    put: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize)>,
    deleted: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize)>,
) {
    quiet((), || {
        let Ok(batch) = handle(batch, "batch") else {
            return;
        };
        for op in batch.ops.iter().filter(|op| op.cf == 0) {
            let key = (op.key.as_ptr().cast(), op.key.len());
            match (op.kind, put, deleted) {
                // SAFETY: the program's callbacks take its state and slices valid for the call.
                (OpKind::Put, Some(put), _) => unsafe {
                    put(
                        state,
                        key.0,
                        key.1,
                        op.value.as_ptr().cast(),
                        op.value.len(),
                    )
                },
                // SAFETY: as above.
                (OpKind::Delete | OpKind::SingleDelete, _, Some(deleted)) => unsafe {
                    deleted(state, key.0, key.1)
                },
                _ => {}
            }
        }
    })
}

/// RocksDB's serialized form of the batch, valid until the batch next changes.
#[no_mangle]
pub extern "C" fn rocksdb_writebatch_data(
    batch: *mut rocksdb_writebatch_t,
    size: *mut usize,
) -> *const c_char {
    quiet(std::ptr::null(), || {
        let Ok(batch) = handle_mut(batch, "batch") else {
            return std::ptr::null();
        };
        batch.serialized = batch.serialize();
        set_out(size, batch.serialized.len());
        batch.serialized.as_ptr().cast()
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_set_save_point(batch: *mut rocksdb_writebatch_t) {
    quiet((), || {
        if let Ok(batch) = handle_mut(batch, "batch") {
            batch.save_points.push(batch.ops.len());
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_rollback_to_save_point(
    batch: *mut rocksdb_writebatch_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let batch = handle_mut(batch, "batch")?;
        let point = batch
            .save_points
            .pop()
            .ok_or_else(|| Status::new(crate::status::Code::NotFound, ""))?;
        batch.ops.truncate(point);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_pop_save_point(
    batch: *mut rocksdb_writebatch_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let batch = handle_mut(batch, "batch")?;
        batch
            .save_points
            .pop()
            .map(|_| ())
            .ok_or_else(|| Status::new(crate::status::Code::NotFound, ""))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_write(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    batch: *mut rocksdb_writebatch_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let db = handle(db, "db")?;
        let options = handle(options, "write options")?;
        apply(&db.database, handle(batch, "batch")?)?;
        sync_if_asked(db, options)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serialized_form_round_trips() {
        let mut batch = rocksdb_writebatch_t::default();
        batch.push(OpKind::Put, 0, b"k1", b"v1");
        batch.push(OpKind::Delete, 3, b"k2", b"");
        batch.push(OpKind::DeleteRange, 0, b"a", b"b");
        batch.push(OpKind::LogData, 0, b"blob", b"");
        batch.push(OpKind::Put, 300, b"k3", &[7; 200]);
        let rep = batch.serialize();
        assert_eq!(u32::from_le_bytes(rep[8..12].try_into().unwrap()), 4);
        // RocksDB's own bytes for the first record: kTypeValue, len 2, "k1", len 2, "v1".
        assert_eq!(&rep[12..19], &[0x01, 2, b'k', b'1', 2, b'v', b'1']);
        let parsed = rocksdb_writebatch_t::parse(&rep).unwrap();
        assert_eq!(parsed.ops, batch.ops);
    }

    #[test]
    fn a_malformed_serialized_form_is_refused() {
        let mut batch = rocksdb_writebatch_t::default();
        batch.push(OpKind::Put, 0, b"key", b"value");
        let rep = batch.serialize();
        for cut in 0..rep.len() {
            assert!(
                rocksdb_writebatch_t::parse(&rep[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut bad_tag = rep.clone();
        bad_tag[12] = 0x7e;
        assert!(rocksdb_writebatch_t::parse(&bad_tag).is_err());
    }

    #[test]
    fn only_whole_prefix_ranges_are_prefix_deletes() {
        assert_eq!(prefix_of_range(b"ab", b"ac"), Some(&b"ab"[..]));
        assert_eq!(prefix_of_range(b"a\xff", b"b"), Some(&b"a\xff"[..]));
        assert_eq!(prefix_of_range(b"ab", b"ad"), None);
        assert_eq!(prefix_of_range(b"ab", b"ab\x00"), None);
        assert_eq!(prefix_of_range(b"\xff", b""), None);
    }
}
