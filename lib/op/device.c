/* device.c: the backend registry: which backends this build has, which devices
 * they find at run time, how --device and TQ_DEVICE choose, and the report of
 * --list-devices that says why a backend is missing. A registry: it names
 * each backend's table, and the backends open the CPU device through it for
 * their host path; that is the one way the backends and the op layer meet. */
#include "backend.h"
#include "internal.h"

#include <ctype.h>

/* Order of preference for `auto`: CUDA, HIP, a Vulkan GPU, then the CPU. */
static const struct {
    const char *name;
    const tq_backend *backend; /* NULL when not built */
} registry[] = {
#ifdef TQ_HAVE_CUDA
    {"cuda", &tq_backend_cuda},
#else
    {"cuda", NULL},
#endif
#ifdef TQ_HAVE_HIP
    {"hip", &tq_backend_hip},
#else
    {"hip", NULL},
#endif
#ifdef TQ_HAVE_VULKAN
    {"vulkan", &tq_backend_vulkan},
#else
    {"vulkan", NULL},
#endif
    {"cpu", &tq_backend_cpu},
};
#define N_REGISTRY (sizeof registry / sizeof registry[0])

static int plain_forced; /* atomic: tq_device_force_plain */
static int host_forced;  /* atomic: tq_device_force_host */

void tq_device_force_host(int on) { __atomic_store_n(&host_forced, on != 0, __ATOMIC_RELAXED); }
int tq_device_host_forced(void) { return __atomic_load_n(&host_forced, __ATOMIC_RELAXED); }

void tq_device_force_plain(int on) { __atomic_store_n(&plain_forced, on != 0, __ATOMIC_RELAXED); }
int tq_device_plain_forced(void) { return __atomic_load_n(&plain_forced, __ATOMIC_RELAXED); }

static tq_status device_make(const tq_backend *b, int index, tq_device **out)
{
    tq_device *d = calloc(1, sizeof *d);
    if (!d)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st = b->open(index, &d->ctx);
    if (st) {
        free(d);
        return tq_fail_context(st, "%s:%d", b->name, index);
    }
    d->backend = b;
    d->index = index;
    d->rank_dtype = TQ_DTYPE_F32;
    if (b->startup)
        b->startup(d->ctx, d->startup, sizeof d->startup);
    if (b->kind == TQ_BACKEND_CPU)
        snprintf(d->name, sizeof d->name, "cpu");
    else
        snprintf(d->name, sizeof d->name, "%s:%d", b->name, index);
    *out = d;
    return TQ_OK;
}

/* For auto: the devices of b that are not CPU-type, into real[] (up to 64);
 * their number, 0 when none (or the machine cannot have one). */
static int real_devices(const tq_backend *b, int *real)
{
    int n = 0, m = 0;
    if ((b->may_have_gpu && !b->may_have_gpu()) || b->probe(&n) || n <= 0)
        return 0;
    for (int i = 0; i < n && m < 64; i++) {
        tq_device_info info;
        memset(&info, 0, sizeof info);
        if (b->info(i, &info) == TQ_OK && !info.cpu_type)
            real[m++] = i;
    }
    return m;
}

/* Which of n devices this process takes: under a launcher (mpirun, srun)
 * its local rank modulo n, so that the ranks of a node spread over its
 * GPUs; else the first. Says so in why. */
static int rank_pick(int n, char *why, size_t len)
{
    const char *var = NULL;
    int r = tq_local_rank(&var);
    if (r < 0 || n <= 0)
        return 0;
    size_t at = strlen(why);
    snprintf(why + at, len - at, "%slocal rank %s=%d mod %d device%s", at ? "; " : "", var, r,
             n, n == 1 ? "" : "s");
    return r % n;
}

