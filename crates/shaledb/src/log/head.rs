//! One log head: where records are appended, buffered, flushed and made durable.
//!
//! A head owns one active segment and an in-memory tail buffer that holds every appended byte
//! not yet written to the file. A flush moves the tail out (keeping a copy of its last partial
//! page, which the next flush rewrites), writes it with one aligned `pwrite` while the lock is
//! released, and optionally `fdatasync`s. Concurrent writers that need durability share one
//! flush (group commit): whoever finds no flush in progress leads, the others wait.
//!
//! Reads of records that are not yet on the file are served from the tail or the in-flight
//! buffer. A segment that fills is sealed (flushed and synced) and a new one started.

use super::lifecycle::Lifecycle;
use super::seals::SealQueue;
use crate::error::{ErrorKind, Result};
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::media::{round_down_to_page, AlignedBuf, MediaClass, MediaCounters};
use crate::poison::Poison;
use crate::segment::{HeadKind, Location, Seal, SegmentMeta};
use bytes::Bytes;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub mod room;

/// What a head needs from the KVDB around it.
pub struct HeadConfig {
    pub kind: HeadKind,
    pub class: MediaClass,
    pub segment_bytes: u64,
    pub write_buffer_bytes: usize,
    pub flush_chunk_bytes: usize,
    pub direct_io: bool,
    pub counters: Arc<MediaCounters>,
    pub lifecycle: Arc<Lifecycle>,
    pub poison: Arc<Poison>,
    /// The KVDB's next sequence number, read when a segment is created.
    pub next_seqno: Arc<AtomicU64>,
}

struct InFlight {
    buf: Arc<AlignedBuf>,
    base: u64,
    end: u64,
}

struct HeadState {
    segment: Arc<SegmentMeta>,
    /// Records appended to the segment, and the crc32c of their bytes: its seal when it fills.
    records: u64,
    records_crc: u32,
    /// How far an `fdatasync` made the segment durable, and how far the manifest was told.
    synced_end: u64,
    recorded_durable_end: u64,
    /// Bytes `tail_base..end` of the segment; `tail_base` is page-aligned.
    tail: AlignedBuf,
    tail_base: u64,
    end: u64,
    /// A recycled buffer for the next flush.
    spare: Option<AlignedBuf>,
    inflight: Option<InFlight>,
    /// The in-flight write failed for lack of space: it stays in memory (readable, and
    /// rewritten by the next flush), and nothing more is appended until a write succeeds.
    stalled: bool,
    flushing: bool,
    rolling: bool,
    /// The segment the next roll switches to, created ahead of time (see `prepare_next_segment`).
    next_segment: Option<Arc<SegmentMeta>>,
    preparing: bool,
    /// Bytes appended by this head since open, across segments (a log sequence number).
    appended_lsn: u64,
    durable_lsn: u64,
}

pub struct LogHead {
    config: HeadConfig,
    state: Mutex<HeadState>,
    /// Signalled when a flush or roll ends.
    changed: Condvar,
    /// Signalled when the tail holds a chunk worth flushing.
    kick: Condvar,
    kick_lock: Mutex<bool>,
    /// Bytes of the active segment known to be on the file (a lock-free hint for readers).
    written_end: AtomicU64,
    /// Bytes that can be appended now with no flush, roll or segment preparation first, as of
    /// the last change under the lock (0 when any is due): lets `make_room` skip the lock,
    /// which appenders holding index locks contend for. A hint; the lock's holder decides.
    room_hint: AtomicU64,
    /// Full segments whose seals are not recorded yet.
    seals: SealQueue,
}

impl LogHead {
    /// Opens a head on a fresh segment.
    pub(super) fn open(config: HeadConfig) -> Result<Self> {
        let segment = create_segment(&config)?;
        let state = HeadState {
            segment,
            records: 0,
            records_crc: 0,
            synced_end: SEGMENT_HEADER_BYTES,
            recorded_durable_end: SEGMENT_HEADER_BYTES,
            tail: AlignedBuf::zeroed(config.write_buffer_bytes),
            tail_base: SEGMENT_HEADER_BYTES,
            end: SEGMENT_HEADER_BYTES,
            spare: None,
            inflight: None,
            stalled: false,
            flushing: false,
            rolling: false,
            next_segment: None,
            preparing: false,
            appended_lsn: 0,
            durable_lsn: 0,
        };
        Ok(LogHead {
            config,
            state: Mutex::new(state),
            changed: Condvar::new(),
            kick: Condvar::new(),
            kick_lock: Mutex::new(false),
            written_end: AtomicU64::new(SEGMENT_HEADER_BYTES),
            room_hint: AtomicU64::new(0),
            seals: SealQueue::default(),
        })
    }

