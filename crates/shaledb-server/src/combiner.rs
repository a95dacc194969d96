//! Hot keys run on one network thread at a time: a connection whose pipeline starts with a write
//! to a key whose stripe another network thread is already running pipelines for hands its
//! pipeline to that thread (a *job*) and waits, instead of blocking its own thread on the
//! stripe's lock.
//!
//! With two network threads and fifty clients writing one key (redis-benchmark's LPUSH, SADD,
//! HSET and ZADD), each pipeline took the stripe from the other thread: one thread slept on the
//! stripe's futex while the other ran, then woke, and a third of the server's CPU went to futex
//! wakeups and task switches. Now the thread that runs the stripe runs the others' pipelines
//! after its own (flat combining), and the other thread only reads requests and writes
//! replies; a waiting connection's task is parked, not its thread.
//!
//! The queue decides only which thread runs a pipeline: each job still runs through the same
//! `execute_slice` and takes its stripe locks as before, so what a pipeline may do and see is
//! unchanged, and commands from elsewhere (the pool, the expirer, EXEC) lock as they did. A job
//! runs its connection's pipeline in order, and the connection waits for it before reading more,
//! so a connection's commands keep their order. A runner runs at most `JOBS_PER_TURN` jobs, then
//! hands the stripe to the connection of the next job waiting, which runs its own pipeline and
//! the jobs after it: no client waits behind an endless queue, and no runner's own replies wait
//! for more than one turn. A command that panics in a job closes only its own connection; the
//! runner goes on with the queue (`connection::run_turn`).

use crate::commands::{Request, Session};
use crate::resp::Output;
use shaledb::SyncPoint;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use tokio::sync::oneshot;

/// Most jobs a runner runs for others before it hands the stripe on.
pub const JOBS_PER_TURN: usize = 16;

/// A pipeline handed to the stripe's runner: the connection's session and requests, and where
/// to send them back.
pub struct Job {
    pub session: Session,
    pub requests: VecDeque<Request>,
    done: oneshot::Sender<Finished>,
}

/// What a waiting connection gets back.
pub enum Finished {
    /// Its pipeline ran: the replies, and the point to sync before they are sent.
    Ran {
        session: Session,
        requests: VecDeque<Request>,
        output: Output,
        sync: SyncPoint,
    },
    /// The stripe is its to run now: it runs its own pipeline, then the jobs after it.
    YourTurn {
        session: Session,
        requests: VecDeque<Request>,
    },
}

#[derive(Default)]
struct Queue {
    running: bool,
    jobs: VecDeque<Job>,
}

/// One queue per stripe.
pub struct Combiner {
    queues: Box<[Mutex<Queue>]>,
    /// Jobs run by another connection's turn (`INFO stats` `combined_pipelines`).
    jobs_run: AtomicU64,
}

impl Combiner {
    pub fn new(stripes: usize) -> Self {
        Combiner {
            queues: (0..stripes).map(|_| Mutex::default()).collect(),
            jobs_run: AtomicU64::new(0),
        }
    }

    fn queue(&self, stripe: usize) -> std::sync::MutexGuard<'_, Queue> {
        // A queue's state is a flag and a list, consistent at every unlock: a panic elsewhere
        // cannot leave it half changed.
        self.queues[stripe]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Enters `stripe` with a connection's `session` and `requests`. `None`: nobody ran the
    /// stripe, and this connection runs it now, calling `next_job` until it says the turn is
    /// over. Else they became a job for the stripe's runner (`session` and `requests` taken),
    /// whose outcome comes on the receiver. A connection waits for its job before it reads
    /// more, so a queue holds at most a job per client (`maxclients`).
    pub fn enter(
        &self,
        stripe: usize,
        session: &mut Option<Session>,
        requests: &mut VecDeque<Request>,
    ) -> Option<oneshot::Receiver<Finished>> {
        let mut queue = self.queue(stripe);
        if !queue.running {
            queue.running = true;
            return None;
        }
        let (done, finished) = oneshot::channel();
        queue.jobs.push_back(Job {
            session: session
                .take()
                .expect("a connection enters with its session"),
            requests: std::mem::take(requests),
            done,
        });
        Some(finished)
    }

    /// The next job for the runner of `stripe`, which has run `ran` jobs this turn; `None` once
    /// the queue is empty or the turn went to the next job's connection, and the runner is done.
    /// A runner calls it until `None` (its connection's task is never dropped in between: only
    /// the runtime's shutdown drops tasks), so a stripe never stays running with nobody to run
    /// its jobs.
    pub fn next_job(&self, stripe: usize, ran: usize) -> Option<Job> {
        let mut queue = self.queue(stripe);
        loop {
            let Some(job) = queue.jobs.pop_front() else {
                queue.running = false;
                return None;
            };
            if ran < JOBS_PER_TURN {
                return Some(job);
            }
            // The stripe stays running: it is the job's connection's turn now. A connection
            // gone meanwhile cannot take it; the next job's can.
            let turn = Finished::YourTurn {
                session: job.session,
                requests: job.requests,
            };
            if job.done.send(turn).is_ok() {
                return None;
            }
        }
    }

