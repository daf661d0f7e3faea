/* crc32c.c: CRC-32C (Castagnoli), the checksum of the stream format. Checking
 * every payload on pass-through must cost little next to the copy itself: large
 * buffers fold 256 bytes at a time with carry-less multiplies (AVX-512
 * VPCLMULQDQ), the rest uses the SSE4.2 crc32 instruction, and a table path
 * serves other CPUs. */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

/* Slice-by-8: portable, about 1 byte per cycle. */
static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t n)
{
    pthread_once(&table_once, table_init);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
              table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
              table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
              table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return crc;
}

/* The raw register after nbytes zero bytes is a GF(2) linear map of the
 * register before: its 32 x 32 matrix, by repeated squaring. */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (int i = 0; vec; i++, vec >>= 1)
        if (vec & 1)
            sum ^= mat[i];
    return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
    for (int i = 0; i < 32; i++)
        sq[i] = gf2_times(mat, mat[i]);
}

static void zeros_op_make(uint32_t *op, size_t nbytes)
{
    uint32_t even[32], odd[32];
    odd[0] = POLY; /* the operator for one zero bit */
    for (int i = 1; i < 32; i++)
        odd[i] = 1u << (i - 1);
    gf2_square(even, odd); /* 2 bits */
    gf2_square(odd, even); /* 4 bits */
    /* start from identity, multiply in squarings of 1 byte (8 bits) */
    uint32_t result[32];
    for (int i = 0; i < 32; i++)
        result[i] = 1u << i;
    uint32_t *cur = even, *nxt = odd;
    gf2_square(cur, odd); /* 8 bits = 1 byte */
    size_t k = nbytes;
    while (k) {
        if (k & 1) {
            uint32_t tmp[32];
            for (int i = 0; i < 32; i++)
                tmp[i] = gf2_times(cur, result[i]);
            memcpy(result, tmp, sizeof tmp);
        }
        k >>= 1;
        if (k) {
            gf2_square(nxt, cur);
            uint32_t *t = cur;
            cur = nxt;
            nxt = t;
        }
    }
    memcpy(op, result, sizeof result);
}

#if defined(__x86_64__)
#include <nmmintrin.h>

/* Three independent lanes hide the 3-cycle latency of crc32q; the lanes are
 * joined by shifting the partial CRCs over the following bytes (zero-extension
 * is a linear map, applied here by the table method on a small block). */
#define LANE_BYTES 8192
static uint32_t shift_zeros(uint32_t crc, size_t nbytes);

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc,
                                                         const unsigned char *p,
                                                         size_t n)
{
    uint64_t c0 = crc;
    while (n && ((uintptr_t)p & 7)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        n--;
    }
    enum { LANE = LANE_BYTES };
    while (n >= 3 * LANE) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *p1 = p + LANE, *p2 = p + 2 * LANE;
        for (size_t i = 0; i < LANE; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p1 + i, 8);
            memcpy(&w2, p2 + i, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c0 = shift_zeros((uint32_t)c0, LANE) ^ (uint32_t)c1;
        c0 = shift_zeros((uint32_t)c0, LANE) ^ (uint32_t)c2;
        p += 3 * LANE;
        n -= 3 * LANE;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c0 = _mm_crc32_u64(c0, w);
        p += 8;
        n -= 8;
    }
    while (n--)
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    return (uint32_t)c0;
}

/* crc of (state followed by LANE zero bytes), with the raw register (no
 * pre/post inversion): a GF(2) matrix power, computed once. */
static uint32_t zeros_op[32];
static pthread_once_t zeros_once = PTHREAD_ONCE_INIT;

static void zeros_init(void) { zeros_op_make(zeros_op, LANE_BYTES); }

static uint32_t shift_zeros(uint32_t crc, size_t nbytes)
{
    (void)nbytes; /* always LANE_BYTES: the one lane length crc_hw uses */
    pthread_once(&zeros_once, zeros_init);
    return gf2_times(zeros_op, crc);
}

/* ---- folding with carry-less multiplies ----
 * A 16-byte block A, read as the polynomial H x^64 + L (the reflected bit order
 * puts the higher half in the low 8 bytes), moved d bits further along the
 * message is congruent mod P to H (x^(64+d) mod P) + L (x^d mod P), which has
 * fewer than 128 bits: "folding" it into the block there keeps the CRC. The
 * carry-less product of two reflected 64-bit values comes out multiplied by x,
 * so the constants are x^(63+d) and x^(d-1) mod P. Once everything is folded
 * into one 16-byte block, the crc32 instruction finishes it: a block congruent
 * to the message has the message's CRC. */
#include <immintrin.h>

#define FOLD_MIN 512 /* below this the crc32 instruction is as fast */

/* x^e mod P, as the 64-bit reflected operand of a carry-less multiply. */
static uint64_t xpow_mod(unsigned e)
{
    uint32_t r = 1; /* normal bit order: bit i is the coefficient of x^i */
    while (e--)
        r = (r << 1) ^ (r & 0x80000000u ? 0x1edc6f41u : 0);
    uint32_t rev = 0;
    for (int i = 0; i < 32; i++)
        rev |= ((r >> i) & 1u) << (31 - i);
    return (uint64_t)rev << 32;
}

/* The pairs of constants that fold a block forward by 16, 32, 48, 64, 128,
 * 192 and 256 bytes. */
enum { K16, K32, K48, K64, K128, K192, K256, K_COUNT };
static uint64_t k_fold[K_COUNT][2];
static pthread_once_t k_once = PTHREAD_ONCE_INIT;

