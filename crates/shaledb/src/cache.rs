//! The value cache: DRAM copies of recently read and written values, under one byte budget
//! shared by all KVSs. Keyed by a hash of KVS and key (a `Slot`), so a hot key stays hot across
//! its updates (each new version replaces the old one in place, keeping the frequency that
//! quick_cache's admission has learned for the key). Each entry names the version it holds by
//! seqno, and a read takes it only for exactly that version: a stale or other version is a miss,
//! never a wrong value.
//! Seqnos name one version of one key for the life of a KVDB (records the cleaner moves keep
//! theirs), so a moved record needs no invalidation.

use crate::short_bytes::{ShortBytes, INLINE_BYTES};
use bytes::Bytes;
use quick_cache::sync::{Cache, EntryAction, EntryResult};
use quick_cache::{DefaultHashBuilder, Weighter};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

/// Per-entry memory beyond the key and value bytes, counted against the budget: quick_cache's
/// slot (the entry and its table and list links), the value's `Bytes` header and the
/// allocator's rounding. Measured (2026-11-25): a server holding 1,000,000 cached 21-byte
/// record keys with 3-byte values took 177 bytes per entry more resident memory than with no
/// cache, about 152 beyond the key and value (64 were counted before, so small values overran
/// the budget more than twice).
const ENTRY_OVERHEAD_BYTES: u64 = 152;

/// Where a key lives in the cache: a hash of its KVS and bytes. Two keys may share a slot; they
/// then displace each other (a miss), never return each other's value, because a read takes an
/// entry only for the seqno the index names, and a seqno names one version of one key. A slot
/// rather than the key as the cache's key lets a write replace a cached version in place: no
/// key is allocated, compared byte by byte in the table, or freed per write (a fifth of a
/// pipelined SET's time was the cache's insert).
type Slot = u64;

/// quick_cache's hasher of slots. A slot is already a seeded hash of its KVS and key, uniform
/// in every bit, so it is its own hash: hashing it again (SipHash, quick_cache's default) cost
/// each cache read and write about a hundred instructions.
#[derive(Default)]
struct SlotHasher(u64);

impl Hasher for SlotHasher {
    fn write_u64(&mut self, slot: u64) {
        self.0 = slot;
    }

