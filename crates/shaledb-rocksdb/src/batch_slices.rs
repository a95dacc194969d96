//! Write batch operations beyond the plain ones: keys and values given as lists of slices
//! (the `v` variants, each part of one key or value, joined as RocksDB's SliceParts are),
//! `rocksdb_writebatch_iterate_cf`, `create_with_params`, and the variants with user-defined
//! timestamps, which ShaleDB has not: such an operation becomes the batch's error, and
//! `rocksdb_write` fails with it.

use crate::args::{array, bytes, handle, handle_mut, into_handle};
use crate::batch::{add, rocksdb_writebatch_t, OpKind};
use crate::db::rocksdb_column_family_handle_t;
use crate::status::{call, quiet, Result, Status};
use libc::{c_char, c_void};

const TIMESTAMPS: &str = "user-defined timestamps";

/// The parts `list[i]` (`sizes[i]` bytes each, `count` of them) joined into one slice.
pub(crate) fn joined(
    count: libc::c_int,
    list: *const *const c_char,
    sizes: *const usize,
) -> Result<Vec<u8>> {
    let count = usize::try_from(count).map_err(|_| Status::invalid("negative count"))?;
    let (parts, sizes) = (array(list, count)?, array(sizes, count)?);
    let mut out = Vec::new();
    for (part, size) in parts.iter().zip(sizes) {
        out.extend_from_slice(bytes(*part, *size)?);
    }
    Ok(out)
}

/// Adds an operation whose key and value come in parts; parts that cannot be read become
/// the batch's error.
fn add_parts(
    batch: *mut rocksdb_writebatch_t,
    cf: *mut rocksdb_column_family_handle_t,
    kind: OpKind,
    key: Result<Vec<u8>>,
    value: Result<Vec<u8>>,
) {
    match key.and_then(|key| Ok((key, value?))) {
        Ok((key, value)) => add(
            batch,
            cf,
            kind,
            (key.as_ptr().cast(), key.len()),
            (value.as_ptr().cast(), value.len()),
        ),
        Err(status) => fail(batch, status),
    }
}

/// Keeps `status` as the batch's error (its first one wins).
fn fail(batch: *mut rocksdb_writebatch_t, status: Status) {
    quiet((), || {
        if let Ok(batch) = handle_mut(batch, "batch") {
            batch.error.get_or_insert(status);
        }
    })
}

/// Defines the `v` variants of a batch type's writes (put, merge, delete, delete_range, each
/// plain and `_cf`) over `$add_parts(batch, column family, kind, key parts, value parts)`.
macro_rules! slice_part_writes {
    ($batch:ty, $add_parts:path {
        $putv:ident, $putv_cf:ident, $mergev:ident, $mergev_cf:ident,
        $deletev:ident, $deletev_cf:ident, $delete_rangev:ident, $delete_rangev_cf:ident $(,)?
    }) => {
        slice_part_writes!(@with_value $batch, $add_parts, $putv, $putv_cf, $crate::batch::OpKind::Put);
        slice_part_writes!(@with_value $batch, $add_parts, $mergev, $mergev_cf, $crate::batch::OpKind::Merge);

        #[no_mangle]
        pub extern "C" fn $deletev(
            b: *mut $batch,
            num_keys: libc::c_int,
            keys_list: *const *const libc::c_char,
            keys_list_sizes: *const usize,
        ) {
            $deletev_cf(b, std::ptr::null_mut(), num_keys, keys_list, keys_list_sizes)
        }

        #[no_mangle]
        pub extern "C" fn $deletev_cf(
            b: *mut $batch,
            column_family: *mut $crate::db::rocksdb_column_family_handle_t,
            num_keys: libc::c_int,
            keys_list: *const *const libc::c_char,
            keys_list_sizes: *const usize,
        ) {
            $add_parts(
                b,
                column_family,
                $crate::batch::OpKind::Delete,
                $crate::batch_slices::joined(num_keys, keys_list, keys_list_sizes),
                Ok(Vec::new()),
            )
        }

        #[no_mangle]
        pub extern "C" fn $delete_rangev(
            b: *mut $batch,
            num_keys: libc::c_int,
            start_keys_list: *const *const libc::c_char,
            start_keys_list_sizes: *const usize,
            end_keys_list: *const *const libc::c_char,
            end_keys_list_sizes: *const usize,
        ) {
            $delete_rangev_cf(
                b,
                std::ptr::null_mut(),
                num_keys,
                start_keys_list,
                start_keys_list_sizes,
                end_keys_list,
                end_keys_list_sizes,
            )
        }

        #[no_mangle]
        pub extern "C" fn $delete_rangev_cf(
            b: *mut $batch,
            column_family: *mut $crate::db::rocksdb_column_family_handle_t,
            num_keys: libc::c_int,
            start_keys_list: *const *const libc::c_char,
            start_keys_list_sizes: *const usize,
            end_keys_list: *const *const libc::c_char,
            end_keys_list_sizes: *const usize,
        ) {
            $add_parts(
                b,
                column_family,
                $crate::batch::OpKind::DeleteRange,
                $crate::batch_slices::joined(num_keys, start_keys_list, start_keys_list_sizes),
                $crate::batch_slices::joined(num_keys, end_keys_list, end_keys_list_sizes),
            )
        }
    };
    (@with_value $batch:ty, $add_parts:path, $name:ident, $name_cf:ident, $kind:expr) => {
        #[no_mangle]
        pub extern "C" fn $name(
            b: *mut $batch,
            num_keys: libc::c_int,
            keys_list: *const *const libc::c_char,
            keys_list_sizes: *const usize,
            num_values: libc::c_int,
            values_list: *const *const libc::c_char,
            values_list_sizes: *const usize,
        ) {
            $name_cf(
                b,
                std::ptr::null_mut(),
                num_keys,
                keys_list,
                keys_list_sizes,
                num_values,
                values_list,
                values_list_sizes,
            )
        }

        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub extern "C" fn $name_cf(
            b: *mut $batch,
            column_family: *mut $crate::db::rocksdb_column_family_handle_t,
            num_keys: libc::c_int,
            keys_list: *const *const libc::c_char,
            keys_list_sizes: *const usize,
            num_values: libc::c_int,
            values_list: *const *const libc::c_char,
            values_list_sizes: *const usize,
        ) {
            $add_parts(
                b,
                column_family,
                $kind,
                $crate::batch_slices::joined(num_keys, keys_list, keys_list_sizes),
                $crate::batch_slices::joined(num_values, values_list, values_list_sizes),
            )
        }
    };
}

