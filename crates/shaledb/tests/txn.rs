//! Goal: transactions give snapshot isolation across KVSs: they read their snapshot merged with
//! their own writes, commit atomically, and lose with a Conflict (writing nothing) when another
//! commit touched what they wrote (or, with validate_reads, read) after their snapshot.
//! Method: explicit interleavings of two transactions and plain writers, then concurrent bank
//! transfers across two KVSs whose total must never change.

mod common;

use common::small_options;
use shaledb::{Db, ErrorKind, TxnOptions};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

fn text(value: Option<bytes::Bytes>) -> Option<String> {
    value.map(|value| String::from_utf8(value.to_vec()).unwrap())
}

#[test]
fn reads_merge_own_writes_over_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    for key in ["a", "b", "c", "d"] {
        kvs.put(key, "old").unwrap();
    }
    let mut txn = db.begin().unwrap();
    txn.put(&kvs, "b", "mine").unwrap();
    txn.delete(&kvs, "c").unwrap();
    txn.put(&kvs, "e", "new").unwrap();
    kvs.put("a", "later").unwrap(); // committed after the snapshot: invisible to txn
    assert_eq!(text(txn.get(&kvs, "a").unwrap()).as_deref(), Some("old"));
    assert_eq!(text(txn.get(&kvs, "b").unwrap()).as_deref(), Some("mine"));
    assert_eq!(txn.get(&kvs, "c").unwrap(), None);
    let got: Vec<Option<String>> = txn
        .multi_get(&kvs, ["d", "e", "zz"])
        .unwrap()
        .into_iter()
        .map(text)
        .collect();
    assert_eq!(got, vec![Some("old".into()), Some("new".into()), None]);
    let forward: Vec<(String, String)> = txn
        .range::<&[u8], _>(&kvs, ..)
        .map(|item| item.unwrap())
        .map(|(key, value)| {
            (
                String::from_utf8(key.to_vec()).unwrap(),
                String::from_utf8(value.to_vec()).unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [("a", "old"), ("b", "mine"), ("d", "old"), ("e", "new")]
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    assert_eq!(forward, expected);
    let backward: Vec<String> = txn
        .range::<&[u8], _>(&kvs, ..)
        .rev()
        .map(|item| String::from_utf8(item.unwrap().0.to_vec()).unwrap())
        .collect();
    assert_eq!(backward, vec!["e", "d", "b", "a"]);
    let mut both = txn.prefix(&kvs, "");
    assert_eq!(&both.next().unwrap().unwrap().0[..], b"a");
    assert_eq!(&both.next_back().unwrap().unwrap().0[..], b"e");
    assert_eq!(both.count(), 2);
    assert_eq!(txn.get(&kvs, "a").unwrap().as_deref(), Some(&b"old"[..]));
    // Uncommitted writes are invisible outside.
    assert_eq!(text(kvs.get("b").unwrap()).as_deref(), Some("old"));
    // "a" changed after the snapshot, but the transaction only read it: plain SI commits.
    txn.commit().unwrap();
    assert_eq!(text(kvs.get("b").unwrap()).as_deref(), Some("mine"));
    assert_eq!(kvs.get("c").unwrap(), None);
    assert_eq!(text(kvs.get("a").unwrap()).as_deref(), Some("later"));
}

#[test]
fn commits_are_atomic_and_visible_only_after_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let (a, b) = (db.kvs("a").unwrap(), db.kvs("b").unwrap());
    let mut txn = db.begin().unwrap();
    txn.put(&a, "x", "1").unwrap();
    txn.put(&b, "y", "2").unwrap();
    assert_eq!(a.get("x").unwrap(), None);
    txn.commit().unwrap();
    assert_eq!(text(a.get("x").unwrap()).as_deref(), Some("1"));
    assert_eq!(text(b.get("y").unwrap()).as_deref(), Some("2"));
    let mut dropped = db.begin().unwrap();
    dropped.put(&a, "x", "never").unwrap();
    drop(dropped);
    let mut aborted = db.begin().unwrap();
    aborted.put(&a, "x", "never").unwrap();
    aborted.abort();
    assert_eq!(text(a.get("x").unwrap()).as_deref(), Some("1"));
    db.close().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    assert_eq!(
        text(db.kvs("b").unwrap().get("y").unwrap()).as_deref(),
        Some("2")
    );
}

#[test]
fn write_write_conflicts_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    let mut first = db.begin().unwrap();
    let mut second = db.begin().unwrap();
    first.put(&kvs, "k", "first").unwrap();
    second.put(&kvs, "k", "second").unwrap();
    second.put(&kvs, "other", "second").unwrap();
    first.commit().unwrap();
    let error = second.commit().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict, "{error}");
    assert_eq!(text(kvs.get("k").unwrap()).as_deref(), Some("first"));
    assert_eq!(
        kvs.get("other").unwrap(),
        None,
        "nothing of a failed commit is visible"
    );

    // A plain write and a prefix delete after the snapshot conflict too.
    let mut txn = db.begin().unwrap();
    txn.put(&kvs, "k", "txn").unwrap();
    kvs.put("k", "plain").unwrap();
    assert_eq!(txn.commit().unwrap_err().kind(), ErrorKind::Conflict);
    let mut txn = db.begin().unwrap();
    txn.put(&kvs, "user:1", "txn").unwrap();
    kvs.prefix_delete("user:").unwrap();
    assert_eq!(txn.commit().unwrap_err().kind(), ErrorKind::Conflict);
    // Writes before the snapshot do not conflict.
    kvs.put("k", "before").unwrap();
    let mut txn = db.begin().unwrap();
    txn.put(&kvs, "k", "after").unwrap();
    txn.commit().unwrap();
    assert_eq!(text(kvs.get("k").unwrap()).as_deref(), Some("after"));
}

