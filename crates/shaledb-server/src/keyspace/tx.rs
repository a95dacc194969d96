//! [`Tx`]: the writes of one command, or of a whole MULTI/EXEC, buffered and committed as one
//! engine batch; reads through it see those writes first.
//!
//! Isolation comes from the callers: a command that writes holds the stripe locks of its keys
//! (EXEC: of every key its commands name) from its first read to its commit, so no other writer
//! changes those keys in between, and the batch makes the writes visible, and durable, all at
//! once. Plain reads take no lock: they see a key before a batch or after it, never within.

use super::blobs::{self, BlobReader, StagedBlob};
use super::cleared::ClearedPrefixes;
use super::packed::{packed_tag, patch_for, patch_tag, MemberBytes, Packed, Packing};
use super::records::{Base, Records};
use super::strings::{StringValue, READ_ATTEMPTS};
use super::Space;
use super::{
    base, check_record_key_len, count_key, damaged, key_end, record_key, record_u64, tag, KeyType,
    Keyspace, Result, BLOBS, DATA, EXPIRY_QUEUE, KEY_COUNTS,
};
use bytes::Bytes;
use shaledb::{SyncPoint, WriteBatch};
use smallvec::SmallVec;
use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Index probes `View::first_record_key` makes past records the transaction deleted before it
/// reads through a cursor instead.
const FIRST_RECORD_PROBES: usize = 4;
/// A range of one key's records is read at once (`shaledb::Kvs::read_group`) when it holds at
/// most this many, else with a cursor: it is collected under its partition's read lock, which
/// writers of that partition wait for.
const GROUP_READ_RECORDS_MAX: usize = 64;
/// ... and when the records it reads from media take at most this many bytes: it reads them
/// all before the caller takes any, where a cursor reads a few at a time (HSCAN COUNT 1 of a
/// hash of large fields reads one).
const GROUP_READ_BYTES_MAX: u64 = 64 << 10;

/// A transaction's record writes: database -> record key -> `Some(value)` put or `None`
/// deleted, in (database, record key) order. A few are kept in a sorted array, which a one-key
/// command's write fills without an allocation (two B-trees, each a node of eleven slots, were
/// two allocations per SET); more move into a B-tree per database, so a read looks its record
/// key up as it is, with no slot key built (a pipeline's batched commands read through many
/// writes). No empty inner map.
#[derive(Clone, Debug)]
// The inline array is the point: a transaction lives on its command's stack, and boxing the
// array would be the allocation it saves.
#[allow(clippy::large_enum_variant)]
enum PendingWrites {
    Few(SmallVec<[PendingWrite; FEW_WRITES]>),
    Many(BTreeMap<usize, BTreeMap<Vec<u8>, Option<Bytes>>>),
}

/// A write: its database, record key, and `Some(value)` put or `None` deleted.
type PendingWrite = (usize, Vec<u8>, Option<Bytes>);

/// Writes a transaction keeps in a sorted array before it moves them into B-trees.
const FEW_WRITES: usize = 4;
/// Undo entries a transaction that takes savepoints (EXEC, a batched pipeline run) has room for
/// before its log grows.
const UNDO_ROOM: usize = 32;

impl Default for PendingWrites {
    fn default() -> Self {
        PendingWrites::Few(SmallVec::new())
    }
}

impl PartialEq for PendingWrites {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl PendingWrites {
    fn is_empty(&self) -> bool {
        match self {
            PendingWrites::Few(writes) => writes.is_empty(),
            PendingWrites::Many(writes) => writes.is_empty(),
        }
    }

    fn len(&self) -> usize {
        match self {
            PendingWrites::Few(writes) => writes.len(),
            PendingWrites::Many(writes) => writes.values().map(BTreeMap::len).sum(),
        }
    }

    fn get_mut(&mut self, db: usize, record: &[u8]) -> Option<&mut Option<Bytes>> {
        match self {
            PendingWrites::Few(writes) => writes
                .iter_mut()
                .find(|(at, key, _)| *at == db && key.as_slice() == record)
                .map(|(_, _, value)| value),
            PendingWrites::Many(writes) => writes.get_mut(&db)?.get_mut(record),
        }
    }

    fn get(&self, db: usize, record: &[u8]) -> Option<&Option<Bytes>> {
        match self {
            PendingWrites::Few(writes) => writes
                .iter()
                .find(|(at, key, _)| *at == db && key.as_slice() == record)
                .map(|(_, _, value)| value),
            PendingWrites::Many(writes) => writes.get(&db)?.get(record),
        }
    }

    /// Sets a slot; what it held before.
    fn insert(
        &mut self,
        (db, record): (usize, Vec<u8>),
        value: Option<Bytes>,
    ) -> Option<Option<Bytes>> {
        if let PendingWrites::Few(writes) = self {
            let place = writes
                .binary_search_by(|(at, key, _)| (*at, key.as_slice()).cmp(&(db, &record[..])));
            match place {
                Ok(found) => return Some(std::mem::replace(&mut writes[found].2, value)),
                Err(place) if writes.len() < FEW_WRITES => {
                    writes.insert(place, (db, record, value));
                    return None;
                }
                Err(_) => {
                    let mut many: BTreeMap<usize, BTreeMap<Vec<u8>, Option<Bytes>>> =
                        BTreeMap::new();
                    for (db, record, value) in writes.drain(..) {
                        many.entry(db).or_default().insert(record, value);
                    }
                    *self = PendingWrites::Many(many);
                }
            }
        }
        let PendingWrites::Many(writes) = self else {
            unreachable!("a full array moved into B-trees above")
        };
        writes.entry(db).or_default().insert(record, value)
    }

    /// Empties a slot; what it held.
    fn remove(&mut self, db: usize, record: &[u8]) -> Option<Option<Bytes>> {
        match self {
            PendingWrites::Few(writes) => {
                let found = writes
                    .iter()
                    .position(|(at, key, _)| *at == db && key.as_slice() == record)?;
                Some(writes.remove(found).2)
            }
            PendingWrites::Many(writes) => {
                let records = writes.get_mut(&db)?;
                let before = records.remove(record);
                if records.is_empty() {
                    writes.remove(&db);
                }
                before
            }
        }
    }

    /// Database `db`'s writes from `start` (inclusive) to `end` (exclusive), found with one
    /// search from `start` (a range with both ends searches twice; a batched pipeline's every
    /// type check asks).
    fn range<'a>(
        &'a self,
        db: usize,
        start: &'a [u8],
        end: &'a [u8],
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Option<Bytes>)> + 'a {
        self.from(db, start)
            .take_while(move |(record, _)| record.as_slice() < end)
    }

    /// Database `db`'s writes from `start` (inclusive) on.
    fn from<'a>(
        &'a self,
        db: usize,
        start: &'a [u8],
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Option<Bytes>)> + 'a {
        let (few, many) = match self {
            PendingWrites::Few(writes) => (Some(writes), None),
            PendingWrites::Many(writes) => (None, writes.get(&db)),
        };
        let few = few.into_iter().flat_map(move |writes| {
            writes
                .iter()
                .filter(move |(at, key, _)| *at == db && key.as_slice() >= start)
                .map(|(_, key, value)| (key, value))
        });
        let many = many.into_iter().flat_map(move |records| {
            records.range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
        });
        few.chain(many)
    }

    /// Every write, in (database, record key) order.
    fn iter(&self) -> impl Iterator<Item = (usize, &Vec<u8>, &Option<Bytes>)> {
        let (few, many) = match self {
            PendingWrites::Few(writes) => (Some(writes), None),
            PendingWrites::Many(writes) => (None, Some(writes)),
        };
        let few = few
            .into_iter()
            .flat_map(|writes| writes.iter().map(|(db, key, value)| (*db, key, value)));
        let many = many.into_iter().flat_map(|writes| {
            writes
                .iter()
                .flat_map(|(db, records)| records.iter().map(move |(key, value)| (*db, key, value)))
        });
        few.chain(many)
    }

    /// Takes every write, in (database, record key) order. Drained in place: moved out whole,
    /// the inline array was copied twice per commit.
    fn drain(&mut self) -> impl Iterator<Item = (usize, Vec<u8>, Option<Bytes>)> + '_ {
        let (few, many) = match self {
            PendingWrites::Few(writes) => (Some(writes.drain(..)), None),
            PendingWrites::Many(writes) => (None, Some(std::mem::take(writes))),
        };
        let many = many.into_iter().flat_map(|writes| {
            writes.into_iter().flat_map(|(db, records)| {
                records
                    .into_iter()
                    .map(move |(record, value)| (db, record, value))
            })
        });
        few.into_iter().flatten().chain(many)
    }
}

/// The databases a transaction reads and writes, each with its space, resolved at its first
/// use and kept for the transaction: a database changes space only under SWAPDB, which holds
/// every stripe lock and never runs inside EXEC, so a writer sees one space throughout, and so
/// does a reader racing it. Saves a load per record read. The first database used is kept
/// apart: most commands use one, and need no table of all. Apart from the transaction's other
/// fields, so its commit can drain its writes while it looks spaces up.
struct TxSpaces<'s> {
    keyspaces: &'s [Keyspace],
    first: OnceCell<(usize, &'s Arc<Space>)>,
    others: OnceCell<Box<[OnceCell<&'s Arc<Space>>]>>,
}

impl<'s> TxSpaces<'s> {
    /// The space database `db` reads and writes in this transaction.
    fn of(&self, db: usize) -> &'s Arc<Space> {
        let &(first_db, first) = self
            .first
            .get_or_init(|| (db, self.keyspaces[db].space_for_now()));
        if first_db == db {
            return first;
        }
        let others = self
            .others
            .get_or_init(|| self.keyspaces.iter().map(|_| OnceCell::new()).collect());
        others[db].get_or_init(|| self.keyspaces[db].space_for_now())
    }
}

/// Writes buffered across the databases of one command or transaction.
pub struct Tx<'s> {
    spaces: TxSpaces<'s>,
    /// The records put and deleted, after any clear below.
    writes: PendingWrites,
    /// (database, prefix) deleted, in order; shared with the cursors reading through this
    /// transaction (copied only if one is alive when another prefix is cleared).
    cleared: ClearedPrefixes,
    /// Databases flushed whole: their key counts restart from zero.
    flushed: BTreeSet<usize>,
    /// (database, stripe) -> change in live keys.
    count_deltas: BTreeMap<(usize, usize), i64>,
    /// (database, stripe) of each expiry record this transaction deletes: its stripe's
    /// `Space::expiring` is lowered once the deletion has committed.
    expiry_deletions: Vec<(usize, usize)>,
    /// (database, Redis key) written, for WATCH.
    touched: Vec<(usize, Bytes)>,
    /// When set, the keys WATCHed by any client: a key written while it is zero is not noted in
    /// `touched` (no copy of it per write). Sound because a client WATCHes a key under its
    /// stripe lock, which the writer holds from before it writes the key until after the
    /// commit has marked its watchers.
    watched_keys: Option<&'s AtomicUsize>,
    /// Blobs this transaction links: kept once it commits, deleted if it does not.
    staged: Vec<StagedBlob>,
    /// Blobs whose link records this transaction deletes: their chunks are released once it
    /// commits (`Space::release_blob`).
    unlinked: Vec<(Arc<Space>, u64)>,
    /// The longest string a command may read whole into memory.
    string_bytes_max: usize,
    /// When a hash or set is packed into one record.
    packing: Packing,
    /// Once a savepoint is taken: what each change replaced, oldest first, so a rollback undoes
    /// only what came after it (EXEC takes one per command; copying the writes each time would
    /// make a long transaction quadratic).
    undo: Option<Vec<Undo>>,
    /// The type of the key whose type was read last, kept while this transaction's writes
    /// leave it true: a pipeline's batched commands on one key read its type once, where each
    /// read probed the index (a fifth of LPUSH's and ZADD's instructions).
    known_type: RefCell<Option<KnownType>>,
    /// Whether the engine holds the record read last with [`View::record`]: a command that
    /// reads a record and then writes it (INCR, APPEND, GETSET) asks again before writing,
    /// and each ask searched the index. The engine's records do not change under a
    /// transaction (a writer holds its keys' stripes; a reader may read one answer twice), and
    /// its own writes and clears are looked at first, so this stays true to its end.
    last_read: RefCell<LastRead>,
}

/// The record [`View::record`] read from the engine last, and whether it was there; kept
/// inline, so the read of a command that writes nothing (GET) allocates nothing for it.
struct LastRead {
    db: usize,
    /// The record's length in `record`; 0: none (no record is empty).
    len: usize,
    record: [u8; LAST_READ_BYTES],
    found: bool,
}

/// Records up to this long are remembered (redis-benchmark's and YCSB's keys among them).
const LAST_READ_BYTES: usize = 40;

impl LastRead {
    const NONE: LastRead = LastRead {
        db: 0,
        len: 0,
        record: [0; LAST_READ_BYTES],
        found: false,
    };

    fn remember(&mut self, db: usize, record: &[u8], found: bool) {
        match self.record.get_mut(..record.len()) {
            Some(kept) => {
                kept.copy_from_slice(record);
                (self.db, self.len, self.found) = (db, record.len(), found);
            }
            None => self.len = 0,
        }
    }

    fn found(&self, db: usize, record: &[u8]) -> Option<bool> {
        (self.len != 0 && self.db == db && self.record[..self.len] == *record).then_some(self.found)
    }
}

/// What [`View::stored_tag`] found for one key.
struct KnownType {
    db: usize,
    /// The key's base: every record of the key starts with it, then its tag.
    base: Vec<u8>,
    /// Its type, and its first record with that record's tag.
    first: Option<(KeyType, u8, Bytes)>,
}

impl KnownType {
    fn is_of(&self, db: usize, key: &[u8]) -> bool {
        self.db == db && self.base.len() == 4 + key.len() && self.base[4..] == *key
    }

