//! `rocksdb_transaction_t`: a transaction of a TransactionDB (pessimistic) or of an
//! OptimisticTransactionDB, and the `rocksdb_transaction_*` calls.
//!
//! Both kinds buffer their writes (write_set.rs) and commit them as one ShaleDB batch; reads
//! see the transaction's own writes first, then the database as the read options say (their
//! snapshot, or the latest data: a transaction's own snapshot does not change what it reads,
//! as in RocksDB). They differ in how conflicts are kept out:
//! - pessimistic: every key written or read for update is locked in the TransactionDB's lock
//!   table (lock_table.rs) until commit or rollback; with a snapshot (`set_snapshot`), a key is
//!   also checked, once locked, not to have been committed by another writer after the snapshot
//!   ("Resource busy: ..."), through a ShaleDB transaction begun with the snapshot
//!   (`Transaction::check_unchanged`). Two-phase commit: a named transaction's `prepare`
//!   records its write set durably (prepared.rs), its commit applies it.
//! - optimistic: nothing is locked; the commit is a ShaleDB transaction's, which fails with
//!   "Resource busy: ..." when another writer committed a key it writes or read for update after
//!   its snapshot. That snapshot is taken when the transaction begins with `set_snapshot`, or
//!   else at its first write or read for update.

use crate::args::{array, bytes, drop_handle, handle, into_handle, malloc, malloc_bytes, set_out};
use crate::batch::{rocksdb_writebatch_t, OpKind};
use crate::db::{read, rocksdb_column_family_handle_t, rocksdb_t, ColumnFamily};
use crate::iterator::rocksdb_iterator_t;
use crate::lock_table::{Granted, Request, TxnId};
use crate::plugins::Feature;
use crate::prepared::{self, NAME_BYTES_MAX};
use crate::read_write_options::{rocksdb_readoptions_t, rocksdb_writeoptions_t};
use crate::reads::{deliver, pinned, rocksdb_pinnableslice_t};
use crate::snapshot::rocksdb_snapshot_t;
use crate::status::{call, caught, logged, quiet, Code, Result, Status};
use crate::transaction_db::TxnDbShared;
use crate::transaction_options::{
    lock_wait, rocksdb_transaction_options_t, LOCKS_PER_COLUMN_FAMILY_DEFAULT,
};
use crate::write_batch_with_index::rocksdb_writebatch_wi_t;
use crate::write_set::{check_key_value, show_key, WriteSet};
use engine::{Bytes, Snapshot, TxnOptions};
use libc::c_char;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// `rocksdb_transaction_t`. Handles share their transaction:
/// `rocksdb_transactiondb_get_prepared_transactions` hands out a new handle per call, as
/// RocksDB does, and the transaction lives until the last is destroyed.
pub struct rocksdb_transaction_t {
    pub(crate) txn: Arc<Mutex<Txn>>,
}

/// Where a pessimistic transaction is in its life (RocksDB's TransactionState).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Started,
    Prepared,
    Committed,
    RolledBack,
}

/// What a pessimistic transaction holds beyond its writes.
pub(crate) struct Pessimistic {
    shared: Arc<TxnDbShared>,
    id: TxnId,
    lock_wait: Duration,
    deadlock_depth: Option<usize>,
    skip_prepare: bool,
    /// The keys it locked, in the order first locked (a save point rolls back to a length).
    locked: Vec<(u32, Vec<u8>)>,
    /// Whether each locked key is held exclusively.
    lock_modes: HashMap<(u32, Vec<u8>), bool>,
    /// `locked`'s length at each save point.
    lock_points: Vec<usize>,
    /// With a snapshot: a ShaleDB transaction begun with it, which says whether a key was
    /// committed by another writer since.
    validator: Option<engine::Transaction>,
    name: Option<Vec<u8>>,
    /// Whether the name is in the TransactionDB's registry of live named transactions.
    registered: bool,
    state: State,
    /// A recovered transaction's write to a column family the database no longer has.
    missing_cf: Option<String>,
}

/// What an optimistic transaction holds beyond its writes.
pub(crate) struct Optimistic {
    set_snapshot: bool,
    /// The ShaleDB transaction whose commit checks for conflicts, once begun.
    tracker: Option<engine::Transaction>,
    /// The keys read for update (column family number and key, with its KVS), checked by a
    /// commit that writes nothing.
    for_update: BTreeMap<(u32, Vec<u8>), engine::Kvs>,
    /// Why the last commit failed: its tracker is gone, so a retry would miss the conflict;
    /// every commit fails with it until a rollback.
    failed: Option<Status>,
}

enum Mode {
    Pessimistic(Pessimistic),
    Optimistic(Optimistic),
}

/// A transaction.
pub(crate) struct Txn {
    db: rocksdb_t,
    /// The write options' `sync`, for the commit.
    sync: bool,
    writes: WriteSet,
    /// The transaction's snapshot (`set_snapshot`), which `get_snapshot` hands out.
    snapshot: Option<Arc<Snapshot>>,
    /// Snapshots handed to C by `rocksdb_transaction_get_snapshot`, whose handles C frees
    /// with `free`: each stays alive until the transaction is destroyed.
    handed_out: Vec<Arc<Snapshot>>,
    mode: Mode,
}

