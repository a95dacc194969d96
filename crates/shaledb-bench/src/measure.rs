//! Measurement: per-operation latency histograms, a per-second throughput timeline, the
//! process's device bytes, CPU time and peak RSS, and a quick probe of the device's random-read
//! IOPS. Every engine is measured the same way, from outside.

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An operation type, named as YCSB names it in its reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
    Write,
}

impl OpKind {
    pub fn ycsb_name(self) -> &'static str {
        match self {
            OpKind::Read => "READ",
            OpKind::Update => "UPDATE",
            OpKind::Insert => "INSERT",
            OpKind::Scan => "SCAN",
            OpKind::ReadModifyWrite => "READ-MODIFY-WRITE",
            OpKind::Write => "WRITE",
        }
    }
}

/// Highest latency a histogram tracks: one minute, in microseconds.
const LATENCY_US_MAX: u64 = 60_000_000;

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid histogram bounds")
}

/// Latency histograms per operation type, in microseconds. One per thread, merged at the end.
#[derive(Default)]
pub struct Recorder {
    histograms: BTreeMap<OpKind, Histogram<u64>>,
}

impl Recorder {
    pub fn record(&mut self, kind: OpKind, latency: Duration) {
        let micros = (latency.as_micros() as u64).clamp(1, LATENCY_US_MAX);
        self.histograms
            .entry(kind)
            .or_insert_with(new_histogram)
            .record(micros)
            .expect("clamped into range");
    }

    pub fn merge(&mut self, other: &Recorder) {
        for (kind, histogram) in &other.histograms {
            self.histograms
                .entry(*kind)
                .or_insert_with(new_histogram)
                .add(histogram)
                .expect("same bounds");
        }
    }

    pub fn count(&self, kind: OpKind) -> u64 {
        self.histograms.get(&kind).map_or(0, Histogram::len)
    }

    pub fn summaries(&self) -> BTreeMap<OpKind, LatencySummary> {
        self.histograms
            .iter()
            .map(|(kind, histogram)| (*kind, LatencySummary::of(histogram)))
            .collect()
    }
}

/// Latency figures of one operation type, in microseconds.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub avg: f64,
    pub min: u64,
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
}

impl LatencySummary {
    fn of(histogram: &Histogram<u64>) -> Self {
        LatencySummary {
            count: histogram.len(),
            avg: histogram.mean(),
            min: histogram.min(),
            p50: histogram.value_at_quantile(0.50),
            p95: histogram.value_at_quantile(0.95),
            p99: histogram.value_at_quantile(0.99),
            p999: histogram.value_at_quantile(0.999),
            p9999: histogram.value_at_quantile(0.9999),
            max: histogram.max(),
        }
    }
}

/// Process-wide counters read from the kernel: identical for every engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessCounters {
    /// Bytes this process caused to be read from / sent to the block layer (`/proc/self/io`).
    /// Written bytes are net of `cancelled_write_bytes`: page-cache data the process wrote and
    /// then truncated or deleted before writeback never reached the device (RocksDB's deleted
    /// WAL and compaction inputs, for instance), so counting it would overstate that engine's
    /// write amplification.
    pub device_bytes_read: u64,
    pub device_bytes_written: u64,
    pub cpu_seconds: f64,
}

impl ProcessCounters {
    pub fn now() -> Self {
        let io = std::fs::read_to_string("/proc/self/io")
            .expect("the harness measures device bytes from /proc/self/io (Linux)");
        let (device_bytes_read, device_bytes_written) = device_bytes(&io);
        ProcessCounters {
            device_bytes_read,
            device_bytes_written,
            cpu_seconds: cpu_seconds(),
        }
    }

    pub fn since(&self, earlier: &ProcessCounters) -> ProcessCounters {
        ProcessCounters {
            device_bytes_read: self
                .device_bytes_read
                .saturating_sub(earlier.device_bytes_read),
            device_bytes_written: self
                .device_bytes_written
                .saturating_sub(earlier.device_bytes_written),
            cpu_seconds: self.cpu_seconds - earlier.cpu_seconds,
        }
    }
}

/// Bytes read from and written to the block layer according to `/proc/self/io`'s text: reads
/// are `read_bytes`, writes `write_bytes` less `cancelled_write_bytes`.
fn device_bytes(io: &str) -> (u64, u64) {
    let field = |name: &str| {
        io.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("/proc/self/io has no {name} field"))
    };
    let written = field("write_bytes:").saturating_sub(field("cancelled_write_bytes:"));
    (field("read_bytes:"), written)
}

fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a complete rusage into the pointer it is given, which points at
    // memory of the right size and alignment; it cannot fail for RUSAGE_SELF.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// How the process's allocator returns freed memory, when it is not glibc's malloc (set once, by
