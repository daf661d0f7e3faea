/* test_number.c: the fast f32 formatter against the exact one (printf each
 * digit count, read back with strtof), which it must equal string for string
 * whenever it answers; and the answer must read back to the same bits. */
#include "check.h"
#include "io/io.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint32_t next32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static double unif(void) { return (next32() + 0.5) / 4294967296.0; }

typedef struct tally {
    long n, fast, wrong;
    char first[160];
} tally;

static void one(tally *t, float x)
{
    char a[TQ_NUM_MAX], b[TQ_NUM_MAX];
    size_t na = tq_fmt_f32_fast(a, x);
    size_t nb = tq_fmt_float_exact(b, TQ_DTYPE_F32, &x);
    t->n++;
    if (!na)
        return;
    t->fast++;
    uint32_t bits, back_bits;
    float back = strtof(a, NULL);
    memcpy(&bits, &x, 4), memcpy(&back_bits, &back, 4);
    if (na != nb || strcmp(a, b) || bits != back_bits) {
        if (!t->wrong++)
            snprintf(t->first, sizeof t->first, "%.9g (bits %08x): fast \"%s\", exact \"%s\"",
                     (double)x, bits, a, b);
    }
}

static void report(const char *what, tally *t, double min_fast)
{
    CHECK(t->wrong == 0, "%s: %ld of %ld differ; first: %s", what, t->wrong, t->fast, t->first);
    /* the fast path must take most numbers, or it buys nothing */
    CHECK(t->fast >= min_fast * t->n, "%s: fast path took only %ld of %ld", what, t->fast, t->n);
    printf("%s: %ld values, %ld by the fast path, all equal to the exact path\n", what, t->n,
           t->fast);
}

int main(void)
{
    tally t = {0};
    /* embedding-like values: normal around 0 at several scales */
    for (int i = 0; i < 400000; i++) {
        double g = sqrt(-2 * log(unif())) * cos(6.283185307179586 * unif());
        one(&t, (float)(g * (i % 3 == 0 ? 0.05 : i % 3 == 1 ? 1.0 : 300.0)));
    }
    report("normal values", &t, 0.99);

    /* any bit pattern: every exponent, both signs */
    memset(&t, 0, sizeof t);
    for (int i = 0; i < 400000; i++) {
        uint32_t b = next32();
        float x;
        memcpy(&x, &b, 4);
        one(&t, x);
    }
    report("random bits", &t, 0.10);

    /* short decimals (0.1, 2.5e-3, 12345.6 ...), powers of two and their
     * neighbours, and numbers next to powers of ten: where rounding ties,
     * the asymmetric gap at 2^k and the digit-count change live */
    memset(&t, 0, sizeof t);
    for (int e = -12; e <= 12; e++)
        for (int d = 1; d < 100000; d += 7) {
            float x = (float)(d * pow(10, e - 4));
            one(&t, x);
            one(&t, nextafterf(x, 0));
            one(&t, nextafterf(x, INFINITY));
        }
    for (int k = -126; k < 128; k++) {
        float x = ldexpf(1, k);
        one(&t, x), one(&t, -x), one(&t, nextafterf(x, 0)), one(&t, nextafterf(x, INFINITY));
    }
    for (int e = -37; e <= 38; e++) {
        float x = (float)pow(10, e);
        one(&t, x), one(&t, nextafterf(x, 0)), one(&t, nextafterf(x, INFINITY));
    }
    report("edge values", &t, 0.50);
    return CHECK_DONE();
}
