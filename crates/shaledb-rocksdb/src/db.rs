//! `rocksdb_t` and its column families: opening a ShaleDB KVDB as a RocksDB database, and the
//! point reads and writes (`rocksdb_put`, `rocksdb_get`, ... and their `_cf` variants).
//!
//! A column family is the KVS of the same name. RocksDB numbers column families; here the
//! numbers are given at open (0 for "default", then in order of opening or creation) and name
//! column families in write batches' serialized form.

use crate::args::{bytes, drop_handle, handle, into_handle, malloc_bytes, text};
use crate::options::rocksdb_options_t;
use crate::plugins::SliceTransform;
use crate::read_write_options::{rocksdb_readoptions_t, rocksdb_writeoptions_t};
use crate::status::{call, quiet, Code, Result, Status};
use engine::{Bytes, Compression, Db, Kvs, KvsOptions, Options};
use libc::c_char;
use parking_lot::{RwLock, RwLockReadGuard};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The name of the column family every RocksDB database has.
pub(crate) const DEFAULT_COLUMN_FAMILY: &str = "default";

/// RocksDB's default block cache, 32 MiB: ShaleDB's value cache budget when the options name
/// no cache.
const DEFAULT_CACHE_BYTES: u64 = 32 << 20;

/// One open column family.
#[derive(Clone)]
pub(crate) struct ColumnFamily {
    pub id: u32,
    pub name: String,
    pub kvs: Kvs,
    pub prefix_extractor: Option<Arc<SliceTransform>>,
}

/// An open database, shared by its handle and the iterators made from it.
pub(crate) struct Database {
    pub engine: Db,
    /// The default column family (number 0), which is never dropped: reads and writes that name
    /// no column family use it without a lock.
    default: ColumnFamily,
    /// Every open column family by number, the default one included.
    column_families: RwLock<BTreeMap<u32, ColumnFamily>>,
    /// Set by `rocksdb_disable_manual_compaction`: manual compactions fail until re-enabled.
    pub manual_compaction_paused: AtomicBool,
}

impl Database {
    /// The database with its default column family, `default_kvs`, as number 0.
    fn new(
        engine: Db,
        default_kvs: Kvs,
        prefix_extractor: Option<Arc<SliceTransform>>,
    ) -> Database {
        let default = ColumnFamily {
            id: 0,
            name: DEFAULT_COLUMN_FAMILY.to_string(),
            kvs: default_kvs,
            prefix_extractor,
        };
        Database {
            engine,
            column_families: RwLock::new(BTreeMap::from([(0, default.clone())])),
            default,
            manual_compaction_paused: AtomicBool::new(false),
        }
    }

    /// The open column families by number, for a batch to look its operations up in.
    pub fn column_families(&self) -> RwLockReadGuard<'_, BTreeMap<u32, ColumnFamily>> {
        self.column_families.read()
    }

    /// Registers `kvs` as an open column family; returns it with its number.
    fn add(&self, kvs: Kvs, prefix_extractor: Option<Arc<SliceTransform>>) -> ColumnFamily {
        let mut column_families = self.column_families.write();
        if let Some(open) = column_families.values().find(|cf| cf.name == kvs.name()) {
            return open.clone();
        }
        let id = column_families
            .keys()
            .next_back()
            .map_or(0, |last| last + 1);
        let cf = ColumnFamily {
            id,
            name: kvs.name().to_string(),
            kvs,
            prefix_extractor,
        };
        column_families.insert(id, cf.clone());
        cf
    }

    fn remove(&self, id: u32) {
        self.column_families.write().remove(&id);
    }
}

/// The column family a write batch's operation numbers `number` in `column_families` (a
/// database's open ones, or those a write set remembers).
pub(crate) fn numbered(
    column_families: &BTreeMap<u32, ColumnFamily>,
    number: u32,
) -> Result<&ColumnFamily> {
    column_families.get(&number).ok_or_else(|| {
        Status::invalid(format!(
            "Invalid column family specified in write batch: {number}"
        ))
    })
}

/// `rocksdb_t`.
pub struct rocksdb_t {
    pub(crate) database: Arc<Database>,
}

