//! Blobs: the bytes of strings longer than one chunk, stored under an id of their own.
//!
//! A blob is written before the command that uses it runs, in chunk-sized engine writes outside
//! the command's batch: a 512 MB value never sits in memory whole, and never in one batch (the
//! engine bounds batches). It becomes part of the data only when a command's batch links it: a
//! string's header record names it, and its link record `4 id` (written in that same batch)
//! marks it as owned. Until then it is *staged*: a [`StagedBlob`] owns it and deletes it when
//! dropped unlinked (the command failed, the client left mid-value, EXEC rolled the command
//! back), and a restart deletes blobs that a crash left unlinked ([`sweep`]).
//!
//! Chunks are immutable: a string that changes gets a new blob, and the batch that replaces or
//! deletes the string deletes the old blob's link record; its chunks are deleted right after
//! that batch commits, or, while a reader holds the blob ([`BlobReader`] pins it), when the last
//! reader is done. A reader thus never sees half a value, and holds only its own blob's chunks
//! (an engine snapshot would keep everything deleted since, for every client, for as long as a
//! slow client leaves a long reply unread). Chunks whose link record is gone and whose deletion
//! a crash interrupted are swept at the next start like any unlinked blob.

use super::{damaged, Failure, Result, Space, BLOBS};
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The bytes of one chunk (the last of a blob may be shorter).
pub const CHUNK_BYTES: usize = 512 << 10;

/// The link record of blob `id`; its chunks sort right after it.
pub(super) fn blob_prefix(id: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(13);
    out.push(BLOBS);
    out.extend_from_slice(&id.to_be_bytes());
    out
}

fn chunk_key(id: u64, index: u32) -> Vec<u8> {
    let mut out = blob_prefix(id);
    out.extend_from_slice(&index.to_be_bytes());
    out
}

/// The id of the blob a class-`4` record belongs to.
pub(super) fn blob_id(record: &[u8]) -> Result<u64> {
    record
        .get(1..9)
        .map(|bytes| u64::from_be_bytes(bytes.try_into().expect("8 bytes")))
        .filter(|_| record.len() == 9 || record.len() == 13)
        .ok_or_else(|| damaged("a blob record of no blob's shape", record))
}

/// How many chunks hold `length` bytes.
fn chunk_count(length: u64) -> u64 {
    length.div_ceil(CHUNK_BYTES as u64)
}

/// The length chunk `index` of a blob of `length` bytes must have.
fn chunk_length(length: u64, index: u64) -> usize {
    let start = index * CHUNK_BYTES as u64;
    (length - start).min(CHUNK_BYTES as u64) as usize
}

/// A string header's value: the string's length and its blob's id (2 x 8-byte BE).
pub(super) fn encode_header(length: u64, id: u64) -> Bytes {
    let mut out = BytesMut::with_capacity(16);
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&id.to_be_bytes());
    out.freeze()
}

/// The length and blob id a string header holds.
pub(super) fn decode_header(value: &[u8], record: &[u8]) -> Result<(u64, u64)> {
    if value.len() != 16 {
        return Err(damaged(
            &format!("a long string's header of {} bytes, not 16", value.len()),
            record,
        ));
    }
    let length = u64::from_be_bytes(value[..8].try_into().expect("8 bytes"));
    let id = u64::from_be_bytes(value[8..].try_into().expect("8 bytes"));
    Ok((length, id))
}

/// Blob ids: unique across every database, so a blob keeps its id wherever it is linked.
#[derive(Default)]
pub struct BlobIds(AtomicU64);

impl BlobIds {
    pub fn new() -> Arc<BlobIds> {
        Arc::new(BlobIds::default())
    }

    fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }

    /// Makes every id handed out from now on greater than `id`.
    fn passed(&self, id: u64) {
        self.0.fetch_max(id + 1, Ordering::Relaxed);
    }
}

/// The blobs of one space that readers hold.
#[derive(Default)]
pub struct BlobPins(Mutex<HashMap<u64, Pin>>);

#[derive(Default)]
struct Pin {
    readers: usize,
    /// No string links it any more: its chunks go with its last reader.
    released: bool,
}

impl Space {
    fn pin_blob(&self, id: u64) {
        self.blob_pins.0.lock().entry(id).or_default().readers += 1;
    }

