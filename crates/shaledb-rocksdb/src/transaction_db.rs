//! `rocksdb_transactiondb_t`: RocksDB's TransactionDB (pessimistic transactions) over a
//! ShaleDB database, and the `rocksdb_transactiondb_*` calls.
//!
//! A TransactionDB is a database (db.rs) with a lock table (lock_table.rs), a registry of its
//! named transactions, and its prepared transactions (prepared.rs), recovered at open. Reads,
//! iterators, snapshots, flushes, properties and checkpoints are the database's. Writes made
//! through it outside a transaction (put, delete, write) lock their keys for their duration,
//! as RocksDB's do: one waits for a transaction holding a key it writes, up to
//! `default_lock_timeout`.

use crate::args::{bytes, drop_handle, handle, into_handle, malloc, set_out, text};
use crate::batch::{rocksdb_writebatch_t, OpKind};
use crate::checkpoint::rocksdb_checkpoint_t;
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t, sync_if_asked, ColumnFamily, Database};
use crate::iterator::rocksdb_iterator_t;
use crate::lock_table::{LockTable, Request};
use crate::options::rocksdb_options_t;
use crate::prepared::{self, PREPARED_KVS};
use crate::read_write_options::{
    rocksdb_flushoptions_t, rocksdb_readoptions_t, rocksdb_writeoptions_t,
};
use crate::reads::rocksdb_pinnableslice_t;
use crate::snapshot::rocksdb_snapshot_t;
use crate::status::{call, quiet, Result, Status};
use crate::transaction::{begun, rocksdb_transaction_t, Txn};
use crate::transaction_options::{
    lock_wait, rocksdb_transaction_options_t, rocksdb_transactiondb_options_t,
};
use crate::write_set::check_key_value;
use engine::Kvs;
use libc::c_char;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

/// What a TransactionDB's transactions share.
pub(crate) struct TxnDbShared {
    pub database: Arc<Database>,
    pub locks: LockTable,
    pub options: rocksdb_transactiondb_options_t,
    /// Live named transactions, by name (names are unique among them).
    pub names: Mutex<HashMap<Vec<u8>, Weak<Mutex<Txn>>>>,
    /// Names of the prepared transactions recorded on media, live or not.
    pub recorded: Mutex<HashSet<Vec<u8>>>,
    /// Transactions recovered at open, held until `get_prepared_transactions` hands them out.
    recovered: Mutex<Vec<Arc<Mutex<Txn>>>>,
    /// The KVS of prepared transactions, once opened (it is created by the first prepare).
    prepared_kvs: Mutex<Option<Kvs>>,
}

impl TxnDbShared {
    pub fn prepared_kvs(&self) -> Result<Kvs> {
        let mut opened = self.prepared_kvs.lock();
        if let Some(kvs) = &*opened {
            return Ok(kvs.clone());
        }
        let kvs = self.database.engine.kvs(PREPARED_KVS)?;
        *opened = Some(kvs.clone());
        Ok(kvs)
    }

    /// Reads back the prepared transactions: each is live again, named, locking what it
    /// writes, until committed or rolled back.
    fn recover(self: &Arc<Self>) -> Result<()> {
        if !self
            .database
            .engine
            .list_kvs()?
            .iter()
            .any(|name| name == PREPARED_KVS)
        {
            return Ok(());
        }
        for record in prepared::load(&self.prepared_kvs()?)? {
            let name = record.name.clone();
            let txn = Arc::new(Mutex::new(Txn::recovered(self, record)?));
            self.names.lock().insert(name.clone(), Arc::downgrade(&txn));
            txn.lock().mark_registered();
            self.recorded.lock().insert(name);
            self.recovered.lock().push(txn);
        }
        Ok(())
    }
}

/// `rocksdb_transactiondb_t`.
#[repr(C)]
pub struct rocksdb_transactiondb_t {
    /// First, so that a pointer to the TransactionDB is one to its database too: RocksDB's
    /// TransactionDB is a DB, and the `rocksdb` crate hands one to `rocksdb_drop_column_family`.
    base: rocksdb_t,
    shared: Arc<TxnDbShared>,
}

