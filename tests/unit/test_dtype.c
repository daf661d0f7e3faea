/* test_dtype.c: dtypes and conversions against references written here: f16
 * and bf16 decoded from their definitions and rounded in double arithmetic
 * (exhaustive to f32, every halfway case and millions of random values from
 * f32), integer rounding and saturation, ggml's q8_0 and q4_0 quantizers,
 * numpy.packbits order for bit, and the payload size rules of tq-format.5. */
#include "tq.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


static uint32_t fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float bitsf(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ---- references ---- */

/* binary16 from its definition: sign, 5-bit exponent biased by 15, 10 bits. */
static double ref_f16(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

/* x rounded to nearest even in a binary format of p bits of precision, least
 * normal exponent emin and greatest emax; past the largest finite: infinity.
 * Division by a power of two is exact in double, nearbyint rounds to even. */
static double ref_round(double x, int p, int emin, int emax)
{
    if (isnan(x) || isinf(x) || x == 0)
        return x;
    int e;
    frexp(fabs(x), &e);
    e -= 1; /* |x| in [2^e, 2^(e+1)) */
    if (e < emin)
        e = emin;
    double ulp = ldexp(1, e - (p - 1));
    double v = nearbyint(fabs(x) / ulp) * ulp;
    if (v > ldexp(2 - ldexp(1, 1 - p), emax))
        v = INFINITY;
    return copysign(v, x);
}
#define REF_F16(x) ref_round((x), 11, -14, 15)
#define REF_BF16(x) ref_round((x), 8, -126, 127)
#define REF_F32(x) ref_round((x), 24, -126, 127)

/* An integer rounded to p bits by integer arithmetic (no double in between). */
static double ref_round_int(int64_t v, int p, int emax)
{
    if (!v)
        return 0;
    uint64_t a = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int n = 64 - __builtin_clzll(a);
    double r;
    if (n > p) {
        int s = n - p;
        uint64_t q = a >> s, rem = a & ((1ull << s) - 1), half = 1ull << (s - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        r = ldexp((double)q, s);
    } else {
        r = (double)a;
    }
    if (r > ldexp(2 - ldexp(1, 1 - p), emax))
        r = INFINITY;
    return v < 0 ? -r : r;
}

/* Same value, same sign of zero; any NaN matches any NaN. */
static int same(double got, double want)
{
    if (isnan(want))
        return isnan(got);
    return got == want && signbit(got) == signbit(want);
}

static double bf16_val(uint16_t h) { return bitsf((uint32_t)h << 16); }

/* ---- f16 and bf16 ---- */

static void check_to_f32_exhaustive(void)
{
    int bad16 = 0, badb = 0, quiet = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tq_f16_to_f32((uint16_t)h);
        if (!same(f, ref_f16((uint16_t)h)))
            bad16++;
        if (isnan(f) && (!(fbits(f) & 0x400000u) || !!signbit(f) != !!(h & 0x8000)))
            quiet++;
        float b = tq_bf16_to_f32((uint16_t)h);
        /* bf16 is the upper half of binary32 */
        if (!same(b, bitsf(h << 16)))
            badb++;
        if (isnan(b) && (!(fbits(b) & 0x400000u) || (fbits(b) >> 16 & ~0x40u) != (h & ~0x40u)))
            quiet++;
    }
    CHECK(bad16 == 0, "f16 -> f32: %d of 65536 values differ from the definition", bad16);
    CHECK(badb == 0, "bf16 -> f32: %d of 65536 values differ", badb);
    CHECK(quiet == 0, "%d NaNs not quiet, or sign or payload lost", quiet);
}

static int check_one_f32(float x)
{
    int bad = 0;
    uint16_t h = tq_f32_to_f16(x), b = tq_f32_to_bf16(x);
    if (!same(ref_f16(h), REF_F16(x)))
        bad |= 1;
    if (!same(bf16_val(b), REF_BF16(x)))
        bad |= 2;
    if (isnan(x) && (!(h & 0x200) || !(b & 0x40) || !!(h & 0x8000) != !!signbit(x) ||
                     !!(b & 0x8000) != !!signbit(x)))
        bad |= 4; /* NaN stays NaN, quiet, with its sign */
    return bad;
}

static void check_f32_to_half(void)
{
    int bad = 0, n = 0;
    /* every halfway case of f16: the midpoint of each pair of neighbours, and
     * the floats just below and above it (the last midpoint, 65520, is where
     * rounding overflows to infinity) */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = ref_f16((uint16_t)h), hi = h + 1 < 0x7c00 ? ref_f16((uint16_t)(h + 1)) : 65536;
        float mid = (float)((lo + hi) / 2);
        if ((double)mid != (lo + hi) / 2)
            bad |= 8; /* f32 holds every f16 midpoint exactly */
        float xs[3] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++) {
            bad |= check_one_f32(xs[k]) & 1;
            bad |= check_one_f32(-xs[k]) & 1;
            n += 2;
        }
    }
    CHECK(bad == 0, "f32 -> f16 on %d halfway cases: error mask %d", n, bad);
    /* every halfway case of bf16: the midpoint is the f32 with 0x8000 below */
    bad = n = 0;
    for (uint32_t h = 0; h < 0x7f80; h++) {
        uint32_t mid = h << 16 | 0x8000u;
        uint32_t xs[3] = {mid, mid - 1, mid + 1};
        for (int k = 0; k < 3; k++) {
            bad |= check_one_f32(bitsf(xs[k])) & 2;
            bad |= check_one_f32(bitsf(xs[k] | 0x80000000u)) & 2;
            n += 2;
        }
    }
    CHECK(bad == 0, "f32 -> bf16 on %d halfway cases: error mask %d", n, bad);
    /* named cases */
    CHECK(tq_f32_to_f16(65504.0f) == 0x7bff, "largest f16");
    CHECK(tq_f32_to_f16(65519.99f) == 0x7bff, "just below the overflow threshold");
    CHECK(tq_f32_to_f16(65520.0f) == 0x7c00, "65520 overflows to infinity");
    CHECK(tq_f32_to_f16(-1e30f) == 0xfc00, "-1e30 -> -inf");
    CHECK(tq_f32_to_f16(INFINITY) == 0x7c00 && tq_f32_to_f16(-INFINITY) == 0xfc00, "inf");
    CHECK(tq_f32_to_f16(0x1p-24f) == 0x0001, "smallest subnormal");
    CHECK(tq_f32_to_f16(0x1p-25f) == 0x0000, "half the smallest subnormal rounds to even 0");
    CHECK(tq_f32_to_f16(0x1.8p-24f) == 0x0002, "1.5 subnormal ulps round to even 2");
    CHECK(tq_f32_to_f16(0x1p-14f) == 0x0400, "smallest normal");
    CHECK(tq_f32_to_f16(0x1.ffcp-15f) == 0x0400, "largest subnormal + half rounds up to normal");
    CHECK(tq_f32_to_f16(-0.0f) == 0x8000, "-0");
    CHECK(tq_f32_to_bf16(3.0e38f) == 0x7f62, "large bf16");
    CHECK(tq_f32_to_bf16(bitsf(0x7f7fffffu)) == 0x7f80, "FLT_MAX rounds to bf16 infinity");
    CHECK(tq_f32_to_bf16(bitsf(0x00000001u)) == 0x0000, "smallest subnormal -> 0 in bf16");
    CHECK(tq_f32_to_bf16(bitsf(0x00008000u)) == 0x0000, "bf16 subnormal tie to even");
    CHECK(tq_f32_to_bf16(bitsf(0x00018000u)) == 0x0002, "bf16 subnormal tie to even (up)");
    const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7f802000u,
                             0xffffffffu, 0x7f800100u};
    int nb = 0;
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++)
        nb |= check_one_f32(bitsf(nans[i]));
    CHECK(nb == 0, "NaNs (including payloads only in the low bits): mask %d", nb);
    /* millions of random bit patterns: every exponent, NaNs and subnormals */
    bad = 0;
    int worst = 0;
    for (int i = 0; i < 4000000; i++) {
        float x = bitsf((uint32_t)check_rand64());
        int b = check_one_f32(x);
        if (b) {
            bad++;
            worst |= b;
        }
    }
    /* and values in the range of f16, where most of its rounding happens */
    for (int i = 0; i < 2000000; i++) {
        float x = ldexpf((float)(check_rand64() >> 40) / (float)(1 << 24), (int)(check_rand64() % 44) - 26);
        int b = check_one_f32(check_rand64() & 1 ? x : -x);
        if (b) {
            bad++;
            worst |= b;
        }
    }
    CHECK(bad == 0, "%d of 6000000 random floats round wrongly (mask %d)", bad, worst);
}

