//! [`WriteBatch`]: writes to one or more KVSs applied all together or not at all.

use crate::commit::BatchOp;
use crate::error::Error;
use crate::kvs::Kvs;
use crate::record::RecordKind;

/// Writes applied all together or not at all, also across a crash.
#[derive(Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<BatchOp>,
    pub(crate) encoded_bytes: u64,
    /// The first invalid write: [`crate::Db::write`] then fails, writing nothing.
    pub(crate) error: Option<Error>,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, kvs: &Kvs, kind: RecordKind, key: &[u8], value: &[u8]) {
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
        self.push(kvs, RecordKind::Put, key.as_ref(), value.as_ref());
    }

    pub fn delete(&mut self, kvs: &Kvs, key: impl AsRef<[u8]>) {
        self.push(kvs, RecordKind::Tombstone, key.as_ref(), &[]);
    }

    pub fn prefix_delete(&mut self, kvs: &Kvs, prefix: impl AsRef<[u8]>) {
        self.push(kvs, RecordKind::PrefixTombstone, prefix.as_ref(), &[]);
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}
