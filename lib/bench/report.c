/* report.c: the writers of a run's report: a markdown table (the default),
 * CSV (the context as leading "# " lines), JSON (one object: context,
 * ceilings, results with every repetition's time) and JSON lines (one object
 * a line: the context, each ceiling, each result). Times in seconds in the
 * data formats, in readable units in the table. */
#include "bench.h"

#include <math.h>
#include <string.h>

void tqb_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* A finite number for JSON (NaN and inf have no JSON form: null). */
static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fputs("null", f);
}

static void human_time(char *out, size_t n, double s)
{
    if (s >= 1)
        snprintf(out, n, "%.3g s", s);
    else if (s >= 1e-3)
        snprintf(out, n, "%.3g ms", s * 1e3);
    else
        snprintf(out, n, "%.3g us", s * 1e6);
}

static const tqb_ceiling *ceiling_of(const tqb_report *r, const char *device)
{
    for (int i = 0; i < r->ctx.ndev; i++)
        if (!strcmp(r->ceil[i].device, device))
            return &r->ceil[i];
    return NULL;
}

static const char *bound_name(const tqb_report *r, const tqb_result *x)
{
    const tqb_ceiling *c = ceiling_of(r, x->device);
    if (!c) /* a whole process (--tools): no ceiling bounds it */
        return "-";
    return x->bound ? x->bound : x->compute_bound ? c->compute_what : c->mem_what;
}

static void md(FILE *f, const tqb_report *r, const tqb_kv *kv, int nkv)
{
    fputs("# tq-bench\n\n", f);
    for (int i = 0; i < nkv; i++)
        fprintf(f, "- %s: %s\n", kv[i].key, kv[i].val);
    fputs("\n## Ceilings\n\n", f);
    for (int i = 0; i < r->ctx.ndev; i++) {
        char line[512];
        tqb_ceiling_line(&r->ceil[i], line, sizeof line);
        fprintf(f, "- %s\n", line);
    }
    if (!r->nrows)
        return;
    fputs("\n## Results\n\n"
          "| device | op | shape | dtype | time | min | max | rate | of ceiling | spread |\n"
          "|---|---|---|---|--:|--:|--:|--:|--:|--:|\n",
          f);
    int noisy = 0;
    for (int i = 0; i < r->nrows; i++) {
        const tqb_result *x = &r->rows[i];
        char med[32], mn[32], mx[32], frac[48] = "-";
        human_time(med, sizeof med, x->t.median);
        human_time(mn, sizeof mn, x->t.min);
        human_time(mx, sizeof mx, x->t.max);
        if (x->frac > 0)
            snprintf(frac, sizeof frac, "%.0f%% %s", 100 * x->frac, bound_name(r, x));
        int bad = x->t.mad_pct > TQB_NOISY_PCT;
        noisy |= bad;
        fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %.3g %s | %s | %.1f%%%s |\n", x->device,
                x->op, x->shape, x->dtype, med, mn, mx, x->rate, x->unit, frac, x->t.mad_pct,
                bad ? " !" : "");
    }
    fputc('\n', f);
    if (noisy)
        fprintf(f, "! spread (median absolute deviation) above %.0f%%: too noisy to trust.\n",
                TQB_NOISY_PCT);
    for (int i = 0; i < r->nnotes; i++)
        fprintf(f, "%s\n", r->notes[i]);
}

