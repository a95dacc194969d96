//! Point reads beyond `rocksdb_get`: pinned reads (`rocksdb_pinnableslice_t`, the value handed
//! out without a copy), multi-gets (one consistent view across every key and column family, as
//! RocksDB's MultiGet) and `rocksdb_key_may_exist`.

use crate::args::{array, bytes, drop_handle, handle, into_handle, malloc_bytes, set_out};
use crate::db::{read, rocksdb_column_family_handle_t, rocksdb_t, with_cf, ColumnFamily};
use crate::iterator::{create, rocksdb_iterator_t};
use crate::read_write_options::rocksdb_readoptions_t;
use crate::status::{call, caught, quiet, report, Result, Status};
use engine::{Bytes, Snapshot};
use libc::c_char;
use std::sync::Arc;

/// `rocksdb_pinnableslice_t`: a value held by the library until destroyed; C reads it in place.
pub struct rocksdb_pinnableslice_t {
    value: Bytes,
}

pub(crate) fn pinned(value: Option<Bytes>) -> *mut rocksdb_pinnableslice_t {
    value.map_or(std::ptr::null_mut(), |value| {
        into_handle(rocksdb_pinnableslice_t { value })
    })
}

fn get_pinned(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    cf: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
) -> Result<*mut rocksdb_pinnableslice_t> {
    let options = handle(options, "read options")?;
    with_cf(db, cf, |_, cf| {
        Ok(pinned(read(options, cf, bytes(key, keylen)?)?))
    })
}

