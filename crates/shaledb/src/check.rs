//! `check`: verify everything recovery relies on, like `fsck`: the manifest file, the
//! checkpoint file, every segment file against the manifest (none missing, none unexpected),
//! every record of every segment (each sealed segment reads back exactly as it was sealed, the
//! active ones up to where they were appended, and every compressed value decompresses), every
//! index entry, and the live-byte counters.
//! Meant for a quiet KVDB (the CLI's `shale check`); concurrent writes make the live-byte
//! comparison approximate, never the others. The caller pauses the cleaner, which moves
//! records, for the whole check.

use crate::checkpoint;
use crate::error::Result;
use crate::index::{Entry, Key};
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::manifest::Manifest;
use crate::media::{MediaClass, ReadPurpose};
use crate::segment::{list_segment_files, scan_records, SegmentId};
use crate::store::Store;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

/// What `check` found.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct CheckReport {
    pub segments: u64,
    pub records: u64,
    pub record_bytes: u64,
    pub index_entries: u64,
    /// Records failing validation, and segments that do not read back as they were sealed or
    /// appended: "file at offset: reason".
    pub corruptions: Vec<String>,
    /// Damaged, missing or unexpected files: the manifest, the checkpoint, segment files.
    pub file_errors: Vec<String>,
    /// Index entries that do not point at a valid record of their key.
    pub index_errors: Vec<String>,
    /// Segments whose live-byte counter disagrees with the index.
    pub live_bytes_mismatches: Vec<String>,
    /// What a crash left and the next writable open tidies (a torn last manifest edit, segment
    /// files never recorded or recorded freed): expected after a crash, not damage.
    pub crash_leftovers: Vec<String>,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.corruptions.is_empty()
            && self.file_errors.is_empty()
            && self.index_errors.is_empty()
            && self.live_bytes_mismatches.is_empty()
    }
}

/// Checks `store`; `leftovers` are the files its read-only open found a crash left (see
/// `RecoveryReport::leftovers_pending`).
pub fn check(store: &Store, checkpoint_dir: &Path, leftovers: &[String]) -> Result<CheckReport> {
    store.heads.flush_all(false)?;
    let mut report = CheckReport::default();
    check_files(store, checkpoint_dir, leftovers, &mut report)?;
    // Every version the indexes hold, by segment and offset, so one sequential pass per
    // segment verifies both the records and the entries pointing at them.
    let mut expected: HashMap<SegmentId, Vec<Expected>> = HashMap::new();
    let mut kvs_names = HashMap::new();
    for kvs in store.kvs.all() {
        kvs_names.insert(kvs.id, kvs.name.clone());
        kvs.index.for_each_version(|key, entry, value| {
            report.index_entries += 1;
            expected
                .entry(entry.location.segment)
                .or_default()
                .push(Expected {
                    kvs_id: kvs.id,
                    key: key.into(),
                    entry,
                    value: value.map(Into::into),
                });
        });
    }
    let describe = |wanted: &Expected| {
        format!(
            "KVS {:?} key {:?} seqno {}",
            kvs_names.get(&wanted.kvs_id).map_or("?", String::as_str),
            String::from_utf8_lossy(&wanted.key),
            wanted.entry.seqno
        )
    };
    let segments = store.segments.all();
    for segment in &segments {
        report.segments += 1;
        let mut wanted = expected.remove(&segment.id()).unwrap_or_default();
        wanted.sort_by_key(|item| item.entry.location.offset);
        let mut next = 0;
        let mut live_bytes = 0;
        let path = segment.path().display().to_string();
        // Sealed, it must read back exactly as sealed; active, up to what was appended.
        let seal = segment.sealed();
        let end = seal.map_or(segment.end_bytes(), |seal| seal.end_bytes);
        let summary = scan_records(
            &segment.file,
            SEGMENT_HEADER_BYTES,
            end,
            ReadPurpose::Other,
            |offset, record| {
                report.records += 1;
                report.record_bytes += record.encoded_len() as u64;
                // The CRC covers a compressed value's bytes, not whether they decompress.
                if let Err(reason) = record.value() {
                    report.corruptions.push(format!(
                        "{path} at {offset}: value failed validation: {reason}"
                    ));
                }
                while next < wanted.len() && u64::from(wanted[next].entry.location.offset) < offset
                {
                    let item = &wanted[next];
                    report.index_errors.push(format!(
                        "{}: no valid record at {path} offset {}",
                        describe(item),
                        item.entry.location.offset
                    ));
                    next += 1;
                }
                if next < wanted.len() && u64::from(wanted[next].entry.location.offset) == offset {
                    let item = &wanted[next];
                    let matches = record.kind.has_value()
                        && record.kvs_id == item.kvs_id
                        && record.key == &item.key[..]
                        && record.seqno == item.entry.seqno
                        && record.encoded_len() == item.entry.location.len as usize;
                    if !matches {
                        report.index_errors.push(format!(
                            "{}: {path} offset {offset} holds another record",
                            describe(item)
                        ));
                    } else if item
                        .value
                        .as_deref()
                        .is_some_and(|kept| record.value().ok().as_deref() != Some(kept))
                    {
                        report.index_errors.push(format!(
                            "{}: the value its index entry keeps is not the one at {path} offset \
                             {offset}",
                            describe(item)
                        ));
                    }
                    live_bytes += u64::from(item.entry.location.len);
                    next += 1;
                }
                Ok(())
            },
        )?;
        for item in &wanted[next..] {
            report.index_errors.push(format!(
                "{}: no valid record at {path} offset {}",
                describe(item),
                item.entry.location.offset
            ));
        }
        for (offset, reason) in &summary.corruptions {
            report
                .corruptions
                .push(format!("{path} at {offset}: {reason}"));
        }
        if !summary.reads_back(end, seal.as_ref()) {
            report.corruptions.push(format!(
                "{path} at {}: its records read back to here ({} of them), but it holds {}",
                summary.end_offset,
                summary.records,
                match seal {
                    Some(seal) => format!("{} records ending at {end} (sealed)", seal.record_count),
                    None => format!("records up to {end}"),
                }
            ));
        }
        if live_bytes != segment.live_bytes() {
            report.live_bytes_mismatches.push(format!(
                "{path}: counter says {} live bytes, the index {live_bytes}",
                segment.live_bytes()
            ));
        }
    }
    for (segment, items) in expected {
        for item in items {
            report.index_errors.push(format!(
                "{}: points at missing segment {}",
                describe(&item),
                segment.0
            ));
        }
    }
    Ok(report)
}

