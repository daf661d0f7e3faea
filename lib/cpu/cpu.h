/* cpu.h: what the files of the CPU backend share. */
#ifndef TQ_CPU_H
#define TQ_CPU_H

#include "../backend.h"

/* Host address of a tensor's first element (tensors may be views). */
static inline void *tq_cpu_ptr(const tq_tensor *t) { return (char *)t->buf + t->offset; }

/* A single-threaded row-major sgemm: C = alpha op(A) op(B) + beta C, with
 * C m x n, op(A) m x k, op(B) k x n, leading dims as in CBLAS. beta == 0
 * overwrites C (NaN in C does not survive). k >= 1 and alpha != 0: the caller
 * handles the degenerate products. */
typedef void (*tq_cpu_sgemm_fn)(int trans_a, int trans_b, int m, int n, int k, float alpha,
                                const float *a, int lda, const float *b, int ldb, float beta,
                                float *c, int ldc);

/* The built-in sgemm (gemm.c): blocked, vectorized for the running CPU. */
void tq_cpu_sgemm_builtin(int trans_a, int trans_b, int m, int n, int k, float alpha,
                          const float *a, int lda, const float *b, int ldb, float beta,
                          float *c, int ldc);
/* Which kernel the built-in sgemm runs here: "avx512", "avx2" or "portable". */
const char *tq_cpu_sgemm_builtin_isa(void);

/* OpenBLAS's sgemm, loaded and checked on first use (blas.c), or NULL when it is
 * missing or failed its check; single-threaded: the matmul op parallelizes. */
tq_cpu_sgemm_fn tq_cpu_blas_sgemm(void);
/* One line on the matrix-product engine:
 * "OpenBLAS 0.3.21, SkylakeX kernel (chosen by tq), checked". */
void tq_cpu_blas_describe(char *out, size_t n);
/* For the tests: 1 makes matmul use the built-in sgemm even where OpenBLAS
 * works, 0 restores the normal choice. */
void tq_cpu_blas_force_builtin(int on);
/* Products of fewer multiply-adds (batch x m x n x k) run on the built-in
 * sgemm, never loading OpenBLAS for them (matmul.c says why). */
#define TQ_CPU_SMALL_PRODUCT ((int64_t)1 << 22)
/* The sgemm matmul uses now, and its name ("OpenBLAS" or "built-in"). */
tq_cpu_sgemm_fn tq_cpu_sgemm_current(const char **name);

/* The ops, as the backend table takes them (matmul.c, norm.c, topk.c,
 * elementwise.c). */
tq_status tq_cpu_matmul(void *ctx, const tq_tensor *a, int trans_a, const tq_tensor *b,
                        int trans_b, float alpha, float beta, tq_tensor *c);
tq_status tq_cpu_matmul_then(void *ctx, const tq_tensor *a, int trans_a, const tq_tensor *b,
                             int trans_b, float alpha, float beta, const tq_matmul_then *then,
                             tq_tensor *c);
tq_status tq_cpu_matmul_i8(void *ctx, const tq_tensor *a, const tq_tensor *ascale,
                           const tq_tensor *b, const tq_tensor *bscale, const tq_i8_rest *rest,
                           float beta, const tq_matmul_then *then, tq_tensor *c);
/* quantize_rows.c; force_portable: for the tests, the loop without AVX-512 */
tq_status tq_cpu_quantize_rows(void *ctx, const tq_tensor *x, const tq_tensor *colscale,
                               tq_tensor *q, tq_tensor *scale);
void tq_cpu_quantize_rows_force_portable(int on);
/* attention.c: for the tests, the ISA level its loops take (tq_cpu_isa's
 * numbers; -1: the CPU's); 0 when the CPU lacks it */
int tq_cpu_attention_force_isa(int isa);
/* attention_rows.c: the attention's scores and P V for an item whose keys fit
 * one tile, by rows (AVX-512). use: the way is there for kernels of nr
 * columns and not disabled (disable: the tests' switch). scores_rows: s =
 * alpha q k^T for nq rows of q (at ldq) and nk <= 64 keys packed in strips
 * of nr columns of dk rows; pv_rows: o = p v for nq rows of p (at ldp) over
 * nk keys, v's rows at ldv, dv columns, each row times scale[row] (as the
 * tiles' o * (1 / l): the same bits). */
