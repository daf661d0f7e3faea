/* ops.c: tq-bench's op table: every op of the op API (lib/tq.h), what its size
 * n means, its default sizes, the least work and memory traffic of one call
 * (for the rates and the roofline bound), and how --check compares it with
 * the CPU. The instances hold seeded random inputs on the device. */
#include "bench.h"
#include "../backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    OP_MATMUL, OP_MATMUL_F16, OP_MATMUL_BF16, OP_MATMUL_THEN, OP_QUANTIZE_ROWS, OP_MATMUL_I8, OP_MATMUL_I8_REST,
    OP_ROWPROD,
    OP_SIMTOPK, OP_ATTENTION, OP_ATTENTION_CAUSAL, OP_ATTENTION_BF16, OP_ROWNORM, OP_NORMALIZE, OP_SOFTMAX,
    OP_LAYERNORM, OP_LAYERNORM_LOW, OP_GELU, OP_ACTIVATE, OP_ADD, OP_SCALE, OP_GATHER, OP_CONVERT, OP_TOPK, OP_ABOVE,
    OP_ACTIVATE_GRAD, OP_GELU_GRAD, OP_CODETOPK, OP_CODEMATRIX, OP_CODESCREEN
};

/* Fixed sides of the ops whose n is one dimension. */
#define SIM_Q 256   /* queries of rowprod and simtopk */
#define SIM_D 256   /* their vector length */
#define SIM_K 10
#define ATT_D 512   /* attention: 8 heads of 64 */
#define ATT_H 8
#define ROW_D 1024  /* row ops: rows of 1024 values (fewer when n is smaller) */
#define TOPK_K 10
#define ABOVE_LIST 64 /* above: the listed values a row */

/* Tolerances (NMSE against the CPU), those of the cross-backend suite
 * (tests/unit/test_ops.c), which holds every device to a float64 reference:
 * two devices each within it differ by at most about four times as much.
 * Elementwise and row ops: 1e-10 (correctly rounded f32 gives ~4e-15);
 * products over k up to 1024: 1e-9 (blocked orders; TF32 would give 1e-7).
 * Bit identity where an op promises it: topk and simtopk (tq-simmat(1):
 * "the same bytes as on the CPU"), gather and convert (copies and one
 * correctly rounded conversion), add and scale (one IEEE operation),
 * quantize_rows and matmul_i8 (exact integers, f32 roundings in a fixed
 * order). */
#define TOL_EW 4e-10
#define TOL_MM 4e-9

