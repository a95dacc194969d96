//! Per-call options: `rocksdb_readoptions_t` (snapshot, bounds, prefix_same_as_start, ...),
//! `rocksdb_writeoptions_t` (sync, disableWAL, ...) and `rocksdb_flushoptions_t`.

use crate::args::{bytes, drop_handle, handle, handle_mut, into_handle};
use crate::settings::{recorded_knobs, Settings};
use crate::snapshot::rocksdb_snapshot_t;
use crate::status::quiet;
use engine::Snapshot;
use libc::c_char;
use std::sync::Arc;

/// `rocksdb_readoptions_t`.
#[derive(Clone, Default)]
pub struct rocksdb_readoptions_t {
    pub(crate) settings: Settings,
    pub(crate) snapshot: Option<Arc<Snapshot>>,
    pub(crate) lower_bound: Option<Vec<u8>>,
    pub(crate) upper_bound: Option<Vec<u8>>,
}

impl rocksdb_readoptions_t {
    /// Whether an iterator stops at the first key whose prefix differs from the sought key's.
    pub(crate) fn prefix_same_as_start(&self) -> bool {
        self.settings
            .flag(READ_KNOBS, "rocksdb_readoptions_set_prefix_same_as_start")
    }

    /// Fails when the options carry a user-defined timestamp (timestamps.rs).
    pub(crate) fn check_no_timestamp(&self) -> crate::status::Result<()> {
        if self.settings.get::<u8>(crate::timestamps::TIMESTAMP_SET, 0) != 0 {
            return Err(crate::status::Status::not_supported(
                crate::timestamps::FEATURE,
            ));
        }
        Ok(())
    }

    /// Whether an iterator follows the data as it is written (RocksDB's tailing iterator)
    /// rather than reading one snapshot.
    pub(crate) fn tailing(&self) -> bool {
        self.settings
            .flag(READ_KNOBS, "rocksdb_readoptions_set_tailing")
    }

    /// Whether an iterator ignores the prefix extractor (RocksDB's total_order_seek).
    pub(crate) fn total_order_seek(&self) -> bool {
        self.settings
            .flag(READ_KNOBS, "rocksdb_readoptions_set_total_order_seek")
    }
}

/// `rocksdb_writeoptions_t`.
#[derive(Clone, Default)]
pub struct rocksdb_writeoptions_t {
    pub(crate) settings: Settings,
}

impl rocksdb_writeoptions_t {
    /// Whether the write returns only once durable (RocksDB's `sync`).
    pub(crate) fn sync(&self) -> bool {
        self.settings
            .flag(WRITE_KNOBS, "rocksdb_writeoptions_set_sync")
    }
}

/// `rocksdb_flushoptions_t`.
#[derive(Clone, Default)]
pub struct rocksdb_flushoptions_t {
    pub(crate) settings: Settings,
}

#[no_mangle]
pub extern "C" fn rocksdb_readoptions_create() -> *mut rocksdb_readoptions_t {
    into_handle(rocksdb_readoptions_t::default())
}

#[no_mangle]
pub extern "C" fn rocksdb_readoptions_destroy(options: *mut rocksdb_readoptions_t) {
    quiet((), || drop_handle(options))
}

#[no_mangle]
pub extern "C" fn rocksdb_readoptions_set_snapshot(
    options: *mut rocksdb_readoptions_t,
    snapshot: *const rocksdb_snapshot_t,
) {
    quiet((), || {
        if let Ok(options) = handle_mut(options, "read options") {
            // NULL clears the snapshot, as in RocksDB.
            options.snapshot = handle(snapshot, "snapshot")
                .ok()
                .map(|snapshot| snapshot.snapshot.clone());
        }
    })
}

