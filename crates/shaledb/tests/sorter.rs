//! The sorter: key ranges that scans find scattered are rewritten in key order, so later scans
//! of them need few device reads; nothing is lost or changed doing so, under concurrent
//! writes, across reopen and across `kill -9`; its queue is bounded.

mod common;

use shaledb::{Db, Durability, ErrorKind, Kvs, KvsOptions, MediaPolicy, Options};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

const KEYS: u32 = 3000;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("{i:06}-{round:04}-").repeat(80).into_bytes()
}

/// Uncached, with the background cleaner off, so every scan reads the device and only the
/// sorter and `compact` move records.
fn options() -> Options {
    Options {
        cache_bytes: 0,
        cleaner: false,
        ..common::small_options()
    }
}

/// Every key in an order unrelated to key order, as YCSB's hashed inserts are.
fn scrambled() -> impl Iterator<Item = u32> {
    (0..KEYS).map(|i| (i * 7919) % KEYS)
}

fn scan_reads(db: &Db) -> u64 {
    db.stats()
        .media
        .iter()
        .map(|media| media.reads_by_scans)
        .sum()
}

/// Scans `count` keys from key `from`, checks them against `expected`, and returns the device
/// reads the scan made.
fn scan_checked(
    db: &Db,
    kvs: &Kvs,
    from: u32,
    count: usize,
    expected: impl Fn(u32) -> Vec<u8>,
) -> u64 {
    let before = scan_reads(db);
    let items: Vec<_> = kvs
        .range(key(from)..)
        .will_take(count)
        .take(count)
        .map(Result::unwrap)
        .collect();
    assert_eq!(items.len(), count);
    for (offset, (got_key, got_value)) in items.iter().enumerate() {
        let i = from + offset as u32;
        assert_eq!(got_key[..], key(i)[..]);
        assert!(got_value[..] == expected(i)[..], "value of key {i}");
    }
    scan_reads(db) - before
}

fn assert_checks_clean(db: &Db) {
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

fn load(kvs: &Kvs) {
    for i in scrambled() {
        kvs.put(key(i), value(i, 0)).unwrap();
    }
}

/// The KVDB at `path` with KVS "t" loaded, its segments sealed by `compact` (which finds
/// nothing scattered yet), so the sorter may move any of its records.
fn open_loaded(path: &Path, options: Options) -> (Db, Kvs) {
    let db = Db::open(path, options).unwrap();
    let kvs = db.kvs("t").unwrap();
    load(&kvs);
    db.compact().unwrap();
    (db, kvs)
}

#[test]
fn scattered_ranges_are_rewritten_in_key_order_and_then_read_with_few_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (db, kvs) = open_loaded(dir.path(), options());
    assert_eq!(db.stats().sorted_ranges, 0);

    let scattered = scan_checked(&db, &kvs, 1000, 64, |i| value(i, 0));
    assert!(
        scattered >= 32,
        "64 scrambled records took {scattered} reads"
    );
    db.compact().unwrap(); // sorts what is queued
    let stats = db.stats();
    assert!(stats.sorted_ranges >= 1, "{stats:?}");
    assert!(stats.sort_bytes_copied >= 64 * 1000, "{stats:?}");

    let sorted = scan_checked(&db, &kvs, 1000, 64, |i| value(i, 0));
    assert!(
        sorted <= 3,
        "64 sorted records took {sorted} reads (before: {scattered})"
    );
    let inside = scan_checked(&db, &kvs, 1400, 50, |i| value(i, 0));
    assert!(
        inside <= 3,
        "a scan inside the sorted run took {inside} reads"
    );
    // A range read contiguously is not offered again.
    db.compact().unwrap();
    assert_eq!(db.stats().sorted_ranges, stats.sorted_ranges);

    // A range that runs into the sorted one is sorted only up to it: about 500 records of
    // ~1 KB from key 500, not the 1 MiB a run may hold.
    scan_checked(&db, &kvs, 500, 64, |i| value(i, 0));
    db.compact().unwrap();
    let copied = db.stats().sort_bytes_copied - stats.sort_bytes_copied;
    assert!(
        (400_000..700_000).contains(&copied),
        "{copied} bytes copied sorting keys 500..1000"
    );
    let joined = scan_checked(&db, &kvs, 500, 1000, |i| value(i, 0));
    assert!(joined <= 20, "1000 sorted records took {joined} reads");

    for i in 0..KEYS {
        assert_eq!(kvs.get(key(i)).unwrap().unwrap()[..], value(i, 0)[..]);
    }
    assert_checks_clean(&db);
    drop(kvs);
    db.close().unwrap();

    let db = Db::open(dir.path(), options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    assert_eq!(kvs.len().unwrap(), KEYS as usize);
    assert!(scan_checked(&db, &kvs, 1000, 64, |i| value(i, 0)) <= 3);
    scan_checked(&db, &kvs, 0, KEYS as usize, |i| value(i, 0));
    assert_checks_clean(&db);
}

#[test]
fn a_staging_only_kvs_is_sorted_on_staging_and_a_capacity_one_on_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            staging_dir: Some(dir.path().join("staging")),
            ..options()
        },
    )
    .unwrap();
    let fast = db
        .kvs_with_options(
            "fast",
            KvsOptions {
                media_policy: MediaPolicy::StagingOnly,
                ..KvsOptions::default()
            },
        )
        .unwrap();
    let slow = db.kvs("slow").unwrap();
    let cleaning_written = |db: &Db| -> Vec<u64> {
        let media = db.stats().media;
        media
            .iter()
            .map(|class| class.bytes_written_by_cleaning)
            .collect()
    };
    for (kvs, moved_to) in [(&fast, "staging"), (&slow, "capacity")] {
        load(kvs);
        db.compact().unwrap();
        let before = cleaning_written(&db);
        scan_checked(&db, kvs, 1000, 64, |i| value(i, 0));
        db.compact().unwrap();
        db.sync().unwrap();
        let after = cleaning_written(&db);
        for (class, (was, is)) in db.stats().media.iter().zip(before.iter().zip(&after)) {
            if class.class == moved_to {
                assert!(is - was >= 64 * 1000, "{moved_to}: {was} -> {is}");
            } else {
                assert_eq!(is, was, "nothing sorted onto {}", class.class);
            }
        }
        scan_checked(&db, kvs, 1000, 64, |i| value(i, 0));
    }
}