static void k_init(void)
{
    static const unsigned by[K_COUNT] = {16, 32, 48, 64, 128, 192, 256};
    for (int i = 0; i < K_COUNT; i++) {
        k_fold[i][0] = xpow_mod(8 * by[i] + 63); /* for the low 8 bytes (H) */
        k_fold[i][1] = xpow_mod(8 * by[i] - 1);  /* for the high 8 bytes (L) */
    }
}

#define TARGET_FOLD __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))

TARGET_FOLD static __m512i fold512(__m512i a, int k, __m512i b)
{
    __m512i kk = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)k_fold[k]));
    __m512i h = _mm512_clmulepi64_epi128(a, kk, 0x00), l = _mm512_clmulepi64_epi128(a, kk, 0x11);
    return _mm512_ternarylogic_epi64(h, l, b, 0x96); /* h ^ l ^ b */
}

TARGET_FOLD static __m128i fold128(__m128i a, int k, __m128i b)
{
    __m128i kk = _mm_loadu_si128((const __m128i *)k_fold[k]);
    __m128i h = _mm_clmulepi64_si128(a, kk, 0x00), l = _mm_clmulepi64_si128(a, kk, 0x11);
    return _mm_xor_si128(_mm_xor_si128(h, l), b);
}

/* The raw register (no inversions) over n >= FOLD_MIN bytes. */
TARGET_FOLD static uint32_t crc_fold(uint32_t crc, const unsigned char *p, size_t n)
{
    pthread_once(&k_once, k_init);
    /* four streams of 64-byte blocks, 256 bytes apart; the starting register
     * is xored into the first bytes, as the CRC of a message allows */
    __m512i a0 = _mm512_xor_si512(_mm512_loadu_si512(p),
                                  _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    __m512i a1 = _mm512_loadu_si512(p + 64), a2 = _mm512_loadu_si512(p + 128),
            a3 = _mm512_loadu_si512(p + 192);
    p += 256;
    n -= 256;
    while (n >= 256) {
        a0 = fold512(a0, K256, _mm512_loadu_si512(p));
        a1 = fold512(a1, K256, _mm512_loadu_si512(p + 64));
        a2 = fold512(a2, K256, _mm512_loadu_si512(p + 128));
        a3 = fold512(a3, K256, _mm512_loadu_si512(p + 192));
        p += 256;
        n -= 256;
    }
    /* the streams onto the last one, then its four 16-byte lanes onto the last */
    a3 = fold512(a0, K192, a3);
    a3 = fold512(a1, K128, a3);
    a3 = fold512(a2, K64, a3);
    __m128i x = _mm512_extracti32x4_epi32(a3, 3);
    x = fold128(_mm512_extracti32x4_epi32(a3, 0), K48, x);
    x = fold128(_mm512_extracti32x4_epi32(a3, 1), K32, x);
    x = fold128(_mm512_extracti32x4_epi32(a3, 2), K16, x);
    while (n >= 16) {
        x = fold128(x, K16, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
    c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(x, 1));
    while (n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

static int have_fold(void)
{
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("sse4.2");
#else
    return 0;
#endif
}

static int have_crc32(void)
{
#if defined(__x86_64__)
    return __builtin_cpu_supports("sse4.2");
#else
    return 0;
#endif
}

uint32_t tq_crc32c_path(int path, uint32_t crc, const void *data, size_t n)
{
    crc = ~crc;
#if defined(__x86_64__)
    if (path >= 2 && n >= FOLD_MIN && have_fold())
        return ~crc_fold(crc, data, n);
    if (path >= 1 && have_crc32())
        return ~crc_hw(crc, data, n);
#endif
    (void)path;
    return ~crc_sw(crc, data, n);
}

/* Large payloads (a frame of scores, a mapped input) in 1 MiB chunks on the
 * worker pool: the raw CRC of A then B is the register after A moved over
 * |B| zero bytes (the linear map above), xor the raw CRC of B from zero. A
 * thread checksumming 16 MiB alone otherwise leaves the others idle. */
enum { CHUNK = 1 << 20 };
static uint32_t chunk_op[32];
static pthread_once_t chunk_once = PTHREAD_ONCE_INIT;
static void chunk_init(void) { zeros_op_make(chunk_op, CHUNK); }

typedef struct chunks {
    const unsigned char *p;
    uint32_t *raw;
} chunks;

static void chunk_crcs(void *ctx, int64_t begin, int64_t end)
{
    const chunks *c = ctx;
    for (int64_t i = begin; i < end; i++)
        c->raw[i] = ~tq_crc32c_path(2, ~0u, c->p + i * (int64_t)CHUNK, CHUNK);
}

uint32_t tq_crc32c(uint32_t crc, const void *data, size_t n)
{
    size_t nc = n / CHUNK;
    uint32_t *raw = nc >= 4 && tq_threads_get() > 1 ? malloc(nc * sizeof *raw) : NULL;
    if (!raw)
        return tq_crc32c_path(2, crc, data, n);
    chunks c = {data, raw};
    tq_parallel_for((int64_t)nc, 1, chunk_crcs, &c);
    pthread_once(&chunk_once, chunk_init);
    uint32_t r = ~crc;
    for (size_t i = 0; i < nc; i++)
        r = gf2_times(chunk_op, r) ^ raw[i];
    free(raw);
    return tq_crc32c_path(2, ~r, c.p + nc * CHUNK, n - nc * CHUNK);
}
