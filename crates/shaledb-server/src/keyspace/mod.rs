//! How Redis's databases live in ShaleDB KVSs: every Redis key is one or more ordered records.
//!
//! Each database is one KVS. Record keys start with a class byte:
//!
//! | record key                            | value                       | holds                   |
//! |---------------------------------------|-----------------------------|-------------------------|
//! | `0` base `s`                          | the string                  | a string of <= 512 KiB  |
//! | `0` base `c`                          | length, blob id (2 x 8-byte BE) | a longer string ... |
//! | `0` base `h` field                    | the field's value           | one hash field          |
//! | `0` base `G`                          | changes to it (`packed`)    | ... not yet folded in   |
//! | `0` base `H`                          | members and values (`packed`) | a small hash, whole   |
//! | `0` base `L`                          | head, tail (2 x 8-byte BE)  | a list's bounds         |
//! | `0` base `l` position (8-byte sortable) | the element               | one list element        |
//! | `0` base `K`                          | changes to it (`packed`)    | ... not yet folded in   |
//! | `0` base `m` member                   | empty                       | one set member          |
//! | `0` base `M`                          | members (`packed`)          | a small set, whole      |
//! | `0` base `z` member                   | score (8-byte BE f64 bits)  | one sorted-set member   |
//! | `0` base `Z` sortable-score member    | empty                       | the member's rank entry |
//! | `0` base `0xFE`                       | unix ms (8-byte BE)         | the key's expiry time   |
//! | `1` unix ms (8-byte BE) base          | empty                       | the expiry queue        |
//! | `2` stripe (2-byte BE)                | count (8-byte BE)           | live keys of a stripe   |
//! | `3layout`                             | `shale-redis-layout 5 4096` | this layout's version   |
//! | `3database`                           | number (2-byte BE)          | the database served     |
//! | `4` blob id (8-byte BE)               | empty                       | ... its blob, linked    |
//! | `4` blob id chunk (4-byte BE)         | 512 KiB of it               | ... in chunks           |
//!
//! A key's *base* is its length as a 4-byte big-endian number, then the key; the base's first
//! byte is the class byte `0`, since keys are at most 1 KiB. All records of one Redis key are
//! adjacent and sort below `base 0xFF`, so a key's type is the tag of its first record (one index
//! seek, no device read), its expiry is one point read, and deleting it is one prefix delete.
//! A string longer than 512 KiB is a *blob* (see `blobs`): written chunk by chunk as it arrives,
//! outside the batch of the command that then links it, so its size is bound neither by memory
//! nor by the engine's batch limit.
//! Small hashes and sets are one record each (`packed`); a larger one's fields or members,
//! sorted-set members and list elements are records of their own: HSET writes one field,
//! LPUSH one element. Expiry times are records too, and survive restarts; the
//! queue orders them by time so the background expirer finds what is due without a scan. DBSIZE
//! sums 4,096 per-stripe key counts, kept in the same batch as the writes that change them.
//!
//! All reads and writes go through a [`Tx`]: a command's reads see its own earlier writes, and
//! everything it (or a whole MULTI/EXEC) wrote commits as one engine batch.

mod blobs;
mod cleared;
mod expiry;
mod hashes;
mod lists;
mod packed;
mod records;
mod sets;
mod strings;
mod tx;
mod zsets;

#[cfg(test)]
mod test_support {
    use super::{BlobIds, Keyspace};
    use std::sync::Arc;

    /// A KVDB in `path` with database 0 on KVS `redis-0`.
    pub fn open(path: &std::path::Path) -> (Arc<shaledb::Db>, Keyspace) {
        let db = Arc::new(shaledb::Db::open(path, shaledb::Options::default()).unwrap());
        let kvs = db
            .kvs_with_options("redis-0", super::kvs_options())
            .unwrap();
        let keyspace = Keyspace::open(db.clone(), kvs, 0, BlobIds::new()).unwrap();
        (db, keyspace)
    }
}