#[test]
fn sorting_while_keys_are_overwritten_keeps_every_newest_value() {
    let dir = tempfile::tempdir().unwrap();
    let (db, kvs) = open_loaded(dir.path(), options());
    let newest: HashMap<u32, u32> = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut newest = HashMap::new();
            for round in 1..=4 {
                for i in scrambled().filter(|i| (i + round).is_multiple_of(3)) {
                    kvs.put(key(i), value(i, round)).unwrap();
                    newest.insert(i, round);
                }
            }
            newest
        });
        for round in 0..6u32 {
            let from = (round * 431) % (KEYS - 100);
            for item in kvs.range(key(from)..).will_take(100).take(100) {
                item.unwrap();
            }
            db.compact().unwrap();
        }
        writer.join().unwrap()
    });
    db.compact().unwrap();
    let expected = |i: u32| value(i, newest.get(&i).copied().unwrap_or(0));
    scan_checked(&db, &kvs, 0, KEYS as usize, expected);
    assert!(db.stats().sorted_ranges >= 1, "{:?}", db.stats());
    assert_checks_clean(&db);
    drop(kvs);
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    scan_checked(&db, &kvs, 0, KEYS as usize, expected);
}

#[test]
fn the_queue_of_scattered_ranges_is_bounded_and_a_rate_of_zero_sorts_nothing() {
    let too_long = Options {
        sort_queue_ranges: shaledb::limits::SORT_QUEUE_RANGES_MAX + 1,
        ..options()
    };
    let dir = tempfile::tempdir().unwrap();
    let error = Db::open(dir.path(), too_long).err().unwrap();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");

    let one_range = Options {
        sort_queue_ranges: 1,
        ..options()
    };
    let (db, kvs) = open_loaded(dir.path(), one_range);
    // Five scattered scans back to back: the background sorter wakes every 100 ms, so at most
    // one or two of them find room in a queue of one.
    for from in [0, 500, 1000, 1500, 2000] {
        scan_checked(&db, &kvs, from, 32, |i| value(i, 0));
    }
    assert!(db.stats().sort_ranges_dropped >= 3, "{:?}", db.stats());
    drop(kvs);
    db.close().unwrap();

    let off = Options {
        sort_bytes_per_sec: 0,
        ..options()
    };
    let db = Db::open(dir.path(), off).unwrap();
    let kvs = db.kvs("t").unwrap();
    let sorted_before = db.stats().sorted_ranges;
    assert_eq!(sorted_before, 0, "counters are per session");
    // Ranges the last session did not sort are still scattered; with the sorter off they stay so.
    let reads = scan_checked(&db, &kvs, 2500, 64, |i| value(i, 0));
    db.compact().unwrap();
    assert_eq!(db.stats().sorted_ranges, 0);
    assert_eq!(
        db.stats().sort_ranges_dropped,
        0,
        "nothing is queued at all"
    );
    assert_eq!(scan_checked(&db, &kvs, 2500, 64, |i| value(i, 0)), reads);
}

const CHILD_ENV: &str = "SHALEDB_SORTER_CRASH_DIR";

fn crash_options() -> Options {
    Options {
        durability: Durability::Interval(Duration::from_millis(5)),
        ..options()
    }
}

/// The round that last wrote key `i` among rounds `0..=round`: every third key per round.
fn last_write(i: u32, round: u32) -> u32 {
    (1..=round)
        .rev()
        .find(|r| (i + r).is_multiple_of(3))
        .unwrap_or(0)
}

