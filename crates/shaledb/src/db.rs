//! The KVDB: opening and closing, KVSs, the commit path (put, delete, prefix delete, batches),
//! the read path (get, multi-get), snapshots, sync and stats.

use crate::cache::ValueCache;
use crate::catalog::{Catalog, CatalogEntry, MediaDirs};
use crate::counters::Counters;
use crate::error::{Error, Result};
use crate::index::{Entry, KvsIndex};
use crate::iter::Iter;
use crate::limits::{KEY_BYTES_MAX, KVS_COUNT_MAX, KVS_NAME_BYTES_MAX, VALUE_BYTES_MAX};
use crate::log::{Heads, HeadsConfig};
use crate::media::{MediaClass, ReadPurpose, WritePurpose};
use crate::options::{Durability, KvsOptions, Options};
use crate::poison::Poison;
use crate::record::{self, RecordKind, RecordRef, FLAG_BATCH_CONTINUES};
use crate::recovery::{self, RecoveryReport};
use crate::segment::{HeadKind, SegmentMeta, SegmentTable};
use crate::snapshot::SnapshotRegistry;
use crate::space::SpaceBudget;
use crate::stats::{HeadStats, MediaStats, Stats};
use crate::txn::{ConflictTracker, Transaction, TxnOptions};
use crate::worker::Workers;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const LOCK_FILE_NAME: &str = "LOCK";
/// A read that finds its segment freed (the cleaner moved the record) looks the key up again;
/// more than this many times in a row means something is wrong.
const READ_RETRIES_MAX: usize = 16;

/// One KVS inside the KVDB.
pub(crate) struct KvsState {
    pub id: u32,
    pub name: String,
    pub options: KvsOptions,
    pub index: RwLock<KvsIndex>,
    pub dropped: AtomicBool,
}

/// Everything a KVDB shares between handles and background workers.
pub(crate) struct Inner {
    pub home: PathBuf,
    /// Where index checkpoints live: the fastest media class present.
    pub checkpoint_dir: PathBuf,
    pub media: MediaDirs,
    pub options: Options,
    lock_file: Mutex<Option<File>>,
    catalog: Mutex<Catalog>,
    kvs: RwLock<HashMap<String, Arc<KvsState>>>,
    kvs_by_id: RwLock<HashMap<u32, Arc<KvsState>>>,
    pub segments: Arc<SegmentTable>,
    pub heads: Heads,
    pub next_seqno: Arc<AtomicU64>,
    /// Every commit with a seqno up to this one is fully applied to the indexes.
    pub visible_seqno: AtomicU64,
    /// The durable checkpoint covers every record with a smaller seqno (0: no checkpoint).
    pub covered_seqno: AtomicU64,
    /// Client-head LSN when the last checkpoint began.
    pub checkpoint_lsn: AtomicU64,
    /// Size of the last checkpoint this process wrote (0 before the first): spaces the next.
    pub checkpoint_last_bytes: AtomicU64,
    pub cache: ValueCache,
    pub snapshots: SnapshotRegistry,
    pub conflicts: ConflictTracker,
    pub counters: Counters,
    pub poison: Arc<Poison>,
    closed: AtomicBool,
    pub recovery_report: RecoveryReport,
    /// One checkpoint at a time.
    pub checkpoint_lock: Mutex<()>,
    /// One cleaning pass at a time.
    pub cleaner_lock: Mutex<()>,
    pub space: SpaceBudget,
    /// Orders commits and snapshot registrations across the client heads: seqnos are assigned,
    /// applied and published under it (invariant I4).
    pub commit_order: Mutex<()>,
}

/// A KVDB: a directory holding named KVSs. Cheap to share: clone the [`Kvs`] handles it gives,
/// or wrap it in an `Arc`. Dropping it closes it (see [`Db::close`]).
pub struct Db {
    inner: Arc<Inner>,
    workers: Mutex<Option<Workers>>,
}

/// A handle on one KVS. Clone it freely; it stays usable until the KVDB closes or the KVS is dropped.
#[derive(Clone)]
pub struct Kvs {
    pub(crate) db: Arc<Inner>,
    pub(crate) state: Arc<KvsState>,
}

/// Writes applied all together or not at all, also across a crash.
#[derive(Default)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
    encoded_bytes: u64,
    error: Option<Error>,
}

