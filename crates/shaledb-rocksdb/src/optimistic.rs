//! `rocksdb_optimistictransactiondb_t`: RocksDB's OptimisticTransactionDB over a ShaleDB
//! database. Its transactions lock nothing: each commits through a ShaleDB transaction, which
//! fails with "Resource busy: ..." when another writer committed a key it writes or read for
//! update after its snapshot (transaction.rs). Everything else is the database's, reached as
//! RocksDB programs do through `rocksdb_optimistictransactiondb_get_base_db`.

use crate::args::{handle, into_handle, text};
use crate::batch::rocksdb_writebatch_t;
use crate::checkpoint::rocksdb_checkpoint_t;
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t};
use crate::options::rocksdb_options_t;
use crate::read_write_options::rocksdb_writeoptions_t;
use crate::status::{call, logged, quiet};
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

/// The database (for its reads and plain writes). As RocksDB's, it belongs to the
/// OptimisticTransactionDB: valid until that is closed, and keeping it does not keep the
/// database open.
#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_get_base_db(
    otxn_db: *mut rocksdb_optimistictransactiondb_t,
) -> *mut rocksdb_t {
    base(otxn_db)
}

/// Releases a handle from `rocksdb_optimistictransactiondb_get_base_db`: the
/// OptimisticTransactionDB's own, so there is nothing to free; the database stays open.
#[no_mangle]
pub extern "C" fn rocksdb_optimistictransactiondb_close_base_db(_base_db: *mut rocksdb_t) {}

