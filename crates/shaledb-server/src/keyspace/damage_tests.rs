//! Goal: every damaged or unexpected record of the Redis layout is an error that names it:
//! never skipped, never a panic, never a wrong answer.
//! Method: write a malformed record straight into a database's KVS, then run commands through
//! the server's dispatcher (`Shared::execute`) and check each answers `ERR damaged data: ...`
//! naming the record; damage that the open reads (layout, database and key-count records) must
//! make `Shared::new`, which `shale serve` calls before it listens, refuse the KVS.

use super::{
    count_key, record_key, stripe_of, tag, Failure, DATABASE_KEY, LAYOUT_3_VALUE, LAYOUT_4_VALUE,
    LAYOUT_KEY, LAYOUT_VALUE,
};
use crate::commands::{Request, Session, Shared};
use crate::resp::Reply;
use bytes::Bytes;
use shaledb::{Db, Kvs, Options};

/// The KVS database 0 lives in.
const KVS: &str = "redis-0";

struct Server {
    dir: tempfile::TempDir,
    shared: Shared,
    session: Session,
}

impl Server {
    fn new() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let shared = Shared::open_for_tests(&dir.path().join("db"))
            .unwrap_or_else(|_| panic!("a new database"));
        let session = shared.new_session();
        Server {
            dir,
            shared,
            session,
        }
    }

    fn call(&mut self, args: &[&str]) -> Reply {
        let args: Vec<Bytes> = args
            .iter()
            .map(|arg| Bytes::copy_from_slice(arg.as_bytes()))
            .collect();
        self.shared
            .execute(&mut self.session, &mut Request::from(args))
            .expect("no command here blocks")
    }

    fn kvs(&self) -> Kvs {
        self.shared.db.kvs(KVS).unwrap()
    }

    /// Writes `value` under `record` behind the server's back.
    fn put(&self, record: &[u8], value: &[u8]) {
        self.kvs().put(record, value).unwrap();
    }

    fn delete(&self, record: &[u8]) {
        self.kvs().delete(record).unwrap();
    }

    /// Closes the KVDB and opens it again: what `shale serve` does at its next start.
    fn restart(self) -> (tempfile::TempDir, Result<Shared, Failure>) {
        let Server { dir, shared, .. } = self;
        drop(shared);
        let reopened = Shared::open_for_tests(&dir.path().join("db"));
        (dir, reopened)
    }
}

/// The text `keyspace::damaged` names `record` with.
fn named(record: &[u8]) -> String {
    format!(
        "record {:?}",
        String::from_utf8_lossy(&record[..record.len().min(80)])
    )
}

fn assert_damaged(reply: &Reply, what: &str, record: &[u8], command: &[&str]) {
    match reply {
        Reply::Error(text) => assert!(
            text.starts_with("ERR damaged data: ")
                && text.contains(what)
                && text.contains(&named(record)),
            "{command:?} answered {text:?}, not damage {what:?} naming {}",
            named(record)
        ),
        other => panic!(
            "{command:?} answered {other:?}, not damage {what:?} naming {}",
            named(record)
        ),
    }
}

/// Runs each command and checks it answers damage `what` naming `record`.
fn assert_all_damaged(server: &mut Server, commands: &[&[&str]], what: &str, record: &[u8]) {
    for command in commands {
        let reply = server.call(command);
        assert_damaged(&reply, what, record, command);
    }
}

/// An open that `shale serve` would refuse: the failure names `record`.
fn assert_refused(opened: Result<Shared, Failure>, what: &str, record: &[u8]) {
    match opened {
        Ok(_) => panic!("opened a KVS whose {} is damaged", named(record)),
        Err(failure) => assert_damaged(&Reply::from(failure), what, record, &["open"]),
    }
}

fn ok() -> Reply {
    Reply::OK
}

fn same(left: &Reply, right: &Reply) -> bool {
    format!("{left:?}") == format!("{right:?}")
}