/* A CSV field: quoted when it holds a comma or a quote. */
static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv(FILE *f, const tqb_report *r, const tqb_kv *kv, int nkv)
{
    for (int i = 0; i < nkv; i++)
        fprintf(f, "# %s: %s\n", kv[i].key, kv[i].val);
    for (int i = 0; i < r->ctx.ndev; i++) {
        char line[512];
        tqb_ceiling_line(&r->ceil[i], line, sizeof line);
        fprintf(f, "# ceiling %s\n", line);
    }
    fputs("device,op,shape,dtype,n,reps,iters,median_s,min_s,max_s,mad_pct,flops,bytes,rate,"
          "unit,bound,frac\n",
          f);
    for (int i = 0; i < r->nrows; i++) {
        const tqb_result *x = &r->rows[i];
        csv_field(f, x->device);
        fprintf(f, ",%s,", x->op);
        csv_field(f, x->shape);
        fprintf(f, ",%s,%lld,%d,%lld,%.6g,%.6g,%.6g,%.3g,%.17g,%.17g,%.6g,%s,%s,%.4g\n", x->dtype,
                (long long)x->n, x->t.reps, (long long)x->t.iters, x->t.median, x->t.min,
                x->t.max, x->t.mad_pct, x->flops, x->bytes, x->rate, x->unit,
                bound_name(r, x), x->frac);
    }
}

/* The context values under key as JSON members "NAME": "REST", each value
 * split at its first sep (NAME cut to 255 bytes; no sep: all NAME). */
static void json_pairs(FILE *f, const tqb_kv *kv, int nkv, const char *key, const char *sep)
{
    int first = 1;
    for (int i = 0; i < nkv; i++) {
        if (strcmp(kv[i].key, key))
            continue;
        const char *at = strstr(kv[i].val, sep);
        size_t l = at ? (size_t)(at - kv[i].val) : strlen(kv[i].val);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(l < 255 ? l : 255), kv[i].val);
        fputs(first ? "" : ", ", f);
        first = 0;
        tqb_json_str(f, name);
        fputs(": ", f);
        tqb_json_str(f, at ? at + strlen(sep) : "");
    }
}

static void json_context(FILE *f, const tqb_kv *kv, int nkv)
{
    fputc('{', f);
    int first = 1;
    for (int i = 0; i < nkv; i++) {
        if (!strcmp(kv[i].key, "device") || !strcmp(kv[i].key, "env") ||
            !strcmp(kv[i].key, "timer"))
            continue;
        fputs(first ? "" : ", ", f);
        first = 0;
        tqb_json_str(f, kv[i].key);
        fputs(": ", f);
        tqb_json_str(f, kv[i].val);
    }
    fputs(", \"devices\": [", f);
    first = 1;
    for (int i = 0; i < nkv; i++)
        if (!strcmp(kv[i].key, "device")) {
            fputs(first ? "" : ", ", f);
            first = 0;
            tqb_json_str(f, kv[i].val);
        }
    /* "timers": {"cpu": "host clock", "vulkan:0": "timestamp queries"}; a
     * device's name has no ": " in it */
    fputs("], \"timers\": {", f);
    json_pairs(f, kv, nkv, "timer", ": ");
    fputs("}, \"env\": {", f);
    json_pairs(f, kv, nkv, "env", "=");
    fputs("}}", f);
}

/* ", "KEY": "VALUE" and ", "KEY": NUMBER (sep "{" for the first member). */
static void kstr(FILE *f, const char *sep, const char *k, const char *v)
{
    fprintf(f, "%s\"%s\": ", sep, k);
    tqb_json_str(f, v);
}
static void knum(FILE *f, const char *k, double v)
{
    fprintf(f, ", \"%s\": ", k);
    json_num(f, v);
}

