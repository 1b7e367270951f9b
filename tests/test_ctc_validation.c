/* CTC loss: every bad argument gives its status and a message naming the argument, before any
 * device work. Runs without a GPU on a compile-only runtime, where valid calls compile their
 * kernels through NVRTC (so the templates are compiled in CI) and then stop at the launch
 * with JITOPS_ERR_NO_DEVICE. */
#include "jitops/ctc.h"
#include "testutil.h"

enum { T = 6, N = 3, C = 5, S = 4 };

/* A fake, aligned device address: never dereferenced on a compile-only runtime. */
#define DEV(offset) ((void *)(uintptr_t)(0x100000 + (offset)))

typedef struct fixture {
  int64_t lp_shape[3], tgt_shape[2], len_shape[1], loss_shape[1], grad_shape[3], ab_shape[3];
  DLTensor lp, tgt, il, tl, loss, grad, gl, la, lb, nll;
  int64_t il_host[N], tl_host[N], tgt_host[N * S];
  jitops_ctc_options opt;
} fixture;

static DLTensor tensor(void *data, DLDeviceType dev, uint8_t code, uint8_t bits, int ndim,
                       int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = dev;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* Valid inputs: f32 log_probs, padded int64 targets and int64 lengths in device memory,
 * reduction none. */
static void fixture_init(fixture *f) {
  memset(f, 0, sizeof *f);
  f->lp_shape[0] = T;
  f->lp_shape[1] = N;
  f->lp_shape[2] = C;
  f->tgt_shape[0] = N;
  f->tgt_shape[1] = S;
  f->len_shape[0] = N;
  f->loss_shape[0] = N;
  memcpy(f->grad_shape, f->lp_shape, sizeof f->grad_shape);
  f->ab_shape[0] = N;
  f->ab_shape[1] = T;
  f->ab_shape[2] = 2 * S + 1;
  f->lp = tensor(DEV(0), kDLCUDA, kDLFloat, 32, 3, f->lp_shape);
  f->tgt = tensor(DEV(0x10000), kDLCUDA, kDLInt, 64, 2, f->tgt_shape);
  f->il = tensor(DEV(0x20000), kDLCUDA, kDLInt, 64, 1, f->len_shape);
  f->tl = tensor(DEV(0x30000), kDLCUDA, kDLInt, 64, 1, f->len_shape);
  f->loss = tensor(DEV(0x40000), kDLCUDA, kDLFloat, 32, 1, f->loss_shape);
  f->grad = tensor(DEV(0x50000), kDLCUDA, kDLFloat, 32, 3, f->grad_shape);
  f->gl = tensor(DEV(0x60000), kDLCUDA, kDLFloat, 32, 1, f->loss_shape);
  f->la = tensor(DEV(0x70000), kDLCUDA, kDLFloat, 32, 3, f->ab_shape);
  f->lb = tensor(DEV(0x80000), kDLCUDA, kDLFloat, 32, 3, f->ab_shape);
  f->nll = tensor(DEV(0x90000), kDLCUDA, kDLFloat, 32, 1, f->len_shape);
  for (int n = 0; n < N; ++n) {
    f->il_host[n] = T;
    f->tl_host[n] = 2;
  }
  for (int i = 0; i < N * S; ++i)
    f->tgt_host[i] = 1 + i % (C - 1);
  jitops_ctc_options_init(&f->opt);
  f->opt.reduction = JITOPS_CTC_REDUCTION_NONE;
}

/* Lengths (and optionally targets) in host memory. */
static void host_lengths(fixture *f, int host_targets) {
  f->il.data = f->il_host;
  f->il.device.device_type = kDLCPU;
  f->tl.data = f->tl_host;
  f->tl.device.device_type = kDLCPU;
  if (host_targets) {
    f->tgt.data = f->tgt_host;
    f->tgt.device.device_type = kDLCPU;
  }
}

static jitops_status loss(jitops_runtime_t *rt, fixture *f) {
  return jitops_ctc_loss(rt, &f->lp, &f->tgt, &f->il, &f->tl, &f->opt, &f->loss, NULL, NULL);
}

static jitops_status backward(jitops_runtime_t *rt, fixture *f, DLTensor *out_loss) {
  return jitops_ctc_loss_backward(rt, &f->lp, &f->tgt, &f->il, &f->tl, &f->gl, &f->opt, &f->grad,
                                  out_loss, NULL, NULL);
}

static jitops_status alpha_beta(jitops_runtime_t *rt, fixture *f) {
  return jitops_ctc_alpha_beta(rt, &f->lp, &f->tgt, &f->il, &f->tl, &f->opt, &f->la, &f->lb,
                               &f->nll, NULL, NULL);
}

static void null_arguments(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  const char *fn = "jitops_ctc_loss";
  CHECK_FAILS(jitops_ctc_loss(NULL, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt, &f.loss, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "runtime is NULL");
  CHECK_FAILS(jitops_ctc_loss(rt, NULL, &f.tgt, &f.il, &f.tl, &f.opt, &f.loss, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "log_probs is NULL");
  CHECK_FAILS(jitops_ctc_loss(rt, &f.lp, NULL, &f.il, &f.tl, &f.opt, &f.loss, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "targets is NULL");
  CHECK_FAILS(jitops_ctc_loss(rt, &f.lp, &f.tgt, NULL, &f.tl, &f.opt, &f.loss, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "input_lengths is NULL");
  CHECK_FAILS(jitops_ctc_loss(rt, &f.lp, &f.tgt, &f.il, NULL, &f.opt, &f.loss, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "target_lengths is NULL");
  CHECK_FAILS(jitops_ctc_loss(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "loss is NULL");
  CHECK_FAILS(jitops_ctc_loss_backward(rt, &f.lp, &f.tgt, &f.il, &f.tl, NULL, &f.opt, &f.grad, NULL,
                                       NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "grad_loss is NULL");
  CHECK_FAILS(jitops_ctc_loss_backward(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.gl, &f.opt, NULL, NULL,
                                       NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "grad_log_probs is NULL");
  CHECK_FAILS(jitops_ctc_alpha_beta(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt, NULL, &f.lb, &f.nll,
                                    NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "log_alpha is NULL");
  CHECK_FAILS(jitops_ctc_alpha_beta(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt, &f.la, NULL, &f.nll,
                                    NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "log_beta is NULL");
  CHECK_FAILS(jitops_ctc_alpha_beta(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt, &f.la, &f.lb, NULL,
                                    NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "nll is NULL");
  size_t bytes;
  CHECK_FAILS(jitops_ctc_workspace_size(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt,
                                        JITOPS_CTC_PASS_LOSS, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "bytes is NULL");
  CHECK_FAILS(jitops_ctc_workspace_size(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt, (jitops_ctc_pass)7,
                                        &bytes),
              JITOPS_ERR_INVALID_ARGUMENT, "pass");
  (void)fn;
}

static void log_probs_checks(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  f.lp.ndim = 2;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "log_probs must have rank 3");
  fixture_init(&f);
  f.lp.dtype.code = kDLInt;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DTYPE, "log_probs must be f16, bf16, f32 or f64");
  fixture_init(&f);
  f.lp.device.device_type = kDLCPU;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DEVICE, "log_probs");
  fixture_init(&f);
  f.lp.byte_offset = 2;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "log_probs's first element is not aligned");
  fixture_init(&f);
  f.lp_shape[2] = 0;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "no classes");
  fixture_init(&f);
  f.lp_shape[0] = (int64_t)1 << 32;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "log_probs' shape");
  fixture_init(&f);
  f.lp_shape[1] = -1;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "log_probs");
}

static void option_checks(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  f.opt.blank = -1;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_ARGUMENT, "options.blank = -1");
  f.opt.blank = C;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_ARGUMENT, "options.blank = 5");
  fixture_init(&f);
  f.opt.reduction = (jitops_ctc_reduction)3;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_ARGUMENT, "options.reduction");
  fixture_init(&f);
  f.opt.gradient = (jitops_ctc_gradient)-1;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_ARGUMENT, "options.gradient");
  fixture_init(&f);
  f.opt.storage = (jitops_ctc_storage)4;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_ARGUMENT, "options.storage");
  fixture_init(&f);
  f.opt.max_target_length = -3;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_ARGUMENT, "options.max_target_length");
  /* A forced tier that cannot hold the capacity. */
  fixture_init(&f);
  f.tgt_shape[1] = 5000; /* 10001 states: capacity 16384 */
  f.opt.storage = JITOPS_CTC_STORAGE_REGISTERS;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_UNSUPPORTED, "options.storage REGISTERS");
  f.tgt_shape[1] = 40000; /* capacity 131072: 768 KiB of f32 states */
  f.opt.storage = JITOPS_CTC_STORAGE_SHARED;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_UNSUPPORTED, "options.storage SHARED");
}

