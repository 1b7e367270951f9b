/* On two GPUs in one process: a runtime per device (each in its device's primary context), the
 * disk tier off. One thread per device, started together, runs the example JIT kernel (axpy),
 * a cumsum scan, a segment sum and a repeat on its own stream, many times over, each against
 * a host reference on fresh random non-zero data, with outputs poisoned first. Data are
 * multiples of 1/8, so every result is exact and compared bit for bit. Then:
 *   - devices of one architecture (and one model) compiled each kernel once between them:
 *     what one runtime compiled, the other took as a shared hit;
 *   - a tensor on device 1 given to device 0's runtime fails with JITOPS_ERR_INVALID_DEVICE,
 *     naming the argument and both devices, in every op family (scan, repeat, segment, CTC,
 *     fused linear cross-entropy), and device 1's stream given to a device 0 kernel, or to
 *     jitops_stream_wait on device 0's runtime, fails the same way, as does device 1's
 *     memory given to jitops_pointer_check.
 * Exits 77 without a GPU, or with fewer than 2. */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "cuda_check.h"
#include "testutil.h"

enum {
  DEVICES = 2,
  ITERATIONS = 200,
  AXPY_N = 1 << 18,
  SCAN_ROWS = 48,
  SCAN_COLS = 1000,
  SEG_ROWS = 4096,
  SEG_COLS = 16,
  SEG_COUNT = 100,
  REP_ROWS = 3,
  REP_COLS = 5
};

static const int64_t rep_repeats[3] = {2, 3, 4};
static const DLDataType f32 = {kDLFloat, 32, 1}, i64 = {kDLInt, 64, 1};

static DLTensor tensor(void *data, DLDeviceType type, int device, DLDataType dtype, int ndim,
                       int64_t *shape) {
  DLTensor t = {data, {type, device}, ndim, dtype, shape, NULL, 0};
  return t;
}

/* A non-zero multiple of 1/8 in [-4, 4]: sums of a few thousand stay exact in f32. */
static float eighths(uint64_t *seed) {
  int64_t v = (int64_t)(test_rand_u64(seed) % 64) - 32;
  return (float)(v >= 0 ? v + 1 : v) / 8.0f;
}

enum {
  B_X,
  B_Y,
  B_OUT,
  B_SCAN_X,
  B_SCAN_Y,
  B_SEG_DATA,
  B_SEG_OUT,
  B_SEG_IDS,
  B_REP_X,
  B_REP_Y,
  BUFFERS
};
enum { REP_OUT = 2 * 3 * REP_ROWS * 4 * REP_COLS };

static const size_t counts[BUFFERS] = {AXPY_N,
                                       AXPY_N,
                                       AXPY_N,
                                       SCAN_ROWS *SCAN_COLS,
                                       SCAN_ROWS *SCAN_COLS,
                                       SEG_ROWS *SEG_COLS,
                                       SEG_COUNT *SEG_COLS,
                                       SEG_ROWS,
                                       REP_ROWS *REP_COLS,
                                       REP_OUT};
static const int inputs[] = {B_X, B_Y, B_SCAN_X, B_SEG_DATA, B_SEG_IDS, B_REP_X};
static const int outputs[] = {B_OUT, B_SCAN_Y, B_SEG_OUT, B_REP_Y};

static size_t bytes_of(int b) {
  return counts[b] * (b == B_SEG_IDS ? sizeof(int64_t) : sizeof(float));
}

/* One worker's buffers: host mirrors and device copies, indexed by B_*. */
typedef struct buffers {
  void *host[BUFFERS];
  void *dev[BUFFERS];
} buffers;

static void buffers_alloc(buffers *b) {
  for (int i = 0; i < BUFFERS; ++i) {
    b->host[i] = malloc(bytes_of(i));
    b->dev[i] = NULL;
    CUDA_OK(cudaMalloc(&b->dev[i], bytes_of(i)));
  }
}

static void buffers_free(buffers *b) {
  for (int i = 0; i < BUFFERS; ++i) {
    free(b->host[i]);
    cudaFree(b->dev[i]);
  }
}