/* Splits "word[:N]" and finds the backend; *b = NULL for auto. */
static tq_status spec_parse(const char *spec, const tq_backend **b, int *index, int *is_auto)
{
    char word[32];
    const char *colon = strchr(spec, ':');
    size_t wl = colon ? (size_t)(colon - spec) : strlen(spec);
    if (wl >= sizeof word)
        return tq_fail(TQ_ERR_USAGE, "unknown device '%s' (auto, cpu, vulkan, cuda, hip[:N])", spec);
    memcpy(word, spec, wl);
    word[wl] = 0;
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || v < 0 || v > 1000 || !isdigit((unsigned char)colon[1]))
            return tq_fail(TQ_ERR_USAGE, "bad device index in '%s'", spec);
        *index = (int)v;
    }
    *is_auto = !strcmp(word, "auto");
    if (*is_auto) {
        if (colon)
            return tq_fail(TQ_ERR_USAGE, "'auto' takes no index");
        *b = NULL;
        return TQ_OK;
    }
    for (size_t i = 0; i < N_REGISTRY; i++) {
        if (strcmp(word, registry[i].name))
            continue;
        *b = registry[i].backend;
        if (!*b)
            return tq_fail(TQ_ERR_RUNTIME, "%s: not built into this binary", word);
        return TQ_OK;
    }
    return tq_fail(TQ_ERR_USAGE, "unknown device '%s' (auto, cpu, vulkan, cuda, hip[:N])", spec);
}

static const char *spec_or_env(const char *spec)
{
    if (!spec || !*spec)
        spec = getenv("TQ_DEVICE");
    return spec && *spec ? spec : "auto";
}

/* The device index of a named backend, checked against what it finds. */
static tq_status named_index(const tq_backend *b, int index, int *out)
{
    int n = 0;
    if (b->probe(&n))
        return tq_fail_context(TQ_ERR_RUNTIME, "%s", b->name);
    if (n <= 0)
        return tq_fail(TQ_ERR_RUNTIME, "%s: no device found", b->name);
    if (index < 0)
        index = 0;
    if (index >= n)
        return tq_fail(TQ_ERR_RUNTIME, "%s: no device %d (there %s %d)", b->name, index,
                       n == 1 ? "is" : "are", n);
    *out = index;
    return TQ_OK;
}

tq_status tq_device_check(const char *spec)
{
    const tq_backend *b;
    int index = -1, is_auto, idx;
    tq_status st = spec_parse(spec_or_env(spec), &b, &index, &is_auto);
    if (st || is_auto)
        return st;
    return named_index(b, index, &idx);
}

/* Whether auto on this machine might take a GPU, known without loading any
 * runtime (a device node, or a runtime named by the environment). */
static int auto_may_gpu(void)
{
    for (size_t i = 0; i < N_REGISTRY; i++) {
        const tq_backend *b = registry[i].backend;
        if (b && b->kind != TQ_BACKEND_CPU && (!b->may_have_gpu || b->may_have_gpu()))
            return 1;
    }
    return 0;
}

int tq_device_auto_weighs(const char *spec)
{
    const tq_backend *b;
    int index = -1, is_auto;
    if (spec_parse(spec_or_env(spec), &b, &index, &is_auto) || !is_auto)
        return 0;
    return auto_may_gpu() && tq_auto_min_flops(NULL) > 0;
}

static tq_status open_auto(double flops, tq_device **dev)
{
    char why[256] = "";
    tq_status st = TQ_OK;
    int may = auto_may_gpu();
    if (!may)
        snprintf(why, sizeof why, "no GPU device node");
    else if (tq_autopick_cpu(flops, why, sizeof why))
        goto cpu;
    for (size_t i = 0; i < N_REGISTRY; i++) {
        const tq_backend *b = registry[i].backend;
        int real[64], m;
        if (!b || b->kind == TQ_BACKEND_CPU || !(m = real_devices(b, real)))
            continue;
        int idx = real[rank_pick(m, why, sizeof why)];
        if ((st = device_make(b, idx, dev)) == TQ_OK) {
            snprintf((*dev)->why, sizeof (*dev)->why, "auto: %s (%s)", (*dev)->name, why);
            return TQ_OK;
        }
    }
    if (may) {
        size_t at = strlen(why);
        snprintf(why + at, sizeof why - at, "; no GPU opened");
    }
cpu:
    if ((st = device_make(&tq_backend_cpu, 0, dev)))
        return st == TQ_ERR_NOMEM ? st : tq_fail(TQ_ERR_RUNTIME, "no device could be opened");
    snprintf((*dev)->why, sizeof (*dev)->why, "auto: cpu (%s)", why);
    return TQ_OK;
}

