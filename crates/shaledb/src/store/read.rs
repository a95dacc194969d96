//! The read path: a key's version from the index, then its value from the index entry itself
//! (a short value), the value cache, the log heads' write buffers, or one direct read of the
//! sectors its record spans, validated against what the index expects.

use super::kvs_set::KvsState;
use super::scattered::is_scattered;
use super::Store;
use crate::counters::Counter;
use crate::error::{Error, Result};
use crate::index::Entry;
use crate::media::{read_exact_batch, ExactRead, ReadPurpose};
use crate::record::{self, validate_key, RecordRef};
use crate::segment::SegmentMeta;
use bytes::Bytes;
use std::borrow::Cow;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

/// A read that finds its segment freed (the cleaner moved the record) looks the key up again;
/// more than this many times in a row means something is wrong.
const READ_RETRIES_MAX: usize = 16;

impl Store {
    /// The value of `key` in `kvs` at snapshot `at` (newest if `None`).
    pub fn get(&self, kvs: &KvsState, key: &[u8], at: Option<u64>) -> Result<Option<Bytes>> {
        validate_key(key)?;
        self.counters.gets.add(1);
        self.pacer.note_reader();
        for _ in 0..READ_RETRIES_MAX {
            let Some((entry, value)) = kvs.index.get_with_value(key, at) else {
                return Ok(None);
            };
            if value.is_some() {
                self.counters.index_value_hits.add(1);
                return Ok(value);
            }
            if let Some(value) = self.read_value(kvs.id, key, entry, ReadPurpose::Get)? {
                return Ok(Some(value));
            }
        }
        Err(Error::Io {
            context: format!("get from KVS {:?}", kvs.name),
            source: std::io::Error::other("the record kept moving while being read"),
        })
    }

    /// The keys in `lower..upper` with their newest values, when the range lies within one
    /// key group, holds at most `keys_max` keys, and the records it reads from media (values the
    /// index does not keep) take at most `bytes_max` (`None` otherwise). The keys and versions
    /// are read under the group's partition lock, at one moment, and their values after it, each
    /// exactly that version. A cursor pins a snapshot for the same (the commit-order lock and
    /// the registry, lines every commit and reader shares) and fills its chunks: for a hash of
    /// ten fields, a tenth of a server's HGETALL. A value whose record the cleaner freed
    /// meanwhile has a newer place or version: the whole range is read again.
    pub fn read_group(
        &self,
        kvs: &KvsState,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        keys_max: usize,
        bytes_max: u64,
    ) -> Result<Option<Vec<(Bytes, Bytes)>>> {
        for _ in 0..READ_RETRIES_MAX {
            let Some(found) = kvs.index.collect_group(lower, upper, keys_max) else {
                return Ok(None);
            };
            let versions: Vec<(&[u8], Entry)> = found
                .iter()
                .filter(|visible| visible.value.is_none())
                .map(|visible| (&visible.key[..], visible.entry))
                .collect();
            let bytes_to_read: u64 = versions
                .iter()
                .map(|(_, entry)| u64::from(entry.location.len))
                .sum();
            if bytes_to_read > bytes_max {
                // Large values: a cursor reads them a few at a time, as its caller takes them.
                return Ok(None);
            }
            let mut read = self
                .read_values(kvs.id, &versions, ReadPurpose::Scan)
                .into_iter();
            drop(versions);
            let mut records = Vec::with_capacity(found.len());
            let mut moved = false;
            for visible in found {
                let value = match visible.value {
                    Some(value) => value,
                    None => match read.next().expect("a read per value not kept")? {
                        Some(value) => value,
                        None => {
                            moved = true;
                            break;
                        }
                    },
                };
                records.push((Bytes::from(Vec::from(visible.key)), value));
            }
            if !moved {
                return Ok(Some(records));
            }
        }
        Err(Error::Io {
            context: format!("read of a key group of KVS {:?}", kvs.name),
            source: std::io::Error::other("its records kept moving while being read"),
        })
    }

