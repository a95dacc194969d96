//! Goal: commits that apply to different index partitions in parallel stay atomic and ordered
//! for every reader: a snapshot or cursor sees each batch whole or not at all, never a later
//! batch without an earlier one, and what a plain read saw is in every later snapshot.
//! Method: writers commit batches that set a group of keys (spread over the partitions) to one
//! generation, while readers check groups through snapshots, cursors and plain gets; the
//! cleaner and checkpoints run meanwhile (tiny segments); everything is checked after reopen.

mod common;

use common::small_options;
use shaledb::{Db, Kvs, KvsOptions};
use std::sync::atomic::{AtomicBool, Ordering};

const WRITERS: usize = 4;
const GROUP_KEYS: usize = 12;
const GENERATIONS: u64 = 4000;

fn key(writer: usize, member: usize) -> String {
    format!("w{writer}-m{member:02}")
}

fn generation(value: &[u8]) -> u64 {
    u64::from_le_bytes(value[..8].try_into().unwrap())
}

fn value(generation: u64, member: usize) -> Vec<u8> {
    let mut value = generation.to_le_bytes().to_vec();
    value.resize(200 + member * 37, member as u8);
    value
}

/// Each writer's group generation as `read(writer, member)` gives it, checking that the whole
/// group agrees.
fn group_generations(read: impl Fn(&str) -> Option<Vec<u8>>) -> Vec<u64> {
    (0..WRITERS)
        .map(|writer| {
            let seen: Vec<u64> = (0..GROUP_KEYS)
                .map(|member| read(&key(writer, member)).map_or(0, |found| generation(&found)))
                .collect();
            assert!(
                seen.iter().all(|&each| each == seen[0]),
                "writer {writer}'s batch seen in part: {seen:?}"
            );
            seen[0]
        })
        .collect()
}

fn write_generations(db: &Db, kvs: &Kvs, writer: usize) {
    for generation in 1..=GENERATIONS {
        let mut batch = db.batch();
        for member in 0..GROUP_KEYS {
            batch.put(kvs, key(writer, member), value(generation, member));
        }
        db.write(batch).unwrap();
    }
}

#[test]
fn batches_applied_in_parallel_are_seen_whole_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("groups").unwrap();
    let writing = AtomicBool::new(true);
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let (db, kvs) = (&db, &kvs);
                scope.spawn(move || write_generations(db, kvs, writer))
            })
            .collect();
        // Snapshot readers: groups whole, and never older than a previous snapshot saw.
        for _ in 0..2 {
            let (db, kvs, writing) = (&db, &kvs, &writing);
            scope.spawn(move || {
                let mut last = vec![0; WRITERS];
                while writing.load(Ordering::Relaxed) {
                    let snapshot = db.snapshot().unwrap();
                    let now = group_generations(|key| {
                        snapshot.get(kvs, key).unwrap().map(|value| value.to_vec())
                    });
                    for (writer, (&before, &after)) in last.iter().zip(&now).enumerate() {
                        assert!(
                            after >= before,
                            "writer {writer} went back: {before} -> {after}"
                        );
                    }
                    last = now;
                }
            });
        }
        // A cursor reader: each group whole within one scan.
        {
            let (kvs, writing) = (&kvs, &writing);
            scope.spawn(move || {
                while writing.load(Ordering::Relaxed) {
                    let scanned: std::collections::HashMap<String, Vec<u8>> = kvs
                        .iter()
                        .map(|item| {
                            let (key, value) = item.unwrap();
                            (String::from_utf8(key.to_vec()).unwrap(), value.to_vec())
                        })
                        .collect();
                    group_generations(|key| scanned.get(key).cloned());
                }
            });
        }
        // A plain read followed by a snapshot: what the read saw, the snapshot holds.
        {
            let (db, kvs, writing) = (&db, &kvs, &writing);
            scope.spawn(move || {
                while writing.load(Ordering::Relaxed) {
                    for writer in 0..WRITERS {
                        let read = kvs
                            .get(key(writer, 0))
                            .unwrap()
                            .map_or(0, |v| generation(&v));
                        let snapshot = db.snapshot().unwrap();
                        let held = snapshot
                            .get(kvs, key(writer, GROUP_KEYS - 1))
                            .unwrap()
                            .map_or(0, |v| generation(&v));
                        assert!(held >= read, "read {read}, then a snapshot held {held}");
                    }
                }
            });
        }
        for writer in writers {
            writer.join().unwrap();
        }
        writing.store(false, Ordering::Relaxed);
    });
    let finished = |db: &Db| {
        let kvs = db.kvs("groups").unwrap();
        let generations = group_generations(|key| kvs.get(key).unwrap().map(|v| v.to_vec()));
        assert_eq!(generations, vec![GENERATIONS; WRITERS]);
        assert_eq!(kvs.len().unwrap(), WRITERS * GROUP_KEYS);
    };
    finished(&db);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report:?}");
    db.close().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    finished(&db);
}

