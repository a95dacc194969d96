//! ShaleDB's C API. A thin layer: it converts types, turns every error into a status code plus a
//! thread-local message, and catches every panic before it can cross the FFI boundary.
//!
//! `unsafe` here is what any C API needs: reading caller pointers. Each use states the contract
//! the header documents for that argument.
#![allow(non_camel_case_types)]

use engine::{
    Bytes, Db, ErrorKind, Iter, Kvs, Options, Snapshot, Transaction, TxnOptions, WriteBatch,
};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Success.
pub const SHALEDB_OK: c_int = 0;
/// The key has no value.
pub const SHALEDB_NOT_FOUND: c_int = 1;
/// A cursor has no more items.
pub const SHALEDB_END: c_int = 2;
/// The caller's buffer is too small; the length out-parameter holds the size needed.
pub const SHALEDB_BUFFER_TOO_SMALL: c_int = 3;
/// A null pointer, bad length, bad option or malformed argument.
pub const SHALEDB_INVALID_ARGUMENT: c_int = 4;
/// A size limit was exceeded (key, value, batch, write set).
pub const SHALEDB_LIMIT_EXCEEDED: c_int = 5;
/// Data on media failed validation.
pub const SHALEDB_CORRUPTION: c_int = 6;
/// The operating system reported an I/O error.
pub const SHALEDB_IO: c_int = 7;
/// The device is full.
pub const SHALEDB_NO_SPACE: c_int = 8;
/// Another process has the KVDB open.
pub const SHALEDB_LOCKED: c_int = 9;
/// An earlier failure stopped the KVDB; reopen it.
pub const SHALEDB_POISONED: c_int = 10;
/// The KVDB is closed.
pub const SHALEDB_CLOSED: c_int = 11;
/// The KVS does not exist (it was dropped).
pub const SHALEDB_KVS_NOT_FOUND: c_int = 12;
/// The transaction lost to a concurrent commit and wrote nothing; retry it.
pub const SHALEDB_CONFLICT: c_int = 13;
/// An internal error (a caught panic); the message says what.
pub const SHALEDB_INTERNAL: c_int = 14;

/// A cursor flag: iterate from the last key to the first.
pub const SHALEDB_CURSOR_REVERSE: c_int = 1;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

struct Failure {
    status: c_int,
    message: String,
}

impl From<engine::Error> for Failure {
    fn from(error: engine::Error) -> Self {
        let status = match error.kind() {
            ErrorKind::InvalidArgument => SHALEDB_INVALID_ARGUMENT,
            ErrorKind::LimitExceeded => SHALEDB_LIMIT_EXCEEDED,
            ErrorKind::Corruption => SHALEDB_CORRUPTION,
            ErrorKind::Io => SHALEDB_IO,
            ErrorKind::NoSpace => SHALEDB_NO_SPACE,
            ErrorKind::Locked => SHALEDB_LOCKED,
            ErrorKind::Poisoned => SHALEDB_POISONED,
            ErrorKind::Closed => SHALEDB_CLOSED,
            ErrorKind::NotFound => SHALEDB_KVS_NOT_FOUND,
            ErrorKind::Conflict => SHALEDB_CONFLICT,
            _ => SHALEDB_INTERNAL,
        };
        Failure {
            status,
            message: error.to_string(),
        }
    }
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure {
        status: SHALEDB_INVALID_ARGUMENT,
        message: message.into(),
    }
}

fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|slot| *slot.borrow_mut() = text);
}

/// Runs `body`, converting errors and panics into a status code and the thread's last error.
fn guard(body: impl FnOnce() -> Result<c_int, Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(status)) => status,
        Ok(Err(failure)) => {
            set_last_error(&failure.message);
            failure.status
        }
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("internal error: {detail}"));
            SHALEDB_INTERNAL
        }
    }
}

/// The message of this thread's last error ("" if none). Valid until this thread's next
/// ShaleDB call; never free it.
#[no_mangle]
pub extern "C" fn shaledb_last_error() -> *const c_char {
    LAST_ERROR.with(|slot| slot.borrow().as_ptr())
}

fn handle<'a, T>(pointer: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: the header requires handles to be pointers returned by this library and not yet
    // freed, used by one thread at a time; null is rejected here.
    unsafe { pointer.as_mut() }.ok_or_else(|| invalid(format!("{what} is NULL")))
}

