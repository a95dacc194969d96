//! What a KVDB should contain, as its manifest says: its identity, its media directories, its
//! KVSs, and every live segment with its media class and, once sealed, its length, record count
//! and checksum; and the segments being freed (recorded freed, their files perhaps not yet
//! deleted). Edits are applied here and checked for consistency: an edit that contradicts
//! the state (a KVS id or name twice, a segment created twice, sealed twice or freed unknown) is
//! corruption.

use super::dirs::MediaDirs;
use super::edit::Edit;
use crate::media::MediaClass;
use crate::options::KvsOptions;
use crate::segment::{HeadKind, Seal, SegmentId};
use std::collections::BTreeMap;

/// One KVS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvsEntry {
    pub name: String,
    pub options: KvsOptions,
}

/// One live segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentEntry {
    pub class: MediaClass,
    pub head: HeadKind,
    pub created_seqno: u64,
    /// `None` while a head may still append to it.
    pub seal: Option<Seal>,
    /// While active: how far it is known to be durable (0: not known beyond its header).
    pub durable_end: u64,
}

/// The state a manifest describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvdbState {
    /// Chosen at random when the KVDB is created; every media directory carries it.
    pub kvdb_id: u64,
    pub media: MediaDirs,
    /// KVS ids are never reused, so records of a dropped KVS never count for a new one.
    pub next_kvs_id: u32,
    pub kvs: BTreeMap<u32, KvsEntry>,
    pub next_segment_id: u32,
    pub segments: BTreeMap<SegmentId, SegmentEntry>,
    /// Segments recorded freed whose deletion was not yet recorded: at open, their files go.
    pub freeing: BTreeMap<SegmentId, SegmentEntry>,
}

impl KvdbState {
    /// The state of a new, empty KVDB.
    pub fn new(kvdb_id: u64, media: MediaDirs) -> Self {
        KvdbState {
            kvdb_id,
            media,
            next_kvs_id: 1,
            kvs: BTreeMap::new(),
            next_segment_id: 1,
            segments: BTreeMap::new(),
            freeing: BTreeMap::new(),
        }
    }

    /// The KVS named `name`, with its id.
    pub fn kvs_named(&self, name: &str) -> Option<(u32, &KvsEntry)> {
        self.kvs
            .iter()
            .find(|(_, entry)| entry.name == name)
            .map(|(id, entry)| (*id, entry))
    }

    /// The edits that rebuild this state from nothing: what a rewritten manifest holds.
    pub fn as_edits(&self) -> Vec<Edit> {
        let mut edits = vec![
            Edit::Identity {
                kvdb_id: self.kvdb_id,
            },
            Edit::Media(self.media.clone()),
            Edit::NextIds {
                next_kvs_id: self.next_kvs_id,
                next_segment_id: self.next_segment_id,
            },
        ];
        for (&id, entry) in &self.kvs {
            edits.push(Edit::KvsCreated {
                id,
                name: entry.name.clone(),
                options: entry.options.clone(),
            });
        }
        let every_segment = self.segments.iter().chain(&self.freeing);
        for (&id, segment) in every_segment {
            edits.push(Edit::SegmentCreated {
                id,
                class: segment.class,
                head: segment.head,
                created_seqno: segment.created_seqno,
            });
            if let Some(seal) = segment.seal {
                edits.push(Edit::SegmentSealed { id, seal });
            } else if segment.durable_end > 0 {
                edits.push(Edit::SegmentDurable {
                    id,
                    end_bytes: segment.durable_end,
                });
            }
        }
        edits.extend(self.freeing.keys().map(|&id| Edit::SegmentFreed { id }));
        edits
    }

    /// Applies `edit`, or says why it contradicts the state (and changes nothing).
    pub fn apply(&mut self, edit: &Edit) -> Result<(), String> {
        match edit {
            Edit::Identity { kvdb_id } => {
                if *kvdb_id != self.kvdb_id {
                    return Err(format!(
                        "a second identity {kvdb_id:016x} for KVDB {:016x}",
                        self.kvdb_id
                    ));
                }
            }
            Edit::Media(media) => self.media = media.clone(),
            Edit::NextIds {
                next_kvs_id,
                next_segment_id,
            } => {
                self.next_kvs_id = self.next_kvs_id.max(*next_kvs_id);
                self.next_segment_id = self.next_segment_id.max(*next_segment_id);
            }
            Edit::KvsCreated { id, name, options } => {
                if self.kvs.contains_key(id) {
                    return Err(format!("KVS id {id} created twice"));
                }
                if let Some((other, _)) = self.kvs_named(name) {
                    return Err(format!("KVS name {name:?} held by ids {other} and {id}"));
                }
                self.kvs.insert(
                    *id,
                    KvsEntry {
                        name: name.clone(),
                        options: options.clone(),
                    },
                );
                self.next_kvs_id = self.next_kvs_id.max(id + 1);
            }
            Edit::KvsDropped { id } => {
                if self.kvs.remove(id).is_none() {
                    return Err(format!("KVS id {id} dropped but never created"));
                }
            }
            Edit::SegmentCreated {
                id,
                class,
                head,
                created_seqno,
            } => {
                if self.segments.contains_key(id) || self.freeing.contains_key(id) {
                    return Err(format!("segment {} created twice", id.0));
                }
                self.segments.insert(
                    *id,
                    SegmentEntry {
                        class: *class,
                        head: *head,
                        created_seqno: *created_seqno,
                        seal: None,
                        durable_end: 0,
                    },
                );
                self.next_segment_id = self.next_segment_id.max(id.0 + 1);
            }
            Edit::SegmentSealed { id, seal } => match self.segments.get_mut(id) {
                Some(segment) if segment.seal.is_none() => segment.seal = Some(*seal),
                Some(_) => return Err(format!("segment {} sealed twice", id.0)),
                None => return Err(format!("segment {} sealed but never created", id.0)),
            },
            Edit::SegmentFreed { id } => match self.segments.remove(id) {
                Some(segment) => {
                    self.freeing.insert(*id, segment);
                }
                None => return Err(format!("segment {} freed but not live", id.0)),
            },
            Edit::SegmentDurable { id, end_bytes } => {
                // A claim that raced with the segment's seal or free is stale, and harmless.
                if let Some(segment) = self.segments.get_mut(id).filter(|s| s.seal.is_none()) {
                    segment.durable_end = segment.durable_end.max(*end_bytes);
                }
            }
            Edit::SegmentDeleted { id } => {
                if self.freeing.remove(id).is_none() {
                    return Err(format!("segment {} deleted but never freed", id.0));
                }
            }
        }
        Ok(())
    }
}
