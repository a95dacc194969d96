//! What a database says about itself: `rocksdb_property_value` / `_int` (the properties that
//! have a ShaleDB meaning), approximate sizes, the identity, the latest sequence number, and the
//! file-level views (live files, column family metadata), which ShaleDB, having no SST files,
//! answers without files.

use crate::args::{array, bytes, drop_handle, handle, into_handle, malloc_string, set_out, text};
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t, with_cf, ColumnFamily};
use crate::status::{call, logged, quiet, Result, Status};
use engine::{RangeSize, Stats};
use libc::c_char;
use std::fmt::Write;
use std::ops::Bound;

/// RocksDB's level properties name a level after this prefix.
const FILES_AT_LEVEL: &str = "rocksdb.num-files-at-level";

/// The segments of the KVDB: ShaleDB's files, all at "level 0" since it has no levels.
fn segments(stats: &Stats) -> u64 {
    stats
        .segments_by_head
        .iter()
        .map(|head| head.segments)
        .sum()
}

/// The integer value of property `name` for column family `cf`, or `None` for a property
/// ShaleDB has no meaning for (RocksDB's answer for an unknown one); `stats` are the
/// database's counters, collected once per call.
fn integer_property(cf: &ColumnFamily, stats: &Stats, name: &str) -> Result<Option<u64>> {
    let value = match name {
        "rocksdb.estimate-num-keys" => cf.kvs.len()? as u64,
        "rocksdb.estimate-live-data-size" => cf.kvs.range_size::<&[u8], _>(..)?.bytes,
        "rocksdb.total-sst-files-size" | "rocksdb.live-sst-files-size" => stats.total_bytes,
        "rocksdb.estimate-pending-compaction-bytes" => {
            stats.total_bytes.saturating_sub(stats.live_bytes)
        }
        "rocksdb.block-cache-usage" => stats.cache_bytes,
        "rocksdb.block-cache-capacity" => stats.cache_bytes_budget,
        "rocksdb.block-cache-pinned-usage" => 0,
        "rocksdb.estimate-table-readers-mem" => stats.index_bytes,
        "rocksdb.num-snapshots" => stats.snapshots_open,
        "rocksdb.actual-delayed-write-rate" => stats.write_rate_limit.unwrap_or(0),
        "rocksdb.is-write-stopped"
        | "rocksdb.background-errors"
        | "rocksdb.num-running-compactions"
        | "rocksdb.num-running-flushes"
        | "rocksdb.compaction-pending"
        | "rocksdb.mem-table-flush-pending" => 0,
        "rocksdb.num-live-versions" => 1,
        _ => match name.strip_prefix(FILES_AT_LEVEL).map(str::parse::<u32>) {
            Some(Ok(0)) => segments(stats),
            Some(Ok(_)) => 0,
            _ => return Ok(None),
        },
    };
    Ok(Some(value))
}

/// The text of property `name`: the integer ones as numbers, and the statistics texts.
fn text_property(db: &rocksdb_t, cf: &ColumnFamily, name: &str) -> Result<Option<String>> {
    let stats = db.engine().stats();
    if let Some(value) = integer_property(cf, &stats, name)? {
        return Ok(Some(value.to_string()));
    }
    Ok(match name {
        "rocksdb.stats" | "rocksdb.dbstats" | "rocksdb.cfstats" => Some(format!(
            "\n** Compaction Stats [{}] **\nShaleDB's cleaner (its compaction): {} segments \
             cleaned, {} bytes copied, {} tombstones dropped; sorter: {} key ranges rewritten, \
             {} bytes copied\n\n** DB Stats **\nShaleDB, column family {}: {} keys\n{stats:#?}\n",
            cf.name,
            stats.cleaner_segments_cleaned,
            stats.cleaner_bytes_copied,
            stats.cleaner_tombstones_dropped,
            stats.sorted_ranges,
            stats.sort_bytes_copied,
            cf.name,
            cf.kvs.len()?
        )),
        "rocksdb.levelstats" => {
            let mut out = String::from("Level Files Size(MB)\n--------------------\n");
            let _ = writeln!(
                out,
                "{:>5} {:>5} {:>8.0}",
                0,
                segments(&stats),
                stats.total_bytes as f64 / (1 << 20) as f64
            );
            Some(out)
        }
        _ => None,
    })
}

