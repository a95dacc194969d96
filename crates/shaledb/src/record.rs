//! The record: the unit every segment is made of.
//!
//! ```text
//! offset size field
//!  0     4    crc32c   over bytes 4..end of the record (header rest + key + value)
//!  4     1    kind     1 put, 2 tombstone, 3 prefix tombstone, 4 snapshot copy
//!  5     1    flags    bit 0: another record of the same atomic batch follows
//!                      bit 1: the value is stored lz4-compressed (see below)
//!                      bits 2..7: zero; a record with any of them set is refused
//!  6     2    key_len  1..=1024
//!  8     4    kvs_id
//! 12     4    value_len 0..=1 MiB (0 for tombstones): the stored value's length
//! 16     8    seqno
//! 24     key_len + value_len bytes: key, then the stored value
//! ```
//! All integers are little-endian. Records are packed back to back inside a segment.
//!
//! A value stored compressed (flag bit 1, only on puts and snapshot copies) is a u32 holding
//! the value's length (at most 1 MiB), then the value as one lz4 block (`compression.rs`). It
//! is stored so only when that is smaller than the value, so the stored value is never longer
//! than a value may be. The CRC covers the stored bytes; a stored value that does not
//! decompress to its stated length is corruption, like a CRC mismatch.

use crate::compression::decompress_lz4;
use crate::error::{Error, Result};
use crate::limits::{KEY_BYTES_MAX, RECORD_HEADER_BYTES, VALUE_BYTES_MAX};
use std::borrow::Cow;

/// Checks a key given by a client: not empty, and at most `KEY_BYTES_MAX` bytes.
pub fn validate_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::InvalidArgument("keys must not be empty".into()));
    }
    if key.len() > KEY_BYTES_MAX {
        return Err(Error::LimitExceeded {
            what: "key",
            limit: KEY_BYTES_MAX as u64,
            actual: key.len() as u64,
        });
    }
    Ok(())
}

/// Checks a value given by a client: at most `VALUE_BYTES_MAX` bytes.
pub fn validate_value(value: &[u8]) -> Result<()> {
    if value.len() > VALUE_BYTES_MAX {
        return Err(Error::LimitExceeded {
            what: "value",
            limit: VALUE_BYTES_MAX as u64,
            actual: value.len() as u64,
        });
    }
    Ok(())
}

/// What a record says about its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    /// The key has this value.
    Put = 1,
    /// The key is deleted.
    Tombstone = 2,
    /// Every key starting with this record's key (the prefix) is deleted.
    PrefixTombstone = 3,
    /// A put the cleaner moved only because a snapshot could still see it. Recovery ignores it:
    /// snapshots do not survive a restart.
    SnapshotCopy = 4,
}

impl RecordKind {
    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(RecordKind::Put),
            2 => Some(RecordKind::Tombstone),
            3 => Some(RecordKind::PrefixTombstone),
            4 => Some(RecordKind::SnapshotCopy),
            _ => None,
        }
    }

    pub fn has_value(self) -> bool {
        matches!(self, RecordKind::Put | RecordKind::SnapshotCopy)
    }
}

/// Flag: another record of the same atomic batch follows this one in the segment.
pub const FLAG_BATCH_CONTINUES: u8 = 1;
/// Flag: the stored value is the value lz4-compressed, its length first (`compression.rs`).
pub const FLAG_VALUE_LZ4: u8 = 2;
/// Every flag this version knows; a record with another one set is refused.
const KNOWN_FLAGS: u8 = FLAG_BATCH_CONTINUES | FLAG_VALUE_LZ4;

/// A record decoded in place from a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub kind: RecordKind,
    pub flags: u8,
    pub kvs_id: u32,
    pub seqno: u64,
    pub key: &'a [u8],
    /// The value as stored on media: compressed if `flags` says so (see [`RecordRef::value`]).
    pub stored_value: &'a [u8],
}

impl<'a> RecordRef<'a> {
    /// Bytes this record takes on media.
    pub fn encoded_len(&self) -> usize {
        encoded_len(self.key.len(), self.stored_value.len())
    }

    /// The value the client wrote: the stored value, decompressed if it is stored compressed.
    /// An error says why a compressed value cannot be read (damage the CRC did not catch).
    pub fn value(&self) -> Result<Cow<'a, [u8]>, String> {
        if self.flags & FLAG_VALUE_LZ4 == 0 {
            return Ok(Cow::Borrowed(self.stored_value));
        }
        decompress_lz4(self.stored_value).map(Cow::Owned)
    }
}

/// Why bytes are not a valid record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The buffer ends before the record does.
    Truncated { needed: usize },
    /// An all-zero header: unwritten space, the normal end of a segment's records.
    Unwritten,
    /// Anything else: a torn write or corruption.
    Corrupt(&'static str),
}

