//! The network threads: one single-threaded tokio runtime each. Connections are numbered as
//! they are accepted, and connection `n` lives on thread `n % active`, where `active` (1 up to
//! `network_threads`) is the count that serves the most requests under the load of the moment:
//! every [`TICK`] the balancer counts the commands served and the reads they came in, whose
//! ratio is the load's [`Shape`] (pipelined or interactive). Each shape learns its own count by
//! probes (one thread more or fewer for a while, kept if it served at least
//! [`PROBE_GAIN_MIN`] times as many [`PROBE_WINS`] times in a row, or
//! [`PROBE_TO_ONE_KEPT_FROM`] times once for one thread instead of two) and gets it back as
//! soon as the load takes that shape again ([`Balancer`]). A pipelined load starts on every
//! thread; an interactive one starts on one and is probed at one more only while
//! [`IDLE_CORES_TO_GROW`] of the machine's cores sit idle (`cpu_idle.rs`). A load
//! that moves by more than [`STEADY_SPREAD_MAX`] is probed again a second later. A Redis
//! connection whose thread is no longer its place moves between two
//! pipelines (`connection.rs`); memcached's connections stay where they were placed.
//!
//! Why not a fixed count: on cores shared with the clients (two cores, redis-benchmark or YCSB
//! beside the server) two network threads sleep and wake per request, 60 times as many task
//! switches as one thread that always finds work (measured: 72,301 vs 1,189 in 3 s of HGETALL
//! from 16 clients), and serve 30-45% fewer requests; under 50 clients pipelining, one thread
//! is the bottleneck and two serve 25-60% more writes. Neither the threads' CPU time nor the
//! machine's idle time tells the cases apart (one thread is 93-98% busy in both): the commands
//! per read tell the loads apart, and the commands served which count suits each. Within the
//! interactive shape the idle cores do tell: a thread more only helps where it finds a core
//! the clients leave idle, and 100 ms probes on busy cores measure the move's wake more than
//! the count (YCSB's reads kept two threads, 10% slower). Details and numbers: docs/SERVER.md,
//! "Where commands run".
//!
//! It replaced one work-stealing runtime with a worker per core, which woke an idle worker
//! whenever another had tasks queued.

use anyhow::{Context, Result};
use shaledb::ShardedCounter as Counter;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::{Builder, Handle};

use crate::cpu_idle::{CpuTimes, IdleSampler};

/// How often the balancer looks at what the last tick served: the commands and the reads
/// they came in (their ratio is the load's [`Shape`]).
const TICK: Duration = Duration::from_millis(50);
/// How long connections are given to move after the count changed, before a tick is counted.
const SETTLE: Duration = Duration::from_millis(20);
/// Ticks of one count compared with as many of the next in a probe (100 ms each way).
const COMPARE_TICKS: u32 = 2;
/// Comparisons a probe of one thread more (or of one fewer than three or more) must win in a
/// row to be kept: the probe's ticks against those at the count before on either side of them,
/// again and again (before, probe, after = the next before, probe, ...), and it is undone at the
/// first comparison it loses. Why: 100 ms of a load whose clients share the cores (YCSB's JVM
/// beside the server) vary by 10-20% tick to tick, so one comparison kept a count that served
/// no more about one probe in four (measured, docs/SERVER.md "Where commands run": YCSB C at
/// 16 threads ran on two threads, 45,300 reads/s with a p99 of 1.5 ms, where one thread serves
/// 49,100 at 0.87 ms); three chance wins in a row are rare, and a count that truly serves more
/// wins every time. One thread instead of two is kept at its first win, as it is kept at a tie.
const PROBE_WINS: u32 = 3;
/// Ticks between two probes of another thread count under a shape already learned (1 s), after
/// a change of the load or of the count; each probe that confirms the count doubles it, up to
/// [`PROBE_EVERY_MAX`] (16 s): a losing probe serves its 100 ms at a worse count, slower and with
/// a longer tail, and a probe a second spent a tenth of a steady load's time so.
const PROBE_EVERY: u32 = 20;
const PROBE_EVERY_MAX: u32 = 320;
/// A probe of one thread more is kept when it served at least this many times the commands of
/// the ticks before.
const PROBE_GAIN_MIN: f64 = 1.05;
/// A probe of one thread instead of two is kept when it served at least this many times the
/// commands of the ticks before: one thread serving about as much is a gain of its own, with no
/// request woken across threads, so a shorter tail and more CPU left to the clients beside the
/// server. Measured (docs/SERVER.md, "Where commands run"): GET at pipeline 1 served 0.98 times
/// as much on one thread as on two, so it stayed on two threads, and SET, of the same shape, then
/// ran there at 0.73 times what one thread serves. Only for this step: from more threads a tie
/// would walk a load that scales weakly down the counts a few percent at a time, and a load
/// below what one thread serves (a tie at every count) onto one thread of many.
const PROBE_TO_ONE_KEPT_FROM: f64 = 0.97;
/// A probe's baseline is ticks whose commands are within this factor of each other.
const STEADY_SPREAD_MAX: f64 = 1.25;
/// Fewer commands per tick than this is no load to compare or shape under.
const LOAD_MIN: u64 = 500;
/// Cores that must have sat idle, on average since the count was last chosen, for an
/// interactive load to be probed at one thread more. Each command of an interactive load is a
/// wake-up of its network thread and of its client: a thread more on cores the clients keep
/// busy only takes CPU from the clients that send the load, and adds wake-ups (measured,
/// docs/SERVER.md "Where commands run": YCSB C at 16 threads, 16 us of server CPU per read on
/// two threads against 13 on one, 10% fewer reads, p99 1.5 ms against 0.87). Probes cannot
/// see that in 100 ms: a count just left serves less for a while after the move. A pipelined
/// load's commands are the work, and more threads run more of them even on busy cores.
const IDLE_CORES_TO_GROW: f64 = 0.5;
/// Ticks between two samples of the machine's idle cores (`cpu_idle`): the kernel writes all of
/// `/proc/stat` for each read, every interrupt's count on every core, more than a tick's worth
/// to ask for on a large machine.
const IDLE_SAMPLE_TICKS: u64 = 10;
/// Commands per read from which a load counts as pipelined, and below which it counts as
/// interactive again (apart, so a load in between keeps the shape it has).
const PIPELINED_FROM: u64 = 4;
const INTERACTIVE_BELOW: u64 = 2;

