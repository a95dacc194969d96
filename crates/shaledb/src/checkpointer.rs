//! The checkpointer: when an index checkpoint is due, and writing one consistently while commits
//! go on. The file format is in `checkpoint.rs`.
//!
//! Consistency (see docs/ARCHITECTURE.md, invariants I4 and I5): replay positions are taken
//! before the indexes are read, and a commit holds its index partitions' locks from before it
//! appends until its records are applied, so every record before a replay position is in the
//! checkpoint (or the scan waits for it) and every record after it is replayed. Log data up to
//! the end of the index scan is made durable before the rename, so no checkpoint entry points at
//! bytes a crash could lose.

use crate::checkpoint::{self, CheckpointEncoder};
use crate::error::Result;
use crate::index::WALK_CHUNK_KEYS;
use crate::media::{MediaClass, WritePurpose};
use crate::segment::{HeadKind, SegmentId};
use crate::store::Store;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A checkpoint waits for at least this many times the last one's size in client writes, so
/// checkpoints of a large index cost at most an eighth of what clients write (with 4,000,000
/// YCSB keys, a fixed 512 MiB interval spent 0.32 device bytes on checkpoints per user byte).
const CHECKPOINT_SPACING: u64 = 8;

/// Whether a checkpoint is due after `since` bytes of client records.
fn checkpoint_due(since: u64, interval_bytes: u64, last_checkpoint_bytes: u64) -> bool {
    since >= interval_bytes.max(last_checkpoint_bytes.saturating_mul(CHECKPOINT_SPACING))
}

/// An encoded checkpoint.
pub struct Encoded {
    pub bytes: Vec<u8>,
    /// Every record with a smaller seqno is in it.
    pub covered_seqno: u64,
    /// The client heads' LSN when it began.
    pub lsn: u64,
}

/// Writes index checkpoints of the store it is handed, one at a time, spaced by client writes.
pub struct Checkpointer {
    store: Arc<Store>,
    /// Where checkpoints live: the fastest media class present.
    dir: PathBuf,
    /// `Options::checkpoint_interval_bytes`.
    interval_bytes: u64,
    /// One checkpoint at a time.
    lock: Mutex<()>,
    /// Client-head LSN when the last checkpoint began.
    lsn: AtomicU64,
    /// Size of the last checkpoint this process wrote (0 before the first): spaces the next.
    last_bytes: AtomicU64,
}

impl Checkpointer {
    pub fn new(store: Arc<Store>, dir: PathBuf, interval_bytes: u64) -> Self {
        Checkpointer {
            store,
            dir,
            interval_bytes,
            lock: Mutex::new(()),
            lsn: AtomicU64::new(0),
            last_bytes: AtomicU64::new(0),
        }
    }

    /// Whether enough client records were appended since the last checkpoint began.
    pub fn is_due(&self) -> bool {
        let client_lsn = self.store.heads.client_appended_lsn();
        let since = client_lsn - self.lsn.load(Ordering::Relaxed);
        checkpoint_due(
            since,
            self.interval_bytes,
            self.last_bytes.load(Ordering::Relaxed),
        )
    }

    /// A checkpoint of every index as it is now, encoded but stored nowhere: what `write`
    /// stores, and what a backup copies.
    pub fn encode(&self) -> Encoded {
        let store = &self.store;
        // Replay positions, taken with every head locked so no record is half-appended; heads
        // are locked in their fixed order (invariant I4).
        let (covered_seqno, lsn, replay_from) = {
            let locked = store.heads.lock_all();
            let positions: Vec<(SegmentId, u64)> = store
                .segments
                .all()
                .iter()
                .map(|segment| (segment.id(), segment.end_bytes()))
                .collect();
            let client_lsn = locked
                .iter()
                .filter(|appender| appender.kind() == HeadKind::Client)
                .map(|appender| appender.end_lsn())
                .sum();
            (
                store.next_seqno.load(Ordering::SeqCst),
                client_lsn,
                positions,
            )
        };
        let mut encoder = CheckpointEncoder::new(covered_seqno, covered_seqno, &replay_from);
        for kvs in store.kvs.all() {
            encoder.begin_kvs(kvs.id);
            kvs.index
                .for_each_newest(WALK_CHUNK_KEYS, |key, entry, value| {
                    encoder.entry(key, &entry, value)
                });
            encoder.end_kvs();
        }
        Encoded {
            bytes: encoder.finish(),
            covered_seqno,
            lsn,
        }
    }

    /// Writes a checkpoint of every index (see the module docs for why it is consistent).
    pub fn write(&self) -> Result<()> {
        let store = &self.store;
        let _one_at_a_time = self.lock.lock();
        store.poison.check()?;
        let Encoded {
            bytes,
            covered_seqno,
            lsn,
        } = self.encode();
        // Everything the scan saw must be durable before the checkpoint names it.
        store.heads.flush_all(true)?;
        checkpoint::store(&self.dir, &bytes)?;
        store.counters.checkpoints_written.add(1);
        store
            .counters
            .checkpoint_bytes_written
            .add(bytes.len() as u64);
        store
            .counters
            .media(if store.heads.has_staging() {
                MediaClass::Staging
            } else {
                MediaClass::Capacity
            })
            .add_written(WritePurpose::Checkpoint, bytes.len() as u64);
        store.covered_seqno.store(covered_seqno, Ordering::SeqCst);
        self.lsn.store(lsn, Ordering::Relaxed);
        self.last_bytes.store(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_checkpoints_wait_for_eight_times_their_size() {
        const MIB: u64 = 1 << 20;
        // A small index: the configured interval decides.
        assert!(!checkpoint_due(511 * MIB, 512 * MIB, 10 * MIB));
        assert!(checkpoint_due(512 * MIB, 512 * MIB, 10 * MIB));
        // Before the first checkpoint of this process, too.
        assert!(checkpoint_due(512 * MIB, 512 * MIB, 0));
        // A 180 MiB checkpoint waits for 1,440 MiB of client writes.
        assert!(!checkpoint_due(1439 * MIB, 512 * MIB, 180 * MIB));
        assert!(checkpoint_due(1440 * MIB, 512 * MIB, 180 * MIB));
        assert!(!checkpoint_due(u64::MAX - 1, 512 * MIB, u64::MAX));
    }
}