#[cfg(test)]
mod damage_tests;

pub use blobs::{BlobIds, BlobReader, StagedBlob, Upload, CHUNK_BYTES};
pub use expiry::{expire_due, ExpireCondition};
pub use lists::{ListEnd, Pivot};
pub use packed::Packing;
pub use strings::{SetCondition, SetExpiry, ShortString, StringInput, StringValue};
pub use tx::{KeyRecords, Savepoint, Tx, View};
pub use zsets::{LexBound, Ranked, ScoreBound};

use shaledb::{Db, Kvs};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Locks (in `commands`) and key counts are kept per stripe of keys.
pub const STRIPES: usize = 4096;
const DATA: u8 = 0;
const EXPIRY_QUEUE: u8 = 1;
const KEY_COUNTS: u8 = 2;
const LAYOUT_KEY: &[u8] = b"\x03layout";
/// Blobs: the chunks of long strings (`blobs`).
const BLOBS: u8 = 4;
/// Which database a KVS serves (2-byte BE): SWAPDB rewrites it.
const DATABASE_KEY: &[u8] = b"\x03database";
const LAYOUT_VALUE: &str = "shale-redis-layout 5 4096";
/// Layout 4 had no patches of packed collections, layout 3 no packed collections: their
/// records are layout 5's, and opening either only rewrites the layout record (a server that
/// predates patches or packing then refuses it, rather than meeting records it cannot read).
const LAYOUT_4_VALUE: &str = "shale-redis-layout 4 4096";
const LAYOUT_3_VALUE: &str = "shale-redis-layout 3 4096";
/// Layout 2 kept a long string's chunks under its key, `base d chunk`, and its length alone in
/// its `c` record; opening such a database moves them into blobs.
const LAYOUT_2_VALUE: &str = "shale-redis-layout 2 4096";

/// The tag byte after a key's base.
mod tag {
    pub const STRING: u8 = b's';
    /// A string longer than one chunk: its length and the blob holding it.
    pub const CHUNKED_STRING: u8 = b'c';
    /// Layout 2 kept a long string's chunks under this tag.
    pub const LAYOUT_2_STRING_CHUNK: u8 = b'd';
    pub const HASH_FIELD: u8 = b'h';
    /// A small hash packed into one record (`packed`).
    pub const PACKED_HASH: u8 = b'H';
    /// Changes to a packed hash not yet folded into its record (`packed`); sorts before it.
    pub const PACKED_HASH_PATCH: u8 = b'G';
    pub const LIST_BOUNDS: u8 = b'L';
    pub const LIST_ITEM: u8 = b'l';
    pub const SET_MEMBER: u8 = b'm';
    /// A small set packed into one record (`packed`).
    pub const PACKED_SET: u8 = b'M';
    /// Changes to a packed set not yet folded into its record (`packed`); sorts before it.
    pub const PACKED_SET_PATCH: u8 = b'K';
    pub const ZSET_MEMBER: u8 = b'z';
    pub const ZSET_RANK: u8 = b'Z';
    /// Layout 1 kept a string with a TTL under this tag (expiry, then the string).
    pub const LAYOUT_1_STRING_WITH_TTL: u8 = b'x';
    /// Sorts after every type's tag: a key's first record names its type.
    pub const EXPIRY: u8 = 0xFE;
    /// Sorts after every tag: `base END` bounds a key's records.
    pub const END: u8 = 0xFF;
}

/// The Redis type of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    String,
    Hash,
    List,
    Set,
    ZSet,
}

