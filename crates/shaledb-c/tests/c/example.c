/* The README's C example: open, put, get, scan, close. */
#include <shaledb.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    shaledb_db *db;
    shaledb_kvs *users;
    if (shaledb_open(argc > 1 ? argv[1] : "example-kvdb", "durability=sync", &db) != SHALEDB_OK ||
        shaledb_kvs_open(db, "users", 0, &users) != SHALEDB_OK) {
        fprintf(stderr, "shaledb: %s\n", shaledb_last_error());
        return 1;
    }
    shaledb_put(users, (const uint8_t *)"user:1", 6, (const uint8_t *)"Ada", 3);
    char value[64];
    size_t len;
    if (shaledb_get(users, (const uint8_t *)"user:1", 6, (uint8_t *)value, sizeof value, &len) == SHALEDB_OK)
        printf("user:1 = %.*s\n", (int)len, value);
    shaledb_cursor *cursor;
    shaledb_cursor_open_prefix(users, NULL, (const uint8_t *)"user:", 5, 0, &cursor);
    const uint8_t *k, *v;
    size_t kl, vl;
    while (shaledb_cursor_next(cursor, &k, &kl, &v, &vl) == SHALEDB_OK)
        printf("%.*s -> %.*s\n", (int)kl, (const char *)k, (int)vl, (const char *)v);
    shaledb_cursor_free(cursor);
    shaledb_kvs_free(users);
    return shaledb_close(db) == SHALEDB_OK ? 0 : 1;
}
