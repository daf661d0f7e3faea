/* dl.c: finding a runtime or BLAS library by dlopen, for api_cuda.c and
 * api_hip.c alike. */
#include "gpu.h"

#include <dlfcn.h>

void *TQ_GPU(dlopen_first)(const char *env, const char *const *names, size_t n, char *why,
                           size_t why_n)
{
    const char *path = getenv(env);
    void *lib = NULL;
    if (path && *path) /* named: that file or nothing */
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; !lib && !(path && *path) && i < n; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    *why = 0;
    if (!lib) {
        /* a library that is there but fails to load says why (a missing
         * dependency, an architecture mismatch): that is worth reading */
        const char *e = dlerror();
        if (e && !strstr(e, "cannot open shared object file"))
            snprintf(why, why_n, "%s", e);
    }
    return lib;
}
