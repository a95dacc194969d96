//! [`Snapshot`]: a consistent read-only view of every KVS at one moment.

use crate::bounds::{owned_bounds, prefix_bounds};
use crate::engine::SnapshotPin;
use crate::error::Result;
use crate::iter::Iter;
use crate::kvs::Kvs;
use bytes::Bytes;
use std::ops::RangeBounds;

/// A consistent read-only view of the KVDB at one moment: later writes do not change it.
pub struct Snapshot {
    pin: SnapshotPin,
}

impl Snapshot {
    pub(crate) fn new(pin: SnapshotPin) -> Self {
        Snapshot { pin }
    }

    /// The sequence number this snapshot reads at.
    pub fn seqno(&self) -> u64 {
        self.pin.seqno()
    }

    /// The value of `key` in `kvs` as of this snapshot.
    pub fn get(&self, kvs: &Kvs, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        kvs.engine.get(&kvs.state, key.as_ref(), Some(self.seqno()))
    }

    /// Keys of `kvs` in `range` as of this snapshot.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, kvs: &Kvs, range: R) -> Iter {
        Iter::new(
            kvs.engine.clone(),
            kvs.state.clone(),
            Some(self.seqno()),
            owned_bounds(&range),
        )
    }

    /// Keys of `kvs` starting with `prefix` as of this snapshot.
    pub fn prefix(&self, kvs: &Kvs, prefix: impl AsRef<[u8]>) -> Iter {
        Iter::new(
            kvs.engine.clone(),
            kvs.state.clone(),
            Some(self.seqno()),
            prefix_bounds(prefix.as_ref()),
        )
    }
}
