//! User-defined timestamps (`*_with_ts`, `full_history_ts_low`, read options' timestamps):
//! ShaleDB versions keys by its own sequence numbers only, so each of these fails with "Not
//! implemented: user-defined timestamps"; read options carrying a timestamp make the reads
//! that use them fail the same way.

use crate::args::{handle_mut, set_out};
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t};
use crate::iterator::rocksdb_iterator_t;
use crate::read_write_options::{rocksdb_readoptions_t, rocksdb_writeoptions_t};
use crate::reads::deliver;
use crate::status::{call, quiet, Status};
use libc::c_char;

pub(crate) const FEATURE: &str = "user-defined timestamps";

fn unsupported() -> Status {
    Status::not_supported(FEATURE)
}

/// Marks read options as carrying a timestamp; reads with them fail (`read_write_options.rs`).
fn mark(options: *mut rocksdb_readoptions_t) {
    quiet((), || {
        if let Ok(options) = handle_mut(options, "read options") {
            options.settings.set(TIMESTAMP_SET, 1u8);
        }
    })
}

/// The settings key recording that read options carry a timestamp.
pub(crate) const TIMESTAMP_SET: &str = "rocksdb_readoptions_set_timestamp";

#[no_mangle]
pub extern "C" fn rocksdb_readoptions_set_timestamp(
    options: *mut rocksdb_readoptions_t,
    _ts: *const c_char,
    _tslen: usize,
) {
    mark(options)
}

#[no_mangle]
pub extern "C" fn rocksdb_readoptions_set_iter_start_ts(
    options: *mut rocksdb_readoptions_t,
    _ts: *const c_char,
    _tslen: usize,
) {
    mark(options)
}

/// No entry has a timestamp: an empty one.
#[no_mangle]
pub extern "C" fn rocksdb_iter_timestamp(
    _iterator: *const rocksdb_iterator_t,
    tslen: *mut usize,
) -> *const c_char {
    set_out(tslen, 0);
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn rocksdb_multi_get_with_ts(
    _db: *mut rocksdb_t,
    _options: *const rocksdb_readoptions_t,
    num_keys: usize,
    _keys_list: *const *const c_char,
    _keys_list_sizes: *const usize,
    values_list: *mut *mut c_char,
    values_list_sizes: *mut usize,
    _timestamp_list: *mut *mut c_char,
    _timestamp_list_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    deliver(
        vec![Err(unsupported()); num_keys],
        values_list,
        values_list_sizes,
        errs,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_multi_get_cf_with_ts(
    _db: *mut rocksdb_t,
    _options: *const rocksdb_readoptions_t,
    _column_families: *const *const rocksdb_column_family_handle_t,
    num_keys: usize,
    _keys_list: *const *const c_char,
    _keys_list_sizes: *const usize,
    values_list: *mut *mut c_char,
    values_list_sizes: *mut usize,
    _timestamps_list: *mut *mut c_char,
    _timestamps_list_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    deliver(
        vec![Err(unsupported()); num_keys],
        values_list,
        values_list_sizes,
        errs,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_put_with_ts(
    _db: *mut rocksdb_t,
    _options: *const rocksdb_writeoptions_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _ts: *const libc::c_char,
    _tslen: usize,
    _val: *const libc::c_char,
    _vallen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_put_cf_with_ts(
    _db: *mut rocksdb_t,
    _options: *const rocksdb_writeoptions_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _ts: *const libc::c_char,
    _tslen: usize,
    _val: *const libc::c_char,
    _vallen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_delete_with_ts(
    _db: *mut rocksdb_t,
    _options: *const rocksdb_writeoptions_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _ts: *const libc::c_char,
    _tslen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_delete_cf_with_ts(
    _db: *mut rocksdb_t,
    _options: *const rocksdb_writeoptions_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _ts: *const libc::c_char,
    _tslen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_singledelete_with_ts(
    _db: *mut rocksdb_t,
    _options: *const rocksdb_writeoptions_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _ts: *const libc::c_char,
    _tslen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_singledelete_cf_with_ts(
    _db: *mut rocksdb_t,
    _options: *const rocksdb_writeoptions_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _ts: *const libc::c_char,
    _tslen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_get_with_ts(
    _db: *mut rocksdb_t,
    _options: *const rocksdb_readoptions_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _vallen: *mut usize,
    _ts: *mut *mut libc::c_char,
    _tslen: *mut usize,
    errptr: *mut *mut libc::c_char,
) -> *mut libc::c_char {
    call(errptr, std::ptr::null_mut(), || {
        Err(Status::not_supported(FEATURE))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_get_cf_with_ts(
    _db: *mut rocksdb_t,
    _options: *const rocksdb_readoptions_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _vallen: *mut usize,
    _ts: *mut *mut libc::c_char,
    _tslen: *mut usize,
    errptr: *mut *mut libc::c_char,
) -> *mut libc::c_char {
    call(errptr, std::ptr::null_mut(), || {
        Err(Status::not_supported(FEATURE))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_increase_full_history_ts_low(
    _db: *mut rocksdb_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _ts_low: *const libc::c_char,
    _ts_lowlen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_get_full_history_ts_low(
    _db: *mut rocksdb_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _ts_lowlen: *mut usize,
    errptr: *mut *mut libc::c_char,
) -> *mut libc::c_char {
    call(errptr, std::ptr::null_mut(), || {
        Err(Status::not_supported(FEATURE))
    })
}
