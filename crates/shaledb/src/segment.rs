//! Segments: large append-only files of records, their header, the table of segments a KVDB
//! holds with their live-byte counters, and the sequential record scanner that recovery, the
//! cleaner and `check` share.
//!
//! Segment header (first page, rest zero):
//! ```text
//!  0  8  magic "SHALESG1"
//!  8  4  format version (1)
//! 12  1  media class (0 staging, 1 capacity)
//! 13  1  head (0 client writes, 1 cleaner output young tier, 2 cleaner output old tier)
//! 14  2  zero
//! 16  8  segment id
//! 24  8  created_seqno: the next sequence number to be assigned when the segment was created
//! 32  4  crc32c of bytes 0..32
//! ```

use crate::error::{Error, Result};
use crate::limits::{PAGE_BYTES, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use crate::media::{round_down_to_page, AlignedBuf, MediaClass, ReadPurpose, SegmentFile};
use crate::record::{self, DecodeError, RecordRef};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"SHALESG1";
const FORMAT_VERSION: u32 = 1;
const HEADER_USED_BYTES: usize = 36;
/// Bytes the scanner reads per device read.
const SCAN_CHUNK_BYTES: usize = 4 << 20;

/// Identifies a segment; never reused within a KVDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentId(pub u32);

/// Where a record lives on media.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Location {
    pub segment: SegmentId,
    pub offset: u32,
    pub len: u32,
}

/// Which log head writes a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadKind {
    /// Fresh client writes.
    Client = 0,
    /// Records surviving their first cleaning (moved out of client segments).
    CleanerYoung = 1,
    /// Records surviving a second or later cleaning: the coldest data.
    CleanerOld = 2,
}

