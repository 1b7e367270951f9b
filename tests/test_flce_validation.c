/* Fused linear cross-entropy without a GPU: every bad argument gives its status and a message
 * that names it, hostile tensors (sizes, strides and offsets whose arithmetic overflows)
 * included, for the forward, the backward and a vocabulary shard's two phases; the planner's
 * choices and bounds; the kernels of shard calls compiled by NVRTC; the row-major to cuBLASLt
 * (column-major) GEMM mapping against a reference product. */
#include <math.h>

#include "ops/flce/args.h"
#include "ops/flce/flce_abi.h"
#include "ops/flce/gemm.h"
#include "ops/flce/kernels.h"
#include "ops/flce/plan.h"
#include "testutil.h"

enum { BT = 8, H = 16, V = 40 };

typedef struct tensor {
  DLTensor t;
  int64_t shape[2];
  int64_t strides[2];
} tensor;

static const DLDataType BF16 = {kDLBfloat, 16, 1}, F16 = {kDLFloat, 16, 1}, F32 = {kDLFloat, 32, 1},
                        F64 = {kDLFloat, 64, 1}, I32 = {kDLInt, 32, 1}, I64 = {kDLInt, 64, 1};

/* A device tensor over a fake, well-aligned address: validation never dereferences it. */
static void mk(tensor *x, DLDataType dtype, int ndim, int64_t d0, int64_t d1) {
  memset(x, 0, sizeof *x);
  x->t.data = (void *)(uintptr_t)0x100000;
  x->t.device.device_type = kDLCUDA;
  x->t.device.device_id = 0;
  x->t.ndim = ndim;
  x->t.dtype = dtype;
  x->shape[0] = d0;
  x->shape[1] = d1;
  x->t.shape = x->shape;
}

static void set_strides(tensor *x, int64_t s0, int64_t s1) {
  x->strides[0] = s0;
  x->strides[1] = s1;
  x->t.strides = x->strides;
}

/* A complete, valid bf16 call with every optional tensor. */
typedef struct call {
  tensor input, weight, bias, target, dy, loss, lse, gi, gw, gb;
  jitops_flce_tensors ts;
  jitops_flce_options opt;
} call;

static void valid_call(call *c) {
  mk(&c->input, BF16, 2, BT, H);
  mk(&c->weight, BF16, 2, V, H);
  mk(&c->bias, BF16, 1, V, 0);
  mk(&c->target, I64, 1, BT, 0);
  mk(&c->dy, F32, 0, 0, 0);
  mk(&c->loss, F32, 0, 0, 0);
  mk(&c->lse, F32, 1, BT, 0);
  mk(&c->gi, BF16, 2, BT, H);
  mk(&c->gw, BF16, 2, V, H);
  mk(&c->gb, BF16, 1, V, 0);
  c->ts.input = &c->input.t;
  c->ts.weight = &c->weight.t;
  c->ts.bias = &c->bias.t;
  c->ts.target = &c->target.t;
  c->ts.grad_output = &c->dy.t;
  c->ts.loss = &c->loss.t;
  c->ts.lse = &c->lse.t;
  c->ts.grad_input = &c->gi.t;
  c->ts.grad_weight = &c->gw.t;
  c->ts.grad_bias = &c->gb.t;
  jitops_flce_options_init(&c->opt);
}

/* The same with BT = 0. */
static void empty_batch_call(call *c) {
  valid_call(c);
  mk(&c->input, BF16, 2, 0, H);
  mk(&c->target, I64, 1, 0, 0);
  mk(&c->gi, BF16, 2, 0, H);
  mk(&c->lse, F32, 1, 0, 0);
}

static jitops_runtime_t *rt;

/* Kernels the runtime has compiled so far. */
static uint64_t compiles(void) {
  jitops_stats stats;
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));
  return stats.compiles;
}

/* The full builds compiled so far, once the background's are done (a cold call's kernels may be
 * quick builds first: runtime/kernel_batch.h). */
static uint64_t full_builds(void) {
  CHECK_OK(jitops_runtime_wait_builds(rt));
  jitops_stats stats;
  CHECK_OK(jitops_runtime_get_stats(rt, &stats));
  return stats.compiles - stats.quick_compiles;
}

static jitops_status fwd(call *c) {
  return jitops_flce_forward(rt, &c->ts, &c->opt, NULL, NULL);
}

static void test_null_and_device(void) {
  call c;
  valid_call(&c);
  CHECK_FAILS(jitops_flce_forward(NULL, &c.ts, &c.opt, NULL, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "runtime");
  CHECK_FAILS(jitops_flce_forward(rt, NULL, &c.opt, NULL, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "tensors");
  c.ts.input = NULL;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "input");
  valid_call(&c);
  c.ts.weight = NULL;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "weight");
  valid_call(&c);
  c.ts.target = NULL;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "target");
  valid_call(&c);
  c.ts.loss = NULL;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "loss");
  valid_call(&c);
  c.input.t.device.device_type = kDLCPU;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DEVICE, "input");
  valid_call(&c);
  c.gw.t.device.device_type = kDLCPU;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DEVICE, "grad_weight");
  valid_call(&c);
  c.input.t.data = NULL;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "input");
  /* Everything valid: a compile-only runtime compiles the call's kernels, as the other ops
   * do, but cannot run it, and says so. */
  valid_call(&c);
  const uint64_t compiled = compiles();
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, "compile-only");
  CHECK(compiles() > compiled);
  /* Optional tensors may be absent; options may be NULL. */
  c.ts.bias = c.ts.grad_output = NULL;
  c.ts.grad_bias = NULL;
  c.ts.lse = c.ts.grad_input = c.ts.grad_weight = NULL;
  CHECK_FAILS(jitops_flce_forward(rt, &c.ts, NULL, NULL, NULL), JITOPS_ERR_NO_DEVICE, NULL);
}

static void test_shapes(void) {
  call c;
  valid_call(&c);
  mk(&c.input, BF16, 3, BT, H);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "input");
  valid_call(&c);
  mk(&c.input, BF16, 1, BT, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "input must have rank 2");
  valid_call(&c);
  mk(&c.input, BF16, 2, BT, 0);
  mk(&c.weight, BF16, 2, V, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "H must be >= 1");
  valid_call(&c);
  mk(&c.weight, BF16, 2, V, H + 1);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "weight must have shape [V, H]");
  valid_call(&c);
  mk(&c.weight, BF16, 2, 0, H);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "V must be >= 1");
  valid_call(&c);
  mk(&c.bias, BF16, 1, V + 1, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "bias");
  valid_call(&c);
  mk(&c.target, I64, 1, BT - 1, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "target");
  valid_call(&c);
  mk(&c.target, I64, 2, BT, 1);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "target");
  valid_call(&c);
  mk(&c.loss, F32, 1, BT, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "loss must be a scalar");
  valid_call(&c);
  c.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
  c.ts.grad_output = NULL;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "loss must have rank 1");
  mk(&c.loss, F32, 1, BT + 1, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "loss must have shape [BT]");
  mk(&c.loss, F32, 1, BT, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
  c.ts.grad_output = &c.dy.t; /* a scalar dy under reduction none */
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "grad_output");
  mk(&c.dy, F32, 1, BT, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
  valid_call(&c);
  mk(&c.dy, F32, 1, BT, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "grad_output must be a scalar");
  valid_call(&c);
  mk(&c.lse, F32, 1, BT + 2, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "lse");
  valid_call(&c);
  mk(&c.gi, BF16, 2, BT, H - 1);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "grad_input must have shape [BT, H]");
  valid_call(&c);
  mk(&c.gw, BF16, 2, V - 1, H);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "grad_weight must have shape [V, H]");
  valid_call(&c);
  mk(&c.gb, BF16, 1, V - 1, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "grad_bias");
  valid_call(&c);
  c.ts.bias = NULL;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "grad_bias is given but bias is NULL");
  /* An empty batch is valid. */
  empty_batch_call(&c);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
}

