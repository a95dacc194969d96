//! The value cache: DRAM copies of recently read values, under one byte budget shared by all
//! KVSs. Keyed by sequence number, which names one version of one key for the life of a KVDB
//! (records the cleaner moves keep theirs), so a moved record needs no invalidation.

use bytes::Bytes;
use quick_cache::sync::Cache;
use quick_cache::Weighter;

/// Per-entry bookkeeping the cache spends beyond the value bytes, counted against the budget.
const ENTRY_OVERHEAD_BYTES: u64 = 64;

#[derive(Clone)]
struct ValueWeighter;

impl Weighter<u64, Bytes> for ValueWeighter {
    fn weight(&self, _seqno: &u64, value: &Bytes) -> u64 {
        value.len() as u64 + ENTRY_OVERHEAD_BYTES
    }
}

pub struct ValueCache {
    cache: Option<Cache<u64, Bytes, ValueWeighter>>,
    budget_bytes: u64,
}

impl ValueCache {
    pub fn new(budget_bytes: u64) -> Self {
        let cache = (budget_bytes > 0).then(|| {
            let estimated_items = (budget_bytes / 1024).clamp(16, 1 << 24) as usize;
            Cache::with_weighter(estimated_items, budget_bytes, ValueWeighter)
        });
        ValueCache {
            cache,
            budget_bytes,
        }
    }

    pub fn get(&self, seqno: u64) -> Option<Bytes> {
        self.cache.as_ref()?.get(&seqno)
    }

    pub fn insert(&self, seqno: u64, value: Bytes) {
        if let Some(cache) = &self.cache {
            cache.insert(seqno, value);
        }
    }

    pub fn remove(&self, seqno: u64) {
        if let Some(cache) = &self.cache {
            cache.remove(&seqno);
        }
    }

    pub fn weight_bytes(&self) -> u64 {
        self.cache.as_ref().map_or(0, |cache| cache.weight())
    }

    pub fn budget_bytes(&self) -> u64 {
        self.budget_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_budget() {
        let cache = ValueCache::new(64 << 10);
        for seqno in 0..1000 {
            cache.insert(seqno, Bytes::from(vec![0u8; 1000]));
        }
        assert!(cache.weight_bytes() <= 64 << 10);
        assert!(cache.get(999).is_some() || cache.get(998).is_some());
    }

    #[test]
    fn removed_versions_are_gone() {
        let cache = ValueCache::new(64 << 10);
        cache.insert(1, Bytes::from_static(b"v1"));
        cache.insert(2, Bytes::from_static(b"v2"));
        cache.remove(1);
        assert_eq!(cache.get(1), None);
        assert_eq!(cache.get(2), Some(Bytes::from_static(b"v2")));
        assert!(cache.weight_bytes() < 2 * (2 + ENTRY_OVERHEAD_BYTES));
    }

    #[test]
    fn zero_budget_disables_it() {
        let cache = ValueCache::new(0);
        cache.insert(1, Bytes::from_static(b"v"));
        assert_eq!(cache.get(1), None);
    }
}