/// Bytes of a record's own checksum, which leads it and covers the rest of it.
pub const CRC_BYTES: usize = 4;

pub fn encoded_len(key_len: usize, value_len: usize) -> usize {
    RECORD_HEADER_BYTES + key_len + value_len
}

/// Appends one encoded record to `out` (for tests and fuzzing, which build segment bytes
/// themselves; the engine encodes into its log heads' buffers with [`encode_into`]).
#[cfg(any(test, feature = "fuzzing"))]
pub fn encode(out: &mut Vec<u8>, record: &RecordRef<'_>) {
    let start = out.len();
    out.resize(start + record.encoded_len(), 0);
    encode_into(&mut out[start..], record);
}

/// Encodes one record into `out`, which is exactly [`RecordRef::encoded_len`] bytes: how a log
/// head writes a record straight into its buffer, with no copy in between.
pub fn encode_into(out: &mut [u8], record: &RecordRef<'_>) {
    debug_assert!((1..=KEY_BYTES_MAX).contains(&record.key.len()));
    debug_assert!(record.stored_value.len() <= VALUE_BYTES_MAX);
    debug_assert!(record.kind.has_value() || record.stored_value.is_empty());
    assert_eq!(out.len(), record.encoded_len(), "a record's exact size");
    let (header, body) = out.split_at_mut(RECORD_HEADER_BYTES);
    header[CRC_BYTES] = record.kind as u8;
    header[CRC_BYTES + 1] = record.flags;
    header[6..8].copy_from_slice(&(record.key.len() as u16).to_le_bytes());
    header[8..12].copy_from_slice(&record.kvs_id.to_le_bytes());
    header[12..16].copy_from_slice(&(record.stored_value.len() as u32).to_le_bytes());
    header[16..24].copy_from_slice(&record.seqno.to_le_bytes());
    let (key, value) = body.split_at_mut(record.key.len());
    key.copy_from_slice(record.key);
    value.copy_from_slice(record.stored_value);
    // One pass over everything after the CRC: the header's rest and the body are contiguous.
    let crc = crate::checksum::crc32c(&out[CRC_BYTES..]);
    out[..CRC_BYTES].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes the record at the start of `bytes`, validating lengths and the CRC.
pub fn decode(bytes: &[u8]) -> Result<RecordRef<'_>, DecodeError> {
    if bytes.len() < RECORD_HEADER_BYTES {
        return Err(DecodeError::Truncated {
            needed: RECORD_HEADER_BYTES,
        });
    }
    let header = &bytes[..RECORD_HEADER_BYTES];
    if header.iter().all(|&byte| byte == 0) {
        return Err(DecodeError::Unwritten);
    }
    let crc = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
    let kind =
        RecordKind::from_byte(header[4]).ok_or(DecodeError::Corrupt("unknown record kind"))?;
    let flags = header[5];
    if flags & !KNOWN_FLAGS != 0 {
        return Err(DecodeError::Corrupt(unknown_flag(flags)));
    }
    if flags & FLAG_VALUE_LZ4 != 0 && !kind.has_value() {
        return Err(DecodeError::Corrupt(
            "a compressed value on a record without one",
        ));
    }
    let key_len = u16::from_le_bytes(header[6..8].try_into().expect("2 bytes")) as usize;
    let kvs_id = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    let value_len = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes")) as usize;
    let seqno = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
    if !(1..=KEY_BYTES_MAX).contains(&key_len) {
        return Err(DecodeError::Corrupt("key length out of range"));
    }
    if value_len > VALUE_BYTES_MAX || (!kind.has_value() && value_len != 0) {
        return Err(DecodeError::Corrupt("value length out of range"));
    }
    let total = encoded_len(key_len, value_len);
    if bytes.len() < total {
        return Err(DecodeError::Truncated { needed: total });
    }
    if crate::checksum::crc32c(&bytes[4..total]) != crc {
        return Err(DecodeError::Corrupt("CRC mismatch"));
    }
    let key = &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + key_len];
    let stored_value = &bytes[RECORD_HEADER_BYTES + key_len..total];
    Ok(RecordRef {
        kind,
        flags,
        kvs_id,
        seqno,
        key,
        stored_value,
    })
}

