//! The sorter: rewrites key ranges that scans found scattered over the media in key order, so
//! the next scan of them reads a few contiguous spans instead of one record per device read.
//!
//! A log-structured store lays records out in the order they were written; with keys written
//! in random order (YCSB's hashed inserts) a scan of 50 keys is 50 random reads. A scan whose
//! batch of reads brought few records per device read offers its range (KVS and first key) to
//! the store's bounded queue (`store::ScatteredRanges`). The sorter takes from there the newest
//! versions held in sealed segments, up to [`RUN_BYTES`] of records; if they are still
//! scattered, it reads them in one batch and appends them in key order to the old-generation
//! cleaner head of their class (data scanned and not rewritten since is cold). Each move is the
//! cleaner's compare-and-swap against the index (`gc::move_version`), made under the cleaner's
//! pass lock. The segments the records left now hold dead copies, which the cleaner frees like
//! any other dead data, and it makes every copy in its heads durable before it frees a segment
//! (as the checkpointer does before it names one), so the sorter needs no fdatasync of its own.

use crate::error::Result;
use crate::gc::{move_version, Cleaner};
use crate::limits::SCAN_BATCH_RECORDS_MAX;
use crate::media::{read_exact_batch, ExactRead, MediaClass, ReadPurpose};
use crate::options::MediaPolicy;
use crate::segment::HeadKind;
use crate::store::{is_scattered, ScatteredRange, Store};
use std::ops::Bound;
use std::sync::Arc;

/// Records rewritten per range: a run long enough that many scans starting in it read it with
/// one or two device reads (128 KiB each), short enough that one run holds the cleaner's pass
/// lock only briefly.
const RUN_BYTES: u64 = 1 << 20;
/// Most versions a run considers.
const RUN_RECORDS_MAX: usize = 4096;

pub struct Sorter {
    store: Arc<Store>,
    /// Whose pass lock the sorter holds while it moves records.
    cleaner: Arc<Cleaner>,
}

impl Sorter {
    pub fn new(store: Arc<Store>, cleaner: Arc<Cleaner>) -> Self {
        Sorter { store, cleaner }
    }

    /// Sorts waiting ranges until `budget` bytes were rewritten or none waits. Returns the bytes
    /// rewritten.
    pub fn sort_step(&self, budget: u64) -> Result<u64> {
        let mut rewritten = 0;
        while rewritten < budget {
            let Some(range) = self.store.scattered.take() else {
                break;
            };
            rewritten += self.sort_range(&range)?;
        }
        Ok(rewritten)
    }

    /// Rewrites the run starting at `range` in key order if it is scattered. Returns the bytes
    /// rewritten.
    fn sort_range(&self, range: &ScatteredRange) -> Result<u64> {
        let _one_pass = self.cleaner.pause();
        let store = &self.store;
        // Never make a damaged KVDB worse, and never spend space the writers need.
        if store.corruption().is_some() || store.space.under_pressure() {
            return Ok(0);
        }
        let Some(kvs) = store.kvs.get(range.kvs_id) else {
            return Ok(0); // dropped since
        };
        let versions = kvs
            .index
            .collect_visible(
                Bound::Included(&range.start),
                Bound::Unbounded,
                u64::MAX,
                RUN_RECORDS_MAX,
                false,
            )
            .entries;
        // Versions still in a segment being written are recent: they stay where they are.
        let mut run = Vec::new();
        let mut run_bytes = 0;
        for version in versions {
            let (key, entry) = (version.key, version.entry);
            let Some(segment) = store.segments.get(entry.location.segment) else {
                continue; // moved meanwhile
            };
            if !segment.is_sealed() || segment.is_quarantined() {
                continue;
            }
            run_bytes += u64::from(entry.location.len);
            run.push((key, entry, segment));
            if run_bytes >= RUN_BYTES {
                break;
            }
        }
        let reads: Vec<ExactRead<'_>> = run
            .iter()
            .map(|(_, entry, segment)| ExactRead {
                file: &segment.file,
                offset: u64::from(entry.location.offset),
                len: entry.location.len as usize,
            })
            .collect();
        // Batches sorted before (by a run that began earlier or later) stay where they are: the
        // run is the first stretch of scattered batches, if any.
        let scattered: Vec<bool> = reads
            .chunks(SCAN_BATCH_RECORDS_MAX)
            .map(is_scattered)
            .collect();
        let Some(first) = scattered.iter().position(|&batch| batch) else {
            return Ok(0);
        };
        let last = scattered[first..]
            .iter()
            .position(|&batch| !batch)
            .map_or(scattered.len(), |sorted| first + sorted);
        let stretch =
            first * SCAN_BATCH_RECORDS_MAX..(last * SCAN_BATCH_RECORDS_MAX).min(run.len());
        let (run, reads) = (&run[stretch.clone()], &reads[stretch]);
        // A staging-only KVS's run stays on staging only if all of it is there: sorting never
        // moves data the staging budget pushed down to capacity back up.
        let all_on_staging = run
            .iter()
            .all(|(_, _, segment)| segment.header.class == MediaClass::Staging);
        let class = match kvs.options.media_policy {
            MediaPolicy::StagingOnly if all_on_staging => MediaClass::Staging,
            _ => MediaClass::Capacity,
        };
        let destination = store.heads.at(class, HeadKind::CleanerOld);
        let mut rewritten = 0;
        for ((key, entry, segment), bytes) in run
            .iter()
            .zip(read_exact_batch(reads, ReadPurpose::Cleaning))
        {
            let bytes = bytes?;
            let record = store.checked_record(segment, kvs.id, key, *entry, &bytes)?;
            if let Some(to) = move_version(
                store,
                &kvs,
                segment,
                &record,
                entry.location,
                destination,
                true,
            )? {
                rewritten += u64::from(to.len);
            }
        }
        store.counters.sorted_ranges.add(1);
        store.counters.sort_bytes_copied.add(rewritten);
        Ok(rewritten)
    }
}