static void target_checks(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  f.tgt.ndim = 3;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "targets");
  fixture_init(&f);
  f.tgt.dtype.code = kDLFloat;
  f.tgt.dtype.bits = 32;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DTYPE, "targets must be i32 or i64");
  fixture_init(&f);
  f.tgt_shape[0] = N + 1;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "padded targets must have shape [N, S]");
  fixture_init(&f);
  f.tgt.byte_offset = 4;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "targets's first element is not aligned");
  fixture_init(&f);
  f.tgt.device.device_type = kDLROCM;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DEVICE, "targets");
  /* Host targets need host lengths. */
  fixture_init(&f);
  f.tgt.data = f.tgt_host;
  f.tgt.device.device_type = kDLCPU;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DEVICE, "targets in host memory need");
}

static void length_checks(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  f.il.ndim = 0;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "input_lengths must have shape [N]");
  fixture_init(&f);
  int64_t bad_shape[1] = {N + 1};
  f.tl.shape = bad_shape;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "target_lengths must have shape [N]");
  fixture_init(&f);
  f.il.dtype.code = kDLFloat;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DTYPE, "input_lengths must be i32 or i64");
  fixture_init(&f);
  f.tl.dtype.bits = 32;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DTYPE, "target_lengths (i32) must have");
  fixture_init(&f);
  f.il.data = f.il_host;
  f.il.device.device_type = kDLCPU;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DEVICE, "both be in host memory");

  /* Values in host memory. */
  fixture_init(&f);
  host_lengths(&f, 0);
  f.il_host[1] = T + 1;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "input_lengths[1] = 7");
  fixture_init(&f);
  host_lengths(&f, 0);
  f.il_host[2] = -1;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "input_lengths[2] = -1");
  fixture_init(&f);
  host_lengths(&f, 0);
  f.tl_host[0] = -2;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "target_lengths[0] = -2");
  fixture_init(&f);
  host_lengths(&f, 0);
  f.tl_host[1] = S + 1;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "target_lengths[1] = 5");
  /* Concatenated: the sum must fit the targets. */
  fixture_init(&f);
  host_lengths(&f, 0);
  int64_t cat_shape[1] = {5};
  f.tgt.ndim = 1;
  f.tgt.shape = cat_shape;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "add up past the 5 concatenated targets");
}

