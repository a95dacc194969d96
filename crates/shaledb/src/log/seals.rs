//! Seals of full segments waiting to be recorded in the manifest. A roll queues the seal and
//! appends go on in the next segment at once: recording it inside the roll held every appender
//! for a manifest fdatasync queued behind the device's segment writes (YCSB load of 3,000,000
//! records 15% slower, `bench/results/2026-11-23-issue16-metadata-cost/fixed/`). Seals are
//! recorded in order, one recorder at a time; one that fails stays queued, and the flusher
//! tries again. Until its seal is recorded a segment is not sealed in memory either, so the
//! cleaner leaves it alone, and a crash before then leaves it for recovery to seal.

use super::lifecycle::Lifecycle;
use crate::error::Result;
use crate::segment::{Seal, SegmentMeta};
use parking_lot::Mutex;
use std::sync::Arc;

#[derive(Default)]
pub struct SealQueue {
    /// Held only to push or pop, never across I/O, so a roll never waits for a recorder.
    queued: Mutex<Vec<(Arc<SegmentMeta>, Seal)>>,
    /// Held while recording.
    recording: Mutex<()>,
}

impl SealQueue {
    /// Queues the seal of `segment`, whose every byte is durable.
    pub fn push(&self, segment: Arc<SegmentMeta>, seal: Seal) {
        self.queued.lock().push((segment, seal));
    }

    /// Records every queued seal, in order.
    pub fn record(&self, lifecycle: &Lifecycle) -> Result<()> {
        let _one_recorder = self.recording.lock();
        loop {
            let Some((segment, seal)) = self.queued.lock().first().cloned() else {
                return Ok(());
            };
            lifecycle.seal(&segment, seal)?;
            self.queued.lock().remove(0);
        }
    }
}