/// Child of the crash test: rounds of overwrites, scattered scans, sorting and cleaning; after
/// each round is durable it prints `ACK round`.
#[test]
fn sorter_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = Db::open(&dir, crash_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    load(&kvs);
    db.sync().unwrap();
    println!("ACK 0");
    for round in 1.. {
        for i in scrambled().filter(|i| (i + round).is_multiple_of(3)) {
            kvs.put(key(i), value(i, round)).unwrap();
        }
        for from in [(round * 613) % (KEYS - 64), (round * 1733) % (KEYS - 64)] {
            for item in kvs.range(key(from)..).will_take(64).take(64) {
                item.unwrap();
            }
        }
        db.compact().unwrap();
        db.sync().unwrap();
        println!("ACK {round}");
    }
}

fn check_after_crash(dir: &Path, acked: u32) {
    let db = Db::open(dir, crash_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    for i in 0..KEYS {
        let got = kvs
            .get(key(i))
            .unwrap()
            .unwrap_or_else(|| panic!("key {i} lost"));
        // The round after the last acknowledged one may have been applied in part.
        let allowed = [last_write(i, acked), last_write(i, acked + 1)];
        assert!(
            allowed.iter().any(|&round| got[..] == value(i, round)[..]),
            "key {i}: not the value of round {allowed:?} (acked {acked})"
        );
    }
    assert_checks_clean(&db);
}

#[test]
fn acknowledged_writes_survive_sigkill_while_the_sorter_moves_records() {
    let mut most_acked = 0;
    for lifetime_ms in [700, 1300, 2100] {
        let dir = tempfile::tempdir().unwrap();
        let acked = common::run_child_then_kill(
            "sorter_crash_child",
            CHILD_ENV,
            dir.path(),
            Duration::from_millis(lifetime_ms),
        );
        if let Some(acked) = acked {
            check_after_crash(dir.path(), acked as u32);
            most_acked = most_acked.max(acked);
        }
    }
    assert!(
        most_acked >= 1,
        "no child got past its load: nothing was tested"
    );
}

#[test]
fn the_background_sorter_keeps_to_its_byte_rate() {
    // 64 KiB/s: a run of up to 1 MiB is ~16 s of the rate, so in the 1.5 s below the sorter
    // may rewrite one run (its first burst) and nothing more.
    let slow = Options {
        sort_bytes_per_sec: 64 << 10,
        ..options()
    };
    let dir = tempfile::tempdir().unwrap();
    let (db, kvs) = open_loaded(dir.path(), slow);
    // Three disjoint scattered ranges, each the start of a run of ~1 MiB.
    for from in [0, 1100, 2200] {
        scan_checked(&db, &kvs, from, 64, |i| value(i, 0));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let stats = db.stats();
    assert!(
        stats.sort_bytes_copied <= (1 << 20) + (16 << 10),
        "{} bytes sorted in 1.5 s at 64 KiB/s: {stats:?}",
        stats.sort_bytes_copied
    );
    // What is waiting is still sorted by compact, whatever the rate.
    db.compact().unwrap();
    assert_eq!(db.stats().sorted_ranges, 3, "{:?}", db.stats());
    scan_checked(&db, &kvs, 0, KEYS as usize, |i| value(i, 0));
}

#[test]
fn a_damaged_record_the_sorter_meets_is_an_error_naming_it_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (db, kvs) = open_loaded(dir.path(), options());
    // The scan offers the range from key 1000; key 1500, which it did not read, is damaged
    // on the device before the sorter reaches it.
    scan_checked(&db, &kvs, 1000, 64, |i| value(i, 0));
    let damaged_key = key(1500);
    let (segment, offset) = common::files::capacity_segments(dir.path())
        .into_iter()
        .find_map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            let at = bytes
                .windows(damaged_key.len())
                .position(|window| window == damaged_key)?;
            Some((path, at as u64))
        })
        .expect("key 1500's record is in a capacity segment");
    let value_byte = offset + damaged_key.len() as u64 + 10;
    common::files::write_at(&segment, value_byte, b"#");

    let error = db.compact().expect_err("the sorter meets the damage");
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    let segment_name = segment.file_name().unwrap().to_string_lossy().into_owned();
    assert!(error.to_string().contains(&segment_name), "{error}");
    // The damaged key is never "not found", and nothing else was lost or changed.
    let get_error = kvs.get(&damaged_key).expect_err("still unreadable");
    assert_eq!(get_error.kind(), ErrorKind::Corruption, "{get_error}");
    for i in (0..KEYS).filter(|&i| i != 1500) {
        assert_eq!(kvs.get(key(i)).unwrap().unwrap()[..], value(i, 0)[..]);
    }
    let report = db.check().unwrap();
    assert!(!report.is_ok(), "check reports the damage: {report:?}");
}
