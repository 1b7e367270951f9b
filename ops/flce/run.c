/* Fused linear cross-entropy: the entry points, and the order of GEMMs and kernels.
 *
 * First pass, per chunk of rows (every algorithm):
 *   logits[chunk, V] = input[chunk] @ weight^T                      (cuBLASLt)
 *   rows kernel: lse, loss and (if gradients are wanted) d loss / d logits, in place
 *   grad_bias (+)= column sums                                       (colsum kernel)
 *   grad_input[chunk] = dlogits @ weight                             (cuBLASLt)
 *   rows algorithm: grad_weight (+)= dlogits^T @ input[chunk]         (cuBLASLt, f32 or direct)
 * Second pass, vocab algorithm only, per group of vocabulary columns, over all rows:
 *   logits[BT, group] = input @ weight[group]^T; the rows kernel turns them into gradients
 *   from the saved lse; grad_weight[group] = dlogits^T @ input (one GEMM, no accumulator).
 * Then the f32 accumulators are converted and the loss reduced, dividing by the count of
 * non-ignored rows that a first kernel left on the device. */
#include <stdio.h>
#include <string.h>

#include "jitops/flce.h"
#include "ops/flce/args.h"
#include "ops/flce/flce_abi.h"
#include "ops/flce/gemm.h"
#include "ops/flce/kernels.h"
#include "ops/flce/plan.h"

/* A user workspace may be less aligned than the 256 bytes the layout assumes. */
#define SCRATCH_SLACK ((size_t)256)

/* What a validated call does. */
typedef struct flce_steps {
  bool pass2;        /* vocab algorithm: grad_weight by vocabulary groups */
  bool pass1_grads;  /* the first pass writes gradients (else only lse and loss) */
  bool colsum_pass1; /* grad_bias from the first pass's gradients */
  bool colsum_pass2; /* ... or from the second pass's */
} flce_steps;

typedef struct flce_kernels {
  jitops_kernel_t *count, *pass1, *slice, *colsum, *gw_convert, *gb_convert, *loss, *lse;
  jitops_kernel_t *gw_zero, *gb_zero;
  int pass1_block, slice_block;
  bool gw_convert_flat; /* grad_weight is contiguous and aligned: the vectorized convert */
} flce_kernels;

/* Device addresses of the plan's scratch buffers. */
typedef struct flce_scratch {
  int64_t *count;
  char *loss_rows, *lse_rows, *bias_acc, *blas, *region, *gw_acc;
  size_t blas_bytes;
} flce_scratch;

static jitops_status make_plan(const char *fn, const jitops__flce_call *c,
                               jitops__flce_plan *plan) {
  jitops__flce_problem p;
  memset(&p, 0, sizeof p);
  p.bt = c->bt;
  p.h = c->h;
  p.v = c->v;
  p.elem = jitops__dtype_size(c->t);
  p.acc_elem = jitops__dtype_size(c->acc);
  p.grad_input = c->gi != NULL;
  p.grad_weight = c->gw != NULL;
  p.grad_bias = c->gb != NULL;
  p.grad_weight_16bit = c->gw != NULL && jitops__dtype_size(c->gw_dtype) == 2;
  p.chunk_rows = c->opt.chunk_rows;
  p.budget = c->opt.scratch_budget_bytes > 0 ? c->opt.scratch_budget_bytes
                                             : JITOPS_FLCE_DEFAULT_SCRATCH_BUDGET;
  return jitops__flce_plan_make(fn, &p, plan);
}

static flce_steps steps_of(const jitops__flce_call *c, const jitops__flce_plan *plan) {
  flce_steps s;
  s.pass2 = c->gw != NULL && plan->algorithm == JITOPS__FLCE_VOCAB;
  s.pass1_grads = c->gi != NULL || (c->gw != NULL && !s.pass2) || (c->gb != NULL && !s.pass2);
  s.colsum_pass1 = c->gb != NULL && s.pass1_grads;
  s.colsum_pass2 = c->gb != NULL && !s.pass1_grads;
  return s;
}

static jitops_status require_device(const char *fn, jitops_runtime_t *runtime) {
  jitops_runtime_info info;
  JITOPS__TRY(jitops_runtime_get_info(runtime, &info));
  if (!info.has_device)
    return jitops__fail(JITOPS_ERR_NO_DEVICE,
                        "%s: this runtime is compile-only (no GPU); the call was validated but "
                        "cannot run",
                        fn);
  return JITOPS_SUCCESS;
}

