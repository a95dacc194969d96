//! `rocksdb_iterator_t`: RocksDB's positioned, two-way iterator over one column family, made of
//! ShaleDB cursors at one snapshot (the read options', or one taken when the iterator is made).
//! Moving on in the same direction takes the cursor's next item; turning around starts a
//! cursor on the other side of the current key.

use crate::args::{bytes, drop_handle, handle, handle_mut, into_handle, set_out};
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t, ColumnFamily, Database};
use crate::plugins::SliceTransform;
use crate::read_write_options::rocksdb_readoptions_t;
use crate::status::{call, quiet, report, Result, Status};
use crate::write_set::{Cursor, Overlay};
use engine::{Bytes, Snapshot};
use libc::c_char;
use std::ops::Bound;
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Backward,
}

/// `rocksdb_iterator_t`.
pub struct rocksdb_iterator_t {
    database: Arc<Database>,
    cf: ColumnFamily,
    snapshot: Arc<Snapshot>,
    /// Whether the snapshot was the iterator's own (so a refresh may take a newer one).
    own_snapshot: bool,
    /// A tailing iterator (and no snapshot given): each seek reads the data as of then, and
    /// reaching the end reads on in the data as of then (forward).
    tailing: bool,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// With prefix_same_as_start: the extractor, and the prefix of the key last sought.
    prefix_extractor: Option<Arc<SliceTransform>>,
    prefix: Option<Vec<u8>>,
    /// A transaction's writes to this column family, merged over the database's (write_set.rs).
    overlay: Option<Arc<Overlay>>,
    cursor: Option<(Cursor, Direction)>,
    current: Option<(Bytes, Bytes)>,
    status: Option<Status>,
}

impl rocksdb_iterator_t {
    fn new(db: &rocksdb_t, cf: ColumnFamily, options: &rocksdb_readoptions_t) -> Result<Self> {
        options.check_no_timestamp()?;
        let (snapshot, own_snapshot) = match &options.snapshot {
            Some(snapshot) => (snapshot.clone(), false),
            None => (Arc::new(db.engine().snapshot()?), true),
        };
        let prefix_extractor = if options.prefix_same_as_start() && !options.total_order_seek() {
            cf.prefix_extractor.clone()
        } else {
            None
        };
        Ok(rocksdb_iterator_t {
            database: db.database.clone(),
            cf,
            tailing: own_snapshot && options.tailing(),
            snapshot,
            own_snapshot,
            lower: options.lower_bound.clone(),
            upper: options.upper_bound.clone(),
            prefix_extractor,
            prefix: None,
            overlay: None,
            cursor: None,
            current: None,
            status: None,
        })
    }

    /// An iterator over a transaction: its writes to `cf` (`overlay`) over the database's.
    pub(crate) fn with_overlay(
        db: &rocksdb_t,
        cf: ColumnFamily,
        options: &rocksdb_readoptions_t,
        overlay: Arc<Overlay>,
    ) -> Result<Self> {
        let mut iterator = Self::new(db, cf, options)?;
        iterator.overlay = Some(overlay);
        Ok(iterator)
    }

    /// The number of the column family this iterator reads.
    pub(crate) fn column_family_id(&self) -> u32 {
        self.cf.id
    }

    /// Merges `overlay` (a write batch's writes to this column family) over what the iterator
    /// reads, from its next seek on.
    pub(crate) fn set_overlay(&mut self, overlay: Arc<Overlay>) {
        self.overlay = Some(overlay);
        self.cursor = None;
        self.current = None;
    }

    /// Starts a cursor over `[from, to)` (within the bounds) and moves to its first item
    /// (forward) or last (backward).
    fn start(&mut self, from: Bound<Vec<u8>>, to: Bound<Vec<u8>>, direction: Direction) {
        let lower = tighter(from, self.lower.clone().map(Bound::Included), true);
        let upper = tighter(to, self.upper.clone().map(Bound::Excluded), false);
        self.status = None;
        // A new position: a tailing iterator that finds nothing must not read on past the old one.
        self.current = None;
        if self.tailing {
            match self.database.engine.snapshot() {
                Ok(snapshot) => self.snapshot = Arc::new(snapshot),
                Err(error) => {
                    self.status = Some(error.into());
                    self.cursor = None;
                    self.current = None;
                    return;
                }
            }
        }
        // A cursor over an empty or inverted range yields nothing (the engine's contract).
        let cursor = match &self.overlay {
            Some(overlay) => {
                let bounds = (lower.clone(), upper.clone());
                let base = self.snapshot.range(&self.cf.kvs, (lower, upper));
                Cursor::new(base, overlay, bounds)
            }
            None => Cursor::plain(self.snapshot.range(&self.cf.kvs, (lower, upper))),
        };
        self.cursor = Some((cursor, direction));
        self.step();
    }

