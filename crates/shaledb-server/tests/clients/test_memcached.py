"""Goal: real memcached clients nobody here wrote work against `shale serve --memcached`, and
get what Debian's memcached gives them.

Method: start the real server with --memcached on a loopback port the OS picks, and Debian's
memcached beside it; run the same operations through pymemcache and through libmemcached's
command-line tools (memccp, memccat, memcflush) against both, and compare the results.
"""

import json
import os
import pathlib
import socket
import subprocess
import threading
import time

import pytest
from pymemcache.client.base import Client

ROOT = pathlib.Path(__file__).resolve().parents[4]
SHALE = os.environ.get("SHALE_BIN", str(ROOT / "target" / "debug" / "shale"))


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def shale(tmp_path):
    process = subprocess.Popen(
        [SHALE, "--db", str(tmp_path / "kvdb"), "serve", "--bind", "127.0.0.1:0",
         "--memcached", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    address = None
    for line in process.stdout:
        event = json.loads(line)
        if event.get("message") == "memcached listening":
            address = event["address"]
        if event.get("message") == "listening":
            break
    threading.Thread(target=process.stdout.read, daemon=True).start()
    host, port = address.rsplit(":", 1)
    yield host, int(port)
    process.terminate()
    assert process.wait(timeout=60) == 0


@pytest.fixture
def memcached():
    port = free_port()
    process = subprocess.Popen(["memcached", "-p", str(port), "-U", "0", "-l", "127.0.0.1",
                                "-u", "nobody"])
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            time.sleep(0.05)
    yield "127.0.0.1", port
    process.terminate()
    process.wait(timeout=60)


def pymemcache_session(address):
    """What a pymemcache user sees for a run of operations, in order."""
    client = Client(address, default_noreply=False)
    seen = []
    seen.append(client.set("greeting", b"hello", expire=100, flags=3))
    seen.append(client.get("greeting"))
    seen.append(client.add("greeting", b"again"))
    seen.append(client.add("other", b"o"))
    seen.append(client.replace("missing", b"x"))
    seen.append(client.append("greeting", b" world"))
    seen.append(client.prepend("greeting", b">"))
    seen.append(client.get_many(["greeting", "other", "missing"]))
    value, cas = client.gets("greeting")
    seen.append(value)
    seen.append(client.cas("greeting", b"swapped", cas))
    seen.append(client.cas("greeting", b"stale", cas))
    seen.append(client.get("greeting"))
    seen.append(client.set_many({"a": b"1", "b": b"2", "c": b"x"}))
    seen.append(client.incr("a", 41))
    seen.append(client.decr("b", 5))
    seen.append(client.incr("missing", 1))
    with pytest.raises(Exception) as non_numeric:
        client.incr("c", 1)
    seen.append(type(non_numeric.value).__name__)
    seen.append(client.touch("a", 50))
    seen.append(client.touch("missing", 50))
    seen.append(client.gat("a", expire=60) if hasattr(client, "gat") else client.get("a"))
    seen.append(client.delete("a"))
    seen.append(client.delete("a"))
    seen.append(client.set("expired", b"gone", expire=-1))
    seen.append(client.get("expired"))
    seen.append(sorted(client.get_many(["a", "b", "c", "greeting"]).items()))
    seen.append(client.flush_all())
    seen.append(client.get_many(["b", "c", "greeting", "other"]))
    stats = client.stats()
    seen.append(all(name in stats for name in (b"pid", b"uptime", b"curr_connections",
                                                b"cmd_get", b"get_hits", b"get_misses")))
    seen.append(bool(client.version()))
    client.close()
    return seen


def test_pymemcache_sees_what_memcached_gives(shale, memcached):
    expected = pymemcache_session(memcached)
    assert pymemcache_session(shale) == expected


def libmemcached_session(address, tmp_path):
    """Files copied in with memccp and read back with memccat, then flushed with memcflush."""
    servers = f"--servers={address[0]}:{address[1]}"
    files = []
    for name, size in [("small.txt", 10), ("medium.bin", 100_000), ("large.bin", 1_000_000)]:
        path = tmp_path / name
        path.write_bytes(bytes((index * 7 + len(name)) % 256 for index in range(size)))
        files.append(path)
    subprocess.run(["memccp", servers, *map(str, files)], check=True, cwd=tmp_path)
    read_back = {}
    for path in files:
        out = subprocess.run(["memccat", servers, path.name], check=True,
                             capture_output=True).stdout
        # memccat ends what it prints with a newline.
        read_back[path.name] = out == path.read_bytes() + b"\n"
    subprocess.run(["memcflush", servers], check=True)
    gone = subprocess.run(["memccat", servers, files[0].name], capture_output=True)
    return read_back, gone.returncode != 0, gone.stdout


def test_libmemcached_tools_copy_and_read_back(shale, memcached, tmp_path):
    (tmp_path / "memcached").mkdir()
    (tmp_path / "shale").mkdir()
    expected = libmemcached_session(memcached, tmp_path / "memcached")
    assert expected[0] == {"small.txt": True, "medium.bin": True, "large.bin": True}
    assert libmemcached_session(shale, tmp_path / "shale") == expected
