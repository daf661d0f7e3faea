/* gpu_nodes.c: can this machine have a Vulkan GPU at all? `auto` never takes
 * a CPU-type device, yet finding that out means loading every installed
 * driver (lavapipe brings LLVM: about 60 MB of memory and 40 ms at each
 * start of a tool). On Linux every GPU driver works through a device node, so
 * without one auto skips Vulkan unloaded. Elsewhere (MoltenVK on macOS) the
 * answer is always maybe. Naming Vulkan (--device vulkan) never asks this. */
#include "vk.h"

#ifdef __linux__
#include <dirent.h>
#include <unistd.h>

/* DRM render nodes (Mesa's drivers: AMD, Intel, ARM, virtual GPUs) */
static int have_render_node(void)
{
    DIR *d = opendir("/dev/dri");
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)))
        found = !strncmp(e->d_name, "renderD", 7);
    closedir(d);
    return found;
}

int tq_vk_may_have_gpu(void)
{
    /* NVIDIA's own driver, and WSL's GPU passthrough */
    return have_render_node() || access("/dev/nvidiactl", F_OK) == 0 ||
           access("/dev/nvidia0", F_OK) == 0 || access("/dev/dxg", F_OK) == 0;
}
#else
int tq_vk_may_have_gpu(void)
{
    return 1;
}
#endif