    fn stored_tag(&self) -> Option<(KeyType, u8)> {
        self.first.as_ref().map(|&(kind, tag, _)| (kind, tag))
    }

    /// Follows a write of `record` (`put`, else its deletion) in `db`; returns whether this
    /// stays true. A record of another key leaves it so; so does one after the key's first
    /// record, and a deletion of one before it (there is none); a put before it with its tag
    /// becomes the first record. A deletion of a missing key's record leaves it missing.
    fn follow(&mut self, db: usize, record: &[u8], put: bool) -> bool {
        if self.db != db || !record.starts_with(&self.base) {
            return true;
        }
        let Some((_, first_tag, first)) = &mut self.first else {
            return !put;
        };
        match record.cmp(&first[..]) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => put,
            std::cmp::Ordering::Less if !put => true,
            std::cmp::Ordering::Less => {
                let same_tag = record.get(self.base.len()) == Some(first_tag);
                if same_tag {
                    *first = Bytes::copy_from_slice(record);
                }
                same_tag
            }
        }
    }
}

/// One change a rollback can undo: what a slot held before it (`None`: nothing).
enum Undo {
    Write((usize, Vec<u8>), Option<Option<Bytes>>),
    Delta((usize, usize), Option<i64>),
}

impl<'s> Tx<'s> {
    pub fn new(spaces: &'s [Keyspace]) -> Tx<'s> {
        Tx {
            spaces: TxSpaces {
                keyspaces: spaces,
                first: OnceCell::new(),
                others: OnceCell::new(),
            },
            writes: PendingWrites::default(),
            cleared: ClearedPrefixes::default(),
            flushed: BTreeSet::new(),
            count_deltas: BTreeMap::new(),
            expiry_deletions: Vec::new(),
            touched: Vec::new(),
            watched_keys: None,
            staged: Vec::new(),
            unlinked: Vec::new(),
            string_bytes_max: usize::MAX,
            packing: Packing::DEFAULT,
            undo: None,
            known_type: RefCell::new(None),
            last_read: RefCell::new(LastRead::NONE),
        }
    }

    /// Makes reads of strings longer than `bytes` whole fail (`View::get_string`).
    pub fn holding_strings_up_to(mut self, bytes: usize) -> Self {
        self.string_bytes_max = bytes;
        self
    }

    /// Packs hashes and sets as `packing` says (default: [`Packing::DEFAULT`]).
    pub fn packing(mut self, packing: Packing) -> Self {
        self.packing = packing;
        self
    }

    /// Notes the keys written only while `watched_keys` (how many keys clients WATCH) is not
    /// zero; by default every key written is noted.
    pub fn noting_writes_while_watched(mut self, watched_keys: &'s AtomicUsize) -> Self {
        self.watched_keys = Some(watched_keys);
        self
    }

    /// Reads and writes database `db` through this transaction.
    pub fn on<'t>(&'t mut self, db: usize) -> View<'t, 's> {
        View { tx: self, db }
    }

    /// The space database `db` reads and writes in this transaction.
    fn space_of(&self, db: usize) -> &'s Arc<Space> {
        self.spaces.of(db)
    }

    pub fn write_count(&self) -> usize {
        self.writes.len() + self.cleared.len()
    }

    /// The keys noted as changed so far, for WATCH (see `commit`), taken out.
    pub fn take_touched(&mut self) -> Vec<(usize, Bytes)> {
        std::mem::take(&mut self.touched)
    }

    /// Commits every write as one engine batch, with the key counts they change; returns the
    /// keys written, for WATCH (none written while nothing was watched, see
    /// `noting_writes_while_watched`). Nothing is written if it fails. Either way the
    /// transaction is spent: its writes went to the batch, and it is only dropped after this.
    /// It commits in place: moved by value, a transaction (a few hundred bytes of inline
    /// buffers) was copied at each call, about 300 instructions of a pipelined INCR.
    pub fn commit(&mut self) -> Result<Vec<(usize, Bytes)>> {
        let spaces = self.spaces.keyspaces;
        let (touched, point) = self.commit_unsynced()?;
        spaces[0].db.wait_synced(point)?;
        Ok(touched)
    }

    /// Commits as `commit` does, but returns before the durability wait, with the point to
    /// sync (`Db::wait_synced`) before the writes are acknowledged.
    pub fn commit_unsynced(&mut self) -> Result<(Vec<(usize, Bytes)>, SyncPoint)> {
        let touched = std::mem::take(&mut self.touched);
        if self.writes.is_empty() && self.cleared.is_empty() {
            return Ok((touched, SyncPoint::default()));
        }
        let mut batch = WriteBatch::with_capacity(
            self.cleared.len() + self.writes.len() + self.count_deltas.len(),
        );
        // Deletes whose only puts are the key counts free space: a full server still takes them.
        if self.writes.iter().all(|(_, _, value)| value.is_none()) {
            batch.mark_freeing();
        }
        for (db, prefix) in self.cleared.iter() {
            batch.prefix_delete(&self.space_of(*db).kvs, prefix);
        }
        // The keys and values are moved into the batch (each value a copy of its own, made by
        // `View::put_record`).
        for (db, key, value) in self.writes.drain() {
            let kvs = &self.spaces.of(db).kvs;
            match value {
                Some(value) => batch.put_owned(kvs, key, value),
                None => batch.delete_owned(kvs, key),
            }
        }
        let mut new_counts = Vec::new();
        for (&(db, stripe), &delta) in &self.count_deltas {
            let space = self.space_of(db);
            let before = if self.flushed.contains(&db) {
                0
            } else {
                space.counts[stripe].load(Ordering::Relaxed)
            };
            let count = (before + delta).max(0);
            batch.put(&space.kvs, count_key(stripe), (count as u64).to_be_bytes());
            new_counts.push((db, stripe, count));
        }
        let point = self.spaces.keyspaces[0].db.write_unsynced(batch)?;
        for db in &self.flushed {
            for count in &self.space_of(*db).counts {
                count.store(0, Ordering::Relaxed);
            }
        }
        for (db, stripe, count) in new_counts {
            self.space_of(db).counts[stripe].store(count, Ordering::Relaxed);
        }
        for &(db, stripe) in &self.expiry_deletions {
            self.space_of(db).expiring.lower(stripe);
        }
        for blob in std::mem::take(&mut self.staged) {
            blob.keep();
        }
        for (space, id) in std::mem::take(&mut self.unlinked) {
            space.release_blob(id);
        }
        Ok((touched, point))
    }
}

/// A transaction's state at one point, to roll back to (EXEC undoes a failed command's writes).
pub struct Savepoint {
    undo: usize,
    cleared: usize,
    /// At most one entry per database: copied.
    flushed: BTreeSet<usize>,
    expiry_deletions: usize,
    touched: usize,
    staged: usize,
    unlinked: usize,
}

impl Tx<'_> {
    pub fn savepoint(&mut self) -> Savepoint {
        Savepoint {
            undo: self.undo.get_or_insert_with(Vec::new).len(),
            cleared: self.cleared.len(),
            flushed: self.flushed.clone(),
            expiry_deletions: self.expiry_deletions.len(),
            touched: self.touched.len(),
            staged: self.staged.len(),
            unlinked: self.unlinked.len(),
        }
    }

    pub fn rollback(&mut self, savepoint: Savepoint) {
        self.known_type.take();
        let undo = self.undo.as_mut().expect("a savepoint starts the undo log");
        for change in undo.drain(savepoint.undo..).rev() {
            match change {
                Undo::Write(slot, Some(value)) => {
                    self.writes.insert(slot, value);
                }
                Undo::Write((db, record), None) => {
                    self.writes.remove(db, &record);
                }
                Undo::Delta(slot, Some(delta)) => {
                    self.count_deltas.insert(slot, delta);
                }
                Undo::Delta(slot, None) => {
                    self.count_deltas.remove(&slot);
                }
            }
        }
        self.cleared.truncate(savepoint.cleared);
        self.flushed = savepoint.flushed;
        self.expiry_deletions.truncate(savepoint.expiry_deletions);
        self.touched.truncate(savepoint.touched);
        // Blobs linked after the savepoint are deleted as they drop.
        self.staged.truncate(savepoint.staged);
        self.unlinked.truncate(savepoint.unlinked);
    }

    /// Puts (`Some`) or deletes (`None`) a record, noting what it replaced for a rollback.
    fn write(&mut self, slot: (usize, Vec<u8>), value: Option<Bytes>) {
        let known_type = self.known_type.get_mut();
        if known_type
            .as_mut()
            .is_some_and(|known| !known.follow(slot.0, &slot.1, value.is_some()))
        {
            *known_type = None;
        }
        match &mut self.undo {
            None => {
                self.writes.insert(slot, value);
            }
            Some(undo) => {
                // A slot written before keeps its key: the undo log takes this one, no copy.
                let before = match self.writes.get_mut(slot.0, &slot.1) {
                    Some(held) => Some(std::mem::replace(held, value)),
                    None => self.writes.insert(slot.clone(), value),
                };
                if undo.capacity() == 0 {
                    // Room for a pipeline run's first writes (a run of sixteen LPUSHes writes 32),
                    // taken at the first (grown from nothing, the log was copied four times per
                    // run; reserved with the savepoint, a run that writes nothing paid for it).
                    undo.reserve(UNDO_ROOM);
                }
                undo.push(Undo::Write(slot, before));
            }
        }
    }

    /// Forgets a write (a prefix cleared after it), noting it for a rollback.
    fn forget_write(&mut self, slot: (usize, Vec<u8>)) {
        let before = self.writes.remove(slot.0, &slot.1);
        if let Some(undo) = &mut self.undo {
            undo.push(Undo::Write(slot, before));
        }
    }

    /// Changes a stripe's key count by `by` (`None`: forgets it), noting it for a rollback.
    fn change_delta(&mut self, slot: (usize, usize), by: Option<i64>) {
        if let Some(undo) = &mut self.undo {
            undo.push(Undo::Delta(slot, self.count_deltas.get(&slot).copied()));
        }
        match by {
            Some(by) => *self.count_deltas.entry(slot).or_default() += by,
            None => {
                self.count_deltas.remove(&slot);
            }
        }
    }
}

/// One database as a transaction sees it.
pub struct View<'t, 's> {
    tx: &'t mut Tx<'s>,
    pub(super) db: usize,
}

impl<'t, 's> View<'t, 's> {
    pub(super) fn space(&self) -> Arc<Space> {
        self.tx.space_of(self.db).clone()
    }

    /// The same, borrowed (the record reads take it without touching its reference count).
    fn space_ref(&self) -> &Space {
        self.tx.space_of(self.db)
    }

    fn is_cleared(&self, record: &[u8]) -> bool {
        self.tx.cleared.covers(self.db, record)
    }

    /// What this transaction decides about `record`: `Some` of its value when it wrote the
    /// record (`Some(None)`: deleted, or under a prefix it cleared); `None` when the engine does.
    pub(super) fn pending(&self, record: &[u8]) -> Option<Option<Bytes>> {
        // Most reads come before the command's first write: no slot key to build for them.
        if let Some(value) = self.tx.writes.get(self.db, record) {
            return Some(value.clone());
        }
        self.is_cleared(record).then_some(None)
    }

    /// What `read` makes of the value of one record, read without a copy of a value this
    /// transaction wrote (a clone of a value built from a `Vec` allocates: the list bounds a
    /// pipeline of pushes writes and reads back for each push).
    pub(super) fn record_with<T>(
        &self,
        record: &[u8],
        read: impl FnOnce(Option<&[u8]>) -> T,
    ) -> Result<T> {
        if let Some(value) = self.tx.writes.get(self.db, record) {
            return Ok(read(value.as_deref()));
        }
        Ok(read(self.record(record)?.as_deref()))
    }

    /// The value of one record.
    pub(super) fn record(&self, record: &[u8]) -> Result<Option<Bytes>> {
        if let Some(value) = self.pending(record) {
            return Ok(value);
        }
        let value = self.space_ref().kvs.get(record)?;
        self.tx
            .last_read
            .borrow_mut()
            .remember(self.db, record, value.is_some());
        Ok(value)
    }

    /// Whether a record exists, from the index alone (no device read).
    pub(super) fn record_exists(&self, record: &[u8]) -> Result<bool> {
        if let Some(value) = self.pending(record) {
            return Ok(value.is_some());
        }
        if let Some(found) = self.tx.last_read.borrow().found(self.db, record) {
            return Ok(found);
        }
        Ok(self.space_ref().kvs.contains_key(record)?)
    }

    /// The records from `start` (inclusive) to `end` (exclusive), with their values or
    /// (`values == false`) with empty values and no device reads.
    pub(super) fn records(&self, start: Vec<u8>, end: Vec<u8>, values: bool) -> Records {
        self.records_taking(start, end, values, None)
    }

    /// Like [`View::records`], for a caller that will take about `take` records: the engine's
    /// cursor fetches that many keys at first instead of a full chunk.
    fn records_taking(
        &self,
        start: Vec<u8>,
        end: Vec<u8>,
        values: bool,
        take: Option<usize>,
    ) -> Records {
        let overlay: VecDeque<(Bytes, Option<Bytes>)> = self
            .writes_in(&start, &end)
            .map(|(key, value)| (Bytes::copy_from_slice(key), value.clone()))
            .collect();
        let kvs = &self.space_ref().kvs;
        if values {
            // One key's records (a hash's packed record and patch, a small set's members) in
            // one read under their partition's lock, where a cursor pinned a snapshot.
            let limit = take.map_or(GROUP_READ_RECORDS_MAX, |take| {
                take.min(GROUP_READ_RECORDS_MAX)
            });
            let read = kvs.read_group(&start[..]..&end[..], limit, GROUP_READ_BYTES_MAX);
            let base = match read {
                Ok(Some(records)) => Some(Base::Read(records.into_iter())),
                Ok(None) => None,
                Err(error) => Some(Base::Failed(Some(error))),
            };
            if let Some(base) = base {
                return Records::new(base, overlay, self.tx.cleared.clone(), self.db);
            }
        }
        let mut iter = kvs.range(start..end);
        if let Some(take) = take {
            iter = iter.will_take(take);
        }
        let base = if values {
            Base::Values(iter)
        } else {
            Base::Keys(iter.keys())
        };
        Records::new(base, overlay, self.tx.cleared.clone(), self.db)
    }