/* tq_convert's vector paths give what the scalar functions give, bit for bit,
 * at every length 1..100 and a large one, from unaligned addresses too. */
static void check_vector_paths(void)
{
    enum { N = 100003 };
    float *f = malloc((N + 1) * sizeof *f), *g = malloc((N + 1) * sizeof *g);
    uint16_t *h = malloc((N + 1) * sizeof *h);
    if (!f || !g || !h) {
        CHECK(0, "out of memory");
        return;
    }
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65520.0f,
                             0x1p-24f, 0x1p-25f, 0x1.8p-24f, 1e-45f, 3.4e38f, 1.0f + 0x1p-11f};
    for (int i = 0; i <= N; i++)
        f[i] = i % 5 == 0 ? special[(i / 5) % 14] : bitsf((uint32_t)check_rand64());
    int bad = 0;
    for (int n = 1; n <= 101; n++) {
        size_t len = n == 101 ? N : (size_t)n;
        for (int off = 0; off < 2; off++) {
            tq_convert(TQ_DTYPE_F16, h + off, TQ_DTYPE_F32, f + off, len, 0);
            for (size_t i = 0; i < len; i++)
                bad += h[off + i] != tq_f32_to_f16(f[off + i]);
            tq_convert(TQ_DTYPE_F32, g + off, TQ_DTYPE_F16, h + off, len, 0);
            for (size_t i = 0; i < len; i++)
                bad += fbits(g[off + i]) != fbits(tq_f16_to_f32(h[off + i]));
            tq_convert(TQ_DTYPE_BF16, h + off, TQ_DTYPE_F32, f + off, len, 0);
            for (size_t i = 0; i < len; i++)
                bad += h[off + i] != tq_f32_to_bf16(f[off + i]);
            tq_convert(TQ_DTYPE_F32, g + off, TQ_DTYPE_BF16, h + off, len, 0);
            for (size_t i = 0; i < len; i++)
                bad += fbits(g[off + i]) != fbits(tq_bf16_to_f32(h[off + i]));
        }
    }
    CHECK(bad == 0, "vector and scalar f16/bf16 paths differ in %d elements", bad);
    /* every f16 and bf16 value through the vector path to f32 */
    uint16_t *all = malloc(65536 * sizeof *all);
    float *out = malloc(65536 * sizeof *out);
    if (all && out) {
        for (uint32_t i = 0; i < 65536; i++)
            all[i] = (uint16_t)i;
        bad = 0;
        tq_convert(TQ_DTYPE_F32, out, TQ_DTYPE_F16, all, 65536, 0);
        for (uint32_t i = 0; i < 65536; i++)
            bad += fbits(out[i]) != fbits(tq_f16_to_f32((uint16_t)i));
        tq_convert(TQ_DTYPE_F32, out, TQ_DTYPE_BF16, all, 65536, 0);
        for (uint32_t i = 0; i < 65536; i++)
            bad += fbits(out[i]) != fbits(tq_bf16_to_f32((uint16_t)i));
        CHECK(bad == 0, "all 65536 f16 and bf16 values: vector and scalar differ in %d", bad);
    }
    free(all);
    free(out);
    free(f);
    free(g);
    free(h);
}

