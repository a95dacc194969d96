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
//!
//! A change to a packed collection of at least [`PATCHED_BYTES_MIN`] bytes is written as a
//! [`Patch`] (`base G` / `base K`, sorting before the packed record, so the key's first record
//! tells a reader there is one) while the patch takes at most 1/[`PATCH_SHARE_MAX`] of the
//! collection; past that the collection is rewritten whole and the patch deleted. One field of
//! YCSB's 1.1 KiB hashes is then a ~110-byte write instead of a 1.1 KiB one, and the cleaner
//! copies that much less. The patch's value is encoded as a packed record's, each member's value
//! being its change: `0` (removed) or `1` then its new value. A patch that removes a member the
//! packed record lacks, leaves no member, or changes nothing is damage, named.

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

/// Collections whose record is smaller are rewritten whole: a second record to read and index
/// costs more than the bytes a patch saves.
pub(super) const PATCHED_BYTES_MIN: usize = 256;
/// A patch is kept while it takes at most this fraction (1/n) of its collection's bytes, so a
/// read merges at most a quarter again as many bytes as it returns.
pub(super) const PATCH_SHARE_MAX: usize = 4;

/// The tag of `kind`'s packed record, if it has one.
pub(super) fn packed_tag(kind: KeyType) -> Option<u8> {
    match kind {
        KeyType::Hash => Some(tag::PACKED_HASH),
        KeyType::Set => Some(tag::PACKED_SET),
        KeyType::String | KeyType::List | KeyType::ZSet => None,
    }
}

/// The tag of the patch of `kind`'s packed record, if it has one.
pub(super) fn patch_tag(kind: KeyType) -> Option<u8> {
    match kind {
        KeyType::Hash => Some(tag::PACKED_HASH_PATCH),
        KeyType::Set => Some(tag::PACKED_SET_PATCH),
        KeyType::String | KeyType::List | KeyType::ZSet => None,
    }
}

/// The patch to write for a packed collection rewritten as `merged`, whose packed record holds
/// `stored` (`None`: not stored packed); `None` when the record is to be rewritten whole (and
/// any patch deleted). A write that changes nothing still writes (its reply may wait for its
/// durability): the patch again, or, with none, the whole record.
pub(super) fn patch_for<B: MemberBytes>(
    stored: Option<&Packed<B>>,
    merged: &Packed<B>,
) -> Option<Patch<B>> {
    let patch = Patch::between(stored?, merged);
    let pays = !patch.changes.is_empty()
        && merged.encoded_len() >= PATCHED_BYTES_MIN
        && patch.encoded_len() * PATCH_SHARE_MAX <= merged.encoded_len();
    pays.then_some(patch)
}

/// The bytes of a packed collection's members and values: slices of the record's `Bytes` for a
/// reader, which hands them on; plain borrows of what was read for a writer, which only encodes
/// them again (a slice of `Bytes` updates a shared reference count when made and when dropped:
/// 40 such updates for a 10-field hash, a tenth of YCSB's update).
pub(super) trait MemberBytes: AsRef<[u8]> + Clone {}

impl MemberBytes for Bytes {}

impl MemberBytes for &[u8] {}

/// Changes to a packed collection, in ascending order of member: `None` for a removed member.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Patch<B = Bytes> {
    changes: Vec<(B, Option<B>)>,
}

/// A patch's change bytes: a removal, or a put followed by the new value.
const CHANGE_REMOVED: u8 = 0;
const CHANGE_PUT: u8 = 1;

#[cfg(test)]
impl Patch {
    /// Reads the patch record `record` of a `kind`; its members and values are slices of it (as
    /// `Packed::decode_patched` reads one, for the tests of a patch alone).
    pub fn decode(record: &[u8], value: &Bytes, kind: KeyType) -> Result<Patch> {
        Patch::decode_with(record, value, kind, |part| value.slice_ref(part))
    }
}

