//! `rocksdb_writebatch_wi_t`: RocksDB's WriteBatchWithIndex, a write batch whose writes can be
//! read back before it is written: from the batch alone, from the batch over the database, or
//! through an iterator merging the batch over a database iterator. It is the write set a
//! pessimistic transaction keeps (`write_set.rs`), outside a transaction. As in RocksDB, range
//! deletions are not supported in it; merges are not built (both become the batch's error, and
//! writing it fails); log blobs are not kept (no WAL replays them here).

use crate::args::{bytes, handle, handle_mut, into_handle, malloc_bytes, set_out};
use crate::batch::{rocksdb_writebatch_t, OpKind};
use crate::batch_slices::slice_part_writes;
use crate::db::{read, rocksdb_column_family_handle_t, rocksdb_t, sync_if_asked};
use crate::iterator::rocksdb_iterator_t;
use crate::options::rocksdb_options_t;
use crate::plugins::Feature;
use crate::read_write_options::{rocksdb_readoptions_t, rocksdb_writeoptions_t};
use crate::reads::{pinned, rocksdb_pinnableslice_t};
use crate::status::{call, quiet, Result, Status};
use crate::transaction_options::WRITE_SET_BYTES_DEFAULT;
use crate::write_set::WriteSet;
use engine::Bytes;
use libc::{c_char, c_void};

/// `rocksdb_writebatch_wi_t`.
pub struct rocksdb_writebatch_wi_t {
    writes: WriteSet,
    /// Why an operation could not be added (c.h's adders report nothing): writing the batch
    /// fails with it.
    error: Option<Status>,
    /// The serialized form last handed out by `rocksdb_writebatch_wi_data`.
    serialized: Vec<u8>,
}

impl rocksdb_writebatch_wi_t {
    fn new(max_bytes: usize) -> Self {
        let max_bytes = if max_bytes == 0 {
            WRITE_SET_BYTES_DEFAULT
        } else {
            max_bytes
        };
        rocksdb_writebatch_wi_t {
            writes: WriteSet::new(max_bytes),
            error: None,
            serialized: Vec::new(),
        }
    }

    /// A batch holding the operations of `batch` (a transaction's writes, or a serialized
    /// batch).
    pub(crate) fn from_batch(batch: &rocksdb_writebatch_t) -> Self {
        let mut wbwi = Self::new(0);
        if let Some(error) = &batch.error {
            wbwi.error = Some(error.clone());
        }
        for op in &batch.ops {
            wbwi.add(op.kind, op.cf, &op.key, &op.value);
        }
        wbwi
    }

    /// The batch as a plain write batch (for writing, or for a transaction to rebuild from).
    pub(crate) fn to_batch(&self) -> rocksdb_writebatch_t {
        let mut batch = self.writes.to_batch();
        batch.error = self.error.clone();
        batch
    }

    fn add(&mut self, kind: OpKind, cf: u32, key: &[u8], value: &[u8]) {
        let added = match kind {
            OpKind::Put => self.writes.write(cf, key, Some(value)),
            OpKind::Delete | OpKind::SingleDelete => self.writes.write(cf, key, None),
            OpKind::Merge => Err(Feature::MergeOperator.refused()),
            OpKind::DeleteRange => Err(Status::not_supported(
                "DeleteRange in a write batch with index (as in RocksDB)",
            )),
            OpKind::LogData => Ok(()),
        };
        if let Err(status) = added {
            self.error.get_or_insert(status);
        }
    }

    /// The batch's own write of `key` in column family `cf` (see `WriteSet::get`).
    fn get(&self, cf: u32, key: &[u8]) -> Option<Option<Bytes>> {
        self.writes.get(cf, key)
    }
}

/// The number of the column family a handle names (0, the default, for NULL).
fn column_family_id(cf: *const rocksdb_column_family_handle_t) -> Result<u32> {
    if cf.is_null() {
        return Ok(0);
    }
    Ok(handle(cf, "column family")?.cf.id)
}

/// Adds one operation; what cannot be read becomes the batch's error.
fn add(
    wbwi: *mut rocksdb_writebatch_wi_t,
    cf: *const rocksdb_column_family_handle_t,
    kind: OpKind,
    key: (*const c_char, usize),
    value: (*const c_char, usize),
) {
    quiet((), || {
        let Ok(wbwi) = handle_mut(wbwi, "write batch with index") else {
            return;
        };
        let parts = (|| {
            Ok((
                column_family_id(cf)?,
                bytes(key.0, key.1)?,
                bytes(value.0, value.1)?,
            ))
        })();
        match parts {
            Ok((cf, key, value)) => wbwi.add(kind, cf, key, value),
            Err(status) => {
                wbwi.error.get_or_insert(status);
            }
        }
    })
}

