/*
 * Exercises every function of the ShaleDB C API, including error paths. Run under valgrind
 * by crates/shaledb-c/tests/c_api.rs: zero leaks and zero invalid accesses are required.
 * Usage: api_test DIRECTORY
 */
#include <shaledb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", \
    __FILE__, __LINE__, #cond, shaledb_last_error()); failures++; } } while (0)
#define OK(call) CHECK((call) == SHALEDB_OK)
#define B(s) ((const uint8_t *)(s))

static void test_open_errors(const char *dir) {
    shaledb_db *db = NULL;
    CHECK(shaledb_open(NULL, NULL, &db) == SHALEDB_INVALID_ARGUMENT);
    CHECK(strstr(shaledb_last_error(), "path") != NULL);
    CHECK(shaledb_open(dir, "durability=sometimes", &db) == SHALEDB_INVALID_ARGUMENT);
    CHECK(shaledb_open(dir, "bogus=1", &db) == SHALEDB_INVALID_ARGUMENT);
    CHECK(shaledb_open(dir, "cache_mb=x", &db) == SHALEDB_INVALID_ARGUMENT);
    CHECK(shaledb_open(dir, NULL, NULL) == SHALEDB_INVALID_ARGUMENT);
    CHECK(shaledb_close(NULL) == SHALEDB_INVALID_ARGUMENT);
}

static void test_kv(shaledb_db *db) {
    shaledb_kvs *kvs = NULL;
    OK(shaledb_kvs_open(db, "kv", 0, &kvs));
    CHECK(shaledb_kvs_open(db, NULL, 0, &kvs) == SHALEDB_INVALID_ARGUMENT);
    CHECK(shaledb_kvs_open(NULL, "kv", 0, &kvs) == SHALEDB_INVALID_ARGUMENT);
    OK(shaledb_put(kvs, B("alpha"), 5, B("one"), 3));
    OK(shaledb_put(kvs, B("empty"), 5, NULL, 0));
    CHECK(shaledb_put(kvs, NULL, 5, B("x"), 1) == SHALEDB_INVALID_ARGUMENT);
    CHECK(shaledb_put(kvs, B("k"), 0, B("x"), 1) == SHALEDB_INVALID_ARGUMENT);
    CHECK(shaledb_put(NULL, B("k"), 1, B("x"), 1) == SHALEDB_INVALID_ARGUMENT);
    uint8_t *big_key = calloc(1025, 1);
    CHECK(shaledb_put(kvs, big_key, 1025, B("x"), 1) == SHALEDB_LIMIT_EXCEEDED);
    free(big_key);

    char buffer[16];
    size_t len = 99;
    OK(shaledb_get(kvs, B("alpha"), 5, (uint8_t *)buffer, sizeof buffer, &len));
    CHECK(len == 3 && memcmp(buffer, "one", 3) == 0);
    CHECK(shaledb_get(kvs, B("alpha"), 5, (uint8_t *)buffer, 2, &len) == SHALEDB_BUFFER_TOO_SMALL);
    CHECK(len == 3);
    CHECK(shaledb_get(kvs, B("alpha"), 5, NULL, 0, &len) == SHALEDB_BUFFER_TOO_SMALL);
    OK(shaledb_get(kvs, B("empty"), 5, NULL, 0, &len));
    CHECK(len == 0);
    CHECK(shaledb_get(kvs, B("missing"), 7, (uint8_t *)buffer, sizeof buffer, &len) == SHALEDB_NOT_FOUND);
    CHECK(shaledb_get(kvs, B("alpha"), 5, (uint8_t *)buffer, sizeof buffer, NULL) == SHALEDB_INVALID_ARGUMENT);

    uint8_t *value = NULL;
    OK(shaledb_get_alloc(kvs, B("alpha"), 5, &value, &len));
    CHECK(value != NULL && len == 3 && memcmp(value, "one", 3) == 0);
    shaledb_free(value);
    OK(shaledb_get_alloc(kvs, B("empty"), 5, &value, &len));
    CHECK(value != NULL && len == 0);
    shaledb_free(value);
    CHECK(shaledb_get_alloc(kvs, B("missing"), 7, &value, &len) == SHALEDB_NOT_FOUND);
    CHECK(value == NULL);
    shaledb_free(NULL);

    OK(shaledb_delete(kvs, B("alpha"), 5));
    CHECK(shaledb_get(kvs, B("alpha"), 5, (uint8_t *)buffer, sizeof buffer, &len) == SHALEDB_NOT_FOUND);
    OK(shaledb_put(kvs, B("p:1"), 3, B("1"), 1));
    OK(shaledb_put(kvs, B("p:2"), 3, B("2"), 1));
    OK(shaledb_prefix_delete(kvs, B("p:"), 2));
    CHECK(shaledb_get(kvs, B("p:2"), 3, (uint8_t *)buffer, sizeof buffer, &len) == SHALEDB_NOT_FOUND);
    CHECK(shaledb_prefix_delete(kvs, NULL, 0) == SHALEDB_INVALID_ARGUMENT);
    shaledb_kvs_free(kvs);
    shaledb_kvs_free(NULL);
}

