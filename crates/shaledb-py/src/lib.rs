//! ShaleDB for Python. A thin layer: it converts types, maps the engine's error kinds to a
//! `shaledb.Error` hierarchy, and releases the GIL around every engine call so Python threads
//! get parallel I/O.

use engine::{Bytes, ErrorKind};
use parking_lot::Mutex;
use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple, PyType};
use std::ops::Bound as RangeBound;
use std::sync::Arc;

create_exception!(
    shaledb,
    Error,
    PyException,
    "Base class of every ShaleDB error."
);
create_exception!(
    shaledb,
    InvalidArgument,
    Error,
    "A malformed argument (empty key, bad option)."
);
create_exception!(
    shaledb,
    LimitExceeded,
    Error,
    "A size limit was exceeded (key, value, batch)."
);
create_exception!(
    shaledb,
    Corruption,
    Error,
    "Data on media failed validation."
);
create_exception!(
    shaledb,
    IoError,
    Error,
    "The operating system reported an I/O error."
);
create_exception!(shaledb, NoSpace, Error, "The device is full.");
create_exception!(shaledb, Locked, Error, "Another process has the KVDB open.");
create_exception!(
    shaledb,
    Poisoned,
    Error,
    "An earlier failure stopped the KVDB; reopen it."
);
create_exception!(
    shaledb,
    Closed,
    Error,
    "The KVDB (or snapshot, transaction) is closed."
);
create_exception!(shaledb, NotFound, Error, "The KVS does not exist.");
create_exception!(
    shaledb,
    Conflict,
    Error,
    "The transaction lost to a concurrent commit; nothing was written."
);

fn convert(error: engine::Error) -> PyErr {
    let message = error.to_string();
    match error.kind() {
        ErrorKind::InvalidArgument => InvalidArgument::new_err(message),
        ErrorKind::LimitExceeded => LimitExceeded::new_err(message),
        ErrorKind::Corruption => Corruption::new_err(message),
        ErrorKind::Io => IoError::new_err(message),
        ErrorKind::NoSpace => NoSpace::new_err(message),
        ErrorKind::Locked => Locked::new_err(message),
        ErrorKind::Poisoned => Poisoned::new_err(message),
        ErrorKind::Closed => Closed::new_err(message),
        ErrorKind::NotFound => NotFound::new_err(message),
        ErrorKind::Conflict => Conflict::new_err(message),
        _ => Error::new_err(message),
    }
}

/// Runs `work` with the GIL released and converts its error.
fn unlocked<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> engine::Result<T> + Send,
) -> PyResult<T> {
    py.allow_threads(work).map_err(convert)
}

/// Bytes of a bytes-like object; `str` only with an encoding set at open.
fn to_bytes(object: &Bound<'_, PyAny>, encoding: Option<&str>) -> PyResult<Vec<u8>> {
    if let Ok(bytes) = object.downcast::<PyBytes>() {
        return Ok(bytes.as_bytes().to_vec());
    }
    if object.is_instance_of::<PyString>() {
        return match encoding {
            Some(encoding) => Ok(object
                .call_method1("encode", (encoding,))?
                .downcast::<PyBytes>()?
                .as_bytes()
                .to_vec()),
            None => Err(PyTypeError::new_err(
                "keys and values must be bytes-like (bytes, bytearray, memoryview), not str; \
                 open the database with encoding='utf-8' to pass str",
            )),
        };
    }
    match PyBuffer::<u8>::get(object) {
        Ok(buffer) => buffer.to_vec(object.py()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "expected a bytes-like object (bytes, bytearray, memoryview), not {}",
            object.get_type().name()?
        ))),
    }
}

fn py_bytes<'py>(py: Python<'py>, value: &Bytes) -> Bound<'py, PyBytes> {
    PyBytes::new(py, value)
}

/// A KVDB. Open it with `shaledb.open(path, **options)`; use it as a context manager to close it.
#[pyclass(module = "shaledb", frozen)]
struct Db {
    db: Mutex<Option<Arc<engine::Db>>>,
    encoding: Option<String>,
}