const tqb_opdef tqb_ops[] = {
    [OP_MATMUL] = {"matmul", "C[n,n] = A[n,n] B[n,n], f32", {256, 1024}, {64, 128}, TQB_CMP_NMSE,
                   TOL_MM},
    /* f16 values are exact in f32: every device multiplies the same numbers
     * (tensor cores on a GPU), only the order of the f32 sums differs */
    [OP_MATMUL_F16] = {"matmul_f16", "C[n,n] = A[n,n] B[n,n], f16 operands, f32 result",
                       {256, 1024}, {64, 128}, TQB_CMP_NMSE, TOL_MM},
    /* tq-embed --precision bf16's products: B constant (weights, packed
     * once), bf16 values exact in f32 as f16's; on the CPU AVX512-BF16 or
     * AMX, whose ceiling is then its tiles' */
    [OP_MATMUL_BF16] = {"matmul_bf16", "C[n,n] = A[n,n] B[n,n], bf16 operands, B constant, f32 result",
                        {256, 1024}, {64, 128}, TQB_CMP_NMSE, TOL_MM},
    /* a transformer's first feed-forward product: C in f32 and in bf16 for
     * the next product (only C is compared) */
    [OP_MATMUL_THEN] = {"matmul_then", "C[n,n] = A[n,n] B[n,n] + bias[n], then GELU, and a bf16 copy",
                        {256, 1024}, {64, 128}, TQB_CMP_NMSE, TOL_MM},
    /* tq_op_quantize_rows and tq_op_matmul_i8 (tq-embed --precision int8):
     * codes and scales rounded once each in a fixed order, the integer dot
     * exact, the same bits on every device (those without kernels of their
     * own run the CPU's code through the host) */
    [OP_QUANTIZE_ROWS] = {"quantize_rows", "n values as rows of 1024 to int8 codes, column scales",
                          {1 << 16, 1 << 22}, {1 << 12, 1 << 16}, TQB_CMP_BITS, 0},
    /* B a constant weight (tq_tensor_set_constant), as a model's: the CPU
     * packs it once, at the warm-up call, not in every timed one */
    [OP_MATMUL_I8] = {"matmul_i8",
                      "C[n,n] = A[n,n] B[n,n]^T + bias[n], int8 with scales, B constant",
                      {256, 1024}, {64, 128}, TQB_CMP_BITS, 0},
    /* with 8 columns of A's input taken in f32 (tq-embed's int8 products) */
    [OP_MATMUL_I8_REST] = {"matmul_i8_rest",
                           "C[n,n] = A[n,n] B[n,n]^T, int8 with scales, + 8 columns in f32",
                           {256, 1024}, {64, 128}, TQB_CMP_BITS, 0},
    [OP_ROWPROD] = {"rowprod", "out[256,n] = q[256,256] . db[n,256]^T, db prepared once",
                    {4096, 32768}, {256, 1024}, TQB_CMP_NMSE, TOL_MM},
    [OP_SIMTOPK] = {"simtopk", "top-10 of q[256,256] against db[n,256] by dot product",
                    {4096, 32768}, {256, 1024}, TQB_CMP_BITS, 0},
    [OP_ATTENTION] = {"attention", "q, k, v [n,512], 8 heads of 64, no mask", {256, 1024},
                      {64, 128}, TQB_CMP_NMSE, TOL_MM},
    /* causal: the keys after each query masked, half the work (a device
     * skips the tiles above the diagonal) */
    [OP_ATTENTION_CAUSAL] = {"attention_causal", "the same, causal (key j > query i masked)",
                             {256, 1024}, {64, 128}, TQB_CMP_NMSE, TOL_MM},
    /* the same with bf16 products allowed (tq_attention_args.bf16, as
     * tq-embed's bf16 and int8 run it): where a device has them (the CPU
     * with AVX512-BF16) its operands carry 2^-9, four times the suite's
     * bf16 bound; devices without them compute f32 */
    [OP_ATTENTION_BF16] = {"attention_bf16", "the same, bf16 products where the device has them",
                           {256, 1024}, {64, 128}, TQB_CMP_NMSE, 4e-4},
    [OP_ROWNORM] = {"rownorm", "norms of n values as rows of 1024", {1 << 16, 1 << 22},
                    {1 << 12, 1 << 16}, TQB_CMP_NMSE, TOL_EW},
    [OP_NORMALIZE] = {"normalize", "n values as rows of 1024", {1 << 16, 1 << 22},
                      {1 << 12, 1 << 16}, TQB_CMP_NMSE, TOL_EW},
    [OP_SOFTMAX] = {"softmax", "n values as rows of 1024", {1 << 16, 1 << 22}, {1 << 12, 1 << 16},
                    TQB_CMP_NMSE, TOL_EW},
    [OP_LAYERNORM] = {"layernorm", "n values as rows of 1024, gamma and beta",
                      {1 << 16, 1 << 22}, {1 << 12, 1 << 16}, TQB_CMP_NMSE, TOL_EW},
    /* y compared (low is y rounded: a device within the tolerance may
     * round a value the other way) */
    [OP_LAYERNORM_LOW] = {"layernorm_low",
                          "n values as rows of 1024, gamma and beta, and a bf16 copy",
                          {1 << 16, 1 << 22}, {1 << 12, 1 << 16}, TQB_CMP_NMSE, TOL_EW},
    [OP_GELU] = {"gelu", "n values", {1 << 16, 1 << 22}, {1 << 12, 1 << 16}, TQB_CMP_NMSE, TOL_EW},
    [OP_ACTIVATE] = {"activate", "tanh of n values", {1 << 16, 1 << 22}, {1 << 12, 1 << 16},
                     TQB_CMP_NMSE, TOL_EW},
    [OP_ADD] = {"add", "n values plus n values", {1 << 16, 1 << 22}, {1 << 12, 1 << 16},
                TQB_CMP_BITS, 0},
    [OP_SCALE] = {"scale", "n values times 0.5", {1 << 16, 1 << 22}, {1 << 12, 1 << 16},
                  TQB_CMP_BITS, 0},
    [OP_GATHER] = {"gather", "rows of 1024 of n values, shuffled", {1 << 16, 1 << 22},
                   {1 << 12, 1 << 16}, TQB_CMP_BITS, 0},
    [OP_CONVERT] = {"convert", "n values f32 to f16", {1 << 16, 1 << 22}, {1 << 12, 1 << 16},
                    TQB_CMP_BITS, 0},
    [OP_TOPK] = {"topk", "top-10 of each row of 1024 of n values", {1 << 16, 1 << 22},
                 {1 << 12, 1 << 16}, TQB_CMP_BITS, 0},
    /* the counts compared, bit for bit (the lists' order is the device's) */
    [OP_ABOVE] = {"above", "the values of each row of 1024 of n not below 0.9, 64 listed a row",
                  {1 << 16, 1 << 22}, {1 << 12, 1 << 16}, TQB_CMP_BITS, 0},
    [OP_ACTIVATE_GRAD] = {"activate_grad", "tanh's backward over n values", {1 << 16, 1 << 22},
                          {1 << 12, 1 << 16}, TQB_CMP_NMSE, TOL_EW},
    [OP_GELU_GRAD] = {"gelu_grad", "GELU's backward over n values", {1 << 16, 1 << 22},
                      {1 << 12, 1 << 16}, TQB_CMP_NMSE, TOL_EW},
    /* exact integer products rounded once: the same bits on every device */
    [OP_CODETOPK] = {"codetopk", "top-10 of int8 q[256,256] against int8 db[n,256] with scales",
                     {4096, 32768}, {256, 1024}, TQB_CMP_BITS, 0},
    [OP_CODEMATRIX] = {"codematrix", "out[256,n]: every score of int8 q[256,256] and db[n,256]",
                       {4096, 32768}, {256, 1024}, TQB_CMP_BITS, 0},
    /* random terms: a value within 2^-30 of 0, where devices may differ, is
     * too rare to meet */
    [OP_CODESCREEN] = {"codescreen", "the pass bits of int8 q[256,256] and db[n,256], 4 terms a row",
                       {4096, 32768}, {256, 1024}, TQB_CMP_BITS, 0},
};
const int tqb_nops = (int)(sizeof tqb_ops / sizeof tqb_ops[0]);

