//! Goal: `Db::backup` copies a KVDB as it was at one instant, while it is written, into a KVDB
//! of its own that opens with every key; it never copies damage silently and never leaves
//! something that opens as a KVDB when it fails.
//! Method: back up KVDBs in every state (staging, dropped KVS, deletes, unflushed appends,
//! read-only, under concurrent writes and cleaning), open the copies and compare them with a
//! model or check that they hold a prefix of the writes; damage the source, fail the
//! destination device, and require a named error and no KVDB at the destination.

mod common;

use common::faults::FaultyStorage;
use common::small_options;
use shaledb::{Db, ErrorKind, KvsOptions, MediaPolicy, Options};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn contents(db: &Db) -> Model {
    let mut model = Model::new();
    for name in db.list_kvs().unwrap() {
        let kvs = db.kvs(&name).unwrap();
        let entries = kvs
            .iter()
            .map(|item| {
                let (key, value) = item.unwrap();
                (key.to_vec(), value.to_vec())
            })
            .collect();
        model.insert(name, entries);
    }
    model
}

fn with_staging(home: &Path) -> Options {
    Options {
        staging_dir: Some(home.join("staging")),
        staging_bytes_max: 8 << 20,
        ..small_options()
    }
}

/// Writes to two KVSs (one on staging), deletes some keys and a prefix, drops a third KVS;
/// leaves the last writes unflushed in the open KVDB.
fn write_mixed(db: &Db) {
    let fast = db
        .kvs_with_options(
            "fast",
            KvsOptions {
                media_policy: MediaPolicy::StagingMaxCapacity,
                ..KvsOptions::default()
            },
        )
        .unwrap();
    let slow = db.kvs("slow").unwrap();
    let doomed = db.kvs("doomed").unwrap();
    for index in 0..3000u32 {
        let value = vec![(index % 251) as u8; 700 + (index as usize % 9) * 40];
        fast.put(format!("f{index:05}"), &value).unwrap();
        slow.put(format!("s{}:{index:05}", index % 4), &value)
            .unwrap();
        doomed.put(format!("d{index:05}"), b"gone").unwrap();
    }
    for index in (0..3000u32).step_by(7) {
        fast.delete(format!("f{index:05}")).unwrap();
    }
    slow.prefix_delete("s2").unwrap();
    db.drop_kvs("doomed").unwrap();
    slow.put("last", "in the write buffer").unwrap();
}

