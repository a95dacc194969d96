//! Goal: the cleaner reclaims space: a steady overwrite workload does not grow the KVDB without
//! bound, deleted data is freed, and tombstones go once nothing older can resurface.
//! Method: overwrite a fixed key set many times over with small segments, then measure bytes
//! on media against live bytes; delete everything and compact.

mod common;

use common::small_options;
use shaledb::{Db, Options};
use std::time::{Duration, Instant};

#[test]
fn steady_overwrites_stay_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let target_space_amplification = 1.0 / small_options().space_target_live_ratio;
    let kvs = db.kvs("t").unwrap();
    let value = vec![9u8; 4000];
    let mut peak_total = 0;
    for round in 0..60 {
        for key in 0..250u32 {
            kvs.put(key.to_be_bytes(), &value).unwrap();
        }
        if round % 10 == 9 {
            std::thread::sleep(Duration::from_millis(250)); // let the background cleaner run
        }
        peak_total = peak_total.max(db.stats().total_bytes);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.stats().space_amplification() > target_space_amplification + 0.5
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = db.stats();
    let written = stats.user_bytes_written;
    assert!(
        written > 50 * stats.live_bytes,
        "the test wrote far more than it keeps"
    );
    assert!(
        stats.cleaner_segments_cleaned > 0,
        "the background cleaner ran"
    );
    // Live ~1 MB; without cleaning the KVDB would hold ~60 MB.
    assert!(peak_total < 16 << 20, "peak {peak_total} bytes on media");
    assert!(
        stats.space_amplification() < target_space_amplification + 2.5,
        "{stats:?}"
    );
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn deleted_data_and_its_tombstones_are_freed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    for key in 0..2000u32 {
        kvs.put(key.to_be_bytes(), vec![1u8; 2000]).unwrap();
    }
    for key in 0..2000u32 {
        kvs.delete(key.to_be_bytes()).unwrap();
    }
    let before = db.stats().total_bytes;
    // Tombstones may go only once a checkpoint covers them; the first pass frees the data.
    db.checkpoint().unwrap();
    db.compact().unwrap();
    db.checkpoint().unwrap();
    db.compact().unwrap();
    let stats = db.stats();
    assert_eq!(stats.live_bytes, 0);
    assert!(stats.cleaner_tombstones_dropped > 0, "{stats:?}");
    assert!(
        stats.total_bytes < before / 4,
        "{} of {before} bytes remain",
        stats.total_bytes
    );
    db.close().unwrap();
    let db = Db::open(dir.path(), common::small_options()).unwrap();
    assert_eq!(db.kvs("t").unwrap().len().unwrap(), 0);
    drop(db);
    std::fs::remove_file(dir.path().join("capacity/checkpoint.ckpt")).unwrap();
    let db = Db::open(dir.path(), common::small_options()).unwrap();
    assert_eq!(
        db.kvs("t").unwrap().len().unwrap(),
        0,
        "nothing resurrects without the checkpoint"
    );
}

/// Found by the issue-16 benchmark: recovery left the segments sealed before a reopen unsealed
/// in memory, so the cleaner never took them and YCSB A after a reopen cleaned its own fresh
/// output instead (86% live victims, 1/6 the throughput).
#[test]
fn segments_sealed_before_a_reopen_are_cleaned_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    for key in 0..2000u32 {
        kvs.put(key.to_be_bytes(), vec![1u8; 2000]).unwrap();
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    for key in 0..2000u32 {
        kvs.put(key.to_be_bytes(), vec![2u8; 2000]).unwrap();
    }
    let before = db.stats();
    assert!(before.segments_by_head[0].segments >= 2, "{before:?}");
    db.compact().unwrap();
    let after = db.stats();
    assert!(
        after.total_bytes < before.total_bytes * 2 / 3,
        "the segments of the first session were not cleaned: {} of {} bytes remain",
        after.total_bytes,
        before.total_bytes
    );
    assert_eq!(
        kvs.get(7u32.to_be_bytes()).unwrap().unwrap(),
        vec![2u8; 2000]
    );
}

