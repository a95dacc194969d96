//! The syncer: makes the KVDB's log durable for the connections whose replies wait for it under
//! `sync` durability. A connection runs its pipeline on a network thread without waiting for
//! each commit's fdatasync (`PipelineRun::deferring_sync`), then hands the pipeline's sync point
//! here and awaits the answer before it sends the replies.
//!
//! On a network thread the waits are gathered on the thread and synced together when it runs
//! out of work, just before its runtime parks (`sync_idle_thread`, tokio's `on_thread_park`), as
//! Redis syncs its log before its event loop sleeps: one fdatasync serves every connection the
//! thread served in that turn, and the answers wake tasks of the same thread. A dedicated thread
//! answering each connection made five SETs per fdatasync at pipeline 1 (fifty for Redis).
//! The thread waits for the fdatasync itself: handing the turn's points to the syncer thread
//! and answering them from a task woken once per turn kept the thread serving meanwhile, and
//! ran pipelined SETs faster (pipeline 16: 481k, 464k, 318k against 375k, 383k, 330k/s) but
//! single ones slower (pipeline 1: 51k, 47k, 38k against 57k, 55k, 38k/s), where Redis ran 61k,
//! 61k, 46k and 373k, 284k, 326k/s (docs/SERVER.md, "Runs against Redis").
//! A thread that does not run out of work still syncs: when it has gathered `IDLE_WAITS_MAX`
//! waits, and when a wait has lasted `IDLE_WAIT_MAX`. Anywhere else (a thread of the main
//! runtime) a wait goes to the syncer thread, where waits that arrive while a sync runs are taken
//! together.
//!
//! Bounded by `maxclients`: a connection waits for one point at a time.

use shaledb::{Db, SyncPoint};
use std::cell::{Cell, RefCell};
use std::sync::mpsc;
use std::sync::Weak;
use std::time::Duration;
use tokio::sync::oneshot;

/// What a wait answers: `Err` says why the writes may not be durable.
type Synced = Result<(), String>;

/// Most waits a network thread gathers before it syncs them without running out of work.
const IDLE_WAITS_MAX: usize = 256;
/// Longest a wait stays gathered on a network thread that does not run out of work.
const IDLE_WAIT_MAX: Duration = Duration::from_millis(2);

thread_local! {
    /// Set on the network threads, whose runtimes call `sync_idle_thread` before they park.
    static SYNCS_WHEN_IDLE: Cell<bool> = const { Cell::new(false) };
    /// The waits this thread gathered and has not synced yet.
    static GATHERED: RefCell<Gathered> = RefCell::new(Gathered::default());
}

#[derive(Default)]
struct Gathered {
    db: Weak<Db>,
    point: SyncPoint,
    answers: Vec<oneshot::Sender<Synced>>,
}

/// Marks the calling thread as one whose runtime calls `sync_idle_thread` before it parks: its
/// waits are gathered and synced there.
pub fn syncs_when_idle() {
    SYNCS_WHEN_IDLE.set(true);
}

/// Syncs the waits this thread gathered and answers them: a network thread's runtime calls it
/// when it runs out of work, before it parks. The thread blocks for the fdatasync, as Redis's
/// does; its tasks woken by the answers run before it parks.
pub fn sync_idle_thread() {
    let gathered = GATHERED.with_borrow_mut(|gathered| {
        (!gathered.answers.is_empty()).then(|| std::mem::take(gathered))
    });
    if let Some(gathered) = gathered {
        sync_and_answer(&gathered.db, gathered.point, gathered.answers);
    }
}

/// Syncs the log past `point` (one fdatasync) and tells each waiter how it went.
fn sync_and_answer(
    db: &Weak<Db>,
    point: SyncPoint,
    answers: impl IntoIterator<Item = oneshot::Sender<Synced>>,
) {
    let synced = match db.upgrade() {
        Some(db) => db
            .wait_synced(point)
            .map_err(|error| format!("the log could not be synced: {error}")),
        None => Err("the KVDB is closed".into()),
    };
    for answer in answers {
        // A connection that left meanwhile needs no answer.
        let _ = answer.send(synced.clone());
    }
}

pub struct Syncer {
    db: Weak<Db>,
    requests: mpsc::Sender<(SyncPoint, oneshot::Sender<Synced>)>,
}

impl Syncer {
    /// Starts the syncer thread. It holds the KVDB only while it syncs, and ends when the
    /// syncer is dropped.
    pub fn start(db: Weak<Db>) -> std::io::Result<Syncer> {
        let (requests, received) = mpsc::channel();
        let thread_db = db.clone();
        std::thread::Builder::new()
            .name("shale-sync".into())
            .spawn(move || sync_while_asked(&thread_db, &received))?;
        Ok(Syncer { db, requests })
    }

    /// Waits until every write up to `point` is durable.
    pub async fn wait(&self, point: SyncPoint) -> Synced {
        if point.is_empty() {
            return Ok(());
        }
        let (answer, mut answered) = oneshot::channel();
        if !SYNCS_WHEN_IDLE.get() {
            self.requests
                .send((point, answer))
                .map_err(|_| "the syncer has stopped".to_string())?;
            return answered
                .await
                .unwrap_or_else(|_| Err("the syncer has stopped".into()));
        }
        let full = GATHERED.with_borrow_mut(|gathered| {
            if gathered.answers.is_empty() {
                gathered.db = self.db.clone();
            }
            gathered.point.merge(point);
            gathered.answers.push(answer);
            gathered.answers.len() >= IDLE_WAITS_MAX
        });
        if full {
            sync_idle_thread();
        }
        let answered = match tokio::time::timeout(IDLE_WAIT_MAX, &mut answered).await {
            Ok(answered) => answered,
            Err(_) => {
                // The thread has not run out of work since: sync what it gathered now.
                sync_idle_thread();
                answered.await
            }
        };
        answered.unwrap_or_else(|_| Err("the KVDB is closed".into()))
    }
}