/// The value of `key`, or NULL when it has none.
#[no_mangle]
pub extern "C" fn rocksdb_get_pinned(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_pinnableslice_t {
    call(errptr, std::ptr::null_mut(), || {
        get_pinned(db, options, std::ptr::null_mut(), key, keylen)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_get_pinned_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_pinnableslice_t {
    call(errptr, std::ptr::null_mut(), || {
        get_pinned(db, options, column_family, key, keylen)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_pinnableslice_destroy(slice: *mut rocksdb_pinnableslice_t) {
    quiet((), || drop_handle(slice))
}

/// The pinned value, valid until the slice is destroyed; its length goes to `*vlen`.
#[no_mangle]
pub extern "C" fn rocksdb_pinnableslice_value(
    slice: *const rocksdb_pinnableslice_t,
    vlen: *mut usize,
) -> *const c_char {
    quiet(std::ptr::null(), || match handle(slice, "pinnable slice") {
        Ok(slice) => {
            set_out(vlen, slice.value.len());
            slice.value.as_ptr().cast()
        }
        Err(_) => {
            set_out(vlen, 0);
            std::ptr::null()
        }
    })
}

/// The snapshot a multi-get reads every key at: the read options', or one taken now.
fn multi_get_view(db: &rocksdb_t, options: &rocksdb_readoptions_t) -> Result<Arc<Snapshot>> {
    match &options.snapshot {
        Some(snapshot) => Ok(snapshot.clone()),
        None => Ok(Arc::new(db.engine().snapshot()?)),
    }
}

/// Reads `count` keys, the i-th in the column family `column_family(i)`, at one view: each
/// key's value or error; a failure of the whole call (a NULL handle, a panic) is every key's.
fn multi_get<'a>(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    count: usize,
    keys: *const *const c_char,
    key_sizes: *const usize,
    column_family: impl Fn(&'a rocksdb_t, usize) -> Result<&'a ColumnFamily>,
) -> Vec<Result<Option<Bytes>>> {
    let outcomes = caught(|| {
        let db: &'a rocksdb_t = handle(db, "db")?;
        let options = handle(options, "read options")?;
        let keys = array(keys, count)?;
        let key_sizes = array(key_sizes, count)?;
        let view = multi_get_view(db, options)?;
        Ok(keys
            .iter()
            .zip(key_sizes)
            .enumerate()
            .map(|(index, (key, size))| {
                column_family(db, index).and_then(|cf| Ok(view.get(&cf.kvs, bytes(*key, *size)?)?))
            })
            .collect())
    });
    outcomes.unwrap_or_else(|status| vec![Err(status); count])
}

/// Hands multi-get outcomes to C: `values[i]`/`values_sizes[i]` (malloc()ed, NULL when
/// absent) and `errs[i]` (NULL, or the error of key i).
pub(crate) fn deliver(
    outcomes: Vec<Result<Option<Bytes>>>,
    values: *mut *mut c_char,
    values_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    if values.is_null() || values_sizes.is_null() || errs.is_null() {
        return;
    }
    quiet((), || {
        for (index, outcome) in outcomes.into_iter().enumerate() {
            // SAFETY: c.h passes `values`, `values_sizes` and `errs` as arrays of `num_keys`,
            // the number of outcomes.
            let (value, size, err) =
                unsafe { (values.add(index), values_sizes.add(index), errs.add(index)) };
            set_out(value, std::ptr::null_mut());
            set_out(size, 0);
            set_out(err, std::ptr::null_mut());
            match outcome {
                Ok(Some(found)) => set_out(value, malloc_bytes(&found, size)),
                Ok(None) => {}
                Err(status) => report(err, &status),
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_multi_get(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    num_keys: usize,
    keys_list: *const *const c_char,
    keys_list_sizes: *const usize,
    values_list: *mut *mut c_char,
    values_list_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    let outcomes = multi_get(
        db,
        options,
        num_keys,
        keys_list,
        keys_list_sizes,
        |db, _| db.column_family(std::ptr::null()),
    );
    deliver(outcomes, values_list, values_list_sizes, errs)
}

#[no_mangle]
pub extern "C" fn rocksdb_multi_get_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    column_families: *const *const rocksdb_column_family_handle_t,
    num_keys: usize,
    keys_list: *const *const c_char,
    keys_list_sizes: *const usize,
    values_list: *mut *mut c_char,
    values_list_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    let outcomes = multi_get(
        db,
        options,
        num_keys,
        keys_list,
        keys_list_sizes,
        |db, index| {
            let handles = array(column_families, num_keys)?;
            if handles[index].is_null() {
                return Err(Status::invalid("column family handle is NULL"));
            }
            db.column_family(handles[index])
        },
    );
    deliver(outcomes, values_list, values_list_sizes, errs)
}

/// Multi-get within one column family, into pinnable slices (NULL when absent).
#[no_mangle]
pub extern "C" fn rocksdb_batched_multi_get_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    num_keys: usize,
    keys_list: *const *const c_char,
    keys_list_sizes: *const usize,
    values: *mut *mut rocksdb_pinnableslice_t,
    errs: *mut *mut c_char,
    _sorted_input: bool,
) {
    if values.is_null() || errs.is_null() {
        return;
    }
    let outcomes = multi_get(
        db,
        options,
        num_keys,
        keys_list,
        keys_list_sizes,
        |db, _| db.column_family(column_family),
    );
    quiet((), || {
        for (index, outcome) in outcomes.into_iter().enumerate() {
            // SAFETY: c.h passes `values` and `errs` as arrays of `num_keys`.
            let (value, err) = unsafe { (values.add(index), errs.add(index)) };
            set_out(value, std::ptr::null_mut());
            set_out(err, std::ptr::null_mut());
            match outcome {
                Ok(found) => set_out(value, pinned(found)),
                Err(status) => report(err, &status),
            }
        }
    })
}

/// Whether `key` may exist. ShaleDB's index is in DRAM, so the answer is exact and costs no
/// device read; the value is handed out too (`*value_found` = 1) when `value` is not NULL.
#[allow(clippy::too_many_arguments)]
fn key_may_exist(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    cf: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    key_len: usize,
    value: *mut *mut c_char,
    val_len: *mut usize,
    value_found: *mut libc::c_uchar,
) -> libc::c_uchar {
    set_out(value_found, 0);
    let found = caught(|| -> Result<bool> {
        let db = handle(db, "db")?;
        let options = handle(options, "read options")?;
        let cf = db.column_family(cf)?;
        let key = bytes(key, key_len)?;
        if value.is_null() {
            return Ok(match &options.snapshot {
                Some(_) => read(options, cf, key)?.is_some(),
                None => cf.kvs.contains_key(key)?,
            });
        }
        Ok(match read(options, cf, key)? {
            Some(found) => {
                set_out(value, malloc_bytes(&found, val_len));
                set_out(value_found, 1);
                true
            }
            None => false,
        })
    });
    // An error cannot be reported here: "may exist" is the answer that never misleads.
    u8::from(found.unwrap_or(true))
}

#[no_mangle]
pub extern "C" fn rocksdb_key_may_exist(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    key_len: usize,
    value: *mut *mut c_char,
    val_len: *mut usize,
    _timestamp: *const c_char,
    _timestamp_len: usize,
    value_found: *mut libc::c_uchar,
) -> libc::c_uchar {
    key_may_exist(
        db,
        options,
        std::ptr::null_mut(),
        key,
        key_len,
        value,
        val_len,
        value_found,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_key_may_exist_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    key_len: usize,
    value: *mut *mut c_char,
    val_len: *mut usize,
    _timestamp: *const c_char,
    _timestamp_len: usize,
    value_found: *mut libc::c_uchar,
) -> libc::c_uchar {
    key_may_exist(
        db,
        options,
        column_family,
        key,
        key_len,
        value,
        val_len,
        value_found,
    )
}

/// Iterators over `size` column families at one view (the read options' snapshot, or one
/// taken now), in `iterators`.
#[no_mangle]
pub extern "C" fn rocksdb_create_iterators(
    db: *mut rocksdb_t,
    opts: *mut rocksdb_readoptions_t,
    column_families: *mut *mut rocksdb_column_family_handle_t,
    iterators: *mut *mut rocksdb_iterator_t,
    size: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let db_ref = handle(db, "db")?;
        let mut options = handle(opts, "read options")?.clone();
        options.snapshot = Some(multi_get_view(db_ref, &options)?);
        let handles = array(column_families.cast_const(), size)?;
        if size > 0 && iterators.is_null() {
            return Err(Status::invalid("iterators array is NULL"));
        }
        let mut made = Vec::with_capacity(size);
        for cf in handles {
            if cf.is_null() {
                made.into_iter().for_each(drop_handle);
                return Err(Status::invalid("column family handle is NULL"));
            }
            match create(db, &options, *cf) {
                Ok(iterator) => made.push(iterator),
                Err(status) => {
                    made.into_iter().for_each(drop_handle);
                    return Err(status);
                }
            }
        }
        for (index, iterator) in made.into_iter().enumerate() {
            // SAFETY: c.h passes `iterators` as an array of `size` slots to fill.
            unsafe { *iterators.add(index) = iterator };
        }
        Ok(())
    })
}
