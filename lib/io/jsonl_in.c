/* jsonl_in.c: JSON lines in. Each line is an object whose members become
 * frames (strings -> str, numbers -> [rows], nested arrays -> [rows, ...]), or
 * a bare array or number, which becomes the frame named by --as. The first
 * line fixes the members and shapes; every later line must match it. NaN,
 * Infinity and -Infinity are read as tq-cat -t jsonl writes them. */
#include "columns.h"
#include "internal.h"

#include <errno.h>

enum { V_NUM, V_STR, V_ARR };

typedef struct tok {
    size_t at, len;
} tok;

/* One parsed value: a string, or numbers (as text) with their array shape. */
typedef struct jval {
    int kind;
    int leaf;                  /* depth of the innermost arrays, -1 not yet known */
    int64_t shape[TQ_MAX_RANK];
    int shape_set[TQ_MAX_RANK];
    tok *toks;
    size_t ntok, cap_tok;
    tq_buf str;
} jval;

typedef struct jp {
    const char *s;
    size_t i, n;
    const char *why;
} jp;

static void ws(jp *j)
{
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\r' ||
                           j->s[j->i] == '\n'))
        j->i++;
}

static const char nomem[] = "out of memory"; /* not the line's fault */

static int fail(jp *j, const char *why)
{
    j->why = why;
    return -1;
}

static int hex4(jp *j, unsigned *u)
{
    *u = 0;
    if (j->i + 4 > j->n)
        return fail(j, "a short \\u escape");
    for (int k = 0; k < 4; k++) {
        char c = j->s[j->i++];
        unsigned v = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
        if (v > 15)
            return fail(j, "a bad \\u escape");
        *u = *u << 4 | v;
    }
    return 0;
}

static int utf8(tq_buf *b, unsigned cp)
{
    char o[4];
    size_t n;
    if (cp < 0x80)
        o[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
    else if (cp < 0x10000)
        o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3f)),
        o[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
    else
        o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3f)),
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
    return tq_buf_add(b, o, n) ? -1 : 0;
}

static int string(jp *j, tq_buf *out)
{
    out->len = 0;
    if (tq_buf_add(out, "", 0))
        return fail(j, nomem);
    j->i++; /* the opening quote */
    while (j->i < j->n) {
        char c = j->s[j->i++];
        if (c == '"')
            return 0;
        if ((unsigned char)c < 0x20)
            return fail(j, "a control character in a string");
        if (c != '\\') {
            if (tq_buf_add(out, &c, 1))
                return fail(j, nomem);
            continue;
        }
        if (j->i >= j->n)
            break;
        char e = j->s[j->i++];
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        const char *k = strchr(from, e);
        if (e && k) {
            if (tq_buf_add(out, to + (k - from), 1))
                return fail(j, nomem);
            continue;
        }
        if (e != 'u')
            return fail(j, "a bad escape in a string");
        unsigned u, lo;
        if (hex4(j, &u))
            return -1;
        if (u >= 0xd800 && u < 0xdc00) { /* a surrogate pair */
            if (j->i + 2 > j->n || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u')
                return fail(j, "a lone surrogate in a string");
            j->i += 2;
            if (hex4(j, &lo))
                return -1;
            if (lo < 0xdc00 || lo > 0xdfff)
                return fail(j, "a lone surrogate in a string");
            u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        } else if (u >= 0xdc00 && u < 0xe000) {
            return fail(j, "a lone surrogate in a string");
        }
        if (utf8(out, u))
            return fail(j, nomem);
    }
    return fail(j, "a string is not closed");
}

static int number(jp *j, jval *v)
{
    size_t at = j->i;
    while (j->i < j->n) {
        char c = j->s[j->i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '-' || c == '+' || c == '.'))
            break;
        j->i++;
    }
    if (j->i == at)
        return fail(j, "a value that is not a number, string or array");
    if (v->ntok == v->cap_tok) {
        size_t cap = v->cap_tok ? 2 * v->cap_tok : 64;
        tok *n = realloc(v->toks, cap * sizeof *n);
        if (!n)
            return fail(j, nomem);
        v->toks = n;
        v->cap_tok = cap;
    }
    v->toks[v->ntok++] = (tok){at, j->i - at};
    return 0;
}

