//! A transaction's writes before it commits (RocksDB's WriteBatchWithIndex inside a
//! transaction): the operations in order, as RocksDB's serialized batch lists them, indexed by
//! column family and key so reads see the transaction's own writes first, with save points.
//! An iterator over a transaction merges a frozen copy of one column family's writes
//! ([`Overlay`]) over a cursor of the database ([`Cursor`]).

use crate::batch::{rocksdb_writebatch_t, Op, OpKind};
use crate::db::ColumnFamily;
use crate::status::{Code, Result, Status};
use engine::limits::{KEY_BYTES_MAX, VALUE_BYTES_MAX};
use engine::{Bytes, Iter};
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

/// A key as an error message shows it: printable bytes as they are, others escaped, long keys
/// cut.
pub(crate) fn show_key(key: &[u8]) -> String {
    const SHOWN: usize = 64;
    let shown: String = key[..key.len().min(SHOWN)].escape_ascii().to_string();
    if key.len() > SHOWN {
        format!("{shown}... ({} bytes)", key.len())
    } else {
        shown
    }
}

/// ShaleDB's limits on a key and a value, checked when a write is made (RocksDB takes any).
pub(crate) fn check_key_value(key: &[u8], value: Option<&[u8]>) -> Result<()> {
    if key.is_empty() || key.len() > KEY_BYTES_MAX {
        return Err(Status::invalid(format!(
            "key of {} bytes: ShaleDB keys are 1 to {KEY_BYTES_MAX} bytes",
            key.len()
        )));
    }
    if let Some(value) = value {
        if value.len() > VALUE_BYTES_MAX {
            return Err(Status::invalid(format!(
                "value of {} bytes: ShaleDB values are at most {VALUE_BYTES_MAX} bytes",
                value.len()
            )));
        }
    }
    Ok(())
}

fn varint_len(mut value: usize) -> usize {
    let mut len = 1;
    while value >= 0x80 {
        value >>= 7;
        len += 1;
    }
    len
}

/// Bytes an operation adds to RocksDB's serialized batch.
fn serialized_len(op: &Op) -> usize {
    let cf = if op.cf == 0 {
        0
    } else {
        varint_len(op.cf as usize)
    };
    let value = match op.kind {
        OpKind::Delete | OpKind::SingleDelete => 0,
        _ => varint_len(op.value.len()) + op.value.len(),
    };
    1 + cf + varint_len(op.key.len()) + op.key.len() + value
}

/// The header of RocksDB's serialized batch (sequence number and count).
const HEADER_BYTES: usize = 12;

/// One column family's writes, frozen when an iterator is made: key -> value, or None for a
/// delete.
pub(crate) type Overlay = BTreeMap<Vec<u8>, Option<Bytes>>;

#[derive(Clone, Copy)]
struct SavePoint {
    ops: usize,
    bytes: usize,
}

/// The writes of one transaction.
pub(crate) struct WriteSet {
    ops: Vec<Op>,
    /// (column family, key) -> the position in `ops` of the key's last write.
    index: BTreeMap<(u32, Vec<u8>), usize>,
    save_points: Vec<SavePoint>,
    bytes: usize,
    max_bytes: usize,
    /// The column families written, by the number the operations name them with, as they
    /// were when written: a column family dropped since fails the commit, and a new one given
    /// the same number is never written in its place.
    column_families: BTreeMap<u32, ColumnFamily>,
}

impl WriteSet {
    /// An empty write set whose serialized form may grow to `max_bytes`.
    pub fn new(max_bytes: usize) -> WriteSet {
        WriteSet {
            ops: Vec::new(),
            index: BTreeMap::new(),
            save_points: Vec::new(),
            bytes: HEADER_BYTES,
            max_bytes,
            column_families: BTreeMap::new(),
        }
    }

    /// Notes `cf` as written by this transaction (see `column_families`).
    pub fn remember(&mut self, cf: &ColumnFamily) {
        self.column_families
            .entry(cf.id)
            .or_insert_with(|| cf.clone());
    }

    /// The column family operations numbered `number` write.
    pub fn column_family(&self, number: u32) -> Result<&ColumnFamily> {
        crate::db::numbered(&self.column_families, number)
    }

    /// Adds a put (`Some(value)`) or delete of `key` in column family `cf`.
    pub fn write(&mut self, cf: u32, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        check_key_value(key, value)?;
        let op = Op {
            kind: if value.is_some() {
                OpKind::Put
            } else {
                OpKind::Delete
            },
            cf,
            key: key.to_vec(),
            value: value.map_or_else(Vec::new, <[u8]>::to_vec),
        };
        self.push(op)
    }

