//! How Redis's data types live in one ShaleDB KVS: every value is one or more ordered records.
//!
//! Each record key starts with the Redis key's *base*: its length as a 4-byte big-endian number,
//! then the key itself. A tag byte and a suffix follow:
//!
//! | record key                      | value                          | holds                 |
//! |---------------------------------|--------------------------------|-----------------------|
//! | base `s`                        | the string                     | a string              |
//! | base `x`                        | expiry (8-byte BE unix ms) + string | a string with a TTL |
//! | base `h` field                  | the field's value              | one hash field        |
//! | base `z` member                 | score (8-byte BE f64 bits)     | one sorted-set member |
//! | base `Z` sortable-score member  | empty                          | the member's rank entry |
//!
//! All records of one Redis key are adjacent and sort below `base 0xFF`, so a key's type is the
//! tag of the first record at or after its base (one index seek, no device read), DEL is one
//! prefix delete of the base, and SCAN walks keys in the engine's order by seeking past each
//! key's records. Hash fields and sorted-set members are records of their own: HSET writes one
//! field, not the whole hash. Since keys are at most 1 KiB, the first byte of every record key is
//! 0, so FLUSHDB is a prefix delete of `[0]`.

use bytes::Bytes;
use shaledb::{Db, Kvs, WriteBatch};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

const STRING: u8 = b's';
const STRING_WITH_TTL: u8 = b'x';
const HASH_FIELD: u8 = b'h';
const ZSET_MEMBER: u8 = b'z';
const ZSET_RANK: u8 = b'Z';
/// Sorts after every tag: `base END` bounds a key's records.
const END: u8 = 0xFF;
/// The prefix every record key starts with (the length of a key under 16 MiB).
pub const ALL_RECORDS: &[u8] = &[0];

/// The Redis type of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    String,
    Hash,
    ZSet,
}

impl KeyType {
    pub fn name(self) -> &'static str {
        match self {
            KeyType::String => "string",
            KeyType::Hash => "hash",
            KeyType::ZSet => "zset",
        }
    }

    fn of_tag(tag: u8) -> Option<KeyType> {
        match tag {
            STRING | STRING_WITH_TTL => Some(KeyType::String),
            HASH_FIELD => Some(KeyType::Hash),
            ZSET_MEMBER | ZSET_RANK => Some(KeyType::ZSet),
            _ => None,
        }
    }
}

/// Why a keyspace operation failed.
#[derive(Debug)]
pub enum Failure {
    WrongType,
    /// A key, field or member too long for the engine once encoded.
    TooLarge,
    Engine(shaledb::Error),
}

impl From<shaledb::Error> for Failure {
    fn from(error: shaledb::Error) -> Self {
        Failure::Engine(error)
    }
}

pub type Result<T> = std::result::Result<T, Failure>;

/// A string's value and its expiry time, if it has one.
#[derive(Debug, Clone)]
pub struct StringValue {
    pub data: Bytes,
    pub expires_at_ms: Option<u64>,
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

fn base(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 16);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out
}

fn record_key(key: &[u8], tag: u8, suffix: &[u8]) -> Result<Vec<u8>> {
    let mut out = base(key);
    out.push(tag);
    out.extend_from_slice(suffix);
    if out.len() > shaledb::limits::KEY_BYTES_MAX {
        return Err(Failure::TooLarge);
    }
    Ok(out)
}

/// The Redis key and tag of a record key.
fn split_record_key(record: &[u8]) -> Option<(&[u8], u8, &[u8])> {
    let length = u32::from_be_bytes(record.get(..4)?.try_into().ok()?) as usize;
    let key = record.get(4..4 + length)?;
    let tag = *record.get(4 + length)?;
    Some((key, tag, &record[5 + length..]))
}

/// Maps a score to 8 bytes whose byte order is the scores' numeric order.
fn sortable_score(score: f64) -> [u8; 8] {
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    ordered.to_be_bytes()
}

fn score_of_sortable(bytes: &[u8]) -> f64 {
    let ordered = u64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    f64::from_bits(bits)
}

fn decode_score(value: &[u8]) -> f64 {
    f64::from_bits(u64::from_be_bytes(
        value
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .unwrap_or([0; 8]),
    ))
}

/// A score bound of ZRANGEBYSCORE.
#[derive(Clone, Copy, Debug)]
pub struct ScoreBound {
    pub score: f64,
    pub exclusive: bool,
}