static jitops_status get_rows_kernel(jitops_runtime_t *rt, const jitops__flce_call *c, int mode,
                                     int64_t ncols, jitops_kernel_t **out, int *block) {
  jitops__flce_rows_kind kind;
  memset(&kind, 0, sizeof kind);
  kind.t = c->t;
  kind.block = jitops__flce_rows_block(ncols);
  kind.mode = mode;
  kind.bias = c->bias != NULL;
  kind.softcap = c->opt.softcap > 0.0;
  kind.smooth = c->opt.label_smoothing > 0.0;
  kind.zloss = c->opt.z_loss_scale > 0.0;
  /* The statistics pass never reads dy or the count: one instance serves every reduction. */
  bool grads = mode != JITOPS__FLCE_MODE_STATS;
  kind.dy = grads && c->dy != NULL ? c->dy_dtype : JITOPS__DTYPE_F32;
  kind.mean = grads && c->opt.reduction == JITOPS_FLCE_REDUCTION_MEAN;
  char name[256];
  jitops__flce_rows_name(&kind, name, sizeof name);
  *block = kind.block;
  return jitops__flce_kernel(rt, name, out);
}

static jitops_status get2(jitops_runtime_t *rt, const char *kernel, jitops__dtype a,
                          jitops__dtype b, jitops_kernel_t **out) {
  char name[256];
  jitops__flce_name2(kernel, a, b, name, sizeof name);
  return jitops__flce_kernel(rt, name, out);
}

static jitops_status get_zero(jitops_runtime_t *rt, jitops__dtype t, jitops_kernel_t **out) {
  char name[256];
  snprintf(name, sizeof name, "jitops::flce::zero<%s>", jitops__dtype_cname(t));
  return jitops__flce_kernel(rt, name, out);
}

static bool flat_aligned(const void *ptr, size_t bytes) {
  return (uintptr_t)ptr % bytes == 0;
}

/* Every kernel the call launches, compiled or loaded before any device work. */
static jitops_status get_kernels(jitops_runtime_t *rt, const jitops__flce_call *c,
                                 const jitops__flce_plan *plan, const flce_steps *s,
                                 flce_kernels *k) {
  memset(k, 0, sizeof *k);
  JITOPS__TRY(jitops__flce_kernel(rt, "jitops::flce::count_valid", &k->count));
  if (c->opt.reduction == JITOPS_FLCE_REDUCTION_NONE)
    JITOPS__TRY(get2(rt, "convert", c->acc, c->loss_dtype, &k->loss));
  else
    JITOPS__TRY(get2(rt, "reduce_loss", c->acc, c->loss_dtype, &k->loss));
  if (c->lse != NULL)
    JITOPS__TRY(get2(rt, "convert", c->acc, c->acc, &k->lse));
  if (c->bt == 0) { /* nothing to compute: zero the gradients */
    if (c->gw != NULL)
      JITOPS__TRY(get_zero(rt, c->gw_dtype, &k->gw_zero));
    if (c->gb != NULL)
      JITOPS__TRY(get_zero(rt, c->gb_dtype, &k->gb_zero));
    return JITOPS_SUCCESS;
  }
  JITOPS__TRY(get_rows_kernel(rt, c,
                              s->pass1_grads ? JITOPS__FLCE_MODE_FULL : JITOPS__FLCE_MODE_STATS,
                              c->v, &k->pass1, &k->pass1_block));
  if (s->pass2)
    JITOPS__TRY(get_rows_kernel(rt, c, JITOPS__FLCE_MODE_SLICE, plan->group_cols, &k->slice,
                                &k->slice_block));
  if (c->gb != NULL) {
    JITOPS__TRY(get2(rt, "colsum", c->t, c->acc, &k->colsum));
    JITOPS__TRY(get2(rt, "convert", c->acc, c->gb_dtype, &k->gb_convert));
  }
  if (plan->grad_weight_acc) {
    k->gw_convert_flat =
        c->ldgw == c->h &&
        flat_aligned(c->gw, JITOPS__FLCE_CONVERT_FLAT_VEC * jitops__dtype_size(c->gw_dtype));
    JITOPS__TRY(get2(rt, k->gw_convert_flat ? "convert_flat" : "convert", JITOPS__DTYPE_F32,
                     c->gw_dtype, &k->gw_convert));
  }
  return JITOPS_SUCCESS;
}

