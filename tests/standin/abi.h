/* abi.h: the slice of the CUDA driver, cuBLAS, HIP runtime and rocBLAS ABIs the
 * stand-in exports, written out here so that neither the stand-in nor its tests
 * need the CUDA toolkit or ROCm headers. Values and signatures follow
 * cuda.h / cublas_api.h / library_types.h of CUDA 13.0, hip_runtime_api.h of
 * ROCm 5.2 and rocBLAS's rocblas-types.h / rocblas-functions.h; handles are
 * pointers to the stand-in's own structures (opaque to callers, as in the real
 * libraries). */
#ifndef TQ_STANDIN_ABI_H
#define TQ_STANDIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CUDA driver ---- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct tq_sd_ctx *CUcontext;
typedef struct tq_sd_module *CUmodule;
typedef struct tq_sd_func *CUfunction;
typedef struct tq_sd_stream *CUstream;
typedef struct tq_sd_event *CUevent;
typedef struct tq_sd_graph *CUgraph;
typedef struct tq_sd_graph *CUgraphExec;
typedef struct tq_sd_graph_node *CUgraphNode;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_TIMEOUT = 702,
    CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
    CUDA_ERROR_MISALIGNED_ADDRESS = 716,
    CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
    CUDA_ERROR_INVALID_PC = 718,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
    CUDA_ERROR_UNKNOWN = 999
};

/* CUdevice_attribute values the stand-in answers with a real figure. */
enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
    CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_DEVICE_ATTRIBUTE_MAX = 148 /* CUDA 13.0: one past the last attribute */
};

enum { CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 };
enum { CU_EVENT_DEFAULT = 0, CU_EVENT_BLOCKING_SYNC = 1, CU_EVENT_DISABLE_TIMING = 2 };
enum { CU_STREAM_CAPTURE_MODE_GLOBAL = 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
       CU_STREAM_CAPTURE_MODE_RELAXED = 2 };
enum { CU_GET_PROC_ADDRESS_SUCCESS = 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
       CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2 };
#define TQ_CU_STREAM_LEGACY ((CUstream)0x1)
#define TQ_CU_STREAM_PER_THREAD ((CUstream)0x2)
/* launch `extra` keys (CU_LAUNCH_PARAM_*) */
#define TQ_CU_LAUNCH_PARAM_END ((void *)0x00)
#define TQ_CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define TQ_CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

CUresult cuInit(unsigned flags);
CUresult cuDriverGetVersion(int *version);
CUresult cuGetErrorName(CUresult err, const char **str);
CUresult cuGetErrorString(CUresult err, const char **str);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, uint64_t flags,
                             int *symbolStatus);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, uint64_t flags);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *ctx);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext *ctx);
CUresult cuCtxSynchronize(void);
CUresult cuStreamCreate(CUstream *stream, unsigned flags);
CUresult cuStreamDestroy_v2(CUstream stream);
CUresult cuStreamSynchronize(CUstream stream);
CUresult cuModuleLoadData(CUmodule *mod, const void *image);
CUresult cuModuleUnload(CUmodule mod);
CUresult cuModuleGetFunction(CUfunction *fn, CUmodule mod, const char *name);
CUresult cuFuncSetAttribute(CUfunction fn, int attrib, int value);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, CUstream stream,
                        void **params, void **extra);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total);
CUresult cuMemAllocHost_v2(void **p, size_t bytes);
CUresult cuMemFreeHost(void *p);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream s);
CUresult cuEventCreate(CUevent *ev, unsigned flags);
CUresult cuEventRecord(CUevent ev, CUstream s);
CUresult cuEventSynchronize(CUevent ev);
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b);
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b);
CUresult cuEventDestroy_v2(CUevent ev);
CUresult cuStreamBeginCapture_v2(CUstream s, int mode);
CUresult cuStreamEndCapture(CUstream s, CUgraph *g);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags);
CUresult cuGraphLaunch(CUgraphExec exec, CUstream s);
CUresult cuGraphExecDestroy(CUgraphExec exec);
CUresult cuGraphDestroy(CUgraph g);

/* ---- cuBLAS ---- */
typedef int cublasStatus_t;
typedef struct tq_sd_blas *cublasHandle_t;
enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1,
       CUBLAS_STATUS_ALLOC_FAILED = 3, CUBLAS_STATUS_INVALID_VALUE = 7,
       CUBLAS_STATUS_EXECUTION_FAILED = 13, CUBLAS_STATUS_NOT_SUPPORTED = 15 };
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_PEDANTIC = 69,
       CUBLAS_COMPUTE_32F_FAST_16F = 74, CUBLAS_COMPUTE_32F_FAST_16BF = 75,
       CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
#define TQ_CUBLAS_VERSION 130100 /* what cublasGetVersion reports: cuBLAS 13.1.0 */

cublasStatus_t cublasCreate_v2(cublasHandle_t *h);
cublasStatus_t cublasDestroy_v2(cublasHandle_t h);
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, CUstream s);
cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *version);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, int mode);
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B,
                              int ldb, const float *beta, float *C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long sA, const float *B, int ldb, long long sB,
                                         const float *beta, float *C, int ldc, long long sC,
                                         int batch);
cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                            const void *alpha, const void *A, int Atype, int lda, const void *B,
                            int Btype, int ldb, const void *beta, void *C, int Ctype, int ldc,
                            int computeType, int algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                                          const void *alpha, const void *A, int Atype, int lda,
                                          long long sA, const void *B, int Btype, int ldb,
                                          long long sB, const void *beta, void *C, int Ctype,
                                          int ldc, long long sC, int batch, int computeType,
                                          int algo);

/* ---- HIP runtime ---- */
typedef int hipError_t;
typedef int hipDevice_t;
typedef void *hipDeviceptr_t;
typedef struct tq_sd_stream *hipStream_t;
typedef struct tq_sd_module *hipModule_t;
typedef struct tq_sd_func *hipFunction_t;
typedef struct tq_sd_event *hipEvent_t;
typedef struct tq_sd_graph *hipGraph_t;
typedef struct tq_sd_graph *hipGraphExec_t;
typedef struct tq_sd_graph_node *hipGraphNode_t;

/* hipError_t shares the CUDA numbers for every code the stand-in returns. */
enum { hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorOutOfMemory = 2,
       hipErrorNotInitialized = 3, hipErrorNoDevice = 100, hipErrorInvalidDevice = 101,
       hipErrorInvalidImage = 200, hipErrorInvalidHandle = 400, hipErrorNotFound = 500,
       hipErrorNotReady = 600, hipErrorLaunchFailure = 719, hipErrorNotSupported = 801 };

/* hipDeviceAttribute_t (ROCm 5.2; ROCm 6 keeps these numbers) */
enum {
    hipDeviceAttributeClockRate = 5,
    hipDeviceAttributeL2CacheSize = 19,
    hipDeviceAttributeComputeCapabilityMajor = 23,
    hipDeviceAttributeMaxBlockDimX = 26,
    hipDeviceAttributeMaxBlockDimY = 27,
    hipDeviceAttributeMaxBlockDimZ = 28,
    hipDeviceAttributeMaxGridDimX = 29,
    hipDeviceAttributeMaxGridDimY = 30,
    hipDeviceAttributeMaxGridDimZ = 31,
    hipDeviceAttributeMaxThreadsPerBlock = 56,
    hipDeviceAttributeMaxThreadsPerMultiProcessor = 57,
    hipDeviceAttributeComputeCapabilityMinor = 61,
    hipDeviceAttributeMultiprocessorCount = 63,
    hipDeviceAttributeMaxRegistersPerBlock = 71,
    hipDeviceAttributeMaxSharedMemoryPerBlock = 74,
    hipDeviceAttributeSharedMemPerBlockOptin = 75,
    hipDeviceAttributeTotalConstantMemory = 83,
    hipDeviceAttributeTotalGlobalMem = 84,
    hipDeviceAttributeWarpSize = 87,
    hipDeviceAttributeCudaCompatibleEnd = 9999,
    hipDeviceAttributeAmdSpecificBegin = 10000,
    hipDeviceAttributeMaxSharedMemoryPerMultiprocessor = 10002,
    hipDeviceAttributeAmdSpecificEnd = 19999
};
#define TQ_HIP_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define TQ_HIP_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)
#define TQ_HIP_LAUNCH_PARAM_END ((void *)0x03)

/* hipDeviceProp_t: offsets of the fields the stand-in fills, computed with
 * offsetof from the installed ROCm 5.2 header (hipDeviceProp_t, 792 bytes) and
 * from ROCm 6's hipDeviceProp_tR0600 (1472 bytes). */
#define TQ_HIP_PROP_R0000_SIZE 792
#define TQ_HIP_PROP_R0000_NAME 0
#define TQ_HIP_PROP_R0000_TOTALGLOBALMEM 256
#define TQ_HIP_PROP_R0000_WARPSIZE 276
#define TQ_HIP_PROP_R0000_MULTIPROCESSORCOUNT 336
#define TQ_HIP_PROP_R0000_GCNARCHNAME 396
#define TQ_HIP_PROP_R0600_SIZE 1472
#define TQ_HIP_PROP_R0600_NAME 0
#define TQ_HIP_PROP_R0600_TOTALGLOBALMEM 288
#define TQ_HIP_PROP_R0600_WARPSIZE 308
#define TQ_HIP_PROP_R0600_MULTIPROCESSORCOUNT 388
#define TQ_HIP_PROP_R0600_GCNARCHNAME 1160