impl KeyType {
    pub fn name(self) -> &'static str {
        match self {
            KeyType::String => "string",
            KeyType::Hash => "hash",
            KeyType::List => "list",
            KeyType::Set => "set",
            KeyType::ZSet => "zset",
        }
    }

    fn of_tag(tag: u8) -> Option<KeyType> {
        match tag {
            tag::STRING | tag::CHUNKED_STRING => Some(KeyType::String),
            tag::HASH_FIELD | tag::PACKED_HASH | tag::PACKED_HASH_PATCH => Some(KeyType::Hash),
            tag::LIST_BOUNDS | tag::LIST_ITEM => Some(KeyType::List),
            tag::SET_MEMBER | tag::PACKED_SET | tag::PACKED_SET_PATCH => Some(KeyType::Set),
            tag::ZSET_MEMBER | tag::ZSET_RANK => Some(KeyType::ZSet),
            _ => None,
        }
    }
}

/// Why a keyspace operation failed.
#[derive(Debug)]
pub enum Failure {
    WrongType,
    /// A key, field or member too long for the engine once encoded.
    TooLarge,
    /// A record that cannot be in this layout: named, never skipped.
    Damaged(String),
    /// A command's own error, as Redis words it (`ERR no such key`, ...).
    Invalid(String),
    Engine(shaledb::Error),
}

impl From<shaledb::Error> for Failure {
    fn from(error: shaledb::Error) -> Self {
        Failure::Engine(error)
    }
}

pub type Result<T> = std::result::Result<T, Failure>;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// The stripe of `key`: locks and key counts are kept per stripe. It does not depend on the
/// database, so a database's counts stay valid when SWAPDB gives it another number, and the lock
/// a writer holds is always the lock of the counts it changes.
pub fn stripe_of(key: &[u8]) -> usize {
    (crate::stripes::key_hash(key) % STRIPES as u64) as usize
}

/// The options a database's KVS is created with: a key's records (its base, then a tag) form
/// one key group, so reading a key's type or its fields, members or elements in order asks one
/// index partition. Records of the other classes (first byte 1 to 4, so their 4-byte "length"
/// runs past the record) are groups of their own.
pub fn kvs_options() -> shaledb::KvsOptions {
    shaledb::KvsOptions {
        key_groups: shaledb::KeyGroups::LengthPrefixed {
            offset: 0,
            width: 4,
        },
        ..shaledb::KvsOptions::default()
    }
}

fn base(key: &[u8]) -> Vec<u8> {
    base_with_room(key, 16)
}

/// `base(key)` with room for `more` bytes after it (no reallocation as a record key is built).
fn base_with_room(key: &[u8], more: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + key.len() + more);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out
}

fn record_key(key: &[u8], tag: u8, suffix: &[u8]) -> Result<Vec<u8>> {
    check_record_key_len(key, suffix)?;
    let mut out = base_with_room(key, 1 + suffix.len());
    out.push(tag);
    out.extend_from_slice(suffix);
    Ok(out)
}

/// Whether `record_key(key, _, suffix)` fits the engine's key limit (TooLarge if not), without
/// building it.
fn check_record_key_len(key: &[u8], suffix: &[u8]) -> Result<()> {
    if 4 + key.len() + 1 + suffix.len() > shaledb::limits::KEY_BYTES_MAX {
        return Err(Failure::TooLarge);
    }
    Ok(())
}

/// The bound past every record of `key`.
fn key_end(key: &[u8]) -> Vec<u8> {
    let mut out = base(key);
    out.push(tag::END);
    out
}

/// The Redis key, tag and suffix of a data record key.
fn split_record_key(record: &[u8]) -> Option<(&[u8], u8, &[u8])> {
    let length = u32::from_be_bytes(record.get(..4)?.try_into().ok()?) as usize;
    let key = record.get(4..4 + length)?;
    let tag = *record.get(4 + length)?;
    Some((key, tag, &record[5 + length..]))
}

fn damaged(what: &str, record: &[u8]) -> Failure {
    Failure::Damaged(format!(
        "{what}: record {:?}",
        String::from_utf8_lossy(&record[..record.len().min(80)])
    ))
}

fn read_u64(bytes: &[u8], what: &str) -> Result<u64> {
    bytes
        .get(..8)
        .and_then(|head| head.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| damaged(what, bytes))
}