#[test]
fn a_backup_is_a_kvdb_of_its_own_with_every_key_as_of_the_backup() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("db");
    let db = Db::open(&home, with_staging(&home)).unwrap();
    write_mixed(&db);
    let expected = contents(&db);
    let report = db.backup(dir.path().join("copy")).unwrap();
    assert_eq!(report.kvs, 2);
    assert!(report.segments >= 2, "{report:?}");
    // Written after the backup: not in it.
    db.kvs("slow").unwrap().put("later", "not copied").unwrap();
    let at_close = contents(&db);
    db.close().unwrap();

    // The copy opens by itself (its media directories inside it), read-only and then
    // normally, with exactly what the source held at the backup, and checks clean.
    let copy = dir.path().join("copy");
    assert!(copy.join("staging").is_dir() && copy.join("capacity").is_dir());
    let read_only = Db::open(
        &copy,
        Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(read_only.recovery_report().checkpoint_loaded);
    assert_eq!(contents(&read_only), expected);
    let checked = read_only.check().unwrap();
    assert!(checked.is_ok(), "{checked:?}");
    drop(read_only);
    let opened = Db::open(&copy, Options::default()).unwrap();
    assert_eq!(contents(&opened), expected);
    let checked = opened.check().unwrap();
    assert!(checked.is_ok(), "{checked:?}");

    // A KVDB of its own: the source opens beside it, and each keeps its own writes.
    let source = Db::open(&home, with_staging(&home)).unwrap();
    opened
        .kvs("fast")
        .unwrap()
        .put("only-in-copy", "x")
        .unwrap();
    assert_eq!(contents(&source), at_close);
    drop(source);
    drop(opened);

    // A read-only KVDB backs up too, writing nothing to the source.
    let before: Vec<_> = walk(&home);
    let source = Db::open(
        &home,
        Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    source.backup(dir.path().join("copy2")).unwrap();
    let source_contents = contents(&source);
    drop(source);
    assert_eq!(walk(&home), before, "a read-only backup changed the source");
    let copy2 = Db::open(dir.path().join("copy2"), Options::default()).unwrap();
    assert_eq!(contents(&copy2), source_contents);
}

/// Every file under `dir` with its bytes, but the LOCK files (which an open creates).
fn walk(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else if path.file_name().is_some_and(|name| name != "LOCK") {
            found.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    found.sort();
    found
}

#[test]
fn a_backup_taken_while_writing_and_cleaning_holds_a_prefix_of_the_writes() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("db");
    let db = Arc::new(
        Db::open(
            &home,
            Options {
                space_target_live_ratio: 0.9,
                ..small_options()
            },
        )
        .unwrap(),
    );
    let (a, b) = (db.kvs("a").unwrap(), db.kvs("b").unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    // One writer: batch `i` puts key i in both KVSs and overwrites a few hot keys (garbage for
    // the cleaner); a copy at any instant holds batches 0..n and nothing else.
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut index = 0u32;
            while !stop.load(Ordering::Relaxed) || index < 2000 {
                let mut batch = db.batch();
                let value = vec![(index % 251) as u8; 600];
                batch.put(&a, format!("k{index:07}"), &value);
                batch.put(&b, format!("k{index:07}"), &value);
                batch.put(&b, format!("hot{}", index % 8), index.to_string());
                db.write(batch).unwrap();
                index += 1;
                if index.is_multiple_of(32) {
                    // Paced, so the copies stay small enough to verify quickly.
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
            index
        })
    };
    let compactor = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut freed = 0;
            while !stop.load(Ordering::Relaxed) {
                freed += db.compact().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            freed
        })
    };
    let mut copies = Vec::new();
    for round in 0..4 {
        std::thread::sleep(std::time::Duration::from_millis(150));
        let copy = dir.path().join(format!("copy{round}"));
        db.backup(&copy).unwrap();
        copies.push(copy);
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    let freed = compactor.join().unwrap();
    assert!(
        freed > 0,
        "the cleaner never freed a segment during the test"
    );
    let mut previous = 0;
    for copy in &copies {
        let opened = Db::open(copy, Options::default()).unwrap();
        let model = contents(&opened);
        let batches = model["a"].len();
        assert!(batches >= previous && batches as u32 <= written);
        previous = batches;
        for (index, (key, value)) in model["a"].iter().enumerate() {
            assert_eq!(
                *key,
                format!("k{index:07}").into_bytes(),
                "a gap in {copy:?}"
            );
            assert_eq!(*value, vec![(index % 251) as u8; 600]);
        }
        let b = &model["b"];
        assert_eq!(b.len(), batches + 8.min(batches), "{copy:?}");
        for hot in 0..8.min(batches) {
            let newest = (0..batches).rev().find(|index| index % 8 == hot).unwrap();
            assert_eq!(
                b[format!("hot{hot}").as_bytes()],
                newest.to_string().into_bytes(),
                "hot key {hot} in {copy:?} is not as of the instant its other keys are"
            );
        }
        assert!(opened.check().unwrap().is_ok());
    }
    assert!(previous > 0);
}

#[test]
fn a_backup_is_made_only_in_a_missing_or_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("db");
    let db = Db::open(&home, small_options()).unwrap();
    db.kvs("t").unwrap().put("k", "v").unwrap();
    let occupied = dir.path().join("occupied");
    std::fs::create_dir(&occupied).unwrap();
    std::fs::write(occupied.join("notes.txt"), "mine").unwrap();
    let error = db.backup(&occupied).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.to_string().contains("not empty"), "{error}");
    let left: Vec<_> = std::fs::read_dir(&occupied).unwrap().collect();
    assert_eq!(left.len(), 1, "the refused backup wrote into the directory");
    // Nor over the KVDB itself.
    assert_eq!(
        db.backup(&home).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    db.backup(&empty).unwrap();
    drop(db);
    let copy = Db::open(&empty, Options::default()).unwrap();
    assert_eq!(copy.kvs("t").unwrap().get("k").unwrap().unwrap(), "v");
}

