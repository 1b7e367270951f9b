/* Which template instances of flce.cuh a call launches, by name expression: the forward's
 * kernels by role, the backward's scale, and the name builders the prewarm catalogue shares. */
#ifndef JITOPS_OPS_FLCE_KERNELS_H
#define JITOPS_OPS_FLCE_KERNELS_H

#include <stdbool.h>

#include "ops/flce/args.h"
#include "ops/flce/plan.h"
#include "runtime/op_support.h"

/* Bytes of a name expression buffer. */
#define JITOPS__FLCE_NAME_SIZE 256

/* The kernels of a forward call, by what they do. */
typedef enum jitops__flce_role {
  JITOPS__FLCE_K_COUNT = 0,  /* count_valid: non-ignored rows, kept on the device */
  JITOPS__FLCE_K_LOSS,       /* convert (reduction none, linear) or reduce_loss: the loss */
  JITOPS__FLCE_K_LSE,        /* convert: lse (lse_local) out, or a shard backward's lse in */
  JITOPS__FLCE_K_PASS1,      /* rows over each chunk of the first pass, if it has one */
  JITOPS__FLCE_K_SLICE,      /* rows over each vocabulary group of the second pass */
  JITOPS__FLCE_K_COLSUM,     /* colsum: grad_bias's f32 (f64) accumulator */
  JITOPS__FLCE_K_GB_CONVERT, /* convert: that accumulator into grad_bias */
  JITOPS__FLCE_K_GW_CONVERT, /* convert or convert_flat: the f32 grad_weight accumulator */
  JITOPS__FLCE_K_GW_ZERO,    /* zero: grad_weight of an empty batch */
  JITOPS__FLCE_K_GB_ZERO,    /* zero: grad_bias of an empty batch */
  JITOPS__FLCE_K_ROLES
} jitops__flce_role;

/* The kernels a forward call launches: a name expression per role ("" where the call has
 * none), and the launch shape the names imply. */
typedef struct jitops__flce_kernel_plan {
  char name[JITOPS__FLCE_K_ROLES][JITOPS__FLCE_NAME_SIZE];
  int pass1_block, slice_block; /* threads of the row kernels */
  bool gw_convert_flat;         /* grad_weight is contiguous and aligned: convert_flat */
} jitops__flce_kernel_plan;

/* Fills `out` for a valid call and its plan. */
void jitops__flce_kernels_choose(const jitops__flce_call *call, const jitops__flce_plan *plan,
                                 jitops__flce_kernel_plan *out);

/* Whether the backward scales `grad` with scale_flat: contiguous and VECTOR_BYTES-aligned
 * (what frameworks allocate); else with scale. */
bool jitops__flce_scale_is_flat(const jitops__flce_grad *grad);

/* The backward's kernel for `grad` and a dy of dtype `dy`. */
void jitops__flce_scale_name(const jitops__flce_grad *grad, jitops__dtype dy, char *out,
                             size_t size);

/* ---- name builders --------------------------------------------------------------------------- */

/* One specialization of jitops::flce::rows. */
typedef struct jitops__flce_rows_kind {
  jitops__dtype t;
  jitops__dtype dy; /* f32 when there is no dy */
  int block;        /* threads: jitops__flce_rows_block(columns) */
  int mode;         /* JITOPS__FLCE_MODE_* */
  bool bias, softcap, smooth, zloss, mean;
} jitops__flce_rows_kind;

/* Threads per row: enough 16-byte loads in flight for long rows, few idle threads for short. */
int jitops__flce_rows_block(int64_t ncols);

void jitops__flce_rows_name(const jitops__flce_rows_kind *kind, char *out, size_t size);

/* jitops::flce::<kernel><a, b>, for the kernels of two type parameters. */
void jitops__flce_name2(const char *kernel, jitops__dtype a, jitops__dtype b, char *out,
                        size_t size);

#endif
