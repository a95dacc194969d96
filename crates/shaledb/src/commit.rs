//! The commit path: a batch of puts, deletes and prefix deletes validated, appended contiguously
//! to one client head and applied to the index partitions it locked first, all or nothing to
//! every reader (invariants I2, I4, I8), then made durable as the KVDB's durability mode says.

use crate::conflicts::ConflictTracker;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::index::{keeps_value, Entry, KvsIndex};
use crate::media::MediaClass;
use crate::options::Durability;
use crate::record::{
    self, validate_key, validate_value, RecordKind, RecordRef, FLAG_BATCH_CONTINUES, FLAG_VALUE_LZ4,
};
use crate::segment::{HeadKind, Location};
use crate::store::KvsState;
use bytes::Bytes;
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::RwLockWriteGuard;

/// A commit's per-operation or per-partition working lists: inline (no allocation) for the
/// small batches most commits are.
type Batched<T> = SmallVec<[T; 4]>;

/// A batch's writes: a write of a key or two (most of a server's commands) carries them
/// without an allocation.
pub(crate) type BatchOps = SmallVec<[BatchOp; 2]>;

/// Where commits sit in the log that are applied but, under `Durability::Sync`, not yet known
/// durable (`Db::write_unsynced`): per media class, the log position to sync to (0: nothing).
/// Under the other modes a commit is acknowledged without a sync, and its point is empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use = "a write under sync durability is acknowledged only once its sync point is synced"]
pub struct SyncPoint {
    lsns: [u64; 2],
}

impl SyncPoint {
    fn at(class: MediaClass, lsn: u64) -> SyncPoint {
        let mut point = SyncPoint::default();
        point.lsns[class as usize] = lsn;
        point
    }

    /// Whether nothing waits for a sync.
    pub fn is_empty(&self) -> bool {
        self.lsns == [0; 2]
    }

    /// Takes in `other`: syncing the result syncs both.
    pub fn merge(&mut self, other: SyncPoint) {
        for (mine, theirs) in self.lsns.iter_mut().zip(other.lsns) {
            *mine = (*mine).max(theirs);
        }
    }
}

/// One operation of a batch, validated.
pub struct BatchOp {
    kvs: Arc<KvsState>,
    kind: RecordKind,
    key: Vec<u8>,
    /// The value as the client gave it: what the value cache holds (sharing these bytes).
    value: Bytes,
    /// The value compressed, when its KVS compresses and that is smaller: what is stored then.
    /// Compressed here, in the caller's thread, before the commit takes any lock.
    compressed: Option<Vec<u8>>,
    /// A put's or delete's index partition, hashed once here for both the commit's locks and
    /// its apply; `None` for a prefix delete, whose keys may be in several.
    partition: Option<usize>,
}

impl BatchOp {
    /// A put (`Some(value)`) or delete (`None`) of an already validated key and value.
    pub fn new(kvs: Arc<KvsState>, key: Vec<u8>, value: Option<Vec<u8>>) -> Self {
        match value {
            Some(value) => Self::with_value(kvs, RecordKind::Put, key, Bytes::from(value)),
            None => Self::with_value(kvs, RecordKind::Tombstone, key, Bytes::new()),
        }
    }

    fn with_value(kvs: Arc<KvsState>, kind: RecordKind, key: Vec<u8>, value: Bytes) -> Self {
        let compressed = if kind.has_value() {
            kvs.options.compression.compress(&value)
        } else {
            None
        };
        let partition = (kind != RecordKind::PrefixTombstone).then(|| kvs.index.partition_of(&key));
        BatchOp {
            kvs,
            kind,
            key,
            value,
            compressed,
            partition,
        }
    }

    pub fn kvs_id(&self) -> u32 {
        self.kvs.id
    }

    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// A put, tombstone or prefix tombstone of `kvs`, after checking the key and value (and, for
    /// a prefix delete, the KVS's `prefix_len`).
    pub fn validated(
        kvs: Arc<KvsState>,
        kind: RecordKind,
        key: Vec<u8>,
        value: Bytes,
    ) -> Result<BatchOp> {
        validate_key(&key)?;
        validate_value(&value)?;
        let prefix_len = kvs.options.prefix_len;
        if kind == RecordKind::PrefixTombstone && prefix_len > 0 && key.len() != prefix_len {
            return Err(Error::InvalidArgument(format!(
                "KVS {:?} has prefix_len {prefix_len}; a prefix delete needs a prefix of exactly that length, not {}",
                kvs.name,
                key.len()
            )));
        }
        Ok(Self::with_value(kvs, kind, key, value))
    }

