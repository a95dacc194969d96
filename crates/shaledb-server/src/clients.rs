//! The RESP port's client limits that CONFIG SET changes while the server runs: `maxclients`
//! ([`ClientSlots`]) and the idle timeout ([`IdleTimeout`]), and the signals that wake clients
//! waiting for input when what they wait under changes ([`InputWaits`]). The live values are
//! atomics here; `Config` keeps what the server started with, and nothing is written back to
//! the config file.

use atomic_waker::AtomicWaker;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
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

/// How long a client may stay silent before it is closed; `None`: forever. Whoever changes it
/// (CONFIG SET timeout) then wakes the clients waiting for input ([`InputWaits::wake_all`]), so
/// they apply it at once: setting it alone reaches only the next wait.
pub struct IdleTimeout {
    seconds: AtomicU64,
}

impl IdleTimeout {
    pub fn new(timeout: Option<Duration>) -> IdleTimeout {
        IdleTimeout {
            seconds: AtomicU64::new(timeout.map_or(0, |timeout| timeout.as_secs())),
        }
    }

    /// The timeout in seconds; 0: none.
    pub fn seconds(&self) -> u64 {
        self.seconds.load(Ordering::SeqCst)
    }

    pub fn set_seconds(&self, seconds: u64) {
        self.seconds.store(seconds, Ordering::SeqCst);
    }
}

/// The RESP port's connections, each with a signal that wakes it while it waits for its next
/// request, so that it applies at once what changed meanwhile: the idle timeout (a client
/// already waiting is held to the new one, as in Redis) or the server's drain.
///
/// One signal per connection, set up when it connects, and a wait that registers the task with
/// it without a lock: a `tokio::sync::Notify` for all clients, which each waiting client joined
/// and left for every read, locked its list twice per read, and those locks were a tenth of a
/// pipeline-1 request's CPU, the list's cache line moving between the network threads' cores
/// (docs/SERVER.md, "Waiting for input").
#[derive(Default)]
pub struct InputWaits {
    signals: Mutex<HashMap<u64, Arc<Signal>>>,
    next_id: AtomicU64,
}

/// A connection's signal, withdrawn from [`InputWaits`] when dropped.
pub struct InputSignal {
    waits: Arc<InputWaits>,
    id: u64,
    signal: Arc<Signal>,
}

/// Set by [`InputWaits::wake_all`], taken by the connection's next wait.
#[derive(Default)]
struct Signal {
    raised: AtomicBool,
    waker: AtomicWaker,
}

impl InputWaits {
    /// A new connection's signal.
    pub fn signal(self: &Arc<Self>) -> InputSignal {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let signal = Arc::new(Signal::default());
        self.lock().insert(id, signal.clone());
        InputSignal {
            waits: self.clone(),
            id,
            signal,
        }
    }

    /// Wakes every connection: one waiting for input now returns at once, any other at its next
    /// wait (the signal stays raised for it), and each looks again at what it waits under.
    pub fn wake_all(&self) {
        for signal in self.lock().values() {
            signal.raised.store(true, Ordering::SeqCst);
            signal.waker.wake();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Signal>>> {
        // A map of signals is whole at every unlock: a panic elsewhere leaves nothing half done.
        self.signals.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl InputSignal {
    /// Completes once [`InputWaits::wake_all`] has been called since it last completed.
    pub async fn woken(&self) {
        let signal = &self.signal;
        // A load first: the signal is almost never raised, and a swap writes its line each time.
        let take =
            || signal.raised.load(Ordering::Acquire) && signal.raised.swap(false, Ordering::AcqRel);
        std::future::poll_fn(|context| {
            if take() {
                return Poll::Ready(());
            }
            signal.waker.register(context.waker());
            // Raised between the check and the registration: its wake may have found no waker.
            if take() {
                return Poll::Ready(());
            }
            Poll::Pending
        })
        .await
    }
}

impl Drop for InputSignal {
    fn drop(&mut self) {
        self.waits.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_wake_reaches_a_waiting_connection_and_one_that_waits_later() {
        let waits = Arc::new(InputWaits::default());
        let (waiting, later) = (waits.signal(), waits.signal());
        let woken = tokio::spawn(async move { waiting.woken().await });
        // The spawned wait registers its task before the wake.
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!woken.is_finished(), "woken before any wake");
        waits.wake_all();
        tokio::time::timeout(Duration::from_secs(5), woken)
            .await
            .expect("a waiting connection is woken")
            .unwrap();
        // Raised while the connection was busy: its next wait returns at once, once.
        tokio::time::timeout(Duration::from_secs(5), later.woken())
            .await
            .expect("a wake is kept for a connection not waiting then");
        let again = tokio::time::timeout(Duration::from_millis(50), later.woken()).await;
        assert!(again.is_err(), "one wake woke a connection twice");
    }

    #[test]
    fn a_dropped_signal_leaves_the_set() {
        let waits = Arc::new(InputWaits::default());
        let first = waits.signal();
        let second = waits.signal();
        assert_eq!(waits.lock().len(), 2);
        drop(first);
        assert_eq!(waits.lock().len(), 1);
        drop(second);
        assert!(waits.lock().is_empty());
        waits.wake_all();
    }
}