fn already(state: State) -> Status {
    Status::invalid(match state {
        State::Started => "Transaction is not in state for commit.",
        State::Prepared => "Transaction has already been prepared.",
        State::Committed => "Transaction has already been committed.",
        State::RolledBack => "Transaction has already been rolledback.",
    })
}

/// Begins a ShaleDB transaction that tracks what it reads for update.
fn begin_tracker(db: &rocksdb_t) -> Result<engine::Transaction> {
    Ok(db.engine().begin_with(TxnOptions {
        validate_reads: true,
        ..TxnOptions::default()
    })?)
}

/// Applies `writes` as one ShaleDB batch (with the deletion of prepared transaction `name`'s
/// record from `kvs`, when given).
fn apply(
    db: &rocksdb_t,
    writes: &WriteSet,
    sync: bool,
    prepared: Option<(&engine::Kvs, &[u8])>,
) -> Result<()> {
    let engine = db.engine();
    let mut batch = engine.batch();
    for op in writes.last_writes() {
        let kvs = &writes.column_family(op.cf)?.kvs;
        match op.kind {
            OpKind::Put => batch.put(kvs, &op.key, &op.value),
            _ => batch.delete(kvs, &op.key),
        }
    }
    if let Some((kvs, name)) = prepared {
        batch.prefix_delete(kvs, prepared::record_prefix(name));
    }
    engine.write(batch)?;
    if sync {
        engine.sync()?;
    }
    Ok(())
}

impl Pessimistic {
    fn check_started(&self) -> Result<()> {
        match self.state {
            State::Started => Ok(()),
            state => Err(already(state)),
        }
    }

    /// Locks `key` of `cf` (exclusively, or shared) and, with a snapshot, checks that no other
    /// writer committed it since: RocksDB's TryLock with validation.
    fn lock(&mut self, cf: &ColumnFamily, key: &[u8], exclusive: bool) -> Result<()> {
        let slot = (cf.id, key.to_vec());
        let held = self.lock_modes.get(&slot).copied();
        let granted = match held {
            Some(true) => Granted::Held,
            Some(false) if !exclusive => Granted::Held,
            _ => self.shared.locks.lock(&Request {
                txn: self.id,
                cf: cf.id,
                cf_name: &cf.name,
                key,
                exclusive,
                wait: self.lock_wait,
                deadlock_depth: self.deadlock_depth,
            })?,
        };
        if let Some(validator) = &self.validator {
            if let Err(error) = validator.check_unchanged(&cf.kvs, key) {
                match (granted, held) {
                    (Granted::Upgraded, _) => self.shared.locks.downgrade(self.id, cf.id, key),
                    (_, None) => self.shared.locks.unlock(self.id, [(cf.id, key)]),
                    _ => {}
                }
                return Err(error.into());
            }
        }
        if held.is_none() {
            self.locked.push(slot.clone());
            self.lock_modes.insert(slot, exclusive);
        } else if exclusive {
            self.lock_modes.insert(slot, true);
        }
        Ok(())
    }

    /// Releases the locks taken after the first `keep`.
    fn release_locks_after(&mut self, keep: usize) {
        if keep >= self.locked.len() {
            return;
        }
        let released = self.locked.split_off(keep);
        for slot in &released {
            self.lock_modes.remove(slot);
        }
        self.shared.locks.unlock(
            self.id,
            released.iter().map(|(cf, key)| (*cf, key.as_slice())),
        );
    }

    fn release_locks(&mut self) {
        self.release_locks_after(0);
        self.lock_points.clear();
    }

    fn unregister(&mut self) {
        if self.registered {
            if let Some(name) = &self.name {
                self.shared.names.lock().remove(name);
            }
            self.registered = false;
        }
    }

    /// The end of the transaction's work: locks released, name free again.
    fn finish(&mut self, state: State, writes: &mut WriteSet) {
        self.release_locks();
        self.unregister();
        self.validator = None;
        self.state = state;
        writes.clear();
    }

    fn commit(&mut self, db: &rocksdb_t, sync: bool, writes: &mut WriteSet) -> Result<()> {
        match self.state {
            State::Committed | State::RolledBack => return Err(already(self.state)),
            State::Started if !self.skip_prepare => {
                return Err(Status::invalid(
                    "Txn not prepared: the transaction's options say skip_prepare is false, \
                     so it must be named and prepared before it commits",
                ))
            }
            State::Started => {
                self.shared.locks.claim(self.id)?;
                apply(db, writes, sync, None)?;
            }
            State::Prepared => {
                if let Some(cf) = &self.missing_cf {
                    return Err(Status::invalid(format!(
                        "prepared transaction {} writes column family {cf}, which the database no longer has; roll it back",
                        show_key(self.name.as_deref().unwrap_or_default())
                    )));
                }
                let name = self.name.clone().expect("a prepared transaction is named");
                let kvs = self.shared.prepared_kvs()?;
                apply(db, writes, sync, Some((&kvs, &name)))?;
                self.shared.recorded.lock().remove(&name);
            }
        }
        self.finish(State::Committed, writes);
        Ok(())
    }

