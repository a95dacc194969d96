//! Room in a log head: making it before the caller takes its locks (a flush, a roll, the next
//! segment prepared), the lock-free hint that skips the head's lock when there is room, and the
//! locked appender that writes records into it.

use super::{create_segment, HeadState, LogHead};
use crate::error::Result;
use crate::limits::{PAGE_BYTES, SEGMENT_HEADER_BYTES};
use crate::record::{self, RecordRef};
use crate::segment::{HeadKind, Location, Seal, SegmentMeta};
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl LogHead {
    /// Locks the head for appending.
    pub fn lock(&self) -> Appender<'_> {
        Appender {
            head: self,
            state: self.state.lock(),
        }
    }

    /// Rolls the segment or flushes the buffer now if `bytes` more would need it, so that the
    /// caller's next `reserve` finds room without I/O. Call it before taking an index lock: a
    /// roll's fdatasync under that lock would stall every reader of the KVS.
    pub fn make_room(&self, bytes: usize) -> Result<()> {
        if bytes as u64 <= self.room_hint.load(Ordering::Acquire) {
            return Ok(());
        }
        self.make_room_now(bytes)
    }

    /// Like `make_room`, but always under the lock: for a caller that found the room it was
    /// promised gone (a stale hint), so that it waits for the room rather than spinning.
    pub fn make_room_now(&self, bytes: usize) -> Result<()> {
        let mut state = self.state.lock();
        self.prepare_next_segment(&mut state)?;
        let made = self.make_room_locked(&mut state, bytes);
        self.publish_room(&state);
        made
    }

    /// Updates `room_hint` from the state; called where the lock's holder changed what it
    /// depends on (appends, flushes, rolls, segment preparation).
    pub(super) fn publish_room(&self, state: &HeadState) {
        let room = if state.rolling || state.stalled || self.preparation_due(state) {
            0
        } else {
            let (in_segment, in_tail) = self.free_bytes(state);
            in_segment.min(in_tail)
        };
        self.room_hint.store(room, Ordering::Release);
    }

    /// Whether the next segment should be created now: the active one is half full and none is
    /// prepared.
    fn preparation_due(&self, state: &HeadState) -> bool {
        state.next_segment.is_none() && state.end >= self.config.segment_bytes / 2
    }

    /// Bytes the active segment and the tail buffer can each still take.
    fn free_bytes(&self, state: &HeadState) -> (u64, u64) {
        let in_segment = self.config.segment_bytes.saturating_sub(state.end);
        let in_tail = state.tail.capacity() as u64 - (state.end - state.tail_base);
        (in_segment, in_tail)
    }

    /// Once the active segment is half full, creates the next one with the lock released. A roll
    /// then only switches files: creating one (open, header write, fdatasync of file and
    /// directory) under the lock stalled appenders that already hold index write locks, and so
    /// every reader of their KVSs (gets of ~100 ms at YCSB A's p99.99).
    pub(super) fn prepare_next_segment(&self, state: &mut MutexGuard<'_, HeadState>) -> Result<()> {
        if state.preparing || !self.preparation_due(state) {
            return Ok(());
        }
        state.preparing = true;
        let created = MutexGuard::unlocked(state, || create_segment(&self.config));
        state.preparing = false;
        state.next_segment = Some(created?);
        self.publish_room(state);
        Ok(())
    }

    pub(super) fn make_room_locked(
        &self,
        state: &mut MutexGuard<'_, HeadState>,
        bytes: usize,
    ) -> Result<()> {
        let bytes = bytes as u64;
        assert!(
            SEGMENT_HEADER_BYTES + bytes <= self.config.segment_bytes
                && bytes + PAGE_BYTES as u64 <= state.tail.capacity() as u64,
            "callers bound batches by the segment and write buffer sizes"
        );
        loop {
            self.config.poison.check()?;
            match self.room_for(state, bytes) {
                Room::Rolling => self.changed.wait(state),
                Room::NeedsRoll => self.roll(state)?,
                Room::NeedsFlush => self.flush_locked(state, false)?,
                Room::Fits => return Ok(()),
            }
        }
    }

    /// Whether `bytes` more records fit in the active segment and the tail buffer now.
    pub(super) fn room_for(&self, state: &HeadState, bytes: u64) -> Room {
        let (in_segment, in_tail) = self.free_bytes(state);
        if state.rolling {
            Room::Rolling
        } else if state.stalled {
            // Nothing more is appended until the failed write is retried and succeeds.
            Room::NeedsFlush
        } else if bytes > in_segment {
            Room::NeedsRoll
        } else if bytes > in_tail {
            Room::NeedsFlush
        } else {
            Room::Fits
        }
    }
}

/// What appending a given number of bytes to a head needs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Room {
    Fits,
    /// A roll is under way: wait for it.
    Rolling,
    NeedsRoll,
    NeedsFlush,
}

/// A locked head: reserve space, then append records.
pub struct Appender<'a> {
    head: &'a LogHead,
    state: MutexGuard<'a, HeadState>,
}

impl Appender<'_> {
    /// Makes room for `bytes` of records, contiguous in one segment: rolls the segment or
    /// waits for a flush as needed. Must precede the appends it covers.
    pub fn reserve(&mut self, bytes: usize) -> Result<()> {
        self.head.make_room_locked(&mut self.state, bytes)
    }

    /// Whether `bytes` of records fit now, with no flush or roll first; `make_room` (without
    /// locks held) makes it so.
    pub fn has_room(&self, bytes: usize) -> bool {
        self.head.room_for(&self.state, bytes as u64) == Room::Fits
    }

    /// Appends one record inside the reserved space, encoded straight into the tail buffer.
    pub fn append(&mut self, record: &RecordRef<'_>) -> Location {
        let state = &mut *self.state;
        let offset = state.end;
        let len = record.encoded_len();
        let encoded = state.tail.extend_with(len);
        record::encode_into(encoded, record);
        state.records += 1;
        state.records_crc = Seal::chain(state.records_crc, encoded);
        state.end += len as u64;
        state.appended_lsn += len as u64;
        state.segment.set_end_bytes(state.end);
        Location {
            segment: state.segment.id(),
            offset: u32::try_from(offset).expect("segments are smaller than 4 GiB"),
            len: len as u32,
        }
    }

    pub fn segment(&self) -> &Arc<SegmentMeta> {
        &self.state.segment
    }

    pub fn kind(&self) -> HeadKind {
        self.head.config.kind
    }

    /// The LSN just past everything appended: pass it to [`LogHead::wait_durable`].
    pub fn end_lsn(&self) -> u64 {
        self.state.appended_lsn
    }
}

impl Drop for Appender<'_> {
    fn drop(&mut self) {
        self.head.publish_room(&self.state);
        if self.state.end - self.state.tail_base >= self.head.config.flush_chunk_bytes as u64 {
            self.head.wake_flusher();
        }
    }
}
