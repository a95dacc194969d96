//! Goal: a C program written for RocksDB's C API compiles against the shipped `rocksdb/c.h`,
//! links this library in place of RocksDB's, and runs correctly with no memory errors.
//! Method: compile tests/c/smoke.c and tests/c/transactions.c with gcc -Wall -Werror against
//! include/rocksdb/c.h and libshaledb_rocksdb.so, and run each under valgrind (zero leaks,
//! zero invalid accesses).
//! RocksDB's own c_test.c runs in scripts/test-rocksdb-compat.

use std::path::{Path, PathBuf};
use std::process::Command;

/// target/<profile>/deps, this test binary's own directory: cargo builds the library's cdylib
/// there, with the rlib the tests link, so it is always the library under test.
fn artifacts() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().to_path_buf();
    assert!(
        dir.join("libshaledb_rocksdb.so").exists(),
        "libshaledb_rocksdb.so is missing from {}",
        dir.display()
    );
    dir
}

/// Compiles tests/c/`name`.c against c.h and this library, runs it under valgrind on a fresh
/// directory, and checks that it says "`name`: ok".
fn run_c_program(name: &str) {
    let target = artifacts();
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join(name);
    let status = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join(format!("tests/c/{name}.c")))
        .arg("-o")
        .arg(&program)
        .arg(format!("-L{}", target.display()))
        .arg("-lshaledb_rocksdb")
        .arg(format!("-Wl,-rpath,{}", target.display()))
        .status()
        .expect("gcc runs");
    assert!(status.success(), "compiling {name}.c failed");
    let output = Command::new("valgrind")
        // cargo's LD_LIBRARY_PATH lists target/<profile> too, where an older copy of the
        // library may lie (`cargo build` puts one there); it would win over the rpath.
        .env_remove("LD_LIBRARY_PATH")
        .args([
            "--quiet",
            "--error-exitcode=99",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
        ])
        .arg(&program)
        .arg(dir.path())
        .output()
        .expect("valgrind runs (scripts/test installs it)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{name} failed: {stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains(&format!("{name}: ok")));
}

#[test]
fn a_rocksdb_c_program_runs_on_shaledb_under_valgrind() {
    run_c_program("smoke");
}

#[test]
fn rocksdb_transactions_run_on_shaledb_under_valgrind() {
    run_c_program("transactions");
}
