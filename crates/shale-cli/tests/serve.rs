//! Goal: `shale serve` answers real RESP traffic correctly, survives hostile input, enforces its
//! limits and AUTH, drains on SIGTERM, and loses no acknowledged write to kill -9 under `sync`.
//! Method: start the real binary on loopback ports chosen by the OS, talk raw RESP over TCP,
//! signal the process, and reopen its KVDB.
//! (redis-py, redis-cli and redis-benchmark are exercised by
//! crates/shaledb-server/tests/clients/test_clients.py.)

mod common;

mod serve_support;

use common::damage_record;
use rand::{Rng, SeedableRng};
use serve_support::{bulk, ok, Client, Server, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

#[test]
fn commands_reply_like_redis_and_errors_keep_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &[]);
    let mut client = server.connect();
    assert_eq!(client.call(&["PING"]), Value::Status("PONG".into()));
    assert_eq!(client.call(&["SET", "k", "v"]), ok());
    assert_eq!(client.call(&["GET", "k"]), bulk("v"));
    assert_eq!(client.call(&["SET", "k", "w", "NX"]), Value::Nil);
    assert_eq!(client.call(&["SET", "k", "w", "XX", "GET"]), bulk("v"));
    assert_eq!(client.call(&["SETNX", "k", "z"]), Value::Int(0));
    assert_eq!(client.call(&["APPEND", "k", "123"]), Value::Int(4));
    assert_eq!(client.call(&["STRLEN", "k"]), Value::Int(4));
    assert_eq!(client.call(&["INCR", "n"]), Value::Int(1));
    assert_eq!(client.call(&["INCRBY", "n", "41"]), Value::Int(42));
    assert_eq!(client.call(&["DECR", "n"]), Value::Int(41));
    assert_eq!(
        client.call(&["INCR", "k"]),
        Value::Error("ERR value is not an integer or out of range".into())
    );
    assert_eq!(client.call(&["MSET", "a", "1", "b", "2"]), ok());
    assert_eq!(
        client.call(&["MGET", "a", "b", "nope"]),
        Value::Array(vec![bulk("1"), bulk("2"), Value::Nil])
    );
    assert_eq!(client.call(&["EXISTS", "a", "a", "nope"]), Value::Int(2));
    assert_eq!(client.call(&["GETDEL", "a"]), bulk("1"));
    assert_eq!(client.call(&["DEL", "a", "b", "b"]), Value::Int(1));
    assert_eq!(client.call(&["TTL", "k"]), Value::Int(-1));
    assert_eq!(client.call(&["TTL", "nope"]), Value::Int(-2));
    assert_eq!(client.call(&["SET", "t", "v", "PX", "200"]), ok());
    assert!(matches!(client.call(&["PTTL", "t"]), Value::Int(ms) if ms > 0 && ms <= 200));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(client.call(&["GET", "t"]), Value::Nil);
    assert_eq!(client.call(&["EXISTS", "t"]), Value::Int(0));

    assert_eq!(
        client.call(&["HSET", "h", "f1", "x", "f2", "y"]),
        Value::Int(2)
    );
    assert_eq!(client.call(&["HSET", "h", "f1", "z"]), Value::Int(0));
    assert_eq!(client.call(&["HGET", "h", "f1"]), bulk("z"));
    assert_eq!(client.call(&["HLEN", "h"]), Value::Int(2));
    assert_eq!(client.call(&["HEXISTS", "h", "f3"]), Value::Int(0));
    assert_eq!(
        client.call(&["HGETALL", "h"]),
        Value::Array(vec![bulk("f1"), bulk("z"), bulk("f2"), bulk("y")])
    );
    assert_eq!(client.call(&["HDEL", "h", "f1", "f9"]), Value::Int(1));
    let wrong =
        Value::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into());
    assert_eq!(client.call(&["GET", "h"]), wrong);
    assert_eq!(client.call(&["HGET", "k", "f"]), wrong);
    assert_eq!(client.call(&["ZADD", "h", "1", "m"]), wrong);
    assert_eq!(client.call(&["TYPE", "h"]), Value::Status("hash".into()));

    assert_eq!(
        client.call(&["ZADD", "z", "3", "c", "1", "a", "2", "b", "2", "b"]),
        Value::Int(3)
    );
    assert_eq!(
        client.call(&["ZADD", "z", "CH", "-1.5", "c"]),
        Value::Int(1)
    );
    assert_eq!(
        client.call(&["ZRANGEBYSCORE", "z", "-inf", "(2", "WITHSCORES"]),
        Value::Array(vec![bulk("c"), bulk("-1.5"), bulk("a"), bulk("1")])
    );
    assert_eq!(
        client.call(&["ZRANGEBYSCORE", "z", "0", "+inf", "LIMIT", "1", "5"]),
        Value::Array(vec![bulk("b")])
    );
    assert_eq!(
        client.call(&["ZRANGE", "z", "-2", "-1"]),
        Value::Array(vec![bulk("a"), bulk("b")])
    );
    // Ranks counted from the front are walked without counting the set first.
    assert_eq!(
        client.call(&["ZRANGE", "z", "1", "9"]),
        Value::Array(vec![bulk("a"), bulk("b")])
    );
    assert_eq!(
        client.call(&["ZREVRANGE", "z", "0", "0"]),
        Value::Array(vec![bulk("b")])
    );
    assert_eq!(
        client.call(&["ZRANGE", "z", "2", "1"]),
        Value::Array(vec![])
    );
    assert_eq!(
        client.call(&["ZRANGE", "nope", "0", "5"]),
        Value::Array(vec![])
    );
    assert_eq!(client.call(&["ZRANGE", "h", "1", "0"]), wrong);
    assert_eq!(client.call(&["ZRANGE", "h", "0", "1"]), wrong);
    assert_eq!(client.call(&["ZSCORE", "z", "b"]), bulk("2"));
    assert_eq!(client.call(&["ZREM", "z", "b", "nope"]), Value::Int(1));
    assert_eq!(client.call(&["ZCARD", "z"]), Value::Int(2));

    // SET replaces a hash, fields and all.
    assert_eq!(client.call(&["SET", "h", "plain"]), ok());
    assert_eq!(client.call(&["TYPE", "h"]), Value::Status("string".into()));
    assert_eq!(client.call(&["HLEN", "h"]), wrong);
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(4));

    // Errors name the problem, and the connection stays usable.
    assert_eq!(
        client.call(&["NOSUCH", "x"]),
        Value::Error("ERR unknown command 'NOSUCH', with args beginning with: 'x' ".into())
    );
    assert_eq!(
        client.call(&["GET"]),
        Value::Error("ERR wrong number of arguments for 'get' command".into())
    );
    assert_eq!(
        client.call(&["SET", "k", "v", "EX", "0"]),
        Value::Error("ERR invalid expire time in 'set' command".into())
    );
    assert_eq!(
        client.call(&["SELECT", "99"]),
        Value::Error("ERR DB index is out of range".into())
    );
    let long_key = "k".repeat(2000);
    assert!(
        matches!(client.call(&["SET", &long_key, "v"]), Value::Error(message) if message.contains("too large"))
    );
    assert_eq!(client.call(&["SELECT", "1"]), ok());
    assert_eq!(client.call(&["GET", "k"]), Value::Nil);
    assert_eq!(client.call(&["SELECT", "0"]), ok());
    assert_eq!(client.call(&["GET", "k"]), bulk("w123"));

    // Pipelining: many requests in one write, replies in order.
    let mut pipeline = Vec::new();
    for index in 0..500 {
        pipeline.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n$6\r\np{index:05}\r\n$3\r\n{:03}\r\n",
                index % 1000
            )
            .as_bytes(),
        );
    }
    pipeline.extend_from_slice(b"PING\r\n");
    client.reader.get_mut().write_all(&pipeline).unwrap();
    for _ in 0..500 {
        assert_eq!(client.read().unwrap(), ok());
    }
    assert_eq!(client.read().unwrap(), Value::Status("PONG".into()));

    // SCAN visits every key exactly once across its cursors.
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let Value::Array(reply) = client.call(&["SCAN", &cursor, "MATCH", "p*", "COUNT", "37"])
        else {
            panic!("SCAN replies with an array");
        };
        let Value::Bulk(next) = &reply[0] else {
            panic!()
        };
        let Value::Array(keys) = &reply[1] else {
            panic!()
        };
        for key in keys {
            let Value::Bulk(key) = key else { panic!() };
            assert!(seen.insert(key.clone()), "SCAN returned a key twice");
        }
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 500);
    assert_eq!(client.call(&["FLUSHDB"]), ok());
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(0));

    // RESP3 after HELLO 3: maps, doubles and nulls.
    let Value::Map(hello) = client.call(&["HELLO", "3"]) else {
        panic!("HELLO 3 replies with a map");
    };
    assert!(hello.contains(&(bulk("proto"), Value::Int(3))));
    assert_eq!(client.call(&["GET", "nope"]), Value::Nil);
    client.call(&["HSET", "h3", "f", "v"]);
    assert_eq!(
        client.call(&["HGETALL", "h3"]),
        Value::Map(vec![(bulk("f"), bulk("v"))])
    );
    client.call(&["ZADD", "z3", "0.5", "m"]);
    assert_eq!(
        client.call(&["ZSCORE", "z3", "m"]),
        Value::Double("0.5".into())
    );
    assert_eq!(client.call(&["QUIT"]), ok());
    assert!(client.is_closed());
}