const tqb_opdef *tqb_op_find(const char *name)
{
    for (int i = 0; i < tqb_nops; i++)
        if (!strcmp(tqb_ops[i].name, name))
            return &tqb_ops[i];
    return NULL;
}

int tqb_device_cpu_type(const tq_device *dev)
{
    if (tq_device_backend(dev) == TQ_BACKEND_CPU)
        return 0;
    tq_device_info info;
    memset(&info, 0, sizeof info);
    return dev->backend->info(dev->index, &info) == TQ_OK && info.cpu_type;
}

int tqb_device_small(const tq_device *dev)
{
    const char *e = getenv("TQ_BENCH_SMALL");
    return tq_device_backend(dev) != TQ_BACKEND_CPU && ((e && !strcmp(e, "1")) ||
                                                        tqb_device_cpu_type(dev));
}

/* ------------------------------------------------------------ inputs */

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Tensor i of the instance, [d0] or [d0, d1]; fill 1 uploads uniform values
 * in [-1, 1) (f32 only), 0 leaves it as allocated. */
static tq_status mk(tqb_inst *in, int i, tq_dtype dt, int rank, int64_t d0, int64_t d1, int fill,
                    uint64_t *seed)
{
    int64_t dims[2] = {d0, d1};
    tq_status st = tq_tensor_new(in->dev, dt, rank, dims, &in->t[i]);
    if (st || !fill)
        return st;
    int64_t n = tq_tensor_numel(in->t[i]);
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    if (!h)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < n; j++)
        h[j] = (float)((double)(mix(seed) >> 11) * 0x1p-52 - 1.0);
    st = tq_tensor_upload(in->t[i], h, (size_t)n * sizeof *h);
    free(h);
    return st;
}

/* Tensor i of dtype dt [d0, d1]: mk's uniform values times mult, converted
 * on the device (int8 codes in [-127, 127] for mult 127; f16 for 1). */
static tq_status mk_as(tqb_inst *in, int i, tq_dtype dt, int64_t d0, int64_t d1, float mult,
                       uint64_t *seed)
{
    tq_tensor *f = NULL;
    tq_status st = mk(in, i, TQ_DTYPE_F32, 2, d0, d1, 1, seed);
    if (st)
        return st;
    f = in->t[i];
    in->t[i] = NULL;
    if (!(st = tq_op_scale(f, mult, f)) && !(st = mk(in, i, dt, 2, d0, d1, 0, seed)))
        st = tq_op_convert(f, in->t[i]);
    tq_tensor_free(f);
    return st;
}

/* Tensor i, f32 [n]: positive values in [mult / 2, 3 mult / 2) (scales). */
static tq_status mk_pos(tqb_inst *in, int i, int64_t n, float mult, uint64_t *seed)
{
    tq_status st = mk(in, i, TQ_DTYPE_F32, 1, n, 0, 0, seed);
    if (st)
        return st;
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    if (!h)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < n; j++)
        h[j] = (float)(((double)(mix(seed) >> 11) * 0x1p-53 + 0.5) * mult);
    st = tq_tensor_upload(in->t[i], h, (size_t)n * sizeof *h);
    free(h);
    return st;
}

