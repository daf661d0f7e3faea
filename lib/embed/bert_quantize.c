/* bert_quantize.c: tq-quantize --model: a sentence-transformers folder as one
 * whose encoder runs in int8 with the calibration done once: the f32 model
 * loaded and calibrated exactly as tq-embed --precision int8 does at load,
 * its int8 state stored (bert_int8_file.c), the folder's other files copied
 * beside it, the f32 weights left out; the folder appears whole or not at
 * all (a temporary folder beside it, renamed). */
#include "bert.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The encoder's f32 weights in every format the hub ships, which an int8
 * folder must not carry (in the Transformer module's folder only: a Dense
 * module's model.safetensors is its weights, kept in f32 at load) */
static int is_weights(const char *name)
{
    static const char *const ends[] = {".safetensors", ".bin", ".h5", ".msgpack", ".ot",
                                       ".onnx", ".pt", ".pth", ".ckpt", ".index.json"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
        size_t k = strlen(ends[i]);
        if (n >= k && !strcmp(name + n - k, ends[i]))
            return 1;
    }
    return 0;
}

/* Other runtimes' exports of the same f32 model, not the model's own files */
static int is_export_dir(const char *name)
{
    return !strcmp(name, "onnx") || !strcmp(name, "openvino");
}

static tq_status copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open: %s", from, strerror(errno));
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        tq_status st = tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create: %s", to, strerror(errno));
        close(in);
        return st;
    }
    char buf[65536];
    tq_status st = TQ_OK;
    for (;;) {
        ssize_t got = read(in, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            st = tq_fail(TQ_ERR_IO, "%s: read failed: %s", from, strerror(errno));
            break;
        }
        if (!got)
            break;
        for (ssize_t off = 0; off < got && !st;) {
            ssize_t put = write(out, buf + off, (size_t)(got - off));
            if (put < 0 && errno == EINTR)
                continue;
            if (put < 0)
                st = tq_fail(TQ_ERR_IO, "%s: write failed: %s", to, strerror(errno));
            else
                off += put;
        }
        if (st)
            break;
    }
    close(in);
    if (close(out) && !st)
        st = tq_fail(TQ_ERR_IO, "%s: write failed: %s", to, strerror(errno));
    return st;
}

/* src's tree into dst (made), symbolic links followed (a hub snapshot's
 * files are links into its blobs), hidden names and the f32 weights of the
 * Transformer's folder (skip) left out; *files counts the copies. */
static tq_status copy_tree(const char *src, const char *dst, const char *skip, int depth,
                           int *files)
{
    if (depth > 8)
        return tq_fail(TQ_ERR_DATA, "%s: folders nested too deep for a model", src);
    DIR *d = opendir(src);
    if (!d)
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open: %s", src, strerror(errno));
    tq_status st = TQ_OK;
    struct dirent *de;
    char from[4096], to[4096];
    int here = !strcmp(src, skip);
    while (!st && (errno = 0, de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        if ((size_t)snprintf(from, sizeof from, "%s/%s", src, de->d_name) >= sizeof from ||
            (size_t)snprintf(to, sizeof to, "%s/%s", dst, de->d_name) >= sizeof to) {
            st = tq_fail(TQ_ERR_DATA, "%s/%s: path too long", src, de->d_name);
            break;
        }
        struct stat sb;
        if (stat(from, &sb))
            st = tq_fail(TQ_ERR_NOINPUT, "%s: cannot open: %s", from, strerror(errno));
        else if (S_ISDIR(sb.st_mode) && !is_export_dir(de->d_name)) {
            if (mkdir(to, 0755))
                st = tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create: %s", to, strerror(errno));
            else
                st = copy_tree(from, to, skip, depth + 1, files);
        } else if (S_ISREG(sb.st_mode) && !(here && is_weights(de->d_name))) {
            if (!(st = copy_file(from, to)))
                ++*files;
        }
    }
    if (!st && errno)
        st = tq_fail(TQ_ERR_IO, "%s: cannot read the folder: %s", src, strerror(errno));
    closedir(d);
    return st;
}

/* Removes what this run made under path (its temporary folder). */
static void remove_tree(const char *path, int depth)
{
    DIR *d = depth < 12 ? opendir(path) : NULL;
    struct dirent *de;
    char p[4096];
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            (size_t)snprintf(p, sizeof p, "%s/%s", path, de->d_name) < sizeof p) {
            struct stat sb;
            if (!lstat(p, &sb) && S_ISDIR(sb.st_mode))
                remove_tree(p, depth + 1);
            else
                unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(path);
}

/* dst must be new, or an empty folder (rename replaces that). */
static tq_status check_dst(const char *dst)
{
    struct stat sb;
    if (stat(dst, &sb))
        return errno == ENOENT ? TQ_OK
                               : tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create: %s", dst,
                                         strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return tq_fail(TQ_ERR_CANTCREATE, "%s: exists and is not a folder", dst);
    DIR *d = opendir(dst);
    if (!d)
        return tq_fail(TQ_ERR_CANTCREATE, "%s: cannot open: %s", dst, strerror(errno));
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(d)))
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    closedir(d);
    return empty ? TQ_OK
                 : tq_fail(TQ_ERR_CANTCREATE, "%s: exists and is not empty (tq-quantize "
                           "--model makes a new folder)", dst);
}

/* The f32 model of src, loaded on dev and calibrated as tq_embed_bert_open
 * does for --precision int8. */