static void test_dtypes(void) {
  call c;
  valid_call(&c);
  c.input.t.dtype = I32;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "input must be f16, bf16, f32 or f64");
  valid_call(&c);
  c.weight.t.dtype = F16;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "weight is f16 but input is bf16");
  valid_call(&c);
  c.bias.t.dtype = F32;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "bias");
  valid_call(&c);
  c.target.t.dtype = I32;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "target must be int64");
  valid_call(&c);
  c.dy.t.dtype = I64;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "grad_output");
  valid_call(&c);
  c.dy.t.dtype = F16; /* any float dy */
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
  valid_call(&c);
  c.loss.t.dtype = F16;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "loss must be bf16 or f32");
  valid_call(&c);
  c.loss.t.dtype = BF16;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
  valid_call(&c);
  c.lse.t.dtype = BF16;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "lse must be f32");
  valid_call(&c);
  c.gi.t.dtype = F32;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "grad_input must be bf16");
  valid_call(&c);
  c.gw.t.dtype = F16;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "grad_weight must be bf16 or f32");
  valid_call(&c);
  c.gw.t.dtype = F32; /* f32 gradients of 16-bit weights */
  c.gb.t.dtype = F32;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
  valid_call(&c);
  c.gb.t.dtype = F64;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "grad_bias");
  /* f64 problems: f64 everywhere, no f32 stand-ins. */
  valid_call(&c);
  c.input.t.dtype = c.weight.t.dtype = c.bias.t.dtype = c.gi.t.dtype = F64;
  c.gw.t.dtype = c.gb.t.dtype = c.loss.t.dtype = c.lse.t.dtype = F64;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
  c.gw.t.dtype = F32;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "grad_weight must be f64, got f32");
  c.gw.t.dtype = F64;
  c.lse.t.dtype = F32;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_DTYPE, "lse must be f64");
}

static void test_layouts(void) {
  call c;
  valid_call(&c);
  set_strides(&c.input, H, 2);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_LAYOUT, "input must have contiguous rows");
  valid_call(&c);
  set_strides(&c.weight, H - 1, 1);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_LAYOUT, "weight's row stride");
  valid_call(&c);
  set_strides(&c.weight, H + 8, 1); /* a padded row stride is fine */
  set_strides(&c.gw, H + 8, 1);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
  valid_call(&c);
  set_strides(&c.gi, H, 3);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_LAYOUT, "grad_input");
  valid_call(&c);
  c.input.t.byte_offset = 1;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_LAYOUT, "input's first element is not aligned");
  valid_call(&c);
  c.target.t.byte_offset = 4;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_LAYOUT, "target's first element is not aligned");
  valid_call(&c);
  set_strides(&c.target, 3, 0); /* strided 1-D inputs are fine */
  set_strides(&c.bias, -1, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
  valid_call(&c);
  set_strides(&c.lse, 0, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_LAYOUT, "lse has stride 0");
  valid_call(&c);
  set_strides(&c.gb, 0, 0);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_LAYOUT, "grad_bias has stride 0");
}

static void test_options(void) {
  call c;
  valid_call(&c);
  c.opt.reduction = (jitops_flce_reduction)7;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->reduction");
  valid_call(&c);
  c.opt.label_smoothing = -0.1;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->label_smoothing");
  c.opt.label_smoothing = 1.5;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->label_smoothing");
  c.opt.label_smoothing = NAN;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->label_smoothing");
  valid_call(&c);
  c.opt.softcap = -1.0;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->softcap");
  c.opt.softcap = INFINITY;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->softcap");
  valid_call(&c);
  c.opt.z_loss_scale = NAN;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->z_loss_scale");
  c.opt.z_loss_scale = -1e-4;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->z_loss_scale");
  valid_call(&c);
  c.opt.chunk_rows = -1;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->chunk_rows -1 is negative");
  valid_call(&c);
  c.opt.scratch_budget_bytes = -1;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "scratch_budget_bytes -1 is negative");
  c.opt.scratch_budget_bytes = 1000;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "scratch_budget_bytes 1000 is below");
  valid_call(&c);
  c.opt.label_smoothing = 0.1;
  c.opt.softcap = 30.0;
  c.opt.z_loss_scale = 1e-4;
  c.opt.ignore_index = 3;
  c.opt.chunk_rows = 3;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
  /* A chunk that the budget cannot hold. */
  c.opt.chunk_rows = 1 << 20;
  c.opt.scratch_budget_bytes = (int64_t)JITOPS__FLCE_BLAS_WORKSPACE + (16 << 20);
  mk(&c.input, BF16, 2, 1 << 20, H);
  mk(&c.target, I64, 1, 1 << 20, 0);
  c.ts.grad_input = NULL;
  c.ts.lse = NULL;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->chunk_rows 1048576 needs");
}

static void test_workspace_size(void) {
  call c;
  valid_call(&c);
  size_t bytes = 0;
  CHECK_FAILS(jitops_flce_workspace_size(rt, &c.ts, &c.opt, NULL), JITOPS_ERR_INVALID_ARGUMENT,
              "bytes");
  CHECK_OK(jitops_flce_workspace_size(rt, &c.ts, &c.opt, &bytes));
  CHECK(bytes > JITOPS__FLCE_BLAS_WORKSPACE && bytes < JITOPS__FLCE_BLAS_WORKSPACE + (1 << 20));
  c.opt.softcap = -2;
  CHECK_FAILS(jitops_flce_workspace_size(rt, &c.ts, &c.opt, &bytes), JITOPS_ERR_INVALID_ARGUMENT,
              "options->softcap");
}

/* Valid arguments of jitops_flce_backward: a scalar dy and the three saved gradients. */
static void valid_backward(tensor *dy, tensor *gi, tensor *gw, tensor *gb) {
  mk(dy, F32, 0, 0, 0);
  mk(gi, BF16, 2, BT, H);
  mk(gw, F32, 2, V, H);
  mk(gb, BF16, 1, V, 0);
}

static void test_backward(void) {
  tensor dy, gi, gw, gb;
  valid_backward(&dy, &gi, &gw, &gb);
  CHECK_FAILS(jitops_flce_backward(NULL, &dy.t, &gi.t, &gw.t, &gb.t, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "runtime");
  CHECK_FAILS(jitops_flce_backward(rt, NULL, &gi.t, &gw.t, &gb.t, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "grad_output");
  mk(&dy, F32, 1, BT, 0);
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, &gb.t, NULL), JITOPS_ERR_INVALID_SHAPE,
              "jitops_flce_forward");
  mk(&dy, I32, 1, 1, 0);
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, &gb.t, NULL), JITOPS_ERR_INVALID_DTYPE,
              "grad_output");
  mk(&dy, BF16, 1, 1, 0);
  mk(&gi, BF16, 1, BT, 0);
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, &gb.t, NULL), JITOPS_ERR_INVALID_SHAPE,
              "grad_input must have rank 2");
  mk(&gi, BF16, 2, BT, H);
  gw.t.dtype = I64;
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, &gb.t, NULL), JITOPS_ERR_INVALID_DTYPE,
              "grad_weight");
  gw.t.dtype = F32;
  set_strides(&gb, 0, 0);
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, &gb.t, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "grad_bias");
  /* gw is f32 here and gi bf16: two scale kernels, compiled before the device check. */
  const uint64_t compiled = full_builds();
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, NULL, NULL), JITOPS_ERR_NO_DEVICE,
              "compile-only");
  CHECK(full_builds() == compiled + 2);
}

