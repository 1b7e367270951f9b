/* The template instances of templates/flce.cuh that a call (or the prewarm catalogue) needs,
 * by name expression. */
#ifndef JITOPS_OPS_FLCE_KERNELS_H
#define JITOPS_OPS_FLCE_KERNELS_H

#include <stdbool.h>

#include "ops/flce/flce_abi.h"
#include "runtime/op_support.h"

#define JITOPS__FLCE_SOURCE "jitops/flce.cuh"

/* One specialization of jitops::flce::rows. */
typedef struct jitops__flce_rows_kind {
  jitops__dtype t;
  jitops__dtype dy; /* f32 when there is no dy */
  int block;        /* threads: jitops__flce_rows_block(columns) */
  int mode;
  bool bias, softcap, smooth, zloss, mean;
} jitops__flce_rows_kind;

/* Threads per row: enough 16-byte loads in flight for long rows, few idle threads for short. */
int jitops__flce_rows_block(int64_t ncols);

/* Name expressions; `out` holds at least 256 bytes. */
void jitops__flce_rows_name(const jitops__flce_rows_kind *kind, char *out, size_t size);
void jitops__flce_name2(const char *kernel, jitops__dtype a, jitops__dtype b, char *out,
                        size_t size);

/* jitops_kernel_get on the built-in flce source. */
jitops_status jitops__flce_kernel(jitops_runtime_t *runtime, const char *name,
                                  jitops_kernel_t **out);

#endif
