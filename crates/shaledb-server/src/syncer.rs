//! The syncer: one thread that makes the KVDB's log durable for the connections whose replies
//! wait for it under `sync` durability. A connection runs its pipeline on a network thread
//! without waiting for each commit's fdatasync (`PipelineRun::deferring_sync`), then hands the
//! pipeline's sync point here and awaits the answer before it sends the replies. Points that
//! arrive while a sync runs are taken together, so one fdatasync serves every connection that
//! waited meanwhile (group commit), with no thread blocked per connection.
//!
//! Bounded by `maxclients`: a connection waits for one point at a time.

use shaledb::{Db, SyncPoint};
use std::sync::mpsc;
use std::sync::Weak;
use tokio::sync::oneshot;

/// What a wait answers: `Err` says why the writes may not be durable.
type Synced = Result<(), String>;

pub struct Syncer {
    requests: mpsc::Sender<(SyncPoint, oneshot::Sender<Synced>)>,
}

impl Syncer {
    /// Starts the thread. It holds the KVDB only while it syncs, and ends when the syncer is
    /// dropped.
    pub fn start(db: Weak<Db>) -> std::io::Result<Syncer> {
        let (requests, received) = mpsc::channel();
        std::thread::Builder::new()
            .name("shale-sync".into())
            .spawn(move || sync_while_asked(&db, &received))?;
        Ok(Syncer { requests })
    }

    /// Waits until every write up to `point` is durable.
    pub async fn wait(&self, point: SyncPoint) -> Synced {
        if point.is_empty() {
            return Ok(());
        }
        let (answer, answered) = oneshot::channel();
        self.requests
            .send((point, answer))
            .map_err(|_| "the syncer has stopped".to_string())?;
        answered
            .await
            .unwrap_or_else(|_| Err("the syncer has stopped".into()))
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
        let synced = match db.upgrade() {
            Some(db) => db
                .wait_synced(point)
                .map_err(|error| format!("the log could not be synced: {error}")),
            None => Err("the KVDB is closed".into()),
        };
        for (_, answer) in waiting {
            // A connection that left meanwhile needs no answer.
            let _ = answer.send(synced.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_wait_answers_once_the_log_is_synced_and_fails_once_the_kvdb_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let options = shaledb::Options {
            durability: shaledb::Durability::Sync,
            ..shaledb::Options::default()
        };
        let db = Arc::new(Db::open(dir.path(), options).unwrap());
        let syncer = Syncer::start(Arc::downgrade(&db)).unwrap();
        let kvs = db.kvs("t").unwrap();
        let write = |key: &[u8]| {
            let mut batch = db.batch();
            batch.put(&kvs, key, b"value");
            db.write_unsynced(batch).unwrap()
        };
        let (first, second, third) = (write(b"a"), write(b"b"), write(b"c"));
        assert!(!first.is_empty() && !third.is_empty());
        // Waits in flight together, answered by the syncer's one pass or two.
        let answers = tokio::join!(syncer.wait(first), syncer.wait(second), syncer.wait(third));
        assert_eq!(answers, (Ok(()), Ok(()), Ok(())));
        assert_eq!(syncer.wait(SyncPoint::default()).await, Ok(()));
        let last = write(b"d");
        drop(kvs);
        drop(Arc::into_inner(db).expect("the syncer holds no strong handle"));
        assert_eq!(syncer.wait(last).await, Err("the KVDB is closed".into()));
    }
}
