/* How fast could the fused linear cross-entropy's GEMMs run? For each GEMM shape the op
 * issues (bf16 in, f32 compute), time the first algorithms cuBLASLt's heuristic proposes and
 * print TFLOP/s per algorithm: the headroom between the heuristic's first choice (what the op
 * runs) and the best one. Shapes are row-major, as ops/flce/run.c states them.
 *
 *   bench_flce_gemm_probe [BT H V]      (default 8192 4096 128256) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop

enum { MAX_ALGOS = 8, WARMUP = 2, REPS = 7 };

typedef struct shape {
  const char *name;
  long long m, n, k; /* row-major C[m, n] = op(A)[m, k] op(B)[k, n] */
  int trans_a, trans_b;
  cudaDataType c_type;
  int accumulate;
} shape;

#define CHECK_CUDA(x)                                                                              \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                  \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define CHECK_BLAS(x)                                                                              \
  do {                                                                                             \
    cublasStatus_t s_ = (x);                                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cublasLtGetStatusString(s_));             \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

typedef struct problem {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;
  const void *pa, *pb;
  void *pc;
} problem;

/* Row-major C = A B is column-major C^T = B^T A^T: cuBLASLt's A is our B and vice versa. */
static void describe(const shape *s, void *x, void *y, void *out, problem *p) {
  CHECK_BLAS(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = s->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CHECK_BLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CHECK_BLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  long long lda = s->trans_b ? s->k : s->n; /* our B stored [n,k] (T) or [k,n] */
  long long ldb = s->trans_a ? s->m : s->k; /* our A stored [k,m] (T) or [m,k] */
  CHECK_BLAS(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, s->trans_b ? s->k : s->n,
                                        s->trans_b ? s->n : s->k, lda));
  CHECK_BLAS(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, s->trans_a ? s->m : s->k,
                                        s->trans_a ? s->k : s->m, ldb));
  CHECK_BLAS(cublasLtMatrixLayoutCreate(&p->c, s->c_type, s->n, s->m, s->n));
  p->pa = y;
  p->pb = x;
  p->pc = out;
}

static float time_algo(cublasLtHandle_t h, const problem *p, const cublasLtMatmulAlgo_t *algo,
                       float beta, void *ws, size_t ws_bytes) {
  const float alpha = 1.0f;
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  float t[REPS];
  for (int r = 0; r < WARMUP + REPS; ++r) {
    CHECK_CUDA(cudaEventRecord(e0, 0));
    CHECK_BLAS(cublasLtMatmul(h, p->op, &alpha, p->pa, p->a, p->pb, p->b, &beta, p->pc, p->c, p->pc,
                              p->c, algo, ws, ws_bytes, 0));
    CHECK_CUDA(cudaEventRecord(e1, 0));
    CHECK_CUDA(cudaEventSynchronize(e1));
    if (r >= WARMUP)
      CHECK_CUDA(cudaEventElapsedTime(&t[r - WARMUP], e0, e1));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  qsort(t, REPS, sizeof t[0], cmp_float);
  return t[REPS / 2];
}

static void probe(cublasLtHandle_t h, const shape *s, void *x, void *y, void *out, void *ws,
                  size_t ws_bytes) {
  problem p;
  describe(s, x, y, out, &p);
  cublasLtMatmulPreference_t pref;
  CHECK_BLAS(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wsb = ws_bytes;
  uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &wsb, sizeof wsb));
  CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                  &schemes, sizeof schemes));
  cublasLtMatmulHeuristicResult_t res[MAX_ALGOS];
  int found = 0;
  CHECK_BLAS(
      cublasLtMatmulAlgoGetHeuristic(h, p.op, p.a, p.b, p.c, p.c, pref, MAX_ALGOS, res, &found));
  double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
  printf("| %s | %lld x %lld x %lld |", s->name, s->m, s->n, s->k);
  float best = 1e30f, first = 0;
  for (int i = 0; i < found; ++i) {
    float ms = time_algo(h, &p, &res[i].algo, s->accumulate ? 1.0f : 0.0f, ws, ws_bytes);
    if (i == 0)
      first = ms;
    if (ms < best)
      best = ms;
    printf(" %.0f", flop / ms / 1e9);
  }
  printf(" | first %.3f ms (%.0f TFLOP/s), best %.3f ms (%.0f TFLOP/s) |\n", first,
         flop / first / 1e9, best, flop / best / 1e9);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(p.a);
  cublasLtMatrixLayoutDestroy(p.b);
  cublasLtMatrixLayoutDestroy(p.c);
  cublasLtMatmulDescDestroy(p.op);
}

