/* Row-major GEMMs through cuBLASLt, for fused linear cross-entropy (and any op that needs a
 * GEMM): C[m, n] = op(A)[m, k] @ op(B)[k, n] (+ C when accumulating), every matrix row-major
 * with a leading dimension. Each shape, dtype and alignment always runs the same algorithm
 * (determinism), chosen once per process (gemm_algo.h). */
#ifndef JITOPS_OPS_FLCE_GEMM_H
#define JITOPS_OPS_FLCE_GEMM_H

#include <stdbool.h>

#include "runtime/op_support.h"

typedef struct jitops__flce_gemm {
  int64_t m, n, k;
  /* op(A) is [m, k]: A is stored [m, k], or [k, m] when trans_a. */
  const void *a;
  int64_t lda;
  bool trans_a;
  /* op(B) is [k, n]: B is stored [k, n], or [n, k] when trans_b. */
  const void *b;
  int64_t ldb;
  bool trans_b;
  void *c; /* [m, n] */
  int64_t ldc;
  jitops__dtype ab_dtype; /* f16, bf16, f32 or f64 */
  jitops__dtype c_dtype;  /* ab_dtype, or f32 for 16-bit inputs */
  bool accumulate;        /* C += product (beta 1) instead of C = product */
} jitops__flce_gemm;

/* The same product as cuBLASLt sees it, column-major: D[m, n] = op(A) op(B), where each
 * stored matrix is rows x cols with leading dimension ld (rows before the op). */
typedef struct jitops__flce_cm_gemm {
  int64_t m, n, k;
  const void *a;
  int64_t a_rows, a_cols, lda;
  bool trans_a;
  const void *b;
  int64_t b_rows, b_cols, ldb;
  bool trans_b;
  void *c;
  int64_t c_rows, c_cols, ldc;
} jitops__flce_cm_gemm;

/* Row-major C = A B is column-major C^T = B^T A^T: the operands swap and every stored matrix
 * is read as its transpose. Pure; the CPU tests check it against a reference GEMM. */
void jitops__flce_gemm_to_column_major(const jitops__flce_gemm *g, jitops__flce_cm_gemm *out);

/* Runs `g` on `stream` with `workspace` (cuBLASLt's scratch, `workspace_bytes` long, 256-byte
 * aligned). Makes the runtime's context current around the cuBLASLt calls. Errors:
 * JITOPS_ERR_UNSUPPORTED (no algorithm for this problem), JITOPS_ERR_DRIVER (cuBLASLt
 * failed), JITOPS_ERR_NO_DEVICE, JITOPS_ERR_OUT_OF_MEMORY. */
jitops_status jitops__flce_gemm_run(jitops_runtime_t *runtime, const jitops__flce_gemm *g,
                                    void *workspace, size_t workspace_bytes, void *stream);

#endif
