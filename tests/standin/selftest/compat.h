/* compat.h (self-tests only): the kernel-side names the self-test kernels use,
 * for the stand-in (TQ_EMU: emu_kernel.h) and, so that these kernels stay
 * real CUDA C, for nvcc and hipcc. The product's own compat.h is
 * kernels/cuda/compat.h; this one exists so that the stand-in's tests do not
 * depend on it. */
#ifndef TQ_SELFTEST_COMPAT_H
#define TQ_SELFTEST_COMPAT_H

#ifdef TQ_EMU
#include "emu_kernel.h"
#else
#ifdef __HIPCC__
#include <hip/hip_runtime.h>
#define tq_shfl_xor(v, m) __shfl_xor((v), (m))
#define tq_shfl_down(v, d) __shfl_down((v), (d))
#define tq_shfl_up(v, d) __shfl_up((v), (d))
#define tq_shfl(v, l) __shfl((v), (l))
#define tq_ballot(p) ((unsigned long long)__ballot(p))
#define tq_any(p) __any(p)
#define tq_all(p) __all(p)
#define tq_syncwarp() __builtin_amdgcn_wave_barrier()
#else
#define tq_shfl_xor(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define tq_shfl_down(v, d) __shfl_down_sync(0xffffffffu, (v), (d))
#define tq_shfl_up(v, d) __shfl_up_sync(0xffffffffu, (v), (d))
#define tq_shfl(v, l) __shfl_sync(0xffffffffu, (v), (l))
#define tq_ballot(p) ((unsigned long long)__ballot_sync(0xffffffffu, (p)))
#define tq_any(p) __any_sync(0xffffffffu, (p))
#define tq_all(p) __all_sync(0xffffffffu, (p))
#define tq_syncwarp() __syncwarp()
#endif
extern __shared__ __align__(16) unsigned char tq_dyn_shared_[];
#define TQ_DYN_SHARED(T, name) T *name = (T *)tq_dyn_shared_
static __device__ __forceinline__ int tq_lane(void)
{
    return (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) %
                 warpSize);
}
#endif
#endif
