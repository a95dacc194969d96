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
use crate::plugins::Feature;
use crate::prepared::{self, PREPARED_KVS};
use crate::read_write_options::{
    rocksdb_flushoptions_t, rocksdb_readoptions_t, rocksdb_writeoptions_t,
};
use crate::reads::rocksdb_pinnableslice_t;
use crate::snapshot::rocksdb_snapshot_t;
use crate::status::{call, logged, quiet, Result, Status};
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
    logged("rocksdb_transaction_begin", std::ptr::null_mut(), || {
        let txn = Txn::pessimistic(
            &handle(txn_db, "transaction db")?.shared,
            handle(write_options, "write options")?,
            handle(txn_options, "transaction options")?,
        )?;
        Ok(begun(txn, old_txn))
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
                    OpKind::Merge => return Err(Feature::MergeOperator.refused()),
                    OpKind::DeleteRange => {
                        return Err(Status::invalid(
                            "DeleteRangeCF not implemented: a TransactionDB cannot lock a range",
                        ))
                    }
                    OpKind::LogData => continue,
                }
                let cf = crate::db::numbered(&column_families, op.cf)?;
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
        Err(Feature::MergeOperator.refused())
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
        Err(Feature::MergeOperator.refused())
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

/// The database under the TransactionDB (writes through it take no locks, as in RocksDB). As
/// RocksDB's, it belongs to the TransactionDB: valid until the TransactionDB is closed, and
/// keeping it does not keep the database open (the `rocksdb` crate never releases the one it
/// takes for memory usage).
#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_get_base_db(
    txn_db: *mut rocksdb_transactiondb_t,
) -> *mut rocksdb_t {
    base(txn_db)
}