tq_status tq_device_open_for(const char *spec, double flops, tq_device **dev)
{
    const tq_backend *named;
    int index = -1, is_auto;
    spec = spec_or_env(spec);
    tq_status st = spec_parse(spec, &named, &index, &is_auto);
    if (st)
        return st;
    if (is_auto)
        return open_auto(flops, dev);
    int idx, n = 0;
    char why[160] = "";
    /* cuda or hip without an index: the local rank's device; cuda:N: N */
    if (index < 0 && (named->kind == TQ_BACKEND_CUDA || named->kind == TQ_BACKEND_HIP) &&
        !named->probe(&n) && n > 0)
        index = rank_pick(n, why, sizeof why);
    if ((st = named_index(named, index, &idx)) || (st = device_make(named, idx, dev)))
        return st;
    if (!strcmp(spec, (*dev)->name)) /* as named */
        snprintf((*dev)->why, sizeof (*dev)->why, "%s", spec);
    else
        snprintf((*dev)->why, sizeof (*dev)->why, "%s: %s%s%s%s", spec, (*dev)->name,
                 why[0] ? " (" : "", why, why[0] ? ")" : "");
    return TQ_OK;
}

tq_status tq_device_open(const char *spec, tq_device **dev)
{
    return tq_device_open_for(spec, -1, dev);
}

const char *tq_device_why(const tq_device *dev) { return dev->why; }

const char *tq_device_startup(const tq_device *dev) { return dev->startup; }

void tq_device_close(tq_device *dev)
{
    if (!dev)
        return;
    dev->backend->close(dev->ctx);
    free(dev);
}

tq_backend_kind tq_device_backend(const tq_device *dev) { return dev->backend->kind; }

int tq_device_native_product(const tq_device *dev, tq_dtype dt)
{
    const tq_backend *b = dev ? dev->backend : &tq_backend_cpu;
    return b->native_product && b->native_product(dt);
}
const char *tq_device_name(const tq_device *dev) { return dev->name; }

tq_status tq_device_set_rank_precision(tq_device *dev, tq_dtype dt)
{
    if (dt != TQ_DTYPE_F32 && dt != TQ_DTYPE_BF16)
        return tq_fail(TQ_ERR_USAGE, "ranking products are f32 or bf16, not %s", tq_dtype_name(dt));
    dev->rank_dtype = dt;
    return TQ_OK;
}

/* bf16 where the device multiplies bf16 as such and its simtopk takes it:
 * the CPU (AVX512-BF16), CUDA and HIP (their BLAS's bf16 GEMM, tensor
 * cores); Vulkan ranks in f32 */
tq_dtype tq_device_rank_precision(const tq_device *dev)
{
    const tq_backend *b = dev->backend;
    int takes = b->kind == TQ_BACKEND_CPU || b->kind == TQ_BACKEND_CUDA || b->kind == TQ_BACKEND_HIP;
    return dev->rank_dtype == TQ_DTYPE_BF16 && takes && b->native_product &&
                   b->native_product(TQ_DTYPE_BF16)
               ? TQ_DTYPE_BF16
               : TQ_DTYPE_F32;
}