/// Why a record with a flag this version does not know is refused: its lowest such bit, named.
fn unknown_flag(flags: u8) -> &'static str {
    match (flags & !KNOWN_FLAGS).trailing_zeros() {
        2 => "unknown record flag: bit 2 (0x04)",
        3 => "unknown record flag: bit 3 (0x08)",
        4 => "unknown record flag: bit 4 (0x10)",
        5 => "unknown record flag: bit 5 (0x20)",
        6 => "unknown record flag: bit 6 (0x40)",
        _ => "unknown record flag: bit 7 (0x80)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut out = Vec::new();
        encode(
            &mut out,
            &RecordRef {
                kind: RecordKind::Put,
                flags: FLAG_BATCH_CONTINUES,
                kvs_id: 7,
                seqno: 42,
                key: b"key",
                stored_value: b"value",
            },
        );
        out
    }

    /// Makes the CRC of the record in `bytes` match its (changed) contents.
    fn reseal(bytes: &mut [u8]) {
        let crc = crate::checksum::crc32c(&bytes[CRC_BYTES..]);
        bytes[..CRC_BYTES].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn round_trip() {
        let bytes = sample();
        assert_eq!(bytes.len(), encoded_len(3, 5));
        let record = decode(&bytes).unwrap();
        assert_eq!(record.kind, RecordKind::Put);
        assert_eq!(record.flags, FLAG_BATCH_CONTINUES);
        assert_eq!((record.kvs_id, record.seqno), (7, 42));
        assert_eq!(
            (record.key, record.stored_value),
            (&b"key"[..], &b"value"[..])
        );
        assert_eq!(record.value().unwrap(), &b"value"[..]);
    }

    #[test]
    fn a_compressed_value_reads_back_decompressed() {
        let value = b"compressible ".repeat(50);
        let stored = crate::compression::Compression::Lz4
            .compress(&value)
            .unwrap();
        let mut bytes = Vec::new();
        encode(
            &mut bytes,
            &RecordRef {
                kind: RecordKind::Put,
                flags: FLAG_VALUE_LZ4,
                kvs_id: 1,
                seqno: 9,
                key: b"k",
                stored_value: &stored,
            },
        );
        assert_eq!(bytes.len(), encoded_len(1, stored.len()));
        let record = decode(&bytes).unwrap();
        assert_eq!(record.stored_value, &stored[..]);
        assert_eq!(record.value().unwrap(), &value[..]);
        // A compressed value that is not what it says, under a valid CRC, decodes as a
        // record but not as a value.
        let length_at = RECORD_HEADER_BYTES + 1;
        bytes[length_at..length_at + 4].copy_from_slice(&(value.len() as u32 + 1).to_le_bytes());
        reseal(&mut bytes);
        let reason = decode(&bytes).unwrap().value().unwrap_err();
        assert!(reason.contains("lz4"), "{reason}");
    }

    #[test]
    fn unknown_flags_are_refused_by_name() {
        for (flags, named) in [
            (0x04, "unknown record flag: bit 2 (0x04)"),
            (
                0x80 | FLAG_BATCH_CONTINUES,
                "unknown record flag: bit 7 (0x80)",
            ),
            (0x30 | FLAG_VALUE_LZ4, "unknown record flag: bit 4 (0x10)"),
        ] {
            let mut bytes = sample();
            bytes[5] = flags;
            reseal(&mut bytes);
            assert_eq!(decode(&bytes), Err(DecodeError::Corrupt(named)));
        }
    }

    #[test]
    fn only_records_with_values_may_have_them_compressed() {
        let mut bytes = Vec::new();
        encode(
            &mut bytes,
            &RecordRef {
                kind: RecordKind::Tombstone,
                flags: 0,
                kvs_id: 1,
                seqno: 1,
                key: b"k",
                stored_value: b"",
            },
        );
        bytes[5] = FLAG_VALUE_LZ4;
        reseal(&mut bytes);
        assert_eq!(
            decode(&bytes),
            Err(DecodeError::Corrupt(
                "a compressed value on a record without one"
            ))
        );
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let bytes = sample();
        for bit in 0..bytes.len() * 8 {
            let mut corrupt = bytes.clone();
            corrupt[bit / 8] ^= 1 << (bit % 8);
            assert!(
                decode(&corrupt).is_err(),
                "bit {bit} flipped went undetected"
            );
        }
    }

    #[test]
    fn truncation_and_unwritten_space_are_told_apart() {
        let bytes = sample();
        assert!(matches!(
            decode(&bytes[..10]),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            decode(&bytes[..bytes.len() - 1]),
            Err(DecodeError::Truncated { .. })
        ));
        assert_eq!(decode(&[0; 64]), Err(DecodeError::Unwritten));
    }

    #[test]
    fn tombstones_cannot_carry_values() {
        let mut bytes = sample();
        bytes[4] = RecordKind::Tombstone as u8;
        assert_eq!(
            decode(&bytes),
            Err(DecodeError::Corrupt("value length out of range"))
        );
    }
}
