//! The poisoned state: after a failed write or fdatasync the KVDB refuses further writes
//! (retrying an fsync can silently lose data), and says why.

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Default)]
pub struct Poison {
    poisoned: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Poison {
    pub fn set(&self, reason: String) {
        tracing::error!(%reason, "KVDB poisoned");
        let mut slot = self.reason.lock();
        if slot.is_none() {
            *slot = Some(reason);
        }
        self.poisoned.store(true, Ordering::Release);
    }

    pub fn check(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            let reason = self.reason.lock().clone().unwrap_or_default();
            return Err(Error::Poisoned(reason));
        }
        Ok(())
    }
}