static void host_target_checks(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  host_lengths(&f, 1);
  f.tgt_host[1 * S + 1] = 0; /* blank, in use (target_lengths[1] = 2) */
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "targets of sample 1, position 1, is 0");
  fixture_init(&f);
  host_lengths(&f, 1);
  f.tgt_host[2 * S] = C;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "sample 2, position 0, is 5");
  fixture_init(&f);
  host_lengths(&f, 1);
  f.tgt_host[0] = -4;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "is -4");
  /* Padding past a sample's length is not checked. */
  fixture_init(&f);
  host_lengths(&f, 1);
  f.tgt_host[S - 1] = -99;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_NO_DEVICE, NULL);
  /* Concatenated host targets: sample 1 starts at 2. */
  fixture_init(&f);
  host_lengths(&f, 1);
  int64_t cat_shape[1] = {6};
  f.tgt.ndim = 1;
  f.tgt.shape = cat_shape;
  f.tgt_host[3] = 0;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "targets of sample 1, position 1");
  /* Strided host targets: every other element of a [N, 2S] buffer. */
  fixture_init(&f);
  host_lengths(&f, 1);
  int64_t strides[2] = {S, 2};
  int64_t narrow[2] = {N, 2};
  f.tgt.shape = narrow;
  f.tgt.strides = strides;
  f.tgt_host[S + 1] = 0; /* between the used elements: not checked */
  f.tgt_host[S] = 0;     /* sample 1, position 0 */
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "targets of sample 1, position 0");
}

