//! The engine's one public error type. Bindings map [`Error::kind`]; nothing matches on message text.

use std::io;
use std::path::PathBuf;

/// A stable classification of [`Error`]s, for callers and bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller passed something malformed (empty key, bad option value, bad name).
    InvalidArgument,
    /// A size or count limit from [`crate::limits`] was exceeded.
    LimitExceeded,
    /// Bytes read from media failed validation (CRC, magic, bounds).
    Corruption,
    /// The operating system reported an I/O error.
    Io,
    /// The device or file system is out of space.
    NoSpace,
    /// Another process holds the KVDB's lock.
    Locked,
    /// A background failure (e.g. a failed fdatasync) stopped the KVDB; reopen it.
    Poisoned,
    /// The KVDB was closed or the KVS dropped.
    Closed,
    /// A named object (KVS, KVDB) does not exist.
    NotFound,
    /// A transaction lost to a concurrent commit; nothing of it was written. Retry it.
    Conflict,
    /// The KVDB is open read-only: nothing may change it.
    ReadOnly,
}

/// Everything that can go wrong in ShaleDB.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("{what} is {actual} bytes, over the limit of {limit} bytes")]
    LimitExceeded {
        what: &'static str,
        limit: u64,
        actual: u64,
    },
    #[error("corruption in {} at offset {offset}: {detail}", file.display())]
    Corruption {
        file: PathBuf,
        offset: u64,
        detail: String,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("KVDB {} is locked by another process (only one process may open a KVDB at a time)", .0.display())]
    Locked(PathBuf),
    #[error("KVDB is poisoned by an earlier failure and must be reopened: {0}")]
    Poisoned(String),
    #[error("{0} is closed")]
    Closed(&'static str),
    #[error("KVS {0:?} does not exist")]
    KvsNotFound(String),
    #[error("no KVDB at {} (and none is created there: the directory is missing and creation was not asked for, or the KVDB is opened read-only)", .0.display())]
    KvdbNotFound(PathBuf),
    #[error("the KVDB is open read-only: nothing may change it")]
    ReadOnly,
    #[error("corruption was found while the KVDB was open ({0}); to never make it worse, nothing is cleaned or compacted: run `shale check`, then salvage")]
    CorruptionFound(String),
    #[error("transaction conflict: {0}")]
    Conflict(String),
}

impl Error {
    /// The stable kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::LimitExceeded { .. } => ErrorKind::LimitExceeded,
            Error::Corruption { .. } | Error::CorruptionFound(_) => ErrorKind::Corruption,
            Error::Io { source, .. } if is_no_space(source) => ErrorKind::NoSpace,
            Error::Io { .. } => ErrorKind::Io,
            Error::Locked(_) => ErrorKind::Locked,
            Error::Poisoned(_) => ErrorKind::Poisoned,
            Error::Closed(_) => ErrorKind::Closed,
            Error::KvsNotFound(_) | Error::KvdbNotFound(_) => ErrorKind::NotFound,
            Error::ReadOnly => ErrorKind::ReadOnly,
            Error::Conflict(_) => ErrorKind::Conflict,
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        detail: impl Into<String>,
    ) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            detail: detail.into(),
        }
    }
}

fn is_no_space(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOSPC) | Some(libc::EDQUOT)
    )
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