/// The number `record` holds as its whole value: exactly 8 bytes, big-endian. Any other length
/// is damage, named by the record.
fn record_u64(record: &[u8], value: &[u8], what: &str) -> Result<u64> {
    <[u8; 8]>::try_from(value)
        .map(u64::from_be_bytes)
        .map_err(|_| damaged(&format!("{what} of {} bytes, not 8", value.len()), record))
}

/// A KVS holding one database's records, and its key counts.
pub struct Space {
    db: Arc<Db>,
    pub kvs: Kvs,
    /// Live keys per stripe, as stored in the `2` records (changed under the stripe's lock).
    counts: Vec<AtomicI64>,
    /// Which keys may have an expiry record.
    expiring: expiry::ExpiryCounts,
    blob_ids: Arc<BlobIds>,
    blob_pins: blobs::BlobPins,
}

/// One Redis database: the [`Space`] that serves it now (SWAPDB exchanges two).
pub struct Keyspace {
    pub db: Arc<Db>,
    pub number: usize,
    /// Every database's space, in a table the keyspaces share and never change once the server
    /// has opened them all (`share_spaces`): a transaction borrows its space from it for as
    /// long as it borrows the keyspace, without a reference count or a guard.
    spaces: Arc<[Arc<Space>]>,
    /// The place in `spaces` of the space serving this database now: one load per transaction,
    /// where an `ArcSwap`'s guard cost two atomic writes (2% of a pipelined GET).
    current: AtomicUsize,
}

impl Keyspace {
    /// Opens `kvs`, configured as database `number`: checks the layout (upgrading layout 1 in
    /// place) and loads the key counts. Returns it with the database it serves, which differs
    /// from `number` after a SWAPDB.
    pub fn open(db: Arc<Db>, kvs: Kvs, number: usize, blob_ids: Arc<BlobIds>) -> Result<Keyspace> {
        let space = Arc::new(Space {
            db: db.clone(),
            kvs,
            counts: (0..STRIPES).map(|_| AtomicI64::new(0)).collect(),
            expiring: expiry::ExpiryCounts::new(),
            blob_ids,
            blob_pins: blobs::BlobPins::default(),
        });
        // Blobs are swept only in a KVS known to hold Redis data: class `4` means nothing elsewhere.
        match space.kvs.get(LAYOUT_KEY)? {
            Some(value) if value == LAYOUT_VALUE.as_bytes() => blobs::sweep(&space)?,
            Some(value)
                if value == LAYOUT_4_VALUE.as_bytes() || value == LAYOUT_3_VALUE.as_bytes() =>
            {
                blobs::sweep(&space)?;
                space.kvs.put(LAYOUT_KEY, LAYOUT_VALUE)?;
            }
            Some(value) if value == LAYOUT_2_VALUE.as_bytes() => {
                blobs::sweep(&space)?;
                upgrade_from_layout_2(&space)?;
            }
            Some(value) => {
                return Err(Failure::Damaged(format!(
                    "KVS {:?} holds Redis data in an unknown layout {:?} (this server reads {LAYOUT_VALUE:?})",
                    space.kvs.name(),
                    String::from_utf8_lossy(&value)
                )))
            }
            None => upgrade_from_layout_1(&space, number)?,
        }
        space.load_counts()?;
        space.expiring.load(&space)?;
        let serves = match space.kvs.get(DATABASE_KEY)? {
            Some(value) if value.len() == 2 => u16::from_be_bytes([value[0], value[1]]) as usize,
            Some(value) => {
                return Err(damaged(
                    &format!("a database number of {} bytes, not 2", value.len()),
                    DATABASE_KEY,
                ))
            }
            None => {
                space.kvs.put(DATABASE_KEY, (number as u16).to_be_bytes())?;
                number
            }
        };
        Ok(Keyspace::serving(db, serves, space))
    }