#[test]
fn an_expiry_record_not_of_8_bytes() {
    let far = (super::now_ms() + 3_600_000).to_be_bytes();
    let nine = [&far[..], &[0]].concat();
    for bad in [&[][..], &far[..3], &nine[..]] {
        let mut server = Server::new();
        // An expiry written by the server (with its queue entry), then damaged: reads skip the
        // expiry seek only for keys whose stripe holds no queue entry (`Space::expiring`).
        assert!(same(&server.call(&["SET", "k", "v", "EX", "3600"]), &ok()));
        let record = record_key(b"k", tag::EXPIRY, &[]).unwrap();
        server.put(&record, bad);
        let what = format!("an expiry time of {} bytes, not 8", bad.len());
        assert_all_damaged(
            &mut server,
            &[
                &["TTL", "k"],
                &["PTTL", "k"],
                &["EXPIRETIME", "k"],
                &["GET", "k"],
                &["TYPE", "k"],
                &["EXISTS", "k"],
                &["STRLEN", "k"],
                &["KEYS", "*"],
                &["SCAN", "0"],
                &["EXPIRE", "k", "100"],
                &["PERSIST", "k"],
                &["SET", "k", "w"],
            ],
            &what,
            &record,
        );
    }
}

#[test]
fn a_list_bounds_record_of_the_wrong_length_or_order() {
    let bounds = |head: i64, tail: i64| [head.to_be_bytes(), tail.to_be_bytes()].concat();
    let good = bounds(0, 3);
    let long = [&good[..], &[0]].concat();
    let reversed = bounds(3, 0);
    for bad in [&good[..15], &long[..], &reversed[..], &[][..]] {
        let mut server = Server::new();
        assert!(same(
            &server.call(&["RPUSH", "l", "a", "b", "c"]),
            &Reply::Integer(3)
        ));
        let record = record_key(b"l", tag::LIST_BOUNDS, &[]).unwrap();
        server.put(&record, bad);
        let what = format!("a list's bounds ({} bytes; 16, head below tail)", bad.len());
        assert_all_damaged(
            &mut server,
            &[
                &["LLEN", "l"],
                &["LRANGE", "l", "0", "-1"],
                &["LINDEX", "l", "0"],
                &["LPOS", "l", "a"],
                &["RPUSH", "l", "d"],
                &["LPOP", "l"],
                &["LSET", "l", "0", "x"],
                &["LTRIM", "l", "0", "1"],
                &["LREM", "l", "0", "a"],
            ],
            &what,
            &record,
        );
    }
}

#[test]
fn a_sorted_set_score_not_of_8_bytes_or_nan() {
    let one = 1f64.to_bits().to_be_bytes();
    let nine = [&one[..], &[0]].concat();
    let nan = f64::NAN.to_bits().to_be_bytes();
    let cases: [(&[u8], &str); 4] = [
        (&one[..7], "a sorted-set score of 7 bytes, not 8"),
        (&nine, "a sorted-set score of 9 bytes, not 8"),
        (&[], "a sorted-set score of 0 bytes, not 8"),
        (&nan, "a sorted-set score that is NaN"),
    ];
    for (bad, what) in cases {
        let mut server = Server::new();
        assert!(same(
            &server.call(&["ZADD", "z", "1", "m", "2", "n"]),
            &Reply::Integer(2)
        ));
        let record = record_key(b"z", tag::ZSET_MEMBER, b"m").unwrap();
        server.put(&record, bad);
        assert_all_damaged(
            &mut server,
            &[
                &["ZSCORE", "z", "m"],
                &["ZMSCORE", "z", "n", "m"],
                &["ZSCAN", "z", "0"],
                &["ZRANK", "z", "m"],
                &["ZINCRBY", "z", "1", "m"],
                &["ZADD", "z", "5", "m"],
                &["ZREM", "z", "m"],
            ],
            what,
            &record,
        );
        // The intact member still answers.
        assert!(same(
            &server.call(&["ZSCORE", "z", "n"]),
            &Reply::Double(2.0)
        ));
    }
}

