/* fiber-bench.c: the cost of one fiber switch, measured by ping-pong between
 * two fibers (make standin-bench builds it with the x86-64 switch and with
 * ucontext, to compare). A figure for the README, not a test. */
#include "fiber.h"

#include <stdio.h>
#include <time.h>

static struct tq_fiber main_fiber, other;

static void ping(void *arg)
{
    (void)arg;
    for (;;)
        tq_fiber_switch(&other, &main_fiber);
}

int main(void)
{
    struct timespec t0, t1;
    const int n = 2000000;
    if (tq_fiber_create(&other, 64 << 10, ping, NULL))
        return 1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++)
        tq_fiber_switch(&main_fiber, &other);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
#ifdef TQ_FIBER_UCONTEXT
    const char *kind = "ucontext";
#else
    const char *kind = "x86-64 switch";
#endif
    printf("%s: %.1f ns a switch\n", kind, s / (2.0 * n) * 1e9);
    tq_fiber_destroy(&other);
    return 0;
}