/// The database of a TransactionDB handle (NULL stays NULL).
fn base(txn_db: *mut rocksdb_transactiondb_t) -> *mut rocksdb_t {
    txn_db.cast()
}

/// `db` as a TransactionDB with `options`, its prepared transactions recovered. On failure the
/// database closes.
fn with_transactions(
    db: rocksdb_t,
    options: &rocksdb_transactiondb_options_t,
) -> Result<rocksdb_transactiondb_t> {
    let shared = Arc::new(TxnDbShared {
        database: db.database.clone(),
        locks: LockTable::new(options.max_locks()),
        options: options.clone(),
        names: Mutex::new(HashMap::new()),
        recorded: Mutex::new(HashSet::new()),
        recovered: Mutex::new(Vec::new()),
        prepared_kvs: Mutex::new(None),
    });
    if let Err(status) = shared.recover() {
        // The transactions recovered so far hold the shared state: let them go.
        shared.recovered.lock().clear();
        drop(shared);
        crate::db::rocksdb_close(into_handle(db));
        return Err(status);
    }
    Ok(rocksdb_transactiondb_t { base: db, shared })
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_open(
    options: *const rocksdb_options_t,
    txn_db_options: *const rocksdb_transactiondb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_transactiondb_t {
    call(errptr, std::ptr::null_mut(), || {
        let txn_db_options = handle(txn_db_options, "transaction db options")?;
        let (db, _) =
            crate::db::open(handle(options, "options")?, text(name, "path")?, false, &[])?;
        Ok(into_handle(with_transactions(db, txn_db_options)?))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_open_column_families(
    options: *const rocksdb_options_t,
    txn_db_options: *const rocksdb_transactiondb_options_t,
    name: *const c_char,
    num_column_families: libc::c_int,
    column_family_names: *const *const c_char,
    column_family_options: *const *const rocksdb_options_t,
    column_family_handles: *mut *mut rocksdb_column_family_handle_t,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_transactiondb_t {
    call(errptr, std::ptr::null_mut(), || {
        let txn_db_options = handle(txn_db_options, "transaction db options")?;
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
        let db = *unsafe { Box::from_raw(db) };
        match with_transactions(db, txn_db_options) {
            Ok(txn_db) => Ok(into_handle(txn_db)),
            Err(status) => {
                // The handles the open gave out go with the database.
                for index in 0..usize::try_from(num_column_families).unwrap_or(0) {
                    // SAFETY: the open filled `num_column_families` slots of the array.
                    unsafe {
                        drop_handle(*column_family_handles.add(index));
                        *column_family_handles.add(index) = std::ptr::null_mut();
                    }
                }
                Err(status)
            }
        }
    })
}

/// Closes the TransactionDB. Recovered prepared transactions never handed out end here (their
/// records stay, for the next open); the database closes when the last transaction, iterator
/// or base handle using it is gone.
#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_close(txn_db: *mut rocksdb_transactiondb_t) {
    quiet((), || {
        if txn_db.is_null() {
            return;
        }
        // SAFETY: c.h hands the handle to close once, after its last use.
        let txn_db = *unsafe { Box::from_raw(txn_db) };
        let recovered = std::mem::take(&mut *txn_db.shared.recovered.lock());
        drop(recovered);
        drop(txn_db.shared);
        crate::db::rocksdb_close(into_handle(txn_db.base));
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_begin(
    txn_db: *mut rocksdb_transactiondb_t,
    write_options: *const rocksdb_writeoptions_t,
    txn_options: *const rocksdb_transaction_options_t,
    old_txn: *mut rocksdb_transaction_t,
) -> *mut rocksdb_transaction_t {
    quiet(std::ptr::null_mut(), || {
        let made = (|| {
            Txn::pessimistic(
                &handle(txn_db, "transaction db")?.shared,
                handle(write_options, "write options")?,
                handle(txn_options, "transaction options")?,
            )
        })();
        match made {
            Ok(txn) => begun(txn, old_txn),
            Err(status) => {
                // c.h has no error to report here.
                eprintln!("shaledb-rocksdb: rocksdb_transaction_begin failed: {status}");
                std::ptr::null_mut()
            }
        }
    })
}

/// Every prepared transaction, live or recovered at open, in name order: a malloc()ed array
/// (NULL when there are none) of new handles, each for `rocksdb_transaction_destroy`.
#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_get_prepared_transactions(
    txn_db: *mut rocksdb_transactiondb_t,
    cnt: *mut usize,
) -> *mut *mut rocksdb_transaction_t {
    quiet(std::ptr::null_mut(), || {
        set_out(cnt, 0);
        let Ok(txn_db) = handle(txn_db, "transaction db") else {
            return std::ptr::null_mut();
        };
        let shared = &txn_db.shared;
        // The recovered transactions pass to the handles made here.
        let held = std::mem::take(&mut *shared.recovered.lock());
        let mut named: Vec<(Vec<u8>, Weak<Mutex<Txn>>)> = shared
            .names
            .lock()
            .iter()
            .map(|(name, txn)| (name.clone(), txn.clone()))
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let prepared: Vec<Arc<Mutex<Txn>>> = named
            .into_iter()
            .filter_map(|(_, txn)| txn.upgrade())
            .filter(|txn| txn.lock().is_prepared())
            .collect();
        drop(held);
        if prepared.is_empty() {
            return std::ptr::null_mut();
        }
        set_out(cnt, prepared.len());
        let array = malloc(prepared.len() * size_of::<*mut rocksdb_transaction_t>())
            .cast::<*mut rocksdb_transaction_t>();
        for (index, txn) in prepared.into_iter().enumerate() {
            // SAFETY: `array` has room for `prepared.len()` pointers.
            unsafe { *array.add(index) = into_handle(rocksdb_transaction_t { txn }) };
        }
        array
    })
}

/// Runs `write` with exclusive locks on `keys` (taken in order, so two such writes cannot
/// deadlock each other), waiting up to `default_lock_timeout` for each.
fn locked_write(
    txn_db: &rocksdb_transactiondb_t,
    mut keys: Vec<(ColumnFamily, Vec<u8>)>,
    write: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let shared = &txn_db.shared;
    keys.sort_by(|a, b| (a.0.id, &a.1).cmp(&(b.0.id, &b.1)));
    keys.dedup_by(|a, b| a.0.id == b.0.id && a.1 == b.1);
    let id = shared.locks.next_id();
    let wait = lock_wait(shared.options.default_lock_timeout());
    let mut taken: Vec<(u32, &[u8])> = Vec::with_capacity(keys.len());
    for (cf, key) in &keys {
        let request = Request {
            txn: id,
            cf: cf.id,
            cf_name: &cf.name,
            key,
            exclusive: true,
            wait,
            deadlock_depth: None,
        };
        if let Err(status) = shared.locks.lock(&request) {
            shared.locks.unlock(id, taken);
            return Err(status);
        }
        taken.push((cf.id, key));
    }
    let outcome = write();
    shared.locks.unlock(id, taken);
    outcome
}

fn put_or_delete(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_writeoptions_t,
    cf: *const rocksdb_column_family_handle_t,
    key: (*const c_char, usize),
    value: Option<(*const c_char, usize)>,
) -> Result<()> {
    let txn_db = handle(txn_db, "transaction db")?;
    let options = handle(options, "write options")?;
    let cf = txn_db.base.column_family(cf)?.clone();
    let key = bytes(key.0, key.1)?;
    let value = value.map(|(value, len)| bytes(value, len)).transpose()?;
    check_key_value(key, value)?;
    locked_write(txn_db, vec![(cf.clone(), key.to_vec())], || {
        match value {
            Some(value) => cf.kvs.put(key, value)?,
            None => cf.kvs.delete(key)?,
        }
        sync_if_asked(&txn_db.base, options)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_put(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_writeoptions_t,
    key: *const c_char,
    klen: usize,
    val: *const c_char,
    vlen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        put_or_delete(
            txn_db,
            options,
            std::ptr::null(),
            (key, klen),
            Some((val, vlen)),
        )
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_put_cf(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_writeoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    val: *const c_char,
    vallen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        put_or_delete(
            txn_db,
            options,
            column_family,
            (key, keylen),
            Some((val, vallen)),
        )
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_delete(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_writeoptions_t,
    key: *const c_char,
    klen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        put_or_delete(txn_db, options, std::ptr::null(), (key, klen), None)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_delete_cf(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_writeoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        put_or_delete(txn_db, options, column_family, (key, keylen), None)
    })
}

/// Writes `batch` atomically with its keys locked. A range deletion cannot be locked key by
/// key and fails, as in RocksDB's TransactionDB; a merge fails (ShaleDB has no merge operators).
#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_write(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_writeoptions_t,
    batch: *mut rocksdb_writebatch_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let txn_db = handle(txn_db, "transaction db")?;
        let options = handle(options, "write options")?;
        let batch = handle(batch, "write batch")?;
        if let Some(error) = &batch.error {
            return Err(error.clone());
        }
        let mut keys = Vec::with_capacity(batch.ops.len());
        {
            let column_families = txn_db.base.database.column_families();
            for op in &batch.ops {
                match op.kind {
                    OpKind::Put | OpKind::Delete | OpKind::SingleDelete => {}
                    OpKind::Merge => return Err(Status::not_supported("merge operators")),
                    OpKind::DeleteRange => {
                        return Err(Status::invalid(
                            "DeleteRangeCF not implemented: a TransactionDB cannot lock a range",
                        ))
                    }
                    OpKind::LogData => continue,
                }
                let cf = column_families.get(&op.cf).ok_or_else(|| {
                    Status::invalid(format!(
                        "Invalid column family specified in write batch: {}",
                        op.cf
                    ))
                })?;
                keys.push((cf.clone(), op.key.clone()));
            }
        }
        locked_write(txn_db, keys, || {
            crate::batch::apply(&txn_db.base.database, batch)?;
            sync_if_asked(&txn_db.base, options)
        })
    })
}

/// Merge: ShaleDB has no merge operators; the call fails, naming them.
#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_merge(
    txn_db: *mut rocksdb_transactiondb_t,
    _options: *const rocksdb_writeoptions_t,
    _key: *const c_char,
    _klen: usize,
    _val: *const c_char,
    _vlen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(txn_db, "transaction db")?;
        Err(Status::not_supported("merge operators"))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_merge_cf(
    txn_db: *mut rocksdb_transactiondb_t,
    _options: *const rocksdb_writeoptions_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _key: *const c_char,
    _klen: usize,
    _val: *const c_char,
    _vlen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(txn_db, "transaction db")?;
        Err(Status::not_supported("merge operators"))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_create_column_family(
    txn_db: *mut rocksdb_transactiondb_t,
    column_family_options: *const rocksdb_options_t,
    column_family_name: *const c_char,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_column_family_handle_t {
    crate::db::rocksdb_create_column_family(
        base(txn_db),
        column_family_options,
        column_family_name,
        errptr,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_create_snapshot(
    txn_db: *mut rocksdb_transactiondb_t,
) -> *const rocksdb_snapshot_t {
    crate::snapshot::rocksdb_create_snapshot(base(txn_db))
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_release_snapshot(
    txn_db: *mut rocksdb_transactiondb_t,
    snapshot: *const rocksdb_snapshot_t,
) {
    crate::snapshot::rocksdb_release_snapshot(base(txn_db), snapshot)
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_property_value(
    txn_db: *mut rocksdb_transactiondb_t,
    propname: *const c_char,
) -> *mut c_char {
    crate::properties::rocksdb_property_value(base(txn_db), propname)
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_property_int(
    txn_db: *mut rocksdb_transactiondb_t,
    propname: *const c_char,
    out_val: *mut u64,
) -> libc::c_int {
    crate::properties::rocksdb_property_int(base(txn_db), propname, out_val)
}

/// A handle on the database under the TransactionDB (writes through it take no locks, as in
/// RocksDB), for `rocksdb_transactiondb_close_base_db`.
#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_get_base_db(
    txn_db: *mut rocksdb_transactiondb_t,
) -> *mut rocksdb_t {
    quiet(std::ptr::null_mut(), || {
        handle(txn_db, "transaction db").map_or(std::ptr::null_mut(), |txn_db| {
            into_handle(rocksdb_t {
                database: txn_db.base.database.clone(),
            })
        })
    })
}

/// Releases a handle from `rocksdb_transactiondb_get_base_db`; the database stays open.
#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_close_base_db(base_db: *mut rocksdb_t) {
    quiet((), || drop_handle(base_db))
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_get(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    klen: usize,
    vlen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    crate::db::rocksdb_get(base(txn_db), options, key, klen, vlen, errptr)
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_get_cf(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    vallen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    crate::db::rocksdb_get_cf(
        base(txn_db),
        options,
        column_family,
        key,
        keylen,
        vallen,
        errptr,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_get_pinned(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    klen: usize,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_pinnableslice_t {
    crate::reads::rocksdb_get_pinned(base(txn_db), options, key, klen, errptr)
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_get_pinned_cf(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_pinnableslice_t {
    crate::reads::rocksdb_get_pinned_cf(base(txn_db), options, column_family, key, keylen, errptr)
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_multi_get(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_readoptions_t,
    num_keys: usize,
    keys_list: *const *const c_char,
    keys_list_sizes: *const usize,
    values_list: *mut *mut c_char,
    values_list_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    crate::reads::rocksdb_multi_get(
        base(txn_db),
        options,
        num_keys,
        keys_list,
        keys_list_sizes,
        values_list,
        values_list_sizes,
        errs,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_multi_get_cf(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_readoptions_t,
    column_families: *const *const rocksdb_column_family_handle_t,
    num_keys: usize,
    keys_list: *const *const c_char,
    keys_list_sizes: *const usize,
    values_list: *mut *mut c_char,
    values_list_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    crate::reads::rocksdb_multi_get_cf(
        base(txn_db),
        options,
        column_families,
        num_keys,
        keys_list,
        keys_list_sizes,
        values_list,
        values_list_sizes,
        errs,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_create_iterator(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_readoptions_t,
) -> *mut rocksdb_iterator_t {
    crate::iterator::rocksdb_create_iterator(base(txn_db), options)
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_create_iterator_cf(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
) -> *mut rocksdb_iterator_t {
    crate::iterator::rocksdb_create_iterator_cf(base(txn_db), options, column_family)
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_flush(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_flushoptions_t,
    errptr: *mut *mut c_char,
) {
    crate::maintenance::rocksdb_flush(base(txn_db), options, errptr)
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_flush_cf(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_flushoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    errptr: *mut *mut c_char,
) {
    crate::maintenance::rocksdb_flush_cf(base(txn_db), options, column_family, errptr)
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_flush_cfs(
    txn_db: *mut rocksdb_transactiondb_t,
    options: *const rocksdb_flushoptions_t,
    column_families: *mut *mut rocksdb_column_family_handle_t,
    num_column_families: libc::c_int,
    errptr: *mut *mut c_char,
) {
    crate::maintenance::rocksdb_flush_cfs(
        base(txn_db),
        options,
        column_families,
        num_column_families,
        errptr,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_flush_wal(
    txn_db: *mut rocksdb_transactiondb_t,
    sync: libc::c_uchar,
    errptr: *mut *mut c_char,
) {
    crate::maintenance::rocksdb_flush_wal(base(txn_db), sync, errptr)
}

/// A checkpoint of the database. Its copy holds the prepared transactions' records too, so a
/// TransactionDB opened on it recovers them, as RocksDB's checkpoint keeps its WAL.
#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_checkpoint_object_create(
    txn_db: *mut rocksdb_transactiondb_t,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_checkpoint_t {
    crate::checkpoint::rocksdb_checkpoint_object_create(base(txn_db), errptr)
}
