//! The engine behind the public handles: the store, plus what orders commits against readers
//! (the commit-order lock, the registry of open snapshots and the tracker of transaction
//! conflicts). `Db`, `Kvs`, `Snapshot`, `Iter` and `Transaction` hold it; the commit
//! path is in `commit.rs`. Background jobs never see it: they are handed the store.

use crate::conflicts::ConflictTracker;
use crate::error::{Error, Result};
use crate::index::KvsIndex;
use crate::options::Options;
use crate::snapshot_registry::{needed_by_any, SnapshotRegistry};
use crate::store::{KvsState, Store};
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct Engine {
    pub store: Arc<Store>,
    pub options: Options,
    pub snapshots: SnapshotRegistry,
    pub conflicts: ConflictTracker,
    /// Orders commits and snapshot registrations across the client heads: seqnos are assigned
    /// and records appended under it (invariant I4); the index updates happen after, under the
    /// index partitions' locks, in parallel with later commits.
    pub commit_order: Mutex<()>,
    closed: AtomicBool,
}

/// A registered snapshot: while it lives, every version visible at its seqno stays readable.
pub struct SnapshotPin {
    engine: Arc<Engine>,
    seqno: u64,
}

impl SnapshotPin {
    pub fn seqno(&self) -> u64 {
        self.seqno
    }
}

impl Drop for SnapshotPin {
    fn drop(&mut self) {
        self.engine.release_snapshot(self.seqno);
    }
}

impl Engine {
    pub fn new(store: Arc<Store>, options: Options) -> Self {
        Engine {
            store,
            options,
            snapshots: SnapshotRegistry::default(),
            conflicts: ConflictTracker::default(),
            commit_order: Mutex::new(()),
            closed: AtomicBool::new(false),
        }
    }

    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("KVDB"));
        }
        Ok(())
    }

    /// Writes are refused when the KVDB is open read-only.
    pub fn check_writable(&self) -> Result<()> {
        if self.options.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    /// Every handle fails with `Closed` from now on.
    pub fn mark_closed(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// The KVDB is open and `kvs` was not dropped.
    pub fn check_live(&self, kvs: &KvsState) -> Result<()> {
        self.check_open()?;
        if kvs.is_dropped() {
            return Err(Error::KvsNotFound(kvs.name.clone()));
        }
        Ok(())
    }

    /// The value of `key` in `kvs` at snapshot `at` (newest if `None`).
    pub fn get(&self, kvs: &KvsState, key: &[u8], at: Option<u64>) -> Result<Option<Bytes>> {
        self.check_live(kvs)?;
        self.store.get(kvs, key, at)
    }

    /// The values of `keys` in `kvs` at snapshot `at`, read together.
    pub fn multi_get(&self, kvs: &KvsState, keys: &[&[u8]], at: u64) -> Result<Vec<Option<Bytes>>> {
        self.check_live(kvs)?;
        self.store.multi_get(kvs, keys, at)
    }

    pub fn take_snapshot(self: &Arc<Self>) -> SnapshotPin {
        self.take_snapshot_then(|_| {})
    }

    /// Takes a snapshot and runs `also(seqno)` while no commit can happen.
    pub fn take_snapshot_then(self: &Arc<Self>, also: impl FnOnce(u64)) -> SnapshotPin {
        // Registering under the commit-order lock orders the snapshot against every commit. One
        // that took its seqnos before is in it: that commit took its index partitions' write
        // locks before its seqnos and holds them until it has applied them all, so a read at
        // this snapshot finds it applied or waits for it (I4). One that takes its seqnos after
        // finds the snapshot registered and keeps the versions it sees.
        let _commits_paused = self.commit_order.lock();
        let seqno = self.store.next_seqno.load(Ordering::SeqCst) - 1;
        self.snapshots.register(seqno);
        also(seqno);
        SnapshotPin {
            engine: self.clone(),
            seqno,
        }
    }

    /// Another registration at `seqno`, which a live snapshot already holds (so no version it
    /// sees can have been pruned).
    pub fn pin_again(self: &Arc<Self>, seqno: u64) -> SnapshotPin {
        self.snapshots.register(seqno);
        SnapshotPin {
            engine: self.clone(),
            seqno,
        }
    }

    fn release_snapshot(&self, seqno: u64) {
        self.snapshots.release(seqno);
        let keeping = self
            .store
            .kvs
            .all_that(|kvs| kvs.index.keeps_old_versions());
        for kvs in keeping {
            // Only partitions marked as keeping old versions are locked (a cursor releases a
            // snapshot per scan; most partitions keep none). A commit that kept a version for
            // this snapshot marks its partition before it reads the release count, so either
            // this release finds the mark or that commit finds the count changed and prunes
            // for itself (`Engine::note_kept_versions`).
            for part in kvs.index.parts_keeping_old_versions() {
                self.prune_partition(&kvs, part, &mut kvs.index.parts()[part].write());
            }
        }
    }

    /// Frees the old versions partition `part` of `kvs` (`index`, which the caller holds
    /// write-locked) keeps that no open snapshot needs, and marks whether it keeps any still.
    pub(crate) fn prune_partition(&self, kvs: &KvsState, part: usize, index: &mut KvsIndex) {
        // Read under the partition's lock: see SnapshotRegistry::open_seqnos.
        let open = self.snapshots.open_seqnos();
        for freed in index.prune_old(|seqno, superseded| needed_by_any(&open, seqno, superseded)) {
            self.store.free(freed);
        }
        kvs.index.note_old_versions(part, index);
    }
}
