//! Goal: every client-facing limit of `shale serve` holds against a client that exceeds it, the
//! server logs it, keeps serving the others, and its memory stays within the limits.
//! Method: start the real binary with small limits, break each one from raw TCP clients, and read
//! the server's resident memory from /proc.

mod serve_support;

use serve_support::{bulk, ok, Server, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

fn resident_bytes(server: &Server) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .unwrap();
    let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

/// Waits for a log line whose message is `message` and whose reason contains `reason`.
fn expect_log(server: &Server, message: &str, reason: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let Ok(line) = server.logs.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let event: serde_json::Value = serde_json::from_str(&line).unwrap();
        if event["message"] == message && event["reason"].as_str().unwrap_or("").contains(reason) {
            return;
        }
    }
    panic!("no log {message:?} with a reason containing {reason:?}");
}

/// The header and the first `sent` bytes of `SET key <value of length>`.
fn partial_set(key: &str, length: usize, sent: usize) -> Vec<u8> {
    partial_request("SET", key, length, sent)
}

/// The header and the first `sent` bytes of `command key <argument of length>`.
fn partial_request(command: &str, key: &str, length: usize, sent: usize) -> Vec<u8> {
    let mut out = format!(
        "*3\r\n${}\r\n{command}\r\n${}\r\n{key}\r\n${length}\r\n",
        command.len(),
        key.len()
    )
    .into_bytes();
    out.resize(out.len() + sent, b'v');
    out
}

#[test]
fn unauthenticated_clients_may_send_only_small_requests() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &["--password", "pw"]);
    let baseline = resident_bytes(&server);
    // 40 clients announce 55 MiB values before AUTH: each is refused at its header.
    for index in 0..40 {
        let mut client = server.connect();
        let _ = client.reader.get_mut().write_all(&partial_set(
            &format!("k{index}"),
            55 * MIB,
            64 << 10,
        ));
        assert_eq!(
            client.read(),
            Some(Value::Error(
                "ERR Protocol error: unauthenticated bulk length".into()
            ))
        );
        assert!(client.is_closed());
    }
    let mut client = server.connect();
    let many: Vec<&[u8]> = vec![b"PING"; 11];
    client.send(&many);
    assert_eq!(
        client.read(),
        Some(Value::Error(
            "ERR Protocol error: unauthenticated multibulk length".into()
        ))
    );
    assert!(
        resident_bytes(&server) < baseline + 32 * MIB,
        "{} MiB more resident memory",
        (resident_bytes(&server) - baseline) / MIB
    );
    // AUTH and a large request pipelined together: the request is read under the new limits.
    let mut client = server.connect();
    let value = "v".repeat(100 << 10);
    let mut pipeline = b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n".to_vec();
    pipeline.extend_from_slice(&partial_set("big", value.len(), value.len()));
    pipeline.extend_from_slice(b"\r\n");
    client.reader.get_mut().write_all(&pipeline).unwrap();
    assert_eq!(client.read(), Some(ok()));
    assert_eq!(client.read(), Some(ok()));
    assert_eq!(client.call(&["GET", "big"]), bulk(&value));
}