/// The last segment file in `dir`, and the offset of a byte inside its first record.
fn first_record_byte_of_last_segment(dir: &Path) -> (std::path::PathBuf, u64) {
    let mut segments: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "log"))
        .collect();
    segments.sort();
    (
        segments.pop().unwrap(),
        shaledb::limits::PAGE_BYTES as u64 + 40,
    )
}

#[test]
fn damage_in_the_source_fails_the_backup_naming_it_and_leaves_no_kvdb() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("db");
    let db = Db::open(&home, small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    for index in 0..200u32 {
        kvs.put(format!("k{index:04}"), vec![7u8; 500]).unwrap();
    }
    db.close().unwrap();
    // Damage a sealed segment the checkpoint covers, so the open does not read it.
    let (segment, offset) = first_record_byte_of_last_segment(&home.join("capacity"));
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[offset as usize] ^= 0x40;
    std::fs::write(&segment, bytes).unwrap();
    let db = Db::open(&home, small_options()).unwrap();
    let copy = dir.path().join("copy");
    let error = db.backup(&copy).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Corruption, "{error}");
    assert!(
        error.to_string().contains(&segment.display().to_string()),
        "the error does not name the damaged source file: {error}"
    );
    drop(db);
    // What the failed backup left is no KVDB: an open refuses it, creating nothing.
    let opened = Db::open(&copy, Options::default());
    assert!(opened.is_err(), "a failed backup opened as a KVDB");
}

#[test]
fn a_failing_destination_fails_the_backup_and_leaves_the_source_whole() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("db");
    let faults = FaultyStorage::default();
    let options = Options {
        storage: Some(faults.as_storage()),
        ..small_options()
    };
    let db = Db::open(&home, options.clone()).unwrap();
    let kvs = db.kvs("t").unwrap();
    for index in 0..300u32 {
        kvs.put(format!("k{index:04}"), vec![3u8; 700]).unwrap();
    }
    db.sync().unwrap();
    let expected = contents(&db);

    // The destination device loses a bit: the copy does not read back, the source does.
    let copy = dir.path().join("copy");
    faults.change(|plan| {
        plan.flip_on_read = Some((
            format!("copy/capacity/{}", segment_names(&home.join("capacity"))[0]),
            shaledb::limits::PAGE_BYTES as u64 + 8,
        ))
    });
    let error = db.backup(&copy).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Io, "{error}");
    assert!(error.to_string().contains("does not read back"), "{error}");
    assert!(Db::open(&copy, Options::default()).is_err());
    faults.change(|plan| plan.flip_on_read = None);

    // The destination is full.
    let copy = dir.path().join("copy-full");
    faults.change(|plan| plan.write_error = Some(28)); // ENOSPC
    let error = db.backup(&copy).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NoSpace, "{error}");
    faults.change(|plan| plan.write_error = None);
    assert!(Db::open(&copy, Options::default()).is_err());

    // The source is untouched and keeps working; a later backup succeeds.
    kvs.put("after", "x").unwrap();
    let copy = dir.path().join("copy-ok");
    db.backup(&copy).unwrap();
    drop(db);
    let source = Db::open(&home, small_options()).unwrap();
    let mut with_after = expected.clone();
    with_after
        .get_mut("t")
        .unwrap()
        .insert(b"after".to_vec(), b"x".to_vec());
    assert_eq!(contents(&source), with_after);
    assert_eq!(
        contents(&Db::open(&copy, Options::default()).unwrap()),
        with_after
    );
}

fn segment_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".log"))
        .collect();
    names.sort();
    names
}
