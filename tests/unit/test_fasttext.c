/* test_fasttext.c: the fastText and .vec embedders on model files written here
 * byte by byte, with expected vectors worked out in float64 in this file; and
 * every truncation and a set of corrupt fields, which must give TQ_ERR_DATA. */
#include "check.h"
#include "embed/embed.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/tq-test-fasttext-XXXXXX";

typedef struct buf {
    unsigned char b[1 << 16];
    size_t n;
} buf;

static void put(buf *b, const void *p, size_t n) { memcpy(b->b + b->n, p, n), b->n += n; }
static void i32(buf *b, int32_t v) { put(b, &v, 4); } /* the tests run on little-endian hosts */
static void i64(buf *b, int64_t v) { put(b, &v, 8); }
static void f32(buf *b, float v) { put(b, &v, 4); }

/* Independent FNV-1a as fastText defines it (bytes as signed chars). */
static uint32_t fnv(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint32_t)(int32_t)(signed char)*s) * 16777619u;
    return h;
}

enum { DIM = 4, BUCKET = 7 };
static const char *WORDS[] = {"</s>", "ab", "cd"};

/* Row r of the input matrix: distinct small values. */
static float rowval(int r, int j) { return (float)((r + 1) * (j % 2 ? -1 : 1)) * 0.25f + (float)j * 0.125f; }

/* A model with the 3 words above; model 3 (supervised) or 2 (skipgram). */
static size_t make_model(buf *b, int model, int minn, int maxn, int bucket)
{
    b->n = 0;
    i32(b, 793712314), i32(b, 12);
    int32_t args[12] = {DIM, 5, 1, 1, 5, 1, 1, model, bucket, minn, maxn, 100};
    for (int i = 0; i < 12; i++)
        i32(b, args[i]);
    f32(b, 0), f32(b, 0); /* t, a double */
    i32(b, 3), i32(b, 3), i32(b, 0), i64(b, 30), i64(b, -1);
    for (int i = 0; i < 3; i++) {
        put(b, WORDS[i], strlen(WORDS[i]) + 1);
        i64(b, 10 - i);
        put(b, "\0", 1);
    }
    put(b, "\0", 1); /* dense input */
    int rows = 3 + bucket;
    i64(b, rows), i64(b, DIM);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < DIM; j++)
            f32(b, rowval(r, j));
    put(b, "\0", 1); /* dense output: 1 x DIM */
    i64(b, 1), i64(b, DIM);
    for (int j = 0; j < DIM; j++)
        f32(b, 0.5f);
    return b->n;
}