/* ---- hostile tensors ------------------------------------------------------------------ */

#define HUGE_STRIDE ((int64_t)1 << 62)

/* The tensor of a call that its message calls `arg`. */
static tensor *by_name(call *c, const char *arg) {
  struct {
    const char *arg;
    tensor *t;
  } all[] = {{"input", &c->input},   {"weight", &c->weight},  {"bias", &c->bias},
             {"target", &c->target}, {"grad_output", &c->dy}, {"loss", &c->loss},
             {"lse", &c->lse},       {"grad_input", &c->gi},  {"grad_weight", &c->gw},
             {"grad_bias", &c->gb}};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
    if (strcmp(all[i].arg, arg) == 0)
      return all[i].t;
  return NULL;
}

/* One hostile layout of one tensor of a valid call (reduction none: loss and dy are [BT]),
 * and the failure it must give: strides {s0, s1} (s1 unused by vectors), or byte_offset (and
 * data, when not 0). */
typedef struct layout_case {
  const char *arg;
  int64_t s0, s1;
  uint64_t byte_offset; /* 0: the strides instead */
  uintptr_t data;       /* 0: the call's */
  jitops_status status;
  const char *needle; /* after "<arg>'s " */
} layout_case;

#define TOP_PAGE (UINTPTR_MAX - 0xfff) /* an aligned address 4 KiB below the end */

static const layout_case layout_cases[] = {
    /* Offsets that wrap int64: {2^62, 1} over 8 rows, INT64_MAX, INT64_MIN, -2^62, and a
     * stride whose element offsets fit but whose byte offsets do not (7 x 2^60 x 8). */
    {"input", HUGE_STRIDE, 1, 0, 0, JITOPS_ERR_INVALID_LAYOUT,
     "strides (shape [8, 16]) put elements more than 2^63 bytes from its first"},
    {"grad_weight", HUGE_STRIDE, 1, 0, 0, JITOPS_ERR_INVALID_LAYOUT, "strides (shape"},
    {"grad_input", INT64_MAX, 1, 0, 0, JITOPS_ERR_INVALID_LAYOUT, "strides (shape"},
    {"bias", INT64_MIN, 0, 0, 0, JITOPS_ERR_INVALID_LAYOUT, "strides (shape"},
    {"target", INT64_MIN, 0, 0, 0, JITOPS_ERR_INVALID_LAYOUT, "strides (shape"},
    {"target", -HUGE_STRIDE / 4, 0, 0, 0, JITOPS_ERR_INVALID_LAYOUT, "strides (shape"},
    {"lse", INT64_MAX, 0, 0, 0, JITOPS_ERR_INVALID_LAYOUT, "strides (shape"},
    {"grad_bias", HUGE_STRIDE, 0, 0, 0, JITOPS_ERR_INVALID_LAYOUT, "strides (shape"},
    {"loss", -HUGE_STRIDE, 0, 0, 0, JITOPS_ERR_INVALID_LAYOUT, "strides (shape"},
    {"grad_output", INT64_MIN, 0, 0, 0, JITOPS_ERR_INVALID_LAYOUT, "strides (shape"},
    /* A stride that fits but reaches below address 0; one that stays inside. */
    {"target", -((int64_t)1 << 40), 0, 0, 0, JITOPS_ERR_INVALID_LAYOUT,
     "elements would lie outside the address space"},
    {"target", -1, 0, 0, 0, JITOPS_ERR_NO_DEVICE, NULL},
    /* byte_offsets above 2^63 - 1; one that takes data past the end of the address space, one
     * that leaves the first element inside but not the rest; one just below 2^63 (valid). */
    {"input", 0, 0, UINT64_MAX - 7, 0, JITOPS_ERR_INVALID_LAYOUT,
     "byte_offset 18446744073709551608 is above 2^63 - 1"},
    {"grad_output", 0, 0, UINT64_MAX - 3, 0, JITOPS_ERR_INVALID_LAYOUT,
     "byte_offset 18446744073709551612 is above 2^63 - 1"},
    {"loss", 0, 0, (uint64_t)1 << 63, 0, JITOPS_ERR_INVALID_LAYOUT,
     "byte_offset 9223372036854775808 is above 2^63 - 1"},
    {"weight", 0, 0, 0x2000, TOP_PAGE, JITOPS_ERR_INVALID_LAYOUT,
     "byte_offset 8192 takes its data pointer past the end of the address space"},
    {"weight", 0, 0, 0xc00, TOP_PAGE, JITOPS_ERR_INVALID_LAYOUT, /* 1 KiB left, 1280 bytes */
     "elements would lie outside the address space"},
    {"grad_weight", 0, 0, ((uint64_t)1 << 63) - 2, 0, JITOPS_ERR_NO_DEVICE, NULL},
};

/* Shapes, strides and byte offsets whose products and sums overflow: each is refused with
 * its status and names its argument, before anything is computed from it (UBSan runs this
 * test too: no overflow may happen on the way to the refusal). */
static void test_hostile_tensors(void) {
  call c;
  for (size_t i = 0; i < sizeof layout_cases / sizeof layout_cases[0]; ++i) {
    const layout_case *k = &layout_cases[i];
    valid_call(&c);
    c.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
    mk(&c.loss, F32, 1, BT, 0);
    mk(&c.dy, F32, 1, BT, 0);
    tensor *x = by_name(&c, k->arg);
    if (k->data != 0)
      x->t.data = (void *)k->data;
    if (k->byte_offset != 0)
      x->t.byte_offset = k->byte_offset;
    else
      set_strides(x, k->s0, k->s1);
    char needle[160];
    snprintf(needle, sizeof needle, "%s's %s", k->arg, k->needle ? k->needle : "");
    CHECK_FAILS(fwd(&c), k->status, k->needle ? needle : NULL);
  }
  /* Shapes near INT64_MAX: element counts and byte spans past 2^63. */
  valid_call(&c);
  mk(&c.input, BF16, 2, (int64_t)1 << 62, 4);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_OUT_OF_RANGE, "input has more than 2^63 elements");
  mk(&c.input, BF16, 2, INT64_MAX, H);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_OUT_OF_RANGE, "input has more than 2^63 elements");
  mk(&c.input, BF16, 2, (int64_t)1 << 62, 1); /* 2^62 elements, 2^63 bytes */
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE,
              "input's shape [4611686018427387904, 1] spans more than 2^63 bytes");
  mk(&c.input, BF16, 2, BT, 1);
  mk(&c.weight, BF16, 2, INT64_MAX, 1);
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "weight's shape");
  mk(&c.input, BF16, 2, BT, H);
  mk(&c.weight, BF16, 2, (int64_t)1 << 58, H); /* 2^62 elements, 2^63 bytes */
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_SHAPE, "weight's shape");
  /* An empty batch whose data + byte_offset wraps. */
  empty_batch_call(&c);
  c.gi.t.data = (void *)TOP_PAGE;
  c.gi.t.byte_offset = 0x2000;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_LAYOUT, "grad_input's byte_offset 8192 takes its data");
  /* The workspace query validates the same way. */
  valid_call(&c);
  set_strides(&c.weight, HUGE_STRIDE, 1);
  size_t bytes;
  CHECK_FAILS(jitops_flce_workspace_size(rt, &c.ts, &c.opt, &bytes), JITOPS_ERR_INVALID_LAYOUT,
              "weight's strides (shape");
  /* Sizes that validate but whose scratch overflows size_t: V x 4 bytes of grad_bias's
   * accumulator (a bf16 bias of 2^62 - 1 elements spans less than 2^63 bytes). */
  valid_call(&c);
  int64_t v = ((int64_t)1 << 62) - 1;
  mk(&c.input, BF16, 2, BT, 1);
  mk(&c.weight, BF16, 2, v, 1);
  mk(&c.bias, BF16, 1, v, 0);
  mk(&c.gb, BF16, 1, v, 0);
  c.ts.grad_input = c.ts.grad_weight = NULL;
  c.opt.scratch_budget_bytes = INT64_MAX;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_OUT_OF_RANGE, "more scratch bytes than size_t counts");
  c.ts.bias = c.ts.grad_bias = NULL; /* without it, any budget is too small for one row */
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "scratch_budget_bytes");
}