static flce_scratch carve(const jitops__flce_plan *plan, void *ptr) {
  char *base = (char *)(((uintptr_t)ptr + SCRATCH_SLACK - 1) & ~(uintptr_t)(SCRATCH_SLACK - 1));
  flce_scratch s;
  s.count = (int64_t *)(base + plan->off_count);
  s.loss_rows = base + plan->off_loss;
  s.lse_rows = base + plan->off_lse;
  s.bias_acc = base + plan->off_bias;
  s.blas = base + plan->off_blas;
  s.blas_bytes = plan->blas_bytes;
  s.region = base + plan->off_region;
  s.gw_acc = base + plan->off_gw_acc;
  return s;
}

/* ---- launches ------------------------------------------------------------------------- */

/* Elementwise kernels over rows x cols: threads (x, y) cover (columns, rows). */
static jitops_status launch_2d(const jitops_kernel_t *k, int64_t nrows, int64_t ncols, void *stream,
                               void *args) {
  void *params[] = {args};
  uint32_t bx = 1;
  while (bx < 256 && (int64_t)bx < ncols)
    bx *= 2;
  uint32_t by = 256 / bx;
  int64_t blocks = (nrows + by - 1) / by;
  if (blocks > (1 << 20)) /* the kernels loop over the rest */
    blocks = 1 << 20;
  if (blocks < 1)
    blocks = 1;
  return jitops__launch(k, (uint32_t)blocks, 1, 1, bx, by, 1, 0, stream, params);
}

/* Grid-stride kernels over n contiguous elements, `per_thread` per access. */
static jitops_status launch_flat(jitops_runtime_t *rt, const jitops_kernel_t *k, int64_t n,
                                 int per_thread, void *stream, void *args) {
  void *params[] = {args};
  int64_t blocks = (n / per_thread + JITOPS__FLCE_FLAT_THREADS - 1) / JITOPS__FLCE_FLAT_THREADS;
  int64_t most = (int64_t)jitops__runtime_props(rt)->sm_count * 16;
  if (most > 0 && blocks > most)
    blocks = most;
  if (blocks < 1)
    blocks = 1;
  return jitops__launch(k, (uint32_t)blocks, 1, 1, JITOPS__FLCE_FLAT_THREADS, 1, 1, 0, stream,
                        params);
}

/* dst[r * dst_ld + c] = src[r * src_ld + c] through jitops::flce::convert. */
static jitops_status launch_convert(const jitops_kernel_t *k, const void *src, int64_t src_ld,
                                    void *dst, int64_t dst_ld, int64_t nrows, int64_t ncols,
                                    void *stream) {
  jitops__flce_convert_args a = {src, src_ld, dst, dst_ld, nrows, ncols};
  return launch_2d(k, nrows, ncols, stream, &a);
}

static jitops_status launch_colsum(const jitops_kernel_t *k, const void *g, int64_t ld,
                                   int64_t nrows, int64_t ncols, void *acc, int accumulate,
                                   void *stream) {
  jitops__flce_colsum_args a = {g, ld, nrows, ncols, acc, accumulate};
  void *params[] = {&a};
  const int64_t threads = JITOPS__FLCE_FLAT_THREADS;
  return jitops__launch(k, (uint32_t)((ncols + threads - 1) / threads), 1, 1, (uint32_t)threads, 1,
                        1, 0, stream, params);
}

static jitops_status launch_rows(const jitops_kernel_t *k, int block, int64_t nrows,
                                 jitops__flce_rows_args *a, void *stream) {
  void *args[] = {a};
  return jitops__launch(k, (uint32_t)nrows, 1, 1, (uint32_t)block, 1, 1, 0, stream, args);
}

static jitops__flce_rows_args row_args_of(const jitops__flce_call *c, const flce_scratch *s) {
  jitops__flce_rows_args a;
  memset(&a, 0, sizeof a);
  a.target = c->target;
  a.bias = c->bias;
  a.dy = c->dy;
  a.count = s->count;
  a.lse_rows = s->lse_rows;
  a.loss_rows = s->loss_rows;
  a.vocab = c->v;
  a.target_stride = c->target_stride;
  a.bias_stride = c->bias_stride;
  a.dy_stride = c->dy_stride;
  a.ignore_index = c->opt.ignore_index;
  a.label_smoothing = c->opt.label_smoothing;
  a.softcap = c->opt.softcap;
  a.z_loss_scale = c->opt.z_loss_scale;
  return a;
}

/* ---- GEMMs ---------------------------------------------------------------------------- */

