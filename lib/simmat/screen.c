/* screen.c: the int8 screen of --threshold over float vectors. A pair can
 * reach the threshold only if an upper bound of its score does; the bound is
 * cheap (int8 codes of the rows' first dh values, tq_op_codescreen), and only
 * the pairs it lets through get their exact score (simscore.h), the very
 * score that decides without the screen. So the pairs and their bytes are
 * those of the matrix-product path; only the time differs.
 *
 * The bound. Split a row x into its head h (the first dh values) and tail t,
 * and code the head: c = round(h / s), s = max|h| / 127, e = h - s c. For rows
 * x and y,
 *     x . y = s_x s_y (c_x . c_y) + s_x c_x . e_y + e_x . h_y + t_x . t_y
 *          <= s_x s_y (c_x . c_y) + P_x E_y + E_x H_y + T_x T_y
 * (Cauchy-Schwarz; P = |s c|, E = |e|, H = |h|, T = |t|, all rounded up to
 * f32). The score rounds to f32 from a double sum: a score >= thr needs
 * x . y >= thr - 2^-22 |thr| - 2^-30 |x| |y| (dot; for l2, -|x - y|^2 =
 * 2 x . y - |x|^2 - |y|^2 the same way), which the terms of
 * tq_op_codescreen carry; the 2^-30 |x| |y| rides on the tails' term, as
 * (T_x + 2^-15 |x|) (T_y + 2^-15 |y|) >= T_x T_y + 2^-30 |x| |y|. Every number above is exact or rounded away from
 * the pair, so no pair that scores >= thr is screened out. */
#include "simmat.h"

#include "../internal.h"
#include "../op/simscore.h"

#include <math.h>
#include <string.h>

enum { SAMPLE_Q = 64, SAMPLE_X = 2048, SLICE = 1024 };

/* The rows screened against (--threshold: the shard's; --dedup: the --db
 * rows and the kept ones) are coded once, as database rows, and kept on the
 * host, where the device reads them in place (the screen runs where it is
 * native, a device of host memory); a slice of queries is coded into hc, hs,
 * ha and its bits come back in hm. */
struct tq_sim_screen {
    int64_t dh, d;
    int m;                      /* terms a row: 4 (dot, cosine) or 5 (l2) */
    int metric;                 /* simscore's: 1 for l2 */
    double thr;
    int8_t *hc;                 /* a slice of queries: codes, scales, terms */
    float *hs, *ha;
    int32_t *hm;                /* its bits, hm_cap words at most */
    int64_t hm_cap;
    int8_t *yc;                 /* the rows: codes, scales, terms, */
    float *ys, *yt;
    const float **yrow;         /* and where their f32 values lie */
    int64_t ny, ycap;
};

static float up(double v)
{
    float f = (float)v;
    return (double)f < v ? nextafterf(f, INFINITY) : f;
}

/* Row x's head codes c[dh], scale *s and terms t[m]: side 0 a query's, 1 a
 * database row's (see the bound above). 0 if every number is finite. */
static int encode(const tq_sim_screen *sc, const float *x, int side, int8_t *c, float *s, float *t)
{
    int64_t d = sc->d, dh = sc->dh;
    double amax = 0, hh = 0, tt = 0, pp = 0, ee = 0;
    for (int64_t i = 0; i < dh; i++)
        amax = fmax(amax, fabs((double)x[i]));
    float scale = (float)(amax / 127);
    if (scale == 0 || !isfinite(scale))
        scale = amax > 0 ? (float)amax : 1; /* subnormal, zero or huge heads: still a bound */
    int finite = 1;
    for (int64_t i = 0; i < dh; i++) {
        double v = x[i], q = nearbyint(v / scale);
        q = q > 127 ? 127 : q < -127 ? -127 : q;
        finite &= q == q; /* a NaN or infinite value: the row is refused below */
        c[i] = q == q ? (int8_t)q : 0;
        double sq = q * scale, e = v - sq; /* exact: s q has 31 bits, e fits double */
        hh += v * v, pp += sq * sq, ee += e * e;
    }
    for (int64_t i = dh; i < d; i++)
        tt += (double)x[i] * x[i];
    /* over and under the double sums' rounding (below 2^-36 for d <= 2^17) */
    const double grow = 1 + 0x1p-32, shrink = 1 - 0x1p-32;
    double H = sqrt(hh) * grow, T = sqrt(tt) * grow, P = sqrt(pp) * grow, E = sqrt(ee) * grow;
    double N = sqrt(hh + tt) * grow, xx = (hh + tt) * shrink;
    *s = scale;
    if (side == 0) {
        t[0] = up(P), t[1] = up(E), t[2] = up(T + 0x1p-15 * N), t[3] = 1;
        if (sc->metric)
            t[4] = up(-0.5 * xx * (1 - 0x1p-30)); /* -|x|^2 / 2, a little less */
    } else {
        double lo = sc->thr - 0x1p-22 * fabs(sc->thr);
        t[0] = up(E), t[1] = up(H), t[2] = up(T + 0x1p-15 * N);
        if (sc->metric)
            t[3] = up(-0.5 * lo - 0.5 * xx * (1 - 0x1p-30)), t[4] = 1;
        else
            t[3] = up(-lo);
    }
    int ok = finite && isfinite(*s);
    for (int k = 0; k < sc->m; k++)
        ok &= isfinite(t[k]);
    return ok ? 0 : -1;
}

