//! The conflict tracker: the keys (and deleted prefixes) committed while transactions are open,
//! with their seqnos, so a transaction's commit can tell whether someone else wrote what it
//! wrote (or read) after its snapshot. Kept only while a transaction that could conflict is open.

use crate::index::Key;
use crate::record::RecordKind;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Default)]
struct TrackerState {
    /// Snapshot seqnos of open transactions, with counts.
    open: BTreeMap<u64, usize>,
    /// Newest commit seqno of each key written while transactions were open.
    keys: HashMap<(u32, Key), u64>,
    /// Prefix deletes committed while transactions were open.
    prefixes: Vec<(u32, Key, u64)>,
}

/// Recent commits, kept only while transactions that could conflict with them are open.
#[derive(Default)]
pub struct ConflictTracker {
    state: Mutex<TrackerState>,
    open_count: AtomicUsize,
}

impl ConflictTracker {
    /// Registers a transaction reading at `seqno`; the caller holds the commit-order lock.
    pub fn begin(&self, seqno: u64) {
        let mut state = self.state.lock();
        *state.open.entry(seqno).or_default() += 1;
        self.open_count.fetch_add(1, Ordering::SeqCst);
    }

    /// Unregisters a transaction and forgets commits no open transaction can conflict with.
    pub fn end(&self, seqno: u64) {
        let mut state = self.state.lock();
        if let Some(count) = state.open.get_mut(&seqno) {
            *count -= 1;
            if *count == 0 {
                state.open.remove(&seqno);
            }
        }
        self.open_count.fetch_sub(1, Ordering::SeqCst);
        match state.open.keys().next().copied() {
            None => {
                state.keys.clear();
                state.prefixes.clear();
            }
            Some(oldest) => {
                state.keys.retain(|_, seqno| *seqno > oldest);
                state.prefixes.retain(|(_, _, seqno)| *seqno > oldest);
            }
        }
    }

    pub fn is_tracking(&self) -> bool {
        self.open_count.load(Ordering::SeqCst) > 0
    }

    /// Records a commit; the caller holds the commit-order lock.
    pub fn record<'a>(&self, writes: impl Iterator<Item = (u32, RecordKind, &'a [u8], u64)>) {
        let mut state = self.state.lock();
        for (kvs_id, kind, key, seqno) in writes {
            if kind == RecordKind::PrefixTombstone {
                state.prefixes.push((kvs_id, key.into(), seqno));
            } else {
                state.keys.insert((kvs_id, key.into()), seqno);
            }
        }
    }

    /// The first of `keys` committed by someone else after `snapshot`, if any.
    pub fn first_conflict<'a>(
        &self,
        snapshot: u64,
        mut keys: impl Iterator<Item = (u32, &'a [u8])>,
    ) -> Option<Vec<u8>> {
        let state = self.state.lock();
        keys.find(|(kvs_id, key)| {
            let written = state
                .keys
                .get(&(*kvs_id, Key::from(*key)))
                .is_some_and(|&seqno| seqno > snapshot);
            written
                || state.prefixes.iter().any(|(id, prefix, seqno)| {
                    id == kvs_id && *seqno > snapshot && key.starts_with(prefix)
                })
        })
        .map(|(_, key)| key.to_vec())
    }
}