/* Fresh inputs, uploaded, and poisoned outputs (0xff bytes: NaN), on `s`. */
static void upload_inputs(buffers *b, uint64_t *seed, cudaStream_t s) {
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; ++i) {
    int k = inputs[i];
    for (size_t e = 0; e < counts[k]; ++e)
      if (k == B_SEG_IDS)
        ((int64_t *)b->host[k])[e] = (int64_t)(test_rand_u64(seed) % SEG_COUNT);
      else
        ((float *)b->host[k])[e] = eighths(seed);
    CUDA_OK(cudaMemcpyAsync(b->dev[k], b->host[k], bytes_of(k), cudaMemcpyHostToDevice, s));
  }
  for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; ++i)
    CUDA_OK(cudaMemsetAsync(b->dev[outputs[i]], 0xff, bytes_of(outputs[i]), s));
}

static void download_outputs(buffers *b, cudaStream_t s) {
  for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; ++i)
    CUDA_OK(cudaMemcpyAsync(b->host[outputs[i]], b->dev[outputs[i]], bytes_of(outputs[i]),
                            cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
}

static jitops_kernel_t *axpy_kernel(jitops_runtime_t *rt) {
  jitops_kernel_t *k = NULL;
  CHECK_OK(
      jitops_kernel_get(rt, "jitops/example.cuh", "jitops::example_axpy<float, 4>", NULL, 0, &k));
  return k;
}

/* The example kernel and three ops, on `s`, over device `device`'s buffers. */
static void run_ops(jitops_runtime_t *rt, int device, buffers *b, cudaStream_t s) {
  jitops_kernel_t *axpy = axpy_kernel(rt);
  long long n = AXPY_N;
  float a = 1.75f;
  void *args[] = {&n, &a, &b->dev[B_X], &b->dev[B_Y], &b->dev[B_OUT]};
  jitops_launch_params p = {{AXPY_N / (256 * 4), 1, 1}, {256, 1, 1}, 0, s};
  if (axpy != NULL)
    CHECK_OK(jitops_kernel_launch(axpy, &p, args));

  int64_t scan_shape[2] = {SCAN_ROWS, SCAN_COLS};
  DLTensor sx = tensor(b->dev[B_SCAN_X], kDLCUDA, device, f32, 2, scan_shape);
  DLTensor sy = tensor(b->dev[B_SCAN_Y], kDLCUDA, device, f32, 2, scan_shape);
  CHECK_OK(jitops_scan(rt, JITOPS_SCAN_CUMSUM, &sx, 1, 0, &sy, NULL, NULL, s));

  int64_t data_shape[2] = {SEG_ROWS, SEG_COLS}, out_shape[2] = {SEG_COUNT, SEG_COLS},
          ids_shape[1] = {SEG_ROWS};
  DLTensor data = tensor(b->dev[B_SEG_DATA], kDLCUDA, device, f32, 2, data_shape);
  DLTensor out = tensor(b->dev[B_SEG_OUT], kDLCUDA, device, f32, 2, out_shape);
  DLTensor ids = tensor(b->dev[B_SEG_IDS], kDLCUDA, device, i64, 1, ids_shape);
  CHECK_OK(
      jitops_segment_reduce(rt, JITOPS_SEGMENT_SUM, &data, &ids, SEG_COUNT, &out, NULL, NULL, s));

  int64_t rx_shape[2] = {REP_ROWS, REP_COLS}, ry_shape[3] = {2, 3 * REP_ROWS, 4 * REP_COLS};
  DLTensor rx = tensor(b->dev[B_REP_X], kDLCUDA, device, f32, 2, rx_shape);
  DLTensor ry = tensor(b->dev[B_REP_Y], kDLCUDA, device, f32, 3, ry_shape);
  CHECK_OK(jitops_repeat(rt, &rx, rep_repeats, 3, &ry, s));
}

/* Elements that differ from the host reference (all results are exact). */
static int64_t count_wrong(const buffers *b) {
  const float *x = b->host[B_X], *y = b->host[B_Y], *out = b->host[B_OUT];
  int64_t wrong = 0;
  for (size_t i = 0; i < AXPY_N; ++i)
    wrong += out[i] != 1.75f * x[i] + y[i];
  const float *sx = b->host[B_SCAN_X], *sy = b->host[B_SCAN_Y];
  for (size_t r = 0; r < SCAN_ROWS; ++r) {
    double sum = 0;
    for (size_t c = 0; c < SCAN_COLS; ++c)
      wrong += sy[r * SCAN_COLS + c] != (sum += sx[r * SCAN_COLS + c]);
  }
  /* Each worker thread checks its own results: no shared scratch here. */
  double *sums = calloc((size_t)SEG_COUNT * SEG_COLS, sizeof *sums);
  CHECK(sums != NULL);
  if (sums == NULL)
    return 1;
  const float *data = b->host[B_SEG_DATA], *seg = b->host[B_SEG_OUT];
  const int64_t *ids = b->host[B_SEG_IDS];
  for (size_t r = 0; r < SEG_ROWS; ++r)
    for (size_t c = 0; c < SEG_COLS; ++c)
      sums[ids[r] * SEG_COLS + c] += data[r * SEG_COLS + c];
  for (size_t i = 0; i < SEG_COUNT * SEG_COLS; ++i)
    wrong += seg[i] != sums[i];
  const float *rx = b->host[B_REP_X], *ry = b->host[B_REP_Y];
  for (size_t i = 0; i < REP_OUT; ++i) {
    size_t col = i % (4 * REP_COLS), row = i / (4 * REP_COLS) % (3 * REP_ROWS);
    wrong += ry[i] != rx[(row % REP_ROWS) * REP_COLS + col % REP_COLS];
  }
  free(sums);
  return wrong;
}

typedef struct worker {
  jitops_runtime_t *rt;
  int device;
  pthread_barrier_t *start;
  int64_t wrong; /* over all iterations */
} worker;

static void *run_worker(void *arg) {
  worker *w = arg;
  uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->device + 1);
  CUDA_OK(cudaSetDevice(w->device)); /* for this thread's cudart allocations and stream */
  cudaStream_t s = NULL;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  buffers b;
  buffers_alloc(&b);
  pthread_barrier_wait(w->start); /* both devices ask for the same kernels at once */
  for (int it = 0; it < ITERATIONS; ++it) {
    upload_inputs(&b, &seed, s);
    run_ops(w->rt, w->device, &b, s);
    download_outputs(&b, s);
    w->wrong += count_wrong(&b);
  }
  buffers_free(&b);
  cudaStreamDestroy(s);
  return NULL;
}

