//! The record: the unit every segment is made of.
//!
//! ```text
//! offset size field
//!  0     4    crc32c   over bytes 4..end of the record (header rest + key + value)
//!  4     1    kind     1 put, 2 tombstone, 3 prefix tombstone, 4 snapshot copy
//!  5     1    flags    bit 0: another record of the same atomic batch follows
//!  6     2    key_len  1..=1024
//!  8     4    kvs_id
//! 12     4    value_len 0..=1 MiB (0 for tombstones)
//! 16     8    seqno
//! 24     key_len + value_len bytes: key, then value
//! ```
//! All integers are little-endian. Records are packed back to back inside a segment.

use crate::error::{Error, Result};
use crate::limits::{KEY_BYTES_MAX, RECORD_HEADER_BYTES, VALUE_BYTES_MAX};

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

/// A record decoded in place from a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub kind: RecordKind,
    pub flags: u8,
    pub kvs_id: u32,
    pub seqno: u64,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl RecordRef<'_> {
    /// Bytes this record takes on media.
    pub fn encoded_len(&self) -> usize {
        encoded_len(self.key.len(), self.value.len())
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

/// Appends one encoded record to `out`.
pub fn encode(out: &mut Vec<u8>, record: &RecordRef<'_>) {
    debug_assert!((1..=KEY_BYTES_MAX).contains(&record.key.len()));
    debug_assert!(record.value.len() <= VALUE_BYTES_MAX);
    debug_assert!(record.kind.has_value() || record.value.is_empty());
    let start = out.len();
    out.extend_from_slice(&[0; CRC_BYTES]);
    out.push(record.kind as u8);
    out.push(record.flags);
    out.extend_from_slice(&(record.key.len() as u16).to_le_bytes());
    out.extend_from_slice(&record.kvs_id.to_le_bytes());
    out.extend_from_slice(&(record.value.len() as u32).to_le_bytes());
    out.extend_from_slice(&record.seqno.to_le_bytes());
    out.extend_from_slice(record.key);
    out.extend_from_slice(record.value);
    let crc = crc32c::crc32c(&out[start + CRC_BYTES..]);
    out[start..start + CRC_BYTES].copy_from_slice(&crc.to_le_bytes());
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
    if flags & !FLAG_BATCH_CONTINUES != 0 {
        return Err(DecodeError::Corrupt("unknown record flags"));
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
    if crc32c::crc32c(&bytes[4..total]) != crc {
        return Err(DecodeError::Corrupt("CRC mismatch"));
    }
    let key = &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + key_len];
    let value = &bytes[RECORD_HEADER_BYTES + key_len..total];
    Ok(RecordRef {
        kind,
        flags,
        kvs_id,
        seqno,
        key,
        value,
    })
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
                value: b"value",
            },
        );
        out
    }

    #[test]
    fn round_trip() {
        let bytes = sample();
        assert_eq!(bytes.len(), encoded_len(3, 5));
        let record = decode(&bytes).unwrap();
        assert_eq!(record.kind, RecordKind::Put);
        assert_eq!(record.flags, FLAG_BATCH_CONTINUES);
        assert_eq!((record.kvs_id, record.seqno), (7, 42));
        assert_eq!((record.key, record.value), (&b"key"[..], &b"value"[..]));
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