    /// Jobs run by another connection's turn so far.
    pub fn jobs_run(&self) -> u64 {
        self.jobs_run.load(Ordering::Relaxed)
    }

    /// Sends a job's outcome to its connection (gone meanwhile: nothing to do).
    pub fn finish(&self, job: Job, output: Output, sync: SyncPoint) {
        self.jobs_run.fetch_add(1, Ordering::Relaxed);
        let _ = job.done.send(Finished::Ran {
            session: job.session,
            requests: job.requests,
            output,
            sync,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::Shared;
    use bytes::Bytes;
    use tokio::sync::oneshot::error::TryRecvError;

    fn shared(dir: &std::path::Path) -> Shared {
        Shared::open_for_tests(dir).unwrap_or_else(|_| panic!("a new database"))
    }

    fn named(name: &str) -> VecDeque<Request> {
        VecDeque::from([Request::from(vec![Bytes::from(name.to_string())])])
    }

    /// Queues a job named `name` on `stripe`, which someone runs.
    fn queued(
        combiner: &Combiner,
        shared: &Shared,
        stripe: usize,
        name: &str,
    ) -> oneshot::Receiver<Finished> {
        let mut requests = named(name);
        let mut session = Some(shared.new_session());
        let finished = combiner
            .enter(stripe, &mut session, &mut requests)
            .unwrap_or_else(|| panic!("{name}: the stripe is running"));
        assert!(
            requests.is_empty() && session.is_none(),
            "the job took both"
        );
        finished
    }

    /// Whether a connection entering `stripe` runs it.
    fn runs(combiner: &Combiner, shared: &Shared, stripe: usize) -> bool {
        let mut session = Some(shared.new_session());
        let runs = combiner
            .enter(stripe, &mut session, &mut named("x"))
            .is_none();
        assert_eq!(session.is_some(), runs, "a runner keeps its session");
        runs
    }

    fn name_of(requests: &VecDeque<Request>) -> &[u8] {
        &requests[0].args[0]
    }

    #[test]
    fn jobs_wait_for_the_runner_and_the_turn_passes_after_jobs_per_turn() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        let combiner = Combiner::new(4);
        assert!(runs(&combiner, &shared, 1), "nobody runs the stripe");
        let mut waiting: Vec<_> = (0..JOBS_PER_TURN + 3)
            .map(|n| Some(queued(&combiner, &shared, 1, &format!("job{n}"))))
            .collect();
        assert!(
            runs(&combiner, &shared, 2),
            "another stripe runs on its own"
        );
        // The connection whose turn would be next is gone: the turn skips it.
        waiting[JOBS_PER_TURN] = None;
        let mut ran = 0;
        while let Some(job) = combiner.next_job(1, ran) {
            assert_eq!(name_of(&job.requests), format!("job{ran}").as_bytes());
            combiner.finish(job, Output::new(), SyncPoint::default());
            ran += 1;
        }
        assert_eq!(ran, JOBS_PER_TURN);
        assert_eq!(combiner.jobs_run(), JOBS_PER_TURN as u64);
        for (n, finished) in waiting.iter_mut().take(JOBS_PER_TURN).enumerate() {
            let Ok(Finished::Ran { requests, .. }) = finished.take().unwrap().try_recv() else {
                panic!("job{n} ran");
            };
            assert_eq!(name_of(&requests), format!("job{n}").as_bytes());
        }
        let next = JOBS_PER_TURN + 1;
        let Ok(Finished::YourTurn { requests, .. }) = waiting[next].as_mut().unwrap().try_recv()
        else {
            panic!("the turn passed to job{next}");
        };
        assert_eq!(name_of(&requests), format!("job{next}").as_bytes());
        let last = waiting[next + 1].as_mut().unwrap();
        assert!(matches!(last.try_recv(), Err(TryRecvError::Empty)));
        // The stripe still runs (job{next}'s turn): a newcomer queues behind the last job.
        let mut newcomer = queued(&combiner, &shared, 1, "newcomer");
        let mut order = Vec::new();
        let mut ran = 0;
        while let Some(job) = combiner.next_job(1, ran) {
            order.push(name_of(&job.requests).to_vec());
            combiner.finish(job, Output::new(), SyncPoint::default());
            ran += 1;
        }
        let expected = format!("job{}", next + 1);
        assert_eq!(order, [expected.as_bytes(), b"newcomer"]);
        assert!(matches!(newcomer.try_recv(), Ok(Finished::Ran { .. })));
        assert!(
            runs(&combiner, &shared, 1),
            "the queue ran empty: the stripe is free"
        );
    }
}