/* Starts simtopk's running lists at -inf and -1, as the op asks. */
static tq_status simtopk_reset(tqb_inst *in)
{
    size_t n = (size_t)(SIM_Q * SIM_K);
    float v[SIM_Q * SIM_K];
    int64_t ix[SIM_Q * SIM_K];
    for (size_t i = 0; i < n; i++)
        v[i] = -INFINITY, ix[i] = -1;
    int o = in->op == &tqb_ops[OP_CODETOPK] ? 4 : 2; /* codetopk: after the scales */
    tq_status st = tq_tensor_upload(in->t[o], v, sizeof v);
    return st ? st : tq_tensor_upload(in->t[o + 1], ix, sizeof ix);
}

static void shape2(char *out, size_t n, const tq_tensor *t)
{
    if (t->rank == 1)
        snprintf(out, n, "[%lld]", (long long)t->dims[0]);
    else
        snprintf(out, n, "[%lld,%lld]", (long long)t->dims[0], (long long)t->dims[1]);
}

/* The tensors of a row op: n values as rows of ROW_D (or one row of n). */
static tq_status rows_inputs(tqb_inst *in, int64_t *r, int64_t *c, uint64_t *seed)
{
    *c = in->n < ROW_D ? in->n : ROW_D;
    *r = in->n / *c;
    return mk(in, 0, TQ_DTYPE_F32, 2, *r, *c, 1, seed);
}

/* The matrix products and attention: their inputs, work, traffic and shape. */
static tq_status setup_products(tqb_inst *in, uint64_t seed)
{
    int64_t n = in->n;
    tq_status st;
    switch ((int)(in->op - tqb_ops)) {
    case OP_MATMUL:
    case OP_MATMUL_F16:
    case OP_MATMUL_BF16: {
        int bf = in->op == &tqb_ops[OP_MATMUL_BF16], half = bf || in->op == &tqb_ops[OP_MATMUL_F16];
        tq_dtype hd = bf ? TQ_DTYPE_BF16 : TQ_DTYPE_F16;
        if ((st = half ? mk_as(in, 0, hd, n, n, 1.0f, &seed)
                       : mk(in, 0, TQ_DTYPE_F32, 2, n, n, 1, &seed)) ||
            (st = half ? mk_as(in, 1, hd, n, n, 1.0f, &seed)
                       : mk(in, 1, TQ_DTYPE_F32, 2, n, n, 1, &seed)) ||
            (st = mk(in, 2, TQ_DTYPE_F32, 2, n, n, 0, &seed)))
            return st;
        if (bf)
            tq_tensor_set_constant(in->t[1]);
        in->out[0] = 2;
        in->flops = 2.0 * n * n * n;
        in->bytes = (half ? 8.0 : 12.0) * n * n;
        if (half)
            in->dtype = bf ? "bf16>f32" : "f16>f32";
        snprintf(in->shape, sizeof in->shape, "[%lld,%lld]x[%lld,%lld]", (long long)n,
                 (long long)n, (long long)n, (long long)n);
        return TQ_OK;
    }
    case OP_MATMUL_THEN:
        if ((st = mk(in, 0, TQ_DTYPE_F32, 2, n, n, 1, &seed)) ||
            (st = mk(in, 1, TQ_DTYPE_F32, 2, n, n, 1, &seed)) ||
            (st = mk(in, 2, TQ_DTYPE_F32, 2, n, n, 0, &seed)) ||
            (st = mk(in, 3, TQ_DTYPE_F32, 1, n, 0, 1, &seed)) ||
            (st = mk(in, 4, TQ_DTYPE_BF16, 2, n, n, 0, &seed)))
            return st;
        in->out[0] = 2;
        in->flops = 2.0 * n * n * n;
        in->bytes = 14.0 * n * n + 4.0 * n;
        snprintf(in->shape, sizeof in->shape, "[%lld,%lld]x[%lld,%lld]", (long long)n,
                 (long long)n, (long long)n, (long long)n);
        return TQ_OK;
    case OP_MATMUL_I8:
        /* codes in [-127, 127], scales of about 1/127 (a unit value's) */
        if ((st = mk_as(in, 0, TQ_DTYPE_I8, n, n, 127.0f, &seed)) ||
            (st = mk_pos(in, 1, n, 1.0f / 127, &seed)) ||
            (st = mk_as(in, 2, TQ_DTYPE_I8, n, n, 127.0f, &seed)) ||
            (st = mk_pos(in, 3, n, 1.0f / 127, &seed)) ||
            (st = mk(in, 4, TQ_DTYPE_F32, 1, n, 0, 1, &seed)) ||
            (st = mk(in, 5, TQ_DTYPE_F32, 2, n, n, 0, &seed)))
            return st;
        tq_tensor_set_constant(in->t[2]);
        in->out[0] = 5;
        in->dtype = "i8>f32";
        in->flops = 2.0 * n * n * n;
        in->bytes = 6.0 * n * n + 12.0 * n;
        snprintf(in->shape, sizeof in->shape, "[%lld,%lld]x[%lld,%lld]", (long long)n,
                 (long long)n, (long long)n, (long long)n);
        return TQ_OK;
    case OP_MATMUL_I8_REST: { /* a, as, b, bs; x, cols, w; C (no bias: 8 tensors) */
        int64_t r = n < 8 ? n : 8, cols[8];
        for (int64_t p = 0; p < r; p++) /* spread over the row */
            cols[p] = p * (n / r);
        if ((st = mk_as(in, 0, TQ_DTYPE_I8, n, n, 127.0f, &seed)) ||
            (st = mk_pos(in, 1, n, 1.0f / 127, &seed)) ||
            (st = mk_as(in, 2, TQ_DTYPE_I8, n, n, 127.0f, &seed)) ||
            (st = mk_pos(in, 3, n, 1.0f / 127, &seed)) ||
            (st = mk(in, 4, TQ_DTYPE_F32, 2, n, n, 1, &seed)) ||
            (st = mk(in, 5, TQ_DTYPE_I64, 1, r, 0, 0, &seed)) ||
            (st = tq_tensor_upload(in->t[5], cols, (size_t)r * sizeof *cols)) ||
            (st = mk(in, 6, TQ_DTYPE_F32, 2, n, r, 1, &seed)) ||
            (st = mk(in, 7, TQ_DTYPE_F32, 2, n, n, 0, &seed)))
            return st;
        tq_tensor_set_constant(in->t[2]);
        in->out[0] = 7;
        in->dtype = "i8>f32";
        in->flops = 2.0 * n * n * (n + r);
        in->bytes = 10.0 * n * n + 8.0 * n + 4.0 * n * r;
        snprintf(in->shape, sizeof in->shape, "[%lld,%lld]x[%lld,%lld]", (long long)n,
                 (long long)n, (long long)n, (long long)n);
        return TQ_OK;
    }
    case OP_ATTENTION:
    case OP_ATTENTION_CAUSAL:
    case OP_ATTENTION_BF16:
        if (in->op == &tqb_ops[OP_ATTENTION_BF16])
            in->dtype = "bf16>f32";
        for (int i = 0; i < 4; i++)
            if ((st = mk(in, i, TQ_DTYPE_F32, 2, n, ATT_D, i < 3, &seed)))
                return st;
        in->out[0] = 3;
        /* causal: the n (n + 1) / 2 pairs not masked */
        in->flops = (in->op == &tqb_ops[OP_ATTENTION_CAUSAL] ? 2.0 * (n + 1) : 4.0 * n) * n * ATT_D;
        in->bytes = 16.0 * n * ATT_D;
        snprintf(in->shape, sizeof in->shape, "[%lld,%d] %d heads", (long long)n, ATT_D, ATT_H);
        return TQ_OK;
    }
    return tq_fail(TQ_ERR_USAGE, "unknown op");
}