    /// A keyspace serving database `number` from `space`, in a table of its own until
    /// `share_spaces`.
    fn serving(db: Arc<Db>, number: usize, space: Arc<Space>) -> Keyspace {
        Keyspace {
            db,
            number,
            spaces: Arc::new([space]),
            current: AtomicUsize::new(0),
        }
    }

    /// Puts the spaces of `keyspaces` in one table they all share, so SWAPDB can exchange any
    /// two. Called once, before any transaction.
    pub fn share_spaces(keyspaces: &mut [Keyspace]) {
        let spaces: Arc<[Arc<Space>]> = keyspaces
            .iter()
            .map(|keyspace| keyspace.space_for_now().clone())
            .collect();
        for (place, keyspace) in keyspaces.iter_mut().enumerate() {
            keyspace.spaces = spaces.clone();
            *keyspace.current.get_mut() = place;
        }
    }

    /// The space serving this database now.
    pub fn space(&self) -> Arc<Space> {
        self.space_for_now().clone()
    }

    /// The space serving this database now, borrowed: for a transaction, which reads it once
    /// per command.
    pub fn space_for_now(&self) -> &Arc<Space> {
        &self.spaces[self.current.load(Ordering::Acquire)]
    }

    /// SWAPDB: `self` and `other` exchange their spaces, durably (one batch rewrites both
    /// spaces' database records). The caller holds every stripe lock.
    pub fn swap(&self, other: &Keyspace) -> Result<()> {
        if !Arc::ptr_eq(&self.spaces, &other.spaces) {
            return Err(Failure::Invalid(
                "ERR these databases do not share a table of spaces to swap".into(),
            ));
        }
        let (mine, theirs) = (
            self.current.load(Ordering::Acquire),
            other.current.load(Ordering::Acquire),
        );
        let mut batch = shaledb::WriteBatch::new();
        batch.put(
            &self.spaces[mine].kvs,
            DATABASE_KEY,
            (other.number as u16).to_be_bytes(),
        );
        batch.put(
            &self.spaces[theirs].kvs,
            DATABASE_KEY,
            (self.number as u16).to_be_bytes(),
        );
        self.db.write(batch)?;
        self.current.store(theirs, Ordering::Release);
        other.current.store(mine, Ordering::Release);
        Ok(())
    }

    /// Live keys (those past their expiry but not yet removed included, as in Redis).
    pub fn key_count(&self) -> u64 {
        self.space().key_count()
    }

    /// Keys with an expiry time (a walk of the expiry queue's keys, no value reads).
    pub fn keys_with_expiry(&self) -> Result<u64> {
        let mut count = 0;
        for key in self.space().kvs.prefix([EXPIRY_QUEUE]).keys() {
            key?;
            count += 1;
        }
        Ok(count)
    }
}

impl Space {
    fn load_counts(&self) -> Result<()> {
        for item in self.kvs.prefix([KEY_COUNTS]) {
            let (record, value) = item?;
            let stripe = record
                .get(1..3)
                .map(|bytes| u16::from_be_bytes([bytes[0], bytes[1]]) as usize)
                .filter(|&stripe| stripe < STRIPES && record.len() == 3)
                .ok_or_else(|| damaged("a key count record with a bad stripe", &record))?;
            let count = i64::try_from(record_u64(&record, &value, "a key count")?)
                .map_err(|_| damaged("a key count past any possible number of keys", &record))?;
            self.counts[stripe].store(count, Ordering::Relaxed);
        }
        Ok(())
    }

    fn key_count(&self) -> u64 {
        let total: i64 = self
            .counts
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum();
        total.max(0) as u64
    }
}

