/* emu_state.h: what the kernel side (emu_kernel.h, C++) and the block
 * scheduler (sched.c, C) share: the state of the running GPU thread and block,
 * the warp-op entry point, and the shape of a kernel registry entry. C and C++
 * both include it, so it is plain C. */
#ifndef TQ_EMU_STATE_H
#define TQ_EMU_STATE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct { unsigned x, y, z; } tq_emu_uint3;

/* Warp operations, the `op` of tq_emu_warp(). */
enum { TQ_EMU_SHFL_XOR = 1, TQ_EMU_SHFL_DOWN, TQ_EMU_SHFL_UP, TQ_EMU_SHFL, TQ_EMU_BALLOT,
       TQ_EMU_ANY, TQ_EMU_ALL, TQ_EMU_SYNCWARP };

/* One GPU thread of the running block. */
struct tq_emu_thread {
    tq_emu_uint3 idx;          /* threadIdx */
    unsigned linear;           /* x + y*bx + z*bx*by */
    int state;                 /* sched.c's T_* */
    const char *site;          /* "file:line" of the barrier or warp op it waits at */
    int op;                    /* TQ_EMU_* while waiting at a warp op */
    int arg;                   /* lane mask, delta or source lane of that op */
    unsigned long long val;    /* the value it contributes */
    unsigned long long result; /* what the op hands back */
    struct tq_sd_worker *worker; /* the fiber running it, NULL before it starts */
};

/* The running block, one per OS thread that runs kernels. */
struct tq_emu_block {
    tq_emu_uint3 block_idx, block_dim, grid_dim;
    int warp_size;      /* 32 through the CUDA entry points, 64 through HIP's */
    void *dyn_shared;   /* sharedMemBytes of the launch, aligned to 16 */
};

/* Thread-local: one OS thread runs one block's fibers at a time. Kernels read
 * them at every threadIdx / blockIdx: the initial-exec model makes that one
 * load instead of a __tls_get_addr call (they are small enough for the static
 * TLS space glibc keeps for dlopen'ed libraries). */
#define TQ_EMU_TLS __attribute__((tls_model("initial-exec"), visibility("hidden")))
extern __thread struct tq_emu_thread *tq_emu_cur TQ_EMU_TLS;
extern __thread struct tq_emu_block tq_emu_blk TQ_EMU_TLS;

/* Suspends the calling GPU thread until every lane of its warp reached a warp
 * op (then returns the op's result for this lane) or, for op 0, until every
 * live thread of the block reached __syncthreads. Fails the launch (and never
 * returns) on a mismatch. */
unsigned long long tq_emu_wait(int op, unsigned long long val, int arg, const char *site);

/* A kernel of the registry: its name, the kernel itself, and an invoker that
 * calls it with the arguments unpacked from a buffer laid out as the CUDA
 * launch API packs them (each at its natural alignment). */
typedef void (*tq_emu_fn)(void);
struct tq_emu_kernel {
    const char *name;
    tq_emu_fn fn;
    void (*invoke)(tq_emu_fn fn, const unsigned char *args);
    size_t args_size;      /* packed size, rounded up to the largest alignment */
    unsigned nparams;
    const size_t *offsets; /* nparams offsets into the buffer */
    const size_t *sizes;   /* nparams sizes */
};

/* The generated registry: tables of kernels, each ended by a NULL name, the
 * list ended by NULL. */
extern const struct tq_emu_kernel *const tq_emu_registry[];

#ifdef __cplusplus
}
#endif
#endif