/* From f64 and the integers, f16/bf16/f32 are rounded once, from the exact
 * value: rounding to f32 first would decide some ties wrongly. */
static void check_wide_sources(void)
{
    enum { N = 200000 };
    double *d = malloc(N * sizeof *d);
    int64_t *iv = malloc(N * sizeof *iv);
    int32_t *i32 = malloc(N * sizeof *i32);
    uint16_t *h = malloc(N * sizeof *h);
    float *f = malloc(N * sizeof *f);
    double *dd = malloc(N * sizeof *dd);
    if (!d || !iv || !i32 || !h || !f || !dd) {
        CHECK(0, "out of memory");
        return;
    }
    for (int i = 0; i < N; i++) {
        /* a third: just off f16/bf16 ties (the double rounding traps), the rest random */
        if (i % 3 == 0) {
            uint16_t k = (uint16_t)(check_rand64() % 0x7bff);
            double lo = ref_f16(k), hi = ref_f16((uint16_t)(k + 1)), mid = (lo + hi) / 2;
            d[i] = mid + (check_rand64() & 1 ? 1 : -1) * ldexp(fabs(mid) + 0x1p-30, -40);
        } else if (i % 3 == 1) {
            uint32_t b = (uint32_t)(check_rand64() % 0x7f7fu);
            d[i] = (double)bitsf(b << 16 | 0x8000u) * (1 + (check_rand64() & 1 ? 0x1p-40 : -0x1p-40));
        } else {
            d[i] = ldexp((double)(check_rand64() >> 11), (int)(check_rand64() % 140) - 120 - 53);
        }
        if (check_rand64() & 1)
            d[i] = -d[i];
        iv[i] = (int64_t)(check_rand64() >> (1 + check_rand64() % 63)); /* 1 to 63 bits */
        if (i % 7 == 0) /* just above a tie of f32 / bf16 */
            iv[i] = (1ll << 60) + (1ll << 36) + 1;
        if (i % 11 == 0)
            iv[i] = (1ll << 30) + (1ll << 22) + (int64_t)(i % 3) - 1;
        if (check_rand64() & 1)
            iv[i] = -iv[i];
        i32[i] = (int32_t)iv[i];
    }
    iv[5] = INT64_MAX;
    iv[8] = INT64_MIN;
    iv[13] = 0;
    int bad = 0;
    tq_convert(TQ_DTYPE_F16, h, TQ_DTYPE_F64, d, N, 0);
    for (int i = 0; i < N; i++)
        bad += !same(ref_f16(h[i]), REF_F16(d[i]));
    CHECK(bad == 0, "f64 -> f16: %d of %d wrong", bad, N);
    bad = 0;
    tq_convert(TQ_DTYPE_BF16, h, TQ_DTYPE_F64, d, N, 0);
    for (int i = 0; i < N; i++)
        bad += !same(bf16_val(h[i]), REF_BF16(d[i]));
    CHECK(bad == 0, "f64 -> bf16: %d of %d wrong", bad, N);
    bad = 0;
    tq_convert(TQ_DTYPE_F32, f, TQ_DTYPE_F64, d, N, 0);
    for (int i = 0; i < N; i++)
        bad += !same(f[i], REF_F32(d[i]));
    CHECK(bad == 0, "f64 -> f32: %d of %d wrong", bad, N);
    /* i64 */
    bad = 0;
    tq_convert(TQ_DTYPE_F32, f, TQ_DTYPE_I64, iv, N, 0);
    for (int i = 0; i < N; i++)
        bad += !same(f[i], ref_round_int(iv[i], 24, 127));
    CHECK(bad == 0, "i64 -> f32: %d of %d wrong", bad, N);
    bad = 0;
    tq_convert(TQ_DTYPE_F64, dd, TQ_DTYPE_I64, iv, N, 0);
    for (int i = 0; i < N; i++)
        bad += !same(dd[i], ref_round_int(iv[i], 53, 1023));
    CHECK(bad == 0, "i64 -> f64: %d of %d wrong", bad, N);
    bad = 0;
    tq_convert(TQ_DTYPE_F16, h, TQ_DTYPE_I64, iv, N, 0);
    for (int i = 0; i < N; i++)
        bad += !same(ref_f16(h[i]), ref_round_int(iv[i], 11, 15));
    CHECK(bad == 0, "i64 -> f16: %d of %d wrong", bad, N);
    bad = 0;
    tq_convert(TQ_DTYPE_BF16, h, TQ_DTYPE_I64, iv, N, 0);
    for (int i = 0; i < N; i++)
        bad += !same(bf16_val(h[i]), ref_round_int(iv[i], 8, 127));
    CHECK(bad == 0, "i64 -> bf16: %d of %d wrong", bad, N);
    bad = 0;
    tq_convert(TQ_DTYPE_BF16, h, TQ_DTYPE_I32, i32, N, 0);
    for (int i = 0; i < N; i++)
        bad += !same(bf16_val(h[i]), ref_round_int(i32[i], 8, 127));
    CHECK(bad == 0, "i32 -> bf16: %d of %d wrong", bad, N);
    bad = 0;
    tq_convert(TQ_DTYPE_F32, f, TQ_DTYPE_I32, i32, N, 0);
    for (int i = 0; i < N; i++)
        bad += !same(f[i], ref_round_int(i32[i], 24, 127));
    CHECK(bad == 0, "i32 -> f32: %d of %d wrong", bad, N);
    free(d);
    free(iv);
    free(i32);
    free(h);
    free(f);
    free(dd);
}

