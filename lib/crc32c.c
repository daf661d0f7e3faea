/* crc32c.c: CRC-32C (Castagnoli), the checksum of the stream format. The SSE4.2
 * crc32 instruction does 8 bytes a cycle per lane, so checking every payload on
 * pass-through costs little next to the pipe; a table path serves other CPUs. */
#include "tq.h"

#include <pthread.h>
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

static void zeros_init(void) { zeros_op_make(zeros_op, LANE_BYTES); }

static uint32_t shift_zeros(uint32_t crc, size_t nbytes)
{
    (void)nbytes; /* always LANE_BYTES: the one lane length crc_hw uses */
    pthread_once(&zeros_once, zeros_init);
    return gf2_times(zeros_op, crc);
}
#endif

uint32_t tq_crc32c(uint32_t crc, const void *data, size_t n)
{
    crc = ~crc;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        return ~crc_hw(crc, data, n);
#endif
    return ~crc_sw(crc, data, n);
}