pub(crate) struct BatchOp {
    kvs: Arc<KvsState>,
    kind: RecordKind,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl BatchOp {
    /// A put (`Some(value)`) or delete (`None`) of an already validated key and value.
    pub(crate) fn new(kvs: Arc<KvsState>, key: Vec<u8>, value: Option<Vec<u8>>) -> Self {
        let (kind, value) = match value {
            Some(value) => (RecordKind::Put, value),
            None => (RecordKind::Tombstone, Vec::new()),
        };
        BatchOp {
            kvs,
            kind,
            key,
            value,
        }
    }

    pub(crate) fn kvs_id(&self) -> u32 {
        self.kvs.id
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }
}

/// A consistent read-only view of the KVDB at one moment: later writes do not change it.
pub struct Snapshot {
    db: Arc<Inner>,
    seqno: u64,
}

pub(crate) fn validate_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::InvalidArgument("keys must not be empty".into()));
    }
    if key.len() > KEY_BYTES_MAX {
        return Err(Error::LimitExceeded {
            what: "key",
            limit: KEY_BYTES_MAX as u64,
            actual: key.len() as u64,
        });
    }
    Ok(())
}

pub(crate) fn validate_value(value: &[u8]) -> Result<()> {
    if value.len() > VALUE_BYTES_MAX {
        return Err(Error::LimitExceeded {
            what: "value",
            limit: VALUE_BYTES_MAX as u64,
            actual: value.len() as u64,
        });
    }
    Ok(())
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
        // Checkpoints go to the fastest class present.
        let checkpoint_dir = media
            .staging_dir
            .clone()
            .unwrap_or_else(|| media.capacity_dir.clone());
        let mut class_dirs = vec![(MediaClass::Capacity, media.capacity_dir.as_path())];
        if let Some(staging) = &media.staging_dir {
            class_dirs.push((MediaClass::Staging, staging.as_path()));
        }
        let counters = Counters::default();
        let kvs_ids: HashSet<u32> = catalog.kvs.values().map(|entry| entry.id).collect();
        let started = std::time::Instant::now();
        let recovered = recovery::recover(
            &checkpoint_dir,
            &class_dirs,
            &kvs_ids,
            options.direct_io,
            &counters,
        )?;
        tracing::info!(
            home = %home.display(),
            millis = started.elapsed().as_millis() as u64,
            report = ?recovered.report,
            "KVDB recovered"
        );
        let segments = Arc::new(SegmentTable::new(
            [
                media
                    .staging_dir
                    .clone()
                    .unwrap_or_else(|| home.join(MediaClass::Staging.name())),
                media.capacity_dir.clone(),
            ],
            recovered.next_segment_id,
        ));
        for segment in recovered.segments {
            segments.insert(segment);
        }
        let next_seqno = Arc::new(AtomicU64::new(recovered.next_seqno));
        let poison = Arc::new(Poison::default());
        let heads = Heads::open(
            &HeadsConfig {
                segment_bytes: options.segment_bytes,
                write_buffer_bytes: options.write_buffer_bytes,
                flush_chunk_bytes: options.flush_chunk_bytes,
                direct_io: options.direct_io,
                segments: segments.clone(),
                poison: poison.clone(),
                next_seqno: next_seqno.clone(),
            },
            media.staging_dir.is_some(),
            |class| counters.media(class).clone(),
        )?;
        let mut indexes = recovered.indexes;
        let mut kvs = HashMap::new();
        let mut kvs_by_id = HashMap::new();
        for (name, entry) in &catalog.kvs {
            let state = Arc::new(KvsState {
                id: entry.id,
                name: name.clone(),
                options: entry.options.clone(),
                index: RwLock::new(indexes.remove(&entry.id).unwrap_or_default()),
                dropped: AtomicBool::new(false),
            });
            kvs.insert(name.clone(), state.clone());
            kvs_by_id.insert(entry.id, state);
        }
        let space = SpaceBudget::new(
            options.space_bytes_max,
            options.reserve_segments * options.segment_bytes,
            // Without a cleaner nothing could bring usage back under a soft budget.
            if options.cleaner {
                options.space_target_live_ratio
            } else {
                0.0
            },
        );
        space.refresh(&segments, &media.capacity_dir)?;
        let visible = recovered.next_seqno - 1;
        let inner = Arc::new(Inner {
            home,
            checkpoint_dir,
            media,
            cache: ValueCache::new(options.cache_bytes),
            options,
            lock_file: Mutex::new(Some(lock_file)),
            catalog: Mutex::new(catalog),
            kvs: RwLock::new(kvs),
            kvs_by_id: RwLock::new(kvs_by_id),
            segments,
            heads,
            next_seqno,
            visible_seqno: AtomicU64::new(visible),
            covered_seqno: AtomicU64::new(recovered.covered_seqno),
            checkpoint_lsn: AtomicU64::new(0),
            checkpoint_last_bytes: AtomicU64::new(0),
            snapshots: SnapshotRegistry::default(),
            conflicts: ConflictTracker::default(),
            counters,
            poison,
            closed: AtomicBool::new(false),
            recovery_report: recovered.report,
            checkpoint_lock: Mutex::new(()),
            cleaner_lock: Mutex::new(()),
            commit_order: Mutex::new(()),
            space,
        });
        let workers = Workers::start(&inner)?;
        Ok(Db {
            inner,
            workers: Mutex::new(Some(workers)),
        })
    }

    /// The KVS named `name`, created with default options on first use.
    pub fn kvs(&self, name: &str) -> Result<Kvs> {
        self.kvs_with_options(name, KvsOptions::default())
    }

    /// The KVS named `name`, created with `options` if it does not exist. An existing KVS keeps
    /// the options it was created with.
    pub fn kvs_with_options(&self, name: &str, options: KvsOptions) -> Result<Kvs> {
        self.inner.check_open()?;
        validate_kvs_name(name)?;
        options.validate()?;
        if let Some(state) = self.inner.kvs.read().get(name) {
            return Ok(self.handle(state.clone()));
        }
        if options.media_policy.writes_to_staging() && !self.inner.heads.has_staging() {
            return Err(Error::InvalidArgument(format!(
                "KVS {name:?}: media policy {:?} needs a staging class, and this KVDB has none",
                options.media_policy
            )));
        }
        let mut catalog = self.inner.catalog.lock();
        if let Some(state) = self.inner.kvs.read().get(name) {
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
        updated.store(&self.inner.home)?;
        *catalog = updated;
        let state = Arc::new(KvsState {
            id,
            name: name.to_string(),
            options,
            index: RwLock::new(KvsIndex::default()),
            dropped: AtomicBool::new(false),
        });
        self.inner
            .kvs
            .write()
            .insert(name.to_string(), state.clone());
        self.inner.kvs_by_id.write().insert(id, state.clone());
        Ok(self.handle(state))
    }

    fn handle(&self, state: Arc<KvsState>) -> Kvs {
        Kvs {
            db: self.inner.clone(),
            state,
        }
    }

    /// Names of all KVSs, sorted.
    pub fn list_kvs(&self) -> Result<Vec<String>> {
        self.inner.check_open()?;
        Ok(self.inner.catalog.lock().kvs.keys().cloned().collect())
    }

    /// Drops the KVS `name` and all its data. Its handles return errors afterwards.
    pub fn drop_kvs(&self, name: &str) -> Result<()> {
        self.inner.check_open()?;
        let mut catalog = self.inner.catalog.lock();
        let Some(entry) = catalog.kvs.get(name).cloned() else {
            return Err(Error::KvsNotFound(name.to_string()));
        };
        let mut updated = catalog.clone();
        updated.kvs.remove(name);
        updated.store(&self.inner.home)?;
        *catalog = updated;
        let state = self
            .inner
            .kvs
            .write()
            .remove(name)
            .expect("catalog and map agree");
        self.inner.kvs_by_id.write().remove(&entry.id);
        let mut index = state.index.write();
        state.dropped.store(true, Ordering::Release);
        index.for_each_version(|_, entry| self.inner.free(entry));
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
        if batch.encoded_bytes > self.inner.options.batch_bytes_limit() {
            return Err(Error::LimitExceeded {
                what: "write batch",
                limit: self.inner.options.batch_bytes_limit(),
                actual: batch.encoded_bytes,
            });
        }
        self.inner.commit(&batch.ops)
    }

    /// A consistent view of every KVS as of now.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.inner.check_open()?;
        Ok(self.inner.take_snapshot())
    }

    /// Begins a transaction (snapshot isolation) with default options.
    pub fn begin(&self) -> Result<Transaction> {
        self.begin_with(TxnOptions::default())
    }

    /// Begins a transaction with `options`.
    pub fn begin_with(&self, options: TxnOptions) -> Result<Transaction> {
        self.inner.check_open()?;
        Ok(self.inner.begin_transaction(options))
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
                Err(error)
                    if error.kind() == crate::error::ErrorKind::Conflict
                        && attempt < attempts_max =>
                {
                    attempt += 1
                }
                outcome => return outcome,
            }
        }
    }

    /// Makes every acknowledged write durable (`fdatasync`).
    pub fn sync(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.heads.flush_all(true)
    }

    /// Runs the cleaner now over every segment holding dead data; returns the segments freed.
    pub fn compact(&self) -> Result<u64> {
        self.inner.check_open()?;
        crate::gc::compact(&self.inner)
    }

    /// Writes an index checkpoint now.
    pub fn checkpoint(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.write_checkpoint()
    }

    /// Verifies every record's CRC on every segment, that every index entry points at a valid
    /// record of its key, and the live-byte counters. See [`crate::CheckReport`].
    pub fn check(&self) -> Result<crate::check::CheckReport> {
        self.inner.check_open()?;
        crate::check::check(&self.inner)
    }

    /// What recovery did when this KVDB opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.recovery_report
    }

    pub fn path(&self) -> &Path {
        &self.inner.home
    }

    /// A copy of the engine's counters.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
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
        workers.stop(&self.inner);
        let result = (|| {
            self.inner.poison.check()?;
            self.inner.heads.flush_all(true)?;
            self.inner.write_checkpoint()
        })();
        self.inner.closed.store(true, Ordering::Release);
        self.inner.lock_file.lock().take();
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