impl HeadKind {
    pub const ALL: [HeadKind; 3] = [
        HeadKind::Client,
        HeadKind::CleanerYoung,
        HeadKind::CleanerOld,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HeadKind::Client => "client",
            HeadKind::CleanerYoung => "cleaner-young",
            HeadKind::CleanerOld => "cleaner-old",
        }
    }

    /// Where the cleaner moves live records of a segment this head wrote: generational tiers,
    /// so data that keeps surviving ends up together, away from data that dies young.
    pub fn cleaning_destination(self) -> HeadKind {
        match self {
            HeadKind::Client => HeadKind::CleanerYoung,
            HeadKind::CleanerYoung | HeadKind::CleanerOld => HeadKind::CleanerOld,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    pub id: SegmentId,
    pub class: MediaClass,
    pub head: HeadKind,
    pub created_seqno: u64,
}

impl SegmentHeader {
    pub fn encode(&self) -> AlignedBuf {
        let mut bytes = Vec::with_capacity(HEADER_USED_BYTES);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes.push(self.class as u8);
        bytes.push(self.head as u8);
        bytes.extend_from_slice(&[0, 0]);
        bytes.extend_from_slice(&u64::from(self.id.0).to_le_bytes());
        bytes.extend_from_slice(&self.created_seqno.to_le_bytes());
        let crc = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        let mut page = AlignedBuf::zeroed(PAGE_BYTES);
        page.extend_from_slice(&bytes);
        page
    }

    pub fn decode(bytes: &[u8], path: &Path) -> Result<Self> {
        let corrupt =
            |detail: &str| Error::corruption(path, 0, format!("segment header: {detail}"));
        if bytes.len() < HEADER_USED_BYTES {
            return Err(corrupt("file shorter than a header"));
        }
        if &bytes[0..8] != MAGIC {
            return Err(corrupt("bad magic"));
        }
        let crc = u32::from_le_bytes(bytes[32..36].try_into().expect("4 bytes"));
        if crc32c::crc32c(&bytes[0..32]) != crc {
            return Err(corrupt("CRC mismatch"));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(corrupt(&format!("unsupported format version {version}")));
        }
        let class =
            MediaClass::from_byte(bytes[12]).ok_or_else(|| corrupt("unknown media class"))?;
        let head = match bytes[13] {
            0 => HeadKind::Client,
            1 => HeadKind::CleanerYoung,
            2 => HeadKind::CleanerOld,
            _ => return Err(corrupt("unknown head")),
        };
        let id = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
        let id = u32::try_from(id).map_err(|_| corrupt("segment id out of range"))?;
        let created_seqno = u64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
        Ok(SegmentHeader {
            id: SegmentId(id),
            class,
            head,
            created_seqno,
        })
    }
}

pub fn segment_file_name(id: SegmentId) -> String {
    format!("seg-{:010}.log", id.0)
}

/// Parses a name made by [`segment_file_name`].
pub fn parse_segment_file_name(name: &str) -> Option<SegmentId> {
    let digits = name.strip_prefix("seg-")?.strip_suffix(".log")?;
    digits.parse().ok().map(SegmentId)
}

/// A segment the KVDB holds, with its accounting.
pub struct SegmentMeta {
    pub header: SegmentHeader,
    pub file: Arc<SegmentFile>,
    /// Bytes of records that an index entry (or a snapshot's version) points at.
    live_bytes: AtomicU64,
    /// Bytes of records appended (logical end of the record area, header included).
    end_bytes: AtomicU64,
    /// No more appends: the cleaner may pick it.
    sealed: AtomicBool,
    /// A corruption was found in it: the cleaner must not free it.
    quarantined: AtomicBool,
}

impl SegmentMeta {
    pub fn new(
        header: SegmentHeader,
        file: Arc<SegmentFile>,
        end_bytes: u64,
        sealed: bool,
    ) -> Self {
        SegmentMeta {
            header,
            file,
            live_bytes: AtomicU64::new(0),
            end_bytes: AtomicU64::new(end_bytes),
            sealed: AtomicBool::new(sealed),
            quarantined: AtomicBool::new(false),
        }
    }

    pub fn id(&self) -> SegmentId {
        self.header.id
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    pub fn live_bytes(&self) -> u64 {
        self.live_bytes.load(Ordering::Relaxed)
    }

    pub fn add_live(&self, bytes: u64) {
        self.live_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn sub_live(&self, bytes: u64) {
        let previous = self.live_bytes.fetch_sub(bytes, Ordering::Relaxed);
        debug_assert!(
            previous >= bytes,
            "live bytes of segment {} went negative",
            self.id().0
        );
    }

    pub fn end_bytes(&self) -> u64 {
        self.end_bytes.load(Ordering::Relaxed)
    }

    pub fn set_end_bytes(&self, end: u64) {
        self.end_bytes.store(end, Ordering::Relaxed);
    }

    /// Bytes the segment occupies on media: its records rounded up to whole pages.
    pub fn disk_bytes(&self) -> u64 {
        crate::media::round_up_to_page(self.end_bytes())
    }

    pub fn is_sealed(&self) -> bool {
        self.sealed.load(Ordering::Acquire)
    }

    pub fn seal(&self) {
        self.sealed.store(true, Ordering::Release);
    }

    pub fn is_quarantined(&self) -> bool {
        self.quarantined.load(Ordering::Relaxed)
    }

    pub fn quarantine(&self) {
        self.quarantined.store(true, Ordering::Relaxed);
    }

    /// Fraction of the record area that is live.
    pub fn live_ratio(&self) -> f64 {
        let record_bytes = self.end_bytes().saturating_sub(SEGMENT_HEADER_BYTES);
        if record_bytes == 0 {
            0.0
        } else {
            self.live_bytes() as f64 / record_bytes as f64
        }
    }
}

/// All segments of a KVDB, by id.
pub struct SegmentTable {
    segments: RwLock<BTreeMap<SegmentId, Arc<SegmentMeta>>>,
    next_id: AtomicU32,
    dirs: [PathBuf; 2],
}

impl SegmentTable {
    pub fn new(dirs: [PathBuf; 2], next_id: SegmentId) -> Self {
        SegmentTable {
            segments: RwLock::new(BTreeMap::new()),
            next_id: AtomicU32::new(next_id.0),
            dirs,
        }
    }

    pub fn dir(&self, class: MediaClass) -> &Path {
        &self.dirs[class as usize]
    }

    pub fn allocate_id(&self) -> SegmentId {
        SegmentId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    pub fn insert(&self, segment: Arc<SegmentMeta>) {
        let previous = self.segments.write().insert(segment.id(), segment);
        assert!(previous.is_none(), "segment ids are never reused");
    }

    pub fn remove(&self, id: SegmentId) -> Option<Arc<SegmentMeta>> {
        self.segments.write().remove(&id)
    }

    pub fn get(&self, id: SegmentId) -> Option<Arc<SegmentMeta>> {
        self.segments.read().get(&id).cloned()
    }

    pub fn all(&self) -> Vec<Arc<SegmentMeta>> {
        self.segments.read().values().cloned().collect()
    }
}

/// What a scan of one segment found.
#[derive(Debug, Default)]
pub struct ScanSummary {
    /// Offset just past the last valid record.
    pub end_offset: u64,
    /// Offsets where bytes failed validation, with the reason. The scanner skips ahead to the
    /// next valid record after each one.
    pub corruptions: Vec<(u64, &'static str)>,
    /// The segment ended inside a record (a torn write at the tail).
    pub torn_tail: bool,
}

/// Calls `visit(offset, record)` for every valid record of `file` at or after `from`, reading
/// in large aligned chunks. Stops at unwritten space or the end of the file.
pub fn scan_records(
    file: &SegmentFile,
    from: u64,
    purpose: ReadPurpose,
    mut visit: impl FnMut(u64, &RecordRef<'_>) -> Result<()>,
) -> Result<ScanSummary> {
    let file_len = file.len_bytes()?;
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
        let decoded = record::decode(&buf.as_slice()[(offset - buf_offset) as usize..]);
        match decoded {
            Ok(record) => {
                resyncing = false;
                visit(offset, &record)?;
                offset += record.encoded_len() as u64;
                summary.end_offset = offset;
            }
            Err(DecodeError::Unwritten) if !resyncing => break,
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
        // Nothing valid followed the last bad record: it was a torn tail, not corruption.
        summary.corruptions.pop();
        summary.torn_tail = true;
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::{MediaCounters, WritePurpose};
    use crate::record::RecordKind;

    fn write_segment(dir: &Path, records: &[(&[u8], &[u8])]) -> (SegmentFile, Vec<u8>) {
        let header = SegmentHeader {
            id: SegmentId(1),
            class: MediaClass::Capacity,
            head: HeadKind::Client,
            created_seqno: 1,
        };
        let file = SegmentFile::create(
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
                    value,
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
    fn header_round_trip_and_corruption() {
        let header = SegmentHeader {
            id: SegmentId(9),
            class: MediaClass::Staging,
            head: HeadKind::CleanerOld,
            created_seqno: 77,
        };
        let page = header.encode();
        assert_eq!(
            SegmentHeader::decode(page.as_slice(), Path::new("x")).unwrap(),
            header
        );
        let mut bad = page.as_slice().to_vec();
        bad[20] ^= 1;
        assert!(SegmentHeader::decode(&bad, Path::new("x")).is_err());
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

    #[test]
    fn file_names_round_trip() {
        assert_eq!(
            parse_segment_file_name(&segment_file_name(SegmentId(42))),
            Some(SegmentId(42))
        );
        assert_eq!(parse_segment_file_name("seg-x.log"), None);
    }
}
