/* Issue 21's cold start: the first call of every op at every shape and dtype of the benchmark
 * tables (docs/benchmarks.md), forward and backward as separate rows, on a compile-only
 * runtime (sm_90): CPU only. The ops run as a user calls them, on fake but aligned device
 * addresses that nothing reads: they validate, plan, get their kernels (memory, disk, NVRTC),
 * then stop with JITOPS_ERR_NO_DEVICE where a GPU would launch.
 *
 *   cold  a fresh process and an empty cache directory: what the call compiles (quick builds
 *         where the op allows them: runtime/kernel_batch.h; the process then waits for their
 *         full builds, outside the time, as jitops_runtime_destroy does);
 *   warm  a fresh process on the directory the cold call filled: the kernels from disk.
 *
 * Each sample runs in a process of its own, so that nothing (NVRTC's first-use cost, the
 * registry, the process-wide image cache) carries over from another row. A table per op
 * family: kernels compiled, cold seconds and warm milliseconds, medians of REPEAT samples,
 * each as wall time and as the process's CPU time (all threads): on a shared machine a
 * sub-millisecond call's wall time is mostly the scheduler's, its CPU time is not.
 *
 * Usage: bench_cold_start [REPEAT (default 3)] [FAMILY ...]  (scan scan-long repeat ctc segment
 * flce) */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jitops/ctc.h"
#include "jitops/flce.h"
#include "jitops/repeat.h"
#include "jitops/scan.h"
#include "jitops/segment.h"
#include "testutil.h"

enum { MAX_REPEAT = 15, MAX_TENSORS = 16 };

static const DLDataType F32 = {kDLFloat, 32, 1}, BF16 = {kDLBfloat, 16, 1}, I64 = {kDLInt, 64, 1};

/* ---- rows ------------------------------------------------------------------------------- */

typedef struct row row;
typedef jitops_status (*call_fn)(jitops_runtime_t *rt, const row *r);

/* One table row: a call of an op, its arguments in p[] (what each family's call reads). */
struct row {
  const char *family;
  char label[96];
  call_fn call;
  int64_t p[6];
};

/* Fake device tensors: compact, row-major, 1 TiB apart (more than any tensor here), aligned
 * as an allocator's are. */
typedef struct tensors {
  DLTensor t[MAX_TENSORS];
  int64_t shape[MAX_TENSORS][3];
  int count;
} tensors;

static DLTensor *tensor(tensors *ts, DLDataType dtype, int ndim, int64_t d0, int64_t d1,
                        int64_t d2) {
  int i = ts->count++;
  int64_t *shape = ts->shape[i];
  shape[0] = d0, shape[1] = d1, shape[2] = d2;
  ts->t[i] = (DLTensor){.data = (void *)(uintptr_t)((uint64_t)(i + 1) << 40),
                        .device = {kDLCUDA, 0},
                        .ndim = ndim,
                        .dtype = dtype,
                        .shape = shape};
  return &ts->t[i];
}

/* scan: p = {op, axis, backward, length, bf16}; f32 8192 x 8192, or with a length a 1-D tensor
 * of that many elements (the long-axis table). */
static jitops_status scan_call(jitops_runtime_t *rt, const row *r) {
  tensors ts = {0};
  const jitops_scan_op op = (jitops_scan_op)r->p[0];
  const int axis = (int)r->p[1];
  const int extremum = op == JITOPS_SCAN_CUMMAX || op == JITOPS_SCAN_CUMMIN;
  const DLDataType dt = r->p[4] ? BF16 : F32;
  const int ndim = r->p[3] ? 1 : 2;
  const int64_t d0 = r->p[3] ? r->p[3] : 8192, d1 = r->p[3] ? 0 : 8192;
  DLTensor *x = tensor(&ts, dt, ndim, d0, d1, 0), *y = tensor(&ts, dt, ndim, d0, d1, 0);
  DLTensor *idx = extremum ? tensor(&ts, I64, ndim, d0, d1, 0) : NULL;
  if (!r->p[2])
    return jitops_scan(rt, op, x, axis, 0, y, idx, NULL, NULL);
  DLTensor *dy = tensor(&ts, dt, ndim, d0, d1, 0), *dx = tensor(&ts, dt, ndim, d0, d1, 0);
  const int saved = op == JITOPS_SCAN_CUMPROD || op == JITOPS_SCAN_LOGCUMSUMEXP;
  return jitops_scan_backward(rt, op, dy, saved ? x : NULL, saved ? y : NULL, idx, axis, 0, dx,
                              NULL, NULL);
}

