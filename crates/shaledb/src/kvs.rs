//! [`Kvs`]: the public handle on one KVS, for single puts, gets, deletes and cursors.

use crate::bounds::{owned_bounds, prefix_bounds};
use crate::commit::BatchOp;
use crate::engine::Engine;
use crate::error::Result;
use crate::index::RangeSize;
use crate::iter::Iter;
use crate::options::KvsOptions;
use crate::record::{validate_key, RecordKind};
use crate::store::KvsState;
use bytes::Bytes;
use std::ops::RangeBounds;
use std::sync::Arc;

/// A handle on one KVS. Clone it freely; it stays usable until the KVDB closes or the KVS is dropped.
#[derive(Clone)]
pub struct Kvs {
    pub(crate) engine: Arc<Engine>,
    pub(crate) state: Arc<KvsState>,
}

impl Kvs {
    pub(crate) fn new(engine: Arc<Engine>, state: Arc<KvsState>) -> Self {
        Kvs { engine, state }
    }

    pub fn name(&self) -> &str {
        &self.state.name
    }

    pub fn options(&self) -> &KvsOptions {
        &self.state.options
    }

    fn single(&self, kind: RecordKind, key: &[u8], value: Bytes) -> Result<()> {
        let op = BatchOp::validated(self.state.clone(), kind, key.to_vec(), value)?;
        self.engine.commit(smallvec::smallvec![op])
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let value = Bytes::copy_from_slice(value.as_ref());
        self.single(RecordKind::Put, key.as_ref(), value)
    }

    /// The newest value of `key`, if any.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.engine.get(&self.state, key.as_ref(), None)
    }

    /// Whether `key` has a value (costs no device read).
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.check_live()?;
        validate_key(key.as_ref())?;
        Ok(self.state.index.contains(key.as_ref()))
    }

    /// Deletes `key` (a no-op if it has no value).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.single(RecordKind::Tombstone, key.as_ref(), Bytes::new())
    }

    /// Deletes every key that starts with `prefix`. When the KVS has a `prefix_len`, the
    /// prefix must be exactly that long.
    pub fn prefix_delete(&self, prefix: impl AsRef<[u8]>) -> Result<()> {
        self.single(RecordKind::PrefixTombstone, prefix.as_ref(), Bytes::new())
    }

    /// The values of `keys`, in order, read at one consistent moment.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        self.check_live()?;
        let snapshot = self.engine.take_snapshot();
        let keys: Vec<K> = keys.into_iter().collect();
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.engine.multi_get(&self.state, &keys, snapshot.seqno())
    }

    /// Keys in `range`, in order; reverse with `.rev()`. Reads a consistent view taken now.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        Iter::new(
            self.engine.clone(),
            self.state.clone(),
            None,
            owned_bounds(&range),
        )
    }

    /// The first key in `range` that has a value, if any (costs no device read). Within one
    /// key group (`KvsOptions::key_groups`) it is one probe of one index partition, without the
    /// snapshot and chunk a cursor takes: how a caller that keeps one group per object finds
    /// what the object's first record is.
    pub fn first_key<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<Option<Bytes>> {
        self.check_live()?;
        let lower = range.start_bound().map(AsRef::as_ref);
        let upper = range.end_bound().map(AsRef::as_ref);
        match self.state.index.first_key_in_group(lower, upper) {
            Some(first) => Ok(first.map(|key| Bytes::from(Vec::from(key)))),
            None => self.range(range).keys().next().transpose(),
        }
    }

    /// The keys in `range` with their values, read at one moment, when the range lies within
    /// one key group (`KvsOptions::key_groups`), holds at most `keys_max` keys, and the records
    /// it would read from media (values the index does not keep) take at most `bytes_max`;
    /// `None` otherwise (a cursor reads it then, a few values at a time). Cheaper than a cursor
    /// over a few keys (one object's records): it pins no snapshot, and the group's partition
    /// lock gives the one moment.
    pub fn read_group<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        keys_max: usize,
        bytes_max: u64,
    ) -> Result<Option<Vec<(Bytes, Bytes)>>> {
        self.check_live()?;
        let lower = range.start_bound().map(AsRef::as_ref);
        let upper = range.end_bound().map(AsRef::as_ref);
        self.engine
            .store
            .read_group(&self.state, lower, upper, keys_max, bytes_max)
    }

    /// How many keys `range` holds now and the keys at the positions `choose` picks for that
    /// count (ascending, each below it), read at one moment from the index (no device reads),
    /// leaf by leaf where a cursor or `range_size` steps key by key: a large object's size, or a
    /// random sample of its records. `None` when the range spans key groups
    /// (`KvsOptions::key_groups`).
    pub fn count_and_pick<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        choose: impl FnOnce(usize) -> Vec<usize>,
    ) -> Result<Option<(usize, Vec<Bytes>)>> {
        self.check_live()?;
        let lower = range.start_bound().map(AsRef::as_ref);
        let upper = range.end_bound().map(AsRef::as_ref);
        Ok(self
            .state
            .index
            .count_and_pick_in_group(lower, upper, choose)
            .map(|(count, keys)| {
                let keys = keys.into_iter().map(|key| Bytes::from(Vec::from(key)));
                (count, keys.collect())
            }))
    }

    /// How many keys `range` holds now and the bytes of their records on media, counted from
    /// the index (no device reads; old versions kept for snapshots not included).
    pub fn range_size<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<RangeSize> {
        self.check_live()?;
        let lower = range.start_bound().map(AsRef::as_ref);
        let upper = range.end_bound().map(AsRef::as_ref);
        Ok(self.state.index.range_size(lower, upper))
    }

    /// Every key starting with `prefix`, in order; reverse with `.rev()`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        Iter::new(
            self.engine.clone(),
            self.state.clone(),
            None,
            prefix_bounds(prefix.as_ref()),
        )
    }

    /// Every key, in order.
    pub fn iter(&self) -> Iter {
        self.range::<&[u8], _>(..)
    }

    /// Number of keys (counted from the index, no device reads).
    pub fn len(&self) -> Result<usize> {
        self.check_live()?;
        Ok(self.state.index.len())
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    pub(crate) fn check_live(&self) -> Result<()> {
        self.engine.check_live(&self.state)
    }
}
