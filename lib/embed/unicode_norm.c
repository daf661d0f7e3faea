/* unicode_norm.c: NFD, NFKD, NFC and NFKC of a whole text (UAX #15): full
 * decomposition, canonical ordering of marks by combining class, then for
 * NFC/NFKC canonical composition; Hangul by its formula. */
#include "unicode.h"

#include <stdlib.h>

static unsigned ccc(uint32_t cp)
{
    if (cp < 0x300)
        return 0;
    size_t lo = 0, hi = tq_uc_n_ccc;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < tq_uc_ccc[mid].first)
            hi = mid;
        else if (cp > tq_uc_ccc[mid].last)
            lo = mid + 1;
        else
            return tq_uc_ccc[mid].flags;
    }
    return 0;
}

static int compat_decompose(uint32_t cp, uint32_t *out)
{
    size_t lo = 0, hi = tq_uc_n_kdecomp;
    while (cp >= 0xA0 && lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < tq_uc_kdecomp[mid].cp)
            hi = mid;
        else if (cp > tq_uc_kdecomp[mid].cp)
            lo = mid + 1;
        else {
            for (uint32_t i = 0; i < tq_uc_kdecomp[mid].n; i++)
                out[i] = tq_uc_pool[tq_uc_kdecomp[mid].at + i];
            return (int)tq_uc_kdecomp[mid].n;
        }
    }
    return tq_uc_decompose(cp, out);
}

/* The primary composite of a and b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= 0x1100 && a < 0x1113 && b >= 0x1161 && b < 0x1176) /* Hangul L V */
        return 0xAC00 + ((a - 0x1100) * 21 + (b - 0x1161)) * 28;
    if (a >= 0xAC00 && a <= 0xD7A3 && (a - 0xAC00) % 28 == 0 && b > 0x11A7 && b < 0x11C3)
        return a + (b - 0x11A7); /* LV T */
    size_t lo = 0, hi = tq_uc_n_comp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const tq_uc_pair *p = &tq_uc_comp[mid];
        if (a < p->a || (a == p->a && b < p->b))
            hi = mid;
        else if (a > p->a || b > p->b)
            lo = mid + 1;
        else
            return p->c;
    }
    return 0;
}

int tq_uc_normalize(const uint32_t *in, size_t n, int compat, int compose_, uint32_t **out)
{
    uint32_t *v = malloc((18 * n + 1) * sizeof *v);
    if (!v)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)(compat ? compat_decompose(in[i], v + k) : tq_uc_decompose(in[i], v + k));
    /* canonical ordering: a stable insertion sort of each run of marks */
    for (size_t i = 1; i < k; i++) {
        unsigned c = ccc(v[i]);
        if (!c)
            continue;
        uint32_t x = v[i];
        size_t j = i;
        while (j > 0 && ccc(v[j - 1]) > c) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
    if (compose_ && k) {
        size_t starter = 0, w = 1;
        unsigned last = ccc(v[0]) ? 256 : 0;
        for (size_t i = 1; i < k; i++) {
            unsigned c = ccc(v[i]);
            uint32_t m = compose(v[starter], v[i]);
            if (m && (last < c || last == 0)) {
                v[starter] = m;
                continue;
            }
            if (!c)
                starter = w;
            last = c;
            v[w++] = v[i];
        }
        k = w;
    }
    *out = v;
    return (int)k;
}