static void test_kvs_lifecycle(shaledb_db *db) {
    shaledb_kvs *fixed = NULL;
    OK(shaledb_kvs_open(db, "fixed", 2, &fixed));
    CHECK(shaledb_prefix_delete(fixed, B("a"), 1) == SHALEDB_INVALID_ARGUMENT);
    OK(shaledb_prefix_delete(fixed, B("ab"), 2));
    char *names = NULL;
    OK(shaledb_kvs_names(db, &names));
    CHECK(names != NULL && strstr(names, "fixed") != NULL && strstr(names, "kv") != NULL);
    shaledb_free(names);
    OK(shaledb_kvs_drop(db, "fixed"));
    CHECK(shaledb_put(fixed, B("k"), 1, B("v"), 1) == SHALEDB_KVS_NOT_FOUND);
    CHECK(shaledb_kvs_drop(db, "fixed") == SHALEDB_KVS_NOT_FOUND);
    shaledb_kvs_free(fixed);
}

/* Live bytes of the KVDB, from its stats. */
static unsigned long long live_bytes(shaledb_db *db) {
    char *json = NULL;
    unsigned long long live = 0;
    OK(shaledb_stats_json(db, &json));
    const char *field = json == NULL ? NULL : strstr(json, "\"live_bytes\":");
    CHECK(field != NULL);
    if (field != NULL)
        live = strtoull(field + strlen("\"live_bytes\":"), NULL, 10);
    shaledb_free(json);
    return live;
}

static void test_kvs_options(shaledb_db *db) {
    shaledb_kvs *kvs = NULL;
    OK(shaledb_kvs_open_with_options(db, "packed", "compression=lz4; prefix_len=2", &kvs));
    char value[4000];
    for (size_t i = 0; i < sizeof value; i++)
        value[i] = "compressible "[i % 13];
    unsigned long long before = live_bytes(db);
    OK(shaledb_put(kvs, B("ab"), 2, B(value), sizeof value));
    CHECK(live_bytes(db) - before < sizeof value / 4); /* stored compressed */
    uint8_t *got = NULL;
    size_t len = 0;
    OK(shaledb_get_alloc(kvs, B("ab"), 2, &got, &len));
    CHECK(got != NULL && len == sizeof value && memcmp(got, value, len) == 0);
    shaledb_free(got);
    CHECK(shaledb_prefix_delete(kvs, B("a"), 1) == SHALEDB_INVALID_ARGUMENT); /* prefix_len 2 */
    shaledb_kvs_free(kvs);
    OK(shaledb_kvs_open_with_options(db, "plain", NULL, &kvs));
    shaledb_kvs_free(kvs);
    kvs = NULL;
    CHECK(shaledb_kvs_open_with_options(db, "x", "compression=zstd", &kvs) == SHALEDB_INVALID_ARGUMENT);
    CHECK(strstr(shaledb_last_error(), "none or lz4") != NULL);
    CHECK(shaledb_kvs_open_with_options(db, "x", "media_policy=fastest", &kvs) == SHALEDB_INVALID_ARGUMENT);
    CHECK(shaledb_kvs_open_with_options(db, "x", "prefix_len=two", &kvs) == SHALEDB_INVALID_ARGUMENT);
    CHECK(shaledb_kvs_open_with_options(db, "x", "bogus=1", &kvs) == SHALEDB_INVALID_ARGUMENT);
    CHECK(kvs == NULL);
}