    pub fn kind(&self) -> HeadKind {
        self.config.kind
    }

    /// Writes out everything appended so far; with `sync`, also makes it durable.
    pub fn flush(&self, sync: bool) -> Result<()> {
        let mut state = self.state.lock();
        self.flush_locked(&mut state, sync)
    }

    /// Writes out the tail if at least a flush chunk is pending (for the background flusher).
    pub fn flush_if_chunk_pending(&self) -> Result<()> {
        let mut state = self.state.lock();
        let pending = state.end - state.tail_base;
        if pending >= self.config.flush_chunk_bytes as u64 && !state.flushing {
            self.flush_locked(&mut state, false)?;
        }
        Ok(())
    }

    /// Bytes appended by this head since open.
    pub fn appended_lsn(&self) -> u64 {
        self.state.lock().appended_lsn
    }

    /// True when bytes were appended that are not yet durable.
    pub fn has_undurable(&self) -> bool {
        let state = self.state.lock();
        state.durable_lsn < state.appended_lsn
    }

    /// Blocks until every byte up to `lsn` is durable, leading a group commit if nobody is.
    pub fn wait_durable(&self, lsn: u64) -> Result<()> {
        let mut state = self.state.lock();
        loop {
            self.config.poison.check()?;
            if state.durable_lsn >= lsn {
                return Ok(());
            }
            if state.flushing {
                self.changed.wait(&mut state);
            } else {
                self.flush_locked(&mut state, true)?;
            }
        }
    }

    /// Waits up to `timeout` for a full chunk to be appended (for the background flusher).
    pub fn wait_for_chunk(&self, timeout: std::time::Duration) {
        let mut kicked = self.kick_lock.lock();
        if !*kicked {
            self.kick.wait_for(&mut kicked, timeout);
        }
        *kicked = false;
    }

    /// Wakes the background flusher (at stop, or when a chunk is pending).
    pub fn wake_flusher(&self) {
        *self.kick_lock.lock() = true;
        self.kick.notify_one();
    }

    /// Copies a record out of memory if it is not yet on the file; `None` means read the file.
    pub fn read_buffered(&self, segment: &SegmentMeta, location: Location) -> Option<Bytes> {
        let end = u64::from(location.offset) + u64::from(location.len);
        if segment.is_sealed() || end <= self.written_end.load(Ordering::Acquire) {
            return None;
        }
        let state = self.state.lock();
        if state.segment.id() != location.segment {
            return None;
        }
        let offset = u64::from(location.offset);
        let len = location.len as usize;
        if let Some(inflight) = &state.inflight {
            if offset >= inflight.base && end <= inflight.end {
                let at = (offset - inflight.base) as usize;
                return Some(Bytes::copy_from_slice(
                    &inflight.buf.as_slice()[at..at + len],
                ));
            }
        }
        if offset >= state.tail_base && end <= state.end {
            let at = (offset - state.tail_base) as usize;
            return Some(Bytes::copy_from_slice(&state.tail.as_slice()[at..at + len]));
        }
        None
    }