#[test]
fn incr_rewrites_a_counter_in_place_keeping_what_redis_keeps() {
    // INCR of an existing counter rewrites its record with one lookup; every other case goes
    // the general way. Both must keep the TTL, count the key once, and wake WATCH.
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &[]);
    let mut client = server.connect();
    assert_eq!(client.call(&["SET", "n", "10", "EX", "100"]), ok());
    assert_eq!(client.call(&["INCRBY", "n", "5"]), Value::Int(15));
    assert_eq!(client.call(&["DECR", "n"]), Value::Int(14));
    assert!(
        matches!(client.call(&["TTL", "n"]), Value::Int(ttl) if (1..=100).contains(&ttl)),
        "INCR keeps the TTL"
    );
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(1));
    // An expired counter starts again from zero, without a TTL.
    assert_eq!(client.call(&["SET", "gone", "41", "PX", "1"]), ok());
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(client.call(&["INCR", "gone"]), Value::Int(1));
    assert_eq!(client.call(&["TTL", "gone"]), Value::Int(-1));
    // Overflow and a value that is no integer leave the counter as it was.
    assert_eq!(client.call(&["SET", "big", &i64::MAX.to_string()]), ok());
    assert_eq!(
        client.call(&["INCR", "big"]),
        Value::Error("ERR increment or decrement would overflow".into())
    );
    assert_eq!(client.call(&["GET", "big"]), bulk(&i64::MAX.to_string()));
    assert_eq!(client.call(&["SET", "word", "ten"]), ok());
    assert_eq!(
        client.call(&["INCR", "word"]),
        Value::Error("ERR value is not an integer or out of range".into())
    );
    // A string longer than a record is kept as a blob: no counter either.
    let long = "1".repeat(600 << 10);
    assert_eq!(client.call(&["SET", "long", &long]), ok());
    assert_eq!(
        client.call(&["INCR", "long"]),
        Value::Error("ERR value is not an integer or out of range".into())
    );
    assert_eq!(client.call(&["RPUSH", "list", "a"]), Value::Int(1));
    assert!(
        matches!(client.call(&["INCR", "list"]), Value::Error(e) if e.starts_with("WRONGTYPE"))
    );
    // WATCH sees a counter rewritten by another client.
    assert_eq!(client.call(&["WATCH", "n"]), ok());
    let mut other = server.connect();
    assert_eq!(other.call(&["INCR", "n"]), Value::Int(15));
    assert_eq!(client.call(&["MULTI"]), ok());
    assert_eq!(client.call(&["INCR", "n"]), Value::Status("QUEUED".into()));
    assert_eq!(client.call(&["EXEC"]), Value::Nil);
    assert_eq!(client.call(&["GET", "n"]), bulk("15"));
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(6));
}

#[test]
fn large_collections_are_counted_and_sampled_from_the_index_as_a_walk_would() {
    // Past the packed size a set, hash and sorted set hold a record per member; SCARD, HLEN
    // and ZCARD count them and SPOP and SRANDMEMBER pick them from the index, leaf by leaf.
    // Inside MULTI, after the transaction's own writes, they walk the records instead.
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &[]);
    let mut client = server.connect();
    let members: Vec<String> = (0..3000).map(|n| format!("member:{n:06}")).collect();
    for chunk in members.chunks(500) {
        let mut sadd = vec!["SADD", "set"];
        let mut hset = vec!["HSET", "hash"];
        let mut zadd = vec!["ZADD", "zset"];
        for member in chunk {
            sadd.push(member);
            hset.extend([member.as_str(), "v"]);
            zadd.extend(["1", member.as_str()]);
        }
        assert_eq!(client.call(&sadd), Value::Int(500));
        assert_eq!(client.call(&hset), Value::Int(500));
        assert_eq!(client.call(&zadd), Value::Int(500));
    }
    assert_eq!(client.call(&["SCARD", "set"]), Value::Int(3000));
    assert_eq!(client.call(&["HLEN", "hash"]), Value::Int(3000));
    assert_eq!(client.call(&["ZCARD", "zset"]), Value::Int(3000));
    let name = |value: &Value| match value {
        Value::Bulk(bytes) => String::from_utf8(bytes.clone()).unwrap(),
        other => panic!("a member, not {other:?}"),
    };
    // Random picks spread over the set (all 200 from one member would mean a biased pick).
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let member = name(&client.call(&["SRANDMEMBER", "set"]));
        assert!(members.contains(&member), "{member} was never added");
        seen.insert(member);
    }
    assert!(seen.len() > 100, "200 picks found {} members", seen.len());
    let Value::Array(five) = client.call(&["SRANDMEMBER", "set", "5"]) else {
        panic!("SRANDMEMBER with a count answers an array");
    };
    let five: std::collections::BTreeSet<String> = five.iter().map(name).collect();
    assert_eq!(five.len(), 5, "distinct members");
    // A negative count draws with repeats, each draw a member, reading only those drawn; with
    // WITHVALUES and WITHSCORES each comes with its own value or score.
    let Value::Array(drawn) = client.call(&["SRANDMEMBER", "set", "-4000"]) else {
        panic!("SRANDMEMBER with a negative count answers an array");
    };
    assert_eq!(drawn.len(), 4000);
    let drawn: Vec<String> = drawn.iter().map(name).collect();
    assert!(drawn.iter().all(|member| members.contains(member)));
    let distinct: std::collections::BTreeSet<&String> = drawn.iter().collect();
    assert!(
        (1000..4000).contains(&distinct.len()),
        "4000 draws of 3000 members found {} distinct ones",
        distinct.len()
    );
    for (command, key, with, value) in [
        ("HRANDFIELD", "hash", "WITHVALUES", "v"),
        ("ZRANDMEMBER", "zset", "WITHSCORES", "1"),
    ] {
        let Value::Array(pairs) = client.call(&[command, key, "-7", with]) else {
            panic!("{command} answers an array");
        };
        assert_eq!(pairs.len(), 14);
        for pair in pairs.chunks(2) {
            assert!(members.contains(&name(&pair[0])));
            assert_eq!(pair[1], bulk(value));
        }
    }
    let Value::Array(fields) = client.call(&["HRANDFIELD", "hash", "6"]) else {
        panic!("HRANDFIELD with a count answers an array");
    };
    let fields: std::collections::BTreeSet<String> = fields.iter().map(name).collect();
    assert_eq!(fields.len(), 6, "distinct fields");
    assert!(members.contains(&name(&client.call(&["ZRANDMEMBER", "zset"]))));
    // Ranks counted from the back are walked from the back, in either direction.
    let names = |value: Value| match value {
        Value::Array(items) => items.iter().map(name).collect::<Vec<_>>(),
        other => panic!("a range answers an array, not {other:?}"),
    };
    for (command, start, stop, expected) in [
        ("ZRANGE", "-3", "-1", &members[2997..]),
        ("ZRANGE", "-10", "-8", &members[2990..2993]),
        ("ZRANGE", "2990", "-8", &members[2990..2993]),
        ("ZRANGE", "-3000", "-2999", &members[..2]),
        ("ZRANGE", "-2", "-3", &members[..0]),
    ] {
        assert_eq!(
            names(client.call(&[command, "zset", start, stop])),
            expected
        );
    }
    let mut backwards: Vec<String> = members[..3].to_vec();
    backwards.reverse();
    assert_eq!(
        names(client.call(&["ZREVRANGE", "zset", "-3", "-1"])),
        backwards
    );
    assert_eq!(
        client.call(&["ZRANGE", "zset", "-1", "-1", "WITHSCORES"]),
        Value::Array(vec![bulk(&members[2999]), bulk("1")])
    );
    // A negative count past the reply limit is refused, but not for a missing key, which
    // answers an empty array whatever the count.
    let huge = (-(i64::MAX / 2)).to_string();
    match client.call(&["SRANDMEMBER", "set", &huge]) {
        Value::Error(message) => assert!(message.contains("max_output_bytes"), "{message}"),
        other => panic!("a draw past the reply limit answered {other:?}"),
    }
    assert_eq!(
        client.call(&["SRANDMEMBER", "missing", &huge]),
        Value::Array(vec![])
    );
    // SPOP removes what it answers, and the count follows.
    let mut popped = std::collections::BTreeSet::new();
    for _ in 0..50 {
        popped.insert(name(&client.call(&["SPOP", "set"])));
    }
    let Value::Array(more) = client.call(&["SPOP", "set", "100"]) else {
        panic!("SPOP with a count answers an array");
    };
    popped.extend(more.iter().map(name));
    assert_eq!(popped.len(), 150, "no member popped twice");
    assert_eq!(client.call(&["SCARD", "set"]), Value::Int(2850));
    for member in &popped {
        assert_eq!(client.call(&["SISMEMBER", "set", member]), Value::Int(0));
    }
    // Inside MULTI the transaction's own adds and removes are counted.
    assert_eq!(client.call(&["MULTI"]), ok());
    for command in [
        &["SADD", "set", "new"][..],
        &["SREM", "set", &members[0], &members[1]],
        &["SCARD", "set"],
        &["HDEL", "hash", &members[2]],
        &["HLEN", "hash"],
    ] {
        assert_eq!(client.call(command), Value::Status("QUEUED".into()));
    }
    let Value::Array(replies) = client.call(&["EXEC"]) else {
        panic!("EXEC answers an array");
    };
    let removed = [&members[0], &members[1]]
        .iter()
        .filter(|member| !popped.contains(**member))
        .count() as i64;
    assert_eq!(replies[2], Value::Int(2851 - removed));
    assert_eq!(replies[4], Value::Int(2999));
    // The last members of a set popped one by one, then none.
    assert_eq!(client.call(&["DEL", "set"]), Value::Int(1));
    assert_eq!(client.call(&["SPOP", "set"]), Value::Nil);
    assert_eq!(client.call(&["SCARD", "set"]), Value::Int(0));
}