fn bytes<'a>(pointer: *const u8, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if pointer.is_null() {
        return Err(invalid(format!("{what} is NULL with length {len}")));
    }
    if len > isize::MAX as usize {
        return Err(invalid(format!("{what} length {len} is out of range")));
    }
    // SAFETY: the header requires `pointer` to point at `len` readable bytes for the call.
    Ok(unsafe { std::slice::from_raw_parts(pointer, len) })
}

fn text<'a>(pointer: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if pointer.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: the header requires a NUL-terminated string, readable for the call.
    unsafe { CStr::from_ptr(pointer) }
        .to_str()
        .map_err(|_| invalid(format!("{what} is not UTF-8")))
}

fn out<'a, T>(pointer: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: the header requires out-parameters to point at writable storage of their type.
    unsafe { pointer.as_mut() }.ok_or_else(|| invalid(format!("{what} is NULL")))
}

fn boxed<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

fn free_handle<T>(pointer: *mut T) -> Option<Box<T>> {
    // SAFETY: the header requires a handle from this library, freed at most once; null is a no-op.
    (!pointer.is_null()).then(|| unsafe { Box::from_raw(pointer) })
}

/// Copies `bytes` into a new malloc'd buffer; the caller frees it with shaledb_free.
fn malloc_copy(bytes: &[u8], nul_terminate: bool) -> Result<*mut u8, Failure> {
    let size = bytes.len() + usize::from(nul_terminate);
    // SAFETY: malloc of at least one byte; the result is checked for null before use.
    let buffer = unsafe { libc::malloc(size.max(1)) } as *mut u8;
    if buffer.is_null() {
        return Err(Failure {
            status: SHALEDB_NO_SPACE,
            message: format!("out of memory allocating {size} bytes"),
        });
    }
    // SAFETY: `buffer` has room for `size` bytes and does not overlap `bytes`.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buffer, bytes.len());
        if nul_terminate {
            *buffer.add(bytes.len()) = 0;
        }
    }
    Ok(buffer)
}

/// Frees memory the library allocated for the caller (shaledb_get_alloc, shaledb_stats_json,
/// shaledb_kvs_names). NULL is a no-op.
///
/// # Safety
/// `pointer` must be NULL or a pointer this library returned for the caller to free, not yet
/// freed.
#[no_mangle]
pub unsafe extern "C" fn shaledb_free(pointer: *mut c_void) {
    // SAFETY: the header requires a pointer this library returned through malloc, or NULL.
    unsafe { libc::free(pointer) }
}

/// An open KVDB.
pub struct shaledb_db {
    db: Option<Db>,
}

/// A handle on one KVS.
pub struct shaledb_kvs {
    kvs: Kvs,
}

/// An atomic write batch.
pub struct shaledb_batch {
    batch: WriteBatch,
}

/// A consistent view of the KVDB.
pub struct shaledb_snapshot {
    snapshot: Snapshot,
}

/// An ordered cursor.
pub struct shaledb_cursor {
    iter: Iter,
    reverse: bool,
    /// The item handed out by shaledb_cursor_next (kept alive until the next call), or the
    /// item held back by shaledb_cursor_next_copy when the caller's buffers were too small.
    current: Option<(Bytes, Bytes)>,
    held_back: bool,
}

/// A transaction.
pub struct shaledb_txn {
    txn: Transaction,
}

fn db_of<'a>(db: *mut shaledb_db) -> Result<&'a Db, Failure> {
    let handle: &'a mut shaledb_db = handle(db, "db")?;
    handle.db.as_ref().ok_or_else(|| Failure {
        status: SHALEDB_CLOSED,
        message: "the KVDB is closed".into(),
    })
}

/// Calls `set(key, value)` for each `key=value` pair of `spec` (separated by `;` or `,`).
fn for_each_option(
    spec: &str,
    mut set: impl FnMut(&str, &str) -> Result<(), Failure>,
) -> Result<(), Failure> {
    for item in spec
        .split([';', ','])
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| invalid(format!("option {item:?} is not key=value")))?;
        set(key.trim(), value.trim())?;
    }
    Ok(())
}