static void test_batch_snapshot_cursor(shaledb_db *db) {
    shaledb_kvs *kvs = NULL;
    OK(shaledb_kvs_open(db, "scan", 0, &kvs));
    shaledb_batch *batch = NULL;
    OK(shaledb_batch_new(&batch));
    char key[16];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "k%02d", i);
        OK(shaledb_batch_put(batch, kvs, B(key), 3, B(key), 3));
    }
    OK(shaledb_batch_delete(batch, kvs, B("k09"), 3));
    OK(shaledb_batch_prefix_delete(batch, kvs, B("zz"), 2));
    CHECK(shaledb_batch_put(NULL, kvs, B("k"), 1, B("v"), 1) == SHALEDB_INVALID_ARGUMENT);
    OK(shaledb_batch_write(db, batch));
    /* The batch is empty and reusable after a write; a bad op makes the whole write fail. */
    OK(shaledb_batch_put(batch, kvs, B("ok"), 2, B("v"), 1));
    OK(shaledb_batch_put(batch, kvs, B("bad"), 0, B("v"), 1));
    CHECK(shaledb_batch_write(db, batch) == SHALEDB_INVALID_ARGUMENT);
    char buffer[16];
    size_t len;
    CHECK(shaledb_get(kvs, B("ok"), 2, (uint8_t *)buffer, sizeof buffer, &len) == SHALEDB_NOT_FOUND);
    shaledb_batch_free(batch);
    shaledb_batch_free(NULL);

    shaledb_snapshot *snapshot = NULL;
    OK(shaledb_snapshot_new(db, &snapshot));
    OK(shaledb_put(kvs, B("k00"), 3, B("changed"), 7));
    OK(shaledb_snapshot_get(snapshot, kvs, B("k00"), 3, (uint8_t *)buffer, sizeof buffer, &len));
    CHECK(len == 3 && memcmp(buffer, "k00", 3) == 0);
    CHECK(shaledb_snapshot_get(snapshot, kvs, B("k09"), 3, (uint8_t *)buffer, sizeof buffer, &len) == SHALEDB_NOT_FOUND);

    /* Forward over [k02, k05) with borrowed pointers. */
    shaledb_cursor *cursor = NULL;
    OK(shaledb_cursor_open(kvs, NULL, B("k02"), 3, B("k05"), 3, 0, &cursor));
    const uint8_t *k, *v;
    size_t kl, vl;
    int count = 0;
    while (shaledb_cursor_next(cursor, &k, &kl, &v, &vl) == SHALEDB_OK) {
        snprintf(key, sizeof key, "k%02d", 2 + count);
        CHECK(kl == 3 && memcmp(k, key, 3) == 0 && vl == 3);
        count++;
    }
    CHECK(count == 3);
    CHECK(shaledb_cursor_next(cursor, &k, &kl, &v, &vl) == SHALEDB_END);
    OK(shaledb_cursor_seek(cursor, B("k03"), 3));
    OK(shaledb_cursor_next(cursor, &k, &kl, &v, &vl));
    CHECK(kl == 3 && memcmp(k, "k03", 3) == 0);
    OK(shaledb_cursor_seek(cursor, B("k07"), 3)); /* past the upper bound: nothing left */
    CHECK(shaledb_cursor_next(cursor, &k, &kl, &v, &vl) == SHALEDB_END);
    CHECK(shaledb_cursor_next(cursor, NULL, &kl, &v, &vl) == SHALEDB_INVALID_ARGUMENT);
    shaledb_cursor_free(cursor);

    /* Reverse over the snapshot (sees the old k00, no k09), copying into small buffers. */
    OK(shaledb_cursor_open_prefix(kvs, snapshot, B("k"), 1, SHALEDB_CURSOR_REVERSE, &cursor));
    CHECK(shaledb_cursor_seek(cursor, B("k03"), 3) == SHALEDB_INVALID_ARGUMENT);
    char kbuf[2], vbuf[16];
    CHECK(shaledb_cursor_next_copy(cursor, (uint8_t *)kbuf, sizeof kbuf, &kl, (uint8_t *)vbuf, sizeof vbuf, &vl) == SHALEDB_BUFFER_TOO_SMALL);
    CHECK(kl == 3);
    char bigger[8];
    OK(shaledb_cursor_next_copy(cursor, (uint8_t *)bigger, sizeof bigger, &kl, (uint8_t *)vbuf, sizeof vbuf, &vl));
    CHECK(kl == 3 && memcmp(bigger, "k08", 3) == 0);
    count = 1;
    while (shaledb_cursor_next_copy(cursor, (uint8_t *)bigger, sizeof bigger, &kl, (uint8_t *)vbuf, sizeof vbuf, &vl) == SHALEDB_OK)
        count++;
    CHECK(count == 9);
    CHECK(vl == 3 && memcmp(vbuf, "k00", 3) == 0);
    shaledb_cursor_free(cursor);
    CHECK(shaledb_cursor_open(kvs, NULL, NULL, 0, NULL, 0, 42, &cursor) == SHALEDB_INVALID_ARGUMENT);
    CHECK(shaledb_cursor_open(NULL, NULL, NULL, 0, NULL, 0, 0, &cursor) == SHALEDB_INVALID_ARGUMENT);
    shaledb_cursor_free(NULL);
    shaledb_snapshot_free(snapshot);
    shaledb_snapshot_free(NULL);
    shaledb_kvs_free(kvs);
}

