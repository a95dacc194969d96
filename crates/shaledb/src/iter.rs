//! Ordered cursors over one KVS: forward and reverse, with bounds, prefixes and seek.
//!
//! A cursor reads a consistent view: it holds a snapshot for its whole life. It takes keys from
//! the index in chunks, each under short read locks of the index's partitions, so it never
//! blocks writers between items.

use crate::bounds::{above_lower, as_slice_bound, below_upper, OwnedBounds};
use crate::engine::{Engine, SnapshotPin};
use crate::error::{Error, Result};
use crate::index::{Entry, Key};
use crate::limits::SCAN_BATCH_RECORDS_MAX;
use crate::media::ReadPurpose;
use crate::store::KvsState;
use bytes::Bytes;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

/// Keys fetched from the index per refill, or fewer when the caller said how many it will
/// take (one more, to learn whether the range ends there): a refill copies each key it is
/// given, and merges the index's partitions, whose cost grows with the keys asked for.
const CHUNK_KEYS: usize = 128;

/// Keys of a cursor's first refill in a direction; each next one asks twice as many, up to
/// [`CHUNK_KEYS`]. Most ranges are short (one key's records in the server: a hash's ten
/// fields), and a chunk's buffers sized for 128 keys are allocations past glibc's small-request
/// bins, which made a ten-field HGETALL spend a sixth of its time in malloc.
const FIRST_CHUNK_KEYS: usize = 16;

/// A cursor reads the values of its next keys in batches, all of a batch's device reads in
/// flight at once: the first batch holds this many keys, and each next one twice as many as
/// the one before, up to [`SCAN_BATCH_RECORDS_MAX`], so a short scan reads little it does not use and a
/// long one keeps many reads in flight.
const READAHEAD_MIN: usize = 4;

/// One key the cursor will yield: its version, and its value once read ahead.
struct Slot {
    key: Key,
    entry: Entry,
    value: Option<Result<Option<Bytes>>>,
}

/// One end of a cursor: the keys fetched from the index in its direction, not yet yielded.
struct End {
    slots: VecDeque<Slot>,
    /// The index holds no more keys in this direction beyond the last slot.
    exhausted: bool,
    /// Keys in the next batch of value reads.
    readahead: usize,
    /// Keys the caller said it will still take (see [`Iter::will_take`]); batches read those first.
    expected: usize,
    /// Keys the next refill asks for when the caller said nothing.
    chunk_keys: usize,
}

impl End {
    fn new() -> Self {
        End {
            slots: VecDeque::new(),
            exhausted: false,
            readahead: READAHEAD_MIN,
            expected: 0,
            chunk_keys: FIRST_CHUNK_KEYS,
        }
    }

    /// Keys whose values the next batch reads: what the caller said it will take, else the
    /// doubling read-ahead.
    fn batch_len(&self) -> usize {
        if self.expected > 0 {
            self.expected.min(SCAN_BATCH_RECORDS_MAX)
        } else {
            self.readahead
        }
    }

    /// After a batch of `keys`: counts them against what the caller said it will take, or
    /// doubles the next batch.
    fn batch_read(&mut self, keys: usize) {
        if self.expected > 0 {
            self.expected = self.expected.saturating_sub(keys);
        } else {
            self.readahead = (self.readahead * 2).min(SCAN_BATCH_RECORDS_MAX);
        }
    }
}