impl Db {
    fn get(&self) -> PyResult<Arc<engine::Db>> {
        self.db
            .lock()
            .clone()
            .ok_or_else(|| Closed::new_err("the KVDB is closed"))
    }
}

/// Opens (creating if needed) the KVDB in directory `path`.
///
/// Options: durability ("interval" (default), "sync", "none" or "interval:MS"), cache_mb (int),
/// segment_mb (int), cleaner (bool), encoding (str keys and values are encoded with it; default
/// None: bytes-like only), capacity_dir and staging_dir (media classes, fixed at creation),
/// staging_mb (the staging budget).
#[pyfunction]
#[expect(
    clippy::too_many_arguments,
    reason = "one parameter per keyword argument of shaledb.open"
)]
#[pyo3(signature = (path, durability=None, cache_mb=None, segment_mb=None, cleaner=None, encoding=None, capacity_dir=None, staging_dir=None, staging_mb=None))]
fn open(
    py: Python<'_>,
    path: std::path::PathBuf,
    durability: Option<&str>,
    cache_mb: Option<u64>,
    segment_mb: Option<u64>,
    cleaner: Option<bool>,
    encoding: Option<String>,
    capacity_dir: Option<std::path::PathBuf>,
    staging_dir: Option<std::path::PathBuf>,
    staging_mb: Option<u64>,
) -> PyResult<Db> {
    let mut options = engine::Options::default();
    if let Some(durability) = durability {
        options.durability = durability.parse().map_err(convert)?;
    }
    if let Some(cache_mb) = cache_mb {
        options.cache_bytes = cache_mb << 20;
    }
    if let Some(segment_mb) = segment_mb {
        options.segment_bytes = segment_mb << 20;
    }
    if let Some(cleaner) = cleaner {
        options.cleaner = cleaner;
    }
    options.capacity_dir = capacity_dir;
    options.staging_dir = staging_dir;
    if let Some(staging_mb) = staging_mb {
        options.staging_bytes_max = staging_mb << 20;
    }
    let db = unlocked(py, || engine::Db::open(&path, options))?;
    Ok(Db {
        db: Mutex::new(Some(Arc::new(db))),
        encoding,
    })
}

#[pymethods]
impl Db {
    /// The KVS `name`, created on first use with `prefix_len`, `media_policy`
    /// ("capacity_only" (default), "staging_only" or "staging_max_capacity") and `compression`
    /// ("none" (default), or "lz4": each value stored compressed when that makes it smaller).
    /// An existing KVS keeps the options it was created with.
    #[pyo3(signature = (name, prefix_len=0, media_policy=None, compression=None))]
    fn kvs(
        &self,
        py: Python<'_>,
        name: &str,
        prefix_len: usize,
        media_policy: Option<&str>,
        compression: Option<&str>,
    ) -> PyResult<Kvs> {
        let db = self.get()?;
        let media_policy = media_policy
            .map(str::parse)
            .transpose()
            .map_err(convert)?
            .unwrap_or_default();
        let compression = compression
            .map(str::parse)
            .transpose()
            .map_err(convert)?
            .unwrap_or_default();
        let options = engine::KvsOptions {
            prefix_len,
            media_policy,
            compression,
            ..engine::KvsOptions::default()
        };
        let kvs = unlocked(py, || db.kvs_with_options(name, options))?;
        Ok(Kvs {
            kvs,
            encoding: self.encoding.clone(),
        })
    }

    /// `db["users"]` is `db.kvs("users")`.
    fn __getitem__(&self, py: Python<'_>, name: &str) -> PyResult<Kvs> {
        self.kvs(py, name, 0, None, None)
    }

