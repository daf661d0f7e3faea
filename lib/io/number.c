/* number.c: numbers as text both ways. Floats print as the shortest %g that
 * reads back to the very same value, so text round-trips exactly; parsing is
 * strict: the whole field is one number that fits the dtype. */
#include "io.h"
#include "internal.h"

#include <errno.h>
#include <float.h>
#include <math.h>

/* Does text s read back to exactly the value bits of dtype dt? */
static int reads_back(const char *s, tq_dtype dt, const void *v)
{
    switch (dt) {
    case TQ_DTYPE_F64: {
        double x = strtod(s, NULL), y;
        memcpy(&y, v, 8);
        return x == y;
    }
    case TQ_DTYPE_F32: {
        float x = strtof(s, NULL), y;
        memcpy(&y, v, 4);
        return x == y;
    }
    case TQ_DTYPE_F16:
    case TQ_DTYPE_BF16: {
        float x = strtof(s, NULL);
        uint16_t h, want;
        memcpy(&want, v, 2);
        h = dt == TQ_DTYPE_F16 ? tq_f32_to_f16(x) : tq_f32_to_bf16(x);
        return h == want;
    }
    default:
        return 0;
    }
}

/* The p-digit decimal one unit in the last digit further from zero than the
 * rounding of x, written as %g would write it; 0 if it does not fit. */