static int array(jp *j, jval *v, int depth)
{
    if (depth >= TQ_MAX_RANK - 1)
        return fail(j, "arrays nested too deep");
    j->i++; /* [ */
    int64_t n = 0;
    int inner = -1; /* 0: numbers, 1: arrays */
    ws(j);
    if (j->i < j->n && j->s[j->i] == ']') {
        j->i++;
    } else {
        for (;;) {
            ws(j);
            int is_arr = j->i < j->n && j->s[j->i] == '[';
            if (inner >= 0 && inner != is_arr)
                return fail(j, "an array mixes numbers and arrays");
            inner = is_arr;
            if (is_arr ? array(j, v, depth + 1) : number(j, v))
                return -1;
            n++;
            ws(j);
            if (j->i < j->n && j->s[j->i] == ',') {
                j->i++;
                continue;
            }
            if (j->i < j->n && j->s[j->i] == ']') {
                j->i++;
                break;
            }
            return fail(j, "an array without , or ]");
        }
    }
    if (v->shape_set[depth] && v->shape[depth] != n)
        return fail(j, "a ragged array (rows of different lengths)");
    v->shape[depth] = n;
    v->shape_set[depth] = 1;
    if (inner != 1) { /* numbers or empty: the innermost level */
        if (v->leaf >= 0 && v->leaf != depth)
            return fail(j, "a ragged array (mixed depths)");
        v->leaf = depth;
    }
    return 0;
}

static int value(jp *j, jval *v)
{
    v->ntok = 0;
    v->leaf = -1;
    memset(v->shape_set, 0, sizeof v->shape_set);
    ws(j);
    if (j->i >= j->n)
        return fail(j, "a value is missing");
    char c = j->s[j->i];
    if (c == '"') {
        v->kind = V_STR;
        return string(j, &v->str);
    }
    if (c == '[') {
        v->kind = V_ARR;
        return array(j, v, 0);
    }
    v->kind = V_NUM;
    return number(j, v);
}

/* ---------------------------------------------------------------- import */

typedef struct jcol {
    tq_column c;
    int kind;
    int seen;
} jcol;

typedef struct jsonl_in {
    FILE *in;
    const char *label;
    long lineno;
    tq_dtype dtype;
    const char *name;
    jcol *cols;
    size_t ncols;
    int object;     /* lines are objects (else bare values) */
    jval v;
    tq_buf key;
} jsonl_in;

static tq_status bad(jsonl_in *d, const char *member, const char *why)
{
    if (why == nomem)
        return tq_fail(TQ_ERR_NOMEM, "%s: line %ld: out of memory", d->label, d->lineno);
    if (member)
        return tq_fail(TQ_ERR_DATA, "%s: line %ld: \"%s\": %s", d->label, d->lineno, member, why);
    return tq_fail(TQ_ERR_DATA, "%s: line %ld: %s", d->label, d->lineno, why);
}

/* Makes the column for value v (first line). */
static tq_status add_col(jsonl_in *d, const char *name, const jval *v)
{
    jcol *n = realloc(d->cols, (d->ncols + 1) * sizeof *n);
    if (!n)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    d->cols = n;
    jcol *c = &d->cols[d->ncols];
    if (tq_name_check(name, strlen(name)))
        return tq_fail_context(TQ_ERR_DATA, "%s: line %ld", d->label, d->lineno);
    for (size_t i = 0; i < d->ncols; i++)
        if (!strcmp(d->cols[i].c.name, name))
            return bad(d, name, "a member given twice");
    memset(c, 0, sizeof *c);
    c->kind = v->kind;
    if (v->kind == V_STR) {
        tq_column_init(&c->c, name, TQ_DTYPE_STR, 1, NULL);
    } else {
        /* integer keys stay integers: tools match i64 row ids */
        int int_key = !strcmp(name, "key") && v->kind == V_NUM;
        tq_column_init(&c->c, name, int_key ? TQ_DTYPE_I64 : d->dtype,
                       v->kind == V_ARR ? v->leaf + 2 : 1, v->shape);
    }
    d->ncols++;
    return TQ_OK;
}

/* Stores value v as the next row of column c. */
static tq_status store(jsonl_in *d, jcol *c, const char *line, const jval *v)
{
    const char *name = c->c.name;
    if (v->kind != c->kind)
        return bad(d, name, "a value of another kind than on the first line");
    if (v->kind == V_STR) {
        tq_status st = tq_column_add_str(&c->c, v->str.p, v->str.len);
        return st ? tq_fail_context(st, "%s: line %ld: \"%s\"", d->label, d->lineno, name) : st;
    }
    if (v->kind == V_ARR) {
        if (v->leaf + 2 != c->c.rank)
            return bad(d, name, "an array of another rank than on the first line");
        for (int i = 0; i <= v->leaf; i++)
            if (v->shape[i] != c->c.dims[i + 1])
                return bad(d, name, "an array of another shape than on the first line");
    }
    unsigned char *row = tq_column_next_row(&c->c);
    if (!row)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    size_t es = tq_dtype_size(c->c.dtype);
    for (size_t i = 0; i < v->ntok; i++) {
        const char *why;
        if (tq_parse_number(line + v->toks[i].at, v->toks[i].len, c->c.dtype, row + i * es,
                            &why)) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s: '%.*s'", why,
                     (int)(v->toks[i].len > 40 ? 40 : v->toks[i].len), line + v->toks[i].at);
            return bad(d, d->object ? name : NULL, msg);
        }
    }
    return TQ_OK;
}

