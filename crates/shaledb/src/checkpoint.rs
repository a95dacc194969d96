//! The checkpoint file: the indexes written to one file, so reopening replays only the records
//! appended after the checkpoint began instead of every segment.
//!
//! ```text
//! "SHALECK1"  u32 version  u64 covered_seqno  u64 next_seqno
//! u32 segment count, then per segment: u32 id, u64 replay_from (offset replay starts at)
//! per KVS: u8 1, u32 kvs_id, then entries: u16 key_len (>0), key, u32 segment, u32 offset,
//!          u32 len, u64 seqno, then the value the index keeps with it: u8 0 (none), or u8 1,
//!          u8 value_len (at most limits::INDEX_VALUE_BYTES_LIMIT), value; a u16 0 ends the KVS
//! u8 0, u64 entry count, u32 crc32c of every byte before it
//! ```
//! Version 1 (before 2026-11-28) had no value after an entry's seqno; it is still read.
//! The file is written to `checkpoint.ckpt.tmp`, fsynced, and renamed over `checkpoint.ckpt`.

use crate::error::{Error, Result};
use crate::index::Entry;
use crate::media::replace_file_durably;
use crate::segment::{Location, SegmentId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "checkpoint.ckpt";
const MAGIC: &[u8; 8] = b"SHALECK1";
const FORMAT_VERSION: u32 = 2;
/// The version whose entries keep no values.
const FORMAT_VERSION_WITHOUT_VALUES: u32 = 1;

/// Builds a checkpoint file in memory, section by section.
pub struct CheckpointEncoder {
    bytes: Vec<u8>,
    entries: u64,
}

impl CheckpointEncoder {
    pub fn new(covered_seqno: u64, next_seqno: u64, replay_from: &[(SegmentId, u64)]) -> Self {
        let mut bytes = Vec::with_capacity(1 << 20);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&covered_seqno.to_le_bytes());
        bytes.extend_from_slice(&next_seqno.to_le_bytes());
        bytes.extend_from_slice(&(replay_from.len() as u32).to_le_bytes());
        for (segment, offset) in replay_from {
            bytes.extend_from_slice(&segment.0.to_le_bytes());
            bytes.extend_from_slice(&offset.to_le_bytes());
        }
        CheckpointEncoder { bytes, entries: 0 }
    }

    pub fn begin_kvs(&mut self, kvs_id: u32) {
        self.bytes.push(1);
        self.bytes.extend_from_slice(&kvs_id.to_le_bytes());
    }

    pub fn entry(&mut self, key: &[u8], entry: &Entry, value: Option<&[u8]>) {
        self.bytes
            .extend_from_slice(&(key.len() as u16).to_le_bytes());
        self.bytes.extend_from_slice(key);
        self.bytes
            .extend_from_slice(&entry.location.segment.0.to_le_bytes());
        self.bytes
            .extend_from_slice(&entry.location.offset.to_le_bytes());
        self.bytes
            .extend_from_slice(&entry.location.len.to_le_bytes());
        self.bytes.extend_from_slice(&entry.seqno.to_le_bytes());
        match value {
            None => self.bytes.push(0),
            Some(value) => {
                self.bytes.push(1);
                self.bytes.push(value.len() as u8);
                self.bytes.extend_from_slice(value);
            }
        }
        self.entries += 1;
    }

    pub fn end_kvs(&mut self) {
        self.bytes.extend_from_slice(&0u16.to_le_bytes());
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.push(0);
        self.bytes.extend_from_slice(&self.entries.to_le_bytes());
        let crc = crate::checksum::crc32c(&self.bytes);
        self.bytes.extend_from_slice(&crc.to_le_bytes());
        self.bytes
    }
}

/// A validated checkpoint: its header, and its file, whose entries `entries` reads straight
/// into the indexes (decoding them into one vector first held a key allocation per
/// entry, as much DRAM again as the file at open).
#[derive(Debug)]
pub struct Checkpoint {
    /// Every record with a smaller seqno was appended before the checkpoint began.
    pub covered_seqno: u64,
    pub next_seqno: u64,
    pub replay_from: HashMap<SegmentId, u64>,
    /// The file without its CRC.
    body: Vec<u8>,
    /// Where the first KVS section starts in `body`.
    sections_at: usize,
    /// Whether each entry is followed by the value the index keeps with it (version 2).
    has_values: bool,
    path: PathBuf,
}

