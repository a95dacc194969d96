//! The segment header, the first page of every segment file.
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

use super::id::SegmentId;
use crate::error::{Error, Result};
use crate::limits::PAGE_BYTES;
use crate::media::{AlignedBuf, MediaClass, ReadPurpose, SegmentFile, WritePurpose};
use std::path::Path;

const MAGIC: &[u8; 8] = b"SHALESG1";
const FORMAT_VERSION: u32 = 1;
const HEADER_USED_BYTES: usize = 36;

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

    /// What this head's writes count as.
    pub fn write_purpose(self) -> WritePurpose {
        match self {
            HeadKind::Client => WritePurpose::Client,
            HeadKind::CleanerYoung | HeadKind::CleanerOld => WritePurpose::Cleaning,
        }
    }

    pub fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(HeadKind::Client),
            1 => Some(HeadKind::CleanerYoung),
            2 => Some(HeadKind::CleanerOld),
            _ => None,
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
        let crc = crate::checksum::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        let mut page = AlignedBuf::zeroed(PAGE_BYTES);
        page.extend_from_slice(&bytes);
        page
    }

    /// Reads and decodes the header of the segment file `file` (at `path`).
    pub fn read(file: &SegmentFile, path: &Path) -> Result<Self> {
        let mut page = AlignedBuf::zeroed(PAGE_BYTES);
        file.read_pages(0, &mut page, ReadPurpose::Other)?;
        Self::decode(page.as_slice(), path)
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
        if crate::checksum::crc32c(&bytes[0..32]) != crc {
            return Err(corrupt("CRC mismatch"));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(corrupt(&format!("unsupported format version {version}")));
        }
        let class =
            MediaClass::from_byte(bytes[12]).ok_or_else(|| corrupt("unknown media class"))?;
        let head = HeadKind::from_byte(bytes[13]).ok_or_else(|| corrupt("unknown head"))?;
        if bytes[14..16] != [0, 0] {
            // Reserved: a later format would say so by its version, so set bits are damage.
            return Err(corrupt("reserved bytes are not zero"));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
