//! Prepared transactions on media (RocksDB's two-phase commit): a transaction's `prepare`
//! writes its name and write set, durably, to a KVS of the database reserved for them
//! ([`PREPARED_KVS`], never listed as a column family); its commit deletes the record in the
//! same ShaleDB batch that applies the writes, its rollback deletes it alone. A TransactionDB's
//! open reads every record back, so a prepared transaction survives a close or a crash, to be
//! committed or rolled back after the open (`rocksdb_transactiondb_get_prepared_transactions`).
//!
//! Format (one record per transaction, in one or more KVS entries written by one batch):
//! - key of entry `i`: u16 BE name length, the name (1 to 512 bytes), u32 BE `i`. Entries of
//!   one transaction are adjacent and in order; its name's length and bytes are their prefix.
//! - entry 0 (the header): `SRPT`, version u8 (1), u32 LE number of payload entries, u64 LE
//!   payload length, u32 LE CRC32C of the payload.
//! - entries 1..=n: the payload, cut into values of at most ShaleDB's largest value.
//! - payload: u32 LE number of column families, then for each: u32 LE number (as the write
//!   batch names it), u16 LE name length, the name; then the write set in RocksDB's serialized
//!   write batch form. Column families are named, as their numbers change from open to open.
//!
//! ShaleDB checksums each entry on media; the payload's CRC32C covers the record end to end
//! (entries missing or out of order included). A record that fails any check fails the open
//! with "Corruption: ..." naming it: never dropped, never half-applied.

use crate::batch::{rocksdb_writebatch_t, Op};
use crate::status::{Code, Result, Status};
use crate::write_set::show_key;
use engine::limits::VALUE_BYTES_MAX;
use engine::{Bytes, Kvs};

/// The KVS holding prepared transactions. Its name cannot be a column family's.
pub(crate) const PREPARED_KVS: &str = "__shaledb_rocksdb.prepared_transactions";

/// Longest transaction name (RocksDB's bound).
pub(crate) const NAME_BYTES_MAX: usize = 512;

const MAGIC: &[u8; 4] = b"SRPT";
const VERSION: u8 = 1;
const HEADER_BYTES: usize = 4 + 1 + 4 + 8 + 4;

/// Whether `name` is reserved for ShaleDB's own use (no column family may have it).
pub(crate) fn is_reserved(name: &str) -> bool {
    name == PREPARED_KVS
}

/// The prefix of every entry of transaction `name`'s record.
pub(crate) fn record_prefix(name: &[u8]) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(2 + name.len());
    prefix.extend_from_slice(&(name.len() as u16).to_be_bytes());
    prefix.extend_from_slice(name);
    prefix
}

fn entry_key(name: &[u8], index: u32) -> Vec<u8> {
    let mut key = record_prefix(name);
    key.extend_from_slice(&index.to_be_bytes());
    key
}

/// A prepared transaction read back: its name, and its writes with their column families
/// named.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub name: Vec<u8>,
    /// Each operation with the name of its column family.
    pub ops: Vec<(String, Op)>,
}

/// The entries (key, value) of transaction `name`'s record of `ops`, whose column families
/// `column_family_name` names.
pub(crate) fn encode(
    name: &[u8],
    ops: &[Op],
    column_family_name: impl Fn(u32) -> Option<String>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut numbers: Vec<u32> = ops.iter().map(|op| op.cf).collect();
    numbers.sort_unstable();
    numbers.dedup();
    let mut payload = Vec::new();
    payload.extend_from_slice(&(numbers.len() as u32).to_le_bytes());
    for number in numbers {
        let cf_name = column_family_name(number).ok_or_else(|| {
            Status::invalid(format!(
                "Invalid column family specified in write batch: {number} (dropped?)"
            ))
        })?;
        payload.extend_from_slice(&number.to_le_bytes());
        payload.extend_from_slice(&(cf_name.len() as u16).to_le_bytes());
        payload.extend_from_slice(cf_name.as_bytes());
    }
    let mut batch = rocksdb_writebatch_t::default();
    batch.ops = ops.to_vec();
    payload.extend_from_slice(&batch.serialize());

    let chunks: Vec<&[u8]> = payload.chunks(VALUE_BYTES_MAX).collect();
    let mut header = Vec::with_capacity(HEADER_BYTES);
    header.extend_from_slice(MAGIC);
    header.push(VERSION);
    header.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
    header.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    header.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    let mut entries = vec![(entry_key(name, 0), header)];
    for (index, chunk) in chunks.into_iter().enumerate() {
        entries.push((entry_key(name, index as u32 + 1), chunk.to_vec()));
    }
    Ok(entries)
}

