//! SST files: the writer (`rocksdb_sstfilewriter_*`) and their ingestion. ShaleDB stores no SST
//! files, so a writer can be made and destroyed but every write to it, and every ingestion,
//! fails with "Not implemented: ..." naming the feature; a program loading data in bulk writes
//! it with a write batch instead.

use crate::db::{rocksdb_column_family_handle_t, rocksdb_t};
use crate::options::rocksdb_options_t;
use crate::plugins::rocksdb_comparator_t;
use crate::resources::rocksdb_envoptions_t;
use crate::settings::{option_object, recorded_knobs, Settings};
use crate::status::{call, quiet, Status};

/// `rocksdb_sstfilewriter_t`: a writer that cannot open a file.
pub struct rocksdb_sstfilewriter_t {
    _no_file: (),
}

/// `rocksdb_ingestexternalfileoptions_t`.
#[derive(Clone, Default)]
pub struct rocksdb_ingestexternalfileoptions_t {
    pub(crate) settings: Settings,
}

option_object! {
    rocksdb_ingestexternalfileoptions_t:
        rocksdb_ingestexternalfileoptions_create, rocksdb_ingestexternalfileoptions_destroy;
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_create(
    _env: *const rocksdb_envoptions_t,
    _io_options: *const rocksdb_options_t,
) -> *mut rocksdb_sstfilewriter_t {
    crate::args::into_handle(rocksdb_sstfilewriter_t { _no_file: () })
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_create_with_comparator(
    env: *const rocksdb_envoptions_t,
    io_options: *const rocksdb_options_t,
    _comparator: *const rocksdb_comparator_t,
) -> *mut rocksdb_sstfilewriter_t {
    rocksdb_sstfilewriter_create(env, io_options)
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_destroy(writer: *mut rocksdb_sstfilewriter_t) {
    quiet((), || crate::args::drop_handle(writer))
}

/// Nothing was written: the file (there is none) has 0 bytes.
#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_file_size(
    _writer: *mut rocksdb_sstfilewriter_t,
    file_size: *mut u64,
) {
    crate::args::set_out(file_size, 0)
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_open(
    _writer: *mut rocksdb_sstfilewriter_t,
    _name: *const libc::c_char,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(SST_FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_add(
    _writer: *mut rocksdb_sstfilewriter_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _val: *const libc::c_char,
    _vallen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(SST_FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_put(
    _writer: *mut rocksdb_sstfilewriter_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _val: *const libc::c_char,
    _vallen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(SST_FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_put_with_ts(
    _writer: *mut rocksdb_sstfilewriter_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _ts: *const libc::c_char,
    _tslen: usize,
    _val: *const libc::c_char,
    _vallen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(SST_FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_merge(
    _writer: *mut rocksdb_sstfilewriter_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _val: *const libc::c_char,
    _vallen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(SST_FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_delete(
    _writer: *mut rocksdb_sstfilewriter_t,
    _key: *const libc::c_char,
    _keylen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(SST_FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_delete_with_ts(
    _writer: *mut rocksdb_sstfilewriter_t,
    _key: *const libc::c_char,
    _keylen: usize,
    _ts: *const libc::c_char,
    _tslen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(SST_FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_delete_range(
    _writer: *mut rocksdb_sstfilewriter_t,
    _begin_key: *const libc::c_char,
    _begin_keylen: usize,
    _end_key: *const libc::c_char,
    _end_keylen: usize,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(SST_FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_sstfilewriter_finish(
    _writer: *mut rocksdb_sstfilewriter_t,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(SST_FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_ingest_external_file(
    _db: *mut rocksdb_t,
    _file_list: *const *const libc::c_char,
    _list_len: usize,
    _opt: *const rocksdb_ingestexternalfileoptions_t,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(INGEST_FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_ingest_external_file_cf(
    _db: *mut rocksdb_t,
    _handle: *mut rocksdb_column_family_handle_t,
    _file_list: *const *const libc::c_char,
    _list_len: usize,
    _opt: *const rocksdb_ingestexternalfileoptions_t,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(INGEST_FEATURE)))
}

const SST_FEATURE: &str = "SST files (ShaleDB stores none; write the keys with a write batch)";
const INGEST_FEATURE: &str =
    "SST file ingestion (ShaleDB stores no SST files; write the keys with a write batch)";

recorded_knobs!(rocksdb_ingestexternalfileoptions_t, INGEST_KNOBS, "rocksdb_ingestexternalfileoptions_set_" {
        rocksdb_ingestexternalfileoptions_set_move_files(libc::c_uchar) = 0, -;
        rocksdb_ingestexternalfileoptions_set_snapshot_consistency(libc::c_uchar) = 1, -;
        rocksdb_ingestexternalfileoptions_set_allow_global_seqno(libc::c_uchar) = 1, -;
        rocksdb_ingestexternalfileoptions_set_allow_blocking_flush(libc::c_uchar) = 1, -;
        rocksdb_ingestexternalfileoptions_set_ingest_behind(libc::c_uchar) = 0, -;
        rocksdb_ingestexternalfileoptions_set_fail_if_not_bottommost_level(libc::c_uchar) = 0, -;
});
