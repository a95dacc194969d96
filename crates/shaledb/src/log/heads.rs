//! The fixed set of log heads of a KVDB, in their lock order (invariant I4): on capacity the
//! client head and the cleaner's young and old tiers; with a staging class, its client head and
//! its one cleaner head.

use super::head::room::Appender;
use super::head::{HeadConfig, LogHead};
use super::lifecycle::Lifecycle;
use crate::error::Result;
use crate::media::{MediaClass, MediaCounters};
use crate::poison::Poison;
use crate::segment::{HeadKind, Location, SegmentMeta};
use bytes::Bytes;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// What every head of a KVDB shares.
pub struct HeadsConfig {
    pub segment_bytes: u64,
    pub write_buffer_bytes: usize,
    pub flush_chunk_bytes: usize,
    pub direct_io: bool,
    pub lifecycle: Arc<Lifecycle>,
    pub poison: Arc<Poison>,
    /// The KVDB's next sequence number, read when a segment is created.
    pub next_seqno: Arc<AtomicU64>,
}

/// Index of the staging client head in `Heads::heads`; the staging cleaner head follows it.
const STAGING_CLIENT: usize = 3;

pub struct Heads {
    heads: Vec<LogHead>,
}

impl Heads {
    /// Opens every head on a fresh segment: capacity's three, and staging's two when
    /// `staging`. `counters` gives each class's I/O counters.
    pub fn open(
        config: &HeadsConfig,
        staging: bool,
        counters: impl Fn(MediaClass) -> Arc<MediaCounters>,
    ) -> Result<Heads> {
        let head = |class: MediaClass, kind: HeadKind| {
            LogHead::open(HeadConfig {
                kind,
                class,
                segment_bytes: config.segment_bytes,
                write_buffer_bytes: config.write_buffer_bytes,
                flush_chunk_bytes: config.flush_chunk_bytes,
                direct_io: config.direct_io,
                counters: counters(class),
                lifecycle: config.lifecycle.clone(),
                poison: config.poison.clone(),
                next_seqno: config.next_seqno.clone(),
            })
        };
        let mut heads = vec![
            head(MediaClass::Capacity, HeadKind::Client)?,
            head(MediaClass::Capacity, HeadKind::CleanerYoung)?,
            head(MediaClass::Capacity, HeadKind::CleanerOld)?,
        ];
        if staging {
            heads.push(head(MediaClass::Staging, HeadKind::Client)?);
            heads.push(head(MediaClass::Staging, HeadKind::CleanerYoung)?);
        }
        Ok(Heads { heads })
    }

    /// No heads: a read-only KVDB appends nothing.
    pub fn none() -> Heads {
        Heads { heads: Vec::new() }
    }

    /// A copy of a record that is still in a head's memory, not yet on its file (`None`: read
    /// the file).
    pub fn read_buffered(&self, segment: &SegmentMeta, location: Location) -> Option<Bytes> {
        if self.heads.is_empty() || segment.is_sealed() {
            return None;
        }
        self.at(segment.header.class, segment.header.head)
            .read_buffered(segment, location)
    }

    /// The head writing `kind` segments on `class`. Staging has one cleaner head; both cleaner
    /// tiers map to it.
    pub fn at(&self, class: MediaClass, kind: HeadKind) -> &LogHead {
        match (class, kind) {
            (MediaClass::Capacity, kind) => &self.heads[kind as usize],
            (MediaClass::Staging, HeadKind::Client) => &self.heads[STAGING_CLIENT],
            (MediaClass::Staging, _) => &self.heads[STAGING_CLIENT + 1],
        }
    }

    pub fn has_staging(&self) -> bool {
        self.heads.len() > STAGING_CLIENT
    }

    /// Every head, in lock order.
    pub fn all(&self) -> impl Iterator<Item = &LogHead> {
        self.heads.iter()
    }

    /// The client heads: capacity, then staging if present.
    pub fn clients(&self) -> impl Iterator<Item = &LogHead> {
        self.all().filter(|head| head.kind() == HeadKind::Client)
    }

    /// Bytes appended to the client heads since they were opened: moves on each client write.
    pub fn client_appended_lsn(&self) -> u64 {
        self.clients().map(LogHead::appended_lsn).sum()
    }

    /// The heads the cleaner writes to.
    pub fn cleaners(&self) -> impl Iterator<Item = &LogHead> {
        self.all().filter(|head| head.kind() != HeadKind::Client)
    }

    /// Locks every head, in lock order: nothing is half-appended while the guards live.
    pub fn lock_all(&self) -> Vec<Appender<'_>> {
        self.all().map(LogHead::lock).collect()
    }

    /// At close: every head makes its data durable and seals (or frees) its segments.
    pub fn close(&self) -> Result<()> {
        self.all().try_for_each(LogHead::close)
    }

    /// Tells the manifest how far each head's active segment is durable.
    pub fn record_durable_points(&self) -> Result<()> {
        self.all().try_for_each(LogHead::record_durable_point)
    }

    /// Writes out (and with `sync`, makes durable) everything every head appended.
    pub fn flush_all(&self, sync: bool) -> Result<()> {
        self.all().try_for_each(|head| head.flush(sync))
    }
}