/// The KVDB's media classes: those it was created with, or, for a new KVDB, those `options` give.
fn resolve_media(
    home: &Path,
    options: &Options,
    remembered: Option<&MediaDirs>,
) -> Result<MediaDirs> {
    let requested = MediaDirs {
        capacity_dir: options
            .capacity_dir
            .clone()
            .unwrap_or_else(|| home.join(MediaClass::Capacity.name())),
        staging_dir: options.staging_dir.clone(),
        staging_bytes_max: options.staging_bytes_max,
    };
    let Some(remembered) = remembered else {
        return Ok(requested);
    };
    let conflict = |what: &str, was: Option<&Path>, asked: Option<&Path>| {
        Error::InvalidArgument(format!(
            "KVDB {} was created with {what} {:?}, not {:?}; media classes are fixed at creation",
            home.display(),
            was,
            asked
        ))
    };
    if options.capacity_dir.is_some()
        && options.capacity_dir.as_deref() != Some(remembered.capacity_dir.as_path())
    {
        return Err(conflict(
            "capacity directory",
            Some(&remembered.capacity_dir),
            options.capacity_dir.as_deref(),
        ));
    }
    if options.staging_dir.is_some() && options.staging_dir != remembered.staging_dir {
        return Err(conflict(
            "staging directory",
            remembered.staging_dir.as_deref(),
            options.staging_dir.as_deref(),
        ));
    }
    Ok(MediaDirs {
        // The budget may change between opens; the directories may not.
        staging_bytes_max: if options.staging_dir.is_some() {
            options.staging_bytes_max
        } else {
            remembered.staging_bytes_max
        },
        ..remembered.clone()
    })
}

