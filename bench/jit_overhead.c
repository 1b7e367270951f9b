/* JIT overhead on a GPU, with the context already created:
 *   cold  first request of a kernel nobody compiled: NVRTC, store, load (median of 7
 *         distinct sources);
 *   warm  first request in a fresh process whose kernel is on disk: look-up, hash check,
 *         cuModuleLoadData (median of 7 child processes);
 *   hot   CPU time of jitops_kernel_get + jitops_kernel_launch against a bare cuLaunchKernel
 *         of the same CUfunction, interleaved in batches (median of the batches).
 * Prints a table; exits 77 without a GPU. Usage: bench_jit_overhead [--json] */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime_internal.h"

enum { SAMPLES = 7, BATCHES = 41, BATCH = 2000 };

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, compare);
  return v[n / 2];
}

static jitops_runtime_t *create(const char *dir) {
  jitops_runtime_config cfg;
  jitops_runtime_config_init(&cfg);
  cfg.cache_dir = dir;
  cfg.cache_mode = JITOPS_CACHE_MODE_READWRITE;
  jitops_runtime_t *rt = NULL;
  jitops_status s = jitops_runtime_create(&cfg, &rt);
  if (s == JITOPS_ERR_NO_DEVICE) {
    printf("bench_jit_overhead: skipped, no GPU: %s\n", jitops_last_error());
    exit(77);
  }
  if (s != JITOPS_SUCCESS) {
    fprintf(stderr, "jitops_runtime_create: %s\n", jitops_last_error());
    exit(1);
  }
  cudaFree(NULL); /* the context is up before anything is timed */
  return rt;
}

static const char *const example = "jitops::example_axpy<float, 4>";

static jitops_kernel_t *get_example(jitops_runtime_t *rt) {
  jitops_kernel_t *k = NULL;
  if (jitops_kernel_get(rt, "jitops/example.cuh", example, NULL, 0, &k) != JITOPS_SUCCESS) {
    fprintf(stderr, "jitops_kernel_get: %s\n", jitops_last_error());
    exit(1);
  }
  return k;
}

/* Child: one timed first request against a populated cache. */
static int warm_child(const char *dir) {
  jitops_runtime_t *rt = create(dir);
  double t0 = now_us();
  get_example(rt);
  double t1 = now_us();
  jitops_stats s;
  jitops_runtime_get_stats(rt, &s);
  printf("%.3f %llu\n", (t1 - t0) / 1e3, (unsigned long long)s.compiles);
  jitops_runtime_destroy(rt);
  return 0;
}

static double cold_ms(jitops_runtime_t *rt, int sample) {
  /* A distinct source text per sample: a kernel nobody has compiled. */
  char name[64], text[512];
  snprintf(name, sizeof name, "bench/cold_%d_%ld.cu", sample, (long)getpid());
  snprintf(text, sizeof text,
           "// sample %d of process %ld\n#include \"jitops/common.cuh\"\n"
           "extern \"C\" __global__ void cold(float *p, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) p[i] = p[i] * 2.0f + 1.0f;\n}\n",
           sample, (long)getpid());
  jitops_source_register(rt, name, text);
  jitops_kernel_t *k = NULL;
  double t0 = now_us();
  jitops_status s = jitops_kernel_get(rt, name, "cold", NULL, 0, &k);
  double t1 = now_us();
  if (s != JITOPS_SUCCESS) {
    fprintf(stderr, "cold: %s\n", jitops_last_error());
    exit(1);
  }
  return (t1 - t0) / 1e3;
}

static double warm_ms(const char *self, const char *dir, int *compiled) {
  char command[4096];
  snprintf(command, sizeof command, "'%s' --warm-child '%s'", self, dir);
  FILE *child = popen(command, "r");
  double ms = -1;
  unsigned long long compiles = 1;
  if (child == NULL || fscanf(child, "%lf %llu", &ms, &compiles) != 2)
    ms = -1;
  if (child)
    pclose(child);
  *compiled += (int)compiles;
  return ms;
}

typedef struct hot_result {
  double jitops_ns, bare_ns, get_ns;
} hot_result;

