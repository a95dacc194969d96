//! Tells the harness which RocksDB library the `rocksdb` feature links: the one the `rocksdb`
//! crate builds from its bundled source, or the system's when `ROCKSDB_LIB_DIR` is set (as
//! `scripts/bench` does with Debian's librocksdb-dev), named by the version in its file name.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(rocksdb_system)");
    println!("cargo:rerun-if-env-changed=ROCKSDB_LIB_DIR");
    let library = match std::env::var("ROCKSDB_LIB_DIR") {
        Ok(dir) => {
            println!("cargo:rustc-cfg=rocksdb_system");
            format!(
                "system librocksdb {} in {dir}",
                system_version(Path::new(&dir))
            )
        }
        Err(_) => "librocksdb bundled with the rocksdb crate".to_owned(),
    };
    println!("cargo:rustc-env=SHALE_ROCKSDB_LIBRARY={library}");
}

/// The longest `librocksdb.so.X.Y.Z` suffix in `dir`, or "of unknown version".
fn system_version(dir: &Path) -> String {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|name| name.strip_prefix("librocksdb.so.").map(str::to_owned))
        .max_by_key(String::len)
        .unwrap_or_else(|| "of unknown version".to_owned())
}