    fn push(&mut self, op: Op) -> Result<()> {
        let bytes = self.bytes + serialized_len(&op);
        if bytes > self.max_bytes {
            // RocksDB's Status::MemoryLimit, with what overflowed.
            return Err(Status::new(
                Code::Aborted,
                format!(
                    "Memory limit reached: the transaction's write batch would be {bytes} bytes, over its max_write_batch_size of {}",
                    self.max_bytes
                ),
            ));
        }
        self.bytes = bytes;
        self.index.insert((op.cf, op.key.clone()), self.ops.len());
        self.ops.push(op);
        Ok(())
    }

    /// The transaction's own write of `key`: `Some(Some(value))` for a put, `Some(None)` for a
    /// delete, `None` when it has not written the key.
    pub fn get(&self, cf: u32, key: &[u8]) -> Option<Option<Bytes>> {
        let position = *self.index.get(&(cf, key.to_vec()))?;
        let op = &self.ops[position];
        Some(match op.kind {
            OpKind::Put => Some(Bytes::copy_from_slice(&op.value)),
            _ => None,
        })
    }

    /// The last write of each key, in (column family, key) order.
    pub fn last_writes(&self) -> impl Iterator<Item = &Op> {
        self.index.values().map(|position| &self.ops[*position])
    }

    /// Every operation, in the order made.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The writes as a plain write batch (for a write batch with index to hand out or write).
    pub fn to_batch(&self) -> rocksdb_writebatch_t {
        let mut batch = rocksdb_writebatch_t::default();
        batch.ops = self.ops.clone();
        batch
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Column family `cf`'s writes, copied.
    pub fn overlay(&self, cf: u32) -> Arc<Overlay> {
        let range = (cf, Vec::new())..;
        Arc::new(
            self.index
                .range(range)
                .take_while(|((op_cf, _), _)| *op_cf == cf)
                .map(|((_, key), position)| {
                    let op = &self.ops[*position];
                    let value = (op.kind == OpKind::Put).then(|| Bytes::copy_from_slice(&op.value));
                    (key.clone(), value)
                })
                .collect(),
        )
    }

    pub fn set_save_point(&mut self) {
        self.save_points.push(SavePoint {
            ops: self.ops.len(),
            bytes: self.bytes,
        });
    }

    /// Undoes the writes since the last save point, which it removes; returns how many save
    /// points were left before (RocksDB's NotFound when none).
    pub fn rollback_to_save_point(&mut self) -> Result<()> {
        let point = self.save_points.pop().ok_or_else(no_save_point)?;
        self.ops.truncate(point.ops);
        self.bytes = point.bytes;
        self.reindex();
        Ok(())
    }

    fn reindex(&mut self) {
        self.index.clear();
        for (position, op) in self.ops.iter().enumerate() {
            self.index.insert((op.cf, op.key.clone()), position);
        }
    }

    /// Forgets every write and save point.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.index.clear();
        self.save_points.clear();
        self.bytes = HEADER_BYTES;
        self.column_families.clear();
    }
}

/// RocksDB's answer to a rollback without a save point.
pub(crate) fn no_save_point() -> Status {
    Status::new(Code::NotFound, "No savepoint is set")
}

/// A cursor of the database with a transaction's writes merged over it: a key the transaction
/// wrote shows its value (or is gone, if it deleted it).
pub(crate) struct Cursor {
    base: Iter,
    /// The overlay's entries within the cursor's range, still to come from either end.
    own: VecDeque<(Bytes, Option<Bytes>)>,
    base_front: Option<(Bytes, Bytes)>,
    base_back: Option<(Bytes, Bytes)>,
    done: bool,
}

impl Cursor {
    /// `base` alone.
    pub fn plain(base: Iter) -> Self {
        Cursor {
            base,
            own: VecDeque::new(),
            base_front: None,
            base_back: None,
            done: false,
        }
    }

