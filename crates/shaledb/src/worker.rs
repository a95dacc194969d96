//! Background workers: the flusher (writes full chunks, and fdatasyncs on the durability
//! interval), maintenance (cleaner steps, sorting within its byte rate, periodic checkpoints
//! and saves of the warm-keys file), and the warming of the value cache after an open. A panic
//! or error in a worker poisons the KVDB rather than leaving it silently degraded.

use crate::checkpointer::Checkpointer;
use crate::error::{Error, Result};
use crate::gc::Cleaner;
use crate::media::MediaClass;
use crate::options::Durability;
use crate::poison::Poison;
use crate::segment::HeadKind;
use crate::sorter::Sorter;
use crate::store::Store;
use crate::warmer::Warmer;
use parking_lot::{Condvar, Mutex};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often maintenance looks for cleaning and checkpoint work.
const MAINTENANCE_PERIOD: Duration = Duration::from_millis(100);
/// Most segments cleaned per maintenance round, so stopping stays prompt.
const CLEAN_STEPS_PER_ROUND: usize = 8;
/// How often the flusher tells the manifest how far the active segments are durable: after a
/// crash, only what was synced in the last such period can be taken for a torn write.
const DURABLE_POINTS_PERIOD: Duration = Duration::from_millis(100);
/// Longest the flusher sleeps without durability work, so it notices stop promptly.
const FLUSHER_IDLE: Duration = Duration::from_millis(50);

#[derive(Default)]
struct StopSignal {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl StopSignal {
    /// Sleeps up to `period`; returns true once stop was requested.
    fn sleep(&self, period: Duration) -> bool {
        let mut stopped = self.stopped.lock();
        if !*stopped {
            self.wake.wait_for(&mut stopped, period);
        }
        *stopped
    }

    fn is_stopped(&self) -> bool {
        *self.stopped.lock()
    }
}

/// What the workers are handed: the store and the jobs they run on it.
pub struct Jobs {
    pub store: Arc<Store>,
    pub cleaner: Arc<Cleaner>,
    pub sorter: Arc<Sorter>,
    pub checkpointer: Arc<Checkpointer>,
    pub durability: Durability,
    /// Run the cleaner in the background (`Options::cleaner`).
    pub clean: bool,
    /// Most bytes per second the sorter rewrites (`Options::sort_bytes_per_sec`; 0: never).
    pub sort_bytes_per_sec: u64,
    /// The capacity class's directory, whose free space bounds the space budget.
    pub capacity_dir: PathBuf,
    /// Saves the keys the value cache holds, for the next open.
    pub warmer: Arc<Warmer>,
}

pub struct Workers {
    stop: Arc<StopSignal>,
    store: Arc<Store>,
    handles: Vec<JoinHandle<()>>,
}

fn guarded(poison: &Poison, name: &str, work: impl FnOnce() -> Result<()>) {
    match std::panic::catch_unwind(AssertUnwindSafe(work)) {
        Ok(Ok(())) => {}
        Ok(Err(Error::Poisoned(_))) => {}
        Ok(Err(error)) => {
            tracing::error!(worker = name, %error, "background work failed; will retry")
        }
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            poison.set(format!("the {name} worker panicked: {message}"));
        }
    }
}

impl Workers {
    pub fn start(jobs: Jobs) -> Result<Self> {
        let jobs = Arc::new(jobs);
        let stop = Arc::new(StopSignal::default());
        let spawn = |name: &str, body: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(format!("shaledb-{name}"))
                .spawn(body)
                .map_err(|error| Error::io(format!("start the {name} thread"), error))
        };
        let flusher = {
            let (jobs, stop) = (jobs.clone(), stop.clone());
            spawn("flusher", Box::new(move || run_flusher(&jobs, &stop)))?
        };
        let maintenance = {
            let (jobs, stop) = (jobs.clone(), stop.clone());
            spawn(
                "maintenance",
                Box::new(move || run_maintenance(&jobs, &stop)),
            )?
        };
        Ok(Workers {
            stop,
            store: jobs.store.clone(),
            handles: vec![flusher, maintenance],
        })
    }

    /// Stops the workers and waits for them.
    pub fn stop(self) {
        *self.stop.stopped.lock() = true;
        self.stop.wake.notify_all();
        self.store
            .heads
            .at(MediaClass::Capacity, HeadKind::Client)
            .wake_flusher();
        for handle in self.handles {
            let _ = handle.join();
        }
    }
}

