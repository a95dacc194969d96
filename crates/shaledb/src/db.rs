//! [`Db`]: the public handle on one KVDB. It opens the home (lock, catalog, media directories),
//! has recovery rebuild the store, starts the background jobs on it, and manages KVSs, batches,
//! snapshots, transactions and maintenance; closing flushes, checkpoints and releases the home.

use crate::batch::WriteBatch;
use crate::catalog::{Catalog, CatalogEntry};
use crate::check::{self, CheckReport};
use crate::checkpointer::Checkpointer;
use crate::engine::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::gc::Cleaner;
use crate::home::{lock_home, resolve_media};
use crate::index::KvsIndex;
use crate::kvs::Kvs;
use crate::limits::{KVS_COUNT_MAX, KVS_NAME_BYTES_MAX};
use crate::options::{KvsOptions, Options};
use crate::recovery::RecoveryReport;
use crate::snapshot::Snapshot;
use crate::stats::Stats;
use crate::store::{KvsState, Store};
use crate::txn::{Transaction, TxnOptions};
use crate::worker::{Jobs, Workers};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A KVDB: a directory holding named KVSs. Cheap to share: clone the [`Kvs`] handles it gives,
/// or wrap it in an `Arc`. Dropping it closes it (see [`Db::close`]).
pub struct Db {
    engine: Arc<Engine>,
    home: PathBuf,
    catalog: Mutex<Catalog>,
    /// The KVSs by name (the store knows them by id); changed only with the catalog locked.
    kvs_by_name: RwLock<HashMap<String, Arc<KvsState>>>,
    cleaner: Arc<Cleaner>,
    checkpointer: Arc<Checkpointer>,
    recovery_report: RecoveryReport,
    workers: Mutex<Option<Workers>>,
    lock_file: Mutex<Option<File>>,
}

fn validate_kvs_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > KVS_NAME_BYTES_MAX || name.chars().any(char::is_control) {
        return Err(Error::InvalidArgument(format!(
            "KVS name {name:?} must be 1 to {KVS_NAME_BYTES_MAX} bytes without control characters"
        )));
    }
    Ok(())
}