impl rocksdb_t {
    pub(crate) fn engine(&self) -> &Db {
        &self.database.engine
    }

    /// The column family a call names: its handle's, or the default one when it is NULL.
    pub(crate) fn column_family(
        &self,
        cf: *const rocksdb_column_family_handle_t,
    ) -> Result<&ColumnFamily> {
        if cf.is_null() {
            return Ok(&self.database.default);
        }
        Ok(&handle(cf, "column family")?.cf)
    }
}

/// `rocksdb_column_family_handle_t`.
pub struct rocksdb_column_family_handle_t {
    pub(crate) cf: ColumnFamily,
}

/// The ShaleDB options of an open with `options`: what RocksDB's options mean for ShaleDB.
fn engine_options(options: &rocksdb_options_t, read_only: bool) -> Result<Options> {
    if let Some(plugin) = options.unsupported.first() {
        return Err(Status::not_supported(plugin.describe()));
    }
    let cache_bytes = if options.no_block_cache() {
        0
    } else {
        options
            .table
            .as_ref()
            .and_then(|table| table.block_cache.as_ref())
            .map_or(DEFAULT_CACHE_BYTES, |cache| cache.capacity() as u64)
    };
    Ok(Options {
        create_if_missing: options.flag("rocksdb_options_set_create_if_missing") && !read_only,
        read_only,
        cache_bytes,
        direct_io: options.flag("rocksdb_options_set_use_direct_reads")
            || options.flag("rocksdb_options_set_use_direct_io_for_flush_and_compaction"),
        ..Options::default()
    })
}

/// The KVS options of a column family opened or created with `options`.
fn kvs_options(options: &rocksdb_options_t) -> KvsOptions {
    // RocksDB's default is Snappy; ShaleDB's one codec is LZ4. kNoCompression (0) stores
    // values as given; any codec asked for compresses with LZ4.
    let compression = match options.value::<i32>("rocksdb_options_set_compression") {
        0 => Compression::None,
        _ => Compression::Lz4,
    };
    KvsOptions {
        compression,
        ..KvsOptions::default()
    }
}

/// The status of an open of `path` that failed with `error`: a database another process (or
/// handle) holds is worded as RocksDB words it, naming the lock file (ShaleDB's is also
/// `LOCK`).
pub(crate) fn open_failed(path: &str, error: engine::Error) -> Status {
    match error.kind() {
        engine::ErrorKind::Locked => Status::new(
            Code::IoError,
            format!("While lock file: {path}/LOCK: {error}"),
        ),
        _ => Status::from(error),
    }
}

/// Opens the KVDB at `path` as RocksDB would open the database there.
fn open_engine(options: &rocksdb_options_t, path: &str, read_only: bool) -> Result<Db> {
    let engine =
        Db::open(path, engine_options(options, read_only)?).map_err(|error| {
            match error.kind() {
                engine::ErrorKind::NotFound => Status::invalid(format!(
                    "{path}/CURRENT: does not exist (create_if_missing is false)"
                )),
                _ => open_failed(path, error),
            }
        })?;
    if options.flag("rocksdb_options_set_error_if_exists") && !engine.recovery_report().created {
        return Err(Status::invalid(format!(
            "{path}: exists (error_if_exists is true)"
        )));
    }
    if !read_only {
        write_log(options, path, &engine)?;
    }
    Ok(engine)
}

/// Writes the database's `LOG` as RocksDB starts it: the options of this open.
fn write_log(options: &rocksdb_options_t, path: &str, engine: &Db) -> Result<()> {
    let mut log = format!(
        "ShaleDB {} through RocksDB's C API (rocksdb/c.h of RocksDB 10.4.2)\n\
         KVDB: {}\nJemalloc supported: 0\n\
         Options of this open (as set, or RocksDB's defaults):\n",
        env!("CARGO_PKG_VERSION"),
        engine.path().display()
    );
    options.dump(&mut log);
    std::fs::write(Path::new(path).join("LOG"), log)
        .map_err(|error| Status::new(Code::IoError, format!("{path}/LOG: {error}")))
}