/// A malloc()ed property text, or NULL when the property is unknown or cannot be read.
fn property_value(
    db: *mut rocksdb_t,
    cf: *mut rocksdb_column_family_handle_t,
    name: *const c_char,
) -> *mut c_char {
    // c.h has no error to return here: NULL says the property could not be read.
    let value = logged("property_value", None, || {
        with_cf(db, cf, |db, cf| {
            text_property(db, cf, text(name, "property name")?)
        })
    });
    value.map_or(std::ptr::null_mut(), |value| malloc_string(&value))
}

/// 0 with the value in `*out`, or -1 when the property is unknown or cannot be read.
fn property_int(
    db: *mut rocksdb_t,
    cf: *mut rocksdb_column_family_handle_t,
    name: *const c_char,
    out: *mut u64,
) -> libc::c_int {
    quiet(-1, || {
        let value = with_cf(db, cf, |db, cf| {
            integer_property(cf, &db.engine().stats(), text(name, "property name")?)
        });
        match value {
            Ok(Some(value)) => {
                set_out(out, value);
                0
            }
            _ => -1,
        }
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_property_value(
    db: *mut rocksdb_t,
    propname: *const c_char,
) -> *mut c_char {
    property_value(db, std::ptr::null_mut(), propname)
}

#[no_mangle]
pub extern "C" fn rocksdb_property_value_cf(
    db: *mut rocksdb_t,
    column_family: *mut rocksdb_column_family_handle_t,
    propname: *const c_char,
) -> *mut c_char {
    property_value(db, column_family, propname)
}

#[no_mangle]
pub extern "C" fn rocksdb_property_int(
    db: *mut rocksdb_t,
    propname: *const c_char,
    out_val: *mut u64,
) -> libc::c_int {
    property_int(db, std::ptr::null_mut(), propname, out_val)
}

#[no_mangle]
pub extern "C" fn rocksdb_property_int_cf(
    db: *mut rocksdb_t,
    column_family: *mut rocksdb_column_family_handle_t,
    propname: *const c_char,
    out_val: *mut u64,
) -> libc::c_int {
    property_int(db, column_family, propname, out_val)
}

/// The bytes on media of the records in each range `[start[i], limit[i])`, from the index (no
/// device reads; RocksDB's figure is also an estimate, from its files' index blocks).
#[allow(clippy::too_many_arguments)]
fn approximate_sizes(
    db: *mut rocksdb_t,
    cf: *mut rocksdb_column_family_handle_t,
    num_ranges: libc::c_int,
    start: *const *const c_char,
    start_len: *const usize,
    limit: *const *const c_char,
    limit_len: *const usize,
    sizes: *mut u64,
) -> Result<()> {
    let count = usize::try_from(num_ranges).map_err(|_| Status::invalid("negative count"))?;
    let (start, start_len) = (array(start, count)?, array(start_len, count)?);
    let (limit, limit_len) = (array(limit, count)?, array(limit_len, count)?);
    if count > 0 && sizes.is_null() {
        return Err(Status::invalid("sizes array is NULL"));
    }
    with_cf(db, cf, |_, cf| {
        for index in 0..count {
            let lower = bytes(start[index], start_len[index])?;
            let upper = bytes(limit[index], limit_len[index])?;
            let RangeSize { bytes: size, .. } = cf
                .kvs
                .range_size::<&[u8], _>((Bound::Included(lower), Bound::Excluded(upper)))?;
            // SAFETY: c.h passes `sizes` as an array of `num_ranges` to fill.
            unsafe { *sizes.add(index) = size };
        }
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_approximate_sizes(
    db: *mut rocksdb_t,
    num_ranges: libc::c_int,
    range_start_key: *const *const c_char,
    range_start_key_len: *const usize,
    range_limit_key: *const *const c_char,
    range_limit_key_len: *const usize,
    sizes: *mut u64,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        approximate_sizes(
            db,
            std::ptr::null_mut(),
            num_ranges,
            range_start_key,
            range_start_key_len,
            range_limit_key,
            range_limit_key_len,
            sizes,
        )
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_approximate_sizes_cf(
    db: *mut rocksdb_t,
    column_family: *mut rocksdb_column_family_handle_t,
    num_ranges: libc::c_int,
    range_start_key: *const *const c_char,
    range_start_key_len: *const usize,
    range_limit_key: *const *const c_char,
    range_limit_key_len: *const usize,
    sizes: *mut u64,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        approximate_sizes(
            db,
            column_family,
            num_ranges,
            range_start_key,
            range_start_key_len,
            range_limit_key,
            range_limit_key_len,
            sizes,
        )
    })
}

/// As `rocksdb_approximate_sizes_cf`: ShaleDB's records are on media as soon as written (its
/// write buffers are part of its log), so memtables and files are one figure.
#[no_mangle]
pub extern "C" fn rocksdb_approximate_sizes_cf_with_flags(
    db: *mut rocksdb_t,
    column_family: *mut rocksdb_column_family_handle_t,
    num_ranges: libc::c_int,
    range_start_key: *const *const c_char,
    range_start_key_len: *const usize,
    range_limit_key: *const *const c_char,
    range_limit_key_len: *const usize,
    _include_flags: u8,
    sizes: *mut u64,
    errptr: *mut *mut c_char,
) {
    rocksdb_approximate_sizes_cf(
        db,
        column_family,
        num_ranges,
        range_start_key,
        range_start_key_len,
        range_limit_key,
        range_limit_key_len,
        sizes,
        errptr,
    )
}

/// The database's identity: the KVDB's 64-bit id in the 36 characters of the UUID RocksDB
/// gives (its first 16 hex digits zero), malloc()ed, the length in `*id_len`. A checkpoint or
/// backup is a KVDB of its own, with an identity of its own, as a RocksDB checkpoint is.
#[no_mangle]
pub extern "C" fn rocksdb_get_db_identity(db: *mut rocksdb_t, id_len: *mut usize) -> *mut c_char {
    quiet(std::ptr::null_mut(), || {
        handle(db, "db").map_or(std::ptr::null_mut(), |db| {
            let id = db.engine().id();
            let id = format!(
                "00000000-0000-0000-{:04x}-{:012x}",
                id >> 48,
                id & 0xffff_ffff_ffff
            );
            set_out(id_len, id.len());
            malloc_string(&id)
        })
    })
}

/// The sequence number of the last write.
#[no_mangle]
pub extern "C" fn rocksdb_get_latest_sequence_number(db: *mut rocksdb_t) -> u64 {
    quiet(0, || {
        handle(db, "db").map_or(0, |db| db.engine().stats().next_seqno.saturating_sub(1))
    })
}

/// `rocksdb_livefiles_t`: never made (see `rocksdb_livefiles`); its accessors answer for NULL.
pub struct rocksdb_livefiles_t {
    _never: (),
}

/// RocksDB's live SST files. ShaleDB has none (its segments are not key-range files a program
/// could copy or reason about), so this returns NULL, RocksDB's "could not get live files",
/// and says why on stderr; `rocksdb_checkpoint_create` is the way to copy a database.
#[no_mangle]
pub extern "C" fn rocksdb_livefiles(_db: *mut rocksdb_t) -> *const rocksdb_livefiles_t {
    eprintln!(
        "shaledb-rocksdb: rocksdb_livefiles: ShaleDB has no SST files to list; \
         use rocksdb_checkpoint_create to copy a database"
    );
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn rocksdb_livefiles_count(_files: *const rocksdb_livefiles_t) -> libc::c_int {
    0
}

/// No file has an index: every accessor of a file answers with an empty value.
macro_rules! no_file {
    ($($name:ident -> $t:ty = $none:expr;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name(_files: *const rocksdb_livefiles_t, _index: libc::c_int) -> $t {
            $none
        }
    )*};
}

no_file! {
    rocksdb_livefiles_column_family_name -> *const c_char = std::ptr::null();
    rocksdb_livefiles_name -> *const c_char = std::ptr::null();
    rocksdb_livefiles_level -> libc::c_int = -1;
    rocksdb_livefiles_size -> usize = 0;
    rocksdb_livefiles_entries -> u64 = 0;
    rocksdb_livefiles_deletions -> u64 = 0;
}

#[no_mangle]
pub extern "C" fn rocksdb_livefiles_smallestkey(
    _files: *const rocksdb_livefiles_t,
    _index: libc::c_int,
    size: *mut usize,
) -> *const c_char {
    set_out(size, 0);
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn rocksdb_livefiles_largestkey(
    files: *const rocksdb_livefiles_t,
    index: libc::c_int,
    size: *mut usize,
) -> *const c_char {
    rocksdb_livefiles_smallestkey(files, index, size)
}

#[no_mangle]
pub extern "C" fn rocksdb_livefiles_destroy(_files: *const rocksdb_livefiles_t) {}

/// `rocksdb_column_family_metadata_t`: a column family's name and the bytes of its records;
/// no levels and no files, since ShaleDB has neither.
pub struct rocksdb_column_family_metadata_t {
    name: String,
    size: u64,
}

/// `rocksdb_level_metadata_t` and `rocksdb_sst_file_metadata_t`: never made (a column family's
/// metadata has no levels); their accessors answer for NULL.
pub struct rocksdb_level_metadata_t {
    _never: (),
}
pub struct rocksdb_sst_file_metadata_t {
    _never: (),
}

fn column_family_metadata(
    db: *mut rocksdb_t,
    cf: *mut rocksdb_column_family_handle_t,
) -> *mut rocksdb_column_family_metadata_t {
    quiet(std::ptr::null_mut(), || {
        with_cf(db, cf, |_, cf| {
            Ok(rocksdb_column_family_metadata_t {
                name: cf.name.clone(),
                size: cf.kvs.range_size::<&[u8], _>(..)?.bytes,
            })
        })
        .map_or(std::ptr::null_mut(), into_handle)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_get_column_family_metadata(
    db: *mut rocksdb_t,
) -> *mut rocksdb_column_family_metadata_t {
    column_family_metadata(db, std::ptr::null_mut())
}

#[no_mangle]
pub extern "C" fn rocksdb_get_column_family_metadata_cf(
    db: *mut rocksdb_t,
    column_family: *mut rocksdb_column_family_handle_t,
) -> *mut rocksdb_column_family_metadata_t {
    column_family_metadata(db, column_family)
}

#[no_mangle]
pub extern "C" fn rocksdb_column_family_metadata_destroy(
    cf_meta: *mut rocksdb_column_family_metadata_t,
) {
    quiet((), || drop_handle(cf_meta))
}

#[no_mangle]
pub extern "C" fn rocksdb_column_family_metadata_get_size(
    cf_meta: *mut rocksdb_column_family_metadata_t,
) -> u64 {
    quiet(0, || {
        handle(cf_meta, "metadata").map_or(0, |meta| meta.size)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_column_family_metadata_get_file_count(
    _cf_meta: *mut rocksdb_column_family_metadata_t,
) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_column_family_metadata_get_name(
    cf_meta: *mut rocksdb_column_family_metadata_t,
) -> *mut c_char {
    quiet(std::ptr::null_mut(), || {
        handle(cf_meta, "metadata").map_or(std::ptr::null_mut(), |meta| malloc_string(&meta.name))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_column_family_metadata_get_level_count(
    _cf_meta: *mut rocksdb_column_family_metadata_t,
) -> usize {
    0
}

/// NULL: level `i` is past the last (there are none), as RocksDB answers for such an `i`.
#[no_mangle]
pub extern "C" fn rocksdb_column_family_metadata_get_level_metadata(
    _cf_meta: *mut rocksdb_column_family_metadata_t,
    _i: usize,
) -> *mut rocksdb_level_metadata_t {
    std::ptr::null_mut()
}

#[no_mangle]
pub extern "C" fn rocksdb_level_metadata_destroy(_level_meta: *mut rocksdb_level_metadata_t) {}

#[no_mangle]
pub extern "C" fn rocksdb_level_metadata_get_level(
    _level_meta: *mut rocksdb_level_metadata_t,
) -> libc::c_int {
    -1
}

#[no_mangle]
pub extern "C" fn rocksdb_level_metadata_get_size(
    _level_meta: *mut rocksdb_level_metadata_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_level_metadata_get_file_count(
    _level_meta: *mut rocksdb_level_metadata_t,
) -> usize {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_level_metadata_get_sst_file_metadata(
    _level_meta: *mut rocksdb_level_metadata_t,
    _i: usize,
) -> *mut rocksdb_sst_file_metadata_t {
    std::ptr::null_mut()
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_metadata_destroy(_file_meta: *mut rocksdb_sst_file_metadata_t) {}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_metadata_get_relative_filename(
    _file_meta: *mut rocksdb_sst_file_metadata_t,
) -> *mut c_char {
    std::ptr::null_mut()
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_metadata_get_directory(
    _file_meta: *mut rocksdb_sst_file_metadata_t,
) -> *mut c_char {
    std::ptr::null_mut()
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_metadata_get_size(
    _file_meta: *mut rocksdb_sst_file_metadata_t,
) -> u64 {
    0
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_metadata_get_smallestkey(
    _file_meta: *mut rocksdb_sst_file_metadata_t,
    len: *mut usize,
) -> *mut c_char {
    set_out(len, 0);
    std::ptr::null_mut()
}

#[no_mangle]
pub extern "C" fn rocksdb_sst_file_metadata_get_largestkey(
    file_meta: *mut rocksdb_sst_file_metadata_t,
    len: *mut usize,
) -> *mut c_char {
    rocksdb_sst_file_metadata_get_smallestkey(file_meta, len)
}
