"""Python put/get throughput with N threads, the same workload as `shale bench quick`
(random-order puts of NUM keys of 23 bytes with 1 KiB values, then NUM uniform random gets),
to show that the GIL is released around engine calls.

Usage: python bench.py [--num N] [--threads 1,4] [--cache-mb MB] [--dir DIR]
"""
import argparse
import os
import random
import shutil
import threading
import time

import shaledb


def key_for(ordinal: int) -> bytes:
    # FNV-1a of the ordinal's 8 little-endian bytes, as `shale bench quick` names keys.
    value = 0xCBF29CE484222325
    for byte in ordinal.to_bytes(8, "little"):
        value ^= byte
        value = (value * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return b"user%019d" % value


def parallel(threads, items, work):
    chunk = (len(items) + threads - 1) // threads
    workers = [threading.Thread(target=work, args=(items[i * chunk:(i + 1) * chunk],)) for i in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num", type=int, default=200_000)
    parser.add_argument("--threads", default="1,4")
    parser.add_argument("--cache-mb", type=int, default=None)
    parser.add_argument("--dir", default="shale-data/pybench")
    args = parser.parse_args()
    value = os.urandom(1024)
    cache_mb = args.cache_mb if args.cache_mb is not None else max(1, args.num * 1047 // 8 >> 20)
    for threads in [int(t) for t in args.threads.split(",")]:
        path = f"{args.dir}/run-{os.getpid()}-{threads}t"
        shutil.rmtree(path, ignore_errors=True)
        with shaledb.open(path, cache_mb=cache_mb) as db:
            kvs = db["bench"]
            keys = [key_for(i) for i in range(args.num)]
            random.shuffle(keys)

            def put(part):
                for key in part:
                    kvs[key] = value

            put_secs = parallel(threads, keys, put)
            db.sync()
            probes = [keys[random.randrange(args.num)] for _ in range(args.num)]

            def get(part):
                for key in part:
                    assert kvs[key] == value

            get_secs = parallel(threads, probes, get)
        shutil.rmtree(path, ignore_errors=True)
        print(f"python threads {threads:>2}: put {args.num / put_secs:>9.0f} ops/s | get {args.num / get_secs:>9.0f} ops/s "
              f"(cache {cache_mb} MiB, {args.num} keys)")


if __name__ == "__main__":
    main()