impl<B: MemberBytes> Patch<B> {
    /// What turns `stored` into `merged` (both in ascending order).
    fn between(stored: &Packed<B>, merged: &Packed<B>) -> Patch<B> {
        let (mut old, mut new) = (
            stored.entries.iter().peekable(),
            merged.entries.iter().peekable(),
        );
        // Usually a change or two: room for a few, not a growth from nothing at each push.
        let mut changes = Vec::with_capacity(4);
        loop {
            match (old.peek(), new.peek()) {
                (None, None) => break,
                (Some((member, _)), None) => {
                    changes.push((member.clone(), None));
                    old.next();
                }
                (None, Some((member, value))) => {
                    changes.push((member.clone(), Some(value.clone())));
                    new.next();
                }
                (Some((old_member, old_value)), Some((new_member, new_value))) => {
                    match old_member.as_ref().cmp(new_member.as_ref()) {
                        std::cmp::Ordering::Less => {
                            changes.push((old_member.clone(), None));
                            old.next();
                        }
                        std::cmp::Ordering::Greater => {
                            changes.push((new_member.clone(), Some(new_value.clone())));
                            new.next();
                        }
                        std::cmp::Ordering::Equal => {
                            if old_value.as_ref() != new_value.as_ref() {
                                changes.push((new_member.clone(), Some(new_value.clone())));
                            }
                            old.next();
                            new.next();
                        }
                    }
                }
            }
        }
        Patch { changes }
    }

    /// Reads the patch record `record` of a `kind` from its value `value`; `slice` makes each
    /// member's and change's bytes from their place in `value`.
    fn decode_with<'v>(
        record: &[u8],
        value: &'v [u8],
        kind: KeyType,
        slice: impl Fn(&'v [u8]) -> B,
    ) -> Result<Patch<B>> {
        let what = || patch_name(kind);
        let bad = |problem: &str| damaged(&format!("{} {problem}", what()), record);
        let mut changes = Vec::with_capacity(read_length(value, &mut 0).unwrap_or(0).min(1024));
        walk(record, value, what, |member, change| {
            let change = match change.split_first() {
                Some((&CHANGE_REMOVED, [])) => None,
                Some((&CHANGE_PUT, new_value)) if kind == KeyType::Set && !new_value.is_empty() => {
                    return Err(bad("giving a set member a value"));
                }
                Some((&CHANGE_PUT, new_value)) => Some(slice(new_value)),
                _ => return Err(bad("with a change of no kind")),
            };
            changes.push((slice(member), change));
            Ok(())
        })?;
        Ok(Patch { changes })
    }

    /// The record's value.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.encoded_len());
        put_length(&mut out, self.changes.len());
        for (member, change) in &self.changes {
            match change {
                None => put_entry(&mut out, member.as_ref(), &[&[CHANGE_REMOVED]]),
                Some(value) => {
                    put_entry(&mut out, member.as_ref(), &[&[CHANGE_PUT], value.as_ref()])
                }
            }
        }
        out.freeze()
    }

    pub fn encoded_len(&self) -> usize {
        length_len(self.changes.len())
            + self
                .changes
                .iter()
                .map(|(member, change)| {
                    let change_len = change.as_ref().map_or(0, |value| value.as_ref().len());
                    entry_len(member.as_ref().len(), 1 + change_len)
                })
                .sum::<usize>()
    }

    /// `stored` (the packed record `record`'s members) with these changes made. A removal of a
    /// member it lacks, or a collection left empty, is damage naming `record`.
    pub fn apply(&self, stored: Packed<B>, record: &[u8], kind: KeyType) -> Result<Packed<B>> {
        let bad = |problem: &str| damaged(&format!("{} {problem}", patch_name(kind)), record);
        let mut entries = Vec::with_capacity(stored.entries.len() + self.changes.len());
        let mut old = stored.entries.into_iter().peekable();
        for (member, change) in &self.changes {
            while let Some(entry) =
                old.next_if(|(old_member, _)| old_member.as_ref() < member.as_ref())
            {
                entries.push(entry);
            }
            let replaced = old
                .next_if(|(old_member, _)| old_member.as_ref() == member.as_ref())
                .is_some();
            match change {
                Some(value) => entries.push((member.clone(), value.clone())),
                None if replaced => {}
                None => return Err(bad("removing a member its packed record lacks")),
            }
        }
        entries.extend(old);
        if entries.is_empty() {
            return Err(bad("removing every member"));
        }
        Ok(Packed::from_sorted(entries))
    }
}

/// A packed collection's members with their values, in ascending order of member.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Packed<B = Bytes> {
    entries: Vec<(B, B)>,
    /// The encoded length of `entries` (without the member count).
    entry_bytes: usize,
}

impl Packed {
    /// Reads the value of the packed record `record`; its members and values are slices of it
    /// (as `decode_patched` reads one, for the tests of a record alone).
    #[cfg(test)]
    pub fn decode(record: &[u8], value: &Bytes, kind: KeyType) -> Result<Packed> {
        Packed::decode_with(record, value, kind, |part| value.slice_ref(part))
    }

