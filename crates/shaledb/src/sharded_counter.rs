//! `Counter`: an event counter split over per-thread slots and summed when read, for counts
//! that several threads add to on their hot paths (every get, every commit).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slots one counter is split over: each thread adds to its own (threads beyond this many
/// share), so two threads counting the same event write different cache lines.
const COUNTER_SLOTS: usize = 16;

/// The next thread's slot.
static NEXT_COUNTER_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static COUNTER_SLOT: usize = NEXT_COUNTER_SLOT.fetch_add(1, Ordering::Relaxed) % COUNTER_SLOTS;
}

/// One slot on cache lines of its own (128 bytes: the pair of lines x86 fetches together).
#[derive(Debug, Default)]
#[repr(align(128))]
struct CounterSlot(AtomicU64);

/// A monotonically increasing event counter, split over per-thread slots and summed when read:
/// every get counts itself, and one shared word made each count a cache-line transfer between
/// the cores of two threads reading at once (about 2% of a server GET's CPU, docs/SERVER.md).
#[derive(Debug, Default)]
pub struct Counter {
    slots: [CounterSlot; COUNTER_SLOTS],
}

impl Counter {
    pub fn add(&self, amount: u64) {
        let slot = COUNTER_SLOT.with(|slot| *slot);
        self.slots[slot].0.fetch_add(amount, Ordering::Relaxed);
    }

    /// The sum of the slots: every count added before the call, and any number of those added
    /// during it.
    pub fn get(&self) -> u64 {
        self.slots
            .iter()
            .map(|slot| slot.0.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_sums_what_every_thread_added() {
        let counter = std::sync::Arc::new(Counter::default());
        let threads: Vec<_> = (0..COUNTER_SLOTS as u64 + 3)
            .map(|thread| {
                let counter = counter.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        counter.add(thread + 1);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let threads = COUNTER_SLOTS as u64 + 3;
        assert_eq!(counter.get(), 1000 * threads * (threads + 1) / 2);
    }
}