#[test]
fn a_sorted_set_rank_entry_whose_score_is_nan() {
    let mut server = Server::new();
    assert!(same(
        &server.call(&["ZADD", "z", "1", "m"]),
        &Reply::Integer(1)
    ));
    // NaN's bits with the sign bit set: the order rank entries keep for positive numbers.
    let sortable = f64::NAN.to_bits() | (1 << 63);
    let record = record_key(
        b"z",
        tag::ZSET_RANK,
        &[&sortable.to_be_bytes()[..], b"n"].concat(),
    )
    .unwrap();
    server.put(&record, b"");
    assert_all_damaged(
        &mut server,
        &[
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            &["ZREVRANGE", "z", "0", "0"],
            &["ZRANGEBYSCORE", "z", "-inf", "+inf"],
        ],
        "a sorted-set rank entry whose score is NaN",
        &record,
    );
}

#[test]
fn a_key_whose_first_record_has_no_types_tag() {
    // A tag of no type, layout 2's chunk tag (no type's in layout 3), a key holding nothing but its
    // expiry, and layout 1's tag for strings with a TTL (upgraded away at open).
    let far = (super::now_ms() + 3_600_000).to_be_bytes();
    let cases: [(&str, u8, &[u8]); 4] = [
        ("q", b'q', b""),
        ("d", tag::LAYOUT_2_STRING_CHUNK, &[0, 0, 0, 0]),
        ("e", tag::EXPIRY, b""),
        ("x", tag::LAYOUT_1_STRING_WITH_TTL, b""),
    ];
    for (key, record_tag, suffix) in cases {
        let mut server = Server::new();
        assert!(same(&server.call(&["SET", "a", "1"]), &ok()));
        assert!(same(&server.call(&["SET", "zzz", "1"]), &ok()));
        let record = record_key(key.as_bytes(), record_tag, suffix).unwrap();
        server.put(&record, &far);
        assert_all_damaged(
            &mut server,
            &[
                &["TYPE", key],
                &["EXISTS", key],
                &["GET", key],
                &["HGET", key, "f"],
                &["KEYS", "*"],
                // The walk names it even where the pattern could not match it.
                &["KEYS", "a*"],
                &["SCAN", "0", "COUNT", "100"],
                &["SET", key, "v"],
                &["DEL", key],
            ],
            "a key whose first record has no type's tag",
            &record,
        );
    }
}

#[test]
fn a_record_too_short_for_its_key() {
    let mut server = Server::new();
    assert!(same(&server.call(&["SET", "a", "1"]), &ok()));
    // The length says 50 bytes of key; one follows.
    let record = [&50u32.to_be_bytes()[..], b"k"].concat();
    server.put(&record, b"v");
    assert_all_damaged(
        &mut server,
        &[&["KEYS", "*"], &["SCAN", "0"]],
        "a record without a key",
        &record,
    );
}

#[test]
fn a_key_count_record_that_is_not_a_count_is_refused_at_open() {
    let stripe = stripe_of(b"k");
    let record = count_key(stripe);
    let nine = [&1u64.to_be_bytes()[..], &[0]].concat();
    let cases: [(&[u8], &[u8], &str); 5] = [
        (
            &record,
            &[0, 0, 0, 0, 0, 0, 1],
            "a key count of 7 bytes, not 8",
        ),
        (&record, &nine, "a key count of 9 bytes, not 8"),
        (&record, &[], "a key count of 0 bytes, not 8"),
        (
            &record,
            &u64::MAX.to_be_bytes(),
            "a key count past any possible number of keys",
        ),
        (
            &[2, 0xFF, 0xFF],
            &1u64.to_be_bytes(),
            "a key count record with a bad stripe",
        ),
    ];
    for (record, bad, what) in cases {
        let mut server = Server::new();
        assert!(same(&server.call(&["SET", "k", "v"]), &ok()));
        server.put(record, bad);
        let (_dir, reopened) = server.restart();
        assert_refused(reopened, what, record);
    }
}

