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
    status_bytes(server, "VmRSS:")
}

/// A memory figure of the server's /proc status (`field` is e.g. `VmRSS:`), in bytes.
fn status_bytes(server: &Server, field: &str) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    let line = status.lines().find(|line| line.starts_with(field)).unwrap();
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

/// CONFIG GET's reply for one parameter, as RESP2 sends it.
fn config_value(name: &str, value: &str) -> Value {
    Value::Array(vec![bulk(name), bulk(value)])
}

fn refused() -> Value {
    Value::Error("ERR max number of clients reached".into())
}

/// A new client's first reply to PING: PONG when admitted, the refusal when not.
fn ping_new_client(server: &Server) -> Value {
    let mut client = server.connect();
    client.send(&[b"PING"]);
    client.read().expect("a reply or a refusal")
}

#[test]
fn config_set_maxclients_applies_to_the_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &[]);
    let mut first = server.connect();
    assert_eq!(
        first.call(&["CONFIG", "GET", "maxclients"]),
        config_value("maxclients", "10000")
    );
    for bad in ["0", "-1", "4294967296"] {
        assert_eq!(
            first.call(&["CONFIG", "SET", "maxclients", bad]),
            Value::Error(
                "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument \
                 must be between 1 and 4294967295 inclusive"
                    .into()
            ),
            "{bad}"
        );
    }
    assert_eq!(
        first.call(&["CONFIG", "SET", "maxclients", "many"]),
        Value::Error(
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument \
             couldn't be parsed into an integer"
                .into()
        )
    );
    // A bad pair refuses the whole CONFIG SET: the good one before it is not applied either.
    assert!(matches!(
        first.call(&["CONFIG", "SET", "timeout", "5", "maxclients", "0"]),
        Value::Error(_)
    ));
    assert_eq!(
        first.call(&["CONFIG", "GET", "timeout"]),
        config_value("timeout", "0")
    );

    assert_eq!(first.call(&["CONFIG", "SET", "maxclients", "2"]), ok());
    assert_eq!(
        first.call(&["CONFIG", "GET", "maxclients"]),
        config_value("maxclients", "2")
    );
    let mut second = server.connect();
    assert_eq!(second.call(&["SET", "k", "v"]), ok());
    let mut third = server.connect();
    assert_eq!(third.read(), Some(refused()));
    assert!(third.is_closed());
    // A slot comes back when a client leaves.
    drop(second);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut second = loop {
        let mut client = server.connect();
        client.send(&[b"PING"]);
        match client.read() {
            Some(Value::Status(pong)) if pong == "PONG" => break client,
            Some(reply) if reply == refused() => {}
            other => panic!("{other:?}"),
        }
        assert!(Instant::now() < deadline, "the slot did not come back");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(ping_new_client(&server), refused());

    // Raised: one more is admitted at once, and the next refused.
    assert_eq!(first.call(&["CONFIG", "SET", "maxclients", "3"]), ok());
    let mut third = server.connect();
    assert_eq!(third.call(&["GET", "k"]), bulk("v"));
    assert_eq!(ping_new_client(&server), refused());

    // Lowered below the clients connected: they all stay and are served; new ones are refused
    // until fewer than the limit remain.
    assert_eq!(first.call(&["CONFIG", "SET", "maxclients", "1"]), ok());
    for client in [&mut first, &mut second, &mut third] {
        assert_eq!(client.call(&["PING"]), Value::Status("PONG".into()));
    }
    assert_eq!(ping_new_client(&server), refused());
    assert!(matches!(
        first.call(&["INFO", "clients"]),
        Value::Bulk(info) if String::from_utf8_lossy(&info).contains("maxclients:1\r\n")
    ));
    drop(third);
    drop(second);
    // One client (first) is connected, at the limit of 1: still refused.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(ping_new_client(&server), refused());
    assert_eq!(first.call(&["CONFIG", "SET", "maxclients", "10"]), ok());
    let mut admitted: Vec<_> = (0..9).map(|_| server.connect()).collect();
    for client in &mut admitted {
        assert_eq!(client.call(&["PING"]), Value::Status("PONG".into()));
    }
    assert_eq!(ping_new_client(&server), refused());
}

/// Whether the server closes `stream` within `wait`; it must send nothing meanwhile.
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    let mut byte = [0u8; 1];
    while Instant::now() < deadline {
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        match stream.read(&mut byte) {
            Ok(0) => return true,
            Ok(_) => panic!("unexpected bytes from the server"),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => {}
        }
    }
    false
}

