/* amx.c: the CPU's AMX tiles (Intel Sapphire Rapids and later): whether this
 * process may use them, asked once, the one tile layout that the bf16 and
 * int8 products share (amx_gemm.c drives it), and tq-bench's ceiling.
 *
 * Linux gives a process the tiles' 8 KiB of register state only when it asks
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, Linux 5.16 on; the kernel's
 * Documentation/arch/x86/xstate.rst); before that, a tile instruction is a
 * SIGILL. The permission is the whole process's, so one request serves every
 * thread. A refusal (an older kernel, a seccomp filter) leaves the AVX-512
 * kernels in charge, and tq_cpu_amx_describe says why.
 *
 * One TDPBF16PS multiplies a 16 x 32 bf16 tile by a 32 x 16 one into 16 x 16
 * f32 sums, one TDPBSUD a 16 x 64 int8 tile by a 64 x 16 one into int32 sums:
 * 8192 and 16384 multiply-adds an instruction, against VDPBF16PS's 32 and
 * VPDPBUSD's 64. The operands are the AVX-512 kernels' packed B (both put a
 * column's pair or quad of k in one 32-bit word, 32 columns a 128-byte row of
 * the strip: a B tile is 16 such half rows) and 16 of A's rows, 64 bytes of
 * k each. */
#include "../internal.h"
#include "gemm.h"

#include <errno.h>
#include <pthread.h>

#if defined(__x86_64__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TQ_AMX_X86 1
#define TQ_TARGET_AMX __attribute__((target("amx-tile,amx-bf16,amx-int8")))
/* arch/x86/include/uapi/asm/prctl.h and the XSAVE feature number of
 * XTILEDATA (Intel SDM vol. 1, 13.1), not in every libc's headers */
enum { TQ_ARCH_REQ_XCOMP_PERM = 0x1023, TQ_XFEATURE_XTILEDATA = 18 };
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int usable;      /* TQ_AMX_BF16 | TQ_AMX_INT8: present and permitted */
static char why[200];   /* why not, for tq_cpu_amx_describe */
static int disabled;    /* tq_cpu_amx_disable: the tests' and tq-bench's switch */

static void probe(void)
{
#ifdef TQ_AMX_X86
    __builtin_cpu_init();
    /* the epilogues are AVX-512 (BW for the int8 one's masks) */
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("avx512f") ||
        !__builtin_cpu_supports("avx512bw")) {
        snprintf(why, sizeof why, "no AMX");
        return;
    }
    int has = (__builtin_cpu_supports("amx-bf16") ? TQ_AMX_BF16 : 0) |
              (__builtin_cpu_supports("amx-int8") ? TQ_AMX_INT8 : 0);
    /* TQ_AMX=0: the AVX-512 kernels on such a CPU too (their bf16 sums round
     * otherwise: the bits of a machine without AMX, and a comparison) */
    const char *env = getenv("TQ_AMX");
    if (env && !strcmp(env, "0")) {
        snprintf(why, sizeof why, "AMX off (TQ_AMX=0): AVX-512");
        return;
    }
    if (syscall(SYS_arch_prctl, TQ_ARCH_REQ_XCOMP_PERM, TQ_XFEATURE_XTILEDATA) != 0) {
        snprintf(why, sizeof why, "AMX tiles refused by the kernel (arch_prctl: %s): AVX-512",
                 strerror(errno));
        return;
    }
    usable = has;
#else
    snprintf(why, sizeof why, "no AMX");
#endif
}

int tq_cpu_amx_supported(int kinds)
{
    pthread_once(&once, probe);
    return (usable & kinds) == kinds && kinds;
}

int tq_cpu_amx_use(int kinds)
{
    return tq_cpu_amx_supported(kinds) && !__atomic_load_n(&disabled, __ATOMIC_RELAXED);
}

void tq_cpu_amx_disable(int off) { __atomic_store_n(&disabled, off, __ATOMIC_RELAXED); }

void tq_cpu_amx_describe(char *out, size_t n)
{
    pthread_once(&once, probe);
    if (!usable)
        snprintf(out, n, "%s", why);
    else
        snprintf(out, n, "AMX %s tiles%s",
                 usable == (TQ_AMX_BF16 | TQ_AMX_INT8) ? "bf16 and int8"
                 : usable == TQ_AMX_BF16               ? "bf16"
                                                       : "int8",
                 __atomic_load_n(&disabled, __ATOMIC_RELAXED) ? " (off)" : "");
}

#ifdef TQ_AMX_X86
/* palette 1: 8 tiles, each 16 rows of 64 bytes (Intel SDM vol. 1, 3.2.1's
 * TILECFG layout): 0-3 C's four 16 x 16 quarters, 4-5 A's two row halves,
 * 6-7 B's two column halves */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tq_tilecfg;

/* static: GCC 12 drops the stores to a configuration on the stack before
 * LDTILECFG, whose builtin it does not see read them (a SIGSEGV then) */
static const tq_tilecfg tilecfg = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

TQ_TARGET_AMX void tq_cpu_amx_begin(void) { _tile_loadconfig(&tilecfg); }

/* the tiles back to their initial state: the thread's context switches then
 * save none of their 8 KiB */
TQ_TARGET_AMX void tq_cpu_amx_end(void) { _tile_release(); }

/* tq-bench's AMX ceiling: rounds of 4 independent tile products on tiles
 * loaded once (no memory traffic: the tiles' rate alone), the multiply-adds
 * done returned. Values small and exact, so no sum overflows. */
TQ_TARGET_AMX double tq_cpu_amx_peak(int kind, int64_t rounds)
{
    unsigned char ops[16 * 64];
    for (size_t i = 0; i < sizeof ops; i++) /* bf16 1.0 pairs, or int8 1s */
        ops[i] = kind == TQ_AMX_BF16 ? (i % 2 ? 0x3f : 0x80) : 1;
    tq_cpu_amx_begin();
    _tile_loadd(4, ops, 64);
    _tile_loadd(5, ops, 64);
    _tile_loadd(6, ops, 64);
    _tile_loadd(7, ops, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t r = 0; r < rounds; r++) {
        if (kind == TQ_AMX_BF16) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        } else {
            _tile_dpbsud(0, 4, 6);
            _tile_dpbsud(1, 4, 7);
            _tile_dpbsud(2, 5, 6);
            _tile_dpbsud(3, 5, 7);
        }
    }
    int32_t out[16 * 16];
    _tile_stored(0, out, 64); /* the sums used: the loop is kept */
    tq_cpu_amx_end();
    __asm__ volatile("" : : "r"(out[0]) : "memory");
    /* 16 x 16 outputs of 32 bf16 or 64 int8 products a tile */
    return (double)rounds * 4 * 16 * 16 * (kind == TQ_AMX_BF16 ? 32 : 64);
}
#else
double tq_cpu_amx_peak(int kind, int64_t rounds)
{
    (void)kind, (void)rounds;
    return 0;
}
void tq_cpu_amx_begin(void) {}
void tq_cpu_amx_end(void) {}
#endif
