//! The network threads: one single-threaded tokio runtime each. Connections are numbered as
//! they are accepted, and connection `n` lives on thread `n % active`, where `active` (1 up to
//! `network_threads`) is the count that serves the most requests under the load of the moment:
//! the balancer counts the commands served in each [`BALANCE_PERIOD`], and every
//! [`PROBE_EVERY`] periods tries one thread more or fewer for a period, keeping the change only
//! if it served at least [`PROBE_GAIN_MIN`] times as many. A Redis connection whose thread is no
//! longer its place moves between two pipelines (`connection.rs`); memcached's connections stay
//! where they were placed.
//!
//! Why not a fixed count: on cores shared with the clients (two cores, redis-benchmark or YCSB
//! beside the server) two network threads sleep and wake per request, 60 times as many task
//! switches as one thread that always finds work (measured: 72,301 vs 1,189 in 3 s of HGETALL
//! from 16 clients), and serve 30-45% fewer requests; under 50 clients pipelining, one thread
//! is the bottleneck and two serve 25-60% more writes. Neither the threads' CPU time nor the
//! machine's idle time tells the cases apart (one thread is 93-98% busy in both), the requests
//! served do. Details and numbers: docs/SERVER.md, "Where commands run".
//!
//! It replaced one work-stealing runtime with a worker per core, which woke an idle worker
//! whenever another had tasks queued.

use anyhow::{Context, Result};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::{Builder, Handle};

/// How long the balancer counts the commands served to compare two thread counts.
const BALANCE_PERIOD: Duration = Duration::from_millis(100);
/// How long connections are given to move before a period is counted.
const SETTLE: Duration = Duration::from_millis(20);
/// Periods between two probes of another thread count.
const PROBE_EVERY: u32 = 10;
/// A probe is kept when it served at least this many times the commands of the period before.
const PROBE_GAIN_MIN: f64 = 1.05;
/// Fewer commands per period than this is no load to compare under.
const LOAD_MIN: u64 = 1000;

/// How many network threads serve connections now; shared with INFO.
#[derive(Debug)]
pub struct Balance {
    /// The network threads started (`network_threads`).
    pub count: usize,
    /// Threads connections are placed on: 1..=count.
    pub active: AtomicUsize,
    /// Connections moved to another thread so far.
    pub moves: AtomicU64,
}

impl Balance {
    pub fn new(count: usize) -> Balance {
        let count = count.max(1);
        Balance {
            count,
            active: AtomicUsize::new(count),
            moves: AtomicU64::new(0),
        }
    }

    /// The thread connection `number` belongs on now.
    fn home(&self, number: usize) -> usize {
        number % self.active.load(Ordering::Relaxed).clamp(1, self.count)
    }
}

/// Where a connection lives: its number (which decides its home) and the thread it is on.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    number: usize,
    thread: usize,
}

/// A connection's future on its thread, boxed: a connection that moves spawns its own
/// continuation, whose type would otherwise contain itself.
pub type ConnectionTask = Pin<Box<dyn Future<Output = ()> + Send>>;

pub struct NetworkThreads {
    runtimes: Vec<Handle>,
    balance: Arc<Balance>,
    /// The number of the next connection.
    next: AtomicUsize,
}

impl NetworkThreads {
    /// Starts `count` threads (at least one), each running a runtime of its own until the
    /// process ends.
    pub fn start(count: usize) -> Result<NetworkThreads> {
        let balance = Arc::new(Balance::new(count));
        let mut runtimes = Vec::with_capacity(balance.count);
        for _ in 0..balance.count {
            let runtime = Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting a network thread's runtime")?;
            runtimes.push(runtime.handle().clone());
            std::thread::Builder::new()
                .name("shale-serve".into())
                .spawn(move || runtime.block_on(std::future::pending::<()>()))
                .context("starting a network thread")?;
        }
        Ok(NetworkThreads {
            runtimes,
            balance,
            next: AtomicUsize::new(0),
        })
    }

    /// How many threads serve connections now (INFO shows it).
    pub fn balance(&self) -> Arc<Balance> {
        self.balance.clone()
    }