    fn unpin_blob(&self, id: u64) {
        let delete = {
            let mut pins = self.blob_pins.0.lock();
            let pin = pins.get_mut(&id).expect("pinned by its reader");
            pin.readers -= 1;
            let last = pin.readers == 0;
            let delete = last && pin.released;
            if last {
                pins.remove(&id);
            }
            delete
        };
        if delete {
            self.delete_chunks(id);
        }
    }

    /// Blob `id` is wanted no more (its link record is deleted and committed, or it was never
    /// linked): its chunks are deleted now, or by its last reader.
    pub(super) fn release_blob(&self, id: u64) {
        {
            let mut pins = self.blob_pins.0.lock();
            if let Some(pin) = pins.get_mut(&id) {
                pin.released = true;
                return;
            }
        }
        self.delete_chunks(id);
    }

    fn delete_chunks(&self, id: u64) {
        if let Err(error) = self.kvs.prefix_delete(blob_prefix(id)) {
            // Left for the next start's sweep: nothing links it.
            tracing::warn!(blob = id, %error, "could not delete the chunks of an unlinked blob");
        }
    }
}

/// A blob written but not yet linked: deleted when dropped, unless a committed batch linked it.
pub struct StagedBlob {
    space: Arc<Space>,
    id: u64,
    length: u64,
    linked: bool,
}

impl StagedBlob {
    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    pub(super) fn id(&self) -> u64 {
        self.id
    }

    /// Whether it was written into `space`.
    pub(super) fn is_in(&self, space: &Arc<Space>) -> bool {
        Arc::ptr_eq(&self.space, space)
    }

    /// A copy of this blob in `space` (a string linked in another database than the one its
    /// value was sent to).
    pub(super) fn copy_to(&self, space: &Arc<Space>) -> Result<StagedBlob> {
        copy_blob(BlobReader::new(&self.space, self.id, self.length), space)
    }

    /// A committed batch linked it: it is data now.
    pub(super) fn keep(mut self) {
        self.linked = true;
    }
}

impl Drop for StagedBlob {
    fn drop(&mut self) {
        if self.linked {
            return;
        }
        if let Err(error) = self.space.kvs.prefix_delete(blob_prefix(self.id)) {
            // Left for the next start's sweep to delete; nothing links it.
            tracing::warn!(blob = self.id, %error, "could not delete an unlinked blob");
        }
    }
}

/// A blob being written as its bytes arrive: one chunk of them in memory at most.
pub struct Upload {
    blob: StagedBlob,
    chunk: BytesMut,
    next_index: u32,
    received: u64,
}

impl Upload {
    /// Starts a blob of `length` bytes in `space`.
    pub fn begin(space: Arc<Space>, length: u64) -> Result<Upload> {
        if chunk_count(length) > u64::from(u32::MAX) {
            return Err(Failure::TooLarge);
        }
        let id = space.blob_ids.next();
        Ok(Upload {
            blob: StagedBlob {
                space,
                id,
                length,
                linked: false,
            },
            chunk: BytesMut::new(),
            next_index: 0,
            received: 0,
        })
    }

    /// Bytes still to come.
    pub fn remaining(&self) -> u64 {
        self.blob.length - self.received
    }

    /// The memory it holds.
    pub fn buffered(&self) -> usize {
        self.chunk.capacity()
    }

    /// Takes the next bytes (at most `remaining()`), writing each chunk as it fills.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<()> {
        assert!(
            bytes.len() as u64 <= self.remaining(),
            "more than announced"
        );
        while !bytes.is_empty() {
            let wanted = chunk_length(self.blob.length, u64::from(self.next_index));
            if self.chunk.capacity() < wanted {
                self.chunk.reserve(wanted - self.chunk.len());
            }
            let take = (wanted - self.chunk.len()).min(bytes.len());
            self.chunk.extend_from_slice(&bytes[..take]);
            self.received += take as u64;
            bytes = &bytes[take..];
            if self.chunk.len() == wanted {
                let chunk = self.chunk.split().freeze();
                self.blob
                    .space
                    .kvs
                    .put(chunk_key(self.blob.id, self.next_index), chunk)?;
                self.next_index += 1;
            }
        }
        Ok(())
    }

    /// The whole blob, once every byte arrived.
    pub fn finish(self) -> StagedBlob {
        assert_eq!(self.remaining(), 0, "finished before its last byte");
        self.blob
    }
}

