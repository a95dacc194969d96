//! Sets: one record per member (`base m member`, empty value).

use super::tx::View;
use super::{record_key, tag, KeyType, Result};
use bytes::Bytes;

impl View<'_, '_> {
    pub fn set_contains(&self, key: &[u8], member: &[u8]) -> Result<bool> {
        let found = self.record_exists(&record_key(key, tag::SET_MEMBER, member)?)?;
        self.live_or_check(key, found, KeyType::Set)
    }

    /// Every member, in byte order (no value reads).
    pub fn set_members(&self, key: &[u8]) -> Result<Vec<Bytes>> {
        if !self.check_type(key, KeyType::Set)? {
            return Ok(Vec::new());
        }
        let prefix_len = record_key(key, tag::SET_MEMBER, &[])?.len();
        let mut members = Vec::new();
        for item in self.members(key, tag::SET_MEMBER, false)? {
            members.push(item?.0.slice(prefix_len..));
        }
        Ok(members)
    }

    pub fn set_len(&self, key: &[u8]) -> Result<usize> {
        if !self.check_type(key, KeyType::Set)? {
            return Ok(0);
        }
        self.count_members(key, tag::SET_MEMBER)
    }

    /// Adds members; returns how many were new.
    pub fn set_add(&mut self, key: &[u8], members: &[Bytes]) -> Result<usize> {
        let existed = self.prepare(key, KeyType::Set)?;
        let mut added = 0;
        for member in members {
            let record = record_key(key, tag::SET_MEMBER, member)?;
            if !self.record_exists(&record)? {
                self.put_record(record, Bytes::new());
                added += 1;
            }
        }
        if added > 0 {
            if !existed {
                self.created(key);
            }
            self.touch(key);
        }
        Ok(added)
    }

    /// Removes members; returns how many were there. The set goes with its last member.
    pub fn set_remove(&mut self, key: &[u8], members: &[Bytes]) -> Result<usize> {
        if !self.prepare(key, KeyType::Set)? {
            return Ok(0);
        }
        let mut removed = 0;
        for member in members {
            let record = record_key(key, tag::SET_MEMBER, member)?;
            if self.record_exists(&record)? {
                self.delete_record(&record);
                removed += 1;
            }
        }
        if removed > 0 {
            self.touch(key);
            self.remove_if_no_members(key, tag::SET_MEMBER)?;
        }
        Ok(removed)
    }

    /// Replaces whatever `key` held with a set of `members` (the STORE forms); an empty set
    /// deletes the key. Returns the set's size.
    pub fn set_store(&mut self, key: &[u8], members: &[Bytes]) -> Result<usize> {
        self.remove_key(key)?;
        self.touch(key);
        self.set_add(key, members)
    }
}
