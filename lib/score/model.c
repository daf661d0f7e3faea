/* model.c: the scoring models tq-train writes (linear, logistic, softmax, MLP),
 * read from a TQ stream of named weight tensors and run with the op API. Every
 * kind is a chain of affine layers (matmul, add a bias row) with an activation
 * between layers and an output function; the format is in man/tq-score.1. */
#include "score.h"
#include "internal.h"

#include <errno.h>
#include <math.h>

enum kind { KIND_LINEAR, KIND_LOGISTIC, KIND_SOFTMAX, KIND_MLP };
enum out { OUT_LINEAR, OUT_SIGMOID, OUT_SOFTMAX };
#define ACT_GELU (-1)

struct tq_score_model {
    tq_device *dev;
    int kind, nl, out, hidden, normalized;
    int64_t cls;
    int64_t dim[TQ_SCORE_MAX_LAYERS + 1]; /* dim[0] inputs, dim[i] outputs of layer i */
    tq_tensor *w[TQ_SCORE_MAX_LAYERS], *b[TQ_SCORE_MAX_LAYERS];
    /* int8 products (i8 weights, --precision int8 or auto where native):
     * wq i8 [out, in], ws f32 [out], wc f32 [in] the inputs' column scales
     * 2^shift (NULL: none); w[i] is then NULL */
    tq_tensor *wq[TQ_SCORE_MAX_LAYERS], *ws[TQ_SCORE_MAX_LAYERS], *wc[TQ_SCORE_MAX_LAYERS];
    tq_score_prec prec;
    tq_dtype code;                        /* the weights' dtype (the first layer's) */
    int products_i8;                      /* layers run as int8 products */
    char describe[200];
};

/* A weight frame as read: its name, shape, dtype and values: in f32 for the
 * float dtypes, else the codes' bytes as they are (i8, q8_0, q4_0 weights,
 * i8 shifts). */
typedef struct wframe {
    char name[TQ_MAX_NAME + 1];
    int rank, used;
    int64_t dims[TQ_MAX_RANK];
    tq_dtype dt;
    float *v;
    void *raw;
} wframe;

typedef struct loader {
    const char *path;
    wframe *f;
    int n;
    char meta[TQ_MAX_META + 1];
    size_t meta_len;
    int have_header;
} loader;

#define BAD(L, ...) tq_fail_context(tq_fail(TQ_ERR_DATA, __VA_ARGS__), "%s", (L)->path)

/* Names of weight frames: w, b, or w/b followed by digits, and the side
 * frames of quantized weights, w_scale, w_shift, wN_scale, wN_shift. Other
 * frames are free for notes (a training log, say) and ignored. */
static int is_weight_name(const char *s)
{
    if (s[0] != 'w' && s[0] != 'b')
        return 0;
    const char *p = s + 1;
    while (*p >= '0' && *p <= '9')
        p++;
    return !*p || (s[0] == 'w' && (!strcmp(p, "_scale") || !strcmp(p, "_shift")));
}

static const char *meta_of(const loader *L, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < L->meta_len;) {
        const char *e = L->meta + i;
        size_t el = strlen(e);
        if (el > kl && !strncmp(e, key, kl) && e[kl] == '=')
            return e + kl + 1;
        i += el + 1;
    }
    return NULL;
}

static tq_status take_header(loader *L, tq_frame *f)
{
    const void *data;
    tq_status st;
    if (L->have_header)
        return BAD(L, "more than one \"model\" frame");
    if (f->dtype != TQ_DTYPE_I64 || f->rank != 0)
        return BAD(L, "frame \"model\" must be an i64 scalar (the format version), not %s of rank %d",
                   tq_dtype_name(f->dtype), f->rank);
    if ((st = tq_frame_data(f, &data)))
        return st;
    int64_t version;
    memcpy(&version, data, 8);
    if (version != 1)
        return BAD(L, "model format version %lld is not supported (this tq reads 1)",
                   (long long)version);
    if (f->meta_len)
        memcpy(L->meta, f->meta, f->meta_len);
    L->meta_len = f->meta_len;
    L->have_header = 1;
    return TQ_OK;
}