#[test]
fn garbage_and_huge_headers_get_an_error_and_a_closed_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &["--max-bulk-bytes", "1048576"]);
    for attack in [
        &b"*1\r\n$4294967296\r\n"[..],
        b"*2\r\n$3\r\nGET\r\n$2000000\r\n",
        b"*99999999999\r\n",
        b"*1\r\n+PING\r\n",
        b"*1\r\n$4\r\nPINGxx",
    ] {
        let mut client = server.connect();
        client.reader.get_mut().write_all(attack).unwrap();
        match client.read() {
            Some(Value::Error(message)) => {
                assert!(message.starts_with("ERR Protocol error"), "{message}")
            }
            other => panic!("{:?} got {other:?}", String::from_utf8_lossy(attack)),
        }
        assert!(client.is_closed());
    }
    // Random bytes, some after a valid prefix; the server must survive every one of them.
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for round in 0..200 {
        let mut stream = TcpStream::connect(&server.address).unwrap();
        let mut bytes: Vec<u8> = (0..rng.gen_range(1..600)).map(|_| rng.gen()).collect();
        if round % 2 == 0 {
            bytes.splice(0..0, b"*2\r\n$3\r\nGET\r\n".iter().copied());
        }
        let _ = stream.write_all(&bytes);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink);
    }
    let mut client = server.connect();
    assert_eq!(client.call(&["PING"]), Value::Status("PONG".into()));
}

#[test]
fn limits_auth_metrics_and_sigterm_drain() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let config = dir.path().join("shale.toml");
    std::fs::write(
        &config,
        "password = \"s3cret\"\nmaxclients = 1\nidle_timeout = 100\n",
    )
    .unwrap();
    let server = Server::start(
        &db,
        &[
            "--config",
            config.to_str().unwrap(),
            "--maxclients",
            "2",
            "--admin-bind",
            "127.0.0.1:0",
        ],
    );
    let mut first = server.connect();
    assert_eq!(
        first.call(&["GET", "k"]),
        Value::Error("NOAUTH Authentication required.".into())
    );
    assert_eq!(
        first.call(&["AUTH", "wrong"]),
        Value::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert_eq!(first.call(&["AUTH", "s3cret"]), ok());
    assert_eq!(first.call(&["SET", "k", "v"]), ok());
    let mut second = server.connect();
    assert!(matches!(
        second.call(&["HELLO", "3", "AUTH", "default", "s3cret"]),
        Value::Map(_)
    ));
    // The flag (2) beat the file (1): a third client is refused.
    let mut third = server.connect();
    assert_eq!(
        third.read(),
        Some(Value::Error("ERR max number of clients reached".into()))
    );
    assert!(third.is_closed());

    let (status, metrics) = server.admin_get("/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("shale_commands_total{command=\"set\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("shale_connections_rejected_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("shale_media_written_bytes_total{class=\"capacity\",purpose=\"clients\"}")
    );
    assert!(metrics.contains("shale_command_duration_seconds_bucket{"));
    assert_eq!(server.admin_get("/livez").0, 200);
    assert_eq!(server.admin_get("/readyz").0, 200);

    // SIGTERM with a pipeline in flight: every write the client saw acknowledged is kept.
    let mut pipeline = Vec::new();
    for index in 0..2000 {
        pipeline.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n$5\r\nd{index:04}\r\n$1\r\nx\r\n").as_bytes(),
        );
    }
    first.reader.get_mut().write_all(&pipeline).unwrap();
    server.signal("TERM");
    let mut acknowledged = 0;
    while let Some(reply) = first.read() {
        assert_eq!(reply, ok());
        acknowledged += 1;
    }
    assert!(second.is_closed(), "idle clients are closed by the drain");
    let status = server.wait();
    assert!(status.success(), "{status:?}");
    let restarted = Server::start(&db, &[]);
    let mut client = restarted.connect();
    for index in 0..acknowledged {
        assert_eq!(client.call(&["GET", &format!("d{index:04}")]), bulk("x"));
    }
    assert_eq!(client.call(&["GET", "k"]), bulk("v"));
}