fn lock_home(home: &Path) -> Result<File> {
    let path = home.join(LOCK_FILE_NAME);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|error| Error::io(format!("open {}", path.display()), error))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(home.to_path_buf())),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(Error::io(format!("lock {}", path.display()), error))
        }
    }
}

impl Inner {
    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("KVDB"));
        }
        Ok(())
    }

    pub fn kvs_by_id(&self, id: u32) -> Option<Arc<KvsState>> {
        self.kvs_by_id.read().get(&id).cloned()
    }

    pub fn all_kvs(&self) -> Vec<Arc<KvsState>> {
        let mut all: Vec<_> = self.kvs_by_id.read().values().cloned().collect();
        all.sort_by_key(|state| state.id);
        all
    }

    /// Forgets a version that nothing points at any more: subtracts it from its segment's live
    /// bytes and drops its cached value, which no reader can ask for again (left in, a key
    /// updated often would fill the cache with its dead versions).
    pub fn free(&self, entry: Entry) {
        if let Some(segment) = self.segments.get(entry.location.segment) {
            segment.sub_live(u64::from(entry.location.len));
        }
        self.cache.remove(entry.seqno);
    }

    pub(crate) fn take_snapshot(self: &Arc<Self>) -> Snapshot {
        self.take_snapshot_then(|_| {})
    }

    /// Takes a snapshot and runs `also(seqno)` while no commit can happen.
    pub(crate) fn take_snapshot_then(self: &Arc<Self>, also: impl FnOnce(u64)) -> Snapshot {
        // Registering under the commit-order lock orders the snapshot against every commit.
        let _commits_paused = self.commit_order.lock();
        let seqno = self.visible_seqno.load(Ordering::SeqCst);
        self.snapshots.register(seqno);
        also(seqno);
        Snapshot {
            db: self.clone(),
            seqno,
        }
    }

    pub fn release_snapshot(&self, seqno: u64) {
        self.snapshots.release(seqno);
        for kvs in self.all_kvs() {
            let mut index = kvs.index.write();
            // Read under the index lock: see SnapshotRegistry::open_seqnos.
            let open = self.snapshots.open_seqnos();
            for freed in index.prune_old(|seqno, superseded| {
                crate::snapshot::needed_by_any(&open, seqno, superseded)
            }) {
                self.free(freed);
            }
        }
    }

    /// Appends `ops` as one atomic batch and applies them to the indexes.
    fn commit(&self, ops: &[BatchOp]) -> Result<()> {
        self.commit_validated(ops, &|_| Ok(()))
    }

    /// Like `commit`, but first runs `validate` against the recent commits, with every lock of
    /// the commit held, so nothing can commit between the check and the append. A failed
    /// validation writes nothing.
    pub(crate) fn commit_validated(
        &self,
        ops: &[BatchOp],
        validate: &dyn Fn(&ConflictTracker) -> Result<()>,
    ) -> Result<()> {
        self.check_open()?;
        self.poison.check()?;
        if ops.is_empty() {
            return Ok(());
        }
        // Pacing happens before any lock is taken, so a slowed writer blocks nobody.
        let total_bytes: usize = ops
            .iter()
            .map(|op| record::encoded_len(op.key.len(), op.value.len()))
            .sum();
        if let Some(delay) = self.space.admit(total_bytes as u64)? {
            // The reserve is running low: give the cleaner time, in proportion.
            std::thread::sleep(delay);
            self.counters.throttled_micros.add(delay.as_micros() as u64);
        }
        // Batches go to staging if any KVS they write keeps new data there.
        let class = if self.heads.has_staging()
            && ops
                .iter()
                .any(|op| op.kvs.options.media_policy.writes_to_staging())
        {
            MediaClass::Staging
        } else {
            MediaClass::Capacity
        };
        let head = self.heads.at(class, HeadKind::Client);
        let mut involved: Vec<&Arc<KvsState>> = ops.iter().map(|op| &op.kvs).collect();
        involved.sort_by_key(|kvs| kvs.id);
        involved.dedup_by_key(|kvs| kvs.id);
        // No I/O under the index locks: a flush or roll (pwrite, fdatasync) happens in
        // `make_room` before they are taken, and if other writers used the room up meanwhile,
        // every lock is released and the room made again. Waiting for I/O while holding an index
        // write lock would stall every reader of the KVS for the I/O's duration.
        let (mut guards, commit_order, mut appender) = loop {
            head.make_room(total_bytes)?;
            // Lock order: KVS indexes by id, the commit order, then the client head (I4).
            let mut guards: Vec<(u32, RwLockWriteGuard<'_, KvsIndex>)> =
                Vec::with_capacity(involved.len());
            for kvs in &involved {
                let guard = kvs.index.write();
                if kvs.dropped.load(Ordering::Acquire) {
                    return Err(Error::KvsNotFound(kvs.name.clone()));
                }
                guards.push((kvs.id, guard));
            }
            let commit_order = self.commit_order.lock();
            let appender = head.lock();
            if appender.has_room(total_bytes) {
                break (guards, commit_order, appender);
            }
        };
        let mut encoded = Vec::with_capacity(total_bytes);
        validate(&self.conflicts)?;
        let segment = appender.segment().clone();
        let snapshot_max = self.snapshots.max();
        let first_seqno = self.next_seqno.load(Ordering::SeqCst);
        self.next_seqno
            .store(first_seqno + ops.len() as u64, Ordering::SeqCst);
        for (position, op) in ops.iter().enumerate() {
            let seqno = first_seqno + position as u64;
            let flags = if position + 1 < ops.len() {
                FLAG_BATCH_CONTINUES
            } else {
                0
            };
            encoded.clear();
            record::encode(
                &mut encoded,
                &RecordRef {
                    kind: op.kind,
                    flags,
                    kvs_id: op.kvs.id,
                    seqno,
                    key: &op.key,
                    value: &op.value,
                },
            );
            let location = appender.append(&encoded);
            let index = &mut guards
                .iter_mut()
                .find(|(id, _)| *id == op.kvs.id)
                .expect("every involved KVS is locked")
                .1;
            self.apply(index, &segment, op, Entry { location, seqno }, snapshot_max);
        }
        if self.conflicts.is_tracking() {
            self.conflicts
                .record(ops.iter().enumerate().map(|(position, op)| {
                    (
                        op.kvs.id,
                        op.kind,
                        op.key.as_slice(),
                        first_seqno + position as u64,
                    )
                }));
        }
        self.visible_seqno
            .store(first_seqno + ops.len() as u64 - 1, Ordering::SeqCst);
        let lsn = appender.end_lsn();
        drop(appender);
        // Released before the durability wait below: held across it, every commit would wait
        // for the previous one's fdatasync and group commit could never batch.
        drop(commit_order);
        self.space.note_appended(total_bytes as u64);
        drop(guards);
        if self.options.cache_writes {
            for (position, op) in ops.iter().enumerate() {
                if op.kind == RecordKind::Put {
                    let seqno = first_seqno + position as u64;
                    self.cache.insert(seqno, Bytes::copy_from_slice(&op.value));
                }
            }
        }
        let user_bytes: usize = ops.iter().map(|op| op.key.len() + op.value.len()).sum();
        self.counters.user_bytes_written.add(user_bytes as u64);
        if self.options.durability == Durability::Sync {
            head.wait_durable(lsn)?;
        }
        Ok(())
    }

    fn apply(
        &self,
        index: &mut KvsIndex,
        segment: &SegmentMeta,
        op: &BatchOp,
        entry: Entry,
        snapshot_max: u64,
    ) {
        match op.kind {
            RecordKind::Put => {
                segment.add_live(u64::from(entry.location.len));
                if let Some(replaced) = index.put(&op.key, entry, snapshot_max) {
                    self.free(replaced);
                }
            }
            RecordKind::Tombstone => {
                if let Some(removed) = index.remove(&op.key, entry.seqno, snapshot_max) {
                    self.free(removed);
                }
            }
            RecordKind::PrefixTombstone => {
                for removed in index.remove_prefix(&op.key, entry.seqno, snapshot_max) {
                    self.free(removed);
                }
            }
            RecordKind::SnapshotCopy => unreachable!("clients never write snapshot copies"),
        }
    }

    /// The value of `key` in `kvs` at snapshot `at` (newest if `None`).
    pub fn get(&self, kvs: &KvsState, key: &[u8], at: Option<u64>) -> Result<Option<Bytes>> {
        validate_key(key)?;
        self.check_open()?;
        self.counters.gets.add(1);
        for _ in 0..READ_RETRIES_MAX {
            let entry = {
                let index = kvs.index.read();
                match at {
                    None => index.get(key),
                    Some(seqno) => index.get_at(key, seqno),
                }
            };
            let Some(entry) = entry else {
                return Ok(None);
            };
            if let Some(value) = self.read_value(kvs.id, key, entry, ReadPurpose::Get)? {
                return Ok(Some(value));
            }
        }
        Err(Error::Io {
            context: format!("get from KVS {:?}", kvs.name),
            source: std::io::Error::other("the record kept moving while being read"),
        })
    }

    /// Reads the value of the version `entry` of `key`: from the cache, the write buffer, or
    /// one device read. `Ok(None)` means its segment was freed meanwhile: look the key up again.
    pub fn read_value(
        &self,
        kvs_id: u32,
        key: &[u8],
        entry: Entry,
        purpose: ReadPurpose,
    ) -> Result<Option<Bytes>> {
        if let Some(value) = self.cache.get(entry.seqno) {
            self.counters.cache_hits.add(1);
            return Ok(Some(value));
        }
        self.counters.cache_misses.add(1);
        let location = entry.location;
        let Some(segment) = self.segments.get(location.segment) else {
            return Ok(None);
        };
        let head = self.heads.at(segment.header.class, segment.header.head);
        let bytes = match head.read_buffered(&segment, location) {
            Some(bytes) => {
                self.counters.write_buffer_hits.add(1);
                bytes
            }
            None => {
                self.counters.get_device_reads.add(1);
                segment.file.read_exact_at(
                    u64::from(location.offset),
                    location.len as usize,
                    purpose,
                )?
            }
        };
        let corrupt =
            |detail: String| Error::corruption(segment.path(), u64::from(location.offset), detail);
        let record = record::decode(&bytes)
            .map_err(|error| corrupt(format!("record failed validation: {error:?}")))?;
        if !record.kind.has_value()
            || record.kvs_id != kvs_id
            || record.key != key
            || record.seqno != entry.seqno
        {
            return Err(corrupt(format!(
                "the index expected KVS {kvs_id} seqno {} but the record holds KVS {} seqno {}",
                entry.seqno, record.kvs_id, record.seqno
            )));
        }
        let value = Bytes::copy_from_slice(record.value);
        self.cache.insert(entry.seqno, value.clone());
        Ok(Some(value))
    }

    fn stats(&self) -> Stats {
        let segments = self.segments.all();
        let mut media: Vec<MediaStats> = MediaClass::ALL
            .iter()
            .map(|&class| {
                let counters = self.counters.media(class);
                let (bytes_written, bytes_read) = counters.snapshot();
                MediaStats {
                    class: class.name(),
                    bytes_written,
                    bytes_written_by_clients: counters.written(WritePurpose::Client),
                    bytes_written_by_cleaning: counters.written(WritePurpose::Cleaning),
                    bytes_written_by_checkpoints: counters.written(WritePurpose::Checkpoint),
                    bytes_read,
                    bytes_read_by_gets: counters.read(ReadPurpose::Get),
                    bytes_read_by_scans: counters.read(ReadPurpose::Scan),
                    bytes_read_by_cleaning: counters.read(ReadPurpose::Cleaning),
                    ..MediaStats::default()
                }
            })
            .collect();
        let mut live_bytes = 0;
        let mut segments_by_head: Vec<HeadStats> = HeadKind::ALL
            .iter()
            .map(|head| HeadStats {
                head: head.name(),
                ..HeadStats::default()
            })
            .collect();
        for segment in &segments {
            let head = &mut segments_by_head[segment.header.head as usize];
            head.segments += 1;
            head.segment_bytes += segment.disk_bytes();
            head.live_bytes += segment.live_bytes();
            let class = &mut media[segment.header.class as usize];
            class.segment_bytes += segment.disk_bytes();
            class.segments += 1;
            live_bytes += segment.live_bytes();
        }
        let (mut index_keys, mut index_bytes) = (0u64, 0u64);
        for kvs in self.all_kvs() {
            let index = kvs.index.read();
            index_keys += index.len() as u64;
            index_bytes += index.estimated_dram_bytes();
        }
        let (snapshots_open, oldest_snapshot_age_secs) = self.snapshots.summary();
        let (capacity_used_bytes, capacity_limit_bytes) = self.space.usage();
        let counters = &self.counters;
        Stats {
            user_bytes_written: counters.user_bytes_written.get(),
            total_bytes: media.iter().map(|class| class.segment_bytes).sum(),
            media,
            checkpoints_written: counters.checkpoints_written.get(),
            checkpoint_bytes_written: counters.checkpoint_bytes_written.get(),
            gets: counters.gets.get(),
            get_device_reads: counters.get_device_reads.get(),
            cache_hits: counters.cache_hits.get(),
            cache_misses: counters.cache_misses.get(),
            write_buffer_hits: counters.write_buffer_hits.get(),
            cache_bytes: self.cache.weight_bytes(),
            cache_bytes_budget: self.cache.budget_bytes(),
            index_keys,
            index_bytes,
            live_bytes,
            cleaner_segments_cleaned: counters.cleaner_segments_cleaned.get(),
            cleaner_bytes_copied: counters.cleaner_bytes_copied.get(),
            cleaner_tombstones_dropped: counters.cleaner_tombstones_dropped.get(),
            cleaner_live_fraction_avg: match counters.cleaner_segments_cleaned.get() {
                0 => 0.0,
                cleaned => {
                    counters.cleaner_live_fraction_micros.get() as f64 / 1e6 / cleaned as f64
                }
            },
            segments_by_head,
            throttled_secs: counters.throttled_micros.get() as f64 / 1e6,
            capacity_used_bytes,
            capacity_limit_bytes,
            snapshots_open,
            oldest_snapshot_age_secs,
            next_seqno: self.next_seqno.load(Ordering::SeqCst),
            direct_io: segments.iter().all(|segment| segment.file.is_direct()),
        }
    }
}

