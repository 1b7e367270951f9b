/* quickstart: JIT-compile a built-in kernel, launch it, check the result, and show what the
 * cache did. Run it twice: the second run finds the kernel on disk and compiles nothing.
 *
 * Without a GPU it still compiles for sm_90 and caches the kernel, then says that there is
 * no GPU to launch on. Exit status: 0 on success (with or without a GPU), 1 on failure. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>

#include <jitops/jitops.h>

/* Device memory comes from the CUDA runtime, as in most applications; libjitops launches in
 * the same primary context, so the pointers work as they are. */
#include <cuda_runtime_api.h>

static void print_stats(const char *when, const jitops_runtime_t *rt) {
  jitops_stats s;
  jitops_runtime_get_stats(rt, &s);
  printf("  %-28s memory hits %llu, disk hits %llu, misses %llu, compiles %llu (%.1f ms)\n", when,
         (unsigned long long)s.memory_hits, (unsigned long long)s.disk_hits,
         (unsigned long long)s.misses, (unsigned long long)s.compiles, s.compile_ms);
}

static int fail(const char *what, jitops_status status) {
  fprintf(stderr, "quickstart: %s failed: %s: %s\n", what, jitops_status_string(status),
          jitops_last_error());
  return 1;
}

/* Runs out = a*x + y over n floats on the GPU and checks every element. */
static int run_on_gpu(jitops_kernel_t *kernel) {
  enum { N = 1 << 20, ITEMS = 4, BLOCK = 256 };
  size_t bytes = N * sizeof(float);
  float *x = malloc(bytes), *y = malloc(bytes), *out = malloc(bytes);
  float *dx = NULL, *dy = NULL, *dout = NULL;
  int ok = x && y && out;
  for (int i = 0; ok && i < N; ++i) {
    x[i] = (float)(i % 1000) * 0.001f + 0.5f;
    y[i] = (float)(i % 7) - 3.25f;
  }
  ok = ok && !cudaMalloc((void **)&dx, bytes) && !cudaMalloc((void **)&dy, bytes) &&
       !cudaMalloc((void **)&dout, bytes) && !cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice) &&
       !cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
  long long n = N;
  float a = 2.5f;
  void *args[] = {&n, &a, &dx, &dy, &dout};
  jitops_launch_params params = {
      {(N + BLOCK * ITEMS - 1) / (BLOCK * ITEMS), 1, 1}, {BLOCK, 1, 1}, 0, NULL};
  jitops_status status = ok ? jitops_kernel_launch(kernel, &params, args) : JITOPS_ERR_DRIVER;
  if (status != JITOPS_SUCCESS)
    fail("jitops_kernel_launch", status);
  ok = ok && status == JITOPS_SUCCESS && !cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int i = 0; ok && i < N; ++i)
    wrong += out[i] != fmaf(a, x[i], y[i]); /* the GPU contracts a*x + y to one FMA */
  printf("launched on the GPU: %d of %d results %s\n", ok ? N - wrong : 0, N,
         ok && wrong == 0 ? "correct" : "wrong");
  cudaFree(dx), cudaFree(dy), cudaFree(dout);
  free(x), free(y), free(out);
  return ok && wrong == 0 ? 0 : 1;
}

int main(void) {
  jitops_runtime_config config;
  jitops_runtime_config_init(&config);
  jitops_runtime_t *rt = NULL;
  jitops_status status = jitops_runtime_create(&config, &rt);
  int has_gpu = status == JITOPS_SUCCESS;
  if (status == JITOPS_ERR_NO_DEVICE) {
    printf("no GPU here (%s)\ncompiling for sm_90 without one.\n", jitops_last_error());
    config.device = -1;
    config.arch = "sm_90";
    status = jitops_runtime_create(&config, &rt);
  }
  if (status != JITOPS_SUCCESS)
    return fail("jitops_runtime_create", status);
  jitops_runtime_info info;
  jitops_runtime_get_info(rt, &info);
  printf("libjitops %s, target %s%s%s, NVRTC %d.%d\ncache: %s\n", jitops_version_string(),
         info.arch_name, has_gpu ? " on " : "", info.device_name, info.nvrtc_version / 100,
         info.nvrtc_version % 100, info.cache_path[0] ? info.cache_path : "(off)");

  const char *name = "jitops::example_axpy<float, 4>";
  jitops_kernel_t *kernel = NULL;
  if ((status = jitops_kernel_get(rt, "jitops/example.cuh", name, NULL, 0, &kernel)))
    return fail("jitops_kernel_get", status);
  print_stats("first request:", rt);
  if ((status = jitops_kernel_get(rt, "jitops/example.cuh", name, NULL, 0, &kernel)))
    return fail("jitops_kernel_get", status);
  print_stats("second request:", rt);
  printf("kernel %s -> %s\n", name, jitops_kernel_lowered_name(kernel));

  int rc = 0;
  if (has_gpu)
    rc = run_on_gpu(kernel);
  else
    printf("no GPU is present to launch on: the kernel is compiled and cached for sm_90.\n");
  jitops_runtime_destroy(rt);
  return rc;
}
