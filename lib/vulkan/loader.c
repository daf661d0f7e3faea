/* loader.c: finds the Vulkan loader at run time (dlopen, never linked, so the
 * tools start where it is absent) and makes instances, telling apart the
 * three ways Vulkan can be missing: no loader, no driver, no device. */
#include "vk.h"

#include <dlfcn.h>
#include <pthread.h>

static void *lib;
static PFN_vkGetInstanceProcAddr get_proc;
static char lib_error[256];
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

/* The loader's soname; TQ_VULKAN_LOADER names another file (a loader in an
 * odd place, or a path that does not exist to see how tq behaves without). */
static void lib_open(void)
{
    const char *name = getenv("TQ_VULKAN_LOADER");
    if (!name || !*name)
        name = "libvulkan.so.1";
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(lib_error, sizeof lib_error, "no Vulkan loader (%s)", e ? e : name);
        return;
    }
    get_proc = (PFN_vkGetInstanceProcAddr)(uintptr_t)dlsym(lib, "vkGetInstanceProcAddr");
    if (!get_proc) {
        snprintf(lib_error, sizeof lib_error, "%s has no vkGetInstanceProcAddr", name);
        /* the handle stays open: closing would only matter at exit */
    }
}

const char *tq_vk_result_name(VkResult r)
{
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "out of host memory";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "out of device memory";
    case VK_ERROR_INITIALIZATION_FAILED: return "initialization failed";
    case VK_ERROR_DEVICE_LOST: return "device lost";
    case VK_ERROR_MEMORY_MAP_FAILED: return "memory map failed";
    case VK_ERROR_LAYER_NOT_PRESENT: return "layer not present";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "extension not present";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "feature not present";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "incompatible driver";
    case VK_ERROR_TOO_MANY_OBJECTS: return "too many objects";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "format not supported";
    default: return "error";
    }
}

tq_status tq_vk_fail(VkResult r, const char *what)
{
    tq_status st = r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY
                       ? TQ_ERR_NOMEM
                       : TQ_ERR_RUNTIME;
    return tq_fail(st, "vulkan: %s: %s (%d)", what, tq_vk_result_name(r), (int)r);
}

/* Whether the loader offers an instance extension. */
static int has_instance_ext(const char *name)
{
    PFN_vkEnumerateInstanceExtensionProperties enum_ext =
        (PFN_vkEnumerateInstanceExtensionProperties)get_proc(NULL, "vkEnumerateInstanceExtensionProperties");
    uint32_t n = 0;
    if (!enum_ext || enum_ext(NULL, &n, NULL) != VK_SUCCESS || !n)
        return 0;
    VkExtensionProperties *p = calloc(n, sizeof *p);
    int found = 0;
    if (p && enum_ext(NULL, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = !strcmp(p[i].extensionName, name);
    free(p);
    return found;
}

static tq_status instance_make(tq_vk_instance *vi)
{
    memset(vi, 0, sizeof *vi);
    pthread_once(&lib_once, lib_open);
    if (!get_proc)
        return tq_fail(TQ_ERR_RUNTIME, "%s", lib_error);
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)get_proc(NULL, "vkCreateInstance");
    PFN_vkEnumerateInstanceVersion version =
        (PFN_vkEnumerateInstanceVersion)get_proc(NULL, "vkEnumerateInstanceVersion");
    if (!create)
        return tq_fail(TQ_ERR_RUNTIME, "the Vulkan loader has no vkCreateInstance");
    uint32_t api = VK_API_VERSION_1_0;
    if (version && version(&api) != VK_SUCCESS)
        api = VK_API_VERSION_1_0;
    /* 1.1 brings the subgroup and 16-bit storage queries; ask for no more */
    if (api > VK_API_VERSION_1_2)
        api = VK_API_VERSION_1_2;
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "tq",
        .applicationVersion = 1,
        .pEngineName = "libtq",
        .apiVersion = api,
    };
    /* MoltenVK (macOS) lists its devices only to instances that accept
     * portability drivers */
    const char *exts[1];
    uint32_t n_ext = 0;
    VkInstanceCreateFlags flags = 0;
    if (has_instance_ext("VK_KHR_portability_enumeration")) {
        exts[n_ext++] = "VK_KHR_portability_enumeration";
        flags |= 0x00000001; /* VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR */
    }
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = exts,
    };
    VkResult r = create(&ci, NULL, &vi->inst);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        return tq_fail(TQ_ERR_RUNTIME,
                       "no Vulkan driver (the loader found no usable ICD; see VK_ICD_FILENAMES)");
    if (r != VK_SUCCESS)
        return tq_vk_fail(r, "vkCreateInstance");
#define TQ_VK_LOAD(f)                                                              \
    vi->fn.f = (PFN_##f)get_proc(vi->inst, #f);                                    \
    if (!vi->fn.f && strcmp(#f, "vkGetPhysicalDeviceProperties2") &&               \
        strcmp(#f, "vkGetPhysicalDeviceFeatures2")) {                              \
        vi->fn.vkDestroyInstance ? vi->fn.vkDestroyInstance(vi->inst, NULL) : (void)0; \
        vi->inst = VK_NULL_HANDLE;                                                 \
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: the loader lacks %s", #f);        \
    }
    TQ_VK_INSTANCE_FNS(TQ_VK_LOAD)
#undef TQ_VK_LOAD
    if (api < VK_API_VERSION_1_1) { /* the 1.1 entries may exist yet be unusable */
        vi->fn.vkGetPhysicalDeviceProperties2 = NULL;
        vi->fn.vkGetPhysicalDeviceFeatures2 = NULL;
    }
    return TQ_OK;
}

/* One instance for the process, made on first use and never destroyed.
 * Destroying the last instance makes the loader unload the driver, and
 * drivers keep state in globals that is lost then (lavapipe leaks a little at
 * each unload, which LeakSanitizer reports once the module is gone); making
 * one also costs a driver start (LLVM's, on lavapipe) that --list-devices and
 * the device opens of one process should pay once. A failure is remembered
 * and reported again to each caller. */
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static int shared_tried;
static tq_status shared_status;
static char shared_error[512];
static tq_vk_instance shared;

tq_status tq_vk_instance_create(tq_vk_instance *vi)
{
    pthread_mutex_lock(&shared_lock);
    if (!shared_tried) {
        shared_tried = 1;
        shared_status = instance_make(&shared);
        if (shared_status)
            snprintf(shared_error, sizeof shared_error, "%s", tq_errmsg());
    }
    tq_status st = shared_status;
    *vi = shared;
    pthread_mutex_unlock(&shared_lock);
    return st ? tq_fail(st, "%s", shared_error) : TQ_OK;
}

/* The instance is shared (see above): a caller lets go of its copy. */
void tq_vk_instance_destroy(tq_vk_instance *vi)
{
    vi->inst = VK_NULL_HANDLE;
}
