//! The prefixes a transaction deleted, asked of every record it reads: "is this record under
//! one?" is answered from the prefix lengths in use, not by a walk over every prefix (a DEL of
//! 100,000 keys clears 100,000 prefixes, and each of its reads after asks).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The prefixes, shared by a transaction with the cursors reading through it: copied only when
/// one is cleared while a cursor holds them. A transaction that clears none (most commands)
/// allocates nothing.
#[derive(Clone, Default)]
pub struct ClearedPrefixes(Option<Arc<Prefixes>>);

impl ClearedPrefixes {
    pub fn push(&mut self, db: usize, prefix: Vec<u8>) {
        Arc::make_mut(self.0.get_or_insert_default()).push(db, prefix);
    }

    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |prefixes| prefixes.order.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets the prefixes cleared after the first `len`.
    pub fn truncate(&mut self, len: usize) {
        if let Some(prefixes) = self
            .0
            .as_mut()
            .filter(|prefixes| prefixes.order.len() > len)
        {
            Arc::make_mut(prefixes).truncate(len);
        }
    }

    /// (database, prefix) in the order cleared.
    pub fn iter(&self) -> impl Iterator<Item = &(usize, Vec<u8>)> {
        self.0.iter().flat_map(|prefixes| prefixes.order.iter())
    }

    /// Whether `record` of database `db` is under a cleared prefix.
    pub fn covers(&self, db: usize, record: &[u8]) -> bool {
        self.0
            .as_ref()
            .is_some_and(|prefixes| prefixes.covers(db, record))
    }
}

#[derive(Clone, Default)]
struct Prefixes {
    /// (database, prefix) in the order cleared: the batch deletes these; a rollback truncates.
    order: Vec<(usize, Vec<u8>)>,
    /// Database -> prefix -> how many times it was cleared.
    by_db: HashMap<usize, HashMap<Vec<u8>, usize>>,
    /// Prefix length -> how many cleared prefixes have it: the lengths a lookup tries.
    lengths: BTreeMap<usize, usize>,
}

impl Prefixes {
    fn push(&mut self, db: usize, prefix: Vec<u8>) {
        *self
            .by_db
            .entry(db)
            .or_default()
            .entry(prefix.clone())
            .or_default() += 1;
        *self.lengths.entry(prefix.len()).or_default() += 1;
        self.order.push((db, prefix));
    }

    fn truncate(&mut self, len: usize) {
        while self.order.len() > len {
            let (db, prefix) = self.order.pop().expect("longer than len");
            let prefixes = self.by_db.get_mut(&db).expect("pushed with its database");
            let count = prefixes.get_mut(&prefix).expect("pushed");
            *count -= 1;
            if *count == 0 {
                prefixes.remove(&prefix);
            }
            let same_length = self.lengths.get_mut(&prefix.len()).expect("pushed");
            *same_length -= 1;
            if *same_length == 0 {
                self.lengths.remove(&prefix.len());
            }
        }
    }

    fn covers(&self, db: usize, record: &[u8]) -> bool {
        let Some(prefixes) = self.by_db.get(&db) else {
            return false;
        };
        self.lengths
            .range(..=record.len())
            .any(|(&length, _)| prefixes.contains_key(&record[..length]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_what_was_cleared_until_truncated() {
        let mut cleared = ClearedPrefixes::default();
        cleared.push(0, b"ab".to_vec());
        cleared.push(1, b"x".to_vec());
        let kept = cleared.len();
        cleared.push(0, b"abcd".to_vec());
        cleared.push(0, b"ab".to_vec());
        assert!(cleared.covers(0, b"ab"));
        assert!(cleared.covers(0, b"abzz"));
        assert!(!cleared.covers(0, b"a"));
        assert!(!cleared.covers(0, b"x1"), "another database's prefix");
        assert!(cleared.covers(1, b"x1"));
        cleared.truncate(kept);
        assert!(cleared.covers(0, b"abcd"), "still under ab, cleared before");
        cleared.truncate(1);
        assert!(!cleared.covers(1, b"x1"));
        assert!(cleared.covers(0, b"ab1"));
        cleared.truncate(0);
        assert!(cleared.is_empty());
        assert!(!cleared.covers(0, b"ab"));
        assert_eq!(cleared.iter().count(), 0);
    }
}
