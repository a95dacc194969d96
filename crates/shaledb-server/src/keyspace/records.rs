//! An ordered cursor over a range of records as a [`super::Tx`] sees them: the engine's records
//! at a snapshot, minus the prefixes the transaction deleted, with its own writes merged in.

use super::cleared::ClearedPrefixes;
use bytes::Bytes;
use std::collections::VecDeque;

/// The engine's side of the merge: with values, or keys alone (no device reads), or a key's
/// few records read at once (`shaledb::Kvs::read_group`), or that read's error.
pub(super) enum Base {
    Values(shaledb::Iter),
    Keys(shaledb::Keys),
    Read(std::vec::IntoIter<(Bytes, Bytes)>),
    /// That read failed: the error, once.
    Failed(Option<shaledb::Error>),
}

impl Base {
    fn step(&mut self, back: bool) -> Option<shaledb::Result<(Bytes, Bytes)>> {
        match (self, back) {
            (Base::Read(records), false) => records.next().map(Ok),
            (Base::Read(records), true) => records.next_back().map(Ok),
            (Base::Failed(error), _) => error.take().map(Err),
            (Base::Values(iter), false) => iter.next(),
            (Base::Values(iter), true) => iter.next_back(),
            (Base::Keys(keys), false) => keys.next().map(|key| key.map(|key| (key, Bytes::new()))),
            (Base::Keys(keys), true) => keys
                .next_back()
                .map(|key| key.map(|key| (key, Bytes::new()))),
        }
    }
}

type Entry = (Bytes, Bytes);

/// Records in key order (`next`) or reverse order (`next_back`); with keys alone the values are
/// empty.
pub struct Records {
    base: Base,
    /// The transaction's writes in the range: `Some` put, `None` deleted.
    overlay: VecDeque<(Bytes, Option<Bytes>)>,
    /// Prefixes the transaction deleted (in database `db`): the engine's records under them are
    /// gone.
    cleared: ClearedPrefixes,
    db: usize,
    /// One record taken from each end of the engine's cursor and not returned yet.
    base_front: Option<Entry>,
    base_back: Option<Entry>,
}

impl Records {
    pub(super) fn new(
        base: Base,
        overlay: VecDeque<(Bytes, Option<Bytes>)>,
        cleared: ClearedPrefixes,
        db: usize,
    ) -> Records {
        Records {
            base,
            overlay,
            cleared,
            db,
            base_front: None,
            base_back: None,
        }
    }

    /// The next engine record from one end not under a cleared prefix; at the end, the record
    /// the other end holds (both ends meet there).
    fn fill(&mut self, back: bool) -> shaledb::Result<()> {
        let slot_empty = if back {
            self.base_back.is_none()
        } else {
            self.base_front.is_none()
        };
        if !slot_empty {
            return Ok(());
        }
        loop {
            match self.base.step(back) {
                Some(Ok(entry)) => {
                    if self.cleared.covers(self.db, &entry.0) {
                        continue;
                    }
                    if back {
                        self.base_back = Some(entry);
                    } else {
                        self.base_front = Some(entry);
                    }
                    return Ok(());
                }
                Some(Err(error)) => return Err(error),
                None => {
                    if back {
                        self.base_back = self.base_front.take();
                    } else {
                        self.base_front = self.base_back.take();
                    }
                    return Ok(());
                }
            }
        }
    }

    fn step(&mut self, back: bool) -> Option<shaledb::Result<Entry>> {
        loop {
            if let Err(error) = self.fill(back) {
                return Some(Err(error));
            }
            let base = if back {
                &self.base_back
            } else {
                &self.base_front
            };
            let overlay = if back {
                self.overlay.back()
            } else {
                self.overlay.front()
            };
            // Which comes first from this end: the engine's record or the transaction's write.
            let take_overlay = match (base, overlay) {
                (None, None) => return None,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((base_key, _)), Some((overlay_key, _))) => {
                    if base_key == overlay_key {
                        // The transaction's write replaces the engine's record.
                        if back {
                            self.base_back = None;
                        } else {
                            self.base_front = None;
                        }
                        true
                    } else {
                        (overlay_key < base_key) != back
                    }
                }
            };
            if take_overlay {
                let (key, value) = if back {
                    self.overlay.pop_back()
                } else {
                    self.overlay.pop_front()
                }
                .expect("checked above");
                match value {
                    Some(value) => return Some(Ok((key, value))),
                    None => continue,
                }
            }
            let entry = if back {
                self.base_back.take()
            } else {
                self.base_front.take()
            };
            return entry.map(Ok);
        }
    }
}

impl Iterator for Records {
    type Item = shaledb::Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

impl DoubleEndedIterator for Records {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}
