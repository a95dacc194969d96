//! Small hashes and sets packed into one record (`base H` / `base M`), as Redis packs them into
//! a listpack: reading all of a small hash is one record read instead of a cursor over one
//! record per field, and creating one is one record written instead of ten.
//!
//! The record's value: the number of members, then each member's length and bytes and its
//! value's length and bytes (a set's values are empty), lengths as LEB128 varints of at most 32
//! bits, members in strictly ascending byte order. Anything else (a length past the end, bytes
//! left over, members out of order or repeated, no members, a set member with a value) is
//! damage, named with the record: the engine's checksum catches flipped bits, this catches a
//! record no writer of this layout makes.
//!
//! A collection stays packed while it has at most [`Packing::members_max`] members and its
//! record at most [`Packing::bytes_max`] bytes; a write past either moves it into one record per
//! member for good (as Redis converts a listpack into a hash table), so a large collection never
//! rewrites all of itself to change one member.

use super::{damaged, tag, KeyType, Result};
use bytes::{BufMut, Bytes, BytesMut};

/// When a hash or set is packed (settings `packed_members_max`, `packed_bytes_max`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    pub members_max: usize,
    pub bytes_max: usize,
}

impl Packing {
    /// Redis packs up to 128 members; a record of 4 KiB still costs one device read, and its
    /// rewrite on a change stays below the per-record costs it saves.
    pub const DEFAULT: Packing = Packing {
        members_max: 128,
        bytes_max: 4096,
    };
    /// Never packs (every collection one record per member).
    pub const NEVER: Packing = Packing {
        members_max: 0,
        bytes_max: 0,
    };
}

/// The tag of `kind`'s packed record, if it has one.
pub(super) fn packed_tag(kind: KeyType) -> Option<u8> {
    match kind {
        KeyType::Hash => Some(tag::PACKED_HASH),
        KeyType::Set => Some(tag::PACKED_SET),
        KeyType::String | KeyType::List | KeyType::ZSet => None,
    }
}

/// A packed collection's members with their values, in ascending order of member.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Packed {
    entries: Vec<(Bytes, Bytes)>,
    /// The encoded length of `entries` (without the member count).
    entry_bytes: usize,
}

impl Packed {
    /// Reads the value of the packed record `record`; its members and values are slices of it.
    pub fn decode(record: &[u8], value: &Bytes, kind: KeyType) -> Result<Packed> {
        // The count leads the record (`walk` checks it): no regrowth while collecting.
        let mut entries = Vec::with_capacity(read_length(value, &mut 0).unwrap_or(0).min(1024));
        let entry_bytes = walk(record, value, kind, |member, member_value| {
            entries.push((value.slice_ref(member), value.slice_ref(member_value)));
        })?;
        Ok(Packed {
            entries,
            entry_bytes,
        })
    }

    /// The value of `member` in the packed record `record`, checking all of it as `decode` does
    /// but building nothing.
    pub fn find(
        record: &[u8],
        value: &Bytes,
        kind: KeyType,
        member: &[u8],
    ) -> Result<Option<Bytes>> {
        let mut found = None;
        walk(record, value, kind, |candidate, candidate_value| {
            if candidate == member {
                found = Some(value.slice_ref(candidate_value));
            }
        })?;
        Ok(found)
    }

