/* test_crc.c: CRC-32C (tq-format.5) against published check values and a
 * bitwise reference written here, for every implementation path the CPU has,
 * every length up to 300 at every alignment, large buffers and split input. */
#include "internal.h"
#include "check.h"

#include <stdlib.h>

/* The definition itself, one bit at a time: reflected polynomial 0x82F63B78,
 * register starting at and finished with 0xFFFFFFFF. */
static uint32_t ref_crc(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
    }
    return ~crc;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static void fill_random(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)next_rand();
}

static const char *path_name[3] = {"table", "crc32 instruction", "carry-less folding"};

static void check_values(void)
{
    /* the check value of the CRC catalogue, and RFC 3720 (iSCSI) B.4 */
    CHECK(tq_crc32c(0, "123456789", 9) == 0xe3069283u, "check value %08x",
          tq_crc32c(0, "123456789", 9));
    unsigned char b[32];
    memset(b, 0, sizeof b);
    uint32_t want[4] = {0x8a9136aau, 0x62a8ab43u, 0x46dd794eu, 0x113fdb5cu};
    for (int path = 0; path < 3; path++) {
        memset(b, 0, 32);
        CHECK(tq_crc32c_path(path, 0, b, 32) == want[0], "%s: 32 zeros", path_name[path]);
        memset(b, 0xff, 32);
        CHECK(tq_crc32c_path(path, 0, b, 32) == want[1], "%s: 32 0xff", path_name[path]);
        for (int i = 0; i < 32; i++)
            b[i] = (unsigned char)i;
        CHECK(tq_crc32c_path(path, 0, b, 32) == want[2], "%s: 0..31", path_name[path]);
        for (int i = 0; i < 32; i++)
            b[i] = (unsigned char)(31 - i);
        CHECK(tq_crc32c_path(path, 0, b, 32) == want[3], "%s: 31..0", path_name[path]);
        CHECK(tq_crc32c_path(path, 0, "123456789", 9) == 0xe3069283u, "%s: 123456789",
              path_name[path]);
        CHECK(tq_crc32c_path(path, 0, NULL, 0) == 0, "%s: empty", path_name[path]);
        CHECK(tq_crc32c_path(path, 0x12345678u, "", 0) == 0x12345678u,
              "%s: empty input keeps the CRC", path_name[path]);
    }
    /* the reference itself must agree with the published values */
    CHECK(ref_crc(0, (const unsigned char *)"123456789", 9) == 0xe3069283u, "reference");
}

/* Every path equals the reference: lengths 0..300 at alignments 0..15 and
 * beyond, from random starting CRCs. */
static void check_lengths(const unsigned char *buf)
{
    for (int path = 0; path < 3; path++) {
        int bad = 0;
        for (size_t len = 0; len <= 300; len++)
            for (size_t al = 0; al < 16; al++) {
                uint32_t start = next_rand();
                if (tq_crc32c_path(path, start, buf + al, len) != ref_crc(start, buf + al, len))
                    bad++;
            }
        /* the folding path starts at 512 bytes: every length up to 4200 */
        for (size_t len = 301; len <= 4200; len++) {
            size_t al = len % 16;
            if (tq_crc32c_path(path, 7, buf + al, len) != ref_crc(7, buf + al, len))
                bad++;
        }
        CHECK(bad == 0, "%s: %d lengths or alignments differ from the reference",
              path_name[path], bad);
    }
}

/* Large buffers: across the 3 x 8192-byte lanes of the crc32 path and the
 * 256-byte blocks of the folding path, up to 16 MiB. */
static void check_large(void)
{
    size_t max = (16u << 20) + 64;
    unsigned char *big = malloc(max);
    if (!big) {
        CHECK(0, "out of memory");
        return;
    }
    fill_random(big, max);
    const size_t lens[] = {3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 6 * 8192 + 7, 9 * 8192 + 8,
                           65536, 100003, (1u << 20) + 13, (16u << 20) + 5};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        uint32_t want = ref_crc(0, big + 3, lens[i]);
        for (int path = 0; path < 3; path++)
            CHECK(tq_crc32c_path(path, 0, big + 3, lens[i]) == want, "%s: %zu bytes",
                  path_name[path], lens[i]);
        CHECK(tq_crc32c(0, big + 3, lens[i]) == want, "tq_crc32c: %zu bytes", lens[i]);
    }
    /* tq_crc32c cuts 4 MiB and more into 1 MiB chunks on the worker pool:
     * the same CRC on 1 and 2 threads, from a CRC carried in, with a tail */
    const size_t plens[] = {(4u << 20) - 1, 4u << 20, (5u << 20) + 13, (16u << 20) + 5};
    for (int threads = 1; threads <= 2; threads++) {
        tq_threads_set(threads);
        for (size_t i = 0; i < sizeof plens / sizeof *plens; i++) {
            uint32_t want = ref_crc(0x1234567u, big + 1, plens[i]);
            CHECK(tq_crc32c(0x1234567u, big + 1, plens[i]) == want,
                  "tq_crc32c on %d threads: %zu bytes from a CRC carried in", threads, plens[i]);
        }
    }
    tq_threads_set(0);
    /* all zeros and all ones: lanes whose partial CRCs cancel differently */
    memset(big, 0, 100000);
    CHECK(tq_crc32c(0, big, 100000) == ref_crc(0, big, 100000), "100000 zeros");
    memset(big, 0xff, 100000);
    CHECK(tq_crc32c(0, big, 100000) == ref_crc(0, big, 100000), "100000 0xff");
    free(big);
}

/* crc(crc(a), b) == crc(ab): payloads are checked piece by piece. */
static void check_split(const unsigned char *buf)
{
    uint32_t whole = ref_crc(0, buf, 1000);
    int bad = 0;
    for (size_t cut = 0; cut <= 1000; cut++)
        for (int path = 0; path < 3; path++) {
            uint32_t c = tq_crc32c_path(path, 0, buf, cut);
            if (tq_crc32c_path(path, c, buf + cut, 1000 - cut) != whole)
                bad++;
        }
    CHECK(bad == 0, "%d split points of 1000 bytes give another CRC", bad);
    /* many random pieces of a 3 MB buffer */
    size_t n = 3000000;
    unsigned char *big = malloc(n);
    if (!big) {
        CHECK(0, "out of memory");
        return;
    }
    fill_random(big, n);
    uint32_t want = ref_crc(0, big, n), c = 0;
    for (size_t at = 0; at < n;) {
        size_t k = next_rand() % 70000;
        if (k > n - at)
            k = n - at;
        c = tq_crc32c(c, big + at, k);
        at += k;
    }
    CHECK(c == want, "3 MB in random pieces: %08x, want %08x", c, want);
    free(big);
}

int main(void)
{
    static unsigned char buf[4300];
    fill_random(buf, sizeof buf);
    check_values();
    check_lengths(buf);
    check_large();
    check_split(buf);
#if defined(__x86_64__)
    printf("test_crc: crc32 instruction %s, carry-less folding %s\n",
           __builtin_cpu_supports("sse4.2") ? "tested" : "absent (fell back)",
           __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512vl")
               ? "tested" : "absent (fell back)");
#endif
    return CHECK_DONE();
}