impl Kvs {
    pub fn name(&self) -> &str {
        &self.state.name
    }

    pub fn options(&self) -> &KvsOptions {
        &self.state.options
    }

    fn single(&self, kind: RecordKind, key: &[u8], value: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::default();
        batch.push(self, kind, key, value);
        if let Some(error) = batch.error {
            return Err(error);
        }
        self.db.commit(&batch.ops)
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.single(RecordKind::Put, key.as_ref(), value.as_ref())
    }

    /// The newest value of `key`, if any.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.check_live()?;
        self.db.get(&self.state, key.as_ref(), None)
    }

    /// Whether `key` has a value (costs no device read).
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.check_live()?;
        validate_key(key.as_ref())?;
        Ok(self.state.index.read().get(key.as_ref()).is_some())
    }

    /// Deletes `key` (a no-op if it has no value).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.single(RecordKind::Tombstone, key.as_ref(), &[])
    }

    /// Deletes every key that starts with `prefix`. When the KVS has a `prefix_len`, the
    /// prefix must be exactly that long.
    pub fn prefix_delete(&self, prefix: impl AsRef<[u8]>) -> Result<()> {
        self.single(RecordKind::PrefixTombstone, prefix.as_ref(), &[])
    }

    /// The values of `keys`, in order, read at one consistent moment.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        self.check_live()?;
        let snapshot = self.db.take_snapshot();
        keys.into_iter()
            .map(|key| self.db.get(&self.state, key.as_ref(), Some(snapshot.seqno)))
            .collect()
    }

    /// Keys in `range`, in order; reverse with `.rev()`. Reads a consistent view taken now.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        Iter::new(self.clone(), None, crate::bounds::owned_bounds(&range))
    }

    /// Every key starting with `prefix`, in order; reverse with `.rev()`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        Iter::new(
            self.clone(),
            None,
            crate::bounds::prefix_bounds(prefix.as_ref()),
        )
    }

    /// Every key, in order.
    pub fn iter(&self) -> Iter {
        self.range::<&[u8], _>(..)
    }

    /// Number of keys (counted from the index, no device reads).
    pub fn len(&self) -> Result<usize> {
        self.check_live()?;
        Ok(self.state.index.read().len())
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    pub(crate) fn check_live(&self) -> Result<()> {
        self.db.check_open()?;
        if self.state.dropped.load(Ordering::Acquire) {
            return Err(Error::KvsNotFound(self.state.name.clone()));
        }
        Ok(())
    }
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, kvs: &Kvs, kind: RecordKind, key: &[u8], value: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let valid = validate_key(key).and_then(|()| validate_value(value)).and_then(|()| {
            let prefix_len = kvs.state.options.prefix_len;
            if kind == RecordKind::PrefixTombstone && prefix_len > 0 && key.len() != prefix_len {
                return Err(Error::InvalidArgument(format!(
                    "KVS {:?} has prefix_len {prefix_len}; a prefix delete needs a prefix of exactly that length, not {}",
                    kvs.state.name,
                    key.len()
                )));
            }
            Ok(())
        });
        if let Err(error) = valid {
            self.error = Some(error);
            return;
        }
        self.encoded_bytes += record::encoded_len(key.len(), value.len()) as u64;
        self.ops.push(BatchOp {
            kvs: kvs.state.clone(),
            kind,
            key: key.to_vec(),
            value: value.to_vec(),
        });
    }

    /// Adds a put. An invalid key or value makes [`Db::write`] fail, writing nothing.
    pub fn put(&mut self, kvs: &Kvs, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.push(kvs, RecordKind::Put, key.as_ref(), value.as_ref());
    }

    pub fn delete(&mut self, kvs: &Kvs, key: impl AsRef<[u8]>) {
        self.push(kvs, RecordKind::Tombstone, key.as_ref(), &[]);
    }

    pub fn prefix_delete(&mut self, kvs: &Kvs, prefix: impl AsRef<[u8]>) {
        self.push(kvs, RecordKind::PrefixTombstone, prefix.as_ref(), &[]);
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

impl Snapshot {
    /// Another registration at `seqno`, which a live snapshot already holds (so no version it
    /// sees can have been pruned).
    pub(crate) fn pin(db: Arc<Inner>, seqno: u64) -> Snapshot {
        db.snapshots.register(seqno);
        Snapshot { db, seqno }
    }

    /// The sequence number this snapshot reads at.
    pub fn seqno(&self) -> u64 {
        self.seqno
    }

    /// The value of `key` in `kvs` as of this snapshot.
    pub fn get(&self, kvs: &Kvs, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        kvs.check_live()?;
        self.db.get(&kvs.state, key.as_ref(), Some(self.seqno))
    }

    /// Keys of `kvs` in `range` as of this snapshot.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, kvs: &Kvs, range: R) -> Iter {
        Iter::new(
            kvs.clone(),
            Some(self.seqno),
            crate::bounds::owned_bounds(&range),
        )
    }

    /// Keys of `kvs` starting with `prefix` as of this snapshot.
    pub fn prefix(&self, kvs: &Kvs, prefix: impl AsRef<[u8]>) -> Iter {
        Iter::new(
            kvs.clone(),
            Some(self.seqno),
            crate::bounds::prefix_bounds(prefix.as_ref()),
        )
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.db.release_snapshot(self.seqno);
    }
}
