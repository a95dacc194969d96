//! Batched exact reads: the records a scan or a multi-get needs next, read with many requests in
//! flight (io_uring where the kernel offers it; else one pread after another, with the same
//! results), records lying close together in one file merged into one read.

use super::buf::AlignedBuf;
use super::counters::ReadPurpose;
use super::file::SegmentFile;
use super::uring::{self, RingRead};
use crate::error::Result;
use bytes::Bytes;
use std::io;

/// Records of one file closer than this are read with one request: on flash a few KiB more
/// cost less than another request.
const MERGE_GAP_BYTES: u64 = 4096;

/// A merged read spans at most this much.
const MERGED_READ_BYTES_MAX: usize = 128 << 10;

/// `len` bytes of `file` at `offset`, wanted whole.
pub struct ExactRead<'a> {
    pub file: &'a SegmentFile,
    pub offset: u64,
    pub len: usize,
}

/// One device read covering one or more requested reads of one file.
struct Span<'a> {
    file: &'a SegmentFile,
    offset: u64,
    len: usize,
    /// Indexes of the requests it covers.
    members: Vec<usize>,
}

/// Reads every request; the results come in request order, each the exact bytes or the error
/// of the read that held them (a record the file ends inside of is `Corruption`, as in
/// [`SegmentFile::read_exact_at`]).
pub fn read_exact_batch(reads: &[ExactRead<'_>], purpose: ReadPurpose) -> Vec<Result<Bytes>> {
    read_batch(reads, purpose, true)
}

/// How many device reads [`read_exact_batch`] would make of `reads`: records stored close
/// together cost one between them, records scattered one each.
pub fn device_reads(reads: &[ExactRead<'_>]) -> usize {
    merge(reads).len()
}

fn read_batch(reads: &[ExactRead<'_>], purpose: ReadPurpose, use_ring: bool) -> Vec<Result<Bytes>> {
    // Most batches of a read from DRAM are empty: nothing to merge or submit (160 instructions
    // of an HGETALL served from the cache).
    if reads.is_empty() {
        return Vec::new();
    }
    let spans = merge(reads);
    let mut bufs: Vec<AlignedBuf> = spans
        .iter()
        .map(|span| AlignedBuf::zeroed(span.len))
        .collect();
    let outcomes = perform(&spans, &mut bufs, use_ring);
    let mut results: Vec<Option<Result<Bytes>>> = (0..reads.len()).map(|_| None).collect();
    for ((span, mut buf), outcome) in spans.iter().zip(bufs).zip(outcomes) {
        let read = match outcome {
            Ok(read) => read,
            Err(error) if span.members.len() == 1 => {
                let member = span.members[0];
                results[member] = Some(Err(span.file.read_error(reads[member].offset, error)));
                continue;
            }
            Err(_) => {
                // The failed bytes may lie in a gap between the records, or in one of them:
                // each is read alone, so each result is its own, named at its own offset.
                for &member in &span.members {
                    let wanted = &reads[member];
                    let alone = wanted
                        .file
                        .read_exact_at(wanted.offset, wanted.len, purpose);
                    results[member] = Some(alone);
                }
                continue;
            }
        };
        span.file.count_read(purpose, read);
        buf.set_len(read);
        let bytes = buf.into_bytes(0..read);
        for &member in &span.members {
            let wanted = &reads[member];
            let start = (wanted.offset - span.offset) as usize;
            results[member] = Some(if start + wanted.len <= read {
                Ok(bytes.slice(start..start + wanted.len))
            } else {
                Err(wanted.file.past_end(wanted.offset, wanted.len))
            });
        }
    }
    results
        .into_iter()
        .map(|result| result.expect("every request belongs to one span"))
        .collect()
}

/// Groups the requests into aligned device reads: by file and offset, merging those that
/// overlap or lie within [`MERGE_GAP_BYTES`] while the merged read stays within
/// [`MERGED_READ_BYTES_MAX`].
fn merge<'a>(reads: &[ExactRead<'a>]) -> Vec<Span<'a>> {
    let mut order: Vec<usize> = (0..reads.len()).collect();
    order.sort_by_key(|&index| {
        let read = &reads[index];
        (std::ptr::from_ref(read.file) as usize, read.offset)
    });
    let mut spans: Vec<Span<'a>> = Vec::new();
    for index in order {
        let read = &reads[index];
        let (offset, len, _) = read.file.aligned_span(read.offset, read.len);
        let end = offset + len as u64;
        if let Some(last) = spans.last_mut() {
            let last_end = last.offset + last.len as u64;
            let merged_len = end.max(last_end) - last.offset;
            if std::ptr::eq(last.file, read.file)
                && offset <= last_end + MERGE_GAP_BYTES
                && merged_len <= MERGED_READ_BYTES_MAX as u64
            {
                last.len = merged_len as usize;
                last.members.push(index);
                continue;
            }
        }
        spans.push(Span {
            file: read.file,
            offset,
            len,
            members: vec![index],
        });
    }
    spans
}

