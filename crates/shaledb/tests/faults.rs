//! Goal: failures of the device are handled as the durability contract says. Out of space on a
//! write is recoverable: writes fail with `NoSpace` while the disk is full and resume by
//! themselves when space returns, losing nothing acknowledged. Any other failed write, and any
//! failed `fdatasync`, poisons the KVDB (a retried fsync can report success for lost data) and
//! loses nothing acknowledged. A bit flipped on its way from the device is `Corruption`, never
//! data.
//! Method: a storage beneath the engine that fails on demand (tests/common/faults.rs); after
//! each scenario the KVDB is reopened on the real storage and every acknowledged key is read.

mod common;

use common::faults::FaultyStorage;
use common::small_options;
use shaledb::{Db, Durability, ErrorKind, Options};
use std::path::Path;
use std::time::{Duration, Instant};

fn options(storage: &FaultyStorage) -> Options {
    Options {
        durability: Durability::Sync,
        storage: Some(storage.as_storage()),
        ..small_options()
    }
}

fn value(index: u32) -> Vec<u8> {
    vec![(index % 251) as u8; 3000]
}

/// Every key in `acknowledged` reads back, after a reopen on the real storage.
fn assert_acknowledged_survive(dir: &Path, acknowledged: &[u32]) {
    let db = Db::open(dir, small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    for &index in acknowledged {
        let key = format!("key{index:05}");
        assert_eq!(
            kvs.get(&key).unwrap().as_deref(),
            Some(&value(index)[..]),
            "acknowledged {key} was lost"
        );
    }
    assert!(db.check().unwrap().is_ok(), "{:?}", db.check().unwrap());
}

#[test]
fn out_of_space_fails_writes_until_space_returns_then_they_resume_by_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::default();
    let mut acknowledged = Vec::new();
    {
        let db = Db::open(dir.path(), options(&storage)).unwrap();
        let kvs = db.kvs("t").unwrap();
        for index in 0..200 {
            kvs.put(format!("key{index:05}"), value(index)).unwrap();
            acknowledged.push(index);
        }
        storage.change(|plan| plan.write_error = Some(libc::ENOSPC));
        for index in 200..210 {
            let error = kvs.put(format!("key{index:05}"), value(index)).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::NoSpace, "{error}");
        }
        assert!(storage.plan.lock().unwrap().failed_writes >= 1);
        // Reads go on meanwhile.
        assert_eq!(kvs.get("key00007").unwrap().as_deref(), Some(&value(7)[..]));
        storage.change(|plan| plan.write_error = None);
        let started = Instant::now();
        let index = 210;
        loop {
            match kvs.put(format!("key{index:05}"), value(index)) {
                Ok(()) => break,
                Err(error) if error.kind() == ErrorKind::NoSpace => {
                    assert!(
                        started.elapsed() < Duration::from_secs(5),
                        "writes never resumed"
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(error) => panic!("not recoverable: {error}"),
            }
        }
        acknowledged.push(index);
        for index in 211..400 {
            kvs.put(format!("key{index:05}"), value(index)).unwrap();
            acknowledged.push(index);
        }
        db.close().unwrap();
    }
    assert_acknowledged_survive(dir.path(), &acknowledged);
}

#[test]
fn a_failed_write_or_sync_poisons_and_loses_nothing_acknowledged() {
    type Break = fn(&mut common::faults::Plan);
    let failures: [(&str, Break); 4] = [
        ("EIO on write", |plan| plan.write_error = Some(libc::EIO)),
        ("torn write", |plan| {
            plan.write_error = Some(libc::EIO);
            plan.torn_writes = true;
        }),
        ("EIO on fdatasync", |plan| plan.sync_error = Some(libc::EIO)),
        ("ENOSPC on fdatasync", |plan| {
            plan.sync_error = Some(libc::ENOSPC)
        }),
    ];
    for (what, failure) in failures {
        let dir = tempfile::tempdir().unwrap();
        let storage = FaultyStorage::default();
        let mut acknowledged = Vec::new();
        {
            let db = Db::open(dir.path(), options(&storage)).unwrap();
            let kvs = db.kvs("t").unwrap();
            for index in 0..100 {
                kvs.put(format!("key{index:05}"), value(index)).unwrap();
                acknowledged.push(index);
            }
            storage.change(failure);
            assert!(
                kvs.put("key00100", value(100)).is_err(),
                "{what}: acknowledged"
            );
            storage.change(|plan| *plan = Default::default());
            let after = kvs.put("key00101", value(101)).unwrap_err();
            assert_eq!(after.kind(), ErrorKind::Poisoned, "{what}: {after}");
            assert!(
                db.close().is_err(),
                "{what}: a poisoned KVDB closes with an error"
            );
        }
        assert_acknowledged_survive(dir.path(), &acknowledged);
    }
}

#[test]
fn a_bit_flipped_on_read_is_corruption_never_data() {
    let dir = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::default();
    {
        let db = Db::open(dir.path(), options(&storage)).unwrap();
        let kvs = db.kvs("t").unwrap();
        for index in 0..50 {
            kvs.put(format!("key{index:05}"), value(index)).unwrap();
        }
        db.close().unwrap();
    }
    let first_segment = std::fs::read_dir(dir.path().join("capacity"))
        .unwrap()
        .map(|item| item.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "log"))
        .min()
        .unwrap();
    let name = first_segment
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // The first record starts right after the header page: flip a byte of its value.
    storage.change(|plan| plan.flip_on_read = Some((name.clone(), 4096 + 24 + 8 + 100)));
    let db = Db::open(dir.path(), options(&storage)).unwrap();
    let kvs = db.kvs("t").unwrap();
    let error = kvs.get("key00000").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert!(error.to_string().contains(&name), "{error}");
    assert!(storage.plan.lock().unwrap().flipped_reads >= 1);
    for index in 1..50 {
        assert_eq!(
            kvs.get(format!("key{index:05}")).unwrap().as_deref(),
            Some(&value(index)[..])
        );
    }
}