/// Writes what `reader` reads as a new blob in `space`.
pub(super) fn copy_blob(mut reader: BlobReader, space: &Arc<Space>) -> Result<StagedBlob> {
    let mut upload = Upload::begin(space.clone(), reader.length)?;
    while let Some(chunk) = reader.next_chunk()? {
        upload.push(&chunk)?;
    }
    Ok(upload.finish())
}

/// Writes `data` as a new blob in `space`.
pub(super) fn stage_bytes(space: &Arc<Space>, data: &[u8]) -> Result<StagedBlob> {
    let mut upload = Upload::begin(space.clone(), data.len() as u64)?;
    upload.push(data)?;
    Ok(upload.finish())
}

/// Reads a blob chunk by chunk, checking each chunk is where and as long as the blob's length
/// says. It pins the blob: its chunks stay until the reader is dropped, even if the string is
/// replaced or deleted meanwhile.
pub struct BlobReader {
    space: Arc<Space>,
    id: u64,
    length: u64,
    next_index: u64,
}

impl BlobReader {
    /// A reader of blob `id` of `length` bytes in `space`. The caller checks, after this, that
    /// the blob is still linked (or its own): a blob released before the pin may be gone.
    pub(super) fn new(space: &Arc<Space>, id: u64, length: u64) -> BlobReader {
        space.pin_blob(id);
        BlobReader {
            space: space.clone(),
            id,
            length,
            next_index: 0,
        }
    }

    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The next chunk, `None` after the last.
    pub fn next_chunk(&mut self) -> Result<Option<Bytes>> {
        if self.next_index >= chunk_count(self.length) {
            return Ok(None);
        }
        let index = self.next_index;
        let key = chunk_key(self.id, index as u32);
        let chunk = self
            .space
            .kvs
            .get(&key)?
            .ok_or_else(|| damaged("a long string's chunk is missing", &key))?;
        if chunk.len() != chunk_length(self.length, index) {
            return Err(damaged(
                &format!(
                    "a long string's chunk of {} bytes where {} belong",
                    chunk.len(),
                    chunk_length(self.length, index)
                ),
                &key,
            ));
        }
        self.next_index += 1;
        Ok(Some(chunk))
    }

    /// The whole blob in memory.
    pub fn read_all(mut self) -> Result<Bytes> {
        let mut data = BytesMut::with_capacity(self.length as usize);
        while let Some(chunk) = self.next_chunk()? {
            data.extend_from_slice(&chunk);
        }
        Ok(data.freeze())
    }
}

impl Drop for BlobReader {
    fn drop(&mut self) {
        self.space.unpin_blob(self.id);
    }
}

