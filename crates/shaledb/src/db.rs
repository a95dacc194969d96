//! [`Db`]: the public handle on one KVDB. It opens the home (locks, manifest, media
//! directories), has the store recovered, starts the background jobs on it (and the warming of
//! the value cache), and manages KVSs, batches, snapshots, transactions and maintenance;
//! closing flushes, checkpoints, saves the cache's keys, seals the active segments and releases
//! the home.

use crate::backup::{self, BackupReport};
use crate::batch::WriteBatch;
use crate::check::{self, CheckReport};
use crate::checkpointer::Checkpointer;
use crate::commit::SyncPoint;
use crate::engine::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::gc::Cleaner;
use crate::home::Home;
use crate::index::{KvsIndex, PartitionedIndex};
use crate::kvs::Kvs;
use crate::limits::{KVS_COUNT_MAX, KVS_NAME_BYTES_MAX};
use crate::manifest::Edit;
use crate::media::replace_file_durably;
use crate::options::{KvsOptions, Options};
use crate::poison::Poison;
use crate::recovery::RecoveryReport;
use crate::snapshot::Snapshot;
use crate::sorter::Sorter;
use crate::stats::Stats;
use crate::store::{KvsState, Store};
use crate::txn::{Transaction, TxnOptions};
use crate::warmer::Warmer;
use crate::worker::{Jobs, Warming, Workers};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// A KVDB: a directory holding named KVSs. Cheap to share: clone the [`Kvs`] handles it gives,
/// or wrap it in an `Arc`. Dropping it closes it (see [`Db::close`]).
pub struct Db {
    engine: Arc<Engine>,
    /// The home, its manifest and the locks on every directory; released at close.
    home: Mutex<Option<Home>>,
    path: std::path::PathBuf,
    /// The KVSs by name (the store knows them by id); changed only under `kvs_changes`.
    kvs_by_name: RwLock<HashMap<String, Arc<KvsState>>>,
    /// One KVS creation or drop at a time, so a name is checked and recorded together.
    kvs_changes: Mutex<()>,
    cleaner: Arc<Cleaner>,
    sorter: Arc<Sorter>,
    checkpointer: Arc<Checkpointer>,
    checkpoint_dir: std::path::PathBuf,
    recovery_report: RecoveryReport,
    workers: Mutex<Option<Workers>>,
    warmer: Arc<Warmer>,
    /// The thread warming the value cache, while it may still run.
    warming: Mutex<Option<Warming>>,
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
    /// Opens the KVDB in directory `path`, or creates one there if the directory is empty or
    /// missing (and `options.create_if_missing`). A directory that holds files but no KVDB
    /// manifest is an error: a KVDB is never silently created over something else.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let poison = Arc::new(Poison::default());
        let mut home = Home::open(path.as_ref(), &options, poison.clone())?;
        let (store, mut recovery_report, to_rescue) = Store::open(&home, &options, poison)?;
        if !options.read_only {
            home.finish_open()?;
        }
        recovery_report.created = home.report.created;
        recovery_report.upgraded_from_catalog = home.report.upgraded_from_catalog;
        recovery_report.manifest_torn_tail = home.report.manifest_torn_tail.clone();
        recovery_report.adopted_dirs = home.report.adopted_dirs.clone();
        if let Some(salvage) = &mut recovery_report.salvage {
            salvage
                .problems
                .splice(0..0, home.report.salvaged.iter().cloned());
        }
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
            home.manifest.state().media.staging_bytes_max,
            options.segment_bytes,
            options.cleaner_deferred_segments,
        ));
        let sorter = Arc::new(Sorter::new(store.clone(), cleaner.clone()));
        let checkpointer = Arc::new(Checkpointer::new(
            store.clone(),
            home.checkpoint_dir().to_path_buf(),
            options.checkpoint_interval_bytes,
        ));
        if let Some(salvage) = &mut recovery_report.salvage {
            for id in to_rescue {
                let (aside, lost) = cleaner.rescue(id)?;
                salvage.rescued_segments.push(aside.display().to_string());
                salvage.lost_keys.extend(lost);
            }
            let report_file = home.path.join(format!(
                "salvage-report-{}.json",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_secs())
            ));
            salvage.report_file = Some(report_file.display().to_string());
            let json = serde_json::to_vec_pretty(&salvage).expect("a report serializes");
            let name = report_file.file_name().expect("a file name");
            replace_file_durably(&home.path, &name.to_string_lossy(), &json)?;
        }
        let index_rebuilt =
            recovery_report.checkpoint_rejected.is_some() || recovery_report.salvage.is_some();
        if index_rebuilt && !options.read_only {
            // The index was rebuilt (or changed by a salvage): replace the checkpoint at once.
            checkpointer.write()?;
        }
        let warmer = Arc::new(Warmer::new(store.clone(), home.path.clone(), &options));
        // The open does not wait for the warming: it runs beside the clients' first reads.
        let warming = if warmer.is_warming() {
            Some(Warming::start(warmer.clone(), store.poison.clone())?)
        } else {
            None
        };
        let workers = if options.read_only {
            None
        } else {
            let started = Workers::start(Jobs {
                store: store.clone(),
                cleaner: cleaner.clone(),
                sorter: sorter.clone(),
                checkpointer: checkpointer.clone(),
                durability: options.durability,
                clean: options.cleaner,
                sort_bytes_per_sec: options.sort_bytes_per_sec,
                capacity_dir: home.capacity_dir().to_path_buf(),
                warmer: warmer.clone(),
            });
            match started {
                Ok(workers) => Some(workers),
                Err(error) => {
                    // The warming runs already, and no `Db` will stop it at close.
                    if let Some(warming) = warming {
                        warming.stop();
                    }
                    return Err(error);
                }
            }
        };
        let checkpoint_dir = home.checkpoint_dir().to_path_buf();
        Ok(Db {
            engine: Arc::new(Engine::new(store, options)),
            path: home.path.clone(),
            home: Mutex::new(Some(home)),
            kvs_by_name: RwLock::new(kvs_by_name),
            kvs_changes: Mutex::new(()),
            cleaner,
            sorter,
            checkpointer,
            checkpoint_dir,
            recovery_report,
            workers: Mutex::new(workers),
            warmer,
            warming: Mutex::new(warming),
        })
    }

    fn store(&self) -> &Store {
        &self.engine.store
    }

    /// The KVS named `name`, created with default options on first use.
    pub fn kvs(&self, name: &str) -> Result<Kvs> {
        self.kvs_with_options(name, KvsOptions::default())
    }

    /// The KVS named `name`, created with `options` if it does not exist (a read-only KVDB
    /// creates none: `NotFound`). An existing KVS keeps the options it was created with.
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
        if self.engine.options.read_only {
            return Err(Error::KvsNotFound(name.to_string()));
        }
        let _one_change = self.kvs_changes.lock();
        if let Some(state) = self.kvs_by_name.read().get(name) {
            return Ok(self.handle(state.clone()));
        }
        let manifest = &self.store().lifecycle.manifest;
        let (count, id) = {
            let state = manifest.state();
            (state.kvs.len(), state.next_kvs_id)
        };
        if count >= KVS_COUNT_MAX {
            return Err(Error::LimitExceeded {
                what: "KVS count",
                limit: KVS_COUNT_MAX as u64,
                actual: count as u64 + 1,
            });
        }
        manifest.record(&Edit::KvsCreated {
            id,
            name: name.to_string(),
            options: options.clone(),
        })?;
        let index = PartitionedIndex::new(options.key_groups);
        let state = Arc::new(KvsState::new(id, name.to_string(), options, index));
        // The store knows the KVS before any caller can find it by name: a commit through a
        // handle found by name while the store did not know it would have records the cleaner's
        // walk and scan take for a dropped KVS's (found by review).
        self.store().kvs.insert(state.clone());
        self.kvs_by_name
            .write()
            .insert(name.to_string(), state.clone());
        Ok(self.handle(state))
    }

    fn handle(&self, state: Arc<KvsState>) -> Kvs {
        Kvs::new(self.engine.clone(), state)
    }

    /// Names of all KVSs, sorted.
    pub fn list_kvs(&self) -> Result<Vec<String>> {
        self.engine.check_open()?;
        let mut names: Vec<String> = self.kvs_by_name.read().keys().cloned().collect();
        names.sort();
        Ok(names)
    }

    /// Drops the KVS `name` and all its data. Its handles return errors afterwards.
    pub fn drop_kvs(&self, name: &str) -> Result<()> {
        self.engine.check_open()?;
        self.engine.check_writable()?;
        let _one_change = self.kvs_changes.lock();
        let Some(state) = self.kvs_by_name.read().get(name).cloned() else {
            return Err(Error::KvsNotFound(name.to_string()));
        };
        self.store()
            .lifecycle
            .manifest
            .record(&Edit::KvsDropped { id: state.id })?;
        self.kvs_by_name.write().remove(name);
        self.store().kvs.remove(state.id);
        let mut parts = state.index.write_all();
        state.mark_dropped();
        for index in &mut parts {
            index.for_each_version(|_, entry, _| self.store().free(entry));
            **index = KvsIndex::default();
        }
        Ok(())
    }

    /// A new, empty write batch.
    pub fn batch(&self) -> WriteBatch {
        WriteBatch::default()
    }

    /// Applies `batch` atomically: after a crash either all of it is there or none.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        let point = self.write_unsynced(batch)?;
        self.wait_synced(point)
    }

    /// Applies `batch` as `write` does, but under `Durability::Sync` returns before the log is
    /// synced: the write is acknowledged as durable only once `wait_synced` has synced the point
    /// this returns. A server answers a pipeline's writes this way with one wait, off its
    /// network threads. Readers see the batch at once, as they do during `write`'s wait.
    pub fn write_unsynced(&self, mut batch: WriteBatch) -> Result<SyncPoint> {
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
        self.engine
            .commit_unsynced(&mut batch.ops, batch.frees_space)
    }

    /// Waits until every write up to `point` is durable (nothing to wait for outside
    /// `Durability::Sync`, where the point is empty). An error means they may not be: the
    /// KVDB is poisoned, and those writes must not be acknowledged.
    pub fn wait_synced(&self, point: SyncPoint) -> Result<()> {
        self.engine.wait_synced(point)
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

    /// Makes every acknowledged write durable (`fdatasync`), and records in the manifest how far
    /// each active segment is durable.
    pub fn sync(&self) -> Result<()> {
        self.engine.check_open()?;
        self.store().heads.flush_all(true)?;
        self.store().heads.record_durable_points()
    }

    /// Rewrites in key order every key range scans found scattered and still waiting for the
    /// sorter, then runs the cleaner over every segment holding dead data; returns the segments
    /// freed.
    pub fn compact(&self) -> Result<u64> {
        self.engine.check_open()?;
        self.engine.check_writable()?;
        self.sorter.sort_step(u64::MAX)?;
        self.cleaner.compact()
    }

    /// Writes an index checkpoint now.
    pub fn checkpoint(&self) -> Result<()> {
        self.engine.check_open()?;
        self.engine.check_writable()?;
        self.checkpointer.write()
    }

    /// Verifies every record's CRC on every segment, that every index entry points at a valid
    /// record of its key, and the live-byte counters. See [`CheckReport`].
    pub fn check(&self) -> Result<CheckReport> {
        self.engine.check_open()?;
        // The cleaner moves records; it must not run between reading the index and the media.
        let _no_cleaning = self.cleaner.pause();
        check::check(
            self.store(),
            &self.checkpoint_dir,
            &self.recovery_report.leftovers_pending,
        )
    }

    /// Copies this KVDB, as it was at one instant, into `dest` (missing or an empty directory)
    /// while reads and writes go on. The copy is a KVDB of its own, with a new id, that opens
    /// like any other; every segment copied is read back and verified first, and the copy's
    /// manifest is written last, so a backup that fails leaves no KVDB at `dest`. Works on a
    /// read-only KVDB too.
    pub fn backup(&self, dest: impl AsRef<Path>) -> Result<BackupReport> {
        self.engine.check_open()?;
        backup::backup(
            self.store(),
            &self.cleaner,
            &self.checkpointer,
            dest.as_ref(),
            &*self.engine.options.storage(),
        )
    }

    /// What recovery did when this KVDB opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery_report
    }

    /// The KVDB's id, chosen at creation and kept for its life (a backup gets a new one).
    pub fn id(&self) -> u64 {
        self.store().lifecycle.manifest.state().kvdb_id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A copy of the engine's counters.
    pub fn stats(&self) -> Stats {
        Stats::collect(
            self.store(),
            self.engine.snapshots.summary(),
            self.warmer.is_warming(),
        )
    }

    /// Flushes, syncs, writes a checkpoint, saves the keys the value cache holds (the
    /// warm-keys file, for the next open) and releases the KVDB. Dropping the `Db` does the
    /// same but can only log errors.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        let Some(home) = self.home.lock().take() else {
            return Ok(());
        };
        if let Some(warming) = self.warming.lock().take() {
            warming.stop();
        }
        let result = match self.workers.lock().take() {
            // Read-only: nothing was written, nothing to make durable.
            None => Ok(()),
            Some(workers) => {
                workers.stop();
                (|| {
                    self.store().poison.check()?;
                    self.store().heads.flush_all(true)?;
                    self.checkpointer.write()?;
                    self.warmer.save();
                    self.store().heads.close()
                })()
            }
        };
        self.engine.mark_closed();
        drop(home);
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