static void *device_random(size_t n_bf16) {
  unsigned short *host = malloc(n_bf16 * 2);
  unsigned state = 12345;
  for (size_t i = 0; i < n_bf16; ++i) {
    state = state * 1664525u + 1013904223u;
    float f = ((float)(state >> 8) / 16777216.0f - 0.5f) * 0.1f;
    unsigned bits;
    memcpy(&bits, &f, 4);
    host[i] = (unsigned short)(bits >> 16);
  }
  void *d;
  CHECK_CUDA(cudaMalloc(&d, n_bf16 * 2));
  CHECK_CUDA(cudaMemcpy(d, host, n_bf16 * 2, cudaMemcpyHostToDevice));
  free(host);
  return d;
}

int main(int argc, char **argv) {
  long long bt = argc > 3 ? atoll(argv[1]) : 8192, hd = argc > 3 ? atoll(argv[2]) : 4096,
            v = argc > 3 ? atoll(argv[3]) : 128256;
  long long group = 16384; /* the vocab algorithm's column group at the default budget */
  shape shapes[] = {
      {"logits, 1024-row chunk", 1024, v, hd, 0, 1, CUDA_R_16BF, 0},
      {"logits, 2048-row chunk", 2048, v, hd, 0, 1, CUDA_R_16BF, 0},
      {"logits, all rows", bt, v, hd, 0, 1, CUDA_R_16BF, 0},
      {"grad_input, 1024-row chunk", 1024, hd, v, 0, 0, CUDA_R_16BF, 0},
      {"grad_input, all rows", bt, hd, v, 0, 0, CUDA_R_16BF, 0},
      {"logits, vocab group", bt, group, hd, 0, 1, CUDA_R_16BF, 0},
      {"grad_weight, vocab group", group, hd, bt, 1, 0, CUDA_R_16BF, 0},
      {"grad_weight, all rows", v, hd, bt, 1, 0, CUDA_R_16BF, 0},
      {"grad_weight += f32, 4096 rows", v, hd, 4096, 1, 0, CUDA_R_32F, 1},
  };
  size_t big = (size_t)bt * (size_t)v; /* the largest bf16 operand or output */
  size_t wbytes = (size_t)v * (size_t)hd;
  void *x = device_random((size_t)bt * (size_t)hd);
  void *w = device_random(wbytes);
  void *logits = device_random(big);
  void *out;
  CHECK_CUDA(cudaMalloc(&out, (big > wbytes * 2 ? big : wbytes * 2) * 2));
  size_t ws_bytes = (size_t)32 << 20;
  void *ws;
  CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
  cublasLtHandle_t h;
  CHECK_BLAS(cublasLtCreate(&h));
  struct cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  printf("%s, bf16 GEMMs of BT %lld, H %lld, V %lld; TFLOP/s of the heuristic's algorithms in "
         "its order\n\n| GEMM | m x n x k | TFLOP/s per algorithm | summary |\n|---|---|---|---|\n",
         prop.name, bt, hd, v);
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
    const shape *s = &shapes[i];
    /* Operands: A is x, or the logits for grad_input / grad_weight; B is w, or x. */
    int a_is_logits = (s->k == v) || s->trans_a;
    void *a = a_is_logits ? logits : x;
    void *b = s->trans_b ? w : (s->trans_a ? x : w);
    probe(h, s, a, b, out, ws, ws_bytes);
  }
  cublasLtDestroy(h);
  return 0;
}
