/* safetensors_in.c: a .safetensors file is a u64 little-endian header size, a
 * JSON header {name: {dtype, shape, data_offsets}, __metadata__?}, then the
 * data; offsets count from the end of the header. Everything is checked
 * against the file size before a byte is read. */
#include "safetensors_in.h"
#include "json.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HEADER (100u << 20) /* the format's own limit on the header */

typedef struct st_entry {
    const char *name; /* into the JSON tree */
    tq_dtype dtype;
    int rank;
    int64_t dims[TQ_MAX_RANK];
    uint64_t begin, end; /* absolute file offsets */
} st_entry;

struct tq_st_file {
    char *path;
    const unsigned char *map;
    size_t size;
    tq_json *hdr;
    st_entry *e;
    size_t n;
};

static tq_dtype st_dtype(const char *s)
{
    static const struct { const char *n; tq_dtype d; } t[] = {
        {"F32", TQ_DTYPE_F32}, {"F64", TQ_DTYPE_F64}, {"F16", TQ_DTYPE_F16},
        {"BF16", TQ_DTYPE_BF16}, {"I8", TQ_DTYPE_I8}, {"U8", TQ_DTYPE_U8},
        {"I16", TQ_DTYPE_I16}, {"I32", TQ_DTYPE_I32}, {"I64", TQ_DTYPE_I64}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(s, t[i].n))
            return t[i].d;
    return TQ_DTYPE_INVALID;
}

static int is_uint(const tq_json *v)
{
    return v && v->type == TQ_JSON_NUM && v->num >= 0 && v->num <= 9007199254740992.0 &&
           v->num == (double)(uint64_t)v->num;
}

static tq_status bad(tq_st_file *f, const char *tensor, const char *why)
{
    if (tensor)
        return tq_fail(TQ_ERR_DATA, "%s: tensor \"%s\": %s", f->path, tensor, why);
    return tq_fail(TQ_ERR_DATA, "%s: %s", f->path, why);
}

static tq_status parse_entry(tq_st_file *f, const char *name, const tq_json *v, uint64_t base,
                             st_entry *e)
{
    const tq_json *dt = tq_json_get(v, "dtype"), *sh = tq_json_get(v, "shape"),
                  *off = tq_json_get(v, "data_offsets");
    if (v->type != TQ_JSON_OBJ || !dt || dt->type != TQ_JSON_STR || !sh ||
        sh->type != TQ_JSON_ARR || !off || off->type != TQ_JSON_ARR || off->n != 2)
        return bad(f, name, "header entry lacks dtype, shape or data_offsets");
    e->name = name;
    e->dtype = st_dtype(dt->str);
    if (e->dtype == TQ_DTYPE_INVALID)
        return bad(f, name, "unsupported dtype");
    if (sh->n > TQ_MAX_RANK)
        return bad(f, name, "too many dimensions");
    e->rank = (int)sh->n;
    uint64_t numel = 1;
    for (size_t i = 0; i < sh->n; i++) {
        if (!is_uint(&sh->items[i]) || sh->items[i].num > (double)INT64_MAX / 2)
            return bad(f, name, "bad shape");
        e->dims[i] = (int64_t)sh->items[i].num;
        if (e->dims[i] && numel > UINT64_MAX / 16 / (uint64_t)e->dims[i])
            return bad(f, name, "shape too large");
        numel *= (uint64_t)e->dims[i];
    }
    if (!is_uint(&off->items[0]) || !is_uint(&off->items[1]))
        return bad(f, name, "bad data_offsets");
    uint64_t b = (uint64_t)off->items[0].num, en = (uint64_t)off->items[1].num;
    if (b > en || en > f->size - base)
        return bad(f, name, "data_offsets run past the end of the file (truncated?)");
    if (en - b != numel * tq_dtype_size(e->dtype))
        return bad(f, name, "data_offsets do not match the dtype and shape");
    e->begin = base + b;
    e->end = base + en;
    return TQ_OK;
}

static tq_status parse(tq_st_file *f)
{
    if (f->size < 8)
        return bad(f, NULL, "too short for a safetensors header (truncated?)");
    uint64_t hn = tq_le64(f->map);
    if (hn > MAX_HEADER)
        return bad(f, NULL, "header size over 100 MB: not a safetensors file");
    if (hn > f->size - 8)
        return bad(f, NULL, "header runs past the end of the file (truncated?)");
    tq_status st = tq_json_parse((const char *)f->map + 8, (size_t)hn, &f->hdr);
    if (st)
        return st == TQ_ERR_NOMEM ? st : tq_fail_context(st, "%s: header is not valid JSON", f->path);
    if (f->hdr->type != TQ_JSON_OBJ)
        return bad(f, NULL, "header is not a JSON object");
    f->e = calloc(f->hdr->n ? f->hdr->n : 1, sizeof *f->e);
    if (!f->e)
        return tq_fail(TQ_ERR_NOMEM, "%s: out of memory", f->path);
    for (size_t i = 0; i < f->hdr->n; i++) {
        if (!strcmp(f->hdr->keys[i], "__metadata__"))
            continue;
        st = parse_entry(f, f->hdr->keys[i], &f->hdr->items[i], 8 + hn, &f->e[f->n]);
        if (st)
            return st;
        f->n++;
    }
    return TQ_OK;
}

