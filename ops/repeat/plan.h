/* Planning a repeat launch: collapse the dimensions, choose the vector width, the grid and
 * the index width, and spell the kernels' name expressions. Pure host logic, no GPU: the
 * workspace query and the catalogue use it too. */
#ifndef JITOPS_OPS_REPEAT_PLAN_H
#define JITOPS_OPS_REPEAT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "ops/repeat/repeat_abi.h"
#include "runtime/op_support.h"

/* The source every repeat kernel comes from. */
#define JITOPS__REPEAT_SOURCE "jitops/repeat.cuh"

/* One (collapsed) dimension: the input's size, the repeat count, and both tensors' strides. */
typedef struct jitops__repeat_dim {
  int64_t in;
  int64_t rep;
  int64_t in_stride;  /* x (forward) or dx (backward) */
  int64_t out_stride; /* y (forward) or dy (backward) */
} jitops__repeat_dim;

typedef struct jitops__repeat_geom {
  int n; /* ≥ 1 */
  jitops__repeat_dim d[JITOPS__REPEAT_MAX_RANK];
} jitops__repeat_geom;

/* The forward: the output as rows × width (its collapsed innermost dimension), tc threads per
 * row, col_blocks × row_blocks blocks. */
typedef struct jitops__repeat_fwd_plan {
  jitops__repeat_geom g;
  int vec; /* elements per access */
  int64_t rows, width, tc, col_blocks, row_blocks;
  char name[128];
} jitops__repeat_fwd_plan;

/* For a valid call with a non-empty y. Fails with JITOPS_ERR_UNSUPPORTED when the output
 * needs more blocks than one grid has. */
jitops_status jitops__repeat_plan_forward(const char *fn, const DLTensor *x, const int64_t *repeats,
                                          int num_repeats, const DLTensor *y,
                                          jitops__repeat_fwd_plan *plan);

/* The backward: one thread per `vec` elements of dx (n of those) sums its `combos` copies,
 * in `splits` ranges of split_len copies (partial sums in the scratch when splits > 1, which
 * the finish kernel adds). */
typedef struct jitops__repeat_bwd_plan {
  jitops__repeat_geom g;
  int vec;
  int64_t n;
  int64_t combos;
  int64_t splits; /* 1: no partial sums */
  int64_t split_len;
  size_t scratch_bytes;
  char name[128], finish_name[128];
} jitops__repeat_bwd_plan;

/* For a valid call with a non-empty dx. */
void jitops__repeat_plan_backward(const jitops__device_props *props, const DLTensor *dy,
                                  const int64_t *repeats, int num_repeats, const DLTensor *dx,
                                  jitops__repeat_bwd_plan *plan);

/* Name expressions: the forward copies `elem`-byte elements as bits; the backward sums
 * `dtype` over `dims` dimensions, into partial sums when `split`. */
void jitops__repeat_fwd_name(size_t elem, int nb, int vec, int wide, char *buf, size_t size);
void jitops__repeat_bwd_name(jitops__dtype dtype, int dims, int vec, int split, int wide, char *buf,
                             size_t size);

#endif
