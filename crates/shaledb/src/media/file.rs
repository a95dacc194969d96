//! Segment files: opened through the storage seam (O_DIRECT where the file system allows it),
//! written in whole pages, read in the fewest aligned blocks that hold a record.

use super::buf::AlignedBuf;
use super::counters::{MediaCounters, ReadPurpose, WritePurpose};
use super::storage::{Storage, StorageFile};
use crate::error::{Error, Result};
use crate::limits::PAGE_BYTES;
use bytes::Bytes;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The smallest unit any block device reads: direct reads try this alignment first.
const SECTOR_BYTES: usize = 512;

/// Records whose aligned blocks fit in this many bytes are read into a buffer each thread
/// keeps (allocated and zeroed once; only ever read into, so its padding need not stay zero).
const READ_BUFFER_BYTES: usize = 64 << 10;

thread_local! {
    static READ_BUFFER: RefCell<Option<AlignedBuf>> = const { RefCell::new(None) };
}

/// One segment file on one media class.
pub struct SegmentFile {
    path: PathBuf,
    file: Box<dyn StorageFile>,
    /// Offset and length alignment of exact reads: the device's logical block for direct I/O
    /// (512 bytes on most devices, so a 1 KiB record costs 1.5 KiB of transfer, not 4-8 KiB of
    /// whole pages), a sector for buffered files.
    read_align: usize,
    counters: Arc<MediaCounters>,
}

impl SegmentFile {
    /// Creates a new file (failing if it exists) holding `header` in its first page.
    pub fn create(
        storage: &dyn Storage,
        path: &Path,
        direct_io: bool,
        counters: Arc<MediaCounters>,
        header: &AlignedBuf,
        purpose: WritePurpose,
    ) -> Result<Self> {
        let file = storage
            .create(path, direct_io)
            .map_err(|error| Error::io(format!("create {}", path.display()), error))?;
        let mut segment = Self::page_aligned(path, file, counters);
        segment.write_at(0, header.padded(), purpose)?;
        segment.sync()?;
        segment.read_align = segment.probe_read_alignment();
        Ok(segment)
    }

    pub fn open(
        storage: &dyn Storage,
        path: &Path,
        direct_io: bool,
        writable: bool,
        counters: Arc<MediaCounters>,
    ) -> Result<Self> {
        let file = storage
            .open(path, direct_io, writable)
            .map_err(|error| Error::io(format!("open {}", path.display()), error))?;
        let mut segment = Self::page_aligned(path, file, counters);
        segment.read_align = segment.probe_read_alignment();
        Ok(segment)
    }

    /// A segment file whose exact reads are page-aligned until its alignment is probed.
    fn page_aligned(path: &Path, file: Box<dyn StorageFile>, counters: Arc<MediaCounters>) -> Self {
        SegmentFile {
            path: path.to_owned(),
            file,
            read_align: PAGE_BYTES,
            counters,
        }
    }

