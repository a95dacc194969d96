//! The memory every client's buffers may hold together (`max_client_buffers_bytes`), and each
//! client's share of it.
//!
//! A client's share is the capacity of its input buffer plus the replies it has not read yet. A
//! client that needs more than the budget has left is disconnected, not served at the others'
//! expense: the server's memory for clients stays within the setting whatever they send.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The budget all clients' buffers share.
pub struct BufferBudget {
    used: AtomicUsize,
    max: usize,
}

impl BufferBudget {
    pub fn new(max: usize) -> Arc<BufferBudget> {
        Arc::new(BufferBudget {
            used: AtomicUsize::new(0),
            max,
        })
    }

    /// Bytes all clients hold now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub fn max(&self) -> usize {
        self.max
    }
}

/// What one client holds of the budget; given back when dropped.
pub struct BufferCharge {
    budget: Arc<BufferBudget>,
    held: usize,
}

impl BufferCharge {
    pub fn new(budget: Arc<BufferBudget>) -> BufferCharge {
        BufferCharge { budget, held: 0 }
    }

    /// Makes this client's holding `bytes`. Returns false, holding what it held before, when the
    /// budget cannot grant the growth.
    pub fn set(&mut self, bytes: usize) -> bool {
        if bytes <= self.held {
            self.budget
                .used
                .fetch_sub(self.held - bytes, Ordering::Relaxed);
            self.held = bytes;
            return true;
        }
        let more = bytes - self.held;
        let granted = self
            .budget
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(more)
                    .filter(|&total| total <= self.budget.max)
            });
        if granted.is_ok() {
            self.held = bytes;
        }
        granted.is_ok()
    }
}

impl Drop for BufferCharge {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.held, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_stay_within_the_budget_and_are_given_back() {
        let budget = BufferBudget::new(100);
        let mut first = BufferCharge::new(budget.clone());
        let mut second = BufferCharge::new(budget.clone());
        assert!(first.set(60));
        assert!(!second.set(41), "60 + 41 exceeds 100");
        assert_eq!(budget.used(), 60, "a refused growth holds nothing more");
        assert!(second.set(40));
        assert_eq!(budget.used(), 100);
        assert!(first.set(10), "shrinking always succeeds");
        assert!(second.set(90));
        drop(second);
        assert_eq!(budget.used(), 10);
        drop(first);
        assert_eq!(budget.used(), 0);
    }
}