/// How many network threads serve connections now; shared with INFO.
#[derive(Debug)]
pub struct Balance {
    /// The network threads started (`network_threads`).
    pub count: usize,
    /// Threads connections are placed on: 1..=count.
    pub active: AtomicUsize,
    /// Connections moved to another thread so far.
    pub moves: AtomicU64,
    /// Reads that brought requests, on every thread (commands per read: the load's shape).
    reads: Counter,
    /// The shape of the load the balancer placed the connections for (INFO), as
    /// `Shape as u8`, or [`NO_SHAPE`] before any load.
    shape: AtomicU8,
}

const NO_SHAPE: u8 = u8::MAX;

impl Balance {
    pub fn new(count: usize) -> Balance {
        let count = count.max(1);
        Balance {
            count,
            active: AtomicUsize::new(count),
            moves: AtomicU64::new(0),
            reads: Counter::default(),
            shape: AtomicU8::new(NO_SHAPE),
        }
    }

    /// Counts a read of a connection that brought requests.
    pub fn count_read(&self) {
        self.reads.add(1);
    }

    /// The shape of the load the threads are placed for (one thread or more): `pipelined`,
    /// `interactive`, or `none` before any load.
    pub fn shape_name(&self) -> &'static str {
        match self.shape.load(Ordering::Relaxed) {
            shape if shape == Shape::Pipelined as u8 => "pipelined",
            shape if shape == Shape::Interactive as u8 => "interactive",
            _ => "none",
        }
    }

    /// Whether one network thread serves every connection now (those still elsewhere move to
    /// it at their next read).
    pub fn is_single(&self) -> bool {
        self.active.load(Ordering::Relaxed) <= 1
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
                // Under `sync` the waits of a turn's connections are synced together when the
                // thread runs out of work (syncer.rs).
                .on_thread_park(crate::syncer::sync_idle_thread)
                .build()
                .context("starting a network thread's runtime")?;
            runtimes.push(runtime.handle().clone());
            std::thread::Builder::new()
                .name("shale-serve".into())
                .spawn(move || {
                    crate::syncer::syncs_when_idle();
                    runtime.block_on(std::future::pending::<()>())
                })
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

    /// Places the connections on as many threads as serve the most commands (`Balancer`),
    /// from what `served` (the commands served so far), the reads counted and `accepted` (the
    /// connections accepted so far) tell every tick.
    pub async fn run_balancer(
        self: Arc<Self>,
        served: impl Fn() -> u64,
        accepted: impl Fn() -> u64,
    ) {
        let balance = &self.balance;
        let mut balancer = Balancer::new(balance.count);
        let totals = || Tick {
            commands: served(),
            reads: balance.reads.get(),
            accepted: accepted(),
            idle_cores: None,
        };
        // With one thread there is no count to choose, and no idle time to sample.
        let samples_idle = balance.count > 1;
        let mut idle_sampler = IdleSampler::default();
        if samples_idle {
            idle_sampler.sample(CpuTimes::now());
        }
        for ticks in 1u64.. {
            let (before, started) = (totals(), Instant::now());
            tokio::time::sleep(TICK).await;
            // Counts of one tick's length: a tick the runtime woke late for would otherwise
            // serve more and pass for a better count.
            let mut tick = totals().since(before).per(TICK, started.elapsed());
            if samples_idle && ticks % IDLE_SAMPLE_TICKS == 0 {
                tick.idle_cores = idle_sampler.sample(CpuTimes::now());
            }
            let active = balancer.tick(tick);
            if let Some(shape) = balancer.shape {
                balance.shape.store(shape as u8, Ordering::Relaxed);
            }
            if balance.active.swap(active, Ordering::Relaxed) != active {
                tracing::debug!(
                    active,
                    shape = balance.shape_name(),
                    "network threads placed"
                );
                tokio::time::sleep(SETTLE).await;
            }
        }
    }
}

/// What the network threads did in a tick (or since they started).
#[derive(Clone, Copy, Debug, Default)]
struct Tick {
    commands: u64,
    /// Reads of requests the commands came in.
    reads: u64,
    /// Connections accepted.
    accepted: u64,
    /// The machine's cores idle on average since the last sample, on the ticks that take one
    /// (every [`IDLE_SAMPLE_TICKS`], where the kernel tells: `cpu_idle`).
    idle_cores: Option<f64>,
}