fn sync_while_asked(
    db: &Weak<Db>,
    received: &mpsc::Receiver<(SyncPoint, oneshot::Sender<Synced>)>,
) {
    while let Ok(first) = received.recv() {
        let mut waiting = vec![first];
        waiting.extend(received.try_iter());
        let mut point = SyncPoint::default();
        for (each, _) in &waiting {
            point.merge(*each);
        }
        sync_and_answer(db, point, waiting.into_iter().map(|(_, answer)| answer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn sync_db(dir: &std::path::Path) -> Arc<Db> {
        let options = shaledb::Options {
            durability: shaledb::Durability::Sync,
            ..shaledb::Options::default()
        };
        Arc::new(Db::open(dir, options).unwrap())
    }

    fn write(db: &Db, key: &[u8]) -> SyncPoint {
        let kvs = db.kvs("t").unwrap();
        let mut batch = db.batch();
        batch.put(&kvs, key, b"value");
        db.write_unsynced(batch).unwrap()
    }

    /// Runs `body` on a thread marked as a network thread, in a current-thread runtime that
    /// calls `on_park` before it parks (the network threads' `sync_idle_thread`).
    fn on_network_thread<T: Send + 'static>(
        on_park: impl Fn() + Send + Sync + 'static,
        body: impl std::future::Future<Output = T> + Send + 'static,
    ) -> T {
        std::thread::spawn(move || {
            syncs_when_idle();
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .on_thread_park(on_park)
                .build()
                .unwrap()
                .block_on(body)
        })
        .join()
        .unwrap()
    }

    #[test]
    fn a_network_thread_syncs_the_waits_of_its_turn_together_when_it_runs_out_of_work() {
        let dir = tempfile::tempdir().unwrap();
        let db = sync_db(dir.path());
        let syncer = Arc::new(Syncer::start(Arc::downgrade(&db)).unwrap());
        let points: Vec<SyncPoint> = (0..20u8).map(|key| write(&db, &[key])).collect();
        let largest_sync = Arc::new(AtomicUsize::new(0));
        let seen = largest_sync.clone();
        let on_park = move || {
            let gathered = GATHERED.with_borrow(|gathered| gathered.answers.len());
            seen.fetch_max(gathered, Ordering::Relaxed);
            sync_idle_thread();
        };
        let waiter = syncer.clone();
        let answers = on_network_thread(on_park, async move {
            let tasks: Vec<_> = points
                .into_iter()
                .map(|point| {
                    let waiter = waiter.clone();
                    tokio::spawn(async move { waiter.wait(point).await })
                })
                .collect();
            let mut answers = Vec::new();
            for task in tasks {
                answers.push(task.await.unwrap());
            }
            answers
        });
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        assert_eq!(
            largest_sync.load(Ordering::Relaxed),
            20,
            "the twenty waits of one turn were synced together"
        );
        // The KVDB gone, a gathered wait says so.
        let last = write(&db, b"last");
        drop(Arc::into_inner(db).expect("the syncer holds no strong handle"));
        let answer = on_network_thread(sync_idle_thread, async move { syncer.wait(last).await });
        assert_eq!(answer, Err("the KVDB is closed".into()));
    }

    #[test]
    fn a_network_thread_that_never_runs_out_of_work_still_syncs_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let db = sync_db(dir.path());
        let syncer = Syncer::start(Arc::downgrade(&db)).unwrap();
        let point = write(&db, b"k");
        // No hook: as if the thread never parked.
        let started = std::time::Instant::now();
        let answer = on_network_thread(|| {}, async move { syncer.wait(point).await });
        assert_eq!(answer, Ok(()));
        assert!(started.elapsed() >= IDLE_WAIT_MAX, "answered by the bound");
    }

    #[tokio::test]
    async fn a_wait_answers_once_the_log_is_synced_and_fails_once_the_kvdb_is_gone() {
        // Not on a network thread: the syncer thread answers.
        let dir = tempfile::tempdir().unwrap();
        let db = sync_db(dir.path());
        let syncer = Syncer::start(Arc::downgrade(&db)).unwrap();
        let (first, second, third) = (write(&db, b"a"), write(&db, b"b"), write(&db, b"c"));
        assert!(!first.is_empty() && !third.is_empty());
        // Waits in flight together, answered by the syncer's one pass or two.
        let answers = tokio::join!(syncer.wait(first), syncer.wait(second), syncer.wait(third));
        assert_eq!(answers, (Ok(()), Ok(()), Ok(())));
        assert_eq!(syncer.wait(SyncPoint::default()).await, Ok(()));
        let last = write(&db, b"d");
        drop(Arc::into_inner(db).expect("the syncer holds no strong handle"));
        assert_eq!(syncer.wait(last).await, Err("the KVDB is closed".into()));
    }
}
