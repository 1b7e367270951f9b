/* What the op examples share, so that each of them shows only its op: a runtime (a
 * compile-only one where there is no GPU), device buffers from the CUDA runtime, DLTensors
 * over them, and the checks and messages. None of this is part of libjitops.
 *
 * Without a GPU, the buffers are fake, aligned device addresses that nothing ever reads: the
 * ops still validate their arguments and JIT-compile their kernels for sm_90, then return
 * JITOPS_ERR_NO_DEVICE. */
#ifndef JITOPS_EXAMPLE_UTIL_H
#define JITOPS_EXAMPLE_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jitops/jitops.h>

/* Device memory comes from the CUDA runtime, as in most applications; libjitops launches in
 * the same primary context, so the pointers work as they are. */
#include <cuda_runtime_api.h>

enum { EXAMPLE_MAX_BUFFERS = 16 };

typedef struct example {
  const char *name;
  jitops_runtime_t *rt;
  int has_gpu; /* 0: a compile-only runtime, whose launches return JITOPS_ERR_NO_DEVICE */
  int failed;  /* a device allocation or copy failed */
  void *buffers[EXAMPLE_MAX_BUFFERS];
  int num_buffers;
} example;

static inline int example_fail(const example *ex, const char *what, jitops_status status) {
  fprintf(stderr, "%s: %s failed: %s: %s\n", ex->name, what, jitops_status_string(status),
          jitops_last_error());
  return 1;
}

/* A runtime for device 0 or, where there is no GPU, a compile-only one for sm_90. Returns 0,
 * or 1 after printing why not. */
static inline int example_start(example *ex, const char *name) {
  memset(ex, 0, sizeof *ex);
  ex->name = name;
  jitops_runtime_config config;
  jitops_runtime_config_init(&config);
  jitops_status status = jitops_runtime_create(&config, &ex->rt);
  ex->has_gpu = status == JITOPS_SUCCESS;
  if (status == JITOPS_ERR_NO_DEVICE) {
    printf("no GPU here (%s)\ncompiling for sm_90 without one.\n", jitops_last_error());
    config.device = -1;
    config.arch = "sm_90";
    status = jitops_runtime_create(&config, &ex->rt);
  }
  if (status != JITOPS_SUCCESS)
    return example_fail(ex, "jitops_runtime_create", status);
  jitops_runtime_info info;
  jitops_runtime_get_info(ex->rt, &info);
  printf("%s: libjitops %s, target %s%s%s\n", name, jitops_version_string(), info.arch_name,
         ex->has_gpu ? " on " : "", info.device_name);
  return 0;
}

static inline size_t example_bytes(const DLTensor *t) {
  size_t bytes = t->dtype.bits / 8;
  for (int d = 0; d < t->ndim; ++d)
    bytes *= (size_t)t->shape[d];
  return bytes;
}

/* cudaMemcpy in either direction. It runs on the legacy default stream, so it waits for the
 * ops the examples launch there (stream NULL): the host may read `dst` when it returns.
 * Returns 1 on success, else 0 after printing why. */
static inline int example_copy(example *ex, void *dst, const void *src, size_t bytes,
                               enum cudaMemcpyKind kind) {
  cudaError_t err = cudaMemcpy(dst, src, bytes, kind);
  if (err != cudaSuccess) {
    fprintf(stderr, "%s: cudaMemcpy(%zu): %s\n", ex->name, bytes, cudaGetErrorString(err));
    ex->failed = 1;
  }
  return err == cudaSuccess;
}

/* A compact tensor (row-major: strides NULL) in the memory of CUDA device 0, allocated with
 * cudaMalloc (freed by example_end) and filled from `host` unless it is NULL. On failure it
 * prints why and sets ex->failed. Without a GPU, `data` is a fake address, 16 MiB past the
 * previous one (more than any example's tensor), aligned as cudaMalloc's are. `shape` must
 * outlive the tensor: a DLTensor points to it. */
static inline DLTensor example_tensor(example *ex, DLDataType dtype, int ndim, int64_t *shape,
                                      const void *host) {
  DLTensor t = {.device = {kDLCUDA, 0}, .ndim = ndim, .dtype = dtype, .shape = shape};
  if (ex->num_buffers == EXAMPLE_MAX_BUFFERS) {
    fprintf(stderr, "%s: more than %d tensors\n", ex->name, EXAMPLE_MAX_BUFFERS);
    ex->failed = 1;
    return t;
  }
  if (!ex->has_gpu) {
    t.data = (void *)(uintptr_t)(((uintptr_t)ex->num_buffers + 1) << 24);
  } else {
    cudaError_t err = cudaMalloc(&t.data, example_bytes(&t));
    if (err != cudaSuccess) {
      fprintf(stderr, "%s: cudaMalloc: %s\n", ex->name, cudaGetErrorString(err));
      ex->failed = 1;
      t.data = NULL;
      return t;
    }
  }
  ex->buffers[ex->num_buffers++] = t.data;
  if (ex->has_gpu && host != NULL)
    example_copy(ex, t.data, host, example_bytes(&t), cudaMemcpyHostToDevice);
  return t;
}

/* Copies a device tensor's values into `host`. Returns 1 on success. */
static inline int example_download(example *ex, void *host, const DLTensor *t) {
  return example_copy(ex, host, t->data, example_bytes(t), cudaMemcpyDeviceToHost);
}

/* 1 when an op call did what it should here: succeed on a GPU; without one, pass validation
 * (and compile its kernels), then stop with JITOPS_ERR_NO_DEVICE. Otherwise 0, after printing
 * the status and the library's message. */
static inline int example_called(const example *ex, const char *what, jitops_status status) {
  if (status == (ex->has_gpu ? JITOPS_SUCCESS : JITOPS_ERR_NO_DEVICE))
    return 1;
  example_fail(ex, what, status);
  return 0;
}

/* Compares n results with a reference: |got - want| <= atol + rtol * |want| for each. Prints
 * the first value, the largest error and "correct" or "wrong"; returns 1 when correct. */
static inline int example_check(const char *what, const float *got, const double *want, size_t n,
                                double atol, double rtol) {
  double worst = 0;
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    double err = fabs(got[i] - want[i]);
    wrong += !(err <= atol + rtol * fabs(want[i])); /* a NaN is wrong too */
    if (!(err <= worst))
      worst = err;
  }
  printf("  %-24s %5zu values, first %-11.6g (reference %.6g), max error %.2g: %s\n", what, n,
         got[0], want[0], worst, wrong ? "wrong" : "correct");
  return wrong == 0;
}

/* Frees the buffers, destroys the runtime and returns `rc`. Without a GPU, first says what
 * happened instead of a run: the calls were validated, and their kernels compiled for sm_90
 * (or found in the disk cache, from an earlier run). */
static inline int example_end(example *ex, int rc) {
  if (!ex->has_gpu && rc == 0) {
    jitops_stats stats;
    jitops_runtime_get_stats(ex->rt, &stats);
    printf("%s: every call was validated; kernels for sm_90: %llu compiled, %llu from the disk "
           "cache. No GPU is present to run them.\n",
           ex->name, (unsigned long long)stats.compiles, (unsigned long long)stats.disk_hits);
  }
  /* The ops may still run after an early failure: wait for them before freeing their memory
   * and destroying the runtime. */
  if (ex->has_gpu)
    cudaDeviceSynchronize();
  for (int i = 0; ex->has_gpu && i < ex->num_buffers; ++i)
    cudaFree(ex->buffers[i]);
  jitops_runtime_destroy(ex->rt);
  return rc;
}

#endif /* JITOPS_EXAMPLE_UTIL_H */
