/* check.h: the few macros the C unit tests share. Each test file counts its
 * checks and ends with "N passed, N failed"; a failure prints where and why. */
#ifndef TQ_CHECK_H
#define TQ_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int check_pass, check_fail;

/* The tests' random numbers: xorshift64, a fixed seed (the same data every
 * run). Unused in a test that has no use for it. */
static uint64_t check_rng = 0x2545f4914f6cdd1dull;
__attribute__((unused)) static uint64_t check_rand64(void)
{
    check_rng ^= check_rng << 13;
    check_rng ^= check_rng >> 7;
    check_rng ^= check_rng << 17;
    return check_rng;
}

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
