/* A program written for RocksDB's C API, run on ShaleDB: the calls most programs make (open,
 * point reads and writes, batches, iterators both ways, snapshots, column families, reopen),
 * and a feature ShaleDB refuses by name. Exits non-zero on the first surprise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rocksdb/c.h"

static int failures = 0;

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                     \
        }                                                                   \
    } while (0)

#define NO_ERROR(err)                                                       \
    do {                                                                    \
        if ((err) != NULL) {                                                \
            fprintf(stderr, "%s:%d: error: %s\n", __FILE__, __LINE__, (err)); \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

static void check_get(rocksdb_t* db, rocksdb_readoptions_t* ro, const char* key,
                      const char* expected) {
    char* err = NULL;
    size_t len = 0;
    char* value = rocksdb_get(db, ro, key, strlen(key), &len, &err);
    NO_ERROR(err);
    if (expected == NULL) {
        CHECK(value == NULL);
    } else {
        CHECK(value != NULL && len == strlen(expected) && memcmp(value, expected, len) == 0);
    }
    rocksdb_free(value);
}

static void check_iter(rocksdb_iterator_t* it, const char* key, const char* value) {
    size_t len = 0;
    CHECK(rocksdb_iter_valid(it));
    if (!rocksdb_iter_valid(it)) return;
    const char* k = rocksdb_iter_key(it, &len);
    CHECK(len == strlen(key) && memcmp(k, key, len) == 0);
    const char* v = rocksdb_iter_value(it, &len);
    CHECK(len == strlen(value) && memcmp(v, value, len) == 0);
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/db", argv[1]);
    char* err = NULL;

    rocksdb_options_t* options = rocksdb_options_create();
    /* Without create_if_missing, a missing database is an error. */
    rocksdb_t* db = rocksdb_open(options, path, &err);
    CHECK(db == NULL && err != NULL && strncmp(err, "Invalid argument: ", 18) == 0);
    rocksdb_free(err);
    err = NULL;

    rocksdb_options_set_create_if_missing(options, 1);
    CHECK(rocksdb_options_get_create_if_missing(options) == 1);
    rocksdb_options_set_max_open_files(options, 100);
    CHECK(rocksdb_options_get_max_open_files(options) == 100);
    rocksdb_block_based_table_options_t* table = rocksdb_block_based_options_create();
    rocksdb_cache_t* cache = rocksdb_cache_create_lru(8 << 20);
    rocksdb_block_based_options_set_block_cache(table, cache);
    rocksdb_block_based_options_set_format_version(table, 4);
    rocksdb_options_set_block_based_table_factory(options, table);
    db = rocksdb_open(options, path, &err);
    NO_ERROR(err);

    rocksdb_writeoptions_t* wo = rocksdb_writeoptions_create();
    rocksdb_readoptions_t* ro = rocksdb_readoptions_create();
    rocksdb_put(db, wo, "b", 1, "2", 1, &err);
    NO_ERROR(err);
    rocksdb_put(db, wo, "a", 1, "1", 1, &err);
    NO_ERROR(err);
    check_get(db, ro, "a", "1");
    check_get(db, ro, "zz", NULL);

    const rocksdb_snapshot_t* snapshot = rocksdb_create_snapshot(db);
    rocksdb_writebatch_t* batch = rocksdb_writebatch_create();
    rocksdb_writebatch_put(batch, "c", 1, "3", 1);
    rocksdb_writebatch_delete(batch, "a", 1);
    CHECK(rocksdb_writebatch_count(batch) == 2);
    rocksdb_writeoptions_set_sync(wo, 1);
    rocksdb_write(db, wo, batch, &err);
    NO_ERROR(err);
    check_get(db, ro, "a", NULL);
    check_get(db, ro, "c", "3");
    rocksdb_readoptions_set_snapshot(ro, snapshot);
    check_get(db, ro, "a", "1");
    check_get(db, ro, "c", NULL);
    rocksdb_readoptions_set_snapshot(ro, NULL);
    rocksdb_release_snapshot(db, snapshot);

    /* An operation the batch could not take fails the write: none of the batch is written. */
    rocksdb_writebatch_t* bad = rocksdb_writebatch_create();
    rocksdb_writebatch_put(bad, "x", 1, "9", 1);
    rocksdb_writebatch_put(bad, NULL, 3, "9", 1);
    rocksdb_write(db, wo, bad, &err);
    CHECK(err != NULL && strncmp(err, "Invalid argument: ", 18) == 0);
    rocksdb_free(err);
    err = NULL;
    check_get(db, ro, "x", NULL);
    rocksdb_writebatch_clear(bad);
    rocksdb_writebatch_put(bad, "x", 1, "9", 1);
    rocksdb_write(db, wo, bad, &err);
    NO_ERROR(err);
    check_get(db, ro, "x", "9");
    rocksdb_delete(db, wo, "x", 1, &err);
    NO_ERROR(err);
    rocksdb_writebatch_destroy(bad);

    /* Iterators: forward, backward, turning around, seeks, bounds. */
    rocksdb_iterator_t* it = rocksdb_create_iterator(db, ro);
    rocksdb_iter_seek_to_first(it);
    check_iter(it, "b", "2");
    rocksdb_iter_next(it);
    check_iter(it, "c", "3");
    rocksdb_iter_prev(it);
    check_iter(it, "b", "2");
    rocksdb_iter_prev(it);
    CHECK(!rocksdb_iter_valid(it));
    rocksdb_iter_seek_to_last(it);
    check_iter(it, "c", "3");
    rocksdb_iter_seek(it, "bb", 2);
    check_iter(it, "c", "3");
    rocksdb_iter_seek_for_prev(it, "bb", 2);
    check_iter(it, "b", "2");
    rocksdb_iter_get_error(it, &err);
    NO_ERROR(err);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_set_iterate_upper_bound(ro, "c", 1);
    it = rocksdb_create_iterator(db, ro);
    rocksdb_iter_seek_to_last(it);
    check_iter(it, "b", "2");
    rocksdb_iter_seek(it, "d", 1); /* past the upper bound: an empty range */
    CHECK(!rocksdb_iter_valid(it));
    rocksdb_iter_get_error(it, &err);
    NO_ERROR(err);
    rocksdb_iter_destroy(it);

    /* Column families. */
    rocksdb_column_family_handle_t* cf = rocksdb_create_column_family(db, options, "users", &err);
    NO_ERROR(err);
    rocksdb_put_cf(db, wo, cf, "u1", 2, "ada", 3, &err);
    NO_ERROR(err);
    check_get(db, ro, "u1", NULL);
    size_t len = 0;
    char* value = rocksdb_get_cf(db, ro, cf, "u1", 2, &len, &err);
    NO_ERROR(err);
    CHECK(value != NULL && len == 3 && memcmp(value, "ada", 3) == 0);
    rocksdb_free(value);
    rocksdb_column_family_handle_destroy(cf);
    rocksdb_close(db);

    /* Reopening without naming every column family fails, as in RocksDB. */
    db = rocksdb_open(options, path, &err);
    CHECK(db == NULL && err != NULL && strstr(err, "users") != NULL);
    rocksdb_free(err);
    err = NULL;
    /* ... and fails before creating the column families it names (here "extra"). */
    rocksdb_options_set_create_missing_column_families(options, 1);
    const char* partial_names[2] = {"default", "extra"};
    const rocksdb_options_t* partial_options[2] = {options, options};
    rocksdb_column_family_handle_t* partial_handles[2];
    db = rocksdb_open_column_families(options, path, 2, partial_names, partial_options,
                                      partial_handles, &err);
    CHECK(db == NULL && err != NULL && strstr(err, "users") != NULL);
    rocksdb_free(err);
    err = NULL;
    rocksdb_options_set_create_missing_column_families(options, 0);
    size_t count = 0;
    char** names = rocksdb_list_column_families(options, path, &count, &err);
    NO_ERROR(err);
    CHECK(count == 2);
    rocksdb_list_column_families_destroy(names, count);
    const char* cf_names[2] = {"default", "users"};
    const rocksdb_options_t* cf_options[2] = {options, options};
    rocksdb_column_family_handle_t* handles[2];
    db = rocksdb_open_column_families(options, path, 2, cf_names, cf_options, handles, &err);
    NO_ERROR(err);
    value = rocksdb_get_cf(db, ro, handles[1], "u1", 2, &len, &err);
    NO_ERROR(err);
    CHECK(value != NULL && len == 3);
    rocksdb_free(value);
    check_get(db, ro, "b", "2");
    rocksdb_column_family_handle_destroy(handles[0]);
    rocksdb_column_family_handle_destroy(handles[1]);
    rocksdb_close(db);

    /* What ShaleDB cannot honour fails by name. */
    rocksdb_options_set_uint64add_merge_operator(options);
    db = rocksdb_open(options, path, &err);
    CHECK(db == NULL && err != NULL && strncmp(err, "Not implemented: merge operators", 32) == 0);
    rocksdb_free(err);
    err = NULL;
    /* Listing column families reads the database whatever the options carry. */
    names = rocksdb_list_column_families(options, path, &count, &err);
    NO_ERROR(err);
    CHECK(count == 2);
    rocksdb_list_column_families_destroy(names, count);

    rocksdb_destroy_db(options, path, &err);
    NO_ERROR(err);
    rocksdb_writebatch_destroy(batch);
    rocksdb_readoptions_destroy(ro);
    rocksdb_writeoptions_destroy(wo);
    rocksdb_block_based_options_destroy(table);
    rocksdb_cache_destroy(cache);
    rocksdb_options_destroy(options);
    if (failures == 0) printf("smoke: ok\n");
    return failures == 0 ? 0 : 1;
}