/// At start, before any client: deletes the blobs a crash left staged (chunks without a link
/// record), logging each, and makes new blob ids pass every id in `space`. Missing or short
/// chunks of a linked blob are found by whoever reads it ([`BlobReader`]), named.
pub(super) fn sweep(space: &Space) -> Result<()> {
    let mut start = vec![BLOBS];
    loop {
        let Some(first) = space
            .kvs
            .range(start.clone()..vec![BLOBS + 1])
            .keys()
            .next()
        else {
            return Ok(());
        };
        let first = first?;
        let id = blob_id(&first)?;
        space.blob_ids.passed(id);
        let prefix = blob_prefix(id);
        if first.len() == 13 {
            let (mut chunks, mut bytes) = (0u64, 0u64);
            for item in space.kvs.prefix(&prefix) {
                let (_, chunk) = item?;
                chunks += 1;
                bytes += chunk.len() as u64;
            }
            space.kvs.prefix_delete(&prefix)?;
            tracing::info!(
                kvs = space.kvs.name(),
                blob = id,
                chunks,
                bytes,
                "deleted a long value whose command never committed (the server stopped while it was sent)"
            );
        }
        match id.checked_add(1) {
            Some(next) => start = blob_prefix(next),
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::open;
    use super::super::{
        tag, Keyspace, StringInput, StringValue, Tx, LAYOUT_2_VALUE, LAYOUT_KEY, LAYOUT_VALUE,
    };
    use super::*;
    use crate::keyspace::SetExpiry;

    fn pattern(length: usize, seed: u8) -> Vec<u8> {
        (0..length)
            .map(|at| (at % 251) as u8 ^ seed)
            .collect::<Vec<u8>>()
    }

    fn set(keyspace: &Keyspace, key: &[u8], data: &[u8]) {
        let mut tx = Tx::new(std::slice::from_ref(keyspace));
        tx.on(0).set_string(key, data, SetExpiry::Clear).unwrap();
        tx.commit().unwrap();
    }

    fn get(keyspace: &Keyspace, key: &[u8]) -> Result<Option<Bytes>> {
        let mut tx = Tx::new(std::slice::from_ref(keyspace));
        let view = tx.on(0);
        view.get_string(key)
    }

    /// The class-4 records: (link records, chunk records).
    fn blob_records(keyspace: &Keyspace) -> (usize, usize) {
        let (mut links, mut chunks) = (0, 0);
        for key in keyspace.space().kvs.prefix([BLOBS]).keys() {
            match key.unwrap().len() {
                9 => links += 1,
                13 => chunks += 1,
                other => panic!("a blob record of {other} bytes"),
            }
        }
        (links, chunks)
    }

    #[test]
    fn long_strings_live_in_blobs_that_go_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let long = pattern(3 * CHUNK_BYTES + 17, 1);
        set(&keyspace, b"k", &long);
        assert_eq!(blob_records(&keyspace), (1, 4));
        assert_eq!(get(&keyspace, b"k").unwrap().unwrap(), long);
        // Overwritten by another long string: the old blob goes in the same batch.
        let other = pattern(CHUNK_BYTES + 1, 2);
        set(&keyspace, b"k", &other);
        assert_eq!(blob_records(&keyspace), (1, 2));
        assert_eq!(get(&keyspace, b"k").unwrap().unwrap(), other);
        // Overwritten by a short one, then a long one deleted: no blob left.
        set(&keyspace, b"k", b"short");
        assert_eq!(blob_records(&keyspace), (0, 0));
        set(&keyspace, b"gone", &long);
        let mut tx = Tx::new(std::slice::from_ref(&keyspace));
        assert!(tx.on(0).remove_key(b"gone").unwrap());
        tx.commit().unwrap();
        assert_eq!(blob_records(&keyspace), (0, 0));
        assert_eq!(get(&keyspace, b"gone").unwrap(), None);
    }

    #[test]
    fn a_blob_never_linked_is_deleted_and_a_restart_sweeps_what_a_crash_left() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (_db, keyspace) = open(dir.path());
            set(&keyspace, b"kept", &pattern(2 * CHUNK_BYTES, 3));
            // A command that fails after its value arrived: the blob is dropped unlinked.
            let mut upload = Upload::begin(keyspace.space(), 2 * CHUNK_BYTES as u64).unwrap();
            upload.push(&pattern(2 * CHUNK_BYTES, 4)).unwrap();
            drop(upload.finish());
            assert_eq!(blob_records(&keyspace), (1, 2));
            // A transaction rolled back past its link: deleted too.
            let mut tx = Tx::new(std::slice::from_ref(&keyspace));
            let savepoint = tx.savepoint();
            tx.on(0)
                .set_string(b"rolled", &pattern(CHUNK_BYTES + 5, 5), SetExpiry::Clear)
                .unwrap();
            tx.rollback(savepoint);
            tx.commit().unwrap();
            assert_eq!(blob_records(&keyspace), (1, 2));
            // A value cut off by a crash: chunks with no link record, as a killed server leaves.
            let kvs = &keyspace.space().kvs;
            kvs.put(chunk_key(1000, 0), pattern(CHUNK_BYTES, 6))
                .unwrap();
            kvs.put(chunk_key(1000, 1), pattern(CHUNK_BYTES, 6))
                .unwrap();
            assert_eq!(blob_records(&keyspace), (1, 4));
        }
        let (_db, keyspace) = open(dir.path());
        assert_eq!(
            blob_records(&keyspace),
            (1, 2),
            "the cut-off value was swept"
        );
        assert_eq!(
            get(&keyspace, b"kept").unwrap().unwrap(),
            pattern(2 * CHUNK_BYTES, 3)
        );
        // New ids pass the swept ones: a new long string does not meet old chunks.
        set(&keyspace, b"new", &pattern(CHUNK_BYTES + 9, 7));
        assert!(keyspace
            .space()
            .kvs
            .get(chunk_key(1001, 0))
            .unwrap()
            .is_some());
        assert_eq!(
            get(&keyspace, b"new").unwrap().unwrap(),
            pattern(CHUNK_BYTES + 9, 7)
        );
    }

    #[test]
    fn a_missing_or_short_chunk_is_named_damage() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        set(&keyspace, b"k", &pattern(3 * CHUNK_BYTES, 8));
        let kvs = keyspace.space().kvs.clone();
        let chunks: Vec<Bytes> = kvs
            .prefix([BLOBS])
            .keys()
            .map(|key| key.unwrap())
            .filter(|key| key.len() == 13)
            .collect();
        kvs.put(&chunks[1], b"short").unwrap();
        match get(&keyspace, b"k") {
            Err(Failure::Damaged(what)) => assert!(what.contains("chunk of 5 bytes"), "{what}"),
            other => panic!("a short chunk read as {other:?}"),
        }
        kvs.delete(&chunks[2]).unwrap();
        kvs.put(&chunks[1], pattern(CHUNK_BYTES, 0)).unwrap();
        match get(&keyspace, b"k") {
            Err(Failure::Damaged(what)) => assert!(what.contains("chunk is missing"), "{what}"),
            other => panic!("a missing chunk read as {other:?}"),
        }
        let header = super::super::record_key(b"k", tag::CHUNKED_STRING, &[]).unwrap();
        kvs.put(&header, [0u8; 9]).unwrap();
        match get(&keyspace, b"k") {
            Err(Failure::Damaged(what)) => assert!(what.contains("header of 9 bytes"), "{what}"),
            other => panic!("a bad header read as {other:?}"),
        }
    }

    #[test]
    fn a_reader_keeps_its_blob_until_done_and_only_its_blob() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let first = pattern(2 * CHUNK_BYTES + 1, 13);
        set(&keyspace, b"k", &first);
        set(&keyspace, b"other", &pattern(CHUNK_BYTES + 1, 14));
        let mut tx = Tx::new(std::slice::from_ref(&keyspace));
        let Some(StringValue::Blob(mut reader)) = tx.on(0).get_string_value(b"k").unwrap() else {
            panic!("a long string is a blob");
        };
        let head = reader.next_chunk().unwrap().unwrap();
        // Overwritten and another long string deleted while the reader is half way.
        set(&keyspace, b"k", &pattern(CHUNK_BYTES + 1, 15));
        let mut tx = Tx::new(std::slice::from_ref(&keyspace));
        tx.on(0).remove_key(b"other").unwrap();
        tx.commit().unwrap();
        assert_eq!(
            blob_records(&keyspace),
            (1, 2 + 3),
            "the new value's blob, and the chunks of the one being read, no others"
        );
        let mut read = head.to_vec();
        while let Some(chunk) = reader.next_chunk().unwrap() {
            read.extend_from_slice(&chunk);
        }
        assert!(read == first, "the reader read the value it started with");
        drop(reader);
        assert_eq!(blob_records(&keyspace), (1, 2), "its chunks went with it");
    }

    #[test]
    fn flushing_spares_values_still_arriving() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        set(&keyspace, b"old", &pattern(CHUNK_BYTES + 1, 9));
        let mut arriving = Upload::begin(keyspace.space(), CHUNK_BYTES as u64 * 2).unwrap();
        arriving.push(&pattern(CHUNK_BYTES * 2, 10)).unwrap();
        let arrived = arriving.finish();
        let mut tx = Tx::new(std::slice::from_ref(&keyspace));
        tx.on(0).flush().unwrap();
        // FLUSHALL then SET in one transaction: the new value survives the flush.
        tx.on(0)
            .set_string(b"new", StringInput::Staged(arrived), SetExpiry::Clear)
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(get(&keyspace, b"old").unwrap(), None);
        assert_eq!(
            get(&keyspace, b"new").unwrap().unwrap(),
            pattern(CHUNK_BYTES * 2, 10)
        );
        assert_eq!(blob_records(&keyspace), (1, 2));
    }

    #[test]
    fn strings_longer_than_the_in_memory_bound_are_read_by_chunk_only() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let long = pattern(2 * CHUNK_BYTES + 3, 11);
        set(&keyspace, b"k", &long);
        let mut tx = Tx::new(std::slice::from_ref(&keyspace)).holding_strings_up_to(CHUNK_BYTES);
        let view = tx.on(0);
        match view.get_string(b"k") {
            Err(Failure::Invalid(message)) => {
                assert!(message.contains("max_in_memory_string_bytes"), "{message}")
            }
            other => panic!("read whole past the bound: {other:?}"),
        }
        assert_eq!(view.string_length(b"k").unwrap(), long.len() as u64);
        let Some(StringValue::Blob(mut reader)) = view.get_string_value(b"k").unwrap() else {
            panic!("a long string is a blob");
        };
        let mut read = Vec::new();
        while let Some(chunk) = reader.next_chunk().unwrap() {
            assert!(chunk.len() <= CHUNK_BYTES);
            read.extend_from_slice(&chunk);
        }
        assert_eq!(read, long);
    }

    #[test]
    fn a_read_racing_an_overwrite_of_a_long_string_by_a_short_one_finds_the_key() {
        // Redis answers a GET racing a SET with the old value or the new one, never nil: the
        // key exists throughout.
        use std::sync::atomic::AtomicBool;
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let long = pattern(CHUNK_BYTES + 1, 13);
        set(&keyspace, b"k", &long);
        let done = AtomicBool::new(false);
        let (reads, misses) = std::thread::scope(|scope| {
            scope.spawn(|| {
                for _ in 0..300 {
                    set(&keyspace, b"k", b"short");
                    set(&keyspace, b"k", &long);
                }
                done.store(true, Ordering::SeqCst);
            });
            let (mut reads, mut misses) = (0u64, 0u64);
            while !done.load(Ordering::SeqCst) {
                let mut tx = Tx::new(std::slice::from_ref(&keyspace));
                let value = tx.on(0).get_string_value(b"k").unwrap();
                reads += 1;
                match value {
                    None => misses += 1,
                    Some(StringValue::Inline(data)) => assert_eq!(data, &b"short"[..]),
                    Some(StringValue::Blob(reader)) => assert_eq!(reader.len(), long.len() as u64),
                }
            }
            (reads, misses)
        });
        assert_eq!(
            misses, 0,
            "{misses} of {reads} reads of a key that always existed found it missing"
        );
    }

    #[test]
    fn layout_2_long_strings_move_into_blobs() {
        let dir = tempfile::tempdir().unwrap();
        let long = pattern(CHUNK_BYTES * 2 + 100, 12);
        {
            let db = shaledb::Db::open(dir.path(), shaledb::Options::default()).unwrap();
            let kvs = db.kvs("redis-0").unwrap();
            kvs.put(LAYOUT_KEY, LAYOUT_2_VALUE).unwrap();
            let record = |tag, suffix: &[u8]| super::super::record_key(b"k", tag, suffix).unwrap();
            kvs.put(
                record(tag::CHUNKED_STRING, &[]),
                (long.len() as u64).to_be_bytes(),
            )
            .unwrap();
            for (index, chunk) in long.chunks(CHUNK_BYTES).enumerate() {
                kvs.put(
                    record(tag::LAYOUT_2_STRING_CHUNK, &(index as u32).to_be_bytes()),
                    chunk,
                )
                .unwrap();
            }
            kvs.put([2u8, 0, 0], 1u64.to_be_bytes()).unwrap();
            db.close().unwrap();
        }
        let (_db, keyspace) = open(dir.path());
        let kvs = keyspace.space().kvs.clone();
        assert_eq!(
            kvs.get(LAYOUT_KEY).unwrap().unwrap(),
            LAYOUT_VALUE.as_bytes()
        );
        assert_eq!(get(&keyspace, b"k").unwrap().unwrap(), long);
        assert_eq!(blob_records(&keyspace), (1, 3));
        let old_chunks = super::super::record_key(b"k", tag::LAYOUT_2_STRING_CHUNK, &[]).unwrap();
        assert_eq!(
            kvs.prefix(old_chunks).count(),
            0,
            "layout 2's chunks are gone"
        );
    }
}