#[test]
fn an_expiry_queue_entry_without_its_key_is_refused_at_open() {
    let time = 1u64.to_be_bytes();
    let cases: [(Vec<u8>, &str); 3] = [
        (
            [&[1u8][..], &time[..4]].concat(),
            "an expiry queue entry without its time",
        ),
        (
            [&[1u8][..], &time[..]].concat(),
            "an expiry queue entry without a key",
        ),
        (
            [&[1u8][..], &time[..], &[0, 0, 0, 5], b"k"].concat(),
            "an expiry queue entry without a key",
        ),
    ];
    for (record, what) in cases {
        let mut server = Server::new();
        assert!(same(&server.call(&["SET", "k", "v"]), &ok()));
        server.put(&record, b"");
        let (_dir, reopened) = server.restart();
        assert_refused(reopened, what, &record);
    }
}

#[test]
fn a_wrong_or_missing_layout_record_is_refused_at_open() {
    // Another layout's version.
    let mut server = Server::new();
    assert!(same(&server.call(&["SET", "k", "v"]), &ok()));
    server.put(LAYOUT_KEY, b"shale-redis-layout 6 4096");
    let (_dir, reopened) = server.restart();
    match reopened {
        Ok(_) => panic!("opened a KVS of an unknown layout"),
        Err(failure) => match Reply::from(failure) {
            Reply::Error(text) => assert!(
                text.contains("unknown layout \"shale-redis-layout 6 4096\""),
                "{text}"
            ),
            other => panic!("{other:?}"),
        },
    }

    // A KVS of this layout that lost its layout record: refused, named, and left as it was (not
    // upgraded, not emptied), so putting the record back serves the data again.
    let mut server = Server::new();
    assert!(same(&server.call(&["SET", "k", "v"]), &ok()));
    server.delete(LAYOUT_KEY);
    let (dir, reopened) = server.restart();
    let first_count = count_key(stripe_of(b"k"));
    assert_refused(
        reopened,
        "has no Redis layout record (\\x03layout) but holds records a layout-1 database never has",
        &first_count,
    );
    {
        let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
        let kvs = db.kvs(KVS).unwrap();
        assert!(
            kvs.get(LAYOUT_KEY).unwrap().is_none(),
            "written by a refused open"
        );
        assert!(kvs
            .get(record_key(b"k", tag::STRING, &[]).unwrap())
            .unwrap()
            .is_some());
        kvs.put(LAYOUT_KEY, LAYOUT_VALUE).unwrap();
    }
    let shared =
        Shared::open_for_tests(&dir.path().join("db")).unwrap_or_else(|_| panic!("repaired"));
    let mut session = shared.new_session();
    let reply = shared
        .execute(
            &mut session,
            &mut Request::from(vec![Bytes::from("GET"), Bytes::from("k")]),
        )
        .expect("GET does not block");
    assert!(same(&reply, &Reply::Bulk(Bytes::from("v"))), "{reply:?}");
    drop(shared);

    // ... and without its database and key-count records too: its lists are no layout-1 type.
    let mut server = Server::new();
    assert!(same(&server.call(&["RPUSH", "l", "a"]), &Reply::Integer(1)));
    for record in server
        .kvs()
        .range(vec![2u8]..)
        .keys()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
    {
        server.delete(&record);
    }
    let (_dir, reopened) = server.restart();
    assert_refused(
        reopened,
        "has no Redis layout record (\\x03layout) but holds a record of no layout-1 type",
        &record_key(b"l", tag::LIST_BOUNDS, &[]).unwrap(),
    );

    // The database record of the wrong length.
    let server = Server::new();
    server.put(DATABASE_KEY, &[0]);
    let (_dir, reopened) = server.restart();
    assert_refused(
        reopened,
        "a database number of 1 bytes, not 2",
        DATABASE_KEY,
    );
}

#[test]
fn a_record_of_another_type_among_a_hashs_fields() {
    // HGETALL reads the key's records in one range (its type from the first): a set member
    // after the hash's fields is named, not skipped.
    let mut server = Server::new();
    one_field_hash(&mut server, "h");
    let record = record_key(b"h", tag::SET_MEMBER, b"m").unwrap();
    server.put(&record, b"");
    assert_all_damaged(
        &mut server,
        &[&["HGETALL", "h"]],
        "a record of another type than the key's first",
        &record,
    );
}