impl Tick {
    /// These counts, served over `elapsed`, as over `nominal`.
    fn per(self, nominal: Duration, elapsed: Duration) -> Tick {
        let scale = |count: u64| {
            let scaled = u128::from(count) * nominal.as_nanos() / elapsed.as_nanos().max(1);
            u64::try_from(scaled).unwrap_or(u64::MAX)
        };
        Tick {
            commands: scale(self.commands),
            reads: scale(self.reads),
            ..self
        }
    }

    fn since(self, before: Tick) -> Tick {
        Tick {
            commands: self.commands.saturating_sub(before.commands),
            reads: self.reads.saturating_sub(before.reads),
            accepted: self.accepted.saturating_sub(before.accepted),
            idle_cores: self.idle_cores,
        }
    }
}

/// How a load comes: many commands per read (pipelines: the commands are the work, and more
/// threads run more of them) or about one (each command a read, a reply and a wake-up of its
/// thread: on cores shared with the clients, fewer threads waking less often serve more).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Interactive = 0,
    Pipelined = 1,
}

impl Shape {
    /// The count a shape not seen yet starts on, of `count` threads: an interactive load on one
    /// (the fewest wake-ups, and more only where cores sit idle: [`IDLE_CORES_TO_GROW`]), a
    /// pipelined one on every thread.
    fn first_count(self, count: usize) -> usize {
        match self {
            Shape::Interactive => 1,
            Shape::Pipelined => count,
        }
    }

    /// The shape of `commands` that came in `reads`, from the shape before (`last`): a load
    /// between the two bounds keeps it.
    fn of(commands: u64, reads: u64, last: Option<Shape>) -> Shape {
        if reads == 0 {
            // Commands without a read (blocked clients served after a write): no shape to see.
            return last.unwrap_or(Shape::Interactive);
        }
        if commands >= PIPELINED_FROM * reads {
            Shape::Pipelined
        } else if commands < INTERACTIVE_BELOW * reads {
            Shape::Interactive
        } else {
            last.unwrap_or(Shape::Interactive)
        }
    }
}

/// The machine's idle cores over the samples of some ticks: their mean, unknown without one.
#[derive(Debug, Default)]
struct IdleCores {
    sum: f64,
    samples: u32,
}

impl IdleCores {
    /// Adds a tick's sample, if it took one.
    fn add(&mut self, idle_cores: Option<f64>) {
        if let Some(cores) = idle_cores {
            self.sum += cores;
            self.samples += 1;
        }
    }

    /// Whether at least `cores` sat idle on average; unknown counts as idle (no gate where the
    /// machine's times cannot be read).
    fn at_least(&self, cores: f64) -> bool {
        self.samples == 0 || self.sum >= cores * f64::from(self.samples)
    }
}

/// What the balancer is doing between two ticks.
#[derive(Debug)]
enum Phase {
    /// Running at the count chosen: `until_probe` more ticks before the next probe, with the
    /// commands of the last ticks at this count (the next probe's baseline) and of the first
    /// (`level`: the load the count serves, to see it move), and the machine's idle cores
    /// over its ticks.
    Steady {
        until_probe: u32,
        recent: Vec<u64>,
        level: Option<u64>,
        idle: IdleCores,
    },
    /// Counting what the probe's count serves, against `before` served by `previous` threads,
    /// after `wins` comparisons won in a row.
    Probing {
        previous: usize,
        before: u64,
        during: Vec<u64>,
        wins: u32,
    },
    /// Back at `previous` threads after a probe at `probe` that served `served`, more than
    /// `before`: counting what `previous` serves after the probe too, so that a load rising
    /// over the probe (whose ticks would all beat the ones before) is not credited to it.
    Confirming {
        previous: usize,
        probe: usize,
        before: u64,
        served: u64,
        after: Vec<u64>,
        wins: u32,
    },
}

/// Chooses how many network threads serve, tick by tick, from the commands served and the reads
/// they came in. Every load shape learns its own count: a shape seen before gets its count back
/// at the first tick it is seen again (a benchmark's pipelined phase after its interactive one,
/// or a batch job beside interactive clients), a shape not seen yet starts on every thread and
/// is probed as soon as its load is steady; then every `PROBE_EVERY` ticks or more a probe
/// tries one thread more or fewer for `COMPARE_TICKS` ticks, and keeps that count only if it
/// served at least `PROBE_GAIN_MIN` times (`PROBE_TO_ONE_KEPT_FROM` times for one thread instead
/// of two) the mean of the ticks before and after it (at the count it probed from). A load that
/// moved by more than `STEADY_SPREAD_MAX` since its count was chosen is probed again a second
/// later (a surge of connections already open looks like no client arriving). Until
/// 2026-11-28 the balancer probed only once a second whatever the load did, so a load that
/// changed shape ran up to a second on the count of the load before
/// (measured in docs/SERVER.md, "Where commands run").
#[derive(Debug)]
struct Balancer {
    count: usize,
    active: usize,
    shape: Option<Shape>,
    /// The count each shape (by `Shape as usize`) served the most with when last probed.
    learned: [Option<usize>; 2],
    /// Ticks from a shape's last probe to its next: longer each time a probe confirms the count.
    probe_every: [u32; 2],
    phase: Phase,
    /// Where both are possible, whether the next probe tries one thread more.
    grow_next: bool,
}