#[test]
fn a_client_that_does_not_read_its_replies_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &[
            "--max-output-bytes",
            "1048576",
            "--output-stall-timeout",
            "2",
        ],
    );
    let mut client = server.connect();
    let value = "v".repeat(512 << 10);
    assert_eq!(client.call(&["SET", "big", &value]), ok());
    // Pipelined replies larger than the limit in all are fine for a client that reads them.
    let mut pipeline = Vec::new();
    for _ in 0..40 {
        pipeline.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
    }
    client.reader.get_mut().write_all(&pipeline).unwrap();
    for _ in 0..40 {
        assert_eq!(client.read(), Some(bulk(&value)));
    }
    let baseline = resident_bytes(&server);
    // 4,000 GETs of 512 KiB (2 GB of replies), never read.
    let mut silent = TcpStream::connect(&server.address).unwrap();
    for _ in 0..100 {
        silent.write_all(&pipeline).unwrap();
    }
    expect_log(
        &server,
        "closing client: limit exceeded",
        "output_stall_timeout",
    );
    assert!(
        resident_bytes(&server) < baseline + 64 * MIB,
        "{} MiB more resident memory",
        (resident_bytes(&server) - baseline) / MIB
    );
    // A command whose reply would pass max_output_bytes answers an error instead of building it.
    let mut fields = vec!["HSET", "hash"];
    let field_names: Vec<String> = (0..10).map(|index| format!("f{index}")).collect();
    for name in &field_names {
        fields.push(name);
        fields.push(&value);
    }
    assert_eq!(client.call(&fields), Value::Int(10));
    assert_eq!(
        client.call(&["HGETALL", "hash"]),
        Value::Error("ERR the reply would exceed max_output_bytes (1048576 bytes)".into())
    );
    // A long string is streamed from the engine, never held: GET passes max_output_bytes.
    let largest = "w".repeat(1 << 20);
    assert_eq!(client.call(&["SET", "largest", &largest]), ok());
    assert_eq!(client.call(&["GET", "largest"]), bulk(&largest));
    // Any other reply past it closes the client that asked for it: a 1 MiB range built whole.
    let mut greedy = server.connect();
    greedy.send(&[b"GETRANGE", b"largest", b"0", b"-1"]);
    expect_log(
        &server,
        "closing client: limit exceeded",
        "max_output_bytes",
    );
    assert!(greedy.is_closed());
    assert_eq!(client.call(&["PING"]), Value::Status("PONG".into()));
}

#[test]
fn all_clients_buffers_share_one_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &[
            "--max-client-buffers-bytes",
            "67108864",
            "--max-request-bytes",
            "33554432",
            "--max-bulk-bytes",
            "33554432",
        ],
    );
    let baseline = resident_bytes(&server);
    // Ten clients each send 20 MiB of a 30 MiB set member (buffered: only string values stream),
    // and stall: 200 MiB against a 64 MiB budget.
    let mut stalled = Vec::new();
    for index in 0..10 {
        let mut stream = TcpStream::connect(&server.address).unwrap();
        let _ = stream.write_all(&partial_request(
            "SADD",
            &format!("k{index}"),
            30 * MIB,
            20 * MIB,
        ));
        stalled.push(stream);
    }
    let grown = resident_bytes(&server).saturating_sub(baseline);
    assert!(
        grown < 96 * MIB,
        "{} MiB more resident memory with a 64 MiB budget",
        grown / MIB
    );
    expect_log(
        &server,
        "closing client: limit exceeded",
        "max_client_buffers_bytes",
    );
    let mut closed = 0;
    for stream in &mut stalled {
        stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        // A closed client reads its end (or a reset); one still being served times out.
        let mut sink = Vec::new();
        match stream.read_to_end(&mut sink) {
            Ok(_) => closed += 1,
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => closed += 1,
            Err(_) => {}
        }
    }
    assert!(
        closed >= 7,
        "{closed} of 10 clients closed; at most 3 fit in 64 MiB"
    );
    // The server keeps serving, and a client within the limits still writes a large value.
    let mut client = server.connect();
    let value = "w".repeat(900 << 10);
    assert_eq!(client.call(&["SET", "fits", &value]), ok());
    assert_eq!(
        client.call(&["STRLEN", "fits"]),
        Value::Int(value.len() as i64)
    );
}