    /// The value as it is stored, and the record flag that says how.
    fn stored_value(&self) -> (&[u8], u8) {
        match &self.compressed {
            Some(compressed) => (compressed, FLAG_VALUE_LZ4),
            None => (&self.value, 0),
        }
    }

    /// Bytes this operation takes on media.
    pub fn encoded_len(&self) -> usize {
        record::encoded_len(self.key.len(), self.stored_value().0.len())
    }
}

/// Whether a batch only deletes: it may use the space limit's headroom for deletes.
fn only_deletes(ops: &[BatchOp]) -> bool {
    ops.iter().all(|op| !op.kind.has_value())
}

impl Engine {
    /// Appends `ops` as one atomic batch and applies them to the indexes.
    pub fn commit(&self, ops: BatchOps) -> Result<()> {
        self.commit_validated(ops, &|_, _| Ok(()))
    }

    /// Like `commit`, but returns before the durability wait: the caller syncs the point
    /// (`wait_synced`) before it acknowledges the write. Readers see the batch at once, as they
    /// do during `commit`'s wait. Takes the operations out of `ops` once they are applied.
    /// `frees`: the batch frees space (see `SpaceBudget::admit`), whatever puts it holds.
    pub fn commit_unsynced(&self, ops: &mut BatchOps, frees: bool) -> Result<SyncPoint> {
        let frees = frees || only_deletes(ops);
        self.commit_without_waiting(ops, frees, &|_, _| Ok(()))
    }

    /// Waits until the log is durable up to `point`: one fdatasync serves every commit
    /// appended before it (group commit), whoever waits for them.
    pub fn wait_synced(&self, point: SyncPoint) -> Result<()> {
        for class in MediaClass::ALL {
            let lsn = point.lsns[class as usize];
            if lsn > 0 {
                self.store
                    .heads
                    .at(class, HeadKind::Client)
                    .wait_durable(lsn)?;
            }
        }
        Ok(())
    }

    /// Like `commit`, but first runs `validate` against the recent commits, with every lock of
    /// the commit held, so nothing can commit between the check and the append. A failed
    /// validation writes nothing.
    pub fn commit_validated(
        &self,
        mut ops: BatchOps,
        validate: &dyn Fn(&ConflictTracker, &[BatchOp]) -> Result<()>,
    ) -> Result<()> {
        let frees = only_deletes(&ops);
        let point = self.commit_without_waiting(&mut ops, frees, validate)?;
        self.wait_synced(point)
    }