/* repeat: p = {backward}; f32 [1024, 1024] by (4, 4). */
static jitops_status repeat_call(jitops_runtime_t *rt, const row *r) {
  tensors ts = {0};
  const int64_t repeats[2] = {4, 4};
  DLTensor *small = tensor(&ts, F32, 2, 1024, 1024, 0), *big = tensor(&ts, F32, 2, 4096, 4096, 0);
  if (!r->p[0])
    return jitops_repeat(rt, small, repeats, 2, big, NULL);
  return jitops_repeat_backward(rt, big, repeats, 2, small, NULL, NULL);
}

/* ctc: p = {T, N, C, S, bf16, pass: 0 loss, 1 backward, 2 backward with the loss}; int64
 * padded targets, int64 device lengths, mean reduction, PyTorch's gradient (bench_ctc.py). */
static jitops_status ctc_call(jitops_runtime_t *rt, const row *r) {
  tensors ts = {0};
  const int64_t T = r->p[0], N = r->p[1], C = r->p[2], S = r->p[3];
  DLTensor *lp = tensor(&ts, r->p[4] ? BF16 : F32, 3, T, N, C);
  DLTensor *targets = tensor(&ts, I64, 2, N, S, 0);
  DLTensor *il = tensor(&ts, I64, 1, N, 0, 0), *tl = tensor(&ts, I64, 1, N, 0, 0);
  DLTensor *loss = tensor(&ts, F32, 0, 0, 0, 0), *grad_loss = tensor(&ts, F32, 0, 0, 0, 0);
  jitops_ctc_options options;
  jitops_ctc_options_init(&options);
  options.gradient = JITOPS_CTC_GRADIENT_PYTORCH;
  if (r->p[5] == 0)
    return jitops_ctc_loss(rt, lp, targets, il, tl, &options, loss, NULL, NULL);
  DLTensor *grad = tensor(&ts, lp->dtype, 3, T, N, C);
  return jitops_ctc_loss_backward(rt, lp, targets, il, tl, grad_loss, &options, grad,
                                  r->p[5] == 2 ? loss : NULL, NULL, NULL);
}

/* segment: p = {N, D, S, reduction, sorted, backward}; f32 data, int64 ids (bench_segment.py). */
static jitops_status segment_call(jitops_runtime_t *rt, const row *r) {
  tensors ts = {0};
  const int64_t N = r->p[0], D = r->p[1], S = r->p[2];
  const jitops_segment_reduction reduction = (jitops_segment_reduction)r->p[3];
  DLTensor *data = tensor(&ts, F32, 2, N, D, 0), *ids = tensor(&ts, I64, 1, N, 0, 0);
  DLTensor *out = tensor(&ts, F32, 2, S, D, 0);
  jitops_segment_options options;
  jitops_segment_options_init(&options);
  options.sorted = (int)r->p[4];
  if (!r->p[5])
    return jitops_segment_reduce(rt, reduction, data, ids, S, out, &options, NULL, NULL);
  DLTensor *dy = tensor(&ts, F32, 2, S, D, 0), *dx = tensor(&ts, F32, 2, N, D, 0);
  return jitops_segment_reduce_backward(rt, reduction, dy, data, out, ids, S, dx, &options, NULL,
                                        NULL);
}

/* flce: p = {BT, H, V, budget (0: the least automatic one, 1 GiB, on a compile-only
 * runtime), backward}; bf16, mean, grad_input and grad_weight (bench_flce.py). */
