/* The CUDA driver, loaded at run time: dlopen("libcuda.so.1"), then cuGetProcAddress for
 * every entry point. The library never links libcuda, so it loads, compiles and caches on a
 * machine with no driver; only launches need one. The table is filled once per process and
 * never changes afterwards. */
#ifndef JITOPS_RUNTIME_DRIVER_H
#define JITOPS_RUNTIME_DRIVER_H

#include <cuda.h>

#include "jitops/jitops.h"

typedef struct jitops__driver {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext *);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuFuncGetAttribute)(int *, CUfunction_attribute, CUfunction);
  /* CUDA 12.4 and newer; NULL with an older driver (jitops_kernel_param_info says so). */
  CUresult (*cuFuncGetParamInfo)(CUfunction, size_t, size_t *, size_t *);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
  CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuMemPoolCreate)(CUmemoryPool *, const CUmemPoolProps *);
  CUresult (*cuMemPoolDestroy)(CUmemoryPool);
  CUresult (*cuMemPoolSetAttribute)(CUmemoryPool, CUmemPool_attribute, void *);
  CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
  CUresult (*cuMemGetInfo)(size_t *, size_t *);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
  CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
  /* The CUDA 12.0 signature (_v2), as resolved at DRIVER_ABI_VERSION. */
  CUresult (*cuStreamGetCaptureInfo)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                                     const CUgraphNode **, size_t *);
  CUresult (*cuStreamGetCtx)(CUstream, CUcontext *);
  CUresult (*cuThreadExchangeStreamCaptureMode)(CUstreamCaptureMode *);
  CUresult (*cuEventCreate)(CUevent *, unsigned int);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
  CUresult (*cuPointerGetAttributes)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuGetErrorName)(CUresult, const char **);
} jitops__driver;

/* The process's driver table, loading it on first use. JITOPS_ERR_NO_DEVICE, with the reason
 * in the last error, when there is no usable driver. */
jitops_status jitops__driver_get(const jitops__driver **out);

/* Turns a failed driver call into JITOPS_ERR_DRIVER (or OUT_OF_MEMORY / NO_DEVICE where that
 * is what the driver means) with "what: CUDA_ERROR_X (text)". */
jitops_status jitops__driver_fail(const jitops__driver *driver, CUresult result, const char *what);

#endif