    /// `base` (a cursor over `bounds`) with `overlay`'s entries within `bounds` merged in.
    pub fn new(base: Iter, overlay: &Overlay, bounds: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Self {
        let empty = match (&bounds.0, &bounds.1) {
            (Bound::Included(lower) | Bound::Excluded(lower), Bound::Excluded(upper)) => {
                lower >= upper
            }
            (Bound::Excluded(lower), Bound::Included(upper)) => lower >= upper,
            (Bound::Included(lower), Bound::Included(upper)) => lower > upper,
            _ => false,
        };
        let own = if empty {
            VecDeque::new()
        } else {
            overlay
                .range(bounds)
                .map(|(key, value)| (Bytes::copy_from_slice(key), value.clone()))
                .collect()
        };
        Cursor {
            own,
            ..Cursor::plain(base)
        }
    }

    fn step(&mut self, reverse: bool) -> Option<engine::Result<(Bytes, Bytes)>> {
        let Cursor {
            base,
            own,
            base_front,
            base_back,
            done,
        } = self;
        let (mine, theirs) = if reverse {
            (base_back, base_front)
        } else {
            (base_front, base_back)
        };
        while !*done {
            if mine.is_none() {
                let item = if reverse {
                    base.next_back()
                } else {
                    base.next()
                };
                match item {
                    Some(Ok(item)) => *mine = Some(item),
                    Some(Err(error)) => {
                        *done = true;
                        return Some(Err(error));
                    }
                    // The base is exhausted from this end; what the other end holds is next.
                    None => *mine = theirs.take(),
                }
            }
            let next_own = if reverse { own.back() } else { own.front() };
            let order = match (mine.as_ref(), next_own) {
                (None, None) => {
                    *done = true;
                    return None;
                }
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((base_key, _)), Some((own_key, _))) if reverse => own_key.cmp(base_key),
                (Some((base_key, _)), Some((own_key, _))) => base_key.cmp(own_key),
            };
            if order == std::cmp::Ordering::Less {
                return mine.take().map(Ok);
            }
            if order == std::cmp::Ordering::Equal {
                mine.take(); // the transaction's own write of the key wins
            }
            let popped = if reverse {
                own.pop_back()
            } else {
                own.pop_front()
            };
            if let Some((key, Some(value))) = popped {
                return Some(Ok((key, value)));
            }
        }
        None
    }

    pub fn next(&mut self) -> Option<engine::Result<(Bytes, Bytes)>> {
        self.step(false)
    }

    pub fn next_back(&mut self) -> Option<engine::Result<(Bytes, Bytes)>> {
        self.step(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_see_the_last_write_and_save_points_undo() {
        let mut writes = WriteSet::new(1 << 20);
        writes.write(0, b"a", Some(b"1")).unwrap();
        writes.write(1, b"a", Some(b"other")).unwrap();
        writes.set_save_point();
        writes.write(0, b"a", None).unwrap();
        writes.write(0, b"b", Some(b"2")).unwrap();
        assert_eq!(writes.get(0, b"a"), Some(None));
        assert_eq!(writes.get(0, b"b"), Some(Some(Bytes::from_static(b"2"))));
        assert_eq!(writes.get(0, b"c"), None);
        assert_eq!(writes.ops().len(), 4);
        writes.rollback_to_save_point().unwrap();
        assert_eq!(writes.get(0, b"a"), Some(Some(Bytes::from_static(b"1"))));
        assert_eq!(writes.get(0, b"b"), None);
        assert_eq!(writes.ops().len(), 2);
        let status = writes.rollback_to_save_point().unwrap_err();
        assert_eq!(status.code, Code::NotFound);
        let overlay = writes.overlay(0);
        assert_eq!(overlay.len(), 1);
        assert_eq!(writes.last_writes().count(), 2);
    }

    #[test]
    fn the_write_set_is_bounded_by_its_serialized_size() {
        // Header 12 + one put of key "k" and a 10-byte value: 1 + 1 + 1 + 1 + 10 = 14.
        let mut writes = WriteSet::new(HEADER_BYTES + 14);
        writes.write(0, b"k", Some(&[7; 10])).unwrap();
        assert_eq!(writes.ops().len(), 1);
        let status = writes.write(0, b"k", None).unwrap_err();
        assert_eq!(status.code, Code::Aborted);
        assert!(
            status.to_string().contains("Memory limit reached"),
            "{status}"
        );
        // Nothing was added by the failed write.
        assert_eq!(writes.ops().len(), 1);
        writes.clear();
        writes.write(0, b"k", None).unwrap();
        assert!(writes.write(0, b"", Some(b"v")).is_err());
        assert!(writes
            .write(0, &[1; KEY_BYTES_MAX + 1], Some(b"v"))
            .is_err());
    }

    #[test]
    fn keys_are_shown_escaped_and_cut() {
        assert_eq!(show_key(b"k1"), "k1");
        assert_eq!(show_key(b"a\x00b"), "a\\x00b");
        assert!(show_key(&[b'x'; 100]).ends_with("... (100 bytes)"));
    }
}