#[test]
fn a_key_can_be_checked_before_commit_and_read_at_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    let other = db.kvs("u").unwrap();
    kvs.put("a", "old").unwrap();
    kvs.put("p:1", "old").unwrap();
    let txn = db.begin().unwrap();
    let view = txn.snapshot_view();
    assert_eq!(view.seqno(), txn.seqno());
    txn.check_unchanged(&kvs, "a").unwrap();
    kvs.put("a", "new").unwrap();
    other.put("b", "new").unwrap();
    let error = txn.check_unchanged(&kvs, "a").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Conflict);
    // Another KVS's key of another name, and a key nobody wrote, are unchanged.
    txn.check_unchanged(&kvs, "b").unwrap();
    txn.check_unchanged(&other, "a").unwrap();
    // A prefix delete changes every key under it.
    kvs.prefix_delete("p:").unwrap();
    assert_eq!(
        txn.check_unchanged(&kvs, "p:1").unwrap_err().kind(),
        ErrorKind::Conflict
    );
    // The view reads at the snapshot, and outlives the transaction.
    drop(txn);
    assert_eq!(text(view.get(&kvs, "a").unwrap()).as_deref(), Some("old"));
    assert_eq!(text(view.get(&kvs, "p:1").unwrap()).as_deref(), Some("old"));
    assert_eq!(view.get(&other, "b").unwrap(), None);
}

#[test]
fn write_skew_is_allowed_by_si_and_prevented_by_read_validation() {
    for validate_reads in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), small_options()).unwrap();
        let doctors = db.kvs("oncall").unwrap();
        doctors.put("alice", "1").unwrap();
        doctors.put("bob", "1").unwrap();
        let options = TxnOptions {
            validate_reads,
            ..TxnOptions::default()
        };
        // Each leaves if the other is on call: together they break "someone is on call".
        let mut alice = db.begin_with(options.clone()).unwrap();
        let mut bob = db.begin_with(options).unwrap();
        assert!(alice.get(&doctors, "bob").unwrap().is_some());
        assert!(bob.get(&doctors, "alice").unwrap().is_some());
        alice.delete(&doctors, "alice").unwrap();
        bob.delete(&doctors, "bob").unwrap();
        alice.commit().unwrap();
        let outcome = bob.commit();
        if validate_reads {
            assert_eq!(outcome.unwrap_err().kind(), ErrorKind::Conflict);
            assert!(doctors.get("bob").unwrap().is_some());
        } else {
            outcome.unwrap();
            assert_eq!(doctors.len().unwrap(), 0, "plain SI allows write skew");
        }
    }
}

#[test]
fn write_set_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    let mut txn = db
        .begin_with(TxnOptions {
            write_set_bytes_max: 10_000,
            ..TxnOptions::default()
        })
        .unwrap();
    for index in 0..9 {
        txn.put(&kvs, format!("k{index}"), vec![0u8; 1000]).unwrap();
    }
    let error = txn.put(&kvs, "k9", vec![0u8; 1000]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::LimitExceeded);
    txn.put(&kvs, "k0", vec![0u8; 900]).unwrap(); // replacing a write frees its bytes
    assert_eq!(txn.write_count(), 9);
}