#[test]
fn config_set_timeout_applies_to_the_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &[]);
    // Connected and waiting for input before the timeout is set.
    let mut idle = server.connect();
    assert_eq!(idle.call(&["PING"]), Value::Status("PONG".into()));
    let mut admin = server.connect();
    for bad in ["-1", "2147483648"] {
        assert_eq!(
            admin.call(&["CONFIG", "SET", "timeout", bad]),
            Value::Error(
                "ERR CONFIG SET failed (possibly related to argument 'timeout') - argument must \
                 be between 0 and 2147483647 inclusive"
                    .into()
            ),
            "{bad}"
        );
    }
    assert_eq!(admin.call(&["CONFIG", "SET", "timeout", "1"]), ok());
    assert_eq!(
        admin.call(&["CONFIG", "GET", "timeout"]),
        config_value("timeout", "1")
    );
    assert!(
        closed_within(idle.reader.get_mut(), Duration::from_secs(10)),
        "an idle client stayed connected with timeout 1"
    );
    let mut late = server.connect();
    assert_eq!(
        late.call(&["CONFIG", "GET", "timeout"]),
        config_value("timeout", "1")
    );
    assert!(closed_within(
        late.reader.get_mut(),
        Duration::from_secs(10)
    ));

    let mut admin = server.connect();
    assert_eq!(admin.call(&["CONFIG", "SET", "timeout", "0"]), ok());
    let mut quiet = server.connect();
    assert_eq!(quiet.call(&["PING"]), Value::Status("PONG".into()));
    assert!(!closed_within(
        quiet.reader.get_mut(),
        Duration::from_millis(2500)
    ));
    quiet
        .reader
        .get_mut()
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(quiet.call(&["PING"]), Value::Status("PONG".into()));
    assert_eq!(
        admin.call(&["CONFIG", "GET", "timeout"]),
        config_value("timeout", "0")
    );

    // Silent for 3 s under no timeout, then a timeout of 2 s: it is past it already (Redis counts
    // from the client's last request), so it is closed at once, not 2 s after the change.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(admin.call(&["CONFIG", "SET", "timeout", "2"]), ok());
    let set_at = Instant::now();
    assert!(closed_within(
        quiet.reader.get_mut(),
        Duration::from_secs(10)
    ));
    assert!(
        set_at.elapsed() < Duration::from_millis(1500),
        "a client silent for longer than the new timeout waited {:?} more",
        set_at.elapsed()
    );
}

/// What the test of KEYS saw, in the order it saw it.
#[derive(Debug, PartialEq)]
enum Seen {
    Pong,
    /// The first line of a KEYS reply.
    KeysReplyStarts,
}

/// Goal: a long KEYS keeps no other client waiting. Asserted by order, not by time: the server
/// encodes a reply only once its command is done, so every PONG seen before the first line of a
/// KEYS reply was answered while that KEYS still ran.
#[test]
fn keys_does_not_block_other_clients() {
    const KEYS: usize = 200_000;
    const PER_MSET: usize = 1000;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &[]);
    let mut loader = server.connect();
    let names: Vec<String> = (0..KEYS).map(|index| format!("key:{index:06}")).collect();
    for chunk in names.chunks(PER_MSET * 20) {
        let mut pipeline = Vec::new();
        for batch in chunk.chunks(PER_MSET) {
            pipeline.extend_from_slice(
                format!("*{}\r\n$4\r\nMSET\r\n", 1 + 2 * batch.len()).as_bytes(),
            );
            for name in batch {
                pipeline.extend_from_slice(
                    format!("${}\r\n{name}\r\n$1\r\nv\r\n", name.len()).as_bytes(),
                );
            }
        }
        loader.reader.get_mut().write_all(&pipeline).unwrap();
        for _ in chunk.chunks(PER_MSET) {
            assert_eq!(loader.read(), Some(ok()));
        }
    }
    assert_eq!(loader.call(&["DBSIZE"]), Value::Int(KEYS as i64));

    // As many KEYS as the server has network threads (tokio's default: one per core), so a
    // KEYS run on a network thread would leave none for the PINGs.
    let walkers = std::thread::available_parallelism().map_or(2, |cores| cores.get().max(2));
    let mut pinger = server.connect();
    assert_eq!(pinger.call(&["PING"]), Value::Status("PONG".into()));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let readers: Vec<_> = (0..walkers)
        .map(|_| {
            let mut walker = server.connect();
            walker.send(&[b"KEYS", b"*"]);
            let seen = seen.clone();
            std::thread::spawn(move || {
                walker
                    .reader
                    .get_mut()
                    .set_read_timeout(Some(Duration::from_secs(120)))
                    .unwrap();
                let header = walker.read_line().expect("the KEYS reply");
                seen.lock().unwrap().push(Seen::KeysReplyStarts);
                assert_eq!(header, format!("*{KEYS}"));
                let mut count = 0;
                while count < KEYS {
                    let Some(Value::Bulk(_)) = walker.read() else {
                        panic!("KEYS reply ended after {count} keys");
                    };
                    count += 1;
                }
            })
        })
        .collect();
    // PINGs until the first KEYS reply starts: the server answers them meanwhile.
    loop {
        assert_eq!(pinger.call(&["PING"]), Value::Status("PONG".into()));
        let mut seen = seen.lock().unwrap();
        if seen.contains(&Seen::KeysReplyStarts) {
            break;
        }
        seen.push(Seen::Pong);
    }
    for reader in readers {
        reader.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    let pongs_first = seen.iter().take_while(|seen| **seen == Seen::Pong).count();
    assert!(
        pongs_first >= 20,
        "only {pongs_first} PONGs came before the first KEYS reply: {seen:?}"
    );
}

