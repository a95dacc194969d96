//! `check`: verify every record on media and every index entry of the store, like `fsck`.
//! Meant for a quiet KVDB (the CLI's `shale check`); concurrent writes make the live-byte
//! comparison approximate, never the CRC checks. The caller pauses the cleaner, which moves
//! records, for the whole check.

use crate::error::Result;
use crate::index::{Entry, Key};
use crate::limits::SEGMENT_HEADER_BYTES;
use crate::media::ReadPurpose;
use crate::segment::{scan_records, SegmentId};
use crate::store::Store;
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

pub fn check(store: &Store) -> Result<CheckReport> {
    store.heads.flush_all(false)?;
    let mut report = CheckReport::default();
    // Every version the indexes hold, by segment and offset, so one sequential pass per
    // segment verifies both the records and the entries pointing at them.
    let mut expected: HashMap<SegmentId, Vec<Expected>> = HashMap::new();
    let mut kvs_names = HashMap::new();
    for kvs in store.kvs.all() {
        kvs_names.insert(kvs.id, kvs.name.clone());
        kvs.index.read().for_each_version(|key, entry| {
            report.index_entries += 1;
            expected
                .entry(entry.location.segment)
                .or_default()
                .push(Expected {
                    kvs_id: kvs.id,
                    key: key.into(),
                    entry,
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
        let summary = scan_records(
            &segment.file,
            SEGMENT_HEADER_BYTES,
            ReadPurpose::Other,
            |offset, record| {
                report.records += 1;
                report.record_bytes += record.encoded_len() as u64;
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
        for (offset, reason) in summary.corruptions {
            report
                .corruptions
                .push(format!("{path} at {offset}: {reason}"));
        }
        if summary.torn_tail {
            report
                .torn_tails
                .push(format!("{path} at {}", summary.end_offset));
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

struct Expected {
    kvs_id: u32,
    key: Key,
    entry: Entry,
}