static void test_hostile_backward(void) {
  tensor dy, gi, gw, gb;
  valid_backward(&dy, &gi, &gw, &gb);
  set_strides(&gw, HUGE_STRIDE, 1);
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, &gb.t, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "grad_weight's strides (shape");
  mk(&gw, F32, 2, V, H);
  set_strides(&gb, INT64_MIN, 0);
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, &gb.t, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "grad_bias's strides (shape");
  mk(&gb, BF16, 1, V, 0);
  mk(&gi, BF16, 2, INT64_MAX, 2);
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, &gb.t, NULL), JITOPS_ERR_OUT_OF_RANGE,
              "grad_input has more than 2^63 elements");
  mk(&gi, BF16, 2, BT, H);
  dy.t.byte_offset = UINT64_MAX - 3;
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, &gb.t, NULL), JITOPS_ERR_INVALID_LAYOUT,
              "grad_output's byte_offset");
  dy.t.byte_offset = 0;
  CHECK_FAILS(jitops_flce_backward(rt, &dy.t, &gi.t, &gw.t, &gb.t, NULL), JITOPS_ERR_NO_DEVICE,
              "compile-only");
}

/* Random hostile variations of a valid call: one to three fields of random tensors set to
 * extreme values. Every call must end in a status (NO_DEVICE when it validated) and leave a
 * message; under UBSan, no arithmetic on the way may overflow. */
static int64_t extreme_i64(uint64_t *seed) {
  static const int64_t values[] = {0,
                                   1,
                                   -1,
                                   2,
                                   INT64_MAX,
                                   INT64_MIN,
                                   INT64_MAX - 1,
                                   INT64_MIN + 1,
                                   HUGE_STRIDE,
                                   -HUGE_STRIDE,
                                   (int64_t)1 << 31,
                                   (int64_t)1 << 32,
                                   ((int64_t)1 << 62) - 1,
                                   BT,
                                   V,
                                   H};
  uint64_t r = test_rand_u64(seed);
  if (r % 4 == 0)
    return (int64_t)test_rand_u64(seed);
  return values[(r / 4) % (sizeof values / sizeof values[0])];
}

static void mutate(call *c, uint64_t *seed) {
  tensor *all[] = {&c->input, &c->weight, &c->bias, &c->target, &c->dy,
                   &c->loss,  &c->lse,    &c->gi,   &c->gw,     &c->gb};
  tensor *x = all[test_rand_u64(seed) % 10];
  switch (test_rand_u64(seed) % 7) {
  case 0:
    x->shape[test_rand_u64(seed) % 2] = extreme_i64(seed);
    break;
  case 1:
    set_strides(x, x->t.strides ? x->strides[0] : x->shape[1], x->t.strides ? x->strides[1] : 1);
    x->strides[test_rand_u64(seed) % 2] = extreme_i64(seed);
    break;
  case 2:
    x->t.byte_offset = test_rand_u64(seed) % 2 ? (uint64_t)extreme_i64(seed)
                                               : UINT64_MAX - test_rand_u64(seed) % 4096;
    break;
  case 3:
    x->t.data = (void *)(uintptr_t)(test_rand_u64(seed) % 2 ? 0 : UINTPTR_MAX - 0xffff);
    break;
  case 4:
    x->t.ndim = (int32_t)(test_rand_u64(seed) % 3);
    break;
  case 5:
    c->opt.chunk_rows = extreme_i64(seed);
    break;
  default:
    c->opt.scratch_budget_bytes = extreme_i64(seed);
    break;
  }
}

static void test_random_hostile(void) {
  uint64_t seed = 23;
  int validated = 0;
  for (int i = 0; i < 20000; ++i) {
    call c;
    valid_call(&c);
    if (test_rand_u64(&seed) % 2)
      c.opt.reduction = JITOPS_FLCE_REDUCTION_NONE, mk(&c.loss, F32, 1, BT, 0),
      c.ts.grad_output = NULL;
    int n = 1 + (int)(test_rand_u64(&seed) % 3);
    for (int k = 0; k < n; ++k)
      mutate(&c, &seed);
    size_t bytes;
    jitops_status forward = fwd(&c);
    CHECK(forward != JITOPS_SUCCESS && jitops_last_error()[0] != '\0');
    jitops_status size = jitops_flce_workspace_size(rt, &c.ts, &c.opt, &bytes);
    CHECK(size == (forward == JITOPS_ERR_NO_DEVICE ? JITOPS_SUCCESS : forward));
    jitops_status backward = jitops_flce_backward(rt, &c.dy.t, &c.gi.t, &c.gw.t, &c.gb.t, NULL);
    CHECK(backward != JITOPS_SUCCESS && jitops_last_error()[0] != '\0');
    validated += forward == JITOPS_ERR_NO_DEVICE;
  }
  CHECK(validated > 0 && validated < 20000);
}

/* ---- vocabulary shards ---------------------------------------------------------------- */

/* Rows [VSTART, VSTART + V) of a vocabulary of VSIZE. */
enum { VSTART = 100, VSIZE = 200 };

typedef struct shard_call {
  call c; /* input, weight, bias, target, dy (grad_output) and the gradients */
  tensor lse_local, linear, lse;
} shard_call;

/* A valid call of both phases, every tensor at an address of its own (outputs must not overlap
 * anything). */
static void valid_shard(shard_call *s) {
  valid_call(&s->c);
  s->c.ts.loss = NULL;
  s->c.ts.lse = NULL;
  mk(&s->lse_local, F32, 1, BT, 0);
  mk(&s->linear, F32, 1, BT, 0);
  mk(&s->lse, F32, 1, BT, 0);
  s->c.opt.vocab_start = VSTART;
  s->c.opt.vocab_size = VSIZE;
  tensor *all[] = {&s->c.input, &s->c.weight, &s->c.bias,    &s->c.target, &s->c.dy, &s->c.gi,
                   &s->c.gw,    &s->c.gb,     &s->lse_local, &s->linear,   &s->lse};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
    all[i]->t.data = (void *)(uintptr_t)((i + 1) << 20);
}

/* Phase 1's tensors: the operands of the call. */
static jitops_flce_tensors stats_tensors(const shard_call *s) {
  jitops_flce_tensors ts;
  memset(&ts, 0, sizeof ts);
  ts.input = s->c.ts.input;
  ts.weight = s->c.ts.weight;
  ts.bias = s->c.ts.bias;
  ts.target = s->c.ts.target;
  return ts;
}

static jitops_status shard_stats(shard_call *s) {
  jitops_flce_tensors ts = stats_tensors(s);
  return jitops_flce_shard_stats(rt, &ts, &s->c.opt, &s->lse_local.t, &s->linear.t, NULL, NULL);
}