#[test]
fn config_set_proto_max_bulk_len_applies_to_the_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &[]);
    let mut client = server.connect();
    assert_eq!(
        client.call(&["CONFIG", "GET", "proto-max-bulk-len"]),
        config_value("proto-max-bulk-len", "536870912")
    );
    match client.call(&["CONFIG", "SET", "proto-max-bulk-len", "1000"]) {
        Value::Error(message) => assert!(
            message.contains("'proto-max-bulk-len'") && message.contains("between 1048576"),
            "{message}"
        ),
        other => panic!("a 1000-byte proto-max-bulk-len: {other:?}"),
    }
    assert_eq!(
        client.call(&["CONFIG", "SET", "proto-max-bulk-len", "1048576"]),
        ok()
    );
    assert_eq!(
        client.call(&["CONFIG", "GET", "proto-max-bulk-len"]),
        config_value("proto-max-bulk-len", "1048576")
    );
    // Strings may not grow past it, and no argument may be longer.
    let half = "h".repeat(600 << 10);
    assert_eq!(client.call(&["SET", "s", &half]), ok());
    assert_eq!(
        client.call(&["APPEND", "s", &half]),
        Value::Error(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len: 1048576 bytes)".into()
        )
    );
    // The header alone: the server answers it and closes without reading the value.
    let mut other = server.connect();
    let too_long = "t".repeat((1 << 20) + 1);
    other
        .reader
        .get_mut()
        .write_all(&partial_set("t", too_long.len(), 0))
        .unwrap();
    assert_eq!(
        other.read(),
        Some(Value::Error(
            "ERR Protocol error: invalid bulk length".into()
        ))
    );
    assert!(other.is_closed());
    assert_eq!(
        client.call(&["CONFIG", "SET", "proto-max-bulk-len", "536870912"]),
        ok()
    );
    let mut again = server.connect();
    assert_eq!(again.call(&["SET", "t", &too_long]), ok());
    assert_eq!(
        again.call(&["STRLEN", "t"]),
        Value::Int(too_long.len() as i64)
    );
}

/// Peak resident memory (VmHWM) of the server.
fn peak_resident_bytes(server: &Server) -> usize {
    status_bytes(server, "VmHWM:")
}

