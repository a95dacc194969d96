//! Reading the write-ahead log (`rocksdb_get_updates_since`, `rocksdb_wal_iter_*`): ShaleDB's
//! log is its data, organised in segments the cleaner rewrites, not a stream of write batches
//! to replay, so it is not offered: the call fails by name and no WAL iterator is ever made.

use crate::batch::rocksdb_writebatch_t;
use crate::db::rocksdb_t;
use crate::status::{call, Status};

/// `rocksdb_wal_iterator_t` and `rocksdb_wal_readoptions_t`: never made.
pub struct rocksdb_wal_iterator_t {
    _never: (),
}
pub struct rocksdb_wal_readoptions_t {
    _never: (),
}

#[no_mangle]
pub extern "C" fn rocksdb_get_updates_since(
    _db: *mut rocksdb_t,
    _seq_number: u64,
    _options: *const rocksdb_wal_readoptions_t,
    errptr: *mut *mut libc::c_char,
) -> *mut rocksdb_wal_iterator_t {
    call(errptr, std::ptr::null_mut(), || {
        Err(Status::not_supported(
            "reading the write-ahead log as batches (ShaleDB's log is its data)",
        ))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_wal_iter_next(_iter: *mut rocksdb_wal_iterator_t) {}

#[no_mangle]
pub extern "C" fn rocksdb_wal_iter_valid(_arg1: *const rocksdb_wal_iterator_t) -> libc::c_uchar {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_wal_iter_destroy(_iter: *const rocksdb_wal_iterator_t) {}

#[no_mangle]
pub extern "C" fn rocksdb_wal_iter_get_batch(
    _iter: *const rocksdb_wal_iterator_t,
    _seq: *mut u64,
) -> *mut rocksdb_writebatch_t {
    std::ptr::null_mut()
}

#[no_mangle]
pub extern "C" fn rocksdb_wal_iter_status(
    _iter: *const rocksdb_wal_iterator_t,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || {
        Err(Status::not_supported(
            "reading the write-ahead log as batches (ShaleDB's log is its data)",
        ))
    })
}
