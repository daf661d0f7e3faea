/* text_input.c: reading documents for tq-embed: bounded lines, UTF-8 checks
 * and repair, and the JSON-lines member extractor (strict RFC 8259 syntax). */
#include "text_input.h"
#include "../internal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

tq_status tq_buf_add(tq_buf *b, const void *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        b->p = p, b->cap = nc;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return TQ_OK;
}

void tq_buf_free(tq_buf *b)
{
    free(b->p);
    *b = (tq_buf){0};
}

#define CHUNK 65536

struct tq_lines {
    int fd;
    const char *label;
    size_t max;
    char *in; /* read buffer */
    size_t pos, end;
    int eof;
    tq_buf line;
    uint64_t taken, start; /* bytes consumed; where the last line began */
};

tq_status tq_lines_open(tq_lines **r, const char *path, size_t max)
{
    int fd;
    tq_status ost = tq_input_open(path, &fd);
    if (ost)
        return ost;
    tq_lines *l = calloc(1, sizeof *l);
    if (l)
        l->in = malloc(CHUNK);
    if (!l || !l->in) {
        if (l)
            free(l);
        if (fd > 0)
            close(fd);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    l->fd = fd;
    l->label = strcmp(path, "-") ? path : "stdin";
    l->max = max;
    *r = l;
    return TQ_OK;
}

static tq_status fill(tq_lines *r)
{
    for (;;) {
        ssize_t got = read(r->fd, r->in, CHUNK);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return tq_fail(TQ_ERR_IO, "%s: read: %s", r->label, strerror(errno));
        r->pos = 0, r->end = (size_t)got;
        r->eof = got == 0;
        return TQ_OK;
    }
}

tq_status tq_lines_next(tq_lines *r, const char **line, size_t *len, int *too_long)
{
    tq_status st;
    size_t total = 0; /* bytes of the line seen, kept or not */
    int any = 0;
    r->line.len = 0;
    r->start = r->taken;
    for (;;) {
        if (r->pos == r->end) {
            if (r->eof || (st = fill(r)))
                return r->eof ? TQ_EOF : st;
            if (r->eof) {
                if (!any)
                    return TQ_EOF;
                break;
            }
        }
        any = 1;
        char *s = r->in + r->pos;
        char *nl = memchr(s, '\n', r->end - r->pos);
        size_t n = nl ? (size_t)(nl - s) : r->end - r->pos;
        size_t keep = total < r->max + 1 ? r->max + 1 - total : 0; /* +1: a CR may follow */
        if ((st = tq_buf_add(&r->line, s, n < keep ? n : keep)))
            return st;
        total += n;
        r->pos += n + (nl != NULL);
        r->taken += n + (nl != NULL);
        if (nl)
            break;
    }
    if (r->line.len && r->line.len == total && r->line.p[r->line.len - 1] == '\r')
        r->line.len--, total--;
    else if (total > r->max && r->line.len > r->max)
        r->line.len = r->max; /* a CR at the cut belongs to the dropped part */
    *too_long = total > r->max;
    if (*too_long && r->line.len > r->max)
        r->line.len = r->max;
    *line = r->line.p ? r->line.p : "";
    *len = r->line.len;
    return TQ_OK;
}

uint64_t tq_lines_offset(const tq_lines *r)
{
    return r->start;
}

void tq_lines_close(tq_lines *r)
{
    if (!r)
        return;
    if (r->fd > 0)
        close(r->fd);
    free(r->in);
    tq_buf_free(&r->line);
    free(r);
}

static size_t cp_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3F);
    }
    return v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) ? 0 : len;
}

size_t tq_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = cp_len(p + i, n - i);
        if (!l)
            return i;
        i += l;
    }
    return n;
}

int64_t tq_utf8_repair(const char *s, size_t n, tq_buf *out)
{
    int64_t bad = 0;
    size_t i = 0;
    while (i < n) {
        size_t ok = tq_utf8_valid(s + i, n - i);
        if (tq_buf_add(out, s + i, ok))
            return -1;
        i += ok;
        if (i < n) {
            if (tq_buf_add(out, "\xEF\xBF\xBD", 3))
                return -1;
            bad++, i++;
        }
    }
    return bad;
}

/* ---- JSON ---- */

