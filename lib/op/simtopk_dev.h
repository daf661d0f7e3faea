/* simtopk_dev.h: the fused similarity top-k on a device, for every backend
 * that has a matrix product and two small kernels (Vulkan, CUDA, HIP). The
 * backend lends its ops and kernels through tq_simdev_backend; the passes,
 * the exact rescoring and the proofs are simtopk_dev.c's and
 * simtopk_exact.c's, the same for all, so every device gives the CPU's lists
 * bit for bit. */
#ifndef TQ_SIMTOPK_DEV_H
#define TQ_SIMTOPK_DEV_H

#include "tq.h"

/* The candidates a select kernel keeps per query, at most. */
enum { TQ_SIMDEV_KP_MAX = 512 };

typedef struct tq_simdev_backend {
    /* The backend's op entries (its table's). */
    tq_status (*matmul)(void *ctx, const tq_tensor *a, int trans_a, const tq_tensor *b,
                        int trans_b, float alpha, float beta, tq_tensor *c);
    tq_status (*add)(void *ctx, const tq_tensor *a, const tq_tensor *b, tq_tensor *y);
    tq_status (*rownorm)(void *ctx, const tq_tensor *x, tq_tensor *norms);
    /* The kp (<= TQ_SIMDEV_KP_MAX) best of each row of the f32 score tile x
     * [rows, m] by f32 order (NaN lowest), into vals [rows, kp] (f32) and idx
     * (i64), in any order, column j as index base + j; with kept set, the kp
     * entries already in vals and idx compete too (m + kp >= kp always; m >=
     * kp when not kept). Ties at the kp-th value may go either way. thr (u32
     * [rows], the device's own, never read by the host) may carry what the
     * kernel wants to keep of a row from tile to tile (CUDA: the kp-th order
     * key, so that later tiles are filtered by it). */
    tq_status (*select)(void *ctx, const tq_tensor *x, int64_t kp, int64_t base, int kept,
                        tq_tensor *vals, tq_tensor *idx, tq_tensor *thr);
    /* For each row r of the score tile x [rows, m]: the columns j whose value
     * is >= thr[r] (f32 [rows]; CUDA's kernel lists a NaN value too, which
     * the host then scores exactly) added to row r's list in lst (i32 [rows,
     * TQ_SIMDEV_ABOVE_CAP]) as base + j, in any order, up to the cap; cnt[r]
     * (i32 [rows]) counts them all, past the cap too. */
    tq_status (*above)(void *ctx, const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt,
                       tq_tensor *lst, int64_t base);
    /* Rows rows[0..n) (ascending, no repeats) of the f32 matrix db, packed
     * into dst [n, d] on the host. */
    tq_status (*download_rows)(void *ctx, const tq_tensor *db, const int64_t *rows, size_t n,
                               float *dst);
    /* Optional (NULL: the host scores the candidates from their rows): the
     * exact score (simscore.h's tq_simscore, bit for bit) of each candidate
     * ci [nq, kp] (i64, base + row of db) with its query, into out [nq, kp]
     * (f32), so that only scores travel, not rows. */
    tq_status (*rescore)(void *ctx, const tq_tensor *q, const tq_tensor *db, const tq_tensor *ci,
                         int64_t base, int metric, tq_tensor *out);
    /* Optional (NULL: f32 operands only): tq_op_convert, which rounds the
     * operands to bf16 when the device's rank precision is bf16. */
    tq_status (*convert)(void *ctx, const tq_tensor *x, tq_tensor *y);
    /* The score tile's shape, queries x rows (0: 512 x 8192, 16 MiB): a
     * large GPU wants more work a launch; the tile should stay in its L2. */
    int64_t tile_q, tile_d;
} tq_simdev_backend;

/* The op's entry for such a backend (ctx its own), with the op API's
 * arguments: what the proofs cannot settle (k past TQ_SIMDEV_KP_MAX, rows of
 * no norm, NaN and huge values) goes through the host, as the CPU op. */
tq_status tq_simdev_simtopk(const tq_simdev_backend *be, void *ctx, const tq_tensor *q,
                            const tq_tensor *db, tq_metric metric, int64_t idx_base,
                            tq_tensor *vals, tq_tensor *idx);

#endif