impl Checkpoint {
    /// Each entry's KVS id, key, entry and the value the index kept with it, in the file's order.
    pub fn entries(&self) -> Entries<'_> {
        Entries {
            reader: Reader {
                bytes: &self.body,
                at: self.sections_at,
                path: &self.path,
            },
            kvs_id: None,
            has_values: self.has_values,
        }
    }
}

/// The entries of a checkpoint's KVS sections (see [`Checkpoint::entries`]); ends after the
/// sections' end tag, where the entry count follows.
pub struct Entries<'a> {
    reader: Reader<'a>,
    /// The section being read, once its header has been.
    kvs_id: Option<u32>,
    has_values: bool,
}

/// One checkpoint entry: KVS id, key, entry, and the value the index kept with it.
pub type CheckpointEntry<'a> = (u32, &'a [u8], Entry, Option<&'a [u8]>);

impl<'a> Entries<'a> {
    fn next_entry(&mut self) -> Result<Option<CheckpointEntry<'a>>> {
        let reader = &mut self.reader;
        let path = reader.path;
        let corrupt = |offset: usize, detail: &str| {
            Error::corruption(path, offset as u64, detail.to_string())
        };
        loop {
            let Some(kvs_id) = self.kvs_id else {
                match reader.u8()? {
                    0 => return Ok(None),
                    1 => self.kvs_id = Some(reader.u32()?),
                    _ => return Err(corrupt(reader.at - 1, "bad checkpoint section tag")),
                }
                continue;
            };
            let key_len = reader.u16()? as usize;
            if key_len == 0 {
                self.kvs_id = None;
                continue;
            }
            if key_len > crate::limits::KEY_BYTES_MAX {
                return Err(corrupt(reader.at - 2, "checkpoint key too long"));
            }
            let key = reader.take(key_len)?;
            let location = Location {
                segment: SegmentId(reader.u32()?),
                offset: reader.u32()?,
                len: reader.u32()?,
            };
            let seqno = reader.u64()?;
            let value = match self.has_values.then(|| reader.u8()).transpose()? {
                None | Some(0) => None,
                Some(1) => {
                    let len = usize::from(reader.u8()?);
                    if len > crate::limits::INDEX_VALUE_BYTES_LIMIT {
                        return Err(corrupt(reader.at - 1, "checkpoint value too long"));
                    }
                    Some(reader.take(len)?)
                }
                Some(_) => return Err(corrupt(reader.at - 1, "bad checkpoint value tag")),
            };
            return Ok(Some((kvs_id, key, Entry { location, seqno }, value)));
        }
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<CheckpointEntry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }
}

/// Replaces the checkpoint file with `bytes`, durably.
pub fn store(dir: &Path, bytes: &[u8]) -> Result<()> {
    replace_file_durably(dir, FILE_NAME, bytes)
}

/// Loads the checkpoint: `Ok(None)` if there is none, `Err(Corruption)` if it fails validation.
pub fn load(home: &Path) -> Result<Option<Checkpoint>> {
    let path = home.join(FILE_NAME);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(Error::io(format!("read {}", path.display()), error)),
    };
    decode(bytes, &path).map(Some)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a PathBuf,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        if self.bytes.len() - self.at < len {
            return Err(Error::corruption(
                self.path,
                self.at as u64,
                "checkpoint ends early",
            ));
        }
        let slice = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