/// An ordered cursor yielding `(key, value)` pairs. Iterate it forward, or backward with
/// `.rev()` / `next_back()`; both ends may be used on one cursor.
pub struct Iter {
    engine: Arc<Engine>,
    kvs: Arc<KvsState>,
    /// `None` only when the cursor was made on a closed KVDB or dropped KVS: it yields that error.
    snapshot: Option<SnapshotPin>,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    front: End,
    back: End,
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
            front: End::new(),
            back: End::new(),
            done: false,
            read_values: true,
        }
    }

    /// This cursor's keys alone: it reads no values, so it costs no device reads.
    pub fn keys(mut self) -> Keys {
        self.read_values = false;
        Keys(self)
    }

    /// Says that the caller will take about `keys` items from the front (or, reversed, the
    /// back): the cursor then reads their values in one batch (at most 64 at a time) instead of
    /// starting small and doubling, so a scan of known length reads nothing it does not use.
    pub fn will_take(mut self, keys: usize) -> Self {
        self.front.expected = keys;
        self.back.expected = keys;
        self
    }

    /// Moves the front of the cursor to the first key at or after `key`.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        self.front = End::new();
        // The back end may have stopped at the old front: it must look again down to the new one.
        self.back.exhausted = false;
        self.lower = Bound::Included(key.as_ref().to_vec());
        self.done = false;
    }

    fn end(&self, reverse: bool) -> &End {
        if reverse {
            &self.back
        } else {
            &self.front
        }
    }

    fn end_mut(&mut self, reverse: bool) -> &mut End {
        if reverse {
            &mut self.back
        } else {
            &mut self.front
        }
    }

    fn snapshot_seqno(&self) -> u64 {
        self.snapshot
            .as_ref()
            .expect("a live KVS has a snapshot")
            .seqno()
    }

    /// Fetches the next chunk of keys in one direction, after those it already holds.
    fn refill(&mut self, reverse: bool) -> Result<()> {
        self.engine.check_live(&self.kvs)?;
        let at = self.snapshot_seqno();
        let after_last = self
            .end(reverse)
            .slots
            .back()
            .map(|slot| Bound::Excluded(Vec::from(&slot.key[..])));
        let (lower, upper) = match (reverse, after_last) {
            (false, Some(last)) => (last, self.upper.clone()),
            (true, Some(last)) => (self.lower.clone(), last),
            (_, None) => (self.lower.clone(), self.upper.clone()),
        };
        let end = self.end_mut(reverse);
        let limit = if end.expected > 0 {
            end.expected.saturating_add(1).min(CHUNK_KEYS)
        } else {
            let keys = end.chunk_keys;
            end.chunk_keys = (keys * 2).min(CHUNK_KEYS);
            keys
        };
        let chunk = self.kvs.index.collect_visible(
            as_slice_bound(&lower),
            as_slice_bound(&upper),
            at,
            limit,
            reverse,
        );
        let end = self.end_mut(reverse);
        end.exhausted = chunk.exhausted;
        // A value the index keeps needs no read.
        end.slots
            .extend(chunk.entries.into_iter().map(|visible| Slot {
                key: visible.key,
                entry: visible.entry,
                value: visible.value.map(|value| Ok(Some(value))),
            }));
        Ok(())
    }

    /// Makes sure the next slot in one direction has its value, reading a batch ahead if not.
    fn read_ahead(&mut self, reverse: bool) -> Result<()> {
        if self
            .end(reverse)
            .slots
            .front()
            .is_none_or(|slot| slot.value.is_some())
        {
            return Ok(());
        }
        while {
            let end = self.end(reverse);
            end.slots.len() < end.batch_len() && !end.exhausted
        } {
            self.refill(reverse)?;
        }
        let end = self.end(reverse);
        let batch = end.batch_len().min(end.slots.len());
        let versions: Vec<(&[u8], Entry)> = end
            .slots
            .iter()
            .take(batch)
            .filter(|slot| slot.value.is_none())
            .map(|slot| (&slot.key[..], slot.entry))
            .collect();
        let values = self
            .engine
            .store
            .read_values(self.kvs.id, &versions, ReadPurpose::Scan);
        let end = self.end_mut(reverse);
        let unread = end
            .slots
            .iter_mut()
            .take(batch)
            .filter(|slot| slot.value.is_none());
        for (slot, value) in unread.zip(values) {
            slot.value = Some(value);
        }
        end.batch_read(batch);
        Ok(())
    }

    fn step(&mut self, reverse: bool) -> Option<Result<(Bytes, Bytes)>> {
        if self.done {
            return None;
        }
        let end = self.end(reverse);
        let refill = end.slots.is_empty() && !end.exhausted;
        let fetched = if refill { self.refill(reverse) } else { Ok(()) };
        let ready = fetched.and_then(|()| {
            if self.read_values {
                self.read_ahead(reverse)
            } else {
                Ok(())
            }
        });
        if let Err(error) = ready {
            self.done = true;
            return Some(Err(error));
        }
        let Some(Slot { key, value, .. }) = self.end_mut(reverse).slots.pop_front() else {
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
        let value = match value {
            _ if !self.read_values => Ok(Bytes::new()),
            Some(Ok(Some(value))) => Ok(value),
            // Moved by the cleaner since the index was read (or, never expected, not read ahead).
            Some(Ok(None)) | None => self.read_moved(&key),
            Some(Err(error)) => Err(error),
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

    /// Reads the value of `key` on its own, looking it up again at the cursor's snapshot.
    fn read_moved(&self, key: &[u8]) -> Result<Bytes> {
        self.engine
            .get(&self.kvs, key, Some(self.snapshot_seqno()))?
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