    /// `commit_validated` up to its durability wait: the point to wait for. Borrows `ops` (a
    /// batch of a few operations is a few hundred bytes inline, copied at each move) and, once
    /// they are applied, takes their values out (into the value cache); a failure before the
    /// append leaves them as they were.
    fn commit_without_waiting(
        &self,
        ops: &mut BatchOps,
        frees: bool,
        validate: &dyn Fn(&ConflictTracker, &[BatchOp]) -> Result<()>,
    ) -> Result<SyncPoint> {
        self.check_open()?;
        self.check_writable()?;
        self.store.poison.check()?;
        if ops.is_empty() {
            return Ok(SyncPoint::default());
        }
        // Pacing happens before any lock is taken, so a slowed writer blocks nobody.
        let total_bytes: usize = ops.iter().map(BatchOp::encoded_len).sum();
        if let Some(delay) = self.store.space.admit(total_bytes as u64, frees)? {
            // The reserve is running low: give the cleaner time, in proportion.
            std::thread::sleep(delay);
            self.store
                .counters
                .throttled_micros
                .add(delay.as_micros() as u64);
        }
        if let Some(delay) = self.store.pacer.admit(total_bytes as u64) {
            // Reads are waiting too long: writes slow down so they get the device back.
            std::thread::sleep(delay);
            self.store
                .counters
                .paced_micros
                .add(delay.as_micros() as u64);
        }
        // Batches go to staging if any KVS they write keeps new data there.
        let class = if self.store.heads.has_staging()
            && ops
                .iter()
                .any(|op| op.kvs.options.media_policy.writes_to_staging())
        {
            MediaClass::Staging
        } else {
            MediaClass::Capacity
        };
        let head = self.store.heads.at(class, HeadKind::Client);
        let partitions = partitions_written(ops);
        // No I/O under the index locks: a flush or roll (pwrite, fdatasync) happens in
        // `make_room` before they are taken, and if other writers used the room up meanwhile,
        // every lock is released and the room made again. Waiting for I/O while holding an index
        // partition's write lock would stall every reader of it for the I/O's duration.
        let mut room_was_taken = false;
        // Filled and emptied in place: moved, it was copied whole (locks and room for four).
        let mut guards: Batched<PartitionGuard<'_>> = SmallVec::new();
        guards.reserve(partitions.len());
        let (commit_order, mut appender) = loop {
            guards.clear();
            if room_was_taken {
                head.make_room_now(total_bytes)?;
            } else {
                head.make_room(total_bytes)?;
            }
            // Lock order: index partitions by (KVS id, partition), the commit order, then the
            // client head (I4).
            for &(kvs, part) in &partitions {
                let index = kvs.index.parts()[part].write();
                if kvs.is_dropped() {
                    return Err(Error::KvsNotFound(kvs.name.clone()));
                }
                guards.push(PartitionGuard { kvs, part, index });
            }
            let commit_order = self.commit_order.lock();
            let appender = head.lock();
            if appender.has_room(total_bytes) {
                break (commit_order, appender);
            }
            room_was_taken = true;
        };
        validate(&self.conflicts, ops)?;
        // Read before the open snapshots are: see `note_kept_versions`.
        let releases_before = self.snapshots.releases();
        let snapshot_max = self.snapshots.max();
        let first_seqno = self.store.next_seqno.load(Ordering::SeqCst);
        let last_seqno = first_seqno + ops.len() as u64 - 1;
        self.store
            .next_seqno
            .store(last_seqno + 1, Ordering::SeqCst);
        let locations: Batched<Location> = ops
            .iter()
            .enumerate()
            .map(|(position, op)| {
                let (stored_value, value_flags) = op.stored_value();
                let batch_flags = if position + 1 < ops.len() {
                    FLAG_BATCH_CONTINUES
                } else {
                    0
                };
                appender.append(&RecordRef {
                    kind: op.kind,
                    flags: batch_flags | value_flags,
                    kvs_id: op.kvs.id,
                    seqno: first_seqno + position as u64,
                    key: &op.key,
                    stored_value,
                })
            })
            .collect();
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
        // The batch's records count as live in the segment they went to, in one update while
        // the head holds it (no reference taken to it, no update per record: every committer
        // writes this count).
        let put_bytes: u64 = ops
            .iter()
            .zip(&locations)
            .filter(|(op, _)| op.kind == RecordKind::Put)
            .map(|(_, location)| u64::from(location.len))
            .sum();
        appender.segment().add_live(put_bytes);
        let lsn = appender.end_lsn();
        // The records are in the log and their seqnos taken: later commits may append now,
        // and apply their own partitions while this one applies its.
        drop(appender);
        // Released before the durability wait too: held across it, every commit would wait
        // for the previous one's fdatasync and group commit could never batch.
        drop(commit_order);
        self.store.space.note_appended(total_bytes as u64);
        let replaced_versions: Batched<bool> = ops
            .iter()
            .enumerate()
            .zip(locations)
            .map(|((position, op), location)| {
                let entry = Entry {
                    location,
                    seqno: first_seqno + position as u64,
                };
                self.apply(&mut guards, op, entry, snapshot_max)
            })
            .collect();
        self.note_kept_versions(&mut guards, releases_before);
        // Unlocked only once all of the batch is applied: a reader of any key it writes sees all
        // of it or waits (I4).
        drop(guards);
        drop(partitions);
        // A written key's cached value is replaced by the new one (so a hot key stays cached
        // across updates), or dropped when writes are not cached or the key was deleted.
        // The values move into the cache: a clone would give each value that is still the
        // batch's own vector a shared header (an allocation) and two reference-count changes.
        let user_bytes: usize = ops.iter().map(|op| op.key.len() + op.value.len()).sum();
        let cache = &self.store.cache;
        for ((position, op), replaced_a_version) in ops.drain(..).enumerate().zip(replaced_versions)
        {
            match op.kind {
                // Read from the index alone (`Store::find_value`, `Store::get`). A value this
                // replaced stays cached until evicted, never read: its seqno is not the key's
                // any more.
                RecordKind::Put if op.value.is_empty() || self.kept_in_index(&op) => {}
                RecordKind::Put if self.options.cache_writes => {
                    let seqno = first_seqno + position as u64;
                    cache.insert_written(op.kvs.id, &op.key, seqno, op.value, replaced_a_version);
                }
                RecordKind::Put | RecordKind::Tombstone => cache.remove(op.kvs.id, &op.key),
                RecordKind::PrefixTombstone | RecordKind::SnapshotCopy => {}
            }
        }
        self.store
            .counters
            .user_bytes_written
            .add(user_bytes as u64);
        if self.options.durability == Durability::Sync {
            return Ok(SyncPoint::at(class, lsn));
        }
        Ok(SyncPoint::default())
    }