fn number(key: &str, value: &str) -> Result<u64, Failure> {
    value
        .parse::<u64>()
        .map_err(|_| invalid(format!("option {key} needs a number, not {value:?}")))
}

fn parse_options(spec: &str) -> Result<Options, Failure> {
    let mut options = Options::default();
    for_each_option(spec, |key, value| {
        match key {
            "durability" => options.durability = value.parse().map_err(Failure::from)?,
            "cache_mb" => options.cache_bytes = number(key, value)? << 20,
            "cache_bytes" => options.cache_bytes = number(key, value)?,
            "segment_mb" => options.segment_bytes = number(key, value)? << 20,
            "cleaner" => options.cleaner = number(key, value)? != 0,
            "direct_io" => options.direct_io = number(key, value)? != 0,
            "capacity_dir" => options.capacity_dir = Some(value.into()),
            "staging_dir" => options.staging_dir = Some(value.into()),
            "staging_mb" => options.staging_bytes_max = number(key, value)? << 20,
            other => {
                return Err(invalid(format!(
                    "unknown option {other:?} (durability, cache_mb, cache_bytes, segment_mb, cleaner, direct_io, \
                     capacity_dir, staging_dir, staging_mb)"
                )))
            }
        }
        Ok(())
    })?;
    Ok(options)
}

fn parse_kvs_options(spec: &str) -> Result<engine::KvsOptions, Failure> {
    let mut options = engine::KvsOptions::default();
    for_each_option(spec, |key, value| {
        match key {
            "prefix_len" => options.prefix_len = number(key, value)? as usize,
            "media_policy" => options.media_policy = value.parse().map_err(Failure::from)?,
            "compression" => options.compression = value.parse().map_err(Failure::from)?,
            other => {
                return Err(invalid(format!(
                    "unknown KVS option {other:?} (prefix_len, media_policy, compression)"
                )))
            }
        }
        Ok(())
    })?;
    Ok(options)
}

/// Opens (creating if needed) the KVDB in directory `path`. `options` is NULL or a string of
/// `key=value` pairs separated by `;`: durability=sync|none|interval|interval:MS, cache_mb=N,
/// segment_mb=N, cleaner=0|1, direct_io=0|1, capacity_dir=DIR, staging_dir=DIR, staging_mb=N
/// (media directories are fixed when the KVDB is created). On success `*db_out` is the new handle.
#[no_mangle]
pub extern "C" fn shaledb_open(
    path: *const c_char,
    options: *const c_char,
    db_out: *mut *mut shaledb_db,
) -> c_int {
    guard(|| {
        let path = text(path, "path")?;
        let options = if options.is_null() {
            Options::default()
        } else {
            parse_options(text(options, "options")?)?
        };
        let slot = out(db_out, "db_out")?;
        let db = Db::open(path, options)?;
        *slot = boxed(shaledb_db { db: Some(db) });
        Ok(SHALEDB_OK)
    })
}

/// Flushes, syncs, checkpoints and closes the KVDB, and frees the handle (even on error).
/// KVS, cursor and snapshot handles of it still need freeing; they return SHALEDB_CLOSED.
#[no_mangle]
pub extern "C" fn shaledb_close(db: *mut shaledb_db) -> c_int {
    guard(|| {
        let Some(mut handle) = free_handle(db) else {
            return Err(invalid("db is NULL"));
        };
        match handle.db.take() {
            Some(db) => db.close()?,
            None => return Err(invalid("the KVDB was already closed")),
        }
        Ok(SHALEDB_OK)
    })
}

/// Opens the KVS `name` (created on first use with `prefix_len`; an existing KVS keeps its own).
#[no_mangle]
pub extern "C" fn shaledb_kvs_open(
    db: *mut shaledb_db,
    name: *const c_char,
    prefix_len: usize,
    kvs_out: *mut *mut shaledb_kvs,
) -> c_int {
    guard(|| {
        let options = engine::KvsOptions {
            prefix_len,
            ..engine::KvsOptions::default()
        };
        open_kvs(db, name, options, kvs_out)
    })
}