static void output_checks(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  f.loss.dtype.bits = 64;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DTYPE, "loss must be f32");
  fixture_init(&f);
  f.loss_shape[0] = N + 1;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "loss must have shape [N]");
  fixture_init(&f);
  f.opt.reduction = JITOPS_CTC_REDUCTION_MEAN;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "loss must be a scalar");
  fixture_init(&f);
  int64_t zero_stride[1] = {0};
  f.loss.strides = zero_stride;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT,
              "loss's strides make several elements share an address");
  fixture_init(&f);
  f.loss.device.device_type = kDLCPU;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DEVICE, "loss");
  /* f16 log_probs may write an f32 loss, but not an f64 one. */
  fixture_init(&f);
  f.lp.dtype.bits = 16;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_NO_DEVICE, NULL);
  f.loss.dtype.bits = 64;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_DTYPE, "loss must be f16 (log_probs' dtype) or f32");

  /* Backward. */
  fixture_init(&f);
  f.grad_shape[2] = C + 1;
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_INVALID_SHAPE, "grad_log_probs must have");
  fixture_init(&f);
  f.grad.dtype.bits = 64;
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_INVALID_DTYPE, "grad_log_probs must be f32");
  fixture_init(&f);
  int64_t gst[3] = {N * C, C, 0};
  f.grad.strides = gst;
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_INVALID_LAYOUT, "grad_log_probs's strides");
  fixture_init(&f);
  f.grad.data = (char *)f.lp.data + 4 * C;
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_INVALID_ARGUMENT, "overlaps log_probs");
  fixture_init(&f);
  f.opt.reduction = JITOPS_CTC_REDUCTION_SUM;
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_INVALID_SHAPE, "grad_loss must be a scalar");
  fixture_init(&f);
  f.gl.dtype.code = kDLBfloat;
  f.gl.dtype.bits = 16;
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_INVALID_DTYPE, "grad_loss must be f32");
  fixture_init(&f);
  f.loss_shape[0] = N; /* grad_loss and the optional loss share the shape */
  DLTensor bad_loss = f.loss;
  bad_loss.dtype.bits = 16;
  CHECK_FAILS(backward(rt, &f, &bad_loss), JITOPS_ERR_INVALID_DTYPE, "loss must be f32");

  /* Alpha/beta. */
  fixture_init(&f);
  f.ab_shape[2] = 2 * S;
  CHECK_FAILS(alpha_beta(rt, &f), JITOPS_ERR_INVALID_SHAPE, "log_alpha must have shape");
  fixture_init(&f);
  f.lp.dtype.bits = 16;
  f.la.dtype.bits = 16;
  f.lb.dtype.bits = 16;
  CHECK_FAILS(alpha_beta(rt, &f), JITOPS_ERR_INVALID_DTYPE, "log_alpha must be f32");
  fixture_init(&f);
  int64_t ast[3] = {1, N, N * T};
  f.lb.strides = ast;
  CHECK_FAILS(alpha_beta(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "log_beta must have log_alpha's");
  fixture_init(&f);
  f.nll.dtype.bits = 64;
  CHECK_FAILS(alpha_beta(rt, &f), JITOPS_ERR_INVALID_DTYPE, "nll must be f32");
  fixture_init(&f);
  int64_t nll_shape[1] = {N - 1};
  f.nll.shape = nll_shape;
  CHECK_FAILS(alpha_beta(rt, &f), JITOPS_ERR_INVALID_SHAPE, "nll must have shape [N]");
}

