//! Strings: one record per string (`base s`), its expiry kept apart like every type's.

use super::tx::View;
use super::{now_ms, record_key, tag, KeyType, Result};
use bytes::Bytes;

/// A string and its expiry time, if it has one.
#[derive(Debug, Clone)]
pub struct StringValue {
    pub data: Bytes,
    pub expires_at_ms: Option<u64>,
}

/// SET's NX and XX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetCondition {
    Always,
    IfMissing,
    IfExists,
}

/// What a write does to the key's expiry time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetExpiry {
    /// Remove it (SET's default).
    Clear,
    /// Keep it (KEEPTTL, and every command that changes a string in place: APPEND, INCR, ...).
    Keep,
    /// Expire at this unix time in ms.
    At(u64),
}

impl View<'_, '_> {
    /// The string at `key`; none when missing or expired; WRONGTYPE for other types.
    pub fn get_string(&self, key: &[u8]) -> Result<Option<Bytes>> {
        if let Some(data) = self.record(&record_key(key, tag::STRING, &[])?)? {
            if self.expires_at(key)?.is_some_and(|at| at <= now_ms()) {
                return Ok(None);
            }
            return Ok(Some(data));
        }
        // A miss: only now pay the seek that tells a missing key from one of another type.
        self.check_type(key, KeyType::String)?;
        Ok(None)
    }

    /// The string at `key` with its expiry time.
    pub fn get_string_with_expiry(&self, key: &[u8]) -> Result<Option<StringValue>> {
        let Some(data) = self.get_string(key)? else {
            return Ok(None);
        };
        Ok(Some(StringValue {
            data,
            expires_at_ms: self.expires_at(key)?,
        }))
    }

    /// Sets `key` to a string, replacing whatever it held, of any type.
    pub fn set_string(&mut self, key: &[u8], data: &[u8], expiry: SetExpiry) -> Result<()> {
        let record = record_key(key, tag::STRING, &[])?;
        let old_expiry = self.expires_at(key)?;
        let expired = old_expiry.is_some_and(|at| at <= now_ms());
        let new_expiry = match expiry {
            SetExpiry::Clear => None,
            SetExpiry::Keep if expired => None,
            SetExpiry::Keep => old_expiry,
            SetExpiry::At(at) => Some(at),
        };
        if self.record_exists(&record)? {
            // A string (live or past its time) is overwritten in place: the key stays counted.
            self.write_expiry(key, old_expiry, new_expiry)?;
        } else {
            self.remove_key(key)?;
            self.created(key);
            self.write_expiry(key, None, new_expiry)?;
        }
        self.put_record(record, Bytes::copy_from_slice(data));
        self.touch(key);
        Ok(())
    }

    /// SET with its conditions; returns whether it wrote.
    pub fn set_string_if(
        &mut self,
        key: &[u8],
        data: &[u8],
        condition: SetCondition,
        expiry: SetExpiry,
    ) -> Result<bool> {
        if condition != SetCondition::Always {
            let exists = self.key_type(key)?.is_some();
            if exists != (condition == SetCondition::IfExists) {
                return Ok(false);
            }
        }
        self.set_string(key, data, expiry)?;
        Ok(true)
    }
}