/// Opens the KVS `name`, created on first use with `options` (an existing KVS keeps its own):
/// NULL or a string of `key=value` pairs separated by `;`: prefix_len=N,
/// media_policy=capacity_only|staging_only|staging_max_capacity, compression=none|lz4 (lz4:
/// each value stored compressed when that makes it smaller).
#[no_mangle]
pub extern "C" fn shaledb_kvs_open_with_options(
    db: *mut shaledb_db,
    name: *const c_char,
    options: *const c_char,
    kvs_out: *mut *mut shaledb_kvs,
) -> c_int {
    guard(|| {
        let options = if options.is_null() {
            engine::KvsOptions::default()
        } else {
            parse_kvs_options(text(options, "options")?)?
        };
        open_kvs(db, name, options, kvs_out)
    })
}

fn open_kvs(
    db: *mut shaledb_db,
    name: *const c_char,
    options: engine::KvsOptions,
    kvs_out: *mut *mut shaledb_kvs,
) -> Result<c_int, Failure> {
    let db = db_of(db)?;
    let name = text(name, "name")?;
    let slot = out(kvs_out, "kvs_out")?;
    let kvs = db.kvs_with_options(name, options)?;
    *slot = boxed(shaledb_kvs { kvs });
    Ok(SHALEDB_OK)
}

/// Frees a KVS handle (the KVS and its data stay). NULL is a no-op.
#[no_mangle]
pub extern "C" fn shaledb_kvs_free(kvs: *mut shaledb_kvs) {
    drop(free_handle(kvs));
}

/// Drops the KVS `name` and all its data.
#[no_mangle]
pub extern "C" fn shaledb_kvs_drop(db: *mut shaledb_db, name: *const c_char) -> c_int {
    guard(|| {
        db_of(db)?.drop_kvs(text(name, "name")?)?;
        Ok(SHALEDB_OK)
    })
}

/// The names of all KVSs, one per line, as a NUL-terminated string to free with shaledb_free.
#[no_mangle]
pub extern "C" fn shaledb_kvs_names(db: *mut shaledb_db, names_out: *mut *mut c_char) -> c_int {
    guard(|| {
        let names = db_of(db)?.list_kvs()?.join("\n");
        *out(names_out, "names_out")? = malloc_copy(names.as_bytes(), true)? as *mut c_char;
        Ok(SHALEDB_OK)
    })
}

/// Sets `key` to `value`.
#[no_mangle]
pub extern "C" fn shaledb_put(
    kvs: *mut shaledb_kvs,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) -> c_int {
    guard(|| {
        let kvs = &handle(kvs, "kvs")?.kvs;
        kvs.put(
            bytes(key, key_len, "key")?,
            bytes(value, value_len, "value")?,
        )?;
        Ok(SHALEDB_OK)
    })
}

/// Copies a found value into the caller's buffer, or reports the length needed.
fn deliver(
    found: Option<Bytes>,
    buffer: *mut u8,
    buffer_len: usize,
    value_len: *mut usize,
) -> Result<c_int, Failure> {
    let length_slot = out(value_len, "value_len")?;
    let Some(value) = found else {
        *length_slot = 0;
        return Ok(SHALEDB_NOT_FOUND);
    };
    *length_slot = value.len();
    if value.len() > buffer_len {
        set_last_error(&format!(
            "the value has {} bytes; the buffer holds {buffer_len}",
            value.len()
        ));
        return Ok(SHALEDB_BUFFER_TOO_SMALL);
    }
    if !value.is_empty() {
        if buffer.is_null() {
            return Err(invalid("buffer is NULL"));
        }
        // SAFETY: the header requires `buffer` to have `buffer_len` writable bytes, and
        // value.len() <= buffer_len was checked above.
        unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), buffer, value.len()) };
    }
    Ok(SHALEDB_OK)
}

/// Reads `key` into `buffer` (`buffer_len` bytes). Returns SHALEDB_OK with `*value_len` set,
/// SHALEDB_NOT_FOUND, or SHALEDB_BUFFER_TOO_SMALL with `*value_len` the size needed.
#[no_mangle]
pub extern "C" fn shaledb_get(
    kvs: *mut shaledb_kvs,
    key: *const u8,
    key_len: usize,
    buffer: *mut u8,
    buffer_len: usize,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        let found = handle(kvs, "kvs")?.kvs.get(bytes(key, key_len, "key")?)?;
        deliver(found, buffer, buffer_len, value_len)
    })
}