/// A KVDB whose live data is small against a segment leaves its dead segments until they are
/// two segments' worth, and cleaning them then copies nothing: every version they held was
/// overwritten meanwhile. Cleaning each segment as soon as it was sealed copied the newest
/// versions, which the next writes killed again.
#[test]
fn a_small_kvdb_cleans_its_segments_once_they_are_dead_through() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_options();
    let segment_bytes = options.segment_bytes;
    let db = Db::open(dir.path(), options).unwrap();
    let kvs = db.kvs("t").unwrap();
    let value = vec![5u8; 4000];
    // ~1 MB live, rewritten whole each round: 2 MB segments hold two rounds.
    let overwrite = |round: u8| {
        for key in 0..250u32 {
            let mut value = value.clone();
            value[0] = round;
            kvs.put(key.to_be_bytes(), value).unwrap();
        }
    };
    for round in 0..3 {
        overwrite(round);
    }
    std::thread::sleep(Duration::from_millis(400)); // four maintenance rounds
    let early = db.stats();
    assert!(
        early.total_bytes - early.live_bytes < 2 * segment_bytes,
        "{early:?}"
    );
    assert_eq!(
        early.cleaner_segments_cleaned, 0,
        "less than two segments are dead, yet the cleaner ran: {early:?}"
    );
    for round in 3..20 {
        overwrite(round);
    }
    // Two dead segments, the active one and one more the cleaner may not have reached yet.
    let caught_up = |stats: &shaledb::Stats| {
        stats.cleaner_segments_cleaned >= 3
            && stats.total_bytes < stats.live_bytes + 4 * segment_bytes
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !caught_up(&db.stats()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = db.stats();
    assert!(caught_up(&stats), "{stats:?}");
    assert_eq!(
        stats.cleaner_bytes_copied, 0,
        "the victims still held live versions: {stats:?}"
    );
    for key in 0..250u32 {
        assert_eq!(kvs.get(key.to_be_bytes()).unwrap().unwrap()[0], 19);
    }
    assert!(db.check().unwrap().is_ok());
}

/// Overwrites ~1 MB of live data (250 values of 4,000 bytes) without a pause until `bytes` are
/// written, one value every 0.8 ms (every maintenance round sees writes); returns the stats
/// as the writing stopped.
fn overwrite_steadily(db: &Db, bytes: u64) -> shaledb::Stats {
    let kvs = db.kvs("t").unwrap();
    let value = vec![3u8; 4000];
    let start = Instant::now();
    for put in 0..bytes / 4000 {
        kvs.put(((put % 250) as u32).to_be_bytes(), &value).unwrap();
        let due = start + Duration::from_micros(800 * (put + 1));
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
    }
    db.stats()
}

/// A burst of writes is not slowed by cleaning that can wait: while clients write, dead data up
/// to `cleaner_deferred_segments` past the target stays until they pause, and is cleaned then.
/// The same burst with no deferral is cleaned during it.
#[test]
fn cleaning_waits_for_a_pause_in_writes_within_its_deferral() {
    let cleaned_during_and_after = |deferred_segments: u64| {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            cleaner_deferred_segments: deferred_segments,
            ..small_options()
        };
        let db = Db::open(dir.path(), options).unwrap();
        // ~7 MB written over ~1.4 s: past two dead 2 MB segments (the target's slack), inside
        // two more (the deferral) and the reserve (four).
        let during = overwrite_steadily(&db, 7 << 20);
        let deadline = Instant::now() + Duration::from_secs(10);
        while db.stats().cleaner_segments_cleaned == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let after = db.stats();
        assert!(db.check().unwrap().is_ok());
        (during, after)
    };
    let (during, after) = cleaned_during_and_after(2);
    let segment_bytes = small_options().segment_bytes;
    assert!(
        during.total_bytes - during.live_bytes > 2 * segment_bytes,
        "the burst left less dead than the target allows: {during:?}"
    );
    assert_eq!(
        during.cleaner_segments_cleaned, 0,
        "cleaned during the burst: {during:?}"
    );
    assert!(during.cleaner_steps_deferred > 0, "{during:?}");
    assert!(
        after.cleaner_segments_cleaned > 0,
        "not cleaned after the burst: {after:?}"
    );
    let (during, _) = cleaned_during_and_after(0);
    assert!(
        during.cleaner_segments_cleaned > 0,
        "without a deferral the burst is cleaned during it: {during:?}"
    );
    assert_eq!(during.cleaner_steps_deferred, 0, "{during:?}");
}

