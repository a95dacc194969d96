//! The engines the harness can drive, one file each, and the registry of those compiled in.
//! Adding a peer is one file here plus one line in [`ENGINES`].

use crate::engine::EngineSpec;
use anyhow::Result;

#[cfg(feature = "fjall")]
pub mod fjall;
#[cfg(feature = "lmdb")]
pub mod lmdb;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod shaledb;

/// Every engine compiled into this build.
pub const ENGINES: &[EngineSpec] = &[
    self::shaledb::SPEC,
    #[cfg(feature = "rocksdb")]
    self::rocksdb::SPEC,
    #[cfg(feature = "rocksdb")]
    self::rocksdb::TUNED_SPEC,
    #[cfg(feature = "lmdb")]
    self::lmdb::SPEC,
    #[cfg(feature = "fjall")]
    self::fjall::SPEC,
];

/// The engine named `name`, or an error listing what this build has.
pub fn find(name: &str) -> Result<&'static EngineSpec> {
    ENGINES.iter().find(|spec| spec.name == name).ok_or_else(|| {
        let known: Vec<&str> = ENGINES.iter().map(|spec| spec.name).collect();
        anyhow::anyhow!(
            "engine {name:?} is not compiled in (this build has: {}); peers need `cargo build --release --features {}`",
            known.join(", "),
            name.split('-').next().unwrap_or(name)
        )
    })
}