/* The searches of q[SIM_Q, SIM_D] against db[n, SIM_D], in f32 and in int8 codes. */
static tq_status setup_search(tqb_inst *in, uint64_t seed)
{
    int64_t n = in->n;
    tq_status st;
    switch ((int)(in->op - tqb_ops)) {
    case OP_ROWPROD:
    case OP_SIMTOPK:
        if ((st = mk(in, 0, TQ_DTYPE_F32, 2, SIM_Q, SIM_D, 1, &seed)) ||
            (st = mk(in, 1, TQ_DTYPE_F32, 2, n, SIM_D, 1, &seed)))
            return st;
        in->flops = 2.0 * SIM_Q * SIM_D * n;
        in->bytes = 4.0 * (SIM_Q * SIM_D + n * SIM_D);
        snprintf(in->shape, sizeof in->shape, "[%d,%d]x[%lld,%d]", SIM_Q, SIM_D, (long long)n,
                 SIM_D);
        if (in->op == &tqb_ops[OP_ROWPROD]) {
            in->out[0] = 2;
            in->bytes += 4.0 * SIM_Q * n;
            if ((st = mk(in, 2, TQ_DTYPE_F32, 2, SIM_Q, n, 0, &seed)))
                return st;
            return tq_rowprod_new(in->t[1], &in->rp);
        }
        in->nout = 2;
        in->out[0] = 2;
        in->out[1] = 3;
        if ((st = mk(in, 2, TQ_DTYPE_F32, 2, SIM_Q, SIM_K, 0, &seed)) ||
            (st = mk(in, 3, TQ_DTYPE_I64, 2, SIM_Q, SIM_K, 0, &seed)))
            return st;
        return simtopk_reset(in);
    case OP_CODESCREEN:
    case OP_CODEMATRIX:
    case OP_CODETOPK:
        if ((st = mk_as(in, 0, TQ_DTYPE_I8, SIM_Q, SIM_D, 127.0f, &seed)) ||
            (st = mk(in, 1, TQ_DTYPE_F32, 1, SIM_Q, 0, 1, &seed)) ||
            (st = mk_as(in, 2, TQ_DTYPE_I8, n, SIM_D, 127.0f, &seed)) || (st = mk(in, 3, TQ_DTYPE_F32, 1, n, 0, 1, &seed)))
            return st;
        in->dtype = "i8";
        in->flops = 2.0 * SIM_Q * SIM_D * n;
        in->bytes = 1.0 * (SIM_Q * SIM_D + n * SIM_D) + 4.0 * n;
        snprintf(in->shape, sizeof in->shape, "[%d,%d]x[%lld,%d]", SIM_Q, SIM_D, (long long)n,
                 SIM_D);
        if (in->op == &tqb_ops[OP_CODESCREEN]) {
            in->out[0] = 6;
            in->bytes += 16.0 * (SIM_Q + n) + 4.0 * SIM_Q * ((n + 31) / 32);
            if ((st = mk(in, 4, TQ_DTYPE_F32, 2, SIM_Q, 4, 1, &seed)) ||
                (st = mk(in, 5, TQ_DTYPE_F32, 2, n, 4, 1, &seed)))
                return st;
            return mk(in, 6, TQ_DTYPE_I32, 2, SIM_Q, (n + 31) / 32, 0, &seed);
        }
        if (in->op == &tqb_ops[OP_CODEMATRIX]) {
            in->out[0] = 4;
            in->bytes += 4.0 * SIM_Q * n;
            return mk(in, 4, TQ_DTYPE_F32, 2, SIM_Q, n, 0, &seed);
        }
        if ((st = mk(in, 4, TQ_DTYPE_F32, 2, SIM_Q, SIM_K, 0, &seed)) ||
            (st = mk(in, 5, TQ_DTYPE_I64, 2, SIM_Q, SIM_K, 0, &seed)))
            return st;
        in->nout = 2;
        in->out[0] = 4;
        in->out[1] = 5;
        return simtopk_reset(in);
    }
    return tq_fail(TQ_ERR_USAGE, "unknown op");
}