    /// The values of `keys` in `kvs` at snapshot `at`, with their device reads in flight together.
    pub fn multi_get(&self, kvs: &KvsState, keys: &[&[u8]], at: u64) -> Result<Vec<Option<Bytes>>> {
        for key in keys {
            validate_key(key)?;
        }
        self.counters.gets.add(keys.len() as u64);
        self.pacer.note_reader();
        let found: Vec<Option<(Entry, Option<Bytes>)>> = keys
            .iter()
            .map(|key| kvs.index.get_with_value(key, Some(at)))
            .collect();
        // A value the index keeps needs no read.
        let versions: Vec<(&[u8], Entry)> = keys
            .iter()
            .zip(&found)
            .filter_map(|(key, found)| match found {
                Some((entry, None)) => Some((*key, *entry)),
                _ => None,
            })
            .collect();
        let mut read = self
            .read_values(kvs.id, &versions, ReadPurpose::Get)
            .into_iter();
        let mut values = Vec::with_capacity(keys.len());
        for (key, found) in keys.iter().zip(found) {
            values.push(match found {
                None => None,
                Some((_, Some(kept))) => {
                    self.counters.index_value_hits.add(1);
                    Some(kept)
                }
                // `read` holds one result per key read, in order.
                Some((_, None)) => match read.next() {
                    Some(Ok(Some(value))) => Some(value),
                    Some(Err(error)) => return Err(error),
                    // Moved by the cleaner meanwhile: look it up again.
                    Some(Ok(None)) | None => self.get(kvs, key, Some(at))?,
                },
            });
        }
        Ok(values)
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
        let segment = match self.find_value(kvs_id, key, entry, purpose)? {
            Found::Value(value) => return Ok(Some(value)),
            Found::Moved => return Ok(None),
            Found::OnDevice(segment) => segment,
        };
        let location = entry.location;
        // Gets' read times steer the write pacer; with pacing off (the default) nothing is timed.
        let started =
            (purpose == ReadPurpose::Get && self.pacer.watches_reads()).then(Instant::now);
        let value = segment.file.read_exact_with(
            u64::from(location.offset),
            location.len as usize,
            purpose,
            |bytes| self.checked_value(&segment, kvs_id, key, entry, bytes),
        )?;
        if let Some(started) = started {
            self.pacer
                .note_read(started.elapsed(), u64::from(location.len));
        }
        value.map(Some)
    }

    /// The values of several versions (a scan's next keys, a multi-get's keys), as
    /// [`Store::read_value`] reads one, but with every device read of the batch in flight at once.
    pub fn read_values(
        &self,
        kvs_id: u32,
        versions: &[(&[u8], Entry)],
        purpose: ReadPurpose,
    ) -> Vec<Result<Option<Bytes>>> {
        let mut results: Vec<Result<Option<Bytes>>> = Vec::with_capacity(versions.len());
        let mut on_device = Vec::new();
        for (index, &(key, entry)) in versions.iter().enumerate() {
            results.push(match self.find_value(kvs_id, key, entry, purpose) {
                Ok(Found::OnDevice(segment)) => {
                    on_device.push((index, segment));
                    Ok(None)
                }
                Ok(Found::Value(value)) => Ok(Some(value)),
                Ok(Found::Moved) => Ok(None),
                Err(error) => Err(error),
            });
        }
        let reads: Vec<ExactRead<'_>> = on_device
            .iter()
            .map(|(index, segment)| {
                let location = versions[*index].1.location;
                ExactRead {
                    file: &segment.file,
                    offset: u64::from(location.offset),
                    len: location.len as usize,
                }
            })
            .collect();
        if purpose == ReadPurpose::Scan && is_scattered(&reads) {
            // A scan's keys come in order, ascending or descending: the range starts at the lower.
            if let (Some(&(first, _)), Some(&(last, _))) = (versions.first(), versions.last()) {
                self.scattered.offer(kvs_id, first.min(last));
            }
        }
        let read = read_exact_batch(&reads, purpose);
        for ((index, segment), bytes) in on_device.iter().zip(read) {
            let (key, entry) = versions[*index];
            results[*index] = bytes
                .and_then(|bytes| self.checked_value(segment, kvs_id, key, entry, &bytes))
                .map(Some);
        }
        results
    }