/// Reads `key` into a new buffer (`*value_out`, free it with shaledb_free; non-NULL even for an
/// empty value). Returns SHALEDB_OK or SHALEDB_NOT_FOUND (then `*value_out` is NULL).
#[no_mangle]
pub extern "C" fn shaledb_get_alloc(
    kvs: *mut shaledb_kvs,
    key: *const u8,
    key_len: usize,
    value_out: *mut *mut u8,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        let found = handle(kvs, "kvs")?.kvs.get(bytes(key, key_len, "key")?)?;
        let value_slot = out(value_out, "value_out")?;
        let length_slot = out(value_len, "value_len")?;
        match found {
            Some(value) => {
                *value_slot = malloc_copy(&value, false)?;
                *length_slot = value.len();
                Ok(SHALEDB_OK)
            }
            None => {
                *value_slot = std::ptr::null_mut();
                *length_slot = 0;
                Ok(SHALEDB_NOT_FOUND)
            }
        }
    })
}

/// Deletes `key` (SHALEDB_OK even if it had no value).
#[no_mangle]
pub extern "C" fn shaledb_delete(kvs: *mut shaledb_kvs, key: *const u8, key_len: usize) -> c_int {
    guard(|| {
        handle(kvs, "kvs")?
            .kvs
            .delete(bytes(key, key_len, "key")?)?;
        Ok(SHALEDB_OK)
    })
}

/// Deletes every key starting with `prefix` (exactly the KVS's prefix_len bytes if it has one).
#[no_mangle]
pub extern "C" fn shaledb_prefix_delete(
    kvs: *mut shaledb_kvs,
    prefix: *const u8,
    prefix_len: usize,
) -> c_int {
    guard(|| {
        handle(kvs, "kvs")?
            .kvs
            .prefix_delete(bytes(prefix, prefix_len, "prefix")?)?;
        Ok(SHALEDB_OK)
    })
}

/// Makes every acknowledged write durable (fdatasync).
#[no_mangle]
pub extern "C" fn shaledb_sync(db: *mut shaledb_db) -> c_int {
    guard(|| {
        db_of(db)?.sync()?;
        Ok(SHALEDB_OK)
    })
}

/// Runs the cleaner over every segment with dead data.
#[no_mangle]
pub extern "C" fn shaledb_compact(db: *mut shaledb_db) -> c_int {
    guard(|| {
        db_of(db)?.compact()?;
        Ok(SHALEDB_OK)
    })
}

/// The engine's counters as a JSON object string; free it with shaledb_free.
#[no_mangle]
pub extern "C" fn shaledb_stats_json(db: *mut shaledb_db, json_out: *mut *mut c_char) -> c_int {
    guard(|| {
        let stats = db_of(db)?.stats();
        let text = serde_json::to_string(&stats).map_err(|error| invalid(error.to_string()))?;
        *out(json_out, "json_out")? = malloc_copy(text.as_bytes(), true)? as *mut c_char;
        Ok(SHALEDB_OK)
    })
}

/// A new, empty write batch.
#[no_mangle]
pub extern "C" fn shaledb_batch_new(batch_out: *mut *mut shaledb_batch) -> c_int {
    guard(|| {
        *out(batch_out, "batch_out")? = boxed(shaledb_batch {
            batch: WriteBatch::new(),
        });
        Ok(SHALEDB_OK)
    })
}

/// Adds a put to the batch. Invalid keys or values make shaledb_batch_write fail, writing nothing.
#[no_mangle]
pub extern "C" fn shaledb_batch_put(
    batch: *mut shaledb_batch,
    kvs: *mut shaledb_kvs,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) -> c_int {
    guard(|| {
        let kvs = &handle(kvs, "kvs")?.kvs;
        let (key, value) = (
            bytes(key, key_len, "key")?,
            bytes(value, value_len, "value")?,
        );
        handle(batch, "batch")?.batch.put(kvs, key, value);
        Ok(SHALEDB_OK)
    })
}

