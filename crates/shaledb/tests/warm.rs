//! Goal: a reopened KVDB warms its value cache from the keys the cache held before (the
//! warm-keys file), without a client read and without the open waiting; and the file, a hint,
//! can never hurt: a damaged or unexpected one is logged, counted and ignored, keys or KVSs
//! gone since are skipped, a read-only open never writes it, and it never passes its bound.
//! Method: read some keys, close, reopen, and watch `Stats` (the warm counters, the cache's
//! bytes, and no get, cache hit or device read); damage the file in every way and reopen.

mod common;

use common::small_options;
use shaledb::{Db, ErrorKind, Options, Stats};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const FILE_NAME: &str = "warm-keys";
/// Keys written per KVS, and how many of them the test reads before the close (their 1 KB
/// values fill about half of `options()`'s 1 MiB cache).
const KEYS: u32 = 2000;
const READ: u32 = 250;

fn options() -> Options {
    Options {
        // Only reads fill the cache, so it holds exactly the keys a test read.
        cache_writes: false,
        // Only the close saves, unless a test says otherwise.
        warm_keys_save_interval: Duration::ZERO,
        ..small_options()
    }
}

fn key(index: u32) -> Vec<u8> {
    format!("key:{index:06}").into_bytes()
}

fn value(kvs: &str, index: u32) -> Vec<u8> {
    let mut value = format!("{kvs}:{index}:").into_bytes();
    value.resize(1000, b'.');
    value
}

/// Writes KEYS keys in KVSs `alpha` and `beta`, reads the first READ of each, and closes.
fn build(home: &Path) {
    let db = Db::open(home, options()).unwrap();
    for name in ["alpha", "beta"] {
        let kvs = db.kvs(name).unwrap();
        for index in 0..KEYS {
            kvs.put(key(index), value(name, index)).unwrap();
        }
        for index in 0..READ {
            assert_eq!(kvs.get(key(index)).unwrap().unwrap(), value(name, index));
        }
    }
    db.close().unwrap();
}

/// The stats once the warming has ended (it runs on its own thread after the open).
fn after_warming(db: &Db) -> Stats {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = db.stats();
        if !stats.warming {
            return stats;
        }
        assert!(Instant::now() < deadline, "the warming never ended");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn warming_bytes_read(stats: &Stats) -> u64 {
    stats
        .media
        .iter()
        .map(|media| media.bytes_read_by_warming)
        .sum()
}

/// Everything logged by this test binary (the warming logs on its own thread, so the
/// subscriber is the process's).
fn log() -> String {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    struct Writer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Writer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = LOG.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let shared = buffer.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Writer(shared.clone()))
            .init();
        buffer
    });
    String::from_utf8_lossy(&buffer.lock().unwrap()).into_owned()
}

#[test]
fn a_reopened_kvdb_warms_its_cache_without_a_client_read() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    assert!(dir.path().join(FILE_NAME).is_file(), "the close saved it");

    let db = Db::open(dir.path(), options()).unwrap();
    let stats = after_warming(&db);
    assert_eq!(stats.warm_keys_listed, 2 * READ as u64);
    assert_eq!(stats.warm_values_read, 2 * READ as u64);
    assert_eq!(stats.warm_keys_files_rejected, 0);
    assert!(
        stats.cache_bytes >= 2 * READ as u64 * 1000,
        "{} bytes cached",
        stats.cache_bytes
    );
    assert!(warming_bytes_read(&stats) >= 2 * READ as u64 * 1000);
    assert_eq!(
        (
            stats.gets,
            stats.cache_hits,
            stats.cache_misses,
            stats.get_device_reads
        ),
        (0, 0, 0, 0),
        "warming is no client's read"
    );
    for name in ["alpha", "beta"] {
        let kvs = db.kvs(name).unwrap();
        for index in 0..READ {
            assert_eq!(kvs.get(key(index)).unwrap().unwrap(), value(name, index));
        }
    }
    let stats = db.stats();
    assert_eq!(stats.cache_hits, 2 * READ as u64, "every read was a hit");
    assert_eq!(stats.get_device_reads, 0);
    db.close().unwrap();
}

