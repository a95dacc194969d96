//! The space budget and writer pacing.
//!
//! The capacity class may hold at most a limit of bytes: `Options::space_bytes_max`, or what its
//! file system can still hold. The last `reserve_segments` segments of that are a reserve: while
//! usage is inside it, the cleaner works without waiting for the live-ratio target and writers
//! are slowed in proportion to how deep into the reserve usage is, so cleaning can keep up
//! without writers ever stalling outright. A batch that would not fit at all fails with
//! `ErrorKind::NoSpace` before anything is written.
//!
//! Deletes free space, so a full KVDB must still take them: past the limit lies a headroom
//! (`Options::space_delete_headroom_bytes`) that only batches of deletes may use, and they are
//! never slowed. On a file system that is filling up, the limit for everything else sits that
//! far below what it can hold, so the headroom is always there.
//!
//! The same proportional pacing applies against the soft budget, live bytes divided by
//! `space_target_live_ratio`: when writers outrun the cleaner and usage passes it, they slow
//! down by how far past it usage is, so the cleaner's share of the device follows the ingest
//! rate instead of falling behind.

use crate::error::{Error, Result};
use crate::media::MediaClass;
use crate::segment::SegmentTable;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Longest delay one write is given when the reserve is nearly used up.
const DELAY_MAX: Duration = Duration::from_millis(20);

pub struct SpaceBudget {
    configured_max_bytes: Option<u64>,
    reserve_bytes: u64,
    delete_headroom_bytes: u64,
    live_ratio_target: f64,
    /// The limit of batches that store values; deletes may go `delete_headroom_bytes` past it.
    limit_bytes: AtomicU64,
    used_bytes: AtomicU64,
    /// Live bytes / target ratio, at the last refresh.
    soft_limit_bytes: AtomicU64,
}

impl SpaceBudget {
    pub fn new(
        configured_max_bytes: Option<u64>,
        reserve_bytes: u64,
        delete_headroom_bytes: u64,
        live_ratio_target: f64,
    ) -> Self {
        SpaceBudget {
            configured_max_bytes,
            reserve_bytes,
            delete_headroom_bytes,
            live_ratio_target,
            limit_bytes: AtomicU64::new(u64::MAX),
            used_bytes: AtomicU64::new(0),
            soft_limit_bytes: AtomicU64::new(u64::MAX),
        }
    }

    /// Recomputes usage from the segments and the limit from the file system.
    pub fn refresh(&self, segments: &SegmentTable, capacity_dir: &Path) -> Result<()> {
        let capacity: Vec<_> = segments
            .all()
            .into_iter()
            .filter(|segment| segment.header.class == MediaClass::Capacity)
            .collect();
        let used: u64 = capacity.iter().map(|segment| segment.disk_bytes()).sum();
        let live: u64 = capacity.iter().map(|segment| segment.live_bytes()).sum();
        // The reserve on top keeps small KVDBs (a few segments) out of the soft budget's reach.
        let soft = if self.live_ratio_target > 0.0 {
            (live as f64 / self.live_ratio_target) as u64 + self.reserve_bytes
        } else {
            u64::MAX
        };
        self.soft_limit_bytes.store(soft, Ordering::Relaxed);
        let available = fs4::available_space(capacity_dir).map_err(|error| {
            Error::io(format!("free space of {}", capacity_dir.display()), error)
        })?;
        let device_limit = used.saturating_add(available);
        // Deletes may go past the limit by the headroom: the device must hold that much more.
        let device_limit = device_limit.saturating_sub(self.delete_headroom_bytes);
        let limit = self
            .configured_max_bytes
            .map_or(device_limit, |max| max.min(device_limit));
        self.used_bytes.store(used, Ordering::Relaxed);
        self.limit_bytes.store(limit, Ordering::Relaxed);
        Ok(())
    }

