/* pairs.h: what pairs.c (text pairs from lines) and lists.c (tq-simmat's
 * top-k lists joined to texts) share: the buffer of whole groups of pairs
 * and its scoring by the cross-encoder. */
#ifndef TQ_SCORE_PAIRS_H
#define TQ_SCORE_PAIRS_H

#include "score.h"
#include "embed/text_input.h"

typedef struct pbuf {
    tq_buf bytes;     /* every field of the buffered pairs, back to back */
    size_t *off;      /* 4 fields a pair (QID, QUERY, DOCID, TEXT): 4 n + 1 offsets */
    int64_t n, cap;   /* pairs */
    int64_t *gstart;  /* first pair of each buffered group, ngroups + 1 */
    int64_t ngroups, gcap;
} pbuf;

/* Appends a pair, its fields f[0..4); new_group: it starts a group. */
tq_status tq_pairs_add(pbuf *b, const char *f[4], const size_t fl[4], int new_group);
/* Scores, ranks and writes the buffered groups, then empties the buffer. */
tq_status tq_pairs_flush(const tq_score_pairs_opts *o, pbuf *b, tq_writer *w,
                         tq_score_pairs_stats *s);
void tq_pairs_free(pbuf *b);

#endif
