//! Goal: the `shale` binary does what its help says, with the exit codes scripts rely on.
//! Method: run the real binary against temporary KVDBs and check stdout, stderr and status.

mod common;

use common::damage_record;
use std::path::Path;
use std::process::{Command, Output};

fn shale(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shale"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .expect("shale runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs `shale bench ...` with `args`, expects success, and returns the results.json it
/// wrote to `out`.
fn bench_results(dir: &Path, args: &[&str], out: &Path) -> serde_json::Value {
    let output = shale(&dir.join("unused"), args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap()
}

#[test]
fn put_get_del_scan_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    assert!(shale(&db, &["put", "k1", "v1"]).status.success());
    assert!(shale(&db, &["put", "k2", "v2"]).status.success());
    let got = shale(&db, &["get", "k1"]);
    assert_eq!(stdout(&got), "v1\n");
    let missing = shale(&db, &["get", "nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(missing.stdout.is_empty());
    assert_eq!(
        stdout(&shale(&db, &["scan", "--reverse", "--limit", "1"])),
        "k2\tv2\n"
    );
    assert_eq!(stdout(&shale(&db, &["scan", "--start", "k2"])), "k2\tv2\n");
    assert!(shale(&db, &["del", "k1"]).status.success());
    assert_eq!(shale(&db, &["get", "k1"]).status.code(), Some(1));
    assert!(shale(&db, &["--kvs", "other", "put", "a", "b"])
        .status
        .success());
    assert_eq!(stdout(&shale(&db, &["kvs", "list"])), "default\nother\n");
    let bad = shale(&db, &["--durability", "sometimes", "get", "k2"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("durability"));
}

#[test]
fn dump_and_load_round_trip_any_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let lines = "{\"kvs\":\"bin\",\"key\":\"AAH/\",\"value\":\"\"}\n{\"kvs\":\"default\",\"key\":\"aGk=\",\"value\":\"AAEC/w==\"}\n";
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, lines).unwrap();
    let loaded = shale(&source, &["load", input.to_str().unwrap()]);
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    assert!(String::from_utf8_lossy(&loaded.stderr).contains("loaded 2 records"));
    let dumped = stdout(&shale(&source, &["dump"]));
    assert_eq!(dumped, lines);
    let garbage = dir.path().join("garbage.jsonl");
    std::fs::write(
        &garbage,
        "{\"kvs\":\"x\",\"key\":\"not base64!\",\"value\":\"\"}\n",
    )
    .unwrap();
    let refused = shale(&source, &["load", garbage.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("line 1"));
}

#[test]
fn check_names_file_and_offset_of_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for index in 0..50 {
        assert!(
            shale(&db, &["put", &format!("key{index}"), &"x".repeat(200)])
                .status
                .success()
        );
    }
    let clean = shale(&db, &["check"]);
    assert!(clean.status.success(), "{}", stdout(&clean));
    assert!(stdout(&clean).ends_with("OK\n"));
    let segment = std::fs::read_dir(db.join("capacity"))
        .unwrap()
        .map(|item| item.unwrap().path())
        .find(|path| std::fs::metadata(path).unwrap().len() > 4096)
        .unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[4096 + 100] ^= 0xff;
    std::fs::write(&segment, bytes).unwrap();
    let damaged = shale(&db, &["check"]);
    assert_eq!(damaged.status.code(), Some(2));
    let text = stdout(&damaged);
    assert!(
        text.contains(segment.file_name().unwrap().to_str().unwrap()),
        "{text}"
    );
    assert!(text.contains("at 4096"), "{text}");
}

#[test]
fn info_json_and_locked_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    assert!(shale(&db, &["put", "k", "v"]).status.success());
    let info: serde_json::Value =
        serde_json::from_slice(&shale(&db, &["info", "--json"]).stdout).unwrap();
    assert_eq!(info["stats"]["index_keys"], 1);
    assert!(info["stats"]["media"].is_array());
    let holder = shaledb::Db::open(&db, shaledb::Options::default()).unwrap();
    let locked = shale(&db, &["get", "k"]);
    assert_eq!(locked.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&locked.stderr).contains("locked"));
    drop(holder);
}

#[test]
fn bench_smoke_runs_and_writes_results() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let results = bench_results(
        dir.path(),
        &[
            "bench",
            "quick",
            "--num",
            "2000",
            "--threads",
            "1,2",
            "--data-dir",
            dir.path().join("data").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &out,
    );
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs[0]["put_ops_per_sec"].as_f64().unwrap() > 0.0);
    assert!(runs[1]["device_reads_per_get"].as_f64().unwrap() <= 1.0);
}

