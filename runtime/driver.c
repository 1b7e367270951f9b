#include "runtime/driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "common/error.h"
#include "common/log.h"

/* The ABI version we ask cuGetProcAddress for: every entry point in the table has had its
 * current signature since CUDA 12.0, so any driver from 12.0 on serves it. */
enum { DRIVER_ABI_VERSION = 12000 };

typedef CUresult (*get_proc_address_fn)(const char *, void **, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult *);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static jitops__driver table;
static jitops_status load_status = JITOPS_ERR_NO_DEVICE;
static char load_message[512];

static int resolve(get_proc_address_fn get, const char *symbol, void **slot) {
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (get(symbol, slot, DRIVER_ABI_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
      found != CU_GET_PROC_ADDRESS_SUCCESS || *slot == NULL) {
    snprintf(load_message, sizeof load_message,
             "the CUDA driver lacks %s (a driver for CUDA 12.0 or newer is needed)", symbol);
    return 0;
  }
  return 1;
}

/* An entry point newer than the driver the library requires, asked for at the CUDA version
 * that introduced it (`since`, 12040 for 12.4): NULL where the driver lacks it. */
static void resolve_optional(get_proc_address_fn get, const char *symbol, int since, void **slot) {
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (get(symbol, slot, since, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
      found != CU_GET_PROC_ADDRESS_SUCCESS)
    *slot = NULL;
}

#define RESOLVE(name)                                                                              \
  if (!resolve(get, #name, (void **)&table.name))                                                  \
    return;

static void load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    snprintf(load_message, sizeof load_message,
             "no CUDA driver: libcuda.so.1 could not be loaded (%s)", dlerror());
    return;
  }
  get_proc_address_fn get = (get_proc_address_fn)dlsym(lib, "cuGetProcAddress_v2");
  if (get == NULL) {
    snprintf(load_message, sizeof load_message,
             "the CUDA driver is too old: it has no cuGetProcAddress_v2 (CUDA 12.0 or newer "
             "is needed)");
    return;
  }
  RESOLVE(cuInit)
  RESOLVE(cuDriverGetVersion)
  RESOLVE(cuDeviceGetCount)
  RESOLVE(cuDeviceGet)
  RESOLVE(cuDeviceGetName)
  RESOLVE(cuDeviceGetAttribute)
  RESOLVE(cuDevicePrimaryCtxRetain)
  RESOLVE(cuDevicePrimaryCtxRelease)
  RESOLVE(cuCtxGetCurrent)
  RESOLVE(cuCtxPushCurrent)
  RESOLVE(cuCtxPopCurrent)
  RESOLVE(cuModuleLoadData)
  RESOLVE(cuModuleUnload)
  RESOLVE(cuModuleGetFunction)
  RESOLVE(cuFuncSetAttribute)
  RESOLVE(cuFuncGetAttribute)
  RESOLVE(cuLaunchKernel)
  RESOLVE(cuLaunchKernelEx)
  RESOLVE(cuMemAllocAsync)
  RESOLVE(cuMemFreeAsync)
  RESOLVE(cuMemPoolCreate)
  RESOLVE(cuMemPoolDestroy)
  RESOLVE(cuMemPoolSetAttribute)
  RESOLVE(cuMemAllocFromPoolAsync)
  RESOLVE(cuMemGetInfo)
  RESOLVE(cuMemsetD8Async)
  RESOLVE(cuMemsetD32Async)
  RESOLVE(cuMemcpyAsync)
  RESOLVE(cuStreamSynchronize)
  RESOLVE(cuStreamIsCapturing)
  RESOLVE(cuStreamGetCaptureInfo)
  RESOLVE(cuStreamGetCtx)
  RESOLVE(cuThreadExchangeStreamCaptureMode)
  RESOLVE(cuEventCreate)
  RESOLVE(cuEventDestroy)
  RESOLVE(cuEventRecord)
  RESOLVE(cuEventSynchronize)
  RESOLVE(cuStreamWaitEvent)
  RESOLVE(cuPointerGetAttributes)
  RESOLVE(cuEventElapsedTime)
  RESOLVE(cuGetErrorString)
  RESOLVE(cuGetErrorName)
  resolve_optional(get, "cuFuncGetParamInfo", 12040, (void **)&table.cuFuncGetParamInfo);
  CUresult init = table.cuInit(0);
  if (init != CUDA_SUCCESS) {
    const char *name = "?";
    table.cuGetErrorName(init, &name);
    snprintf(load_message, sizeof load_message, "the CUDA driver found no usable GPU: cuInit: %s",
             name);
    return;
  }
  load_status = JITOPS_SUCCESS;
}

jitops_status jitops__driver_get(const jitops__driver **out) {
  pthread_once(&load_once, load_driver);
  if (load_status != JITOPS_SUCCESS)
    return jitops__fail(load_status, "%s", load_message);
  *out = &table;
  return JITOPS_SUCCESS;
}

jitops_status jitops__driver_fail(const jitops__driver *driver, CUresult result, const char *what) {
  const char *name = "CUDA_ERROR_UNKNOWN";
  const char *text = "";
  driver->cuGetErrorName(result, &name);
  driver->cuGetErrorString(result, &text);
  jitops_status status = JITOPS_ERR_DRIVER;
  if (result == CUDA_ERROR_OUT_OF_MEMORY)
    status = JITOPS_ERR_OUT_OF_MEMORY;
  else if (result == CUDA_ERROR_NO_DEVICE || result == CUDA_ERROR_INVALID_DEVICE)
    status = JITOPS_ERR_NO_DEVICE;
  return jitops__fail(status, "%s: %s (%s)", what, name, text);
}