/// A pipeline of writes to one key runs under the key's stripe lock held from one command to
/// the next: a client blocked on the key is served between them (the lock let go first: kept,
/// the server would wait for itself), other clients' writes to the key go through after it, and
/// a transaction on the key in the same pipeline locks it itself.
#[test]
fn a_pipeline_of_writes_to_one_key_serves_clients_blocked_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &[]);
    let mut blocked = server.connect();
    blocked.send(&[b"BLPOP", b"list", b"0"]);
    let mut admin = server.connect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !matches!(admin.call(&["INFO", "clients"]), Value::Bulk(info) if String::from_utf8_lossy(&info).contains("blocked_clients:1"))
    {
        assert!(Instant::now() < deadline, "BLPOP never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut writer = server.connect();
    let replies = writer.pipeline(&requests(&[
        &["LPUSH", "list", "a"],
        &["LPUSH", "list", "b"],
        &["LPUSH", "list", "c"],
        &["MULTI"],
        &["LPUSH", "list", "d"],
        &["EXEC"],
        &["RPUSH", "list", "e"],
    ]));
    assert_eq!(
        replies,
        [
            Value::Int(1),
            Value::Int(1),
            Value::Int(2),
            ok(),
            Value::Status("QUEUED".into()),
            Value::Array(vec![Value::Int(3)]),
            Value::Int(4),
        ]
    );
    assert_eq!(
        blocked.read(),
        Some(Value::Array(vec![bulk("list"), bulk("a")])),
        "the blocked client took the first element pushed"
    );
    assert_eq!(admin.call(&["LPUSH", "list", "f"]), Value::Int(5));
    assert_eq!(
        admin.call(&["LRANGE", "list", "0", "-1"]),
        Value::Array(["f", "d", "c", "b", "e"].map(bulk).to_vec())
    );
}

fn requests<'a>(commands: &[&[&'a str]]) -> Vec<Vec<&'a [u8]>> {
    commands
        .iter()
        .map(|args| args.iter().map(|arg| arg.as_bytes()).collect())
        .collect()
}

/// The number `INFO stats` gives for `field`.
fn info_stat(client: &mut Client, field: &str) -> u64 {
    let Value::Bulk(info) = client.call(&["INFO", "stats"]) else {
        panic!("INFO answers a bulk string")
    };
    named_number(&String::from_utf8(info).unwrap(), field, ':')
}

/// The number on the line of `text` that starts with `name` and `separator`.
fn named_number(text: &str, name: &str, separator: char) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(separator))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .parse()
        .unwrap()
}

/// Many clients pipelining writes to one key from several network threads (docs/SERVER.md,
/// "Where commands run": `--network-threads` of them, and a stripe's pipelines run on one
/// thread at a time, the others handing theirs over): every write is applied once, each
/// client's in its own order, and each reply is the one its command earned.
#[test]
fn pipelines_of_many_clients_on_one_key_run_once_each_in_their_clients_order() {
    const CLIENTS: usize = 8;
    const PIPELINES: usize = 20;
    const DEPTH: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &["--network-threads", "4"]);
    let threads = std::fs::read_dir(format!("/proc/{}/task", server.child.id()))
        .unwrap()
        .filter(|task| {
            let comm = task.as_ref().unwrap().path().join("comm");
            std::fs::read_to_string(comm).is_ok_and(|name| name.trim() == "shale-serve")
        })
        .count();
    assert_eq!(
        threads, 4,
        "--network-threads starts that many network threads"
    );
    let writers: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let mut connection = server.connect();
            std::thread::spawn(move || {
                let mut last_length = 0;
                for pipeline in 0..PIPELINES {
                    let elements: Vec<String> = (0..DEPTH)
                        .map(|n| format!("c{client}:{}", pipeline * DEPTH + n))
                        .collect();
                    let requests: Vec<Vec<&[u8]>> = elements
                        .iter()
                        .map(|element| vec![&b"RPUSH"[..], b"hot", element.as_bytes()])
                        .collect();
                    for reply in connection.pipeline(&requests) {
                        let Value::Int(length) = reply else {
                            panic!("RPUSH answers the list's length: {reply:?}");
                        };
                        assert!(
                            length > last_length,
                            "lengths grow: {length} after {last_length}"
                        );
                        last_length = length;
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let mut client = server.connect();
    let Value::Array(elements) = client.call(&["LRANGE", "hot", "0", "-1"]) else {
        panic!("LRANGE answers an array");
    };
    assert_eq!(elements.len(), CLIENTS * PIPELINES * DEPTH);
    let mut next = [0usize; CLIENTS];
    for element in elements {
        let Value::Bulk(element) = element else {
            panic!("an element is a bulk string");
        };
        let element = String::from_utf8(element).unwrap();
        let (client, n) = element[1..].split_once(':').unwrap();
        let client: usize = client.parse().unwrap();
        assert_eq!(
            n.parse::<usize>().unwrap(),
            next[client],
            "client {client}'s order"
        );
        next[client] += 1;
    }
    assert!(
        info_stat(&mut client, "combined_pipelines") > 0,
        "some pipelines ran on another connection's turn"
    );
}

/// Runs `client` (given its number, its connection and a flag to stop at) on `count`
/// connections to `server`, each on a thread of its own, until `done` holds or 30 s passed;
/// what each client returned.
fn run_clients_until<T: Send + 'static>(
    server: &Server,
    count: usize,
    client: impl Fn(usize, Client, &AtomicBool) -> T + Send + Sync + 'static,
    mut done: impl FnMut() -> bool,
) -> Vec<T> {
    let stop = Arc::new(AtomicBool::new(false));
    let client = Arc::new(client);
    let threads: Vec<_> = (0..count)
        .map(|number| {
            let (connection, stop, client) = (server.connect(), stop.clone(), client.clone());
            std::thread::spawn(move || client(number, connection, &stop))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    threads
        .into_iter()
        .map(|thread| thread.join().unwrap())
        .collect()
}

/// The balancer (`network_threads.rs`) tries another number of network threads every second
/// under load, and connections move to their new thread between two pipelines: each client's
/// replies still come in order, one per request, and every write lands once.
#[test]
fn connections_keep_their_order_as_they_move_between_network_threads() {
    const CLIENTS: usize = 4;
    const DEPTH: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &["--network-threads", "2"]);
    let mut observer = server.connect();
    let moves = |observer: &mut Client| info_stat(observer, "network_thread_moves");
    assert_eq!(moves(&mut observer), 0);
    let pushes = |client: usize, mut connection: Client, stop: &AtomicBool| {
        let key = format!("list{client}");
        let mut pushed = 0;
        while !stop.load(Ordering::Relaxed) {
            let elements: Vec<String> = (pushed..pushed + DEPTH).map(|n| n.to_string()).collect();
            let requests: Vec<Vec<&[u8]>> = elements
                .iter()
                .map(|element| vec![&b"RPUSH"[..], key.as_bytes(), element.as_bytes()])
                .collect();
            for reply in connection.pipeline(&requests) {
                pushed += 1;
                assert_eq!(reply, Value::Int(pushed as i64), "one reply per request");
            }
        }
        (key, pushed)
    };
    let writers = run_clients_until(&server, CLIENTS, pushes, || moves(&mut observer) >= 2);
    let moved = moves(&mut observer);
    for (key, pushed) in writers {
        let Value::Array(elements) = observer.call(&["LRANGE", &key, "0", "-1"]) else {
            panic!("LRANGE answers an array");
        };
        let expected: Vec<Value> = (0..pushed)
            .map(|n| Value::Bulk(n.to_string().into_bytes()))
            .collect();
        assert!(elements == expected, "{key}: every element once, in order");
    }
    assert!(moved >= 2, "connections moved {moved} times under load");
}

/// The balancer places the connections for the shape of the load (`network_threads.rs`):
/// INFO names the shape it placed them for, pipelined under clients writing fifty commands at a
/// time, interactive under clients writing one, and it follows the load from one to the other.
#[test]
fn info_names_the_shape_of_the_load_the_network_threads_follow() {
    const CLIENTS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &["--network-threads", "2"]);
    let mut observer = server.connect();
    let load = |observer: &mut Client| {
        let Value::Bulk(info) = observer.call(&["INFO", "stats"]) else {
            panic!("INFO answers a bulk string")
        };
        let info = String::from_utf8(info).unwrap();
        let shape = info
            .lines()
            .find_map(|line| line.strip_prefix("network_threads_load:"))
            .unwrap_or_else(|| panic!("no network_threads_load in {info}"));
        shape.to_string()
    };
    assert_eq!(load(&mut observer), "none", "no load yet");
    for (depth, shape) in [(50, "pipelined"), (1, "interactive"), (50, "pipelined")] {
        let sets = move |client: usize, mut connection: Client, stop: &AtomicBool| {
            let key = format!("key{client}");
            let requests = vec![vec![&b"SET"[..], key.as_bytes(), b"value"]; depth];
            while !stop.load(Ordering::Relaxed) {
                assert!(connection
                    .pipeline(&requests)
                    .iter()
                    .all(|reply| *reply == ok()));
            }
        };
        run_clients_until(&server, CLIENTS, sets, || load(&mut observer) == shape);
        assert_eq!(
            load(&mut observer),
            shape,
            "under {CLIENTS} clients writing {depth} commands at a time"
        );
    }
}

/// `INFO shaledb` shows the engine's space and its cleaner (docs/SERVER.md, "Operations").
#[test]
fn info_shaledb_reports_space_and_the_cleaner() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &[]);
    let mut client = server.connect();
    for round in 0..3 {
        assert_eq!(client.call(&["SET", "k", &format!("value {round}")]), ok());
    }
    let Value::Bulk(info) = client.call(&["INFO", "shaledb"]) else {
        panic!("INFO answers a bulk string")
    };
    let info = String::from_utf8(info).unwrap();
    let live = named_number(&info, "live_bytes", ':');
    assert!(live > 0, "{info}");
    assert!(named_number(&info, "total_bytes", ':') >= live, "{info}");
    // Nothing is dead enough to clean in a KVDB this small.
    assert_eq!(named_number(&info, "cleaner_segments_cleaned", ':'), 0);
    assert_eq!(named_number(&info, "cleaner_bytes_copied", ':'), 0);
    assert!(info.contains("cleaner_live_fraction_avg:0.0000"), "{info}");
    assert_eq!(named_number(&info, "cleaner_index_walks", ':'), 0);
    assert_eq!(named_number(&info, "cleaner_steps_deferred", ':'), 0);
}

