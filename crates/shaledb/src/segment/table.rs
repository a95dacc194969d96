//! The segments a KVDB holds: each one's file and accounting (live bytes, end, seal,
//! quarantine), and the table of them by id.

use super::header::SegmentHeader;
use super::id::SegmentId;
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::media::{MediaClass, SegmentFile};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// What a sealed segment holds: nothing is appended to it any more, so a scan of it must find
/// exactly this (the manifest records it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seal {
    /// End of its last record (the header included).
    pub end_bytes: u64,
    pub record_count: u64,
    /// crc32c of the records' own checksums in order (see [`Seal::chain`]).
    pub records_crc: u32,
}

impl Seal {
    /// Adds one record, encoded as appended, to a seal's `records_crc`: the crc32c of the
    /// records' own checksums, in order. Each record's checksum covers all of its bytes, so
    /// this pins every record's content, their order and their count as hashing every byte
    /// would, for 4 bytes hashed per record instead of all of it (hashing whole records cost 7%
    /// more instructions per put).
    pub fn chain(records_crc: u32, encoded: &[u8]) -> u32 {
        crate::checksum::crc32c_append(records_crc, &encoded[..crate::record::CRC_BYTES])
    }
}

/// A segment the KVDB holds, with its accounting.
pub struct SegmentMeta {
    pub header: SegmentHeader,
    pub file: Arc<SegmentFile>,
    /// Bytes of records that an index entry (or a snapshot's version) points at.
    live_bytes: AtomicU64,
    /// Bytes of records appended (logical end of the record area, header included).
    end_bytes: AtomicU64,
    /// Set once no more appends will come: the cleaner may pick it.
    seal: OnceLock<Seal>,
    /// A corruption was found in it: the cleaner must not free it.
    quarantined: AtomicBool,
}

impl SegmentMeta {
    /// A segment holding records up to `end_bytes`, sealed with `seal` if given.
    pub fn new(
        header: SegmentHeader,
        file: Arc<SegmentFile>,
        end_bytes: u64,
        seal: Option<Seal>,
    ) -> Self {
        let segment = SegmentMeta {
            header,
            file,
            live_bytes: AtomicU64::new(0),
            end_bytes: AtomicU64::new(end_bytes),
            seal: OnceLock::new(),
            quarantined: AtomicBool::new(false),
        };
        if let Some(seal) = seal {
            segment.seal(seal);
        }
        segment
    }

    pub fn id(&self) -> SegmentId {
        self.header.id
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    pub fn live_bytes(&self) -> u64 {
        self.live_bytes.load(Ordering::Relaxed)
    }

    pub fn add_live(&self, bytes: u64) {
        self.live_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn sub_live(&self, bytes: u64) {
        let previous = self.live_bytes.fetch_sub(bytes, Ordering::Relaxed);
        debug_assert!(
            previous >= bytes,
            "live bytes of segment {} went negative",
            self.id().0
        );
    }

    pub fn end_bytes(&self) -> u64 {
        self.end_bytes.load(Ordering::Relaxed)
    }

    pub fn set_end_bytes(&self, end: u64) {
        self.end_bytes.store(end, Ordering::Relaxed);
    }

    /// Bytes the segment occupies on media: its records rounded up to whole pages.
    pub fn disk_bytes(&self) -> u64 {
        crate::media::round_up_to_page(self.end_bytes())
    }

    pub fn is_sealed(&self) -> bool {
        self.seal.get().is_some()
    }

    /// What the segment was sealed with, once it is.
    pub fn sealed(&self) -> Option<Seal> {
        self.seal.get().copied()
    }

    /// Seals the segment: nothing more is appended to it.
    pub fn seal(&self, seal: Seal) {
        assert!(
            self.seal.set(seal).is_ok(),
            "segment {} sealed twice",
            self.id().0
        );
        self.set_end_bytes(seal.end_bytes);
    }

    pub fn is_quarantined(&self) -> bool {
        self.quarantined.load(Ordering::Relaxed)
    }

    pub fn quarantine(&self) {
        self.quarantined.store(true, Ordering::Relaxed);
    }

    /// Fraction of the record area that is live.
    pub fn live_ratio(&self) -> f64 {
        let record_bytes = self.end_bytes().saturating_sub(SEGMENT_HEADER_BYTES);
        if record_bytes == 0 {
            0.0
        } else {
            self.live_bytes() as f64 / record_bytes as f64
        }
    }
}

/// All segments of a KVDB, by id.
pub struct SegmentTable {
    segments: RwLock<BTreeMap<SegmentId, Arc<SegmentMeta>>>,
    next_id: AtomicU32,
    dirs: [PathBuf; 2],
}

impl SegmentTable {
    pub fn new(dirs: [PathBuf; 2], next_id: SegmentId) -> Self {
        SegmentTable {
            segments: RwLock::new(BTreeMap::new()),
            next_id: AtomicU32::new(next_id.0),
            dirs,
        }
    }

    pub fn dir(&self, class: MediaClass) -> &Path {
        &self.dirs[class as usize]
    }

    pub fn allocate_id(&self) -> SegmentId {
        SegmentId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    pub fn insert(&self, segment: Arc<SegmentMeta>) {
        let previous = self.segments.write().insert(segment.id(), segment);
        assert!(previous.is_none(), "segment ids are never reused");
    }

    pub fn remove(&self, id: SegmentId) -> Option<Arc<SegmentMeta>> {
        self.segments.write().remove(&id)
    }

    pub fn get(&self, id: SegmentId) -> Option<Arc<SegmentMeta>> {
        self.segments.read().get(&id).cloned()
    }

    /// What `f` makes of segment `id`, read under the table's lock: no reference is taken (a
    /// clone and drop of the `Arc` are two atomic updates of a count every thread shares).
    pub fn with<R>(&self, id: SegmentId, f: impl FnOnce(&SegmentMeta) -> R) -> Option<R> {
        self.segments.read().get(&id).map(|segment| f(segment))
    }

    pub fn all(&self) -> Vec<Arc<SegmentMeta>> {
        self.segments.read().values().cloned().collect()
    }
}
