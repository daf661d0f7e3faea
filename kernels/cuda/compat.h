/* compat.h: the few names that differ between CUDA (nvcc), ROCm (hipcc) and
 * the tests' stand-in driver (host C++, tests/standin/emu_kernel.h), so that
 * one kernel source serves all three. Kernels use only what this header and
 * plain CUDA C give: the tq_* warp operations below work over the whole warp,
 * whatever its width (32 on NVIDIA and RDNA, 64 on CDNA): never assume 32. */
#ifndef TQ_KERNEL_COMPAT_H
#define TQ_KERNEL_COMPAT_H

#if defined(TQ_EMU)
#include "emu_kernel.h"

#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
/* HIP's warp operations take no mask: every lane of the wavefront joins. */
#define TQ_DYN_SHARED(T, name) extern __shared__ T name[]
template <typename T> __device__ __forceinline__ T tq_shfl_xor(T v, int m) { return __shfl_xor(v, m); }
template <typename T> __device__ __forceinline__ T tq_shfl_down(T v, unsigned d) { return __shfl_down(v, d); }
template <typename T> __device__ __forceinline__ T tq_shfl_up(T v, unsigned d) { return __shfl_up(v, d); }
template <typename T> __device__ __forceinline__ T tq_shfl(T v, int s) { return __shfl(v, s); }
__device__ __forceinline__ unsigned long long tq_ballot(int p) { return __ballot(p); }
__device__ __forceinline__ int tq_any(int p) { return __any(p); }
__device__ __forceinline__ int tq_all(int p) { return __all(p); }
__device__ __forceinline__ void tq_syncwarp(void) {}

#else /* CUDA */
#define TQ_DYN_SHARED(T, name) extern __shared__ __align__(16) T name[]
#define TQ_FULL 0xffffffffu
template <typename T> __device__ __forceinline__ T tq_shfl_xor(T v, int m) { return __shfl_xor_sync(TQ_FULL, v, m); }
template <typename T> __device__ __forceinline__ T tq_shfl_down(T v, unsigned d) { return __shfl_down_sync(TQ_FULL, v, d); }
template <typename T> __device__ __forceinline__ T tq_shfl_up(T v, unsigned d) { return __shfl_up_sync(TQ_FULL, v, d); }
template <typename T> __device__ __forceinline__ T tq_shfl(T v, int s) { return __shfl_sync(TQ_FULL, v, s); }
__device__ __forceinline__ unsigned long long tq_ballot(int p) { return __ballot_sync(TQ_FULL, p); }
__device__ __forceinline__ int tq_any(int p) { return __any_sync(TQ_FULL, p); }
__device__ __forceinline__ int tq_all(int p) { return __all_sync(TQ_FULL, p); }
__device__ __forceinline__ void tq_syncwarp(void) { __syncwarp(); }
#endif

/* Full unrolling of a loop of constant trip count, so that register arrays
 * indexed by its counter stay in registers (g++ for the stand-in: none). */
#if defined(TQ_EMU)
#define TQ_UNROLL
#else
#define TQ_UNROLL _Pragma("unroll")
#endif

#if !defined(TQ_EMU)
__device__ __forceinline__ int tq_lane(void)
{
    return (int)((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) % warpSize;
}
#endif

/* The most threads a block of ours has: shared arrays of one slot per warp
 * are sized for the narrowest warp (32), so they fit any width. */
#define TQ_MAX_BLOCK 1024
#define TQ_MAX_WARPS (TQ_MAX_BLOCK / 32)

/* f16 and bf16 by their bits (no cuda_fp16.h: the same code on every
 * compiler), round to nearest even, NaN kept quiet: as lib/stream/dtype.c does. */
__device__ __forceinline__ float tq_f16_f32(unsigned short h)
{
    unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) /* subnormal or zero: m * 2^-24 is exact */
        return __uint_as_float(__float_as_uint((float)m * 5.9604644775390625e-8f) | sign);
    if (e == 31) /* infinity, or NaN made quiet */
        return __uint_as_float(sign | 0x7f800000u | (m ? 0x400000u : 0u) | (m << 13));
    return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

__device__ __forceinline__ unsigned short tq_f32_f16(float f)
{
    unsigned u = __float_as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, top mantissa bits kept */
        return (unsigned short)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* rounds to 65520 or more: infinity */
        return (unsigned short)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: adding 0.5 rounds at the subnormal place */
        float g = __uint_as_float(a) + 0.5f;
        return (unsigned short)(sign | (__float_as_uint(g) - 0x3f000000u));
    }
    a += 0xc8000fffu + ((a >> 13) & 1u); /* rebias the exponent, round to even */
    return (unsigned short)(sign | (a >> 13));
}

__device__ __forceinline__ float tq_bf16_f32(unsigned short h)
{
    unsigned u = (unsigned)h << 16;
    return __uint_as_float((u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u : u);
}

__device__ __forceinline__ unsigned short tq_f32_bf16(float f)
{
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (unsigned short)((u >> 16) | 0x40u);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif
