//! Sorted sets: each member has a record with its score (`base z member`) and a rank entry
//! (`base Z sortable-score member`) whose key order is the set's order, so ranges by score or
//! rank are ordered reads of rank entries with no value reads.

use super::records::Records;
use super::tx::View;
use super::{damaged, record_key, record_u64, tag, KeyType, Result};
use bytes::Bytes;

/// A score bound of ZRANGEBYSCORE and friends.
#[derive(Clone, Copy, Debug)]
pub struct ScoreBound {
    pub score: f64,
    pub exclusive: bool,
}

impl ScoreBound {
    /// Whether `score` is on the allowed side of this bound as a minimum.
    pub fn admits_above(&self, score: f64) -> bool {
        score > self.score || (!self.exclusive && score == self.score)
    }

    /// Whether `score` is on the allowed side of this bound as a maximum.
    pub fn admits_below(&self, score: f64) -> bool {
        score < self.score || (!self.exclusive && score == self.score)
    }
}

/// A member bound of ZRANGEBYLEX and friends.
#[derive(Clone, Debug)]
pub enum LexBound {
    /// `-`
    Lowest,
    /// `+`
    Highest,
    Inclusive(Bytes),
    Exclusive(Bytes),
}

impl LexBound {
    pub fn admits_above(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Lowest => true,
            LexBound::Highest => false,
            LexBound::Inclusive(bound) => member >= &bound[..],
            LexBound::Exclusive(bound) => member > &bound[..],
        }
    }

    pub fn admits_below(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Lowest => false,
            LexBound::Highest => true,
            LexBound::Inclusive(bound) => member <= &bound[..],
            LexBound::Exclusive(bound) => member < &bound[..],
        }
    }
}

/// Maps a score to 8 bytes whose byte order is the scores' numeric order.
fn sortable_score(score: f64) -> u64 {
    let bits = score.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
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

/// The members of one sorted set in rank order (or reverse), with their scores.
pub struct Ranked {
    records: Records,
    prefix_len: usize,
    reverse: bool,
}

impl Iterator for Ranked {
    type Item = Result<(Bytes, f64)>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = if self.reverse {
            self.records.next_back()
        } else {
            self.records.next()
        }?;
        Some(match item {
            Ok((record, _)) if record.len() >= self.prefix_len + 8 => {
                let score = score_of_sortable(&record[self.prefix_len..]);
                if score.is_nan() {
                    return Some(Err(damaged(
                        "a sorted-set rank entry whose score is NaN",
                        &record,
                    )));
                }
                Ok((record.slice(self.prefix_len + 8..), score))
            }
            Ok((record, _)) => Err(damaged("a sorted-set rank entry", &record)),
            Err(error) => Err(error.into()),
        })
    }
}

impl View<'_, '_> {
    pub fn zset_score(&self, key: &[u8], member: &[u8]) -> Result<Option<f64>> {
        let record = record_key(key, tag::ZSET_MEMBER, member)?;
        let value = self.record(&record)?;
        if !self.live_or_check(key, value.is_some(), KeyType::ZSet)? {
            return Ok(None);
        }
        let Some(value) = value else {
            return Ok(None);
        };
        member_score(&record, &value).map(Some)
    }

    /// Sets a member's score (`old` is its score now, if it has one). `exists` says whether
    /// the set exists (from [`View::prepare`]); the first member creates it.
    pub fn zset_put(
        &mut self,
        key: &[u8],
        member: &[u8],
        score: f64,
        old: Option<f64>,
        exists: &mut bool,
    ) -> Result<()> {
        // -0.0 and 0.0 are one score.
        let score = if score == 0.0 { 0.0 } else { score };
        if !*exists {
            self.created(key);
            *exists = true;
        }
        if let Some(old) = old {
            self.delete_record(&rank_key(key, old, member)?);
        }
        self.put_record(
            record_key(key, tag::ZSET_MEMBER, member)?,
            score.to_bits().to_be_bytes(),
        );
        self.put_record(rank_key(key, score, member)?, []);
        self.touch(key);
        Ok(())
    }

    /// Replaces whatever `key` held with a sorted set of `members` (the STORE forms); none
    /// deletes the key. Returns the set's size.
    pub fn zset_store(&mut self, key: &[u8], members: &[(Bytes, f64)]) -> Result<usize> {
        self.remove_key(key)?;
        let mut exists = false;
        for (member, score) in members {
            self.zset_put(key, member, *score, None, &mut exists)?;
        }
        Ok(members.len())
    }

    /// Removes a member whose score is `score`; the set goes with its last member.
    pub fn zset_remove(&mut self, key: &[u8], member: &[u8], score: f64) -> Result<()> {
        self.delete_record(&record_key(key, tag::ZSET_MEMBER, member)?);
        self.delete_record(&rank_key(key, score, member)?);
        self.touch(key);
        self.remove_if_no_members(key, tag::ZSET_MEMBER)?;
        Ok(())
    }

    /// Members in rank order (`reverse`: from the highest), starting at the first whose score
    /// is at least `from` (reversed: at most), if given.
    pub fn zset_ranked(&self, key: &[u8], from: Option<f64>, reverse: bool) -> Result<Ranked> {
        let prefix = record_key(key, tag::ZSET_RANK, &[])?;
        let prefix_len = prefix.len();
        let (mut start, mut end) = (prefix, record_key(key, tag::ZSET_RANK + 1, &[])?);
        if !self.check_type(key, KeyType::ZSet)? {
            end = start.clone();
        } else if let Some(score) = from {
            let sortable = sortable_score(score);
            if reverse {
                end = match sortable.checked_add(1) {
                    Some(next) => record_key(key, tag::ZSET_RANK, &next.to_be_bytes())?,
                    None => end,
                };
            } else {
                start = record_key(key, tag::ZSET_RANK, &sortable.to_be_bytes())?;
            }
        }
        Ok(Ranked {
            records: self.records(start, end, false),
            prefix_len,
            reverse,
        })
    }
}

/// The score a sorted-set member's record holds: exactly 8 bytes, and a number (Redis stores no
/// NaN). Anything else is damage, named by the record.
pub(super) fn member_score(record: &[u8], value: &[u8]) -> Result<f64> {
    let score = f64::from_bits(record_u64(record, value, "a sorted-set score")?);
    if score.is_nan() {
        return Err(damaged("a sorted-set score that is NaN", record));
    }
    Ok(score)
}

fn rank_key(key: &[u8], score: f64, member: &[u8]) -> Result<Vec<u8>> {
    let mut suffix = Vec::with_capacity(8 + member.len());
    suffix.extend_from_slice(&sortable_score(score).to_be_bytes());
    suffix.extend_from_slice(member);
    record_key(key, tag::ZSET_RANK, &suffix)
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
            assert_eq!(
                score_of_sortable(&sortable_score(score).to_be_bytes()),
                score
            );
        }
    }
}
