//! Recovery: check every segment file against the manifest, then rebuild the indexes at open
//! from the newest valid checkpoint plus the records appended after it.
//!
//! What recovery trusts (docs/ARCHITECTURE.md, "Corruption policy"): the manifest (checksummed)
//! for which segments must exist, on which class, with which header and, once sealed, exactly
//! where their records end, how many there are and their checksum; the checkpoint only if its
//! checksum and structure validate (otherwise every segment is replayed, which gives the same
//! index); records only if their checksum validates. Every segment file must be in the
//! manifest, every live segment in the manifest must have its file, and a sealed segment's
//! replay must end exactly at its seal. Only a segment that was still being appended to at a
//! crash (unsealed) may end in a torn tail, and never before the position the checkpoint saw
//! in it. Anything else is corruption, which fails the open naming the file and offset, or, in
//! a salvage, is reported while recovery goes on with what it can read (`salvage.rs`).
//!
//! The files: matching segment files with the manifest (`files.rs`), replaying segments into
//! the indexes (`replay.rs`), damage in a normal open and in a salvage (`salvage.rs`), what
//! recovery is given (`input.rs`) and what it found and leaves to do (`report.rs`).

mod files;
mod input;
mod replay;
mod report;
mod salvage;

pub use input::RecoveryInput;
pub use report::{Cleanup, RecoveryReport, SalvageReport};

use crate::checkpoint;
use crate::error::{Error, ErrorKind, Result};
use crate::index::{keeps_value, Key, PartitionedIndex};
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::segment::{SegmentId, SegmentMeta};
use files::open_segments;
use replay::{replay_segment, Replay};
use salvage::Damage;
use std::collections::HashMap;
use std::sync::Arc;

/// What recovery rebuilt.
pub struct Recovered {
    pub indexes: HashMap<u32, PartitionedIndex>,
    /// Every live segment, sealed (active segments at a crash are sealed where they end).
    pub segments: Vec<Arc<SegmentMeta>>,
    pub next_seqno: u64,
    /// The loaded checkpoint's covered seqno (0 without one).
    pub covered_seqno: u64,
    pub report: RecoveryReport,
    /// What the open must still record in the manifest or remove, unless it is read-only.
    pub cleanup: Vec<Cleanup>,
}

/// Checks the segment files against the manifest and rebuilds the indexes of its KVSs.
pub fn recover(input: &RecoveryInput<'_>) -> Result<Recovered> {
    let mut report = RecoveryReport::default();
    let mut cleanup = Vec::new();
    let mut damage = Damage::new(input.salvage);
    let segments = open_segments(input, &mut damage, &mut cleanup)?;
    let checkpoint = match checkpoint::load(input.checkpoint_dir) {
        Ok(found) => found,
        Err(error) if error.kind() == ErrorKind::Corruption => {
            tracing::warn!(%error, "ignoring the damaged index checkpoint; rebuilding the index from all segments");
            report.checkpoint_rejected = Some(error.to_string());
            None
        }
        Err(error) => return Err(error),
    };
    let kvs_groups = input
        .state
        .kvs
        .iter()
        .map(|(&id, kvs)| (id, kvs.options.key_groups));
    let mut replay = Replay::new(
        kvs_groups,
        input.state.next_kvs_id,
        input.index_value_bytes_max,
    );
    if let Some(checkpoint) = &checkpoint {
        // Entries go straight from the file into the indexes, one KVS section after another.
        let mut section = None;
        let mut index = None;
        for item in checkpoint.entries() {
            let (kvs_id, key, entry, value) = item?;
            if section != Some(kvs_id) {
                section = Some(kvs_id);
                if kvs_id >= replay.next_kvs_id && damage.is_salvage() {
                    // The checkpoint knows a KVS the manifest lost: a salvage creates it.
                    replay.create_found_kvs(kvs_id, &mut cleanup);
                }
                index = replay.indexes.get_mut(&kvs_id);
            }
            if let Some(index) = index.as_deref_mut() {
                // A value kept under a larger `index_value_bytes_max` than this open's is read from
                // media instead.
                let value = value.filter(|value| keeps_value(value, input.index_value_bytes_max));
                index.part_mut(key).put_recovered(key, entry, value);
            }
        }
    }
    let (covered_seqno, checkpoint_next_seqno, replay_from) = match checkpoint {
        Some(checkpoint) => (
            checkpoint.covered_seqno,
            checkpoint.next_seqno,
            checkpoint.replay_from,
        ),
        None => (0, 0, HashMap::new()),
    };
    report.checkpoint_loaded = checkpoint_next_seqno > 0;
    let mut next_seqno = checkpoint_next_seqno.max(1);
    let mut kept = Vec::new();
    for (segment, entry) in segments {
        next_seqno = next_seqno.max(segment.header.created_seqno);
        let from = replay_from
            .get(&segment.id())
            .copied()
            .unwrap_or(SEGMENT_HEADER_BYTES);
        let replayed = replay_segment(
            &segment,
            &entry,
            from,
            &mut replay,
            &mut report,
            &mut damage,
            &mut cleanup,
        )?;
        let Some(seal) = replayed else {
            kept.push(segment); // damaged: kept until its readable records are rescued
            continue;
        };
        if let Some(recorded) = entry.seal {
            // Read back as sealed (or covered by the checkpoint): the cleaner may take it.
            segment.seal(recorded);
        } else {
            report.active_segments_sealed += 1;
            // Empty, it goes; a read-only open, which frees nothing, holds it sealed empty.
            if seal.record_count == 0 && !input.read_only {
                cleanup.push(Cleanup::FreeEmpty(
                    segment.id(),
                    segment.path().to_path_buf(),
                ));
                continue;
            }
            cleanup.push(Cleanup::Seal(segment.id(), seal));
            segment.seal(seal);
        }
        kept.push(segment);
    }
    next_seqno = next_seqno.max(replay.max_seqno + 1);
    let by_id: HashMap<SegmentId, &Arc<SegmentMeta>> =
        kept.iter().map(|segment| (segment.id(), segment)).collect();
    let names: HashMap<u32, String> = input
        .state
        .kvs
        .iter()
        .map(|(&id, entry)| (id, entry.name.clone()))
        .collect();
    for (kvs_id, index) in &mut replay.indexes {
        let mut dangling = Vec::new();
        index.for_each_version(|key, entry, _| match by_id.get(&entry.location.segment) {
            Some(segment) => segment.add_live(u64::from(entry.location.len)),
            None => dangling.push((Key::from(key), entry)),
        });
        let name = names
            .get(kvs_id)
            .cloned()
            .unwrap_or_else(|| format!("salvaged-kvs-{kvs_id}"));
        for (key, entry) in dangling {
            damage.found(Error::corruption(
                input.checkpoint_dir.join(checkpoint::FILE_NAME),
                0,
                format!(
                    "KVS {name} key {:?} points at segment {}, which is gone",
                    String::from_utf8_lossy(&key),
                    entry.location.segment.0
                ),
            ))?;
            // Salvage: the version is lost; the key goes.
            index.part_mut(&key).remove(&key, entry.seqno, 0);
            damage.lost_key(&name, &key);
        }
    }
    report.salvage = damage.finish(&replay.indexes, &names, next_seqno);
    Ok(Recovered {
        indexes: replay.indexes,
        segments: kept,
        next_seqno,
        covered_seqno,
        report,
        cleanup,
    })
}
