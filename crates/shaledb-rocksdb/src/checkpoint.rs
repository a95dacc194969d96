//! `rocksdb_checkpoint_t`: an openable copy of a database as of one instant, made by ShaleDB's
//! consistent copy (`Db::backup`: every segment read back and verified, the manifest written
//! last, so a copy that fails is no database).

use crate::args::{drop_handle, handle, into_handle, text};
use crate::db::{rocksdb_t, Database};
use crate::status::{call, quiet, Status};
use libc::c_char;
use std::path::Path;
use std::sync::Arc;

/// `rocksdb_checkpoint_t`.
pub struct rocksdb_checkpoint_t {
    pub(crate) database: Arc<Database>,
}

#[no_mangle]
pub extern "C" fn rocksdb_checkpoint_object_create(
    db: *mut rocksdb_t,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_checkpoint_t {
    call(errptr, std::ptr::null_mut(), || {
        let database = handle(db, "db")?.database.clone();
        Ok(into_handle(rocksdb_checkpoint_t { database }))
    })
}

/// Copies the database into `checkpoint_dir`, which must not exist (as in RocksDB). The copy
/// is a database of its own (a KVDB with a new id) that `rocksdb_open` opens. ShaleDB's log is
/// its data, so `log_size_for_flush` has nothing to decide.
#[no_mangle]
pub extern "C" fn rocksdb_checkpoint_create(
    checkpoint: *mut rocksdb_checkpoint_t,
    checkpoint_dir: *const c_char,
    _log_size_for_flush: u64,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let checkpoint = handle(checkpoint, "checkpoint")?;
        let dir = Path::new(text(checkpoint_dir, "checkpoint directory")?);
        if dir.exists() {
            return Err(Status::invalid(format!(
                "Directory exists: {}",
                dir.display()
            )));
        }
        checkpoint.database.engine.backup(dir)?;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_checkpoint_object_destroy(checkpoint: *mut rocksdb_checkpoint_t) {
    quiet((), || drop_handle(checkpoint))
}