static jitops_status shard_backward(shard_call *s) {
  return jitops_flce_shard_backward(rt, &s->c.ts, &s->c.opt, &s->lse.t, NULL, NULL);
}

static void test_shard_arguments(void) {
  shard_call s;
  valid_shard(&s);
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_NO_DEVICE, "compile-only");
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_NO_DEVICE, "compile-only");
  jitops_flce_tensors ts = stats_tensors(&s);
  CHECK_FAILS(jitops_flce_shard_stats(NULL, &ts, &s.c.opt, &s.lse_local.t, &s.linear.t, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "runtime");
  CHECK_FAILS(jitops_flce_shard_stats(rt, NULL, &s.c.opt, &s.lse_local.t, &s.linear.t, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "tensors");
  CHECK_FAILS(jitops_flce_shard_stats(rt, &ts, &s.c.opt, NULL, &s.linear.t, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "lse_local");
  CHECK_FAILS(jitops_flce_shard_stats(rt, &ts, &s.c.opt, &s.lse_local.t, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "linear");
  CHECK_FAILS(jitops_flce_shard_backward(rt, &s.c.ts, &s.c.opt, NULL, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "lse");
  /* Members a phase does not take. */
  ts.grad_output = &s.c.dy.t;
  CHECK_FAILS(jitops_flce_shard_stats(rt, &ts, &s.c.opt, &s.lse_local.t, &s.linear.t, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "tensors->grad_output must be NULL");
  ts = stats_tensors(&s);
  ts.grad_weight = &s.c.gw.t;
  CHECK_FAILS(jitops_flce_shard_stats(rt, &ts, &s.c.opt, &s.lse_local.t, &s.linear.t, NULL, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "tensors->grad_weight must be NULL");
  s.c.ts.loss = &s.c.loss.t;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_ARGUMENT, "tensors->loss must be NULL");
  valid_shard(&s);
  s.c.ts.lse = &s.lse_local.t;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_ARGUMENT, "tensors->lse must be NULL");
  /* Shapes, dtypes and layouts of the [BT] vectors. */
  valid_shard(&s);
  s.lse_local.shape[0] = BT + 1;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_SHAPE, "lse_local must have shape [BT]");
  valid_shard(&s);
  s.linear.t.ndim = 2;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_SHAPE, "linear has rank 2");
  valid_shard(&s);
  s.lse.shape[0] = BT - 1;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_SHAPE, "lse must have shape [BT]");
  valid_shard(&s);
  s.linear.t.dtype = BF16;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_DTYPE, "linear must be f32, got bf16");
  valid_shard(&s);
  s.lse.t.dtype = F64;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_DTYPE, "lse must be f32, got f64");
  valid_shard(&s);
  set_strides(&s.linear, 0, 0);
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_LAYOUT, "linear has stride 0");
  set_strides(&s.linear, -3, 0);
  set_strides(&s.lse, 0, 0); /* an input may repeat one value */
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_NO_DEVICE, NULL);
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_NO_DEVICE, NULL);
  valid_shard(&s);
  set_strides(&s.lse, HUGE_STRIDE, 0);
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_LAYOUT, "lse's strides (shape");
  valid_shard(&s);
  s.lse_local.t.byte_offset = 2;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_LAYOUT, "lse_local's first element");
  /* f64 problems take f64 statistics. */
  valid_shard(&s);
  s.c.input.t.dtype = s.c.weight.t.dtype = s.c.bias.t.dtype = F64;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_DTYPE, "lse_local must be f64");
  s.lse_local.t.dtype = s.linear.t.dtype = F64;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_NO_DEVICE, NULL);
  /* The backward's dy and gradients, as the forward's. */
  valid_shard(&s);
  mk(&s.c.dy, F32, 1, BT, 0);
  s.c.dy.t.data = (void *)(uintptr_t)(64 << 20);
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_SHAPE, "grad_output must be a scalar");
  s.c.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_NO_DEVICE, NULL);
  s.c.ts.grad_output = NULL;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_NO_DEVICE, NULL);
  valid_shard(&s);
  s.c.ts.bias = NULL;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_ARGUMENT,
              "grad_bias is given but bias is NULL");
  valid_shard(&s);
  s.c.gw.shape[0] = V + 1;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_SHAPE, "grad_weight must have shape [V, H]");
  valid_shard(&s);
  s.c.ts.grad_input = s.c.ts.grad_weight = s.c.ts.grad_bias = NULL; /* nothing wanted */
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_NO_DEVICE, NULL);
}

static void test_shard_options(void) {
  shard_call s;
  valid_shard(&s);
  s.c.opt.vocab_start = -1;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_ARGUMENT, "options->vocab_start -1 is negative");
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_ARGUMENT, "options->vocab_start -1");
  s.c.opt.vocab_start = VSTART;
  s.c.opt.vocab_size = VSTART + V - 1;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_ARGUMENT,
              "options->vocab_size 139 is below vocab_start + V_r = 100 + 40");
  s.c.opt.vocab_size = 0;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_ARGUMENT, "options->vocab_size 0 is below");
  s.c.opt.vocab_start = INT64_MAX; /* vocab_start + V_r overflows */
  s.c.opt.vocab_size = INT64_MAX;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_ARGUMENT, "options->vocab_size");
  s.c.opt.vocab_start = INT64_MAX - V; /* the last rows of the largest vocabulary */
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_NO_DEVICE, NULL);
  s.c.opt.vocab_start = VSTART; /* the last shard */
  s.c.opt.vocab_size = VSTART + V;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_NO_DEVICE, NULL);
  s.c.opt.vocab_start = 0; /* one shard: the whole vocabulary */
  s.c.opt.vocab_size = V;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_NO_DEVICE, NULL);
  valid_shard(&s);
  s.c.opt.label_smoothing = 2;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_ARGUMENT, "options->label_smoothing");
  valid_shard(&s);
  s.c.opt.scratch_budget_bytes = 4096;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_ARGUMENT, "options->scratch_budget_bytes");
  /* The unsharded entry points take no shard. */
  call c;
  valid_call(&c);
  c.opt.vocab_size = 10;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_INVALID_ARGUMENT, "options->vocab_size is 10, but only");
  c.opt.vocab_start = 1;
  size_t bytes;
  CHECK_FAILS(jitops_flce_workspace_size(rt, &c.ts, &c.opt, &bytes), JITOPS_ERR_INVALID_ARGUMENT,
              "options->vocab_start is 1");
  c.opt.vocab_start = c.opt.vocab_size = 0;
  CHECK_FAILS(fwd(&c), JITOPS_ERR_NO_DEVICE, NULL);
}