#[test]
fn bench_compression_flags_reach_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let data = dir.path().join("data");
    let common = [
        "--engines",
        "shaledb",
        "--threads",
        "1",
        "--rounds",
        "1",
        "--probe-secs",
        "0",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let db_bench = [
        &["bench", "db", "--benchmarks", "fillrandom", "--num", "500"][..],
        &["--compression", "lz4", "--compression_ratio", "0.25"],
        &common,
    ]
    .concat();
    let results = bench_results(dir.path(), &db_bench, &out);
    assert_eq!(results["params"]["common"]["compression"], "lz4");
    assert_eq!(results["params"]["db"]["compression_ratio"], 0.25);
    let ycsb = [
        &[
            "bench",
            "ycsb",
            "--workloads",
            "c",
            "--records",
            "300",
            "--operations",
            "100",
        ][..],
        &["--compression-ratio", "0.5"],
        &common,
    ]
    .concat();
    let results = bench_results(dir.path(), &ycsb, &out);
    assert_eq!(results["params"]["ycsb"]["shape"]["compression_ratio"], 0.5);
    assert_eq!(results["params"]["common"]["compression"], "none");
    let refused = shale(
        &dir.path().join("unused"),
        &[&["bench", "ycsb", "--compression-ratio", "2"][..], &common].concat(),
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("at most 1"));
}

fn shale_with_stdin(db: &Path, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("shale runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn txn_scripts_commit_atomically_and_read_their_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let first = shale_with_stdin(
        &db,
        &["txn", "-"],
        "# open two accounts\nput acct alice 100\nput acct bob 50 and change\nget acct bob\n",
    );
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(stdout(&first), "bob\t50 and change\ncommitted\n");
    let second = shale_with_stdin(
        &db,
        &["txn", "-"],
        "del acct bob\nscan acct\nget acct bob\n",
    );
    assert_eq!(stdout(&second), "alice\t100\nbob\t(none)\ncommitted\n");
    let aborted = shale_with_stdin(&db, &["txn", "-"], "put acct carol 1\nabort\n");
    assert_eq!(stdout(&aborted), "aborted\n");
    assert_eq!(
        stdout(&shale(&db, &["--kvs", "acct", "scan"])),
        "alice\t100\n"
    );
    let bad = shale_with_stdin(&db, &["txn", "-"], "put acct dave 1\nfly acct x\n");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("line 2"));
    assert_eq!(
        shale(&db, &["--kvs", "acct", "get", "dave"]).status.code(),
        Some(1),
        "a failed script writes nothing"
    );
}

#[test]
fn bench_transfer_smoke_reports_each_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let output = shale(
        &dir.path().join("unused"),
        &[
            "bench",
            "transfer",
            "--accounts",
            "200",
            "--threads",
            "1,2",
            "--seconds",
            "0.3",
            "--data-dir",
            dir.path().join("data").to_str().unwrap(),
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = stdout(&output);
    assert!(
        text.contains("threads  1:") && text.contains("threads  2:"),
        "{text}"
    );
    assert!(text.contains("transfers/s committed"), "{text}");
}

#[test]
fn media_classes_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let staging = dir.path().join("fast");
    let staging_arg = staging.to_str().unwrap();
    let created = shale(
        &db,
        &[
            "--staging",
            staging_arg,
            "kvs",
            "create",
            "hot",
            "--media-policy",
            "staging_only",
        ],
    );
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    assert!(
        shale(&db, &["--kvs", "hot", "put", "k", "v"])
            .status
            .success(),
        "the staging class is remembered"
    );
    assert_eq!(stdout(&shale(&db, &["--kvs", "hot", "get", "k"])), "v\n");
    let info: serde_json::Value =
        serde_json::from_slice(&shale(&db, &["info", "--json"]).stdout).unwrap();
    let staging_stats = info["stats"]["media"]
        .as_array()
        .unwrap()
        .iter()
        .find(|media| media["class"] == "staging")
        .unwrap()
        .clone();
    assert!(
        staging_stats["segments"].as_u64().unwrap() > 0,
        "{staging_stats}"
    );
    let refused = shale(
        &db,
        &[
            "--staging",
            dir.path().join("other").to_str().unwrap(),
            "get",
            "k",
        ],
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("fixed at creation"));
    let bad_policy = shale(&db, &["kvs", "create", "x", "--media-policy", "fastest"]);
    assert_eq!(bad_policy.status.code(), Some(2));
}

#[test]
fn a_kvs_created_with_lz4_stores_values_compressed_and_info_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let created = shale(&db, &["kvs", "create", "docs", "--compression", "lz4"]);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let value = "compressible ".repeat(400);
    assert!(shale(&db, &["--kvs", "docs", "put", "k", &value])
        .status
        .success());
    assert_eq!(
        stdout(&shale(&db, &["--kvs", "docs", "get", "k"])),
        format!("{value}\n")
    );
    let info: serde_json::Value =
        serde_json::from_slice(&shale(&db, &["info", "--json"]).stdout).unwrap();
    assert_eq!(info["kvs_options"]["docs"]["compression"], "lz4", "{info}");
    let live = info["stats"]["live_bytes"].as_u64().unwrap();
    assert!(
        live < 500,
        "a {}-byte value stored in {live} bytes",
        value.len()
    );
    let text = stdout(&shale(&db, &["info"]));
    assert!(
        text.contains("docs          prefix_len 0, media policy capacity_only, compression lz4"),
        "{text}"
    );
    let unknown = shale(&db, &["kvs", "create", "x", "--compression", "zstd"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("none or lz4"));
}

