//! Goal: `shale serve --memcached` answers memcached's text and meta protocol as memcached 1.6
//! does. Method: a script of commands whose replies were recorded from Debian's memcached
//! 1.6.18, sent to the real binary on one connection; CAS values are compared by role, not by
//! number. `./scripts/memcached-diff` checks the recorded replies: it runs this test against
//! Debian's memcached itself (`SHALE_MEMCACHED_PEER=host:port`).

mod serve_support;

use serve_support::Server;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// (command bytes, memcached's reply). `{CAS}` is the CAS unique the last `gets` returned;
/// `CAS` in a reply stands for any CAS unique; `{LONG_KEY}` is a 251-byte key.
const SCRIPT: &[(&[u8], &[u8])] = &[
    (b"set a 5 0 3\r\nabc\r\n", b"STORED\r\n"),
    (b"get a\r\n", b"VALUE a 5 3\r\nabc\r\nEND\r\n"),
    (b"gets a\r\n", b"VALUE a 5 3 CAS\r\nabc\r\nEND\r\n"),
    (b"get a b\r\n", b"VALUE a 5 3\r\nabc\r\nEND\r\n"),
    (b"add a 0 0 1\r\nx\r\n", b"NOT_STORED\r\n"),
    (b"add b 7 0 2\r\nbb\r\n", b"STORED\r\n"),
    (b"replace c 0 0 1\r\nx\r\n", b"NOT_STORED\r\n"),
    (b"replace b 1 0 3\r\nbbb\r\n", b"STORED\r\n"),
    (
        b"get a b c\r\n",
        b"VALUE a 5 3\r\nabc\r\nVALUE b 1 3\r\nbbb\r\nEND\r\n",
    ),
    (b"append a 9 0 2\r\nde\r\n", b"STORED\r\n"),
    (b"prepend a 9 0 2\r\nzz\r\n", b"STORED\r\n"),
    (b"get a\r\n", b"VALUE a 5 7\r\nzzabcde\r\nEND\r\n"),
    (b"append nope 0 0 1\r\nx\r\n", b"NOT_STORED\r\n"),
    (b"gets a\r\n", b"VALUE a 5 7 CAS\r\nzzabcde\r\nEND\r\n"),
    (b"cas a 3 0 1 {CAS}\r\nq\r\n", b"STORED\r\n"),
    (b"cas a 3 0 1 {CAS}\r\nr\r\n", b"EXISTS\r\n"),
    (b"cas nope 0 0 1 1\r\nx\r\n", b"NOT_FOUND\r\n"),
    (b"get a\r\n", b"VALUE a 3 1\r\nq\r\nEND\r\n"),
    (b"set n 0 0 2\r\n10\r\n", b"STORED\r\n"),
    (b"incr n 5\r\n", b"15\r\n"),
    (b"decr n 100\r\n", b"0\r\n"),
    (
        b"incr n 18446744073709551615\r\n",
        b"18446744073709551615\r\n",
    ),
    (
        b"incr a 1\r\n",
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    ),
    (b"incr nope 1\r\n", b"NOT_FOUND\r\n"),
    (
        b"incr n x\r\n",
        b"CLIENT_ERROR invalid numeric delta argument\r\n",
    ),
    (b"decr n 1 noreply\r\n", b""),
    (
        b"get n\r\n",
        b"VALUE n 0 20\r\n18446744073709551614\r\nEND\r\n",
    ),
    (b"delete a\r\n", b"DELETED\r\n"),
    (b"delete a\r\n", b"NOT_FOUND\r\n"),
    (b"delete b 0\r\n", b"DELETED\r\n"),
    (
        b"delete b 5\r\n",
        b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
    ),
    (b"delete\r\n", b"ERROR\r\n"),
    (b"touch n 100\r\n", b"TOUCHED\r\n"),
    (b"touch nope 100\r\n", b"NOT_FOUND\r\n"),
    (
        b"gat 100 n nope\r\n",
        b"VALUE n 0 20\r\n18446744073709551614\r\nEND\r\n",
    ),
    (
        b"gats 0 n\r\n",
        b"VALUE n 0 20 CAS\r\n18446744073709551614\r\nEND\r\n",
    ),
    (b"set exp 0 -1 1\r\nx\r\n", b"STORED\r\n"),
    (b"get exp\r\n", b"END\r\n"),
    (
        b"set big 0 0 x\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    ),
    (b"bogus\r\n", b"ERROR\r\n"),
    (b"get\r\n", b"ERROR\r\n"),
    (b"set k\r\n", b"ERROR\r\n"),
    // 266-byte command
    (
        b"set {LONG_KEY} 0 0 1\r\nx\r\n",
        b"CLIENT_ERROR bad command line format\r\nERROR\r\n",
    ),
    // 257-byte command
    (
        b"get {LONG_KEY}\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    ),
    (b"set noreply 0 0 1 noreply\r\nx\r\n", b""),
    (b"get noreply\r\n", b"VALUE noreply 0 1\r\nx\r\nEND\r\n"),
    (b"verbosity 1\r\n", b"OK\r\n"),
    (b"verbosity 1 noreply\r\n", b""),
    (b"mn\r\n", b"MN\r\n"),
    // memaslap's keys start with control bytes; memcached takes them.
    (b"set \x10\x10ctl 0 0 1\r\nc\r\n", b"STORED\r\n"),
    (
        b"get \x10\x10ctl\r\n",
        b"VALUE \x10\x10ctl 0 1\r\nc\r\nEND\r\n",
    ),
    (b"ms m1 3 T0 F5\r\nxyz\r\n", b"HD\r\n"),
    (b"mg m1 v f s t\r\n", b"VA 3 f5 s3 t-1\r\nxyz\r\n"),
    (b"mg m1 k O123 v\r\n", b"VA 3 km1 O123\r\nxyz\r\n"),
    (b"mg nope v\r\n", b"EN\r\n"),
    (b"mg nope v q\r\nmn\r\n", b"MN\r\n"),
    (b"mg m1\r\n", b"HD\r\n"),
    (b"mg m1 c\r\n", b"HD cCAS\r\n"),
    (b"ms m1 1 ME\r\nq\r\n", b"NS\r\n"),
    (b"ms m2 1 ME\r\nq\r\n", b"HD\r\n"),
    (b"ms m2 1 MA\r\nr\r\n", b"HD\r\n"),
    (b"ms m2 1 MP\r\ns\r\n", b"HD\r\n"),
    (b"mg m2 v\r\n", b"VA 3\r\nsqr\r\n"),
    (b"ms m3 1 MR\r\nx\r\n", b"NS\r\n"),
    (b"ms m2 1 C1\r\nx\r\n", b"EX\r\n"),
    (b"ms m2 1 q\r\nx\r\nmn\r\n", b"MN\r\n"),
    (b"ms m2 2 k O9 c\r\nyy\r\n", b"HD km2 O9 cCAS\r\n"),
    (b"md m2\r\n", b"HD\r\n"),
    (b"md m2\r\n", b"NF\r\n"),
    (b"md m2 q\r\nmn\r\n", b"NF\r\nMN\r\n"),
    (b"md m1 q\r\nmn\r\n", b"MN\r\n"),
    (b"md m1 O5 k\r\n", b"NF O5 km1\r\n"),
    (b"ma cnt\r\n", b"NF\r\n"),
    (b"ma cnt N0 J10\r\n", b"HD\r\n"),
    (b"ma cnt v\r\n", b"VA 2\r\n11\r\n"),
    (b"ma cnt MD D3 v\r\n", b"VA 1\r\n8\r\n"),
    (b"ma cnt D100 MD v\r\n", b"VA 1\r\n0\r\n"),
    (b"ms txt 1\r\nx\r\n", b"HD\r\n"),
    (
        b"ma txt\r\n",
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    ),
    (b"ma cnt q\r\nmn\r\n", b"MN\r\n"),
    (b"ma cnt v t\r\n", b"VA 1 t-1\r\n2\r\n"),
    (b"mg m1 z\r\n", b"CLIENT_ERROR invalid flag\r\n"),
    // b: the key token is base64 (here of "bin\0key \x01"); k returns the token, then b.
    (b"ms YmluAGtleSAB 2 b\r\nhi\r\n", b"HD\r\n"),
    (
        b"ms YmluAGtleSAB 2 b k c\r\nhi\r\n",
        b"HD kYmluAGtleSAB b c2\r\n",
    ),
    (
        b"mg YmluAGtleSAB b k v s\r\n",
        b"VA 2 kYmluAGtleSAB b s2\r\nhi\r\n",
    ),
    (b"mg YmluAGtleSAB b\r\n", b"HD\r\n"),
    (b"mg YmluAGtleSAB k v\r\n", b"EN kYmluAGtleSAB\r\n"),
    (
        b"ma YmluAGtleSAB b\r\n",
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    ),
    (b"mg !!!! b k\r\n", b"CLIENT_ERROR error decoding key\r\n"),
    (b"mg aGk b v\r\n", b"CLIENT_ERROR error decoding key\r\n"),
    (b"md YmluAGtleSAB b k q\r\n", b""),
    (b"md YmluAGtleSAB b k\r\n", b"NF kYmluAGtleSAB b\r\n"),
    (b"ms aGk= 1 b\r\nx\r\n", b"HD\r\n"),
    (b"get hi\r\n", b"VALUE hi 0 1\r\nx\r\nEND\r\n"),
    (b"flush_all\r\n", b"OK\r\n"),
    (b"get n cnt\r\n", b"END\r\n"),
    (b"flush_all noreply\r\n", b""),
];

/// Reads what the server sends within a short quiet period (some commands answer nothing).
fn read_reply(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_millis(150)))
        .unwrap();
    let mut reply = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&buffer[..n]),
            Err(_) => break,
        }
    }
    reply
}

