//! The lock table of a TransactionDB (RocksDB's PointLockManager): which transaction holds
//! each (column family, key), shared or exclusive. A transaction locks what it writes or reads
//! for update and keeps the locks until it commits or rolls back; a write made through the
//! TransactionDB outside a transaction locks its keys for its duration. A lock held by another
//! is waited for, as long as the waiter's timeout allows ("Operation timed out: Timeout waiting
//! to lock key"), unless its holder has expired (its locks may then be taken) or waiting would
//! close a cycle of waiters (with deadlock detection: "Resource busy: Deadlock").
//!
//! One map under one mutex, with one condition variable that every release signals: RocksDB's
//! stripes (`num_stripes`) are recorded and unused. Each column family holds at most
//! `max_locks` keys ("Operation aborted: Failed to acquire lock due to max_num_locks limit").

use crate::status::{Code, Result, Status};
use crate::write_set::show_key;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A transaction's number in the lock table (writes outside transactions get one too).
pub(crate) type TxnId = u64;

/// One lock request.
pub(crate) struct Request<'a> {
    pub txn: TxnId,
    pub cf: u32,
    pub cf_name: &'a str,
    pub key: &'a [u8],
    pub exclusive: bool,
    /// How long to wait for the lock.
    pub wait: Duration,
    /// With deadlock detection: how deep to search the waiters for a cycle.
    pub deadlock_depth: Option<usize>,
}

/// What a granted request changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Granted {
    /// The transaction did not hold the key before.
    New,
    /// It held it shared, and now exclusive.
    Upgraded,
    /// It held it already, in a mode that serves.
    Held,
}

struct Lock {
    owners: Vec<TxnId>,
    exclusive: bool,
}

/// Whether a transaction that may expire still runs, or has lost its locks.
#[derive(Clone, Copy)]
enum Expiry {
    Until(Instant),
    Stolen,
}

#[derive(Default)]
struct State {
    keys: HashMap<(u32, Vec<u8>), Lock>,
    per_cf: HashMap<u32, usize>,
    /// Transactions with an expiration that have not claimed their locks for a commit.
    expiring: HashMap<TxnId, Expiry>,
    /// What each waiting transaction waits for (for deadlock detection).
    waits_for: HashMap<TxnId, Vec<TxnId>>,
}

impl State {
    /// Whether `txn`'s locks may be taken from it now.
    fn expired(&self, txn: TxnId, now: Instant) -> bool {
        match self.expiring.get(&txn) {
            Some(Expiry::Until(deadline)) => now >= *deadline,
            Some(Expiry::Stolen) => true,
            None => false,
        }
    }

    /// The earliest time after `now` one of `holders` expires, if any does (one expired
    /// already changes nothing while another still holds the key).
    fn next_expiry(&self, holders: &[TxnId], now: Instant) -> Option<Instant> {
        holders
            .iter()
            .filter_map(|txn| match self.expiring.get(txn) {
                Some(Expiry::Until(deadline)) if *deadline > now => Some(*deadline),
                _ => None,
            })
            .min()
    }

    /// Whether waiting for `holders` would close a cycle back to `txn` within `depth` steps.
    fn would_deadlock(&self, txn: TxnId, holders: &[TxnId], depth: usize) -> bool {
        let mut frontier: Vec<TxnId> = holders.to_vec();
        let mut seen = HashSet::new();
        for _ in 0..depth {
            let mut next = Vec::new();
            for waiter in frontier {
                if waiter == txn {
                    return true;
                }
                if seen.insert(waiter) {
                    if let Some(waits) = self.waits_for.get(&waiter) {
                        next.extend_from_slice(waits);
                    }
                }
            }
            if next.is_empty() {
                return false;
            }
            frontier = next;
        }
        false
    }
}

/// Why a request cannot be granted now.
enum Blocked {
    By(Vec<TxnId>),
    Limit,
}

pub(crate) struct LockTable {
    state: Mutex<State>,
    released: Condvar,
    max_locks: usize,
    next_id: AtomicU64,
}