static jitops_status flce_call(jitops_runtime_t *rt, const row *r) {
  tensors ts = {0};
  const int64_t BT = r->p[0], H = r->p[1], V = r->p[2];
  DLTensor *gi = tensor(&ts, BF16, 2, BT, H, 0), *gw = tensor(&ts, BF16, 2, V, H, 0);
  DLTensor *loss = tensor(&ts, F32, 0, 0, 0, 0);
  if (r->p[4])
    return jitops_flce_backward(rt, loss, gi, gw, NULL, NULL);
  jitops_flce_tensors t = {.input = tensor(&ts, BF16, 2, BT, H, 0),
                           .weight = tensor(&ts, BF16, 2, V, H, 0),
                           .target = tensor(&ts, I64, 1, BT, 0, 0),
                           .loss = loss,
                           .grad_input = gi,
                           .grad_weight = gw};
  jitops_flce_options options;
  jitops_flce_options_init(&options);
  options.scratch_budget_bytes = r->p[3];
  return jitops_flce_forward(rt, &t, &options, NULL, NULL);
}

/* ---- the tables' rows ------------------------------------------------------------------ */

enum { MAX_ROWS = 200 };
static row rows[MAX_ROWS];
static int row_count;

static row *add(const char *family, call_fn call) {
  row *r = &rows[row_count++];
  memset(r, 0, sizeof *r);
  r->family = family;
  r->call = call;
  return r;
}