    /// Serves an accepted connection on its home thread: `serve` gets the stream, registered
    /// with that thread's runtime, and its placement.
    pub fn serve<F>(&self, stream: tokio::net::TcpStream, serve: F)
    where
        F: FnOnce(tokio::net::TcpStream, Placement) -> ConnectionTask + Send + 'static,
    {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let thread = self.balance.home(number);
        self.spawn_on(Placement { number, thread }, stream, serve);
    }

    /// Where a connection on `placement` should go, if its home is another thread now.
    pub fn new_home(&self, placement: Placement) -> Option<Placement> {
        let home = self.balance.home(placement.number);
        (home != placement.thread).then_some(Placement {
            thread: home,
            ..placement
        })
    }

    /// Moves a connection to `placement`'s thread, where `serve` goes on with it.
    pub fn move_to<F>(&self, placement: Placement, stream: tokio::net::TcpStream, serve: F)
    where
        F: FnOnce(tokio::net::TcpStream, Placement) -> ConnectionTask + Send + 'static,
    {
        self.balance.moves.fetch_add(1, Ordering::Relaxed);
        self.spawn_on(placement, stream, serve);
    }

    /// A stream that cannot move (its descriptor taken away meanwhile) is logged and dropped,
    /// which closes it.
    fn spawn_on<F>(&self, placement: Placement, stream: tokio::net::TcpStream, serve: F)
    where
        F: FnOnce(tokio::net::TcpStream, Placement) -> ConnectionTask + Send + 'static,
    {
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(error) => return tracing::warn!(%error, "a connection could not be handed over"),
        };
        self.runtimes[placement.thread].spawn(async move {
            match tokio::net::TcpStream::from_std(stream) {
                Ok(stream) => serve(stream, placement).await,
                Err(error) => tracing::warn!(%error, "a connection could not be handed over"),
            }
        });
    }

    /// Every `PROBE_EVERY` periods, tries another thread count for a period and keeps it if it
    /// served more; `served` counts the commands served so far.
    pub async fn run_balancer(self: Arc<Self>, served: impl Fn() -> u64) {
        let count = self.balance.count;
        if count == 1 {
            return;
        }
        let mut grow_next = false;
        loop {
            tokio::time::sleep(BALANCE_PERIOD * PROBE_EVERY).await;
            let active = self.balance.active.load(Ordering::Relaxed);
            let Some(probe) = probe_target(active, count, grow_next) else {
                continue;
            };
            grow_next = !grow_next;
            let before = served_in(&served, BALANCE_PERIOD).await;
            if before < LOAD_MIN {
                continue;
            }
            self.balance.active.store(probe, Ordering::Relaxed);
            tokio::time::sleep(SETTLE).await;
            let during = served_in(&served, BALANCE_PERIOD).await;
            let kept = during as f64 >= before as f64 * PROBE_GAIN_MIN;
            tracing::debug!(
                active,
                probe,
                before,
                during,
                kept,
                "network threads probed"
            );
            if !kept {
                self.balance.active.store(active, Ordering::Relaxed);
            }
        }
    }
}

/// Commands served over the next `period`.
async fn served_in(served: &impl Fn() -> u64, period: Duration) -> u64 {
    let before = served();
    tokio::time::sleep(period).await;
    served().saturating_sub(before)
}

/// The thread count to try next from `active` (of `count`): one more or one fewer, alternating
/// by `grow` where both are possible.
fn probe_target(active: usize, count: usize, grow: bool) -> Option<usize> {
    match (active > 1, active < count) {
        (true, true) if grow => Some(active + 1),
        (true, _) => Some(active - 1),
        (false, true) => Some(active + 1),
        (false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_try_one_thread_more_or_fewer() {
        assert_eq!(probe_target(2, 2, true), Some(1));
        assert_eq!(probe_target(2, 2, false), Some(1));
        assert_eq!(probe_target(1, 2, false), Some(2));
        assert_eq!(probe_target(2, 4, true), Some(3));
        assert_eq!(probe_target(2, 4, false), Some(1));
        assert_eq!(probe_target(1, 1, true), None);
    }

    #[test]
    fn connections_are_spread_over_the_active_threads() {
        let balance = Balance::new(4);
        assert_eq!(
            (0..8).map(|n| balance.home(n)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 0, 1, 2, 3]
        );
        balance.active.store(1, Ordering::Relaxed);
        assert!((0..8).all(|n| balance.home(n) == 0));
        assert_eq!(Balance::new(0).count, 1);
    }
}
