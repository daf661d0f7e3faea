/* delim_in.c: numeric TSV and CSV in. A first line that is not all numbers is a
 * header; its column named "key", if any, becomes a str "key" frame, and every
 * other column a column of one [rows, columns] frame. CSV follows RFC 4180
 * (quoted fields may hold commas, quotes and line breaks); TSV fields undo the
 * backslash escapes tq-cat prints (\t \n \r \\). */
#include "columns.h"
#include "internal.h"

#include <errno.h>

typedef struct delim_in {
    FILE *in;
    const char *label;
    tq_text_format fmt;
    char *line;
    size_t line_cap;
    ssize_t len;
    long lineno;        /* the line being read */
    uint64_t offset;    /* bytes of the input before that line */
    tq_buf text;        /* the fields of a record, unescaped, each NUL-ended */
    size_t *start;      /* where each field begins in text */
    size_t nf, cap_f;
} delim_in;

static tq_status fail_line(delim_in *d, long line, const char *fmt, const char *what)
{
    return tq_fail(TQ_ERR_DATA, "%s: line %ld: %s%s", d->label, line, fmt, what ? what : "");
}

/* Reads the next line, without its line break; 0 at the end of the input. */
static tq_status next_line(delim_in *d, int *got)
{
    errno = 0;
    d->len = getline(&d->line, &d->line_cap, d->in);
    if (d->len < 0) {
        *got = 0;
        if (ferror(d->in))
            return tq_fail(TQ_ERR_IO, "%s: read failed: %s", d->label, strerror(errno));
        return TQ_OK;
    }
    d->lineno++;
    /* a NUL is no text: binary data (a program, a TQ stream) would otherwise
     * read as a header of garbage and no row, exit 0 */
    const char *nul = memchr(d->line, 0, (size_t)d->len);
    if (nul)
        return tq_fail(TQ_ERR_DATA, "%s: binary data (a NUL byte at byte %llu), not text",
                       d->label, (unsigned long long)(d->offset + (uint64_t)(nul - d->line)));
    d->offset += (uint64_t)d->len;
    if (d->len && d->line[d->len - 1] == '\n')
        d->len--;
    if (d->len && d->line[d->len - 1] == '\r')
        d->len--;
    d->line[d->len] = 0;
    *got = 1;
    return TQ_OK;
}

static tq_status new_field(delim_in *d)
{
    if (d->nf == d->cap_f) {
        size_t cap = d->cap_f ? 2 * d->cap_f : 64;
        size_t *n = realloc(d->start, cap * sizeof *n);
        if (!n)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        d->start = n;
        d->cap_f = cap;
    }
    d->start[d->nf++] = d->text.len;
    return TQ_OK;
}

static tq_status end_field(delim_in *d) { return tq_buf_add(&d->text, "", 1); }

static tq_status split_tsv(delim_in *d)
{
    tq_status st = new_field(d);
    for (ssize_t i = 0; i < d->len && !st; i++) {
        char c = d->line[i];
        if (c == '\t') {
            st = end_field(d);
            if (!st)
                st = new_field(d);
            continue;
        }
        if (c == '\\' && i + 1 < d->len) {
            char e = d->line[i + 1];
            char u = e == 't' ? '\t' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == '\\' ? '\\' : 0;
            if (u) {
                st = tq_buf_add(&d->text, &u, 1);
                i++;
                continue;
            }
        }
        st = tq_buf_add(&d->text, &c, 1);
    }
    return st ? st : end_field(d);
}

static tq_status split_csv(delim_in *d)
{
    long first = d->lineno;
    ssize_t i = 0;
    tq_status st;
    for (;;) {
        if ((st = new_field(d)))
            return st;
        if (i < d->len && d->line[i] == '"') {
            i++;
            for (;;) {
                if (i == d->len) { /* a line break inside quotes belongs to the field */
                    int got;
                    if ((st = next_line(d, &got)))
                        return st;
                    if (!got)
                        return fail_line(d, first, "a quoted field is not closed", NULL);
                    if ((st = tq_buf_add(&d->text, "\n", 1)))
                        return st;
                    i = 0;
                    continue;
                }
                char c = d->line[i++];
                if (c == '"') {
                    if (i < d->len && d->line[i] == '"')
                        i++;
                    else
                        break;
                }
                if ((st = tq_buf_add(&d->text, &c, 1)))
                    return st;
            }
            if (i < d->len && d->line[i] != ',')
                return fail_line(d, d->lineno, "text after a closing quote", NULL);
        } else {
            ssize_t j = i;
            while (j < d->len && d->line[j] != ',')
                j++;
            if ((st = tq_buf_add(&d->text, d->line + i, (size_t)(j - i))))
                return st;
            i = j;
        }
        if ((st = end_field(d)))
            return st;
        if (i >= d->len)
            return TQ_OK;
        i++; /* the comma */
    }
}