#[test]
fn commands_that_build_a_string_in_memory_stay_within_max_in_memory_string_bytes() {
    // max_in_memory_string_bytes is "the longest string a command that works on a whole string
    // in memory (APPEND, SETRANGE, SETBIT, ...) reads or builds". A string built past it is
    // refused, not held whole (its default is 64 MiB; proto-max-bulk-len's is 512 MiB).
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &[
            "--max-in-memory-string-bytes",
            "4194304",
            "--cache-mb",
            "16",
        ],
    );
    let mut client = server.connect();
    let baseline = peak_resident_bytes(&server);
    let refused_in_memory = |reply: Value, what: &str| match reply {
        Value::Error(message) => assert!(
            message.contains("max_in_memory_string_bytes"),
            "{what}: {message}"
        ),
        other => panic!("{what} built a string past max_in_memory_string_bytes: {other:?}"),
    };
    // 96 MiB strings, each from a one-byte argument.
    refused_in_memory(
        client.call(&["SETRANGE", "range", &(96 * MIB).to_string(), "x"]),
        "SETRANGE",
    );
    refused_in_memory(
        client.call(&["SETBIT", "bit", &(8 * 96 * MIB).to_string(), "1"]),
        "SETBIT",
    );
    // 3 MiB (within the bound) appended to twice.
    let part = vec![b'a'; 3 * MIB];
    client.send(&[b"SET", b"appended", &part]);
    assert_eq!(client.read(), Some(ok()));
    client.send(&[b"APPEND", b"appended", &part]);
    refused_in_memory(client.read().unwrap(), "APPEND");
    assert_eq!(
        client.call(&["STRLEN", "appended"]),
        Value::Int(3 * MIB as i64)
    );
    assert_eq!(client.call(&["EXISTS", "range", "bit"]), Value::Int(0));
    // LCS of two 2 KiB strings needs a table of 16 MiB.
    let two_kib = "l".repeat(2048);
    assert_eq!(client.call(&["SET", "lcs1", &two_kib]), ok());
    assert_eq!(client.call(&["SET", "lcs2", &two_kib]), ok());
    refused_in_memory(client.call(&["LCS", "lcs1", "lcs2"]), "LCS");
    let grown = peak_resident_bytes(&server).saturating_sub(baseline);
    assert!(
        grown < 64 * MIB,
        "peak resident memory grew {} MiB with a 4 MiB bound on in-memory strings",
        grown / MIB
    );
}

#[test]
fn a_long_value_refused_while_queued_in_multi_aborts_the_transaction() {
    // Redis flags a transaction whose command was refused while queuing (OOM included): EXEC
    // then answers EXECABORT and runs nothing. A streamed value the engine cannot store is
    // refused before it reaches the queue, so the transaction must be flagged the same way.
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &["--space-mb", "384", "--cache-mb", "16"],
    );
    let mut client = server.connect();
    let queued = Value::Status("QUEUED".into());
    assert_eq!(client.call(&["MULTI"]), ok());
    assert_eq!(client.call(&["SET", "small", "1"]), queued);
    const LENGTH: usize = 64 * MIB;
    let mut values = 0;
    let refusal = loop {
        let key = format!("fill{values}");
        send_long_set(client.reader.get_mut(), &key, LENGTH, values as u8);
        match client.read().unwrap() {
            reply if reply == queued => values += 1,
            Value::Error(message) => break message,
            other => panic!("SET of 64 MiB in MULTI answered {other:?}"),
        }
        assert!(values < 10, "384 MiB of space held 640 MiB");
    };
    assert!(refusal.starts_with("ERR out of space"), "{refusal}");
    assert_eq!(
        client.call(&["EXEC"]),
        Value::Error("EXECABORT Transaction discarded because of previous errors.".into())
    );
    assert_eq!(client.call(&["EXISTS", "small", "fill0"]), Value::Int(0));
}

#[test]
fn a_full_server_still_deletes_and_then_takes_writes_again() {
    // Deletes free space, so a server that refuses writes must still take them (the engine lets
    // them use a headroom past the limit); once the cleaner has freed what they deleted, a write
    // that was refused fits again.
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &["--space-mb", "384", "--cache-mb", "16"],
    );
    let mut client = server.connect();
    // Filled with ever smaller values until not even a small one fits.
    let mut stored = 0;
    for length in [MIB, 64 << 10, 4 << 10, 256] {
        let value = "v".repeat(length);
        let refusal = loop {
            match client.call(&["SET", &format!("k{stored}"), &value]) {
                Value::Status(status) if status == "OK" => stored += 1,
                Value::Error(message) => break message,
                other => panic!("SET of {length} bytes answered {other:?}"),
            }
            assert!(stored < 2000, "384 MiB of space held more than it can");
        };
        assert!(refusal.starts_with("ERR out of space"), "{refusal}");
    }
    for key in 0..stored {
        assert_eq!(
            client.call(&["DEL", &format!("k{key}")]),
            Value::Int(1),
            "DEL k{key} of {stored} on a full server"
        );
    }
    let started = Instant::now();
    loop {
        match client.call(&["SET", "after", &"v".repeat(MIB)]) {
            Value::Status(status) if status == "OK" => break,
            Value::Error(message) if message.starts_with("ERR out of space") => {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "{stored} values deleted, yet 1 MiB does not fit after 30 s: {message}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            other => panic!("SET after the deletes answered {other:?}"),
        }
    }
    assert_eq!(client.call(&["DBSIZE"]), Value::Int(1));
}

