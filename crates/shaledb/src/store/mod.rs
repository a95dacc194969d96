//! The store: what a KVDB holds on media and in DRAM, and the one thing the background jobs
//! (cleaner, sorter, checkpointer, check, workers) are handed. It has the segments, the log
//! heads that append to them, the per-KVS indexes, the seqno clock, the space budget, the write
//! pacer, the value cache, the key ranges scans found scattered (`scattered.rs`) and the counters, with the
//! operations every path shares: read a record's value (`read.rs`) and forget a version nothing
//! points at. It knows nothing of the catalog, of handles, of
//! transactions or of the jobs themselves.

mod kvs_set;
mod open;
mod read;
mod scattered;

pub use kvs_set::{KvsSet, KvsState};
pub use scattered::{is_scattered, ScatteredRange, ScatteredRanges};

use crate::cache::ValueCache;
use crate::counters::Counters;
use crate::error::Error;
use crate::index::Entry;
use crate::log::{Heads, Lifecycle};
use crate::pacer::WritePacer;
use crate::poison::Poison;
use crate::segment::SegmentTable;
use crate::space::SpaceBudget;
use parking_lot::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub struct Store {
    pub segments: Arc<SegmentTable>,
    /// Creates, seals and frees segments, recording each step in the manifest.
    pub lifecycle: Arc<Lifecycle>,
    /// No heads when the KVDB is open read-only.
    pub heads: Heads,
    pub kvs: KvsSet,
    /// The next seqno a commit assigns; the heads stamp new segments with it (I6).
    pub next_seqno: Arc<AtomicU64>,
    /// The durable checkpoint covers every record with a smaller seqno (0: no checkpoint).
    pub covered_seqno: AtomicU64,
    pub space: SpaceBudget,
    pub cache: ValueCache,
    /// Paces client writes by how long gets' device reads take.
    pub pacer: WritePacer,
    /// Key ranges scans found scattered, for the sorter.
    pub scattered: ScatteredRanges,
    pub counters: Counters,
    pub poison: Arc<Poison>,
    /// The first corruption found while open (by a read or the cleaner): from then on the
    /// cleaner frees nothing, so the damage is never made worse, unless salvage was asked for.
    corruption: Mutex<Option<String>>,
}

impl Store {
    /// Notes damage found while open; see [`Store::corruption`].
    pub fn note_corruption(&self, error: &Error) {
        let mut first = self.corruption.lock();
        if first.is_none() {
            tracing::error!(%error, "corruption found; the cleaner stops freeing segments");
            *first = Some(error.to_string());
        }
    }

    /// The first corruption found while open, if any.
    pub fn corruption(&self) -> Option<String> {
        self.corruption.lock().clone()
    }

    /// Forgets a version that nothing points at any more: subtracts it from its segment's live
    /// bytes. (Its cached value, if any, is replaced by the key's next version or dropped with
    /// a delete by the commit path, or else ages out: the cache never serves another version.)
    pub fn free(&self, entry: Entry) {
        let bytes = u64::from(entry.location.len);
        self.segments
            .with(entry.location.segment, |segment| segment.sub_live(bytes));
    }
}