long long tq_device_rescored(const tq_device *dev)
{
    return __atomic_load_n(&dev->rescored, __ATOMIC_RELAXED);
}
/* The one-line description, made on first use: the CPU's names its sgemm
 * engine, which means loading OpenBLAS (~4 ms: a fifth of a small tq-train
 * run), so a process that never asks, and never multiplies big enough to
 * need it (lib/cpu/matmul.c), never pays for it. The text is a cache beside the
 * device's state; devices are described from one thread at a time. */
static void describe_make(tq_device *d)
{
    const tq_backend *b = d->backend;
    int index = d->index;
    tq_device_info info;
    memset(&info, 0, sizeof info);
    if (b->info(index, &info) == TQ_OK)
        snprintf(d->describe, sizeof d->describe, "%s: %s%s%s", d->name, info.name,
                 info.detail[0] ? ", " : "", info.detail);
    else
        snprintf(d->describe, sizeof d->describe, "%s", d->name);
    if (b->kind != TQ_BACKEND_CPU && tq_device_plain_forced()) {
        size_t n = strlen(d->describe);
        snprintf(d->describe + n, sizeof d->describe - n, " (plain shader variants forced)");
    }
}

const char *tq_device_describe(const tq_device *dev)
{
    tq_device *d = (tq_device *)dev;
    if (!d->describe[0])
        describe_make(d);
    return d->describe;
}

tq_status tq_device_sync(tq_device *dev)
{
    return dev->backend->sync ? dev->backend->sync(dev->ctx) : TQ_OK;
}

static void human_bytes(char *out, size_t n, uint64_t b)
{
    if (b >= (1ull << 30))
        snprintf(out, n, "%.1f GiB", (double)b / (double)(1ull << 30));
    else
        snprintf(out, n, "%llu MiB", (unsigned long long)(b >> 20));
}

tq_status tq_device_list(char **report)
{
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    if (!s)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    s[0] = 0;
#define ADD(...)                                                                   \
    do {                                                                           \
        int k_ = snprintf(s + len, cap - len, __VA_ARGS__);                        \
        if (k_ > 0 && (size_t)k_ >= cap - len) {                                   \
            cap = 2 * cap + (size_t)k_;                                            \
            char *n_ = realloc(s, cap);                                            \
            if (!n_) {                                                             \
                free(s);                                                           \
                return tq_fail(TQ_ERR_NOMEM, "out of memory");                    \
            }                                                                      \
            s = n_;                                                                \
            k_ = snprintf(s + len, cap - len, __VA_ARGS__);                        \
        }                                                                          \
        if (k_ > 0)                                                                \
            len += (size_t)k_;                                                     \
    } while (0)
    for (size_t i = 0; i < N_REGISTRY; i++) {
        const tq_backend *b = registry[i].backend;
        if (!b) {
            ADD("%-7s unavailable: not built into this binary\n", registry[i].name);
            continue;
        }
        int n = 0;
        tq_status st = b->probe(&n);
        if (st) {
            ADD("%-7s unavailable: %s\n", b->name, tq_errmsg());
            continue;
        }
        if (n <= 0) {
            ADD("%-7s unavailable: no device found\n", b->name);
            continue;
        }
        for (int d = 0; d < n; d++) {
            tq_device_info info;
            memset(&info, 0, sizeof info);
            if (b->info(d, &info)) {
                ADD("%s:%d  unavailable: %s\n", b->name, d, tq_errmsg());
                continue;
            }
            char mem[32] = "";
            if (info.memory)
                human_bytes(mem, sizeof mem, info.memory);
            char id[32];
            if (b->kind == TQ_BACKEND_CPU)
                snprintf(id, sizeof id, "cpu");
            else
                snprintf(id, sizeof id, "%s:%d", b->name, d);
            ADD("%-9s %s%s%s%s%s%s\n", id, info.name, info.cpu_type && b->kind != TQ_BACKEND_CPU
                                                       ? " (CPU-type device: only by name)"
                                                       : "",
                mem[0] ? ", " : "", mem, info.detail[0] ? ", " : "", info.detail);
        }
    }
#undef ADD
    *report = s;
    return TQ_OK;
}
