//! Strings: one record per string (`base s`), or a header (`base c`) naming the blob that holds
//! a string longer than a chunk; its expiry kept apart like every type's.

use super::blobs::{decode_header, stage_bytes, BlobReader, StagedBlob, CHUNK_BYTES};
use super::tx::View;
use super::{now_ms, record_key, tag, Failure, KeyType, Result};
use bytes::Bytes;

/// Reads of a long string, or of a collection by a reader that holds no lock, that start over
/// because a writer replaced it meanwhile, at most.
pub(super) const READ_ATTEMPTS: usize = 100;

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

/// A string as stored: in one record, or in a blob read chunk by chunk.
pub enum StringValue {
    Inline(Bytes),
    Blob(BlobReader),
}

impl StringValue {
    pub fn len(&self) -> u64 {
        match self {
            StringValue::Inline(data) => data.len() as u64,
            StringValue::Blob(reader) => reader.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a write makes a string hold: bytes at hand (a request's argument among them, copied
/// once, by `View::put_record`), or a blob its client sent.
/// A live short string found by `View::live_short_string`: its value and where it is stored.
pub struct ShortString {
    record: Vec<u8>,
    pub value: Bytes,
}

pub enum StringInput<'a> {
    Bytes(&'a [u8]),
    Staged(StagedBlob),
}

impl<'a> From<&'a [u8]> for StringInput<'a> {
    fn from(data: &'a [u8]) -> Self {
        StringInput::Bytes(data)
    }
}

impl<'a> From<&'a Bytes> for StringInput<'a> {
    fn from(data: &'a Bytes) -> Self {
        StringInput::Bytes(data)
    }
}

impl<'a> From<&'a Vec<u8>> for StringInput<'a> {
    fn from(data: &'a Vec<u8>) -> Self {
        StringInput::Bytes(data)
    }
}

impl View<'_, '_> {
    /// The string at `key`, whole in memory; none when missing or expired; WRONGTYPE for other
    /// types; an error for a string longer than the transaction lets a command hold.
    pub fn get_string(&self, key: &[u8]) -> Result<Option<Bytes>> {
        match self.get_string_value(key)? {
            None => Ok(None),
            Some(StringValue::Inline(data)) => Ok(Some(data)),
            Some(StringValue::Blob(reader)) => {
                let limit = self.string_bytes_max();
                if reader.len() > limit as u64 {
                    return Err(Failure::Invalid(format!(
                        "ERR the string is {} bytes, more than max_in_memory_string_bytes ({limit}) \
                         that this command reads whole",
                        reader.len()
                    )));
                }
                Ok(Some(reader.read_all()?))
            }
        }
    }

    /// The string at `key` as stored (a long one is read as its reader asks); none when missing
    /// or expired; WRONGTYPE for other types.
    pub fn get_string_value(&self, key: &[u8]) -> Result<Option<StringValue>> {
        let value = match self.record(&record_key(key, tag::STRING, &[])?)? {
            Some(data) => StringValue::Inline(data),
            // A miss: only now pay the seek that tells a missing or long string from another type.
            None => match self.check_type(key, KeyType::String)? {
                false => return Ok(None),
                // Read again at one snapshot: a writer may have replaced the long string by a
                // short one since the record above was read, and the key never went missing.
                true => match self.string_at_snapshot(key)? {
                    Some(value) => value,
                    // Removed since the type was read: as if read after.
                    None => return Ok(None),
                },
            },
        };
        if self.expires_at(key)?.is_some_and(|at| at <= now_ms()) {
            return Ok(None);
        }
        Ok(Some(value))
    }

