//! Media: classes of devices, aligned buffers, and segment files read and written with direct I/O.
//!
//! Every write and scan of a segment file is page-aligned in offset, length and memory address,
//! and every exact read (a get's one record) aligned to the device's logical block, so the file
//! can be opened with O_DIRECT and the page cache never acts as a hidden cache.
//! Where the file system refuses O_DIRECT (tmpfs, some overlay file systems) the file falls back
//! to buffered I/O with `fdatasync`, and a warning says so once per process.

use crate::error::{Error, Result};
use crate::limits::PAGE_BYTES;
use bytes::Bytes;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A class of media. Only `Capacity` is required; `Staging` is the optional fast class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MediaClass {
    Staging = 0,
    Capacity = 1,
}

impl MediaClass {
    pub const ALL: [MediaClass; 2] = [MediaClass::Staging, MediaClass::Capacity];

    pub fn name(self) -> &'static str {
        match self {
            MediaClass::Staging => "staging",
            MediaClass::Capacity => "capacity",
        }
    }

    pub(crate) fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(MediaClass::Staging),
            1 => Some(MediaClass::Capacity),
            _ => None,
        }
    }
}

/// Why bytes are written to media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePurpose {
    Client = 0,
    Cleaning = 1,
    Checkpoint = 2,
}

/// Why bytes are read from media.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPurpose {
    Get = 0,
    Scan = 1,
    Cleaning = 2,
    /// Recovery, check and headers.
    Other = 3,
}

/// Bytes moved to and from one media class, by purpose.
#[derive(Debug, Default)]
pub struct MediaCounters {
    written: [AtomicU64; 3],
    read: [AtomicU64; 4],
}