/* Hostile DLTensors: shapes, strides and byte offsets whose element counts, byte offsets,
 * addresses or workspace sizes overflow 64 bits. Each is rejected with a status and a message
 * that names the argument, before any arithmetic on it could wrap (the suite runs under
 * UBSan too). */
static void hostile_shapes(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  f.lp_shape[0] = INT64_MAX;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "log_probs' shape");
  fixture_init(&f);
  f.lp_shape[0] = f.lp_shape[1] = f.lp_shape[2] = INT32_MAX; /* 2^93 elements */
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "log_probs has more than 2^63 elements");
  fixture_init(&f);
  f.lp_shape[0] = INT32_MAX; /* 2^63 - 2^32 elements, 2^65 bytes */
  f.lp_shape[1] = (int64_t)1 << 30;
  f.lp_shape[2] = 4;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "log_probs's shape");
  fixture_init(&f);
  f.tgt_shape[1] = INT64_MAX;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_OUT_OF_RANGE, "targets has more than 2^63 elements");
  fixture_init(&f);
  f.tgt_shape[1] = (int64_t)1 << 61; /* 3 * 2^61 elements of 8 bytes */
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_SHAPE, "targets's shape");
  fixture_init(&f);
  f.ab_shape[2] = (int64_t)1 << 40;
  CHECK_FAILS(alpha_beta(rt, &f), JITOPS_ERR_INVALID_SHAPE, "log_alpha's last extent");
  /* Every tensor fits, but alpha and beta of N * T = 2^60 rows do not: the backward pass's
   * workspace would pass 2^64 bytes. */
  fixture_init(&f);
  f.lp_shape[0] = INT32_MAX;
  f.lp_shape[1] = f.tgt_shape[0] = f.len_shape[0] = (int64_t)1 << 29;
  f.lp_shape[2] = 1;
  f.opt.blank = 0;
  size_t bytes = 0;
  CHECK_OK(jitops_ctc_workspace_size(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt, JITOPS_CTC_PASS_LOSS,
                                     &bytes));
  CHECK_FAILS(jitops_ctc_workspace_size(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt,
                                        JITOPS_CTC_PASS_BACKWARD, &bytes),
              JITOPS_ERR_INVALID_SHAPE, "workspace beyond 2^64 bytes");
}

static void hostile_strides(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  int64_t lp_wide[3] = {(int64_t)1 << 62, C, 1};
  f.lp.strides = lp_wide;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "log_probs's strides");
  fixture_init(&f);
  int64_t lp_min[3] = {INT64_MIN, C, 1};
  f.lp.strides = lp_min;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "log_probs's strides");
  fixture_init(&f);
  int64_t lp_below[3] = {-((int64_t)1 << 40), C, 1}; /* reaches below address 0 */
  f.lp.strides = lp_below;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT,
              "log_probs's elements would lie outside the address space");
  fixture_init(&f);
  int64_t tgt_wide[2] = {(int64_t)1 << 62, 1};
  f.tgt.strides = tgt_wide;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "targets's strides");
  fixture_init(&f);
  int64_t len_min[1] = {INT64_MIN};
  f.il.strides = len_min;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "input_lengths's strides");
  /* In host memory they would be read: rejected first. */
  fixture_init(&f);
  host_lengths(&f, 1);
  f.tl.strides = len_min;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "target_lengths's strides");
  fixture_init(&f);
  host_lengths(&f, 1);
  f.tgt.strides = tgt_wide;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "targets's strides");
  /* Outputs: {2^62, ...} strides used to wrap around the overlap check. */
  fixture_init(&f);
  int64_t grad_wide[3] = {(int64_t)1 << 62, C, 1};
  f.grad.strides = grad_wide;
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_INVALID_LAYOUT, "grad_log_probs's strides");
  fixture_init(&f);
  int64_t ab_wide[3] = {(int64_t)1 << 62, 2 * S + 1, 1};
  f.la.strides = ab_wide;
  f.lb.strides = ab_wide;
  CHECK_FAILS(alpha_beta(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "log_alpha's strides");
  fixture_init(&f);
  int64_t nll_wide[1] = {(int64_t)1 << 62};
  f.nll.strides = nll_wide;
  CHECK_FAILS(alpha_beta(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "nll's strides");
  fixture_init(&f);
  int64_t loss_min[1] = {INT64_MIN};
  f.loss.strides = loss_min;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "loss's strides");
  /* A stride of a dimension of one element is never used: any value is fine. */
  fixture_init(&f);
  f.opt.reduction = JITOPS_CTC_REDUCTION_SUM;
  f.loss_shape[0] = 1;
  f.loss.strides = loss_min;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_NO_DEVICE, NULL);
}