/// Replaces every CAS unique (after a `VALUE key flags bytes`, or a meta ` c` flag) by `CAS`,
/// and returns the last `gets` one.
fn normalise(reply: &[u8]) -> (Vec<u8>, Option<String>) {
    let text = String::from_utf8_lossy(reply).into_owned();
    let mut cas = None;
    let mut lines = Vec::new();
    for line in text.split("\r\n") {
        let words: Vec<&str> = line.split(' ').collect();
        if words.first() == Some(&"VALUE") && words.len() == 5 {
            cas = Some(words[4].to_string());
            lines.push(format!("{} CAS", words[..4].join(" ")));
            continue;
        }
        let meta = ["HD", "VA", "EN", "NF", "NS", "EX"].contains(&words[0]);
        let words: Vec<String> = words
            .iter()
            .map(|word| {
                let is_cas = meta
                    && word.len() > 1
                    && word.starts_with('c')
                    && word[1..].bytes().all(|byte| byte.is_ascii_digit());
                if is_cas {
                    "cCAS".to_string()
                } else {
                    word.to_string()
                }
            })
            .collect();
        lines.push(words.join(" "));
    }
    (lines.join("\r\n").into_bytes(), cas)
}

/// The memcached address a server logged at start.
fn memcached_address(server: &Server) -> String {
    server
        .startup_logs
        .iter()
        .find_map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            (event["message"] == "memcached listening")
                .then(|| event["address"].as_str().unwrap().to_string())
        })
        .expect("the server logs its memcached address")
}