    fn rollback(&mut self, db: &rocksdb_t, writes: &mut WriteSet) -> Result<()> {
        match self.state {
            State::Started => {
                writes.clear();
                self.release_locks();
                Ok(())
            }
            State::Prepared => {
                let name = self.name.clone().expect("a prepared transaction is named");
                let kvs = self.shared.prepared_kvs()?;
                let engine = db.engine();
                let mut batch = engine.batch();
                batch.prefix_delete(&kvs, prepared::record_prefix(&name));
                engine.write(batch)?;
                engine.sync()?;
                self.shared.recorded.lock().remove(&name);
                self.finish(State::RolledBack, writes);
                Ok(())
            }
            State::Committed => Err(Status::invalid(
                "This transaction has already been committed.",
            )),
            State::RolledBack => Err(Status::invalid(
                "Two phase transaction is not in state for rollback.",
            )),
        }
    }

    fn prepare(&mut self, db: &rocksdb_t, writes: &WriteSet) -> Result<()> {
        let Some(name) = self.name.clone() else {
            return Err(Status::invalid(
                "Cannot prepare a transaction that has not been named.",
            ));
        };
        if self.state != State::Started {
            return Err(already(self.state));
        }
        self.shared.locks.claim(self.id)?;
        let entries = prepared::encode(&name, writes.ops(), |number| {
            writes.column_family(number).ok().map(|cf| cf.name.clone())
        })?;
        let kvs = self.shared.prepared_kvs()?;
        let engine = db.engine();
        let mut batch = engine.batch();
        for (key, value) in &entries {
            batch.put(&kvs, key, value);
        }
        engine.write(batch)?;
        engine.sync()?;
        self.shared.recorded.lock().insert(name);
        self.state = State::Prepared;
        Ok(())
    }
}

impl Drop for Pessimistic {
    fn drop(&mut self) {
        // A prepared transaction's record stays on media: the next open recovers it.
        self.release_locks();
        self.shared.locks.forget(self.id);
        self.unregister();
    }
}

impl Optimistic {
    fn track(&mut self, db: &rocksdb_t) -> Result<()> {
        if self.tracker.is_none() && self.failed.is_none() {
            self.tracker = Some(begin_tracker(db)?);
        }
        Ok(())
    }

    fn track_read(&mut self, db: &rocksdb_t, cf: &ColumnFamily, key: &[u8]) -> Result<()> {
        check_key_value(key, None)?;
        self.track(db)?;
        let slot = (cf.id, key.to_vec());
        if self.for_update.contains_key(&slot) {
            return Ok(());
        }
        if self.for_update.len() >= LOCKS_PER_COLUMN_FAMILY_DEFAULT {
            return Err(Status::new(
                Code::Aborted,
                format!(
                    "an optimistic transaction tracks at most {LOCKS_PER_COLUMN_FAMILY_DEFAULT} keys read for update"
                ),
            ));
        }
        if let Some(tracker) = &self.tracker {
            // Read through the tracker, which then checks the key at commit.
            tracker.get(&cf.kvs, key)?;
        }
        self.for_update.insert(slot, cf.kvs.clone());
        Ok(())
    }

    fn commit(&mut self, db: &rocksdb_t, sync: bool, writes: &mut WriteSet) -> Result<()> {
        if let Some(failed) = &self.failed {
            return Err(failed.clone());
        }
        let outcome = self.validate_and_write(db, writes);
        if let Err(status) = &outcome {
            self.failed = Some(status.clone());
            self.tracker = None;
            return outcome;
        }
        if sync && !writes.is_empty() {
            db.engine().sync()?;
        }
        writes.clear();
        self.for_update.clear();
        self.tracker = None;
        Ok(())
    }

    fn validate_and_write(&mut self, db: &rocksdb_t, writes: &WriteSet) -> Result<()> {
        if writes.is_empty() {
            // Nothing to write: the keys read for update are checked now.
            if let Some(tracker) = &self.tracker {
                for ((_, key), kvs) in &self.for_update {
                    tracker.check_unchanged(kvs, key)?;
                }
            }
            return Ok(());
        }
        let mut tracker = match self.tracker.take() {
            Some(tracker) => tracker,
            None => begin_tracker(db)?,
        };
        for op in writes.last_writes() {
            let kvs = &writes.column_family(op.cf)?.kvs;
            match op.kind {
                OpKind::Put => tracker.put(kvs, &op.key, &op.value)?,
                _ => tracker.delete(kvs, &op.key)?,
            }
        }
        tracker.commit()?;
        Ok(())
    }

    fn rollback(&mut self, writes: &mut WriteSet) {
        writes.clear();
        self.for_update.clear();
        self.failed = None;
        if !self.set_snapshot {
            self.tracker = None;
        }
    }
}

impl Txn {
    /// A pessimistic transaction of the TransactionDB `shared`.
    pub(crate) fn pessimistic(
        shared: &Arc<TxnDbShared>,
        write_options: &rocksdb_writeoptions_t,
        options: &rocksdb_transaction_options_t,
    ) -> Result<Txn> {
        let db = rocksdb_t {
            database: shared.database.clone(),
        };
        let validator = if options.set_snapshot() {
            Some(db.engine().begin()?)
        } else {
            None
        };
        let snapshot = validator
            .as_ref()
            .map(|validator| Arc::new(validator.snapshot_view()));
        let id = shared.locks.next_id();
        if let Some(after) = options.expiration() {
            shared.locks.set_expiration(id, after);
        }
        let timeout = match options.lock_timeout() {
            timeout if timeout < 0 => shared.options.transaction_lock_timeout(),
            timeout => timeout,
        };
        Ok(Txn {
            db,
            sync: write_options.sync(),
            writes: WriteSet::new(options.max_write_batch_size()),
            snapshot,
            handed_out: Vec::new(),
            mode: Mode::Pessimistic(Pessimistic {
                shared: shared.clone(),
                id,
                lock_wait: lock_wait(timeout),
                deadlock_depth: options
                    .deadlock_detect()
                    .then(|| options.deadlock_detect_depth()),
                skip_prepare: options.skip_prepare(),
                locked: Vec::new(),
                lock_modes: HashMap::new(),
                lock_points: Vec::new(),
                validator,
                name: None,
                registered: false,
                state: State::Started,
                missing_cf: None,
            }),
        })
    }