    fn flush_locked(&self, state: &mut MutexGuard<'_, HeadState>, sync: bool) -> Result<()> {
        while state.flushing {
            self.changed.wait(state);
        }
        self.config.poison.check()?;
        if state.stalled {
            self.retry_stalled_write(state)?;
        }
        let target_lsn = state.appended_lsn;
        let written_end = self.written_end.load(Ordering::Relaxed);
        let has_data = written_end < state.end;
        if !has_data && (!sync || state.durable_lsn >= target_lsn) {
            return Ok(());
        }
        state.flushing = true;
        let file = state.segment.file.clone();
        let purpose = self.config.kind.write_purpose();
        let inflight = has_data.then(|| self.take_tail(state));
        let result = MutexGuard::unlocked(state, || {
            if let Some((buf, base, _)) = &inflight {
                file.write_at(*base, buf.padded(), purpose)
                    .map_err(|error| (Step::Write, error))?;
            }
            if sync {
                file.sync().map_err(|error| (Step::Sync, error))?;
            }
            Ok(())
        });
        state.flushing = false;
        let result = match result {
            Err((Step::Write, error)) if error.kind() == ErrorKind::NoSpace => {
                // Recoverable: the data stays in flight in memory, and appends stop until a
                // later flush writes it (the flusher retries).
                tracing::warn!(head = self.config.kind.name(), %error,
                    "out of space: writes fail until space returns; nothing is lost");
                state.stalled = true;
                self.publish_room(state);
                self.changed.notify_all();
                return Err(error);
            }
            result => result.map_err(|(_, error)| error),
        };
        if let Some((buf, _, end)) = inflight {
            state.inflight = None;
            if result.is_ok() {
                self.written_end.store(end, Ordering::Release);
            }
            if let Ok(mut recycled) = Arc::try_unwrap(buf) {
                recycled.clear();
                state.spare = Some(recycled);
            }
        }
        match &result {
            Ok(()) if sync => {
                state.durable_lsn = state.durable_lsn.max(target_lsn);
                state.synced_end = self.written_end.load(Ordering::Relaxed);
            }
            Ok(()) => {}
            Err(error) => self.config.poison.set(format!(
                "{} log head flush failed: {error}",
                self.config.kind.name()
            )),
        }
        self.publish_room(state);
        self.changed.notify_all();
        result
    }

    /// Writes the in-flight buffer that failed for lack of space again; on success the head
    /// takes appends again. A failure other than lack of space poisons the KVDB.
    fn retry_stalled_write(&self, state: &mut MutexGuard<'_, HeadState>) -> Result<()> {
        let (buf, base, end) = state
            .inflight
            .as_ref()
            .map(|inflight| (inflight.buf.clone(), inflight.base, inflight.end))
            .expect("a stalled head keeps its failed write in flight");
        state.flushing = true;
        let file = state.segment.file.clone();
        let purpose = self.config.kind.write_purpose();
        let written = MutexGuard::unlocked(state, || file.write_at(base, buf.padded(), purpose));
        state.flushing = false;
        self.changed.notify_all();
        match written {
            Ok(()) => {
                state.stalled = false;
                state.inflight = None;
                self.written_end.store(end, Ordering::Release);
                self.publish_room(state);
                tracing::info!(
                    head = self.config.kind.name(),
                    "space is back; writes resume"
                );
                Ok(())
            }
            Err(error) if error.kind() == ErrorKind::NoSpace => Err(error),
            Err(error) => {
                self.config.poison.set(format!(
                    "{} log head flush failed: {error}",
                    self.config.kind.name()
                ));
                Err(error)
            }
        }
    }

    /// If a write failed for lack of space, tries it again (for the background flusher); still
    /// no space is no error here: it stays stalled and is tried again.
    pub fn retry_if_stalled(&self) -> Result<()> {
        let mut state = self.state.lock();
        if state.stalled && !state.flushing {
            match self.retry_stalled_write(&mut state) {
                Err(error) if error.kind() == ErrorKind::NoSpace => {}
                result => result?,
            }
        }
        Ok(())
    }

    /// Moves the tail out for writing and starts a new tail holding its last partial page.
    fn take_tail(&self, state: &mut HeadState) -> (Arc<AlignedBuf>, u64, u64) {
        let mut next = state
            .spare
            .take()
            .unwrap_or_else(|| AlignedBuf::zeroed(self.config.write_buffer_bytes));
        let end = state.end;
        let new_base = round_down_to_page(end);
        next.extend_from_slice(&state.tail.as_slice()[(new_base - state.tail_base) as usize..]);
        let mut old = std::mem::replace(&mut state.tail, next);
        old.zero_padding();
        let base = std::mem::replace(&mut state.tail_base, new_base);
        let buf = Arc::new(old);
        state.inflight = Some(InFlight {
            buf: buf.clone(),
            base,
            end,
        });
        (buf, base, end)
    }