    /// Slots are `u64`s, hashed by `write_u64`; anything else is folded in as FNV-1a does.
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A cached value. A short one (up to `INLINE_BYTES`, redis-benchmark's and the server's small
/// records among them) is kept inline, as a key is: a read copies it out of the entry it found,
/// and touches no other memory. A shared `Bytes` costs a read two atomic updates of its
/// reference count, on a cache line of its own that is often cold or on the other core: about a
/// twentieth of a pipelined server GET's CPU (docs/SERVER.md).
#[derive(Clone)]
enum CachedValue {
    /// Always `ShortBytes::Inline`.
    Inline(ShortBytes),
    Shared(Bytes),
}

impl CachedValue {
    fn len(&self) -> usize {
        match self {
            CachedValue::Inline(bytes) => bytes.len(),
            CachedValue::Shared(bytes) => bytes.len(),
        }
    }

    /// The value, copied when it is inline.
    fn into_bytes(self) -> Bytes {
        match self {
            CachedValue::Inline(bytes) => Bytes::copy_from_slice(&bytes),
            CachedValue::Shared(bytes) => bytes,
        }
    }
}

impl From<Bytes> for CachedValue {
    fn from(value: Bytes) -> Self {
        if value.len() <= INLINE_BYTES {
            CachedValue::Inline(value[..].into())
        } else {
            CachedValue::Shared(value)
        }
    }
}

/// One version's value, with the key it belongs to (for the warm-keys list).
#[derive(Clone)]
struct Version {
    kvs_id: u32,
    /// Inside the entry when short: a read, which copies the entry, touches no other memory.
    key: ShortBytes,
    seqno: u64,
    value: CachedValue,
}

impl Version {
    fn new(kvs_id: u32, key: &[u8], seqno: u64, value: Bytes) -> Self {
        Version {
            kvs_id,
            key: key.into(),
            seqno,
            value: value.into(),
        }
    }

    fn is_of(&self, kvs_id: u32, key: &[u8]) -> bool {
        self.kvs_id == kvs_id && *self.key == *key
    }
}

#[derive(Clone)]
struct VersionWeighter;

impl Weighter<Slot, Version> for VersionWeighter {
    fn weight(&self, _: &Slot, version: &Version) -> u64 {
        (version.key.len() + version.value.len()) as u64 + ENTRY_OVERHEAD_BYTES
    }
}

pub struct ValueCache<S = DefaultHashBuilder> {
    cache: Option<Cache<Slot, Version, VersionWeighter, BuildHasherDefault<SlotHasher>>>,
    /// Hashes a key to its slot.
    slots: S,
    budget_bytes: u64,
}

impl ValueCache {
    pub fn new(budget_bytes: u64) -> Self {
        Self::with_slots(budget_bytes, DefaultHashBuilder::default())
    }
}

impl<S: BuildHasher> ValueCache<S> {
    fn with_slots(budget_bytes: u64, slots: S) -> Self {
        let cache = (budget_bytes > 0).then(|| {
            let estimated_items = (budget_bytes / 1024).clamp(16, 1 << 24) as usize;
            Cache::with(
                estimated_items,
                budget_bytes,
                VersionWeighter,
                BuildHasherDefault::default(),
                Default::default(),
            )
        });
        ValueCache {
            cache,
            slots,
            budget_bytes,
        }
    }

    fn slot(&self, kvs_id: u32, key: &[u8]) -> Slot {
        self.slots.hash_one((kvs_id, key))
    }

    /// The value of version `seqno` of `key`, if that exact version is cached.
    pub fn get(&self, kvs_id: u32, key: &[u8], seqno: u64) -> Option<Bytes> {
        let version = self.cache.as_ref()?.get(&self.slot(kvs_id, key))?;
        (version.seqno == seqno).then(|| version.value.into_bytes())
    }

    /// Caches version `seqno` of `key`, just written: the newest version, so whatever is cached
    /// for the key is replaced without comparing seqnos. Two commits of one key racing to here
    /// may leave the older cached; a read then misses (the seqno differs) and goes to the
    /// device, never returning it. `replaced_a_version`: the index held a version of the key
    /// before this write, so the cache likely holds it and it is updated in place; a new key is
    /// inserted directly (an in-place update that finds nothing costs a placeholder).
    pub fn insert_written(
        &self,
        kvs_id: u32,
        key: &[u8],
        seqno: u64,
        value: Bytes,
        replaced_a_version: bool,
    ) {
        let Some(cache) = &self.cache else {
            return;
        };
        let slot = self.slot(kvs_id, key);
        if !replaced_a_version {
            cache.insert(slot, Version::new(kvs_id, key, seqno, value));
            return;
        }
        let mut value = Some(value);
        let outcome = cache.entry(&slot, None, |_, cached| {
            if !cached.is_of(kvs_id, key) {
                cached.kvs_id = kvs_id;
                cached.key = key.into();
            }
            cached.seqno = seqno;
            let new_value = value.take().expect("the callback runs once").into();
            // Returned, to be freed once the shard is unlocked.
            EntryAction::Retain(std::mem::replace(&mut cached.value, new_value))
        });
        match outcome {
            EntryResult::Retained(old_value) => drop(old_value),
            EntryResult::Vacant(guard) | EntryResult::Replaced(guard, _) => {
                let value = value.take().expect("the callback did not take the value");
                // Err: a remove took the placeholder meanwhile, and the key is not cached,
                // which a read handles.
                let _ = guard.insert(Version::new(kvs_id, key, seqno, value));
            }
            EntryResult::Removed(..) | EntryResult::Timeout => {}
        }
    }

    /// Caches version `seqno` of `key`, read from the device, unless a newer version of it is
    /// cached already (a read at an old snapshot does not displace the current value).
    pub fn insert(&self, kvs_id: u32, key: &[u8], seqno: u64, value: Bytes) {
        let Some(cache) = &self.cache else {
            return;
        };
        let slot = self.slot(kvs_id, key);
        if cache
            .peek(&slot)
            .is_some_and(|cached| cached.is_of(kvs_id, key) && cached.seqno > seqno)
        {
            return;
        }
        cache.insert(slot, Version::new(kvs_id, key, seqno, value));
    }

    /// Drops whatever version of `key` is cached (its key was deleted, or written without
    /// caching).
    pub fn remove(&self, kvs_id: u32, key: &[u8]) {
        if let Some(cache) = &self.cache {
            let slot = self.slot(kvs_id, key);
            cache.remove_if(&slot, |cached| cached.is_of(kvs_id, key));
        }
    }

    /// Whether version `seqno` of `key` is cached; unlike a get, not a use of the entry.
    pub fn holds(&self, kvs_id: u32, key: &[u8], seqno: u64) -> bool {
        self.cache.as_ref().is_some_and(|cache| {
            cache
                .peek(&self.slot(kvs_id, key))
                .is_some_and(|cached| cached.seqno == seqno)
        })
    }

    /// Calls `visit` with a copy of each key the cache holds, in no particular order
    /// (quick_cache does not tell which entries are hot), until it returns false. quick_cache's
    /// iterator holds one shard's read lock only while it copies one entry (the slot, and a
    /// clone of the version), so a walk of the whole cache never makes a reader or writer wait
    /// longer than that.
    pub fn for_each_key(&self, mut visit: impl FnMut(u32, Box<[u8]>) -> bool) {
        if let Some(cache) = &self.cache {
            for (_, version) in cache.iter() {
                if !visit(version.kvs_id, version.key[..].into()) {
                    break;
                }
            }
        }
    }

    /// Whether the cache holds about its budget: within a 32nd of it. quick_cache splits the
    /// budget among shards, and the fullest ones evict while the total is still a little short.
    pub fn is_nearly_full(&self) -> bool {
        self.weight_bytes() >= self.budget_bytes - self.budget_bytes / 32
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
        for seqno in 0..1000u64 {
            let key = seqno.to_be_bytes();
            cache.insert(1, &key, seqno, Bytes::from(vec![0u8; 1000]));
        }
        assert!(cache.weight_bytes() <= 64 << 10);
        let newest = |seqno: u64| cache.get(1, &seqno.to_be_bytes(), seqno).is_some();
        assert!(newest(999) || newest(998));
    }

    #[test]
    fn only_the_exact_version_is_returned() {
        let cache = ValueCache::new(64 << 10);
        cache.insert(1, b"k", 10, Bytes::from_static(b"v10"));
        assert_eq!(cache.get(1, b"k", 10), Some(Bytes::from_static(b"v10")));
        assert_eq!(cache.get(1, b"k", 9), None, "an older version is a miss");
        assert_eq!(
            cache.get(2, b"k", 10),
            None,
            "another KVS's key is another key"
        );
        cache.insert(1, b"k", 12, Bytes::from_static(b"v12"));
        assert_eq!(
            cache.get(1, b"k", 10),
            None,
            "an update replaces the version"
        );
        assert_eq!(cache.get(1, b"k", 12), Some(Bytes::from_static(b"v12")));
        cache.insert(1, b"k", 11, Bytes::from_static(b"v11"));
        assert_eq!(
            cache.get(1, b"k", 12),
            Some(Bytes::from_static(b"v12")),
            "an old snapshot's read does not displace the newer version"
        );
        cache.insert_written(1, b"k", 13, Bytes::from_static(b"v13"), true);
        assert_eq!(cache.get(1, b"k", 12), None, "a write replaces the version");
        assert_eq!(cache.get(1, b"k", 13), Some(Bytes::from_static(b"v13")));
        cache.remove(1, b"k");
        assert_eq!(cache.get(1, b"k", 12), None);
        assert!(cache.weight_bytes() == 0);
    }

    #[test]
    fn values_inline_or_shared_read_back_whole_across_in_place_updates() {
        let cache = ValueCache::new(64 << 10);
        let lengths = [0, 1, INLINE_BYTES, INLINE_BYTES + 1, 1000, 3];
        for (seqno, &len) in (1u64..).zip(&lengths) {
            let value = Bytes::from((0..len).map(|byte| byte as u8 ^ 0x5a).collect::<Vec<_>>());
            // In place over the version before it: inline over shared and back.
            cache.insert_written(1, b"k", seqno, value.clone(), seqno > 1);
            assert_eq!(cache.get(1, b"k", seqno), Some(value), "{len} bytes");
            assert_eq!(cache.weight_bytes(), 1 + len as u64 + ENTRY_OVERHEAD_BYTES);
        }
    }

    #[test]
    fn a_hot_key_stays_cached_across_its_updates() {
        // One-off keys stream through (far more than fit) while one key is read, then
        // updated, after every ten of them. Keyed by version, as this cache was before, each
        // update entered the cache as a new, cold entry and the streaming evicted it before the
        // next read: 26 hits in 2,000. Keyed by key, the update replaces the value in place
        // and the key keeps the frequency it earned.
        let cache = ValueCache::new(64 << 10);
        let value = || Bytes::from(vec![7u8; 500]);
        let mut seqno = 0;
        let mut hot_seqno = 0;
        let mut hot_hits = 0;
        for round in 0..20_000u64 {
            seqno += 1;
            cache.insert_written(1, &round.to_be_bytes(), seqno, value(), false);
            if round % 10 == 0 {
                if cache.get(1, b"hot", hot_seqno).is_some() {
                    hot_hits += 1;
                }
                seqno += 1;
                hot_seqno = seqno;
                cache.insert_written(1, b"hot", hot_seqno, value(), true);
            }
        }
        assert!(
            hot_hits > 1900,
            "the hot key was evicted: {hot_hits} hits of 2000"
        );
    }

    #[test]
    fn its_keys_are_listed_and_it_says_when_it_is_full() {
        let cache = ValueCache::new(64 << 10);
        for seqno in 0..10u64 {
            cache.insert(seqno as u32 % 2, &seqno.to_be_bytes(), seqno, Bytes::new());
        }
        let mut keys = Vec::new();
        cache.for_each_key(|kvs_id, key| {
            keys.push((kvs_id, u64::from_be_bytes((*key).try_into().unwrap())));
            true
        });
        keys.sort();
        let mut expected: Vec<(u32, u64)> =
            (0..10u64).map(|seqno| (seqno as u32 % 2, seqno)).collect();
        expected.sort();
        assert_eq!(keys, expected);
        let mut visited = 0;
        cache.for_each_key(|_, _| {
            visited += 1;
            visited < 3
        });
        assert_eq!(visited, 3, "the walk stops when told");
        assert!(cache.holds(1, &9u64.to_be_bytes(), 9));
        assert!(!cache.holds(1, &9u64.to_be_bytes(), 8), "another version");
        assert!(!cache.is_nearly_full());
        for seqno in 10..1000u64 {
            cache.insert(1, &seqno.to_be_bytes(), seqno, Bytes::from(vec![0u8; 1000]));
        }
        assert!(cache.is_nearly_full());
        assert!(
            ValueCache::new(0).is_nearly_full(),
            "no cache is always full"
        );
    }

    /// Puts every key in one slot.
    #[derive(Default)]
    struct OneSlot;

    impl BuildHasher for OneSlot {
        type Hasher = OneSlotHasher;

        fn build_hasher(&self) -> OneSlotHasher {
            OneSlotHasher
        }
    }

    struct OneSlotHasher;

    impl std::hash::Hasher for OneSlotHasher {
        fn finish(&self) -> u64 {
            7
        }

        fn write(&mut self, _: &[u8]) {}
    }

    #[test]
    fn keys_sharing_a_slot_displace_each_other_and_never_answer_for_each_other() {
        let cache = ValueCache::with_slots(64 << 10, OneSlot);
        cache.insert_written(1, b"a", 1, Bytes::from_static(b"va"), false);
        assert_eq!(cache.get(1, b"a", 1), Some(Bytes::from_static(b"va")));
        // Updated in place as if it were a's: the slot now holds b's version.
        cache.insert_written(1, b"b", 2, Bytes::from_static(b"vb"), true);
        assert_eq!(cache.get(1, b"a", 1), None, "a was displaced");
        assert_eq!(cache.get(1, b"b", 2), Some(Bytes::from_static(b"vb")));
        // A read of an older version of another key displaces too (it is not b's older one).
        cache.insert(2, b"a", 1, Bytes::from_static(b"va"));
        assert_eq!(cache.get(1, b"b", 2), None);
        assert_eq!(cache.get(2, b"a", 1), Some(Bytes::from_static(b"va")));
        // Removing b leaves the slot's other key cached.
        cache.remove(1, b"b");
        assert!(cache.holds(2, b"a", 1));
        let mut keys = Vec::new();
        cache.for_each_key(|kvs_id, key| {
            keys.push((kvs_id, key));
            true
        });
        assert_eq!(
            keys,
            vec![(2, b"a"[..].into())],
            "the key its version belongs to"
        );
        cache.remove(2, b"a");
        assert!(!cache.holds(2, b"a", 1));
    }

    #[test]
    fn zero_budget_disables_it() {
        let cache = ValueCache::new(0);
        cache.insert(1, b"k", 1, Bytes::from_static(b"v"));
        assert_eq!(cache.get(1, b"k", 1), None);
    }
}
