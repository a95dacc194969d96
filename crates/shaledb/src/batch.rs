//! [`WriteBatch`]: writes to one or more KVSs applied all together or not at all.

use crate::commit::{BatchOp, BatchOps};
use crate::error::Error;
use crate::kvs::Kvs;
use crate::record::RecordKind;
use bytes::Bytes;

/// Writes applied all together or not at all, also across a crash.
#[derive(Default)]
pub struct WriteBatch {
    pub(crate) ops: BatchOps,
    pub(crate) encoded_bytes: u64,
    /// The first invalid write: [`crate::Db::write`] then fails, writing nothing.
    pub(crate) error: Option<Error>,
    /// Set by [`WriteBatch::mark_freeing`].
    pub(crate) frees_space: bool,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `ops` writes before it reallocates.
    pub fn with_capacity(ops: usize) -> Self {
        WriteBatch {
            ops: BatchOps::with_capacity(ops),
            ..Self::default()
        }
    }

    fn push(&mut self, kvs: &Kvs, kind: RecordKind, key: Vec<u8>, value: Bytes) {
        if self.error.is_some() {
            return;
        }
        match BatchOp::validated(kvs.state.clone(), kind, key, value) {
            Ok(op) => {
                self.encoded_bytes += op.encoded_len() as u64;
                self.ops.push(op);
            }
            Err(error) => self.error = Some(error),
        }
    }

    /// Adds a put. An invalid key or value makes [`crate::Db::write`] fail, writing nothing.
    pub fn put(&mut self, kvs: &Kvs, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let value = Bytes::copy_from_slice(value.as_ref());
        self.push(kvs, RecordKind::Put, key.as_ref().to_vec(), value);
    }

    /// Like [`WriteBatch::put`], taking the key and value as they are instead of copying them.
    /// The value cache keeps `value` itself: a slice of a larger buffer keeps all of it alive,
    /// so pass bytes of their own.
    pub fn put_owned(&mut self, kvs: &Kvs, key: Vec<u8>, value: Bytes) {
        self.push(kvs, RecordKind::Put, key, value);
    }

    pub fn delete(&mut self, kvs: &Kvs, key: impl AsRef<[u8]>) {
        self.delete_owned(kvs, key.as_ref().to_vec());
    }

    /// Like [`WriteBatch::delete`], taking the key instead of copying it.
    pub fn delete_owned(&mut self, kvs: &Kvs, key: Vec<u8>) {
        self.push(kvs, RecordKind::Tombstone, key, Bytes::new());
    }

    pub fn prefix_delete(&mut self, kvs: &Kvs, prefix: impl AsRef<[u8]>) {
        let prefix = prefix.as_ref().to_vec();
        self.push(kvs, RecordKind::PrefixTombstone, prefix, Bytes::new());
    }

    /// Marks the batch as one that frees space although it holds puts (a delete with its
    /// bookkeeping: a count, a marker). Like a batch of deletes only, it may then use the
    /// headroom past the space limit ([`crate::Options::space_delete_headroom_bytes`]) and is
    /// never slowed, so a full KVDB can still be emptied. The headroom is small: a batch marked
    /// so that stores data only takes room from the deletes that need it.
    pub fn mark_freeing(&mut self) {
        self.frees_space = true;
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}
