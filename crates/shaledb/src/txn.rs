//! Transactions: snapshot isolation across the KVSs of a KVDB, optimistic conflict detection at
//! commit, atomic (and durable per the KVDB's durability mode) through the batch commit path.
//!
//! A transaction reads at the snapshot taken by `begin` and buffers its writes; reads see its own
//! writes first. While any transaction is open, every commit (transactional or not) records the
//! keys it wrote, and the prefixes it deleted, with their seqnos in the [`ConflictTracker`]. A
//! transaction's commit fails with [`Error::Conflict`] if a key it wrote (and, with
//! `validate_reads`, a key it read) was committed after its snapshot; the check and the append
//! happen under the commit-order lock, so no commit can slip between them.
//!
//! Isolation: snapshot isolation (first committer wins on write-write conflicts); write skew is
//! possible. With `validate_reads`, point reads and keys returned by cursors are also validated,
//! which prevents write skew over the keys read; phantoms (keys inserted into a range a cursor
//! read) are not detected.

use crate::bounds::{owned_bounds, prefix_bounds, OwnedBounds};
use crate::commit::{BatchOp, BatchOps};
use crate::conflicts::ConflictTracker;
use crate::engine::{Engine, SnapshotPin};
use crate::error::{Error, Result};
use crate::iter::Iter;
use crate::kvs::Kvs;
use crate::record::{self, validate_key, validate_value};
use crate::snapshot::Snapshot;
use crate::store::KvsState;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// Options of one transaction.
#[derive(Debug, Clone)]
pub struct TxnOptions {
    /// Also fail the commit if a key this transaction read was committed by someone else after
    /// its snapshot (prevents write skew over those keys). Default false: plain snapshot isolation.
    pub validate_reads: bool,
    /// Largest write set, in encoded bytes; writes past it fail with `LimitExceeded`. Default 64 MiB
    /// (a commit must also fit in one segment).
    pub write_set_bytes_max: u64,
}

impl Default for TxnOptions {
    fn default() -> Self {
        TxnOptions {
            validate_reads: false,
            write_set_bytes_max: 64 << 20,
        }
    }
}

/// A buffered write: the KVS and `Some(value)` for a put or `None` for a delete.
type PendingWrite = (Arc<KvsState>, Option<Vec<u8>>);

/// A transaction. Commit with [`Transaction::commit`]; dropping it (or [`Transaction::abort`])
/// discards it.
pub struct Transaction {
    engine: Arc<Engine>,
    snapshot: Option<SnapshotPin>,
    options: TxnOptions,
    writes: BTreeMap<(u32, Vec<u8>), PendingWrite>,
    write_bytes: u64,
    reads: Mutex<HashSet<(u32, Vec<u8>)>>,
}

impl Transaction {
    /// Begins a transaction reading at a snapshot taken now, registered with the conflict
    /// tracker while no commit can happen.
    pub(crate) fn begin(engine: &Arc<Engine>, options: TxnOptions) -> Transaction {
        let snapshot = engine.take_snapshot_then(|seqno| engine.conflicts.begin(seqno));
        Transaction {
            engine: engine.clone(),
            snapshot: Some(snapshot),
            options,
            writes: BTreeMap::new(),
            write_bytes: 0,
            reads: Mutex::new(HashSet::new()),
        }
    }

    /// The sequence number this transaction reads at.
    pub fn seqno(&self) -> u64 {
        self.snapshot().seqno()
    }

    fn snapshot(&self) -> &SnapshotPin {
        self.snapshot
            .as_ref()
            .expect("a live transaction has its snapshot")
    }

    fn note_read(&self, kvs: &Kvs, key: &[u8]) {
        if self.options.validate_reads {
            self.reads.lock().insert((kvs.state.id, key.to_vec()));
        }
    }