/* ---- integers ---- */

/* Round half to even without nearbyint: floor, and look at what is left. */
static double ref_rne(double x)
{
    double fl = floor(x), rest = x - fl;
    if (rest > 0.5)
        return fl + 1;
    if (rest < 0.5)
        return fl;
    return fmod(fl, 2) == 0 ? fl : fl + 1;
}

static void int_range(tq_dtype dt, double *lo, double *hi)
{
    switch (dt) {
    case TQ_DTYPE_I8: *lo = -128; *hi = 127; break;
    case TQ_DTYPE_U8: *lo = 0; *hi = 255; break;
    case TQ_DTYPE_I16: *lo = -32768; *hi = 32767; break;
    case TQ_DTYPE_I32: *lo = -2147483648.0; *hi = 2147483647.0; break;
    default: *lo = -0x1p63; *hi = 0x1p63; /* hi: clamp to INT64_MAX below */
    }
}

static int64_t load_int(tq_dtype dt, const void *p, size_t i)
{
    const unsigned char *c = p;
    switch (dt) {
    case TQ_DTYPE_I8: return (int8_t)c[i];
    case TQ_DTYPE_U8: return c[i];
    case TQ_DTYPE_I16: { int16_t v; memcpy(&v, c + 2 * i, 2); return v; }
    case TQ_DTYPE_I32: { int32_t v; memcpy(&v, c + 4 * i, 4); return v; }
    default: { int64_t v; memcpy(&v, c + 8 * i, 8); return v; }
    }
}

/* What a float must become in an integer dtype. */
static int64_t ref_to_int(double x, tq_dtype dt)
{
    double lo, hi;
    int_range(dt, &lo, &hi);
    if (isnan(x))
        return 0;
    double r = ref_rne(x);
    if (r <= lo)
        return dt == TQ_DTYPE_I64 ? INT64_MIN : (int64_t)lo;
    if (r >= hi)
        return dt == TQ_DTYPE_I64 ? INT64_MAX : (int64_t)hi;
    return (int64_t)r;
}