/// Commands are counted per pipeline run (docs/SERVER.md, "Operations"): INFO sees every command
/// of its own pipeline before it, and INFO and /metrics agree.
#[test]
fn info_and_metrics_count_every_command_of_a_pipeline_before_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &["--admin-bind", "127.0.0.1:0"]);
    let mut client = server.connect();
    assert_eq!(client.call(&["SET", "k", "v"]), ok());
    let replies = client.pipeline(&requests(&[
        &["GET", "k"],
        &["GET", "k"],
        &["GET", "k"],
        &["INCR", "k"],
        &["GET", "k"],
        &["INFO", "commandstats"],
    ]));
    let Value::Bulk(info) = &replies[5] else {
        panic!("INFO answers a bulk string: {replies:?}")
    };
    let info = String::from_utf8(info.clone()).unwrap();
    let stat = |command: &str, field: &str| {
        let line = info
            .lines()
            .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:")))
            .unwrap_or_else(|| panic!("no {command} in {info}"));
        named_number(&line.replace(',', "\n"), field, '=')
    };
    assert_eq!(stat("get", "calls"), 4, "{info}");
    assert_eq!(stat("incr", "calls"), 1, "{info}");
    assert_eq!(stat("incr", "failed_calls"), 1, "{info}");
    assert_eq!(stat("set", "calls"), 1, "{info}");
    // SET, 4 GETs, INCR and the INFO just run.
    assert_eq!(info_stat(&mut client, "total_commands_processed"), 7);
    let (_, metrics) = server.admin_get("/metrics");
    for line in [
        "shale_commands_total{command=\"get\"} 4",
        "shale_command_errors_total{command=\"incr\"} 1",
        "shale_command_duration_seconds_count{command=\"get\"} 4",
        "shale_commands_total{command=\"info\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} missing from {metrics}");
    }
}

/// A pipeline's writes to one key are committed together, at most `max_batched_writes` at a
/// time; a command that fails among them takes back only its own writes, and the others'
/// replies are the same as if each had committed alone.
#[test]
fn a_pipeline_of_writes_to_one_key_commits_them_together_up_to_max_batched_writes() {
    let mut commands: Vec<Vec<String>> = (0..10)
        .map(|index| vec!["RPUSH".into(), "list".into(), format!("e{index}")])
        .collect();
    commands.push(vec!["INCR".into(), "list".into()]);
    commands.push(vec!["LSET".into(), "list".into(), "99".into(), "x".into()]);
    commands.push(vec!["RPUSH".into(), "list".into(), "last".into()]);
    commands.push(vec!["LLEN".into(), "list".into()]);
    let requests: Vec<Vec<&[u8]>> = commands
        .iter()
        .map(|args| args.iter().map(|arg| arg.as_bytes()).collect())
        .collect();
    let mut expected: Vec<Value> = (1..=10).map(Value::Int).collect();
    expected.push(Value::Error(
        "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
    ));
    expected.push(Value::Error("ERR index out of range".into()));
    expected.push(Value::Int(11));
    expected.push(Value::Int(11));
    // 11 writing commands that succeed: one commit by default, three in runs of 4 with 4.
    for (flags, commits) in [(&[][..], 1), (&["--max-batched-writes", "4"][..], 3)] {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(&dir.path().join("db"), flags);
        let mut client = server.connect();
        let before = info_stat(&mut client, "write_commits");
        assert_eq!(client.pipeline(&requests), expected, "{flags:?}");
        let after = info_stat(&mut client, "write_commits");
        assert_eq!(after - before, commits, "{flags:?}");
        let mut elements: Vec<Value> = (0..10).map(|index| bulk(&format!("e{index}"))).collect();
        elements.push(bulk("last"));
        assert_eq!(
            client.call(&["LRANGE", "list", "0", "-1"]),
            Value::Array(elements)
        );
    }
}

/// Writes to different keys are not batched, under `sync` either: there, the pipeline's
/// commits share one sync anyway (the syncer).
#[test]
fn a_pipeline_of_writes_to_many_keys_commits_them_one_by_one_under_any_durability() {
    let keys: Vec<String> = (0..10).map(|index| format!("key{index}")).collect();
    let requests: Vec<Vec<&[u8]>> = keys
        .iter()
        .map(|key| vec![&b"SET"[..], key.as_bytes(), b"v"])
        .collect();
    for durability in ["sync", "interval"] {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(&dir.path().join("db"), &["--durability", durability]);
        let mut client = server.connect();
        let before = info_stat(&mut client, "write_commits");
        assert!(client
            .pipeline(&requests)
            .iter()
            .all(|reply| *reply == ok()));
        let after = info_stat(&mut client, "write_commits");
        assert_eq!(after - before, 10, "{durability}");
        assert_eq!(client.call(&["DBSIZE"]), Value::Int(10));
        assert_eq!(client.call(&["GET", "key9"]), bulk("v"));
    }
}

/// When the commit of a pipeline's batched writes fails (here: the space is full), every one
/// of them answers the error: a client is never told a write happened that did not.
#[test]
fn batched_writes_whose_commit_fails_all_answer_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &["--space-mb", "384", "--cache-mb", "16"],
    );
    let mut client = server.connect();
    // Below the 512 KiB a value is streamed from: these go through the log, batched.
    let value = vec![b'v'; 256 * 1024];
    let requests: Vec<Vec<&[u8]>> = (0..8)
        .map(|_| vec![&b"RPUSH"[..], b"list", &value])
        .collect();
    let mut acknowledged = 0i64;
    let mut refusals = 0;
    for _ in 0..4096 {
        for reply in client.pipeline(&requests) {
            match reply {
                Value::Int(length) => {
                    assert_eq!(refusals, 0, "a write acknowledged after a refusal");
                    acknowledged += 1;
                    assert_eq!(length, acknowledged);
                }
                Value::Error(message) => {
                    assert!(message.starts_with("ERR out of space"), "{message}");
                    refusals += 1;
                }
                other => panic!("RPUSH answered {other:?}"),
            }
        }
        if refusals > 0 {
            break;
        }
    }
    assert!(refusals > 0, "384 MiB of space held 1 GiB");
    assert!(acknowledged > 0, "not even one value fitted");
    assert_eq!(client.call(&["LLEN", "list"]), Value::Int(acknowledged));
}

