//! Sets: a small one packed into one record (`base M`), a larger one a record per member
//! (`base m member`, empty value).

use super::tx::View;
use super::{KeyType, Result};
use bytes::Bytes;
use smallvec::SmallVec;

impl View<'_, '_> {
    /// Adds members; returns how many were new.
    pub fn set_add(&mut self, key: &[u8], members: &[Bytes]) -> Result<usize> {
        let pairs: SmallVec<[(Bytes, Bytes); 4]> = members
            .iter()
            .map(|member| (member.clone(), Bytes::new()))
            .collect();
        self.put_members(key, KeyType::Set, &pairs, true)
    }

    /// Replaces whatever `key` held with a set of `members` (the STORE forms); an empty set
    /// deletes the key. Returns the set's size.
    pub fn set_store(&mut self, key: &[u8], members: &[Bytes]) -> Result<usize> {
        self.remove_key(key)?;
        self.touch(key);
        self.set_add(key, members)
    }
}
