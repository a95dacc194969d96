//! Hashes: a small one packed into one record (`base H`), a larger one a record per field
//! (`base h field`).

use super::tx::View;
use super::{KeyType, Result};
use bytes::Bytes;

impl View<'_, '_> {
    pub fn hash_get(&self, key: &[u8], field: &[u8]) -> Result<Option<Bytes>> {
        self.member_value(key, KeyType::Hash, field)
    }

    /// Every field and value, in field order.
    pub fn hash_all(&self, key: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        self.members_with_values(key, KeyType::Hash)
    }
}
