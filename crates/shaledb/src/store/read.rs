//! The read path: a key's version from the index, then its value from the value cache, the log
//! heads' write buffers, or one direct read of the sectors its record spans, validated against
//! what the index expects.

use super::kvs_set::KvsState;
use super::Store;
use crate::error::{Error, Result};
use crate::index::Entry;
use crate::media::ReadPurpose;
use crate::record::{self, validate_key};
use bytes::Bytes;

/// A read that finds its segment freed (the cleaner moved the record) looks the key up again;
/// more than this many times in a row means something is wrong.
const READ_RETRIES_MAX: usize = 16;

impl Store {
    /// The value of `key` in `kvs` at snapshot `at` (newest if `None`).
    pub fn get(&self, kvs: &KvsState, key: &[u8], at: Option<u64>) -> Result<Option<Bytes>> {
        validate_key(key)?;
        self.counters.gets.add(1);
        for _ in 0..READ_RETRIES_MAX {
            let entry = {
                let index = kvs.index.read();
                match at {
                    None => index.get(key),
                    Some(seqno) => index.get_at(key, seqno),
                }
            };
            let Some(entry) = entry else {
                return Ok(None);
            };
            if let Some(value) = self.read_value(kvs.id, key, entry, ReadPurpose::Get)? {
                return Ok(Some(value));
            }
        }
        Err(Error::Io {
            context: format!("get from KVS {:?}", kvs.name),
            source: std::io::Error::other("the record kept moving while being read"),
        })
    }

    /// Reads the value of the version `entry` of `key`: from the cache, the write buffer, or
    /// one device read. `Ok(None)` means its segment was freed meanwhile: look the key up again.
    pub fn read_value(
        &self,
        kvs_id: u32,
        key: &[u8],
        entry: Entry,
        purpose: ReadPurpose,
    ) -> Result<Option<Bytes>> {
        if let Some(value) = self.cache.get(entry.seqno) {
            self.counters.cache_hits.add(1);
            return Ok(Some(value));
        }
        self.counters.cache_misses.add(1);
        let location = entry.location;
        let Some(segment) = self.segments.get(location.segment) else {
            return Ok(None);
        };
        let bytes = match self.heads.read_buffered(&segment, location) {
            Some(bytes) => {
                self.counters.write_buffer_hits.add(1);
                bytes
            }
            None => {
                self.counters.get_device_reads.add(1);
                segment.file.read_exact_at(
                    u64::from(location.offset),
                    location.len as usize,
                    purpose,
                )?
            }
        };
        let corrupt = |detail: String| {
            let error = Error::corruption(segment.path(), u64::from(location.offset), detail);
            segment.quarantine();
            self.note_corruption(&error);
            error
        };
        let record = record::decode(&bytes)
            .map_err(|error| corrupt(format!("record failed validation: {error:?}")))?;
        if !record.kind.has_value()
            || record.kvs_id != kvs_id
            || record.key != key
            || record.seqno != entry.seqno
        {
            return Err(corrupt(format!(
                "the index expected KVS {kvs_id} seqno {} but the record holds KVS {} seqno {}",
                entry.seqno, record.kvs_id, record.seqno
            )));
        }
        let value = Bytes::copy_from_slice(record.value);
        self.cache.insert(entry.seqno, value.clone());
        Ok(Some(value))
    }
}