    /// Marks the partitions that keep old versions after this commit applied, for a snapshot's
    /// release to find (`Engine::release_snapshot`). A snapshot released since `releases_before`
    /// was read may have looked for marks before these were set, while this commit kept
    /// versions for it: then the commit prunes its partitions itself, still holding them.
    fn note_kept_versions(&self, guards: &mut [PartitionGuard<'_>], releases_before: u64) {
        let mut kept_any = false;
        for guard in guards.iter() {
            guard.kvs.index.note_old_versions(guard.part, &guard.index);
            kept_any |= guard.index.keeps_old_versions();
        }
        if !kept_any || self.snapshots.releases() == releases_before {
            return;
        }
        for guard in guards.iter_mut() {
            self.prune_partition(guard.kvs, guard.part, &mut guard.index);
        }
    }

    /// Whether the index keeps `op`'s value in its entry (`Options::index_value_bytes_max`).
    fn kept_in_index(&self, op: &BatchOp) -> bool {
        op.kind == RecordKind::Put && keeps_value(&op.value, self.options.index_value_bytes_max)
    }

    /// Applies `op` to its index partition (those its keys may be in, for a prefix delete),
    /// which `guards` holds; whether it freed a version of its key (so the value cache likely
    /// holds that version: a hint, false too when a snapshot keeps the old version).
    fn apply(
        &self,
        guards: &mut [PartitionGuard<'_>],
        op: &BatchOp,
        entry: Entry,
        snapshot_max: u64,
    ) -> bool {
        let kvs_id = op.kvs.id;
        match op.kind {
            RecordKind::Put => {
                let part = op.partition.expect("a put has its key's partition");
                let value = self.kept_in_index(op).then_some(&op.value[..]);
                let replaced =
                    locked(guards, kvs_id, part).put(&op.key, entry, value, snapshot_max);
                if let Some(replaced) = replaced {
                    self.store.free(replaced);
                    return true;
                }
            }
            RecordKind::Tombstone => {
                let part = op.partition.expect("a delete has its key's partition");
                let index = locked(guards, kvs_id, part);
                if let Some(removed) = index.remove(&op.key, entry.seqno, snapshot_max) {
                    self.store.free(removed);
                    return true;
                }
            }
            RecordKind::PrefixTombstone => {
                for part in op.kvs.index.partitions_of_prefix(&op.key) {
                    for removed in locked(guards, kvs_id, part).remove_prefix(
                        &op.key,
                        entry.seqno,
                        snapshot_max,
                    ) {
                        self.store.free(removed);
                    }
                }
            }
            RecordKind::SnapshotCopy => unreachable!("clients never write snapshot copies"),
        }
        false
    }
}

/// One index partition a commit holds write-locked.
struct PartitionGuard<'a> {
    kvs: &'a KvsState,
    part: usize,
    index: RwLockWriteGuard<'a, KvsIndex>,
}

/// The partition `part` of KVS `kvs_id`, which the commit holds.
fn locked<'g>(guards: &'g mut [PartitionGuard<'_>], kvs_id: u32, part: usize) -> &'g mut KvsIndex {
    &mut guards
        .iter_mut()
        .find(|guard| guard.kvs.id == kvs_id && guard.part == part)
        .expect("every partition a batch writes is locked")
        .index
}

/// The index partitions `ops` write, in lock order (I4): a put's or delete's key's partition,
/// those its prefix's keys may be in for a prefix delete.
fn partitions_written(ops: &[BatchOp]) -> Batched<(&KvsState, usize)> {
    // Not `with_capacity`, which builds the inline array and copies it out; room for a batch
    // longer than the inline array is reserved once.
    let mut written: Batched<(&KvsState, usize)> = SmallVec::new();
    written.reserve(ops.len());
    for op in ops {
        match op.partition {
            Some(part) => written.push((&op.kvs, part)),
            None => {
                let parts = op.kvs.index.partitions_of_prefix(&op.key);
                written.extend(parts.map(|part| (&*op.kvs, part)));
            }
        }
    }
    written.sort_unstable_by_key(|&(kvs, part)| (kvs.id, part));
    written.dedup_by_key(|&mut (kvs, part)| (kvs.id, part));
    written
}