/* Both devices at once; then each kernel compiled once between them when they are alike. */
static void concurrent_devices_compile_once(jitops_runtime_t **rts) {
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, DEVICES);
  worker workers[DEVICES];
  pthread_t threads[DEVICES];
  for (int d = 0; d < DEVICES; ++d) {
    workers[d] = (worker){rts[d], d, &start, 0};
    pthread_create(&threads[d], NULL, run_worker, &workers[d]);
  }
  for (int d = 0; d < DEVICES; ++d) {
    pthread_join(threads[d], NULL);
    if (workers[d].wrong != 0)
      fprintf(stderr, "device %d: %lld wrong elements\n", d, (long long)workers[d].wrong);
    CHECK(workers[d].wrong == 0);
  }
  pthread_barrier_destroy(&start);
  jitops_runtime_info info[DEVICES];
  jitops_stats st[DEVICES];
  for (int d = 0; d < DEVICES; ++d) {
    CHECK_OK(jitops_runtime_get_info(rts[d], &info[d]));
    CHECK_OK(jitops_runtime_get_stats(rts[d], &st[d]));
    printf("device %d (%s, %s): %llu compiles, %llu shared hits, %llu memory hits\n", d,
           info[d].device_name, info[d].arch_name, (unsigned long long)st[d].compiles,
           (unsigned long long)st[d].shared_hits, (unsigned long long)st[d].memory_hits);
    CHECK(st[d].compile_errors == 0 && st[d].disk_hits == 0);
  }
  if (info[0].arch != info[1].arch || strcmp(info[0].device_name, info[1].device_name) != 0) {
    printf("devices differ: the compile-once check needs two alike\n");
    return;
  }
  /* Each runtime needed the same kernels; each was compiled by one and shared by the other. */
  const uint64_t kernels = st[0].misses + st[0].shared_hits;
  CHECK(kernels >= 4 && st[1].misses + st[1].shared_hits == kernels);
  CHECK(st[0].compiles + st[1].compiles == kernels);
  CHECK(st[0].shared_hits + st[1].shared_hits == kernels);
}

