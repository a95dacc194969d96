//! Options as text: `rocksdb_get_options_from_string` ("write_buffer_size=1024;
//! block_based_table_factory={block_size=8192}") and `rocksdb_set_options` on an open
//! database. Names are RocksDB's (as its options dump and `LOG` print them); an unknown name
//! or a value that does not parse is "Invalid argument: ...", as in RocksDB. On an open
//! database the knobs have no ShaleDB meaning (those that do are read at open), so a valid
//! change is accepted and changes nothing. RocksDB's OPTIONS files are not written (the `LOG`
//! lists each open's options), so `rocksdb_load_latest_options` fails by name.

use crate::args::{array, handle, handle_mut, text};
use crate::db::{rocksdb_column_family_handle_t, rocksdb_t};
use crate::options::{rocksdb_options_t, OPTIONS_KNOBS};
use crate::plugins::rocksdb_cache_t;
use crate::resources::rocksdb_env_t;
use crate::status::{call, Result, Status};
use crate::table_options::BLOCK_BASED_KNOBS;
use libc::c_char;

/// The names of RocksDB 10.4.2's database and column family options (the option type maps of
/// its options/db_options.cc and options/cf_options.cc), one per line: a name c.h has no
/// setter for is still a valid option.
const ROCKSDB_OPTION_NAMES: &str = include_str!("rocksdb_option_names.txt");

/// The `name=value` pairs of an options string, split at `;` outside braces.
fn pairs(text: &str) -> Result<Vec<(&str, &str)>> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    let bytes = text.as_bytes();
    for index in 0..=bytes.len() {
        match bytes.get(index) {
            Some(b'{') => depth += 1,
            Some(b'}') => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| Status::invalid(format!("unbalanced braces in {text:?}")))?
            }
            Some(b';') | None if depth == 0 => {
                let pair = text[start..index].trim();
                start = index + 1;
                if pair.is_empty() {
                    continue;
                }
                let (name, value) = pair
                    .split_once('=')
                    .ok_or_else(|| Status::invalid(format!("Mismatched key value pair: {pair}")))?;
                out.push((name.trim(), value.trim()));
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(Status::invalid(format!("unbalanced braces in {text:?}")));
    }
    Ok(out)
}

/// Applies an options string to `options`.
fn apply(options: &mut rocksdb_options_t, text: &str) -> Result<()> {
    for (name, value) in pairs(text)? {
        if name == "block_based_table_factory" {
            let inner = value
                .strip_prefix('{')
                .and_then(|value| value.strip_suffix('}'))
                .ok_or_else(|| Status::invalid(format!("{name} takes {{...}}: {value}")))?;
            let table = options.table.get_or_insert_with(Default::default);
            for (name, value) in pairs(inner)? {
                table.settings.set_by_name(BLOCK_BASED_KNOBS, name, value)?;
            }
        } else if OPTIONS_KNOBS.iter().any(|knob| knob.name == name) {
            options.settings.set_by_name(OPTIONS_KNOBS, name, value)?;
        } else if ROCKSDB_OPTION_NAMES.lines().any(|known| known == name) {
            // An option c.h has no setter for: recorded for the LOG.
            options.recorded.insert(name.to_string(), value.to_string());
        } else {
            return Err(Status::invalid(format!("Could not find option: {name}")));
        }
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn rocksdb_get_options_from_string(
    base_options: *const rocksdb_options_t,
    opts_str: *const c_char,
    new_options: *mut rocksdb_options_t,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        let mut options = handle(base_options, "base options")?.clone();
        apply(&mut options, text(opts_str, "options string")?)?;
        *handle_mut(new_options, "new options")? = options;
        Ok(())
    })
}

/// Checks `count` changes to an open database's options (names and values); see the module's
/// comment for what they change.
fn set_options(
    db: *mut rocksdb_t,
    cf: *mut rocksdb_column_family_handle_t,
    count: libc::c_int,
    keys: *const *const c_char,
    values: *const *const c_char,
) -> Result<()> {
    let db = handle(db, "db")?;
    db.column_family(cf)?;
    let count = usize::try_from(count).map_err(|_| Status::invalid("negative count"))?;
    if count == 0 {
        // RocksDB's SetOptions refuses an empty change.
        return Err(Status::invalid("empty input"));
    }
    let mut scratch = rocksdb_options_t::default();
    for (key, value) in array(keys, count)?.iter().zip(array(values, count)?) {
        let pair = format!(
            "{}={}",
            text(*key, "option name")?,
            text(*value, "option value")?
        );
        apply(&mut scratch, &pair)?;
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn rocksdb_set_options(
    db: *mut rocksdb_t,
    count: libc::c_int,
    keys: *const *const c_char,
    values: *const *const c_char,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || {
        set_options(db, std::ptr::null_mut(), count, keys, values)
    })
}

#[no_mangle]
pub extern "C" fn rocksdb_set_options_cf(
    db: *mut rocksdb_t,
    handle_: *mut rocksdb_column_family_handle_t,
    count: libc::c_int,
    keys: *const *const c_char,
    values: *const *const c_char,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || set_options(db, handle_, count, keys, values))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn rocksdb_load_latest_options(
    _db_path: *const c_char,
    _env: *mut rocksdb_env_t,
    _ignore_unknown_options: bool,
    _cache: *mut rocksdb_cache_t,
    _db_options: *mut *mut rocksdb_options_t,
    num_column_families: *mut usize,
    _column_family_names: *mut *mut *mut c_char,
    _column_family_options: *mut *mut *mut rocksdb_options_t,
    errptr: *mut *mut c_char,
) {
    crate::args::set_out(num_column_families, 0);
    call(errptr, (), || {
        Err(Status::not_supported(
            "loading options from an OPTIONS file (ShaleDB does not write them; the LOG lists \
             each open's options)",
        ))
    })
}

/// Nothing to free: `rocksdb_load_latest_options` never hands anything out.
#[no_mangle]
pub extern "C" fn rocksdb_load_latest_options_destroy(
    _db_options: *mut rocksdb_options_t,
    _list_column_family_names: *mut *mut c_char,
    _list_column_family_options: *mut *mut rocksdb_options_t,
    _len: usize,
) {
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_options_string_sets_knobs_by_their_rocksdb_names() {
        let mut options = rocksdb_options_t::default();
        apply(
            &mut options,
            "write_buffer_size=1024; create_if_missing=true;\
             block_based_table_factory={block_size=8192;format_version=5};",
        )
        .unwrap();
        assert_eq!(
            options.value::<usize>("rocksdb_options_set_write_buffer_size"),
            1024
        );
        assert!(options.flag("rocksdb_options_set_create_if_missing"));
        let table = options.table.as_ref().unwrap();
        assert_eq!(
            table.settings.value::<usize>(
                BLOCK_BASED_KNOBS,
                "rocksdb_block_based_options_set_block_size"
            ),
            8192
        );
        apply(&mut options, "paranoid_file_checks=true").unwrap();
        assert_eq!(options.recorded["paranoid_file_checks"], "true");
        let unknown = apply(&mut options, "no_such_option=1").unwrap_err();
        assert!(unknown
            .to_string()
            .starts_with("Invalid argument: Could not find option"));
        assert!(apply(&mut options, "write_buffer_size=lots").is_err());
        assert!(apply(&mut options, "block_based_table_factory={block_size=1").is_err());
    }
}
