//! The identity file every media directory carries (`DIR/IDENTITY`): which KVDB it belongs to,
//! as which media class, and, for a directory outside the home, which home owns it. Checked at
//! every open, so an empty (unmounted), foreign or swapped directory is a clear error instead of
//! a KVDB that silently lacks data.
//!
//! ```text
//! "SHALEID1"  u32 format version (1)  u64 kvdb_id  u8 media class
//! u16 length + bytes: the owning home's canonical path (empty for a directory inside the home)
//! u32 crc32c of every byte before it
//! ```

use crate::codec::{checksummed_body, ByteReader, PutBytes};
use crate::error::{Error, Result};
use crate::media::{replace_file_durably, MediaClass};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "IDENTITY";
const MAGIC: &[u8; 8] = b"SHALEID1";
const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub kvdb_id: u64,
    pub class: MediaClass,
    /// The canonical path of the home that owns this directory when it lies outside that home
    /// (a copy of the home would otherwise share it); `None` inside the home.
    pub owner_home: Option<PathBuf>,
}

impl Identity {
    /// Writes the identity into `dir`, durably.
    pub fn store(&self, dir: &Path) -> Result<()> {
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(MAGIC);
        bytes.put_u32(FORMAT_VERSION);
        bytes.put_u64(self.kvdb_id);
        bytes.put_u8(self.class as u8);
        let owner = self
            .owner_home
            .as_ref()
            .map_or(&[][..], |home| home.as_os_str().as_bytes());
        bytes.put_bytes16(owner);
        let crc = crate::checksum::crc32c(&bytes);
        bytes.put_u32(crc);
        replace_file_durably(dir, FILE_NAME, &bytes)
    }

    /// Reads the identity of `dir`: `Ok(None)` if it has none.
    pub fn load(dir: &Path) -> Result<Option<Identity>> {
        let path = dir.join(FILE_NAME);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Error::io(format!("read {}", path.display()), error)),
        };
        decode(&bytes, &path).map(Some)
    }
}

pub(crate) fn decode(bytes: &[u8], path: &Path) -> Result<Identity> {
    let body = checksummed_body(bytes, path, "identity file")?;
    let mut reader = ByteReader::new(body, path, "identity file", 0);
    if reader.take(MAGIC.len())? != MAGIC {
        return Err(Error::corruption(
            path,
            0,
            "not a ShaleDB identity file (bad magic)",
        ));
    }
    let version = reader.u32()?;
    if version != FORMAT_VERSION {
        return Err(reader.corrupt(format!("unsupported identity format version {version}")));
    }
    let kvdb_id = reader.u64()?;
    let class = MediaClass::from_byte(reader.u8()?)
        .ok_or_else(|| reader.corrupt("identity: unknown media class"))?;
    let owner = reader.bytes16()?;
    if !reader.is_empty() {
        return Err(reader.corrupt("identity file longer than its fields"));
    }
    Ok(Identity {
        kvdb_id,
        class,
        owner_home: (!owner.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(owner))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_any_damage_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Identity::load(dir.path()).unwrap(), None);
        for owner_home in [None, Some(PathBuf::from("/srv/kvdb"))] {
            let identity = Identity {
                kvdb_id: 0x1234_5678_9abc_def0,
                class: MediaClass::Staging,
                owner_home,
            };
            identity.store(dir.path()).unwrap();
            assert_eq!(Identity::load(dir.path()).unwrap(), Some(identity));
        }
        let path = dir.path().join(FILE_NAME);
        let bytes = std::fs::read(&path).unwrap();
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            assert!(decode(&damaged, &path).is_err(), "flip at {at}");
        }
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len], &path).is_err(), "cut to {len}");
        }
    }
}