static void check_ints(void)
{
    const tq_dtype ints[] = {TQ_DTYPE_I8, TQ_DTYPE_U8, TQ_DTYPE_I16, TQ_DTYPE_I32, TQ_DTYPE_I64};
    enum { N = 3000 };
    double d[N];
    float f[N];
    const double special[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, 128.5, -128.5, -129.5,
                              254.5, 255.5, 256, -0.4, -0.6, 32767.5, -32768.5, 2147483647.5,
                              -2147483648.5, 0x1p62, 0x1p63, -0x1p63, 9.3e18, -9.3e18, 1e300,
                              -1e300, INFINITY, -INFINITY, NAN, -NAN, 0.0, -0.0, 1e-300};
    int ns = (int)(sizeof special / sizeof *special);
    for (int i = 0; i < N; i++) {
        d[i] = i < ns ? special[i]
                      : ldexp((double)(check_rand64() >> 11), (int)(check_rand64() % 70) - 53) *
                            (check_rand64() & 1 ? 1 : -1);
        if (i >= ns && i % 4 == 0) /* a tie */
            d[i] = floor(d[i]) + 0.5;
        f[i] = (float)d[i];
    }
    static unsigned char out[N * 8];
    for (size_t k = 0; k < sizeof ints / sizeof *ints; k++) {
        int bad = 0;
        tq_convert(ints[k], out, TQ_DTYPE_F64, d, N, 0);
        for (int i = 0; i < N; i++)
            bad += load_int(ints[k], out, (size_t)i) != ref_to_int(d[i], ints[k]);
        tq_convert(ints[k], out, TQ_DTYPE_F32, f, N, 0);
        for (int i = 0; i < N; i++)
            bad += load_int(ints[k], out, (size_t)i) != ref_to_int(f[i], ints[k]);
        CHECK(bad == 0, "f64/f32 -> %s: %d of %d wrong (half to even, saturation, NaN -> 0)",
              tq_dtype_name(ints[k]), bad, 2 * N);
    }
    /* spot values, spelled out */
    int8_t i8[6];
    double sv[6] = {2.5, -2.5, 127.5, -200, NAN, 3.5};
    tq_convert(TQ_DTYPE_I8, i8, TQ_DTYPE_F64, sv, 6, 0);
    CHECK(i8[0] == 2 && i8[1] == -2 && i8[2] == 127 && i8[3] == -128 && i8[4] == 0 && i8[5] == 4,
          "i8: %d %d %d %d %d %d", i8[0], i8[1], i8[2], i8[3], i8[4], i8[5]);
    /* integer to integer: saturation */
    int64_t src[N];
    for (int i = 0; i < N; i++)
        src[i] = (int64_t)check_rand64() >> (check_rand64() % 64);
    src[0] = INT64_MAX;
    src[1] = INT64_MIN;
    src[2] = -1;
    src[3] = 256;
    for (size_t k = 0; k < sizeof ints / sizeof *ints; k++) {
        double lo, hi;
        int_range(ints[k], &lo, &hi);
        int bad = 0;
        tq_convert(ints[k], out, TQ_DTYPE_I64, src, N, 0);
        for (int i = 0; i < N; i++) {
            int64_t want = ints[k] == TQ_DTYPE_I64 ? src[i]
                         : src[i] < (int64_t)lo ? (int64_t)lo
                         : src[i] > (int64_t)hi ? (int64_t)hi : src[i];
            bad += load_int(ints[k], out, (size_t)i) != want;
        }
        CHECK(bad == 0, "i64 -> %s: %d wrong", tq_dtype_name(ints[k]), bad);
    }
    int16_t s16[3] = {-5, 300, 255};
    uint8_t u8[3];
    tq_convert(TQ_DTYPE_U8, u8, TQ_DTYPE_I16, s16, 3, 0);
    CHECK(u8[0] == 0 && u8[1] == 255 && u8[2] == 255, "i16 -> u8: %d %d %d", u8[0], u8[1], u8[2]);
    uint8_t big[2] = {200, 255};
    int8_t s8[2];
    tq_convert(TQ_DTYPE_I8, s8, TQ_DTYPE_U8, big, 2, 0);
    CHECK(s8[0] == 127 && s8[1] == 127, "u8 -> i8 saturates");
    /* integers to floats, small enough to be exact */
    int16_t v16[4] = {-32768, -1, 0, 32767};
    float fv[4];
    tq_convert(TQ_DTYPE_F32, fv, TQ_DTYPE_I16, v16, 4, 0);
    CHECK(fv[0] == -32768.0f && fv[1] == -1.0f && fv[2] == 0.0f && fv[3] == 32767.0f, "i16 -> f32");
}

/* ---- q8_0, q4_0 (ggml) ---- */

/* ggml's quantize_row_q8_0_ref: d = max|x| / 127, q = round(x / d) with
 * round-half-away (roundf), computed as x * (1/d); d stored as f16. */
static void ref_q8_0(const float *x, unsigned char *blk)
{
    float amax = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    uint16_t dh = tq_f32_to_f16(d);
    blk[0] = (unsigned char)dh;
    blk[1] = (unsigned char)(dh >> 8);
    for (int j = 0; j < 32; j++)
        blk[2 + j] = (unsigned char)(signed char)roundf(x[j] * id);
}

/* ggml's quantize_row_q4_0_ref: max = the value of largest magnitude (with its
 * sign), d = max / -8, q = min(15, trunc(x / d + 8.5)); element j in the low
 * nibble of byte j, element j + 16 in the high nibble. */
static void ref_q4_0(const float *x, unsigned char *blk)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    uint16_t dh = tq_f32_to_f16(d);
    blk[0] = (unsigned char)dh;
    blk[1] = (unsigned char)(dh >> 8);
    for (int j = 0; j < 16; j++) {
        int lo = (int)(x[j] * id + 8.5f), hi = (int)(x[j + 16] * id + 8.5f);
        lo = lo > 15 ? 15 : lo;
        hi = hi > 15 ? 15 : hi;
        blk[2 + j] = (unsigned char)(lo | hi << 4);
    }
}

static void make_block(float *x, int kind)
{
    double scale = ldexp(1, (int)(check_rand64() % 30) - 15);
    for (int j = 0; j < 32; j++) {
        double u = (double)(check_rand64() >> 11) / 0x1p53 * 2 - 1;
        x[j] = (float)(u * scale);
    }
    if (kind == 1)
        memset(x, 0, 32 * sizeof *x);
    if (kind == 2) { /* one spike */
        memset(x, 0, 32 * sizeof *x);
        x[check_rand64() % 32] = (float)-scale;
    }
    if (kind == 3) /* every value on a grid: ties everywhere */
        for (int j = 0; j < 32; j++)
            x[j] = (float)((j - 16) * 0.5);
    if (kind == 4) /* largest magnitude negative */
        x[7] = (float)(-3 * scale);
}