    /// This transaction's writes of records from `start` (inclusive) to `end` (exclusive).
    fn writes_in<'a>(
        &'a self,
        start: &'a [u8],
        end: &'a [u8],
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Option<Bytes>)> + 'a {
        self.tx.writes.range(self.db, start, end)
    }

    /// The records of `key` with tag `tag` (a hash's fields, a set's members, ...), in order.
    pub(super) fn members(&self, key: &[u8], tag: u8, values: bool) -> Result<Records> {
        Ok(self.records(
            record_key(key, tag, &[])?,
            record_key(key, tag + 1, &[])?,
            values,
        ))
    }

    /// Every member of the collection `key` (a `kind`) with its value, in byte order; empty
    /// when the key is missing or past its expiry. One range read over all of the key's
    /// records gives its type (its first record's tag), its members and its expiry (tag
    /// `EXPIRY` sorts after every other), where a type check first would seek the key twice.
    pub fn members_with_values(&self, key: &[u8], kind: KeyType) -> Result<Vec<(Bytes, Bytes)>> {
        let member_tag = member_tag(kind)?;
        let start = base(key);
        let prefix_len = start.len();
        let mut members = Vec::new();
        let mut first = true;
        let mut packed = false;
        let mut patch: Option<(Bytes, Bytes)> = None;
        for item in self.records(start, key_end(key), true) {
            let (record, value) = item?;
            let record_tag = record.get(prefix_len).copied().unwrap_or(tag::END);
            let is_first = std::mem::replace(&mut first, false);
            if record_tag == tag::EXPIRY && !is_first {
                if expiry_time(&record, &value)? <= super::now_ms() {
                    return Ok(Vec::new());
                }
                continue;
            }
            // A key holding nothing but its expiry is damage, as `stored_type` says.
            let found = type_of_tag(record_tag, &record)?;
            if found != kind {
                if !is_first {
                    return Err(damaged(
                        "a record of another type than the key's first",
                        &record,
                    ));
                }
                // Past its expiry a key of another type reads as missing, not WRONGTYPE.
                if self.has_expired(key)? {
                    return Ok(Vec::new());
                }
                return Err(super::Failure::WrongType);
            }
            if packed || (patch.is_some() && Some(record_tag) != packed_tag(kind)) {
                return Err(damaged("a record beside a packed collection", &record));
            }
            if record_tag == member_tag {
                members.push((record.slice(prefix_len + 1..), value));
            } else if Some(record_tag) == patch_tag(kind) {
                patch = Some((record, value));
            } else if Some(record_tag) == packed_tag(kind) {
                members = Packed::decode_patched(&record, &value, patch.take().as_ref(), kind)?
                    .0
                    .into_entries();
                packed = true;
            }
        }
        if let Some((patch_record, _)) = patch {
            return Err(patch_alone(&patch_record));
        }
        Ok(members)
    }

    /// The value of `member` of the collection `key` (a `kind`), if it has it and is live.
    pub(super) fn member_value(
        &self,
        key: &[u8],
        kind: KeyType,
        member: &[u8],
    ) -> Result<Option<Bytes>> {
        if packed_tag(kind).is_some() {
            return match self.packed_member(key, kind, member)? {
                PointRead::Answered(value) => Ok(value),
                PointRead::MemberRecord(record) => self.record(&record),
            };
        }
        let value = self.record(&record_key(key, member_tag(kind)?, member)?)?;
        let live = self.live_or_check(key, value.is_some(), kind)?;
        Ok(value.filter(|_| live))
    }

    /// Whether the collection `key` (a `kind`: hash, set or sorted set) has `member` (a large
    /// one's from the index alone).
    pub fn has_member(&self, key: &[u8], kind: KeyType, member: &[u8]) -> Result<bool> {
        if packed_tag(kind).is_some() {
            return match self.packed_member(key, kind, member)? {
                PointRead::Answered(value) => Ok(value.is_some()),
                PointRead::MemberRecord(record) => self.record_exists(&record),
            };
        }
        let found = self.record_exists(&record_key(key, member_tag(kind)?, member)?)?;
        self.live_or_check(key, found, kind)
    }

    /// For a hash or set: `member`'s value when `key` is missing, past its expiry or packed;
    /// else the record that holds it. The key's first record (its type) tells whether it is
    /// packed and patched.
    fn packed_member(&self, key: &[u8], kind: KeyType, member: &[u8]) -> Result<PointRead> {
        let read = self.read_collection(key, kind, |first_tag| {
            Ok(match self.packed_read(key, kind, first_tag, Locked::No)? {
                PackedRead::Gone => None,
                PackedRead::Records => Some(PointRead::MemberRecord(record_key(
                    key,
                    member_tag(kind)?,
                    member,
                )?)),
                // The record alone: found without building the collection.
                PackedRead::Packed {
                    record,
                    value,
                    patch: None,
                } => Some(PointRead::Answered(Packed::find(
                    &record, &value, kind, member,
                )?)),
                patched => match patched.into_members(kind)? {
                    Some(Members::Packed { members, .. }) => {
                        Some(PointRead::Answered(members.value(member).cloned()))
                    }
                    _ => None,
                },
            })
        })?;
        Ok(read.unwrap_or(PointRead::Answered(None)))
    }

    /// For a reader (no stripe lock): the live collection `key`'s type read, then `read` of its
    /// records given its first record's tag; `None` when it is missing or past its expiry. A
    /// `read` that finds `None`, the record the type named gone (a writer replaced or deleted
    /// the key in between), starts over from the type, up to `READ_ATTEMPTS` times.
    fn read_collection<T>(
        &self,
        key: &[u8],
        kind: KeyType,
        read: impl Fn(u8) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        for _ in 0..READ_ATTEMPTS {
            let Some(first_tag) = self.live_tag(key, kind)? else {
                return Ok(None);
            };
            if let Some(found) = read(first_tag)? {
                return Ok(Some(found));
            }
            self.tx.known_type.take();
        }
        Err(super::Failure::Invalid(format!(
            "ERR the {} was replaced {READ_ATTEMPTS} times while it was read; try again",
            kind.name()
        )))
    }

    /// The members of the collection `key` (hash fields, set members, sorted-set members), in
    /// byte order, read from the index alone (or a packed record).
    pub fn member_names(&self, key: &[u8], kind: KeyType) -> Result<Vec<Bytes>> {
        match self.collection(key, kind)? {
            None => Ok(Vec::new()),
            Some(members) => self.names_of(key, kind, members),
        }
    }

    /// The members of the collection `key` (a `kind`) held as `members` says: from its packed
    /// record, or by a walk of their records.
    fn names_of(&self, key: &[u8], kind: KeyType, members: Members) -> Result<Vec<Bytes>> {
        match members {
            Members::Packed { members, .. } => Ok(members
                .into_entries()
                .into_iter()
                .map(|(member, _)| member)
                .collect()),
            Members::Records => {
                let member_tag = member_tag(kind)?;
                let prefix_len = record_key(key, member_tag, &[])?.len();
                let mut names = Vec::new();
                for item in self.members(key, member_tag, false)? {
                    names.push(item?.0.slice(prefix_len..));
                }
                Ok(names)
            }
        }
    }

    /// The members of the collection `key` (a `kind`) at the positions `choose` picks given how
    /// many it has (ascending, each below that count), in member order; none when the key is
    /// missing. A collection of one record per member is counted and its members picked from
    /// the index leaf by leaf, where reading every member made an SPOP of a set of 86,000
    /// take 14 ms.
    pub fn pick_members(
        &self,
        key: &[u8],
        kind: KeyType,
        choose: impl Fn(usize) -> Vec<usize>,
    ) -> Result<Vec<Bytes>> {
        let Some(members) = self.collection(key, kind)? else {
            return Ok(Vec::new());
        };
        if matches!(members, Members::Records) {
            let picked = self.count_and_pick_members(key, member_tag(kind)?, &choose)?;
            if let Some((_, picked)) = picked {
                return Ok(picked);
            }
        }
        let names = self.names_of(key, kind, members)?;
        let positions = choose(names.len());
        Ok(positions
            .into_iter()
            .filter_map(|at| names.get(at).cloned())
            .collect())
    }

    /// For members held one record each with none of this transaction's writes or clears
    /// among them: how many there are and those at the positions `choose` picks, from the
    /// index (`Kvs::count_and_pick`); `None` otherwise, for a walk of the records, which
    /// overlays this transaction's writes.
    fn count_and_pick_members(
        &self,
        key: &[u8],
        member_tag: u8,
        choose: impl FnOnce(usize) -> Vec<usize>,
    ) -> Result<Option<(usize, Vec<Bytes>)>> {
        let start = record_key(key, member_tag, &[])?;
        let end = record_key(key, member_tag + 1, &[])?;
        if !self.tx.cleared.is_empty() || self.writes_in(&start, &end).next().is_some() {
            return Ok(None);
        }
        let picked = self
            .space_ref()
            .kvs
            .count_and_pick(&start[..]..&end[..], choose)?;
        Ok(picked.map(|(count, records)| {
            let names = records
                .into_iter()
                .map(|record| record.slice(start.len()..));
            (count, names.collect())
        }))
    }

    /// How many members the collection `key` has (counted from the index, no device reads, or
    /// its packed record).
    pub fn member_count(&self, key: &[u8], kind: KeyType) -> Result<usize> {
        match self.collection(key, kind)? {
            None => Ok(0),
            Some(Members::Packed { members, .. }) => Ok(members.len()),
            Some(Members::Records) => {
                let member_tag = member_tag(kind)?;
                if let Some((count, _)) =
                    self.count_and_pick_members(key, member_tag, |_| Vec::new())?
                {
                    return Ok(count);
                }
                let mut count = 0;
                for item in self.members(key, member_tag, false)? {
                    item?;
                    count += 1;
                }
                Ok(count)
            }
        }
    }

    /// How the live collection `key` holds its members, for a reader: `None` when it is missing
    /// or past its expiry, WRONGTYPE when it is another type.
    fn collection(&self, key: &[u8], kind: KeyType) -> Result<Option<Members>> {
        self.read_collection(key, kind, |first_tag| {
            self.members_as(key, kind, first_tag, Locked::No)
        })
    }

    /// For a writer: the records of the live collection `key` as read (`PackedRead::members`
    /// borrows its members from them), a key past its expiry removed first; `None` when it is
    /// missing, WRONGTYPE when it is another type.
    fn prepare_collection(&mut self, key: &[u8], kind: KeyType) -> Result<Option<PackedRead>> {
        let Some(first_tag) = self.prepare_tag(key, kind)? else {
            return Ok(None);
        };
        self.packed_read(key, kind, first_tag, Locked::Yes)
            .map(Some)
    }

    /// How the collection `key`, whose first record has tag `first_tag`, holds its members;
    /// `None` as [`PackedRead::Gone`].
    fn members_as(
        &self,
        key: &[u8],
        kind: KeyType,
        first_tag: u8,
        locked: Locked,
    ) -> Result<Option<Members>> {
        self.packed_read(key, kind, first_tag, locked)?
            .into_members(kind)
    }

    /// Reads the packed record of the collection `key` (a `kind` whose first record has tag
    /// `first_tag`) and its patch, if that tag says it has one. A reader that holds no stripe
    /// lock (`Locked::No`) reads a record and its patch at one snapshot, with one range read
    /// from the patch to the record: between two point reads a writer could fold the patch in.
    /// A record whose type named no patch is read alone: no commit writes a packed record and
    /// a patch together (`store_packed`, `key_records`), so a patch written after the type was
    /// read belongs to a later state than the record read. A writer, holding the lock, reads
    /// point by point.
    fn packed_read(
        &self,
        key: &[u8],
        kind: KeyType,
        first_tag: u8,
        locked: Locked,
    ) -> Result<PackedRead> {
        let patched = Some(first_tag) == patch_tag(kind);
        if !patched && Some(first_tag) != packed_tag(kind) {
            return Ok(PackedRead::Records);
        }
        let record = packed_key(key, kind)?;
        let patch_record = patch_key(key, kind)?;
        let (stored, patch) = match locked {
            Locked::Yes | Locked::No if !patched => (self.record(&record)?, None),
            Locked::Yes => {
                let patch = self.record(&patch_record)?.ok_or_else(|| {
                    damaged("a packed collection's patch vanished", &patch_record)
                })?;
                (self.record(&record)?, Some(patch))
            }
            Locked::No => self.packed_and_patch(&record, &patch_record)?,
        };
        match (stored, patch, locked) {
            (Some(value), patch, _) => Ok(PackedRead::Packed {
                record,
                value,
                patch: patch.map(|value| (patch_record, value)),
            }),
            (None, Some(_), _) => Err(patch_alone(&patch_record)),
            (None, None, Locked::No) => Ok(PackedRead::Gone),
            (None, None, Locked::Yes) => Err(damaged("a packed collection vanished", &record)),
        }
    }

    /// The values of the packed record `record` and of its patch `patch_record`, read at one
    /// snapshot. A record of another key type between them (a list's bounds sort between a
    /// set's patch and its record) is not this read's: the key changed since its type was read,
    /// or it holds two types' records, which a read of the whole key reports.
    fn packed_and_patch(
        &self,
        record: &[u8],
        patch_record: &[u8],
    ) -> Result<(Option<Bytes>, Option<Bytes>)> {
        let mut end = record.to_vec();
        end.push(0);
        let (mut stored, mut patch) = (None, None);
        for item in self.records_taking(patch_record.to_vec(), end, true, Some(2)) {
            let (found, value) = item?;
            if *found == *record {
                stored = Some(value);
            } else if *found == *patch_record {
                patch = Some(value);
            }
        }
        Ok((stored, patch))
    }

    /// Sets members of the collection `key` (hash fields with their values, set members with
    /// empty ones); returns how many were new. With `only_new`, existing members are left alone.
    /// A new collection is packed if it fits the transaction's [`Packing`]; a packed one that
    /// outgrows it becomes one record per member.
    pub fn put_members(
        &mut self,
        key: &[u8],
        kind: KeyType,
        pairs: &[(Bytes, Bytes)],
        only_new: bool,
    ) -> Result<usize> {
        let member_tag = plain_member_tag(kind)?;
        // Every member must fit a record of its own, which a packed one may become.
        for (field, _) in pairs {
            check_record_key_len(key, field)?;
        }
        let read = self.prepare_collection(key, kind)?;
        let added = match read
            .as_ref()
            .map(|read| read.members(key, kind))
            .transpose()?
        {
            Some(Members::Records) => self.put_member_records(key, member_tag, pairs, only_new)?,
            Some(Members::Packed { members, patched }) => {
                let stored = StoredPacked::of(&members, patched);
                self.put_packed(key, kind, Some(stored), members, pairs, only_new)?
            }
            None => {
                let added = self.put_packed(key, kind, None, Packed::default(), pairs, only_new)?;
                if added > 0 {
                    self.created(key);
                }
                added
            }
        };
        if added > 0 || !only_new {
            self.touch(key);
        }
        Ok(added)
    }

    /// `put_members` on a collection of one record per member.
    fn put_member_records(
        &mut self,
        key: &[u8],
        member_tag: u8,
        pairs: &[(Bytes, Bytes)],
        only_new: bool,
    ) -> Result<usize> {
        let mut added = 0;
        for (field, value) in pairs {
            let record = record_key(key, member_tag, field)?;
            if !self.record_exists(&record)? {
                added += 1;
            } else if only_new {
                continue;
            }
            self.put_record(record, value);
        }
        Ok(added)
    }

    /// `put_members` on a packed collection (`stored` as it is stored, `None` and `packed`
    /// empty for a new key): patches or rewrites it, or writes one record per member once it
    /// no longer fits.
    fn put_packed<'a>(
        &mut self,
        key: &[u8],
        kind: KeyType,
        stored: Option<StoredPacked<&'a [u8]>>,
        mut packed: Packed<&'a [u8]>,
        pairs: &'a [(Bytes, Bytes)],
        only_new: bool,
    ) -> Result<usize> {
        let mut added = 0;
        let mut changed = false;
        for (field, value) in pairs {
            if only_new && packed.contains(field) {
                continue;
            }
            changed = true;
            if packed.insert(field, value) {
                added += 1;
            }
        }
        if !changed {
            return Ok(0);
        }
        if packed.fits(self.tx.packing) {
            self.store_packed(key, kind, stored, &packed)?;
            return Ok(added);
        }
        if let Some(stored) = stored {
            self.delete_record(&packed_key(key, kind)?);
            if stored.patched {
                self.delete_record(&patch_key(key, kind)?);
            }
        }
        let member_tag = plain_member_tag(kind)?;
        for (member, value) in packed.into_entries() {
            self.put_record(record_key(key, member_tag, member)?, value);
        }
        Ok(added)
    }

    /// Stores the packed collection `key` (a `kind`) as `packed`, from `stored` (`None`: not
    /// stored packed): as a patch of its record while one pays (`patch_for`), else whole.
    fn store_packed(
        &mut self,
        key: &[u8],
        kind: KeyType,
        stored: Option<StoredPacked<&[u8]>>,
        packed: &Packed<&[u8]>,
    ) -> Result<()> {
        let patched = stored.as_ref().is_some_and(|stored| stored.patched);
        let (record, patch_record) = (packed_key(key, kind)?, patch_key(key, kind)?);
        // A commit never writes a packed record and a patch together: a reader that found no
        // patch reads the record alone (`packed_read`). Once this transaction has rewritten
        // the record, later changes in it rewrite the record again.
        let record_rewritten = matches!(self.pending(&record), Some(Some(_)));
        let stored = stored.filter(|_| !record_rewritten);
        match patch_for(stored.as_ref().map(|stored| &stored.members), packed) {
            Some(patch) => self.put_record(patch_record, patch.encode()),
            None => {
                self.put_record(record, packed.encode());
                if patched {
                    self.delete_record(&patch_record);
                }
            }
        }
        Ok(())
    }

    /// Removes members (hash fields, set members) of the collection `key`; returns how many
    /// were there. The collection goes with its last member.
    pub fn remove_members(
        &mut self,
        key: &[u8],
        kind: KeyType,
        members: &[Bytes],
    ) -> Result<usize> {
        let member_tag = plain_member_tag(kind)?;
        let mut removed = 0;
        let read = self.prepare_collection(key, kind)?;
        match read
            .as_ref()
            .map(|read| read.members(key, kind))
            .transpose()?
        {
            None => return Ok(0),
            Some(Members::Records) => {
                for member in members {
                    let record = record_key(key, member_tag, member)?;
                    if self.record_exists(&record)? {
                        self.delete_record(&record);
                        removed += 1;
                    }
                }
                if removed > 0 {
                    self.touch(key);
                    self.remove_if_no_members(key, member_tag)?;
                }
            }
            Some(Members::Packed {
                members: mut packed,
                patched,
            }) => {
                let stored = StoredPacked::of(&packed, patched);
                for member in members {
                    removed += usize::from(packed.remove(member));
                }
                if removed > 0 {
                    self.touch(key);
                    if packed.is_empty() {
                        self.remove_key(key)?;
                    } else {
                        self.store_packed(key, kind, Some(stored), &packed)?;
                    }
                }
            }
        }
        Ok(removed)
    }

    /// How `key` stores its value (OBJECT ENCODING): `packed` for a hash or set in one record,
    /// `records` for everything else; `None` when it does not exist.
    pub fn encoding(&self, key: &[u8]) -> Result<Option<&'static str>> {
        match self.stored(key)? {
            Stored::Live(kind, first_tag)
                if packed_tag(kind) == Some(first_tag) || patch_tag(kind) == Some(first_tag) =>
            {
                Ok(Some("packed"))
            }
            Stored::Live(..) => Ok(Some("records")),
            Stored::Missing | Stored::Expired => Ok(None),
        }
    }

    /// Removes `key` if it has no records of tag `tag` left (a collection emptied by a write).
    pub(super) fn remove_if_no_members(&mut self, key: &[u8], tag: u8) -> Result<bool> {
        if self.members(key, tag, false)?.next().transpose()?.is_some() {
            return Ok(false);
        }
        self.remove_key(key)?;
        Ok(true)
    }

    /// Puts `value` at `record`, copied: a value may be a slice of a client's whole read
    /// buffer (a member or field taken from the request), which the value cache would keep
    /// alive, and a copy here lets the commit move it into its batch.
    pub(super) fn put_record(&mut self, record: Vec<u8>, value: impl AsRef<[u8]>) {
        let value = Bytes::copy_from_slice(value.as_ref());
        self.tx.write((self.db, record), Some(value));
    }

    pub(super) fn delete_record(&mut self, record: &[u8]) {
        self.tx.write((self.db, record.to_vec()), None);
    }

    /// Deletes every record under `prefix`, including this transaction's own.
    pub(super) fn clear(&mut self, prefix: Vec<u8>) {
        let db = self.db;
        let doomed: Vec<(usize, Vec<u8>)> = self
            .tx
            .writes
            .from(db, &prefix)
            .take_while(|(key, _)| key.starts_with(&prefix))
            .map(|(key, _)| (db, key.clone()))
            .collect();
        for slot in doomed {
            self.tx.forget_write(slot);
        }
        self.tx.known_type.take();
        self.tx.cleared.push(db, prefix);
    }

    /// Notes that `key` was written (WATCH sees it).
    pub fn touch(&mut self, key: &[u8]) {
        if self
            .tx
            .watched_keys
            .is_some_and(|watched| watched.load(Ordering::Acquire) == 0)
        {
            return;
        }
        // A pipeline's batched commands on one key touch it once.
        if let Some((db, last)) = self.tx.touched.last() {
            if *db == self.db && **last == *key {
                return;
            }
        }
        self.tx.touched.push((self.db, Bytes::copy_from_slice(key)));
    }

    /// Notes that `key` now exists where it did not.
    pub(super) fn created(&mut self, key: &[u8]) {
        let stripe = super::stripe_of(key);
        self.tx.change_delta((self.db, stripe), Some(1));
    }

    /// Notes that `key` no longer exists.
    fn removed(&mut self, key: &[u8]) {
        let stripe = super::stripe_of(key);
        self.tx.change_delta((self.db, stripe), Some(-1));
    }

    /// The type of `key` as its first record's tag says, whether or not it has expired.
    fn stored_type(&self, key: &[u8]) -> Result<Option<KeyType>> {
        Ok(self.stored_tag(key)?.map(|(kind, _)| kind))
    }

    /// The type of `key` and the tag of its first record that names it (else damage), whether
    /// or not it has expired.
    pub(super) fn stored_tag(&self, key: &[u8]) -> Result<Option<(KeyType, u8)>> {
        if let Some(known) = &*self.tx.known_type.borrow() {
            if known.is_of(self.db, key) {
                return Ok(known.stored_tag());
            }
        }
        // One buffer for both bounds: the key's base, then the tag that ends its records.
        let mut end = key_end(key);
        let prefix_len = end.len() - 1;
        let first = match self.first_record_key(&end[..prefix_len], &end)? {
            None => None,
            Some(record) => {
                let first_tag = record.get(prefix_len).copied().unwrap_or(tag::END);
                Some((type_of_tag(first_tag, &record)?, first_tag, record))
            }
        };
        end.truncate(prefix_len);
        let known = KnownType {
            db: self.db,
            base: end,
            first,
        };
        let stored = known.stored_tag();
        *self.tx.known_type.borrow_mut() = Some(known);
        Ok(stored)
    }

    /// The first record key from `start` (inclusive) to `end` (exclusive).
    fn first_record_key(&self, start: &[u8], end: &[u8]) -> Result<Option<Bytes>> {
        let kvs = &self.space_ref().kvs;
        let mut own_writes = self.writes_in(start, end).peekable();
        if own_writes.peek().is_none() && self.tx.cleared.is_empty() {
            // One index probe (a key's records are one key group), where a cursor would pin a
            // snapshot and fetch a chunk: a writer's type check, before its first write, cost
            // a quarter of SADD's time through the cursor.
            return Ok(kvs.first_key(start..end)?);
        }
        if self.tx.cleared.is_empty() {
            // This transaction wrote records here (a pipeline's batched commands writing one
            // key): its first put, or the engine's first record it did not delete, whichever
            // comes first. A few probes past its deletions, then a cursor as below.
            let first_put = own_writes
                .find(|(_, value)| value.is_some())
                .map(|(record, _)| Bytes::copy_from_slice(record));
            let mut deleted: Option<Bytes> = None;
            for _ in 0..FIRST_RECORD_PROBES {
                let from = match &deleted {
                    Some(record) => Bound::Excluded(&record[..]),
                    None => Bound::Included(start),
                };
                let Some(record) = kvs.first_key::<&[u8], _>((from, Bound::Excluded(end)))? else {
                    return Ok(first_put);
                };
                if first_put.as_ref().is_some_and(|put| *put <= record) {
                    return Ok(first_put);
                }
                match self.pending(&record) {
                    Some(None) => deleted = Some(record),
                    _ => return Ok(Some(record)),
                }
            }
        }
        self.records_taking(start.to_vec(), end.to_vec(), false, Some(1))
            .next()
            .map(|item| Ok(item?.0))
            .transpose()
    }

    /// When `key` expires, if it has an expiry time.
    pub fn expires_at(&self, key: &[u8]) -> Result<Option<u64>> {
        // This transaction's own new expiry records are counted too: they raise the count
        // when written.
        if !self.space_ref().expiring.may_expire(key) {
            return Ok(None);
        }
        let record = record_key(key, tag::EXPIRY, &[])?;
        match self.record(&record)? {
            None => Ok(None),
            Some(value) => Ok(Some(expiry_time(&record, &value)?)),
        }
    }

    fn has_expired(&self, key: &[u8]) -> Result<bool> {
        Ok(self
            .expires_at(key)?
            .is_some_and(|at| at <= super::now_ms()))
    }

    /// The type of `key`, if it exists and has not expired.
    pub fn key_type(&self, key: &[u8]) -> Result<Option<KeyType>> {
        match self.stored(key)? {
            Stored::Live(kind, _) => Ok(Some(kind)),
            Stored::Missing | Stored::Expired => Ok(None),
        }
    }

    /// Whether `key` is live given that one of its records was `found`; if none was, checks
    /// that it is not of another type.
    pub(super) fn live_or_check(&self, key: &[u8], found: bool, kind: KeyType) -> Result<bool> {
        if found {
            return Ok(self.expires_at(key)?.is_none_or(|at| at > super::now_ms()));
        }
        self.check_type(key, kind)?;
        Ok(false)
    }

    /// For a reader: whether `key` exists as a `kind`; WRONGTYPE if it holds another type.
    pub fn check_type(&self, key: &[u8], kind: KeyType) -> Result<bool> {
        Ok(self.live_tag(key, kind)?.is_some())
    }

    /// For a writer: like [`View::check_type`], and a key past its expiry is removed first, so
    /// what follows starts from an empty key.
    pub fn prepare(&mut self, key: &[u8], kind: KeyType) -> Result<bool> {
        Ok(self.prepare_tag(key, kind)?.is_some())
    }

    /// The tag of the first record of `key` if it is a live `kind`; `None` when it is missing
    /// or past its expiry; WRONGTYPE when it holds another type.
    fn live_tag(&self, key: &[u8], kind: KeyType) -> Result<Option<u8>> {
        match self.stored(key)? {
            Stored::Live(found, first_tag) => of_kind(found, kind).map(|()| Some(first_tag)),
            Stored::Missing | Stored::Expired => Ok(None),
        }
    }

    /// Like [`View::live_tag`], removing a key past its expiry first.
    fn prepare_tag(&mut self, key: &[u8], kind: KeyType) -> Result<Option<u8>> {
        match self.stored(key)? {
            Stored::Live(found, first_tag) => of_kind(found, kind).map(|()| Some(first_tag)),
            Stored::Expired => {
                self.remove_key(key)?;
                Ok(None)
            }
            Stored::Missing => Ok(None),
        }
    }

    /// Whether `key` is missing, past its expiry, or live (with its type and first tag).
    fn stored(&self, key: &[u8]) -> Result<Stored> {
        let Some((kind, first_tag)) = self.stored_tag(key)? else {
            return Ok(Stored::Missing);
        };
        if self.has_expired(key)? {
            return Ok(Stored::Expired);
        }
        Ok(Stored::Live(kind, first_tag))
    }

    /// Deletes every record of `key`; returns whether it existed (and had not expired).
    pub fn remove_key(&mut self, key: &[u8]) -> Result<bool> {
        let Some(kind) = self.stored_type(key)? else {
            return Ok(false);
        };
        if kind == KeyType::String {
            self.unlink_blob(key)?;
        }
        let expires_at = self.expires_at(key)?;
        let live = expires_at.is_none_or(|at| at > super::now_ms());
        if let Some(at) = expires_at {
            self.delete_record(&queue_key(at, key));
            self.deleting_expiry(key);
        }
        self.clear(base(key));
        self.removed(key);
        self.touch(key);
        Ok(live)
    }

    /// Sets or clears `key`'s expiry record and queue entry; `old` is its expiry now.
    pub(super) fn write_expiry(
        &mut self,
        key: &[u8],
        old: Option<u64>,
        new: Option<u64>,
    ) -> Result<()> {
        if old == new {
            return Ok(());
        }
        if let Some(at) = old {
            self.delete_record(&queue_key(at, key));
        }
        let record = record_key(key, tag::EXPIRY, &[])?;
        match new {
            Some(at) => {
                if old.is_none() {
                    self.space_ref().expiring.raise(key);
                }
                self.put_record(record, at.to_be_bytes());
                self.put_record(queue_key(at, key), []);
            }
            None => {
                self.delete_record(&record);
                self.deleting_expiry(key);
            }
        }
        self.touch(key);
        Ok(())
    }

    /// Notes that this transaction deletes `key`'s expiry record, counted in its stripe.
    fn deleting_expiry(&mut self, key: &[u8]) {
        let stripe = super::stripe_of(key);
        self.tx.expiry_deletions.push((self.db, stripe));
    }

    /// Deletes every key of this database (the caller touches the watched keys that existed).
    pub fn flush(&mut self) -> Result<()> {
        // Only linked blobs: others may be values on their way in for other clients.
        for id in self.linked_blobs()? {
            self.unlink(id);
        }
        self.clear(vec![DATA]);
        self.clear(vec![EXPIRY_QUEUE]);
        self.clear(vec![KEY_COUNTS]);
        let db = self.db;
        let deltas: Vec<(usize, usize)> = self
            .tx
            .count_deltas
            .range((db, 0)..(db + 1, 0))
            .map(|(slot, _)| *slot)
            .collect();
        for slot in deltas {
            self.tx.change_delta(slot, None);
        }
        self.tx.flushed.insert(db);
        Ok(())
    }

    /// The ids of the blobs linked in this database (one seek per blob).
    fn linked_blobs(&self) -> Result<Vec<u64>> {
        let mut ids = Vec::new();
        let mut start = vec![BLOBS];
        while let Some(item) = self.records(start, vec![BLOBS + 1], false).next() {
            let (record, _) = item?;
            let id = blobs::blob_id(&record)?;
            if record.len() == blobs::blob_prefix(id).len() {
                ids.push(id);
            }
            match id.checked_add(1) {
                Some(next) => start = blobs::blob_prefix(next),
                None => break,
            }
        }
        Ok(ids)
    }

    /// Links `blob` as the string `key` (whose other records the caller removed): its header and
    /// link record go into this transaction's batch. A blob written to another database's space
    /// is copied here first.
    pub(super) fn link_blob(&mut self, key: &[u8], blob: StagedBlob) -> Result<()> {
        let space = self.space();
        let blob = if blob.is_in(&space) {
            blob
        } else {
            blob.copy_to(&space)?
        };
        self.put_record(
            record_key(key, tag::CHUNKED_STRING, &[])?,
            blobs::encode_header(blob.len(), blob.id()),
        );
        self.put_record(blobs::blob_prefix(blob.id()), []);
        self.tx.staged.push(blob);
        Ok(())
    }

    /// Deletes the blob of the string `key`, if it has one, with its header.
    pub(super) fn unlink_blob(&mut self, key: &[u8]) -> Result<()> {
        let header = record_key(key, tag::CHUNKED_STRING, &[])?;
        if let Some(value) = self.record(&header)? {
            let (_, id) = blobs::decode_header(&value, &header)?;
            self.unlink(id);
            self.delete_record(&header);
        }
        Ok(())
    }

    /// Deletes blob `id`'s link record; its chunks are released when this transaction commits.
    fn unlink(&mut self, id: u64) {
        self.delete_record(&blobs::blob_prefix(id));
        let space = self.space();
        self.tx.unlinked.push((space, id));
    }

    /// The longest string a command may read whole.
    pub(super) fn string_bytes_max(&self) -> usize {
        self.tx.string_bytes_max
    }

    /// Walks keys in the engine's order from `resume` (a value this returned; empty to start),
    /// calling `visit` with each live key and its type, until it has seen `budget` keys (live or
    /// not). Returns where to resume, or `None` at the end.
    pub fn walk_keys(
        &self,
        resume: &[u8],
        budget: usize,
        mut visit: impl FnMut(&[u8], KeyType),
    ) -> Result<Option<Vec<u8>>> {
        let start = if resume.is_empty() {
            vec![DATA]
        } else {
            resume.to_vec()
        };
        let mut records = self.records(start, vec![DATA + 1], false);
        let mut seen = 0;
        let mut current: Option<Vec<u8>> = None;
        let mut same_key_records = 0;
        while let Some(item) = records.next() {
            let (record, _) = item?;
            let (key, record_tag, _) = super::split_record_key(&record)
                .ok_or_else(|| damaged("a record without a key", &record))?;
            if current.as_deref() == Some(key) {
                // Step over a few more records of a key; past that, seek over the rest.
                same_key_records += 1;
                if same_key_records == SKIP_BY_STEPPING {
                    records = self.records(key_end(key), vec![DATA + 1], false);
                }
                continue;
            }
            if seen == budget {
                return Ok(Some(base(key)));
            }
            seen += 1;
            same_key_records = 0;
            let kind = type_of_tag(record_tag, &record)?;
            if !self.has_expired(key)? {
                visit(key, kind);
            }
            current = Some(key.to_vec());
        }
        Ok(None)
    }
}