typedef struct flce_ctx {
  jitops_runtime_t *rt;
  const jitops__flce_call *c;
  const jitops__flce_plan *plan;
  const flce_steps *steps;
  const flce_kernels *k;
  const flce_scratch *s;
  void *stream;
  size_t elem;
} flce_ctx;

static jitops_status gemm(const flce_ctx *x, jitops__flce_gemm *g) {
  g->ab_dtype = x->c->t;
  if (g->c_dtype == JITOPS__DTYPE_INVALID)
    g->c_dtype = x->c->t;
  return jitops__flce_gemm_run(x->rt, g, x->s->blas, x->s->blas_bytes, x->stream);
}

/* out[rows, cols] = input[r0 : r0 + rows] @ weight[col0 : col0 + cols]^T */
static jitops_status gemm_logits(const flce_ctx *x, int64_t r0, int64_t rows, int64_t col0,
                                 int64_t cols, void *out, int64_t ldo) {
  const jitops__flce_call *c = x->c;
  jitops__flce_gemm g;
  memset(&g, 0, sizeof g);
  g.m = rows;
  g.n = cols;
  g.k = c->h;
  g.a = (const char *)c->x + (size_t)(r0 * c->ldx) * x->elem;
  g.lda = c->ldx;
  g.b = (const char *)c->w + (size_t)(col0 * c->ldw) * x->elem;
  g.ldb = c->ldw;
  g.trans_b = true;
  g.c = out;
  g.ldc = ldo;
  return gemm(x, &g);
}

/* grad_input[r0 : r0 + rows] = dlogits[rows, V] @ weight */
static jitops_status gemm_grad_input(const flce_ctx *x, int64_t r0, int64_t rows) {
  const jitops__flce_call *c = x->c;
  jitops__flce_gemm g;
  memset(&g, 0, sizeof g);
  g.m = rows;
  g.n = c->h;
  g.k = c->v;
  g.a = x->s->region;
  g.lda = x->plan->ld_logits;
  g.b = c->w;
  g.ldb = c->ldw;
  g.c = (char *)c->gi + (size_t)(r0 * c->ldgi) * x->elem;
  g.ldc = c->ldgi;
  return gemm(x, &g);
}

/* grad_weight[col0 : col0 + cols] (+)= dlogits[rows, cols]^T @ input[r0 : r0 + rows], into
 * `out` (the f32 accumulator, or grad_weight itself). */
static jitops_status gemm_grad_weight(const flce_ctx *x, const void *dlogits, int64_t ld,
                                      int64_t r0, int64_t rows, int64_t cols, void *out,
                                      int64_t ldo, jitops__dtype out_dtype, bool accumulate) {
  const jitops__flce_call *c = x->c;
  jitops__flce_gemm g;
  memset(&g, 0, sizeof g);
  g.m = cols;
  g.n = c->h;
  g.k = rows;
  g.a = dlogits;
  g.lda = ld;
  g.trans_a = true;
  g.b = (const char *)c->x + (size_t)(r0 * c->ldx) * x->elem;
  g.ldb = c->ldx;
  g.c = out;
  g.ldc = ldo;
  g.c_dtype = out_dtype;
  g.accumulate = accumulate;
  return gemm(x, &g);
}

/* ---- the passes ----------------------------------------------------------------------- */

static jitops_status pass1_chunk(const flce_ctx *x, jitops__flce_rows_args *a, int64_t r0,
                                 int64_t rows) {
  const jitops__flce_call *c = x->c;
  const jitops__flce_plan *plan = x->plan;
  JITOPS__TRY(gemm_logits(x, r0, rows, 0, c->v, x->s->region, plan->ld_logits));
  a->row0 = r0;
  JITOPS__TRY(launch_rows(x->k->pass1, x->k->pass1_block, rows, a, x->stream));
  if (x->steps->colsum_pass1)
    JITOPS__TRY(launch_colsum(x->k->colsum, x->s->region, plan->ld_logits, rows, c->v,
                              x->s->bias_acc, r0 > 0, x->stream));
  if (c->gi != NULL)
    JITOPS__TRY(gemm_grad_input(x, r0, rows));
  if (c->gw != NULL && !x->steps->pass2) {
    bool acc = plan->grad_weight_acc;
    JITOPS__TRY(gemm_grad_weight(x, x->s->region, plan->ld_logits, r0, rows, c->v,
                                 acc ? (void *)x->s->gw_acc : c->gw, acc ? c->h : c->ldgw,
                                 acc ? JITOPS__DTYPE_F32 : c->gw_dtype, r0 > 0));
  }
  return JITOPS_SUCCESS;
}

