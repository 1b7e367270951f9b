/* The template instances of flce.cuh that a call launches, and their name expressions. */
#include "ops/flce/kernels.h"

#include <stdio.h>
#include <string.h>

#include "ops/flce/flce_abi.h"

int jitops__flce_rows_block(int64_t ncols) {
  if (ncols >= 8192)
    return 512;
  if (ncols >= 1024)
    return 256;
  return 128;
}

static const char *boolean(bool b) {
  return b ? "true" : "false";
}

void jitops__flce_rows_name(const jitops__flce_rows_kind *k, char *out, size_t size) {
  snprintf(out, size, "jitops::flce::rows<%s, %s, %d, %d, %s, %s, %s, %s, %s>",
           jitops__dtype_cname(k->t), jitops__dtype_cname(k->dy), k->block, k->mode,
           boolean(k->bias), boolean(k->softcap), boolean(k->smooth), boolean(k->zloss),
           boolean(k->mean));
}

void jitops__flce_name2(const char *kernel, jitops__dtype a, jitops__dtype b, char *out,
                        size_t size) {
  snprintf(out, size, "jitops::flce::%s<%s, %s>", kernel, jitops__dtype_cname(a),
           jitops__dtype_cname(b));
}

static bool aligned_to(const void *ptr, size_t bytes) {
  return (uintptr_t)ptr % bytes == 0;
}

/* The row kernel over `ncols` columns in `mode`; its block size into *block. */
static void rows_name(const jitops__flce_call *c, int mode, int64_t ncols, char *out, int *block) {
  jitops__flce_rows_kind kind;
  memset(&kind, 0, sizeof kind);
  kind.t = c->t;
  kind.block = jitops__flce_rows_block(ncols);
  kind.mode = mode;
  kind.bias = c->bias != NULL;
  kind.softcap = c->opt.softcap > 0.0;
  kind.smooth = c->opt.label_smoothing > 0.0;
  kind.zloss = c->opt.z_loss_scale > 0.0;
  /* The statistics passes never read dy or the count (nor a shard's the z-loss): one instance
   * serves every reduction. */
  bool grads = mode == JITOPS__FLCE_MODE_FULL || mode == JITOPS__FLCE_MODE_SLICE;
  kind.dy = grads && c->dy != NULL ? c->dy_dtype : JITOPS__DTYPE_F32;
  kind.mean = grads && c->opt.reduction == JITOPS_FLCE_REDUCTION_MEAN;
  kind.zloss = kind.zloss && mode != JITOPS__FLCE_MODE_SHARD_STATS;
  jitops__flce_rows_name(&kind, out, JITOPS__FLCE_NAME_SIZE);
  *block = kind.block;
}

static void zero_name(jitops__dtype t, char *out) {
  snprintf(out, JITOPS__FLCE_NAME_SIZE, "jitops::flce::zero<%s>", jitops__dtype_cname(t));
}

/* The count of non-ignored rows (for the gradients' mean and the loss's), the per-row outputs
 * (the forward's loss and lse, a shard's linear and lse_local), or the combined lse into the
 * shard backward's scratch. */
static void choose_outputs(const jitops__flce_call *c, jitops__flce_kernel_plan *k) {
  bool mean = c->opt.reduction == JITOPS_FLCE_REDUCTION_MEAN;
  if (c->kind == JITOPS__FLCE_FORWARD || (c->kind == JITOPS__FLCE_SHARD_BACKWARD && mean))
    snprintf(k->name[JITOPS__FLCE_K_COUNT], JITOPS__FLCE_NAME_SIZE, "jitops::flce::count_valid");
  bool per_row = c->opt.reduction == JITOPS_FLCE_REDUCTION_NONE || c->kind != JITOPS__FLCE_FORWARD;
  if (c->kind != JITOPS__FLCE_SHARD_BACKWARD)
    jitops__flce_name2(per_row ? "convert" : "reduce_loss", c->acc, c->loss_dtype,
                       k->name[JITOPS__FLCE_K_LOSS], JITOPS__FLCE_NAME_SIZE);
  if (c->lse != NULL || c->kind == JITOPS__FLCE_SHARD_BACKWARD)
    jitops__flce_name2("convert", c->acc, c->acc, k->name[JITOPS__FLCE_K_LSE],
                       JITOPS__FLCE_NAME_SIZE);
}