    fn buffer(&mut self, kvs: &Kvs, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        kvs.check_live()?;
        validate_key(key)?;
        if let Some(value) = value {
            validate_value(value)?;
        }
        let bytes = record::encoded_len(key.len(), value.map_or(0, <[u8]>::len)) as u64;
        let slot = (kvs.state.id, key.to_vec());
        let replaced = self.writes.get(&slot).map_or(0, |(_, old)| {
            record::encoded_len(key.len(), old.as_ref().map_or(0, Vec::len)) as u64
        });
        let total = self.write_bytes - replaced + bytes;
        let limit = self
            .options
            .write_set_bytes_max
            .min(self.engine.options.batch_bytes_limit());
        if total > limit {
            return Err(Error::LimitExceeded {
                what: "transaction write set",
                limit,
                actual: total,
            });
        }
        self.write_bytes = total;
        self.writes
            .insert(slot, (kvs.state.clone(), value.map(<[u8]>::to_vec)));
        Ok(())
    }

    /// Sets `key` in `kvs` to `value` when the transaction commits.
    pub fn put(&mut self, kvs: &Kvs, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.buffer(kvs, key.as_ref(), Some(value.as_ref()))
    }

    /// Deletes `key` from `kvs` when the transaction commits.
    pub fn delete(&mut self, kvs: &Kvs, key: impl AsRef<[u8]>) -> Result<()> {
        self.buffer(kvs, key.as_ref(), None)
    }

    /// `key`'s value as this transaction sees it: its own write, else its snapshot.
    pub fn get(&self, kvs: &Kvs, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let key = key.as_ref();
        if let Some((_, pending)) = self.writes.get(&(kvs.state.id, key.to_vec())) {
            return Ok(pending.as_ref().map(|value| Bytes::copy_from_slice(value)));
        }
        self.note_read(kvs, key);
        self.engine.get(&kvs.state, key, Some(self.seqno()))
    }

    /// The values of `keys`, as this transaction sees them.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        kvs: &Kvs,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<Option<Bytes>>> {
        keys.into_iter().map(|key| self.get(kvs, key)).collect()
    }

    /// Keys of `kvs` in `range` as this transaction sees them, its own writes merged in.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, kvs: &Kvs, range: R) -> TxnIter<'_> {
        self.cursor(kvs, owned_bounds(&range))
    }

    /// Keys of `kvs` starting with `prefix` as this transaction sees them.
    pub fn prefix(&self, kvs: &Kvs, prefix: impl AsRef<[u8]>) -> TxnIter<'_> {
        self.cursor(kvs, prefix_bounds(prefix.as_ref()))
    }

    fn cursor(&self, kvs: &Kvs, bounds: OwnedBounds) -> TxnIter<'_> {
        let as_ref = |bound: &Bound<Vec<u8>>| match bound {
            Bound::Included(key) => Bound::Included((kvs.state.id, key.clone())),
            Bound::Excluded(key) => Bound::Excluded((kvs.state.id, key.clone())),
            Bound::Unbounded => Bound::Unbounded,
        };
        let lower = match &bounds.0 {
            Bound::Unbounded => Bound::Included((kvs.state.id, Vec::new())),
            bound => as_ref(bound),
        };
        let mut upper = match &bounds.1 {
            Bound::Unbounded => Bound::Excluded((kvs.state.id + 1, Vec::new())),
            bound => as_ref(bound),
        };
        if crate::bounds::is_empty_range(lower.as_ref(), upper.as_ref()) {
            upper = lower.clone();
        }
        let overlay = self
            .writes
            .range((lower, upper))
            .map(|((_, key), (_, value))| {
                (
                    Bytes::copy_from_slice(key),
                    value.as_deref().map(Bytes::copy_from_slice),
                )
            })
            .collect();
        TxnIter {
            txn: self,
            kvs: kvs.clone(),
            base: Iter::new(
                kvs.engine.clone(),
                kvs.state.clone(),
                Some(self.seqno()),
                bounds,
            ),
            overlay,
            base_front: None,
            base_back: None,
            done: false,
        }
    }

    /// A [`Snapshot`] reading at this transaction's snapshot, for readers that outlive a borrow
    /// of the transaction (it keeps the versions it sees readable while it lives).
    pub fn snapshot_view(&self) -> Snapshot {
        Snapshot::new(self.engine.pin_again(self.seqno()))
    }

    /// Fails with [`Error::Conflict`] if `key` of `kvs` was committed by another writer after
    /// this transaction's snapshot: the check [`Transaction::commit`] makes for the keys it
    /// writes, made now for one key. A caller that keeps others from writing the key (a lock of
    /// its own) can rely on the answer until it commits.
    pub fn check_unchanged(&self, kvs: &Kvs, key: impl AsRef<[u8]>) -> Result<()> {
        kvs.check_live()?;
        let key = key.as_ref();
        let snapshot = self.seqno();
        match self
            .engine
            .conflicts
            .first_conflict(snapshot, std::iter::once((kvs.state.id, key)))
        {
            Some(key) => Err(Error::Conflict(format!(
                "key {:?} was committed by another writer after this transaction's snapshot (seqno {snapshot})",
                String::from_utf8_lossy(&key)
            ))),
            None => Ok(()),
        }
    }

    /// Number of buffered writes.
    pub fn write_count(&self) -> usize {
        self.writes.len()
    }

    /// Commits atomically: every write or none, also across a crash. Fails with
    /// [`Error::Conflict`] (writing nothing) if another commit after this transaction's snapshot
    /// touched a key it wrote, or, with `validate_reads`, a key it read.
    pub fn commit(mut self) -> Result<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let snapshot = self.seqno();
        let writes = std::mem::take(&mut self.writes);
        let ops: BatchOps = writes
            .into_iter()
            .map(|((_, key), (kvs, value))| BatchOp::new(kvs, key, value))
            .collect();
        let reads = std::mem::take(&mut *self.reads.lock());
        let engine = self.engine.clone();
        engine.commit_validated(ops, &|tracker: &ConflictTracker, ops: &[BatchOp]| {
            let written = ops.iter().map(|op| (op.kvs_id(), op.key()));
            let read = reads.iter().map(|(kvs_id, key)| (*kvs_id, key.as_slice()));
            match tracker.first_conflict(snapshot, written.chain(read)) {
                Some(key) => Err(Error::Conflict(format!(
                    "key {:?} was committed by another writer after this transaction's snapshot (seqno {snapshot})",
                    String::from_utf8_lossy(&key)
                ))),
                None => Ok(()),
            }
        })
    }

    /// Discards every buffered write.
    pub fn abort(self) {}
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if let Some(snapshot) = self.snapshot.take() {
            self.engine.conflicts.end(snapshot.seqno());
        }
    }
}

