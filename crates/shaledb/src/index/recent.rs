//! Where this thread's recent searches of the packed maps ended, so a write of a key it just
//! read goes straight to its place (`PackedMap::locate`).
//!
//! A server command reads its keys before it writes them (SET checks each key's type, MSET
//! every one of its keys before the commit writes them all), and the commit's search was about
//! as costly as the read's though every line it touched was warm. Each search on this thread is
//! noted, in the place of [`PLACES`] that a hash of the map's number and the key picks (a newer
//! search whose hash picks the same place replaces it), with the map's number and `shape`
//! (which changes whenever a leaf is added or removed), the key, the leaf and the key's
//! position in it. A note is only a hint: the map checks that its shape is unchanged (so the
//! key still belongs in that leaf) and that the entry at the position is the key's (inserts and
//! removes in the leaf shift it). One place per key, not a list searched: scanning sixteen
//! notes per read and write cost more than the searches it saved (SET 1.44 -> 1.60 us).

use std::cell::RefCell;

/// Places for notes per thread: MSET's ten keys mostly land in places of their own.
const PLACES: usize = 32;
/// Keys up to this long are remembered (a server's records of YCSB's and redis-benchmark's
/// keys are 20-40 bytes); a longer key's write searches again.
const KEY_BYTES_MAX: usize = 64;

/// What a search of a map found: the leaf whose range holds the key, and the key's position in
/// it if it was there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Found {
    pub leaf: u32,
    pub at: Option<u32>,
}

#[derive(Clone, Copy)]
struct Note {
    map: u64,
    shape: u64,
    found: Found,
    key_len: u8,
    key: [u8; KEY_BYTES_MAX],
}

impl Note {
    /// No map is numbered `u64::MAX`: matches nothing.
    const EMPTY: Note = Note {
        map: u64::MAX,
        shape: 0,
        found: Found { leaf: 0, at: None },
        key_len: 0,
        key: [0; KEY_BYTES_MAX],
    };

    fn is(&self, map: u64, key: &[u8]) -> bool {
        self.map == map && usize::from(self.key_len) == key.len() && self.key[..key.len()] == *key
    }

    /// Makes this the note of `key` in map `map` (of shape `shape`), found at `found`; the key
    /// is copied only if the note held another.
    fn set(&mut self, map: u64, shape: u64, key: &[u8], found: Found) {
        if !self.is(map, key) {
            self.map = map;
            self.key_len = key.len() as u8;
            self.key[..key.len()].copy_from_slice(key);
        }
        self.shape = shape;
        self.found = found;
    }
}

thread_local! {
    static NOTES: RefCell<[Note; PLACES]> = const { RefCell::new([Note::EMPTY; PLACES]) };
}

thread_local! {
    /// This thread's last insert into any map.
    static LAST_INSERT: RefCell<Note> = const { RefCell::new(Note::EMPTY) };
}

/// Notes this thread's insert of `key` into map `map` (of shape `shape`), at `found`.
pub(super) fn remember_insert(map: u64, shape: u64, key: &[u8], found: Found) {
    if key.len() > KEY_BYTES_MAX {
        return;
    }
    LAST_INSERT.with_borrow_mut(|note| note.set(map, shape, key, found));
}

/// `read` of this thread's last insert (its key and where it went) if it was into map `map`,
/// still of shape `shape`.
pub(super) fn last_insert<T>(
    map: u64,
    shape: u64,
    read: impl FnOnce(&[u8], Found) -> Option<T>,
) -> Option<T> {
    LAST_INSERT.with_borrow(|note| {
        if note.map != map || note.shape != shape {
            return None;
        }
        read(&note.key[..usize::from(note.key_len)], note.found)
    })
}

/// The place of `key` of map `map` among the notes: a multiplicative hash of the map's number,
/// the key's length and its last eight bytes (where keys that share a prefix differ; a
/// collision costs only a search).
fn place(map: u64, key: &[u8]) -> usize {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut last = [0; 8];
    let tail = &key[key.len().saturating_sub(8)..];
    last[..tail.len()].copy_from_slice(tail);
    let hash = (map ^ (key.len() as u64) << 56 ^ u64::from_le_bytes(last)).wrapping_mul(K);
    (hash >> 58) as usize % PLACES
}

/// Notes that this thread's search of `key` in map `map` (of shape `shape`) found `found`.
pub(super) fn remember(map: u64, shape: u64, key: &[u8], found: Found) {
    if key.len() > KEY_BYTES_MAX {
        return;
    }
    NOTES.with_borrow_mut(|notes| notes[place(map, key)].set(map, shape, key, found));
}

/// What this thread's last search of `key` in map `map` found, if it is still noted and the
/// map's shape is still `shape`.
pub(super) fn recall(map: u64, shape: u64, key: &[u8]) -> Option<Found> {
    if key.len() > KEY_BYTES_MAX {
        return None;
    }
    NOTES.with_borrow(|notes| {
        let note = &notes[place(map, key)];
        (note.shape == shape && note.is(map, key)).then_some(note.found)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_are_recalled_per_map_shape_and_key_until_replaced() {
        let found = |leaf| Found {
            leaf,
            at: Some(leaf),
        };
        let key = |n: u32| format!("key:{n:012}").into_bytes();
        for n in 0..10 {
            remember(1, 7, &key(n), found(n));
        }
        // Ten keys in 32 places: most keep a place of their own; every one recalled is right.
        let recalled: Vec<u32> = (0..10)
            .filter(|&n| {
                recall(1, 7, &key(n))
                    .inspect(|got| assert_eq!(*got, found(n)))
                    .is_some()
            })
            .collect();
        assert!(recalled.len() >= 5, "{recalled:?}");
        let n = recalled[0];
        // Another map, another shape, a key never searched: nothing.
        assert_eq!(recall(2, 7, &key(n)), None);
        assert_eq!(recall(1, 8, &key(n)), None);
        assert_eq!(recall(1, 7, b"never"), None);
        // A key searched again is noted again.
        remember(1, 8, &key(n), found(99));
        assert_eq!(recall(1, 8, &key(n)), Some(found(99)));
        assert_eq!(recall(1, 7, &key(n)), None);
        // A key whose place another key took is forgotten.
        let other = (0u32..)
            .map(|m| format!("other{m}").into_bytes())
            .find(|other| place(1, other) == place(1, &key(n)))
            .unwrap();
        remember(1, 7, &other, found(5));
        assert_eq!(recall(1, 7, &other), Some(found(5)));
        assert_eq!(recall(1, 8, &key(n)), None);
        // Keys too long to note are never recalled.
        let long = [1; KEY_BYTES_MAX + 1];
        remember(1, 7, &long, found(1));
        assert_eq!(recall(1, 7, &long), None);
    }
}