/// One Redis database: a KVS holding records in the layout above.
#[derive(Clone)]
pub struct Keyspace {
    pub db: Arc<Db>,
    pub kvs: Kvs,
}

impl Keyspace {
    /// The tag of the first record of `key`, if it has any: its type, at the cost of one index
    /// seek and no device read.
    fn first_tag(&self, key: &[u8]) -> Result<Option<u8>> {
        let prefix = base(key);
        let first = self.kvs.prefix(&prefix).keys().next().transpose()?;
        Ok(first.map(|record| record[prefix.len()]))
    }

    /// The type of `key`, if it exists (a string past its expiry does not).
    pub fn key_type(&self, key: &[u8]) -> Result<Option<KeyType>> {
        let Some(tag) = self.first_tag(key)? else {
            return Ok(None);
        };
        if tag == STRING_WITH_TTL && self.read_string(key)?.is_none() {
            return Ok(None);
        }
        Ok(KeyType::of_tag(tag))
    }

    /// Fails with WRONGTYPE unless `key` is missing or of type `expected`.
    pub fn expect_type(&self, key: &[u8], expected: KeyType) -> Result<bool> {
        match self.key_type(key)? {
            None => Ok(false),
            Some(found) if found == expected => Ok(true),
            Some(_) => Err(Failure::WrongType),
        }
    }

    /// The string at `key` (none when missing or expired); WRONGTYPE for other types.
    pub fn read_string(&self, key: &[u8]) -> Result<Option<StringValue>> {
        if let Some(data) = self.kvs.get(record_key(key, STRING, &[])?)? {
            return Ok(Some(StringValue {
                data,
                expires_at_ms: None,
            }));
        }
        let ttl_key = record_key(key, STRING_WITH_TTL, &[])?;
        if let Some(stored) = self.kvs.get(&ttl_key)? {
            let expires_at_ms = u64::from_be_bytes(stored[..8].try_into().expect("8 bytes"));
            if expires_at_ms <= now_ms() {
                return Ok(None);
            }
            return Ok(Some(StringValue {
                data: stored.slice(8..),
                expires_at_ms: Some(expires_at_ms),
            }));
        }
        // A miss: only now pay the seek that tells a missing key from one of another type.
        match self.first_tag(key)? {
            Some(tag) if KeyType::of_tag(tag) != Some(KeyType::String) => Err(Failure::WrongType),
            _ => Ok(None),
        }
    }

    /// Sets `key` to a string in `batch`, replacing whatever it held (of any type). The caller
    /// holds the key's stripe lock.
    pub fn write_string(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        data: &[u8],
        expires_at_ms: Option<u64>,
    ) -> Result<()> {
        let plain = record_key(key, STRING, &[])?;
        // Overwriting a plain string in place needs no prefix delete; anything else might.
        let in_place = expires_at_ms.is_none() && self.kvs.contains_key(&plain)?;
        if !in_place && self.first_tag(key)?.is_some() {
            batch.prefix_delete(&self.kvs, base(key));
        }
        match expires_at_ms {
            None => batch.put(&self.kvs, plain, data),
            Some(at) => {
                let mut stored = Vec::with_capacity(8 + data.len());
                stored.extend_from_slice(&at.to_be_bytes());
                stored.extend_from_slice(data);
                batch.put(&self.kvs, record_key(key, STRING_WITH_TTL, &[])?, stored);
            }
        }
        Ok(())
    }

    /// Deletes every record of `key`.
    pub fn delete_key(&self, batch: &mut WriteBatch, key: &[u8]) {
        batch.prefix_delete(&self.kvs, base(key));
    }

    pub fn hash_get(&self, key: &[u8], field: &[u8]) -> Result<Option<Bytes>> {
        let value = self.kvs.get(record_key(key, HASH_FIELD, field)?)?;
        if value.is_none() {
            self.expect_type(key, KeyType::Hash)?;
        }
        Ok(value)
    }

    pub fn hash_multi_get(&self, key: &[u8], fields: &[Bytes]) -> Result<Vec<Option<Bytes>>> {
        let keys = fields
            .iter()
            .map(|field| record_key(key, HASH_FIELD, field))
            .collect::<Result<Vec<_>>>()?;
        let values = self.kvs.multi_get(keys)?;
        if values.iter().all(Option::is_none) {
            self.expect_type(key, KeyType::Hash)?;
        }
        Ok(values)
    }

    pub fn hash_contains(&self, key: &[u8], field: &[u8]) -> Result<bool> {
        let found = self.kvs.contains_key(record_key(key, HASH_FIELD, field)?)?;
        if !found {
            self.expect_type(key, KeyType::Hash)?;
        }
        Ok(found)
    }

    /// Every field and value of the hash at `key`, in field order.
    pub fn hash_all(&self, key: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        let prefix = record_key(key, HASH_FIELD, &[])?;
        let mut pairs = Vec::new();
        for item in self.kvs.prefix(&prefix) {
            let (record, value) = item?;
            pairs.push((record.slice(prefix.len()..), value));
        }
        if pairs.is_empty() {
            self.expect_type(key, KeyType::Hash)?;
        }
        Ok(pairs)
    }

    pub fn hash_len(&self, key: &[u8]) -> Result<usize> {
        let count = self.count_records(key, HASH_FIELD)?;
        if count == 0 {
            self.expect_type(key, KeyType::Hash)?;
        }
        Ok(count)
    }

    /// Sets hash fields (the caller holds the stripe lock); returns how many were new.
    pub fn hash_set(&self, key: &[u8], pairs: &[(Bytes, Bytes)]) -> Result<usize> {
        self.expect_type(key, KeyType::Hash)?;
        let mut batch = WriteBatch::new();
        let mut new_fields = std::collections::HashSet::new();
        for (field, value) in pairs {
            let record = record_key(key, HASH_FIELD, field)?;
            if !self.kvs.contains_key(&record)? {
                new_fields.insert(field.clone());
            }
            batch.put(&self.kvs, record, value);
        }
        self.db.write(batch)?;
        Ok(new_fields.len())
    }

    /// Deletes hash fields (the caller holds the stripe lock); returns how many existed.
    pub fn hash_delete(&self, key: &[u8], fields: &[Bytes]) -> Result<usize> {
        self.expect_type(key, KeyType::Hash)?;
        let mut batch = WriteBatch::new();
        let mut removed = std::collections::HashSet::new();
        for field in fields {
            let record = record_key(key, HASH_FIELD, field)?;
            if self.kvs.contains_key(&record)? && removed.insert(field.clone()) {
                batch.delete(&self.kvs, record);
            }
        }
        if !removed.is_empty() {
            self.db.write(batch)?;
        }
        Ok(removed.len())
    }

    pub fn zset_score(&self, key: &[u8], member: &[u8]) -> Result<Option<f64>> {
        let value = self.kvs.get(record_key(key, ZSET_MEMBER, member)?)?;
        if value.is_none() {
            self.expect_type(key, KeyType::ZSet)?;
        }
        Ok(value.map(|value| decode_score(&value)))
    }

    /// Sets a member's score in `batch`, replacing its rank entry; `old` is its current score.
    pub fn zset_put(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        member: &[u8],
        score: f64,
        old: Option<f64>,
    ) -> Result<()> {
        let score = if score == 0.0 { 0.0 } else { score };
        if let Some(old) = old {
            batch.delete(&self.kvs, self.rank_key(key, old, member)?);
        }
        batch.put(
            &self.kvs,
            record_key(key, ZSET_MEMBER, member)?,
            score.to_bits().to_be_bytes(),
        );
        batch.put(&self.kvs, self.rank_key(key, score, member)?, []);
        Ok(())
    }

    /// Removes a member with score `score` in `batch`.
    pub fn zset_remove(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        member: &[u8],
        score: f64,
    ) -> Result<()> {
        batch.delete(&self.kvs, record_key(key, ZSET_MEMBER, member)?);
        batch.delete(&self.kvs, self.rank_key(key, score, member)?);
        Ok(())
    }

    fn rank_key(&self, key: &[u8], score: f64, member: &[u8]) -> Result<Vec<u8>> {
        let mut suffix = Vec::with_capacity(8 + member.len());
        suffix.extend_from_slice(&sortable_score(score));
        suffix.extend_from_slice(member);
        record_key(key, ZSET_RANK, &suffix)
    }

    pub fn zset_len(&self, key: &[u8]) -> Result<usize> {
        let count = self.count_records(key, ZSET_MEMBER)?;
        if count == 0 {
            self.expect_type(key, KeyType::ZSet)?;
        }
        Ok(count)
    }

    /// Members with scores between `min` and `max`, in rank order, skipping `offset` and
    /// returning at most `limit`.
    pub fn zset_range_by_score(
        &self,
        key: &[u8],
        min: ScoreBound,
        max: ScoreBound,
        offset: usize,
        limit: Option<usize>,
    ) -> Result<Vec<(Bytes, f64)>> {
        self.expect_type(key, KeyType::ZSet)?;
        let start = record_key(key, ZSET_RANK, &sortable_score(min.score))?;
        let end = record_key(key, ZSET_RANK, &[END])?;
        let prefix_len = start.len() - 8;
        let mut out = Vec::new();
        let mut skipped = 0;
        for record in self.kvs.range(start..end).keys() {
            let record = record?;
            let score = score_of_sortable(&record[prefix_len..]);
            if (min.exclusive && score == min.score) || score < min.score {
                continue;
            }
            if score > max.score || (max.exclusive && score == max.score) {
                break;
            }
            if skipped < offset {
                skipped += 1;
                continue;
            }
            if limit.is_some_and(|limit| out.len() >= limit) {
                break;
            }
            out.push((record.slice(prefix_len + 8..), score));
        }
        Ok(out)
    }

    /// Members by rank, from `start` to `stop` inclusive (already made non-negative).
    pub fn zset_range_by_rank(
        &self,
        key: &[u8],
        start: usize,
        stop: usize,
    ) -> Result<Vec<(Bytes, f64)>> {
        let prefix = record_key(key, ZSET_RANK, &[])?;
        let mut out = Vec::new();
        for record in self
            .kvs
            .prefix(&prefix)
            .keys()
            .skip(start)
            .take(stop + 1 - start)
        {
            let record = record?;
            let score = score_of_sortable(&record[prefix.len()..]);
            out.push((record.slice(prefix.len() + 8..), score));
        }
        Ok(out)
    }

    fn count_records(&self, key: &[u8], tag: u8) -> Result<usize> {
        let prefix = record_key(key, tag, &[])?;
        let mut count = 0;
        for record in self.kvs.prefix(&prefix).keys() {
            record?;
            count += 1;
        }
        Ok(count)
    }

    /// Walks Redis keys in the engine's order from `resume` (a value this function returned; empty
    /// to start), calling `visit` with each live key and its type, until `visit` has been called
    /// `budget` times. Returns where to resume, or `None` at the end.
    pub fn walk_keys(
        &self,
        resume: &[u8],
        budget: usize,
        mut visit: impl FnMut(&[u8], KeyType),
    ) -> Result<Option<Vec<u8>>> {
        let mut cursor = self.kvs.prefix(ALL_RECORDS).keys();
        if !resume.is_empty() {
            cursor.seek(resume);
        }
        let mut visited = 0;
        while let Some(record) = cursor.next().transpose()? {
            let Some((key, tag, _)) = split_record_key(&record) else {
                continue;
            };
            let mut next = base(key);
            next.push(END);
            let live = tag != STRING_WITH_TTL || self.read_string(key)?.is_some();
            if let (true, Some(key_type)) = (live, KeyType::of_tag(tag)) {
                visit(key, key_type);
                visited += 1;
            }
            if visited >= budget {
                return Ok(Some(next));
            }
            cursor.seek(&next);
        }
        Ok(None)
    }

    /// The number of live Redis keys (walks the index).
    pub fn key_count(&self) -> Result<usize> {
        let mut count = 0;
        self.walk_keys(&[], usize::MAX, |_, _| count += 1)?;
        Ok(count)
    }

    /// Deletes every key.
    pub fn flush(&self) -> Result<()> {
        self.kvs.prefix_delete(ALL_RECORDS)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sortable_scores_keep_numeric_order() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -0.0,
            0.0,
            1e-300,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
        ];
        for pair in scores.windows(2) {
            assert!(
                sortable_score(pair[0]) <= sortable_score(pair[1]),
                "{pair:?}"
            );
        }
        for score in scores {
            assert_eq!(score_of_sortable(&sortable_score(score)), score);
        }
    }

    #[test]
    fn record_keys_split_back() {
        let record = record_key(b"user:1", HASH_FIELD, b"name").unwrap();
        assert_eq!(
            split_record_key(&record),
            Some((&b"user:1"[..], HASH_FIELD, &b"name"[..]))
        );
        assert_eq!(record[0], ALL_RECORDS[0]);
        assert!(matches!(
            record_key(&[b'k'; 1100], STRING, &[]),
            Err(Failure::TooLarge)
        ));
    }
}