static void test_transactions(shaledb_db *db) {
    shaledb_kvs *kvs = NULL;
    OK(shaledb_kvs_open(db, "bank", 0, &kvs));
    OK(shaledb_put(kvs, B("alice"), 5, B("100"), 3));
    shaledb_txn *first = NULL, *second = NULL;
    OK(shaledb_txn_begin(db, 0, &first));
    OK(shaledb_txn_begin(db, 1, &second));
    OK(shaledb_txn_put(first, kvs, B("alice"), 5, B("90"), 2));
    OK(shaledb_txn_delete(first, kvs, B("bob"), 3));
    char buffer[16];
    size_t len;
    OK(shaledb_txn_get(first, kvs, B("alice"), 5, (uint8_t *)buffer, sizeof buffer, &len));
    CHECK(len == 2 && memcmp(buffer, "90", 2) == 0);
    OK(shaledb_txn_get(second, kvs, B("alice"), 5, (uint8_t *)buffer, sizeof buffer, &len));
    CHECK(len == 3);
    OK(shaledb_txn_put(second, kvs, B("carol"), 5, B("1"), 1));
    CHECK(shaledb_txn_put(second, kvs, NULL, 3, B("1"), 1) == SHALEDB_INVALID_ARGUMENT);
    OK(shaledb_txn_commit(first));
    CHECK(shaledb_txn_commit(second) == SHALEDB_CONFLICT); /* it read alice, which first changed */
    CHECK(shaledb_get(kvs, B("carol"), 5, (uint8_t *)buffer, sizeof buffer, &len) == SHALEDB_NOT_FOUND);
    OK(shaledb_txn_begin(db, 0, &first));
    OK(shaledb_txn_put(first, kvs, B("dave"), 4, B("1"), 1));
    shaledb_txn_abort(first);
    shaledb_txn_abort(NULL);
    CHECK(shaledb_get(kvs, B("dave"), 4, (uint8_t *)buffer, sizeof buffer, &len) == SHALEDB_NOT_FOUND);
    CHECK(shaledb_txn_commit(NULL) == SHALEDB_INVALID_ARGUMENT);
    shaledb_kvs_free(kvs);
}

static void test_admin(shaledb_db *db, const char *dir) {
    OK(shaledb_sync(db));
    OK(shaledb_compact(db));
    char *json = NULL;
    OK(shaledb_stats_json(db, &json));
    CHECK(json != NULL && strstr(json, "\"index_keys\"") != NULL);
    shaledb_free(json);
    shaledb_db *second = NULL;
    CHECK(shaledb_open(dir, NULL, &second) == SHALEDB_LOCKED);
    CHECK(strstr(shaledb_last_error(), "locked") != NULL);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
        return 2;
    }
    test_open_errors(argv[1]);
    shaledb_db *db = NULL;
    OK(shaledb_open(argv[1], "durability=none;cache_mb=8;segment_mb=4;cleaner=1", &db));
    if (db == NULL)
        return 1;
    test_kv(db);
    test_kvs_lifecycle(db);
    test_kvs_options(db);
    test_batch_snapshot_cursor(db);
    test_transactions(db);
    test_admin(db, argv[1]);
    shaledb_kvs *kept = NULL;
    OK(shaledb_kvs_open(db, "kv", 0, &kept));
    OK(shaledb_close(db));
    CHECK(shaledb_put(kept, B("k"), 1, B("v"), 1) == SHALEDB_CLOSED);
    shaledb_kvs_free(kept);
    /* Reopen: what was written is there. */
    OK(shaledb_open(argv[1], NULL, &db));
    OK(shaledb_kvs_open(db, "bank", 0, &kept));
    char buffer[16];
    size_t len;
    OK(shaledb_get(kept, B("alice"), 5, (uint8_t *)buffer, sizeof buffer, &len));
    CHECK(len == 2 && memcmp(buffer, "90", 2) == 0);
    shaledb_kvs_free(kept);
    OK(shaledb_close(db));
    printf("%d passed, %d failed\n", failures == 0 ? 1 : 0, failures);
    return failures == 0 ? 0 : 1;
}