/// Adds a delete to the batch.
#[no_mangle]
pub extern "C" fn shaledb_batch_delete(
    batch: *mut shaledb_batch,
    kvs: *mut shaledb_kvs,
    key: *const u8,
    key_len: usize,
) -> c_int {
    guard(|| {
        let kvs = &handle(kvs, "kvs")?.kvs;
        let key = bytes(key, key_len, "key")?;
        handle(batch, "batch")?.batch.delete(kvs, key);
        Ok(SHALEDB_OK)
    })
}

/// Adds a prefix delete to the batch.
#[no_mangle]
pub extern "C" fn shaledb_batch_prefix_delete(
    batch: *mut shaledb_batch,
    kvs: *mut shaledb_kvs,
    prefix: *const u8,
    prefix_len: usize,
) -> c_int {
    guard(|| {
        let kvs = &handle(kvs, "kvs")?.kvs;
        let prefix = bytes(prefix, prefix_len, "prefix")?;
        handle(batch, "batch")?.batch.prefix_delete(kvs, prefix);
        Ok(SHALEDB_OK)
    })
}

/// Applies the batch atomically (all of it or, after a crash, none) and empties it for reuse.
#[no_mangle]
pub extern "C" fn shaledb_batch_write(db: *mut shaledb_db, batch: *mut shaledb_batch) -> c_int {
    guard(|| {
        let db = db_of(db)?;
        let batch = std::mem::take(&mut handle(batch, "batch")?.batch);
        db.write(batch)?;
        Ok(SHALEDB_OK)
    })
}

/// Frees a batch (discarding what it holds). NULL is a no-op.
#[no_mangle]
pub extern "C" fn shaledb_batch_free(batch: *mut shaledb_batch) {
    drop(free_handle(batch));
}

/// A snapshot: reads through it see the KVDB as of now.
#[no_mangle]
pub extern "C" fn shaledb_snapshot_new(
    db: *mut shaledb_db,
    snapshot_out: *mut *mut shaledb_snapshot,
) -> c_int {
    guard(|| {
        let snapshot = db_of(db)?.snapshot()?;
        *out(snapshot_out, "snapshot_out")? = boxed(shaledb_snapshot { snapshot });
        Ok(SHALEDB_OK)
    })
}

/// Like shaledb_get, as of the snapshot.
#[no_mangle]
pub extern "C" fn shaledb_snapshot_get(
    snapshot: *mut shaledb_snapshot,
    kvs: *mut shaledb_kvs,
    key: *const u8,
    key_len: usize,
    buffer: *mut u8,
    buffer_len: usize,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        let kvs = &handle(kvs, "kvs")?.kvs;
        let found = handle(snapshot, "snapshot")?
            .snapshot
            .get(kvs, bytes(key, key_len, "key")?)?;
        deliver(found, buffer, buffer_len, value_len)
    })
}

/// Releases a snapshot. NULL is a no-op.
#[no_mangle]
pub extern "C" fn shaledb_snapshot_free(snapshot: *mut shaledb_snapshot) {
    drop(free_handle(snapshot));
}

fn open_cursor(
    kvs: *mut shaledb_kvs,
    snapshot: *mut shaledb_snapshot,
    range: impl FnOnce(&Kvs, Option<&Snapshot>) -> Iter,
    flags: c_int,
    cursor_out: *mut *mut shaledb_cursor,
) -> Result<c_int, Failure> {
    if flags & !SHALEDB_CURSOR_REVERSE != 0 {
        return Err(invalid(format!("unknown cursor flags {flags:#x}")));
    }
    let kvs = &handle(kvs, "kvs")?.kvs;
    let snapshot = if snapshot.is_null() {
        None
    } else {
        Some(&handle(snapshot, "snapshot")?.snapshot)
    };
    let slot = out(cursor_out, "cursor_out")?;
    *slot = boxed(shaledb_cursor {
        iter: range(kvs, snapshot),
        reverse: flags & SHALEDB_CURSOR_REVERSE != 0,
        current: None,
        held_back: false,
    });
    Ok(SHALEDB_OK)
}

