/* Row-major GEMMs on cuBLASLt: the product as cuBLASLt sees it (column-major), its
 * descriptors, and the call in the runtime's context; gemm_algo.c chooses the algorithm and
 * runs it. */
#include "ops/flce/gemm.h"

#include <string.h>

#include "ops/flce/gemm_algo.h"

void jitops__flce_gemm_to_column_major(const jitops__flce_gemm *g, jitops__flce_cm_gemm *out) {
  /* cuBLASLt's A is our B: stored [k, n] row-major reads as [n, k] column-major (op N);
   * stored [n, k] reads as [k, n] and needs op T. Its B is our A, by the same reasoning. Its
   * C is our C read as C^T: n rows of m. */
  *out = (jitops__flce_cm_gemm){.m = g->n,
                                .n = g->m,
                                .k = g->k,
                                .a = g->b,
                                .a_rows = g->trans_b ? g->k : g->n,
                                .a_cols = g->trans_b ? g->n : g->k,
                                .lda = g->ldb,
                                .trans_a = g->trans_b,
                                .b = g->a,
                                .b_rows = g->trans_a ? g->m : g->k,
                                .b_cols = g->trans_a ? g->k : g->m,
                                .ldb = g->lda,
                                .trans_b = g->trans_a,
                                .c = g->c,
                                .c_rows = g->n,
                                .c_cols = g->m,
                                .ldc = g->ldc};
}

static cudaDataType data_type(jitops__dtype dtype) {
  switch (dtype) {
  case JITOPS__DTYPE_F16:
    return CUDA_R_16F;
  case JITOPS__DTYPE_BF16:
    return CUDA_R_16BF;
  case JITOPS__DTYPE_F64:
    return CUDA_R_64F;
  default:
    return CUDA_R_32F;
  }
}

/* The descriptors of `m`, initialized in its own storage (cublasLt*Init: nothing is allocated
 * or destroyed, which the Create/Destroy pairs cost on every call). */
static jitops_status descs_init(const jitops__flce_cm_gemm *cm, const jitops__flce_gemm *g,
                                jitops__flce_matmul *m) {
  bool f64 = g->ab_dtype == JITOPS__DTYPE_F64;
  m->op = &m->op_storage;
  m->a_desc = &m->a_storage;
  m->b_desc = &m->b_storage;
  m->c_desc = &m->c_storage;
  cublasStatus_t s = cublasLtMatmulDescInit(m->op, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                            f64 ? CUDA_R_64F : CUDA_R_32F);
  cublasOperation_t ta = cm->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = cm->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulDescSetAttribute(m->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulDescSetAttribute(m->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatrixLayoutInit(m->a_desc, data_type(g->ab_dtype), (uint64_t)cm->a_rows,
                                 (uint64_t)cm->a_cols, cm->lda);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatrixLayoutInit(m->b_desc, data_type(g->ab_dtype), (uint64_t)cm->b_rows,
                                 (uint64_t)cm->b_cols, cm->ldb);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatrixLayoutInit(m->c_desc, data_type(g->c_dtype), (uint64_t)cm->c_rows,
                                 (uint64_t)cm->c_cols, cm->ldc);
  return s == CUBLAS_STATUS_SUCCESS ? JITOPS_SUCCESS
                                    : jitops__flce_blas_fail(s, "describing the matrices");
}

static jitops_status run_in_context(jitops_runtime_t *runtime, const jitops__flce_gemm *g,
                                    void *workspace, size_t workspace_bytes, void *stream) {
  jitops__flce_cm_gemm cm;
  jitops__flce_gemm_to_column_major(g, &cm);
  jitops__flce_matmul m;
  memset(&m, 0, sizeof m);
  JITOPS__TRY(descs_init(&cm, g, &m));
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  bool f64 = g->ab_dtype == JITOPS__DTYPE_F64;
  m.m = cm.m;
  m.n = cm.n;
  m.k = cm.k;
  m.lda = cm.lda;
  m.ldb = cm.ldb;
  m.ldc = cm.ldc;
  m.trans_a = cm.trans_a;
  m.trans_b = cm.trans_b;
  m.ab_dtype = g->ab_dtype;
  m.c_dtype = g->c_dtype;
  m.accumulate = g->accumulate;
  m.a = cm.a;
  m.b = cm.b;
  m.c = cm.c;
  m.alpha = f64 ? (const void *)&one_d : (const void *)&one_f;
  m.beta = g->accumulate ? m.alpha : f64 ? (const void *)&zero_d : (const void *)&zero_f;
  m.workspace = workspace;
  m.workspace_bytes = workspace_bytes;
  m.stream = stream;
  return jitops__flce_matmul_run(runtime, &m);
}

jitops_status jitops__flce_gemm_run(jitops_runtime_t *runtime, const jitops__flce_gemm *g,
                                    void *workspace, size_t workspace_bytes, void *stream) {
  if (g->m == 0 || g->n == 0)
    return JITOPS_SUCCESS;
  JITOPS__TRY(jitops__context_enter(runtime));
  jitops_status status = run_in_context(runtime, g, workspace, workspace_bytes, stream);
  jitops__context_leave(runtime);
  return status;
}
