//! The storage seam: every segment file's reads, writes and syncs go through these traits, so
//! a test can put a device that fails on demand beneath the engine (`Options::storage`), the
//! way redb's crash tests use its storage backend.
//!
//! The contract a [`StorageFile`] keeps, which the engine relies on (a fault injector breaks
//! it only in the ways a real device may, to test that the engine notices):
//! - `write_all_at(data, offset)` writes all of `data` at `offset`, or returns an error after
//!   which any prefix of `data` may have landed. Nothing written is durable until `sync_data`
//!   returns.
//! - `sync_data()` returning `Ok` means every byte written before the call survives power loss.
//!   An error says nothing about what did; the engine never retries one (it poisons the KVDB).
//! - `read_at(buf, offset)` fills `buf` with what the medium holds from `offset`, short only
//!   at the end of the file. What it holds may be damaged: the engine validates every byte.
//! - For a direct file (`is_direct`), offsets, lengths and buffer addresses of writes are
//!   page-aligned, and those of reads aligned to the file's read alignment.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// One open file of the storage.
pub trait StorageFile: Send + Sync {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()>;
    fn sync_data(&self) -> io::Result<()>;
    fn len_bytes(&self) -> io::Result<u64>;
    /// Whether I/O bypasses the page cache (O_DIRECT).
    fn is_direct(&self) -> bool;
    /// The OS file descriptor, if reads may go to the kernel directly (io_uring batches). A
    /// storage that answers `None` gets the same batches as one `read_at` after another.
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
}

/// Where segment files are created and opened.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Creates `path` for reading and writing, failing if it exists; with direct I/O if
    /// `direct_io` and the file system allows it.
    fn create(&self, path: &Path, direct_io: bool) -> io::Result<Box<dyn StorageFile>>;
    /// Opens the existing `path`, for reading and, if `writable`, writing; with direct I/O
    /// likewise. A read-only KVDB opens its files read-only, so it works on a read-only file
    /// system.
    fn open(
        &self,
        path: &Path,
        direct_io: bool,
        writable: bool,
    ) -> io::Result<Box<dyn StorageFile>>;
}

/// The operating system's file system: `pread`, `pwrite`, `fdatasync`, with O_DIRECT where the
/// file system allows it. Where it refuses O_DIRECT (tmpfs, some overlay file systems) the
/// file falls back to buffered I/O, and a warning says so once per process.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsStorage;

static BUFFERED_FALLBACK_WARNED: AtomicBool = AtomicBool::new(false);

struct OsFile {
    file: File,
    direct: bool,
}

impl OsStorage {
    fn open_file(
        path: &Path,
        direct_io: bool,
        create: bool,
        writable: bool,
    ) -> io::Result<Box<dyn StorageFile>> {
        let open = |direct: bool| {
            let mut options = OpenOptions::new();
            options.read(true).write(writable).create_new(create);
            if direct {
                options.custom_flags(libc::O_DIRECT);
            }
            options.open(path)
        };
        if direct_io {
            match open(true) {
                Ok(file) => return Ok(Box::new(OsFile { file, direct: true })),
                Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
                    if !BUFFERED_FALLBACK_WARNED.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            path = %path.display(),
                            "the file system refuses O_DIRECT; using buffered I/O with fdatasync \
                             (the page cache will also cache segment data)"
                        );
                    }
                }
                Err(error) => return Err(error),
            }
        }
        let file = open(false)?;
        Ok(Box::new(OsFile {
            file,
            direct: false,
        }))
    }
}

impl Storage for OsStorage {
    fn create(&self, path: &Path, direct_io: bool) -> io::Result<Box<dyn StorageFile>> {
        Self::open_file(path, direct_io, true, true)
    }

    fn open(
        &self,
        path: &Path,
        direct_io: bool,
        writable: bool,
    ) -> io::Result<Box<dyn StorageFile>> {
        Self::open_file(path, direct_io, false, writable)
    }
}

impl StorageFile for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }

    fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len_bytes(&self) -> io::Result<u64> {
        self.file.metadata().map(|metadata| metadata.len())
    }

    fn is_direct(&self) -> bool {
        self.direct
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.file.as_raw_fd())
    }
}
