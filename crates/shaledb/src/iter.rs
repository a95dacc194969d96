//! Ordered cursors over one KVS: forward and reverse, with bounds, prefixes and seek.
//!
//! A cursor reads a consistent view: it holds a snapshot for its whole life. It takes keys from
//! the index in chunks under a short read lock, so it never blocks writers between items.

use crate::bounds::{above_lower, as_slice_bound, below_upper, OwnedBounds};
use crate::engine::{Engine, SnapshotPin};
use crate::error::{Error, Result};
use crate::index::{Entry, Key};
use crate::media::ReadPurpose;
use crate::store::KvsState;
use bytes::Bytes;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

/// Keys fetched from the index per refill.
const CHUNK_KEYS: usize = 128;

/// An ordered cursor yielding `(key, value)` pairs. Iterate it forward, or backward with
/// `.rev()` / `next_back()`; both ends may be used on one cursor.
pub struct Iter {
    engine: Arc<Engine>,
    kvs: Arc<KvsState>,
    /// `None` only when the cursor was made on a closed KVDB or dropped KVS: it yields that error.
    snapshot: Option<SnapshotPin>,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    front: VecDeque<(Key, Entry)>,
    back: VecDeque<(Key, Entry)>,
    done: bool,
    read_values: bool,
}

impl Iter {
    /// A cursor over `kvs` at snapshot `at` (a seqno a live snapshot holds), or at a snapshot
    /// taken now.
    pub(crate) fn new(
        engine: Arc<Engine>,
        kvs: Arc<KvsState>,
        at: Option<u64>,
        (lower, upper): OwnedBounds,
    ) -> Self {
        let snapshot = match engine.check_live(&kvs) {
            Ok(()) => Some(match at {
                Some(seqno) => engine.pin_again(seqno),
                None => engine.take_snapshot(),
            }),
            Err(_) => None,
        };
        Iter {
            engine,
            kvs,
            snapshot,
            lower,
            upper,
            front: VecDeque::new(),
            back: VecDeque::new(),
            done: false,
            read_values: true,
        }
    }

    /// This cursor's keys alone: it reads no values, so it costs no device reads.
    pub fn keys(mut self) -> Keys {
        self.read_values = false;
        Keys(self)
    }

    /// Moves the front of the cursor to the first key at or after `key`.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        self.front.clear();
        self.lower = Bound::Included(key.as_ref().to_vec());
        self.done = false;
    }

    fn refill(&mut self, reverse: bool) -> Result<()> {
        self.engine.check_live(&self.kvs)?;
        let at = self
            .snapshot
            .as_ref()
            .expect("a live KVS has a snapshot")
            .seqno();
        let chunk = self.kvs.index.read().collect_visible(
            as_slice_bound(&self.lower),
            as_slice_bound(&self.upper),
            at,
            CHUNK_KEYS,
            reverse,
        );
        if reverse {
            self.back.extend(chunk);
        } else {
            self.front.extend(chunk);
        }
        Ok(())
    }

    fn step(&mut self, reverse: bool) -> Option<Result<(Bytes, Bytes)>> {
        if self.done {
            return None;
        }
        let buffer_empty = if reverse {
            self.back.is_empty()
        } else {
            self.front.is_empty()
        };
        if buffer_empty {
            if let Err(error) = self.refill(reverse) {
                self.done = true;
                return Some(Err(error));
            }
        }
        let next = if reverse {
            self.back.pop_front()
        } else {
            self.front.pop_front()
        };
        let Some((key, entry)) = next else {
            self.done = true;
            return None;
        };
        // The other end may have moved past this key since the chunk was fetched.
        let inside = if reverse {
            above_lower(&key, &self.lower)
        } else {
            below_upper(&key, &self.upper)
        };
        if !inside {
            self.done = true;
            return None;
        }
        let value = if self.read_values {
            self.read(&key, entry)
        } else {
            Ok(Bytes::new())
        };
        let key = Bytes::from(Vec::from(key));
        if reverse {
            self.upper = Bound::Excluded(key.to_vec());
        } else {
            self.lower = Bound::Excluded(key.to_vec());
        }
        match value {
            Ok(value) => Some(Ok((key, value))),
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }

    fn read(&self, key: &[u8], entry: Entry) -> Result<Bytes> {
        let store = &self.engine.store;
        if let Some(value) = store.read_value(self.kvs.id, key, entry, ReadPurpose::Scan)? {
            return Ok(value);
        }
        // The cleaner moved the record: look it up again at the same snapshot.
        let at = self.snapshot.as_ref().map(SnapshotPin::seqno);
        self.engine
            .get(&self.kvs, key, at)?
            .ok_or_else(|| Error::Io {
                context: format!("scan of KVS {:?}", self.kvs.name),
                source: std::io::Error::other("a key visible to the scan's snapshot vanished"),
            })
    }
}

impl Iterator for Iter {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

/// An ordered cursor over keys only (see [`Iter::keys`]).
pub struct Keys(Iter);

impl Keys {
    /// Moves the front of the cursor to the first key at or after `key`.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        self.0.seek(key);
    }
}

impl Iterator for Keys {
    type Item = Result<Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.step(false).map(|item| item.map(|(key, _)| key))
    }
}

impl DoubleEndedIterator for Keys {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.step(true).map(|item| item.map(|(key, _)| key))
    }
}
