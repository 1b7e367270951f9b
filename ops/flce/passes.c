/* The order of a call's GEMMs and kernels (jitops_flce_forward's; the shard entry points run
 * the same passes, see the end).
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
 * non-ignored rows that a first kernel left on the device.
 *
 * A vocabulary shard's statistics (jitops_flce_shard_stats) are the first pass alone, its row
 * kernel in SHARD_STATS mode; lse_local and linear are converted out of the per-row scratch. A
 * shard's backward (jitops_flce_shard_backward) first copies the caller's combined lse into
 * that scratch, then runs both passes with the row kernel in SLICE mode from it (the first
 * pass is skipped when only the second has work), and converts the gradients as the forward.
 *
 * The element and byte offsets below (row r0 of input, column group col0 of weight) cannot
 * overflow: args.c checked that every tensor's elements lie within 2^63 bytes of its first,
 * and plan.c that the scratch offsets fit size_t. */
#include "ops/flce/passes.h"

#include <string.h>

#include "ops/flce/flce_abi.h"
#include "ops/flce/gemm.h"
#include "ops/flce/launches.h"

/* Device addresses of the plan's scratch buffers. */
typedef struct flce_scratch {
  int64_t *count;
  char *loss_rows, *lse_rows, *bias_acc, *blas, *region, *gw_acc;
  size_t blas_bytes;
} flce_scratch;

/* What every step reads. */
typedef struct flce_ctx {
  const jitops__flce_forward *f;
  const jitops__flce_call *c;
  const jitops__flce_plan *plan;
  const flce_scratch *s;
  size_t elem; /* bytes of T */
} flce_ctx;