static jcol *find_col(jsonl_in *d, const char *name)
{
    for (size_t i = 0; i < d->ncols; i++)
        if (!strcmp(d->cols[i].c.name, name))
            return &d->cols[i];
    return NULL;
}

static tq_status parse_line(jsonl_in *d, const char *line, size_t len)
{
    jp j = {line, 0, len, NULL};
    int first = d->ncols == 0;
    tq_status st = TQ_OK;
    ws(&j);
    if (j.i < j.n && line[j.i] == '{') {
        if (!first && !d->object)
            return bad(d, NULL, "an object where the first line has a bare value");
        d->object = 1;
        j.i++;
        for (size_t i = 0; i < d->ncols; i++)
            d->cols[i].seen = 0;
        size_t members = 0;
        ws(&j);
        if (j.i < j.n && line[j.i] == '}') {
            j.i++;
        } else {
            for (;;) {
                ws(&j);
                if (j.i >= j.n || line[j.i] != '"')
                    return bad(d, NULL, "a member name is not a string");
                if (string(&j, &d->key))
                    return bad(d, NULL, j.why);
                ws(&j);
                if (j.i >= j.n || line[j.i++] != ':')
                    return bad(d, d->key.p, "no : after the member name");
                if (value(&j, &d->v))
                    return bad(d, d->key.p, j.why);
                if (first && (st = add_col(d, d->key.p, &d->v)))
                    return st;
                jcol *c = find_col(d, d->key.p);
                if (!c)
                    return bad(d, d->key.p, "a member the first line does not have");
                if (c->seen++)
                    return bad(d, d->key.p, "a member given twice");
                if ((st = store(d, c, line, &d->v)))
                    return st;
                members++;
                ws(&j);
                if (j.i < j.n && line[j.i] == ',') {
                    j.i++;
                    continue;
                }
                if (j.i < j.n && line[j.i] == '}') {
                    j.i++;
                    break;
                }
                return bad(d, NULL, "an object without , or }");
            }
        }
        if (members == 0)
            return bad(d, NULL, "an empty object");
        for (size_t i = 0; i < d->ncols; i++)
            if (!d->cols[i].seen)
                return bad(d, d->cols[i].c.name, "missing (the first line has it)");
    } else {
        if (!first && d->object)
            return bad(d, NULL, "a bare value where the first line has an object");
        if (value(&j, &d->v))
            return bad(d, NULL, j.why);
        if (d->v.kind == V_STR)
            return bad(d, NULL, "a bare string (strings are read as object members)");
        if (first && (st = add_col(d, d->name, &d->v)))
            return st;
        if ((st = store(d, &d->cols[0], line, &d->v)))
            return st;
    }
    ws(&j);
    return j.i < j.n ? bad(d, NULL, "text after the value") : TQ_OK;
}

static tq_status emit_all(jsonl_in *d, tq_sink *s)
{
    /* keys first, as tools expect them beside the data they name */
    tq_status st = TQ_OK;
    jcol *key = find_col(d, "key");
    if (key)
        st = tq_column_emit(&key->c, s);
    for (size_t i = 0; i < d->ncols && !st; i++)
        if (&d->cols[i] != key)
            st = tq_column_emit(&d->cols[i].c, s);
    return st;
}

tq_status tq_import_jsonl(const char *path, const tq_import_opts *o, tq_sink *s)
{
    jsonl_in d = {.label = strcmp(path, "-") ? path : "stdin",
                  .dtype = o->dtype ? o->dtype : TQ_DTYPE_F32,
                  .name = o->name ? o->name : "x"};
    tq_status ost = tq_input_fopen(path, &d.in);
    if (ost)
        return ost;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    tq_status st = TQ_OK;
    int64_t batch = o->batch;
    while (!st && (errno = 0, len = getline(&line, &cap, d.in)) >= 0) {
        d.lineno++;
        size_t n = (size_t)len;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
            n--;
        if (n == 0)
            continue;
        if ((st = parse_line(&d, line, n)))
            break;
        if (batch <= 0) { /* the first line shows how wide a row is */
            uint64_t rb = 0;
            for (size_t i = 0; i < d.ncols; i++)
                rb += d.cols[i].c.row_bytes ? d.cols[i].c.row_bytes : 16;
            batch = tq_io_default_batch(rb);
        }
        if (d.cols[0].c.dims[0] == batch)
            st = emit_all(&d, s);
    }
    if (!st && ferror(d.in))
        st = tq_fail(TQ_ERR_IO, "%s: read failed: %s", d.label, strerror(errno));
    if (!st && d.ncols)
        st = emit_all(&d, s);
    for (size_t i = 0; i < d.ncols; i++)
        tq_column_free(&d.cols[i].c);
    free(d.cols);
    free(d.v.toks);
    tq_buf_free(&d.v.str);
    tq_buf_free(&d.key);
    free(line);
    if (d.in != stdin)
        fclose(d.in);
    return st;
}