/// The deferral is bounded: writes that go on past it are cleaned while they go on, at the
/// deferral's edge rather than at the space reserve's (eight segments here, far past it).
#[test]
fn cleaning_defers_no_further_than_its_deferral() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        cleaner_deferred_segments: 1,
        reserve_segments: 8,
        ..small_options()
    };
    let segment_bytes = options.segment_bytes;
    let db = Db::open(dir.path(), options).unwrap();
    let during = overwrite_steadily(&db, 16 << 20);
    assert!(
        during.cleaner_segments_cleaned > 0,
        "16 MB of writes over ~1 MB live, never cleaned while they went on: {during:?}"
    );
    // Two dead segments the target allows, one deferred, the active one and one more the
    // cleaner may not have reached yet; the reserve would allow eight.
    assert!(
        during.total_bytes < during.live_bytes + 5 * segment_bytes,
        "{during:?}"
    );
    assert!(db.check().unwrap().is_ok());
}

fn head_live_bytes(db: &Db, head: &str) -> u64 {
    let stats = db.stats();
    stats
        .segments_by_head
        .iter()
        .find(|entry| entry.head == head)
        .unwrap()
        .live_bytes
}

#[test]
fn survivors_move_through_generations() {
    let dir = tempfile::tempdir().unwrap();
    let options = shaledb::Options {
        cleaner: false, // only compact() cleans, so the test controls every move
        ..common::small_options()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let kvs = db.kvs("t").unwrap();
    let cold = |key: u32| format!("cold{key:04}");
    for key in 0..400u32 {
        kvs.put(cold(key), vec![(key % 251) as u8; 4000]).unwrap();
    }
    for round in 0..5u8 {
        for key in 0..100u32 {
            kvs.put(format!("hot{key:03}"), vec![round; 4000]).unwrap();
        }
    }
    db.compact().unwrap();
    assert_eq!(
        head_live_bytes(&db, "client"),
        0,
        "first survivors left the client segments"
    );
    assert!(
        head_live_bytes(&db, "cleaner-young") > 400 * 4000,
        "they went to the young tier"
    );
    assert_eq!(head_live_bytes(&db, "cleaner-old"), 0);
    for key in (0..400u32).step_by(2) {
        kvs.delete(cold(key)).unwrap();
    }
    db.compact().unwrap();
    assert!(
        head_live_bytes(&db, "cleaner-old") > 200 * 4000,
        "second survivors reached the old tier"
    );
    assert_eq!(head_live_bytes(&db, "cleaner-young"), 0);
    let stats = db.stats();
    assert!(
        stats.cleaner_live_fraction_avg > 0.0 && stats.cleaner_live_fraction_avg < 1.0,
        "{stats:?}"
    );
    let capacity = &stats.media[1];
    assert!(capacity.bytes_written_by_cleaning > 0 && capacity.bytes_read_by_cleaning > 0);
    assert!(capacity.bytes_written_by_clients >= stats.user_bytes_written);
    assert!(db.check().unwrap().is_ok());
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    let kvs = db.kvs("t").unwrap();
    for key in 0..400u32 {
        let expected = (key % 2 == 1).then(|| vec![(key % 251) as u8; 4000]);
        assert_eq!(
            kvs.get(cold(key)).unwrap().map(|value| value.to_vec()),
            expected,
            "cold{key}"
        );
    }
    assert_eq!(kvs.get("hot042").unwrap().unwrap()[0], 4);
}

/// The cleaner tells a victim's live records by one walk of the indexes (here: 600 keys
/// against ~1,300 records a victim).
#[test]
fn cleaning_racing_overwrites_and_deletes_loses_and_resurrects_nothing() {
    let (_, after) = race_cleaning_against_writers(0);
    assert!(after.cleaner_index_walks > 0, "{after:?}");
}

/// The cleaner tells a victim's live records by one index lookup per record (here: 20,000 keys
/// of another KVS make the indexes too big to walk for a victim).
#[test]
fn cleaning_by_lookups_racing_overwrites_and_deletes_loses_and_resurrects_nothing() {
    let (before, after) = race_cleaning_against_writers(20_000);
    assert_eq!(
        before.cleaner_index_walks, after.cleaner_index_walks,
        "{after:?}"
    );
    assert!(
        after.cleaner_segments_cleaned > before.cleaner_segments_cleaned,
        "{after:?}"
    );
}

/// Three writers overwrite and delete 600 keys while the cleaner compacts in a loop, beside
/// `other_keys` keys of another KVS (written and compacted first); then every key reads as the
/// writers' model says, before and after a reopen without the checkpoint. Returns the stats
/// before and after the writes.
fn race_cleaning_against_writers(other_keys: u32) -> (shaledb::Stats, shaledb::Stats) {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_options()).unwrap();
    let other = db.kvs("other").unwrap();
    for key in 0..other_keys {
        other.put(key.to_be_bytes(), b"x").unwrap();
    }
    db.compact().unwrap();
    let before = db.stats();
    let kvs = db.kvs("t").unwrap();
    let done = AtomicBool::new(false);
    let models: Vec<BTreeMap<u32, Option<u8>>> = std::thread::scope(|scope| {
        let cleaner = scope.spawn(|| {
            let mut passes = 0;
            while !done.load(Ordering::Relaxed) {
                db.checkpoint().unwrap(); // lets tombstones become droppable while writers run
                db.compact().unwrap();
                passes += 1;
            }
            passes
        });
        let writers: Vec<_> = (0..3u32)
            .map(|writer| {
                let kvs = &kvs;
                scope.spawn(move || {
                    // Each writer owns the keys equal to its number modulo 3.
                    let mut model = BTreeMap::new();
                    let mut state = writer + 7;
                    for step in 0..3000u32 {
                        state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                        let key = (state >> 8) % 200 * 3 + writer;
                        if step % 4 == 3 {
                            kvs.delete(key.to_be_bytes()).unwrap();
                            model.insert(key, None);
                        } else {
                            let fill = (step % 251) as u8;
                            kvs.put(key.to_be_bytes(), vec![fill; 1500]).unwrap();
                            model.insert(key, Some(fill));
                        }
                    }
                    model
                })
            })
            .collect();
        let models = writers
            .into_iter()
            .map(|writer| writer.join().unwrap())
            .collect();
        done.store(true, Ordering::Relaxed);
        assert!(
            cleaner.join().unwrap() > 0,
            "the cleaner ran during the writes"
        );
        models
    });
    let check = |db: &Db| {
        let kvs = db.kvs("t").unwrap();
        for model in &models {
            for (key, fill) in model {
                let got = kvs.get(key.to_be_bytes()).unwrap().map(|value| value[0]);
                assert_eq!(got, *fill, "key {key}");
            }
        }
    };
    check(&db);
    assert!(db.check().unwrap().is_ok());
    let stats = db.stats();
    db.close().unwrap();
    std::fs::remove_file(dir.path().join("capacity/checkpoint.ckpt")).unwrap();
    let db = Db::open(dir.path(), common::small_options()).unwrap();
    check(&db); // a full rescan resurrects no deleted key
    assert_eq!(db.kvs("other").unwrap().len().unwrap(), other_keys as usize);
    (before, stats)
}