#[test]
fn keys_and_kvss_gone_since_the_file_was_saved_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let saved = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
    {
        let db = Db::open(
            dir.path(),
            Options {
                warm_reads_per_sec: 0,
                ..options()
            },
        )
        .unwrap();
        let alpha = db.kvs("alpha").unwrap();
        for index in 0..10 {
            alpha.delete(key(index)).unwrap();
        }
        db.drop_kvs("beta").unwrap();
        db.close().unwrap();
    }
    // The session's close saved its own (empty) cache: put back the list from before.
    std::fs::write(dir.path().join(FILE_NAME), &saved).unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let stats = after_warming(&db);
    assert_eq!(stats.warm_keys_listed, 2 * READ as u64);
    assert_eq!(stats.warm_values_read, READ as u64 - 10);
    assert_eq!(stats.warm_keys_files_rejected, 0);
    let alpha = db.kvs("alpha").unwrap();
    assert_eq!(alpha.get(key(0)).unwrap(), None);
    assert_eq!(alpha.get(key(10)).unwrap().unwrap(), value("alpha", 10));
    assert_eq!(db.stats().cache_hits, 1);
    db.close().unwrap();
}

/// Puts a valid checksum on a damaged file, so its damage reaches the checks behind it.
fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
    let body = bytes.len() - 4;
    let crc = crc32c::crc32c(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

#[test]
fn a_damaged_or_unexpected_file_is_logged_and_warms_nothing() {
    log(); // Installs the subscriber before anything is logged.
    let pristine = tempfile::tempdir().unwrap();
    build(pristine.path());
    let saved = std::fs::read(pristine.path().join(FILE_NAME)).unwrap();
    let with = |at: usize, bytes: &[u8]| {
        let mut damaged = saved.clone();
        damaged[at..at + bytes.len()].copy_from_slice(bytes);
        damaged
    };
    let mut flipped = saved.clone();
    flipped[saved.len() / 2] ^= 0x01;
    let damages: [(&str, Vec<u8>, &str); 7] = [
        ("flipped byte", flipped, "checksum mismatch"),
        (
            "truncated",
            saved[..saved.len() - 5].to_vec(),
            "checksum mismatch",
        ),
        ("cut to 10 bytes", saved[..10].to_vec(), "ends early"),
        ("wrong magic", resealed(with(0, b"SHALECK1")), "bad magic"),
        (
            "unexpected version",
            resealed(with(8, &2u32.to_le_bytes())),
            "unsupported warm-keys format version 2",
        ),
        ("zero-length", Vec::new(), "the warm-keys file is empty"),
        (
            "oversized count",
            resealed(with(12, &100_000u32.to_le_bytes())),
            "record count 100000 is more than the file can hold",
        ),
    ];
    for (damage, bytes, reason) in damages {
        let scratch = tempfile::tempdir().unwrap();
        let home = scratch.path().join(damage.replace(' ', "-"));
        std::fs::create_dir_all(home.join("capacity")).unwrap();
        for (path, contents) in common::files::snapshot_files(pristine.path()) {
            let target = home.join(path.strip_prefix(pristine.path()).unwrap());
            std::fs::write(target, contents).unwrap();
        }
        std::fs::write(home.join(FILE_NAME), &bytes).unwrap();
        let db = Db::open(&home, options()).unwrap();
        let stats = after_warming(&db);
        assert_eq!(stats.warm_keys_files_rejected, 1, "{damage}");
        assert_eq!(
            (
                stats.warm_keys_listed,
                stats.warm_values_read,
                stats.cache_bytes
            ),
            (0, 0, 0),
            "{damage}: nothing warmed"
        );
        let path = home.join(FILE_NAME).display().to_string();
        let logged = log();
        let warning = logged
            .lines()
            .find(|line| line.contains(&path))
            .unwrap_or_else(|| panic!("{damage}: no warning names {path}:\n{logged}"));
        assert!(
            warning.contains("WARN") && warning.contains(reason),
            "{damage}: {warning}"
        );
        let kvs = db.kvs("alpha").unwrap();
        assert_eq!(kvs.get(key(3)).unwrap().unwrap(), value("alpha", 3));
        db.close().unwrap();
    }
}

#[test]
fn the_file_holds_at_most_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let bounded = Options {
        warm_keys_max_bytes: Some(4096),
        ..options()
    };
    // Each record takes 4 + 2 + 10 bytes: 500 keys would take 8,020.
    {
        let db = Db::open(dir.path(), bounded.clone()).unwrap();
        let kvs = db.kvs("alpha").unwrap();
        // Longer than `index_value_bytes_max`: kept in the cache, not in the index.
        for index in 0..500 {
            kvs.put(key(index), [b'v'; 32]).unwrap();
        }
        for index in 0..500 {
            kvs.get(key(index)).unwrap().unwrap();
        }
        db.close().unwrap();
    }
    let bytes = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
    assert!(bytes.len() <= 4096, "{} bytes", bytes.len());
    assert!(
        bytes.len() > 4096 - 16,
        "filled to its bound: {}",
        bytes.len()
    );
    let db = Db::open(dir.path(), bounded).unwrap();
    let stats = after_warming(&db);
    assert_eq!(stats.warm_keys_listed, (4096 - 20) / 16);
    assert_eq!(stats.warm_values_read, stats.warm_keys_listed);
    db.close().unwrap();

    let too_small = Options {
        warm_keys_max_bytes: Some(100),
        ..options()
    };
    let error = Db::open(dir.path(), too_small).err().unwrap();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
}