#[test]
fn memcached_limits_hold() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &[
            "--memcached",
            "127.0.0.1:0",
            "--memcached-maxclients",
            "2",
            "--max-output-bytes",
            "1048576",
        ],
    );
    let address = memcached_address(&server);
    let mut first = TcpStream::connect(&address).unwrap();
    // An item one byte over the largest: refused, its data read past, the connection usable.
    let too_large = 1_048_556;
    let mut command = format!("set big 0 0 {too_large}\r\n").into_bytes();
    command.resize(command.len() + too_large, b'x');
    command.extend_from_slice(b"\r\nget big\r\n");
    first.write_all(&command).unwrap();
    let mut reply = Vec::new();
    while !reply.ends_with(b"END\r\n") {
        let more = read_reply(&mut first);
        assert!(
            !more.is_empty(),
            "no reply after {:?}",
            String::from_utf8_lossy(&reply)
        );
        reply.extend_from_slice(&more);
    }
    assert_eq!(reply, b"SERVER_ERROR object too large for cache\r\nEND\r\n");
    let largest = too_large - 1;
    let mut command = format!("set big 0 0 {largest}\r\n").into_bytes();
    command.resize(command.len() + largest, b'y');
    command.extend_from_slice(b"\r\n");
    first.write_all(&command).unwrap();
    assert_eq!(read_reply(&mut first), b"STORED\r\n");
    // memcached_maxclients (2): a third client is refused while two are connected.
    let mut second = TcpStream::connect(&address).unwrap();
    second.write_all(b"version\r\n").unwrap();
    assert!(read_reply(&mut second).starts_with(b"VERSION "));
    let mut third = TcpStream::connect(&address).unwrap();
    assert_eq!(
        read_reply(&mut third),
        b"SERVER_ERROR too many open connections\r\n"
    );
    // A get whose reply would pass max_output_bytes (1 MiB here) is refused, not built.
    let mut command = b"get".to_vec();
    for _ in 0..3 {
        command.extend_from_slice(b" big");
    }
    command.extend_from_slice(b"\r\n");
    first.write_all(&command).unwrap();
    assert_eq!(
        read_reply(&mut first),
        b"SERVER_ERROR out of memory writing get response\r\n"
    );
    // A length no item can have: refused (what follows is read past, as memcached does).
    second
        .write_all(b"set huge 0 0 18446744073709551615\r\n")
        .unwrap();
    assert_eq!(
        read_reply(&mut second),
        b"SERVER_ERROR object too large for cache\r\n"
    );
    // A command line past 64 KiB: answered and closed.
    let mut line = b"get ".to_vec();
    line.resize(70_000, b'k');
    first.write_all(&line).unwrap();
    assert_eq!(read_reply(&mut first), b"CLIENT_ERROR line too long\r\n");
}

