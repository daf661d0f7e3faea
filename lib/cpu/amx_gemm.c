/* amx_gemm.c: the blocked product on AMX tiles that the bf16 and int8 GEMMs
 * share (gemm_bf16.c, gemm_i8.c): which rows, strips and steps of k go
 * through the tiles in what order, and where each 32 x 32 block of sums
 * goes. amx.c asks for the tiles and configures them.
 *
 * The order is the one measured fastest here (a 2-core Xeon, one thread,
 * tq-embed's shapes 256 x 384 x 384 and 256 x 384 x 1536, bf16):
 *  - A is read in place, each tile 16 of its rows at their own stride (the
 *    tile loads take any), where the first kernel copied every block of A
 *    into contiguous steps first: that copy was 12% of tq-embed
 *    --precision bf16, and the product without it 1.3x to 1.6x faster.
 *    Rows past m (a last group of other than 16 or 32) and a k short of
 *    whole steps are copied, zeros after them, as before.
 *  - 32 rows of A (k = 384: 24 KiB) stay in L1 while the strips of a panel
 *    of B pass, each from L2; the panel is what fits half of an AMX
 *    machine's 2 MiB L2, so a B larger than that is read once a panel,
 *    not once every 32 rows (2048^3: 0.65 against 0.87 TFLOP/s).
 *  - Past 16 steps, k runs in passes of about 8, so that those rows' pass
 *    (16 KiB) stays in L1; between passes the sums go to a buffer and come
 *    back (an f32 or int32 tile stored and loaded again is exact: the bits
 *    are those of one pass over k, in the same order whatever the blocks).
 * Each step loads A's two tiles and the strip's two and does four products
 * (2 x 2 tiles of C, the most the 8 tiles hold with each load used twice).
 * Any other memory traffic between products slows them (copying each block
 * of sums out of the tiles cost 20% of the product alone): where C is plain
 * f32 rows, blocks go straight there. */
#include "../internal.h"
#include "gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TQ_TARGET_AMX __attribute__((target("amx-tile,amx-bf16,amx-int8")))
#endif


#if defined(__x86_64__)
/* A's rows (at lda bytes, kbytes each) as the tiles read a copy: each tile
 * of 16 rows step by step, a step's 16 rows of 64 bytes of k one contiguous
 * KiB; zeros past kbytes and past the rows up to a multiple of 32. */
static void pack_rows(unsigned char *dst, const unsigned char *a, long lda, int rows,
                      size_t kbytes, int steps)
{
    int padded = (rows + 31) & ~31, whole = (int)(kbytes / 64);
    for (int i = 0; i < padded; i++) {
        const unsigned char *row = a + (long)i * lda;
        unsigned char *d = dst + (size_t)(i / 16) * steps * 1024 + (size_t)(i % 16) * 64;
        int s = 0;
        /* whole steps by fixed-size copies (inlined: a call for each 64
         * bytes made the copy a fifth of tq-embed --precision bf16) */
        for (; i < rows && s < whole; s++, d += 1024)
            memcpy(d, row + (size_t)s * 64, 64);
        for (; s < steps; s++, d += 1024) {
            size_t at = (size_t)s * 64, live = i < rows && at < kbytes ? kbytes - at : 0;
            if (live)
                memcpy(d, row + at, live);
            memset(d + live, 0, 64 - live);
        }
    }
}

/* 32 rows of A: two tiles of 16 rows, `stride` bytes from row to row and
 * `delta` from step to step (in place: lda and 64; a copy: 64 and 1024). */
typedef struct {
    const unsigned char *a0, *a1;
    long stride, delta;
    int two; /* rows 16.. live */
} rows32;

/* C's four tiles (two when only 16 rows are live) over steps s0.. s1 of
 * k: from zero, or from the sums so far at cin; stored to cout (rows ldc
 * bytes apart; a block's lower 16 rows at 16 * ldc). */
