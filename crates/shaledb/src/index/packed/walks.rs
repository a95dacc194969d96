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
        let below_upper = |key: &[u8]| match upper {
            Bound::Included(upper) => key <= upper,
            Bound::Excluded(upper) => key < upper,
            Bound::Unbounded => true,
        };
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
                    !below_upper(&key)
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