/* The row and elementwise ops: n values as rows of ROW_D (rows_inputs). */
static tq_status setup_rows(tqb_inst *in, uint64_t seed)
{
    int64_t r = 0, c = 0;
    tq_status st;
    switch ((int)(in->op - tqb_ops)) {
    case OP_ACTIVATE_GRAD:
    case OP_GELU_GRAD:
        if ((st = rows_inputs(in, &r, &c, &seed)) ||
            (st = mk(in, 1, TQ_DTYPE_F32, 2, r, c, 1, &seed)) ||
            (st = mk(in, 2, TQ_DTYPE_F32, 2, r, c, 0, &seed)))
            return st;
        in->out[0] = 2;
        in->bytes = 12.0 * r * c;
        break;
    case OP_ROWNORM:
        if ((st = rows_inputs(in, &r, &c, &seed)) || (st = mk(in, 1, TQ_DTYPE_F32, 1, r, 0, 0, &seed)))
            return st;
        in->bytes = 4.0 * r * c + 4.0 * r;
        break;
    case OP_TOPK:
        if ((st = rows_inputs(in, &r, &c, &seed)))
            return st;
        in->k = c < TOPK_K ? c : TOPK_K; /* rows shorter than k: all of them */
        if ((st = mk(in, 1, TQ_DTYPE_F32, 2, r, in->k, 0, &seed)) ||
            (st = mk(in, 2, TQ_DTYPE_I64, 2, r, in->k, 0, &seed)))
            return st;
        in->nout = 2;
        in->out[1] = 2;
        in->bytes = 4.0 * r * c + 12.0 * r * in->k;
        break;
    case OP_ABOVE: {
        if ((st = rows_inputs(in, &r, &c, &seed)) || (st = mk(in, 1, TQ_DTYPE_F32, 1, r, 0, 0, &seed)) ||
            (st = mk(in, 2, TQ_DTYPE_I32, 1, r, 0, 0, &seed)) ||
            (st = mk(in, 3, TQ_DTYPE_I32, 2, r, ABOVE_LIST, 0, &seed)))
            return st;
        float *th = malloc((size_t)(r ? r : 1) * sizeof *th);
        if (!th)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < r; i++)
            th[i] = 0.9f; /* 5% of the uniform values: about 51 a row */
        st = tq_tensor_upload(in->t[1], th, (size_t)r * sizeof *th);
        free(th);
        in->out[0] = 2;
        in->bytes = 4.0 * r * c + 8.0 * r + 4.0 * r * ABOVE_LIST;
        return st;
    }
    case OP_GATHER: {
        if ((st = rows_inputs(in, &r, &c, &seed)) ||
            (st = mk(in, 1, TQ_DTYPE_F32, 2, r, c, 0, &seed)) ||
            (st = mk(in, 2, TQ_DTYPE_I64, 1, r, 0, 0, &seed)))
            return st;
        int64_t *ix = malloc((size_t)r * sizeof *ix);
        if (!ix)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < r; i++) /* a shuffle: each row once */
            ix[i] = i;
        for (int64_t i = r - 1; i > 0; i--) {
            int64_t j = (int64_t)(mix(&seed) % (uint64_t)(i + 1)), s = ix[i];
            ix[i] = ix[j], ix[j] = s;
        }
        st = tq_tensor_upload(in->t[2], ix, (size_t)r * sizeof *ix);
        free(ix);
        in->bytes = 8.0 * r * c + 8.0 * r;
        break;
    }
    case OP_CONVERT:
        if ((st = rows_inputs(in, &r, &c, &seed)) ||
            (st = mk(in, 1, TQ_DTYPE_F16, 2, r, c, 0, &seed)))
            return st;
        in->dtype = "f32>f16";
        in->bytes = 6.0 * r * c;
        break;
    case OP_QUANTIZE_ROWS: /* x, colscale, q and a scale per row */
        if ((st = rows_inputs(in, &r, &c, &seed)) || (st = mk_pos(in, 1, c, 1.0f, &seed)) ||
            (st = mk(in, 2, TQ_DTYPE_I8, 2, r, c, 0, &seed)) ||
            (st = mk(in, 3, TQ_DTYPE_F32, 1, r, 0, 0, &seed)))
            return st;
        in->nout = 2;
        in->out[0] = 2;
        in->out[1] = 3;
        in->dtype = "f32>i8";
        in->bytes = 5.0 * r * c + 4.0 * c + 4.0 * r;
        break;
    case OP_ADD:
        if ((st = rows_inputs(in, &r, &c, &seed)) ||
            (st = mk(in, 1, TQ_DTYPE_F32, 2, r, c, 1, &seed)) ||
            (st = mk(in, 2, TQ_DTYPE_F32, 2, r, c, 0, &seed)))
            return st;
        in->out[0] = 2;
        in->bytes = 12.0 * r * c;
        break;
    case OP_LAYERNORM:
    case OP_LAYERNORM_LOW: { /* layernorm_low's bf16 copy: t[4] */
        int low = in->op == &tqb_ops[OP_LAYERNORM_LOW];
        if ((st = rows_inputs(in, &r, &c, &seed)) ||
            (st = mk(in, 1, TQ_DTYPE_F32, 2, r, c, 0, &seed)) ||
            (st = mk(in, 2, TQ_DTYPE_F32, 1, c, 0, 1, &seed)) ||
            (st = mk(in, 3, TQ_DTYPE_F32, 1, c, 0, 1, &seed)) ||
            (low && (st = mk(in, 4, TQ_DTYPE_BF16, 2, r, c, 0, &seed))))
            return st;
        in->bytes = (low ? 10.0 : 8.0) * r * c;
        if (low)
            in->dtype = "f32>bf16";
        break;
    }
    default: /* normalize, softmax, gelu, activate, scale: x to y */
        if ((st = rows_inputs(in, &r, &c, &seed)) ||
            (st = mk(in, 1, TQ_DTYPE_F32, 2, r, c, 0, &seed)))
            return st;
        in->bytes = 8.0 * r * c;
        break;
    }
    shape2(in->shape, sizeof in->shape, in->t[0]);
    return TQ_OK;
}

