//! The warm-keys file (`HOME/warm-keys`): the keys the value cache held when it was written, so
//! the next open can read their values back into the cache before clients ask for them. Written
//! by `warmer.rs`; this is the format.
//!
//! ```text
//! "SHALEWK1"  u32 format version (1)  u32 record count
//! count x (u32 kvs_id, u16 key length (1..=1024), key), in KVS id and key order
//! u32 crc32c of every byte before it
//! ```
//!
//! Key order spreads the keys evenly over the cache's shards (which its hash picks), so a
//! cache smaller than the one the file was saved from fills evenly before the warming stops,
//! instead of overflowing one shard after another; and it reads records a load wrote in key
//! order close together, which the batched reads merge.
//!
//! The file is a hint, never data: whatever it holds, reading it can only cost device reads of
//! keys that may not exist. So a damaged, cut or unexpected file is turned down whole (a
//! `Corruption` naming the file and what is wrong, which the caller logs and counts), and never
//! fails an open.

use crate::codec::{checksummed_body, ByteReader, PutBytes};
use crate::error::{Error, Result};
use crate::limits::{KEY_BYTES_MAX, WARM_KEYS_BYTES_MIN};
use crate::media::replace_file_durably;
use std::path::Path;

pub const FILE_NAME: &str = "warm-keys";
const MAGIC: &[u8; 8] = b"SHALEWK1";
const FORMAT_VERSION: u32 = 1;
/// Magic, version, record count.
const HEADER_BYTES: usize = 16;
const CRC_BYTES: usize = 4;
/// The smallest record: a KVS id, a key length and a one-byte key.
const RECORD_BYTES_MIN: usize = 7;
/// A file that lists no key.
pub const EMPTY_FILE_BYTES: usize = HEADER_BYTES + CRC_BYTES;

const _: () = assert!(WARM_KEYS_BYTES_MIN as usize >= EMPTY_FILE_BYTES);

/// Builds a warm-keys file of at most `max_bytes`.
pub struct Encoder {
    records: Vec<(u32, Box<[u8]>)>,
    /// The file's size so far.
    bytes: usize,
    max_bytes: usize,
}

impl Encoder {
    /// `max_bytes` must hold an empty file ([`EMPTY_FILE_BYTES`]; any bound the options allow
    /// does).
    pub fn new(max_bytes: u64) -> Self {
        let max_bytes = usize::try_from(max_bytes).unwrap_or(usize::MAX);
        assert!(max_bytes >= EMPTY_FILE_BYTES, "room for the header");
        Encoder {
            records: Vec::new(),
            bytes: EMPTY_FILE_BYTES,
            max_bytes,
        }
    }

    /// Adds a key; false, adding nothing, once the file would pass its bound.
    pub fn push(&mut self, kvs_id: u32, key: Box<[u8]>) -> bool {
        debug_assert!(!key.is_empty() && key.len() <= KEY_BYTES_MAX, "a valid key");
        let bytes = self.bytes + 4 + 2 + key.len();
        if bytes > self.max_bytes || self.records.len() == u32::MAX as usize {
            return false;
        }
        self.bytes = bytes;
        self.records.push((kvs_id, key));
        true
    }

    /// The file: its records in KVS id and key order.
    pub fn finish(mut self) -> Vec<u8> {
        self.records.sort_unstable();
        let mut bytes = Vec::with_capacity(self.bytes);
        bytes.extend_from_slice(MAGIC);
        bytes.put_u32(FORMAT_VERSION);
        bytes.put_u32(self.records.len() as u32);
        for (kvs_id, key) in &self.records {
            bytes.put_u32(*kvs_id);
            bytes.put_bytes16(key);
        }
        let crc = crate::checksum::crc32c(&bytes);
        bytes.put_u32(crc);
        bytes
    }
}

/// Writes `bytes` (an [`Encoder`]'s) as `dir`'s warm-keys file, atomically and durably.
pub fn store(dir: &Path, bytes: &[u8]) -> Result<()> {
    replace_file_durably(dir, FILE_NAME, bytes)
}

