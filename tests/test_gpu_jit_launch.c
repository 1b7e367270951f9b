/* On a GPU: the example kernel computes a*x + y for every float type against a CPU
 * reference; a user-registered kernel (including another user source, compiled with a -D
 * option, using more than 48 KiB of dynamic shared memory) runs on a user stream; results
 * are bit-identical across runs. Exits 77 without a GPU. */
#include <cuda_runtime_api.h>
#include <math.h>

#include "testutil.h"

enum { N = 1000003, BLOCK = 256, ITEMS = 4 };

typedef struct float_type {
  const char *cname;
  size_t size;
  double tolerance; /* relative, after rounding to the type */
} float_type;

static const float_type types[] = {{"float", 4, 1e-6},
                                   {"double", 8, 1e-14},
                                   {"jitops::half", 2, 2e-3},
                                   {"jitops::bfloat16", 2, 1.6e-2}};

static void store_value(const float_type *t, void *base, size_t i, double v) {
  if (t->size == 8)
    ((double *)base)[i] = v;
  else if (t->size == 4)
    ((float *)base)[i] = (float)v;
  else if (t->cname[8] == 'h')
    ((uint16_t *)base)[i] = test_f32_to_f16((float)v);
  else
    ((uint16_t *)base)[i] = test_f32_to_bf16((float)v);
}

static double load_value(const float_type *t, const void *base, size_t i) {
  if (t->size == 8)
    return ((const double *)base)[i];
  if (t->size == 4)
    return ((const float *)base)[i];
  if (t->cname[8] == 'h')
    return test_f16_to_f32(((const uint16_t *)base)[i]);
  return test_bf16_to_f32(((const uint16_t *)base)[i]);
}

#define CUDA_OK(call) CHECK((call) == cudaSuccess)

static void example_for(jitops_runtime_t *rt, const float_type *t, uint64_t *seed) {
  char expr[96];
  snprintf(expr, sizeof expr, "jitops::example_axpy<%s, %d>", t->cname, ITEMS);
  jitops_kernel_t *k = NULL;
  CHECK_OK(jitops_kernel_get(rt, "jitops/example.cuh", expr, NULL, 0, &k));
  size_t bytes = N * t->size;
  void *x = malloc(bytes), *y = malloc(bytes), *out = malloc(bytes), *again = malloc(bytes);
  for (size_t i = 0; i < N; ++i) {
    store_value(t, x, i, test_rand_uniform(seed, -4, 4));
    store_value(t, y, i, test_rand_uniform(seed, -4, 4));
  }
  void *dx = NULL, *dy = NULL, *dout = NULL;
  CUDA_OK(cudaMalloc(&dx, bytes));
  CUDA_OK(cudaMalloc(&dy, bytes));
  CUDA_OK(cudaMalloc(&dout, bytes));
  CUDA_OK(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice));
  long long n = N;
  double a_double = 1.75;
  float a_float = 1.75f;
  void *a = t->size == 8 ? (void *)&a_double : (void *)&a_float;
  void *args[] = {&n, a, &dx, &dy, &dout};
  jitops_launch_params p = {
      {(N + BLOCK * ITEMS - 1) / (BLOCK * ITEMS), 1, 1}, {BLOCK, 1, 1}, 0, NULL};
  for (int run = 0; run < 2; ++run) {
    CUDA_OK(cudaMemset(dout, 0xff, bytes)); /* poison: NaN in every float type */
    if (k)
      CHECK_OK(jitops_kernel_launch(k, &p, args));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(run ? again : out, dout, bytes, cudaMemcpyDeviceToHost));
  }
  size_t bad = 0;
  for (size_t i = 0; i < N; ++i) {
    double want = 1.75 * load_value(t, x, i) + load_value(t, y, i);
    double got = load_value(t, out, i);
    if (!(fabs(got - want) <= t->tolerance * fmax(1.0, fabs(want))))
      ++bad;
  }
  if (bad)
    fprintf(stderr, "%s: %zu of %d wrong\n", expr, bad, N);
  CHECK(bad == 0);
  CHECK(memcmp(out, again, bytes) == 0);
  cudaFree(dx), cudaFree(dy), cudaFree(dout);
  free(x), free(y), free(out), free(again);
}

