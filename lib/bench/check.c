/* check.c: tq-bench --check: each op on a device against the same op on the
 * CPU, on the same seeded inputs, by the tolerance the op's table entry gives
 * (NMSE, or bit identity where the op promises it). TQ_BENCH_PERTURB=op:device
 * (for the tests only) changes one value of that op's output on that device
 * after it is read back, to prove that a wrong result is caught. */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int perturb_wanted(const char *op, const char *device)
{
    const char *e = getenv("TQ_BENCH_PERTURB");
    if (!e)
        return 0;
    size_t l = strlen(op);
    return !strncmp(e, op, l) && e[l] == ':' && !strcmp(e + l + 1, device);
}

static void perturb(tq_dtype dt, void *p)
{
    if (dt == TQ_DTYPE_F32)
        *(float *)p += 1.0f;
    else if (dt == TQ_DTYPE_I64)
        *(int64_t *)p ^= 1;
    else
        *(unsigned char *)p ^= 0x80;
}

/* NMSE of y against ref (f32); a non-finite value must match exactly. */
static double nmse(const float *y, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(ref[i]) || !isfinite(y[i])) {
            if (memcmp(&y[i], &ref[i], 4) && !(isnan(y[i]) && isnan(ref[i])))
                return INFINITY;
            continue;
        }
        double e = (double)y[i] - (double)ref[i];
        num += e * e;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

tq_status tqb_check(FILE *f, const tqb_opdef *op, tq_device *dev, tq_device *cpu, int64_t n,
                    uint64_t seed, int *bad)
{
    tqb_inst *a = NULL, *b = NULL;
    void *ya = NULL, *yb = NULL;
    tq_status st = tqb_inst_new(op, dev, n, seed, &a);
    if (!st)
        st = tqb_inst_new(op, cpu, n, seed, &b);
    if (!st)
        st = tqb_inst_run(a);
    if (!st)
        st = tq_device_sync(dev);
    if (!st)
        st = tqb_inst_run(b);
    int mismatch = 0;
    char why[160] = "";
    double worst = 0;
    for (int k = 0; !st && k < a->nout; k++) {
        const tq_tensor *ta = a->t[a->out[k]], *tb = b->t[b->out[k]];
        free(ya), free(yb);
        ya = malloc(ta->nbytes + 1), yb = malloc(tb->nbytes + 1);
        if (!ya || !yb) {
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            break;
        }
        if ((st = tq_tensor_download(ta, ya, ta->nbytes)) ||
            (st = tq_tensor_download(tb, yb, tb->nbytes)))
            break;
        if (ta->nbytes && perturb_wanted(op->name, tq_device_name(dev)))
            perturb(ta->dtype, ya);
        int64_t cnt = tq_tensor_numel(ta);
        if (op->cmp == TQB_CMP_BITS || ta->dtype != TQ_DTYPE_F32) {
            size_t es = ta->nbytes / (size_t)(cnt ? cnt : 1);
            int64_t diff = 0;
            for (int64_t i = 0; i < cnt; i++)
                diff += memcmp((char *)ya + (size_t)i * es, (char *)yb + (size_t)i * es, es) != 0;
            if (diff && !mismatch) {
                mismatch = 1;
                snprintf(why, sizeof why, "%lld of %lld %s values differ (bit identity promised)",
                         (long long)diff, (long long)cnt, tq_dtype_name(ta->dtype));
            }
        } else {
            double e = nmse(ya, yb, cnt);
            worst = e > worst || isnan(e) ? e : worst;
            if (!(e <= op->tol) && !mismatch) {
                mismatch = 1;
                snprintf(why, sizeof why, "NMSE %.3g > %.0e", e, op->tol);
            }
        }
    }
    if (!st) {
        if (mismatch)
            ++*bad;
        if (mismatch)
            fprintf(f, "%-9s %-10s %-24s MISMATCH: %s\n", tq_device_name(dev), op->name, a->shape,
                    why);
        else if (op->cmp == TQB_CMP_BITS)
            fprintf(f, "%-9s %-10s %-24s ok: bit-identical to the CPU\n", tq_device_name(dev),
                    op->name, a->shape);
        else
            fprintf(f, "%-9s %-10s %-24s ok: NMSE %.2g <= %.0e\n", tq_device_name(dev), op->name,
                    a->shape, worst, op->tol);
    }
    if (st == TQ_ERR_RUNTIME) /* the device failed: no later check on it could be trusted */
        tq_fail_context(st, "%s on %s", op->name, tq_device_name(dev));
    else if (st && st != TQ_ERR_NOMEM) { /* the op failed there: a line, and the check goes on */
        fprintf(f, "%-9s %-10s %-24s FAILED: %s\n", tq_device_name(dev), op->name,
                a ? a->shape : "-", tq_errmsg());
        ++*bad;
        st = TQ_OK;
    }
    free(ya), free(yb);
    tqb_inst_free(a);
    tqb_inst_free(b);
    return st;
}
