/* Running a described cuBLASLt GEMM with the algorithm chosen for it. This module owns the
 * runtime's JITOPS__SLOT_CUBLASLT state: one cuBLASLt handle per runtime and a thread-safe
 * cache of the algorithm chosen for each shape, dtype and alignment, so that a shape always
 * runs the same algorithm (determinism) and is chosen once per process (gemm_algo.c says how).
 * gemm.c describes the product; this file runs it. */
#ifndef JITOPS_OPS_FLCE_GEMM_ALGO_H
#define JITOPS_OPS_FLCE_GEMM_ALGO_H

/* The toolkit's header declares a function with () and the build warns on that. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop

#include "ops/flce/gemm.h"
#include "runtime/op_support.h"

/* One GEMM as cuBLASLt sees it: its descriptors, operands and scalars, and where it runs. */
typedef struct jitops__flce_matmul {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c; /* C is also D: the product is written in place */
  const jitops__flce_gemm *g;     /* the row-major request (dtypes, accumulate) */
  const jitops__flce_cm_gemm *cm; /* the same product, column-major (shape, operands) */
  const void *alpha, *beta;
  void *workspace;
  size_t workspace_bytes;
  void *stream;
} jitops__flce_matmul;

/* Runs `m` with the algorithm cached for its shape, choosing one when the shape is new. The
 * runtime's context must be current. Errors: JITOPS_ERR_UNSUPPORTED (no algorithm),
 * JITOPS_ERR_DRIVER, JITOPS_ERR_OUT_OF_MEMORY. */
jitops_status jitops__flce_matmul_run(jitops_runtime_t *runtime, const jitops__flce_matmul *m);

/* A failed cuBLASLt call as a status, naming `what`. */
jitops_status jitops__flce_blas_fail(cublasStatus_t status, const char *what);

#endif
