/* RocksDB's transaction API, run on ShaleDB: a TransactionDB's transactions (commit,
 * rollback, save points, their own writes seen by reads and iterators, locks that make another
 * transaction and a direct write time out, get_for_update against a snapshot, the lock limit),
 * two-phase commit across a close and reopen, and an OptimisticTransactionDB's conflicts.
 * Exits non-zero on the first surprise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rocksdb/c.h"

#include "check.h"

/* Checks that `err` is set and starts with `prefix`, then frees it. */
static void expect_error(char** err, const char* prefix, int line) {
    if (*err == NULL) {
        fprintf(stderr, "line %d: expected an error starting %s, got none\n", line, prefix);
        failures++;
        return;
    }
    if (strncmp(*err, prefix, strlen(prefix)) != 0) {
        fprintf(stderr, "line %d: expected an error starting %s, got: %s\n", line, prefix, *err);
        failures++;
    }
    rocksdb_free(*err);
    *err = NULL;
}
#define EXPECT_ERROR(err, prefix) expect_error(&(err), (prefix), __LINE__)

static int same(const char* value, size_t len, const char* expected) {
    if (expected == NULL) return value == NULL;
    return value != NULL && len == strlen(expected) && memcmp(value, expected, len) == 0;
}

static void check_txn_get(rocksdb_transaction_t* txn, rocksdb_readoptions_t* ro, const char* key,
                          const char* expected, int line) {
    char* err = NULL;
    size_t len = 0;
    char* value = rocksdb_transaction_get(txn, ro, key, strlen(key), &len, &err);
    NO_ERROR(err);
    if (!same(value, len, expected)) {
        fprintf(stderr, "line %d: transaction get %s: expected %s\n", line, key,
                expected ? expected : "(none)");
        failures++;
    }
    rocksdb_free(value);
    /* The pinned read agrees. */
    rocksdb_pinnableslice_t* slice =
        rocksdb_transaction_get_pinned(txn, ro, key, strlen(key), &err);
    NO_ERROR(err);
    const char* pinned = slice ? rocksdb_pinnableslice_value(slice, &len) : NULL;
    if (!same(pinned, len, expected)) {
        fprintf(stderr, "line %d: transaction pinned get %s: expected %s\n", line, key,
                expected ? expected : "(none)");
        failures++;
    }
    rocksdb_pinnableslice_destroy(slice);
}
#define CHECK_TXN_GET(txn, ro, key, expected) check_txn_get((txn), (ro), (key), (expected), __LINE__)

static void check_db_get(rocksdb_transactiondb_t* db, rocksdb_readoptions_t* ro, const char* key,
                         const char* expected, int line) {
    char* err = NULL;
    size_t len = 0;
    char* value = rocksdb_transactiondb_get(db, ro, key, strlen(key), &len, &err);
    NO_ERROR(err);
    if (!same(value, len, expected)) {
        fprintf(stderr, "line %d: db get %s: expected %s\n", line, key,
                expected ? expected : "(none)");
        failures++;
    }
    rocksdb_free(value);
}
#define CHECK_DB_GET(db, ro, key, expected) check_db_get((db), (ro), (key), (expected), __LINE__)

static void check_iter(rocksdb_iterator_t* it, const char* key, const char* value, int line) {
    size_t len = 0;
    if (!rocksdb_iter_valid(it)) {
        fprintf(stderr, "line %d: iterator invalid, expected %s\n", line, key);
        failures++;
        return;
    }
    const char* k = rocksdb_iter_key(it, &len);
    int ok = same(k, len, key);
    const char* v = rocksdb_iter_value(it, &len);
    ok = ok && same(v, len, value);
    if (!ok) {
        fprintf(stderr, "line %d: iterator not at %s=%s\n", line, key, value);
        failures++;
    }
}
#define CHECK_ITER(it, key, value) check_iter((it), (key), (value), __LINE__)