    /// A prepared transaction read back at open: its writes, and exclusive locks on every key
    /// it writes. The caller registers its name.
    pub(crate) fn recovered(shared: &Arc<TxnDbShared>, record: prepared::Record) -> Result<Txn> {
        let mut txn = Txn::pessimistic(
            shared,
            &rocksdb_writeoptions_t::default(),
            &rocksdb_transaction_options_t::default(),
        )?;
        // It was within its bounds when prepared, under options not recorded.
        txn.writes = WriteSet::new(usize::MAX);
        let Mode::Pessimistic(p) = &mut txn.mode else {
            unreachable!("made pessimistic above")
        };
        let shown = show_key(&record.name);
        for (cf_name, op) in record.ops {
            let cf = txn
                .db
                .database
                .column_families()
                .values()
                .find(|cf| cf.name == cf_name)
                .cloned();
            let Some(cf) = cf else {
                p.missing_cf.get_or_insert(cf_name);
                continue;
            };
            let value = match op.kind {
                OpKind::Put => Some(op.value.as_slice()),
                OpKind::Delete | OpKind::SingleDelete => None,
                kind => {
                    return Err(Status::new(
                        Code::Corruption,
                        format!(
                            "prepared transaction {shown:?} ({}): a {kind:?} operation, which no transaction holds",
                            prepared::PREPARED_KVS
                        ),
                    ))
                }
            };
            let slot = (cf.id, op.key.clone());
            if !p.lock_modes.contains_key(&slot) {
                let request = Request {
                    txn: p.id,
                    cf: cf.id,
                    cf_name: &cf.name,
                    key: &op.key,
                    exclusive: true,
                    wait: Duration::ZERO,
                    deadlock_depth: None,
                };
                match shared.locks.lock(&request) {
                    Ok(_) => {
                        p.locked.push(slot.clone());
                        p.lock_modes.insert(slot, true);
                    }
                    // Another recovered transaction holds it: both were prepared, the first
                    // destroyed before the second locked the key (RocksDB allows it too).
                    Err(status) => eprintln!(
                        "shaledb-rocksdb: recovered prepared transaction {shown:?} cannot lock key {} in column family {}: {status}",
                        show_key(&op.key),
                        cf.name
                    ),
                }
            }
            txn.writes.remember(&cf);
            txn.writes.write(cf.id, &op.key, value)?;
        }
        p.name = Some(record.name);
        p.state = State::Prepared;
        Ok(txn)
    }

    /// The name of a recovered transaction, registered by the caller.
    pub(crate) fn mark_registered(&mut self) {
        if let Mode::Pessimistic(p) = &mut self.mode {
            p.registered = true;
        }
    }

    /// A transaction of an OptimisticTransactionDB.
    pub(crate) fn optimistic(
        db: &rocksdb_t,
        write_options: &rocksdb_writeoptions_t,
        set_snapshot: bool,
    ) -> Result<Txn> {
        let db = rocksdb_t {
            database: db.database.clone(),
        };
        let tracker = if set_snapshot {
            Some(begin_tracker(&db)?)
        } else {
            None
        };
        let snapshot = tracker
            .as_ref()
            .map(|tracker| Arc::new(tracker.snapshot_view()));
        Ok(Txn {
            db,
            sync: write_options.sync(),
            writes: WriteSet::new(crate::transaction_options::WRITE_SET_BYTES_DEFAULT),
            snapshot,
            handed_out: Vec::new(),
            mode: Mode::Optimistic(Optimistic {
                set_snapshot,
                tracker,
                for_update: BTreeMap::new(),
                failed: None,
            }),
        })
    }

    pub(crate) fn is_prepared(&self) -> bool {
        matches!(&self.mode, Mode::Pessimistic(p) if p.state == State::Prepared)
    }

    fn column_family(&self, cf: *const rocksdb_column_family_handle_t) -> Result<ColumnFamily> {
        Ok(self.db.column_family(cf)?.clone())
    }

    /// A put (`Some(value)`) or delete of `key`.
    fn write(&mut self, cf: &ColumnFamily, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        check_key_value(key, value)?;
        match &mut self.mode {
            Mode::Pessimistic(p) => {
                p.check_started()?;
                p.lock(cf, key, true)?;
            }
            Mode::Optimistic(o) => o.track(&self.db)?,
        }
        self.writes.remember(cf);
        self.writes.write(cf.id, key, value)
    }

    fn get(
        &self,
        options: &rocksdb_readoptions_t,
        cf: &ColumnFamily,
        key: &[u8],
    ) -> Result<Option<Bytes>> {
        match self.writes.get(cf.id, key) {
            Some(own) => Ok(own),
            None => read(options, cf, key),
        }
    }