    /// Sector-aligned direct reads work where the device's logical block is 512 bytes; where
    /// the kernel refuses one (EINVAL), reads stay page-aligned.
    fn probe_read_alignment(&self) -> usize {
        if !self.file.is_direct() {
            return SECTOR_BYTES;
        }
        let mut buf = AlignedBuf::zeroed(PAGE_BYTES);
        let window = &mut buf.window_mut()[..SECTOR_BYTES];
        match self.file.read_at(window, SECTOR_BYTES as u64) {
            Ok(_) => SECTOR_BYTES,
            Err(_) => PAGE_BYTES,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_direct(&self) -> bool {
        self.file.is_direct()
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
            .map_err(|error| self.read_error(offset, error))
    }

    /// Reads `len` bytes at `offset` (both aligned to `read_align`) into the start of `buf`;
    /// the caller names the error by what it was reading.
    fn read_aligned(
        &self,
        offset: u64,
        buf: &mut AlignedBuf,
        len: usize,
        purpose: ReadPurpose,
    ) -> std::io::Result<usize> {
        let done = self.fill(&mut buf.window_mut()[..len], offset, 0)?;
        buf.set_len(done);
        self.counters.add_read(purpose, done as u64);
        Ok(done)
    }

    /// Fills `window` (read at `offset`) from byte `done` on, retrying interrupted and short
    /// reads; returns the bytes it holds, short only at the end of the file.
    pub(super) fn fill(
        &self,
        window: &mut [u8],
        offset: u64,
        mut done: usize,
    ) -> std::io::Result<usize> {
        while done < window.len() {
            match self.file.read_at(&mut window[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(read) => done += read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(done)
    }

    pub(super) fn read_error(&self, offset: u64, error: std::io::Error) -> Error {
        Error::io(format!("read {} at {offset}", self.path.display()), error)
    }

    pub(super) fn count_read(&self, purpose: ReadPurpose, bytes: usize) {
        self.counters.add_read(purpose, bytes as u64);
    }

    pub(super) fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.file.raw_fd()
    }

    /// The fewest aligned blocks that hold `len` bytes at `offset`: their offset and length,
    /// and where the bytes start inside them.
    pub(super) fn aligned_span(&self, offset: u64, len: usize) -> (u64, usize, usize) {
        let align = self.read_align as u64;
        let aligned = offset / align * align;
        let skip = (offset - aligned) as usize;
        let aligned_len = ((skip + len) as u64).div_ceil(align) * align;
        (aligned, aligned_len as usize, skip)
    }

    /// The error for a record that the file ends inside of.
    pub(super) fn past_end(&self, offset: u64, len: usize) -> Error {
        Error::corruption(
            &self.path,
            offset,
            format!("record of {len} bytes runs past the end of the file"),
        )
    }

    /// Reads exactly `len` bytes at any `offset` with one aligned device read of the fewest
    /// sectors (or pages) that hold them.
    pub fn read_exact_at(&self, offset: u64, len: usize, purpose: ReadPurpose) -> Result<Bytes> {
        let (_, aligned_len, _) = self.aligned_span(offset, len);
        let mut buf = AlignedBuf::zeroed(aligned_len);
        let range = self.read_exact_into(&mut buf, offset, len, purpose)?;
        Ok(buf.into_bytes(range))
    }

    /// Reads exactly `len` bytes at any `offset`, as [`SegmentFile::read_exact_at`] does, into
    /// this thread's read buffer, and hands them to `use_bytes`: a get allocates and zeroes
    /// nothing to read its record. Records too large for the buffer get one of their own.
    pub fn read_exact_with<T>(
        &self,
        offset: u64,
        len: usize,
        purpose: ReadPurpose,
        use_bytes: impl FnOnce(&[u8]) -> T,
    ) -> Result<T> {
        let (_, aligned_len, _) = self.aligned_span(offset, len);
        READ_BUFFER.with(|cell| {
            // Busy only if `use_bytes` itself read a record (it does not); then read apart.
            let borrowed = cell.try_borrow_mut();
            let (Ok(mut slot), true) = (borrowed, aligned_len <= READ_BUFFER_BYTES) else {
                let bytes = self.read_exact_at(offset, len, purpose)?;
                return Ok(use_bytes(&bytes));
            };
            let buf = slot.get_or_insert_with(|| AlignedBuf::zeroed(READ_BUFFER_BYTES));
            let range = self.read_exact_into(buf, offset, len, purpose)?;
            Ok(use_bytes(&buf.as_slice()[range]))
        })
    }

    /// Reads the aligned blocks holding `len` bytes at `offset` into `buf` (large enough for
    /// them); returns where in `buf` those bytes are, or the error naming the record.
    fn read_exact_into(
        &self,
        buf: &mut AlignedBuf,
        offset: u64,
        len: usize,
        purpose: ReadPurpose,
    ) -> Result<std::ops::Range<usize>> {
        let (aligned, aligned_len, skip) = self.aligned_span(offset, len);
        let read = self
            .read_aligned(aligned, buf, aligned_len, purpose)
            .map_err(|error| self.read_error(offset, error))?;
        if read < skip + len {
            return Err(self.past_end(offset, len));
        }
        Ok(skip..skip + len)
    }

    pub fn len_bytes(&self) -> Result<u64> {
        self.file
            .len_bytes()
            .map_err(|error| Error::io(format!("stat {}", self.path.display()), error))
    }
}

#[cfg(test)]
pub(super) mod testing {
    use super::*;

    /// A new segment file on `storage` (direct I/O where it allows) holding a header page, then
    /// `data` (whole pages); and its counters.
    pub fn segment_with(
        storage: &dyn Storage,
        path: &Path,
        data: &[u8],
    ) -> (SegmentFile, Arc<MediaCounters>) {
        let counters = Arc::new(MediaCounters::default());
        let mut header = AlignedBuf::zeroed(PAGE_BYTES);
        header.extend_from_slice(b"header");
        let file = SegmentFile::create(
            storage,
            path,
            true,
            counters.clone(),
            &header,
            WritePurpose::Client,
        )
        .unwrap();
        let mut buf = AlignedBuf::zeroed(data.len());
        buf.extend_from_slice(data);
        file.write_at(PAGE_BYTES as u64, buf.padded(), WritePurpose::Client)
            .unwrap();
        (file, counters)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::segment_with;
    use super::*;

    #[test]
    fn unaligned_reads_return_exact_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let pattern: Vec<u8> = (0..3 * PAGE_BYTES)
            .map(|index| (index % 251) as u8)
            .collect();
        let (file, counters) = segment_with(
            &crate::media::storage::OsStorage,
            &dir.path().join("seg"),
            &pattern,
        );
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

    #[test]
    fn reads_into_the_thread_buffer_match_fresh_reads() {
        let dir = tempfile::tempdir().unwrap();
        let pages = 40;
        let pattern: Vec<u8> = (0..pages * PAGE_BYTES)
            .map(|index| (index % 253) as u8)
            .collect();
        let (file, _) = segment_with(
            &crate::media::storage::OsStorage,
            &dir.path().join("seg"),
            &pattern,
        );
        // Large, then small (the buffer holds stale bytes past it), then one larger than the
        // buffer, at unaligned offsets.
        for (at, len) in [(5000, 30_000), (7, 3), (100, 100_000), (65_000, 1500)] {
            let offset = (PAGE_BYTES + at) as u64;
            let fresh = file.read_exact_at(offset, len, ReadPurpose::Get).unwrap();
            let reused = file
                .read_exact_with(offset, len, ReadPurpose::Get, <[u8]>::to_vec)
                .unwrap();
            assert_eq!(&fresh[..], &pattern[at..at + len]);
            assert_eq!(reused, fresh.to_vec());
        }
        let end = ((pages + 1) * PAGE_BYTES) as u64;
        let error = file
            .read_exact_with(end - 10, 100, ReadPurpose::Get, |_| ())
            .unwrap_err();
        assert!(error.to_string().contains("runs past the end"), "{error}");
    }
}
