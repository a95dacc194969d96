//! memcached's items on a KVS of their own: one record per item, keyed by the item's key.
//!
//! The record's value is `1` (the format), the client flags (4 bytes BE), the expiry time (unix
//! ms, 8 bytes BE, 0: never), the CAS unique (8 bytes BE), then the data. A record of another
//! format or shorter than the header is damage, named, never an empty item. Writes to one key
//! hold its stripe's lock from their read to their write, so CAS, incr/decr, append and add
//! never interleave; each is one engine write.

use crate::stripes::{key_hash, StripeGuard, StripeLock};
use bytes::{Bytes, BytesMut};
use shaledb::{Db, Kvs, SyncPoint, WriteBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

const FORMAT: u8 = 1;
const HEADER_BYTES: usize = 1 + 4 + 8 + 8;
/// The longest key memcached accepts.
pub const KEY_BYTES_MAX: usize = 250;
/// The most data one item holds: one engine value, less the header.
pub const DATA_BYTES_MAX: usize = shaledb::limits::VALUE_BYTES_MAX - HEADER_BYTES;
/// Relative expiry times are at most 30 days; larger ones are unix times, as in memcached.
const RELATIVE_EXPIRY_MAX_SECS: i64 = 60 * 60 * 24 * 30;
const STRIPES: usize = 1024;

/// Why an item operation failed.
#[derive(Debug)]
pub enum ItemError {
    /// A record not in this format: the key's record, and what is wrong.
    Damaged(String),
    Engine(shaledb::Error),
}

impl From<shaledb::Error> for ItemError {
    fn from(error: shaledb::Error) -> Self {
        ItemError::Engine(error)
    }
}

pub type Result<T> = std::result::Result<T, ItemError>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub flags: u32,
    /// Unix ms; 0: never.
    pub expires_at: u64,
    pub cas: u64,
    pub data: Bytes,
}

