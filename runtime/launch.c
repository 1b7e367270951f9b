/* Launches: the public jitops_kernel_launch and the ops' jitops__launch and
 * jitops__launch_after, in the runtime's primary context on the caller's stream. */
#include "runtime/launch.h"

#include <stdbool.h>

#include "common/error.h"
#include "runtime/context.h"
#include "runtime/runtime_internal.h"

static jitops_status check_dims(const jitops_kernel_t *k, const uint32_t grid[3],
                                const uint32_t block[3]) {
  static const uint32_t grid_max[3] = {2147483647u, 65535u, 65535u};
  static const uint32_t block_max[3] = {1024u, 1024u, 64u};
  static const char axis[3] = {'x', 'y', 'z'};
  for (int i = 0; i < 3; ++i) {
    if (grid[i] == 0 || grid[i] > grid_max[i])
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "jitops_kernel_launch: params.grid[%d] (%c) is %u; expected 1..%u", i,
                          axis[i], grid[i], grid_max[i]);
    if (block[i] == 0 || block[i] > block_max[i])
      return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                          "jitops_kernel_launch: params.block[%d] (%c) is %u; expected 1..%u", i,
                          axis[i], block[i], block_max[i]);
  }
  uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
  if (threads > (uint64_t)k->runtime->props.max_threads_per_block)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "jitops_kernel_launch: params.block has %llu threads; the device allows "
                        "%d",
                        (unsigned long long)threads, k->runtime->props.max_threads_per_block);
  return JITOPS_SUCCESS;
}

/* Raises the kernel's dynamic shared memory limit when a launch needs more than the default.
 * The default (48 KiB) bounds static plus dynamic memory, so a kernel with static shared
 * memory needs the opt-in below 48 KiB of dynamic memory too. Racing threads may both set
 * the attribute; it only grows, so that is harmless. */
static jitops_status allow_shared(jitops_kernel_t *k, uint32_t bytes) {
  jitops_runtime_t *rt = k->runtime;
  uint64_t total = (uint64_t)bytes + k->static_shared;
  if (total <= rt->props.smem_per_block ||
      bytes <= __atomic_load_n(&k->shared_optin, __ATOMIC_RELAXED))
    return JITOPS_SUCCESS;
  if (total > rt->props.smem_per_block_optin)
    return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                        "jitops_kernel_launch: params.shared_bytes %u plus the kernel's %u "
                        "static bytes exceed the device's %zu",
                        bytes, k->static_shared, rt->props.smem_per_block_optin);
  CUresult r = rt->driver->cuFuncSetAttribute(
      k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
  if (r != CUDA_SUCCESS)
    return jitops__driver_fail(rt->driver, r, "jitops_kernel_launch: cuFuncSetAttribute");
  __atomic_store_n(&k->shared_optin, bytes, __ATOMIC_RELAXED);
  return JITOPS_SUCCESS;
}

/* cuLaunchKernelEx with programmatic stream serialization allowed: the kernel may start before
 * the previous kernel on the stream has finished, and waits for it in griddepcontrol.wait. */
static CUresult launch_programmatic(const jitops_kernel_t *k, const uint32_t grid[3],
                                    const uint32_t block[3], uint32_t shared_bytes, void *stream,
                                    void **args) {
  CUlaunchAttribute attribute = {0};
  attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attribute.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config = {0};
  config.gridDimX = grid[0];
  config.gridDimY = grid[1];
  config.gridDimZ = grid[2];
  config.blockDimX = block[0];
  config.blockDimY = block[1];
  config.blockDimZ = block[2];
  config.sharedMemBytes = shared_bytes;
  config.hStream = (CUstream)stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return k->runtime->driver->cuLaunchKernelEx(&config, k->function, args, NULL);
}

/* Why a launch failed, when the caller passed another device's stream (a thread that drives
 * several GPUs, with the wrong runtime for its stream): JITOPS_ERR_INVALID_DEVICE, which
 * says so, rather than the driver's "invalid resource handle". Asked only after a failure,
 * so the hot path pays nothing for it. */