/* The first pass's row kernel: the forward's statistics (and gradients), a shard's statistics,
 * or a shard's gradients from the combined lse (none when the first pass has nothing to do). */
static int pass1_mode(const jitops__flce_call *c, const jitops__flce_steps *s) {
  if (c->kind == JITOPS__FLCE_SHARD_STATS)
    return JITOPS__FLCE_MODE_SHARD_STATS;
  if (c->kind == JITOPS__FLCE_SHARD_BACKWARD)
    return s->pass1_grads ? JITOPS__FLCE_MODE_SLICE : -1;
  return s->pass1_grads ? JITOPS__FLCE_MODE_FULL : JITOPS__FLCE_MODE_STATS;
}

/* The passes over a non-empty batch: row kernels, grad_bias's sums, grad_weight's conversion. */
static void choose_passes(const jitops__flce_call *c, const jitops__flce_plan *plan,
                          jitops__flce_kernel_plan *k) {
  const jitops__flce_steps *s = &plan->steps;
  int mode = pass1_mode(c, s);
  if (mode >= 0)
    rows_name(c, mode, c->v, k->name[JITOPS__FLCE_K_PASS1], &k->pass1_block);
  if (s->pass2)
    rows_name(c, JITOPS__FLCE_MODE_SLICE, plan->group_cols, k->name[JITOPS__FLCE_K_SLICE],
              &k->slice_block);
  if (c->gb != NULL) {
    jitops__flce_name2("colsum", c->t, c->acc, k->name[JITOPS__FLCE_K_COLSUM],
                       JITOPS__FLCE_NAME_SIZE);
    jitops__flce_name2("convert", c->acc, c->gb_dtype, k->name[JITOPS__FLCE_K_GB_CONVERT],
                       JITOPS__FLCE_NAME_SIZE);
  }
  if (plan->grad_weight_acc) {
    k->gw_convert_flat = c->ldgw == c->h && aligned_to(c->gw, JITOPS__FLCE_CONVERT_FLAT_VEC *
                                                                  jitops__dtype_size(c->gw_dtype));
    jitops__flce_name2(k->gw_convert_flat ? "convert_flat" : "convert", JITOPS__DTYPE_F32,
                       c->gw_dtype, k->name[JITOPS__FLCE_K_GW_CONVERT], JITOPS__FLCE_NAME_SIZE);
  }
}

void jitops__flce_kernels_choose(const jitops__flce_call *c, const jitops__flce_plan *plan,
                                 jitops__flce_kernel_plan *k) {
  memset(k, 0, sizeof *k);
  choose_outputs(c, k);
  if (c->bt > 0) {
    choose_passes(c, plan, k);
    return;
  }
  /* Nothing to compute: the gradients are zeroed. */
  if (c->gw != NULL)
    zero_name(c->gw_dtype, k->name[JITOPS__FLCE_K_GW_ZERO]);
  if (c->gb != NULL)
    zero_name(c->gb_dtype, k->name[JITOPS__FLCE_K_GB_ZERO]);
}

bool jitops__flce_scale_is_flat(const jitops__flce_grad *g) {
  return (g->cols == 1 ? g->ld == 1 : g->ld == g->cols) &&
         aligned_to(g->data, JITOPS__FLCE_VECTOR_BYTES);
}

void jitops__flce_scale_name(const jitops__flce_grad *g, jitops__dtype dy, char *out, size_t size) {
  jitops__flce_name2(jitops__flce_scale_is_flat(g) ? "scale_flat" : "scale", g->dtype, dy, out,
                     size);
}
