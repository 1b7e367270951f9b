/* Host time of one op call from C, the baseline of bench_host_overhead.py (issue 19, host
 * overhead): small problems, where launching costs more than computing, called the way the
 * Python package calls them (same tensors, options and outputs).
 *
 * A shared library (libop_host_overhead.so), so that the benchmark times the C calls in its own
 * process, interleaved with the Python calls in short batches: the lent hosts' speed drifts by
 * tens of percent between minutes, which a C program run at another moment cannot cancel.
 * op_host_overhead_main.c is the same as a program of its own.
 *
 * ohc_open makes a runtime for device 0, cudaMalloc'd tensors and, for each op, a workspace of
 * the size its *_workspace_size asks for (so a call allocates nothing). ohc_time times calls on
 * the legacy default stream, each alone with clock_gettime(CLOCK_MONOTONIC), synchronizing (not
 * timed) before the first and after every `batch` calls so that the GPU queue never fills.
 * Nothing here exits or prints: a failure returns nonzero and ohc_error() says why. */
#include "op_host_overhead.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jitops/jitops.h>

enum { MAX_BUFFERS = 32, NUM_OPS = 6 };

static const DLDataType F32 = {kDLFloat, 32, 1};
static const DLDataType I64 = {kDLInt, 64, 1};

/* Every tensor of every op, with the shapes they point to. */
typedef struct problem {
  jitops_runtime_t *rt;
  void *buffers[MAX_BUFFERS];
  int num_buffers;
  /* cumsum of [4, 1024] f32 along dim 1 */
  int64_t scan_shape[2];
  DLTensor scan_x, scan_y;
  /* segment_sum of [1024, 8] f32 into 64 segments, int64 ids on the device */
  int64_t seg_data_shape[2], seg_ids_shape[1], seg_out_shape[2];
  DLTensor seg_data, seg_ids, seg_out;
  jitops_segment_options seg_options;
  /* repeat of [64, 64] f32 by (2, 2) */
  int64_t rep_x_shape[2], rep_y_shape[2], repeats[2];
  DLTensor rep_x, rep_y;
  /* ctc_loss, T 32, N 4, C 16, S 8, mean, lengths on the device */
  int64_t ctc_lp_shape[3], ctc_targets_shape[2], ctc_lengths_shape[1];
  DLTensor ctc_lp, ctc_targets, ctc_input_lengths, ctc_target_lengths, ctc_loss;
  jitops_ctc_options ctc_options;
  /* fused linear cross-entropy, BT 64, H 64, V 256 f32, mean: the loss (what
   * jitops.ops.fused_linear_cross_entropy computes under no_grad), or also grad_input and
   * grad_weight (what it computes when the inputs require gradients) */
  int64_t flce_input_shape[2], flce_weight_shape[2], flce_rows_shape[1];
  DLTensor flce_input, flce_weight, flce_target, flce_loss, flce_grad_input, flce_grad_weight;
  jitops_flce_tensors flce, flce_grads;
  jitops_flce_options flce_options;
  /* one workspace per op, of the size its *_workspace_size asks for */
  jitops_workspace workspaces[NUM_OPS];
} problem;

static problem P;
static char error_text[512];

/* Records why the last ohc_* call failed (the first reason wins until ohc_open clears it). */
static int fail(const char *what, const char *why) {
  if (error_text[0] == '\0')
    snprintf(error_text, sizeof error_text, "%s: %s", what, why);
  return 1;
}

/* A compact device tensor (cudaMalloc), filled from `host` if given, else zeroed. */
static DLTensor device_tensor(problem *p, DLDataType dtype, int ndim, int64_t *shape,
                              const void *host) {
  DLTensor t = {.device = {kDLCUDA, 0}, .ndim = ndim, .dtype = dtype, .shape = shape};
  size_t bytes = dtype.bits / 8;
  for (int d = 0; d < ndim; ++d)
    bytes *= (size_t)shape[d];
  cudaError_t err =
      p->num_buffers < MAX_BUFFERS ? cudaMalloc(&t.data, bytes) : cudaErrorMemoryAllocation;
  if (err == cudaSuccess)
    err = host ? cudaMemcpy(t.data, host, bytes, cudaMemcpyHostToDevice)
               : cudaMemset(t.data, 0, bytes);
  if (err != cudaSuccess) {
    fail("device memory", cudaGetErrorString(err));
    return t;
  }
  p->buffers[p->num_buffers++] = t.data;
  return t;
}

