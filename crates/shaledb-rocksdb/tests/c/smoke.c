/* A program written for RocksDB's C API, run on ShaleDB: the calls most programs make (open,
 * point reads and writes, batches, iterators both ways, snapshots, column families, reopen),
 * pinned reads and multi-gets, flush, compaction, properties, checkpoints, options strings,
 * write batches with index, and the features ShaleDB refuses by name. Exits non-zero on the
 * first surprise. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rocksdb/c.h"

#include "check.h"

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

    /* Pinned reads hand the value out without a copy; absent keys give NULL. */
    rocksdb_pinnableslice_t* pinned = rocksdb_get_pinned_cf(db, ro, cf, "u1", 2, &err);
    NO_ERROR(err);
    const char* pinned_value = rocksdb_pinnableslice_value(pinned, &len);
    CHECK(pinned_value != NULL && len == 3 && memcmp(pinned_value, "ada", 3) == 0);
    rocksdb_pinnableslice_destroy(pinned);
    CHECK(rocksdb_get_pinned(db, ro, "nope", 4, &err) == NULL);
    NO_ERROR(err);

    /* Multi-get across column families, at one view; one bad key fails alone. */
    const char* mkeys[3] = {"b", "u1", "zz"};
    size_t mkey_sizes[3] = {1, 2, 2};
    const rocksdb_column_family_handle_t* mcfs[3] = {NULL, cf, cf};
    rocksdb_column_family_handle_t* default_cf = rocksdb_get_default_column_family_handle(db);
    mcfs[0] = default_cf;
    char* mvalues[3];
    size_t mvalue_sizes[3];
    char* merrs[3];
    rocksdb_multi_get_cf(db, ro, mcfs, 3, mkeys, mkey_sizes, mvalues, mvalue_sizes, merrs);
    CHECK(merrs[0] == NULL && merrs[1] == NULL && merrs[2] == NULL);
    CHECK(mvalues[0] != NULL && mvalue_sizes[0] == 1 && memcmp(mvalues[0], "2", 1) == 0);
    CHECK(mvalues[1] != NULL && mvalue_sizes[1] == 3 && memcmp(mvalues[1], "ada", 3) == 0);
    CHECK(mvalues[2] == NULL);
    rocksdb_free(mvalues[0]);
    rocksdb_free(mvalues[1]);
    mkey_sizes[2] = 0; /* an empty key is refused: its error, the others still read */
    rocksdb_multi_get(db, ro, 3, mkeys, mkey_sizes, mvalues, mvalue_sizes, merrs);
    CHECK(merrs[0] == NULL && mvalues[0] != NULL && mvalues[1] == NULL);
    CHECK(merrs[2] != NULL && strncmp(merrs[2], "Invalid argument: ", 18) == 0);
    rocksdb_free(mvalues[0]);
    rocksdb_free(merrs[2]);
    rocksdb_pinnableslice_t* batched[2];
    char* berrs[2];
    rocksdb_batched_multi_get_cf(db, ro, cf, 2, &mkeys[1], &mkey_sizes[1], batched, berrs, 0);
    CHECK(batched[0] != NULL && batched[1] == NULL && berrs[0] == NULL && berrs[1] != NULL);
    rocksdb_pinnableslice_destroy(batched[0]);
    rocksdb_free(berrs[1]);
    rocksdb_column_family_handle_destroy(default_cf);

    /* key_may_exist is exact (the index is in DRAM), and hands the value out when asked. */
    unsigned char found = 0;
    value = NULL;
    CHECK(rocksdb_key_may_exist_cf(db, ro, cf, "u1", 2, &value, &len, NULL, 0, &found) == 1);
    CHECK(found == 1 && value != NULL && len == 3);
    rocksdb_free(value);
    CHECK(rocksdb_key_may_exist(db, ro, "nope", 4, NULL, NULL, NULL, 0, &found) == 0);

    /* Flush makes writes durable; compaction runs the cleaner; properties and sizes. */
    rocksdb_flushoptions_t* fo = rocksdb_flushoptions_create();
    rocksdb_flush(db, fo, &err);
    NO_ERROR(err);
    rocksdb_flush_cf(db, fo, cf, &err);
    NO_ERROR(err);
    rocksdb_flushoptions_destroy(fo);
    rocksdb_compact_range(db, NULL, 0, NULL, 0);
    rocksdb_compactoptions_t* co = rocksdb_compactoptions_create();
    CHECK(rocksdb_compactoptions_get_target_level(co) == -1);
    rocksdb_compactoptions_set_target_level(co, 2);
    CHECK(rocksdb_compactoptions_get_target_level(co) == 2);
    rocksdb_compact_range_cf_opt(db, cf, co, "a", 1, "z", 1);
    rocksdb_compactoptions_destroy(co);
    uint64_t keys_in_cf = 0;
    CHECK(rocksdb_property_int_cf(db, cf, "rocksdb.estimate-num-keys", &keys_in_cf) == 0);
    CHECK(keys_in_cf == 1);
    CHECK(rocksdb_property_int(db, "rocksdb.no-such-property", &keys_in_cf) == -1);
    CHECK(rocksdb_property_value(db, "rocksdb.no-such-property") == NULL);
    char* stats = rocksdb_property_value(db, "rocksdb.stats");
    CHECK(stats != NULL && strstr(stats, "ShaleDB") != NULL);
    rocksdb_free(stats);
    const char* starts[2] = {"a", "u"};
    size_t start_sizes[2] = {1, 1};
    const char* limits[2] = {"b", "v"};
    size_t limit_sizes[2] = {1, 1};
    uint64_t sizes[2] = {7, 7};
    rocksdb_approximate_sizes_cf(db, cf, 2, starts, start_sizes, limits, limit_sizes, sizes, &err);
    NO_ERROR(err);
    CHECK(sizes[0] == 0 && sizes[1] > 5); /* "u1" -> "ada" lies in the second range */
    rocksdb_column_family_metadata_t* meta = rocksdb_get_column_family_metadata_cf(db, cf);
    char* meta_name = rocksdb_column_family_metadata_get_name(meta);
    CHECK(strcmp(meta_name, "users") == 0 && rocksdb_column_family_metadata_get_size(meta) > 5);
    CHECK(rocksdb_column_family_metadata_get_level_count(meta) == 0);
    rocksdb_free(meta_name);
    rocksdb_column_family_metadata_destroy(meta);
    size_t id_len = 0;
    char* id = rocksdb_get_db_identity(db, &id_len);
    CHECK(id != NULL && id_len == 36); /* a UUID, as RocksDB gives */
    rocksdb_free(id);
    CHECK(rocksdb_get_latest_sequence_number(db) > 0);

    /* A checkpoint is an openable copy; it refuses a directory that exists. */
    char copy_path[4200];
    snprintf(copy_path, sizeof copy_path, "%s/copy", argv[1]);
    rocksdb_checkpoint_t* checkpoint = rocksdb_checkpoint_object_create(db, &err);
    NO_ERROR(err);
    rocksdb_checkpoint_create(checkpoint, copy_path, 0, &err);
    NO_ERROR(err);
    rocksdb_checkpoint_create(checkpoint, copy_path, 0, &err);
    CHECK(err != NULL && strncmp(err, "Invalid argument: Directory exists", 34) == 0);
    rocksdb_free(err);
    err = NULL;
    rocksdb_checkpoint_object_destroy(checkpoint);
    rocksdb_options_t* copy_options = rocksdb_options_create();
    /* Read-only, the copy's default column family alone may be opened. */
    rocksdb_t* copy = rocksdb_open_for_read_only(copy_options, copy_path, 0, &err);
    NO_ERROR(err);
    value = rocksdb_get(copy, ro, "b", 1, &len, &err);
    NO_ERROR(err);
    CHECK(value != NULL && len == 1 && value[0] == '2');
    rocksdb_free(value);
    rocksdb_close(copy);
    rocksdb_column_family_handle_t* copy_handles[2];
    const char* copy_cf_names[2] = {"default", "users"};
    const rocksdb_options_t* copy_cf_options[2] = {copy_options, copy_options};
    copy = rocksdb_open_column_families(copy_options, copy_path, 2, copy_cf_names, copy_cf_options,
                                        copy_handles, &err);
    NO_ERROR(err);
    value = rocksdb_get_cf(copy, ro, copy_handles[1], "u1", 2, &len, &err);
    NO_ERROR(err);
    CHECK(value != NULL && len == 3 && memcmp(value, "ada", 3) == 0);
    rocksdb_free(value);
    rocksdb_column_family_handle_destroy(copy_handles[0]);
    rocksdb_column_family_handle_destroy(copy_handles[1]);
    rocksdb_close(copy);
    rocksdb_destroy_db(copy_options, copy_path, &err);
    NO_ERROR(err);

    /* An in-memory Env cannot be honoured: the open fails by name. */
    rocksdb_env_t* mem_env = rocksdb_create_mem_env();
    rocksdb_options_set_env(copy_options, mem_env);
    rocksdb_options_set_create_if_missing(copy_options, 1);
    copy = rocksdb_open(copy_options, copy_path, &err);
    CHECK(copy == NULL && err != NULL && strstr(err, "in-memory Env") != NULL);
    rocksdb_free(err);
    err = NULL;
    rocksdb_env_destroy(mem_env);
    rocksdb_options_destroy(copy_options);

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

    /* A second database: options from a string, statistics, the batch and write variants. */
    rocksdb_options_t* more = rocksdb_options_create();
    rocksdb_get_options_from_string(options, "create_if_missing=true;write_buffer_size=4096;"
                                    "block_based_table_factory={block_size=8192}", more, &err);
    NO_ERROR(err);
    CHECK(rocksdb_options_get_write_buffer_size(more) == 4096);
    rocksdb_get_options_from_string(options, "no_such_option=1", more, &err);
    CHECK(err != NULL && strncmp(err, "Invalid argument: ", 18) == 0);
    rocksdb_free(err);
    err = NULL;
    rocksdb_options_t* plain = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(plain, 1);
    rocksdb_options_enable_statistics(plain);
    db = rocksdb_open_with_ttl(plain, path, 60, &err);
    CHECK(db == NULL && err != NULL && strstr(err, "TTL") != NULL);
    rocksdb_free(err);
    err = NULL;
    db = rocksdb_open_with_ttl(plain, path, 0, &err); /* no TTL: a plain open */
    NO_ERROR(err);
    const char* key_parts[2] = {"k", "ey"};
    size_t key_part_sizes[2] = {1, 2};
    const char* value_parts[2] = {"va", "lue"};
    size_t value_part_sizes[2] = {2, 3};
    rocksdb_writebatch_t* parts = rocksdb_writebatch_create();
    rocksdb_writebatch_putv(parts, 2, key_parts, key_part_sizes, 2, value_parts, value_part_sizes);
    rocksdb_write(db, wo, parts, &err);
    NO_ERROR(err);
    check_get(db, ro, "key", "value");
    rocksdb_writebatch_destroy(parts);
    rocksdb_put(db, wo, "p:1", 3, "x", 1, &err);
    NO_ERROR(err);
    rocksdb_put(db, wo, "p:2", 3, "y", 1, &err);
    NO_ERROR(err);
    rocksdb_delete_range_cf(db, wo, NULL, "p:", 2, "p;", 2, &err); /* exactly prefix "p:" */
    NO_ERROR(err);
    check_get(db, ro, "p:1", NULL);
    check_get(db, ro, "key", "value");
    rocksdb_delete_range_cf(db, wo, NULL, "a", 1, "k", 1, &err);
    CHECK(err != NULL && strncmp(err, "Not implemented: DeleteRange", 28) == 0);
    rocksdb_free(err);
    err = NULL;
    rocksdb_merge(db, wo, "key", 3, "+1", 2, &err);
    CHECK(err != NULL && strncmp(err, "Not implemented: merge", 22) == 0);
    rocksdb_free(err);
    err = NULL;
    rocksdb_put_with_ts(db, wo, "key", 3, "ts", 2, "v", 1, &err);
    CHECK(err != NULL && strstr(err, "timestamps") != NULL);
    rocksdb_free(err);
    err = NULL;
    rocksdb_readoptions_t* ts_read = rocksdb_readoptions_create();
    rocksdb_readoptions_set_timestamp(ts_read, "ts", 2);
    value = rocksdb_get(db, ts_read, "key", 3, &len, &err);
    CHECK(value == NULL && err != NULL && strstr(err, "timestamps") != NULL);
    rocksdb_free(err);
    err = NULL;
    rocksdb_readoptions_destroy(ts_read);
    char* statistics = rocksdb_options_statistics_get_string(plain);
    CHECK(statistics != NULL && strstr(statistics, "rocksdb.number.keys.read COUNT") != NULL);
    rocksdb_free(statistics);
    CHECK(rocksdb_options_statistics_get_ticker_count(plain, 58 /* NUMBER_KEYS_READ */) >= 3);
    const char* more_names[2] = {"c1", "c2"};
    size_t made = 0;
    rocksdb_column_family_handle_t** made_cfs =
        rocksdb_create_column_families(db, plain, 2, more_names, &made, &err);
    NO_ERROR(err);
    CHECK(made == 2);
    rocksdb_iterator_t* iterators[2];
    rocksdb_create_iterators(db, ro, made_cfs, iterators, 2, &err);
    NO_ERROR(err);
    rocksdb_iter_seek_to_first(iterators[0]);
    CHECK(!rocksdb_iter_valid(iterators[0]));
    rocksdb_iter_destroy(iterators[0]);
    rocksdb_iter_destroy(iterators[1]);
    rocksdb_column_family_handle_destroy(made_cfs[0]);
    rocksdb_column_family_handle_destroy(made_cfs[1]);
    rocksdb_create_column_families_destroy(made_cfs);
    const char* set_keys[1] = {"write_buffer_size"};
    const char* set_values[1] = {"131072"};
    rocksdb_set_options(db, 1, set_keys, set_values, &err);
    NO_ERROR(err);
    set_values[0] = "lots";
    rocksdb_set_options(db, 1, set_keys, set_values, &err);
    CHECK(err != NULL && strncmp(err, "Invalid argument: ", 18) == 0);
    rocksdb_free(err);
    err = NULL;
    /* A write batch with index: read back from the batch, over the database, by iterator. */
    rocksdb_writebatch_wi_t* wbwi = rocksdb_writebatch_wi_create(0, 1);
    rocksdb_writebatch_wi_put(wbwi, "a", 1, "1", 1);
    rocksdb_writebatch_wi_put(wbwi, "key", 3, "new", 3);
    rocksdb_writebatch_wi_delete(wbwi, "p:9", 3);
    CHECK(rocksdb_writebatch_wi_count(wbwi) == 3);
    value = rocksdb_writebatch_wi_get_from_batch(wbwi, plain, "a", 1, &len, &err);
    NO_ERROR(err);
    CHECK(value != NULL && len == 1 && value[0] == '1');
    rocksdb_free(value);
    CHECK(rocksdb_writebatch_wi_get_from_batch(wbwi, plain, "zz", 2, &len, &err) == NULL);
    NO_ERROR(err);
    value = rocksdb_writebatch_wi_get_from_batch_and_db(wbwi, db, ro, "key", 3, &len, &err);
    NO_ERROR(err);
    CHECK(value != NULL && len == 3 && memcmp(value, "new", 3) == 0);
    rocksdb_free(value);
    rocksdb_readoptions_t* unbounded = rocksdb_readoptions_create(); /* ro stops at "c" */
    rocksdb_iterator_t* base = rocksdb_create_iterator(db, unbounded);
    rocksdb_readoptions_destroy(unbounded);
    rocksdb_iterator_t* merged = rocksdb_writebatch_wi_create_iterator_with_base(wbwi, base);
    rocksdb_iter_seek_to_first(merged);
    check_iter(merged, "a", "1");
    rocksdb_iter_next(merged);
    check_iter(merged, "key", "new");
    rocksdb_iter_next(merged);
    CHECK(!rocksdb_iter_valid(merged));
    rocksdb_iter_destroy(merged); /* the base goes with it */
    check_get(db, ro, "a", NULL); /* nothing written yet */
    rocksdb_write_writebatch_wi(db, wo, wbwi, &err);
    NO_ERROR(err);
    check_get(db, ro, "a", "1");
    check_get(db, ro, "key", "new");
    rocksdb_writebatch_wi_merge(wbwi, "a", 1, "+", 1);
    rocksdb_write_writebatch_wi(db, wo, wbwi, &err);
    CHECK(err != NULL && strncmp(err, "Not implemented: merge", 22) == 0);
    rocksdb_free(err);
    err = NULL;
    rocksdb_writebatch_wi_destroy(wbwi);

    rocksdb_close(db);
    /* repair_db is ShaleDB's salvage: on an intact database it changes nothing. */
    rocksdb_repair_db(plain, path, &err);
    NO_ERROR(err);
    const char* all_names[3] = {"default", "c1", "c2"};
    const rocksdb_options_t* all_options[3] = {plain, plain, plain};
    rocksdb_column_family_handle_t* all_handles[3];
    db = rocksdb_open_column_families(plain, path, 3, all_names, all_options, all_handles, &err);
    NO_ERROR(err);
    check_get(db, ro, "key", "new");
    for (int i = 0; i < 3; i++) rocksdb_column_family_handle_destroy(all_handles[i]);
    rocksdb_close(db);
    rocksdb_destroy_db(plain, path, &err);
    NO_ERROR(err);
    rocksdb_options_destroy(plain);
    rocksdb_options_destroy(more);
    rocksdb_writebatch_destroy(batch);
    rocksdb_readoptions_destroy(ro);
    rocksdb_writeoptions_destroy(wo);
    rocksdb_block_based_options_destroy(table);
    rocksdb_cache_destroy(cache);
    rocksdb_options_destroy(options);
    if (failures == 0) printf("smoke: ok\n");
    return failures == 0 ? 0 : 1;
}
