//! Strings: one record per string (`base s`), its expiry kept apart like every type's.

use super::tx::View;
use super::{damaged, now_ms, read_u64, record_key, tag, KeyType, Result};
use bytes::{Bytes, BytesMut};

/// Strings up to this long are one record; longer ones are cut into chunks of this size.
const CHUNK_BYTES: usize = 512 << 10;

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
        let data = match self.record(&record_key(key, tag::STRING, &[])?)? {
            Some(data) => data,
            // A miss: only now pay the seek that tells a missing or long string from another type.
            None => match self.check_type(key, KeyType::String)? {
                false => return Ok(None),
                true => self.read_chunks(key)?,
            },
        };
        if self.expires_at(key)?.is_some_and(|at| at <= now_ms()) {
            return Ok(None);
        }
        Ok(Some(data))
    }

    /// A chunked string, whole.
    fn read_chunks(&self, key: &[u8]) -> Result<Bytes> {
        let header = record_key(key, tag::CHUNKED_STRING, &[])?;
        let value = self
            .record(&header)?
            .ok_or_else(|| damaged("a string without its record", &header))?;
        let length = read_u64(&value, "a chunked string's length")? as usize;
        let mut data = BytesMut::with_capacity(length);
        let from = record_key(key, tag::STRING_CHUNK, &[])?;
        let to = record_key(key, tag::STRING_CHUNK + 1, &[])?;
        for (index, item) in self.records(from, to, true).enumerate() {
            let (record, chunk) = item?;
            let expected = record_key(key, tag::STRING_CHUNK, &(index as u32).to_be_bytes())?;
            if record != expected {
                return Err(damaged("a chunk out of place in a long string", &record));
            }
            data.extend_from_slice(&chunk);
        }
        if data.len() != length {
            return Err(damaged("a long string whose chunks miss bytes", &header));
        }
        Ok(data.freeze())
    }

    /// Sets `key` to a string, replacing whatever it held, of any type.
    pub fn set_string(&mut self, key: &[u8], data: &[u8], expiry: SetExpiry) -> Result<()> {
        let record = record_key(key, tag::STRING, &[])?;
        let header = record_key(key, tag::CHUNKED_STRING, &[])?;
        let old_expiry = self.expires_at(key)?;
        let expired = old_expiry.is_some_and(|at| at <= now_ms());
        let new_expiry = match expiry {
            SetExpiry::Clear => None,
            SetExpiry::Keep if expired => None,
            SetExpiry::Keep => old_expiry,
            SetExpiry::At(at) => Some(at),
        };
        let chunked = self.record_exists(&header)?;
        if chunked || self.record_exists(&record)? {
            // A string (live or past its time) is overwritten in place: the key stays counted.
            self.write_expiry(key, old_expiry, new_expiry)?;
        } else {
            self.remove_key(key)?;
            self.created(key);
            self.write_expiry(key, None, new_expiry)?;
        }
        if chunked {
            self.delete_record(&header);
            self.clear(record_key(key, tag::STRING_CHUNK, &[])?);
        }
        if data.len() <= CHUNK_BYTES {
            self.put_record(record, Bytes::copy_from_slice(data));
        } else {
            self.delete_record(&record);
            self.put_record(
                header,
                Bytes::copy_from_slice(&(data.len() as u64).to_be_bytes()),
            );
            for (index, chunk) in data.chunks(CHUNK_BYTES).enumerate() {
                let chunk_key = record_key(key, tag::STRING_CHUNK, &(index as u32).to_be_bytes())?;
                self.put_record(chunk_key, Bytes::copy_from_slice(chunk));
            }
        }
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
