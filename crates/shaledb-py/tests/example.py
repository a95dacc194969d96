"""The README's Python example."""
import sys

import shaledb

with shaledb.open(sys.argv[1] if len(sys.argv) > 1 else "example-kvdb") as db:
    users = db["users"]
    users[b"user:1"] = b"Ada"
    print(users[b"user:1"])
    with db.transaction() as txn:
        txn.put(users, b"user:2", b"Grace")
    for key, value in users.items(prefix=b"user:"):
        print(key, value)
