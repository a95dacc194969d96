//! Goal: media classes work as documented: KVSs write to the class their policy names, the
//! cleaner moves staging survivors down to capacity, an overflowing staging class spills its
//! oldest data down instead of refusing writes, checkpoints go to the fastest class, and the
//! classes a KVDB was created with are remembered.
//! Method: small segments and budgets, the per-class counters and segment tables from stats(),
//! and every key read back, before and after reopen.

mod common;

use shaledb::{Db, ErrorKind, KvsOptions, MediaPolicy, Options};
use std::path::Path;
use std::time::{Duration, Instant};

fn options(dir: &Path, staging_segments: u64) -> Options {
    let base = common::small_options();
    Options {
        staging_dir: Some(dir.join("fast")),
        staging_bytes_max: staging_segments * base.segment_bytes,
        ..base
    }
}

fn policy(policy: MediaPolicy) -> KvsOptions {
    KvsOptions {
        media_policy: policy,
        ..KvsOptions::default()
    }
}

fn class_bytes(db: &Db, class: &str) -> (u64, u64) {
    let stats = db.stats();
    let media = stats
        .media
        .iter()
        .find(|media| media.class == class)
        .unwrap();
    (media.segment_bytes, media.bytes_written_by_clients)
}

#[test]
fn staging_max_capacity_writes_to_staging_and_moves_survivors_down() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(dir.path(), 64)).unwrap();
    let hot = db
        .kvs_with_options("hot", policy(MediaPolicy::StagingMaxCapacity))
        .unwrap();
    let cold = db.kvs("cold").unwrap();
    let capacity_client_before = class_bytes(&db, "capacity").1; // segment headers written at open
    for round in 0..2u8 {
        // Hot data is overwritten: the second round leaves dead versions in staging.
        for key in 0..300u32 {
            hot.put(key.to_be_bytes(), vec![round; 3000]).unwrap();
        }
    }
    db.sync().unwrap();
    let (staging_before, staging_client_writes) = class_bytes(&db, "staging");
    assert!(
        staging_client_writes >= 600 * 3000,
        "hot writes went to staging"
    );
    assert_eq!(
        class_bytes(&db, "capacity").1,
        capacity_client_before,
        "nothing of hot went to capacity yet"
    );
    for key in 0..100u32 {
        cold.put(key.to_be_bytes(), vec![2u8; 3000]).unwrap();
    }
    db.sync().unwrap(); // counters count bytes that reached the device
    assert!(
        class_bytes(&db, "capacity").1 >= 100 * 3000,
        "cold writes went to capacity"
    );
    db.compact().unwrap();
    let stats = db.stats();
    let staging = stats
        .media
        .iter()
        .find(|media| media.class == "staging")
        .unwrap();
    let capacity = stats
        .media
        .iter()
        .find(|media| media.class == "capacity")
        .unwrap();
    assert!(
        staging.segment_bytes < staging_before / 4,
        "survivors left staging: {staging:?}"
    );
    assert!(
        capacity.bytes_written_by_cleaning >= 300 * 3000,
        "and were written to capacity"
    );
    for key in 0..300u32 {
        assert_eq!(
            hot.get(key.to_be_bytes()).unwrap().unwrap()[..],
            [1u8; 3000][..]
        );
    }
    assert!(db.check().unwrap().is_ok());
    assert!(
        dir.path().join("fast/checkpoint.ckpt").exists() || db.stats().checkpoints_written == 0
    );
    db.close().unwrap();
    assert!(
        dir.path().join("fast/checkpoint.ckpt").exists(),
        "checkpoints go to the fastest class"
    );
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let hot = db.kvs("hot").unwrap();
    assert_eq!(hot.options().media_policy, MediaPolicy::StagingMaxCapacity);
    assert_eq!(hot.len().unwrap(), 300);
    assert_eq!(
        db.kvs("cold")
            .unwrap()
            .get(7u32.to_be_bytes())
            .unwrap()
            .unwrap()[0],
        2
    );
}

#[test]
fn overflowing_staging_spills_its_oldest_data_down() {
    let dir = tempfile::tempdir().unwrap();
    let budget_segments = 4;
    let db = Db::open(dir.path(), options(dir.path(), budget_segments)).unwrap();
    let kvs = db
        .kvs_with_options("fast", policy(MediaPolicy::StagingOnly))
        .unwrap();
    let value = vec![5u8; 4000];
    for key in 0..6000u32 {
        kvs.put(key.to_be_bytes(), &value).unwrap(); // ~24 MB into an 8 MiB staging budget
    }
    let budget = budget_segments * common::small_options().segment_bytes;
    let deadline = Instant::now() + Duration::from_secs(20);
    // Past the budget the cleaner keeps moving the oldest sealed segment down; the active
    // segment and one in flight may sit on top of it.
    let slack = 2 * common::small_options().segment_bytes;
    while class_bytes(&db, "staging").0 > budget + slack && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (staging_bytes, _) = class_bytes(&db, "staging");
    assert!(
        staging_bytes <= budget + slack,
        "staging holds {staging_bytes} bytes, budget {budget}"
    );
    assert!(
        class_bytes(&db, "capacity").0 > 8 << 20,
        "the spilled data is on capacity"
    );
    for key in (0..6000u32).step_by(7) {
        assert_eq!(
            kvs.get(key.to_be_bytes()).unwrap().as_deref(),
            Some(&value[..]),
            "key {key}"
        );
    }
    assert!(db.check().unwrap().is_ok());
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.kvs("fast").unwrap().len().unwrap(), 6000);
}

#[test]
fn media_classes_are_fixed_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    let plain = Db::open(dir.path().join("plain"), common::small_options()).unwrap();
    let error = plain
        .kvs_with_options("x", policy(MediaPolicy::StagingOnly))
        .err()
        .unwrap();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    drop(plain);
    let home = dir.path().join("tiered");
    Db::open(&home, options(&home, 8)).unwrap().close().unwrap();
    let other = Options {
        staging_dir: Some(dir.path().join("elsewhere")),
        ..options(&home, 8)
    };
    let error = Db::open(&home, other)
        .err()
        .expect("a different staging directory is refused");
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.to_string().contains("fixed at creation"), "{error}");
    let reopened = Db::open(&home, common::small_options()).unwrap();
    reopened
        .kvs_with_options("x", policy(MediaPolicy::StagingOnly))
        .unwrap()
        .put("k", "v")
        .unwrap();
    assert!(
        class_bytes(&reopened, "staging").1 > 0,
        "the remembered staging class is used"
    );
}
