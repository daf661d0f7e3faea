/* float_fast.c: the shortest round-trip text of an f32 without printf, for
 * the common magnitudes. tq_fmt_float's exact path (number.c) tries %.6g to
 * %.9g, each printed by glibc and read back by strtof: half a microsecond per
 * number, which made text output the slowest stage of `tq-embed | tq-cat -t`.
 * Here the same choice is made in double arithmetic: x times an exact power of
 * ten (one rounding), rounded to p digits, and the p-digit decimal divided back
 * (one rounding) and rounded to f32. Whenever an error bound says a rounding
 * could have gone the other way (a near tie, a near float midpoint), or the
 * power of ten is not exact in double, it gives up and the exact path decides.
 * The result is therefore the very string the exact path prints; a unit test
 * compares the two on millions of values. */
#include "io.h"

#include <float.h>
#include <math.h>

static const double p10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* a * 10^k with one rounding, or NAN when 10^k is not exact in double */
static double scale10(double a, int k)
{
    if (k >= 0)
        return k <= 22 ? a * p10[k] : NAN;
    return k >= -22 ? a / p10[-k] : NAN;
}

/* The f32 that the decimal d * 10^k reads as, or NAN when the double
 * approximation lies too near a rounding boundary of f32 to be sure. */
static double reads_as(double d, int k)
{
    double y = scale10(d, k);
    if (isnan(y))
        return NAN;
    /* y is within half a double ulp (2^-53 relative) of the exact decimal; if
     * nudging it by 2^-50 either way cannot change the f32, neither could the
     * error. */
    float lo = (float)(y * (1 - 0x1p-50)), mid = (float)y, hi = (float)(y * (1 + 0x1p-50));
    return lo == mid && mid == hi ? (double)mid : NAN;
}

/* Writes the p significant digits of D (D < 10^p) with decimal exponent e
 * as %.{p}g writes them: trailing zeros dropped, exponent form outside
 * 10^-4 .. 10^p. */
static size_t put_g(char *buf, int neg, uint64_t D, int p, int e)
{
    char dig[20];
    for (int i = p - 1; i >= 0; i--, D /= 10)
        dig[i] = (char)('0' + D % 10);
    int nd = p;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    size_t k = 0;
    if (neg)
        buf[k++] = '-';
    if (e < -4 || e >= p) {
        buf[k++] = dig[0];
        if (nd > 1) {
            buf[k++] = '.';
            for (int j = 1; j < nd; j++)
                buf[k++] = dig[j];
        }
        int ae = e < 0 ? -e : e;
        buf[k++] = 'e';
        buf[k++] = e < 0 ? '-' : '+';
        if (ae >= 100)
            buf[k++] = (char)('0' + ae / 100);
        buf[k++] = (char)('0' + ae / 10 % 10);
        buf[k++] = (char)('0' + ae % 10);
    } else if (e >= 0) {
        for (int j = 0; j <= e || j < nd; j++) {
            if (j == e + 1)
                buf[k++] = '.';
            buf[k++] = j < nd ? dig[j] : '0';
        }
    } else {
        buf[k++] = '0';
        buf[k++] = '.';
        for (int j = 0; j < -e - 1; j++)
            buf[k++] = '0';
        for (int j = 0; j < nd; j++)
            buf[k++] = dig[j];
    }
    buf[k] = 0;
    return k;
}

/* p-digit candidate D (10^(p-1) <= D < 10^p) with exponent e: does it read
 * back as x? 1 yes, 0 no, -1 cannot tell. */
static int fits(float x, uint64_t D, int p, int e)
{
    double r = reads_as((double)D, e - p + 1);
    if (isnan(r))
        return -1;
    return r == (double)x;
}

size_t tq_fmt_f32_fast(char *buf, float x)
{
    double a = fabs((double)x);
    if (!(a >= (double)FLT_MIN) || isinf(a))
        return 0; /* zero, subnormal, inf, nan: the exact path */
    int e = (int)floor(log10(a));
    /* log10 may be off by one next to powers of ten: settle e with exact
     * comparisons, 10^e <= a < 10^(e+1) */
    double pe = scale10(1.0, e);
    if (isnan(pe) || isnan(scale10(1.0, e + 1)))
        return 0;
    if (a < pe)
        e--;
    else if (a >= scale10(1.0, e + 1))
        e++;
    int fe;
    int pow2 = frexp(a, &fe) == 0.5;
    for (int p = 6; p <= 9; p++) {
        double s = scale10(a, p - 1 - e); /* in [10^(p-1), 10^p) */
        if (isnan(s))
            return 0;
        double fl = floor(s), frac = s - fl;
        /* s carries a relative error of 2^-53: under 1.2e-7 absolute below
         * 10^9. Too near a tie to know which way %g rounds: give up. */
        if (fabs(frac - 0.5) < 2.5e-7)
            return 0;
        uint64_t D = (uint64_t)fl + (frac > 0.5);
        int ee = e;
        uint64_t top = (uint64_t)p10[p];
        if (D >= top) /* 9.999995 -> 10.0000 */
            D /= 10, ee++;
        int ok = fits(fabsf(x), D, p, ee);
        if (ok < 0)
            return 0;
        if (ok)
            return put_g(buf, x < 0, D, p, ee);
        /* at a power of two the gap below is half the gap above: the next
         * p-digit decimal up may fit where the nearest does not */
        if (pow2) {
            uint64_t U = D + 1;
            int ue = ee;
            if (U >= top)
                U /= 10, ue++;
            ok = fits(fabsf(x), U, p, ue);
            if (ok < 0)
                return 0;
            if (ok)
                return put_g(buf, x < 0, U, p, ue);
        }
    }
    return 0;
}