#[test]
fn idle_clients_are_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    // Set through the environment: SHALE_IDLE_TIMEOUT beats the default.
    let server =
        Server::start_with_env(&dir.path().join("db"), &[], &[("SHALE_IDLE_TIMEOUT", "1")]);
    let mut client = server.connect();
    assert_eq!(client.call(&["PING"]), Value::Status("PONG".into()));
    let started = Instant::now();
    assert!(client.is_closed());
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[test]
fn kill_9_loses_no_acknowledged_write_with_sync_durability() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut acknowledged: Vec<(String, String)> = Vec::new();
    // Elements of a list one client pushes to in pipelines (batched writes), acknowledged.
    let mut pushed: Vec<(String, usize)> = Vec::new();
    for round in 0..3 {
        // The second round runs commands on the pool, which waits for each sync on its thread;
        // the others inline, where the syncer thread syncs for the network threads.
        let executor = if round == 1 { "pool" } else { "inline" };
        let server = Server::start(&db, &["--durability", "sync", "--executor", executor]);
        let address = server.address.clone();
        let list = format!("r{round}list");
        let pusher = {
            let (address, list) = (address.clone(), list.clone());
            std::thread::spawn(move || {
                let mut client = Client::new(TcpStream::connect(address).unwrap());
                let mut acknowledged = 0;
                loop {
                    let elements: Vec<String> = (acknowledged..acknowledged + 16)
                        .map(|i| i.to_string())
                        .collect();
                    let requests: Vec<Vec<&[u8]>> = elements
                        .iter()
                        .map(|element| vec![&b"RPUSH"[..], list.as_bytes(), element.as_bytes()])
                        .collect();
                    if client.send_all(&requests).is_err() {
                        return acknowledged;
                    }
                    for _ in 0..16 {
                        match client.read() {
                            Some(Value::Int(length)) if length as usize == acknowledged + 1 => {
                                acknowledged += 1
                            }
                            _ => return acknowledged,
                        }
                    }
                }
            })
        };
        let (sender, receiver) = mpsc::channel();
        let writers: Vec<_> = (0..4)
            .map(|writer| {
                let (address, sender) = (address.clone(), sender.clone());
                std::thread::spawn(move || {
                    let mut client = Client::new(TcpStream::connect(address).unwrap());
                    for index in 0.. {
                        let key = format!("r{round}w{writer}i{index}");
                        let value = format!("value-{index}");
                        let set = vec![&b"SET"[..], key.as_bytes(), value.as_bytes()];
                        // One writer wraps its SETs in MULTI/EXEC, which commits on its own.
                        let in_multi = writer == 3;
                        let requests = if in_multi {
                            vec![vec![&b"MULTI"[..]], set, vec![&b"EXEC"[..]]]
                        } else {
                            vec![set]
                        };
                        if client.send_all(&requests).is_err() {
                            return;
                        }
                        if in_multi
                            && !(client.read() == Some(ok())
                                && client.read() == Some(Value::Status("QUEUED".into())))
                        {
                            return;
                        }
                        let acknowledged = if in_multi {
                            Value::Array(vec![ok()])
                        } else {
                            ok()
                        };
                        match client.read() {
                            Some(reply) if reply == acknowledged => {
                                sender.send((key, value)).unwrap()
                            }
                            _ => return,
                        }
                    }
                })
            })
            .collect();
        drop(sender);
        acknowledged.extend(server.kill_while_writing(writers, receiver));
        pushed.push((list, pusher.join().unwrap()));
        let restarted = Server::start(&db, &[]);
        let mut client = restarted.connect();
        for (list, count) in &pushed {
            let Value::Array(stored) = client.call(&["LRANGE", list, "0", "-1"]) else {
                panic!("LRANGE answers an array")
            };
            assert!(
                stored.len() >= *count,
                "{list}: {count} acknowledged, {} stored",
                stored.len()
            );
            for (index, element) in stored.iter().take(*count).enumerate() {
                assert_eq!(*element, bulk(&index.to_string()), "{list}[{index}]");
            }
        }
        for (key, value) in &acknowledged {
            assert_eq!(
                client.call(&["GET", key]),
                bulk(value),
                "acknowledged {key} was lost"
            );
        }
    }
    assert!(
        acknowledged.len() > 100,
        "only {} writes",
        acknowledged.len()
    );
    let pushed: usize = pushed.iter().map(|(_, count)| count).sum();
    assert!(pushed > 100, "only {pushed} pipelined pushes");
}