static void save(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

static int embed(const char *path, const char *text, float *out, tq_status *st)
{
    tq_embedder *e;
    *st = tq_embedder_open(path, NULL, &e);
    if (*st)
        return 0;
    size_t len = strlen(text);
    *st = tq_embedder_run(e, 1, &text, &len, out);
    tq_embedder_close(e);
    return *st == TQ_OK;
}

static double rel_err(const float *a, const double *want, int n)
{
    double d = 0, w = 0;
    for (int i = 0; i < n; i++)
        d += (a[i] - want[i]) * (a[i] - want[i]), w += want[i] * want[i];
    return w ? sqrt(d / w) : sqrt(d);
}

static void addrow(double *acc, int r, double s)
{
    for (int j = 0; j < DIM; j++)
        acc[j] += s * rowval(r, j);
}

/* n-gram rows of a word, as fastText picks them (ASCII words here). */
static int ngram_rows(const char *w, int minn, int maxn, int *rows)
{
    char s[64], g[64];
    snprintf(s, sizeof s, "<%s>", w);
    int n = 0, L = (int)strlen(s);
    for (int i = 0; i < L; i++)
        for (int k = minn; k <= maxn && i + k <= L; k++) {
            if (k == 1 && (i == 0 || i + k == L))
                continue;
            memcpy(g, s + i, (size_t)k), g[k] = 0;
            rows[n++] = 3 + (int)(fnv(g) % BUCKET);
        }
    return n;
}

static void test_supervised(void)
{
    buf b;
    char path[128];
    snprintf(path, sizeof path, "%s/sup.bin", dir);
    save(path, b.b, make_model(&b, 3, 0, 0, 0));
    float out[DIM];
    tq_status st;
    /* "ab zz cd": ab and cd are rows 1 and 2, zz is unknown with no subwords, then </s> (row 0) */
    double want[DIM] = {0};
    addrow(want, 1, 1), addrow(want, 2, 1), addrow(want, 0, 1);
    for (int j = 0; j < DIM; j++)
        want[j] /= 3;
    CHECK(embed(path, "ab zz\tcd ", out, &st), "supervised run: %s", tq_errmsg());
    CHECK(rel_err(out, want, DIM) < 1e-6, "supervised mean of rows: err %g", rel_err(out, want, DIM));
    /* an empty line is the end-of-sentence row alone */
    CHECK(embed(path, "", out, &st) && fabs(out[1] - rowval(0, 1)) < 1e-7, "empty line gives the </s> row");

    /* with subwords: each known word adds its own row and its n-grams' rows */
    snprintf(path, sizeof path, "%s/sup-sub.bin", dir);
    save(path, b.b, make_model(&b, 3, 2, 3, BUCKET));
    int rows[64], n = ngram_rows("ab", 2, 3, rows), m = ngram_rows("xy", 2, 3, rows + n);
    memset(want, 0, sizeof want);
    addrow(want, 1, 1), addrow(want, 0, 1);
    for (int i = 0; i < n + m; i++)
        addrow(want, rows[i], 1);
    for (int j = 0; j < DIM; j++)
        want[j] /= n + m + 2;
    CHECK(embed(path, "ab xy", out, &st), "supervised subwords run: %s", tq_errmsg());
    CHECK(rel_err(out, want, DIM) < 1e-6, "supervised with subwords: err %g", rel_err(out, want, DIM));
}

static void test_unsupervised(void)
{
    buf b;
    char path[128];
    snprintf(path, sizeof path, "%s/sg.bin", dir);
    save(path, b.b, make_model(&b, 2, 3, 3, BUCKET));
    /* "ab qq": each word's vector is the mean of its rows, made unit length; then averaged */
    const char *w[2] = {"ab", "qq"};
    double want[DIM] = {0};
    for (int k = 0; k < 2; k++) {
        int rows[64], n = 0;
        if (k == 0)
            rows[n++] = 1;
        n += ngram_rows(w[k], 3, 3, rows + n);
        double v[DIM] = {0}, s = 0;
        for (int i = 0; i < n; i++)
            addrow(v, rows[i], 1.0 / n);
        for (int j = 0; j < DIM; j++)
            s += v[j] * v[j];
        for (int j = 0; j < DIM; j++)
            want[j] += v[j] / sqrt(s) / 2;
    }
    float out[DIM];
    tq_status st;
    CHECK(embed(path, " ab  qq ", out, &st), "skipgram run: %s", tq_errmsg());
    CHECK(rel_err(out, want, DIM) < 1e-6, "skipgram mean of unit word vectors: err %g", rel_err(out, want, DIM));
    CHECK(embed(path, "", out, &st) && out[0] == 0 && out[3] == 0, "empty line is the zero vector");
}

/* Every proper prefix of a valid model is truncated; each must fail cleanly. */
static void test_truncated(void)
{
    buf b;
    char path[128];
    snprintf(path, sizeof path, "%s/cut.bin", dir);
    size_t n = make_model(&b, 3, 2, 3, BUCKET);
    int bad = 0;
    for (size_t cut = 4; cut < n; cut++) {
        save(path, b.b, cut);
        tq_embedder *e = NULL;
        tq_status st = tq_embed_fasttext_open(path, &e);
        if (st != TQ_ERR_DATA || e || !strstr(tq_errmsg(), path))
            bad++;
    }
    CHECK(!bad, "%d truncated models did not fail with TQ_ERR_DATA", bad);
    b.b[n++] = 0;
    save(path, b.b, n);
    tq_embedder *e = NULL;
    CHECK(tq_embed_fasttext_open(path, &e) == TQ_ERR_DATA && strstr(tq_errmsg(), "trailing"),
          "trailing bytes: %s", tq_errmsg());
}

/* Fields made impossible one at a time; the message says which part is wrong. */
static void test_corrupt(void)
{
    struct {
        size_t off;
        int32_t v;
        const char *msg;
    } cases[] = {
        {0, 1234, "magic"},
        {4, 99, "version"},
        {8, 0, "dim"},            /* dim */
        {8 + 4 * 7, 9, "model"},  /* model kind */
        {8 + 4 * 8, -5, "bucket"},
        {64, 0x7fffffff, "dictionary"}, /* entry count */
        {68, -2, "dictionary"},         /* words */
    };
    char path[128];
    snprintf(path, sizeof path, "%s/bad.bin", dir);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        buf b;
        size_t n = make_model(&b, 3, 2, 3, BUCKET);
        memcpy(b.b + cases[i].off, &cases[i].v, 4);
        save(path, b.b, n);
        tq_embedder *e = NULL;
        tq_status st = tq_embed_fasttext_open(path, &e);
        CHECK(st == TQ_ERR_DATA && strstr(tq_errmsg(), cases[i].msg), "field at %zu: status %d, %s",
              cases[i].off, st, tq_errmsg());
    }
    tq_embedder *e = NULL;
    CHECK(tq_embed_fasttext_open("/nonexistent/model.bin", &e) == TQ_ERR_NOINPUT, "missing model");
}

