//! Key ranges that scans found scattered over the media, waiting for the sorter
//! (`sorter::Sorter`) to rewrite them in key order. A bounded queue: a range offered while it
//! is full is dropped and counted, and a scan over it will offer it again.

use crate::counters::Counter;
use crate::index::Key;
use crate::limits::SCAN_BATCH_RECORDS_MAX;
use crate::media::{device_reads, ExactRead};
use parking_lot::Mutex;
use std::collections::VecDeque;

/// A batch needs at least this many records read from the device to judge their layout.
const SCATTERED_RECORDS_MIN: usize = 8;
/// Records in key order lie next to each other, so each device read of them brings many; reads
/// that bring fewer than this many records each on average are scattered.
const SORTED_RECORDS_PER_READ_MIN: usize = 4;

/// Whether reading `reads` (records in key order), in batches of a scan's size, takes so many
/// device reads that the records are worth rewriting in key order. Judged per batch, as a scan
/// reads them: a long run of records can be dense in a small store without being in order.
pub fn is_scattered(reads: &[ExactRead<'_>]) -> bool {
    // Short batches (most short scans) are judged without grouping their reads.
    if reads.len() < SCATTERED_RECORDS_MIN {
        return false;
    }
    let device: usize = reads.chunks(SCAN_BATCH_RECORDS_MAX).map(device_reads).sum();
    reads.len() < SORTED_RECORDS_PER_READ_MIN * device
}

/// A range to sort: the KVS and the key it starts at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScatteredRange {
    pub kvs_id: u32,
    pub start: Key,
}

pub struct ScatteredRanges {
    queue: Mutex<VecDeque<ScatteredRange>>,
    /// Most ranges waiting (`Options::sort_queue_ranges`); 0 turns the queue off.
    capacity: usize,
    /// Ranges not queued because the queue was full.
    pub dropped: Counter,
}

impl ScatteredRanges {
    pub fn new(capacity: usize) -> Self {
        ScatteredRanges {
            queue: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity,
            dropped: Counter::default(),
        }
    }

    /// Queues the range starting at `start` unless it is queued already or the queue is full.
    pub fn offer(&self, kvs_id: u32, start: &[u8]) {
        if self.capacity == 0 {
            return;
        }
        let mut queue = self.queue.lock();
        if queue
            .iter()
            .any(|range| range.kvs_id == kvs_id && range.start[..] == *start)
        {
            return;
        }
        if queue.len() >= self.capacity {
            self.dropped.add(1);
            return;
        }
        queue.push_back(ScatteredRange {
            kvs_id,
            start: start.into(),
        });
    }

    /// The oldest range waiting.
    pub fn take(&self) -> Option<ScatteredRange> {
        self.queue.lock().pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_beyond_the_capacity_are_dropped_and_counted() {
        let ranges = ScatteredRanges::new(3);
        for key in [b"a", b"b", b"c", b"d", b"e"] {
            ranges.offer(1, key);
        }
        assert_eq!(ranges.dropped.get(), 2);
        ranges.offer(1, b"a");
        assert_eq!(
            ranges.dropped.get(),
            2,
            "a range already queued is no new offer"
        );
        ranges.offer(2, b"a");
        assert_eq!(ranges.dropped.get(), 3, "another KVS's range is");
        let taken: Vec<_> = std::iter::from_fn(|| ranges.take()).collect();
        assert_eq!(
            taken,
            [b"a", b"b", b"c"].map(|key| ScatteredRange {
                kvs_id: 1,
                start: key[..].into()
            })
        );
    }

    #[test]
    fn a_queue_of_capacity_zero_takes_nothing() {
        let ranges = ScatteredRanges::new(0);
        ranges.offer(1, b"a");
        assert!(ranges.take().is_none());
        assert_eq!(ranges.dropped.get(), 0);
    }
}