impl MediaCounters {
    pub fn add_written(&self, purpose: WritePurpose, bytes: u64) {
        self.written[purpose as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn add_read(&self, purpose: ReadPurpose, bytes: u64) {
        self.read[purpose as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn written(&self, purpose: WritePurpose) -> u64 {
        self.written[purpose as usize].load(Ordering::Relaxed)
    }

    pub fn read(&self, purpose: ReadPurpose) -> u64 {
        self.read[purpose as usize].load(Ordering::Relaxed)
    }

    /// (bytes written, bytes read), all purposes.
    pub fn snapshot(&self) -> (u64, u64) {
        let sum = |counters: &[AtomicU64]| {
            counters
                .iter()
                .map(|counter| counter.load(Ordering::Relaxed))
                .sum()
        };
        (sum(&self.written), sum(&self.read))
    }
}

pub fn round_up_to_page(bytes: u64) -> u64 {
    bytes.div_ceil(PAGE_BYTES as u64) * PAGE_BYTES as u64
}

pub fn round_down_to_page(bytes: u64) -> u64 {
    bytes / PAGE_BYTES as u64 * PAGE_BYTES as u64
}

/// A byte buffer whose data starts at a page-aligned address, built from a plain `Vec` (no
/// `unsafe`): the vector is over-allocated by a page and the data window starts at the first
/// aligned address inside it. Bytes past `len` up to `capacity` are kept zero, so the padded
/// page-rounded view can be written as is.
pub struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
    capacity: usize,
}

impl AlignedBuf {
    pub fn zeroed(capacity: usize) -> Self {
        let capacity = round_up_to_page(capacity as u64) as usize;
        let storage = vec![0u8; capacity + PAGE_BYTES];
        let start = storage.as_ptr().align_offset(PAGE_BYTES);
        assert!(start < PAGE_BYTES, "a page-sized window always exists");
        AlignedBuf {
            storage,
            start,
            len: 0,
            capacity,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    /// The data rounded up to whole pages, zero padded: what a direct write sends.
    pub fn padded(&self) -> &[u8] {
        let padded = round_up_to_page(self.len as u64) as usize;
        &self.storage[self.start..self.start + padded]
    }

    /// The whole capacity, for reading into; call [`AlignedBuf::set_len`] afterwards.
    pub fn window_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.capacity]
    }

    pub fn set_len(&mut self, len: usize) {
        assert!(len <= self.capacity);
        self.len = len;
    }

    pub fn extend_from_slice(&mut self, data: &[u8]) {
        assert!(
            self.len + data.len() <= self.capacity,
            "aligned buffer overflow"
        );
        let at = self.start + self.len;
        self.storage[at..at + data.len()].copy_from_slice(data);
        self.len += data.len();
    }

    /// Empties the buffer, re-zeroing what was used so the padding invariant holds.
    pub fn clear(&mut self) {
        let used = round_up_to_page(self.len as u64) as usize;
        self.storage[self.start..self.start + used].fill(0);
        self.len = 0;
    }

    /// Turns `range` of the data into `Bytes` without copying.
    pub fn into_bytes(self, range: std::ops::Range<usize>) -> Bytes {
        assert!(range.end <= self.len);
        Bytes::from(self.storage).slice(self.start + range.start..self.start + range.end)
    }
}

static BUFFERED_FALLBACK_WARNED: AtomicBool = AtomicBool::new(false);

/// The smallest unit any block device reads: direct reads try this alignment first.
const SECTOR_BYTES: usize = 512;

/// One segment file on one media class.
pub struct SegmentFile {
    path: PathBuf,
    file: File,
    direct: bool,
    /// Offset and length alignment of exact reads: the device's logical block for direct I/O
    /// (512 bytes on most devices, so a 1 KiB record costs 1.5 KiB of transfer, not 4-8 KiB of
    /// whole pages), a sector for buffered files.
    read_align: usize,
    counters: Arc<MediaCounters>,
}

impl SegmentFile {
    /// Creates a new file (failing if it exists) holding `header` in its first page.
    pub fn create(
        path: &Path,
        direct_io: bool,
        counters: Arc<MediaCounters>,
        header: &AlignedBuf,
        purpose: WritePurpose,
    ) -> Result<Self> {
        let (file, direct) = Self::open_file(path, direct_io, true)?;
        let mut segment = SegmentFile {
            path: path.to_owned(),
            file,
            direct,
            read_align: PAGE_BYTES,
            counters,
        };
        segment.write_at(0, header.padded(), purpose)?;
        segment.sync()?;
        segment.read_align = segment.probe_read_alignment();
        Ok(segment)
    }

    pub fn open(path: &Path, direct_io: bool, counters: Arc<MediaCounters>) -> Result<Self> {
        let (file, direct) = Self::open_file(path, direct_io, false)?;
        let mut segment = SegmentFile {
            path: path.to_owned(),
            file,
            direct,
            read_align: PAGE_BYTES,
            counters,
        };
        segment.read_align = segment.probe_read_alignment();
        Ok(segment)
    }

    /// Sector-aligned direct reads work where the device's logical block is 512 bytes; where
    /// the kernel refuses one (EINVAL), reads stay page-aligned.
    fn probe_read_alignment(&self) -> usize {
        if !self.direct {
            return SECTOR_BYTES;
        }
        let mut buf = AlignedBuf::zeroed(PAGE_BYTES);
        let window = &mut buf.window_mut()[..SECTOR_BYTES];
        match self.file.read_at(window, SECTOR_BYTES as u64) {
            Ok(_) => SECTOR_BYTES,
            Err(_) => PAGE_BYTES,
        }
    }

    fn open_file(path: &Path, direct_io: bool, create: bool) -> Result<(File, bool)> {
        let open = |direct: bool| {
            let mut options = OpenOptions::new();
            options.read(true).write(true).create_new(create);
            if direct {
                options.custom_flags(libc::O_DIRECT);
            }
            options.open(path)
        };
        if direct_io {
            match open(true) {
                Ok(file) => return Ok((file, true)),
                Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
                    if !BUFFERED_FALLBACK_WARNED.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            path = %path.display(),
                            "the file system refuses O_DIRECT; using buffered I/O with fdatasync \
                             (the page cache will also cache segment data)"
                        );
                    }
                }
                Err(error) => return Err(Error::io(format!("open {}", path.display()), error)),
            }
        }
        let file =
            open(false).map_err(|error| Error::io(format!("open {}", path.display()), error))?;
        Ok((file, false))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Writes page-aligned `data` at page-aligned `offset`.
    pub fn write_at(&self, offset: u64, data: &[u8], purpose: WritePurpose) -> Result<()> {
        debug_assert_eq!(offset % PAGE_BYTES as u64, 0);
        debug_assert_eq!(data.len() % PAGE_BYTES, 0);
        self.file.write_all_at(data, offset).map_err(|error| {
            Error::io(format!("write {} at {offset}", self.path.display()), error)
        })?;
        self.counters.add_written(purpose, data.len() as u64);
        Ok(())
    }

    /// `fdatasync`: everything written so far survives power loss.
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|error| Error::io(format!("fdatasync {}", self.path.display()), error))
    }

    /// Reads whole pages starting at page-aligned `offset` into `buf`; returns the bytes read,
    /// which is short only at the end of the file.
    pub fn read_pages(
        &self,
        offset: u64,
        buf: &mut AlignedBuf,
        purpose: ReadPurpose,
    ) -> Result<usize> {
        debug_assert_eq!(offset % PAGE_BYTES as u64, 0);
        let len = buf.capacity();
        self.read_aligned(offset, buf, len, purpose)
    }

    /// Reads `len` bytes at `offset` (both aligned to `read_align`) into the start of `buf`.
    fn read_aligned(
        &self,
        offset: u64,
        buf: &mut AlignedBuf,
        len: usize,
        purpose: ReadPurpose,
    ) -> Result<usize> {
        let window = &mut buf.window_mut()[..len];
        let mut done = 0;
        while done < window.len() {
            match self.file.read_at(&mut window[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(read) => done += read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    return Err(Error::io(
                        format!("read {} at {offset}", self.path.display()),
                        error,
                    ))
                }
            }
        }
        buf.set_len(done);
        self.counters.add_read(purpose, done as u64);
        Ok(done)
    }

    /// Reads exactly `len` bytes at any `offset` with one aligned device read of the fewest
    /// sectors (or pages) that hold them.
    pub fn read_exact_at(&self, offset: u64, len: usize, purpose: ReadPurpose) -> Result<Bytes> {
        let align = self.read_align as u64;
        let aligned = offset / align * align;
        let skip = (offset - aligned) as usize;
        let aligned_len = ((skip + len) as u64).div_ceil(align) * align;
        let mut buf = AlignedBuf::zeroed(aligned_len as usize);
        let read = self.read_aligned(aligned, &mut buf, aligned_len as usize, purpose)?;
        if read < skip + len {
            return Err(Error::corruption(
                &self.path,
                offset,
                format!("record of {len} bytes runs past the end of the file"),
            ));
        }
        Ok(buf.into_bytes(skip..skip + len))
    }

    pub fn len_bytes(&self) -> Result<u64> {
        self.file
            .metadata()
            .map(|metadata| metadata.len())
            .map_err(|error| Error::io(format!("stat {}", self.path.display()), error))
    }
}