/// the binary that chose the allocator).
static FREED_MEMORY_RELEASE: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Makes [`release_freed_memory`] call `release` instead of glibc's `malloc_trim`.
pub fn set_freed_memory_release(release: fn()) {
    // A second call names the same allocator's function: keeping the first loses nothing.
    let _ = FREED_MEMORY_RELEASE.set(release);
}

/// Returns memory the allocator holds but nothing uses to the kernel, so that the RSS before an
/// engine opens is the harness's own and what an engine closed before left behind does not count
/// for (or hide the growth of) the next one: all engines run in this one process.
pub fn release_freed_memory() {
    if let Some(release) = FREED_MEMORY_RELEASE.get() {
        release();
        return;
    }
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free memory of glibc's arenas to the kernel; it touches
    // no memory in use and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Resident set size of this process, in bytes.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// Counts completed operations and samples them once a second, with the peak RSS.
pub struct Monitor {
    pub completed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(Vec<u64>, u64)>>,
}

impl Monitor {
    pub fn start() -> Self {
        let completed = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (completed, stop) = (completed.clone(), stop.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let (mut timeline, mut last, mut peak_rss) = (Vec::new(), 0, rss_bytes());
                let mut next_second = 1;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    peak_rss = peak_rss.max(rss_bytes());
                    if started.elapsed() >= Duration::from_secs(next_second) {
                        let now = completed.load(Ordering::Relaxed);
                        timeline.push(now - last);
                        last = now;
                        next_second += 1;
                    }
                }
                (timeline, peak_rss)
            })
        };
        Monitor {
            completed,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling; returns (operations completed in each whole second, peak RSS bytes).
    pub fn finish(mut self) -> (Vec<u64>, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("finished once")
            .join()
            .expect("monitor thread")
    }
}

/// Measures the device's 4 KiB random-read IOPS with `threads` concurrent O_DIRECT reads for
/// `duration`, on a probe file kept in `dir`. Returns reads per second.
pub fn probe_device(dir: &Path, threads: usize, duration: Duration) -> Result<f64> {
    const PROBE_FILE_BYTES: u64 = 256 << 20;
    const BLOCK_BYTES: usize = 4096;
    std::fs::create_dir_all(dir)?;
    let path = dir.join("device-probe.bin");
    if std::fs::metadata(&path).map(|meta| meta.len()).unwrap_or(0) != PROBE_FILE_BYTES {
        let chunk: Vec<u8> = (0..1 << 20).map(|index| (index * 7 % 251) as u8).collect();
        let file = std::fs::File::create(&path).context("creating the device probe file")?;
        for index in 0..PROBE_FILE_BYTES >> 20 {
            file.write_all_at(&chunk, index << 20)?;
        }
        file.sync_all()?;
    }
    let reads = AtomicU64::new(0);
    let deadline = Instant::now() + duration;
    let result: Result<()> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|seed| {
                let (path, reads) = (&path, &reads);
                scope.spawn(move || -> Result<()> {
                    let file = std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_DIRECT)
                        .open(path)
                        .context("opening the probe file with O_DIRECT")?;
                    // An over-allocated plain buffer with an aligned window: O_DIRECT needs the
                    // address aligned, and this needs no unsafe code.
                    let mut storage = vec![0u8; 2 * BLOCK_BYTES];
                    let start = storage.as_ptr().align_offset(BLOCK_BYTES);
                    let block = &mut storage[start..start + BLOCK_BYTES];
                    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ seed as u64;
                    let blocks = PROBE_FILE_BYTES / BLOCK_BYTES as u64;
                    while Instant::now() < deadline {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        file.read_exact_at(block, (state % blocks) * BLOCK_BYTES as u64)?;
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|worker| worker.join().expect("probe thread"))
    });
    result?;
    Ok(reads.load(Ordering::Relaxed) as f64 / duration.as_secs_f64())
}

/// Bytes of all files under `dir`.
pub fn disk_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_bytes(&entry.path()),
            Ok(meta) => {
                use std::os::unix::fs::MetadataExt;
                meta.blocks() * 512
            }
            Err(_) => 0,
        })
        .sum()
}

/// Shared state of a running phase: stop flag for duration-bound runs.
pub struct PhaseClock {
    pub started: Instant,
    pub deadline: Option<Instant>,
}

/// Which pass of a run's work: the untimed warm-up after the engine opened, or the timed one.
#[derive(Debug, Clone, Copy)]
pub enum Phase {
    WarmUp(Duration),
    Timed,
}

impl Phase {
    /// How long to run: the warm-up's length, or `timed` (None: the operation count).
    pub fn duration_or(self, timed: Option<Duration>) -> Option<Duration> {
        match self {
            Phase::WarmUp(duration) => Some(duration),
            Phase::Timed => timed,
        }
    }
}

/// A measured piece of work on one open engine.
pub struct Measured {
    pub recorder: Recorder,
    pub elapsed: Duration,
    /// What the throughput counts: the operations run (a read-modify-write is one, though its
    /// read and write are also timed apart), or the unit a benchmark reports instead.
    pub operations: u64,
}