static void test_shard_overlaps(void) {
  shard_call s;
  valid_shard(&s);
  s.linear.t.data = s.lse_local.t.data;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_LAYOUT, "lse_local overlaps linear");
  /* Two columns of one [BT, 2] matrix interleave without overlapping; two of a [BT, 2] matrix
   * seen with a stride of 2 that start one row apart do overlap. */
  set_strides(&s.lse_local, 2, 0);
  set_strides(&s.linear, 2, 0);
  s.linear.t.byte_offset = 4;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_NO_DEVICE, NULL);
  set_strides(&s.lse_local, 3, 0);
  set_strides(&s.linear, 3, 0);
  s.linear.t.byte_offset = 8;
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_NO_DEVICE, NULL);
  set_strides(&s.linear, 2, 0);
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_LAYOUT, "lse_local overlaps linear");
  set_strides(&s.lse_local, 2, 0);
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_LAYOUT, "lse_local overlaps linear");
  valid_shard(&s);
  s.linear.t.data = s.c.target.t.data;
  s.linear.t.byte_offset = (BT - 1) * 8; /* the target's last element */
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_INVALID_LAYOUT, "linear overlaps target");
  s.linear.t.byte_offset = BT * 8; /* just past it */
  CHECK_FAILS(shard_stats(&s), JITOPS_ERR_NO_DEVICE, NULL);
  valid_shard(&s);
  s.c.gi.t.data = s.c.input.t.data; /* in place */
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_LAYOUT, "grad_input overlaps input");
  valid_shard(&s);
  s.c.gw.t.data = s.lse.t.data;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_LAYOUT, "grad_weight overlaps lse");
  valid_shard(&s);
  s.c.gb.t.data = s.c.gw.t.data;
  s.c.gb.t.byte_offset = (V * H - 1) * 2;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_LAYOUT, "grad_weight overlaps grad_bias");
  valid_shard(&s);
  s.c.gi.t.data = s.c.dy.t.data;
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_INVALID_LAYOUT, "grad_input overlaps grad_output");
  /* Empty tensors overlap nothing. */
  valid_shard(&s);
  mk(&s.c.input, BF16, 2, 0, H);
  mk(&s.c.target, I64, 1, 0, 0);
  mk(&s.c.gi, BF16, 2, 0, H);
  mk(&s.lse, F32, 1, 0, 0);
  CHECK_FAILS(shard_backward(&s), JITOPS_ERR_NO_DEVICE, NULL);
}

static void test_shard_workspace_size(void) {
  shard_call s;
  valid_shard(&s);
  jitops_flce_tensors ts = stats_tensors(&s);
  size_t stats = 0, backward = 0;
  CHECK_FAILS(
      jitops_flce_shard_stats_workspace_size(rt, &ts, &s.c.opt, &s.lse_local.t, &s.linear.t, NULL),
      JITOPS_ERR_INVALID_ARGUMENT, "bytes");
  CHECK_FAILS(jitops_flce_shard_backward_workspace_size(rt, &s.c.ts, &s.c.opt, &s.lse.t, NULL),
              JITOPS_ERR_INVALID_ARGUMENT, "bytes");
  CHECK_OK(jitops_flce_shard_stats_workspace_size(rt, &ts, &s.c.opt, &s.lse_local.t, &s.linear.t,
                                                  &stats));
  CHECK_OK(jitops_flce_shard_backward_workspace_size(rt, &s.c.ts, &s.c.opt, &s.lse.t, &backward));
  CHECK(stats > JITOPS__FLCE_BLAS_WORKSPACE && stats < backward);
  CHECK(backward < JITOPS__FLCE_BLAS_WORKSPACE + (1 << 20));
  s.c.opt.vocab_size = 1;
  CHECK_FAILS(jitops_flce_shard_backward_workspace_size(rt, &s.c.ts, &s.c.opt, &s.lse.t, &backward),
              JITOPS_ERR_INVALID_ARGUMENT, "options->vocab_size");
}

/* A shard call's plan and kernels, chosen as the entry points choose them. */
static void shard_kernels(shard_call *s, jitops__flce_kind kind, jitops__flce_plan *plan,
                          jitops__flce_kernel_plan *k) {
  jitops__flce_call checked;
  jitops_flce_tensors ts = stats_tensors(s);
  if (kind == JITOPS__FLCE_SHARD_STATS)
    CHECK_OK(jitops__flce_check_shard_stats("test", rt, &ts, &s->c.opt, &s->lse_local.t,
                                            &s->linear.t, &checked));
  else
    CHECK_OK(
        jitops__flce_check_shard_backward("test", rt, &s->c.ts, &s->c.opt, &s->lse.t, &checked));
  CHECK(checked.vocab0 == s->c.opt.vocab_start && checked.vocab == s->c.opt.vocab_size);
  jitops__flce_problem p;
  jitops__flce_problem_of(&checked, &p);
  CHECK_OK(jitops__flce_plan_make("test", &p, plan));
  jitops__flce_kernels_choose(&checked, plan, k);
}

/* Compiles every kernel a plan names (NVRTC, on the compile-only runtime). */
static void compile_kernels(const jitops__flce_kernel_plan *k) {
  for (int role = 0; role < JITOPS__FLCE_K_ROLES; ++role) {
    jitops_kernel_t *kernel = NULL;
    if (k->name[role][0] != '\0')
      CHECK_OK(jitops_kernel_get(rt, JITOPS__FLCE_SOURCE, k->name[role], NULL, 0, &kernel));
  }
}

/* The kernels of both phases, as named and as NVRTC compiles them: the statistics in
 * SHARD_STATS mode (one instance for every reduction and z-loss), the backward in SLICE mode
 * from the copied lse, over the whole shard or (a tight budget) over vocabulary groups. */
static void test_shard_kernels(void) {
  jitops_stats before, after;
  CHECK_OK(jitops_runtime_get_stats(rt, &before));
  shard_call s;
  jitops__flce_plan plan;
  jitops__flce_kernel_plan k;
  valid_shard(&s);
  s.c.opt.softcap = 30;
  s.c.opt.label_smoothing = 0.1;
  s.c.opt.z_loss_scale = 1e-4;
  shard_kernels(&s, JITOPS__FLCE_SHARD_STATS, &plan, &k);
  CHECK(strcmp(k.name[JITOPS__FLCE_K_PASS1],
               "jitops::flce::rows<jitops::bfloat16, float, 128, 3, true, true, true, false, "
               "false>") == 0);
  CHECK(k.name[JITOPS__FLCE_K_COUNT][0] == '\0' && k.name[JITOPS__FLCE_K_SLICE][0] == '\0');
  CHECK(strcmp(k.name[JITOPS__FLCE_K_LOSS], "jitops::flce::convert<float, float>") == 0);
  CHECK(strcmp(k.name[JITOPS__FLCE_K_LSE], "jitops::flce::convert<float, float>") == 0);
  compile_kernels(&k);
  shard_kernels(&s, JITOPS__FLCE_SHARD_BACKWARD, &plan, &k);
  CHECK(plan.algorithm == JITOPS__FLCE_ROWS);
  CHECK(strcmp(k.name[JITOPS__FLCE_K_PASS1],
               "jitops::flce::rows<jitops::bfloat16, float, 128, 2, true, true, true, true, "
               "true>") == 0);
  CHECK(strcmp(k.name[JITOPS__FLCE_K_COUNT], "jitops::flce::count_valid") == 0);
  CHECK(k.name[JITOPS__FLCE_K_LOSS][0] == '\0');
  compile_kernels(&k);
  /* A tight budget: the first pass for grad_input, vocabulary groups for grad_weight. */
  s.c.opt.chunk_rows = 2;
  s.c.opt.scratch_budget_bytes = (int64_t)JITOPS__FLCE_BLAS_WORKSPACE + 2304; /* no f32 acc */
  s.c.opt.reduction = JITOPS_FLCE_REDUCTION_SUM;
  shard_kernels(&s, JITOPS__FLCE_SHARD_BACKWARD, &plan, &k);
  CHECK(plan.algorithm == JITOPS__FLCE_VOCAB && plan.steps.pass2 && plan.steps.pass1_grads);
  CHECK(k.name[JITOPS__FLCE_K_COUNT][0] == '\0' && k.name[JITOPS__FLCE_K_SLICE][0] != '\0');
  compile_kernels(&k);
  /* ... without grad_input the first pass has nothing to do. */
  s.c.ts.grad_input = NULL;
  shard_kernels(&s, JITOPS__FLCE_SHARD_BACKWARD, &plan, &k);
  CHECK(plan.algorithm == JITOPS__FLCE_VOCAB && !plan.steps.pass1_grads);
  CHECK(k.name[JITOPS__FLCE_K_PASS1][0] == '\0' && k.name[JITOPS__FLCE_K_SLICE][0] != '\0');
  /* f32 with no bias and a per-token dy. */
  valid_shard(&s);
  s.c.input.t.dtype = s.c.weight.t.dtype = s.c.gi.t.dtype = s.c.gw.t.dtype = F32;
  s.c.ts.bias = s.c.ts.grad_bias = NULL;
  s.c.opt.reduction = JITOPS_FLCE_REDUCTION_NONE;
  mk(&s.c.dy, F32, 1, BT, 0);
  s.c.dy.t.data = (void *)(uintptr_t)(64 << 20);
  shard_kernels(&s, JITOPS__FLCE_SHARD_STATS, &plan, &k);
  compile_kernels(&k);
  shard_kernels(&s, JITOPS__FLCE_SHARD_BACKWARD, &plan, &k);
  compile_kernels(&k);
  /* An empty batch zeroes the shard's gradients. */
  valid_shard(&s);
  mk(&s.c.input, BF16, 2, 0, H);
  mk(&s.c.target, I64, 1, 0, 0);
  mk(&s.c.gi, BF16, 2, 0, H);
  mk(&s.lse, F32, 1, 0, 0);
  shard_kernels(&s, JITOPS__FLCE_SHARD_BACKWARD, &plan, &k);
  CHECK(k.name[JITOPS__FLCE_K_GW_ZERO][0] != '\0' && k.name[JITOPS__FLCE_K_GB_ZERO][0] != '\0');
  CHECK(k.name[JITOPS__FLCE_K_PASS1][0] == '\0');
  CHECK_OK(jitops_runtime_get_stats(rt, &after));
  CHECK(after.compile_errors == before.compile_errors);
  printf("  shard kernels: %llu compiled, %llu loaded from the cache\n",
         (unsigned long long)(after.compiles - before.compiles),
         (unsigned long long)(after.disk_hits - before.disk_hits));
}