/// Reads a fixed number of bytes, or fails with `what`.
fn take<'a>(input: &mut &'a [u8], len: usize, what: &str) -> std::result::Result<&'a [u8], String> {
    if input.len() < len {
        return Err(format!("truncated {what}"));
    }
    let (taken, rest) = input.split_at(len);
    *input = rest;
    Ok(taken)
}

fn u16_le(bytes: &[u8]) -> u16 {
    u16::from_le_bytes(bytes.try_into().expect("2 bytes"))
}

fn u32_le(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes.try_into().expect("4 bytes"))
}

/// The record made of one transaction's `entries` (its key suffixes, the entry numbers,
/// already checked to be 0, 1, ... in order).
fn decode(name: &[u8], entries: &[Bytes]) -> std::result::Result<Record, String> {
    let (header, chunks) = entries.split_first().ok_or("no entries")?;
    let mut input = &header[..];
    if take(&mut input, 4, "header")? != MAGIC {
        return Err("not a prepared transaction record (bad magic)".into());
    }
    let version = take(&mut input, 1, "header")?[0];
    if version != VERSION {
        return Err(format!("unknown record version {version}"));
    }
    let count = u32_le(take(&mut input, 4, "header")?) as usize;
    let len = u64::from_le_bytes(take(&mut input, 8, "header")?.try_into().expect("8 bytes"));
    let crc = u32_le(take(&mut input, 4, "header")?);
    if !input.is_empty() {
        return Err("header longer than its format".into());
    }
    if chunks.len() != count {
        return Err(format!(
            "{} payload entries where the header says {count}",
            chunks.len()
        ));
    }
    let payload: Vec<u8> = chunks
        .iter()
        .flat_map(|chunk| chunk.iter().copied())
        .collect();
    if payload.len() as u64 != len {
        return Err(format!(
            "payload of {} bytes where the header says {len}",
            payload.len()
        ));
    }
    if crc32c::crc32c(&payload) != crc {
        return Err("payload checksum mismatch".into());
    }
    let mut input = &payload[..];
    let cf_count = u32_le(take(&mut input, 4, "column family table")?) as usize;
    let mut cf_names = Vec::new();
    for _ in 0..cf_count {
        let number = u32_le(take(&mut input, 4, "column family table")?);
        let len = u16_le(take(&mut input, 2, "column family table")?) as usize;
        let cf_name = std::str::from_utf8(take(&mut input, len, "column family name")?)
            .map_err(|_| "column family name is not UTF-8")?;
        cf_names.push((number, cf_name.to_string()));
    }
    let batch = rocksdb_writebatch_t::parse(input).map_err(|status| status.message)?;
    let ops = batch
        .ops
        .into_iter()
        .map(|op| {
            let cf_name = cf_names
                .iter()
                .find(|(number, _)| *number == op.cf)
                .map(|(_, cf_name)| cf_name.clone())
                .ok_or_else(|| format!("write to column family {} not in its table", op.cf))?;
            Ok((cf_name, op))
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    Ok(Record {
        name: name.to_vec(),
        ops,
    })
}

fn corrupt(what: String) -> Status {
    Status::new(Code::Corruption, what)
}

/// Every prepared transaction recorded in `kvs`, in name order.
pub(crate) fn load(kvs: &Kvs) -> Result<Vec<Record>> {
    let mut records = Vec::new();
    // The entries of the transaction being read: its name, and its entries' values.
    let mut current: Option<(Vec<u8>, Vec<Bytes>)> = None;
    let finish = |current: Option<(Vec<u8>, Vec<Bytes>)>, records: &mut Vec<Record>| {
        if let Some((name, entries)) = current {
            let record = decode(&name, &entries).map_err(|what| {
                corrupt(format!(
                    "prepared transaction {:?} ({PREPARED_KVS}): {what}",
                    show_key(&name)
                ))
            })?;
            records.push(record);
        }
        Ok::<(), Status>(())
    };
    for item in kvs.iter() {
        let (key, value) = item.map_err(|error| {
            let status = Status::from(error);
            Status::new(
                status.code,
                format!(
                    "reading the prepared transactions ({PREPARED_KVS}): {}",
                    status.message
                ),
            )
        })?;
        let malformed = || {
            corrupt(format!(
                "a record of the prepared transactions ({PREPARED_KVS}) has a malformed key {}",
                show_key(&key)
            ))
        };
        if key.len() < 2 + 4 {
            return Err(malformed());
        }
        let name_len = u16::from_be_bytes([key[0], key[1]]) as usize;
        if name_len == 0 || name_len > NAME_BYTES_MAX || key.len() != 2 + name_len + 4 {
            return Err(malformed());
        }
        let name = &key[2..2 + name_len];
        let index = u32::from_be_bytes(key[2 + name_len..].try_into().expect("4 bytes")) as usize;
        if current.as_ref().map(|(open, _)| open.as_slice()) != Some(name) {
            finish(current.take(), &mut records)?;
            current = Some((name.to_vec(), Vec::new()));
        }
        let (_, entries) = current.as_mut().expect("set above");
        if index != entries.len() {
            return Err(corrupt(format!(
                "prepared transaction {:?} ({PREPARED_KVS}): entry {index} where entry {} was expected",
                show_key(name),
                entries.len()
            )));
        }
        entries.push(value);
    }
    finish(current, &mut records)?;
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::OpKind;

    fn op(kind: OpKind, cf: u32, key: &[u8], value: &[u8]) -> Op {
        Op {
            kind,
            cf,
            key: key.to_vec(),
            value: value.to_vec(),
        }
    }

    fn names(number: u32) -> Option<String> {
        match number {
            0 => Some("default".into()),
            3 => Some("cf3".into()),
            _ => None,
        }
    }

    fn entries_of(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<Bytes> {
        entries
            .iter()
            .map(|(_, value)| Bytes::copy_from_slice(value))
            .collect()
    }

    #[test]
    fn a_record_round_trips_with_its_column_families_named() {
        let ops = vec![
            op(OpKind::Put, 0, b"k1", b"v1"),
            op(OpKind::Delete, 3, b"k2", b""),
            op(OpKind::Put, 3, b"k3", &[9; 300]),
        ];
        let entries = encode(b"t1", &ops, names).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].0, [&[0, 2][..], b"t1", &[0, 0, 0, 0]].concat());
        assert_eq!(entries[1].0, [&[0, 2][..], b"t1", &[0, 0, 0, 1]].concat());
        let record = decode(b"t1", &entries_of(&entries)).unwrap();
        assert_eq!(record.name, b"t1");
        let expected: Vec<(String, Op)> = ops
            .iter()
            .map(|op| (names(op.cf).unwrap(), op.clone()))
            .collect();
        assert_eq!(record.ops, expected);
        // A column family the database no longer has cannot be recorded.
        assert!(encode(b"t1", &[op(OpKind::Put, 7, b"k", b"v")], names).is_err());
    }

    #[test]
    fn a_large_write_set_spans_entries() {
        let ops: Vec<Op> = (0..3u8)
            .map(|index| {
                op(
                    OpKind::Put,
                    0,
                    &[b'k', index],
                    &vec![index; VALUE_BYTES_MAX - 10],
                )
            })
            .collect();
        let entries = encode(b"big", &ops, names).unwrap();
        assert_eq!(entries.len(), 1 + 4);
        assert!(entries
            .iter()
            .all(|(_, value)| value.len() <= VALUE_BYTES_MAX));
        let record = decode(b"big", &entries_of(&entries)).unwrap();
        assert_eq!(record.ops.len(), 3);
        // An entry lost is caught by the header's count; one cut short by the length.
        let mut lost = entries_of(&entries);
        lost.pop();
        assert!(decode(b"big", &lost)
            .unwrap_err()
            .contains("payload entries"));
        let mut cut = entries_of(&entries);
        cut[2] = cut[2].slice(..10);
        assert!(decode(b"big", &cut).unwrap_err().contains("payload of"));
    }

    #[test]
    fn every_damaged_byte_of_a_record_is_caught() {
        let ops = vec![
            op(OpKind::Put, 0, b"k1", b"v1"),
            op(OpKind::Delete, 3, b"k2", b""),
        ];
        let entries = encode(b"t", &ops, names).unwrap();
        for entry in 0..entries.len() {
            for byte in 0..entries[entry].1.len() {
                let mut damaged = entries_of(&entries);
                let mut value = damaged[entry].to_vec();
                value[byte] ^= 0x40;
                damaged[entry] = Bytes::from(value);
                assert!(
                    decode(b"t", &damaged).is_err(),
                    "entry {entry} byte {byte} flipped went unnoticed"
                );
            }
        }
    }
}