/// A victim of many small records over few keys (a hot key's overwrites) is told live by one
/// walk of the indexes, which finds the newest versions and those a snapshot keeps: after
/// compaction the newest values and the snapshot's read as written, and survive a reopen.
#[test]
fn a_victim_of_few_keys_is_told_live_by_one_walk_of_the_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    let write_round = |round: u32| {
        for key in 0..20u32 {
            kvs.put(key.to_be_bytes(), round.to_be_bytes()).unwrap();
        }
    };
    for round in 0..20_000 {
        write_round(round);
    }
    let snapshot = db.snapshot().unwrap();
    for round in 20_000..40_000 {
        write_round(round);
    }
    db.compact().unwrap();
    let stats = db.stats();
    assert!(stats.cleaner_index_walks > 0, "{stats:?}");
    assert!(stats.cleaner_segments_cleaned > 0, "{stats:?}");
    for key in 0..20u32 {
        let key = key.to_be_bytes();
        assert_eq!(kvs.get(key).unwrap().unwrap(), &39_999u32.to_be_bytes()[..]);
        assert_eq!(
            snapshot.get(&kvs, key).unwrap().unwrap(),
            &19_999u32.to_be_bytes()[..]
        );
    }
    assert!(db.check().unwrap().is_ok());
    drop(snapshot);
    db.close().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    assert_eq!(kvs.len().unwrap(), 20);
    assert_eq!(
        kvs.get(7u32.to_be_bytes()).unwrap().unwrap(),
        &39_999u32.to_be_bytes()[..]
    );
}