/* ---- the planner ---------------------------------------------------------------------- */

static jitops__flce_problem problem(int64_t bt, int64_t h, int64_t v, int64_t budget) {
  jitops__flce_problem p;
  memset(&p, 0, sizeof p);
  p.bt = bt;
  p.h = h;
  p.v = v;
  p.elem = 2;
  p.acc_elem = 4;
  p.grad_input = p.grad_weight = true;
  p.grad_weight_16bit = true;
  p.budget = budget;
  return p;
}

/* What every plan must satisfy: within budget, aligned, buffers that hold what they must. */
static void check_plan(const jitops__flce_problem *p, const jitops__flce_plan *plan) {
  CHECK(plan->total_bytes <= (size_t)p->budget);
  CHECK(plan->off_region % 256 == 0 && plan->off_blas % 256 == 0 && plan->off_lse % 256 == 0);
  CHECK(plan->chunk_rows >= 1 && plan->chunk_rows <= (p->bt > 0 ? p->bt : 1));
  CHECK(plan->ld_logits >= p->v && plan->ld_logits % 64 == 0);
  size_t chunk = (size_t)plan->chunk_rows * (size_t)plan->ld_logits * p->elem;
  CHECK(plan->off_region + chunk <= plan->total_bytes);
  if (plan->grad_weight_acc) {
    CHECK(plan->off_gw_acc >= plan->off_region + chunk);
    CHECK(plan->off_gw_acc + (size_t)p->v * (size_t)p->h * 4 <= plan->total_bytes);
  }
  if (plan->algorithm == JITOPS__FLCE_VOCAB) {
    CHECK(plan->group_cols >= 1 && plan->group_cols <= p->v && plan->ld_group >= plan->group_cols);
    CHECK(plan->ld_group % 64 == 0);
    CHECK(plan->off_region + (size_t)p->bt * (size_t)plan->ld_group * p->elem <= plan->total_bytes);
  }
}

static void test_plan(void) {
  const char *fn = "test";
  jitops__flce_plan plan;
  int64_t gib = (int64_t)1 << 30;
  /* Llama-3's head under the default budget: no room for a V x H f32 accumulator, so the
   * vocab algorithm, with 1024-row chunks. */
  jitops__flce_problem p = problem(8192, 4096, 128256, JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET);
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_VOCAB && plan.chunk_rows == 1024);
  check_plan(&p, &plan);
  /* The same with 3 GiB: the whole batch is one chunk (3 GEMMs, no accumulator). */
  p.budget = 3 * gib;
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_ROWS && !plan.grad_weight_acc && plan.chunk_rows == 8192);
  check_plan(&p, &plan);
  /* Four times the rows with 4 GiB: rows, accumulating in f32, chunks grown to 4096 rows. */
  p.bt = 32768;
  p.budget = 4 * gib;
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_ROWS && plan.grad_weight_acc && plan.chunk_rows == 4096);
  check_plan(&p, &plan);
  p.bt = 8192;
  /* An f32 grad_weight is its own accumulator. */
  p.budget = JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET;
  p.grad_weight_16bit = false;
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_ROWS && !plan.grad_weight_acc);
  check_plan(&p, &plan);
  /* Without grad_weight there is nothing to accumulate. */
  p = problem(8192, 4096, 128256, JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET);
  p.grad_weight = false;
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_ROWS && !plan.grad_weight_acc && plan.chunk_rows == 1024);
  check_plan(&p, &plan);
  /* Small batches fit in one chunk: one GEMM of each kind, no accumulator. */
  p = problem(2048, 4096, 128256, JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET);
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_ROWS && plan.chunk_rows == 2048 && !plan.grad_weight_acc);
  check_plan(&p, &plan);
  p = problem(8192, 4096, 32000, JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET);
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_ROWS && plan.chunk_rows == 8192);
  check_plan(&p, &plan);
  /* Long batches: the vocabulary groups narrow so that all rows fit. */
  p = problem(32768, 4096, 128256, JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET);
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_VOCAB && plan.group_cols >= 2048);
  check_plan(&p, &plan);
  /* An explicit chunk is honoured. */
  p = problem(1000, 64, 1000, JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET);
  p.chunk_rows = 96;
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.chunk_rows == 96 && plan.algorithm == JITOPS__FLCE_ROWS && plan.grad_weight_acc);
  check_plan(&p, &plan);
  /* A tight budget pushes it to the vocab algorithm. */
  p.budget = (int64_t)(JITOPS__FLCE_BLAS_WORKSPACE + 300000);
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_VOCAB && plan.chunk_rows == 96);
  check_plan(&p, &plan);
  /* Empty batches still plan. */
  p = problem(0, 64, 1000, JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET);
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  check_plan(&p, &plan);
  /* Too small a budget is refused, naming the option. */
  p = problem(8192, 4096, 128256, 1 << 20);
  CHECK_FAILS(jitops__flce_plan_make(fn, &p, &plan), JITOPS_ERR_INVALID_ARGUMENT,
              "scratch_budget_bytes");
  /* The largest budget plans as any other. */
  p = problem(8192, 4096, 128256, INT64_MAX);
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_ROWS && plan.chunk_rows == 8192);
  check_plan(&p, &plan);
}

/* The automatic budget: a sixteenth of the device, half the free memory when that is less,
 * within [1 GiB, 8 GiB]; and on an idle 80 GB H100 it plans Llama-3's head as one chunk. */
