/* The checks the C test programs share: CHECK counts a failed condition and goes on; NO_ERROR
 * stops at an error string (a RocksDB Status) that should not be there. */
#ifndef SHALEDB_ROCKSDB_TEST_CHECK_H
#define SHALEDB_ROCKSDB_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int failures = 0;

#define CHECK(cond)                                                                \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                            \
        }                                                                          \
    } while (0)

#define NO_ERROR(err)                                                              \
    do {                                                                           \
        if ((err) != NULL) {                                                       \
            fprintf(stderr, "%s:%d: error: %s\n", __FILE__, __LINE__, (err));      \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

#endif
