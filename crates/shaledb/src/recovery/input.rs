//! What recovery is given.

use crate::counters::Counters;
use crate::manifest::KvdbState;
use crate::media::{MediaClass, Storage};
use std::path::{Path, PathBuf};

pub struct RecoveryInput<'a> {
    /// What the manifest says the KVDB holds.
    pub state: &'a KvdbState,
    /// Every media directory, absolute, with its class.
    pub media: &'a [(MediaClass, PathBuf)],
    pub checkpoint_dir: &'a Path,
    pub storage: &'a dyn Storage,
    pub direct_io: bool,
    pub counters: &'a Counters,
    /// Go on past damage, reporting it, instead of failing (`Options::salvage`).
    pub salvage: bool,
    /// Open segment files for reading only (`Options::read_only`).
    pub read_only: bool,
    /// Values of at most this many bytes are kept in the index entries recovered
    /// (`Options::index_value_bytes_max`).
    pub index_value_bytes_max: usize,
}