static void test_auto_budget(void) {
  const size_t gib = (size_t)1 << 30;
  const int64_t least = JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET,
                most = JITOPS_FLCE_MAX_AUTO_SCRATCH_BUDGET;
  CHECK(jitops__flce_auto_budget(0, 0) == least);                            /* unknown */
  CHECK(jitops__flce_auto_budget(79 * gib, 80 * gib) == (int64_t)(5 * gib)); /* idle H100 */
  CHECK(jitops__flce_auto_budget(6 * gib, 80 * gib) == (int64_t)(3 * gib));  /* memory short */
  CHECK(jitops__flce_auto_budget(gib, 80 * gib) == least);                   /* very short */
  CHECK(jitops__flce_auto_budget(140 * gib, 141 * gib) == most);             /* an H200: capped */
  CHECK(jitops__flce_auto_budget(1000 * gib, 1024 * gib) == most);           /* capped */
  CHECK(jitops__flce_auto_budget(15 * gib, 16 * gib) == least);              /* a 16 GB card */
  jitops__flce_plan plan;
  jitops__flce_problem p =
      problem(8192, 4096, 128256, jitops__flce_auto_budget(79 * gib, 80 * gib));
  CHECK_OK(jitops__flce_plan_make("test", &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_ROWS && plan.chunk_rows == 8192 && !plan.grad_weight_acc);
  /* With memory short it still falls back to the vocabulary algorithm. */
  p.budget = jitops__flce_auto_budget(gib, 80 * gib);
  CHECK_OK(jitops__flce_plan_make("test", &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_VOCAB);
}

/* Problems whose scratch arithmetic overflows: refused, or (an accumulator beyond any budget)
 * planned without it, never wrapped into a small size. */
static void test_plan_overflow(void) {
  const char *fn = "test";
  jitops__flce_plan plan;
  jitops__flce_problem p = problem(8192, 4096, INT64_MAX, INT64_MAX);
  CHECK_FAILS(jitops__flce_plan_make(fn, &p, &plan), JITOPS_ERR_OUT_OF_RANGE,
              "weight's V = 9223372036854775807");
  p = problem(INT64_MAX, 4096, 128256, INT64_MAX);
  CHECK_FAILS(jitops__flce_plan_make(fn, &p, &plan), JITOPS_ERR_OUT_OF_RANGE,
              "more scratch bytes than size_t counts");
  p = problem(8192, 4096, ((int64_t)1 << 62) - 64, INT64_MAX); /* a row of 2^63 bytes */
  CHECK_FAILS(jitops__flce_plan_make(fn, &p, &plan), JITOPS_ERR_INVALID_ARGUMENT,
              "scratch_budget_bytes");
  p = problem(8192, 4096, ((int64_t)1 << 62) - 64, INT64_MAX);
  p.elem = 4; /* 2^64 bytes */
  CHECK_FAILS(jitops__flce_plan_make(fn, &p, &plan), JITOPS_ERR_OUT_OF_RANGE,
              "more scratch bytes than size_t counts");
  p = problem(8192, 4096, 128256, INT64_MAX);
  p.grad_bias = true;
  p.v = ((int64_t)1 << 62) - 64; /* the bias accumulator: 2^64 bytes */
  p.elem = 1;
  CHECK_FAILS(jitops__flce_plan_make(fn, &p, &plan), JITOPS_ERR_OUT_OF_RANGE,
              "more scratch bytes than size_t counts");
  /* V x H x 4 bytes of accumulator past size_t: the vocab algorithm, as for any accumulator
   * that does not fit. */
  p = problem(8192, (int64_t)1 << 40, 1 << 20, (int64_t)8 << 30);
  p.chunk_rows = 64;
  CHECK_OK(jitops__flce_plan_make(fn, &p, &plan));
  CHECK(plan.algorithm == JITOPS__FLCE_VOCAB && !plan.grad_weight_acc);
  check_plan(&p, &plan);
  /* A chunk whose logits overflow size_t. */
  p = problem((int64_t)1 << 40, 64, (int64_t)1 << 30, INT64_MAX);
  p.grad_weight = false;
  p.chunk_rows = (int64_t)1 << 40;
  CHECK_FAILS(jitops__flce_plan_make(fn, &p, &plan), JITOPS_ERR_INVALID_ARGUMENT,
              "options->chunk_rows 1099511627776 needs more bytes of logits than size_t");
}

/* ---- the GEMM mapping ----------------------------------------------------------------- */

/* cuBLAS's definition: D(i, j) = sum_l op(A)(i, l) op(B)(l, j), column-major storage. */
static void cm_reference(const jitops__flce_cm_gemm *g, const double *a, const double *b,
                         double *c) {
  for (int64_t i = 0; i < g->m; ++i)
    for (int64_t j = 0; j < g->n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < g->k; ++l) {
        double x = g->trans_a ? a[l + i * g->lda] : a[i + l * g->lda];
        double y = g->trans_b ? b[j + l * g->ldb] : b[l + j * g->ldb];
        s += x * y;
      }
      c[i + j * g->ldc] = s;
    }
}

static void test_gemm_mapping(void) {
  uint64_t seed = 7;
  const int64_t m = 5, n = 7, k = 3, pad = 2;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      /* Row-major operands with padded leading dimensions. */
      int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
      double a[64], b[64], c[64], want[64];
      for (int i = 0; i < 64; ++i) {
        a[i] = test_rand_uniform(&seed, -1, 1);
        b[i] = test_rand_uniform(&seed, -1, 1);
        c[i] = want[i] = 0;
      }
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t l = 0; l < k; ++l)
            s += (ta ? a[l * lda + i] : a[i * lda + l]) * (tb ? b[j * ldb + l] : b[l * ldb + j]);
          want[i * ldc + j] = s;
        }
      jitops__flce_gemm g;
      memset(&g, 0, sizeof g);
      g.m = m;
      g.n = n;
      g.k = k;
      g.a = a;
      g.lda = lda;
      g.trans_a = ta;
      g.b = b;
      g.ldb = ldb;
      g.trans_b = tb;
      g.c = c;
      g.ldc = ldc;
      jitops__flce_cm_gemm cm;
      jitops__flce_gemm_to_column_major(&g, &cm);
      /* The stored shapes cuBLASLt is told must cover exactly the stored matrices. */
      CHECK(cm.a == b && cm.b == a && cm.c == c);
      CHECK(cm.a_cols == b_rows && cm.a_rows == b_cols && cm.lda >= cm.a_rows);
      CHECK(cm.b_cols == a_rows && cm.b_rows == a_cols && cm.ldb >= cm.b_rows);
      CHECK(cm.c_rows == n && cm.c_cols == m && cm.ldc >= cm.c_rows);
      cm_reference(&cm, cm.a, cm.b, c);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          CHECK(fabs(c[i * ldc + j] - want[i * ldc + j]) < 1e-12);
    }
}

int main(void) {
  jitops_runtime_config cfg = test_offline_config("sm_90", NULL);
  CHECK_OK(jitops_runtime_create(&cfg, &rt));
  if (rt == NULL)
    return test_finish("test_flce_validation");
  test_null_and_device();
  test_shapes();
  test_dtypes();
  test_layouts();
  test_options();
  test_workspace_size();
  test_backward();
  test_hostile_tensors();
  test_hostile_backward();
  test_random_hostile();
  test_shard_arguments();
  test_shard_options();
  test_shard_overlaps();
  test_shard_workspace_size();
  test_shard_kernels();
  test_plan();
  test_auto_budget();
  test_plan_overflow();
  test_gemm_mapping();
  jitops_runtime_destroy(rt);
  return test_finish("test_flce_validation");
}