/* Every op's tensors; nonzero (with the reason recorded) when device memory fails. */
static int setup(problem *p) {
  int64_t ids[1024], targets[4 * 8], flce_targets[64];
  int64_t input_lengths[4] = {32, 32, 32, 32}, target_lengths[4] = {8, 8, 8, 8};
  for (int i = 0; i < 1024; ++i)
    ids[i] = (i * 37) % 64;
  for (int i = 0; i < 4 * 8; ++i)
    targets[i] = 1 + i % 15;
  for (int i = 0; i < 64; ++i)
    flce_targets[i] = (i * 7) % 256;

  p->scan_shape[0] = 4, p->scan_shape[1] = 1024;
  p->scan_x = device_tensor(p, F32, 2, p->scan_shape, NULL);
  p->scan_y = device_tensor(p, F32, 2, p->scan_shape, NULL);

  p->seg_data_shape[0] = 1024, p->seg_data_shape[1] = 8;
  p->seg_ids_shape[0] = 1024;
  p->seg_out_shape[0] = 64, p->seg_out_shape[1] = 8;
  p->seg_data = device_tensor(p, F32, 2, p->seg_data_shape, NULL);
  p->seg_ids = device_tensor(p, I64, 1, p->seg_ids_shape, ids);
  p->seg_out = device_tensor(p, F32, 2, p->seg_out_shape, NULL);
  jitops_segment_options_init(&p->seg_options);

  p->rep_x_shape[0] = p->rep_x_shape[1] = 64;
  p->rep_y_shape[0] = p->rep_y_shape[1] = 128;
  p->repeats[0] = p->repeats[1] = 2;
  p->rep_x = device_tensor(p, F32, 2, p->rep_x_shape, NULL);
  p->rep_y = device_tensor(p, F32, 2, p->rep_y_shape, NULL);

  p->ctc_lp_shape[0] = 32, p->ctc_lp_shape[1] = 4, p->ctc_lp_shape[2] = 16;
  p->ctc_targets_shape[0] = 4, p->ctc_targets_shape[1] = 8;
  p->ctc_lengths_shape[0] = 4;
  p->ctc_lp = device_tensor(p, F32, 3, p->ctc_lp_shape, NULL);
  p->ctc_targets = device_tensor(p, I64, 2, p->ctc_targets_shape, targets);
  p->ctc_input_lengths = device_tensor(p, I64, 1, p->ctc_lengths_shape, input_lengths);
  p->ctc_target_lengths = device_tensor(p, I64, 1, p->ctc_lengths_shape, target_lengths);
  p->ctc_loss = device_tensor(p, F32, 0, NULL, NULL);
  jitops_ctc_options_init(&p->ctc_options);

  p->flce_input_shape[0] = 64, p->flce_input_shape[1] = 64;
  p->flce_weight_shape[0] = 256, p->flce_weight_shape[1] = 64;
  p->flce_rows_shape[0] = 64;
  p->flce_input = device_tensor(p, F32, 2, p->flce_input_shape, NULL);
  p->flce_weight = device_tensor(p, F32, 2, p->flce_weight_shape, NULL);
  p->flce_target = device_tensor(p, I64, 1, p->flce_rows_shape, flce_targets);
  p->flce_loss = device_tensor(p, F32, 0, NULL, NULL);
  p->flce_grad_input = device_tensor(p, F32, 2, p->flce_input_shape, NULL);
  p->flce_grad_weight = device_tensor(p, F32, 2, p->flce_weight_shape, NULL);
  p->flce = (jitops_flce_tensors){.input = &p->flce_input,
                                  .weight = &p->flce_weight,
                                  .target = &p->flce_target,
                                  .loss = &p->flce_loss};
  p->flce_grads = p->flce;
  p->flce_grads.grad_input = &p->flce_grad_input;
  p->flce_grads.grad_weight = &p->flce_grad_weight;
  jitops_flce_options_init(&p->flce_options);
  return error_text[0] != '\0';
}

/* One op: its workspace size query (NULL: it takes none) and its call. */
typedef jitops_status (*size_fn)(problem *p, size_t *bytes);
typedef jitops_status (*call_fn)(problem *p, const jitops_workspace *workspace);

static jitops_status cumsum_size(problem *p, size_t *bytes) {
  return jitops_scan_workspace_size(p->rt, JITOPS_SCAN_CUMSUM, &p->scan_x, 1, 0, &p->scan_y, NULL,
                                    bytes);
}
static jitops_status cumsum_call(problem *p, const jitops_workspace *workspace) {
  return jitops_scan(p->rt, JITOPS_SCAN_CUMSUM, &p->scan_x, 1, 0, &p->scan_y, NULL, workspace,
                     NULL);
}

static jitops_status segment_size(problem *p, size_t *bytes) {
  return jitops_segment_reduce_workspace_size(p->rt, JITOPS_SEGMENT_SUM, &p->seg_data, &p->seg_ids,
                                              64, &p->seg_out, &p->seg_options, bytes);
}
static jitops_status segment_call(problem *p, const jitops_workspace *workspace) {
  return jitops_segment_reduce(p->rt, JITOPS_SEGMENT_SUM, &p->seg_data, &p->seg_ids, 64,
                               &p->seg_out, &p->seg_options, workspace, NULL);
}

static jitops_status repeat_call(problem *p, const jitops_workspace *workspace) {
  (void)workspace; /* jitops_repeat takes none */
  return jitops_repeat(p->rt, &p->rep_x, p->repeats, 2, &p->rep_y, NULL);
}

