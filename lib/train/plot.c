/* plot.c: the learning curve as a standalone SVG (--plot): train loss (each
 * step's, averaged into at most 400 points, and each epoch's mean) and the
 * validation loss against steps, with a title, axes with units, ticks at
 * round numbers and a legend. Plain SVG 1.1 a browser opens as it is. */
#include "../internal.h"
#include "train.h"

#include <errno.h>
#include <math.h>
#include <unistd.h>

enum { W = 760, H = 460, ML = 80, MR = 190, MT = 50, MB = 60, BUCKETS = 400 };

typedef struct frame {
    double x0, x1, y0, y1;
} frame;

static double px(const frame *f, double x) { return ML + (x - f->x0) / (f->x1 - f->x0) * (W - ML - MR); }
static double py(const frame *f, double y) { return H - MB - (y - f->y0) / (f->y1 - f->y0) * (H - MT - MB); }

/* A round tick spacing: 1, 2 or 5 times a power of 10, about n ticks. */
static double tick_step(double range, int n)
{
    double raw = range / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void escape(FILE *o, const char *s)
{
    for (; *s; s++)
        if (*s == '<')
            fputs("&lt;", o);
        else if (*s == '>')
            fputs("&gt;", o);
        else if (*s == '&')
            fputs("&amp;", o);
        else if (*s == '"')
            fputs("&quot;", o);
        else
            fputc(*s, o);
}

static void series(FILE *o, const frame *f, const char *id, const char *color, double width,
                   const double *x, const double *y, int64_t n, int dots)
{
    fprintf(o, "<g id=\"%s\">\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%g\" points=\"",
            id, color, width);
    for (int64_t i = 0; i < n; i++)
        fprintf(o, "%s%.1f,%.1f", i ? " " : "", px(f, x[i]), py(f, y[i]));
    fputs("\"/>\n", o);
    for (int64_t i = 0; dots && i < n; i++)
        fprintf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(f, x[i]),
                py(f, y[i]), color);
    fputs("</g>\n", o);
}

static void draw(FILE *o, const tq_train_curve *c, const double *bx, const double *by, int64_t nb,
                 const double *ex)
{
    frame f = {c->ns ? (double)c->s_step[0] - 1 : 0, c->ns ? (double)c->s_step[c->ns - 1] : 1, 0, 0};
    if (f.x1 <= f.x0)
        f.x1 = f.x0 + 1;
    for (int64_t i = 0; i < nb; i++)
        f.y1 = fmax(f.y1, by[i]);
    for (int64_t i = 0; i < c->ne; i++)
        f.y1 = fmax(f.y1, fmax(c->e_train[i], c->has_valid ? c->e_valid[i] : 0));
    f.y1 = f.y1 > 0 ? f.y1 * 1.05 : 1;
    const char *unit = c->loss == 0 ? "mean squared error" : "cross-entropy, nats";
    fprintf(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n<title>",
            W, H, W, H);
    escape(o, c->title);
    fprintf(o, "</title>\n<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n"
               "<text x=\"%d\" y=\"28\" font-size=\"15\" text-anchor=\"middle\">",
            W, H, (W - MR + ML) / 2);
    escape(o, c->title);
    fputs("</text>\n<g id=\"axes\" stroke=\"#888\" stroke-width=\"1\">\n", o);
    double xs = tick_step(f.x1 - f.x0, 6), ys = tick_step(f.y1 - f.y0, 6);
    for (double x = ceil(f.x0 / xs) * xs; x <= f.x1 + 1e-9; x += xs)
        fprintf(o, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n"
                   "<text x=\"%.1f\" y=\"%d\" stroke=\"none\" fill=\"black\" text-anchor=\"middle\">%g</text>\n",
                px(&f, x), MT, px(&f, x), H - MB, px(&f, x), H - MB + 16, x);
    for (double y = 0; y <= f.y1 + 1e-12; y += ys)
        fprintf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>\n"
                   "<text x=\"%d\" y=\"%.1f\" stroke=\"none\" fill=\"black\" text-anchor=\"end\">%g</text>\n",
                ML, py(&f, y), W - MR, py(&f, y), ML - 6, py(&f, y) + 4, y);
    fprintf(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n</g>\n",
            ML, H - MB, W - MR, H - MB, ML, MT, ML, H - MB);
    fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step (optimizer updates)</text>\n",
            (W - MR + ML) / 2, H - 18);
    fprintf(o, "<text transform=\"translate(22,%d) rotate(-90)\" text-anchor=\"middle\">loss (%s)</text>\n",
            (H - MB + MT) / 2, unit);
    series(o, &f, "train-batch", "#9ecae1", 1, bx, by, nb, 0);
    series(o, &f, "train-epoch", "#1f77b4", 2, ex, c->e_train, c->ne, 1);
    if (c->has_valid)
        series(o, &f, "valid", "#ff7f0e", 2, ex, c->e_valid, c->ne, 1);
    static const char *names[] = {"train loss (steps)", "train loss (epoch mean)", "validation loss"};
    static const char *colors[] = {"#9ecae1", "#1f77b4", "#ff7f0e"};
    fputs("<g id=\"legend\">\n", o);
    for (int i = 0; i < 2 + c->has_valid; i++)
        fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"%d\">%s</text>\n",
                W - MR + 16, MT + 10 + 20 * i, colors[i], W - MR + 36, MT + 16 + 20 * i, names[i]);
    fputs("</g>\n</svg>\n", o);
}

tq_status tq_train_curve_plot(const tq_train_curve *c, const char *path)
{
    int64_t nb = c->ns < BUCKETS ? c->ns : BUCKETS;
    double *bx = malloc((size_t)(nb + 1) * 8), *by = malloc((size_t)(nb + 1) * 8),
           *ex = malloc((size_t)(c->ne + 1) * 8);
    if (!bx || !by || !ex) {
        free(bx), free(by), free(ex);
        return tq_fail(TQ_ERR_NOMEM, "out of memory for the plot");
    }
    for (int64_t b = 0; b < nb; b++) { /* bucket b: steps [b ns / nb, (b+1) ns / nb) */
        int64_t s0 = b * c->ns / nb, s1 = (b + 1) * c->ns / nb;
        double sx = 0, sy = 0;
        for (int64_t i = s0; i < s1; i++)
            sx += (double)c->s_step[i], sy += c->s_loss[i];
        bx[b] = sx / (double)(s1 - s0);
        by[b] = sy / (double)(s1 - s0);
    }
    for (int64_t e = 0; e < c->ne; e++)
        ex[e] = (double)c->e_step[e];
    int fd;
    char *tmp = NULL;
    tq_status st = tq_atomic_open(path, &fd, &tmp);
    FILE *o = NULL;
    if (!st && !(o = fdopen(fd, "w"))) {
        close(fd);
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    if (o) {
        draw(o, c, bx, by, nb, ex);
        if (fflush(o) || ferror(o))
            st = tq_fail(TQ_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        if (fclose(o) && !st)
            st = tq_fail(TQ_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    if (tmp)
        st = tq_atomic_finish(tmp, path, !st, st);
    free(bx), free(by), free(ex);
    return st;
}