/// Every file below `dir` with its bytes.
fn files(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for item in std::fs::read_dir(&dir).unwrap() {
            let path = item.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

#[test]
fn commands_that_only_read_write_nothing_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    assert!(shale(&db, &["put", "k", "v"]).status.success());
    let before = files(&db);
    let backup = dir.path().join("backup");
    let reads: [&[&str]; 9] = [
        &["backup", backup.to_str().unwrap()],
        &["get", "k"],
        &["get", "missing"],
        &["--kvs", "no-such-kvs", "get", "k"],
        &["scan"],
        &["info", "--json"],
        &["dump"],
        &["check"],
        &["kvs", "list"],
    ];
    for args in reads {
        let output = shale(&db, args);
        assert!(
            output.status.code().is_some_and(|code| code <= 1),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(files(&db), before, "{args:?} wrote something");
    }
    let nowhere = dir.path().join("nowhere");
    let missing = shale(&nowhere, &["get", "k"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no KVDB"));
    assert!(!nowhere.exists(), "a read created the KVDB");
    let refused = shale(&db, &["--read-only", "put", "k", "w"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("read-only"));
    assert_eq!(stdout(&shale(&db, &["get", "k"])), "v\n");
}

#[test]
fn backup_makes_a_verified_kvdb_of_its_own_and_refuses_damage() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for index in 0..50 {
        let key = format!("key{index:02}");
        assert!(shale(&db, &["put", &key, "a value"]).status.success());
    }
    let copy = dir.path().join("copy");
    let made = shale(&db, &["backup", copy.to_str().unwrap(), "--json"]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&made.stdout).unwrap();
    assert_eq!(report["kvs"], 1);
    assert_eq!(stdout(&shale(&copy, &["get", "key42"])), "a value\n");
    assert!(shale(&copy, &["check"]).status.success());
    // Into a directory that is not empty: refused.
    let again = shale(&db, &["backup", copy.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    // A damaged source: exit 4 naming the file, and no KVDB at the destination.
    let segment = damage_record(&db, b"a value", 0, 0x20);
    let second = dir.path().join("second");
    let damaged = shale(&db, &["backup", second.to_str().unwrap()]);
    assert_eq!(damaged.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&damaged.stderr);
    assert!(
        stderr.contains(segment.file_name().unwrap().to_str().unwrap()),
        "{stderr}"
    );
    assert_ne!(shale(&second, &["get", "key01"]).status.code(), Some(0));
}

#[test]
fn a_damaged_record_exits_4_never_like_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for index in 0..20 {
        let value = format!("value-{index:03}-{}", "x".repeat(100));
        assert!(shale(&db, &["put", &format!("key{index:02}"), &value])
            .status
            .success());
    }
    let segment = damage_record(&db, b"value-007", 20, 0xff);
    let damaged = shale(&db, &["get", "key07"]);
    assert_eq!(damaged.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&damaged.stderr);
    assert!(
        stderr.contains(segment.file_name().unwrap().to_str().unwrap()),
        "{stderr}"
    );
    assert_eq!(shale(&db, &["get", "key99"]).status.code(), Some(1));
    assert_eq!(
        stdout(&shale(&db, &["get", "key08"])).len(),
        111,
        "value and newline"
    );
}

#[test]
fn a_relative_db_path_opens_the_same_from_any_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("elsewhere")).unwrap();
    let run = |cwd: &Path, db: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_shale"))
            .current_dir(cwd)
            .args(["--db", db])
            .args(args)
            .output()
            .unwrap()
    };
    assert!(run(dir.path(), "rel", &["put", "k", "v"]).status.success());
    assert_eq!(
        stdout(&run(&dir.path().join("elsewhere"), "../rel", &["get", "k"])),
        "v\n"
    );
    let absolute = dir.path().join("rel");
    assert_eq!(
        stdout(&run(
            Path::new("/"),
            absolute.to_str().unwrap(),
            &["get", "k"]
        )),
        "v\n"
    );
}

#[test]
fn salvage_opens_a_damaged_kvdb_and_reports_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for index in 0..30 {
        assert!(
            shale(&db, &["put", &format!("key{index:02}"), &"v".repeat(300)])
                .status
                .success()
        );
    }
    let manifest = db.join("MANIFEST");
    std::fs::remove_file(&manifest).unwrap();
    let refused = shale(&db, &["get", "key01"]);
    assert_eq!(refused.status.code(), Some(4), "damage is exit 4");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("salvage"));
    let salvaged = shale(&db, &["salvage"]);
    assert!(
        salvaged.status.success(),
        "{}",
        String::from_utf8_lossy(&salvaged.stderr)
    );
    let text = stdout(&salvaged);
    assert!(text.contains("manifest was rebuilt"), "{text}");
    assert!(text.contains("the full report: "), "{text}");
    assert!(stdout(&shale(&db, &["check"])).ends_with("OK\n"));
    assert_eq!(
        stdout(&shale(&db, &["--kvs", "salvaged-kvs-1", "get", "key07"])),
        format!("{}\n", "v".repeat(300))
    );
}