/// The keys of a warm-keys file that decoded whole.
pub struct KeyList {
    /// The file, checked: every record is in bounds.
    bytes: Vec<u8>,
    count: u32,
}

impl KeyList {
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// (KVS id, key), in the file's order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        let end = self.bytes.len() - CRC_BYTES;
        let mut at = HEADER_BYTES;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            // `decode` checked every record's bounds: these slices are in the file.
            let field = |from: usize, len: usize| &self.bytes[from..from + len];
            let kvs_id = u32::from_le_bytes(field(at, 4).try_into().expect("4 bytes"));
            let key_len = u16::from_le_bytes(field(at + 4, 2).try_into().expect("2 bytes"));
            let key = field(at + 6, key_len as usize);
            at += 6 + key_len as usize;
            Some((kvs_id, key))
        })
    }
}

/// Reads `dir`'s warm-keys file: `Ok(None)` if there is none; `Corruption` if it is damaged,
/// cut short, of another version or larger than `max_bytes` (written under a larger bound:
/// turned down before it is read, so a stray large file costs no memory).
pub fn load(dir: &Path, max_bytes: u64) -> Result<Option<KeyList>> {
    let path = dir.join(FILE_NAME);
    let read = |error| Error::io(format!("read {}", path.display()), error);
    let len = match std::fs::metadata(&path) {
        Ok(metadata) => metadata.len(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(read(error)),
    };
    if len > max_bytes {
        return Err(Error::corruption(
            &path,
            0,
            format!(
                "the warm-keys file is {len} bytes, more than warm_keys_max_bytes ({max_bytes})"
            ),
        ));
    }
    let bytes = std::fs::read(&path).map_err(read)?;
    decode(bytes, &path).map(Some)
}

/// Decodes a whole warm-keys file, checking its magic, version, checksum and every record.
pub(crate) fn decode(bytes: Vec<u8>, path: &Path) -> Result<KeyList> {
    if bytes.is_empty() {
        return Err(Error::corruption(path, 0, "the warm-keys file is empty"));
    }
    let mut reader = ByteReader::new(&bytes, path, "warm-keys file", 0);
    if reader.take(MAGIC.len())? != MAGIC {
        return Err(Error::corruption(
            path,
            0,
            "not a warm-keys file (bad magic)",
        ));
    }
    let version = reader.u32()?;
    if version != FORMAT_VERSION {
        return Err(reader.corrupt(format!("unsupported warm-keys format version {version}")));
    }
    let count = reader.u32()?;
    if bytes.len() < EMPTY_FILE_BYTES {
        return Err(reader.corrupt("warm-keys file ends early"));
    }
    let body = checksummed_body(&bytes, path, "warm-keys file")?;
    let mut reader = ByteReader::new(&body[HEADER_BYTES..], path, "warm-keys file", 16);
    if count as usize > (body.len() - HEADER_BYTES) / RECORD_BYTES_MIN {
        return Err(Error::corruption(
            path,
            12,
            format!("record count {count} is more than the file can hold"),
        ));
    }
    for _ in 0..count {
        reader.u32()?;
        let key = reader.bytes16()?;
        if key.is_empty() || key.len() > KEY_BYTES_MAX {
            return Err(reader.corrupt(format!("key length {} out of range", key.len())));
        }
    }
    if !reader.is_empty() {
        return Err(reader.corrupt("warm-keys file longer than its records"));
    }
    Ok(KeyList { bytes, count })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut encoder = Encoder::new(1 << 20);
        assert!(encoder.push(7, vec![0xff; KEY_BYTES_MAX].into()));
        assert!(encoder.push(1, b"user:1"[..].into()));
        assert!(encoder.push(1, b"k"[..].into()));
        encoder.finish()
    }

    /// Puts a valid checksum on `bytes`, so a test reaches the checks behind it.
    fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
        let body = bytes.len() - CRC_BYTES;
        let crc = crate::checksum::crc32c(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    fn reason(bytes: Vec<u8>) -> String {
        match decode(bytes, Path::new("HOME/warm-keys")) {
            Ok(_) => panic!("damage was accepted"),
            Err(error) => {
                assert_eq!(error.kind(), crate::error::ErrorKind::Corruption);
                error.to_string()
            }
        }
    }

    #[test]
    fn round_trips() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path(), 1 << 20).unwrap().is_none(), "no file");
        store(dir.path(), &sample()).unwrap();
        let list = load(dir.path(), 1 << 20).unwrap().unwrap();
        assert_eq!(list.len(), 3);
        let keys: Vec<(u32, Vec<u8>)> = list.iter().map(|(id, key)| (id, key.to_vec())).collect();
        assert_eq!(
            keys,
            [
                (1, b"k".to_vec()),
                (1, b"user:1".to_vec()),
                (7, vec![0xff; KEY_BYTES_MAX])
            ],
            "in KVS and key order"
        );
        let empty = Encoder::new(EMPTY_FILE_BYTES as u64).finish();
        assert_eq!(empty.len(), EMPTY_FILE_BYTES);
        assert_eq!(decode(empty, Path::new("x")).unwrap().iter().count(), 0);
    }

    #[test]
    fn every_damage_is_turned_down_with_its_reason() {
        let bytes = sample();
        for at in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x01;
            let why = reason(flipped);
            let expected = match at {
                0..8 => "bad magic",
                8..12 => "unsupported warm-keys format version",
                _ => "checksum mismatch",
            };
            assert!(why.contains(expected), "flip at {at}: {why}");
        }
        for len in 1..bytes.len() {
            let why = reason(bytes[..len].to_vec());
            assert!(
                why.contains("ends early") || why.contains("checksum mismatch"),
                "cut to {len}: {why}"
            );
        }
        assert!(reason(Vec::new()).contains("is empty"));
        let mut magic = bytes.clone();
        magic[..8].copy_from_slice(b"SHALECK1");
        assert!(reason(resealed(magic)).contains("bad magic"));
        let mut version = bytes.clone();
        version[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert!(reason(resealed(version)).contains("unsupported warm-keys format version 2"));
        let mut count = bytes.clone();
        count[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(reason(resealed(count))
            .contains("record count 4294967295 is more than the file can hold"));
        let mut one_more = bytes.clone();
        one_more[12..16].copy_from_slice(&4u32.to_le_bytes());
        assert!(reason(resealed(one_more)).contains("ends early"));
        let mut one_less = bytes.clone();
        one_less[12..16].copy_from_slice(&2u32.to_le_bytes());
        assert!(reason(resealed(one_less)).contains("longer than its records"));
        let mut empty_key = bytes.clone();
        empty_key[HEADER_BYTES + 4..HEADER_BYTES + 6].copy_from_slice(&0u16.to_le_bytes());
        assert!(reason(resealed(empty_key)).contains("key length 0 out of range"));
    }

    #[test]
    fn a_file_over_the_bound_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = sample();
        store(dir.path(), &bytes).unwrap();
        let error = load(dir.path(), bytes.len() as u64 - 1).err().unwrap();
        assert!(
            error.to_string().contains("more than warm_keys_max_bytes"),
            "{error}"
        );
        assert!(load(dir.path(), bytes.len() as u64).unwrap().is_some());
    }

    #[test]
    fn the_file_never_passes_its_bound() {
        for max_bytes in [EMPTY_FILE_BYTES, EMPTY_FILE_BYTES + 6, 100, 4096] {
            let mut encoder = Encoder::new(max_bytes as u64);
            let mut pushed = 0;
            for index in 0..1000u32 {
                if !encoder.push(index % 3, format!("key-{index}").into_bytes().into()) {
                    break;
                }
                pushed += 1;
            }
            let bytes = encoder.finish();
            assert!(bytes.len() <= max_bytes, "{} > {max_bytes}", bytes.len());
            let next_record = 4 + 2 + format!("key-{pushed}").len();
            assert!(
                bytes.len() + next_record > max_bytes,
                "the next key would not have fitted"
            );
            assert_eq!(decode(bytes, Path::new("x")).unwrap().len(), pushed);
        }
    }
}
