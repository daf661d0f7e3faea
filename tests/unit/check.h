/* check.h: the few macros the C unit tests share. Each test file counts its
 * checks and ends with "N passed, N failed"; a failure prints where and why. */
#ifndef TQ_CHECK_H
#define TQ_CHECK_H

#include <stdio.h>

static int check_pass, check_fail;

#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (cond) {                                                                \
            check_pass++;                                                          \
        } else {                                                                   \
            check_fail++;                                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                    \
            fprintf(stderr, __VA_ARGS__);                                          \
            fputc('\n', stderr);                                                   \
        }                                                                          \
    } while (0)

#define CHECK_DONE()                                                               \
    (printf("%d passed, %d failed\n", check_pass, check_fail), check_fail ? 1 : 0)

#endif