#[test]
fn a_packed_hash_or_set_that_is_not_a_packing() {
    // Each malformed value is named by every command that reads or writes the collection.
    // (create, record, commands, [(value, damage)]): a set's members carry no values.
    type Case<'a> = (
        &'a [&'a str],
        Vec<u8>,
        &'a [&'a [&'a str]],
        [(&'a [u8], &'a str); 5],
    );
    let hash: Case = (
        &["HSET", "k", "f", "v", "g", "w"],
        record_key(b"k", tag::PACKED_HASH, &[]).unwrap(),
        &[
            &["HGET", "k", "f"],
            &["HMGET", "k", "f", "x"],
            &["HEXISTS", "k", "x"],
            &["HGETALL", "k"],
            &["HKEYS", "k"],
            &["HVALS", "k"],
            &["HLEN", "k"],
            &["HSCAN", "k", "0"],
            &["HSET", "k", "f", "1"],
            &["HSETNX", "k", "x", "1"],
            &["HINCRBY", "k", "n", "1"],
            &["HDEL", "k", "f"],
            &["HRANDFIELD", "k"],
        ],
        [
            (b"", "a packed hash without a member count"),
            (b"\x00", "a packed hash with no members"),
            (b"\x02\x01a\x011\x01b", "a packed hash cut short"),
            (
                b"\x02\x01b\x00\x01a\x00",
                "a packed hash with members out of order",
            ),
            (
                b"\x01\x01a\x011\x00",
                "a packed hash with bytes after its last member",
            ),
        ],
    );
    let set: Case = (
        &["SADD", "k", "a", "b"],
        record_key(b"k", tag::PACKED_SET, &[]).unwrap(),
        &[
            &["SISMEMBER", "k", "x"],
            &["SMISMEMBER", "k", "a", "x"],
            &["SMEMBERS", "k"],
            &["SCARD", "k"],
            &["SSCAN", "k", "0"],
            &["SADD", "k", "c"],
            &["SREM", "k", "a"],
            &["SPOP", "k"],
            &["SMOVE", "k", "t", "a"],
            &["SUNION", "k", "t"],
            &["SORT", "k", "ALPHA"],
        ],
        [
            (b"", "a packed set without a member count"),
            (b"\x00", "a packed set with no members"),
            (b"\x02\x01a\x00\x01b", "a packed set cut short"),
            (
                b"\x02\x01b\x00\x01a\x00",
                "a packed set with members out of order",
            ),
            (
                b"\x01\x01a\x00\x00",
                "a packed set with bytes after its last member",
            ),
        ],
    );
    for (create, record, commands, cases) in [hash, set] {
        for (bad, what) in cases {
            let mut server = Server::new();
            assert!(same(&server.call(create), &Reply::Integer(2)));
            server.put(&record, bad);
            assert_all_damaged(&mut server, commands, what, &record);
        }
    }
    // A set's members carry no values.
    let mut server = Server::new();
    assert!(same(&server.call(&["SADD", "s", "a"]), &Reply::Integer(1)));
    let record = record_key(b"s", tag::PACKED_SET, &[]).unwrap();
    server.put(&record, b"\x01\x01a\x011");
    assert_all_damaged(
        &mut server,
        &[&["SMEMBERS", "s"], &["SISMEMBER", "s", "a"]],
        "a packed set member with a value",
        &record,
    );
}

/// Makes `key` a hash of one field, packed.
fn one_field_hash(server: &mut Server, key: &str) {
    assert!(same(
        &server.call(&["HSET", key, "f", "v"]),
        &Reply::Integer(1)
    ));
}