    /// The record's value.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.encoded_len());
        put_length(&mut out, self.entries.len());
        for (member, value) in &self.entries {
            put_length(&mut out, member.len());
            out.put_slice(member);
            put_length(&mut out, value.len());
            out.put_slice(value);
        }
        out.freeze()
    }

    pub fn encoded_len(&self) -> usize {
        length_len(self.entries.len()) + self.entry_bytes
    }

    /// Whether this collection may stay packed under `packing`.
    pub fn fits(&self, packing: Packing) -> bool {
        self.entries.len() <= packing.members_max && self.encoded_len() <= packing.bytes_max
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.position(member).is_ok()
    }

    /// Sets `member` to `value`; returns whether it is new.
    pub fn insert(&mut self, member: Bytes, value: Bytes) -> bool {
        match self.position(&member) {
            Ok(at) => {
                let old = std::mem::replace(&mut self.entries[at].1, value);
                self.entry_bytes = self.entry_bytes - entry_len(&member, &old)
                    + entry_len(&member, &self.entries[at].1);
                false
            }
            Err(at) => {
                self.entry_bytes += entry_len(&member, &value);
                self.entries.insert(at, (member, value));
                true
            }
        }
    }

    /// Removes `member`; returns whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.position(member) {
            Ok(at) => {
                let (member, value) = self.entries.remove(at);
                self.entry_bytes -= entry_len(&member, &value);
                true
            }
            Err(_) => false,
        }
    }

    /// The members from the first not below `from`, with their values.
    pub fn entries_from(&self, from: &[u8]) -> &[(Bytes, Bytes)] {
        let at = self.position(from).unwrap_or_else(|at| at);
        &self.entries[at..]
    }

    pub fn into_entries(self) -> Vec<(Bytes, Bytes)> {
        self.entries
    }

    fn position(&self, member: &[u8]) -> std::result::Result<usize, usize> {
        self.entries
            .binary_search_by(|(probe, _)| probe.as_ref().cmp(member))
    }
}

/// Calls `visit` with each member and value of the packed record `record`, in order; returns
/// the bytes they take. Damage is an error naming the record, before or after some visits.
fn walk<'v>(
    record: &[u8],
    value: &'v [u8],
    kind: KeyType,
    mut visit: impl FnMut(&'v [u8], &'v [u8]),
) -> Result<usize> {
    let bad = |what: &str| damaged(&format!("a packed {} {what}", kind.name()), record);
    let mut at = 0;
    let count = read_length(value, &mut at).ok_or_else(|| bad("without a member count"))?;
    if count == 0 {
        return Err(bad("with no members"));
    }
    // Each member takes at least two bytes: a count past that is damage.
    if count > value.len() / 2 {
        return Err(bad("counting more members than its bytes hold"));
    }
    let start = at;
    let mut last: Option<&[u8]> = None;
    for _ in 0..count {
        let member = read_bytes(value, &mut at).ok_or_else(|| bad("cut short"))?;
        let member_value = read_bytes(value, &mut at).ok_or_else(|| bad("cut short"))?;
        if last.is_some_and(|last| last >= member) {
            return Err(bad("with members out of order"));
        }
        if kind == KeyType::Set && !member_value.is_empty() {
            return Err(bad("member with a value"));
        }
        last = Some(member);
        visit(member, member_value);
    }
    if at != value.len() {
        return Err(bad("with bytes after its last member"));
    }
    Ok(at - start)
}

fn entry_len(member: &[u8], value: &[u8]) -> usize {
    length_len(member.len()) + member.len() + length_len(value.len()) + value.len()
}

fn length_len(length: usize) -> usize {
    let bits = usize::BITS - length.leading_zeros();
    (bits.max(1) as usize).div_ceil(7)
}

fn put_length(out: &mut BytesMut, mut length: usize) {
    while length >= 0x80 {
        out.put_u8((length as u8) | 0x80);
        length >>= 7;
    }
    out.put_u8(length as u8);
}

/// A varint of at most 32 bits at `*at`, moving past it.
fn read_length(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let mut length: u64 = 0;
    for shift in (0..35).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        length |= u64::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return usize::try_from(u32::try_from(length).ok()?).ok();
        }
    }
    None
}

