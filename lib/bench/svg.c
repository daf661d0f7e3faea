/* svg.c: tq-bench --svg: one chart, drawn here (no plotting dependency): the
 * fraction of the bounding ceiling each op reaches, against its size n on a
 * log2 axis, one line per op and device; a title, labelled axes with units, a
 * legend, and <title>/<desc> for screen readers. */
#include "bench.h"

#include <math.h>
#include <string.h>

#define W 960
#define H 540
#define L 80   /* plot area: left, top, right (legend beyond), bottom */
#define T 60
#define R 700
#define B 470

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

/* Whether rows i and j are of one series (the same op and device). */
static int same_series(const tqb_result *a, const tqb_result *b)
{
    return !strcmp(a->op, b->op) && !strcmp(a->device, b->device);
}

tq_status tqb_svg_write(FILE *f, const tqb_report *r)
{
    double xlo = INFINITY, xhi = -INFINITY, yhi = 0;
    for (int i = 0; i < r->nrows; i++) {
        const tqb_result *x = &r->rows[i];
        if (x->n < 1 || !(x->frac > 0))
            continue;
        xlo = fmin(xlo, log2((double)x->n));
        xhi = fmax(xhi, log2((double)x->n));
        yhi = fmax(yhi, 100 * x->frac);
    }
    if (!(xhi >= xlo))
        xlo = 0, xhi = 1;
    if (xhi - xlo < 1)
        xlo -= 0.5, xhi += 0.5;
    yhi = yhi > 0 ? 10 * ceil(yhi * 1.05 / 10) : 100;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" role=\"img\" aria-labelledby=\"title desc\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fputs("<title id=\"title\">tq-bench: fraction of the ceiling by size</title>\n"
          "<desc id=\"desc\">For each op and device, the rate as a percentage of the measured "
          "ceiling that bounds it (compute or memory bandwidth), against the size n on a log "
          "scale. Devices:",
          f);
    for (int i = 0; i < r->ctx.ndev; i++) {
        fputc(' ', f);
        esc(f, tq_device_describe(r->ctx.devs[i]));
        fputc(';', f);
    }
    fputs("</desc>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
    fprintf(f, "<text x=\"%d\" y=\"30\" font-size=\"18\" text-anchor=\"middle\">tq-bench: "
               "fraction of the ceiling by size</text>\n",
            (L + R) / 2);
    /* axes, grid and ticks */
    fprintf(f, "<g stroke=\"#ccc\">\n");
    for (int k = 0; k <= 5; k++) {
        double y = B - (B - T) * k / 5.0;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", L, y, R, y);
    }
    fprintf(f, "</g>\n<g stroke=\"black\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>"
               "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/></g>\n",
            L, B, R, B, L, B, L, T);
    for (int k = 0; k <= 5; k++)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g%%</text>\n", L - 6,
                B - (B - T) * k / 5.0 + 4, yhi * k / 5.0);
    int step = (int)ceil((xhi - xlo) / 10);
    for (int e = (int)ceil(xlo); e <= (int)floor(xhi); e += step > 0 ? step : 1) {
        double x = L + (R - L) * (e - xlo) / (xhi - xlo);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">2^%d</text>\n", x, B + 18, e);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">size n (elements or rows, "
               "log scale; see tq-bench --op list)</text>\n",
            (L + R) / 2, B + 45);
    fprintf(f, "<text transform=\"translate(22 %d) rotate(-90)\" text-anchor=\"middle\">rate "
               "(%% of the bounding ceiling)</text>\n",
            (T + B) / 2);
    /* one series per op and device, in order of first appearance */
    int series = 0;
    for (int i = 0; i < r->nrows; i++) {
        const tqb_result *x = &r->rows[i];
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = same_series(&r->rows[j], x);
        if (seen || !(x->frac > 0))
            continue;
        const char *c = palette[series % 10];
        const char *dash = series >= 10 ? " stroke-dasharray=\"6 3\"" : "";
        fprintf(f, "<g class=\"series\" data-op=\"%s\" data-device=\"%s\">\n<polyline "
                   "fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
                x->op, x->device, c, dash);
        for (int j = i; j < r->nrows; j++)
            if (same_series(&r->rows[j], x) && r->rows[j].frac > 0)
                fprintf(f, "%.1f,%.1f ", L + (R - L) * (log2((double)r->rows[j].n) - xlo) / (xhi - xlo),
                        B - (B - T) * fmin(100 * r->rows[j].frac / yhi, 1.0));
        fputs("\"/>\n", f);
        for (int j = i; j < r->nrows; j++) {
            const tqb_result *y = &r->rows[j];
            if (!same_series(y, x) || !(y->frac > 0))
                continue;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>%s %s ",
                    L + (R - L) * (log2((double)y->n) - xlo) / (xhi - xlo),
                    B - (B - T) * fmin(100 * y->frac / yhi, 1.0), c, y->device, y->op);
            esc(f, y->shape);
            fprintf(f, ": %.3g %s, %.1f%% of the ceiling</title></circle>\n", y->rate, y->unit,
                    100 * y->frac);
        }
        int ly = T + 16 * series;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                   "stroke-width=\"2\"%s/><text x=\"%d\" y=\"%d\">%s on %s (%s)</text>\n</g>\n",
                R + 20, ly, R + 44, ly, c, dash, R + 50, ly + 4, x->op, x->device, x->unit);
        series++;
    }
    fputs("</svg>\n", f);
    return TQ_OK;
}