static tq_status calibrated(const char *src, tq_device *dev, bert_model **m)
{
    bert_config cfg;
    tq_tokenizer *tok = NULL;
    tq_status st = tq_bert_config_load(src, &cfg);
    if (st)
        return st;
    struct stat sb;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", cfg.model_dir, "model.safetensors");
    if (stat(p, &sb) && (snprintf(p, sizeof p, "%s/%s", cfg.model_dir, TQ_BERT_INT8_FILE),
                         !stat(p, &sb))) {
        st = tq_fail(TQ_ERR_DATA, "%s: already an int8 folder of tq-quantize --model (no "
                     "model.safetensors): quantize the f32 folder it was made from", src);
        tq_bert_config_free(&cfg);
        return st;
    }
    st = tq_tokenizer_open(cfg.model_dir, &cfg.wp, &tok);
    if (!st && tq_tokenizer_vocab_size(tok) > cfg.vocab)
        st = tq_fail(TQ_ERR_DATA, "%s/%s: %lld tokens, more than vocab_size %lld", cfg.model_dir,
                     tq_tokenizer_source(tok), (long long)tq_tokenizer_vocab_size(tok),
                     (long long)cfg.vocab);
    if (st) {
        tq_bert_config_free(&cfg);
        tq_tokenizer_free(tok);
        return st;
    }
    cfg.prec = TQ_DTYPE_F32;
    st = tq_bert_model_load(&cfg, dev, m); /* takes cfg over */
    if (!st && (st = tq_bert_int8(*m, tok))) {
        tq_bert_model_free(*m);
        *m = NULL;
    }
    tq_tokenizer_free(tok);
    return st;
}

/* The Transformer module's folder relative to src ("" for src itself). */
static const char *module_rel(const char *src, const char *model_dir)
{
    size_t n = strlen(src);
    while (n > 1 && src[n - 1] == '/')
        n--;
    const char *r = strncmp(model_dir, src, n) ? "" : model_dir + n;
    while (*r == '/')
        r++;
    return r;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tq_status tq_embed_quantize_folder(const char *src, const char *dst, tq_device *dev,
                                   tq_embed_quant_info *info)
{
    memset(info, 0, sizeof *info);
    if (!dev || tq_device_backend(dev) != TQ_BACKEND_CPU)
        return tq_fail(TQ_ERR_USAGE, "--model: the int8 products are the CPU's in this "
                       "version: calibrate with --device cpu");
    tq_status st = check_dst(dst);
    if (st)
        return st;
    double t0 = now_s();
    bert_model *m = NULL;
    if ((st = calibrated(src, dev, &m)))
        return st;
    info->calib_s = now_s() - t0;
    const bert_config *c = &m->cfg;
    info->arch = c->arch == BERT_ARCH_MPNET     ? "mpnet"
                 : c->arch == BERT_ARCH_ROBERTA ? "roberta"
                                                : "bert";
    info->layers = c->layers;
    info->hidden = c->hidden;
    info->ffn2 = c->ffn2;
    char tmp[4096], mod[8200], path[8300];
    struct stat sb;
    snprintf(path, sizeof path, "%s/model.safetensors", c->model_dir);
    if (!stat(path, &sb))
        info->f32_bytes = (uint64_t)sb.st_size;
    /* the temporary folder beside dst (the same file system, for rename),
     * hidden: dst may be inside src, whose copy leaves hidden names out */
    size_t dn = strlen(dst);
    while (dn > 1 && dst[dn - 1] == '/')
        dn--;
    size_t base = dn;
    while (base > 0 && dst[base - 1] != '/')
        base--;
    if ((size_t)snprintf(tmp, sizeof tmp, "%.*s.%.*s.tmp-XXXXXX", (int)base, dst,
                         (int)(dn - base), dst + base) >= sizeof tmp)
        st = tq_fail(TQ_ERR_CANTCREATE, "%s: path too long", dst);
    else if (!mkdtemp(tmp))
        st = tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create: %s", dst, strerror(errno));
    int made = !st;
    if (!st)
        chmod(tmp, 0755); /* mkdtemp's 0700 is for its secrecy, not a model's */
    if (!st)
        st = copy_tree(src, tmp, c->model_dir, 0, &info->files);
    const char *rel = module_rel(src, c->model_dir);
    snprintf(mod, sizeof mod, "%s%s%s", tmp, *rel ? "/" : "", rel);
    if (!st && (size_t)snprintf(path, sizeof path, "%s/%s", mod, TQ_BERT_INT8_FILE) >= sizeof path)
        st = tq_fail(TQ_ERR_CANTCREATE, "%s: path too long", dst);
    const char *meta[] = {"format", "tq-int8-encoder", "version", TQ_BERT_INT8_VERSION, "ffn_out",
                          tq_dtype_name(c->ffn2), "rest_columns", "", "arch", info->arch};
    char rest[16];
    snprintf(rest, sizeof rest, "%d", tq_bert_int8_rest(c->hidden));
    meta[7] = rest;
    if (!st)
        st = tq_bert_int8_save(m, path, meta, 5, &info->int8_tensor_bytes);
    if (!st && !stat(path, &sb))
        info->int8_bytes = (uint64_t)sb.st_size;
    if (!st && rename(tmp, dst))
        st = errno == ENOTEMPTY || errno == EEXIST
                 ? tq_fail(TQ_ERR_CANTCREATE, "%s: exists and is not empty", dst)
                 : tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create: %s", dst, strerror(errno));
    if (st && made)
        remove_tree(tmp, 0);
    tq_bert_model_free(m);
    return st;
}
