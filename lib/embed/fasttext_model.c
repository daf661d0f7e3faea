/* fasttext_model.c: reads a fastText model file (.bin, or .ftz with a product-
 * quantized input matrix) with every size checked against the file before use. */
#include "fasttext.h"
#include "../internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FT_MAGIC 793712314
#define FT_KSUB 256 /* centroids per sub-quantizer (8-bit codes) */

typedef struct cursor {
    const unsigned char *p;
    size_t off, size;
    const char *path;
} cursor;

static tq_status truncated(const cursor *c, const char *what)
{
    return tq_fail(TQ_ERR_DATA, "%s: not a valid fastText model: file ends inside %s (byte %zu of %zu)",
                   c->path, what, c->off, c->size);
}

static tq_status bad(const cursor *c, const char *what)
{
    return tq_fail(TQ_ERR_DATA, "%s: not a valid fastText model: %s", c->path, what);
}

static int have(const cursor *c, uint64_t n) { return n <= c->size - c->off; }

static tq_status rd_i32(cursor *c, int32_t *v, const char *what)
{
    *v = 0;
    if (!have(c, 4))
        return truncated(c, what);
    *v = (int32_t)tq_le32(c->p + c->off);
    c->off += 4;
    return TQ_OK;
}

static tq_status rd_i64(cursor *c, int64_t *v, const char *what)
{
    *v = 0;
    if (!have(c, 8))
        return truncated(c, what);
    *v = (int64_t)tq_le64(c->p + c->off);
    c->off += 8;
    return TQ_OK;
}

static tq_status rd_u8(cursor *c, unsigned *v, const char *what)
{
    *v = 0;
    if (!have(c, 1))
        return truncated(c, what);
    *v = c->p[c->off++];
    return TQ_OK;
}

static tq_status rd_bool(cursor *c, int *v, const char *what)
{
    unsigned b = 0;
    *v = 0;
    tq_status st = rd_u8(c, &b, what);
    if (st)
        return st;
    if (b > 1)
        return tq_fail(TQ_ERR_DATA, "%s: not a valid fastText model: %s flag is %u, not 0 or 1",
                       c->path, what, b);
    *v = (int)b;
    return TQ_OK;
}

static void copy_floats(float *dst, const unsigned char *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = tq_le32(src + 4 * i);
        memcpy(&dst[i], &u, 4);
    }
}

/* A product quantizer's header and centroids; want_dim is the vector size it
 * must cover. Keeps the centroids in out (allocated here once the file is known
 * to hold them) when out is not NULL. */
static tq_status read_pq(cursor *c, int64_t want_dim, const char *what, int32_t *nsubq,
                         int32_t *dsub, int32_t *lastdsub, float **out)
{
    int32_t dim = 0, ns = 0, ds = 0, lds = 0;
    tq_status st;
    if ((st = rd_i32(c, &dim, what)) || (st = rd_i32(c, &ns, what)) || (st = rd_i32(c, &ds, what)) ||
        (st = rd_i32(c, &lds, what)))
        return st;
    if (dim != want_dim || ds < 1 || ds > dim)
        return tq_fail(TQ_ERR_DATA, "%s: not a valid fastText model: %s has dim %d, dsub %d (want dim %lld)",
                       c->path, what, dim, ds, (long long)want_dim);
    int32_t want_ns = dim / ds + (dim % ds != 0), want_lds = dim % ds ? dim % ds : ds;
    if (ns != want_ns || lds != want_lds)
        return tq_fail(TQ_ERR_DATA, "%s: not a valid fastText model: %s has nsubq %d, lastdsub %d (want %d, %d)",
                       c->path, what, ns, lds, want_ns, want_lds);
    uint64_t bytes = (uint64_t)dim * FT_KSUB * 4;
    if (!have(c, bytes))
        return truncated(c, what);
    if (out) {
        if (!*out && !(*out = malloc((size_t)bytes)))
            return tq_fail(TQ_ERR_NOMEM, "%s: out of memory for %s", c->path, what);
        copy_floats(*out, c->p + c->off, (size_t)dim * FT_KSUB);
    }
    c->off += bytes;
    *nsubq = ns;
    *dsub = ds;
    *lastdsub = lds;
    return TQ_OK;
}