typedef struct encode_job {
    const tq_sim_screen *sc;
    const float *x;
    int side;
    int8_t *c;
    float *s, *t;
    int bad;
} encode_job;

static void encode_rows(void *ctx, int64_t begin, int64_t end)
{
    encode_job *j = ctx;
    const tq_sim_screen *sc = j->sc;
    int bad = 0;
    for (int64_t i = begin; i < end; i++)
        bad |= encode(sc, j->x + i * sc->d, j->side, j->c + i * sc->dh, j->s + i, j->t + i * sc->m);
    if (bad)
        __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}

/* Encodes n rows x on the pool into c, s, t; -1 if a number is not finite. */
static int encode_all(const tq_sim_screen *sc, const float *x, int64_t n, int side, int8_t *c,
                      float *s, float *t)
{
    encode_job j = {sc, x, side, c, s, t, 0};
    tq_parallel_for(n, 256, encode_rows, &j);
    return j.bad ? -1 : 0;
}

/* Rows the screen takes: finite, and small enough (|v| <= 2^40) that no
 * term of theirs overflows f32. */
static int rows_fit(const float *x, int64_t n, int64_t d)
{
    for (int64_t i = 0; i < n * d; i++)
        if (!(fabsf(x[i]) <= 0x1p40f))
            return 0;
    return 1;
}

/* Appends n rows x (persistent, or a --dedup batch's until they move) to
 * the rows, coded as database rows: 0, -1 without memory, 1 (nothing added)
 * if a number is not finite. */
static int seen_add(tq_sim_screen *sc, const float *x, int64_t n)
{
    if (sc->ny + n > sc->ycap) {
        int64_t cap = sc->ycap ? sc->ycap : 4096;
        while (cap < sc->ny + n)
            cap *= 2;
        int8_t *c = realloc(sc->yc, (size_t)(cap * sc->dh) + 16);
        if (c)
            sc->yc = c;
        float *ys = c ? realloc(sc->ys, (size_t)cap * 4 + 16) : NULL;
        if (ys)
            sc->ys = ys;
        float *yt = ys ? realloc(sc->yt, (size_t)(cap * sc->m) * 4 + 16) : NULL;
        if (yt)
            sc->yt = yt;
        const float **yr = yt ? realloc(sc->yrow, (size_t)cap * sizeof *yr + 16) : NULL;
        if (!yr)
            return -1;
        sc->yrow = yr, sc->ycap = cap;
    }
    if (encode_all(sc, x, n, 1, sc->yc + sc->ny * sc->dh, sc->ys + sc->ny, sc->yt + sc->ny * sc->m))
        return 1;
    for (int64_t i = 0; i < n; i++)
        sc->yrow[sc->ny + i] = x + i * sc->d;
    sc->ny += n;
    return 0;
}

/* A tensor over host data (no copy where the device works in host memory,
 * else a copy uploaded). */