/* The instance's tensors, seeded, and what one call of its op costs. */
static tq_status setup(tqb_inst *in, uint64_t seed)
{
    in->dtype = "f32";
    in->nout = 1;
    in->out[0] = 1;
    switch ((int)(in->op - tqb_ops)) {
    case OP_MATMUL:
    case OP_MATMUL_F16:
    case OP_MATMUL_BF16:
    case OP_MATMUL_THEN:
    case OP_MATMUL_I8:
    case OP_MATMUL_I8_REST:
    case OP_ATTENTION:
    case OP_ATTENTION_CAUSAL:
    case OP_ATTENTION_BF16:
        return setup_products(in, seed);
    case OP_ROWPROD:
    case OP_SIMTOPK:
    case OP_CODESCREEN:
    case OP_CODEMATRIX:
    case OP_CODETOPK:
        return setup_search(in, seed);
    }
    return setup_rows(in, seed);
}

tq_status tqb_inst_new(const tqb_opdef *op, tq_device *dev, int64_t n, uint64_t seed,
                       tqb_inst **out)
{
    *out = NULL; /* a failure leaves nothing for the caller to free */
    tqb_inst *in = calloc(1, sizeof *in);
    if (!in)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    in->op = op;
    in->dev = dev;
    in->n = n;
    tq_status st = setup(in, seed ^ (uint64_t)n);
    if (st) {
        tqb_inst_free(in);
        return tq_fail_context(st, "%s n=%lld on %s", op->name, (long long)n,
                               tq_device_name(dev));
    }
    *out = in;
    return TQ_OK;
}