/// What is stored under a key, as a writer or reader of one type finds it.
enum Stored {
    Missing,
    Expired,
    /// Live: its type and first record's tag.
    Live(KeyType, u8),
}

/// `Ok` when a key `found` to be of one type is of `kind`, else WRONGTYPE.
fn of_kind(found: KeyType, kind: KeyType) -> Result<()> {
    if found == kind {
        Ok(())
    } else {
        Err(super::Failure::WrongType)
    }
}

/// Where a collection's members are: in one packed record, or one record each.
enum Members<B = Bytes> {
    Packed {
        members: Packed<B>,
        /// When a patch is stored beside the packed record: that record's own members.
        patched: Option<Packed<B>>,
    },
    Records,
}

/// A packed collection as it is stored: its record's members, and whether a patch changes them.
struct StoredPacked<B> {
    members: Packed<B>,
    patched: bool,
}

impl<B: MemberBytes> StoredPacked<B> {
    /// From a writer's `Members::Packed`, before `members` changes.
    fn of(members: &Packed<B>, patched: Option<Packed<B>>) -> StoredPacked<B> {
        StoredPacked {
            patched: patched.is_some(),
            members: patched.unwrap_or_else(|| members.clone()),
        }
    }
}

/// What [`View::packed_read`] found of a collection.
enum PackedRead {
    /// It is stored one record per member.
    Records,
    /// For a reader: the packed record its type named is gone (a writer deleted or replaced the
    /// key since): read it again from its type.
    Gone,
    /// Its packed record (key, value), and its patch (key, value) if it has one.
    Packed {
        record: Vec<u8>,
        value: Bytes,
        patch: Option<(Vec<u8>, Bytes)>,
    },
}