    /// The string `key` holds at one engine snapshot (this transaction's own writes first): its
    /// record, or a reader of its blob. The blob is pinned, then its header read again: if it
    /// still names the blob, no writer has released it (a writer releases after its commit, and
    /// would find the pin), so its chunks stay until the reader is done; if not, the read starts
    /// over at a new snapshot.
    pub(super) fn string_at_snapshot(&self, key: &[u8]) -> Result<Option<StringValue>> {
        let space = self.space();
        let header = record_key(key, tag::CHUNKED_STRING, &[])?;
        for _ in 0..READ_ATTEMPTS {
            let snapshot = space.db.snapshot()?;
            let read = |record: &[u8]| -> Result<Option<Bytes>> {
                match self.pending(record) {
                    Some(value) => Ok(value),
                    None => Ok(snapshot.get(&space.kvs, record)?),
                }
            };
            if let Some(data) = read(&record_key(key, tag::STRING, &[])?)? {
                return Ok(Some(StringValue::Inline(data)));
            }
            let Some(value) = read(&header)? else {
                return Ok(None);
            };
            let (length, id) = decode_header(&value, &header)?;
            let reader = BlobReader::new(&space, id, length);
            if self.record(&header)?.as_deref() == Some(&value[..]) {
                return Ok(Some(StringValue::Blob(reader)));
            }
        }
        Err(Failure::Invalid(format!(
            "ERR the string was replaced {READ_ATTEMPTS} times while it was read; try again"
        )))
    }

    /// The length of the string at `key` (0 when missing), without reading a long one.
    pub fn string_length(&self, key: &[u8]) -> Result<u64> {
        Ok(self.get_string_value(key)?.map_or(0, |value| value.len()))
    }

    /// Sets `key` to a string, replacing whatever it held, of any type.
    pub fn set_string<'a>(
        &mut self,
        key: &[u8],
        data: impl Into<StringInput<'a>>,
        expiry: SetExpiry,
    ) -> Result<()> {
        let record = record_key(key, tag::STRING, &[])?;
        let old_expiry = self.expires_at(key)?;
        let expired = old_expiry.is_some_and(|at| at <= now_ms());
        let new_expiry = match expiry {
            SetExpiry::Clear => None,
            SetExpiry::Keep if expired => None,
            SetExpiry::Keep => old_expiry,
            SetExpiry::At(at) => Some(at),
        };
        // A key holds a short string's record or a long one's header, never both; a long one's
        // header is its first record. Without a short string the key's first record is read
        // once: it answers this and, kept by the transaction, `remove_key`'s type check below.
        let short = self.record_exists(&record)?;
        let chunked =
            !short && self.stored_tag(key)?.map(|(_, tag)| tag) == Some(tag::CHUNKED_STRING);
        if short || chunked {
            // A string (live or past its time) is overwritten in place: the key stays counted.
            self.write_expiry(key, old_expiry, new_expiry)?;
            if chunked {
                self.unlink_blob(key)?;
            }
        } else {
            self.remove_key(key)?;
            self.created(key);
            self.write_expiry(key, None, new_expiry)?;
        }
        // A short string lives in its record (the bytes to put), a long one in a blob.
        let stored = match data.into() {
            StringInput::Bytes(data) if data.len() <= CHUNK_BYTES => Ok(data),
            StringInput::Bytes(data) => Err(stage_bytes(&self.space(), data)?),
            StringInput::Staged(blob) => Err(blob),
        };
        match stored {
            Ok(short) => self.put_record(record, short),
            Err(blob) => {
                self.delete_record(&record);
                self.link_blob(key, blob)?;
            }
        }
        self.touch(key);
        Ok(())
    }

    /// The live short string at `key`, to rewrite in place (`rewrite_short_string`): INCR's read
    /// and write with one lookup of its record, where reading through `get_string` and writing
    /// through `set_string` looked the record and the expiry up twice. `None` when the key holds
    /// anything else (nothing, an expired or long string, another type): then the caller reads
    /// and writes it the general way.
    pub fn live_short_string(&self, key: &[u8]) -> Result<Option<ShortString>> {
        let record = record_key(key, tag::STRING, &[])?;
        let Some(value) = self.record(&record)? else {
            return Ok(None);
        };
        if self.expires_at(key)?.is_some_and(|at| at <= now_ms()) {
            return Ok(None);
        }
        Ok(Some(ShortString { record, value }))
    }

    /// Replaces the string `found` with `data` (short: at most a chunk), keeping its expiry; the
    /// key stays counted.
    pub fn rewrite_short_string(&mut self, key: &[u8], found: ShortString, data: &[u8]) {
        debug_assert!(data.len() <= CHUNK_BYTES);
        self.put_record(found.record, data);
        self.touch(key);
    }

    /// SET with its conditions; returns whether it wrote.
    pub fn set_string_if<'a>(
        &mut self,
        key: &[u8],
        data: impl Into<StringInput<'a>>,
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