#[test]
fn tombstones_outlive_older_versions_in_segments_the_cleaner_keeps() {
    // Segment 1 stays almost fully live and is never picked by the background cleaner, but holds
    // the old version of "victim". The tombstone of "victim" lands among data that dies at once,
    // which the cleaner frees. Dropping that tombstone would resurrect "victim" on a full rescan.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    let value = vec![4u8; 4000];
    kvs.put(b"victim", &value).unwrap();
    for key in 0..520u32 {
        // Fills the first 2 MiB segment, so the delete below lands in the second.
        kvs.put(format!("cold{key:04}"), &value).unwrap();
    }
    kvs.delete(b"victim").unwrap();
    db.checkpoint().unwrap(); // the checkpoint covers the tombstone
    for round in 0..12u32 {
        for key in 0..100u32 {
            kvs.put(format!("hot{key:03}"), vec![round as u8; 4000])
                .unwrap();
        }
    }
    db.sync().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.stats().cleaner_segments_cleaned < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        db.stats().cleaner_segments_cleaned >= 2,
        "the background cleaner freed the dead segments"
    );
    db.close().unwrap();
    std::fs::remove_file(dir.path().join("capacity/checkpoint.ckpt")).unwrap();
    let db = Db::open(dir.path(), common::small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    assert!(
        kvs.get(b"victim").unwrap().is_none(),
        "a deleted key came back after a full rescan"
    );
    assert_eq!(kvs.len().unwrap(), 620);
}

/// Victims cleaned one after another share one walk of the indexes: a walk also collects the
/// live offsets of the next victims, kept for their turn, for at most 8 victims
/// (`WALK_VICTIMS_MAX`). Here each key's last version lies in a different stretch of the log
/// (key k is last written in round k / 20), so every victim holds live versions; all read back
/// as written after the compaction, and after a reopen.
#[test]
fn victims_cleaned_in_a_row_share_one_walk_of_the_indexes() {
    let dir = tempfile::tempdir().unwrap();
    // No background cleaning: the compaction below cleans every victim, one after another.
    let options = shaledb::Options {
        cleaner: false,
        ..small_options()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let kvs = db.kvs("t").unwrap();
    let value = |round: u32| [round as u8; 400];
    for round in 0..100u32 {
        for key in round * 20..2000 {
            kvs.put(key.to_be_bytes(), value(round)).unwrap();
        }
    }
    db.compact().unwrap();
    let stats = db.stats();
    let (cleaned, walks) = (stats.cleaner_segments_cleaned, stats.cleaner_index_walks);
    // More victims than one walk may serve: the bound shows in the count of walks.
    assert!(cleaned > 8, "{stats:?}");
    assert!(
        walks >= cleaned.div_ceil(8) && walks < cleaned,
        "{walks} walks for {cleaned} victims"
    );
    let check = |kvs: &shaledb::Kvs| {
        for key in 0..2000u32 {
            let got = kvs.get(key.to_be_bytes()).unwrap().unwrap();
            assert_eq!(&got[..], &value(key / 20)[..], "key {key}");
        }
    };
    check(&kvs);
    assert!(db.check().unwrap().is_ok());
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    check(&db.kvs("t").unwrap());
}