int tq_cpu_att_rows_use(int nr);
void tq_cpu_att_rows_disable(int off);
void tq_cpu_att_scores_rows(const float *q, int64_t ldq, int nq, const float *kp, int nr,
                            int64_t dk, int nk, float alpha, float *s, int lds);
void tq_cpu_att_pv_rows(const float *p, int ldp, int nq, const float *v, int64_t ldv, int nk,
                        int64_t dv, const float *scale, float *o, int64_t ldo);
/* keys 0.. nk (<= 64) of a head, rows at ldk, as one strip [dk, w] that
 * scores_rows takes with nr = w (returned: nk rounded up to 16) */
int tq_cpu_att_pack_rows(const float *k0, int64_t ldk, int nk, int64_t dk, float *dst);
/* attention_bf16.c: the attention's operands rounded to bf16 for
 * tq_cpu_gemm_bf16 (use: the CPU has AVX512-BF16 and BW, and bf16 products
 * are not disabled). rows: dst [rows, ldd] = x's first n columns, zero to
 * an even count. pack_k: keys 0.. nk of a head (rows at ldk, dk columns) as
 * K^T's strips (tmp: nk x 16-word-rounded dk/2 words of scratch); pack_v:
 * rows 0.. nk of v's head (dv columns) as V's strips. product: C [m, n] =
 * alpha A B + beta C, A bf16 rows at lda, B so packed with k rows. */
int tq_cpu_att_bf16_use(void);
void tq_cpu_att_bf16_rows(const float *x, int64_t ldx, int rows, int n, uint16_t *dst, int ldd);
void tq_cpu_att_bf16_pack_k(const float *k0, int64_t ldk, int nk, int64_t dk, uint16_t *dst,
                            uint32_t *tmp);
void tq_cpu_att_bf16_pack_v(const float *v0, int64_t ldv, int nk, int64_t dv, uint16_t *dst);
void tq_cpu_att_bf16_product(int m, int k, int n, float alpha, const uint16_t *a, int lda,
                             const uint16_t *pairs, float beta, float *c, int ldc);
/* attention_wide.c: queries 0.. nq (<= TQ_CPU_ATT_WIDE_ROWS, bf16 rows at
 * ldq) against all nk keys of their item (65.. TQ_CPU_ATT_WIDE_KEYS), K and
 * V packed whole by pack_k and pack_v above, in one pass: out (rows at
 * ldout, dv columns) = softmax(alpha q k^T in base 2) v, P rounded to bf16
 * for its product, its sums f32's; s, p16: [nq, TQ_CPU_ATT_WIDE_KEYS]
 * scratch, o: [nq, ldo] (ldo >= dv rounded to 32). Only where bf16 is used. */
#define TQ_CPU_ATT_WIDE_KEYS 256
#define TQ_CPU_ATT_WIDE_ROWS 48
/* bias (NULL: none): rows of nk scores at ldb added to the scores, times
 * TQ_CPU_LOG2E (the scores' base-2 units), before the softmax. */
#define TQ_CPU_LOG2E 1.44269504088896340736
void tq_cpu_att_wide(int nq, int nk, int dk, int dv, float alpha, const uint16_t *q16, int ldq,
                     const uint16_t *kp, const uint16_t *vp, const float *bias, int64_t ldb,
                     float *s, uint16_t *p16, float *o, int ldo, float *out, int64_t ldout);
/* Frees what matmul keeps in a constant tensor (its packed B). */
void tq_cpu_derived_free(void *derived);
tq_status tq_cpu_rownorm(void *ctx, const tq_tensor *x, tq_tensor *norms);
tq_status tq_cpu_normalize(void *ctx, const tq_tensor *x, float eps, tq_tensor *y);
tq_status tq_cpu_softmax(void *ctx, const tq_tensor *x, tq_tensor *y);
tq_status tq_cpu_layernorm(void *ctx, const tq_tensor *x, const tq_tensor *gamma,
                           const tq_tensor *beta, float eps, tq_tensor *y);