/// `Db::write_unsynced` applies a batch and leaves its durability to `Db::wait_synced`, which a
/// caller must pass before it acknowledges the write (the server's syncer does so for whole
/// pipelines): a failed sync there is an error, and the KVDB is poisoned, as `write` would be.
#[test]
fn an_unsynced_write_is_acknowledged_only_after_its_wait_and_a_failed_wait_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::default();
    let mut acknowledged = Vec::new();
    {
        let db = Db::open(dir.path(), options(&storage)).unwrap();
        let kvs = db.kvs("t").unwrap();
        let mut pending = shaledb::SyncPoint::default();
        for index in 0..20 {
            let mut batch = db.batch();
            batch.put(&kvs, format!("key{index:05}"), value(index));
            let point = db.write_unsynced(batch).unwrap();
            assert!(!point.is_empty(), "under sync durability a write waits");
            pending.merge(point);
        }
        // One wait covers every write before it.
        db.wait_synced(pending).unwrap();
        acknowledged.extend(0..20);

        storage.change(|plan| plan.sync_error = Some(libc::EIO));
        let mut batch = db.batch();
        batch.put(&kvs, "key00020", value(20));
        let point = db.write_unsynced(batch).unwrap();
        let error = db.wait_synced(point).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Io, "{error}");
        storage.change(|plan| *plan = Default::default());
        let mut batch = db.batch();
        batch.put(&kvs, "key00021", value(21));
        let after = db.write_unsynced(batch).unwrap_err();
        assert_eq!(after.kind(), ErrorKind::Poisoned, "{after}");
        assert!(db.close().is_err());
    }
    assert_acknowledged_survive(dir.path(), &acknowledged);

    // Outside sync durability nothing waits.
    let other = tempfile::tempdir().unwrap();
    let db = Db::open(other.path(), small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    let mut batch = db.batch();
    batch.put(&kvs, "key", "value");
    assert!(db.write_unsynced(batch).unwrap().is_empty());
}