static void check_blocks(void)
{
    enum { NB = 4000 };
    float *x = malloc(NB * 32 * sizeof *x), *y = malloc(NB * 32 * sizeof *y);
    unsigned char *q = malloc(NB * 34), *r = malloc(NB * 34);
    if (!x || !y || !q || !r) {
        CHECK(0, "out of memory");
        return;
    }
    for (int b = 0; b < NB; b++)
        make_block(x + 32 * b, b % 10 < 5 ? b % 10 : 0);
    /* q8_0 */
    for (int b = 0; b < NB; b++)
        ref_q8_0(x + 32 * b, r + 34 * b);
    tq_convert(TQ_DTYPE_Q8_0, q, TQ_DTYPE_F32, x, NB * 32, 0);
    CHECK(memcmp(q, r, NB * 34) == 0, "q8_0 blocks differ from ggml's quantizer");
    tq_convert(TQ_DTYPE_F32, y, TQ_DTYPE_Q8_0, q, NB * 32, 0);
    int bad = 0, bad_err = 0;
    for (int b = 0; b < NB; b++) {
        double d16 = ref_f16((uint16_t)(r[34 * b] | r[34 * b + 1] << 8));
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[32 * b + j]));
        double d = amax / 127.0;
        for (int j = 0; j < 32; j++) {
            int qv = (signed char)r[34 * b + 2 + j];
            if (y[32 * b + j] != (float)(qv * d16))
                bad++;
            /* half a step from rounding, plus the f16 rounding of d times |q| */
            double err = fabs(y[32 * b + j] - (double)x[32 * b + j]);
            if (err > 0.5 * d * (1 + 1e-6) + 127 * fabs(d16 - d) + 1e-30)
                bad_err++;
        }
    }
    CHECK(bad == 0, "q8_0 dequantized: %d values are not q * d", bad);
    CHECK(bad_err == 0, "q8_0: %d values off by more than d/2 + 127|d16 - d|", bad_err);
    /* q4_0 */
    for (int b = 0; b < NB; b++)
        ref_q4_0(x + 32 * b, r + 18 * b);
    tq_convert(TQ_DTYPE_Q4_0, q, TQ_DTYPE_F32, x, NB * 32, 0);
    CHECK(memcmp(q, r, NB * 18) == 0, "q4_0 blocks differ from ggml's quantizer");
    tq_convert(TQ_DTYPE_F32, y, TQ_DTYPE_Q4_0, q, NB * 32, 0);
    bad = bad_err = 0;
    for (int b = 0; b < NB; b++) {
        const unsigned char *blk = r + 18 * b;
        double d16 = ref_f16((uint16_t)(blk[0] | blk[1] << 8));
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[32 * b + j]) > amax) {
                amax = fabsf(x[32 * b + j]);
                max = x[32 * b + j];
            }
        double d = max / -8.0;
        for (int j = 0; j < 32; j++) {
            int nib = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
            if (y[32 * b + j] != (float)((nib - 8) * d16))
                bad++;
            /* half a step, except a full step where 8 * d clamps to 7 * d,
             * plus 8 |d16 - d| from storing d as f16 */
            double err = fabs(y[32 * b + j] - (double)x[32 * b + j]);
            if (err > fabs(d) * (nib == 15 ? 1 : 0.5) * (1 + 1e-6) + 8 * fabs(d16 - d) + 1e-30)
                bad_err++;
        }
    }
    CHECK(bad == 0, "q4_0 dequantized: %d values are not (nibble - 8) * d", bad);
    CHECK(bad_err == 0, "q4_0: %d values off by more than the step bound", bad_err);
    /* a hand-made block: d = 0.5 (f16 0x3800), q = -3 and 5 */
    unsigned char blk8[34] = {0x00, 0x38};
    blk8[2] = (unsigned char)-3;
    blk8[3] = 5;
    float v[32];
    tq_convert(TQ_DTYPE_F32, v, TQ_DTYPE_Q8_0, blk8, 32, 0);
    CHECK(v[0] == -1.5f && v[1] == 2.5f && v[2] == 0.0f, "q8_0 by hand: %g %g", v[0], v[1]);
    unsigned char blk4[18] = {0x00, 0x3c, 0x9f}; /* d = 1, byte 0: low 15, high 9 */
    tq_convert(TQ_DTYPE_F32, v, TQ_DTYPE_Q4_0, blk4, 32, 0);
    CHECK(v[0] == 7.0f && v[16] == 1.0f && v[1] == -8.0f && v[17] == -8.0f,
          "q4_0 by hand: %g %g %g %g", v[0], v[16], v[1], v[17]);
    /* non-finite input: no undefined behaviour, no crash; finite blocks around
     * it still match ggml */
    float nf[96];
    make_block(nf, 0);
    make_block(nf + 64, 0);
    for (int j = 0; j < 32; j++)
        nf[32 + j] = j == 3 ? NAN : j == 4 ? INFINITY : 1e-44f * (float)j;
    tq_convert(TQ_DTYPE_Q8_0, q, TQ_DTYPE_F32, nf, 96, 0);
    ref_q8_0(nf, r);
    ref_q8_0(nf + 64, r + 68);
    CHECK(memcmp(q, r, 34) == 0 && memcmp(q + 68, r + 68, 34) == 0, "q8_0 around a NaN block");
    tq_convert(TQ_DTYPE_Q4_0, q, TQ_DTYPE_F32, nf, 96, 0);
    ref_q4_0(nf, r);
    ref_q4_0(nf + 64, r + 36);
    CHECK(memcmp(q, r, 18) == 0 && memcmp(q + 36, r + 36, 18) == 0, "q4_0 around a NaN block");
    free(x);
    free(y);
    free(q);
    free(r);
}