    /// Takes the cursor's next item in its direction.
    fn step(&mut self) {
        let Some((cursor, direction)) = &mut self.cursor else {
            self.current = None;
            return;
        };
        let forward = matches!(direction, Direction::Forward);
        let item = match direction {
            Direction::Forward => cursor.next(),
            Direction::Backward => cursor.next_back(),
        };
        let previous = self.current.take();
        self.current = match item {
            Some(Ok(item)) => Some(item),
            Some(Err(error)) => {
                self.status = Some(error.into());
                None
            }
            None => None,
        };
        // A tailing iterator that ran out reads on past its last key in the data as of now.
        // `start` clears the position first, so a fresh cursor that finds nothing is the end
        // (for now), not another restart.
        if self.tailing && forward && self.current.is_none() && self.status.is_none() {
            if let Some((last, _)) = previous {
                self.start(
                    Bound::Excluded(last.to_vec()),
                    Bound::Unbounded,
                    Direction::Forward,
                );
                return;
            }
        }
        if let (Some(extractor), Some(prefix), Some((key, _))) =
            (&self.prefix_extractor, &self.prefix, &self.current)
        {
            if extractor.prefix(key) != Some(prefix.as_slice()) {
                self.current = None;
            }
        }
    }

    fn remember_prefix(&mut self, key: &[u8]) {
        self.prefix = self
            .prefix_extractor
            .as_ref()
            .and_then(|extractor| extractor.prefix(key))
            .map(<[u8]>::to_vec);
    }

    fn seek_to_first(&mut self) {
        // With a lower bound, RocksDB's DBIter seeks to it, so prefix_same_as_start keeps to
        // the bound's prefix.
        if let Some(lower) = self.lower.clone() {
            return self.seek(&lower);
        }
        self.prefix = None;
        self.start(Bound::Unbounded, Bound::Unbounded, Direction::Forward);
    }

    fn seek_to_last(&mut self) {
        self.prefix = None;
        self.start(Bound::Unbounded, Bound::Unbounded, Direction::Backward);
    }

    fn seek(&mut self, key: &[u8]) {
        self.remember_prefix(key);
        self.start(
            Bound::Included(key.to_vec()),
            Bound::Unbounded,
            Direction::Forward,
        );
    }

    fn seek_for_prev(&mut self, key: &[u8]) {
        self.remember_prefix(key);
        self.start(
            Bound::Unbounded,
            Bound::Included(key.to_vec()),
            Direction::Backward,
        );
    }

    fn next(&mut self) {
        match (&self.cursor, &self.current) {
            (Some((_, Direction::Forward)), Some(_)) => self.step(),
            (_, Some((key, _))) => {
                let from = Bound::Excluded(key.to_vec());
                self.start(from, Bound::Unbounded, Direction::Forward);
            }
            (_, None) => {}
        }
    }

    fn prev(&mut self) {
        match (&self.cursor, &self.current) {
            (Some((_, Direction::Backward)), Some(_)) => self.step(),
            (_, Some((key, _))) => {
                let to = Bound::Excluded(key.to_vec());
                self.start(Bound::Unbounded, to, Direction::Backward);
            }
            (_, None) => {}
        }
    }
}

/// The narrower of a seek's bound and the read options' bound: the greater lower bound
/// (`lower`) or the smaller upper bound.
fn tighter(seek: Bound<Vec<u8>>, option: Option<Bound<Vec<u8>>>, lower: bool) -> Bound<Vec<u8>> {
    let Some(option) = option else {
        return seek;
    };
    let key = |bound: &Bound<Vec<u8>>| match bound {
        Bound::Included(key) | Bound::Excluded(key) => Some(key.clone()),
        Bound::Unbounded => None,
    };
    match (key(&seek), key(&option)) {
        (None, _) => option,
        (Some(seek_key), Some(option_key)) => {
            let seek_is_tighter = if lower {
                seek_key > option_key
            } else {
                seek_key < option_key
            };
            if seek_is_tighter || (seek_key == option_key && matches!(seek, Bound::Excluded(_))) {
                seek
            } else {
                option
            }
        }
        (Some(_), None) => seek,
    }
}

