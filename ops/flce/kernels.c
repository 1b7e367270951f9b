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
  /* The statistics pass never reads dy or the count: one instance serves every reduction. */
  bool grads = mode != JITOPS__FLCE_MODE_STATS;
  kind.dy = grads && c->dy != NULL ? c->dy_dtype : JITOPS__DTYPE_F32;
  kind.mean = grads && c->opt.reduction == JITOPS_FLCE_REDUCTION_MEAN;
  jitops__flce_rows_name(&kind, out, JITOPS__FLCE_NAME_SIZE);
  *block = kind.block;
}

static void zero_name(jitops__dtype t, char *out) {
  snprintf(out, JITOPS__FLCE_NAME_SIZE, "jitops::flce::zero<%s>", jitops__dtype_cname(t));
}

/* The outputs every call writes: the count of non-ignored rows, the loss, lse. */
static void choose_outputs(const jitops__flce_call *c, jitops__flce_kernel_plan *k) {
  snprintf(k->name[JITOPS__FLCE_K_COUNT], JITOPS__FLCE_NAME_SIZE, "jitops::flce::count_valid");
  jitops__flce_name2(c->opt.reduction == JITOPS_FLCE_REDUCTION_NONE ? "convert" : "reduce_loss",
                     c->acc, c->loss_dtype, k->name[JITOPS__FLCE_K_LOSS], JITOPS__FLCE_NAME_SIZE);
  if (c->lse != NULL)
    jitops__flce_name2("convert", c->acc, c->acc, k->name[JITOPS__FLCE_K_LSE],
                       JITOPS__FLCE_NAME_SIZE);
}

/* The passes over a non-empty batch: row kernels, grad_bias's sums, grad_weight's conversion. */
static void choose_passes(const jitops__flce_call *c, const jitops__flce_plan *plan,
                          jitops__flce_kernel_plan *k) {
  const jitops__flce_steps *s = &plan->steps;
  rows_name(c, s->pass1_grads ? JITOPS__FLCE_MODE_FULL : JITOPS__FLCE_MODE_STATS, c->v,
            k->name[JITOPS__FLCE_K_PASS1], &k->pass1_block);
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
