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

#endif
