"""Goal: real Redis clients nobody here wrote work against `shale serve` unchanged.

Method: start the real server (SHALE_BIN, default target/debug/shale) on a loopback port the OS
picks, then drive it with redis-py over RESP2 and RESP3, with redis-cli, and with
redis-benchmark, and check both the replies and the data left behind.
"""

import json
import os
import pathlib
import shutil
import subprocess
import threading

import pytest
import redis

ROOT = pathlib.Path(__file__).resolve().parents[4]
SHALE = os.environ.get("SHALE_BIN", str(ROOT / "target" / "debug" / "shale"))


class Server:
    def __init__(self, home, *flags):
        self.process = subprocess.Popen(
            [SHALE, "--db", str(home), "serve", "--bind", "127.0.0.1:0", *flags],
            stdout=subprocess.PIPE,
            text=True,
        )
        for line in self.process.stdout:
            event = json.loads(line)
            if event.get("message") == "listening":
                self.host, port = event["address"].rsplit(":", 1)
                self.port = int(port)
                break
        else:
            raise RuntimeError("shale serve exited before listening")
        # Keep draining the log so the server never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def client(self, **options):
        return redis.Redis(host=self.host, port=self.port, **options)

    def stop(self):
        self.process.terminate()
        assert self.process.wait(timeout=60) == 0


@pytest.fixture
def server(tmp_path):
    running = Server(tmp_path / "kvdb")
    yield running
    running.stop()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_strings_hashes_sorted_sets(server, protocol):
    client = server.client(protocol=protocol, decode_responses=True)
    assert client.ping()
    assert client.set("greeting", "hello")
    assert client.get("greeting") == "hello"
    assert client.set("greeting", "again", nx=True) is None
    assert client.set("greeting", "bye", xx=True, get=True) == "hello"
    assert client.incr("visits") == 1 and client.incrby("visits", 9) == 10
    assert client.mset({"a": "1", "b": "2"})
    assert client.mget(["a", "b", "missing"]) == ["1", "2", None]
    assert client.exists("a", "b", "missing") == 2
    assert client.delete("a", "missing") == 1
    assert client.getdel("b") == "2"
    assert client.append("greeting", "!") == 4
    assert client.strlen("greeting") == 4
    assert client.set("temporary", "x", ex=100)
    assert 0 < client.ttl("temporary") <= 100
    assert client.ttl("greeting") == -1

    # The YCSB redis binding's usage: a hash per record, its key in a sorted set index.
    fields = {f"field{i}": f"value{i}" * 10 for i in range(10)}
    assert client.hset("user1", mapping=fields) == 10
    assert client.hgetall("user1") == fields
    assert client.hmget("user1", ["field0", "nope"]) == ["value0" * 10, None]
    assert client.hset("user1", "field0", "changed") == 0
    assert client.hget("user1", "field0") == "changed"
    assert client.hlen("user1") == 10 and client.hexists("user1", "field9")
    assert client.hdel("user1", "field9", "nope") == 1
    assert client.type("user1") == "hash"
    for index in range(20):
        client.zadd("_indices", {f"user{index}": float(index)})
    assert client.zcard("_indices") == 20
    assert client.zrangebyscore("_indices", 5, "+inf", start=0, num=3) == ["user5", "user6", "user7"]
    # RESP3 answers pairs as arrays, which redis-py gives as lists; RESP2 as tuples.
    scored = client.zrangebyscore("_indices", "(17", "+inf", withscores=True)
    assert [tuple(pair) for pair in scored] == [
        ("user18", 18.0),
        ("user19", 19.0),
    ]
    assert client.zrange("_indices", 0, 1) == ["user0", "user1"]
    assert client.zscore("_indices", "user3") == 3.0
    assert client.zrem("_indices", "user3") == 1
    assert client.zscore("_indices", "user3") is None

    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        client.get("user1")
    with pytest.raises(redis.ResponseError, match="unknown command"):
        client.execute_command("NOSUCHCOMMAND")
    assert client.ping()

    pipe = client.pipeline(transaction=False)
    for index in range(100):
        pipe.set(f"piped:{index}", index)
    assert all(pipe.execute())
    assert sorted(client.scan_iter(match="piped:*", count=7)) == sorted(f"piped:{i}" for i in range(100))
    assert len(client.keys("piped:1*")) == 11
    # piped:0..99, greeting, visits, temporary, user1 and _indices.
    assert client.dbsize() == 105
    info = client.info()
    assert info["redis_version"] and "write_amplification" in client.info("shaledb")
    assert client.config_get("appendonly") == {"appendonly": "no"}
    client.client_setname("tester")
    assert client.client_getname() == "tester"
    assert client.flushdb()


def test_databases_are_separate_kvss(server):
    zero = server.client(db=0)
    one = server.client(db=1)
    zero.set("k", "zero")
    one.set("k", "one")
    assert zero.get("k") == b"zero" and one.get("k") == b"one"
    assert zero.dbsize() == 1


def test_data_survives_restart(tmp_path):
    first = Server(tmp_path / "kvdb", "--durability", "sync")
    client = first.client()
    client.hset("h", mapping={"a": "1"})
    client.zadd("z", {"m": 2.5})
    client.set("s", "v")
    first.stop()
    second = Server(tmp_path / "kvdb")
    client = second.client(decode_responses=True)
    assert client.hgetall("h") == {"a": "1"}
    assert client.zscore("z", "m") == 2.5
    assert client.get("s") == "v"
    second.stop()


def run(*command, **options):
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=True, **options)


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-tools is not installed")
def test_redis_cli(server):
    cli = ["redis-cli", "-h", server.host, "-p", str(server.port)]
    assert run(*cli, "SET", "name", "shale").stdout.strip() == "OK"
    assert run(*cli, "GET", "name").stdout.strip() == "shale"
    assert run(*cli, "HSET", "h", "f", "v").stdout.strip() == "1"
    assert run(*cli, "--no-raw", "HGETALL", "h").stdout.splitlines() == ['1) "f"', '2) "v"']
    assert "ERR unknown command" in run(*cli, "FOO").stdout
    # Commands piped into redis-cli, as operators script it.
    piped = run(*cli, input="SET a 1\nINCR a\nGET a\n").stdout.split()
    assert piped == ["OK", "2", "2"]
    assert run(*cli, "-3", "HELLO", "3").returncode == 0
    assert "connected_clients" in run(*cli, "INFO", "clients").stdout


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools is not installed")
def test_redis_benchmark(server):
    result = run(
        "redis-benchmark", "-h", server.host, "-p", str(server.port),
        "-t", "set,get,incr,mset,hset", "-n", "2000", "-c", "10", "-r", "100", "-q",
    )
    for test in ["SET", "GET", "INCR", "MSET", "HSET"]:
        assert f"{test}" in result.stdout, result.stdout
    client = server.client(decode_responses=True)
    # -r 100 spreads keys over key:000000000000..99; INCR hit counter:* 2000 times in all.
    counters = [int(client.get(key)) for key in client.scan_iter(match="counter:*")]
    assert sum(counters) == 2000
    # SET and MSET wrote 3-byte values (redis-benchmark's default -d 3) to key:*.
    values = [client.get(key) for key in client.scan_iter(match="key:*")]
    assert values and all(len(value) == 3 for value in values)
    assert client.hlen("myhash") > 0