impl Balancer {
    fn new(count: usize) -> Balancer {
        Balancer {
            count,
            active: count,
            shape: None,
            learned: [None; 2],
            probe_every: [PROBE_EVERY; 2],
            phase: Phase::Steady {
                until_probe: 0,
                recent: Vec::new(),
                level: None,
                idle: IdleCores::default(),
            },
            grow_next: false,
        }
    }

    /// The count to serve with from now, given what the last tick served at the current one.
    fn tick(&mut self, tick: Tick) -> usize {
        let commands = tick.commands;
        if commands >= LOAD_MIN {
            let shape = Shape::of(commands, tick.reads, self.shape);
            if self.shape != Some(shape) {
                self.shape = Some(shape);
                let learned = self.learned[shape as usize];
                self.active = learned.unwrap_or(shape.first_count(self.count));
                self.probe_every[shape as usize] = PROBE_EVERY;
                // A pipelined load not seen yet is probed at once, off every thread; an
                // interactive one after a second on its one thread, its idle cores sampled.
                let probe_now = learned.is_none() && shape == Shape::Pipelined;
                self.steady(if probe_now { 0 } else { PROBE_EVERY });
                return self.active;
            }
        }
        let Some(shape) = self
            .shape
            .filter(|_| commands >= LOAD_MIN && tick.accepted == 0)
        else {
            // No load to learn from, or clients arriving (a benchmark's next test, a pool
            // growing): the load of this tick is not the one before it. A probe under way is
            // abandoned (its count undone, tried again once the load is steady), and the
            // baseline starts over; new clients may want another count, soon probed.
            let arriving = tick.accepted > 0;
            if let Some(shape) = self.shape.filter(|_| arriving) {
                self.probe_every[shape as usize] = PROBE_EVERY;
            }
            match &mut self.phase {
                Phase::Probing { previous, .. } | Phase::Confirming { previous, .. } => {
                    self.active = *previous;
                    let wait = self
                        .shape
                        .map_or(PROBE_EVERY, |shape| self.probe_every[shape as usize]);
                    self.steady(wait);
                }
                Phase::Steady {
                    until_probe,
                    recent,
                    ..
                } => {
                    recent.clear();
                    if arriving {
                        *until_probe = (*until_probe).min(PROBE_EVERY);
                    }
                }
            }
            return self.active;
        };
        match &mut self.phase {
            Phase::Steady {
                until_probe,
                recent,
                level,
                idle,
            } => {
                idle.add(tick.idle_cores);
                recent.push(commands);
                if recent.len() > COMPARE_TICKS as usize {
                    recent.remove(0);
                }
                // A load that moved by more than a baseline's spread since this count was
                // chosen (connections already open sending more, or less) is a new load, probed
                // again a second later, however long this count was confirmed. Compared over
                // a baseline's ticks, whose sum varies less than one tick of a noisy load.
                if recent.len() == COMPARE_TICKS as usize {
                    let now = recent.iter().sum();
                    match *level {
                        Some(at) if !is_steady(&[at, now]) => {
                            *level = Some(now);
                            self.probe_every[shape as usize] = PROBE_EVERY;
                            *until_probe = (*until_probe).min(PROBE_EVERY);
                        }
                        Some(_) => {}
                        None => *level = Some(now),
                    }
                }
                if *until_probe > 0 {
                    *until_probe -= 1;
                    return self.active;
                }
                // A baseline whose ticks differ is a load changing (a benchmark's next test,
                // clients coming or going): a probe against it would credit the count with the
                // change.
                if recent.len() < COMPARE_TICKS as usize || !is_steady(recent) {
                    return self.active;
                }
                let before = recent.iter().sum();
                let may_grow = shape == Shape::Pipelined || idle.at_least(IDLE_CORES_TO_GROW);
                let Some(probe) = probe_target(self.active, self.count, self.grow_next, may_grow)
                else {
                    self.learned[shape as usize] = Some(self.active);
                    self.steady(PROBE_EVERY_MAX);
                    return self.active;
                };
                self.grow_next = !self.grow_next;
                self.phase = Phase::Probing {
                    previous: self.active,
                    before,
                    during: Vec::new(),
                    wins: 0,
                };
                self.active = probe;
            }
            Phase::Probing {
                previous,
                before,
                during,
                wins,
            } => {
                let Some(served) = compared(during, commands) else {
                    return self.active;
                };
                if served as f64 >= *before as f64 * bar(*previous, self.active).ratio {
                    let previous = *previous;
                    self.phase = Phase::Confirming {
                        previous,
                        probe: self.active,
                        before: *before,
                        served,
                        after: Vec::new(),
                        wins: *wins,
                    };
                    self.active = previous;
                    return self.active;
                }
                tracing::debug!(
                    previous,
                    probe = self.active,
                    before,
                    served,
                    wins,
                    "network threads probed"
                );
                self.active = *previous;
                self.decide(shape, false);
            }
            Phase::Confirming {
                previous,
                probe,
                before,
                served,
                after,
                wins,
            } => {
                let Some(after) = compared(after, commands) else {
                    return self.active;
                };
                let baseline = (*before + after) as f64 / 2.0;
                let bar = bar(*previous, *probe);
                let won = *served as f64 >= baseline * bar.ratio;
                let wins = *wins + u32::from(won);
                tracing::debug!(
                    previous,
                    probe,
                    before,
                    served,
                    after,
                    wins,
                    "network threads probed"
                );
                if won && wins < bar.wins {
                    // Again, against the ticks just counted at the count before.
                    let (previous, probe) = (*previous, *probe);
                    self.phase = Phase::Probing {
                        previous,
                        before: after,
                        during: Vec::new(),
                        wins,
                    };
                    self.active = probe;
                    return self.active;
                }
                if won {
                    self.active = *probe;
                }
                self.decide(shape, won);
            }
        }
        self.active
    }

