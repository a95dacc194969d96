//! Lists: one record per element at a position (`base l position`), and the list's bounds
//! (`base L`: head and tail, the element positions are head..tail). Pushing at either end moves
//! a bound and writes one record; index reads are point reads; LREM and LINSERT rewrite the list,
//! O(N) as in Redis.

use super::tx::View;
use super::{damaged, normalize_range, record_key, tag, Failure, KeyType, Result};
use bytes::Bytes;

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListEnd {
    Left,
    Right,
}

/// LINSERT's BEFORE and AFTER.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pivot {
    Before,
    After,
}

fn sortable_position(position: i64) -> [u8; 8] {
    ((position as u64) ^ (1 << 63)).to_be_bytes()
}

/// The position of element `index` (negative: from the end) of a list at head..tail, if it has one.
fn position_of(head: i64, tail: i64, index: i64) -> Option<i64> {
    let position = if index < 0 {
        tail.checked_add(index)?
    } else {
        head.checked_add(index)?
    };
    (head..tail).contains(&position).then_some(position)
}

fn item_key(key: &[u8], position: i64) -> Result<Vec<u8>> {
    record_key(key, tag::LIST_ITEM, &sortable_position(position))
}

impl View<'_, '_> {
    /// The positions of the first element and past the last; `None` for no list.
    fn list_bounds(&self, key: &[u8]) -> Result<Option<(i64, i64)>> {
        let record = record_key(key, tag::LIST_BOUNDS, &[])?;
        self.record_with(&record, |value| {
            let Some(value) = value else {
                return Ok(None);
            };
            // Exactly two 8-byte numbers, head below tail: anything else is damage.
            let (head, tail) = <[u8; 16]>::try_from(value)
                .ok()
                .map(|bytes| {
                    let head = i64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
                    let tail = i64::from_be_bytes(bytes[8..].try_into().expect("8 bytes"));
                    (head, tail)
                })
                .filter(|(head, tail)| head < tail)
                .ok_or_else(|| {
                    damaged(
                        &format!(
                            "a list's bounds ({} bytes; 16, head below tail)",
                            value.len()
                        ),
                        &record,
                    )
                })?;
            Ok(Some((head, tail)))
        })?
    }

    fn write_list_bounds(&mut self, key: &[u8], head: i64, tail: i64) -> Result<()> {
        let mut value = Vec::with_capacity(16);
        value.extend_from_slice(&head.to_be_bytes());
        value.extend_from_slice(&tail.to_be_bytes());
        self.put_record(record_key(key, tag::LIST_BOUNDS, &[])?, value);
        Ok(())
    }

    /// The bounds of the live list at `key` (WRONGTYPE for other types).
    fn live_list(&self, key: &[u8]) -> Result<Option<(i64, i64)>> {
        if !self.check_type(key, KeyType::List)? {
            return Ok(None);
        }
        Ok(Some(self.list_bounds(key)?.ok_or_else(|| {
            Failure::Damaged(format!(
                "list {:?} has no bounds record",
                String::from_utf8_lossy(key)
            ))
        })?))
    }

    fn list_item(&self, key: &[u8], position: i64) -> Result<Bytes> {
        let record = item_key(key, position)?;
        self.record(&record)?
            .ok_or_else(|| damaged("a list element missing within the list's bounds", &record))
    }

    pub fn list_len(&self, key: &[u8]) -> Result<usize> {
        Ok(self
            .live_list(key)?
            .map_or(0, |(head, tail)| (tail - head) as usize))
    }

    /// Pushes `values` one after another at `end`; with `only_if_exists` (LPUSHX), nothing
    /// happens to a missing key. Returns the list's length.
    pub fn list_push(
        &mut self,
        key: &[u8],
        end: ListEnd,
        values: &[Bytes],
        only_if_exists: bool,
    ) -> Result<usize> {
        let existed = self.prepare(key, KeyType::List)?;
        if !existed && (only_if_exists || values.is_empty()) {
            return Ok(0);
        }
        let (mut head, mut tail) = if existed {
            self.list_bounds(key)?
                .ok_or_else(|| damaged("a list without bounds", key))?
        } else {
            (0, 0)
        };
        for value in values {
            let position = match end {
                ListEnd::Left => {
                    head -= 1;
                    head
                }
                ListEnd::Right => {
                    tail += 1;
                    tail - 1
                }
            };
            self.put_record(item_key(key, position)?, value);
        }
        self.write_list_bounds(key, head, tail)?;
        if !existed {
            self.created(key);
        }
        self.touch(key);
        Ok((tail - head) as usize)
    }