/// A cursor of a transaction: its snapshot with its own writes merged in.
pub struct TxnIter<'t> {
    txn: &'t Transaction,
    kvs: Kvs,
    base: Iter,
    overlay: VecDeque<(Bytes, Option<Bytes>)>,
    base_front: Option<(Bytes, Bytes)>,
    base_back: Option<(Bytes, Bytes)>,
    done: bool,
}

impl TxnIter<'_> {
    fn step(&mut self, reverse: bool) -> Option<Result<(Bytes, Bytes)>> {
        let TxnIter {
            txn,
            kvs,
            base,
            overlay,
            base_front,
            base_back,
            done,
        } = self;
        let (mine, theirs) = if reverse {
            (base_back, base_front)
        } else {
            (base_front, base_back)
        };
        while !*done {
            if mine.is_none() {
                match if reverse {
                    base.next_back()
                } else {
                    base.next()
                } {
                    Some(Ok(item)) => *mine = Some(item),
                    Some(Err(error)) => {
                        *done = true;
                        return Some(Err(error));
                    }
                    // The base is exhausted from this end; what the other end buffered is next.
                    None => *mine = theirs.take(),
                }
            }
            let own = if reverse {
                overlay.back()
            } else {
                overlay.front()
            };
            let order = match (mine.as_ref(), own) {
                (None, None) => {
                    *done = true;
                    return None;
                }
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((base_key, _)), Some((own_key, _))) if reverse => own_key.cmp(base_key),
                (Some((base_key, _)), Some((own_key, _))) => base_key.cmp(own_key),
            };
            if order == std::cmp::Ordering::Less {
                let (key, value) = mine.take().expect("compared above");
                txn.note_read(kvs, &key);
                return Some(Ok((key, value)));
            }
            if order == std::cmp::Ordering::Equal {
                mine.take(); // shadowed by the transaction's own write
            }
            let popped = if reverse {
                overlay.pop_back()
            } else {
                overlay.pop_front()
            };
            if let Some((key, Some(value))) = popped {
                return Some(Ok((key, value)));
            }
        }
        None
    }
}

impl Iterator for TxnIter<'_> {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

impl DoubleEndedIterator for TxnIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}
