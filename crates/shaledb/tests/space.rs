//! Goal: a full space budget slows writers first, then refuses writes with a clear NoSpace error,
//! loses nothing acknowledged and leaves the KVDB usable.
//! Method: a 16 MiB budget with small segments, filled with unique live data the cleaner cannot
//! free; then every acknowledged key is read back, before and after reopening with more room.

mod common;

use shaledb::{Db, ErrorKind, Options};

fn options(budget_mib: u64) -> Options {
    Options {
        space_bytes_max: Some(budget_mib << 20),
        reserve_segments: 2,
        ..common::small_options()
    }
}

#[test]
fn full_budget_is_a_clear_error_and_keeps_acknowledged_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(16)).unwrap();
    let kvs = db.kvs("t").unwrap();
    let value = |key: u32| vec![(key % 251) as u8; 4000];
    let mut acknowledged = 0u32;
    let error = loop {
        match kvs.put(acknowledged.to_be_bytes(), value(acknowledged)) {
            Ok(()) => acknowledged += 1,
            Err(error) => break error,
        }
        assert!(
            acknowledged < 10_000,
            "16 MiB cannot hold 40 MB of live data"
        );
    };
    assert_eq!(error.kind(), ErrorKind::NoSpace, "{error}");
    assert!(error.to_string().contains("does not fit"), "{error}");
    assert!(
        acknowledged > 2000,
        "most of the budget was usable: {acknowledged} writes"
    );
    let stats = db.stats();
    assert!(
        stats.throttled_secs > 0.0,
        "writers were slowed before the error: {stats:?}"
    );
    assert!(stats.capacity_used_bytes <= 16 << 20);
    for key in (0..acknowledged).step_by(13) {
        assert_eq!(
            kvs.get(key.to_be_bytes()).unwrap(),
            Some(value(key).into()),
            "key {key}"
        );
    }
    assert!(kvs.get(b"not there").unwrap().is_none(), "reads still work");
    db.close().unwrap();
    let db = Db::open(dir.path(), options(64)).unwrap();
    let kvs = db.kvs("t").unwrap();
    assert_eq!(
        kvs.len().unwrap(),
        acknowledged as usize,
        "nothing acknowledged was lost"
    );
    kvs.put(b"more room", b"now fits").unwrap();
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn a_full_budget_still_takes_deletes_and_gets_the_room_back() {
    // Deletes free space, so a KVDB whose writes are refused must still take them: they use a
    // headroom past the limit, and once the cleaner has freed what they deleted, writes fit again.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(16)).unwrap();
    let kvs = db.kvs("t").unwrap();
    let mut stored = 0u32;
    let refusal = loop {
        match kvs.put(stored.to_be_bytes(), vec![7u8; 4000]) {
            Ok(()) => stored += 1,
            Err(error) => break error,
        }
        assert!(stored < 10_000, "16 MiB cannot hold 40 MB of live data");
    };
    assert_eq!(refusal.kind(), ErrorKind::NoSpace, "{refusal}");
    for first in (0..stored).step_by(100) {
        let mut batch = shaledb::WriteBatch::new();
        for key in first..(first + 100).min(stored) {
            batch.delete(&kvs, key.to_be_bytes());
        }
        db.write(batch)
            .unwrap_or_else(|error| panic!("deleting from key {first} of a full KVDB: {error}"));
    }
    assert_eq!(kvs.len().unwrap(), 0);
    let started = std::time::Instant::now();
    while let Err(error) = kvs.put(b"after", vec![8u8; 4000]) {
        assert_eq!(error.kind(), ErrorKind::NoSpace, "{error}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the cleaner did not free the deleted values' space in 30 s: {error}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(kvs.get(b"after").unwrap(), Some(vec![8u8; 4000].into()));
    assert!(db.check().unwrap().is_ok());
}