    /// Names of all KVSs.
    fn kvs_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let db = self.get()?;
        unlocked(py, || db.list_kvs())
    }

    /// Drops the KVS `name` and all its data.
    fn drop_kvs(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let db = self.get()?;
        unlocked(py, || db.drop_kvs(name))
    }

    /// A write batch: `with db.batch() as b: b.put(kvs, k, v)` writes it atomically on exit.
    fn batch(&self) -> PyResult<Batch> {
        Ok(Batch {
            db: self.get()?,
            batch: Mutex::new(Some(engine::WriteBatch::new())),
            encoding: self.encoding.clone(),
        })
    }

    /// A consistent view: `with db.snapshot() as s: s.get(kvs, k)`.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let db = self.get()?;
        let snapshot = unlocked(py, || db.snapshot())?;
        Ok(Snapshot {
            snapshot: Mutex::new(Some(snapshot)),
            encoding: self.encoding.clone(),
        })
    }

    /// A transaction (snapshot isolation). Commit with `commit()`, or use `with`: it commits on
    /// success and aborts on an exception. A lost conflict raises `shaledb.Conflict`.
    #[pyo3(signature = (validate_reads=false))]
    fn transaction(&self, py: Python<'_>, validate_reads: bool) -> PyResult<Transaction> {
        let db = self.get()?;
        let options = engine::TxnOptions {
            validate_reads,
            ..engine::TxnOptions::default()
        };
        let txn = unlocked(py, || db.begin_with(options))?;
        Ok(Transaction {
            txn: Mutex::new(Some(txn)),
            encoding: self.encoding.clone(),
        })
    }

    /// Makes every acknowledged write durable (fdatasync).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.get()?;
        unlocked(py, || db.sync())
    }

    /// Runs the cleaner now; returns the number of segments freed.
    fn compact(&self, py: Python<'_>) -> PyResult<u64> {
        let db = self.get()?;
        unlocked(py, || db.compact())
    }

    /// The engine's counters, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.get()?.stats();
        let text =
            serde_json::to_string(&stats).map_err(|error| Error::new_err(error.to_string()))?;
        py.import("json")?.call_method1("loads", (text,))
    }

    /// Flushes, syncs and closes the KVDB. Further use raises `shaledb.Closed`.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(db) = self.db.lock().take() else {
            return Ok(());
        };
        match Arc::try_unwrap(db) {
            Ok(db) => unlocked(py, || db.close()),
            // Another thread is inside a call; the KVDB closes when that call returns.
            Err(shared) => {
                drop(shared);
                Ok(())
            }
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

/// Which part of each record an iterator yields.
#[derive(Clone, Copy)]
enum Yield {
    Items,
    Keys,
    Values,
}

/// An ordered iterator over a KVS (a consistent view taken when it was created).
#[pyclass(module = "shaledb")]
struct Items {
    iter: Mutex<engine::Iter>,
    reverse: bool,
    what: Yield,
}

#[pymethods]
impl Items {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let reverse = self.reverse;
        let next = py.allow_threads(|| {
            let mut iter = self.iter.lock();
            if reverse {
                iter.next_back()
            } else {
                iter.next()
            }
        });
        let Some(item) = next else {
            return Ok(None);
        };
        let (key, value) = item.map_err(convert)?;
        Ok(Some(match self.what {
            Yield::Items => (py_bytes(py, &key), py_bytes(py, &value))
                .into_pyobject(py)?
                .into_any()
                .unbind(),
            Yield::Keys => py_bytes(py, &key).into_any().unbind(),
            Yield::Values => py_bytes(py, &value).into_any().unbind(),
        }))
    }
}

/// The keys an iterator covers.
enum Selection {
    Prefix(Vec<u8>),
    Range(RangeBound<Vec<u8>>, RangeBound<Vec<u8>>),
}

/// The selection given by `prefix` or `start`/`stop` (bytes-like).
fn bounds(
    prefix: Option<&Bound<'_, PyAny>>,
    start: Option<&Bound<'_, PyAny>>,
    stop: Option<&Bound<'_, PyAny>>,
    encoding: Option<&str>,
) -> PyResult<Selection> {
    if let Some(prefix) = prefix {
        if start.is_some() || stop.is_some() {
            return Err(PyValueError::new_err(
                "give either prefix or start/stop, not both",
            ));
        }
        return Ok(Selection::Prefix(to_bytes(prefix, encoding)?));
    }
    let lower = match start {
        Some(start) => RangeBound::Included(to_bytes(start, encoding)?),
        None => RangeBound::Unbounded,
    };
    let upper = match stop {
        Some(stop) => RangeBound::Excluded(to_bytes(stop, encoding)?),
        None => RangeBound::Unbounded,
    };
    Ok(Selection::Range(lower, upper))
}