/* ---- bit ---- */

/* numpy.packbits(x > 0, axis=-1): bit 7 of byte 0 is element 0; each row ends
 * on a byte boundary with zero bits. */
static void ref_pack(const float *x, int64_t rows, int64_t len, unsigned char *out)
{
    int64_t rb = (len + 7) / 8;
    memset(out, 0, (size_t)(rows * rb));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < len; j++)
            if (x[r * len + j] > 0)
                out[r * rb + j / 8] |= (unsigned char)(1u << (7 - j % 8));
}

static void check_bits(void)
{
    float x[400], y[400];
    unsigned char p[80], want[80];
    int bad = 0;
    for (int64_t len = 1; len <= 40; len++) {
        int64_t rows = 400 / len < 5 ? 400 / len : 5;
        for (int64_t i = 0; i < rows * len; i++) {
            uint64_t k = check_rand64() % 8;
            x[i] = k == 0 ? 0.0f : k == 1 ? -0.0f : k == 2 ? NAN : k == 3 ? 1e-45f
                 : k < 6 ? (float)(check_rand64() % 100) : -(float)(check_rand64() % 100);
        }
        memset(p, 0xaa, sizeof p);
        tq_convert(TQ_DTYPE_BIT, p, TQ_DTYPE_F32, x, (size_t)(rows * len), len);
        ref_pack(x, rows, len, want);
        if (memcmp(p, want, (size_t)(rows * ((len + 7) / 8))))
            bad++;
        tq_convert(TQ_DTYPE_F32, y, TQ_DTYPE_BIT, p, (size_t)(rows * len), len);
        for (int64_t i = 0; i < rows * len; i++)
            if (y[i] != (x[i] > 0 ? 1.0f : -1.0f))
                bad++;
    }
    CHECK(bad == 0, "bit packing differs from numpy.packbits order in %d cases", bad);
    /* by hand: [1, -1, 1, 1, -1, -1, -1, -1, 1] -> 0b10110000 0b10000000 */
    float h[9] = {1, -1, 1, 1, -1, -1, -1, -1, 1};
    tq_convert(TQ_DTYPE_BIT, p, TQ_DTYPE_F32, h, 9, 9);
    CHECK(p[0] == 0xb0 && p[1] == 0x80, "bit by hand: %02x %02x", p[0], p[1]);
    CHECK(tq_convert(TQ_DTYPE_BIT, p, TQ_DTYPE_F32, h, 9, 4) == TQ_ERR_USAGE,
          "a row length that does not divide n is refused");
}

/* ---- sizes and names ---- */

static tq_status pb(tq_dtype dt, int rank, const int64_t *dims, uint64_t *bytes)
{
    *bytes = 12345;
    return tq_dtype_payload_bytes(dt, rank, dims, bytes);
}