const NO_VALUE: (*const c_char, usize) = (std::ptr::null(), 0);

/// The `v` variants: the parts of a key or value joined, then added as one operation.
fn add_parts(
    wbwi: *mut rocksdb_writebatch_wi_t,
    cf: *const rocksdb_column_family_handle_t,
    kind: OpKind,
    key: Result<Vec<u8>>,
    value: Result<Vec<u8>>,
) {
    match key.and_then(|key| Ok((key, value?))) {
        Ok((key, value)) => add(
            wbwi,
            cf,
            kind,
            (key.as_ptr().cast(), key.len()),
            (value.as_ptr().cast(), value.len()),
        ),
        Err(status) => quiet((), || {
            if let Ok(wbwi) = handle_mut(wbwi, "write batch with index") {
                wbwi.error.get_or_insert(status);
            }
        }),
    }
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_create(
    _reserved_bytes: usize,
    _overwrite_keys: libc::c_uchar,
) -> *mut rocksdb_writebatch_wi_t {
    into_handle(rocksdb_writebatch_wi_t::new(0))
}

/// A batch from RocksDB's serialized form; NULL if it is malformed.
#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_create_from(
    rep: *const c_char,
    size: usize,
) -> *mut rocksdb_writebatch_wi_t {
    quiet(std::ptr::null_mut(), || {
        bytes(rep, size)
            .and_then(rocksdb_writebatch_t::parse)
            .map_or(std::ptr::null_mut(), |batch| {
                into_handle(rocksdb_writebatch_wi_t::from_batch(&batch))
            })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_create_with_params(
    _backup_index_comparator: *mut crate::plugins::rocksdb_comparator_t,
    _reserved_bytes: usize,
    _overwrite_key: libc::c_uchar,
    max_bytes: usize,
    _protection_bytes_per_key: usize,
) -> *mut rocksdb_writebatch_wi_t {
    into_handle(rocksdb_writebatch_wi_t::new(max_bytes))
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_destroy(wbwi: *mut rocksdb_writebatch_wi_t) {
    quiet((), || crate::args::drop_handle(wbwi))
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_clear(wbwi: *mut rocksdb_writebatch_wi_t) {
    quiet((), || {
        if let Ok(wbwi) = handle_mut(wbwi, "write batch with index") {
            wbwi.writes.clear();
            wbwi.error = None;
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_count(wbwi: *mut rocksdb_writebatch_wi_t) -> libc::c_int {
    quiet(0, || {
        handle(wbwi, "write batch with index")
            .map_or(0, |wbwi| wbwi.writes.ops().len() as libc::c_int)
    })
}

macro_rules! with_value {
    ($($name:ident, $name_cf:ident => $kind:expr;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(wbwi: *mut rocksdb_writebatch_wi_t, key: *const c_char, klen: usize, val: *const c_char, vlen: usize) {
            add(wbwi, std::ptr::null(), $kind, (key, klen), (val, vlen))
        }

        #[no_mangle]
        pub extern "C" fn $name_cf(
            wbwi: *mut rocksdb_writebatch_wi_t,
            column_family: *mut rocksdb_column_family_handle_t,
            key: *const c_char,
            klen: usize,
            val: *const c_char,
            vlen: usize,
        ) {
            add(wbwi, column_family, $kind, (key, klen), (val, vlen))
        }
    )*};
}

with_value! {
    rocksdb_writebatch_wi_put, rocksdb_writebatch_wi_put_cf => OpKind::Put;
    rocksdb_writebatch_wi_merge, rocksdb_writebatch_wi_merge_cf => OpKind::Merge;
    rocksdb_writebatch_wi_delete_range, rocksdb_writebatch_wi_delete_range_cf => OpKind::DeleteRange;
}

macro_rules! key_only {
    ($($name:ident, $name_cf:ident => $kind:expr;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(wbwi: *mut rocksdb_writebatch_wi_t, key: *const c_char, klen: usize) {
            add(wbwi, std::ptr::null(), $kind, (key, klen), NO_VALUE)
        }

        #[no_mangle]
        pub extern "C" fn $name_cf(
            wbwi: *mut rocksdb_writebatch_wi_t,
            column_family: *mut rocksdb_column_family_handle_t,
            key: *const c_char,
            klen: usize,
        ) {
            add(wbwi, column_family, $kind, (key, klen), NO_VALUE)
        }
    )*};
}

key_only! {
    rocksdb_writebatch_wi_delete, rocksdb_writebatch_wi_delete_cf => OpKind::Delete;
    rocksdb_writebatch_wi_singledelete, rocksdb_writebatch_wi_singledelete_cf => OpKind::SingleDelete;
}

slice_part_writes!(
    rocksdb_writebatch_wi_t,
    add_parts {
        rocksdb_writebatch_wi_putv,
        rocksdb_writebatch_wi_putv_cf,
        rocksdb_writebatch_wi_mergev,
        rocksdb_writebatch_wi_mergev_cf,
        rocksdb_writebatch_wi_deletev,
        rocksdb_writebatch_wi_deletev_cf,
        rocksdb_writebatch_wi_delete_rangev,
        rocksdb_writebatch_wi_delete_rangev_cf,
    }
);

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_put_log_data(
    wbwi: *mut rocksdb_writebatch_wi_t,
    blob: *const c_char,
    len: usize,
) {
    add(
        wbwi,
        std::ptr::null(),
        OpKind::LogData,
        (blob, len),
        NO_VALUE,
    )
}

/// Calls `put` or `deleted` for each put and delete of the default column family, in order.
#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_iterate(
    wbwi: *mut rocksdb_writebatch_wi_t,
    state: *mut c_void,
    put: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize)>,
    deleted: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize)>,
) {
    quiet((), || {
        if let Ok(wbwi) = handle(wbwi, "write batch with index") {
            let mut batch = wbwi.to_batch();
            crate::batch::rocksdb_writebatch_iterate(&mut batch, state, put, deleted);
        }
    })
}

/// RocksDB's serialized form of the batch, valid until the batch next changes.
#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_data(
    wbwi: *mut rocksdb_writebatch_wi_t,
    size: *mut usize,
) -> *const c_char {
    quiet(std::ptr::null(), || {
        let Ok(wbwi) = handle_mut(wbwi, "write batch with index") else {
            return std::ptr::null();
        };
        wbwi.serialized = wbwi.writes.to_batch().serialize();
        set_out(size, wbwi.serialized.len());
        wbwi.serialized.as_ptr().cast()
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_set_save_point(wbwi: *mut rocksdb_writebatch_wi_t) {
    quiet((), || {
        if let Ok(wbwi) = handle_mut(wbwi, "write batch with index") {
            wbwi.writes.set_save_point();
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_rollback_to_save_point(
    wbwi: *mut rocksdb_writebatch_wi_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle_mut(wbwi, "write batch with index")?
            .writes
            .rollback_to_save_point()
    })
}

/// The batch's value of `key`: NULL when it deletes the key; "NotFound" when it does not hold
/// the key (RocksDB's answer from the batch alone).
fn from_batch(
    wbwi: *mut rocksdb_writebatch_wi_t,
    cf: *const rocksdb_column_family_handle_t,
    key: (*const c_char, usize),
    vallen: *mut usize,
) -> Result<*mut c_char> {
    set_out(vallen, 0);
    let wbwi = handle(wbwi, "write batch with index")?;
    match wbwi.get(column_family_id(cf)?, bytes(key.0, key.1)?) {
        Some(Some(value)) => Ok(malloc_bytes(&value, vallen)),
        Some(None) => Ok(std::ptr::null_mut()),
        None => Err(Status::new(crate::status::Code::NotFound, "")),
    }
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_get_from_batch(
    wbwi: *mut rocksdb_writebatch_wi_t,
    _options: *const rocksdb_options_t,
    key: *const c_char,
    keylen: usize,
    vallen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    call(errptr, std::ptr::null_mut(), || {
        not_found_is_null(from_batch(wbwi, std::ptr::null(), (key, keylen), vallen))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_get_from_batch_cf(
    wbwi: *mut rocksdb_writebatch_wi_t,
    _options: *const rocksdb_options_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    vallen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    call(errptr, std::ptr::null_mut(), || {
        not_found_is_null(from_batch(wbwi, column_family, (key, keylen), vallen))
    })
}

/// c.h's get-from-batch reports a key the batch does not hold as NULL without an error, as
/// its other gets report an absent key.
fn not_found_is_null(value: Result<*mut c_char>) -> Result<*mut c_char> {
    match value {
        Err(status) if status.code == crate::status::Code::NotFound => Ok(std::ptr::null_mut()),
        other => other,
    }
}

/// The value of `key` as the batch would leave it over the database (read as `options` ask).
fn from_batch_and_db(
    wbwi: *mut rocksdb_writebatch_wi_t,
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    cf: *const rocksdb_column_family_handle_t,
    key: (*const c_char, usize),
) -> Result<Option<Bytes>> {
    let wbwi = handle(wbwi, "write batch with index")?;
    let db = handle(db, "db")?;
    let options = handle(options, "read options")?;
    let cf = db.column_family(cf)?;
    let key = bytes(key.0, key.1)?;
    match wbwi.get(cf.id, key) {
        Some(value) => Ok(value),
        None => read(options, cf, key),
    }
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_get_from_batch_and_db(
    wbwi: *mut rocksdb_writebatch_wi_t,
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    keylen: usize,
    vallen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    rocksdb_writebatch_wi_get_from_batch_and_db_cf(
        wbwi,
        db,
        options,
        std::ptr::null_mut(),
        key,
        keylen,
        vallen,
        errptr,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_get_from_batch_and_db_cf(
    wbwi: *mut rocksdb_writebatch_wi_t,
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    vallen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    set_out(vallen, 0);
    call(errptr, std::ptr::null_mut(), || {
        Ok(
            from_batch_and_db(wbwi, db, options, column_family, (key, keylen))?
                .map_or(std::ptr::null_mut(), |value| malloc_bytes(&value, vallen)),
        )
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_get_pinned_from_batch_and_db(
    wbwi: *mut rocksdb_writebatch_wi_t,
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_pinnableslice_t {
    rocksdb_writebatch_wi_get_pinned_from_batch_and_db_cf(
        wbwi,
        db,
        options,
        std::ptr::null_mut(),
        key,
        keylen,
        errptr,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_get_pinned_from_batch_and_db_cf(
    wbwi: *mut rocksdb_writebatch_wi_t,
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_pinnableslice_t {
    call(errptr, std::ptr::null_mut(), || {
        Ok(pinned(from_batch_and_db(
            wbwi,
            db,
            options,
            column_family,
            (key, keylen),
        )?))
    })
}

/// Writes the batch as one ShaleDB batch (failing with its error, if an operation could not
/// be added).
#[no_mangle]
pub extern "C" fn rocksdb_write_writebatch_wi(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    wbwi: *mut rocksdb_writebatch_wi_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let db = handle(db, "db")?;
        let options = handle(options, "write options")?;
        crate::batch::apply(
            &db.database,
            &handle(wbwi, "write batch with index")?.to_batch(),
        )?;
        sync_if_asked(db, options)
    })
}

/// `base_iterator` (taken over: destroying the result destroys it) with the batch's writes to
/// `cf` (the base's own column family when NULL) merged over it, as of now.
fn with_base(
    wbwi: *mut rocksdb_writebatch_wi_t,
    base_iterator: *mut rocksdb_iterator_t,
    cf: *const rocksdb_column_family_handle_t,
) -> *mut rocksdb_iterator_t {
    quiet(std::ptr::null_mut(), || {
        let (Ok(wbwi), Ok(base)) = (
            handle(wbwi, "write batch with index"),
            handle_mut(base_iterator, "iterator"),
        ) else {
            return std::ptr::null_mut();
        };
        let cf = if cf.is_null() {
            Ok(base.column_family_id())
        } else {
            column_family_id(cf)
        };
        match cf {
            Ok(cf) => {
                base.set_overlay(wbwi.writes.overlay(cf));
                base_iterator
            }
            Err(_) => std::ptr::null_mut(),
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_create_iterator_with_base(
    wbwi: *mut rocksdb_writebatch_wi_t,
    base_iterator: *mut rocksdb_iterator_t,
) -> *mut rocksdb_iterator_t {
    with_base(wbwi, base_iterator, std::ptr::null())
}

/// The read options of the base iterator (its snapshot and bounds) already apply.
#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_create_iterator_with_base_readopts(
    wbwi: *mut rocksdb_writebatch_wi_t,
    base_iterator: *mut rocksdb_iterator_t,
    _options: *const rocksdb_readoptions_t,
) -> *mut rocksdb_iterator_t {
    with_base(wbwi, base_iterator, std::ptr::null())
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_create_iterator_with_base_cf(
    wbwi: *mut rocksdb_writebatch_wi_t,
    base_iterator: *mut rocksdb_iterator_t,
    cf: *mut rocksdb_column_family_handle_t,
) -> *mut rocksdb_iterator_t {
    with_base(wbwi, base_iterator, cf)
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_create_iterator_with_base_cf_readopts(
    wbwi: *mut rocksdb_writebatch_wi_t,
    base_iterator: *mut rocksdb_iterator_t,
    cf: *mut rocksdb_column_family_handle_t,
    _options: *const rocksdb_readoptions_t,
) -> *mut rocksdb_iterator_t {
    with_base(wbwi, base_iterator, cf)
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_wi_update_timestamps(
    _wbwi: *mut rocksdb_writebatch_wi_t,
    _ts: *const c_char,
    _tslen: usize,
    _state: *mut c_void,
    _get_ts_size: Option<unsafe extern "C" fn(*mut c_void, u32) -> usize>,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        Err(Status::not_supported(crate::timestamps::FEATURE))
    })
}