static void put(rocksdb_transaction_t* txn, const char* key, const char* value) {
    char* err = NULL;
    rocksdb_transaction_put(txn, key, strlen(key), value, strlen(value), &err);
    NO_ERROR(err);
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/txndb", argv[1]);
    char* err = NULL;
    size_t len = 0;

    rocksdb_options_t* options = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(options, 1);
    rocksdb_transactiondb_options_t* db_options = rocksdb_transactiondb_options_create();
    rocksdb_transactiondb_options_set_transaction_lock_timeout(db_options, 10);
    rocksdb_transactiondb_options_set_default_lock_timeout(db_options, 20);
    rocksdb_transactiondb_options_set_num_stripes(db_options, 4); /* recorded only */
    rocksdb_transactiondb_t* db = rocksdb_transactiondb_open(options, db_options, path, &err);
    NO_ERROR(err);
    rocksdb_writeoptions_t* wo = rocksdb_writeoptions_create();
    rocksdb_readoptions_t* ro = rocksdb_readoptions_create();
    rocksdb_transaction_options_t* txn_options = rocksdb_transaction_options_create();

    /* Commit: the transaction's writes are its own until it commits. */
    rocksdb_transactiondb_put(db, wo, "a", 1, "base", 4, &err);
    NO_ERROR(err);
    rocksdb_transaction_t* txn = rocksdb_transaction_begin(db, wo, txn_options, NULL);
    CHECK(txn != NULL);
    put(txn, "a", "mine");
    put(txn, "b", "new");
    CHECK_TXN_GET(txn, ro, "a", "mine");
    CHECK_DB_GET(db, ro, "a", "base");
    CHECK_DB_GET(db, ro, "b", NULL);
    {
        const char* keys[3] = {"a", "b", "zz"};
        const size_t sizes[3] = {1, 1, 2};
        char* values[3];
        size_t value_sizes[3];
        char* errs[3];
        rocksdb_transaction_multi_get(txn, ro, 3, keys, sizes, values, value_sizes, errs);
        CHECK(errs[0] == NULL && errs[1] == NULL && errs[2] == NULL);
        CHECK(same(values[0], value_sizes[0], "mine"));
        CHECK(same(values[1], value_sizes[1], "new"));
        CHECK(values[2] == NULL);
        for (int i = 0; i < 3; i++) rocksdb_free(values[i]);
    }
    rocksdb_transaction_commit(txn, &err);
    NO_ERROR(err);
    CHECK_DB_GET(db, ro, "a", "mine");
    CHECK_DB_GET(db, ro, "b", "new");
    /* Committed twice is an error. */
    rocksdb_transaction_commit(txn, &err);
    EXPECT_ERROR(err, "Invalid argument: ");

    /* Rollback: the transaction begins again on the old handle, writes, and forgets. */
    txn = rocksdb_transaction_begin(db, wo, txn_options, txn);
    put(txn, "c", "gone");
    rocksdb_transaction_delete(txn, "a", 1, &err);
    NO_ERROR(err);
    CHECK_TXN_GET(txn, ro, "a", NULL);
    rocksdb_transaction_rollback(txn, &err);
    NO_ERROR(err);
    CHECK_TXN_GET(txn, ro, "c", NULL);
    rocksdb_transaction_commit(txn, &err);
    NO_ERROR(err);
    CHECK_DB_GET(db, ro, "a", "mine");
    CHECK_DB_GET(db, ro, "c", NULL);

    /* Save points. */
    txn = rocksdb_transaction_begin(db, wo, txn_options, txn);
    put(txn, "s1", "1");
    rocksdb_transaction_set_savepoint(txn);
    put(txn, "s2", "2");
    put(txn, "s1", "changed");
    CHECK_TXN_GET(txn, ro, "s1", "changed");
    rocksdb_transaction_rollback_to_savepoint(txn, &err);
    NO_ERROR(err);
    CHECK_TXN_GET(txn, ro, "s1", "1");
    CHECK_TXN_GET(txn, ro, "s2", NULL);
    rocksdb_transaction_rollback_to_savepoint(txn, &err);
    EXPECT_ERROR(err, "NotFound: ");
    rocksdb_transaction_commit(txn, &err);
    NO_ERROR(err);
    CHECK_DB_GET(db, ro, "s1", "1");
    CHECK_DB_GET(db, ro, "s2", NULL);

    /* An iterator sees the transaction's writes over the database's, both ways. Keys now:
     * a=mine b=new s1=1; the transaction deletes b, adds ab, changes s1. */
    txn = rocksdb_transaction_begin(db, wo, txn_options, txn);
    rocksdb_transaction_delete(txn, "b", 1, &err);
    NO_ERROR(err);
    put(txn, "ab", "own");
    put(txn, "s1", "own1");
    rocksdb_iterator_t* it = rocksdb_transaction_create_iterator(txn, ro);
    CHECK(it != NULL);
    CHECK(!rocksdb_iter_valid(it));
    rocksdb_iter_seek_to_first(it);
    CHECK_ITER(it, "a", "mine");
    rocksdb_iter_next(it);
    CHECK_ITER(it, "ab", "own");
    rocksdb_iter_next(it);
    CHECK_ITER(it, "s1", "own1");
    rocksdb_iter_next(it);
    CHECK(!rocksdb_iter_valid(it));
    rocksdb_iter_seek_to_last(it);
    CHECK_ITER(it, "s1", "own1");
    rocksdb_iter_prev(it);
    CHECK_ITER(it, "ab", "own");
    rocksdb_iter_seek(it, "b", 1);
    CHECK_ITER(it, "s1", "own1");
    rocksdb_iter_get_error(it, &err);
    NO_ERROR(err);
    rocksdb_iter_destroy(it);
    rocksdb_transaction_rollback(txn, &err);
    NO_ERROR(err);

    /* Locks: a key the transaction wrote makes another transaction's write, and a write
     * outside transactions, time out; after its commit both go through. */
    rocksdb_transaction_t* other = rocksdb_transaction_begin(db, wo, txn_options, NULL);
    put(txn, "k", "first");
    rocksdb_transaction_put(other, "k", 1, "second", 6, &err);
    EXPECT_ERROR(err, "Operation timed out: ");
    rocksdb_transactiondb_put(db, wo, "k", 1, "direct", 6, &err);
    EXPECT_ERROR(err, "Operation timed out: ");
    {
        /* A batch through the TransactionDB locks its keys too. */
        rocksdb_writebatch_t* batch = rocksdb_writebatch_create();
        rocksdb_writebatch_put(batch, "j", 1, "1", 1);
        rocksdb_writebatch_put(batch, "k", 1, "batch", 5);
        rocksdb_transactiondb_write(db, wo, batch, &err);
        EXPECT_ERROR(err, "Operation timed out: ");
        CHECK_DB_GET(db, ro, "j", NULL);
        rocksdb_writebatch_destroy(batch);
    }
    /* get_for_update waits for the lock as a write does. */
    rocksdb_transaction_get_for_update(other, ro, "k", 1, &len, 1, &err);
    EXPECT_ERROR(err, "Operation timed out: ");
    rocksdb_transaction_commit(txn, &err);
    NO_ERROR(err);
    rocksdb_transaction_put(other, "k", 1, "second", 6, &err);
    NO_ERROR(err);
    rocksdb_transaction_commit(other, &err);
    NO_ERROR(err);
    CHECK_DB_GET(db, ro, "k", "second");
    rocksdb_transactiondb_put(db, wo, "k", 1, "direct", 6, &err);
    NO_ERROR(err);
    CHECK_DB_GET(db, ro, "k", "direct");
    rocksdb_transaction_destroy(other);

    /* get_for_update with a snapshot: a key committed by another writer after the snapshot is
     * "Resource busy"; a plain read still sees the latest value, and the snapshot the old. */
    rocksdb_transaction_options_set_set_snapshot(txn_options, 1);
    txn = rocksdb_transaction_begin(db, wo, txn_options, txn);
    rocksdb_transaction_options_set_set_snapshot(txn_options, 0);
    rocksdb_transactiondb_put(db, wo, "k2", 2, "later", 5, &err);
    NO_ERROR(err);
    CHECK_TXN_GET(txn, ro, "k2", "later");
    char* value = rocksdb_transaction_get_for_update(txn, ro, "k2", 2, &len, 1, &err);
    CHECK(value == NULL);
    EXPECT_ERROR(err, "Resource busy: ");
    /* A write to it is validated the same way. */
    rocksdb_transaction_put(txn, "k2", 2, "x", 1, &err);
    EXPECT_ERROR(err, "Resource busy: ");
    /* The failed validation released the lock. */
    rocksdb_transactiondb_put(db, wo, "k2", 2, "again", 5, &err);
    NO_ERROR(err);
    value = rocksdb_transaction_get_for_update(txn, ro, "a", 1, &len, 1, &err);
    NO_ERROR(err);
    CHECK(same(value, len, "mine"));
    rocksdb_free(value);
    {
        const rocksdb_snapshot_t* snapshot = rocksdb_transaction_get_snapshot(txn);
        CHECK(snapshot != NULL);
        rocksdb_readoptions_t* at_snapshot = rocksdb_readoptions_create();
        rocksdb_readoptions_set_snapshot(at_snapshot, snapshot);
        CHECK_DB_GET(db, at_snapshot, "k2", NULL);
        CHECK_DB_GET(db, at_snapshot, "a", "mine");
        rocksdb_readoptions_destroy(at_snapshot);
        rocksdb_free((void*)snapshot);
    }
    rocksdb_transaction_commit(txn, &err);
    NO_ERROR(err);
    rocksdb_transaction_destroy(txn);
    /* A transaction without a snapshot hands out none. */
    txn = rocksdb_transaction_begin(db, wo, txn_options, NULL);
    CHECK(rocksdb_transaction_get_snapshot(txn) == NULL);
    rocksdb_transaction_destroy(txn);

    /* Merges are refused by name. */
    txn = rocksdb_transaction_begin(db, wo, txn_options, NULL);
    rocksdb_transaction_merge(txn, "m", 1, "1", 1, &err);
    EXPECT_ERROR(err, "Not implemented: ");
    rocksdb_transactiondb_merge(db, wo, "m", 1, "1", 1, &err);
    EXPECT_ERROR(err, "Not implemented: ");

    /* Two-phase commit: a name is needed; prepare, then commit. */
    rocksdb_transaction_prepare(txn, &err);
    EXPECT_ERROR(err, "Invalid argument: ");
    rocksdb_transaction_set_name(txn, "once", 4, &err);
    NO_ERROR(err);
    put(txn, "p0", "0");
    rocksdb_transaction_prepare(txn, &err);
    NO_ERROR(err);
    rocksdb_transaction_put(txn, "p0", 2, "late", 4, &err);
    EXPECT_ERROR(err, "Invalid argument: ");
    rocksdb_transaction_commit(txn, &err);
    NO_ERROR(err);
    CHECK_DB_GET(db, ro, "p0", "0");
    rocksdb_transaction_destroy(txn);

    /* Two prepared transactions outlive their handles and the database's close. */
    rocksdb_transaction_t* t1 = rocksdb_transaction_begin(db, wo, txn_options, NULL);
    rocksdb_transaction_t* t2 = rocksdb_transaction_begin(db, wo, txn_options, NULL);
    rocksdb_transaction_set_name(t1, "t1", 2, &err);
    NO_ERROR(err);
    rocksdb_transaction_set_name(t2, "t1", 2, &err);
    EXPECT_ERROR(err, "Invalid argument: ");
    rocksdb_transaction_set_name(t2, "t2", 2, &err);
    NO_ERROR(err);
    put(t1, "p1", "one");
    put(t2, "p2", "two");
    rocksdb_transaction_prepare(t1, &err);
    NO_ERROR(err);
    rocksdb_transaction_prepare(t2, &err);
    NO_ERROR(err);
    rocksdb_transactiondb_put(db, wo, "p1", 2, "direct", 6, &err);
    EXPECT_ERROR(err, "Operation timed out: ");
    rocksdb_transaction_destroy(t1);
    rocksdb_transaction_destroy(t2);
    rocksdb_transactiondb_close(db);

    /* The reserved record store is no column family. */
    {
        size_t count = 0;
        char** names = rocksdb_list_column_families(options, path, &count, &err);
        NO_ERROR(err);
        CHECK(count == 1 && strcmp(names[0], "default") == 0);
        rocksdb_list_column_families_destroy(names, count);
    }

    db = rocksdb_transactiondb_open(options, db_options, path, &err);
    NO_ERROR(err);
    CHECK_DB_GET(db, ro, "p1", NULL);
    CHECK_DB_GET(db, ro, "p2", NULL);
    /* Their locks are held again. */
    rocksdb_transactiondb_put(db, wo, "p1", 2, "direct", 6, &err);
    EXPECT_ERROR(err, "Operation timed out: ");
    size_t count = 0;
    rocksdb_transaction_t** prepared = rocksdb_transactiondb_get_prepared_transactions(db, &count);
    CHECK(count == 2);
    for (size_t i = 0; i < count; i++) {
        char* name = rocksdb_transaction_get_name(prepared[i], &len);
        CHECK(len == 2);
        if (len == 2 && memcmp(name, "t1", 2) == 0) {
            rocksdb_transaction_commit(prepared[i], &err);
        } else {
            rocksdb_transaction_rollback(prepared[i], &err);
        }
        NO_ERROR(err);
        rocksdb_free(name);
        rocksdb_transaction_destroy(prepared[i]);
    }
    rocksdb_free(prepared);
    CHECK_DB_GET(db, ro, "p1", "one");
    CHECK_DB_GET(db, ro, "p2", NULL);
    rocksdb_transactiondb_put(db, wo, "p2", 2, "free", 4, &err);
    NO_ERROR(err);
    rocksdb_transactiondb_close(db);
    db = rocksdb_transactiondb_open(options, db_options, path, &err);
    NO_ERROR(err);
    CHECK(rocksdb_transactiondb_get_prepared_transactions(db, &count) == NULL && count == 0);
    CHECK_DB_GET(db, ro, "p1", "one");
    CHECK_DB_GET(db, ro, "p2", "free");
    rocksdb_transactiondb_close(db);

    /* The lock limit: max_num_locks keys per column family. */
    rocksdb_transactiondb_options_set_max_num_locks(db_options, 2);
    db = rocksdb_transactiondb_open(options, db_options, path, &err);
    NO_ERROR(err);
    txn = rocksdb_transaction_begin(db, wo, txn_options, NULL);
    put(txn, "l1", "1");
    put(txn, "l2", "2");
    put(txn, "l1", "again");
    rocksdb_transaction_put(txn, "l3", 2, "3", 1, &err);
    EXPECT_ERROR(err, "Operation aborted: ");
    rocksdb_transaction_commit(txn, &err);
    NO_ERROR(err);
    rocksdb_transaction_destroy(txn);
    rocksdb_transactiondb_close(db);
    rocksdb_transaction_options_destroy(txn_options);
    rocksdb_transactiondb_options_destroy(db_options);

    /* OptimisticTransactionDB: the first committer wins. */
    snprintf(path, sizeof path, "%s/optimistic", argv[1]);
    rocksdb_optimistictransactiondb_t* odb = rocksdb_optimistictransactiondb_open(options, path, &err);
    NO_ERROR(err);
    rocksdb_t* base = rocksdb_optimistictransactiondb_get_base_db(odb);
    rocksdb_put(base, wo, "x", 1, "0", 1, &err);
    NO_ERROR(err);
    rocksdb_optimistictransaction_options_t* otxn_options =
        rocksdb_optimistictransaction_options_create();
    rocksdb_transaction_t* o1 = rocksdb_optimistictransaction_begin(odb, wo, otxn_options, NULL);
    rocksdb_transaction_t* o2 = rocksdb_optimistictransaction_begin(odb, wo, otxn_options, NULL);
    put(o1, "x", "1");
    put(o2, "x", "2");
    CHECK_TXN_GET(o1, ro, "x", "1");
    rocksdb_transaction_commit(o2, &err);
    NO_ERROR(err);
    rocksdb_transaction_commit(o1, &err);
    EXPECT_ERROR(err, "Resource busy: ");
    /* It keeps failing until rolled back. */
    rocksdb_transaction_commit(o1, &err);
    EXPECT_ERROR(err, "Resource busy: ");
    rocksdb_transaction_rollback(o1, &err);
    NO_ERROR(err);
    {
        char* got = rocksdb_get(base, ro, "x", 1, &len, &err);
        NO_ERROR(err);
        CHECK(same(got, len, "2"));
        rocksdb_free(got);
    }
    /* A read for update conflicts with a later commit, even when nothing is written. */
    o1 = rocksdb_optimistictransaction_begin(odb, wo, otxn_options, o1);
    value = rocksdb_transaction_get_for_update(o1, ro, "x", 1, &len, 1, &err);
    NO_ERROR(err);
    CHECK(same(value, len, "2"));
    rocksdb_free(value);
    rocksdb_put(base, wo, "x", 1, "3", 1, &err);
    NO_ERROR(err);
    rocksdb_transaction_commit(o1, &err);
    EXPECT_ERROR(err, "Resource busy: ");
    /* Optimistic transactions have no names and no prepare. */
    rocksdb_transaction_set_name(o2, "n", 1, &err);
    EXPECT_ERROR(err, "Invalid argument: ");
    rocksdb_transaction_prepare(o2, &err);
    EXPECT_ERROR(err, "Invalid argument: ");
    rocksdb_transaction_destroy(o1);
    rocksdb_transaction_destroy(o2);
    rocksdb_optimistictransaction_options_destroy(otxn_options);
    rocksdb_optimistictransactiondb_close_base_db(base);
    rocksdb_optimistictransactiondb_close(odb);

    rocksdb_readoptions_destroy(ro);
    rocksdb_writeoptions_destroy(wo);
    rocksdb_options_destroy(options);
    if (failures > 0) {
        fprintf(stderr, "transactions: %d checks failed\n", failures);
        return 1;
    }
    printf("transactions: ok\n");
    return 0;
}