static jitops_status ctc_size(problem *p, size_t *bytes) {
  return jitops_ctc_workspace_size(p->rt, &p->ctc_lp, &p->ctc_targets, &p->ctc_input_lengths,
                                   &p->ctc_target_lengths, &p->ctc_options, JITOPS_CTC_PASS_LOSS,
                                   bytes);
}
static jitops_status ctc_call(problem *p, const jitops_workspace *workspace) {
  return jitops_ctc_loss(p->rt, &p->ctc_lp, &p->ctc_targets, &p->ctc_input_lengths,
                         &p->ctc_target_lengths, &p->ctc_options, &p->ctc_loss, workspace, NULL);
}

static jitops_status flce_size(problem *p, size_t *bytes) {
  return jitops_flce_workspace_size(p->rt, &p->flce, &p->flce_options, bytes);
}
static jitops_status flce_call(problem *p, const jitops_workspace *workspace) {
  return jitops_flce_forward(p->rt, &p->flce, &p->flce_options, workspace, NULL);
}

static jitops_status flce_grads_size(problem *p, size_t *bytes) {
  return jitops_flce_workspace_size(p->rt, &p->flce_grads, &p->flce_options, bytes);
}
static jitops_status flce_grads_call(problem *p, const jitops_workspace *workspace) {
  return jitops_flce_forward(p->rt, &p->flce_grads, &p->flce_options, workspace, NULL);
}

static const struct {
  const char *name;
  size_fn size;
  call_fn call;
} OPS[NUM_OPS] = {
    {"cumsum", cumsum_size, cumsum_call},
    {"segment_sum", segment_size, segment_call},
    {"repeat", NULL, repeat_call},
    {"ctc_loss", ctc_size, ctc_call},
    {"fused_linear_cross_entropy", flce_size, flce_call},
    {"fused_linear_cross_entropy_grads", flce_grads_size, flce_grads_call},
};

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int check(const char *op, jitops_status status) {
  return status == JITOPS_SUCCESS ? 0 : fail(op, jitops_last_error());
}

static int synchronize(void) {
  cudaError_t err = cudaDeviceSynchronize();
  return err == cudaSuccess ? 0 : fail("cudaDeviceSynchronize", cudaGetErrorString(err));
}

static int make_workspaces(problem *p) {
  for (int i = 0; i < NUM_OPS; ++i) {
    size_t bytes = 0;
    if (OPS[i].size && check(OPS[i].name, OPS[i].size(p, &bytes)))
      return 1;
    p->workspaces[i] = (jitops_workspace){NULL, bytes};
    if (bytes && cudaMalloc(&p->workspaces[i].ptr, bytes) != cudaSuccess)
      return fail(OPS[i].name, "cudaMalloc of the workspace failed");
  }
  return 0;
}

int ohc_open(void) {
  ohc_close();
  error_text[0] = '\0';
  jitops_status status = jitops_runtime_create(NULL, &P.rt);
  if (status == JITOPS_ERR_NO_DEVICE) {
    fail("no GPU", jitops_last_error());
    return 77;
  }
  if (check("jitops_runtime_create", status) || setup(&P) || make_workspaces(&P)) {
    ohc_close();
    return 1;
  }
  return 0;
}

void ohc_close(void) {
  if (P.rt == NULL)
    return;
  cudaDeviceSynchronize();
  for (int i = 0; i < NUM_OPS; ++i)
    cudaFree(P.workspaces[i].ptr);
  for (int i = 0; i < P.num_buffers; ++i)
    cudaFree(P.buffers[i]);
  jitops_runtime_destroy(P.rt);
  memset(&P, 0, sizeof P);
}

const char *ohc_error(void) {
  return error_text;
}

int ohc_op_count(void) {
  return NUM_OPS;
}

const char *ohc_op_name(int op) {
  return op >= 0 && op < NUM_OPS ? OPS[op].name : NULL;
}

const char *ohc_device(void) {
  static jitops_runtime_info info;
  if (P.rt == NULL || jitops_runtime_get_info(P.rt, &info) != JITOPS_SUCCESS)
    return "";
  return info.device_name;
}

int ohc_call(int op) {
  if (P.rt == NULL)
    return fail("ohc_call", "ohc_open has not succeeded");
  if (op < 0 || op >= NUM_OPS)
    return fail("ohc_call", "op out of range");
  return check(OPS[op].name, OPS[op].call(&P, &P.workspaces[op]));
}

int ohc_time(int op, int warmup, int calls, int batch, double *ns) {
  if (P.rt == NULL)
    return fail("ohc_time", "ohc_open has not succeeded");
  if (op < 0 || op >= NUM_OPS || warmup < 0 || calls < 0 || batch < 1)
    return fail("ohc_time", "op, warmup, calls or batch out of range");
  const jitops_workspace *workspace = &P.workspaces[op];
  for (int i = 0; i < warmup; ++i)
    if (check(OPS[op].name, OPS[op].call(&P, workspace)))
      return 1;
  if (synchronize())
    return 1;
  for (int i = 0; i < calls; ++i) {
    double start = now_ns();
    jitops_status status = OPS[op].call(&P, workspace);
    ns[i] = now_ns() - start;
    if (check(OPS[op].name, status) || ((i + 1) % batch == 0 && synchronize()))
      return 1;
  }
  return synchronize();
}