/// Releases a handle from `rocksdb_transactiondb_get_base_db`: the TransactionDB's own, so
/// there is nothing to free; the database stays open.
#[no_mangle]
pub extern "C" fn rocksdb_transactiondb_close_base_db(_base_db: *mut rocksdb_t) {}

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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::options::{rocksdb_options_create, rocksdb_options_destroy};
    use crate::read_write_options::{
        rocksdb_readoptions_create, rocksdb_readoptions_destroy, rocksdb_writeoptions_create,
        rocksdb_writeoptions_destroy,
    };
    use crate::transaction::*;
    use crate::transaction_options::*;
    use std::ffi::{CStr, CString};
    use std::path::Path;
    use std::time::{Duration, Instant};

    /// A pointer moved to another thread (the C API's objects are used from one at a time).
    pub(crate) struct Shared<T>(pub *mut T);
    // SAFETY: the tests hand each object to one thread at a time.
    unsafe impl<T> Send for Shared<T> {}

    /// The error a call left in `err`, freed.
    pub(crate) fn take(err: &mut *mut c_char) -> Option<String> {
        if err.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated message the library malloc()ed, freed once here.
        let text = unsafe { CStr::from_ptr(*err) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: as above.
        unsafe { libc::free(err.cast()) };
        *err = std::ptr::null_mut();
        Some(text)
    }

    /// `body(errptr)`'s outcome: Ok, or the error it reported.
    pub(crate) fn attempt<T>(
        body: impl FnOnce(*mut *mut c_char) -> T,
    ) -> std::result::Result<T, String> {
        let mut err = std::ptr::null_mut();
        let value = body(&mut err);
        match take(&mut err) {
            Some(error) => Err(error),
            None => Ok(value),
        }
    }

    pub(crate) fn ok<T>(body: impl FnOnce(*mut *mut c_char) -> T) -> T {
        attempt(body).unwrap_or_else(|error| panic!("unexpected error: {error}"))
    }

    pub(crate) fn failure<T>(body: impl FnOnce(*mut *mut c_char) -> T) -> String {
        match attempt(body) {
            Ok(_) => panic!("expected an error"),
            Err(error) => error,
        }
    }

    pub(crate) fn options() -> *mut rocksdb_options_t {
        let options = rocksdb_options_create();
        crate::options::rocksdb_options_set_create_if_missing(options, 1);
        options
    }

    pub(crate) fn path_of(dir: &Path) -> CString {
        CString::new(dir.to_str().unwrap()).unwrap()
    }

    /// A TransactionDB at `dir` whose options `configure` sets.
    fn open_with(
        dir: &Path,
        configure: impl FnOnce(*mut rocksdb_transactiondb_options_t),
    ) -> std::result::Result<*mut rocksdb_transactiondb_t, String> {
        let options = options();
        let db_options = rocksdb_transactiondb_options_create();
        configure(db_options);
        let path = path_of(dir);
        let db = attempt(|err| rocksdb_transactiondb_open(options, db_options, path.as_ptr(), err));
        rocksdb_transactiondb_options_destroy(db_options);
        rocksdb_options_destroy(options);
        db
    }

    fn open(dir: &Path) -> *mut rocksdb_transactiondb_t {
        open_with(dir, |options| {
            rocksdb_transactiondb_options_set_transaction_lock_timeout(options, 10);
            rocksdb_transactiondb_options_set_default_lock_timeout(options, 10);
        })
        .unwrap()
    }

    fn begin_with(
        db: *mut rocksdb_transactiondb_t,
        configure: impl FnOnce(*mut rocksdb_transaction_options_t),
    ) -> *mut rocksdb_transaction_t {
        let write_options = rocksdb_writeoptions_create();
        let options = rocksdb_transaction_options_create();
        configure(options);
        let txn = rocksdb_transaction_begin(db, write_options, options, std::ptr::null_mut());
        rocksdb_transaction_options_destroy(options);
        rocksdb_writeoptions_destroy(write_options);
        assert!(!txn.is_null());
        txn
    }

    fn begin(db: *mut rocksdb_transactiondb_t) -> *mut rocksdb_transaction_t {
        begin_with(db, |_| {})
    }

    pub(crate) fn txn_put(
        txn: *mut rocksdb_transaction_t,
        key: &str,
        value: &str,
    ) -> std::result::Result<(), String> {
        attempt(|err| {
            rocksdb_transaction_put(
                txn,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                err,
            )
        })
    }

    fn db_put(
        db: *mut rocksdb_transactiondb_t,
        key: &str,
        value: &str,
    ) -> std::result::Result<(), String> {
        let write_options = rocksdb_writeoptions_create();
        let outcome = attempt(|err| {
            rocksdb_transactiondb_put(
                db,
                write_options,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                err,
            )
        });
        rocksdb_writeoptions_destroy(write_options);
        outcome
    }

    fn db_get(db: *mut rocksdb_transactiondb_t, key: &str) -> Option<String> {
        let read_options = rocksdb_readoptions_create();
        let mut len = 0;
        let value = ok(|err| {
            rocksdb_transactiondb_get(
                db,
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

    /// A malloc()ed value as a string, freed.
    pub(crate) fn copied(value: *mut c_char, len: usize) -> Option<String> {
        if value.is_null() {
            return None;
        }
        // SAFETY: `len` bytes the library malloc()ed, freed once here.
        let text = String::from_utf8(
            unsafe { std::slice::from_raw_parts(value.cast::<u8>(), len) }.to_vec(),
        )
        .unwrap();
        // SAFETY: as above.
        unsafe { libc::free(value.cast()) };
        Some(text)
    }

    pub(crate) fn txn_get(txn: *mut rocksdb_transaction_t, key: &str) -> Option<String> {
        let read_options = rocksdb_readoptions_create();
        let mut len = 0;
        let value = ok(|err| {
            rocksdb_transaction_get(
                txn,
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

    pub(crate) fn get_for_update(
        txn: *mut rocksdb_transaction_t,
        key: &str,
        exclusive: bool,
    ) -> std::result::Result<Option<String>, String> {
        let read_options = rocksdb_readoptions_create();
        let mut len = 0;
        let value = attempt(|err| {
            rocksdb_transaction_get_for_update(
                txn,
                read_options,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                exclusive as u8,
                err,
            )
        });
        rocksdb_readoptions_destroy(read_options);
        value.map(|value| copied(value, len))
    }

    fn name(txn: *mut rocksdb_transaction_t, name: &str) -> std::result::Result<(), String> {
        attempt(|err| rocksdb_transaction_set_name(txn, name.as_ptr().cast(), name.len(), err))
    }

    fn prepared(db: *mut rocksdb_transactiondb_t) -> Vec<*mut rocksdb_transaction_t> {
        let mut count = 0;
        let array = rocksdb_transactiondb_get_prepared_transactions(db, &mut count);
        if array.is_null() {
            assert_eq!(count, 0);
            return Vec::new();
        }
        // SAFETY: `count` handles in a malloc()ed array, freed once here.
        let handles = unsafe { std::slice::from_raw_parts(array, count) }.to_vec();
        // SAFETY: as above.
        unsafe { libc::free(array.cast()) };
        handles
    }

    #[test]
    fn a_commit_without_prepare_fails_when_the_options_ask_for_two_phases() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let txn = begin_with(db, |options| {
            rocksdb_transaction_options_set_skip_prepare(options, 0)
        });
        txn_put(txn, "k", "v").unwrap();
        let error = failure(|err| rocksdb_transaction_commit(txn, err));
        assert!(
            error.starts_with("Invalid argument: Txn not prepared"),
            "{error}"
        );
        let error = failure(|err| rocksdb_transaction_prepare(txn, err));
        assert!(error.contains("not been named"), "{error}");
        name(txn, "x").unwrap();
        assert!(name(txn, "y").unwrap_err().contains("already been named"));
        ok(|err| rocksdb_transaction_prepare(txn, err));
        let error = failure(|err| rocksdb_transaction_prepare(txn, err));
        assert!(error.contains("already been prepared"), "{error}");
        ok(|err| rocksdb_transaction_commit(txn, err));
        assert_eq!(db_get(db, "k").as_deref(), Some("v"));
        let error = failure(|err| rocksdb_transaction_rollback(txn, err));
        assert!(error.contains("already been committed"), "{error}");
        // A name too long, and an empty one.
        let other = begin(db);
        assert!(name(other, &"n".repeat(513))
            .unwrap_err()
            .contains("between 1 and 512"));
        assert!(name(other, "").is_err());
        rocksdb_transaction_destroy(other);
        rocksdb_transaction_destroy(txn);
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn a_base_handle_kept_does_not_keep_the_database_open() {
        // The rocksdb crate's memory usage builder takes one and never releases it.
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let base_db = rocksdb_transactiondb_get_base_db(db);
        let write_options = rocksdb_writeoptions_create();
        ok(|err| {
            crate::db::rocksdb_put(
                base_db,
                write_options,
                c"k".as_ptr(),
                1,
                c"v".as_ptr(),
                1,
                err,
            )
        });
        rocksdb_writeoptions_destroy(write_options);
        rocksdb_transactiondb_close(db);
        let db = open(dir.path());
        assert_eq!(db_get(db, "k").as_deref(), Some("v"));
        rocksdb_transactiondb_close_base_db(rocksdb_transactiondb_get_base_db(db));
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn a_column_family_dropped_under_a_transaction_fails_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let options = options();
        let a =
            ok(|err| rocksdb_transactiondb_create_column_family(db, options, c"a".as_ptr(), err));
        let txn = begin(db);
        ok(|err| rocksdb_transaction_put_cf(txn, a, c"k".as_ptr(), 1, c"v".as_ptr(), 1, err));
        // The rocksdb crate drops a TransactionDB's column family through it as a DB.
        ok(|err| crate::db::rocksdb_drop_column_family(db.cast(), a, err));
        // A new column family may get the dropped one's number: it is not written instead.
        let b =
            ok(|err| rocksdb_transactiondb_create_column_family(db, options, c"b".as_ptr(), err));
        assert_eq!(
            crate::db::rocksdb_column_family_handle_get_id(a),
            crate::db::rocksdb_column_family_handle_get_id(b)
        );
        let error = failure(|err| rocksdb_transaction_commit(txn, err));
        assert!(error.starts_with("Invalid argument: "), "{error}");
        let read_options = rocksdb_readoptions_create();
        let mut len = 0;
        let value = ok(|err| {
            rocksdb_transactiondb_get_cf(db, read_options, b, c"k".as_ptr(), 1, &mut len, err)
        });
        assert_eq!(copied(value, len), None);
        rocksdb_readoptions_destroy(read_options);
        ok(|err| rocksdb_transaction_rollback(txn, err));
        rocksdb_transaction_destroy(txn);
        crate::db::rocksdb_column_family_handle_destroy(a);
        crate::db::rocksdb_column_family_handle_destroy(b);
        rocksdb_options_destroy(options);
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn a_write_outside_transactions_waits_for_the_lock_it_needs() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_with(dir.path(), |options| {
            rocksdb_transactiondb_options_set_default_lock_timeout(options, 10_000);
        })
        .unwrap();
        let txn = begin(db);
        txn_put(txn, "k", "from the transaction").unwrap();
        let writer = {
            let db = Shared(db);
            std::thread::spawn(move || {
                let db = db;
                let start = Instant::now();
                db_put(db.0, "k", "direct").map(|()| start.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        ok(|err| rocksdb_transaction_commit(txn, err));
        let waited = writer.join().unwrap().unwrap();
        assert!(waited >= Duration::from_millis(90), "{waited:?}");
        assert_eq!(db_get(db, "k").as_deref(), Some("direct"));
        rocksdb_transaction_destroy(txn);
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn concurrent_increments_under_get_for_update_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_with(dir.path(), |options| {
            rocksdb_transactiondb_options_set_transaction_lock_timeout(options, 10_000);
        })
        .unwrap();
        db_put(db, "counter", "0").unwrap();
        let (threads, increments) = (4, 50);
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let db = Shared(db);
                std::thread::spawn(move || {
                    let db = db;
                    for _ in 0..increments {
                        let txn = begin(db.0);
                        let value: u64 = get_for_update(txn, "counter", true)
                            .unwrap()
                            .unwrap()
                            .parse()
                            .unwrap();
                        txn_put(txn, "counter", &(value + 1).to_string()).unwrap();
                        ok(|err| rocksdb_transaction_commit(txn, err));
                        rocksdb_transaction_destroy(txn);
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        let expected = (threads * increments).to_string();
        assert_eq!(db_get(db, "counter").as_deref(), Some(expected.as_str()));
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn shared_locks_admit_readers_and_keep_writers_out() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db_put(db, "k", "v").unwrap();
        let (first, second, writer) = (begin(db), begin(db), begin(db));
        assert_eq!(
            get_for_update(first, "k", false).unwrap().as_deref(),
            Some("v")
        );
        assert_eq!(
            get_for_update(second, "k", false).unwrap().as_deref(),
            Some("v")
        );
        assert!(txn_put(writer, "k", "w")
            .unwrap_err()
            .starts_with("Operation timed out"));
        // An upgrade waits for the other reader.
        assert!(txn_put(first, "k", "w")
            .unwrap_err()
            .starts_with("Operation timed out"));
        ok(|err| rocksdb_transaction_rollback(second, err));
        txn_put(first, "k", "mine").unwrap();
        ok(|err| rocksdb_transaction_commit(first, err));
        assert_eq!(db_get(db, "k").as_deref(), Some("mine"));
        for txn in [first, second, writer] {
            rocksdb_transaction_destroy(txn);
        }
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn a_save_point_releases_the_locks_taken_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let txn = begin(db);
        txn_put(txn, "a", "1").unwrap();
        rocksdb_transaction_set_savepoint(txn);
        txn_put(txn, "b", "2").unwrap();
        txn_put(txn, "a", "again").unwrap();
        ok(|err| rocksdb_transaction_rollback_to_savepoint(txn, err));
        db_put(db, "b", "free").unwrap();
        assert!(db_put(db, "a", "held")
            .unwrap_err()
            .starts_with("Operation timed out"));
        assert_eq!(txn_get(txn, "a").as_deref(), Some("1"));
        // A rollback releases every lock.
        ok(|err| rocksdb_transaction_rollback(txn, err));
        db_put(db, "a", "free").unwrap();
        rocksdb_transaction_destroy(txn);
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn an_expired_transaction_loses_its_locks_and_cannot_commit() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let expiring = begin_with(db, |options| {
            rocksdb_transaction_options_set_expiration(options, 50)
        });
        let patient = begin_with(db, |options| {
            rocksdb_transaction_options_set_lock_timeout(options, 5_000)
        });
        txn_put(expiring, "k", "late").unwrap();
        let start = Instant::now();
        txn_put(patient, "k", "taken").unwrap();
        assert!(start.elapsed() >= Duration::from_millis(30));
        let error = failure(|err| rocksdb_transaction_commit(expiring, err));
        assert!(error.starts_with("Operation expired: "), "{error}");
        ok(|err| rocksdb_transaction_commit(patient, err));
        assert_eq!(db_get(db, "k").as_deref(), Some("taken"));
        rocksdb_transaction_destroy(expiring);
        rocksdb_transaction_destroy(patient);
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn a_deadlock_is_detected_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let detecting = |options| {
            rocksdb_transaction_options_set_deadlock_detect(options, 1);
            rocksdb_transaction_options_set_lock_timeout(options, 5_000);
        };
        let (first, second) = (begin_with(db, detecting), begin_with(db, detecting));
        txn_put(first, "a", "1").unwrap();
        txn_put(second, "b", "2").unwrap();
        let waiter = {
            let first = Shared(first);
            std::thread::spawn(move || {
                let first = first;
                txn_put(first.0, "b", "1")
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        let error = txn_put(second, "a", "2").unwrap_err();
        assert!(error.starts_with("Resource busy: Deadlock"), "{error}");
        ok(|err| rocksdb_transaction_rollback(second, err));
        waiter.join().unwrap().unwrap();
        ok(|err| rocksdb_transaction_commit(first, err));
        rocksdb_transaction_destroy(first);
        rocksdb_transaction_destroy(second);
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn the_write_set_is_bounded_by_max_write_batch_size() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let txn = begin_with(db, |options| {
            rocksdb_transaction_options_set_max_write_batch_size(options, 40)
        });
        txn_put(txn, "k1", "0123456789").unwrap();
        let error = txn_put(txn, "k2", "0123456789").unwrap_err();
        assert!(
            error.starts_with("Operation aborted: Memory limit reached"),
            "{error}"
        );
        ok(|err| rocksdb_transaction_commit(txn, err));
        assert_eq!(db_get(db, "k1").as_deref(), Some("0123456789"));
        assert_eq!(db_get(db, "k2"), None);
        rocksdb_transaction_destroy(txn);
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn a_write_batch_is_rebuilt_into_the_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db_put(db, "gone", "x").unwrap();
        let txn = begin(db);
        let batch = crate::batch::rocksdb_writebatch_create();
        crate::batch::rocksdb_writebatch_put(batch, c"k".as_ptr(), 1, c"v".as_ptr(), 1);
        crate::batch::rocksdb_writebatch_delete(batch, c"gone".as_ptr(), 4);
        ok(|err| rocksdb_transaction_rebuild_from_writebatch(txn, batch, err));
        assert_eq!(txn_get(txn, "k").as_deref(), Some("v"));
        assert_eq!(txn_get(txn, "gone"), None);
        // What it wrote is locked.
        assert!(db_put(db, "k", "other").is_err());
        crate::batch::rocksdb_writebatch_merge(batch, c"m".as_ptr(), 1, c"1".as_ptr(), 1);
        let error = failure(|err| rocksdb_transaction_rebuild_from_writebatch(txn, batch, err));
        assert!(
            error.starts_with("Not implemented: merge operators"),
            "{error}"
        );
        crate::batch::rocksdb_writebatch_destroy(batch);
        ok(|err| rocksdb_transaction_commit(txn, err));
        assert_eq!(db_get(db, "k").as_deref(), Some("v"));
        assert_eq!(db_get(db, "gone"), None);
        rocksdb_transaction_destroy(txn);
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn a_snapshot_validates_writes_and_reads_for_update() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db_put(db, "old", "0").unwrap();
        let txn = begin_with(db, |options| {
            rocksdb_transaction_options_set_set_snapshot(options, 1)
        });
        db_put(db, "k", "later").unwrap();
        // A plain read sees the latest value; locking it finds it changed.
        assert_eq!(txn_get(txn, "k").as_deref(), Some("later"));
        let error = get_for_update(txn, "k", true).unwrap_err();
        assert!(error.starts_with("Resource busy: "), "{error}");
        assert!(txn_put(txn, "k", "x")
            .unwrap_err()
            .starts_with("Resource busy: "));
        // Keys unchanged since the snapshot lock as usual.
        assert_eq!(
            get_for_update(txn, "old", true).unwrap().as_deref(),
            Some("0")
        );
        txn_put(txn, "new", "1").unwrap();
        ok(|err| rocksdb_transaction_commit(txn, err));
        assert_eq!(db_get(db, "new").as_deref(), Some("1"));
        rocksdb_transaction_destroy(txn);
        rocksdb_transactiondb_close(db);
    }

    /// Prepares transaction `name` writing `key` = `value`, then drops its handle (the record
    /// stays) and closes the database.
    fn prepare_and_close(dir: &Path, name_: &str, key: &str, value: &str) {
        let db = open(dir);
        let txn = begin(db);
        name(txn, name_).unwrap();
        txn_put(txn, key, value).unwrap();
        ok(|err| rocksdb_transaction_prepare(txn, err));
        rocksdb_transaction_destroy(txn);
        // Its name stays taken while its record is there.
        let other = begin(db);
        let error = name(other, name_).unwrap_err();
        assert!(
            error.starts_with("Invalid argument: Duplicate txn name"),
            "{error}"
        );
        rocksdb_transaction_destroy(other);
        rocksdb_transactiondb_close(db);
    }

    /// Runs `change` on the KVS of prepared transactions, with the database closed.
    fn with_records(dir: &Path, change: impl FnOnce(&engine::Kvs)) {
        let engine = engine::Db::open(
            dir,
            engine::Options {
                create_if_missing: false,
                cache_bytes: 0,
                ..engine::Options::default()
            },
        )
        .unwrap();
        change(&engine.kvs(PREPARED_KVS).unwrap());
        engine.close().unwrap();
    }

    #[test]
    fn a_damaged_prepared_record_fails_the_open_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        prepare_and_close(dir.path(), "t1", "k", "v");
        let mut header = Vec::new();
        with_records(dir.path(), |kvs| {
            let key = [&[0, 2][..], b"t1", &[0, 0, 0, 0]].concat();
            header = kvs.get(&key).unwrap().unwrap().to_vec();
            let mut damaged = header.clone();
            *damaged.last_mut().unwrap() ^= 1; // the payload's checksum
            kvs.put(&key, damaged).unwrap();
        });
        let error = open_with(dir.path(), |_| {}).unwrap_err();
        assert!(
            error.starts_with("Corruption: prepared transaction \"t1\"")
                && error.contains("checksum mismatch"),
            "{error}"
        );
        // An entry missing.
        with_records(dir.path(), |kvs| {
            let key = [&[0, 2][..], b"t1", &[0, 0, 0, 0]].concat();
            kvs.put(&key, &header).unwrap();
            kvs.delete([&[0, 2][..], b"t1", &[0, 0, 0, 1]].concat())
                .unwrap();
        });
        let error = open_with(dir.path(), |_| {}).unwrap_err();
        assert!(
            error.starts_with("Corruption: prepared transaction \"t1\"")
                && error.contains("payload entries"),
            "{error}"
        );
        // A key that is no record's.
        with_records(dir.path(), |kvs| kvs.put("stray", "x").unwrap());
        let error = open_with(dir.path(), |_| {}).unwrap_err();
        assert!(error.contains("malformed key"), "{error}");
        // The failed opens left the database closed and whole: with the record gone, it opens.
        with_records(dir.path(), |kvs| {
            kvs.delete("stray").unwrap();
            kvs.prefix_delete([&[0, 2][..], b"t1"].concat()).unwrap();
        });
        let db = open(dir.path());
        assert!(prepared(db).is_empty());
        assert_eq!(db_get(db, "k"), None);
        rocksdb_transactiondb_close(db);
    }

    #[test]
    fn damage_on_media_to_a_prepared_record_fails_the_open() {
        let dir = tempfile::tempdir().unwrap();
        let value = "prepared-value-to-find-on-media";
        prepare_and_close(dir.path(), "t1", "k", value);
        // The record's payload holds the value: flip a byte of it where it lies on media.
        let mut flipped = 0;
        for entry in walk(dir.path()) {
            let mut bytes = std::fs::read(&entry).unwrap();
            if let Some(at) = bytes
                .windows(value.len())
                .position(|w| w == value.as_bytes())
            {
                bytes[at] ^= 0x20;
                std::fs::write(&entry, bytes).unwrap();
                flipped += 1;
            }
        }
        assert!(flipped > 0, "the record's bytes were not found on media");
        let error = open_with(dir.path(), |_| {}).unwrap_err();
        assert!(
            error.starts_with("Corruption: reading the prepared transactions")
                && error.contains("CRC mismatch"),
            "{error}"
        );
    }

    fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files.extend(walk(&path));
            } else {
                files.push(path);
            }
        }
        files
    }

    #[test]
    fn prepared_transactions_come_back_with_their_locks_and_column_families() {
        let dir = tempfile::tempdir().unwrap();
        let options = options();
        crate::options::rocksdb_options_set_create_missing_column_families(options, 1);
        let path = path_of(dir.path());
        let names = [c"default".as_ptr(), c"cf1".as_ptr()];
        let cf_options = [options.cast_const(), options.cast_const()];
        let open_cfs = |handles: &mut [*mut rocksdb_column_family_handle_t; 2]| {
            let db_options = rocksdb_transactiondb_options_create();
            rocksdb_transactiondb_options_set_default_lock_timeout(db_options, 10);
            let db = ok(|err| {
                rocksdb_transactiondb_open_column_families(
                    options,
                    db_options,
                    path.as_ptr(),
                    2,
                    names.as_ptr(),
                    cf_options.as_ptr(),
                    handles.as_mut_ptr(),
                    err,
                )
            });
            rocksdb_transactiondb_options_destroy(db_options);
            db
        };
        let mut handles = [std::ptr::null_mut(); 2];
        let db = open_cfs(&mut handles);
        let txn = begin(db);
        name(txn, "cf-writer").unwrap();
        ok(|err| {
            rocksdb_transaction_put_cf(txn, handles[1], c"k".as_ptr(), 1, c"v".as_ptr(), 1, err)
        });
        txn_put(txn, "k", "default").unwrap();
        ok(|err| rocksdb_transaction_prepare(txn, err));
        rocksdb_transaction_destroy(txn);
        handles
            .iter()
            .for_each(|cf| crate::db::rocksdb_column_family_handle_destroy(*cf));
        rocksdb_transactiondb_close(db);

        let db = open_cfs(&mut handles);
        let write_options = rocksdb_writeoptions_create();
        let error = failure(|err| {
            rocksdb_transactiondb_put_cf(
                db,
                write_options,
                handles[1],
                c"k".as_ptr(),
                1,
                c"x".as_ptr(),
                1,
                err,
            )
        });
        assert!(error.starts_with("Operation timed out"), "{error}");
        let recovered = prepared(db);
        assert_eq!(recovered.len(), 1);
        // A second call hands out the same transaction again.
        let again = prepared(db);
        assert_eq!(again.len(), 1);
        rocksdb_transaction_destroy(again[0]);
        ok(|err| rocksdb_transaction_commit(recovered[0], err));
        rocksdb_transaction_destroy(recovered[0]);
        let read_options = rocksdb_readoptions_create();
        let mut len = 0;
        let value = ok(|err| {
            rocksdb_transactiondb_get_cf(
                db,
                read_options,
                handles[1],
                c"k".as_ptr(),
                1,
                &mut len,
                err,
            )
        });
        assert_eq!(copied(value, len).as_deref(), Some("v"));
        assert_eq!(db_get(db, "k").as_deref(), Some("default"));
        rocksdb_readoptions_destroy(read_options);
        rocksdb_writeoptions_destroy(write_options);
        handles
            .iter()
            .for_each(|cf| crate::db::rocksdb_column_family_handle_destroy(*cf));
        rocksdb_transactiondb_close(db);
        rocksdb_options_destroy(options);
    }

    #[test]
    fn a_recovered_transaction_whose_column_family_is_gone_can_only_roll_back() {
        let dir = tempfile::tempdir().unwrap();
        let options = options();
        let db = open(dir.path());
        let cf = ok(|err| {
            rocksdb_transactiondb_create_column_family(db, options, c"gone".as_ptr(), err)
        });
        let txn = begin(db);
        name(txn, "t").unwrap();
        ok(|err| rocksdb_transaction_put_cf(txn, cf, c"k".as_ptr(), 1, c"v".as_ptr(), 1, err));
        txn_put(txn, "k", "v").unwrap();
        ok(|err| rocksdb_transaction_prepare(txn, err));
        rocksdb_transaction_destroy(txn);
        ok(|err| crate::db::rocksdb_drop_column_family(db.cast(), cf, err));
        crate::db::rocksdb_column_family_handle_destroy(cf);
        rocksdb_transactiondb_close(db);

        let db = open(dir.path());
        let recovered = prepared(db);
        assert_eq!(recovered.len(), 1);
        let error = failure(|err| rocksdb_transaction_commit(recovered[0], err));
        assert!(
            error.starts_with("Invalid argument: prepared transaction t writes column family gone"),
            "{error}"
        );
        ok(|err| rocksdb_transaction_rollback(recovered[0], err));
        rocksdb_transaction_destroy(recovered[0]);
        assert_eq!(db_get(db, "k"), None);
        rocksdb_transactiondb_close(db);
        let db = open(dir.path());
        assert!(prepared(db).is_empty());
        rocksdb_transactiondb_close(db);
        rocksdb_options_destroy(options);
    }

    #[test]
    fn the_prepared_transactions_kvs_is_no_column_family() {
        let dir = tempfile::tempdir().unwrap();
        prepare_and_close(dir.path(), "t", "k", "v");
        let options = options();
        let path = path_of(dir.path());
        // A plain open need not name it, and cannot create a column family of its name.
        let db = ok(|err| crate::db::rocksdb_open(options, path.as_ptr(), err));
        let reserved = CString::new(PREPARED_KVS).unwrap();
        let error = failure(|err| {
            crate::db::rocksdb_create_column_family(db, options, reserved.as_ptr(), err)
        });
        assert!(error.starts_with("Invalid argument: "), "{error}");
        crate::db::rocksdb_close(db);
        rocksdb_options_destroy(options);
    }
}
