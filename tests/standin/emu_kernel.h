/* emu_kernel.h: the kernel side of the GPU stand-in. It makes the subset of
 * CUDA C that the kernels of kernels/cuda use compile as host C++17 (g++ -DTQ_EMU) and
 * behave as on a GPU when the stand-in runs each GPU thread as a fiber:
 * qualifiers, built-in indices, shared memory, barriers, warp ops (tq_*),
 * atomics and device math. Anything outside the list in
 * tests/standin/README.md is deliberately missing, so a kernel that needs more
 * fails to compile here before it fails on a GPU. */
#ifndef TQ_EMU_KERNEL_H
#define TQ_EMU_KERNEL_H

/* Every system header first: the qualifier macros below (__noinline__ above
 * all) would break the attributes libstdc++ spells with the same names. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <cmath>
#include <type_traits>

#include "emu_state.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
/* One block runs at a time in the whole process (kernels run under the
 * stand-in's lock), so a static is exactly the storage of one block; and ASan
 * puts redzones around statics, not around thread-locals, so an out-of-bounds
 * access to a shared array is reported. */
#define __shared__ static
#define TQ_DYN_SHARED(T, name) T *name = (T *)tq_emu_blk.dyn_shared

typedef tq_emu_uint3 uint3;
/* CUDA's vector type of four floats, 16-byte aligned as there: a float4 load
 * from an address that is not is undefined (UBSan reports it under SAN=1) */