/* The scans of both scan tables, and their names. */
static const char *const scan_names[] = {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"};
static const jitops_scan_op scan_ops[] = {JITOPS_SCAN_CUMSUM, JITOPS_SCAN_CUMPROD,
                                          JITOPS_SCAN_CUMMAX, JITOPS_SCAN_CUMMIN,
                                          JITOPS_SCAN_LOGCUMSUMEXP};

static void add_scans(void) {
  const char *const *names = scan_names;
  const jitops_scan_op *ops = scan_ops;
  for (int backward = 0; backward < 2; ++backward)
    for (int i = 0; i < 5; ++i)
      for (int axis = 1; axis >= 0; --axis) {
        if (backward && ops[i] == JITOPS_SCAN_CUMMIN)
          continue; /* the table has no cummin backward (cummax's kernel) */
        row *r = add("scan", scan_call);
        snprintf(r->label, sizeof r->label, "%s%s, axis %d", names[i], backward ? " backward" : "",
                 axis);
        r->p[0] = ops[i], r->p[1] = axis, r->p[2] = backward;
      }
}

/* The long-axis table: 1-D f32 and bf16 tensors of 2^20 and 2^27 elements. */
static void add_long_scans(void) {
  const char *const *names = scan_names;
  const jitops_scan_op *ops = scan_ops;
  static const int lengths_log2[] = {20, 27};
  for (int bf16 = 0; bf16 < 2; ++bf16)
    for (int l = 0; l < 2; ++l)
      for (int backward = 0; backward < 2; ++backward)
        for (int i = 0; i < 5; ++i) {
          if (backward && ops[i] == JITOPS_SCAN_CUMMIN)
            continue; /* cummax's kernel */
          row *r = add("scan-long", scan_call);
          snprintf(r->label, sizeof r->label, "%s%s, %s 2^%d", names[i],
                   backward ? " backward" : "", bf16 ? "bf16" : "f32", lengths_log2[l]);
          r->p[0] = ops[i], r->p[1] = 0, r->p[2] = backward;
          r->p[3] = (int64_t)1 << lengths_log2[l], r->p[4] = bf16;
        }
}

static void add_repeats(void) {
  for (int backward = 0; backward < 2; ++backward) {
    row *r = add("repeat", repeat_call);
    snprintf(r->label, sizeof r->label, "repeat (4, 4)%s", backward ? " backward" : "");
    r->p[0] = backward;
  }
}

static void add_ctcs(void) {
  static const int64_t shapes[][5] = {{500, 64, 64, 100, 0},  {1000, 32, 256, 400, 0},
                                      {2400, 4, 64, 2000, 0}, {500, 256, 64, 100, 0},
                                      {1000, 1, 64, 100, 0},  {200, 2, 32, 50, 0},
                                      {150, 512, 40, 60, 0},  {500, 64, 64, 100, 1}};
  static const char *const passes[] = {"loss", "backward", "fused (backward + loss)"};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    for (int pass = 0; pass < 3; ++pass) {
      const int64_t *v = shapes[s];
      row *r = add("ctc", ctc_call);
      snprintf(r->label, sizeof r->label, "%lld, %lld, %lld, %lld%s: %s", (long long)v[0],
               (long long)v[1], (long long)v[2], (long long)v[3], v[4] ? " (bf16)" : "",
               passes[pass]);
      memcpy(r->p, v, sizeof *v * 5);
      r->p[5] = pass;
    }
}

static void add_segments(void) {
  static const int64_t shapes[][4] = {{1 << 20, 64, 10000, 0},   {1 << 20, 1, 10000, 0},
                                      {1 << 20, 1024, 10000, 0}, {1 << 20, 64, 100, 0},
                                      {1 << 20, 64, 1000000, 0}, {1 << 20, 64, 10000, 1}};
  static const char *const names[] = {"sum", "mean", "max", "min"};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    for (int red = 0; red < 4; ++red)
      for (int backward = 0; backward < 2; ++backward) {
        const int64_t *v = shapes[s];
        row *r = add("segment", segment_call);
        snprintf(r->label, sizeof r->label, "2^20 x %lld, %lld: %s%s%s", (long long)v[1],
                 (long long)v[2], names[red], v[3] ? " sorted" : "", backward ? " backward" : "");
        r->p[0] = v[0], r->p[1] = v[1], r->p[2] = v[2], r->p[3] = red, r->p[4] = v[3];
        r->p[5] = backward;
      }
}

static void add_flces(void) {
  static const int64_t shapes[][3] = {
      {8192, 4096, 128256}, {2048, 4096, 128256}, {8192, 4096, 32000}, {32768, 4096, 128256}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    for (int one_chunk = 0; one_chunk < 2; ++one_chunk) {
      const int64_t *v = shapes[s];
      row *r = add("flce", flce_call);
      snprintf(r->label, sizeof r->label, "%lld x %lld x %lld, %s", (long long)v[0],
               (long long)v[1], (long long)v[2], one_chunk ? "one chunk" : "1 GiB budget");
      r->p[0] = v[0], r->p[1] = v[1], r->p[2] = v[2];
      /* One chunk: the budget holds every row's bf16 logits beside the rest (1 GiB). */
      r->p[3] = one_chunk ? v[0] * v[2] * 2 + ((int64_t)1 << 30) : 0;
    }
  row *r = add("flce", flce_call);
  snprintf(r->label, sizeof r->label, "backward (scale bf16 gradients by dy)");
  r->p[0] = 8192, r->p[1] = 4096, r->p[2] = 128256, r->p[4] = 1;
}

/* ---- one sample, in a child process ---------------------------------------------------- */

typedef struct sample {
  double ms, cpu_ms; /* wall time; CPU time of the process, every thread's */
  int status;        /* the call's status */
  uint64_t compiles, quick_compiles, disk_hits;
} sample;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static sample first_call(const row *r, const char *dir) {
  sample s = {-1, -1, JITOPS_ERR_INTERNAL, 0, 0, 0};
  jitops_runtime_config config = test_offline_config("sm_90", dir);
  config.remote_cache = "";
  jitops_runtime_t *rt = NULL;
  if (jitops_runtime_create(&config, &rt) != JITOPS_SUCCESS)
    return s;
  const double start = now_ms(), cpu_start = cpu_ms();
  s.status = r->call(rt, r);
  s.ms = now_ms() - start;
  s.cpu_ms = cpu_ms() - cpu_start;
  jitops_stats stats;
  jitops_runtime_get_stats(rt, &stats);
  s.compiles = stats.compiles;
  s.quick_compiles = stats.quick_compiles;
  s.disk_hits = stats.disk_hits;
  if (s.status != JITOPS_ERR_NO_DEVICE && s.status != JITOPS_SUCCESS)
    fprintf(stderr, "%s %s: %s: %s\n", r->family, r->label, jitops_status_string(s.status),
            jitops_last_error());
  jitops_runtime_destroy(rt);
  return s;
}

static sample in_child(const row *r, const char *dir) {
  sample s = {-1, -1, JITOPS_ERR_INTERNAL, 0, 0, 0};
  int fds[2];
  if (pipe(fds) != 0)
    return s;
  fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    s = first_call(r, dir);
    _exit(write(fds[1], &s, sizeof s) == (ssize_t)sizeof s ? 0 : 1);
  }
  close(fds[1]);
  if (read(fds[0], &s, sizeof s) != (ssize_t)sizeof s)
    s.ms = -1;
  close(fds[0]);
  waitpid(pid, NULL, 0);
  return s;
}

/* ---- tables ---------------------------------------------------------------------------- */

static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return v[n / 2];
}

