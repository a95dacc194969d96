//! Flushes and compactions, and their option objects. ShaleDB has no memtables and no LSM
//! levels: a flush makes every acknowledged write durable (its write buffers are the head of
//! its log), and a manual compaction runs its cleaner over every segment holding dead data (and
//! its sorter over scattered key ranges), for the whole database: ShaleDB's segments are not
//! key-range files, so a compaction's key range cannot narrow it.

use crate::args::{array, handle, handle_mut};
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t};
use crate::options::rocksdb_options_t;
use crate::read_write_options::rocksdb_flushoptions_t;
use crate::settings::{option_object, recorded_knobs, Settings};
use crate::status::{call, logged, quiet, Code, Result, Status};
use libc::c_char;
use std::sync::atomic::Ordering;

/// `rocksdb_compactoptions_t`.
#[derive(Clone, Default)]
pub struct rocksdb_compactoptions_t {
    pub(crate) settings: Settings,
    /// A user-defined timestamp ShaleDB has no notion of: a compaction naming one fails.
    full_history_ts_low: Option<Vec<u8>>,
}

/// `rocksdb_universal_compaction_options_t`, `rocksdb_fifo_compaction_options_t`: compaction
/// styles ShaleDB's cleaner has no use for; recorded into the options they are given to.
#[derive(Clone, Default)]
pub struct rocksdb_universal_compaction_options_t {
    pub(crate) settings: Settings,
}

#[derive(Clone, Default)]
pub struct rocksdb_fifo_compaction_options_t {
    pub(crate) settings: Settings,
}

/// `rocksdb_wait_for_compact_options_t`.
#[derive(Clone, Default)]
pub struct rocksdb_wait_for_compact_options_t {
    pub(crate) settings: Settings,
}

/// Makes every acknowledged write durable: RocksDB's flush of the memtables.
fn flush(db: *mut rocksdb_t, options: *const rocksdb_flushoptions_t) -> Result<()> {
    handle(options, "flush options")?;
    handle(db, "db")?.engine().sync()?;
    Ok(())
}

#[no_mangle]
pub extern "C" fn rocksdb_flush(
    db: *mut rocksdb_t,
    options: *const rocksdb_flushoptions_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || flush(db, options))
}

/// ShaleDB's log is shared by its column families: flushing one flushes all.
#[no_mangle]
pub extern "C" fn rocksdb_flush_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_flushoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(db, "db")?.column_family(column_family)?;
        flush(db, options)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_flush_cfs(
    db: *mut rocksdb_t,
    options: *const rocksdb_flushoptions_t,
    column_family: *mut *mut rocksdb_column_family_handle_t,
    num_column_families: libc::c_int,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let count =
            usize::try_from(num_column_families).map_err(|_| Status::invalid("negative count"))?;
        let db_ref = handle(db, "db")?;
        for cf in array(column_family.cast_const(), count)? {
            if cf.is_null() {
                return Err(Status::invalid("column family handle is NULL"));
            }
            db_ref.column_family(*cf)?;
        }
        flush(db, options)
    })
}

/// Writes the log's buffers out; with `sync`, durably. ShaleDB's sync does both.
#[no_mangle]
pub extern "C" fn rocksdb_flush_wal(
    db: *mut rocksdb_t,
    _sync: libc::c_uchar,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(db, "db")?.engine().sync()?;
        Ok(())
    })
}

/// Runs a manual compaction of the whole database (see the module's comment).
fn compact(
    db: *mut rocksdb_t,
    cf: *mut rocksdb_column_family_handle_t,
    options: Option<&rocksdb_compactoptions_t>,
) -> Result<()> {
    let db = handle(db, "db")?;
    db.column_family(cf)?;
    if options.is_some_and(|options| options.full_history_ts_low.is_some()) {
        return Err(Status::not_supported(
            "user-defined timestamps (compaction with full_history_ts_low)",
        ));
    }
    if db.database.manual_compaction_paused.load(Ordering::Acquire) {
        return Err(Status::new(
            Code::Aborted,
            "Manual compaction paused (rocksdb_disable_manual_compaction)",
        ));
    }
    db.engine().compact()?;
    Ok(())
}

