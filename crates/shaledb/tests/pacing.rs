//! Pacing for reads: while gets' device reads take longer than `read_latency_target` and client
//! writes move a share of the device's bytes, the writes of threads that do not read are
//! slowed, never below `write_rate_floor`, and never stalled; slow reads beside a trickle of
//! writes slow nothing, and a thread that reads is never slowed.

mod common;

use shaledb::{Db, ErrorKind, Options};
use std::time::{Duration, Instant};

#[test]
fn slow_reads_pace_writes_down_to_the_floor_and_writes_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        cache_bytes: 0,
        // Every device read is "slow" against one nanosecond.
        read_latency_target: Duration::from_nanos(1),
        write_rate_floor: 1 << 20,
        ..common::small_options()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let kvs = db.kvs("t").unwrap();
    let value = vec![7u8; 1000];
    for i in 0..2000u32 {
        kvs.put(i.to_be_bytes(), &value).unwrap();
    }
    db.sync().unwrap();
    assert_eq!(db.stats().write_rate_limit, None, "nothing was read yet");
    // Another thread writes `count` values: the writer the pacer slows (this one reads).
    let write_elsewhere = |count: u32| {
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for i in 0..count {
                    kvs.put((i * 41 % 2000).to_be_bytes(), &value).unwrap();
                }
            });
        });
    };
    // Reads (all slow) and as many bytes of writes, until the limit is `wanted` (within 10 s).
    let read_until = |wanted: &dyn Fn(Option<u64>) -> bool| {
        let started = Instant::now();
        while !wanted(db.stats().write_rate_limit) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{:?}",
                db.stats()
            );
            for i in 0..20u32 {
                kvs.get((i * 37 % 2000).to_be_bytes()).unwrap().unwrap();
            }
            write_elsewhere(20);
        }
    };
    read_until(&|limit| limit.is_some());
    // Slow reads keep the limit falling to the floor: 1 MiB/s, ~1,000 writes of 1 KB a second.
    read_until(&|limit| limit == Some(1 << 20));
    let started = Instant::now();
    write_elsewhere(200);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(100),
        "200 KB at 1 MiB/s took only {took:?}: not paced"
    );
    assert!(
        took < Duration::from_secs(5),
        "paced writes stalled: {took:?}"
    );
    let paced_secs = db.stats().paced_secs;
    assert!(paced_secs > 0.0);
    // This thread reads: its own writes go unpaced while the limit holds.
    kvs.get(0u32.to_be_bytes()).unwrap().unwrap();
    for i in 0..200u32 {
        kvs.put(i.to_be_bytes(), &value).unwrap();
    }
    assert!(db.stats().write_rate_limit.is_some(), "still limited");
    assert_eq!(
        db.stats().paced_secs,
        paced_secs,
        "a reading thread was paced"
    );
    for i in 0..2000u32 {
        assert_eq!(kvs.get(i.to_be_bytes()).unwrap().unwrap(), value);
    }
}

#[test]
fn slow_reads_beside_a_trickle_of_writes_slow_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        cache_bytes: 0,
        read_latency_target: Duration::from_nanos(1),
        ..common::small_options()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let kvs = db.kvs("t").unwrap();
    let value = vec![7u8; 1000];
    for i in 0..2000u32 {
        kvs.put(i.to_be_bytes(), &value).unwrap();
    }
    db.sync().unwrap();
    // Every read is slow, but a writer thread's writes are 2% of the bytes: the reads' own
    // queueing, which slowing the writes cannot help. Twenty 50 ms windows of it.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(1) {
        for i in 0..50u32 {
            kvs.get((i * 37 % 2000).to_be_bytes()).unwrap().unwrap();
        }
        std::thread::scope(|scope| {
            scope.spawn(|| kvs.put(1u32.to_be_bytes(), &value).unwrap());
        });
    }
    let stats = db.stats();
    assert_eq!(stats.write_rate_limit, None);
    assert_eq!(stats.paced_secs, 0.0);
}

#[test]
fn a_zero_floor_is_refused_and_a_zero_target_never_paces() {
    let dir = tempfile::tempdir().unwrap();
    let zero_floor = Options {
        write_rate_floor: 0,
        ..common::small_options()
    };
    let error = Db::open(dir.path(), zero_floor).err().unwrap();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");

    let off = Options {
        cache_bytes: 0,
        read_latency_target: Duration::ZERO,
        ..common::small_options()
    };
    let db = Db::open(dir.path(), off).unwrap();
    let kvs = db.kvs("t").unwrap();
    for i in 0..2000u32 {
        kvs.put(i.to_be_bytes(), [1u8; 1000]).unwrap();
    }
    db.sync().unwrap();
    for round in 0..20u32 {
        for i in 0..100u32 {
            kvs.get(((i + round) * 37 % 2000).to_be_bytes()).unwrap();
        }
        kvs.put(round.to_be_bytes(), [2u8; 1000]).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = db.stats();
    assert_eq!(stats.write_rate_limit, None);
    assert_eq!(stats.paced_secs, 0.0);
}