hipError_t hipInit(unsigned flags);
hipError_t hipDriverGetVersion(int *v);
hipError_t hipRuntimeGetVersion(int *v);
const char *hipGetErrorName(hipError_t e);
const char *hipGetErrorString(hipError_t e);
hipError_t hipGetDeviceCount(int *n);
hipError_t hipDeviceGet(hipDevice_t *dev, int ordinal);
hipError_t hipDeviceGetName(char *name, int len, hipDevice_t dev);
hipError_t hipDeviceGetAttribute(int *v, int attr, int dev);
hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t dev);
hipError_t hipGetDeviceProperties(void *prop, int dev);
hipError_t hipGetDevicePropertiesR0600(void *prop, int dev);
hipError_t hipSetDevice(int dev);
hipError_t hipGetDevice(int *dev);
hipError_t hipDeviceSynchronize(void);
hipError_t hipStreamCreate(hipStream_t *s);
hipError_t hipStreamDestroy(hipStream_t s);
hipError_t hipStreamSynchronize(hipStream_t s);
hipError_t hipModuleLoadData(hipModule_t *m, const void *image);
hipError_t hipModuleUnload(hipModule_t m);
hipError_t hipModuleGetFunction(hipFunction_t *f, hipModule_t m, const char *name);
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz,
                                 unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                 hipStream_t s, void **params, void **extra);
hipError_t hipMalloc(void **p, size_t bytes);
hipError_t hipFree(void *p);
hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total);
hipError_t hipHostMalloc(void **p, size_t bytes, unsigned flags);
hipError_t hipHostFree(void *p);
hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void *src, size_t n);
hipError_t hipMemcpyDtoH(void *dst, hipDeviceptr_t src, size_t n);
hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void *src, size_t n, hipStream_t s);
hipError_t hipMemcpyDtoHAsync(void *dst, hipDeviceptr_t src, size_t n, hipStream_t s);
hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t n, hipStream_t s);
hipError_t hipMemsetAsync(void *dst, int v, size_t n, hipStream_t s);
hipError_t hipMemsetD32Async(hipDeviceptr_t dst, int v, size_t n, hipStream_t s);
hipError_t hipEventCreate(hipEvent_t *ev);
hipError_t hipEventRecord(hipEvent_t ev, hipStream_t s);
hipError_t hipEventSynchronize(hipEvent_t ev);
hipError_t hipEventElapsedTime(float *ms, hipEvent_t a, hipEvent_t b);
hipError_t hipEventDestroy(hipEvent_t ev);
hipError_t hipStreamBeginCapture(hipStream_t s, int mode);
hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t *g);
hipError_t hipGraphInstantiate(hipGraphExec_t *exec, hipGraph_t g, hipGraphNode_t *err_node,
                               char *log, size_t log_size);
hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t *exec, hipGraph_t g,
                                        unsigned long long flags);
hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t s);
hipError_t hipGraphExecDestroy(hipGraphExec_t exec);
hipError_t hipGraphDestroy(hipGraph_t g);

/* ---- rocBLAS ---- */
typedef int rocblas_status;
typedef struct tq_sd_blas *rocblas_handle;
enum { rocblas_status_success = 0, rocblas_status_invalid_handle = 1,
       rocblas_status_not_implemented = 2, rocblas_status_invalid_pointer = 3,
       rocblas_status_invalid_size = 4, rocblas_status_memory_error = 5,
       rocblas_status_internal_error = 6, rocblas_status_invalid_value = 11 };
enum { rocblas_operation_none = 111, rocblas_operation_transpose = 112,
       rocblas_operation_conjugate_transpose = 113 };
enum { rocblas_datatype_f16_r = 150, rocblas_datatype_f32_r = 151,
       rocblas_datatype_f64_r = 152, rocblas_datatype_bf16_r = 168 };
#define TQ_ROCBLAS_VERSION "4.2.0.tq-standin" /* what rocblas_get_version_string says */

rocblas_status rocblas_create_handle(rocblas_handle *h);
rocblas_status rocblas_destroy_handle(rocblas_handle h);
rocblas_status rocblas_set_stream(rocblas_handle h, hipStream_t s);
rocblas_status rocblas_get_version_string(char *buf, size_t len);
rocblas_status rocblas_sgemm(rocblas_handle h, int ta, int tb, int m, int n, int k,
                             const float *alpha, const float *A, int lda, const float *B, int ldb,
                             const float *beta, float *C, int ldc);
rocblas_status rocblas_sgemm_strided_batched(rocblas_handle h, int ta, int tb, int m, int n,
                                             int k, const float *alpha, const float *A, int lda,
                                             int64_t sA, const float *B, int ldb, int64_t sB,
                                             const float *beta, float *C, int ldc, int64_t sC,
                                             int batch);
rocblas_status rocblas_gemm_ex(rocblas_handle h, int ta, int tb, int m, int n, int k,
                               const void *alpha, const void *A, int Atype, int lda,
                               const void *B, int Btype, int ldb, const void *beta,
                               const void *C, int Ctype, int ldc, void *D, int Dtype, int ldd,
                               int computeType, int algo, int32_t solution, uint32_t flags);
rocblas_status rocblas_gemm_strided_batched_ex(
    rocblas_handle h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
    int Atype, int lda, int64_t sA, const void *B, int Btype, int ldb, int64_t sB,
    const void *beta, const void *C, int Ctype, int ldc, int64_t sC, void *D, int Dtype, int ldd,
    int64_t sD, int batch, int computeType, int algo, int32_t solution, uint32_t flags);

#ifdef __cplusplus
}
#endif
#endif
