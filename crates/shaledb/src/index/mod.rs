//! The per-KVS index in DRAM: for each key, where its newest record lives (packed leaves under
//! a B-tree of fences), plus the older versions open snapshots can still see.

mod entry;
mod kvs_index;
mod leaf;
mod packed;

pub use entry::{Entry, Key};
pub use kvs_index::{KvsIndex, Liveness};