impl LockTable {
    /// A table holding at most `max_locks` keys per column family.
    pub fn new(max_locks: usize) -> LockTable {
        LockTable {
            state: Mutex::new(State::default()),
            released: Condvar::new(),
            max_locks,
            next_id: AtomicU64::new(1),
        }
    }

    /// A new transaction number.
    pub fn next_id(&self) -> TxnId {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Locks the key of `request` for its transaction, waiting as long as it allows.
    pub fn lock(&self, request: &Request<'_>) -> Result<Granted> {
        let start = Instant::now();
        let deadline = start + request.wait;
        let mut state = self.state.lock();
        loop {
            let now = Instant::now();
            if state.expired(request.txn, now) {
                return Err(expired(request.txn));
            }
            let holders = match self.try_lock(&mut state, request, now) {
                Ok(granted) => return Ok(granted),
                Err(Blocked::Limit) => {
                    return Err(Status::new(
                        Code::Aborted,
                        format!(
                            "Failed to acquire lock due to max_num_locks limit ({} keys locked in column family {})",
                            self.max_locks, request.cf_name
                        ),
                    ))
                }
                Err(Blocked::By(holders)) => holders,
            };
            if now >= deadline {
                return Err(Status::new(
                    Code::TimedOut,
                    format!(
                        "Timeout waiting to lock key {} in column family {} (waited {} ms; held by {} other transaction{})",
                        show_key(request.key),
                        request.cf_name,
                        start.elapsed().as_millis(),
                        holders.len(),
                        if holders.len() == 1 { "" } else { "s" }
                    ),
                ));
            }
            if let Some(depth) = request.deadlock_depth {
                if state.would_deadlock(request.txn, &holders, depth) {
                    return Err(Status::new(
                        Code::Busy,
                        format!(
                            "Deadlock: waiting to lock key {} in column family {} would close a cycle of waiting transactions",
                            show_key(request.key),
                            request.cf_name
                        ),
                    ));
                }
            }
            let until = state
                .next_expiry(&holders, now)
                .map_or(deadline, |expiry| expiry.min(deadline));
            state.waits_for.insert(request.txn, holders);
            self.released.wait_until(&mut state, until);
            state.waits_for.remove(&request.txn);
        }
    }

    fn try_lock(
        &self,
        state: &mut State,
        request: &Request<'_>,
        now: Instant,
    ) -> std::result::Result<Granted, Blocked> {
        let slot = (request.cf, request.key.to_vec());
        if let Some(lock) = state.keys.get(&slot) {
            let mine = lock.owners.contains(&request.txn);
            if !lock.exclusive && !request.exclusive {
                if mine {
                    return Ok(Granted::Held);
                }
                let lock = state.keys.get_mut(&slot).expect("looked up above");
                lock.owners.push(request.txn);
                return Ok(Granted::New);
            }
            let others: Vec<TxnId> = lock
                .owners
                .iter()
                .copied()
                .filter(|owner| *owner != request.txn)
                .collect();
            if others.is_empty() {
                let lock = state.keys.get_mut(&slot).expect("looked up above");
                if request.exclusive && !lock.exclusive {
                    lock.exclusive = true;
                    return Ok(Granted::Upgraded);
                }
                return Ok(Granted::Held);
            }
            if !others.iter().all(|owner| state.expired(*owner, now)) {
                return Err(Blocked::By(others));
            }
            // Every other holder has expired: their locks are taken, and they can no longer
            // commit (RocksDB's lock stealing).
            for owner in &others {
                state.expiring.insert(*owner, Expiry::Stolen);
            }
            let lock = state.keys.get_mut(&slot).expect("looked up above");
            lock.owners = vec![request.txn];
            lock.exclusive = request.exclusive;
            return Ok(if mine {
                Granted::Upgraded
            } else {
                Granted::New
            });
        }
        let count = state.per_cf.entry(request.cf).or_default();
        if *count >= self.max_locks {
            return Err(Blocked::Limit);
        }
        *count += 1;
        state.keys.insert(
            slot,
            Lock {
                owners: vec![request.txn],
                exclusive: request.exclusive,
            },
        );
        Ok(Granted::New)
    }

    /// Makes `txn`'s exclusive lock of a key shared again (an upgrade whose validation failed).
    pub fn downgrade(&self, txn: TxnId, cf: u32, key: &[u8]) {
        let mut state = self.state.lock();
        if let Some(lock) = state.keys.get_mut(&(cf, key.to_vec())) {
            if lock.owners == [txn] {
                lock.exclusive = false;
            }
        }
        drop(state);
        self.released.notify_all();
    }

    /// Releases `txn`'s locks of `keys` (those it no longer holds, taken by others after it
    /// expired, are left alone).
    pub fn unlock<'a>(&self, txn: TxnId, keys: impl IntoIterator<Item = (u32, &'a [u8])>) {
        let mut state = self.state.lock();
        let State {
            keys: locks,
            per_cf,
            ..
        } = &mut *state;
        for (cf, key) in keys {
            let slot = (cf, key.to_vec());
            let Some(lock) = locks.get_mut(&slot) else {
                continue;
            };
            lock.owners.retain(|owner| *owner != txn);
            if lock.owners.is_empty() {
                locks.remove(&slot);
                if let Some(count) = per_cf.get_mut(&cf) {
                    *count = count.saturating_sub(1);
                }
            }
        }
        drop(state);
        self.released.notify_all();
    }

    /// From now, `txn`'s locks may be taken by others once `after` has passed.
    pub fn set_expiration(&self, txn: TxnId, after: Duration) {
        self.state
            .lock()
            .expiring
            .insert(txn, Expiry::Until(Instant::now() + after));
    }

    /// `txn` is about to prepare or commit: it can no longer expire, unless it has already
    /// ("Operation expired").
    pub fn claim(&self, txn: TxnId) -> Result<()> {
        let mut state = self.state.lock();
        if state.expired(txn, Instant::now()) {
            state.expiring.insert(txn, Expiry::Stolen);
            return Err(expired(txn));
        }
        state.expiring.remove(&txn);
        Ok(())
    }

    /// `txn` is gone: its expiration is forgotten.
    pub fn forget(&self, txn: TxnId) {
        self.state.lock().expiring.remove(&txn);
    }

    /// Keys locked, in all column families.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.state.lock().keys.len()
    }
}