#[test]
fn warming_stops_when_the_cache_is_full() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let db = Db::open(
        dir.path(),
        Options {
            // Holds about 120 of the 500 values listed.
            cache_bytes: 128 << 10,
            ..options()
        },
    )
    .unwrap();
    let stats = after_warming(&db);
    assert_eq!(stats.warm_keys_listed, 2 * READ as u64);
    assert!(
        stats.warm_values_read < 2 * READ as u64 && stats.warm_values_read > 100,
        "{} values read",
        stats.warm_values_read
    );
    assert!(stats.cache_bytes <= 128 << 10);
    db.close().unwrap();
}

#[test]
fn closing_stops_the_warming_and_keeps_the_file() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let saved = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            // 500 keys at 50 a second: 10 s of warming.
            warm_reads_per_sec: 50,
            ..options()
        },
    )
    .unwrap();
    let kvs = db.kvs("alpha").unwrap();
    kvs.get(key(KEYS - 1)).unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let stats = db.stats();
    assert!(stats.warming, "still warming");
    assert!(stats.warm_values_read < 2 * READ as u64);
    let closing = Instant::now();
    db.close().unwrap();
    assert!(
        closing.elapsed() < Duration::from_secs(2),
        "the close waited"
    );
    assert_eq!(
        std::fs::read(dir.path().join(FILE_NAME)).unwrap(),
        saved,
        "an unfinished warming keeps the list it warms from"
    );
}

#[test]
fn a_read_only_open_warms_but_never_writes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let saved = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
    let read_only = Options {
        read_only: true,
        warm_keys_save_interval: Duration::from_millis(1),
        ..options()
    };
    let db = Db::open(dir.path(), read_only.clone()).unwrap();
    assert_eq!(after_warming(&db).warm_values_read, 2 * READ as u64);
    let kvs = db.kvs("alpha").unwrap();
    for index in READ..2 * READ {
        kvs.get(key(index)).unwrap().unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    db.close().unwrap();
    assert_eq!(std::fs::read(dir.path().join(FILE_NAME)).unwrap(), saved);

    let fresh = tempfile::tempdir().unwrap();
    Db::open(fresh.path(), options()).unwrap().close().unwrap();
    let db = Db::open(fresh.path(), read_only).unwrap();
    db.close().unwrap();
    assert!(!fresh.path().join(FILE_NAME).exists());
}

#[test]
fn an_open_kvdb_saves_the_file_periodically() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            warm_keys_save_interval: Duration::from_millis(100),
            ..options()
        },
    )
    .unwrap();
    let kvs = db.kvs("alpha").unwrap();
    for index in 0..100 {
        kvs.put(key(index), value("alpha", index)).unwrap();
        kvs.get(key(index)).unwrap().unwrap();
    }
    let path = dir.path().join(FILE_NAME);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(Instant::now() < deadline, "never saved while open");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Simulate a crash: the saved file is what the next open warms from.
    let saved = std::fs::read(&path).unwrap();
    db.close().unwrap();
    std::fs::write(&path, saved).unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(after_warming(&db).warm_values_read, 100);
    db.close().unwrap();
}
