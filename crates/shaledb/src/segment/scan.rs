//! The sequential record scanner that recovery, the cleaner and `check` share.

use super::table::Seal;
use crate::error::Result;
use crate::limits::{PAGE_BYTES, RECORD_HEADER_BYTES};
use crate::media::{round_down_to_page, round_up_to_page, AlignedBuf, ReadPurpose, SegmentFile};
use crate::record::{self, DecodeError, RecordRef};

/// Bytes the scanner reads per device read.
const SCAN_CHUNK_BYTES: usize = 4 << 20;

/// What a scan of one segment found.
#[derive(Debug, Default)]
pub struct ScanSummary {
    /// Offset just past the last valid record.
    pub end_offset: u64,
    /// Valid records visited, and their checksums chained as a seal's are (`Seal::chain`; a
    /// seal, when the scan started at the first record).
    pub records: u64,
    pub records_crc: u32,
    /// Offsets where bytes failed validation, with the reason. The scanner skips ahead to the
    /// next valid record after each one.
    pub corruptions: Vec<(u64, &'static str)>,
    /// Where the scan found a valid record again after each corruption (so the bytes from a
    /// corruption to here are unreadable).
    pub resumed_at: Vec<u64>,
    /// The segment ended inside a record, or in bytes that are no record, with nothing valid
    /// after them: a torn write at the tail, or damage there.
    pub torn_tail: bool,
}

impl ScanSummary {
    /// Whether a scan from the first record read a segment back exactly as it was appended up
    /// to `end` (nothing torn before it), and, given its `seal`, exactly as it was sealed.
    pub fn reads_back(&self, end: u64, seal: Option<&Seal>) -> bool {
        self.end_offset == end
            && !self.torn_tail
            && seal.is_none_or(|seal| {
                (seal.record_count, seal.records_crc) == (self.records, self.records_crc)
            })
    }
}

/// Calls `visit(offset, record)` for every valid record of `file` from `from` up to `until`
/// (a sealed segment's end: what follows it is no record, perhaps the torn bytes the crash
/// before its sealing left), reading in large aligned chunks. Stops there, at the end of the
/// file, or at unwritten (zero) space that nothing but zeroes follows: zeroes with data after
/// them are damage, not the end.
pub fn scan_records(
    file: &SegmentFile,
    from: u64,
    until: u64,
    purpose: ReadPurpose,
    mut visit: impl FnMut(u64, &RecordRef<'_>) -> Result<()>,
) -> Result<ScanSummary> {
    let real_len = file.len_bytes()?;
    let file_len = real_len.min(until);
    let mut summary = ScanSummary {
        end_offset: from,
        ..ScanSummary::default()
    };
    let mut buf = AlignedBuf::zeroed(SCAN_CHUNK_BYTES);
    let mut buf_offset = u64::MAX;
    let mut offset = from;
    let mut resyncing = false;
    while offset < file_len {
        let in_buf = offset >= buf_offset && offset < buf_offset + buf.len() as u64;
        if !in_buf || offset + RECORD_HEADER_BYTES as u64 > buf_offset + buf.len() as u64 {
            buf_offset = round_down_to_page(offset);
            buf.clear();
            file.read_pages(buf_offset, &mut buf, purpose)?;
        }
        // A record that continues past this chunk is re-read whole, once.
        let at = (offset - buf_offset) as usize;
        if let Err(DecodeError::Truncated { needed }) = record::decode(&buf.as_slice()[at..]) {
            let record_end = offset + needed as u64;
            if record_end <= file_len && record_end > buf_offset + buf.len() as u64 {
                buf_offset = round_down_to_page(offset);
                if needed + PAGE_BYTES > buf.capacity() {
                    buf = AlignedBuf::zeroed(needed + PAGE_BYTES);
                } else {
                    buf.clear();
                }
                file.read_pages(buf_offset, &mut buf, purpose)?;
            }
        }
        let at = (offset - buf_offset) as usize;
        let decoded = record::decode(&buf.as_slice()[at..]);
        match decoded {
            Ok(record) => {
                if resyncing {
                    summary.resumed_at.push(offset);
                }
                resyncing = false;
                visit(offset, &record)?;
                let len = record.encoded_len();
                summary.records += 1;
                summary.records_crc = Seal::chain(summary.records_crc, &buf.as_slice()[at..]);
                offset += len as u64;
                summary.end_offset = offset;
            }
            Err(DecodeError::Unwritten) if !resyncing => {
                if !zeroes_until_the_end(file, offset, file_len, purpose)? {
                    summary
                        .corruptions
                        .push((offset, "zeroed bytes with records after them"));
                    resyncing = true;
                    offset += 1;
                    continue;
                }
                break;
            }
            Err(DecodeError::Truncated { .. }) if !resyncing => {
                summary.torn_tail = true;
                break;
            }
            Err(DecodeError::Corrupt(reason)) if !resyncing => {
                summary.corruptions.push((offset, reason));
                resyncing = true;
                offset += 1;
            }
            Err(_) => offset += 1,
        }
    }
    if resyncing {
        // Nothing valid followed the last bad bytes: a torn tail (or damage at the very end,
        // which only a seal can tell apart).
        summary.corruptions.pop();
        summary.torn_tail = true;
    }
    // Segments are written in whole pages, so an unlimited scan that ends cleanly must end in
    // the file's last page, and the file be whole pages: anything else was cut or zeroed there.
    let unlimited = until >= real_len;
    let whole_pages = real_len.is_multiple_of(PAGE_BYTES as u64);
    if unlimited && (!whole_pages || round_up_to_page(summary.end_offset) < real_len) {
        summary.torn_tail = true;
    }
    Ok(summary)
}

/// Whether every byte of `file` from `offset` to `file_len` is zero.
fn zeroes_until_the_end(
    file: &SegmentFile,
    offset: u64,
    file_len: u64,
    purpose: ReadPurpose,
) -> Result<bool> {
    let mut buf = AlignedBuf::zeroed(SCAN_CHUNK_BYTES.min(16 * PAGE_BYTES));
    let mut chunk_offset = round_down_to_page(offset);
    while chunk_offset < file_len {
        buf.clear();
        let read = file.read_pages(chunk_offset, &mut buf, purpose)?;
        let skip = offset.saturating_sub(chunk_offset) as usize;
        if buf.as_slice()[skip.min(read)..]
            .iter()
            .any(|&byte| byte != 0)
        {
            return Ok(false);
        }
        if read == 0 {
            break;
        }
        chunk_offset += read as u64;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::SEGMENT_HEADER_BYTES;
    use crate::media::{MediaClass, MediaCounters, WritePurpose};
    use crate::record::RecordKind;
    use crate::segment::header::{HeadKind, SegmentHeader};
    use crate::segment::id::SegmentId;
    use std::path::Path;
    use std::sync::Arc;

    fn write_segment(dir: &Path, records: &[(&[u8], &[u8])]) -> (SegmentFile, Vec<u8>) {
        let header = SegmentHeader {
            id: SegmentId(1),
            class: MediaClass::Capacity,
            head: HeadKind::Client,
            created_seqno: 1,
        };
        let file = SegmentFile::create(
            &crate::media::OsStorage,
            &dir.join("seg"),
            true,
            Arc::new(MediaCounters::default()),
            &header.encode(),
            WritePurpose::Client,
        )
        .unwrap();
        let mut bytes = Vec::new();
        for (seqno, (key, value)) in records.iter().enumerate() {
            record::encode(
                &mut bytes,
                &RecordRef {
                    kind: RecordKind::Put,
                    flags: 0,
                    kvs_id: 1,
                    seqno: seqno as u64 + 1,
                    key,
                    stored_value: value,
                },
            );
        }
        let mut buf = AlignedBuf::zeroed(bytes.len());
        buf.extend_from_slice(&bytes);
        file.write_at(SEGMENT_HEADER_BYTES, buf.padded(), WritePurpose::Client)
            .unwrap();
        (file, bytes)
    }

    fn collect(file: &SegmentFile) -> (Vec<u64>, ScanSummary) {
        let mut seqnos = Vec::new();
        let summary = scan_records(
            file,
            SEGMENT_HEADER_BYTES,
            u64::MAX,
            ReadPurpose::Other,
            |_, record| {
                seqnos.push(record.seqno);
                Ok(())
            },
        )
        .unwrap();
        (seqnos, summary)
    }

    #[test]
    fn scans_records_that_cross_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let big = vec![5u8; 1 << 20];
        let records: Vec<(&[u8], &[u8])> = (0..6).map(|_| (&b"key"[..], &big[..])).collect();
        let (file, bytes) = write_segment(dir.path(), &records);
        let (seqnos, summary) = collect(&file);
        assert_eq!(seqnos, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(
            summary.end_offset,
            SEGMENT_HEADER_BYTES + bytes.len() as u64
        );
        assert!(summary.corruptions.is_empty() && !summary.torn_tail);
    }

    #[test]
    fn corruption_in_the_middle_is_reported_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<(&[u8], &[u8])> = vec![(b"a", b"1"), (b"b", b"2"), (b"c", b"3")];
        let (file, _) = write_segment(dir.path(), &records);
        let second = SEGMENT_HEADER_BYTES + record::encoded_len(1, 1) as u64;
        let mut page = AlignedBuf::zeroed(PAGE_BYTES);
        file.read_pages(SEGMENT_HEADER_BYTES, &mut page, ReadPurpose::Other)
            .unwrap();
        let mut bytes = page.as_slice().to_vec();
        bytes[(second - SEGMENT_HEADER_BYTES) as usize + RECORD_HEADER_BYTES] ^= 0xff;
        let mut patched = AlignedBuf::zeroed(PAGE_BYTES);
        patched.extend_from_slice(&bytes);
        file.write_at(SEGMENT_HEADER_BYTES, patched.padded(), WritePurpose::Client)
            .unwrap();
        let (seqnos, summary) = collect(&file);
        assert_eq!(seqnos, vec![1, 3]);
        assert_eq!(summary.corruptions, vec![(second, "CRC mismatch")]);
    }
}
