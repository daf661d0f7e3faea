/* compare.c: two runs side by side (--compare OLD NEW, --baseline OLD): the
 * rows of the same device, op, shape and dtype, the ratio of their median
 * times, and a verdict that calls a row slower or faster only when the
 * difference is beyond the measured spread of both runs: their min..max
 * ranges do not overlap and the change exceeds twice the sum of their
 * spreads (MAD %). Anything less is noise ("~"). */
#include "bench.h"
#include "../io/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
    const char *device, *op, *shape, *dtype;
    double median, min, max, mad;
} row;

static const char *str_of(const tq_json *o, const char *k)
{
    const tq_json *v = tq_json_get(o, k);
    return v && v->type == TQ_JSON_STR ? v->str : NULL;
}

static int num_of(const tq_json *o, const char *k, double *out)
{
    const tq_json *v = tq_json_get(o, k);
    if (!v || v->type != TQ_JSON_NUM)
        return 0;
    *out = v->num;
    return 1;
}

/* The results of a report: rows[] point into the JSON tree. */
static tq_status rows_of(const tq_json *doc, const char *label, row **rows, size_t *n)
{
    const tq_json *res = doc && doc->type == TQ_JSON_OBJ ? tq_json_get(doc, "results") : NULL;
    if (!res || res->type != TQ_JSON_ARR)
        return tq_fail(TQ_ERR_DATA, "%s: not a tq-bench JSON report (no \"results\" array)", label);
    *rows = calloc(res->n + 1, sizeof **rows);
    if (!*rows)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < res->n; i++) {
        const tq_json *o = &res->items[i];
        row *r = &(*rows)[i];
        if (o->type != TQ_JSON_OBJ || !(r->device = str_of(o, "device")) ||
            !(r->op = str_of(o, "op")) || !(r->shape = str_of(o, "shape")) ||
            !(r->dtype = str_of(o, "dtype")) || !num_of(o, "median_s", &r->median) ||
            !num_of(o, "min_s", &r->min) || !num_of(o, "max_s", &r->max) ||
            !num_of(o, "mad_pct", &r->mad) || !(r->median > 0)) {
            free(*rows);
            return tq_fail(TQ_ERR_DATA,
                           "%s: result %zu lacks device, op, shape, dtype, median_s, min_s, "
                           "max_s or mad_pct",
                           label, i);
        }
    }
    *n = res->n;
    return TQ_OK;
}

/* The new report in memory as the JSON writer writes it, parsed back. */
static tq_status parse_report(const tqb_report *r, tq_json **doc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st = tqb_report_write(m, TQB_FMT_JSON, r);
    if (fclose(m) && !st)
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = tq_json_parse(buf, len, doc);
    free(buf);
    return st;
}

tq_status tqb_compare(FILE *f, const char *old_path, const char *new_path,
                      const tqb_report *new_r, double fail_pct, int *slower)
{
    tq_json *od = NULL, *nd = NULL;
    row *orows = NULL, *nrows = NULL;
    size_t on = 0, nn = 0;
    *slower = 0;
    tq_status st = tq_json_load(old_path, &od);
    if (!st)
        st = new_path ? tq_json_load(new_path, &nd) : parse_report(new_r, &nd);
    if (!st)
        st = rows_of(od, old_path, &orows, &on);
    if (!st)
        st = rows_of(nd, new_path ? new_path : "this run", &nrows, &nn);
    if (st)
        goto done;
    fputs("| device | op | shape | dtype | old | new | new/old | verdict |\n"
          "|---|---|---|---|--:|--:|--:|---|\n",
          f);
    int matched = 0, nslow = 0, nfast = 0;
    for (size_t j = 0; j < nn; j++) {
        const row *b = &nrows[j], *a = NULL;
        for (size_t i = 0; i < on && !a; i++)
            if (!strcmp(orows[i].device, b->device) && !strcmp(orows[i].op, b->op) &&
                !strcmp(orows[i].shape, b->shape) && !strcmp(orows[i].dtype, b->dtype))
                a = &orows[i];
        if (!a)
            continue;
        matched++;
        double ratio = b->median / a->median, change = 100.0 * fabs(ratio - 1.0);
        double noise = 2.0 * (a->mad + b->mad);
        const char *verdict = "~";
        if (b->min > a->max && change > noise) {
            verdict = "slower";
            nslow++;
            if (fail_pct >= 0 && change > fail_pct)
                ++*slower;
        } else if (b->max < a->min && change > noise) {
            verdict = "faster";
            nfast++;
        }
        fprintf(f, "| %s | %s | %s | %s | %.4g s | %.4g s | %.3f | %s |\n", b->device, b->op,
                b->shape, b->dtype, a->median, b->median, ratio, verdict);
    }
    fprintf(f, "\n%d rows compared (%zu old, %zu new): %d slower, %d faster, %d within the "
               "noise.\n",
            matched, on, nn, nslow, nfast, matched - nslow - nfast);
    if (fail_pct >= 0)
        fprintf(f, "%d slower by more than %g%%.\n", *slower, fail_pct);
done:
    free(orows);
    free(nrows);
    tq_json_free(od);
    tq_json_free(nd);
    return st;
}