    /// Learns the current count for `shape` after a probe (`changed`: the probe's count won),
    /// and waits for the next: a second after a change, twice as long as last time after a
    /// probe that confirmed the count.
    fn decide(&mut self, shape: Shape, changed: bool) {
        let every = &mut self.probe_every[shape as usize];
        *every = if changed {
            PROBE_EVERY
        } else {
            (*every * 2).min(PROBE_EVERY_MAX)
        };
        let until_probe = *every;
        self.learned[shape as usize] = Some(self.active);
        self.steady(until_probe);
    }

    /// Runs at the current count from now, probing after `until_probe` ticks at the earliest.
    fn steady(&mut self, until_probe: u32) {
        self.phase = Phase::Steady {
            until_probe,
            recent: Vec::new(),
            level: None,
            idle: IdleCores::default(),
        };
    }
}

/// What a probe at `probe` threads must do to be kept over `previous`: serve `ratio` times the
/// commands served at `previous` in `wins` comparisons in a row.
struct Bar {
    ratio: f64,
    wins: u32,
}

/// A little less than as many, once, for one thread instead of two; more, [`PROBE_WINS`] times
/// in a row, for any other step.
fn bar(previous: usize, probe: usize) -> Bar {
    if probe == 1 && previous == 2 {
        Bar {
            ratio: PROBE_TO_ONE_KEPT_FROM,
            wins: 1,
        }
    } else {
        Bar {
            ratio: PROBE_GAIN_MIN,
            wins: PROBE_WINS,
        }
    }
}

/// Adds a tick's `commands` to `ticks`: their sum once there are `COMPARE_TICKS` of them.
fn compared(ticks: &mut Vec<u64>, commands: u64) -> Option<u64> {
    ticks.push(commands);
    (ticks.len() >= COMPARE_TICKS as usize).then(|| ticks.iter().sum())
}

/// Whether the commands of `ticks` are within [`STEADY_SPREAD_MAX`] of each other.
fn is_steady(ticks: &[u64]) -> bool {
    let (least, most) = (ticks.iter().min(), ticks.iter().max());
    least
        .zip(most)
        .is_some_and(|(&least, &most)| most as f64 <= least as f64 * STEADY_SPREAD_MAX)
}

