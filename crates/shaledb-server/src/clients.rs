//! The RESP port's client limits that CONFIG SET changes while the server runs: `maxclients`
//! ([`ClientSlots`]) and the idle timeout ([`IdleTimeout`]). The live values are atomics here;
//! `Config` keeps what the server started with, and nothing is written back to the config file.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Admits at most `limit` clients at once.
///
/// A count of admitted clients compared with the live limit at each accept, rather than a
/// semaphore's permits: lowering the limit then needs no permits forgotten or taken back (no
/// race between a client returning its permit and the shrink), clients already connected stay,
/// and new ones are refused until fewer than the new limit remain; raising it admits more at
/// once.
pub struct ClientSlots {
    limit: AtomicUsize,
    admitted: AtomicUsize,
    /// Woken when the last admitted client leaves (the drain waits for it).
    empty: Notify,
}

/// One admitted client's slot, given back when dropped.
pub struct ClientSlot {
    slots: Arc<ClientSlots>,
}

impl ClientSlots {
    pub fn new(limit: usize) -> Arc<ClientSlots> {
        Arc::new(ClientSlots {
            limit: AtomicUsize::new(limit),
            admitted: AtomicUsize::new(0),
            empty: Notify::new(),
        })
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::SeqCst)
    }

    /// Clients admitted now.
    pub fn admitted(&self) -> usize {
        self.admitted.load(Ordering::SeqCst)
    }

    /// Takes effect at the next accept; connected clients are never closed by it.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::SeqCst);
    }

    /// A slot if fewer than `limit` clients are admitted.
    pub fn try_admit(self: &Arc<Self>) -> Option<ClientSlot> {
        self.admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |admitted| {
                (admitted < self.limit()).then_some(admitted + 1)
            })
            .ok()?;
        Some(ClientSlot {
            slots: self.clone(),
        })
    }

    /// Returns once every admitted client has left.
    pub async fn all_left(&self) {
        loop {
            let empty = self.empty.notified();
            tokio::pin!(empty);
            // Registered before the count is read: a client leaving in between still wakes it.
            empty.as_mut().enable();
            if self.admitted.load(Ordering::SeqCst) == 0 {
                return;
            }
            empty.await;
        }
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        if self.slots.admitted.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.slots.empty.notify_waiters();
        }
    }
}

/// How long a client may stay silent before it is closed; `None`: forever.
pub struct IdleTimeout {
    seconds: AtomicU64,
    /// Woken when the timeout changes: clients waiting for input apply the new one at once.
    changed: Notify,
}

impl IdleTimeout {
    pub fn new(timeout: Option<Duration>) -> IdleTimeout {
        IdleTimeout {
            seconds: AtomicU64::new(timeout.map_or(0, |timeout| timeout.as_secs())),
            changed: Notify::new(),
        }
    }

    /// The timeout in seconds; 0: none.
    pub fn seconds(&self) -> u64 {
        self.seconds.load(Ordering::SeqCst)
    }

    pub fn set_seconds(&self, seconds: u64) {
        self.seconds.store(seconds, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Runs `work` (a read of the client's next request) until it finishes, or `Err(())` once the
    /// client has been silent for the idle timeout, counted from the call. A client already
    /// waiting when the timeout changes is held to the new one, as in Redis.
    pub async fn run<F: Future>(&self, work: F) -> Result<F::Output, ()> {
        let start = tokio::time::Instant::now();
        tokio::pin!(work);
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the value is read: a change in between still wakes this wait.
            changed.as_mut().enable();
            let seconds = self.seconds();
            let deadline = async {
                match start.checked_add(Duration::from_secs(seconds)) {
                    Some(at) if seconds > 0 => tokio::time::sleep_until(at).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                output = &mut work => return Ok(output),
                () = deadline => return Err(()),
                () = changed => {}
            }
        }
    }
}