/// A KVS: a dict-like mapping of bytes to bytes, kept in key order.
#[pyclass(module = "shaledb", frozen)]
struct Kvs {
    kvs: engine::Kvs,
    encoding: Option<String>,
}

impl Kvs {
    fn key(&self, key: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        to_bytes(key, self.encoding.as_deref())
    }

    fn cursor(
        &self,
        snapshot: Option<&engine::Snapshot>,
        prefix: Option<&Bound<'_, PyAny>>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        what: Yield,
    ) -> PyResult<Items> {
        let iter = match (
            bounds(prefix, start, stop, self.encoding.as_deref())?,
            snapshot,
        ) {
            (Selection::Prefix(prefix), None) => self.kvs.prefix(prefix),
            (Selection::Prefix(prefix), Some(snapshot)) => snapshot.prefix(&self.kvs, prefix),
            (Selection::Range(lower, upper), None) => self.kvs.range((lower, upper)),
            (Selection::Range(lower, upper), Some(snapshot)) => {
                snapshot.range(&self.kvs, (lower, upper))
            }
        };
        Ok(Items {
            iter: Mutex::new(iter),
            reverse,
            what,
        })
    }
}

#[pymethods]
impl Kvs {
    /// The KVS's name.
    #[getter]
    fn name(&self) -> String {
        self.kvs.name().to_string()
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (key, value) = (self.key(key)?, self.key(value)?);
        unlocked(py, || self.kvs.put(key, value))
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.key(key)?;
        match unlocked(py, || self.kvs.get(&bytes))? {
            Some(value) => Ok(py_bytes(py, &value)),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// Deletes `key`; raises KeyError if it has no value (as a dict does).
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = self.key(key)?;
        if !unlocked(py, || self.kvs.contains_key(&bytes))? {
            return Err(PyKeyError::new_err(key.clone().unbind()));
        }
        unlocked(py, || self.kvs.delete(&bytes))
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = self.key(key)?;
        unlocked(py, || self.kvs.contains_key(key))
    }

    /// Number of keys (from the DRAM index: cheap, no device reads).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        unlocked(py, || self.kvs.len())
    }

    fn __iter__(&self) -> PyResult<Items> {
        self.cursor(None, None, None, None, false, Yield::Keys)
    }