typedef struct jp {
    const char *s;
    size_t n, i;
} jp;

static void ws(jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\r' ||
                           p->s[p->i] == '\n'))
        p->i++;
}

static tq_status bad(jp *p, const char *what)
{
    return tq_fail(TQ_ERR_DATA, "JSON: %s at byte %zu", what, p->i + 1);
}

static int hex4(jp *p, uint32_t *v)
{
    if (p->n - p->i < 4)
        return -1;
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

static tq_status put_cp(tq_buf *b, uint32_t c)
{
    unsigned char u[4];
    size_t n;
    if (c < 0x80)
        u[0] = (unsigned char)c, n = 1;
    else if (c < 0x800)
        u[0] = (unsigned char)(0xC0 | c >> 6), u[1] = (unsigned char)(0x80 | (c & 0x3F)), n = 2;
    else if (c < 0x10000)
        u[0] = (unsigned char)(0xE0 | c >> 12), u[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F)),
        u[2] = (unsigned char)(0x80 | (c & 0x3F)), n = 3;
    else
        u[0] = (unsigned char)(0xF0 | c >> 18), u[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F)),
        u[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F)), u[3] = (unsigned char)(0x80 | (c & 0x3F)),
        n = 4;
    return tq_buf_add(b, u, n);
}

/* A string at p->i (the opening quote); decoded into out if out is not NULL. */
static tq_status jstring(jp *p, tq_buf *out)
{
    tq_status st;
    if (p->i >= p->n || p->s[p->i] != '"')
        return bad(p, "expected a string");
    p->i++;
    for (;;) {
        size_t start = p->i;
        while (p->i < p->n && p->s[p->i] != '"' && p->s[p->i] != '\\' &&
               (unsigned char)p->s[p->i] >= 0x20)
            p->i++;
        if (out && (st = tq_buf_add(out, p->s + start, p->i - start)))
            return st;
        if (p->i >= p->n)
            return bad(p, "unterminated string");
        char c = p->s[p->i];
        if (c == '"') {
            p->i++;
            return TQ_OK;
        }
        if (c != '\\')
            return bad(p, "control character in a string");
        if (++p->i >= p->n)
            return bad(p, "unterminated string");
        char e = p->s[p->i++];
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        const char *k = e ? strchr(from, e) : NULL;
        if (k) {
            if (out && (st = tq_buf_add(out, to + (k - from), 1)))
                return st;
            continue;
        }
        if (e != 'u')
            return bad(p, "unknown escape");
        uint32_t v, lo;
        if (hex4(p, &v))
            return bad(p, "bad \\u escape");
        if (v >= 0xDC00 && v <= 0xDFFF)
            return bad(p, "lone low surrogate in \\u escape");
        if (v >= 0xD800 && v <= 0xDBFF) {
            if (p->n - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                return bad(p, "high surrogate without its low half");
            p->i += 2;
            if (hex4(p, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                return bad(p, "high surrogate without its low half");
            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (out && (st = put_cp(out, v)))
            return st;
    }
}

/* A number; *integer says whether it was one (no fraction, no exponent). */
static tq_status jnumber(jp *p, int *integer)
{
    size_t i = p->i;
    const char *s = p->s;
    if (i < p->n && s[i] == '-')
        i++;
    if (i >= p->n || s[i] < '0' || s[i] > '9')
        return bad(p, "bad value");
    if (s[i] == '0')
        i++;
    else
        while (i < p->n && s[i] >= '0' && s[i] <= '9')
            i++;
    *integer = 1;
    if (i < p->n && s[i] == '.') {
        *integer = 0, i++;
        if (i >= p->n || s[i] < '0' || s[i] > '9')
            return bad(p, "bad number");
        while (i < p->n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < p->n && (s[i] == 'e' || s[i] == 'E')) {
        *integer = 0, i++;
        if (i < p->n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= p->n || s[i] < '0' || s[i] > '9')
            return bad(p, "bad number");
        while (i < p->n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    p->i = i;
    return TQ_OK;
}

static tq_status jvalue(jp *p, int depth);

static tq_status jcontainer(jp *p, int depth, char close)
{
    tq_status st;
    if (depth > 512)
        return bad(p, "nested too deeply");
    p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        return TQ_OK;
    }
    for (;;) {
        if (close == '}') {
            if ((st = jstring(p, NULL)))
                return st;
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':')
                return bad(p, "expected ':'");
            p->i++;
        }
        if ((st = jvalue(p, depth + 1)))
            return st;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            ws(p);
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            return TQ_OK;
        }
        return bad(p, "expected ',' or a closing bracket");
    }
}

static tq_status jvalue(jp *p, int depth)
{
    ws(p);
    if (p->i >= p->n)
        return bad(p, "expected a value");
    char c = p->s[p->i];
    if (c == '"')
        return jstring(p, NULL);
    if (c == '{')
        return jcontainer(p, depth, '}');
    if (c == '[')
        return jcontainer(p, depth, ']');
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(words[k]);
        if (p->n - p->i >= l && !memcmp(p->s + p->i, words[k], l)) {
            p->i += l;
            return TQ_OK;
        }
    }
    int integer;
    return jnumber(p, &integer);
}

tq_status tq_json_fields(const char *s, size_t n, const char *field, const char *id_field,
                         tq_buf *text, tq_buf *id)
{
    jp p = {s, n, 0};
    tq_buf key = {0};
    tq_status st = TQ_OK;
    int got_text = 0, got_id = 0;
    text->len = 0;
    if (id)
        id->len = 0;
    ws(&p);
    if (p.i >= p.n || s[p.i] != '{') {
        st = bad(&p, "expected an object");
        goto out;
    }
    p.i++;
    ws(&p);
    if (p.i < p.n && s[p.i] == '}') {
        p.i++;
        goto end;
    }
    for (;;) {
        key.len = 0;
        if ((st = jstring(&p, &key)) || (st = tq_buf_add(&key, "", 0)))
            goto out;
        ws(&p);
        if (p.i >= p.n || s[p.i] != ':') {
            st = bad(&p, "expected ':'");
            goto out;
        }
        p.i++;
        ws(&p);
        int is_text = strlen(key.p) == key.len && !strcmp(key.p, field);
        int is_id = id_field && strlen(key.p) == key.len && !strcmp(key.p, id_field);
        if ((is_text || is_id) && p.i < p.n && s[p.i] == '"') {
            tq_buf tmp = {0};
            if ((st = jstring(&p, &tmp))) {
                tq_buf_free(&tmp);
                goto out;
            }
            if (is_text)
                text->len = 0, st = tq_buf_add(text, tmp.p ? tmp.p : "", tmp.len), got_text = 1;
            if (is_id && !st)
                id->len = 0, st = tq_buf_add(id, tmp.p ? tmp.p : "", tmp.len), got_id = 1;
            tq_buf_free(&tmp);
            if (st)
                goto out;
        } else if (is_text) {
            st = tq_fail(TQ_ERR_DATA, "JSON: member \"%s\" is not a string", field);
            goto out;
        } else if (is_id) {
            size_t b = p.i;
            int integer = 0;
            if (p.i >= p.n || !(s[p.i] == '-' || (s[p.i] >= '0' && s[p.i] <= '9')) ||
                jnumber(&p, &integer) || !integer) {
                st = tq_fail(TQ_ERR_DATA, "JSON: member \"%s\" is not a string or an integer",
                             id_field);
                goto out;
            }
            id->len = 0;
            if ((st = tq_buf_add(id, s + b, p.i - b)))
                goto out;
            got_id = 1;
        } else if ((st = jvalue(&p, 1))) {
            goto out;
        }
        ws(&p);
        if (p.i < p.n && s[p.i] == ',') {
            p.i++;
            ws(&p);
            continue;
        }
        if (p.i < p.n && s[p.i] == '}') {
            p.i++;
            break;
        }
        st = bad(&p, "expected ',' or '}'");
        goto out;
    }
end:
    ws(&p);
    if (p.i != p.n)
        st = bad(&p, "text after the object");
    else if (!got_text)
        st = tq_fail(TQ_ERR_DATA, "JSON: no member \"%s\"", field);
    else if (id_field && !got_id)
        st = tq_fail(TQ_ERR_DATA, "JSON: no member \"%s\"", id_field);
out:
    tq_buf_free(&key);
    if (!st && !text->p)
        st = tq_buf_add(text, "", 0);
    if (!st && id && !id->p)
        st = tq_buf_add(id, "", 0);
    return st;
}
