//! A segment's life, each step recorded in the manifest in the order that makes a crash at any
//! point recoverable (see `manifest/mod.rs`): created (file, header, fsync, directory fsync,
//! then recorded, all under one lock so ids are recorded in the order they are given), sealed
//! (recorded once its last byte is durable), freed (recorded, then its file deleted, then the
//! deletion recorded). The log heads, the cleaner and the open use it; nothing else creates or
//! deletes a segment file.

use crate::error::Result;
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::manifest::{Edit, Manifest};
use crate::media::{
    remove_file_durably, set_file_aside, sync_dir, MediaClass, MediaCounters, SegmentFile, Storage,
};
use crate::segment::{
    segment_file_name, HeadKind, Seal, SegmentHeader, SegmentId, SegmentMeta, SegmentTable,
};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct Lifecycle {
    pub segments: Arc<SegmentTable>,
    pub manifest: Arc<Manifest>,
    storage: Arc<dyn Storage>,
    /// Held from taking an id to recording it, so every unrecorded file has an id at or past
    /// the manifest's next one (how recovery knows it for a crash leftover).
    creating: Mutex<()>,
}

impl Lifecycle {
    pub fn new(
        segments: Arc<SegmentTable>,
        manifest: Arc<Manifest>,
        storage: Arc<dyn Storage>,
    ) -> Self {
        Lifecycle {
            segments,
            manifest,
            storage,
            creating: Mutex::new(()),
        }
    }

    /// Creates a segment on `class` for `head`, stamped with `created_seqno` (I6), and records
    /// it; it joins the segment table.
    pub fn create(
        &self,
        class: MediaClass,
        head: HeadKind,
        created_seqno: u64,
        direct_io: bool,
        counters: Arc<MediaCounters>,
    ) -> Result<Arc<SegmentMeta>> {
        let _one_at_a_time = self.creating.lock();
        let header = SegmentHeader {
            id: self.segments.allocate_id(),
            class,
            head,
            created_seqno,
        };
        let dir = self.segments.dir(class);
        let path = dir.join(segment_file_name(header.id));
        let purpose = head.write_purpose();
        let file = SegmentFile::create(
            &*self.storage,
            &path,
            direct_io,
            counters,
            &header.encode(),
            purpose,
        )?;
        sync_dir(dir)?;
        let recorded = self.manifest.record(&Edit::SegmentCreated {
            id: header.id,
            class,
            head,
            created_seqno,
        });
        if let Err(error) = recorded {
            // Unrecorded, the file must not outlive this call (recovery would find it unknown).
            remove_file_durably(&path)?;
            return Err(error);
        }
        let segment = Arc::new(SegmentMeta::new(
            header,
            Arc::new(file),
            SEGMENT_HEADER_BYTES,
            None,
        ));
        self.segments.insert(segment.clone());
        Ok(segment)
    }

    /// Records that the active `segment` is durable up to `end_bytes`.
    pub fn record_durable(&self, segment: SegmentId, end_bytes: u64) -> Result<()> {
        self.manifest.record(&Edit::SegmentDurable {
            id: segment,
            end_bytes,
        })
    }

    /// Records `segment` sealed with `seal` (every byte of it already durable) and seals it.
    pub fn seal(&self, segment: &SegmentMeta, seal: Seal) -> Result<()> {
        self.manifest.record(&Edit::SegmentSealed {
            id: segment.id(),
            seal,
        })?;
        segment.seal(seal);
        Ok(())
    }

    /// Frees `segment`: records it freed, drops it from the table, deletes its file, records
    /// the deletion. Whatever was live in it must already be durable elsewhere.
    pub fn free(&self, segment: &SegmentMeta) -> Result<()> {
        self.manifest
            .record(&Edit::SegmentFreed { id: segment.id() })?;
        self.segments.remove(segment.id());
        self.finish_free(segment.id(), Some(segment.path()))
    }

    /// Salvage: frees the damaged `segment` but keeps its file, renamed aside; returns where.
    pub fn set_aside(&self, segment: &SegmentMeta) -> Result<PathBuf> {
        self.manifest
            .record(&Edit::SegmentFreed { id: segment.id() })?;
        self.segments.remove(segment.id());
        let aside = set_file_aside(segment.path())?;
        self.manifest
            .record(&Edit::SegmentDeleted { id: segment.id() })?;
        Ok(aside)
    }

    /// Ends the freeing of segment `id`, recorded freed: deletes its file (if given) and
    /// records the deletion.
    pub fn finish_free(&self, id: SegmentId, path: Option<&Path>) -> Result<()> {
        if let Some(path) = path {
            remove_file_durably(path)?;
        }
        self.manifest.record(&Edit::SegmentDeleted { id })
    }
}
