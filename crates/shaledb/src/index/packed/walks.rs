//! Walks of a packed map in key order: a range's keys with their entries and kept values, and
//! the entries alone for a walk that wants where versions are, not their keys (the cleaner's).

use super::{Entry, Fence, Key, LeafId, PackedMap};
use std::ops::{Bound, ControlFlow};

impl PackedMap {
    /// Calls `visit` with each key in `lower..upper`, its entry and the value kept with it, in
    /// key order (descending when `reverse`), until it breaks.
    pub fn visit_range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
        mut visit: impl FnMut(&[u8], Entry, Option<&[u8]>) -> ControlFlow<()>,
    ) {
        let above_lower = |key: &[u8]| match lower {
            Bound::Included(lower) => key >= lower,
            Bound::Excluded(lower) => key > lower,
            Bound::Unbounded => true,
        };
        let mut key = Vec::new();
        // Visits `leaf`'s entries from the `skip`th in the walk's direction; breaks once the
        // walk is over.
        // The first key visited is remembered as a search's result: a key's type is
        // read as the first of its records, whose value is read next.
        let mut remembered = false;
        let walk = |fence: &[u8], id: LeafId, skip: usize| {
            let leaf = &self.slab[id as usize];
            let count = leaf.slots.len();
            for step in skip..count {
                let at = if reverse { count - 1 - step } else { step };
                leaf.key_into(fence, at, &mut key);
                let ended = if reverse {
                    !above_lower(&key)
                } else {
                    !is_below(&key, upper)
                };
                if ended {
                    return ControlFlow::Break(());
                }
                if !remembered {
                    remembered = true;
                    self.remember(&key, id, Some(at));
                }
                let (entry, value) = leaf.entry_with_value(at);
                if visit(&key, entry, value).is_break() {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        };
        let start = if reverse { upper } else { lower };
        self.walk_leaves(start, reverse, walk);
    }

    /// Calls `visit` with the newest entry of each key after `after` (every key if `None`), in
    /// key order, up to `limit` of them; returns the last key visited when it stopped at
    /// `limit`, where a following call resumes. Builds no other key: a walk for where versions
    /// are (the cleaner's) needs none, and building each one cost half of that walk.
    pub fn visit_entries_after(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        mut visit: impl FnMut(Entry),
    ) -> Option<Key> {
        if limit == 0 {
            return None;
        }
        let mut visited = 0;
        let mut stopped_at = None;
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.walk_leaves(start, false, |fence, id, skip| {
            let leaf = &self.slab[id as usize];
            for at in skip..leaf.slots.len() {
                visit(leaf.entry(at));
                visited += 1;
                if visited == limit {
                    let mut key = Vec::new();
                    leaf.key_into(fence, at, &mut key);
                    stopped_at = Some(key.into());
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        });
        stopped_at
    }

    /// How many keys `lower..upper` holds, and the keys at the positions `choose` picks for that
    /// count (ascending, each below it; others are left out). A leaf wholly inside the range is
    /// counted from its slots without building a key, so a large range costs a step per leaf,
    /// not per key: a large set's SCARD, or its SPOP's random member.
    pub fn count_and_pick(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        choose: impl FnOnce(usize) -> Vec<usize>,
    ) -> (usize, Vec<Key>) {
        let mut count = 0;
        self.walk_spans(lower, upper, |_, _, start, end| {
            count += end - start;
            ControlFlow::Continue(())
        });
        let positions = choose(count);
        let mut picked = Vec::with_capacity(positions.len());
        let mut wanted = positions.into_iter().filter(|&at| at < count).peekable();
        if wanted.peek().is_none() {
            // A count alone (SCARD): no second search.
            return (count, picked);
        }
        let mut before = 0;
        let mut key = Vec::new();
        self.walk_spans(lower, upper, |fence, id, start, end| {
            let leaf = &self.slab[id as usize];
            while let Some(&at) = wanted.peek() {
                if at >= before + end - start {
                    break;
                }
                if at >= before {
                    leaf.key_into(fence, start + at - before, &mut key);
                    picked.push(key.as_slice().into());
                }
                wanted.next();
            }
            before += end - start;
            if wanted.peek().is_some() {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        });
        (count, picked)
    }

    /// Calls `visit` with each leaf holding keys of `lower..upper`, in key order: its fence, its
    /// id, and the positions of its first key in the range and of its first past it. Only in
    /// the leaf where the range ends are keys built (a binary search for its end).
    fn walk_spans(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        mut visit: impl FnMut(&[u8], LeafId, usize, usize) -> ControlFlow<()>,
    ) {
        let mut key = Vec::new();
        self.walk_leaves(lower, false, |fence, id, start| {
            let leaf = &self.slab[id as usize];
            let count = leaf.slots.len();
            if start >= count {
                return ControlFlow::Continue(());
            }
            leaf.key_into(fence, count - 1, &mut key);
            if is_below(&key, upper) {
                return visit(fence, id, start, count);
            }
            let (mut low, mut high) = (start, count - 1);
            while low < high {
                let middle = low + (high - low) / 2;
                leaf.key_into(fence, middle, &mut key);
                if is_below(&key, upper) {
                    low = middle + 1;
                } else {
                    high = middle;
                }
            }
            // The range ends here: the walk stops whatever `visit` says.
            let _ = visit(fence, id, start, low);
            ControlFlow::Break(())
        });
    }

    /// Calls `walk` with each leaf a walk from `start` meets, in key order (descending when
    /// `reverse`): its fence, its id and how many of its entries, in the walk's direction, lie
    /// before `start`; stops when `walk` breaks. The leaf holding the bound is found by a
    /// search, as `get` does (a short range costs a search, not a leaf's scan), and the leaves
    /// after it are looked up only if the walk goes past its end: a short range (a key's type,
    /// a small collection) costs one search of the B-tree of leaves.
    fn walk_leaves(
        &self,
        start: Bound<&[u8]>,
        reverse: bool,
        mut walk: impl FnMut(&[u8], LeafId, usize) -> ControlFlow<()>,
    ) {
        let rest: Box<dyn Iterator<Item = (&Fence, &LeafId)>> = match start {
            Bound::Included(bound) | Bound::Excluded(bound) => {
                let Some((fence, id)) = self.leaf_for(bound) else {
                    return;
                };
                let leaf = &self.slab[id as usize];
                let count = leaf.slots.len();
                let included = matches!(start, Bound::Included(_));
                let skip = match (leaf.search(&bound[usize::from(leaf.prefix_len)..]), reverse) {
                    (Ok(at), false) => at + usize::from(!included),
                    (Err(at), false) => at,
                    (Ok(at), true) => count - at - usize::from(included),
                    (Err(at), true) => count - at,
                };
                if walk(fence, id, skip).is_break() {
                    return;
                }
                let after = (Bound::Excluded(fence), Bound::Unbounded);
                let before = (Bound::Unbounded, Bound::Excluded(fence));
                if reverse {
                    Box::new(self.leaves.range::<[u8], _>(before).rev())
                } else {
                    Box::new(self.leaves.range::<[u8], _>(after))
                }
            }
            Bound::Unbounded if reverse => Box::new(self.leaves.iter().rev()),
            Bound::Unbounded => Box::new(self.leaves.iter()),
        };
        for (fence, &id) in rest {
            if walk(fence, id, 0).is_break() {
                return;
            }
        }
    }
}

/// Whether `key` lies below the upper bound `upper`.
fn is_below(key: &[u8], upper: Bound<&[u8]>) -> bool {
    match upper {
        Bound::Included(upper) => key <= upper,
        Bound::Excluded(upper) => key < upper,
        Bound::Unbounded => true,
    }
}
