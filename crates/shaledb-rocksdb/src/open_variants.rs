//! The other ways RocksDB opens a database: with a TTL (a TTL of 0 or less means none, and
//! such an open is a plain open; ShaleDB has no per-database expiry, so a positive TTL fails
//! by name), as a secondary instance (not built), trimming timestamp history (ShaleDB has no
//! user-defined timestamps), and `rocksdb_repair_db`, which is ShaleDB's salvage: an open that
//! sets damaged files aside and rebuilds what can be read, reporting what was lost in a file in
//! the database's directory.

use crate::args::{array, handle, text};
use crate::db::{open_column_family, open_default, open_with_column_families};
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t};
use crate::options::rocksdb_options_t;
use crate::status::{call, Result, Status};
use libc::c_char;

const SECONDARY: &str = "secondary instances (open read-only instead)";

/// RocksDB's DBWithTTL: entries expire `ttl` seconds after written, unless `ttl` <= 0.
fn no_ttl(ttls: &[libc::c_int]) -> Result<()> {
    match ttls.iter().find(|ttl| **ttl > 0) {
        Some(ttl) => Err(Status::not_supported(format!(
            "a TTL of {ttl} seconds (ShaleDB does not expire a database's entries by age)"
        ))),
        None => Ok(()),
    }
}

#[no_mangle]
pub extern "C" fn rocksdb_open_with_ttl(
    options: *const rocksdb_options_t,
    name: *const c_char,
    ttl: libc::c_int,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_t {
    call(errptr, std::ptr::null_mut(), || {
        no_ttl(&[ttl])?;
        open_default(options, name, false)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_open_column_families_with_ttl(
    options: *const rocksdb_options_t,
    name: *const c_char,
    num_column_families: libc::c_int,
    column_family_names: *const *const c_char,
    column_family_options: *const *const rocksdb_options_t,
    column_family_handles: *mut *mut rocksdb_column_family_handle_t,
    ttls: *const libc::c_int,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_t {
    call(errptr, std::ptr::null_mut(), || {
        let count =
            usize::try_from(num_column_families).map_err(|_| Status::invalid("negative count"))?;
        no_ttl(array(ttls, count)?)?;
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
pub extern "C" fn rocksdb_create_column_family_with_ttl(
    db: *mut rocksdb_t,
    column_family_options: *const rocksdb_options_t,
    column_family_name: *const c_char,
    ttl: libc::c_int,
    errptr: *mut *mut c_char,
) -> *mut rocksdb_column_family_handle_t {
    if !call(errptr, false, || no_ttl(&[ttl]).map(|()| true)) {
        return std::ptr::null_mut();
    }
    crate::db::rocksdb_create_column_family(db, column_family_options, column_family_name, errptr)
}

/// Salvages the database at `name` (see the module's comment); fails if none is there.
#[no_mangle]
pub extern "C" fn rocksdb_repair_db(
    _options: *const rocksdb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let path = text(name, "path")?;
        let engine = engine::Db::open(
            path,
            engine::Options {
                create_if_missing: false,
                salvage: true,
                cache_bytes: 0,
                warm_reads_per_sec: 0,
                ..engine::Options::default()
            },
        )?;
        engine.close()?;
        Ok(())
    })
}

/// Creates column families `names`, all with `options`; their handles in a malloc()ed array
/// (`*lencfs` of them), for `rocksdb_create_column_families_destroy`. All or none: one that
/// exists fails the call before any is created.
#[no_mangle]
pub extern "C" fn rocksdb_create_column_families(
    db: *mut rocksdb_t,
    column_family_options: *const rocksdb_options_t,
    num_column_families: libc::c_int,
    column_family_names: *const *const c_char,
    lencfs: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut *mut rocksdb_column_family_handle_t {
    crate::args::set_out(lencfs, 0);
    call(errptr, std::ptr::null_mut(), || {
        let db = handle(db, "db")?;
        let options = handle(column_family_options, "options")?;
        let count =
            usize::try_from(num_column_families).map_err(|_| Status::invalid("negative count"))?;
        let mut names = Vec::with_capacity(count);
        for name in array(column_family_names, count)? {
            names.push(text(*name, "column family name")?);
        }
        let existing = db.engine().list_kvs()?;
        if let Some(name) = names
            .iter()
            .find(|name| existing.iter().any(|e| e == *name))
        {
            return Err(Status::invalid(format!(
                "Column family already exists: {name}"
            )));
        }
        let array =
            crate::args::malloc(count.max(1) * size_of::<*mut rocksdb_column_family_handle_t>())
                .cast::<*mut rocksdb_column_family_handle_t>();
        for (index, name) in names.iter().enumerate() {
            let cf = open_column_family(&db.database, name, options, &[], true)?;
            // SAFETY: `array` has room for `count` handles.
            unsafe {
                *array.add(index) = crate::args::into_handle(rocksdb_column_family_handle_t { cf })
            };
        }
        crate::args::set_out(lencfs, count);
        Ok(array)
    })
}

/// Frees the array `rocksdb_create_column_families` returned (its handles are destroyed one
/// by one with `rocksdb_column_family_handle_destroy`, as in RocksDB).
#[no_mangle]
pub extern "C" fn rocksdb_create_column_families_destroy(
    list: *mut *mut rocksdb_column_family_handle_t,
) {
    // SAFETY: `list` came from malloc in rocksdb_create_column_families (or is NULL).
    unsafe { libc::free(list.cast()) }
}

#[no_mangle]
pub extern "C" fn rocksdb_open_as_secondary(
    _options: *const rocksdb_options_t,
    _name: *const libc::c_char,
    _secondary_path: *const libc::c_char,
    errptr: *mut *mut libc::c_char,
) -> *mut rocksdb_t {
    call(errptr, std::ptr::null_mut(), || {
        Err(Status::not_supported(SECONDARY))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_open_as_secondary_column_families(
    _options: *const rocksdb_options_t,
    _name: *const libc::c_char,
    _secondary_path: *const libc::c_char,
    _num_column_families: libc::c_int,
    _column_family_names: *const *const libc::c_char,
    _column_family_options: *const *const rocksdb_options_t,
    _column_family_handles: *mut *mut rocksdb_column_family_handle_t,
    errptr: *mut *mut libc::c_char,
) -> *mut rocksdb_t {
    call(errptr, std::ptr::null_mut(), || {
        Err(Status::not_supported(SECONDARY))
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_try_catch_up_with_primary(
    _db: *mut rocksdb_t,
    errptr: *mut *mut libc::c_char,
) {
    call(errptr, (), || Err(Status::not_supported(SECONDARY)))
}

#[no_mangle]
pub extern "C" fn rocksdb_open_and_trim_history(
    _options: *const rocksdb_options_t,
    _name: *const libc::c_char,
    _num_column_families: libc::c_int,
    _column_family_names: *const *const libc::c_char,
    _column_family_options: *const *const rocksdb_options_t,
    _column_family_handles: *mut *mut rocksdb_column_family_handle_t,
    _trim_ts: *mut libc::c_char,
    _trim_tslen: usize,
    errptr: *mut *mut libc::c_char,
) -> *mut rocksdb_t {
    call(errptr, std::ptr::null_mut(), || {
        Err(Status::not_supported(
            "user-defined timestamps (open_and_trim_history)",
        ))
    })
}