    fn get_for_update(
        &mut self,
        options: &rocksdb_readoptions_t,
        cf: &ColumnFamily,
        key: &[u8],
        exclusive: bool,
    ) -> Result<Option<Bytes>> {
        match &mut self.mode {
            Mode::Pessimistic(p) => {
                check_key_value(key, None)?;
                p.check_started()?;
                p.lock(cf, key, exclusive)?;
            }
            Mode::Optimistic(o) => o.track_read(&self.db, cf, key)?,
        }
        self.get(options, cf, key)
    }

    fn commit(&mut self) -> Result<()> {
        let Txn {
            db,
            sync,
            writes,
            snapshot,
            mode,
            ..
        } = self;
        match mode {
            Mode::Pessimistic(p) => p.commit(db, *sync, writes),
            Mode::Optimistic(o) => {
                o.commit(db, *sync, writes)?;
                if o.set_snapshot {
                    // RocksDB keeps the snapshot; ShaleDB's tracker went with the commit, so
                    // the transaction goes on with a new one.
                    let tracker = begin_tracker(db)?;
                    *snapshot = Some(Arc::new(tracker.snapshot_view()));
                    o.tracker = Some(tracker);
                }
                Ok(())
            }
        }
    }

    fn rollback(&mut self) -> Result<()> {
        match &mut self.mode {
            Mode::Pessimistic(p) => p.rollback(&self.db, &mut self.writes),
            Mode::Optimistic(o) => {
                o.rollback(&mut self.writes);
                if o.set_snapshot && o.tracker.is_none() {
                    // A failed commit took the tracker, and with it the snapshot.
                    let tracker = begin_tracker(&self.db)?;
                    self.snapshot = Some(Arc::new(tracker.snapshot_view()));
                    o.tracker = Some(tracker);
                }
                Ok(())
            }
        }
    }

    fn set_save_point(&mut self) {
        self.writes.set_save_point();
        if let Mode::Pessimistic(p) = &mut self.mode {
            p.lock_points.push(p.locked.len());
        }
    }

    fn rollback_to_save_point(&mut self) -> Result<()> {
        if let Mode::Pessimistic(p) = &self.mode {
            if p.state != State::Started {
                return Err(Status::invalid("Transaction is beyond state for rollback."));
            }
        }
        self.writes.rollback_to_save_point()?;
        if let Mode::Pessimistic(p) = &mut self.mode {
            // Keys first locked since the save point are unlocked (RocksDB does the same).
            let keep = p.lock_points.pop().unwrap_or(p.locked.len());
            p.release_locks_after(keep);
        }
        Ok(())
    }

    fn set_name(&mut self, name: &[u8], me: Weak<Mutex<Txn>>) -> Result<()> {
        let Mode::Pessimistic(p) = &mut self.mode else {
            return Err(Status::invalid("Optimistic transactions cannot be named."));
        };
        if p.state != State::Started {
            return Err(Status::invalid("Transaction is beyond state for naming."));
        }
        if p.name.is_some() {
            return Err(Status::invalid("Transaction has already been named."));
        }
        if name.is_empty() || name.len() > NAME_BYTES_MAX {
            return Err(Status::invalid(format!(
                "Transaction name length must be between 1 and {NAME_BYTES_MAX} chars."
            )));
        }
        let mut names = p.shared.names.lock();
        if names.contains_key(name) {
            return Err(Status::invalid(format!(
                "Duplicate txn name {}",
                show_key(name)
            )));
        }
        if p.shared.recorded.lock().contains(name) {
            return Err(Status::invalid(format!(
                "Duplicate txn name {}: a prepared transaction of that name is recorded (the next open recovers it)",
                show_key(name)
            )));
        }
        names.insert(name.to_vec(), me);
        drop(names);
        p.name = Some(name.to_vec());
        p.registered = true;
        Ok(())
    }

    fn name(&self) -> &[u8] {
        match &self.mode {
            Mode::Pessimistic(p) => p.name.as_deref().unwrap_or_default(),
            Mode::Optimistic(_) => &[],
        }
    }

    fn prepare(&mut self) -> Result<()> {
        match &mut self.mode {
            Mode::Pessimistic(p) => p.prepare(&self.db, &self.writes),
            Mode::Optimistic(_) => Err(Status::invalid(
                "Two phase commit not supported for optimistic transactions.",
            )),
        }
    }

    /// Re-makes the writes of `batch` in this transaction (locking what they write), after
    /// the writes it has.
    fn rebuild(&mut self, batch: &rocksdb_writebatch_t) -> Result<()> {
        if let Some(error) = &batch.error {
            return Err(error.clone());
        }
        for op in &batch.ops {
            let cf = crate::db::numbered(&self.db.database.column_families(), op.cf)?.clone();
            match op.kind {
                OpKind::Put => self.write(&cf, &op.key, Some(&op.value))?,
                OpKind::Delete | OpKind::SingleDelete => self.write(&cf, &op.key, None)?,
                OpKind::Merge => return Err(Feature::MergeOperator.refused()),
                OpKind::DeleteRange => {
                    return Err(Status::invalid(
                        "DeleteRangeCF not implemented: a transaction cannot hold a range deletion",
                    ))
                }
                OpKind::LogData => {}
            }
        }
        Ok(())
    }