/// A prefix delete locks every partition of its KVS: racing puts under that prefix land
/// either before it (and are deleted) or after (and stay), whole batch by whole batch.
#[test]
fn prefix_deletes_racing_batches_leave_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let options = KvsOptions {
        prefix_len: 2,
        ..KvsOptions::default()
    };
    let kvs = db.kvs_with_options("prefixed", options).unwrap();
    std::thread::scope(|scope| {
        let (db, kvs) = (&db, &kvs);
        scope.spawn(move || {
            for generation in 1..=GENERATIONS {
                let mut batch = db.batch();
                for member in 0..GROUP_KEYS {
                    batch.put(kvs, format!("p0{member:02}"), value(generation, member));
                }
                db.write(batch).unwrap();
            }
        });
        scope.spawn(move || {
            for _ in 0..200 {
                kvs.prefix_delete("p0").unwrap();
                let snapshot = db.snapshot().unwrap();
                let members: Vec<u64> = snapshot
                    .prefix(kvs, "p0")
                    .map(|item| generation(&item.unwrap().1))
                    .collect();
                assert!(
                    members.is_empty() || members.len() == GROUP_KEYS,
                    "a batch seen in part after a prefix delete: {members:?}"
                );
                assert!(members.iter().all(|&each| each == members[0]));
            }
        });
    });
    db.close().unwrap();
}

/// Versions kept for snapshots are freed when the last snapshot that sees them goes, however
/// its release interleaves with the commits that kept them: once every snapshot is released,
/// the index points at one record per key again.
#[test]
fn versions_kept_for_snapshots_are_freed_once_released_while_writers_race() {
    const KEYS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("hot").unwrap();
    let write_all = |generation: u64| {
        for key in 0..KEYS {
            kvs.put(format!("key{key}"), generation.to_be_bytes())
                .unwrap();
        }
    };
    write_all(0);
    let one_version_each = db.stats().live_bytes;
    // Deterministic first: a snapshot keeps the version it sees, and frees it when dropped.
    let snapshot = db.snapshot().unwrap();
    write_all(1);
    assert!(db.stats().live_bytes > one_version_each);
    drop(snapshot);
    assert_eq!(db.stats().live_bytes, one_version_each);
    // Then raced: writers overwrite while readers take and drop snapshots and cursors.
    let writing = AtomicBool::new(true);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while writing.load(Ordering::Relaxed) {
                    let snapshot = db.snapshot().unwrap();
                    assert_eq!(
                        snapshot.get(&kvs, "key0").unwrap().map(|v| v.len()),
                        Some(8)
                    );
                    drop(snapshot);
                    assert_eq!(kvs.range::<&[u8], _>(..).count(), KEYS);
                }
            });
        }
        for generation in 2..20_000 {
            write_all(generation);
        }
        writing.store(false, Ordering::Relaxed);
    });
    assert_eq!(db.stats().snapshots_open, 0);
    assert_eq!(db.stats().live_bytes, one_version_each);
}
