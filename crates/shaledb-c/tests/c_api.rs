//! Goal: the C library works from C exactly as the header documents, with no memory errors.
//! Method: compile tests/c/api_test.c (every function, including error paths) against
//! libshaledb.so and the README example against libshaledb.a with gcc -Wall -Werror, and run
//! them under valgrind, which must report zero leaks and zero invalid accesses.

use std::path::{Path, PathBuf};
use std::process::Command;

/// target/<profile>, found from this test binary's own path (target/<profile>/deps/c_api-*),
/// holding the C library (`cargo test` does not build it: no Rust test links it).
fn artifacts() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    for library in ["libshaledb.so", "libshaledb.a"] {
        assert!(
            dir.join(library).exists(),
            "{library} is missing from {}: run `cargo build -p shaledb-c` first (scripts/test does)",
            dir.display()
        );
    }
    dir
}

fn compile(source: &str, output: &Path, link: &[&str]) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c").join(source))
        .arg("-o")
        .arg(output)
        .args(link)
        .status()
        .expect("gcc runs");
    assert!(status.success(), "compiling {source} failed");
}

fn valgrind(program: &Path, dir: &Path) -> std::process::Output {
    Command::new("valgrind")
        .args([
            "--quiet",
            "--error-exitcode=99",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
        ])
        .arg(program)
        .arg(dir)
        .output()
        .expect("valgrind runs (scripts/test installs it)")
}

#[test]
fn every_function_works_under_valgrind() {
    let target = artifacts();
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("api_test");
    let rpath = format!("-Wl,-rpath,{}", target.display());
    compile(
        "api_test.c",
        &program,
        &["-L", target.to_str().unwrap(), "-lshaledb", &rpath],
    );
    let output = valgrind(&program, &dir.path().join("kvdb"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
    assert!(
        !stderr.contains("definitely lost") && !stderr.contains("Invalid "),
        "{stderr}"
    );
}

#[test]
fn readme_example_links_statically_and_runs() {
    let target = artifacts();
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("example");
    let archive = target.join("libshaledb.a");
    compile(
        "example.c",
        &program,
        &[archive.to_str().unwrap(), "-lpthread", "-ldl", "-lm"],
    );
    let output = valgrind(&program, &dir.path().join("kvdb"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout, "user:1 = Ada\nuser:1 -> Ada\n");
}
