//! Pacing client writes so foreground reads keep their latency.
//!
//! An unthrottled writer can fill the device's queue with log writes (and the CPU with commits)
//! until every read waits behind them: db_bench's readwhilewriting had reads at a p99 of 6.6 ms
//! while one writer ran at ~185k puts/s. The pacer watches how long gets' device reads take,
//! and how the device's bytes divide between client writes and those reads. While more than 1%
//! of the reads in a window of [`WINDOW`] take longer than the target
//! (`Options::read_latency_target`) and writes are at least [`WRITE_SHARE_MIN`] of the bytes,
//! it limits the rate at which client writes are admitted, a quarter lower each such window and
//! never below the floor (`Options::write_rate_floor`), so writes always go on; otherwise it
//! raises the limit an eighth per window, and lifts it once the writers no longer reach it.
//! Slow reads while reads take most of the device are the reads' own queueing: slowing writes
//! there helps no one, so the share decides. And a thread that reads is never paced, nor are its
//! writes counted: slowing its writes would slow its own reads (YCSB A at 16 threads, where
//! every thread reads and updates, fell to 35-45% when they were paced). So the pacer slows
//! dedicated writers (a bulk load, db_bench's readwhilewriting writer) for the readers' sake. A
//! write over the limit waits before it takes any lock (as the space budget's pacing does), so
//! it blocks nobody else.

use crate::sharded_counter::Counter;
use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the limit is reconsidered.
const WINDOW: Duration = Duration::from_millis(50);
/// Fewer reads than this in a window say nothing about their latency.
const READS_PER_WINDOW_MIN: u64 = 16;
/// More than one read in this many over the target lowers the limit.
const SLOW_READS_ONE_IN: u64 = 100;
/// Longest one write waits for its turn: a writer is slowed, never stalled.
const DELAY_MAX: Duration = Duration::from_millis(50);
/// Writes are slowed for slow reads only while client writes are at least this share of the
/// bytes the device moves for clients (written, plus read by gets).
const WRITE_SHARE_MIN: f64 = 0.4;

/// Tells apart the pacers of KVDBs open in one process, for [`LAST_READ`].
static NEXT_PACER_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// (pacer id, window number) of this thread's last read through that pacer's KVDB.
    static LAST_READ: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

pub struct WritePacer {
    id: u64,
    /// Counts windows, so a thread's last read can be dated.
    window: AtomicU64,
    /// Reads slower than this count as slow; zero turns pacing off.
    target: Duration,
    /// The limit never goes below this, in bytes per second.
    floor: f64,
    reads: AtomicU64,
    slow_reads: AtomicU64,
    read_bytes: AtomicU64,
    /// Client write bytes admitted since the pacer started; split per thread, since every
    /// commit adds to it.
    admitted_bytes: Counter,
    limited: AtomicBool,
    /// What the windows' times count from.
    epoch: Instant,
    /// When the current window started, in nanoseconds since `epoch`. Read without the lock,
    /// so an unlimited write whose window is not over takes no lock: a lock per commit moved
    /// its cache line between the cores of every two threads writing at once.
    window_start_nanos: AtomicI64,
    /// The same start on the coarse clock ([`coarse_nanos`]), which an unlimited write reads to
    /// tell whether the window is over: the precise clock, read once per commit, took 1.4% of
    /// a network thread's time under SET at pipeline 16 (about 21 ns a read on this project's
    /// VM, against 3 for the coarse one). The window then ends up to a clock tick late.
    window_start_coarse_nanos: AtomicI64,
    state: Mutex<State>,
}

struct State {
    /// `admitted_bytes` when the current window started.
    admitted_before: u64,
    /// Bytes per second while `limited`.
    rate: f64,
    /// When the writes admitted so far will have had their share of the rate.
    next_free: Instant,
}

impl WritePacer {
    pub fn new(target: Duration, floor_bytes_per_sec: u64) -> Self {
        let now = Instant::now();
        WritePacer {
            id: NEXT_PACER_ID.fetch_add(1, Ordering::Relaxed),
            window: AtomicU64::new(1),
            target,
            floor: floor_bytes_per_sec.max(1) as f64,
            reads: AtomicU64::new(0),
            slow_reads: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            admitted_bytes: Counter::default(),
            limited: AtomicBool::new(false),
            epoch: now,
            window_start_nanos: AtomicI64::new(0),
            window_start_coarse_nanos: AtomicI64::new(coarse_nanos()),
            state: Mutex::new(State {
                admitted_before: 0,
                rate: f64::INFINITY,
                next_free: now,
            }),
        }
    }

    /// Whether reads' durations matter: without a target the read path need not time them.
    pub fn watches_reads(&self) -> bool {
        !self.target.is_zero()
    }

