//! Background workers: the flusher (writes full chunks, and fdatasyncs on the durability
//! interval) and maintenance (cleaner steps and periodic checkpoints). A panic or error in a
//! worker poisons the KVDB rather than leaving it silently degraded.

use crate::db::Inner;
use crate::error::{Error, Result};
use crate::log::LogHead;
use crate::options::Durability;
use crate::segment::HeadKind;
use parking_lot::{Condvar, Mutex};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often maintenance looks for cleaning and checkpoint work.
const MAINTENANCE_PERIOD: Duration = Duration::from_millis(100);
/// Most segments cleaned per maintenance round, so stopping stays prompt.
const CLEAN_STEPS_PER_ROUND: usize = 8;
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

pub struct Workers {
    stop: Arc<StopSignal>,
    handles: Vec<JoinHandle<()>>,
}

fn guarded(inner: &Inner, name: &str, work: impl FnOnce() -> Result<()>) {
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
            inner
                .poison
                .set(format!("the {name} worker panicked: {message}"));
        }
    }
}

impl Workers {
    pub fn start(inner: &Arc<Inner>) -> Result<Self> {
        let stop = Arc::new(StopSignal::default());
        let spawn = |name: &str, body: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(format!("shaledb-{name}"))
                .spawn(body)
                .map_err(|error| Error::io(format!("start the {name} thread"), error))
        };
        let flusher = {
            let (inner, stop) = (inner.clone(), stop.clone());
            spawn("flusher", Box::new(move || run_flusher(&inner, &stop)))?
        };
        let maintenance = {
            let (inner, stop) = (inner.clone(), stop.clone());
            spawn(
                "maintenance",
                Box::new(move || run_maintenance(&inner, &stop)),
            )?
        };
        Ok(Workers {
            stop,
            handles: vec![flusher, maintenance],
        })
    }

    /// Stops the workers and waits for them.
    pub fn stop(self, inner: &Inner) {
        *self.stop.stopped.lock() = true;
        self.stop.wake.notify_all();
        inner
            .heads
            .at(crate::media::MediaClass::Capacity, HeadKind::Client)
            .wake_flusher();
        for handle in self.handles {
            let _ = handle.join();
        }
    }
}

fn run_flusher(inner: &Inner, stop: &StopSignal) {
    let interval = match inner.options.durability {
        Durability::Interval(period) => Some(period),
        Durability::Sync | Durability::None => None,
    };
    let mut last_sync = Instant::now();
    let capacity_client = inner
        .heads
        .at(crate::media::MediaClass::Capacity, HeadKind::Client);
    while !stop.is_stopped() {
        let until_sync = interval.map_or(FLUSHER_IDLE, |period| {
            period.saturating_sub(last_sync.elapsed())
        });
        // Woken by the capacity head's full chunks; the staging head is polled at FLUSHER_IDLE.
        capacity_client.wait_for_chunk(until_sync.min(FLUSHER_IDLE));
        guarded(inner, "flusher", || {
            for head in inner.heads.clients() {
                head.flush_if_chunk_pending()?;
            }
            if let Some(period) = interval {
                if last_sync.elapsed() >= period {
                    last_sync = Instant::now();
                    for head in inner.heads.clients() {
                        if head.has_undurable() {
                            head.flush(true)?;
                        }
                    }
                }
            }
            Ok(())
        });
    }
}

fn run_maintenance(inner: &Inner, stop: &StopSignal) {
    while !stop.sleep(MAINTENANCE_PERIOD) {
        guarded(inner, "maintenance", || {
            inner
                .space
                .refresh(&inner.segments, &inner.media.capacity_dir)?;
            if inner.options.cleaner {
                // Under space pressure keep cleaning (writers are being slowed meanwhile);
                // otherwise a few steps per round.
                let mut steps = 0;
                while !stop.is_stopped()
                    && (steps < CLEAN_STEPS_PER_ROUND || inner.space.under_pressure())
                {
                    if !crate::gc::clean_step(inner)? {
                        break;
                    }
                    steps += 1;
                    if steps % CLEAN_STEPS_PER_ROUND == 0 {
                        inner
                            .space
                            .refresh(&inner.segments, &inner.media.capacity_dir)?;
                    }
                }
            }
            let client_lsn: u64 = inner.heads.clients().map(LogHead::appended_lsn).sum();
            let since_checkpoint = client_lsn
                - inner
                    .checkpoint_lsn
                    .load(std::sync::atomic::Ordering::Relaxed);
            let last_checkpoint_bytes = inner
                .checkpoint_last_bytes
                .load(std::sync::atomic::Ordering::Relaxed);
            if crate::checkpoint::checkpoint_due(
                since_checkpoint,
                inner.options.checkpoint_interval_bytes,
                last_checkpoint_bytes,
            ) {
                inner.write_checkpoint()?;
            }
            Ok(())
        });
    }
}