static void test_vec(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/w.vec", dir);
    const char *good = "3 2\nab 1 2\ncd -3 0.5 \n\xc3\xa9t\xc3\xa9 4e-1 -1e1\n";
    save(path, good, strlen(good));
    float out[2];
    tq_status st;
    CHECK(embed(path, "cd zz ab", out, &st) && out[0] == -1.0f && out[1] == 1.25f,
          "vec average of known words: %g %g (%s)", out[0], out[1], tq_errmsg());
    CHECK(embed(path, "\xc3\xa9t\xc3\xa9", out, &st) && out[0] == 0.4f && out[1] == -10.0f, "vec UTF-8 word");
    CHECK(embed(path, "zz yy", out, &st) && out[0] == 0 && out[1] == 0, "no known word gives zero");
    const char *nohdr = "ab 1 2 3\ncd 4 5 6\n";
    save(path, nohdr, strlen(nohdr));
    tq_embedder *e = NULL;
    CHECK(tq_embedder_open(path, NULL, &e) == TQ_OK && tq_embedder_dim(e) == 3, "vec without header");
    tq_embedder_close(e);
    struct {
        const char *text, *msg;
    } bad[] = {
        {"2 2\nab 1 2\ncd 1\n", "line 3"},
        {"2 2\nab 1 2\ncd 1 x\n", "line 3"},
        {"2 2\nab 1 2\ncd 1 2 3\n", "line 3"},
        {"3 2\nab 1 2\ncd 1 2\n", "promises 3"},
        {"ab 1 nan\n", "line 1"},
        {"999999999 300\nab 1 2\n", "more than the file holds"},
        {"", "no word vectors"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        save(path, bad[i].text, strlen(bad[i].text));
        e = NULL;
        st = tq_embedder_open(path, NULL, &e);
        CHECK(st == TQ_ERR_DATA && strstr(tq_errmsg(), bad[i].msg), "bad vec %zu: status %d, %s", i, st,
              tq_errmsg());
    }
    CHECK(tq_embed_vec_open("/nonexistent/w.vec", &e) == TQ_ERR_NOINPUT, "missing vec");
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    test_supervised();
    test_unsupervised();
    test_truncated();
    test_corrupt();
    test_vec();
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd))
        return 1;
    return CHECK_DONE();
}