pub(crate) use slice_part_writes;

slice_part_writes!(
    rocksdb_writebatch_t,
    add_parts {
        rocksdb_writebatch_putv,
        rocksdb_writebatch_putv_cf,
        rocksdb_writebatch_mergev,
        rocksdb_writebatch_mergev_cf,
        rocksdb_writebatch_deletev,
        rocksdb_writebatch_deletev_cf,
        rocksdb_writebatch_delete_rangev,
        rocksdb_writebatch_delete_rangev_cf,
    }
);

/// A batch; the sizes and protection asked for have no ShaleDB meaning (its commits are
/// bounded by the KVDB's batch limit), and a default column family with timestamps cannot be
/// honoured: the batch then fails at write.
#[no_mangle]
pub extern "C" fn rocksdb_writebatch_create_with_params(
    _reserved_bytes: usize,
    _max_bytes: usize,
    _protection_bytes_per_key: usize,
    default_cf_ts_sz: usize,
) -> *mut rocksdb_writebatch_t {
    let batch = into_handle(rocksdb_writebatch_t::default());
    if default_cf_ts_sz > 0 {
        fail(batch, Status::not_supported(TIMESTAMPS));
    }
    batch
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_put_cf_with_ts(
    b: *mut rocksdb_writebatch_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _key: *const c_char,
    _klen: usize,
    _ts: *const c_char,
    _tslen: usize,
    _val: *const c_char,
    _vlen: usize,
) {
    fail(b, Status::not_supported(TIMESTAMPS))
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_delete_cf_with_ts(
    b: *mut rocksdb_writebatch_t,
    _column_family: *mut rocksdb_column_family_handle_t,
    _key: *const c_char,
    _klen: usize,
    _ts: *const c_char,
    _tslen: usize,
) {
    fail(b, Status::not_supported(TIMESTAMPS))
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_singledelete_cf_with_ts(
    b: *mut rocksdb_writebatch_t,
    column_family: *mut rocksdb_column_family_handle_t,
    key: *const c_char,
    klen: usize,
    ts: *const c_char,
    tslen: usize,
) {
    rocksdb_writebatch_delete_cf_with_ts(b, column_family, key, klen, ts, tslen)
}

#[no_mangle]
pub extern "C" fn rocksdb_writebatch_update_timestamps(
    _wb: *mut rocksdb_writebatch_t,
    _ts: *const c_char,
    _tslen: usize,
    _state: *mut c_void,
    _get_ts_size: Option<unsafe extern "C" fn(*mut c_void, u32) -> usize>,
    errptr: *mut *mut c_char,
) {
    call(errptr, (), || Err(Status::not_supported(TIMESTAMPS)))
}

type PutCf = unsafe extern "C" fn(*mut c_void, u32, *const c_char, usize, *const c_char, usize);
type DeleteCf = unsafe extern "C" fn(*mut c_void, u32, *const c_char, usize);

/// Calls `put_cf`, `deleted_cf` or `merge_cf` for each put, delete and merge, in order, with
/// its column family's number.
#[no_mangle]
pub extern "C" fn rocksdb_writebatch_iterate_cf(
    batch: *mut rocksdb_writebatch_t,
    state: *mut c_void,
    put_cf: Option<PutCf>,
    deleted_cf: Option<DeleteCf>,
    merge_cf: Option<PutCf>,
) {
    quiet((), || {
        let Ok(batch) = handle(batch, "batch") else {
            return;
        };
        for op in &batch.ops {
            let key = (op.key.as_ptr().cast(), op.key.len());
            let value = (op.value.as_ptr().cast(), op.value.len());
            match (op.kind, put_cf, deleted_cf, merge_cf) {
                // SAFETY: the program's callbacks take its state and slices valid for the call.
                (OpKind::Put, Some(put), _, _) => unsafe {
                    put(state, op.cf, key.0, key.1, value.0, value.1)
                },
                // SAFETY: as above.
                (OpKind::Delete | OpKind::SingleDelete, _, Some(deleted), _) => unsafe {
                    deleted(state, op.cf, key.0, key.1)
                },
                // SAFETY: as above.
                (OpKind::Merge, _, _, Some(merge)) => unsafe {
                    merge(state, op.cf, key.0, key.1, value.0, value.1)
                },
                _ => {}
            }
        }
    })
}