impl Item {
    fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(HEADER_BYTES + self.data.len());
        out.extend_from_slice(&[FORMAT]);
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.extend_from_slice(&self.expires_at.to_be_bytes());
        out.extend_from_slice(&self.cas.to_be_bytes());
        out.extend_from_slice(&self.data);
        out.freeze()
    }

    fn decode(key: &[u8], value: Bytes) -> Result<Item> {
        if value.len() < HEADER_BYTES || value[0] != FORMAT {
            return Err(ItemError::Damaged(format!(
                "the item {:?} is a record of {} bytes not in item format {FORMAT}",
                String::from_utf8_lossy(key),
                value.len()
            )));
        }
        let u64_at = |at: usize| u64::from_be_bytes(value[at..at + 8].try_into().expect("8"));
        Ok(Item {
            flags: u32::from_be_bytes(value[1..5].try_into().expect("4")),
            expires_at: u64_at(5),
            cas: u64_at(13),
            data: value.slice(HEADER_BYTES..),
        })
    }

    fn is_live(&self, now: u64) -> bool {
        self.expires_at == 0 || self.expires_at > now
    }

    /// Seconds left to live: -1 for never, as memcached's `t` flag answers.
    pub fn ttl_secs(&self) -> i64 {
        if self.expires_at == 0 {
            return -1;
        }
        (self.expires_at.saturating_sub(now_ms()) / 1000) as i64
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// memcached's exptime as unix ms: 0 never; negative already past; up to 30 days relative; more
/// an absolute unix time.
pub fn expiry_of(exptime: i64) -> u64 {
    match exptime {
        0 => 0,
        secs if secs < 0 => 1,
        secs if secs <= RELATIVE_EXPIRY_MAX_SECS => now_ms() + secs as u64 * 1000,
        secs => (secs as u64).saturating_mul(1000).max(1),
    }
}

/// How a storage command treats what the key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Set,
    /// Only if the key holds nothing.
    Add,
    /// Only if it holds an item.
    Replace,
    Append,
    Prepend,
    /// Only if the item's CAS unique is this one.
    Cas(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreReply {
    Stored(u64),
    NotStored,
    /// CAS given, and the item's differs.
    Exists,
    /// CAS given, and no item.
    NotFound,
}

/// What incr/decr did.
#[derive(Debug, PartialEq, Eq)]
pub enum Counted {
    /// The item as written: its data is the new value in decimal.
    Value(Item),
    NotFound,
    NotANumber,
    Exists,
}

pub struct Items {
    db: Arc<Db>,
    kvs: Kvs,
    stripes: Vec<StripeLock>,
    next_cas: AtomicU64,
    /// When a delayed `flush_all` is due, in unix ms (0: none). Held in memory, as memcached
    /// holds it: a restart before then cancels it (a clean stop logs that).
    flush_at: AtomicU64,
}

impl Items {
    pub fn new(db: Arc<Db>, kvs: Kvs) -> Items {
        // Unique across restarts while the clock moves forward and fewer than a million CAS
        // values a second are handed out on average.
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |elapsed| elapsed.as_micros() as u64);
        Items {
            db,
            kvs,
            stripes: (0..STRIPES).map(|_| StripeLock::default()).collect(),
            next_cas: AtomicU64::new(start),
            flush_at: AtomicU64::new(0),
        }
    }

    fn lock(&self, key: &[u8]) -> StripeGuard<'_> {
        self.stripes[(key_hash(key) % STRIPES as u64) as usize].lock()
    }

    fn cas(&self) -> u64 {
        self.next_cas.fetch_add(1, Ordering::Relaxed)
    }

    /// The live item at `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Item>> {
        let Some(value) = self.kvs.get(key)? else {
            return Ok(None);
        };
        let item = Item::decode(key, value)?;
        Ok(item.is_live(now_ms()).then_some(item))
    }

    pub fn store(
        &self,
        key: &[u8],
        mode: Mode,
        flags: u32,
        expires_at: u64,
        data: Bytes,
        unsynced: &mut SyncPoint,
    ) -> Result<StoreReply> {
        let _guard = self.lock(key);
        // A set replaces whatever is there, unread (a damaged record included).
        let current = match mode {
            Mode::Set => None,
            _ => self.get(key)?,
        };
        let data = match (mode, &current) {
            (Mode::Add, Some(_)) => return Ok(StoreReply::NotStored),
            (Mode::Replace | Mode::Append | Mode::Prepend, None) => {
                return Ok(StoreReply::NotStored)
            }
            (Mode::Cas(_), None) => return Ok(StoreReply::NotFound),
            (Mode::Cas(unique), Some(item)) if item.cas != unique => return Ok(StoreReply::Exists),
            (Mode::Append, Some(item)) => concat(&item.data, &data),
            (Mode::Prepend, Some(item)) => concat(&data, &item.data),
            _ => data,
        };
        if data.len() > DATA_BYTES_MAX {
            return Ok(StoreReply::NotStored);
        }
        // Append and prepend keep the item's flags and expiry, as memcached.
        let (flags, expires_at) = match (mode, &current) {
            (Mode::Append | Mode::Prepend, Some(item)) => (item.flags, item.expires_at),
            _ => (flags, expires_at),
        };
        let cas = self.cas();
        let item = Item {
            flags,
            expires_at,
            cas,
            data,
        };
        self.put(key, &item, unsynced)?;
        Ok(StoreReply::Stored(cas))
    }

    /// Deletes the item at `key` (with `cas`, only if its CAS unique is that); returns what
    /// happened as a storage result (`Stored` for deleted).
    pub fn delete(
        &self,
        key: &[u8],
        cas: Option<u64>,
        unsynced: &mut SyncPoint,
    ) -> Result<StoreReply> {
        let _guard = self.lock(key);
        let Some(item) = self.get(key)? else {
            return Ok(StoreReply::NotFound);
        };
        if cas.is_some_and(|unique| unique != item.cas) {
            return Ok(StoreReply::Exists);
        }
        self.remove(key, unsynced)?;
        Ok(StoreReply::Stored(item.cas))
    }

    /// incr (`delta` added, wrapping at 2^64) or decr (subtracted, not below 0); with `vivify`,
    /// a missing item is created holding `initial` with that expiry.
    pub fn count(
        &self,
        key: &[u8],
        incr: bool,
        delta: u64,
        vivify: Option<(u64, u64)>,
        cas: Option<u64>,
        unsynced: &mut SyncPoint,
    ) -> Result<Counted> {
        let _guard = self.lock(key);
        let Some(item) = self.get(key)? else {
            let Some((initial, expires_at)) = vivify else {
                return Ok(Counted::NotFound);
            };
            let item = Item {
                flags: 0,
                expires_at,
                cas: self.cas(),
                data: Bytes::from(initial.to_string()),
            };
            self.put(key, &item, unsynced)?;
            return Ok(Counted::Value(item));
        };
        if cas.is_some_and(|unique| unique != item.cas) {
            return Ok(Counted::Exists);
        }
        let Some(current) = std::str::from_utf8(&item.data)
            .ok()
            .filter(|text| !text.is_empty() && text.len() <= 20)
            .and_then(|text| text.parse::<u64>().ok())
        else {
            return Ok(Counted::NotANumber);
        };
        let value = if incr {
            current.wrapping_add(delta)
        } else {
            current.saturating_sub(delta)
        };
        let updated = Item {
            cas: self.cas(),
            data: Bytes::from(value.to_string()),
            ..item
        };
        self.put(key, &updated, unsynced)?;
        Ok(Counted::Value(updated))
    }

    /// Sets the item's expiry; returns the item as it is after, if there is one.
    pub fn touch(
        &self,
        key: &[u8],
        expires_at: u64,
        unsynced: &mut SyncPoint,
    ) -> Result<Option<Item>> {
        let _guard = self.lock(key);
        let Some(mut item) = self.get(key)? else {
            return Ok(None);
        };
        item.expires_at = expires_at;
        self.put(key, &item, unsynced)?;
        Ok(Some(item))
    }

    /// `flush_all`: deletes every item now (`at_ms` not in the future), or once `at_ms` (unix
    /// ms) has come; either replaces a delayed flush not yet done, as in memcached.
    pub fn flush_at(&self, at_ms: u64, unsynced: &mut SyncPoint) -> Result<()> {
        if at_ms > now_ms() {
            self.flush_at.store(at_ms, Ordering::Release);
            return Ok(());
        }
        self.flush_at.store(0, Ordering::Release);
        self.flush(unsynced)
    }

    /// Runs a delayed flush whose time has come: before every command (so none reads an item
    /// it removes) and from the expirer (so an idle server flushes too).
    pub fn flush_if_due(&self, unsynced: &mut SyncPoint) -> Result<()> {
        let at = self.flush_at.load(Ordering::Acquire);
        if at == 0 || now_ms() < at {
            return Ok(());
        }
        if self
            .flush_at
            .compare_exchange(at, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.flush(unsynced)?;
        }
        Ok(())
    }

    /// Deletes every item, in one batch: one prefix delete per byte a key may start with (the
    /// engine takes no empty prefix).
    fn flush(&self, unsynced: &mut SyncPoint) -> Result<()> {
        let mut batch = WriteBatch::new();
        for first in 0..=u8::MAX {
            batch.prefix_delete(&self.kvs, [first]);
        }
        self.write(batch, unsynced)
    }

    /// Puts `item` at `key` (see [`Items::write`]).
    fn put(&self, key: &[u8], item: &Item, unsynced: &mut SyncPoint) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(&self.kvs, key, item.encode());
        self.write(batch, unsynced)
    }

    /// Deletes the item at `key` (see [`Items::write`]).
    fn remove(&self, key: &[u8], unsynced: &mut SyncPoint) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(&self.kvs, key);
        self.write(batch, unsynced)
    }

    /// Writes `batch` without waiting for the log's fdatasync, merging into `unsynced` where
    /// the log must be durable before the write is acknowledged (under `sync` durability; an
    /// empty point otherwise): the connection waits for it through the syncer, with every
    /// other reply of its pipeline, and never blocks its network thread's other clients.
    fn write(&self, batch: WriteBatch, unsynced: &mut SyncPoint) -> Result<()> {
        unsynced.merge(self.db.write_unsynced(batch)?);
        Ok(())
    }

    /// Deletes up to `budget` expired items from `resume` on (empty: the start); returns how
    /// many it deleted and where to go on (`None`: it reached the end).
    pub fn expire(&self, resume: &[u8], budget: usize) -> Result<(usize, Option<Vec<u8>>)> {
        let now = now_ms();
        let mut deleted = 0;
        // No client waits for these deletes: under `sync` they become durable with the next
        // sync, and an expired item that comes back after a crash still reads as a miss.
        let mut unacknowledged = SyncPoint::default();
        for (seen, entry) in self.kvs.range(resume.to_vec()..).enumerate() {
            let (key, value) = entry?;
            if seen == budget {
                return Ok((deleted, Some(key.to_vec())));
            }
            if Item::decode(&key, value)?.is_live(now) {
                continue;
            }
            let _guard = self.lock(&key);
            // Read again under the lock: a writer may have stored it anew.
            if let Some(value) = self.kvs.get(&key)? {
                if !Item::decode(&key, value)?.is_live(now) {
                    self.remove(&key, &mut unacknowledged)?;
                    deleted += 1;
                }
            }
        }
        Ok((deleted, None))
    }
}