/// A length, then that many bytes.
fn read_bytes<'v>(bytes: &'v [u8], at: &mut usize) -> Option<&'v [u8]> {
    let length = read_length(bytes, at)?;
    let end = at.checked_add(length).filter(|&end| end <= bytes.len())?;
    let out = &bytes[*at..end];
    *at = end;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn packed(entries: &[(&[u8], &[u8])]) -> Packed {
        let mut out = Packed::default();
        for (member, value) in entries {
            out.insert(
                Bytes::copy_from_slice(member),
                Bytes::copy_from_slice(value),
            );
        }
        out
    }

    proptest! {
        #[test]
        fn decoding_an_encoding_gives_the_same_members_and_length(
            entries in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 0..300),
                proptest::collection::vec(any::<u8>(), 0..300),
                1..40,
            ),
            removed in proptest::collection::vec(any::<u8>(), 0..4),
        ) {
            let mut collection = Packed::default();
            for (member, value) in &entries {
                // Twice: the second replaces the first, and the length follows.
                collection.insert(Bytes::from(member.clone()), Bytes::from_static(b"x"));
                prop_assert!(!collection.insert(Bytes::from(member.clone()), Bytes::from(value.clone())));
            }
            let mut expected: Vec<(Bytes, Bytes)> = entries
                .iter()
                .map(|(m, v)| (Bytes::from(m.clone()), Bytes::from(v.clone())))
                .collect();
            if collection.len() > 1 {
                collection.remove(&removed);
                expected.retain(|(member, _)| member.as_ref() != removed.as_slice());
            }
            let encoded = collection.encode();
            prop_assert_eq!(encoded.len(), collection.encoded_len());
            for (member, value) in &expected {
                prop_assert_eq!(
                    Packed::find(b"r", &encoded, KeyType::Hash, member).unwrap(),
                    Some(value.clone())
                );
            }
            prop_assert_eq!(Packed::find(b"r", &encoded, KeyType::Hash, &removed).unwrap().is_some(),
                expected.iter().any(|(member, _)| member.as_ref() == removed.as_slice()));
            let decoded = Packed::decode(b"r", &encoded, KeyType::Hash).unwrap();
            prop_assert_eq!(decoded.encoded_len(), encoded.len());
            prop_assert_eq!(decoded.into_entries(), expected);
        }
    }

    #[test]
    fn every_malformed_record_is_damage_naming_it() {
        let good = packed(&[(b"a", b"1"), (b"b", b"")]).encode();
        assert_eq!(&good[..], b"\x02\x01a\x011\x01b\x00");
        let cases: [(&[u8], &str); 8] = [
            (b"", "without a member count"),
            (b"\x00", "with no members"),
            (b"\x09\x01a\x00", "counting more members"),
            (b"\x02\x01a\x011\x01b", "cut short"),
            (b"\x01\x05ab\x00", "cut short"),
            (b"\x02\x01b\x00\x01a\x00", "out of order"),
            (b"\x02\x01a\x00\x01a\x00", "out of order"),
            (b"\x01\x01a\x00\x00", "bytes after"),
        ];
        for (value, what) in cases {
            let error =
                Packed::decode(b"the record", &Bytes::copy_from_slice(value), KeyType::Hash)
                    .unwrap_err();
            let message = format!("{error:?}");
            assert!(
                message.contains(what) && message.contains("the record"),
                "{value:?}: {message}"
            );
        }
        // A varint longer than 32 bits.
        let long = Bytes::from_static(b"\xff\xff\xff\xff\xff\x01");
        assert!(Packed::decode(b"r", &long, KeyType::Hash).is_err());
        // A set's members carry no values.
        let error = Packed::decode(b"r", &good, KeyType::Set).unwrap_err();
        assert!(format!("{error:?}").contains("a packed set member with a value"));
        assert!(Packed::decode(b"r", &good, KeyType::Hash).is_ok());
    }

    #[test]
    fn a_collection_fits_up_to_both_limits_and_no_further() {
        let mut collection = packed(&[(b"a", b"12"), (b"b", b"")]);
        let exact = Packing {
            members_max: 2,
            bytes_max: collection.encoded_len(),
        };
        assert!(collection.fits(exact));
        assert!(!collection.fits(Packing {
            bytes_max: exact.bytes_max - 1,
            ..exact
        }));
        collection.insert(Bytes::from_static(b"c"), Bytes::new());
        assert!(!collection.fits(Packing {
            bytes_max: usize::MAX,
            ..exact
        }));
        assert!(!packed(&[(b"a", b"")]).fits(Packing::NEVER));
    }

    #[test]
    fn lengths_take_as_many_bytes_as_their_varint() {
        for length in [0usize, 1, 127, 128, 16_383, 16_384, u32::MAX as usize] {
            let mut out = BytesMut::new();
            put_length(&mut out, length);
            assert_eq!(out.len(), length_len(length), "{length}");
            let mut at = 0;
            assert_eq!(read_length(&out, &mut at), Some(length));
            assert_eq!(at, out.len());
        }
    }
}