    /// The members of the packed record `record` (its value `value`) with its patch, if it has
    /// one (the patch record's key and value), applied; and, when patched, the record's own
    /// members, which a writer's next patch is taken against.
    pub fn decode_patched(
        record: &[u8],
        value: &Bytes,
        patch: Option<&(impl AsRef<[u8]>, Bytes)>,
        kind: KeyType,
    ) -> Result<(Packed, Option<Packed>)> {
        Packed::decode_patched_with(
            record,
            value,
            patch.map(|(patch_record, patch)| {
                let slice = |part: &[u8]| patch.slice_ref(part);
                (patch_record.as_ref(), &patch[..], slice)
            }),
            kind,
            |part| value.slice_ref(part),
        )
    }

    /// The value of `member` in the packed record `record`, checking all of it as a decoding does
    /// but building nothing.
    pub fn find(
        record: &[u8],
        value: &Bytes,
        kind: KeyType,
        member: &[u8],
    ) -> Result<Option<Bytes>> {
        let mut found = None;
        walk(
            record,
            value,
            || packed_name(kind),
            |candidate, candidate_value| {
                check_member_value(record, kind, candidate_value)?;
                if candidate == member {
                    found = Some(value.slice_ref(candidate_value));
                }
                Ok(())
            },
        )?;
        Ok(found)
    }
}

impl<'v> Packed<&'v [u8]> {
    /// As [`Packed::decode_patched`], each member and value borrowed from the values read.
    pub fn decode_patched_borrowed(
        record: &[u8],
        value: &'v [u8],
        patch: Option<(&[u8], &'v [u8])>,
        kind: KeyType,
    ) -> Result<(Self, Option<Self>)> {
        let patch = patch.map(|(patch_record, patch)| (patch_record, patch, |part| part));
        Packed::decode_patched_with(record, value, patch, kind, |part| part)
    }
}

impl<B: MemberBytes> Packed<B> {
    /// Reads the value `value` of the packed record `record`; `slice` makes each member's and
    /// value's bytes from their place in `value`.
    fn decode_with<'v>(
        record: &[u8],
        value: &'v [u8],
        kind: KeyType,
        slice: impl Fn(&'v [u8]) -> B,
    ) -> Result<Packed<B>> {
        // The count leads the record (`walk` checks it): no regrowth while collecting.
        let mut entries = Vec::with_capacity(read_length(value, &mut 0).unwrap_or(0).min(1024));
        let entry_bytes = walk(
            record,
            value,
            || packed_name(kind),
            |member, member_value| {
                check_member_value(record, kind, member_value)?;
                entries.push((slice(member), slice(member_value)));
                Ok(())
            },
        )?;
        Ok(Packed {
            entries,
            entry_bytes,
        })
    }