pub(crate) fn create(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    cf: *mut rocksdb_column_family_handle_t,
) -> Result<*mut rocksdb_iterator_t> {
    let db = handle(db, "db")?;
    let options = handle(options, "read options")?;
    let cf = db.column_family(cf)?.clone();
    Ok(into_handle(rocksdb_iterator_t::new(db, cf, options)?))
}

/// A new iterator, not yet positioned; NULL if the database is closed (c.h has no error to
/// report here).
#[no_mangle]
pub extern "C" fn rocksdb_create_iterator(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
) -> *mut rocksdb_iterator_t {
    quiet(std::ptr::null_mut(), || {
        create(db, options, std::ptr::null_mut()).unwrap_or(std::ptr::null_mut())
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_create_iterator_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
) -> *mut rocksdb_iterator_t {
    quiet(std::ptr::null_mut(), || {
        create(db, options, column_family).unwrap_or(std::ptr::null_mut())
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_destroy(iterator: *mut rocksdb_iterator_t) {
    quiet((), || drop_handle(iterator))
}

/// Runs a move of the iterator.
fn moving(iterator: *mut rocksdb_iterator_t, body: impl FnOnce(&mut rocksdb_iterator_t)) {
    quiet((), || {
        if let Ok(iterator) = handle_mut(iterator, "iterator") {
            body(iterator)
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_valid(iterator: *const rocksdb_iterator_t) -> libc::c_uchar {
    quiet(0, || {
        handle(iterator, "iterator").map_or(0, |iterator| {
            (iterator.current.is_some() && iterator.status.is_none()) as libc::c_uchar
        })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_seek_to_first(iterator: *mut rocksdb_iterator_t) {
    moving(iterator, rocksdb_iterator_t::seek_to_first)
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_seek_to_last(iterator: *mut rocksdb_iterator_t) {
    moving(iterator, rocksdb_iterator_t::seek_to_last)
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_seek(
    iterator: *mut rocksdb_iterator_t,
    k: *const c_char,
    klen: usize,
) {
    moving(iterator, |iterator| match bytes(k, klen) {
        Ok(key) => iterator.seek(key),
        Err(status) => iterator.status = Some(status),
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_seek_for_prev(
    iterator: *mut rocksdb_iterator_t,
    k: *const c_char,
    klen: usize,
) {
    moving(iterator, |iterator| match bytes(k, klen) {
        Ok(key) => iterator.seek_for_prev(key),
        Err(status) => iterator.status = Some(status),
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_next(iterator: *mut rocksdb_iterator_t) {
    moving(iterator, rocksdb_iterator_t::next)
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_prev(iterator: *mut rocksdb_iterator_t) {
    moving(iterator, rocksdb_iterator_t::prev)
}

/// A slice of the current item (`part` picks the key or the value), valid until the iterator
/// next moves; its length goes to `*len`.
fn current_part(
    iterator: *const rocksdb_iterator_t,
    len: *mut usize,
    part: fn(&(Bytes, Bytes)) -> &Bytes,
) -> *const c_char {
    quiet(std::ptr::null(), || {
        let current = handle(iterator, "iterator")
            .ok()
            .and_then(|iterator| iterator.current.as_ref());
        let data = current.map_or(&[][..], |item| part(item));
        set_out(len, data.len());
        data.as_ptr().cast()
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_key(
    iterator: *const rocksdb_iterator_t,
    klen: *mut usize,
) -> *const c_char {
    current_part(iterator, klen, |(key, _)| key)
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_value(
    iterator: *const rocksdb_iterator_t,
    vlen: *mut usize,
) -> *const c_char {
    current_part(iterator, vlen, |(_, value)| value)
}

#[no_mangle]
pub extern "C" fn rocksdb_iter_get_error(
    iterator: *const rocksdb_iterator_t,
    errptr: *mut *mut c_char,
) {
    quiet((), || {
        if let Some(status) = handle(iterator, "iterator")
            .ok()
            .and_then(|iterator| iterator.status.as_ref())
        {
            report(errptr, status);
        }
    })
}

/// Moves the iterator to a snapshot of now (unless its read options named a snapshot); it is
/// left unpositioned, as RocksDB leaves it.
#[no_mangle]
pub extern "C" fn rocksdb_iter_refresh(
    iterator: *const rocksdb_iterator_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let iterator = handle_mut(iterator.cast_mut(), "iterator")?;
        if iterator.own_snapshot {
            iterator.snapshot = Arc::new(iterator.database.engine.snapshot()?);
        }
        iterator.cursor = None;
        iterator.current = None;
        iterator.status = None;
        Ok(())
    })
}
