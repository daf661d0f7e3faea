/* unicode.h: the Unicode facts of BERT's tokenizer (tables generated from
 * Python's unicodedata by scripts/gen-unicode.py) and UTF-8 decoding. */
#ifndef TQ_UNICODE_H
#define TQ_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum {
    TQ_UC_CTRL = 1,      /* BERT's control: Cc or Cf, but not \t \n \r      */
    TQ_UC_SPACE = 2,     /* BERT's whitespace: space \t \n \r or Zs          */
    TQ_UC_PUNCT = 4,     /* ASCII symbols or any P* category                 */
    TQ_UC_CJK = 8,       /* CJK ideographs that BERT splits out              */
    TQ_UC_MARK = 16,     /* Mn: what stripping accents removes after NFD    */
    /* the classes tokenizer.json's parts use, as Rust's char and regex see them */
    TQ_UC_WSPACE = 32,   /* White_Space (char::is_whitespace, regex \s)     */
    TQ_UC_OTHER = 64,    /* Cc, Cf, Co, Cs: the library's is_other (no Cn)  */
    TQ_UC_LETTER = 128,  /* any L* category (\p{L})                          */
    TQ_UC_NUMBER = 256,  /* any N* category (\p{N}, char::is_numeric)        */
    TQ_UC_MARKS = 512,   /* any M* category (is_combining_mark)              */
    TQ_UC_WORD = 1024    /* regex \w: L M Nd Nl Pc, ZWNJ ZWJ, circled letters */
};

typedef struct tq_uc_range { uint32_t first, last, flags; } tq_uc_range;
typedef struct tq_uc_map { uint32_t cp, at, n; } tq_uc_map;
typedef struct tq_uc_pair { uint32_t a, b, c; } tq_uc_pair; /* a b compose to c */

extern const tq_uc_range tq_uc_ranges[];
extern const size_t tq_uc_n_ranges;
extern const tq_uc_map tq_uc_lower[];
extern const size_t tq_uc_n_lower;
extern const tq_uc_map tq_uc_decomp[];
extern const size_t tq_uc_n_decomp;
extern const tq_uc_map tq_uc_kdecomp[];  /* NFKD, where it is not NFD */
extern const size_t tq_uc_n_kdecomp;
extern const tq_uc_range tq_uc_ccc[];     /* flags: the combining class */
extern const size_t tq_uc_n_ccc;
extern const tq_uc_pair tq_uc_comp[];     /* by (a, b) */
extern const size_t tq_uc_n_comp;
extern const uint32_t tq_uc_pool[];

unsigned tq_uc_flags(uint32_t cp);
/* Lower-case mapping of one character (full mappings: U+0130 gives 2) and full
 * canonical decomposition (NFD, Hangul included) of one code point into out
 * (room for 4 and 18 code points); returns the count. */
int tq_uc_lower_cp(uint32_t cp, uint32_t *out);
int tq_uc_decompose(uint32_t cp, uint32_t *out);
/* Unicode normalization of a whole text (unicode_norm.c): NFD, NFKD (compat),
 * and with compose NFC, NFKC. *out gets at most 18 * n code points; returns
 * its length, or -1 out of memory. */
int tq_uc_normalize(const uint32_t *in, size_t n, int compat, int compose, uint32_t **out);
/* Decodes one UTF-8 sequence at s (n bytes left): the code point, or U+FFFD
 * for an invalid sequence; *used = bytes consumed (>= 1). */
uint32_t tq_utf8_decode(const unsigned char *s, size_t n, size_t *used);
/* Encodes cp into out (4 bytes room); returns the byte count. */
size_t tq_utf8_encode(uint32_t cp, char *out);

#endif
