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
        if !self.check_type(key, KeyType::Hash)? {
            return Ok(Vec::new());
        }
        let prefix_len = record_key(key, tag::HASH_FIELD, &[])?.len();
        let mut pairs = Vec::new();
        for item in self.members(key, tag::HASH_FIELD, true)? {
            let (record, value) = item?;
            pairs.push((record.slice(prefix_len..), value));
        }
        Ok(pairs)
    }
}