static flce_scratch carve(const jitops__flce_plan *plan, void *ptr) {
  const uintptr_t align = JITOPS__FLCE_SCRATCH_ALIGN;
  char *base = (char *)(((uintptr_t)ptr + align - 1) & ~(align - 1));
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

static const jitops_kernel_t *kernel(const flce_ctx *x, jitops__flce_role role) {
  return x->f->kernels[role];
}

/* ---- GEMMs ----------------------------------------------------------------------------------- */

static jitops_status gemm(const flce_ctx *x, jitops__flce_gemm *g) {
  g->ab_dtype = x->c->t;
  if (g->c_dtype == JITOPS__DTYPE_INVALID)
    g->c_dtype = x->c->t;
  return jitops__flce_gemm_run(x->f->runtime, g, x->s->blas, x->s->blas_bytes, x->f->stream);
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

/* ---- the passes ------------------------------------------------------------------------------ */

/* The row kernel's argument, less what each pass sets (the buffer, its rows and columns). */
static jitops__flce_rows_args rows_args_of(const jitops__flce_call *c, const flce_scratch *s) {
  /* By what the kernel reads them for: the targets, the bias, dy, the loss's options, and the
   * scratch's count and per-row outputs. */
  return (jitops__flce_rows_args){.target = c->target,
                                  .target_stride = c->target_stride,
                                  .ignore_index = c->opt.ignore_index,
                                  .bias = c->bias,
                                  .bias_stride = c->bias_stride,
                                  .dy = c->dy,
                                  .dy_stride = c->dy_stride,
                                  .vocab = c->vocab,
                                  .vocab0 = c->vocab0,
                                  .label_smoothing = c->opt.label_smoothing,
                                  .softcap = c->opt.softcap,
                                  .z_loss_scale = c->opt.z_loss_scale,
                                  .count = s->count,
                                  .lse_rows = s->lse_rows,
                                  .loss_rows = s->loss_rows};
}

/* grad_bias's accumulator (+)= the column sums of a gradient buffer. */
static jitops_status colsum(const flce_ctx *x, int64_t ld, int64_t nrows, int64_t ncols, void *acc,
                            bool accumulate) {
  jitops__flce_colsum_args a = {x->s->region, ld, nrows, ncols, acc, accumulate};
  return jitops__flce_launch_colsum(kernel(x, JITOPS__FLCE_K_COLSUM), &a, x->f->stream);
}

static jitops_status pass1_chunk(const flce_ctx *x, jitops__flce_rows_args *a, int64_t r0,
                                 int64_t rows) {
  const jitops__flce_call *c = x->c;
  const jitops__flce_plan *plan = x->plan;
  JITOPS__TRY(gemm_logits(x, r0, rows, 0, c->v, x->s->region, plan->ld_logits));
  a->row0 = r0;
  JITOPS__TRY(jitops__flce_launch_rows(kernel(x, JITOPS__FLCE_K_PASS1),
                                       x->f->kernel_plan->pass1_block, rows, a, x->f->stream));
  if (plan->steps.colsum_pass1)
    JITOPS__TRY(colsum(x, plan->ld_logits, rows, c->v, x->s->bias_acc, r0 > 0));
  if (c->gi != NULL)
    JITOPS__TRY(gemm_grad_input(x, r0, rows));
  if (c->gw != NULL && !plan->steps.pass2) {
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
  JITOPS__TRY(jitops__flce_launch_rows(kernel(x, JITOPS__FLCE_K_SLICE),
                                       x->f->kernel_plan->slice_block, c->bt, a, x->f->stream));
  if (plan->steps.colsum_pass2)
    JITOPS__TRY(colsum(x, plan->ld_group, c->bt, cols,
                       x->s->bias_acc + (size_t)col0 * jitops__dtype_size(c->acc), false));
  void *out = (char *)c->gw + (size_t)(col0 * c->ldgw) * jitops__dtype_size(c->gw_dtype);
  return gemm_grad_weight(x, x->s->region, plan->ld_group, 0, c->bt, cols, out, c->ldgw,
                          c->gw_dtype, false);
}

static jitops_status run_passes(const flce_ctx *x) {
  const jitops__flce_call *c = x->c;
  const jitops__flce_plan *plan = x->plan;
  jitops__flce_rows_args a = rows_args_of(c, x->s);
  a.logits = x->s->region;
  a.ld = plan->ld_logits;
  a.ncols = c->v;
  for (int64_t r0 = 0; kernel(x, JITOPS__FLCE_K_PASS1) != NULL && r0 < c->bt;
       r0 += plan->chunk_rows) {
    int64_t rows = c->bt - r0 < plan->chunk_rows ? c->bt - r0 : plan->chunk_rows;
    JITOPS__TRY(pass1_chunk(x, &a, r0, rows));
  }
  if (!plan->steps.pass2)
    return JITOPS_SUCCESS;
  a.ld = plan->ld_group;
  a.row0 = 0;
  for (int64_t col0 = 0; col0 < c->v; col0 += plan->group_cols) {
    int64_t cols = c->v - col0 < plan->group_cols ? c->v - col0 : plan->group_cols;
    JITOPS__TRY(pass2_group(x, &a, col0, cols));
  }
  return JITOPS_SUCCESS;
}

/* ---- the outputs ----------------------------------------------------------------------------- */

/* dst[r * dst_ld + c] = src[r * src_ld + c] through `role`'s convert. */
static jitops_status convert(const flce_ctx *x, jitops__flce_role role, const void *src,
                             int64_t src_ld, void *dst, int64_t dst_ld, int64_t nrows,
                             int64_t ncols) {
  jitops__flce_convert_args a = {src, src_ld, dst, dst_ld, nrows, ncols};
  return jitops__flce_launch_convert(kernel(x, role), &a, x->f->stream);
}

/* The f32 grad_weight accumulator, grad_bias's, or zeros (an empty batch) into the caller's
 * gradients. */
static jitops_status finish_grads(const flce_ctx *x) {
  const jitops__flce_call *c = x->c;
  if (kernel(x, JITOPS__FLCE_K_GW_CONVERT) != NULL && x->f->kernel_plan->gw_convert_flat) {
    jitops__flce_convert_flat_args a = {x->s->gw_acc, c->gw, c->v * c->h};
    JITOPS__TRY(jitops__flce_launch_convert_flat(
        x->f->runtime, kernel(x, JITOPS__FLCE_K_GW_CONVERT), &a, x->f->stream));
  } else if (kernel(x, JITOPS__FLCE_K_GW_CONVERT) != NULL) {
    JITOPS__TRY(
        convert(x, JITOPS__FLCE_K_GW_CONVERT, x->s->gw_acc, c->h, c->gw, c->ldgw, c->v, c->h));
  }
  if (kernel(x, JITOPS__FLCE_K_GB_CONVERT) != NULL)
    JITOPS__TRY(
        convert(x, JITOPS__FLCE_K_GB_CONVERT, x->s->bias_acc, 1, c->gb, c->gb_stride, c->v, 1));
  if (kernel(x, JITOPS__FLCE_K_GW_ZERO) != NULL) {
    jitops__flce_scale_args a = {c->gw, c->ldgw, c->v, c->h, NULL};
    JITOPS__TRY(jitops__flce_launch_scale(kernel(x, JITOPS__FLCE_K_GW_ZERO), &a, x->f->stream));
  }
  if (kernel(x, JITOPS__FLCE_K_GB_ZERO) != NULL) {
    jitops__flce_scale_args a = {c->gb, c->gb_stride, c->v, 1, NULL};
    JITOPS__TRY(jitops__flce_launch_scale(kernel(x, JITOPS__FLCE_K_GB_ZERO), &a, x->f->stream));
  }
  return JITOPS_SUCCESS;
}

/* The loss (per row, or reduced with the device's count) and lse; a shard's linear and
 * lse_local. */
static jitops_status finish_loss(const flce_ctx *x) {
  const jitops__flce_call *c = x->c;
  if (c->kind == JITOPS__FLCE_SHARD_BACKWARD)
    return JITOPS_SUCCESS;
  if (c->opt.reduction == JITOPS_FLCE_REDUCTION_NONE || c->kind == JITOPS__FLCE_SHARD_STATS) {
    JITOPS__TRY(
        convert(x, JITOPS__FLCE_K_LOSS, x->s->loss_rows, 1, c->loss, c->loss_stride, c->bt, 1));
  } else {
    jitops__flce_reduce_args a = {x->s->loss_rows, c->bt, x->s->count, c->loss,
                                  c->opt.reduction == JITOPS_FLCE_REDUCTION_MEAN};
    JITOPS__TRY(jitops__flce_launch_reduce(kernel(x, JITOPS__FLCE_K_LOSS), &a, x->f->stream));
  }
  if (c->lse != NULL)
    JITOPS__TRY(convert(x, JITOPS__FLCE_K_LSE, x->s->lse_rows, 1, c->lse, c->lse_stride, c->bt, 1));
  return JITOPS_SUCCESS;
}

jitops_status jitops__flce_forward_run(const jitops__flce_forward *f) {
  const jitops__flce_call *c = f->call;
  flce_scratch s = carve(f->plan, f->scratch);
  flce_ctx x = {f, c, f->plan, &s, jitops__dtype_size(c->t)};
  jitops__flce_count_args count = {c->target, c->target_stride, c->bt, c->opt.ignore_index,
                                   s.count};
  if (kernel(&x, JITOPS__FLCE_K_COUNT) != NULL)
    JITOPS__TRY(jitops__flce_launch_count(kernel(&x, JITOPS__FLCE_K_COUNT), &count, f->stream));
  if (c->kind == JITOPS__FLCE_SHARD_BACKWARD) /* the combined lse, where the passes read it */
    JITOPS__TRY(convert(&x, JITOPS__FLCE_K_LSE, c->saved_lse, c->saved_lse_stride, s.lse_rows, 1,
                        c->bt, 1));
  JITOPS__TRY(run_passes(&x));
  JITOPS__TRY(finish_grads(&x));
  return finish_loss(&x);
}