static void check_sizes(void)
{
    uint64_t b;
    const uint64_t lim = 1ull << 36;
    CHECK(pb(TQ_DTYPE_F32, 0, NULL, &b) == TQ_OK && b == 4, "f32 scalar: %llu", (unsigned long long)b);
    CHECK(pb(TQ_DTYPE_Q8_0, 0, NULL, &b) == TQ_ERR_DATA, "q8_0 scalar refused");
    CHECK(pb(TQ_DTYPE_BIT, 0, NULL, &b) == TQ_ERR_DATA, "bit scalar refused");
    CHECK(pb(TQ_DTYPE_STR, 1, (int64_t[]){3}, &b) == TQ_ERR_USAGE, "str has no fixed size");
    CHECK(pb(TQ_DTYPE_INVALID, 1, (int64_t[]){3}, &b) == TQ_ERR_DATA, "dtype 0 refused");
    CHECK(pb(TQ_DTYPE_Q2, 0, NULL, &b) == TQ_ERR_DATA, "q2 scalar refused");
    CHECK(pb(TQ_DTYPE_Q2, 2, (int64_t[]){3, 64}, &b) == TQ_OK && b == 72, "q2 [3, 64]: 72 bytes");
    CHECK(pb((tq_dtype)15, 1, (int64_t[]){3}, &b) == TQ_ERR_DATA, "dtype 15 refused");
    CHECK(pb(TQ_DTYPE_F32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, &b) == TQ_ERR_DATA, "rank 9");
    CHECK(pb(TQ_DTYPE_F32, 2, (int64_t[]){-1, 3}, &b) == TQ_ERR_DATA, "negative dim");
    struct { tq_dtype dt; int rank; int64_t dims[4]; uint64_t want; } ok[] = {
        {TQ_DTYPE_F32, 2, {0, 3}, 0},
        {TQ_DTYPE_F64, 3, {2, 3, 5}, 240},
        {TQ_DTYPE_F16, 1, {7}, 14},
        {TQ_DTYPE_BF16, 2, {1, 1}, 2},
        {TQ_DTYPE_I8, 1, {5}, 5},
        {TQ_DTYPE_U8, 2, {5, 0}, 0},
        {TQ_DTYPE_I16, 1, {3}, 6},
        {TQ_DTYPE_I32, 1, {3}, 12},
        {TQ_DTYPE_I64, 1, {3}, 24},
        {TQ_DTYPE_Q8_0, 2, {3, 64}, 3 * 2 * 34},
        {TQ_DTYPE_Q8_0, 1, {0}, 0},
        {TQ_DTYPE_Q4_0, 3, {2, 2, 96}, 4 * 3 * 18},
        {TQ_DTYPE_BIT, 2, {3, 9}, 6},
        {TQ_DTYPE_BIT, 1, {17}, 3},
        {TQ_DTYPE_BIT, 3, {2, 3, 1}, 6},
        {TQ_DTYPE_F32, 1, {1ll << 34}, lim},               /* exactly the limit */
        {TQ_DTYPE_BIT, 1, {1ll << 39}, lim},               /* most elements */
        {TQ_DTYPE_U8, 2, {1ll << 18, 1ll << 18}, lim},
        {TQ_DTYPE_F32, 2, {1ll << 37, 0}, 0},              /* many empty rows */
        {TQ_DTYPE_Q4_0, 1, {(lim / 18) * 32}, lim / 18 * 18},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        CHECK(pb(ok[i].dt, ok[i].rank, ok[i].dims, &b) == TQ_OK && b == ok[i].want,
              "case %zu (%s): %llu bytes, want %llu", i, tq_dtype_name(ok[i].dt),
              (unsigned long long)b, (unsigned long long)ok[i].want);
    struct { tq_dtype dt; int rank; int64_t dims[4]; } bad[] = {
        {TQ_DTYPE_F32, 1, {(1ll << 34) + 1}},              /* one element over */
        {TQ_DTYPE_F64, 2, {1ll << 31, 5}},
        {TQ_DTYPE_BIT, 1, {(1ll << 39) + 1}},              /* too many elements */
        {TQ_DTYPE_BIT, 2, {(1ll << 36) + 1, 8}},           /* 2^36 + 1 bytes */
        {TQ_DTYPE_F32, 3, {1ll << 32, 1ll << 32, 2}},      /* product overflows u64 */
        {TQ_DTYPE_U8, 4, {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX}},
        {TQ_DTYPE_F32, 3, {0, 1ll << 40, 1ll << 40}},      /* empty, but rows overflow */
        {TQ_DTYPE_F32, 2, {(1ll << 39) + 1, 0}},           /* more empty rows than elements allow */
        {TQ_DTYPE_Q8_0, 2, {3, 33}},
        {TQ_DTYPE_Q4_0, 1, {16}},
        {TQ_DTYPE_Q8_0, 1, {(lim / 34 + 1) * 32}},         /* blocks over the limit */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(pb(bad[i].dt, bad[i].rank, bad[i].dims, &b) == TQ_ERR_DATA && tq_errmsg()[0],
              "bad case %zu (%s) accepted", i, tq_dtype_name(bad[i].dt));
    /* names and sizes of the 14 codes, as tq-format.5 numbers them */
    static const char *names[] = {NULL, "f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32",
                                  "i64", "str", "q8_0", "q4_0", "bit", "q2"};
    static const size_t sizes[] = {0, 4, 8, 2, 2, 1, 1, 2, 4, 8, 0, 0, 0, 0, 0};
    int nbad = 0;
    for (int i = 1; i <= 14; i++)
        nbad += strcmp(tq_dtype_name((tq_dtype)i), names[i]) || tq_dtype_from_name(names[i]) != (tq_dtype)i ||
                tq_dtype_size((tq_dtype)i) != sizes[i];
    CHECK(nbad == 0, "dtype names, codes or sizes differ");
    CHECK(!tq_dtype_name(TQ_DTYPE_INVALID) && !tq_dtype_name((tq_dtype)15) &&
          tq_dtype_from_name("f8") == TQ_DTYPE_INVALID && tq_dtype_from_name(NULL) == TQ_DTYPE_INVALID,
          "unknown dtypes");
    CHECK(tq_convert(TQ_DTYPE_STR, &b, TQ_DTYPE_F32, &b, 1, 0) == TQ_ERR_USAGE, "to str refused");
    CHECK(tq_convert(TQ_DTYPE_Q8_0, &b, TQ_DTYPE_F32, &b, 31, 0) == TQ_ERR_USAGE, "q8_0 of 31");
    CHECK(tq_convert((tq_dtype)99, &b, TQ_DTYPE_F32, &b, 1, 0) == TQ_ERR_USAGE, "dtype 99");
}

int main(void)
{
    check_to_f32_exhaustive();
    check_f32_to_half();
    check_vector_paths();
    check_wide_sources();
    check_ints();
    check_blocks();
    check_bits();
    check_sizes();
    return CHECK_DONE();
}