/* A matrix (dense or quantized) of cols columns; the input matrix fills m, the
 * output matrix (m NULL) is only checked and skipped. */
static tq_status read_matrix(cursor *c, int quant, int64_t cols, ft_model *m, const char *what)
{
    char w[96];
    tq_status st;
    int64_t rows, ncols;
    if (!quant) {
        snprintf(w, sizeof w, "the %s matrix size", what);
        if ((st = rd_i64(c, &rows, w)) || (st = rd_i64(c, &ncols, w)))
            return st;
        if (rows < 0 || ncols != cols) {
            snprintf(w, sizeof w, "the %s matrix is %lld x %lld, expected %lld columns", what,
                     (long long)rows, (long long)ncols, (long long)cols);
            return bad(c, w);
        }
        snprintf(w, sizeof w, "the %s matrix", what);
        if ((uint64_t)rows > (c->size - c->off) / 4 / (uint64_t)cols)
            return truncated(c, w);
        if (m) {
            m->rows = rows;
            m->dense = c->p + c->off;
        }
        c->off += (size_t)rows * (size_t)cols * 4;
        return TQ_OK;
    }
    int qnorm;
    int32_t codesize, ns, ds, lds;
    snprintf(w, sizeof w, "the quantized %s matrix header", what);
    if ((st = rd_bool(c, &qnorm, w)) || (st = rd_i64(c, &rows, w)) || (st = rd_i64(c, &ncols, w)) ||
        (st = rd_i32(c, &codesize, w)))
        return st;
    if (rows < 0 || ncols != cols || codesize < 0) {
        snprintf(w, sizeof w, "the quantized %s matrix is %lld x %lld (code size %d), expected %lld columns",
                 what, (long long)rows, (long long)ncols, codesize, (long long)cols);
        return bad(c, w);
    }
    snprintf(w, sizeof w, "the %s matrix codes", what);
    if (!have(c, (uint64_t)codesize))
        return truncated(c, w);
    const unsigned char *codes = c->p + c->off;
    c->off += (size_t)codesize;
    float *cent = NULL;
    snprintf(w, sizeof w, "the %s matrix quantizer", what);
    if ((st = read_pq(c, cols, w, &ns, &ds, &lds, m ? &cent : NULL))) {
        free(cent);
        return st;
    }
    if ((int64_t)codesize != rows * ns) {
        free(cent);
        snprintf(w, sizeof w, "the %s matrix has %d codes for %lld rows of %d", what, codesize,
                 (long long)rows, ns);
        return bad(c, w);
    }
    const unsigned char *norm_codes = NULL;
    float ncent[FT_KSUB], *ncp = ncent;
    if (qnorm) {
        snprintf(w, sizeof w, "the %s matrix norm codes", what);
        if (!have(c, (uint64_t)rows)) {
            free(cent);
            return truncated(c, w);
        }
        norm_codes = c->p + c->off;
        c->off += (size_t)rows;
        int32_t a, b, d;
        snprintf(w, sizeof w, "the %s matrix norm quantizer", what);
        if ((st = read_pq(c, 1, w, &a, &b, &d, &ncp))) {
            free(cent);
            return st;
        }
    }
    if (!m)
        return TQ_OK;
    m->rows = rows;
    m->quant = 1;
    m->qnorm = qnorm;
    m->codes = codes;
    m->norm_codes = norm_codes;
    m->nsubq = ns;
    m->dsub = ds;
    m->lastdsub = lds;
    m->centroids = cent;
    if (qnorm)
        memcpy(m->norm_centroids, ncent, sizeof ncent);
    return TQ_OK;
}

int32_t ft_lookup(const ft_model *m, const char *s, size_t n, uint32_t h)
{
    for (uint32_t i = h & m->tmask;; i = (i + 1) & m->tmask) {
        int32_t id = m->table[i];
        if (id < 0 || (m->wlen[id] == n && !memcmp(m->word[id], s, n)))
            return id;
    }
}

static int cmp_pair(const void *a, const void *b)
{
    const int32_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[2] < y[2] ? -1 : x[2] > y[2]; /* file order: the later one wins, as in fastText */
}