/// Runs `threads` workers; each calls `op(thread, index, recorder)` for its share of
/// `operations` (or until `duration` ends), paced to `target_ops_per_sec` across all threads
/// when given. Latency is measured from each operation's intended start time when paced, so a
/// stalled engine cannot hide queueing delay (no coordinated omission).
pub fn run_phase<F>(
    threads: usize,
    operations: u64,
    duration: Option<Duration>,
    target_ops_per_sec: Option<f64>,
    monitor: &Monitor,
    op: F,
) -> Result<Measured>
where
    F: Fn(usize, u64, &mut Recorder) -> Result<OpKind> + Sync,
{
    let threads = threads.max(1);
    let started = Instant::now();
    let deadline = duration.map(|duration| started + duration);
    let merged = Mutex::new(Recorder::default());
    let ran = AtomicU64::new(0);
    let result: Result<()> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let (op, merged, completed, ran) = (&op, &merged, &monitor.completed, &ran);
                scope.spawn(move || -> Result<()> {
                    let share = operations / threads as u64
                        + u64::from((thread as u64) < operations % threads as u64);
                    let interval = target_ops_per_sec
                        .map(|target| Duration::from_secs_f64(threads as f64 / target));
                    let mut recorder = Recorder::default();
                    let mut index = 0u64;
                    while (duration.is_some() || index < share)
                        && deadline.is_none_or(|end| Instant::now() < end)
                    {
                        let begin = match interval {
                            Some(interval) => {
                                let intended = started + interval.mul_f64(index as f64);
                                if let Some(wait) = intended.checked_duration_since(Instant::now())
                                {
                                    std::thread::sleep(wait);
                                }
                                intended
                            }
                            None => Instant::now(),
                        };
                        let kind = op(thread, index, &mut recorder)?;
                        recorder.record(kind, begin.elapsed());
                        completed.fetch_add(1, Ordering::Relaxed);
                        index += 1;
                    }
                    merged.lock().expect("recorder lock").merge(&recorder);
                    ran.fetch_add(index, Ordering::Relaxed);
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|worker| worker.join().expect("worker thread panicked"))
    });
    result?;
    Ok(Measured {
        elapsed: started.elapsed(),
        recorder: merged.into_inner().expect("recorder lock"),
        operations: ran.into_inner(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_writes_are_net_of_cancelled_writes() {
        let io = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\n\
                  write_bytes: 1048576\ncancelled_write_bytes: 65536\n";
        assert_eq!(device_bytes(io), (4096, 1048576 - 65536));
    }

    #[test]
    fn percentiles_match_a_known_distribution() {
        let mut recorder = Recorder::default();
        for micros in 1..=10_000u64 {
            recorder.record(OpKind::Read, Duration::from_micros(micros));
        }
        let summary = &recorder.summaries()[&OpKind::Read];
        assert_eq!(summary.count, 10_000);
        assert!((summary.avg - 5000.5).abs() < 5.0);
        for (value, expected) in [
            (summary.p50, 5000),
            (summary.p99, 9900),
            (summary.p999, 9990),
            (summary.max, 10_000),
        ] {
            assert!(
                (value as f64 - expected as f64).abs() <= expected as f64 * 0.002,
                "{value} vs {expected}"
            );
        }
    }

    #[test]
    fn paced_phase_runs_at_the_target_and_counts_everything() {
        let monitor = Monitor::start();
        // Two kinds of operation: the throughput counts all 200, not the larger kind's 100.
        let measured = run_phase(2, 200, None, Some(1000.0), &monitor, |_, index, _| {
            Ok(if index % 2 == 0 {
                OpKind::Read
            } else {
                OpKind::Update
            })
        })
        .unwrap();
        let (timeline, peak_rss) = monitor.finish();
        let (recorder, elapsed) = (measured.recorder, measured.elapsed);
        assert_eq!(measured.operations, 200);
        assert_eq!(recorder.count(OpKind::Read), 100);
        assert_eq!(recorder.count(OpKind::Update), 100);
        assert!(
            elapsed >= Duration::from_millis(190),
            "200 ops at 1000/s take ~0.2 s: {elapsed:?}"
        );
        assert!(timeline.len() <= 1);
        assert!(peak_rss > 0);
    }

    #[test]
    fn written_bytes_show_up_in_the_process_counters() {
        let dir = tempfile::tempdir().unwrap();
        let before = ProcessCounters::now();
        std::fs::write(dir.path().join("data"), vec![1u8; 1 << 20]).unwrap();
        std::fs::File::open(dir.path().join("data"))
            .unwrap()
            .sync_all()
            .unwrap();
        let delta = ProcessCounters::now().since(&before);
        assert!(delta.device_bytes_written >= 1 << 20, "{delta:?}");
    }
}
