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

#include "runtime/op_support.h"

/* One GEMM as cuBLASLt sees it (column-major: D[m, n] = op(A) op(B), D written over C):
 * its descriptors, what the algorithm choice depends on, its operands and scalars, and
 * where it runs. gemm.c fills it from a row-major request. */
typedef struct jitops__flce_matmul {
  cublasLtMatmulDesc_t op; /* each points at its storage below, initialized in place */
  cublasLtMatrixLayout_t a_desc, b_desc, c_desc;
  cublasLtMatmulDescOpaque_t op_storage;
  cublasLtMatrixLayoutOpaque_t a_storage, b_storage, c_storage;
  int64_t m, n, k, lda, ldb, ldc;
  bool trans_a, trans_b;
  jitops__dtype ab_dtype, c_dtype;
  bool accumulate; /* beta = 1: the product is added to C */
  const void *a, *b;
  void *c;
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