static hot_result hot(jitops_runtime_t *rt, jitops_kernel_t *k) {
  float *buffer = NULL;
  cudaMalloc((void **)&buffer, 4 * 1024);
  long long n = 1024;
  float a = 1.0f;
  void *args[] = {&n, &a, &buffer, &buffer, &buffer};
  jitops_launch_params p = {{1, 1, 1}, {256, 1, 1}, 0, NULL};
  double jit[BATCHES], bare[BATCHES], get[BATCHES];
  for (int b = 0; b < BATCHES; ++b) {
    double t0 = now_us();
    for (int i = 0; i < BATCH; ++i) {
      jitops_kernel_t *kk = NULL;
      jitops_kernel_get(rt, "jitops/example.cuh", example, NULL, 0, &kk);
      jitops_kernel_launch(kk, &p, args);
    }
    double t1 = now_us();
    cudaDeviceSynchronize();
    double t2 = now_us();
    for (int i = 0; i < BATCH; ++i)
      rt->driver->cuLaunchKernel(k->function, 1, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
    double t3 = now_us();
    cudaDeviceSynchronize();
    double t4 = now_us();
    for (int i = 0; i < BATCH; ++i) {
      jitops_kernel_t *kk = NULL;
      jitops_kernel_get(rt, "jitops/example.cuh", example, NULL, 0, &kk);
    }
    double t5 = now_us();
    jit[b] = (t1 - t0) * 1e3 / BATCH;
    bare[b] = (t3 - t2) * 1e3 / BATCH;
    get[b] = (t5 - t4) * 1e3 / BATCH;
  }
  cudaFree(buffer);
  hot_result r = {median(jit, BATCHES), median(bare, BATCHES), median(get, BATCHES)};
  return r;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--warm-child") == 0)
    return warm_child(argv[2]);
  char dir[] = "/tmp/jitops-bench-XXXXXX";
  if (mkdtemp(dir) == NULL)
    return 1;
  jitops_runtime_t *rt = create(dir);
  jitops_runtime_info info;
  jitops_runtime_get_info(rt, &info);

  double t0 = now_us();
  jitops_kernel_t *k = get_example(rt); /* the library's own template, cold */
  double example_cold = (now_us() - t0) / 1e3;
  double cold[SAMPLES], warm[SAMPLES];
  for (int i = 0; i < SAMPLES; ++i)
    cold[i] = cold_ms(rt, i);
  int compiled = 0;
  for (int i = 0; i < SAMPLES; ++i)
    warm[i] = warm_ms(argv[0], dir, &compiled);
  hot_result h = hot(rt, k);
  double cold_median = median(cold, SAMPLES), warm_median = median(warm, SAMPLES);

  printf("\nJIT overhead on %s (%s), NVRTC %d.%d, context created before timing\n",
         info.device_name, info.arch_name, info.nvrtc_version / 100, info.nvrtc_version % 100);
  printf("| measure | value | target |\n|---|---|---|\n");
  printf("| cold first call, example_axpy<float,4> (compile+store+load) | %.1f ms | <= 60 ms |\n",
         example_cold);
  printf("| cold first call, small user kernel (median of %d) | %.1f ms | <= 60 ms |\n", SAMPLES,
         cold_median);
  printf("| warm first call, fresh process, kernel on disk (median of %d) | %.3f ms | <= 0.3 ms "
         "|\n",
         SAMPLES, warm_median);
  printf("| hot: jitops_kernel_get + jitops_kernel_launch | %.0f ns | |\n", h.jitops_ns);
  printf("| hot: bare cuLaunchKernel, same CUfunction | %.0f ns | |\n", h.bare_ns);
  printf("| hot overhead above bare launch | %.0f ns | <= 1000 ns |\n", h.jitops_ns - h.bare_ns);
  printf("| hot: jitops_kernel_get alone (hash + probe) | %.0f ns | |\n", h.get_ns);
  printf("| warm children that compiled (must be 0) | %d | 0 |\n", compiled);
  jitops_runtime_destroy(rt);
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  return system(command) == 0 && compiled == 0 ? 0 : 1;
}