static void hostile_byte_offsets(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  f.lp.byte_offset = UINT64_MAX - 3; /* aligned, but no pointer may be offset by that much */
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "log_probs's byte_offset");
  f.lp.data = (void *)(uintptr_t)(UINT64_MAX - 0xfff);
  f.lp.byte_offset = 0x1000; /* data + byte_offset wraps */
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT,
              "log_probs's byte_offset 4096 takes its data pointer past the end");
  fixture_init(&f);
  f.tgt.data = (void *)(uintptr_t)(UINT64_MAX - 7); /* the first element in the last 8 bytes */
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "targets's elements would lie outside");
  fixture_init(&f);
  host_lengths(&f, 0);
  f.il.byte_offset = UINT64_MAX - 7;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_INVALID_LAYOUT, "input_lengths's byte_offset");
  fixture_init(&f);
  f.grad.byte_offset = (uint64_t)1 << 63; /* no pointer may be offset by that much */
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_INVALID_LAYOUT, "grad_log_probs's byte_offset");
  f.grad.byte_offset = (uint64_t)1 << 62; /* far from log_probs, inside the address space */
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_NO_DEVICE, NULL);
  f.grad.byte_offset = 0;
  f.grad.data = (void *)(uintptr_t)(UINT64_MAX - 3); /* the first element in the last 4 bytes */
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "grad_log_probs's elements would lie outside");
}

/* Valid calls compile (NVRTC, no GPU) and stop at the launch. One per kernel family: the
 * register, shared and global tiers, each mode, both gradients, the reduction. */
static void valid_calls_compile(jitops_runtime_t *rt) {
  fixture f;
  fixture_init(&f);
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_NO_DEVICE, "compile-only");
  f.opt.reduction = JITOPS_CTC_REDUCTION_MEAN;
  f.loss.ndim = 0;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_NO_DEVICE, NULL);
  f.opt.storage = JITOPS_CTC_STORAGE_SHARED;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_NO_DEVICE, NULL);
  f.opt.storage = JITOPS_CTC_STORAGE_GLOBAL;
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_NO_DEVICE, NULL);
  fixture_init(&f);
  f.gl.ndim = 1;
  CHECK_FAILS(backward(rt, &f, NULL), JITOPS_ERR_NO_DEVICE, NULL);
  f.opt.gradient = JITOPS_CTC_GRADIENT_PYTORCH;
  CHECK_FAILS(backward(rt, &f, &f.loss), JITOPS_ERR_NO_DEVICE, NULL);
  fixture_init(&f);
  /* Concatenated targets with int32 device lengths, f64. */
  int64_t cat_shape[1] = {7};
  f.tgt.ndim = 1;
  f.tgt.shape = cat_shape;
  f.il.dtype.bits = 32;
  f.tl.dtype.bits = 32;
  f.lp.dtype.bits = 64;
  f.la.dtype.bits = 64;
  f.lb.dtype.bits = 64;
  f.nll.dtype.bits = 64;
  f.opt.max_target_length = S;
  CHECK_FAILS(alpha_beta(rt, &f), JITOPS_ERR_NO_DEVICE, NULL);

  /* Workspace sizes: backward holds alpha and beta. */
  fixture_init(&f);
  size_t fwd = 0, bwd = 0;
  CHECK_OK(jitops_ctc_workspace_size(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt, JITOPS_CTC_PASS_LOSS,
                                     &fwd));
  CHECK_OK(jitops_ctc_workspace_size(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt,
                                     JITOPS_CTC_PASS_BACKWARD, &bwd));
  CHECK(bwd >= 2 * (size_t)N * T * (2 * S + 1) * sizeof(float));
  CHECK(fwd < bwd);
  host_lengths(&f, 0);
  CHECK_OK(jitops_ctc_workspace_size(rt, &f.lp, &f.tgt, &f.il, &f.tl, &f.opt, JITOPS_CTC_PASS_LOSS,
                                     &fwd));
  CHECK(fwd > 0); /* the staged lengths */
}

