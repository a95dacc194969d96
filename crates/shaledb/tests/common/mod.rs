//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod faults;
pub mod files;

use shaledb::{Durability, Options};

/// Small segments and buffers so tests exercise rolls, cleaning and checkpoints quickly.
pub fn small_options() -> Options {
    Options {
        segment_bytes: 2 << 20,
        write_buffer_bytes: shaledb::limits::WRITE_BUFFER_BYTES_MIN,
        flush_chunk_bytes: 256 << 10,
        checkpoint_interval_bytes: 4 << 20,
        cache_bytes: 1 << 20,
        durability: Durability::None,
        ..Options::default()
    }
}

/// Runs this test binary's test `child_test` in a child process, with `env_var` set to `dir`,
/// reads the numbers it prints as `ACK <n>` lines, and kills it with SIGKILL after `lifetime`.
/// Returns the last acknowledged number, if any.
pub fn run_child_then_kill(
    child_test: &str,
    env_var: &str,
    dir: &std::path::Path,
    lifetime: std::time::Duration,
) -> Option<u64> {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .env(env_var, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(number) = line.strip_prefix("ACK ") {
                sender.send(number.parse::<u64>().unwrap()).ok();
            }
        }
    });
    let started = std::time::Instant::now();
    let mut acked = None;
    while started.elapsed() < lifetime {
        if let Ok(number) = receiver.recv_timeout(std::time::Duration::from_millis(5)) {
            acked = Some(number);
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    reader.join().unwrap();
    while let Ok(number) = receiver.try_recv() {
        acked = Some(number);
    }
    acked
}

/// Runs this test binary's test `child_test` in a child process, with `env_var` set to `dir`,
/// and waits for it to crash (abort) as it is written to.
pub fn run_child_until_it_crashes(child_test: &str, env_var: &str, dir: &std::path::Path) {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .env(env_var, dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(
        !status.success(),
        "the child {child_test} was meant to crash"
    );
}