impl PackedRead {
    /// How the collection holds its members, decoded and merged; `None` when gone.
    fn into_members(self, kind: KeyType) -> Result<Option<Members>> {
        let (record, value, patch) = match self {
            PackedRead::Records => return Ok(Some(Members::Records)),
            PackedRead::Gone => return Ok(None),
            PackedRead::Packed {
                record,
                value,
                patch,
            } => (record, value, patch),
        };
        let (members, patched) = Packed::decode_patched(&record, &value, patch.as_ref(), kind)?;
        Ok(Some(Members::Packed { members, patched }))
    }

    /// For a writer of `key`: as [`PackedRead::into_members`], each member and value borrowed
    /// from what was read, since a writer encodes them again and hands none on. Holding the
    /// key's stripe lock, it cannot find the collection gone: that is damage.
    fn members(&self, key: &[u8], kind: KeyType) -> Result<Members<&[u8]>> {
        let (record, value, patch) = match self {
            PackedRead::Records => return Ok(Members::Records),
            PackedRead::Gone => return Err(damaged("a packed collection vanished", &base(key))),
            PackedRead::Packed {
                record,
                value,
                patch,
            } => (record, value, patch),
        };
        let patch = patch
            .as_ref()
            .map(|(patch_record, patch)| (&patch_record[..], &patch[..]));
        let (members, patched) = Packed::decode_patched_borrowed(record, value, patch, kind)?;
        Ok(Members::Packed { members, patched })
    }
}

/// Whether the caller holds the stripe lock of the key it reads: a writer does, a plain reader
/// does not.
#[derive(Clone, Copy)]
enum Locked {
    Yes,
    No,
}

/// What a point read of a collection's member found: its answer, or the record to read.
enum PointRead {
    Answered(Option<Bytes>),
    MemberRecord(Vec<u8>),
}

/// The record of `key` patching its packed record, for a hash or set.
fn patch_key(key: &[u8], kind: KeyType) -> Result<Vec<u8>> {
    let patch_tag = patch_tag(kind).ok_or(super::Failure::WrongType)?;
    record_key(key, patch_tag, &[])
}

/// A patch with no packed record after it.
fn patch_alone(patch_record: &[u8]) -> super::Failure {
    damaged(
        "a packed collection's patch without its packed record",
        patch_record,
    )
}

/// The record of `key` holding it packed, for a hash or set (WRONGTYPE for another type).
fn packed_key(key: &[u8], kind: KeyType) -> Result<Vec<u8>> {
    let packed_tag = packed_tag(kind).ok_or(super::Failure::WrongType)?;
    record_key(key, packed_tag, &[])
}

/// The tag of the records holding a collection's members, by which they are counted, found and
/// removed alike; strings and lists have no members.
fn member_tag(kind: KeyType) -> Result<u8> {
    match kind {
        KeyType::Hash => Ok(tag::HASH_FIELD),
        KeyType::Set => Ok(tag::SET_MEMBER),
        KeyType::ZSet => Ok(tag::ZSET_MEMBER),
        KeyType::String | KeyType::List => Err(super::Failure::WrongType),
    }
}

/// The member tag of a hash or set, whose members are one record each (a sorted set's also
/// carry rank entries, which `put_members` and `remove_members` do not write).
fn plain_member_tag(kind: KeyType) -> Result<u8> {
    debug_assert_ne!(
        kind,
        KeyType::ZSet,
        "a sorted set's members carry rank entries"
    );
    member_tag(kind)
}

/// The time an expiry record holds (unix ms), or the damage that names it.
fn expiry_time(record: &[u8], value: &[u8]) -> Result<u64> {
    record_u64(record, value, "an expiry time")
}

/// The type a key's first record's tag names; a tag of no type is damage, named.
fn type_of_tag(first_tag: u8, record: &[u8]) -> Result<KeyType> {
    KeyType::of_tag(first_tag)
        .ok_or_else(|| damaged("a key whose first record has no type's tag", record))
}

/// Records of one key a key walk steps over before it seeks past the rest (a seek costs a merge
/// of the index partitions; a step is cheap).
const SKIP_BY_STEPPING: usize = 4;

/// A key's records apart from its name: what RENAME, COPY and MOVE carry to another key.
pub struct KeyRecords {
    /// Each record's tag and suffix, with its value (a long string's header apart).
    records: Vec<(Vec<u8>, Bytes)>,
    /// A long string's bytes, copied into a blob of the target's own.
    blob: Option<BlobReader>,
    pub expires_at: Option<u64>,
}

/// Members of a collection with their values, and where the next page starts (`None`: done).
pub type MemberPage = (Vec<(Bytes, Bytes)>, Option<Vec<u8>>);

