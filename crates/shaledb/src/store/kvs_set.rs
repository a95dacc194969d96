//! The KVSs a store holds, by id: each one's name, options and index, and whether it was
//! dropped (its handles then fail, and its records are dead).

use crate::index::PartitionedIndex;
use crate::options::KvsOptions;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One KVS inside the KVDB.
pub struct KvsState {
    pub id: u32,
    pub name: String,
    pub options: KvsOptions,
    pub index: PartitionedIndex,
    dropped: AtomicBool,
}

impl KvsState {
    pub fn new(id: u32, name: String, options: KvsOptions, index: PartitionedIndex) -> Self {
        KvsState {
            id,
            name,
            options,
            index,
            dropped: AtomicBool::new(false),
        }
    }

    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// Marks the KVS dropped; call it holding every partition's write lock, so no commit that
    /// saw it live is still applying to it.
    pub fn mark_dropped(&self) {
        self.dropped.store(true, Ordering::Release);
    }
}

/// The live KVSs, by id.
#[derive(Default)]
pub struct KvsSet {
    by_id: RwLock<HashMap<u32, Arc<KvsState>>>,
}

impl KvsSet {
    pub fn insert(&self, state: Arc<KvsState>) {
        let previous = self.by_id.write().insert(state.id, state);
        assert!(previous.is_none(), "KVS ids are never reused");
    }

    pub fn remove(&self, id: u32) -> Option<Arc<KvsState>> {
        self.by_id.write().remove(&id)
    }

    pub fn get(&self, id: u32) -> Option<Arc<KvsState>> {
        self.by_id.read().get(&id).cloned()
    }

    /// Every live KVS, by ascending id.
    pub fn all(&self) -> Vec<Arc<KvsState>> {
        self.all_that(|_| true)
    }

    /// The live KVSs `keep` selects, by ascending id; only those are cloned out of the set (a
    /// cursor's snapshot release asks for the few whose index keeps old versions, usually none).
    pub fn all_that(&self, keep: impl Fn(&KvsState) -> bool) -> Vec<Arc<KvsState>> {
        let mut chosen: Vec<_> = self
            .by_id
            .read()
            .values()
            .filter(|state| keep(state))
            .cloned()
            .collect();
        chosen.sort_by_key(|state| state.id);
        chosen
    }
}