/// Opens a cursor over keys in [lower, upper) of `kvs` (a NULL bound is open), as of `snapshot`
/// (NULL: a consistent view taken now). `flags`: 0 or SHALEDB_CURSOR_REVERSE.
#[no_mangle]
pub extern "C" fn shaledb_cursor_open(
    kvs: *mut shaledb_kvs,
    snapshot: *mut shaledb_snapshot,
    lower: *const u8,
    lower_len: usize,
    upper: *const u8,
    upper_len: usize,
    flags: c_int,
    cursor_out: *mut *mut shaledb_cursor,
) -> c_int {
    guard(|| {
        use std::ops::Bound;
        let lower = if lower.is_null() {
            Bound::Unbounded
        } else {
            Bound::Included(bytes(lower, lower_len, "lower")?.to_vec())
        };
        let upper = if upper.is_null() {
            Bound::Unbounded
        } else {
            Bound::Excluded(bytes(upper, upper_len, "upper")?.to_vec())
        };
        open_cursor(
            kvs,
            snapshot,
            |kvs, snapshot| match snapshot {
                Some(snapshot) => snapshot.range(kvs, (lower, upper)),
                None => kvs.range((lower, upper)),
            },
            flags,
            cursor_out,
        )
    })
}

/// Opens a cursor over the keys of `kvs` starting with `prefix`. See shaledb_cursor_open.
#[no_mangle]
pub extern "C" fn shaledb_cursor_open_prefix(
    kvs: *mut shaledb_kvs,
    snapshot: *mut shaledb_snapshot,
    prefix: *const u8,
    prefix_len: usize,
    flags: c_int,
    cursor_out: *mut *mut shaledb_cursor,
) -> c_int {
    guard(|| {
        let prefix = bytes(prefix, prefix_len, "prefix")?.to_vec();
        open_cursor(
            kvs,
            snapshot,
            |kvs, snapshot| match snapshot {
                Some(snapshot) => snapshot.prefix(kvs, &prefix),
                None => kvs.prefix(&prefix),
            },
            flags,
            cursor_out,
        )
    })
}

/// Moves a forward cursor to the first key at or after `key`.
#[no_mangle]
pub extern "C" fn shaledb_cursor_seek(
    cursor: *mut shaledb_cursor,
    key: *const u8,
    key_len: usize,
) -> c_int {
    guard(|| {
        let cursor = handle(cursor, "cursor")?;
        if cursor.reverse {
            return Err(invalid("seek works on forward cursors only"));
        }
        cursor.iter.seek(bytes(key, key_len, "key")?);
        cursor.current = None;
        cursor.held_back = false;
        Ok(SHALEDB_OK)
    })
}

fn advance(cursor: &mut shaledb_cursor) -> Result<c_int, Failure> {
    if cursor.held_back {
        cursor.held_back = false;
        return Ok(SHALEDB_OK);
    }
    let next = if cursor.reverse {
        cursor.iter.next_back()
    } else {
        cursor.iter.next()
    };
    match next {
        Some(item) => {
            cursor.current = Some(item?);
            Ok(SHALEDB_OK)
        }
        None => {
            cursor.current = None;
            Ok(SHALEDB_END)
        }
    }
}

/// Advances the cursor. On SHALEDB_OK, `*key`/`*value` point at the item's bytes, valid until the
/// next call on this cursor; SHALEDB_END means no more items.
#[no_mangle]
pub extern "C" fn shaledb_cursor_next(
    cursor: *mut shaledb_cursor,
    key: *mut *const u8,
    key_len: *mut usize,
    value: *mut *const u8,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        let cursor = handle(cursor, "cursor")?;
        let (key, key_len, value, value_len) = (
            out(key, "key")?,
            out(key_len, "key_len")?,
            out(value, "value")?,
            out(value_len, "value_len")?,
        );
        let status = advance(cursor)?;
        if let Some((item_key, item_value)) =
            cursor.current.as_ref().filter(|_| status == SHALEDB_OK)
        {
            (*key, *key_len, *value, *value_len) = (
                item_key.as_ptr(),
                item_key.len(),
                item_value.as_ptr(),
                item_value.len(),
            );
        }
        Ok(status)
    })
}