/// The thread that warms the value cache after an open ([`Warmer::warm`]); it ends by itself
/// once warming is done. Read-only opens warm too: warming only reads.
pub struct Warming {
    stop: Arc<StopSignal>,
    handle: JoinHandle<()>,
}

impl Warming {
    pub fn start(warmer: Arc<Warmer>, poison: Arc<Poison>) -> Result<Self> {
        let stop = Arc::new(StopSignal::default());
        let handle = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("shaledb-warming".into())
                .spawn(move || {
                    guarded(&poison, "warming", || {
                        warmer.warm(|period| stop.sleep(period));
                        Ok(())
                    })
                })
                .map_err(|error| Error::io("start the warming thread", error))?
        };
        Ok(Warming { stop, handle })
    }

    /// Stops the warming if it still runs, and waits for it.
    pub fn stop(self) {
        *self.stop.stopped.lock() = true;
        self.stop.wake.notify_all();
        let _ = self.handle.join();
    }
}

fn run_flusher(jobs: &Jobs, stop: &StopSignal) {
    let store = &jobs.store;
    let interval = match jobs.durability {
        Durability::Interval(period) => Some(period),
        Durability::Sync | Durability::None => None,
    };
    let mut last_sync = Instant::now();
    let mut last_durable_points = Instant::now();
    let capacity_client = store.heads.at(MediaClass::Capacity, HeadKind::Client);
    while !stop.is_stopped() {
        let until_sync = interval.map_or(FLUSHER_IDLE, |period| {
            period.saturating_sub(last_sync.elapsed())
        });
        // Woken by the capacity head's full chunks; the staging head is polled at FLUSHER_IDLE.
        capacity_client.wait_for_chunk(until_sync.min(FLUSHER_IDLE));
        guarded(&store.poison, "flusher", || {
            for head in store.heads.all() {
                head.retry_if_stalled()?;
            }
            for head in store.heads.clients() {
                head.flush_if_chunk_pending()?;
            }
            if let Some(period) = interval {
                if last_sync.elapsed() >= period {
                    last_sync = Instant::now();
                    for head in store.heads.clients() {
                        if head.has_undurable() {
                            head.flush(true)?;
                        }
                    }
                }
            }
            if last_durable_points.elapsed() >= DURABLE_POINTS_PERIOD {
                last_durable_points = Instant::now();
                store.heads.record_durable_points()?;
            }
            Ok(())
        });
    }
}

fn run_maintenance(jobs: &Jobs, stop: &StopSignal) {
    let store = &jobs.store;
    let refresh_space = || store.space.refresh(&store.segments, &jobs.capacity_dir);
    // Bytes the sorter may still rewrite: each round adds the rate's share, up to one round's
    // worth; a run (up to 1 MiB, sorted whole) may overdraw it, and the sorter then waits
    // until the rate has paid the overdraft back. So over any time the sorter rewrites at
    // most its rate's bytes plus one run.
    let sort_round_bytes = jobs.sort_bytes_per_sec as f64 * MAINTENANCE_PERIOD.as_secs_f64();
    let mut sort_allowance = 0.0_f64;
    let mut client_lsn = store.heads.client_appended_lsn();
    while !stop.sleep(MAINTENANCE_PERIOD) {
        // Whether clients wrote since the last round: then cleaning that can wait does.
        let lsn = store.heads.client_appended_lsn();
        let writing = std::mem::replace(&mut client_lsn, lsn) != lsn;
        guarded(&store.poison, "maintenance", || {
            refresh_space()?;
            if jobs.clean {
                // Under space pressure keep cleaning (writers are being slowed meanwhile);
                // otherwise a few steps per round.
                let mut steps = 0;
                while !stop.is_stopped()
                    && (steps < CLEAN_STEPS_PER_ROUND || store.space.under_pressure())
                {
                    if !jobs.cleaner.clean_step(writing)? {
                        break;
                    }
                    steps += 1;
                    if steps % CLEAN_STEPS_PER_ROUND == 0 {
                        refresh_space()?;
                    }
                }
            }
            if jobs.sort_bytes_per_sec > 0 && !stop.is_stopped() {
                sort_allowance = (sort_allowance + sort_round_bytes).min(sort_round_bytes);
                if sort_allowance > 0.0 {
                    let sorted = jobs.sorter.sort_step(sort_allowance.ceil() as u64)?;
                    sort_allowance -= sorted as f64;
                }
            }
            if jobs.checkpointer.is_due() {
                jobs.checkpointer.write()?;
            }
            jobs.warmer.save_if_due();
            Ok(())
        });
    }
}