/// Under `sync`, an element handed to a blocked BLPOP is popped durably before the client sees
/// it: after kill -9, no element a consumer received is back in the list, and every element a
/// pusher saw acknowledged was either received or is still there, but for at most one per
/// consumer: popped, with its reply not yet read when the server died (as in Redis, a popped
/// element goes with a reply the client never gets; docs/SERVER.md, "Blocking commands").
#[test]
fn kill_9_after_blocked_pops_under_sync_durability_returns_no_popped_element() {
    const CONSUMERS: usize = 3;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let server = Server::start(&db, &["--durability", "sync"]);
    let (sender, receiver) = mpsc::channel();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (address, sender) = (server.address.clone(), sender.clone());
            std::thread::spawn(move || {
                let mut client = Client::new(TcpStream::connect(address).unwrap());
                loop {
                    if client
                        .send_all(&[vec![&b"BLPOP"[..], b"queue", b"0"]])
                        .is_err()
                    {
                        return;
                    }
                    match client.read() {
                        Some(Value::Array(reply)) if reply.len() == 2 => {
                            let Value::Bulk(element) = &reply[1] else {
                                return;
                            };
                            sender
                                .send(String::from_utf8(element.clone()).unwrap())
                                .unwrap();
                        }
                        _ => return,
                    }
                }
            })
        })
        .collect();
    drop(sender);
    let pusher = {
        let address = server.address.clone();
        std::thread::spawn(move || {
            let mut client = Client::new(TcpStream::connect(address).unwrap());
            let mut pushed = 0usize;
            loop {
                let element = pushed.to_string();
                if client
                    .send_all(&[vec![&b"RPUSH"[..], b"queue", element.as_bytes()]])
                    .is_err()
                {
                    return pushed;
                }
                match client.read() {
                    Some(Value::Int(_)) => pushed += 1,
                    _ => return pushed,
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(400));
    drop(server); // SIGKILL, then reap.
    let pushed = pusher.join().unwrap();
    for consumer in consumers {
        consumer.join().unwrap();
    }
    let received: std::collections::BTreeSet<usize> = receiver
        .iter()
        .map(|element| element.parse().unwrap())
        .collect();
    assert!(received.len() > 20, "only {} pops", received.len());
    let restarted = Server::start(&db, &[]);
    let mut client = restarted.connect();
    let Value::Array(left) = client.call(&["LRANGE", "queue", "0", "-1"]) else {
        panic!("LRANGE answers an array")
    };
    let left: std::collections::BTreeSet<usize> = left
        .iter()
        .map(|element| match element {
            Value::Bulk(bytes) => std::str::from_utf8(bytes).unwrap().parse().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    for element in &received {
        assert!(
            !left.contains(element),
            "popped {element} is back in the list"
        );
    }
    let popped_unread: Vec<usize> = (0..pushed)
        .filter(|element| !received.contains(element) && !left.contains(element))
        .collect();
    assert!(
        popped_unread.len() <= CONSUMERS,
        "acknowledged pushes neither received nor in the list: {popped_unread:?}"
    );
}

#[test]
fn a_damaged_record_is_an_error_reply_never_a_nil() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let server = Server::start(&db, &[]);
    let mut client = server.connect();
    assert_eq!(
        client.call(&["SET", "damaged", "value-to-damage-0123456789"]),
        ok()
    );
    assert_eq!(client.call(&["SET", "intact", "value-kept"]), ok());
    drop(client);
    server.signal("TERM");
    assert!(server.wait().success());
    damage_record(&db, b"value-to-damage", 3, 0x01);
    let restarted = Server::start(&db, &[]);
    let mut client = restarted.connect();
    match client.call(&["GET", "damaged"]) {
        Value::Error(message) => assert!(
            message.contains("corrupt") && message.contains("seg-"),
            "{message}"
        ),
        other => panic!("a damaged record answered {other:?}"),
    }
    assert_eq!(client.call(&["GET", "intact"]), bulk("value-kept"));
}

/// A raw Redis-layout record key: the key's length (4 bytes BE), the key, a tag, a suffix.
fn layout_record(key: &[u8], tag: u8, suffix: &[u8]) -> Vec<u8> {
    let mut out = (key.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(key);
    out.push(tag);
    out.extend_from_slice(suffix);
    out
}

#[test]
fn a_layout_1_database_is_upgraded_and_expiry_counts_and_transactions_survive_restarts() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // Layout 1, as the previous server wrote it: a plain string, a string with a TTL (tag `x`:
    // expiry ms, then the value) and a hash, with no layout record and no key counts.
    let far = (std::time::SystemTime::now() + Duration::from_secs(3600))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut ttl_value = far.to_be_bytes().to_vec();
    ttl_value.extend_from_slice(b"hello");
    let engine = base64::engine::general_purpose::STANDARD;
    let lines: String = [
        (layout_record(b"plain", b's', b""), b"value".to_vec()),
        (layout_record(b"timed", b'x', b""), ttl_value),
        (layout_record(b"user", b'h', b"name"), b"Ada".to_vec()),
        // An expiry-queue entry, as an upgrade that crashed after its first batch leaves one:
        // the next upgrade must go on, not refuse the KVS.
        (
            [
                &[1u8][..],
                &far.to_be_bytes(),
                &layout_record(b"timed", b's', b"")[..9],
            ]
            .concat(),
            Vec::new(),
        ),
    ]
    .iter()
    .map(|(key, value)| {
        format!(
            "{{\"kvs\":\"redis-0\",\"key\":\"{}\",\"value\":\"{}\"}}\n",
            engine.encode(key),
            engine.encode(value)
        )
    })
    .collect();
    let input = dir.path().join("layout1.jsonl");
    std::fs::write(&input, lines).unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_shale"))
        .arg("--db")
        .arg(&db)
        .args(["load", input.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());

    let server = Server::start(&db, &[]);
    let mut client = server.connect();
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(3));
    assert_eq!(client.call(&["GET", "timed"]), bulk("hello"));
    let Value::Int(ttl) = client.call(&["TTL", "timed"]) else {
        panic!("TTL is an integer")
    };
    assert!((3590..=3600).contains(&ttl), "{ttl}");
    assert_eq!(client.call(&["HGET", "user", "name"]), bulk("Ada"));
    // Expiry on every type, removed in the background; lists and sets counted like the rest.
    assert_eq!(
        client.call(&["RPUSH", "list", "a", "b", "c"]),
        Value::Int(3)
    );
    assert_eq!(client.call(&["SADD", "set", "x", "y"]), Value::Int(2));
    assert_eq!(client.call(&["PEXPIRE", "set", "150"]), Value::Int(1));
    assert_eq!(client.call(&["EXPIRE", "list", "3600"]), Value::Int(1));
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(5));
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(client.call(&["EXISTS", "set"]), Value::Int(0));
    assert_eq!(
        client.call(&["DBSIZE"]),
        Value::Int(4),
        "the expirer removed set"
    );
    // MULTI/EXEC applies everything at once; WATCH fails EXEC after another client's write.
    assert_eq!(client.call(&["MULTI"]), ok());
    assert_eq!(
        client.call(&["INCR", "counter"]),
        Value::Status("QUEUED".into())
    );
    assert_eq!(
        client.call(&["LPUSH", "list", "z"]),
        Value::Status("QUEUED".into())
    );
    assert_eq!(
        client.call(&["HGET", "list", "f"]),
        Value::Status("QUEUED".into())
    );
    match client.call(&["EXEC"]) {
        Value::Array(replies) => {
            assert_eq!(replies[0], Value::Int(1));
            assert_eq!(replies[1], Value::Int(4));
            assert!(matches!(&replies[2], Value::Error(e) if e.starts_with("WRONGTYPE")));
        }
        other => panic!("EXEC answered {other:?}"),
    }
    // SWAPDB is refused inside a transaction (its swap would not be part of the batch).
    assert_eq!(client.call(&["MULTI"]), ok());
    assert_eq!(
        client.call(&["SWAPDB", "0", "1"]),
        Value::Status("QUEUED".into())
    );
    assert_eq!(
        client.call(&["EXEC"]),
        Value::Array(vec![Value::Error(
            "ERR SWAPDB inside MULTI is not supported by ShaleDB".into()
        )])
    );
    assert_eq!(
        client.call(&["LINDEX", "list", "9223372036854775807"]),
        Value::Nil
    );
    assert_eq!(
        client.call(&["LINDEX", "list", "-9223372036854775808"]),
        Value::Nil
    );
    assert_eq!(
        client.call(&["HINCRBYFLOAT", "floats", "f", "+inf"]),
        Value::Error("ERR value is NaN or Infinity".into())
    );
    assert_eq!(client.call(&["EXISTS", "floats"]), Value::Int(0));
    let mut other = server.connect();
    assert_eq!(client.call(&["WATCH", "counter"]), ok());
    assert_eq!(other.call(&["INCR", "counter"]), Value::Int(2));
    assert_eq!(client.call(&["MULTI"]), ok());
    assert_eq!(
        client.call(&["SET", "counter", "100"]),
        Value::Status("QUEUED".into())
    );
    assert_eq!(client.call(&["EXEC"]), Value::Nil);
    assert_eq!(client.call(&["GET", "counter"]), bulk("2"));
    drop((client, other));
    server.signal("TERM");
    assert!(server.wait().success());

    let restarted = Server::start(&db, &[]);
    let mut client = restarted.connect();
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(5));
    assert_eq!(
        client.call(&["LRANGE", "list", "0", "-1"]),
        Value::Array(vec![bulk("z"), bulk("a"), bulk("b"), bulk("c")])
    );
    let Value::Int(ttl) = client.call(&["TTL", "list"]) else {
        panic!("TTL is an integer")
    };
    assert!(ttl > 3500, "the expiry survived the restart: {ttl}");
    assert_eq!(client.call(&["GET", "plain"]), bulk("value"));
    // SWAPDB exchanges the databases' KVSs, and the exchange survives a restart.
    assert_eq!(client.call(&["SWAPDB", "0", "1"]), ok());
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(0));
    drop(client);
    restarted.signal("TERM");
    assert!(restarted.wait().success());
    let swapped = Server::start(&db, &[]);
    let mut client = swapped.connect();
    assert_eq!(client.call(&["EXISTS", "plain"]), Value::Int(0));
    assert_eq!(client.call(&["SELECT", "1"]), ok());
    assert_eq!(client.call(&["GET", "plain"]), bulk("value"));
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(5));
    // SWAPDB changes, for WATCH, every watched key that exists in either database, as in Redis:
    // one that exists here, then one that exists only in the other database.
    let mut other = swapped.connect();
    for _ in 0..2 {
        assert_eq!(client.call(&["WATCH", "plain"]), ok());
        assert_eq!(other.call(&["SWAPDB", "0", "1"]), ok());
        assert_eq!(client.call(&["MULTI"]), ok());
        assert_eq!(client.call(&["PING"]), Value::Status("QUEUED".into()));
        assert_eq!(client.call(&["EXEC"]), Value::Nil);
    }
    assert_eq!(client.call(&["GET", "plain"]), bulk("value"));
    assert_eq!(client.call(&["FLUSHALL"]), ok());
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(0));
}