    /// Sets `key` to `value`.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.__setitem__(py, key, value)
    }

    /// `key`'s value, or `default`.
    #[pyo3(signature = (key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let key = self.key(key)?;
        Ok(match unlocked(py, || self.kvs.get(key))? {
            Some(value) => py_bytes(py, &value).into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// Values of `keys` (None where missing), read at one consistent moment.
    fn get_many(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Vec<PyObject>> {
        let keys: Vec<Vec<u8>> = keys
            .try_iter()?
            .map(|key| self.key(&key?))
            .collect::<PyResult<_>>()?;
        let values = unlocked(py, || self.kvs.multi_get(&keys))?;
        Ok(values
            .into_iter()
            .map(|value| {
                value.map_or_else(
                    || py.None(),
                    |value| py_bytes(py, &value).into_any().unbind(),
                )
            })
            .collect())
    }

    /// Deletes `key` (no error if it has no value).
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = self.key(key)?;
        unlocked(py, || self.kvs.delete(key))
    }

    /// Deletes every key starting with `prefix`.
    fn prefix_delete(&self, py: Python<'_>, prefix: &Bound<'_, PyAny>) -> PyResult<()> {
        let prefix = self.key(prefix)?;
        unlocked(py, || self.kvs.prefix_delete(prefix))
    }

    /// (key, value) pairs in key order: all, those starting with `prefix`, or those in
    /// [start, stop); `reverse=True` from the last.
    #[pyo3(signature = (prefix=None, start=None, stop=None, reverse=false))]
    fn items(
        &self,
        prefix: Option<&Bound<'_, PyAny>>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Items> {
        self.cursor(None, prefix, start, stop, reverse, Yield::Items)
    }

    /// Keys in order; same arguments as `items`.
    #[pyo3(signature = (prefix=None, start=None, stop=None, reverse=false))]
    fn keys(
        &self,
        prefix: Option<&Bound<'_, PyAny>>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Items> {
        self.cursor(None, prefix, start, stop, reverse, Yield::Keys)
    }

    /// Values in key order; same arguments as `items`.
    #[pyo3(signature = (prefix=None, start=None, stop=None, reverse=false))]
    fn values(
        &self,
        prefix: Option<&Bound<'_, PyAny>>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Items> {
        self.cursor(None, prefix, start, stop, reverse, Yield::Values)
    }

    fn __repr__(&self) -> String {
        format!("<shaledb.Kvs {:?}>", self.kvs.name())
    }
}

/// An atomic write batch; written by `write()` or on leaving a `with` block without an error.
#[pyclass(module = "shaledb", frozen)]
struct Batch {
    db: Arc<engine::Db>,
    batch: Mutex<Option<engine::WriteBatch>>,
    encoding: Option<String>,
}

impl Batch {
    fn with_batch(&self, add: impl FnOnce(&mut engine::WriteBatch)) -> PyResult<()> {
        let mut slot = self.batch.lock();
        let batch = slot
            .as_mut()
            .ok_or_else(|| Closed::new_err("the batch was already written or discarded"))?;
        add(batch);
        Ok(())
    }
}

#[pymethods]
impl Batch {
    fn put(&self, kvs: &Kvs, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (key, value) = (
            to_bytes(key, self.encoding.as_deref())?,
            to_bytes(value, self.encoding.as_deref())?,
        );
        self.with_batch(|batch| batch.put(&kvs.kvs, key, value))
    }

    fn delete(&self, kvs: &Kvs, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = to_bytes(key, self.encoding.as_deref())?;
        self.with_batch(|batch| batch.delete(&kvs.kvs, key))
    }

    fn prefix_delete(&self, kvs: &Kvs, prefix: &Bound<'_, PyAny>) -> PyResult<()> {
        let prefix = to_bytes(prefix, self.encoding.as_deref())?;
        self.with_batch(|batch| batch.prefix_delete(&kvs.kvs, prefix))
    }

    /// Applies every write atomically (all or none, also across a crash).
    fn write(&self, py: Python<'_>) -> PyResult<()> {
        let batch = self
            .batch
            .lock()
            .take()
            .ok_or_else(|| Closed::new_err("the batch was already written or discarded"))?;
        let db = self.db.clone();
        unlocked(py, || db.write(batch))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type, _exc_value, _traceback))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        _exc_value: Option<PyObject>,
        _traceback: Option<PyObject>,
    ) -> PyResult<bool> {
        if exc_type.is_none() && self.batch.lock().is_some() {
            self.write(py)?;
        } else {
            self.batch.lock().take();
        }
        Ok(false)
    }
}

/// A consistent read-only view; release it with `close()` or a `with` block.
#[pyclass(module = "shaledb", frozen)]
struct Snapshot {
    snapshot: Mutex<Option<engine::Snapshot>>,
    encoding: Option<String>,
}