#[no_mangle]
pub extern "C" fn rocksdb_optimistictransaction_begin(
    otxn_db: *mut rocksdb_optimistictransactiondb_t,
    write_options: *const rocksdb_writeoptions_t,
    otxn_options: *const rocksdb_optimistictransaction_options_t,
    old_txn: *mut rocksdb_transaction_t,
) -> *mut rocksdb_transaction_t {
    logged(
        "rocksdb_optimistictransaction_begin",
        std::ptr::null_mut(),
        || {
            let txn = Txn::optimistic(
                &handle(otxn_db, "optimistic transaction db")?.base,
                handle(write_options, "write options")?,
                handle(otxn_options, "optimistic transaction options")?.set_snapshot(),
            )?;
            Ok(begun(txn, old_txn))
        },
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::rocksdb_options_destroy;
    use crate::read_write_options::{
        rocksdb_readoptions_create, rocksdb_readoptions_destroy, rocksdb_writeoptions_create,
        rocksdb_writeoptions_destroy,
    };
    use crate::transaction::{
        rocksdb_transaction_commit, rocksdb_transaction_create_iterator,
        rocksdb_transaction_destroy, rocksdb_transaction_get_snapshot,
        rocksdb_transaction_rollback,
    };
    use crate::transaction_db::tests::{
        copied, failure, get_for_update, ok, options, path_of, txn_get, txn_put,
    };
    use crate::transaction_options::{
        rocksdb_optimistictransaction_options_create,
        rocksdb_optimistictransaction_options_destroy,
        rocksdb_optimistictransaction_options_set_set_snapshot,
    };
    use std::path::Path;

    fn open(dir: &Path) -> (*mut rocksdb_optimistictransactiondb_t, *mut rocksdb_t) {
        let options = options();
        let path = path_of(dir);
        let db = ok(|err| rocksdb_optimistictransactiondb_open(options, path.as_ptr(), err));
        rocksdb_options_destroy(options);
        let base = rocksdb_optimistictransactiondb_get_base_db(db);
        assert!(!base.is_null());
        (db, base)
    }

    fn close(db: *mut rocksdb_optimistictransactiondb_t, base: *mut rocksdb_t) {
        rocksdb_optimistictransactiondb_close_base_db(base);
        rocksdb_optimistictransactiondb_close(db);
    }

    fn begin(
        db: *mut rocksdb_optimistictransactiondb_t,
        set_snapshot: bool,
    ) -> *mut rocksdb_transaction_t {
        let write_options = rocksdb_writeoptions_create();
        let options = rocksdb_optimistictransaction_options_create();
        rocksdb_optimistictransaction_options_set_set_snapshot(options, set_snapshot as u8);
        let txn =
            rocksdb_optimistictransaction_begin(db, write_options, options, std::ptr::null_mut());
        rocksdb_optimistictransaction_options_destroy(options);
        rocksdb_writeoptions_destroy(write_options);
        assert!(!txn.is_null());
        txn
    }

    fn put(base: *mut rocksdb_t, key: &str, value: &str) {
        let write_options = rocksdb_writeoptions_create();
        ok(|err| {
            crate::db::rocksdb_put(
                base,
                write_options,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                err,
            )
        });
        rocksdb_writeoptions_destroy(write_options);
    }

    fn get(base: *mut rocksdb_t, key: &str) -> Option<String> {
        let read_options = rocksdb_readoptions_create();
        let mut len = 0;
        let value = ok(|err| {
            crate::db::rocksdb_get(
                base,
                read_options,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                err,
            )
        });
        rocksdb_readoptions_destroy(read_options);
        copied(value, len)
    }

    #[test]
    fn a_base_handle_kept_does_not_keep_the_database_open() {
        let dir = tempfile::tempdir().unwrap();
        let (db, base) = open(dir.path());
        put(base, "k", "v");
        assert_eq!(rocksdb_optimistictransactiondb_get_base_db(db), base);
        // Closed without releasing the base handle: the database closes all the same.
        rocksdb_optimistictransactiondb_close(db);
        let (db, base) = open(dir.path());
        assert_eq!(get(base, "k").as_deref(), Some("v"));
        close(db, base);
    }

    #[test]
    fn concurrent_increments_retried_on_conflict_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (db, base) = open(dir.path());
        put(base, "counter", "0");
        let (threads, increments) = (4, 50);
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let db = crate::transaction_db::tests::Shared(db);
                std::thread::spawn(move || {
                    let db = db;
                    let mut conflicts = 0;
                    for _ in 0..increments {
                        loop {
                            let txn = begin(db.0, false);
                            let value: u64 = get_for_update(txn, "counter", true)
                                .unwrap()
                                .unwrap()
                                .parse()
                                .unwrap();
                            txn_put(txn, "counter", &(value + 1).to_string()).unwrap();
                            let outcome = crate::transaction_db::tests::attempt(|err| {
                                rocksdb_transaction_commit(txn, err)
                            });
                            rocksdb_transaction_destroy(txn);
                            match outcome {
                                Ok(()) => break,
                                Err(error) => {
                                    assert!(error.starts_with("Resource busy: "), "{error}");
                                    conflicts += 1;
                                }
                            }
                        }
                    }
                    conflicts
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        let expected = (threads * increments).to_string();
        assert_eq!(get(base, "counter").as_deref(), Some(expected.as_str()));
        close(db, base);
    }

    #[test]
    fn the_first_committer_wins() {
        let dir = tempfile::tempdir().unwrap();
        let (db, base) = open(dir.path());
        let (first, second) = (begin(db, false), begin(db, false));
        txn_put(first, "k", "1").unwrap();
        txn_put(second, "k", "2").unwrap();
        // Nothing is locked: both wrote; each reads its own write.
        assert_eq!(txn_get(first, "k").as_deref(), Some("1"));
        ok(|err| rocksdb_transaction_commit(second, err));
        let error = failure(|err| rocksdb_transaction_commit(first, err));
        assert!(error.starts_with("Resource busy: "), "{error}");
        assert_eq!(get(base, "k").as_deref(), Some("2"));
        // After a rollback the transaction starts over and commits.
        ok(|err| rocksdb_transaction_rollback(first, err));
        txn_put(first, "k", "3").unwrap();
        ok(|err| rocksdb_transaction_commit(first, err));
        assert_eq!(get(base, "k").as_deref(), Some("3"));
        rocksdb_transaction_destroy(first);
        rocksdb_transaction_destroy(second);
        close(db, base);
    }

    #[test]
    fn without_a_snapshot_conflicts_count_from_the_first_write() {
        let dir = tempfile::tempdir().unwrap();
        let (db, base) = open(dir.path());
        let txn = begin(db, false);
        // Committed before the transaction wrote anything: no conflict (RocksDB's too).
        put(base, "k", "before");
        txn_put(txn, "k", "mine").unwrap();
        ok(|err| rocksdb_transaction_commit(txn, err));
        assert_eq!(get(base, "k").as_deref(), Some("mine"));
        rocksdb_transaction_destroy(txn);
        close(db, base);
    }

    #[test]
    fn a_snapshot_makes_reads_for_update_conflict_at_commit() {
        // The rocksdb crate's transaction_snapshot test, optimistic half.
        let dir = tempfile::tempdir().unwrap();
        let (db, base) = open(dir.path());
        let txn = begin(db, true);
        put(base, "k2", "v2");
        // Reads see the latest data; the snapshot, handed out, does not.
        assert_eq!(txn_get(txn, "k2").as_deref(), Some("v2"));
        let snapshot = rocksdb_transaction_get_snapshot(txn);
        assert!(!snapshot.is_null());
        let read_options = rocksdb_readoptions_create();
        crate::read_write_options::rocksdb_readoptions_set_snapshot(read_options, snapshot);
        let mut len = 0;
        let value =
            ok(|err| crate::db::rocksdb_get(base, read_options, c"k2".as_ptr(), 2, &mut len, err));
        assert_eq!(copied(value, len), None);
        rocksdb_readoptions_destroy(read_options);
        // SAFETY: the handle is malloc()ed memory for `free`, as c.h says.
        unsafe { libc::free(snapshot.cast_mut().cast()) };
        assert_eq!(
            get_for_update(txn, "k2", true).unwrap().as_deref(),
            Some("v2")
        );
        let error = failure(|err| rocksdb_transaction_commit(txn, err));
        assert!(error.starts_with("Resource busy: "), "{error}");
        rocksdb_transaction_destroy(txn);
        // Without a snapshot, no snapshot is handed out.
        let txn = begin(db, false);
        assert!(rocksdb_transaction_get_snapshot(txn).is_null());
        rocksdb_transaction_destroy(txn);
        close(db, base);
    }

    #[test]
    fn an_iterator_merges_the_transactions_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (db, base) = open(dir.path());
        for key in ["a", "c", "e"] {
            put(base, key, "base");
        }
        let txn = begin(db, false);
        txn_put(txn, "b", "own").unwrap();
        txn_put(txn, "c", "own").unwrap();
        ok(|err| crate::transaction::rocksdb_transaction_delete(txn, c"e".as_ptr(), 1, err));
        let read_options = rocksdb_readoptions_create();
        let iterator = rocksdb_transaction_create_iterator(txn, read_options);
        // Written after the iterator was made: not seen by it.
        txn_put(txn, "d", "later").unwrap();
        let mut seen = Vec::new();
        crate::iterator::rocksdb_iter_seek_to_last(iterator);
        while crate::iterator::rocksdb_iter_valid(iterator) != 0 {
            let (mut klen, mut vlen) = (0, 0);
            let key = crate::iterator::rocksdb_iter_key(iterator, &mut klen);
            let value = crate::iterator::rocksdb_iter_value(iterator, &mut vlen);
            // SAFETY: slices valid until the iterator moves.
            let (key, value) = unsafe {
                (
                    std::slice::from_raw_parts(key.cast::<u8>(), klen).to_vec(),
                    std::slice::from_raw_parts(value.cast::<u8>(), vlen).to_vec(),
                )
            };
            seen.push((
                String::from_utf8(key).unwrap(),
                String::from_utf8(value).unwrap(),
            ));
            crate::iterator::rocksdb_iter_prev(iterator);
        }
        assert_eq!(
            seen,
            [("c", "own"), ("b", "own"), ("a", "base")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        crate::iterator::rocksdb_iter_destroy(iterator);
        rocksdb_readoptions_destroy(read_options);
        rocksdb_transaction_destroy(txn);
        close(db, base);
    }
}