/// A hash of ten 100-byte fields (YCSB's shape, 1 KiB packed) with field `f3` changed since,
/// so its packed record has a patch; returns the two records.
fn patched_hash(server: &mut Server, key: &str) -> (Vec<u8>, Vec<u8>) {
    let value = "v".repeat(100);
    let mut create = vec!["HSET", key];
    let fields: Vec<String> = (0..10).map(|n| format!("f{n}")).collect();
    for field in &fields {
        create.extend([field.as_str(), value.as_str()]);
    }
    assert!(same(&server.call(&create), &Reply::Integer(10)));
    let packed = record_key(key.as_bytes(), tag::PACKED_HASH, &[]).unwrap();
    let patch = record_key(key.as_bytes(), tag::PACKED_HASH_PATCH, &[]).unwrap();
    let whole = server.kvs().get(&packed).unwrap().unwrap();
    assert!(same(
        &server.call(&["HSET", key, "f3", "changed"]),
        &Reply::Integer(0)
    ));
    assert_eq!(server.kvs().get(&packed).unwrap().unwrap(), whole);
    assert!(server.kvs().get(&patch).unwrap().is_some());
    (packed, patch)
}

#[test]
fn a_change_to_a_large_packed_hash_is_a_patch_until_it_grows() {
    let mut server = Server::new();
    let (packed, patch) = patched_hash(&mut server, "h");
    let first = server.kvs().get(&packed).unwrap().unwrap();
    assert!(same(
        &server.call(&["HGET", "h", "f3"]),
        &Reply::Bulk(Bytes::from("changed"))
    ));
    assert!(same(&server.call(&["HLEN", "h"]), &Reply::Integer(10)));
    // A field removed and one added: still a patch, read through.
    assert!(same(&server.call(&["HDEL", "h", "f0"]), &Reply::Integer(1)));
    assert!(same(
        &server.call(&["HSET", "h", "new", "n"]),
        &Reply::Integer(1)
    ));
    assert_eq!(server.kvs().get(&packed).unwrap().unwrap(), first);
    assert!(same(
        &server.call(&["HEXISTS", "h", "f0"]),
        &Reply::Integer(0)
    ));
    assert!(same(&server.call(&["HLEN", "h"]), &Reply::Integer(10)));
    let reply = server.call(&["HGETALL", "h"]);
    let Reply::BulkMap(pairs) = &reply else {
        panic!("HGETALL answered {reply:?}");
    };
    let fields: Vec<&Bytes> = pairs.iter().map(|(field, _)| field).collect();
    let expected: Vec<Bytes> = ["f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "new"]
        .map(Bytes::from)
        .into();
    assert_eq!(fields, expected.iter().collect::<Vec<_>>());
    assert_eq!(pairs[2].1, "changed");
    assert_eq!(pairs[9].1, "n");
    // Past a quarter of the hash the patch is folded in: one record again.
    let long = "w".repeat(100);
    let folded_after = ["f1", "f2", "f4"].iter().position(|field| {
        server.call(&["HSET", "h", field, &long]);
        server.kvs().get(&patch).unwrap().is_none()
    });
    assert!(
        folded_after.is_some(),
        "three long fields took over a quarter"
    );
    assert_ne!(server.kvs().get(&packed).unwrap().unwrap(), first);
    assert!(same(
        &server.call(&["HGET", "h", "f1"]),
        &Reply::Bulk(Bytes::from(long))
    ));
    assert!(same(
        &server.call(&["OBJECT", "ENCODING", "h"]),
        &Reply::Bulk(Bytes::from("packed"))
    ));
}

#[test]
fn a_damaged_or_stray_patch_of_a_packed_collection() {
    let commands: &[&[&str]] = &[
        &["HGET", "h", "f1"],
        &["HEXISTS", "h", "x"],
        &["HGETALL", "h"],
        &["HVALS", "h"],
        &["HLEN", "h"],
        &["HSCAN", "h", "0"],
        &["HSET", "h", "f1", "1"],
        &["HDEL", "h", "f1"],
        &["HRANDFIELD", "h"],
    ];
    // A patch that is no patching, or that cannot apply to its packed record.
    let cases: [(&[u8], &str); 4] = [
        (b"\x00", "a packed hash's patch with no members"),
        (
            b"\x01\x02f3\x01\x09",
            "a packed hash's patch with a change of no kind",
        ),
        (
            b"\x01\x02zz\x01\x00",
            "a packed hash's patch removing a member its packed record lacks",
        ),
        (b"\x01\x02f3\x05\x01ab", "a packed hash's patch cut short"),
    ];
    for (bad, what) in cases {
        let mut server = Server::new();
        let (_, patch) = patched_hash(&mut server, "h");
        server.put(&patch, bad);
        assert_all_damaged(&mut server, commands, what, &patch);
    }
    // A patch whose packed record is gone.
    let mut server = Server::new();
    let (packed, patch) = patched_hash(&mut server, "h");
    server.delete(&packed);
    assert_all_damaged(
        &mut server,
        commands,
        "a packed collection's patch without its packed record",
        &patch,
    );
    // A set's patch gives no member a value.
    let mut server = Server::new();
    let members: Vec<String> = (0..12).map(|n| format!("member-{n}-{:-<30}", "")).collect();
    let mut create = vec!["SADD", "s"];
    create.extend(members.iter().map(String::as_str));
    assert!(same(&server.call(&create), &Reply::Integer(12)));
    assert!(same(
        &server.call(&["SADD", "s", "one more"]),
        &Reply::Integer(1)
    ));
    let patch = record_key(b"s", tag::PACKED_SET_PATCH, &[]).unwrap();
    assert!(server.kvs().get(&patch).unwrap().is_some());
    assert!(same(
        &server.call(&["SISMEMBER", "s", "one more"]),
        &Reply::Integer(1)
    ));
    assert!(same(&server.call(&["SCARD", "s"]), &Reply::Integer(13)));
    server.put(&patch, b"\x01\x01a\x02\x01x");
    assert_all_damaged(
        &mut server,
        &[
            &["SMEMBERS", "s"],
            &["SISMEMBER", "s", "a"],
            &["SADD", "s", "b"],
        ],
        "a packed set's patch giving a set member a value",
        &patch,
    );
}

#[test]
fn a_member_record_beside_a_packed_hash() {
    // A key is packed or a record per member, never both: reading all of it names the stray,
    // whether the packed record has a patch or not.
    for patched in [false, true] {
        let mut server = Server::new();
        if patched {
            patched_hash(&mut server, "h");
        } else {
            one_field_hash(&mut server, "h");
        }
        let record = record_key(b"h", tag::HASH_FIELD, b"g").unwrap();
        server.put(&record, b"w");
        assert_all_damaged(
            &mut server,
            &[&["HGETALL", "h"], &["HVALS", "h"]],
            "a record beside a packed collection",
            &record,
        );
    }
}

#[test]
fn layout_3_and_4_databases_are_served_and_marked_layout_5() {
    // Layout 3 had no packed records, layout 4 no patches of them: their data is served as it
    // is, and the layout record is rewritten so a server that predates packing or patches
    // refuses it rather than meet one.
    for old_layout in [LAYOUT_3_VALUE, LAYOUT_4_VALUE] {
        let mut server = Server::new();
        one_field_hash(&mut server, "h");
        server.put(LAYOUT_KEY, old_layout.as_bytes());
        let (dir, reopened) = server.restart();
        let shared = reopened.unwrap_or_else(|_| panic!("a database of {old_layout} opens"));
        let mut session = shared.new_session();
        let reply = shared
            .execute(
                &mut session,
                &mut Request::from(vec![
                    Bytes::from("HGET"),
                    Bytes::from("h"),
                    Bytes::from("f"),
                ]),
            )
            .expect("HGET does not block");
        assert!(same(&reply, &Reply::Bulk(Bytes::from("v"))), "{reply:?}");
        let layout = shared.db.kvs(KVS).unwrap().get(LAYOUT_KEY).unwrap();
        assert_eq!(layout.as_deref(), Some(LAYOUT_VALUE.as_bytes()));
        drop(shared);
        drop(dir);
    }
}
