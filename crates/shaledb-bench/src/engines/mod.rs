//! The engines the harness can drive, one file each, and the registry of those compiled in.
//! Adding a peer is one file here plus one line in [`ENGINES`].

use crate::engine::EngineSpec;
use anyhow::Result;

#[cfg(feature = "fjall")]
pub mod fjall;
#[cfg(feature = "lmdb")]
pub mod lmdb;
// One process links one librocksdb, and that library decides which engine the `rocksdb` crate
// reaches: RocksDB (`rocksdb`) or ShaleDB's compatible library (`rocksdb-api`). build.rs checks
// the library against the feature.
#[cfg(all(feature = "rocksdb", feature = "rocksdb-api"))]
compile_error!(
    "the features `rocksdb` and `rocksdb-api` cannot be enabled together: build each into its own \
     binary (scripts/bench-rocksdb-api)"
);

#[cfg(any(feature = "rocksdb", feature = "rocksdb-api"))]
pub mod rocksdb;
pub mod rocksdb_options;
pub mod shaledb;

/// Every engine compiled into this build.
pub const ENGINES: &[EngineSpec] = &[
    self::shaledb::SPEC,
    #[cfg(feature = "rocksdb")]
    self::rocksdb::SPEC,
    #[cfg(feature = "rocksdb")]
    self::rocksdb::TUNED_SPEC,
    #[cfg(feature = "rocksdb-api")]
    self::rocksdb::API_SPEC,
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
            feature_of(name)
        )
    })
}

/// The cargo feature that compiles the engine `name` in.
fn feature_of(name: &str) -> &str {
    match name {
        "rocksdb-api" => "rocksdb-api",
        _ => name.split('-').next().unwrap_or(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_engine_names_the_feature_that_compiles_it() {
        assert_eq!(feature_of("rocksdb-api"), "rocksdb-api");
        assert_eq!(feature_of("rocksdb-tuned"), "rocksdb");
        assert_eq!(feature_of("lmdb"), "lmdb");
        if !ENGINES.iter().any(|spec| spec.name == "rocksdb-api") {
            let error = find("rocksdb-api")
                .err()
                .expect("not compiled in")
                .to_string();
            assert!(error.contains("--features rocksdb-api"), "{error}");
        }
    }
}
