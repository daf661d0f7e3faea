/* op.c: the op API. Every op checks its arguments here, once for all backends,
 * then calls the entry of the tensors' backend, which only computes.
 * One unit with hostpath.c by design: an op a backend lacks goes to the host
 * path, which runs the same op (checked here again) on the CPU backend. */
#include "backend.h"
#include "hostpath.h"
#include "internal.h"

#include <math.h>

#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond))                                                               \
            return tq_fail(TQ_ERR_USAGE, __VA_ARGS__);                            \
    } while (0)
/* A size beyond what an op's kernels index: the tensors are well formed and the
 * call is right, but the data is too large for the op (a tool's input), so bad
 * data (exit 65), not a usage error. */
#define LIMIT(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond))                                                               \
            return tq_fail(TQ_ERR_DATA, __VA_ARGS__);                             \
    } while (0)

static int same_shape(const tq_tensor *a, const tq_tensor *b)
{
    if (a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return 0;
    return 1;
}

static int64_t last_dim(const tq_tensor *t) { return t->rank ? t->dims[t->rank - 1] : 1; }
static int64_t n_rows(const tq_tensor *t)
{
    int64_t d = last_dim(t);
    return d ? tq_tensor_numel(t) / d : 0;
}

static tq_status dispatch_missing(const tq_tensor *t, const char *op)
{
    return tq_fail(TQ_ERR_RUNTIME, "%s: op %s is not available on this backend",
                   t->dev->name, op);
}

#define ENTRY(t, op) ((t)->dev->backend->ops.op)
#define ON_CPU(t) ((t)->dev->backend->kind == TQ_BACKEND_CPU)
/* Whether t's device computes op itself; otherwise a device backend's op runs
 * on the host (hostpath.h). The CPU backend must have every entry, since the
 * host path runs on it. */
#define NATIVE(t, op) (ENTRY(t, op) && (ON_CPU(t) || !tq_device_host_forced()))
#define CALL(t, op, ...)                                                           \
    (NATIVE(t, op) ? ENTRY(t, op)((t)->dev->ctx, __VA_ARGS__)                       \
     : ON_CPU(t)   ? dispatch_missing(t, #op)                                       \
                   : tq_host_##op(__VA_ARGS__))

#define SAME_DEV(a, b) CHECK((a)->dev == (b)->dev, "tensors on different devices")
#define F32(t, what) CHECK((t)->dtype == TQ_DTYPE_F32, "%s must be f32, not %s", what, tq_dtype_name((t)->dtype))

static int matmul_operand(tq_dtype t)
{
    return t == TQ_DTYPE_F32 || t == TQ_DTYPE_F16 || t == TQ_DTYPE_BF16;
}

static tq_status matmul_check(const tq_tensor *a, int trans_a, const tq_tensor *b, int trans_b,
                              const tq_tensor *c)
{
    CHECK(matmul_operand(a->dtype), "matmul A must be f32, f16 or bf16, not %s",
          tq_dtype_name(a->dtype));
    CHECK(matmul_operand(b->dtype), "matmul B must be f32, f16 or bf16, not %s",
          tq_dtype_name(b->dtype));
    F32(c, "matmul C");
    SAME_DEV(a, b);
    SAME_DEV(a, c);
    CHECK(a->rank >= 2 && a->rank <= 3 && b->rank >= 2 && b->rank <= 3 &&
              c->rank == (a->rank > b->rank ? a->rank : b->rank),
          "matmul takes rank 2 or 3 (batched) tensors");
    int64_t batch = c->rank == 3 ? c->dims[0] : 1;
    CHECK(a->rank == 2 || a->dims[0] == batch, "matmul: A's batch differs from C's");
    CHECK(b->rank == 2 || b->dims[0] == batch, "matmul: B's batch differs from C's");
    const int64_t *ad = a->dims + a->rank - 2, *bd = b->dims + b->rank - 2,
                  *cd = c->dims + c->rank - 2;
    int64_t m = trans_a ? ad[1] : ad[0], k = trans_a ? ad[0] : ad[1];
    int64_t kb = trans_b ? bd[1] : bd[0], n = trans_b ? bd[0] : bd[1];
    CHECK(k == kb, "matmul: inner dims differ (%lld and %lld)", (long long)k, (long long)kb);
    CHECK(cd[0] == m && cd[1] == n, "matmul: C is %lldx%lld, the product is %lldx%lld",
          (long long)cd[0], (long long)cd[1], (long long)m, (long long)n);
    LIMIT(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX, "matmul: dims over 2^31");
    return TQ_OK;
}

tq_status tq_op_matmul(const tq_tensor *a, int trans_a, const tq_tensor *b, int trans_b,
                       float alpha, float beta, tq_tensor *c)
{
    tq_status st = matmul_check(a, trans_a, b, trans_b, c);
    return st ? st : CALL(c, matmul, a, trans_a, b, trans_b, alpha, beta, c);
}

/* What a product's `then` names: a bias row of C's width, a low copy of C's
 * shape. */
static tq_status then_check(const tq_matmul_then *t, const tq_tensor *c, const char *op)
{
    if (t->bias) {
        CHECK(t->bias->dtype == TQ_DTYPE_F32, "%s bias must be f32, not %s", op,
              tq_dtype_name(t->bias->dtype));
        SAME_DEV(t->bias, c);
        CHECK(t->bias->rank == 1 && t->bias->dims[0] == last_dim(c),
              "%s: bias must be a row of %lld values", op, (long long)last_dim(c));
    }
    if (t->low) {
        CHECK(t->low->dtype == TQ_DTYPE_BF16 || t->low->dtype == TQ_DTYPE_F16,
              "%s low must be bf16 or f16, not %s", op, tq_dtype_name(t->low->dtype));
        SAME_DEV(t->low, c);
        CHECK(same_shape(t->low, c), "%s: low and C differ in shape", op);
    }
    CHECK(!t->low_only || t->low, "%s: low_only without a low tensor", op);
    return TQ_OK;
}

tq_status tq_op_matmul_then(const tq_tensor *a, int trans_a, const tq_tensor *b, int trans_b,
                            float alpha, float beta, const tq_matmul_then *then, tq_tensor *c)
{
    tq_status st = matmul_check(a, trans_a, b, trans_b, c);
    if (st)
        return st;
    tq_matmul_then none = {NULL, 0, NULL, 0};
    const tq_matmul_then *t = then ? then : &none;
    if ((st = then_check(t, c, "matmul_then")))
        return st;
    if (NATIVE(c, matmul_then))
        return ENTRY(c, matmul_then)(c->dev->ctx, a, trans_a, b, trans_b, alpha, beta, t, c);
    /* the ops one by one, each on the device or through the host path */
    if ((st = tq_op_matmul(a, trans_a, b, trans_b, alpha, beta, c)) ||
        (t->bias && (st = tq_op_add(c, t->bias, c))) || (t->gelu && (st = tq_op_gelu(c, c))))
        return st;
    return t->low ? tq_op_convert(c, t->low) : TQ_OK;
}

tq_status tq_op_quantize_rows(const tq_tensor *x, const tq_tensor *colscale, tq_tensor *q,
                              tq_tensor *scale)
{
    F32(x, "quantize_rows x");
    F32(scale, "quantize_rows scale");
    CHECK(q->dtype == TQ_DTYPE_I8, "quantize_rows q must be i8, not %s", tq_dtype_name(q->dtype));
    SAME_DEV(x, q);
    SAME_DEV(x, scale);
    CHECK(x->rank >= 1 && same_shape(x, q), "quantize_rows: q and x differ in shape");
    CHECK(tq_tensor_numel(scale) == n_rows(x), "quantize_rows: scale must hold one value per row");
    if (colscale) {
        F32(colscale, "quantize_rows colscale");
        SAME_DEV(x, colscale);
        CHECK(colscale->rank == 1 && colscale->dims[0] == last_dim(x),
              "quantize_rows: colscale must be a row of %lld values", (long long)last_dim(x));
    }
    return CALL(x, quantize_rows, x, colscale, q, scale);
}

tq_status tq_op_matmul_i8(const tq_tensor *a, const tq_tensor *ascale, const tq_tensor *b,
                          const tq_tensor *bscale, float beta, const tq_matmul_then *then,
                          tq_tensor *c)
{
    return tq_op_matmul_i8_rest(a, ascale, b, bscale, NULL, beta, then, c);
}

tq_status tq_op_matmul_i8_rest(const tq_tensor *a, const tq_tensor *ascale, const tq_tensor *b,
                               const tq_tensor *bscale, const tq_i8_rest *rest, float beta,
                               const tq_matmul_then *then, tq_tensor *c)
{
    CHECK(a->dtype == TQ_DTYPE_I8 && b->dtype == TQ_DTYPE_I8,
          "matmul_i8 takes i8 a and b, not %s and %s", tq_dtype_name(a->dtype),
          tq_dtype_name(b->dtype));
    F32(ascale, "matmul_i8 ascale");
    F32(bscale, "matmul_i8 bscale");
    F32(c, "matmul_i8 C");
    SAME_DEV(a, b);
    SAME_DEV(a, c);
    SAME_DEV(a, ascale);
    SAME_DEV(a, bscale);
    CHECK(a->rank >= 2 && a->rank <= 3 && b->rank == 2 && c->rank == a->rank,
          "matmul_i8: a and C rank 2 or 3 alike, b rank 2");
    int64_t k = last_dim(a), n = b->dims[0], m = n_rows(a);
    CHECK(b->dims[1] == k, "matmul_i8: rows of a have %lld codes, of b %lld", (long long)k,
          (long long)b->dims[1]);
    LIMIT(k <= 65536, "matmul_i8: k = %lld is over 2^16", (long long)k);
    CHECK(last_dim(c) == n && n_rows(c) == m && (a->rank == 2 || a->dims[0] == c->dims[0]),
          "matmul_i8: C must be %lld rows of %lld", (long long)m, (long long)n);
    CHECK(tq_tensor_numel(ascale) == m, "matmul_i8: ascale must hold one value per row of a");
    CHECK(bscale->rank == 1 && bscale->dims[0] == n, "matmul_i8: bscale must be [%lld]",
          (long long)n);
    LIMIT(m <= INT32_MAX && n <= INT32_MAX, "matmul_i8: dims over 2^31");
    if (rest) {
        const tq_tensor *x = rest->x, *cols = rest->cols, *w = rest->w;
        CHECK(x && cols && w, "matmul_i8: rest needs x, cols and w");
        F32(x, "matmul_i8 rest x");
        F32(w, "matmul_i8 rest w");
        CHECK(cols->dtype == TQ_DTYPE_I64, "matmul_i8: rest cols must be i64, not %s",
              tq_dtype_name(cols->dtype));
        SAME_DEV(a, x);
        SAME_DEV(a, cols);
        SAME_DEV(a, w);
        CHECK(same_shape(x, a), "matmul_i8: rest x must have a's shape");
        int64_t r = tq_tensor_numel(cols);
        CHECK(cols->rank == 1 && r <= 16, "matmul_i8: rest cols must be a row of at most 16");
        CHECK(w->rank == 2 && w->dims[0] == n && w->dims[1] == r,
              "matmul_i8: rest w must be [%lld, %lld]", (long long)n, (long long)r);
        /* checked where they are on the host (elsewhere the host path's copy
         * comes back through here) */
        const int64_t *cj = tq_tensor_host(cols);
        for (int64_t p = 0; cj && p < r; p++) {
            CHECK(cj[p] >= 0 && cj[p] < k, "matmul_i8: rest column %lld is not below k = %lld",
                  (long long)cj[p], (long long)k);
            for (int64_t q = 0; q < p; q++)
                CHECK(cj[q] != cj[p], "matmul_i8: rest column %lld given twice", (long long)cj[p]);
        }
    }
    tq_matmul_then none = {NULL, 0, NULL, 0};
    const tq_matmul_then *t = then ? then : &none;
    tq_status st = then_check(t, c, "matmul_i8");
    return st ? st : CALL(c, matmul_i8, a, ascale, b, bscale, rest, beta, t, c);
}

tq_status tq_op_rownorm(const tq_tensor *x, tq_tensor *norms)
{
    F32(x, "rownorm x");
    F32(norms, "rownorm norms");
    SAME_DEV(x, norms);
    CHECK(x->rank >= 1 && tq_tensor_numel(norms) == n_rows(x),
          "rownorm: norms must hold one value per row");
    return CALL(x, rownorm, x, norms);
}

tq_status tq_op_normalize(const tq_tensor *x, float eps, tq_tensor *y)
{
    F32(x, "normalize x");
    F32(y, "normalize y");
    SAME_DEV(x, y);
    CHECK(same_shape(x, y), "normalize: x and y differ in shape");
    CHECK(eps >= 0, "normalize: eps must be >= 0");
    return CALL(x, normalize, x, eps, y);
}

tq_status tq_op_topk(const tq_tensor *x, int64_t k, tq_tensor *vals, tq_tensor *idx)
{
    F32(x, "topk x");
    F32(vals, "topk vals");
    CHECK(idx->dtype == TQ_DTYPE_I64, "topk idx must be i64");
    SAME_DEV(x, vals);
    SAME_DEV(x, idx);
    CHECK(x->rank == 2, "topk takes a rank 2 tensor");
    CHECK(k >= 0 && k <= x->dims[1], "topk: k=%lld is not within 0..%lld", (long long)k,
          (long long)x->dims[1]);
    int64_t want[2] = {x->dims[0], k};
    CHECK(vals->rank == 2 && idx->rank == 2 && vals->dims[0] == want[0] &&
              vals->dims[1] == k && idx->dims[0] == want[0] && idx->dims[1] == k,
          "topk: vals and idx must be [%lld, %lld]", (long long)want[0], (long long)k);
    return CALL(x, topk, x, k, vals, idx);
}

tq_status tq_op_softmax(const tq_tensor *x, tq_tensor *y)
{
    F32(x, "softmax x");
    F32(y, "softmax y");
    SAME_DEV(x, y);
    CHECK(x->rank >= 1 && same_shape(x, y), "softmax: x and y differ in shape");
    return CALL(x, softmax, x, y);
}

static tq_status layernorm_check(const tq_tensor *x, const tq_tensor *gamma,
                                 const tq_tensor *beta, float eps, const tq_tensor *y)
{
    F32(x, "layernorm x");
    F32(y, "layernorm y");
    SAME_DEV(x, y);
    CHECK(x->rank >= 1 && same_shape(x, y), "layernorm: x and y differ in shape");
    int64_t d = last_dim(x);
    if (gamma) {
        F32(gamma, "layernorm gamma");
        SAME_DEV(x, gamma);
        CHECK(tq_tensor_numel(gamma) == d, "layernorm: gamma must have %lld values", (long long)d);
    }
    if (beta) {
        F32(beta, "layernorm beta");
        SAME_DEV(x, beta);
        CHECK(tq_tensor_numel(beta) == d, "layernorm: beta must have %lld values", (long long)d);
    }
    CHECK(eps >= 0, "layernorm: eps must be >= 0");
    return TQ_OK;
}

tq_status tq_op_layernorm(const tq_tensor *x, const tq_tensor *gamma, const tq_tensor *beta,
                          float eps, tq_tensor *y)
{
    tq_status st = layernorm_check(x, gamma, beta, eps, y);
    return st ? st : CALL(x, layernorm, x, gamma, beta, eps, y);
}

tq_status tq_op_layernorm_low(const tq_tensor *x, const tq_tensor *gamma, const tq_tensor *beta,
                              float eps, tq_tensor *y, tq_tensor *low)
{
    tq_status st = layernorm_check(x, gamma, beta, eps, y);
    if (st)
        return st;
    CHECK(low, "layernorm_low: low is NULL (tq_op_layernorm has no copy)");
    CHECK(low->dtype == TQ_DTYPE_BF16 || low->dtype == TQ_DTYPE_F16,
          "layernorm_low low must be bf16 or f16, not %s", tq_dtype_name(low->dtype));
    SAME_DEV(low, y);
    CHECK(same_shape(low, y), "layernorm_low: low and y differ in shape");
    if (NATIVE(x, layernorm_low))
        return ENTRY(x, layernorm_low)(x->dev->ctx, x, gamma, beta, eps, y, low);
    /* the two ops, each on the device or through the host path */
    if ((st = tq_op_layernorm(x, gamma, beta, eps, y)))
        return st;
    return tq_op_convert(y, low);
}

tq_status tq_op_gelu(const tq_tensor *x, tq_tensor *y)
{
    F32(x, "gelu x");
    F32(y, "gelu y");
    SAME_DEV(x, y);
    CHECK(same_shape(x, y), "gelu: x and y differ in shape");
    return CALL(x, gelu, x, y);
}

tq_status tq_op_activate(const tq_tensor *x, tq_activation act, tq_tensor *y)
{
    F32(x, "activate x");
    F32(y, "activate y");
    SAME_DEV(x, y);
    CHECK(same_shape(x, y), "activate: x and y differ in shape");
    CHECK(act >= 0 && act < TQ_ACT_COUNT, "activate: unknown activation %d", (int)act);
    return CALL(x, activate, x, act, y);
}

tq_status tq_op_add(const tq_tensor *a, const tq_tensor *b, tq_tensor *y)
{
    F32(a, "add a");
    F32(b, "add b");
    F32(y, "add y");
    SAME_DEV(a, b);
    SAME_DEV(a, y);
    CHECK(same_shape(a, y), "add: a and y differ in shape");
    CHECK(same_shape(a, b) || (b->rank == 1 && b->dims[0] == last_dim(a)),
          "add: b must match a, or be a row of %lld values", (long long)last_dim(a));
    return CALL(a, add, a, b, y);
}

tq_status tq_op_scale(const tq_tensor *x, float alpha, tq_tensor *y)
{
    F32(x, "scale x");
    F32(y, "scale y");
    SAME_DEV(x, y);
    CHECK(same_shape(x, y), "scale: x and y differ in shape");
    return CALL(x, scale, x, alpha, y);
}

tq_status tq_op_gather(const tq_tensor *x, const tq_tensor *idx, tq_tensor *y)
{
    CHECK(tq_dtype_size(x->dtype) > 0, "gather: x must have a plain dtype");
    CHECK(x->dtype == y->dtype, "gather: x and y differ in dtype");
    CHECK(idx->dtype == TQ_DTYPE_I64 && idx->rank == 1, "gather: idx must be i64 [n]");
    SAME_DEV(x, idx);
    SAME_DEV(x, y);
    CHECK(x->rank >= 1 && y->rank == x->rank && y->dims[0] == idx->dims[0],
          "gather: y must have one row per index");
    for (int i = 1; i < x->rank; i++)
        CHECK(x->dims[i] == y->dims[i], "gather: x and y rows differ in shape");
    return CALL(x, gather, x, idx, y);
}

tq_status tq_op_convert(const tq_tensor *x, tq_tensor *y)
{
    SAME_DEV(x, y);
    CHECK(same_shape(x, y), "convert: x and y differ in shape");
    return CALL(x, convert, x, y);
}

tq_status tq_op_simtopk(const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                        int64_t idx_base, tq_tensor *vals, tq_tensor *idx)
{
    F32(q, "simtopk q");
    F32(db, "simtopk db");
    F32(vals, "simtopk vals");
    CHECK(idx->dtype == TQ_DTYPE_I64, "simtopk idx must be i64");
    SAME_DEV(q, db);
    SAME_DEV(q, vals);
    SAME_DEV(q, idx);
    CHECK(metric == TQ_METRIC_DOT || metric == TQ_METRIC_L2, "simtopk: unknown metric %d",
          (int)metric);
    CHECK(q->rank == 2 && db->rank == 2, "simtopk takes rank 2 q and db");
    CHECK(q->dims[1] == db->dims[1], "simtopk: q rows have %lld values, db rows %lld",
          (long long)q->dims[1], (long long)db->dims[1]);
    LIMIT(q->dims[1] <= INT32_MAX && db->dims[0] <= INT32_MAX && q->dims[0] <= INT32_MAX,
          "simtopk: dims over 2^31");
    CHECK(vals->rank == 2 && idx->rank == 2 && vals->dims[0] == q->dims[0] &&
              idx->dims[0] == q->dims[0] && vals->dims[1] == idx->dims[1],
          "simtopk: vals and idx must both be [%lld, k]", (long long)q->dims[0]);
    CHECK(idx_base >= 0 && idx_base <= INT64_MAX - db->dims[0],
          "simtopk: idx_base %lld out of range", (long long)idx_base);
    return CALL(q, simtopk, q, db, metric, idx_base, vals, idx);
}

tq_status tq_op_above(const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt, tq_tensor *lst)
{
    F32(x, "above x");
    F32(thr, "above thr");
    CHECK(cnt->dtype == TQ_DTYPE_I32 && lst->dtype == TQ_DTYPE_I32, "above: cnt and lst must be i32");
    SAME_DEV(x, thr);
    SAME_DEV(x, cnt);
    SAME_DEV(x, lst);
    CHECK(x->rank == 2 && thr->rank == 1 && cnt->rank == 1 && lst->rank == 2,
          "above takes x [rows, m], thr [rows], cnt [rows] and lst [rows, cap]");
    CHECK(thr->dims[0] == x->dims[0] && cnt->dims[0] == x->dims[0] && lst->dims[0] == x->dims[0],
          "above: thr, cnt and lst must have x's %lld rows", (long long)x->dims[0]);
    LIMIT(x->dims[0] <= INT32_MAX && x->dims[1] <= INT32_MAX && lst->dims[1] <= INT32_MAX,
          "above: dims over 2^31");
    return CALL(x, above, x, thr, cnt, lst);
}

/* What codetopk and codematrix ask of their codes, scales and metric. */
static tq_status check_codes(const char *op, const tq_tensor *q, const tq_tensor *qscale,
                             const tq_tensor *db, const tq_tensor *dbscale, tq_metric metric)
{
    int i8 = q->dtype == TQ_DTYPE_I8;
    int blocks = db->dtype == TQ_DTYPE_Q8_0 || db->dtype == TQ_DTYPE_Q4_0;
    CHECK(blocks ? q->dtype == TQ_DTYPE_Q8_0
                 : (i8 || q->dtype == TQ_DTYPE_BIT) && db->dtype == q->dtype,
          "%s takes i8 or bit q and db of one dtype, or q8_0 q with q8_0 or q4_0 db, not %s "
          "and %s", op, tq_dtype_name(q->dtype), tq_dtype_name(db->dtype));
    CHECK(i8 || blocks ? metric == TQ_METRIC_DOT : metric == TQ_METRIC_HAMMING,
          "%s: %s codes take the metric %s", op, tq_dtype_name(q->dtype),
          i8 || blocks ? "dot" : "hamming");
    CHECK(!blocks || q->dims[1] % TQ_QK == 0, "%s: q8_0 and q4_0 rows of a multiple of %d values",
          op, TQ_QK);
    CHECK(i8 == (qscale != NULL) && i8 == (dbscale != NULL),
          "%s: scales go with i8 codes, and only with them", op);
    SAME_DEV(q, db);
    CHECK(q->rank == 2 && db->rank == 2, "%s takes rank 2 q and db", op);
    CHECK(q->dims[1] == db->dims[1], "%s: q rows have %lld values, db rows %lld", op,
          (long long)q->dims[1], (long long)db->dims[1]);
    LIMIT(!i8 || q->dims[1] <= (1 << 17), "%s: rows of %lld i8 codes are over its limit of 2^17",
          op, (long long)q->dims[1]);
    LIMIT(q->dims[1] <= INT32_MAX && db->dims[0] <= INT32_MAX && q->dims[0] <= INT32_MAX,
          "%s: dims over 2^31", op);
    if (i8) {
        CHECK(qscale->dtype == TQ_DTYPE_F32 && dbscale->dtype == TQ_DTYPE_F32,
              "%s: scales must be f32", op);
        SAME_DEV(q, qscale);
        SAME_DEV(q, dbscale);
        CHECK(tq_tensor_numel(qscale) == q->dims[0] && tq_tensor_numel(dbscale) == db->dims[0],
              "%s: one scale a row", op);
    }
    return TQ_OK;
}

tq_status tq_op_codetopk(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *db,
                         const tq_tensor *dbscale, tq_metric metric, int64_t idx_base,
                         tq_tensor *vals, tq_tensor *idx)
{
    tq_status st = check_codes("codetopk", q, qscale, db, dbscale, metric);
    if (st)
        return st;
    F32(vals, "codetopk vals");
    CHECK(idx->dtype == TQ_DTYPE_I64, "codetopk idx must be i64");
    SAME_DEV(q, vals);
    SAME_DEV(q, idx);
    CHECK(vals->rank == 2 && idx->rank == 2 && vals->dims[0] == q->dims[0] &&
              idx->dims[0] == q->dims[0] && vals->dims[1] == idx->dims[1],
          "codetopk: vals and idx must both be [%lld, k]", (long long)q->dims[0]);
    CHECK(idx_base >= 0 && idx_base <= INT64_MAX - db->dims[0],
          "codetopk: idx_base %lld out of range", (long long)idx_base);
    return CALL(q, codetopk, q, qscale, db, dbscale, metric, idx_base, vals, idx);
}

tq_status tq_op_codematrix(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *db,
                           const tq_tensor *dbscale, tq_metric metric, tq_tensor *out)
{
    tq_status st = check_codes("codematrix", q, qscale, db, dbscale, metric);
    if (st)
        return st;
    F32(out, "codematrix out");
    SAME_DEV(q, out);
    CHECK(out->rank == 2 && out->dims[0] == q->dims[0] && out->dims[1] == db->dims[0],
          "codematrix: out must be [%lld, %lld]", (long long)q->dims[0], (long long)db->dims[0]);
    return CALL(q, codematrix, q, qscale, db, dbscale, metric, out);
}

tq_status tq_op_codescreen(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *qterms,
                           const tq_tensor *db, const tq_tensor *dbscale, const tq_tensor *dbterms,
                           tq_tensor *out)
{
    CHECK(q->dtype == TQ_DTYPE_I8 && db->dtype == TQ_DTYPE_I8 && qscale && dbscale,
          "codescreen takes i8 q and db with their scales");
    tq_status st = check_codes("codescreen", q, qscale, db, dbscale, TQ_METRIC_DOT);
    if (st)
        return st;
    F32(qterms, "codescreen qterms");
    F32(dbterms, "codescreen dbterms");
    SAME_DEV(q, qterms);
    SAME_DEV(q, dbterms);
    SAME_DEV(q, out);
    CHECK(qterms->rank == 2 && dbterms->rank == 2 && qterms->dims[0] == q->dims[0] &&
              dbterms->dims[0] == db->dims[0] && qterms->dims[1] == dbterms->dims[1] &&
              qterms->dims[1] >= 1 && qterms->dims[1] <= 8,
          "codescreen: terms must be [%lld, m] and [%lld, m], 1 <= m <= 8", (long long)q->dims[0],
          (long long)db->dims[0]);
    CHECK(out->dtype == TQ_DTYPE_I32 && out->rank == 2 && out->dims[0] == q->dims[0] &&
              out->dims[1] == (db->dims[0] + 31) / 32,
          "codescreen: out must be i32 [%lld, %lld]", (long long)q->dims[0],
          (long long)(db->dims[0] + 31) / 32);
    return CALL(q, codescreen, q, qscale, qterms, db, dbscale, dbterms, out);
}

int tq_op_codescreen_native(const tq_device *dev)
{
    const tq_backend *b = dev->backend;
    return b->ops.codescreen && (b->kind == TQ_BACKEND_CPU || !tq_device_host_forced());
}

struct tq_rowprod {
    const tq_tensor *db;
    void *state; /* the backend's, from rowprod_prepare, or the host path's */
    int host;    /* the backend has no rowprod: the host path computes */
};

tq_status tq_rowprod_new(const tq_tensor *db, tq_rowprod **out)
{
    *out = NULL;
    F32(db, "rowprod db");
    CHECK(db->rank == 2, "rowprod takes a rank 2 db");
    LIMIT(db->dims[0] <= INT32_MAX && db->dims[1] <= INT32_MAX, "rowprod: dims over 2^31");
    if (!NATIVE(db, rowprod) && ON_CPU(db))
        return dispatch_missing(db, "rowprod");
    tq_rowprod *p = calloc(1, sizeof *p);
    if (!p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    p->db = db;
    p->host = !NATIVE(db, rowprod);
    tq_status st = p->host ? tq_host_rowprod_prepare(db, &p->state)
                   : ENTRY(db, rowprod_prepare)
                       ? ENTRY(db, rowprod_prepare)(db->dev->ctx, db, &p->state)
                       : TQ_OK;
    if (st) {
        free(p);
        return st;
    }
    *out = p;
    return TQ_OK;
}

tq_status tq_op_rowprod(tq_rowprod *p, const tq_tensor *q, float alpha, tq_tensor *out)
{
    const tq_tensor *db = p->db;
    F32(q, "rowprod q");
    F32(out, "rowprod out");
    SAME_DEV(q, db);
    SAME_DEV(q, out);
    CHECK(q->rank == 2 && q->dims[1] == db->dims[1],
          "rowprod: q must be [m, %lld], the database's rows", (long long)db->dims[1]);
    LIMIT(q->dims[0] <= INT32_MAX, "rowprod: dims over 2^31");
    CHECK(out->rank == 2 && out->dims[0] == q->dims[0] && out->dims[1] == db->dims[0],
          "rowprod: out must be [%lld, %lld]", (long long)q->dims[0], (long long)db->dims[0]);
    if (p->host)
        return tq_host_rowprod(p->state, q, alpha, out);
    return ENTRY(db, rowprod)(db->dev->ctx, p->state, db, q, alpha, out);
}

void tq_rowprod_free(tq_rowprod *p)
{
    if (!p)
        return;
    if (p->host)
        tq_host_rowprod_release(p->state);
    else if (p->state && ENTRY(p->db, rowprod_release))
        ENTRY(p->db, rowprod_release)(p->db->dev->ctx, p->state);
    free(p);
}

/* An i64 tensor of exactly the dims given (rank n). */
static int is_i64_shape(const tq_tensor *t, int rank, const int64_t *dims)
{
    if (t->dtype != TQ_DTYPE_I64 || t->rank != rank)
        return 0;
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != dims[i])
            return 0;
    return 1;
}

tq_status tq_op_attention(const tq_tensor *q, const tq_tensor *k, const tq_tensor *v,
                          const tq_attention_args *args, tq_tensor *out)
{
    CHECK(args, "attention: no arguments");
    F32(q, "attention q");
    F32(k, "attention k");
    F32(v, "attention v");
    F32(out, "attention out");
    SAME_DEV(q, k);
    SAME_DEV(q, v);
    SAME_DEV(q, out);
    CHECK(q->rank >= 2 && q->rank <= 3 && k->rank == q->rank && v->rank == q->rank &&
              out->rank == q->rank,
          "attention takes q, k, v and out all of rank 2, or all of rank 3 (batched)");
    int r3 = q->rank == 3;
    int64_t B = r3 ? q->dims[0] : 1;
    const int64_t *qd = q->dims + r3, *kd = k->dims + r3, *vd = v->dims + r3,
                  *od = out->dims + r3;
    CHECK(!r3 || (k->dims[0] == B && v->dims[0] == B && out->dims[0] == B),
          "attention: q, k, v and out differ in batch size");
    int64_t Lq = qd[0], Lk = kd[0];
    CHECK(qd[1] == kd[1], "attention: q and k differ in width (%lld and %lld)",
          (long long)qd[1], (long long)kd[1]);
    CHECK(vd[0] == Lk, "attention: k has %lld rows, v %lld", (long long)Lk, (long long)vd[0]);
    CHECK(od[0] == Lq && od[1] == vd[1], "attention: out must be [%lld, %lld]", (long long)Lq,
          (long long)vd[1]);
    int H = args->heads;
    CHECK(H >= 1, "attention: heads must be >= 1, not %d", H);
    CHECK(qd[1] % H == 0 && vd[1] % H == 0,
          "attention: %d heads do not divide the widths %lld (q, k) and %lld (v)", H,
          (long long)qd[1], (long long)vd[1]);
    CHECK(isfinite(args->scale),
          "attention: scale must be finite");
    LIMIT(Lq <= INT32_MAX && Lk <= INT32_MAX && qd[1] <= INT32_MAX && vd[1] <= INT32_MAX,
          "attention: dims over 2^31");
    if (args->key_len) {
        SAME_DEV(q, args->key_len);
        CHECK(is_i64_shape(args->key_len, 1, &B), "attention: key_len must be i64 [%lld]",
              (long long)B);
    }
    CHECK(!args->qgroup == !args->kgroup, "attention: qgroup and kgroup go together");
    if (args->qgroup) {
        int64_t qg[2] = {B, Lq}, kg[2] = {B, Lk};
        SAME_DEV(q, args->qgroup);
        SAME_DEV(q, args->kgroup);
        CHECK(is_i64_shape(args->qgroup, 2, qg), "attention: qgroup must be i64 [%lld, %lld]",
              (long long)B, (long long)Lq);
        CHECK(is_i64_shape(args->kgroup, 2, kg), "attention: kgroup must be i64 [%lld, %lld]",
              (long long)B, (long long)Lk);
    }
    if (args->received) {
        F32(args->received, "attention received");
        SAME_DEV(q, args->received);
        CHECK(args->received->rank == 2 && args->received->dims[0] == B &&
                  args->received->dims[1] == Lk,
              "attention: received must be [%lld, %lld]", (long long)B, (long long)Lk);
    }
    if (args->weights) {
        const tq_tensor *w = args->weights;
        F32(w, "attention weights");
        SAME_DEV(q, w);
        CHECK(w->rank == 4 && w->dims[0] == B && w->dims[1] == H && w->dims[2] == Lq &&
                  w->dims[3] == Lk,
              "attention: weights must be [%lld, %d, %lld, %lld]", (long long)B, H,
              (long long)Lq, (long long)Lk);
    }
    if (args->bias) {
        const tq_tensor *bs = args->bias;
        F32(bs, "attention bias");
        SAME_DEV(q, bs);
        CHECK(bs->rank == 3 && bs->dims[0] == H && bs->dims[1] == Lq && bs->dims[2] == Lk,
              "attention: bias must be [%d, %lld, %lld]", H, (long long)Lq, (long long)Lk);
    }
    if (args->low) {
        CHECK(args->low->dtype == TQ_DTYPE_BF16 || args->low->dtype == TQ_DTYPE_F16,
              "attention low must be bf16 or f16, not %s", tq_dtype_name(args->low->dtype));
        SAME_DEV(q, args->low);
        CHECK(same_shape(args->low, out), "attention: low and out differ in shape");
        if (!ON_CPU(q)) { /* the op, then the rounding, each on the device or the host */
            tq_attention_args a = *args;
            a.low = NULL;
            tq_status st = CALL(q, attention, q, k, v, &a, out);
            return st ? st : tq_op_convert(out, args->low);
        }
    }
    return CALL(q, attention, q, k, v, args, out);
}

/* ---- training: the backward of the activations ---- */

static tq_status check_act_grad(const tq_tensor *x, const tq_tensor *dy, tq_tensor *dx,
                                const char *op)
{
    F32(x, "activation grad x");
    F32(dy, "activation grad dy");
    F32(dx, "activation grad dx");
    SAME_DEV(x, dy);
    SAME_DEV(x, dx);
    CHECK(same_shape(x, dy) && same_shape(x, dx), "%s: x, dy and dx differ in shape", op);
    return TQ_OK;
}

tq_status tq_op_activate_grad(const tq_tensor *x, tq_activation act, const tq_tensor *dy,
                              tq_tensor *dx)
{
    tq_status st = check_act_grad(x, dy, dx, "activate_grad");
    if (st)
        return st;
    CHECK(act >= 0 && act < TQ_ACT_COUNT, "activate_grad: unknown activation %d", (int)act);
    return CALL(x, activate_grad, x, act, dy, dx);
}

tq_status tq_op_gelu_grad(const tq_tensor *x, const tq_tensor *dy, tq_tensor *dx)
{
    tq_status st = check_act_grad(x, dy, dx, "gelu_grad");
    return st ? st : CALL(x, gelu_grad, x, dy, dx);
}
