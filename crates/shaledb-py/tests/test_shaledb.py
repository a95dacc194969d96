"""The shaledb Python package: API, dict protocol, iteration, batches, snapshots,
transactions, threads, reopen and errors."""

import threading

import pytest
import shaledb


@pytest.fixture
def db(tmp_path):
    with shaledb.open(tmp_path / "kvdb", durability="none", cache_mb=8) as handle:
        yield handle


def test_dict_protocol(db):
    users = db["users"]
    users[b"alice"] = b"1"
    users[bytearray(b"bob")] = memoryview(b"2")
    assert users[b"alice"] == b"1"
    assert users[b"bob"] == b"2"
    assert b"alice" in users and b"carol" not in users
    assert len(users) == 2
    assert users.get(b"carol") is None and users.get(b"carol", b"x") == b"x"
    assert users.get_many([b"alice", b"carol", b"bob"]) == [b"1", None, b"2"]
    del users[b"alice"]
    with pytest.raises(KeyError):
        users[b"alice"]
    with pytest.raises(KeyError):
        del users[b"alice"]
    assert db.kvs("users").name == "users"
    assert db.kvs_names() == ["users"]


def test_str_needs_an_encoding(tmp_path):
    with shaledb.open(tmp_path / "bytes") as plain:
        with pytest.raises(TypeError, match="bytes-like"):
            plain["t"]["key"] = b"v"
        with pytest.raises(TypeError):
            plain["t"][b"key"] = 42
    with shaledb.open(tmp_path / "text", encoding="utf-8") as text:
        text["t"]["clé"] = "valeur"
        assert text["t"]["clé"] == "valeur".encode()


def test_iteration(db):
    kvs = db["t"]
    for index in range(50):
        kvs[b"k%02d" % index] = b"v%d" % index
    kvs[b"other"] = b"o"
    assert list(kvs.keys(prefix=b"k0")) == [b"k%02d" % i for i in range(10)]
    assert list(kvs.items(start=b"k10", stop=b"k13")) == [(b"k10", b"v10"), (b"k11", b"v11"), (b"k12", b"v12")]
    assert list(kvs.values(prefix=b"k4", reverse=True))[0] == b"v49"
    assert list(kvs)[-1] == b"other"
    assert next(iter(kvs.items(reverse=True))) == (b"other", b"o")
    kvs.prefix_delete(b"k")
    assert list(kvs) == [b"other"]
    with pytest.raises(ValueError):
        kvs.items(prefix=b"k", start=b"a")


def test_batch_is_atomic(db):
    kvs = db["t"]
    with db.batch() as batch:
        batch.put(kvs, b"a", b"1")
        batch.put(kvs, b"b", b"2")
        batch.delete(kvs, b"a")
    assert kvs.get(b"a") is None and kvs[b"b"] == b"2"
    with pytest.raises(RuntimeError):
        with db.batch() as batch:
            batch.put(kvs, b"c", b"3")
            raise RuntimeError("abandon")
    assert b"c" not in kvs
    batch = db.batch()
    batch.put(kvs, b"ok", b"1")
    batch.put(kvs, b"", b"bad key")
    with pytest.raises(shaledb.InvalidArgument):
        batch.write()
    assert b"ok" not in kvs


def test_snapshot_does_not_change(db):
    kvs = db["t"]
    kvs[b"a"] = b"old"
    with db.snapshot() as snapshot:
        kvs[b"a"] = b"new"
        kvs[b"b"] = b"new"
        assert snapshot.get(kvs, b"a") == b"old"
        assert snapshot.get(kvs, b"b", b"absent") == b"absent"
        assert list(snapshot.items(kvs)) == [(b"a", b"old")]
    with pytest.raises(shaledb.Closed):
        snapshot.get(kvs, b"a")


def test_transactions(db):
    kvs = db["bank"]
    kvs[b"alice"] = b"100"
    with db.transaction() as txn:
        txn.put(kvs, b"alice", b"90")
        txn.put(kvs, b"bob", b"10")
        assert txn.get(kvs, b"alice") == b"90"
        assert kvs[b"alice"] == b"100"
    assert kvs[b"alice"] == b"90" and kvs[b"bob"] == b"10"

    first, second = db.transaction(), db.transaction()
    first.put(kvs, b"alice", b"80")
    second.put(kvs, b"alice", b"70")
    second.put(kvs, b"carol", b"1")
    first.commit()
    with pytest.raises(shaledb.Conflict):
        second.commit()
    assert kvs[b"alice"] == b"80" and b"carol" not in kvs
    assert issubclass(shaledb.Conflict, shaledb.Error)

    with pytest.raises(KeyError):
        with db.transaction() as txn:
            txn.put(kvs, b"dave", b"1")
            raise KeyError("abort")
    assert b"dave" not in kvs
    txn = db.transaction(validate_reads=True)
    txn.abort()
    with pytest.raises(shaledb.Closed):
        txn.commit()


def test_threads_share_the_kvdb(db):
    kvs = db["t"]
    errors = []

    def work(worker):
        try:
            for index in range(500):
                key = b"%d-%d" % (worker, index)
                kvs[key] = key * 10
                assert kvs[key] == key * 10
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(kvs) == 2000


def test_reopen_and_errors(tmp_path):
    path = tmp_path / "kvdb"
    db = shaledb.open(path, durability="sync")
    db["t"][b"k"] = b"v" * 1000
    with pytest.raises(shaledb.Locked):
        shaledb.open(path)
    with pytest.raises(shaledb.LimitExceeded):
        db["t"][b"x" * 1025] = b"v"
    with pytest.raises(shaledb.InvalidArgument):
        db["t"][b""] = b"v"
    stats = db.stats()
    assert stats["index_keys"] == 1
    db.close()
    with pytest.raises(shaledb.Closed):
        db.kvs("t")
    with shaledb.open(path) as again:
        assert again["t"][b"k"] == b"v" * 1000
        again.drop_kvs("t")
        assert again.kvs_names() == []
    with pytest.raises(shaledb.InvalidArgument):
        shaledb.open(tmp_path / "other", durability="sometimes")


def test_compressed_kvs(db):
    packed = db.kvs("packed", compression="lz4")
    value = b"compressible " * 300
    before = db.stats()["live_bytes"]
    packed[b"k"] = value
    assert db.stats()["live_bytes"] - before < len(value) // 4
    assert packed[b"k"] == value
    before = db.stats()["live_bytes"]
    db.kvs("plain", compression="none")[b"k"] = value
    assert db.stats()["live_bytes"] - before > len(value)
    with pytest.raises(shaledb.InvalidArgument, match="none or lz4"):
        db.kvs("other", compression="zstd")


def test_help_reads_well():
    assert "shaledb.open" in shaledb.__doc__
    assert "KVDB" in shaledb.open.__doc__
    assert "atomically" in shaledb.Transaction.commit.__doc__