/* Each op family, given a tensor on device 1 by device 0's runtime. */
static void wrong_device_is_refused(jitops_runtime_t *rt0, void *mem0, void *mem1) {
  int64_t s48[2] = {4, 8}, s88[2] = {8, 8}, s34[2] = {3, 4}, s168[2] = {16, 8}, s4[1] = {4};
  const int64_t repeats[2] = {2, 1};
  DLTensor x1 = tensor(mem1, kDLCUDA, 1, f32, 2, s48), y0 = tensor(mem0, kDLCUDA, 0, f32, 2, s48);
  CHECK_FAILS(jitops_scan(rt0, JITOPS_SCAN_CUMSUM, &x1, 1, 0, &y0, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_DEVICE,
              "x is on CUDA device 1, but the runtime is bound to device 0");
  DLTensor x0 = tensor(mem0, kDLCUDA, 0, f32, 2, s48), y1 = tensor(mem1, kDLCUDA, 1, f32, 2, s88);
  CHECK_FAILS(jitops_repeat(rt0, &x0, repeats, 2, &y1, NULL), JITOPS_ERR_INVALID_DEVICE,
              "y is on CUDA device 1, but the runtime is bound to device 0");

  int64_t host_ids[8] = {0, 1, 2, 0, 1, 2, 0, 1}, ids_shape[1] = {8}, data_shape[2] = {8, 4};
  DLTensor data1 = tensor(mem1, kDLCUDA, 1, f32, 2, data_shape);
  DLTensor ids = tensor(host_ids, kDLCPU, 0, i64, 1, ids_shape);
  DLTensor out0 = tensor(mem0, kDLCUDA, 0, f32, 2, s34);
  CHECK_FAILS(
      jitops_segment_reduce(rt0, JITOPS_SEGMENT_SUM, &data1, &ids, 3, &out0, NULL, NULL, NULL),
      JITOPS_ERR_INVALID_DEVICE, "data is on CUDA device 1, but the runtime is bound to device 0");

  int64_t lp_shape[3] = {5, 2, 4}, tg_shape[2] = {2, 2}, len_shape[1] = {2};
  int64_t targets[4] = {1, 2, 3, 1}, input_lengths[2] = {5, 5}, target_lengths[2] = {2, 2};
  DLTensor lp1 = tensor(mem1, kDLCUDA, 1, f32, 3, lp_shape);
  DLTensor tg = tensor(targets, kDLCPU, 0, i64, 2, tg_shape);
  DLTensor il = tensor(input_lengths, kDLCPU, 0, i64, 1, len_shape);
  DLTensor tl = tensor(target_lengths, kDLCPU, 0, i64, 1, len_shape);
  DLTensor loss0 = tensor(mem0, kDLCUDA, 0, f32, 0, NULL);
  CHECK_FAILS(jitops_ctc_loss(rt0, &lp1, &tg, &il, &tl, NULL, &loss0, NULL, NULL),
              JITOPS_ERR_INVALID_DEVICE,
              "log_probs is on CUDA device 1, but the runtime is bound to device 0");

  DLTensor input0 = tensor(mem0, kDLCUDA, 0, f32, 2, s48);
  DLTensor weight1 = tensor(mem1, kDLCUDA, 1, f32, 2, s168);
  DLTensor target0 = tensor((char *)mem0 + 4096, kDLCUDA, 0, i64, 1, s4);
  DLTensor flce_loss0 = tensor((char *)mem0 + 8192, kDLCUDA, 0, f32, 0, NULL);
  jitops_flce_tensors t = {&input0,     &weight1, NULL, &target0, NULL,
                           &flce_loss0, NULL,     NULL, NULL,     NULL};
  CHECK_FAILS(jitops_flce_forward(rt0, &t, NULL, NULL, NULL), JITOPS_ERR_INVALID_DEVICE,
              "weight is on CUDA device 1, but the runtime is bound to device 0");
}

/* Device 0's kernel launched on device 1's stream. */
static void wrong_device_stream_is_refused(jitops_runtime_t *rt0) {
  jitops_kernel_t *axpy = axpy_kernel(rt0);
  cudaStream_t s1 = NULL;
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  long long n = 0; /* touches no memory, whatever runs */
  float a = 1.0f;
  void *none = NULL;
  void *args[] = {&n, &a, &none, &none, &none};
  jitops_launch_params p = {{1, 1, 1}, {256, 1, 1}, 0, s1};
  if (axpy != NULL)
    CHECK_FAILS(jitops_kernel_launch(axpy, &p, args), JITOPS_ERR_INVALID_DEVICE,
                "the stream belongs to another context");
  cudaStream_t s0 = NULL;
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK_FAILS(jitops_stream_wait(rt0, s0, s1), JITOPS_ERR_INVALID_DEVICE, "another context");
  CHECK_FAILS(jitops_stream_wait(rt0, s1, s0), JITOPS_ERR_INVALID_DEVICE, "another context");
  CUDA_OK(cudaStreamDestroy(s0));
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaStreamDestroy(s1));
  CUDA_OK(cudaSetDevice(0));
}