/// Rewrites a database of layout 1 (no layout record, strings with a TTL under tag `x`, no
/// key counts) into this layout; a new database just gets its layout record. Idempotent: a
/// crash midway leaves no layout record, and the next open upgrades again.
fn upgrade_from_layout_1(space: &Arc<Space>, number: usize) -> Result<()> {
    // Expiry-queue records (class 1) may be left by an upgrade that crashed midway; key
    // counts (class 2), the layout and database records (class 3) and blobs (class 4) are
    // written only once it is done, so with no layout record they are damage (a later layout's
    // KVS that lost its layout record), not a database to upgrade.
    if let Some(record) = space.kvs.range(vec![KEY_COUNTS]..).keys().next() {
        return Err(damaged(
            &format!(
                "KVS {:?} has no Redis layout record (\\x03layout) but holds records a \
                 layout-1 database never has",
                space.kvs.name()
            ),
            &record?,
        ));
    }
    let mut counts = vec![0i64; STRIPES];
    // The upgrade writes through a keyspace of its own on this space, before any client.
    let this = Keyspace::serving(space.db.clone(), number, space.clone());
    let spaces = std::slice::from_ref(&this);
    let mut tx = Tx::new(spaces);
    let mut last_key: Option<Vec<u8>> = None;
    for record in space.kvs.prefix([DATA]).keys() {
        let record = record?;
        let (key, record_tag, _) = split_record_key(&record)
            .ok_or_else(|| damaged("a layout-1 record without a key", &record))?;
        // Layout 1's tags, and the expiry records a crashed upgrade may have written.
        if ![
            tag::STRING,
            tag::LAYOUT_1_STRING_WITH_TTL,
            tag::HASH_FIELD,
            tag::ZSET_MEMBER,
            tag::ZSET_RANK,
            tag::EXPIRY,
        ]
        .contains(&record_tag)
        {
            return Err(damaged(
                &format!(
                    "KVS {:?} has no Redis layout record (\\x03layout) but holds a record of \
                     no layout-1 type",
                    space.kvs.name()
                ),
                &record,
            ));
        }
        if last_key.as_deref() != Some(key) {
            counts[stripe_of(key)] += 1;
            last_key = Some(key.to_vec());
        }
        if record_tag == tag::LAYOUT_1_STRING_WITH_TTL {
            let value = space
                .kvs
                .get(&record)?
                .ok_or_else(|| damaged("a layout-1 record vanished", &record))?;
            let expires_at = read_u64(&value, "a layout-1 expiry")?;
            let mut view = tx.on(0);
            view.delete_record(&record);
            view.put_record(record_key(key, tag::STRING, &[])?, value.slice(8..));
            view.write_expiry(key, None, Some(expires_at))?;
            if tx.write_count() >= 1000 {
                std::mem::replace(&mut tx, Tx::new(spaces)).commit()?;
            }
        }
    }
    tx.commit()?;
    let mut batch = shaledb::WriteBatch::new();
    for (stripe, count) in counts.iter().enumerate() {
        if *count != 0 {
            batch.put(&space.kvs, count_key(stripe), (*count as u64).to_be_bytes());
        }
    }
    batch.put(&space.kvs, LAYOUT_KEY, LAYOUT_VALUE);
    space.db.write(batch)?;
    Ok(())
}