impl Db {
    /// Creates or opens the KVDB in directory `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let home = path.as_ref().to_path_buf();
        std::fs::create_dir_all(&home)
            .map_err(|error| Error::io(format!("create {}", home.display()), error))?;
        let lock_file = lock_home(&home)?;
        let mut catalog: Catalog = Catalog::load(&home)?.unwrap_or_default();
        let media = resolve_media(&home, &options, catalog.media.as_ref())?;
        for dir in std::iter::once(&media.capacity_dir).chain(media.staging_dir.as_ref()) {
            std::fs::create_dir_all(dir)
                .map_err(|error| Error::io(format!("create {}", dir.display()), error))?;
        }
        if catalog.media.as_ref() != Some(&media) {
            catalog.media = Some(media.clone());
            catalog.store(&home)?;
        }
        let kvs: Vec<(u32, String, KvsOptions)> = catalog
            .kvs
            .iter()
            .map(|(name, entry)| (entry.id, name.clone(), entry.options.clone()))
            .collect();
        let (store, recovery_report) = Store::open(&home, &media, &options, kvs)?;
        let store = Arc::new(store);
        let kvs_by_name: HashMap<String, Arc<KvsState>> = store
            .kvs
            .all()
            .into_iter()
            .map(|state| (state.name.clone(), state))
            .collect();
        let cleaner = Arc::new(Cleaner::new(
            store.clone(),
            options.space_target_live_ratio,
            media.staging_bytes_max,
        ));
        let checkpointer = Arc::new(Checkpointer::new(
            store.clone(),
            media.checkpoint_dir().to_path_buf(),
            options.checkpoint_interval_bytes,
        ));
        let workers = Workers::start(Jobs {
            store: store.clone(),
            cleaner: cleaner.clone(),
            checkpointer: checkpointer.clone(),
            durability: options.durability,
            clean: options.cleaner,
            capacity_dir: media.capacity_dir.clone(),
        })?;
        let visible_seqno = store.next_seqno.load(Ordering::SeqCst) - 1;
        Ok(Db {
            engine: Arc::new(Engine::new(store, options, visible_seqno)),
            home,
            catalog: Mutex::new(catalog),
            kvs_by_name: RwLock::new(kvs_by_name),
            cleaner,
            checkpointer,
            recovery_report,
            workers: Mutex::new(Some(workers)),
            lock_file: Mutex::new(Some(lock_file)),
        })
    }

    fn store(&self) -> &Store {
        &self.engine.store
    }

    /// The KVS named `name`, created with default options on first use.
    pub fn kvs(&self, name: &str) -> Result<Kvs> {
        self.kvs_with_options(name, KvsOptions::default())
    }

    /// The KVS named `name`, created with `options` if it does not exist. An existing KVS keeps
    /// the options it was created with.
    pub fn kvs_with_options(&self, name: &str, options: KvsOptions) -> Result<Kvs> {
        self.engine.check_open()?;
        validate_kvs_name(name)?;
        options.validate()?;
        if let Some(state) = self.kvs_by_name.read().get(name) {
            return Ok(self.handle(state.clone()));
        }
        if options.media_policy.writes_to_staging() && !self.store().heads.has_staging() {
            return Err(Error::InvalidArgument(format!(
                "KVS {name:?}: media policy {:?} needs a staging class, and this KVDB has none",
                options.media_policy
            )));
        }
        let mut catalog = self.catalog.lock();
        if let Some(state) = self.kvs_by_name.read().get(name) {
            return Ok(self.handle(state.clone()));
        }
        if catalog.kvs.len() >= KVS_COUNT_MAX {
            return Err(Error::LimitExceeded {
                what: "KVS count",
                limit: KVS_COUNT_MAX as u64,
                actual: catalog.kvs.len() as u64 + 1,
            });
        }
        let id = catalog.next_kvs_id;
        let mut updated = catalog.clone();
        updated.next_kvs_id += 1;
        updated.kvs.insert(
            name.to_string(),
            CatalogEntry {
                id,
                options: options.clone(),
            },
        );
        updated.store(&self.home)?;
        *catalog = updated;
        let state = Arc::new(KvsState::new(
            id,
            name.to_string(),
            options,
            KvsIndex::default(),
        ));
        self.kvs_by_name
            .write()
            .insert(name.to_string(), state.clone());
        self.store().kvs.insert(state.clone());
        Ok(self.handle(state))
    }

    fn handle(&self, state: Arc<KvsState>) -> Kvs {
        Kvs::new(self.engine.clone(), state)
    }

    /// Names of all KVSs, sorted.
    pub fn list_kvs(&self) -> Result<Vec<String>> {
        self.engine.check_open()?;
        Ok(self.catalog.lock().kvs.keys().cloned().collect())
    }

    /// Drops the KVS `name` and all its data. Its handles return errors afterwards.
    pub fn drop_kvs(&self, name: &str) -> Result<()> {
        self.engine.check_open()?;
        let mut catalog = self.catalog.lock();
        let Some(entry) = catalog.kvs.get(name).cloned() else {
            return Err(Error::KvsNotFound(name.to_string()));
        };
        let mut updated = catalog.clone();
        updated.kvs.remove(name);
        updated.store(&self.home)?;
        *catalog = updated;
        let state = self
            .kvs_by_name
            .write()
            .remove(name)
            .expect("catalog and map agree");
        self.store().kvs.remove(entry.id);
        let mut index = state.index.write();
        state.mark_dropped();
        index.for_each_version(|_, entry| self.store().free(entry));
        *index = KvsIndex::default();
        Ok(())
    }

    /// A new, empty write batch.
    pub fn batch(&self) -> WriteBatch {
        WriteBatch::default()
    }

    /// Applies `batch` atomically: after a crash either all of it is there or none.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        if let Some(error) = batch.error {
            return Err(error);
        }
        let limit = self.engine.options.batch_bytes_limit();
        if batch.encoded_bytes > limit {
            return Err(Error::LimitExceeded {
                what: "write batch",
                limit,
                actual: batch.encoded_bytes,
            });
        }
        self.engine.commit(&batch.ops)
    }

    /// A consistent view of every KVS as of now.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.engine.check_open()?;
        Ok(Snapshot::new(self.engine.take_snapshot()))
    }

    /// Begins a transaction (snapshot isolation) with default options.
    pub fn begin(&self) -> Result<Transaction> {
        self.begin_with(TxnOptions::default())
    }

    /// Begins a transaction with `options`.
    pub fn begin_with(&self, options: TxnOptions) -> Result<Transaction> {
        self.engine.check_open()?;
        Ok(Transaction::begin(&self.engine, options))
    }

    /// Runs `body` in a transaction and commits it, retrying the whole transaction when it loses
    /// a conflict, at most `attempts_max` times in all; the last conflict is returned if every
    /// attempt lost. Any other error stops at once.
    pub fn transact<T>(
        &self,
        options: TxnOptions,
        attempts_max: usize,
        mut body: impl FnMut(&mut Transaction) -> Result<T>,
    ) -> Result<T> {
        let mut attempt = 1;
        loop {
            let mut transaction = self.begin_with(options.clone())?;
            let outcome =
                body(&mut transaction).and_then(|value| transaction.commit().map(|()| value));
            match outcome {
                Err(error) if error.kind() == ErrorKind::Conflict && attempt < attempts_max => {
                    attempt += 1
                }
                outcome => return outcome,
            }
        }
    }

    /// Makes every acknowledged write durable (`fdatasync`).
    pub fn sync(&self) -> Result<()> {
        self.engine.check_open()?;
        self.store().heads.flush_all(true)
    }

    /// Runs the cleaner now over every segment holding dead data; returns the segments freed.
    pub fn compact(&self) -> Result<u64> {
        self.engine.check_open()?;
        self.cleaner.compact()
    }

    /// Writes an index checkpoint now.
    pub fn checkpoint(&self) -> Result<()> {
        self.engine.check_open()?;
        self.checkpointer.write()
    }

    /// Verifies every record's CRC on every segment, that every index entry points at a valid
    /// record of its key, and the live-byte counters. See [`CheckReport`].
    pub fn check(&self) -> Result<CheckReport> {
        self.engine.check_open()?;
        // The cleaner moves records; it must not run between reading the index and the media.
        let _no_cleaning = self.cleaner.pause();
        check::check(self.store())
    }

    /// What recovery did when this KVDB opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery_report
    }

    pub fn path(&self) -> &Path {
        &self.home
    }

    /// A copy of the engine's counters.
    pub fn stats(&self) -> Stats {
        Stats::collect(self.store(), self.engine.snapshots.summary())
    }

    /// Flushes, syncs, writes a checkpoint and releases the KVDB. Dropping the `Db` does the
    /// same but can only log errors.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        let Some(workers) = self.workers.lock().take() else {
            return Ok(());
        };
        workers.stop();
        let result = (|| {
            self.store().poison.check()?;
            self.store().heads.flush_all(true)?;
            self.checkpointer.write()
        })();
        self.engine.mark_closed();
        self.lock_file.lock().take();
        result
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Err(error) = self.shutdown() {
            tracing::error!(%error, "closing the KVDB failed");
        }
    }
}
