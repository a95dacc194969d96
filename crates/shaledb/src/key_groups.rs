//! Key groups: which keys of a KVS its DRAM index keeps in one partition.

use crate::error::{Error, Result};
use crate::limits;

/// Which keys the DRAM index keeps together. The index of a KVS is split into partitions
/// behind locks of their own; by default each key goes to the partition its hash picks, so an
/// ordered read merges every partition. Keys of one *group* go to one partition, so an ordered
/// read within a group (a prefix scan of it) reads one partition under one lock, as cheap as a
/// point read. Grouping is how the index is laid out in DRAM only: records on media are the
/// same either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyGroups {
    /// Every key is a group of its own (the default).
    #[default]
    None,
    /// Keys sharing their first `len` bytes form a group (a shorter key is a group of its own).
    Prefix { len: u16 },
    /// Keys sharing their first `offset` bytes, a big-endian length of `width` bytes after them
    /// and that many bytes after it form a group: the first field of a key that starts with its
    /// length (a shorter key is a group of its own).
    LengthPrefixed { offset: u16, width: u8 },
}

impl KeyGroups {
    /// The prefix that names `key`'s group, if `key` belongs to a group larger than itself.
    pub fn group_of<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        let len = match *self {
            KeyGroups::None => return None,
            KeyGroups::Prefix { len } => usize::from(len),
            KeyGroups::LengthPrefixed { offset, width } => {
                let (offset, width) = (usize::from(offset), usize::from(width));
                let field = key.get(offset..offset + width)?;
                let field_len = field
                    .iter()
                    .fold(0usize, |len, &byte| (len << 8) | usize::from(byte));
                offset + width + field_len
            }
        };
        key.get(..len)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let valid = match *self {
            KeyGroups::None => true,
            KeyGroups::Prefix { len } => len > 0 && usize::from(len) <= limits::KEY_BYTES_MAX,
            KeyGroups::LengthPrefixed { offset, width } => {
                (1..=4).contains(&width) && usize::from(offset) < limits::KEY_BYTES_MAX
            }
        };
        if !valid {
            return Err(Error::InvalidArgument(format!(
                "key groups {self:?}: a prefix is 1 to {} bytes, a length 1 to 4 bytes within the key limit",
                limits::KEY_BYTES_MAX
            )));
        }
        Ok(())
    }
}