/// Validates a checkpoint file whole (CRC, structure, entry count) before anything reads its
/// entries, so a damaged one is refused before any index holds part of it.
pub(crate) fn decode(mut bytes: Vec<u8>, path: &Path) -> Result<Checkpoint> {
    let path = path.to_path_buf();
    let corrupt =
        |offset: usize, detail: &str| Error::corruption(&path, offset as u64, detail.to_string());
    if bytes.len() < MAGIC.len() + 4 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(corrupt(0, "bad checkpoint magic"));
    }
    let body_len = bytes.len() - 4;
    let crc = u32::from_le_bytes(bytes[body_len..].try_into().expect("4 bytes"));
    if crate::checksum::crc32c(&bytes[..body_len]) != crc {
        return Err(corrupt(body_len, "checkpoint CRC mismatch"));
    }
    bytes.truncate(body_len);
    let mut reader = Reader {
        bytes: &bytes,
        at: MAGIC.len(),
        path: &path,
    };
    let version = reader.u32()?;
    if version != FORMAT_VERSION && version != FORMAT_VERSION_WITHOUT_VALUES {
        return Err(corrupt(8, "unsupported checkpoint version"));
    }
    let has_values = version == FORMAT_VERSION;
    let covered_seqno = reader.u64()?;
    let next_seqno = reader.u64()?;
    let mut replay_from = HashMap::new();
    for _ in 0..reader.u32()? {
        let segment = SegmentId(reader.u32()?);
        replay_from.insert(segment, reader.u64()?);
    }
    let sections_at = reader.at;
    let mut entries = Entries {
        reader,
        kvs_id: None,
        has_values,
    };
    let mut count = 0u64;
    for entry in entries.by_ref() {
        entry?;
        count += 1;
    }
    let mut reader = entries.reader;
    if reader.u64()? != count || reader.at != body_len {
        return Err(corrupt(reader.at, "checkpoint entry count mismatch"));
    }
    Ok(Checkpoint {
        covered_seqno,
        next_seqno,
        replay_from,
        body: bytes,
        sections_at,
        has_values,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut encoder = CheckpointEncoder::new(10, 12, &[(SegmentId(3), 4096)]);
        encoder.begin_kvs(1);
        let entry = Entry {
            location: Location {
                segment: SegmentId(3),
                offset: 4096,
                len: 40,
            },
            seqno: 9,
        };
        encoder.entry(b"key", &entry, None);
        encoder.entry(b"short", &entry, Some(b"value"));
        encoder.end_kvs();
        encoder.finish()
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        store(dir.path(), &sample()).unwrap();
        let checkpoint = load(dir.path()).unwrap().unwrap();
        assert_eq!(checkpoint.covered_seqno, 10);
        assert_eq!(checkpoint.next_seqno, 12);
        assert_eq!(checkpoint.replay_from[&SegmentId(3)], 4096);
        let entries: Vec<_> = checkpoint.entries().map(Result::unwrap).collect();
        assert_eq!(entries.len(), 2);
        assert_eq!((entries[0].0, entries[0].1), (1, &b"key"[..]));
        assert_eq!((entries[0].2.seqno, entries[0].3), (9, None));
        assert_eq!(
            (entries[1].1, entries[1].3),
            (&b"short"[..], Some(&b"value"[..]))
        );
    }

    #[test]
    fn a_version_1_checkpoint_reads_with_no_values() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&10u64.to_le_bytes());
        bytes.extend_from_slice(&12u64.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&[1, 7, 0, 0, 0]);
        bytes.extend_from_slice(&3u16.to_le_bytes());
        bytes.extend_from_slice(b"key");
        for field in [3u32, 4096, 40] {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        bytes.extend_from_slice(&9u64.to_le_bytes());
        bytes.extend_from_slice(&0u16.to_le_bytes());
        bytes.push(0);
        bytes.extend_from_slice(&1u64.to_le_bytes());
        let crc = crate::checksum::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        let checkpoint = decode(bytes, Path::new("v1")).unwrap();
        let entries: Vec<_> = checkpoint.entries().map(Result::unwrap).collect();
        assert_eq!(entries.len(), 1);
        assert_eq!(
            (entries[0].0, entries[0].1, entries[0].3),
            (7, &b"key"[..], None)
        );
        assert_eq!(entries[0].2.location.offset, 4096);
    }

    #[test]
    fn a_bad_value_tag_or_length_is_corruption_even_under_a_good_crc() {
        let good = sample();
        // The second entry's value: tag 1 after its seqno, then its length.
        let tag_at = good.len() - 4 - 9 - 2 - 5 - 1 - 1;
        assert_eq!(&good[tag_at..tag_at + 2], &[1, 5]);
        let with_crc = |mut bytes: Vec<u8>| {
            let body = bytes.len() - 4;
            let crc = crate::checksum::crc32c(&bytes[..body]);
            bytes[body..].copy_from_slice(&crc.to_le_bytes());
            bytes
        };
        let mut bad_tag = good.clone();
        bad_tag[tag_at] = 2;
        let error = decode(with_crc(bad_tag), Path::new("c"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("bad checkpoint value tag"), "{error}");
        let mut too_long = good.clone();
        too_long[tag_at + 1] = crate::limits::INDEX_VALUE_BYTES_LIMIT as u8 + 1;
        let error = decode(with_crc(too_long), Path::new("c"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("checkpoint value too long"), "{error}");
    }

    #[test]
    fn any_damage_is_corruption() {
        let bytes = sample();
        let path = Path::new("checkpoint");
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(decode(damaged, path).is_err(), "flip at {at} undetected");
        }
        for len in 0..bytes.len() {
            assert!(
                decode(bytes[..len].to_vec(), path).is_err(),
                "truncation to {len} undetected"
            );
        }
    }
}