    pub fn note_appended(&self, bytes: u64) {
        self.used_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn note_freed(&self, bytes: u64) {
        let _ = self
            .used_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    /// (used, limit) in bytes.
    pub fn usage(&self) -> (u64, u64) {
        (
            self.used_bytes.load(Ordering::Relaxed),
            self.limit_bytes.load(Ordering::Relaxed),
        )
    }

    /// Whether usage is inside the reserve or past the soft budget: the cleaner should work now.
    pub fn under_pressure(&self) -> bool {
        let (used, limit) = self.usage();
        used.saturating_add(self.reserve_bytes) > limit
            || used > self.soft_limit_bytes.load(Ordering::Relaxed)
    }

    /// Admits a write of `bytes`: `Ok(None)` to go ahead, `Ok(Some(delay))` to go ahead after
    /// `delay`, or `NoSpace` when it cannot fit. A batch of deletes only (`frees`) may use the
    /// headroom past the limit and is never slowed.
    pub fn admit(&self, bytes: u64, frees: bool) -> Result<Option<Duration>> {
        let (used, limit) = self.usage();
        let after = used.saturating_add(bytes);
        let headroom = if frees { self.delete_headroom_bytes } else { 0 };
        if after > limit.saturating_add(headroom) {
            return Err(Error::io(
                format!(
                    "a write of {bytes} bytes does not fit: {used} of {limit} bytes of the capacity class are in use \
                     and the cleaner cannot free more; delete data, or raise space_bytes_max or free disk space"
                ),
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        if self.reserve_bytes == 0 || frees {
            return Ok(None);
        }
        // How deep usage is into the hard reserve, and how far past the soft budget (in
        // reserves): the larger decides the delay.
        let reserve_start = limit.saturating_sub(self.reserve_bytes);
        let soft = self.soft_limit_bytes.load(Ordering::Relaxed);
        let depth = |start: u64| after.saturating_sub(start) as f64 / self.reserve_bytes as f64;
        let depth = depth(reserve_start).max(depth(soft));
        if depth <= 0.0 {
            return Ok(None);
        }
        Ok(Some(DELAY_MAX.mul_f64(depth.min(1.0))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(used: u64, limit: u64, reserve: u64) -> SpaceBudget {
        let budget = SpaceBudget::new(Some(limit), reserve, 50, 0.75);
        budget.used_bytes.store(used, Ordering::Relaxed);
        budget.limit_bytes.store(limit, Ordering::Relaxed);
        budget
    }

    #[test]
    fn writers_slow_down_smoothly_then_get_a_clear_error() {
        let ample = budget(10, 1000, 200);
        assert_eq!(ample.admit(100, false).unwrap(), None);
        assert!(!ample.under_pressure());
        let shallow = budget(810, 1000, 200).admit(10, false).unwrap().unwrap();
        let deep = budget(950, 1000, 200).admit(10, false).unwrap().unwrap();
        assert!(
            shallow < deep && deep <= DELAY_MAX,
            "{shallow:?} < {deep:?}"
        );
        assert!(budget(900, 1000, 200).under_pressure());
        let error = budget(995, 1000, 200).admit(10, false).unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::NoSpace);
        assert!(error.to_string().contains("does not fit"), "{error}");
    }

    #[test]
    fn writers_past_the_soft_budget_slow_down_too() {
        let budget = budget(500, 10_000, 100);
        budget.soft_limit_bytes.store(400, Ordering::Relaxed); // live 300 at a 0.75 target
        assert!(budget.under_pressure());
        let delay = budget.admit(10, false).unwrap().unwrap();
        assert_eq!(
            delay, DELAY_MAX,
            "a full reserve past the soft budget gets the longest delay"
        );
        budget.soft_limit_bytes.store(480, Ordering::Relaxed);
        assert!(budget.admit(10, false).unwrap().unwrap() < DELAY_MAX);
    }

    #[test]
    fn deletes_fit_past_the_limit_by_the_headroom_and_are_never_slowed() {
        let full = budget(995, 1000, 200);
        assert_eq!(
            full.admit(40, true).unwrap(),
            None,
            "deletes go ahead at once"
        );
        assert_eq!(full.admit(55, true).unwrap(), None, "up to the headroom");
        let error = full.admit(56, true).unwrap_err();
        assert_eq!(error.kind(), crate::error::ErrorKind::NoSpace);
        assert_eq!(
            full.admit(10, false).unwrap_err().kind(),
            crate::error::ErrorKind::NoSpace,
            "the headroom is for deletes only"
        );
    }

    #[test]
    fn freeing_never_underflows() {
        let budget = budget(100, 1000, 0);
        budget.note_freed(500);
        assert_eq!(budget.usage().0, 0);
    }
}
