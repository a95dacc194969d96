//! Reading C arguments and handing memory back to C.
//!
//! Handles are `Box`es given to C by [`into_handle`] and taken back by [`drop_handle`]; c.h
//! requires every pointer argument to be non-NULL and every handle to be live, so a handle is
//! borrowed with [`handle`], which still turns NULL into an error rather than a crash.

use crate::status::{Result, Status};
use libc::c_char;
use std::ffi::CStr;

/// Gives `value` to C as an opaque handle.
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Takes back and drops a handle from [`into_handle`]; NULL is ignored, as RocksDB's
/// destructors ignore it.
pub(crate) fn drop_handle<T>(pointer: *mut T) {
    if !pointer.is_null() {
        // SAFETY: c.h hands each handle to its destroy function once, after its last use; it
        // came from `into_handle`, so it is a live `Box<T>`.
        drop(unsafe { Box::from_raw(pointer) });
    }
}

/// Borrows the object behind a handle.
pub(crate) fn handle<'a, T>(pointer: *const T, what: &str) -> Result<&'a T> {
    // SAFETY: c.h requires handles to be live objects this library returned; NULL is refused.
    unsafe { pointer.as_ref() }.ok_or_else(|| Status::invalid(format!("{what} is NULL")))
}

/// Borrows the object behind a handle, to change it. c.h leaves it to the caller not to use
/// one option, batch or iterator object from two threads at once, as RocksDB does.
pub(crate) fn handle_mut<'a, T>(pointer: *mut T, what: &str) -> Result<&'a mut T> {
    // SAFETY: as `handle`; the caller uses this object from one thread at a time.
    unsafe { pointer.as_mut() }.ok_or_else(|| Status::invalid(format!("{what} is NULL")))
}

/// The `len` bytes at `pointer` (any pointer when `len` is 0).
pub(crate) fn bytes<'a>(pointer: *const c_char, len: usize) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if pointer.is_null() || len > isize::MAX as usize {
        return Err(Status::invalid(format!(
            "a slice of {len} bytes at NULL or out of range"
        )));
    }
    // SAFETY: c.h passes a slice as a pointer to `len` readable bytes, valid for the call.
    Ok(unsafe { std::slice::from_raw_parts(pointer.cast(), len) })
}

/// A NUL-terminated string argument.
pub(crate) fn text<'a>(pointer: *const c_char, what: &str) -> Result<&'a str> {
    if pointer.is_null() {
        return Err(Status::invalid(format!("{what} is NULL")));
    }
    // SAFETY: c.h passes names and paths as NUL-terminated strings valid for the call.
    unsafe { CStr::from_ptr(pointer) }
        .to_str()
        .map_err(|_| Status::invalid(format!("{what} is not UTF-8")))
}

/// Arrays of `count` elements at `pointer` (any pointer when `count` is 0).
pub(crate) fn array<'a, T>(pointer: *const T, count: usize) -> Result<&'a [T]> {
    if count == 0 {
        return Ok(&[]);
    }
    if pointer.is_null() {
        return Err(Status::invalid(format!("an array of {count} at NULL")));
    }
    // SAFETY: c.h passes arrays as a pointer to `count` initialized elements, valid for the
    // call.
    Ok(unsafe { std::slice::from_raw_parts(pointer, count) })
}

/// `bytes` bytes from malloc, for C to free with `free` or `rocksdb_free`; aborts when memory
/// is exhausted, as RocksDB's allocations do.
pub(crate) fn malloc(bytes: usize) -> *mut libc::c_void {
    // SAFETY: malloc(n) is sound for any n.
    let memory = unsafe { libc::malloc(bytes) };
    if memory.is_null() {
        std::process::abort();
    }
    memory
}

/// A malloc()ed copy of `data`, which C frees with `free` or `rocksdb_free`; its length goes to
/// `*len`. Never NULL for an empty value: c.h reads NULL as "not found".
pub(crate) fn malloc_bytes(data: &[u8], len: *mut usize) -> *mut c_char {
    // One extra byte, so an empty value is not NULL (and a string has room for its NUL).
    let copy = malloc(data.len() + 1).cast::<c_char>();
    // SAFETY: `copy` has room for `data.len()` bytes, and the two do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().cast(), copy, data.len()) };
    set_out(len, data.len());
    copy
}

/// A malloc()ed NUL-terminated copy of `text` (NULs inside become spaces).
pub(crate) fn malloc_string(text: &str) -> *mut c_char {
    let copy = malloc_bytes(text.as_bytes(), std::ptr::null_mut());
    // SAFETY: `malloc_bytes` left one byte of room past the text for the terminator.
    unsafe {
        for index in 0..text.len() {
            if *copy.add(index) == 0 {
                *copy.add(index) = b' ' as c_char;
            }
        }
        *copy.add(text.len()) = 0;
    }
    copy
}

/// Writes `value` through an out-pointer that may be NULL.
pub(crate) fn set_out<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: c.h passes out-parameters as valid pointers to fill (NULL: not wanted).
        unsafe { *out = value };
    }
}
