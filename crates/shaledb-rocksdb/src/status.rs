//! RocksDB's `Status` as the C API reports it: a malloc()ed message in `*errptr`, shaped like
//! `Status::ToString()` ("Corruption: ...", "IO error: ..."), whose prefix programs and the
//! `rocksdb` crate read to tell one kind of failure from another.

use crate::args::malloc_string;
use engine::ErrorKind;
use libc::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The codes of RocksDB's `Status` that ShaleDB's failures map onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    NotFound,
    Corruption,
    NotSupported,
    InvalidArgument,
    IoError,
    Busy,
    Aborted,
    ShutdownInProgress,
    TimedOut,
    Expired,
}

impl Code {
    /// The prefix `Status::ToString()` writes for this code (rocksdb/util/status.cc).
    fn prefix(self) -> &'static str {
        match self {
            Code::NotFound => "NotFound: ",
            Code::Corruption => "Corruption: ",
            Code::NotSupported => "Not implemented: ",
            Code::InvalidArgument => "Invalid argument: ",
            Code::IoError => "IO error: ",
            Code::Busy => "Resource busy: ",
            Code::Aborted => "Operation aborted: ",
            Code::ShutdownInProgress => "Shutdown in progress: ",
            Code::TimedOut => "Operation timed out: ",
            Code::Expired => "Operation expired: ",
        }
    }
}

/// A failed call: its code and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub code: Code,
    pub message: String,
}

pub(crate) type Result<T> = std::result::Result<T, Status>;

impl Status {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Status {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Status::new(Code::InvalidArgument, message)
    }

    /// A RocksDB feature ShaleDB does not have: the call fails and says which.
    pub fn not_supported(message: impl Into<String>) -> Self {
        Status::new(Code::NotSupported, message)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(out, "{}{}", self.code.prefix(), self.message)
    }
}

impl From<engine::Error> for Status {
    fn from(error: engine::Error) -> Self {
        let message = error.to_string();
        let code = match error.kind() {
            ErrorKind::InvalidArgument | ErrorKind::LimitExceeded => Code::InvalidArgument,
            ErrorKind::Corruption => Code::Corruption,
            // RocksDB's `Status::NoSpace()` is an IO error whose subcode says so.
            ErrorKind::NoSpace => {
                return Status::new(Code::IoError, format!("No space left on device: {message}"))
            }
            ErrorKind::Io | ErrorKind::Locked | ErrorKind::Poisoned => Code::IoError,
            ErrorKind::Closed => Code::ShutdownInProgress,
            ErrorKind::NotFound => Code::InvalidArgument,
            ErrorKind::Conflict => Code::Busy,
            ErrorKind::ReadOnly => Code::NotSupported,
            _ => Code::IoError,
        };
        Status::new(code, message)
    }
}

/// Stores `status` in `*errptr` as c.h asks: the old message (if any) freed, the new one
/// malloc()ed, for the caller to release with `rocksdb_free` or `free`.
pub(crate) fn report(errptr: *mut *mut c_char, status: &Status) {
    if errptr.is_null() {
        return;
    }
    // SAFETY: c.h requires `errptr` to point at NULL or at a malloc()ed message owned by the
    // caller, which is handed back to us here to replace.
    unsafe {
        libc::free((*errptr).cast());
        *errptr = malloc_string(&status.to_string());
    }
}

/// The text of a caught panic, for the status that reports it.
fn panic_text(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs `body`, turning a panic (which must not unwind into C) into an "Operation aborted"
/// status.
pub(crate) fn caught<T>(body: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        Err(Status::new(
            Code::Aborted,
            format!("internal error in ShaleDB: {}", panic_text(panic)),
        ))
    })
}

/// Runs the body of a call that reports through `errptr`: an error or a panic is stored
/// there, and `failed` returned.
pub(crate) fn call<T>(errptr: *mut *mut c_char, failed: T, body: impl FnOnce() -> Result<T>) -> T {
    caught(body).unwrap_or_else(|status| {
        report(errptr, &status);
        failed
    })
}

/// Runs the body of a call c.h gives no error channel, whose failure shows only as `failed`
/// (NULL, say): an error or a panic is written to stderr, naming the call, and `failed`
/// returned.
pub(crate) fn logged<T>(what: &str, failed: T, body: impl FnOnce() -> Result<T>) -> T {
    caught(body).unwrap_or_else(|status| {
        eprintln!("shaledb-rocksdb: {what}: {status}");
        failed
    })
}

/// Runs the body of a call that has no way to report an error (a setter, a destructor, an
/// accessor): a panic is caught, written to stderr and `failed` returned, never unwound into C.
pub(crate) fn quiet<T>(failed: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(panic) => {
            eprintln!("shaledb-rocksdb: internal error: {}", panic_text(panic));
            failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_rocksdb_prefixes() {
        let status = Status::from(engine::Error::Conflict("key k".into()));
        assert_eq!(
            status.to_string(),
            "Resource busy: transaction conflict: key k"
        );
        let status = Status::not_supported("merge operators");
        assert_eq!(status.to_string(), "Not implemented: merge operators");
    }

    #[test]
    fn a_reported_error_replaces_the_old_one() {
        let mut message: *mut c_char = std::ptr::null_mut();
        let failed = call(&mut message, 7, || Err(Status::invalid("first")));
        assert_eq!(failed, 7);
        call(&mut message, (), || Err(Status::invalid("second")));
        // SAFETY: `message` is the NUL-terminated string `report` allocated.
        let text = unsafe { std::ffi::CStr::from_ptr(message) };
        assert_eq!(text.to_str().unwrap(), "Invalid argument: second");
        // SAFETY: allocated by malloc in `report`, freed once.
        unsafe { libc::free(message.cast()) };
    }

    #[test]
    fn a_panic_becomes_an_error() {
        let mut message: *mut c_char = std::ptr::null_mut();
        let value = call(&mut message, 0, || -> Result<i32> { panic!("boom") });
        assert_eq!(value, 0);
        // SAFETY: as above.
        let text = unsafe { std::ffi::CStr::from_ptr(message) }
            .to_str()
            .unwrap();
        assert!(
            text.starts_with("Operation aborted: internal error"),
            "{text}"
        );
        // SAFETY: as above.
        unsafe { libc::free(message.cast()) };
    }
}
