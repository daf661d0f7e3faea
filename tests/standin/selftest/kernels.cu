/* kernels.cu: the stand-in's self-test kernels, real CUDA C in the subset
 * kernels/cuda may use: reductions with __syncthreads and shared memory, warp
 * reductions, a tiled matrix product in dynamic shared memory, atomics, and
 * kernels with bugs planted on purpose (a missing barrier, a 32-lane warp
 * assumption, an out-of-bounds write, barriers at different places). */
#include "compat.h"

/* Sum of each block's 256-element slice: the textbook tree in shared memory. */
extern "C" __global__ void tq_k_st_block_sum(const float *__restrict__ x, float *out, int n)
{
    __shared__ float s[256];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < (unsigned)n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride)
            s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

/* The same with the barrier inside the loop missing: a planted race. */
extern "C" __global__ void tq_k_st_block_sum_nosync(const float *__restrict__ x, float *out, int n)
{
    __shared__ float s[256];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < (unsigned)n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride)
            s[t] += s[t + stride];
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

/* Warp reduction sized by warpSize: right for 32 and 64 lanes. */
extern "C" __global__ void tq_k_st_warp_sum(const float *__restrict__ x, float *out, int n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < (unsigned)n ? x[i] : 0.0f;
    for (int o = warpSize / 2; o > 0; o /= 2)
        v += tq_shfl_xor(v, o);
    if (tq_lane() == 0)
        atomicAdd(out, v);
}

/* The planted warp-size assumption: offsets for 32 lanes. */
extern "C" __global__ void tq_k_st_warp_sum32(const float *__restrict__ x, float *out, int n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < (unsigned)n ? x[i] : 0.0f;
    for (int o = 16; o > 0; o /= 2)
        v += tq_shfl_xor(v, o);
    if (tq_lane() == 0)
        atomicAdd(out, v);
}

/* C = A B, row-major, 16x16 tiles of A and B in dynamic shared memory. */
extern "C" __global__ void tq_k_st_matmul(const float *A, const float *B, float *C, int M, int N,
                                          int K)
{
    TQ_DYN_SHARED(float, tile);
    float *ta = tile, *tb = tile + 16 * 16;
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        ta[ty * 16 + tx] = row < M && k0 + tx < K ? A[row * K + k0 + tx] : 0.0f;
        tb[ty * 16 + tx] = k0 + ty < K && col < N ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; k++)
            acc = fmaf(ta[ty * 16 + k], tb[k * 16 + tx], acc);
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}

/* Touches `bytes` of dynamic shared memory: for the shared-memory limits. */
extern "C" __global__ void tq_k_st_touch_shared(unsigned bytes, unsigned *out)
{
    TQ_DYN_SHARED(unsigned char, sh);
    for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x)
        sh[i] = (unsigned char)i;
    __syncthreads();
    if (threadIdx.x == 0)
        out[0] = sh[bytes - 1];
}

/* Histogram and extrema with atomics. */
extern "C" __global__ void tq_k_st_atomics(const int *x, int n, int *bins, unsigned *maxv,
                                           int *minv, float *fsum, unsigned long long *count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    atomicAdd(&bins[x[i] & 15], 1);
    atomicMax(maxv, (unsigned)x[i]);
    atomicMin(minv, x[i]);
    atomicAdd(fsum, 0.5f);
    atomicAdd(count, 1ull);
    int old = atomicCAS(&bins[16], 0, i + 1); /* the first thread to get here marks it */
    (void)old;
}

/* Per-lane results of every warp op, checked against the host's own model. */
extern "C" __global__ void tq_k_st_warp_ops(int *out)
{
    int t = threadIdx.x, lane = tq_lane();
    int *o = out + t * 8;
    o[0] = tq_shfl_xor(t, 1);
    o[1] = tq_shfl_down(t, 3);
    o[2] = tq_shfl_up(t, 5);
    o[3] = tq_shfl(t, 7);
    unsigned long long b = tq_ballot(lane % 3 == 0);
    o[4] = (int)(b & 0xffffffffu);
    o[5] = (int)(b >> 32);
    o[6] = tq_any(t == 40);
    o[7] = tq_all(lane < 1000) + 2 * tq_all(lane != 5);
    tq_syncwarp();
}

/* Writes one element past the end: for ASan. */
extern "C" __global__ void tq_k_st_oob(float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n)
        out[i] = 1.0f;
}

/* Arguments of mixed sizes and alignments: char at 0, double at 8, int at 16,
 * short at 20, pointer at 24; 32 bytes. */
extern "C" __global__ void tq_k_st_args(char c, double d, int i, short s, double *out)
{
    if (threadIdx.x == 0)
        out[0] = c + d + i + s;
}

/* Half the threads wait at one barrier, half at another: a launch failure. */
extern "C" __global__ void tq_k_st_diverge(float *out)
{
    if (threadIdx.x < 32) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1.0f;
}

extern "C" __global__ void tq_k_st_scale(float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= a;
}

/* Many barriers in a row: for the cost of a fiber switch. */
extern "C" __global__ void tq_k_st_barriers(int rounds, int *out)
{
    int v = 0;
    for (int r = 0; r < rounds; r++) {
        v += r;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[0] = v;
}

/* A lane leaves before its warp's shuffle: a launch failure (the full-warp
 * shuffle would wait for it forever on a GPU, or read garbage). */
extern "C" __global__ void tq_k_st_warp_exit(float *out)
{
    if (threadIdx.x == 3)
        return;
    out[threadIdx.x] = tq_shfl_xor(1.0f, 1);
}

/* Half a warp at a shuffle, half at a barrier: a launch failure. */
extern "C" __global__ void tq_k_st_warp_mixed(float *out)
{
    if (tq_lane() < 16)
        out[threadIdx.x] = tq_shfl_down(1.0f, 1);
    else
        __syncthreads();
}

/* Indexes a shared array one past its end: for ASan. */
extern "C" __global__ void tq_k_st_shared_oob(float *out)
{
    __shared__ float s[64];
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[0] = s[0];
}
