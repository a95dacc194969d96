//! What recovery found, and what it leaves the open to do.

use crate::segment::{Seal, SegmentId};
use std::path::PathBuf;

/// A change recovery found necessary but leaves to the caller (a read-only open makes none).
#[derive(Debug)]
pub enum Cleanup {
    /// A segment that was active at a crash, now scanned to its end: record its seal, since
    /// nothing is appended to it again (invariant I10).
    Seal(SegmentId, Seal),
    /// A segment that holds no record: free it and delete its file.
    FreeEmpty(SegmentId, PathBuf),
    /// A segment recorded freed: delete its file if it is still there, record the deletion.
    FinishFree(SegmentId, Option<PathBuf>),
    /// A header-only file the manifest never recorded: a crash while it was being created.
    RemoveUnrecorded(PathBuf),
    /// Salvage: a damaged or unexpected file, to be renamed aside (kept, never deleted).
    SetAside(PathBuf),
    /// Salvage: a live segment whose file is gone or set aside, to be recorded freed.
    Forget(SegmentId),
    /// Salvage: a damaged segment, whose readable live records are to be copied to fresh
    /// segments before its file is set aside.
    Rescue(SegmentId),
    /// Salvage: records of a KVS the manifest never created: it is created under this name.
    CreateKvs(u32, String),
}

/// What recovery saw, for logs and `shale info`.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct RecoveryReport {
    /// The KVDB was created by this open.
    pub created: bool,
    /// The KVDB was written by a ShaleDB without a manifest and was upgraded.
    pub upgraded_from_catalog: bool,
    /// The manifest's last edit was torn by a crash and cut off; where.
    pub manifest_torn_tail: Option<String>,
    /// Media directories outside the home that were moved with it and now name it as owner.
    pub adopted_dirs: Vec<String>,
    pub checkpoint_loaded: bool,
    /// Why the checkpoint was not used, when there was one.
    pub checkpoint_rejected: Option<String>,
    pub segments_replayed: u64,
    pub records_replayed: u64,
    pub bytes_replayed: u64,
    /// Segments still being appended to at a crash, scanned and sealed at this open.
    pub active_segments_sealed: u64,
    /// Batches dropped because the log ended inside them.
    pub incomplete_batches_dropped: u64,
    /// Active segments whose last record was cut off (expected after a crash).
    pub torn_tails: u64,
    /// For each torn tail: the file, where its readable records end, how many bytes after that
    /// were dropped, and the last durable point known (the dropped bytes lie past it: a write
    /// the crash tore, or damage there, which nothing can tell apart).
    pub torn_tail_details: Vec<String>,
    /// Files removed as leftovers of a crash: unrecorded header-only segments, freed segments.
    pub leftovers_removed: Vec<String>,
    /// In a read-only open, which removes nothing: the leftovers of a crash the next writable
    /// open removes.
    pub leftovers_pending: Vec<String>,
    /// What a salvage found and did (`Options::salvage`); `None` in a normal open.
    pub salvage: Option<SalvageReport>,
}

/// What a salvage found: everything a normal open would have refused, what could not be read,
/// and what may therefore be lost or may have come back.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct SalvageReport {
    /// Every damage found, as a normal open would have named it.
    pub problems: Vec<String>,
    /// Byte ranges that could not be read: "file from START to END". Whatever records were
    /// there (puts, tombstones, prefix tombstones) are lost.
    pub unreadable_regions: Vec<String>,
    /// Keys whose newest version was in data that is gone (a missing segment): "KVS key".
    pub lost_keys: Vec<String>,
    /// Keys whose newest readable version is older than an unreadable region that could have
    /// held a newer version or a tombstone: each may be stale, or may have come back after a
    /// delete. "KVS key seqno".
    pub suspect_keys: Vec<String>,
    /// Files renamed aside (damaged or unexpected segment files), kept for inspection.
    pub set_aside: Vec<String>,
    /// Segments whose readable live records were copied to fresh segments.
    pub rescued_segments: Vec<String>,
    /// Where the full report was written.
    pub report_file: Option<String>,
}
