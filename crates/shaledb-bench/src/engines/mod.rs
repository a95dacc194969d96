//! The engines the harness can drive, one file each.

#[cfg(feature = "fjall")]
pub mod fjall;
#[cfg(feature = "lmdb")]
pub mod lmdb;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod shaledb;