tq_status tq_cpu_layernorm_low(void *ctx, const tq_tensor *x, const tq_tensor *gamma,
                               const tq_tensor *beta, float eps, tq_tensor *y, tq_tensor *low);
/* For the tests: layernorm's baseline loop on an AVX-512 machine too (the
 * same bits as its AVX-512 loop) */
void tq_cpu_layernorm_force_portable(int on);
tq_status tq_cpu_topk(void *ctx, const tq_tensor *x, int64_t k, tq_tensor *vals,
                      tq_tensor *idx);
tq_status tq_cpu_gelu(void *ctx, const tq_tensor *x, tq_tensor *y);
/* GELU of n values in one thread, each as tq_cpu_gelu computes it (y may be
 * x): for matmul's epilogue. */
void tq_cpu_gelu_span(const float *x, float *y, int64_t n);
/* gelu_bf16.c: GELU rounded to bf16 within 1.6e-7 |x| + 1e-7 |GELU(x)| of
 * exact before the rounding (tq_matmul_then.low_only's), rows of n values at
 * ldx into rows at ldy; only where tq_cpu_gelu_bf16_use() (AVX512-BF16, BW
 * and DQ): elsewhere it does nothing. */
int tq_cpu_gelu_bf16_use(void);
void tq_cpu_gelu_bf16_rows(const float *x, int64_t ldx, int rows, int n, uint16_t *y,
                           int64_t ldy);
/* For the tests: GELU's way for ISA level isa (tq_cpu_isa's: 2 AVX-512, 1
 * AVX2, 0 the baseline; -1: the CPU's best again); 0 if this CPU lacks it. */
int tq_cpu_gelu_force(int isa);
tq_status tq_cpu_activate(void *ctx, const tq_tensor *x, tq_activation act, tq_tensor *y);
tq_status tq_cpu_add(void *ctx, const tq_tensor *a, const tq_tensor *b, tq_tensor *y);
tq_status tq_cpu_scale(void *ctx, const tq_tensor *x, float alpha, tq_tensor *y);
tq_status tq_cpu_gather(void *ctx, const tq_tensor *x, const tq_tensor *idx, tq_tensor *y);
tq_status tq_cpu_convert(void *ctx, const tq_tensor *x, tq_tensor *y);
/* simtopk.c */
tq_status tq_cpu_above(void *ctx, const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt,
                       tq_tensor *lst);
tq_status tq_cpu_simtopk(void *ctx, const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                         int64_t idx_base, tq_tensor *vals, tq_tensor *idx);
/* codetopk.c */
tq_status tq_cpu_codetopk(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                          const tq_tensor *db, const tq_tensor *dbscale, tq_metric metric,
                          int64_t idx_base, tq_tensor *vals, tq_tensor *idx);
/* codematrix.c */
tq_status tq_cpu_codematrix(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                            const tq_tensor *db, const tq_tensor *dbscale, tq_metric metric,
                            tq_tensor *out);
/* codescreen.c */
tq_status tq_cpu_codescreen(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                            const tq_tensor *qterms, const tq_tensor *db, const tq_tensor *dbscale,
                            const tq_tensor *dbterms, tq_tensor *out);
/* code_kernels.c: the pair kernels of codetopk and codematrix, chosen by
 * CPUID (dot4/ham4: 4 queries by 4 rows, out[4 a + b]; dot4 NULL: none; the
 * int8 score from a dot product is simscore.h's tq_codescore_i8), and the
 * rows of a block (a
 * multiple of 24, about 256 KiB of codes: a block stays in cache while a
 * chunk of queries passes over it). */