static jitops_status launch_failed(jitops_runtime_t *rt, CUresult r, void *stream) {
  if (jitops__stream_is_foreign(rt, stream))
    return jitops__fail(JITOPS_ERR_INVALID_DEVICE,
                        "jitops_kernel_launch: the stream belongs to another context (another "
                        "device's, say) than the runtime's, which is device %d's",
                        rt->device);
  return jitops__driver_fail(rt->driver, r, "jitops_kernel_launch: cuLaunchKernel");
}

static jitops_status launch(const jitops_kernel_t *kernel, const uint32_t grid[3],
                            const uint32_t block[3], uint32_t shared_bytes, void *stream,
                            void **args, bool after_previous) {
  jitops_kernel_t *k = (jitops_kernel_t *)kernel;
  jitops_runtime_t *rt = k->runtime;
  JITOPS__TRY(check_dims(k, grid, block));
  if (k->function == NULL)
    return jitops__fail_no_device("jitops_kernel_launch");
  int pushed;
  JITOPS__TRY(jitops__context_push(rt, &pushed));
  jitops_status status = allow_shared(k, shared_bytes);
  CUresult r = CUDA_SUCCESS;
  if (status == JITOPS_SUCCESS && after_previous && rt->dependent_launches)
    r = launch_programmatic(k, grid, block, shared_bytes, stream, args);
  else if (status == JITOPS_SUCCESS)
    r = rt->driver->cuLaunchKernel(k->function, grid[0], grid[1], grid[2], block[0], block[1],
                                   block[2], shared_bytes, (CUstream)stream, args, NULL);
  if (r != CUDA_SUCCESS)
    status = launch_failed(rt, r, stream);
  jitops__context_restore(rt, pushed);
  return status;
}

jitops_status jitops_kernel_launch(const jitops_kernel_t *kernel,
                                   const jitops_launch_params *params, void **args) {
  JITOPS__REQUIRE_NONNULL("jitops_kernel_launch", kernel);
  JITOPS__REQUIRE_NONNULL("jitops_kernel_launch", params);
  return launch(kernel, params->grid, params->block, params->shared_bytes, params->stream, args,
                false);
}

jitops_status jitops_kernel_param_info(const jitops_kernel_t *kernel, size_t index, size_t *offset,
                                       size_t *size) {
  static const char fn[] = "jitops_kernel_param_info";
  JITOPS__REQUIRE_NONNULL(fn, kernel);
  JITOPS__REQUIRE_NONNULL(fn, offset);
  JITOPS__REQUIRE_NONNULL(fn, size);
  jitops_runtime_t *rt = kernel->runtime;
  if (kernel->function == NULL)
    return jitops__fail_no_device(fn);
  if (rt->driver->cuFuncGetParamInfo == NULL)
    return jitops__fail(JITOPS_ERR_UNSUPPORTED,
                        "%s: the CUDA driver is older than 12.4 and cannot describe a kernel's "
                        "parameters",
                        fn);
  int pushed;
  JITOPS__TRY(jitops__context_push(rt, &pushed));
  CUresult r = rt->driver->cuFuncGetParamInfo(kernel->function, index, offset, size);
  jitops__context_restore(rt, pushed);
  /* The driver answers CUDA_ERROR_INVALID_VALUE for an index past the last parameter. */
  if (r == CUDA_ERROR_INVALID_VALUE)
    return jitops__fail(JITOPS_ERR_OUT_OF_RANGE, "%s: the kernel %s has no parameter %zu", fn,
                        kernel->lowered_name, index);
  return r == CUDA_SUCCESS ? JITOPS_SUCCESS : jitops__driver_fail(rt->driver, r, fn);
}

jitops_status jitops__launch(const jitops_kernel_t *kernel, uint32_t gx, uint32_t gy, uint32_t gz,
                             uint32_t bx, uint32_t by, uint32_t bz, uint32_t shared_bytes,
                             void *stream, void **args) {
  const uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(kernel, grid, block, shared_bytes, stream, args, false);
}

jitops_status jitops__launch_after(const jitops_kernel_t *kernel, uint32_t gx, uint32_t gy,
                                   uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                                   uint32_t shared_bytes, void *stream, void **args) {
  const uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(kernel, grid, block, shared_bytes, stream, args, true);
}