/* The kernels a bf16 loss over padded targets of `width` labels compiled (0: all were built). */
static uint64_t bf16_loss_compiles(jitops_runtime_t *rt, int64_t width) {
  fixture f;
  fixture_init(&f);
  f.lp.dtype.code = kDLBfloat;
  f.lp.dtype.bits = 16;
  f.tgt_shape[1] = width;
  jitops_stats before, after;
  CHECK_OK(jitops_runtime_get_stats(rt, &before));
  CHECK_FAILS(loss(rt, &f), JITOPS_ERR_NO_DEVICE, NULL);
  CHECK_OK(jitops_runtime_get_stats(rt, &after));
  return after.compiles - before.compiles;
}

/* Targets of up to 127 labels (register-tier buckets 32 to 256 states) run one kernel per mode:
 * after the first call, calls whose targets fall in the other small buckets compile nothing. A
 * target of 200 labels (bucket 512) compiles its own. bf16 log_probs, which no other call here
 * uses, so that the first call's compiles are this test's. */
static void small_target_buckets_share_one_kernel(jitops_runtime_t *rt) {
  CHECK(bf16_loss_compiles(rt, 100) > 0); /* bucket 256 */
  CHECK(bf16_loss_compiles(rt, 50) == 0); /* 128 */
  CHECK(bf16_loss_compiles(rt, 20) == 0); /* 64 */
  CHECK(bf16_loss_compiles(rt, 4) == 0);  /* 32 */
  CHECK(bf16_loss_compiles(rt, 200) > 0); /* 512: a kernel of its own */
}

static void catalogue_entries(jitops_runtime_t *rt) {
  size_t total = jitops_catalogue_size(), ctc = 0, first = 0;
  for (size_t i = 0; i < total; ++i) {
    const char *op = NULL, *desc = NULL;
    CHECK_OK(jitops_catalogue_describe(i, &op, &desc));
    if (op != NULL && strcmp(op, "ctc") == 0) {
      if (ctc++ == 0)
        first = i;
      CHECK(desc != NULL && strlen(desc) > 0);
    }
  }
  CHECK(ctc >= 40);
  CHECK_OK(jitops_catalogue_compile(rt, first));
}

int main(void) {
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  jitops_runtime_t *rt = NULL;
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt == NULL)
    return test_finish("test_ctc_validation");
  jitops_ctc_options_init(NULL); /* a no-op */
  null_arguments(rt);
  log_probs_checks(rt);
  option_checks(rt);
  target_checks(rt);
  length_checks(rt);
  host_target_checks(rt);
  output_checks(rt);
  hostile_shapes(rt);
  hostile_strides(rt);
  hostile_byte_offsets(rt);
  valid_calls_compile(rt);
  small_target_buckets_share_one_kernel(rt);
  catalogue_entries(rt);
  jitops_stats stats;
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));
  CHECK(stats.compiles >= 8 && stats.compile_errors == 0);
  printf("test_ctc_validation: %llu kernels compiled in %.0f ms\n",
         (unsigned long long)stats.compiles, stats.compile_ms);
  jitops_runtime_destroy(rt);
  return test_finish("test_ctc_validation");
}
