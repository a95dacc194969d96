//! The per-KVS index in DRAM: for each key, where its newest record lives (packed leaves under
//! a B-tree of fences), plus the older versions open snapshots can still see; split by key hash
//! into partitions that lock separately.

mod entry;
mod kvs_index;
mod leaf;
mod packed;
mod partitioned;
mod recent;

pub use entry::{keeps_value, Entry, Key};
pub use kvs_index::{KvsIndex, Liveness, RangeSize};
pub use partitioned::{PartitionedIndex, WALK_CHUNK_KEYS};