impl View<'_, '_> {
    /// Up to `count` members of the collection `key` (hash fields with values, set members,
    /// sorted-set members with their scores' 8 bytes) from `resume` (a record key this returned;
    /// empty to start), and where to resume, or `None` at the end. WRONGTYPE unless `kind`.
    pub fn scan_members(
        &self,
        key: &[u8],
        kind: KeyType,
        resume: &[u8],
        count: usize,
    ) -> Result<MemberPage> {
        let member_tag = member_tag(kind)?;
        let Some(members) = self.collection(key, kind)? else {
            return Ok((Vec::new(), None));
        };
        let prefix = record_key(key, member_tag, &[])?;
        let start = if resume.is_empty() {
            prefix.clone()
        } else if resume.starts_with(&prefix) {
            resume.to_vec()
        } else {
            return Err(super::Failure::Invalid("ERR invalid cursor".into()));
        };
        if let Members::Packed {
            members: packed, ..
        } = members
        {
            // Pages as the records would: from the member the cursor names, `count` at a time.
            let rest = packed.entries_from(&start[prefix.len()..]);
            let page = rest[..rest.len().min(count)].to_vec();
            let next = match rest.get(count) {
                Some((member, _)) => Some(record_key(key, member_tag, member)?),
                None => None,
            };
            return Ok((page, next));
        }
        let values = kind != KeyType::Set;
        let mut out = Vec::new();
        for item in self.records(start, record_key(key, member_tag + 1, &[])?, values) {
            let (record, value) = item?;
            if out.len() == count {
                return Ok((out, Some(record.to_vec())));
            }
            if kind == KeyType::ZSet {
                super::zsets::member_score(&record, &value)?;
            }
            out.push((record.slice(prefix.len()..), value));
        }
        Ok((out, None))
    }
}

impl KeyRecords {
    /// The bytes of these records' keys and values, as the engine stores them before its own
    /// framing and compression (MEMORY USAGE).
    pub fn bytes(&self, key: &[u8]) -> usize {
        self.records
            .iter()
            .map(|(suffix, value)| 4 + key.len() + suffix.len() + value.len())
            .sum::<usize>()
            + self.blob.as_ref().map_or(0, |blob| blob.len() as usize)
    }
}

impl View<'_, '_> {
    /// Every record of the live key `key`, with its expiry; `None` when it does not exist.
    pub fn key_records(&self, key: &[u8]) -> Result<Option<KeyRecords>> {
        let Some(kind) = self.key_type(key)? else {
            return Ok(None);
        };
        let prefix_len = base(key).len();
        let mut records = Vec::new();
        let mut patch = None;
        for item in self.records(base(key), key_end(key), true) {
            let (record, value) = item?;
            match record.get(prefix_len) {
                Some(&tag::EXPIRY | &tag::CHUNKED_STRING) => {}
                found if found == patch_tag(kind).as_ref() => patch = Some((record, value)),
                _ => records.push((record[prefix_len..].to_vec(), value)),
            }
        }
        // A patch travels folded into its packed record: no commit writes both (`store_packed`).
        if let Some(patch) = &patch {
            let packed_tag = packed_tag(kind).ok_or(super::Failure::WrongType)?;
            let packed = records
                .iter_mut()
                .find(|(suffix, _)| suffix[..] == [packed_tag])
                .ok_or_else(|| patch_alone(&patch.0))?;
            let record = packed_key(key, kind)?;
            packed.1 = Packed::decode_patched(&record, &packed.1, Some(patch), kind)?
                .0
                .encode();
        }
        Ok(Some(KeyRecords {
            records,
            blob: match self.string_at_snapshot(key)? {
                Some(StringValue::Blob(reader)) => Some(reader),
                _ => None,
            },
            expires_at: self.expires_at(key)?,
        }))
    }

    /// Makes `key` hold `records` (from [`View::key_records`]), replacing what it held.
    pub fn put_key_records(&mut self, key: &[u8], records: KeyRecords) -> Result<()> {
        self.remove_key(key)?;
        if let Some(reader) = records.blob {
            let copy = blobs::copy_blob(reader, &self.space())?;
            self.link_blob(key, copy)?;
        }
        for (suffix, value) in &records.records {
            let mut record = base(key);
            record.extend_from_slice(suffix);
            if record.len() > shaledb::limits::KEY_BYTES_MAX {
                return Err(super::Failure::TooLarge);
            }
            self.put_record(record, value);
        }
        self.created(key);
        self.write_expiry(key, None, records.expires_at)?;
        self.touch(key);
        Ok(())
    }
}

/// The expiry queue's record for `key` expiring at `at`.
pub(super) fn queue_key(at: u64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + 4 + key.len());
    out.push(EXPIRY_QUEUE);
    out.extend_from_slice(&at.to_be_bytes());
    out.extend_from_slice(&base(key));
    out
}

#[cfg(test)]
mod tests {
    use super::super::test_support::open;
    use super::super::{BlobIds, ExpireCondition, SetExpiry};
    use super::*;

    /// What the clone-based savepoints this undo log replaced copied.
    type State = (
        PendingWrites,
        Vec<(usize, Vec<u8>)>,
        BTreeSet<usize>,
        BTreeMap<(usize, usize), i64>,
        Vec<(usize, usize)>,
        Vec<(usize, Bytes)>,
        usize,
        usize,
    );

