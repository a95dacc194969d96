//! Key expiry: EXPIRE's conditions, and finding the keys the background expirer must remove.
//!
//! A key's expiry time is a record of the key (`base 0xFE`) plus an entry in the database's
//! expiry queue (`1 time base`), written and deleted together. Reads treat a key past its time as
//! missing at once; the background expirer (in `commands`) removes it for good, taking the due
//! keys from the front of the queue, so it never scans the keyspace.

use super::tx::View;
use super::{damaged, now_ms, read_u64, Keyspace, Result, EXPIRY_QUEUE};
use bytes::Bytes;

/// EXPIRE's NX, XX, GT and LT options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireCondition {
    Always,
    /// Only if the key has no expiry.
    IfNone,
    /// Only if the key has an expiry.
    IfSome,
    /// Only if the new time is later (no expiry counts as infinitely late).
    IfLater,
    /// Only if the new time is earlier.
    IfEarlier,
}

impl View<'_, '_> {
    /// Sets `key`'s expiry to `at` (unix ms) if it exists and `condition` holds; a time already
    /// past deletes the key, as in Redis. Returns whether anything changed.
    pub fn expire(&mut self, key: &[u8], at: u64, condition: ExpireCondition) -> Result<bool> {
        if self.key_type(key)?.is_none() {
            return Ok(false);
        }
        let old = self.expires_at(key)?;
        let allowed = match (condition, old) {
            (ExpireCondition::Always, _) => true,
            (ExpireCondition::IfNone, old) => old.is_none(),
            (ExpireCondition::IfSome, old) => old.is_some(),
            (ExpireCondition::IfLater, Some(old)) => at > old,
            (ExpireCondition::IfLater, None) => false,
            (ExpireCondition::IfEarlier, Some(old)) => at < old,
            (ExpireCondition::IfEarlier, None) => true,
        };
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
    for record in space.kvs.prefix([EXPIRY_QUEUE]).keys().take(limit) {
        let record = record?;
        let at = read_u64(&record[1..], "an expiry queue entry")?;
        if at > now {
            break;
        }
        let base = &record[9..];
        let length = base
            .get(..4)
            .map(|length| u32::from_be_bytes([length[0], length[1], length[2], length[3]]) as usize)
            .filter(|&length| base.len() == 4 + length)
            .ok_or_else(|| damaged("an expiry queue entry without a key", &record))?;
        due.push(record.slice(13..13 + length));
    }
    Ok(due)
}
