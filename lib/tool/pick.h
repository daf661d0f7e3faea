/* pick.h: which frame a tool reads, by the one rule of CONVENTIONS.md and
 * tq(7): the name given by its option; else its documented default name when
 * the stream has it; else the one frame of the right rank and kind; else an
 * error naming the candidates. The stream is looked at through the first
 * batch of every tensor (tq_reader_lookahead), so nothing is lost to it. */
#ifndef TQ_PICK_H
#define TQ_PICK_H

#include "tq.h"

typedef struct tq_pick {
    const char *what;     /* what the frame holds, for messages: "queries" */
    const char *option;   /* the option that names it: "--q" */
    const char *given;    /* that option's value, or NULL */
    const char *def;      /* the documented default name, or NULL */
    int rank_lo, rank_hi; /* the ranks that fit */
    int (*kind)(tq_dtype); /* the dtypes that fit, or NULL: any */
    int codes;            /* rank 2 codes of tq-quantize fit too: q8_0, q4_0,
                             bit, and int8 or uint8 with their NAME_scale or
                             NAME_ranges among the frames looked at */
    const char *fits;     /* the frames that fit, in words: "rank 2 float" */
    /* the answer */
    char name[TQ_MAX_NAME + 1]; /* "" when no frame fits: the tool's reader
                                   then says what is missing */
    char why[320];        /* how it was chosen, for -v */
} tq_pick;

/* Chooses p->name among the frames of r (before any tq_reader_next). Several
 * that fit, none of the default name: TQ_ERR_USAGE naming them. */
tq_status tq_pick_frame(tq_reader *r, tq_pick *p);
/* The same for the stream in the file PATH (LABEL names it in messages). */
tq_status tq_pick_path(const char *path, const char *label, tq_pick *p);

/* What a tool took from one of its inputs, once read: for -v, and to check
 * that two inputs agree where they must. Each input's frames come from that
 * input only (tq(7)); this says which, and from where. */
typedef struct tq_took {
    const char *what;     /* "queries", "keys and values" */
    const char *name;     /* the frame */
    const char *from;     /* the input: "standard input", "kv.tq" */
    int rank;             /* 0: nothing taken (not said) */
    int64_t dims[TQ_MAX_RANK]; /* dims[0]: rows over all batches */
} tq_took;

/* "queries: frame "emb" [1 x 384] from standard input" into buf. */
void tq_took_say(const tq_took *t, char *buf, size_t n);
/* TQ_ERR_DATA naming both inputs and both widths when the last dims of a
 * and b differ: "queries and keys differ in width: "emb" from standard input
 * has 8 values a row, "emb" from kv.tq has 384". */
tq_status tq_took_same_width(const tq_took *a, const tq_took *b);
/* The label of a path in these messages: "-" is "standard input". */
const char *tq_took_label(const char *path);

#endif
