//! `check`: verify every record on media and every index entry, like `fsck`.
//! Meant for a quiet KVDB (the CLI's `shale check`); concurrent writes make the live-byte
//! comparison approximate, never the CRC checks.

use crate::db::Inner;
use crate::error::Result;
use crate::index::{Entry, Key};
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::record;
use crate::segment::{scan_records, SegmentId};
use std::collections::HashMap;

/// What `check` found.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct CheckReport {
    pub segments: u64,
    pub records: u64,
    pub record_bytes: u64,
    pub index_entries: u64,
    /// Records failing validation: "file at offset: reason".
    pub corruptions: Vec<String>,
    /// Segments ending in a torn record (normal after a crash; nothing acknowledged is there).
    pub torn_tails: Vec<String>,
    /// Index entries that do not point at a valid record of their key.
    pub index_errors: Vec<String>,
    /// Segments whose live-byte counter disagrees with the index.
    pub live_bytes_mismatches: Vec<String>,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.corruptions.is_empty()
            && self.index_errors.is_empty()
            && self.live_bytes_mismatches.is_empty()
    }
}

pub fn check(inner: &Inner) -> Result<CheckReport> {
    // The cleaner moves records; it must not run between reading the index and the media.
    let _no_cleaning = inner.cleaner_lock.lock();
    inner.client_head.flush(false)?;
    inner.cleaner_head.flush(false)?;
    let mut report = CheckReport::default();
    let segments = inner.segments.all();
    for segment in &segments {
        report.segments += 1;
        let summary = scan_records(&segment.file, SEGMENT_HEADER_BYTES, |_, record| {
            report.records += 1;
            report.record_bytes += record.encoded_len() as u64;
            Ok(())
        })?;
        for (offset, reason) in summary.corruptions {
            report.corruptions.push(format!(
                "{} at {offset}: {reason}",
                segment.path().display()
            ));
        }
        if summary.torn_tail {
            report.torn_tails.push(format!(
                "{} at {}",
                segment.path().display(),
                summary.end_offset
            ));
        }
    }
    let mut live: HashMap<SegmentId, u64> = HashMap::new();
    for kvs in inner.all_kvs() {
        let mut versions: Vec<(Key, Entry)> = Vec::new();
        kvs.index
            .read()
            .for_each_version(|key, entry| versions.push((key.into(), entry)));
        for (key, entry) in versions {
            report.index_entries += 1;
            *live.entry(entry.location.segment).or_default() += u64::from(entry.location.len);
            if let Some(problem) = verify_entry(inner, kvs.id, &key, entry) {
                report.index_errors.push(format!(
                    "KVS {:?} key {:?}: {problem}",
                    kvs.name,
                    String::from_utf8_lossy(&key)
                ));
            }
        }
    }
    for segment in &segments {
        let expected = live.get(&segment.id()).copied().unwrap_or(0);
        if expected != segment.live_bytes() {
            report.live_bytes_mismatches.push(format!(
                "{}: counter says {} live bytes, the index {}",
                segment.path().display(),
                segment.live_bytes(),
                expected
            ));
        }
    }
    Ok(report)
}

fn verify_entry(inner: &Inner, kvs_id: u32, key: &[u8], entry: Entry) -> Option<String> {
    let location = entry.location;
    let Some(segment) = inner.segments.get(location.segment) else {
        return Some(format!("points at missing segment {}", location.segment.0));
    };
    let bytes = match segment
        .file
        .read_exact_at(u64::from(location.offset), location.len as usize)
    {
        Ok(bytes) => bytes,
        Err(error) => return Some(error.to_string()),
    };
    match record::decode(&bytes) {
        Ok(record)
            if record.kind.has_value()
                && record.kvs_id == kvs_id
                && record.key == key
                && record.seqno == entry.seqno =>
        {
            None
        }
        Ok(_) => Some(format!(
            "{} at {}: record belongs to another key or version",
            segment.path().display(),
            location.offset
        )),
        Err(error) => Some(format!(
            "{} at {}: {error:?}",
            segment.path().display(),
            location.offset
        )),
    }
}