typedef struct tq_code_kernels {
    int32_t (*dot)(const int8_t *a, const int8_t *b, int64_t d);
    void (*dot4)(const int8_t *const *q, const int8_t *const *x, int64_t d, int32_t *out);
    int64_t (*ham)(const unsigned char *a, const unsigned char *b, size_t n);
    void (*ham4)(const unsigned char *const *q, const unsigned char *const *x, size_t n,
                 int64_t *out);
    int strips; /* 1: code_strips.c's int8 kernel runs on this CPU (AVX2) */
    int scores; /* 1: and so does tq_i8_scores (FMA as well) */
} tq_code_kernels;
void tq_code_kernels_pick(tq_code_kernels *k);
/* Bytes of a row of d values of a code dtype (i8, bit, q8_0, q4_0). */
size_t tq_code_row_bytes(tq_dtype dt, int64_t d);
int64_t tq_code_block_rows(size_t row_bytes);

/* code_walk.c: what codetopk and codematrix share. A job of queries q (qb
 * bytes a row, int8 scales qs) against rows x (rb bytes a row, dtype dt,
 * int8 scales xs); blocks: q8_0 or q4_0 rows with q8_0 queries. The caller
 * embeds it first in its own job and gives its loops over one block of rows
 * [b0, b1) for queries [begin, end): pairs (any rows) and strips (the rows
 * packed in S: tq_i8_strips_dots or, for blocks, tq_blk_strips_scores; the
 * loop of the rows' kind is kept).
 * tq_code_job_run runs them on the pool, queries in chunks. */
struct tq_i8_strips;
typedef struct tq_code_job {
    const unsigned char *q, *x;
    const float *qs, *xs;
    int64_t nq, ndb, d;
    size_t rb, qb;
    tq_dtype dt;
    int i8, blocks;
    tq_code_kernels kern;
    void (*pairs)(void *job, int64_t begin, int64_t end, int64_t b0, int64_t b1);
    void (*strips)(void *job, const struct tq_i8_strips *S, int64_t begin, int64_t end,
                   int64_t b0, int64_t b1);
} tq_code_job;
typedef void (*tq_code_pairs_fn)(void *job, int64_t begin, int64_t end, int64_t b0, int64_t b1);
typedef void (*tq_code_strips_fn)(void *job, const struct tq_i8_strips *S, int64_t begin,
                                  int64_t end, int64_t b0, int64_t b1);
/* strips_i8, strips_blk: the caller's strip loops for int8 and for blocks */
void tq_code_job_init(tq_code_job *c, const tq_tensor *q, const tq_tensor *qscale,
                      const tq_tensor *db, const tq_tensor *dbscale, tq_code_pairs_fn pairs,
                      tq_code_strips_fn strips_i8, tq_code_strips_fn strips_blk);
void tq_code_job_run(tq_code_job *c);

/* code_strips.c (x86-64): int8 rows by AVX2, a block of rows packed in strips
 * of 8 against a chunk of queries. tq_i8_strips_new copies the chunk's nq
 * queries (rows rb bytes apart; 0, or -1 without memory); tq_i8_strips_pack
 * packs a block of at most `block` rows with their scales (0: a code is
 * -128, which the kernel cannot take); tq_i8_strips_dots writes out[24 a + r]
 * = query i + a . row r0 + r of the block, for a < 4 (i a multiple of 4,
 * queries past the chunk are zeros) and r < n <= 24 (r0 a multiple of 24);
 * tq_i8_screen sets bit r when row r (of n <= 24, dots and xs readable to a
 * multiple of 4) may score at least worst. */
typedef struct tq_i8_strips {
    int8_t *pk, *q;
    unsigned char *qa; /* |q|, the unsigned operand: -128 is 128 */
    int vnni;          /* the AVX512-VNNI kernels (tq_cpu_code_strips_force_avx2): */
    int32_t *qsum;     /* then pk holds x + 128, and these the queries' sums
                        * [nq] (per block [nq][nb] for ggml's) */
    double *xs;        /* the block's scales */
    size_t qstride;
    int64_t d;
    /* ggml's blocks (tq_blk_strips_*): the queries' block scales [nq][nb],
     * the block's rows decoded and their scales [strip][nb][8] */
    float *qd, *xd;
    int8_t *xv;
    int64_t nb;
} tq_i8_strips;
int tq_i8_strips_new(tq_i8_strips *S, const unsigned char *q, size_t rb, int64_t nq, int64_t d,
                     int64_t block);