/// Opens the database with the column families named (the default one among them, or not),
/// creating those missing when the options allow; every column family the database has must
/// be named, as in RocksDB.
pub(crate) fn open(
    options: &rocksdb_options_t,
    path: &str,
    read_only: bool,
    column_families: &[(&str, &rocksdb_options_t)],
) -> Result<(rocksdb_t, Vec<ColumnFamily>)> {
    let engine = open_engine(options, path, read_only)?;
    let existing = engine.list_kvs()?;
    // Checked before any column family is created: an open that fails creates none.
    let not_opened: Vec<&str> = existing
        .iter()
        .map(String::as_str)
        .filter(|name| {
            *name != DEFAULT_COLUMN_FAMILY
                && !crate::prepared::is_reserved(name)
                && !column_families.iter().any(|(n, _)| n == name)
        })
        .collect();
    if !not_opened.is_empty() && !read_only {
        return Err(Status::invalid(format!(
            "Column families not opened: {}",
            not_opened.join(", ")
        )));
    }
    let create_missing = options.flag("rocksdb_options_set_create_missing_column_families");
    let default_options = column_families
        .iter()
        .find(|(name, _)| *name == DEFAULT_COLUMN_FAMILY)
        .map_or(options, |(_, options)| *options);
    let default_kvs =
        engine.kvs_with_options(DEFAULT_COLUMN_FAMILY, kvs_options(default_options))?;
    let database = Arc::new(Database::new(
        engine,
        default_kvs,
        default_options.prefix_extractor.clone(),
    ));
    crate::statistics::attach(options, &database);
    let mut opened = Vec::with_capacity(column_families.len());
    for (name, cf_options) in column_families {
        let cf = open_column_family(&database, name, cf_options, &existing, create_missing)?;
        opened.push(cf);
    }
    Ok((rocksdb_t { database }, opened))
}

pub(crate) fn open_column_family(
    database: &Database,
    name: &str,
    options: &rocksdb_options_t,
    existing: &[String],
    create: bool,
) -> Result<ColumnFamily> {
    if crate::prepared::is_reserved(name) {
        return Err(Status::invalid(format!(
            "{name}: reserved for ShaleDB's own use (prepared transactions)"
        )));
    }
    if !existing.iter().any(|known| known == name) && !create {
        return Err(Status::invalid(format!("Column family not found: {name}")));
    }
    let kvs = database
        .engine
        .kvs_with_options(name, kvs_options(options))?;
    Ok(database.add(kvs, options.prefix_extractor.clone()))
}

/// Opens with the column families given by name and options (arrays of `count`), filling
/// `handles` with one handle per name.
#[allow(clippy::too_many_arguments)]
pub(crate) fn open_with_column_families(
    options: *const rocksdb_options_t,
    name: *const c_char,
    count: libc::c_int,
    names: *const *const c_char,
    cf_options: *const *const rocksdb_options_t,
    handles: *mut *mut rocksdb_column_family_handle_t,
    read_only: bool,
) -> Result<*mut rocksdb_t> {
    let options = handle(options, "options")?;
    let path = text(name, "path")?;
    let count = usize::try_from(count).map_err(|_| Status::invalid("negative count"))?;
    let names = crate::args::array(names, count)?;
    let cf_options = crate::args::array(cf_options, count)?;
    let mut families = Vec::with_capacity(count);
    for (name, options) in names.iter().zip(cf_options) {
        families.push((
            text(*name, "column family name")?,
            handle(*options, "options")?,
        ));
    }
    if count > 0 && handles.is_null() {
        return Err(Status::invalid("column family handles array is NULL"));
    }
    let (db, opened) = open(options, path, read_only, &families)?;
    for (index, cf) in opened.into_iter().enumerate() {
        // SAFETY: c.h passes `handles` as an array of `count` slots to fill.
        unsafe { *handles.add(index) = into_handle(rocksdb_column_family_handle_t { cf }) };
    }
    Ok(into_handle(db))
}