static void json_ceiling(FILE *f, const tqb_ceiling *c)
{
    char mem[32];
    kstr(f, "{", "device", c->device);
    if (!c->gpu) {
        knum(f, "fma_gflops", c->fma_gflops);
        kstr(f, ", ", "fma_isa", c->fma_isa);
        if (c->amx_bf16_gflops > 0 || c->amx_int8_gops > 0) {
            knum(f, "amx_bf16_gflops", c->amx_bf16_gflops);
            knum(f, "amx_int8_gops", c->amx_int8_gops);
        }
    } else if (c->fma_gflops > 0) { /* a backend without the probe has none */
        knum(f, "fma_gflops", c->fma_gflops);
        knum(f, "fma_threads", (double)c->fma_threads);
        knum(f, "fma_iters", (double)c->fma_iters);
    }
    knum(f, "sgemm_gflops", c->sgemm_gflops);
    kstr(f, ", ", "sgemm_engine", c->sgemm_engine);
    knum(f, "sgemm_n", (double)c->sgemm_n);
    if (c->gpu) {
        knum(f, "f16_gflops", c->f16_gflops);
        knum(f, "f16_n", (double)c->f16_n);
    }
    snprintf(mem, sizeof mem, "%s_gbs", c->mem_what);
    knum(f, mem, c->mem_gbs);
    kstr(f, ", ", "compute", c->compute_what);
    kstr(f, ", ", "memory", c->mem_what);
    fputc('}', f);
}

static void json_result(FILE *f, const tqb_report *r, const tqb_result *x)
{
    kstr(f, "{", "device", x->device);
    kstr(f, ", ", "op", x->op);
    kstr(f, ", ", "shape", x->shape);
    kstr(f, ", ", "dtype", x->dtype);
    fprintf(f, ", \"n\": %lld, \"reps\": %d, \"iters\": %lld", (long long)x->n, x->t.reps,
            (long long)x->t.iters);
    knum(f, "median_s", x->t.median);
    knum(f, "min_s", x->t.min);
    knum(f, "max_s", x->t.max);
    knum(f, "mad_pct", x->t.mad_pct);
    fputs(", \"times_s\": [", f);
    for (int i = 0; i < x->t.reps; i++) {
        fputs(i ? ", " : "", f);
        json_num(f, x->t.times[i]);
    }
    /* work and traffic are whole numbers: all their digits */
    fprintf(f, "], \"flops\": %.17g, \"bytes\": %.17g", x->flops, x->bytes);
    knum(f, "rate", x->rate);
    kstr(f, ", ", "unit", x->unit);
    kstr(f, ", ", "bound", bound_name(r, x));
    knum(f, "frac", x->frac);
    fputc('}', f);
}

static void json(FILE *f, const tqb_report *r, const tqb_kv *kv, int nkv)
{
    fputs("{\"context\": ", f);
    json_context(f, kv, nkv);
    fputs(",\n\"ceilings\": [", f);
    for (int i = 0; i < r->ctx.ndev; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        json_ceiling(f, &r->ceil[i]);
    }
    fputs("],\n\"results\": [", f);
    for (int i = 0; i < r->nrows; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        json_result(f, r, &r->rows[i]);
    }
    fputs("]}\n", f);
}

static void jsonl(FILE *f, const tqb_report *r, const tqb_kv *kv, int nkv)
{
    fputs("{\"type\": \"context\", \"context\": ", f);
    json_context(f, kv, nkv);
    fputs("}\n", f);
    for (int i = 0; i < r->ctx.ndev; i++) {
        fputs("{\"type\": \"ceiling\", \"ceiling\": ", f);
        json_ceiling(f, &r->ceil[i]);
        fputs("}\n", f);
    }
    for (int i = 0; i < r->nrows; i++) {
        fputs("{\"type\": \"result\", \"result\": ", f);
        json_result(f, r, &r->rows[i]);
        fputs("}\n", f);
    }
}

tq_status tqb_report_write(FILE *f, tqb_format fmt, const tqb_report *r)
{
    tqb_kv *kv;
    int nkv;
    tq_status st = tqb_context_get(&r->ctx, &kv, &nkv);
    if (st)
        return st;
    if (fmt == TQB_FMT_CSV)
        csv(f, r, kv, nkv);
    else if (fmt == TQB_FMT_JSON)
        json(f, r, kv, nkv);
    else if (fmt == TQB_FMT_JSONL)
        jsonl(f, r, kv, nkv);
    else
        md(f, r, kv, nkv);
    tqb_context_free(kv, nkv);
    return TQ_OK;
}
