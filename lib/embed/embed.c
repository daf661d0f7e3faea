/* embed.c: picks the embedder a model spec names: hash:DIM, a fastText binary
 * (by its magic number), text word vectors (.vec), or a model folder. */
#include "embed.h"
#include "../internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#define FASTTEXT_MAGIC 793712314 /* first int32 of fastText .bin and .ftz files */

tq_status tq_embedder_open(const char *spec, tq_device *dev, tq_embedder **e)
{
    /* no precision asked: a model folder's own (int8 for tq-quantize --model's) */
    tq_embed_opts o = {.prec = TQ_DTYPE_F32, .on_long = TQ_LONG_TRUNCATE, .prec_default = 1};
    return tq_embedder_open_opts(spec, dev, &o, NULL, 0, e);
}

/* Why a device multiplies prec's operands widened to f32 (slower than f32
 * for the same numbers, so tq-embed runs f32 there): the -v note's words. */
static const char *why_widened(const tq_device *dev, tq_dtype prec)
{
    if (dev && tq_device_backend(dev) != TQ_BACKEND_CPU)
        return prec == TQ_DTYPE_I8 ? "this version has int8 products on the CPU only"
                                   : "this version has no 16-bit shader product";
    return prec == TQ_DTYPE_BF16 ? "this CPU has no AVX512-BF16"
           : prec == TQ_DTYPE_I8 ? "this CPU has no AVX512-VNNI"
                                 : "this version has no f16 product on the CPU";
}

tq_status tq_embedder_open_prec(const char *spec, tq_device *dev, tq_dtype prec, char *note,
                                size_t note_n, tq_embedder **e)
{
    tq_embed_opts o = {.prec = prec, .on_long = TQ_LONG_TRUNCATE};
    return tq_embedder_open_opts(spec, dev, &o, note, note_n, e);
}

tq_status tq_embedder_open_opts(const char *spec, tq_device *dev, const tq_embed_opts *o,
                                char *note, size_t note_n, tq_embedder **e)
{
    tq_dtype prec = o->prec;
    if (note && note_n)
        note[0] = 0;
    *e = NULL;
    struct stat sb;
    int folder = spec && *spec && !stat(spec, &sb) && S_ISDIR(sb.st_mode);
    if (prec != TQ_DTYPE_F32 && !tq_device_native_product(dev, prec)) {
        if (note && note_n && folder) /* the other embedders have no products */
            snprintf(note, note_n,
                     "--precision %s: f32 products on %s (%s; %s)",
                     prec == TQ_DTYPE_I8 ? "int8" : tq_dtype_name(prec),
                     dev ? tq_device_name(dev) : "cpu",
                     prec == TQ_DTYPE_I8
                         ? "int8 products run on CPUs with AVX512-VNNI"
                         : "bf16 and f16 products run on CUDA and HIP devices' tensor "
                           "cores, bf16 on CPUs with AVX512-BF16",
                     why_widened(dev, prec));
        prec = TQ_DTYPE_F32;
    }
    if (!spec || !*spec)
        spec = "hash:384";
    if ((o->prompt || o->prompt_name) && !folder)
        return tq_fail(TQ_ERR_USAGE, "%s: --prompt and --prompt-name take a model folder", spec);
    if (!strncmp(spec, "hash:", 5) || !strcmp(spec, "hash"))
        return tq_embed_hash_open(spec[4] == ':' ? spec + 5 : "", e);
    if (stat(spec, &sb))
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open model: %s", spec, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        tq_embed_opts bo = *o;
        bo.prec = prec;
        bo.prec_asked = o->prec;
        tq_status st = tq_embed_bert_open(spec, dev, &bo, e);
        /* an int8 folder says what it loaded (and any fallback is moot) */
        if (!st && (*e)->note[0] && note && note_n)
            snprintf(note, note_n, "%s", (*e)->note);
        return st;
    }
    FILE *f = fopen(spec, "rb");
    if (!f)
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open model: %s", spec, strerror(errno));
    unsigned char m[4] = {0};
    size_t got = fread(m, 1, 4, f);
    fclose(f);
    if (got == 4 && (int32_t)tq_le32(m) == FASTTEXT_MAGIC)
        return tq_embed_fasttext_open(spec, e);
    return tq_embed_vec_open(spec, e);
}

void tq_embedder_close(tq_embedder *e)
{
    if (e)
        e->ops->close(e);
}

static int is_dir(const char *path)
{
    struct stat sb;
    return !stat(path, &sb) && S_ISDIR(sb.st_mode);
}

int tq_embed_hub_folder(const char *name, char *out, size_t n)
{
    /* a hub name: NAME or ORG/NAME, nothing that reads as a path */
    const char *slash = strchr(name, '/');
    if (n)
        out[0] = 0;
    if (!*name || *name == '.' || *name == '/' || (slash && strchr(slash + 1, '/')) ||
        (slash && !slash[1]) || strlen(name) > 200)
        return -1;
    char hub[1024], repo[1400], path[1700];
    const char *e = getenv("HF_HUB_CACHE"), *home = getenv("HF_HOME");
    if (e && *e)
        snprintf(hub, sizeof hub, "%s", e);
    else if (home && *home)
        snprintf(hub, sizeof hub, "%s/hub", home);
    else if ((home = getenv("HOME")) && *home)
        snprintf(hub, sizeof hub, "%s/.cache/huggingface/hub", home);
    else
        return 0;
    int len = snprintf(repo, sizeof repo, "%s/models--", hub);
    for (const char *c = name; *c && len < (int)sizeof repo - 3; c++)
        len += *c == '/' ? snprintf(repo + len, sizeof repo - (size_t)len, "--")
                         : (repo[len] = *c, repo[len + 1] = 0, 1);
    /* the revision refs/main names, else the one snapshot */
    char rev[128] = "";
    snprintf(path, sizeof path, "%s/refs/main", repo);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(rev, sizeof rev, f))
            rev[0] = 0;
        fclose(f);
        rev[strcspn(rev, "\r\n")] = 0;
    }
    snprintf(path, sizeof path, "%s/snapshots/%s", repo, rev);
    if (rev[0] && !strchr(rev, '/') && is_dir(path) && strlen(path) < n) {
        snprintf(out, n, "%s", path);
        return 1;
    }
    snprintf(path, sizeof path, "%s/snapshots", repo);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') {
            char one[2000];
            snprintf(one, sizeof one, "%s/%s", path, de->d_name);
            if (is_dir(one) && !found++ && strlen(one) < n)
                snprintf(out, n, "%s", one);
        }
    closedir(d);
    return found == 1 && out[0];
}