static jitops_status pass2_group(const flce_ctx *x, jitops__flce_rows_args *a, int64_t col0,
                                 int64_t cols) {
  const jitops__flce_call *c = x->c;
  const jitops__flce_plan *plan = x->plan;
  JITOPS__TRY(gemm_logits(x, 0, c->bt, col0, cols, x->s->region, plan->ld_group));
  a->col0 = col0;
  a->ncols = cols;
  JITOPS__TRY(launch_rows(x->k->slice, x->k->slice_block, c->bt, a, x->stream));
  if (x->steps->colsum_pass2)
    JITOPS__TRY(launch_colsum(x->k->colsum, x->s->region, plan->ld_group, c->bt, cols,
                              x->s->bias_acc + (size_t)col0 * jitops__dtype_size(c->acc), 0,
                              x->stream));
  void *out = (char *)c->gw + (size_t)(col0 * c->ldgw) * jitops__dtype_size(c->gw_dtype);
  return gemm_grad_weight(x, x->s->region, plan->ld_group, 0, c->bt, cols, out, c->ldgw,
                          c->gw_dtype, false);
}

static jitops_status run_passes(const flce_ctx *x) {
  const jitops__flce_call *c = x->c;
  const jitops__flce_plan *plan = x->plan;
  jitops__flce_rows_args a = row_args_of(c, x->s);
  a.logits = x->s->region;
  a.ld = plan->ld_logits;
  a.ncols = c->v;
  for (int64_t r0 = 0; r0 < c->bt; r0 += plan->chunk_rows) {
    int64_t rows = c->bt - r0 < plan->chunk_rows ? c->bt - r0 : plan->chunk_rows;
    JITOPS__TRY(pass1_chunk(x, &a, r0, rows));
  }
  if (!x->steps->pass2)
    return JITOPS_SUCCESS;
  a.ld = plan->ld_group;
  a.row0 = 0;
  for (int64_t col0 = 0; col0 < c->v; col0 += plan->group_cols) {
    int64_t cols = c->v - col0 < plan->group_cols ? c->v - col0 : plan->group_cols;
    JITOPS__TRY(pass2_group(x, &a, col0, cols));
  }
  return JITOPS_SUCCESS;
}

/* Accumulators to the caller's tensors, the loss's reduction, lse. */
static jitops_status finish(const flce_ctx *x) {
  const jitops__flce_call *c = x->c;
  const flce_kernels *k = x->k;
  const flce_scratch *s = x->s;
  if (k->gw_convert != NULL && k->gw_convert_flat) {
    jitops__flce_convert_flat_args a = {s->gw_acc, c->gw, c->v * c->h};
    JITOPS__TRY(
        launch_flat(x->rt, k->gw_convert, a.n, JITOPS__FLCE_CONVERT_FLAT_VEC, x->stream, &a));
  } else if (k->gw_convert != NULL) {
    JITOPS__TRY(
        launch_convert(k->gw_convert, s->gw_acc, c->h, c->gw, c->ldgw, c->v, c->h, x->stream));
  }
  if (k->gb_convert != NULL)
    JITOPS__TRY(
        launch_convert(k->gb_convert, s->bias_acc, 1, c->gb, c->gb_stride, c->v, 1, x->stream));
  if (k->gw_zero != NULL) {
    jitops__flce_scale_args a = {c->gw, c->ldgw, c->v, c->h, NULL};
    JITOPS__TRY(launch_2d(k->gw_zero, c->v, c->h, x->stream, &a));
  }
  if (k->gb_zero != NULL) {
    jitops__flce_scale_args a = {c->gb, c->gb_stride, c->v, 1, NULL};
    JITOPS__TRY(launch_2d(k->gb_zero, c->v, 1, x->stream, &a));
  }
  if (c->opt.reduction == JITOPS_FLCE_REDUCTION_NONE) {
    JITOPS__TRY(
        launch_convert(k->loss, s->loss_rows, 1, c->loss, c->loss_stride, c->bt, 1, x->stream));
  } else {
    jitops__flce_reduce_args a = {s->loss_rows, c->bt, s->count, c->loss,
                                  c->opt.reduction == JITOPS_FLCE_REDUCTION_MEAN};
    void *params[] = {&a};
    JITOPS__TRY(
        jitops__launch(k->loss, 1, 1, 1, JITOPS__FLCE_REDUCE_THREADS, 1, 1, 0, x->stream, params));
  }
  if (c->lse != NULL)
    JITOPS__TRY(launch_convert(k->lse, s->lse_rows, 1, c->lse, c->lse_stride, c->bt, 1, x->stream));
  return JITOPS_SUCCESS;
}