/// c.h's compactions report nothing: a failure is written to stderr.
fn compact_reporting(
    db: *mut rocksdb_t,
    cf: *mut rocksdb_column_family_handle_t,
    options: *mut rocksdb_compactoptions_t,
) {
    logged("compact_range", (), || {
        let options = if options.is_null() {
            None
        } else {
            Some(handle(options, "compact options")?)
        };
        compact(db, cf, options)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_compact_range(
    db: *mut rocksdb_t,
    _start_key: *const c_char,
    _start_key_len: usize,
    _limit_key: *const c_char,
    _limit_key_len: usize,
) {
    compact_reporting(db, std::ptr::null_mut(), std::ptr::null_mut())
}

#[no_mangle]
pub extern "C" fn rocksdb_compact_range_cf(
    db: *mut rocksdb_t,
    column_family: *mut rocksdb_column_family_handle_t,
    _start_key: *const c_char,
    _start_key_len: usize,
    _limit_key: *const c_char,
    _limit_key_len: usize,
) {
    compact_reporting(db, column_family, std::ptr::null_mut())
}

#[no_mangle]
pub extern "C" fn rocksdb_compact_range_opt(
    db: *mut rocksdb_t,
    opt: *mut rocksdb_compactoptions_t,
    _start_key: *const c_char,
    _start_key_len: usize,
    _limit_key: *const c_char,
    _limit_key_len: usize,
) {
    compact_reporting(db, std::ptr::null_mut(), opt)
}

#[no_mangle]
pub extern "C" fn rocksdb_compact_range_cf_opt(
    db: *mut rocksdb_t,
    column_family: *mut rocksdb_column_family_handle_t,
    opt: *mut rocksdb_compactoptions_t,
    _start_key: *const c_char,
    _start_key_len: usize,
    _limit_key: *const c_char,
    _limit_key_len: usize,
) {
    compact_reporting(db, column_family, opt)
}

/// A hint that a range deserves compaction: ShaleDB's cleaner picks segments by their dead
/// bytes, so the hint is taken as a request to compact now.
#[no_mangle]
pub extern "C" fn rocksdb_suggest_compact_range(
    db: *mut rocksdb_t,
    _start_key: *const c_char,
    _start_key_len: usize,
    _limit_key: *const c_char,
    _limit_key_len: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || compact(db, std::ptr::null_mut(), None))
}

#[no_mangle]
pub extern "C" fn rocksdb_suggest_compact_range_cf(
    db: *mut rocksdb_t,
    column_family: *mut rocksdb_column_family_handle_t,
    _start_key: *const c_char,
    _start_key_len: usize,
    _limit_key: *const c_char,
    _limit_key_len: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || compact(db, column_family, None))
}

#[no_mangle]
pub extern "C" fn rocksdb_disable_manual_compaction(db: *mut rocksdb_t) {
    quiet((), || {
        if let Ok(db) = handle(db, "db") {
            db.database
                .manual_compaction_paused
                .store(true, Ordering::Release);
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_enable_manual_compaction(db: *mut rocksdb_t) {
    quiet((), || {
        if let Ok(db) = handle(db, "db") {
            db.database
                .manual_compaction_paused
                .store(false, Ordering::Release);
        }
    })
}

/// ShaleDB's background jobs (cleaner, sorter, checkpointer) work in short steps and stop at
/// close; there is no queue of pending work to cancel.
#[no_mangle]
pub extern "C" fn rocksdb_cancel_all_background_work(_db: *mut rocksdb_t, _wait: libc::c_uchar) {}

/// Waits for background compactions: ShaleDB has no queue of them to wait on. With `flush`,
/// every acknowledged write is made durable first; `close_db` is not honoured (the caller
/// closes with `rocksdb_close`) and fails by name.
#[no_mangle]
pub extern "C" fn rocksdb_wait_for_compact(
    db: *mut rocksdb_t,
    options: *mut rocksdb_wait_for_compact_options_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let options = handle(options, "wait for compact options")?;
        let db = handle(db, "db")?;
        let flag = |setter| options.settings.flag(WAIT_FOR_COMPACT_KNOBS, setter);
        if flag("rocksdb_wait_for_compact_options_set_close_db") {
            return Err(Status::not_supported(
                "wait_for_compact with close_db (close with rocksdb_close)",
            ));
        }
        if flag("rocksdb_wait_for_compact_options_set_flush") {
            db.engine().sync()?;
        }
        Ok(())
    })
}

/// Deleting obsolete files cannot be held off: ShaleDB's cleaner frees segments as it goes,
/// so a program copying files by hand would copy a moving set. `rocksdb_checkpoint_create`
/// is the consistent copy.
#[no_mangle]
pub extern "C" fn rocksdb_disable_file_deletions(_db: *mut rocksdb_t, errptr: *mut *mut c_char) {
    call(errptr, (), || {
        Err(Status::not_supported(
            "disabling file deletions (ShaleDB's cleaner frees segments as it goes; \
             use rocksdb_checkpoint_create for a consistent copy)",
        ))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_enable_file_deletions(_db: *mut rocksdb_t, errptr: *mut *mut c_char) {
    call(errptr, (), || {
        Err(Status::not_supported(
            "enabling file deletions (they cannot be disabled)",
        ))
    })
}

option_object! {
    rocksdb_compactoptions_t: rocksdb_compactoptions_create, rocksdb_compactoptions_destroy;
    rocksdb_universal_compaction_options_t:
        rocksdb_universal_compaction_options_create, rocksdb_universal_compaction_options_destroy;
    rocksdb_fifo_compaction_options_t:
        rocksdb_fifo_compaction_options_create, rocksdb_fifo_compaction_options_destroy;
    rocksdb_wait_for_compact_options_t:
        rocksdb_wait_for_compact_options_create, rocksdb_wait_for_compact_options_destroy;
}

#[no_mangle]
pub extern "C" fn rocksdb_compactoptions_set_full_history_ts_low(
    options: *mut rocksdb_compactoptions_t,
    ts: *mut c_char,
    tslen: usize,
) {
    quiet((), || {
        if let (Ok(options), Ok(ts)) = (
            handle_mut(options, "compact options"),
            crate::args::bytes(ts, tslen),
        ) {
            options.full_history_ts_low = Some(ts.to_vec());
        }
    })
}

/// Records the universal or FIFO compaction options in `options` (dumped to `LOG` with them).
fn absorb(options: *mut rocksdb_options_t, settings: Result<&Settings>) {
    quiet((), || {
        if let (Ok(options), Ok(settings)) = (handle_mut(options, "options"), settings) {
            options.settings.absorb(settings);
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_universal_compaction_options(
    options: *mut rocksdb_options_t,
    universal: *mut rocksdb_universal_compaction_options_t,
) {
    absorb(
        options,
        handle(universal, "universal compaction options").map(|o| &o.settings),
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_options_set_fifo_compaction_options(
    options: *mut rocksdb_options_t,
    fifo: *mut rocksdb_fifo_compaction_options_t,
) {
    absorb(
        options,
        handle(fifo, "fifo compaction options").map(|o| &o.settings),
    )
}

recorded_knobs!(rocksdb_compactoptions_t, COMPACT_KNOBS, "rocksdb_compactoptions_set_" {
        rocksdb_compactoptions_set_exclusive_manual_compaction(libc::c_uchar) => rocksdb_compactoptions_get_exclusive_manual_compaction(libc::c_uchar) = 1, -;
        rocksdb_compactoptions_set_bottommost_level_compaction(libc::c_uchar) => rocksdb_compactoptions_get_bottommost_level_compaction(libc::c_uchar) = 1, -;
        rocksdb_compactoptions_set_change_level(libc::c_uchar) => rocksdb_compactoptions_get_change_level(libc::c_uchar) = 0, -;
        rocksdb_compactoptions_set_target_level(libc::c_int) => rocksdb_compactoptions_get_target_level(libc::c_int) = -1, -;
        rocksdb_compactoptions_set_target_path_id(libc::c_int) => rocksdb_compactoptions_get_target_path_id(libc::c_int) = 0, -;
        rocksdb_compactoptions_set_allow_write_stall(libc::c_uchar) => rocksdb_compactoptions_get_allow_write_stall(libc::c_uchar) = 0, -;
        rocksdb_compactoptions_set_max_subcompactions(libc::c_int) => rocksdb_compactoptions_get_max_subcompactions(libc::c_int) = 0, -;
});

recorded_knobs!(rocksdb_universal_compaction_options_t, UNIVERSAL_KNOBS, "rocksdb_universal_compaction_options_set_" {
        rocksdb_universal_compaction_options_set_size_ratio(libc::c_int) => rocksdb_universal_compaction_options_get_size_ratio(libc::c_int) = 1, -;
        rocksdb_universal_compaction_options_set_min_merge_width(libc::c_int) => rocksdb_universal_compaction_options_get_min_merge_width(libc::c_int) = 2, -;
        rocksdb_universal_compaction_options_set_max_merge_width(libc::c_int) => rocksdb_universal_compaction_options_get_max_merge_width(libc::c_int) = u32::MAX as i64, -;
        rocksdb_universal_compaction_options_set_max_size_amplification_percent(libc::c_int) => rocksdb_universal_compaction_options_get_max_size_amplification_percent(libc::c_int) = 200, -;
        rocksdb_universal_compaction_options_set_compression_size_percent(libc::c_int) => rocksdb_universal_compaction_options_get_compression_size_percent(libc::c_int) = -1, -;
        rocksdb_universal_compaction_options_set_stop_style(libc::c_int) => rocksdb_universal_compaction_options_get_stop_style(libc::c_int) = 1, -;
});

recorded_knobs!(rocksdb_fifo_compaction_options_t, FIFO_KNOBS, "rocksdb_fifo_compaction_options_set_" {
        rocksdb_fifo_compaction_options_set_allow_compaction(libc::c_uchar) => rocksdb_fifo_compaction_options_get_allow_compaction(libc::c_uchar) = 0, -;
        rocksdb_fifo_compaction_options_set_max_table_files_size(u64) => rocksdb_fifo_compaction_options_get_max_table_files_size(u64) = 1 << 30, -;
});

recorded_knobs!(rocksdb_wait_for_compact_options_t, WAIT_FOR_COMPACT_KNOBS, "rocksdb_wait_for_compact_options_set_" {
        rocksdb_wait_for_compact_options_set_abort_on_pause(libc::c_uchar) => rocksdb_wait_for_compact_options_get_abort_on_pause(libc::c_uchar) = 0, -;
        rocksdb_wait_for_compact_options_set_flush(libc::c_uchar) => rocksdb_wait_for_compact_options_get_flush(libc::c_uchar) = 0, -;
        rocksdb_wait_for_compact_options_set_close_db(libc::c_uchar) => rocksdb_wait_for_compact_options_get_close_db(libc::c_uchar) = 0, -;
        rocksdb_wait_for_compact_options_set_timeout(u64) => rocksdb_wait_for_compact_options_get_timeout(u64) = 0, -;
});