/// The thread count to try next from `active` (of `count`): one more (if `may_grow`) or one
/// fewer, alternating by `grow` where both are possible.
fn probe_target(active: usize, count: usize, grow: bool, may_grow: bool) -> Option<usize> {
    match (active > 1, active < count && may_grow) {
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
        assert_eq!(probe_target(2, 2, true, true), Some(1));
        assert_eq!(probe_target(2, 2, false, true), Some(1));
        assert_eq!(probe_target(1, 2, false, true), Some(2));
        assert_eq!(probe_target(2, 4, true, true), Some(3));
        assert_eq!(probe_target(2, 4, false, true), Some(1));
        assert_eq!(probe_target(1, 1, true, true), None);
    }

    /// A load that serves `at_one` commands per tick on one thread and `at_two` on two, each
    /// command its own read (interactive) or sixteen to a read (pipelined), on a machine with
    /// `idle_cores` idle.
    #[derive(Clone, Copy)]
    struct Load {
        at_one: u64,
        at_two: u64,
        shape: Shape,
        idle_cores: Option<f64>,
    }

    const FASTER_ON_ONE: Load = Load {
        at_one: 110_000,
        at_two: 100_000,
        shape: Shape::Pipelined,
        idle_cores: None,
    };
    const PIPELINED_FASTER_ON_TWO: Load = Load {
        at_one: 100_000,
        at_two: 160_000,
        ..FASTER_ON_ONE
    };
    /// Interactive, and served 60% faster on two threads than on one (clients on other
    /// machines, say).
    const INTERACTIVE_FASTER_ON_TWO: Load = Load {
        at_one: 10_000,
        at_two: 16_000,
        shape: Shape::Interactive,
        idle_cores: None,
    };

    impl Load {
        fn tick(self, active: usize) -> Tick {
            let commands = if active == 1 {
                self.at_one
            } else {
                self.at_two
            };
            let per_read = if self.shape == Shape::Pipelined {
                16
            } else {
                1
            };
            Tick {
                commands,
                reads: commands / per_read,
                accepted: 0,
                idle_cores: self.idle_cores,
            }
        }
    }

    /// The counts `balancer` chooses over `ticks` ticks of `load`, tick by tick.
    fn run(balancer: &mut Balancer, ticks: usize, load: Load) -> Vec<usize> {
        (0..ticks)
            .map(|_| balancer.tick(load.tick(balancer.active)))
            .collect()
    }

    /// The ticks of `load` between the probes `balancer` makes over `ticks` ticks, the ticks
    /// of each probe at another count not counted.
    fn probe_gaps(balancer: &mut Balancer, ticks: usize, load: Load) -> Vec<usize> {
        let settled = balancer.active;
        let mut gaps = vec![0];
        for _ in 0..ticks {
            if balancer.tick(load.tick(balancer.active)) == settled {
                *gaps.last_mut().unwrap() += 1;
            } else if gaps.last() != Some(&0) {
                gaps.push(0);
            }
        }
        gaps
    }

    /// What a balancer of two threads does as it learns one thread for a load that one thread
    /// serves at least as well: the tick that shows the load's shape, a baseline of two ticks
    /// at two threads, two at one, two at two again to confirm, then one thread, learned.
    const LEARNING_ONE: [usize; 7] = [2, 2, 1, 1, 2, 2, 1];

    /// A balancer of two threads that learned one for a pipelined load.
    fn on_one_thread() -> Balancer {
        let mut balancer = Balancer::new(2);
        run(&mut balancer, LEARNING_ONE.len(), FASTER_ON_ONE);
        assert_eq!(balancer.learned, [None, Some(1)]);
        assert_eq!(balancer.active, 1);
        balancer
    }

    #[test]
    fn a_load_shape_not_seen_yet_starts_on_every_thread_and_is_probed_at_once() {
        let mut balancer = Balancer::new(2);
        // One thread serves 10% more.
        assert_eq!(
            run(&mut balancer, LEARNING_ONE.len(), FASTER_ON_ONE),
            LEARNING_ONE
        );
        assert_eq!(balancer.learned, [None, Some(1)]);
        assert_eq!(balancer.shape, Some(Shape::Pipelined));
        // The next probe, a second later, tries two threads: they serve less, and the probe is
        // undone at once.
        let ticks = run(&mut balancer, PROBE_EVERY as usize + 3, FASTER_ON_ONE);
        assert!(ticks[..PROBE_EVERY as usize]
            .iter()
            .all(|&active| active == 1));
        assert_eq!(ticks[PROBE_EVERY as usize..], [2, 2, 1]);
    }

    #[test]
    fn a_load_shape_seen_before_gets_its_count_back_at_its_first_tick() {
        let mut balancer = Balancer::new(2);
        let interactive = Load {
            idle_cores: Some(0.0),
            ..INTERACTIVE_FASTER_ON_TWO
        };
        // Interactive on busy cores: one thread, and no probe of two when its time comes.
        let ticks = PROBE_EVERY as usize + 2;
        assert!(run(&mut balancer, ticks, interactive)
            .iter()
            .all(|&n| n == 1));
        assert_eq!(balancer.learned, [Some(1), None]);
        // Pipelined, not seen yet: every thread at once, then a probe of one thread, which
        // serves less.
        assert_eq!(
            run(&mut balancer, 5, PIPELINED_FASTER_ON_TWO),
            [2, 2, 1, 1, 2]
        );
        assert_eq!(balancer.learned, [Some(1), Some(2)]);
        assert_eq!(balancer.shape, Some(Shape::Pipelined));
        // Each shape gets its count back at once, and is not probed again before its time.
        for _ in 0..3 {
            assert_eq!(run(&mut balancer, 3, interactive), [1, 1, 1]);
            assert_eq!(run(&mut balancer, 3, PIPELINED_FASTER_ON_TWO), [2, 2, 2]);
        }
    }

    #[test]
    fn an_interactive_load_starts_on_one_thread_and_grows_only_where_cores_sit_idle() {
        // Cores busy (the clients beside the server): two threads are never tried, however
        // much more they would serve.
        for idle in [0.0, 0.3, 0.49] {
            let busy = Load {
                idle_cores: Some(idle),
                ..INTERACTIVE_FASTER_ON_TWO
            };
            let mut balancer = Balancer::new(2);
            assert!(run(&mut balancer, 20 * 60, busy).iter().all(|&n| n == 1));
            assert_eq!(balancer.learned, [Some(1), None]);
        }
        // Half a core idle or more, or no idle time known: probed after a second on one
        // thread, and two threads serving more win three comparisons in a row and are kept.
        for idle_cores in [Some(0.5), Some(1.5), None] {
            let idle = Load {
                idle_cores,
                ..INTERACTIVE_FASTER_ON_TWO
            };
            let mut balancer = Balancer::new(2);
            let first_probe = PROBE_EVERY as usize + 1;
            let ticks = run(&mut balancer, first_probe + 14, idle);
            assert!(ticks[..first_probe].iter().all(|&n| n == 1), "{ticks:?}");
            assert_eq!(
                ticks[first_probe..],
                [2, 2, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2]
            );
            assert_eq!(balancer.learned, [Some(2), None]);
        }
        // A pipelined load is probed on busy cores too.
        let mut balancer = on_one_thread();
        let busy = Load {
            idle_cores: Some(0.0),
            ..PIPELINED_FASTER_ON_TWO
        };
        run(&mut balancer, 20 * 60, busy);
        assert_eq!(balancer.learned, [None, Some(2)]);
    }

    #[test]
    fn idle_cores_are_averaged_over_the_samples_before_a_probe() {
        let mut idle = IdleCores::default();
        idle.add(None);
        assert!(idle.at_least(100.0), "no sample: no gate");
        idle.add(Some(1.0));
        idle.add(None);
        idle.add(Some(0.0));
        assert!(idle.at_least(0.5) && !idle.at_least(0.51));
    }

    #[test]
    fn one_thread_fewer_serving_about_as_much_is_kept_and_one_more_must_serve_more() {
        let about_as_much = Load {
            at_one: 98_000,
            at_two: 100_000,
            ..FASTER_ON_ONE
        };
        let mut balancer = Balancer::new(2);
        assert_eq!(
            run(&mut balancer, LEARNING_ONE.len(), about_as_much),
            LEARNING_ONE
        );
        assert_eq!(balancer.learned, [None, Some(1)]);
        // Two threads serve 2% more, under the 5% a thread more must bring.
        let gaps = probe_gaps(&mut balancer, 200, about_as_much);
        assert!(gaps.len() > 2, "{gaps:?}");
        assert_eq!(balancer.learned, [None, Some(1)]);

        let less = Load {
            at_one: 95_000,
            ..about_as_much
        };
        let mut balancer = Balancer::new(2);
        assert_eq!(run(&mut balancer, 7, less), [2, 2, 1, 1, 2, 2, 2]);
        assert_eq!(balancer.learned, [None, Some(2)]);
    }

    /// `load`'s commands at `active` threads, each tick off by up to `spread` either way (a
    /// uniform draw from `state`, an xorshift generator), as ticks of clients sharing the cores
    /// come.
    fn noisy_tick(load: Load, active: usize, spread: f64, state: &mut u64) -> Tick {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let uniform = (*state >> 11) as f64 / (1u64 << 53) as f64;
        let tick = load.tick(active);
        let commands = (tick.commands as f64 * (1.0 + spread * (2.0 * uniform - 1.0))) as u64;
        Tick {
            commands,
            reads: commands * tick.reads / tick.commands,
            accepted: 0,
            idle_cores: None,
        }
    }

    /// The share of `ticks` ticks of `load` (off by up to 15% each) that `balancer` runs at
    /// `count` threads.
    fn share_at(balancer: &mut Balancer, ticks: usize, load: Load, count: usize) -> f64 {
        let mut state = 0x9e37_79b9_7f4a_7c15;
        let at_count = (0..ticks)
            .filter(|_| balancer.tick(noisy_tick(load, balancer.active, 0.15, &mut state)) == count)
            .count();
        at_count as f64 / ticks as f64
    }

    #[test]
    fn a_noisy_load_is_not_moved_by_chance_wins_and_a_real_gain_still_is() {
        // One thread serves as much as two, each tick 15% off either way: a probe of two
        // threads wins a comparison by chance now and then, but not three in a row.
        let tie = Load {
            at_one: 100_000,
            at_two: 100_000,
            ..FASTER_ON_ONE
        };
        let mut balancer = on_one_thread();
        let share = share_at(&mut balancer, 20 * 60 * 10, tie, 2);
        assert!(share < 0.02, "{share:.3} of 10 minutes on two threads");
        // Two threads serving 60% more than one win however the ticks vary.
        let mut balancer = on_one_thread();
        let share = share_at(&mut balancer, 20 * 60, PIPELINED_FASTER_ON_TWO, 2);
        assert!(share > 0.9, "{share:.3} of a minute on two threads");
    }

    #[test]
    fn a_load_rising_over_a_probe_is_not_credited_to_it() {
        let mut balancer = Balancer::new(2);
        // 8% more per tick, and one thread serving 8% less than two: the probe's ticks beat
        // the ones before it, not the mean of those before and after.
        let mut commands = 100_000.0;
        let ticks: Vec<usize> = (0..7)
            .map(|_| {
                commands *= 1.08;
                let at_one = if balancer.active == 1 { 0.92 } else { 1.0 };
                let commands = (commands * at_one) as u64;
                balancer.tick(Tick {
                    commands,
                    reads: commands / 16,
                    accepted: 0,
                    idle_cores: None,
                })
            })
            .collect();
        assert_eq!(ticks, [2, 2, 1, 1, 2, 2, 2]);
        assert_eq!(balancer.learned, [None, Some(2)]);
    }

    #[test]
    fn a_probe_without_load_or_with_clients_arriving_is_undone_and_tried_a_second_later() {
        let arriving = Tick {
            accepted: 50,
            ..FASTER_ON_ONE.tick(2)
        };
        let idle = Tick::default();
        for void in [arriving, idle] {
            let mut balancer = Balancer::new(2);
            assert_eq!(run(&mut balancer, 3, FASTER_ON_ONE), [2, 2, 1]);
            assert_eq!(balancer.tick(void), 2, "the probe is undone");
            assert_eq!(balancer.learned, [None, None]);
            let gaps = probe_gaps(&mut balancer, 100, FASTER_ON_ONE);
            assert_eq!(gaps[0], PROBE_EVERY as usize, "{gaps:?}");
        }
    }

    #[test]
    fn clients_arriving_void_a_baseline() {
        let mut balancer = Balancer::new(2);
        let arriving = Tick {
            accepted: 1,
            ..FASTER_ON_ONE.tick(2)
        };
        assert_eq!(run(&mut balancer, 2, FASTER_ON_ONE), [2, 2]);
        assert_eq!(balancer.tick(arriving), 2);
        // Two ticks without arrivals are needed again.
        assert_eq!(run(&mut balancer, 2, FASTER_ON_ONE), [2, 1]);
    }

    #[test]
    fn a_probe_waits_for_a_steady_baseline() {
        let mut balancer = Balancer::new(2);
        // A pipelined load rising tick by tick (a benchmark's next test starting) is no baseline.
        assert_eq!(
            balancer.tick(Tick {
                commands: 10_000,
                reads: 10_000 / 16,
                accepted: 0,
                idle_cores: None,
            }),
            2
        );
        for commands in [14_000, 20_000, 28_000] {
            let tick = Tick {
                commands,
                reads: commands / 16,
                accepted: 0,
                idle_cores: None,
            };
            assert_eq!(balancer.tick(tick), 2, "no probe yet");
        }
        let tick = Tick {
            commands: 30_000,
            reads: 30_000 / 16,
            accepted: 0,
            idle_cores: None,
        };
        assert_eq!(balancer.tick(tick), 1, "a steady baseline: the probe");
        assert!(is_steady(&[100, 125]) && !is_steady(&[100, 126]));
    }

    #[test]
    fn a_count_each_probe_confirms_is_probed_less_often_until_clients_arrive() {
        let mut balancer = on_one_thread();
        // Each gap is the steady ticks before a probe and the tick that undoes it.
        let gaps = probe_gaps(&mut balancer, 1_500, FASTER_ON_ONE);
        assert_eq!(gaps[..6], [20, 41, 81, 161, 321, 321]);
        // Clients arriving: the next probe within `PROBE_EVERY` ticks of the load being steady.
        let arriving = Tick {
            accepted: 3,
            ..FASTER_ON_ONE.tick(1)
        };
        balancer.tick(arriving);
        let gaps = probe_gaps(&mut balancer, 100, FASTER_ON_ONE);
        assert!(gaps[0] <= PROBE_EVERY as usize && gaps[1] == 41, "{gaps:?}");
    }

    #[test]
    fn a_load_that_moves_is_probed_again_a_second_later() {
        let mut balancer = on_one_thread();
        let gaps = probe_gaps(&mut balancer, 1_500, FASTER_ON_ONE);
        assert_eq!(gaps[..5], [20, 41, 81, 161, 321]);
        // The same clients sending half again as much (a surge on connections already open):
        // probed within a second, not after the 16 s the count had earned.
        let surge = Load {
            at_one: FASTER_ON_ONE.at_one * 3 / 2,
            at_two: FASTER_ON_ONE.at_two * 3 / 2,
            ..FASTER_ON_ONE
        };
        let gaps = probe_gaps(&mut balancer, 100, surge);
        assert!(gaps[0] <= PROBE_EVERY as usize + 1, "{gaps:?}");
        // A load moving by less than a baseline's spread keeps the interval it earned.
        let mut balancer = on_one_thread();
        probe_gaps(&mut balancer, 1_500, FASTER_ON_ONE);
        let drift = Load {
            at_one: FASTER_ON_ONE.at_one * 11 / 10,
            at_two: FASTER_ON_ONE.at_two * 11 / 10,
            ..FASTER_ON_ONE
        };
        let gaps = probe_gaps(&mut balancer, 700, drift);
        assert!(gaps[0] > PROBE_EVERY as usize * 2, "{gaps:?}");
    }

    #[test]
    fn one_thread_fewer_than_three_must_serve_more_as_one_thread_more_must() {
        // Three threads and a load below what one serves: every count serves the same. A tie
        // keeps one thread instead of two, not two instead of three: the count stays at three.
        let mut balancer = Balancer::new(3);
        let tie = Tick {
            commands: 10_000,
            reads: 10_000 / 16,
            accepted: 0,
            idle_cores: None,
        };
        let counts: Vec<usize> = (0..400).map(|_| balancer.tick(tie)).collect();
        assert!(counts.contains(&2), "probed");
        assert_eq!(balancer.active, 3);
        assert_eq!(balancer.learned, [None, Some(3)]);
    }

    #[test]
    fn a_load_between_the_shapes_keeps_the_shape_it_had() {
        let reads = 1_000;
        assert_eq!(Shape::of(1_000, reads, None), Shape::Interactive);
        assert_eq!(Shape::of(1_999, reads, None), Shape::Interactive);
        assert_eq!(Shape::of(4_000, reads, None), Shape::Pipelined);
        for last in [Shape::Interactive, Shape::Pipelined] {
            assert_eq!(Shape::of(3_000, reads, Some(last)), last);
            assert_eq!(Shape::of(1_000, 0, Some(last)), last, "no read counted");
        }
        assert_eq!(Shape::of(3_000, reads, None), Shape::Interactive);
    }

    #[test]
    fn a_single_network_thread_learns_the_shape_and_is_never_probed() {
        let mut balancer = Balancer::new(1);
        let ticks = run(&mut balancer, 30, PIPELINED_FASTER_ON_TWO);
        assert!(ticks.iter().all(|&active| active == 1));
        assert_eq!(balancer.learned, [None, Some(1)]);
        assert_eq!(balancer.shape, Some(Shape::Pipelined));
    }

    #[test]
    fn counts_are_scaled_to_a_nominal_tick() {
        let tick = Tick {
            commands: 1_200,
            reads: 600,
            accepted: 2,
            idle_cores: None,
        };
        let scaled = tick.per(Duration::from_millis(50), Duration::from_millis(60));
        assert_eq!(
            (scaled.commands, scaled.reads, scaled.accepted),
            (1_000, 500, 2)
        );
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