/// Moves layout 2's long strings (chunks under the key, `base d chunk`, and an 8-byte length in
/// the `c` record) into blobs, one string per batch, then writes this layout's record; a crash
/// midway leaves layout 2's record, and the next open goes on (strings already moved have
/// 16-byte headers and are passed over).
fn upgrade_from_layout_2(space: &Arc<Space>) -> Result<()> {
    let mut long_strings = Vec::new();
    for record in space.kvs.prefix([DATA]).keys() {
        let record = record?;
        let (key, record_tag, _) =
            split_record_key(&record).ok_or_else(|| damaged("a record without a key", &record))?;
        if record_tag == tag::CHUNKED_STRING {
            long_strings.push(key.to_vec());
        }
    }
    for key in long_strings {
        let header = record_key(&key, tag::CHUNKED_STRING, &[])?;
        let value = space
            .kvs
            .get(&header)?
            .ok_or_else(|| damaged("a layout-2 record vanished", &header))?;
        if value.len() == 16 {
            continue;
        }
        if value.len() != 8 {
            return Err(damaged("a layout-2 long string's length", &header));
        }
        let length = read_u64(&value, "a layout-2 long string's length")?;
        let mut upload = Upload::begin(space.clone(), length)?;
        let first = record_key(&key, tag::LAYOUT_2_STRING_CHUNK, &[])?;
        let last = record_key(&key, tag::LAYOUT_2_STRING_CHUNK + 1, &[])?;
        for (index, item) in space.kvs.range(first.clone()..last).enumerate() {
            let (record, chunk) = item?;
            let expected = record_key(
                &key,
                tag::LAYOUT_2_STRING_CHUNK,
                &(index as u32).to_be_bytes(),
            )?;
            if record != expected {
                return Err(damaged(
                    "a chunk out of place in a layout-2 long string",
                    &record,
                ));
            }
            if chunk.len() as u64 > upload.remaining() {
                return Err(damaged(
                    "a layout-2 long string longer than its length",
                    &record,
                ));
            }
            upload.push(&chunk)?;
        }
        if upload.remaining() != 0 {
            return Err(damaged(
                "a layout-2 long string whose chunks miss bytes",
                &header,
            ));
        }
        let blob = upload.finish();
        let mut batch = shaledb::WriteBatch::new();
        batch.prefix_delete(&space.kvs, &first);
        batch.put(&space.kvs, &header, blobs::encode_header(length, blob.id()));
        batch.put(&space.kvs, blobs::blob_prefix(blob.id()), []);
        space.db.write(batch)?;
        blob.keep();
    }
    space.kvs.put(LAYOUT_KEY, LAYOUT_VALUE)?;
    Ok(())
}

fn count_key(stripe: usize) -> [u8; 3] {
    let stripe = (stripe as u16).to_be_bytes();
    [KEY_COUNTS, stripe[0], stripe[1]]
}

/// Redis's reading of a range `start..=stop` over `len` items, where negative indices count from
/// the end: the first and last index, or `None` for an empty range.
pub fn normalize_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len || stop < 0 {
        return None;
    }
    Some((start as usize, stop as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swapdb_exchanges_the_spaces_of_keyspaces_sharing_a_table_and_refuses_others() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(dir.path(), shaledb::Options::default()).unwrap());
        let blob_ids = BlobIds::new();
        let mut keyspaces: Vec<Keyspace> = (0..2)
            .map(|number| {
                let kvs = db
                    .kvs_with_options(&format!("redis-{number}"), kvs_options())
                    .unwrap();
                Keyspace::open(db.clone(), kvs, number, blob_ids.clone()).unwrap()
            })
            .collect();
        let mut tx = Tx::new(&keyspaces);
        tx.on(0)
            .set_string(b"key", &b"in 0"[..], SetExpiry::Clear)
            .unwrap();
        tx.commit().unwrap();
        let read = |keyspaces: &[Keyspace], number: usize| {
            Tx::new(keyspaces).on(number).get_string(b"key").unwrap()
        };

        // Opened apart, each keyspace has a table of its own: nothing to exchange.
        assert!(matches!(
            keyspaces[0].swap(&keyspaces[1]),
            Err(Failure::Invalid(_))
        ));
        assert_eq!(read(&keyspaces, 0).as_deref(), Some(&b"in 0"[..]));

        Keyspace::share_spaces(&mut keyspaces);
        keyspaces[0].swap(&keyspaces[1]).unwrap();
        assert_eq!(read(&keyspaces, 0), None);
        assert_eq!(read(&keyspaces, 1).as_deref(), Some(&b"in 0"[..]));
        keyspaces[1].swap(&keyspaces[0]).unwrap();
        assert_eq!(read(&keyspaces, 0).as_deref(), Some(&b"in 0"[..]));
    }
}