#[pymethods]
impl Snapshot {
    /// `key`'s value in `kvs` as of the snapshot, or `default`.
    #[pyo3(signature = (kvs, key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        kvs: &Kvs,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let key = to_bytes(key, self.encoding.as_deref())?;
        let found = py.allow_threads(|| {
            let slot = self.snapshot.lock();
            slot.as_ref().map(|snapshot| snapshot.get(&kvs.kvs, key))
        });
        match found {
            None => Err(Closed::new_err("the snapshot is closed")),
            Some(found) => Ok(match found.map_err(convert)? {
                Some(value) => py_bytes(py, &value).into_any().unbind(),
                None => default.unwrap_or_else(|| py.None()),
            }),
        }
    }

    /// (key, value) pairs of `kvs` as of the snapshot; arguments as `Kvs.items`.
    #[pyo3(signature = (kvs, prefix=None, start=None, stop=None, reverse=false))]
    fn items(
        &self,
        kvs: &Kvs,
        prefix: Option<&Bound<'_, PyAny>>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Items> {
        let slot = self.snapshot.lock();
        let snapshot = slot
            .as_ref()
            .ok_or_else(|| Closed::new_err("the snapshot is closed"))?;
        kvs.cursor(Some(snapshot), prefix, start, stop, reverse, Yield::Items)
    }

    /// Releases the snapshot (old versions it kept can be reclaimed).
    fn close(&self) {
        self.snapshot.lock().take();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }
}

/// A transaction. Reads see its snapshot plus its own writes; `commit()` applies the writes
/// atomically or raises `shaledb.Conflict`, writing nothing.
#[pyclass(module = "shaledb", frozen)]
struct Transaction {
    txn: Mutex<Option<engine::Transaction>>,
    encoding: Option<String>,
}

impl Transaction {
    fn with_txn<T: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut engine::Transaction) -> engine::Result<T> + Send,
    ) -> PyResult<T> {
        let outcome = py.allow_threads(|| self.txn.lock().as_mut().map(work));
        outcome
            .ok_or_else(|| Closed::new_err("the transaction is finished"))?
            .map_err(convert)
    }
}

#[pymethods]
impl Transaction {
    fn put(
        &self,
        py: Python<'_>,
        kvs: &Kvs,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (key, value) = (
            to_bytes(key, self.encoding.as_deref())?,
            to_bytes(value, self.encoding.as_deref())?,
        );
        self.with_txn(py, |txn| txn.put(&kvs.kvs, key, value))
    }

    fn delete(&self, py: Python<'_>, kvs: &Kvs, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = to_bytes(key, self.encoding.as_deref())?;
        self.with_txn(py, |txn| txn.delete(&kvs.kvs, key))
    }

    /// `key`'s value as the transaction sees it, or `default`.
    #[pyo3(signature = (kvs, key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        kvs: &Kvs,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let key = to_bytes(key, self.encoding.as_deref())?;
        Ok(match self.with_txn(py, |txn| txn.get(&kvs.kvs, key))? {
            Some(value) => py_bytes(py, &value).into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// Commits atomically; raises `shaledb.Conflict` (writing nothing) if it lost a conflict.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        let txn = self
            .txn
            .lock()
            .take()
            .ok_or_else(|| Closed::new_err("the transaction is finished"))?;
        unlocked(py, || txn.commit())
    }

    /// Discards the transaction's writes.
    fn abort(&self) {
        self.txn.lock().take();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type, _exc_value, _traceback))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        _exc_value: Option<PyObject>,
        _traceback: Option<PyObject>,
    ) -> PyResult<bool> {
        if exc_type.is_none() && self.txn.lock().is_some() {
            self.commit(py)?;
        } else {
            self.abort();
        }
        Ok(false)
    }
}

/// ShaleDB: a key-value storage engine for flash. Start with `shaledb.open(path)`.
#[pymodule]
fn shaledb(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_class::<Db>()?;
    m.add_class::<Kvs>()?;
    m.add_class::<Items>()?;
    m.add_class::<Batch>()?;
    m.add_class::<Snapshot>()?;
    m.add_class::<Transaction>()?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("LimitExceeded", py.get_type::<LimitExceeded>())?;
    m.add("Corruption", py.get_type::<Corruption>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("NoSpace", py.get_type::<NoSpace>())?;
    m.add("Locked", py.get_type::<Locked>())?;
    m.add("Poisoned", py.get_type::<Poisoned>())?;
    m.add("Closed", py.get_type::<Closed>())?;
    m.add("NotFound", py.get_type::<NotFound>())?;
    m.add("Conflict", py.get_type::<Conflict>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