TQ_TARGET_AMX static void block(int kind, const rows32 *a, const unsigned char *strip, int s0,
                                int s1, const char *cin, char *cout, long ldc)
{
    int two = a->two;
    if (!cin) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    } else {
        _tile_loadd(0, cin, 128);
        _tile_loadd(1, cin + 64, 128);
        if (two) {
            _tile_loadd(2, cin + 16 * 128, 128);
            _tile_loadd(3, cin + 16 * 128 + 64, 128);
        }
    }
    const unsigned char *a0 = a->a0, *a1 = a->a1;
    long sa = a->stride, da = a->delta;
    /* each load just before the first product that reads it */
    for (int s = s0; s < s1; s++) {
        const unsigned char *b = strip + (size_t)s * 2048;
        _tile_loadd(4, a0 + s * da, sa);
        _tile_loadd(6, b, 128);
        if (kind == TQ_AMX_BF16) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(7, b + 64, 128);
            _tile_dpbf16ps(1, 4, 7);
            if (two) {
                _tile_loadd(5, a1 + s * da, sa);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
        } else {
            _tile_dpbsud(0, 4, 6);
            _tile_loadd(7, b + 64, 128);
            _tile_dpbsud(1, 4, 7);
            if (two) {
                _tile_loadd(5, a1 + s * da, sa);
                _tile_dpbsud(2, 5, 6);
                _tile_dpbsud(3, 5, 7);
            }
        }
    }
    _tile_stored(0, cout, ldc);
    _tile_stored(1, cout + 64, ldc);
    if (two) {
        _tile_stored(2, cout + 16 * ldc, ldc);
        _tile_stored(3, cout + 16 * ldc + 64, ldc);
    }
}

int tq_cpu_amx_gemm(int kind, int m, const unsigned char *a, long lda, size_t kbytes, int steps,
                    const unsigned char *b, int nstrips, float *direct, long ldd, int cols,
                    tq_cpu_amx_store *store, void *ctx)
{
    size_t strip_bytes = (size_t)steps * 2048;
    /* a panel of strips: half of the 2 MiB L2 of Sapphire Rapids and later */
    int panel = (int)((1u << 20) / strip_bytes);
    panel = panel < 1 ? 1 : panel > nstrips ? nstrips : panel;
    int passes = steps > 16 ? (steps + 7) / 8 : 1, pass = (steps + passes - 1) / passes;
    int in_place = kbytes == (size_t)steps * 64;
    size_t pack_bytes = (size_t)32 * steps * 64, sums_bytes = passes > 1 ? (size_t)panel * 4096 : 0;
    unsigned char *buf = NULL;
    if (!in_place || m % 16 || sums_bytes) {
        if (!(buf = tq_cpu_alloc64(pack_bytes + sums_bytes)))
            return 0;
    }
    char *sums = buf ? (char *)buf + pack_bytes : NULL;
    _Alignas(64) char tile[4096];
    tq_cpu_amx_begin();
    for (int q0 = 0; q0 < nstrips; q0 += panel) {
        int q1 = nstrips - q0 < panel ? nstrips : q0 + panel;
        for (int r = 0; r < m; r += 32) {
            int mr = m - r < 32 ? m - r : 32;
            const unsigned char *a0 = a + (long)r * lda; /* rows 16.. only where live */
            rows32 rw = {a0, mr > 16 ? a0 + 16 * lda : a0, lda, 64, mr > 16};
            if (!in_place || (mr != 16 && mr != 32)) {
                pack_rows(buf, a + (long)r * lda, lda, mr, kbytes, steps);
                rw = (rows32){buf, buf + (size_t)steps * 1024, 64, 1024, mr > 16};
            }
            for (int s0 = 0; s0 < steps; s0 += pass) {
                int s1 = steps - s0 < pass ? steps : s0 + pass;
                for (int q = q0; q < q1; q++) {
                    const unsigned char *bs = b + (size_t)q * strip_bytes;
                    char *held = sums ? sums + (size_t)(q - q0) * 4096 : NULL;
                    const char *cin = s0 ? held : NULL;
                    if (s1 < steps) {
                        block(kind, &rw, bs, s0, s1, cin, held, 128);
                        continue;
                    }
                    if (direct && mr == 32 && (q + 1) * 32 <= cols) {
                        block(kind, &rw, bs, s0, s1, cin, (char *)(direct + r * ldd + q * 32),
                              4 * ldd);
                        continue;
                    }
                    block(kind, &rw, bs, s0, s1, cin, tile, 128);
                    store(ctx, r, mr, q, tile);
                }
            }
        }
    }
    tq_cpu_amx_end();
    free(buf);
    return 1;
}
#else
int tq_cpu_amx_gemm(int kind, int m, const unsigned char *a, long lda, size_t kbytes, int steps,
                    const unsigned char *b, int nstrips, float *direct, long ldd, int cols,
                    tq_cpu_amx_store *store, void *ctx)
{
    (void)kind, (void)m, (void)a, (void)lda, (void)kbytes, (void)steps, (void)b, (void)nstrips,
        (void)direct, (void)ldd, (void)cols, (void)store, (void)ctx;
    return 0;
}
#endif