#[test]
fn an_unread_long_reply_does_not_keep_deleted_values_on_disk() {
    // A long string's reply is read from an engine snapshot as the socket takes it, and is not
    // charged anywhere ("such a reply is not held"). But the snapshot covers the whole KVDB: while
    // one client leaves a GET unread, nothing deleted or overwritten since is freed, for anyone.
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("db"),
        &["--space-mb", "384", "--cache-mb", "16"],
    );
    let mut client = server.connect();
    const LENGTH: usize = 64 * MIB;
    let mut stored = Vec::new();
    loop {
        let key = format!("fill{}", stored.len());
        send_long_set(client.reader.get_mut(), &key, LENGTH, stored.len() as u8);
        match client.read().unwrap() {
            Value::Status(status) if status == "OK" => stored.push(key),
            Value::Error(message) if message.starts_with("ERR out of space") => break,
            other => panic!("SET of 64 MiB answered {other:?}"),
        }
        assert!(stored.len() < 10, "384 MiB of space held 640 MiB");
    }
    // Another client asks for one value and reads nothing of it.
    let mut slow = TcpStream::connect(&server.address).unwrap();
    slow.write_all(b"*2\r\n$3\r\nGET\r\n$5\r\nfill0\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut del: Vec<&str> = vec!["DEL"];
    del.extend(stored.iter().map(String::as_str));
    assert_eq!(client.call(&del), Value::Int(stored.len() as i64));
    std::thread::sleep(Duration::from_secs(2));
    // Every value is deleted: a new one fits again (it does once the slow client is gone).
    send_long_set(client.reader.get_mut(), "after", LENGTH, 9);
    let reply = client.read().unwrap();
    drop(slow);
    assert_eq!(
        reply,
        ok(),
        "{} MiB deleted, yet a 64 MiB SET does not fit while one GET is unread",
        stored.len() * 64
    );
}

#[test]
fn a_hash_or_set_past_the_packing_limits_becomes_a_record_per_member() {
    // packed_members_max and packed_bytes_max bound a packed record: one past either moves the
    // collection into a record per member for good, and its data reads the same across the
    // move and a restart.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let limits = ["--packed-members-max", "3", "--packed-bytes-max", "40"];
    let server = Server::start(&db, &limits);
    let mut client = server.connect();
    let encoding =
        |client: &mut serve_support::Client, key: &str| client.call(&["OBJECT", "ENCODING", key]);
    assert_eq!(
        client.call(&["HSET", "h", "a", "1", "b", "2", "c", "3"]),
        Value::Int(3)
    );
    assert_eq!(encoding(&mut client, "h"), bulk("packed"));
    assert_eq!(client.call(&["HSET", "h", "d", "4"]), Value::Int(1));
    assert_eq!(encoding(&mut client, "h"), bulk("records"));
    assert_eq!(client.call(&["HDEL", "h", "a", "b", "c"]), Value::Int(3));
    assert_eq!(encoding(&mut client, "h"), bulk("records"));
    // One byte past the bytes: 1 (count) + 1 + 1 (field "f") + 1 + 37 (value) = 41 > 40.
    let long = "v".repeat(37);
    assert_eq!(client.call(&["HSET", "g", "f", &long]), Value::Int(1));
    assert_eq!(encoding(&mut client, "g"), bulk("records"));
    let short = "v".repeat(36);
    assert_eq!(client.call(&["HSET", "k", "f", &short]), Value::Int(1));
    assert_eq!(encoding(&mut client, "k"), bulk("packed"));
    assert_eq!(
        client.call(&["SADD", "s", "x", "y", "z", "w"]),
        Value::Int(4)
    );
    assert_eq!(encoding(&mut client, "s"), bulk("records"));
    assert_eq!(client.call(&["SADD", "t", "x", "y"]), Value::Int(2));
    assert_eq!(encoding(&mut client, "t"), bulk("packed"));
    drop(client);
    server.signal("TERM");
    assert!(server.wait().success());

    let server = Server::start(&db, &limits);
    let mut client = server.connect();
    assert_eq!(
        client.call(&["HGETALL", "h"]),
        Value::Array(vec![bulk("d"), bulk("4")])
    );
    assert_eq!(client.call(&["HGET", "g", "f"]), bulk(&long));
    assert_eq!(client.call(&["HGET", "k", "f"]), bulk(&short));
    assert_eq!(client.call(&["SCARD", "s"]), Value::Int(4));
    assert_eq!(
        client.call(&["SMEMBERS", "t"]),
        Value::Array(vec![bulk("x"), bulk("y")])
    );
    assert_eq!(encoding(&mut client, "t"), bulk("packed"));
}