/// `fsync` on a directory, so that creating, renaming or deleting a file in it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|error| Error::io(format!("fsync directory {}", dir.display()), error))
}

/// Replaces `dir/name` with `bytes` atomically and durably: writes `dir/name.tmp`, fsyncs it,
/// renames it over `dir/name`, and fsyncs `dir`.
pub fn replace_file_durably(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let temporary = dir.join(format!("{name}.tmp"));
    let mut file = std::fs::File::create(&temporary)
        .map_err(|error| Error::io(format!("create {}", temporary.display()), error))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|error| Error::io(format!("write {}", temporary.display()), error))?;
    std::fs::rename(&temporary, dir.join(name))
        .map_err(|error| Error::io(format!("rename {}", temporary.display()), error))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffer_is_aligned_and_zero_padded() {
        let mut buf = AlignedBuf::zeroed(10_000);
        assert_eq!(buf.capacity(), 3 * PAGE_BYTES);
        assert_eq!(buf.padded().as_ptr() as usize % PAGE_BYTES, 0);
        buf.extend_from_slice(&[7; 5000]);
        assert_eq!(buf.padded().len(), 2 * PAGE_BYTES);
        assert!(buf.padded()[5000..].iter().all(|&byte| byte == 0));
        buf.clear();
        assert!(buf.padded().is_empty());
        assert!(buf.window_mut().iter().all(|&byte| byte == 0));
    }

    #[test]
    fn unaligned_reads_return_exact_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let counters = Arc::new(MediaCounters::default());
        let mut header = AlignedBuf::zeroed(PAGE_BYTES);
        header.extend_from_slice(b"header");
        let file = SegmentFile::create(
            &dir.path().join("seg"),
            true,
            counters.clone(),
            &header,
            WritePurpose::Client,
        )
        .unwrap();
        let mut data = AlignedBuf::zeroed(3 * PAGE_BYTES);
        let pattern: Vec<u8> = (0..3 * PAGE_BYTES)
            .map(|index| (index % 251) as u8)
            .collect();
        data.extend_from_slice(&pattern);
        file.write_at(PAGE_BYTES as u64, data.padded(), WritePurpose::Client)
            .unwrap();
        let got = file
            .read_exact_at(PAGE_BYTES as u64 + 4000, 300, ReadPurpose::Get)
            .unwrap();
        assert_eq!(&got[..], &pattern[4000..4300]);
        assert!(file
            .read_exact_at(4 * PAGE_BYTES as u64 - 10, 100, ReadPurpose::Get)
            .is_err());
        assert_eq!(counters.snapshot().0, 4 * PAGE_BYTES as u64);
        assert_eq!(
            counters.written(WritePurpose::Client),
            4 * PAGE_BYTES as u64
        );
        assert_eq!(
            counters.read(ReadPurpose::Get),
            counters.snapshot().1,
            "every read here was a get"
        );
        // Each read costs the aligned blocks that hold its bytes (sectors where the device
        // allows, else pages), in one read; the one past the end gets the file's last block.
        let align = file.read_align as u64;
        let blocks = |start: u64, end: u64| end.div_ceil(align) * align - start / align * align;
        let file_end = 4 * PAGE_BYTES as u64;
        assert_eq!(
            counters.read(ReadPurpose::Get),
            blocks(8096, 8396) + (file_end - (file_end - 10) / align * align),
        );
        assert!(blocks(8096, 8396) < 2 * PAGE_BYTES as u64 || align == PAGE_BYTES as u64);
    }
}
