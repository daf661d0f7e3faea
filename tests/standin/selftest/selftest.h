/* selftest.h: the small harness of the stand-in's self-tests: checks that
 * print "ok NAME" or "not ok NAME: why" and the count run-unit.sh reads, and
 * helpers to run a self-test kernel through the CUDA or the HIP entry points. */
#ifndef TQ_SELFTEST_H
#define TQ_SELFTEST_H

#include <stddef.h>

#include "abi.h"

extern int st_pass, st_fail;
/* Records one check; returns cond. */
int st_check(int cond, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

enum { ST_CUDA, ST_HIP };
/* Makes a context current (CUDA) and loads the module of both APIs. */
void st_setup(void);
/* The function `name` for an API. */
void *st_func(int api, const char *name);
/* A launch through cuLaunchKernel or hipModuleLaunchKernel on the null
 * stream, with kernelParams; returns the API's code. */
int st_launch(int api, const char *name, unsigned gx, unsigned gy, unsigned bx, unsigned by,
              unsigned shared, void **params);
int st_sync(int api);
void *st_alloc(size_t bytes);
void st_free(void *p);
void st_upload(void *dst, const void *src, size_t n);
void st_download(void *dst, const void *src, size_t n);
void st_setseed(unsigned long long seed);
/* The stand-in's own (fault.c): clears a sticky error a test caused. */
void tq_standin_clear_sticky(void);
/* The stand-in's own (counts.c): its counters of the work, in the order of
 * the TQ_STANDIN_COUNTS line. */
void tq_standin_counts(unsigned long long *out, int n);

void st_kernels(void);  /* selftest_kernels.c */
void st_api(void);      /* selftest_api.c */
void st_blas(void);     /* selftest_blas.c */
void st_counts(void);   /* selftest_counts.c */

#endif