#[test]
fn memcached_commands_reply_as_memcached_does() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &["--memcached", "127.0.0.1:0"]);
    // With a peer (scripts/memcached-diff), the script goes to memcached itself instead.
    let address =
        std::env::var("SHALE_MEMCACHED_PEER").unwrap_or_else(|_| memcached_address(&server));
    let mut stream = TcpStream::connect(address).unwrap();
    let long_key = "k".repeat(251);
    let mut cas = "0".to_string();
    let mut differences = Vec::new();
    for (command, expected) in SCRIPT {
        let command = String::from_utf8_lossy(command)
            .replace("{CAS}", &cas)
            .replace("{LONG_KEY}", &long_key);
        stream.write_all(command.as_bytes()).unwrap();
        let (reply, seen_cas) = normalise(&read_reply(&mut stream));
        if let Some(seen) = seen_cas {
            cas = seen;
        }
        let (expected, _) = normalise(expected);
        if reply != expected {
            differences.push(format!(
                "{:?}: memcached {:?}, this server {:?}",
                &command[..command.len().min(60)],
                String::from_utf8_lossy(&expected),
                String::from_utf8_lossy(&reply)
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn a_delayed_flush_all_empties_the_cache_when_its_time_comes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &["--memcached", "127.0.0.1:0"]);
    let mut stream = TcpStream::connect(memcached_address(&server)).unwrap();
    let mut exchange = |command: &str| {
        stream.write_all(command.as_bytes()).unwrap();
        String::from_utf8(read_reply(&mut stream)).unwrap()
    };
    assert_eq!(exchange("set k 0 0 1\r\nv\r\n"), "STORED\r\n");
    // memcached counts the delay less a second: 1 flushes at once, 2 within a second.
    assert_eq!(exchange("flush_all 1\r\n"), "OK\r\n");
    assert_eq!(exchange("get k\r\n"), "END\r\n");
    assert_eq!(exchange("set k 0 0 1\r\nv\r\n"), "STORED\r\n");
    assert_eq!(exchange("flush_all 2\r\n"), "OK\r\n");
    assert_eq!(exchange("get k\r\n"), "VALUE k 0 1\r\nv\r\nEND\r\n");
    // Stored before the flush's time: flushed with the rest, as memcached does.
    assert_eq!(exchange("set later 0 0 1\r\nw\r\n"), "STORED\r\n");
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(exchange("get k later\r\n"), "END\r\n");
    assert_eq!(exchange("set after 0 0 1\r\nx\r\n"), "STORED\r\n");
    assert_eq!(exchange("get after\r\n"), "VALUE after 0 1\r\nx\r\nEND\r\n");
    assert_eq!(
        exchange("flush_all x\r\n"),
        "CLIENT_ERROR invalid exptime argument\r\n"
    );
}

/// Under `sync` a set is acknowledged once the syncer has made it durable (with every other
/// connection's writes of the moment, off the network thread): writers on plain and pipelined
/// connections, the server killed with SIGKILL while they write, and every acknowledged item
/// is there after a restart.
#[test]
fn kill_9_loses_no_acknowledged_memcached_set_under_sync_durability() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let memcached = ["--memcached", "127.0.0.1:0"];
    let server = Server::start(&db, &[&["--durability", "sync"][..], &memcached].concat());
    let address = memcached_address(&server);
    let (sender, receiver) = std::sync::mpsc::channel();
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let (address, sender) = (address.clone(), sender.clone());
            // Writer 0 pipelines eight sets per write; the others send one at a time.
            let pipeline = if writer == 0 { 8 } else { 1 };
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(address).unwrap();
                let mut replies = BufReader::new(stream.try_clone().unwrap());
                for round in 0.. {
                    let keys: Vec<String> = (0..pipeline)
                        .map(|index| format!("w{writer}r{round}i{index}"))
                        .collect();
                    let mut command = Vec::new();
                    for key in &keys {
                        command.extend_from_slice(
                            format!("set {key} 0 0 {}\r\n{key}\r\n", key.len()).as_bytes(),
                        );
                    }
                    if stream.write_all(&command).is_err() {
                        return;
                    }
                    for key in keys {
                        let mut line = String::new();
                        match replies.read_line(&mut line) {
                            Ok(_) if line == "STORED\r\n" => sender.send(key).unwrap(),
                            _ => return,
                        }
                    }
                }
            })
        })
        .collect();
    drop(sender);
    let acknowledged = server.kill_while_writing(writers, receiver);
    assert!(acknowledged.len() > 100, "only {} sets", acknowledged.len());
    let restarted = Server::start(&db, &memcached);
    let mut client = TcpStream::connect(memcached_address(&restarted)).unwrap();
    let mut replies = BufReader::new(client.try_clone().unwrap());
    for key in &acknowledged {
        client
            .write_all(format!("get {key}\r\n").as_bytes())
            .unwrap();
        let mut reply = String::new();
        while !reply.ends_with("END\r\n") {
            let read = replies.read_line(&mut reply).unwrap();
            assert!(read > 0, "the server closed the connection at {key}");
        }
        let expected = format!("VALUE {key} 0 {}\r\n{key}\r\nEND\r\n", key.len());
        assert_eq!(reply, expected, "acknowledged {key} was lost");
    }
}
