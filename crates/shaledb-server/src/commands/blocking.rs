//! Clients waiting in blocking commands (BLPOP and friends), served in the order they blocked.
//!
//! A blocking command that finds nothing marks its session blocked; the connection then queues
//! the request here with a channel for its reply and waits on the channel, its timeout, the
//! client and the server's drain, holding no thread and no lock. After every command that wrote,
//! the dispatcher runs the queued requests again, oldest first, as Redis serves blocked clients:
//! the first that finds an element takes it and its reply goes down its channel. A request queued
//! after a write it missed is run at once (the write generation tells).

use super::{command_index, PipelineRun, Shared};
use crate::resp::Reply;
use bytes::Bytes;
use parking_lot::Mutex;
use shaledb::SyncPoint;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use tokio::sync::oneshot;

/// A blocked request.
pub struct Waiter {
    pub id: u64,
    pub db: usize,
    pub protocol: u8,
    pub request: Vec<Bytes>,
    /// The reply, with what to sync before it is sent (its command ran in a run deferring its
    /// sync: the writer that served it does not wait for the device).
    pub reply: oneshot::Sender<(Reply, SyncPoint)>,
}

#[derive(Default)]
pub struct Waiters {
    queue: Mutex<VecDeque<Waiter>>,
    /// Queued requests: writers skip serving while it is zero (INFO's blocked_clients).
    count: AtomicUsize,
    next_id: AtomicU64,
}

impl Waiters {
    pub fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Takes the request `id` out of the queue; false if it was served (or gone) already.
    pub fn remove(&self, id: u64) -> bool {
        let mut queue = self.queue.lock();
        let before = queue.len();
        queue.retain(|waiter| waiter.id != id);
        self.count.store(queue.len(), Ordering::SeqCst);
        queue.len() != before
    }
}

impl Shared {
    /// Queues a blocked request; `generation` is the write generation its last attempt read.
    pub fn add_waiter(&self, waiter: Waiter, generation: u64) {
        {
            let mut queue = self.waiters.queue.lock();
            queue.push_back(waiter);
            self.waiters.count.store(queue.len(), Ordering::SeqCst);
        }
        if self.write_generation() != generation {
            self.serve_waiters();
        }
    }

    /// Runs the queued requests again, oldest first, until none makes progress.
    pub(super) fn serve_waiters(&self) {
        if self.waiters.len() == 0 {
            return;
        }
        let mut queue = self.waiters.queue.lock();
        loop {
            let mut served = false;
            let mut index = 0;
            while index < queue.len() {
                if queue[index].reply.is_closed() {
                    queue.remove(index);
                    continue;
                }
                let waiter = &queue[index];
                let mut session = self.new_session();
                session.db = waiter.db;
                session.protocol = waiter.protocol;
                session.authenticated = true;
                session.block_retry = true;
                let mut run = PipelineRun::deferring_sync(1);
                let command = command_index(&waiter.request[0]);
                self.execute_one(&mut session, &waiter.request, command, None, &mut run);
                self.commit_run(&mut run);
                self.metrics.add(&mut run.tally);
                let point = run.take_sync_point();
                drop(run.guards);
                let Some(reply) = run.replies.pop() else {
                    index += 1;
                    continue;
                };
                let waiter = queue.remove(index).expect("index is in the queue");
                // A client that left meanwhile drops its reply; the command's writes stand, as
                // they do in Redis for a client disconnected after its command ran.
                let _ = waiter.reply.send((reply, point));
                served = true;
            }
            if !served {
                break;
            }
        }
        self.waiters.count.store(queue.len(), Ordering::SeqCst);
    }
}
