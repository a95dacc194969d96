//! MULTI, EXEC, DISCARD, WATCH and UNWATCH.
//!
//! EXEC locks the stripes of every key its queued commands name (all stripes if one of them may
//! touch any key, or switches database), checks that no WATCHed key was written since WATCH, runs
//! the commands in one [`Tx`] and commits it as one engine batch: other clients see all of the
//! transaction or none of it, and so does a crash. A command that fails inside EXEC answers its
//! error and leaves no writes behind; the others still apply, as in Redis.

use super::{Ctx, Outcome, Session};
use crate::keyspace::now_ms;
use crate::resp::Reply;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

type Flag = Arc<AtomicBool>;

/// Every session's WATCHed keys: writers set the flags of the sessions watching what they wrote.
#[derive(Default)]
pub struct Watches {
    /// Keys watched, all sessions together: writers skip the map while it is zero.
    watched: AtomicUsize,
    keys: Mutex<HashMap<(usize, Bytes), Vec<Flag>>>,
}

impl Watches {
    /// How many keys are watched, all sessions together.
    pub fn watched_keys(&self) -> &AtomicUsize {
        &self.watched
    }

    /// Marks the sessions watching any of `keys` (written by a commit).
    pub fn touched(&self, keys: &[(usize, Bytes)]) {
        if keys.is_empty() || self.watched.load(Ordering::Acquire) == 0 {
            return;
        }
        let map = self.keys.lock();
        for (db, key) in keys {
            if let Some(flags) = map.get(&(*db, key.clone())) {
                flags
                    .iter()
                    .for_each(|flag| flag.store(true, Ordering::Release));
            }
        }
    }

    /// The keys of database `db` someone watches.
    pub fn watched_in(&self, db: usize) -> Vec<Bytes> {
        if self.watched.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        self.keys
            .lock()
            .keys()
            .filter(|(watched_db, _)| *watched_db == db)
            .map(|(_, key)| key.clone())
            .collect()
    }
}

/// One session's WATCH: its keys (with the expiry each had then) and its flag.
pub struct WatchState {
    registry: Arc<Watches>,
    keys: Vec<(usize, Bytes, Option<u64>)>,
    dirty: Flag,
}

impl WatchState {
    pub fn new(registry: Arc<Watches>) -> WatchState {
        WatchState {
            registry,
            keys: Vec::new(),
            dirty: Arc::new(AtomicBool::new(false)),
        }
    }

    fn watch(&mut self, db: usize, key: Bytes, expires_at: Option<u64>) {
        if self.keys.iter().any(|(d, k, _)| *d == db && *k == key) {
            return;
        }
        self.registry
            .keys
            .lock()
            .entry((db, key.clone()))
            .or_default()
            .push(self.dirty.clone());
        self.registry.watched.fetch_add(1, Ordering::AcqRel);
        self.keys.push((db, key, expires_at));
    }

    /// Whether a watched key was written, or expired, since WATCH.
    fn is_dirty(&self) -> bool {
        let now = now_ms();
        self.dirty.load(Ordering::Acquire)
            || self
                .keys
                .iter()
                .any(|(_, _, expires_at)| expires_at.is_some_and(|at| at <= now))
    }

    pub fn clear(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let mut map = self.registry.keys.lock();
        for (db, key, _) in self.keys.drain(..) {
            if let Some(flags) = map.get_mut(&(db, key.clone())) {
                flags.retain(|flag| !Arc::ptr_eq(flag, &self.dirty));
                if flags.is_empty() {
                    map.remove(&(db, key));
                }
            }
            self.registry.watched.fetch_sub(1, Ordering::AcqRel);
        }
        self.dirty.store(false, Ordering::Release);
    }
}

impl Drop for WatchState {
    fn drop(&mut self) {
        self.clear();
    }
}

pub(super) fn multi(ctx: &mut Ctx, _: &[Bytes]) -> Outcome {
    if ctx.session.multi.is_some() {
        return Err(Reply::error("ERR MULTI calls can not be nested"));
    }
    ctx.session.multi = Some(Vec::new());
    ctx.session.multi_failed = false;
    Ok(Reply::OK)
}

pub(super) fn discard(ctx: &mut Ctx, _: &[Bytes]) -> Outcome {
    if ctx.session.multi.take().is_none() {
        return Err(Reply::error("ERR DISCARD without MULTI"));
    }
    end_transaction(ctx.session);
    Ok(Reply::OK)
}

fn end_transaction(session: &mut Session) {
    session.multi = None;
    session.multi_bytes = 0;
    session.multi_failed = false;
    session.watch.clear();
}

pub(super) fn watch(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    if ctx.session.multi.is_some() {
        return Err(Reply::error("ERR WATCH inside MULTI is not allowed"));
    }
    let db = ctx.session.db;
    for key in &args[1..] {
        let expires_at = ctx.view().expires_at(key)?.filter(|&at| at > now_ms());
        ctx.session.watch.watch(db, key.clone(), expires_at);
    }
    Ok(Reply::OK)
}

pub(super) fn unwatch(ctx: &mut Ctx, _: &[Bytes]) -> Outcome {
    ctx.session.watch.clear();
    Ok(Reply::OK)
}

pub(super) fn exec(ctx: &mut Ctx, _: &[Bytes]) -> Outcome {
    let Some(queue) = ctx.session.multi.take() else {
        return Err(Reply::error("ERR EXEC without MULTI"));
    };
    if ctx.session.multi_failed {
        end_transaction(ctx.session);
        return Err(Reply::error(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    let shared = ctx.shared;
    // SELECT and MOVE inside the transaction: keys of other databases; lock everything.
    let switches_db = queue.iter().any(|request| {
        shared
            .command_of(&request.args)
            .is_some_and(|command| matches!(command.name, "SELECT" | "MOVE" | "SWAPDB"))
    });
    let guards = shared.lock(queue.iter().map(|request| &request.args[..]), switches_db);
    if ctx.session.watch.is_dirty() {
        end_transaction(ctx.session);
        return Ok(Reply::NilArray);
    }
    let mut tx = shared.tx();
    let mut replies = Vec::with_capacity(queue.len());
    ctx.session.in_exec = true;
    for request in queue {
        let Some(command) = shared.command_of(&request.args) else {
            replies.push(Reply::error("ERR unknown command"));
            continue;
        };
        let savepoint = tx.savepoint();
        ctx.session.streamed = request.streamed;
        match shared.run(
            command,
            ctx.session,
            &mut tx,
            ctx.deferred_sync,
            &request.args,
        ) {
            Ok(reply) => replies.push(reply),
            Err(error) => {
                tx.rollback(savepoint);
                replies.push(error);
            }
        }
        ctx.session.streamed.clear();
    }
    ctx.session.in_exec = false;
    let committed = shared.commit(&mut tx, ctx.deferred_sync);
    drop(guards);
    end_transaction(ctx.session);
    committed?;
    Ok(Reply::Array(replies))
}