static tq_status take_weight(loader *L, tq_frame *f)
{
    for (int i = 0; i < L->n; i++)
        if (!strcmp(L->f[i].name, f->name))
            return BAD(L, "weight \"%s\" comes in more than one frame", f->name);
    int side = strchr(f->name, '_') != NULL;
    int shift = side && !strcmp(strchr(f->name, '_'), "_shift");
    int code = f->dtype == TQ_DTYPE_I8 || f->dtype == TQ_DTYPE_Q8_0 || f->dtype == TQ_DTYPE_Q4_0;
    if (shift ? f->dtype != TQ_DTYPE_I8 || f->rank != 1
              : side ? f->dtype != TQ_DTYPE_F32 || f->rank != 1
                     : !tq_dtype_is_float(f->dtype) && !(code && f->name[0] == 'w'))
        return BAD(L, "%s \"%s\" must be %s, not %s of rank %d",
                   side ? "side frame" : "weight", f->name,
                   shift ? "i8 [in]" : side ? "f32 [out]"
                   : f->name[0] == 'w' ? "a float tensor or i8, q8_0 or q4_0 codes"
                                       : "a float tensor",
                   tq_dtype_name(f->dtype), f->rank);
    if (code && !side && f->rank != 2)
        return BAD(L, "weight \"%s\" of %s codes must be [out, in], not of rank %d", f->name,
                   tq_dtype_name(f->dtype), f->rank);
    wframe *n = realloc(L->f, (size_t)(L->n + 1) * sizeof *n);
    if (!n)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    L->f = n;
    wframe *w = &L->f[L->n];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", f->name);
    w->rank = f->rank;
    w->dt = f->dtype;
    memcpy(w->dims, f->dims, sizeof w->dims);
    size_t cnt = 1;
    for (int d = 0; d < f->rank; d++)
        cnt *= (size_t)f->dims[d];
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (st)
        return st;
    L->n++;
    if (code) { /* kept as they are, checked against their layer in take_layer */
        uint64_t bytes;
        if ((st = tq_dtype_payload_bytes(f->dtype, f->rank, f->dims, &bytes)))
            return tq_fail_context(st, "%s: weight \"%s\"", L->path, f->name);
        if (!(w->raw = malloc(bytes ? bytes : 1)))
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        memcpy(w->raw, data, bytes);
        return TQ_OK;
    }
    if (!(w->v = malloc(cnt ? cnt * 4 : 4)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    if ((st = tq_convert(TQ_DTYPE_F32, w->v, f->dtype, data, cnt, 0)))
        return st;
    for (size_t i = 0; i < cnt; i++)
        if (!isfinite(w->v[i]))
            return BAD(L, "weight \"%s\" holds a value that is not finite", f->name);
    return TQ_OK;
}

static wframe *find(loader *L, const char *name)
{
    for (int i = 0; i < L->n; i++)
        if (!strcmp(L->f[i].name, name))
            return &L->f[i];
    return NULL;
}

static tq_status upload(tq_device *dev, const float *v, int64_t rows, int64_t cols, int rank,
                        tq_tensor **t)
{
    int64_t dims[2] = {rows, cols};
    if (rank == 1)
        dims[0] = cols;
    tq_status st = tq_tensor_new(dev, TQ_DTYPE_F32, rank, dims, t);
    if (!st)
        st = tq_tensor_upload(*t, v, (size_t)(rows * cols) * 4);
    if (!st) /* a model's weights never change: the device may keep them packed */
        tq_tensor_set_constant(*t);
    return st;
}

/* Weights of codes as f32 [in, out]: w[j, o] = code[o, j] * 2^shift[j], the
 * code's value as tq-quantize --to f32 decodes it (i8: q * scale[o]). */
static tq_status decode_codes(loader *L, const wframe *w, const float *scale,
                              const int8_t *shift, int64_t in, int64_t out, float *dst)
{
    float *row = malloc((size_t)in * 4);
    if (!row)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    uint64_t rb = 0;
    int64_t rd[2] = {1, in};
    tq_dtype_payload_bytes(w->dt, 2, rd, &rb);
    tq_status st = TQ_OK;
    for (int64_t o = 0; o < out && !st; o++) {
        const unsigned char *src = (const unsigned char *)w->raw + (size_t)o * rb;
        if (w->dt == TQ_DTYPE_I8)
            for (int64_t j = 0; j < in; j++)
                row[j] = (float)((const int8_t *)src)[j] * scale[o];
        else
            st = tq_convert(TQ_DTYPE_F32, row, w->dt, src, (size_t)in, in);
        for (int64_t j = 0; j < in && !st; j++) {
            float v = shift ? ldexpf(row[j], shift[j]) : row[j];
            if (!isfinite(v))
                st = BAD(L, "weight \"%s\" decodes to a value that is not finite", w->name);
            dst[j * out + o] = v;
        }
    }
    free(row);
    return st;
}

/* The side frames of coded weights WNAME: WNAME_scale f32 [out] (i8 only,
 * required there) and WNAME_shift i8 [in] (optional, each -64..64). */
static tq_status take_sides(loader *L, tq_score_model *m, int i, const wframe *w, int64_t in,
                            int64_t out, float **dec)
{
    char sn[TQ_MAX_NAME + 8], hn[TQ_MAX_NAME + 8];
    snprintf(sn, sizeof sn, "%s_scale", w->name);
    snprintf(hn, sizeof hn, "%s_shift", w->name);
    wframe *sc = find(L, sn), *sh = find(L, hn);
    if (w->dt == TQ_DTYPE_I8 && !sc)
        return BAD(L, "i8 weights \"%s\" need their scales \"%s\" f32 [%lld]", w->name, sn,
                   (long long)out);
    if (w->dt != TQ_DTYPE_I8 && sc)
        return BAD(L, "%s weights \"%s\" hold their scales in their blocks: unexpected \"%s\"",
                   tq_dtype_name(w->dt), w->name, sn);
    if ((w->dt == TQ_DTYPE_Q8_0 || w->dt == TQ_DTYPE_Q4_0) && in % TQ_QK)
        return BAD(L, "%s weights \"%s\" need a multiple of %d inputs, not %lld",
                   tq_dtype_name(w->dt), w->name, TQ_QK, (long long)in);
    if (sc && sc->dims[0] != out)
        return BAD(L, "\"%s\" must be [%lld] to match \"%s\"", sn, (long long)out, w->name);
    if (sh && sh->dims[0] != in)
        return BAD(L, "\"%s\" must be [%lld] to match \"%s\"", hn, (long long)in, w->name);
    const int8_t *shift = sh ? sh->raw : NULL;
    for (int64_t j = 0; shift && j < in; j++)
        if (shift[j] < -64 || shift[j] > 64)
            return BAD(L, "\"%s\" holds the shift %d, beyond -64..64", hn, shift[j]);
    if (sc)
        sc->used = 1;
    if (sh)
        sh->used = 1;
    if (!(*dec = malloc((size_t)(in * out) * 4)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st = decode_codes(L, w, sc ? sc->v : NULL, shift, in, out, *dec);
    if (st || w->dt != TQ_DTYPE_I8)
        return st;
    int native = tq_device_native_product(m->dev, TQ_DTYPE_I8);
    if (m->prec == TQ_SCORE_PREC_F32 || (m->prec == TQ_SCORE_PREC_AUTO && !native) ||
        in > 65536)
        return TQ_OK;
    /* int8 products: the codes as they are, the shifts as the inputs' column
     * scales (exact powers of 2) */
    int64_t qd[2] = {out, in};
    if ((st = tq_tensor_new(m->dev, TQ_DTYPE_I8, 2, qd, &m->wq[i])) ||
        (st = tq_tensor_upload(m->wq[i], w->raw, (size_t)(in * out))))
        return st;
    tq_tensor_set_constant(m->wq[i]);
    if ((st = tq_tensor_new(m->dev, TQ_DTYPE_F32, 1, &out, &m->ws[i])) ||
        (st = tq_tensor_upload(m->ws[i], sc->v, (size_t)out * 4)))
        return st;
    tq_tensor_set_constant(m->ws[i]);
    if (shift) {
        for (int64_t j = 0; j < in; j++)
            (*dec)[j] = ldexpf(1.0f, shift[j]);
        if ((st = tq_tensor_new(m->dev, TQ_DTYPE_F32, 1, &in, &m->wc[i])) ||
            (st = tq_tensor_upload(m->wc[i], *dec, (size_t)in * 4)))
            return st;
        tq_tensor_set_constant(m->wc[i]);
    }
    m->products_i8 = 1;
    free(*dec);
    *dec = NULL;
    return TQ_OK;
}

/* Layer i (0-based) from frames WNAME [in, out] (or [in] / [in, 1] when
 * `vector` allows a single output; codes: [out, in], [1, in] for a single
 * output) and BNAME [out] (or a scalar). */
static tq_status take_layer(loader *L, tq_score_model *m, int i, const char *wname,
                            const char *bname, int vector)
{
    wframe *w = find(L, wname), *b = find(L, bname);
    if (!w)
        return BAD(L, "missing weight tensor \"%s\"", wname);
    if (!b)
        return BAD(L, "missing bias tensor \"%s\"", bname);
    w->used = b->used = 1;
    int coded = w->raw != NULL;
    int64_t in, out;
    if (coded)
        in = w->dims[1], out = w->dims[0];
    else if (w->rank == 2)
        in = w->dims[0], out = w->dims[1];
    else if (w->rank == 1 && vector)
        in = w->dims[0], out = 1;
    else
        return BAD(L, "\"%s\" must be [in, out]%s, not of rank %d", wname,
                   vector ? " or [in]" : "", w->rank);
    if (in < 1 || out < 1)
        return BAD(L, "\"%s\" has an empty dim", wname);
    if (i > 0 && in != m->dim[i])
        return BAD(L, "\"%s\" takes %lld inputs, but the layer before gives %lld", wname,
                   (long long)in, (long long)m->dim[i]);
    int64_t bn = b->rank == 0 ? 1 : b->rank == 1 ? b->dims[0] : -1;
    if (bn != out || (b->rank == 0 && !vector))
        return BAD(L, "\"%s\" must be [%lld] to match \"%s\"", bname, (long long)out, wname);
    m->dim[i] = in;
    m->dim[i + 1] = out;
    float *dec = NULL;
    tq_status st = TQ_OK;
    if (coded) {
        if (m->code == TQ_DTYPE_F32)
            m->code = w->dt;
        st = take_sides(L, m, i, w, in, out, &dec);
    }
    if (!st && (dec || !coded))
        st = upload(m->dev, dec ? dec : w->v, in, out, 2, &m->w[i]);
    free(dec);
    if (!st)
        st = upload(m->dev, b->v, 1, out, 1, &m->b[i]);
    m->nl = i + 1;
    return st;
}

static int pick(const char *v, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i]))
            return i;
    return -1;
}

static tq_status build(loader *L, tq_score_model *m)
{
    static const char *kinds[] = {"linear", "logistic", "softmax", "mlp", NULL};
    static const char *outs[] = {"linear", "sigmoid", "softmax", NULL};
    static const char *acts[] = {"relu", "tanh", "sigmoid", "gelu", NULL};
    static const char *inputs[] = {"raw", "normalized", NULL};
    tq_status st;
    if (!L->have_header)
        return BAD(L, "no \"model\" frame: not a tq-score model");
    const char *kind = meta_of(L, "kind"), *v;
    if (!kind)
        return BAD(L, "the \"model\" frame has no kind= metadata");
    if ((m->kind = pick(kind, kinds)) < 0)
        return BAD(L, "unknown model kind '%s' (linear, logistic, softmax or mlp)", kind);
    m->normalized = 0;
    if ((v = meta_of(L, "input")) && (m->normalized = pick(v, inputs)) < 0)
        return BAD(L, "unknown input '%s' (raw or normalized)", v);
    m->hidden = TQ_ACT_RELU;
    if ((v = meta_of(L, "activation"))) {
        int a = pick(v, acts);
        if (a < 0)
            return BAD(L, "unknown activation '%s' (relu, tanh, sigmoid or gelu)", v);
        m->hidden = a == 3 ? ACT_GELU : a == 0 ? TQ_ACT_RELU : a == 1 ? TQ_ACT_TANH : TQ_ACT_SIGMOID;
    }
    switch (m->kind) {
    case KIND_LINEAR:
    case KIND_LOGISTIC:
        m->out = m->kind == KIND_LINEAR ? OUT_LINEAR : OUT_SIGMOID;
        if ((st = take_layer(L, m, 0, "w", "b", 1)))
            return st;
        if (m->dim[1] != 1)
            return BAD(L, "\"w\" of a %s model must have one output, not %lld", kind,
                       (long long)m->dim[1]);
        break;
    case KIND_SOFTMAX:
        m->out = OUT_SOFTMAX;
        if ((st = take_layer(L, m, 0, "w", "b", 0)))
            return st;
        break;
    default: {
        m->out = OUT_LINEAR;
        if ((v = meta_of(L, "output")) && (m->out = pick(v, outs)) < 0)
            return BAD(L, "unknown output '%s' (linear, sigmoid or softmax)", v);
        int i = 0;
        for (; i < TQ_SCORE_MAX_LAYERS; i++) {
            char wn[16], bn[16];
            snprintf(wn, sizeof wn, "w%d", i + 1);
            snprintf(bn, sizeof bn, "b%d", i + 1);
            if (!find(L, wn) && i > 0)
                break;
            if ((st = take_layer(L, m, i, wn, bn, 0)))
                return st;
        }
        if (m->out != OUT_SOFTMAX && m->dim[m->nl] != 1)
            return BAD(L, "the last layer of an mlp with output=%s must have one output, not %lld",
                       outs[m->out], (long long)m->dim[m->nl]);
    }
    }
    if (m->out == OUT_SOFTMAX) {
        int64_t c = m->dim[m->nl];
        if (c < 2)
            return BAD(L, "a softmax needs at least 2 classes, not %lld", (long long)c);
        m->cls = c - 1;
        if ((v = meta_of(L, "class"))) {
            char *end;
            errno = 0;
            long long k = strtoll(v, &end, 10);
            if (errno || end == v || *end || k < 0 || k >= c)
                return BAD(L, "class=%s is not a class 0..%lld", v, (long long)(c - 1));
            m->cls = k;
        }
    }
    for (int i = 0; i < L->n; i++)
        if (!L->f[i].used)
            return BAD(L, "unexpected tensor \"%s\" for a %s model of %d layer%s", L->f[i].name,
                       kind, m->nl, m->nl > 1 ? "s" : "");
    int n = snprintf(m->describe, sizeof m->describe, "%s %lld", kind, (long long)m->dim[0]);
    for (int i = 1; i <= m->nl && n < (int)sizeof m->describe; i++)
        n += snprintf(m->describe + n, sizeof m->describe - (size_t)n, "-%lld", (long long)m->dim[i]);
    if (m->kind == KIND_MLP && n < (int)sizeof m->describe)
        snprintf(m->describe + n, sizeof m->describe - (size_t)n, " %s, output %s",
                 acts[m->hidden == ACT_GELU ? 3 : m->hidden == TQ_ACT_RELU ? 0
                      : m->hidden == TQ_ACT_TANH ? 1 : 2],
                 outs[m->out]);
    n = (int)strlen(m->describe);
    if (m->code != TQ_DTYPE_F32 && n < (int)sizeof m->describe)
        snprintf(m->describe + n, sizeof m->describe - (size_t)n, ", %s weights, %s",
                 tq_dtype_name(m->code), m->products_i8 ? "int8 products" : "decoded to f32");
    return TQ_OK;
}

tq_status tq_score_model_load(const char *path, tq_device *dev, tq_score_model **out)
{
    return tq_score_model_load_prec(path, dev, TQ_SCORE_PREC_AUTO, out);
}

tq_status tq_score_model_load_prec(const char *path, tq_device *dev, tq_score_prec prec,
                                   tq_score_model **out)
{
    *out = NULL;
    tq_reader *r;
    tq_status st = tq_reader_open_path(&r, path);
    if (st)
        return st;
    loader L = {.path = path};
    tq_score_model *m = calloc(1, sizeof *m);
    if (!m) {
        tq_reader_close(r);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    m->dev = dev;
    m->prec = prec;
    m->code = TQ_DTYPE_F32;
    tq_frame *f;
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        if (!strcmp(f->name, "model"))
            st = take_header(&L, f);
        else if (is_weight_name(f->name))
            st = take_weight(&L, f);
        if (st)
            break;
    }
    if (st == TQ_EOF)
        st = build(&L, m);
    tq_reader_close(r);
    for (int i = 0; i < L.n; i++) {
        free(L.f[i].v);
        free(L.f[i].raw);
    }
    free(L.f);
    if (st) {
        tq_score_model_free(m);
        return st;
    }
    *out = m;
    return TQ_OK;
}

int64_t tq_score_model_dim(const tq_score_model *m) { return m->dim[0]; }
int tq_score_model_wants_normalized(const tq_score_model *m) { return m->normalized; }
const char *tq_score_model_describe(const tq_score_model *m) { return m->describe; }
int tq_score_model_products_i8(const tq_score_model *m) { return m->products_i8; }

tq_status tq_score_model_run(const tq_score_model *m, const tq_tensor *x, float *out)
{
    int64_t n = x->dims[0];
    if (n == 0)
        return TQ_OK;
    tq_tensor *h[TQ_SCORE_MAX_LAYERS] = {0};
    tq_status st = TQ_OK;
    const tq_tensor *in = x;
    for (int i = 0; i < m->nl && !st; i++) {
        int64_t dims[2] = {n, m->dim[i + 1]};
        if ((st = tq_tensor_new(m->dev, TQ_DTYPE_F32, 2, dims, &h[i])))
            break;
        if (m->wq[i]) {
            /* the rows as int8 (a scale each, over the inputs times their
             * column scales), their exact int32 products with the codes */
            int64_t qd[2] = {n, m->dim[i]};
            tq_tensor *q = NULL, *qs = NULL;
            tq_matmul_then then = {.bias = m->b[i]};
            if (!(st = tq_tensor_new(m->dev, TQ_DTYPE_I8, 2, qd, &q)) &&
                !(st = tq_tensor_new(m->dev, TQ_DTYPE_F32, 1, &n, &qs)) &&
                !(st = tq_op_quantize_rows(in, m->wc[i], q, qs)))
                st = tq_op_matmul_i8(q, qs, m->wq[i], m->ws[i], 0.0f, &then, h[i]);
            tq_tensor_free(q);
            tq_tensor_free(qs);
            if (st)
                break;
        } else if ((st = tq_op_matmul(in, 0, m->w[i], 0, 1.0f, 0.0f, h[i])) ||
                   (st = tq_op_add(h[i], m->b[i], h[i]))) {
            break;
        }
        if (i + 1 < m->nl)
            st = m->hidden == ACT_GELU ? tq_op_gelu(h[i], h[i])
                                       : tq_op_activate(h[i], (tq_activation)m->hidden, h[i]);
        in = h[i];
    }
    tq_tensor *last = m->nl ? h[m->nl - 1] : NULL;
    if (!st && m->out == OUT_SIGMOID)
        st = tq_op_activate(last, TQ_ACT_SIGMOID, last);
    else if (!st && m->out == OUT_SOFTMAX)
        st = tq_op_softmax(last, last);
    int64_t o = m->dim[m->nl];
    float *all = NULL;
    if (!st && !(all = malloc((size_t)(n * o) * 4)))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = tq_tensor_download(last, all, (size_t)(n * o) * 4);
    if (!st) {
        int64_t c = m->out == OUT_SOFTMAX ? m->cls : 0;
        for (int64_t i = 0; i < n; i++)
            out[i] = all[i * o + c];
    }
    free(all);
    for (int i = 0; i < m->nl; i++)
        tq_tensor_free(h[i]);
    return st;
}

void tq_score_model_free(tq_score_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < TQ_SCORE_MAX_LAYERS; i++) {
        tq_tensor_free(m->w[i]);
        tq_tensor_free(m->b[i]);
        tq_tensor_free(m->wq[i]);
        tq_tensor_free(m->ws[i]);
        tq_tensor_free(m->wc[i]);
    }
    free(m);
}