static tq_status host_tensor(tq_device *dev, tq_dtype dt, int rank, const int64_t *dims, void *host,
                             size_t bytes, tq_tensor **t)
{
    tq_status st = tq_tensor_wrap_host(dev, dt, rank, dims, host, t);
    if (!st && !*t && !(st = tq_tensor_new(dev, dt, rank, dims, t)) && bytes)
        st = tq_tensor_upload(*t, host, bytes);
    return st;
}

/* The bits of the nq coded queries (hc, hs, ha) against the rows [c0, ny)
 * (c0 a multiple of 16: a tensor starts on 16 bytes), in sc->hm, *words a
 * row. */
static tq_status screen(tq_sim_screen *sc, tq_device *dev, int64_t nq, int64_t c0, int64_t *words)
{
    int64_t ny = sc->ny - c0, w = (ny + 31) / 32, dh = sc->dh, m = sc->m;
    if (nq * w > sc->hm_cap) {
        free(sc->hm);
        sc->hm_cap = nq * w * 2;
        if (!(sc->hm = malloc((size_t)sc->hm_cap * 4 + 16)))
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    int64_t qd[2] = {nq, dh}, ad[2] = {nq, m}, yd[2] = {ny, dh}, bd[2] = {ny, m}, od[2] = {nq, w};
    tq_tensor *v[7] = {0};
    tq_status st = host_tensor(dev, TQ_DTYPE_I8, 2, qd, sc->hc, (size_t)(nq * dh), &v[0]);
    if (!st)
        st = host_tensor(dev, TQ_DTYPE_F32, 1, qd, sc->hs, (size_t)nq * 4, &v[1]);
    if (!st)
        st = host_tensor(dev, TQ_DTYPE_F32, 2, ad, sc->ha, (size_t)(nq * m) * 4, &v[2]);
    if (!st)
        st = host_tensor(dev, TQ_DTYPE_I8, 2, yd, sc->yc + c0 * dh, (size_t)(ny * dh), &v[3]);
    if (!st)
        st = host_tensor(dev, TQ_DTYPE_F32, 1, yd, sc->ys + c0, (size_t)ny * 4, &v[4]);
    if (!st)
        st = host_tensor(dev, TQ_DTYPE_F32, 2, bd, sc->yt + c0 * m, (size_t)(ny * m) * 4, &v[5]);
    if (!st)
        st = host_tensor(dev, TQ_DTYPE_I32, 2, od, sc->hm, 0, &v[6]);
    if (!st)
        st = tq_op_codescreen(v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
    if (!st && tq_tensor_host(v[6]) != sc->hm)
        st = tq_tensor_download(v[6], sc->hm, (size_t)(nq * w) * 4);
    for (int i = 0; i < 7; i++)
        tq_tensor_free(v[i]);
    *words = w;
    return st;
}

static void release(tq_sim_screen *sc)
{
    free(sc->hc), free(sc->hs), free(sc->ha), free(sc->hm);
    free(sc->yc), free(sc->ys), free(sc->yt), free(sc->yrow);
}

void tq_sim_screen_free(tq_sim_screen *sc)
{
    if (sc)
        release(sc), free(sc);
}

/* A screen of head length dh with a slice of `rows` queries and no rows
 * yet; -1 without memory. */
static int shape(tq_sim_screen *sc, int64_t dh, int64_t rows)
{
    sc->dh = dh;
    sc->hc = malloc((size_t)(rows * dh) + 16);
    sc->hs = malloc((size_t)rows * 4 + 16);
    sc->ha = malloc((size_t)(rows * sc->m) * 4 + 16);
    return sc->hc && sc->hs && sc->ha ? 0 : -1;
}

/* The head length: of d/4, d/2 and d (multiples of 4), the one whose screen
 * costs least on a sample of the rows x (its own work, dh, plus the exact
 * scores of the pairs it lets through, about 4 d each). *bad: the sample
 * holds a row that is not finite (then no screen). */
static tq_status pick_head(tq_sim_screen *sc, tq_device *dev, const float *x, int64_t n, int *bad)
{
    int64_t d = sc->d;
    int64_t nq = n < SAMPLE_Q ? n : SAMPLE_Q, nx = n < SAMPLE_X ? n : SAMPLE_X;
    int64_t cand[3] = {(d / 4 + 3) / 4 * 4, (d / 2 + 3) / 4 * 4, d}, best = d;
    double best_cost = INFINITY;
    float *rows = malloc((size_t)((nq + nx) * d) * 4 + 16);
    tq_status st = rows ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "out of memory");
    /* evenly spread rows: queries and rows of the sample */
    for (int64_t i = 0; !st && i < nq + nx; i++) {
        int64_t r = i < nq ? i * n / nq : (i - nq) * n / nx;
        memcpy(rows + i * d, x + r * d, (size_t)d * 4);
    }
    *bad = 0;
    for (int c = 0; !st && c < 3 && !*bad; c++) {
        if (c < 2 && (cand[c] >= d || cand[c] < 16 || (c == 1 && cand[1] == cand[0])))
            continue;
        tq_sim_screen t = {.d = d, .m = sc->m, .metric = sc->metric, .thr = sc->thr};
        int64_t words = 0, pass = 0;
        int added = shape(&t, cand[c], nq) ? -1 : seen_add(&t, rows + nq * d, nx);
        if (added < 0)
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        else if (added || encode_all(&t, rows, nq, 0, t.hc, t.hs, t.ha))
            *bad = 1;
        else if (!(st = screen(&t, dev, nq, 0, &words))) {
            for (int64_t i = 0; i < nq * words; i++)
                pass += __builtin_popcount((uint32_t)t.hm[i]);
            double cost = (double)t.dh + 4.0 * (double)d * (double)pass / (double)(nq * nx);
            if (cost < best_cost)
                best_cost = cost, best = t.dh;
        }
        release(&t);
    }
    free(rows);
    sc->dh = best;
    return st;
}

/* A new screen for rows x (n of them, sampled for the head length); NULL
 * in *out (and TQ_OK) where a sampled row is not finite. */
static tq_status screen_new(tq_sim *s, const float *x, int64_t n, tq_sim_screen **out)
{
    *out = NULL;
    tq_sim_screen *sc = calloc(1, sizeof *sc);
    if (!sc)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    sc->d = s->db.d, sc->metric = s->metric == TQ_SIM_L2, sc->m = sc->metric ? 5 : 4;
    sc->thr = (double)(float)s->threshold; /* what the exact scores meet */
    int bad = 0;
    tq_status st = pick_head(sc, s->dev, x, n, &bad);
    if (!st && !bad && shape(sc, sc->dh, SLICE))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (st || bad) {
        tq_sim_screen_free(sc);
        return st;
    }
    s->screen_dh = sc->dh;
    *out = sc;
    return TQ_OK;
}

tq_status tq_sim_screen_open(tq_sim *s, tq_sim_screen **out)
{
    *out = NULL;
    int64_t n = s->s1 - s->s0, d = s->db.d;
    const float *x = s->db.x + s->s0 * d;
    if (s->mode != TQ_SIM_THRESHOLD || s->code || n == 0 || d == 0 || d > (1 << 17) ||
        !tq_op_codescreen_native(s->dev))
        return TQ_OK; /* the matrix product's path */
    tq_status st = screen_new(s, x, n, out);
    int added = st || !*out ? 0 : seen_add(*out, x, n);
    if (added < 0)
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (added) { /* or a row not finite: the matrix product's path */
        tq_sim_screen_free(*out);
        *out = NULL, s->screen_dh = 0;
    }
    return st;
}

int64_t tq_sim_screen_rows(void) { return SLICE; }

tq_status tq_sim_screen_run(tq_sim *s, tq_sim_screen *sc, const float *q, int64_t n, int64_t g0,
                            tq_sim_pairs *p, int *done)
{
    int64_t d = sc->d, nd = s->s1 - s->s0;
    *done = 0;
    if (encode_all(sc, q, n, 0, sc->hc, sc->hs, sc->ha))
        return TQ_OK; /* a query not finite: the caller's path */
    /* without --db, only j > i: the rows from the slice's first i + 1 */
    int64_t c0 = s->self ? g0 + 1 - s->s0 : 0;
    c0 = c0 < 0 ? 0 : c0 > nd ? nd : c0;
    c0 &= ~(int64_t)15;
    int64_t words;
    tq_status st = screen(sc, s->dev, n, c0, &words);
    float thr = (float)s->threshold;
    for (int64_t i = 0; !st && i < n; i++) {
        int64_t g = g0 + i;
        const float *qr = q + i * d;
        for (int64_t w = 0; !st && w < words; w++) {
            uint32_t b = (uint32_t)sc->hm[i * words + w];
            while (b && !st) {
                int64_t j = s->s0 + c0 + w * 32 + __builtin_ctz(b);
                b &= b - 1;
                if (s->self && j <= g)
                    continue;
                s->screened++;
                float v = tq_simscore(sc->metric, qr, s->db.x + j * d, d);
                if (v >= thr)
                    st = tq_sim_pairs_add(p, g, j, v);
            }
        }
    }
    *done = !st;
    return st;
}

/* ---- --dedup: each slice of a batch against every row seen before it ---- */

tq_status tq_sim_screen_dedup_open(tq_sim *s, const float *x, int64_t n, tq_sim_screen **out)
{
    *out = NULL;
    int64_t d = s->db.d, ndb = s->s1 - s->s0;
    const float *db = s->db.x + s->s0 * d;
    if (s->code || n == 0 || d == 0 || d > (1 << 17) || !tq_op_codescreen_native(s->dev) ||
        !rows_fit(x, n, d) || (ndb && !rows_fit(db, ndb, d)))
        return TQ_OK; /* simtopk's path */
    tq_status st = ndb ? screen_new(s, db, ndb, out) : screen_new(s, x, n, out);
    if (!st && *out && seen_add(*out, db, ndb)) { /* the rows fit: only memory can fail */
        tq_sim_screen_free(*out);
        *out = NULL;
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    return st;
}

int tq_sim_screen_dedup_fits(const float *x, int64_t n, int64_t d) { return rows_fit(x, n, d); }

tq_status tq_sim_screen_dedup(tq_sim *s, tq_sim_screen *sc, const float *q, int64_t n,
                              unsigned char *keep, int64_t *ki, int64_t *kept)
{
    int64_t d = sc->d, dh = sc->dh, m = sc->m;
    float thr = (float)s->threshold;
    tq_status st = TQ_OK;
    *kept = 0;
    for (int64_t a = 0; !st && a < n; a += SLICE) {
        int64_t b = n - a < SLICE ? n : a + SLICE, ns0 = sc->ny, words = 0;
        /* the slice's rows join the seen ones for now: a row meets the
         * earlier kept rows of its slice there too */
        if (seen_add(sc, q + a * d, b - a)) /* the rows fit: only memory can fail */
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        encode_all(sc, q + a * d, b - a, 0, sc->hc, sc->hs, sc->ha);
        if ((st = screen(sc, s->dev, b - a, 0, &words)))
            break;
        int64_t k0 = *kept;
        for (int64_t i = a; i < b; i++) {
            const int32_t *bits = sc->hm + (i - a) * words;
            int dup = 0;
            for (int64_t w = 0; !dup && w < words; w++)
                for (uint32_t v = (uint32_t)bits[w]; v && !dup; v &= v - 1) {
                    int64_t j = w * 32 + __builtin_ctz(v), jj = a + (j - ns0);
                    if (j >= ns0 && (jj >= i || !keep[jj]))
                        continue; /* a later row of the slice, or a dropped one */
                    s->screened++;
                    dup = tq_simscore(sc->metric, q + i * d, sc->yrow[j], d) >= thr;
                }
            keep[i] = !dup;
            if (!dup)
                ki[(*kept)++] = i;
        }
        /* only the kept rows of the slice stay seen */
        for (int64_t k = k0; k < *kept; k++) {
            int64_t src = ns0 + (ki[k] - a), dst = ns0 + (k - k0);
            memmove(sc->yc + dst * dh, sc->yc + src * dh, (size_t)dh);
            sc->ys[dst] = sc->ys[src];
            memmove(sc->yt + dst * m, sc->yt + src * m, (size_t)m * 4);
            sc->yrow[dst] = sc->yrow[src];
        }
        sc->ny = ns0 + (*kept - k0);
    }
    return st;
}

void tq_sim_screen_dedup_moved(tq_sim_screen *sc, const float *rows, int64_t kept)
{
    for (int64_t k = 0; k < kept; k++)
        sc->yrow[sc->ny - kept + k] = rows + k * sc->d;
}