/// The manifest and checkpoint files decode, and the segment files on media are exactly the
/// segments the manifest and the store hold.
fn check_files(
    store: &Store,
    checkpoint_dir: &Path,
    leftovers: &[String],
    report: &mut CheckReport,
) -> Result<()> {
    let manifest = &store.lifecycle.manifest;
    match Manifest::open(
        manifest.path().parent().expect("a home"),
        true,
        Arc::default(),
    ) {
        Ok(Some((on_disk, loaded))) => {
            if *on_disk.state() != *manifest.state() {
                report.file_errors.push(format!(
                    "{}: the file does not describe what the open KVDB holds",
                    manifest.path().display()
                ));
            }
            if let Some(torn) = loaded.torn_tail {
                report
                    .crash_leftovers
                    .push(format!("manifest: a torn last edit: {torn}"));
            }
        }
        Ok(None) => report
            .file_errors
            .push(format!("{}: missing", manifest.path().display())),
        Err(error) => report.file_errors.push(error.to_string()),
    }
    if let Err(error) = checkpoint::load(checkpoint_dir) {
        report.file_errors.push(error.to_string());
    }
    let live: BTreeSet<SegmentId> = manifest.state().segments.keys().copied().collect();
    let held: BTreeSet<SegmentId> = store
        .segments
        .all()
        .iter()
        .map(|segment| segment.id())
        .collect();
    for id in live.symmetric_difference(&held) {
        report.file_errors.push(format!(
            "segment {}: {}",
            id.0,
            if live.contains(id) {
                "in the manifest but not held by the store"
            } else {
                "held by the store but not in the manifest"
            }
        ));
    }
    for class in MediaClass::ALL {
        let dir = store.segments.dir(class);
        if !dir.is_dir() {
            continue;
        }
        let mut on_disk = BTreeSet::new();
        for (id, path) in list_segment_files(dir)? {
            if held.contains(&id) {
                on_disk.insert(id);
            } else if leftovers.contains(&path.display().to_string()) {
                report
                    .crash_leftovers
                    .push(format!("{}: left by a crash", path.display()));
            } else {
                report.file_errors.push(format!(
                    "{}: a segment file that no manifest entry accounts for",
                    path.display()
                ));
            }
        }
        for segment in store.segments.all() {
            if segment.header.class == class && !on_disk.contains(&segment.id()) {
                report.file_errors.push(format!(
                    "{}: the file of segment {} is missing",
                    segment.path().display(),
                    segment.id().0
                ));
            }
        }
    }
    Ok(())
}

struct Expected {
    kvs_id: u32,
    key: Key,
    entry: Entry,
    /// The value the index entry keeps, which must be the record's.
    value: Option<Box<[u8]>>,
}
