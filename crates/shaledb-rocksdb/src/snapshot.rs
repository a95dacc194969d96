//! `rocksdb_snapshot_t`: a ShaleDB snapshot, shared by the read options that name it.

use crate::args::{drop_handle, handle, into_handle};
use crate::db::rocksdb_t;
use crate::status::quiet;
use engine::Snapshot;
use std::sync::Arc;

/// `rocksdb_snapshot_t`.
pub struct rocksdb_snapshot_t {
    pub(crate) snapshot: Arc<Snapshot>,
}

/// A snapshot of the database as of now; NULL if it is closed (c.h has no error to report).
#[no_mangle]
pub extern "C" fn rocksdb_create_snapshot(db: *mut rocksdb_t) -> *const rocksdb_snapshot_t {
    quiet(std::ptr::null(), || {
        handle(db, "db")
            .ok()
            .and_then(|db| db.engine().snapshot().ok())
            .map_or(std::ptr::null(), |snapshot| {
                into_handle(rocksdb_snapshot_t {
                    snapshot: Arc::new(snapshot),
                })
                .cast_const()
            })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_release_snapshot(
    _db: *mut rocksdb_t,
    snapshot: *const rocksdb_snapshot_t,
) {
    quiet((), || drop_handle(snapshot.cast_mut()))
}

#[no_mangle]
pub extern "C" fn rocksdb_snapshot_get_sequence_number(snapshot: *const rocksdb_snapshot_t) -> u64 {
    quiet(0, || {
        handle(snapshot, "snapshot").map_or(0, |snapshot| snapshot.snapshot.seqno())
    })
}