int tq_i8_strips_pack(tq_i8_strips *S, const unsigned char *x, const float *xs, int64_t rows);
void tq_i8_strips_dots(const tq_i8_strips *S, int64_t i, int64_t r0, int n, int32_t *out);
uint32_t tq_i8_screen(const int32_t *dots, const double *xs, double qs, double worst, int n);
/* out[r] = tq_codescore_i8(dots[r], qs, xs[r]) for r < n (xs readable to a
 * multiple of 4), four at a time (AVX2 and FMA: the caller checks FMA). */
void tq_i8_scores(const int32_t *dots, const double *xs, float qs, int n, float *out);
void tq_i8_strips_free(tq_i8_strips *S);
/* For the tests: the AVX2 strip kernels where the CPU has AVX512-VNNI too */
void tq_cpu_code_strips_force_avx2(int on);
/* code_walk.c: the tiles of a block of rows [b0, b1) packed in S for queries
 * [begin, end): tile gets dots[24 a + r] = query i + a . row b0 + r0 + r for
 * a < qn (<= 4) and r < n (<= 24); the strip loops of codetopk, codematrix
 * and codescreen. */
typedef void (*tq_i8_tile_fn)(void *ctx, const tq_i8_strips *S, const int32_t *dots, int64_t i,
                              int qn, int64_t b0, int64_t r0, int n);
void tq_i8_strips_tiles(const tq_i8_strips *S, int64_t begin, int64_t end, int64_t b0, int64_t b1,
                        tq_i8_tile_fn tile, void *ctx);
/* The same for ggml's blocks: q8_0 queries (rows qrb bytes apart) and q8_0
 * or q4_0 rows (dt), decoded to int8 values and f32 block scales;
 * tq_blk_strips_scores writes out[24 a + r] = ggml's reference dot product
 * of row r0 + r (r < n <= 24) with query i + a (a < qn <= 4; tq_codescore's
 * bits), q4: q4_0 rows. */
int tq_blk_strips_new(tq_i8_strips *S, const unsigned char *q, size_t qrb, int64_t nq, int64_t d,
                      int64_t block);
int tq_blk_strips_pack(tq_i8_strips *S, tq_dtype dt, const unsigned char *x, size_t xrb,
                       int64_t rows);
void tq_blk_strips_scores(const tq_i8_strips *S, int64_t i, int qn, int64_t r0, int n, int q4,
                          float *out);

/* For the tests: 1 makes codetopk and codematrix use their portable C paths only. */
void tq_cpu_codetopk_force_portable(int on);
/* For the tests: 1 makes simtopk use its portable C paths only. */
void tq_cpu_simtopk_force_portable(int on);
/* rowprod.c */
tq_status tq_cpu_rowprod_prepare(void *ctx, const tq_tensor *db, void **state);
tq_status tq_cpu_rowprod(void *ctx, void *state, const tq_tensor *db, const tq_tensor *q,
                         float alpha, tq_tensor *out);
void tq_cpu_rowprod_release(void *ctx, void *state);
/* attention.c */
tq_status tq_cpu_attention(void *ctx, const tq_tensor *q, const tq_tensor *k,
                           const tq_tensor *v, const tq_attention_args *args, tq_tensor *out);

/* activate_grad.c */
tq_status tq_cpu_activate_grad(void *ctx, const tq_tensor *x, tq_activation act,
                               const tq_tensor *dy, tq_tensor *dx);
tq_status tq_cpu_gelu_grad(void *ctx, const tq_tensor *x, const tq_tensor *dy, tq_tensor *dx);

/* Rows of a tensor seen as [rows, last dim]. */
static inline int64_t tq_cpu_cols(const tq_tensor *t) { return t->rank ? t->dims[t->rank - 1] : 1; }
static inline int64_t tq_cpu_rows(const tq_tensor *t)
{
    int64_t d = tq_cpu_cols(t);
    return d ? tq_tensor_numel(t) / d : 0;
}

#endif
