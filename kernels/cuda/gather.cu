/* gather.cu: y[i,:] = x[idx[i],:] for rows of any byte length, as
 * kernels/vulkan/gather.comp and lib/cpu/elementwise.c. Unlike the shader,
 * indices are checked here, on the device: one out of [0, rows_x) sets *bad
 * (the host then fails the op, as the CPU does before copying anything) and
 * that row of y is not written. The copy goes by the widest word (8, 4 or 1
 * bytes) that divides the row length and both pointers' addresses; a byte
 * store touches only its own byte, so the last row's neighbours in memory are
 * safe without the shader's read-modify-write of a partial word. */
#include "compat.h"
#include "common.cuh"

/* Word t of y (wpr words a row), grid-stride over all of them. */
template <typename W>
static __device__ __forceinline__ void tq_gather_words(const W *x, const long long *idx, W *y,
                                                       unsigned long long rows_y,
                                                       unsigned long long rows_x,
                                                       unsigned long long wpr)
{
    const unsigned long long words = rows_y * wpr;
    TQ_GRID_STRIDE(t, words) {
        /* 32-bit division when it is enough: several times cheaper */
        unsigned long long r = words <= 0xffffffffull ? (unsigned)t / (unsigned)wpr : t / wpr;
        unsigned long long c = t - r * wpr;
        long long s = idx[r];
        if (s >= 0 && (unsigned long long)s < rows_x)
            y[t] = x[(unsigned long long)s * wpr + c];
    }
}

extern "C" __global__ void tq_k_gather(const unsigned char *x, const long long *idx, unsigned char *y, unsigned long long rows_y, unsigned long long rows_x, unsigned long long row_bytes, int *bad)
{
    /* the check runs over idx on its own, so that it is made even when rows
     * are empty (row_bytes 0) */
    TQ_GRID_STRIDE(r, rows_y) {
        long long s = idx[r];
        if (s < 0 || (unsigned long long)s >= rows_x)
            atomicExch(bad, 1);
    }
    unsigned long long a = (unsigned long long)x | (unsigned long long)y | row_bytes;
    if (row_bytes == 0)
        return;
    if ((a & 7u) == 0)
        tq_gather_words((const unsigned long long *)x, idx, (unsigned long long *)y, rows_y, rows_x,
                        row_bytes / 8);
    else if ((a & 3u) == 0)
        tq_gather_words((const unsigned *)x, idx, (unsigned *)y, rows_y, rows_x, row_bytes / 4);
    else
        tq_gather_words(x, idx, y, rows_y, rows_x, row_bytes);
}