tq_status tq_st_open(const char *path, tq_st_file **out)
{
    tq_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tq_status st = tq_fail(TQ_ERR_NOINPUT, "%s: cannot open: %s", path, strerror(errno));
        tq_st_close(f);
        return st;
    }
    struct stat sb;
    tq_status st = TQ_OK;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode))
        st = tq_fail(TQ_ERR_NOINPUT, "%s: not a regular file", path);
    else {
        f->size = (size_t)sb.st_size;
        if (f->size) {
            void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (m == MAP_FAILED)
                st = tq_fail(errno == ENOMEM ? TQ_ERR_NOMEM : TQ_ERR_IO, "%s: cannot map: %s", path,
                             errno == ENOMEM ? "out of memory" : strerror(errno));
            else
                f->map = m;
        }
    }
    close(fd);
    if (!st)
        st = parse(f);
    if (st) {
        tq_st_close(f);
        return st;
    }
    *out = f;
    return TQ_OK;
}

void tq_st_close(tq_st_file *f)
{
    if (!f)
        return;
    if (f->map)
        munmap((void *)f->map, f->size);
    tq_json_free(f->hdr);
    free(f->e);
    free(f->path);
    free(f);
}

static const st_entry *find(const tq_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->e[i].name, name))
            return &f->e[i];
    return NULL;
}

int tq_st_has(const tq_st_file *f, const char *name) { return find(f, name) != NULL; }

tq_status tq_st_read_f32_to(const tq_st_file *f, const char *name, int rank, const int64_t *dims,
                            float *w)
{
    return tq_st_read_to(f, name, rank, dims, TQ_DTYPE_F32, w);
}

/* NAME, which must have the shape dims[0..rank), or a message why not. */
static tq_status shaped(const tq_st_file *f, const char *name, int rank, const int64_t *dims,
                        const st_entry **out)
{
    const st_entry *e = find(f, name);
    if (!e)
        return tq_fail(TQ_ERR_DATA, "%s: no tensor \"%s\"", f->path, name);
    int same = e->rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = e->dims[i] == dims[i];
    if (!same) {
        char want[160] = "", got[160] = "";
        for (int i = 0; i < rank; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "",
                     (long long)dims[i]);
        for (int i = 0; i < e->rank; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                     (long long)e->dims[i]);
        return tq_fail(TQ_ERR_DATA, "%s: tensor \"%s\" has shape [%s], expected [%s]", f->path,
                       name, got, want);
    }
    *out = e;
    return TQ_OK;
}

tq_dtype tq_st_dtype(const tq_st_file *f, const char *name)
{
    const st_entry *e = find(f, name);
    return e ? e->dtype : TQ_DTYPE_INVALID;
}

tq_status tq_st_read_raw(const tq_st_file *f, const char *name, tq_dtype dt, int rank,
                         const int64_t *dims, void *w)
{
    const st_entry *e = NULL;
    tq_status st = shaped(f, name, rank, dims, &e);
    if (st)
        return st;
    if (e->dtype != dt)
        return tq_fail(TQ_ERR_DATA, "%s: tensor \"%s\" is %s, expected %s", f->path, name,
                       tq_dtype_name(e->dtype), tq_dtype_name(dt));
    if (e->end > e->begin)
        memcpy(w, f->map + e->begin, e->end - e->begin);
    return TQ_OK;
}

const char *tq_st_meta(const tq_st_file *f, const char *key)
{
    const tq_json *m = tq_json_get(f->hdr, "__metadata__"), *v = m ? tq_json_get(m, key) : NULL;
    return v && v->type == TQ_JSON_STR ? v->str : NULL;
}

tq_status tq_st_read_to(const tq_st_file *f, const char *name, int rank, const int64_t *dims,
                        tq_dtype to, void *w)
{
    const st_entry *e = NULL;
    tq_status st0 = shaped(f, name, rank, dims, &e);
    if (st0)
        return st0;
    if (e->dtype != TQ_DTYPE_F32 && e->dtype != TQ_DTYPE_F16 && e->dtype != TQ_DTYPE_BF16)
        return tq_fail(TQ_ERR_DATA, "%s: tensor \"%s\": dtype %s is not a float weight type",
                       f->path, name, tq_dtype_name(e->dtype));
    size_t n = (size_t)((e->end - e->begin) / tq_dtype_size(e->dtype));
    /* The map gives no alignment guarantee for the data: convert from a copy
     * when it is misaligned, so that no unaligned access reaches tq_convert. */
    const unsigned char *src = f->map + e->begin;
    void *tmp = NULL;
    if ((uintptr_t)src % tq_dtype_size(e->dtype)) {
        tmp = malloc(e->end - e->begin + 1);
        if (!tmp)
            return tq_fail(TQ_ERR_NOMEM, "%s: out of memory for \"%s\"", f->path, name);
        memcpy(tmp, src, e->end - e->begin);
        src = tmp;
    }
    tq_status st = tq_convert(to, w, e->dtype, src, n, 0);
    free(tmp);
    return st ? tq_fail_context(st, "%s: tensor \"%s\"", f->path, name) : TQ_OK;
}

tq_status tq_st_read_f32(const tq_st_file *f, const char *name, int rank, const int64_t *dims,
                         float **out)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    float *w = malloc(n ? n * sizeof *w : 1);
    if (!w)
        return tq_fail(TQ_ERR_NOMEM, "%s: out of memory for \"%s\"", f->path, name);
    tq_status st = tq_st_read_f32_to(f, name, rank, dims, w);
    if (st) {
        free(w);
        return st;
    }
    *out = w;
    return TQ_OK;
}