static int next_up(char *buf, size_t cap, int p, double x)
{
    char e[TQ_NUM_MAX], dig[TQ_NUM_MAX];
    int n = snprintf(e, sizeof e, "%.*e", p - 1, fabs(x));
    char *ep = strchr(e, 'e');
    if (n <= 0 || !ep)
        return 0;
    int nd = 0, exp = atoi(ep + 1);
    for (char *q = e; q < ep; q++)
        if (*q != '.')
            dig[nd++] = *q;
    int i = nd - 1;
    for (; i >= 0 && dig[i] == '9'; i--) /* add one to the last digit, carrying */
        dig[i] = '0';
    if (i >= 0) {
        dig[i]++;
    } else { /* 9.99e5 -> 1.00e6 */
        dig[0] = '1';
        exp++;
    }
    while (nd > 1 && dig[nd - 1] == '0') /* %g drops trailing zeros */
        nd--;
    size_t k = 0;
    char *o = buf;
    if (x < 0)
        o[k++] = '-';
    if (exp < -4 || exp >= p) {
        o[k++] = dig[0];
        if (nd > 1)
            o[k++] = '.';
        for (int j = 1; j < nd; j++)
            o[k++] = dig[j];
        k += (size_t)snprintf(o + k, cap - k, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    } else if (exp >= 0) {
        for (int j = 0; j <= exp || j < nd; j++) {
            if (j == exp + 1)
                o[k++] = '.';
            o[k++] = j < nd ? dig[j] : '0';
        }
        o[k] = 0;
    } else {
        o[k++] = '0';
        o[k++] = '.';
        for (int j = 0; j < -exp - 1; j++)
            o[k++] = '0';
        for (int j = 0; j < nd; j++)
            o[k++] = dig[j];
        o[k] = 0;
    }
    return k < cap;
}

size_t tq_fmt_float(char *buf, tq_dtype dt, const void *v)
{
    if (dt == TQ_DTYPE_F32) {
        float f;
        memcpy(&f, v, 4);
        size_t n = tq_fmt_f32_fast(buf, f);
        if (n)
            return n;
    }
    return tq_fmt_float_exact(buf, dt, v);
}

size_t tq_fmt_float_exact(char *buf, tq_dtype dt, const void *v)
{
    double x;
    /* Digits that always suffice (max) and a start below which a shorter
     * string, if one exists, equals the rounding to `start` digits anyway:
     * half an ulp is under half a unit of the start-th digit for normal
     * numbers, so %.{start}g finds it. Subnormals start from 1. */
    int start, max;
    float f;
    uint16_t h;
    switch (dt) {
    case TQ_DTYPE_F64:
        memcpy(&x, v, 8);
        start = 15, max = 17;
        break;
    case TQ_DTYPE_F32:
        memcpy(&f, v, 4);
        x = f;
        start = 6, max = 9;
        break;
    case TQ_DTYPE_F16:
        memcpy(&h, v, 2);
        x = tq_f16_to_f32(h);
        start = 3, max = 5;
        break;
    case TQ_DTYPE_BF16:
        memcpy(&h, v, 2);
        x = tq_bf16_to_f32(h);
        start = 2, max = 4;
        break;
    default:
        return (size_t)snprintf(buf, TQ_NUM_MAX, "?");
    }
    if (isnan(x))
        return (size_t)snprintf(buf, TQ_NUM_MAX, "nan");
    if (isinf(x))
        return (size_t)snprintf(buf, TQ_NUM_MAX, x < 0 ? "-inf" : "inf");
    if (x != 0 && fabs(x) < (dt == TQ_DTYPE_F64 ? DBL_MIN
                             : dt == TQ_DTYPE_F16 ? 0x1p-14
                                                  : (double)FLT_MIN))
        start = 1;
    int e, n = 0;
    int pow2 = fabs(frexp(x, &e)) == 0.5;
    for (int p = start; p <= max; p++) {
        n = snprintf(buf, TQ_NUM_MAX, "%.*g", p, x);
        if (reads_back(buf, dt, v))
            break;
        /* At a power of two the gap below is half the gap above, so the
         * nearest p digits may miss while the next p-digit number up fits. */
        if (pow2 && next_up(buf, TQ_NUM_MAX, p, x) && reads_back(buf, dt, v)) {
            n = (int)strlen(buf);
            break;
        }
    }
    return (size_t)n;
}

size_t tq_fmt_number(char *buf, tq_dtype dt, const void *v)
{
    const unsigned char *p = v;
    switch (dt) {
    case TQ_DTYPE_I8: return (size_t)snprintf(buf, TQ_NUM_MAX, "%d", (int)(int8_t)p[0]);
    case TQ_DTYPE_U8: return (size_t)snprintf(buf, TQ_NUM_MAX, "%u", (unsigned)p[0]);
    case TQ_DTYPE_I16: { int16_t x; memcpy(&x, p, 2); return (size_t)snprintf(buf, TQ_NUM_MAX, "%d", x); }
    case TQ_DTYPE_I32: { int32_t x; memcpy(&x, p, 4); return (size_t)snprintf(buf, TQ_NUM_MAX, "%ld", (long)x); }
    case TQ_DTYPE_I64: { int64_t x; memcpy(&x, p, 8); return (size_t)snprintf(buf, TQ_NUM_MAX, "%lld", (long long)x); }
    default: return tq_fmt_float(buf, dt, v);
    }
}

int tq_parse_number(const char *s, size_t len, tq_dtype dt, void *dst, const char **why)
{
    char tmp[512];
    while (len && (*s == ' ' || *s == '\t')) /* spaces around a number are harmless */
        s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r'))
        len--;
    if (len == 0) {
        *why = "empty field";
        return -1;
    }
    if (len >= sizeof tmp) {
        *why = "field too long for a number";
        return -1;
    }
    memcpy(tmp, s, len);
    tmp[len] = 0;
    char *end;
    errno = 0;
    if (tq_dtype_is_float(dt)) {
        /* a number starts with a sign, a digit, a dot, or is inf/nan */
        char c = tmp[tmp[0] == '-' || tmp[0] == '+'];
        if (!((c >= '0' && c <= '9') || c == '.' || c == 'i' || c == 'I' || c == 'n' ||
              c == 'N')) {
            *why = "not a number";
            return -1;
        }
        if (dt == TQ_DTYPE_F64) {
            double x = strtod(tmp, &end);
            memcpy(dst, &x, 8);
        } else {
            float x = strtof(tmp, &end);
            if (dt == TQ_DTYPE_F32) {
                memcpy(dst, &x, 4);
            } else {
                uint16_t hv = dt == TQ_DTYPE_F16 ? tq_f32_to_f16(x) : tq_f32_to_bf16(x);
                memcpy(dst, &hv, 2);
            }
        }
        /* overflow to inf and underflow to 0 are what IEEE rounding gives: keep */
        if (*end) {
            *why = "not a number";
            return -1;
        }
        return 0;
    }
    long long v = strtoll(tmp, &end, 10);
    if (end == tmp || *end) {
        *why = "not an integer";
        return -1;
    }
    long long lo, hi;
    switch (dt) {
    case TQ_DTYPE_I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case TQ_DTYPE_U8: lo = 0, hi = UINT8_MAX; break;
    case TQ_DTYPE_I16: lo = INT16_MIN, hi = INT16_MAX; break;
    case TQ_DTYPE_I32: lo = INT32_MIN, hi = INT32_MAX; break;
    case TQ_DTYPE_I64: lo = INT64_MIN, hi = INT64_MAX; break;
    default:
        *why = "no numbers of this dtype";
        return -1;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        *why = "integer out of range for the dtype";
        return -1;
    }
    switch (dt) {
    case TQ_DTYPE_I8: { int8_t x = (int8_t)v; memcpy(dst, &x, 1); break; }
    case TQ_DTYPE_U8: { uint8_t x = (uint8_t)v; memcpy(dst, &x, 1); break; }
    case TQ_DTYPE_I16: { int16_t x = (int16_t)v; memcpy(dst, &x, 2); break; }
    case TQ_DTYPE_I32: { int32_t x = (int32_t)v; memcpy(dst, &x, 4); break; }
    default: { int64_t x = v; memcpy(dst, &x, 8); break; }
    }
    return 0;
}
