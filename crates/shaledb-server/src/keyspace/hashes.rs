//! Hashes: one record per field (`base h field`).

use super::tx::View;
use super::{record_key, tag, KeyType, Result};
use bytes::Bytes;

impl View<'_, '_> {
    pub fn hash_get(&self, key: &[u8], field: &[u8]) -> Result<Option<Bytes>> {
        let value = self.record(&record_key(key, tag::HASH_FIELD, field)?)?;
        let live = self.live_or_check(key, value.is_some(), KeyType::Hash)?;
        Ok(value.filter(|_| live))
    }

    /// Every field and value, in field order.
    pub fn hash_all(&self, key: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        self.members_with_values(key, KeyType::Hash)
    }
}