tq_status tqb_inst_run(tqb_inst *in)
{
    tq_tensor **t = in->t;
    tq_status st;
    switch ((int)(in->op - tqb_ops)) {
    case OP_MATMUL:
    case OP_MATMUL_F16:
    case OP_MATMUL_BF16:
        return tq_op_matmul(t[0], 0, t[1], 0, 1.0f, 0.0f, t[2]);
    case OP_MATMUL_THEN: {
        tq_matmul_then then = {t[3], 1, t[4], 0};
        return tq_op_matmul_then(t[0], 0, t[1], 0, 1.0f, 0.0f, &then, t[2]);
    }
    case OP_QUANTIZE_ROWS:
        return tq_op_quantize_rows(t[0], t[1], t[2], t[3]);
    case OP_MATMUL_I8: {
        tq_matmul_then then = {t[4], 0, NULL, 0};
        return tq_op_matmul_i8(t[0], t[1], t[2], t[3], 0.0f, &then, t[5]);
    }
    case OP_MATMUL_I8_REST: {
        tq_i8_rest rest = {t[4], t[5], t[6]};
        return tq_op_matmul_i8_rest(t[0], t[1], t[2], t[3], &rest, 0.0f, NULL, t[7]);
    }
    case OP_ROWPROD:
        return tq_op_rowprod(in->rp, t[0], 1.0f, t[2]);
    case OP_SIMTOPK:
        /* fresh lists each call: folding the same rows twice would prune
         * more and time less than one real pass */
        if ((st = simtopk_reset(in)))
            return st;
        return tq_op_simtopk(t[0], t[1], TQ_METRIC_DOT, 0, t[2], t[3]);
    case OP_ATTENTION:
    case OP_ATTENTION_CAUSAL:
    case OP_ATTENTION_BF16: {
        tq_attention_args a = {ATT_H, 0.0f, in->op == &tqb_ops[OP_ATTENTION_CAUSAL], NULL, NULL,
                               NULL, NULL, NULL, in->op == &tqb_ops[OP_ATTENTION_BF16], NULL,
                               NULL};
        return tq_op_attention(t[0], t[1], t[2], &a, t[3]);
    }
    case OP_ROWNORM:
        return tq_op_rownorm(t[0], t[1]);
    case OP_NORMALIZE:
        return tq_op_normalize(t[0], 1e-12f, t[1]);
    case OP_SOFTMAX:
        return tq_op_softmax(t[0], t[1]);
    case OP_LAYERNORM:
        return tq_op_layernorm(t[0], t[2], t[3], 1e-5f, t[1]);
    case OP_LAYERNORM_LOW:
        return tq_op_layernorm_low(t[0], t[2], t[3], 1e-5f, t[1], t[4]);
    case OP_GELU:
        return tq_op_gelu(t[0], t[1]);
    case OP_ACTIVATE:
        return tq_op_activate(t[0], TQ_ACT_TANH, t[1]);
    case OP_ADD:
        return tq_op_add(t[0], t[1], t[2]);
    case OP_SCALE:
        return tq_op_scale(t[0], 0.5f, t[1]);
    case OP_GATHER:
        return tq_op_gather(t[0], t[2], t[1]);
    case OP_CONVERT:
        return tq_op_convert(t[0], t[1]);
    case OP_TOPK:
        return tq_op_topk(t[0], in->k, t[1], t[2]);
    case OP_ABOVE:
        return tq_op_above(t[0], t[1], t[2], t[3]);
    case OP_ACTIVATE_GRAD:
        return tq_op_activate_grad(t[0], TQ_ACT_TANH, t[1], t[2]);
    case OP_GELU_GRAD:
        return tq_op_gelu_grad(t[0], t[1], t[2]);
    case OP_CODETOPK:
        if ((st = simtopk_reset(in)))
            return st;
        return tq_op_codetopk(t[0], t[1], t[2], t[3], TQ_METRIC_DOT, 0, t[4], t[5]);
    case OP_CODEMATRIX:
        return tq_op_codematrix(t[0], t[1], t[2], t[3], TQ_METRIC_DOT, t[4]);
    case OP_CODESCREEN:
        return tq_op_codescreen(t[0], t[1], t[4], t[2], t[3], t[5], t[6]);
    }
    return tq_fail(TQ_ERR_USAGE, "unknown op");
}

void tqb_inst_free(tqb_inst *in)
{
    if (!in)
        return;
    tq_rowprod_free(in->rp);
    for (int i = 0; i < TQB_MAX_T; i++)
        tq_tensor_free(in->t[i]);
    free(in);
}