impl Drop for Items {
    fn drop(&mut self) {
        let at = self.flush_at.load(Ordering::Acquire);
        if at != 0 {
            tracing::warn!(
                flush_at_unix_ms = at,
                "a delayed memcached flush_all was not due yet and is cancelled by the stop"
            );
        }
    }
}

fn concat(first: &[u8], second: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(first.len() + second.len());
    out.extend_from_slice(first);
    out.extend_from_slice(second);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &std::path::Path) -> Items {
        let db = Arc::new(Db::open(path, shaledb::Options::default()).unwrap());
        let kvs = db.kvs("memcached").unwrap();
        Items::new(db, kvs)
    }

    #[test]
    fn a_delayed_flush_waits_for_its_time_and_a_later_flush_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let items = open(dir.path());
        let store = |key: &[u8]| {
            items
                .store(
                    key,
                    Mode::Set,
                    0,
                    0,
                    Bytes::from_static(b"x"),
                    &mut SyncPoint::default(),
                )
                .unwrap();
        };
        let held = |key: &[u8]| items.get(key).unwrap().is_some();
        store(b"a");
        items
            .flush_at(now_ms() + 60_000, &mut SyncPoint::default())
            .unwrap();
        items.flush_if_due(&mut SyncPoint::default()).unwrap();
        assert!(held(b"a"), "flushed before its time");
        // A later flush_all replaces it; what is stored before its time goes too, as in
        // memcached.
        items
            .flush_at(now_ms() + 100, &mut SyncPoint::default())
            .unwrap();
        store(b"b");
        std::thread::sleep(std::time::Duration::from_millis(200));
        items.flush_if_due(&mut SyncPoint::default()).unwrap();
        assert!(!held(b"a") && !held(b"b"), "not flushed once due");
        store(b"c");
        items.flush_if_due(&mut SyncPoint::default()).unwrap();
        assert!(held(b"c"), "a flush that was done ran again");
        // An immediate flush replaces a delayed one still pending.
        items
            .flush_at(now_ms() + 60_000, &mut SyncPoint::default())
            .unwrap();
        items.flush_at(0, &mut SyncPoint::default()).unwrap();
        assert!(!held(b"c"));
        assert_eq!(items.flush_at.load(Ordering::Acquire), 0, "still pending");
    }

    #[test]
    fn a_record_not_in_item_format_is_named_damage() {
        let dir = tempfile::tempdir().unwrap();
        let items = open(dir.path());
        items.kvs.put(b"short", [FORMAT, 0, 0]).unwrap();
        let mut other_format = vec![9u8; HEADER_BYTES];
        other_format.extend_from_slice(b"data");
        items.kvs.put(b"other", &other_format).unwrap();
        for key in [&b"short"[..], b"other"] {
            let expected = String::from_utf8_lossy(key).into_owned();
            match items.get(key) {
                Err(ItemError::Damaged(what)) => assert!(what.contains(&expected), "{what}"),
                other => panic!("a damaged item read as {other:?}"),
            }
            // Writers that read the item first refuse too, rather than overwrite what they
            // cannot read as if it were missing.
            assert!(matches!(
                items.store(
                    key,
                    Mode::Add,
                    0,
                    0,
                    Bytes::from_static(b"x"),
                    &mut SyncPoint::default()
                ),
                Err(ItemError::Damaged(_))
            ));
        }
        // A plain set replaces it unread: the client gives the whole item.
        assert!(matches!(
            items.store(
                b"short",
                Mode::Set,
                1,
                0,
                Bytes::from_static(b"new"),
                &mut SyncPoint::default()
            ),
            Ok(StoreReply::Stored(_))
        ));
        assert_eq!(items.get(b"short").unwrap().unwrap().data, "new");
    }

    #[test]
    fn expired_items_read_as_missing_and_are_deleted_in_steps() {
        let dir = tempfile::tempdir().unwrap();
        let items = open(dir.path());
        for index in 0..10u8 {
            let expires_at = if index % 2 == 0 { 1 } else { 0 };
            items
                .store(
                    &[b'k', index],
                    Mode::Set,
                    0,
                    expires_at,
                    Bytes::from_static(b"v"),
                    &mut SyncPoint::default(),
                )
                .unwrap();
        }
        assert_eq!(items.get(b"k\x00").unwrap(), None, "expired");
        let (deleted, resume) = items.expire(b"", 4).unwrap();
        assert_eq!((deleted, resume.as_deref()), (2, Some(&b"k\x04"[..])));
        let (deleted, resume) = items.expire(&resume.unwrap(), 100).unwrap();
        assert_eq!((deleted, resume), (3, None));
        assert_eq!(items.kvs.iter().count(), 5);
    }
}
