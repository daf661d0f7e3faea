/* unicode.c: lookups in the generated Unicode tables, Hangul decomposition by
 * its formula, and UTF-8 decoding that never fails (bad bytes read as U+FFFD). */
#include "unicode.h"

unsigned tq_uc_flags(uint32_t cp)
{
    size_t lo = 0, hi = tq_uc_n_ranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < tq_uc_ranges[mid].first)
            hi = mid;
        else if (cp > tq_uc_ranges[mid].last)
            lo = mid + 1;
        else
            return tq_uc_ranges[mid].flags;
    }
    return 0;
}

static const tq_uc_map *map_find(const tq_uc_map *m, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < m[mid].cp)
            hi = mid;
        else if (cp > m[mid].cp)
            lo = mid + 1;
        else
            return &m[mid];
    }
    return NULL;
}

int tq_uc_lower_cp(uint32_t cp, uint32_t *out)
{
    if (cp < 0x80) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    const tq_uc_map *m = map_find(tq_uc_lower, tq_uc_n_lower, cp);
    if (!m) {
        out[0] = cp;
        return 1;
    }
    for (uint32_t i = 0; i < m->n; i++)
        out[i] = tq_uc_pool[m->at + i];
    return (int)m->n;
}

int tq_uc_decompose(uint32_t cp, uint32_t *out)
{
    if (cp < 0xC0) {
        out[0] = cp;
        return 1;
    }
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllables: L V (T) */
        uint32_t s = cp - 0xAC00;
        out[0] = 0x1100 + s / 588;
        out[1] = 0x1161 + (s % 588) / 28;
        if (s % 28) {
            out[2] = 0x11A7 + s % 28;
            return 3;
        }
        return 2;
    }
    const tq_uc_map *m = map_find(tq_uc_decomp, tq_uc_n_decomp, cp);
    if (!m) {
        out[0] = cp;
        return 1;
    }
    for (uint32_t i = 0; i < m->n; i++)
        out[i] = tq_uc_pool[m->at + i];
    return (int)m->n;
}

uint32_t tq_utf8_decode(const unsigned char *s, size_t n, size_t *used)
{
    unsigned char c = s[0];
    *used = 1;
    if (c < 0x80)
        return c;
    int k;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
        k = 1;
        cp = c & 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 2;
        cp = c & 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 3;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        return 0xFFFD;
    }
    if ((size_t)k >= n)
        return 0xFFFD;
    for (int i = 1; i <= k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0xFFFD;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0xFFFD;
    *used = (size_t)k + 1;
    return cp;
}

size_t tq_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}
