/* sizes.c: the -n argument of tq-bench: comma lists of sizes and ranges,
 * "1024,4096", "1024-16384*2" (each size twice the last), "100-500+100"
 * (steps of 100), with k and M suffixes (1024 and 1048576 times). */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static tq_status one_number(const char **p, int64_t *v, const char *arg)
{
    char *end;
    errno = 0;
    long long x = strtoll(*p, &end, 10);
    if (errno || end == *p || x < 1)
        return tq_fail(TQ_ERR_USAGE, "-n: bad size list '%s' (e.g. 1024,4096 or 1024-16384*2)",
                       arg);
    int64_t mul = 1;
    if (*end == 'k' || *end == 'K')
        mul = 1024, end++;
    else if (*end == 'M')
        mul = 1048576, end++;
    if (x > INT64_MAX / 2 / mul)
        return tq_fail(TQ_ERR_USAGE, "-n: size too large in '%s'", arg);
    *v = x * mul;
    *p = end;
    return TQ_OK;
}

static tq_status add(int64_t *sizes, int *n, int64_t v, const char *arg)
{
    if (*n >= TQB_MAX_SIZES)
        return tq_fail(TQ_ERR_USAGE, "-n: more than %d sizes in '%s'", TQB_MAX_SIZES, arg);
    sizes[(*n)++] = v;
    return TQ_OK;
}

tq_status tqb_sizes_parse(const char *arg, int64_t *sizes, int *n)
{
    const char *p = arg;
    tq_status st;
    *n = 0;
    for (;;) {
        int64_t lo, hi, step = 2;
        int geometric = 1;
        if ((st = one_number(&p, &lo, arg)))
            return st;
        if (*p == '-') {
            p++;
            if ((st = one_number(&p, &hi, arg)))
                return st;
            if (*p == '*' || *p == '+') {
                geometric = *p == '*';
                p++;
                if ((st = one_number(&p, &step, arg)))
                    return st;
            }
            if (hi < lo || (geometric && step < 2))
                return tq_fail(TQ_ERR_USAGE,
                               "-n: a range goes up, by a factor of 2 or more ('%s')", arg);
            for (int64_t v = lo; v <= hi; v = geometric ? v * step : v + step) {
                if ((st = add(sizes, n, v, arg)))
                    return st;
                if (v > INT64_MAX / 2 / step)
                    break;
            }
        } else if ((st = add(sizes, n, lo, arg))) {
            return st;
        }
        if (!*p)
            return TQ_OK;
        if (*p != ',')
            return tq_fail(TQ_ERR_USAGE,
                           "-n: bad size list '%s' (e.g. 1024,4096 or 1024-16384*2)", arg);
        p++;
    }
}