static const char *const user_consts = "#pragma once\n#define USER_OFFSET 0.5f\n";
static const char *const user_kernel =
    "#include \"jitops/common.cuh\"\n"
    "#include \"user/consts.cuh\"\n"
    "// Reverses each block's tile through dynamic shared memory, scaled and offset.\n"
    "extern \"C\" __global__ void user_reverse(const float *in, float *out, int tile) {\n"
    "  extern __shared__ float buffer[];\n"
    "  __shared__ float offset[2048]; // 8 KiB of static shared memory\n"
    "  for (int i = threadIdx.x; i < 2048; i += blockDim.x) offset[i] = USER_OFFSET;\n"
    "  const float *src = in + (long long)blockIdx.x * tile;\n"
    "  for (int i = threadIdx.x; i < tile; i += blockDim.x) buffer[i] = src[i];\n"
    "  __syncthreads();\n"
    "  for (int i = threadIdx.x; i < tile; i += blockDim.x)\n"
    "    out[(long long)blockIdx.x * tile + i] = buffer[tile - 1 - i] * FACTOR + offset[i % "
    "2048];\n"
    "}\n";

/* Runs user_reverse with `tile` floats of dynamic shared memory per block on a user stream
 * and checks every element. */
static void user_reverse_tile(jitops_kernel_t *k, int tile, uint64_t *seed) {
  enum { BLOCKS = 40 };
  size_t count = (size_t)tile * BLOCKS, bytes = count * sizeof(float);
  float *in = malloc(bytes), *out = malloc(bytes);
  for (size_t i = 0; i < count; ++i)
    in[i] = (float)test_rand_uniform(seed, -1, 1);
  float *din = NULL, *dout = NULL;
  cudaStream_t stream = NULL;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc((void **)&din, bytes));
  CUDA_OK(cudaMalloc((void **)&dout, bytes));
  CUDA_OK(cudaMemcpy(din, in, bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout, 0xff, bytes));
  /* The copy and the memset run on the legacy stream, which a non-blocking stream does not
   * wait for: without this the poison could land after the kernel's writes. */
  CUDA_OK(cudaDeviceSynchronize());
  void *args[] = {&din, &dout, &tile};
  jitops_launch_params p = {{BLOCKS, 1, 1}, {512, 1, 1}, (uint32_t)(tile * sizeof(float)), stream};
  CHECK_OK(jitops_kernel_launch(k, &p, args));
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t b = 0; b < BLOCKS; ++b)
    for (size_t i = 0; i < (size_t)tile; ++i) /* the GPU contracts to one FMA */
      bad += out[b * tile + i] != fmaf(in[b * tile + tile - 1 - i], 3.0f, 0.5f);
  CHECK(bad == 0);
  cudaFree(din), cudaFree(dout), cudaStreamDestroy(stream);
  free(in), free(out);
}

static void user_kernel_on_stream(jitops_runtime_t *rt, uint64_t *seed) {
  CHECK_OK(jitops_source_register(rt, "user/consts.cuh", user_consts));
  CHECK_OK(jitops_source_register(rt, "user/reverse.cu", user_kernel));
  const char *options[] = {"-DFACTOR=3.0f"};
  jitops_kernel_t *k = NULL;
  CHECK_OK(jitops_kernel_get(rt, "user/reverse.cu", "user_reverse", options, 1, &k));
  if (k == NULL)
    return;
  user_reverse_tile(k, 11 * 1024,
                    seed); /* 44 KiB dynamic + 8 KiB static: over 48 KiB only together */
  user_reverse_tile(k, 24 * 1024, seed); /* 96 KiB dynamic */
  /* More shared memory than the device has is refused before launching. */
  jitops_launch_params p = {{1, 1, 1}, {32, 1, 1}, 1u << 30, NULL};
  CHECK_FAILS(jitops_kernel_launch(k, &p, NULL), JITOPS_ERR_INVALID_ARGUMENT, "shared_bytes");
}

int main(void) {
  jitops_runtime_t *rt = test_gpu_runtime_or_skip("test_gpu_jit_launch");
  jitops_runtime_info info;
  CHECK_OK(jitops_runtime_get_info(rt, &info));
  CHECK(info.has_device == 1 && info.arch >= 50 && info.device_name[0] != 0);
  printf("device: %s (%s)\n", info.device_name, info.arch_name);
  uint64_t seed = 42;
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i)
    example_for(rt, &types[i], &seed);
  user_kernel_on_stream(rt, &seed);
  /* A second runtime on the same device shares the primary context. */
  jitops_runtime_t *second = NULL;
  CHECK_OK(jitops_runtime_create(NULL, &second));
  if (second)
    example_for(second, &types[0], &seed);
  jitops_runtime_destroy(second);
  jitops_runtime_destroy(rt);
  return test_finish("test_gpu_jit_launch");
}
