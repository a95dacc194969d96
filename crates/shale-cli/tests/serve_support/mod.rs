//! A `shale serve` process on a loopback port the OS picks, and a raw RESP client for it, shared
//! by the server's test binaries (each uses a different part).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub struct Server {
    pub child: Child,
    pub address: String,
    pub admin: Option<String>,
    /// The JSON log lines the server printed (read on a thread, so its stdout never fills).
    pub logs: mpsc::Receiver<String>,
    /// The lines it printed before it listened (taken from `logs` while waiting for it).
    pub startup_logs: Vec<String>,
}

impl Server {
    pub fn start(db: &Path, extra: &[&str]) -> Server {
        Server::start_with_env(db, extra, &[])
    }

    pub fn start_with_env(db: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
            .envs(env.iter().copied())
            .arg("--db")
            .arg(db)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("shale serve starts");
        let stdout = child.stdout.take().unwrap();
        let (sender, logs) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            address: String::new(),
            admin: None,
            logs,
            startup_logs: Vec::new(),
        };
        let wants_admin = extra.contains(&"--admin-bind");
        while server.address.is_empty() || (wants_admin && server.admin.is_none()) {
            let line = server
                .logs
                .recv_timeout(Duration::from_secs(30))
                .expect("the server logs that it listens");
            let event: serde_json::Value = serde_json::from_str(&line).expect("JSON log lines");
            let address = event["address"].as_str().map(str::to_string);
            match event["message"].as_str() {
                Some("listening") => server.address = address.unwrap(),
                Some("admin listening") => server.admin = address,
                _ => {}
            }
            server.startup_logs.push(line);
        }
        server
    }

    pub fn connect(&self) -> Client {
        Client::new(TcpStream::connect(&self.address).unwrap())
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Lets `writers` write for 400 ms, kills the server with SIGKILL, waits for the writers
    /// to stop (their connections break), and returns what they reported acknowledged.
    pub fn kill_while_writing<T>(
        self,
        writers: Vec<std::thread::JoinHandle<()>>,
        acknowledged: mpsc::Receiver<T>,
    ) -> Vec<T> {
        std::thread::sleep(Duration::from_millis(400));
        drop(self); // SIGKILL, then reap.
        for writer in writers {
            writer.join().unwrap();
        }
        acknowledged.iter().collect()
    }

    pub fn wait(mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn admin_get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(self.admin.as_ref().unwrap()).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response[9..12].parse().unwrap();
        let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        (status, body.to_string())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A reply as the tests compare it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Double(String),
}

pub fn bulk(text: &str) -> Value {
    Value::Bulk(text.as_bytes().to_vec())
}

pub struct Client {
    pub reader: BufReader<TcpStream>,
}

impl Client {
    pub fn new(stream: TcpStream) -> Client {
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Client {
            reader: BufReader::new(stream),
        }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = Vec::new();
        encode_request(&mut out, args);
        self.reader.get_mut().write_all(&out).unwrap();
    }

    /// Sends `requests` in one write (a pipeline the server reads at once).
    pub fn send_all(&mut self, requests: &[Vec<&[u8]>]) -> std::io::Result<()> {
        let mut out = Vec::new();
        for args in requests {
            encode_request(&mut out, args);
        }
        self.reader.get_mut().write_all(&out)
    }

    /// Sends `requests` as `send_all` does and reads their replies.
    pub fn pipeline(&mut self, requests: &[Vec<&[u8]>]) -> Vec<Value> {
        self.send_all(requests).unwrap();
        requests
            .iter()
            .map(|_| self.read().expect("a reply"))
            .collect()
    }

    pub fn call(&mut self, args: &[&str]) -> Value {
        let args: Vec<&[u8]> = args.iter().map(|arg| arg.as_bytes()).collect();
        self.send(&args);
        self.read().expect("a reply")
    }

    pub fn read_line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches("\r\n").to_string()),
        }
    }

    pub fn read(&mut self) -> Option<Value> {
        let line = self.read_line()?;
        let (tag, rest) = line.split_at(1);
        Some(match tag {
            "+" => Value::Status(rest.into()),
            "-" => Value::Error(rest.into()),
            ":" => Value::Int(rest.parse().unwrap()),
            "," => Value::Double(rest.into()),
            "_" => Value::Nil,
            "$" => {
                let length: i64 = rest.parse().unwrap();
                if length < 0 {
                    return Some(Value::Nil);
                }
                let mut data = vec![0; length as usize + 2];
                self.reader.read_exact(&mut data).ok()?;
                data.truncate(length as usize);
                Value::Bulk(data)
            }
            "*" => {
                let count: i64 = rest.parse().unwrap();
                if count < 0 {
                    return Some(Value::Nil);
                }
                Value::Array((0..count).map(|_| self.read().unwrap()).collect())
            }
            "%" => {
                let count: usize = rest.parse().unwrap();
                Value::Map(
                    (0..count)
                        .map(|_| (self.read().unwrap(), self.read().unwrap()))
                        .collect(),
                )
            }
            other => panic!("unexpected reply type {other:?} in {line:?}"),
        })
    }

    /// Whether the server closed the connection.
    pub fn is_closed(&mut self) -> bool {
        self.read_line().is_none()
    }
}

fn encode_request(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

pub fn ok() -> Value {
    Value::Status("OK".into())
}