struct alignas(16) float4 {
    float x, y, z, w;
};
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    dim3(tq_emu_uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

#define threadIdx (tq_emu_cur->idx)
#define blockIdx (tq_emu_blk.block_idx)
#define blockDim (tq_emu_blk.block_dim)
#define gridDim (tq_emu_blk.grid_dim)
#define warpSize (tq_emu_blk.warp_size)

#define TQ_EMU_STR2(x) #x
#define TQ_EMU_STR(x) TQ_EMU_STR2(x)
/* A call site's identity: waits at different sites must not pair up. */
#define TQ_EMU_SITE __FILE__ ":" TQ_EMU_STR(__LINE__)

#define __syncthreads() ((void)tq_emu_wait(0, 0, 0, TQ_EMU_SITE))
/* Fibers share one OS thread: every store is visible to the next fiber, and
 * the atomics below are sequentially consistent; a fence is a compiler barrier. */
#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __threadfence_block() __atomic_thread_fence(__ATOMIC_SEQ_CST)

/* ---- warp ops: over the whole warp (width = warpSize) ---- */
template <typename T> static inline unsigned long long tq_emu_bits(T v)
{
    static_assert(std::is_arithmetic<T>::value && sizeof(T) <= 8, "warp ops take scalars");
    unsigned long long u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}
template <typename T> static inline T tq_emu_from_bits(unsigned long long u)
{
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}
template <typename T> static inline T tq_emu_shfl_op(int op, T v, int arg, const char *site)
{
    return tq_emu_from_bits<T>(tq_emu_wait(op, tq_emu_bits(v), arg, site));
}
#define tq_shfl_xor(v, m) tq_emu_shfl_op(TQ_EMU_SHFL_XOR, (v), (int)(m), TQ_EMU_SITE)
#define tq_shfl_down(v, d) tq_emu_shfl_op(TQ_EMU_SHFL_DOWN, (v), (int)(d), TQ_EMU_SITE)
#define tq_shfl_up(v, d) tq_emu_shfl_op(TQ_EMU_SHFL_UP, (v), (int)(d), TQ_EMU_SITE)
#define tq_shfl(v, l) tq_emu_shfl_op(TQ_EMU_SHFL, (v), (int)(l), TQ_EMU_SITE)
#define tq_ballot(p) ((unsigned long long)tq_emu_wait(TQ_EMU_BALLOT, (p) != 0, 0, TQ_EMU_SITE))
#define tq_any(p) ((int)tq_emu_wait(TQ_EMU_ANY, (p) != 0, 0, TQ_EMU_SITE))
#define tq_all(p) ((int)tq_emu_wait(TQ_EMU_ALL, (p) != 0, 0, TQ_EMU_SITE))
#define tq_syncwarp() ((void)tq_emu_wait(TQ_EMU_SYNCWARP, 0, 0, TQ_EMU_SITE))
static inline int tq_lane(void) { return (int)(tq_emu_cur->linear % (unsigned)warpSize); }

/* ---- atomics: real ones, so they stay right if blocks ever run on several
 * OS threads ---- */
template <typename T, typename F> static inline T tq_emu_atomic_rmw(T *p, F f)
{
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(p, &old, f(old), false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
    }
    return old;
}
/* floats go through their bit patterns: the __atomic builtins take integers */
template <typename T, typename U> static inline T tq_emu_atomic_fadd(T *p, T v)
{
    U *q = (U *)p, old = __atomic_load_n(q, __ATOMIC_SEQ_CST), upd;
    T f;
    do {
        memcpy(&f, &old, sizeof f);
        f += v;
        memcpy(&upd, &f, sizeof f);
    } while (!__atomic_compare_exchange_n(q, &old, upd, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST));
    memcpy(&f, &old, sizeof f);
    return f;
}
#define TQ_EMU_ADD_SUB(T)                                                                  \
    static inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
TQ_EMU_ADD_SUB(int)
TQ_EMU_ADD_SUB(unsigned)
TQ_EMU_ADD_SUB(unsigned long long)
static inline float atomicAdd(float *p, float v) { return tq_emu_atomic_fadd<float, uint32_t>(p, v); }
static inline double atomicAdd(double *p, double v) { return tq_emu_atomic_fadd<double, uint64_t>(p, v); }
static inline int atomicSub(int *p, int v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned atomicSub(unsigned *p, unsigned v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
#define TQ_EMU_MINMAX(T)                                                                   \
    static inline T atomicMax(T *p, T v)                                                   \
    {                                                                                      \
        return tq_emu_atomic_rmw(p, [v](T o) { return o > v ? o : v; });                   \
    }                                                                                      \
    static inline T atomicMin(T *p, T v)                                                   \
    {                                                                                      \
        return tq_emu_atomic_rmw(p, [v](T o) { return o < v ? o : v; });                   \
    }
TQ_EMU_MINMAX(int)
TQ_EMU_MINMAX(unsigned)
TQ_EMU_MINMAX(long long)
TQ_EMU_MINMAX(unsigned long long)
#define TQ_EMU_CAS_EXCH_BITS(T)                                                            \
    static inline T atomicCAS(T *p, T cmp, T v)                                            \
    {                                                                                      \
        __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
        return cmp;                                                                        \
    }                                                                                      \
    static inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
TQ_EMU_CAS_EXCH_BITS(int)
TQ_EMU_CAS_EXCH_BITS(unsigned)
TQ_EMU_CAS_EXCH_BITS(unsigned long long)
static inline float atomicExch(float *p, float v)
{
    uint32_t u, o;
    memcpy(&u, &v, 4);
    o = __atomic_exchange_n((uint32_t *)p, u, __ATOMIC_SEQ_CST);
    memcpy(&v, &o, 4);
    return v;
}
#define TQ_EMU_OR_AND(T)                                                                   \
    static inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); } \
    static inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
TQ_EMU_OR_AND(int)
TQ_EMU_OR_AND(unsigned)

/* ---- device math: <math.h> gives the float functions; these are CUDA's own ---- */
/* Double arithmetic rounded once per operation, never fused: the emulation
 * is compiled without contraction of its own (see the Makefile's
 * STANDIN_KFLAGS), so the plain operators round as these intrinsics do. */
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline long long __double_as_longlong(double d) { long long l; memcpy(&l, &d, 8); return l; }
static inline double __longlong_as_double(long long l) { double d; memcpy(&d, &l, 8); return d; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
#define TQ_EMU_MIN_MAX(T)                                                                  \
    static inline T min(T a, T b) { return a < b ? a : b; }                                \
    static inline T max(T a, T b) { return a > b ? a : b; }
TQ_EMU_MIN_MAX(int)
TQ_EMU_MIN_MAX(unsigned)
TQ_EMU_MIN_MAX(long long)
TQ_EMU_MIN_MAX(unsigned long long)
/* floats as fminf/fmaxf: a NaN loses, as on a GPU */
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
/* mixed signedness compares as unsigned, as CUDA's overloads do */
static inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
static inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
static inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
using std::isfinite;
using std::isinf;
using std::isnan;

#endif