#[test]
fn the_admin_port_has_its_own_client_limit() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &["--admin-bind", "127.0.0.1:0", "--admin-maxclients", "2"],
    );
    let admin = server.admin.clone().unwrap();
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(&admin).unwrap())
        .collect();
    let mut refused = TcpStream::connect(&admin).unwrap();
    let mut response = String::new();
    refused.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 503"), "{response}");
    drop(idle);
    // Slots come back when clients leave.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut stream = TcpStream::connect(&admin).unwrap();
        write!(
            stream,
            "GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        if response.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "{response}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The byte at `at` of the test's long values (not one repeated byte: a misplaced chunk shows).
fn long_byte(at: usize, seed: u8) -> u8 {
    ((at % 251) as u8) ^ seed
}

/// Sends `SET key <length bytes>` in 1 MiB writes without building the value.
fn send_long_set(stream: &mut TcpStream, key: &str, length: usize, seed: u8) {
    stream.write_all(&partial_set(key, length, 0)).unwrap();
    let mut piece = vec![0u8; MIB];
    let mut at = 0;
    while at < length {
        let n = MIB.min(length - at);
        for (offset, byte) in piece[..n].iter_mut().enumerate() {
            *byte = long_byte(at + offset, seed);
        }
        stream.write_all(&piece[..n]).unwrap();
        at += n;
    }
    stream.write_all(b"\r\n").unwrap();
}

/// Reads a bulk reply of `length` bytes and checks each byte, without holding it whole.
fn expect_long_bulk(client: &mut serve_support::Client, length: usize, seed: u8) {
    assert_eq!(client.read_line().unwrap(), format!("${length}"));
    let mut piece = vec![0u8; MIB];
    let mut at = 0;
    while at < length {
        let n = MIB.min(length - at);
        client.reader.read_exact(&mut piece[..n]).unwrap();
        for (offset, byte) in piece[..n].iter().enumerate() {
            assert_eq!(*byte, long_byte(at + offset, seed), "byte {}", at + offset);
        }
        at += n;
    }
    assert_eq!(client.read_line().unwrap(), "");
}

#[test]
fn long_values_stream_to_the_engine_and_back_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let limits = [
        "--max-client-buffers-bytes",
        "67108864",
        "--max-request-bytes",
        "33554432",
        "--cache-mb",
        "16",
    ];
    let server = Server::start(&db, &limits);
    let baseline = resident_bytes(&server);
    // Three clients at once each SET 96 MiB: 288 MiB of values against a 64 MiB budget for
    // client buffers and 32 MiB per request. Each is written to the engine as it arrives.
    const LENGTH: usize = 96 * MIB;
    let writers: Vec<_> = (0..3u8)
        .map(|seed| {
            let address = server.address.clone();
            std::thread::spawn(move || {
                let mut client = serve_support::Client::new(TcpStream::connect(address).unwrap());
                send_long_set(
                    client.reader.get_mut(),
                    &format!("long{seed}"),
                    LENGTH,
                    seed,
                );
                assert_eq!(client.read(), Some(ok()));
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let grown = resident_bytes(&server).saturating_sub(baseline);
    assert!(
        grown < 128 * MIB,
        "{} MiB more resident memory after 288 MiB of values",
        grown / MIB
    );
    let mut client = server.connect();
    assert_eq!(client.call(&["STRLEN", "long1"]), Value::Int(LENGTH as i64));
    for seed in 0..3u8 {
        client.send(&[b"GET", format!("long{seed}").as_bytes()]);
        expect_long_bulk(&mut client, LENGTH, seed);
    }
    // A command that needs a string whole in memory says which bound it is past.
    match client.call(&["APPEND", "long0", "x"]) {
        Value::Error(message) => {
            assert!(message.contains("max_in_memory_string_bytes"), "{message}")
        }
        other => panic!("APPEND to a 96 MiB string: {other:?}"),
    }
    // Only string values stream; a long argument elsewhere is buffered, within its limits.
    client
        .reader
        .get_mut()
        .write_all(&partial_request("SADD", "set", 40 * MIB, 0))
        .unwrap();
    assert_eq!(
        client.read(),
        Some(Value::Error(
            "ERR Protocol error: request is larger than the server's limit".into()
        ))
    );
    // Values survive a restart.
    server.signal("TERM");
    server.wait();
    let server = Server::start(&db, &limits);
    let mut client = server.connect();
    client.send(&[b"GET", b"long2"]);
    expect_long_bulk(&mut client, LENGTH, 2);
    // A client that leaves mid-value leaves nothing behind: the key does not exist, and a value
    // cut off by a kill is deleted at the next start, logged.
    let mut leaver = TcpStream::connect(&server.address).unwrap();
    leaver
        .write_all(&partial_set("cut", 8 * MIB, 3 * MIB))
        .unwrap();
    drop(leaver);
    let mut killed = TcpStream::connect(&server.address).unwrap();
    killed
        .write_all(&partial_set("killed", 8 * MIB, 5 * MIB))
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(client.call(&["EXISTS", "cut", "killed"]), Value::Int(0));
    server.signal("KILL");
    server.wait();
    let server = Server::start(&db, &limits);
    let swept = server.startup_logs.iter().any(|line| {
        line.contains("deleted a long value whose command never committed")
            && line.contains("\"chunks\":10")
    });
    assert!(
        swept,
        "no sweep of the 5 MiB sent: {:?}",
        server.startup_logs
    );
    let mut client = server.connect();
    assert_eq!(client.call(&["EXISTS", "cut", "killed"]), Value::Int(0));
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(3));
}

#[test]
fn a_long_value_that_does_not_fit_is_refused_and_the_connection_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &["--space-mb", "384", "--cache-mb", "16"],
    );
    let mut client = server.connect();
    const LENGTH: usize = 64 * MIB;
    let mut stored = Vec::new();
    let refusal = loop {
        let key = format!("fill{}", stored.len());
        send_long_set(client.reader.get_mut(), &key, LENGTH, stored.len() as u8);
        match client.read().unwrap() {
            Value::Status(status) if status == "OK" => stored.push(key),
            Value::Error(message) => break message,
            other => panic!("SET of 64 MiB answered {other:?}"),
        }
        assert!(stored.len() < 10, "384 MiB of space held 640 MiB");
    };
    assert!(refusal.starts_with("ERR out of space"), "{refusal}");
    assert!(!stored.is_empty(), "not even one value fitted");
    // The whole value was read past: the next request on the connection is answered.
    assert_eq!(client.call(&["PING"]), Value::Status("PONG".into()));
    let refused_key = format!("fill{}", stored.len());
    assert_eq!(client.call(&["EXISTS", &refused_key]), Value::Int(0));
    for (seed, key) in stored.iter().enumerate() {
        client.send(&[b"GET", key.as_bytes()]);
        expect_long_bulk(&mut client, LENGTH, seed as u8);
    }
}

#[test]
fn a_multi_queue_counts_against_the_client_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &[
            "--max-client-buffers-bytes",
            "33554432",
            "--max-request-bytes",
            "4194304",
        ],
    );
    let baseline = resident_bytes(&server);
    let mut client = server.connect();
    assert_eq!(client.call(&["MULTI"]), ok());
    // 100 queued commands of 1 MiB each against a 32 MiB budget.
    let member = vec![b'm'; MIB];
    let mut queued = 0;
    for index in 0..100 {
        client.send(&[b"SADD", format!("set{index}").as_bytes(), &member]);
        match client.read() {
            Some(Value::Status(status)) if status == "QUEUED" => queued += 1,
            None => break,
            other => panic!("queuing answered {other:?}"),
        }
    }
    assert!(
        (16..40).contains(&queued),
        "{queued} MiB queued with a 32 MiB budget"
    );
    expect_log(
        &server,
        "closing client: limit exceeded",
        "max_client_buffers_bytes",
    );
    let grown = resident_bytes(&server).saturating_sub(baseline);
    assert!(grown < 64 * MIB, "{} MiB more resident memory", grown / MIB);
    let mut other = server.connect();
    assert_eq!(
        other.call(&["DBSIZE"]),
        Value::Int(0),
        "nothing was executed"
    );
}
