//! `rocksdb_optimistictransactiondb_t`: RocksDB's OptimisticTransactionDB over a ShaleDB
//! database. Its transactions lock nothing: each commits through a ShaleDB transaction, which
//! fails with "Resource busy: ..." when another writer committed a key it writes or read for
//! update after its snapshot (transaction.rs). Everything else is the database's, reached as
//! RocksDB programs do through `rocksdb_optimistictransactiondb_get_base_db`.

use crate::args::{drop_handle, handle, into_handle, text};
use crate::batch::rocksdb_writebatch_t;
use crate::checkpoint::rocksdb_checkpoint_t;
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t};
use crate::options::rocksdb_options_t;
use crate::read_write_options::rocksdb_writeoptions_t;
use crate::status::{call, quiet};
use crate::transaction::{begun, rocksdb_transaction_t, Txn};
use crate::transaction_options::rocksdb_optimistictransaction_options_t;
use libc::c_char;

/// `rocksdb_optimistictransactiondb_t`.
#[repr(C)]
pub struct rocksdb_optimistictransactiondb_t {
    /// First, so that a pointer to it is one to its database (RocksDB's is a DB).
    base: rocksdb_t,
}

fn base(otxn_db: *mut rocksdb_optimistictransactiondb_t) -> *mut rocksdb_t {
    otxn_db.cast()
}

#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_open(
    options: *const rocksdb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_optimistictransactiondb_t {
    call(errptr, std::ptr::null_mut(), || {
        let (base, _) =
            crate::db::open(handle(options, "options")?, text(name, "path")?, false, &[])?;
        Ok(into_handle(rocksdb_optimistictransactiondb_t { base }))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_open_column_families(
    options: *const rocksdb_options_t,
    name: *const c_char,
    num_column_families: libc::c_int,
    column_family_names: *const *const c_char,
    column_family_options: *const *const rocksdb_options_t,
    column_family_handles: *mut *mut rocksdb_column_family_handle_t,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_optimistictransactiondb_t {
    call(errptr, std::ptr::null_mut(), || {
        let db = crate::db::open_with_column_families(
            options,
            name,
            num_column_families,
            column_family_names,
            column_family_options,
            column_family_handles,
            false,
        )?;
        // SAFETY: `open_with_column_families` made `db` with `into_handle`, for us alone.
        let base = *unsafe { Box::from_raw(db) };
        Ok(into_handle(rocksdb_optimistictransactiondb_t { base }))
    })
}

/// A handle on the database (for its reads and plain writes), for
/// `rocksdb_optimistictransactiondb_close_base_db`.
#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_get_base_db(
    otxn_db: *mut rocksdb_optimistictransactiondb_t,
) -> *mut rocksdb_t {
    quiet(std::ptr::null_mut(), || {
        handle(otxn_db, "optimistic transaction db").map_or(std::ptr::null_mut(), |otxn_db| {
            into_handle(rocksdb_t {
                database: otxn_db.base.database.clone(),
            })
        })
    })
}

/// Releases a handle from `rocksdb_optimistictransactiondb_get_base_db`; the database stays
/// open.
#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_close_base_db(base_db: *mut rocksdb_t) {
    quiet((), || drop_handle(base_db))
}

#[no_mangle]
pub extern "C" fn rocksdb_optimistictransaction_begin(
    otxn_db: *mut rocksdb_optimistictransactiondb_t,
    write_options: *const rocksdb_writeoptions_t,
    otxn_options: *const rocksdb_optimistictransaction_options_t,
    old_txn: *mut rocksdb_transaction_t,
) -> *mut rocksdb_transaction_t {
    quiet(std::ptr::null_mut(), || {
        let made = (|| {
            Txn::optimistic(
                &handle(otxn_db, "optimistic transaction db")?.base,
                handle(write_options, "write options")?,
                handle(otxn_options, "optimistic transaction options")?.set_snapshot(),
            )
        })();
        match made {
            Ok(txn) => begun(txn, old_txn),
            Err(status) => {
                // c.h has no error to report here.
                eprintln!("shaledb-rocksdb: rocksdb_optimistictransaction_begin failed: {status}");
                std::ptr::null_mut()
            }
        }
    })
}

/// Writes `batch` atomically, outside any transaction (transactions it conflicts with fail at
/// their commit).
#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_write(
    otxn_db: *mut rocksdb_optimistictransactiondb_t,
    options: *const rocksdb_writeoptions_t,
    batch: *mut rocksdb_writebatch_t,
    errptr: *mut *mut c_char,
) {
    crate::batch::rocksdb_write(base(otxn_db), options, batch, errptr)
}

/// Closes the OptimisticTransactionDB; the database closes when the last transaction, iterator
/// or base handle using it is gone.
#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_close(
    otxn_db: *mut rocksdb_optimistictransactiondb_t,
) {
    quiet((), || {
        if otxn_db.is_null() {
            return;
        }
        // SAFETY: c.h hands the handle to close once, after its last use.
        let otxn_db = *unsafe { Box::from_raw(otxn_db) };
        crate::db::rocksdb_close(into_handle(otxn_db.base));
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_checkpoint_object_create(
    otxn_db: *mut rocksdb_optimistictransactiondb_t,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_checkpoint_t {
    crate::checkpoint::rocksdb_checkpoint_object_create(base(otxn_db), errptr)
}

#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_property_value(
    otxn_db: *mut rocksdb_optimistictransactiondb_t,
    propname: *const c_char,
) -> *mut c_char {
    crate::properties::rocksdb_property_value(base(otxn_db), propname)
}

#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_property_int(
    otxn_db: *mut rocksdb_optimistictransactiondb_t,
    propname: *const c_char,
    out_val: *mut u64,
) -> libc::c_int {
    crate::properties::rocksdb_property_int(base(otxn_db), propname, out_val)
}
