//! Writes RocksDB makes outside batches that ShaleDB expresses as a one-operation batch, so
//! they mean exactly what the same operation in a batch means: `rocksdb_delete_range_cf`
//! (atomic when the range is one prefix's keys, else "Not implemented") and `rocksdb_merge`
//! (merge operators are not built). `rocksdb_delete_file_in_range` deletes whole SST files,
//! which ShaleDB has not: it fails by name.

use crate::batch::{add, apply, rocksdb_writebatch_t, OpKind};
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t, sync_if_asked};
use crate::read_write_options::rocksdb_writeoptions_t;
use crate::status::{call, Result, Status};
use libc::c_char;

fn write_one(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    cf: *mut rocksdb_column_family_handle_t,
    kind: OpKind,
    key: (*const c_char, usize),
    value: (*const c_char, usize),
) -> Result<()> {
    let db = crate::args::handle(db, "db")?;
    let options = crate::args::handle(options, "write options")?;
    let mut batch = rocksdb_writebatch_t::default();
    add(&mut batch, cf, kind, key, value);
    apply(&db.database, &batch)?;
    sync_if_asked(db, options)
}

#[no_mangle]
pub extern "C" fn rocksdb_delete_range_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    start_key: *const c_char,
    start_key_len: usize,
    end_key: *const c_char,
    end_key_len: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        write_one(
            db,
            options,
            column_family,
            OpKind::DeleteRange,
            (start_key, start_key_len),
            (end_key, end_key_len),
        )
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_merge(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    key: *const c_char,
    keylen: usize,
    val: *const c_char,
    vallen: usize,
    errptr: *mut *mut c_char,
) {
    rocksdb_merge_cf(
        db,
        options,
        std::ptr::null_mut(),
        key,
        keylen,
        val,
        vallen,
        errptr,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_merge_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    val: *const c_char,
    vallen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        write_one(
            db,
            options,
            column_family,
            OpKind::Merge,
            (key, keylen),
            (val, vallen),
        )
    })
}

const DELETE_FILES: &str =
    "deleting files in a range (ShaleDB has no SST files; delete the keys with delete_range)";

#[no_mangle]
pub extern "C" fn rocksdb_delete_file_in_range(
    _db: *mut rocksdb_t,
    _start_key: *const c_char,
    _start_key_len: usize,
    _limit_key: *const c_char,
    _limit_key_len: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || Err(Status::not_supported(DELETE_FILES)))
}

#[no_mangle]
pub extern "C" fn rocksdb_delete_file_in_range_cf(
    _db: *mut rocksdb_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _start_key: *const c_char,
    _start_key_len: usize,
    _limit_key: *const c_char,
    _limit_key_len: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || Err(Status::not_supported(DELETE_FILES)))
}