/// A value of `length` bytes that shows a misplaced chunk (not one repeated byte).
fn long_value(length: usize, seed: u8) -> Vec<u8> {
    (0..length).map(|at| ((at % 251) as u8) ^ seed).collect()
}

fn long_bulk(length: usize, seed: u8) -> Value {
    Value::Bulk(long_value(length, seed))
}

/// `assert_eq!` for replies holding megabytes: says where they differ, not what they hold.
#[track_caller]
fn assert_same(actual: Value, expected: Value) {
    fn outline(value: &Value) -> String {
        match value {
            Value::Bulk(data) => format!("bulk of {} bytes", data.len()),
            Value::Array(items) => format!(
                "[{}]",
                items.iter().map(outline).collect::<Vec<_>>().join(", ")
            ),
            other => format!("{other:?}"),
        }
    }
    assert!(
        actual == expected,
        "{} != {}",
        outline(&actual),
        outline(&expected)
    );
}

#[test]
fn long_string_values_behave_like_any_string() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let server = Server::start(&db, &[]);
    let mut client = server.connect();
    let (a, b, c) = (
        long_value(2 << 20, 1),
        long_value((1 << 20) + 7, 2),
        long_value(3 << 20, 3),
    );
    // MSET with two long values among short ones, and MGET of them.
    client.send(&[b"MSET", b"a", &a, b"s", b"short", b"b", &b]);
    assert_eq!(client.read(), Some(ok()));
    client.send(&[b"MGET", b"a", b"s", b"b", b"none"]);
    assert_same(
        client.read().unwrap(),
        Value::Array(vec![
            long_bulk(a.len(), 1),
            bulk("short"),
            long_bulk(b.len(), 2),
            Value::Nil,
        ]),
    );
    // SET's options, SETNX, GETSET, SETEX.
    client.send(&[b"SET", b"a", &c, b"GET"]);
    assert_same(client.read().unwrap(), long_bulk(a.len(), 1));
    client.send(&[b"SETNX", b"a", &b]);
    assert_eq!(client.read(), Some(Value::Int(0)));
    client.send(&[b"GETSET", b"a", &a]);
    assert_same(client.read().unwrap(), long_bulk(c.len(), 3));
    client.send(&[b"SETEX", b"ttl", b"100", &c]);
    assert_eq!(client.read(), Some(ok()));
    assert_eq!(client.call(&["TTL", "ttl"]), Value::Int(100));
    assert_eq!(client.call(&["STRLEN", "ttl"]), Value::Int(c.len() as i64));
    // In-memory commands on a long string work within max_in_memory_string_bytes.
    assert_eq!(
        client.call(&["APPEND", "b", "tail"]),
        Value::Int(b.len() as i64 + 4)
    );
    let mut b_tail = b.clone();
    b_tail.extend_from_slice(b"tail");
    assert_same(client.call(&["GET", "b"]), Value::Bulk(b_tail.clone()));
    assert_eq!(
        client.call(&["GETRANGE", "b", "-6", "-1"]),
        Value::Bulk(b_tail[b_tail.len() - 6..].to_vec())
    );
    // MULTI: a long value set and read in one transaction; FLUSHALL then SET keeps the new one.
    assert_eq!(client.call(&["MULTI"]), ok());
    client.send(&[b"SET", b"m", &c]);
    assert_eq!(client.read(), Some(Value::Status("QUEUED".into())));
    assert_eq!(client.call(&["GET", "m"]), Value::Status("QUEUED".into()));
    assert_same(
        client.call(&["EXEC"]),
        Value::Array(vec![ok(), long_bulk(c.len(), 3)]),
    );
    // RENAME, COPY to another database and MOVE carry the value; the source goes.
    assert_eq!(client.call(&["RENAME", "m", "renamed"]), ok());
    assert_eq!(client.call(&["EXISTS", "m"]), Value::Int(0));
    assert_eq!(
        client.call(&["COPY", "renamed", "copied", "DB", "1"]),
        Value::Int(1)
    );
    assert_eq!(client.call(&["MOVE", "renamed", "2"]), Value::Int(1));
    assert_eq!(client.call(&["SELECT", "1"]), ok());
    assert_same(client.call(&["GET", "copied"]), long_bulk(c.len(), 3));
    assert_eq!(client.call(&["SELECT", "2"]), ok());
    assert_same(client.call(&["GET", "renamed"]), long_bulk(c.len(), 3));
    // A value sent while database 2 is selected, set in database 3 by a queued SELECT.
    assert_eq!(client.call(&["MULTI"]), ok());
    assert_eq!(
        client.call(&["SELECT", "3"]),
        Value::Status("QUEUED".into())
    );
    client.send(&[b"SET", b"elsewhere", &a]);
    assert_eq!(client.read(), Some(Value::Status("QUEUED".into())));
    assert_eq!(client.call(&["EXEC"]), Value::Array(vec![ok(), ok()]));
    assert_same(client.call(&["GET", "elsewhere"]), long_bulk(a.len(), 1));
    assert_eq!(client.call(&["SELECT", "0"]), ok());
    assert_eq!(client.call(&["MULTI"]), ok());
    assert_eq!(client.call(&["FLUSHALL"]), Value::Status("QUEUED".into()));
    client.send(&[b"SET", b"after-flush", &b]);
    assert_eq!(client.read(), Some(Value::Status("QUEUED".into())));
    assert_eq!(client.call(&["EXEC"]), Value::Array(vec![ok(), ok()]));
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(1));
    // A failed command drops its value: WRONGTYPE from GETSET on a list.
    assert_eq!(client.call(&["RPUSH", "list", "x"]), Value::Int(1));
    client.send(&[b"GETSET", b"list", &a]);
    assert!(
        matches!(client.read(), Some(Value::Error(message)) if message.starts_with("WRONGTYPE"))
    );
    // Everything as it was after a restart.
    drop(client);
    server.signal("TERM");
    server.wait();
    let server = Server::start(&db, &[]);
    let mut client = server.connect();
    assert_same(client.call(&["GET", "after-flush"]), long_bulk(b.len(), 2));
    // FLUSHALL emptied the other databases, blobs and all.
    assert_eq!(client.call(&["SELECT", "3"]), ok());
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(0));
}

/// The value of the metric `name` (a gauge without labels) in a `/metrics` page.
fn gauge(server: &Server, name: &str) -> u64 {
    let (_, metrics) = server.admin_get("/metrics");
    named_number(&metrics, name, ' ')
}

/// A stopped server saves the keys its cache holds (`HOME/warm-keys`); the next start reads
/// their values back into the cache before any client asks, unless `--warm-reads-per-sec 0`.
#[test]
fn a_restarted_server_warms_its_cache_from_the_last_run() {
    // Longer than the engine keeps in an index entry (`index_value_bytes_max`): such a value
    // lives in the cache, and is what warming reads back.
    const CACHED: &str = "a value of more than sixteen bytes";
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let admin = ["--admin-bind", "127.0.0.1:0"];
    let server = Server::start(&db, &admin);
    let mut client = server.connect();
    for index in 0..100 {
        let key = format!("key:{index}");
        assert_eq!(client.call(&["SET", &key, CACHED]), ok());
        assert_eq!(client.call(&["GET", &key]), bulk(CACHED));
    }
    drop(client);
    server.signal("TERM");
    assert!(server.wait().success());
    assert!(
        db.join("warm-keys").is_file(),
        "the stop saved the cache's keys"
    );

    let server = Server::start(&db, &admin);
    let deadline = Instant::now() + Duration::from_secs(20);
    while gauge(&server, "shale_warm_values_read") < 100 {
        assert!(Instant::now() < deadline, "the cache was not warmed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(gauge(&server, "shale_warm_keys_files_rejected"), 0);
    server.signal("TERM");
    assert!(server.wait().success());

    let server = Server::start(&db, &["--warm-reads-per-sec", "0", admin[0], admin[1]]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        gauge(&server, "shale_warm_values_read"),
        0,
        "warming is off"
    );
    let mut client = server.connect();
    assert_eq!(client.call(&["GET", "key:7"]), bulk(CACHED));
}
