/* vec.c: text word vectors (word2vec/GloVe/fastText .vec) as an embedder: a
 * document is the plain average of the vectors of its known words. */
#include "embed.h"
#include "../internal.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>

typedef struct vec_model {
    tq_embedder base;
    char *arena;      /* the words, NUL-separated */
    size_t *woff;     /* word i starts at arena + woff[i] */
    uint32_t *wlen;
    float *v;         /* count x dim */
    int64_t count;
    int32_t *table;   /* open addressing; -1 = empty */
    uint64_t tmask;
} vec_model;

static uint64_t vhash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

static int64_t vlookup(const vec_model *m, const char *s, size_t n)
{
    for (uint64_t i = vhash(s, n) & m->tmask;; i = (i + 1) & m->tmask) {
        int32_t id = m->table[i];
        if (id < 0 || (m->wlen[id] == n && !memcmp(m->arena + m->woff[id], s, n)))
            return id;
    }
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

typedef struct vec_job {
    const vec_model *m;
    const char *const *text;
    const size_t *len;
    float *out;
} vec_job;

static void vec_range(void *ctx, int64_t begin, int64_t end)
{
    const vec_job *jb = ctx;
    const vec_model *m = jb->m;
    int64_t d = m->base.dim;
    for (int64_t r = begin; r < end; r++) {
        float *o = jb->out + r * d;
        memset(o, 0, (size_t)d * sizeof *o);
        const char *t = jb->text[r];
        size_t i = 0, L = jb->len[r];
        int64_t found = 0;
        while (i < L) {
            while (i < L && is_space(t[i]))
                i++;
            size_t s = i;
            while (i < L && !is_space(t[i]))
                i++;
            if (i == s)
                break;
            int64_t id = vlookup(m, t + s, i - s);
            if (id < 0)
                continue;
            const float *v = m->v + id * d;
            for (int64_t j = 0; j < d; j++)
                o[j] += v[j];
            found++;
        }
        if (found)
            for (int64_t j = 0; j < d; j++)
                o[j] /= (float)found;
    }
}

static tq_status vec_run(tq_embedder *e, int64_t n, const char *const *text, const size_t *len, float *out)
{
    vec_job jb = {(const vec_model *)e, text, len, out};
    tq_parallel_for(n, 64, vec_range, &jb);
    return TQ_OK;
}

static void vec_free(vec_model *m)
{
    free(m->arena);
    free(m->woff);
    free(m->wlen);
    free(m->v);
    free(m->table);
    free(m);
}

static void vec_close(tq_embedder *e) { vec_free((vec_model *)e); }

static const tq_embedder_ops vec_ops = {vec_run, vec_close};

/* Splits a line into fields; returns how many (at most max, then max + 1). */
static size_t fields(char *line, char **f, size_t max)
{
    size_t k = 0;
    char *p = line;
    for (;;) {
        while (*p && is_space(*p))
            p++;
        if (!*p)
            return k;
        if (k == max)
            return max + 1;
        f[k++] = p;
        while (*p && !is_space(*p))
            p++;
        if (*p)
            *p++ = 0;
    }
}

static int parse_float(const char *s, float *v)
{
    char *end;
    errno = 0;
    *v = strtof(s, &end);
    return end != s && !*end && errno != ERANGE && isfinite(*v);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 1;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return 0;
    *p = q;
    *cap = c;
    return 1;
}

static tq_status load(vec_model *m, FILE *f, const char *path, off_t fsize)
{
    char *line = NULL, **fld = NULL;
    size_t lcap = 0, acap = 0, asize = 0, wcap = 0, lencap = 0, vcap = 0;
    int64_t dim = 0, want = -1, lineno = 0;
    ssize_t got;
    tq_status st = TQ_OK;
#define FAIL(code, ...) do { st = tq_fail(code, __VA_ARGS__); goto out; } while (0)
    while ((got = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        if ((size_t)got != strlen(line))
            FAIL(TQ_ERR_DATA, "%s: line %lld: NUL byte in a word vectors file", path, (long long)lineno);
        if (dim == 0) {
            /* the first line: either "COUNT DIM" or already a vector */
            char *copy = strdup(line), *a[3];
            if (!copy)
                FAIL(TQ_ERR_NOMEM, "%s: out of memory", path);
            size_t k = fields(copy, a, 2);
            char *e1, *e2;
            long long c = k == 2 ? strtoll(a[0], &e1, 10) : 0, d = k == 2 ? strtoll(a[1], &e2, 10) : 0;
            int header = k == 2 && !*e1 && !*e2;
            free(copy);
            if (header) {
                if (c < 0 || d < 1 || d > (1 << 20))
                    FAIL(TQ_ERR_DATA, "%s: line 1: header \"COUNT DIM\" out of range", path);
                /* each value takes at least two bytes of text */
                if ((double)c * (double)d * 2 > (double)fsize)
                    FAIL(TQ_ERR_DATA, "%s: line 1: header promises %lld vectors of %lld, more than the file holds",
                         path, c, d);
                want = c;
                dim = d;
                continue;
            }
            size_t nf = 0;
            for (char *p = line; *p;) {
                while (*p && is_space(*p))
                    p++;
                if (!*p)
                    break;
                nf++;
                while (*p && !is_space(*p))
                    p++;
            }
            if (nf == 0)
                continue;
            if (nf < 2)
                FAIL(TQ_ERR_DATA, "%s: line 1: a word without values", path);
            dim = (int64_t)nf - 1;
            if (dim > (1 << 20))
                FAIL(TQ_ERR_DATA, "%s: line 1: %lld values is too many", path, (long long)dim);
        }
        if (!fld && !(fld = malloc((size_t)(dim + 1) * sizeof *fld)))
            FAIL(TQ_ERR_NOMEM, "%s: out of memory", path);
        size_t nf = fields(line, fld, (size_t)dim + 1);
        if (nf == 0)
            continue; /* blank line */
        if (nf != (size_t)dim + 1)
            FAIL(TQ_ERR_DATA, "%s: line %lld: expected a word and %lld values, found %s%zu fields", path,
                 (long long)lineno, (long long)dim, nf > (size_t)dim + 1 ? "more than " : "", nf);
        if (m->count >= INT32_MAX - 1)
            FAIL(TQ_ERR_DATA, "%s: line %lld: too many words", path, (long long)lineno);
        size_t wl = strlen(fld[0]);
        if (!grow((void **)&m->arena, &acap, asize + wl + 1, 1) ||
            !grow((void **)&m->woff, &wcap, (size_t)m->count + 1, sizeof *m->woff) ||
            !grow((void **)&m->wlen, &lencap, (size_t)m->count + 1, sizeof *m->wlen) ||
            !grow((void **)&m->v, &vcap, ((size_t)m->count + 1) * (size_t)dim, sizeof *m->v))
            FAIL(TQ_ERR_NOMEM, "%s: out of memory at line %lld", path, (long long)lineno);
        float *v = m->v + m->count * dim;
        for (int64_t j = 0; j < dim; j++)
            if (!parse_float(fld[j + 1], &v[j]))
                FAIL(TQ_ERR_DATA, "%s: line %lld: value %lld is not a finite number: \"%.40s\"", path,
                     (long long)lineno, (long long)j + 1, fld[j + 1]);
        memcpy(m->arena + asize, fld[0], wl + 1);
        m->woff[m->count] = asize;
        m->wlen[m->count] = (uint32_t)wl;
        asize += wl + 1;
        m->count++;
    }
    if (ferror(f))
        FAIL(TQ_ERR_IO, "%s: read error: %s", path, strerror(errno));
    if (dim == 0)
        FAIL(TQ_ERR_DATA, "%s: no word vectors in the file", path);
    if (want >= 0 && m->count != want)
        FAIL(TQ_ERR_DATA, "%s: header promises %lld vectors, the file holds %lld", path, (long long)want,
             (long long)m->count);
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)m->count)
        cap *= 2;
    if (!(m->table = malloc(cap * sizeof *m->table)))
        FAIL(TQ_ERR_NOMEM, "%s: out of memory", path);
    memset(m->table, 0xff, cap * sizeof *m->table);
    m->tmask = cap - 1;
    for (int64_t i = 0; i < m->count; i++) {
        const char *w = m->arena + m->woff[i];
        uint64_t j = vhash(w, m->wlen[i]) & m->tmask;
        while (m->table[j] >= 0 && !(m->wlen[m->table[j]] == m->wlen[i] &&
                                     !memcmp(m->arena + m->woff[m->table[j]], w, m->wlen[i])))
            j = (j + 1) & m->tmask;
        if (m->table[j] < 0)
            m->table[j] = (int32_t)i; /* a repeated word keeps its first vector */
    }
    m->base.dim = dim;
out:
#undef FAIL
    free(line);
    free(fld);
    return st;
}

tq_status tq_embed_vec_open(const char *path, tq_embedder **e)
{
    *e = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open word vectors: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb)) {
        fclose(f);
        return tq_fail(TQ_ERR_IO, "%s: %s", path, strerror(errno));
    }
    vec_model *m = calloc(1, sizeof *m);
    if (!m) {
        fclose(f);
        return tq_fail(TQ_ERR_NOMEM, "%s: out of memory", path);
    }
    tq_status st = load(m, f, path, sb.st_size);
    fclose(f);
    if (st) {
        vec_free(m);
        return st;
    }
    m->base.ops = &vec_ops;
    snprintf(m->base.describe, sizeof m->base.describe, "vec:%s", path);
    *e = &m->base;
    return TQ_OK;
}
