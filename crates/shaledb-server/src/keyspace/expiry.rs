//! Key expiry: EXPIRE's conditions, and finding the keys the background expirer must remove.
//!
//! A key's expiry time is a record of the key (`base 0xFE`) plus an entry in the database's
//! expiry queue (`1 time base`), written and deleted together. Reads treat a key past its time as
//! missing at once; the background expirer (in `commands`) removes it for good, taking the due
//! keys from the front of the queue, so it never scans the keyspace.

use super::tx::View;
use super::{damaged, now_ms, Keyspace, Result, EXPIRY_QUEUE};
use bytes::Bytes;

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

/// Up to `limit` keys of `space` whose expiry time has passed, earliest first.
pub fn expire_due(space: &Keyspace, limit: usize) -> Result<Vec<Bytes>> {
    let now = now_ms();
    let mut due = Vec::new();
    for record in space.space().kvs.prefix([EXPIRY_QUEUE]).keys().take(limit) {
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
