/* json_serde.c: a JSON number's value as Rust's serde_json reads it by
 * default (without its float_roundtrip feature), which is how the tokenizers
 * library loads a tokenizer.json (serde_json 1.0.149 in tokenizers 0.23's
 * Cargo.lock; test_json.c holds values the library gave). That reading is not correctly rounded: the
 * digits go into a u64 (those past its range dropped), which becomes a double
 * and is then multiplied or divided by a power of ten, two roundings where
 * strtod has one; so a score written with 17 digits often comes back one ulp
 * off. Unigram's Viterbi compares sums of scores, and segmentations whose
 * totals tie in exact arithmetic are decided by those last bits: ids equal to
 * the library's need the library's scores, bit for bit. */
#include "json.h"

#include <math.h>
#include <stdint.h>

/* correctly rounded powers of ten, as C's decimal constants are */
static const double pow10_tab[309] = {
    1e000, 1e001, 1e002, 1e003, 1e004, 1e005, 1e006, 1e007, 1e008, 1e009,
    1e010, 1e011, 1e012, 1e013, 1e014, 1e015, 1e016, 1e017, 1e018, 1e019,
    1e020, 1e021, 1e022, 1e023, 1e024, 1e025, 1e026, 1e027, 1e028, 1e029,
    1e030, 1e031, 1e032, 1e033, 1e034, 1e035, 1e036, 1e037, 1e038, 1e039,
    1e040, 1e041, 1e042, 1e043, 1e044, 1e045, 1e046, 1e047, 1e048, 1e049,
    1e050, 1e051, 1e052, 1e053, 1e054, 1e055, 1e056, 1e057, 1e058, 1e059,
    1e060, 1e061, 1e062, 1e063, 1e064, 1e065, 1e066, 1e067, 1e068, 1e069,
    1e070, 1e071, 1e072, 1e073, 1e074, 1e075, 1e076, 1e077, 1e078, 1e079,
    1e080, 1e081, 1e082, 1e083, 1e084, 1e085, 1e086, 1e087, 1e088, 1e089,
    1e090, 1e091, 1e092, 1e093, 1e094, 1e095, 1e096, 1e097, 1e098, 1e099,
    1e100, 1e101, 1e102, 1e103, 1e104, 1e105, 1e106, 1e107, 1e108, 1e109,
    1e110, 1e111, 1e112, 1e113, 1e114, 1e115, 1e116, 1e117, 1e118, 1e119,
    1e120, 1e121, 1e122, 1e123, 1e124, 1e125, 1e126, 1e127, 1e128, 1e129,
    1e130, 1e131, 1e132, 1e133, 1e134, 1e135, 1e136, 1e137, 1e138, 1e139,
    1e140, 1e141, 1e142, 1e143, 1e144, 1e145, 1e146, 1e147, 1e148, 1e149,
    1e150, 1e151, 1e152, 1e153, 1e154, 1e155, 1e156, 1e157, 1e158, 1e159,
    1e160, 1e161, 1e162, 1e163, 1e164, 1e165, 1e166, 1e167, 1e168, 1e169,
    1e170, 1e171, 1e172, 1e173, 1e174, 1e175, 1e176, 1e177, 1e178, 1e179,
    1e180, 1e181, 1e182, 1e183, 1e184, 1e185, 1e186, 1e187, 1e188, 1e189,
    1e190, 1e191, 1e192, 1e193, 1e194, 1e195, 1e196, 1e197, 1e198, 1e199,
    1e200, 1e201, 1e202, 1e203, 1e204, 1e205, 1e206, 1e207, 1e208, 1e209,
    1e210, 1e211, 1e212, 1e213, 1e214, 1e215, 1e216, 1e217, 1e218, 1e219,
    1e220, 1e221, 1e222, 1e223, 1e224, 1e225, 1e226, 1e227, 1e228, 1e229,
    1e230, 1e231, 1e232, 1e233, 1e234, 1e235, 1e236, 1e237, 1e238, 1e239,
    1e240, 1e241, 1e242, 1e243, 1e244, 1e245, 1e246, 1e247, 1e248, 1e249,
    1e250, 1e251, 1e252, 1e253, 1e254, 1e255, 1e256, 1e257, 1e258, 1e259,
    1e260, 1e261, 1e262, 1e263, 1e264, 1e265, 1e266, 1e267, 1e268, 1e269,
    1e270, 1e271, 1e272, 1e273, 1e274, 1e275, 1e276, 1e277, 1e278, 1e279,
    1e280, 1e281, 1e282, 1e283, 1e284, 1e285, 1e286, 1e287, 1e288, 1e289,
    1e290, 1e291, 1e292, 1e293, 1e294, 1e295, 1e296, 1e297, 1e298, 1e299,
    1e300, 1e301, 1e302, 1e303, 1e304, 1e305, 1e306, 1e307, 1e308,
};

static int digit(char c) { return c >= '0' && c <= '9'; }

/* would s * 10 + d pass the u64 range (serde_json's test, digit by digit) */
static int over(uint64_t s, int d)
{
    return s >= UINT64_MAX / 10 && (s > UINT64_MAX / 10 || (uint64_t)d > UINT64_MAX % 10);
}

double tq_json_serde_num(const char *t)
{
    int neg = *t == '-';
    t += neg;
    uint64_t sig = 0;
    int64_t e10 = 0; /* an i32 in serde_json; kept in its range below */
    for (; digit(*t); t++) {
        if (over(sig, *t - '0')) {
            for (; digit(*t); t++)
                e10++; /* integer digits past the u64: dropped, scale kept */
            break;
        }
        sig = sig * 10 + (uint64_t)(*t - '0');
    }
    if (*t == '.') {
        for (t++; digit(*t); t++) {
            if (over(sig, *t - '0')) {
                while (digit(*t))
                    t++; /* fraction digits past the u64: dropped */
                break;
            }
            sig = sig * 10 + (uint64_t)(*t - '0');
            e10--;
        }
    }
    if (*t == 'e' || *t == 'E') {
        t++;
        int eneg = *t == '-';
        t += *t == '-' || *t == '+';
        int64_t x = 0;
        for (; digit(*t); t++) {
            x = x * 10 + (*t - '0');
            if (x > INT32_MAX) /* serde_json: +-inf is an error, else +-0 */
                return (sig && !eneg ? HUGE_VAL : 0.0) * (neg ? -1 : 1);
        }
        e10 = eneg ? e10 - x : e10 + x;
        if (e10 > INT32_MAX)
            e10 = INT32_MAX;
        if (e10 < INT32_MIN)
            e10 = INT32_MIN;
    }
    double f = (double)sig; /* the first rounding, round to nearest */
    for (;;) {
        int64_t a = e10 < 0 ? -e10 : e10;
        if (a <= 308) {
            f = e10 >= 0 ? f * pow10_tab[a] : f / pow10_tab[a]; /* the second */
            break;
        }
        if (f == 0)
            break;
        if (e10 > 0) { /* serde_json refuses a number past the doubles */
            f = HUGE_VAL;
            break;
        }
        f /= 1e308;
        e10 += 308;
    }
    return neg ? -f : f;
}
