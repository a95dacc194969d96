//! Key expiry: EXPIRE's conditions, and finding the keys the background expirer must remove.
//!
//! A key's expiry time is a record of the key (`base 0xFE`) plus an entry in the database's
//! expiry queue (`1 time base`), written and deleted together. Reads treat a key past its time as
//! missing at once; the background expirer (in `commands`) removes it for good, taking the due
//! keys from the front of the queue, so it never scans the keyspace.

use super::tx::View;
use super::{damaged, now_ms, stripe_of, Keyspace, Result, EXPIRY_QUEUE, STRIPES};
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};

/// EXPIRE's NX, XX, GT and LT options (XX combines with GT or LT; NX with neither).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireCondition {
    /// Only if the key has no expiry.
    pub if_none: bool,
    /// Only if the key has an expiry.
    pub if_some: bool,
    /// Only if the new time is later (no expiry counts as infinitely late).
    pub if_later: bool,
    /// Only if the new time is earlier.
    pub if_earlier: bool,
}

impl ExpireCondition {
    pub const ALWAYS: ExpireCondition = ExpireCondition {
        if_none: false,
        if_some: false,
        if_later: false,
        if_earlier: false,
    };

    fn allows(&self, old: Option<u64>, at: u64) -> bool {
        !(self.if_none && old.is_some()
            || self.if_some && old.is_none()
            || self.if_later && old.is_none_or(|old| at <= old)
            || self.if_earlier && old.is_some_and(|old| at >= old))
    }
}

impl View<'_, '_> {
    /// Sets `key`'s expiry to `at` (unix ms) if it exists and `condition` holds; a time already
    /// past deletes the key, as in Redis. Returns whether anything changed.
    pub fn expire(&mut self, key: &[u8], at: u64, condition: ExpireCondition) -> Result<bool> {
        if self.key_type(key)?.is_none() {
            return Ok(false);
        }
        let old = self.expires_at(key)?;
        let allowed = condition.allows(old, at);
        if !allowed {
            return Ok(false);
        }
        if at <= now_ms() {
            self.remove_key(key)?;
        } else {
            self.write_expiry(key, old, Some(at))?;
        }
        Ok(true)
    }

    /// Removes `key`'s expiry; returns whether it had one.
    pub fn persist(&mut self, key: &[u8]) -> Result<bool> {
        if self.key_type(key)?.is_none() {
            return Ok(false);
        }
        let old = self.expires_at(key)?;
        self.write_expiry(key, old, None)?;
        Ok(old.is_some())
    }

    /// Removes `key` if its expiry time has passed (the caller holds its stripe lock).
    pub fn remove_if_expired(&mut self, key: &[u8]) -> Result<bool> {
        match self.expires_at(key)? {
            Some(at) if at <= now_ms() => self.remove_key(key).map(|_| true),
            _ => Ok(false),
        }
    }
}

/// Per stripe, at least the number of its keys with an expiry record, and their total: a key of
/// a stripe at zero has none, and a read skips the seek for it (`View::expires_at`), as Redis
/// skips its expires table while that is empty; a database at zero has an empty expiry queue,
/// and the background expirer skips its scan. Kept in DRAM only: counted from the expiry queue
/// at open, raised before a transaction writes a new expiry record (so a reader never sees one
/// its stripe's count misses) and lowered only once a commit has deleted one. A transaction that
/// fails or rolls back leaves it high, which costs a seek, never a wrong answer.
pub(super) struct ExpiryCounts {
    per_stripe: Vec<AtomicU64>,
    total: AtomicU64,
}

impl ExpiryCounts {
    pub(super) fn new() -> ExpiryCounts {
        ExpiryCounts {
            per_stripe: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            total: AtomicU64::new(0),
        }
    }

    /// Replaces the counts with each stripe's entries in the expiry queue (keys only: no value
    /// is read), including what an upgrade counted as it wrote.
    pub(super) fn load(&self, space: &super::Space) -> Result<()> {
        let mut per_stripe = vec![0u64; STRIPES];
        for record in space.kvs.prefix([EXPIRY_QUEUE]).keys() {
            let (_, key) = queue_entry(&record?)?;
            per_stripe[stripe_of(&key)] += 1;
        }
        self.total.store(per_stripe.iter().sum(), Ordering::SeqCst);
        for (count, loaded) in self.per_stripe.iter().zip(per_stripe) {
            count.store(loaded, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Before a new expiry record for `key` is written anywhere: no reader may skip it.
    pub(super) fn raise(&self, key: &[u8]) {
        self.total.fetch_add(1, Ordering::SeqCst);
        self.per_stripe[stripe_of(key)].fetch_add(1, Ordering::SeqCst);
    }

    /// Once a commit has deleted an expiry record of a key of `stripe`.
    pub(super) fn lower(&self, stripe: usize) {
        self.per_stripe[stripe].fetch_sub(1, Ordering::SeqCst);
        self.total.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether `key` may have an expiry record. The total first: with no key expiring (a
    /// raise counts it before its stripe, a lower after), no key's hash or stripe count need be
    /// read.
    pub(super) fn may_expire(&self, key: &[u8]) -> bool {
        self.any() && self.per_stripe[stripe_of(key)].load(Ordering::SeqCst) != 0
    }

    /// Whether any key of the database may have an expiry record.
    pub(super) fn any(&self) -> bool {
        self.total.load(Ordering::SeqCst) != 0
    }

    #[cfg(test)]
    pub(super) fn per_stripe(&self) -> Vec<u64> {
        self.per_stripe
            .iter()
            .map(|count| count.load(Ordering::SeqCst))
            .collect()
    }
}

/// Up to `limit` keys of `space` whose expiry time has passed, earliest first.
pub fn expire_due(space: &Keyspace, limit: usize) -> Result<Vec<Bytes>> {
    let space = space.space();
    if !space.expiring.any() {
        // Scanning an empty queue costs a snapshot and a probe of every index partition,
        // ten times a second for each of the 16 databases.
        return Ok(Vec::new());
    }
    let now = now_ms();
    let mut due = Vec::new();
    for record in space.kvs.prefix([EXPIRY_QUEUE]).keys().take(limit) {
        let (at, key) = queue_entry(&record?)?;
        if at > now {
            break;
        }
        due.push(key);
    }
    Ok(due)
}

/// The time and the key of an expiry queue entry (`1 time base`).
pub(super) fn queue_entry(record: &Bytes) -> Result<(u64, Bytes)> {
    let at = record
        .get(1..9)
        .and_then(|time| time.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| damaged("an expiry queue entry without its time", record))?;
    let base = &record[9..];
    let length = base
        .get(..4)
        .map(|length| u32::from_be_bytes([length[0], length[1], length[2], length[3]]) as usize)
        .filter(|&length| base.len() == 4 + length)
        .ok_or_else(|| damaged("an expiry queue entry without a key", record))?;
    Ok((at, record.slice(13..13 + length)))
}