static void measure(const row *r, int repeat) {
  double cold[MAX_REPEAT], warm[MAX_REPEAT], cold_cpu[MAX_REPEAT], warm_cpu[MAX_REPEAT];
  sample c = {0}, w = {0};
  int ok = 1;
  for (int i = 0; i < repeat; ++i) {
    char dir[1024];
    test_fresh_dir("bench-cold", dir, sizeof dir);
    c = in_child(r, dir);
    w = in_child(r, dir);
    test_remove_tree(dir);
    cold[i] = c.ms, warm[i] = w.ms, cold_cpu[i] = c.cpu_ms, warm_cpu[i] = w.cpu_ms;
    ok &= c.ms >= 0 && w.ms >= 0 && (c.status == JITOPS_ERR_NO_DEVICE || c.status == 0);
  }
  if (!ok) {
    printf("| %s | failed | | | | | | |\n", r->label);
    return;
  }
  printf("| %s | %llu | %llu | %.3f | %.3f | %.2f | %.2f | %llu |\n", r->label,
         (unsigned long long)c.compiles, (unsigned long long)c.quick_compiles,
         median(cold, repeat) / 1e3, median(cold_cpu, repeat) / 1e3, median(warm, repeat),
         median(warm_cpu, repeat), (unsigned long long)w.disk_hits);
}

static int wanted(const char *family, int argc, char **argv) {
  if (argc <= 2)
    return 1;
  for (int i = 2; i < argc; ++i)
    if (strcmp(argv[i], family) == 0)
      return 1;
  return 0;
}

int main(int argc, char **argv) {
  int repeat = argc > 1 ? atoi(argv[1]) : 3;
  repeat = repeat < 1 ? 1 : repeat > MAX_REPEAT ? MAX_REPEAT : repeat;
  add_scans();
  add_long_scans();
  add_repeats();
  add_ctcs();
  add_segments();
  add_flces();
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  double load[1] = {0};
  getloadavg(load, 1);
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor); /* a constant: it loads nothing NVRTC compiles with */
  printf("Cold start, compile-only runtime (sm_90), NVRTC %d.%d, %ld CPUs, load %.2f at start; "
         "median of %d, each sample a fresh process\n",
         major, minor, cpus, load[0], repeat);
  const char *family = NULL;
  for (int i = 0; i < row_count; ++i) {
    if (!wanted(rows[i].family, argc, argv))
      continue;
    if (family == NULL || strcmp(family, rows[i].family) != 0) {
      family = rows[i].family;
      printf("\n%s\n\n| call | kernels compiled | of them quick | cold s | cold CPU s | warm ms "
             "| warm CPU ms | warm disk hits |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
             family);
    }
    measure(&rows[i], repeat);
  }
  getloadavg(load, 1);
  printf("\nload %.2f at the end\n", load[0]);
  return 0;
}