    /// Tells the manifest how far the active segment is durable, if further than it knows, so
    /// that after a crash only what follows may be taken for a torn write.
    pub fn record_durable_point(&self) -> Result<()> {
        self.seals.record(&self.config.lifecycle)?;
        let (segment, synced_end) = {
            let state = self.state.lock();
            if state.synced_end <= state.recorded_durable_end {
                return Ok(());
            }
            (state.segment.id(), state.synced_end)
        };
        // Recorded without the lock: a roll meanwhile makes the claim stale, which is harmless.
        self.config.lifecycle.record_durable(segment, synced_end)?;
        let mut state = self.state.lock();
        if state.segment.id() == segment {
            state.recorded_durable_end = state.recorded_durable_end.max(synced_end);
        }
        Ok(())
    }

    /// Seals the active segment if it holds records, so the cleaner may take it.
    pub fn seal_active(&self) -> Result<()> {
        let mut state = self.state.lock();
        while state.rolling {
            self.changed.wait(&mut state);
        }
        if state.end > SEGMENT_HEADER_BYTES {
            self.roll(&mut state)?;
        }
        Ok(())
    }

    /// Records the active segment sealed where it ends; every byte of it is durable.
    fn seal_locked(&self, state: &mut HeadState) -> Result<()> {
        let seal = Seal {
            end_bytes: state.end,
            record_count: state.records,
            records_crc: state.records_crc,
        };
        self.config.lifecycle.seal(&state.segment, seal)
    }

    /// At close: makes everything durable, seals the active segment if it holds records and
    /// frees it otherwise, and frees the segment prepared for the next roll. The head is done.
    pub fn close(&self) -> Result<()> {
        let mut state = self.state.lock();
        while state.rolling {
            self.changed.wait(&mut state);
        }
        self.flush_locked(&mut state, true)?;
        self.seals.record(&self.config.lifecycle)?;
        if state.records > 0 {
            self.seal_locked(&mut state)?;
        } else {
            self.config.lifecycle.free(&state.segment)?;
        }
        if let Some(prepared) = state.next_segment.take() {
            self.config.lifecycle.free(&prepared)?;
        }
        Ok(())
    }

    /// Seals the active segment (flushed and synced) and starts a new one; the seal is queued
    /// and recorded once appends go on (see `seals.rs`).
    fn roll(&self, state: &mut MutexGuard<'_, HeadState>) -> Result<()> {
        state.rolling = true;
        let result = (|| {
            while self.written_end.load(Ordering::Relaxed) < state.end
                || state.durable_lsn < state.appended_lsn
            {
                self.flush_locked(state, true)?;
            }
            let next = match state.next_segment.take() {
                Some(prepared) => prepared,
                None => create_segment(&self.config)?,
            };
            let seal = Seal {
                end_bytes: state.end,
                record_count: state.records,
                records_crc: state.records_crc,
            };
            self.seals
                .push(std::mem::replace(&mut state.segment, next), seal);
            state.records = 0;
            state.records_crc = 0;
            state.synced_end = SEGMENT_HEADER_BYTES;
            state.recorded_durable_end = SEGMENT_HEADER_BYTES;
            state.tail.clear();
            state.tail_base = SEGMENT_HEADER_BYTES;
            state.end = SEGMENT_HEADER_BYTES;
            self.written_end
                .store(SEGMENT_HEADER_BYTES, Ordering::Release);
            Ok(())
        })();
        state.rolling = false;
        self.publish_room(state);
        self.changed.notify_all();
        result?;
        MutexGuard::unlocked(state, || self.seals.record(&self.config.lifecycle))
    }
}

/// The step of a flush that failed.
enum Step {
    Write,
    Sync,
}

fn create_segment(config: &HeadConfig) -> Result<Arc<SegmentMeta>> {
    config.lifecycle.create(
        config.class,
        config.kind,
        config.next_seqno.load(Ordering::SeqCst),
        config.direct_io,
        config.counters.clone(),
    )
}