fn expired(txn: TxnId) -> Status {
    Status::new(
        Code::Expired,
        format!(
            "transaction {txn} ran past its expiration; its locks may have been taken by others"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn request(txn: TxnId, key: &'static [u8], exclusive: bool, wait_ms: u64) -> Request<'static> {
        Request {
            txn,
            cf: 0,
            cf_name: "default",
            key,
            exclusive,
            wait: Duration::from_millis(wait_ms),
            deadlock_depth: None,
        }
    }

    #[test]
    fn exclusive_locks_exclude_and_shared_locks_share() {
        let table = LockTable::new(100);
        assert_eq!(
            table.lock(&request(1, b"k", true, 0)).unwrap(),
            Granted::New
        );
        assert_eq!(
            table.lock(&request(1, b"k", true, 0)).unwrap(),
            Granted::Held
        );
        let status = table.lock(&request(2, b"k", false, 0)).unwrap_err();
        assert_eq!(status.code, Code::TimedOut);
        assert!(
            status
                .to_string()
                .starts_with("Operation timed out: Timeout waiting to lock key k"),
            "{status}"
        );
        table.unlock(1, [(0, &b"k"[..])]);
        assert_eq!(
            table.lock(&request(2, b"k", false, 0)).unwrap(),
            Granted::New
        );
        assert_eq!(
            table.lock(&request(3, b"k", false, 0)).unwrap(),
            Granted::New
        );
        // An upgrade waits for the other sharer.
        assert!(table.lock(&request(2, b"k", true, 0)).is_err());
        table.unlock(3, [(0, &b"k"[..])]);
        assert_eq!(
            table.lock(&request(2, b"k", true, 0)).unwrap(),
            Granted::Upgraded
        );
        table.downgrade(2, 0, b"k");
        assert_eq!(
            table.lock(&request(4, b"k", false, 0)).unwrap(),
            Granted::New
        );
        table.unlock(2, [(0, &b"k"[..])]);
        table.unlock(4, [(0, &b"k"[..])]);
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn a_waiter_gets_the_lock_when_it_is_released() {
        let table = Arc::new(LockTable::new(100));
        table.lock(&request(1, b"k", true, 0)).unwrap();
        let waiter = {
            let table = table.clone();
            std::thread::spawn(move || table.lock(&request(2, b"k", true, 10_000)))
        };
        std::thread::sleep(Duration::from_millis(50));
        table.unlock(1, [(0, &b"k"[..])]);
        assert_eq!(waiter.join().unwrap().unwrap(), Granted::New);
    }

    #[test]
    fn a_wait_ends_at_its_timeout() {
        let table = LockTable::new(100);
        table.lock(&request(1, b"k", true, 0)).unwrap();
        let start = Instant::now();
        let status = table.lock(&request(2, b"k", true, 30)).unwrap_err();
        assert_eq!(status.code, Code::TimedOut);
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn locks_per_column_family_are_bounded() {
        let table = LockTable::new(2);
        table.lock(&request(1, b"a", true, 0)).unwrap();
        table.lock(&request(1, b"b", true, 0)).unwrap();
        let status = table.lock(&request(1, b"c", true, 0)).unwrap_err();
        assert_eq!(status.code, Code::Aborted);
        assert!(
            status.to_string().contains("max_num_locks limit"),
            "{status}"
        );
        // Another column family has its own count; a key held already needs no new lock.
        let mut other = request(1, b"c", true, 0);
        other.cf = 1;
        table.lock(&other).unwrap();
        assert_eq!(
            table.lock(&request(1, b"a", true, 0)).unwrap(),
            Granted::Held
        );
        table.unlock(1, [(0, &b"a"[..])]);
        table.lock(&request(1, b"c", true, 0)).unwrap();
    }

    #[test]
    fn an_expired_holder_loses_its_locks_and_cannot_commit() {
        let table = LockTable::new(100);
        table.set_expiration(1, Duration::from_millis(20));
        table.lock(&request(1, b"k", true, 0)).unwrap();
        // Before the expiration the lock is held; a waiter is woken when it passes.
        assert_eq!(
            table.lock(&request(2, b"k", true, 1000)).unwrap(),
            Granted::New
        );
        assert_eq!(table.claim(1).unwrap_err().code, Code::Expired);
        assert_eq!(
            table.lock(&request(1, b"j", true, 0)).unwrap_err().code,
            Code::Expired
        );
        // A transaction that claims in time cannot expire afterwards.
        table.set_expiration(3, Duration::from_millis(20));
        table.lock(&request(3, b"m", true, 0)).unwrap();
        table.claim(3).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        assert!(table.lock(&request(4, b"m", true, 0)).is_err());
    }

    #[test]
    fn a_cycle_of_waiters_is_a_deadlock() {
        let table = Arc::new(LockTable::new(100));
        table.lock(&request(1, b"a", true, 0)).unwrap();
        table.lock(&request(2, b"b", true, 0)).unwrap();
        let first = {
            let table = table.clone();
            std::thread::spawn(move || {
                let mut wait = request(1, b"b", true, 5_000);
                wait.deadlock_depth = Some(50);
                table.lock(&wait)
            })
        };
        // Let transaction 1 wait for 2; then 2 waiting for 1 closes the cycle.
        std::thread::sleep(Duration::from_millis(100));
        let mut closing = request(2, b"a", true, 5_000);
        closing.deadlock_depth = Some(50);
        let status = table.lock(&closing).unwrap_err();
        assert_eq!(status.code, Code::Busy);
        assert!(
            status.to_string().starts_with("Resource busy: Deadlock"),
            "{status}"
        );
        table.unlock(2, [(0, &b"b"[..])]);
        assert_eq!(first.join().unwrap().unwrap(), Granted::New);
    }
}