    /// Where the value of `entry` is: in DRAM (the cache or a write buffer), gone with its freed
    /// segment, or to be read from the device. Counted as the clients' reads, except warming's:
    /// no client asked for those, and the cache's hit ratio and device reads per get would
    /// otherwise count them.
    fn find_value(
        &self,
        kvs_id: u32,
        key: &[u8],
        entry: Entry,
        purpose: ReadPurpose,
    ) -> Result<Found> {
        let count = |counter: &Counter| {
            if purpose != ReadPurpose::Warming {
                counter.add(1);
            }
        };
        // A record no longer than its header and key holds an empty value (an empty value is
        // never stored compressed): known from the index alone, as a set member's or a sorted
        // set's rank record is, so such values are neither read nor cached.
        if entry.location.len as usize == record::encoded_len(key.len(), 0) {
            return Ok(Found::Value(Bytes::new()));
        }
        if let Some(value) = self.cache.get(kvs_id, key, entry.seqno) {
            count(&self.counters.cache_hits);
            return Ok(Found::Value(value));
        }
        count(&self.counters.cache_misses);
        let Some(segment) = self.segments.get(entry.location.segment) else {
            return Ok(Found::Moved);
        };
        if let Some(bytes) = self.heads.read_buffered(&segment, entry.location) {
            count(&self.counters.write_buffer_hits);
            return self
                .checked_value(&segment, kvs_id, key, entry, &bytes)
                .map(Found::Value);
        }
        count(&self.counters.get_device_reads);
        Ok(Found::OnDevice(segment))
    }

    /// The value of the record `bytes` read for `entry` (see [`Store::checked_record`]),
    /// decompressed if it was stored compressed; a value that does not decompress is a
    /// `Corruption` that quarantines the segment. Caches the value as the client wrote it, so a
    /// cache hit costs no decompression.
    fn checked_value(
        &self,
        segment: &SegmentMeta,
        kvs_id: u32,
        key: &[u8],
        entry: Entry,
        bytes: &[u8],
    ) -> Result<Bytes> {
        let record = self.checked_record(segment, kvs_id, key, entry, bytes)?;
        let value = match record.value() {
            Ok(Cow::Borrowed(value)) => Bytes::copy_from_slice(value),
            Ok(Cow::Owned(value)) => Bytes::from(value),
            Err(reason) => {
                return Err(self.found_corrupt(
                    segment,
                    entry,
                    format!("value failed validation: {reason}"),
                ))
            }
        };
        self.cache.insert(kvs_id, key, entry.seqno, value.clone());
        Ok(value)
    }

    /// The record `bytes` read for `entry` of `key`, as stored (a compressed value stays
    /// compressed), once it decodes and is the version the index expects; else a `Corruption`
    /// that quarantines the segment.
    pub fn checked_record<'a>(
        &self,
        segment: &SegmentMeta,
        kvs_id: u32,
        key: &[u8],
        entry: Entry,
        bytes: &'a [u8],
    ) -> Result<RecordRef<'a>> {
        let record = record::decode(bytes).map_err(|error| {
            self.found_corrupt(
                segment,
                entry,
                format!("record failed validation: {error:?}"),
            )
        })?;
        if !record.kind.has_value()
            || record.kvs_id != kvs_id
            || record.key != key
            || record.seqno != entry.seqno
        {
            return Err(self.found_corrupt(
                segment,
                entry,
                format!(
                    "the index expected KVS {kvs_id} seqno {} but the record holds KVS {} seqno {}",
                    entry.seqno, record.kvs_id, record.seqno
                ),
            ));
        }
        Ok(record)
    }

    /// The `Corruption` of the record of `entry`: its segment is quarantined and the damage noted.
    fn found_corrupt(&self, segment: &SegmentMeta, entry: Entry, detail: String) -> Error {
        let error = Error::corruption(segment.path(), u64::from(entry.location.offset), detail);
        segment.quarantine();
        self.note_corruption(&error);
        error
    }
}

enum Found {
    Value(Bytes),
    Moved,
    OnDevice(Arc<SegmentMeta>),
}