#[test]
fn open_transactions_pin_only_what_they_see_and_show_in_stats() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let kvs = db.kvs("t").unwrap();
    for key in 0..200u32 {
        kvs.put(key.to_be_bytes(), vec![1u8; 4000]).unwrap();
    }
    let txn = db.begin().unwrap();
    for key in 0..200u32 {
        kvs.put(key.to_be_bytes(), vec![2u8; 4000]).unwrap();
    }
    db.compact().unwrap();
    assert_eq!(
        txn.get(&kvs, 7u32.to_be_bytes()).unwrap().unwrap()[0],
        1,
        "the old version survived cleaning"
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    let stats = db.stats();
    assert_eq!(stats.snapshots_open, 1);
    assert!(stats.oldest_snapshot_age_secs > 0.0);
    let pinned = stats.live_bytes;
    drop(txn);
    let stats = db.stats();
    assert_eq!(stats.snapshots_open, 0);
    assert!(
        stats.live_bytes < pinned,
        "old versions are released with the transaction"
    );
    assert!(db.check().unwrap().is_ok());
}

const ACCOUNTS: u32 = 20;
const BALANCE: u64 = 1000;

fn balance(value: Option<bytes::Bytes>) -> u64 {
    u64::from_le_bytes(value.expect("every account exists")[..].try_into().unwrap())
}

#[test]
fn concurrent_transfers_keep_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let (checking, savings) = (db.kvs("checking").unwrap(), db.kvs("savings").unwrap());
    for account in 0..ACCOUNTS {
        checking
            .put(account.to_be_bytes(), BALANCE.to_le_bytes())
            .unwrap();
        savings
            .put(account.to_be_bytes(), BALANCE.to_le_bytes())
            .unwrap();
    }
    let total = 2 * u64::from(ACCOUNTS) * BALANCE;
    let stop = AtomicBool::new(false);
    let (committed, conflicts) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|scope| {
        let mut writers = Vec::new();
        for thread in 0..4u32 {
            let (db, checking, savings, committed, conflicts) =
                (&db, &checking, &savings, &committed, &conflicts);
            writers.push(scope.spawn(move || {
                let mut state = thread + 1;
                for _ in 0..300 {
                    state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    let (from, to, amount) = (
                        state % ACCOUNTS,
                        (state >> 8) % ACCOUNTS,
                        u64::from(state >> 16) % 50,
                    );
                    let (source, target) = if state & 1 == 0 {
                        (checking, savings)
                    } else {
                        (savings, checking)
                    };
                    let outcome = db.transact(TxnOptions::default(), 1, |txn| {
                        let from_balance = balance(txn.get(source, from.to_be_bytes())?);
                        // Yield inside the transaction so transfers interleave even on few cores.
                        std::thread::yield_now();
                        let to_balance = balance(txn.get(target, to.to_be_bytes())?);
                        let amount = amount.min(from_balance);
                        txn.put(
                            source,
                            from.to_be_bytes(),
                            (from_balance - amount).to_le_bytes(),
                        )?;
                        txn.put(
                            target,
                            to.to_be_bytes(),
                            (to_balance + amount).to_le_bytes(),
                        )?;
                        Ok(())
                    });
                    match outcome {
                        Ok(()) => committed.fetch_add(1, Ordering::Relaxed),
                        Err(error) if error.kind() == ErrorKind::Conflict => {
                            conflicts.fetch_add(1, Ordering::Relaxed)
                        }
                        Err(error) => panic!("{error}"),
                    };
                }
            }));
        }
        // A reader checks the invariant on consistent snapshots while transfers run.
        let (db_ref, checking_ref, savings_ref, stop_ref) = (&db, &checking, &savings, &stop);
        scope.spawn(move || {
            let (db, checking, savings, stop) = (db_ref, checking_ref, savings_ref, stop_ref);
            while !stop.load(Ordering::Relaxed) {
                let snapshot = db.snapshot().unwrap();
                let sum: u64 = (0..ACCOUNTS)
                    .map(|account| {
                        balance(snapshot.get(checking, account.to_be_bytes()).unwrap())
                            + balance(snapshot.get(savings, account.to_be_bytes()).unwrap())
                    })
                    .sum();
                assert_eq!(sum, total, "a snapshot saw a half-applied transfer");
            }
        });
        for writer in writers {
            writer.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let sum: u64 = (0..ACCOUNTS)
        .map(|account| {
            balance(checking.get(account.to_be_bytes()).unwrap())
                + balance(savings.get(account.to_be_bytes()).unwrap())
        })
        .sum();
    assert_eq!(sum, total);
    assert!(
        committed.load(Ordering::Relaxed) > 600,
        "most transfers commit"
    );
    assert!(
        conflicts.load(Ordering::Relaxed) > 0,
        "with 4 threads on 20 accounts some transfers conflict"
    );
}