static tq_status read_dict(cursor *c, ft_model *m)
{
    int64_t ntokens;
    tq_status st;
    if ((st = rd_i32(c, &m->nentries, "the dictionary header")) ||
        (st = rd_i32(c, &m->nwords, "the dictionary header")) ||
        (st = rd_i32(c, &m->nlabels, "the dictionary header")) ||
        (st = rd_i64(c, &ntokens, "the dictionary header")) ||
        (st = rd_i64(c, &m->pruneidx_size, "the dictionary header")))
        return st;
    if (m->nentries < 0 || m->nwords < 0 || m->nlabels < 0 ||
        (int64_t)m->nwords + m->nlabels != m->nentries || m->pruneidx_size < -1) {
        char w[128];
        snprintf(w, sizeof w, "dictionary of %d entries holds %d words and %d labels (pruned %lld)",
                 m->nentries, m->nwords, m->nlabels, (long long)m->pruneidx_size);
        return bad(c, w);
    }
    /* each entry takes at least 10 bytes: its NUL, count and type */
    if ((uint64_t)m->nentries > (c->size - c->off) / 10)
        return truncated(c, "the dictionary");
    size_t n = (size_t)m->nentries;
    uint32_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    m->tmask = cap - 1;
    m->word = malloc((n ? n : 1) * sizeof *m->word);
    m->wlen = malloc((n ? n : 1) * sizeof *m->wlen);
    m->wtype = malloc(n ? n : 1);
    m->table = malloc(cap * sizeof *m->table);
    if (!m->word || !m->wlen || !m->wtype || !m->table)
        return tq_fail(TQ_ERR_NOMEM, "%s: out of memory for the dictionary", c->path);
    memset(m->table, 0xff, cap * sizeof *m->table);
    for (size_t i = 0; i < n; i++) {
        const unsigned char *s = c->p + c->off;
        const unsigned char *z = memchr(s, 0, c->size - c->off);
        if (!z)
            return truncated(c, "a dictionary word");
        size_t len = (size_t)(z - s);
        if (len > UINT32_MAX)
            return bad(c, "a dictionary word is too long");
        c->off += len + 1;
        int64_t count = 0;
        unsigned type = 0;
        if ((st = rd_i64(c, &count, "a dictionary entry")) || (st = rd_u8(c, &type, "a dictionary entry")))
            return st;
        if (type > FT_LABEL) {
            char w[96];
            snprintf(w, sizeof w, "dictionary entry %zu has type %u (0 word, 1 label)", i, type);
            return bad(c, w);
        }
        m->word[i] = (const char *)s;
        m->wlen[i] = (uint32_t)len;
        m->wtype[i] = (int8_t)type;
        /* a repeated word maps to its last entry, as fastText's table does */
        uint32_t h = ft_hash((const char *)s, len), j = h & m->tmask;
        while (m->table[j] >= 0 &&
               !(m->wlen[m->table[j]] == len && !memcmp(m->word[m->table[j]], s, len)))
            j = (j + 1) & m->tmask;
        m->table[j] = (int32_t)i;
    }
    if (m->pruneidx_size > 0) {
        if ((uint64_t)m->pruneidx_size > (c->size - c->off) / 8)
            return truncated(c, "the pruned n-gram index");
        size_t np = (size_t)m->pruneidx_size;
        int32_t *pairs = malloc(np * 3 * sizeof *pairs);
        m->prune_from = malloc(np * sizeof *m->prune_from);
        m->prune_to = malloc(np * sizeof *m->prune_to);
        if (!pairs || !m->prune_from || !m->prune_to) {
            free(pairs);
            return tq_fail(TQ_ERR_NOMEM, "%s: out of memory for the pruned index", c->path);
        }
        for (size_t i = 0; i < np; i++) {
            pairs[3 * i] = (int32_t)tq_le32(c->p + c->off + 8 * i);
            pairs[3 * i + 1] = (int32_t)tq_le32(c->p + c->off + 8 * i + 4);
            pairs[3 * i + 2] = (int32_t)i;
        }
        c->off += np * 8;
        qsort(pairs, np, 3 * sizeof *pairs, cmp_pair);
        size_t k = 0;
        for (size_t i = 0; i < np; i++) {
            if (k && m->prune_from[k - 1] == pairs[3 * i])
                k--;
            m->prune_from[k] = pairs[3 * i];
            m->prune_to[k++] = pairs[3 * i + 1];
        }
        m->nprune = (int64_t)k;
        free(pairs);
    }
    return TQ_OK;
}

