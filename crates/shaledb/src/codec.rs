//! Little-endian encoding for the engine's small metadata files (checkpoint, manifest,
//! directory identity): a reader whose every shortfall is a `Corruption` naming the file and
//! offset, and the writes that match it.

use crate::error::{Error, Result};
use std::path::Path;

/// Reads fixed-width little-endian fields from bytes read from `path`.
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
    /// What the bytes are, for messages ("checkpoint", "manifest edit").
    what: &'static str,
    /// Where `bytes` start in the file, so errors name file offsets.
    base: u64,
}

impl<'a> ByteReader<'a> {
    pub fn new(bytes: &'a [u8], path: &'a Path, what: &'static str, base: u64) -> Self {
        ByteReader {
            bytes,
            at: 0,
            path,
            what,
            base,
        }
    }

    /// The file offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.base + self.at as u64
    }

    pub fn is_empty(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// A corruption error at the current offset.
    pub fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::corruption(self.path, self.offset(), detail)
    }

    pub fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        if self.bytes.len() - self.at < len {
            return Err(self.corrupt(format!("{} ends early", self.what)));
        }
        let slice = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(slice)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A `u16` length, then that many bytes.
    pub fn bytes16(&mut self) -> Result<&'a [u8]> {
        let len = self.u16()? as usize;
        self.take(len)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("take returns N bytes"))
    }
}

/// The bytes of a file that ends with the crc32c of all before it, once that checksum matches:
/// a file shorter than the checksum or whose checksum differs is a `Corruption` naming `what`.
pub fn checksummed_body<'a>(bytes: &'a [u8], path: &Path, what: &str) -> Result<&'a [u8]> {
    let Some(body_len) = bytes.len().checked_sub(4) else {
        return Err(Error::corruption(path, 0, format!("{what} too short")));
    };
    let (body, crc) = bytes.split_at(body_len);
    if crate::checksum::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err(Error::corruption(
            path,
            body_len as u64,
            format!("{what} checksum mismatch"),
        ));
    }
    Ok(body)
}

/// Appends fixed-width little-endian fields.
pub trait PutBytes {
    fn put_u8(&mut self, value: u8);
    fn put_u16(&mut self, value: u16);
    fn put_u32(&mut self, value: u32);
    fn put_u64(&mut self, value: u64);
    /// A `u16` length, then the bytes; `bytes` must be at most `u16::MAX` long.
    fn put_bytes16(&mut self, bytes: &[u8]);
}

impl PutBytes for Vec<u8> {
    fn put_u8(&mut self, value: u8) {
        self.push(value);
    }

    fn put_u16(&mut self, value: u16) {
        self.extend_from_slice(&value.to_le_bytes());
    }

    fn put_u32(&mut self, value: u32) {
        self.extend_from_slice(&value.to_le_bytes());
    }

    fn put_u64(&mut self, value: u64) {
        self.extend_from_slice(&value.to_le_bytes());
    }

    fn put_bytes16(&mut self, bytes: &[u8]) {
        let len = u16::try_from(bytes.len()).expect("callers bound these fields by u16");
        self.put_u16(len);
        self.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_shortfalls_are_corruption_at_the_right_offset() {
        let mut bytes = Vec::new();
        bytes.put_u8(7);
        bytes.put_u16(300);
        bytes.put_u32(70_000);
        bytes.put_u64(u64::MAX - 1);
        bytes.put_bytes16(b"name");
        let path = Path::new("meta");
        let mut reader = ByteReader::new(&bytes, path, "test file", 100);
        assert_eq!(reader.u8().unwrap(), 7);
        assert_eq!(reader.u16().unwrap(), 300);
        assert_eq!(reader.u32().unwrap(), 70_000);
        assert_eq!(reader.u64().unwrap(), u64::MAX - 1);
        assert_eq!(reader.bytes16().unwrap(), b"name");
        assert!(reader.is_empty());
        let error = reader.u8().unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "corruption in meta at offset {}: test file ends early",
                100 + bytes.len()
            )
        );
    }
}