    /// Notes that the calling thread reads (a get, from cache or device): its writes are not
    /// paced while it keeps reading.
    pub fn note_reader(&self) {
        if self.watches_reads() {
            LAST_READ.set((self.id, self.window.load(Ordering::Relaxed)));
        }
    }

    /// Whether the calling thread read in this window or the one before.
    fn caller_reads(&self) -> bool {
        let (pacer, window) = LAST_READ.get();
        pacer == self.id && window + 1 >= self.window.load(Ordering::Relaxed)
    }

    /// Notes how long a foreground read of `bytes` from the device took.
    pub fn note_read(&self, took: Duration, bytes: u64) {
        if !self.watches_reads() {
            return;
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes.fetch_add(bytes, Ordering::Relaxed);
        if took > self.target {
            self.slow_reads.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Admits a client write of `bytes`: how long it must wait first, if at all.
    pub fn admit(&self, bytes: u64) -> Option<Duration> {
        if !self.watches_reads() || self.caller_reads() {
            return None;
        }
        self.admitted_bytes.add(bytes);
        let limited = self.limited.load(Ordering::Relaxed);
        let coarse_age =
            coarse_nanos().saturating_sub(self.window_start_coarse_nanos.load(Ordering::Relaxed));
        if !limited && coarse_age < WINDOW.as_nanos() as i64 {
            return None;
        }
        let now = Instant::now();
        if !limited && self.window_age(now) < WINDOW {
            return None;
        }
        let mut state = match self.state.try_lock() {
            Some(state) => state,
            // Someone else is adjusting or admitting: an unlimited write need not wait for it.
            None if !limited => return None,
            None => self.state.lock(),
        };
        if self.window_age(now) >= WINDOW {
            self.adjust(&mut state, now);
        }
        if !self.limited.load(Ordering::Relaxed) {
            return None;
        }
        let start = state.next_free.max(now);
        let share = Duration::from_secs_f64(bytes as f64 / state.rate);
        // Never booked further ahead than one longest wait: a burst of writers larger than the
        // limit is slowed by that much each, not queued for ever.
        state.next_free = (start + share).min(now + DELAY_MAX);
        let delay = start.duration_since(now);
        (!delay.is_zero()).then_some(delay)
    }

    /// The limit, in bytes per second, or `None` while writes go unpaced.
    pub fn limit(&self) -> Option<u64> {
        self.limited
            .load(Ordering::Relaxed)
            .then(|| self.state.lock().rate as u64)
    }

    fn nanos_since_epoch(&self, now: Instant) -> i64 {
        now.duration_since(self.epoch).as_nanos() as i64
    }

    /// How long the current window has lasted at `now`.
    fn window_age(&self, now: Instant) -> Duration {
        let started = self.window_start_nanos.load(Ordering::Relaxed);
        Duration::from_nanos(self.nanos_since_epoch(now).saturating_sub(started).max(0) as u64)
    }

    /// Ends the window: lowers the limit if reads were slow in it while writes took their share
    /// of the device, raises or lifts it if not.
    fn adjust(&self, state: &mut State, now: Instant) {
        let elapsed = self.window_age(now).as_secs_f64();
        self.window_start_nanos
            .store(self.nanos_since_epoch(now), Ordering::Relaxed);
        self.window_start_coarse_nanos
            .store(coarse_nanos(), Ordering::Relaxed);
        self.window.fetch_add(1, Ordering::Relaxed);
        let reads = self.reads.swap(0, Ordering::Relaxed);
        let slow = self.slow_reads.swap(0, Ordering::Relaxed);
        let read_bytes = self.read_bytes.swap(0, Ordering::Relaxed) as f64;
        let admitted_total = self.admitted_bytes.get();
        let admitted = admitted_total.wrapping_sub(state.admitted_before) as f64;
        state.admitted_before = admitted_total;
        let demand = admitted / elapsed;
        let write_share = admitted / (admitted + read_bytes).max(1.0);
        let reads_slow = reads >= READS_PER_WINDOW_MIN && slow * SLOW_READS_ONE_IN > reads;
        if reads_slow && write_share >= WRITE_SHARE_MIN {
            let from = if state.rate.is_finite() {
                state.rate
            } else {
                demand
            };
            state.rate = (from * 0.75).max(self.floor);
            if !self.limited.swap(true, Ordering::Relaxed) {
                state.next_free = now;
            }
        } else if state.rate.is_finite() {
            state.rate *= 1.125;
            if state.rate > 2.0 * demand {
                // The writers no longer come near the limit: lift it.
                state.rate = f64::INFINITY;
                self.limited.store(false, Ordering::Relaxed);
            }
        }
    }
}

/// The monotonic clock as of the kernel's last tick, in nanoseconds: a few milliseconds behind,
/// read from memory the kernel shares (no time-stamp counter read or scaling).
fn coarse_nanos() -> i64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    now.tv_sec * 1_000_000_000 + now.tv_nsec
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads of 4 KiB in a window, `slow` of them over the target.
    fn pass_window(pacer: &WritePacer, reads: u64, slow: u64) {
        for _ in 0..slow {
            pacer.note_read(pacer.target * 2, 4096);
        }
        for _ in slow..reads {
            pacer.note_read(pacer.target / 2, 4096);
        }
        for start in [&pacer.window_start_nanos, &pacer.window_start_coarse_nanos] {
            start.fetch_sub(WINDOW.as_nanos() as i64, Ordering::Relaxed);
        }
    }

    #[test]
    fn slow_reads_limit_writes_down_to_the_floor_and_fast_ones_lift_the_limit() {
        let floor = 1 << 20;
        let pacer = WritePacer::new(Duration::from_millis(2), floor);
        assert_eq!(pacer.admit(1 << 20), None, "unlimited at first");
        pass_window(&pacer, 100, 0);
        assert_eq!(pacer.admit(1 << 20), None);
        assert_eq!(pacer.limit(), None, "fast reads set no limit");

        // Slow reads beside heavy writes: the limit starts below what was admitted, and falls
        // to the floor.
        for _ in 0..20 {
            pass_window(&pacer, 100, 5);
            pacer.admit(4 << 20);
        }
        assert_eq!(pacer.limit(), Some(floor));
        // At the floor, 1 MiB more waits about a second's share, capped per write.
        let delay = pacer.admit(1 << 20).expect("a limited write waits");
        assert!(delay <= DELAY_MAX && delay > Duration::ZERO, "{delay:?}");

        // Fast reads raise the limit, and lift it once writers do not reach it.
        for _ in 0..200 {
            pass_window(&pacer, 100, 0);
            pacer.admit(1);
            if pacer.limit().is_none() {
                break;
            }
        }
        assert_eq!(pacer.limit(), None);
        assert_eq!(pacer.admit(1 << 20), None);
    }

    #[test]
    fn one_slow_read_in_a_hundred_or_too_few_reads_change_nothing() {
        let pacer = WritePacer::new(Duration::from_millis(2), 1 << 20);
        pacer.admit(8 << 20);
        pass_window(&pacer, 100, 1);
        pacer.admit(1);
        assert_eq!(pacer.limit(), None);
        pass_window(&pacer, 10, 10);
        pacer.admit(8 << 20);
        assert_eq!(pacer.limit(), None, "ten reads are too few to judge");
        pass_window(&pacer, 100, 2);
        pacer.admit(8 << 20);
        assert!(pacer.limit().is_some());
    }

    #[test]
    fn slow_reads_limit_writes_only_while_writes_take_their_share_of_the_device() {
        let pacer = WritePacer::new(Duration::from_millis(2), 1 << 20);
        // 100 reads of 4 KiB against 64 KiB of writes: reads' own queueing, writes go on.
        for _ in 0..5 {
            pacer.admit(64 << 10);
            pass_window(&pacer, 100, 50);
        }
        pacer.admit(64 << 10);
        assert_eq!(pacer.limit(), None, "writes were 14% of the bytes");
        // The same slow reads beside 1 MiB of writes (72%): writes are slowed.
        pacer.admit(1 << 20);
        pass_window(&pacer, 100, 50);
        pacer.admit(1);
        assert!(pacer.limit().is_some());
    }

    #[test]
    fn a_thread_that_reads_is_never_paced() {
        let pacer = WritePacer::new(Duration::from_millis(2), 1 << 20);
        for _ in 0..20 {
            pass_window(&pacer, 100, 50);
            pacer.admit(4 << 20);
        }
        assert_eq!(pacer.limit(), Some(1 << 20));
        let paced = || {
            pacer.admit(1 << 20);
            pacer.admit(1 << 20).is_some()
        };
        assert!(std::thread::scope(|scope| scope
            .spawn(paced)
            .join()
            .unwrap()));
        pacer.note_reader();
        assert!(!paced(), "this thread reads");
        // Two windows without a read: a writer again.
        pacer.window.fetch_add(2, Ordering::Relaxed);
        assert!(paced());
    }

    #[test]
    fn a_zero_target_turns_pacing_off() {
        let pacer = WritePacer::new(Duration::ZERO, 1);
        for _ in 0..10 {
            pass_window(&pacer, 100, 100);
            assert_eq!(pacer.admit(1 << 30), None);
        }
        assert_eq!(pacer.limit(), None);
    }
}