static jitops_status run(const flce_ctx *x) {
  const jitops__flce_call *c = x->c;
  jitops__flce_count_args a = {c->target, c->target_stride, c->bt, c->opt.ignore_index,
                               x->s->count};
  void *params[] = {&a};
  JITOPS__TRY(jitops__launch(x->k->count, 1, 1, 1, JITOPS__FLCE_REDUCE_THREADS, 1, 1, 0, x->stream,
                             params));
  JITOPS__TRY(run_passes(x));
  return finish(x);
}

/* ---- entry points --------------------------------------------------------------------- */

jitops_status jitops_flce_workspace_size(jitops_runtime_t *runtime,
                                         const jitops_flce_tensors *tensors,
                                         const jitops_flce_options *options, size_t *bytes) {
  const char *fn = "jitops_flce_workspace_size";
  JITOPS__REQUIRE_NONNULL(fn, bytes);
  jitops__flce_call c;
  JITOPS__TRY(jitops__flce_validate(fn, runtime, tensors, options, &c));
  jitops__flce_plan plan;
  JITOPS__TRY(make_plan(fn, &c, &plan));
  *bytes = plan.total_bytes + SCRATCH_SLACK;
  return JITOPS_SUCCESS;
}

jitops_status jitops_flce_forward(jitops_runtime_t *runtime, const jitops_flce_tensors *tensors,
                                  const jitops_flce_options *options,
                                  const jitops_workspace *workspace, void *stream) {
  const char *fn = "jitops_flce_forward";
  jitops__flce_call c;
  JITOPS__TRY(jitops__flce_validate(fn, runtime, tensors, options, &c));
  jitops__flce_plan plan;
  JITOPS__TRY(make_plan(fn, &c, &plan));
  JITOPS__TRY(require_device(fn, runtime));
  flce_steps steps = steps_of(&c, &plan);
  flce_kernels k;
  JITOPS__TRY(get_kernels(runtime, &c, &plan, &steps, &k));
  jitops__scratch scratch;
  JITOPS__TRY(jitops__scratch_acquire(runtime, stream, workspace, plan.total_bytes + SCRATCH_SLACK,
                                      &scratch));
  flce_scratch s = carve(&plan, scratch.ptr);
  flce_ctx x = {runtime, &c, &plan, &steps, &k, &s, stream, jitops__dtype_size(c.t)};
  jitops_status status = run(&x);
  jitops__scratch_release(runtime, stream, &scratch);
  return status;
}

jitops_status jitops_flce_backward(jitops_runtime_t *runtime, const DLTensor *grad_output,
                                   DLTensor *grad_input, DLTensor *grad_weight, DLTensor *grad_bias,
                                   void *stream) {
  const char *fn = "jitops_flce_backward";
  jitops__dtype dy_dtype;
  jitops__flce_grad grads[3];
  JITOPS__TRY(jitops__flce_validate_backward(fn, runtime, grad_output, grad_input, grad_weight,
                                             grad_bias, &dy_dtype, grads));
  JITOPS__TRY(require_device(fn, runtime));
  const void *dy = jitops__tensor_ptr(grad_output);
  for (int i = 0; i < 3; ++i) {
    jitops__flce_grad *g = &grads[i];
    if (g->data == NULL || g->rows == 0 || g->cols == 0)
      continue;
    jitops_kernel_t *k;
    /* Contiguous and aligned (what frameworks allocate): VECTOR_BYTES per access. */
    bool flat = (g->cols == 1 ? g->ld == 1 : g->ld == g->cols) &&
                flat_aligned(g->data, JITOPS__FLCE_VECTOR_BYTES);
    JITOPS__TRY(get2(runtime, flat ? "scale_flat" : "scale", g->dtype, dy_dtype, &k));
    if (flat) {
      jitops__flce_scale_flat_args a = {g->data, g->rows * g->cols, dy};
      int per_access = (int)(JITOPS__FLCE_VECTOR_BYTES / jitops__dtype_size(g->dtype));
      JITOPS__TRY(launch_flat(runtime, k, a.n, per_access, stream, &a));
    } else {
      jitops__flce_scale_args a = {g->data, g->ld, g->rows, g->cols, dy};
      JITOPS__TRY(launch_2d(k, g->rows, g->cols, stream, &a));
    }
  }
  return JITOPS_SUCCESS;
}
