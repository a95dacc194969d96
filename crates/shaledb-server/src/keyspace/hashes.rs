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

    pub fn hash_contains(&self, key: &[u8], field: &[u8]) -> Result<bool> {
        let found = self.record_exists(&record_key(key, tag::HASH_FIELD, field)?)?;
        self.live_or_check(key, found, KeyType::Hash)
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

    /// Every field name, in order (no value reads).
    pub fn hash_fields(&self, key: &[u8]) -> Result<Vec<Bytes>> {
        if !self.check_type(key, KeyType::Hash)? {
            return Ok(Vec::new());
        }
        let prefix_len = record_key(key, tag::HASH_FIELD, &[])?.len();
        let mut fields = Vec::new();
        for item in self.members(key, tag::HASH_FIELD, false)? {
            fields.push(item?.0.slice(prefix_len..));
        }
        Ok(fields)
    }

    pub fn hash_len(&self, key: &[u8]) -> Result<usize> {
        if !self.check_type(key, KeyType::Hash)? {
            return Ok(0);
        }
        self.count_members(key, tag::HASH_FIELD)
    }

    /// Sets fields; returns how many were new. With `only_new`, existing fields are left alone.
    pub fn hash_set(
        &mut self,
        key: &[u8],
        pairs: &[(Bytes, Bytes)],
        only_new: bool,
    ) -> Result<usize> {
        let existed = self.prepare(key, KeyType::Hash)?;
        let mut added = 0;
        for (field, value) in pairs {
            let record = record_key(key, tag::HASH_FIELD, field)?;
            let present = self.record_exists(&record)?;
            if !present {
                added += 1;
            } else if only_new {
                continue;
            }
            self.put_record(record, value.clone());
        }
        if !existed && added > 0 {
            self.created(key);
        }
        if added > 0 || !only_new {
            self.touch(key);
        }
        Ok(added)
    }

    /// Deletes fields; returns how many existed. The hash goes when its last field does.
    pub fn hash_delete(&mut self, key: &[u8], fields: &[Bytes]) -> Result<usize> {
        if !self.prepare(key, KeyType::Hash)? {
            return Ok(0);
        }
        let mut removed = 0;
        for field in fields {
            let record = record_key(key, tag::HASH_FIELD, field)?;
            if self.record_exists(&record)? {
                self.delete_record(&record);
                removed += 1;
            }
        }
        if removed > 0 {
            self.touch(key);
            self.remove_if_no_members(key, tag::HASH_FIELD)?;
        }
        Ok(removed)
    }
}
