//! Tells the harness which library the `rocksdb` crate links, and refuses a build whose library
//! is not the one its feature claims, since the two features name the same crate and the same
//! symbols and only the library decides which engine is real:
//!
//! - `rocksdb` (the RocksDB peers): RocksDB itself, the copy the `rocksdb` crate bundles, or when
//!   `ROCKSDB_LIB_DIR` is set the system's (Debian's librocksdb-dev, as `scripts/rocksdb-peer`
//!   sets up), named by the version in its file name. ShaleDB's compatible library there is
//!   refused: ShaleDB would be reported as RocksDB.
//! - `rocksdb-api` (ShaleDB through RocksDB's C API): ShaleDB's RocksDB-compatible library,
//!   `crates/shaledb-rocksdb` as `scripts/install-rocksdb-compat PREFIX` installs it;
//!   `ROCKSDB_LIB_DIR` must be PREFIX/lib, an absolute path, linked dynamically. The library is
//!   recognised by its contents (see [`is_shaledb_library`]). This crate's test binaries get an
//!   rpath to it (shale-cli's build script gives `shale` one), because the loader would
//!   otherwise take the first `librocksdb.so` on its default path, Debian's if it is installed.

use std::path::Path;

/// Bytes found in every build of ShaleDB's librocksdb and in no RocksDB: its crate's name, in
/// the source paths its panic messages carry (kept in a stripped library) and in its symbols.
const SHALEDB_MARKERS: [&[u8]; 2] = [b"crates/shaledb-rocksdb/", b"shaledb_rocksdb"];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(rocksdb_system)");
    println!("cargo:rerun-if-env-changed=ROCKSDB_LIB_DIR");
    println!("cargo:rerun-if-env-changed=ROCKSDB_STATIC");
    let peer = std::env::var_os("CARGO_FEATURE_ROCKSDB").is_some();
    let api = std::env::var_os("CARGO_FEATURE_ROCKSDB_API").is_some();
    let lib_dir = std::env::var("ROCKSDB_LIB_DIR").ok();
    let library = match (peer, api) {
        (true, true) => fail(
            "the features `rocksdb` and `rocksdb-api` cannot be built together: one process \
             links one librocksdb, and that library decides which of the two engines is real. \
             Build them into two binaries (scripts/bench-rocksdb-api does).",
        ),
        (false, true) => shaledb_library(lib_dir.as_deref()),
        (true, false) => rocksdb_library(lib_dir.as_deref()),
        (false, false) => "no librocksdb (neither `rocksdb` nor `rocksdb-api` is enabled)".into(),
    };
    println!("cargo:rustc-env=SHALE_ROCKSDB_LIBRARY={library}");
}

fn fail(message: &str) -> ! {
    // Cargo shows a build script's stderr when it fails.
    eprintln!("error: {message}");
    std::process::exit(1);
}

/// The `rocksdb` feature's library: RocksDB, bundled or the system's.
fn rocksdb_library(lib_dir: Option<&str>) -> String {
    let Some(dir) = lib_dir else {
        return "librocksdb bundled with the rocksdb crate".to_owned();
    };
    let so = Path::new(dir).join("librocksdb.so");
    println!("cargo:rerun-if-changed={}", so.display());
    if is_shaledb_library(&so) {
        fail(&format!(
            "ROCKSDB_LIB_DIR={dir} holds ShaleDB's RocksDB-compatible library, not RocksDB: the \
             `rocksdb` peer would be ShaleDB measured as RocksDB. Build the `rocksdb-api` \
             feature with it instead, and the `rocksdb` feature with RocksDB's library \
             (scripts/rocksdb-peer)."
        ));
    }
    println!("cargo:rustc-cfg=rocksdb_system");
    format!(
        "system librocksdb {} in {dir}",
        system_version(Path::new(dir))
    )
}

/// The `rocksdb-api` feature's library: ShaleDB's, installed under ROCKSDB_LIB_DIR.
fn shaledb_library(lib_dir: Option<&str>) -> String {
    let Some(dir) = lib_dir else {
        fail(
            "the `rocksdb-api` feature links ShaleDB's RocksDB-compatible library: install it with \
             `scripts/install-rocksdb-compat PREFIX` and set ROCKSDB_LIB_DIR=PREFIX/lib (without \
             it the `rocksdb` crate would build RocksDB itself, and RocksDB would be measured \
             as ShaleDB)",
        );
    };
    if !Path::new(dir).is_absolute() {
        fail(&format!(
            "ROCKSDB_LIB_DIR={dir} must be an absolute path (build scripts run in their own \
             package's directory, and the binaries' rpath must not depend on the directory \
             they run in)"
        ));
    }
    if std::env::var_os("ROCKSDB_STATIC").is_some() {
        fail(
            "the `rocksdb-api` feature links ShaleDB's librocksdb.so dynamically: unset \
             ROCKSDB_STATIC (the static library carries its own copy of Rust's standard library \
             and of ShaleDB, which a Rust program already links)",
        );
    }
    let so = Path::new(dir).join("librocksdb.so");
    println!("cargo:rerun-if-changed={}", so.display());
    if !so.exists() {
        fail(&format!(
            "{} does not exist: install ShaleDB's RocksDB-compatible library with \
             `scripts/install-rocksdb-compat PREFIX` and set ROCKSDB_LIB_DIR=PREFIX/lib",
            so.display()
        ));
    }
    if !is_shaledb_library(&so) {
        fail(&format!(
            "{} is not ShaleDB's RocksDB-compatible library (it names no crates/shaledb-rocksdb \
             source): the `rocksdb-api` engine would measure another RocksDB as ShaleDB",
            so.display()
        ));
    }
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    format!("ShaleDB's RocksDB-compatible librocksdb.so (crates/shaledb-rocksdb) in {dir}")
}

/// Whether the library at `path` is ShaleDB's: it contains one of [`SHALEDB_MARKERS`]. A file
/// that cannot be read is not.
fn is_shaledb_library(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    SHALEDB_MARKERS
        .iter()
        .any(|marker| bytes.windows(marker.len()).any(|window| window == *marker))
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