static tq_status parse(ft_model *m, cursor *c)
{
    int32_t magic, version, a[12];
    tq_status st;
    if (c->size < 8)
        return truncated(c, "the header");
    if ((st = rd_i32(c, &magic, "the header")) || (st = rd_i32(c, &version, "the header")))
        return st;
    if (magic != FT_MAGIC)
        return bad(c, "wrong magic number");
    if (version != 11 && version != 12) {
        char w[64];
        snprintf(w, sizeof w, "format version %d (this reader knows 11 and 12)", version);
        return bad(c, w);
    }
    /* dim ws epoch minCount neg wordNgrams loss model bucket minn maxn lrUpdateRate, then t */
    for (int i = 0; i < 12; i++)
        if ((st = rd_i32(c, &a[i], "the training arguments")))
            return st;
    int64_t t;
    if ((st = rd_i64(c, &t, "the training arguments")))
        return st;
    m->dim = a[0];
    m->word_ngrams = a[5];
    m->model = a[7];
    m->bucket = a[8];
    m->minn = a[9];
    m->maxn = a[10];
    if (m->dim < 1 || m->dim > (1 << 20) || m->model < FT_MODEL_CBOW || m->model > FT_MODEL_SUP ||
        m->bucket < 0) {
        char w[128];
        snprintf(w, sizeof w, "arguments out of range (dim %d, model %d, bucket %d)", m->dim, m->model,
                 m->bucket);
        return bad(c, w);
    }
    if (version == 11 && m->model == FT_MODEL_SUP)
        m->maxn = 0; /* version 11 supervised models had no character n-grams */
    if ((st = read_dict(c, m)))
        return st;
    int quant, qout;
    if ((st = rd_bool(c, &quant, "the input matrix type")))
        return st;
    if (!quant && m->pruneidx_size >= 0)
        return bad(c, "pruned dictionary with a dense input matrix");
    if ((st = read_matrix(c, quant, m->dim, m, "input")))
        return st;
    if ((st = rd_bool(c, &qout, "the output matrix type")) ||
        (st = read_matrix(c, quant && qout, m->dim, NULL, "output")))
        return st;
    if (c->off != c->size)
        return bad(c, "trailing bytes after the output matrix");
    /* every row the sentence vectors can reach must exist */
    int64_t need = m->model == FT_MODEL_SUP ? m->nwords : m->nentries;
    int hashing = m->maxn > 0 || (m->model == FT_MODEL_SUP && m->word_ngrams > 1);
    if (hashing && m->pruneidx_size < 0 && m->nwords + (int64_t)m->bucket > need)
        need = m->nwords + (int64_t)m->bucket;
    for (int64_t i = 0; i < m->nprune; i++)
        if (m->prune_to[i] < 0 || m->nwords + (int64_t)m->prune_to[i] >= m->rows)
            return bad(c, "pruned n-gram index points past the input matrix");
    if (m->rows < need) {
        char w[128];
        snprintf(w, sizeof w, "input matrix has %lld rows, the dictionary and buckets need %lld",
                 (long long)m->rows, (long long)need);
        return bad(c, w);
    }
    return TQ_OK;
}

tq_status ft_model_load(ft_model *m, const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open model: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb)) {
        int e = errno;
        close(fd);
        return tq_fail(TQ_ERR_IO, "%s: %s", path, strerror(e));
    }
    cursor c = {NULL, 0, (size_t)sb.st_size, path};
    if (sb.st_size < 8) {
        close(fd);
        return truncated(&c, "the header");
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return tq_fail(e == ENOMEM ? TQ_ERR_NOMEM : TQ_ERR_IO, "%s: cannot map model: %s", path,
                       e == ENOMEM ? "out of memory" : strerror(e));
    m->map = p;
    m->size = (size_t)sb.st_size;
    c.p = p;
    return parse(m, &c);
}

void ft_model_free(ft_model *m)
{
    if (m->map)
        munmap((void *)m->map, m->size);
    free(m->word);
    free(m->wlen);
    free(m->wtype);
    free(m->table);
    free(m->prune_from);
    free(m->prune_to);
    free(m->centroids);
}