    /// The transaction's snapshot, kept alive until the transaction is destroyed.
    fn hand_out_snapshot(&mut self) -> Option<Arc<Snapshot>> {
        let snapshot = self.snapshot.clone()?;
        if !self
            .handed_out
            .iter()
            .any(|given| Arc::ptr_eq(given, &snapshot))
        {
            self.handed_out.push(snapshot.clone());
        }
        Some(snapshot)
    }

    fn iterator(
        &self,
        options: &rocksdb_readoptions_t,
        cf: ColumnFamily,
    ) -> Result<rocksdb_iterator_t> {
        let overlay = self.writes.overlay(cf.id);
        rocksdb_iterator_t::with_overlay(&self.db, cf, options, overlay)
    }
}

/// A new handle on `txn`, or `old` re-made as `txn` (RocksDB's reuse of a transaction).
pub(crate) fn begun(txn: Txn, old: *mut rocksdb_transaction_t) -> *mut rocksdb_transaction_t {
    if old.is_null() {
        return into_handle(rocksdb_transaction_t {
            txn: Arc::new(Mutex::new(txn)),
        });
    }
    match handle(old, "transaction") {
        Ok(old_txn) => {
            // The old transaction ends here (its locks released, its name freed).
            *old_txn.txn.lock() = txn;
            old
        }
        Err(_) => std::ptr::null_mut(),
    }
}

/// Runs `body` with the transaction behind `txn`, locked.
fn with_txn<T>(
    txn: *mut rocksdb_transaction_t,
    body: impl FnOnce(&mut Txn) -> Result<T>,
) -> Result<T> {
    let txn = handle(txn, "transaction")?;
    let mut guard = txn.txn.lock();
    body(&mut guard)
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_destroy(txn: *mut rocksdb_transaction_t) {
    quiet((), || drop_handle(txn))
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_set_name(
    txn: *mut rocksdb_transaction_t,
    name: *const c_char,
    name_len: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let handle_ = handle(txn, "transaction")?;
        let me = Arc::downgrade(&handle_.txn);
        let name = bytes(name, name_len)?;
        handle_.txn.lock().set_name(name, me)
    })
}