/// Reads each span into its buffer: all in flight at once through the ring when every file
/// has a descriptor and the thread has a ring, else one after another. A read the ring left
/// short, or that was interrupted, is finished with plain reads, so both ways give the same.
fn perform(spans: &[Span<'_>], bufs: &mut [AlignedBuf], use_ring: bool) -> Vec<io::Result<usize>> {
    let fds: Option<Vec<_>> = spans.iter().map(|span| span.file.raw_fd()).collect();
    let mut outcomes = None;
    if let (true, true, Some(fds)) = (use_ring, spans.len() > 1, fds) {
        let mut ring_reads: Vec<RingRead<'_>> = spans
            .iter()
            .zip(bufs.iter_mut())
            .zip(fds)
            .map(|((span, buf), fd)| RingRead {
                fd,
                offset: span.offset,
                buf: &mut buf.window_mut()[..span.len],
            })
            .collect();
        outcomes = uring::read_all(&mut ring_reads);
    }
    let mut outcomes = outcomes.unwrap_or_else(|| spans.iter().map(|_| Ok(0)).collect());
    for ((span, buf), outcome) in spans.iter().zip(bufs.iter_mut()).zip(outcomes.iter_mut()) {
        let done = match outcome {
            Ok(done) if *done == span.len => continue,
            Ok(done) => *done,
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) =>
            {
                0
            }
            Err(_) => continue,
        };
        *outcome = span
            .file
            .fill(&mut buf.window_mut()[..span.len], span.offset, done);
    }
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::PAGE_BYTES;
    use crate::media::file::testing::segment_with;
    use crate::media::storage::{OsStorage, Storage, StorageFile};

    fn pattern_file(dir: &std::path::Path, name: &str, pages: usize) -> (SegmentFile, Vec<u8>) {
        let pattern: Vec<u8> = (0..pages * PAGE_BYTES)
            .map(|index| (index % 251) as u8 ^ name.as_bytes()[0])
            .collect();
        let (file, _) = segment_with(&OsStorage, &dir.join(name), &pattern);
        (file, pattern)
    }

    #[test]
    fn batches_return_exact_bytes_in_request_order_by_ring_and_by_pread() {
        let dir = tempfile::tempdir().unwrap();
        let (first, first_data) = pattern_file(dir.path(), "a", 64);
        let (second, second_data) = pattern_file(dir.path(), "b", 8);
        let page = PAGE_BYTES as u64;
        // Adjacent, overlapping, far apart, in two files, out of order, and one past the end.
        let wanted: Vec<(&SegmentFile, &[u8], u64, usize)> = vec![
            (&first, &first_data, page + 100_000, 1000),
            (&first, &first_data, page + 10, 300),
            (&second, &second_data, page + 4000, 2000),
            (&first, &first_data, page + 310, 700),
            (&first, &first_data, page + 500, 100),
            (&second, &second_data, page, 1),
            (&first, &first_data, page + 200_000, 5000),
            (&second, &second_data, 9 * page - 10, 100),
        ];
        let reads: Vec<ExactRead<'_>> = wanted
            .iter()
            .map(|&(file, _, offset, len)| ExactRead { file, offset, len })
            .collect();
        assert!(merge(&reads).len() < reads.len(), "close reads are merged");
        for use_ring in [true, false] {
            let results = read_batch(&reads, ReadPurpose::Scan, use_ring);
            for (&(_, data, offset, len), result) in wanted.iter().zip(&results) {
                let start = (offset - page) as usize;
                if start + len > data.len() {
                    let error = result.as_ref().unwrap_err();
                    assert!(error.to_string().contains("runs past the end"), "{error}");
                } else {
                    assert_eq!(&result.as_ref().unwrap()[..], &data[start..start + len]);
                }
            }
        }
    }

    #[test]
    fn more_reads_than_the_ring_holds_all_complete() {
        let dir = tempfile::tempdir().unwrap();
        let (file, data) = pattern_file(dir.path(), "c", 1024);
        // Far enough apart never to merge, so each is its own request.
        let count = uring::RING_ENTRIES as usize * 3 + 5;
        let stride = (MERGE_GAP_BYTES + 2 * PAGE_BYTES as u64) as usize;
        let reads: Vec<ExactRead<'_>> = (0..count)
            .map(|index| ExactRead {
                file: &file,
                offset: (PAGE_BYTES + index * stride % (data.len() - 100)) as u64,
                len: 77,
            })
            .collect();
        let results = read_exact_batch(&reads, ReadPurpose::Scan);
        for (read, result) in reads.iter().zip(results) {
            let start = read.offset as usize - PAGE_BYTES;
            assert_eq!(&result.unwrap()[..], &data[start..start + 77]);
        }
    }

    /// The OS file system, with files that fail every read touching one byte.
    #[derive(Debug)]
    struct BadSector(u64);

    struct BadSectorFile {
        file: Box<dyn StorageFile>,
        bad: u64,
    }

    impl Storage for BadSector {
        fn create(&self, path: &std::path::Path, _: bool) -> io::Result<Box<dyn StorageFile>> {
            let file = OsStorage.create(path, false)?;
            Ok(Box::new(BadSectorFile { file, bad: self.0 }))
        }

        fn open(&self, _: &std::path::Path, _: bool, _: bool) -> io::Result<Box<dyn StorageFile>> {
            unreachable!("the test only creates")
        }
    }

    impl StorageFile for BadSectorFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            if (offset..offset + buf.len() as u64).contains(&self.bad) {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            self.file.read_at(buf, offset)
        }

        fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
            self.file.write_all_at(data, offset)
        }

        fn sync_data(&self) -> io::Result<()> {
            self.file.sync_data()
        }

        fn len_bytes(&self) -> io::Result<u64> {
            self.file.len_bytes()
        }

        fn is_direct(&self) -> bool {
            self.file.is_direct()
        }
    }

    #[test]
    fn a_failed_merged_read_fails_only_the_records_on_the_bad_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let page = PAGE_BYTES as u64;
        let bad = page + 2500;
        let (file, _) = segment_with(
            &BadSector(bad),
            &dir.path().join("seg"),
            &[9u8; 2 * PAGE_BYTES],
        );
        // Two records around the bad byte (merged into one read over it), one on it.
        let reads = [
            ExactRead {
                file: &file,
                offset: page + 1000,
                len: 500,
            },
            ExactRead {
                file: &file,
                offset: page + 2400,
                len: 200,
            },
            ExactRead {
                file: &file,
                offset: page + 4000,
                len: 500,
            },
        ];
        assert_eq!(merge(&reads).len(), 1);
        for use_ring in [true, false] {
            let results = read_batch(&reads, ReadPurpose::Scan, use_ring);
            assert_eq!(&results[0].as_ref().unwrap()[..], &[9u8; 500][..]);
            assert_eq!(&results[2].as_ref().unwrap()[..], &[9u8; 500][..]);
            let error = results[1].as_ref().unwrap_err().to_string();
            assert!(error.contains(&format!("at {}", page + 2400)), "{error}");
        }
    }
}
