/* test_json.c: the strict JSON reader (lib/io/json.c) on values whose parse is
 * known by hand (escapes, surrogate pairs, numbers, nesting) and on malformed
 * text, which must fail with TQ_ERR_DATA and the byte offset; and numbers as
 * the tokenizers library reads them (tq_json_serde_num), its values taken
 * from the library (tokenizers 0.23.3: a Unigram vocab with these scores
 * loaded and saved again). */
#include "check.h"
#include "io/json.h"

#include <math.h>
#include <string.h>

static tq_json *parse(const char *s)
{
    tq_json *v = NULL;
    return tq_json_parse(s, strlen(s), &v) ? NULL : v;
}

static void bad(const char *s, const char *why)
{
    tq_json *v = NULL;
    tq_status st = tq_json_parse(s, strlen(s), &v);
    CHECK(st == TQ_ERR_DATA && strstr(tq_errmsg(), why), "<%s>: status %d, \"%s\", want \"%s\"",
          s, st, tq_errmsg(), why);
    if (!st)
        tq_json_free(v);
}

/* number text, and the double the library holds for it (the C constant is
 * the shortest text of that double, as the library saved it) */
static const struct { const char *text; double lib; } serde_cases[] = {
    {"-7.4503589532209045", -7.450358953220904}, /* one ulp from the nearest */
    {"-7.5122200371530585", -7.512220037153059},
    {"-2.2250738585072011e-308", -2.2250738585072014e-308},
    {"-0.000000000000000000000000000001234567890123456789", -1.2345678901234567e-30},
    {"-0.1", -0.1},
    {"-12.345678901234567", -12.345678901234567},
    {"-8.000000000000001", -8.000000000000002},
    {"-1.8446744073709551615e1", -18.446744073709553}, /* 20 digits, all in the u64 */
    {"-18446744073709551616", -1.8446744073709552e+19}, /* one past it */
    {"-184467440737095516150.5", -1.844674407370955e+20},
    {"-1844674407370955161.7", -1.8446744073709553e+18},
    {"-123456789012345678901234567890", -1.2345678901234568e+29},
    {"-9.999999999999999999999e-1", -1.0},
    {"-1e-320", -1e-320},
    {"-4.9e-324", -5e-324},
    {"-1.7976931348623157e308", -1.7976931348623157e308},
    {"-1E+2", -100.0},
    {"-5e-0", -5.0},
    {"3", 3.0},
};

int main(void)
{
    for (size_t i = 0; i < sizeof serde_cases / sizeof *serde_cases; i++)
        CHECK(tq_json_serde_num(serde_cases[i].text) == serde_cases[i].lib,
              "%s as the library reads it: %.17g, want %.17g", serde_cases[i].text,
              tq_json_serde_num(serde_cases[i].text), serde_cases[i].lib);
    CHECK(signbit(tq_json_serde_num("-1e-400")) && tq_json_serde_num("-1e-400") == 0 &&
              tq_json_serde_num("-0.0") == 0 && signbit(tq_json_serde_num("-0.0")),
          "underflow and -0: -0");
    tq_json *sv = parse("[-7.4503589532209045]");
    CHECK(sv && sv->items[0].num == -7.4503589532209045 &&
              sv->items[0].num_serde == -7.450358953220904,
          "the parse keeps both readings");
    tq_json_free(sv);

    tq_json *v = parse(" {\"a\": [1, -2.5e2, 0.125, true, false, null], \"b\": {\"c\": \"x\"},"
                       " \"a\": 7} ");
    CHECK(v && v->type == TQ_JSON_OBJ && v->n == 3, "object of 3 members");
    if (v) {
        const tq_json *a = tq_json_get(v, "a"), *b = tq_json_get(v, "b");
        CHECK(a && a->type == TQ_JSON_NUM && a->num == 7, "a repeated key: the last one wins");
        const tq_json *arr = &v->items[0];
        CHECK(arr->type == TQ_JSON_ARR && arr->n == 6, "array of 6");
        CHECK(arr->items[0].num == 1 && arr->items[1].num == -250 && arr->items[2].num == 0.125,
              "numbers");
        CHECK(arr->items[3].type == TQ_JSON_BOOL && arr->items[3].b == 1 &&
                  arr->items[4].b == 0 && arr->items[5].type == TQ_JSON_NULL,
              "literals");
        const tq_json *c = tq_json_get(b, "c");
        CHECK(c && c->type == TQ_JSON_STR && !strcmp(c->str, "x"), "nested string");
        CHECK(!tq_json_get(v, "zz") && !tq_json_get(arr, "a"), "absent keys, non-objects");
    }
    tq_json_free(v);

    /* \u00e9 = é (C3 A9), \ud83d\ude00 = U+1F600 (F0 9F 98 80), \u0000 kept */
    v = parse("\"q\\\"b\\\\s\\/n\\nt\\t\\u00e9\\ud83d\\ude00\\u0000z\"");
    const char want[] = "q\"b\\s/n\nt\t\xc3\xa9\xf0\x9f\x98\x80\0z";
    CHECK(v && v->type == TQ_JSON_STR && v->len == sizeof want - 1 &&
              !memcmp(v->str, want, sizeof want - 1),
          "escapes decoded");
    tq_json_free(v);
    v = parse("[[], {}, [[[]]]]");
    CHECK(v && v->n == 3 && v->items[0].n == 0 && v->items[1].type == TQ_JSON_OBJ, "empties");
    tq_json_free(v);

    bad("", "unexpected end");
    bad("{\"a\": 1,}", "expected a string key");
    bad("[1, 2", "expected ',' or ']'");
    bad("{\"a\" 1}", "expected ':'");
    bad("01", "text after the value");
    bad("1.", "bad number");
    bad("-", "bad number");
    bad("1e", "bad number");
    bad("1e999", "out of range");
    bad("NaN", "bad number");
    bad("\"abc", "unterminated string");
    bad("\"a\\x\"", "bad escape");
    bad("\"\\u12g4\"", "bad \\u escape");
    bad("\"\\ud83d\"", "unpaired surrogate");
    bad("\"\\ude00\"", "unpaired surrogate");
    bad("\"tab\there\"", "control character");
    bad("tru", "unexpected character");
    bad("{} {}", "text after the value");
    char deep[200];
    memset(deep, '[', sizeof deep - 1);
    deep[sizeof deep - 1] = 0;
    bad(deep, "nested too deeply");
    bad("[1, 2, x]", "byte 7");
    return CHECK_DONE();
}