fn set_bound(
    options: *mut rocksdb_readoptions_t,
    key: *const c_char,
    len: usize,
    bound: fn(&mut rocksdb_readoptions_t) -> &mut Option<Vec<u8>>,
) {
    quiet((), || {
        if let Ok(options) = handle_mut(options, "read options") {
            // A NULL key clears the bound, as in RocksDB.
            *bound(options) = if key.is_null() {
                None
            } else {
                bytes(key, len).ok().map(<[u8]>::to_vec)
            };
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_readoptions_set_iterate_upper_bound(
    options: *mut rocksdb_readoptions_t,
    key: *const c_char,
    keylen: usize,
) {
    set_bound(options, key, keylen, |options| &mut options.upper_bound)
}

#[no_mangle]
pub extern "C" fn rocksdb_readoptions_set_iterate_lower_bound(
    options: *mut rocksdb_readoptions_t,
    key: *const c_char,
    keylen: usize,
) {
    set_bound(options, key, keylen, |options| &mut options.lower_bound)
}

#[no_mangle]
pub extern "C" fn rocksdb_writeoptions_create() -> *mut rocksdb_writeoptions_t {
    into_handle(rocksdb_writeoptions_t::default())
}

#[no_mangle]
pub extern "C" fn rocksdb_writeoptions_destroy(options: *mut rocksdb_writeoptions_t) {
    quiet((), || drop_handle(options))
}

/// disableWAL: ShaleDB has no write-ahead log apart from its data (the log is the data), so a
/// write is logged either way; recorded, and durable as any write without `sync`.
#[no_mangle]
pub extern "C" fn rocksdb_writeoptions_disable_WAL(
    options: *mut rocksdb_writeoptions_t,
    disable: libc::c_int,
) {
    quiet((), || {
        if let Ok(options) = handle_mut(options, "write options") {
            options
                .settings
                .set("rocksdb_writeoptions_disable_WAL", disable);
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_writeoptions_get_disable_WAL(
    options: *mut rocksdb_writeoptions_t,
) -> libc::c_uchar {
    quiet(0, || {
        handle(options, "write options").map_or(0, |options| {
            (options
                .settings
                .get::<i32>("rocksdb_writeoptions_disable_WAL", 0)
                != 0) as libc::c_uchar
        })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_flushoptions_create() -> *mut rocksdb_flushoptions_t {
    into_handle(rocksdb_flushoptions_t::default())
}

#[no_mangle]
pub extern "C" fn rocksdb_flushoptions_destroy(options: *mut rocksdb_flushoptions_t) {
    quiet((), || drop_handle(options))
}

recorded_knobs!(rocksdb_readoptions_t, READ_KNOBS, "rocksdb_readoptions_set_" {
        rocksdb_readoptions_set_verify_checksums(libc::c_uchar) => rocksdb_readoptions_get_verify_checksums(libc::c_uchar) = 1, -;
        rocksdb_readoptions_set_fill_cache(libc::c_uchar) => rocksdb_readoptions_get_fill_cache(libc::c_uchar) = 1, -;
        rocksdb_readoptions_set_read_tier(libc::c_int) => rocksdb_readoptions_get_read_tier(libc::c_int) = 0, -;
        rocksdb_readoptions_set_tailing(libc::c_uchar) => rocksdb_readoptions_get_tailing(libc::c_uchar) = 0, -;
        rocksdb_readoptions_set_readahead_size(usize) => rocksdb_readoptions_get_readahead_size(usize) = 0, -;
        rocksdb_readoptions_set_prefix_same_as_start(libc::c_uchar) => rocksdb_readoptions_get_prefix_same_as_start(libc::c_uchar) = 0, -;
        rocksdb_readoptions_set_pin_data(libc::c_uchar) => rocksdb_readoptions_get_pin_data(libc::c_uchar) = 0, -;
        rocksdb_readoptions_set_total_order_seek(libc::c_uchar) => rocksdb_readoptions_get_total_order_seek(libc::c_uchar) = 0, -;
        rocksdb_readoptions_set_max_skippable_internal_keys(u64) => rocksdb_readoptions_get_max_skippable_internal_keys(u64) = 0, -;
        rocksdb_readoptions_set_background_purge_on_iterator_cleanup(libc::c_uchar) => rocksdb_readoptions_get_background_purge_on_iterator_cleanup(libc::c_uchar) = 0, -;
        rocksdb_readoptions_set_ignore_range_deletions(libc::c_uchar) => rocksdb_readoptions_get_ignore_range_deletions(libc::c_uchar) = 0, -;
        rocksdb_readoptions_set_deadline(u64) => rocksdb_readoptions_get_deadline(u64) = 0, -;
        rocksdb_readoptions_set_io_timeout(u64) => rocksdb_readoptions_get_io_timeout(u64) = 0, -;
        rocksdb_readoptions_set_async_io(libc::c_uchar) => rocksdb_readoptions_get_async_io(libc::c_uchar) = 0, -;
        rocksdb_readoptions_set_managed(libc::c_uchar) = 0, -;
        rocksdb_readoptions_set_auto_readahead_size(libc::c_uchar) = 1, -;
});

recorded_knobs!(rocksdb_writeoptions_t, WRITE_KNOBS, "rocksdb_writeoptions_set_" {
        rocksdb_writeoptions_set_sync(libc::c_uchar) => rocksdb_writeoptions_get_sync(libc::c_uchar) = 0, -;
        rocksdb_writeoptions_set_ignore_missing_column_families(libc::c_uchar) => rocksdb_writeoptions_get_ignore_missing_column_families(libc::c_uchar) = 0, -;
        rocksdb_writeoptions_set_no_slowdown(libc::c_uchar) => rocksdb_writeoptions_get_no_slowdown(libc::c_uchar) = 0, -;
        rocksdb_writeoptions_set_low_pri(libc::c_uchar) => rocksdb_writeoptions_get_low_pri(libc::c_uchar) = 0, -;
        rocksdb_writeoptions_set_memtable_insert_hint_per_batch(libc::c_uchar) => rocksdb_writeoptions_get_memtable_insert_hint_per_batch(libc::c_uchar) = 0, -;
});

recorded_knobs!(rocksdb_flushoptions_t, FLUSH_KNOBS, "rocksdb_flushoptions_set_" {
        rocksdb_flushoptions_set_wait(libc::c_uchar) => rocksdb_flushoptions_get_wait(libc::c_uchar) = 1, -;
});