/// Opens with the default column family alone (every other must be absent, unless read-only).
pub(crate) fn open_default(
    options: *const rocksdb_options_t,
    name: *const c_char,
    read_only: bool,
) -> Result<*mut rocksdb_t> {
    let (db, _) = open(
        handle(options, "options")?,
        text(name, "path")?,
        read_only,
        &[],
    )?;
    Ok(into_handle(db))
}

#[no_mangle]
pub extern "C" fn rocksdb_open(
    options: *const rocksdb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_t {
    call(errptr, std::ptr::null_mut(), || {
        open_default(options, name, false)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_open_for_read_only(
    options: *const rocksdb_options_t,
    name: *const c_char,
    _error_if_wal_file_exists: libc::c_uchar,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_t {
    call(errptr, std::ptr::null_mut(), || {
        open_default(options, name, true)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_open_column_families(
    options: *const rocksdb_options_t,
    name: *const c_char,
    num_column_families: libc::c_int,
    column_family_names: *const *const c_char,
    column_family_options: *const *const rocksdb_options_t,
    column_family_handles: *mut *mut rocksdb_column_family_handle_t,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_t {
    call(errptr, std::ptr::null_mut(), || {
        open_with_column_families(
            options,
            name,
            num_column_families,
            column_family_names,
            column_family_options,
            column_family_handles,
            false,
        )
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_open_for_read_only_column_families(
    options: *const rocksdb_options_t,
    name: *const c_char,
    num_column_families: libc::c_int,
    column_family_names: *const *const c_char,
    column_family_options: *const *const rocksdb_options_t,
    column_family_handles: *mut *mut rocksdb_column_family_handle_t,
    _error_if_wal_file_exists: libc::c_uchar,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_t {
    call(errptr, std::ptr::null_mut(), || {
        open_with_column_families(
            options,
            name,
            num_column_families,
            column_family_names,
            column_family_options,
            column_family_handles,
            true,
        )
    })
}

/// Closes the database: ShaleDB's close flushes, syncs and writes its index checkpoint. c.h
/// has no error to report; a failure is written to stderr.
#[no_mangle]
pub extern "C" fn rocksdb_close(db: *mut rocksdb_t) {
    quiet((), || {
        if db.is_null() {
            return;
        }
        // SAFETY: c.h hands the handle to rocksdb_close once, after its last use.
        let db = unsafe { Box::from_raw(db) };
        // Iterators may still hold the database; the KVDB closes when the last of them goes.
        if let Ok(database) = Arc::try_unwrap(db.database) {
            if let Err(error) = database.engine.close() {
                eprintln!("shaledb-rocksdb: closing the database failed: {error}");
            }
        }
    })
}

/// Runs `body` with the column family `cf` (or the default one when `cf` is NULL).
pub(crate) fn with_cf<T>(
    db: *mut rocksdb_t,
    cf: *mut rocksdb_column_family_handle_t,
    body: impl FnOnce(&rocksdb_t, &ColumnFamily) -> Result<T>,
) -> Result<T> {
    let db = handle(db, "db")?;
    body(db, db.column_family(cf)?)
}

/// Makes the writes so far durable when the write options ask for `sync`.
pub(crate) fn sync_if_asked(db: &rocksdb_t, options: &rocksdb_writeoptions_t) -> Result<()> {
    if options.sync() {
        db.engine().sync()?;
    }
    Ok(())
}

fn put(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    cf: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    value: *const c_char,
    vallen: usize,
) -> Result<()> {
    let options = handle(options, "write options")?;
    with_cf(db, cf, |db, cf| {
        cf.kvs.put(bytes(key, keylen)?, bytes(value, vallen)?)?;
        sync_if_asked(db, options)
    })
}

fn delete(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    cf: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
) -> Result<()> {
    let options = handle(options, "write options")?;
    with_cf(db, cf, |db, cf| {
        cf.kvs.delete(bytes(key, keylen)?)?;
        sync_if_asked(db, options)
    })
}

/// The value of `key` as the read options ask (at their snapshot, if any).
pub(crate) fn read(
    options: &rocksdb_readoptions_t,
    cf: &ColumnFamily,
    key: &[u8],
) -> Result<Option<Bytes>> {
    options.check_no_timestamp()?;
    Ok(match &options.snapshot {
        Some(snapshot) => snapshot.get(&cf.kvs, key)?,
        None => cf.kvs.get(key)?,
    })
}

fn get(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    cf: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    vallen: *mut usize,
) -> Result<*mut c_char> {
    crate::args::set_out(vallen, 0);
    let options = handle(options, "read options")?;
    with_cf(db, cf, |_, cf| {
        Ok(match read(options, cf, bytes(key, keylen)?)? {
            Some(value) => malloc_bytes(&value, vallen),
            None => std::ptr::null_mut(),
        })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_put(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    key: *const c_char,
    keylen: usize,
    val: *const c_char,
    vallen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        put(db, options, std::ptr::null_mut(), key, keylen, val, vallen)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_put_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    val: *const c_char,
    vallen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        put(db, options, column_family, key, keylen, val, vallen)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_delete(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        delete(db, options, std::ptr::null_mut(), key, keylen)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_delete_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        delete(db, options, column_family, key, keylen)
    })
}

/// SingleDelete: a delete of a key written once since its last delete. ShaleDB's delete
/// serves (RocksDB leaves the result undefined when that contract is broken; here it is a
/// plain delete).
#[no_mangle]
pub extern "C" fn rocksdb_singledelete(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) {
    rocksdb_delete(db, options, key, keylen, errptr)
}

#[no_mangle]
pub extern "C" fn rocksdb_singledelete_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_writeoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) {
    rocksdb_delete_cf(db, options, column_family, key, keylen, errptr)
}

#[no_mangle]
pub extern "C" fn rocksdb_get(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    key: *const c_char,
    keylen: usize,
    vallen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    call(errptr, std::ptr::null_mut(), || {
        get(db, options, std::ptr::null_mut(), key, keylen, vallen)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_get_cf(
    db: *mut rocksdb_t,
    options: *const rocksdb_readoptions_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    keylen: usize,
    vallen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    call(errptr, std::ptr::null_mut(), || {
        get(db, options, column_family, key, keylen, vallen)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_create_column_family(
    db: *mut rocksdb_t,
    column_family_options: *const rocksdb_options_t,
    column_family_name: *const c_char,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_column_family_handle_t {
    call(errptr, std::ptr::null_mut(), || {
        let db = handle(db, "db")?;
        let options = handle(column_family_options, "options")?;
        let name = text(column_family_name, "column family name")?;
        if db.engine().list_kvs()?.iter().any(|known| known == name) {
            return Err(Status::invalid(format!(
                "Column family already exists: {name}"
            )));
        }
        let cf = open_column_family(&db.database, name, options, &[], true)?;
        Ok(into_handle(rocksdb_column_family_handle_t { cf }))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_drop_column_family(
    db: *mut rocksdb_t,
    handle_: *mut rocksdb_column_family_handle_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let db = handle(db, "db")?;
        let cf = &handle(handle_, "column family")?.cf;
        if cf.name == DEFAULT_COLUMN_FAMILY {
            return Err(Status::invalid("Can't drop default column family"));
        }
        db.engine().drop_kvs(&cf.name)?;
        db.database.remove(cf.id);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_column_family_handle_destroy(
    handle_: *mut rocksdb_column_family_handle_t,
) {
    quiet((), || drop_handle(handle_))
}

#[no_mangle]
pub extern "C" fn rocksdb_get_default_column_family_handle(
    db: *mut rocksdb_t,
) -> *mut rocksdb_column_family_handle_t {
    quiet(std::ptr::null_mut(), || {
        handle(db, "db").map_or(std::ptr::null_mut(), |db| {
            into_handle(rocksdb_column_family_handle_t {
                cf: db.database.default.clone(),
            })
        })
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_column_family_handle_get_id(
    handle_: *mut rocksdb_column_family_handle_t,
) -> u32 {
    quiet(0, || {
        handle(handle_, "column family").map_or(0, |handle| handle.cf.id)
    })
}

/// The column family's name, malloc()ed, its length in `*name_len`.
#[no_mangle]
pub extern "C" fn rocksdb_column_family_handle_get_name(
    handle_: *mut rocksdb_column_family_handle_t,
    name_len: *mut usize,
) -> *mut c_char {
    quiet(std::ptr::null_mut(), || {
        handle(handle_, "column family").map_or(std::ptr::null_mut(), |handle| {
            malloc_bytes(handle.cf.name.as_bytes(), name_len)
        })
    })
}

/// Opens the KVDB at `path` only to look at it: read-only, never created, without a value
/// cache or its warming, whatever options the program holds (RocksDB reads its MANIFEST).
pub(crate) fn open_to_inspect(path: &Path) -> engine::Result<Db> {
    Db::open(
        path,
        Options {
            create_if_missing: false,
            read_only: true,
            cache_bytes: 0,
            warm_reads_per_sec: 0,
            ..Options::default()
        },
    )
}

/// The column families of the database at `name`: a malloc()ed array of malloc()ed names,
/// for `rocksdb_list_column_families_destroy`.
#[no_mangle]
pub extern "C" fn rocksdb_list_column_families(
    _options: *const rocksdb_options_t,
    name: *const c_char,
    lencf: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut *mut c_char {
    call(errptr, std::ptr::null_mut(), || {
        let engine = open_to_inspect(Path::new(text(name, "path")?))?;
        let mut names = engine.list_kvs()?;
        names.retain(|name| !crate::prepared::is_reserved(name));
        if !names.iter().any(|name| name == DEFAULT_COLUMN_FAMILY) {
            names.insert(0, DEFAULT_COLUMN_FAMILY.to_string());
        }
        engine.close()?;
        crate::args::set_out(lencf, names.len());
        let array = crate::args::malloc(names.len().max(1) * size_of::<*mut c_char>())
            .cast::<*mut c_char>();
        for (index, name) in names.iter().enumerate() {
            // SAFETY: `array` has room for `names.len()` pointers.
            unsafe { *array.add(index) = crate::args::malloc_string(name) };
        }
        Ok(array)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_list_column_families_destroy(list: *mut *mut c_char, len: usize) {
    quiet((), || {
        if list.is_null() {
            return;
        }
        for index in 0..len {
            // SAFETY: `list` came from rocksdb_list_column_families with `len` names, each
            // malloc()ed there.
            unsafe { libc::free((*list.add(index)).cast()) };
        }
        // SAFETY: as above.
        unsafe { libc::free(list.cast()) };
    })
}

/// Frees memory this library malloc()ed for the caller (values, names, error messages).
#[no_mangle]
pub extern "C" fn rocksdb_free(ptr: *mut libc::c_void) {
    // SAFETY: c.h hands back pointers this library returned from malloc, once.
    unsafe { libc::free(ptr) }
}

/// Removes the database at `name`: its KVDB's files and the directory, as RocksDB's
/// DestroyDB does. A directory that holds no database is left as it is.
#[no_mangle]
pub extern "C" fn rocksdb_destroy_db(
    _options: *const rocksdb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let path = Path::new(text(name, "path")?);
        if !path.exists() {
            return Ok(());
        }
        // Refuse to remove what is not a database, and one that is open (locked).
        match open_to_inspect(path) {
            Ok(engine) => engine.close()?,
            Err(error) if error.kind() == engine::ErrorKind::NotFound => return Ok(()),
            // Files but no manifest: not a database (RocksDB's DestroyDB also leaves files
            // that are not its own, and succeeds).
            Err(error)
                if error.kind() == engine::ErrorKind::Corruption
                    && !path.join(engine::MANIFEST_FILE_NAME).exists() =>
            {
                eprintln!(
                    "shaledb-rocksdb: destroy_db: {} holds no database; left as it is",
                    path.display()
                );
                return Ok(());
            }
            Err(error) => return Err(open_failed(&path.to_string_lossy(), error)),
        }
        std::fs::remove_dir_all(path)
            .map_err(|error| Status::new(Code::IoError, format!("{}: {error}", path.display())))
    })
}