/// Advances the cursor, copying the item into the caller's buffers. If either is too small it
/// returns SHALEDB_BUFFER_TOO_SMALL with both lengths set and does not advance: call again with
/// bigger buffers.
#[no_mangle]
pub extern "C" fn shaledb_cursor_next_copy(
    cursor: *mut shaledb_cursor,
    key_buffer: *mut u8,
    key_buffer_len: usize,
    key_len: *mut usize,
    value_buffer: *mut u8,
    value_buffer_len: usize,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        let cursor = handle(cursor, "cursor")?;
        let (key_len, value_len) = (out(key_len, "key_len")?, out(value_len, "value_len")?);
        let status = advance(cursor)?;
        let Some((key, value)) = cursor.current.clone().filter(|_| status == SHALEDB_OK) else {
            return Ok(status);
        };
        (*key_len, *value_len) = (key.len(), value.len());
        if key.len() > key_buffer_len || value.len() > value_buffer_len {
            cursor.held_back = true;
            set_last_error(&format!(
                "the item needs {} key and {} value bytes",
                key.len(),
                value.len()
            ));
            return Ok(SHALEDB_BUFFER_TOO_SMALL);
        }
        let mut ignored = 0;
        deliver(Some(key), key_buffer, key_buffer_len, &mut ignored)?;
        deliver(Some(value), value_buffer, value_buffer_len, &mut ignored)?;
        Ok(SHALEDB_OK)
    })
}

/// Frees a cursor. NULL is a no-op.
#[no_mangle]
pub extern "C" fn shaledb_cursor_free(cursor: *mut shaledb_cursor) {
    drop(free_handle(cursor));
}

/// Begins a transaction (snapshot isolation). With `validate_reads` non-zero, the commit also
/// fails on conflicts with keys the transaction read.
#[no_mangle]
pub extern "C" fn shaledb_txn_begin(
    db: *mut shaledb_db,
    validate_reads: c_int,
    txn_out: *mut *mut shaledb_txn,
) -> c_int {
    guard(|| {
        let options = TxnOptions {
            validate_reads: validate_reads != 0,
            ..TxnOptions::default()
        };
        let txn = db_of(db)?.begin_with(options)?;
        *out(txn_out, "txn_out")? = boxed(shaledb_txn { txn });
        Ok(SHALEDB_OK)
    })
}

/// Buffers a put in the transaction.
#[no_mangle]
pub extern "C" fn shaledb_txn_put(
    txn: *mut shaledb_txn,
    kvs: *mut shaledb_kvs,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) -> c_int {
    guard(|| {
        let kvs = &handle(kvs, "kvs")?.kvs;
        let (key, value) = (
            bytes(key, key_len, "key")?,
            bytes(value, value_len, "value")?,
        );
        handle(txn, "txn")?.txn.put(kvs, key, value)?;
        Ok(SHALEDB_OK)
    })
}

/// Buffers a delete in the transaction.
#[no_mangle]
pub extern "C" fn shaledb_txn_delete(
    txn: *mut shaledb_txn,
    kvs: *mut shaledb_kvs,
    key: *const u8,
    key_len: usize,
) -> c_int {
    guard(|| {
        let kvs = &handle(kvs, "kvs")?.kvs;
        let key = bytes(key, key_len, "key")?;
        handle(txn, "txn")?.txn.delete(kvs, key)?;
        Ok(SHALEDB_OK)
    })
}

/// Like shaledb_get, as the transaction sees it (its snapshot plus its own writes).
#[no_mangle]
pub extern "C" fn shaledb_txn_get(
    txn: *mut shaledb_txn,
    kvs: *mut shaledb_kvs,
    key: *const u8,
    key_len: usize,
    buffer: *mut u8,
    buffer_len: usize,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        let kvs = &handle(kvs, "kvs")?.kvs;
        let found = handle(txn, "txn")?
            .txn
            .get(kvs, bytes(key, key_len, "key")?)?;
        deliver(found, buffer, buffer_len, value_len)
    })
}

/// Commits the transaction and frees the handle, whatever the outcome. SHALEDB_CONFLICT means
/// nothing was written: run the transaction again.
#[no_mangle]
pub extern "C" fn shaledb_txn_commit(txn: *mut shaledb_txn) -> c_int {
    guard(|| {
        let handle = free_handle(txn).ok_or_else(|| invalid("txn is NULL"))?;
        handle.txn.commit()?;
        Ok(SHALEDB_OK)
    })
}

/// Discards the transaction and frees the handle. NULL is a no-op.
#[no_mangle]
pub extern "C" fn shaledb_txn_abort(txn: *mut shaledb_txn) {
    drop(free_handle(txn));
}
