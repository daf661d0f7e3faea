/* matmul.cu: C[z] = alpha op(A[z]) op(B[z]) + beta C[z], row-major, tiled, as
 * kernels/vulkan/matmul.comp: each block makes a BM x 64 tile of C from
 * 16-deep slices of A and B staged in shared memory; each thread keeps a 4 x 4
 * block of sums in registers. Transposes and batches are strides, so one
 * kernel serves NN, NT, TN, TT and batches (a batch stride of 0 shares an
 * operand); an operand flagged f16 is read as f16 bits and widened exactly as
 * it is staged, so the sums are those of the operands' values.
 *
 * Every C element is ONE chain acc = fmaf(a_ip, b_pj, acc) over p = 0..k-1 in
 * order from acc = 0, whatever the tiling, the block size or the grid: a
 * product cut into row batches gives the same bytes (tq_op_rowprod relies on
 * it). The block's threads form a 16-wide grid of TY = threads/16 rows (any
 * block of a multiple of 64 threads up to 1024: TY from 4 to 64), so a tile is
 * BM = 4 TY rows (64 for the host's 256 threads) by BN = 64 columns. Tiles are
 * visited grid-stride (x over n, y over m, z over the batch), so any grid is
 * right; a grid of (ceil(n/64), ceil(m/BM), batch) gives each block one tile. */
#include "compat.h"
#include "common.cuh"

#define TQ_MM_TX 16                      /* threads across a tile */
#define TQ_MM_BN (TQ_MM_TX * 4)          /* tile columns */
#define TQ_MM_BK 16                      /* depth of a staged slice */
#define TQ_MM_BM_MAX (TQ_MAX_BLOCK / TQ_MM_TX * 4) /* tile rows at 1024 threads */

/* element i of an f32 or f16 array, as f32 (exact) */
static __device__ __forceinline__ float tq_mm_load(const void *p, long long i, int f16)
{
    return f16 ? tq_f16_f32(((const unsigned short *)p)[i]) : ((const float *)p)[i];
}

extern "C" __global__ void tq_k_matmul(const void *a, const void *b, float *c, int m, int n, int k, int trans_a, int trans_b, int a_f16, int b_f16, float alpha, float beta, long long stride_a, long long stride_b, long long stride_c)
{
    /* +1: the compute loop reads columns of these, conflict-free */
    __shared__ float As[TQ_MM_BK][TQ_MM_BM_MAX + 1];
    __shared__ float Bs[TQ_MM_BK][TQ_MM_BN + 1];
    const unsigned nt = blockDim.x * blockDim.y * blockDim.z;
    const unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    const unsigned TY = nt / TQ_MM_TX, BM = TY * 4;
    const unsigned tx = t % TQ_MM_TX, ty = t / TQ_MM_TX;
    const long long tiles_m = ((long long)m + BM - 1) / BM, tiles_n = ((long long)n + TQ_MM_BN - 1) / TQ_MM_BN;
    /* op(A)[i,p] = A[i * ars + p * acs]; op(B)[p,j] = B[p * brs + j * bcs] */
    const long long ars = trans_a ? 1 : k, acs = trans_a ? m : 1;
    const long long brs = trans_b ? 1 : n, bcs = trans_b ? k : 1;
    const long long z = blockIdx.z; /* the batch: grid.z is the batch count */
    const void *az = a_f16 ? (const void *)((const unsigned short *)a + z * stride_a)
                           : (const void *)((const float *)a + z * stride_a);
    const void *bz = b_f16 ? (const void *)((const unsigned short *)b + z * stride_b)
                           : (const void *)((const float *)b + z * stride_b);
    float *cz = c + z * stride_c;
    /* the loop bounds depend only on the block: the barriers inside are
     * reached by every thread, those past TY rows (none for a multiple of 16
     * threads) included */
    for (long long tm = blockIdx.y; tm < tiles_m; tm += gridDim.y)
        for (long long tn = blockIdx.x; tn < tiles_n; tn += gridDim.x) {
            const long long i0 = tm * BM, j0 = tn * TQ_MM_BN;
            float acc[4][4];
            for (int r = 0; r < 4; r++)
                for (int q = 0; q < 4; q++)
                    acc[r][q] = 0.0f;
            for (long long p0 = 0; p0 < k; p0 += TQ_MM_BK) {
                /* stage BM x BK of op(A) and BK x BN of op(B), zero past the
                 * edges; consecutive threads read consecutive addresses */
                for (unsigned e = t; e < BM * TQ_MM_BK; e += nt) {
                    unsigned ii = trans_a ? e % BM : e / TQ_MM_BK;
                    unsigned pp = trans_a ? e / BM : e % TQ_MM_BK;
                    long long i = i0 + ii, p = p0 + pp;
                    As[pp][ii] = i < m && p < k ? tq_mm_load(az, i * ars + p * acs, a_f16) : 0.0f;
                }
                for (unsigned e = t; e < TQ_MM_BN * TQ_MM_BK; e += nt) {
                    unsigned jj = trans_b ? e / TQ_MM_BK : e % TQ_MM_BN;
                    unsigned pp = trans_b ? e % TQ_MM_BK : e / TQ_MM_BN;
                    long long j = j0 + jj, p = p0 + pp;
                    Bs[pp][jj] = j < n && p < k ? tq_mm_load(bz, p * brs + j * bcs, b_f16) : 0.0f;
                }
                __syncthreads();
                /* only the slice's real depth: each sum stays the chain over
                 * p = 0..k-1 in order, with no padding terms */
                unsigned pe = k - p0 < TQ_MM_BK ? (unsigned)(k - p0) : TQ_MM_BK;
                if (ty < TY)
                    for (unsigned pp = 0; pp < pe; pp++) {
                        float av[4], bv[4];
                        for (int r = 0; r < 4; r++)
                            av[r] = As[pp][ty + r * TY];
                        for (int q = 0; q < 4; q++)
                            bv[q] = Bs[pp][tx + q * TQ_MM_TX];
                        for (int r = 0; r < 4; r++)
                            for (int q = 0; q < 4; q++)
                                acc[r][q] = fmaf(av[r], bv[q], acc[r][q]);
                    }
                __syncthreads();
            }
            if (ty >= TY)
                continue;
            for (int r = 0; r < 4; r++) {
                long long i = i0 + ty + r * TY;
                if (i >= m)
                    continue;
                for (int q = 0; q < 4; q++) {
                    long long j = j0 + tx + q * TQ_MM_TX;
                    if (j >= n)
                        continue;
                    float *at = cz + i * n + j;
                    /* beta == 0 ignores C, NaN and all, and alpha == 0 ignores
                     * the product, as BLAS and lib/cpu/matmul.c do */
                    float v;
                    if (beta == 0.0f)
                        v = alpha == 0.0f ? 0.0f : alpha * acc[r][q];
                    else if (alpha == 0.0f)
                        v = beta * *at;
                    else
                        v = fmaf(alpha, acc[r][q], beta * *at);
                    *at = v;
                }
            }
        }
}