/* The next record (skipping blank lines); *got = 0 at the end. *line: where it starts. */
static tq_status next_record(delim_in *d, int *got, long *line)
{
    tq_status st;
    do {
        if ((st = next_line(d, got)) || !*got)
            return st;
    } while (d->len == 0);
    *line = d->lineno;
    d->text.len = 0;
    d->nf = 0;
    return d->fmt == TQ_TEXT_CSV ? split_csv(d) : split_tsv(d);
}

static const char *field(const delim_in *d, size_t i) { return d->text.p + d->start[i]; }

static size_t field_len(const delim_in *d, size_t i)
{
    return (i + 1 < d->nf ? d->start[i + 1] : d->text.len) - d->start[i] - 1;
}

/* Is every field a number (of any type, so that 300 for i8 is an error, not a
 * header)? */
static int all_numbers(const delim_in *d)
{
    unsigned char v[8];
    const char *why;
    for (size_t i = 0; i < d->nf; i++)
        if (tq_parse_number(field(d, i), field_len(d, i), TQ_DTYPE_F64, v, &why))
            return 0;
    return 1;
}

static tq_status emit(tq_column *key, tq_column *x, tq_sink *s)
{
    tq_status st = key ? tq_column_emit(key, s) : TQ_OK;
    return st ? st : tq_column_emit(x, s);
}

static tq_status import(delim_in *d, const tq_import_opts *o, tq_sink *s)
{
    tq_dtype dt = o->dtype ? o->dtype : TQ_DTYPE_F32;
    int got;
    long line;
    tq_status st = next_record(d, &got, &line);
    if (st || !got)
        return st;
    size_t ncols = d->nf;
    long keycol = -1;
    int header = !all_numbers(d);
    if (header)
        for (size_t i = 0; i < d->nf; i++)
            if (!strcmp(field(d, i), "key")) {
                keycol = (long)i;
                break;
            }
    int64_t width = (int64_t)ncols - (keycol >= 0);
    if (width == 0)
        return fail_line(d, line, "no column of numbers", NULL);
    tq_column key, x;
    tq_column_init(&key, "key", TQ_DTYPE_STR, 1, NULL);
    tq_column_init(&x, o->name ? o->name : "x", dt, 2, &width);
    int64_t batch = o->batch > 0 ? o->batch : tq_io_default_batch(x.row_bytes);
    if (header)
        st = next_record(d, &got, &line);
    size_t es = tq_dtype_size(dt);
    while (!st && got) {
        if (d->nf != ncols) {
            char msg[96];
            snprintf(msg, sizeof msg, "%zu fields, the first line has %zu", d->nf, ncols);
            st = fail_line(d, line, msg, NULL);
            break;
        }
        unsigned char *row = tq_column_next_row(&x);
        if (!row) {
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t i = 0; i < ncols && !st; i++) {
            const char *f = field(d, i), *why;
            size_t n = field_len(d, i);
            if ((long)i == keycol) {
                if ((st = tq_column_add_str(&key, f, n)))
                    st = tq_fail_context(st, "%s: line %ld: key", d->label, line);
                continue;
            }
            if (tq_parse_number(f, n, dt, row, &why)) {
                char msg[128];
                snprintf(msg, sizeof msg, "column %zu: %s: '%.40s'", i + 1, why, f);
                st = fail_line(d, line, msg, NULL);
            }
            row += es;
        }
        if (!st && x.dims[0] == batch)
            st = emit(keycol >= 0 ? &key : NULL, &x, s);
        if (!st)
            st = next_record(d, &got, &line);
    }
    if (!st)
        st = emit(keycol >= 0 ? &key : NULL, &x, s);
    tq_column_free(&key);
    tq_column_free(&x);
    return st;
}

tq_status tq_import_delim(const char *path, tq_text_format fmt, const tq_import_opts *o,
                          tq_sink *s)
{
    delim_in d = {.fmt = fmt, .label = strcmp(path, "-") ? path : "stdin"};
    tq_status ost = tq_input_fopen(path, &d.in);
    if (ost)
        return ost;
    tq_status st = import(&d, o, s);
    if (d.in != stdin)
        fclose(d.in);
    free(d.line);
    free(d.start);
    tq_buf_free(&d.text);
    return st;
}