    /// The members of the packed record `record` (its value `value`) with its patch applied, if
    /// it has one (the patch record's key, its value, and what makes a member's or value's bytes
    /// from their place in it), and, when patched, the record's own members; `slice` makes each
    /// member's and value's bytes from their place in `value`.
    fn decode_patched_with<'v, S: Fn(&'v [u8]) -> B>(
        record: &[u8],
        value: &'v [u8],
        patch: Option<(&[u8], &'v [u8], S)>,
        kind: KeyType,
        slice: impl Fn(&'v [u8]) -> B,
    ) -> Result<(Packed<B>, Option<Packed<B>>)> {
        // The record first: when both are damaged, the error names the record, as a reader of
        // the record alone would.
        let stored = Packed::decode_with(record, value, kind, slice)?;
        let Some((patch_record, patch, slice_patch)) = patch else {
            return Ok((stored, None));
        };
        let changes = Patch::decode_with(patch_record, patch, kind, slice_patch)?;
        Ok((
            changes.apply(stored.clone(), patch_record, kind)?,
            Some(stored),
        ))
    }

    /// A collection of `entries`, already in strictly ascending order of member.
    pub fn from_sorted(entries: Vec<(B, B)>) -> Packed<B> {
        let entry_bytes = entries
            .iter()
            .map(|(member, value)| entry_len(member.as_ref().len(), value.as_ref().len()))
            .sum();
        Packed {
            entries,
            entry_bytes,
        }
    }

    /// The record's value.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.encoded_len());
        put_length(&mut out, self.entries.len());
        for (member, value) in &self.entries {
            put_entry(&mut out, member.as_ref(), &[value.as_ref()]);
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

    pub fn value(&self, member: &[u8]) -> Option<&B> {
        self.position(member).ok().map(|at| &self.entries[at].1)
    }

    /// Sets `member` to `value`; returns whether it is new.
    pub fn insert(&mut self, member: B, value: B) -> bool {
        let member_len = member.as_ref().len();
        match self.position(member.as_ref()) {
            Ok(at) => {
                let new_len = entry_len(member_len, value.as_ref().len());
                let old = std::mem::replace(&mut self.entries[at].1, value);
                self.entry_bytes =
                    self.entry_bytes - entry_len(member_len, old.as_ref().len()) + new_len;
                false
            }
            Err(at) => {
                self.entry_bytes += entry_len(member_len, value.as_ref().len());
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
                self.entry_bytes -= entry_len(member.as_ref().len(), value.as_ref().len());
                true
            }
            Err(_) => false,
        }
    }

    /// The members from the first not below `from`, with their values.
    pub fn entries_from(&self, from: &[u8]) -> &[(B, B)] {
        let at = self.position(from).unwrap_or_else(|at| at);
        &self.entries[at..]
    }

    pub fn into_entries(self) -> Vec<(B, B)> {
        self.entries
    }

    fn position(&self, member: &[u8]) -> std::result::Result<usize, usize> {
        self.entries
            .binary_search_by(|(probe, _)| probe.as_ref().cmp(member))
    }
}

fn packed_name(kind: KeyType) -> String {
    format!("a packed {}", kind.name())
}

fn patch_name(kind: KeyType) -> String {
    format!("a packed {}'s patch", kind.name())
}

/// A set's members carry no values.
fn check_member_value(record: &[u8], kind: KeyType, member_value: &[u8]) -> Result<()> {
    if kind == KeyType::Set && !member_value.is_empty() {
        return Err(damaged("a packed set member with a value", record));
    }
    Ok(())
}

/// Calls `visit` with each member and value of `record`, packed (`what` it is, named only in
/// errors), in order; returns the bytes they take. Damage is an error naming the record, before
/// or after some visits; so is an error `visit` returns.
fn walk<'v>(
    record: &[u8],
    value: &'v [u8],
    what: impl Fn() -> String,
    mut visit: impl FnMut(&'v [u8], &'v [u8]) -> Result<()>,
) -> Result<usize> {
    let bad = |problem: &str| damaged(&format!("{} {problem}", what()), record);
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
        last = Some(member);
        visit(member, member_value)?;
    }
    if at != value.len() {
        return Err(bad("with bytes after its last member"));
    }
    Ok(at - start)
}

/// A member, then its value (written in `value_parts`, back to back), each after its length.
fn put_entry(out: &mut BytesMut, member: &[u8], value_parts: &[&[u8]]) {
    put_length(out, member.len());
    out.put_slice(member);
    put_length(out, value_parts.iter().map(|part| part.len()).sum());
    for part in value_parts {
        out.put_slice(part);
    }
}

/// The bytes an entry of a `member_len`-byte member and a `value_len`-byte value takes.
fn entry_len(member_len: usize, value_len: usize) -> usize {
    length_len(member_len) + member_len + length_len(value_len) + value_len
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

    fn collection() -> impl Strategy<Value = std::collections::BTreeMap<Vec<u8>, Vec<u8>>> {
        proptest::collection::btree_map(
            proptest::collection::vec(0u8..6, 1..3),
            proptest::collection::vec(any::<u8>(), 0..80),
            1..12,
        )
    }

    fn of(map: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>) -> Packed {
        Packed::from_sorted(
            map.iter()
                .map(|(m, v)| (Bytes::from(m.clone()), Bytes::from(v.clone())))
                .collect(),
        )
    }

    proptest! {
        #[test]
        fn a_patch_between_two_collections_turns_one_into_the_other(
            stored in collection(),
            merged in collection(),
        ) {
            let (stored, merged) = (of(&stored), of(&merged));
            prop_assert_eq!(merged.encoded_len(), merged.encode().len());
            let patch = Patch::between(&stored, &merged);
            if stored == merged {
                prop_assert!(patch.changes.is_empty());
                prop_assert_eq!(patch_for(Some(&stored), &merged), None);
                return Ok(());
            }
            let encoded = patch.encode();
            prop_assert_eq!(encoded.len(), patch.encoded_len());
            let decoded = Patch::decode(b"p", &encoded, KeyType::Hash).unwrap();
            prop_assert_eq!(&decoded, &patch);
            prop_assert_eq!(decoded.apply(stored.clone(), b"p", KeyType::Hash).unwrap(), merged.clone());
            // A patch is chosen only when it is small against a collection big enough.
            match patch_for(Some(&stored), &merged) {
                Some(chosen) => {
                    prop_assert_eq!(chosen, patch.clone());
                    prop_assert!(merged.encoded_len() >= PATCHED_BYTES_MIN);
                    prop_assert!(patch.encoded_len() * PATCH_SHARE_MAX <= merged.encoded_len());
                }
                None => prop_assert!(
                    merged.encoded_len() < PATCHED_BYTES_MIN
                        || patch.encoded_len() * PATCH_SHARE_MAX > merged.encoded_len()
                ),
            }
        }
    }

    #[test]
    fn a_new_collection_is_written_whole() {
        let merged = packed(&[(b"a", &[b'v'; 400])]);
        assert_eq!(patch_for(None, &merged), None);
    }

    /// The errors of decoding `record` with `patch` as a reader does and as a writer does.
    fn errors_of_both_decodings(record: &'static [u8], patch: &'static [u8]) -> [String; 2] {
        let owned = Packed::decode_patched(
            b"the record",
            &Bytes::from_static(record),
            Some(&(b"the patch", Bytes::from_static(patch))),
            KeyType::Hash,
        );
        let borrowed = Packed::decode_patched_borrowed(
            b"the record",
            record,
            Some((b"the patch", patch)),
            KeyType::Hash,
        );
        [
            format!("{:?}", owned.unwrap_err()),
            format!("{:?}", borrowed.unwrap_err()),
        ]
    }

    #[test]
    fn a_damaged_record_and_patch_name_the_record_whether_read_or_borrowed() {
        let patch = b"\x01\x01a\x00";
        for message in errors_of_both_decodings(b"\x02\x01a\x01\x01\x01b\x01\x02extra", patch) {
            assert!(
                message.contains("the record") && message.contains("bytes after its last member"),
                "{message}"
            );
        }
        // The patch alone damaged is named alike by both decodings.
        for message in errors_of_both_decodings(b"\x02\x01a\x01\x01\x01b\x01\x02", patch) {
            assert!(
                message.contains("the patch") && message.contains("change of no kind"),
                "{message}"
            );
        }
    }

    #[test]
    fn every_malformed_patch_is_damage_naming_it() {
        let stored = packed(&[(b"a", b"1"), (b"b", b"2")]);
        let cases: [(&[u8], &str); 8] = [
            (b"", "without a member count"),
            (b"\x00", "with no members"),
            (b"\x01\x01a\x00", "with a change of no kind"),
            (b"\x01\x01a\x01\x07", "with a change of no kind"),
            (b"\x01\x01a\x02\x00x", "with a change of no kind"),
            (b"\x02\x01b\x01\x00\x01a\x01\x00", "out of order"),
            (
                b"\x01\x01c\x01\x00",
                "removing a member its packed record lacks",
            ),
            (b"\x02\x01a\x01\x00\x01b\x01\x00", "removing every member"),
        ];
        for (value, what) in cases {
            let result = Patch::decode(b"the patch", &Bytes::copy_from_slice(value), KeyType::Hash)
                .and_then(|patch| patch.apply(stored.clone(), b"the patch", KeyType::Hash));
            let message = format!("{:?}", result.unwrap_err());
            assert!(
                message.contains(what)
                    && message.contains("the patch")
                    && message.contains("patch "),
                "{value:?}: {message}"
            );
        }
        let set_member_with_value = Bytes::from_static(b"\x01\x01a\x02\x01x");
        let error = Patch::decode(b"p", &set_member_with_value, KeyType::Set).unwrap_err();
        assert!(format!("{error:?}").contains("a packed set's patch giving a set member a value"));
        // Well formed, each of them: a put of a new member, a new value, a removal.
        let good = Bytes::from_static(b"\x03\x01a\x02\x01z\x01b\x01\x00\x01c\x01\x01");
        let patched = Patch::decode(b"p", &good, KeyType::Hash)
            .unwrap()
            .apply(stored, b"p", KeyType::Hash)
            .unwrap();
        assert_eq!(patched, packed(&[(b"a", b"z"), (b"c", b"")]));
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