    /// A xorshift generator from `seed`: each call gives a number below its argument, the same
    /// sequence every run.
    fn random_below(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |below| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        }
    }

    fn state(tx: &Tx) -> State {
        (
            tx.writes.clone(),
            tx.cleared.iter().cloned().collect(),
            tx.flushed.clone(),
            tx.count_deltas.clone(),
            tx.expiry_deletions.clone(),
            tx.touched.clone(),
            tx.staged.len(),
            tx.unlinked.len(),
        )
    }

    #[test]
    fn written_keys_are_noted_only_while_some_key_is_watched() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let watched = AtomicUsize::new(0);
        let write = |key: &[u8]| {
            let mut tx = Tx::new(spaces).noting_writes_while_watched(&watched);
            tx.on(0)
                .set_string(key, &b"v"[..], SetExpiry::Clear)
                .unwrap();
            tx.commit().unwrap()
        };
        assert_eq!(write(b"a"), vec![], "nobody watches");
        watched.store(1, Ordering::Release);
        assert_eq!(write(b"b"), vec![(0, Bytes::from_static(b"b"))]);
        // Both writes took effect either way.
        let mut tx = Tx::new(spaces);
        let view = tx.on(0);
        for key in [b"a", b"b"] {
            assert_eq!(view.get_string(key).unwrap().as_deref(), Some(&b"v"[..]));
        }
    }

    #[test]
    fn members_of_a_new_key_count_once_and_an_existing_keys_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let pair = |field: &'static [u8], value: &'static [u8]| {
            (Bytes::from_static(field), Bytes::from_static(value))
        };
        let mut tx = Tx::new(spaces);
        let mut view = tx.on(0);
        // A new key: a field named twice is one new field, holding its last value.
        let pairs = [pair(b"f", b"1"), pair(b"g", b"2"), pair(b"f", b"3")];
        assert_eq!(
            view.put_members(b"h", KeyType::Hash, &pairs, false)
                .unwrap(),
            2
        );
        assert_eq!(
            view.hash_get(b"h", b"f").unwrap().as_deref(),
            Some(&b"3"[..])
        );
        // Within the same transaction the key exists now.
        let more = [pair(b"g", b"4"), pair(b"i", b"5")];
        assert_eq!(
            view.put_members(b"h", KeyType::Hash, &more, false).unwrap(),
            1
        );
        let members = [pair(b"a", b""), pair(b"a", b"")];
        assert_eq!(
            view.put_members(b"s", KeyType::Set, &members, true)
                .unwrap(),
            1
        );
        tx.commit().unwrap();
        // Committed: its members are found in the index.
        let mut tx = Tx::new(spaces);
        let mut view = tx.on(0);
        let again = [pair(b"f", b"6"), pair(b"j", b"7")];
        assert_eq!(
            view.put_members(b"h", KeyType::Hash, &again, false)
                .unwrap(),
            1
        );
        assert_eq!(view.member_count(b"h", KeyType::Hash).unwrap(), 4);
        // Past its expiry a key is new again: every member counts.
        view.write_expiry(b"h", None, Some(1)).unwrap();
        let after = [pair(b"f", b"8"), pair(b"k", b"9")];
        assert_eq!(
            view.put_members(b"h", KeyType::Hash, &after, false)
                .unwrap(),
            2
        );
        assert_eq!(view.member_count(b"h", KeyType::Hash).unwrap(), 2);
    }

    #[test]
    fn hashes_and_sets_answer_as_a_model_whether_packed_or_not() {
        // Random writes and reads of a few hashes and sets under four packings: never, a tiny
        // one that collections outgrow and shrink back under, the default, and a roomier one
        // that collections of patches outgrow (long members and values: patches are written
        // for collections of 256 bytes and more). Every read must answer as a map would; a
        // collection is packed exactly while it has never outgrown the packing since it was
        // created.
        let tiny = Packing {
            members_max: 4,
            bytes_max: 40,
        };
        let roomy = Packing {
            members_max: 8,
            bytes_max: 700,
        };
        for (packing, long) in [
            (Packing::NEVER, false),
            (tiny, false),
            (Packing::DEFAULT, true),
            (roomy, true),
        ] {
            let mut patched_rounds = 0;
            let dir = tempfile::tempdir().unwrap();
            let (_db, keyspace) = open(dir.path());
            let spaces = std::slice::from_ref(&keyspace);
            let mut next = random_below(0x9e37_79b9_7f4a_7c15u64);
            // key -> (kind, members, outgrew the packing since created)
            let mut model: BTreeMap<Vec<u8>, (KeyType, BTreeMap<Bytes, Bytes>, bool)> =
                BTreeMap::new();
            // Keys past their expiry that no write has removed yet: DBSIZE counts them.
            let mut lingering: BTreeSet<Vec<u8>> = BTreeSet::new();
            let keys: [(&[u8], KeyType); 4] = [
                (b"h1", KeyType::Hash),
                (b"h2", KeyType::Hash),
                (b"s1", KeyType::Set),
                (b"s2", KeyType::Set),
            ];
            for round in 0..300 {
                let mut tx = Tx::new(spaces).packing(packing);
                for _ in 0..1 + next(3) {
                    let (key, kind) = keys[next(4) as usize];
                    let member = |n: u64| member_name(n, long);
                    let mut view = tx.on(0);
                    let expiring = next(10);
                    if expiring < 9 {
                        lingering.remove(key);
                    }
                    match expiring {
                        0..=4 => {
                            let pairs: Vec<(Bytes, Bytes)> = (0..1 + next(4))
                                .map(|_| {
                                    let value = match kind {
                                        KeyType::Set => Bytes::new(),
                                        _ if long => Bytes::from(vec![b'v'; next(90) as usize]),
                                        _ => Bytes::from(vec![b'v'; next(12) as usize]),
                                    };
                                    (member(next(10)), value)
                                })
                                .collect();
                            let only_new = next(3) == 0;
                            let entry =
                                model
                                    .entry(key.to_vec())
                                    .or_insert((kind, BTreeMap::new(), false));
                            let mut added = 0;
                            for (field, value) in &pairs {
                                if only_new && entry.1.contains_key(field) {
                                    continue;
                                }
                                if entry.1.insert(field.clone(), value.clone()).is_none() {
                                    added += 1;
                                }
                            }
                            let encoded = Packed::from_sorted(
                                entry
                                    .1
                                    .iter()
                                    .map(|(m, v)| (m.clone(), v.clone()))
                                    .collect(),
                            )
                            .encoded_len();
                            if entry.1.len() > packing.members_max || encoded > packing.bytes_max {
                                entry.2 = true;
                            }
                            if entry.1.is_empty() {
                                model.remove(key);
                            }
                            assert_eq!(
                                view.put_members(key, kind, &pairs, only_new).unwrap(),
                                added
                            );
                        }
                        5..=7 => {
                            let members: Vec<Bytes> =
                                (0..1 + next(3)).map(|_| member(next(10))).collect();
                            let mut removed = 0;
                            if let Some(entry) = model.get_mut(key) {
                                for m in &members {
                                    removed += usize::from(entry.1.remove(m).is_some());
                                }
                                if entry.1.is_empty() {
                                    model.remove(key);
                                }
                            }
                            assert_eq!(view.remove_members(key, kind, &members).unwrap(), removed);
                        }
                        8 => {
                            if view.remove_key(key).unwrap() {
                                model.remove(key);
                            }
                        }
                        _ => {
                            // Expires the key: it reads as missing, and the next write starts
                            // a new collection.
                            if model.remove(key).is_some() {
                                lingering.insert(key.to_vec());
                                let at = view.expires_at(key).unwrap();
                                view.write_expiry(key, at, Some(1)).unwrap();
                            }
                        }
                    }
                }
                if next(2) == 0 {
                    tx.commit().unwrap();
                    tx = Tx::new(spaces).packing(packing);
                }
                let view = tx.on(0);
                for (key, kind) in keys {
                    let context = format!("{key:?} in round {round} under {packing:?}");
                    let expected = model.get(key);
                    let pairs: Vec<(Bytes, Bytes)> = expected
                        .map(|(_, members, _)| {
                            members
                                .iter()
                                .map(|(m, v)| (m.clone(), v.clone()))
                                .collect()
                        })
                        .unwrap_or_default();
                    assert_eq!(
                        view.members_with_values(key, kind).unwrap(),
                        pairs,
                        "{context}"
                    );
                    let names: Vec<Bytes> = pairs.iter().map(|(m, _)| m.clone()).collect();
                    assert_eq!(view.member_names(key, kind).unwrap(), names, "{context}");
                    assert_eq!(
                        view.member_count(key, kind).unwrap(),
                        pairs.len(),
                        "{context}"
                    );
                    for n in 0..10 {
                        let m = member_name(n, long);
                        let value = pairs.iter().find(|(p, _)| *p == m);
                        assert_eq!(
                            view.member_value(key, kind, &m).unwrap(),
                            value.map(|(_, v)| v.clone()),
                            "{context} {m:?}"
                        );
                        assert_eq!(
                            view.has_member(key, kind, &m).unwrap(),
                            value.is_some(),
                            "{context} {m:?}"
                        );
                    }
                    // Paged three at a time, the pages join into the whole.
                    let mut paged = Vec::new();
                    let mut resume = Vec::new();
                    loop {
                        let (page, next_page) = view.scan_members(key, kind, &resume, 3).unwrap();
                        assert!(page.len() <= 3, "{context}");
                        paged.extend(page);
                        match next_page {
                            Some(next_page) => resume = next_page,
                            None => break,
                        }
                    }
                    assert_eq!(paged, pairs, "{context}");
                    let encoding = view.encoding(key).unwrap();
                    let expected_encoding = expected.map(|(_, _, outgrew)| {
                        if *outgrew || packing == Packing::NEVER {
                            "records"
                        } else {
                            "packed"
                        }
                    });
                    assert_eq!(encoding, expected_encoding, "{context}");
                    if view
                        .record(&patch_key(key, kind).unwrap())
                        .unwrap()
                        .is_some()
                    {
                        patched_rounds += 1;
                    }
                }
                tx.commit().unwrap();
                assert_eq!(
                    keyspace.key_count(),
                    (model.len() + lingering.len()) as u64,
                    "round {round}"
                );
            }
            // Long members and values make patches; short ones never reach PATCHED_BYTES_MIN.
            assert_eq!(patched_rounds > 0, long, "{packing:?}: {patched_rounds}");
        }
    }

    #[test]
    fn a_lock_free_reader_never_sees_a_collection_changed_half_way() {
        // A writer changes four of a packed hash's ten fields in turn, each change a patch until
        // the patch outgrows a quarter of the hash and is folded into a new record, and now and
        // then deletes the hash and creates it again; lock-free readers meanwhile read its count
        // and members, which must always be whole (or the key missing), never an error.
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let value = hundred_bytes;
        let create = || put_hash(spaces, b"h", &ten_fields());
        create();
        read_while_writing(
            || {
                for n in 0..3_000u64 {
                    if n % 50 == 49 {
                        let mut tx = Tx::new(spaces);
                        tx.on(0).remove_key(b"h").unwrap();
                        tx.commit().unwrap();
                        create();
                        continue;
                    }
                    let field = Bytes::from(format!("f{}", n % 4));
                    put_hash(spaces, b"h", &[(field, value(n))]);
                }
            },
            || {
                let mut tx = Tx::new(spaces);
                let view = tx.on(0);
                let count = view.member_count(b"h", KeyType::Hash).unwrap();
                assert!(count == 10 || count == 0, "{count}");
                let read = view.member_value(b"h", KeyType::Hash, b"f2").unwrap();
                assert!(read.is_none_or(|value| value.len() == 100));
                view.has_member(b"h", KeyType::Hash, b"f9").unwrap();
            },
        );
    }

    #[test]
    fn a_lock_free_reader_never_sees_a_record_without_the_patch_committed_with_it() {
        // RENAME of a patched hash onto `h`: a reader of `h` must never see its record without
        // its patch. Every hash renamed onto `h` has f0 in its record and a patch removing it,
        // so `h` never has f0 and always nine fields.
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let fields = ten_fields();
        put_hash(spaces, b"h", &fields[1..]);
        read_while_writing(
            || {
                for _ in 0..1_000 {
                    put_hash(spaces, b"src", &fields);
                    let mut tx = Tx::new(spaces);
                    let removed = [Bytes::from("f0")];
                    tx.on(0)
                        .remove_members(b"src", KeyType::Hash, &removed)
                        .unwrap();
                    tx.commit().unwrap();
                    let mut tx = Tx::new(spaces);
                    let mut view = tx.on(0);
                    let records = view.key_records(b"src").unwrap().unwrap();
                    view.remove_key(b"src").unwrap();
                    view.put_key_records(b"h", records).unwrap();
                    tx.commit().unwrap();
                }
            },
            || {
                // One transaction for many reads, as SMISMEMBER or HMGET read: the key's type,
                // read once, is kept while the writer renames other hashes onto it.
                let mut tx = Tx::new(spaces);
                let view = tx.on(0);
                for _ in 0..50 {
                    assert!(!view.has_member(b"h", KeyType::Hash, b"f0").unwrap());
                    assert_eq!(view.member_value(b"h", KeyType::Hash, b"f0").unwrap(), None);
                    assert_eq!(view.member_count(b"h", KeyType::Hash).unwrap(), 9);
                }
            },
        );
    }

    /// Runs `write` on a thread of its own and `read` here, again and again until the writer
    /// is done (at least 100 times).
    fn read_while_writing(write: impl FnOnce() + Send, mut read: impl FnMut()) {
        let writing = AtomicUsize::new(1);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                write();
                writing.store(0, Ordering::SeqCst);
            });
            let mut reads = 0;
            while writing.load(Ordering::SeqCst) == 1 || reads < 100 {
                read();
                reads += 1;
            }
        });
    }

    #[test]
    fn no_commit_writes_a_packed_record_and_a_patch_together() {
        // One transaction patches a hash, folds the patch in (rewriting the record), then
        // changes it again: the last change rewrites the record too, instead of a patch beside
        // the record this commit writes, which a lock-free reader would read without it.
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let value = hundred_bytes;
        put_hash(spaces, b"h", &ten_fields());
        let patch = patch_key(b"h", KeyType::Hash).unwrap();
        let mut tx = Tx::new(spaces);
        let mut view = tx.on(0);
        for (n, field) in ["f1", "f2", "f3", "f4", "f5"].into_iter().enumerate() {
            let pair = [(Bytes::from(field), value(100 + n as u64))];
            view.put_members(b"h", KeyType::Hash, &pair, false).unwrap();
        }
        tx.commit().unwrap();
        let mut tx = Tx::new(spaces);
        let view = tx.on(0);
        assert_eq!(view.record(&patch).unwrap(), None);
        assert_eq!(
            view.member_value(b"h", KeyType::Hash, b"f5").unwrap(),
            Some(value(104))
        );
        // RENAME's records carry a patch folded in.
        let mut tx = Tx::new(spaces);
        let pair = [(Bytes::from("f6"), value(200))];
        tx.on(0)
            .put_members(b"h", KeyType::Hash, &pair, false)
            .unwrap();
        tx.commit().unwrap();
        let mut tx = Tx::new(spaces);
        let mut view = tx.on(0);
        assert!(view.record(&patch).unwrap().is_some());
        let records = view.key_records(b"h").unwrap().unwrap();
        view.put_key_records(b"copy", records).unwrap();
        tx.commit().unwrap();
        let mut tx = Tx::new(spaces);
        let view = tx.on(0);
        assert_eq!(
            view.record(&patch_key(b"copy", KeyType::Hash).unwrap())
                .unwrap(),
            None
        );
        assert_eq!(
            view.members_with_values(b"copy", KeyType::Hash).unwrap(),
            view.members_with_values(b"h", KeyType::Hash).unwrap()
        );
    }

    /// Value number `n`, 100 bytes as YCSB's fields.
    fn hundred_bytes(n: u64) -> Bytes {
        Bytes::from(format!("{n:0>100}"))
    }

    /// YCSB's record: fields f0..f9 of 100 bytes, 1.1 KiB packed (patched when changed).
    fn ten_fields() -> Vec<(Bytes, Bytes)> {
        (0..10)
            .map(|n| (Bytes::from(format!("f{n}")), hundred_bytes(n)))
            .collect()
    }

    /// Sets `fields` of the hash `key` in a transaction of its own.
    fn put_hash(spaces: &[Keyspace], key: &[u8], fields: &[(Bytes, Bytes)]) {
        let mut tx = Tx::new(spaces);
        tx.on(0)
            .put_members(key, KeyType::Hash, fields, false)
            .unwrap();
        tx.commit().unwrap();
    }

    /// The member of number `n`, `long` enough for a few to fill `PATCHED_BYTES_MIN`.
    fn member_name(n: u64, long: bool) -> Bytes {
        match long {
            true => Bytes::from(format!("m{n}-{:-<40}", "")),
            false => Bytes::from(format!("m{n}")),
        }
    }

    /// Each stripe's count of keys that may expire, and its keys with an expiry queue entry.
    fn expiring_and_queued(keyspace: &Keyspace) -> (Vec<u64>, Vec<u64>) {
        let space = keyspace.space();
        let counted = space.expiring.per_stripe();
        let mut queued = vec![0; super::super::STRIPES];
        for record in space.kvs.prefix([EXPIRY_QUEUE]).keys() {
            let (_, key) = super::super::expiry::queue_entry(&record.unwrap()).unwrap();
            queued[super::super::stripe_of(&key)] += 1;
        }
        (counted, queued)
    }

    #[test]
    fn expiring_counts_never_miss_an_expiry_record_and_fall_when_they_go() {
        let dir = tempfile::tempdir().unwrap();
        let (db, keyspace) = open(dir.path());
        let mut next = random_below(0x9e37_79b9_7f4a_7c15u64);
        let later = super::super::now_ms() + 3_600_000;
        for _round in 0..150 {
            let spaces = std::slice::from_ref(&keyspace);
            let mut tx = Tx::new(spaces);
            let mut savepoint = None;
            for _ in 0..=next(5) {
                if savepoint.is_none() && next(4) == 0 {
                    savepoint = Some(tx.savepoint());
                }
                let key = [next(12) as u8];
                let mut view = tx.on(0);
                match next(7) {
                    0 => view
                        .set_string(&key, &b"v"[..], SetExpiry::At(later))
                        .unwrap(),
                    // Past its time: an expired key whose records are still there.
                    1 => view.set_string(&key, &b"v"[..], SetExpiry::At(1)).unwrap(),
                    2 => view.set_string(&key, &b"v"[..], SetExpiry::Clear).unwrap(),
                    3 => view.set_string(&key, &b"v"[..], SetExpiry::Keep).unwrap(),
                    4 => {
                        view.persist(&key).unwrap();
                    }
                    5 => {
                        view.remove_key(&key).unwrap();
                    }
                    _ => {
                        let at = later + next(1000);
                        view.expire(&key, at, ExpireCondition::ALWAYS).unwrap();
                    }
                }
            }
            if let Some(savepoint) = savepoint.filter(|_| next(2) == 0) {
                tx.rollback(savepoint);
            }
            // Some transactions fail before they commit: their counts stay raised.
            if next(4) == 0 {
                drop(tx);
            } else {
                tx.commit().unwrap();
            }
            let (counted, queued) = expiring_and_queued(&keyspace);
            for (stripe, (counted, queued)) in counted.iter().zip(&queued).enumerate() {
                assert!(counted >= queued, "stripe {stripe}: {counted} < {queued}");
            }
            if queued.iter().any(|&queued| queued > 0) {
                assert!(
                    keyspace.space().expiring.any(),
                    "a queued expiry, counted none"
                );
            }
            let mut tx = Tx::new(spaces);
            let view = tx.on(0);
            for key in 0..12u8 {
                let record = record_key(&[key], tag::EXPIRY, &[]).unwrap();
                let stored = keyspace.space().kvs.get(&record).unwrap();
                let stored = stored.map(|value| u64::from_be_bytes(value[..].try_into().unwrap()));
                assert_eq!(view.expires_at(&[key]).unwrap(), stored, "key {key}");
            }
        }
        // Reopened, the counts are exact; with every expiry gone they are all zero, so reads
        // skip the seek again.
        drop(keyspace);
        let kvs = db
            .kvs_with_options("redis-0", super::super::kvs_options())
            .unwrap();
        let keyspace = Keyspace::open(db.clone(), kvs, 0, BlobIds::new()).unwrap();
        let (counted, queued) = expiring_and_queued(&keyspace);
        assert_eq!(counted, queued);
        assert!(
            queued.iter().any(|&queued| queued > 0),
            "no expiry left to test"
        );
        let spaces = std::slice::from_ref(&keyspace);
        for key in 0..12u8 {
            let mut tx = Tx::new(spaces);
            tx.on(0).persist(&[key]).unwrap();
            tx.on(0).remove_key(&[key]).unwrap();
            tx.commit().unwrap();
        }
        assert!(expiring_and_queued(&keyspace)
            .0
            .iter()
            .all(|&count| count == 0));
        assert!(!keyspace.space().expiring.any());
    }

    #[test]
    fn rollbacks_restore_what_a_copy_taken_at_the_savepoint_held() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let long = vec![7u8; blobs::CHUNK_BYTES + 3];
        // Committed data for the random writes to meet: strings short and long, a hash.
        let mut tx = Tx::new(spaces);
        for key in 0..6u8 {
            let data: &[u8] = if key % 2 == 0 { &long } else { b"short" };
            tx.on(0).set_string(&[key], data, SetExpiry::Clear).unwrap();
        }
        tx.commit().unwrap();
        let mut next = random_below(0x2545_f491_4f6c_dd1du64);
        for _round in 0..40 {
            let mut tx = Tx::new(spaces);
            // Nested savepoints, as a stack; each op sometimes takes or rolls back one.
            let mut stack: Vec<(Savepoint, State)> = Vec::new();
            for _ in 0..60 {
                match next(10) {
                    0 => {
                        let taken = state(&tx);
                        stack.push((tx.savepoint(), taken));
                    }
                    1 if !stack.is_empty() => {
                        let (savepoint, expected) = stack.pop().unwrap();
                        tx.rollback(savepoint);
                        assert!(state(&tx) == expected, "a rollback left another state");
                    }
                    _ => {
                        let key = [next(8) as u8];
                        let mut view = tx.on(0);
                        match next(6) {
                            0 => view.set_string(&key, &b"v"[..], SetExpiry::Clear).unwrap(),
                            1 => view.set_string(&key, &long, SetExpiry::Clear).unwrap(),
                            2 => {
                                view.remove_key(&key).unwrap();
                            }
                            3 if next(4) == 0 => view.flush().unwrap(),
                            4 => {
                                let _ = view.put_members(
                                    &key,
                                    KeyType::Hash,
                                    &[(Bytes::from("f"), Bytes::from("x"))],
                                    false,
                                );
                            }
                            _ => view
                                .set_string(&key, &b"w"[..], SetExpiry::At(u64::MAX / 2))
                                .unwrap(),
                        }
                    }
                }
            }
            while let Some((savepoint, expected)) = stack.pop() {
                tx.rollback(savepoint);
                assert!(state(&tx) == expected, "a rollback left another state");
            }
        }
    }

    /// A key's records past the group read's limits (more records, or more bytes to read) are
    /// read through a cursor, as whole as the ones within them.
    #[test]
    fn members_past_the_group_reads_limits_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let field = |n: usize| Bytes::from(format!("field{n:03}"));
        let many: Vec<(Bytes, Bytes)> = (0..GROUP_READ_RECORDS_MAX + 6)
            .map(|n| (field(n), Bytes::from("v")))
            .collect();
        let large_value = Bytes::from(vec![b'x'; GROUP_READ_BYTES_MAX as usize / 2]);
        let large: Vec<(Bytes, Bytes)> = (0..3).map(|n| (field(n), large_value.clone())).collect();
        let few: Vec<(Bytes, Bytes)> = (0..3).map(|n| (field(n), Bytes::from("v"))).collect();
        let hashes = [(&b"many"[..], &many), (b"large", &large), (b"few", &few)];
        let mut tx = Tx::new(spaces).packing(Packing::NEVER);
        let mut view = tx.on(0);
        for (key, fields) in hashes {
            view.put_members(key, KeyType::Hash, fields, false).unwrap();
        }
        tx.commit().unwrap();
        let mut tx = Tx::new(spaces);
        let view = tx.on(0);
        for (key, fields) in hashes {
            assert_eq!(
                view.members_with_values(key, KeyType::Hash).unwrap(),
                fields.to_vec(),
                "{}",
                String::from_utf8_lossy(key)
            );
        }
    }

    #[test]
    fn members_with_values_reads_as_a_type_check_then_a_page_of_members_would() {
        // Hashes of one record per field, then packed ones.
        for packing in [Packing::NEVER, Packing::DEFAULT] {
            let dir = tempfile::tempdir().unwrap();
            let (_db, keyspace) = open(dir.path());
            let spaces = std::slice::from_ref(&keyspace);
            let fields = [
                (Bytes::from("a"), Bytes::from("1")),
                (Bytes::from("b"), Bytes::from("2")),
            ];
            let far = u64::MAX / 2;
            let mut tx = Tx::new(spaces).packing(packing);
            let mut view = tx.on(0);
            for key in [&b"hash"[..], b"lasting", b"expired"] {
                view.put_members(key, KeyType::Hash, &fields, false)
                    .unwrap();
            }
            view.write_expiry(b"lasting", None, Some(far)).unwrap();
            view.write_expiry(b"expired", None, Some(1)).unwrap();
            view.set_string(b"string", &b"v"[..], SetExpiry::Clear)
                .unwrap();
            view.set_string(b"old string", &b"v"[..], SetExpiry::At(1))
                .unwrap();
            assert_eq!(
                view.encoding(b"hash").unwrap(),
                Some(if packing == Packing::NEVER {
                    "records"
                } else {
                    "packed"
                })
            );
            let keys: [&[u8]; 6] = [
                b"hash",
                b"lasting",
                b"expired",
                b"string",
                b"old string",
                b"missing",
            ];
            // Through the uncommitted writes, then committed.
            for round in 0..2 {
                let view = tx.on(0);
                for key in keys {
                    let fused = view.members_with_values(key, KeyType::Hash);
                    let separate = view
                        .scan_members(key, KeyType::Hash, b"", usize::MAX)
                        .map(|(page, _)| page);
                    assert_eq!(
                        format!("{fused:?}"),
                        format!("{separate:?}"),
                        "key {key:?}, round {round}, {packing:?}"
                    );
                }
                let expected: Vec<(Bytes, Bytes)> = fields.to_vec();
                assert_eq!(
                    view.members_with_values(b"lasting", KeyType::Hash).unwrap(),
                    expected
                );
                assert!(matches!(
                    view.members_with_values(b"string", KeyType::Hash),
                    Err(super::super::Failure::WrongType)
                ));
                std::mem::replace(&mut tx, Tx::new(spaces).packing(packing))
                    .commit()
                    .unwrap();
            }
        }
    }

    #[test]
    fn a_rollback_undoes_exactly_what_came_after_its_savepoint() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let mut tx = Tx::new(spaces);
        tx.on(0)
            .set_string(b"kept", &b"1"[..], SetExpiry::Clear)
            .unwrap();
        let before = tx.savepoint();
        let mut view = tx.on(0);
        view.set_string(b"kept", &b"2"[..], SetExpiry::Clear)
            .unwrap();
        view.set_string(b"undone", &b"3"[..], SetExpiry::Clear)
            .unwrap();
        view.flush().unwrap();
        view.set_string(b"after-flush", &b"4"[..], SetExpiry::Clear)
            .unwrap();
        tx.rollback(before);
        // A later savepoint and rollback on top of the first.
        tx.on(0)
            .set_string(b"second", &b"5"[..], SetExpiry::Clear)
            .unwrap();
        let again = tx.savepoint();
        assert!(tx.on(0).remove_key(b"second").unwrap());
        tx.rollback(again);
        tx.commit().unwrap();
        let mut tx = Tx::new(spaces);
        let view = tx.on(0);
        assert_eq!(view.get_string(b"kept").unwrap().unwrap(), "1");
        assert_eq!(view.get_string(b"second").unwrap().unwrap(), "5");
        assert_eq!(view.get_string(b"undone").unwrap(), None);
        assert_eq!(view.get_string(b"after-flush").unwrap(), None);
        assert_eq!(
            keyspace.key_count(),
            2,
            "the key counts were rolled back too"
        );
    }
    #[test]
    fn a_transactions_own_deletions_and_puts_decide_a_keys_type() {
        // A pipeline's batched commands share one transaction: a type check after it deleted a
        // key's first records must look past them (index probes, then a cursor past
        // FIRST_RECORD_PROBES of them), find a record it put before them, and find no key once
        // every record has gone.
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let fields: Vec<Bytes> = (0..10).map(|n| Bytes::from(format!("f{n}"))).collect();
        let value = Bytes::from("v");
        let pairs: Vec<(Bytes, Bytes)> =
            fields.iter().map(|f| (f.clone(), value.clone())).collect();
        let mut tx = Tx::new(spaces).packing(Packing::NEVER);
        tx.on(0)
            .put_members(b"h", KeyType::Hash, &pairs, false)
            .unwrap();
        tx.commit().unwrap();
        // A packed hash outgrowing its packing in the transaction: its packed record, first in
        // the engine, is deleted; the type check must find the field records put instead.
        let tiny = Packing {
            members_max: 4,
            bytes_max: 400,
        };
        let mut tx = Tx::new(spaces).packing(tiny);
        tx.on(0)
            .put_members(b"p", KeyType::Hash, &pairs[..3], false)
            .unwrap();
        tx.commit().unwrap();
        let mut tx = Tx::new(spaces).packing(tiny);
        let mut view = tx.on(0);
        assert_eq!(view.encoding(b"p").unwrap(), Some("packed"));
        for pair in &pairs[3..6] {
            let added = view.put_members(b"p", KeyType::Hash, std::slice::from_ref(pair), false);
            assert_eq!(added.unwrap(), 1, "{pair:?}");
        }
        assert_eq!(view.encoding(b"p").unwrap(), Some("records"));
        assert_eq!(view.member_count(b"p", KeyType::Hash).unwrap(), 6);
        for deleted in 0..=fields.len() {
            for put_first in [false, true] {
                let mut tx = Tx::new(spaces).packing(Packing::NEVER);
                let mut view = tx.on(0);
                // One field at a time, as pipelined HDELs do: each finds the hash first.
                for field in &fields[..deleted] {
                    let removed =
                        view.remove_members(b"h", KeyType::Hash, std::slice::from_ref(field));
                    assert_eq!(removed.unwrap(), 1, "{field:?}");
                }
                if put_first {
                    let first = [(Bytes::from("a"), value.clone())];
                    view.put_members(b"h", KeyType::Hash, &first, false)
                        .unwrap();
                }
                let expected = (deleted < fields.len() || put_first).then_some(KeyType::Hash);
                assert_eq!(
                    view.key_type(b"h").unwrap(),
                    expected,
                    "{deleted} deleted, a field put first: {put_first}"
                );
                assert_eq!(
                    view.member_count(b"h", KeyType::Hash).unwrap(),
                    fields.len() - deleted + usize::from(put_first)
                );
            }
        }
    }

    /// One random change a command makes to its own transaction, to `record` of `key`: a put,
    /// a deletion, a clear of the key, or a savepoint taken or rolled back to.
    fn random_own_write(
        tx: &mut Tx,
        random: &mut impl FnMut(u64) -> u64,
        key: &[u8],
        record: Vec<u8>,
        savepoint: &mut Option<Savepoint>,
    ) {
        let mut view = tx.on(0);
        match random(10) {
            0..=3 => view.put_record(record, Bytes::from("v")),
            4..=7 => view.delete_record(&record),
            8 => view.clear(base(key)),
            _ => match savepoint.take() {
                Some(savepoint) => tx.rollback(savepoint),
                None => *savepoint = Some(tx.savepoint()),
            },
        }
    }

    #[test]
    fn a_known_type_is_the_type_a_fresh_read_finds_after_any_write() {
        // A transaction keeps the last key's type across its writes (`KnownType::follow`):
        // after every put, deletion, clear and rollback of records of a few keys, in the engine
        // and in the transaction, the kept answer must be the one a read without it gives.
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let keys: [&[u8]; 3] = [b"a", b"ab", b"b"];
        let tags = [
            tag::STRING,
            tag::HASH_FIELD,
            tag::PACKED_HASH,
            tag::LIST_BOUNDS,
            tag::SET_MEMBER,
            tag::ZSET_MEMBER,
            tag::ZSET_RANK,
            tag::EXPIRY,
        ];
        let mut random = random_below(0x5eed_7e57);
        let mut tx = Tx::new(spaces);
        for (n, key) in keys.iter().enumerate() {
            let record = record_key(key, tags[n + 1], b"m").unwrap();
            tx.on(0).put_record(record, Bytes::from("v"));
        }
        tx.commit().unwrap();
        let mut kept_answers = 0;
        for round in 0..40 {
            let mut tx = Tx::new(spaces);
            let mut savepoint = None;
            for step in 0..30 {
                let key = keys[random(keys.len() as u64) as usize];
                let tag = tags[random(tags.len() as u64) as usize];
                let suffix = [b'a' + random(3) as u8];
                let record = record_key(key, tag, &suffix).unwrap();
                let kept_for = keys[random(keys.len() as u64) as usize];
                let _ = tx.on(0).stored_tag(kept_for);
                random_own_write(&mut tx, &mut random, key, record, &mut savepoint);
                for key in keys {
                    let kept = tx
                        .known_type
                        .borrow()
                        .as_ref()
                        .is_some_and(|k| k.is_of(0, key));
                    let view = tx.on(0);
                    let answer = format!("{:?}", view.stored_tag(key));
                    tx.known_type.take();
                    let fresh = format!("{:?}", tx.on(0).stored_tag(key));
                    assert_eq!(answer, fresh, "round {round} step {step} key {key:?}");
                    kept_answers += usize::from(kept);
                }
            }
        }
        assert!(
            kept_answers > 150,
            "only {kept_answers} answers came from a kept type"
        );
    }

    #[test]
    fn a_remembered_read_is_what_a_fresh_lookup_finds_after_any_write() {
        // A transaction remembers whether the engine held the record it read last
        // (`LastRead`): after every put, deletion, clear and rollback of its own, asking
        // whether a record exists must give what a lookup without that memory gives.
        let dir = tempfile::tempdir().unwrap();
        let (_db, keyspace) = open(dir.path());
        let spaces = std::slice::from_ref(&keyspace);
        let long_key = [b'k'; LAST_READ_BYTES];
        let keys: [&[u8]; 3] = [b"a", b"ab", &long_key];
        let records: Vec<(&[u8], Vec<u8>)> = keys
            .iter()
            .flat_map(|key| {
                [b"a", b"b"].map(|field| (*key, record_key(key, tag::HASH_FIELD, field).unwrap()))
            })
            .collect();
        let mut random = random_below(0x1a57_4ead);
        let mut tx = Tx::new(spaces);
        for (_, record) in records.iter().step_by(2) {
            tx.on(0).put_record(record.clone(), Bytes::from("v"));
        }
        tx.commit().unwrap();
        let mut remembered_answers = 0;
        for round in 0..40 {
            let mut tx = Tx::new(spaces);
            let mut savepoint = None;
            for step in 0..30 {
                let pick = |random: &mut dyn FnMut(u64) -> u64| {
                    records[random(records.len() as u64) as usize].clone()
                };
                let (_, read) = pick(&mut random);
                tx.on(0).record(&read).unwrap();
                let (key, record) = pick(&mut random);
                random_own_write(&mut tx, &mut random, key, record, &mut savepoint);
                for (_, record) in &records {
                    let remembered = tx.last_read.borrow().found(0, record).is_some();
                    let answer = tx.on(0).record_exists(record).unwrap();
                    let kept = std::mem::replace(&mut *tx.last_read.borrow_mut(), LastRead::NONE);
                    let fresh = tx.on(0).record_exists(record).unwrap();
                    *tx.last_read.borrow_mut() = kept;
                    assert_eq!(answer, fresh, "round {round} step {step} record {record:?}");
                    remembered_answers += usize::from(remembered);
                }
            }
        }
        assert!(
            remembered_answers > 150,
            "only {remembered_answers} answers came from a remembered read"
        );
    }
}