/// The transaction's name (empty when it has none), malloc()ed, its length in `*name_len`.
#[no_mangle]
pub extern "C" fn rocksdb_transaction_get_name(
    txn: *mut rocksdb_transaction_t,
    name_len: *mut usize,
) -> *mut c_char {
    quiet(std::ptr::null_mut(), || {
        set_out(name_len, 0);
        handle(txn, "transaction").map_or(std::ptr::null_mut(), |txn| {
            malloc_bytes(txn.txn.lock().name(), name_len)
        })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_prepare(
    txn: *mut rocksdb_transaction_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || with_txn(txn, Txn::prepare))
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_commit(
    txn: *mut rocksdb_transaction_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || with_txn(txn, Txn::commit))
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_rollback(
    txn: *mut rocksdb_transaction_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || with_txn(txn, Txn::rollback))
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_set_savepoint(txn: *mut rocksdb_transaction_t) {
    quiet((), || {
        let _ = with_txn(txn, |txn| {
            txn.set_save_point();
            Ok(())
        });
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_rollback_to_savepoint(
    txn: *mut rocksdb_transaction_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || with_txn(txn, Txn::rollback_to_save_point))
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_rebuild_from_writebatch(
    txn: *mut rocksdb_transaction_t,
    writebatch: *mut rocksdb_writebatch_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let batch = handle(writebatch, "write batch")?;
        with_txn(txn, |txn| txn.rebuild(batch))
    })
}

/// A write batch with index holding a copy of the transaction's writes.
#[no_mangle]
pub extern "C" fn rocksdb_transaction_get_writebatch_wi(
    txn: *mut rocksdb_transaction_t,
) -> *mut rocksdb_writebatch_wi_t {
    quiet(std::ptr::null_mut(), || {
        with_txn(txn, |txn| Ok(txn.writes.to_batch())).map_or(std::ptr::null_mut(), |batch| {
            crate::args::into_handle(rocksdb_writebatch_wi_t::from_batch(&batch))
        })
    })
}

/// Replays the writes of a write batch with index into the transaction (locking their keys),
/// as `rocksdb_transaction_rebuild_from_writebatch` does with a plain batch.
#[no_mangle]
pub extern "C" fn rocksdb_transaction_rebuild_from_writebatch_wi(
    txn: *mut rocksdb_transaction_t,
    wi: *mut rocksdb_writebatch_wi_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let batch = handle(wi, "write batch with index")?.to_batch();
        with_txn(txn, |txn| txn.rebuild(&batch))
    })
}

/// User-defined timestamps: ShaleDB's column families have none (a comparator with a
/// timestamp is refused at open), and RocksDB uses a commit timestamp only for keys that carry
/// one, so it has nothing to stamp here, as in RocksDB on such column families.
#[no_mangle]
pub extern "C" fn rocksdb_transaction_set_commit_timestamp(
    _txn: *mut rocksdb_transaction_t,
    _commit_timestamp: u64,
) {
}

/// As `rocksdb_transaction_set_commit_timestamp`: a read timestamp validates only keys that
/// carry timestamps, and ShaleDB's have none.
#[no_mangle]
pub extern "C" fn rocksdb_transaction_set_read_timestamp_for_validation(
    _txn: *mut rocksdb_transaction_t,
    _read_timestamp: u64,
) {
}

/// The transaction's snapshot, or NULL when it has none (RocksDB hands out a snapshot whose
/// inside is NULL: read options given either read the latest data). C frees the handle with
/// `rocksdb_free`; the snapshot itself lives until the transaction is destroyed.
#[no_mangle]
pub extern "C" fn rocksdb_transaction_get_snapshot(
    txn: *mut rocksdb_transaction_t,
) -> *const rocksdb_snapshot_t {
    quiet(std::ptr::null(), || {
        let Ok(Some(snapshot)) = with_txn(txn, |txn| Ok(txn.hand_out_snapshot())) else {
            return std::ptr::null();
        };
        let out = malloc(size_of::<rocksdb_snapshot_t>()).cast::<rocksdb_snapshot_t>();
        // A reference the transaction's own keeps valid, never dropped: `free` releases the
        // handle's memory alone, so the count is not raised for it.
        // SAFETY: `snapshot` is a live Arc (the transaction holds it in `handed_out` until it
        // is destroyed); this copy of the pointer is never dropped, so the count is not
        // lowered for it either. `out` has room for one `rocksdb_snapshot_t`, and malloc's
        // alignment serves a pointer.
        unsafe {
            let borrowed = Arc::from_raw(Arc::as_ptr(&snapshot));
            std::ptr::write(out, rocksdb_snapshot_t { snapshot: borrowed });
        }
        out.cast_const()
    })
}

fn get(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    cf: *const rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
    for_update: Option<bool>,
) -> Result<Option<Bytes>> {
    let options = handle(options, "read options")?;
    let key = bytes(key, klen)?;
    with_txn(txn, |txn| {
        let cf = txn.column_family(cf)?;
        match for_update {
            Some(exclusive) => txn.get_for_update(options, &cf, key, exclusive),
            None => txn.get(options, &cf, key),
        }
    })
}

/// A read into malloc()ed memory: NULL (and `*vlen` 0) when the key has no value.
fn get_copied(
    errptr: *mut *mut c_char,
    vlen: *mut usize,
    read: impl FnOnce() -> Result<Option<Bytes>>,
) -> *mut c_char {
    set_out(vlen, 0);
    call(errptr, std::ptr::null_mut(), || {
        Ok(match read()? {
            Some(value) => malloc_bytes(&value, vlen),
            None => std::ptr::null_mut(),
        })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_get(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    klen: usize,
    vlen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    get_copied(errptr, vlen, || {
        get(txn, options, std::ptr::null(), key, klen, None)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_get_cf(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
    vlen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    get_copied(errptr, vlen, || {
        get(txn, options, column_family, key, klen, None)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_get_pinned(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    klen: usize,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_pinnableslice_t {
    call(errptr, std::ptr::null_mut(), || {
        Ok(pinned(get(
            txn,
            options,
            std::ptr::null(),
            key,
            klen,
            None,
        )?))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_get_pinned_cf(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_pinnableslice_t {
    call(errptr, std::ptr::null_mut(), || {
        Ok(pinned(get(txn, options, column_family, key, klen, None)?))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_get_for_update(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    klen: usize,
    vlen: *mut usize,
    exclusive: libc::c_uchar,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    get_copied(errptr, vlen, || {
        get(
            txn,
            options,
            std::ptr::null(),
            key,
            klen,
            Some(exclusive != 0),
        )
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_get_for_update_cf(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
    vlen: *mut usize,
    exclusive: libc::c_uchar,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    get_copied(errptr, vlen, || {
        get(txn, options, column_family, key, klen, Some(exclusive != 0))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_get_pinned_for_update(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    klen: usize,
    exclusive: libc::c_uchar,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_pinnableslice_t {
    call(errptr, std::ptr::null_mut(), || {
        Ok(pinned(get(
            txn,
            options,
            std::ptr::null(),
            key,
            klen,
            Some(exclusive != 0),
        )?))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_get_pinned_for_update_cf(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
    exclusive: libc::c_uchar,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_pinnableslice_t {
    call(errptr, std::ptr::null_mut(), || {
        Ok(pinned(get(
            txn,
            options,
            column_family,
            key,
            klen,
            Some(exclusive != 0),
        )?))
    })
}

/// Reads `count` keys in the transaction (for update, when `for_update` says how), the i-th in
/// column family `cfs[i]` (the default one when `cfs` is NULL).
#[allow(clippy::too_many_arguments)]
fn multi_get(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    cfs: *const *const rocksdb_column_family_handle_t,
    count: usize,
    keys: *const *const c_char,
    key_sizes: *const usize,
    for_update: Option<bool>,
    values: *mut *mut c_char,
    values_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    let outcomes = caught(|| {
        let options = handle(options, "read options")?;
        let keys = array(keys, count)?;
        let key_sizes = array(key_sizes, count)?;
        let cfs = if cfs.is_null() {
            None
        } else {
            Some(array(cfs, count)?)
        };
        with_txn(txn, |txn| {
            Ok((0..count)
                .map(|index| {
                    let cf = match cfs {
                        Some(cfs) if cfs[index].is_null() => {
                            return Err(Status::invalid("column family handle is NULL"))
                        }
                        Some(cfs) => txn.column_family(cfs[index])?,
                        None => txn.column_family(std::ptr::null())?,
                    };
                    let key = bytes(keys[index], key_sizes[index])?;
                    match for_update {
                        Some(exclusive) => txn.get_for_update(options, &cf, key, exclusive),
                        None => txn.get(options, &cf, key),
                    }
                })
                .collect())
        })
    });
    let outcomes = outcomes.unwrap_or_else(|status| vec![Err(status); count]);
    deliver(outcomes, values, values_sizes, errs)
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_multi_get(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    num_keys: usize,
    keys_list: *const *const c_char,
    keys_list_sizes: *const usize,
    values_list: *mut *mut c_char,
    values_list_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    multi_get(
        txn,
        options,
        std::ptr::null(),
        num_keys,
        keys_list,
        keys_list_sizes,
        None,
        values_list,
        values_list_sizes,
        errs,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_multi_get_for_update(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    num_keys: usize,
    keys_list: *const *const c_char,
    keys_list_sizes: *const usize,
    values_list: *mut *mut c_char,
    values_list_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    multi_get(
        txn,
        options,
        std::ptr::null(),
        num_keys,
        keys_list,
        keys_list_sizes,
        Some(true),
        values_list,
        values_list_sizes,
        errs,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_multi_get_cf(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    column_families: *const *const rocksdb_column_family_handle_t,
    num_keys: usize,
    keys_list: *const *const c_char,
    keys_list_sizes: *const usize,
    values_list: *mut *mut c_char,
    values_list_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    if column_families.is_null() && num_keys > 0 {
        let status = Status::invalid("column family handles array is NULL");
        let outcomes = vec![Err(status); num_keys];
        return deliver(outcomes, values_list, values_list_sizes, errs);
    }
    multi_get(
        txn,
        options,
        column_families,
        num_keys,
        keys_list,
        keys_list_sizes,
        None,
        values_list,
        values_list_sizes,
        errs,
    )
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_multi_get_for_update_cf(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    column_families: *const *const rocksdb_column_family_handle_t,
    num_keys: usize,
    keys_list: *const *const c_char,
    keys_list_sizes: *const usize,
    values_list: *mut *mut c_char,
    values_list_sizes: *mut usize,
    errs: *mut *mut c_char,
) {
    if column_families.is_null() && num_keys > 0 {
        let status = Status::invalid("column family handles array is NULL");
        let outcomes = vec![Err(status); num_keys];
        return deliver(outcomes, values_list, values_list_sizes, errs);
    }
    multi_get(
        txn,
        options,
        column_families,
        num_keys,
        keys_list,
        keys_list_sizes,
        Some(true),
        values_list,
        values_list_sizes,
        errs,
    )
}

fn write(
    txn: *mut rocksdb_transaction_t,
    cf: *const rocksdb_column_family_handle_t,
    key: (*const c_char, usize),
    value: Option<(*const c_char, usize)>,
) -> Result<()> {
    let key = bytes(key.0, key.1)?;
    let value = value.map(|(value, len)| bytes(value, len)).transpose()?;
    with_txn(txn, |txn| {
        let cf = txn.column_family(cf)?;
        txn.write(&cf, key, value)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_put(
    txn: *mut rocksdb_transaction_t,
    key: *const c_char,
    klen: usize,
    val: *const c_char,
    vlen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        write(txn, std::ptr::null(), (key, klen), Some((val, vlen)))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_put_cf(
    txn: *mut rocksdb_transaction_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
    val: *const c_char,
    vlen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        write(txn, column_family, (key, klen), Some((val, vlen)))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_delete(
    txn: *mut rocksdb_transaction_t,
    key: *const c_char,
    klen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        write(txn, std::ptr::null(), (key, klen), None)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_delete_cf(
    txn: *mut rocksdb_transaction_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || write(txn, column_family, (key, klen), None))
}

/// Merge: ShaleDB has no merge operators, so a merge fails, naming them, and nothing is
/// locked or buffered.
#[no_mangle]
pub extern "C" fn rocksdb_transaction_merge(
    txn: *mut rocksdb_transaction_t,
    _key: *const c_char,
    _klen: usize,
    _val: *const c_char,
    _vlen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(txn, "transaction")?;
        Err(Feature::MergeOperator.refused())
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_merge_cf(
    txn: *mut rocksdb_transaction_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _key: *const c_char,
    _klen: usize,
    _val: *const c_char,
    _vlen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        handle(txn, "transaction")?;
        Err(Feature::MergeOperator.refused())
    })
}

fn create_iterator(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    cf: *const rocksdb_column_family_handle_t,
) -> *mut rocksdb_iterator_t {
    logged(
        "creating a transaction's iterator",
        std::ptr::null_mut(),
        || {
            let options = handle(options, "read options")?;
            let iterator = with_txn(txn, |txn| {
                let cf = txn.column_family(cf)?;
                txn.iterator(options, cf)
            })?;
            Ok(into_handle(iterator))
        },
    )
}

/// An iterator over the transaction's writes merged over the database (at the read options'
/// snapshot, or one taken now); writes the transaction makes later are not seen by it.
#[no_mangle]
pub extern "C" fn rocksdb_transaction_create_iterator(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
) -> *mut rocksdb_iterator_t {
    create_iterator(txn, options, std::ptr::null())
}

#[no_mangle]
pub extern "C" fn rocksdb_transaction_create_iterator_cf(
    txn: *mut rocksdb_transaction_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
) -> *mut rocksdb_iterator_t {
    create_iterator(txn, options, column_family)
}