    /// Pops up to `count` elements from `end`, in the order they were popped. The list goes with
    /// its last element.
    pub fn list_pop(&mut self, key: &[u8], end: ListEnd, count: usize) -> Result<Vec<Bytes>> {
        if !self.prepare(key, KeyType::List)? {
            return Ok(Vec::new());
        }
        let (mut head, mut tail) = self
            .list_bounds(key)?
            .ok_or_else(|| damaged("a list without bounds", key))?;
        let mut popped = Vec::with_capacity(count.min((tail - head) as usize));
        while popped.len() < count && head < tail {
            let position = match end {
                ListEnd::Left => {
                    head += 1;
                    head - 1
                }
                ListEnd::Right => {
                    tail -= 1;
                    tail
                }
            };
            popped.push(self.list_item(key, position)?);
            self.delete_record(&item_key(key, position)?);
        }
        if head == tail {
            self.remove_key(key)?;
        } else {
            self.write_list_bounds(key, head, tail)?;
            self.touch(key);
        }
        Ok(popped)
    }

    /// Elements `start..=stop` (Redis's indices: negative counts from the end).
    pub fn list_range(&self, key: &[u8], start: i64, stop: i64) -> Result<Vec<Bytes>> {
        let Some((head, tail)) = self.live_list(key)? else {
            return Ok(Vec::new());
        };
        let Some((first, last)) = normalize_range(start, stop, (tail - head) as usize) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(last - first + 1);
        let from = item_key(key, head + first as i64)?;
        let to = item_key(key, head + last as i64 + 1)?;
        for item in self.records(from, to, true) {
            out.push(item?.1);
        }
        if out.len() != last - first + 1 {
            return Err(damaged(
                "a list with elements missing within its bounds",
                key,
            ));
        }
        Ok(out)
    }

    /// Every element, in order.
    pub fn list_all(&self, key: &[u8]) -> Result<Vec<Bytes>> {
        self.list_range(key, 0, -1)
    }

    /// The element at `index` (negative counts from the end).
    pub fn list_index(&self, key: &[u8], index: i64) -> Result<Option<Bytes>> {
        let Some((head, tail)) = self.live_list(key)? else {
            return Ok(None);
        };
        let Some(position) = position_of(head, tail, index) else {
            return Ok(None);
        };
        self.list_item(key, position).map(Some)
    }

    /// LSET.
    pub fn list_set(&mut self, key: &[u8], index: i64, value: &[u8]) -> Result<()> {
        if !self.prepare(key, KeyType::List)? {
            return Err(Failure::Invalid("ERR no such key".into()));
        }
        let (head, tail) = self
            .list_bounds(key)?
            .ok_or_else(|| damaged("a list without bounds", key))?;
        let Some(position) = position_of(head, tail, index) else {
            return Err(Failure::Invalid("ERR index out of range".into()));
        };
        self.put_record(item_key(key, position)?, value);
        self.touch(key);
        Ok(())
    }

    /// LTRIM: keeps elements `start..=stop`.
    pub fn list_trim(&mut self, key: &[u8], start: i64, stop: i64) -> Result<()> {
        if !self.prepare(key, KeyType::List)? {
            return Ok(());
        }
        let (head, tail) = self
            .list_bounds(key)?
            .ok_or_else(|| damaged("a list without bounds", key))?;
        let Some((first, last)) = normalize_range(start, stop, (tail - head) as usize) else {
            self.remove_key(key)?;
            return Ok(());
        };
        let (new_head, new_tail) = (head + first as i64, head + last as i64 + 1);
        for position in (head..new_head).chain(new_tail..tail) {
            self.delete_record(&item_key(key, position)?);
        }
        self.write_list_bounds(key, new_head, new_tail)?;
        self.touch(key);
        Ok(())
    }

    /// Replaces the list at `key` with `elements` (LREM, LINSERT); none deletes the key.
    pub fn list_rewrite(&mut self, key: &[u8], elements: &[Bytes]) -> Result<()> {
        let existed = self.prepare(key, KeyType::List)?;
        if existed {
            let (head, tail) = self
                .list_bounds(key)?
                .ok_or_else(|| damaged("a list without bounds", key))?;
            for position in head..tail {
                self.delete_record(&item_key(key, position)?);
            }
        }
        if elements.is_empty() {
            if existed {
                self.remove_key(key)?;
            }
            return Ok(());
        }
        for (position, element) in elements.iter().enumerate() {
            self.put_record(item_key(key, position as i64)?, element);
        }
        self.write_list_bounds(key, 0, elements.len() as i64)?;
        if !existed {
            self.created(key);
        }
        self.touch(key);
        Ok(())
    }
}
