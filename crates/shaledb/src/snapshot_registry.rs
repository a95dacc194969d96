//! The registry of open snapshots: which sequence numbers readers still look at, so writers
//! keep the old versions those readers can see, and only those.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Default)]
pub struct SnapshotRegistry {
    /// seqno -> (open count, when the first of them was opened)
    open: Mutex<BTreeMap<u64, (usize, Option<Instant>)>>,
    /// The newest open snapshot's seqno, 0 when none: read by writers without a lock.
    max: AtomicU64,
    /// Releases so far: a commit that kept old versions checks it did not miss one (see
    /// `Engine::release_snapshot`).
    releases: AtomicU64,
}

impl SnapshotRegistry {
    /// Registers a reader at `seqno`. The caller must hold the commit-order lock, so no
    /// commit can take seqnos between the snapshot's seqno being read and this registration.
    pub fn register(&self, seqno: u64) {
        let mut open = self.open.lock();
        let slot = open.entry(seqno).or_insert((0, Some(Instant::now())));
        slot.0 += 1;
        self.max.fetch_max(seqno, Ordering::SeqCst);
    }

    /// Releases a reader.
    pub fn release(&self, seqno: u64) {
        let mut open = self.open.lock();
        if let Some(slot) = open.get_mut(&seqno) {
            slot.0 -= 1;
            if slot.0 == 0 {
                open.remove(&seqno);
            }
        }
        self.max.store(
            open.keys().next_back().copied().unwrap_or(0),
            Ordering::SeqCst,
        );
        self.releases.fetch_add(1, Ordering::SeqCst);
    }

    /// How many releases there have been.
    pub fn releases(&self) -> u64 {
        self.releases.load(Ordering::SeqCst)
    }

    /// The seqnos of open snapshots, sorted. To prune old versions of an index, read this while
    /// holding that index partition's write lock: a snapshot registered later cannot see any version
    /// already retired, and no version can be retired for it during the prune.
    pub fn open_seqnos(&self) -> Vec<u64> {
        self.open.lock().keys().copied().collect()
    }

    /// The newest open snapshot's seqno, or 0.
    pub fn max(&self) -> u64 {
        self.max.load(Ordering::SeqCst)
    }

    /// (open snapshots, age of the oldest in seconds)
    pub fn summary(&self) -> (u64, f64) {
        let open = self.open.lock();
        let count = open.values().map(|slot| slot.0 as u64).sum();
        let oldest = open
            .values()
            .filter_map(|slot| slot.1)
            .min()
            .map_or(0.0, |opened| opened.elapsed().as_secs_f64());
        (count, oldest)
    }
}

/// Does any snapshot in sorted `open` fall in `seqno..superseded`?
pub fn needed_by_any(open: &[u64], seqno: u64, superseded: u64) -> bool {
    let first_at_or_after = open.partition_point(|&snapshot| snapshot < seqno);
    open.get(first_at_or_after)
        .is_some_and(|&snapshot| snapshot < superseded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_the_newest_open_snapshot() {
        let registry = SnapshotRegistry::default();
        registry.register(5);
        registry.register(9);
        registry.register(9);
        assert_eq!(registry.max(), 9);
        registry.release(9);
        assert_eq!(registry.open_seqnos(), vec![5, 9]);
        registry.release(9);
        assert_eq!(registry.open_seqnos(), vec![5]);
        assert_eq!(registry.max(), 5);
        assert_eq!(registry.summary().0, 1);
        registry.release(5);
        assert!(registry.open_seqnos().is_empty());
        assert_eq!(registry.max(), 0);
    }

    #[test]
    fn visibility_windows() {
        assert!(needed_by_any(&[3, 10], 2, 4));
        assert!(!needed_by_any(&[3, 10], 4, 10));
        assert!(needed_by_any(&[3, 10], 4, 11));
        assert!(!needed_by_any(&[], 0, u64::MAX));
    }
}