/* Device 1's memory given to device 0's runtime, as a binding asks before a launch. */
static void wrong_device_pointer_is_refused(jitops_runtime_t *rt0) {
  void *on1 = NULL;
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaMalloc(&on1, 256));
  CUDA_OK(cudaSetDevice(0));
  CHECK_FAILS(jitops_pointer_check(rt0, (char *)on1 + 16), JITOPS_ERR_INVALID_DEVICE,
              "is device 1's memory; the runtime runs on device 0");
  CUDA_OK(cudaFree(on1));
}

static void skip_unless_two_devices(void) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < DEVICES) {
    printf("test_gpu_multi_device: skipped, %d CUDA device(s) (%s); it needs %d\n",
           e == cudaSuccess ? count : 0, cudaGetErrorString(e), DEVICES);
    exit(TEST_SKIP);
  }
}

int main(void) {
  skip_unless_two_devices();
  jitops_runtime_t *rts[DEVICES] = {NULL, NULL};
  for (int d = 0; d < DEVICES; ++d) {
    jitops_runtime_config cfg;
    jitops_runtime_config_init(&cfg);
    cfg.device = d;
    cfg.cache_mode = JITOPS_CACHE_MODE_OFF; /* compile once without any disk tier */
    CHECK_OK(jitops_runtime_create(&cfg, &rts[d]));
    if (rts[d] == NULL)
      return test_finish("test_gpu_multi_device");
  }
  concurrent_devices_compile_once(rts);
  void *mem[DEVICES] = {NULL, NULL};
  for (int d = 0; d < DEVICES; ++d) {
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaMalloc(&mem[d], 1 << 16));
  }
  CUDA_OK(cudaSetDevice(0));
  wrong_device_is_refused(rts[0], mem[0], mem[1]);
  wrong_device_stream_is_refused(rts[0]);
  wrong_device_pointer_is_refused(rts[0]);
  for (int d = 0; d < DEVICES; ++d) {
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaFree(mem[d]));
    jitops_runtime_destroy(rts[d]);
  }
  return test_finish("test_gpu_multi_device");
}
