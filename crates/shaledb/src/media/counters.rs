//! Bytes moved to and from one media class, by why they moved (client writes, cleaning,
//! checkpoints; gets, scans, cleaning, warming the cache, other reads).

use std::sync::atomic::{AtomicU64, Ordering};

/// Why bytes are written to media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePurpose {
    Client = 0,
    Cleaning = 1,
    Checkpoint = 2,
}

/// Why bytes are read from media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPurpose {
    Get = 0,
    Scan = 1,
    Cleaning = 2,
    /// Recovery, check and headers.
    Other = 3,
    /// Warming the value cache at open: reading back the values it held before.
    Warming = 4,
}

const READ_PURPOSES: usize = 5;

/// Bytes moved to and from one media class, by purpose, and the device reads that moved them.
#[derive(Debug, Default)]
pub struct MediaCounters {
    written: [AtomicU64; 3],
    read: [AtomicU64; READ_PURPOSES],
    read_ops: [AtomicU64; READ_PURPOSES],
}

impl MediaCounters {
    pub fn add_written(&self, purpose: WritePurpose, bytes: u64) {
        self.written[purpose as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    /// One device read of `bytes`.
    pub fn add_read(&self, purpose: ReadPurpose, bytes: u64) {
        self.read[purpose as usize].fetch_add(bytes, Ordering::Relaxed);
        self.read_ops[purpose as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn written(&self, purpose: WritePurpose) -> u64 {
        self.written[purpose as usize].load(Ordering::Relaxed)
    }

    pub fn read(&self, purpose: ReadPurpose) -> u64 {
        self.read[purpose as usize].load(Ordering::Relaxed)
    }

    /// Device reads made for `purpose`.
    pub fn read_ops(&self, purpose: ReadPurpose) -> u64 {
        self.read_ops[purpose as usize].load(Ordering::Relaxed)
    }

    /// (bytes written, bytes read), all purposes.
    pub fn snapshot(&self) -> (u64, u64) {
        let sum = |counters: &[AtomicU64]| {
            counters
                .iter()
                .map(|counter| counter.load(Ordering::Relaxed))
                .sum()
        };
        (sum(&self.written), sum(&self.read))
    }
}
