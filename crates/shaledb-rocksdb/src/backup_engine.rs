//! RocksDB's backup engine (`rocksdb_backup_engine_*`) is not built: opening one fails with
//! "Not implemented: ..." and points at `rocksdb_checkpoint_create`, ShaleDB's consistent,
//! openable copy. Its option objects exist and record their knobs, so programs that set them
//! up before opening link and run up to the open.

use crate::args::{handle_mut, text};
use crate::db::rocksdb_t;
use crate::options::rocksdb_options_t;
use crate::resources::rocksdb_env_t;
use crate::settings::{option_object, recorded_knobs, Settings};
use crate::status::{call, quiet, Status};
use libc::c_char;

const FEATURE: &str =
    "the backup engine (use rocksdb_checkpoint_create for a consistent, openable copy)";

/// `rocksdb_backup_engine_t` and `rocksdb_backup_engine_info_t`: never made (opening fails);
/// their functions answer for NULL.
pub struct rocksdb_backup_engine_t {
    _never: (),
}
pub struct rocksdb_backup_engine_info_t {
    _never: (),
}

/// `rocksdb_backup_engine_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_backup_engine_options_t {
    pub(crate) settings: Settings,
    backup_dir: String,
}

/// `rocksdb_restore_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_restore_options_t {
    pub(crate) settings: Settings,
}

option_object! {
    rocksdb_restore_options_t: rocksdb_restore_options_create, rocksdb_restore_options_destroy;
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_options_create(
    backup_dir: *const c_char,
) -> *mut rocksdb_backup_engine_options_t {
    crate::args::into_handle(rocksdb_backup_engine_options_t {
        backup_dir: text(backup_dir, "backup directory")
            .unwrap_or_default()
            .to_string(),
        ..Default::default()
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_options_destroy(
    options: *mut rocksdb_backup_engine_options_t,
) {
    quiet((), || crate::args::drop_handle(options))
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_options_set_backup_dir(
    options: *mut rocksdb_backup_engine_options_t,
    backup_dir: *const c_char,
) {
    quiet((), || {
        if let (Ok(options), Ok(dir)) = (
            handle_mut(options, "backup engine options"),
            text(backup_dir, "backup directory"),
        ) {
            options.backup_dir = dir.to_string();
        }
    })
}

/// The Env a backup engine would use: recorded nowhere, since none opens.
#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_options_set_env(
    _options: *mut rocksdb_backup_engine_options_t,
    _env: *mut rocksdb_env_t,
) {
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_open(
    _options: *const rocksdb_options_t,
    _path: *const libc::c_char,
    errptr: *mut *mut libc::c_char,
) -> *mut rocksdb_backup_engine_t {
    call(errptr, std::ptr::null_mut(), || {
        Err(Status::not_supported(FEATURE))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_open_opts(
    _options: *const rocksdb_backup_engine_options_t,
    _env: *mut rocksdb_env_t,
    errptr: *mut *mut libc::c_char,
) -> *mut rocksdb_backup_engine_t {
    call(errptr, std::ptr::null_mut(), || {
        Err(Status::not_supported(FEATURE))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_create_new_backup(
    _be: *mut rocksdb_backup_engine_t,
    _db: *mut rocksdb_t,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_create_new_backup_flush(
    _be: *mut rocksdb_backup_engine_t,
    _db: *mut rocksdb_t,
    _flush_before_backup: libc::c_uchar,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_purge_old_backups(
    _be: *mut rocksdb_backup_engine_t,
    _num_backups_to_keep: u32,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_verify_backup(
    _be: *mut rocksdb_backup_engine_t,
    _backup_id: u32,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_restore_db_from_latest_backup(
    _be: *mut rocksdb_backup_engine_t,
    _db_dir: *const libc::c_char,
    _wal_dir: *const libc::c_char,
    _restore_options: *const rocksdb_restore_options_t,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_restore_db_from_backup(
    _be: *mut rocksdb_backup_engine_t,
    _db_dir: *const libc::c_char,
    _wal_dir: *const libc::c_char,
    _restore_options: *const rocksdb_restore_options_t,
    _backup_id: u32,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(FEATURE)))
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_close(_be: *mut rocksdb_backup_engine_t) {}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_get_backup_info(
    _be: *mut rocksdb_backup_engine_t,
) -> *const rocksdb_backup_engine_info_t {
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_count(
    _info: *const rocksdb_backup_engine_info_t,
) -> libc::c_int {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_timestamp(
    _info: *const rocksdb_backup_engine_info_t,
    _index: libc::c_int,
) -> i64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_backup_id(
    _info: *const rocksdb_backup_engine_info_t,
    _index: libc::c_int,
) -> u32 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_size(
    _info: *const rocksdb_backup_engine_info_t,
    _index: libc::c_int,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_number_files(
    _info: *const rocksdb_backup_engine_info_t,
    _index: libc::c_int,
) -> u32 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_backup_engine_info_destroy(_info: *const rocksdb_backup_engine_info_t) {}

recorded_knobs!(rocksdb_backup_engine_options_t, BACKUP_ENGINE_KNOBS, "rocksdb_backup_engine_options_set_" {
        rocksdb_backup_engine_options_set_share_table_files(libc::c_uchar) => rocksdb_backup_engine_options_get_share_table_files(libc::c_uchar) = 1, -;
        rocksdb_backup_engine_options_set_sync(libc::c_uchar) => rocksdb_backup_engine_options_get_sync(libc::c_uchar) = 1, -;
        rocksdb_backup_engine_options_set_destroy_old_data(libc::c_uchar) => rocksdb_backup_engine_options_get_destroy_old_data(libc::c_uchar) = 0, -;
        rocksdb_backup_engine_options_set_backup_log_files(libc::c_uchar) => rocksdb_backup_engine_options_get_backup_log_files(libc::c_uchar) = 1, -;
        rocksdb_backup_engine_options_set_backup_rate_limit(u64) => rocksdb_backup_engine_options_get_backup_rate_limit(u64) = 0, -;
        rocksdb_backup_engine_options_set_restore_rate_limit(u64) => rocksdb_backup_engine_options_get_restore_rate_limit(u64) = 0, -;
        rocksdb_backup_engine_options_set_max_background_operations(libc::c_int) => rocksdb_backup_engine_options_get_max_background_operations(libc::c_int) = 1, -;
        rocksdb_backup_engine_options_set_callback_trigger_interval_size(u64) => rocksdb_backup_engine_options_get_callback_trigger_interval_size(u64) = 4 << 20, -;
        rocksdb_backup_engine_options_set_max_valid_backups_to_open(libc::c_int) => rocksdb_backup_engine_options_get_max_valid_backups_to_open(libc::c_int) = i32::MAX as i64, -;
        rocksdb_backup_engine_options_set_share_files_with_checksum_naming(libc::c_int) => rocksdb_backup_engine_options_get_share_files_with_checksum_naming(libc::c_int) = 3, -;
});
recorded_knobs!(rocksdb_restore_options_t, RESTORE_KNOBS, "rocksdb_restore_options_set_" {
        rocksdb_restore_options_set_keep_log_files(libc::c_int) = 0, -;
});
